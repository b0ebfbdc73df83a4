/* test_exec_graph_capture.c — stream capture rules, one by one, under both
 * clocks: what a capture records (nothing runs), fork/join, every illegal
 * call invalidating the capture (end-capture then fails with no graph and
 * the streams work normally afterwards), the capture modes' rules for
 * synchronous device malloc/free, and who may end a capture. */
#include <pthread.h>
#include <string.h>

#include "test_exec_common.h"

typedef struct fixture {
  grt_exec *exec;
  grt_stream *s, *s2;
  grt_event *e;
  order_log log;
  log_arg a[8];
} fixture;

static void setup(fixture *f, grt_clock_kind clock, unsigned flags) {
  memset(f, 0, sizeof *f);
  f->exec = make_exec(clock, 0);
  f->s = make_stream(f->exec, flags, "origin");
  f->s2 = make_stream(f->exec, flags, "fork");
  assert_int_equal(grt_event_create(f->exec, 0, &f->e), GRT_OK);
  for (int i = 0; i < 8; i++) f->a[i] = (log_arg){&f->log, i};
}

static void teardown(fixture *f) {
  assert_int_equal(grt_exec_synchronize(f->exec), GRT_OK);
  assert_int_equal(grt_event_destroy(f->e), GRT_OK);
  assert_int_equal(grt_stream_destroy(f->s), GRT_OK);
  assert_int_equal(grt_stream_destroy(f->s2), GRT_OK);
  assert_int_equal(grt_exec_destroy(f->exec), GRT_OK);
}

static grt_capture_status status_of(grt_stream *s) {
  grt_capture_status cs;
  assert_int_equal(grt_stream_capture_status(s, &cs), GRT_OK);
  return cs;
}

/* After an invalidating call: ops refused, end-capture fails with no graph,
 * and nothing of the capture survives (eager work runs). */
static void expect_invalidated(fixture *f) {
  assert_int_equal(status_of(f->s), GRT_CAPTURE_STATUS_INVALIDATED);
  grt_kernel_desc d = {log_body, &f->a[7], 0, GRT_ENGINE_COMPUTE, NULL};
  assert_int_equal(grt_launch_kernel(f->s, &d), GRT_ERR_CAPTURE_INVALIDATED);
  grt_graph *g = (grt_graph *)&g;
  assert_int_equal(grt_stream_end_capture(f->s, &g), GRT_ERR_CAPTURE_INVALIDATED);
  assert_null(g);
  assert_int_equal(status_of(f->s), GRT_CAPTURE_STATUS_NONE);
  assert_int_equal(status_of(f->s2), GRT_CAPTURE_STATUS_NONE);
  int before = atomic_load(&f->log.n);
  launch_logged(f->s, &f->a[6], 0);
  assert_int_equal(grt_stream_synchronize(f->s), GRT_OK);
  assert_int_equal(grt_event_query(f->e), GRT_OK);
  assert_int_equal(atomic_load(&f->log.n), before + 1);
}

