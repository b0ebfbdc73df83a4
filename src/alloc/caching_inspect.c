/* caching_inspect.c — looking at the caching allocator without changing it:
 * bad-pointer classification, the extra statistics, the snapshot (PyTorch's
 * segment/block states, segment_pool_id) and the structure walker the tests
 * call after every randomized step, private pools included. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc/caching.h"
#include "alloc/probe.h"

grt_status grt__caching_classify(grt_allocator *a, grt_devptr ptr) {
  caching *c = a->impl;
  cblock *live = grt__u64map_get(&c->active, ptr);
  if (live) { /* freed, still waiting on stream events */
    grt__alloc_set_error(a, "double free of 0x%llx: the block is already freed (pending on stream events)",
                         (unsigned long long)ptr);
    return GRT_ERR_DOUBLE_FREE;
  }
  cseg *s = grt__seg_find(c, ptr);
  if (!s) {
    grt__alloc_set_error(a, "0x%llx was not returned by this allocator", (unsigned long long)ptr);
    return GRT_ERR_UNKNOWN_POINTER;
  }
  for (cblock *b = s->head; b; b = b->next) {
    if (ptr < b->ptr || ptr >= b->ptr + b->size) continue;
    if (b->allocated || b->event_count) {
      grt__alloc_set_error(a, "0x%llx points %llu bytes inside the block at 0x%llx", (unsigned long long)ptr,
                           (unsigned long long)(ptr - b->ptr), (unsigned long long)b->ptr);
      return GRT_ERR_INTERIOR_POINTER;
    }
    grt__alloc_set_error(a, "double free of 0x%llx: the address lies in free cached memory", (unsigned long long)ptr);
    return GRT_ERR_DOUBLE_FREE;
  }
  return GRT_ERR_UNKNOWN_POINTER;
}

grt_status grt__caching_block_info(grt_allocator *a, grt_devptr ptr, uint64_t *size, uint64_t *requested) {
  caching *c = a->impl;
  cblock *b = grt__u64map_get(&c->active, ptr);
  if (!b || !b->allocated) return grt__caching_classify(a, ptr);
  *size = b->size;
  *requested = b->requested_size;
  return GRT_OK;
}

static uint64_t pool_largest(const cpool *p) {
  uint64_t best = 0;
  for (size_t i = grt__pool_next_occupied(p, 0); i < p->n_streams; i = grt__pool_next_occupied(p, i + 1)) {
    grt__bin_entry e;
    if (grt__bins_last(p->stream_bins[i], &e) && e.size > best) best = e.size;
  }
  return best;
}

/* PyTorch's cacheInfo looks at the private pools too. */
void grt__caching_stats(grt_allocator *a, grt_alloc_stats *out) {
  caching *c = a->impl;
  uint64_t largest = 0;
  for (size_t p = 0; p < grt__caching_n_cpools(c); p++) {
    uint64_t l = pool_largest(grt__caching_cpool_at(c, p));
    largest = l > largest ? l : largest;
  }
  out->largest_free_block = largest;
  out->pending_free_blocks = c->n_pending_blocks;
}

static grt_block_state state_of(const cblock *b) {
  if (b->allocated) return GRT_BLOCK_ACTIVE_ALLOCATED;
  return b->event_count ? GRT_BLOCK_ACTIVE_PENDING_FREE : GRT_BLOCK_INACTIVE;
}

static size_t snapshot_segments_needed(const caching *c) {
  size_t n = 0;
  for (size_t i = 0; i < c->segs.n; i++) {
    const cseg *s = grt__seg_at(c, i);
    if (!s->is_expandable) {
      n++;
      continue;
    }
    for (const cblock *b = s->head; b; b = b->next) /* mapped runs */
      n += !b->unmapped && (!b->prev || b->prev->unmapped);
  }
  return n;
}

grt_status grt__caching_snapshot(grt_allocator *a, grt_alloc_snapshot *out) {
  caching *c = a->impl;
  out->segments = calloc(snapshot_segments_needed(c) + 1, sizeof *out->segments);
  if (!out->segments) return GRT_ERR_NOMEM;
  for (size_t i = 0; i < c->segs.n; i++) {
    const cseg *s = grt__seg_at(c, i);
    if (s->is_expandable) {
      grt_status st = grt__caching_snapshot_expandable(s, out);
      if (st) return st;
      continue;
    }
    size_t n = 0;
    for (const cblock *b = s->head; b; b = b->next) n++;
    grt_snapshot_segment *seg = &out->segments[out->n_segments];
    seg->blocks = calloc(n, sizeof *seg->blocks);
    if (!seg->blocks) return GRT_ERR_NOMEM;
    out->n_segments++;
    seg->address = s->base;
    seg->stream = s->stream;
    seg->is_large = s->pool->stat_type == GRT_STAT_LARGE_POOL;
    seg->pool_id = grt__pool_id_of(s->pool);
    seg->n_blocks = n;
    n = 0;
    for (const cblock *b = s->head; b; b = b->next)
      seg->blocks[n++] = (grt_snapshot_block){b->ptr, b->size, b->requested_size, state_of(b)};
    grt__snapshot_segment_totals(seg);
  }
  return GRT_OK;
}

