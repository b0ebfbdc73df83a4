/* test_base_segtable.c — the segment table against a brute-force list:
 * inserts in random order come out sorted, find answers every address
 * (inside, at the ends, in the gaps, around the extremes), remove takes only
 * the item it names, and reserved room is filled without moving the table. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <cmocka.h>

#include "base/rng.h"
#include "base/segtable.h"

enum { N = 400 };

typedef struct seg {
  grt_devptr base;
  uint64_t size;
  bool in;
} seg;

/* The reference answer: the segment in the table holding addr. */
static seg *ref_find(seg *s, grt_devptr addr) {
  for (size_t i = 0; i < N; i++)
    if (s[i].in && addr >= s[i].base && addr - s[i].base < s[i].size) return &s[i];
  return NULL;
}

static void check(const grt__segtable *t, seg *s) {
  size_t n = 0;
  for (size_t i = 0; i < N; i++) n += s[i].in;
  assert_int_equal(grt__segtable_count(t), n);
  for (size_t i = 0; i < t->n; i++) { /* sorted, every entry a segment in the table */
    const seg *g = grt__segtable_at(t, i);
    assert_true(g->in);
    if (i > 0) assert_true(((const seg *)grt__segtable_at(t, i - 1))->base < g->base);
  }
  for (size_t i = 0; i < N; i++) {
    grt_devptr probes[] = {s[i].base - 1, s[i].base, s[i].base + s[i].size / 2, s[i].base + s[i].size - 1,
                           s[i].base + s[i].size};
    for (size_t k = 0; k < sizeof probes / sizeof *probes; k++)
      assert_ptr_equal(grt__segtable_find(t, probes[k]), ref_find(s, probes[k]));
  }
  assert_ptr_equal(grt__segtable_find(t, 0), ref_find(s, 0));
  assert_ptr_equal(grt__segtable_find(t, UINT64_MAX), NULL);
}

/* N ranges of 1..64 pages with gaps of 0..2 pages between them (some touch). */
static void make_segs(seg *s) {
  grt__rng rng;
  grt__rng_seed(&rng, 3);
  grt_devptr at = 1ull << 40;
  for (size_t i = 0; i < N; i++) {
    at += 4096 * grt__rng_below(&rng, 3);
    s[i] = (seg){at, 4096 * (1 + grt__rng_below(&rng, 64)), false};
    at += s[i].size;
  }
}

static void test_insert_find_remove(void **state) {
  (void)state;
  seg *s = calloc(N, sizeof *s);
  size_t *order = malloc(N * sizeof *order);
  assert_non_null(s);
  assert_non_null(order);
  make_segs(s);
  grt__rng rng;
  grt__rng_seed(&rng, 9);
  for (size_t i = 0; i < N; i++) order[i] = i;
  for (size_t i = N - 1; i > 0; i--) { /* shuffle */
    size_t j = grt__rng_below(&rng, i + 1), x = order[i];
    order[i] = order[j];
    order[j] = x;
  }
  grt__segtable t = {0};
  check(&t, s);
  for (size_t i = 0; i < N; i++) {
    seg *g = &s[order[i]];
    assert_int_equal(grt__segtable_insert(&t, g->base, g->size, g), GRT_OK);
    g->in = true;
    if (i % 50 == 0) check(&t, s);
  }
  check(&t, s);
  for (size_t i = 0; i < N; i++) { /* remove by another item at the same base: nothing */
    seg other = s[i];
    grt__segtable_remove(&t, s[i].base, &other);
  }
  check(&t, s);
  for (size_t i = 0; i < N; i += 2) {
    seg *g = &s[order[i]];
    grt__segtable_remove(&t, g->base, g);
    g->in = false;
    grt__segtable_remove(&t, g->base, g); /* twice: nothing */
  }
  check(&t, s);
  for (size_t i = 0; i < N; i += 4) {
    seg *g = &s[order[i]];
    assert_int_equal(grt__segtable_insert(&t, g->base, g->size, g), GRT_OK);
    g->in = true;
  }
  check(&t, s);
  grt__segtable_free(&t);
  assert_int_equal(t.n, 0);
  assert_null(grt__segtable_find(&t, s[0].base));
  free(order);
  free(s);
}

/* Reserve makes room once; the adds it made room for leave the entries in place. */
static void test_reserve_then_add(void **state) {
  (void)state;
  seg *s = calloc(N, sizeof *s);
  assert_non_null(s);
  make_segs(s);
  grt__segtable t = {0};
  assert_int_equal(grt__segtable_reserve(&t, 0), GRT_OK);
  assert_int_equal(grt__segtable_reserve(&t, N), GRT_OK);
  const grt__segtable_entry *v = t.v;
  for (size_t i = N; i-- > 0;) { /* descending: every add moves the whole table up */
    grt__segtable_add(&t, s[i].base, s[i].size, &s[i]);
    s[i].in = true;
  }
  assert_ptr_equal(t.v, v);
  assert_int_equal(grt__segtable_reserve(&t, 0), GRT_OK);
  assert_ptr_equal(t.v, v);
  assert_int_equal(grt__segtable_reserve(&t, SIZE_MAX), GRT_ERR_NOMEM); /* impossible: refused, unchanged */
  assert_ptr_equal(t.v, v);
  check(&t, s);
  grt__segtable_free(&t);
  free(s);
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_insert_find_remove),
                                     cmocka_unit_test(test_reserve_then_add)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
