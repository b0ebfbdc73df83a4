/* gpurt/alloc.h — allocators behind one interface.
 *
 * An allocator serves device memory to callers from segments it obtains from a
 * grt_device. Policies:
 *   "caching"  PyTorch's CUDA caching allocator, faithfully (rounding, small and
 *              large pools, best fit ordered by (stream, size, address), split
 *              and merge, max_split_size, flush-and-retry on OOM, empty_cache,
 *              record_stream with deferred frees, private pools).
 *   "naive"    every request goes straight to the device (cudaMalloc/cudaFree).
 *   "bestfit"  exact best fit (the block index) over one arena spanning the
 *              device: the exact-best-fit baseline of W3 (docs/ALLOCATORS.md).
 *   "sharded"  N "caching" allocators, streams hashed onto them, each with its
 *              own lock: threads on different streams do not contend. With
 *              one stream it decides exactly as "caching"; an OOM releases
 *              only that shard's cache. Peaks in its stats are the sum of the
 *              shards' peaks (an upper bound of the true peak).
 * More policies register behind the same functions.
 *
 * Streams are opaque ids (grt_stream_id, 0 = default stream). The allocator
 * knows nothing of threads or execution: whether an event recorded for a
 * deferred free has completed is asked through grt_stream_ops, so the same
 * code runs in the replayer (no execution), on the executor and on CUDA.
 *
 * Thread safety: every function on one grt_allocator may be called from several
 * threads; each call holds the allocator's mutex (as PyTorch holds one per
 * device). The stream_ops callbacks are called with that mutex held and must
 * not call back into the allocator.
 */
#ifndef GPURT_ALLOC_H
#define GPURT_ALLOC_H

#include "gpurt/base.h"
#include "gpurt/device.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct grt_allocator grt_allocator;

/* PyTorch's constants (c10/cuda/CUDACachingAllocator.cpp). */
#define GRT_MIN_BLOCK_SIZE ((uint64_t)512)           /* kMinBlockSize */
#define GRT_SMALL_SIZE ((uint64_t)1 << 20)           /* kSmallSize: <= goes to the small pool */
#define GRT_SMALL_BUFFER ((uint64_t)2 << 20)         /* kSmallBuffer: small-pool segment size */
#define GRT_LARGE_BUFFER ((uint64_t)20 << 20)        /* kLargeBuffer: segment for 1-10 MiB requests */
#define GRT_MIN_LARGE_ALLOC ((uint64_t)10 << 20)     /* kMinLargeAlloc */
#define GRT_ROUND_LARGE ((uint64_t)2 << 20)          /* kRoundLarge */
#define GRT_ROUNDUP_INTERVALS 16                     /* power-of-two intervals 1 MiB .. 64 GiB */
#define GRT_UNLIMITED UINT64_MAX

typedef enum grt_cross_stream_policy {
  GRT_CROSS_STREAM_NEVER = 0,  /* PyTorch: a cached block serves only its own stream */
  GRT_CROSS_STREAM_WITH_EVENT, /* not PyTorch: another stream's cached block may be
                                  taken (same stream preferred); each such reuse counts
                                  one event edge in cross_stream_syncs */
} grt_cross_stream_policy;

typedef enum grt_fit_policy {
  GRT_FIT_BEST = 0, /* smallest block that fits, ties to the lowest address (PyTorch) */
  GRT_FIT_FIRST,    /* lowest-address block that fits */
} grt_fit_policy;

