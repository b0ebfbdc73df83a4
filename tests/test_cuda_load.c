/* test_cuda_load.c — the CUDA backend when the driver cannot be loaded: clean
 * statuses and messages, no device handed out, and the simulated backend
 * keeps working in the same process. The test points GRT_CUDA_LIBRARY at a
 * path that does not exist before the first load, so it behaves the same on a
 * machine with a GPU. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "gpurt/alloc.h"
#include "gpurt/cuda.h"

static void test_probe_and_create_fail_cleanly(void **state) {
  (void)state;
  char msg[512] = "";
  int n = -1;
  grt_status st = grt_cuda_probe(&n, msg, sizeof msg);
  /* NO_DEVICE with the CUDA backend built in; UNSUPPORTED in a build without cuda.h. */
  assert_true(st == GRT_ERR_NO_DEVICE || st == GRT_ERR_UNSUPPORTED);
  assert_true(strlen(msg) > 0);
  if (st == GRT_ERR_NO_DEVICE) assert_non_null(strstr(msg, "/nonexistent/libcuda.so.1"));
  grt_device *dev = (grt_device *)0x1;
  assert_int_equal(grt_device_create_cuda(0, &dev), st);
  assert_null(dev);
  assert_int_equal(grt_device_create_cuda(0, NULL), GRT_ERR_INVALID_ARG);
  /* The same status every time: the load happens once per process. */
  char again[512];
  assert_int_equal(grt_cuda_probe(NULL, again, sizeof again), st);
  assert_string_equal(msg, again);
}

static void test_env_selection(void **state) {
  (void)state;
  grt_device *dev = NULL;
  grt_device_config cfg;
  grt_device_config_default(&cfg);
  cfg.capacity = 8 * GRT_MiB;
  unsetenv("GRT_DEVICE");
  assert_int_equal(grt_device_create_from_env(&cfg, &dev), GRT_OK);
  assert_string_equal(grt_device_backend(dev), "simulated");
  assert_int_equal(grt_device_destroy(dev), GRT_OK);
  setenv("GRT_DEVICE", "sim", 1);
  assert_int_equal(grt_device_create_from_env(NULL, &dev), GRT_OK);
  assert_int_equal(grt_device_destroy(dev), GRT_OK);
  setenv("GRT_DEVICE", "cuda:1", 1);
  grt_status st = grt_device_create_from_env(NULL, &dev);
  assert_true(st == GRT_ERR_NO_DEVICE || st == GRT_ERR_UNSUPPORTED);
  assert_null(dev);
  setenv("GRT_DEVICE", "tpu", 1);
  assert_int_equal(grt_device_create_from_env(NULL, &dev), GRT_ERR_INVALID_ARG);
  setenv("GRT_DEVICE", "cuda:x", 1);
  assert_int_equal(grt_device_create_from_env(NULL, &dev), GRT_ERR_INVALID_ARG);
  unsetenv("GRT_DEVICE");
}

/* After the failed CUDA create the simulated device and allocator still work,
 * and the CUDA-only calls refuse a simulated device cleanly. */
static void test_sim_unaffected(void **state) {
  (void)state;
  grt_device *cuda = NULL;
  assert_int_not_equal(grt_device_create_cuda(0, &cuda), GRT_OK);
  grt_device_config cfg;
  grt_device_config_default(&cfg);
  cfg.capacity = 64 * GRT_MiB;
  grt_device *dev;
  assert_int_equal(grt_device_create(&cfg, &dev), GRT_OK);
  grt_allocator *a;
  assert_int_equal(grt_alloc_create("caching", dev, NULL, &a), GRT_OK);
  grt_devptr p;
  assert_int_equal(grt_alloc_malloc(a, 5 * GRT_MiB, 0, &p), GRT_OK);
  assert_int_equal(grt_alloc_free(a, p), GRT_OK);
  assert_int_equal(grt_device_synchronize(dev), GRT_OK);
  /* The simulated device has its own virtual memory (no CUDA needed). */
  uint64_t g, va;
  assert_int_equal(grt_device_vmm_granularity(dev, &g), GRT_OK);
  assert_int_equal(grt_device_reserve(dev, 2 * GRT_MiB, &va), GRT_OK);
  assert_int_equal(grt_device_map(dev, va + 0x1000, 2 * GRT_MiB), GRT_ERR_INVALID_ARG); /* unaligned */
  assert_int_equal(grt_device_unmap(dev, va, 2 * GRT_MiB), GRT_ERR_INVALID_ARG);        /* not mapped */
  assert_int_equal(grt_device_release(dev, va), GRT_OK);
  grt_cuda_stream *s = (grt_cuda_stream *)0x1;
  assert_int_equal(grt_cuda_stream_create(dev, 0, 0, &s), GRT_ERR_UNSUPPORTED);
  assert_null(s);
  grt_cuda_event *e = (grt_cuda_event *)0x1;
  assert_int_equal(grt_cuda_event_create(dev, 0, &e), GRT_ERR_UNSUPPORTED);
  assert_null(e);
  grt_cuda_gate *gate = NULL;
  assert_int_equal(grt_cuda_gate_create(dev, 100, &gate), GRT_ERR_UNSUPPORTED);
  grt_cuda_events *ev = NULL;
  assert_int_equal(grt_cuda_events_create(dev, &ev), GRT_ERR_UNSUPPORTED);
  assert_null(grt_cuda_events_stream_ops(NULL));
  assert_int_equal(grt_cuda_stream_destroy(NULL), GRT_OK);
  assert_int_equal(grt_cuda_event_destroy(NULL), GRT_OK);
  assert_int_equal(grt_cuda_gate_destroy(NULL), GRT_OK);
  assert_int_equal(grt_cuda_events_destroy(NULL), GRT_OK);
  char buf[64];
  assert_int_equal(grt_device_last_error(dev, buf, sizeof buf), GRT_OK);
  assert_string_equal(buf, "");
  assert_string_equal(grt_device_backend(NULL), "");
  assert_int_equal(grt_alloc_destroy(a), GRT_OK);
  assert_int_equal(grt_device_destroy(dev), GRT_OK);
}

int main(void) {
  setenv("GRT_CUDA_LIBRARY", "/nonexistent/libcuda.so.1", 1);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_probe_and_create_fail_cleanly),
      cmocka_unit_test(test_env_selection),
      cmocka_unit_test(test_sim_unaffected),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
