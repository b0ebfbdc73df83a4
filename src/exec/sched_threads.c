/* sched_threads.c — the threads clock: one worker thread per engine slot
 * (compute_slots + H2D + D2H + host_slots). A worker pops the head of its
 * engine's ready queue, sleeps until start + modelled duration, runs the body
 * (at the end of the interval, as the virtual clock does) and completes the op
 * under the lock — which usually makes the next op ready, so a busy worker
 * never sleeps between ops. Threads are not slots: an op takes the lowest
 * free slot of its engine, and an op that a completion makes ready on
 * another engine starts at that completion, not when that engine's parked
 * worker has woken up (start_fed_ops).
 *
 * A host thread waiting in a synchronize call first runs ready zero-length
 * ops itself (one such helper at a time), as a worker would: a launch
 * followed by a synchronize then needs no thread to wake up at all. Then it
 * spins briefly (watching the atomic completion counter, no lock) and then
 * sleeps on done_cv; while host threads wait they run the deadlock detector
 * whenever the exec is quiescent in a state the detector has not yet cleared,
 * and the host-stall rule (cfg.host_threads: every application thread waits
 * here and nothing can release any). A deadline (cfg.wait_timeout_ns) bounds
 * the spin and the sleep (done_cv runs on CLOCK_MONOTONIC for that).
 */
#include <errno.h>
#include <sched.h>
#include <stdlib.h>
#include <time.h>
#if defined(__linux__)
#include <sys/prctl.h>
#endif

#include "exec/exec_impl.h"

static void sleep_until(uint64_t abs_mono_ns) {
  struct timespec ts = {(time_t)(abs_mono_ns / 1000000000ull), (long)(abs_mono_ns % 1000000000ull)};
  while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR) {
  }
}

/* Wake-ups a completion deferred (lock held): how many idle workers per
 * engine to signal, and whether to wake host threads. */
typedef struct deferred {
  unsigned kicks[GRT_ENGINE_COUNT];
  bool notify;
} deferred;

static void take_deferred(grt_exec *exec, deferred *d) {
  for (int i = 0; i < GRT_ENGINE_COUNT; i++) {
    grt__engine *en = &exec->engines[i];
    d->kicks[i] = en->kicks_pending < en->idle ? en->kicks_pending : en->idle;
    en->kicks_pending = 0;
  }
  d->notify = exec->notify_pending;
  exec->notify_pending = false;
}

/* Signalling after the unlock is safe: waiters re-check under the lock. */
static void send_deferred(grt_exec *exec, const deferred *d) {
  for (int i = 0; i < GRT_ENGINE_COUNT; i++)
    for (unsigned k = 0; k < d->kicks[i]; k++) pthread_cond_signal(&exec->engines[i].cv);
  if (d->notify) pthread_cond_broadcast(&exec->done_cv);
}

/* Runs graph nodes after op, each the private successor of the one before
 * (grt__graph_chain_next), in the first node's slot, without the lock; returns
 * the last one run. Clocks are read only for durations and timelines. The
 * bounds (CHAIN_MAX nodes, CHAIN_NS of modelled time) keep priority and sticky
 * errors in force: then the worker takes the lock, and the next node goes
 * through the ready queue like any op. */
#define CHAIN_MAX 256
#define CHAIN_NS 100000
static grt__op *run_chain(grt_exec *exec, grt__worker *w, grt__op *op, grt_status *st, uint32_t *count) {
  bool timed = exec->cfg.record_timeline;
  uint64_t modelled = op->duration_ns;
  grt__op *nx, *first = op;
  *count = 0;
  for (unsigned k = 0; k < CHAIN_MAX && modelled < CHAIN_NS && (nx = grt__graph_chain_next(first, op)); k++) {
    ++*count;
    if (timed) grt__graph_chain_adopt(first, nx);
    uint64_t t = timed || nx->duration_ns ? grt__mono_ns() - exec->t0_ns : 0;
    op->end_ns = nx->start_ns = t;
    w->current = nx; /* read only by this thread (grt__current_op) */
    op = nx;
    modelled += op->duration_ns;
    if (op->duration_ns) sleep_until(exec->t0_ns + t + op->duration_ns);
    if ((*st = grt__run_body(exec, op))) break;
  }
  if (!timed && op != first) grt__graph_chain_adopt(first, op);
  return op;
}

/* The next op for a worker of engine e: one another worker already started
 * for it, else the head of its ready queue (NULL if none or no free slot). */
