/* test_exec_graph_update.c — grt_graph_exec_update_ex under both clocks:
 * CUDA's result enum (cudaGraphExecUpdateResult) and the node of the graph
 * that made the update fail (cudaGraphExecUpdateResultInfo: errorNode, and
 * errorFromNode for a mismatched edge), for every result the model gives;
 * a refused update changes nothing, an accepted one changes the parameters
 * of launches issued afterwards only; grt_graph_exec_update, the result-only
 * call, gives the same results. */
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "test_exec_common.h"

static grt_graph *new_graph(grt_exec *exec) {
  grt_graph *g = NULL;
  assert_int_equal(grt_graph_create(exec, &g), GRT_OK);
  return g;
}

static grt_graph_node *kernel_on(grt_graph *g, grt_graph_node **deps, size_t n, log_arg *a, uint64_t ns,
                                 grt_engine_class engine) {
  grt_kernel_desc d = {a ? log_body : NULL, a, ns, engine, "k"};
  grt_graph_node *node = NULL;
  assert_int_equal(grt_graph_add_kernel_node(g, deps, n, &d, &node), GRT_OK);
  return node;
}

static grt_graph_node *kernel(grt_graph *g, grt_graph_node **deps, size_t n, log_arg *a) {
  return kernel_on(g, deps, n, a, 100, GRT_ENGINE_COMPUTE);
}

/* a, b, c with c depending on a (c_on_b: on b). */
static grt_graph *three(grt_exec *exec, bool c_on_b, grt_graph_node **nodes) {
  grt_graph *g = new_graph(exec);
  nodes[0] = kernel(g, NULL, 0, NULL);
  nodes[1] = kernel(g, NULL, 0, NULL);
  nodes[2] = kernel(g, &nodes[c_on_b ? 1 : 0], 1, NULL);
  return g;
}

typedef struct world {
  grt_exec *exec;
  grt_stream *s;
  grt_graph *base;
  grt_graph_exec *ge;
  order_log log;
  log_arg a[4];
} world;

/* ge made from a -> b (kernels logging 0 and 1). */
static void world_init(world *w, grt_clock_kind clock) {
  memset(w, 0, sizeof *w);
  w->exec = make_exec(clock, 0);
  w->s = make_stream(w->exec, GRT_STREAM_NON_BLOCKING, "s");
  for (int i = 0; i < 4; i++) w->a[i] = (log_arg){&w->log, i};
  w->base = new_graph(w->exec);
  grt_graph_node *a = kernel(w->base, NULL, 0, &w->a[0]);
  kernel(w->base, &a, 1, &w->a[1]);
  assert_int_equal(grt_graph_instantiate(w->base, &w->ge), GRT_OK);
}

static void world_end(world *w) {
  assert_int_equal(grt_graph_exec_destroy(w->ge), GRT_OK);
  assert_int_equal(grt_graph_destroy(w->base), GRT_OK);
  assert_int_equal(grt_stream_destroy(w->s), GRT_OK);
  assert_int_equal(grt_exec_destroy(w->exec), GRT_OK);
}

/* Refused with (result, node, from); ge still runs a -> b. */
static void refused(world *w, grt_graph *g, grt_graph_update_result r, grt_graph_node *node, grt_graph_node *from) {
  grt_graph_update_info info;
  assert_int_equal(grt_graph_exec_update_ex(w->ge, g, &info), GRT_ERR_GRAPH_EXEC_UPDATE);
  assert_int_equal(info.result, r);
  assert_ptr_equal(info.error_node, node);
  assert_ptr_equal(info.error_from_node, from);
  atomic_store(&w->log.n, 0);
  assert_int_equal(grt_graph_launch(w->ge, w->s), GRT_OK);
  assert_int_equal(grt_stream_synchronize(w->s), GRT_OK);
  assert_int_equal(atomic_load(&w->log.n), 2);
  assert_int_equal(w->log.items[0], 0);
  assert_int_equal(w->log.items[1], 1);
}

