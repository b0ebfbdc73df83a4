/* replay_pools.c — private pools (CUDA graph pools, torch.cuda.MemPool) in
 * a replay of a PyTorch snapshot.
 *
 * The trace's events do not say which pool an allocation went to; the final
 * segments do (segment_pool_id). An allocation whose recorded address lies
 * in a final segment of a private pool went to that pool, so the replay
 * makes it there: the pool is begun on the allocation's stream for that one
 * malloc, as PyTorch begins it for a capture or a use_mem_pool block. The
 * retain that begin implies is given back when the pool existed already, so
 * a pool's use count stays what the start state or its first use made it,
 * and its segments are never freed by a release (PyTorch frees a private
 * pool's segments only once the pool is released by its owner, which the
 * trace does not record). */
#include <stdlib.h>

#include "trace/replay_impl.h"

static int cmp_pool_range(const void *a, const void *b) {
  const grt__replay_pool_range *x = a, *y = b;
  return x->addr < y->addr ? -1 : x->addr > y->addr;
}

grt_status grt__replay_pools_init(grt_replay *r) {
  const grt_trace_info *in = &r->info;
  size_t n = 0;
  for (size_t i = 0; i < in->n_segments; i++) n += in->segments[i].pool_id[0] || in->segments[i].pool_id[1];
  if (!n) return GRT_OK;
  r->pools = calloc(n, sizeof *r->pools);
  if (!r->pools) return GRT_ERR_NOMEM;
  for (size_t i = 0; i < in->n_segments; i++) {
    const grt_trace_segment *s = &in->segments[i];
    if (s->pool_id[0] || s->pool_id[1])
      r->pools[r->n_pools++] = (grt__replay_pool_range){s->addr, s->total_size, {s->pool_id[0], s->pool_id[1]}};
  }
  qsort(r->pools, r->n_pools, sizeof *r->pools, cmp_pool_range);
  return GRT_OK;
}

bool grt__replay_pool_of(const grt_replay *r, grt_devptr recorded, grt_pool_id *id) {
  size_t lo = 0, hi = r->n_pools;
  while (lo < hi) { /* the last range starting at or below the address */
    size_t mid = (lo + hi) / 2;
    if (r->pools[mid].addr <= recorded)
      lo = mid + 1;
    else
      hi = mid;
  }
  if (!lo) return false;
  const grt__replay_pool_range *p = &r->pools[lo - 1];
  if (recorded >= p->addr + p->size) return false;
  *id = p->id;
  return true;
}

/* Undoes a begin: ends it, and gives back its retain (a pool the begin made
 * goes again, empty). */
static grt_status undo_begin(grt_replay *r, grt_pool_id id, grt_stream_id stream, bool existed, bool drop) {
  grt_status st = grt_alloc_pool_end(r->alloc, id, stream);
  if (!st && (existed || drop)) st = grt_alloc_pool_release(r->alloc, id);
  if (!st && !existed && drop) st = grt_alloc_pool_empty_cache(r->alloc, id);
  return st;
}

grt_status grt__replay_pool_malloc(grt_replay *r, grt_pool_id id, uint64_t size, grt_stream_id stream,
                                   grt_devptr *p) {
  grt_pool_info info;
  bool existed = grt_alloc_pool_info(r->alloc, id, &info) == GRT_OK;
  grt_status st = grt_alloc_pool_begin(r->alloc, id, stream);
  if (st) return st;
  grt_status got = grt_alloc_malloc(r->alloc, size, stream, p);
  st = undo_begin(r, id, stream, existed, got == GRT_ERR_NOMEM);
  return got ? got : st;
}
