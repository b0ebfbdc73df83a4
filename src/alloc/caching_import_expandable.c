/* caching_import_expandable.c — an expandable segment's recorded state:
 * the (stream, pool) reservation and its mapped ranges, rebuilt before a
 * replay (PyTorch maps pages before recording starts and logs no map event
 * for them). A mapped range is mapped page by page, as the malloc path maps
 * it, so that a later release can unmap any whole pages of it, and becomes
 * one free mapped block between unmapped
 * blocks, exactly as map_block leaves a freshly mapped range; live blocks are
 * then carved out of it by grt_alloc_import_block. */
#include <stdlib.h>
#include <string.h>

#include "alloc/caching.h"
#include "alloc/import_expandable.h"

static cseg *find_reservation(caching *c, cpool *pool, grt_stream_id stream) {
  for (size_t i = 0; i < c->segs.n; i++) {
    cseg *s = grt__seg_at(c, i);
    if (s->is_expandable && s->pool == pool && s->stream == stream) return s;
  }
  return NULL;
}

/* A reservation's size as the malloc path sizes it: 1 1/8 x the device's capacity, in pages. */
static uint64_t reservation_size(grt_allocator *a, uint64_t page) {
  grt_device_stats ds;
  grt__ignore(grt_device_get_stats(a->dev, &ds)); /* a device and a buffer: it cannot fail */
  uint64_t want = ds.capacity + ds.capacity / 8;
  return (want + page - 1) / page * page;
}

/* A new reservation for (stream, pool) as one unmapped block (its structs and
 * insert were reserved); the device's status when it refuses. */
static grt_status new_reservation(grt_allocator *a, cpool *pool, grt_stream_id stream, uint64_t size, uint64_t page,
                                  cseg **out) {
  caching *c = a->impl;
  grt_devptr va;
  grt_status st = grt_device_reserve(a->dev, size, &va);
  if (st) return st;
  cseg *s = grt__caching_take_seg(c);
  cblock *b = grt__cblock_new(c);
  assert(s && b);
  *s = (cseg){.base = va, .size = size, .pool = pool, .stream = stream, .head = b, .is_expandable = 1, .page = page};
  *b = (cblock){.ptr = va, .size = size, .stream = stream, .pool = pool, .seg = s, .unmapped = 1};
  st = grt__seg_insert(c, s);
  assert(st == GRT_OK); /* a table slot was reserved */
  grt__unmapped_add(pool, b);
  *out = s;
  return GRT_OK;
}

/* Undoes new_reservation (a map into it failed). */
static void drop_reservation(grt_allocator *a, cseg *s) {
  caching *c = a->impl;
  grt__bins_erase(s->pool->unmapped, s->stream, s->base);
  grt__seg_remove(c, s);
  grt_status st = grt_device_release(a->dev, s->base);
  assert(st == GRT_OK); /* just reserved, nothing mapped */
  (void)st;
  grt__cblock_release(c, s->head);
  free(s);
}

/* Splits the unmapped block u at addr (a page boundary inside it); u keeps the
 * front. The struct and its insert were reserved. */
static void split_unmapped(caching *c, cblock *u, grt_devptr addr) {
  cblock *n = grt__cblock_new(c);
  assert(n);
  *n = (cblock){.ptr = addr, .size = u->ptr + u->size - addr, .stream = u->stream, .pool = u->pool, .seg = u->seg,
                .prev = u, .next = u->next, .unmapped = 1};
  grt__unmapped_add(u->pool, n);
  if (u->next) u->next->prev = n;
  u->next = n;
  u->size = addr - u->ptr;
}

/* The unmapped block of s holding [start, end), or NULL. */
static cblock *unmapped_around(const cseg *s, grt_devptr start, grt_devptr end) {
  cblock *u = s->head;
  while (u && !(start >= u->ptr && start < u->ptr + u->size)) u = u->next;
  return u && u->unmapped && end <= u->ptr + u->size ? u : NULL;
}

/* Checks everything and reserves the structs before the first change; maps
 * the range before splitting, so that a refused map changes nothing. */
