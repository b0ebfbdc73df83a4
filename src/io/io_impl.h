/* io_impl.h — internals of the io layer (gpurt/io.h): the parsed header
 * (safetensors.c), a load in progress (load.c) and the readers that feed it
 * (load_pipeline.c: io_uring and pread through staging buffers;
 * load_direct.c: mmap and the naive per-tensor read). */
#ifndef GRT_IO_IMPL_H
#define GRT_IO_IMPL_H

#include <stdbool.h>
#include <stdint.h>

#include "gpurt/cuda.h"
#include "gpurt/io.h"

struct grt_safetensors {
  grt_st_tensor *tensors; /* sorted by offset */
  size_t n;
  struct {
    char *key, *value;
  } *meta;
  size_t n_meta;
  uint64_t data_offset, data_size;
};

/* Fills err (may be NULL) and returns st. */
grt_status grt__io_fail(grt_io_error *err, grt_status st, const char *tensor, bool has_offset, uint64_t offset,
                        const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 6, 7)))
#endif
    ;

struct grt_loaded {
  grt_safetensors *st;
  grt_allocator *alloc;
  grt_device *dev;
  grt_devptr *ptrs;    /* per tensor (0 for a zero-size tensor) */
  grt_devptr *allocs;  /* what was allocated: one blob or one per tensor */
  grt_cuda_stream *cuda; /* a GPU load: checksums read back through it (borrowed) */
  size_t n_allocs;
  grt_load_stats stats;
};

/* Where the copies go (copier.c): the exec's stream, or a CUDA stream. */
typedef struct grt__copier {
  grt_stream *stream;           /* exec */
  grt_event **events;           /* per staging slot */
  grt_cuda_stream *cuda;        /* CUDA */
  grt_device *cuda_dev;
  grt_cuda_event **cuda_events; /* per staging slot */
  unsigned slots;
} grt__copier;

grt_status grt__copier_open(grt__copier *c, const grt_load_config *cfg, unsigned slots);
grt_status grt__copier_h2d(grt__copier *c, grt_devptr dst, const void *src, uint64_t n);
/* Records slot's event after the copies issued so far; wait: the host waits for it. */
grt_status grt__copier_mark(grt__copier *c, unsigned slot);
grt_status grt__copier_wait(grt__copier *c, unsigned slot);
/* Every copy issued has ended. */
grt_status grt__copier_drain(grt__copier *c);
/* Drains, then frees the stream and events; the first failure. */
grt_status grt__copier_close(grt__copier *c);
/* Staging memory: page-locked (the driver's for CUDA; mlock otherwise, noted when refused). */
grt_status grt__copier_host_alloc(grt__copier *c, uint64_t bytes, uint64_t align, void **out, char *note,
                                  size_t note_size);
void grt__copier_host_free(grt__copier *c, void *p, uint64_t bytes);

/* A load in progress: what the readers need. */
typedef struct grt__load {
  const grt_load_config *cfg;
  grt_loaded *l;
  const char *path;
  int fd;                 /* buffered, or O_DIRECT when direct */
  uint64_t align;         /* O_DIRECT offset and length alignment (1 when buffered) */
  uint64_t mem_align;     /* O_DIRECT buffer alignment */
  grt__copier copy;       /* where the copies go */
  uint64_t reads;         /* reads issued (fault injection counts them) */
  uint64_t host_bytes, peak_host_bytes;
  uint64_t done_bytes;
  grt_io_error *err;
} grt__load;

/* Issues the copies of file bytes [file_off, file_off + len), held at src,
 * to the tensors they belong to. */
grt_status grt__load_copy(grt__load *ld, uint64_t file_off, const unsigned char *src, uint64_t len);
/* The tensor holding a file offset (for messages), or NULL. */
const char *grt__load_tensor_at(const grt__load *ld, uint64_t file_off);
/* A read of the file, counting and injecting faults: bytes read or -errno. */
int64_t grt__load_pread(grt__load *ld, void *buf, uint64_t len, uint64_t off);
bool grt__load_inject(grt__load *ld);
void grt__load_host(grt__load *ld, int64_t delta);
void grt__load_progress(grt__load *ld, uint64_t bytes);

grt_status grt__load_pipeline(grt__load *ld, bool uring);
grt_status grt__load_mmap(grt__load *ld);
grt_status grt__load_naive(grt__load *ld);

#endif
