/* test_exec_basic.c — stream/event semantics under both clocks.
 * No timing assertions: where an order must hold regardless of speed, a user
 * event gates the work so the outcome is the same under threads and virtual. */
#include <string.h>

#include "test_exec_common.h"

static void test_fifo_order(void **state) {
  grt_exec *exec = make_exec(clock_of(state), 0);
  grt_stream *s = make_stream(exec, GRT_STREAM_NON_BLOCKING, "fifo");
  order_log log = {0};
  log_arg a[20];
  for (int i = 0; i < 20; i++) {
    a[i] = (log_arg){&log, i};
    launch_logged(s, &a[i], (uint64_t)(i % 3) * 1000);
  }
  assert_int_equal(grt_stream_synchronize(s), GRT_OK);
  assert_int_equal(grt_stream_query(s), GRT_OK);
  assert_int_equal(atomic_load(&log.n), 20);
  for (int i = 0; i < 20; i++) assert_int_equal(log.items[i], i);
  assert_int_equal(grt_stream_destroy(s), GRT_OK);
  assert_int_equal(grt_exec_destroy(exec), GRT_OK);
}

/* Never recorded = complete; a wait binds to the snapshot at call time. */
static void test_event_snapshot(void **state) {
  grt_exec *exec = make_exec(clock_of(state), 0);
  grt_stream *s1 = make_stream(exec, GRT_STREAM_NON_BLOCKING, "s1");
  grt_stream *s2 = make_stream(exec, GRT_STREAM_NON_BLOCKING, "s2");
  grt_event *e;
  grt_user_event *gate;
  assert_int_equal(grt_event_create(exec, 0, &e), GRT_OK);
  assert_int_equal(grt_user_event_create(exec, "gate", &gate), GRT_OK);
  assert_int_equal(grt_event_query(e), GRT_OK);
  assert_int_equal(grt_event_synchronize(e), GRT_OK);
  assert_int_equal(grt_stream_wait_event(s2, e), GRT_OK); /* no-op */

  order_log log = {0};
  log_arg a1 = {&log, 1}, a2 = {&log, 2}, a3 = {&log, 3};
  launch_logged(s1, &a1, 1000);
  assert_int_equal(grt_event_record(e, s1), GRT_OK); /* snapshot: {k1} */
  assert_int_equal(grt_stream_wait_user_event(s1, gate, 1), GRT_OK);
  launch_logged(s1, &a2, 0);
  assert_int_equal(grt_stream_wait_event(s2, e), GRT_OK); /* binds to {k1} */
  assert_int_equal(grt_event_record(e, s1), GRT_OK);      /* re-record: {k1, gate, k2} */
  launch_logged(s2, &a3, 0);
  /* s2 finishes although k2 is still gated: the wait did not follow the re-record. */
  assert_int_equal(grt_stream_synchronize(s2), GRT_OK);
  assert_int_equal(grt_event_query(e), GRT_ERR_NOT_READY);
  assert_int_equal(log_pos(&log, 2), -1);
  assert_true(log_pos(&log, 1) < log_pos(&log, 3));
  assert_int_equal(grt_user_event_signal(gate, 1), GRT_OK);
  assert_int_equal(grt_event_synchronize(e), GRT_OK);
  assert_int_equal(log_pos(&log, 2), 2);
  assert_int_equal(grt_exec_synchronize(exec), GRT_OK);
  assert_int_equal(grt_event_destroy(e), GRT_OK);
  assert_int_equal(grt_user_event_destroy(gate), GRT_OK);
  assert_int_equal(grt_stream_destroy(s1), GRT_OK);
  assert_int_equal(grt_stream_destroy(s2), GRT_OK);
  assert_int_equal(grt_exec_destroy(exec), GRT_OK);
}

/* k1 on s, k2 on legacy, k3 on s: k2 waits for k1, k3 waits for k2;
 * a non-blocking stream is not held up by the legacy stream. */
