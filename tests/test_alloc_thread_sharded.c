/* test_alloc_thread_sharded.c — the "sharded" policy: one stream decides
 * exactly as "caching"; threads on their own streams run concurrently and the
 * structure stays consistent (ThreadSanitizer runs this file in CI). */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "alloc_fixture.h"
#include "base/rng.h"

/* Replays one seeded single-stream sequence and records every address. */
static void run_sequence(grt_allocator *a, grt_stream_id stream, grt_devptr *trace, size_t n) {
  grt_devptr live[64] = {0};
  grt__rng r;
  grt__rng_seed(&r, 99);
  for (size_t i = 0; i < n; i++) {
    int k = (int)grt__rng_below(&r, 64);
    if (live[k]) {
      assert_int_equal(grt_alloc_free(a, live[k]), GRT_OK);
      live[k] = 0;
      trace[i] = 1;
    } else {
      uint64_t size = grt__rng_log_uniform(&r, 1, 48 * MiB);
      grt_status st = grt_alloc_malloc(a, size, stream, &live[k]);
      trace[i] = st == GRT_OK ? live[k] : (grt_devptr)st;
      if (st) live[k] = 0;
    }
  }
  for (int k = 0; k < 64; k++)
    if (live[k]) assert_int_equal(grt_alloc_free(a, live[k]), GRT_OK);
}

static void test_single_stream_same_decisions(void **state) {
  (void)state;
  enum { N = 50000 };
  grt_devptr *t1 = calloc(N, sizeof *t1), *t2 = calloc(N, sizeof *t2);
  fixture f1 = make_fixture("caching", 160 * MiB, NULL);
  fixture f2 = make_fixture("sharded", 160 * MiB, NULL);
  run_sequence(f1.a, 7, t1, N);
  run_sequence(f2.a, 7, t2, N);
  assert_memory_equal(t1, t2, N * sizeof *t1); /* same addresses, same failures */
  grt_alloc_stats s1 = stats_of(f1.a), s2 = stats_of(f2.a);
  assert_int_equal(s1.num_device_alloc, s2.num_device_alloc);
  assert_int_equal(s1.num_ooms, s2.num_ooms);
  assert_true(s1.num_ooms > 0);
  assert_int_equal(s1.reserved_bytes[GRT_STAT_ALL].peak, s2.reserved_bytes[GRT_STAT_ALL].peak);
  drop_fixture(&f1);
  drop_fixture(&f2);
  free(t1);
  free(t2);
}

static void test_sharded_errors(void **state) {
  (void)state;
  grt_alloc_config c;
  grt_alloc_config_default(&c);
  char err[64];
  assert_int_equal(grt_alloc_config_parse(&c, "shards:4", err, sizeof err), GRT_OK);
  fixture fx = make_fixture("sharded", GRT_GiB, &c);
  grt_devptr p = must_malloc(fx.a, 4 * MiB, 3);
  assert_int_equal(grt_alloc_free(fx.a, p + 512), GRT_ERR_INTERIOR_POINTER);
  assert_int_equal(grt_alloc_free(fx.a, 0x1234000), GRT_ERR_UNKNOWN_POINTER);
  assert_int_equal(grt_alloc_record_stream(fx.a, p, 9), GRT_OK);
  uint64_t sz, rq;
  assert_int_equal(grt_alloc_block_info(fx.a, p, &sz, &rq), GRT_OK);
  assert_int_equal(sz, 4 * MiB);
  assert_int_equal(grt_alloc_free(fx.a, p), GRT_OK);
  assert_int_equal(grt_alloc_free(fx.a, p), GRT_ERR_DOUBLE_FREE);
  assert_non_null(strstr(grt_alloc_last_error(fx.a), "double free"));
  grt_alloc_snapshot *snap;
  assert_int_equal(grt_alloc_snapshot_take(fx.a, &snap), GRT_OK);
  assert_int_equal(snap->n_segments, 1);
  grt_alloc_snapshot_free(snap);
  drop_fixture(&fx);
}

typedef struct worker {
  grt_allocator *a;
  grt_stream_id stream;
  uint64_t seed;
  int ops;
  int failures;
} worker;

static void *churn(void *arg) {
  worker *w = arg;
  grt_devptr live[128] = {0};
  grt__rng r;
  grt__rng_seed(&r, w->seed);
  for (int i = 0; i < w->ops; i++) {
    int k = (int)grt__rng_below(&r, 128);
    if (live[k]) {
      if (grt_alloc_free(w->a, live[k]) != GRT_OK) w->failures++;
      live[k] = 0;
    } else if (grt_alloc_malloc(w->a, grt__rng_log_uniform(&r, 256, 4 * MiB), w->stream, &live[k]) != GRT_OK) {
      live[k] = 0;
      w->failures++;
    }
  }
  for (int k = 0; k < 128; k++)
    if (live[k] && grt_alloc_free(w->a, live[k]) != GRT_OK) w->failures++;
  return NULL;
}

static void run_threads(const char *policy, int n_threads, int ops) {
  fixture fx = make_fixture(policy, 4 * GRT_GiB, NULL);
  pthread_t t[4];
  worker w[4];
  for (int i = 0; i < n_threads; i++) {
    w[i] = (worker){fx.a, (grt_stream_id)(i + 1), (uint64_t)i + 10, ops, 0};
    assert_int_equal(pthread_create(&t[i], NULL, churn, &w[i]), 0);
  }
  for (int i = 0; i < n_threads; i++) {
    pthread_join(t[i], NULL);
    assert_int_equal(w[i].failures, 0);
  }
  grt_alloc_stats s = stats_of(fx.a);
  assert_int_equal(s.allocation[GRT_STAT_ALL].current, 0);
  assert_int_equal(s.allocation[GRT_STAT_ALL].allocated, s.allocation[GRT_STAT_ALL].freed);
  drop_fixture(&fx);
}

static void test_threads_on_own_streams(void **state) {
  (void)state;
  run_threads("sharded", 4, 100000);
  run_threads("caching", 4, 50000); /* one mutex: correct, just serialized */
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_single_stream_same_decisions),
      cmocka_unit_test(test_sharded_errors),
      cmocka_unit_test(test_threads_on_own_streams),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
