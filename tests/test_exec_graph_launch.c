/* test_exec_graph_launch.c — executable graphs under both clocks: launch
 * ordering (after earlier work on the stream, before later work, after the
 * previous launch of the same graph on another stream), update in place,
 * graph memory nodes (fixed addresses, not reused while a launch is in
 * flight), bad input, sticky errors, and the timeline's nested slices. */
#include <stdlib.h>
#include <string.h>

#include "exec/exec_impl.h"
#include "test_exec_common.h"

/* Captures a chain of n logged kernels (ids a[0..n)) on s. */
static grt_graph *capture_chain(grt_stream *s, log_arg *a, int n, uint64_t ns) {
  assert_int_equal(grt_stream_begin_capture(s, GRT_CAPTURE_GLOBAL), GRT_OK);
  for (int i = 0; i < n; i++) launch_logged(s, &a[i], ns);
  grt_graph *g = NULL;
  assert_int_equal(grt_stream_end_capture(s, &g), GRT_OK);
  return g;
}

static void test_launch_order(void **state) {
  grt_exec *exec = make_exec(clock_of(state), 0);
  grt_stream *s1 = make_stream(exec, GRT_STREAM_NON_BLOCKING, "s1");
  grt_stream *s2 = make_stream(exec, GRT_STREAM_NON_BLOCKING, "s2");
  order_log log = {0};
  log_arg a[3] = {{&log, 0}, {&log, 1}, {&log, 2}}, before = {&log, 100}, after = {&log, 200};
  grt_graph *g = capture_chain(s1, a, 3, 2000);
  grt_graph_exec *ge;
  assert_int_equal(grt_graph_instantiate(g, &ge), GRT_OK);
  assert_int_equal(grt_graph_destroy(g), GRT_OK); /* the executable graph is independent */
  grt_user_event *gate;
  assert_int_equal(grt_user_event_create(exec, "gate", &gate), GRT_OK);
  /* s1: gate, k100, graph, k200; s2: graph (after s1's launch), k200 */
  assert_int_equal(grt_stream_wait_user_event(s1, gate, 1), GRT_OK);
  launch_logged(s1, &before, 5000);
  assert_int_equal(grt_graph_launch(ge, s1), GRT_OK);
  launch_logged(s1, &after, 0);
  assert_int_equal(grt_graph_launch(ge, s2), GRT_OK);
  assert_int_equal(grt_graph_exec_destroy(ge), GRT_ERR_BUSY); /* launches pending */
  assert_int_equal(grt_stream_query(s2), GRT_ERR_NOT_READY);
  assert_int_equal(atomic_load(&log.n), 0);
  assert_int_equal(grt_user_event_signal(gate, 1), GRT_OK);
  assert_int_equal(grt_exec_synchronize(exec), GRT_OK);
  assert_int_equal(atomic_load(&log.n), 8);
  assert_int_equal(log.items[0], 100);
  for (int i = 0; i < 3; i++) assert_int_equal(log.items[1 + i], i); /* first launch */
  int p200 = log_pos(&log, 200);
  assert_true(p200 >= 4);
  /* the second launch's nodes come after all of the first's, in chain order */
  int k = 0;
  for (int i = 4; i < 8; i++)
    if (log.items[i] != 200) assert_int_equal(log.items[i], k++);
  assert_int_equal(k, 3);
  assert_int_equal(grt_graph_exec_destroy(ge), GRT_OK);
  assert_int_equal(grt_graph_launch(ge, s1), GRT_ERR_INVALID_HANDLE);
  assert_int_equal(grt_user_event_destroy(gate), GRT_OK);
  assert_int_equal(grt_stream_destroy(s1), GRT_OK);
  assert_int_equal(grt_stream_destroy(s2), GRT_OK);
  assert_int_equal(grt_exec_destroy(exec), GRT_OK);
}

/* Update: same topology takes new parameters (launches already issued keep
 * the old ones); a different topology or node kind is refused. */
