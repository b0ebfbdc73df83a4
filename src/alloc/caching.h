/* caching.h — PyTorch's CUDA caching allocator: shared internals (internal).
 *
 * Memory comes from the device in segments; a segment is tiled by blocks in
 * address order (prev/next). A block is allocated, pending (freed but waiting
 * for events on streams that used it), or free; free blocks live in their
 * pool's bins for their stream, keyed (size, address). Two default pools:
 * small (blocks <= 1 MiB, 2 MiB segments) and large; each private pool has
 * its own pair, and a segment and all its blocks belong to one pool.
 *
 * Invariants (grt_alloc_check walks them): blocks tile their segment; a free
 * block is in exactly one bins set, its own pool's, and never next to another
 * free block; live and pending blocks are in `active`; stats equal a
 * recount; a private pool's segment count is its segments.
 *
 * A call that fails for host memory changes nothing: every call first
 * reserves what its whole run may need (block and segment structs, map,
 * index and table room: caching_reserve.c), before the first change, so that
 * what follows cannot fail for lack of it; GRT_ERR_NOMEM comes before any
 * counter, block or device call moves. One exception: the device's own calls
 * may fail for the host memory they use (it has no reservations); such a
 * failure is returned as GRT_ERR_NOMEM at once, and what the call did before
 * it stays done (completed deferred frees, garbage collection, a flush).
 */
#ifndef GRT_ALLOC_CACHING_H
#define GRT_ALLOC_CACHING_H

#include <assert.h>

#include "alloc/allocator_impl.h"
#include "alloc/bins.h"
#include "base/segtable.h"
#include "base/status.h"
#include "base/u64map.h"

typedef struct cpool cpool;
typedef struct cseg cseg;
typedef struct cblock cblock;
typedef struct cprivate cprivate;

struct cpool {
  int stat_type;             /* GRT_STAT_SMALL_POOL or GRT_STAT_LARGE_POOL */
  grt__u64map bins;          /* stream -> grt__bins* of free blocks */
  grt_stream_id *streams;    /* streams having a bins set, ascending */
  grt__bins **stream_bins;   /* [i]: the bins of streams[i] */
  uint64_t *occupied;        /* bit i: stream_bins[i] may hold blocks (caching_streams.c) */
  size_t n_streams, cap_streams;
  uint64_t get_free_calls;   /* garbage collection's clock */
  uint64_t cycle;            /* empty_cache calls so far (the idle-cycles policy's clock) */
  grt__bins *unmapped;       /* expandable mode: unmapped blocks keyed (stream, address) */
  grt__bins *last_bins;      /* the bins last looked up (NULL: none yet); a pool's bins live until */
  grt_stream_id last_stream; /* the pool is freed, so this cache never goes stale */
  cprivate *owner;           /* the private pool holding it; NULL: a default pool (owner_PrivatePool) */
};

/* A private pool (PyTorch's PrivatePool: CUDA graph pools, torch.cuda.MemPool):
 * its own small and large pools, whose blocks never serve the default pools
 * nor another private pool. Its segments go back to the device only once it
 * is freeable (use_count 0); it is erased when freeable and holding no
 * segment (caching_pool.c). */
struct cprivate {
  grt_pool_id id;     /* never (0, 0) */
  uint64_t use_count; /* PyTorch's use_count: retains and begins minus releases; 0 = freeable */
  size_t n_segs;      /* segments (expandable: reservations) it holds: PyTorch's cudaMalloc_count */
  cpool small, large;
};

/* A begun pool (PyTorch's captures_underway entry): mallocs on `stream` go to it. */
typedef struct ccapture {
  cprivate *pool;
  grt_stream_id stream;
} ccapture;

struct cseg {
  grt_devptr base;
  uint64_t size;
  cpool *pool;
  grt_stream_id stream; /* the stream that caused the device malloc */
  cblock *head;
  int is_expandable;    /* a reservation mapped page by page (size = the reservation) */
  uint64_t page;        /* expandable: the mapping unit (2 MiB small pool, 20 MiB large) */
};

