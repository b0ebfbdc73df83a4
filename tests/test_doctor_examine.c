/* test_doctor_examine.c — the doctor's verdicts on traces built to be
 * demand-bound, fragmentation-bound and healthy, with the numbers at the
 * OOM and the segments live blocks pin. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "gpurt/doctor.h"
#include "replay_test_util.h"

static grt_doctor_report examine(const char *text) {
  grt_trace *t = load(text);
  grt_doctor_report rep;
  char err[256];
  grt_status st = grt_doctor_examine(t, &rep, err, sizeof err);
  if (st) fail_msg("examine: %s (%s)", err, grt_status_name(st));
  assert_int_equal(grt_trace_destroy(t), GRT_OK);
  return rep;
}

/* 18 MiB live in a 20 MiB segment, then 20 MiB asked with 1 MiB free: no layout could serve it. */
static void test_demand_bound(void **state) {
  (void)state;
  grt_doctor_report rep = examine("gpurt-trace 1\n"
                                  "segment_alloc - 20971520 0 - 0x10000000\n"
                                  "alloc 0 9437184 0 - 0x10000000\n"
                                  "alloc 1 9437184 0 - 0x10900000\n"
                                  "oom - 20971520 0 - 1048576\n"
                                  "%segment 0x10000000 20971520 0 large 0\n"
                                  "%block 0x10000000 9437184 9437184 active_allocated\n"
                                  "%block 0x10900000 9437184 9437184 active_allocated\n"
                                  "%block 0x11200000 2097152 0 inactive\n");
  assert_int_equal(rep.verdict, GRT_DOCTOR_DEMAND_BOUND);
  assert_true(rep.oom.valid);
  assert_int_equal(rep.oom.event, 3);
  assert_int_equal(rep.oom.request, 20 * GRT_MiB);
  assert_int_equal(rep.oom.device_free, GRT_MiB);
  assert_int_equal(rep.oom.reserved, 20 * GRT_MiB);
  assert_int_equal(rep.oom.allocated, 18 * GRT_MiB);
  assert_int_equal(rep.process_memory, 21 * GRT_MiB);
  assert_string_equal(rep.why, "at the first OOM 18.00 MiB allocated + the 20.00 MiB request exceed the 21.00 MiB "
                               "the process had (20.00 MiB reserved + 1.00 MiB free)");
}

/* Two 20 MiB segments, each with one 9 MiB block live among 11 MiB free;
 * 12 MiB asked with 2 MiB free: the memory was there, in pieces. */
static void test_fragmentation_bound(void **state) {
  (void)state;
  grt_doctor_report rep = examine("gpurt-trace 1\n"
                                  "segment_alloc - 20971520 0 - 0x10000000\n"
                                  "alloc 0 9437184 0 - 0x10000000\n"
                                  "alloc 1 9437184 0 - 0x10900000\n"
                                  "segment_alloc - 20971520 0 - 0x11400000\n"
                                  "alloc 2 9437184 0 - 0x11400000\n"
                                  "alloc 3 9437184 0 - 0x11d00000\n"
                                  "free 0 9437184 0 - 0x10000000\n"
                                  "free 2 9437184 0 - 0x11400000\n"
                                  "oom - 12582912 0 - 2097152\n"
                                  "%segment 0x10000000 20971520 0 large 0\n"
                                  "%block 0x10000000 9437184 0 inactive\n"
                                  "%block 0x10900000 9437184 9437184 active_allocated\n"
                                  "%block 0x11200000 2097152 0 inactive\n"
                                  "%segment 0x11400000 20971520 0 large 0\n"
                                  "%block 0x11400000 9437184 0 inactive\n"
                                  "%block 0x11d00000 9437184 9437184 active_allocated\n"
                                  "%block 0x12600000 2097152 0 inactive\n");
  assert_int_equal(rep.verdict, GRT_DOCTOR_FRAGMENTATION_BOUND);
  assert_int_equal(rep.oom.reserved, 40 * GRT_MiB);
  assert_int_equal(rep.oom.allocated, 18 * GRT_MiB);
  assert_int_equal(rep.oom.external_fragmentation, 22 * GRT_MiB);
  assert_int_equal(rep.oom.releasable, 0); /* both segments pinned */
  assert_int_equal(rep.oom.largest_free, 9 * GRT_MiB);
  assert_int_equal(rep.n_pinned, 2);
  for (size_t i = 0; i < 2; i++) {
    assert_int_equal(rep.pinned[i].size, 20 * GRT_MiB);
    assert_int_equal(rep.pinned[i].free_bytes, 11 * GRT_MiB);
    assert_int_equal(rep.pinned[i].live_blocks, 1);
    assert_int_equal(rep.pinned[i].live_bytes, 9 * GRT_MiB);
  }
  /* equal free bytes: either order; each names the alloc that pins it */
  uint64_t a = rep.pinned[0].address, e = rep.pinned[0].first_live_event;
  assert_true((a == 0x10000000 && e == 2) || (a == 0x11400000 && e == 5));
  assert_non_null(strstr(rep.why, "fit in the 42.00 MiB the process had"));
  /* no frames in this trace: one site, stack 0, the two live blocks */
  assert_int_equal(rep.n_oom_sites, 1);
  assert_int_equal(rep.oom_sites[0].stack, 0);
  assert_int_equal(rep.oom_sites[0].bytes, 18 * GRT_MiB);
  assert_int_equal(rep.oom_sites[0].count, 2);
  assert_int_equal(rep.oom.traced, 18 * GRT_MiB);
}

