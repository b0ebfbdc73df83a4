/* test_replay_gpu_snapshots.c — fidelity on the two snapshots recorded on an
 * NVIDIA H200 by tools/gpu-check.sh and tools/gpu-extra.sh (PyTorch 2.11's own
 * allocator, default and expandable_segments:True, training a transformer):
 * every allocation must land at exactly the recorded address. The files are
 * the project's own recordings (tests/data/gpu/), so this test never skips. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <cmocka.h>

#include "gpurt/replay.h"

static void check(const char *file, int expect_expandable) {
  char path[512];
  snprintf(path, sizeof path, "%s/gpu/%s", GRT_TEST_DATA_DIR, file);
  grt_trace *t = NULL;
  grt_trace_error err;
  grt_status st = grt_trace_load(path, NULL, &t, &err);
  if (st) fail_msg("%s: %s", file, err.reason);
  grt_fidelity_report rep;
  char why[512];
  st = grt_replay_fidelity(t, &rep, why, sizeof why);
  if (st) fail_msg("%s: %s", file, why);
  if (rep.exact != rep.allocs)
    fail_msg("%s: exact-address match %llu/%llu; first divergence: %s", file, (unsigned long long)rep.exact,
             (unsigned long long)rep.allocs, rep.n_shown ? rep.shown[0].context : "-");
  assert_true(rep.allocs > 4000);
  assert_int_equal(rep.expandable, expect_expandable);
  assert_int_equal(rep.final_matching, rep.final_recorded);
  assert_true(rep.structure_ok);
  assert_int_equal(grt_trace_destroy(t), GRT_OK);
}

static void test_default_snapshot(void **state) {
  (void)state;
  check("gpurt_transformer_snapshot.pickle", 0);
}

static void test_expandable_snapshot(void **state) {
  (void)state;
  check("gpurt_transformer_expandable_snapshot.pickle", 1);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_default_snapshot),
      cmocka_unit_test(test_expandable_snapshot),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
