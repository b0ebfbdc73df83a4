/* test_exec_callback.c — grt_stream_add_callback (cudaStreamAddCallback)
 * under both clocks: FIFO order with the stream's other work and the exact
 * times on the virtual clock; the status it is told (GRT_OK, then the sticky
 * error: a callback still queued when the exec fails runs once with the error
 * where a host function is dropped); refused during capture
 * (GRT_ERR_CAPTURE_UNSUPPORTED, the capture invalidated) and on the legacy
 * stream while a blocking stream captures; no blocking in it; argument errors
 * change nothing. */
#include <string.h>

#include "test_exec_common.h"

/* What a callback saw, per call, in order. */
typedef struct seen {
  order_log *log;
  int id;
  _Atomic int calls;
  grt_status status;
  grt_stream *stream;
  grt_status inner; /* a call it made, where the test asks for one */
  grt_user_event *u;
  grt_stream *sync;
} seen;

static void record_cb(grt_stream *s, grt_status status, void *arg) {
  seen *w = arg;
  w->status = status;
  w->stream = s;
  if (w->u) w->inner = grt_user_event_wait(w->u, 1);
  else if (w->sync) w->inner = grt_stream_synchronize(w->sync);
  int i = atomic_fetch_add(&w->log->n, 1);
  if (i < 256) w->log->items[i] = w->id;
  atomic_fetch_add(&w->calls, 1);
}

static void host_fn(void *arg) { log_body(arg); }

static uint64_t now_of(grt_exec *exec) {
  uint64_t now;
  assert_int_equal(grt_exec_now_ns(exec, &now), GRT_OK);
  return now;
}

/* k0 (1000 ns), callback 1, k2 (500 ns) on s: FIFO, the callback told GRT_OK
 * and its stream; virtual: it runs at 1000 and k2 ends at 1500 exactly. */
static void test_callback_order(void **state) {
  grt_exec *exec = make_exec(clock_of(state), 1);
  grt_stream *s = make_stream(exec, GRT_STREAM_NON_BLOCKING, "s");
  order_log log = {0};
  log_arg a0 = {&log, 0}, a2 = {&log, 2};
  seen w = {&log, 1, 0, GRT_ERR_INTERNAL, NULL, GRT_OK, NULL, NULL};
  launch_logged(s, &a0, 1000);
  assert_int_equal(grt_stream_add_callback(s, record_cb, &w, 0), GRT_OK);
  launch_logged(s, &a2, 500);
  assert_int_equal(grt_stream_synchronize(s), GRT_OK);
  assert_int_equal(atomic_load(&w.calls), 1);
  assert_int_equal(w.status, GRT_OK);
  assert_ptr_equal(w.stream, s);
  assert_int_equal(atomic_load(&log.n), 3);
  for (int i = 0; i < 3; i++) assert_int_equal(log.items[i], i);
  if (clock_of(state) == GRT_CLOCK_VIRTUAL) assert_int_equal(now_of(exec), 1500);
  size_t n;
  assert_int_equal(grt_exec_timeline_count(exec, &n), GRT_OK);
  assert_int_equal(n, 3); /* the callback is an op of the timeline like the kernels */
  assert_int_equal(grt_stream_destroy(s), GRT_OK);
  assert_int_equal(grt_exec_destroy(exec), GRT_OK);
}

/* Bad arguments change nothing: nothing is queued. */
static void test_callback_errors(void **state) {
  grt_exec *exec = make_exec(clock_of(state), 0);
  grt_stream *s = make_stream(exec, GRT_STREAM_NON_BLOCKING, "s");
  order_log log = {0};
  seen w = {&log, 1, 0, GRT_ERR_INTERNAL, NULL, GRT_OK, NULL, NULL};
  assert_int_equal(grt_stream_add_callback(s, NULL, &w, 0), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt_stream_add_callback(s, record_cb, &w, 1), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt_stream_add_callback(NULL, record_cb, &w, 0), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt_stream_query(s), GRT_OK); /* nothing issued */
  assert_int_equal(grt_stream_destroy(s), GRT_OK);
  assert_int_equal(grt_stream_add_callback(s, record_cb, &w, 0), GRT_ERR_INVALID_HANDLE);
  assert_int_equal(grt_exec_synchronize(exec), GRT_OK);
  assert_int_equal(atomic_load(&w.calls), 0);
  assert_int_equal(grt_exec_destroy(exec), GRT_OK);
}

/* A callback may not block: a user-event wait and a synchronize in it are
 * refused (GRT_ERR_NOT_PERMITTED), and it still completes. */