/* No OOM: healthy, with the peak's figures. */
static void test_healthy(void **state) {
  (void)state;
  grt_doctor_report rep = examine("gpurt-trace 1\n"
                                  "segment_alloc - 2097152 0 - 0x10000000\n"
                                  "alloc 0 1000 0 - 0x10000000\n"
                                  "alloc 1 1000 0 - 0x10000400\n"
                                  "free 0 1000 0 - 0x10000000\n"
                                  "%segment 0x10000000 2097152 0 small 0\n"
                                  "%block 0x10000000 1024 0 inactive\n"
                                  "%block 0x10000400 1024 1000 active_allocated\n"
                                  "%block 0x10000800 2095104 0 inactive\n");
  assert_int_equal(rep.verdict, GRT_DOCTOR_HEALTHY);
  assert_false(rep.oom.valid);
  assert_true(rep.peak.valid);
  assert_int_equal(rep.peak.reserved, 2 * GRT_MiB);
  assert_int_equal(rep.process_memory, 0);
  assert_int_equal(rep.n_pinned, 1); /* the live block pins the small segment */
  assert_int_equal(rep.pinned[0].address, 0x10000000);
}

/* Sites: a block live since before recording began, named by the final
 * snapshot's frames, and one the trace allocates under another stack. */
static void test_sites(void **state) {
  (void)state;
  grt_trace *t = load("gpurt-trace 1\n"
                      "%frame 1 12 \"load_weights\" \"serve.py\"\n"
                      "%frame 2 40 \"step\" \"train.py\"\n"
                      "%stack 1 1\n"
                      "%stack 2 2\n"
                      "alloc 0 1000 0 - 0x10000400 @2\n"
                      "%segment 0x10000000 2097152 0 small 0\n"
                      "%block 0x10000000 1024 1000 active_allocated @1\n"
                      "%block 0x10000400 1024 1000 active_allocated @2\n"
                      "%block 0x10000800 2095104 0 inactive\n");
  grt_doctor_report rep;
  char err[256];
  assert_int_equal(grt_doctor_examine(t, &rep, err, sizeof err), GRT_OK);
  assert_int_equal(rep.n_peak_sites, 2);
  assert_int_equal(rep.peak.traced, 2000);
  const grt_trace_frame *f;
  size_t n;
  for (size_t i = 0; i < 2; i++) {
    assert_int_equal(rep.peak_sites[i].bytes, 1000);
    assert_int_equal(rep.peak_sites[i].count, 1);
    assert_int_equal(grt_trace_stack(t, rep.peak_sites[i].stack, &f, &n), GRT_OK);
    assert_int_equal(n, 1);
    assert_string_equal(f[0].name, i == 0 ? "load_weights" : "step"); /* equal bytes: by stack id */
  }
  assert_int_equal(grt_trace_destroy(t), GRT_OK);
}

static void test_errors(void **state) {
  (void)state;
  grt_doctor_report rep;
  assert_int_equal(grt_doctor_examine(NULL, &rep, NULL, 0), GRT_ERR_INVALID_ARG);
  grt_trace *t = load("gpurt-trace 1\nalloc 0 100\n");
  assert_int_equal(grt_doctor_examine(t, NULL, NULL, 0), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt_trace_destroy(t), GRT_OK);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_demand_bound),
      cmocka_unit_test(test_fragmentation_bound),
      cmocka_unit_test(test_healthy),
      cmocka_unit_test(test_sites),
      cmocka_unit_test(test_errors),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
