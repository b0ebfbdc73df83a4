/* caching_pool.c — private pools of the caching allocator: PyTorch's
 * PrivatePool (CUDA graph pools, torch.cuda.MemPool), after
 * c10/cuda/CUDACachingAllocator.cpp:
 *
 *   retain    createOrIncrefPool / create_or_incref_pool: a new pool starts
 *             with use_count 1, an existing one gains 1.
 *   begin     beginAllocateToPool: retain, then (pool, stream) joins the begun
 *             list (captures_underway). get_pool walks it newest first and
 *             sends a malloc to the first pool whose filter passes the
 *             malloc's stream; PyTorch's filter is any predicate on the
 *             stream, ours is one stream.
 *   end       endAllocateToPool: leaves the list, use_count unchanged.
 *   release   releasePool: use_count - 1; at 0 the pool is freeable
 *             (graph_pools_freeable).
 *   freeable  release_cached_blocks' loop over the freeable pools:
 *             release_blocks of the small then the large pool, and the pool
 *             is erased once its cudaMalloc_count is 0.
 *   empty     emptyCache(mempool_id) -> release_cached_blocks(ctx, id): for a
 *             freeable pool, synchronize_and_free_events of its blocks only,
 *             then the loop above for it alone; a pool in use is left alone.
 *
 * What PyTorch asserts (a freeable pool used again, a release below zero, a
 * pool emptied during a capture, an end with no begin) is an error here that
 * changes nothing. One check is gpurt's own: the release that would make a
 * begun pool freeable is refused, since a freeable pool may be erased while
 * mallocs are still sent to it.
 *
 * Two choices where PyTorch's code leaves the result unspecified or
 * inconsistent: cudaMalloc_count is the pool's segment count (for expandable
 * segments, its reservations; PyTorch counts one up per expandable miss and
 * one down per unmap, which need not meet at 0 when the pool is empty), and
 * freeable pools are visited in creation order (PyTorch's is hash-map order;
 * the order only decides which device free comes first). A freeable pool's
 * wholly unmapped expandable reservations go with it
 * (grt__caching_drop_empty_reservations).
 */
#include <stdlib.h>
#include <string.h>

#include "alloc/caching.h"

#define ID_FMT "(%llu, %llu)"
#define ID_ARGS(id) (unsigned long long)(id).first, (unsigned long long)(id).second

/* ---- the registry ---- */

cprivate *grt__caching_find_pool(const caching *c, grt_pool_id id) {
  for (size_t i = 0; i < c->n_pools; i++)
    if (grt__pool_id_equal(c->pools[i]->id, id)) return c->pools[i];
  return NULL;
}

cprivate *grt__cprivate_new(grt_pool_id id) {
  cprivate *pp = calloc(1, sizeof *pp);
  if (!pp) return NULL;
  pp->id = id;
  pp->use_count = 1;
  if (grt__cpool_init(&pp->small, GRT_STAT_SMALL_POOL, pp) || grt__cpool_init(&pp->large, GRT_STAT_LARGE_POOL, pp)) {
    grt__cprivate_free(pp);
    return NULL;
  }
  return pp;
}

void grt__cprivate_free(cprivate *pp) {
  if (!pp) return;
  grt__cpool_free(&pp->small);
  grt__cpool_free(&pp->large);
  free(pp);
}

grt_status grt__caching_pools_reserve(caching *c) {
  if (c->n_pools < c->cap_pools) return GRT_OK;
  size_t cap = c->cap_pools ? c->cap_pools * 2 : 4;
  cprivate **p = realloc(c->pools, cap * sizeof *p);
  if (!p) return GRT_ERR_NOMEM;
  c->pools = p;
  c->cap_pools = cap;
  return GRT_OK;
}

void grt__caching_pools_add(caching *c, cprivate *pp) {
  assert(c->n_pools < c->cap_pools); /* reserved */
  c->pools[c->n_pools++] = pp;
}

static void pools_erase(caching *c, size_t i) {
  grt__cprivate_free(c->pools[i]);
  memmove(&c->pools[i], &c->pools[i + 1], (c->n_pools - i - 1) * sizeof *c->pools);
  c->n_pools--;
}

int grt__caching_pool_known(const caching *c, const cpool *p) {
  if (p == &c->small || p == &c->large) return 1;
  for (size_t i = 0; i < c->n_pools; i++)
    if (p == &c->pools[i]->small || p == &c->pools[i]->large) return 1;
  return 0;
}

/* ---- begun pools ---- */

static ccapture *capture_of(const caching *c, const cprivate *pp) {
  for (size_t i = 0; i < c->n_captures; i++)
    if (c->captures[i].pool == pp) return &c->captures[i];
  return NULL;
}