static void test_update(void **state) {
  grt_exec *exec = make_exec(clock_of(state), 0);
  grt_stream *s = make_stream(exec, GRT_STREAM_NON_BLOCKING, "s");
  order_log log = {0};
  log_arg a[3] = {{&log, 0}, {&log, 1}, {&log, 2}}, b[3] = {{&log, 10}, {&log, 11}, {&log, 12}};
  grt_graph *g1 = capture_chain(s, a, 2, 1000), *g2 = capture_chain(s, b, 2, 3000), *g3 = capture_chain(s, a, 3, 0);
  grt_devptr buf;
  assert_int_equal(grt_exec_device_malloc(exec, 64, &buf), GRT_OK);
  assert_int_equal(grt_stream_begin_capture(s, GRT_CAPTURE_GLOBAL), GRT_OK);
  launch_logged(s, &a[0], 0);
  assert_int_equal(grt_memset_async(s, buf, 1, 64), GRT_OK);
  grt_graph *g4;
  assert_int_equal(grt_stream_end_capture(s, &g4), GRT_OK);

  grt_graph_exec *ge;
  assert_int_equal(grt_graph_instantiate(g1, &ge), GRT_OK);
  grt_user_event *gate;
  assert_int_equal(grt_user_event_create(exec, "gate", &gate), GRT_OK);
  assert_int_equal(grt_stream_wait_user_event(s, gate, 1), GRT_OK);
  assert_int_equal(grt_graph_launch(ge, s), GRT_OK); /* issued with g1's parameters */
  grt_graph_update_result r;
  assert_int_equal(grt_graph_exec_update(ge, g2, &r), GRT_OK);
  assert_int_equal(r, GRT_GRAPH_UPDATE_OK);
  assert_int_equal(grt_graph_launch(ge, s), GRT_OK);
  assert_int_equal(grt_graph_exec_update(ge, g3, &r), GRT_ERR_GRAPH_EXEC_UPDATE);
  assert_int_equal(r, GRT_GRAPH_UPDATE_TOPOLOGY_CHANGED);
  assert_int_equal(grt_graph_exec_update(ge, g4, &r), GRT_ERR_GRAPH_EXEC_UPDATE);
  assert_int_equal(r, GRT_GRAPH_UPDATE_NODE_KIND_CHANGED);
  assert_int_equal(grt_user_event_signal(gate, 1), GRT_OK);
  assert_int_equal(grt_stream_synchronize(s), GRT_OK);
  int want[] = {0, 1, 10, 11};
  assert_int_equal(atomic_load(&log.n), 4);
  for (int i = 0; i < 4; i++) assert_int_equal(log.items[i], want[i]);
  assert_int_equal(grt_graph_destroy(g2), GRT_OK);
  assert_int_equal(grt_graph_exec_update(ge, g2, &r), GRT_ERR_INVALID_HANDLE);
  assert_int_equal(grt_graph_exec_destroy(ge), GRT_OK);
  assert_int_equal(grt_graph_destroy(g1), GRT_OK);
  assert_int_equal(grt_graph_destroy(g3), GRT_OK);
  assert_int_equal(grt_graph_destroy(g4), GRT_OK);
  assert_int_equal(grt_exec_device_free(exec, buf), GRT_OK);
  assert_int_equal(grt_user_event_destroy(gate), GRT_OK);
  assert_int_equal(grt_stream_destroy(s), GRT_OK);
  assert_int_equal(grt_exec_destroy(exec), GRT_OK);
}

typedef struct mem_check {
  grt_device *dev;
  grt_devptr p;
  _Atomic int ok, runs;
} mem_check;

/* A kernel that checks the block's bytes and marks them. */
static void check_body(void *arg) {
  mem_check *m = arg;
  unsigned char *h;
  if (grt_device_host_ptr(m->dev, m->p, 256, (void **)&h) == GRT_OK && h[0] == 0xAB && h[255] == 0xAB)
    atomic_fetch_add(&m->ok, 1);
  atomic_fetch_add(&m->runs, 1);
}

