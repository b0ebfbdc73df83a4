/* mempool.c — the stream-ordered pool (cudaMallocAsync / cudaFreeAsync) over
 * an allocator of policy "caching" or "async" and the executor.
 *
 * A block the user frees with free_async stays allocated in the underlying
 * allocator and is "parked" with (freeing stream, event recorded at the free
 * point). malloc_async(size, s) takes, in order (CUDA C++ Programming Guide,
 * "Stream Ordered Memory Allocator", reuse policies; CUDA Runtime API,
 * cudaMemPoolAttr):
 *   1. a parked block freed on s itself: stream order covers it;
 *   2. a parked block of another stream that a policy allows: FOLLOW_EVENT_DEPS
 *      when s's next work already waits for the free (the program's event
 *      edges, the legacy stream's implicit ones; the pool inserts nothing),
 *      OPPORTUNISTIC when the device already passed the free;
 *   3. the allocator (under OPPORTUNISTIC the passed frees go back to it first);
 *   4. when the allocator cannot grow: 1 and 2 at any fitting size, then
 *      INTERNAL_DEPS: another stream's pending free, after a wait the pool
 *      inserts on s; else GRT_ERR_OOM. The host never waits for a free.
 * Steps 1 and 2 first take the best fit no larger than twice the rounded size
 * (no gross waste). Asking whether a free completed or whether s waits for it
 * (exec/observe.h) starts no work and moves neither clock.
 *
 * A parked block goes back to the allocator (where any stream may take it
 * without an edge) only when its free is known complete: at a sync point
 * that covered it (mempool_sync.c), or under OPPORTUNISTIC.
 *
 * Shared pool: every stream-ordered allocation is made in the allocator under
 * one stream id, so freed memory merges and serves every stream. Per-stream
 * pools: the real stream id is used (the caching policy then keeps per-stream
 * bins, PyTorch's model) and parked blocks never cross streams.
 *
 * Invariants: `blocks` maps every block handed out by malloc_async and not yet
 * returned to the allocator (live or parked); parked blocks are exactly those
 * on the park list, each with an event; used = sum of live block sizes; the
 * scratch arrays hold at least n_parked entries.
 * Locking: pool->lock guards all of it; exec and sorder calls are made under
 * it (lock order: pool, sorder, allocator, exec). Thread-agnostic below: the
 * allocator sees only stream ids.
 */
#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "base/status.h"
#include "gpurt/policy.h"
#include "sorder/sorder_impl.h"

#define POOL_SID (UINT64_MAX - 1) /* the one stream id of the shared pool in the allocator */

typedef enum mp_how { MP_NEW, MP_SAME, MP_EVENT_DEP, MP_OPPORTUNISTIC, MP_INTERNAL } mp_how;

void grt_mempool_config_default(grt_mempool_config *cfg) {
  if (!cfg) return;
  memset(cfg, 0, sizeof *cfg);
  cfg->policy = "caching";
  cfg->reuse = GRT_REUSE_ALL;
}

/* ---- create / destroy ---- */

/* The allocator's record_stream completions: asked inside pool calls, so the
 * question must not move the virtual clock either. A failed query says done,
 * as the exec's own does (a deferred free never waits for ever). */
static int aops_query(void *ctx, uint64_t event) {
  (void)ctx;
  grt_event *ev = (grt_event *)(uintptr_t)event;
  grt__order o;
  return grt__events_order(NULL, &ev, 1, &o) != GRT_OK || o == GRT__ORDER_COMPLETE;
}

static grt_status make_allocator(grt_mempool *p, const grt_mempool_config *cfg, const char *policy) {
  grt_device *dev;
  grt_status st = grt_exec_stream_ops(cfg->exec, &p->ops);
  if (!st) st = grt_exec_get_device(cfg->exec, &dev);
  if (st) return st;
  p->aops = p->ops;
  p->aops.event_query = aops_query;
  p->acfg.stream_ops = &p->aops; /* the exec's events serve record_stream */
  st = grt_alloc_create(policy, dev, &p->acfg, &p->a);
  if (!st && p->is_async) st = grt_alloc_set(p->a, "release_threshold", cfg->release_threshold);
  return st;
}

