/* test_exec_graph_edit.c — graphs built and edited node by node, under both
 * clocks (exact figures on the virtual clock, orders under threads): every
 * node kind (kernel, host, memcpy, memset, empty, event record and wait,
 * child graph), edges added and removed in any order (a cycle is refused
 * and changes nothing), nodes destroyed, the snapshot instantiate takes,
 * handles that outlive their nodes, and the bad input of each call. */
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "test_exec_common.h"

#define NODE_FN(name) static void name(void *arg) { log_body(arg); }
NODE_FN(host_log)

static grt_graph *new_graph(grt_exec *exec) {
  grt_graph *g = NULL;
  assert_int_equal(grt_graph_create(exec, &g), GRT_OK);
  return g;
}

/* A kernel node of ns that logs a (NULL deps: a root). */
static grt_graph_node *kernel(grt_graph *g, grt_graph_node **deps, size_t n, log_arg *a, uint64_t ns) {
  grt_kernel_desc d = {a ? log_body : NULL, a, ns, GRT_ENGINE_COMPUTE, "k"};
  grt_graph_node *node = NULL;
  assert_int_equal(grt_graph_add_kernel_node(g, deps, n, &d, &node), GRT_OK);
  assert_non_null(node);
  return node;
}

static size_t count_nodes(grt_graph *g) {
  size_t n = 0;
  assert_int_equal(grt_graph_node_count(g, &n), GRT_OK);
  return n;
}

static size_t count_edges(grt_graph *g) {
  size_t n = 0;
  assert_int_equal(grt_graph_edge_count(g, &n), GRT_OK);
  return n;
}

/* Every node kind in one graph: a diamond of kernels, a memset, a copy back
 * to the host, a host node, an empty join. */
static void test_build_and_launch(void **state) {
  grt_exec *exec = make_exec(clock_of(state), 0);
  grt_stream *s = make_stream(exec, GRT_STREAM_NON_BLOCKING, "s");
  grt_devptr buf;
  assert_int_equal(grt_exec_device_malloc(exec, 4096, &buf), GRT_OK);
  unsigned char host[4096];
  memset(host, 0, sizeof host);
  order_log log = {0};
  log_arg a[4] = {{&log, 1}, {&log, 2}, {&log, 3}, {&log, 4}};
  grt_graph *g = new_graph(exec);
  grt_graph_node *k1 = kernel(g, NULL, 0, &a[0], 1000);
  grt_graph_node *ms;
  assert_int_equal(grt_graph_add_memset_node(g, &k1, 1, buf, 0x7e, 4096, &ms), GRT_OK);
  grt_graph_node *hn;
  assert_int_equal(grt_graph_add_host_node(g, &k1, 1, host_log, &a[1], &hn), GRT_OK);
  grt_memcpy_desc cp = {GRT_MEMCPY_D2H, 0, buf, host, 4096};
  grt_graph_node *d2h;
  assert_int_equal(grt_graph_add_memcpy_node(g, &ms, 1, &cp, &d2h), GRT_OK);
  grt_graph_node *join, *two[2] = {hn, d2h};
  assert_int_equal(grt_graph_add_empty_node(g, two, 2, &join), GRT_OK);
  grt_graph_node *k2 = kernel(g, &join, 1, &a[2], 500);
  assert_int_equal(count_nodes(g), 6);
  assert_int_equal(count_edges(g), 6);
  grt_graph_node *nodes[8];
  size_t n = 8;
  assert_int_equal(grt_graph_get_nodes(g, nodes, &n), GRT_OK);
  assert_int_equal(n, 6);
  assert_ptr_equal(nodes[0], k1);
  assert_ptr_equal(nodes[5], k2);
  assert_null(nodes[6]);
  grt_graph_node_type want[] = {GRT_GRAPH_NODE_KERNEL, GRT_GRAPH_NODE_MEMSET, GRT_GRAPH_NODE_HOST,
                                GRT_GRAPH_NODE_MEMCPY, GRT_GRAPH_NODE_EMPTY, GRT_GRAPH_NODE_KERNEL};
  for (int i = 0; i < 6; i++) {
    grt_graph_node_type t;
    assert_int_equal(grt_graph_node_get_type(nodes[i], &t), GRT_OK);
    assert_int_equal(t, want[i]);
  }
  n = 0;
  assert_int_equal(grt_graph_get_nodes(g, NULL, &n), GRT_OK);
  assert_int_equal(n, 6);
  grt_graph_exec *ge;
  assert_int_equal(grt_graph_instantiate(g, &ge), GRT_OK);
  grt_op_id id;
  assert_int_equal(grt_graph_launch_ex(ge, s, &id), GRT_OK);
  assert_int_equal(grt_stream_synchronize(s), GRT_OK);
  assert_int_equal(host[0], 0x7e);
  assert_int_equal(host[4095], 0x7e);
  assert_int_equal(atomic_load(&log.n), 3);
  assert_int_equal(log.items[0], 1);
  assert_int_equal(log.items[2], 3); /* after the join */
  uint64_t t0, t1, ms_ns, cp_ns;
  assert_int_equal(grt_exec_op_times(exec, id, &t0, &t1), GRT_OK);
  assert_int_equal(grt_exec_copy_duration_ns(exec, GRT_ENGINE_COMPUTE, 4096, &ms_ns), GRT_OK);
  assert_int_equal(grt_exec_copy_duration_ns(exec, GRT_ENGINE_COPY_D2H, 4096, &cp_ns), GRT_OK);
  if (clock_of(state) == GRT_CLOCK_VIRTUAL) {
    assert_int_equal(t0, 0);
    assert_int_equal(t1, 1000 + ms_ns + cp_ns + 500); /* the memset-copy path; the host node takes none */
  } else {
    assert_true(t1 - t0 >= 1000 + ms_ns + cp_ns + 500);
  }
  assert_int_equal(grt_graph_exec_destroy(ge), GRT_OK);
  assert_int_equal(grt_graph_destroy(g), GRT_OK);
  grt_graph_node_type t;
  assert_int_equal(grt_graph_node_get_type(k1, &t), GRT_ERR_INVALID_HANDLE); /* the handle outlives the graph */
  assert_int_equal(grt_exec_device_free(exec, buf), GRT_OK);
  assert_int_equal(grt_stream_destroy(s), GRT_OK);
  assert_int_equal(grt_exec_destroy(exec), GRT_OK);
}