static grt_status captures_reserve(caching *c) {
  if (c->n_captures < c->cap_captures) return GRT_OK;
  size_t cap = c->cap_captures ? c->cap_captures * 2 : 4;
  ccapture *p = realloc(c->captures, cap * sizeof *p);
  if (!p) return GRT_ERR_NOMEM;
  c->captures = p;
  c->cap_captures = cap;
  return GRT_OK;
}

cpool *grt__caching_begun_pool(caching *c, uint64_t size, grt_stream_id stream) {
  int small = size <= GRT_SMALL_SIZE;
  for (size_t i = c->n_captures; i-- > 0;)
    if (c->captures[i].stream == stream) return small ? &c->captures[i].pool->small : &c->captures[i].pool->large;
  return small ? &c->small : &c->large;
}

/* ---- argument checks, each with its message ---- */

static grt_status not_default(grt_allocator *a, grt_pool_id id, const char *call) {
  if (!grt__pool_id_is_default(id)) return GRT_OK;
  grt__alloc_set_error(a, "%s: pool id (0, 0) is the default pool; a private pool's id is nonzero", call);
  return GRT_ERR_INVALID_ARG;
}

/* The existing private pool `id`, or NULL with the error written into *st. */
static cprivate *known_pool(grt_allocator *a, grt_pool_id id, const char *call, grt_status *st) {
  if ((*st = not_default(a, id, call))) return NULL;
  cprivate *pp = grt__caching_find_pool(a->impl, id);
  if (pp) return pp;
  grt__alloc_set_error(a, "%s: unknown pool " ID_FMT " (never created, or erased by empty_cache)", call, ID_ARGS(id));
  *st = GRT_ERR_NOT_FOUND;
  return NULL;
}

/* PyTorch's create_or_incref_pool asserts that an existing pool is in use. */
static grt_status usable(grt_allocator *a, const cprivate *pp, const char *call) {
  if (!pp || pp->use_count) return GRT_OK;
  grt__alloc_set_error(a, "%s: pool " ID_FMT " was released (use_count 0) and cannot be used again", call,
                       ID_ARGS(pp->id));
  return GRT_ERR_STATE;
}

/* ---- the calls ---- */

/* Creates the pool (use_count 1) or adds a use. Its one failure, for host
 * memory, comes before any change, so a caller that reserved its own needs
 * first has nothing to undo after it. */
static grt_status retain(caching *c, grt_pool_id id, cprivate **out) {
  cprivate *pp = grt__caching_find_pool(c, id);
  if (pp) {
    pp->use_count++;
  } else {
    if (grt__caching_pools_reserve(c) || !(pp = grt__cprivate_new(id))) return GRT_ERR_NOMEM;
    grt__caching_pools_add(c, pp);
  }
  *out = pp;
  return GRT_OK;
}

grt_status grt__caching_pool_retain(grt_allocator *a, grt_pool_id id) {
  grt_status st = not_default(a, id, "pool_retain");
  if (st || (st = usable(a, grt__caching_find_pool(a->impl, id), "pool_retain"))) return st;
  cprivate *pp;
  return retain(a->impl, id, &pp);
}

grt_status grt__caching_pool_begin(grt_allocator *a, grt_pool_id id, grt_stream_id stream) {
  caching *c = a->impl;
  grt_status st = not_default(a, id, "pool_begin");
  cprivate *pp = st ? NULL : grt__caching_find_pool(c, id);
  if (st || (st = usable(a, pp, "pool_begin"))) return st;
  const ccapture *cap = pp ? capture_of(c, pp) : NULL;
  if (cap) {
    grt__alloc_set_error(a, "pool_begin: pool " ID_FMT " is already begun (on stream %llu)", ID_ARGS(id),
                         (unsigned long long)cap->stream);
    return GRT_ERR_STATE;
  }
  if ((st = captures_reserve(c)) || (st = retain(c, id, &pp))) return st;
  c->captures[c->n_captures++] = (ccapture){pp, stream};
  return GRT_OK;
}

grt_status grt__caching_pool_end(grt_allocator *a, grt_pool_id id, grt_stream_id stream) {
  caching *c = a->impl;
  grt_status st;
  cprivate *pp = known_pool(a, id, "pool_end", &st);
  if (!pp) return st;
  ccapture *cap = capture_of(c, pp);
  if (!cap) {
    grt__alloc_set_error(a, "pool_end: pool " ID_FMT " is not begun", ID_ARGS(id));
    return GRT_ERR_STATE;
  }
  if (cap->stream != stream) {
    grt__alloc_set_error(a, "pool_end: pool " ID_FMT " was begun on stream %llu, not %llu", ID_ARGS(id),
                         (unsigned long long)cap->stream, (unsigned long long)stream);
    return GRT_ERR_INVALID_ARG;
  }
  size_t i = (size_t)(cap - c->captures);
  memmove(&c->captures[i], &c->captures[i + 1], (c->n_captures - i - 1) * sizeof *c->captures);
  c->n_captures--;
  return GRT_OK;
}

