/* test_range_alloc_nomem.c — a long size class when host memory runs out.
 *
 * Linked with -Wl,--wrap=malloc,--wrap=calloc,--wrap=realloc (tests named
 * *nomem*, tests/CMakeLists.txt): every allocation made by the library and
 * this file goes through tests/nomem_wrap.h, which fails them all after
 * nomem_all() (cmocka's own allocations, inside its shared library, are not
 * wrapped).
 * A class's tree is best effort: when it cannot be built the class stays a
 * list, when it cannot grow the class goes back to a list; either way every
 * choice stays exact and no operation fails for it.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <cmocka.h>

#include "policy/range_alloc.h"
#include "nomem_wrap.h"

#define UNIT 4096u
#define SPACER 256u
enum { N = 200 };

/* The range, its node pool grown beforehand (so that no step needs memory for
 * nodes), and N free UNIT ranges between live spacers at units[]. */
static grt__range *equal_ranges(uint64_t *units) {
  grt__range *r;
  assert_int_equal(grt__range_create(64 * GRT_MiB, GRT__INDEX_BINS, &r), GRT_OK);
  uint64_t spacer, warm[4 * N];
  for (int i = 0; i < 4 * N; i++) assert_int_equal(grt__range_alloc(r, 512, &warm[i]), GRT_OK);
  for (int i = 0; i < 4 * N; i++) assert_int_equal(grt__range_free(r, warm[i]), GRT_OK);
  for (int i = 0; i < N; i++) {
    assert_int_equal(grt__range_alloc(r, UNIT, &units[i]), GRT_OK);
    assert_int_equal(grt__range_alloc(r, SPACER, &spacer), GRT_OK);
  }
  for (int i = 0; i < N; i++) assert_int_equal(grt__range_free(r, units[i]), GRT_OK);
  return r;
}

/* No memory for the tree: the class stays a list and answers exactly. */
static void test_tree_cannot_be_built(void **state) {
  (void)state;
  uint64_t units[N], off;
  grt__range *r = equal_ranges(units);
  nomem_all();
  for (int i = 0; i < N / 2; i++) {
    assert_int_equal(grt__range_alloc(r, UNIT, &off), GRT_OK);
    assert_int_equal(off, units[i]);
  }
  assert_int_equal(grt__range_long_classes(r), 0);
  (void)nomem_disarm();
  assert_int_equal(grt__range_check(r), GRT_OK);
  assert_int_equal(grt__range_alloc(r, UNIT, &off), GRT_OK); /* memory again: the rescan builds it */
  assert_int_equal(off, units[N / 2]);
  assert_int_equal(grt__range_long_classes(r), 1);
  assert_int_equal(grt__range_check(r), GRT_OK);
  grt__range_destroy(r);
}

/* A tree with no spare node cannot take an insert: the class goes back to a
 * list, the free succeeds, and the choices stay exact. The tree is built with
 * exactly as many nodes as members; each member given out pools one. */
static void test_tree_cannot_grow(void **state) {
  (void)state;
  uint64_t units[N], off[3];
  grt__range *r = equal_ranges(units);
  for (int i = 0; i < 2; i++) { /* the second rescans: a tree, then gives units[1] out (one spare) */
    assert_int_equal(grt__range_alloc(r, UNIT, &off[i]), GRT_OK);
    assert_int_equal(off[i], units[i]);
  }
  assert_int_equal(grt__range_long_classes(r), 1);
  assert_int_equal(grt__range_free(r, off[1]), GRT_OK); /* takes the spare */
  nomem_all();
  assert_int_equal(grt__range_free(r, off[0]), GRT_OK); /* no spare, none to be had: a list */
  assert_int_equal(grt__range_long_classes(r), 0);
  assert_int_equal(grt__range_check(r), GRT_OK);
  for (int i = 0; i < 3; i++) { /* still exact: lowest offset first */
    assert_int_equal(grt__range_alloc(r, UNIT, &off[i]), GRT_OK);
    assert_int_equal(off[i], units[i]);
  }
  /* The second of those rescanned the class: its tree was rebuilt from the
   * nodes it pooled when it became a list, with no new memory. */
  assert_int_equal(grt__range_long_classes(r), 1);
  (void)nomem_disarm();
  assert_int_equal(grt__range_check(r), GRT_OK);
  grt__range_destroy(r);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_tree_cannot_be_built),
      cmocka_unit_test(test_tree_cannot_grow),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