static void test_callback_may_not_block(void **state) {
  grt_exec *exec = make_exec(clock_of(state), 0);
  grt_stream *s = make_stream(exec, GRT_STREAM_NON_BLOCKING, "s");
  grt_user_event *u;
  assert_int_equal(grt_user_event_create(exec, "u", &u), GRT_OK);
  order_log log = {0};
  seen wu = {&log, 1, 0, GRT_ERR_INTERNAL, NULL, GRT_ERR_INTERNAL, u, NULL};
  seen ws = {&log, 2, 0, GRT_ERR_INTERNAL, NULL, GRT_ERR_INTERNAL, NULL, s};
  assert_int_equal(grt_stream_add_callback(s, record_cb, &wu, 0), GRT_OK);
  assert_int_equal(grt_stream_add_callback(s, record_cb, &ws, 0), GRT_OK);
  assert_int_equal(grt_stream_synchronize(s), GRT_OK);
  assert_int_equal(wu.inner, GRT_ERR_NOT_PERMITTED);
  assert_int_equal(ws.inner, GRT_ERR_NOT_PERMITTED);
  assert_int_equal(atomic_load(&log.n), 2);
  assert_int_equal(grt_user_event_destroy(u), GRT_OK);
  assert_int_equal(grt_stream_destroy(s), GRT_OK);
  assert_int_equal(grt_exec_destroy(exec), GRT_OK);
}

/* The exec fails (a memset whose buffer was freed before it ran): the
 * callback before it is told GRT_OK; the one queued behind runs anyway, once,
 * told the error, and the host function behind it is dropped. A synchronize
 * that returns the error returns once those callbacks ran (threads) or runs
 * them (virtual). A callback added afterwards is refused with the error. */
static void test_callback_after_sticky_error(void **state) {
  grt_exec *exec = make_exec(clock_of(state), 0);
  grt_stream *s = make_stream(exec, GRT_STREAM_NON_BLOCKING, "s");
  grt_user_event *gate;
  assert_int_equal(grt_user_event_create(exec, "gate", &gate), GRT_OK);
  grt_devptr p;
  assert_int_equal(grt_exec_device_malloc(exec, 4096, &p), GRT_OK);
  order_log log = {0};
  seen before = {&log, 1, 0, GRT_ERR_INTERNAL, NULL, GRT_OK, NULL, NULL};
  seen after = {&log, 3, 0, GRT_ERR_INTERNAL, NULL, GRT_OK, NULL, NULL};
  log_arg hf = {&log, 4};
  assert_int_equal(grt_stream_add_callback(s, record_cb, &before, 0), GRT_OK);
  assert_int_equal(grt_stream_wait_user_event(s, gate, 1), GRT_OK);
  assert_int_equal(grt_memset_async(s, p, 0, 4096), GRT_OK);
  assert_int_equal(grt_stream_add_callback(s, record_cb, &after, 0), GRT_OK);
  assert_int_equal(grt_launch_host_func(s, host_fn, &hf), GRT_OK);
  assert_int_equal(grt_exec_device_free(exec, p), GRT_OK); /* the memset will find it gone */
  assert_int_equal(grt_user_event_signal(gate, 1), GRT_OK);
  grt_status err = grt_stream_synchronize(s);
  assert_int_not_equal(err, GRT_OK);
  assert_int_equal(grt_exec_get_error(exec, NULL, 0), err);
  assert_int_equal(atomic_load(&before.calls), 1);
  assert_int_equal(before.status, GRT_OK);
  assert_int_equal(atomic_load(&after.calls), 1);
  assert_int_equal(after.status, err);
  assert_ptr_equal(after.stream, s);
  assert_int_equal(atomic_load(&log.n), 2); /* 1 and 3; the host function never ran */
  assert_int_equal(log.items[0], 1);
  assert_int_equal(log.items[1], 3);
  assert_int_equal(grt_stream_add_callback(s, record_cb, &after, 0), err);
  assert_int_equal(grt_user_event_destroy(gate), GRT_OK);
  assert_int_equal(grt_stream_destroy(s), GRT_OK);
  assert_int_equal(grt_exec_destroy(exec), GRT_OK);
  assert_int_equal(atomic_load(&after.calls), 1); /* exactly once */
  assert_int_equal(atomic_load(&log.n), 2);
}

/* Virtual: a deadlock found by a query cancels the work; the callback runs in
 * grt_exec_destroy when no synchronizing call came (a query runs no body).
 * Virtual only: under threads a host worker runs it at once. */