/* Edges in any order; a cycle is refused and the call changes nothing. */
static void test_edges_and_cycles(void **state) {
  grt_exec *exec = make_exec(clock_of(state), 0);
  grt_stream *s = make_stream(exec, GRT_STREAM_NON_BLOCKING, "s");
  order_log log = {0};
  log_arg a[3] = {{&log, 0}, {&log, 1}, {&log, 2}};
  grt_graph *g = new_graph(exec);
  grt_graph_node *x = kernel(g, NULL, 0, &a[0], 1000);
  grt_graph_node *y = kernel(g, NULL, 0, &a[1], 2000);
  grt_graph_node *z = kernel(g, NULL, 0, &a[2], 3000);
  /* z -> y -> x: every edge points at an earlier node's dependent, backwards in creation order */
  grt_graph_node *from[2] = {z, y}, *to[2] = {y, x};
  assert_int_equal(grt_graph_add_dependencies(g, from, to, 2), GRT_OK);
  assert_int_equal(count_edges(g), 2);
  assert_int_equal(grt_graph_add_dependencies(g, &z, &y, 1), GRT_ERR_INVALID_ARG); /* exists */
  assert_int_equal(grt_graph_add_dependencies(g, &x, &z, 1), GRT_ERR_GRAPH_CYCLE);
  assert_int_equal(grt_graph_add_dependencies(g, &x, &x, 1), GRT_ERR_GRAPH_CYCLE); /* on itself */
  grt_graph_node *f2[2] = {z, x}, *t2[2] = {x, z}; /* z -> x is fine, then x -> z closes a cycle */
  assert_int_equal(grt_graph_add_dependencies(g, f2, t2, 2), GRT_ERR_GRAPH_CYCLE);
  assert_int_equal(count_edges(g), 2); /* the first of the two was taken back */
  grt_graph_node *f3[2] = {z, z}, *t3[2] = {x, x};
  assert_int_equal(grt_graph_add_dependencies(g, f3, t3, 2), GRT_ERR_INVALID_ARG); /* twice in one call */
  assert_int_equal(grt_graph_add_dependencies(g, NULL, t3, 1), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt_graph_add_dependencies(g, NULL, NULL, 0), GRT_OK);
  assert_int_equal(count_edges(g), 2);
  uint64_t t0, t1;
  grt_graph_exec *ge;
  assert_int_equal(grt_graph_instantiate(g, &ge), GRT_OK);
  grt_op_id id;
  assert_int_equal(grt_graph_launch_ex(ge, s, &id), GRT_OK);
  assert_int_equal(grt_stream_synchronize(s), GRT_OK);
  assert_int_equal(grt_exec_op_times(exec, id, &t0, &t1), GRT_OK);
  int want[] = {2, 1, 0};
  for (int i = 0; i < 3; i++) assert_int_equal(log.items[i], want[i]);
  if (clock_of(state) == GRT_CLOCK_VIRTUAL) assert_int_equal(t1 - t0, 6000); /* a chain */
  /* Without z -> y, y and z run side by side: 3000 + 1000. */
  assert_int_equal(grt_graph_remove_dependencies(g, &x, &y, 1), GRT_ERR_NOT_FOUND);
  assert_int_equal(grt_graph_remove_dependencies(g, &z, &y, 1), GRT_OK);
  assert_int_equal(grt_graph_remove_dependencies(g, &z, &y, 1), GRT_ERR_NOT_FOUND);
  assert_int_equal(count_edges(g), 1);
  grt_graph_exec *ge2;
  assert_int_equal(grt_graph_instantiate(g, &ge2), GRT_OK);
  assert_int_equal(grt_graph_launch_ex(ge2, s, &id), GRT_OK);
  assert_int_equal(grt_stream_synchronize(s), GRT_OK);
  assert_int_equal(grt_exec_op_times(exec, id, &t0, &t1), GRT_OK);
  if (clock_of(state) == GRT_CLOCK_VIRTUAL) assert_int_equal(t1 - t0, 3000);
  else assert_true(t1 - t0 >= 3000);
  /* Nodes of another graph, of another exec. */
  grt_graph *h = new_graph(exec);
  grt_graph_node *w = kernel(h, NULL, 0, NULL, 0);
  assert_int_equal(grt_graph_add_dependencies(g, &w, &x, 1), GRT_ERR_INVALID_ARG);
  grt_graph_node *v;
  assert_int_equal(grt_graph_add_empty_node(g, &w, 1, &v), GRT_ERR_INVALID_ARG);
  grt_exec *other = make_exec(clock_of(state), 0);
  grt_graph *og = new_graph(other);
  grt_graph_node *o = kernel(og, NULL, 0, NULL, 0);
  assert_int_equal(grt_graph_add_dependencies(g, &o, &x, 1), GRT_ERR_WRONG_DEVICE);
  grt_graph_node *dup[2] = {x, x};
  assert_int_equal(grt_graph_add_empty_node(g, dup, 2, &v), GRT_ERR_INVALID_ARG); /* CUDA: no duplicates */
  assert_int_equal(count_nodes(g), 3);
  assert_int_equal(grt_graph_destroy(og), GRT_OK);
  assert_int_equal(grt_exec_destroy(other), GRT_OK);
  assert_int_equal(grt_graph_exec_destroy(ge), GRT_OK);
  assert_int_equal(grt_graph_exec_destroy(ge2), GRT_OK);
  assert_int_equal(grt_graph_destroy(h), GRT_OK);
  assert_int_equal(grt_graph_destroy(g), GRT_OK);
  assert_int_equal(grt_stream_destroy(s), GRT_OK);
  assert_int_equal(grt_exec_destroy(exec), GRT_OK);
}

