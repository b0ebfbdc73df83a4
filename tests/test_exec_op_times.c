/* test_exec_op_times.c — per-op timestamps (grt_exec_op_times): exact
 * figures under the virtual clock; under threads only start <= end, the
 * modelled durations as lower bounds and the orders the semantics fix. Ops
 * held behind a gate read NOT_READY on both clocks; retention, eviction and
 * bad input are clock-independent. Every wait is bounded by
 * cfg.wait_timeout_ns and a watchdog (alarm). */
#include <string.h>
#include <unistd.h>

#include "test_exec_common.h"

#define WATCHDOG_S 30

static grt_exec *make(grt_clock_kind clock, uint32_t keep) {
  alarm(WATCHDOG_S); /* the default action ends the process: a hang fails the test */
  grt_exec_config cfg;
  grt_exec_config_default(&cfg);
  cfg.clock = clock;
  cfg.device_capacity = 16 * GRT_MiB;
  cfg.wait_timeout_ns = 10ull * 1000000000ull;
  cfg.op_times_keep = keep;
  grt_exec *exec = NULL;
  assert_int_equal(grt_exec_create(&cfg, &exec), GRT_OK);
  return exec;
}

static void done(grt_exec *exec) {
  assert_int_equal(grt_exec_destroy(exec), GRT_OK);
  alarm(0);
}

static void nop(void *p) { (void)p; }

typedef struct span {
  uint64_t start, end;
} span;

static span times_of(grt_exec *exec, grt_op_id id) {
  span t = {0, 0};
  assert_int_equal(grt_exec_op_times(exec, id, &t.start, &t.end), GRT_OK);
  assert_true(t.start <= t.end);
  return t;
}

static grt_op_id kernel(grt_stream *s, uint64_t ns) {
  grt_kernel_desc k = {NULL, NULL, ns, GRT_ENGINE_COMPUTE, NULL};
  grt_op_id id = 0;
  assert_int_equal(grt_launch_kernel_ex(s, &k, &id), GRT_OK);
  assert_true(id != 0);
  return id;
}

/* A graph of two kernels in sequence, 300 then 200 ns, captured on c. */
static grt_graph_exec *two_kernel_graph(grt_stream *c) {
  assert_int_equal(grt_stream_begin_capture(c, GRT_CAPTURE_RELAXED), GRT_OK);
  grt_kernel_desc k1 = {NULL, NULL, 300, GRT_ENGINE_COMPUTE, "n1"};
  grt_kernel_desc k2 = {NULL, NULL, 200, GRT_ENGINE_COMPUTE, "n2"};
  grt_op_id id = 99;
  assert_int_equal(grt_launch_kernel_ex(c, &k1, &id), GRT_OK);
  assert_int_equal(id, 0); /* a captured op does not run: no id */
  assert_int_equal(grt_launch_kernel(c, &k2), GRT_OK);
  grt_graph *g = NULL;
  assert_int_equal(grt_stream_end_capture(c, &g), GRT_OK);
  grt_graph_exec *ge = NULL;
  assert_int_equal(grt_graph_instantiate(g, &ge), GRT_OK);
  assert_int_equal(grt_graph_destroy(g), GRT_OK);
  return ge;
}

/* s: gate, A (1000), B (500), record eA after A; t: waits eA, a host
 * function, then a graph launch (300 + 200). Held by the gate, every id
 * reads NOT_READY on both clocks; then the times. */
