/* test_sorder_pinned.c — the pinned host pool's record_stream (a free waits
 * for the recorded stream's work, gated here by a user event), its argument
 * checks and capacity limit, and the staging pipeline's configuration
 * checks and custom compute function. Virtual clock: deterministic. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "gpurt/sorder.h"

static grt_exec *make_exec(void) {
  grt_exec_config ec;
  grt_exec_config_default(&ec);
  ec.clock = GRT_CLOCK_VIRTUAL;
  ec.device_capacity = 64 * GRT_MiB;
  grt_exec *exec = NULL;
  assert_int_equal(grt_exec_create(&ec, &exec), GRT_OK);
  return exec;
}

static grt_pinned_stats pinned_stats(grt_pinned_pool *p) {
  grt_pinned_stats s;
  assert_int_equal(grt_pinned_get_stats(p, &s), GRT_OK);
  return s;
}

/* A buffer recorded on a stream is reusable only after that stream's work before the free completed. */
static void test_pinned_record_stream(void **state) {
  (void)state;
  grt_exec *exec = make_exec();
  grt_pinned_config pc;
  grt_pinned_config_default(&pc);
  pc.exec = exec;
  pc.capacity = 8 * GRT_MiB;
  pc.alloc_cost_ns = 1000;
  grt_pinned_pool *p;
  assert_int_equal(grt_pinned_pool_create(&pc, &p), GRT_OK);
  grt_stream *s;
  grt_user_event *gate;
  assert_int_equal(grt_stream_create(exec, GRT_STREAM_NON_BLOCKING, 0, &s), GRT_OK);
  assert_int_equal(grt_user_event_create(exec, "gate", &gate), GRT_OK);
  assert_int_equal(grt_stream_wait_user_event(s, gate, 1), GRT_OK); /* s's work waits for the gate */

  void *h, *h2;
  assert_int_equal(grt_pinned_malloc(p, 4096, &h), GRT_OK);
  assert_int_equal(grt_pinned_record_stream(p, h, s), GRT_OK);
  assert_int_equal(grt_pinned_free(p, h), GRT_OK); /* deferred: s has not run */
  assert_int_equal(grt_pinned_malloc(p, 4096, &h2), GRT_OK);
  assert_ptr_not_equal(h2, h); /* the block is not reusable yet */
  assert_int_equal(pinned_stats(p).allocated_bytes, 4096); /* as PyTorch: counted freed at the user's free */
  assert_int_equal(grt_user_event_signal(gate, 1), GRT_OK);
  assert_int_equal(grt_stream_synchronize(s), GRT_OK);
  assert_int_equal(grt_pinned_free(p, h2), GRT_OK);
  void *h3;
  assert_int_equal(grt_pinned_malloc(p, 4096, &h3), GRT_OK); /* the recorded event has completed */
  assert_ptr_equal(h3, h);
  grt_pinned_stats ps = pinned_stats(p);
  assert_int_equal(ps.allocated_bytes, 4096);
  assert_int_equal(ps.mallocs, 3);
  assert_int_equal(ps.host_allocs, 1);
  assert_int_equal(ps.cache_hits, 2);
  assert_int_equal(ps.alloc_cost_ns, 1000);

  /* refusals */
  assert_int_equal(grt_pinned_record_stream(p, (char *)h3 + 8, s), GRT_ERR_UNKNOWN_POINTER);
  assert_int_equal(grt_pinned_record_stream(NULL, h3, s), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt_pinned_record_stream(p, NULL, s), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt_pinned_record_stream(p, h3, NULL), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt_pinned_free(NULL, h3), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt_pinned_free(p, NULL), GRT_ERR_INVALID_ARG);
  void *x = NULL;
  assert_int_equal(grt_pinned_malloc(NULL, 10, &x), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt_pinned_malloc(p, 10, NULL), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt_pinned_malloc(p, 0, &x), GRT_ERR_SIZE);
  assert_int_equal(grt_pinned_malloc(p, 9 * GRT_MiB, &x), GRT_ERR_OOM); /* above the pinnable capacity */
  assert_null(x);
  assert_int_equal(pinned_stats(p).mallocs, 3); /* failures are not counted */
  assert_int_equal(grt_pinned_empty_cache(NULL), GRT_ERR_INVALID_ARG);
  grt_pinned_stats dummy;
  assert_int_equal(grt_pinned_get_stats(NULL, &dummy), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt_pinned_get_stats(p, NULL), GRT_ERR_INVALID_ARG);

  assert_int_equal(grt_pinned_free(p, h3), GRT_OK);
  assert_int_equal(grt_pinned_empty_cache(p), GRT_OK);
  assert_int_equal(pinned_stats(p).reserved_bytes, 0);
  assert_int_equal(grt_pinned_pool_destroy(p), GRT_OK);
  assert_int_equal(grt_user_event_destroy(gate), GRT_OK);
  assert_int_equal(grt_stream_destroy(s), GRT_OK);
  assert_int_equal(grt_exec_destroy(exec), GRT_OK);
}