grt_status grt_mempool_create(const grt_mempool_config *cfg, grt_mempool **out) {
  if (!out) return GRT_ERR_INVALID_ARG;
  *out = NULL;
  if (!cfg || !cfg->exec || (cfg->reuse & ~GRT_REUSE_ALL)) return GRT_ERR_INVALID_ARG;
  const char *policy = cfg->policy ? cfg->policy : "caching";
  if (strcmp(policy, "caching") && strcmp(policy, "async")) return GRT_ERR_INVALID_ARG;
  grt_mempool *p = calloc(1, sizeof *p);
  if (!p) return GRT_ERR_NOMEM;
  p->cfg = *cfg;
  p->cfg.policy = NULL; /* not kept: the caller's string */
  p->exec = cfg->exec;
  p->is_async = !strcmp(policy, "async");
  if (cfg->alloc) p->acfg = *cfg->alloc;
  else grt_alloc_config_default(&p->acfg);
  pthread_mutex_init(&p->lock, NULL);
  grt__u64map_init(&p->blocks);
  grt__u64map_init(&p->torch);
  grt_status st = cfg->sorder ? grt__sorder_attach(cfg->sorder, cfg->exec) : GRT_OK;
  if (!st) p->so = cfg->sorder;
  if (!st) st = make_allocator(p, cfg, policy);
  /* Last: once registered, the pool sees every sync point of the exec. */
  if (!st) st = grt__exec_observe(p->exec, grt__mp_on_sync, p);
  if (st) {
    if (p->so) grt__sorder_detach(p->so);
    grt__keep_first(&st, grt_alloc_destroy(p->a));
    pthread_mutex_destroy(&p->lock);
    free(p);
    return st;
  }
  *out = p;
  return GRT_OK;
}

static void ev_put(grt_mempool *p, grt_event *ev) {
  if (p->n_spare == p->cap_spare) {
    size_t cap = p->cap_spare ? p->cap_spare * 2 : 16;
    grt_event **v = realloc(p->spare, cap * sizeof *v);
    if (!v) { /* no room to keep it spare: an idle event, so its destroy cannot fail */
      grt_status st = grt_event_destroy(ev);
      assert(st == GRT_OK);
      (void)st;
      return;
    }
    p->spare = v;
    p->cap_spare = cap;
  }
  p->spare[p->n_spare++] = ev;
}

static grt_status ev_get(grt_mempool *p, grt_event **out) {
  if (p->n_spare) {
    *out = p->spare[--p->n_spare];
    return GRT_OK;
  }
  grt_status st = grt_event_create(p->exec, GRT_EVENT_DISABLE_TIMING, out);
  if (!st) st = grt_event_set_name(*out, "free_async");
  if (st && *out) { /* a fresh event: destroying it cannot fail */
    grt_status dst = grt_event_destroy(*out);
    assert(dst == GRT_OK);
    (void)dst;
    *out = NULL;
  }
  return st;
}

static void unpark(grt_mempool *p, grt__mp_block *b) {
  if (b->prev) b->prev->next = b->next;
  else p->park_head = b->next;
  if (b->next) b->next->prev = b->prev;
  else p->park_tail = b->prev;
  b->prev = b->next = NULL;
  b->parked = false;
  ev_put(p, b->ev);
  b->ev = NULL;
  p->n_parked--;
}

/* Hands a parked block whose free completed back to the allocator. */
static void release(grt_mempool *p, grt__mp_block *b) {
  if (grt_alloc_free(p->a, b->ptr)) return; /* cannot happen for a block we hold; keep it parked */
  if (p->so) grt__sorder_free_done(p->so, b->ptr);
  unpark(p, b);
  grt__u64map_del(&p->blocks, b->ptr);
  free(b);
  p->c.released_to_allocator++;
}

grt_status grt__mp_release_completed(grt_mempool *p, bool all, grt_stream_id sid) {
  size_t n = 0;
  for (grt__mp_block *b = p->park_head; b; b = b->next)
    if (all || b->sid == sid) {
      p->cand[n] = b;
      p->cand_ev[n++] = b->ev;
    }
  grt_status st = n ? grt__events_order(NULL, p->cand_ev, n, p->cand_order) : GRT_OK;
  for (size_t i = 0; i < n && !st; i++)
    if (p->cand_order[i] == GRT__ORDER_COMPLETE) release(p, p->cand[i]);
  return st;
}