static void test_memory_nodes(void **state) {
  grt_exec *exec = make_exec(clock_of(state), 0);
  grt_stream *s = make_stream(exec, GRT_STREAM_NON_BLOCKING, "s");
  grt_device *dev;
  assert_int_equal(grt_exec_get_device(exec, &dev), GRT_OK);
  grt_devptr p = 0, q = 0, r;
  assert_int_equal(grt_stream_malloc_async_graph(s, 256, &p), GRT_ERR_STATE); /* not capturing */
  mem_check m = {dev, 0, 0, 0};
  assert_int_equal(grt_stream_begin_capture(s, GRT_CAPTURE_GLOBAL), GRT_OK);
  assert_int_equal(grt_stream_malloc_async_graph(s, 256, &p), GRT_OK);
  assert_int_equal(grt_stream_malloc_async_graph(s, 1024, &q), GRT_OK);
  m.p = p;
  assert_int_equal(grt_memset_async(s, p, 0xAB, 256), GRT_OK);
  grt_kernel_desc d = {check_body, &m, 1000, GRT_ENGINE_COMPUTE, "check"};
  assert_int_equal(grt_launch_kernel(s, &d), GRT_OK);
  assert_int_equal(grt_stream_free_async_graph(s, p), GRT_OK);
  assert_int_equal(grt_stream_free_async_graph(s, p), GRT_ERR_DOUBLE_FREE);
  assert_int_equal(grt_stream_free_async_graph(s, p + 8), GRT_ERR_UNKNOWN_POINTER);
  assert_int_equal(grt_stream_free_async_graph(s, q), GRT_OK); /* freed in the graph: relaunches need no free */
  grt_graph *g;
  assert_int_equal(grt_stream_end_capture(s, &g), GRT_OK);
  size_t n;
  assert_int_equal(grt_graph_node_count(g, &n), GRT_OK);
  assert_int_equal(n, 6);
  grt_graph_exec *ge, *ge2;
  assert_int_equal(grt_graph_instantiate(g, &ge), GRT_OK);
  assert_int_equal(grt_graph_instantiate(g, &ge2), GRT_ERR_BUSY); /* one executable graph at a time */
  uint64_t pool;
  assert_int_equal(grt_graph_exec_info(ge, &n, &pool), GRT_OK);
  assert_int_equal(pool, 256 + 1024);
  assert_int_equal(grt_graph_destroy(g), GRT_OK); /* ge keeps the pool */
  grt_user_event *gate;
  assert_int_equal(grt_user_event_create(exec, "gate", &gate), GRT_OK);
  assert_int_equal(grt_stream_wait_user_event(s, gate, 1), GRT_OK);
  for (int i = 0; i < 3; i++) assert_int_equal(grt_graph_launch(ge, s), GRT_OK);
  /* In flight: the blocks stay allocated and no one else gets them. */
  uint64_t size;
  assert_int_equal(grt_graph_exec_destroy(ge), GRT_ERR_BUSY);
  assert_int_equal(grt_device_segment_size(dev, p, &size), GRT_OK);
  assert_int_equal(grt_exec_device_malloc(exec, 256, &r), GRT_OK);
  assert_true(r != p && r != q);
  assert_int_equal(grt_user_event_signal(gate, 1), GRT_OK);
  assert_int_equal(grt_stream_synchronize(s), GRT_OK);
  assert_int_equal(atomic_load(&m.runs), 3);
  assert_int_equal(atomic_load(&m.ok), 3); /* the same address every replay */
  assert_int_equal(grt_graph_exec_destroy(ge), GRT_OK);
  assert_int_not_equal(grt_device_segment_size(dev, p, &size), GRT_OK); /* back to the device */
  assert_int_equal(grt_exec_device_free(exec, r), GRT_OK);

  /* An invalidated capture gives its blocks back too. */
  assert_int_equal(grt_stream_begin_capture(s, GRT_CAPTURE_GLOBAL), GRT_OK);
  assert_int_equal(grt_stream_malloc_async_graph(s, 4096, &p), GRT_OK);
  assert_int_equal(grt_stream_query(s), GRT_ERR_CAPTURE_UNSUPPORTED);
  assert_int_equal(grt_stream_malloc_async_graph(s, 4096, &q), GRT_ERR_CAPTURE_INVALIDATED);
  assert_int_equal(grt_stream_end_capture(s, &g), GRT_ERR_CAPTURE_INVALIDATED);
  grt_device_stats ds;
  assert_int_equal(grt_device_get_stats(dev, &ds), GRT_OK);
  assert_int_equal(ds.segments, 0);
  assert_int_equal(grt_user_event_destroy(gate), GRT_OK);
  assert_int_equal(grt_stream_destroy(s), GRT_OK);
  assert_int_equal(grt_exec_destroy(exec), GRT_OK);
}

