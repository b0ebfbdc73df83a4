/* test_sorder_stress.c — 4 host threads x 4 streams doing random malloc_async /
 * free_async / kernels with declared accesses through the safe API, with the
 * sanitizer and the poison check on: neither reports anything, and the pool's
 * allocator passes its invariant walk. Also the pinned pool and the staging
 * pipeline under both clocks. Runs under ThreadSanitizer in CI. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "base/rng.h"
#include "gpurt/sorder.h"
#include "test_exec_common.h"

typedef struct worker {
  grt_sorder *so;
  grt_mempool *pool;
  grt_stream **streams; /* 4 shared by all threads */
  grt_exec *exec;
  uint64_t seed;
  int iters;
  grt_status st;
} worker;

static void fill_body(void *p) {
  uint64_t *a = p; /* a[0] = device host pointer as integer, a[1] = bytes */
  memset((void *)(uintptr_t)a[0], 0x11, a[1]);
}

static void *worker_main(void *p) {
  worker *w = p;
  grt__rng r;
  grt__rng_seed(&r, w->seed);
  grt_event *ev = NULL;
  grt_device *dev;
  w->st = grt_event_create(w->exec, GRT_EVENT_DISABLE_TIMING, &ev);
  if (!w->st) w->st = grt_exec_get_device(w->exec, &dev);
  uint64_t args[2];
  for (int i = 0; i < w->iters && !w->st; i++) {
    int a = (int)grt__rng_below(&r, 4), f = (int)grt__rng_below(&r, 4);
    uint64_t size = 512 + grt__rng_below(&r, 256 * 1024);
    grt_devptr x;
    void *h;
    if ((w->st = grt_malloc_async(w->pool, size, w->streams[a], &x))) break;
    if ((w->st = grt_device_host_ptr(dev, x, size, &h))) break;
    /* a writer then a reader, both declared; only this thread knows x */
    args[0] = (uint64_t)(uintptr_t)h;
    args[1] = size;
    grt_access wr = {x, size, 1}, rd = {x, size, 0};
    grt_kernel_desc kw = {fill_body, args, grt__rng_below(&r, 5000), GRT_ENGINE_COMPUTE, "fill"};
    grt_kernel_desc kr = {NULL, NULL, grt__rng_below(&r, 5000), GRT_ENGINE_COMPUTE, "read"};
    if ((w->st = grt_sorder_launch(w->so, w->streams[a], &kw, &wr, 1))) break;
    if ((w->st = grt_sorder_launch(w->so, w->streams[a], &kr, &rd, 1))) break;
    if (f != a && ((w->st = grt_sorder_event_record(w->so, ev, w->streams[a])) ||
                   (w->st = grt_sorder_stream_wait_event(w->so, w->streams[f], ev))))
      break;
    if ((w->st = grt_free_async(w->pool, x, w->streams[f]))) break;
    /* args is reused next iteration: wait until the writer ran */
    if ((w->st = grt_sorder_stream_synchronize(w->so, w->streams[a]))) break;
    if (i % 50 == 49) w->st = grt_mempool_synchronize(w->pool);
  }
  grt_status st = grt_event_destroy(ev);
  if (w->st == GRT_OK) w->st = st;
  return NULL;
}

static void test_stress(void **state) {
  grt_clock_kind clock = clock_of(state);
  grt_exec_config cfg;
  grt_exec_config_default(&cfg);
  cfg.clock = clock;
  cfg.device_capacity = 64 * GRT_MiB;
  grt_exec *exec;
  assert_int_equal(grt_exec_create(&cfg, &exec), GRT_OK);
  grt_sorder_config sc;
  grt_sorder_config_default(&sc);
  sc.exec = exec;
  sc.use_env = 0;
  sc.poison = 1;
  grt_sorder *so;
  assert_int_equal(grt_sorder_create(&sc, &so), GRT_OK);
  grt_mempool_config pc;
  grt_mempool_config_default(&pc);
  pc.exec = exec;
  pc.sorder = so;
  grt_mempool *pool;
  assert_int_equal(grt_mempool_create(&pc, &pool), GRT_OK);
  grt_stream *s[4];
  for (int i = 0; i < 4; i++) s[i] = make_stream(exec, GRT_STREAM_NON_BLOCKING, NULL);
  worker w[4];
  pthread_t t[4];
  for (int i = 0; i < 4; i++) {
    w[i] = (worker){so, pool, s, exec, 100 + (uint64_t)i, 150, GRT_OK};
    assert_int_equal(pthread_create(&t[i], NULL, worker_main, &w[i]), 0);
  }
  for (int i = 0; i < 4; i++) {
    pthread_join(t[i], NULL);
    assert_int_equal(w[i].st, GRT_OK);
  }
  assert_int_equal(grt_mempool_synchronize(pool), GRT_OK);
  size_t kept;
  uint64_t total;
  assert_int_equal(grt_sorder_report_count(so, &kept, &total), GRT_OK);
  if (total) assert_int_equal(grt_sorder_print_reports(so, stderr), GRT_OK);
  assert_int_equal(total, 0);
  grt_mempool_counters k;
  assert_int_equal(grt_mempool_get_counters(pool, &k), GRT_OK);
  assert_int_equal(k.mallocs, 600);
  assert_int_equal(k.frees, 600);
  print_message("stress (%s): same-stream %llu, event-dep %llu, opportunistic %llu, edges %llu, host syncs %llu\n",
                clock == GRT_CLOCK_VIRTUAL ? "virtual" : "threads", (unsigned long long)k.reuse_same_stream,
                (unsigned long long)k.reuse_event_dep, (unsigned long long)k.reuse_opportunistic,
                (unsigned long long)k.edges_inserted, (unsigned long long)k.host_syncs);
  grt_allocator *al;
  char msg[200];
  assert_int_equal(grt_mempool_get_allocator(pool, &al), GRT_OK);
  assert_int_equal(grt_alloc_check(al, msg, sizeof msg), GRT_OK);
  assert_int_equal(grt_mempool_destroy(pool), GRT_OK);
  assert_int_equal(grt_sorder_destroy(so), GRT_OK);
  for (int i = 0; i < 4; i++) assert_int_equal(grt_stream_destroy(s[i]), GRT_OK);
  assert_int_equal(grt_exec_destroy(exec), GRT_OK);
}