grt_status grt_mempool_destroy(grt_mempool *p) {
  if (!p) return GRT_OK;
  grt__mp_lock(p);
  bool busy = p->n_live || p->torch.count;
  grt__mp_unlock(p);
  if (busy) return GRT_ERR_BUSY;
  /* No sync point reaches the pool after this returns. */
  grt_status st = grt__exec_unobserve(p->exec, grt__mp_on_sync, p);
  grt__mp_lock(p);
  /* A failed sync (a sticky exec error) still releases: the pool is going away. */
  while (p->park_head) {
    grt__keep_first(&st, grt_event_synchronize(p->park_head->ev));
    grt__mp_block *b = p->park_head;
    release(p, b);
    if (p->park_head == b) break; /* the allocator refused: give up on it */
  }
  grt__mp_unlock(p);
  for (size_t i = 0; i < p->n_spare; i++) grt__keep_first(&st, grt_event_destroy(p->spare[i]));
  free(p->spare);
  free(p->cand);
  free(p->cand_ev);
  free(p->cand_order);
  grt__keep_first(&st, grt_alloc_destroy(p->a));
  if (p->so) grt__sorder_detach(p->so);
  grt__u64map_free(&p->blocks);
  grt__u64map_free(&p->torch);
  pthread_mutex_destroy(&p->lock);
  free(p);
  return st;
}

/* ---- malloc_async ---- */

static uint64_t round_req(const grt_mempool *p, uint64_t size) {
  return p->is_async ? (size + 511) & ~(uint64_t)511 : grt_alloc_round_size(&p->acfg, size);
}

static bool fits(const grt__mp_block *b, uint64_t rounded, bool tight) {
  return b->size >= rounded && (!tight || b->size <= 2 * rounded);
}

/* Best-fitting parked block of stream sid (same) or of the other streams
 * (!same); ties: the oldest free. */
static grt__mp_block *pick(grt_mempool *p, grt_stream_id sid, uint64_t rounded, bool same, bool tight) {
  grt__mp_block *best = NULL;
  for (grt__mp_block *b = p->park_head; b; b = b->next)
    if ((b->sid == sid) == same && fits(b, rounded, tight) && (!best || b->size < best->size)) best = b;
  return best;
}

/* The fitting frees of other streams, in park order, and how each stands
 * to s's next work (ORDERED is asked only when FOLLOW_EVENT_DEPS may use it). */
static grt_status others(grt_mempool *p, grt_stream *s, grt_stream_id sid, uint64_t rounded, bool tight, size_t *n) {
  size_t k = 0;
  for (grt__mp_block *b = p->park_head; b; b = b->next)
    if (b->sid != sid && fits(b, rounded, tight)) {
      p->cand[k] = b;
      p->cand_ev[k++] = b->ev;
    }
  *n = k;
  bool follow = p->cfg.reuse & GRT_REUSE_FOLLOW_EVENT_DEPS;
  return k ? grt__events_order(follow ? s : NULL, p->cand_ev, k, p->cand_order) : GRT_OK;
}

/* The best fitting free of another stream that FOLLOW_EVENT_DEPS or
 * OPPORTUNISTIC allows now; *passed when one fitted but none was allowed. */
static grt_status reuse_other(grt_mempool *p, grt_stream *s, grt_stream_id sid, uint64_t rounded, bool tight,
                              grt__mp_block **out, mp_how *how, bool *passed) {
  if (p->cfg.per_stream) {
    *passed |= pick(p, sid, rounded, false, tight) != NULL;
    return GRT_OK;
  }
  size_t n, best = SIZE_MAX;
  grt_status st = others(p, s, sid, rounded, tight, &n);
  for (size_t i = 0; i < n && !st; i++) {
    grt__order o = p->cand_order[i];
    bool allowed = (o == GRT__ORDER_ORDERED && (p->cfg.reuse & GRT_REUSE_FOLLOW_EVENT_DEPS)) ||
                   (o == GRT__ORDER_COMPLETE && (p->cfg.reuse & GRT_REUSE_OPPORTUNISTIC));
    if (allowed && (best == SIZE_MAX || p->cand[i]->size < p->cand[best]->size)) best = i;
  }
  if (st) return st;
  *passed |= n && best == SIZE_MAX;
  if (best != SIZE_MAX) {
    *out = p->cand[best];
    *how = p->cand_order[best] == GRT__ORDER_ORDERED ? MP_EVENT_DEP : MP_OPPORTUNISTIC;
  }
  return GRT_OK;
}

static grt_status wait_edge(grt_mempool *p, grt_stream *s, grt_event *ev) {
  grt_status st = p->so ? grt_sorder_stream_wait_event(p->so, s, ev) : grt_stream_wait_event(s, ev);
  if (!st) p->c.edges_inserted++;
  return st;
}