static grt__op *next_op(grt_exec *exec, grt__engine *e, unsigned engine) {
  grt__op *op = e->handed_head;
  if (!op) return grt__engine_pop(exec, engine);
  e->handed_head = op->rnext;
  if (!e->handed_head) e->handed_tail = NULL;
  op->rnext = NULL;
  return op;
}

/* After a completion, for each other engine whose ready queue it fed (a
 * wake-up for a parked worker is pending): the head op starts now, as it
 * would on hardware, instead of when that worker is awake (futex latency,
 * 5-10 us). A zero-duration op is returned for this worker to run (its
 * start is its whole latency); one with a duration is started here and
 * handed to its engine, whose woken worker sleeps through the rest of it, so
 * the wake-up hides inside the modelled interval. `idle`: this worker has
 * nothing of its own to run next (else zero-duration ops wait for their own
 * engine's worker). Graph nodes and host
 * functions (which may block in grt_user_event_wait) are left alone. */
static grt__op *start_fed_ops(grt_exec *exec, unsigned self, bool idle) {
  grt__op *mine = NULL;
  for (unsigned x = 0; x < GRT_ENGINE_HOST; x++) {
    grt__engine *e = &exec->engines[x];
    grt__op *op = e->rq_head;
    if (x == self || !op || op->gparent || !e->kicks_pending || (!op->duration_ns && (!idle || mine))) continue;
    if (!grt__engine_pop(exec, x)) continue; /* no free slot */
    if (!op->duration_ns) {
      e->kicks_pending--; /* no worker of x is needed */
      mine = op;
      continue;
    }
    grt__sched_start(exec, op, grt__engine_free_slot(e), grt__exec_now(exec));
    if (e->handed_tail) e->handed_tail->rnext = op;
    else e->handed_head = op;
    e->handed_tail = op; /* the pending kick wakes a worker of x for it */
  }
  return mine;
}

/* Runs op (popped or handed; lock held on entry and exit): starts it unless
 * it is RUNNING already, sleeps through its duration, runs its body (and a
 * graph chain after it) without the lock, and completes it. */
static void run_op(grt_exec *exec, grt__worker *w, grt__op *op) {
  uint64_t start = op->start_ns; /* an op handed to us is RUNNING already */
  if (op->state != GRT__RUNNING) {
    start = grt__exec_now(exec);
    grt__sched_start(exec, op, grt__engine_free_slot(&exec->engines[op->engine]), start);
  }
  w->current = op;
  /* A graph node whose successor only it can make ready: run that chain
   * without the lock while no other work waits for this engine. */
  bool chain = op->gparent && !exec->engines[op->engine].rq_head;
  deferred d;
  take_deferred(exec, &d);
  pthread_mutex_unlock(&exec->lock);
  /* Idle workers first; host threads after a zero-length body (the op
   * handed off to us starts without waiting for a syscall) or before a sleep. */
  bool notify = d.notify;
  d.notify = false;
  send_deferred(exec, &d);
  if (notify && op->duration_ns) pthread_cond_broadcast(&exec->done_cv);
  if (op->duration_ns) sleep_until(exec->t0_ns + start + op->duration_ns);
  grt_status st = grt__run_body(exec, op);
  grt__op *first = op;
  uint32_t chained = 0;
  if (chain && !st) op = run_chain(exec, w, op, &st, &chained);
  if (notify && !op->duration_ns) pthread_cond_broadcast(&exec->done_cv);
  pthread_mutex_lock(&exec->lock);
  w->current = NULL;
  if (first != op) grt__graph_chain_done(exec, first, op, chained);
  if (st) {
    char msg[160];
    snprintf(msg, sizeof msg, "%s on stream '%s': device range no longer valid (%s)", op->name, op->stream->name,
             grt_status_name(st));
    grt__set_error(exec, st, msg);
  }
  exec->deferring = true;
  grt__sched_complete(exec, op, grt__exec_now(exec));
  exec->deferring = false;
}

/* A host worker runs a callback the sticky error cancelled, as the body it
 * runs (blocking calls from it are refused). Lock held on entry and exit. */
static void run_orphan(grt_exec *exec, grt__worker *w, grt__op *op) {
  w->current = op;
  pthread_mutex_unlock(&exec->lock);
  grt_status st = grt__run_body(exec, op); /* a callback's body cannot fail */
  (void)st;
  pthread_mutex_lock(&exec->lock);
  w->current = NULL;
  grt__orphan_done(exec, op);
}

