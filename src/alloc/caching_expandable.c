/* caching_expandable.c — expandable segments (PYTORCH_CUDA_ALLOC_CONF=
 * expandable_segments:True).
 *
 * One segment per (stream, pool) — a private pool's small and large pools
 * included, as in PyTorch — reserves address space for 1 1/8 x the
 * device's memory and maps pages (2 MiB small pool, 20 MiB large pool) on
 * demand, always at the lowest address that fits, extended back over a free
 * block just before it; requests keep their rounded size (no 20 MiB segment
 * rounding). A block is mapped or unmapped; only blocks of the same state
 * merge, so the segment reads free -> unmapped -> free ... Releasing the cache
 * unmaps the whole pages inside free blocks and frees the reservation once it
 * is wholly unmapped. Each map/unmap counts as a device alloc/free and moves
 * reserved bytes; the segment counters do not move (as in PyTorch). The
 * structs and inserts below were reserved by the calling step from the
 * bounds the *_needs functions give.
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

static void unmapped_erase(cpool *pool, cblock *b) { grt__bins_erase(pool->unmapped, b->stream, b->ptr); }

static uint64_t page_of_pool(const cpool *pool) {
  return pool->stat_type == GRT_STAT_SMALL_POOL ? GRT_SMALL_BUFFER : GRT_LARGE_BUFFER;
}

/* A new reservation for (stream, pool), as one unmapped block; NULL with the
 * device's status in last_device_status. */
