/* test_base_u64map.c — the hash map against a brute-force reference: lookups,
 * the iterator (every entry exactly once after inserts, growth and erases,
 * the UINT64_MAX key included), reserve, and the pop-until-empty walk. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <cmocka.h>

#include "base/rng.h"
#include "base/u64map.h"

enum { N = 5000 };

/* The reference: keys[i] is live with value vals[i] when live[i]. */
typedef struct ref {
  uint64_t keys[N];
  void *vals[N];
  bool live[N];
  size_t count;
} ref;

static void *val_of(size_t i) { return (void *)(uintptr_t)(i + 1); }

/* Walks m: every entry is a live reference key with its value, seen once; as many as the map counts. */
static void check_walk(const grt__u64map *m, const ref *r) {
  bool *seen = calloc(N, sizeof *seen);
  assert_non_null(seen);
  grt__u64map_iter it = grt__u64map_begin(m);
  uint64_t key;
  void *value;
  size_t n = 0;
  while (grt__u64map_next(m, &it, &key, &value)) {
    size_t i = (size_t)(uintptr_t)value - 1;
    assert_true(i < N);
    assert_true(r->live[i]);
    assert_true(r->keys[i] == key);
    assert_false(seen[i]);
    seen[i] = true;
    n++;
  }
  assert_false(grt__u64map_next(m, &it, &key, &value)); /* stays at the end */
  assert_int_equal(n, r->count);
  assert_int_equal(m->count, r->count);
  for (size_t i = 0; i < N; i++) {
    assert_true(seen[i] == r->live[i]);
    assert_ptr_equal(grt__u64map_get(m, r->keys[i]), r->live[i] ? r->vals[i] : NULL);
  }
  free(seen);
}

/* Distinct keys: small ones (long probe runs), random ones, 0 and UINT64_MAX. */
static void make_keys(ref *r) {
  grt__rng rng;
  grt__rng_seed(&rng, 11);
  for (size_t i = 0; i < N; i++) {
    uint64_t k;
    bool dup;
    do {
      k = i % 3 ? grt__rng_next(&rng) : grt__rng_below(&rng, 4 * N);
      dup = false;
      for (size_t j = 0; j < i && !dup; j++) dup = r->keys[j] == k;
    } while (dup || k == 0 || k == UINT64_MAX);
    r->keys[i] = k;
    r->vals[i] = val_of(i);
  }
  r->keys[0] = 0;
  r->keys[1] = UINT64_MAX;
}

static void test_walk_after_growth_and_erases(void **state) {
  (void)state;
  ref *r = calloc(1, sizeof *r);
  assert_non_null(r);
  make_keys(r);
  grt__u64map m;
  grt__u64map_init(&m);
  check_walk(&m, r);               /* empty: nothing to walk */
  for (size_t i = 0; i < N; i++) { /* grows from 64 slots to 8192 */
    assert_true(grt__u64map_put(&m, r->keys[i], r->vals[i]));
    r->live[i] = true;
    r->count++;
    if (i % 997 == 0) check_walk(&m, r);
  }
  check_walk(&m, r);
  grt__rng rng;
  grt__rng_seed(&rng, 5);
  for (int round = 0; round < 4; round++) {
    for (size_t i = 0; i < N; i++) { /* erase about half, re-add some: backward shifts everywhere */
      uint64_t roll = grt__rng_below(&rng, 4);
      if (roll < 2 && r->live[i]) {
        assert_ptr_equal(grt__u64map_del(&m, r->keys[i]), r->vals[i]);
        r->live[i] = false;
        r->count--;
      } else if (roll == 2 && !r->live[i]) {
        assert_true(grt__u64map_put(&m, r->keys[i], r->vals[i]));
        r->live[i] = true;
        r->count++;
      }
    }
    check_walk(&m, r);
  }
  assert_null(grt__u64map_del(&m, 12345678901ULL)); /* absent keys */
  if (!r->live[1]) assert_null(grt__u64map_del(&m, UINT64_MAX));
  check_walk(&m, r);
  grt__u64map_free(&m);
  free(r);
}

