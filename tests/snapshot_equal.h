/* snapshot_equal.h — two allocator snapshots, field by field (the structs
 * have padding, so no memcmp). */
#ifndef GRT_TESTS_SNAPSHOT_EQUAL_H
#define GRT_TESTS_SNAPSHOT_EQUAL_H

#include <stdbool.h>

#include "gpurt/alloc.h"

static inline bool snapshot_segments_equal(const grt_snapshot_segment *p, const grt_snapshot_segment *q) {
  if (p->address != q->address || p->total_size != q->total_size || p->allocated_size != q->allocated_size ||
      p->active_size != q->active_size || p->requested_size != q->requested_size || p->stream != q->stream ||
      p->is_large != q->is_large || p->is_expandable != q->is_expandable || p->n_blocks != q->n_blocks ||
      p->pool_id.first != q->pool_id.first || p->pool_id.second != q->pool_id.second)
    return false;
  for (size_t j = 0; j < p->n_blocks; j++) {
    const grt_snapshot_block *u = &p->blocks[j], *v = &q->blocks[j];
    if (u->address != v->address || u->size != v->size || u->requested_size != v->requested_size ||
        u->state != v->state)
      return false;
  }
  return true;
}

static inline bool snapshots_equal(const grt_alloc_snapshot *x, const grt_alloc_snapshot *y) {
  if (x->n_segments != y->n_segments) return false;
  for (size_t i = 0; i < x->n_segments; i++)
    if (!snapshot_segments_equal(&x->segments[i], &y->segments[i])) return false;
  return true;
}

#endif
