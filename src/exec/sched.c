/* sched.c — the clock-independent scheduling core: readiness, engine ready
 * queues, completion, cancellation. Both clock drivers (sched_threads.c,
 * sched_virtual.c) only pop ready ops, run bodies and call grt__sched_complete.
 *
 * Invariants (exec->lock held in every function here except grt__run_body):
 *  - Only a stream's head op can be READY or RUNNING; so each engine's ready
 *    queue holds at most one op per stream.
 *  - A stream whose head is QUEUED and blocked is registered in exactly one
 *    waiter list: that of the stream it waits on (waiting_seq) or of the user
 *    event it waits on. Completions and signals move waiters to the
 *    re-evaluation worklist, which grt__sched_drain empties iteratively (no
 *    recursion, however long a chain of markers completes at once).
 *  - Compute ready queues are ordered by (priority, order_key); copy and host
 *    queues by order_key. order_key is issue order, or a seeded random key under
 *    the virtual clock's schedule exploration.
 */
#include <stdlib.h>
#include <string.h>

#include "exec/exec_impl.h"

static void push_eval(grt_exec *exec, grt_stream *s) {
  if (s->in_eval) return;
  s->in_eval = true;
  s->eval_next = exec->eval_head;
  exec->eval_head = s;
}

static void register_waiter(grt_stream **list, grt_stream *s) {
  s->registered = true;
  s->wait_next = *list;
  *list = s;
}

static uint64_t order_key(grt_exec *exec) {
  if (exec->cfg.clock == GRT_CLOCK_VIRTUAL && exec->cfg.schedule_seed) return grt__rng_next(&exec->rng);
  return ++exec->next_order;
}

static void rq_push(grt_exec *exec, grt__op *op) {
  grt__engine *e = &exec->engines[op->engine];
  op->state = GRT__READY;
  op->order_key = order_key(exec);
  int prio = op->engine == GRT_ENGINE_COMPUTE ? op->priority : 0;
  grt__op **pp = &e->rq_head;
  /* Fast path: appending in issue order (the common case). */
  if (e->rq_tail) {
    int tprio = e->rq_tail->engine == GRT_ENGINE_COMPUTE ? e->rq_tail->priority : 0;
    if (tprio < prio || (tprio == prio && e->rq_tail->order_key <= op->order_key)) pp = &e->rq_tail->rnext;
  }
  while (*pp) {
    int p2 = (*pp)->engine == GRT_ENGINE_COMPUTE ? (*pp)->priority : 0;
    if (p2 > prio || (p2 == prio && (*pp)->order_key > op->order_key)) break;
    pp = &(*pp)->rnext;
  }
  op->rnext = *pp;
  *pp = op;
  if (!op->rnext) e->rq_tail = op;
  if (exec->cfg.clock == GRT_CLOCK_THREADS) grt__threads_kick(exec, op->engine);
}

void grt__sched_ready(grt_exec *exec, grt__op *op) { rq_push(exec, op); }

void grt__rq_remove(grt_exec *exec, grt__op *op) {
  grt__engine *e = &exec->engines[op->engine];
  grt__op *prev = NULL;
  for (grt__op *o = e->rq_head; o; prev = o, o = o->rnext) {
    if (o != op) continue;
    if (prev) prev->rnext = o->rnext;
    else e->rq_head = o->rnext;
    if (e->rq_tail == o) e->rq_tail = prev;
    return;
  }
}

grt__op *grt__engine_pop(grt_exec *exec, unsigned engine) {
  grt__engine *e = &exec->engines[engine];
  grt__op *op = e->rq_head;
  if (!op || e->busy >= e->slots) return NULL;
  e->rq_head = op->rnext;
  if (!e->rq_head) e->rq_tail = NULL;
  op->rnext = NULL;
  return op;
}

unsigned grt__engine_free_slot(const grt__engine *e) {
  for (unsigned s = 0; s < 64; s++)
    if (!(e->slot_mask & (1ull << s))) return s;
  return 64;
}