typedef struct grt_alloc_config {
  uint64_t max_split_size; /* bytes; GRT_UNLIMITED (default) or > 20 MiB: blocks this large are not split */
  /* bytes; default 20 MiB (kLargeBuffer): a request of max_split_size or more
     takes a cached block only if it is less than this much larger */
  uint64_t max_non_split_rounding;
  /* roundup_power2_divisions per power-of-two interval: entry i covers sizes in
     [2^(20+i), 2^(21+i)) (entry 0 also everything below 1 MiB, the last one
     everything above). 0 or 1 = plain 512-byte rounding (default). */
  unsigned roundup_power2_divisions[GRT_ROUNDUP_INTERVALS];
  /* bytes; GRT_UNLIMITED (default): sizes above it round to 512 bytes whatever
     the divisions (roundup_bypass_threshold_mb of older PyTorch, e.g. 1.13) */
  uint64_t roundup_bypass_threshold;
  double garbage_collection_threshold; /* 0 = off; else in (0, 1), needs memory_fraction */
  double memory_fraction;              /* 0 = no limit; else share of device capacity usable */
  int expandable_segments;             /* 0/1 */
  grt_cross_stream_policy cross_stream;
  const grt_stream_ops *stream_ops; /* NULL: recorded events complete at the next malloc */
  /* gpurt's policy options (PyTorch's behaviour is the default of each) */
  grt_fit_policy fit;               /* GRT_FIT_BEST (PyTorch) or GRT_FIT_FIRST */
  int no_merge_on_free;             /* 1: freed blocks do not coalesce with free neighbours */
  unsigned empty_cache_idle_cycles; /* 0: empty_cache frees every free segment (PyTorch); N: only
                                       segments that stayed free through N earlier empty_cache
                                       calls ("cycles") */
  unsigned shards;                  /* policy "sharded": caching allocators, one per stream shard
                                       (0 = 2); other policies ignore it */
} grt_alloc_config;

/* Defaults = PyTorch's defaults. */
GRT_API void grt_alloc_config_default(grt_alloc_config *cfg);

/* A notes buffer of this size holds every note grt_alloc_config_parse_notes writes. */
#define GRT_ALLOC_CONFIG_NOTES_SIZE 4096

/* Parses a PYTORCH_CUDA_ALLOC_CONF string over cfg (keys it does not name keep
 * their values), in PyTorch's syntax: "key:value" settings separated by ','
 * (whitespace ignored, keys and True/False case-sensitive), list values in
 * brackets, e.g. "expandable_segments:True,roundup_power2_divisions:[256:1,512:2,>:4]".
 * Every key of PyTorch's parsers (1.13 to the newest) is accepted with PyTorch's
 * limits; docs/ALLOCATORS.md ("The configuration string") lists what each does
 * in the model. gpurt's own keys: cross_stream (never|with_event), fit
 * (best|first), merge_on_free (True|False), empty_cache_idle_cycles (N), shards (N).
 * Errors leave cfg unchanged and write the reason into err (if non-NULL):
 *   GRT_ERR_PARSE        a syntax error, an unknown key ("unknown key 'x'"), a
 *                        value outside PyTorch's limits or not a plain number;
 *   GRT_ERR_UNSUPPORTED  a value PyTorch takes whose effect the model lacks
 *                        (backend:cudaMallocAsync, per_process_memory_fraction:0,
 *                        large_segment_size_mb other than 20);
 *   GRT_ERR_INVALID_ARG  cfg or text NULL.
 * notes (if non-NULL) receives one line per setting accepted without effect on
 * the model's decisions, and for a garbage_collection_threshold without a memory
 * fraction ("key: why\n" each, in the order the keys appear; a line that does not
 * fit notes_size is left out). It is the empty string after a failure. */
GRT_API GRT_MUST_CHECK grt_status grt_alloc_config_parse_notes(grt_alloc_config *cfg, const char *text, char *err,
                                                               size_t err_size, char *notes, size_t notes_size);

/* grt_alloc_config_parse_notes without the notes. */
GRT_API GRT_MUST_CHECK grt_status grt_alloc_config_parse(grt_alloc_config *cfg, const char *text, char *err,
                                                         size_t err_size);

/* Applies the first of these environment variables that is set (even to "")
 * over cfg: GRT_ALLOC_CONF, then PyTorch's PYTORCH_CUDA_ALLOC_CONF,
 * PYTORCH_HIP_ALLOC_CONF and PYTORCH_ALLOC_CONF, in the order PyTorch's newest
 * versions read them. None set: GRT_OK, cfg unchanged. A parse error's message
 * starts with the variable's name ("PYTORCH_CUDA_ALLOC_CONF: unknown key 'x'"). */
