/* test_range_alloc.c — the exact best-fit offset allocator over one range.
 *
 * Random alloc/free sequences run on two allocators in lockstep, one per index
 * kind: they must hand out identical offsets and fail identically (both are
 * exact best fit), and the structure walker must pass after every step. A
 * shadow list of live blocks checks that live blocks never overlap and that
 * live + free bytes add up to the capacity.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <cmocka.h>

#include "policy/range_alloc.h"
#include "workloads/workloads.h"
#include "base/rng.h"
#include "shadow_blocks.h"

static void test_basic_best_fit_and_merge(void **state) {
  (void)state;
  for (int kind = 0; kind < GRT__INDEX_KIND_COUNT; kind++) {
    grt__range *r;
    uint64_t a, b, c, d, x;
    assert_int_equal(grt__range_create(1000, (grt__index_kind)kind, &r), GRT_OK);
    assert_int_equal(grt__range_alloc(r, 100, &a), GRT_OK); /* [0,100) */
    assert_int_equal(grt__range_alloc(r, 50, &b), GRT_OK);  /* [100,150) */
    assert_int_equal(grt__range_alloc(r, 30, &c), GRT_OK);  /* [150,180) */
    assert_int_equal(grt__range_alloc(r, 40, &d), GRT_OK);  /* [180,220) */
    assert_int_equal(a, 0);
    assert_int_equal(d, 180);
    assert_int_equal(grt__range_free(r, a), GRT_OK); /* holes: 100 @0, 780 @220 */
    assert_int_equal(grt__range_free(r, c), GRT_OK); /* + 30 @150 */
    assert_int_equal(grt__range_free_count(r), 3);
    assert_int_equal(grt__range_alloc(r, 30, &x), GRT_OK); /* exact fit */
    assert_int_equal(x, 150);
    assert_int_equal(grt__range_alloc(r, 31, &x), GRT_OK); /* best fit: the 100 hole */
    assert_int_equal(x, 0);
    assert_int_equal(grt__range_free(r, x), GRT_OK);
    assert_int_equal(grt__range_free(r, 150), GRT_OK);
    assert_int_equal(grt__range_free(r, b), GRT_OK); /* merges 0..180 into one */
    assert_int_equal(grt__range_free_count(r), 2);
    assert_int_equal(grt__range_largest_free(r), 780);
    assert_int_equal(grt__range_free(r, d), GRT_OK); /* everything merges */
    assert_int_equal(grt__range_free_count(r), 1);
    assert_int_equal(grt__range_largest_free(r), 1000);
    assert_int_equal(grt__range_free_bytes(r), 1000);
    assert_int_equal(grt__range_check(r), GRT_OK);
    grt__range_destroy(r);
  }
}

static void test_errors(void **state) {
  (void)state;
  grt__range *r = NULL;
  uint64_t o, o2;
  assert_int_equal(grt__range_create(0, GRT__INDEX_BINS, &r), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt__range_create(10, (grt__index_kind)7, &r), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt__range_create(4096, GRT__INDEX_BINS, &r), GRT_OK);
  assert_int_equal(grt__range_alloc(r, 0, &o), GRT_ERR_SIZE);
  assert_int_equal(grt__range_alloc(r, 4097, &o), GRT_ERR_SIZE);
  assert_int_equal(grt__range_alloc(r, 4096, NULL), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt__range_alloc(r, 4000, &o), GRT_OK);
  assert_int_equal(grt__range_alloc(r, 97, &o2), GRT_ERR_OOM);
  assert_int_equal(grt__range_free(r, 4000), GRT_ERR_DOUBLE_FREE); /* a free range starts there */
  assert_int_equal(grt__range_free(r, 17), GRT_ERR_UNKNOWN_POINTER);
  assert_int_equal(grt__range_free(r, o), GRT_OK);
  assert_int_equal(grt__range_free(r, o), GRT_ERR_DOUBLE_FREE);
  assert_int_equal(grt__range_check(r), GRT_OK);
  assert_int_equal(grt__range_free_bytes(r), 4096);
  grt__range_destroy(r);
  grt__range_destroy(NULL);
}

