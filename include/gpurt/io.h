/* gpurt/io.h — weights from disk to device: a strict safetensors reader and
 * the load path (io_uring or pread into pinned staging buffers, O_DIRECT
 * where the file system allows, copies to the device on a copy stream that
 * overlap the reads), with the loaders people use beside it for comparison
 * (mmap + copy, per-tensor read into malloc'd memory). docs/LOADING.md.
 *
 * The reader follows the safetensors project's own rules: an 8-byte
 * little-endian header length N (at most 100,000,000), N bytes of UTF-8 JSON
 * starting with '{', one entry per tensor {"dtype", "shape", "data_offsets":
 * [begin, end)} relative to the byte buffer after the header, and an
 * optional "__metadata__" object of strings. Sorted by offsets, the tensors
 * tile the buffer exactly: the first begins at 0, each begins where the one
 * before ended, the last ends at the end of the file, and each one's bytes are
 * its shape's product times its dtype's size (sub-byte dtypes: bits, a whole
 * number of bytes). Every violation is a GRT_ERR_PARSE naming the tensor and
 * the file's byte offset.
 *
 * The load path lives in libgpurt_io (it needs jansson and liburing); the
 * core libgpurt stays dependency-free.
 *
 * Thread safety: a parsed header is immutable; a load runs on the calling
 * thread (with the exec's copy engine) and shares nothing with other loads.
 */
#ifndef GPURT_IO_H
#define GPURT_IO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gpurt/alloc.h"
#include "gpurt/cuda.h"
#include "gpurt/exec.h"