GRT_API GRT_MUST_CHECK grt_status grt_alloc_config_from_env(grt_alloc_config *cfg, char *err, size_t err_size);

/* PyTorch's round_size(): the block size a request of `size` bytes occupies. */
GRT_API uint64_t grt_alloc_round_size(const grt_alloc_config *cfg, uint64_t size);
/* PyTorch's get_allocation_size(): the segment size for a rounded request. */
GRT_API uint64_t grt_alloc_segment_size(uint64_t rounded_size);

/* Creates an allocator of the named policy ("caching", "naive", ...) over dev
 * (borrowed: it must outlive the allocator). cfg may be NULL for defaults. */
GRT_API GRT_MUST_CHECK grt_status grt_alloc_create(const char *policy, grt_device *dev, const grt_alloc_config *cfg,
                                                   grt_allocator **out);

/* Returns every segment to the device and frees the allocator. Blocks still
 * allocated become invalid (like process exit). destroy(NULL) is a no-op. */
GRT_API GRT_MUST_CHECK grt_status grt_alloc_destroy(grt_allocator *a);

/* Allocates size bytes for use on stream. GRT_ERR_SIZE for 0 or absurd sizes;
 * GRT_ERR_OOM when the device cannot supply it even after freeing the cache
 * (grt_alloc_last_error then holds PyTorch's explanation). */
GRT_API GRT_MUST_CHECK grt_status grt_alloc_malloc(grt_allocator *a, uint64_t size, grt_stream_id stream,
                                                   grt_devptr *out);

/* Frees a block returned by grt_alloc_malloc. GRT_ERR_DOUBLE_FREE,
 * GRT_ERR_INTERIOR_POINTER or GRT_ERR_UNKNOWN_POINTER on bad input (nothing changes). */
GRT_API GRT_MUST_CHECK grt_status grt_alloc_free(grt_allocator *a, grt_devptr ptr);

/* Marks the block as used by stream too: its free is deferred until work
 * issued to that stream before the free has completed. */
GRT_API GRT_MUST_CHECK grt_status grt_alloc_record_stream(grt_allocator *a, grt_devptr ptr, grt_stream_id stream);

/* Synchronizes outstanding events, then returns every whole unsplit free segment to the device. */
GRT_API GRT_MUST_CHECK grt_status grt_alloc_empty_cache(grt_allocator *a);

/* Size of the live block at ptr (rounded) and what was requested. */
GRT_API GRT_MUST_CHECK grt_status grt_alloc_block_info(grt_allocator *a, grt_devptr ptr, uint64_t *size,
                                                       uint64_t *requested);

/* The policy name given at creation. */
GRT_API const char *grt_alloc_policy(const grt_allocator *a);

/* The message of the last failed call on this allocator ("" if none). The
 * pointer stays valid until the next call on the allocator. */
GRT_API const char *grt_alloc_last_error(const grt_allocator *a);

/* ---- rebuilding a recorded state (the replayer's fidelity mode; "caching" only) ---- */

/* Adds a segment that already existed when a recording began: placed on the
 * device at exactly base (GRT_ERR_OOM when that range is taken), one free
 * block, counted as reserved like any segment. is_large picks the pool. */
GRT_API GRT_MUST_CHECK grt_status grt_alloc_import_segment(grt_allocator *a, grt_devptr base, uint64_t size,
                                                           grt_stream_id stream,
                                                           int is_large);

/* Marks [addr, addr + size) allocated (requested bytes asked for) inside a
 * free block of an imported segment, splitting free space off before and
 * after it. GRT_ERR_INVALID_ARG when the range is not wholly inside one free
 * block or is not 512-aligned. */
GRT_API GRT_MUST_CHECK grt_status grt_alloc_import_block(grt_allocator *a, grt_devptr addr, uint64_t size,
                                                         uint64_t requested);

