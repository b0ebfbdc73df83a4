/* test_exec_query.c — queries have no side effects. A query (stream, event,
 * user-event value, capture status, timeline count, elapsed time) and a
 * launch neither advance the virtual clock nor run work; only synchronizing
 * calls and grt_exec_host_delay (the host spending time) do. So a program
 * whose answers do not depend on timing gets the same answers on both clocks.
 * Under threads the device runs by itself, so where the answer depends on how
 * far it got, only the virtual clock is asserted (each such place says so).
 * Every threads-clock wait is bounded by a watchdog (alarm) so that a bug
 * fails the test instead of hanging it. */
#include <stdbool.h>
#include <string.h>
#include <unistd.h>

#include "test_exec_common.h"

#define WATCHDOG_S 30

static void count_body(void *p) { atomic_fetch_add((_Atomic int *)p, 1); }

static grt_exec *make(void **state, int timeline) {
  alarm(WATCHDOG_S); /* the default action ends the process: a hang fails the test */
  return make_exec(clock_of(state), timeline);
}

static void done(grt_exec *exec) {
  assert_int_equal(grt_exec_destroy(exec), GRT_OK);
  alarm(0);
}

static bool virt(void **state) { return clock_of(state) == GRT_CLOCK_VIRTUAL; }

/* Everything a polling loop might call, each observed unchanged. */
typedef struct observed {
  grt_stream *s;
  grt_event *e0, *e;
  grt_user_event *g;
  size_t timeline_n;
} observed;

static void poll_round(const observed *o) {
  assert_int_equal(grt_stream_query(o->s), GRT_ERR_NOT_READY);
  assert_int_equal(grt_event_query(o->e), GRT_ERR_NOT_READY);
  float ms;
  assert_int_equal(grt_event_elapsed_time(o->e0, o->e, &ms), GRT_ERR_NOT_READY);
  uint64_t v = 99;
  assert_int_equal(grt_user_event_value(o->g, &v), GRT_OK);
  assert_int_equal(v, 0);
  grt_capture_status cs = GRT_CAPTURE_STATUS_ACTIVE;
  assert_int_equal(grt_stream_capture_status(o->s, &cs), GRT_OK);
  assert_int_equal(cs, GRT_CAPTURE_STATUS_NONE);
}

/* A gated kernel: a thousand rounds of every query see NOT_READY, the
 * kernel's body never runs and (virtual) time stays at 0; once the gate is
 * open the virtual device still does not move until the host synchronizes. */
