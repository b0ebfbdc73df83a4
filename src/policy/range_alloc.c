/* range_alloc.c — exact best-fit offset allocator over [0, capacity).
 *
 * Every block (free or allocated) is a node in one pooled array, addressed by
 * a 31-bit index: the block's handle. Nodes of a range form a doubly linked
 * list in address order (the boundary tags, kept outside the range), so a
 * merge needs no lookup. Node 0 is a dummy (key (max, max), never a block).
 *
 * Free ranges are indexed by (size, offset) in one of two ways (the kind):
 *   - GRT__INDEX_BINS: an intrusive size-class index private to this file.
 *     Sizes map to classes like bins.c but finer (64 sub-classes per power of
 *     two, so with 256-byte-granular sizes every class below 16 KiB holds one
 *     size); class_of is monotonic, so the global (size, offset) order is
 *     "class ascending, then inside the class". Each class is an unsorted
 *     doubly linked list through a compact link array: links[i] belongs to
 *     node i, links[~c] (negative indices) is class c's sentinel, holding the
 *     first member and the class minimum; lists end at the dummy's link, which
 *     absorbs writes. Insert (at the front) and unlink are O(1) with no
 *     data-dependent branch: the minimum is updated by one 128-bit comparison
 *     and a select; when the minimum itself leaves, it becomes stale (DIRTY)
 *     and is rescanned only when a find needs that class (so classes no
 *     request reaches, such as 256-byte slivers, are never scanned). A
 *     two-level bitmap marks non-empty classes. Best fit is a fused
 *     find-and-unlink: in class_of(size), the class minimum if it fits, else
 *     the least member that fits (a scan of that one class); otherwise the
 *     minimum of the next non-empty class (two ctz). Cost: O(1) plus a scan
 *     of one class when its minimum is stale or too small. A long class
 *     (thousands of equal-size ranges: a model freeing a batch of identical
 *     tensors) would make every such scan long, so a scan that walks more
 *     than BIG_SCAN members moves the class into an ordered tree of its own
 *     (ordered_tree.c; the class minimum reads IN_TREE, members are marked
 *     TREE_FREE), where a find is O(log n); it returns to a list below
 *     SMALL_TREE members. Lists need no memory; a tree that cannot grow turns
 *     back into a list (exact, slower), so class steps never fail.
 *   - GRT__INDEX_OTREE: the ordered tree (grt__otree_*)
 *     (the baseline), with node index + 1 as the value.
 * Both return the same choice for every call: the smallest free range with
 * size >= the request, ties to the lowest offset.
 *
 * A node's state lives in its link's prev: USED (allocated), POOLED (unused),
 * TREE_FREE (free, tree kind), or a list link (free, class kind); a free
 * checks its neighbours' states in the compact link array.
 *
 * Offset -> node map: a hash table of node indices (open addressing, linear
 * probing, load <= 1/2, Fibonacci hashing; 4-byte slots, the key is read from
 * the node). Callers that free by handle never need it, so it is built on the
 * first grt__range_free (by offset) and maintained from then on.
 *
 * Invariants (grt__range_check walks them):
 *   - the list from node FIRST (offset 0, never removed) tiles [0, capacity);
 *   - no two adjacent nodes are both free;
 *   - a node is in the index iff it is free; the map, if built, holds every node;
 *   - class lists: well linked, every member free and in class_of(its size),
 *     a clean class minimum exact (DUMMY when empty), the bitmaps mark exactly
 *     the non-empty classes; a tree class has an empty list, at least
 *     SMALL_TREE members, each a TREE_FREE node whose key is its entry's;
 *   - free_bytes / free_n are the free nodes' total size / count.
 *
 * Failure atomicity: every step that can fail (node pool growth, map insert,
 * tree insert of the GRT__INDEX_OTREE kind) runs before anything is
 * modified; erases never fail; a class's tree is best effort (the class is a
 * list, still exact, whenever its tree cannot be built or grown).
 */
#include "policy/range_alloc.h"

#include <assert.h>
#include <stdlib.h>

#include "alloc/ordered_tree.h"

#if defined(__GNUC__)
#define GRT__ALWAYS_INLINE __attribute__((always_inline)) /* hot path: no call, no spills */
#define GRT__UNLIKELY(x) __builtin_expect(!!(x), 0)
#define GRT__COLD __attribute__((cold, noinline)) /* off the hot path: no spills there for its sake */
#else
#define GRT__ALWAYS_INLINE
#define GRT__UNLIKELY(x) (x)
#define GRT__COLD
#endif

