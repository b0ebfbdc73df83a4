/* range_alloc.c — exact best-fit offset allocator over [0, capacity).
 *
 * Every block (free or allocated) is a node in one pooled array; nodes are
 * addressed by index so the array may grow. Nodes of a range form a doubly
 * linked list in address order (the boundary tags, kept outside the range);
 * a hash table of node indices (open addressing, linear probing, load <= 1/2,
 * Fibonacci hashing of the offset) finds a node by its start offset: slots are
 * 4 bytes and the key is read from the node itself, which the caller needs
 * anyway. Free nodes are also in the index under (size, offset) with their
 * node index + 1 as the value.
 *
 * Invariants (grt__range_check walks them):
 *   - the list from node 0 (offset 0, never removed) tiles [0, capacity);
 *   - no two adjacent nodes are both free;
 *   - a node is in the index iff it is free; the map holds every node;
 *   - free_bytes is the sum of the free nodes' sizes.
 *
 * Failure atomicity: every step that can fail (node pool growth, map insert,
 * index insert) runs before anything is modified; erases never fail.
 */
#include "alloc/range_alloc.h"

#include <stdlib.h>


#define NIL UINT32_MAX

typedef struct rnode {
  uint64_t off, size;
  uint32_t prev, next; /* neighbours in address order, NIL at the ends; next links the pool when unused */
  uint32_t is_free;
} rnode;

struct grt__range {
  const grt__index_ops *ops;
  grt__index_kind kind;
  void *index;        /* free ranges keyed (size, offset) */
  uint32_t *slots;    /* hash table: node index or NIL, every node by its offset */
  uint32_t slot_shift; /* 64 - log2(number of slots) */
  uint32_t slot_count; /* nodes in the table */
  rnode *nodes;
  uint32_t n_nodes, cap_nodes; /* used prefix of the pool array, its capacity */
  uint32_t pool;               /* unused nodes, linked through next */
  uint64_t capacity, free_bytes;
};

static inline uint32_t home(const grt__range *r, uint64_t off) {
  return (uint32_t)((off * 0x9e3779b97f4a7c15ULL) >> r->slot_shift);
}

static inline uint32_t slot_mask(const grt__range *r) { return (uint32_t)(UINT64_MAX >> r->slot_shift); }

/* Node index starting at off, or NIL. */
static inline uint32_t map_get(const grt__range *r, uint64_t off) {
  uint32_t m = slot_mask(r);
  for (uint32_t j = home(r, off);; j = (j + 1) & m) {
    uint32_t i = r->slots[j];
    if (i == NIL || r->nodes[i].off == off) return i;
  }
}

static void map_place(grt__range *r, uint32_t i) {
  uint32_t m = slot_mask(r), j = home(r, r->nodes[i].off);
  while (r->slots[j] != NIL) j = (j + 1) & m;
  r->slots[j] = i;
}

/* Adds node i (its offset not yet present); grows at load 1/2. */
static bool map_put(grt__range *r, uint32_t i) {
  uint32_t m = slot_mask(r);
  if ((r->slot_count + 1) * 2 > m + 1) {
    uint32_t *old = r->slots, old_n = m + 1;
    uint32_t *s = malloc((size_t)old_n * 2 * sizeof *s);
    if (!s) return false;
    for (uint32_t j = 0; j < old_n * 2; j++) s[j] = NIL;
    r->slots = s;
    r->slot_shift--;
    for (uint32_t j = 0; j < old_n; j++)
      if (old[j] != NIL) map_place(r, old[j]);
    free(old);
  }
  map_place(r, i);
  r->slot_count++;
  return true;
}

/* Removes the node starting at off (present); backward-shift keeps probes short. */
static void map_del(grt__range *r, uint64_t off) {
  uint32_t m = slot_mask(r), hole = home(r, off);
  while (r->nodes[r->slots[hole]].off != off) hole = (hole + 1) & m;
  for (uint32_t k = (hole + 1) & m; r->slots[k] != NIL; k = (k + 1) & m) {
    uint32_t h = home(r, r->nodes[r->slots[k]].off);
    /* Move k into the hole unless its home lies cyclically in (hole, k]. */
    if (hole <= k ? (h <= hole || h > k) : (h <= hole && h > k)) {
      r->slots[hole] = r->slots[k];
      hole = k;
    }
  }
  r->slots[hole] = NIL;
  r->slot_count--;
}