void grt__sched_start(grt_exec *exec, grt__op *op, unsigned slot, uint64_t now) {
  grt__engine *e = &exec->engines[op->engine];
  op->state = GRT__RUNNING;
  op->start_ns = now;
  op->slot = slot;
  if (op->kind == GRT__OP_CALLBACK) op->u.cb.status = exec->error; /* the stream's status as it starts */
  e->busy++;
  if (slot < 64) e->slot_mask |= 1ull << slot;
  exec->running++;
  exec->state_gen++;
}

/* Effects of a marker op, which completes the moment it is ready. */
static void marker_effect(grt_exec *exec, grt__op *op, uint64_t now) {
  if (op->kind == GRT__OP_RECORD) {
    grt_event *ev = op->u.rec.event;
    if (ev->gen == op->u.rec.gen) {
      ev->time_ns = now;
      ev->time_valid = true;
    }
  } else if (op->kind == GRT__OP_UEV_SIGNAL) {
    grt_user_event *u = op->u.uev.uev;
    u->pending_signals--;
    if (op->u.uev.value > u->value) {
      u->value = op->u.uev.value;
      grt__wake_uev(exec, u);
    }
  }
}

/* Moves s forward as far as it can go without running anything. */
static void eval_one(grt_exec *exec, grt_stream *s) {
  grt__op *op;
  while ((op = s->head) && op->state == GRT__QUEUED) {
    if (s->registered) return; /* still waiting; the waited-on object re-queues it */
    while (op->next_dep < op->ndeps) {
      grt__dep *d = &op->deps[op->next_dep];
      if (grt__done(d->stream) >= d->seq) {
        op->next_dep++;
        continue;
      }
      s->waiting_seq = d->seq;
      register_waiter(&d->stream->waiters, s);
      return;
    }
    if (op->kind == GRT__OP_UEV_WAIT && op->u.uev.uev->value < op->u.uev.value) {
      register_waiter(&op->u.uev.uev->waiters, s);
      return;
    }
    if (op->engine != GRT__ENGINE_NONE) {
      rq_push(exec, op);
      return;
    }
    uint64_t now = grt__exec_now(exec);
    if (op->kind == GRT__OP_GRAPH) { /* its nodes take over; it completes with the last */
      grt__graph_expand(exec, op, now);
      continue;
    }
    op->start_ns = now;
    marker_effect(exec, op, now);
    grt__sched_complete(exec, op, now);
  }
}

void grt__sched_drain(grt_exec *exec) {
  if (exec->draining) return; /* the outer drain picks up what was pushed */
  exec->draining = true;
  while (exec->eval_head) {
    grt_stream *s = exec->eval_head;
    exec->eval_head = s->eval_next;
    s->in_eval = false;
    eval_one(exec, s);
  }
  exec->draining = false;
}

void grt__sched_eval(grt_exec *exec, grt_stream *s) {
  push_eval(exec, s);
  grt__sched_drain(exec);
}

void grt__notify_hosts(grt_exec *exec) {
  if (!exec->host_waiters) return;
  if (exec->deferring) exec->notify_pending = true; /* the worker broadcasts after unlocking */
  else pthread_cond_broadcast(&exec->done_cv);
}

void grt__wake_uev(grt_exec *exec, grt_user_event *u) {
  for (grt_stream *w = u->waiters, *n; w; w = n) {
    n = w->wait_next;
    w->registered = false;
    push_eval(exec, w);
  }
  u->waiters = NULL;
  exec->state_gen++;
  grt__notify_hosts(exec);
}

static void wake_stream_waiters(grt_exec *exec, grt_stream *s, uint64_t done) {
  grt_stream **pp = &s->waiters;
  while (*pp) {
    grt_stream *w = *pp;
    if (w->waiting_seq <= done) {
      *pp = w->wait_next;
      w->registered = false;
      push_eval(exec, w);
    } else {
      pp = &w->wait_next;
    }
  }
}

