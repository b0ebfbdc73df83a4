/* test_exec_graph_edges.c — graph capture and update at their edges: argument
 * checks, a capture invalidated by an illegal call (every later capture op
 * and the join of another stream refuse, the end gives no graph), a failed
 * allocation node that leaves the capture intact, updates refused for edges
 * that differ with the same node count and for memory nodes, updates across
 * execs, and instantiate / end-capture after the exec's sticky error. */
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "test_exec_common.h"

static void test_capture_args_and_invalidation(void **state) {
  grt_exec *exec = make_exec(clock_of(state), 0);
  grt_stream *s = make_stream(exec, GRT_STREAM_NON_BLOCKING, "s");
  grt_stream *t = make_stream(exec, GRT_STREAM_NON_BLOCKING, "t");
  grt_capture_status cs;
  grt_devptr p = 0;
  assert_int_equal(grt_stream_capture_status(s, NULL), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt_stream_malloc_async_graph(s, 512, &p), GRT_ERR_STATE); /* not capturing */
  assert_int_equal(grt_exec_device_malloc(NULL, 512, &p), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt_exec_device_malloc(exec, 512, NULL), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt_exec_device_free(NULL, 0x1000), GRT_ERR_INVALID_ARG);

  assert_int_equal(grt_stream_begin_capture(s, GRT_CAPTURE_RELAXED), GRT_OK);
  assert_int_equal(grt_stream_end_capture(s, NULL), GRT_ERR_INVALID_ARG); /* the capture goes on */
  assert_int_equal(grt_stream_malloc_async_graph(s, 512, NULL), GRT_ERR_INVALID_ARG);
  /* an allocation node the device cannot serve fails alone: the capture stays valid */
  assert_int_equal(grt_stream_malloc_async_graph(s, 64 * GRT_MiB, &p), GRT_ERR_SIZE);
  assert_int_equal(grt_stream_capture_status(s, &cs), GRT_OK);
  assert_int_equal(cs, GRT_CAPTURE_STATUS_ACTIVE);
  grt_kernel_desc k = {NULL, NULL, 100, GRT_ENGINE_COMPUTE, "k"};
  assert_int_equal(grt_launch_kernel(s, &k), GRT_OK);
  grt_event *e0;
  assert_int_equal(grt_event_create(exec, GRT_EVENT_DISABLE_TIMING, &e0), GRT_OK);
  assert_int_equal(grt_event_record(e0, s), GRT_OK);
  /* an illegal call invalidates the capture */
  assert_int_equal(grt_stream_query(s), GRT_ERR_CAPTURE_UNSUPPORTED);
  assert_int_equal(grt_stream_capture_status(s, &cs), GRT_OK);
  assert_int_equal(cs, GRT_CAPTURE_STATUS_INVALIDATED);
  grt_event *e1;
  assert_int_equal(grt_event_create(exec, GRT_EVENT_DISABLE_TIMING, &e1), GRT_OK);
  assert_int_equal(grt_event_record(e1, s), GRT_ERR_CAPTURE_INVALIDATED);
  assert_int_equal(grt_stream_malloc_async_graph(s, 512, &p), GRT_ERR_CAPTURE_INVALIDATED);
  grt_device *dev;
  assert_int_equal(grt_exec_get_device(exec, &dev), GRT_OK);
  grt_device_stats ds;
  assert_int_equal(grt_device_get_stats(dev, &ds), GRT_OK);
  assert_int_equal(ds.bytes_in_use, 0); /* the refused node's block went back */
  assert_int_equal(grt_stream_wait_event(t, e0), GRT_ERR_CAPTURE_INVALIDATED); /* no joining an invalid capture */
  assert_int_equal(grt_stream_capture_status(t, &cs), GRT_OK);
  assert_int_equal(cs, GRT_CAPTURE_STATUS_NONE);
  grt_graph *g = (grt_graph *)(void *)e0;
  assert_int_equal(grt_stream_end_capture(s, &g), GRT_ERR_CAPTURE_INVALIDATED);
  assert_null(g);
  assert_int_equal(grt_stream_capture_status(s, &cs), GRT_OK);
  assert_int_equal(cs, GRT_CAPTURE_STATUS_NONE);
  assert_int_equal(grt_stream_end_capture(s, &g), GRT_ERR_STATE); /* over */
  assert_int_equal(grt_stream_synchronize(t), GRT_OK);
  assert_int_equal(grt_event_destroy(e0), GRT_OK);
  assert_int_equal(grt_event_destroy(e1), GRT_OK);
  assert_int_equal(grt_stream_destroy(s), GRT_OK);
  assert_int_equal(grt_stream_destroy(t), GRT_OK);
  assert_int_equal(grt_exec_destroy(exec), GRT_OK);
}

