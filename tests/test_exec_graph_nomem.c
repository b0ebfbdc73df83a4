/* test_exec_graph_nomem.c — graph calls that run out of host memory change
 * nothing (nomem_wrap.h fails the 1st, 2nd, ... allocation of a call until
 * one gets through): memory nodes in a capture (the block, its map entry, the
 * node), instantiate (the body, the memory snapshot), a launch with deps on a
 * free and on the previous launch, and a free of graph memory outside any
 * graph; graph creation, nodes added by hand (their handles, the node list,
 * the dependencies, a child graph's clone, an allocation node's block),
 * edges (the cycle check's scratch, the lists' room), node handles for a
 * graph, update (the new body, the handles it may name) and a launch with a
 * record node (the events' saved snapshots). After each refusal the graph
 * reads as before and the next attempt gives the result a call without
 * failures gives. Virtual clock only: no worker thread allocates behind the
 * test's back. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "gpurt/exec.h"
#include "nomem_wrap.h"

typedef struct world {
  grt_exec *exec;
  grt_stream *s, *t;
} world;

static world world_new(void) {
  grt_exec_config cfg;
  grt_exec_config_default(&cfg);
  cfg.clock = GRT_CLOCK_VIRTUAL;
  cfg.device_capacity = 16 * GRT_MiB;
  world w = {0};
  assert_int_equal(grt_exec_create(&cfg, &w.exec), GRT_OK);
  assert_int_equal(grt_stream_create(w.exec, GRT_STREAM_NON_BLOCKING, 0, &w.s), GRT_OK);
  assert_int_equal(grt_stream_create(w.exec, GRT_STREAM_NON_BLOCKING, 0, &w.t), GRT_OK);
  return w;
}

static void world_end(world *w) {
  assert_int_equal(grt_stream_destroy(w->s), GRT_OK);
  assert_int_equal(grt_stream_destroy(w->t), GRT_OK);
  assert_int_equal(grt_exec_destroy(w->exec), GRT_OK);
}

static size_t segments(grt_exec *exec) {
  grt_device *dev;
  grt_device_stats ds;
  assert_int_equal(grt_exec_get_device(exec, &dev), GRT_OK);
  assert_int_equal(grt_device_get_stats(dev, &ds), GRT_OK);
  return ds.segments;
}

static size_t nodes_of(grt_graph *g) {
  size_t n = 0;
  assert_int_equal(grt_graph_node_count(g, &n), GRT_OK);
  return n;
}

/* Fails allocation k of a capture's allocation node, k = 1, 2, ...: the
 * capture is as before (no node, no block, still valid) until one succeeds. */
static grt_graph *capture_alloc_nomem(world *w, grt_devptr *p) {
  grt_kernel_desc k = {NULL, NULL, 100, GRT_ENGINE_COMPUTE, "k"};
  assert_int_equal(grt_stream_begin_capture(w->s, GRT_CAPTURE_RELAXED), GRT_OK);
  assert_int_equal(grt_launch_kernel(w->s, &k), GRT_OK);
  for (long n = 1;; n++) {
    nomem_arm(n);
    grt_status st = grt_stream_malloc_async_graph(w->s, 4096, p);
    if (!nomem_disarm()) {
      assert_int_equal(st, GRT_OK);
      assert_true(n > 1); /* the call allocates: its failures were tried */
      break;
    }
    assert_int_equal(st, GRT_ERR_NOMEM);
    assert_int_equal(segments(w->exec), 0);
    grt_capture_status cs;
    assert_int_equal(grt_stream_capture_status(w->s, &cs), GRT_OK);
    assert_int_equal(cs, GRT_CAPTURE_STATUS_ACTIVE);
  }
  assert_int_equal(grt_launch_kernel(w->s, &k), GRT_OK);
  grt_graph *g = NULL;
  assert_int_equal(grt_stream_end_capture(w->s, &g), GRT_OK);
  assert_int_equal(nodes_of(g), 3);
  return g;
}

static grt_graph_exec *instantiate_nomem(grt_graph *g) {
  grt_graph_exec *ge = NULL;
  for (long n = 1;; n++) {
    nomem_arm(n);
    grt_status st = grt_graph_instantiate(g, &ge);
    if (!nomem_disarm()) {
      assert_int_equal(st, GRT_OK);
      assert_true(n > 1);
      return ge;
    }
    assert_int_equal(st, GRT_ERR_NOMEM);
    assert_null(ge);
  }
}

