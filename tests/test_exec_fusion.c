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

static void sum_f(void *acc, const void *x, const void *params) {
  (void)params;
  float a, b;
  memcpy(&a, acc, 4);
  memcpy(&b, x, 4);
  a += b;
  memcpy(acc, &a, 4);
}

static void band(void *out, const void *const *in, uint64_t i, const void *params) {
  (void)params;
  const float *x = in[0];
  float y = x[i] + 0.5f * x[(i + 1) % N];
  memcpy(out, &y, 4);
}

typedef struct rig {
  grt_exec *exec;
  grt_graph *g;
  grt_devptr user[4];
} rig;

static rig rig_new(void **state) {
  rig r;
  r.exec = make_exec(clock_of(state), 0);
  for (unsigned i = 0; i < 4; i++) assert_int_equal(grt_exec_device_malloc(r.exec, N * 4, &r.user[i]), GRT_OK);
  float *h = host_of(r.exec, r.user[0]);
  for (unsigned i = 0; i < N; i++) h[i] = (float)(i % 13) * 0.125f;
  assert_int_equal(grt_graph_create(r.exec, &r.g), GRT_OK);
  return r;
}

static void rig_done(rig *r) {
  assert_int_equal(grt_graph_destroy(r->g), GRT_OK);
  done(r->exec, r->user, 4);
}

static grt_graph_node *node_op(grt_graph *g, grt_graph_node **deps, size_t n, const grt_kernel_op *op) {
  grt_kernel_desc d = {NULL, NULL, 100, GRT_ENGINE_COMPUTE, "k"};
  grt_graph_node *node = NULL;
  assert_int_equal(grt_graph_add_kernel_op_node(g, deps, n, &d, op, &node), GRT_OK);
  return node;
}

/* Runs r's graph unfused and fused: both write the same bytes into user[1..3]; the fused summary. */
static grt_fusion_summary same_bytes(rig *r, uint32_t max_group) {
  grt_stream *s = make_stream(r->exec, GRT_STREAM_NON_BLOCKING, "s");
  static float want[3][N];
  grt_graph_exec *ge;
  assert_int_equal(grt_graph_instantiate(r->g, &ge), GRT_OK);
  run(ge, s);
  for (unsigned b = 0; b < 3; b++) memcpy(want[b], host_of(r->exec, r->user[b + 1]), N * 4);
  assert_int_equal(grt_graph_exec_destroy(ge), GRT_OK);
  for (unsigned b = 0; b < 3; b++) memset(host_of(r->exec, r->user[b + 1]), 0, N * 4);
  grt_graph_instantiate_params p = {GRT_GRAPH_INSTANTIATE_FUSE, max_group};
  assert_int_equal(grt_graph_instantiate_ex(r->g, &p, &ge), GRT_OK);
  run(ge, s);
  for (unsigned b = 0; b < 3; b++) assert_memory_equal(want[b], host_of(r->exec, r->user[b + 1]), N * 4);
  grt_fusion_summary sum;
  size_t n = 0;
  assert_int_equal(grt_graph_fusion_report(ge, &sum, NULL, &n), GRT_OK);
  assert_int_equal(grt_graph_exec_destroy(ge), GRT_OK);
  assert_int_equal(grt_stream_destroy(s), GRT_OK);
  return sum;
}

/* An intermediate in graph memory: its alloc node, and the free node after last. */
static grt_devptr temp(grt_graph *g, grt_graph_node **al) {
  grt_devptr t;
  assert_int_equal(grt_graph_add_mem_alloc_node(g, NULL, 0, N * 4, &t, al), GRT_OK);
  return t;
}

static void free_after(grt_graph *g, grt_graph_node *last, grt_devptr t) {
  grt_graph_node *fr;
  assert_int_equal(grt_graph_add_mem_free_node(g, &last, 1, t, &fr), GRT_OK);
}

/* Elementwise producer into a row-sum reduction, and a band "matmul" with an elementwise epilogue. */
static void test_reduction_and_epilogue(void **state) {
  rig r = rig_new(state);
  grt_graph_node *al, *al2;
  grt_devptr t = temp(r.g, &al), t2 = temp(r.g, &al2);
  grt_op_buffer b0, b1, b2, b3;
  grt_kernel_op e = ew(&b0, r.user[0], t);
  grt_graph_node *k1 = node_op(r.g, &al, 1, &e);
  grt_kernel_op red = ew(&b1, t, r.user[1]);
  red.cls = GRT_OP_REDUCTION;
  red.group = 10;
  red.fn = NULL;
  red.combine = sum_f;
  float zero = 0;
  red.init = &zero;
  red.out.count = N / 10;
  grt_graph_node *k2 = node_op(r.g, &k1, 1, &red);
  free_after(r.g, k2, t);
  grt_kernel_op mm = ew(&b2, r.user[0], t2);
  mm.cls = GRT_OP_OUTPUT_FUSIBLE;
  mm.fn = band;
  grt_graph_node *k3 = node_op(r.g, &al2, 1, &mm);
  grt_kernel_op epi = ew(&b3, t2, r.user[2]);
  grt_graph_node *k4 = node_op(r.g, &k3, 1, &epi);
  free_after(r.g, k4, t2);
  grt_fusion_summary sum = same_bytes(&r, 0);
  assert_int_equal(sum.groups, 2);
  assert_int_equal(sum.launches_before, 4);
  assert_int_equal(sum.launches_after, 2);
  assert_int_equal(sum.pool_after, 0);
  rig_done(&r);
}