/* Destroying a node severs its edges both ways; the other handles stay right. */
static void test_destroy_node(void **state) {
  grt_exec *exec = make_exec(clock_of(state), 0);
  grt_stream *s = make_stream(exec, GRT_STREAM_NON_BLOCKING, "s");
  order_log log = {0};
  log_arg a[4] = {{&log, 0}, {&log, 1}, {&log, 2}, {&log, 3}};
  grt_graph *g = new_graph(exec);
  grt_graph_node *k0 = kernel(g, NULL, 0, &a[0], 1000);
  grt_graph_node *k1 = kernel(g, &k0, 1, &a[1], 1000);
  grt_graph_node *k2 = kernel(g, &k1, 1, &a[2], 1000);
  grt_graph_node *hn, *two[2] = {k0, k2};
  assert_int_equal(grt_graph_add_host_node(g, two, 2, host_log, &a[3], &hn), GRT_OK);
  assert_int_equal(count_edges(g), 4);
  assert_int_equal(grt_graph_destroy_node(k1), GRT_OK);
  assert_int_equal(grt_graph_destroy_node(k1), GRT_ERR_INVALID_HANDLE);
  grt_graph_node_type t;
  assert_int_equal(grt_graph_node_get_type(k1, &t), GRT_ERR_INVALID_HANDLE);
  assert_int_equal(grt_graph_add_dependencies(g, &k1, &k2, 1), GRT_ERR_INVALID_HANDLE);
  assert_int_equal(count_nodes(g), 3);
  assert_int_equal(count_edges(g), 2); /* k0 -> hn, k2 -> hn */
  assert_int_equal(grt_graph_node_get_type(hn, &t), GRT_OK);
  assert_int_equal(t, GRT_GRAPH_NODE_HOST);
  assert_int_equal(grt_graph_add_dependencies(g, &k0, &k2, 1), GRT_OK); /* k2 moved down: its handle follows */
  grt_graph_exec *ge;
  assert_int_equal(grt_graph_instantiate(g, &ge), GRT_OK);
  grt_op_id id;
  assert_int_equal(grt_graph_launch_ex(ge, s, &id), GRT_OK);
  assert_int_equal(grt_stream_synchronize(s), GRT_OK);
  assert_int_equal(atomic_load(&log.n), 3);
  int want[] = {0, 2, 3};
  for (int i = 0; i < 3; i++) assert_int_equal(log.items[i], want[i]);
  uint64_t t0, t1;
  assert_int_equal(grt_exec_op_times(exec, id, &t0, &t1), GRT_OK);
  if (clock_of(state) == GRT_CLOCK_VIRTUAL) assert_int_equal(t1 - t0, 2000);
  assert_int_equal(grt_graph_destroy_node(NULL), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt_graph_exec_destroy(ge), GRT_OK);
  assert_int_equal(grt_graph_destroy(g), GRT_OK);
  assert_int_equal(grt_graph_destroy_node(k0), GRT_ERR_INVALID_HANDLE);
  assert_int_equal(grt_stream_destroy(s), GRT_OK);
  assert_int_equal(grt_exec_destroy(exec), GRT_OK);
}