static void test_legacy_stream(void **state) {
  grt_exec *exec = make_exec(clock_of(state), 0);
  grt_stream *s = make_stream(exec, GRT_STREAM_DEFAULT, "blocking");
  grt_stream *nb = make_stream(exec, GRT_STREAM_NON_BLOCKING, "nonblocking");
  grt_stream *leg;
  grt_user_event *gate, *gate2;
  assert_int_equal(grt_exec_legacy_stream(exec, &leg), GRT_OK);
  grt_stream_id id = 99;
  assert_int_equal(grt_stream_get_id(leg, &id), GRT_OK);
  assert_int_equal(id, 0);
  assert_int_equal(grt_user_event_create(exec, "gate", &gate), GRT_OK);
  assert_int_equal(grt_user_event_create(exec, "gate2", &gate2), GRT_OK);
  order_log log = {0};
  log_arg a[7];
  for (int i = 0; i < 7; i++) a[i] = (log_arg){&log, i};
  assert_int_equal(grt_stream_wait_user_event(s, gate, 1), GRT_OK);
  launch_logged(s, &a[1], 500);
  launch_logged(leg, &a[2], 0);
  launch_logged(s, &a[3], 0);
  launch_logged(nb, &a[4], 0); /* not ordered after the legacy work */
  assert_int_equal(grt_stream_synchronize(nb), GRT_OK);
  assert_int_equal(log_pos(&log, 2), -1);
  assert_int_equal(grt_stream_query(leg), GRT_ERR_NOT_READY);
  assert_int_equal(grt_user_event_signal(gate, 1), GRT_OK);
  assert_int_equal(grt_stream_synchronize(s), GRT_OK);
  assert_true(log_pos(&log, 1) < log_pos(&log, 2));
  assert_true(log_pos(&log, 2) < log_pos(&log, 3));
  /* The legacy stream does not wait for non-blocking streams. */
  assert_int_equal(grt_stream_wait_user_event(nb, gate2, 1), GRT_OK);
  launch_logged(nb, &a[5], 0);
  launch_logged(leg, &a[6], 0);
  assert_int_equal(grt_stream_synchronize(leg), GRT_OK);
  assert_int_equal(log_pos(&log, 5), -1);
  assert_int_equal(grt_user_event_signal(gate2, 1), GRT_OK);
  assert_int_equal(grt_exec_synchronize(exec), GRT_OK);
  assert_int_equal(atomic_load(&log.n), 6);
  assert_int_equal(grt_stream_destroy(leg), GRT_ERR_NOT_PERMITTED);
  assert_int_equal(grt_user_event_destroy(gate), GRT_OK);
  assert_int_equal(grt_user_event_destroy(gate2), GRT_OK);
  assert_int_equal(grt_stream_destroy(s), GRT_OK);
  assert_int_equal(grt_stream_destroy(nb), GRT_OK);
  assert_int_equal(grt_exec_destroy(exec), GRT_OK);
}

/* The per-thread default stream does not synchronize with other streams but is
 * blocking with respect to the legacy stream. */