struct cblock {
  grt_devptr ptr;
  uint64_t size;
  uint64_t requested_size;
  grt_stream_id stream;
  cpool *pool;
  cseg *seg;
  cblock *prev, *next; /* neighbours in the segment */
  int allocated;
  int event_count;       /* events still pending before the block is free */
  grt_stream_id *uses;   /* record_stream set */
  uint32_t n_uses, cap_uses;
  uint64_t gc_base;      /* pool->get_free_calls when the block became free */
  uint64_t idle_since;   /* pool->cycle when the block became free */
  int unmapped;          /* expandable segments: address space without memory behind it */
};

typedef struct pending_event {
  grt_stream_id stream;
  uint64_t event;
  cblock *block;
} pending_event;

/* Inserts a step may make into the bins of (pool, stream), or (unmapped) into
 * a private pool's unmapped set (the default pools' are counted in cneeds). */
typedef struct ctally {
  cpool *pool;
  grt_stream_id stream;
  size_t n;
  int unmapped;
} ctally;

#define GRT__CACHING_SPARE_SEGS 3 /* a malloc tries the device at most three times */

/* What a step may need from host memory (caching_reserve.c). */
typedef struct cneeds {
  size_t blocks;      /* cblock structs */
  size_t segs;        /* cseg structs, each with a segment table slot */
  size_t active;      /* new keys in the active map */
  size_t unmapped[2]; /* inserts into the default small [0] and large [1] pool's unmapped set */
  size_t n_bins;      /* entries of caching.tally in use */
} cneeds;

typedef struct caching {
  cpool small, large;
  grt__u64map active;  /* address -> cblock, allocated or pending */
  grt__segtable segs;  /* cseg*, by base */
  pending_event *events; /* in record order */
  size_t n_events, cap_events;
  uint64_t total_allocated_memory; /* bytes obtained from the device */
  size_t n_pending_blocks;         /* freed blocks waiting on events */
  uint64_t allowed_memory;         /* memory_fraction limit, or UINT64_MAX */
  cblock *spare;       /* free list of block structs */
  size_t n_spare;
  cseg *spare_segs[GRT__CACHING_SPARE_SEGS]; /* reserved segment structs */
  unsigned n_spare_segs;
  ctally *tally; /* cneeds' bins inserts, per (pool, stream) */
  size_t cap_tally;
  grt_status last_device_status;
  cprivate **pools; /* private pools, in creation order */
  size_t n_pools, cap_pools;
  ccapture *captures; /* begun pools, in begin order: the newest matching one wins */
  size_t n_captures, cap_captures;
} caching;

static inline int cblock_is_split(const cblock *b) { return b->prev || b->next; }
static inline int cblock_is_expandable(const cblock *b) { return b->seg->is_expandable; }
static inline int cblock_is_free(const cblock *b) { return !b->allocated && b->event_count == 0 && b->n_uses == 0; }

/* caching.c */
cblock *grt__cblock_new(caching *c);
void grt__cblock_release(caching *c, cblock *b);
/* caching_streams.c: a pool's bins index and unmapped set; free only what init made. */
grt_status grt__cpool_init(cpool *p, int stat_type, cprivate *owner);
void grt__cpool_free(cpool *p);
/* The pool's bins for the stream (created if asked), through the one-entry cache. */
grt__bins *grt__pool_bins_lookup(cpool *p, grt_stream_id stream, int create);
/* The stream's bins may hold blocks now (an insert made them non-empty). */
void grt__pool_mark_occupied(cpool *p, grt_stream_id stream);
/* The first index >= i of streams whose bins may hold blocks; n_streams when none.
 * Walk: for (i = next(p, 0); i < p->n_streams; i = next(p, i + 1)). */
