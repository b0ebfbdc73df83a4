/* block_index.h — one interface over the two (size, address) indexes (internal).
 *
 * grt__bins (bins.h, the size-class index) and grt__otree (ordered_tree.h, the
 * treap) implement the same ordered-set semantics. Code that must run on either
 * (the range allocator, the benchmarks, the tests) picks one by kind and calls
 * through this table; the caching allocator calls grt__bins_* directly.
 * Each function has its counterpart's contract; `self` is the index object.
 */
#ifndef GRT_ALLOC_BLOCK_INDEX_H
#define GRT_ALLOC_BLOCK_INDEX_H

#include "alloc/bins.h"
#include "policy/range_alloc.h" /* grt__index_kind */


typedef struct grt__index_ops {
  const char *name; /* "bins" or "otree" */
  grt_status (*create)(void **out);
  void (*destroy)(void *self);
  grt_status (*insert)(void *self, uint64_t size, uint64_t addr, void *value);
  bool (*erase)(void *self, uint64_t size, uint64_t addr);
  bool (*lower_bound)(const void *self, uint64_t size, uint64_t addr, grt__bin_entry *out);
  bool (*next)(const void *self, uint64_t size, uint64_t addr, grt__bin_entry *out);
  bool (*prev)(const void *self, uint64_t size, uint64_t addr, grt__bin_entry *out);
  bool (*first)(const void *self, grt__bin_entry *out);
  bool (*last)(const void *self, grt__bin_entry *out);
  size_t (*count)(const void *self);
} grt__index_ops;

/* The table for `kind`, or NULL for an unknown kind. */
const grt__index_ops *grt__index_ops_get(grt__index_kind kind);

#endif
