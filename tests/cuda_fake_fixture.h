/* cuda_fake_fixture.h — shared helpers for the tests that run the CUDA backend
 * against the fake driver (tests/fake_cuda): the fake's knobs, the CUresult
 * values the tests arm as faults, opening a device, checking last_error and
 * that every call left the caller's context as it found it. */
#ifndef GRT_TESTS_CUDA_FAKE_FIXTURE_H
#define GRT_TESTS_CUDA_FAKE_FIXTURE_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc_fixture.h"
#include "fake_cuda/fake_cuda_control.h"
#include "gpurt/cuda.h"

/* CUresult values (the driver ABI; checked against cuda.h where the build has it). */
enum {
  FK_INVALID_VALUE = 1,
  FK_OUT_OF_MEMORY = 2,
  FK_NOT_INITIALIZED = 3,
  FK_STUB_LIBRARY = 34,
  FK_NO_DEVICE = 100,
  FK_INVALID_DEVICE = 101,
  FK_INVALID_CONTEXT = 201,
  FK_INVALID_HANDLE = 400,
  FK_ILLEGAL_STATE = 401,
  FK_NOT_FOUND = 500,
  FK_NOT_READY = 600,
  FK_ILLEGAL_ADDRESS = 700,
  FK_LAUNCH_FAILED = 719,
  FK_NOT_PERMITTED = 800,
  FK_NOT_SUPPORTED = 801,
  FK_SYSTEM_DRIVER_MISMATCH = 803,
  FK_CAPTURE_UNSUPPORTED = 900, /* the stream-capture family, 900-908 */
  FK_CAPTURE_INVALIDATED = 901,
  FK_CAPTURE_MERGE = 902,
  FK_CAPTURE_UNMATCHED = 903,
  FK_CAPTURE_UNJOINED = 904,
  FK_CAPTURE_ISOLATION = 905,
  FK_CAPTURE_IMPLICIT = 906,
  FK_CAPTURED_EVENT = 907,
  FK_CAPTURE_WRONG_THREAD = 908,
  FK_GRAPH_EXEC_UPDATE_FAILURE = 910,
  FK_UNKNOWN = 999,
  FK_CODE_WITHOUT_NAME = 12345, /* no CUresult: the driver has no name for it */
};
/* The stream flag gpurt must pass for GRT_CUDA_STREAM_NON_BLOCKING (cuda.h). */
enum { FK_STREAM_NON_BLOCKING = 1 };

#ifdef GRT_TEST_CUDA_H
#include <cuda.h>
#define FK_SAME(a, b) ((int)(a) == (int)(b))
_Static_assert(FK_SAME(FK_INVALID_VALUE, CUDA_ERROR_INVALID_VALUE) && FK_SAME(FK_OUT_OF_MEMORY, CUDA_ERROR_OUT_OF_MEMORY) &&
                   FK_SAME(FK_NOT_INITIALIZED, CUDA_ERROR_NOT_INITIALIZED) &&
                   FK_SAME(FK_STUB_LIBRARY, CUDA_ERROR_STUB_LIBRARY) && FK_SAME(FK_NO_DEVICE, CUDA_ERROR_NO_DEVICE) &&
                   FK_SAME(FK_INVALID_DEVICE, CUDA_ERROR_INVALID_DEVICE) &&
                   FK_SAME(FK_INVALID_CONTEXT, CUDA_ERROR_INVALID_CONTEXT) &&
                   FK_SAME(FK_INVALID_HANDLE, CUDA_ERROR_INVALID_HANDLE) && FK_SAME(FK_NOT_FOUND, CUDA_ERROR_NOT_FOUND) &&
                   FK_SAME(FK_NOT_READY, CUDA_ERROR_NOT_READY) && FK_SAME(FK_ILLEGAL_ADDRESS, CUDA_ERROR_ILLEGAL_ADDRESS) &&
                   FK_SAME(FK_LAUNCH_FAILED, CUDA_ERROR_LAUNCH_FAILED) &&
                   FK_SAME(FK_NOT_SUPPORTED, CUDA_ERROR_NOT_SUPPORTED) &&
                   FK_SAME(FK_SYSTEM_DRIVER_MISMATCH, CUDA_ERROR_SYSTEM_DRIVER_MISMATCH) &&
                   FK_SAME(FK_ILLEGAL_STATE, CUDA_ERROR_ILLEGAL_STATE) &&
                   FK_SAME(FK_NOT_PERMITTED, CUDA_ERROR_NOT_PERMITTED) &&
                   FK_SAME(FK_CAPTURE_UNSUPPORTED, CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED) &&
                   FK_SAME(FK_CAPTURE_INVALIDATED, CUDA_ERROR_STREAM_CAPTURE_INVALIDATED) &&
                   FK_SAME(FK_CAPTURE_MERGE, CUDA_ERROR_STREAM_CAPTURE_MERGE) &&
                   FK_SAME(FK_CAPTURE_UNMATCHED, CUDA_ERROR_STREAM_CAPTURE_UNMATCHED) &&
                   FK_SAME(FK_CAPTURE_UNJOINED, CUDA_ERROR_STREAM_CAPTURE_UNJOINED) &&
                   FK_SAME(FK_CAPTURE_ISOLATION, CUDA_ERROR_STREAM_CAPTURE_ISOLATION) &&
                   FK_SAME(FK_CAPTURE_IMPLICIT, CUDA_ERROR_STREAM_CAPTURE_IMPLICIT) &&
                   FK_SAME(FK_CAPTURED_EVENT, CUDA_ERROR_CAPTURED_EVENT) &&
                   FK_SAME(FK_CAPTURE_WRONG_THREAD, CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD) &&
                   FK_SAME(FK_GRAPH_EXEC_UPDATE_FAILURE, CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE) &&
                   FK_SAME(FK_UNKNOWN, CUDA_ERROR_UNKNOWN),
               "CUresult values");
