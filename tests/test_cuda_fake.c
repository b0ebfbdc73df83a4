/* test_cuda_fake.c — the CUDA backend's host-side logic against a fake,
 * old driver (tests/fake_cuda: 64 MiB, no streams / events / VMM): malloc and
 * free through the driver, OOM mapping, pointers refused before cuMemFree,
 * missing entry points reported by name, the caching allocator on top, and
 * the simulated backend alongside. Skips (77) unless GRT_CUDA_LIBRARY names
 * the fake (CTest sets it in builds with the CUDA headers). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc_fixture.h"
#include "gpurt/cuda.h"

static grt_device *open_fake(void) {
  grt_device *dev = NULL;
  assert_int_equal(grt_device_create_cuda(0, &dev), GRT_OK);
  return dev;
}

static void last_error_contains(grt_device *dev, const char *text) {
  char buf[256];
  assert_int_equal(grt_device_last_error(dev, buf, sizeof buf), GRT_OK);
  if (!strstr(buf, text)) fprintf(stderr, "last error \"%s\" lacks \"%s\"\n", buf, text);
  assert_non_null(strstr(buf, text));
}

static void test_probe_and_identity(void **state) {
  (void)state;
  char msg[256];
  int n = 0;
  assert_int_equal(grt_cuda_probe(&n, msg, sizeof msg), GRT_OK);
  assert_int_equal(n, 1);
  assert_non_null(strstr(msg, "CUDA driver 12.0"));
  grt_device *dev = NULL;
  assert_int_equal(grt_device_create_cuda(1, &dev), GRT_ERR_INVALID_ARG); /* only one device */
  assert_null(dev);
  dev = open_fake();
  assert_string_equal(grt_device_backend(dev), "cuda");
  char name[64];
  assert_int_equal(grt_cuda_device_name(dev, name, sizeof name), GRT_OK);
  assert_string_equal(name, "Fake GPU");
  assert_int_equal(grt_device_destroy(dev), GRT_OK);
}

static void test_malloc_free_and_bad_pointers(void **state) {
  (void)state;
  grt_device *dev = open_fake();
  grt_devptr a, b, x;
  assert_int_equal(grt_device_malloc(dev, 4 * MiB, &a), GRT_OK);
  assert_int_equal(grt_device_malloc(dev, 1000, &b), GRT_OK);
  uint64_t size, free_b, total;
  assert_int_equal(grt_device_segment_size(dev, b, &size), GRT_OK);
  assert_int_equal(size, 1024); /* rounded to the 512-byte alignment */
  assert_int_equal(grt_device_mem_get_info(dev, &free_b, &total), GRT_OK);
  assert_int_equal(total, 64 * MiB);
  assert_int_equal(free_b, 64 * MiB - 4 * MiB - 1024);
  assert_int_equal(grt_device_malloc(dev, 63 * MiB, &x), GRT_ERR_OOM);
  last_error_contains(dev, "CUDA_ERROR_OUT_OF_MEMORY");
  assert_int_equal(grt_device_free(dev, 0xdead0000), GRT_ERR_UNKNOWN_POINTER);
  last_error_contains(dev, "refused before reaching cuMemFree");
  assert_int_equal(grt_device_free(dev, a + 512), GRT_ERR_INTERIOR_POINTER);
  assert_int_equal(grt_device_malloc_at(dev, 0x7a0000000000ULL, 512), GRT_ERR_UNSUPPORTED);
  void *hp;
  assert_int_equal(grt_device_host_ptr(dev, a, 16, &hp), GRT_ERR_UNSUPPORTED);
  assert_int_equal(grt_device_destroy(dev), GRT_ERR_BUSY);
  assert_int_equal(grt_device_free(dev, a), GRT_OK);
  assert_int_equal(grt_device_free(dev, a), GRT_ERR_DOUBLE_FREE);
  assert_int_equal(grt_device_free(dev, b), GRT_OK);
  grt_device_stats s = dev_stats(dev);
  assert_int_equal(s.malloc_calls, 2);
  assert_int_equal(s.failed_mallocs, 1);
  assert_int_equal(s.free_calls, 2);
  assert_int_equal(s.bytes_in_use, 0);
  assert_int_equal(s.peak_bytes_in_use, 4 * MiB + 1024);
  assert_int_equal(s.capacity, 64 * MiB);
  assert_int_equal(grt_device_synchronize(dev), GRT_OK);
  assert_int_equal(grt_device_destroy(dev), GRT_OK);
}

