/* test_exec_fusion.c — the fusion pass at instantiate, under both clocks:
 * a chain of elementwise kernels in graph memory fuses into one kernel whose
 * outputs equal the unfused graph's bit for bit, with the modelled traffic
 * 2kNb -> 2Nb exactly and the intermediates' memory gone from the pool; and
 * the blockers, each refused with its reason. */
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "gpurt/fusion.h"
#include "test_exec_common.h"

#define N 1000u

static void add_one(void *out, const void *const *in, uint64_t i, const void *params) {
  (void)params;
  float x;
  memcpy(&x, in[0], sizeof x);
  x = x * 1.5f + (float)(i % 7);
  memcpy(out, &x, sizeof x);
}

static grt_kernel_op ew(grt_op_buffer *in, grt_devptr src, grt_devptr dst) {
  *in = (grt_op_buffer){src, 4, 0, 0};
  grt_kernel_op op;
  memset(&op, 0, sizeof op);
  op.cls = GRT_OP_ELEMENTWISE;
  op.n = N;
  op.in = in;
  op.n_in = 1;
  op.out = (grt_op_buffer){dst, 4, 0, 0};
  op.fn = add_one;
  return op;
}

static grt_graph_node *ew_node(grt_graph *g, grt_graph_node *dep, grt_devptr src, grt_devptr dst) {
  grt_op_buffer in;
  grt_kernel_op op = ew(&in, src, dst);
  grt_kernel_desc d = {NULL, NULL, 100, GRT_ENGINE_COMPUTE, "ew"};
  grt_graph_node *node = NULL;
  assert_int_equal(grt_graph_add_kernel_op_node(g, dep ? &dep : NULL, dep ? 1 : 0, &d, &op, &node), GRT_OK);
  return node;
}

static float *host_of(grt_exec *exec, grt_devptr p) {
  grt_device *dev;
  void *h;
  assert_int_equal(grt_exec_get_device(exec, &dev), GRT_OK);
  assert_int_equal(grt_device_host_ptr(dev, p, N * 4, &h), GRT_OK);
  return h;
}

/* in -> k kernels -> out, the k - 1 intermediates allocated and freed in the graph. */
static grt_graph *chain(grt_exec *exec, unsigned k, grt_devptr in, grt_devptr out) {
  grt_graph *g;
  assert_int_equal(grt_graph_create(exec, &g), GRT_OK);
  grt_graph_node *prev = NULL, *allocs[16], *frees[16];
  grt_devptr tmp[16];
  for (unsigned j = 0; j + 1 < k; j++)
    assert_int_equal(grt_graph_add_mem_alloc_node(g, NULL, 0, N * 4, &tmp[j], &allocs[j]), GRT_OK);
  for (unsigned j = 0; j < k; j++) {
    grt_devptr src = j ? tmp[j - 1] : in, dst = j + 1 < k ? tmp[j] : out;
    grt_graph_node *deps[2] = {prev, j + 1 < k ? allocs[j] : NULL};
    grt_op_buffer b;
    grt_kernel_op op = ew(&b, src, dst);
    grt_kernel_desc d = {NULL, NULL, 100, GRT_ENGINE_COMPUTE, "ew"};
    size_t nd = (prev != NULL) + (j + 1 < k);
    grt_graph_node *dl[2], *node;
    size_t m = 0;
    for (unsigned q = 0; q < 2; q++)
      if (deps[q]) dl[m++] = deps[q];
    assert_int_equal(m, nd);
    assert_int_equal(grt_graph_add_kernel_op_node(g, dl, m, &d, &op, &node), GRT_OK);
    if (j) assert_int_equal(grt_graph_add_mem_free_node(g, &node, 1, tmp[j - 1], &frees[j - 1]), GRT_OK);
    prev = node;
  }
  return g;
}

static void done(grt_exec *exec, grt_devptr *p, unsigned n) {
  for (unsigned i = 0; i < n; i++) assert_int_equal(grt_exec_device_free(exec, p[i]), GRT_OK);
  assert_int_equal(grt_exec_destroy(exec), GRT_OK);
}

static void run(grt_graph_exec *ge, grt_stream *s) {
  assert_int_equal(grt_graph_launch(ge, s), GRT_OK);
  assert_int_equal(grt_stream_synchronize(s), GRT_OK);
}

