/* shadow_blocks.h — the tests' own record of live blocks in one range, and the
 * check that they are a valid layout (for tests of range allocators).
 * Include after cmocka.h. */
#ifndef GRT_TESTS_SHADOW_BLOCKS_H
#define GRT_TESTS_SHADOW_BLOCKS_H

#include <stdint.h>
#include <stdlib.h>

/* One slot of a test: a live block at [off, off + size), or size 0 (empty). */
typedef struct shadow_block {
  uint64_t off, size;
  uint32_t handle; /* the allocator's handle, for tests that free by handle */
} shadow_block;

static inline int shadow_cmp_off(const void *a, const void *b) {
  const shadow_block *x = a, *y = b;
  return x->off < y->off ? -1 : x->off > y->off;
}

/* Live blocks (size != 0) do not overlap, lie inside [0, capacity), and with
 * the allocator's free bytes add up to the capacity. */
static inline void shadow_check(const shadow_block *l, size_t n, uint64_t capacity, uint64_t free_bytes) {
  shadow_block *s = malloc((n ? n : 1) * sizeof *s);
  assert_non_null(s);
  size_t m = 0;
  for (size_t i = 0; i < n; i++)
    if (l[i].size) s[m++] = l[i];
  qsort(s, m, sizeof *s, shadow_cmp_off);
  uint64_t used = 0;
  for (size_t i = 0; i < m; i++) {
    if (i) assert_true(s[i - 1].off + s[i - 1].size <= s[i].off);
    assert_true(s[i].off + s[i].size <= capacity);
    used += s[i].size;
  }
  assert_int_equal(used + free_bytes, capacity);
  free(s);
}

#endif