#ifdef __cplusplus
extern "C" {
#endif

#define GRT_SAFETENSORS_MAX_HEADER 100000000u

typedef enum grt_dtype {
  GRT_DTYPE_BOOL = 0, GRT_DTYPE_U8, GRT_DTYPE_I8, GRT_DTYPE_F8_E5M2, GRT_DTYPE_F8_E4M3, GRT_DTYPE_F8_E8M0,
  GRT_DTYPE_I16, GRT_DTYPE_U16, GRT_DTYPE_F16, GRT_DTYPE_BF16, GRT_DTYPE_I32, GRT_DTYPE_U32, GRT_DTYPE_F32,
  GRT_DTYPE_F64, GRT_DTYPE_I64, GRT_DTYPE_U64, GRT_DTYPE_C64, GRT_DTYPE_F4, GRT_DTYPE_F6_E2M3, GRT_DTYPE_F6_E3M2,
  GRT_DTYPE_COUNT
} grt_dtype;

/* The dtype's name in files ("F32"), its size in bits; parse: GRT_ERR_NOT_FOUND for an unknown name. */
GRT_API const char *grt_dtype_name(grt_dtype d);
GRT_API unsigned grt_dtype_bits(grt_dtype d);
GRT_API GRT_MUST_CHECK grt_status grt_dtype_parse(const char *name, grt_dtype *out);

#define GRT_SAFETENSORS_MAX_DIMS 16

typedef struct grt_st_tensor {
  const char *name;      /* owned by the header */
  grt_dtype dtype;
  unsigned ndim;
  uint64_t shape[GRT_SAFETENSORS_MAX_DIMS];
  uint64_t begin, end;   /* data_offsets, relative to the byte buffer */
  uint64_t file_offset;  /* 8 + N + begin */
} grt_st_tensor;

/* Where and why a file was refused or a load failed. */
typedef struct grt_io_error {
  char tensor[128];      /* the tensor it concerns ("" if none) */
  uint64_t offset;       /* the file's byte offset it concerns */
  bool has_offset;
  char reason[256];
} grt_io_error;

/* "FILE: byte N: tensor 'x': reason". */
GRT_API GRT_MUST_CHECK grt_status grt_io_error_format(const grt_io_error *err, const char *file, char *buf,
                                                      size_t buf_size);

typedef struct grt_safetensors grt_safetensors;

/* Parses a header from memory: `data` holds the file's first `len` bytes
 * (at least 8 + N of them: GRT_ERR_PARSE "the file ends inside its header"
 * otherwise) of a file of file_size bytes. Tensors come sorted by offset. */
GRT_API GRT_MUST_CHECK grt_status grt_safetensors_parse(const void *data, size_t len, uint64_t file_size,
                                                        grt_safetensors **out, grt_io_error *err);
/* Reads and parses the header of a file. */
GRT_API GRT_MUST_CHECK grt_status grt_safetensors_open(const char *path, grt_safetensors **out, grt_io_error *err);
GRT_API void grt_safetensors_free(grt_safetensors *st);
GRT_API size_t grt_safetensors_count(const grt_safetensors *st);
GRT_API const grt_st_tensor *grt_safetensors_tensor(const grt_safetensors *st, size_t i);
/* The byte buffer: where it starts in the file (8 + N) and its length. */
GRT_API uint64_t grt_safetensors_data_offset(const grt_safetensors *st);
GRT_API uint64_t grt_safetensors_data_size(const grt_safetensors *st);
/* __metadata__ entries (key, value), i < count. */
GRT_API size_t grt_safetensors_metadata_count(const grt_safetensors *st);
GRT_API GRT_MUST_CHECK grt_status grt_safetensors_metadata(const grt_safetensors *st, size_t i, const char **key,
                                                           const char **value);

/* ---- the load path ---- */

typedef enum grt_load_method {
  GRT_LOAD_IOURING = 0, /* io_uring reads into pinned staging buffers, copies overlapping the next reads */
  GRT_LOAD_PREAD,       /* the same pipeline with pread */
  GRT_LOAD_MMAP,        /* the file mapped, each chunk copied to the device from the mapping */
  GRT_LOAD_NAIVE,       /* per tensor: read into malloc'd memory, copy, wait, free */
  GRT_LOAD_METHOD_COUNT
} grt_load_method;

GRT_API const char *grt_load_method_name(grt_load_method m);
GRT_API GRT_MUST_CHECK grt_status grt_load_method_parse(const char *name, grt_load_method *out);

typedef void (*grt_load_progress_fn)(void *ctx, uint64_t bytes_done, uint64_t bytes_total);

typedef struct grt_load_config {
  grt_exec *exec;            /* the simulated device: its device receives the tensors, a stream of it carries them */
  grt_cuda_stream *cuda_stream; /* or a GPU: copies on this stream of cuda_device (then exec is not used) */
  grt_device *cuda_device;   /* the CUDA backend device cuda_stream belongs to */
  grt_allocator *alloc;      /* required: an allocator on that device (the caching one, for PyTorch's) */
  grt_load_method method;
  bool direct;               /* O_DIRECT where the method and the file system allow (else buffered, said) */
  bool drop_cache;           /* evict the file's pages first (posix_fadvise DONTNEED): a cold read */
  bool blob;                 /* one device allocation for every tensor (else one per tensor) */
  uint64_t chunk_bytes;      /* staging buffer size (default 8 MiB; rounded up to the O_DIRECT alignment) */
  unsigned buffers;          /* staging buffers (default 4, 1..64) */
  unsigned queue_depth;      /* io_uring reads in flight (default: buffers) */
  bool register_buffers;     /* io_uring fixed buffers (default true; falls back when refused) */
  grt_load_progress_fn progress; /* may be NULL; called after each chunk */
  void *progress_ctx;
  bool read_only;            /* the reads alone, no copies (the device bytes stay unset): what the file
                                system delivers to this reader, a load's bound */
  uint64_t fail_read_at;     /* tests: the Nth read fails with EIO (1 = the first; 0 = never) */
} grt_load_config;

GRT_API void grt_load_config_default(grt_load_config *cfg);

typedef struct grt_load_stats {
  uint64_t bytes;            /* tensor bytes loaded */
  uint64_t reads;            /* read calls or io_uring reads */
  double seconds;            /* wall time of the load (allocation to the last copy's end) */
  double cpu_seconds;        /* this process's CPU time over it (user + system, all threads) */
  uint64_t peak_host_bytes;  /* the most host memory the loader held at once (staging, malloc'd tensors,
                                mapped pages are the page cache's: counted 0) */
  double copies_per_byte;    /* CPU passes over each byte: page cache -> user (buffered reads), user -> device */
  bool direct;               /* O_DIRECT was used */
  bool fixed_buffers;        /* io_uring registered buffers were used */
  char io_note[200];         /* why O_DIRECT or fixed buffers were not used, when asked for */
  uint64_t device_allocs;    /* allocations made on the device */
} grt_load_stats;

typedef struct grt_loaded grt_loaded;

/* Loads every tensor of a safetensors file into device memory. On failure
 * nothing stays allocated (device memory, host buffers, the ring) and err
 * names the tensor being loaded and the file offset. */
GRT_API GRT_MUST_CHECK grt_status grt_load_safetensors(const char *path, const grt_load_config *cfg,
                                                       grt_loaded **out, grt_io_error *err);
/* Frees the device memory and the handle (NULL: no-op). */
GRT_API GRT_MUST_CHECK grt_status grt_loaded_free(grt_loaded *l);
GRT_API const grt_safetensors *grt_loaded_header(const grt_loaded *l);
GRT_API GRT_MUST_CHECK grt_status grt_loaded_stats(const grt_loaded *l, grt_load_stats *out);
/* Tensor i's device address. */
GRT_API GRT_MUST_CHECK grt_status grt_loaded_tensor(const grt_loaded *l, size_t i, grt_devptr *ptr);
/* The checksum (grt_io_checksum) of tensor i's bytes as they are on the device
 * (read back through the CUDA stream on a GPU: it must still exist). */
GRT_API GRT_MUST_CHECK grt_status grt_loaded_device_checksum(grt_loaded *l, size_t i, uint64_t *out);

/* The checksum both sides use: 64-bit, over 8-byte little-endian words then the tail. */
GRT_API uint64_t grt_io_checksum(const void *data, size_t len, uint64_t seed);
/* The checksum of a file range, read with pread. */
GRT_API GRT_MUST_CHECK grt_status grt_io_file_checksum(const char *path, uint64_t offset, uint64_t len,
                                                       uint64_t *out);

#ifdef __cplusplus
}
#endif
#endif /* GPURT_IO_H */
