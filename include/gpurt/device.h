/* gpurt/device.h — the "driver": device memory as cudaMalloc/cudaFree see it.
 *
 * A device has a fixed capacity and one address space. Each malloc places a
 * segment first-fit (lowest address that fits); each free returns it and the
 * hole coalesces with its neighbours. Nothing ever moves: a live segment pins
 * its addresses, so fragmentation of this space is permanent — the reason the
 * caching allocator exists. Every free counts as a device-wide synchronization,
 * as cudaFree is one.
 *
 * That is the contiguous model (GRT_DEVICE_MODEL_CONTIGUOUS, the default). The
 * paged model (GRT_DEVICE_MODEL_PAGED) is the other reading of cudaMalloc: a
 * segment is a virtual range backed by 2 MiB physical pages, so a malloc needs
 * free pages, not a free contiguous range. Which one a GPU follows is decided
 * by a conformance case (docs/CONFORMANCE.md, "Device model").
 *
 * Backends sit behind one internal contract (src/device/device_impl.h): the
 * simulated device here is the default; a real CUDA device (gpurt/cuda.h)
 * plugs in behind the same functions. On CUDA, malloc/free are cuMemAlloc /
 * cuMemFree, addresses are real device pointers, capacity is the device's
 * total memory, malloc_at and host_ptr are GRT_ERR_UNSUPPORTED, and
 * mem_get_info asks the driver (other users of the GPU count).
 *
 * Thread safety: a grt_device is safe to call from several threads; each call
 * takes the device's own mutex briefly.
 */
#ifndef GPURT_DEVICE_H
#define GPURT_DEVICE_H

#include "gpurt/base.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct grt_device grt_device;

/* How the simulated device finds room for a segment (docs/CONFORMANCE.md).
 * CONTIGUOUS: capacity is one address range; a segment takes a contiguous
 * part of it (first fit), so a malloc fails when the free bytes lie only in
 * smaller holes. PAGED: capacity is counted in 2 MiB pages (floor(capacity /
 * 2 MiB) of them); a malloc of size S takes ceil(S / 2 MiB) pages and succeeds
 * whenever that many are free, wherever the holes are. Its segment gets a
 * virtual range, first fit in an address space of 8 x capacity (at most 16 TiB)
 * from base_address, so addresses stay distinct and stable and malloc_at /
 * set_next_address work as in the contiguous model while that range is free.
 * In the paged model bytes_in_use counts the pages held (a 1 MiB segment holds
 * one 2 MiB page: 2 MiB in use), so free_bytes = capacity - pages x 2 MiB,
 * largest_hole = free_bytes rounded down to whole pages (any free pages serve
 * any request) and holes = 1 while a page is free, else 0; segment sizes stay
 * the sizes asked for (rounded up to the alignment). It needs a capacity of at
 * least 2 MiB and has no host backing (GRT_ERR_UNSUPPORTED). Reserve/map/unmap
 * work in both models (mapped pages count against the capacity). */
typedef enum grt_device_model {
  GRT_DEVICE_MODEL_CONTIGUOUS = 0,
  GRT_DEVICE_MODEL_PAGED = 1,
} grt_device_model;

typedef struct grt_device_config {
  uint64_t capacity;        /* bytes of device memory (> 0) */
  grt_devptr base_address;  /* address of the first byte; never 0 (default 0x7f0000000000) */
  uint64_t alignment;       /* segment placement alignment, a power of two (default 512) */
  int host_backing;         /* nonzero: bytes are backed by host memory (grt_device_host_ptr) */
  uint64_t fail_malloc_at;  /* fault injection: the Nth malloc from now fails (1 = next); 0 = never */
  grt_device_model model;   /* contiguous (default) or paged; the CUDA backend has no config and ignores it */
} grt_device_config;

typedef struct grt_device_stats {
  uint64_t capacity;          /* bytes */
  uint64_t bytes_in_use;      /* bytes in live segments (paged model: bytes of the pages they hold) */
  uint64_t peak_bytes_in_use; /* high-water mark of bytes_in_use */
  uint64_t free_bytes;        /* min(capacity, memory_limit) - bytes_in_use, 0 when use is above the limit */
  uint64_t largest_hole;      /* largest contiguous free range, bytes (never above what the limit leaves) */
  uint64_t holes;             /* number of free ranges */
  uint64_t segments;          /* live segments */
  uint64_t malloc_calls;      /* successful mallocs */
  uint64_t failed_mallocs;    /* mallocs that returned GRT_ERR_OOM (or an injected fault) */
  uint64_t free_calls;        /* successful frees */
  uint64_t syncs;             /* device-wide synchronizations (one per free or unmap) */
  uint64_t map_calls;         /* successful grt_device_map calls */
  uint64_t unmap_calls;       /* successful grt_device_unmap calls */
  uint64_t mapped_bytes;      /* physical bytes mapped into reservations (part of bytes_in_use) */
  uint64_t reserved_va_bytes; /* virtual address space reserved (no physical memory) */
  uint64_t memory_limit;      /* grt_device_set_memory_limit's bytes; 0 = none */
} grt_device_stats;

