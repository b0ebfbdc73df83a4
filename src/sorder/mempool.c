/* mempool.c — the stream-ordered pool (cudaMallocAsync / cudaFreeAsync) over
 * an allocator of policy "caching" or "async" and the executor.
 *
 * A block the user frees with free_async stays allocated in the underlying
 * allocator and is "parked" with (freeing stream, event recorded at the free
 * point). A parked block can be handed out again only in stream order:
 *   - on its freeing stream at once (FIFO order covers it);
 *   - on another stream, by policy: OPPORTUNISTIC when its event already
 *     completed (the host learns it through the query), FOLLOW_EVENT_DEPS by
 *     making the new stream wait for the event (an edge the pool inserts);
 *     INTERNAL_DEPS only when the allocator is out of memory.
 * A parked block goes back to the allocator (where any stream may take it)
 * only when the free is known complete: after a host synchronization through
 * the pool, or — with OPPORTUNISTIC — when its event query says done. The
 * last resort on OOM synchronizes every parked free and retries (PyTorch's
 * flush-and-retry), counted as a host sync.
 *
 * Shared pool: every stream-ordered allocation is made in the allocator under
 * one stream id, so freed memory merges and serves every stream. Per-stream
 * pools: the real stream id is used (the caching policy then keeps per-stream
 * bins, PyTorch's model) and parked blocks never cross streams.
 *
 * Invariants: `blocks` maps every block handed out by malloc_async and not yet
 * returned to the allocator (live or parked); parked blocks are exactly those
 * on the park list, each with an event; used = sum of live block sizes.
 * Locking: pool->lock guards all of it; exec and sorder calls are made under
 * it (lock order: pool, sorder, allocator, exec). Thread-agnostic below: the
 * allocator sees only stream ids.
 */
#include <assert.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "base/status.h"
#include "base/u64map.h"
#include "gpurt/policy.h"
#include "sorder/sorder_impl.h"

#define POOL_SID (UINT64_MAX - 1) /* the one stream id of the shared pool in the allocator */

typedef struct mp_block {
  grt_devptr ptr;
  uint64_t size;      /* the block's size in the allocator */
  grt_stream_id sid;  /* live: allocating stream; parked: freeing stream */
  grt_event *ev;      /* parked: the free point */
  struct mp_block *prev, *next;
  bool parked;
} mp_block;

struct grt_mempool {
  grt_mempool_config cfg;
  grt_exec *exec;
  grt_sorder *so;
  grt_allocator *a;
  bool is_async;
  grt_alloc_config acfg;
  grt_stream_ops ops;
  pthread_mutex_t lock;
  grt__u64map blocks; /* ptr -> mp_block */
  grt__u64map torch;  /* PyTorch path: ptr -> size (live) */
  mp_block *park_head, *park_tail;
  size_t n_parked, n_live;
  grt_event **spare;
  size_t n_spare, cap_spare;
  grt_mempool_counters c;
  uint64_t used, used_high;
};

void grt_mempool_config_default(grt_mempool_config *cfg) {
  if (!cfg) return;
  memset(cfg, 0, sizeof *cfg);
  cfg->policy = "caching";
  cfg->reuse = GRT_REUSE_ALL;
}

/* ---- create / destroy ---- */

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
  p->acfg.stream_ops = &p->ops; /* the exec's events serve record_stream */
  grt_device *dev;
  grt_status st = grt_exec_stream_ops(cfg->exec, &p->ops);
  if (!st) st = grt_exec_get_device(cfg->exec, &dev);
  if (!st && cfg->sorder) st = grt__sorder_attach(cfg->sorder, cfg->exec);
  if (!st) {
    p->so = cfg->sorder;
    st = grt_alloc_create(policy, dev, &p->acfg, &p->a);
  }
  if (!st && p->is_async) st = grt_alloc_set(p->a, "release_threshold", cfg->release_threshold);
  if (st) {
    if (p->so) grt__sorder_detach(p->so); /* attached above: every later failure detaches */
    grt__keep_first(&st, grt_alloc_destroy(p->a));
    free(p);
    return st;
  }
  pthread_mutex_init(&p->lock, NULL);
  grt__u64map_init(&p->blocks);
  grt__u64map_init(&p->torch);
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