/* Instantiate takes a snapshot: later edits of the graph, or of a child
 * graph's source, change no executable graph. */
static void test_snapshot(void **state) {
  grt_exec *exec = make_exec(clock_of(state), 0);
  grt_stream *s = make_stream(exec, GRT_STREAM_NON_BLOCKING, "s");
  order_log log = {0};
  log_arg a[5] = {{&log, 0}, {&log, 1}, {&log, 2}, {&log, 3}, {&log, 4}};
  grt_graph *child = new_graph(exec);
  kernel(child, NULL, 0, &a[3], 100);
  grt_graph *g = new_graph(exec);
  grt_graph_node *k0 = kernel(g, NULL, 0, &a[0], 100);
  grt_graph_node *k1 = kernel(g, &k0, 1, &a[1], 100);
  grt_graph_node *c;
  assert_int_equal(grt_graph_add_child_graph_node(g, &k1, 1, child, &c), GRT_OK);
  kernel(child, NULL, 0, &a[4], 100); /* after the clone: not in g */
  grt_graph_exec *ge;
  assert_int_equal(grt_graph_instantiate(g, &ge), GRT_OK);
  kernel(g, &c, 1, &a[2], 100);
  assert_int_equal(grt_graph_remove_dependencies(g, &k0, &k1, 1), GRT_OK);
  assert_int_equal(grt_graph_destroy_node(k0), GRT_OK);
  assert_int_equal(grt_graph_destroy(child), GRT_OK);
  size_t nodes = 0;
  assert_int_equal(grt_graph_exec_info(ge, &nodes, NULL), GRT_OK);
  assert_int_equal(nodes, 5); /* k0, k1, the child's entry, its kernel, its exit */
  assert_int_equal(grt_graph_launch(ge, s), GRT_OK);
  assert_int_equal(grt_stream_synchronize(s), GRT_OK);
  assert_int_equal(atomic_load(&log.n), 3);
  int want[] = {0, 1, 3};
  for (int i = 0; i < 3; i++) assert_int_equal(log.items[i], want[i]);
  /* The edited graph itself: k1, the child, k2 (k1 is a root now). */
  atomic_store(&log.n, 0);
  grt_graph_exec *ge2;
  assert_int_equal(grt_graph_instantiate(g, &ge2), GRT_OK);
  assert_int_equal(grt_graph_launch(ge2, s), GRT_OK);
  assert_int_equal(grt_stream_synchronize(s), GRT_OK);
  int want2[] = {1, 3, 2};
  assert_int_equal(atomic_load(&log.n), 3);
  for (int i = 0; i < 3; i++) assert_int_equal(log.items[i], want2[i]);
  assert_int_equal(grt_graph_exec_destroy(ge), GRT_OK);
  assert_int_equal(grt_graph_exec_destroy(ge2), GRT_OK);
  assert_int_equal(grt_graph_destroy(g), GRT_OK);
  assert_int_equal(grt_stream_destroy(s), GRT_OK);
  assert_int_equal(grt_exec_destroy(exec), GRT_OK);
}

