/* gpurt/sorder.h — stream-ordered allocation over the executor (cudaMallocAsync
 * semantics), a happens-before sanitizer, a debug mode, a pinned host pool and
 * a staging pipeline. docs/SORDER.md has the model and the figures.
 *
 * Objects:
 *   grt_sorder       a context over one grt_exec: the instrumented front door
 *                    (kernels with declared buffer accesses, copies, event
 *                    record/wait, synchronizations), the happens-before
 *                    sanitizer fed by it, and the debug mode (serialized
 *                    streams, poisoned frees). Optional for the pools.
 *   grt_mempool      a stream-ordered pool over an allocator of policy
 *                    "caching" or "async" on the exec's device: malloc_async /
 *                    free_async, CUDA's three reuse policies, shared or
 *                    per-stream pools, release threshold and trim_to, and
 *                    PyTorch's record_stream path over the executor.
 *   grt_pinned_pool  the caching design over a "pinned host" device whose
 *                    allocations cost modelled host time.
 *   grt_staging_run  chunk -> H2D (copy stream) -> compute -> D2H (copy
 *                    stream) with K buffers in flight.
 *
 * Lifetime model: a free_async is a position in its stream. The block is
 * reusable at once on the same stream; on another stream when a reuse policy
 * allows it (see GRT_REUSE_*), or after a host synchronization that covered
 * the free (any grt_stream/event/exec synchronize: the pool observes them all).
 * malloc_async never blocks the host: when no policy allows a reuse and the
 * pool cannot grow, it fails with GRT_ERR_OOM (cudaMallocAsync).
 *
 * Sanitizer: vector clocks per stream (PyTorch's CUDA sanitizer design). Only
 * work issued through grt_sorder_* (and the pools' own frees and edges) is
 * seen; edges made with the plain exec API are invisible to it.
 *
 * Thread safety: every function may be called from any thread. A grt_sorder
 * has one mutex for its clocks and buffers (held across the exec call that it
 * mirrors, so clock order = issue order) and a leaf mutex for its report list
 * (kernel bodies add poison reports). A grt_mempool has one mutex guarding its
 * block lists and counters; lock order: mempool, then sorder, then the
 * allocator, then the exec. Kernel bodies must not call the pools. A pool
 * learns of the exec's synchronizations on the synchronizing thread, after the
 * sync returned; one made inside a pool call (the allocator's own) is not a
 * sync point for any pool.
 */
#ifndef GPURT_SORDER_H
#define GPURT_SORDER_H

#include <stdio.h>

#include "gpurt/alloc.h"
#include "gpurt/exec.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- the context: front door, sanitizer, debug mode ------------------------------ */

typedef struct grt_sorder grt_sorder;

typedef struct grt_sorder_config {
  grt_exec *exec;     /* required, borrowed */
  int sanitize;       /* 1 (default): happens-before checking of the work issued through grt_sorder_* */
  int serialize;      /* debug: every op issued through the context waits for all earlier ones */
  int poison;         /* debug: freed blocks are filled with 0xDB; a declared read of poison is reported */
  int use_env;        /* 1 (default): GRT_SORDER_DEBUG=1 in the environment turns serialize and poison on */
  size_t max_reports; /* reports kept (default 1024); later ones are only counted */
} grt_sorder_config;

GRT_API void grt_sorder_config_default(grt_sorder_config *cfg);
GRT_API GRT_MUST_CHECK grt_status grt_sorder_create(const grt_sorder_config *cfg, grt_sorder **out);
/* GRT_ERR_BUSY while a pool uses the context. NULL: no-op. */
GRT_API GRT_MUST_CHECK grt_status grt_sorder_destroy(grt_sorder *so);
/* Debug mode at run time (affects work issued afterwards). */
GRT_API GRT_MUST_CHECK grt_status grt_sorder_set_debug(grt_sorder *so, int serialize, int poison);
GRT_API GRT_MUST_CHECK grt_status grt_sorder_get_debug(grt_sorder *so, int *serialize, int *poison);

/* A buffer a kernel declares: [ptr, ptr + bytes), read or written. Buffers are
 * identified by their start address (declare the allocation's address). */
typedef struct grt_access {
  grt_devptr ptr;
  uint64_t bytes;
  int write; /* 0: read, 1: write (a read-modify-write is a write) */
} grt_access;