static void test_times(void **state) {
  grt_clock_kind clock = clock_of(state);
  grt_exec *exec = make(clock, 0);
  grt_stream *s = make_stream(exec, GRT_STREAM_NON_BLOCKING, "s");
  grt_stream *t = make_stream(exec, GRT_STREAM_NON_BLOCKING, "t");
  grt_stream *c = make_stream(exec, GRT_STREAM_NON_BLOCKING, "c");
  grt_graph_exec *ge = two_kernel_graph(c);
  grt_user_event *gate;
  grt_event *ea;
  assert_int_equal(grt_user_event_create(exec, "gate", &gate), GRT_OK);
  assert_int_equal(grt_event_create(exec, 0, &ea), GRT_OK);
  assert_int_equal(grt_stream_wait_user_event(s, gate, 1), GRT_OK);
  grt_op_id a = kernel(s, 1000);
  assert_int_equal(grt_event_record(ea, s), GRT_OK);
  grt_op_id b = kernel(s, 500);
  assert_int_equal(grt_stream_wait_event(t, ea), GRT_OK);
  grt_op_id h = 0, gl = 0;
  assert_int_equal(grt_launch_host_func_ex(t, nop, NULL, &h), GRT_OK);
  assert_int_equal(grt_graph_launch_ex(ge, t, &gl), GRT_OK);
  grt_op_id ids[] = {a, b, h, gl};
  for (int i = 0; i < 4; i++) {
    uint64_t x = 7, y = 7;
    assert_int_equal(grt_exec_op_times(exec, ids[i], &x, &y), GRT_ERR_NOT_READY);
    assert_int_equal(x, 7); /* a failed call writes nothing */
    for (int j = 0; j < i; j++) assert_true(ids[i] != ids[j]);
  }
  assert_int_equal(grt_user_event_signal(gate, 1), GRT_OK);
  assert_int_equal(grt_exec_synchronize(exec), GRT_OK);
  span ta = times_of(exec, a), tb = times_of(exec, b), th = times_of(exec, h), tg = times_of(exec, gl);
  if (clock == GRT_CLOCK_VIRTUAL) {
    assert_int_equal(ta.start, 0);
    assert_int_equal(ta.end, 1000);
    assert_int_equal(tb.start, 1000);
    assert_int_equal(tb.end, 1500);
    assert_int_equal(th.start, 1000);
    assert_int_equal(th.end, 1000);
    assert_int_equal(tg.start, 1000);
    assert_int_equal(tg.end, 1500);
  } else { /* threads: durations are lower bounds; the orders hold */
    assert_true(ta.end - ta.start >= 1000);
    assert_true(tb.end - tb.start >= 500);
    assert_true(tg.end - tg.start >= 500);
    assert_true(ta.end <= tb.start); /* FIFO */
    assert_true(ta.end <= th.start); /* the event edge */
    assert_true(th.end <= tg.start); /* FIFO on t */
  }
  span again = times_of(exec, a); /* a read changes nothing */
  assert_int_equal(again.start, ta.start);
  assert_int_equal(again.end, ta.end);
  assert_int_equal(grt_graph_exec_destroy(ge), GRT_OK);
  assert_int_equal(grt_event_destroy(ea), GRT_OK);
  assert_int_equal(grt_user_event_destroy(gate), GRT_OK);
  grt_stream *ss[] = {s, t, c};
  for (int i = 0; i < 3; i++) assert_int_equal(grt_stream_destroy(ss[i]), GRT_OK);
  done(exec);
}

/* The last `keep` ids issued are retained, pending or not; older ones are
 * evicted (NOT_FOUND) even while their op still waits. */
static void test_retention(void **state) {
  grt_exec *exec = make(clock_of(state), 4);
  grt_stream *s = make_stream(exec, GRT_STREAM_NON_BLOCKING, "s");
  grt_op_id ids[6];
  for (int i = 0; i < 6; i++) ids[i] = kernel(s, 100);
  assert_int_equal(grt_stream_synchronize(s), GRT_OK);
  uint64_t x, y;
  for (int i = 0; i < 6; i++)
    assert_int_equal(grt_exec_op_times(exec, ids[i], &x, &y), i < 2 ? GRT_ERR_NOT_FOUND : GRT_OK);
  /* Held behind a gate: issuing four more evicts the first of them unrun. */
  grt_user_event *gate;
  assert_int_equal(grt_user_event_create(exec, "gate", &gate), GRT_OK);
  assert_int_equal(grt_stream_wait_user_event(s, gate, 1), GRT_OK);
  grt_op_id held[5];
  for (int i = 0; i < 5; i++) held[i] = kernel(s, 100);
  assert_int_equal(grt_exec_op_times(exec, held[0], &x, &y), GRT_ERR_NOT_FOUND);
  for (int i = 1; i < 5; i++) assert_int_equal(grt_exec_op_times(exec, held[i], &x, &y), GRT_ERR_NOT_READY);
  assert_int_equal(grt_user_event_signal(gate, 1), GRT_OK);
  assert_int_equal(grt_stream_synchronize(s), GRT_OK);
  assert_int_equal(grt_exec_op_times(exec, held[0], &x, &y), GRT_ERR_NOT_FOUND);
  for (int i = 1; i < 5; i++) {
    span t = times_of(exec, held[i]);
    if (clock_of(state) == GRT_CLOCK_VIRTUAL) {
      assert_int_equal(t.start, 600 + 100 * (uint64_t)(i - 1) + 100);
      assert_int_equal(t.end, t.start + 100);
    }
  }
  assert_int_equal(grt_user_event_destroy(gate), GRT_OK);
  assert_int_equal(grt_stream_destroy(s), GRT_OK);
  done(exec);
}

/* Bad input, refused launches and the ring's bounds: a failed call writes
 * nothing and takes no id (else keep = 2 would evict the first id). */