static void test_polling_changes_nothing(void **state) {
  grt_exec *exec = make(state, 1);
  grt_stream *s = make_stream(exec, GRT_STREAM_NON_BLOCKING, "s");
  grt_user_event *g;
  grt_event *e0, *e;
  _Atomic int ran = 0;
  assert_int_equal(grt_user_event_create(exec, "g", &g), GRT_OK);
  assert_int_equal(grt_event_create(exec, 0, &e0), GRT_OK);
  assert_int_equal(grt_event_create(exec, 0, &e), GRT_OK);
  assert_int_equal(grt_event_record(e0, s), GRT_OK); /* an idle stream: complete at once */
  assert_int_equal(grt_event_query(e0), GRT_OK);
  assert_int_equal(grt_stream_wait_user_event(s, g, 1), GRT_OK);
  grt_kernel_desc k = {count_body, &ran, 1000, GRT_ENGINE_COMPUTE, "k"};
  assert_int_equal(grt_launch_kernel(s, &k), GRT_OK);
  assert_int_equal(grt_event_record(e, s), GRT_OK);
  observed o = {s, e0, e, g, 0};
  assert_int_equal(grt_exec_timeline_count(exec, &o.timeline_n), GRT_OK);
  for (int i = 0; i < 1000; i++) {
    poll_round(&o);
    size_t n;
    assert_int_equal(grt_exec_timeline_count(exec, &n), GRT_OK);
    assert_int_equal(n, o.timeline_n);
    uint64_t now;
    assert_int_equal(grt_exec_now_ns(exec, &now), GRT_OK);
    if (virt(state)) assert_int_equal(now, 0); /* threads: real time passes */
  }
  assert_int_equal(atomic_load(&ran), 0);
  assert_int_equal(grt_user_event_signal(g, 1), GRT_OK);
  /* Virtual only: under threads the kernel now runs by itself. */
  for (int i = 0; virt(state) && i < 1000; i++) {
    assert_int_equal(grt_stream_query(s), GRT_ERR_NOT_READY);
    assert_int_equal(grt_event_query(e), GRT_ERR_NOT_READY);
    uint64_t now;
    assert_int_equal(grt_exec_now_ns(exec, &now), GRT_OK);
    assert_int_equal(now, 0);
  }
  if (virt(state)) assert_int_equal(atomic_load(&ran), 0);
  assert_int_equal(grt_stream_synchronize(s), GRT_OK);
  assert_int_equal(atomic_load(&ran), 1);
  assert_int_equal(grt_stream_query(s), GRT_OK);
  assert_int_equal(grt_event_query(e), GRT_OK);
  int64_t ns;
  assert_int_equal(grt_event_elapsed_ns(e0, e, &ns), GRT_OK);
  uint64_t now;
  assert_int_equal(grt_exec_now_ns(exec, &now), GRT_OK);
  if (virt(state)) {
    assert_int_equal(ns, 1000);
    assert_int_equal(now, 1000);
  } else {
    assert_true(ns >= 1000);
  }
  assert_int_equal(grt_event_destroy(e0), GRT_OK);
  assert_int_equal(grt_event_destroy(e), GRT_OK);
  assert_int_equal(grt_user_event_destroy(g), GRT_OK);
  assert_int_equal(grt_stream_destroy(s), GRT_OK);
  done(exec);
}

/* grt_exec_host_delay is the host spending time, so it moves the virtual
 * clock and the device works meanwhile: a 1000 ns kernel polled after each
 * 100 ns delay reads NOT_READY nine times, then OK at exactly 1000 ns. Under
 * threads the delays are slept and the answers depend on the machine: only
 * that they turn OK within the bound and stay OK is asserted. */
static void test_host_delay_moves_time(void **state) {
  grt_exec *exec = make(state, 0);
  grt_stream *s = make_stream(exec, GRT_STREAM_NON_BLOCKING, "s");
  _Atomic int ran = 0;
  grt_kernel_desc k = {count_body, &ran, 1000, GRT_ENGINE_COMPUTE, "k"};
  assert_int_equal(grt_launch_kernel(s, &k), GRT_OK);
  if (virt(state)) {
    for (int i = 1; i <= 10; i++) {
      assert_int_equal(grt_exec_host_delay(exec, 100), GRT_OK);
      uint64_t now;
      assert_int_equal(grt_exec_now_ns(exec, &now), GRT_OK);
      assert_int_equal(now, 100u * (unsigned)i);
      assert_int_equal(grt_stream_query(s), i < 10 ? GRT_ERR_NOT_READY : GRT_OK);
      assert_int_equal(atomic_load(&ran), i < 10 ? 0 : 1);
    }
  } else {
    bool seen_ok = false;
    for (int i = 0; i < 100000; i++) { /* at most ~1 s of 10 us naps */
      grt_status q = grt_stream_query(s);
      if (seen_ok) assert_int_equal(q, GRT_OK); /* completion never goes back */
      if (q == GRT_OK) seen_ok = true;
      else assert_int_equal(q, GRT_ERR_NOT_READY);
      if (seen_ok && i > 10) break;
      assert_int_equal(grt_exec_host_delay(exec, 10000), GRT_OK);
    }
    assert_true(seen_ok);
    assert_int_equal(atomic_load(&ran), 1);
  }
  assert_int_equal(grt_stream_destroy(s), GRT_OK);
  done(exec);
}