static void test_per_thread_stream(void **state) {
  grt_exec *exec = make_exec(clock_of(state), 0);
  grt_stream *pt, *pt2, *leg;
  grt_stream *s = make_stream(exec, GRT_STREAM_DEFAULT, "blocking");
  assert_int_equal(grt_exec_per_thread_stream(exec, &pt), GRT_OK);
  assert_int_equal(grt_exec_per_thread_stream(exec, &pt2), GRT_OK);
  assert_ptr_equal(pt, pt2);
  assert_int_equal(grt_exec_legacy_stream(exec, &leg), GRT_OK);
  grt_user_event *gate;
  assert_int_equal(grt_user_event_create(exec, "gate", &gate), GRT_OK);
  order_log log = {0};
  log_arg a1 = {&log, 1}, a2 = {&log, 2}, a3 = {&log, 3};
  assert_int_equal(grt_stream_wait_user_event(pt, gate, 1), GRT_OK);
  launch_logged(pt, &a1, 0);
  launch_logged(s, &a2, 0);
  assert_int_equal(grt_stream_synchronize(s), GRT_OK);
  launch_logged(leg, &a3, 0);
  assert_int_equal(grt_stream_query(leg), GRT_ERR_NOT_READY);
  assert_int_equal(grt_user_event_signal(gate, 1), GRT_OK);
  assert_int_equal(grt_stream_synchronize(leg), GRT_OK);
  assert_true(log_pos(&log, 1) < log_pos(&log, 3));
  assert_int_equal(grt_stream_destroy(pt), GRT_ERR_NOT_PERMITTED);
  assert_int_equal(grt_user_event_destroy(gate), GRT_OK);
  assert_int_equal(grt_stream_destroy(s), GRT_OK);
  assert_int_equal(grt_exec_destroy(exec), GRT_OK);
}

static void test_event_timing(void **state) {
  grt_clock_kind clock = clock_of(state);
  grt_exec *exec = make_exec(clock, 0);
  grt_stream *s = make_stream(exec, GRT_STREAM_NON_BLOCKING, "t");
  grt_event *a, *b, *never, *notime;
  assert_int_equal(grt_event_create(exec, 0, &a), GRT_OK);
  assert_int_equal(grt_event_create(exec, GRT_EVENT_BLOCKING_SYNC, &b), GRT_OK);
  assert_int_equal(grt_event_create(exec, 0, &never), GRT_OK);
  assert_int_equal(grt_event_create(exec, GRT_EVENT_DISABLE_TIMING, &notime), GRT_OK);
  grt_user_event *gate;
  assert_int_equal(grt_user_event_create(exec, "gate", &gate), GRT_OK);
  grt_kernel_desc k = {NULL, NULL, 250000, GRT_ENGINE_COMPUTE, "delay"};
  assert_int_equal(grt_event_record(a, s), GRT_OK);
  assert_int_equal(grt_launch_kernel(s, &k), GRT_OK);
  assert_int_equal(grt_event_record(b, s), GRT_OK);
  assert_int_equal(grt_event_record(notime, s), GRT_OK);
  assert_int_equal(grt_event_synchronize(b), GRT_OK);
  float ms = -1;
  int64_t ns = -1;
  assert_int_equal(grt_event_elapsed_time(a, b, &ms), GRT_OK);
  assert_int_equal(grt_event_elapsed_ns(a, b, &ns), GRT_OK);
  assert_true(ns >= 0 && ms >= 0);
  if (clock == GRT_CLOCK_VIRTUAL) assert_int_equal(ns, 250000); /* virtual time is exact, not a timing */
  assert_int_equal(grt_event_elapsed_ns(a, never, &ns), GRT_ERR_INVALID_HANDLE);
  assert_int_equal(grt_event_elapsed_ns(a, notime, &ns), GRT_ERR_INVALID_HANDLE);
  assert_int_equal(grt_stream_wait_user_event(s, gate, 1), GRT_OK);
  assert_int_equal(grt_event_record(b, s), GRT_OK);
  assert_int_equal(grt_event_elapsed_ns(a, b, &ns), GRT_ERR_NOT_READY);
  assert_int_equal(grt_event_query(b), GRT_ERR_NOT_READY);
  assert_int_equal(grt_user_event_signal(gate, 1), GRT_OK);
  assert_int_equal(grt_event_synchronize(b), GRT_OK);
  assert_int_equal(grt_event_elapsed_ns(a, b, &ns), GRT_OK);
  assert_int_equal(grt_event_destroy(a), GRT_OK);
  assert_int_equal(grt_event_destroy(b), GRT_OK);
  assert_int_equal(grt_event_destroy(never), GRT_OK);
  assert_int_equal(grt_event_destroy(notime), GRT_OK);
  assert_int_equal(grt_user_event_destroy(gate), GRT_OK);
  assert_int_equal(grt_stream_destroy(s), GRT_OK);
  assert_int_equal(grt_exec_destroy(exec), GRT_OK);
}

