/* caching.h — PyTorch's CUDA caching allocator: shared internals (internal).
 *
 * Memory comes from the device in segments; a segment is tiled by blocks in
 * address order (prev/next). A block is allocated, pending (freed but waiting
 * for events on streams that used it), or free; free blocks live in their
 * pool's bins for their stream, keyed (size, address). Two pools: small
 * (blocks <= 1 MiB, 2 MiB segments) and large.
 *
 * Invariants (grt_alloc_check walks them): blocks tile their segment; a free
 * block is in exactly one bins set and never next to another free block; live
 * and pending blocks are in `active`; stats equal a recount.
 */
#ifndef GRT_ALLOC_CACHING_H
#define GRT_ALLOC_CACHING_H

#include "alloc/allocator_impl.h"
#include "alloc/bins.h"
#include "base/segtable.h"
#include "base/u64map.h"

typedef struct cpool cpool;
typedef struct cseg cseg;
typedef struct cblock cblock;

struct cpool {
  int stat_type;             /* GRT_STAT_SMALL_POOL or GRT_STAT_LARGE_POOL */
  grt__u64map bins;          /* stream -> grt__bins* of free blocks */
  grt_stream_id *streams;    /* streams having a bins set, ascending */
  size_t n_streams, cap_streams;
  uint64_t get_free_calls;   /* garbage collection's clock */
  uint64_t cycle;            /* empty_cache calls so far (the idle-cycles policy's clock) */
  grt__bins *unmapped;       /* expandable mode: unmapped blocks keyed (stream, address) */
  grt__bins *last_bins;      /* the bins last looked up (NULL: none yet); a pool's bins live until */
  grt_stream_id last_stream; /* the pool is freed, so this cache never goes stale */
};

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
  grt_status last_device_status;
} caching;

static inline int cblock_is_split(const cblock *b) { return b->prev || b->next; }
static inline int cblock_is_expandable(const cblock *b) { return b->seg->is_expandable; }
static inline int cblock_is_free(const cblock *b) { return !b->allocated && b->event_count == 0 && b->n_uses == 0; }

/* caching.c */
cblock *grt__cblock_new(caching *c);
void grt__cblock_release(caching *c, cblock *b);
/* The pool's bins for the stream (created if asked), through the one-entry cache. */
grt__bins *grt__pool_bins_lookup(cpool *p, grt_stream_id stream, int create);
static inline grt__bins *grt__pool_bins(cpool *p, grt_stream_id stream, int create) {
  if (p->last_bins && p->last_stream == stream) return p->last_bins;
  return grt__pool_bins_lookup(p, stream, create);
}
static inline grt_status grt__pool_insert(cpool *p, cblock *b) {
  grt__bins *bins = grt__pool_bins(p, b->stream, 1);
  if (!bins) return GRT_ERR_NOMEM;
  b->gc_base = p->get_free_calls;
  b->idle_since = p->cycle;
  return grt__bins_insert(bins, b->size, b->ptr, b);
}
static inline void grt__pool_erase(cpool *p, cblock *b) {
  grt__bins *bins = grt__pool_bins(p, b->stream, 0);
  int found = bins && grt__bins_erase(bins, b->size, b->ptr);
  (void)found;
}

/* caching_free.c */
uint64_t grt__caching_try_merge(grt_allocator *a, cblock *dst, cblock *src, int force);
grt_status grt__caching_free(grt_allocator *a, grt_devptr ptr);
void grt__caching_free_block(grt_allocator *a, cblock *b);
void grt__caching_process_events(grt_allocator *a);
void grt__caching_sync_events(grt_allocator *a);
void grt__caching_release_block(grt_allocator *a, cblock *b);
/* Syncs events, then frees whole free segments idle for at least min_idle cycles. */
void grt__caching_release_cached(grt_allocator *a, uint64_t min_idle);
int grt__caching_release_available(grt_allocator *a, cpool *pool, grt_stream_id stream, uint64_t size);
void grt__caching_garbage_collect(grt_allocator *a);
grt_status grt__caching_record_stream(grt_allocator *a, grt_devptr ptr, grt_stream_id stream);
grt_status grt__caching_empty_cache(grt_allocator *a);

/* caching_expandable.c */
cblock *grt__caching_expandable_alloc(grt_allocator *a, cpool *pool, grt_stream_id stream, uint64_t size);
/* Picks among equal-fit candidates by "expandable size" (PyTorch's best fit in expandable mode). */
int grt__caching_expandable_pick(grt__bins *bins, grt__bin_entry *e);
void grt__caching_unmap_block(grt_allocator *a, cblock *b);
void grt__caching_destroy_expandable(grt_allocator *a, cseg *s);
grt_status grt__caching_snapshot_expandable(const cseg *s, grt_alloc_snapshot *out);

/* caching_import.c */
grt_status grt__caching_import_segment(grt_allocator *a, grt_devptr base, uint64_t size, grt_stream_id stream,
                                       int is_large);
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
