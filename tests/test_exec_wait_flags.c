/* test_exec_wait_flags.c — grt_stream_wait_event_with_flags (cudaStreamWaitEvent
 * with cudaEventWaitDefault / cudaEventWaitExternal) under both clocks:
 * DEFAULT is the plain wait; EXTERNAL outside a capture is refused and
 * changes nothing; inside one it records an event wait node instead of an
 * edge, so an event recorded outside the capture (the isolation error with
 * DEFAULT) may be waited for, and every launch waits for the event's record
 * as of the launch. Exact times on the virtual clock; orders under threads. */
#include <stdbool.h>
#include <string.h>

#include "test_exec_common.h"

typedef struct fixture {
  grt_exec *exec;
  grt_stream *s, *t; /* s captures and launches; t's work is what the event records */
  grt_event *ev;
  order_log log;
  log_arg a[8];
  bool virt;
} fixture;

static void setup(fixture *f, grt_clock_kind clock, unsigned flags) {
  memset(f, 0, sizeof *f);
  f->virt = clock == GRT_CLOCK_VIRTUAL;
  f->exec = make_exec(clock, 0);
  f->s = make_stream(f->exec, flags, "s");
  f->t = make_stream(f->exec, flags, "t");
  assert_int_equal(grt_event_create(f->exec, 0, &f->ev), GRT_OK);
  for (int i = 0; i < 8; i++) f->a[i] = (log_arg){&f->log, i};
}

static void teardown(fixture *f) {
  assert_int_equal(grt_exec_synchronize(f->exec), GRT_OK);
  assert_int_equal(grt_event_destroy(f->ev), GRT_OK);
  assert_int_equal(grt_stream_destroy(f->s), GRT_OK);
  assert_int_equal(grt_stream_destroy(f->t), GRT_OK);
  assert_int_equal(grt_exec_destroy(f->exec), GRT_OK);
}

static uint64_t now_of(grt_exec *exec) {
  uint64_t now;
  assert_int_equal(grt_exec_now_ns(exec, &now), GRT_OK);
  return now;
}

static grt_capture_status status_of(grt_stream *s) {
  grt_capture_status cs;
  assert_int_equal(grt_stream_capture_status(s, &cs), GRT_OK);
  return cs;
}

/* t: a kernel of ns (log id `id`), then ev recorded. */
static void record_after_kernel(fixture *f, int id, uint64_t ns) {
  launch_logged(f->t, &f->a[id], ns);
  assert_int_equal(grt_event_record(f->ev, f->t), GRT_OK);
}

/* Unknown flags and EXTERNAL outside a capture are refused and change
 * nothing: s does not wait for t. DEFAULT waits as grt_stream_wait_event. */
static void test_flags_outside_capture(void **state) {
  fixture f;
  setup(&f, clock_of(state), GRT_STREAM_NON_BLOCKING);
  record_after_kernel(&f, 0, 1000);
  assert_int_equal(grt_stream_wait_event_with_flags(f.s, f.ev, 2), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt_stream_wait_event_with_flags(f.s, f.ev, GRT_EVENT_WAIT_EXTERNAL), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt_stream_wait_event_with_flags(f.s, NULL, GRT_EVENT_WAIT_DEFAULT), GRT_ERR_INVALID_ARG);
  launch_logged(f.s, &f.a[1], 100);
  assert_int_equal(grt_stream_synchronize(f.s), GRT_OK);
  if (f.virt) assert_int_equal(now_of(f.exec), 100); /* the refused waits left no edge */
  assert_int_equal(grt_stream_wait_event_with_flags(f.s, f.ev, GRT_EVENT_WAIT_DEFAULT), GRT_OK);
  launch_logged(f.s, &f.a[2], 100);
  assert_int_equal(grt_stream_synchronize(f.s), GRT_OK);
  if (f.virt) assert_int_equal(now_of(f.exec), 1100);
  assert_true(log_pos(&f.log, 0) < log_pos(&f.log, 2));
  teardown(&f);
}

/* The capture of s: k1 (100 ns), an external wait on ev, k2 (100 ns). */
static grt_graph_exec *capture_external(fixture *f) {
  assert_int_equal(grt_stream_begin_capture(f->s, GRT_CAPTURE_GLOBAL), GRT_OK);
  launch_logged(f->s, &f->a[1], 100);
  assert_int_equal(grt_stream_wait_event_with_flags(f->s, f->ev, GRT_EVENT_WAIT_EXTERNAL), GRT_OK);
  launch_logged(f->s, &f->a[2], 100);
  grt_graph *g;
  assert_int_equal(grt_stream_end_capture(f->s, &g), GRT_OK);
  grt_graph_node *nodes[4];
  size_t n = 4, edges;
  assert_int_equal(grt_graph_get_nodes(g, nodes, &n), GRT_OK);
  assert_int_equal(n, 3);
  grt_graph_node_type type;
  assert_int_equal(grt_graph_node_get_type(nodes[1], &type), GRT_OK);
  assert_int_equal(type, GRT_GRAPH_NODE_WAIT_EVENT);
  assert_int_equal(grt_graph_edge_count(g, &edges), GRT_OK);
  assert_int_equal(edges, 2); /* k1 -> wait -> k2 */
  grt_graph_exec *ge;
  assert_int_equal(grt_graph_instantiate(g, &ge), GRT_OK);
  assert_int_equal(grt_graph_destroy(g), GRT_OK);
  return ge;
}

/* An event recorded outside the capture: EXTERNAL makes a wait node (DEFAULT
 * would be the isolation error). Each launch waits for ev's record as of the
 * launch: t's kernel first, the graph's kernels after it; a re-record after
 * more work on t moves the next launch. Virtual: the launch holds its nodes
 * until the record completes (the model binds the wait at the launch, see
 * docs/EXEC.md), so k1 runs 1000-1100 and k2 1100-1200; the second record
 * completes at 1200 + 2000, the second launch ends at 3400. */