/* A child graph runs inlined: after its node's dependencies, before its dependents. */
static void test_child_graph(void **state) {
  grt_exec *exec = make_exec(clock_of(state), 0);
  grt_stream *s = make_stream(exec, GRT_STREAM_NON_BLOCKING, "s");
  order_log log = {0};
  log_arg a[5] = {{&log, 0}, {&log, 1}, {&log, 2}, {&log, 3}, {&log, 4}};
  grt_graph *inner = new_graph(exec);
  kernel(inner, NULL, 0, &a[4], 300);
  grt_graph *child = new_graph(exec);
  kernel(child, NULL, 0, &a[1], 1000);
  grt_graph_node *c2 = kernel(child, NULL, 0, &a[2], 2000);
  grt_graph_node *cc;
  assert_int_equal(grt_graph_add_child_graph_node(child, &c2, 1, inner, &cc), GRT_OK); /* nested */
  grt_graph *empty = new_graph(exec);
  grt_graph *g = new_graph(exec);
  grt_graph_node *k0 = kernel(g, NULL, 0, &a[0], 500);
  grt_graph_node *c, *e;
  assert_int_equal(grt_graph_add_child_graph_node(g, &k0, 1, child, &c), GRT_OK);
  assert_int_equal(grt_graph_add_child_graph_node(g, &c, 1, empty, &e), GRT_OK);
  kernel(g, &e, 1, &a[3], 100);
  grt_graph_node_type t;
  assert_int_equal(grt_graph_node_get_type(c, &t), GRT_OK);
  assert_int_equal(t, GRT_GRAPH_NODE_GRAPH);
  grt_graph_exec *ge;
  assert_int_equal(grt_graph_instantiate(g, &ge), GRT_OK);
  grt_op_id id;
  assert_int_equal(grt_graph_launch_ex(ge, s, &id), GRT_OK);
  assert_int_equal(grt_stream_synchronize(s), GRT_OK);
  assert_int_equal(atomic_load(&log.n), 5);
  assert_int_equal(log.items[0], 0);
  assert_int_equal(log.items[4], 3); /* after the whole child, nested graph included */
  assert_true(log_pos(&log, 4) > log_pos(&log, 2));
  uint64_t t0, t1;
  assert_int_equal(grt_exec_op_times(exec, id, &t0, &t1), GRT_OK);
  if (clock_of(state) == GRT_CLOCK_VIRTUAL) assert_int_equal(t1 - t0, 500 + 2000 + 300 + 100);
  else assert_true(t1 - t0 >= 2900);
  /* A graph with memory nodes cannot be a child (CUDA). */
  grt_graph *mem = new_graph(exec);
  grt_devptr p;
  grt_graph_node *an;
  assert_int_equal(grt_graph_add_mem_alloc_node(mem, NULL, 0, 4096, &p, &an), GRT_OK);
  grt_graph_node *bad = (grt_graph_node *)&bad;
  assert_int_equal(grt_graph_add_child_graph_node(g, NULL, 0, mem, &bad), GRT_ERR_NOT_PERMITTED);
  assert_ptr_equal(bad, (grt_graph_node *)&bad); /* not written */
  assert_int_equal(grt_graph_add_child_graph_node(g, NULL, 0, NULL, &bad), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt_graph_destroy(mem), GRT_OK);
  assert_int_equal(grt_graph_add_child_graph_node(g, NULL, 0, mem, &bad), GRT_ERR_INVALID_HANDLE);
  assert_int_equal(grt_graph_exec_destroy(ge), GRT_OK);
  assert_int_equal(grt_graph_destroy(g), GRT_OK);
  assert_int_equal(grt_graph_destroy(child), GRT_OK);
  assert_int_equal(grt_graph_destroy(inner), GRT_OK);
  assert_int_equal(grt_graph_destroy(empty), GRT_OK);
  assert_int_equal(grt_stream_destroy(s), GRT_OK);
  assert_int_equal(grt_exec_destroy(exec), GRT_OK);
}

/* Event nodes act at the launch: a wait binds to the event's snapshot when
 * the launch is issued; a record makes the event stand for the launch, and
 * stamps the node's time. */
