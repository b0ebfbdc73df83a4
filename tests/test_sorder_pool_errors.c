/* test_sorder_pool_errors.c — the stream-ordered pool's refusals: every call
 * with a missing argument, the PyTorch path on an "async" pool, frees of
 * pointers the pool does not own or owns through the other path, a pool busy
 * with live allocations, trim_to while a free is pending (it succeeds); then the same pool
 * works normally (both clocks, shared and per-stream pools, with and without a
 * sanitizer context). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "gpurt/sorder.h"

static void test_args(void **state) {
  (void)state;
  grt_mempool_config_default(NULL);
  grt_mempool_config cfg;
  grt_mempool_config_default(&cfg);
  grt_mempool *p = NULL;
  grt_devptr d = 0;
  grt_mempool_attrs at;
  grt_mempool_counters ct;
  grt_allocator *a = NULL;
  grt_stream_ops ops;
  assert_int_equal(grt_mempool_create(&cfg, NULL), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt_mempool_create(NULL, &p), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt_mempool_create(&cfg, &p), GRT_ERR_INVALID_ARG); /* no exec */
  assert_int_equal(grt_mempool_destroy(NULL), GRT_OK);
  assert_int_equal(grt_malloc_async(NULL, 1, NULL, &d), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt_free_async(NULL, 1, NULL), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt_mempool_free_host_order(NULL, 1), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt_mempool_malloc(NULL, 1, NULL, &d), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt_mempool_record_stream(NULL, 1, NULL), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt_mempool_free(NULL, 1), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt_mempool_stream_synchronize(NULL, NULL), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt_mempool_synchronize(NULL), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt_mempool_set_release_threshold(NULL, 0), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt_mempool_trim_to(NULL, 0), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt_mempool_get_attrs(NULL, &at), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt_mempool_reset_high(NULL), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt_mempool_get_counters(NULL, &ct), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt_mempool_get_allocator(NULL, &a), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt_exec_stream_ops(NULL, &ops), GRT_ERR_INVALID_ARG);
}