/* Pinned pool caching + staging output and bounds, K = 1..3. */
static void test_staging(void **state) {
  grt_clock_kind clock = clock_of(state);
  grt_exec *exec = make_exec(clock, 0);
  grt_mempool_config mc;
  grt_mempool_config_default(&mc);
  mc.exec = exec;
  grt_pinned_config pc;
  grt_pinned_config_default(&pc);
  pc.exec = exec;
  pc.capacity = 16 * GRT_MiB;
  pc.alloc_cost_ns = 100000;
  grt_mempool *dp;
  grt_pinned_pool *hp;
  assert_int_equal(grt_mempool_create(&mc, &dp), GRT_OK);
  assert_int_equal(grt_pinned_pool_create(&pc, &hp), GRT_OK);
  enum { N = 10 * 4096 + 100 };
  unsigned char *src = malloc(N), *dst = malloc(N);
  for (int i = 0; i < N; i++) src[i] = (unsigned char)(i * 7);
  uint64_t elapsed[3] = {0};
  for (unsigned k = 1; k <= 3; k++) {
    grt_staging_config sc = {exec, dp, hp, k, 4096, 20000, NULL, NULL};
    grt_staging_result r;
    memset(dst, 0, N);
    assert_int_equal(grt_staging_run(&sc, src, dst, N, &r), GRT_OK);
    for (int i = 0; i < N; i++) assert_int_equal(dst[i], src[i] ^ 0x5a);
    assert_int_equal(r.chunks, 11);
    assert_true(r.overlap_bound_ns < r.serial_bound_ns);
    if (clock == GRT_CLOCK_VIRTUAL) assert_true(r.elapsed_ns >= r.overlap_bound_ns - 20000);
    elapsed[k - 1] = r.elapsed_ns;
  }
  if (clock == GRT_CLOCK_VIRTUAL) assert_true(elapsed[2] < elapsed[0]);
  grt_staging_config bad = {exec, dp, hp, 0, 4096, 0, NULL, NULL};
  grt_staging_result r;
  assert_int_equal(grt_staging_run(&bad, src, dst, N, &r), GRT_ERR_INVALID_ARG);
  grt_pinned_stats ps;
  assert_int_equal(grt_pinned_get_stats(hp, &ps), GRT_OK);
  assert_int_equal(ps.mallocs, 12);
  assert_int_equal(ps.host_allocs, 1); /* one 2 MiB segment serves every staging buffer */
  assert_int_equal(ps.alloc_cost_ns, 100000);
  void *h;
  assert_int_equal(grt_pinned_malloc(hp, 1000, &h), GRT_OK);
  assert_int_equal(grt_pinned_pool_destroy(hp), GRT_ERR_BUSY);
  assert_int_equal(grt_pinned_free(hp, (char *)h + 1), GRT_ERR_UNKNOWN_POINTER);
  assert_int_equal(grt_pinned_free(hp, h), GRT_OK);
  assert_int_equal(grt_pinned_free(hp, h), GRT_ERR_UNKNOWN_POINTER);
  assert_int_equal(grt_pinned_empty_cache(hp), GRT_OK);
  free(src);
  free(dst);
  assert_int_equal(grt_pinned_pool_destroy(hp), GRT_OK);
  assert_int_equal(grt_mempool_destroy(dp), GRT_OK);
  assert_int_equal(grt_exec_destroy(exec), GRT_OK);
}

/* The host delay advances virtual time by exactly its amount when idle. */
static void test_host_delay(void **state) {
  (void)state;
  grt_exec *exec = make_exec(GRT_CLOCK_VIRTUAL, 0);
  uint64_t t0, t1;
  assert_int_equal(grt_exec_now_ns(exec, &t0), GRT_OK);
  assert_int_equal(grt_exec_host_delay(exec, 2000000), GRT_OK);
  assert_int_equal(grt_exec_now_ns(exec, &t1), GRT_OK);
  assert_int_equal(t1 - t0, 2000000);
  assert_int_equal(grt_exec_destroy(exec), GRT_OK);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      BOTH_CLOCKS(test_stress),
      BOTH_CLOCKS(test_staging),
      cmocka_unit_test(test_host_delay),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