/* cudaEventElapsedTime uses each event's most recent record. A re-recorded
 * start counts from its new record; a re-recorded end is complete once its
 * new record is, however long its earlier record stays queued, and that
 * earlier record, completing later, does not stamp the event again. */
static void test_event_rerecord_timing(void **state) {
  grt_clock_kind clock = clock_of(state);
  grt_exec *exec = make_exec(clock, 0);
  grt_stream *gated = make_stream(exec, GRT_STREAM_NON_BLOCKING, "gated");
  grt_stream *s = make_stream(exec, GRT_STREAM_NON_BLOCKING, "s");
  grt_event *a, *b;
  assert_int_equal(grt_event_create(exec, 0, &a), GRT_OK);
  assert_int_equal(grt_event_create(exec, 0, &b), GRT_OK);
  grt_user_event *gate;
  assert_int_equal(grt_user_event_create(exec, "gate", &gate), GRT_OK);
  grt_kernel_desc k100 = {NULL, NULL, 100000, GRT_ENGINE_COMPUTE, "k100"};
  grt_kernel_desc k300 = {NULL, NULL, 300000, GRT_ENGINE_COMPUTE, "k300"};
  grt_kernel_desc k500 = {NULL, NULL, 500000, GRT_ENGINE_COMPUTE, "k500"};
  int64_t ns = -1, again = -1;
  /* start re-recorded: a, 100 us, a again, 300 us, b */
  assert_int_equal(grt_event_record(a, s), GRT_OK);
  assert_int_equal(grt_launch_kernel(s, &k100), GRT_OK);
  assert_int_equal(grt_event_record(a, s), GRT_OK);
  assert_int_equal(grt_launch_kernel(s, &k300), GRT_OK);
  assert_int_equal(grt_event_record(b, s), GRT_OK);
  assert_int_equal(grt_event_synchronize(b), GRT_OK);
  assert_int_equal(grt_event_elapsed_ns(a, b, &ns), GRT_OK);
  if (clock == GRT_CLOCK_VIRTUAL) assert_int_equal(ns, 300000);
  /* end re-recorded: b first behind a gate and 500 us, then on s after 100 us */
  assert_int_equal(grt_stream_wait_user_event(gated, gate, 1), GRT_OK);
  assert_int_equal(grt_launch_kernel(gated, &k500), GRT_OK);
  assert_int_equal(grt_event_record(b, gated), GRT_OK);
  assert_int_equal(grt_event_record(a, s), GRT_OK);
  assert_int_equal(grt_launch_kernel(s, &k100), GRT_OK);
  assert_int_equal(grt_event_record(b, s), GRT_OK);
  assert_int_equal(grt_stream_synchronize(s), GRT_OK);
  assert_int_equal(grt_event_query(b), GRT_OK); /* the gated record no longer counts */
  assert_int_equal(grt_event_elapsed_ns(a, b, &ns), GRT_OK);
  if (clock == GRT_CLOCK_VIRTUAL) assert_int_equal(ns, 100000);
  assert_int_equal(grt_user_event_signal(gate, 1), GRT_OK);
  assert_int_equal(grt_exec_synchronize(exec), GRT_OK); /* the stale record completes now */
  assert_int_equal(grt_event_elapsed_ns(a, b, &again), GRT_OK);
  assert_int_equal(again, ns); /* the same measurement, not a new stamp */
  assert_int_equal(grt_event_destroy(a), GRT_OK);
  assert_int_equal(grt_event_destroy(b), GRT_OK);
  assert_int_equal(grt_user_event_destroy(gate), GRT_OK);
  assert_int_equal(grt_stream_destroy(gated), GRT_OK);
  assert_int_equal(grt_stream_destroy(s), GRT_OK);
  assert_int_equal(grt_exec_destroy(exec), GRT_OK);
}