/* The pool cannot grow: another stream's pending free, after a wait on it. */
static grt_status reuse_internal(grt_mempool *p, grt_stream *s, grt_stream_id sid, uint64_t rounded,
                                 grt__mp_block **out, mp_how *how) {
  if (!(p->cfg.reuse & GRT_REUSE_INTERNAL_DEPS) || p->cfg.per_stream) return GRT_OK;
  grt__mp_block *b = pick(p, sid, rounded, false, false);
  grt__order o = GRT__ORDER_UNORDERED;
  grt_status st = b ? grt__events_order(NULL, &b->ev, 1, &o) : GRT_OK;
  if (!st && b && o != GRT__ORDER_COMPLETE) st = wait_edge(p, s, b->ev);
  if (!st && b) {
    *out = b;
    *how = MP_INTERNAL;
  }
  return st;
}

static grt_status on_oom(grt_mempool *p, grt_stream *s, grt_stream_id sid, uint64_t rounded, grt__mp_block **out,
                         mp_how *how, bool *passed) {
  if ((*out = pick(p, sid, rounded, true, false))) {
    *how = MP_SAME;
    return GRT_OK;
  }
  grt_status st = reuse_other(p, s, sid, rounded, false, out, how, passed);
  if (!st && !*out) st = reuse_internal(p, s, sid, rounded, out, how);
  return st ? st : *out ? GRT_OK : GRT_ERR_OOM;
}

/* A parked block by policy, else a new block from the allocator (*ptr). */
static grt_status find_block(grt_mempool *p, grt_stream *s, grt_stream_id sid, uint64_t size, grt__mp_block **out,
                             mp_how *how, bool *passed, grt_devptr *ptr) {
  uint64_t rounded = round_req(p, size);
  if ((*out = pick(p, sid, rounded, true, true))) {
    *how = MP_SAME;
    return GRT_OK;
  }
  grt_status st = reuse_other(p, s, sid, rounded, true, out, how, passed);
  if (st || *out) return st;
  /* The device passed these frees: the allocator may serve them to anyone. */
  if (p->cfg.reuse & GRT_REUSE_OPPORTUNISTIC) grt__ignore(grt__mp_release_completed(p, true, 0)); /* best effort */
  st = grt_alloc_malloc(p->a, size, p->cfg.per_stream ? sid : POOL_SID, ptr);
  return st == GRT_ERR_OOM ? on_oom(p, s, sid, rounded, out, how, passed) : st;
}

/* What a new block needs on the host, before anything changes: a failure
 * after the allocator handed out memory would leave a segment cached. */
static grt_status prepare_new(grt_mempool *p, grt_stream *s, grt__mp_block **fresh) {
  *fresh = calloc(1, sizeof **fresh);
  grt_status st = *fresh && grt__u64map_reserve(&p->blocks, 1) ? GRT_OK : GRT_ERR_NOMEM;
  if (!st && p->so) st = grt__sorder_prepare(p->so, s);
  if (st) {
    free(*fresh);
    *fresh = NULL;
  }
  return st;
}

/* The sanitizer learns of the allocation before the pool commits it, so that
 * its failure leaves the pool as it was. */
static grt_status adopt_new(grt_mempool *p, grt_stream *s, grt_devptr ptr, grt__mp_block *b) {
  uint64_t bsize = 0, req;
  grt_status st = grt_alloc_block_info(p->a, ptr, &bsize, &req);
  if (!st && p->so) st = grt__sorder_alloc(p->so, ptr, bsize, s);
  if (!st) {
    bool put = grt__u64map_put(&p->blocks, ptr, b); /* reserved: cannot fail */
    assert(put);
    (void)put;
    *b = (grt__mp_block){.ptr = ptr, .size = bsize};
    return GRT_OK;
  }
  grt_status fst = grt_alloc_free(p->a, ptr); /* the block just allocated: its free cannot fail */
  assert(fst == GRT_OK);
  (void)fst;
  return st;
}

/* A reuse as the sanitizer sees it: the edge the program made, or a free the
 * device passed, then the allocation. */
static grt_status adopt_parked(grt_mempool *p, grt_stream *s, grt__mp_block *b, mp_how how) {
  grt_status st = GRT_OK;
  if (p->so && how == MP_EVENT_DEP) st = grt__sorder_ordered(p->so, s, b->ev);
  if (p->so && how == MP_OPPORTUNISTIC) grt__sorder_free_done(p->so, b->ptr);
  if (!st && p->so) st = grt__sorder_alloc(p->so, b->ptr, b->size, s);
  if (!st) unpark(p, b);
  return st;
}