static void test_update_accepts_parameters(void **state) {
  world w;
  world_init(&w, clock_of(state));
  grt_user_event *gate;
  assert_int_equal(grt_user_event_create(w.exec, "gate", &gate), GRT_OK);
  assert_int_equal(grt_stream_wait_user_event(w.s, gate, 1), GRT_OK);
  grt_op_id l1, l2;
  assert_int_equal(grt_graph_launch_ex(w.ge, w.s, &l1), GRT_OK); /* issued with a -> b */
  grt_graph *g = new_graph(w.exec);
  grt_graph_node *a = kernel_on(g, NULL, 0, &w.a[2], 1000, GRT_ENGINE_COMPUTE);
  kernel_on(g, &a, 1, &w.a[3], 3000, GRT_ENGINE_COMPUTE);
  grt_graph_update_info info = {GRT_GRAPH_UPDATE_ERROR, (grt_graph_node *)&info, NULL};
  assert_int_equal(grt_graph_exec_update_ex(w.ge, g, &info), GRT_OK);
  assert_int_equal(info.result, GRT_GRAPH_UPDATE_OK);
  assert_null(info.error_node);
  assert_int_equal(grt_graph_launch_ex(w.ge, w.s, &l2), GRT_OK);
  assert_int_equal(grt_user_event_signal(gate, 1), GRT_OK);
  assert_int_equal(grt_stream_synchronize(w.s), GRT_OK);
  int want[] = {0, 1, 2, 3};
  assert_int_equal(atomic_load(&w.log.n), 4);
  for (int i = 0; i < 4; i++) assert_int_equal(w.log.items[i], want[i]);
  uint64_t t0, t1;
  assert_int_equal(grt_exec_op_times(w.exec, l2, &t0, &t1), GRT_OK);
  if (clock_of(state) == GRT_CLOCK_VIRTUAL) {
    assert_int_equal(t0, 200); /* after the first launch's two 100 ns kernels */
    assert_int_equal(t1, 4200);
  } else {
    assert_true(t1 - t0 >= 4000);
  }
  assert_int_equal(grt_graph_destroy(g), GRT_OK);
  assert_int_equal(grt_user_event_destroy(gate), GRT_OK);
  world_end(&w);
}