grt_status grt__caching_pool_release(grt_allocator *a, grt_pool_id id) {
  caching *c = a->impl;
  grt_status st;
  cprivate *pp = known_pool(a, id, "pool_release", &st);
  if (!pp) return st;
  if (!pp->use_count) {
    grt__alloc_set_error(a, "pool_release: pool " ID_FMT " is already released (use_count 0)", ID_ARGS(id));
    return GRT_ERR_STATE;
  }
  const ccapture *cap = capture_of(c, pp);
  if (pp->use_count == 1 && cap) {
    grt__alloc_set_error(a,
                         "pool_release: pool " ID_FMT " is still begun on stream %llu; end it before its last release",
                         ID_ARGS(id), (unsigned long long)cap->stream);
    return GRT_ERR_BUSY;
  }
  pp->use_count--;
  return GRT_OK;
}

grt_status grt__caching_release_freeable(grt_allocator *a, cprivate *only, uint64_t min_idle) {
  caching *c = a->impl;
  for (size_t i = 0; i < c->n_pools;) {
    cprivate *pp = c->pools[i];
    if (pp->use_count || (only && pp != only)) {
      i++;
      continue;
    }
    grt_status st = grt__caching_release_pool(a, &pp->small, min_idle);
    if (st || (st = grt__caching_release_pool(a, &pp->large, min_idle)) ||
        (st = grt__caching_drop_empty_reservations(a, &pp->small)) ||
        (st = grt__caching_drop_empty_reservations(a, &pp->large)))
      return st;
    if (pp->n_segs)
      i++;
    else
      pools_erase(c, i);
  }
  return GRT_OK;
}

/* The idle-cycles clock moves as empty_cache moves it, for the pool emptied. */
grt_status grt__caching_pool_empty_cache(grt_allocator *a, grt_pool_id id) {
  caching *c = a->impl;
  grt_status st;
  cprivate *pp = known_pool(a, id, "pool_empty_cache", &st);
  if (!pp) return st;
  if (c->n_captures) {
    grt__alloc_set_error(a,
                         "pool_empty_cache: pool " ID_FMT " cannot be emptied while pool " ID_FMT
                         " is begun (its pending frees would be waited for during a capture)",
                         ID_ARGS(id), ID_ARGS(c->captures[0].pool->id));
    return GRT_ERR_CAPTURE_UNSUPPORTED;
  }
  if (pp->use_count) return GRT_OK; /* PyTorch empties freeable pools only */
  if ((st = grt__caching_empty_cache_reserve(a))) return st;
  grt__caching_sync_pool_events(a, pp);
  if ((st = grt__caching_release_freeable(a, pp, a->cfg.empty_cache_idle_cycles))) return st;
  if ((pp = grt__caching_find_pool(c, id))) pp->small.cycle++, pp->large.cycle++;
  return GRT_OK;
}

grt_status grt__caching_pool_info(grt_allocator *a, grt_pool_id id, grt_pool_info *out) {
  grt_status st;
  cprivate *pp = known_pool(a, id, "pool_info", &st);
  if (!pp) return st;
  const ccapture *cap = capture_of(a->impl, pp);
  *out = (grt_pool_info){
      .use_count = pp->use_count, .segments = pp->n_segs, .begun = cap != NULL, .stream = cap ? cap->stream : 0};
  return GRT_OK;
}

uint64_t grt__caching_private_free_bytes(const caching *c) {
  uint64_t bytes = 0;
  for (size_t i = 0; i < c->n_pools; i++) {
    const cpool *pools[2] = {&c->pools[i]->small, &c->pools[i]->large};
    for (int k = 0; k < 2; k++)
      for (size_t j = grt__pool_next_occupied(pools[k], 0); j < pools[k]->n_streams;
           j = grt__pool_next_occupied(pools[k], j + 1)) {
        const grt__bins *bins = pools[k]->stream_bins[j];
        grt__bin_entry e;
        for (int more = grt__bins_first(bins, &e); more; more = grt__bins_next(bins, e.size, e.addr, &e))
          bytes += e.size;
      }
  }
  return bytes;
}

const grt__pool_ops grt__caching_pool_ops = {
    .retain = grt__caching_pool_retain,
    .begin = grt__caching_pool_begin,
    .end = grt__caching_pool_end,
    .release = grt__caching_pool_release,
    .empty_cache = grt__caching_pool_empty_cache,
    .info = grt__caching_pool_info,
    .import_segment = grt__caching_import_segment_pool,
};
