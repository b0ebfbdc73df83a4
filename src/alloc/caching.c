/* caching.c — the caching allocator's malloc path, in PyTorch's order:
 *
 *   0. reserve the host memory every later step may need (caching_reserve.c),
 *      so that a GRT_ERR_NOMEM comes before anything changed;
 *   1. process completed events of deferred frees;
 *   2. round the size, pick the pool, compute the segment size;
 *   3. best fit in the pool's bins for this stream (PyTorch never reuses another
 *      stream's block; the with_event policy may, counting an event edge);
 *   4. none: garbage-collect (if configured), device malloc; else release
 *      oversize cached blocks (if max_split_size is set) and malloc again; else
 *      release every cached segment and malloc once more (num_alloc_retries);
 *   5. still none: OOM (num_ooms) with "allocated vs reserved" in the message;
 *   6. split the block if the rule says so (allocation at the front), mark it
 *      allocated.
 * Free, merge, events and release are in caching_free.c; snapshot and the
 * structure walker in caching_inspect.c.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc/caching.h"
#include "alloc/probe.h"

/* ---- block structs ---- */

/* A block with every field zero. Copied in, not memset: gcc expands a
 * 112-byte memset (or a compound literal) into `rep stos`, whose start-up cost
 * was 18% of each cache hit's malloc in `perf` (two per split); a copy of a
 * constant is seven vector stores, and covers every field the struct has. */
static const cblock zero_block;

cblock *grt__cblock_new(caching *c) {
  cblock *b = c->spare;
  if (b) {
    c->spare = b->next;
    c->n_spare--;
  } else if (!(b = malloc(sizeof *b))) {
    return NULL;
  }
  *b = zero_block;
  return b;
}

void grt__cblock_release(caching *c, cblock *b) {
  free(b->uses);
  b->uses = NULL;
  b->next = c->spare;
  c->spare = b;
  c->n_spare++;
}

/* ---- create / destroy ---- */

static grt_status caching_create(grt_allocator *a) {
  uint64_t granularity;
  if (a->cfg.expandable_segments && grt_device_vmm_granularity(a->dev, &granularity) != GRT_OK) {
    grt__alloc_set_error(a, "expandable_segments needs a device with virtual memory (reserve/map)");
    return GRT_ERR_UNSUPPORTED;
  }
  caching *c = grt__alloc_lines(sizeof *c);
  if (!c) return GRT_ERR_NOMEM;
  if (grt__cpool_init(&c->small, GRT_STAT_SMALL_POOL, NULL) || grt__cpool_init(&c->large, GRT_STAT_LARGE_POOL, NULL)) {
    grt__cpool_free(&c->small);
    grt__cpool_free(&c->large);
    free(c);
    return GRT_ERR_NOMEM;
  }
  grt__u64map_init(&c->active);
  c->allowed_memory = UINT64_MAX;
  if (a->cfg.memory_fraction > 0.0) {
    grt_device_stats ds;
    grt__ignore(grt_device_get_stats(a->dev, &ds)); /* a device and a buffer: it cannot fail */
    c->allowed_memory = (uint64_t)(a->cfg.memory_fraction * (double)ds.capacity);
  }
  a->impl = c;
  return GRT_OK;
}

static void caching_destroy(grt_allocator *a) {
  caching *c = a->impl;
  for (size_t i = 0; i < c->n_events; i++)
    if (a->cfg.stream_ops && a->cfg.stream_ops->event_destroy)
      a->cfg.stream_ops->event_destroy(a->cfg.stream_ops->ctx, c->events[i].event);
  for (size_t i = 0; i < c->segs.n; i++) {
    cseg *s = grt__seg_at(c, i);
    if (s->is_expandable)
      grt__caching_destroy_expandable(a, s);
    else /* teardown (void op): a refusal leaves the segment to the device */
      grt__ignore(grt_device_free(a->dev, s->base));
    for (cblock *b = s->head, *n; b; b = n) {
      n = b->next;
      free(b->uses);
      free(b);
    }
    free(s);
  }
  while (c->spare) {
    cblock *n = c->spare->next;
    free(c->spare);
    c->spare = n;
  }
  while (c->n_spare_segs) free(c->spare_segs[--c->n_spare_segs]);
  free(c->tally);
  for (size_t i = 0; i < c->n_pools; i++) grt__cprivate_free(c->pools[i]);
  free(c->pools);
  free(c->captures);
  grt__cpool_free(&c->small);
  grt__cpool_free(&c->large);
  grt__u64map_free(&c->active);
  grt__segtable_free(&c->segs);
  free(c->events);
  free(c);
}

