/* caching_import_expandable.c — an expandable segment's recorded state:
 * the (stream, pool) reservation and its mapped ranges, rebuilt before a
 * replay (PyTorch maps pages before recording starts and logs no map event
 * for them). A mapped range becomes one free mapped block between unmapped
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

/* A reservation sized like the malloc path's: 1 1/8 x the device's capacity, in pages. */
static grt_status new_reservation(grt_allocator *a, cpool *pool, grt_stream_id stream, cseg **out) {
  caching *c = a->impl;
  grt_device_stats ds;
  grt_device_get_stats(a->dev, &ds);
  uint64_t page = pool->stat_type == GRT_STAT_SMALL_POOL ? GRT_SMALL_BUFFER : GRT_LARGE_BUFFER;
  uint64_t want = ds.capacity + ds.capacity / 8, size = (want + page - 1) / page * page;
  cseg *s = calloc(1, sizeof *s);
  cblock *b = grt__cblock_new(c);
  grt_devptr va;
  grt_status st = (s && b) ? grt_device_reserve(a->dev, size, &va) : GRT_ERR_NOMEM;
  if (st) {
    free(s);
    if (b) grt__cblock_release(c, b);
    return st;
  }
  *s = (cseg){.base = va, .size = size, .pool = pool, .stream = stream, .head = b, .is_expandable = 1, .page = page};
  *b = (cblock){.ptr = va, .size = size, .stream = stream, .pool = pool, .seg = s, .unmapped = 1};
  if (grt__seg_insert(c, s) != GRT_OK || grt__bins_insert(pool->unmapped, stream, va, b) != GRT_OK) {
    grt__seg_remove(c, s);
    grt_device_release(a->dev, va);
    free(s);
    grt__cblock_release(c, b);
    return GRT_ERR_NOMEM;
  }
  *out = s;
  return GRT_OK;
}

/* Splits the unmapped block u at addr (a page boundary inside it); u keeps the front. */
static grt_status split_unmapped(caching *c, cblock *u, grt_devptr addr) {
  cblock *n = grt__cblock_new(c);
  if (!n) return GRT_ERR_NOMEM;
  *n = (cblock){.ptr = addr, .size = u->ptr + u->size - addr, .stream = u->stream, .pool = u->pool, .seg = u->seg,
                .prev = u, .next = u->next, .unmapped = 1};
  if (grt__bins_insert(u->pool->unmapped, n->stream, n->ptr, n) != GRT_OK) {
    grt__cblock_release(c, n);
    return GRT_ERR_NOMEM;
  }
  if (u->next) u->next->prev = n;
  u->next = n;
  u->size = addr - u->ptr;
  return GRT_OK;
}

static grt_status import_range(grt_allocator *a, grt_stream_id stream, int is_large, uint64_t offset, uint64_t size,
                               grt_devptr *va) {
  caching *c = a->impl;
  cpool *pool = is_large ? &c->large : &c->small;
  cseg *s = find_reservation(c, pool, stream);
  grt_status st = s ? GRT_OK : new_reservation(a, pool, stream, &s);
  if (st) return st;
  *va = s->base;
  if (!size || offset % s->page || size % s->page || offset + size > s->size) return GRT_ERR_INVALID_ARG;
  grt_devptr start = s->base + offset, end = start + size;
  cblock *u = s->head;
  while (u && !(start >= u->ptr && start < u->ptr + u->size)) u = u->next;
  if (!u || !u->unmapped || end > u->ptr + u->size) return GRT_ERR_INVALID_ARG;
  if (!grt__pool_bins(pool, stream, 1)) return GRT_ERR_NOMEM;
  if (start > u->ptr) { /* the unmapped front stays as it is */
    if ((st = split_unmapped(c, u, start))) return st;
    u = u->next;
  }
  if (end < u->ptr + u->size && (st = split_unmapped(c, u, end))) return st;
  if ((st = grt_device_map(a->dev, start, size))) return st; /* (the splits stay: unmapped pieces are valid) */
  grt__bins_erase(pool->unmapped, stream, u->ptr);
  u->unmapped = 0;
  grt__caching_try_merge(a, u, u->prev, 1); /* a free mapped neighbour: one block, as map_block leaves it */
  grt__caching_try_merge(a, u, u->next, 1);
  if ((st = grt__pool_insert(pool, u))) return st;
  c->total_allocated_memory += size;
  grt__stat_update2(a->stats.reserved_bytes, pool->stat_type, (int64_t)size);
  return GRT_OK;
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