static grt_graph *capture_two(grt_exec *exec, grt_stream *s, grt_stream *t, bool dependent) {
  grt_kernel_desc k = {NULL, NULL, 100, GRT_ENGINE_COMPUTE, "k"};
  grt_event *fork, *join;
  assert_int_equal(grt_event_create(exec, GRT_EVENT_DISABLE_TIMING, &fork), GRT_OK);
  assert_int_equal(grt_event_create(exec, GRT_EVENT_DISABLE_TIMING, &join), GRT_OK);
  assert_int_equal(grt_stream_begin_capture(s, GRT_CAPTURE_GLOBAL), GRT_OK);
  if (dependent) { /* k1 -> k2, both on s */
    assert_int_equal(grt_launch_kernel(s, &k), GRT_OK);
    assert_int_equal(grt_launch_kernel(s, &k), GRT_OK);
  } else { /* k1 on s, k2 on t forked before k1: no edge */
    assert_int_equal(grt_event_record(fork, s), GRT_OK);
    assert_int_equal(grt_stream_wait_event(t, fork), GRT_OK);
    assert_int_equal(grt_launch_kernel(s, &k), GRT_OK);
    assert_int_equal(grt_launch_kernel(t, &k), GRT_OK);
    assert_int_equal(grt_event_record(join, t), GRT_OK);
    assert_int_equal(grt_stream_wait_event(s, join), GRT_OK);
  }
  grt_graph *g = NULL;
  assert_int_equal(grt_stream_end_capture(s, &g), GRT_OK);
  assert_int_equal(grt_event_destroy(fork), GRT_OK);
  assert_int_equal(grt_event_destroy(join), GRT_OK);
  return g;
}

