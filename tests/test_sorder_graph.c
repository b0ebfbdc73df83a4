/* test_sorder_graph.c — stream-ordered allocation inside a stream capture
 * becomes graph memory nodes: malloc_async/free_async on a capturing stream
 * record alloc/free nodes served from the graph's pool at the same address on
 * every replay, and never touch the stream-ordered pool (both clocks). */
#include "gpurt/sorder.h"
#include "test_exec_common.h"

static void test_capture_malloc_async_becomes_nodes(void **state) {
  grt_exec *exec = make_exec(clock_of(state), 0);
  grt_mempool_config pc;
  grt_mempool_config_default(&pc);
  pc.exec = exec;
  grt_mempool *pool;
  assert_int_equal(grt_mempool_create(&pc, &pool), GRT_OK);
  grt_stream *s;
  assert_int_equal(grt_stream_create(exec, GRT_STREAM_NON_BLOCKING, 0, &s), GRT_OK);
  grt_mempool_counters before;
  assert_int_equal(grt_mempool_get_counters(pool, &before), GRT_OK);

  assert_int_equal(grt_stream_begin_capture(s, GRT_CAPTURE_GLOBAL), GRT_OK);
  grt_devptr p = 0;
  assert_int_equal(grt_malloc_async(pool, 64 * 1024, s, &p), GRT_OK);
  assert_int_not_equal(p, 0);
  assert_int_equal(grt_memset_async(s, p, 0x5a, 64 * 1024), GRT_OK);
  assert_int_equal(grt_free_async(pool, p, s), GRT_OK);
  assert_int_equal(grt_free_async(pool, p, s), GRT_ERR_DOUBLE_FREE); /* freed in this capture already */
  grt_graph *g = NULL;
  assert_int_equal(grt_stream_end_capture(s, &g), GRT_OK);
  assert_non_null(g);

  grt_mempool_counters after;
  assert_int_equal(grt_mempool_get_counters(pool, &after), GRT_OK);
  assert_memory_equal(&before, &after, sizeof before); /* the pool never saw the capture */

  grt_graph_exec *ge = NULL;
  assert_int_equal(grt_graph_instantiate(g, &ge), GRT_OK);
  size_t nodes = 0;
  uint64_t pool_bytes = 0;
  assert_int_equal(grt_graph_exec_info(ge, &nodes, &pool_bytes), GRT_OK);
  assert_int_equal(nodes, 3); /* alloc, memset, free */
  assert_true(pool_bytes >= 64 * 1024);
  for (int i = 0; i < 3; i++) assert_int_equal(grt_graph_launch(ge, s), GRT_OK);
  assert_int_equal(grt_stream_synchronize(s), GRT_OK);

  /* Outside a capture the pool serves as usual. */
  grt_devptr q = 0;
  assert_int_equal(grt_malloc_async(pool, 4096, s, &q), GRT_OK);
  assert_int_equal(grt_free_async(pool, q, s), GRT_OK);
  assert_int_equal(grt_exec_synchronize(exec), GRT_OK);
  assert_int_equal(grt_graph_exec_destroy(ge), GRT_OK);
  assert_int_equal(grt_graph_destroy(g), GRT_OK);
  assert_int_equal(grt_mempool_destroy(pool), GRT_OK);
  assert_int_equal(grt_stream_destroy(s), GRT_OK);
  assert_int_equal(grt_exec_destroy(exec), GRT_OK);
}

int main(void) {
  const struct CMUnitTest tests[] = {BOTH_CLOCKS(test_capture_malloc_async_becomes_nodes)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