/* ---- private pools: CUDA graph pools and torch.cuda.MemPool ("caching" only) ----
 *
 * A pool id is PyTorch's MempoolId_t; (0, 0) is the default pool, every other
 * id names a private pool. A private pool has its own small and large pools:
 * its free blocks never serve a malloc outside it, nor the default pools'
 * blocks a malloc into it. PyTorch's rules (c10/cuda/CUDACachingAllocator.cpp):
 *   - a pool is created with use_count 1 by its first retain, begin or
 *     import; each later retain or begin adds 1, each release takes 1;
 *   - between begin and end, every malloc on the begun stream goes to the
 *     pool (PyTorch's capture filter; the newest begin on a stream wins);
 *     while any pool is begun, mallocs process no completed events and an
 *     OOM skips the final flush-and-retry, and empty_cache leaves the default
 *     pools alone (PyTorch's captures_underway);
 *   - at use_count 0 the pool is freeable: empty_cache and the OOM flush free
 *     its whole free segments, and erase it once it holds none (an erased id
 *     is unknown, and may be created afresh). Until then its segments stay
 *     (but with max_split_size set, an OOM while allocating to the pool may
 *     free its oversize cached segments, as in PyTorch).
 * Other policies return GRT_ERR_UNSUPPORTED. Every error leaves everything as
 * it was, with the reason in grt_alloc_last_error. Ids (0, 0) are
 * GRT_ERR_INVALID_ARG, except where a call says what (0, 0) means. */
typedef struct grt_pool_id {
  uint64_t first, second;
} grt_pool_id;

typedef struct grt_pool_info {
  uint64_t use_count;   /* 0: freeable */
  uint64_t segments;    /* segments it holds (expandable: reservations); PyTorch's cudaMalloc_count */
  int begun;            /* 1 between begin and end */
  grt_stream_id stream; /* the stream begun on, when begun */
} grt_pool_info;

/* PyTorch's createOrIncrefPool (torch.cuda.MemPool()): creates the pool with
 * use_count 1, or adds 1. GRT_ERR_STATE on a freeable pool. */
GRT_API GRT_MUST_CHECK grt_status grt_alloc_pool_retain(grt_allocator *a, grt_pool_id id);

/* PyTorch's beginAllocateToPool (graph capture begin, torch.cuda.use_mem_pool):
 * retains the pool as above, then sends mallocs on `stream` to it until
 * grt_alloc_pool_end. GRT_ERR_STATE when the pool is freeable or already begun. */
GRT_API GRT_MUST_CHECK grt_status grt_alloc_pool_begin(grt_allocator *a, grt_pool_id id, grt_stream_id stream);

/* PyTorch's endAllocateToPool: mallocs on the stream leave the pool (use_count
 * unchanged). GRT_ERR_NOT_FOUND for an unknown pool, GRT_ERR_STATE when it is
 * not begun, GRT_ERR_INVALID_ARG when it was begun on another stream. */
GRT_API GRT_MUST_CHECK grt_status grt_alloc_pool_end(grt_allocator *a, grt_pool_id id, grt_stream_id stream);

/* PyTorch's releasePool (CUDAGraph::reset, ~MemPool): use_count - 1; at 0 the
 * pool becomes freeable. GRT_ERR_NOT_FOUND for an unknown pool, GRT_ERR_STATE
 * when use_count is already 0, GRT_ERR_BUSY when it would reach 0 while the
 * pool is begun (end it first). */
GRT_API GRT_MUST_CHECK grt_status grt_alloc_pool_release(grt_allocator *a, grt_pool_id id);

/* PyTorch's emptyCache(mempool_id) (~MemPool calls it after releasePool):
 * (0, 0) is grt_alloc_empty_cache. A freeable pool: its pending frees are
 * waited for (num_sync_all_streams + 1), its whole free segments go back to
 * the device and the pool is erased once it holds none; a pool in use is left
 * as it is (GRT_OK). GRT_ERR_NOT_FOUND for an unknown pool,
 * GRT_ERR_CAPTURE_UNSUPPORTED while any pool is begun (PyTorch syncs events only outside captures). */
GRT_API GRT_MUST_CHECK grt_status grt_alloc_pool_empty_cache(grt_allocator *a, grt_pool_id id);

