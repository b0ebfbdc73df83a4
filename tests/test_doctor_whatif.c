/* test_doctor_whatif.c — the what-if sweep: the settings fitted to a trace,
 * each replayed (in parallel threads, with the same figures as one thread),
 * a recorded OOM tried again under each setting, the capacity search, a
 * setting that does not parse, and what was live at the start counted; and
 * a prediction checked against a GPU: the project's own H200 recordings of
 * one training run with and without expandable segments (tests/data/gpu). */
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

/* Six 9 MiB tensors in three 20 MiB segments, every other one freed, then a
 * 12 MiB request that fits in none of the holes; a block live before
 * recording began is freed at the end. */
static const char *trace_text = "gpurt-trace 1\n"
                                "alloc 0 9437184 0 - 0x10000000\n"
                                "alloc 1 9437184 0 - 0x10900000\n"
                                "alloc 2 9437184 0 - 0x11400000\n"
                                "alloc 3 9437184 0 - 0x11d00000\n"
                                "alloc 4 9437184 0 - 0x12800000\n"
                                "alloc 5 9437184 0 - 0x13100000\n"
                                "free 0 9437184 0 - 0x10000000\n"
                                "free 2 9437184 0 - 0x11400000\n"
                                "free 4 9437184 0 - 0x12800000\n"
                                "oom - 12582912 0 - 0\n"
                                "free 9 1048576 0 - 0x20000000\n"; /* live at the start */

static grt_whatif_row *row_of(grt_whatif_row *rows, size_t n, const char *conf) {
  for (size_t i = 0; i < n; i++)
    if (!strcmp(rows[i].conf, conf)) return &rows[i];
  fail_msg("no row '%s'", conf);
  return NULL;
}

static void test_sweep_rows(void **state) {
  (void)state;
  grt_trace *t = load(trace_text);
  grt_whatif_row *rows;
  size_t n;
  assert_int_equal(grt_whatif_sweep(t, &rows, &n), GRT_OK);
  assert_string_equal(rows[0].conf, ""); /* as recorded first */
  row_of(rows, n, "expandable_segments:True");
  row_of(rows, n, "roundup_power2_divisions:4");
  for (size_t i = 0; i < n; i++) /* the largest request is 12 MiB: no max_split_size_mb fits under it */
    assert_null(strstr(rows[i].conf, "max_split_size_mb"));
  grt_whatif_free(rows);
  assert_int_equal(grt_whatif_sweep(NULL, &rows, &n), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt_trace_destroy(t), GRT_OK);
}

static void run(const grt_trace *t, uint64_t capacity, unsigned threads, bool search, grt_whatif_row **rows,
                size_t *n) {
  assert_int_equal(grt_whatif_sweep(t, rows, n), GRT_OK);
  grt_whatif_options o;
  grt_whatif_options_default(&o);
  assert_int_equal(o.device_model, GRT_DEVICE_MODEL_PAGED);
  o.capacity = capacity;
  o.threads = threads;
  o.search = search;
  assert_int_equal(grt_whatif_run(t, &o, *rows, *n), GRT_OK);
}

static void test_figures(void **state) {
  (void)state;
  grt_trace *t = load(trace_text);
  grt_whatif_row *one, *two;
  size_t n1, n2;
  run(t, 62 * GRT_MiB, 1, false, &one, &n1);
  run(t, 62 * GRT_MiB, 2, false, &two, &n2);
  assert_int_equal(n1, n2);
  assert_memory_equal(one, two, n1 * sizeof *one); /* threads change nothing */
  grt_whatif_row *r = row_of(one, n1, "");
  assert_int_equal(r->status, GRT_OK);
  assert_int_equal(r->recorded_ooms, 1);
  assert_int_equal(r->recorded_ooms_avoided, 0); /* 60 MiB of segments and a 2 MiB page: no room for 12 MiB */
  assert_int_equal(r->ooms, 1);
  /* the start's 1 MiB block lives in a 2 MiB small segment: 62 MiB reserved at the peak */
  assert_int_equal(r->peak_reserved, 62 * GRT_MiB);
  grt_whatif_free(one);
  grt_whatif_free(two);

  run(t, 0, 0, true, &one, &n1); /* unbounded: the OOM is avoided, and the search finds the smallest device */
  r = row_of(one, n1, "");
  assert_int_equal(r->ooms, 0);
  assert_int_equal(r->recorded_ooms_avoided, 1);
  assert_true(r->min_capacity >= 62 * GRT_MiB);
  assert_int_equal(r->min_capacity % (2 * GRT_MiB), 0); /* paged: whole pages */
  grt_whatif_free(one);
  assert_int_equal(grt_trace_destroy(t), GRT_OK);
}