size_t grt__pool_next_occupied(const cpool *p, size_t i);
/* Clears the mark of streams[i] if its bins are empty (a walk found them so). */
void grt__pool_settle(cpool *p, size_t i);
/* Every non-empty bins set is marked (grt_alloc_check). */
bool grt__pool_marks_hold(const cpool *p);
static inline grt__bins *grt__pool_bins(cpool *p, grt_stream_id stream, int create) {
  if (p->last_bins && p->last_stream == stream) return p->last_bins;
  return grt__pool_bins_lookup(p, stream, create);
}
static inline grt_status grt__pool_insert(cpool *p, cblock *b) {
  grt__bins *bins = grt__pool_bins(p, b->stream, 1);
  if (!bins) return GRT_ERR_NOMEM;
  b->gc_base = p->get_free_calls;
  b->idle_since = p->cycle;
  grt_status st = grt__bins_insert(bins, b->size, b->ptr, b);
  if (!st && grt__bins_count(bins) == 1) grt__pool_mark_occupied(p, b->stream);
  return st;
}
/* grt__pool_insert where the step reserved the insert (grt__caching_reserve):
 * the bins exist and have room, so it cannot fail. */
static inline void grt__pool_add(cpool *p, cblock *b) {
  grt_status st = grt__pool_insert(p, b);
  assert(st == GRT_OK);
  (void)st;
}
/* Likewise for the pool's unmapped set, keyed (stream, address). */
static inline void grt__unmapped_add(cpool *p, cblock *b) {
  grt_status st = grt__bins_insert(p->unmapped, b->stream, b->ptr, b);
  assert(st == GRT_OK);
  (void)st;
}
static inline void grt__pool_erase(cpool *p, cblock *b) {
  grt__bins *bins = grt__pool_bins(p, b->stream, 0);
  int found = bins && grt__bins_erase(bins, b->size, b->ptr);
  (void)found;
}

/* caching_reserve.c: a step adds up its needs, reserves them, then runs. */
static inline void grt__needs_init(cneeds *n) { *n = (cneeds){0}; }
/* n more inserts into the bins of (pool, stream); GRT_ERR_NOMEM when the tally cannot grow. */
grt_status grt__needs_bins(caching *c, cneeds *nd, cpool *pool, grt_stream_id stream, size_t n);
/* n more inserts into the pool's unmapped set, and how many nd counts so far. */
grt_status grt__needs_unmapped(caching *c, cneeds *nd, cpool *pool, size_t n);
size_t grt__needs_unmapped_count(const caching *c, const cneeds *nd, const cpool *pool);
/* n inserts into the bins of (pool, stream), or, where blocks cross streams
 * (with_event), into those of every stream of the pool. */
grt_status grt__needs_stream(grt_allocator *a, cneeds *nd, cpool *pool, grt_stream_id stream, size_t n);
/* At least n spare block structs. */
grt_status grt__caching_reserve_blocks(caching *c, size_t n);
/* Reserves everything nd lists; GRT_ERR_NOMEM leaves the allocator's state as it was. */
grt_status grt__caching_reserve(grt_allocator *a, const cneeds *nd);
/* A reserved segment struct (zeroed); NULL only when none was reserved. */
cseg *grt__caching_take_seg(caching *c);
/* What freeing every pending block needs (process_events, sync_events). */
grt_status grt__needs_events(caching *c, cneeds *nd);
/* What releasing the cache needs: the pending blocks' frees and the unmaps. */
grt_status grt__needs_release(grt_allocator *a, cneeds *nd);

/* caching_free.c */
uint64_t grt__caching_try_merge(grt_allocator *a, cblock *dst, cblock *src, int force);
grt_status grt__caching_free(grt_allocator *a, grt_devptr ptr);
/* The caller reserved one insert in the bins of b's (pool, stream). */
void grt__caching_free_block(grt_allocator *a, cblock *b);
void grt__caching_process_events(grt_allocator *a);
void grt__caching_sync_events(grt_allocator *a);
/* Likewise for the events of blocks in one private pool only (emptyCache(mempool_id)). */
void grt__caching_sync_pool_events(grt_allocator *a, const cprivate *pp);
/* Release steps return the device's status when it fails a free or unmap
 * (for its own host memory): they stop there, and what went stays gone. */
