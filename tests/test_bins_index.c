/* test_bins_index.c — differential test: the size-class index (grt__bins_*)
 * must return exactly what the ordered tree (grt__otree_*) returns, for every
 * operation, over millions of random operations.
 *
 * Sizes mix the shapes the allocators see: log-uniform 512 B .. 64 GiB in
 * multiples of 512, arbitrary sizes (any bit pattern up to 2^40), tiny sizes
 * (the exact-class region), and a few "hot" sizes with many addresses each so
 * that classes overflow into their tree and shrink back (phases alternate
 * growth and drain). Queries use random keys, existing keys and their
 * neighbours (size +-1, addr +-1), so class boundaries are crossed often.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <cmocka.h>

#include "alloc/bins.h"
#include "alloc/ordered_tree.h"
#include "base/rng.h"

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define STEPS 600000 /* sanitizers: ~10x slower, keep the run short */
#else
#define STEPS 3000000
#endif

typedef struct key {
  uint64_t size, addr;
} key;

static uint64_t rand_size(grt__rng *r) {
  static const uint64_t hot[] = {512, 2 * 1024 * 1024, 20 * 1024 * 1024 + 512, 1000};
  switch (grt__rng_below(r, 8)) {
    case 0:
    case 1:
    case 2: /* realistic: log-uniform 512 B .. 64 GiB, multiple of 512 */
      return (grt__rng_log_uniform(r, 512, 64 * GRT_GiB) + 511) & ~(uint64_t)511;
    case 3: /* arbitrary bit patterns */
      return 1 + (grt__rng_next(r) >> (24 + grt__rng_below(r, 40)));
    case 4: /* tiny: exact classes */
      return 1 + grt__rng_below(r, 80);
    case 5: /* huge: top classes */
      return UINT64_MAX - grt__rng_below(r, 1ULL << 62);
    default: /* hot sizes: many entries in one class */
      return hot[grt__rng_below(r, 4)];
  }
}

static void expect_same(bool ok_tree, const grt__bin_entry *t, bool ok_bins, const grt__bin_entry *b) {
  assert_int_equal(ok_tree, ok_bins);
  if (!ok_tree) return;
  assert_int_equal(t->size, b->size);
  assert_int_equal(t->addr, b->addr);
  assert_ptr_equal(t->value, b->value);
}

static void compare_queries(const grt__otree *t, const grt__bins *b, uint64_t s, uint64_t a) {
  grt__bin_entry et, eb;
  expect_same(grt__otree_lower_bound(t, s, a, &et), &et, grt__bins_lower_bound(b, s, a, &eb), &eb);
  expect_same(grt__otree_next(t, s, a, &et), &et, grt__bins_next(b, s, a, &eb), &eb);
  expect_same(grt__otree_prev(t, s, a, &et), &et, grt__bins_prev(b, s, a, &eb), &eb);
}

static void test_index_matches_tree(void **state) {
  (void)state;
  grt__otree *t;
  grt__bins *b;
  assert_int_equal(grt__otree_create(&t), GRT_OK);
  assert_int_equal(grt__bins_create(&b), GRT_OK);
  size_t cap = 1 << 16, n = 0;
  key *live = malloc(cap * sizeof *live); /* unordered: picks erase targets */
  assert_non_null(live);
  grt__rng r;
  grt__rng_seed(&r, 2024);
  unsigned insert_pct = 70;
  for (long step = 0; step < STEPS; step++) {
    if (step % 40000 == 0) insert_pct = insert_pct == 70 ? 30 : 70; /* grow, then drain */
    unsigned op = (unsigned)grt__rng_below(&r, 100);
    if (op < insert_pct / 2 && n < cap) {
      key k = {rand_size(&r), grt__rng_below(&r, 1ULL << 40) & ~(uint64_t)511};
      if (n && grt__rng_below(&r, 50) == 0) k = live[grt__rng_below(&r, n)]; /* duplicate */
      void *v = (void *)(uintptr_t)(step + 1);
      grt_status st = grt__otree_insert(t, k.size, k.addr, v);
      assert_int_equal(grt__bins_insert(b, k.size, k.addr, v), st);
      if (st == GRT_OK) live[n++] = k;
    } else if (op < 50) {
      key k;
      size_t i = n ? (size_t)grt__rng_below(&r, n) : 0;
      bool existing = n && grt__rng_below(&r, 8) != 0;
      k = existing ? live[i] : (key){rand_size(&r), grt__rng_below(&r, 1ULL << 40)};
      bool erased = grt__otree_erase(t, k.size, k.addr);
      assert_int_equal(grt__bins_erase(b, k.size, k.addr), erased);
      if (erased) {
        if (!existing) /* a random key that happened to exist: find it */
          for (i = 0; live[i].size != k.size || live[i].addr != k.addr; i++) continue;
        live[i] = live[--n];
      }
    } else if (op < 96) {
      uint64_t s, a;
      if (n && grt__rng_below(&r, 2)) {
        key k = live[grt__rng_below(&r, n)];
        s = k.size + (grt__rng_below(&r, 3) - 1); /* the key or a neighbour */
        a = k.addr + (grt__rng_below(&r, 3) - 1);
      } else {
        s = rand_size(&r);
        a = grt__rng_below(&r, 4) == 0 ? 0 : grt__rng_below(&r, 1ULL << 40);
      }
      compare_queries(t, b, s, a);
    } else {
      grt__bin_entry et, eb;
      expect_same(grt__otree_first(t, &et), &et, grt__bins_first(b, &eb), &eb);
      expect_same(grt__otree_last(t, &et), &et, grt__bins_last(b, &eb), &eb);
    }
    assert_int_equal(grt__bins_count(b), grt__otree_count(t));
    assert_int_equal(grt__bins_count(b), n);
  }
  free(live);
  grt__bins_destroy(b);
  grt__otree_destroy(t);
}