#define NIL UINT32_MAX           /* address-order links: no neighbour */
#define USED INT32_MAX           /* link prev of an allocated node */
#define POOLED (INT32_MAX - 1)   /* link prev of an unused node */
#define TREE_FREE (INT32_MAX - 2) /* link prev of a free node of the tree kind */
#define MAX_NODES ((uint32_t)INT32_MAX - 3)
#define DUMMY 0u /* node 0: key (max, max), in no list: the minimum of an empty class */
#define FIRST 1u /* node 1: the block at offset 0, never removed */
#define DIRTY UINT32_MAX /* cmin of a class whose minimum left: rescan on demand */
#define IN_TREE (UINT32_MAX - 1) /* cmin of a class kept in its tree (a long class) */
#define BIG_SCAN 64u   /* a scan walking more members than this moves its class into a tree */
#define SMALL_TREE 16u /* a tree class with fewer members goes back to a list */

#define SUB_LOG2 6u
#define SUB (1u << SUB_LOG2)
#define NCLASS ((64u - SUB_LOG2 + 1u) * SUB) /* sizes < 2*SUB exact, then 64-bit exponents */
#define NWORDS ((NCLASS + 63u) / 64u)
#define SENT(c) (~(int32_t)(c)) /* link index of class c's sentinel */
#define END ((int32_t)DUMMY)    /* a class list's terminator: the dummy's link absorbs writes */
/* Class c's least member, DUMMY (empty) or DIRTY (stale), kept in the prev
 * field of its sentinel (which no list reads), so head and minimum share one entry. */
#define CMIN(r, c) ((r)->links[SENT(c)].prev)

_Static_assert(NWORDS <= 64, "one summary word covers every bitmap word");

typedef struct rnode {
  uint64_t off, size;
  uint32_t prev, next; /* neighbours in address order, NIL at the ends; next links the pool */
  uint32_t cls;        /* a free node of the class kind: its class (set when it joins it) */
  uint32_t unused;     /* pads the node to 32 bytes: two per cache line, none straddling two */
} rnode;

_Static_assert(sizeof(rnode) == 32, "rnode is 32 bytes");

typedef struct rlink {
  int32_t next, prev; /* class list links (a sentinel's prev is CMIN); prev is the state when not listed */
} rlink;

struct grt__range {
  rnode *nodes;
  rlink *links;                /* links[i]: node i; links[~c]: class c's sentinel */
  rlink *link_base;            /* the allocation: NCLASS sentinels, then cap_nodes node links */
  uint32_t n_nodes, cap_nodes; /* used prefix of the pool arrays, their capacity */
  uint32_t pool;               /* unused nodes, linked through next */
  grt__index_kind kind;
  uint64_t capacity, free_bytes, free_n;
  uint32_t *slots;     /* offset map: node index or NIL; NULL until the first free by offset */
  uint32_t slot_shift; /* 64 - log2(number of slots) */
  uint32_t slot_count; /* nodes in the map */
  grt__otree *index;   /* GRT__INDEX_OTREE: free ranges keyed (size, offset) */
  grt__otree **trees;     /* [NCLASS] long classes' trees (NULL until the first) */
  uint32_t tree_classes;  /* classes in tree mode now; while 0, alloc and free run without tree checks */
  uint64_t summary;    /* bit w: words[w] != 0 */
  uint64_t words[NWORDS]; /* bit c: class c non-empty */
};

static inline bool node_free(const grt__range *r, uint32_t i) { return r->links[i].prev < POOLED; }

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
  for (uint32_t i = FIRST; i != NIL; i = r->nodes[i].next) n++;
  while (((size_t)1 << bits) < (size_t)n * 2 + 2) bits++;
  if (!map_resize(r, bits)) return false;
  for (uint32_t i = FIRST; i != NIL; i = r->nodes[i].next) map_place(r, i);
  r->slot_count = n;
  return true;
}

/* Node index <-> tree value (never NULL: a tree entry's value is node + 1). */
static inline void *tag(uint32_t i) { return (void *)(uintptr_t)(i + 1); }
static inline uint32_t untag(void *v) { return (uint32_t)((uintptr_t)v - 1); }

/* ---- intrusive size classes (GRT__INDEX_BINS) ------------------------------ */

static inline uint32_t class_of(uint64_t size) {
  if (size < 2u * SUB) return (uint32_t)size;
  uint32_t e = 63u - (uint32_t)__builtin_clzll(size);
  /* (size >> (e - SUB_LOG2)) is in [SUB, 2*SUB): the sub-class plus SUB. */
  return ((e - SUB_LOG2) << SUB_LOG2) + (uint32_t)(size >> (e - SUB_LOG2));
}