typedef struct xform_arg {
  grt_device *dev;
  grt_devptr src, dst;
  uint64_t n;
} xform_arg;

static void xform_body(void *p) {
  xform_arg *x = p;
  unsigned char *in, *out;
  assert_int_equal(grt_device_host_ptr(x->dev, x->src, x->n, (void **)&in), GRT_OK);
  assert_int_equal(grt_device_host_ptr(x->dev, x->dst, x->n, (void **)&out), GRT_OK);
  for (uint64_t i = 0; i < x->n; i++) out[i] = (unsigned char)(in[i] * 3 + 1);
}

/* Copies, memset and a kernel on device buffers that hold real bytes. */
static void test_memory_ops(void **state) {
  grt_exec *exec = make_exec(clock_of(state), 0);
  grt_device *dev;
  assert_int_equal(grt_exec_get_device(exec, &dev), GRT_OK);
  grt_stream *s = make_stream(exec, GRT_STREAM_NON_BLOCKING, "mem");
  enum { N = 4096 };
  static unsigned char in[N], out[N], zeros[N];
  for (int i = 0; i < N; i++) in[i] = (unsigned char)(i * 7);
  grt_devptr a, b, c;
  assert_int_equal(grt_device_malloc(dev, N, &a), GRT_OK);
  assert_int_equal(grt_device_malloc(dev, N, &b), GRT_OK);
  assert_int_equal(grt_device_malloc(dev, N, &c), GRT_OK);
  xform_arg x = {dev, a, b, N};
  grt_kernel_desc k = {xform_body, &x, 1000, GRT_ENGINE_COMPUTE, "xform"};
  assert_int_equal(grt_memcpy_h2d_async(s, a, in, N), GRT_OK);
  assert_int_equal(grt_launch_kernel(s, &k), GRT_OK);
  assert_int_equal(grt_memcpy_d2d_async(s, c, b, N), GRT_OK);
  assert_int_equal(grt_memset_async(s, b, 0, N), GRT_OK);
  assert_int_equal(grt_memcpy_d2h_async(s, out, c, N), GRT_OK);
  assert_int_equal(grt_stream_synchronize(s), GRT_OK);
  for (int i = 0; i < N; i++) assert_int_equal(out[i], (unsigned char)(in[i] * 3 + 1));
  assert_int_equal(grt_memcpy_d2h_async(s, out, b, N), GRT_OK);
  assert_int_equal(grt_stream_synchronize(s), GRT_OK);
  assert_memory_equal(out, zeros, N);
  /* Bad ranges are refused when issued. */
  assert_int_equal(grt_memcpy_h2d_async(s, c + N - 8, in, 64), GRT_ERR_UNKNOWN_POINTER);
  assert_int_equal(grt_memset_async(s, 12345, 0, 1), GRT_ERR_UNKNOWN_POINTER);
  assert_int_equal(grt_memcpy_h2d_async(s, a, NULL, 1), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt_memcpy_h2d_async(s, a, in, 0), GRT_OK);
  assert_int_equal(grt_device_free(dev, a), GRT_OK);
  assert_int_equal(grt_device_free(dev, b), GRT_OK);
  assert_int_equal(grt_device_free(dev, c), GRT_OK);
  assert_int_equal(grt_stream_destroy(s), GRT_OK);
  assert_int_equal(grt_exec_destroy(exec), GRT_OK);
}

typedef struct hf_arg {
  grt_stream *s;
  grt_exec *exec;
  grt_event *ev;
  grt_status sync_st, dev_st, ev_st;
  int ran;
} hf_arg;

static void host_fn_blocking(void *p) {
  hf_arg *h = p;
  h->sync_st = grt_stream_synchronize(h->s);
  h->dev_st = grt_exec_synchronize(h->exec);
  h->ev_st = grt_event_synchronize(h->ev);
  h->ran++;
}

