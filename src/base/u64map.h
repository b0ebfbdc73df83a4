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
void *grt__u64map_get(const grt__u64map *m, uint64_t key);
/* Removes key; returns the old value or NULL. */
void *grt__u64map_del(grt__u64map *m, uint64_t key);

#endif
