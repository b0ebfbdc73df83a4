/* caching_import.c — rebuilding a recorded allocator state.
 *
 * Real PyTorch snapshots start mid-run: segments and live blocks already
 * exist when recording begins. The replayer recreates them here — segments at
 * their recorded addresses, live blocks at their recorded offsets — so that the
 * replay starts from the same layout PyTorch had. Imported segments count as
 * reserved memory but not as device mallocs of the replay. A segment goes
 * into a default pool or into a private pool (created if new, as PyTorch's
 * first use creates it). The calls reserve their structs and inserts first:
 * a failure changes nothing.
 */
#include <stdlib.h>

#include "alloc/caching.h"

static grt_status import_into(grt_allocator *a, cpool *pool, grt_devptr base, uint64_t size, grt_stream_id stream) {
  caching *c = a->impl;
  cneeds nd;
  grt__needs_init(&nd);
  nd.segs = nd.blocks = 1;
  grt_status st = grt__needs_bins(c, &nd, pool, stream, 1);
  if (st || (st = grt__caching_reserve(a, &nd))) return st;
  if ((st = grt_device_malloc_at(a->dev, base, size))) {
    grt__alloc_set_error(a, "cannot place an imported segment at 0x%llx (+%llu bytes): %s", (unsigned long long)base,
                         (unsigned long long)size, grt_status_str(st));
    return st;
  }
  cseg *s = grt__caching_take_seg(c);
  cblock *b = grt__cblock_new(c);
  assert(s && b); /* reserved */
  *s = (cseg){.base = base, .size = size, .pool = pool, .stream = stream, .head = b};
  b->ptr = base;
  b->size = size;
  b->stream = stream;
  b->pool = pool;
  b->seg = s;
  st = grt__seg_insert(c, s);
  assert(st == GRT_OK); /* a table slot was reserved */
  grt__pool_add(pool, b);
  grt__pool_seg_added(pool);
  c->total_allocated_memory += size;
  grt__stat_update2(a->stats.segment, pool->stat_type, 1);
  grt__stat_update2(a->stats.reserved_bytes, pool->stat_type, (int64_t)size);
  if (size >= a->cfg.max_split_size) grt__stat_update(&a->stats.oversize_segments, 1);
  return GRT_OK;
}

grt_status grt__caching_import_segment(grt_allocator *a, grt_devptr base, uint64_t size, grt_stream_id stream,
                                       int is_large) {
  caching *c = a->impl;
  return import_into(a, is_large ? &c->large : &c->small, base, size, stream);
}

/* A pool created here is registered only once the segment is in it: a
 * failure frees it, and the pools are as they were. */
grt_status grt__caching_import_segment_pool(grt_allocator *a, grt_pool_id id, grt_devptr base, uint64_t size,
                                            grt_stream_id stream, int is_large) {
  caching *c = a->impl;
  if (grt__pool_id_is_default(id)) return grt__caching_import_segment(a, base, size, stream, is_large);
  cprivate *pp = grt__caching_find_pool(c, id);
  int fresh = !pp;
  if (fresh && (grt__caching_pools_reserve(c) || !(pp = grt__cprivate_new(id)))) return GRT_ERR_NOMEM;
  grt_status st = import_into(a, is_large ? &pp->large : &pp->small, base, size, stream);
  if (fresh && st) grt__cprivate_free(pp);
  if (fresh && !st) grt__caching_pools_add(c, pp);
  return st;
}

/* Free blocks of a split segment: PyTorch's inactive_split figures. */
static void seg_inactive_split(const cseg *s, int64_t *count, int64_t *bytes) {
  *count = *bytes = 0;
  if (!s->head->next || s->is_expandable) return; /* unsplit; PyTorch leaves expandable blocks out */
  for (const cblock *b = s->head; b; b = b->next)
    if (cblock_is_free(b)) {
      (*count)++;
      *bytes += (int64_t)b->size;
    }
}

/* A free block [ptr, ptr+size) linked in before or after `at`. */
static cblock *new_free_piece(caching *c, const cblock *like, grt_devptr ptr, uint64_t size) {
  cblock *n = grt__cblock_new(c);
  if (!n) return NULL;
  n->ptr = ptr;
  n->size = size;
  n->stream = like->stream;
  n->pool = like->pool;
  n->seg = like->seg;
  return n;
}

grt_status grt__caching_import_block(grt_allocator *a, grt_devptr addr, uint64_t size, uint64_t requested) {
  caching *c = a->impl;
  cseg *s = grt__seg_find(c, addr);
  cblock *b = s ? s->head : NULL;
  while (b && !(addr >= b->ptr && addr < b->ptr + b->size)) b = b->next;
  if (!b || !cblock_is_free(b) || size > b->ptr + b->size - addr) { /* no sum: a size may wrap it past 2^64 */
    grt__alloc_set_error(a, "imported block 0x%llx (+%llu) is not inside one free block", (unsigned long long)addr,
                         (unsigned long long)size);
    return GRT_ERR_INVALID_ARG;
  }
  uint64_t before = addr - b->ptr, after = b->ptr + b->size - addr - size;
  cneeds nd;
  grt__needs_init(&nd);
  nd.blocks = 2;
  nd.active = 1;
  grt_status st = grt__needs_bins(c, &nd, b->pool, b->stream, 2);
  if (st || (st = grt__caching_reserve(a, &nd))) return st;
  cblock *pre = before ? new_free_piece(c, b, b->ptr, before) : NULL;
  cblock *post = after ? new_free_piece(c, b, addr + size, after) : NULL;
  bool put = grt__u64map_put(&c->active, addr, b);
  assert(put && (!before || pre) && (!after || post)); /* reserved */
  (void)put;
  int64_t n0, b0, n1, b1;
  seg_inactive_split(s, &n0, &b0);
  grt__pool_erase(b->pool, b);
  if (pre) {
    pre->prev = b->prev;
    pre->next = b;
    if (b->prev)
      b->prev->next = pre;
    else
      s->head = pre;
    b->prev = pre;
    grt__pool_add(pre->pool, pre);
  }
  if (post) {
    post->next = b->next;
    post->prev = b;
    if (b->next) b->next->prev = post;
    b->next = post;
    grt__pool_add(post->pool, post);
  }
  b->ptr = addr;
  b->size = size;
  b->allocated = 1;
  b->requested_size = requested;
  seg_inactive_split(s, &n1, &b1);
  int pool = b->pool->stat_type;
  if (n1 != n0) grt__stat_update2(a->stats.inactive_split, pool, n1 - n0);
  if (b1 != b0) grt__stat_update2(a->stats.inactive_split_bytes, pool, b1 - b0);
  grt__stat_update2(a->stats.allocation, pool, 1);
  grt__stat_update2(a->stats.allocated_bytes, pool, (int64_t)size);
  grt__stat_update2(a->stats.active, pool, 1);
  grt__stat_update2(a->stats.active_bytes, pool, (int64_t)size);
  grt__stat_update2(a->stats.requested_bytes, pool, (int64_t)requested);
  if (size >= a->cfg.max_split_size) grt__stat_update(&a->stats.oversize_allocations, 1);
  return GRT_OK;
}
