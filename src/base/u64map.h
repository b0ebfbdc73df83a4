/* u64map.h — open-addressing hash map from 64-bit keys to pointers (internal).
 *
 * Used to find a block or segment by its address in O(1). Linear probing with
 * backward-shift deletion, so there are no tombstones and lookups stay short
 * after millions of insert/erase cycles. UINT64_MAX is reserved as "empty".
 * Not thread-safe: the owner's lock guards it.
 */
#ifndef GRT_BASE_U64MAP_H
#define GRT_BASE_U64MAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct grt__u64map_slot {
  uint64_t key;
  void *value;
} grt__u64map_slot;

typedef struct grt__u64map {
  grt__u64map_slot *slots;
  size_t mask;  /* capacity - 1 (capacity is a power of two) or 0 when empty */
  size_t count;
} grt__u64map;

void grt__u64map_init(grt__u64map *m);
void grt__u64map_free(grt__u64map *m);
/* Inserts or replaces; returns false only when host memory runs out. */
bool grt__u64map_put(grt__u64map *m, uint64_t key, void *value);
static inline size_t grt__u64map_hash(uint64_t k) {
  k ^= k >> 33;
  k *= 0xff51afd7ed558ccdULL;
  k ^= k >> 33;
  return (size_t)k;
}
/* Inline: the allocators look up a block by address on every free. */
static inline void *grt__u64map_get(const grt__u64map *m, uint64_t key) {
  if (!m->slots || key == UINT64_MAX) return NULL;
  size_t j = grt__u64map_hash(key) & m->mask;
  while (m->slots[j].key != UINT64_MAX) {
    if (m->slots[j].key == key) return m->slots[j].value;
    j = (j + 1) & m->mask;
  }
  return NULL;
}
/* Removes key; returns the old value or NULL. */
void *grt__u64map_del(grt__u64map *m, uint64_t key);

#endif