static void test_external_wait_node(void **state) {
  fixture f;
  setup(&f, clock_of(state), GRT_STREAM_NON_BLOCKING);
  record_after_kernel(&f, 0, 1000);
  grt_graph_exec *ge = capture_external(&f);
  assert_int_equal(grt_graph_launch(ge, f.s), GRT_OK);
  assert_int_equal(grt_stream_synchronize(f.s), GRT_OK);
  if (f.virt) assert_int_equal(now_of(f.exec), 1200);
  assert_int_equal(atomic_load(&f.log.n), 3);
  assert_int_equal(f.log.items[0], 0);
  assert_int_equal(f.log.items[1], 1);
  assert_int_equal(f.log.items[2], 2);
  record_after_kernel(&f, 3, 2000);
  assert_int_equal(grt_graph_launch(ge, f.s), GRT_OK);
  assert_int_equal(grt_stream_synchronize(f.s), GRT_OK);
  if (f.virt) assert_int_equal(now_of(f.exec), 3400);
  assert_int_equal(atomic_load(&f.log.n), 6);
  assert_int_equal(f.log.items[3], 3);
  assert_int_equal(grt_graph_exec_destroy(ge), GRT_OK);
  teardown(&f);
}

/* DEFAULT on the same event recorded outside: isolation, the capture is
 * invalidated (CUDA: invalid without cudaEventWaitExternal). */
static void test_default_is_isolation(void **state) {
  fixture f;
  setup(&f, clock_of(state), GRT_STREAM_NON_BLOCKING);
  record_after_kernel(&f, 0, 1000);
  assert_int_equal(grt_stream_begin_capture(f.s, GRT_CAPTURE_GLOBAL), GRT_OK);
  assert_int_equal(grt_stream_wait_event_with_flags(f.s, f.ev, GRT_EVENT_WAIT_DEFAULT), GRT_ERR_CAPTURE_ISOLATION);
  assert_int_equal(status_of(f.s), GRT_CAPTURE_STATUS_INVALIDATED);
  assert_int_equal(grt_stream_wait_event_with_flags(f.s, f.ev, GRT_EVENT_WAIT_EXTERNAL), GRT_ERR_CAPTURE_INVALIDATED);
  grt_graph *g;
  assert_int_equal(grt_stream_end_capture(f.s, &g), GRT_ERR_CAPTURE_INVALIDATED);
  teardown(&f);
}

/* A never-recorded event: the node waits for nothing at the first launch;
 * recorded later, the next launch waits for that record. */
static void test_external_never_recorded(void **state) {
  fixture f;
  setup(&f, clock_of(state), GRT_STREAM_NON_BLOCKING);
  grt_graph_exec *ge = capture_external(&f);
  assert_int_equal(grt_graph_launch(ge, f.s), GRT_OK);
  assert_int_equal(grt_stream_synchronize(f.s), GRT_OK);
  if (f.virt) assert_int_equal(now_of(f.exec), 200);
  record_after_kernel(&f, 0, 500);
  assert_int_equal(grt_graph_launch(ge, f.s), GRT_OK);
  assert_int_equal(grt_stream_synchronize(f.s), GRT_OK);
  if (f.virt) assert_int_equal(now_of(f.exec), 200 + 500 + 200);
  assert_int_equal(log_pos(&f.log, 0), 2); /* after the first launch's nodes, before the second's */
  assert_int_equal(grt_graph_exec_destroy(ge), GRT_OK);
  teardown(&f);
}

/* A captured event has no record a launch could wait for: EXTERNAL on it is
 * refused and invalidates the capture. On the legacy stream while a blocking
 * stream captures, EXTERNAL is an implicit dependency like any legacy use. */
static void test_external_refusals(void **state) {
  fixture f;
  setup(&f, clock_of(state), GRT_STREAM_DEFAULT);
  assert_int_equal(grt_stream_begin_capture(f.s, GRT_CAPTURE_GLOBAL), GRT_OK);
  launch_logged(f.s, &f.a[1], 100);
  assert_int_equal(grt_event_record(f.ev, f.s), GRT_OK); /* a captured event */
  assert_int_equal(grt_stream_wait_event_with_flags(f.s, f.ev, GRT_EVENT_WAIT_EXTERNAL), GRT_ERR_CAPTURED_EVENT);
  assert_int_equal(status_of(f.s), GRT_CAPTURE_STATUS_INVALIDATED);
  grt_graph *g;
  assert_int_equal(grt_stream_end_capture(f.s, &g), GRT_ERR_CAPTURE_INVALIDATED);
  grt_stream *leg;
  assert_int_equal(grt_exec_legacy_stream(f.exec, &leg), GRT_OK);
  assert_int_equal(grt_stream_begin_capture(f.s, GRT_CAPTURE_GLOBAL), GRT_OK);
  assert_int_equal(grt_stream_wait_event_with_flags(leg, f.ev, GRT_EVENT_WAIT_EXTERNAL), GRT_ERR_CAPTURE_IMPLICIT);
  assert_int_equal(status_of(f.s), GRT_CAPTURE_STATUS_INVALIDATED);
  assert_int_equal(grt_stream_end_capture(f.s, &g), GRT_ERR_CAPTURE_INVALIDATED);
  assert_int_equal(atomic_load(&f.log.n), 0);
  teardown(&f);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      BOTH_CLOCKS(test_flags_outside_capture),   BOTH_CLOCKS(test_external_wait_node),
      BOTH_CLOCKS(test_default_is_isolation),    BOTH_CLOCKS(test_external_never_recorded),
      BOTH_CLOCKS(test_external_refusals),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