/* ---- the structure walker ---- */

typedef struct recount {
  int64_t allocation[GRT_STAT_TYPES], allocated_bytes[GRT_STAT_TYPES];
  int64_t active[GRT_STAT_TYPES], active_bytes[GRT_STAT_TYPES], requested_bytes[GRT_STAT_TYPES];
  int64_t segment[GRT_STAT_TYPES], reserved_bytes[GRT_STAT_TYPES];
  int64_t inactive_split[GRT_STAT_TYPES], inactive_split_bytes[GRT_STAT_TYPES];
  size_t free_blocks, live_blocks, unmapped_blocks;
  uint64_t mapped_bytes; /* expandable segments' mapped blocks */
} recount;

static void add(int64_t *arr, int pool, int64_t v) {
  arr[GRT_STAT_ALL] += v;
  arr[pool] += v;
}

#define FAIL(...)                            \
  do {                                       \
    snprintf(msg, msg_size, __VA_ARGS__);    \
    return GRT_ERR_INTERNAL;                 \
  } while (0)

static grt_status check_block(grt_allocator *a, const cseg *s, const cblock *b, recount *r, char *msg, size_t msg_size) {
  caching *c = a->impl;
  int pool = s->pool->stat_type;
  if (b->seg != s || b->pool != s->pool) FAIL("block 0x%llx: wrong segment or pool", (unsigned long long)b->ptr);
  if (b->next && b->next->prev != b) FAIL("block 0x%llx: broken next/prev links", (unsigned long long)b->ptr);
  if (b->next && b->ptr + b->size != b->next->ptr)
    FAIL("block 0x%llx+%llu does not touch the next block", (unsigned long long)b->ptr, (unsigned long long)b->size);
  if (b->size == 0 || b->size % GRT_MIN_BLOCK_SIZE) FAIL("block 0x%llx: bad size %llu", (unsigned long long)b->ptr, (unsigned long long)b->size);
  if (b->unmapped) {
    grt__bin_entry e;
    if (!s->is_expandable || (b->ptr - s->base) % s->page || b->size % s->page)
      FAIL("unmapped block 0x%llx: not page-aligned in an expandable segment", (unsigned long long)b->ptr);
    if (!grt__bins_lower_bound(s->pool->unmapped, b->stream, b->ptr, &e) || e.value != b || e.size != b->stream ||
        e.addr != b->ptr)
      FAIL("unmapped block 0x%llx is not in the unmapped set", (unsigned long long)b->ptr);
    if (b->next && b->next->unmapped) FAIL("unmapped blocks 0x%llx and its next were not merged", (unsigned long long)b->ptr);
    r->unmapped_blocks++;
    return GRT_OK;
  }
  r->mapped_bytes += s->is_expandable ? b->size : 0;
  if (cblock_is_free(b)) {
    grt__bins *bins = grt__pool_bins(s->pool, b->stream, 0);
    grt__bin_entry e;
    /* The exact key: a lower bound alone would accept a block whose size shrank below its entry's. */
    if (!bins || !grt__bins_lower_bound(bins, b->size, b->ptr, &e) || e.value != b || e.size != b->size ||
        e.addr != b->ptr)
      FAIL("free block 0x%llx is not in its bins", (unsigned long long)b->ptr);
    if (grt__u64map_get(&c->active, b->ptr) == b) FAIL("free block 0x%llx is still active", (unsigned long long)b->ptr);
    if (b->next && cblock_is_free(b->next) && !b->next->unmapped && !a->cfg.no_merge_on_free) FAIL("free blocks 0x%llx and its next were not merged", (unsigned long long)b->ptr);
    r->free_blocks++;
    if (cblock_is_split(b) && !s->is_expandable) {
      add(r->inactive_split, pool, 1);
      add(r->inactive_split_bytes, pool, (int64_t)b->size);
    }
    return GRT_OK;
  }
  if (grt__u64map_get(&c->active, b->ptr) != b) FAIL("live block 0x%llx is not in the active map", (unsigned long long)b->ptr);
  r->live_blocks++;
  if (b->allocated) {
    add(r->allocation, pool, 1);
    add(r->allocated_bytes, pool, (int64_t)b->size);
    if (b->requested_size > b->size) FAIL("block 0x%llx: requested above size", (unsigned long long)b->ptr);
  }
  add(r->active, pool, 1);
  add(r->active_bytes, pool, (int64_t)b->size);
  add(r->requested_bytes, pool, (int64_t)b->requested_size);
  return GRT_OK;
}

