/* test_base_containers_nomem.c — the hash map and the segment table when host
 * memory runs out.
 *
 * Linked with -Wl,--wrap=malloc,--wrap=calloc,--wrap=realloc (tests named
 * *nomem*, tests/CMakeLists.txt): after nomem_all() every allocation of the
 * library and this file fails (tests/nomem_wrap.h). What was reserved before is then filled
 * without one; a reservation or insert that cannot get memory leaves the
 * container exactly as it was.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <cmocka.h>

#include "base/segtable.h"
#include "base/u64map.h"
#include "nomem_wrap.h"

static void *val(uint64_t k) { return (void *)(uintptr_t)(k + 1); }

static void test_map_reserve_then_put(void **state) {
  (void)state;
  grt__u64map m;
  grt__u64map_init(&m);
  assert_true(grt__u64map_reserve(&m, 500));
  nomem_all();
  for (uint64_t k = 0; k < 500; k++) assert_true(grt__u64map_put(&m, k * 512, val(k)));
  assert_true(grt__u64map_put(&m, UINT64_MAX, val(500))); /* its own field: never needs memory */
  assert_true(grt__u64map_put(&m, 7 * 512, val(7)));      /* a replace needs no room either */
  assert_int_equal(m.count, 501);
  /* full: the next new key needs a larger table, which it cannot get; nothing changes */
  grt__u64map_slot *slots = m.slots;
  size_t mask = m.mask;
  uint64_t k = 500;
  while (grt__u64map_put(&m, k * 512, val(k))) k++; /* the room left below 3/4 load */
  assert_false(grt__u64map_reserve(&m, 1));
  assert_ptr_equal(m.slots, slots);
  assert_int_equal(m.mask, mask);
  assert_int_equal(m.count, k + 1);
  assert_null(grt__u64map_get(&m, k * 512));
  assert_true(nomem_disarm()); /* the failures were injected */
  for (uint64_t j = 0; j < k; j++) assert_ptr_equal(grt__u64map_get(&m, j * 512), val(j));
  assert_ptr_equal(grt__u64map_get(&m, UINT64_MAX), val(500));
  grt__u64map_free(&m);
}

static void test_segtable_reserve_then_add(void **state) {
  (void)state;
  grt__segtable t = {0};
  int items[40];
  assert_int_equal(grt__segtable_reserve(&t, 20), GRT_OK);
  nomem_all();
  for (int i = 0; i < 20; i++) grt__segtable_add(&t, 0x100000 * (uint64_t)(20 - i), 0x1000, &items[i]);
  size_t room = t.cap - t.n;
  for (size_t i = 0; i < room; i++)
    assert_int_equal(grt__segtable_insert(&t, 0x4000000 + 0x100000 * i, 0x1000, &items[20 + i]), GRT_OK);
  const grt__segtable_entry *v = t.v;
  assert_int_equal(grt__segtable_reserve(&t, 1), GRT_ERR_NOMEM);
  assert_int_equal(grt__segtable_insert(&t, 0x10, 0x10, &items[39]), GRT_ERR_NOMEM);
  assert_ptr_equal(t.v, v);
  assert_int_equal(t.n, 20 + room);
  assert_null(grt__segtable_find(&t, 0x10));
  for (int i = 0; i < 20; i++) assert_ptr_equal(grt__segtable_find(&t, 0x100000 * (uint64_t)(20 - i) + 5), &items[i]);
  assert_true(nomem_disarm()); /* the failures were injected */
  grt__segtable_free(&t);
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_map_reserve_then_put),
                                     cmocka_unit_test(test_segtable_reserve_then_add)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