_Static_assert(FK_SAME(FK_STREAM_NON_BLOCKING, CU_STREAM_NON_BLOCKING), "flag values");
#endif

static fake_control fk;

/* For main(): 1 when GRT_CUDA_LIBRARY names a fake whose path contains `kind`
 * and the backend loads it (fk is then ready). 0 (the test exits 77, a skip)
 * only when no fake is named: a test run by hand. A fake named that the
 * backend cannot load is a broken backend: the test fails (-1: exit 1). */
static inline int fk_ready(const char *test, const char *kind) {
  const char *lib = getenv("GRT_CUDA_LIBRARY");
  if (!lib || !strstr(lib, kind)) {
    fprintf(stderr, "%s: skipped: GRT_CUDA_LIBRARY does not name the %s fake driver (CTest sets it)\n", test, kind);
    return 0;
  }
  int n = 0;
  char why[256] = "";
  grt_status st = grt_cuda_probe(&n, why, sizeof why);
  if (st != GRT_OK || fake_control_open(&fk) != 0) {
    fprintf(stderr, "%s: FAIL: the CUDA backend cannot use the fake driver %s: %s\n", test, lib,
            st ? why : "its control interface is missing");
    return -1;
  }
  return 1;
}

/* main()'s exit when fk_ready refused: 77 (skip) or 1 (fail). */
static inline int fk_not_ready(int ready) { return ready == 0 ? 77 : 1; }

static inline grt_device *fk_open(void) {
  grt_device *dev = NULL;
  assert_int_equal(grt_device_create_cuda(0, &dev), GRT_OK);
  assert_non_null(dev);
  return dev;
}

static inline void fk_error_contains(grt_device *dev, const char *text) {
  char buf[256];
  assert_int_equal(grt_device_last_error(dev, buf, sizeof buf), GRT_OK);
  if (!strstr(buf, text)) fprintf(stderr, "last error \"%s\" lacks \"%s\"\n", buf, text);
  assert_non_null(strstr(buf, text));
}

/* gpurt restores the caller's context: with none current before, none after. */
static inline void fk_assert_no_context(void) {
  int (*get_current)(void **) = NULL;
  *(void **)&get_current = fk.proc("cuCtxGetCurrent");
  assert_non_null(get_current);
  void *ctx = (void *)1;
  assert_int_equal(get_current(&ctx), 0);
  assert_null(ctx);
}

/* The fake's objects as a test saw them, to check that a failure leaked none. */
typedef struct fk_census {
  long allocs, bytes, contexts, streams, events, host, reservations, handles, mappings;
} fk_census;

static inline fk_census fk_count(void) {
  fk_census c = {fk.live("allocs"),  fk.live("bytes"),        fk.live("contexts"),
                 fk.live("streams"), fk.live("events"),       fk.live("host"),
                 fk.live("reservations"), fk.live("handles"), fk.live("mappings")};
  return c;
}

static inline void fk_assert_census(fk_census want) {
  fk_census got = fk_count();
  assert_int_equal(got.allocs, want.allocs);
  assert_int_equal(got.bytes, want.bytes);
  assert_int_equal(got.contexts, want.contexts);
  assert_int_equal(got.streams, want.streams);
  assert_int_equal(got.events, want.events);
  assert_int_equal(got.host, want.host);
  assert_int_equal(got.reservations, want.reservations);
  assert_int_equal(got.handles, want.handles);
  assert_int_equal(got.mappings, want.mappings);
}

/* Arms a fault in the fake: the nth call to `entry` from now returns `result`. */
static inline void fk_arm(const char *entry, int nth, int result) { assert_int_equal(fk.arm(entry, nth, result), 0); }

/* Holds a stream back with a gate (the test's way to make work pending). */
static inline grt_cuda_gate *fk_hold(grt_device *dev, grt_cuda_stream *s) {
  grt_cuda_gate *g = NULL;
  assert_int_equal(grt_cuda_gate_create(dev, 20000, &g), GRT_OK);
  assert_int_equal(grt_cuda_gate_block(g, s), GRT_OK);
  return g;
}

#endif