/* ---- the malloc path ---- */

typedef struct params {
  uint64_t size;       /* rounded */
  uint64_t requested;  /* what the caller asked for */
  uint64_t alloc_size; /* segment size if a device malloc is needed */
  grt_stream_id stream;
  cpool *pool;
  int release_reserved; /* room for a release (the unmaps of a flush) is reserved */
} params;

/* PyTorch's max_split_size rules for taking a cached block of size bsize >= size. */
static int oversize_refused(const grt_allocator *a, uint64_t size, uint64_t bsize) {
  uint64_t mss = a->cfg.max_split_size;
  if (size < mss && bsize >= mss) return 1;                                   /* small request, oversize block */
  if (size >= mss && bsize - size >= a->cfg.max_non_split_rounding) return 1; /* too much waste */
  return 0;
}

/* The fit=first option: the lowest-address block that fits (a linear scan). */
static int first_fit(grt_allocator *a, grt__bins *bins, uint64_t size, grt__bin_entry *out) {
  grt__bin_entry e;
  int found = 0;
  for (int more = grt__bins_lower_bound(bins, size, 0, &e); more; more = grt__bins_next(bins, e.size, e.addr, &e))
    if (!oversize_refused(a, size, e.size) && (!found || e.addr < out->addr)) {
      *out = e;
      found = 1;
    }
  return found;
}

/* Best fit in the pool's bins for this stream: the bins holding it, or NULL.
 * It only looks: the entry leaves the bins once the step's memory is reserved. */
static grt__bins *find_free_block(grt_allocator *a, const params *p, grt__bin_entry *e) {
  grt__bins *bins = grt__pool_bins(p->pool, p->stream, 0);
  if (!bins) return NULL;
  if (a->cfg.fit == GRT_FIT_FIRST) return first_fit(a, bins, p->size, e) ? bins : NULL;
  if (!grt__bins_lower_bound(bins, p->size, 0, e)) return NULL;
  if (a->cfg.expandable_segments) grt__caching_expandable_pick(bins, e);
  return oversize_refused(a, p->size, e->size) ? NULL : bins;
}

/* with_event policy: the best fit among other streams' cached blocks (it only looks). */
static grt__bins *find_cross_stream_block(grt_allocator *a, const params *p, grt__bin_entry *best) {
  grt__bins *found = NULL;
  cpool *pool = p->pool;
  for (size_t i = grt__pool_next_occupied(pool, 0); i < pool->n_streams; i = grt__pool_next_occupied(pool, i + 1)) {
    if (pool->streams[i] == p->stream) continue;
    grt__bins *bins = pool->stream_bins[i];
    grt__bin_entry e;
    if (!grt__bins_lower_bound(bins, p->size, 0, &e)) continue;
    if (oversize_refused(a, p->size, e.size)) continue;
    if (!found || e.size < best->size || (e.size == best->size && e.addr < best->addr)) {
      *best = e;
      found = bins;
    }
  }
  return found;
}

/* cudaMalloc of a new segment; NULL when the device (or the memory fraction)
 * says no, with its status in last_device_status. Its structs were reserved. */
static cblock *alloc_block(grt_allocator *a, const params *p, int is_retry) {
  caching *c = a->impl;
  if (is_retry) a->stats.num_alloc_retries++;
  uint64_t size = p->alloc_size;
  if (c->allowed_memory != UINT64_MAX && c->total_allocated_memory + size > c->allowed_memory) {
    c->last_device_status = GRT_ERR_OOM;
    return NULL;
  }
  if (a->cfg.expandable_segments) { /* maps the rounded size, not a segment size */
    c->last_device_status = GRT_ERR_OOM;
    return grt__caching_expandable_alloc(a, p->pool, p->stream, p->size);
  }
  grt_devptr ptr = 0;
  grt_status st = grt_device_malloc(a->dev, size, &ptr);
  if (st) {
    c->last_device_status = st;
    return NULL;
  }
  cseg *s = grt__caching_take_seg(c);
  cblock *b = grt__cblock_new(c);
  assert(s && b); /* reserved by the step */
  *s = (cseg){.base = ptr, .size = size, .pool = p->pool, .stream = p->stream, .head = b};
  st = grt__seg_insert(c, s);
  assert(st == GRT_OK); /* a table slot was reserved */
  (void)st;
  b->ptr = ptr;
  b->size = size;
  b->stream = p->stream;
  b->pool = p->pool;
  b->seg = s;
  c->total_allocated_memory += size;
  grt__pool_seg_added(p->pool);
  grt__stat_update2(a->stats.segment, p->pool->stat_type, 1);
  grt__stat_update2(a->stats.reserved_bytes, p->pool->stat_type, (int64_t)size);
  if (size >= a->cfg.max_split_size) grt__stat_update(&a->stats.oversize_segments, 1);
  a->stats.num_device_alloc++;
  return b;
}