/* Launches desc on s and records its declared accesses (n may be 0). */
GRT_API GRT_MUST_CHECK grt_status grt_sorder_launch(grt_sorder *so, grt_stream *s, const grt_kernel_desc *desc,
                                                    const grt_access *acc, size_t n);
/* Copies and memset: the device side is a declared write (H2D, memset) or read (D2H). */
GRT_API GRT_MUST_CHECK grt_status grt_sorder_memcpy_h2d(grt_sorder *so, grt_stream *s, grt_devptr dst, const void *src,
                                                        uint64_t bytes);
GRT_API GRT_MUST_CHECK grt_status grt_sorder_memcpy_d2h(grt_sorder *so, grt_stream *s, void *dst, grt_devptr src,
                                                        uint64_t bytes);
GRT_API GRT_MUST_CHECK grt_status grt_sorder_memset(grt_sorder *so, grt_stream *s, grt_devptr dst, int value,
                                                    uint64_t bytes);
/* Edges and host synchronizations, mirrored into the vector clocks. */
GRT_API GRT_MUST_CHECK grt_status grt_sorder_event_record(grt_sorder *so, grt_event *ev, grt_stream *s);
GRT_API GRT_MUST_CHECK grt_status grt_sorder_stream_wait_event(grt_sorder *so, grt_stream *s, grt_event *ev);
GRT_API GRT_MUST_CHECK grt_status grt_sorder_stream_synchronize(grt_sorder *so, grt_stream *s);
GRT_API GRT_MUST_CHECK grt_status grt_sorder_event_synchronize(grt_sorder *so, grt_event *ev);
/* GRT_OK (completed: the host now knows it, as with cudaEventQuery) or GRT_ERR_NOT_READY. */
GRT_API GRT_MUST_CHECK grt_status grt_sorder_event_query(grt_sorder *so, grt_event *ev);
GRT_API GRT_MUST_CHECK grt_status grt_sorder_synchronize(grt_sorder *so);
/* A host read or write of device memory (e.g. through grt_device_host_ptr):
 * checked like a kernel's access, on the host's clock. */
GRT_API GRT_MUST_CHECK grt_status grt_sorder_host_access(grt_sorder *so, grt_devptr ptr, uint64_t bytes, int write);

typedef enum grt_sorder_report_kind {
  GRT_SORDER_RACE = 0,          /* two accesses (one a write or a free) not ordered by any edge */
  GRT_SORDER_USE_AFTER_FREE = 1, /* an access to a buffer after its (stream-ordered) free */
  GRT_SORDER_POISON_READ = 2,   /* debug mode: a kernel read freed (poisoned) bytes */
} grt_sorder_report_kind;

/* One side of a report: the op and its stream. */
typedef struct grt_sorder_op_ref {
  char op[40];             /* kernel name, "memcpy_h2d", "free_async", "host free", ... */
  char stream[32];         /* stream name, "host" for host accesses */
  grt_stream_id stream_id; /* UINT64_MAX for the host */
  uint64_t seq;            /* the op's number on its stream (sanitizer's count) */
  int write;
} grt_sorder_op_ref;

typedef struct grt_sorder_report {
  grt_sorder_report_kind kind;
  grt_devptr buffer;
  grt_sorder_op_ref access; /* the later access (the one that found the problem) */
  grt_sorder_op_ref prior;  /* the earlier access or free it conflicts with (poison: unused) */
  char text[320];           /* one line naming both ops and streams */
} grt_sorder_report;

/* Reports found so far (kept ones) and the total including dropped ones. */
GRT_API GRT_MUST_CHECK grt_status grt_sorder_report_count(grt_sorder *so, size_t *kept, uint64_t *total);
GRT_API GRT_MUST_CHECK grt_status grt_sorder_get_report(grt_sorder *so, size_t i, grt_sorder_report *out);
GRT_API GRT_MUST_CHECK grt_status grt_sorder_clear_reports(grt_sorder *so);
/* One line per report. */
GRT_API GRT_MUST_CHECK grt_status grt_sorder_print_reports(grt_sorder *so, FILE *f);
GRT_API const char *grt_sorder_report_kind_name(grt_sorder_report_kind k);

/* ---- the stream-ordered pool --------------------------------------------------------- */

typedef struct grt_mempool grt_mempool;