/* End-capture of a forked capture needs memory to check the join: without
 * it the capture goes on (still active, every stream still in it) and the
 * call succeeds when repeated. */
static void test_end_capture_nomem(void **state) {
  (void)state;
  world w = world_new();
  grt_kernel_desc k = {NULL, NULL, 100, GRT_ENGINE_COMPUTE, "k"};
  grt_event *fork, *join;
  assert_int_equal(grt_event_create(w.exec, 0, &fork), GRT_OK);
  assert_int_equal(grt_event_create(w.exec, 0, &join), GRT_OK);
  assert_int_equal(grt_stream_begin_capture(w.s, GRT_CAPTURE_GLOBAL), GRT_OK);
  assert_int_equal(grt_event_record(fork, w.s), GRT_OK);
  assert_int_equal(grt_stream_wait_event(w.t, fork), GRT_OK);
  assert_int_equal(grt_launch_kernel(w.t, &k), GRT_OK);
  assert_int_equal(grt_event_record(join, w.t), GRT_OK);
  assert_int_equal(grt_stream_wait_event(w.s, join), GRT_OK);
  grt_graph *g = NULL;
  for (long n = 1;; n++) {
    nomem_arm(n);
    grt_status st = grt_stream_end_capture(w.s, &g);
    if (!nomem_disarm()) {
      assert_int_equal(st, GRT_OK);
      assert_true(n > 1);
      break;
    }
    assert_int_equal(st, GRT_ERR_NOMEM);
    assert_null(g);
    grt_capture_status cs;
    assert_int_equal(grt_stream_capture_status(w.t, &cs), GRT_OK);
    assert_int_equal(cs, GRT_CAPTURE_STATUS_ACTIVE);
  }
  assert_int_equal(nodes_of(g), 1);
  assert_int_equal(grt_graph_destroy(g), GRT_OK);
  assert_int_equal(grt_event_destroy(fork), GRT_OK);
  assert_int_equal(grt_event_destroy(join), GRT_OK);
  world_end(&w);
}

static void test_memory_nodes_nomem(void **state) {
  (void)state;
  world w = world_new();
  grt_devptr p;
  grt_graph *g = capture_alloc_nomem(&w, &p);
  grt_graph_exec *ge = instantiate_nomem(g);
  grt_graph_exec *ge2;
  assert_int_equal(grt_graph_instantiate(g, &ge2), GRT_ERR_BUSY); /* the failed ones left no executable graph */

  /* A freeing graph captured on t: its foreign free node under failures. */
  assert_int_equal(grt_stream_begin_capture(w.t, GRT_CAPTURE_RELAXED), GRT_OK);
  for (long n = 1;; n++) {
    nomem_arm(n);
    grt_status st = grt_stream_free_async_graph(w.t, p);
    if (!nomem_disarm()) {
      assert_int_equal(st, GRT_OK);
      assert_true(n > 1); /* the call allocates: its failures were tried */
      break;
    }
    assert_int_equal(st, GRT_ERR_NOMEM);
  }
  grt_graph *gf;
  assert_int_equal(grt_stream_end_capture(w.t, &gf), GRT_OK);
  assert_int_equal(nodes_of(gf), 1);
  grt_graph_exec *ef = instantiate_nomem(gf);

  /* Launch on s, free outside on t behind a gate, and a relaunch on u with
   * two deps (the previous launch on s, the free on t). */
  grt_stream *u;
  assert_int_equal(grt_stream_create(w.exec, GRT_STREAM_NON_BLOCKING, 0, &u), GRT_OK);
  assert_int_equal(grt_graph_launch(ge, w.s), GRT_OK);
  grt_user_event *gate;
  assert_int_equal(grt_user_event_create(w.exec, "gate", &gate), GRT_OK);
  assert_int_equal(grt_stream_wait_user_event(w.t, gate, 1), GRT_OK);
  grt_kernel_desc k0 = {NULL, NULL, 0, GRT_ENGINE_COMPUTE, "k0"};
  for (;;) { /* use up the free ops, so that the free's marker needs a new slab */
    nomem_arm(1);
    grt_status st = grt_launch_kernel(w.t, &k0);
    if (nomem_disarm()) {
      assert_int_equal(st, GRT_ERR_NOMEM);
      break;
    }
    assert_int_equal(st, GRT_OK);
  }
  for (long n = 1;; n++) {
    nomem_arm(n);
    grt_status st = grt_stream_free_async_graph(w.t, p);
    if (!nomem_disarm()) {
      assert_int_equal(st, GRT_OK);
      assert_true(n > 1); /* the call allocates: its failures were tried */
      break;
    }
    assert_int_equal(st, GRT_ERR_NOMEM);
    assert_int_equal(grt_graph_launch(ge, w.s), GRT_ERR_INVALID_ARG); /* still live */
  }
  assert_int_equal(grt_graph_launch(ef, w.t), GRT_ERR_DOUBLE_FREE); /* freed above */
  for (long n = 1;; n++) {
    nomem_arm(n);
    grt_status st = grt_graph_launch(ge, u);
    if (!nomem_disarm()) {
      assert_int_equal(st, GRT_OK);
      assert_true(n > 1); /* the call allocates: its failures were tried */
      break;
    }
    assert_int_equal(st, GRT_ERR_NOMEM);
    assert_int_equal(grt_graph_launch(ef, w.t), GRT_ERR_DOUBLE_FREE); /* not allocated again */
  }
  assert_int_equal(grt_stream_query(u), GRT_ERR_NOT_READY); /* it waits for t's free */
  assert_int_equal(grt_user_event_signal(gate, 1), GRT_OK);
  assert_int_equal(grt_graph_launch(ef, w.t), GRT_OK);
  assert_int_equal(grt_exec_synchronize(w.exec), GRT_OK);
  assert_int_equal(grt_user_event_destroy(gate), GRT_OK);
  assert_int_equal(grt_stream_destroy(u), GRT_OK);
  assert_int_equal(grt_graph_exec_destroy(ge), GRT_OK);
  assert_int_equal(grt_graph_exec_destroy(ef), GRT_OK);
  assert_int_equal(grt_graph_destroy(g), GRT_OK);
  assert_int_equal(grt_graph_destroy(gf), GRT_OK);
  assert_int_equal(segments(w.exec), 0); /* freed by ef, nothing refers to it: back */
  world_end(&w);
}