/* One 128-bit comparison (cmp + sbb), no branch: callers select with it, and
 * a branch here would mispredict about half the time. */
__extension__ typedef unsigned __int128 key128;

static inline bool key_less(const rnode *a, uint64_t size, uint64_t off) {
  return ((key128)a->size << 64 | a->off) < ((key128)size << 64 | off);
}

/* Links node i between p and q (neighbours in a class list). */
static inline void link_between(rlink *L, int32_t p, int32_t i, int32_t q) {
  L[i] = (rlink){q, p};
  L[p].next = i;
  L[q].prev = i;
}

/* The first of nodes a, b in (size, offset) order, selected without a branch. */
static inline uint32_t min_node(const rnode *N, uint32_t a, uint32_t b) {
  uint32_t take_b = 0u - (uint32_t)key_less(&N[b], N[a].size, N[a].off);
  return (b & take_b) | (a & ~take_b);
}

/* The least member of class c by a scan of its list (DUMMY when empty); the
 * members walked in *len. */
static uint32_t cls_scan_min(const grt__range *r, uint32_t c, uint32_t *len) {
  const rlink *L = r->links;
  int32_t s = SENT(c);
  uint32_t m = DUMMY, n = 0;
  for (int32_t i = L[s].next; i != END; i = L[i].next, n++) m = min_node(r->nodes, m, (uint32_t)i);
  *len = n;
  return m;
}

static inline bool cls_in_tree(const grt__range *r, uint32_t c) { return (uint32_t)CMIN(r, c) == IN_TREE; }

static inline void mark(grt__range *r, uint32_t c) {
  r->words[c >> 6] |= 1ULL << (c & 63); /* no branch: it may already be set */
  r->summary |= 1ULL << (c >> 6);
}

/* ---- long classes: a tree per class ---------------------------------------- */

static inline void cls_insert(grt__range *r, uint32_t i, uint32_t c, bool trees);

/* Moves class c's list (len members, found long by a scan) into its tree.
 * Best effort: without memory the class stays a list, still exact. */
GRT__COLD static void to_tree(grt__range *r, uint32_t c, uint32_t len) {
  if (!r->trees && !(r->trees = calloc(NCLASS, sizeof *r->trees))) return;
  if (!r->trees[c] && grt__otree_create(&r->trees[c]) != GRT_OK) return;
  if (grt__otree_reserve(r->trees[c], len) != GRT_OK) return;
  rlink *L = r->links;
  for (int32_t i = L[SENT(c)].next; i != END;) {
    int32_t next = L[i].next;
    grt_status st = grt__otree_insert(r->trees[c], r->nodes[i].size, r->nodes[i].off, tag((uint32_t)i));
    assert(st == GRT_OK); /* reserved, and list keys are distinct */
    (void)st;
    L[i].prev = TREE_FREE;
    i = next;
  }
  L[SENT(c)] = (rlink){END, (int32_t)IN_TREE}; /* the class bit stays set */
  r->tree_classes++;
}

/* Moves a tree class that fell below SMALL_TREE back into its list (lists
 * need no memory: this never fails); the tree keeps its nodes pooled. */
GRT__COLD static void to_list(grt__range *r, uint32_t c) {
  grt__otree *t = r->trees[c];
  r->links[SENT(c)] = (rlink){END, (int32_t)DUMMY};
  r->tree_classes--;
  grt__bin_entry e;
  while (grt__otree_first(t, &e)) {
    grt__otree_erase(t, e.size, e.addr);
    cls_insert(r, untag(e.value), c, false); /* the class is a list again */
  }
}

/* Adds free node i to tree class c. When the tree cannot grow (no memory),
 * the class goes back to a list and i joins it: slower until a later scan
 * moves it into a tree again, but exact, and an insert never fails. */
GRT__COLD static void tree_insert(grt__range *r, uint32_t i, uint32_t c) {
  if (grt__otree_insert(r->trees[c], r->nodes[i].size, r->nodes[i].off, tag(i)) == GRT_OK) {
    r->links[i].prev = TREE_FREE;
    r->nodes[i].cls = c;
    mark(r, c);
    return;
  }
  to_list(r, c);
  cls_insert(r, i, c, false);
}

GRT__COLD static void tree_erase(grt__range *r, uint32_t i, uint32_t c) {
  bool found = grt__otree_erase(r->trees[c], r->nodes[i].size, r->nodes[i].off);
  assert(found);
  (void)found;
  if (grt__otree_count(r->trees[c]) >= SMALL_TREE) return;
  /* SMALL_TREE - 1 members left (a tree starts above BIG_SCAN and leaves at
   * SMALL_TREE): the class stays non-empty, its bit stays set. */
  to_list(r, c);
  assert(r->links[SENT(c)].next != END);
}