static int should_split(const grt_allocator *a, const cblock *b, uint64_t size) {
  uint64_t remaining = b->size - size;
  if (b->pool->stat_type == GRT_STAT_SMALL_POOL || a->cfg.expandable_segments) return remaining >= GRT_MIN_BLOCK_SIZE;
  return size < a->cfg.max_split_size && remaining > GRT_SMALL_SIZE;
}

/* Splits if the rule says so and marks the (front) block allocated. The front
 * struct, the active entry and the remainder's insert were reserved. */
static void alloc_found_block(grt_allocator *a, cblock *block, const params *p, grt_devptr *out) {
  caching *c = a->impl;
  int pool = p->pool->stat_type;
  int already_split = cblock_is_split(block);
  if (should_split(a, block, p->size)) {
    cblock *front = grt__cblock_new(c);
    assert(front);
    front->ptr = block->ptr; /* the other fields are zero (grt__cblock_new) */
    front->size = p->size;
    front->stream = p->stream;
    front->pool = block->pool;
    front->seg = block->seg;
    front->prev = block->prev;
    front->next = block;
    cblock *remaining = block;
    if (front->prev)
      front->prev->next = front;
    else
      front->seg->head = front;
    remaining->prev = front;
    remaining->ptr += p->size;
    remaining->size -= p->size;
    grt__pool_add(remaining->pool, remaining);
    if (cblock_is_expandable(front)) {
      /* PyTorch leaves expandable blocks out of inactive_split */
    } else if (already_split) {
      grt__stat_update2(a->stats.inactive_split_bytes, pool, -(int64_t)front->size);
    } else {
      grt__stat_update2(a->stats.inactive_split_bytes, pool, (int64_t)remaining->size);
      grt__stat_update2(a->stats.inactive_split, pool, 1);
    }
    block = front;
  } else if (already_split && !cblock_is_expandable(block)) {
    grt__stat_update2(a->stats.inactive_split_bytes, pool, -(int64_t)block->size);
    grt__stat_update2(a->stats.inactive_split, pool, -1);
  }
  bool put = grt__u64map_put(&c->active, block->ptr, block);
  assert(put); /* room reserved */
  (void)put;
  block->allocated = 1;
  block->stream = p->stream;
  block->requested_size = p->requested;
  grt__stat_update2(a->stats.allocation, pool, 1);
  grt__stat_update2(a->stats.allocated_bytes, pool, (int64_t)block->size);
  grt__stat_update2(a->stats.active, pool, 1);
  grt__stat_update2(a->stats.active_bytes, pool, (int64_t)block->size);
  grt__stat_update2(a->stats.requested_bytes, pool, (int64_t)block->requested_size);
  if (block->size >= a->cfg.max_split_size) grt__stat_update(&a->stats.oversize_allocations, 1);
  *out = block->ptr;
}

static void set_oom_message(grt_allocator *a, const params *p) {
  caching *c = a->impl;
  grt_device_stats ds;
  grt__ignore(grt_device_get_stats(a->dev, &ds)); /* a device and a buffer: it cannot fail */
  /* PyTorch counts the free blocks of private pools as "allocated in private pools" */
  uint64_t private_free = grt__caching_private_free_bytes(c);
  uint64_t allocated = (uint64_t)a->stats.allocated_bytes[GRT_STAT_ALL].current + private_free;
  uint64_t reserved = (uint64_t)a->stats.reserved_bytes[GRT_STAT_ALL].current;
  char want[32], cap[32], fr[32], al[32], un[32], pr[32], with[64] = "";
  if (private_free)
    snprintf(with, sizeof with, ", with %s allocated in private pools,", grt_format_bytes(private_free, pr, sizeof pr));
  grt__alloc_set_error(a,
                       "out of memory: tried to allocate %s; the device has a total capacity of %s of which %s is "
                       "free%s. Of the memory in use, %s is allocated%s and %s is reserved but unallocated",
                       grt_format_bytes(p->requested, want, sizeof want), grt_format_bytes(ds.capacity, cap, sizeof cap),
                       grt_format_bytes(ds.free_bytes, fr, sizeof fr),
                       c->last_device_status == GRT_ERR_FAULT_INJECTED ? " (device malloc failed by fault injection)" : "",
                       grt_format_bytes(allocated, al, sizeof al), with,
                       grt_format_bytes(reserved - allocated, un, sizeof un));
}

