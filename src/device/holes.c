/* holes.c — see holes.h. A treap over node indices: split and merge by
 * address, each node's `max` the largest size in its subtree. */
#include "device/holes.h"

#include <stdlib.h>

struct grt__hole_node {
  uint64_t addr, size, max;
  uint32_t left, right, prio;
};

#define NIL 0u

void grt__holes_init(grt__holes *h) { *h = (grt__holes){.seed = 0x9e3779b97f4a7c15ULL}; }

void grt__holes_free(grt__holes *h) {
  free(h->nodes);
  grt__holes_init(h);
}

static uint32_t next_prio(grt__holes *h) {
  h->seed ^= h->seed << 13; /* xorshift64 */
  h->seed ^= h->seed >> 7;
  h->seed ^= h->seed << 17;
  return (uint32_t)(h->seed >> 32);
}

/* Nodes the next inserts can take: the free list's and the pool's unused tail. */
static size_t spare(const grt__holes *h) { return (h->cap > h->used ? h->cap - h->used : 0) + h->n_free; }

bool grt__holes_reserve(grt__holes *h, size_t n) {
  if (spare(h) >= n) return true;
  if (n > UINT32_MAX / 4) return false;
  size_t used = h->used ? h->used : 1; /* index 0 is NIL */
  size_t cap = h->cap ? h->cap : 16;
  while (cap - used + h->n_free < n) cap *= 2;
  if (cap > UINT32_MAX / 2) return false;
  grt__hole_node *nodes = realloc(h->nodes, cap * sizeof *nodes);
  if (!nodes) return false;
  h->nodes = nodes;
  h->used = (uint32_t)used;
  h->cap = (uint32_t)cap;
  return true;
}

static uint64_t max_of(const grt__holes *h, uint32_t n) { return n ? h->nodes[n].max : 0; }

static void pull(grt__holes *h, uint32_t n) {
  grt__hole_node *x = &h->nodes[n];
  uint64_t l = max_of(h, x->left), r = max_of(h, x->right), m = x->size;
  x->max = l > m ? (l > r ? l : r) : (m > r ? m : r);
}

/* Splits t into the nodes below addr (*lo) and the rest (*hi). */
static void split(grt__holes *h, uint32_t t, uint64_t addr, uint32_t *lo, uint32_t *hi) {
  if (!t) {
    *lo = *hi = NIL;
    return;
  }
  grt__hole_node *x = &h->nodes[t];
  if (x->addr < addr) {
    split(h, x->right, addr, &h->nodes[t].right, hi);
    *lo = t;
  } else {
    split(h, x->left, addr, lo, &h->nodes[t].left);
    *hi = t;
  }
  pull(h, t);
}

/* Joins a and b, every address of a below every address of b. */
static uint32_t merge(grt__holes *h, uint32_t a, uint32_t b) {
  if (!a || !b) return a ? a : b;
  if (h->nodes[a].prio > h->nodes[b].prio) {
    h->nodes[a].right = merge(h, h->nodes[a].right, b);
    pull(h, a);
    return a;
  }
  h->nodes[b].left = merge(h, a, h->nodes[b].left);
  pull(h, b);
  return b;
}

bool grt__holes_insert(grt__holes *h, uint64_t addr, uint64_t size) {
  if (!grt__holes_reserve(h, 1)) return false;
  uint32_t n = h->free_list;
  if (n) {
    h->free_list = h->nodes[n].left;
    h->n_free--;
  } else {
    n = h->used++;
  }
  h->nodes[n] = (grt__hole_node){addr, size, size, NIL, NIL, next_prio(h)};
  uint32_t lo, hi;
  split(h, h->root, addr, &lo, &hi);
  h->root = merge(h, merge(h, lo, n), hi);
  h->count++;
  return true;
}

void grt__holes_erase(grt__holes *h, uint64_t addr) {
  uint32_t lo, mid, hi;
  split(h, h->root, addr, &lo, &hi);
  split(h, hi, addr + 1, &mid, &hi);
  if (mid) { /* one node: addresses are distinct */
    h->nodes[mid].left = h->free_list;
    h->free_list = mid;
    h->n_free++;
    h->count--;
  }
  h->root = merge(h, lo, hi);
}

static void update_at(grt__holes *h, uint32_t t, uint64_t addr, uint64_t new_addr, uint64_t new_size) {
  if (!t) return;
  grt__hole_node *x = &h->nodes[t];
  if (addr < x->addr)
    update_at(h, x->left, addr, new_addr, new_size);
  else if (addr > x->addr)
    update_at(h, x->right, addr, new_addr, new_size);
  else
    x->addr = new_addr, x->size = new_size;
  pull(h, t);
}

void grt__holes_update(grt__holes *h, uint64_t addr, uint64_t new_addr, uint64_t new_size) {
  update_at(h, h->root, addr, new_addr, new_size);
}

static bool put(const grt__hole_node *x, grt__hole *out) {
  *out = (grt__hole){x->addr, x->size};
  return true;
}

bool grt__holes_first_fit(const grt__holes *h, uint64_t size, grt__hole *out) {
  uint32_t t = h->root;
  if (max_of(h, t) < size) return false;
  for (;;) { /* the subtree at t holds a fit */
    const grt__hole_node *x = &h->nodes[t];
    if (max_of(h, x->left) >= size)
      t = x->left;
    else if (x->size >= size)
      return put(x, out);
    else
      t = x->right;
  }
}

bool grt__holes_end_above(const grt__holes *h, uint64_t addr, grt__hole *out) {
  const grt__hole_node *best = NULL;
  for (uint32_t t = h->root; t;) { /* holes are disjoint: their ends ascend with their starts */
    const grt__hole_node *x = &h->nodes[t];
    if (x->addr + x->size > addr) {
      best = x;
      t = x->left;
    } else {
      t = x->right;
    }
  }
  return best && put(best, out);
}

bool grt__holes_before(const grt__holes *h, uint64_t addr, grt__hole *out) {
  const grt__hole_node *best = NULL;
  for (uint32_t t = h->root; t;) {
    const grt__hole_node *x = &h->nodes[t];
    if (x->addr < addr) {
      best = x;
      t = x->right;
    } else {
      t = x->left;
    }
  }
  return best && put(best, out);
}

uint64_t grt__holes_largest(const grt__holes *h) { return max_of(h, h->root); }