static void test_capture_records_not_runs(void **state) {
  fixture f;
  setup(&f, clock_of(state), GRT_STREAM_NON_BLOCKING);
  assert_int_equal(grt_stream_begin_capture(f.s, GRT_CAPTURE_GLOBAL), GRT_OK);
  assert_int_equal(status_of(f.s), GRT_CAPTURE_STATUS_ACTIVE);
  assert_int_equal(grt_stream_begin_capture(f.s, GRT_CAPTURE_GLOBAL), GRT_ERR_STATE);
  for (int i = 0; i < 3; i++) launch_logged(f.s, &f.a[i], 1000);
  grt_graph *g = NULL;
  assert_int_equal(grt_stream_end_capture(f.s2, &g), GRT_ERR_STATE); /* not capturing */
  assert_int_equal(grt_stream_end_capture(f.s, &g), GRT_OK);
  assert_non_null(g);
  assert_int_equal(status_of(f.s), GRT_CAPTURE_STATUS_NONE);
  assert_int_equal(grt_exec_synchronize(f.exec), GRT_OK);
  assert_int_equal(atomic_load(&f.log.n), 0); /* captured work did not run */
  size_t n, e;
  assert_int_equal(grt_graph_node_count(g, &n), GRT_OK);
  assert_int_equal(grt_graph_edge_count(g, &e), GRT_OK);
  assert_int_equal(n, 3);
  assert_int_equal(e, 2);
  grt_graph_exec *ge;
  assert_int_equal(grt_graph_instantiate(g, &ge), GRT_OK);
  for (int rep = 0; rep < 2; rep++) assert_int_equal(grt_graph_launch(ge, f.s), GRT_OK);
  assert_int_equal(grt_stream_synchronize(f.s), GRT_OK);
  assert_int_equal(atomic_load(&f.log.n), 6);
  for (int i = 0; i < 6; i++) assert_int_equal(f.log.items[i], i % 3);
  assert_int_equal(grt_graph_exec_destroy(ge), GRT_OK);
  assert_int_equal(grt_graph_destroy(g), GRT_OK);
  grt_stream *leg;
  assert_int_equal(grt_exec_legacy_stream(f.exec, &leg), GRT_OK);
  assert_int_equal(grt_stream_begin_capture(leg, GRT_CAPTURE_GLOBAL), GRT_ERR_CAPTURE_UNSUPPORTED);
  assert_int_equal(grt_stream_begin_capture(f.s, (grt_capture_mode)7), GRT_ERR_INVALID_ARG);
  teardown(&f);
}

/* s: k0, record e; s2 waits e (fork): k1; record e2 on s2; s: k2; s waits e2 (join): k3.
 * Replay: k0 first, k3 last. */
static void test_fork_join(void **state) {
  fixture f;
  setup(&f, clock_of(state), GRT_STREAM_NON_BLOCKING);
  grt_event *e2;
  assert_int_equal(grt_event_create(f.exec, 0, &e2), GRT_OK);
  assert_int_equal(grt_stream_begin_capture(f.s, GRT_CAPTURE_THREAD_LOCAL), GRT_OK);
  launch_logged(f.s, &f.a[0], 500);
  assert_int_equal(grt_event_record(f.e, f.s), GRT_OK);
  assert_int_equal(grt_stream_wait_event(f.s2, f.e), GRT_OK);
  assert_int_equal(status_of(f.s2), GRT_CAPTURE_STATUS_ACTIVE);
  launch_logged(f.s2, &f.a[1], 3000);
  assert_int_equal(grt_event_record(e2, f.s2), GRT_OK);
  launch_logged(f.s, &f.a[2], 100);
  assert_int_equal(grt_stream_wait_event(f.s, e2), GRT_OK);
  launch_logged(f.s, &f.a[3], 100);
  grt_graph *g;
  assert_int_equal(grt_stream_end_capture(f.s, &g), GRT_OK);
  assert_int_equal(status_of(f.s2), GRT_CAPTURE_STATUS_NONE);
  size_t n, e;
  assert_int_equal(grt_graph_node_count(g, &n), GRT_OK);
  assert_int_equal(grt_graph_edge_count(g, &e), GRT_OK);
  assert_int_equal(n, 4);
  assert_int_equal(e, 4); /* k0->k1, k0->k2, k1->k3, k2->k3 */
  grt_graph_exec *ge;
  assert_int_equal(grt_graph_instantiate(g, &ge), GRT_OK);
  assert_int_equal(grt_graph_launch(ge, f.s2), GRT_OK); /* any stream may launch it */
  assert_int_equal(grt_stream_synchronize(f.s2), GRT_OK);
  assert_int_equal(atomic_load(&f.log.n), 4);
  assert_int_equal(f.log.items[0], 0);
  assert_int_equal(f.log.items[3], 3);
  /* After the capture both events are ordinary again (recorded outside any capture: complete). */
  assert_int_equal(grt_event_query(e2), GRT_OK);
  assert_int_equal(grt_graph_exec_destroy(ge), GRT_OK);
  assert_int_equal(grt_graph_destroy(g), GRT_OK);
  assert_int_equal(grt_event_destroy(e2), GRT_OK);
  teardown(&f);
}