static void test_update_results(void **state) {
  world w;
  world_init(&w, clock_of(state));
  /* Another node count: TOPOLOGY_CHANGED, no node named. */
  grt_graph_node *n3[3];
  grt_graph *g3 = three(w.exec, false, n3);
  refused(&w, g3, GRT_GRAPH_UPDATE_TOPOLOGY_CHANGED, NULL, NULL);
  grt_graph_update_result r = GRT_GRAPH_UPDATE_OK;
  assert_int_equal(grt_graph_exec_update(w.ge, g3, &r), GRT_ERR_GRAPH_EXEC_UPDATE); /* the result-only call */
  assert_int_equal(r, GRT_GRAPH_UPDATE_TOPOLOGY_CHANGED);
  /* Another node type: the node of g. */
  grt_graph *gt = new_graph(w.exec);
  grt_graph_node *ta = kernel(gt, NULL, 0, NULL), *tb;
  grt_devptr buf;
  assert_int_equal(grt_exec_device_malloc(w.exec, 64, &buf), GRT_OK);
  assert_int_equal(grt_graph_add_memset_node(gt, &ta, 1, buf, 0, 64, &tb), GRT_OK);
  refused(&w, gt, GRT_GRAPH_UPDATE_NODE_TYPE_CHANGED, tb, NULL);
  assert_int_equal(grt_graph_exec_update(w.ge, gt, &r), GRT_ERR_GRAPH_EXEC_UPDATE);
  assert_int_equal(r, GRT_GRAPH_UPDATE_NODE_KIND_CHANGED); /* the same result under its other name */
  /* A kernel on another engine: UNSUPPORTED_FUNCTION_CHANGE. */
  grt_graph *ge_ = new_graph(w.exec);
  grt_graph_node *ea = kernel(ge_, NULL, 0, NULL);
  grt_graph_node *eb = kernel_on(ge_, &ea, 1, NULL, 100, GRT_ENGINE_COPY_H2D);
  refused(&w, ge_, GRT_GRAPH_UPDATE_UNSUPPORTED_FUNCTION_CHANGE, eb, NULL);
  /* A root where the edge was: the node whose dependency count differs. */
  grt_graph *gr = new_graph(w.exec);
  kernel(gr, NULL, 0, NULL);
  grt_graph_node *rb = kernel(gr, NULL, 0, NULL);
  refused(&w, gr, GRT_GRAPH_UPDATE_TOPOLOGY_CHANGED, rb, NULL);
  /* Same counts, another edge: the node and the mismatched dependency. */
  grt_graph_node *x3[3], *y3[3];
  grt_graph *gx = three(w.exec, false, x3), *gy = three(w.exec, true, y3);
  grt_graph_exec *xe;
  assert_int_equal(grt_graph_instantiate(gx, &xe), GRT_OK);
  grt_graph_update_info info;
  assert_int_equal(grt_graph_exec_update_ex(xe, gy, &info), GRT_ERR_GRAPH_EXEC_UPDATE);
  assert_int_equal(info.result, GRT_GRAPH_UPDATE_TOPOLOGY_CHANGED);
  assert_ptr_equal(info.error_node, y3[2]);
  assert_ptr_equal(info.error_from_node, y3[1]);
  assert_int_equal(grt_graph_exec_destroy(xe), GRT_OK);
  /* Bad arguments: GRT_GRAPH_UPDATE_ERROR with the status. */
  assert_int_equal(grt_graph_exec_update_ex(w.ge, NULL, &info), GRT_ERR_INVALID_ARG);
  assert_int_equal(info.result, GRT_GRAPH_UPDATE_ERROR);
  assert_null(info.error_node);
  assert_int_equal(grt_graph_exec_update_ex(NULL, g3, &info), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt_graph_destroy(g3), GRT_OK);
  assert_int_equal(grt_graph_exec_update_ex(w.ge, g3, &info), GRT_ERR_INVALID_HANDLE);
  assert_int_equal(info.result, GRT_GRAPH_UPDATE_ERROR);
  assert_int_equal(grt_graph_exec_update_ex(w.ge, gt, NULL), GRT_ERR_GRAPH_EXEC_UPDATE);
  assert_int_equal(grt_graph_destroy(gt), GRT_OK);
  assert_int_equal(grt_graph_destroy(ge_), GRT_OK);
  assert_int_equal(grt_graph_destroy(gr), GRT_OK);
  assert_int_equal(grt_graph_destroy(gx), GRT_OK);
  assert_int_equal(grt_graph_destroy(gy), GRT_OK);
  assert_int_equal(grt_exec_device_free(w.exec, buf), GRT_OK);
  world_end(&w);
}