static void nothing(void *arg) { (void)arg; }

/* An old driver: what it lacks is named, nothing else breaks. */
static void test_missing_entry_points(void **state) {
  (void)state;
  grt_device *dev = open_fake();
  grt_cuda_stream *s = NULL;
  assert_int_equal(grt_cuda_stream_create(dev, GRT_CUDA_STREAM_NON_BLOCKING, 0, &s), GRT_ERR_UNSUPPORTED);
  assert_null(s);
  last_error_contains(dev, "cuStreamCreateWithPriority");
  grt_cuda_event *e = NULL;
  assert_int_equal(grt_cuda_event_create(dev, 0, &e), GRT_ERR_UNSUPPORTED);
  last_error_contains(dev, "cuEventCreate");
  uint64_t g, va;
  assert_int_equal(grt_device_vmm_granularity(dev, &g), GRT_ERR_UNSUPPORTED);
  last_error_contains(dev, "cuMemGetAllocationGranularity");
  assert_int_equal(grt_device_reserve(dev, 2 * MiB, &va), GRT_ERR_UNSUPPORTED);
  grt_cuda_gate *gate = NULL;
  assert_int_equal(grt_cuda_gate_create(dev, 100, &gate), GRT_ERR_UNSUPPORTED);
  last_error_contains(dev, "cuMemHostAlloc");
  /* The legacy stream wrapper needs no driver call; using it needs cuLaunchHostFunc. */
  assert_int_equal(grt_cuda_stream_legacy(dev, &s), GRT_OK);
  assert_int_equal(grt_cuda_stream_id(s), 0);
  assert_int_equal(grt_device_destroy(dev), GRT_ERR_BUSY); /* a live child */
  assert_int_equal(grt_cuda_stream_query(s), GRT_ERR_UNSUPPORTED);
  last_error_contains(dev, "cuStreamQuery");
  assert_int_equal(grt_cuda_stream_synchronize(s), GRT_ERR_UNSUPPORTED);
  last_error_contains(dev, "the CUDA driver lacks the entry point cuStreamSynchronize");
  assert_int_equal(grt_cuda_launch_host_func(s, nothing, NULL), GRT_ERR_UNSUPPORTED);
  last_error_contains(dev, "cuLaunchHostFunc");
  grt_devptr p = 0;
  unsigned char host[16] = {0};
  assert_int_equal(grt_device_malloc(dev, 4096, &p), GRT_OK);
  assert_int_equal(grt_cuda_memcpy_htod_async(s, p, host, sizeof host), GRT_ERR_UNSUPPORTED);
  last_error_contains(dev, "cuMemcpyHtoDAsync");
  assert_int_equal(grt_cuda_memcpy_dtoh_async(s, host, p, sizeof host), GRT_ERR_UNSUPPORTED);
  last_error_contains(dev, "cuMemcpyDtoHAsync");
  assert_int_equal(grt_cuda_memcpy_dtod_async(s, p, p + 16, sizeof host), GRT_ERR_UNSUPPORTED);
  last_error_contains(dev, "cuMemcpyDtoDAsync");
  assert_int_equal(grt_cuda_memset_async(s, p, 0, sizeof host), GRT_ERR_UNSUPPORTED);
  last_error_contains(dev, "cuMemsetD8Async");
  assert_int_equal(grt_device_free(dev, p), GRT_OK);
  assert_int_equal(grt_device_map(dev, 0, 2 * MiB), GRT_ERR_UNSUPPORTED);
  assert_int_equal(grt_device_release(dev, 0), GRT_ERR_UNKNOWN_POINTER); /* nothing reserved */
  assert_int_equal(grt_cuda_stream_destroy(s), GRT_OK);
  assert_int_equal(grt_device_destroy(dev), GRT_OK);
}

