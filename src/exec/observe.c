/* observe.c — sync observers and the order query (observe.h).
 *
 * Observers: a list whose nodes are inserted at the head under obs_lock and
 * unlinked only while no notification walks it (obs_walkers == 0), so a walk
 * reads it without the lock. Calls run with no lock held: an observer takes
 * its own locks, and a thread that already holds them may synchronize (and
 * notify) meanwhile without a lock cycle. Removal marks the node and waits
 * until its running calls ended (busy, an atomic count; each side writes its
 * flag before reading the other's, so either the walk sees the mark or the
 * remover sees the call); then the node is dead: the remover frees it when no
 * walk is under way, else the last walker does.
 *
 * The order query walks back from the work s would run next through the
 * pending ops only: an op completes only after its stream predecessors and
 * its deps, so when the snapshot asked about is still pending, every op on a
 * dependency path from s to it is pending too (a completed one would prove
 * the snapshot complete). Each stream is explored once per depth reached, so
 * a query costs at most the pending ops and their deps.
 */
#include <stdlib.h>

#include "base/u64map.h"
#include "exec/exec_impl.h"
#include "exec/observe.h"

struct grt__sync_obs {
  grt__sync_obs *next;
  grt__sync_fn fn;
  void *ctx;
  atomic_uint busy;    /* calls running now */
  atomic_bool removed; /* no further call may start */
  bool dead;           /* removed and its calls ended: free to unlink (obs_lock) */
};

void grt__observers_init(grt_exec *exec) {
  pthread_mutex_init(&exec->obs_lock, NULL);
  pthread_cond_init(&exec->obs_cv, NULL);
}

void grt__observers_free(grt_exec *exec) {
  for (grt__sync_obs *o = exec->observers, *n; o; o = n) {
    n = o->next;
    free(o);
  }
  exec->observers = NULL;
  pthread_cond_destroy(&exec->obs_cv);
  pthread_mutex_destroy(&exec->obs_lock);
}

unsigned grt__observers_live(grt_exec *exec) {
  pthread_mutex_lock(&exec->obs_lock);
  unsigned n = exec->live_observers;
  pthread_mutex_unlock(&exec->obs_lock);
  return n;
}

/* obs_lock held, no walker: frees the dead nodes (a remover still waiting
 * for its node's calls keeps it). */
static void sweep(grt_exec *exec) {
  for (grt__sync_obs **pp = &exec->observers; *pp;) {
    grt__sync_obs *o = *pp;
    if (!o->dead) {
      pp = &o->next;
      continue;
    }
    *pp = o->next;
    free(o);
  }
}

grt_status grt__exec_observe(grt_exec *exec, grt__sync_fn fn, void *ctx) {
  if (!exec || exec->magic != GRT__EXEC_MAGIC || !fn) return GRT_ERR_INVALID_ARG;
  grt__sync_obs *o = calloc(1, sizeof *o);
  if (!o) return GRT_ERR_NOMEM;
  o->fn = fn;
  o->ctx = ctx;
  atomic_init(&o->busy, 0);
  atomic_init(&o->removed, false);
  pthread_mutex_lock(&exec->obs_lock);
  o->next = exec->observers;
  exec->observers = o;
  exec->live_observers++;
  pthread_mutex_unlock(&exec->obs_lock);
  return GRT_OK;
}

grt_status grt__exec_unobserve(grt_exec *exec, grt__sync_fn fn, void *ctx) {
  if (!exec || exec->magic != GRT__EXEC_MAGIC || !fn) return GRT_ERR_INVALID_ARG;
  pthread_mutex_lock(&exec->obs_lock);
  grt__sync_obs *o = exec->observers;
  while (o && (o->fn != fn || o->ctx != ctx || atomic_load(&o->removed))) o = o->next;
  bool found = o != NULL;
  if (found) {
    atomic_store(&o->removed, true);
    while (atomic_load(&o->busy)) pthread_cond_wait(&exec->obs_cv, &exec->obs_lock);
    o->dead = true;
    exec->live_observers--;
    if (!exec->obs_walkers) sweep(exec); /* frees o */
  }
  pthread_mutex_unlock(&exec->obs_lock);
  return found ? GRT_OK : GRT_ERR_NOT_FOUND;
}

void grt__sync_notify(grt_exec *exec, grt__sync_kind kind, const grt_stream *s) {
  pthread_mutex_lock(&exec->obs_lock);
  grt__sync_obs *first = exec->observers;
  if (first) exec->obs_walkers++;
  pthread_mutex_unlock(&exec->obs_lock);
  if (!first) return;
  grt__sync_point sp = {kind, s != NULL, s ? s->id : 0};
  for (grt__sync_obs *o = first; o; o = o->next) {
    atomic_fetch_add(&o->busy, 1);
    if (!atomic_load(&o->removed)) o->fn(o->ctx, &sp);
    if (atomic_fetch_sub(&o->busy, 1) == 1 && atomic_load(&o->removed)) {
      pthread_mutex_lock(&exec->obs_lock); /* its remover may be waiting */
      pthread_cond_broadcast(&exec->obs_cv);
      pthread_mutex_unlock(&exec->obs_lock);
    }
  }
  pthread_mutex_lock(&exec->obs_lock);
  if (!--exec->obs_walkers) sweep(exec);
  pthread_mutex_unlock(&exec->obs_lock);
}

