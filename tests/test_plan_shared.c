/* test_plan_shared.c — the planner on google/minimalloc's six
 * "challenging" traces in $GRT_SHARED_DIR/traces/minimalloc (skips when
 * absent): every plan valid by the library's checker and by a pairwise
 * check here, the peak the file's own, and the geometric mean of heap /
 * peak live within GMEAN_MAX at the effort used here. The figure each
 * trace reaches is printed (docs/PLAN.md has the table). */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "gpurt/plan.h"
#include "trace_test_util.h"

/* What this planner reaches at EFFORT (docs/PLAN.md), with a margin of 0.02. */
#define EFFORT 2000
#define GMEAN_MAX 1.12

static const char *const names[] = {"A", "B", "C", "D", "E", "F"};
/* the files' peak live bytes (a sweep over id,lower,upper,size) */
static const uint64_t peaks[] = {1048576, 1048576, 1039360, 986112, 1048576, 1048576};

static bool pairwise_valid(const grt_plan_buffer *b, size_t n, const uint64_t *off) {
  for (size_t i = 0; i < n; i++)
    for (size_t j = i + 1; j < n; j++)
      if (b[i].lower < b[j].upper && b[j].lower < b[i].upper && off[i] < off[j] + b[j].size &&
          off[j] < off[i] + b[i].size)
        return false;
  return true;
}

static double plan_one(const char *name, uint64_t want_peak) {
  char rel[64], err[256];
  snprintf(rel, sizeof rel, "traces/minimalloc/%s.1048576.csv", name);
  const char *path = tt_shared(rel);
  assert_non_null(path);
  grt_trace_error e;
  grt_status st;
  grt_trace *t = tt_load(path, GRT_TRACE_FORMAT_MINIMALLOC, &e, &st);
  if (st) fail_msg("%s: %s", name, e.reason);
  grt_plan_buffer *b = NULL;
  size_t n = 0;
  assert_int_equal(grt_plan_buffers_from_trace(t, &b, &n, err, sizeof err), GRT_OK);
  assert_int_equal(grt_trace_destroy(t), GRT_OK);
  uint64_t *off = malloc(n * sizeof *off), heap = 0;
  assert_non_null(off);
  grt_plan_config cfg;
  grt_plan_config_default(&cfg);
  cfg.effort = EFFORT;
  grt_plan_result r;
  assert_int_equal(grt_plan_solve(b, n, &cfg, off, &r, err, sizeof err), GRT_OK);
  assert_int_equal(r.peak_live, want_peak);
  assert_int_equal(grt_plan_check(b, n, off, &heap, err, sizeof err), GRT_OK);
  assert_int_equal(heap, r.heap);
  assert_true(pairwise_valid(b, n, off));
  double ratio = (double)r.heap / (double)r.peak_live;
  printf("  %s: %zu buffers, heap / peak live %.4f\n", name, n, ratio);
  free(off);
  grt_plan_buffers_free(b);
  return ratio;
}

static void test_six_traces(void **state) {
  (void)state;
  double logsum = 0;
  for (size_t i = 0; i < 6; i++) logsum += log(plan_one(names[i], peaks[i]));
  double gmean = exp(logsum / 6);
  printf("  geometric mean %.4f (at most %.2f)\n", gmean, GMEAN_MAX);
  assert_true(gmean <= GMEAN_MAX);
}

int main(void) {
  if (!tt_shared("traces/minimalloc/A.1048576.csv")) {
    fprintf(stderr,
            "test_plan_shared: skipped: $GRT_SHARED_DIR/traces/minimalloc not found "
            "(set GRT_SHARED_DIR to ../shared)\n");
    return 77;
  }
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_six_traces)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