/* Runs call(ctx) failing its 1st, 2nd, ... allocation; after each refusal
 * check(ctx) says nothing changed. The call must allocate (allocates) or may not. */
typedef grt_status (*call_fn)(void *ctx);
typedef void (*check_fn)(void *ctx);

static void each_failure(call_fn call, check_fn check, void *ctx, bool allocates) {
  for (long n = 1;; n++) {
    nomem_arm(n);
    grt_status st = call(ctx);
    if (!nomem_disarm()) {
      assert_int_equal(st, GRT_OK);
      assert_true(!allocates || n > 1);
      return;
    }
    assert_int_equal(st, GRT_ERR_NOMEM);
    check(ctx);
  }
}

typedef struct edit {
  world w;
  grt_graph *g, *child, *made;
  grt_graph_node *a, *b, *out, *nodes[4];
  grt_graph_exec *ge;
  grt_event *ev;
  size_t n_nodes, n_edges, n_out;
  grt_devptr p;
  grt_graph_update_info info;
} edit;

static void counts_unchanged(void *ctx) {
  edit *e = ctx;
  size_t n, m;
  assert_int_equal(grt_graph_node_count(e->g, &n), GRT_OK);
  assert_int_equal(grt_graph_edge_count(e->g, &m), GRT_OK);
  assert_int_equal(n, e->n_nodes);
  assert_int_equal(m, e->n_edges);
  assert_int_equal(segments(e->w.exec), 0);
}

static void remember(edit *e) {
  assert_int_equal(grt_graph_node_count(e->g, &e->n_nodes), GRT_OK);
  assert_int_equal(grt_graph_edge_count(e->g, &e->n_edges), GRT_OK);
}

static grt_status do_create(void *ctx) { return grt_graph_create(((edit *)ctx)->w.exec, &((edit *)ctx)->made); }
static void no_check(void *ctx) { (void)ctx; }

static grt_status do_kernel(void *ctx) {
  edit *e = ctx;
  grt_kernel_desc d = {NULL, NULL, 100, GRT_ENGINE_COMPUTE, "k"};
  grt_graph_node *deps[2] = {e->a, e->b};
  return grt_graph_add_kernel_node(e->g, deps, 2, &d, &e->out);
}

static grt_status do_child(void *ctx) {
  edit *e = ctx;
  return grt_graph_add_child_graph_node(e->g, &e->out, 1, e->child, &e->out);
}

