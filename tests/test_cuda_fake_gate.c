/* test_cuda_fake_gate.c — gates (a stream held until the host opens it) on
 * the CUDA backend against the fake modern driver (tests/fake_cuda): the
 * cuStreamWaitValue32 mechanism, the host-function fallback when the driver
 * refuses it, the watchdog's timeout, destroy opening a closed gate, and the
 * pinned word given back. The fake runs queued work on its own thread, so
 * these tests are threaded. Skips (77) unless GRT_CUDA_LIBRARY names the
 * modern fake. */
#include <time.h>

#include "cuda_fake_fixture.h"

static void set_flag(void *arg) { __atomic_store_n((int *)arg, 1, __ATOMIC_SEQ_CST); }
static int flag_of(int *f) { return __atomic_load_n(f, __ATOMIC_SEQ_CST); }

static void nap_ms(long ms) {
  struct timespec t = {ms / 1000, (ms % 1000) * 1000000L};
  nanosleep(&t, NULL);
}

static double now_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

static void test_wait_value_gate(void **state) {
  (void)state;
  fk_census empty = fk_count();
  grt_device *dev = fk_open();
  grt_cuda_stream *s = NULL;
  assert_int_equal(grt_cuda_stream_create(dev, GRT_CUDA_STREAM_NON_BLOCKING, 0, &s), GRT_OK);
  grt_cuda_gate *g = NULL;
  assert_int_equal(grt_cuda_gate_create(dev, 20000, &g), GRT_OK);
  assert_string_equal(grt_cuda_gate_mechanism(g), "");
  assert_int_equal(fk.live("host"), empty.host + 1);
  assert_int_equal(grt_cuda_gate_block(g, s), GRT_OK);
  assert_string_equal(grt_cuda_gate_mechanism(g), "wait_value32");
  fk_assert_no_context();
  int ran = 0;
  assert_int_equal(grt_cuda_launch_host_func(s, set_flag, &ran), GRT_OK);
  nap_ms(5);
  assert_int_equal(flag_of(&ran), 0);
  assert_int_equal(grt_cuda_stream_query(s), GRT_ERR_NOT_READY);
  assert_int_equal(grt_device_destroy(dev), GRT_ERR_BUSY); /* the gate is a child */
  assert_int_equal(grt_cuda_gate_open(g), GRT_OK);
  assert_int_equal(grt_cuda_stream_synchronize(s), GRT_OK);
  assert_int_equal(flag_of(&ran), 1);
  assert_int_equal(grt_cuda_gate_timed_out(g), 0);
  assert_int_equal(grt_cuda_gate_open(g), GRT_OK); /* opening twice is harmless */
  /* one-shot: blocking on an open gate holds nothing back */
  assert_int_equal(grt_cuda_gate_block(g, s), GRT_OK);
  assert_int_equal(grt_cuda_stream_query(s), GRT_OK);
  assert_int_equal(grt_cuda_gate_destroy(g), GRT_OK);
  assert_int_equal(fk.live("host"), empty.host);
  assert_int_equal(grt_cuda_stream_destroy(s), GRT_OK);
  assert_int_equal(grt_device_destroy(dev), GRT_OK);
  fk_assert_census(empty);
}

/* A gate nobody opens opens itself after its timeout, and says so. */
static void test_watchdog_timeout(void **state) {
  (void)state;
  grt_device *dev = fk_open();
  grt_cuda_stream *s = NULL;
  assert_int_equal(grt_cuda_stream_create(dev, 0, 0, &s), GRT_OK);
  grt_cuda_gate *g = NULL;
  double t0 = now_ms();
  assert_int_equal(grt_cuda_gate_create(dev, 40, &g), GRT_OK);
  assert_int_equal(grt_cuda_gate_block(g, s), GRT_OK);
  int ran = 0;
  assert_int_equal(grt_cuda_launch_host_func(s, set_flag, &ran), GRT_OK);
  assert_int_equal(grt_cuda_stream_synchronize(s), GRT_OK);
  assert_true(now_ms() - t0 >= 35.0);
  assert_int_equal(flag_of(&ran), 1);
  assert_int_equal(grt_cuda_gate_timed_out(g), 1);
  assert_int_equal(grt_cuda_gate_destroy(g), GRT_OK);
  assert_int_equal(grt_cuda_stream_destroy(s), GRT_OK);
  assert_int_equal(grt_device_destroy(dev), GRT_OK);
}

/* Destroying a closed gate opens it: the held work drains, nothing hangs. */
static void test_destroy_opens(void **state) {
  (void)state;
  grt_device *dev = fk_open();
  grt_cuda_stream *s = NULL;
  assert_int_equal(grt_cuda_stream_create(dev, 0, 0, &s), GRT_OK);
  grt_cuda_gate *g = NULL;
  assert_int_equal(grt_cuda_gate_create(dev, 999, &g), GRT_OK);
  assert_int_equal(grt_cuda_gate_block(g, s), GRT_OK);
  int ran = 0;
  assert_int_equal(grt_cuda_launch_host_func(s, set_flag, &ran), GRT_OK);
  double t0 = now_ms();
  assert_int_equal(grt_cuda_gate_destroy(g), GRT_OK);
  assert_int_equal(grt_cuda_stream_synchronize(s), GRT_OK);
  assert_true(now_ms() - t0 < 900.0); /* not by the watchdog */
  assert_int_equal(flag_of(&ran), 1);
  assert_int_equal(grt_cuda_stream_destroy(s), GRT_OK);
  assert_int_equal(grt_device_destroy(dev), GRT_OK);
}