/* Two unordered kernels reading user[0] become one; the size limit keeps a chain of 3 at 2. */
static void test_horizontal_and_limit(void **state) {
  rig r = rig_new(state);
  grt_op_buffer b0, b1;
  grt_kernel_op x = ew(&b0, r.user[0], r.user[1]), y = ew(&b1, r.user[0], r.user[2]);
  (void)node_op(r.g, NULL, 0, &x);
  (void)node_op(r.g, NULL, 0, &y);
  grt_fusion_summary sum = same_bytes(&r, 0);
  assert_int_equal(sum.groups, 1);
  assert_int_equal(sum.bytes_before, 4ull * N * 4);
  assert_int_equal(sum.bytes_after, 3ull * N * 4); /* the shared input read once */
  rig_done(&r);
  r = rig_new(state);
  grt_graph_node *al, *al2;
  grt_devptr t = temp(r.g, &al), t2 = temp(r.g, &al2);
  grt_op_buffer c0, c1, c2;
  grt_kernel_op p = ew(&c0, r.user[0], t), q = ew(&c1, t, t2), z = ew(&c2, t2, r.user[1]);
  grt_graph_node *deps[2] = {al, al2};
  grt_graph_node *k1 = node_op(r.g, deps, 2, &p), *k2 = node_op(r.g, &k1, 1, &q), *k3 = node_op(r.g, &k2, 1, &z);
  free_after(r.g, k2, t);
  free_after(r.g, k3, t2);
  sum = same_bytes(&r, 2);
  assert_int_equal(sum.groups, 1);
  assert_int_equal(sum.launches_after, 2);
  rig_done(&r);
}

/* The intermediate read at a broadcast index, read by a kernel outside, or behind an opaque kernel. */
static void test_blocker_layout_outside_opaque(void **state) {
  rig r = rig_new(state);
  grt_graph_node *al;
  grt_devptr t = temp(r.g, &al);
  grt_op_buffer b0, b1, b2;
  grt_kernel_op p = ew(&b0, r.user[0], t), c = ew(&b1, t, r.user[1]);
  grt_graph_node *k1 = node_op(r.g, &al, 1, &p);
  b1.count = 10; /* reads t[i % 10] */
  grt_graph_node *k2 = node_op(r.g, &k1, 1, &c);
  free_after(r.g, k2, t);
  assert_int_equal(first_reason(r.g), GRT_FUSE_LAYOUT);
  rig_done(&r);

  r = rig_new(state);
  t = temp(r.g, &al);
  p = ew(&b0, r.user[0], t);
  c = ew(&b1, t, r.user[1]);
  grt_kernel_op o = ew(&b2, r.user[2], r.user[3]);
  b2.count = 10;
  k1 = node_op(r.g, &al, 1, &p);
  k2 = node_op(r.g, &k1, 1, &c);
  o.in = &(grt_op_buffer){t, 4, 0, 0};
  grt_graph_node *k3 = node_op(r.g, &k1, 1, &o);
  grt_graph_node *deps[2] = {k2, k3};
  grt_graph_node *fr;
  assert_int_equal(grt_graph_add_mem_free_node(r.g, deps, 2, t, &fr), GRT_OK);
  assert_int_equal(first_reason(r.g), GRT_FUSE_READ_OUTSIDE);
  rig_done(&r);

  r = rig_new(state);
  p = ew(&b0, r.user[0], r.user[1]);
  k1 = node_op(r.g, NULL, 0, &p);
  grt_kernel_desc d = {host_noop, NULL, 10, GRT_ENGINE_COMPUTE, "opaque"};
  grt_graph_node *op;
  assert_int_equal(grt_graph_add_kernel_node(r.g, &k1, 1, &d, &op), GRT_OK);
  assert_int_equal(first_reason(r.g), GRT_FUSE_OPAQUE);
  rig_done(&r);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      BOTH_CLOCKS(test_chain_fuses_exactly),           BOTH_CLOCKS(test_blocker_outlives),
      BOTH_CLOCKS(test_blocker_host_between),          BOTH_CLOCKS(test_bad_descriptions),
      BOTH_CLOCKS(test_reduction_and_epilogue),        BOTH_CLOCKS(test_horizontal_and_limit),
      BOTH_CLOCKS(test_blocker_layout_outside_opaque),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