/* Blocking calls inside host functions are refused, not deadlocked. */
static void test_host_func_not_permitted(void **state) {
  grt_exec *exec = make_exec(clock_of(state), 0);
  grt_stream *s = make_stream(exec, GRT_STREAM_NON_BLOCKING, "hf");
  grt_event *ev;
  assert_int_equal(grt_event_create(exec, 0, &ev), GRT_OK);
  assert_int_equal(grt_event_record(ev, s), GRT_OK);
  hf_arg h = {s, exec, ev, GRT_OK, GRT_OK, GRT_OK, 0};
  assert_int_equal(grt_launch_host_func(s, host_fn_blocking, &h), GRT_OK);
  assert_int_equal(grt_stream_synchronize(s), GRT_OK);
  assert_int_equal(h.ran, 1);
  assert_int_equal(h.sync_st, GRT_ERR_NOT_PERMITTED);
  assert_int_equal(h.dev_st, GRT_ERR_NOT_PERMITTED);
  assert_int_equal(h.ev_st, GRT_ERR_NOT_PERMITTED);
  assert_int_equal(grt_exec_get_error(exec, NULL, 0), GRT_OK);
  assert_int_equal(grt_event_destroy(ev), GRT_OK);
  assert_int_equal(grt_stream_destroy(s), GRT_OK);
  assert_int_equal(grt_exec_destroy(exec), GRT_OK);
}

/* Kernel bodies too, whichever thread runs them: a worker, a worker that
 * started them on another engine at a completion, or a host thread running
 * ready work while it waits in a synchronize call (sched_threads.c). */
static void test_kernel_body_not_permitted(void **state) {
  grt_exec *exec = make_exec(clock_of(state), 0);
  grt_stream *a = make_stream(exec, GRT_STREAM_NON_BLOCKING, "a");
  grt_stream *b = make_stream(exec, GRT_STREAM_NON_BLOCKING, "b");
  grt_event *ev;
  assert_int_equal(grt_event_create(exec, 0, &ev), GRT_OK);
  hf_arg h[3];
  for (int i = 0; i < 3; i++) h[i] = (hf_arg){i == 2 ? b : a, exec, ev, GRT_OK, GRT_OK, GRT_OK, 0};
  grt_kernel_desc same = {host_fn_blocking, &h[0], 0, GRT_ENGINE_COMPUTE, "zero-length"};
  grt_kernel_desc timed = {host_fn_blocking, &h[1], 2000, GRT_ENGINE_COMPUTE, "timed"};
  grt_kernel_desc other = {host_fn_blocking, &h[2], 0, GRT_ENGINE_COPY_D2H, "other engine"};
  assert_int_equal(grt_launch_kernel(a, &same), GRT_OK);
  assert_int_equal(grt_stream_synchronize(a), GRT_OK); /* ready at once: the waiting thread may run it */
  assert_int_equal(grt_launch_kernel(a, &timed), GRT_OK);
  assert_int_equal(grt_event_record(ev, a), GRT_OK);
  assert_int_equal(grt_stream_wait_event(b, ev), GRT_OK);
  assert_int_equal(grt_launch_kernel(b, &other), GRT_OK); /* made ready by the timed kernel's completion */
  assert_int_equal(grt_exec_synchronize(exec), GRT_OK);
  for (int i = 0; i < 3; i++) {
    assert_int_equal(h[i].ran, 1);
    assert_int_equal(h[i].sync_st, GRT_ERR_NOT_PERMITTED);
    assert_int_equal(h[i].dev_st, GRT_ERR_NOT_PERMITTED);
    assert_int_equal(h[i].ev_st, GRT_ERR_NOT_PERMITTED);
  }
  assert_int_equal(grt_exec_get_error(exec, NULL, 0), GRT_OK);
  assert_int_equal(grt_event_destroy(ev), GRT_OK);
  assert_int_equal(grt_stream_destroy(a), GRT_OK);
  assert_int_equal(grt_stream_destroy(b), GRT_OK);
  assert_int_equal(grt_exec_destroy(exec), GRT_OK);
}

