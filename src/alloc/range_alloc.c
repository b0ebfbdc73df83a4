/* range_alloc.c — exact best-fit offset allocator over [0, capacity).
 *
 * Every block (free or allocated) is a 32-byte node in one pooled array,
 * addressed by a 32-bit index (the block's handle) so the array may grow.
 * Nodes of a range form a doubly linked list in address order (the boundary
 * tags, kept outside the range): merging needs no lookup.
 *
 * Free ranges are indexed by (size, offset) in one of two ways (the kind):
 *   - GRT__INDEX_BINS: an intrusive size-class index private to this file.
 *     Sizes map to classes like bins.c but finer (64 sub-classes per power of
 *     two, so with 256-byte-granular sizes every class below 16 KiB holds one
 *     size). Each class is a doubly linked list through the nodes, sorted by
 *     (size, offset); a two-level bitmap marks non-empty classes. Best fit is
 *     a fused find-and-unlink: the first member of class_of(size) with
 *     size >= request, else the head of the next non-empty class (two ctz).
 *     Erase is an O(1) unlink (no search); insert walks its class's list.
 *     Nothing here allocates, so these steps never fail.
 *   - GRT__INDEX_OTREE: the ordered tree through the block_index ops table
 *     (the baseline), with node index + 1 as the value.
 * Both return the same choice for every call: the smallest free range with
 * size >= the request, ties to the lowest offset.
 *
 * Offset -> node map: a hash table of node indices (open addressing, linear
 * probing, load <= 1/2, Fibonacci hashing; 4-byte slots, the key is read from
 * the node). Callers that free by handle never need it, so it is built on the
 * first grt__range_free (by offset) and maintained from then on.
 *
 * Node state lives in cprev: USED (allocated), POOLED (unused), else free
 * (a class-list predecessor, or NIL for a class head / a tree-kind free node).
 *
 * Invariants (grt__range_check walks them):
 *   - the list from node 0 (offset 0, never removed) tiles [0, capacity);
 *   - no two adjacent nodes are both free;
 *   - a node is in the index iff it is free; the map, if built, holds every node;
 *   - class lists: sorted, every member in class_of(its size), bitmaps agree;
 *   - free_bytes / free_n are the free nodes' total size / count.
 *
 * Failure atomicity: every step that can fail (node pool growth, map insert,
 * tree insert) runs before anything is modified; erases never fail.
 */
#include "alloc/range_alloc.h"

#include <stdlib.h>

#define NIL UINT32_MAX
#define USED (UINT32_MAX - 1)
#define POOLED (UINT32_MAX - 2)
#define MAX_NODES (UINT32_MAX - 3)

#define SUB_LOG2 6u
#define SUB (1u << SUB_LOG2)
#define NCLASS ((64u - SUB_LOG2 + 1u) * SUB) /* sizes < 2*SUB exact, then 64-bit exponents */
#define NWORDS ((NCLASS + 63u) / 64u)

_Static_assert(NWORDS <= 64, "one summary word covers every bitmap word");

typedef struct rnode {
  uint64_t off, size;
  uint32_t prev, next;   /* neighbours in address order, NIL at the ends; next links the pool */
  uint32_t cprev, cnext; /* class list links while free; cprev = USED / POOLED otherwise */
} rnode;

_Static_assert(sizeof(rnode) == 32, "two nodes per cache line");

struct grt__range {
  rnode *nodes;
  uint32_t n_nodes, cap_nodes; /* used prefix of the pool array, its capacity */
  uint32_t pool;               /* unused nodes, linked through next */
  grt__index_kind kind;
  uint64_t capacity, free_bytes, free_n;
  uint32_t *slots;     /* offset map: node index or NIL; NULL until the first free by offset */
  uint32_t slot_shift; /* 64 - log2(number of slots) */
  uint32_t slot_count; /* nodes in the map */
  const grt__index_ops *ops;
  void *index;         /* GRT__INDEX_OTREE: free ranges keyed (size, offset) */
  uint64_t summary;    /* bit w: words[w] != 0 */
  uint64_t words[NWORDS]; /* bit c: class c non-empty */
  uint32_t head[NCLASS];  /* first (smallest) member of each class, or NIL */
};