/* A driver that refuses cuStreamWaitValue32: a polling host function holds the stream. */
static void test_host_func_fallback(void **state) {
  (void)state;
  fk_census empty = fk_count();
  grt_device *dev = fk_open();
  grt_cuda_stream *s = NULL;
  assert_int_equal(grt_cuda_stream_create(dev, 0, 0, &s), GRT_OK);
  grt_cuda_gate *g = NULL;
  assert_int_equal(grt_cuda_gate_create(dev, 20000, &g), GRT_OK);
  fk_arm("cuStreamWaitValue32", 1, FK_NOT_SUPPORTED);
  assert_int_equal(grt_cuda_gate_block(g, s), GRT_OK);
  assert_string_equal(grt_cuda_gate_mechanism(g), "host_func");
  int ran = 0;
  assert_int_equal(grt_cuda_launch_host_func(s, set_flag, &ran), GRT_OK);
  nap_ms(5);
  assert_int_equal(flag_of(&ran), 0);
  assert_int_equal(grt_cuda_stream_query(s), GRT_ERR_NOT_READY);
  assert_int_equal(grt_cuda_gate_open(g), GRT_OK);
  assert_int_equal(grt_cuda_stream_synchronize(s), GRT_OK);
  assert_int_equal(flag_of(&ran), 1);
  assert_int_equal(grt_cuda_gate_timed_out(g), 0);
  assert_int_equal(grt_cuda_gate_destroy(g), GRT_OK);
  /* both mechanisms refused: the error names both; the driver's NOT_SUPPORTED is UNSUPPORTED */
  assert_int_equal(grt_cuda_gate_create(dev, 20000, &g), GRT_OK);
  fk_arm("cuStreamWaitValue32", 1, FK_NOT_SUPPORTED);
  fk_arm("cuLaunchHostFunc", 1, FK_LAUNCH_FAILED);
  assert_int_equal(grt_cuda_gate_block(g, s), GRT_ERR_DRIVER);
  fk_error_contains(dev, "cuStreamWaitValue32/cuLaunchHostFunc: CUDA_ERROR_LAUNCH_FAILED");
  assert_string_equal(grt_cuda_gate_mechanism(g), "");
  fk_arm("cuStreamWaitValue32", 1, FK_NOT_SUPPORTED);
  fk_arm("cuLaunchHostFunc", 1, FK_NOT_SUPPORTED);
  assert_int_equal(grt_cuda_gate_block(g, s), GRT_ERR_UNSUPPORTED);
  assert_int_equal(grt_cuda_stream_query(s), GRT_OK); /* nothing was queued */
  assert_int_equal(grt_cuda_gate_block(g, s), GRT_OK); /* faults gone: works again */
  assert_string_equal(grt_cuda_gate_mechanism(g), "wait_value32");
  assert_int_equal(grt_cuda_gate_destroy(g), GRT_OK);
  assert_int_equal(grt_cuda_stream_destroy(s), GRT_OK);
  assert_int_equal(grt_device_destroy(dev), GRT_OK);
  fk_assert_census(empty);
}

static void test_arguments(void **state) {
  (void)state;
  grt_device *dev = fk_open();
  grt_cuda_gate *g = (grt_cuda_gate *)0x1;
  assert_int_equal(grt_cuda_gate_create(NULL, 100, &g), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt_cuda_gate_create(dev, 0, &g), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt_cuda_gate_create(dev, 100, NULL), GRT_ERR_INVALID_ARG);
  fixture fx = make_fixture("naive", 64 * MiB, NULL);
  assert_int_equal(grt_cuda_gate_create(fx.dev, 100, &g), GRT_ERR_UNSUPPORTED);
  assert_null(g);
  drop_fixture(&fx);
  grt_cuda_stream *s = NULL;
  assert_int_equal(grt_cuda_stream_legacy(dev, &s), GRT_OK);
  assert_int_equal(grt_cuda_gate_create(dev, 100, &g), GRT_OK);
  assert_int_equal(grt_cuda_gate_block(NULL, s), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt_cuda_gate_block(g, NULL), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt_cuda_gate_open(NULL), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt_cuda_gate_timed_out(NULL), 0);
  assert_string_equal(grt_cuda_gate_mechanism(NULL), "");
  assert_int_equal(grt_cuda_gate_destroy(NULL), GRT_OK);
  /* the legacy stream can be held too */
  assert_int_equal(grt_cuda_gate_block(g, s), GRT_OK);
  assert_int_equal(grt_cuda_stream_query(s), GRT_ERR_NOT_READY);
  assert_int_equal(grt_cuda_gate_open(g), GRT_OK);
  assert_int_equal(grt_cuda_stream_synchronize(s), GRT_OK);
  assert_int_equal(grt_cuda_gate_destroy(g), GRT_OK);
  assert_int_equal(grt_cuda_stream_destroy(s), GRT_OK);
  assert_int_equal(grt_device_destroy(dev), GRT_OK);
}

int main(void) {
  int ready = fk_ready("test_cuda_fake_gate", "modern");
  if (ready != 1) return fk_not_ready(ready);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_wait_value_gate),   cmocka_unit_test(test_watchdog_timeout),
      cmocka_unit_test(test_destroy_opens),     cmocka_unit_test(test_host_func_fallback),
      cmocka_unit_test(test_arguments),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