static cblock *new_segment(grt_allocator *a, cpool *pool, grt_stream_id stream) {
  caching *c = a->impl;
  grt_device_stats ds;
  grt__ignore(grt_device_get_stats(a->dev, &ds)); /* a device and a buffer: it cannot fail */
  uint64_t page = page_of_pool(pool);
  uint64_t want = ds.capacity + ds.capacity / 8;
  uint64_t size = (want + page - 1) / page * page;
  grt_devptr va;
  grt_status st = grt_device_reserve(a->dev, size, &va);
  if (st) {
    c->last_device_status = st;
    return NULL;
  }
  cseg *s = grt__caching_take_seg(c);
  cblock *b = grt__cblock_new(c);
  assert(s && b);
  *s = (cseg){.base = va, .size = size, .pool = pool, .stream = stream, .head = b, .is_expandable = 1, .page = page};
  *b = (cblock){.ptr = va, .size = size, .stream = stream, .pool = pool, .seg = s, .unmapped = 1};
  st = grt__seg_insert(c, s);
  assert(st == GRT_OK); /* a table slot was reserved */
  (void)st;
  grt__pool_seg_added(pool);
  grt__unmapped_add(pool, b);
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
 * any later unmap of whole pages then covers whole mappings. All or nothing:
 * a refused map unmaps the pages this call mapped, whole mappings just made
 * (should the device refuse that too, its status is returned and those pages
 * stay mapped, unknown to the allocator, until the device goes). */
grt_status grt__caching_map_pages(grt_device *dev, grt_devptr va, uint64_t n, uint64_t page) {
  for (uint64_t i = 0; i < n; i++) {
    grt_status st = grt_device_map(dev, va + i * page, page);
    if (st) {
      grt_status undo = i ? grt_device_unmap(dev, va, i * page) : GRT_OK;
      return undo ? undo : st;
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
  grt_status st = grt__caching_map_pages(a->dev, s->base + first * s->page, last - first, s->page);
  if (st) {
    c->last_device_status = st;
    return 0;
  }
  unmapped_erase(b->pool, b);
  b->unmapped = 0;
  if (mapped < b->size) {
    cblock *rest = grt__cblock_new(c);
    assert(rest);
    *rest = (cblock){.ptr = b->ptr + mapped, .size = b->size - mapped, .stream = b->stream, .pool = b->pool,
                     .seg = s, .prev = b, .next = b->next, .unmapped = 1};
    if (b->next) b->next->prev = rest;
    b->next = rest;
    b->size = mapped;
    grt__unmapped_add(b->pool, rest);
  }
  merge(a, b, b->prev);
  merge(a, b, b->next);
  grt__pool_add(b->pool, b);
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

/* Unmaps the whole pages inside a free mapped block; partial pages stay
 * mapped as free blocks. The device's status when it refuses the unmap
 * (nothing changed then). */
grt_status grt__caching_unmap_block(grt_allocator *a, cblock *b) {
  caching *c = a->impl;
  cseg *s = b->seg;
  uint64_t first = (b->ptr - s->base + s->page - 1) / s->page;
  uint64_t last = (b->ptr + b->size - s->base) / s->page;
  if (first >= last) return GRT_OK;
  grt_devptr start = s->base + first * s->page;
  uint64_t len = (last - first) * s->page;
  uint64_t before = start - b->ptr, after = b->size - before - len;
  grt_status st = grt_device_unmap(a->dev, start, len);
  if (st) return st;
  grt__pool_erase(b->pool, b);
  if (before) {
    cblock *pre = grt__cblock_new(c);
    assert(pre);
    *pre = (cblock){.ptr = b->ptr, .size = before, .stream = b->stream, .pool = b->pool, .seg = s, .prev = b->prev, .next = b};
    if (b->prev)
      b->prev->next = pre;
    else
      s->head = pre;
    b->prev = pre;
    grt__pool_add(b->pool, pre);
  }
  if (after) {
    cblock *post = grt__cblock_new(c);
    assert(post);
    *post = (cblock){.ptr = start + len, .size = after, .stream = b->stream, .pool = b->pool, .seg = s, .prev = b, .next = b->next};
    if (b->next) b->next->prev = post;
    b->next = post;
    grt__pool_add(b->pool, post);
  }
  b->ptr = start;
  b->size = len;
  b->unmapped = 1;
  merge(a, b, b->prev);
  merge(a, b, b->next);
  grt__unmapped_add(b->pool, b);
  c->total_allocated_memory -= len;
  grt__stat_update2(a->stats.reserved_bytes, b->pool->stat_type, -(int64_t)len);
  a->stats.num_device_free++;
  /* Wholly unmapped: give the reservation back. Should the device refuse, the
     segment stays, wholly unmapped, which is a valid state. */
  if (!b->prev && !b->next && grt_device_release(a->dev, s->base) == GRT_OK) {
    unmapped_erase(b->pool, b);
    grt__pool_seg_removed(b->pool);
    grt__seg_remove(c, s);
    grt__cblock_release(c, b);
    free(s);
  }
  return GRT_OK;
}

/* A reservation whose first map the device refused is wholly unmapped and
 * has no free block for release_pool to find. PyTorch erases a freeable
 * private pool without looking at such a reservation, which then stays
 * reserved for a pool that no longer exists; here it goes with the pool.
 * Erasing needs no host memory. */
grt_status grt__caching_drop_empty_reservations(grt_allocator *a, cpool *pool) {
  caching *c = a->impl;
  grt__bin_entry e, cur;
  for (int more = grt__bins_first(pool->unmapped, &e); more;) {
    cur = e;
    more = grt__bins_next(pool->unmapped, cur.size, cur.addr, &e);
    cblock *b = cur.value;
    if (b->prev || b->next) continue;
    cseg *s = b->seg;
    grt_status st = grt_device_release(a->dev, s->base);
    if (st) return st;
    unmapped_erase(pool, b);
    grt__pool_seg_removed(pool);
    grt__seg_remove(c, s);
    grt__cblock_release(c, b);
    free(s);
  }
  return GRT_OK;
}

grt_status grt__caching_expandable_needs(grt_allocator *a, cpool *pool, grt_stream_id stream, uint64_t size,
                                         cneeds *nd) {
  /* Each map maps at least one page, and the pages mapped cover size plus at
     most one page of alignment: at most size / page + 2 maps. Each map also
     takes one unmapped block, of those there are now, those a flush counted
     in nd may add, and a new reservation's: so an absurd size (the device
     will refuse it) reserves no more than the blocks that exist. */
  caching *c = a->impl;
  uint64_t by_size = size / page_of_pool(pool) + 2;
  uint64_t by_blocks = (uint64_t)grt__bins_count(pool->unmapped) + grt__needs_unmapped_count(c, nd, pool) + 2;
  size_t maps = (size_t)(by_size < by_blocks ? by_size : by_blocks);
  nd->segs += 1;
  nd->blocks += maps + 1;
  grt_status st = grt__needs_unmapped(c, nd, pool, maps + 1);
  return st ? st : grt__needs_stream(a, nd, pool, stream, maps);
}

/* Unmapping a free block splits off at most two partial pages (inserts in its
 * bins) and puts the unmapped middle in its pool's unmapped set. Blocks still
 * pending count too: the release frees them first. */
grt_status grt__caching_unmap_needs(grt_allocator *a, cneeds *nd) {
  caching *c = a->impl;
  grt_status st = GRT_OK;
  for (size_t i = 0; i < c->segs.n && !st; i++) {
    const cseg *s = grt__seg_at(c, i);
    if (!s->is_expandable) continue;
    for (const cblock *b = s->head; b && !st; b = b->next) {
      if (b->unmapped || b->allocated) continue;
      nd->blocks += 2;
      st = grt__needs_unmapped(c, nd, b->pool, 1);
      if (!st) st = grt__needs_bins(c, nd, b->pool, b->stream, 2);
    }
  }
  return st;
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
    /* teardown (void op): whole mappings; a refusal leaves them to the device */
    grt__ignore(grt_device_unmap(a->dev, start, end - start));
  }
  grt__ignore(grt_device_release(a->dev, s->base)); /* likewise */
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
    seg->pool_id = grt__pool_id_of(s->pool);
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