/* Fills cfg with defaults: 1 GiB capacity, base 0x7f0000000000, 512-byte
 * alignment, contiguous model. */
GRT_API void grt_device_config_default(grt_device_config *cfg);

/* "contiguous" or "paged"; "unknown" for any other value (never NULL). */
GRT_API const char *grt_device_model_name(grt_device_model model);

/* The model named name ("contiguous" or "paged", exact). GRT_ERR_INVALID_ARG
 * (*out unchanged) for another name, a NULL name or a NULL out. */
GRT_API GRT_MUST_CHECK grt_status grt_device_model_parse(const char *name, grt_device_model *out);

/* Creates a simulated device. On failure *out is NULL and nothing leaks.
 * GRT_ERR_INVALID_ARG for a bad config (also an unknown model, or a paged
 * device under 2 MiB); GRT_ERR_UNSUPPORTED for a paged device with host_backing. */
GRT_API GRT_MUST_CHECK grt_status grt_device_create(const grt_device_config *cfg, grt_device **out);

/* Destroys the device. GRT_ERR_BUSY (nothing changed) while segments are live.
 * grt_device_destroy(NULL) is a no-op returning GRT_OK. */
GRT_API GRT_MUST_CHECK grt_status grt_device_destroy(grt_device *dev);

/* First-fit allocation of size bytes (rounded up to the alignment).
 * GRT_ERR_SIZE for 0 or more than the capacity; GRT_ERR_OOM when no hole fits
 * (paged model: when too few pages are free) or over the memory limit. */
GRT_API GRT_MUST_CHECK grt_status grt_device_malloc(grt_device *dev, uint64_t size, grt_devptr *out);

/* Places a segment at exactly addr (a replay device re-creating recorded
 * segments). GRT_ERR_OOM when [addr, addr+size) is not wholly free. */
GRT_API GRT_MUST_CHECK grt_status grt_device_malloc_at(grt_device *dev, grt_devptr addr, uint64_t size);

/* Placement hint for the next successful malloc only (a refused malloc keeps
 * it): try exactly addr first, fall back to first fit when that range is not
 * free. Replay devices use it to hand out
 * recorded segment addresses. 0 clears the hint. */
GRT_API GRT_MUST_CHECK grt_status grt_device_set_next_address(grt_device *dev, grt_devptr addr);

/* Frees a segment (one device-wide sync). GRT_ERR_DOUBLE_FREE for an address
 * that was freed, GRT_ERR_INTERIOR_POINTER inside a live segment,
 * GRT_ERR_UNKNOWN_POINTER otherwise; the device is unchanged on error. */
GRT_API GRT_MUST_CHECK grt_status grt_device_free(grt_device *dev, grt_devptr ptr);

/* Size of the live segment starting at ptr. */
GRT_API GRT_MUST_CHECK grt_status grt_device_segment_size(grt_device *dev, grt_devptr ptr, uint64_t *size);

GRT_API GRT_MUST_CHECK grt_status grt_device_get_stats(grt_device *dev, grt_device_stats *out);

/* cudaMemGetInfo: free and total bytes. Under a memory limit free is at most
 * limit - bytes_in_use (0 when use is above it); total stays the capacity. */
GRT_API GRT_MUST_CHECK grt_status grt_device_mem_get_info(grt_device *dev, uint64_t *free_bytes, uint64_t *total);

/* Caps the device below its capacity, on every backend: a malloc, malloc_at
 * or map that would take bytes_in_use (pages in the paged model) above
 * limit_bytes fails with GRT_ERR_OOM, counts in failed_mallocs and changes
 * nothing else (the message names the limit: grt_device_last_error). 0
 * removes the limit. A limit below the current use is allowed: every malloc
 * and map fails until frees bring use under it. A replay uses it to re-create
 * a recorded OOM: capped at what the process held plus the free memory
 * cudaMemGetInfo reported then. */
GRT_API GRT_MUST_CHECK grt_status grt_device_set_memory_limit(grt_device *dev, uint64_t limit_bytes);

