/* test_alloc_workloads.c — the W3 and long-class runners of workloads.h.
 *
 * W3 on offset allocators: a hand-made lifetime list whose heap need is known
 * by hand, the same answer from every index, and every input the runner
 * refuses. The long-class runner: both kinds agree, bad arguments refused.
 * Speed is not asserted (bench_index and gpurt bench measure it).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "workloads/workloads.h"

/* A 100, B 100, free A, C 150. Peak live 250 (B + C). Best fit puts A at 0
 * and B at 100; C does not fit A's 100-byte hole, so it needs [200, 350):
 * the heap is 350. approx looks for C only in bins whose every member holds
 * 150 bytes: with 3 mantissa bits that is 160 and up, so its tail must be
 * 160 bytes: 360. */
static const grt__lifetime_op ops3[] = {
    {100, 0, 0}, {100, 1, 0}, {0, 0, 1}, {150, 2, 0}, {0, 1, 1}, {0, 2, 1},
};

static void test_w3_known_heap(void **state) {
  (void)state;
  const grt__workload_allocator kinds[] = {GRT__WALLOC_BINS, GRT__WALLOC_OTREE, GRT__WALLOC_APPROX};
  const uint64_t want[] = {350, 350, 360};
  for (size_t k = 0; k < 3; k++) {
    uint64_t heap = 0, peak = 0;
    assert_int_equal(grt__w3_heap_needed(kinds[k], ops3, 6, 3, &heap, &peak), GRT_OK);
    assert_int_equal(peak, 250);
    assert_int_equal(heap, want[k]);
  }
}

/* Two equal buffers that never overlap in time: the heap is one buffer. */
static void test_w3_reuse(void **state) {
  (void)state;
  const grt__lifetime_op ops[] = {{4096, 0, 0}, {0, 0, 1}, {4096, 1, 0}, {0, 1, 1}};
  uint64_t heap, peak;
  assert_int_equal(grt__w3_heap_needed(GRT__WALLOC_BINS, ops, 4, 2, &heap, &peak), GRT_OK);
  assert_int_equal(peak, 4096);
  assert_int_equal(heap, 4096);
}

static void test_w3_refuses_bad_input(void **state) {
  (void)state;
  uint64_t heap, peak;
  const grt__lifetime_op dead_free[] = {{0, 0, 1}};
  const grt__lifetime_op twice[] = {{10, 0, 0}, {10, 0, 0}};
  const grt__lifetime_op zero[] = {{0, 0, 0}};
  assert_int_equal(grt__w3_heap_needed(GRT__WALLOC_BINS, dead_free, 1, 1, &heap, &peak), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt__w3_heap_needed(GRT__WALLOC_BINS, twice, 2, 1, &heap, &peak), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt__w3_heap_needed(GRT__WALLOC_BINS, zero, 1, 1, &heap, &peak), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt__w3_heap_needed(GRT__WALLOC_BINS, ops3, 6, 2, &heap, &peak), GRT_ERR_INVALID_ARG); /* id 2 */
  assert_int_equal(grt__w3_heap_needed(GRT__WALLOC_HARNESS, ops3, 6, 3, &heap, &peak), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt__w3_heap_needed(GRT__WALLOC_BINS, NULL, 6, 3, &heap, &peak), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt__w3_heap_needed(GRT__WALLOC_BINS, ops3, 0, 3, &heap, &peak), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt__w3_heap_needed(GRT__WALLOC_BINS, ops3, 6, 3, NULL, &peak), GRT_ERR_INVALID_ARG);
  const grt__lifetime_op huge[] = {{(uint64_t)1 << 33, 0, 0}}; /* above approx's 32-bit byte range */
  assert_int_equal(grt__w3_heap_needed(GRT__WALLOC_APPROX, huge, 1, 1, &heap, &peak), GRT_ERR_OOM);
  assert_int_equal(grt__w3_heap_needed(GRT__WALLOC_BINS, huge, 1, 1, &heap, &peak), GRT_OK);
  assert_int_equal(heap, (uint64_t)1 << 33);
}

static void test_long_class_runner(void **state) {
  (void)state;
  const grt__index_kind kinds[] = {GRT__INDEX_BINS, GRT__INDEX_OTREE};
  grt__churn_result res[2];
  assert_int_equal(grt__long_class_run(kinds, 2, 300, 3000, 2, res), GRT_OK);
  assert_int_equal(res[0].checksum, res[1].checksum); /* the same exact choices */
  assert_true(res[0].checksum != 0);
  assert_true(res[0].ns_min <= res[0].ns_per_pair);
  assert_int_equal(grt__long_class_run(kinds, 2, 1, 3000, 1, res), GRT_ERR_INVALID_ARG); /* n < 2 */
  assert_int_equal(grt__long_class_run(kinds, 0, 300, 3000, 1, res), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt__long_class_run(kinds, 2, 300, 0, 1, res), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt__long_class_run(kinds, 2, 300, 3000, 0, res), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt__long_class_run(NULL, 2, 300, 3000, 1, res), GRT_ERR_INVALID_ARG);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_w3_known_heap),
      cmocka_unit_test(test_w3_reuse),
      cmocka_unit_test(test_w3_refuses_bad_input),
      cmocka_unit_test(test_long_class_runner),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
