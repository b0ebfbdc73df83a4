/* test_doctor_shared.c — the doctor on real snapshots: the shipped ones in
 * ../shared/traces (skipped when absent) and the project's own GPU
 * recordings (tests/data/gpu): the verdict, sites named by user frames, and
 * the runtime contract's figures, each checked against the snapshot by hand
 * (the loops, device mallocs and release runs were counted from the pickle's
 * events with Python). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "gpurt/doctor.h"
#include "trace_test_util.h"

typedef struct expect {
  const char *file;       /* under traces/pytorch of ../shared, or gpu/ of tests/data */
  bool shared;
  uint64_t iterations, from_event; /* 0: no loop found */
  uint64_t steady_mallocs, steady_malloc_bytes, steady_frees;
  uint64_t empty_cache, empty_cache_bytes;
  int64_t empty_cache_us;
  uint64_t retries, retry_bytes;
  int64_t retry_us;
} expect;

static const expect cases[] = {
    {"HugePandaCoder_inference2.pickle", true, 0, 0, 0, 0, 0, 0, 0, 0, 1, 9982443520ull, 249777},
    {"MAGMA27_memory_snapshot.pickle", true, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0},
    {"MercuryB1_empty_cache_loop.pickle", true, 28, 360, 399, 149573074944ull, 405, 28, 156019720192ull, 180059, 0,
     0, 0},
    {"bcrafton_memory_snapshot.pickle", true, 111, 1856, 0, 0, 0, 0, 0, 0, 0, 0, 0},
    {"bolongcheng_expandable_cl128.pickle", true, 32, 158, 0, 0, 0, 0, 0, 0, 0, 0, 0},
    {"gpurt_transformer_snapshot.pickle", false, 8, 1721, 36, 3214934016ull, 0, 0, 0, 0, 0, 0, 0},
    {"gpurt_transformer_expandable_snapshot.pickle", false, 8, 1712, 29, 2684354560ull, 0, 0, 0, 0, 0, 0, 0},
};

/* Whether one of the top sites at the peak is named by a user's Python frame. */
static bool user_site(const grt_trace *t, const grt_doctor_report *rep) {
  for (size_t i = 0; i < rep->n_peak_sites; i++) {
    const grt_trace_frame *f;
    size_t n, keep[1];
    if (!rep->peak_sites[i].stack || grt_trace_stack(t, rep->peak_sites[i].stack, &f, &n)) continue;
    if (grt_trace_frames_fold(f, n, keep, 1) && strstr(f[keep[0]].filename, ".py") &&
        !strstr(f[keep[0]].filename, "/torch/"))
      return true;
  }
  return false;
}

static void check(const expect *x, const char *path) {
  grt_trace_error terr;
  grt_status st;
  grt_trace *t = tt_load(path, GRT_TRACE_FORMAT_AUTO, &terr, &st);
  if (st) fail_msg("%s: %s", x->file, terr.reason);
  grt_doctor_report rep;
  char err[512];
  if ((st = grt_doctor_examine(t, &rep, err, sizeof err))) fail_msg("%s: %s", x->file, err);
  assert_int_equal(rep.verdict, GRT_DOCTOR_HEALTHY); /* none of them recorded an OOM */
  if (!user_site(t, &rep)) fail_msg("%s: no top site named by user code", x->file);
  assert_int_equal(rep.steady.found, x->iterations != 0);
  assert_int_equal(rep.steady.iterations, x->iterations);
  assert_int_equal(rep.steady.from_event, x->from_event);
  const grt_contract_finding *f = rep.contract;
  assert_int_equal(f[GRT_CONTRACT_STEADY_MALLOCS].outcome,
                   !x->iterations ? GRT_CONTRACT_UNKNOWN
                   : x->steady_mallocs || x->steady_frees ? GRT_CONTRACT_BROKEN : GRT_CONTRACT_KEPT);
  assert_int_equal(f[GRT_CONTRACT_STEADY_MALLOCS].count, x->steady_mallocs);
  assert_int_equal(f[GRT_CONTRACT_STEADY_MALLOCS].bytes, x->steady_malloc_bytes);
  assert_int_equal(f[GRT_CONTRACT_STEADY_MALLOCS].also, x->steady_frees);
  assert_int_equal(f[GRT_CONTRACT_EMPTY_CACHE].count, x->empty_cache);
  assert_int_equal(f[GRT_CONTRACT_EMPTY_CACHE].bytes, x->empty_cache_bytes);
  assert_int_equal(f[GRT_CONTRACT_EMPTY_CACHE].time_us, x->empty_cache_us);
  assert_int_equal(f[GRT_CONTRACT_OOM_RETRIES].count, x->retries);
  assert_int_equal(f[GRT_CONTRACT_OOM_RETRIES].bytes, x->retry_bytes);
  assert_int_equal(f[GRT_CONTRACT_OOM_RETRIES].time_us, x->retry_us);
  assert_int_equal(f[GRT_CONTRACT_OOM_RETRIES].also, 0);
  grt_trace_recorded rec; /* a retry recorded bounds the device */
  assert_int_equal(grt_trace_recorded_figures(t, &rec), GRT_OK);
  assert_int_equal(rec.device_full_event != UINT64_MAX, x->retries > 0);
  if (x->retries) assert_int_equal(rec.device_full_event, f[GRT_CONTRACT_OOM_RETRIES].first_event);
  assert_int_equal(f[GRT_CONTRACT_CROSS_STREAM_FREES].outcome, GRT_CONTRACT_KEPT);
  assert_int_equal(f[GRT_CONTRACT_STREAM_STRANDING].outcome, GRT_CONTRACT_KEPT);
  assert_int_equal(f[GRT_CONTRACT_STREAM_STRANDING].count, 1);
  /* the blocks pinning segments are named where the snapshot recorded their frames */
  size_t named = 0;
  for (size_t i = 0; i < rep.n_pinned; i++) named += rep.pinned[i].first_live_stack != 0;
  if (rep.n_pinned && 2 * named < rep.n_pinned) fail_msg("%s: %zu of %zu pinning blocks named", x->file, named, rep.n_pinned);
  assert_int_equal(grt_trace_destroy(t), GRT_OK);
}

static void test_snapshots(void **state) {
  (void)state;
  size_t ran = 0;
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    char rel[256], path[1024];
    const char *p = path;
    if (cases[i].shared) {
      snprintf(rel, sizeof rel, "traces/pytorch/%s", cases[i].file);
      if (!(p = tt_shared(rel))) continue;
    } else {
      snprintf(path, sizeof path, "%s/gpu/%s", GRT_TEST_DATA_DIR, cases[i].file);
    }
    check(&cases[i], p);
    ran++;
  }
  if (ran < sizeof cases / sizeof cases[0])
    fprintf(stderr, "test_doctor_shared: the ../shared snapshots were skipped (set GRT_SHARED_DIR to ../shared)\n");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_snapshots),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
