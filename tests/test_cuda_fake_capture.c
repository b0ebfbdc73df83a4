/* test_cuda_fake_capture.c — stream capture on the CUDA backend, against the
 * fake modern driver: begin / end / status / graph destroy reach the driver,
 * its capture errors come back as the executor's statuses (docs/EXEC.md,
 * "Status codes") with the entry point named, bad arguments are refused
 * before any driver call, and a missing entry point is GRT_ERR_UNSUPPORTED.
 * The fake keeps only a few of CUDA's capture rules; which code a real
 * driver gives in each situation is gpurt-conformance's question on a GPU.
 * Skips (77) unless GRT_CUDA_LIBRARY names the modern fake. */
#include "cuda_fake_fixture.h"

static int status_of(grt_cuda_stream *s) {
  int cs = -1;
  assert_int_equal(grt_cuda_stream_capture_status(s, &cs), GRT_OK);
  return cs;
}

static void test_capture_round_trip(void **state) {
  (void)state;
  grt_device *dev = fk_open();
  grt_cuda_stream *s, *leg;
  assert_int_equal(grt_cuda_stream_create(dev, GRT_CUDA_STREAM_NON_BLOCKING, 0, &s), GRT_OK);
  assert_int_equal(grt_cuda_stream_legacy(dev, &leg), GRT_OK);
  grt_devptr p;
  assert_int_equal(grt_device_malloc(dev, 4096, &p), GRT_OK);
  assert_int_equal(status_of(s), 0);
  assert_int_equal(grt_cuda_stream_begin_capture(s, GRT_CUDA_CAPTURE_THREAD_LOCAL), GRT_OK);
  assert_int_equal(status_of(s), 1);
  assert_int_equal(grt_cuda_memset_async(s, p, 7, 4096), GRT_OK); /* captured, not run */
  assert_int_equal(fk.live("pending"), 0);
  void *g = NULL;
  assert_int_equal(grt_cuda_stream_end_capture(s, &g), GRT_OK);
  assert_non_null(g);
  assert_int_equal(status_of(s), 0);
  assert_int_equal(fk.live("graphs"), 1);
  assert_int_equal(grt_cuda_graph_destroy(dev, g), GRT_OK);
  assert_int_equal(fk.live("graphs"), 0);
  assert_int_equal(grt_cuda_graph_destroy(dev, NULL), GRT_OK);
  fk_assert_no_context();
  assert_int_equal(grt_device_free(dev, p), GRT_OK);
  assert_int_equal(grt_cuda_stream_destroy(leg), GRT_OK);
  assert_int_equal(grt_cuda_stream_destroy(s), GRT_OK);
  assert_int_equal(grt_device_destroy(dev), GRT_OK);
}

