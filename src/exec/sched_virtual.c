/* sched_virtual.c — the virtual clock: a deterministic discrete-event
 * simulation on the same engines and the same scheduling core as threads.
 * All ops ending at one instant complete before the next dispatch, so ready
 * work competes by priority exactly (a higher-priority op never loses a slot
 * to a lower-priority one that became ready at the same time).
 *
 * Time advances only while a host thread waits (a synchronize call, a
 * user-event wait) or spends host time (grt_exec_host_delay); queries,
 * launches and every other call leave it and the work where they are, so a
 * polling loop sees what the threads clock would show with a stopped device.
 * The waiting thread becomes the driver, starts every ready op its engine
 * has a free slot for (start = now, end = now + duration) and then
 * repeatedly takes the running op with the earliest end (ties by start
 * order, or by a seeded key when schedule_seed is set), sets now to its end,
 * runs its body (unlocked, on this thread) and completes it. Same inputs =>
 * same timeline.
 *
 * A body may itself wait (a host function in grt_user_event_wait): the driver
 * then runs the simulation nested inside that call. When nothing is running
 * and nothing can start while the waiter's condition is false, the state is
 * final: the detector reports a cycle, or — with no cycle — the waiting host
 * thread is waiting for a signal only it could give; both are GRT_ERR_DEADLOCK.
 * A wait with a deadline (cfg.wait_timeout_ns) stops when the next event lies
 * beyond it, with the clock at the deadline, as a host delay would leave it.
 */
#include <stdlib.h>

#include "exec/exec_impl.h"

static bool heap_less(const grt__heap_item *a, const grt__heap_item *b) {
  return a->t < b->t || (a->t == b->t && a->key < b->key);
}

static bool heap_push(grt_exec *exec, grt__op *op, uint64_t t) {
  if (exec->heap_n == exec->heap_cap) {
    size_t cap = exec->heap_cap ? exec->heap_cap * 2 : 64;
    grt__heap_item *h = realloc(exec->heap, cap * sizeof *h);
    if (!h) return false;
    exec->heap = h;
    exec->heap_cap = cap;
  }
  uint64_t key = exec->cfg.schedule_seed ? grt__rng_next(&exec->rng) : ++exec->next_order;
  size_t i = exec->heap_n++;
  exec->heap[i] = (grt__heap_item){t, key, op};
  while (i > 0) {
    size_t p = (i - 1) / 2;
    if (!heap_less(&exec->heap[i], &exec->heap[p])) break;
    grt__heap_item tmp = exec->heap[i];
    exec->heap[i] = exec->heap[p];
    exec->heap[p] = tmp;
    i = p;
  }
  return true;
}

static grt__op *heap_pop(grt_exec *exec) {
  grt__op *op = exec->heap[0].op;
  exec->heap[0] = exec->heap[--exec->heap_n];
  size_t i = 0, n = exec->heap_n;
  for (;;) {
    size_t l = 2 * i + 1, r = l + 1, m = i;
    if (l < n && heap_less(&exec->heap[l], &exec->heap[m])) m = l;
    if (r < n && heap_less(&exec->heap[r], &exec->heap[m])) m = r;
    if (m == i) break;
    grt__heap_item tmp = exec->heap[i];
    exec->heap[i] = exec->heap[m];
    exec->heap[m] = tmp;
    i = m;
  }
  return op;
}

/* Starts every ready op that has a free slot, in engine order. */
static void dispatch(grt_exec *exec) {
  for (unsigned e = 0; e < GRT_ENGINE_COUNT; e++) {
    grt__op *op;
    while ((op = grt__engine_pop(exec, e))) {
      grt__sched_start(exec, op, grt__engine_free_slot(&exec->engines[e]), exec->now_ns);
      if (!heap_push(exec, op, exec->now_ns + op->duration_ns)) {
        grt__set_error(exec, GRT_ERR_NOMEM, "virtual clock: out of host memory for the event heap");
        /* the op stays RUNNING and is freed with its stream at destroy */
        return;
      }
    }
  }
}

/* Takes the earliest-ending op, runs its body, completes it. */
static void advance_one(grt_exec *exec) {
  grt__op *op = heap_pop(exec);
  uint64_t t = op->start_ns + op->duration_ns;
  if (t > exec->now_ns) exec->now_ns = t;
  grt__op *saved = exec->cb_op;
  exec->cb_op = op;
  exec->cb_depth++;
  pthread_mutex_unlock(&exec->lock);
  grt_status st = grt__run_body(exec, op);
  pthread_mutex_lock(&exec->lock);
  exec->cb_depth--;
  exec->cb_op = saved;
  if (st) {
    char msg[160];
    snprintf(msg, sizeof msg, "%s on stream '%s': device range no longer valid (%s)", op->name, op->stream->name,
             grt_status_name(st));
    grt__set_error(exec, st, msg);
  }
  /* A blocking host function may have let virtual time pass inside its body. */
  grt__sched_complete(exec, op, exec->now_ns);
}