/* The caching allocator on the CUDA backend: reuse, stats, empty_cache giving memory back. */
static void test_caching_on_cuda(void **state) {
  (void)state;
  grt_device *dev = open_fake();
  grt_cuda_events *ev = NULL;
  assert_int_equal(grt_cuda_events_create(dev, &ev), GRT_OK);
  grt_alloc_config cfg;
  grt_alloc_config_default(&cfg);
  cfg.stream_ops = grt_cuda_events_stream_ops(ev);
  grt_allocator *a;
  assert_int_equal(grt_alloc_create("caching", dev, &cfg, &a), GRT_OK);
  grt_devptr p = must_malloc(a, 3000, 0);
  assert_int_equal(grt_alloc_free(a, p), GRT_OK);
  for (int i = 0; i < 10; i++) {
    grt_devptr q = must_malloc(a, 3000, 0);
    assert_int_equal(q, p);
    assert_int_equal(grt_alloc_free(a, q), GRT_OK);
  }
  grt_devptr big = must_malloc(a, 30 * MiB, 0);
  assert_int_equal(grt_alloc_free(a, big), GRT_OK);
  grt_alloc_stats s = stats_of(a);
  assert_int_equal(s.num_device_alloc, 2);
  assert_int_equal(s.num_cache_hits, 10);
  uint64_t f0, f1, t;
  assert_int_equal(grt_device_mem_get_info(dev, &f0, &t), GRT_OK);
  assert_int_equal(grt_alloc_empty_cache(a), GRT_OK);
  assert_int_equal(grt_device_mem_get_info(dev, &f1, &t), GRT_OK);
  assert_int_equal(f1 - f0, 32 * MiB); /* 2 MiB small segment + 30 MiB large one */
  /* OOM through the allocator: status and PyTorch's message. */
  grt_devptr x;
  assert_int_equal(grt_alloc_malloc(a, 100 * MiB, 0, &x), GRT_ERR_OOM); /* above capacity, as PyTorch */
  grt_devptr hold = must_malloc(a, 40 * MiB, 0);
  assert_int_equal(grt_alloc_malloc(a, 30 * MiB, 0, &x), GRT_ERR_OOM);
  assert_non_null(strstr(grt_alloc_last_error(a), "out of memory"));
  assert_int_equal(grt_alloc_free(a, hold), GRT_OK);
  assert_int_equal(grt_alloc_free(a, 0x1234), GRT_ERR_UNKNOWN_POINTER);
  assert_consistent(a);
  assert_int_equal(grt_alloc_destroy(a), GRT_OK);
  assert_int_equal(grt_cuda_events_recorded(ev), 0);
  assert_int_equal(grt_cuda_events_destroy(ev), GRT_OK);
  assert_int_equal(grt_device_destroy(dev), GRT_OK);
}

/* A simulated device next to the CUDA one, in the same process. */
static void test_sim_alongside(void **state) {
  (void)state;
  grt_device *cuda = open_fake();
  fixture fx = make_fixture("caching", GRT_GiB, NULL);
  grt_devptr p = must_malloc(fx.a, 5 * MiB, 0);
  assert_int_equal(grt_alloc_free(fx.a, p), GRT_OK);
  assert_string_equal(grt_device_backend(fx.dev), "simulated");
  drop_fixture(&fx);
  assert_int_equal(grt_device_destroy(cuda), GRT_OK);
}

int main(void) {
  const char *lib = getenv("GRT_CUDA_LIBRARY");
  int n = 0;
  char why[256] = "";
  if (!lib || !strstr(lib, "fake")) {
    fprintf(stderr, "test_cuda_fake: skipped: GRT_CUDA_LIBRARY does not name a fake driver (CTest sets it)\n");
    return 77;
  }
  if (grt_cuda_probe(&n, why, sizeof why) != GRT_OK) { /* a broken backend is a failure, not a skip */
    fprintf(stderr, "test_cuda_fake: FAIL: the CUDA backend cannot use the fake driver %s: %s\n", lib, why);
    return 1;
  }
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_probe_and_identity),
      cmocka_unit_test(test_malloc_free_and_bad_pointers),
      cmocka_unit_test(test_missing_entry_points),
      cmocka_unit_test(test_caching_on_cuda),
      cmocka_unit_test(test_sim_alongside),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