static void count_body(void *p) { atomic_fetch_add((_Atomic int *)p, 1); }

/* Destroying a stream with pending work returns at once; the work completes. */
static void test_destroy_with_pending_work(void **state) {
  grt_exec *exec = make_exec(clock_of(state), 0);
  grt_stream *s = make_stream(exec, GRT_STREAM_NON_BLOCKING, "doomed");
  grt_user_event *gate;
  grt_event *done;
  assert_int_equal(grt_user_event_create(exec, "gate", &gate), GRT_OK);
  assert_int_equal(grt_event_create(exec, 0, &done), GRT_OK);
  _Atomic int count = 0;
  grt_kernel_desc k = {count_body, &count, 100, GRT_ENGINE_COMPUTE, NULL};
  assert_int_equal(grt_stream_wait_user_event(s, gate, 1), GRT_OK);
  for (int i = 0; i < 5; i++) assert_int_equal(grt_launch_kernel(s, &k), GRT_OK);
  assert_int_equal(grt_event_record(done, s), GRT_OK);
  assert_int_equal(grt_stream_destroy(s), GRT_OK);
  assert_int_equal(grt_stream_query(s), GRT_ERR_INVALID_HANDLE);
  assert_int_equal(grt_launch_kernel(s, &k), GRT_ERR_INVALID_HANDLE);
  assert_int_equal(grt_stream_destroy(s), GRT_ERR_INVALID_HANDLE);
  assert_int_equal(grt_user_event_destroy(gate), GRT_ERR_BUSY); /* a wait is queued on it */
  assert_int_equal(grt_user_event_signal(gate, 1), GRT_OK);
  assert_int_equal(grt_event_synchronize(done), GRT_OK);
  assert_int_equal(atomic_load(&count), 5);
  assert_int_equal(grt_exec_synchronize(exec), GRT_OK);
  assert_int_equal(grt_user_event_destroy(gate), GRT_OK);
  assert_int_equal(grt_event_destroy(done), GRT_OK);
  assert_int_equal(grt_exec_destroy(exec), GRT_OK);
}

/* Priority picks which ready compute op starts next (one compute slot). */
static void test_priority(void **state) {
  grt_exec_config cfg;
  grt_exec_config_default(&cfg);
  cfg.clock = clock_of(state);
  cfg.compute_slots = 1;
  cfg.device_capacity = GRT_MiB;
  grt_exec *exec;
  assert_int_equal(grt_exec_create(&cfg, &exec), GRT_OK);
  int least, greatest;
  assert_int_equal(grt_exec_stream_priority_range(exec, &least, &greatest), GRT_OK);
  grt_stream *lo, *hi, *gate_s;
  assert_int_equal(grt_stream_create(exec, GRT_STREAM_NON_BLOCKING, least, &lo), GRT_OK);
  assert_int_equal(grt_stream_create(exec, GRT_STREAM_NON_BLOCKING, greatest - 10, &hi), GRT_OK);
  assert_int_equal(grt_stream_create(exec, GRT_STREAM_NON_BLOCKING, 0, &gate_s), GRT_OK);
  int p;
  assert_int_equal(grt_stream_get_priority(hi, &p), GRT_OK);
  assert_int_equal(p, greatest); /* clamped */
  grt_user_event *gate;
  grt_event *opened;
  assert_int_equal(grt_user_event_create(exec, "gate", &gate), GRT_OK);
  assert_int_equal(grt_event_create(exec, 0, &opened), GRT_OK);
  assert_int_equal(grt_stream_wait_user_event(gate_s, gate, 1), GRT_OK);
  assert_int_equal(grt_event_record(opened, gate_s), GRT_OK);
  order_log log = {0};
  log_arg a_lo = {&log, 1}, a_hi = {&log, 2};
  assert_int_equal(grt_stream_wait_event(lo, opened), GRT_OK);
  assert_int_equal(grt_stream_wait_event(hi, opened), GRT_OK);
  launch_logged(lo, &a_lo, 1000);
  launch_logged(hi, &a_hi, 1000);
  assert_int_equal(grt_user_event_signal(gate, 1), GRT_OK); /* both become ready at once */
  assert_int_equal(grt_exec_synchronize(exec), GRT_OK);
  assert_int_equal(log.items[0], 2);
  assert_int_equal(log.items[1], 1);
  assert_int_equal(grt_user_event_destroy(gate), GRT_OK);
  assert_int_equal(grt_event_destroy(opened), GRT_OK);
  assert_int_equal(grt_stream_destroy(lo), GRT_OK);
  assert_int_equal(grt_stream_destroy(hi), GRT_OK);
  assert_int_equal(grt_stream_destroy(gate_s), GRT_OK);
  assert_int_equal(grt_exec_destroy(exec), GRT_OK);
}