static void test_unjoined_fork(void **state) {
  fixture f;
  setup(&f, clock_of(state), GRT_STREAM_NON_BLOCKING);
  assert_int_equal(grt_stream_begin_capture(f.s, GRT_CAPTURE_GLOBAL), GRT_OK);
  launch_logged(f.s, &f.a[0], 0);
  assert_int_equal(grt_event_record(f.e, f.s), GRT_OK);
  assert_int_equal(grt_stream_wait_event(f.s2, f.e), GRT_OK);
  launch_logged(f.s2, &f.a[1], 0); /* never joined back */
  grt_graph *g = (grt_graph *)&g;
  assert_int_equal(grt_stream_end_capture(f.s2, &g), GRT_ERR_CAPTURE_UNMATCHED); /* not the origin */
  assert_int_equal(grt_stream_end_capture(f.s, &g), GRT_ERR_CAPTURE_UNJOINED);
  assert_null(g);
  assert_int_equal(status_of(f.s2), GRT_CAPTURE_STATUS_NONE);
  launch_logged(f.s2, &f.a[2], 0);
  assert_int_equal(grt_stream_synchronize(f.s2), GRT_OK);
  assert_int_equal(atomic_load(&f.log.n), 1);
  assert_int_equal(f.log.items[0], 2);
  teardown(&f);
}

typedef enum rule {
  R_STREAM_SYNC, R_STREAM_QUERY, R_EVENT_QUERY, R_EVENT_SYNC, R_EVENT_ELAPSED, R_DEVICE_SYNC, R_LEGACY_KERNEL,
  R_LEGACY_SYNC, R_DEVICE_MALLOC, R_DEVICE_FREE, R_ISOLATION, R_USER_EVENT, R_FORKED_SYNC, R_COUNT
} rule;

/* Performs the illegal call; returns its status. */
static grt_status illegal_call(fixture *f, rule r, grt_devptr spare) {
  grt_stream *leg;
  assert_int_equal(grt_exec_legacy_stream(f->exec, &leg), GRT_OK);
  grt_kernel_desc d = {log_body, &f->a[5], 0, GRT_ENGINE_COMPUTE, NULL};
  grt_devptr p;
  int64_t ns;
  switch (r) {
    case R_STREAM_SYNC: return grt_stream_synchronize(f->s);
    case R_STREAM_QUERY: return grt_stream_query(f->s);
    case R_EVENT_QUERY: return grt_event_query(f->e);
    case R_EVENT_SYNC: return grt_event_synchronize(f->e);
    case R_EVENT_ELAPSED: return grt_event_elapsed_ns(f->e, f->e, &ns);
    case R_DEVICE_SYNC: return grt_exec_synchronize(f->exec);
    case R_LEGACY_KERNEL: return grt_launch_kernel(leg, &d);
    case R_LEGACY_SYNC: return grt_stream_synchronize(leg);
    case R_DEVICE_MALLOC: return grt_exec_device_malloc(f->exec, 4096, &p);
    case R_DEVICE_FREE: return grt_exec_device_free(f->exec, spare);
    case R_ISOLATION: { /* s2 waits on an event recorded outside the capture */
      grt_event *out;
      assert_int_equal(grt_event_create(f->exec, 0, &out), GRT_OK);
      assert_int_equal(grt_event_record(out, f->s2), GRT_OK);
      grt_status st = grt_stream_wait_event(f->s, out);
      assert_int_equal(grt_event_destroy(out), GRT_OK);
      return st;
    }
    case R_USER_EVENT: {
      grt_user_event *u;
      assert_int_equal(grt_user_event_create(f->exec, "u", &u), GRT_OK);
      grt_status st = grt_stream_wait_user_event(f->s, u, 1);
      assert_int_equal(grt_user_event_destroy(u), GRT_OK);
      return st;
    }
    case R_FORKED_SYNC: /* s2 joined the capture by a fork */
      assert_int_equal(grt_stream_wait_event(f->s2, f->e), GRT_OK);
      return grt_stream_synchronize(f->s2);
    default: return GRT_ERR_INTERNAL;
  }
}