static inline void *tag(uint32_t i) { return (void *)(uintptr_t)(i + 1); }
static inline uint32_t untag(void *v) { return (uint32_t)((uintptr_t)v - 1); }

/* Index calls: direct for the size-class index (the hot configuration), through
 * the ops table otherwise. */
static inline grt_status index_insert(grt__range *r, uint64_t size, uint64_t addr, void *v) {
  return r->kind == GRT__INDEX_BINS ? grt__bins_insert(r->index, size, addr, v) : r->ops->insert(r->index, size, addr, v);
}

static inline void index_erase(grt__range *r, uint64_t size, uint64_t addr) {
  if (r->kind == GRT__INDEX_BINS)
    grt__bins_erase(r->index, size, addr);
  else
    r->ops->erase(r->index, size, addr);
}

static inline bool index_lower_bound(const grt__range *r, uint64_t size, grt__bin_entry *e) {
  return r->kind == GRT__INDEX_BINS ? grt__bins_lower_bound(r->index, size, 0, e)
                                    : r->ops->lower_bound(r->index, size, 0, e);
}

/* An unused node index, or NIL when host memory runs out. */
static uint32_t node_get(grt__range *r) {
  if (r->pool != NIL) {
    uint32_t i = r->pool;
    r->pool = r->nodes[i].next;
    return i;
  }
  if (r->n_nodes == r->cap_nodes) {
    uint32_t cap = r->cap_nodes ? r->cap_nodes * 2 : 64;
    rnode *n = realloc(r->nodes, (size_t)cap * sizeof *n);
    if (!n) return NIL;
    r->nodes = n;
    r->cap_nodes = cap;
  }
  return r->n_nodes++;
}

static void node_put(grt__range *r, uint32_t i) {
  r->nodes[i].next = r->pool;
  r->pool = i;
}

grt_status grt__range_create(uint64_t capacity, grt__index_kind kind, grt__range **out) {
  const grt__index_ops *ops = grt__index_ops_get(kind);
  if (!ops || capacity == 0 || !out) return GRT_ERR_INVALID_ARG;
  grt__range *r = calloc(1, sizeof *r);
  if (!r) return GRT_ERR_NOMEM;
  r->ops = ops;
  r->kind = kind;
  r->pool = NIL;
  r->capacity = capacity;
  r->slot_shift = 64 - 6;
  grt_status st = ops->create(&r->index);
  if (st) goto fail;
  st = GRT_ERR_NOMEM;
  if (!(r->slots = malloc(64 * sizeof *r->slots))) goto fail;
  for (uint32_t j = 0; j < 64; j++) r->slots[j] = NIL;
  uint32_t i = node_get(r);
  if (i == NIL) goto fail;
  r->nodes[i] = (rnode){0, capacity, NIL, NIL, 1};
  if (!map_put(r, i)) goto fail;
  st = ops->insert(r->index, capacity, 0, tag(i));
  if (st) goto fail;
  r->free_bytes = capacity;
  *out = r;
  return GRT_OK;
fail:
  grt__range_destroy(r);
  return st;
}

void grt__range_destroy(grt__range *r) {
  if (!r) return;
  if (r->index) r->ops->destroy(r->index);
  free(r->slots);
  free(r->nodes);
  free(r);
}

grt_status grt__range_alloc(grt__range *r, uint64_t size, uint64_t *offset) {
  if (!offset) return GRT_ERR_INVALID_ARG;
  if (size == 0 || size > r->capacity) return GRT_ERR_SIZE;
  grt__bin_entry e;
  if (!index_lower_bound(r, size, &e)) return GRT_ERR_OOM;
  uint32_t i = untag(e.value);
  if (e.size > size) { /* split: the tail stays free as a new node */
    uint32_t t = node_get(r);
    if (t == NIL) return GRT_ERR_NOMEM;
    rnode *n = &r->nodes[i]; /* after node_get: the pool may have moved */
    uint64_t toff = n->off + size, tsize = n->size - size;
    r->nodes[t] = (rnode){toff, tsize, i, n->next, 1}; /* not linked yet */
    if (!map_put(r, t)) {
      node_put(r, t);
      return GRT_ERR_NOMEM;
    }
    grt_status st = index_insert(r, tsize, toff, tag(t));
    if (st) {
      map_del(r, toff);
      node_put(r, t);
      return st;
    }
    if (n->next != NIL) r->nodes[n->next].prev = t;
    n->next = t;
    n->size = size;
  }
  index_erase(r, e.size, e.addr);
  r->nodes[i].is_free = 0;
  r->free_bytes -= size;
  *offset = e.addr;
  return GRT_OK;
}