static grt_status import_range(grt_allocator *a, grt_stream_id stream, int is_large, uint64_t offset, uint64_t size,
                               grt_devptr *va) {
  caching *c = a->impl;
  cpool *pool = is_large ? &c->large : &c->small;
  uint64_t page = pool->stat_type == GRT_STAT_SMALL_POOL ? GRT_SMALL_BUFFER : GRT_LARGE_BUFFER;
  cseg *s = find_reservation(c, pool, stream);
  uint64_t res_size = s ? s->size : reservation_size(a, page);
  if (s) *va = s->base;
  if (!size || offset % page || size % page || offset + size > res_size) return GRT_ERR_INVALID_ARG;
  cblock *u = s ? unmapped_around(s, s->base + offset, s->base + offset + size) : NULL;
  if (s && !u) return GRT_ERR_INVALID_ARG;
  int fresh = !s;
  cneeds nd;
  grt__needs_init(&nd);
  nd.segs = (size_t)fresh;
  nd.blocks = nd.unmapped[is_large != 0] = 2 + (size_t)fresh;
  grt_status st = grt__needs_bins(c, &nd, pool, stream, 1);
  if (st || (st = grt__caching_reserve(a, &nd))) return st;
  if (fresh && (st = new_reservation(a, pool, stream, res_size, page, &s))) return st;
  *va = s->base;
  grt_devptr start = s->base + offset, end = start + size;
  if (fresh) u = s->head;
  if ((st = grt__caching_map_pages(a->dev, start, size / page, page))) { /* page by page, as map_block maps */
    if (fresh) drop_reservation(a, s);
    return st;
  }
  if (start > u->ptr) { /* the unmapped front stays as it is */
    split_unmapped(c, u, start);
    u = u->next;
  }
  if (end < u->ptr + u->size) split_unmapped(c, u, end);
  grt__bins_erase(pool->unmapped, stream, u->ptr);
  u->unmapped = 0;
  grt__caching_try_merge(a, u, u->prev, 1); /* a free mapped neighbour: one block, as map_block leaves it */
  grt__caching_try_merge(a, u, u->next, 1);
  grt__pool_add(pool, u);
  c->total_allocated_memory += size;
  grt__stat_update2(a->stats.reserved_bytes, pool->stat_type, (int64_t)size);
  return GRT_OK;
}

/* The (stream, pool) reservation's base, reserving it (nothing mapped) when
 * there is none and create is set (else GRT_ERR_NOT_FOUND). */
static grt_status reservation(grt_allocator *a, grt_stream_id stream, int is_large, bool create, grt_devptr *va) {
  caching *c = a->impl;
  cpool *pool = is_large ? &c->large : &c->small;
  uint64_t page = is_large ? GRT_LARGE_BUFFER : GRT_SMALL_BUFFER;
  cseg *s = find_reservation(c, pool, stream);
  if (!s && !create) return GRT_ERR_NOT_FOUND;
  if (!s) {
    cneeds nd;
    grt__needs_init(&nd);
    nd.segs = 1;
    nd.blocks = nd.unmapped[is_large != 0] = 1;
    grt_status st = grt__needs_bins(c, &nd, pool, stream, 1);
    if (st || (st = grt__caching_reserve(a, &nd))) return st;
    if ((st = new_reservation(a, pool, stream, reservation_size(a, page), page, &s))) return st;
  }
  *va = s->base;
  return GRT_OK;
}

grt_status grt__alloc_expandable_reservation(grt_allocator *a, grt_stream_id stream, int is_large, bool create,
                                             grt_devptr *va) {
  if (!a || !va) return GRT_ERR_INVALID_ARG;
  if (a->ops != &grt__caching_ops || !a->cfg.expandable_segments) return GRT_ERR_UNSUPPORTED;
  pthread_mutex_lock(&a->lock);
  grt_status st = reservation(a, stream, is_large, create, va);
  pthread_mutex_unlock(&a->lock);
  return st;
}

grt_status grt__alloc_import_expandable(grt_allocator *a, grt_stream_id stream, int is_large, uint64_t offset,
                                        uint64_t size, grt_devptr *va) {
  if (!a || !va) return GRT_ERR_INVALID_ARG;
  if (a->ops != &grt__caching_ops || !a->cfg.expandable_segments) return GRT_ERR_UNSUPPORTED;
  pthread_mutex_lock(&a->lock);
  grt_status st = import_range(a, stream, is_large, offset, size, va);
  pthread_mutex_unlock(&a->lock);
  return st;
}