static size_t segments_of(const caching *c, const cprivate *pp) {
  size_t n = 0;
  for (size_t i = 0; i < c->segs.n; i++) n += grt__seg_at(c, i)->pool->owner == pp;
  return n;
}

static grt_status check_pool(const caching *c, size_t i, char *msg, size_t msg_size) {
  const cprivate *pp = c->pools[i];
  unsigned long long f = pp->id.first, g = pp->id.second;
  if (grt__pool_id_is_default(pp->id)) FAIL("private pool %zu has the default id (0, 0)", i);
  for (size_t j = 0; j < i; j++)
    if (grt__pool_id_equal(c->pools[j]->id, pp->id)) FAIL("two private pools have the id (%llu, %llu)", f, g);
  if (pp->small.owner != pp || pp->large.owner != pp || pp->small.stat_type != GRT_STAT_SMALL_POOL ||
      pp->large.stat_type != GRT_STAT_LARGE_POOL)
    FAIL("private pool (%llu, %llu): its small or large pool is not its own", f, g);
  size_t n = segments_of(c, pp);
  if (n != pp->n_segs) FAIL("private pool (%llu, %llu) counts %zu segments but holds %zu", f, g, pp->n_segs, n);
  return GRT_OK;
}

grt_status grt__caching_check_pools(grt_allocator *a, char *msg, size_t msg_size) {
  caching *c = a->impl;
  if (c->small.owner || c->large.owner) FAIL("a default pool has an owner");
  for (size_t i = 0; i < c->n_pools; i++) {
    grt_status st = check_pool(c, i, msg, msg_size);
    if (st) return st;
  }
  for (size_t i = 0; i < c->n_captures; i++) {
    const cprivate *pp = c->captures[i].pool;
    size_t k = 0;
    while (k < c->n_pools && c->pools[k] != pp) k++;
    if (k == c->n_pools) FAIL("begun pool %zu is not a known pool", i);
    if (!pp->use_count)
      FAIL("begun pool (%llu, %llu) is freeable", (unsigned long long)pp->id.first, (unsigned long long)pp->id.second);
    for (size_t j = 0; j < i; j++)
      if (c->captures[j].pool == pp)
        FAIL("pool (%llu, %llu) is begun twice", (unsigned long long)pp->id.first, (unsigned long long)pp->id.second);
  }
  return GRT_OK;
}

static grt_status compare(const char *name, const grt_stat *st, const int64_t *rc, char *msg, size_t msg_size) {
  for (int t = 0; t < GRT_STAT_TYPES; t++)
    if (st[t].current != rc[t])
      FAIL("stat %s[%d].current = %lld but a recount gives %lld", name, t, (long long)st[t].current, (long long)rc[t]);
  return GRT_OK;
}