/* ---- class operations ------------------------------------------------------ */

/* `trees` below: whether some class may be a tree (tree_classes != 0).
 * Callers pass a constant, so that while no class is long (the common case)
 * alloc and free compile to code without the tree tests. */

/* Adds free node i to class c (its class): a tree class's tree, or the
 * front of the list. A clean list minimum is updated by one comparison (an
 * empty class's is DUMMY, above every node); a stale one stays stale. No
 * branch on data. */
static inline void cls_insert(grt__range *r, uint32_t i, uint32_t c, bool trees) {
  rlink *L = r->links;
  int32_t s = SENT(c);
  uint32_t m = (uint32_t)CMIN(r, c);
  if (trees && m == IN_TREE) {
    tree_insert(r, i, c);
    return;
  }
  link_between(L, s, (int32_t)i, L[s].next);
  r->nodes[i].cls = c; /* a free's unlink reads it instead of computing class_of */
  uint32_t dirty = 0u - (uint32_t)(m == DIRTY);
  CMIN(r, c) = (int32_t)(min_node(r->nodes, m & ~dirty, i) | dirty); /* DUMMY is 0, DIRTY all ones */
  mark(r, c);
}

/* Removes free node i from class c (its class). From a list: O(1), no
 * search, no branch on data; when i was the class minimum, the minimum
 * becomes stale (DUMMY if the class emptied): a later find rescans it only if
 * it needs that class. */
static inline void cls_unlink(grt__range *r, uint32_t i, uint32_t c, bool trees) {
  uint32_t m = (uint32_t)CMIN(r, c);
  if (trees && m == IN_TREE) {
    tree_erase(r, i, c);
    return;
  }
  rlink *L = r->links;
  int32_t p = L[i].prev, q = L[i].next;
  L[p].next = q;
  L[q].prev = p;
  /* i was first (p the sentinel) and last: the class emptied; clear its bit
   * (and the word's summary bit). Otherwise nothing changes. */
  uint32_t emptied = (p < 0) & (q == END);
  uint64_t w = r->words[c >> 6] &= ~((uint64_t)emptied << (c & 63));
  r->summary &= ~((uint64_t)(w == 0) << (c >> 6));
  uint32_t was = 0u - (uint32_t)(m == i), repl = 0u - (1u - emptied); /* DIRTY or DUMMY */
  CMIN(r, c) = (int32_t)((repl & was) | (m & ~was));
}

/* The least member of a tree class or of a list class with a stale minimum
 * (rescanned; a long one moves into a tree). */
static uint32_t cls_min_slow(grt__range *r, uint32_t c, uint32_t m) {
  if (m == IN_TREE) {
    grt__bin_entry e;
    grt__otree_first(r->trees[c], &e); /* a tree class is never empty */
    return untag(e.value);
  }
  uint32_t len;
  m = cls_scan_min(r, c, &len);
  CMIN(r, c) = (int32_t)m;
  if (len > BIG_SCAN) to_tree(r, c, len);
  return m;
}

/* The least member of class c (DUMMY when empty). */
static inline uint32_t cls_min(grt__range *r, uint32_t c) {
  uint32_t m = (uint32_t)CMIN(r, c);
  return m >= IN_TREE ? cls_min_slow(r, c, m) : m;
}

/* The least member of class c with size >= `size` (its minimum did not fit),
 * or DUMMY: a scan of the list (a long one moves into a tree) or a tree search. */
static uint32_t cls_least_fit(grt__range *r, uint32_t c, uint64_t size) {
  if (cls_in_tree(r, c)) {
    grt__bin_entry e;
    return grt__otree_lower_bound(r->trees[c], size, 0, &e) ? untag(e.value) : DUMMY;
  }
  const rlink *L = r->links;
  const rnode *N = r->nodes;
  uint32_t best = DUMMY, len = 0;
  for (int32_t i = L[SENT(c)].next; i != END; i = L[i].next, len++) {
    uint32_t take = 0u - (uint32_t)((N[i].size >= size) & key_less(&N[i], N[best].size, N[best].off));
    best = ((uint32_t)i & take) | (best & ~take);
  }
  if (len > BIG_SCAN) to_tree(r, c, len);
  return best;
}

/* The smallest free node with size >= `size`, lowest offset first, and its
 * class in *cls; NIL if none. */
