/* segtable.h — the allocators' segment table: non-overlapping address ranges
 * sorted by base, each with its owner's pointer (internal).
 *
 * Finds the segment holding an address by binary search and walks segments
 * in address order (grt__segtable_at(t, 0 .. n-1)). An entry keeps a copy of
 * its range beside the pointer, so a search reads one array and no segment
 * struct; a segment's range must therefore not change while it is in the
 * table. Ranges never overlap (the device hands them out). Insert and remove
 * move the entries above them: segments are few, and each comes and goes
 * with a device call that costs far more.
 *
 * A zeroed table is an empty one; `n` (the number of entries) may be read.
 * grt__segtable_reserve(t, n) makes room for n entries, which
 * grt__segtable_add then fills without a failure, so a caller can take the
 * room before it changes anything. Not thread-safe: the owner's lock guards it.
 */
#ifndef GRT_BASE_SEGTABLE_H
#define GRT_BASE_SEGTABLE_H

#include <stddef.h>
#include <stdint.h>

#include "gpurt/base.h"

typedef struct grt__segtable_entry {
  grt_devptr base;
  uint64_t size;
  void *item;
} grt__segtable_entry;

typedef struct grt__segtable {
  grt__segtable_entry *v; /* sorted by base */
  size_t n, cap;
} grt__segtable;

void grt__segtable_free(grt__segtable *t);
/* Room for n more entries; GRT_ERR_NOMEM leaves the table as it was. */
grt_status grt__segtable_reserve(grt__segtable *t, size_t n);
/* Adds item's range [base, base + size); GRT_ERR_NOMEM (table unchanged) only without room. */
grt_status grt__segtable_insert(grt__segtable *t, grt_devptr base, uint64_t size, void *item);
/* The same into room reserved beforehand: cannot fail. */
void grt__segtable_add(grt__segtable *t, grt_devptr base, uint64_t size, void *item);
/* Removes item, inserted at base; nothing when it is not there. The room stays. */
void grt__segtable_remove(grt__segtable *t, grt_devptr base, const void *item);
/* The item whose range holds addr, or NULL. */
void *grt__segtable_find(const grt__segtable *t, grt_devptr addr);

static inline size_t grt__segtable_count(const grt__segtable *t) { return t->n; }
/* The i-th item in address order (i < count). */
static inline void *grt__segtable_at(const grt__segtable *t, size_t i) { return t->v[i].item; }

#endif