void grt__sched_release_engine(grt_exec *exec, grt__op *op) {
  if (op->engine == GRT__ENGINE_NONE || op->state != GRT__RUNNING) return;
  grt__engine *e = &exec->engines[op->engine];
  e->busy--;
  if (op->slot < 64) e->slot_mask &= ~(1ull << op->slot);
  exec->running--;
  if (exec->cfg.clock == GRT_CLOCK_THREADS && e->rq_head) grt__threads_kick(exec, op->engine);
}

void grt__sched_complete(grt_exec *exec, grt__op *op, uint64_t now) {
  if (op->gparent) { /* a graph node: counts down its launch instead of advancing a stream */
    grt__graph_node_complete(exec, op, now);
    return;
  }
  grt_stream *s = op->stream;
  op->end_ns = now;
  if (op->times_id) grt__op_times_note(exec, op);
  grt__sched_release_engine(exec, op);
  grt__trace_op(exec, op);
  s->head = op->next;
  if (!s->head) s->tail = NULL;
  uint64_t done = op->seq;
  if (exec->error && !s->head) done = s->issued_seq; /* the rest was cancelled */
  atomic_store_explicit(&s->done_seq, done, memory_order_release);
  atomic_fetch_add_explicit(&exec->completions, 1, memory_order_release);
  exec->pending_ops--;
  exec->state_gen++;
  wake_stream_waiters(exec, s, done);
  push_eval(exec, s);
  grt__op_free(exec, op);
  grt__sched_drain(exec); /* dispatch what became ready before waking anyone */
  grt__notify_hosts(exec);
}

static grt_status host_range(grt_exec *exec, grt_devptr p, uint64_t n, void **out) {
  return grt_device_host_ptr(exec->device, p, n, out);
}

grt_status grt__run_body(grt_exec *exec, grt__op *op) {
  void *a, *b;
  grt_status st = GRT_OK;
  switch (op->kind) {
    case GRT__OP_KERNEL:
    case GRT__OP_HOST_FUNC:
      if (op->u.call.fn) op->u.call.fn(op->u.call.arg);
      break;
    case GRT__OP_CALLBACK:
      op->u.cb.fn(op->stream, op->u.cb.status, op->u.cb.arg);
      break;
    case GRT__OP_H2D:
      if (!(st = host_range(exec, op->u.mem.dev, op->u.mem.bytes, &a))) memcpy(a, op->u.mem.host, op->u.mem.bytes);
      break;
    case GRT__OP_D2H:
      if (!(st = host_range(exec, op->u.mem.dev, op->u.mem.bytes, &a))) memcpy(op->u.mem.host, a, op->u.mem.bytes);
      break;
    case GRT__OP_D2D:
      if (!(st = host_range(exec, op->u.mem.dev, op->u.mem.bytes, &a)) &&
          !(st = host_range(exec, op->u.mem.dev2, op->u.mem.bytes, &b)))
        memmove(a, b, op->u.mem.bytes);
      break;
    case GRT__OP_MEMSET:
      if (!(st = host_range(exec, op->u.mem.dev, op->u.mem.bytes, &a))) memset(a, op->u.mem.value, op->u.mem.bytes);
      break;
    default:
      break;
  }
  return st;
}

/* A callback that had not started: CUDA runs every callback exactly once,
 * after a device error too, telling it the error. */
static void orphan(grt_exec *exec, grt__op *op) {
  op->state = GRT__QUEUED;
  op->u.cb.status = exec->error;
  op->next = NULL;
  if (exec->orphans_tail) exec->orphans_tail->next = op;
  else exec->orphans = op;
  exec->orphans_tail = op;
  if (exec->cfg.clock == GRT_CLOCK_THREADS) pthread_cond_broadcast(&exec->engines[GRT_ENGINE_HOST].cv);
}

grt__op *grt__orphan_take(grt_exec *exec) {
  grt__op *op = exec->orphans;
  if (!op) return NULL;
  exec->orphans = op->next;
  if (!exec->orphans) exec->orphans_tail = NULL;
  op->next = NULL;
  exec->running++; /* a body runs: teardown waits for it (grt__wait_idle) */
  return op;
}