static inline uint32_t cls_find(grt__range *r, uint64_t size, uint32_t *cls) {
  uint32_t c = class_of(size), w = c >> 6;
  uint64_t bits = r->words[w] & (~0ULL << (c & 63));
  if (bits & (1ULL << (c & 63))) {
    uint32_t m = cls_min(r, c);
    *cls = c;
    if (r->nodes[m].size >= size) return m; /* the class minimum fits: it is the answer */
    m = cls_least_fit(r, c, size);
    if (m != DUMMY) return m;
    bits &= bits - 1; /* every member of class c is too small */
  }
  if (!bits) {
    uint64_t sm = w + 1 < 64 ? r->summary & (~0ULL << (w + 1)) : 0;
    if (!sm) return NIL;
    w = (uint32_t)__builtin_ctzll(sm);
    bits = r->words[w];
  }
  c = (w << 6) | (uint32_t)__builtin_ctzll(bits);
  *cls = c;
  return cls_min(r, c);
}

/* The free node with the largest (size, offset), or NIL. */
static uint32_t cls_last(const grt__range *r) {
  if (!r->summary) return NIL;
  uint32_t w = 63u - (uint32_t)__builtin_clzll(r->summary);
  uint32_t c = (w << 6) | (63u - (uint32_t)__builtin_clzll(r->words[w])); /* non-empty */
  if (cls_in_tree(r, c)) {
    grt__bin_entry e;
    grt__otree_last(r->trees[c], &e);
    return untag(e.value);
  }
  int32_t s = SENT(c);
  uint32_t m = (uint32_t)r->links[s].next;
  for (int32_t i = r->links[m].next; i != END; i = r->links[i].next)
    m = min_node(r->nodes, m, (uint32_t)i) == m ? (uint32_t)i : m;
  return m;
}

/* ---- tree index (GRT__INDEX_OTREE) ---------------------------------------- */

static uint32_t tree_find(const grt__range *r, uint64_t size) {
  grt__bin_entry e;
  return grt__otree_lower_bound(r->index, size, 0, &e) ? untag(e.value) : NIL;
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
    /* A larger link array alone is harmless (cap_nodes still names the smaller). */
    rlink *lb = realloc(r->link_base, ((size_t)NCLASS + cap) * sizeof *lb);
    if (!lb) return NIL;
    r->link_base = lb;
    r->links = lb + NCLASS;
    rnode *n = realloc(r->nodes, (size_t)cap * sizeof *n);
    if (!n) return NIL;
    r->nodes = n;
    r->cap_nodes = cap;
  }
  return r->n_nodes++;
}

static void node_put(grt__range *r, uint32_t i) {
  r->nodes[i].next = r->pool;
  r->links[i].prev = POOLED;
  r->pool = i;
}