/* The driver's refusals, each as its own status and named in last_error. */
static void test_driver_errors_are_statuses(void **state) {
  (void)state;
  grt_device *dev = fk_open();
  grt_cuda_stream *s, *b, *leg;
  assert_int_equal(grt_cuda_stream_create(dev, GRT_CUDA_STREAM_NON_BLOCKING, 0, &s), GRT_OK);
  assert_int_equal(grt_cuda_stream_create(dev, GRT_CUDA_STREAM_DEFAULT, 0, &b), GRT_OK);
  assert_int_equal(grt_cuda_stream_legacy(dev, &leg), GRT_OK);
  void *g = (void *)&g;
  assert_int_equal(grt_cuda_stream_end_capture(s, &g), GRT_ERR_STATE);
  assert_null(g);
  fk_error_contains(dev, "cuStreamEndCapture: CUDA_ERROR_ILLEGAL_STATE (401: ");
  assert_int_equal(grt_cuda_stream_begin_capture(leg, GRT_CUDA_CAPTURE_GLOBAL), GRT_ERR_CAPTURE_UNSUPPORTED);
  fk_error_contains(dev, "cuStreamBeginCapture: CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED (900: ");
  assert_int_equal(grt_cuda_stream_begin_capture(s, GRT_CUDA_CAPTURE_GLOBAL), GRT_OK);
  assert_int_equal(grt_cuda_stream_begin_capture(s, GRT_CUDA_CAPTURE_GLOBAL), GRT_ERR_STATE);
  assert_int_equal(grt_cuda_stream_query(s), GRT_ERR_CAPTURE_UNSUPPORTED); /* invalidates */
  fk_error_contains(dev, "cuStreamQuery: CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED");
  assert_int_equal(status_of(s), 2);
  assert_int_equal(grt_cuda_stream_synchronize(s), GRT_ERR_CAPTURE_UNSUPPORTED);
  assert_int_equal(grt_cuda_stream_end_capture(s, &g), GRT_ERR_CAPTURE_INVALIDATED);
  fk_error_contains(dev, "cuStreamEndCapture: CUDA_ERROR_STREAM_CAPTURE_INVALIDATED (901: ");
  assert_null(g);
  /* the legacy stream asked while a blocking stream captures */
  assert_int_equal(grt_cuda_stream_begin_capture(b, GRT_CUDA_CAPTURE_RELAXED), GRT_OK);
  int cs = -7;
  assert_int_equal(grt_cuda_stream_capture_status(leg, &cs), GRT_ERR_CAPTURE_IMPLICIT);
  assert_int_equal(cs, -7); /* unwritten */
  fk_error_contains(dev, "cuStreamIsCapturing: CUDA_ERROR_STREAM_CAPTURE_IMPLICIT (906: ");
  assert_int_equal(grt_cuda_stream_end_capture(b, &g), GRT_OK);
  assert_int_equal(grt_cuda_graph_destroy(dev, g), GRT_OK);
  /* injected: codes the fake's own rules never produce */
  static const struct {
    int code;
    grt_status st;
  } injected[] = {{FK_CAPTURE_UNJOINED, GRT_ERR_CAPTURE_UNJOINED},
                  {FK_CAPTURE_UNMATCHED, GRT_ERR_CAPTURE_UNMATCHED},
                  {FK_CAPTURE_WRONG_THREAD, GRT_ERR_CAPTURE_WRONG_THREAD},
                  {FK_CAPTURE_MERGE, GRT_ERR_CAPTURE_MERGE}};
  for (size_t i = 0; i < sizeof injected / sizeof injected[0]; i++) {
    assert_int_equal(fk.arm("cuStreamEndCapture", 1, injected[i].code), 0);
    assert_int_equal(grt_cuda_stream_end_capture(s, &g), injected[i].st);
    assert_null(g);
  }
  assert_int_equal(fk.arm("cuGraphDestroy", 1, FK_INVALID_VALUE), 0);
  assert_int_equal(grt_cuda_graph_destroy(dev, (void *)&g), GRT_ERR_INVALID_ARG);
  fk_error_contains(dev, "cuGraphDestroy: CUDA_ERROR_INVALID_VALUE");
  fk_assert_no_context();
  assert_int_equal(grt_cuda_stream_destroy(leg), GRT_OK);
  assert_int_equal(grt_cuda_stream_destroy(b), GRT_OK);
  assert_int_equal(grt_cuda_stream_destroy(s), GRT_OK);
  assert_int_equal(grt_device_destroy(dev), GRT_OK);
}

/* Refused before the driver: no call is made. */
static void test_bad_arguments(void **state) {
  (void)state;
  grt_device *dev = fk_open();
  grt_cuda_stream *s;
  assert_int_equal(grt_cuda_stream_create(dev, GRT_CUDA_STREAM_NON_BLOCKING, 0, &s), GRT_OK);
  unsigned long begins = fk.calls("cuStreamBeginCapture"), ends = fk.calls("cuStreamEndCapture");
  void *g;
  int cs;
  assert_int_equal(grt_cuda_stream_begin_capture(NULL, 0), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt_cuda_stream_begin_capture(s, 3), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt_cuda_stream_end_capture(NULL, &g), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt_cuda_stream_end_capture(s, NULL), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt_cuda_stream_capture_status(NULL, &cs), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt_cuda_stream_capture_status(s, NULL), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt_cuda_graph_destroy(NULL, (void *)&g), GRT_ERR_INVALID_ARG);
  assert_int_equal(fk.calls("cuStreamBeginCapture"), begins);
  assert_int_equal(fk.calls("cuStreamEndCapture"), ends);
  assert_int_equal(status_of(s), 0);
  assert_int_equal(grt_cuda_stream_destroy(s), GRT_OK);
  assert_int_equal(grt_device_destroy(dev), GRT_OK);
}

int main(void) {
  int ready = fk_ready("test_cuda_fake_capture", "modern");
  if (ready != 1) return fk_not_ready(ready);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_capture_round_trip),
      cmocka_unit_test(test_driver_errors_are_statuses),
      cmocka_unit_test(test_bad_arguments),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