/* The pool's use_count, segments and begun stream. GRT_ERR_NOT_FOUND for an
 * unknown (or erased) pool. */
GRT_API GRT_MUST_CHECK grt_status grt_alloc_pool_info(grt_allocator *a, grt_pool_id id, grt_pool_info *out);

/* grt_alloc_import_segment into the pool `id` ((0, 0): the default pool),
 * creating a private pool that does not exist yet with use_count 1 (an
 * existing one keeps its use_count: importing is not a use). */
GRT_API GRT_MUST_CHECK grt_status grt_alloc_import_segment_pool(grt_allocator *a, grt_pool_id id, grt_devptr base,
                                                                uint64_t size, grt_stream_id stream, int is_large);

/* ---- statistics: torch.cuda.memory_stats() ---- */

typedef struct grt_stat {
  int64_t current, peak, allocated, freed;
} grt_stat;

enum { GRT_STAT_ALL = 0, GRT_STAT_SMALL_POOL = 1, GRT_STAT_LARGE_POOL = 2, GRT_STAT_TYPES = 3 };

typedef struct grt_alloc_stats {
  grt_stat allocation[GRT_STAT_TYPES];
  grt_stat segment[GRT_STAT_TYPES];
  grt_stat active[GRT_STAT_TYPES];
  grt_stat inactive_split[GRT_STAT_TYPES];
  grt_stat allocated_bytes[GRT_STAT_TYPES];
  grt_stat reserved_bytes[GRT_STAT_TYPES];
  grt_stat active_bytes[GRT_STAT_TYPES];
  grt_stat inactive_split_bytes[GRT_STAT_TYPES];
  grt_stat requested_bytes[GRT_STAT_TYPES];
  grt_stat oversize_allocations;
  grt_stat oversize_segments;
  uint64_t num_alloc_retries;
  uint64_t num_ooms;
  uint64_t num_sync_all_streams;
  uint64_t num_device_alloc;
  uint64_t num_device_free;
  int64_t max_split_size; /* -1 when unlimited */
  /* gpurt additions (PyTorch exports none of these) */
  uint64_t cached_bytes;       /* reserved - allocated: held by the cache */
  uint64_t largest_free_block; /* largest free block inside reserved segments */
  uint64_t num_cache_hits;     /* mallocs served without a device malloc */
  uint64_t cross_stream_syncs; /* event edges added by cross-stream reuse */
  uint64_t pending_free_blocks; /* frees waiting on stream events */
} grt_alloc_stats;

GRT_API GRT_MUST_CHECK grt_status grt_alloc_get_stats(grt_allocator *a, grt_alloc_stats *out);
/* torch.cuda.reset_peak_memory_stats(): peaks := current. */
GRT_API GRT_MUST_CHECK grt_status grt_alloc_reset_peak_stats(grt_allocator *a);

/* ---- snapshot: torch.cuda.memory_snapshot() segments ---- */

typedef enum grt_block_state {
  GRT_BLOCK_ACTIVE_ALLOCATED = 0,    /* "active_allocated" */
  GRT_BLOCK_ACTIVE_PENDING_FREE = 1, /* "active_pending_free": freed, waiting on stream events */
  GRT_BLOCK_INACTIVE = 2,            /* "inactive": free in the cache */
} grt_block_state;

/* "active_allocated", "active_pending_free" or "inactive". */
GRT_API const char *grt_block_state_name(grt_block_state s);

typedef struct grt_snapshot_block {
  grt_devptr address;
  uint64_t size;
  uint64_t requested_size;
  grt_block_state state;
} grt_snapshot_block;

typedef struct grt_snapshot_segment {
  grt_devptr address;
  uint64_t total_size, allocated_size, active_size, requested_size;
  grt_stream_id stream;
  int is_large;      /* segment_type: 0 "small", 1 "large" */
  int is_expandable;
  grt_pool_id pool_id; /* segment_pool_id: (0, 0) the default pool */
  size_t n_blocks;
  grt_snapshot_block *blocks; /* tile the segment in address order */
} grt_snapshot_segment;