grt_status grt__range_create(uint64_t capacity, grt__index_kind kind, grt__range **out) {
  if ((unsigned)kind >= GRT__INDEX_KIND_COUNT || capacity == 0 || !out) return GRT_ERR_INVALID_ARG;
  grt__range *r = calloc(1, sizeof *r);
  if (!r) return GRT_ERR_NOMEM;
  r->kind = kind;
  r->pool = NIL;
  r->capacity = capacity;
  grt_status st = GRT_OK;
  if (kind == GRT__INDEX_OTREE && (st = grt__otree_create(&r->index))) goto fail;
  st = GRT_ERR_NOMEM;
  if (node_get(r) != DUMMY) goto fail;
  r->nodes[DUMMY] = (rnode){UINT64_MAX, UINT64_MAX, NIL, NIL, 0, 0};
  r->links[DUMMY].prev = POOLED; /* never a block: its handle is refused */
  uint32_t i = node_get(r);
  if (i != FIRST) goto fail;
  for (uint32_t c = 0; c < NCLASS; c++) r->links[SENT(c)] = (rlink){END, (int32_t)DUMMY};
  r->nodes[i] = (rnode){0, capacity, NIL, NIL, 0, 0};
  if (kind == GRT__INDEX_OTREE) {
    r->links[i].prev = TREE_FREE;
    if ((st = grt__otree_insert(r->index, capacity, 0, tag(i)))) goto fail;
  } else {
    cls_insert(r, i, class_of(capacity), false);
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
  if (r->index) grt__otree_destroy(r->index);
  if (r->trees)
    for (uint32_t c = 0; c < NCLASS; c++) grt__otree_destroy(r->trees[c]);
  free(r->trees);
  free(r->slots);
  free(r->nodes);
  free(r->link_base);
  free(r);
}

/* ---- alloc / free -------------------------------------------------------- */

/* A fresh node for the tail [off + size, off + old size) of free node i, in
 * the map but not yet linked anywhere; NIL when host memory runs out (nothing
 * changed). */
static inline uint32_t tail_new(grt__range *r, uint32_t i, uint64_t size) {
  uint32_t t = node_get(r);
  if (t == NIL) return NIL;
  rnode *n = &r->nodes[i]; /* after node_get: the pool may have moved */
  r->nodes[t] = (rnode){n->off + size, n->size - size, i, n->next, 0, 0};
  if (r->slots && !map_put(r, t)) {
    node_put(r, t);
    return NIL;
  }
  return t;
}

/* Links tail t after i in address order; i shrinks to size. */
static inline void tail_link(grt__range *r, uint32_t i, uint32_t t, uint64_t size) {
  rnode *n = &r->nodes[i];
  if (n->next != NIL) r->nodes[n->next].prev = t;
  n->next = t;
  n->size = size;
  r->free_n++;
}

/* Takes free node i (of class c, found by best fit) out of the class index
 * for `size` bytes; the tail of a split goes back in. The tail is smaller
 * than the range it came from: when both share a list class and i is its
 * minimum, the tail takes i's place in the list and is the new minimum. */
GRT__ALWAYS_INLINE static inline grt_status take(grt__range *r, uint32_t i, uint32_t c, uint64_t size, bool trees) {
  uint64_t old = r->nodes[i].size;
  if (old > size) {
    uint32_t tc = class_of(old - size);
    uint32_t t = tail_new(r, i, size);
    if (t == NIL) return GRT_ERR_NOMEM;
    if (tc == c && (uint32_t)CMIN(r, c) == i) { /* t < i: t is the class's new minimum */
      rlink *L = r->links;
      link_between(L, L[i].prev, (int32_t)t, L[i].next);
      r->nodes[t].cls = c;
      CMIN(r, c) = (int32_t)t;
    } else {
      cls_unlink(r, i, c, trees);
      cls_insert(r, t, tc, trees);
    }
    tail_link(r, i, t, size);
  } else {
    cls_unlink(r, i, c, trees);
  }
  return GRT_OK;
}

GRT__COLD static grt_status take_with_trees(grt__range *r, uint32_t i, uint32_t c, uint64_t size) {
  return take(r, i, c, size, true);
}

/* Best fit from the class index (a scan in the find may move a class into
 * a tree: the mode is read after it). */
GRT__ALWAYS_INLINE static inline grt_status alloc_classes(grt__range *r, uint64_t size, uint32_t *out) {
  uint32_t c, i = cls_find(r, size, &c);
  if (i == NIL) return GRT_ERR_OOM;
  grt_status st = GRT__UNLIKELY(r->tree_classes) ? take_with_trees(r, i, c, size) : take(r, i, c, size, false);
  *out = i;
  return st;
}

static grt_status alloc_tree(grt__range *r, uint64_t size, uint32_t *out) {
  uint32_t i = tree_find(r, size);
  if (i == NIL) return GRT_ERR_OOM;
  uint64_t old = r->nodes[i].size, off = r->nodes[i].off;
  if (old > size) {
    uint32_t t = tail_new(r, i, size);
    if (t == NIL) return GRT_ERR_NOMEM;
    grt_status st = grt__otree_insert(r->index, old - size, off + size, tag(t));
    if (st) {
      if (r->slots) map_del(r, off + size);
      node_put(r, t);
      return st;
    }
    r->links[t].prev = TREE_FREE;
    tail_link(r, i, t, size);
  }
  grt__otree_erase(r->index, old, off);
  *out = i;
  return GRT_OK;
}

grt_status grt__range_alloc_handle(grt__range *r, uint64_t size, uint64_t *offset, uint32_t *handle) {
  if (!offset) return GRT_ERR_INVALID_ARG;
  if (size == 0 || size > r->capacity) return GRT_ERR_SIZE;
  uint32_t i;
  grt_status st = r->kind == GRT__INDEX_BINS ? alloc_classes(r, size, &i) : alloc_tree(r, size, &i);
  if (st) return st;
  r->links[i].prev = USED;
  r->free_bytes -= size;
  r->free_n--;
  *offset = r->nodes[i].off;
  if (handle) *handle = i;
  return GRT_OK;
}

grt_status grt__range_alloc(grt__range *r, uint64_t size, uint64_t *offset) {
  return grt__range_alloc_handle(r, size, offset, NULL);
}

/* Unlinks node j (the right-hand one of a merge) and returns it to the pool. */
static inline void absorb(grt__range *r, uint32_t keep, uint32_t j) {
  rnode *k = &r->nodes[keep], *n = &r->nodes[j];
  k->size += n->size;
  k->next = n->next;
  if (n->next != NIL) r->nodes[n->next].prev = keep;
  if (r->slots) map_del(r, n->off);
  node_put(r, j);
}

/* The size of node i merged with the neighbours that merge. */
static uint64_t merged_size(const grt__range *r, uint32_t i, bool merge_prev, bool merge_next) {
  const rnode *N = r->nodes;
  return N[i].size + (merge_prev ? N[N[i].prev].size : 0) + (merge_next ? N[N[i].next].size : 0);
}

/* Frees allocated node i (class kind), merging it with free neighbours. */
GRT__ALWAYS_INLINE static inline void free_classes(grt__range *r, uint32_t i, bool trees) {
  rnode *nodes = r->nodes, *n = &nodes[i];
  uint32_t p = n->prev, q = n->next;
  bool merge_prev = p != NIL && node_free(r, p);
  bool merge_next = q != NIL && node_free(r, q);
  r->free_bytes += n->size;
  r->free_n = r->free_n + 1 - (uint64_t)merge_prev - (uint64_t)merge_next;
  if (merge_next) {
    cls_unlink(r, q, nodes[q].cls, trees);
    absorb(r, i, q);
  }
  if (merge_prev) {
    cls_unlink(r, p, nodes[p].cls, trees);
    absorb(r, p, i);
    i = p;
  }
  cls_insert(r, i, class_of(nodes[i].size), trees);
}

GRT__COLD static void free_with_trees(grt__range *r, uint32_t i) { free_classes(r, i, true); }

/* Frees allocated node i (tree kind), merging it with free neighbours. */
static grt_status free_tree(grt__range *r, uint32_t i) {
  rnode *nodes = r->nodes, *n = &nodes[i];
  uint32_t p = n->prev, q = n->next;
  bool merge_prev = p != NIL && node_free(r, p);
  bool merge_next = q != NIL && node_free(r, q);
  uint32_t head = merge_prev ? p : i;
  uint64_t size = merged_size(r, i, merge_prev, merge_next);
  /* The merged range is a new key (it differs in size or offset from both
   * neighbours), so inserting it first is safe and is the only step that can fail. */
  grt_status st = grt__otree_insert(r->index, size, nodes[head].off, tag(head));
  if (st) return st;
  if (merge_prev) grt__otree_erase(r->index, nodes[p].size, nodes[p].off);
  if (merge_next) grt__otree_erase(r->index, nodes[q].size, nodes[q].off);
  r->free_bytes += n->size;
  r->free_n = r->free_n + 1 - (uint64_t)merge_prev - (uint64_t)merge_next;
  if (merge_next) absorb(r, i, q);
  if (merge_prev) absorb(r, p, i);
  r->links[head].prev = TREE_FREE;
  return GRT_OK;
}

static inline grt_status free_node(grt__range *r, uint32_t i) {
  if (r->kind != GRT__INDEX_BINS) return free_tree(r, i);
  if (GRT__UNLIKELY(r->tree_classes)) free_with_trees(r, i);
  else free_classes(r, i, false);
  return GRT_OK;
}

grt_status grt__range_free_handle(grt__range *r, uint32_t handle) {
  if (handle == DUMMY || handle >= r->n_nodes || r->links[handle].prev == POOLED) return GRT_ERR_UNKNOWN_POINTER;
  if (r->links[handle].prev != USED) return GRT_ERR_DOUBLE_FREE;
  return free_node(r, handle);
}

grt_status grt__range_free(grt__range *r, uint64_t offset) {
  if (!r->slots && !map_build(r)) return GRT_ERR_NOMEM;
  uint32_t i = map_get(r, offset);
  if (i == NIL) return GRT_ERR_UNKNOWN_POINTER;
  if (r->links[i].prev != USED) return GRT_ERR_DOUBLE_FREE;
  return free_node(r, i);
}

/* ---- queries and the checker --------------------------------------------- */

uint64_t grt__range_largest_free(const grt__range *r) {
  if (r->kind == GRT__INDEX_BINS) {
    uint32_t i = cls_last(r);
    return i == NIL ? 0 : r->nodes[i].size;
  }
  grt__bin_entry e;
  return grt__otree_last(r->index, &e) ? e.size : 0;
}

uint64_t grt__range_free_bytes(const grt__range *r) { return r->free_bytes; }

uint64_t grt__range_free_count(const grt__range *r) { return r->free_n; }

uint32_t grt__range_long_classes(const grt__range *r) { return r->tree_classes; }

/* A tree class: an empty list, at least SMALL_TREE entries, each naming a
 * TREE_FREE node of class c with the entry's key; counts them. */
static grt_status check_tree_class(const grt__range *r, uint32_t c, uint64_t *members) {
  const grt__otree *t = r->trees ? r->trees[c] : NULL;
  if (!t || r->links[SENT(c)].next != END || grt__otree_count(t) < SMALL_TREE) return GRT_ERR_INTERNAL;
  grt__bin_entry e;
  for (bool ok = grt__otree_first(t, &e); ok; ok = grt__otree_next(t, e.size, e.addr, &e)) {
    uint32_t i = untag(e.value);
    if (i == DUMMY || i >= r->n_nodes || r->links[i].prev != TREE_FREE) return GRT_ERR_INTERNAL;
    if (r->nodes[i].size != e.size || r->nodes[i].off != e.addr || class_of(e.size) != c || r->nodes[i].cls != c)
      return GRT_ERR_INTERNAL;
    ++*members;
  }
  return GRT_OK;
}

/* Class lists and bitmaps: every list well linked, members free and in their
 * class, a clean minimum exact (DUMMY if empty), bits set exactly for non-empty classes;
 * tree classes as check_tree_class says, and as many as tree_classes counts;
 * counts the members.
 * GRT_OK or GRT_ERR_INTERNAL. */
static grt_status check_classes(const grt__range *r, uint64_t *members) {
  const rlink *L = r->links;
  uint64_t summary = 0;
  uint32_t trees = 0;
  for (uint32_t c = 0; c < NCLASS; c++) {
    int32_t s = SENT(c), prev = s;
    bool bit = (r->words[c >> 6] >> (c & 63)) & 1;
    if (r->words[c >> 6]) summary |= 1ULL << (c >> 6);
    if (cls_in_tree(r, c)) {
      trees++;
      if (!bit || check_tree_class(r, c, members)) return GRT_ERR_INTERNAL;
      continue;
    }
    if (bit != (L[s].next != END)) return GRT_ERR_INTERNAL;
    for (int32_t i = L[s].next; i != END; prev = i, i = L[i].next) {
      if (i < 0 || (uint32_t)i >= r->n_nodes || L[i].prev != prev) return GRT_ERR_INTERNAL;
      const rnode *n = &r->nodes[i];
      if (class_of(n->size) != c || n->cls != c) return GRT_ERR_INTERNAL;
      if (++*members > r->n_nodes) return GRT_ERR_INTERNAL; /* a cycle */
    }
    uint32_t m = (uint32_t)L[s].prev, len; /* CMIN: when clean, exact */
    if (m != DIRTY && m != cls_scan_min(r, c, &len)) return GRT_ERR_INTERNAL;
  }
  return summary == r->summary && trees == r->tree_classes ? GRT_OK : GRT_ERR_INTERNAL;
}

grt_status grt__range_check(const grt__range *r) {
  uint64_t off = 0, free_sum = 0, free_n = 0, nodes = 0;
  uint32_t prev = NIL;
  bool prev_free = false;
  for (uint32_t i = FIRST; i != NIL; prev = i, i = r->nodes[i].next) {
    const rnode *n = &r->nodes[i];
    int32_t st = r->links[i].prev;
    bool is_free = node_free(r, i);
    if (st == POOLED || n->off != off || n->size == 0 || n->prev != prev) return GRT_ERR_INTERNAL;
    if (r->kind == GRT__INDEX_OTREE ? st != TREE_FREE && st != USED
                                    : st == TREE_FREE && !cls_in_tree(r, class_of(n->size)))
      return GRT_ERR_INTERNAL;
    if (is_free && prev_free) return GRT_ERR_INTERNAL;
    if (r->slots && map_get(r, n->off) != i) return GRT_ERR_INTERNAL;
    if (r->kind == GRT__INDEX_OTREE) {
      grt__bin_entry e;
      bool in_index = grt__otree_lower_bound(r->index, n->size, n->off, &e) && e.size == n->size && e.addr == n->off;
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
  if (r->kind == GRT__INDEX_OTREE) return free_n == grt__otree_count(r->index) ? GRT_OK : GRT_ERR_INTERNAL;
  uint64_t members = 0;
  grt_status st = check_classes(r, &members);
  /* Members are linked or TREE_FREE (so free) nodes; equal counts mean every free node is a member. */
  return st ? st : members == free_n ? GRT_OK : GRT_ERR_INTERNAL;
}
