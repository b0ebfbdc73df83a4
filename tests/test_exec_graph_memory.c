/* test_exec_graph_memory.c — graph memory nodes across launches, under both
 * clocks: an executable graph whose allocation from the previous launch is
 * not freed cannot be launched again (GRT_ERR_INVALID_ARG, CUDA's
 * cudaErrorInvalidValue) and the refusal changes nothing; the allocation is
 * usable by stream work after the launch and is freed outside the graph by
 * grt_stream_free_async_graph or the stream-ordered pool's free_async on any
 * stream, or by a later graph's free node (CUDA's rules for who may free
 * it); the relaunch waits for that free (exact figures on the virtual clock,
 * the order under threads); memory of destroyed graphs stays until freed and
 * goes back to the device once its free is reached. */
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "gpurt/sorder.h"
#include "test_exec_common.h"

typedef struct fill {
  grt_device *dev;
  grt_devptr p;
  unsigned char value;
  _Atomic int runs;
} fill;

/* A kernel body: writes value over the allocation's first 64 bytes. */
static void fill_body(void *arg) {
  fill *f = arg;
  unsigned char *h;
  if (grt_device_host_ptr(f->dev, f->p, 64, (void **)&h) == GRT_OK) memset(h, f->value, 64);
  atomic_fetch_add(&f->runs, 1);
}

static grt_device *device_of(grt_exec *exec) {
  grt_device *dev = NULL;
  assert_int_equal(grt_exec_get_device(exec, &dev), GRT_OK);
  return dev;
}

/* Captures on s: an allocation of 4096 bytes, a kernel of ns filling it, and
 * (freed) a free node; *p receives the address. */
static grt_graph *capture_alloc(grt_stream *s, fill *f, uint64_t ns, bool freed, grt_devptr *p) {
  assert_int_equal(grt_stream_begin_capture(s, GRT_CAPTURE_GLOBAL), GRT_OK);
  assert_int_equal(grt_stream_malloc_async_graph(s, 4096, p), GRT_OK);
  f->p = *p;
  grt_kernel_desc k = {fill_body, f, ns, GRT_ENGINE_COMPUTE, "fill"};
  assert_int_equal(grt_launch_kernel(s, &k), GRT_OK);
  if (freed) assert_int_equal(grt_stream_free_async_graph(s, *p), GRT_OK);
  grt_graph *g = NULL;
  assert_int_equal(grt_stream_end_capture(s, &g), GRT_OK);
  return g;
}

static unsigned char byte_at(grt_device *dev, grt_devptr p) {
  unsigned char *h = NULL;
  assert_int_equal(grt_device_host_ptr(dev, p, 1, (void **)&h), GRT_OK);
  return h[0];
}