void grt__orphan_done(grt_exec *exec, grt__op *op) {
  exec->running--;
  grt__op_free(exec, op);
  grt__notify_hosts(exec);
}

/* Drops every op that has not started (callbacks become orphans, run later
 * with the error); running ones finish normally. */
void grt__cancel_all(grt_exec *exec) {
  for (grt_stream *s = exec->streams; s; s = s->all_next) {
    grt__op *keep = s->head && s->head->state == GRT__RUNNING ? s->head : NULL;
    /* A running graph launch is kept only while some of its nodes run. */
    if (keep && keep->kind == GRT__OP_GRAPH && grt__graph_cancel(exec, keep)) keep = NULL;
    grt__op *op = keep ? keep->next : s->head;
    while (op) {
      grt__op *next = op->next;
      if (op->state == GRT__READY) grt__rq_remove(exec, op);
      if (op->kind == GRT__OP_UEV_SIGNAL) op->u.uev.uev->pending_signals--;
      exec->pending_ops--;
      if (op->kind == GRT__OP_CALLBACK) orphan(exec, op);
      else grt__op_free(exec, op);
      op = next;
    }
    s->head = s->tail = keep;
    if (keep) keep->next = NULL;
    else atomic_store_explicit(&s->done_seq, s->issued_seq, memory_order_release);
    s->waiters = NULL;
    s->registered = false;
  }
  for (grt_user_event *u = exec->uevs; u; u = u->all_next) u->waiters = NULL;
  exec->state_gen++;
}

bool grt__quiescent(grt_exec *exec) {
  if (exec->pending_ops == 0 || exec->running != exec->blocked_running) return false;
  for (int e = 0; e < GRT_ENGINE_COUNT; e++) {
    const grt__engine *en = &exec->engines[e];
    if (en->rq_head && en->busy < en->slots) return false;
  }
  return !exec->eval_head;
}

/* Threads: until no body runs, cancelled callbacks included (the host
 * workers run them): after a sticky error the caller may free what they use. */
void grt__wait_idle(grt_exec *exec) {
  while (exec->running || exec->orphans) {
    exec->host_waiters++;
    pthread_cond_wait(&exec->done_cv, &exec->lock);
    exec->host_waiters--;
  }
}

static void unlink_host_wait(grt_exec *exec, grt__waiter *w) {
  grt__waiter **pp = &exec->host_waits;
  while (*pp != w) pp = &(*pp)->next;
  *pp = w->next;
  exec->n_host_waits--;
}

static uint64_t add_sat(uint64_t a, uint64_t b) { return a > UINT64_MAX - b ? UINT64_MAX : a + b; }

grt_status grt__wait_on(grt_exec *exec, grt__waiter *w) {
  if (!w->in_body) {
    w->next = exec->host_waits;
    exec->host_waits = w;
    exec->n_host_waits++;
    exec->state_gen++; /* one more host thread waits: the stall rule may hold now */
  }
  grt_status st;
  if (exec->cfg.clock == GRT_CLOCK_VIRTUAL) {
    uint64_t t = exec->cfg.wait_timeout_ns;
    st = grt__virtual_wait(exec, w->cond, w->ctx, t ? add_sat(exec->now_ns, t) : UINT64_MAX);
  } else {
    st = grt__threads_wait(exec, w);
    /* After a sticky error a host thread returns once the bodies still
     * running (woken host functions) are done, so it can tear down what
     * they use. A timed-out wait changed nothing and returns at once. */
    if (st && st != GRT_ERR_NOT_READY && !w->in_body) grt__wait_idle(exec);
  }
  if (!w->in_body) unlink_host_wait(exec, w);
  return st;
}

grt_status grt__wait(grt_exec *exec, grt__cond_fn cond, void *ctx, bool spin, bool host_func_wait) {
  grt__waiter w = {cond, ctx, spin, host_func_wait, NULL, 0, NULL};
  return grt__wait_on(exec, &w);
}