/* Handles: free by handle with no offset lookup; errors for a free range, a
 * pooled node and a handle never issued; the offset map, built on the first
 * free by offset, then stays in step with handle frees. */
static void test_handles(void **state) {
  (void)state;
  for (int kind = 0; kind < GRT__INDEX_KIND_COUNT; kind++) {
    grt__range *r;
    uint64_t o[4];
    uint32_t h[4];
    assert_int_equal(grt__range_create(1000, (grt__index_kind)kind, &r), GRT_OK);
    for (int i = 0; i < 4; i++) assert_int_equal(grt__range_alloc_handle(r, 100, &o[i], &h[i]), GRT_OK);
    assert_int_equal(o[3], 300);
    assert_int_equal(grt__range_free_handle(r, h[1]), GRT_OK); /* hole 100 @100 */
    assert_int_equal(grt__range_free_handle(r, h[1]), GRT_ERR_DOUBLE_FREE);
    assert_int_equal(grt__range_free_handle(r, 0), GRT_ERR_UNKNOWN_POINTER);     /* never a block */
    assert_int_equal(grt__range_free_handle(r, 12345), GRT_ERR_UNKNOWN_POINTER); /* never issued */
    assert_int_equal(grt__range_free_handle(r, h[0]), GRT_OK); /* merges into 200 @0; h[1]'s node pooled */
    grt_status st = grt__range_free_handle(r, h[1]);
    assert_true(st == GRT_ERR_UNKNOWN_POINTER || st == GRT_ERR_DOUBLE_FREE); /* never a success */
    assert_int_equal(grt__range_check(r), GRT_OK);
    assert_int_equal(grt__range_free(r, o[2]), GRT_OK); /* by offset: builds the map */
    assert_int_equal(grt__range_check(r), GRT_OK);
    uint64_t x;
    uint32_t hx;
    assert_int_equal(grt__range_alloc_handle(r, 250, &x, &hx), GRT_OK); /* best fit: the 300 @0 */
    assert_int_equal(x, 0);
    assert_int_equal(grt__range_free_handle(r, hx), GRT_OK); /* the map follows handle frees */
    assert_int_equal(grt__range_free(r, o[3]), GRT_OK);
    assert_int_equal(grt__range_free_count(r), 1);
    assert_int_equal(grt__range_largest_free(r), 1000);
    assert_int_equal(grt__range_check(r), GRT_OK);
    grt__range_destroy(r);
  }
}

/* Random churn on both index kinds in lockstep, checked after every step. */
static void churn(uint64_t capacity, int slots, int steps, bool granular, uint64_t seed) {
  grt__range *r[GRT__INDEX_KIND_COUNT];
  for (int k = 0; k < GRT__INDEX_KIND_COUNT; k++)
    assert_int_equal(grt__range_create(capacity, (grt__index_kind)k, &r[k]), GRT_OK);
  shadow_block *l = calloc((size_t)slots, sizeof *l); /* size 0: empty slot */
  assert_non_null(l);
  grt__rng g;
  grt__rng_seed(&g, seed);
  for (int step = 0; step < steps; step++) {
    size_t s = (size_t)grt__rng_below(&g, (uint64_t)slots);
    if (l[s].size) {
      for (int k = 0; k < GRT__INDEX_KIND_COUNT; k++) assert_int_equal(grt__range_free(r[k], l[s].off), GRT_OK);
      /* DOUBLE_FREE while a free range starts there; merged into its left neighbour,
       * the offset starts nothing any more: UNKNOWN_POINTER. Never a success. */
      grt_status again = grt__range_free(r[0], l[s].off);
      assert_true(again == GRT_ERR_DOUBLE_FREE || again == GRT_ERR_UNKNOWN_POINTER);
      l[s].size = 0;
    } else {
      uint64_t size = grt__rng_log_uniform(&g, 1, capacity / 8);
      if (granular) size = (size + 255) & ~(uint64_t)255;
      uint64_t off[GRT__INDEX_KIND_COUNT];
      grt_status st = grt__range_alloc(r[0], size, &off[0]);
      assert_true(st == GRT_OK || st == GRT_ERR_OOM);
      if (st == GRT_ERR_OOM) assert_true(grt__range_largest_free(r[0]) < size);
      for (int k = 1; k < GRT__INDEX_KIND_COUNT; k++) {
        assert_int_equal(grt__range_alloc(r[k], size, &off[k]), st);
        if (st == GRT_OK) assert_int_equal(off[k], off[0]);
      }
      if (st == GRT_OK) l[s] = (shadow_block){off[0], size, 0};
    }
    for (int k = 0; k < GRT__INDEX_KIND_COUNT; k++) {
      assert_int_equal(grt__range_check(r[k]), GRT_OK);
      assert_int_equal(grt__range_free_bytes(r[k]), grt__range_free_bytes(r[0]));
    }
    if (step % 64 == 0) shadow_check(l, (size_t)slots, capacity, grt__range_free_bytes(r[0]));
  }
  /* Free everything: one range again. */
  for (int s = 0; s < slots; s++)
    if (l[s].size)
      for (int k = 0; k < GRT__INDEX_KIND_COUNT; k++) assert_int_equal(grt__range_free(r[k], l[s].off), GRT_OK);
  for (int k = 0; k < GRT__INDEX_KIND_COUNT; k++) {
    assert_int_equal(grt__range_free_count(r[k]), 1);
    assert_int_equal(grt__range_largest_free(r[k]), capacity);
    grt__range_destroy(r[k]);
  }
  free(l);
}