/* Unfreed, the allocation refuses a relaunch; freed (any way), it allows one. */
static void test_relaunch_needs_free(void **state) {
  grt_exec *exec = make_exec(clock_of(state), 0);
  grt_stream *s = make_stream(exec, GRT_STREAM_NON_BLOCKING, "s");
  grt_stream *t = make_stream(exec, GRT_STREAM_NON_BLOCKING, "t");
  grt_device *dev = device_of(exec);
  fill f = {dev, 0, 0x5a, 0};
  grt_devptr p;
  grt_graph *g = capture_alloc(s, &f, 1000, false, &p);
  grt_graph_exec *ge;
  assert_int_equal(grt_graph_instantiate(g, &ge), GRT_OK);
  assert_int_equal(grt_stream_free_async_graph(s, p), GRT_ERR_DOUBLE_FREE); /* never launched: not live */
  assert_int_equal(grt_graph_launch(ge, s), GRT_OK);
  grt_op_id id = 77;
  assert_int_equal(grt_graph_launch_ex(ge, s, &id), GRT_ERR_INVALID_ARG); /* the first allocation is live */
  assert_int_equal(id, 77);                                               /* a refused launch takes no id */
  assert_int_equal(grt_stream_synchronize(s), GRT_OK);
  assert_int_equal(atomic_load(&f.runs), 1);
  assert_int_equal(byte_at(dev, p), 0x5a); /* stream work after the launch reads it */
  assert_int_equal(grt_graph_exec_destroy(ge), GRT_OK); /* the refusal left nothing pending */
  assert_int_equal(grt_graph_instantiate(g, &ge), GRT_OK);
  assert_int_equal(grt_graph_launch(ge, s), GRT_ERR_INVALID_ARG); /* the node's memory is still live */

  assert_int_equal(grt_stream_free_async_graph(s, p + 8), GRT_ERR_UNKNOWN_POINTER);
  assert_int_equal(grt_stream_free_async_graph(t, p), GRT_OK); /* any stream */
  assert_int_equal(grt_stream_free_async_graph(t, p), GRT_ERR_DOUBLE_FREE);
  f.value = 0x11;
  assert_int_equal(grt_graph_launch(ge, s), GRT_OK);
  assert_int_equal(grt_graph_launch(ge, s), GRT_ERR_INVALID_ARG);

  /* The stream-ordered pool's free_async of graph memory frees it too. */
  grt_mempool_config pc;
  grt_mempool_config_default(&pc);
  pc.exec = exec;
  grt_mempool *pool;
  assert_int_equal(grt_mempool_create(&pc, &pool), GRT_OK);
  assert_int_equal(grt_free_async(pool, p, t), GRT_OK);
  assert_int_equal(grt_free_async(pool, p, t), GRT_ERR_DOUBLE_FREE);
  assert_int_equal(grt_free_async(pool, 0x1234, t), GRT_ERR_UNKNOWN_POINTER);
  grt_mempool_counters mc;
  assert_int_equal(grt_mempool_get_counters(pool, &mc), GRT_OK);
  assert_int_equal(mc.frees, 0); /* not the pool's memory */
  assert_int_equal(grt_exec_synchronize(exec), GRT_OK); /* the last launch's body reads f.value */
  f.value = 0x22;
  assert_int_equal(grt_graph_launch(ge, s), GRT_OK);
  assert_int_equal(grt_exec_synchronize(exec), GRT_OK);
  assert_int_equal(atomic_load(&f.runs), 3);
  assert_int_equal(byte_at(dev, p), 0x22); /* the same address every launch */
  /* cudaFree of graph memory ends the allocation; the block stays the graph's. */
  assert_int_equal(grt_exec_device_free(exec, p), GRT_OK);
  assert_int_equal(grt_exec_device_free(exec, p), GRT_ERR_DOUBLE_FREE);
  assert_int_equal(byte_at(dev, p), 0x22);
  assert_int_equal(grt_graph_launch(ge, s), GRT_OK);
  assert_int_equal(grt_exec_synchronize(exec), GRT_OK);
  assert_int_equal(atomic_load(&f.runs), 4);
  assert_int_equal(grt_mempool_destroy(pool), GRT_OK);
  assert_int_equal(grt_graph_exec_destroy(ge), GRT_OK);
  assert_int_equal(grt_graph_destroy(g), GRT_OK);
  assert_int_equal(grt_stream_destroy(s), GRT_OK);
  assert_int_equal(grt_stream_destroy(t), GRT_OK);
  assert_int_equal(grt_exec_destroy(exec), GRT_OK); /* the live allocation goes with the exec */
}