/* A full in-order walk (first, next, next, ...) and its reverse agree. */
static void test_index_walks_match_tree(void **state) {
  (void)state;
  grt__otree *t;
  grt__bins *b;
  assert_int_equal(grt__otree_create(&t), GRT_OK);
  assert_int_equal(grt__bins_create(&b), GRT_OK);
  grt__rng r;
  grt__rng_seed(&r, 99);
  for (int i = 0; i < 20000; i++) {
    uint64_t s = rand_size(&r), a = grt__rng_below(&r, 1ULL << 30);
    grt_status st = grt__otree_insert(t, s, a, NULL);
    assert_int_equal(grt__bins_insert(b, s, a, NULL), st);
  }
  grt__bin_entry et, eb;
  bool ot = grt__otree_first(t, &et), ob = grt__bins_first(b, &eb);
  size_t steps = 0;
  for (; ot; steps++) {
    expect_same(ot, &et, ob, &eb);
    ot = grt__otree_next(t, et.size, et.addr, &et);
    ob = grt__bins_next(b, eb.size, eb.addr, &eb);
  }
  assert_false(ob);
  assert_int_equal(steps, grt__otree_count(t));
  ot = grt__otree_last(t, &et);
  ob = grt__bins_last(b, &eb);
  for (steps = 0; ot; steps++) {
    expect_same(ot, &et, ob, &eb);
    ot = grt__otree_prev(t, et.size, et.addr, &et);
    ob = grt__bins_prev(b, eb.size, eb.addr, &eb);
  }
  assert_false(ob);
  assert_int_equal(steps, grt__bins_count(b));
  grt__bins_destroy(b);
  grt__otree_destroy(t);
}

/* One class far past any small counter: 70000 blocks of one size (tree mode),
 * then drained back to the array and to empty. */
static void test_index_huge_class(void **state) {
  (void)state;
  grt__bins *b;
  assert_int_equal(grt__bins_create(&b), GRT_OK);
  const uint64_t size = 2 * GRT_MiB;
  for (uint64_t i = 0; i < 70000; i++) assert_int_equal(grt__bins_insert(b, size, i * 512, NULL), GRT_OK);
  assert_int_equal(grt__bins_insert(b, size, 512, NULL), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt__bins_count(b), 70000);
  grt__bin_entry e;
  assert_true(grt__bins_lower_bound(b, size, 777, &e));
  assert_int_equal(e.addr, 1024);
  assert_true(grt__bins_last(b, &e));
  assert_int_equal(e.addr, 69999 * 512);
  for (uint64_t i = 0; i < 70000; i++) {
    assert_true(grt__bins_erase(b, size, i * 512));
    if (i + 1 < 70000) {
      assert_true(grt__bins_first(b, &e));
      assert_int_equal(e.addr, (i + 1) * 512);
    }
  }
  assert_int_equal(grt__bins_count(b), 0);
  assert_false(grt__bins_first(b, &e));
  assert_false(grt__bins_lower_bound(b, 1, 0, &e));
  grt__bins_destroy(b);
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_index_matches_tree),
                                     cmocka_unit_test(test_index_walks_match_tree),
                                     cmocka_unit_test(test_index_huge_class)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
