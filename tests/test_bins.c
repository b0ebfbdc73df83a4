/* test_bins.c — both ordered free-range sets (the size-class index grt__bins and
 * the tree grt__otree, through grt__index_ops) against a brute-force sorted array.
 * The differential test between the two is tests/test_bins_index.c. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <cmocka.h>

#include "workloads/block_index.h"
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

static void match_reference(grt__index_kind kind) {
  const grt__index_ops *ops = grt__index_ops_get(kind);
  void *b;
  assert_non_null(ops);
  assert_int_equal(ops->create(&b), GRT_OK);
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
      grt_status st = ops->insert(b, s, a, (void *)(uintptr_t)(s * 1000 + a));
      if (found) {
        assert_int_equal(st, GRT_ERR_INVALID_ARG);
      } else {
        assert_int_equal(st, GRT_OK);
        keys[n++] = q;
        qsort(keys, n, sizeof *keys, cmp_key);
      }
    } else if (op == 1) {
      assert_int_equal(ops->erase(b, s, a), found != NULL);
      if (found) {
        *found = keys[n - 1];
        n--;
        qsort(keys, n, sizeof *keys, cmp_key);
      }
    } else {
      grt__bin_entry e;
      size_t i = ref_lb(keys, n, s, a);
      bool ok = ops->lower_bound(b, s, a, &e);
      assert_int_equal(ok, i < n);
      if (ok) {
        assert_int_equal(e.size, keys[i].size);
        assert_int_equal(e.addr, keys[i].addr);
        assert_int_equal((uintptr_t)e.value, keys[i].size * 1000 + keys[i].addr);
      }
      size_t j = (i < n && cmp_key(&keys[i], &q) == 0) ? i + 1 : i;
      ok = ops->next(b, s, a, &e);
      assert_int_equal(ok, j < n);
      if (ok) assert_int_equal(e.addr, keys[j].addr);
      ok = ops->prev(b, s, a, &e);
      assert_int_equal(ok, i > 0);
      if (ok) assert_int_equal(e.addr, keys[i - 1].addr);
    }
    assert_int_equal(ops->count(b), n);
  }
  grt__bin_entry e;
  if (n) {
    assert_true(ops->first(b, &e));
    assert_int_equal(e.size, keys[0].size);
    assert_true(ops->last(b, &e));
    assert_int_equal(e.size, keys[n - 1].size);
  }
  free(keys);
  ops->destroy(b);
}

static void test_bins_match_reference(void **state) {
  (void)state;
  match_reference(GRT__INDEX_BINS);
}

static void test_otree_match_reference(void **state) {
  (void)state;
  match_reference(GRT__INDEX_OTREE);
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_bins_match_reference),
                                     cmocka_unit_test(test_otree_match_reference)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