static void unpark(grt_mempool *p, mp_block *b) {
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

/* Hands a parked block back to the allocator. */
static void release(grt_mempool *p, mp_block *b) {
  if (grt_alloc_free(p->a, b->ptr)) return; /* cannot happen for a block we hold; keep it parked */
  unpark(p, b);
  grt__u64map_del(&p->blocks, b->ptr);
  free(b);
  p->c.released_to_allocator++;
}

static grt_status query(grt_mempool *p, grt_event *ev) {
  return p->so ? grt_sorder_event_query(p->so, ev) : grt_event_query(ev);
}

/* Releases every parked block whose free completed (of stream sid, or all when all). */
static void release_completed(grt_mempool *p, bool all, grt_stream_id sid) {
  for (mp_block *b = p->park_head, *n; b; b = n) {
    n = b->next;
    if ((all || b->sid == sid) && query(p, b->ev) == GRT_OK) release(p, b);
  }
}

grt_status grt_mempool_destroy(grt_mempool *p) {
  if (!p) return GRT_OK;
  pthread_mutex_lock(&p->lock);
  if (p->n_live || p->torch.count) {
    pthread_mutex_unlock(&p->lock);
    return GRT_ERR_BUSY;
  }
  /* A failed sync (a sticky exec error) still releases: the pool is going away. */
  grt_status st = GRT_OK;
  while (p->park_head) {
    grt__keep_first(&st, grt_event_synchronize(p->park_head->ev));
    mp_block *b = p->park_head;
    release(p, b);
    if (p->park_head == b) break; /* the allocator refused: give up on it */
  }
  pthread_mutex_unlock(&p->lock);
  for (size_t i = 0; i < p->n_spare; i++) grt__keep_first(&st, grt_event_destroy(p->spare[i]));
  free(p->spare);
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

/* Best-fitting parked block: same stream only (same = 1), other streams only
 * (same = 0). tight: at most twice the rounded size (no gross waste). */
static mp_block *pick(grt_mempool *p, grt_stream_id sid, uint64_t rounded, int same, bool tight) {
  mp_block *best = NULL;
  for (mp_block *b = p->park_head; b; b = b->next) {
    if ((b->sid == sid) != same || b->size < rounded || (tight && b->size > 2 * rounded)) continue;
    if (!best || b->size < best->size) best = b; /* ties: the oldest free */
  }
  return best;
}

static grt_status wait_edge(grt_mempool *p, grt_stream *s, grt_event *ev) {
  grt_status st = p->so ? grt_sorder_stream_wait_event(p->so, s, ev) : grt_stream_wait_event(s, ev);
  if (!st) p->c.edges_inserted++;
  return st;
}

/* Host-synchronizes every parked free and hands them all back (the last resort). */
static grt_status sync_release_all(grt_mempool *p) {
  if (!p->park_head) return GRT_OK;
  grt_status st = GRT_OK;
  for (mp_block *b = p->park_head; b && !st; b = b->next)
    st = p->so ? grt_sorder_event_synchronize(p->so, b->ev) : grt_event_synchronize(b->ev);
  if (st) return st;
  p->c.host_syncs++;
  release_completed(p, true, 0);
  return GRT_OK;
}

/* A cross-stream reuse of a parked block by policy; NULL when none applies. */
static mp_block *reuse_other(grt_mempool *p, grt_stream *s, grt_stream_id sid, uint64_t rounded, grt_status *st) {
  mp_block *b = pick(p, sid, rounded, 0, true);
  if (!b) return NULL;
  if (p->cfg.per_stream) {
    p->c.reuses_deferred++;
    return NULL;
  }
  if ((p->cfg.reuse & GRT_REUSE_OPPORTUNISTIC) && query(p, b->ev) == GRT_OK) {
    p->c.reuse_opportunistic++;
    return b;
  }
  if (p->cfg.reuse & GRT_REUSE_FOLLOW_EVENT_DEPS) {
    if ((*st = wait_edge(p, s, b->ev))) return NULL;
    p->c.reuse_event_dep++;
    return b;
  }
  p->c.reuses_deferred++;
  return NULL;
}

static grt_status from_allocator(grt_mempool *p, uint64_t size, grt_stream *s, grt_stream_id sid, uint64_t rounded,
                                 mp_block **reused, grt_devptr *ptr) {
  grt_stream_id asid = p->cfg.per_stream ? sid : POOL_SID;
  if (p->cfg.reuse & GRT_REUSE_OPPORTUNISTIC) release_completed(p, true, 0);
  grt_status st = grt_alloc_malloc(p->a, size, asid, ptr);
  if (st != GRT_ERR_OOM) return st;
  if ((p->cfg.reuse & GRT_REUSE_INTERNAL_DEPS) && !p->cfg.per_stream) {
    mp_block *b = pick(p, sid, rounded, 0, false);
    if (b) {
      grt_status w = wait_edge(p, s, b->ev);
      if (w) return w;
      p->c.reuse_internal_dep++;
      *reused = b;
      return GRT_OK;
    }
  }
  if (!p->park_head) return st;
  grt_status w = sync_release_all(p);
  return w ? w : grt_alloc_malloc(p->a, size, asid, ptr);
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
  pthread_mutex_lock(&p->lock);
  uint64_t rounded = round_req(p, size);
  mp_block *b = pick(p, sid, rounded, 1, true);
  if (b) p->c.reuse_same_stream++;
  else b = reuse_other(p, s, sid, rounded, &st);
  grt_devptr ptr = 0;
  if (!b && !st) st = from_allocator(p, size, s, sid, rounded, &b, &ptr);
  /* The sanitizer learns of the allocation before the pool commits it, so
   * that its failure leaves the pool as it was. */
  if (!st && !b) { /* a new block from the allocator */
    uint64_t bsize = 0, req;
    b = calloc(1, sizeof *b);
    st = !b ? GRT_ERR_NOMEM : grt_alloc_block_info(p->a, ptr, &bsize, &req);
    if (!st && p->so) st = grt__sorder_alloc(p->so, ptr, bsize, s);
    if (!st && !grt__u64map_put(&p->blocks, ptr, b)) st = GRT_ERR_NOMEM;
    if (st) {
      free(b);
      grt_status fst = grt_alloc_free(p->a, ptr); /* the block just allocated: its free cannot fail */
      assert(fst == GRT_OK);
      (void)fst;
    } else {
      *b = (mp_block){.ptr = ptr, .size = bsize};
    }
  } else if (!st) {
    if (p->so) st = grt__sorder_alloc(p->so, b->ptr, b->size, s);
    if (!st) unpark(p, b);
  }
  if (!st) {
    b->sid = sid;
    p->n_live++;
    p->used += b->size;
    if (p->used > p->used_high) p->used_high = p->used;
    p->c.mallocs++;
    *out = b->ptr;
  }
  pthread_mutex_unlock(&p->lock);
  return st;
}

/* ---- free_async ---- */

static grt_status live_block(grt_mempool *p, grt_devptr ptr, mp_block **out) {
  mp_block *b = grt__u64map_get(&p->blocks, ptr);
  if (!b) return grt__u64map_get(&p->torch, ptr) ? GRT_ERR_INVALID_ARG : GRT_ERR_UNKNOWN_POINTER;
  if (b->parked) return GRT_ERR_DOUBLE_FREE;
  *out = b;
  return GRT_OK;
}

grt_status grt_free_async(grt_mempool *p, grt_devptr ptr, grt_stream *s) {
  if (!p || !s) return GRT_ERR_INVALID_ARG;
  if (capturing(s)) return grt_stream_free_async_graph(s, ptr); /* a free node (graph memory only) */
  grt_stream_id sid;
  grt_status st = grt_stream_get_id(s, &sid);
  if (st) return st;
  pthread_mutex_lock(&p->lock);
  mp_block *b = NULL;
  grt_event *ev = NULL;
  if (!(st = live_block(p, ptr, &b)) && !(st = ev_get(p, &ev))) {
    st = p->so ? grt__sorder_free_async(p->so, ptr, b->size, s, ev) : grt_event_record(ev, s);
    if (st) ev_put(p, ev);
  }
  if (!st) {
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
  pthread_mutex_unlock(&p->lock);
  return st;
}

grt_status grt_mempool_free_host_order(grt_mempool *p, grt_devptr ptr) {
  if (!p) return GRT_ERR_INVALID_ARG;
  pthread_mutex_lock(&p->lock);
  mp_block *b = NULL;
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
  pthread_mutex_unlock(&p->lock);
  return st;
}

/* ---- PyTorch's path: stream-tagged malloc, record_stream, deferred free ---- */

grt_status grt_mempool_malloc(grt_mempool *p, uint64_t size, grt_stream *s, grt_devptr *out) {
  if (!p || !s || !out) return GRT_ERR_INVALID_ARG;
  if (p->is_async) return GRT_ERR_UNSUPPORTED;
  grt_stream_id sid;
  grt_status st = grt_stream_get_id(s, &sid);
  if (st) return st;
  pthread_mutex_lock(&p->lock);
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
  pthread_mutex_unlock(&p->lock);
  return st;
}

grt_status grt_mempool_record_stream(grt_mempool *p, grt_devptr ptr, grt_stream *s) {
  if (!p || !s) return GRT_ERR_INVALID_ARG;
  if (p->is_async) return GRT_ERR_UNSUPPORTED;
  grt_stream_id sid;
  grt_status st = grt_stream_get_id(s, &sid);
  if (st) return st;
  pthread_mutex_lock(&p->lock);
  st = grt__u64map_get(&p->torch, ptr) ? grt_alloc_record_stream(p->a, ptr, sid) : GRT_ERR_UNKNOWN_POINTER;
  pthread_mutex_unlock(&p->lock);
  return st;
}

grt_status grt_mempool_free(grt_mempool *p, grt_devptr ptr) {
  if (!p) return GRT_ERR_INVALID_ARG;
  if (p->is_async) return GRT_ERR_UNSUPPORTED;
  pthread_mutex_lock(&p->lock);
  void *v = grt__u64map_get(&p->torch, ptr);
  grt_status st = v ? grt_alloc_free(p->a, ptr) : GRT_ERR_UNKNOWN_POINTER;
  if (!v && grt__u64map_get(&p->blocks, ptr)) st = GRT_ERR_INVALID_ARG; /* a stream-ordered block: free_async */
  if (!st) {
    grt__u64map_del(&p->torch, ptr);
    p->used -= (uint64_t)(uintptr_t)v;
    p->c.frees++;
  }
  pthread_mutex_unlock(&p->lock);
  return st;
}

/* ---- sync points, release threshold, trim ---- */

static uint64_t reserved_now(grt_mempool *p) {
  grt_alloc_stats s;
  return grt_alloc_get_stats(p->a, &s) ? 0 : (uint64_t)s.reserved_bytes[GRT_STAT_ALL].current;
}

/* Releases cached memory down to `bytes` (lock held, nothing parked in the way). */
static grt_status shrink(grt_mempool *p, uint64_t bytes) {
  if (reserved_now(p) <= bytes) return GRT_OK;
  return p->is_async ? grt_alloc_async_trim_to(p->a, bytes) : grt_alloc_empty_cache(p->a);
}

static grt_status after_sync(grt_mempool *p, bool all, grt_stream_id sid) {
  pthread_mutex_lock(&p->lock);
  p->c.host_syncs++;
  release_completed(p, all, sid);
  grt_status st = shrink(p, p->cfg.release_threshold);
  pthread_mutex_unlock(&p->lock);
  return st;
}

grt_status grt_mempool_stream_synchronize(grt_mempool *p, grt_stream *s) {
  if (!p || !s) return GRT_ERR_INVALID_ARG;
  grt_stream_id sid;
  grt_status st = grt_stream_get_id(s, &sid);
  if (!st) st = p->so ? grt_sorder_stream_synchronize(p->so, s) : grt_stream_synchronize(s);
  return st ? st : after_sync(p, false, sid);
}

grt_status grt_mempool_synchronize(grt_mempool *p) {
  if (!p) return GRT_ERR_INVALID_ARG;
  grt_status st = p->so ? grt_sorder_synchronize(p->so) : grt_exec_synchronize(p->exec);
  return st ? st : after_sync(p, true, 0);
}

grt_status grt_mempool_set_release_threshold(grt_mempool *p, uint64_t bytes) {
  if (!p) return GRT_ERR_INVALID_ARG;
  pthread_mutex_lock(&p->lock);
  grt_status st = p->is_async ? grt_alloc_set(p->a, "release_threshold", bytes) : GRT_OK;
  if (!st) p->cfg.release_threshold = bytes;
  pthread_mutex_unlock(&p->lock);
  return st;
}

grt_status grt_mempool_trim_to(grt_mempool *p, uint64_t bytes) {
  if (!p) return GRT_ERR_INVALID_ARG;
  pthread_mutex_lock(&p->lock);
  grt_status st = GRT_OK;
  for (mp_block *b = p->park_head; b && !st; b = b->next)
    if (grt_event_query(b->ev) != GRT_OK) st = GRT_ERR_BUSY; /* a free whose stream position is not reached */
  if (!st) {
    while (p->park_head) {
      mp_block *b = p->park_head;
      release(p, b);
      if (p->park_head == b) break;
    }
    st = shrink(p, bytes);
  }
  pthread_mutex_unlock(&p->lock);
  return st;
}

/* ---- figures ---- */

grt_status grt_mempool_get_attrs(grt_mempool *p, grt_mempool_attrs *out) {
  if (!p || !out) return GRT_ERR_INVALID_ARG;
  grt_alloc_stats s;
  pthread_mutex_lock(&p->lock);
  grt_status st = grt_alloc_get_stats(p->a, &s);
  if (!st) {
    out->release_threshold = p->cfg.release_threshold;
    out->reserved_mem_current = (uint64_t)s.reserved_bytes[GRT_STAT_ALL].current;
    out->reserved_mem_high = (uint64_t)s.reserved_bytes[GRT_STAT_ALL].peak;
    out->used_mem_current = p->used;
    out->used_mem_high = p->used_high;
  }
  pthread_mutex_unlock(&p->lock);
  return st;
}

grt_status grt_mempool_reset_high(grt_mempool *p) {
  if (!p) return GRT_ERR_INVALID_ARG;
  pthread_mutex_lock(&p->lock);
  p->used_high = p->used;
  grt_status st = grt_alloc_reset_peak_stats(p->a);
  pthread_mutex_unlock(&p->lock);
  return st;
}

grt_status grt_mempool_get_counters(grt_mempool *p, grt_mempool_counters *out) {
  if (!p || !out) return GRT_ERR_INVALID_ARG;
  grt_alloc_stats s;
  pthread_mutex_lock(&p->lock);
  grt_status st = grt_alloc_get_stats(p->a, &s);
  *out = p->c;
  out->pending_frees = p->n_parked;
  out->device_mallocs = st ? 0 : s.num_device_alloc;
  pthread_mutex_unlock(&p->lock);
  return st;
}

grt_status grt_mempool_get_allocator(grt_mempool *p, grt_allocator **out) {
  if (!p || !out) return GRT_ERR_INVALID_ARG;
  *out = p->a;
  return GRT_OK;
}
