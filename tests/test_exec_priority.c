/* test_exec_priority.c — stream priorities on a saturated compute engine:
 * ready high-priority work starts before ready low-priority work, running
 * work is never preempted. Exact times under the virtual clock; the order
 * under threads (a spinning kernel holds the only slot while both wait).
 * Graph nodes run at their launching stream's priority. */
#include <sched.h>
#include <stdbool.h>
#include <string.h>
#include <time.h>

#include "test_exec_common.h"

static grt_exec *one_slot(grt_clock_kind clock) {
  grt_exec_config cfg;
  grt_exec_config_default(&cfg);
  cfg.clock = clock;
  cfg.compute_slots = 1;
  cfg.device_capacity = GRT_MiB;
  grt_exec *exec = NULL;
  assert_int_equal(grt_exec_create(&cfg, &exec), GRT_OK);
  return exec;
}

static void test_range_and_clamp(void **state) {
  grt_exec *exec = make_exec(clock_of(state), 0);
  int least, greatest, p;
  assert_int_equal(grt_exec_stream_priority_range(exec, &least, &greatest), GRT_OK);
  assert_int_equal(least, 0);
  assert_int_equal(greatest, -5);
  grt_stream *a, *b;
  assert_int_equal(grt_stream_create(exec, 0, -100, &a), GRT_OK);
  assert_int_equal(grt_stream_create(exec, 0, 7, &b), GRT_OK);
  assert_int_equal(grt_stream_get_priority(a, &p), GRT_OK);
  assert_int_equal(p, -5);
  assert_int_equal(grt_stream_get_priority(b, &p), GRT_OK);
  assert_int_equal(p, 0);
  assert_int_equal(grt_stream_destroy(a), GRT_OK);
  assert_int_equal(grt_stream_destroy(b), GRT_OK);
  assert_int_equal(grt_exec_destroy(exec), GRT_OK);
}

/* Virtual: B (1000 ns) runs from 0; L and H become ready at `ready` behind
 * copy-engine delays; H then starts first when B ends (never preempting it).
 * With graph = 1, H's kernel is a graph launched on the high-priority stream. */
static void run_virtual(uint64_t b_ns, uint64_t ready, int graph, int64_t want_b, int64_t want_h, int64_t want_l) {
  grt_exec *exec = one_slot(GRT_CLOCK_VIRTUAL);
  grt_stream *x, *lo, *hi;
  assert_int_equal(grt_stream_create(exec, GRT_STREAM_NON_BLOCKING, 0, &x), GRT_OK);
  assert_int_equal(grt_stream_create(exec, GRT_STREAM_NON_BLOCKING, 0, &lo), GRT_OK);
  assert_int_equal(grt_stream_create(exec, GRT_STREAM_NON_BLOCKING, -5, &hi), GRT_OK);
  grt_event *e0, *eb, *eh, *el;
  assert_int_equal(grt_event_create(exec, 0, &e0), GRT_OK);
  assert_int_equal(grt_event_create(exec, 0, &eb), GRT_OK);
  assert_int_equal(grt_event_create(exec, 0, &eh), GRT_OK);
  assert_int_equal(grt_event_create(exec, 0, &el), GRT_OK);
  order_log log = {0};
  log_arg ab = {&log, 'B'}, ah = {&log, 'H'}, al = {&log, 'L'};
  grt_graph *g = NULL;
  grt_graph_exec *ge = NULL;
  if (graph) { /* captured on the low-priority stream: the launch decides */
    assert_int_equal(grt_stream_begin_capture(lo, GRT_CAPTURE_GLOBAL), GRT_OK);
    launch_logged(lo, &ah, 100);
    assert_int_equal(grt_stream_end_capture(lo, &g), GRT_OK);
    assert_int_equal(grt_graph_instantiate(g, &ge), GRT_OK);
  }
  assert_int_equal(grt_event_record(e0, x), GRT_OK);
  launch_logged(x, &ab, b_ns);
  assert_int_equal(grt_event_record(eb, x), GRT_OK);
  grt_kernel_desc d_lo = {NULL, NULL, ready, GRT_ENGINE_COPY_H2D, "delay"};
  grt_kernel_desc d_hi = {NULL, NULL, ready, GRT_ENGINE_COPY_D2H, "delay"};
  assert_int_equal(grt_launch_kernel(lo, &d_lo), GRT_OK);
  launch_logged(lo, &al, 100);
  assert_int_equal(grt_event_record(el, lo), GRT_OK);
  assert_int_equal(grt_launch_kernel(hi, &d_hi), GRT_OK);
  if (graph) assert_int_equal(grt_graph_launch(ge, hi), GRT_OK);
  else launch_logged(hi, &ah, 100);
  assert_int_equal(grt_event_record(eh, hi), GRT_OK);
  assert_int_equal(grt_exec_synchronize(exec), GRT_OK);
  int64_t tb, th, tl;
  assert_int_equal(grt_event_elapsed_ns(e0, eb, &tb), GRT_OK);
  assert_int_equal(grt_event_elapsed_ns(e0, eh, &th), GRT_OK);
  assert_int_equal(grt_event_elapsed_ns(e0, el, &tl), GRT_OK);
  assert_int_equal(tb, want_b);
  assert_int_equal(th, want_h);
  assert_int_equal(tl, want_l);
  assert_int_equal(log.items[1], 'H');
  assert_int_equal(log.items[2], 'L');
  if (graph) {
    assert_int_equal(grt_graph_exec_destroy(ge), GRT_OK);
    assert_int_equal(grt_graph_destroy(g), GRT_OK);
  }
  assert_int_equal(grt_event_destroy(e0), GRT_OK);
  assert_int_equal(grt_event_destroy(eb), GRT_OK);
  assert_int_equal(grt_event_destroy(eh), GRT_OK);
  assert_int_equal(grt_event_destroy(el), GRT_OK);
  assert_int_equal(grt_stream_destroy(x), GRT_OK);
  assert_int_equal(grt_stream_destroy(lo), GRT_OK);
  assert_int_equal(grt_stream_destroy(hi), GRT_OK);
  assert_int_equal(grt_exec_destroy(exec), GRT_OK);
}