static void test_callback_run_by_destroy(void **state) {
  (void)state;
  grt_exec *exec = make_exec(GRT_CLOCK_VIRTUAL, 0);
  grt_stream *a = make_stream(exec, GRT_STREAM_NON_BLOCKING, "a");
  grt_stream *b = make_stream(exec, GRT_STREAM_NON_BLOCKING, "b");
  grt_user_event *ua, *ub;
  assert_int_equal(grt_user_event_create(exec, "ua", &ua), GRT_OK);
  assert_int_equal(grt_user_event_create(exec, "ub", &ub), GRT_OK);
  order_log log = {0};
  seen w = {&log, 1, 0, GRT_ERR_INTERNAL, NULL, GRT_OK, NULL, NULL};
  /* a waits for ub, which only b signals after it waited for ua, which only a signals. */
  assert_int_equal(grt_stream_wait_user_event(a, ub, 1), GRT_OK);
  assert_int_equal(grt_stream_add_callback(a, record_cb, &w, 0), GRT_OK);
  assert_int_equal(grt_stream_signal_user_event(a, ua, 1), GRT_OK);
  assert_int_equal(grt_stream_wait_user_event(b, ua, 1), GRT_OK);
  assert_int_equal(grt_stream_signal_user_event(b, ub, 1), GRT_OK);
  assert_int_equal(grt_stream_query(a), GRT_ERR_DEADLOCK);
  assert_int_equal(atomic_load(&w.calls), 0);
  assert_int_equal(grt_stream_destroy(a), GRT_OK);
  assert_int_equal(grt_stream_destroy(b), GRT_OK);
  assert_int_equal(grt_user_event_destroy(ua), GRT_OK);
  assert_int_equal(grt_user_event_destroy(ub), GRT_OK);
  assert_int_equal(grt_exec_destroy(exec), GRT_OK);
  assert_int_equal(atomic_load(&w.calls), 1);
  assert_int_equal(w.status, GRT_ERR_DEADLOCK);
}

/* Not capturable: refused and the capture invalidated, where a host function
 * becomes a node; on the legacy stream while a blocking stream captures it
 * is an implicit dependency like any legacy use. */
static void test_callback_capture(void **state) {
  grt_exec *exec = make_exec(clock_of(state), 0);
  grt_stream *s = make_stream(exec, GRT_STREAM_DEFAULT, "s");
  grt_stream *leg;
  assert_int_equal(grt_exec_legacy_stream(exec, &leg), GRT_OK);
  order_log log = {0};
  log_arg hf = {&log, 0};
  seen w = {&log, 1, 0, GRT_ERR_INTERNAL, NULL, GRT_OK, NULL, NULL};
  grt_graph *g = NULL;
  for (int legacy = 0; legacy < 2; legacy++) {
    assert_int_equal(grt_stream_begin_capture(s, GRT_CAPTURE_RELAXED), GRT_OK);
    assert_int_equal(grt_launch_host_func(s, host_fn, &hf), GRT_OK); /* a node */
    grt_capture_status cs;
    assert_int_equal(grt_stream_capture_status(s, &cs), GRT_OK);
    assert_int_equal(cs, GRT_CAPTURE_STATUS_ACTIVE);
    assert_int_equal(grt_stream_add_callback(legacy ? leg : s, record_cb, &w, 0),
                     legacy ? GRT_ERR_CAPTURE_IMPLICIT : GRT_ERR_CAPTURE_UNSUPPORTED);
    assert_int_equal(grt_stream_capture_status(s, &cs), GRT_OK);
    assert_int_equal(cs, GRT_CAPTURE_STATUS_INVALIDATED);
    assert_int_equal(grt_stream_end_capture(s, &g), GRT_ERR_CAPTURE_INVALIDATED);
    assert_null(g);
  }
  assert_int_equal(grt_exec_synchronize(exec), GRT_OK);
  assert_int_equal(atomic_load(&w.calls), 0);
  assert_int_equal(atomic_load(&log.n), 0);
  assert_int_equal(grt_stream_destroy(s), GRT_OK);
  assert_int_equal(grt_exec_destroy(exec), GRT_OK);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      BOTH_CLOCKS(test_callback_order),
      BOTH_CLOCKS(test_callback_errors),
      BOTH_CLOCKS(test_callback_may_not_block),
      BOTH_CLOCKS(test_callback_after_sticky_error),
      cmocka_unit_test(test_callback_run_by_destroy),
      BOTH_CLOCKS(test_callback_capture),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