static void *worker_main(void *arg) {
  grt__worker *w = arg;
#if defined(__linux__)
  /* A sleep ends up to the timer slack (50 us by default) late: modelled
   * durations are microseconds. */
  prctl(PR_SET_TIMERSLACK, 1000UL, 0UL, 0UL, 0UL);
#endif
  grt_exec *exec = w->exec;
  grt__engine *e = &exec->engines[w->engine];
  grt__op *op = NULL;
  pthread_mutex_lock(&exec->lock);
  bool host = w->engine == GRT_ENGINE_HOST;
  for (;;) {
    grt__op *cb = !op && host ? grt__orphan_take(exec) : NULL;
    if (cb) { /* before stopping too: every callback runs once */
      run_orphan(exec, w, cb);
      continue;
    }
    if (exec->stop) break;
    if (!op) op = next_op(exec, e, w->engine);
    if (!op) {
      deferred d;
      take_deferred(exec, &d);
      send_deferred(exec, &d);
      e->idle++;
      pthread_cond_wait(&e->cv, &exec->lock);
      e->idle--;
      continue;
    }
    run_op(exec, w, op);
    /* Hand-off: take the next op of this engine ourselves, without waking anyone. */
    op = next_op(exec, e, w->engine);
    if (op && e->kicks_pending) e->kicks_pending--;
    grt__op *fed = start_fed_ops(exec, w->engine, !op);
    if (!op) op = fed;
  }
  deferred d;
  take_deferred(exec, &d);
  send_deferred(exec, &d);
  pthread_mutex_unlock(&exec->lock);
  return NULL;
}

grt_status grt__threads_start(grt_exec *exec) {
  unsigned n = 0;
  for (int e = 0; e < GRT_ENGINE_COUNT; e++) n += exec->engines[e].slots;
  exec->workers = calloc(n, sizeof *exec->workers);
  if (!exec->workers) return GRT_ERR_NOMEM;
  unsigned i = 0;
  for (unsigned e = 0; e < GRT_ENGINE_COUNT; e++)
    for (unsigned k = 0; k < exec->engines[e].slots; k++, i++) /* a worker per slot */
      exec->workers[i] = (grt__worker){exec, pthread_self(), e, NULL};
  /* Workers read exec->workers (grt__in_body), so fill it before any starts;
   * the lock orders the thread ids written below before any reader. */
  grt_status st = GRT_OK;
  pthread_mutex_lock(&exec->lock);
  for (i = 0; i < n; i++) {
    if ((st = grt__fault_take(exec, GRT_EXEC_FAULT_THREAD_CREATE)) != GRT_OK) break;
    if (pthread_create(&exec->workers[i].thread, NULL, worker_main, &exec->workers[i])) break;
    exec->n_workers++;
  }
  pthread_mutex_unlock(&exec->lock);
  if (exec->n_workers == n) return GRT_OK;
  grt__threads_stop(exec); /* joins the workers already started */
  return st ? st : GRT_ERR_NOMEM;
}

void grt__threads_stop(grt_exec *exec) {
  pthread_mutex_lock(&exec->lock);
  exec->stop = true;
  for (int e = 0; e < GRT_ENGINE_COUNT; e++) pthread_cond_broadcast(&exec->engines[e].cv);
  pthread_mutex_unlock(&exec->lock);
  for (unsigned i = 0; i < exec->n_workers; i++) pthread_join(exec->workers[i].thread, NULL);
  free(exec->workers);
  exec->workers = NULL;
  exec->n_workers = 0;
}

void grt__threads_kick(grt_exec *exec, unsigned engine) {
  grt__engine *e = &exec->engines[engine];
  if (exec->deferring) e->kicks_pending++;
  else if (e->idle) pthread_cond_signal(&e->cv);
}

/* Spins (no lock) until a completion happens or the budget runs out. */
static void spin_for_progress(grt_exec *exec, uint64_t budget_ns) {
  uint64_t seen = atomic_load_explicit(&exec->completions, memory_order_acquire);
  uint64_t until = grt__mono_ns() + budget_ns;
  pthread_mutex_unlock(&exec->lock);
  do {
    for (int i = 0; i < 64; i++)
      if (atomic_load_explicit(&exec->completions, memory_order_acquire) != seen) goto done;
    sched_yield(); /* two cores: let the worker that will complete it run */
  } while (grt__mono_ns() < until);
done:
  pthread_mutex_lock(&exec->lock);
}

/* A zero-length ready op of engine x (not the host functions' engine: they
 * may block) for a waiting host thread to run; NULL if none. */