/* The callbacks the sticky error cancelled run on the driver, each once, as
 * bodies (blocking calls from them are refused). */
static void run_orphans(grt_exec *exec) {
  grt__op *op;
  while ((op = grt__orphan_take(exec))) {
    grt__op *saved = exec->cb_op;
    exec->cb_op = op;
    exec->cb_depth++;
    pthread_mutex_unlock(&exec->lock);
    grt_status st = grt__run_body(exec, op); /* a callback's body cannot fail */
    (void)st;
    pthread_mutex_lock(&exec->lock);
    exec->cb_depth--;
    exec->cb_op = saved;
    grt__orphan_done(exec, op);
  }
}

static void become_driver(grt_exec *exec, bool *outer) {
  pthread_t self = pthread_self();
  while (exec->driving && !pthread_equal(exec->driver, self)) {
    exec->host_waiters++;
    pthread_cond_wait(&exec->done_cv, &exec->lock);
    exec->host_waiters--;
  }
  *outer = !exec->driving;
  exec->driving = true;
  exec->driver = self;
}

static void leave_driver(grt_exec *exec, bool outer) {
  if (!outer) return;
  exec->driving = false;
  pthread_cond_broadcast(&exec->done_cv);
}

grt_status grt__virtual_wait(grt_exec *exec, grt__cond_fn cond, void *ctx, uint64_t deadline) {
  bool outer;
  become_driver(exec, &outer);
  grt_status st = GRT_OK;
  for (;;) {
    if ((st = exec->error)) break; /* sticky: it wins even over a met condition */
    if (cond(exec, ctx)) break;
    dispatch(exec);
    if (cond(exec, ctx)) break;
    if ((st = exec->error)) break;
    if (exec->heap_n == 0) {
      /* Final state: nothing runs, nothing can start, the condition is false. */
      if (!grt__detect_deadlock(exec)) {
        char msg[600];
        grt__describe_host_stall(exec, msg, sizeof msg);
        grt__trace_deadlock(exec);
        grt__set_error(exec, GRT_ERR_DEADLOCK, msg);
      }
      st = exec->error;
      break;
    }
    if (exec->heap[0].t > deadline) { /* the wait gives up first: host time passed */
      if (exec->now_ns < deadline) exec->now_ns = deadline;
      st = GRT_ERR_NOT_READY;
      break;
    }
    advance_one(exec);
    /* Everything that ends at this instant completes before anything starts,
     * so the ops all of them make ready compete by priority (exactly). */
    while (exec->heap_n && exec->heap[0].t <= exec->now_ns && !exec->error) advance_one(exec);
  }
  if (outer && exec->error) run_orphans(exec); /* the synchronizing call that meets the error runs them */
  leave_driver(exec, outer);
  return st;
}

typedef struct delay_target {
  uint64_t t;
} delay_target;

/* True when nothing can happen before the target any more: no ready op waits
 * for a free slot and the earliest running op ends after the target. */
static bool delay_done(grt_exec *exec, void *ctx) {
  const delay_target *d = ctx;
  if (exec->now_ns >= d->t) return true;
  for (unsigned e = 0; e < GRT_ENGINE_COUNT; e++) {
    const grt__engine *g = &exec->engines[e];
    if (g->rq_head && g->busy < g->slots) return false; /* dispatch first */
  }
  return exec->heap_n == 0 || exec->heap[0].t > d->t;
}

/* The simulation runs until no event remains at or before the target, then
 * the clock moves to the target: the device works while the host is busy,
 * exactly as during a slept delay. */
grt_status grt__virtual_host_delay(grt_exec *exec, uint64_t ns) {
  delay_target d = {exec->now_ns + ns};
  grt_status st = grt__virtual_wait(exec, delay_done, &d, UINT64_MAX);
  if (!st && exec->now_ns < d.t) exec->now_ns = d.t;
  return st;
}

void grt__virtual_run_orphans(grt_exec *exec) {
  bool outer;
  become_driver(exec, &outer);
  run_orphans(exec);
  leave_driver(exec, outer);
}

void grt__virtual_free(grt_exec *exec) {
  free(exec->heap);
  exec->heap = NULL;
  exec->heap_n = exec->heap_cap = 0;
}