/* cudaMemPoolReuse* flags (CUDA enables all three by default). */
#define GRT_REUSE_FOLLOW_EVENT_DEPS 1u /* reuse another stream's free when the allocating stream already waits
                                          for it (an event edge, the legacy stream); inserts no wait */
#define GRT_REUSE_OPPORTUNISTIC 2u     /* reuse a free the device already passed, no edge (timing-dependent) */
#define GRT_REUSE_INTERNAL_DEPS 4u     /* when the pool cannot grow: insert a wait on the freeing stream */
#define GRT_REUSE_ALL 7u

typedef struct grt_mempool_config {
  grt_exec *exec;                /* required, borrowed; the pool allocates on its device */
  grt_sorder *sorder;            /* optional: the sanitizer and debug mode see the pool's frees and edges */
  const char *policy;            /* underlying allocator: "caching" (default) or "async" */
  const grt_alloc_config *alloc; /* its configuration; NULL: defaults (stream_ops is set by the pool) */
  unsigned reuse;                /* GRT_REUSE_* (default GRT_REUSE_ALL) */
  int per_stream;                /* 0 (default): one shared pool; 1: per-stream pools (blocks never cross streams) */
  uint64_t release_threshold;    /* bytes kept reserved at a sync point (default 0) */
} grt_mempool_config;

GRT_API void grt_mempool_config_default(grt_mempool_config *cfg);
GRT_API GRT_MUST_CHECK grt_status grt_mempool_create(const grt_mempool_config *cfg, grt_mempool **out);
/* Waits for pending frees and returns everything to the device. GRT_ERR_BUSY
 * (nothing changes) while allocations are live. NULL: no-op. */
GRT_API GRT_MUST_CHECK grt_status grt_mempool_destroy(grt_mempool *pool);

/* cudaMallocAsync: size bytes for use on s, in s's order. Never blocks the
 * host and never moves the virtual clock. GRT_ERR_SIZE for 0, GRT_ERR_OOM when
 * no reuse policy allows a free and the device cannot supply it (pending frees
 * are not waited for), GRT_ERR_INVALID_HANDLE for a destroyed stream, the exec's
 * sticky error, GRT_ERR_NOMEM (host memory); nothing changes on error. */
GRT_API GRT_MUST_CHECK grt_status grt_malloc_async(grt_mempool *pool, uint64_t size, grt_stream *s, grt_devptr *out);
/* cudaFreeAsync: ptr is free from s's current position on. GRT_ERR_DOUBLE_FREE
 * for a block already freed, GRT_ERR_UNKNOWN_POINTER for a pointer of another
 * pool, GRT_ERR_INVALID_ARG for a block of this pool's PyTorch path (free it
 * with grt_mempool_free), GRT_ERR_INVALID_HANDLE for a destroyed stream; nothing
 * changes on error. Memory a graph's allocation node made (any pool may be
 * asked) is freed as grt_stream_free_async_graph does (exec.h). */
GRT_API GRT_MUST_CHECK grt_status grt_free_async(grt_mempool *pool, grt_devptr ptr, grt_stream *s);
/* The bug this layer exists to prevent: a host-order free, reusable by any
 * stream at once while earlier work may still use it. For demonstrations (S3)
 * and the sanitizer's tests; the sanitizer reports it when unordered. */
GRT_API GRT_MUST_CHECK grt_status grt_mempool_free_host_order(grt_mempool *pool, grt_devptr ptr);

/* PyTorch's path ("caching" only, GRT_ERR_UNSUPPORTED otherwise): malloc tagged
 * with a stream, record_stream for other users, free deferred until one event
 * per recorded stream (recorded at free time on the executor) completed. */
GRT_API GRT_MUST_CHECK grt_status grt_mempool_malloc(grt_mempool *pool, uint64_t size, grt_stream *s, grt_devptr *out);
GRT_API GRT_MUST_CHECK grt_status grt_mempool_record_stream(grt_mempool *pool, grt_devptr ptr, grt_stream *s);
GRT_API GRT_MUST_CHECK grt_status grt_mempool_free(grt_mempool *pool, grt_devptr ptr);