static void test_bad_input(void **state) {
  grt_exec *exec = make_exec(clock_of(state), 0);
  grt_exec *other = make_exec(clock_of(state), 0);
  grt_stream *s = make_stream(exec, GRT_STREAM_NON_BLOCKING, "s");
  grt_stream *so = make_stream(other, GRT_STREAM_NON_BLOCKING, "so");
  order_log log = {0};
  log_arg a[2] = {{&log, 0}, {&log, 1}};
  grt_graph *g = capture_chain(s, a, 2, 0);
  grt_graph_exec *ge;
  assert_int_equal(grt_graph_instantiate(NULL, &ge), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt_graph_instantiate(g, NULL), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt_graph_instantiate(g, &ge), GRT_OK);
  uint64_t junk[16] = {0};
  assert_int_equal(grt_graph_launch(NULL, s), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt_graph_launch((grt_graph_exec *)junk, s), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt_graph_launch(ge, NULL), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt_graph_launch(ge, so), GRT_ERR_WRONG_DEVICE);
  assert_int_equal(grt_graph_exec_update(ge, (grt_graph *)junk, NULL), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt_exec_destroy(exec) == GRT_ERR_BUSY, 1); /* live graph, executable graph, stream */
  /* launching into a capturing stream is refused and invalidates the capture */
  assert_int_equal(grt_stream_begin_capture(s, GRT_CAPTURE_GLOBAL), GRT_OK);
  assert_int_equal(grt_graph_launch(ge, s), GRT_ERR_CAPTURE_UNSUPPORTED);
  grt_graph *g2 = (grt_graph *)&g2;
  assert_int_equal(grt_stream_end_capture(s, &g2), GRT_ERR_CAPTURE_INVALIDATED);
  assert_null(g2);
  assert_int_equal(grt_graph_launch(ge, s), GRT_OK); /* nothing leaked into later work */
  assert_int_equal(grt_stream_synchronize(s), GRT_OK);
  assert_int_equal(atomic_load(&log.n), 2);
  assert_int_equal(grt_graph_destroy(g), GRT_OK);
  assert_int_equal(grt_graph_destroy(g), GRT_ERR_INVALID_HANDLE);
  grt_graph_exec *ge2 = (grt_graph_exec *)&ge2;
  assert_int_equal(grt_graph_instantiate(g, &ge2), GRT_ERR_INVALID_HANDLE);
  assert_null(ge2);
  size_t n;
  assert_int_equal(grt_graph_node_count(g, &n), GRT_ERR_INVALID_HANDLE);
  assert_int_equal(grt_graph_exec_destroy(ge), GRT_OK);
  assert_int_equal(grt_graph_exec_destroy(ge), GRT_ERR_INVALID_HANDLE);
  assert_int_equal(grt_graph_exec_destroy(NULL), GRT_OK);
  assert_int_equal(grt_graph_destroy(NULL), GRT_OK);
  assert_int_equal(grt_stream_destroy(s), GRT_OK);
  assert_int_equal(grt_stream_destroy(so), GRT_OK);
  assert_int_equal(grt_exec_destroy(exec), GRT_OK);
  assert_int_equal(grt_exec_destroy(other), GRT_OK);
}

/* A node body failing (a range freed under it) puts the exec in its sticky
 * error; the launch is cancelled and the stream drains. */
