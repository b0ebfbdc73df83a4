/* test_exec_stress.c — random DAGs over 8 streams (plus the legacy stream) with
 * random event edges; the observed execution order must respect every edge.
 *
 * Each op's body takes a stamp from a global counter and does plain
 * (non-atomic) reads of its predecessors' cells and a plain write of its own:
 * a missing happens-before edge in the executor shows up as a wrong order here
 * and as a data race under ThreadSanitizer. Expected edges are derived from
 * the issue sequence with CUDA's rules: FIFO per stream, event waits bound to
 * the snapshot at call time, the legacy stream vs blocking streams.
 */
#include <pthread.h>
#include <stdlib.h>

#include "base/rng.h"
#include "test_exec_common.h"

enum { STREAMS = 8, LEGACY = 8, EVENTS = 6, MAX_OPS = 400, MAX_PREDS = 16 };

typedef struct op_rec {
  int preds[MAX_PREDS];
  int n_preds;
  uint64_t stamp;
  unsigned cell;
} op_rec;

typedef struct dag {
  op_rec ops[MAX_OPS];
  int n;
  _Atomic uint64_t clock;

} dag;

typedef struct body_arg {
  dag *d;
  int id;
} body_arg;

static void body(void *p) {
  body_arg *a = p;
  op_rec *o = &a->d->ops[a->id];
  unsigned s = 0;
  for (int i = 0; i < o->n_preds; i++) s += a->d->ops[o->preds[i]].cell; /* plain reads */
  o->cell = s + 1;                                                       /* plain write */
  o->stamp = atomic_fetch_add(&a->d->clock, 1) + 1;
}

static void add_pred(op_rec *o, int p) {
  if (p < 0) return;
  for (int i = 0; i < o->n_preds; i++)
    if (o->preds[i] == p) return;
  if (o->n_preds < MAX_PREDS) o->preds[o->n_preds++] = p;
}

static void run_dag(grt_clock_kind clock, uint64_t seed, int n_ops) {
  grt_exec_config cfg;
  grt_exec_config_default(&cfg);
  cfg.clock = clock;
  cfg.device_capacity = GRT_MiB;
  cfg.schedule_seed = seed;
  grt_exec *exec;
  assert_int_equal(grt_exec_create(&cfg, &exec), GRT_OK);
  grt_stream *s[STREAMS + 1];
  for (int i = 0; i < STREAMS; i++)
    assert_int_equal(grt_stream_create(exec, i < 6 ? GRT_STREAM_NON_BLOCKING : GRT_STREAM_DEFAULT, -(i % 3), &s[i]),
                     GRT_OK);
  assert_int_equal(grt_exec_legacy_stream(exec, &s[LEGACY]), GRT_OK);
  grt_event *ev[EVENTS];
  int ev_snap[EVENTS]; /* the op an event's snapshot ends with; -1: never recorded / empty */
  for (int i = 0; i < EVENTS; i++) {
    assert_int_equal(grt_event_create(exec, GRT_EVENT_DISABLE_TIMING, &ev[i]), GRT_OK);
    ev_snap[i] = -1;
  }
  dag *d = calloc(1, sizeof *d);
  body_arg *args = calloc(MAX_OPS, sizeof *args);
  assert_non_null(d);
  assert_non_null(args);
  int last[STREAMS + 1];
  int pending_wait[STREAMS + 1][EVENTS]; /* snapshot op a stream must wait for before its next op */
  int n_wait[STREAMS + 1];
  for (int i = 0; i <= STREAMS; i++) last[i] = -1, n_wait[i] = 0;
  grt__rng r;
  grt__rng_seed(&r, seed * 7919 + 1);
  for (int k = 0; k < n_ops; k++) {
    int si = (int)grt__rng_below(&r, 20) == 0 ? LEGACY : (int)grt__rng_below(&r, STREAMS);
    /* Random event activity first. */
    for (int j = 0; j < 2; j++) {
      int e = (int)grt__rng_below(&r, EVENTS);
      int t = (int)grt__rng_below(&r, STREAMS + 1);
      if (grt__rng_below(&r, 2)) {
        assert_int_equal(grt_event_record(ev[e], s[t]), GRT_OK);
        ev_snap[e] = last[t];
      } else {
        assert_int_equal(grt_stream_wait_event(s[si], ev[e]), GRT_OK);
        if (ev_snap[e] >= 0 && n_wait[si] < EVENTS) pending_wait[si][n_wait[si]++] = ev_snap[e];
      }
    }
    op_rec *o = &d->ops[k];
    add_pred(o, last[si]);
    for (int j = 0; j < n_wait[si]; j++) add_pred(o, pending_wait[si][j]);
    n_wait[si] = 0;
    if (si == LEGACY) {
      for (int t = 6; t < STREAMS; t++) add_pred(o, last[t]);
    } else if (si >= 6) {
      add_pred(o, last[LEGACY]);
    }
    args[k] = (body_arg){d, k};
    if (grt__rng_below(&r, 8) == 0) {
      assert_int_equal(grt_launch_host_func(s[si], body, &args[k]), GRT_OK);
    } else {
      uint64_t ns = clock == GRT_CLOCK_VIRTUAL ? grt__rng_below(&r, 5000) : grt__rng_below(&r, 4) * 5000;
      grt_kernel_desc kd = {body, &args[k], ns, (grt_engine_class)grt__rng_below(&r, 3), NULL};
      assert_int_equal(grt_launch_kernel(s[si], &kd), GRT_OK);
    }
    last[si] = k;
  }
  d->n = n_ops;
  assert_int_equal(grt_exec_synchronize(exec), GRT_OK);
  for (int k = 0; k < n_ops; k++) {
    op_rec *o = &d->ops[k];
    assert_true(o->stamp > 0);
    for (int i = 0; i < o->n_preds; i++)
      if (d->ops[o->preds[i]].stamp >= o->stamp)
        fail_msg("op %d ran before its predecessor %d (seed %llu)", k, o->preds[i], (unsigned long long)seed);
  }
  for (int i = 0; i < EVENTS; i++) assert_int_equal(grt_event_destroy(ev[i]), GRT_OK);
  for (int i = 0; i < STREAMS; i++) assert_int_equal(grt_stream_destroy(s[i]), GRT_OK);
  assert_int_equal(grt_exec_destroy(exec), GRT_OK);
  free(d);
  free(args);
}

