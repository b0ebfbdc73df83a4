/* block_index.c — the grt__index_ops tables: thin typed wrappers, no state. */
#include "workloads/block_index.h"

#include "alloc/ordered_tree.h"

/* One wrapper set per implementation P with object type T. */
#define GRT__INDEX_WRAPPERS(P, T)                                                              \
  static grt_status P##_w_create(void **out) {                                                 \
    T *x = NULL;                                                                               \
    grt_status st = P##_create(&x);                                                            \
    if (!st) *out = x;                                                                         \
    return st;                                                                                 \
  }                                                                                            \
  static void P##_w_destroy(void *s) { P##_destroy(s); }                                       \
  static grt_status P##_w_insert(void *s, uint64_t size, uint64_t addr, void *v) {             \
    return P##_insert(s, size, addr, v);                                                       \
  }                                                                                            \
  static bool P##_w_erase(void *s, uint64_t size, uint64_t addr) { return P##_erase(s, size, addr); } \
  static bool P##_w_lower_bound(const void *s, uint64_t size, uint64_t addr, grt__bin_entry *o) { \
    return P##_lower_bound(s, size, addr, o);                                                  \
  }                                                                                            \
  static bool P##_w_next(const void *s, uint64_t size, uint64_t addr, grt__bin_entry *o) {     \
    return P##_next(s, size, addr, o);                                                         \
  }                                                                                            \
  static bool P##_w_prev(const void *s, uint64_t size, uint64_t addr, grt__bin_entry *o) {     \
    return P##_prev(s, size, addr, o);                                                         \
  }                                                                                            \
  static bool P##_w_first(const void *s, grt__bin_entry *o) { return P##_first(s, o); }        \
  static bool P##_w_last(const void *s, grt__bin_entry *o) { return P##_last(s, o); }          \
  static size_t P##_w_count(const void *s) { return P##_count(s); }

GRT__INDEX_WRAPPERS(grt__bins, grt__bins)
GRT__INDEX_WRAPPERS(grt__otree, grt__otree)

#define GRT__INDEX_TABLE(P, NAME)                                                              \
  {NAME, P##_w_create, P##_w_destroy, P##_w_insert, P##_w_erase, P##_w_lower_bound,            \
   P##_w_next, P##_w_prev, P##_w_first, P##_w_last, P##_w_count}

static const grt__index_ops tables[GRT__INDEX_KIND_COUNT] = {
    [GRT__INDEX_BINS] = GRT__INDEX_TABLE(grt__bins, "bins"),
    [GRT__INDEX_OTREE] = GRT__INDEX_TABLE(grt__otree, "otree"),
};

const grt__index_ops *grt__index_ops_get(grt__index_kind kind) {
  if ((unsigned)kind >= GRT__INDEX_KIND_COUNT) return NULL;
  return &tables[kind];
}