grt_status grt__caching_check(grt_allocator *a, char *msg, size_t msg_size) {
  caching *c = a->impl;
  recount r;
  memset(&r, 0, sizeof r);
  uint64_t reserved = 0;
  for (size_t i = 0; i < c->segs.n; i++) {
    const cseg *s = grt__seg_at(c, i), *prev = i > 0 ? grt__seg_at(c, i - 1) : NULL;
    if (prev && prev->base + prev->size > s->base)
      FAIL("segments 0x%llx and 0x%llx overlap", (unsigned long long)prev->base, (unsigned long long)s->base);
    if (!s->head || s->head->ptr != s->base || s->head->prev) FAIL("segment 0x%llx: bad head", (unsigned long long)s->base);
    if (!grt__caching_pool_known(c, s->pool))
      FAIL("segment 0x%llx: its pool is not a known pool", (unsigned long long)s->base);
    const cblock *last = NULL;
    for (const cblock *b = s->head; b; b = b->next) {
      grt_status st = check_block(a, s, b, &r, msg, msg_size);
      if (st) return st;
      last = b;
    }
    if (last->ptr + last->size != s->base + s->size) FAIL("segment 0x%llx: blocks do not reach its end", (unsigned long long)s->base);
    if (s->is_expandable) { /* reserved = mapped bytes; no segment count (as PyTorch) */
      add(r.reserved_bytes, s->pool->stat_type, (int64_t)r.mapped_bytes);
      reserved += r.mapped_bytes;
      r.mapped_bytes = 0;
      continue;
    }
    add(r.segment, s->pool->stat_type, 1);
    add(r.reserved_bytes, s->pool->stat_type, (int64_t)s->size);
    reserved += s->size;
  }
  size_t indexed = 0, unmapped = 0;
  for (size_t p = 0; p < grt__caching_n_cpools(c); p++) {
    const cpool *pool = grt__caching_cpool_at(c, p);
    for (size_t i = 0; i < pool->n_streams; i++) {
      if (grt__u64map_get(&pool->bins, pool->streams[i]) != pool->stream_bins[i] ||
          (i && pool->streams[i - 1] >= pool->streams[i]))
        FAIL("pool stream table out of order at %zu", i);
      indexed += grt__bins_count(pool->stream_bins[i]);
    }
    if (!grt__pool_marks_hold(pool)) FAIL("a stream holding free blocks is not marked occupied");
    unmapped += grt__bins_count(pool->unmapped);
  }
  if (indexed != r.free_blocks) FAIL("%zu blocks indexed but %zu free blocks found", indexed, r.free_blocks);
  if (unmapped != r.unmapped_blocks)
    FAIL("unmapped sets hold %zu blocks but %zu unmapped blocks found", unmapped, r.unmapped_blocks);
  if (c->active.count != r.live_blocks) FAIL("%zu active entries but %zu live blocks found", c->active.count, r.live_blocks);
  if (reserved != c->total_allocated_memory) FAIL("reserved recount %llu != %llu", (unsigned long long)reserved, (unsigned long long)c->total_allocated_memory);
  grt_status st = grt__caching_check_pools(a, msg, msg_size);
  if (st) return st;
  const grt_alloc_stats *s = &a->stats;
  if ((st = compare("allocation", s->allocation, r.allocation, msg, msg_size)) ||
      (st = compare("allocated_bytes", s->allocated_bytes, r.allocated_bytes, msg, msg_size)) ||
      (st = compare("active", s->active, r.active, msg, msg_size)) ||
      (st = compare("active_bytes", s->active_bytes, r.active_bytes, msg, msg_size)) ||
      (st = compare("requested_bytes", s->requested_bytes, r.requested_bytes, msg, msg_size)) ||
      (st = compare("segment", s->segment, r.segment, msg, msg_size)) ||
      (st = compare("reserved_bytes", s->reserved_bytes, r.reserved_bytes, msg, msg_size)) ||
      (st = compare("inactive_split", s->inactive_split, r.inactive_split, msg, msg_size)) ||
      (st = compare("inactive_split_bytes", s->inactive_split_bytes, r.inactive_split_bytes, msg, msg_size)))
    return st;
  return GRT_OK;
}

/* Whether release_cached_blocks may release from this pool: the default
 * pools, and private pools nobody uses any more (freeable). */
static int pool_releasable(const cpool *p) { return !p->owner || p->owner->use_count == 0; }

/* The whole pages inside a free mapped block of an expandable segment. */
static void releasable_pages(const cseg *s, const cblock *b, grt__range_fn fn, void *ctx) {
  uint64_t first = (b->ptr - s->base + s->page - 1) / s->page, last = (b->ptr + b->size - s->base) / s->page;
  if (first < last) fn(ctx, s->base + first * s->page, (last - first) * s->page, s->stream);
}

grt_status grt__alloc_releasable(grt_allocator *a, grt__range_fn fn, void *ctx) {
  if (!a || !fn) return GRT_ERR_INVALID_ARG;
  if (a->ops != &grt__caching_ops) return GRT_ERR_UNSUPPORTED;
  pthread_mutex_lock(&a->lock);
  caching *c = a->impl;
  for (size_t i = 0; i < c->segs.n; i++) {
    const cseg *s = grt__seg_at(c, i);
    if (!pool_releasable(s->pool)) continue;
    for (const cblock *b = s->head; b; b = b->next) {
      if (b->allocated || b->unmapped) continue;
      if (s->is_expandable)
        releasable_pages(s, b, fn, ctx);
      else if (!b->prev && !b->next) /* a whole unsplit segment, free once its events are synced */
        fn(ctx, s->base, s->size, s->stream);
    }
  }
  pthread_mutex_unlock(&a->lock);
  return GRT_OK;
}