static void test_event_nodes(void **state) {
  grt_exec *exec = make_exec(clock_of(state), 0);
  grt_stream *s = make_stream(exec, GRT_STREAM_NON_BLOCKING, "s");
  grt_stream *t = make_stream(exec, GRT_STREAM_NON_BLOCKING, "t");
  grt_event *start, *mid, *gate_ev;
  assert_int_equal(grt_event_create(exec, 0, &start), GRT_OK);
  assert_int_equal(grt_event_create(exec, 0, &mid), GRT_OK);
  assert_int_equal(grt_event_create(exec, GRT_EVENT_DISABLE_TIMING, &gate_ev), GRT_OK);
  /* g: k (1000) -> record mid -> k (3000). */
  grt_graph *g = new_graph(exec);
  grt_graph_node *k0 = kernel(g, NULL, 0, NULL, 1000);
  grt_graph_node *rec;
  assert_int_equal(grt_graph_add_event_record_node(g, &k0, 1, mid, &rec), GRT_OK);
  kernel(g, &rec, 1, NULL, 3000);
  /* h: wait gate_ev -> k (100). */
  grt_graph *h = new_graph(exec);
  grt_graph_node *wn;
  assert_int_equal(grt_graph_add_event_wait_node(h, NULL, 0, gate_ev, &wn), GRT_OK);
  kernel(h, &wn, 1, NULL, 100);
  grt_graph_exec *ge, *he;
  assert_int_equal(grt_graph_instantiate(g, &ge), GRT_OK);
  assert_int_equal(grt_graph_instantiate(h, &he), GRT_OK);

  grt_user_event *gate;
  assert_int_equal(grt_user_event_create(exec, "gate", &gate), GRT_OK);
  assert_int_equal(grt_stream_wait_user_event(s, gate, 1), GRT_OK); /* the queries below see the launch pending */
  assert_int_equal(grt_event_record(start, s), GRT_OK);
  assert_int_equal(grt_event_query(mid), GRT_OK); /* never recorded */
  grt_op_id lg, lh, kt;
  assert_int_equal(grt_graph_launch_ex(ge, s, &lg), GRT_OK); /* [0, 4000] */
  assert_int_equal(grt_event_query(mid), GRT_ERR_NOT_READY);  /* it stands for the launch now */
  assert_int_equal(grt_stream_wait_event(t, mid), GRT_OK);
  grt_kernel_desc k5 = {NULL, NULL, 5000, GRT_ENGINE_COMPUTE, "after mid"};
  assert_int_equal(grt_launch_kernel_ex(t, &k5, &kt), GRT_OK); /* [4000, 9000] */
  assert_int_equal(grt_event_record(gate_ev, t), GRT_OK);
  assert_int_equal(grt_graph_launch_ex(he, s, &lh), GRT_OK); /* binds to t's 9000 */
  assert_int_equal(grt_user_event_signal(gate, 1), GRT_OK);
  assert_int_equal(grt_exec_synchronize(exec), GRT_OK);
  assert_int_equal(grt_user_event_destroy(gate), GRT_OK);
  uint64_t a0, a1, b0, b1, c0, c1;
  assert_int_equal(grt_exec_op_times(exec, lg, &a0, &a1), GRT_OK);
  assert_int_equal(grt_exec_op_times(exec, kt, &b0, &b1), GRT_OK);
  assert_int_equal(grt_exec_op_times(exec, lh, &c0, &c1), GRT_OK);
  int64_t el = 0;
  assert_int_equal(grt_event_elapsed_ns(start, mid, &el), GRT_OK);
  if (clock_of(state) == GRT_CLOCK_VIRTUAL) {
    assert_int_equal(a0, 0);
    assert_int_equal(a1, 4000);
    assert_int_equal(el, 1000); /* the record node's own time */
    assert_int_equal(b0, 4000); /* waits see the whole launch */
    assert_int_equal(c0, 9000);
    assert_int_equal(c1, 9100);
  } else {
    assert_true(el >= 1000);
    assert_true(b0 >= a1 && c0 >= b1);
  }
  /* A destroyed event refuses the launch; nothing changes. */
  assert_int_equal(grt_event_destroy(gate_ev), GRT_OK);
  assert_int_equal(grt_graph_launch(he, s), GRT_ERR_INVALID_HANDLE);
  assert_int_equal(grt_graph_exec_destroy(he), GRT_OK); /* nothing pending */
  grt_graph_node *x;
  assert_int_equal(grt_graph_add_event_record_node(h, NULL, 0, gate_ev, &x), GRT_ERR_INVALID_HANDLE);
  assert_int_equal(grt_graph_add_event_wait_node(h, NULL, 0, NULL, &x), GRT_ERR_INVALID_ARG);
  grt_exec *other = make_exec(clock_of(state), 0);
  grt_event *oev;
  assert_int_equal(grt_event_create(other, 0, &oev), GRT_OK);
  assert_int_equal(grt_graph_add_event_wait_node(h, NULL, 0, oev, &x), GRT_ERR_WRONG_DEVICE);
  assert_int_equal(grt_event_destroy(oev), GRT_OK);
  assert_int_equal(grt_exec_destroy(other), GRT_OK);
  assert_int_equal(grt_graph_exec_destroy(ge), GRT_OK);
  assert_int_equal(grt_graph_destroy(g), GRT_OK);
  assert_int_equal(grt_graph_destroy(h), GRT_OK);
  assert_int_equal(grt_event_destroy(start), GRT_OK);
  assert_int_equal(grt_event_destroy(mid), GRT_OK);
  assert_int_equal(grt_stream_destroy(s), GRT_OK);
  assert_int_equal(grt_stream_destroy(t), GRT_OK);
  assert_int_equal(grt_exec_destroy(exec), GRT_OK);
}