/* A cache hit from bins, reserved directly (the hot path): the front struct of
 * a split, its active entry, the remainder's insert into the same bins. */
static grt_status reserve_hit(caching *c, grt__bins *bins) {
  if (c->n_spare < 1 && grt__caching_reserve_blocks(c, 1)) return GRT_ERR_NOMEM;
  if (!grt__u64map_reserve(&c->active, 1)) return GRT_ERR_NOMEM;
  return grt__bins_reserve(bins, 1);
}

/* What a cache hit still unknown needs: the front struct of a split, its
 * active entry and the remainder's insert (into any bins the hit may use). */
static grt_status needs_hit(grt_allocator *a, const params *p, cneeds *nd) {
  nd->blocks += 1;
  nd->active += 1;
  return grt__needs_stream(a, nd, p->pool, p->stream, 1);
}

/* What the device path needs: a new segment (its struct, block and table slot,
 * or for expandable segments up to three tries of maps) and then the split of
 * the hit path. The unmaps of a flush between the tries are reserved apart
 * (reserve_release): counting them walks every block of every expandable
 * segment, too slow for every miss, and most misses never flush. */
static grt_status needs_miss(grt_allocator *a, const params *p, cneeds *nd) {
  grt_status st = needs_hit(a, p, nd);
  if (st || !a->cfg.expandable_segments) {
    nd->segs += 1;
    nd->blocks += 1;
    return st;
  }
  for (int i = 0; i < GRT__CACHING_SPARE_SEGS && !st; i++)
    st = grt__caching_expandable_needs(a, p->pool, p->stream, p->size, nd);
  return st;
}

/* Before the first step of a miss that releases memory (garbage collection,
 * a flush): room for the unmaps a release of expandable segments makes, with
 * the miss path's own needs again (nothing was used since they were
 * reserved, so reserving both from the current state covers both). It is
 * taken up front, before the first device try, whenever that try may be
 * refused (device_may_refuse): a refused try is seen on the device (its
 * failed-malloc count, pages mapped, a reservation made), so a later
 * failure to reserve would not leave everything as it was. */
static grt_status reserve_release(grt_allocator *a, params *p) {
  if (p->release_reserved || !a->cfg.expandable_segments) return GRT_OK;
  cneeds nd;
  grt__needs_init(&nd);
  grt_status st = grt__caching_unmap_needs(a, &nd); /* first: the tries after it map what it unmaps */
  if (!st) st = needs_miss(a, p, &nd);
  if (!st) st = grt__caching_reserve(a, &nd);
  if (!st) p->release_reserved = 1;
  return st;
}

/* Whether the first device try of an expandable miss may be refused: the
 * device lacks the bytes, with a large segment's worth of slack for the page
 * rounding, or a contiguous large segment's worth for a page. */
static int device_may_refuse(grt_allocator *a, const params *p) {
  if (!a->cfg.expandable_segments) return 0;
  grt_device_stats ds;
  if (grt_device_get_stats(a->dev, &ds)) return 1;
  return ds.free_bytes < p->size + 2 * GRT_LARGE_BUFFER || ds.largest_hole < GRT_LARGE_BUFFER;
}

/* No cached block fits: garbage collection, the device, then PyTorch's two
 * flushes, each followed by another try. *out NULL: out of memory. A failure
 * of the device itself for host memory (GRT_ERR_NOMEM) stops it at once. */
static grt_status alloc_miss(grt_allocator *a, params *p, cblock **out) {
  caching *c = a->impl;
  grt_status st = GRT_OK;
  int enough = 0;
  if (a->cfg.garbage_collection_threshold > 0.0 && c->allowed_memory != UINT64_MAX &&
      !(st = reserve_release(a, p)))
    st = grt__caching_garbage_collect(a);
  if (!st && !(*out = alloc_block(a, p, 0)) && c->last_device_status != GRT_ERR_NOMEM &&
      !(st = reserve_release(a, p))) {
    st = grt__caching_release_available(a, p->pool, p->stream, p->size, &enough);
    if (!st && enough) *out = alloc_block(a, p, 0);
    /* PyTorch skips the final flush while a pool is begun (captures_underway) */
    if (!st && !*out && c->last_device_status != GRT_ERR_NOMEM && !c->n_captures &&
        !(st = grt__caching_release_cached(a, 0)))
      *out = alloc_block(a, p, 1);
  }
  if (!st && !*out && c->last_device_status == GRT_ERR_NOMEM) st = GRT_ERR_NOMEM;
  return st;
}