static grt_status do_edges(void *ctx) {
  edit *e = ctx;
  grt_graph_node *from[2] = {e->a, e->b}, *to[2] = {e->out, e->out};
  return grt_graph_add_dependencies(e->g, from, to, 2);
}

static grt_status do_record(void *ctx) {
  edit *e = ctx;
  return grt_graph_add_event_record_node(e->g, &e->out, 1, e->ev, &e->out);
}

static grt_status do_alloc(void *ctx) {
  edit *e = ctx;
  return grt_graph_add_mem_alloc_node(e->g, NULL, 0, 4096, &e->p, &e->nodes[3]);
}

static grt_status do_get_nodes(void *ctx) {
  edit *e = ctx;
  e->n_out = 4;
  return grt_graph_get_nodes(e->g, e->nodes, &e->n_out);
}

static grt_status do_instantiate(void *ctx) {
  edit *e = ctx;
  return grt_graph_instantiate(e->g, &e->ge);
}

static grt_status do_update(void *ctx) {
  edit *e = ctx;
  return grt_graph_exec_update_ex(e->ge, e->g, &e->info);
}

static void update_unchanged(void *ctx) {
  edit *e = ctx;
  assert_int_equal(e->info.result, GRT_GRAPH_UPDATE_ERROR);
}

static grt_status do_launch(void *ctx) {
  edit *e = ctx;
  return grt_graph_launch(e->ge, e->w.s);
}

static void not_launched(void *ctx) {
  edit *e = ctx;
  assert_int_equal(grt_event_query(e->ev), GRT_OK); /* never recorded still */
  assert_int_equal(grt_stream_query(e->w.s), GRT_OK);
}

/* Editing calls, instantiate, update and a launch with a record node. */
static void test_edit_nomem(void **state) {
  (void)state;
  edit e = {0};
  e.w = world_new();
  each_failure(do_create, no_check, &e, true);
  e.g = e.made;
  assert_int_equal(grt_graph_create(e.w.exec, &e.child), GRT_OK);
  grt_kernel_desc d = {NULL, NULL, 100, GRT_ENGINE_COMPUTE, "k"};
  assert_int_equal(grt_graph_add_kernel_node(e.child, NULL, 0, &d, &e.out), GRT_OK);
  assert_int_equal(grt_graph_add_kernel_node(e.g, NULL, 0, &d, &e.a), GRT_OK);
  assert_int_equal(grt_graph_add_kernel_node(e.g, NULL, 0, &d, &e.b), GRT_OK);
  assert_int_equal(grt_event_create(e.w.exec, 0, &e.ev), GRT_OK);
  remember(&e);
  each_failure(do_kernel, counts_unchanged, &e, true);
  remember(&e);
  each_failure(do_child, counts_unchanged, &e, true);
  grt_graph_node *k;
  assert_int_equal(grt_graph_add_kernel_node(e.g, NULL, 0, &d, &k), GRT_OK);
  e.out = k;
  remember(&e);
  each_failure(do_edges, counts_unchanged, &e, true);
  remember(&e);
  e.out = k;
  each_failure(do_record, counts_unchanged, &e, false);
  remember(&e);
  each_failure(do_get_nodes, counts_unchanged, &e, false);
  assert_int_equal(e.n_out, 4);
  each_failure(do_instantiate, no_check, &e, true);
  each_failure(do_update, update_unchanged, &e, true);
  assert_int_equal(e.info.result, GRT_GRAPH_UPDATE_OK);
  each_failure(do_launch, not_launched, &e, true);
  assert_int_equal(grt_stream_synchronize(e.w.s), GRT_OK);
  assert_int_equal(grt_event_query(e.ev), GRT_OK);
  assert_int_equal(grt_graph_exec_destroy(e.ge), GRT_OK);
  remember(&e);
  each_failure(do_alloc, counts_unchanged, &e, true);
  assert_int_equal(segments(e.w.exec), 1);
  assert_int_equal(grt_graph_destroy(e.g), GRT_OK);
  assert_int_equal(grt_graph_destroy(e.child), GRT_OK);
  assert_int_equal(grt_event_destroy(e.ev), GRT_OK);
  world_end(&e.w);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_end_capture_nomem),
      cmocka_unit_test(test_memory_nodes_nomem),
      cmocka_unit_test(test_edit_nomem),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