/* Host synchronization points: synchronize s (or the device). What every
 * synchronization of the exec does for the pool (also a plain
 * grt_stream_synchronize, grt_event_synchronize, grt_exec_synchronize): the
 * completed frees it covered (those on the stream, on the event's stream, or
 * all) become reusable by any stream without an edge, then cached memory above
 * the release threshold is released. These two also return that release's
 * status. */
GRT_API GRT_MUST_CHECK grt_status grt_mempool_stream_synchronize(grt_mempool *pool, grt_stream *s);
GRT_API GRT_MUST_CHECK grt_status grt_mempool_synchronize(grt_mempool *pool);

/* cudaMemPoolAttrReleaseThreshold. */
GRT_API GRT_MUST_CHECK grt_status grt_mempool_set_release_threshold(grt_mempool *pool, uint64_t bytes);
/* cudaMemPoolTrimTo: releases cached memory until reserved <= bytes or nothing
 * more can go, and succeeds. Memory behind frees the host has not seen
 * complete stays (it counts as outstanding, as CUDA allows), except under
 * OPPORTUNISTIC, where a free the device passed is handed back first. Never
 * blocks and never moves the virtual clock. "caching" releases whole free
 * segments (PyTorch's empty_cache granularity); "async" releases down to the
 * target. */
GRT_API GRT_MUST_CHECK grt_status grt_mempool_trim_to(grt_mempool *pool, uint64_t bytes);

typedef struct grt_mempool_attrs {
  uint64_t release_threshold;
  uint64_t reserved_mem_current, reserved_mem_high; /* bytes held from the device */
  uint64_t used_mem_current, used_mem_high;         /* bytes in live allocations (not freed blocks) */
  unsigned reuse;                                   /* GRT_REUSE_* in force */
} grt_mempool_attrs;
GRT_API GRT_MUST_CHECK grt_status grt_mempool_get_attrs(grt_mempool *pool, grt_mempool_attrs *out);
/* Both high watermarks reset: high := current. */
GRT_API GRT_MUST_CHECK grt_status grt_mempool_reset_high(grt_mempool *pool);

/* cudaMemPoolAttr, one at a time (CUDA's numbering). */
typedef enum grt_mempool_attr {
  GRT_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPS = 1,    /* 0 or 1 */
  GRT_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC = 2,  /* 0 or 1 */
  GRT_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPS = 3,  /* 0 or 1 */
  GRT_MEMPOOL_ATTR_RELEASE_THRESHOLD = 4,          /* bytes */
  GRT_MEMPOOL_ATTR_RESERVED_MEM_CURRENT = 5,       /* read only */
  GRT_MEMPOOL_ATTR_RESERVED_MEM_HIGH = 6,          /* set to 0 only: high := current */
  GRT_MEMPOOL_ATTR_USED_MEM_CURRENT = 7,           /* read only */
  GRT_MEMPOOL_ATTR_USED_MEM_HIGH = 8,              /* set to 0 only: high := current */
} grt_mempool_attr;
/* GRT_ERR_INVALID_ARG (nothing changes) for an unknown attribute, a read-only
 * one, a high watermark set to non-zero, or a policy flag not 0 or 1.
 * Resetting RESERVED_MEM_HIGH resets the underlying allocator's peaks too. */
GRT_API GRT_MUST_CHECK grt_status grt_mempool_set_attribute(grt_mempool *pool, grt_mempool_attr attr, uint64_t value);
GRT_API GRT_MUST_CHECK grt_status grt_mempool_get_attribute(grt_mempool *pool, grt_mempool_attr attr, uint64_t *value);

typedef struct grt_mempool_counters {
  uint64_t mallocs, frees;       /* malloc_async / free_async calls that succeeded */
  uint64_t reuse_same_stream;    /* a free reused on its own stream (no edge needed) */
  uint64_t reuse_event_dep;      /* another stream's free reused: the allocating stream already waited for it */
  uint64_t reuse_opportunistic;  /* another stream's free reused because the device passed it */
  uint64_t reuse_internal_dep;   /* the pool could not grow: another stream's free reused after a wait */
  uint64_t edges_inserted;       /* stream waits the pool inserted (INTERNAL_DEPS only) */
  uint64_t host_syncs;           /* synchronizations of the exec the pool observed */
  uint64_t reuses_deferred;      /* mallocs that passed over a fitting free of another stream */
  uint64_t released_to_allocator; /* freed blocks handed back to the underlying allocator */
  uint64_t pending_frees;        /* frees not yet handed back (current) */
  uint64_t device_mallocs;       /* the allocator's device mallocs so far */
} grt_mempool_counters;
GRT_API GRT_MUST_CHECK grt_status grt_mempool_get_counters(grt_mempool *pool, grt_mempool_counters *out);
/* The underlying allocator (for its stats and snapshot; do not free through it). */
GRT_API GRT_MUST_CHECK grt_status grt_mempool_get_allocator(grt_mempool *pool, grt_allocator **out);