static void pool_run(grt_clock_kind clock, const char *policy, int per_stream, int with_sorder) {
  grt_exec_config ec;
  grt_exec_config_default(&ec);
  ec.clock = clock;
  ec.device_capacity = 64 * GRT_MiB;
  grt_exec *exec = NULL;
  assert_int_equal(grt_exec_create(&ec, &exec), GRT_OK);
  grt_sorder *so = NULL;
  if (with_sorder) {
    grt_sorder_config sc;
    grt_sorder_config_default(&sc);
    sc.exec = exec;
    sc.use_env = 0;
    assert_int_equal(grt_sorder_create(&sc, &so), GRT_OK);
  }
  grt_mempool_config cfg;
  grt_mempool_config_default(&cfg);
  cfg.exec = exec;
  cfg.sorder = so;
  cfg.policy = policy;
  cfg.per_stream = per_stream;
  grt_mempool *p = NULL;
  cfg.reuse = 64u;
  assert_int_equal(grt_mempool_create(&cfg, &p), GRT_ERR_INVALID_ARG); /* unknown reuse flag */
  cfg.reuse = GRT_REUSE_ALL;
  assert_int_equal(grt_mempool_create(&cfg, &p), GRT_OK);
  grt_stream *s1 = NULL, *s2 = NULL;
  assert_int_equal(grt_stream_create(exec, GRT_STREAM_NON_BLOCKING, 0, &s1), GRT_OK);
  assert_int_equal(grt_stream_create(exec, GRT_STREAM_NON_BLOCKING, 0, &s2), GRT_OK);
  grt_devptr d = 0, t = 0;
  assert_int_equal(grt_malloc_async(p, 4096, NULL, &d), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt_malloc_async(p, 4096, s1, NULL), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt_malloc_async(p, 0, s1, &d), GRT_ERR_SIZE);
  assert_int_equal(grt_malloc_async(p, 4096, s1, &d), GRT_OK);
  assert_int_equal(grt_free_async(p, d, NULL), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt_free_async(p, d + 1, s1), GRT_ERR_UNKNOWN_POINTER);
  assert_int_equal(grt_mempool_free(p, d), strcmp(policy, "async") ? GRT_ERR_INVALID_ARG : GRT_ERR_UNSUPPORTED);
  assert_int_equal(grt_mempool_destroy(p), GRT_ERR_BUSY);
  if (!strcmp(policy, "async")) {
    assert_int_equal(grt_mempool_malloc(p, 4096, s1, &t), GRT_ERR_UNSUPPORTED);
    assert_int_equal(grt_mempool_record_stream(p, d, s2), GRT_ERR_UNSUPPORTED);
  } else {
    assert_int_equal(grt_mempool_malloc(p, 4096, NULL, &t), GRT_ERR_INVALID_ARG);
    assert_int_equal(grt_mempool_malloc(p, 4096, s1, NULL), GRT_ERR_INVALID_ARG);
    assert_int_equal(grt_mempool_malloc(p, 4096, s1, &t), GRT_OK);
    assert_int_equal(grt_mempool_record_stream(p, t, NULL), GRT_ERR_INVALID_ARG);
    assert_int_equal(grt_mempool_record_stream(p, t + 1, s2), GRT_ERR_UNKNOWN_POINTER);
    assert_int_equal(grt_mempool_record_stream(p, t, s2), GRT_OK);
    assert_int_equal(grt_free_async(p, t, s1), GRT_ERR_INVALID_ARG); /* the PyTorch path's block */
    assert_int_equal(grt_mempool_free(p, t), GRT_OK);
    assert_int_equal(grt_mempool_free(p, t), GRT_ERR_UNKNOWN_POINTER);
  }
  /* a pending free does not stop trim_to: it trims what it can */
  grt_kernel_desc slow = {NULL, NULL, 2000000, GRT_ENGINE_COMPUTE, "slow"};
  assert_int_equal(grt_launch_kernel(s1, &slow), GRT_OK);
  assert_int_equal(grt_free_async(p, d, s1), GRT_OK);
  assert_int_equal(grt_free_async(p, d, s1), GRT_ERR_DOUBLE_FREE);
  assert_int_equal(grt_mempool_trim_to(p, 0), GRT_OK);
  assert_int_equal(grt_mempool_stream_synchronize(p, NULL), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt_mempool_stream_synchronize(p, s1), GRT_OK);
  assert_int_equal(grt_mempool_set_release_threshold(p, 1), GRT_OK);
  assert_int_equal(grt_mempool_synchronize(p), GRT_OK);
  assert_int_equal(grt_mempool_trim_to(p, 0), GRT_OK);
  grt_mempool_attrs at;
  grt_mempool_counters ct;
  grt_allocator *a = NULL;
  grt_stream_ops ops;
  assert_int_equal(grt_mempool_get_attrs(p, NULL), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt_mempool_get_attrs(p, &at), GRT_OK);
  assert_int_equal(at.used_mem_current, 0);
  assert_int_equal(grt_mempool_reset_high(p), GRT_OK);
  assert_int_equal(grt_mempool_get_counters(p, NULL), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt_mempool_get_counters(p, &ct), GRT_OK);
  assert_true(ct.mallocs >= 1);
  assert_int_equal(grt_mempool_get_allocator(p, NULL), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt_mempool_get_allocator(p, &a), GRT_OK);
  assert_non_null(a);
  assert_int_equal(grt_exec_stream_ops(exec, NULL), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt_exec_stream_ops(exec, &ops), GRT_OK);
  if (so) assert_int_equal(grt_sorder_destroy(so), GRT_ERR_BUSY); /* the pool uses it */
  assert_int_equal(grt_mempool_destroy(p), GRT_OK);
  assert_int_equal(grt_sorder_destroy(so), GRT_OK);
  assert_int_equal(grt_stream_destroy(s1), GRT_OK);
  assert_int_equal(grt_stream_destroy(s2), GRT_OK);
  assert_int_equal(grt_exec_destroy(exec), GRT_OK);
}

static void test_pool(void **state) {
  (void)state;
  for (int c = 1; c >= 0; c--)
    for (int pol = 0; pol < 2; pol++)
      for (int ps = 0; ps < 2; ps++)
        pool_run(c ? GRT_CLOCK_VIRTUAL : GRT_CLOCK_THREADS, pol ? "async" : "caching", ps, (c + pol + ps) & 1);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_args),
      cmocka_unit_test(test_pool),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