/* Memory nodes built by hand follow the captured ones' rules. */
static void test_memory_nodes(void **state) {
  grt_exec *exec = make_exec(clock_of(state), 0);
  grt_stream *s = make_stream(exec, GRT_STREAM_NON_BLOCKING, "s");
  grt_graph *g = new_graph(exec);
  grt_devptr p, q;
  grt_graph_node *ap, *aq, *ms, *fp;
  assert_int_equal(grt_graph_add_mem_alloc_node(g, NULL, 0, 4096, &p, &ap), GRT_OK);
  assert_int_equal(grt_graph_add_mem_alloc_node(g, NULL, 0, 1024, &q, &aq), GRT_OK);
  assert_int_equal(grt_graph_add_memset_node(g, &ap, 1, p, 1, 4096, &ms), GRT_OK);
  assert_int_equal(grt_graph_add_mem_free_node(g, &ms, 1, p, &fp), GRT_OK);
  grt_graph_node *x;
  assert_int_equal(grt_graph_add_mem_free_node(g, NULL, 0, p, &x), GRT_ERR_DOUBLE_FREE); /* once per graph */
  assert_int_equal(grt_graph_add_mem_free_node(g, NULL, 0, p + 16, &x), GRT_ERR_UNKNOWN_POINTER);
  assert_int_equal(grt_graph_add_mem_alloc_node(g, NULL, 0, 64 * GRT_MiB, &p, &x), GRT_ERR_SIZE);
  assert_int_equal(count_nodes(g), 4);
  /* CUDA: a graph with memory nodes keeps its nodes and edges. */
  assert_int_equal(grt_graph_destroy_node(ms), GRT_ERR_NOT_PERMITTED);
  assert_int_equal(grt_graph_remove_dependencies(g, &ap, &ms, 1), GRT_ERR_NOT_PERMITTED);
  grt_graph_node_type t;
  assert_int_equal(grt_graph_node_get_type(aq, &t), GRT_OK);
  assert_int_equal(t, GRT_GRAPH_NODE_MEM_ALLOC);
  grt_graph_exec *ge, *ge2;
  assert_int_equal(grt_graph_instantiate(g, &ge), GRT_OK);
  assert_int_equal(grt_graph_instantiate(g, &ge2), GRT_ERR_BUSY);
  uint64_t pool;
  assert_int_equal(grt_graph_exec_info(ge, NULL, &pool), GRT_OK);
  assert_int_equal(pool, 4096 + 1024);
  assert_int_equal(grt_graph_launch(ge, s), GRT_OK);
  assert_int_equal(grt_graph_launch(ge, s), GRT_ERR_INVALID_ARG); /* q is not freed */
  /* Another graph frees q; the owner may not any more. */
  grt_graph *f = new_graph(exec);
  grt_graph_node *fq;
  assert_int_equal(grt_graph_add_mem_free_node(f, NULL, 0, q, &fq), GRT_OK);
  assert_int_equal(grt_graph_add_mem_free_node(g, NULL, 0, q, &x), GRT_ERR_DOUBLE_FREE);
  assert_int_equal(grt_graph_add_mem_free_node(f, NULL, 0, p, &x), GRT_ERR_DOUBLE_FREE); /* freed in g */
  grt_graph_exec *fe;
  assert_int_equal(grt_graph_instantiate(f, &fe), GRT_OK);
  assert_int_equal(grt_graph_launch(fe, s), GRT_OK);
  assert_int_equal(grt_graph_launch(ge, s), GRT_OK);
  assert_int_equal(grt_stream_synchronize(s), GRT_OK);
  assert_int_equal(grt_graph_exec_destroy(fe), GRT_OK);
  assert_int_equal(grt_graph_exec_destroy(ge), GRT_OK);
  assert_int_equal(grt_graph_destroy(f), GRT_OK);
  assert_int_equal(grt_graph_destroy(g), GRT_OK);
  assert_int_equal(grt_stream_destroy(s), GRT_OK);
  assert_int_equal(grt_exec_destroy(exec), GRT_OK); /* q, live again, goes with the exec */
}

