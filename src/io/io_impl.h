/* io_impl.h — internals of the io layer (gpurt/io.h): the parsed header
 * (safetensors.c), a load in progress (load.c) and the readers that feed it
 * (load_pipeline.c: io_uring and pread through staging buffers;
 * load_direct.c: mmap and the naive per-tensor read). */
#ifndef GRT_IO_IMPL_H
#define GRT_IO_IMPL_H

#include <stdbool.h>
#include <stdint.h>

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
  size_t n_allocs;
  grt_load_stats stats;
};

/* A load in progress: what the readers need. */
typedef struct grt__load {
  const grt_load_config *cfg;
  grt_loaded *l;
  const char *path;
  int fd;                 /* buffered, or O_DIRECT when direct */
  uint64_t align;         /* O_DIRECT offset and length alignment (1 when buffered) */
  uint64_t mem_align;     /* O_DIRECT buffer alignment */
  grt_stream *copy;       /* the copy stream */
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
