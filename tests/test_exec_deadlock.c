/* test_exec_deadlock.c — S4 (deadlocks are reported with their cycle, never
 * hang) and bad input (destroyed objects, foreign objects, busy destroys). */
#include <string.h>

#include "scenarios/scenario.h"
#include "test_exec_common.h"

static void expect_deadlock(grt_clock_kind clock, grt__deadlock_case c, const char *const *needles) {
  grt_exec *exec = make_exec(clock, 0);
  char msg[1024] = "";
  assert_int_equal(grt__scn_deadlock(exec, c, msg, sizeof msg), GRT_ERR_DEADLOCK);
  print_message("%s\n", msg);
  for (int i = 0; needles[i]; i++) {
    if (!strstr(msg, needles[i])) fail_msg("'%s' not in: %s", needles[i], msg);
  }
  /* Sticky: the exec refuses new work with the same error. */
  grt_stream *leg;
  assert_int_equal(grt_exec_legacy_stream(exec, &leg), GRT_OK);
  grt_kernel_desc k = {NULL, NULL, 0, GRT_ENGINE_COMPUTE, NULL};
  assert_int_equal(grt_launch_kernel(leg, &k), GRT_ERR_DEADLOCK);
  assert_int_equal(grt_stream_query(leg), GRT_ERR_DEADLOCK);
  assert_int_equal(grt_exec_get_error(exec, NULL, 0), GRT_ERR_DEADLOCK);
  assert_int_equal(grt_exec_destroy(exec), GRT_OK);
}

static void test_uev_cycle(void **state) {
  static const char *const n[] = {"'A'", "'B'", "'u1'", "'u2'", "cycle of 2", NULL};
  expect_deadlock(clock_of(state), GRT__DL_UEV_CYCLE, n);
}

static void test_uev_cycle3(void **state) {
  static const char *const n[] = {"'A'", "'B'", "'C'", "'u1'", "'u2'", "event 'eA'", "cycle of 3", NULL};
  expect_deadlock(clock_of(state), GRT__DL_UEV_CYCLE3, n);
}

static void test_host_fn_waits_later_work(void **state) {
  static const char *const n[] = {"host function on stream 'A'", "'u1'", "cycle of 1",
                                  "wait returned GRT_ERR_DEADLOCK", NULL};
  expect_deadlock(clock_of(state), GRT__DL_HOST_FN, n);
}

static void test_host_fn_cross(void **state) {
  static const char *const n[] = {"host function on stream 'A'", "stream 'B' waits for event 'eA'", "cycle of 2",
                                  NULL};
  expect_deadlock(clock_of(state), GRT__DL_HOST_FN_CROSS, n);
}

static void test_plain_events_never_deadlock(void **state) {
  grt_exec *exec = make_exec(clock_of(state), 0);
  char msg[256];
  assert_int_equal(grt__scn_deadlock(exec, GRT__DL_PLAIN_EVENTS, msg, sizeof msg), GRT_OK);
  assert_int_equal(grt_exec_get_error(exec, NULL, 0), GRT_OK);
  assert_int_equal(grt_exec_destroy(exec), GRT_OK);
}

/* A stream waiting on a user event nobody has signalled yet is not a deadlock
 * while the host can still signal it. */
static void test_host_signal_later_is_fine(void **state) {
  grt_exec *exec = make_exec(clock_of(state), 0);
  grt_stream *s = make_stream(exec, GRT_STREAM_NON_BLOCKING, "s");
  grt_stream *t = make_stream(exec, GRT_STREAM_NON_BLOCKING, "t");
  grt_user_event *u;
  assert_int_equal(grt_user_event_create(exec, "later", &u), GRT_OK);
  assert_int_equal(grt_stream_wait_user_event(s, u, 2), GRT_OK);
  grt_kernel_desc k = {NULL, NULL, 100, GRT_ENGINE_COMPUTE, NULL};
  assert_int_equal(grt_launch_kernel(t, &k), GRT_OK);
  assert_int_equal(grt_stream_synchronize(t), GRT_OK);
  assert_int_equal(grt_stream_query(s), GRT_ERR_NOT_READY);
  assert_int_equal(grt_user_event_signal(u, 1), GRT_OK);
  assert_int_equal(grt_stream_query(s), GRT_ERR_NOT_READY);
  assert_int_equal(grt_user_event_signal(u, 5), GRT_OK);
  assert_int_equal(grt_stream_synchronize(s), GRT_OK);
  uint64_t v;
  assert_int_equal(grt_user_event_value(u, &v), GRT_OK);
  assert_int_equal(v, 5);
  assert_int_equal(grt_user_event_wait(u, 3), GRT_OK);
  assert_int_equal(grt_user_event_destroy(u), GRT_OK);
  assert_int_equal(grt_stream_destroy(s), GRT_OK);
  assert_int_equal(grt_stream_destroy(t), GRT_OK);
  assert_int_equal(grt_exec_destroy(exec), GRT_OK);
}