/* Freed in its own graph, an allocation relaunches at will and cannot be freed outside. */
static void test_freed_in_graph(void **state) {
  grt_exec *exec = make_exec(clock_of(state), 0);
  grt_stream *s = make_stream(exec, GRT_STREAM_NON_BLOCKING, "s");
  fill f = {device_of(exec), 0, 0x33, 0};
  grt_devptr p;
  grt_graph *g = capture_alloc(s, &f, 100, true, &p);
  grt_graph_exec *ge;
  assert_int_equal(grt_graph_instantiate(g, &ge), GRT_OK);
  for (int i = 0; i < 3; i++) assert_int_equal(grt_graph_launch(ge, s), GRT_OK);
  assert_int_equal(grt_stream_free_async_graph(s, p), GRT_ERR_DOUBLE_FREE);
  assert_int_equal(grt_stream_synchronize(s), GRT_OK);
  assert_int_equal(atomic_load(&f.runs), 3);
  /* Another graph may not free it either. */
  assert_int_equal(grt_stream_begin_capture(s, GRT_CAPTURE_GLOBAL), GRT_OK);
  assert_int_equal(grt_stream_free_async_graph(s, p), GRT_ERR_DOUBLE_FREE);
  grt_graph *g2;
  assert_int_equal(grt_stream_end_capture(s, &g2), GRT_OK); /* the refused node left the capture valid */
  size_t n = 9;
  assert_int_equal(grt_graph_node_count(g2, &n), GRT_OK);
  assert_int_equal(n, 0);
  assert_int_equal(grt_graph_destroy(g2), GRT_OK);
  assert_int_equal(grt_graph_exec_destroy(ge), GRT_OK);
  assert_int_equal(grt_graph_destroy(g), GRT_OK);
  grt_device_stats ds;
  assert_int_equal(grt_device_get_stats(device_of(exec), &ds), GRT_OK);
  assert_int_equal(ds.segments, 0); /* nothing live, nothing refers to it: back on the device */
  assert_int_equal(grt_stream_destroy(s), GRT_OK);
  assert_int_equal(grt_exec_destroy(exec), GRT_OK);
}

/* A later graph's free node frees it; CUDA's rules for such free nodes. */
static void test_free_by_later_graph(void **state) {
  grt_exec *exec = make_exec(clock_of(state), 0);
  grt_stream *s = make_stream(exec, GRT_STREAM_NON_BLOCKING, "s");
  grt_stream *t = make_stream(exec, GRT_STREAM_NON_BLOCKING, "t");
  fill f = {device_of(exec), 0, 0x44, 0};
  grt_devptr p;
  grt_graph *ga = capture_alloc(s, &f, 1000, false, &p);
  assert_int_equal(grt_stream_begin_capture(t, GRT_CAPTURE_GLOBAL), GRT_OK);
  assert_int_equal(grt_stream_free_async_graph(t, p), GRT_OK);
  assert_int_equal(grt_stream_free_async_graph(t, p), GRT_ERR_DOUBLE_FREE); /* once per graph */
  grt_graph *gb;
  assert_int_equal(grt_stream_end_capture(t, &gb), GRT_OK);
  grt_graph_exec *ea, *eb, *eb2;
  assert_int_equal(grt_graph_instantiate(ga, &ea), GRT_OK);
  assert_int_equal(grt_graph_instantiate(gb, &eb), GRT_OK);
  assert_int_equal(grt_graph_instantiate(gb, &eb2), GRT_ERR_BUSY); /* a free node is a memory node */
  uint64_t pool = 1;
  size_t nodes = 0;
  assert_int_equal(grt_graph_exec_info(eb, &nodes, &pool), GRT_OK);
  assert_int_equal(nodes, 1);
  assert_int_equal(pool, 0); /* it frees, it owns nothing */
  assert_int_equal(grt_graph_launch(eb, t), GRT_ERR_DOUBLE_FREE); /* nothing allocated yet */
  assert_int_equal(grt_graph_launch(ea, s), GRT_OK);
  assert_int_equal(grt_graph_launch(ea, s), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt_graph_launch(eb, t), GRT_OK);
  assert_int_equal(grt_graph_launch(eb, t), GRT_ERR_DOUBLE_FREE); /* freed already */
  assert_int_equal(grt_stream_free_async_graph(s, p), GRT_ERR_DOUBLE_FREE);
  assert_int_equal(grt_graph_launch(ea, s), GRT_OK);
  assert_int_equal(grt_stream_free_async_graph(s, p), GRT_OK); /* outside, as well as by gb */
  assert_int_equal(grt_exec_synchronize(exec), GRT_OK);
  assert_int_equal(atomic_load(&f.runs), 2);
  assert_int_equal(grt_graph_exec_destroy(ea), GRT_OK);
  assert_int_equal(grt_graph_exec_destroy(eb), GRT_OK);
  assert_int_equal(grt_graph_destroy(ga), GRT_OK);
  assert_int_equal(grt_graph_destroy(gb), GRT_OK);
  assert_int_equal(grt_stream_destroy(s), GRT_OK);
  assert_int_equal(grt_stream_destroy(t), GRT_OK);
  assert_int_equal(grt_exec_destroy(exec), GRT_OK);
}

