/* test_base_cuda_errors.c — grt_status_to_cuda / grt_status_from_cuda: every
 * CUDA error the model produces has a status of its own, with CUDA's exact
 * code and name, and the mapping reads back; codes without a status read as
 * GRT_ERR_DRIVER, statuses without a code are GRT_ERR_NOT_FOUND. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "gpurt/base.h"

/* CUDA's codes as driver_types.h spells them (cudaError_t; CUresult agrees). */
static const struct {
  grt_status st;
  int code;
  const char *name;
} counterparts[] = {
    {GRT_OK, 0, "cudaSuccess"},
    {GRT_ERR_INVALID_ARG, 1, "cudaErrorInvalidValue"},
    {GRT_ERR_OOM, 2, "cudaErrorMemoryAllocation"},
    {GRT_ERR_NO_DEVICE, 100, "cudaErrorNoDevice"},
    {GRT_ERR_INVALID_HANDLE, 400, "cudaErrorInvalidResourceHandle"},
    {GRT_ERR_STATE, 401, "cudaErrorIllegalState"},
    {GRT_ERR_NOT_READY, 600, "cudaErrorNotReady"},
    {GRT_ERR_NOT_PERMITTED, 800, "cudaErrorNotPermitted"},
    {GRT_ERR_UNSUPPORTED, 801, "cudaErrorNotSupported"},
    {GRT_ERR_CAPTURE_UNSUPPORTED, 900, "cudaErrorStreamCaptureUnsupported"},
    {GRT_ERR_CAPTURE_INVALIDATED, 901, "cudaErrorStreamCaptureInvalidated"},
    {GRT_ERR_CAPTURE_MERGE, 902, "cudaErrorStreamCaptureMerge"},
    {GRT_ERR_CAPTURE_UNMATCHED, 903, "cudaErrorStreamCaptureUnmatched"},
    {GRT_ERR_CAPTURE_UNJOINED, 904, "cudaErrorStreamCaptureUnjoined"},
    {GRT_ERR_CAPTURE_ISOLATION, 905, "cudaErrorStreamCaptureIsolation"},
    {GRT_ERR_CAPTURE_IMPLICIT, 906, "cudaErrorStreamCaptureImplicit"},
    {GRT_ERR_CAPTURED_EVENT, 907, "cudaErrorCapturedEvent"},
    {GRT_ERR_CAPTURE_WRONG_THREAD, 908, "cudaErrorStreamCaptureWrongThread"},
    {GRT_ERR_GRAPH_EXEC_UPDATE, 910, "cudaErrorGraphExecUpdateFailure"},
};
#define N_COUNTERPARTS (sizeof counterparts / sizeof counterparts[0])

static void test_each_counterpart_both_ways(void **state) {
  (void)state;
  for (size_t i = 0; i < N_COUNTERPARTS; i++) {
    int code = -1;
    const char *name = NULL;
    assert_int_equal(grt_status_to_cuda(counterparts[i].st, &code, &name), GRT_OK);
    assert_int_equal(code, counterparts[i].code);
    assert_string_equal(name, counterparts[i].name);
    assert_int_equal(grt_status_from_cuda(counterparts[i].code), counterparts[i].st);
    assert_int_equal(grt_status_to_cuda(counterparts[i].st, NULL, NULL), GRT_OK); /* outputs optional */
  }
}

/* No two statuses claim one code, and every status either has a counterpart
 * in the list above or none at all (nothing mapped behind the test's back). */
static void test_one_status_per_code(void **state) {
  (void)state;
  for (int a = GRT_OK; a <= GRT_ERR_GRAPH_EXEC_UPDATE; a++) {
    int code = -7;
    const char *name = "untouched";
    grt_status st = grt_status_to_cuda((grt_status)a, &code, &name);
    bool listed = false;
    for (size_t i = 0; i < N_COUNTERPARTS; i++) listed |= counterparts[i].st == (grt_status)a;
    if (!listed) {
      assert_int_equal(st, GRT_ERR_NOT_FOUND);
      assert_int_equal(code, -7); /* nothing written */
      assert_string_equal(name, "untouched");
      continue;
    }
    assert_int_equal(st, GRT_OK);
    for (int b = GRT_OK; b < a; b++) {
      int other;
      if (grt_status_to_cuda((grt_status)b, &other, NULL) == GRT_OK) assert_int_not_equal(other, code);
    }
  }
}

/* Codes read as a status they are not the counterpart of, and codes with no
 * status at all. */
static void test_codes_without_a_status_of_their_own(void **state) {
  (void)state;
  assert_int_equal(grt_status_from_cuda(34), GRT_ERR_NO_DEVICE);    /* stub library */
  assert_int_equal(grt_status_from_cuda(803), GRT_ERR_NO_DEVICE);   /* system driver mismatch */
  assert_int_equal(grt_status_from_cuda(101), GRT_ERR_INVALID_ARG); /* invalid device ordinal */
  static const int unmapped[] = {3, 201, 500, 700, 719, 909, 999, -1, 12345, INT32_MAX, INT32_MIN};
  for (size_t i = 0; i < sizeof unmapped / sizeof unmapped[0]; i++)
    assert_int_equal(grt_status_from_cuda(unmapped[i]), GRT_ERR_DRIVER);
  /* what a status without a counterpart answers */
  assert_int_equal(grt_status_to_cuda(GRT_ERR_PARSE, NULL, NULL), GRT_ERR_NOT_FOUND);
  assert_int_equal(grt_status_to_cuda(GRT_ERR_RACE, NULL, NULL), GRT_ERR_NOT_FOUND);
  assert_int_equal(grt_status_to_cuda(GRT_ERR_DRIVER, NULL, NULL), GRT_ERR_NOT_FOUND);
  assert_int_equal(grt_status_to_cuda((grt_status)999, NULL, NULL), GRT_ERR_NOT_FOUND);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_each_counterpart_both_ways),
      cmocka_unit_test(test_one_status_per_code),
      cmocka_unit_test(test_codes_without_a_status_of_their_own),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