/* The UINT64_MAX key is an ordinary key: put, replace, get, walk, erase. */
static void test_max_key(void **state) {
  (void)state;
  grt__u64map m;
  grt__u64map_init(&m);
  int a, b;
  assert_null(grt__u64map_get(&m, UINT64_MAX));
  assert_true(grt__u64map_put(&m, UINT64_MAX, &a));
  assert_int_equal(m.count, 1);
  assert_ptr_equal(grt__u64map_get(&m, UINT64_MAX), &a);
  assert_null(grt__u64map_get(&m, 7));
  assert_true(grt__u64map_put(&m, UINT64_MAX, &b)); /* replaces */
  assert_true(grt__u64map_put(&m, 7, &a));
  assert_int_equal(m.count, 2);
  grt__u64map_iter it = grt__u64map_begin(&m);
  uint64_t key = 0;
  void *value = NULL;
  assert_true(grt__u64map_next(&m, &it, &key, &value));
  assert_true(key == 7 && value == &a);
  assert_true(grt__u64map_next(&m, &it, &key, &value)); /* the UINT64_MAX key comes last */
  assert_true(key == UINT64_MAX && value == &b);
  assert_false(grt__u64map_next(&m, &it, NULL, NULL));
  assert_ptr_equal(grt__u64map_del(&m, UINT64_MAX), &b);
  assert_null(grt__u64map_del(&m, UINT64_MAX));
  assert_int_equal(m.count, 1);
  assert_null(grt__u64map_get(&m, UINT64_MAX));
  grt__u64map_free(&m);
  grt__u64map_init(&m); /* alone in an otherwise empty map */
  assert_true(grt__u64map_put(&m, UINT64_MAX, &a));
  assert_true(grt__u64map_first(&m, &key, &value));
  assert_true(key == UINT64_MAX && value == &a);
  grt__u64map_free(&m);
  assert_int_equal(m.count, 0);
  assert_false(grt__u64map_first(&m, NULL, NULL));
}

/* Reserve grows once, up front: the inserts it made room for leave the slots where they are. */
static void test_reserve(void **state) {
  (void)state;
  grt__u64map m;
  grt__u64map_init(&m);
  assert_true(grt__u64map_reserve(&m, 0));
  assert_true(grt__u64map_reserve(&m, 1000));
  const grt__u64map_slot *slots = m.slots;
  size_t mask = m.mask;
  assert_true((mask + 1) * 3 >= 1000 * 4);
  for (uint64_t k = 0; k < 1000; k++) assert_true(grt__u64map_put(&m, k * 4096, (void *)(uintptr_t)(k + 1)));
  assert_ptr_equal(m.slots, slots);
  assert_int_equal(m.mask, mask);
  assert_true(grt__u64map_reserve(&m, 0)); /* already room: nothing moves */
  assert_ptr_equal(m.slots, slots);
  assert_false(grt__u64map_reserve(&m, SIZE_MAX)); /* impossible: refused, unchanged */
  assert_ptr_equal(m.slots, slots);
  for (uint64_t k = 0; k < 1000; k++) assert_ptr_equal(grt__u64map_get(&m, k * 4096), (void *)(uintptr_t)(k + 1));
  grt__u64map_free(&m);
}

/* Taking the first entry and erasing it empties the map, each entry once. */
static void test_pop_until_empty(void **state) {
  (void)state;
  grt__u64map m;
  grt__u64map_init(&m);
  for (uint64_t k = 1; k <= 300; k++) assert_true(grt__u64map_put(&m, k * 48, (void *)(uintptr_t)k));
  assert_true(grt__u64map_put(&m, UINT64_MAX, (void *)(uintptr_t)301));
  bool seen[302] = {false};
  uint64_t key;
  void *value;
  size_t n = 0;
  while (grt__u64map_first(&m, &key, &value)) {
    uintptr_t v = (uintptr_t)value;
    assert_true(v >= 1 && v <= 301 && !seen[v]);
    assert_true(key == (v == 301 ? UINT64_MAX : v * 48));
    seen[v] = true;
    assert_ptr_equal(grt__u64map_del(&m, key), value);
    n++;
  }
  assert_int_equal(n, 301);
  assert_int_equal(m.count, 0);
  grt__u64map_free(&m);
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_walk_after_growth_and_erases),
                                     cmocka_unit_test(test_max_key), cmocka_unit_test(test_reserve),
                                     cmocka_unit_test(test_pop_until_empty)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