/* A program whose answers do not depend on timing: both clocks must give
 * the same sequence. Before the gate opens nothing can complete; after a
 * synchronize on an event or a stream, what it covers is complete. */
static void test_same_answers_both_clocks(void **state) {
  static const grt_status expected[] = {
      GRT_OK,            /* never-recorded event */
      GRT_OK,            /* a record on an idle stream completes at once */
      GRT_ERR_NOT_READY, /* stream s: behind the gate */
      GRT_ERR_NOT_READY, /* stream t: waits for eA */
      GRT_ERR_NOT_READY, /* eA */
      GRT_ERR_NOT_READY, /* eB */
      GRT_ERR_NOT_READY, /* elapsed e0 -> eA */
      GRT_OK,            /* event_synchronize(eA) after the signal */
      GRT_OK,            /* eA */
      GRT_OK,            /* stream s */
      GRT_OK,            /* stream_synchronize(t) */
      GRT_OK,            /* eB */
      GRT_OK,            /* stream t */
      GRT_OK,            /* elapsed eA -> eB */
  };
  grt_status got[sizeof expected / sizeof expected[0]];
  size_t n = 0;
  grt_exec *exec = make(state, 0);
  grt_stream *s = make_stream(exec, GRT_STREAM_NON_BLOCKING, "s");
  grt_stream *t = make_stream(exec, GRT_STREAM_NON_BLOCKING, "t");
  grt_user_event *g;
  grt_event *never, *e0, *ea, *eb;
  assert_int_equal(grt_user_event_create(exec, "g", &g), GRT_OK);
  assert_int_equal(grt_event_create(exec, 0, &never), GRT_OK);
  assert_int_equal(grt_event_create(exec, 0, &e0), GRT_OK);
  assert_int_equal(grt_event_create(exec, 0, &ea), GRT_OK);
  assert_int_equal(grt_event_create(exec, 0, &eb), GRT_OK);
  got[n++] = grt_event_query(never);
  assert_int_equal(grt_event_record(e0, s), GRT_OK);
  got[n++] = grt_event_query(e0);
  grt_kernel_desc ka = {NULL, NULL, 2000, GRT_ENGINE_COMPUTE, "A"};
  grt_kernel_desc kb = {NULL, NULL, 1000, GRT_ENGINE_COMPUTE, "B"};
  assert_int_equal(grt_stream_wait_user_event(s, g, 1), GRT_OK);
  assert_int_equal(grt_launch_kernel(s, &ka), GRT_OK);
  assert_int_equal(grt_event_record(ea, s), GRT_OK);
  assert_int_equal(grt_stream_wait_event(t, ea), GRT_OK);
  assert_int_equal(grt_launch_kernel(t, &kb), GRT_OK);
  assert_int_equal(grt_event_record(eb, t), GRT_OK);
  got[n++] = grt_stream_query(s);
  got[n++] = grt_stream_query(t);
  got[n++] = grt_event_query(ea);
  got[n++] = grt_event_query(eb);
  float ms;
  got[n++] = grt_event_elapsed_time(e0, ea, &ms);
  assert_int_equal(grt_user_event_signal(g, 1), GRT_OK);
  got[n++] = grt_event_synchronize(ea);
  got[n++] = grt_event_query(ea);
  got[n++] = grt_stream_query(s);
  got[n++] = grt_stream_synchronize(t);
  got[n++] = grt_event_query(eb);
  got[n++] = grt_stream_query(t);
  int64_t ns = 0;
  got[n++] = grt_event_elapsed_ns(ea, eb, &ns);
  assert_int_equal(n, sizeof expected / sizeof expected[0]);
  for (size_t i = 0; i < n; i++)
    if (got[i] != expected[i])
      fail_msg("answer %zu: %s, expected %s", i, grt_status_name(got[i]), grt_status_name(expected[i]));
  if (virt(state)) assert_int_equal(ns, 1000); /* threads: B starts after eA, so >= 1000 */
  else assert_true(ns >= 1000);
  grt_event *evs[] = {never, e0, ea, eb};
  for (int i = 0; i < 4; i++) assert_int_equal(grt_event_destroy(evs[i]), GRT_OK);
  assert_int_equal(grt_user_event_destroy(g), GRT_OK);
  assert_int_equal(grt_stream_destroy(s), GRT_OK);
  assert_int_equal(grt_stream_destroy(t), GRT_OK);
  done(exec);
}