/* Under the virtual clock the waiting host thread is the only one that could
 * signal: a synchronize that needs a host signal is a deadlock of the host. */
static void test_virtual_host_stall(void **state) {
  (void)state;
  grt_exec *exec = make_exec(GRT_CLOCK_VIRTUAL, 0);
  grt_stream *s = make_stream(exec, GRT_STREAM_NON_BLOCKING, "stalled");
  grt_user_event *u;
  assert_int_equal(grt_user_event_create(exec, "never", &u), GRT_OK);
  assert_int_equal(grt_stream_wait_user_event(s, u, 1), GRT_OK);
  assert_int_equal(grt_stream_synchronize(s), GRT_ERR_DEADLOCK);
  char msg[512];
  assert_int_equal(grt_exec_get_error(exec, msg, sizeof msg), GRT_ERR_DEADLOCK);
  assert_non_null(strstr(msg, "'never'"));
  assert_non_null(strstr(msg, "'stalled'"));
  assert_int_equal(grt_user_event_destroy(u), GRT_OK);
  assert_int_equal(grt_stream_destroy(s), GRT_OK);
  assert_int_equal(grt_exec_destroy(exec), GRT_OK);
}

static void test_bad_input(void **state) {
  grt_exec *exec = make_exec(clock_of(state), 0);
  grt_exec *other = make_exec(clock_of(state), 0);
  grt_stream *s = make_stream(exec, GRT_STREAM_NON_BLOCKING, "s");
  grt_stream *so = make_stream(other, GRT_STREAM_NON_BLOCKING, "other");
  grt_event *ev, *evo;
  grt_user_event *u, *uo;
  assert_int_equal(grt_event_create(exec, 0, &ev), GRT_OK);
  assert_int_equal(grt_event_create(other, 0, &evo), GRT_OK);
  assert_int_equal(grt_user_event_create(exec, NULL, &u), GRT_OK);
  assert_int_equal(grt_user_event_create(other, NULL, &uo), GRT_OK);
  /* Foreign objects. */
  assert_int_equal(grt_event_record(evo, s), GRT_ERR_WRONG_DEVICE);
  assert_int_equal(grt_stream_wait_event(s, evo), GRT_ERR_WRONG_DEVICE);
  assert_int_equal(grt_stream_wait_user_event(s, uo, 1), GRT_ERR_WRONG_DEVICE);
  assert_int_equal(grt_stream_signal_user_event(so, u, 1), GRT_ERR_WRONG_DEVICE);
  int64_t ns;
  assert_int_equal(grt_event_elapsed_ns(ev, evo, &ns), GRT_ERR_WRONG_DEVICE);
  /* NULL and wrong types. */
  grt_stream *null_s = NULL;
  assert_int_equal(grt_stream_create(NULL, 0, 0, &null_s), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt_stream_create(exec, 0x80, 0, &null_s), GRT_ERR_INVALID_ARG);
  assert_null(null_s);
  assert_int_equal(grt_launch_kernel(s, NULL), GRT_ERR_INVALID_ARG);
  grt_kernel_desc bad = {NULL, NULL, 0, GRT_ENGINE_HOST, NULL};
  assert_int_equal(grt_launch_kernel(s, &bad), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt_launch_host_func(s, NULL, NULL), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt_stream_query((grt_stream *)(void *)ev), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt_event_query((grt_event *)(void *)s), GRT_ERR_INVALID_ARG);
  /* Destroy with live children is refused and changes nothing. */
  assert_int_equal(grt_exec_destroy(exec), GRT_ERR_BUSY);
  assert_int_equal(grt_stream_query(s), GRT_OK);
  /* Destroyed objects. */
  assert_int_equal(grt_event_destroy(ev), GRT_OK);
  assert_int_equal(grt_event_record(ev, s), GRT_ERR_INVALID_HANDLE);
  assert_int_equal(grt_event_query(ev), GRT_ERR_INVALID_HANDLE);
  assert_int_equal(grt_stream_wait_event(s, ev), GRT_ERR_INVALID_HANDLE);
  assert_int_equal(grt_event_destroy(ev), GRT_ERR_INVALID_HANDLE);
  assert_int_equal(grt_user_event_destroy(u), GRT_OK);
  assert_int_equal(grt_user_event_signal(u, 1), GRT_ERR_INVALID_HANDLE);
  assert_int_equal(grt_stream_destroy(s), GRT_OK);
  grt_stream_id id;
  assert_int_equal(grt_stream_get_id(s, &id), GRT_ERR_INVALID_HANDLE);
  assert_int_equal(grt_stream_synchronize(s), GRT_ERR_INVALID_HANDLE);
  assert_int_equal(grt_stream_set_name(s, "x"), GRT_ERR_INVALID_HANDLE);
  assert_int_equal(grt_exec_destroy(NULL), GRT_OK);
  assert_int_equal(grt_stream_destroy(NULL), GRT_OK);
  assert_int_equal(grt_exec_destroy(exec), GRT_OK);
  assert_int_equal(grt_event_destroy(evo), GRT_OK);
  assert_int_equal(grt_user_event_destroy(uo), GRT_OK);
  assert_int_equal(grt_stream_destroy(so), GRT_OK);
  assert_int_equal(grt_exec_destroy(other), GRT_OK);
}

