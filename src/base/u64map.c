/* u64map.c — see u64map.h. */
#include "base/u64map.h"

#include <stdlib.h>

#define EMPTY UINT64_MAX

#define hash64 grt__u64map_hash

void grt__u64map_init(grt__u64map *m) {
  m->slots = NULL;
  m->mask = 0;
  m->count = 0;
  m->has_max = false;
  m->max_value = NULL;
}

void grt__u64map_free(grt__u64map *m) {
  free(m->slots);
  grt__u64map_init(m);
}

static size_t capacity(const grt__u64map *m) { return m->slots ? m->mask + 1 : 0; }

/* Entries in the slots (the UINT64_MAX key has none). */
static size_t in_slots(const grt__u64map *m) { return m->count - (m->has_max ? 1 : 0); }

/* Moves every entry into cap slots (a power of two); false, map unchanged, when out of memory. */
static bool resize(grt__u64map *m, size_t cap) {
  size_t old_cap = capacity(m);
  grt__u64map_slot *s = malloc(cap * sizeof *s);
  if (!s) return false;
  for (size_t i = 0; i < cap; i++) s[i].key = EMPTY;
  grt__u64map_slot *old = m->slots;
  m->slots = s;
  m->mask = cap - 1;
  for (size_t i = 0; i < old_cap; i++) {
    if (old[i].key == EMPTY) continue;
    size_t j = hash64(old[i].key) & m->mask;
    while (s[j].key != EMPTY) j = (j + 1) & m->mask;
    s[j] = old[i];
  }
  free(old);
  return true;
}

bool grt__u64map_grow_for(grt__u64map *m, size_t n) {
  if (n > SIZE_MAX / 8 - in_slots(m)) return false;
  size_t need = in_slots(m) + n, cap = capacity(m) ? capacity(m) : 64;
  while (need * 4 > cap * 3) cap *= 2; /* the load stays at most 3/4 */
  return cap == capacity(m) || resize(m, cap);
}

bool grt__u64map_put(grt__u64map *m, uint64_t key, void *value) {
  if (key == EMPTY) {
    if (!m->has_max) m->count++;
    m->has_max = true;
    m->max_value = value;
    return true;
  }
  if (!grt__u64map_reserve(m, 1)) return false;
  size_t j = hash64(key) & m->mask;
  while (m->slots[j].key != EMPTY && m->slots[j].key != key) j = (j + 1) & m->mask;
  if (m->slots[j].key == EMPTY) m->count++;
  m->slots[j].key = key;
  m->slots[j].value = value;
  return true;
}

void *grt__u64map_del(grt__u64map *m, uint64_t key) {
  if (key == EMPTY) {
    void *v = m->max_value;
    if (m->has_max) m->count--;
    m->has_max = false;
    m->max_value = NULL;
    return v;
  }
  if (!m->slots) return NULL;
  size_t j = hash64(key) & m->mask;
  while (m->slots[j].key != key) {
    if (m->slots[j].key == EMPTY) return NULL;
    j = (j + 1) & m->mask;
  }
  void *v = m->slots[j].value;
  /* Backward-shift: pull later entries of the probe run into the hole. */
  size_t hole = j, mask = m->mask;
  for (size_t k = (j + 1) & mask; m->slots[k].key != EMPTY; k = (k + 1) & mask) {
    size_t home = hash64(m->slots[k].key) & mask;
    /* Move k into hole if home is not in (hole, k] cyclically: it is at least as far back as the hole. */
    if (((k - home) & mask) >= ((k - hole) & mask)) {
      m->slots[hole] = m->slots[k];
      hole = k;
    }
  }
  m->slots[hole].key = EMPTY;
  m->count--;
  return v;
}