/* Host view of device bytes [ptr, ptr+len) (host_backing devices only): every
 * byte of the range must be backed, i.e. lie in live segments (a range may
 * run on into the next segment when the two are adjacent, as two adjacent
 * cudaMalloc blocks share one address space) or, in a reservation, inside one
 * mapped page. GRT_ERR_UNKNOWN_POINTER otherwise. */
GRT_API GRT_MUST_CHECK grt_status grt_device_host_ptr(grt_device *dev, grt_devptr ptr, uint64_t len, void **out);

/* Fault injection: the nth malloc from now fails with GRT_ERR_FAULT_INJECTED
 * (n = 1: the next one); 0 clears it. */
GRT_API GRT_MUST_CHECK grt_status grt_device_inject_malloc_failure(grt_device *dev, uint64_t nth);

/* Calls fn(ctx, address, size) for each live segment in address order.
 * GRT_ERR_NOMEM, before any call of fn, when host memory runs out. */
typedef void (*grt_device_segment_fn)(void *ctx, grt_devptr address, uint64_t size);
GRT_API GRT_MUST_CHECK grt_status grt_device_walk_segments(grt_device *dev, grt_device_segment_fn fn, void *ctx);

/* ---- backends ----
 * "simulated" (grt_device_create) or "cuda" (gpurt/cuda.h: a real GPU through
 * the CUDA driver API, loaded at run time). */

/* The backend's name: "simulated" or "cuda"; never NULL ("" for NULL dev). */
GRT_API const char *grt_device_backend(const grt_device *dev);

/* Copies the message of the last failed backend call on dev (e.g. the CUDA
 * error name and text) into buf; "" when none. Thread-safe; buf_size >= 1. */
GRT_API GRT_MUST_CHECK grt_status grt_device_last_error(grt_device *dev, char *buf, size_t buf_size);

/* Selects the backend from the environment: GRT_DEVICE=sim (or unset) creates a
 * simulated device from sim_cfg (NULL: defaults); GRT_DEVICE=cuda or cuda:N
 * creates CUDA device N (default 0). GRT_ERR_INVALID_ARG for another value;
 * otherwise the status of the create it chose (GRT_ERR_NO_DEVICE without a
 * driver, GRT_ERR_UNSUPPORTED in a build without CUDA headers). */
GRT_API GRT_MUST_CHECK grt_status grt_device_create_from_env(const grt_device_config *sim_cfg, grt_device **out);

/* Blocks until all work issued to the device has completed (cuCtxSynchronize).
 * The simulated device runs no work: GRT_OK at once. */
GRT_API GRT_MUST_CHECK grt_status grt_device_synchronize(grt_device *dev);

/* ---- virtual memory (the primitives behind expandable segments) ----
 * Reserve a range of device addresses, back pieces of it with physical memory
 * (map) and take them back (unmap), then give the range up (release). Sizes
 * and addresses are multiples of the granularity. Mapped bytes count in
 * bytes_in_use and mapped_bytes; destroy reports GRT_ERR_BUSY while any
 * reservation exists. Each map counts in map_calls (and fault injection can
 * fail it like a malloc); each unmap in unmap_calls and as a device sync.
 * Both backends have them: the simulated device takes physical pages from its
 * capacity (first fit in the contiguous model, any free page in the paged
 * one); CUDA uses cuMemAddressReserve/cuMemCreate/cuMemMap. */

/* The mapping granularity in bytes (cuMemGetAllocationGranularity, minimum). */
GRT_API GRT_MUST_CHECK grt_status grt_device_vmm_granularity(grt_device *dev, uint64_t *granularity);
/* Reserves size bytes of address space (no memory behind it). */
GRT_API GRT_MUST_CHECK grt_status grt_device_reserve(grt_device *dev, uint64_t size, grt_devptr *va);
/* Backs [va, va+size) (inside one reservation, not mapped yet) with new
 * physical memory, readable and writable by the device. GRT_ERR_OOM when the
 * device has no memory left; GRT_ERR_INVALID_ARG for a range that is not
 * inside a reservation or overlaps a mapped piece. */
GRT_API GRT_MUST_CHECK grt_status grt_device_map(grt_device *dev, grt_devptr va, uint64_t size);
/* Unmaps [va, va+size) and frees its physical memory: the range must be
 * exactly covered by pieces mapped earlier (GRT_ERR_INVALID_ARG otherwise). */
GRT_API GRT_MUST_CHECK grt_status grt_device_unmap(grt_device *dev, grt_devptr va, uint64_t size);
/* Releases the reservation starting at va: GRT_ERR_BUSY while any of it is mapped. */
GRT_API GRT_MUST_CHECK grt_status grt_device_release(grt_device *dev, grt_devptr va);

#ifdef __cplusplus
}
#endif
#endif /* GPURT_DEVICE_H */
