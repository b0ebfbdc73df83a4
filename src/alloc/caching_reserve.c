/* caching_reserve.c — the caching allocator's reservations.
 *
 * A step (one public call) adds up the host memory its whole run may need in
 * a cneeds, over every path it can take (a cache hit, the device, the flush
 * and retry), reserves all of it before it changes anything, and then runs
 * without a failure for lack of memory: a GRT_ERR_NOMEM is returned while the
 * allocator, its counters and the device are as they were. What is reserved
 * and not used stays for later steps (spare structs, room in the active map,
 * the bins and the segment table), so the steady state allocates nothing.
 */
#include <stdlib.h>

#include "alloc/caching.h"

static grt_status tally_add(caching *c, cneeds *nd, cpool *pool, grt_stream_id stream, size_t n, int unmapped) {
  for (size_t i = 0; i < nd->n_bins; i++)
    if (c->tally[i].pool == pool && c->tally[i].stream == stream && c->tally[i].unmapped == unmapped) {
      c->tally[i].n += n;
      return GRT_OK;
    }
  if (nd->n_bins == c->cap_tally) {
    size_t cap = c->cap_tally ? c->cap_tally * 2 : 8;
    ctally *t = realloc(c->tally, cap * sizeof *t);
    if (!t) return GRT_ERR_NOMEM;
    c->tally = t;
    c->cap_tally = cap;
  }
  c->tally[nd->n_bins++] = (ctally){pool, stream, n, unmapped};
  return GRT_OK;
}

grt_status grt__needs_bins(caching *c, cneeds *nd, cpool *pool, grt_stream_id stream, size_t n) {
  return tally_add(c, nd, pool, stream, n, 0);
}

grt_status grt__needs_unmapped(caching *c, cneeds *nd, cpool *pool, size_t n) {
  if (pool->owner) return tally_add(c, nd, pool, 0, n, 1);
  nd->unmapped[pool == &c->large] += n;
  return GRT_OK;
}

size_t grt__needs_unmapped_count(const caching *c, const cneeds *nd, const cpool *pool) {
  if (!pool->owner) return nd->unmapped[pool == &c->large];
  for (size_t i = 0; i < nd->n_bins; i++)
    if (c->tally[i].pool == pool && c->tally[i].unmapped) return c->tally[i].n;
  return 0;
}

grt_status grt__needs_stream(grt_allocator *a, cneeds *nd, cpool *pool, grt_stream_id stream, size_t n) {
  caching *c = a->impl;
  grt_status st = grt__needs_bins(c, nd, pool, stream, n);
  if (a->cfg.cross_stream != GRT_CROSS_STREAM_WITH_EVENT) return st;
  for (size_t i = 0; i < pool->n_streams && !st; i++)
    if (pool->streams[i] != stream) st = grt__needs_bins(c, nd, pool, pool->streams[i], n);
  for (size_t i = 0; i < nd->n_bins && !st; i++) /* streams whose bins the step itself creates */
    if (c->tally[i].pool == pool && !c->tally[i].unmapped && c->tally[i].stream != stream &&
        !grt__pool_bins(pool, c->tally[i].stream, 0))
      c->tally[i].n += n;
  return st;
}

grt_status grt__caching_reserve_blocks(caching *c, size_t n) {
  while (c->n_spare < n) {
    cblock *b = malloc(sizeof *b);
    if (!b) return GRT_ERR_NOMEM;
    b->uses = NULL;
    b->next = c->spare;
    c->spare = b;
    c->n_spare++;
  }
  return GRT_OK;
}

static grt_status reserve_segs(caching *c, size_t n) {
  if (n > GRT__CACHING_SPARE_SEGS) return GRT_ERR_INTERNAL; /* no step takes more than one per device try */
  while (c->n_spare_segs < n) {
    cseg *s = calloc(1, sizeof *s);
    if (!s) return GRT_ERR_NOMEM;
    c->spare_segs[c->n_spare_segs++] = s;
  }
  return grt__seg_reserve(c, n);
}

cseg *grt__caching_take_seg(caching *c) {
  if (!c->n_spare_segs) return NULL;
  cseg *s = c->spare_segs[--c->n_spare_segs];
  *s = (cseg){0};
  return s;
}

grt_status grt__caching_reserve(grt_allocator *a, const cneeds *nd) {
  caching *c = a->impl;
  grt_status st;
  if ((st = grt__caching_reserve_blocks(c, nd->blocks)) || (nd->segs && (st = reserve_segs(c, nd->segs)))) return st;
  if (nd->active && !grt__u64map_reserve(&c->active, nd->active)) return GRT_ERR_NOMEM;
  if (nd->unmapped[0] && grt__bins_reserve(c->small.unmapped, nd->unmapped[0])) return GRT_ERR_NOMEM;
  if (nd->unmapped[1] && grt__bins_reserve(c->large.unmapped, nd->unmapped[1])) return GRT_ERR_NOMEM;
  for (size_t i = 0; i < nd->n_bins; i++) {
    const ctally *t = &c->tally[i];
    if (t->unmapped) {
      if (grt__bins_reserve(t->pool->unmapped, t->n)) return GRT_ERR_NOMEM;
      continue;
    }
    grt__bins *bins = grt__pool_bins(t->pool, t->stream, 1); /* an empty bins set changes no decision */
    if (!bins || grt__bins_reserve(bins, t->n)) return GRT_ERR_NOMEM;
  }
  return GRT_OK;
}

/* One insert per event, not per block: a block with several events is counted more than once, which only reserves more. */
grt_status grt__needs_events(caching *c, cneeds *nd) {
  for (size_t i = 0; i < c->n_events; i++) {
    const cblock *b = c->events[i].block;
    grt_status st = grt__needs_bins(c, nd, b->pool, b->stream, 1);
    if (st) return st;
  }
  return GRT_OK;
}

grt_status grt__needs_release(grt_allocator *a, cneeds *nd) {
  grt_status st = grt__needs_events(a->impl, nd);
  if (!st && a->cfg.expandable_segments) st = grt__caching_unmap_needs(a, nd);
  return st;
}
