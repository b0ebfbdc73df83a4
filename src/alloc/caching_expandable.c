/* caching_expandable.c — expandable segments (PYTORCH_CUDA_ALLOC_CONF=
 * expandable_segments:True).
 *
 * One segment per (stream, pool) reserves address space for 1 1/8 x the
 * device's memory and maps pages (2 MiB small pool, 20 MiB large pool) on
 * demand, always at the lowest address that fits, extended back over a free
 * block just before it; requests keep their rounded size (no 20 MiB segment
 * rounding). A block is mapped or unmapped; only blocks of the same state
 * merge, so the segment reads free -> unmapped -> free ... Releasing the cache
 * unmaps the whole pages inside free blocks and frees the reservation once it
 * is wholly unmapped. Each map/unmap counts as a device alloc/free and moves
 * reserved bytes; the segment counters do not move (as in PyTorch).
 */
#include <stdlib.h>
#include <string.h>

#include "alloc/caching.h"

static int allocatable(const cblock *b) { return b && cblock_is_free(b); }

static int has_room(const cblock *b, uint64_t size) {
  uint64_t bytes = 0;
  while (bytes < size && allocatable(b)) {
    bytes += b->size;
    b = b->next;
  }
  return bytes >= size;
}

static grt_status unmapped_insert(cpool *pool, cblock *b) {
  return grt__bins_insert(pool->unmapped, b->stream, b->ptr, b);
}

static void unmapped_erase(cpool *pool, cblock *b) { grt__bins_erase(pool->unmapped, b->stream, b->ptr); }

/* A new reservation for (stream, pool), as one unmapped block. */
static cblock *new_segment(grt_allocator *a, cpool *pool, grt_stream_id stream) {
  caching *c = a->impl;
  grt_device_stats ds;
  grt_device_get_stats(a->dev, &ds);
  uint64_t page = pool->stat_type == GRT_STAT_SMALL_POOL ? GRT_SMALL_BUFFER : GRT_LARGE_BUFFER;
  uint64_t want = ds.capacity + ds.capacity / 8;
  uint64_t size = (want + page - 1) / page * page;
  cseg *s = calloc(1, sizeof *s);
  cblock *b = grt__cblock_new(c);
  grt_devptr va;
  if (!s || !b || grt_device_reserve(a->dev, size, &va) != GRT_OK) {
    free(s);
    if (b) grt__cblock_release(c, b);
    return NULL;
  }
  *s = (cseg){.base = va, .size = size, .pool = pool, .stream = stream, .head = b, .is_expandable = 1, .page = page};
  *b = (cblock){.ptr = va, .size = size, .stream = stream, .pool = pool, .seg = s, .unmapped = 1};
  if (grt__seg_insert(c, s) != GRT_OK || unmapped_insert(pool, b) != GRT_OK) {
    grt__seg_remove(c, s);
    grt_device_release(a->dev, va);
    free(s);
    grt__cblock_release(c, b);
    return NULL;
  }
  return b;
}

static cblock *find_block(grt_allocator *a, cpool *pool, grt_stream_id stream, uint64_t size) {
  grt__bin_entry e;
  for (int more = grt__bins_lower_bound(pool->unmapped, stream, 0, &e); more && e.size == stream;
       more = grt__bins_next(pool->unmapped, e.size, e.addr, &e)) {
    cblock *cand = e.value;
    if (allocatable(cand->prev)) cand = cand->prev; /* a free block right before the unmapped range */
    if (has_room(cand, size)) return cand;
  }
  return new_segment(a, pool, stream);
}

static void merge(grt_allocator *a, cblock *dst, cblock *src) { grt__caching_try_merge(a, dst, src, 1); }

/* One device map per page, as PyTorch creates one physical handle per page:
 * any later unmap of whole pages then covers whole mappings. All or nothing. */
static grt_status map_pages(grt_device *dev, grt_devptr va, uint64_t n, uint64_t page) {
  for (uint64_t i = 0; i < n; i++) {
    grt_status st = grt_device_map(dev, va + i * page, page);
    if (st) {
      if (i) grt_device_unmap(dev, va, i * page);
      return st;
    }
  }
  return GRT_OK;
}

/* Maps the pages under the first `size` bytes of an unmapped block. */
static int map_block(grt_allocator *a, cblock *b, uint64_t size) {
  caching *c = a->impl;
  cseg *s = b->seg;
  uint64_t first = (b->ptr - s->base) / s->page;
  uint64_t last = (b->ptr + size - s->base + s->page - 1) / s->page;
  uint64_t mapped = (last - first) * s->page;
  cblock *rest = mapped < b->size ? grt__cblock_new(c) : NULL;
  if (mapped < b->size && !rest) return 0;
  grt_status st = map_pages(a->dev, s->base + first * s->page, last - first, s->page);
  if (st) {
    if (rest) grt__cblock_release(c, rest);
    c->last_device_status = st;
    return 0;
  }
  unmapped_erase(b->pool, b);
  b->unmapped = 0;
  if (rest) {
    *rest = (cblock){.ptr = b->ptr + mapped, .size = b->size - mapped, .stream = b->stream, .pool = b->pool,
                     .seg = s, .prev = b, .next = b->next, .unmapped = 1};
    if (b->next) b->next->prev = rest;
    b->next = rest;
    b->size = mapped;
    unmapped_insert(b->pool, rest);
  }
  merge(a, b, b->prev);
  merge(a, b, b->next);
  grt__pool_insert(b->pool, b);
  c->total_allocated_memory += mapped;
  grt__stat_update2(a->stats.reserved_bytes, b->pool->stat_type, (int64_t)mapped);
  a->stats.num_device_alloc++;
  return 1;
}