/* Copy direction, memory nodes, child graphs, captured graphs. */
static void test_update_results_other_nodes(void **state) {
  grt_exec *exec = make_exec(clock_of(state), 0);
  grt_stream *s = make_stream(exec, GRT_STREAM_NON_BLOCKING, "s");
  grt_devptr buf;
  assert_int_equal(grt_exec_device_malloc(exec, 64, &buf), GRT_OK);
  unsigned char host[64] = {0};
  grt_memcpy_desc h2d = {GRT_MEMCPY_H2D, buf, 0, host, 64}, d2h = {GRT_MEMCPY_D2H, 0, buf, host, 64};
  grt_graph *gc = new_graph(exec), *gd = new_graph(exec);
  grt_graph_node *nc, *nd;
  assert_int_equal(grt_graph_add_memcpy_node(gc, NULL, 0, &h2d, &nc), GRT_OK);
  assert_int_equal(grt_graph_add_memcpy_node(gd, NULL, 0, &d2h, &nd), GRT_OK);
  grt_graph_exec *ce;
  assert_int_equal(grt_graph_instantiate(gc, &ce), GRT_OK);
  grt_graph_update_info info;
  assert_int_equal(grt_graph_exec_update_ex(ce, gd, &info), GRT_ERR_GRAPH_EXEC_UPDATE);
  assert_int_equal(info.result, GRT_GRAPH_UPDATE_PARAMETERS_CHANGED);
  assert_ptr_equal(info.error_node, nd);
  /* Memory nodes: NOT_SUPPORTED, naming g's. */
  grt_graph *gm = new_graph(exec);
  grt_devptr p;
  grt_graph_node *am;
  assert_int_equal(grt_graph_add_mem_alloc_node(gm, NULL, 0, 64, &p, &am), GRT_OK);
  assert_int_equal(grt_graph_exec_update_ex(ce, gm, &info), GRT_ERR_GRAPH_EXEC_UPDATE);
  assert_int_equal(info.result, GRT_GRAPH_UPDATE_NOT_SUPPORTED);
  assert_ptr_equal(info.error_node, am);
  /* A child graph of another shape: named on the child graph node. */
  grt_graph *c1 = new_graph(exec), *c2 = new_graph(exec);
  kernel(c1, NULL, 0, NULL);
  grt_graph_node *c2a = kernel(c2, NULL, 0, NULL);
  kernel(c2, &c2a, 1, NULL);
  grt_graph *p1 = new_graph(exec), *p2 = new_graph(exec);
  grt_graph_node *k1 = kernel(p1, NULL, 0, NULL), *k2 = kernel(p2, NULL, 0, NULL), *ch1, *ch2;
  assert_int_equal(grt_graph_add_child_graph_node(p1, &k1, 1, c1, &ch1), GRT_OK);
  assert_int_equal(grt_graph_add_child_graph_node(p2, &k2, 1, c2, &ch2), GRT_OK);
  grt_graph_exec *pe;
  assert_int_equal(grt_graph_instantiate(p1, &pe), GRT_OK);
  assert_int_equal(grt_graph_exec_update_ex(pe, p2, &info), GRT_ERR_GRAPH_EXEC_UPDATE);
  assert_int_equal(info.result, GRT_GRAPH_UPDATE_NODE_TYPE_CHANGED); /* c2's second kernel where c1's exit was */
  assert_ptr_equal(info.error_node, ch2);
  assert_int_equal(grt_graph_exec_update_ex(pe, p1, &info), GRT_OK); /* the same graph again */
  assert_int_equal(grt_graph_launch(pe, s), GRT_OK);
  /* A captured graph's node is named by the handle grt_graph_get_nodes gives. */
  assert_int_equal(grt_stream_begin_capture(s, GRT_CAPTURE_RELAXED), GRT_OK);
  grt_kernel_desc kd = {NULL, NULL, 10, GRT_ENGINE_COMPUTE, "k"};
  assert_int_equal(grt_launch_kernel(s, &kd), GRT_OK);
  assert_int_equal(grt_memset_async(s, buf, 0, 64), GRT_OK);
  grt_graph *cap;
  assert_int_equal(grt_stream_end_capture(s, &cap), GRT_OK);
  grt_graph *cap2 = new_graph(exec);
  grt_graph_node *q0 = kernel(cap2, NULL, 0, NULL);
  kernel(cap2, &q0, 1, NULL);
  grt_graph_exec *cape;
  assert_int_equal(grt_graph_instantiate(cap2, &cape), GRT_OK);
  assert_int_equal(grt_graph_exec_update_ex(cape, cap, &info), GRT_ERR_GRAPH_EXEC_UPDATE);
  assert_int_equal(info.result, GRT_GRAPH_UPDATE_NODE_TYPE_CHANGED);
  grt_graph_node *cn[2];
  size_t n = 2;
  assert_int_equal(grt_graph_get_nodes(cap, cn, &n), GRT_OK);
  assert_ptr_equal(info.error_node, cn[1]); /* the handle made for the update is the one get_nodes gives */
  assert_int_equal(grt_stream_synchronize(s), GRT_OK);
  assert_int_equal(grt_graph_exec_destroy(cape), GRT_OK);
  assert_int_equal(grt_graph_exec_destroy(pe), GRT_OK);
  assert_int_equal(grt_graph_exec_destroy(ce), GRT_OK);
  grt_graph *all[] = {gc, gd, gm, c1, c2, p1, p2, cap, cap2};
  for (size_t i = 0; i < sizeof all / sizeof *all; i++) assert_int_equal(grt_graph_destroy(all[i]), GRT_OK);
  assert_int_equal(grt_exec_device_free(exec, buf), GRT_OK);
  assert_int_equal(grt_stream_destroy(s), GRT_OK);
  assert_int_equal(grt_exec_destroy(exec), GRT_OK);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      BOTH_CLOCKS(test_update_accepts_parameters),
      BOTH_CLOCKS(test_update_results),
      BOTH_CLOCKS(test_update_results_other_nodes),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
