/* u64map.c — see u64map.h. */
#include "base/u64map.h"

#include <stdlib.h>

#define EMPTY UINT64_MAX

#define hash64 grt__u64map_hash

void grt__u64map_init(grt__u64map *m) {
  m->slots = NULL;
  m->mask = 0;
  m->count = 0;
}

void grt__u64map_free(grt__u64map *m) {
  free(m->slots);
  grt__u64map_init(m);
}

static bool grow(grt__u64map *m) {
  size_t old_cap = m->slots ? m->mask + 1 : 0;
  size_t cap = old_cap ? old_cap * 2 : 64;
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

bool grt__u64map_put(grt__u64map *m, uint64_t key, void *value) {
  if (!m->slots || (m->count + 1) * 4 > (m->mask + 1) * 3) {
    if (!grow(m)) return false;
  }
  size_t j = hash64(key) & m->mask;
  while (m->slots[j].key != EMPTY && m->slots[j].key != key) j = (j + 1) & m->mask;
  if (m->slots[j].key == EMPTY) m->count++;
  m->slots[j].key = key;
  m->slots[j].value = value;
  return true;
}

void *grt__u64map_del(grt__u64map *m, uint64_t key) {
  if (!m->slots || key == EMPTY) return NULL;
  size_t j = hash64(key) & m->mask;
  while (m->slots[j].key != key) {
    if (m->slots[j].key == EMPTY) return NULL;
    j = (j + 1) & m->mask;
  }
  void *v = m->slots[j].value;
  /* Backward-shift: pull later entries of the probe run into the hole. */
  size_t hole = j;
  for (size_t k = (j + 1) & m->mask; m->slots[k].key != EMPTY; k = (k + 1) & m->mask) {
    size_t home = hash64(m->slots[k].key) & m->mask;
    /* Move k into hole if home is not in (hole, k] cyclically. */
    bool in_range = hole <= k ? (home > hole && home <= k) : (home > hole || home <= k);
    if (!in_range) {
      m->slots[hole] = m->slots[k];
      hole = k;
    }
  }
  m->slots[hole].key = EMPTY;
  m->count--;
  return v;
}