static void test_errors(void **state) {
  grt_exec *exec = make(clock_of(state), 2);
  grt_stream *s = make_stream(exec, GRT_STREAM_NON_BLOCKING, "s");
  uint64_t x = 5, y = 5;
  assert_int_equal(grt_exec_op_times(exec, 0, &x, &y), GRT_ERR_NOT_FOUND);
  assert_int_equal(grt_exec_op_times(exec, 1, &x, &y), GRT_ERR_NOT_FOUND); /* never issued */
  grt_op_id first = kernel(s, 10);
  assert_int_equal(grt_exec_op_times(NULL, first, &x, &y), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt_exec_op_times(exec, first, NULL, &y), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt_exec_op_times(exec, first, &x, NULL), GRT_ERR_INVALID_ARG);
  assert_int_equal(x, 5);
  grt_op_id id = 77;
  grt_kernel_desc bad = {NULL, NULL, 0, GRT_ENGINE_HOST, NULL};
  assert_int_equal(grt_launch_kernel_ex(s, &bad, &id), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt_launch_kernel_ex(s, NULL, &id), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt_launch_host_func_ex(s, NULL, NULL, &id), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt_graph_launch_ex(NULL, s, &id), GRT_ERR_INVALID_ARG);
  grt_stream *gone = make_stream(exec, GRT_STREAM_NON_BLOCKING, "gone");
  assert_int_equal(grt_stream_destroy(gone), GRT_OK);
  grt_kernel_desc k = {NULL, NULL, 10, GRT_ENGINE_COMPUTE, NULL};
  assert_int_equal(grt_launch_kernel_ex(gone, &k, &id), GRT_ERR_INVALID_HANDLE);
  assert_int_equal(grt_launch_host_func_ex(gone, nop, NULL, &id), GRT_ERR_INVALID_HANDLE);
  assert_int_equal(id, 77);
  assert_int_equal(grt_launch_kernel_ex(s, &k, NULL), GRT_OK); /* no id asked: takes none */
  grt_op_id second = kernel(s, 10);
  assert_int_equal(grt_stream_synchronize(s), GRT_OK);
  times_of(exec, first); /* still retained: nothing above took an id */
  times_of(exec, second);
  assert_int_equal(grt_exec_op_times(exec, second + 1, &x, &y), GRT_ERR_NOT_FOUND);
  assert_int_equal(grt_stream_destroy(s), GRT_OK);
  done(exec);
  grt_exec_config cfg;
  grt_exec_config_default(&cfg);
  assert_int_equal(cfg.op_times_keep, 4096);
  cfg.clock = clock_of(state);
  cfg.op_times_keep = (1u << 20) + 1;
  grt_exec *e2 = NULL;
  assert_int_equal(grt_exec_create(&cfg, &e2), GRT_ERR_INVALID_ARG);
  assert_null(e2);
}

/* An op the sticky error cancelled never gets times: its id reads the
 * error, not NOT_READY for ever. Ops that ended before keep theirs. */
static void test_cancelled(void **state) {
  grt_exec *exec = make(clock_of(state), 0);
  grt_stream *a = make_stream(exec, GRT_STREAM_NON_BLOCKING, "A");
  grt_stream *b = make_stream(exec, GRT_STREAM_NON_BLOCKING, "B");
  grt_user_event *u1, *u2;
  assert_int_equal(grt_user_event_create(exec, "u1", &u1), GRT_OK);
  assert_int_equal(grt_user_event_create(exec, "u2", &u2), GRT_OK);
  grt_op_id ran = kernel(a, 100);
  assert_int_equal(grt_stream_synchronize(a), GRT_OK);
  assert_int_equal(grt_stream_wait_user_event(a, u1, 1), GRT_OK);
  grt_op_id never = kernel(a, 100);
  assert_int_equal(grt_stream_signal_user_event(a, u2, 1), GRT_OK);
  assert_int_equal(grt_stream_wait_user_event(b, u2, 1), GRT_OK);
  assert_int_equal(grt_stream_signal_user_event(b, u1, 1), GRT_OK);
  assert_int_equal(grt_exec_synchronize(exec), GRT_ERR_DEADLOCK);
  uint64_t x, y;
  assert_int_equal(grt_exec_op_times(exec, never, &x, &y), GRT_ERR_DEADLOCK);
  span t = times_of(exec, ran);
  if (clock_of(state) == GRT_CLOCK_VIRTUAL) assert_int_equal(t.end, 100);
  assert_int_equal(grt_user_event_destroy(u1), GRT_OK);
  assert_int_equal(grt_user_event_destroy(u2), GRT_OK);
  assert_int_equal(grt_stream_destroy(a), GRT_OK);
  assert_int_equal(grt_stream_destroy(b), GRT_OK);
  done(exec);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      BOTH_CLOCKS(test_times),
      BOTH_CLOCKS(test_retention),
      BOTH_CLOCKS(test_errors),
      BOTH_CLOCKS(test_cancelled),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