static void test_chain_fuses_exactly(void **state) {
  grt_exec *exec = make_exec(clock_of(state), 0);
  grt_stream *s = make_stream(exec, GRT_STREAM_NON_BLOCKING, "s");
  const unsigned k = 5;
  grt_devptr in, out;
  assert_int_equal(grt_exec_device_malloc(exec, N * 4, &in), GRT_OK);
  assert_int_equal(grt_exec_device_malloc(exec, N * 4, &out), GRT_OK);
  float *hin = host_of(exec, in), *hout = host_of(exec, out);
  for (unsigned i = 0; i < N; i++) hin[i] = (float)i * 0.25f - 3.0f;
  grt_graph *g = chain(exec, k, in, out);
  grt_graph_exec *plain, *fused;
  assert_int_equal(grt_graph_instantiate(g, &plain), GRT_OK);
  run(plain, s);
  float want[N];
  memcpy(want, hout, sizeof want);
  memset(hout, 0, N * 4);
  assert_int_equal(grt_graph_exec_destroy(plain), GRT_OK);
  grt_graph_instantiate_params p = {GRT_GRAPH_INSTANTIATE_FUSE, 0};
  assert_int_equal(grt_graph_instantiate_ex(g, &p, &fused), GRT_OK);
  run(fused, s);
  assert_memory_equal(want, hout, sizeof want);
  grt_fusion_summary sum;
  grt_fusion_entry ent[16];
  size_t n = 16;
  assert_int_equal(grt_graph_fusion_report(fused, &sum, ent, &n), GRT_OK);
  assert_int_equal(sum.groups, 1);
  assert_int_equal(sum.kernels_fused, k);
  assert_int_equal(sum.launches_before, k);
  assert_int_equal(sum.launches_after, 1);
  assert_int_equal(sum.bytes_before, 2ull * k * N * 4);
  assert_int_equal(sum.bytes_after, 2ull * N * 4);
  assert_true(sum.pool_before >= (uint64_t)(k - 1) * N * 4);
  assert_int_equal(sum.pool_after, 0);
  size_t nodes;
  uint64_t pool;
  assert_int_equal(grt_graph_exec_info(fused, &nodes, &pool), GRT_OK);
  assert_int_equal(pool, 0);
  assert_int_equal(n, k - 1);
  for (size_t i = 0; i < n; i++) assert_int_equal(ent[i].reason, GRT_FUSE_OK);
  grt_graph_update_result r;
  assert_int_equal(grt_graph_exec_update(fused, g, &r), GRT_ERR_GRAPH_EXEC_UPDATE);
  assert_int_equal(r, GRT_GRAPH_UPDATE_NOT_SUPPORTED);
  assert_int_equal(grt_graph_exec_destroy(fused), GRT_OK);
  assert_int_equal(grt_graph_destroy(g), GRT_OK);
  assert_int_equal(grt_stream_destroy(s), GRT_OK);
  done(exec, (grt_devptr[]){in, out}, 2);
}

/* One kernel's reason for not joining its producer. */
static grt_fuse_reason first_reason(grt_graph *g) {
  grt_graph_exec *ge;
  grt_graph_instantiate_params p = {GRT_GRAPH_INSTANTIATE_FUSE, 0};
  assert_int_equal(grt_graph_instantiate_ex(g, &p, &ge), GRT_OK);
  grt_fusion_summary sum;
  grt_fusion_entry e;
  size_t n = 1;
  assert_int_equal(grt_graph_fusion_report(ge, &sum, &e, &n), GRT_OK);
  assert_int_equal(n, 1);
  assert_int_equal(grt_graph_exec_destroy(ge), GRT_OK);
  return e.reason;
}

/* User memory between two kernels may be read after the graph. */
static void test_blocker_outlives(void **state) {
  grt_exec *exec = make_exec(clock_of(state), 0);
  grt_devptr a, b, c;
  assert_int_equal(grt_exec_device_malloc(exec, N * 4, &a), GRT_OK);
  assert_int_equal(grt_exec_device_malloc(exec, N * 4, &b), GRT_OK);
  assert_int_equal(grt_exec_device_malloc(exec, N * 4, &c), GRT_OK);
  grt_graph *g;
  assert_int_equal(grt_graph_create(exec, &g), GRT_OK);
  grt_graph_node *k1 = ew_node(g, NULL, a, b);
  (void)ew_node(g, k1, b, c);
  assert_int_equal(first_reason(g), GRT_FUSE_OUTLIVES);
  assert_int_equal(grt_graph_destroy(g), GRT_OK);
  done(exec, (grt_devptr[]){a, b, c}, 3);
}