static void test_pinned_create_args(void **state) {
  (void)state;
  grt_pinned_config_default(NULL); /* a no-op */
  grt_pinned_config pc;
  grt_pinned_config_default(&pc);
  assert_int_equal(pc.capacity, 256 * GRT_MiB);
  assert_int_equal(pc.alloc_cost_ns, 2000000);
  grt_pinned_pool *p = (grt_pinned_pool *)&pc;
  assert_int_equal(grt_pinned_pool_create(&pc, &p), GRT_ERR_INVALID_ARG); /* no exec */
  assert_null(p);
  grt_exec *exec = make_exec();
  pc.exec = exec;
  pc.capacity = 0;
  assert_int_equal(grt_pinned_pool_create(&pc, &p), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt_pinned_pool_create(NULL, &p), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt_pinned_pool_create(&pc, NULL), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt_pinned_pool_destroy(NULL), GRT_OK);
  assert_int_equal(grt_exec_destroy(exec), GRT_OK);
}

typedef struct add_arg {
  unsigned char add;
  unsigned calls;
} add_arg;

static void add_fn(void *arg, const unsigned char *in, unsigned char *out, uint64_t bytes) {
  add_arg *a = arg;
  for (uint64_t i = 0; i < bytes; i++) out[i] = (unsigned char)(in[i] + a->add);
  a->calls++;
}

/* The staging pipeline with a caller's compute function; each bad configuration is refused. */
static void test_staging_config(void **state) {
  (void)state;
  grt_exec *exec = make_exec();
  grt_mempool_config mc;
  grt_mempool_config_default(&mc);
  mc.exec = exec;
  grt_pinned_config pc;
  grt_pinned_config_default(&pc);
  pc.exec = exec;
  pc.capacity = 4 * GRT_MiB;
  grt_mempool *dp;
  grt_pinned_pool *hp;
  assert_int_equal(grt_mempool_create(&mc, &dp), GRT_OK);
  assert_int_equal(grt_pinned_pool_create(&pc, &hp), GRT_OK);
  enum { N = 5000 };
  unsigned char *src = malloc(N), *dst = calloc(N, 1);
  for (int i = 0; i < N; i++) src[i] = (unsigned char)i;
  add_arg arg = {3, 0};
  grt_staging_config sc = {exec, dp, hp, 2, 1024, 5000, add_fn, &arg};
  grt_staging_result r;
  assert_int_equal(grt_staging_run(&sc, src, dst, N, &r), GRT_OK);
  for (int i = 0; i < N; i++) assert_int_equal(dst[i], (unsigned char)(i + 3));
  assert_int_equal(r.chunks, 5); /* 4 x 1024 + 904 */
  assert_int_equal(arg.calls, 5);
  assert_true(r.overlap_bound_ns <= r.serial_bound_ns);
  /* one chunk: nothing overlaps, both bounds are the same */
  assert_int_equal(grt_staging_run(&sc, src, dst, 100, &r), GRT_OK);
  assert_int_equal(r.chunks, 1);
  assert_int_equal(r.overlap_bound_ns, r.serial_bound_ns);

  grt_staging_config bad[8];
  for (int i = 0; i < 8; i++) bad[i] = sc;
  bad[0].exec = NULL;
  bad[1].device_pool = NULL;
  bad[2].host_pool = NULL;
  bad[3].chunk_bytes = 0;
  bad[4].buffers = 0;
  bad[5].buffers = 17;
  bad[6].buffers = 16; /* the largest K is fine */
  bad[7].fn = NULL;    /* the default XOR 0x5a */
  for (int i = 0; i < 6; i++) assert_int_equal(grt_staging_run(&bad[i], src, dst, N, &r), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt_staging_run(NULL, src, dst, N, &r), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt_staging_run(&sc, NULL, dst, N, &r), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt_staging_run(&sc, src, NULL, N, &r), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt_staging_run(&sc, src, dst, 0, &r), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt_staging_run(&sc, src, dst, N, NULL), GRT_ERR_INVALID_ARG);
  assert_int_equal(arg.calls, 6); /* no refused run computed anything */
  assert_int_equal(grt_staging_run(&bad[6], src, dst, N, &r), GRT_OK);
  assert_int_equal(grt_staging_run(&bad[7], src, dst, N, &r), GRT_OK);
  for (int i = 0; i < N; i++) assert_int_equal(dst[i], src[i] ^ 0x5a);
  free(src);
  free(dst);
  assert_int_equal(grt_pinned_pool_destroy(hp), GRT_OK);
  assert_int_equal(grt_mempool_destroy(dp), GRT_OK);
  assert_int_equal(grt_exec_destroy(exec), GRT_OK);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_pinned_record_stream),
      cmocka_unit_test(test_pinned_create_args),
      cmocka_unit_test(test_staging_config),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