/* The relaunch waits for the free's position: after work the free was
 * issued behind, even on another stream, and after a freeing graph's launch. */
static void test_relaunch_waits_for_free(void **state) {
  grt_exec *exec = make_exec(clock_of(state), 0);
  grt_stream *s = make_stream(exec, GRT_STREAM_NON_BLOCKING, "s");
  grt_stream *t = make_stream(exec, GRT_STREAM_NON_BLOCKING, "t");
  fill f = {device_of(exec), 0, 0x55, 0};
  grt_devptr p;
  grt_graph *g = capture_alloc(s, &f, 1000, false, &p);
  grt_graph_exec *ge;
  assert_int_equal(grt_graph_instantiate(g, &ge), GRT_OK);
  grt_event *ev;
  assert_int_equal(grt_event_create(exec, GRT_EVENT_DISABLE_TIMING, &ev), GRT_OK);
  grt_op_id l1, l2, l3, k;
  assert_int_equal(grt_graph_launch_ex(ge, s, &l1), GRT_OK); /* [0, 1000] */
  assert_int_equal(grt_event_record(ev, s), GRT_OK);
  assert_int_equal(grt_stream_wait_event(t, ev), GRT_OK);
  grt_kernel_desc use = {NULL, NULL, 5000, GRT_ENGINE_COMPUTE, "use"};
  assert_int_equal(grt_launch_kernel_ex(t, &use, &k), GRT_OK); /* [1000, 6000] */
  assert_int_equal(grt_stream_free_async_graph(t, p), GRT_OK);
  assert_int_equal(grt_graph_launch_ex(ge, s, &l2), GRT_OK); /* waits for t's free */
  /* A freeing graph launched on t after more work there: the next launch waits for it. */
  assert_int_equal(grt_stream_begin_capture(t, GRT_CAPTURE_GLOBAL), GRT_OK);
  grt_kernel_desc late = {NULL, NULL, 3000, GRT_ENGINE_COMPUTE, "late"};
  assert_int_equal(grt_launch_kernel(t, &late), GRT_OK);
  assert_int_equal(grt_stream_free_async_graph(t, p), GRT_OK);
  grt_graph *gf;
  assert_int_equal(grt_stream_end_capture(t, &gf), GRT_OK);
  grt_graph_exec *ef;
  assert_int_equal(grt_graph_instantiate(gf, &ef), GRT_OK);
  assert_int_equal(grt_graph_launch(ef, t), GRT_OK); /* t: [6000, 9000], the free node at 9000 */
  assert_int_equal(grt_graph_launch_ex(ge, s, &l3), GRT_OK);
  assert_int_equal(grt_exec_synchronize(exec), GRT_OK);
  uint64_t s1, e1, s2, e2, s3, e3, ks, ke;
  assert_int_equal(grt_exec_op_times(exec, l1, &s1, &e1), GRT_OK);
  assert_int_equal(grt_exec_op_times(exec, k, &ks, &ke), GRT_OK);
  assert_int_equal(grt_exec_op_times(exec, l2, &s2, &e2), GRT_OK);
  assert_int_equal(grt_exec_op_times(exec, l3, &s3, &e3), GRT_OK);
  if (clock_of(state) == GRT_CLOCK_VIRTUAL) {
    assert_int_equal(s1, 0);
    assert_int_equal(e1, 1000);
    assert_int_equal(ks, 1000);
    assert_int_equal(ke, 6000);
    assert_int_equal(s2, 6000); /* not at 1000, when s alone would let it go */
    assert_int_equal(e2, 7000);
    assert_int_equal(s3, 9000); /* after the freeing graph's launch */
    assert_int_equal(e3, 10000);
  } else {
    assert_true(s2 >= ke && e2 - s2 >= 1000);
    assert_true(s3 >= e2);
  }
  assert_int_equal(atomic_load(&f.runs), 3);
  assert_int_equal(grt_event_destroy(ev), GRT_OK);
  assert_int_equal(grt_graph_exec_destroy(ef), GRT_OK);
  assert_int_equal(grt_graph_exec_destroy(ge), GRT_OK);
  assert_int_equal(grt_graph_destroy(gf), GRT_OK);
  assert_int_equal(grt_graph_destroy(g), GRT_OK);
  assert_int_equal(grt_stream_destroy(s), GRT_OK);
  assert_int_equal(grt_stream_destroy(t), GRT_OK);
  assert_int_equal(grt_exec_destroy(exec), GRT_OK);
}