static void test_churn_small(void **state) {
  (void)state;
  churn(1 << 16, 160, 40000, false, 1); /* arbitrary sizes, frequent OOM */
}

static void test_churn_granular(void **state) {
  (void)state;
  churn(8 * GRT_GiB, 300, 40000, true, 2); /* 256-byte multiples, W1-like */
}

/* The W2 runner at a small scale: both indexes make identical choices (same
 * checksum, same failures) and exact best fit never fails with a big-enough hole. */
static void test_workload_runner_agrees(void **state) {
  (void)state;
  grt__churn_config c;
  grt__w2_config(&c, 5, 1);
  c.iterations = 20000;
  grt__churn_result res[GRT__WALLOC_COUNT];
  for (int a = 0; a < GRT__WALLOC_COUNT; a++)
    assert_int_equal(grt__churn_run(&c, (grt__workload_allocator)a, &res[a]), GRT_OK);
  assert_int_equal(res[GRT__WALLOC_BINS].checksum, res[GRT__WALLOC_OTREE].checksum);
  assert_int_equal(res[GRT__WALLOC_BINS].failures, res[GRT__WALLOC_OTREE].failures);
  assert_int_equal(res[GRT__WALLOC_BINS].failures_with_hole, 0);
  assert_int_equal(res[GRT__WALLOC_HARNESS].failures, 0);
  /* Interleaved on one stream: each allocator's result is the one it gives alone. */
  const grt__workload_allocator all[] = {GRT__WALLOC_APPROX, GRT__WALLOC_BINS, GRT__WALLOC_HARNESS, GRT__WALLOC_OTREE};
  grt__churn_result mixed[4];
  c.runs = 2;
  assert_int_equal(grt__churn_run_interleaved(&c, all, 4, mixed), GRT_OK);
  for (int k = 0; k < 4; k++) {
    assert_int_equal(mixed[k].checksum, res[all[k]].checksum);
    assert_int_equal(mixed[k].failures, res[all[k]].failures);
    assert_int_equal(mixed[k].failures_with_hole, res[all[k]].failures_with_hole);
    assert_true(mixed[k].ns_min <= mixed[k].ns_per_pair);
  }
  assert_int_equal(grt__churn_run_interleaved(&c, all, 0, mixed), GRT_ERR_INVALID_ARG);
  const grt__workload_allocator bad[] = {GRT__WALLOC_BINS, GRT__WALLOC_COUNT};
  assert_int_equal(grt__churn_run_interleaved(&c, bad, 2, mixed), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt__churn_run_interleaved(&c, NULL, 1, mixed), GRT_ERR_INVALID_ARG);
  c.granule = 3; /* not a power of two */
  assert_int_equal(grt__churn_run(&c, GRT__WALLOC_BINS, &res[0]), GRT_ERR_INVALID_ARG);
  assert_null(grt__workload_allocator_name(GRT__WALLOC_COUNT));
}