grt_status grt__caching_release_block(grt_allocator *a, cblock *b);
/* Syncs events, then frees whole free segments idle for at least min_idle cycles. */
grt_status grt__caching_release_cached(grt_allocator *a, uint64_t min_idle);
/* Frees the pool's whole unsplit free segments and unmaps its expandable free pages. */
grt_status grt__caching_release_pool(grt_allocator *a, cpool *pool, uint64_t min_idle);
grt_status grt__caching_release_available(grt_allocator *a, cpool *pool, grt_stream_id stream, uint64_t size,
                                          int *enough);
grt_status grt__caching_garbage_collect(grt_allocator *a);
grt_status grt__caching_record_stream(grt_allocator *a, grt_devptr ptr, grt_stream_id stream);
grt_status grt__caching_empty_cache(grt_allocator *a);
/* empty_cache in two halves (the sharded policy empties all its shards or none):
 * the reservation, which may fail and changes nothing, then the release,
 * which fails only where the device itself does (see release_block). */
grt_status grt__caching_empty_cache_reserve(grt_allocator *a);
grt_status grt__caching_empty_cache_commit(grt_allocator *a);

/* caching_expandable.c */
/* What one expandable allocation of size bytes may need (a new reservation and a map per page run). */
grt_status grt__caching_expandable_needs(grt_allocator *a, cpool *pool, grt_stream_id stream, uint64_t size,
                                         cneeds *nd);
/* What unmapping the free blocks of expandable segments may need (releasing the cache). */
grt_status grt__caching_unmap_needs(grt_allocator *a, cneeds *nd);
cblock *grt__caching_expandable_alloc(grt_allocator *a, cpool *pool, grt_stream_id stream, uint64_t size);
/* Picks among equal-fit candidates by "expandable size" (PyTorch's best fit in expandable mode). */
int grt__caching_expandable_pick(grt__bins *bins, grt__bin_entry *e);
grt_status grt__caching_unmap_block(grt_allocator *a, cblock *b);
/* Maps n pages from va, one device map per page (all or nothing). */
grt_status grt__caching_map_pages(grt_device *dev, grt_devptr va, uint64_t n, uint64_t page);
/* Gives back the pool's wholly unmapped reservations (a freeable private pool's, before erasing it). */
grt_status grt__caching_drop_empty_reservations(grt_allocator *a, cpool *pool);
void grt__caching_destroy_expandable(grt_allocator *a, cseg *s);
grt_status grt__caching_snapshot_expandable(const cseg *s, grt_alloc_snapshot *out);

/* caching_import.c */
grt_status grt__caching_import_segment(grt_allocator *a, grt_devptr base, uint64_t size, grt_stream_id stream,
                                       int is_large);
grt_status grt__caching_import_segment_pool(grt_allocator *a, grt_pool_id id, grt_devptr base, uint64_t size,
                                            grt_stream_id stream, int is_large);

/* caching_pool.c: private pools (PyTorch's graph_pools, captures_underway, graph_pools_freeable) */
static inline int grt__pool_id_is_default(grt_pool_id id) { return !id.first && !id.second; }
static inline int grt__pool_id_equal(grt_pool_id x, grt_pool_id y) {
  return x.first == y.first && x.second == y.second;
}
cprivate *grt__caching_find_pool(const caching *c, grt_pool_id id);
/* A new private pool (use_count 1), not yet registered; NULL for host memory. */
cprivate *grt__cprivate_new(grt_pool_id id);
void grt__cprivate_free(cprivate *pp);
/* Room to register one more pool, then the registering itself (cannot fail). */
grt_status grt__caching_pools_reserve(caching *c);
void grt__caching_pools_add(caching *c, cprivate *pp);
/* The pool a malloc of `size` rounded bytes on `stream` goes to (PyTorch's
 * get_pool): the newest begun pool's on that stream, else a default pool. */