cblock *grt__caching_expandable_alloc(grt_allocator *a, cpool *pool, grt_stream_id stream, uint64_t size) {
  cblock *cand = find_block(a, pool, stream, size);
  if (!cand) return NULL;
  if (cand->unmapped && !map_block(a, cand, cand->size < size ? cand->size : size)) return NULL;
  while (cand->size < size) { /* free -> unmapped -> ...: map more and merge */
    cblock *next = cand->next;
    uint64_t remaining = size - cand->size;
    if (!map_block(a, next, remaining < next->size ? remaining : next->size)) return NULL;
    cand = next;
  }
  grt__pool_erase(pool, cand);
  return cand;
}

static uint64_t expandable_size(const cblock *b) {
  return b->size + (b->next && b->next->unmapped ? b->next->size : 0);
}

int grt__caching_expandable_pick(grt__bins *bins, grt__bin_entry *e) {
  grt__bin_entry next;
  while (cblock_is_expandable(e->value) && grt__bins_next(bins, e->size, e->addr, &next) &&
         expandable_size(next.value) < expandable_size(e->value))
    *e = next;
  return 1;
}

/* Unmaps the whole pages inside a free mapped block; partial pages stay mapped as free blocks. */
void grt__caching_unmap_block(grt_allocator *a, cblock *b) {
  caching *c = a->impl;
  cseg *s = b->seg;
  uint64_t first = (b->ptr - s->base + s->page - 1) / s->page;
  uint64_t last = (b->ptr + b->size - s->base) / s->page;
  if (first >= last) return;
  grt_devptr start = s->base + first * s->page;
  uint64_t len = (last - first) * s->page;
  uint64_t before = start - b->ptr, after = b->size - before - len;
  cblock *pre = before ? grt__cblock_new(c) : NULL, *post = after ? grt__cblock_new(c) : NULL;
  if ((before && !pre) || (after && !post) || grt_device_unmap(a->dev, start, len) != GRT_OK) {
    if (pre) grt__cblock_release(c, pre);
    if (post) grt__cblock_release(c, post);
    return;
  }
  grt__pool_erase(b->pool, b);
  if (pre) {
    *pre = (cblock){.ptr = b->ptr, .size = before, .stream = b->stream, .pool = b->pool, .seg = s, .prev = b->prev, .next = b};
    if (b->prev)
      b->prev->next = pre;
    else
      s->head = pre;
    b->prev = pre;
    grt__pool_insert(b->pool, pre);
  }
  if (post) {
    *post = (cblock){.ptr = start + len, .size = after, .stream = b->stream, .pool = b->pool, .seg = s, .prev = b, .next = b->next};
    if (b->next) b->next->prev = post;
    b->next = post;
    grt__pool_insert(b->pool, post);
  }
  b->ptr = start;
  b->size = len;
  b->unmapped = 1;
  merge(a, b, b->prev);
  merge(a, b, b->next);
  unmapped_insert(b->pool, b);
  c->total_allocated_memory -= len;
  grt__stat_update2(a->stats.reserved_bytes, b->pool->stat_type, -(int64_t)len);
  a->stats.num_device_free++;
  if (!b->prev && !b->next) { /* wholly unmapped: give the reservation back */
    unmapped_erase(b->pool, b);
    grt_device_release(a->dev, s->base);
    grt__seg_remove(c, s);
    grt__cblock_release(c, b);
    free(s);
  }
}

/* Allocator teardown: unmap every mapped run, release the reservation. */
void grt__caching_destroy_expandable(grt_allocator *a, cseg *s) {
  cblock *b = s->head;
  while (b) {
    if (b->unmapped) {
      b = b->next;
      continue;
    }
    grt_devptr start = b->ptr;
    while (b && !b->unmapped) b = b->next;
    grt_devptr end = b ? b->ptr : s->base + s->size;
    grt_device_unmap(a->dev, start, end - start);
  }
  grt_device_release(a->dev, s->base);
}

/* One snapshot segment per contiguous mapped range, as PyTorch reports them. */
grt_status grt__caching_snapshot_expandable(const cseg *s, grt_alloc_snapshot *out) {
  const cblock *b = s->head;
  while (b) {
    if (b->unmapped) {
      b = b->next;
      continue;
    }
    size_t n = 0;
    for (const cblock *x = b; x && !x->unmapped; x = x->next) n++;
    grt_snapshot_segment *seg = &out->segments[out->n_segments];
    seg->blocks = calloc(n, sizeof *seg->blocks);
    if (!seg->blocks) return GRT_ERR_NOMEM;
    out->n_segments++;
    seg->address = b->ptr;
    seg->stream = s->stream;
    seg->is_large = s->pool->stat_type == GRT_STAT_LARGE_POOL;
    seg->is_expandable = 1;
    seg->n_blocks = n;
    for (size_t i = 0; i < n; i++, b = b->next) {
      grt_block_state st = b->allocated ? GRT_BLOCK_ACTIVE_ALLOCATED
                           : b->event_count ? GRT_BLOCK_ACTIVE_PENDING_FREE
                                            : GRT_BLOCK_INACTIVE;
      seg->blocks[i] = (grt_snapshot_block){b->ptr, b->size, b->requested_size, st};
    }
    grt__snapshot_segment_totals(seg);
  }
  return GRT_OK;
}