static void test_update_refusals(void **state) {
  grt_exec *exec = make_exec(clock_of(state), 0);
  grt_stream *s = make_stream(exec, GRT_STREAM_NON_BLOCKING, "s");
  grt_stream *t = make_stream(exec, GRT_STREAM_NON_BLOCKING, "t");
  grt_graph *chain = capture_two(exec, s, t, true), *parallel = capture_two(exec, s, t, false);
  size_t n1, n2, e1, e2;
  assert_int_equal(grt_graph_node_count(chain, &n1), GRT_OK);
  assert_int_equal(grt_graph_node_count(parallel, &n2), GRT_OK);
  assert_int_equal(grt_graph_edge_count(chain, &e1), GRT_OK);
  assert_int_equal(grt_graph_edge_count(parallel, &e2), GRT_OK);
  assert_int_equal(n1, 2);
  assert_int_equal(n2, 2);
  assert_int_equal(e1, 1);
  assert_int_equal(e2, 0);
  grt_graph_exec *ge;
  assert_int_equal(grt_graph_instantiate(chain, &ge), GRT_OK);
  grt_graph_update_result r = GRT_GRAPH_UPDATE_OK;
  assert_int_equal(grt_graph_exec_update(ge, parallel, &r), GRT_ERR_GRAPH_EXEC_UPDATE); /* same nodes, other edges */
  assert_int_equal(r, GRT_GRAPH_UPDATE_TOPOLOGY_CHANGED);
  assert_int_equal(grt_graph_exec_update(ge, parallel, NULL), GRT_ERR_GRAPH_EXEC_UPDATE);
  /* a graph with an allocation node in the same shape: memory nodes are never updated */
  assert_int_equal(grt_stream_begin_capture(s, GRT_CAPTURE_GLOBAL), GRT_OK);
  grt_devptr p;
  assert_int_equal(grt_stream_malloc_async_graph(s, 512, &p), GRT_OK);
  grt_kernel_desc k = {NULL, NULL, 100, GRT_ENGINE_COMPUTE, "k"};
  assert_int_equal(grt_launch_kernel(s, &k), GRT_OK);
  grt_graph *mem;
  assert_int_equal(grt_stream_end_capture(s, &mem), GRT_OK);
  assert_int_equal(grt_graph_exec_update(ge, mem, &r), GRT_ERR_GRAPH_EXEC_UPDATE);
  assert_int_equal(r, GRT_GRAPH_UPDATE_NOT_SUPPORTED);
  /* a graph of another exec */
  grt_exec *other = make_exec(clock_of(state), 0);
  grt_stream *os = make_stream(other, GRT_STREAM_NON_BLOCKING, "o");
  grt_stream *ot = make_stream(other, GRT_STREAM_NON_BLOCKING, "ot");
  grt_graph *foreign = capture_two(other, os, ot, true);
  assert_int_equal(grt_graph_exec_update(ge, foreign, &r), GRT_ERR_WRONG_DEVICE);
  /* none of the refusals changed ge: it still launches its chain */
  assert_int_equal(grt_graph_launch(ge, s), GRT_OK);
  assert_int_equal(grt_stream_synchronize(s), GRT_OK);
  size_t nodes = 0;
  uint64_t pool = 1;
  assert_int_equal(grt_graph_exec_info(ge, &nodes, &pool), GRT_OK);
  assert_int_equal(nodes, 2);
  assert_int_equal(pool, 0);
  assert_int_equal(grt_graph_exec_info(ge, NULL, NULL), GRT_OK);
  grt_graph_exec *gm;
  assert_int_equal(grt_graph_instantiate(mem, &gm), GRT_OK);
  assert_int_equal(grt_graph_exec_info(gm, &nodes, &pool), GRT_OK);
  assert_int_equal(nodes, 2);
  assert_int_equal(pool, 512);
  assert_int_equal(grt_graph_exec_destroy(gm), GRT_OK);
  assert_int_equal(grt_graph_exec_destroy(ge), GRT_OK);
  assert_int_equal(grt_graph_destroy(chain), GRT_OK);
  assert_int_equal(grt_graph_destroy(parallel), GRT_OK);
  assert_int_equal(grt_graph_destroy(mem), GRT_OK);
  assert_int_equal(grt_graph_destroy(foreign), GRT_OK);
  assert_int_equal(grt_stream_destroy(os), GRT_OK);
  assert_int_equal(grt_stream_destroy(ot), GRT_OK);
  assert_int_equal(grt_exec_destroy(other), GRT_OK);
  assert_int_equal(grt_stream_destroy(s), GRT_OK);
  assert_int_equal(grt_stream_destroy(t), GRT_OK);
  assert_int_equal(grt_exec_destroy(exec), GRT_OK);
}

/* After the exec's sticky error, a capture in progress ends with that error and instantiate refuses. */
static void test_graphs_after_sticky_error(void **state) {
  (void)state;
  grt_exec *exec = make_exec(GRT_CLOCK_VIRTUAL, 0);
  grt_stream *s = make_stream(exec, GRT_STREAM_NON_BLOCKING, "s");
  grt_stream *t = make_stream(exec, GRT_STREAM_NON_BLOCKING, "t");
  grt_graph *g = capture_two(exec, s, t, true);
  assert_int_equal(grt_stream_begin_capture(s, GRT_CAPTURE_RELAXED), GRT_OK);
  grt_user_event *u;
  assert_int_equal(grt_user_event_create(exec, "never", &u), GRT_OK);
  assert_int_equal(grt_user_event_wait(u, 1), GRT_ERR_DEADLOCK); /* the virtual host stalls */
  grt_graph *g2 = NULL;
  assert_int_equal(grt_stream_end_capture(s, &g2), GRT_ERR_DEADLOCK);
  assert_null(g2);
  grt_graph_exec *ge = NULL;
  assert_int_equal(grt_graph_instantiate(g, &ge), GRT_ERR_DEADLOCK);
  assert_null(ge);
  assert_int_equal(grt_graph_destroy(g), GRT_OK);
  assert_int_equal(grt_user_event_destroy(u), GRT_OK);
  assert_int_equal(grt_stream_destroy(s), GRT_OK);
  assert_int_equal(grt_stream_destroy(t), GRT_OK);
  assert_int_equal(grt_exec_destroy(exec), GRT_OK);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      BOTH_CLOCKS(test_capture_args_and_invalidation),
      BOTH_CLOCKS(test_update_refusals),
      cmocka_unit_test(test_graphs_after_sticky_error),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