/* Plain events "in a cycle" never deadlock; host functions run in order. */
static void test_event_cycle_no_deadlock(void **state) {
  grt_exec *exec = make_exec(clock_of(state), 0);
  grt_stream *a = make_stream(exec, GRT_STREAM_NON_BLOCKING, "A");
  grt_stream *b = make_stream(exec, GRT_STREAM_NON_BLOCKING, "B");
  grt_event *ea, *eb;
  assert_int_equal(grt_event_create(exec, 0, &ea), GRT_OK);
  assert_int_equal(grt_event_create(exec, 0, &eb), GRT_OK);
  _Atomic int count = 0;
  grt_kernel_desc k = {count_body, &count, 2000, GRT_ENGINE_COMPUTE, NULL};
  /* A waits on eB before eB is recorded: never recorded = done. */
  assert_int_equal(grt_stream_wait_event(a, eb), GRT_OK);
  assert_int_equal(grt_launch_kernel(a, &k), GRT_OK);
  assert_int_equal(grt_event_record(ea, a), GRT_OK);
  assert_int_equal(grt_stream_wait_event(b, ea), GRT_OK);
  assert_int_equal(grt_launch_kernel(b, &k), GRT_OK);
  assert_int_equal(grt_event_record(eb, b), GRT_OK);
  assert_int_equal(grt_stream_wait_event(a, eb), GRT_OK);
  assert_int_equal(grt_launch_host_func(a, count_body, &count), GRT_OK);
  assert_int_equal(grt_event_record(ea, a), GRT_OK);
  assert_int_equal(grt_stream_wait_event(b, ea), GRT_OK);
  assert_int_equal(grt_launch_kernel(b, &k), GRT_OK);
  assert_int_equal(grt_exec_synchronize(exec), GRT_OK);
  assert_int_equal(atomic_load(&count), 4);
  assert_int_equal(grt_event_destroy(ea), GRT_OK);
  assert_int_equal(grt_event_destroy(eb), GRT_OK);
  assert_int_equal(grt_stream_destroy(a), GRT_OK);
  assert_int_equal(grt_stream_destroy(b), GRT_OK);
  assert_int_equal(grt_exec_destroy(exec), GRT_OK);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      BOTH_CLOCKS(test_fifo_order),
      BOTH_CLOCKS(test_event_snapshot),
      BOTH_CLOCKS(test_legacy_stream),
      BOTH_CLOCKS(test_per_thread_stream),
      BOTH_CLOCKS(test_event_timing),
      BOTH_CLOCKS(test_event_rerecord_timing),
      BOTH_CLOCKS(test_memory_ops),
      BOTH_CLOCKS(test_host_func_not_permitted),
      BOTH_CLOCKS(test_kernel_body_not_permitted),
      BOTH_CLOCKS(test_destroy_with_pending_work),
      BOTH_CLOCKS(test_priority),
      BOTH_CLOCKS(test_event_cycle_no_deadlock),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