/* CUDA's error for each rule: legacy use is an implicit dependency,
 * malloc/free a "potentially unsafe" call, a captured event is refused as
 * such, and waits across the boundary are isolation errors. */
static const grt_status want_of[R_COUNT] = {
    [R_STREAM_SYNC] = GRT_ERR_CAPTURE_UNSUPPORTED,  [R_STREAM_QUERY] = GRT_ERR_CAPTURE_UNSUPPORTED,
    [R_EVENT_QUERY] = GRT_ERR_CAPTURED_EVENT,       [R_EVENT_SYNC] = GRT_ERR_CAPTURED_EVENT,
    [R_EVENT_ELAPSED] = GRT_ERR_CAPTURED_EVENT,     [R_DEVICE_SYNC] = GRT_ERR_CAPTURE_UNSUPPORTED,
    [R_LEGACY_KERNEL] = GRT_ERR_CAPTURE_IMPLICIT,   [R_LEGACY_SYNC] = GRT_ERR_CAPTURE_IMPLICIT,
    [R_DEVICE_MALLOC] = GRT_ERR_CAPTURE_UNSUPPORTED, [R_DEVICE_FREE] = GRT_ERR_CAPTURE_UNSUPPORTED,
    [R_ISOLATION] = GRT_ERR_CAPTURE_ISOLATION,      [R_USER_EVENT] = GRT_ERR_CAPTURE_UNSUPPORTED,
    [R_FORKED_SYNC] = GRT_ERR_CAPTURE_UNSUPPORTED,
};

static void test_illegal_calls(void **state) {
  for (int r = 0; r < R_COUNT; r++) {
    fixture f;
    setup(&f, clock_of(state), GRT_STREAM_DEFAULT); /* blocking streams: legacy use is illegal */
    grt_devptr spare = 0;
    assert_int_equal(grt_exec_device_malloc(f.exec, 4096, &spare), GRT_OK);
    assert_int_equal(grt_stream_begin_capture(f.s, GRT_CAPTURE_GLOBAL), GRT_OK);
    launch_logged(f.s, &f.a[0], 100);
    assert_int_equal(grt_event_record(f.e, f.s), GRT_OK); /* a captured event */
    print_message("rule %d\n", r);
    /* Legacy use is an implicit dependency, malloc/free a "potentially unsafe" call. */
    grt_status want = want_of[r];
    assert_int_equal(illegal_call(&f, (rule)r, spare), want);
    expect_invalidated(&f);
    assert_int_equal(atomic_load(&f.log.n), 1); /* only the eager kernel after the capture ran */
    assert_int_equal(grt_exec_device_free(f.exec, spare), GRT_OK); /* R_DEVICE_FREE's was refused */
    teardown(&f);
  }
}

/* Legacy-stream use is fine while only non-blocking streams capture (in
 * RELAXED mode: its synchronize is a "potentially unsafe" call otherwise). */
static void test_legacy_with_nonblocking_capture(void **state) {
  fixture f;
  setup(&f, clock_of(state), GRT_STREAM_NON_BLOCKING);
  grt_stream *leg;
  assert_int_equal(grt_exec_legacy_stream(f.exec, &leg), GRT_OK);
  assert_int_equal(grt_stream_begin_capture(f.s, GRT_CAPTURE_RELAXED), GRT_OK);
  launch_logged(f.s, &f.a[0], 100);
  launch_logged(leg, &f.a[1], 100);
  assert_int_equal(grt_stream_synchronize(leg), GRT_OK);
  assert_int_equal(status_of(f.s), GRT_CAPTURE_STATUS_ACTIVE);
  grt_graph *g;
  assert_int_equal(grt_stream_end_capture(f.s, &g), GRT_OK);
  assert_int_equal(grt_graph_destroy(g), GRT_OK);
  assert_int_equal(atomic_load(&f.log.n), 1);
  teardown(&f);
}