static grt_status caching_malloc(grt_allocator *a, uint64_t size, grt_stream_id stream, grt_devptr *out) {
  caching *c = a->impl;
  params p;
  p.requested = size;
  p.size = grt_alloc_round_size(&a->cfg, size);
  p.pool = grt__caching_pick_pool(c, p.size, stream);
  p.alloc_size = grt_alloc_segment_size(p.size);
  p.stream = stream;
  p.release_reserved = 0;
  /* no call when nothing is pending; none while a pool is begun, as PyTorch
     queries no event during a capture */
  int events = c->n_events > 0 && !c->n_captures;
  cneeds nd;
  grt__needs_init(&nd);
  grt_status st;
  if (events) { /* the search comes after the events: reserve for every path now */
    if ((st = grt__needs_events(c, &nd)) || (a->cfg.expandable_segments && (st = grt__caching_unmap_needs(a, &nd))) ||
        (st = needs_miss(a, &p, &nd)) || (st = grt__caching_reserve(a, &nd)))
      return st;
    p.release_reserved = 1;
    grt__caching_process_events(a);
  }
  grt__bin_entry e;
  grt__bins *bins = find_free_block(a, &p, &e);
  int cross = 0;
  if (!bins && a->cfg.cross_stream == GRT_CROSS_STREAM_WITH_EVENT)
    cross = (bins = find_cross_stream_block(a, &p, &e)) != NULL;
  if (!events) { /* nothing changed yet: reserve for the path found */
    if (bins)
      st = reserve_hit(c, bins);
    else if (device_may_refuse(a, &p))
      st = reserve_release(a, &p); /* the miss path's needs with the flush's */
    else if (!(st = needs_miss(a, &p, &nd)))
      st = grt__caching_reserve(a, &nd);
    if (st) return st;
  }
  if (a->cfg.garbage_collection_threshold > 0.0 && a->cfg.memory_fraction > 0.0) p.pool->get_free_calls++;
  cblock *block = NULL;
  if (bins) {
    grt__bins_erase(bins, e.size, e.addr);
    block = e.value;
    a->stats.cross_stream_syncs += (uint64_t)cross;
    a->stats.num_cache_hits++;
  } else if ((st = alloc_miss(a, &p, &block))) {
    return st;
  } else if (!block) {
    a->stats.num_ooms++;
    set_oom_message(a, &p);
    return GRT_ERR_OOM;
  }
  alloc_found_block(a, block, &p, out);
  return GRT_OK;
}

const grt__alloc_ops grt__caching_ops = {
    .name = "caching",
    .create = caching_create,
    .destroy = caching_destroy,
    .malloc = caching_malloc,
    .free = grt__caching_free,
    .record_stream = grt__caching_record_stream,
    .empty_cache = grt__caching_empty_cache,
    .block_info = grt__caching_block_info,
    .stats = grt__caching_stats,
    .snapshot = grt__caching_snapshot,
    .check = grt__caching_check,
    .import_segment = grt__caching_import_segment,
    .import_block = grt__caching_import_block,
    .pools = &grt__caching_pool_ops,
};

grt_status grt__alloc_cache_would_serve(grt_allocator *a, uint64_t size, grt_stream_id stream, bool *out) {
  if (!a || !out || !size) return GRT_ERR_INVALID_ARG;
  if (a->ops != &grt__caching_ops) return GRT_ERR_UNSUPPORTED;
  pthread_mutex_lock(&a->lock);
  caching *c = a->impl;
  params p = {.requested = size, .size = grt_alloc_round_size(&a->cfg, size), .stream = stream};
  p.pool = grt__caching_pick_pool(c, p.size, stream);
  p.alloc_size = grt_alloc_segment_size(p.size);
  grt__bin_entry e;
  *out = find_free_block(a, &p, &e) != NULL ||
         (a->cfg.cross_stream == GRT_CROSS_STREAM_WITH_EVENT && find_cross_stream_block(a, &p, &e) != NULL);
  pthread_mutex_unlock(&a->lock);
  return GRT_OK;
}