/* The exec's grt_stream_ops work on stream ids and opaque event ids; an id is
 * a grt_event, so another stream can be ordered after it. */
static void test_stream_ops(void **state) {
  grt_exec *exec = make_exec(clock_of(state), 0);
  grt_stream *a = make_stream(exec, GRT_STREAM_NON_BLOCKING, "a");
  grt_stream *b = make_stream(exec, GRT_STREAM_NON_BLOCKING, "b");
  grt_stream_id ida, idb;
  assert_int_equal(grt_stream_get_id(a, &ida), GRT_OK);
  assert_int_equal(grt_stream_get_id(b, &idb), GRT_OK);
  assert_true(ida != 0 && idb != 0 && ida != idb);
  grt_stream *found;
  assert_int_equal(grt_exec_stream_from_id(exec, ida, &found), GRT_OK);
  assert_ptr_equal(found, a);
  assert_int_equal(grt_exec_stream_from_id(exec, 9999, &found), GRT_ERR_NOT_FOUND);
  grt_stream_ops ops;
  assert_int_equal(grt_exec_stream_ops(exec, &ops), GRT_OK);
  assert_ptr_equal(ops.ctx, exec);
  grt_user_event *gate;
  assert_int_equal(grt_user_event_create(exec, "gate", &gate), GRT_OK);
  assert_int_equal(grt_stream_wait_user_event(a, gate, 1), GRT_OK);
  uint64_t ev = 0;
  assert_int_equal(ops.record_event(ops.ctx, ida, &ev), GRT_OK);
  assert_int_equal(ops.event_query(ops.ctx, ev), 0);
  assert_int_equal(grt_stream_wait_event(b, (grt_event *)(uintptr_t)ev), GRT_OK);
  assert_int_equal(grt_stream_query(b), GRT_ERR_NOT_READY);
  assert_int_equal(grt_user_event_signal(gate, 1), GRT_OK);
  assert_int_equal(grt_stream_synchronize(b), GRT_OK);
  assert_int_equal(ops.event_query(ops.ctx, ev), 1);
  ops.event_synchronize(ops.ctx, ev); /* complete: returns at once */
  ops.event_destroy(ops.ctx, ev);
  assert_int_equal(grt_event_query((grt_event *)(uintptr_t)ev), GRT_ERR_INVALID_HANDLE);
  assert_int_equal(grt_user_event_destroy(gate), GRT_OK);
  assert_int_equal(grt_stream_destroy(a), GRT_OK);
  assert_int_equal(grt_stream_destroy(b), GRT_OK);
  assert_int_equal(grt_exec_destroy(exec), GRT_OK); /* no event of the ops is left alive */
}

typedef struct uev_wait_arg {
  grt_user_event *u;
  uint64_t v;
  grt_user_event *go; /* signalled first when not NULL */
  grt_status st;      /* what the wait returned (written by the host function, read after the sync) */
} uev_wait_arg;

static void host_wait(void *p) {
  uev_wait_arg *a = p;
  if (a->go && (a->st = grt_user_event_signal(a->go, 1))) return; /* reported like the wait's */
  a->st = grt_user_event_wait(a->u, a->v);
}

static void host_nothing(void *p) { (void)p; }

/* One host slot: a host function blocked on a user event holds it; the function that would let the signal
 * through waits for that slot. The cycle goes through the slot. */