typedef struct grt_alloc_snapshot {
  size_t n_segments;
  grt_snapshot_segment *segments; /* in address order */
} grt_alloc_snapshot;

GRT_API GRT_MUST_CHECK grt_status grt_alloc_snapshot_take(grt_allocator *a, grt_alloc_snapshot **out);
GRT_API void grt_alloc_snapshot_free(grt_alloc_snapshot *snap);

/* Structure walker: checks that blocks tile their segments, no two live blocks
 * overlap, free blocks are indexed exactly once and the statistics equal a
 * recount. GRT_OK, or GRT_ERR_INTERNAL with the first violation in msg. */
GRT_API GRT_MUST_CHECK grt_status grt_alloc_check(grt_allocator *a, char *msg, size_t msg_size);

/* ---- completion over real CUDA events (gpurt/cuda.h) ----
 * A grt_stream_ops for allocators on a CUDA device: stream ids are CUstream
 * values (grt_cuda_stream_id; 0 = the default stream, as PyTorch passes it),
 * record_event records a pooled CUevent on that stream, event_query asks the
 * driver. Thread-safe (its own mutex). It must outlive every allocator using
 * it; destroy returns GRT_ERR_BUSY while events handed out are not destroyed.
 * On a non-CUDA device create returns GRT_ERR_UNSUPPORTED. */
typedef struct grt_cuda_events grt_cuda_events;
GRT_API GRT_MUST_CHECK grt_status grt_cuda_events_create(grt_device *dev, grt_cuda_events **out);
GRT_API GRT_MUST_CHECK grt_status grt_cuda_events_destroy(grt_cuda_events *ev);
/* The ops to put into grt_alloc_config.stream_ops (valid until destroy). */
GRT_API const grt_stream_ops *grt_cuda_events_stream_ops(grt_cuda_events *ev);
/* How many events were recorded in total (for reports). */
GRT_API uint64_t grt_cuda_events_recorded(grt_cuda_events *ev);

/* ---- policy settings ----
 * One name-keyed call for the settings of the comparison policies (their
 * other calls are in gpurt/policy.h). Keys, by policy:
 *   "bump"   arena_size: size of arenas created from now on (bytes, a multiple
 *            of 512; default 64 MiB; a larger request gets an arena of its own
 *            rounded size).
 *   "buddy"  segment_size: size of segments created from now on = the top
 *            order (a power of two >= 512; default 64 MiB); a larger request
 *            gets a segment of its own power of two.
 *   "slab"   page_size: a multiple of 512 (default 2 MiB); GRT_ERR_BUSY while
 *            the allocator holds any segment.
 *   "async"  release_threshold: cudaMemPoolAttrReleaseThreshold (bytes;
 *            default 0): at each sync point, whole free segments go back to
 *            the device while reserved bytes exceed it. grt_alloc_get also
 *            reads cudaMemPoolGetAttribute's reserved_mem_current,
 *            reserved_mem_high, used_mem_current and used_mem_high (bytes).
 * A key the policy lacks (every key on "caching", "naive", "bestfit" and
 * "sharded") is GRT_ERR_UNSUPPORTED, with the policy's keys named in
 * grt_alloc_last_error; a value out of range is GRT_ERR_INVALID_ARG. A failed
 * call changes nothing. Each holds the allocator's mutex like every other call. */
GRT_API GRT_MUST_CHECK grt_status grt_alloc_set(grt_allocator *a, const char *key, uint64_t value);
GRT_API GRT_MUST_CHECK grt_status grt_alloc_get(grt_allocator *a, const char *key, uint64_t *value);

/* The names grt_alloc_create accepts, in a fixed order ("naive", "caching",
 * "bestfit", "bump", "buddy", "slab", "async", "sharded"): *names points to
 * static storage of *count entries. */
GRT_API GRT_MUST_CHECK grt_status grt_alloc_policies(const char *const **names, size_t *count);

#ifdef __cplusplus
}
#endif
#endif /* GPURT_ALLOC_H */