static inline bool node_free(const rnode *n) { return n->cprev != USED && n->cprev != POOLED; }

/* ---- offset map ---------------------------------------------------------- */

static inline uint32_t home(const grt__range *r, uint64_t off) {
  return (uint32_t)((off * 0x9e3779b97f4a7c15ULL) >> r->slot_shift);
}

static inline uint32_t slot_mask(const grt__range *r) { return (uint32_t)(UINT64_MAX >> r->slot_shift); }

/* Node index starting at off, or NIL (the map exists). */
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

/* Replaces the table by one of 2^bits slots holding the same nodes. */
static bool map_resize(grt__range *r, uint32_t bits) {
  uint32_t *old = r->slots, old_n = r->slots ? slot_mask(r) + 1 : 0;
  uint32_t *s = malloc(((size_t)1 << bits) * sizeof *s);
  if (!s) return false;
  for (size_t j = 0; j < (size_t)1 << bits; j++) s[j] = NIL;
  r->slots = s;
  r->slot_shift = 64 - bits;
  for (uint32_t j = 0; j < old_n; j++)
    if (old[j] != NIL) map_place(r, old[j]);
  free(old);
  return true;
}

/* Adds node i (its offset not yet present); grows at load 1/2. */
static bool map_put(grt__range *r, uint32_t i) {
  if ((r->slot_count + 1) * 2 > slot_mask(r) + 1 && !map_resize(r, 64 - r->slot_shift + 1)) return false;
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

/* Builds the map over every node in address order (first free by offset). */
static bool map_build(grt__range *r) {
  uint32_t n = 0, bits = 6;
  for (uint32_t i = 0; i != NIL; i = r->nodes[i].next) n++;
  while (((size_t)1 << bits) < (size_t)n * 2 + 2) bits++;
  if (!map_resize(r, bits)) return false;
  for (uint32_t i = 0; i != NIL; i = r->nodes[i].next) map_place(r, i);
  r->slot_count = n;
  return true;
}

/* ---- intrusive size classes (GRT__INDEX_BINS) ------------------------------ */

static inline uint32_t class_of(uint64_t size) {
  if (size < 2u * SUB) return (uint32_t)size;
  uint32_t e = 63u - (uint32_t)__builtin_clzll(size);
  /* (size >> (e - SUB_LOG2)) is in [SUB, 2*SUB): the sub-class plus SUB. */
  return ((e - SUB_LOG2) << SUB_LOG2) + (uint32_t)(size >> (e - SUB_LOG2));
}

static inline bool key_less(const rnode *a, uint64_t size, uint64_t off) {
  return a->size < size || (a->size == size && a->off < off);
}

/* Links free node i into its class, keeping the list sorted by (size, offset). */
static inline void cls_insert(grt__range *r, uint32_t i) {
  rnode *nodes = r->nodes, *n = &nodes[i];
  uint32_t c = class_of(n->size), p = NIL, q = r->head[c];
  while (q != NIL && key_less(&nodes[q], n->size, n->off)) {
    p = q;
    q = nodes[q].cnext;
  }
  n->cprev = p;
  n->cnext = q;
  if (q != NIL) nodes[q].cprev = i;
  if (p != NIL) {
    nodes[p].cnext = i;
  } else {
    r->head[c] = i;
    r->words[c >> 6] |= 1ULL << (c & 63);
    r->summary |= 1ULL << (c >> 6);
  }
}

/* Unlinks free node i from its class: O(1), no search. */
static inline void cls_unlink(grt__range *r, uint32_t i) {
  rnode *nodes = r->nodes, *n = &nodes[i];
  uint32_t p = n->cprev, q = n->cnext;
  if (q != NIL) nodes[q].cprev = p;
  if (p != NIL) {
    nodes[p].cnext = q;
  } else {
    uint32_t c = class_of(n->size);
    r->head[c] = q;
    if (q == NIL && !(r->words[c >> 6] &= ~(1ULL << (c & 63)))) r->summary &= ~(1ULL << (c >> 6));
  }
}

/* The smallest free node with size >= `size`, lowest offset first; NIL if none. */
static inline uint32_t cls_find(const grt__range *r, uint64_t size) {
  uint32_t c = class_of(size), w = c >> 6;
  uint64_t bits = r->words[w] & (~0ULL << (c & 63));
  if (bits & (1ULL << (c & 63))) {
    for (uint32_t i = r->head[c]; i != NIL; i = r->nodes[i].cnext)
      if (r->nodes[i].size >= size) return i;
    bits &= bits - 1; /* every member of class c is too small */
  }
  if (!bits) {
    uint64_t s = w + 1 < 64 ? r->summary & (~0ULL << (w + 1)) : 0;
    if (!s) return NIL;
    w = (uint32_t)__builtin_ctzll(s);
    bits = r->words[w];
  }
  return r->head[(w << 6) | (uint32_t)__builtin_ctzll(bits)];
}

/* The free node with the largest (size, offset), or NIL. */
static uint32_t cls_last(const grt__range *r) {
  if (!r->summary) return NIL;
  uint32_t w = 63u - (uint32_t)__builtin_clzll(r->summary);
  uint32_t i = r->head[(w << 6) | (63u - (uint32_t)__builtin_clzll(r->words[w]))];
  while (r->nodes[i].cnext != NIL) i = r->nodes[i].cnext;
  return i;
}

/* ---- tree index (GRT__INDEX_OTREE) ---------------------------------------- */

static inline void *tag(uint32_t i) { return (void *)(uintptr_t)(i + 1); }
static inline uint32_t untag(void *v) { return (uint32_t)((uintptr_t)v - 1); }

static uint32_t tree_find(const grt__range *r, uint64_t size) {
  grt__bin_entry e;
  return r->ops->lower_bound(r->index, size, 0, &e) ? untag(e.value) : NIL;
}

/* ---- nodes --------------------------------------------------------------- */

/* An unused node index, or NIL when host memory runs out. */
static uint32_t node_get(grt__range *r) {
  if (r->pool != NIL) {
    uint32_t i = r->pool;
    r->pool = r->nodes[i].next;
    return i;
  }
  if (r->n_nodes == r->cap_nodes) {
    if (r->cap_nodes > MAX_NODES / 2) return NIL;
    uint32_t cap = r->cap_nodes ? r->cap_nodes * 2 : 256;
    rnode *n = realloc(r->nodes, (size_t)cap * sizeof *n);
    if (!n) return NIL;
    r->nodes = n;
    r->cap_nodes = cap;
  }
  return r->n_nodes++;
}

static void node_put(grt__range *r, uint32_t i) {
  r->nodes[i].next = r->pool;
  r->nodes[i].cprev = POOLED;
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
  for (uint32_t c = 0; c < NCLASS; c++) r->head[c] = NIL;
  grt_status st = GRT_OK;
  if (kind == GRT__INDEX_OTREE && (st = ops->create(&r->index))) goto fail;
  st = GRT_ERR_NOMEM;
  uint32_t i = node_get(r);
  if (i == NIL) goto fail;
  r->nodes[i] = (rnode){0, capacity, NIL, NIL, NIL, NIL};
  if (kind == GRT__INDEX_OTREE) {
    if ((st = ops->insert(r->index, capacity, 0, tag(i)))) goto fail;
  } else {
    cls_insert(r, i);
  }
  r->free_bytes = capacity;
  r->free_n = 1;
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

/* ---- alloc / free -------------------------------------------------------- */

grt_status grt__range_alloc_handle(grt__range *r, uint64_t size, uint64_t *offset, uint32_t *handle) {
  if (!offset) return GRT_ERR_INVALID_ARG;
  if (size == 0 || size > r->capacity) return GRT_ERR_SIZE;
  bool classes = r->kind == GRT__INDEX_BINS;
  uint32_t i = classes ? cls_find(r, size) : tree_find(r, size);
  if (i == NIL) return GRT_ERR_OOM;
  uint64_t old_size = r->nodes[i].size;
  if (old_size > size) { /* split: the tail stays free as a new node */
    uint32_t t = node_get(r);
    if (t == NIL) return GRT_ERR_NOMEM;
    rnode *n = &r->nodes[i]; /* after node_get: the pool may have moved */
    r->nodes[t] = (rnode){n->off + size, old_size - size, i, n->next, NIL, NIL}; /* not linked yet */
    if (r->slots && !map_put(r, t)) {
      node_put(r, t);
      return GRT_ERR_NOMEM;
    }
    if (!classes) {
      grt_status st = r->ops->insert(r->index, old_size - size, n->off + size, tag(t));
      if (st) {
        if (r->slots) map_del(r, n->off + size);
        node_put(r, t);
        return st;
      }
      r->ops->erase(r->index, old_size, n->off);
    } else {
      cls_unlink(r, i); /* while n->size still names its class */
    }
    if (n->next != NIL) r->nodes[n->next].prev = t;
    n->next = t;
    n->size = size;
    if (classes) cls_insert(r, t);
    r->free_n++;
  } else if (classes) {
    cls_unlink(r, i);
  } else {
    r->ops->erase(r->index, old_size, r->nodes[i].off);
  }
  rnode *n = &r->nodes[i];
  n->cprev = USED;
  r->free_bytes -= size;
  r->free_n--;
  *offset = n->off;
  if (handle) *handle = i;
  return GRT_OK;
}

grt_status grt__range_alloc(grt__range *r, uint64_t size, uint64_t *offset) {
  return grt__range_alloc_handle(r, size, offset, NULL);
}

/* Unlinks node j (the right-hand one of a merge) and returns it to the pool. */
static void absorb(grt__range *r, uint32_t keep, uint32_t j) {
  rnode *k = &r->nodes[keep], *n = &r->nodes[j];
  k->size += n->size;
  k->next = n->next;
  if (n->next != NIL) r->nodes[n->next].prev = keep;
  if (r->slots) map_del(r, n->off);
  node_put(r, j);
}

/* Frees allocated node i, merging it with free neighbours. */
static grt_status free_node(grt__range *r, uint32_t i) {
  rnode *nodes = r->nodes, *n = &nodes[i];
  uint32_t p = n->prev, q = n->next;
  bool merge_prev = p != NIL && node_free(&nodes[p]);
  bool merge_next = q != NIL && node_free(&nodes[q]);
  uint32_t head = merge_prev ? p : i;
  if (r->kind == GRT__INDEX_BINS) {
    if (merge_prev) cls_unlink(r, p);
    if (merge_next) cls_unlink(r, q);
  } else {
    uint64_t size = n->size + (merge_prev ? nodes[p].size : 0) + (merge_next ? nodes[q].size : 0);
    /* The merged range is a new key (it differs in size or offset from both
     * neighbours), so inserting it first is safe and is the only step that can fail. */
    grt_status st = r->ops->insert(r->index, size, nodes[head].off, tag(head));
    if (st) return st;
    if (merge_prev) r->ops->erase(r->index, nodes[p].size, nodes[p].off);
    if (merge_next) r->ops->erase(r->index, nodes[q].size, nodes[q].off);
  }
  r->free_bytes += n->size;
  r->free_n = r->free_n + 1 - (uint64_t)merge_prev - (uint64_t)merge_next;
  if (merge_next) absorb(r, i, q);
  if (merge_prev) absorb(r, p, i);
  if (r->kind == GRT__INDEX_BINS) {
    cls_insert(r, head);
  } else {
    nodes[head].cprev = NIL;
  }
  return GRT_OK;
}

grt_status grt__range_free_handle(grt__range *r, uint32_t handle) {
  if (handle >= r->n_nodes || r->nodes[handle].cprev == POOLED) return GRT_ERR_UNKNOWN_POINTER;
  if (r->nodes[handle].cprev != USED) return GRT_ERR_DOUBLE_FREE;
  return free_node(r, handle);
}

grt_status grt__range_free(grt__range *r, uint64_t offset) {
  if (!r->slots && !map_build(r)) return GRT_ERR_NOMEM;
  uint32_t i = map_get(r, offset);
  if (i == NIL) return GRT_ERR_UNKNOWN_POINTER;
  if (r->nodes[i].cprev != USED) return GRT_ERR_DOUBLE_FREE;
  return free_node(r, i);
}

/* ---- queries and the checker --------------------------------------------- */

uint64_t grt__range_largest_free(const grt__range *r) {
  if (r->kind == GRT__INDEX_BINS) {
    uint32_t i = cls_last(r);
    return i == NIL ? 0 : r->nodes[i].size;
  }
  grt__bin_entry e;
  return r->ops->last(r->index, &e) ? e.size : 0;
}

uint64_t grt__range_free_bytes(const grt__range *r) { return r->free_bytes; }

uint64_t grt__range_free_count(const grt__range *r) { return r->free_n; }

/* Class lists and bitmaps: every list sorted, members in their class, heads
 * marked in the bitmaps, the members counted. GRT_OK or GRT_ERR_INTERNAL. */
static grt_status check_classes(const grt__range *r, uint64_t *members) {
  uint64_t summary = 0;
  for (uint32_t c = 0; c < NCLASS; c++) {
    bool bit = (r->words[c >> 6] >> (c & 63)) & 1;
    if (bit != (r->head[c] != NIL)) return GRT_ERR_INTERNAL;
    if (r->words[c >> 6]) summary |= 1ULL << (c >> 6);
    uint32_t prev = NIL;
    for (uint32_t i = r->head[c]; i != NIL; prev = i, i = r->nodes[i].cnext) {
      const rnode *n = &r->nodes[i];
      if (i >= r->n_nodes || n->cprev != prev || class_of(n->size) != c) return GRT_ERR_INTERNAL;
      if (prev != NIL && !key_less(&r->nodes[prev], n->size, n->off)) return GRT_ERR_INTERNAL;
      if (++*members > r->n_nodes) return GRT_ERR_INTERNAL; /* a cycle */
    }
  }
  return summary == r->summary ? GRT_OK : GRT_ERR_INTERNAL;
}

grt_status grt__range_check(const grt__range *r) {
  uint64_t off = 0, free_sum = 0, free_n = 0, nodes = 0;
  uint32_t prev = NIL;
  bool prev_free = false;
  for (uint32_t i = 0; i != NIL; prev = i, i = r->nodes[i].next) {
    const rnode *n = &r->nodes[i];
    bool is_free = node_free(n);
    if (n->cprev == POOLED || n->off != off || n->size == 0 || n->prev != prev) return GRT_ERR_INTERNAL;
    if (is_free && prev_free) return GRT_ERR_INTERNAL;
    if (r->slots && map_get(r, n->off) != i) return GRT_ERR_INTERNAL;
    if (r->kind == GRT__INDEX_OTREE) {
      grt__bin_entry e;
      bool in_index = r->ops->lower_bound(r->index, n->size, n->off, &e) && e.size == n->size && e.addr == n->off;
      if (in_index != is_free || (in_index && e.value != tag(i))) return GRT_ERR_INTERNAL;
    }
    if (is_free) {
      free_sum += n->size;
      free_n++;
    }
    prev_free = is_free;
    off += n->size;
    if (++nodes > r->n_nodes) return GRT_ERR_INTERNAL; /* a cycle */
  }
  if (off != r->capacity || free_sum != r->free_bytes || free_n != r->free_n) return GRT_ERR_INTERNAL;
  if (r->slots && nodes != r->slot_count) return GRT_ERR_INTERNAL;
  if (r->kind == GRT__INDEX_OTREE) return free_n == r->ops->count(r->index) ? GRT_OK : GRT_ERR_INTERNAL;
  uint64_t members = 0;
  grt_status st = check_classes(r, &members);
  /* Every list member is free (cprev is a link, not a state) and every free node is listed. */
  return st ? st : members == free_n ? GRT_OK : GRT_ERR_INTERNAL;
}