/* Medians over several runs, fills that run out of room, every invalid configuration, the op stream. */
static void test_workload_runner_edges(void **state) {
  (void)state;
  grt__churn_config c;
  grt__w1_config(&c, 9, 2);
  assert_int_equal(c.capacity, 8 * GRT_GiB);
  assert_int_equal(c.slots, 1000);
  assert_int_equal(c.granule, 256);
  c.capacity = 64 * GRT_MiB; /* far below the fill's demand: fill failures, timed failures */
  c.slots = 200;
  c.iterations = 3000;
  grt__churn_result two, three;
  assert_int_equal(grt__churn_run(&c, GRT__WALLOC_BINS, &two), GRT_OK); /* even runs: mean of the middle two */
  assert_true(two.fill_failures > 0);
  assert_true(two.failures > 0);
  assert_int_equal(two.failures_with_hole, 0);
  assert_true(two.ns_min <= two.ns_per_pair);
  c.runs = 3;
  assert_int_equal(grt__churn_run(&c, GRT__WALLOC_OTREE, &three), GRT_OK);
  assert_int_equal(three.checksum, two.checksum); /* same stream, same exact best fit */
  assert_int_equal(three.failures, two.failures);
  assert_int_equal(three.fill_failures, two.fill_failures);

  grt__churn_ops a, b;
  assert_int_equal(grt__churn_draw(&c, &a), GRT_OK);
  assert_int_equal(grt__churn_draw(&c, &b), GRT_OK);
  assert_memory_equal(a.size, b.size, c.iterations * sizeof *a.size); /* seeded */
  assert_memory_equal(a.slot, b.slot, c.iterations * sizeof *a.slot);
  for (uint32_t i = 0; i < c.iterations; i++) {
    assert_true(a.slot[i] < c.slots);
    assert_true(a.size[i] >= c.min_size && a.size[i] <= c.max_size + c.granule);
    assert_int_equal(a.size[i] % c.granule, 0);
  }
  grt__churn_ops_free(&a);
  assert_null(a.size);
  grt__churn_ops_free(&b);
  grt__churn_ops_free(NULL);

  const grt__churn_config good = c;
  grt__churn_config bad[10];
  for (int i = 0; i < 10; i++) bad[i] = good;
  bad[0].capacity = 0;
  bad[1].slots = 0;
  bad[2].iterations = 0;
  bad[3].runs = 0;
  bad[4].min_size = 0;
  bad[5].min_size = bad[5].max_size + 1;
  bad[6].granule = 0;
  bad[7].granule = 768;
  bad[8].max_size = UINT64_MAX - 100;
  bad[9].min_size = 1;
  bad[9].max_size = UINT64_MAX;
  grt__churn_result r;
  for (int i = 0; i < 10; i++) {
    assert_int_equal(grt__churn_run(&bad[i], GRT__WALLOC_BINS, &r), GRT_ERR_INVALID_ARG);
    assert_int_equal(grt__churn_draw(&bad[i], &a), GRT_ERR_INVALID_ARG);
  }
  assert_int_equal(grt__churn_run(&good, GRT__WALLOC_COUNT, &r), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt__churn_run(NULL, GRT__WALLOC_BINS, &r), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt__churn_run(&good, GRT__WALLOC_BINS, NULL), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt__churn_draw(NULL, &a), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt__churn_draw(&good, NULL), GRT_ERR_INVALID_ARG);
  assert_string_equal(grt__workload_allocator_name(GRT__WALLOC_BINS), "bins");
  assert_string_equal(grt__workload_allocator_name(GRT__WALLOC_OTREE), "otree");
  assert_string_equal(grt__workload_allocator_name(GRT__WALLOC_HARNESS), "harness");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_basic_best_fit_and_merge),
      cmocka_unit_test(test_errors),
      cmocka_unit_test(test_handles),
      cmocka_unit_test(test_churn_small),
      cmocka_unit_test(test_churn_granular),
      cmocka_unit_test(test_workload_runner_agrees),
      cmocka_unit_test(test_workload_runner_edges),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