/* What a query may do is report a deadlock that already holds: two streams
 * each waiting for the other's signal can never move, so the first query
 * says GRT_ERR_DEADLOCK on both clocks, with nothing run. */
static void test_query_reports_existing_cycle(void **state) {
  grt_exec *exec = make(state, 0);
  grt_stream *a = make_stream(exec, GRT_STREAM_NON_BLOCKING, "A");
  grt_stream *b = make_stream(exec, GRT_STREAM_NON_BLOCKING, "B");
  grt_user_event *u1, *u2;
  assert_int_equal(grt_user_event_create(exec, "u1", &u1), GRT_OK);
  assert_int_equal(grt_user_event_create(exec, "u2", &u2), GRT_OK);
  assert_int_equal(grt_stream_wait_user_event(a, u1, 1), GRT_OK);
  assert_int_equal(grt_stream_signal_user_event(a, u2, 1), GRT_OK);
  assert_int_equal(grt_stream_wait_user_event(b, u2, 1), GRT_OK);
  assert_int_equal(grt_stream_signal_user_event(b, u1, 1), GRT_OK);
  uint64_t now;
  assert_int_equal(grt_exec_now_ns(exec, &now), GRT_OK);
  uint64_t before = now;
  assert_int_equal(grt_stream_query(a), GRT_ERR_DEADLOCK);
  assert_int_equal(grt_exec_now_ns(exec, &now), GRT_OK);
  if (virt(state)) assert_int_equal(now, before);
  char msg[512];
  assert_int_equal(grt_exec_get_error(exec, msg, sizeof msg), GRT_ERR_DEADLOCK);
  assert_non_null(strstr(msg, "cycle of 2"));
  assert_int_equal(grt_user_event_destroy(u1), GRT_OK);
  assert_int_equal(grt_user_event_destroy(u2), GRT_OK);
  assert_int_equal(grt_stream_destroy(a), GRT_OK);
  assert_int_equal(grt_stream_destroy(b), GRT_OK);
  done(exec);
}

/* Bad input to the queries changes nothing and reports precisely. */
static void test_query_errors(void **state) {
  grt_exec *exec = make(state, 0);
  grt_stream *s = make_stream(exec, GRT_STREAM_NON_BLOCKING, "s");
  grt_event *e;
  assert_int_equal(grt_event_create(exec, 0, &e), GRT_OK);
  assert_int_equal(grt_stream_query(NULL), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt_event_query(NULL), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt_stream_query((grt_stream *)(void *)e), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt_event_destroy(e), GRT_OK);
  assert_int_equal(grt_event_query(e), GRT_ERR_INVALID_HANDLE);
  assert_int_equal(grt_stream_destroy(s), GRT_OK);
  assert_int_equal(grt_stream_query(s), GRT_ERR_INVALID_HANDLE);
  uint64_t now;
  assert_int_equal(grt_exec_now_ns(exec, &now), GRT_OK);
  if (virt(state)) assert_int_equal(now, 0);
  done(exec);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      BOTH_CLOCKS(test_polling_changes_nothing),
      BOTH_CLOCKS(test_host_delay_moves_time),
      BOTH_CLOCKS(test_same_answers_both_clocks),
      BOTH_CLOCKS(test_query_reports_existing_cycle),
      BOTH_CLOCKS(test_query_errors),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