static void test_host_slot_cycle(void **state) {
  grt_exec_config cfg;
  grt_exec_config_default(&cfg);
  cfg.clock = clock_of(state);
  cfg.host_slots = 1;
  grt_exec *exec = NULL;
  assert_int_equal(grt_exec_create(&cfg, &exec), GRT_OK);
  grt_stream *a = make_stream(exec, GRT_STREAM_NON_BLOCKING, "A");
  grt_stream *b = make_stream(exec, GRT_STREAM_NON_BLOCKING, "B");
  grt_user_event *u, *go;
  assert_int_equal(grt_user_event_create(exec, "u", &u), GRT_OK);
  assert_int_equal(grt_user_event_create(exec, "go", &go), GRT_OK);
  uev_wait_arg w = {u, 1, go, GRT_OK};
  assert_int_equal(grt_launch_host_func(a, host_wait, &w), GRT_OK);
  assert_int_equal(grt_stream_wait_user_event(b, go, 1), GRT_OK); /* A's function holds the slot by then */
  assert_int_equal(grt_launch_host_func(b, host_nothing, NULL), GRT_OK);
  assert_int_equal(grt_stream_signal_user_event(b, u, 1), GRT_OK);
  assert_int_equal(grt_exec_synchronize(exec), GRT_ERR_DEADLOCK);
  char msg[1024];
  assert_int_equal(grt_exec_get_error(exec, msg, sizeof msg), GRT_ERR_DEADLOCK);
  print_message("%s\n", msg);
  assert_non_null(strstr(msg, "cycle of 2"));
  assert_non_null(strstr(msg, "stream 'B' waits for a host-function slot held by stream 'A'"));
  assert_non_null(strstr(msg, "a host function on stream 'A' waits for user event 'u' >= 1"));
  assert_int_equal(w.st, GRT_ERR_DEADLOCK); /* the blocked function's wait returned */
  assert_int_equal(grt_user_event_destroy(u), GRT_OK);
  assert_int_equal(grt_user_event_destroy(go), GRT_OK);
  assert_int_equal(grt_stream_destroy(a), GRT_OK);
  assert_int_equal(grt_stream_destroy(b), GRT_OK);
  assert_int_equal(grt_exec_destroy(exec), GRT_OK);
}

/* The virtual clock's host stall, described for each kind of waiter. */
static void test_virtual_host_stall_kinds(void **state) {
  (void)state;
  /* the host itself waits, nothing pending */
  grt_exec *exec = make_exec(GRT_CLOCK_VIRTUAL, 0);
  grt_user_event *u;
  assert_int_equal(grt_user_event_create(exec, "alone", &u), GRT_OK);
  assert_int_equal(grt_user_event_wait(u, 1), GRT_ERR_DEADLOCK);
  char msg[600];
  assert_int_equal(grt_exec_get_error(exec, msg, sizeof msg), GRT_ERR_DEADLOCK);
  assert_non_null(strstr(msg, "the host thread driving the virtual clock waits"));
  assert_non_null(strstr(msg, "no work is pending: nothing will signal it"));
  assert_int_equal(grt_user_event_wait(u, 1), GRT_ERR_DEADLOCK); /* sticky */
  assert_int_equal(grt_user_event_destroy(u), GRT_OK);
  assert_int_equal(grt_exec_destroy(exec), GRT_OK);

  /* a host function waits for a value only the host would signal; the host synchronizes */
  exec = make_exec(GRT_CLOCK_VIRTUAL, 0);
  grt_stream *s = make_stream(exec, GRT_STREAM_NON_BLOCKING, "hs");
  assert_int_equal(grt_user_event_create(exec, "host-only", &u), GRT_OK);
  uev_wait_arg w = {u, 4, NULL, GRT_OK};
  assert_int_equal(grt_user_event_signal(u, 2), GRT_OK);
  assert_int_equal(grt_launch_host_func(s, host_wait, &w), GRT_OK);
  assert_int_equal(grt_stream_synchronize(s), GRT_ERR_DEADLOCK);
  assert_int_equal(grt_exec_get_error(exec, msg, sizeof msg), GRT_ERR_DEADLOCK);
  assert_non_null(strstr(msg, "a host function on stream 'hs' waits for user event 'host-only' >= 4"));
  assert_null(strstr(msg, "no work is pending"));
  assert_int_equal(w.st, GRT_ERR_DEADLOCK);
  assert_int_equal(grt_user_event_destroy(u), GRT_OK);
  assert_int_equal(grt_stream_destroy(s), GRT_OK);
  assert_int_equal(grt_exec_destroy(exec), GRT_OK);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      BOTH_CLOCKS(test_uev_cycle),
      BOTH_CLOCKS(test_uev_cycle3),
      BOTH_CLOCKS(test_host_fn_waits_later_work),
      BOTH_CLOCKS(test_host_fn_cross),
      BOTH_CLOCKS(test_plain_events_never_deadlock),
      BOTH_CLOCKS(test_host_signal_later_is_fine),
      cmocka_unit_test(test_virtual_host_stall),
      BOTH_CLOCKS(test_host_slot_cycle),
      cmocka_unit_test(test_virtual_host_stall_kinds),
      BOTH_CLOCKS(test_bad_input),
      BOTH_CLOCKS(test_stream_ops),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
