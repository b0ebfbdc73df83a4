/* test_bins.c — the ordered free-range set against a brute-force sorted array. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <cmocka.h>

#include "alloc/bins.h"
#include "base/rng.h"

typedef struct key {
  uint64_t size, addr;
} key;

static int cmp_key(const void *a, const void *b) {
  const key *x = a, *y = b;
  if (x->size != y->size) return x->size < y->size ? -1 : 1;
  return x->addr < y->addr ? -1 : x->addr > y->addr;
}

/* Reference: index of the first key >= (s, a) in the sorted array. */
static size_t ref_lb(const key *k, size_t n, uint64_t s, uint64_t a) {
  size_t i = 0;
  key q = {s, a};
  while (i < n && cmp_key(&k[i], &q) < 0) i++;
  return i;
}

static void test_bins_match_reference(void **state) {
  (void)state;
  grt__bins *b;
  assert_int_equal(grt__bins_create(&b), GRT_OK);
  key *keys = calloc(4096, sizeof *keys);
  size_t n = 0;
  grt__rng r;
  grt__rng_seed(&r, 7);
  for (int step = 0; step < 60000; step++) {
    uint64_t s = 1 + grt__rng_below(&r, 64), a = grt__rng_below(&r, 256);
    int op = (int)grt__rng_below(&r, 3);
    key q = {s, a};
    key *found = n ? bsearch(&q, keys, n, sizeof *keys, cmp_key) : NULL;
    if (op == 0 && n < 4096) {
      grt_status st = grt__bins_insert(b, s, a, (void *)(uintptr_t)(s * 1000 + a));
      if (found) {
        assert_int_equal(st, GRT_ERR_INVALID_ARG);
      } else {
        assert_int_equal(st, GRT_OK);
        keys[n++] = q;
        qsort(keys, n, sizeof *keys, cmp_key);
      }
    } else if (op == 1) {
      assert_int_equal(grt__bins_erase(b, s, a), found != NULL);
      if (found) {
        *found = keys[n - 1];
        n--;
        qsort(keys, n, sizeof *keys, cmp_key);
      }
    } else {
      grt__bin_entry e;
      size_t i = ref_lb(keys, n, s, a);
      bool ok = grt__bins_lower_bound(b, s, a, &e);
      assert_int_equal(ok, i < n);
      if (ok) {
        assert_int_equal(e.size, keys[i].size);
        assert_int_equal(e.addr, keys[i].addr);
        assert_int_equal((uintptr_t)e.value, keys[i].size * 1000 + keys[i].addr);
      }
      size_t j = (i < n && cmp_key(&keys[i], &q) == 0) ? i + 1 : i;
      ok = grt__bins_next(b, s, a, &e);
      assert_int_equal(ok, j < n);
      if (ok) assert_int_equal(e.addr, keys[j].addr);
      ok = grt__bins_prev(b, s, a, &e);
      assert_int_equal(ok, i > 0);
      if (ok) assert_int_equal(e.addr, keys[i - 1].addr);
    }
    assert_int_equal(grt__bins_count(b), n);
  }
  grt__bin_entry e;
  if (n) {
    assert_true(grt__bins_first(b, &e));
    assert_int_equal(e.size, keys[0].size);
    assert_true(grt__bins_last(b, &e));
    assert_int_equal(e.size, keys[n - 1].size);
  }
  free(keys);
  grt__bins_destroy(b);
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_bins_match_reference)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
