/* u64map.h — open-addressing hash map from 64-bit keys to pointers (internal).
 *
 * Used to find a block or segment by its address in O(1). Linear probing with
 * backward-shift deletion, so there are no tombstones and lookups stay short
 * after millions of insert/erase cycles. Every key is usable: the slots mark
 * an empty slot with UINT64_MAX, so that one key lives in a field of its own
 * (a lookup already tests for it, so it costs the common path nothing).
 * A lookup cannot tell a NULL value from an absent key: store non-NULL values
 * where that matters.
 * Not thread-safe: the owner's lock guards it.
 *
 * The fields are the map's own except `count` (the number of entries), which
 * callers may read. Walk the entries with the iterator:
 *
 *   grt__u64map_iter it = grt__u64map_begin(m);
 *   uint64_t key;
 *   void *value;
 *   while (grt__u64map_next(m, &it, &key, &value)) ...
 *
 * Every entry comes out once, in slot order (so the same operations give the
 * same order), the UINT64_MAX key last. The map must not change during a walk
 * (an insert may regrow it, an erase shifts entries back); to erase as you
 * go, take grt__u64map_first and erase it until the map is empty.
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
  size_t mask;     /* capacity - 1 (capacity is a power of two) or 0 when empty */
  size_t count;    /* entries, the UINT64_MAX key's included */
  bool has_max;    /* the UINT64_MAX key is present */
  void *max_value; /* its value (NULL when it is absent) */
} grt__u64map;

typedef struct grt__u64map_iter {
  size_t pos; /* the next slot to look at; capacity: the UINT64_MAX key's turn */
} grt__u64map_iter;

void grt__u64map_init(grt__u64map *m);
void grt__u64map_free(grt__u64map *m);
/* Inserts or replaces; returns false only when host memory runs out. */
bool grt__u64map_put(grt__u64map *m, uint64_t key, void *value);
/* The slow half of grt__u64map_reserve: regrows the slots. */
bool grt__u64map_grow_for(grt__u64map *m, size_t n);
/* Room for n more keys: the next n inserts cannot fail. False (and the map
 * unchanged) when host memory runs out. Inline: callers reserve before
 * their inserts, and there is nearly always room. */
static inline bool grt__u64map_reserve(grt__u64map *m, size_t n) {
  size_t in_slots = m->count - (m->has_max ? 1 : 0); /* the load stays at most 3/4 */
  if (m->slots && n <= SIZE_MAX / 8 && (in_slots + n) * 4 <= (m->mask + 1) * 3) return true;
  return grt__u64map_grow_for(m, n);
}
static inline size_t grt__u64map_hash(uint64_t k) {
  k ^= k >> 33;
  k *= 0xff51afd7ed558ccdULL;
  k ^= k >> 33;
  return (size_t)k;
}
/* Inline: the allocators look up a block by address on every free. */
static inline void *grt__u64map_get(const grt__u64map *m, uint64_t key) {
  if (key == UINT64_MAX) return m->max_value;
  if (!m->slots) return NULL;
  size_t j = grt__u64map_hash(key) & m->mask;
  while (m->slots[j].key != UINT64_MAX) {
    if (m->slots[j].key == key) return m->slots[j].value;
    j = (j + 1) & m->mask;
  }
  return NULL;
}
/* Removes key; returns the old value or NULL. */
void *grt__u64map_del(grt__u64map *m, uint64_t key);

static inline grt__u64map_iter grt__u64map_begin(const grt__u64map *m) {
  (void)m;
  return (grt__u64map_iter){0};
}
/* The next entry into *key and *value (either may be NULL); false at the end. */
static inline bool grt__u64map_next(const grt__u64map *m, grt__u64map_iter *it, uint64_t *key, void **value) {
  size_t cap = m->slots ? m->mask + 1 : 0;
  for (; it->pos < cap; it->pos++) {
    const grt__u64map_slot *s = &m->slots[it->pos];
    if (s->key == UINT64_MAX) continue;
    it->pos++;
    if (key) *key = s->key;
    if (value) *value = s->value;
    return true;
  }
  if (it->pos > cap || !m->has_max) return false;
  it->pos++;
  if (key) *key = UINT64_MAX;
  if (value) *value = m->max_value;
  return true;
}
/* The entry a new walk would give first; false when the map is empty. */
static inline bool grt__u64map_first(const grt__u64map *m, uint64_t *key, void **value) {
  grt__u64map_iter it = grt__u64map_begin(m);
  return grt__u64map_next(m, &it, key, value);
}

#endif