static void count_reuse(grt_mempool *p, mp_how how) {
  if (how == MP_SAME) p->c.reuse_same_stream++;
  else if (how == MP_EVENT_DEP) p->c.reuse_event_dep++;
  else if (how == MP_OPPORTUNISTIC) p->c.reuse_opportunistic++;
  else if (how == MP_INTERNAL) p->c.reuse_internal_dep++;
}

/* During stream capture, stream-ordered allocation becomes graph memory
 * nodes (fixed addresses every replay), as cudaMallocAsync does in a capture. */
static int capturing(grt_stream *s) {
  grt_capture_status cs = GRT_CAPTURE_STATUS_NONE;
  return grt_stream_capture_status(s, &cs) == GRT_OK && cs != GRT_CAPTURE_STATUS_NONE;
}

grt_status grt_malloc_async(grt_mempool *p, uint64_t size, grt_stream *s, grt_devptr *out) {
  if (!p || !s || !out) return GRT_ERR_INVALID_ARG;
  if (!size) return GRT_ERR_SIZE;
  if (capturing(s)) return grt_stream_malloc_async_graph(s, size, out);
  grt_stream_id sid;
  grt_status st = grt_stream_get_id(s, &sid);
  if (st) return st;
  grt__mp_lock(p);
  grt__mp_block *b = NULL, *fresh = NULL;
  mp_how how = MP_NEW;
  bool passed = false;
  grt_devptr ptr = 0;
  st = prepare_new(p, s, &fresh);
  if (!st) st = find_block(p, s, sid, size, &b, &how, &passed, &ptr);
  if (!st && how == MP_NEW && !(st = adopt_new(p, s, ptr, fresh))) {
    b = fresh;
    fresh = NULL;
  } else if (!st && how != MP_NEW) {
    st = adopt_parked(p, s, b, how);
  }
  free(fresh);
  if (!st) {
    count_reuse(p, how);
    p->c.reuses_deferred += passed && (how == MP_NEW || how == MP_SAME); /* no other stream's free was taken */
    b->sid = sid;
    p->n_live++;
    p->used += b->size;
    if (p->used > p->used_high) p->used_high = p->used;
    p->c.mallocs++;
    *out = b->ptr;
  }
  grt__mp_unlock(p);
  return st;
}

/* ---- free_async ---- */

static grt_status live_block(grt_mempool *p, grt_devptr ptr, grt__mp_block **out) {
  grt__mp_block *b = grt__u64map_get(&p->blocks, ptr);
  if (!b) return grt__u64map_get(&p->torch, ptr) ? GRT_ERR_INVALID_ARG : GRT_ERR_UNKNOWN_POINTER;
  if (b->parked) return GRT_ERR_DOUBLE_FREE;
  *out = b;
  return GRT_OK;
}

/* Room in the scratch arrays for n parked blocks; false: host memory ran out
 * (arrays that grew keep their room; cap_cand says what all three hold). */
static bool reserve_cand(grt_mempool *p, size_t n) {
  if (n <= p->cap_cand) return true;
  size_t cap = p->cap_cand ? p->cap_cand * 2 : 16;
  while (cap < n) cap *= 2;
  void *v = realloc(p->cand, cap * sizeof *p->cand);
  if (v) p->cand = v;
  void *e = v ? realloc(p->cand_ev, cap * sizeof *p->cand_ev) : NULL;
  if (e) p->cand_ev = e;
  void *o = e ? realloc(p->cand_order, cap * sizeof *p->cand_order) : NULL;
  if (o) p->cand_order = o;
  if (o) p->cap_cand = cap;
  return o != NULL;
}

static void park(grt_mempool *p, grt__mp_block *b, grt_stream_id sid, grt_event *ev) {
  b->parked = true;
  b->sid = sid;
  b->ev = ev;
  b->prev = p->park_tail;
  b->next = NULL;
  if (p->park_tail) p->park_tail->next = b;
  else p->park_head = b;
  p->park_tail = b;
  p->n_parked++;
  p->n_live--;
  p->used -= b->size;
  p->c.frees++;
}