static void host_noop(void *arg) { (void)arg; }

/* Producer -> host node -> consumer: fusing would run the host node out of order. */
static void test_blocker_host_between(void **state) {
  grt_exec *exec = make_exec(clock_of(state), 0);
  grt_devptr a, c;
  assert_int_equal(grt_exec_device_malloc(exec, N * 4, &a), GRT_OK);
  assert_int_equal(grt_exec_device_malloc(exec, N * 4, &c), GRT_OK);
  grt_graph *g;
  assert_int_equal(grt_graph_create(exec, &g), GRT_OK);
  grt_devptr t;
  grt_graph_node *al, *h, *fr;
  assert_int_equal(grt_graph_add_mem_alloc_node(g, NULL, 0, N * 4, &t, &al), GRT_OK);
  grt_graph_node *k1 = ew_node(g, al, a, t);
  assert_int_equal(grt_graph_add_host_node(g, &k1, 1, host_noop, NULL, &h), GRT_OK);
  grt_graph_node *k2 = ew_node(g, h, t, c);
  assert_int_equal(grt_graph_add_mem_free_node(g, &k2, 1, t, &fr), GRT_OK);
  assert_int_equal(first_reason(g), GRT_FUSE_HOST_BETWEEN);
  assert_int_equal(grt_graph_destroy(g), GRT_OK);
  done(exec, (grt_devptr[]){a, c}, 2);
}

/* A description that breaks a rule is refused before anything changes. */
static void test_bad_descriptions(void **state) {
  grt_exec *exec = make_exec(clock_of(state), 0);
  grt_device *dev;
  assert_int_equal(grt_exec_get_device(exec, &dev), GRT_OK);
  grt_devptr a, b;
  assert_int_equal(grt_exec_device_malloc(exec, N * 4, &a), GRT_OK);
  assert_int_equal(grt_exec_device_malloc(exec, N * 4, &b), GRT_OK);
  grt_op_buffer in;
  grt_kernel_op op = ew(&in, a, b);
  char err[160];
  assert_int_equal(grt_kernel_op_check(dev, &op, err, sizeof err), GRT_OK);
  op.fn = NULL;
  assert_int_equal(grt_kernel_op_check(dev, &op, err, sizeof err), GRT_ERR_INVALID_ARG);
  op = ew(&in, a, b);
  in.elem_size = 65;
  assert_int_equal(grt_kernel_op_check(dev, &op, err, sizeof err), GRT_ERR_INVALID_ARG);
  op = ew(&in, a, (grt_devptr)0x7e570000u);
  assert_int_equal(grt_kernel_op_check(dev, &op, err, sizeof err), GRT_ERR_UNKNOWN_POINTER);
  op = ew(&in, a, a + 4);
  assert_int_equal(grt_kernel_op_check(dev, &op, err, sizeof err), GRT_ERR_INVALID_ARG);
  uint64_t bytes;
  op = ew(&in, a, b);
  assert_int_equal(grt_kernel_op_bytes(&op, &bytes), GRT_OK);
  assert_int_equal(bytes, 2ull * N * 4);
  grt_kernel_desc d = {host_noop, NULL, 0, GRT_ENGINE_COMPUTE, "x"};
  grt_stream *s = make_stream(exec, GRT_STREAM_NON_BLOCKING, "s");
  assert_int_equal(grt_launch_kernel_op(s, &d, &op), GRT_ERR_INVALID_ARG); /* fn with a description */
  d.fn = NULL;
  assert_int_equal(grt_launch_kernel_op(s, &d, &op), GRT_OK); /* eager: runs from the description */
  assert_int_equal(grt_stream_synchronize(s), GRT_OK);
  float *hb = host_of(exec, b), *ha = host_of(exec, a);
  float want;
  const void *args[1] = {&ha[3]};
  add_one(&want, args, 3, NULL);
  assert_memory_equal(&want, &hb[3], 4);
  assert_int_equal(grt_stream_destroy(s), GRT_OK);
  done(exec, (grt_devptr[]){a, b}, 2);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      BOTH_CLOCKS(test_chain_fuses_exactly),
      BOTH_CLOCKS(test_blocker_outlives),
      BOTH_CLOCKS(test_blocker_host_between),
      BOTH_CLOCKS(test_bad_descriptions),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
