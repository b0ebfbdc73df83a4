/* test_range_alloc_long.c — long size classes of the exact best-fit range allocator.
 *
 * Many free ranges of one size (a batch of identical tensors freed together)
 * put them all in one size class. The size-class index must keep choosing
 * exactly what the ordered tree chooses while such a class moves into a tree
 * of its own (after a scan walks more than 64 members) and back into a list
 * (below 16), and the structure walker must pass throughout. Speed is not
 * asserted here: bench_index's "long class" line measures it.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <cmocka.h>

#include "policy/range_alloc.h"
#include "base/rng.h"

#define KINDS GRT__INDEX_KIND_COUNT
#define UNIT 4096u /* the size every long-class range has */
#define SPACER 256u

typedef struct pair {
  grt__range *r[KINDS];
} pair;

static void pair_create(pair *p, uint64_t capacity) {
  for (int k = 0; k < KINDS; k++) assert_int_equal(grt__range_create(capacity, (grt__index_kind)k, &p->r[k]), GRT_OK);
}

static void pair_destroy(pair *p) {
  for (int k = 0; k < KINDS; k++) grt__range_destroy(p->r[k]);
}

/* Allocates on both kinds: same status, same offset. */
static grt_status pair_alloc(pair *p, uint64_t size, uint64_t *off) {
  uint64_t o[KINDS];
  grt_status st = grt__range_alloc(p->r[0], size, &o[0]);
  for (int k = 1; k < KINDS; k++) {
    assert_int_equal(grt__range_alloc(p->r[k], size, &o[k]), st);
    if (st == GRT_OK) assert_int_equal(o[k], o[0]);
  }
  *off = o[0];
  return st;
}

static void pair_free(pair *p, uint64_t off) {
  for (int k = 0; k < KINDS; k++) assert_int_equal(grt__range_free(p->r[k], off), GRT_OK);
}

static void pair_check(const pair *p) {
  for (int k = 0; k < KINDS; k++) assert_int_equal(grt__range_check(p->r[k]), GRT_OK);
  assert_int_equal(grt__range_largest_free(p->r[1]), grt__range_largest_free(p->r[0]));
  assert_int_equal(grt__range_free_count(p->r[1]), grt__range_free_count(p->r[0]));
}

/* n ranges of `unit` bytes, each followed by a live spacer so that freeing
 * them leaves n separate free ranges of one size; their offsets in units[]. */
static void make_equal_ranges(pair *p, int n, uint64_t unit, uint64_t *units) {
  uint64_t spacer;
  for (int i = 0; i < n; i++) {
    assert_int_equal(pair_alloc(p, unit, &units[i]), GRT_OK);
    assert_int_equal(pair_alloc(p, SPACER, &spacer), GRT_OK);
  }
  for (int i = 0; i < n; i++) pair_free(p, units[i]);
}

/* 400 equal free ranges; exact-size requests take them lowest offset first
 * (the first takes the class minimum, known since the inserts; the second
 * rescans the class and moves it into a tree); freeing them again in random
 * order refills it; draining it below 16 returns it to a list. */
static void test_long_class_round_trip(void **state) {
  (void)state;
  enum { N = 400 };
  pair p;
  pair_create(&p, 64 * GRT_MiB);
  uint64_t *units = malloc(N * sizeof *units);
  assert_non_null(units);
  make_equal_ranges(&p, N, UNIT, units);
  assert_int_equal(grt__range_long_classes(p.r[GRT__INDEX_BINS]), 0); /* no scan yet */
  uint64_t off;
  for (int i = 0; i < N; i++) {
    assert_int_equal(pair_alloc(&p, UNIT, &off), GRT_OK);
    assert_int_equal(off, units[i]); /* ties go to the lowest offset */
    if (i == 0) assert_int_equal(grt__range_long_classes(p.r[GRT__INDEX_BINS]), 0);
    if (i == 1) assert_int_equal(grt__range_long_classes(p.r[GRT__INDEX_BINS]), 1);
    if (i % 16 == 0) pair_check(&p);
  }
  assert_int_equal(grt__range_long_classes(p.r[GRT__INDEX_BINS]), 0); /* emptied: a list again */
  grt__rng g;
  grt__rng_seed(&g, 5);
  for (int i = N - 1; i > 0; i--) { /* free in a random order */
    int j = (int)grt__rng_below(&g, (uint64_t)i + 1);
    uint64_t t = units[i];
    units[i] = units[j];
    units[j] = t;
  }
  for (int i = 0; i < N; i++) {
    pair_free(&p, units[i]);
    if (i % 16 == 0) pair_check(&p);
  }
  uint64_t off2;
  assert_int_equal(pair_alloc(&p, UNIT, &off), GRT_OK);
  assert_int_equal(pair_alloc(&p, UNIT, &off2), GRT_OK); /* a rescan of 399: a tree again */
  assert_int_equal(grt__range_long_classes(p.r[GRT__INDEX_BINS]), 1);
  pair_free(&p, off);
  pair_free(&p, off2);
  pair_check(&p);
  pair_destroy(&p);
  free(units);
}