/* Unlinks node j (the right-hand one of a merge) and returns it to the pool. */
static void absorb(grt__range *r, uint32_t keep, uint32_t j) {
  rnode *k = &r->nodes[keep], *n = &r->nodes[j];
  k->size += n->size;
  k->next = n->next;
  if (n->next != NIL) r->nodes[n->next].prev = keep;
  map_del(r, n->off);
  node_put(r, j);
}

grt_status grt__range_free(grt__range *r, uint64_t offset) {
  uint32_t i = map_get(r, offset);
  if (i == NIL) return GRT_ERR_UNKNOWN_POINTER;
  rnode *n = &r->nodes[i];
  if (n->is_free) return GRT_ERR_DOUBLE_FREE;
  uint32_t p = n->prev, q = n->next;
  bool merge_prev = p != NIL && r->nodes[p].is_free;
  bool merge_next = q != NIL && r->nodes[q].is_free;
  uint32_t head = merge_prev ? p : i;
  uint64_t off = r->nodes[head].off;
  uint64_t size = n->size + (merge_prev ? r->nodes[p].size : 0) + (merge_next ? r->nodes[q].size : 0);
  /* The merged range is a new key (it differs in size or offset from both
   * neighbours), so inserting it first is safe and is the only step that can fail. */
  grt_status st = index_insert(r, size, off, tag(head));
  if (st) return st;
  r->free_bytes += n->size;
  if (merge_prev) index_erase(r, r->nodes[p].size, r->nodes[p].off);
  if (merge_next) index_erase(r, r->nodes[q].size, r->nodes[q].off);
  if (merge_next) absorb(r, i, q);
  if (merge_prev) absorb(r, p, i);
  r->nodes[head].is_free = 1;
  return GRT_OK;
}

uint64_t grt__range_largest_free(const grt__range *r) {
  grt__bin_entry e;
  return r->ops->last(r->index, &e) ? e.size : 0;
}

uint64_t grt__range_free_bytes(const grt__range *r) { return r->free_bytes; }

uint64_t grt__range_free_count(const grt__range *r) { return r->ops->count(r->index); }

grt_status grt__range_check(const grt__range *r) {
  uint64_t off = 0, free_sum = 0, free_n = 0, nodes = 0;
  uint32_t prev = NIL;
  bool prev_free = false;
  for (uint32_t i = 0; i != NIL; prev = i, i = r->nodes[i].next) {
    const rnode *n = &r->nodes[i];
    if (n->off != off || n->size == 0 || n->prev != prev) return GRT_ERR_INTERNAL;
    if (n->is_free && prev_free) return GRT_ERR_INTERNAL;
    if (map_get(r, n->off) != i) return GRT_ERR_INTERNAL;
    grt__bin_entry e;
    bool in_index = r->ops->lower_bound(r->index, n->size, n->off, &e) && e.size == n->size &&
                    e.addr == n->off;
    if (in_index != (bool)n->is_free || (in_index && e.value != tag(i))) return GRT_ERR_INTERNAL;
    if (n->is_free) {
      free_sum += n->size;
      free_n++;
    }
    prev_free = n->is_free;
    off += n->size;
    if (++nodes > r->n_nodes) return GRT_ERR_INTERNAL; /* a cycle */
  }
  if (off != r->capacity || free_sum != r->free_bytes) return GRT_ERR_INTERNAL;
  if (free_n != r->ops->count(r->index) || nodes != r->slot_count) return GRT_ERR_INTERNAL;
  return GRT_OK;
}