static void test_random_dags(void **state) {
  grt_clock_kind clock = clock_of(state);
  for (uint64_t seed = 1; seed <= 6; seed++) run_dag(clock, seed, clock == GRT_CLOCK_VIRTUAL ? MAX_OPS : 250);
}

/* Many host threads issuing and synchronizing concurrently on one exec. */
typedef struct thread_arg {
  grt_exec *exec;
  int id;
  _Atomic int *total;
  grt_status st; /* the thread's first failure (cmocka asserts only on the main thread) */
} thread_arg;

static void keep_first(grt_status *first, grt_status st) {
  if (*first == GRT_OK) *first = st;
}

static void count_body(void *p) { atomic_fetch_add((_Atomic int *)p, 1); }

static void *issuer(void *p) {
  thread_arg *t = p;
  grt_stream *s, *pt;
  grt_event *e;
  if ((t->st = grt_stream_create(t->exec, GRT_STREAM_NON_BLOCKING, 0, &s)) ||
      (t->st = grt_event_create(t->exec, 0, &e)) || (t->st = grt_exec_per_thread_stream(t->exec, &pt)))
    return NULL;
  grt_kernel_desc k = {count_body, t->total, 0, GRT_ENGINE_COMPUTE, NULL};
  for (int i = 0; i < 200; i++) {
    keep_first(&t->st, grt_launch_kernel(i % 2 ? s : pt, &k));
    if (i % 10 == 0) {
      keep_first(&t->st, grt_event_record(e, s));
      keep_first(&t->st, grt_stream_wait_event(pt, e));
    }
    if (i % 50 == 0) keep_first(&t->st, grt_event_synchronize(e));
  }
  keep_first(&t->st, grt_stream_synchronize(s));
  keep_first(&t->st, grt_stream_synchronize(pt));
  keep_first(&t->st, grt_event_destroy(e));
  keep_first(&t->st, grt_stream_destroy(s));
  return NULL;
}

static void test_concurrent_issuers(void **state) {
  (void)state;
  grt_exec *exec = make_exec(GRT_CLOCK_THREADS, 1);
  _Atomic int total = 0;
  pthread_t th[4];
  thread_arg ta[4];
  for (int i = 0; i < 4; i++) {
    ta[i] = (thread_arg){exec, i, &total, GRT_OK};
    assert_int_equal(pthread_create(&th[i], NULL, issuer, &ta[i]), 0);
  }
  for (int i = 0; i < 4; i++) {
    pthread_join(th[i], NULL);
    assert_int_equal(ta[i].st, GRT_OK);
  }
  assert_int_equal(grt_exec_synchronize(exec), GRT_OK);
  assert_int_equal(atomic_load(&total), 800);
  assert_int_equal(grt_exec_destroy(exec), GRT_OK);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      BOTH_CLOCKS(test_random_dags),
      cmocka_unit_test(test_concurrent_issuers),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