cpool *grt__caching_begun_pool(caching *c, uint64_t size, grt_stream_id stream);
static inline cpool *grt__caching_pick_pool(caching *c, uint64_t size, grt_stream_id stream) {
  if (c->n_captures) return grt__caching_begun_pool(c, size, stream);
  return size <= GRT_SMALL_SIZE ? &c->small : &c->large;
}
/* Releases the free segments of every freeable private pool (only `only`, if
 * non-NULL), erasing each one left without segments (release_cached_blocks). */
grt_status grt__caching_release_freeable(grt_allocator *a, cprivate *only, uint64_t min_idle);
/* Counts a segment the pool gained or lost (PyTorch's cudaMalloc_count). */
static inline void grt__pool_seg_added(cpool *p) {
  if (p->owner) p->owner->n_segs++;
}
static inline void grt__pool_seg_removed(cpool *p) {
  if (p->owner) p->owner->n_segs--;
}
/* Every pool: the default small and large (0, 1), then each private pool's (2 + 2i, 3 + 2i). */
static inline size_t grt__caching_n_cpools(const caching *c) { return 2 + 2 * c->n_pools; }
static inline cpool *grt__caching_cpool_at(caching *c, size_t i) {
  cprivate *pp = i < 2 ? NULL : c->pools[i / 2 - 1];
  if (!pp) return i ? &c->large : &c->small;
  return i % 2 ? &pp->large : &pp->small;
}
static inline grt_pool_id grt__pool_id_of(const cpool *p) { return p->owner ? p->owner->id : (grt_pool_id){0, 0}; }
grt_status grt__caching_pool_retain(grt_allocator *a, grt_pool_id id);
grt_status grt__caching_pool_begin(grt_allocator *a, grt_pool_id id, grt_stream_id stream);
grt_status grt__caching_pool_end(grt_allocator *a, grt_pool_id id, grt_stream_id stream);
grt_status grt__caching_pool_release(grt_allocator *a, grt_pool_id id);
grt_status grt__caching_pool_empty_cache(grt_allocator *a, grt_pool_id id);
grt_status grt__caching_pool_info(grt_allocator *a, grt_pool_id id, grt_pool_info *out);
/* Bytes in the free blocks of private pools (PyTorch's OOM message's
 * "allocated in private pools"). */
uint64_t grt__caching_private_free_bytes(const caching *c);
extern const grt__pool_ops grt__caching_pool_ops;
/* The walker's part for pools: registry, counters, begun pools. */
grt_status grt__caching_check_pools(grt_allocator *a, char *msg, size_t msg_size);
/* Whether the segment's pool is a default pool or one of a registered private pool. */
int grt__caching_pool_known(const caching *c, const cpool *p);
grt_status grt__caching_import_block(grt_allocator *a, grt_devptr addr, uint64_t size, uint64_t requested);

/* caching_inspect.c */
grt_status grt__caching_classify(grt_allocator *a, grt_devptr ptr);
void grt__caching_stats(grt_allocator *a, grt_alloc_stats *out);
grt_status grt__caching_snapshot(grt_allocator *a, grt_alloc_snapshot *out);
grt_status grt__caching_check(grt_allocator *a, char *msg, size_t msg_size);
grt_status grt__caching_block_info(grt_allocator *a, grt_devptr ptr, uint64_t *size, uint64_t *requested);

/* The segment table (base/segtable.h), typed. */
static inline grt_status grt__seg_reserve(caching *c, size_t n) { return grt__segtable_reserve(&c->segs, n); }
static inline grt_status grt__seg_insert(caching *c, cseg *s) {
  return grt__segtable_insert(&c->segs, s->base, s->size, s);
}
static inline void grt__seg_remove(caching *c, cseg *s) { grt__segtable_remove(&c->segs, s->base, s); }
/* The segment holding addr, or NULL. */
static inline cseg *grt__seg_find(const caching *c, grt_devptr addr) { return grt__segtable_find(&c->segs, addr); }
/* The i-th segment by address (i < c->segs.n). */
static inline cseg *grt__seg_at(const caching *c, size_t i) { return grt__segtable_at(&c->segs, i); }

#endif