/* ---- modes: synchronous malloc in this and other threads; who may end ---- */

typedef struct other_call {
  fixture *f;
  grt_status st;
  grt_devptr p;
  int end; /* 1: end the capture instead of mallocing */
  grt_graph *g;
} other_call;

static void *other_thread(void *p) {
  other_call *c = p;
  if (c->end) c->st = grt_stream_end_capture(c->f->s, &c->g);
  else if (!(c->st = grt_exec_device_malloc(c->f->exec, 4096, &c->p))) c->st = grt_exec_device_free(c->f->exec, c->p);
  return NULL;
}

static grt_status from_other_thread(fixture *f, int end, grt_graph **g) {
  other_call c = {f, GRT_OK, 0, end, NULL};
  pthread_t t;
  assert_int_equal(pthread_create(&t, NULL, other_thread, &c), 0);
  pthread_join(t, NULL);
  if (g) *g = c.g;
  return c.st;
}

/* expect[mode] = {this thread's malloc, another thread's malloc} statuses. */
static void test_modes_device_malloc(void **state) {
  const grt_status expect[3][2] = {
      {GRT_ERR_CAPTURE_UNSUPPORTED, GRT_ERR_CAPTURE_UNSUPPORTED}, /* global */
      {GRT_ERR_CAPTURE_UNSUPPORTED, GRT_OK},                      /* thread-local */
      {GRT_OK, GRT_OK},                                           /* relaxed */
  };
  for (int m = 0; m < 3; m++)
    for (int who = 0; who < 2; who++) {
      fixture f;
      setup(&f, clock_of(state), GRT_STREAM_NON_BLOCKING);
      assert_int_equal(grt_stream_begin_capture(f.s, (grt_capture_mode)m), GRT_OK);
      launch_logged(f.s, &f.a[0], 0);
      grt_status st;
      if (who == 0) {
        grt_devptr p;
        if (!(st = grt_exec_device_malloc(f.exec, 4096, &p))) assert_int_equal(grt_exec_device_free(f.exec, p), GRT_OK);
      } else {
        st = from_other_thread(&f, 0, NULL);
      }
      print_message("mode %d, %s thread: %s\n", m, who ? "other" : "same", grt_status_name(st));
      assert_int_equal(st, expect[m][who]);
      if (st) {
        expect_invalidated(&f);
      } else {
        grt_graph *g;
        assert_int_equal(grt_stream_end_capture(f.s, &g), GRT_OK);
        assert_int_equal(grt_graph_destroy(g), GRT_OK);
      }
      teardown(&f);
    }
}

static void test_end_from_other_thread(void **state) {
  for (int m = 0; m < 3; m++) {
    fixture f;
    setup(&f, clock_of(state), GRT_STREAM_NON_BLOCKING);
    assert_int_equal(grt_stream_begin_capture(f.s, (grt_capture_mode)m), GRT_OK);
    launch_logged(f.s, &f.a[0], 0);
    grt_graph *g = NULL;
    grt_status st = from_other_thread(&f, 1, &g);
    if (m == GRT_CAPTURE_RELAXED) {
      assert_int_equal(st, GRT_OK);
      assert_non_null(g);
    } else { /* refused; the capture goes on and its owner ends it */
      assert_int_equal(st, GRT_ERR_CAPTURE_WRONG_THREAD);
      assert_null(g);
      assert_int_equal(status_of(f.s), GRT_CAPTURE_STATUS_ACTIVE);
      assert_int_equal(grt_stream_end_capture(f.s, &g), GRT_OK);
    }
    size_t n;
    assert_int_equal(grt_graph_node_count(g, &n), GRT_OK);
    assert_int_equal(n, 1);
    assert_int_equal(grt_graph_destroy(g), GRT_OK);
    teardown(&f);
  }
}