static grt__op *help_pop(grt_exec *exec, unsigned x) {
  grt__op *op = exec->engines[x].rq_head;
  return op && !op->duration_ns ? grt__engine_pop(exec, x) : NULL;
}

/* The waiting host thread runs op as a worker would (bodies see it as a
 * worker: blocking calls from them are refused), and then, like a worker's
 * hand-off, the next zero-length op of that engine its completion made ready
 * (that wake-up is not sent), until the wait's condition holds. Then it sends
 * the wake-ups the completions deferred. */
static void help(grt_exec *exec, grt__op *op, grt__cond_fn cond, void *ctx) {
  unsigned x = op->engine;
  grt__engine *e = &exec->engines[x];
  grt__worker h = {exec, pthread_self(), x, NULL};
  exec->helper = &h;
  for (;;) {
    run_op(exec, &h, op);
    if (exec->error || cond(exec, ctx) || !(op = help_pop(exec, x))) break;
    if (e->kicks_pending) e->kicks_pending--;
  }
  exec->helper = NULL;
  deferred d;
  take_deferred(exec, &d);
  send_deferred(exec, &d);
}

/* Runs one ready zero-length op (and its hand-off chain) on this waiting
 * host thread unless another host thread is helping; true if it ran one. */
static bool try_help(grt_exec *exec, grt__cond_fn cond, void *ctx) {
  for (unsigned x = 0; !exec->helper && x < GRT_ENGINE_HOST; x++) {
    grt__op *op = help_pop(exec, x);
    if (op) {
      help(exec, op, cond, ctx);
      return true;
    }
  }
  return false;
}

/* Sleeps on done_cv until woken or (deadline != UINT64_MAX) the deadline. */
static void sleep_on_done(grt_exec *exec, uint64_t deadline) {
  exec->host_waiters++;
  if (deadline == UINT64_MAX) {
    pthread_cond_wait(&exec->done_cv, &exec->lock);
  } else {
    struct timespec ts = {(time_t)(deadline / 1000000000ull), (long)(deadline % 1000000000ull)};
    (void)pthread_cond_timedwait(&exec->done_cv, &exec->lock, &ts); /* ETIMEDOUT: the caller re-checks */
  }
  exec->host_waiters--;
}

/* In a state not yet checked where nothing can move without the host
 * (quiescent, or no work at all): a cycle, or every host thread stuck in a
 * wait (the stall rule), is a deadlock. */
static bool stuck(grt_exec *exec) {
  bool no_work = exec->pending_ops == 0;
  if ((!no_work && !grt__quiescent(exec)) || exec->detect_gen == exec->state_gen) return false;
  if ((!no_work && grt__detect_deadlock(exec)) || grt__detect_host_stall(exec)) return true;
  exec->detect_gen = exec->state_gen;
  return false;
}

grt_status grt__threads_wait(grt_exec *exec, const grt__waiter *w) {
  uint64_t spin_left = w->spin ? exec->cfg.spin_ns : 0, timeout = exec->cfg.wait_timeout_ns;
  uint64_t deadline = UINT64_MAX;
  if (timeout) deadline = grt__mono_ns() + (timeout < UINT64_MAX / 2 ? timeout : UINT64_MAX / 2);
  for (;;) {
    if (exec->error) return exec->error; /* sticky: it wins even over a met condition */
    if (w->cond(exec, w->ctx)) return GRT_OK;
    if (stuck(exec)) return exec->error;
    /* Zero-length work that is ready now: run it here rather than sleep
     * while a parked worker wakes up for it (one host thread at a time). */
    if (try_help(exec, w->cond, w->ctx)) continue;
    uint64_t now = timeout || spin_left ? grt__mono_ns() : 0;
    if (now >= deadline) return GRT_ERR_NOT_READY; /* gave up; nothing changed */
    if (spin_left) {
      uint64_t budget = spin_left < deadline - now ? spin_left : deadline - now;
      spin_for_progress(exec, budget);
      uint64_t used = grt__mono_ns() - now;
      spin_left = used >= spin_left ? 0 : spin_left - used;
      continue;
    }
    sleep_on_done(exec, deadline);
  }
}

void grt__cond_init_monotonic(pthread_cond_t *cv) {
  pthread_condattr_t a;
  pthread_condattr_init(&a);
  pthread_condattr_setclock(&a, CLOCK_MONOTONIC); /* deadlines are grt__mono_ns values */
  pthread_cond_init(cv, &a);
  pthread_condattr_destroy(&a);
}