/* Each call's bad input, and that a refusal leaves the graph as it was. */
static void test_bad_input(void **state) {
  grt_exec *exec = make_exec(clock_of(state), 0);
  grt_graph *g = NULL;
  assert_int_equal(grt_graph_create(NULL, &g), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt_graph_create(exec, NULL), GRT_ERR_INVALID_ARG);
  g = new_graph(exec);
  grt_graph_node *k = kernel(g, NULL, 0, NULL, 10), *x = (grt_graph_node *)&x;
  grt_kernel_desc bad = {NULL, NULL, 0, GRT_ENGINE_HOST, "k"};
  assert_int_equal(grt_graph_add_kernel_node(g, NULL, 0, &bad, &x), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt_graph_add_kernel_node(g, NULL, 0, NULL, &x), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt_graph_add_host_node(g, NULL, 0, NULL, NULL, &x), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt_graph_add_empty_node(g, NULL, 1, &x), GRT_ERR_INVALID_ARG); /* deps NULL with n = 1 */
  assert_int_equal(grt_graph_add_empty_node(NULL, NULL, 0, &x), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt_graph_add_empty_node(g, NULL, 0, NULL), GRT_ERR_INVALID_ARG);
  unsigned char host[64];
  grt_memcpy_desc cp = {GRT_MEMCPY_H2D, 0x10, 0, host, 64};
  assert_int_equal(grt_graph_add_memcpy_node(g, NULL, 0, &cp, &x), GRT_ERR_UNKNOWN_POINTER);
  cp.host = NULL;
  assert_int_equal(grt_graph_add_memcpy_node(g, NULL, 0, &cp, &x), GRT_ERR_INVALID_ARG);
  cp.kind = (grt_memcpy_kind)7;
  assert_int_equal(grt_graph_add_memcpy_node(g, NULL, 0, &cp, &x), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt_graph_add_memset_node(g, NULL, 0, 0x10, 0, 64, &x), GRT_ERR_UNKNOWN_POINTER);
  assert_int_equal(grt_graph_add_mem_alloc_node(g, NULL, 0, 64, NULL, &x), GRT_ERR_INVALID_ARG);
  assert_ptr_equal(x, (grt_graph_node *)&x);
  assert_int_equal(count_nodes(g), 1);
  assert_int_equal(count_edges(g), 0);
  size_t n = 0;
  assert_int_equal(grt_graph_get_nodes(g, NULL, NULL), GRT_ERR_INVALID_ARG);
  grt_graph_node *one[1];
  n = 1;
  assert_int_equal(grt_graph_get_nodes(g, one, &n), GRT_OK);
  assert_ptr_equal(one[0], k);
  assert_int_equal(grt_graph_node_get_type(k, NULL), GRT_ERR_INVALID_ARG);
  grt_graph_node_type t;
  assert_int_equal(grt_graph_node_get_type((grt_graph_node *)host, &t), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt_graph_remove_dependencies(g, &k, &k, 1), GRT_ERR_NOT_FOUND);
  assert_int_equal(grt_graph_destroy(g), GRT_OK);
  assert_int_equal(grt_graph_add_empty_node(g, NULL, 0, &x), GRT_ERR_INVALID_HANDLE);
  assert_int_equal(grt_graph_add_dependencies(g, &k, &k, 1), GRT_ERR_INVALID_HANDLE);
  assert_int_equal(grt_exec_destroy(exec), GRT_OK);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      BOTH_CLOCKS(test_build_and_launch), BOTH_CLOCKS(test_edges_and_cycles), BOTH_CLOCKS(test_destroy_node),
      BOTH_CLOCKS(test_snapshot),         BOTH_CLOCKS(test_child_graph),      BOTH_CLOCKS(test_event_nodes),
      BOTH_CLOCKS(test_memory_nodes),     BOTH_CLOCKS(test_bad_input),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