/* Destroying the graph does not free a live allocation (CUDA); a later free
 * does, and the memory goes back to the device once that free is reached. */
static void test_memory_outlives_graph(void **state) {
  grt_exec *exec = make_exec(clock_of(state), 0);
  grt_stream *s = make_stream(exec, GRT_STREAM_NON_BLOCKING, "s");
  grt_device *dev = device_of(exec);
  fill f = {dev, 0, 0x66, 0};
  grt_devptr p;
  grt_graph *g = capture_alloc(s, &f, 100, false, &p);
  grt_graph_exec *ge;
  assert_int_equal(grt_graph_instantiate(g, &ge), GRT_OK);
  assert_int_equal(grt_graph_launch(ge, s), GRT_OK);
  assert_int_equal(grt_stream_synchronize(s), GRT_OK);
  assert_int_equal(grt_graph_exec_destroy(ge), GRT_OK);
  assert_int_equal(grt_graph_destroy(g), GRT_OK);
  grt_device_stats ds;
  assert_int_equal(grt_device_get_stats(dev, &ds), GRT_OK);
  assert_int_equal(ds.segments, 1);
  assert_int_equal(byte_at(dev, p), 0x66); /* still usable */
  grt_user_event *gate;
  assert_int_equal(grt_user_event_create(exec, "gate", &gate), GRT_OK);
  assert_int_equal(grt_stream_wait_user_event(s, gate, 1), GRT_OK);
  assert_int_equal(grt_stream_free_async_graph(s, p), GRT_OK); /* behind the gate */
  assert_int_equal(grt_stream_free_async_graph(s, p), GRT_ERR_DOUBLE_FREE);
  assert_int_equal(grt_exec_graph_mem_trim(exec), GRT_OK);
  assert_int_equal(grt_device_get_stats(dev, &ds), GRT_OK);
  assert_int_equal(ds.segments, 1); /* work before the free may still use it */
  assert_int_equal(grt_user_event_signal(gate, 1), GRT_OK);
  assert_int_equal(grt_stream_synchronize(s), GRT_OK);
  assert_int_equal(grt_exec_graph_mem_trim(exec), GRT_OK);
  assert_int_equal(grt_device_get_stats(dev, &ds), GRT_OK);
  assert_int_equal(ds.segments, 0);
  assert_int_equal(grt_stream_free_async_graph(s, p), GRT_ERR_UNKNOWN_POINTER); /* gone */
  assert_int_equal(grt_exec_graph_mem_trim(NULL), GRT_ERR_INVALID_ARG);
  /* A live allocation nobody frees goes with the exec. */
  g = capture_alloc(s, &f, 100, false, &p);
  assert_int_equal(grt_graph_instantiate(g, &ge), GRT_OK);
  assert_int_equal(grt_graph_launch(ge, s), GRT_OK);
  assert_int_equal(grt_stream_synchronize(s), GRT_OK);
  assert_int_equal(grt_graph_exec_destroy(ge), GRT_OK);
  assert_int_equal(grt_graph_destroy(g), GRT_OK);
  assert_int_equal(grt_user_event_destroy(gate), GRT_OK);
  assert_int_equal(grt_stream_destroy(s), GRT_OK);
  grt_devptr other;
  assert_int_equal(grt_exec_device_malloc(exec, 4096, &other), GRT_OK);
  assert_int_equal(grt_exec_destroy(exec), GRT_ERR_BUSY); /* memory that is not graph memory still counts */
  assert_int_equal(grt_exec_device_free(exec, other), GRT_OK);
  assert_int_equal(grt_exec_destroy(exec), GRT_OK);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      BOTH_CLOCKS(test_relaunch_needs_free),     BOTH_CLOCKS(test_freed_in_graph),
      BOTH_CLOCKS(test_free_by_later_graph),     BOTH_CLOCKS(test_relaunch_waits_for_free),
      BOTH_CLOCKS(test_memory_outlives_graph),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