/* Random churn among equal ranges and a few other sizes: requests smaller
 * than the unit split a member (the tail stays in a smaller class), requests
 * one granule over it skip the class, frees merge with free neighbours.
 * Both kinds in lockstep, the walker after every step. */
static void test_long_class_churn(void **state) {
  (void)state;
  enum { N = 300, SLOTS = 500, STEPS = 12000 };
  pair p;
  pair_create(&p, 16 * GRT_MiB);
  uint64_t *units = malloc(N * sizeof *units), *live = calloc(SLOTS, sizeof *live);
  assert_non_null(units);
  assert_non_null(live);
  make_equal_ranges(&p, N, UNIT, units);
  /* UNIT + 32 shares the unit's class: freed, it is a member bigger than the
   * minimum, so requests for it search inside the class (its tree). */
  const uint64_t sizes[] = {UNIT, UNIT, UNIT, UNIT + 32, UNIT - 256, 1024, UNIT + 256, 3 * UNIT};
  grt__rng g;
  grt__rng_seed(&g, 11);
  uint32_t most_trees = 0;
  for (int step = 0; step < STEPS; step++) {
    size_t s = (size_t)grt__rng_below(&g, SLOTS);
    if (live[s]) {
      pair_free(&p, live[s] - 1);
      live[s] = 0;
    } else {
      uint64_t off, size = sizes[grt__rng_below(&g, sizeof sizes / sizeof *sizes)];
      grt_status st = pair_alloc(&p, size, &off);
      assert_true(st == GRT_OK || st == GRT_ERR_OOM);
      if (st == GRT_OK) live[s] = off + 1;
    }
    pair_check(&p);
    uint32_t t = grt__range_long_classes(p.r[GRT__INDEX_BINS]);
    if (t > most_trees) most_trees = t;
  }
  assert_true(most_trees >= 1); /* the churn did reach the tree mode */
  for (size_t s = 0; s < SLOTS; s++)
    if (live[s]) pair_free(&p, live[s] - 1);
  pair_check(&p);
  pair_destroy(&p);
  free(units);
  free(live);
}

/* The largest free range lives in a long class: largest_free reads its tree. */
static void test_long_class_largest(void **state) {
  (void)state;
  enum { N = 100 };
  pair p;
  uint64_t unit = 64 * GRT_KiB, units[N], off;
  pair_create(&p, N * (unit + SPACER) + 8 * GRT_KiB);
  make_equal_ranges(&p, N, unit, units);
  assert_int_equal(pair_alloc(&p, 8 * GRT_KiB, &off), GRT_OK); /* the tail: now every free range is a unit */
  for (int i = 0; i < 2; i++) { /* the second rescans the class: a tree */
    assert_int_equal(pair_alloc(&p, unit, &off), GRT_OK);
    assert_int_equal(off, units[i]);
  }
  assert_int_equal(grt__range_long_classes(p.r[GRT__INDEX_BINS]), 1);
  assert_int_equal(grt__range_largest_free(p.r[GRT__INDEX_BINS]), unit);
  assert_int_equal(grt__range_free_count(p.r[GRT__INDEX_BINS]), N - 2);
  pair_check(&p);
  assert_int_equal(pair_alloc(&p, unit + 1, &off), GRT_ERR_OOM);
  pair_destroy(&p);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_long_class_round_trip),
      cmocka_unit_test(test_long_class_churn),
      cmocka_unit_test(test_long_class_largest),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