static void test_bad_setting(void **state) {
  (void)state;
  grt_trace *t = load(trace_text);
  grt_whatif_row rows[2];
  memset(rows, 0, sizeof rows);
  snprintf(rows[0].conf, sizeof rows[0].conf, "max_split_size_mb:abc");
  snprintf(rows[1].conf, sizeof rows[1].conf, "expandable_segments:True");
  grt_whatif_options o;
  grt_whatif_options_default(&o);
  assert_int_equal(grt_whatif_run(t, &o, rows, 2), GRT_OK);
  assert_int_equal(rows[0].status, GRT_ERR_PARSE);
  assert_string_equal(rows[0].note, "the settings do not parse");
  assert_int_equal(rows[1].status, GRT_OK);
  assert_int_equal(grt_whatif_run(NULL, &o, rows, 2), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt_whatif_run(t, NULL, rows, 2), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt_whatif_run(t, &o, NULL, 0), GRT_OK);
  assert_int_equal(grt_trace_destroy(t), GRT_OK);
}

/* A row's figures over time: reduced to the points asked for, each bucket's
 * largest, and the same summary as its row. */
static void test_series(void **state) {
  (void)state;
  grt_trace *t = load(trace_text);
  grt_whatif_options o;
  grt_whatif_options_default(&o);
  o.capacity = 62 * GRT_MiB;
  grt_whatif_row row = {.conf = ""};
  assert_int_equal(grt_whatif_run(t, &o, &row, 1), GRT_OK);
  grt_replay_sample *s;
  size_t n;
  grt_replay_summary sum;
  assert_int_equal(grt_whatif_series(t, &o, "", 4, &s, &n, &sum), GRT_OK);
  assert_int_equal(n, 4); /* 11 events in 4 buckets */
  assert_int_equal(sum.peak_reserved, row.peak_reserved);
  uint64_t top = 0;
  for (size_t i = 0; i < n; i++) top = s[i].reserved > top ? s[i].reserved : top;
  assert_int_equal(top, row.peak_reserved); /* the peak survives the reduction */
  free(s);
  assert_int_equal(grt_whatif_series(t, &o, "", 1000, &s, &n, &sum), GRT_OK);
  assert_int_equal(n, 11); /* fewer events than points: one each */
  free(s);
  assert_int_equal(grt_whatif_series(t, &o, "bogus:1", 4, &s, &n, &sum), GRT_ERR_PARSE);
  assert_null(s);
  assert_int_equal(n, 0);
  assert_int_equal(grt_whatif_series(t, &o, "", 0, &s, &n, &sum), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt_whatif_series(NULL, &o, "", 4, &s, &n, &sum), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt_trace_destroy(t), GRT_OK);
}

static grt_trace *load_gpu(const char *file) {
  char path[1024];
  snprintf(path, sizeof path, "%s/gpu/%s", GRT_TEST_DATA_DIR, file);
  grt_trace_load_config lc;
  grt_trace_load_config_default(&lc);
  grt_trace *t;
  grt_trace_error err;
  if (grt_trace_load(path, &lc, &t, &err)) fail_msg("%s: %s", file, err.reason);
  return t;
}

/* The sweep over the run recorded with the default settings predicts what
 * expandable_segments:True does; the same run recorded with it on the same
 * GPU reserved exactly that, in exactly that many page maps. */
static void test_prediction_matches_gpu(void **state) {
  (void)state;
  grt_trace *plain = load_gpu("gpurt_transformer_snapshot.pickle");
  grt_trace *exp = load_gpu("gpurt_transformer_expandable_snapshot.pickle");
  grt_whatif_row row = {.conf = "expandable_segments:True"};
  grt_whatif_options o;
  grt_whatif_options_default(&o);
  assert_int_equal(grt_whatif_run(plain, &o, &row, 1), GRT_OK);
  assert_int_equal(row.status, GRT_OK);
  grt_trace_recorded rec;
  assert_int_equal(grt_trace_recorded_figures(exp, &rec), GRT_OK);
  assert_int_equal(row.peak_reserved, rec.reserved_peak);
  assert_int_equal(row.peak_reserved, 3745513472ull);
  assert_int_equal(row.device_mallocs, rec.device_mallocs); /* 78 segment_map events */
  assert_int_equal(row.device_mallocs, 78);
  assert_int_equal(grt_trace_destroy(plain), GRT_OK);
  assert_int_equal(grt_trace_destroy(exp), GRT_OK);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_sweep_rows),
      cmocka_unit_test(test_figures),
      cmocka_unit_test(test_bad_setting),
      cmocka_unit_test(test_prediction_matches_gpu),
      cmocka_unit_test(test_series),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