/* ---- the order query ---- */

typedef struct reach {
  grt__u64map depth; /* stream -> the highest seq explored (its ops up to it were scanned) */
  struct { grt_stream *s; uint64_t seq; } *todo;
  size_t n, cap;
} reach;

static bool push(reach *r, grt_stream *s, uint64_t seq) {
  if (grt__done(s) >= seq) return true; /* reached: nothing pending behind it */
  if (r->n == r->cap) {
    size_t cap = r->cap ? r->cap * 2 : 16;
    void *v = realloc(r->todo, cap * sizeof *r->todo);
    if (!v) return false;
    r->todo = v;
    r->cap = cap;
  }
  r->todo[r->n].s = s;
  r->todo[r->n++].seq = seq;
  return true;
}

/* The work issued to s next waits for s's work so far and, by the legacy
 * stream's rule, for the legacy stream (s blocking) or for every blocking
 * stream (s legacy). */
static bool push_roots(reach *r, grt_exec *exec, grt_stream *s) {
  grt_stream *leg = exec->legacy;
  bool ok = push(r, s, s->issued_seq);
  if (s == leg) {
    for (grt_stream *t = exec->streams; t && ok; t = t->all_next)
      if (t != leg && !(t->flags & GRT_STREAM_NON_BLOCKING)) ok = push(r, t, t->issued_seq);
  } else if (!(s->flags & GRT_STREAM_NON_BLOCKING)) {
    ok = push(r, leg, leg->issued_seq);
  }
  return ok;
}

/* Every (stream, seq) the work s runs next depends on, as depths per stream. */
static bool explore(reach *r, grt_exec *exec, grt_stream *s) {
  if (!push_roots(r, exec, s)) return false;
  while (r->n) {
    grt_stream *g = r->todo[--r->n].s;
    uint64_t seq = r->todo[r->n].seq;
    uint64_t seen = (uint64_t)(uintptr_t)grt__u64map_get(&r->depth, (uint64_t)(uintptr_t)g);
    if (seq <= seen) continue;
    if (!grt__u64map_put(&r->depth, (uint64_t)(uintptr_t)g, (void *)(uintptr_t)seq)) return false;
    for (grt__op *op = g->head; op && op->seq <= seq; op = op->next) {
      if (op->seq <= seen) continue;
      for (uint32_t k = op->next_dep; k < op->ndeps; k++)
        if (!push(r, op->deps[k].stream, op->deps[k].seq)) return false;
    }
  }
  return true;
}

/* Validation under the lock: every event live, of the exec, not captured. */
static grt_status check_events(grt_exec *exec, grt_event *const *evs, size_t n) {
  for (size_t i = 0; i < n; i++) {
    if (!evs[i] || evs[i]->magic != GRT__EVENT_MAGIC) return GRT_ERR_INVALID_ARG;
    if (evs[i]->exec != exec) return GRT_ERR_WRONG_DEVICE;
    if (evs[i]->destroyed) return GRT_ERR_INVALID_HANDLE;
    if (evs[i]->cap) return GRT_ERR_CAPTURED_EVENT;
  }
  return GRT_OK;
}

static grt_status order_locked(grt_exec *exec, grt_stream *s, grt_event *const *evs, size_t n, grt__order *out) {
  grt_status st = exec->error ? exec->error : check_events(exec, evs, n);
  if (!st && s) st = s->destroyed ? GRT_ERR_INVALID_HANDLE : s->cap ? GRT_ERR_CAPTURE_UNSUPPORTED : GRT_OK;
  if (st) return st;
  bool pending = false;
  for (size_t i = 0; i < n; i++) pending |= evs[i]->stream && grt__done(evs[i]->stream) < evs[i]->seq;
  reach r = {.todo = NULL};
  grt__u64map_init(&r.depth);
  if (pending && s && !explore(&r, exec, s)) st = GRT_ERR_NOMEM;
  for (size_t i = 0; i < n && !st; i++) {
    const grt_event *ev = evs[i];
    uint64_t depth = ev->stream ? (uint64_t)(uintptr_t)grt__u64map_get(&r.depth, (uint64_t)(uintptr_t)ev->stream) : 0;
    out[i] = !ev->stream || grt__done(ev->stream) >= ev->seq ? GRT__ORDER_COMPLETE
             : depth >= ev->seq                              ? GRT__ORDER_ORDERED
                                                             : GRT__ORDER_UNORDERED;
  }
  free(r.todo);
  grt__u64map_free(&r.depth);
  return st;
}

grt_status grt__events_order(grt_stream *s, grt_event *const *evs, size_t n, grt__order *out) {
  if ((n && (!evs || !out)) || (s && grt__stream_check(s))) return GRT_ERR_INVALID_ARG;
  if (!n) return GRT_OK;
  if (!evs[0] || evs[0]->magic != GRT__EVENT_MAGIC) return GRT_ERR_INVALID_ARG;
  grt_exec *exec = s ? s->exec : evs[0]->exec;
  pthread_mutex_lock(&exec->lock);
  grt_status st = order_locked(exec, s, evs, n, out);
  pthread_mutex_unlock(&exec->lock);
  return st;
}
