/* test_demo_frag_table.c — the utilization table of `gpurt demo frag`,
 * recomputed without the demo's own bookkeeping.
 *
 * frag_run (tools/gpurt/frag_workloads.c) keeps a running count of the live
 * requested bytes and reports live / capacity at the first failed request.
 * Here every trace of the default table (6 families x seeds 1-5, 1024 MB
 * device, naive and caching) is replayed by a loop of the test's own, and the
 * figure is taken from the allocator's statistics instead: requested_bytes
 * current at the first GRT_ERR_OOM, which the allocator counts block by block.
 * Both must agree for every run, every run must fail (a run that never failed
 * would enter the table as 100%), the failed request must be the trace's next
 * allocation, and the per-family means must be the figures
 * tests/test_demo_frag.sh expects the demo to print. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <cmocka.h>

#include "frag_workloads.h"

#define CAPACITY (1024 * GRT_MiB)
#define SEEDS 5

typedef struct own_run {
  size_t failed_at;   /* index of the op that failed; n_ops when none did */
  uint64_t requested; /* requested_bytes current at that moment */
  uint64_t device_frees;
} own_run;

static own_run replay_alone(const frag_trace *t, const char *policy) {
  grt_device_config dc;
  grt_device_config_default(&dc);
  dc.capacity = CAPACITY;
  grt_device *dev;
  grt_allocator *a;
  assert_int_equal(grt_device_create(&dc, &dev), GRT_OK);
  assert_int_equal(grt_alloc_create(policy, dev, NULL, &a), GRT_OK);
  grt_devptr *ptr = calloc(t->n_ids + 1, sizeof *ptr);
  assert_non_null(ptr);
  own_run o = {t->n_ops, 0, 0};
  for (size_t i = 0; i < t->n_ops; i++) {
    const frag_op *op = &t->ops[i];
    if (op->is_free) {
      if (ptr[op->id]) assert_int_equal(grt_alloc_free(a, ptr[op->id]), GRT_OK);
      ptr[op->id] = 0;
      continue;
    }
    grt_status st = grt_alloc_malloc(a, op->size, 0, &ptr[op->id]);
    if (st == GRT_ERR_OOM) {
      grt_alloc_stats s;
      assert_int_equal(grt_alloc_get_stats(a, &s), GRT_OK);
      o.failed_at = i;
      o.requested = (uint64_t)s.requested_bytes[GRT_STAT_ALL].current;
      o.device_frees = s.num_device_free;
      ptr[op->id] = 0;
      break;
    }
    assert_int_equal(st, GRT_OK);
  }
  assert_int_equal(grt_alloc_destroy(a), GRT_OK); /* takes the blocks still allocated */
  assert_int_equal(grt_device_destroy(dev), GRT_OK);
  free(ptr);
  return o;
}

/* The table at its defaults, in per cent: naive, caching per family. */
static const struct {
  const char *family;
  double naive, caching;
} expected[] = {
    {"phase-growth", 83.2, 78.5}, {"checkerboard", 78.7, 78.5}, {"small-among-large", 87.8, 85.1},
    {"random-churn", 85.7, 81.2}, {"size-drift", 86.7, 82.1},   {"step-batches", 95.2, 85.6},
};

static void test_table_recomputed(void **state) {
  (void)state;
  static const char *const policies[2] = {"naive", "caching"};
  assert_int_equal(frag_family_count(), sizeof expected / sizeof expected[0]);
  double grand[2] = {0, 0}, syncs[2] = {0, 0};
  for (size_t f = 0; f < frag_family_count(); f++) {
    double sum[2] = {0, 0};
    for (uint64_t seed = 1; seed <= SEEDS; seed++) {
      frag_trace t;
      assert_true(frag_trace_make(f, seed, CAPACITY, &t));
      assert_string_equal(t.name, expected[f].family);
      for (int p = 0; p < 2; p++) {
        frag_result r;
        cli_first err;
        assert_int_equal(frag_run(&t, policies[p], CAPACITY, &r, &err), GRT_OK);
        own_run o = replay_alone(&t, policies[p]);
        if (!r.failed || o.failed_at == t.n_ops)
          fail_msg("%s seed %llu %s: no allocation failed", t.name, (unsigned long long)seed, policies[p]);
        assert_int_equal(r.ops_done, o.failed_at); /* every op before the failed one was done */
        assert_false(t.ops[o.failed_at].is_free);
        assert_int_equal(r.failed_size, t.ops[o.failed_at].size);
        assert_true(o.requested <= CAPACITY);
        if (r.utilization != (double)o.requested / (double)CAPACITY)
          fail_msg("%s seed %llu %s: frag_run says %.6f, the allocator %.6f", t.name, (unsigned long long)seed,
                   policies[p], r.utilization, (double)o.requested / (double)CAPACITY);
        assert_int_equal(r.device_frees, o.device_frees);
        sum[p] += (double)o.requested / (double)CAPACITY;
        syncs[p] += (double)o.device_frees;
      }
      frag_trace_free(&t);
    }
    double want[2] = {expected[f].naive, expected[f].caching};
    for (int p = 0; p < 2; p++) {
      double pct = 100.0 * sum[p] / SEEDS;
      if (fabs(pct - want[p]) >= 0.05) /* the table prints one decimal */
        fail_msg("%s %s: %.3f%%, the table says %.1f%%", expected[f].family, policies[p], pct, want[p]);
      grand[p] += sum[p] / SEEDS;
    }
  }
  size_t n = frag_family_count();
  assert_true(fabs(100.0 * grand[0] / (double)n - 86.2) < 0.05);
  assert_true(fabs(100.0 * grand[1] / (double)n - 81.8) < 0.05);
  /* device syncs per run: device frees before the first failure */
  assert_true(fabs(syncs[0] / (double)(n * SEEDS) - 2360) < 0.5);
  assert_true(fabs(syncs[1] / (double)(n * SEEDS) - 24) < 0.5);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_table_recomputed),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