/* Two captures can't be merged by an event; a capturing stream can't be destroyed. */
static void test_cross_capture_and_destroy(void **state) {
  fixture f;
  setup(&f, clock_of(state), GRT_STREAM_NON_BLOCKING);
  assert_int_equal(grt_stream_begin_capture(f.s, GRT_CAPTURE_RELAXED), GRT_OK);
  assert_int_equal(grt_stream_begin_capture(f.s2, GRT_CAPTURE_RELAXED), GRT_OK);
  assert_int_equal(grt_stream_destroy(f.s2), GRT_ERR_BUSY);
  launch_logged(f.s, &f.a[0], 0);
  assert_int_equal(grt_event_record(f.e, f.s), GRT_OK);
  assert_int_equal(grt_stream_wait_event(f.s2, f.e), GRT_ERR_CAPTURE_MERGE);
  grt_graph *g;
  assert_int_equal(grt_stream_end_capture(f.s2, &g), GRT_ERR_CAPTURE_INVALIDATED);
  assert_int_equal(grt_stream_end_capture(f.s, &g), GRT_ERR_CAPTURE_INVALIDATED);
  teardown(&f);
}

/* The legacy stream cannot join a capture: waiting on a captured event is
 * an implicit dependency (cudaErrorStreamCaptureImplicit) even while only
 * non-blocking streams capture, and it invalidates the capture. A stream
 * that joined a capture cannot end it (cudaErrorStreamCaptureUnmatched). */
static void test_legacy_fork_and_unmatched_end(void **state) {
  fixture f;
  setup(&f, clock_of(state), GRT_STREAM_NON_BLOCKING);
  grt_stream *leg;
  assert_int_equal(grt_exec_legacy_stream(f.exec, &leg), GRT_OK);
  assert_int_equal(grt_stream_begin_capture(f.s, GRT_CAPTURE_GLOBAL), GRT_OK);
  launch_logged(f.s, &f.a[0], 0);
  assert_int_equal(grt_event_record(f.e, f.s), GRT_OK);
  assert_int_equal(grt_stream_wait_event(f.s2, f.e), GRT_OK);
  grt_graph *g = (grt_graph *)&g;
  assert_int_equal(grt_stream_end_capture(f.s2, &g), GRT_ERR_CAPTURE_UNMATCHED);
  assert_int_equal(status_of(f.s), GRT_CAPTURE_STATUS_ACTIVE); /* nothing changed */
  assert_int_equal(grt_stream_wait_event(leg, f.e), GRT_ERR_CAPTURE_IMPLICIT);
  assert_int_equal(status_of(f.s), GRT_CAPTURE_STATUS_INVALIDATED);
  assert_int_equal(status_of(leg), GRT_CAPTURE_STATUS_NONE);
  assert_int_equal(grt_stream_end_capture(f.s, &g), GRT_ERR_CAPTURE_INVALIDATED);
  assert_null(g);
  assert_int_equal(grt_stream_end_capture(f.s, &g), GRT_ERR_STATE); /* over: illegal state */
  assert_int_equal(atomic_load(&f.log.n), 0); /* nothing captured ran */
  teardown(&f);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      BOTH_CLOCKS(test_capture_records_not_runs),
      BOTH_CLOCKS(test_fork_join),
      BOTH_CLOCKS(test_unjoined_fork),
      BOTH_CLOCKS(test_illegal_calls),
      BOTH_CLOCKS(test_legacy_with_nonblocking_capture),
      BOTH_CLOCKS(test_modes_device_malloc),
      BOTH_CLOCKS(test_end_from_other_thread),
      BOTH_CLOCKS(test_cross_capture_and_destroy),
      BOTH_CLOCKS(test_legacy_fork_and_unmatched_end),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
