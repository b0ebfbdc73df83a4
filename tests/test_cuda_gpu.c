/* test_cuda_gpu.c — the CUDA backend on a real GPU: device memory, a stream,
 * a fill read back, an event, the caching allocator with real events. Exits 77
 * (skip) when no driver or GPU is present; the full semantic cases live in
 * gpurt-conformance (tools/conformance), which needs no cmocka. */
#include <stdio.h>
#include <string.h>

#include "alloc_fixture.h"
#include "gpurt/cuda.h"

static void test_gpu_smoke(void **state) {
  (void)state;
  grt_device *dev = NULL;
  assert_int_equal(grt_device_create_cuda(0, &dev), GRT_OK);
  grt_cuda_stream *s = NULL;
  assert_int_equal(grt_cuda_stream_create(dev, GRT_CUDA_STREAM_NON_BLOCKING, 0, &s), GRT_OK);
  grt_devptr p = 0;
  assert_int_equal(grt_device_malloc(dev, MiB, &p), GRT_OK);
  static unsigned char host[4096];
  assert_int_equal(grt_cuda_memset_async(s, p, 0x3c, MiB), GRT_OK);
  assert_int_equal(grt_cuda_memcpy_dtoh_async(s, host, p + MiB - sizeof host, sizeof host), GRT_OK);
  grt_cuda_event *e = NULL;
  assert_int_equal(grt_cuda_event_create(dev, 0, &e), GRT_OK);
  assert_int_equal(grt_cuda_event_query(e), GRT_OK); /* never recorded: done */
  assert_int_equal(grt_cuda_event_record(e, s), GRT_OK);
  assert_int_equal(grt_cuda_event_synchronize(e), GRT_OK);
  assert_int_equal(host[0], 0x3c);
  assert_int_equal(host[sizeof host - 1], 0x3c);
  assert_int_equal(grt_device_destroy(dev), GRT_ERR_BUSY);
  assert_int_equal(grt_device_free(dev, p), GRT_OK);
  assert_int_equal(grt_device_free(dev, p), GRT_ERR_DOUBLE_FREE);
  grt_cuda_events *ev = NULL;
  assert_int_equal(grt_cuda_events_create(dev, &ev), GRT_OK);
  grt_alloc_config cfg;
  grt_alloc_config_default(&cfg);
  cfg.stream_ops = grt_cuda_events_stream_ops(ev);
  grt_allocator *a = NULL;
  assert_int_equal(grt_alloc_create("caching", dev, &cfg, &a), GRT_OK);
  grt_devptr b = must_malloc(a, 5 * MiB, grt_cuda_stream_id(s));
  assert_int_equal(grt_alloc_record_stream(a, b, 0), GRT_OK);
  assert_int_equal(grt_alloc_free(a, b), GRT_OK);
  assert_int_equal(grt_alloc_empty_cache(a), GRT_OK); /* syncs the event, then frees */
  assert_consistent(a);
  assert_int_equal(grt_alloc_destroy(a), GRT_OK);
  assert_int_equal(grt_cuda_events_recorded(ev), 1);
  assert_int_equal(grt_cuda_events_destroy(ev), GRT_OK);
  assert_int_equal(grt_cuda_event_destroy(e), GRT_OK);
  assert_int_equal(grt_cuda_stream_destroy(s), GRT_OK);
  assert_int_equal(grt_device_destroy(dev), GRT_OK);
}

int main(void) {
  char msg[512];
  int n = 0;
  grt_status st = grt_cuda_probe(&n, msg, sizeof msg);
  if (st != GRT_OK) {
    fprintf(stderr, "test_cuda_gpu: skipped: %s (%s)\n", grt_status_name(st), msg);
    return 77;
  }
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_gpu_smoke)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