/* ---- pinned host pool ----------------------------------------------------------------- */

typedef struct grt_pinned_pool grt_pinned_pool;

typedef struct grt_pinned_config {
  grt_exec *exec;         /* required: its clock is charged the allocation cost, its events serve record_stream */
  uint64_t capacity;      /* bytes of pinnable host memory (default 256 MiB) */
  uint64_t alloc_cost_ns; /* host time per underlying allocation (cudaHostAlloc), default 2 ms */
} grt_pinned_config;

GRT_API void grt_pinned_config_default(grt_pinned_config *cfg);
GRT_API GRT_MUST_CHECK grt_status grt_pinned_pool_create(const grt_pinned_config *cfg, grt_pinned_pool **out);
/* GRT_ERR_BUSY while buffers are live. */
GRT_API GRT_MUST_CHECK grt_status grt_pinned_pool_destroy(grt_pinned_pool *p);
GRT_API GRT_MUST_CHECK grt_status grt_pinned_malloc(grt_pinned_pool *p, uint64_t size, void **out);
/* Frees now, or once the events of streams recorded with record_stream completed. */
GRT_API GRT_MUST_CHECK grt_status grt_pinned_free(grt_pinned_pool *p, void *ptr);
GRT_API GRT_MUST_CHECK grt_status grt_pinned_record_stream(grt_pinned_pool *p, void *ptr, grt_stream *s);
GRT_API GRT_MUST_CHECK grt_status grt_pinned_empty_cache(grt_pinned_pool *p);

typedef struct grt_pinned_stats {
  uint64_t mallocs, cache_hits;   /* calls; served without an underlying allocation */
  uint64_t host_allocs;           /* underlying (expensive) allocations */
  uint64_t alloc_cost_ns;         /* host time charged for them */
  uint64_t reserved_bytes, allocated_bytes;
} grt_pinned_stats;
GRT_API GRT_MUST_CHECK grt_status grt_pinned_get_stats(grt_pinned_pool *p, grt_pinned_stats *out);

/* ---- staging pipeline ------------------------------------------------------------------- */

/* The compute per chunk, on the device's bytes (runs as the kernel's body). */
typedef void (*grt_staging_fn)(void *arg, const unsigned char *in, unsigned char *out, uint64_t bytes);

typedef struct grt_staging_config {
  grt_exec *exec;
  grt_mempool *device_pool;  /* device buffers (2 per slot) */
  grt_pinned_pool *host_pool; /* pinned staging buffers (2 per slot) */
  unsigned buffers;          /* K: chunks in flight, 1..16 */
  uint64_t chunk_bytes;      /* > 0 */
  uint64_t kernel_ns;        /* modelled compute per chunk */
  grt_staging_fn fn;         /* NULL: out = in XOR 0x5a */
  void *arg;
} grt_staging_config;

typedef struct grt_staging_result {
  unsigned chunks;
  uint64_t elapsed_ns;       /* first H2D start to last D2H end (the exec's clock) */
  uint64_t serial_bound_ns;  /* chunks x (H2D + compute + D2H) */
  uint64_t overlap_bound_ns; /* one chunk's stages + (chunks - 1) x the slowest stage */
} grt_staging_result;

/* Streams src through the device into dst (bytes each; the last chunk may be
 * short): per chunk the host fills a pinned buffer, H2D on a copy stream, the
 * kernel on a compute stream (event edge), D2H on a second copy stream (event
 * edge), the host drains it; slot k is reused by chunk k + K after its D2H. */
GRT_API GRT_MUST_CHECK grt_status grt_staging_run(const grt_staging_config *cfg, const void *src, void *dst,
                                                  uint64_t bytes,
                                                  grt_staging_result *out);

#ifdef __cplusplus
}
#endif
#endif /* GPURT_SORDER_H */