grt_status grt_free_async(grt_mempool *p, grt_devptr ptr, grt_stream *s) {
  if (!p || !s) return GRT_ERR_INVALID_ARG;
  if (capturing(s)) return grt_stream_free_async_graph(s, ptr); /* a free node (graph memory only) */
  grt_stream_id sid;
  grt_status st = grt_stream_get_id(s, &sid);
  if (st) return st;
  grt__mp_lock(p);
  grt__mp_block *b = NULL;
  grt_event *ev = NULL;
  if (!(st = live_block(p, ptr, &b)) && !(st = reserve_cand(p, p->n_parked + 1) ? GRT_OK : GRT_ERR_NOMEM) &&
      !(st = ev_get(p, &ev))) {
    st = p->so ? grt__sorder_free_async(p->so, ptr, b->size, s, ev) : grt_event_record(ev, s);
    if (st) ev_put(p, ev);
  }
  if (!st) park(p, b, sid, ev);
  grt__mp_unlock(p);
  /* Not the pool's: memory a graph's allocation node made, which any stream may free. */
  if (st == GRT_ERR_UNKNOWN_POINTER) st = grt_stream_free_async_graph(s, ptr);
  return st;
}

grt_status grt_mempool_free_host_order(grt_mempool *p, grt_devptr ptr) {
  if (!p) return GRT_ERR_INVALID_ARG;
  grt__mp_lock(p);
  grt__mp_block *b = NULL;
  grt_status st = live_block(p, ptr, &b);
  if (!st && p->so) st = grt__sorder_free_host(p->so, ptr, b->size);
  if (!st) st = grt_alloc_free(p->a, ptr);
  if (!st) {
    grt__u64map_del(&p->blocks, ptr);
    p->n_live--;
    p->used -= b->size;
    p->c.frees++;
    free(b);
  }
  grt__mp_unlock(p);
  return st;
}

/* ---- PyTorch's path: stream-tagged malloc, record_stream, deferred free ---- */

grt_status grt_mempool_malloc(grt_mempool *p, uint64_t size, grt_stream *s, grt_devptr *out) {
  if (!p || !s || !out) return GRT_ERR_INVALID_ARG;
  if (p->is_async) return GRT_ERR_UNSUPPORTED;
  grt_stream_id sid;
  grt_status st = grt_stream_get_id(s, &sid);
  if (st) return st;
  grt__mp_lock(p);
  grt_devptr ptr;
  uint64_t bsize = 0, req;
  st = grt_alloc_malloc(p->a, size, sid, &ptr);
  if (!st && (grt_alloc_block_info(p->a, ptr, &bsize, &req) ||
              !grt__u64map_put(&p->torch, ptr, (void *)(uintptr_t)bsize))) {
    grt_status fst = grt_alloc_free(p->a, ptr); /* the block just allocated: its free cannot fail */
    assert(fst == GRT_OK);
    (void)fst;
    st = GRT_ERR_NOMEM;
  }
  if (!st) {
    p->used += bsize;
    if (p->used > p->used_high) p->used_high = p->used;
    p->c.mallocs++;
    *out = ptr;
  }
  grt__mp_unlock(p);
  return st;
}

grt_status grt_mempool_record_stream(grt_mempool *p, grt_devptr ptr, grt_stream *s) {
  if (!p || !s) return GRT_ERR_INVALID_ARG;
  if (p->is_async) return GRT_ERR_UNSUPPORTED;
  grt_stream_id sid;
  grt_status st = grt_stream_get_id(s, &sid);
  if (st) return st;
  grt__mp_lock(p);
  st = grt__u64map_get(&p->torch, ptr) ? grt_alloc_record_stream(p->a, ptr, sid) : GRT_ERR_UNKNOWN_POINTER;
  grt__mp_unlock(p);
  return st;
}

grt_status grt_mempool_free(grt_mempool *p, grt_devptr ptr) {
  if (!p) return GRT_ERR_INVALID_ARG;
  if (p->is_async) return GRT_ERR_UNSUPPORTED;
  grt__mp_lock(p);
  void *v = grt__u64map_get(&p->torch, ptr);
  grt_status st = v ? grt_alloc_free(p->a, ptr) : GRT_ERR_UNKNOWN_POINTER;
  if (!v && grt__u64map_get(&p->blocks, ptr)) st = GRT_ERR_INVALID_ARG; /* a stream-ordered block: free_async */
  if (!st) {
    grt__u64map_del(&p->torch, ptr);
    p->used -= (uint64_t)(uintptr_t)v;
    p->c.frees++;
  }
  grt__mp_unlock(p);
  return st;
}