static void test_sticky_error_in_graph(void **state) {
  grt_exec *exec = make_exec(clock_of(state), 0);
  grt_stream *s = make_stream(exec, GRT_STREAM_NON_BLOCKING, "s");
  grt_devptr buf;
  assert_int_equal(grt_exec_device_malloc(exec, 4096, &buf), GRT_OK);
  order_log log = {0};
  log_arg a = {&log, 1};
  assert_int_equal(grt_stream_begin_capture(s, GRT_CAPTURE_GLOBAL), GRT_OK);
  assert_int_equal(grt_memset_async(s, buf, 0, 4096), GRT_OK);
  launch_logged(s, &a, 0);
  grt_graph *g;
  assert_int_equal(grt_stream_end_capture(s, &g), GRT_OK);
  grt_graph_exec *ge;
  assert_int_equal(grt_graph_instantiate(g, &ge), GRT_OK);
  assert_int_equal(grt_exec_device_free(exec, buf), GRT_OK);
  assert_int_equal(grt_graph_launch(ge, s), GRT_OK);
  assert_int_equal(grt_stream_synchronize(s), GRT_ERR_UNKNOWN_POINTER);
  assert_int_equal(atomic_load(&log.n), 0); /* the kernel after the failed memset never ran */
  assert_int_equal(grt_graph_exec_destroy(ge), GRT_OK);
  assert_int_equal(grt_graph_destroy(g), GRT_OK);
  assert_int_equal(grt_stream_destroy(s), GRT_OK);
  assert_int_equal(grt_exec_destroy(exec), GRT_OK);
}

/* The launch is a slice on its stream spanning its nodes' slices. */
static void test_timeline_nested(void **state) {
  grt_exec *exec = make_exec(clock_of(state), 1);
  grt_stream *s = make_stream(exec, GRT_STREAM_NON_BLOCKING, "s");
  order_log log = {0};
  log_arg a[3] = {{&log, 0}, {&log, 1}, {&log, 2}};
  grt_graph *g = capture_chain(s, a, 3, 1000);
  assert_int_equal(grt_graph_set_name(g, "decode"), GRT_OK);
  grt_graph_exec *ge;
  assert_int_equal(grt_graph_instantiate(g, &ge), GRT_OK);
  assert_int_equal(grt_graph_launch(ge, s), GRT_OK);
  assert_int_equal(grt_stream_synchronize(s), GRT_OK);
  pthread_mutex_lock(&exec->lock);
  const grt__trace_rec *launch = NULL;
  int nodes = 0;
  for (size_t i = 0; i < exec->trace_n; i++)
    if (exec->trace[i].kind == GRT__OP_GRAPH) launch = &exec->trace[i];
  assert_non_null(launch);
  assert_string_equal(launch->name, "decode");
  for (size_t i = 0; i < exec->trace_n; i++) {
    const grt__trace_rec *r = &exec->trace[i];
    if (r->kind != GRT__OP_KERNEL) continue;
    nodes++;
    assert_true(r->start_ns >= launch->start_ns && r->end_ns <= launch->end_ns);
    assert_int_equal(r->stream_id, launch->stream_id);
  }
  pthread_mutex_unlock(&exec->lock);
  assert_int_equal(nodes, 3);
  if (clock_of(state) == GRT_CLOCK_VIRTUAL) assert_int_equal(launch->end_ns - launch->start_ns, 3000);
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  assert_int_equal(grt_exec_timeline_write_json(exec, f), GRT_OK);
  fclose(f);
  assert_non_null(strstr(buf, "\"cat\":\"graph launch\""));
  free(buf);
  assert_int_equal(grt_graph_exec_destroy(ge), GRT_OK);
  assert_int_equal(grt_graph_destroy(g), GRT_OK);
  assert_int_equal(grt_stream_destroy(s), GRT_OK);
  assert_int_equal(grt_exec_destroy(exec), GRT_OK);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      BOTH_CLOCKS(test_launch_order),    BOTH_CLOCKS(test_update),
      BOTH_CLOCKS(test_memory_nodes),    BOTH_CLOCKS(test_bad_input),
      BOTH_CLOCKS(test_sticky_error_in_graph), BOTH_CLOCKS(test_timeline_nested),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