static void test_virtual_exact(void **state) {
  (void)state;
  run_virtual(1000, 500, 0, 1000, 1100, 1200); /* both wait for B: H first, B not preempted */
  run_virtual(500, 500, 0, 500, 600, 700);     /* B ends as both become ready: still H first */
  run_virtual(1000, 500, 1, 1000, 1100, 1200); /* graph nodes take the launching stream's priority */
}

typedef struct spin_gate {
  _Atomic int started, release, gave_up;
  order_log *log;
} spin_gate;

/* Spins until *flag is set, for at most SPIN_LIMIT_S seconds: a flag that
 * never comes (a scheduler that never runs the other side) ends the wait
 * with false instead of hanging the test until CTest's timeout. */
#define SPIN_LIMIT_S 20
static bool spin_until(_Atomic int *flag) {
  struct timespec t0, t;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  while (!atomic_load(flag)) {
    clock_gettime(CLOCK_MONOTONIC, &t);
    if (t.tv_sec - t0.tv_sec > SPIN_LIMIT_S) return false;
    sched_yield();
  }
  return true;
}

static void spin_body(void *p) {
  spin_gate *g = p;
  atomic_store(&g->started, 1);
  if (!spin_until(&g->release)) atomic_store(&g->gave_up, 1);
  int i = atomic_fetch_add(&g->log->n, 1);
  g->log->items[i] = 'B';
}

static void test_threads_order(void **state) {
  (void)state;
  grt_exec *exec = one_slot(GRT_CLOCK_THREADS);
  grt_stream *x, *lo, *hi;
  assert_int_equal(grt_stream_create(exec, GRT_STREAM_NON_BLOCKING, 0, &x), GRT_OK);
  assert_int_equal(grt_stream_create(exec, GRT_STREAM_NON_BLOCKING, 0, &lo), GRT_OK);
  assert_int_equal(grt_stream_create(exec, GRT_STREAM_NON_BLOCKING, -3, &hi), GRT_OK);
  order_log log = {0};
  spin_gate gate = {0, 0, 0, &log};
  grt_kernel_desc b = {spin_body, &gate, 0, GRT_ENGINE_COMPUTE, "blocker"};
  assert_int_equal(grt_launch_kernel(x, &b), GRT_OK);
  if (!spin_until(&gate.started)) fail_msg("the blocking kernel did not start within %d s", SPIN_LIMIT_S);
  log_arg al[3] = {{&log, 'L'}, {&log, 'L'}, {&log, 'L'}}, ah = {&log, 'H'};
  launch_logged(lo, &al[0], 0); /* ready first, but lower priority */
  launch_logged(lo, &al[1], 0);
  launch_logged(hi, &ah, 0);
  atomic_store(&gate.release, 1);
  assert_int_equal(grt_exec_synchronize(exec), GRT_OK);
  assert_false(atomic_load(&gate.gave_up));
  assert_int_equal(atomic_load(&log.n), 4);
  assert_int_equal(log.items[0], 'B');
  assert_int_equal(log.items[1], 'H');
  assert_int_equal(grt_stream_destroy(x), GRT_OK);
  assert_int_equal(grt_stream_destroy(lo), GRT_OK);
  assert_int_equal(grt_stream_destroy(hi), GRT_OK);
  assert_int_equal(grt_exec_destroy(exec), GRT_OK);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      BOTH_CLOCKS(test_range_and_clamp),
      cmocka_unit_test(test_virtual_exact),
      cmocka_unit_test(test_threads_order),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
