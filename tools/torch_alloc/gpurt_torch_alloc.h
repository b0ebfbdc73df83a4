/* gpurt_torch_alloc.h — the functions libgpurt_torch_alloc.so exports.
 * gpurt_alloc / gpurt_free have exactly the signatures PyTorch's
 * CUDAPluggableAllocator expects (cudaStream_t passed as void *). All are
 * thread-safe. */
#ifndef GPURT_TORCH_ALLOC_H
#define GPURT_TORCH_ALLOC_H

#include <stddef.h>
#include <sys/types.h>

#define GPURT_TORCH_EXPORT __attribute__((visibility("default")))

/* size bytes on device for use on stream; NULL on failure (reason on stderr) or for size <= 0. */
GPURT_TORCH_EXPORT void *gpurt_alloc(ssize_t size, int device, void *stream);
/* Frees a pointer from gpurt_alloc (NULL is ignored; bad pointers are reported on stderr). */
GPURT_TORCH_EXPORT void gpurt_free(void *ptr, ssize_t size, int device, void *stream);
/* Returns cached segments to the driver; 0 = GRT_OK, else a grt_status. */
GPURT_TORCH_EXPORT int gpurt_empty_cache(int device);
GPURT_TORCH_EXPORT int gpurt_reset_peak_stats(int device);
/* The counters as one JSON object; returns the length, or -1 before the first allocation. */
GPURT_TORCH_EXPORT int gpurt_stats_json(int device, char *buf, size_t buf_size);

#endif
