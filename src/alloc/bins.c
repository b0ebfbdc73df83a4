/* bins.c — grt__bins: a few entries inline, else a size-class index with
 * exact best fit at O(1)-class cost.
 *
 * A set of at most TINY_MAX entries is one sorted inline array: most streams
 * hold a handful of free blocks, and the index below costs ~8 KiB of class
 * table before its first entry (50,000 streams: 400 MB). The first insert
 * (or reservation) that could take the set past TINY_MAX moves the entries
 * into an index, for good: the answers are the same in either form.
 *
 * Keys (size, addr) are ordered lexicographically. Sizes map to classes that
 * partition the size axis into consecutive intervals (TLSF-style): sizes below
 * 2*SUB each get their own class (exact region); above, each power of two
 * [2^e, 2^(e+1)) is cut into SUB equal sub-classes. class_of() is monotonic,
 * so the whole (size, addr) order is: classes ascending, and inside a class
 * its own sorted entries. Two bitmap levels (a summary word over 64-bit words,
 * one bit per non-empty class) find the next non-empty class with two ctz.
 *
 * lower_bound(size, addr): look in class_of(size) for the first entry >= the
 * key (a short binary search); if there is none, the answer is the minimum of
 * the next non-empty class. That is exactly the ordered tree's answer, never an
 * approximation. next/prev/first/last use the same two steps.
 *
 * Inside a class: a sorted array of entries (at most ARRAY_MAX), searched by a
 * branch-free binary search. Arrays are chunks of 2..64 entries carved from
 * one slab and recycled through per-capacity free lists; a class keeps its
 * chunk when it empties, so steady-state churn does not call malloc. A class
 * that grows past ARRAY_MAX (thousands of equal-size blocks) moves its entries
 * into an ordered tree (ordered_tree.c) and back when it shrinks below
 * ARRAY_MIN (the gap avoids thrashing; the tree keeps its nodes pooled), so
 * no operation degrades to a long shift.
 *
 * Reservations (ix_reserve): a step that must not fail halfway first
 * makes room for the inserts it will do, whatever their keys; an insert
 * needs at most one chunk of at most ARRAY_MAX entries, or tree nodes (one, or
 * ARRAY_MAX + 1 when its class moves into a tree). So a reservation of n
 * inserts keeps 64n free slab entries (erases that move a class back to an
 * array leave them alone), a store of tree nodes lent to the trees that need
 * them, and a tree already made for every array class n inserts could fill:
 * the `near` bitmap names the array classes within FAST_RESERVE inserts of
 * overflowing that have none yet, so a small reservation need not scan.
 *
 * Invariants (checked by tests/test_bins_index.c through the public order):
 *   - bit c of words[] set  <=>  class c holds >= 1 entry; summary bit w set
 *     <=> words[w] != 0;
 *   - an array-mode class's entries are strictly increasing in (size, addr)
 *     and all satisfy class_of(size) == c;
 *   - count is the sum of the array classes' n and the tree classes' tree counts.
 */
#include "alloc/bins.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "alloc/ordered_tree.h"

#define SUB_LOG2 4u
#define SUB (1u << SUB_LOG2)
#define NCLASS ((65u - SUB_LOG2) * SUB)
#define NWORDS ((NCLASS + 63u) / 64u)
#define MAX_LOG2CAP 6u                  /* array chunks hold 2^1 .. 2^6 entries */
#define ARRAY_MAX (1u << MAX_LOG2CAP) /* more entries than this: the class becomes a tree */
#define ARRAY_MIN 16u                   /* fewer than this in a tree: back to an array */
#define NO_CHUNK UINT32_MAX
#define FAST_RESERVE 8u                        /* reservations up to this many inserts read `near` */
#define NEAR_N (ARRAY_MAX - FAST_RESERVE + 1u) /* an array class this full is near */
#define RESERVE_BATCH 4u /* a reservation covers at least this many inserts: most calls then find room promised */

typedef struct entry {
  uint64_t size, addr;
  void *value;
} entry;

typedef struct bins_index bins_index;

/* 8 bytes, so a lookup's class and its neighbours share a cache line. */
typedef struct size_class {
  uint32_t chunk;  /* first entry of this class's chunk in the slab, or NO_CHUNK */
  uint16_t n;      /* entries in the array; unused in tree mode (the tree counts) */
  uint8_t log2cap; /* chunk capacity is 1 << log2cap */
  uint8_t in_tree; /* 1: the entries live in trees[c], chunk is NO_CHUNK */
} size_class;

struct bins_index {
  uint64_t summary;       /* bit w: words[w] != 0 */
  uint64_t words[NWORDS]; /* bit c: class c non-empty */
  size_t count;
  entry *slab;            /* every array chunk; chunks addressed by index */
  uint32_t slab_used, slab_cap;
  uint32_t free_chunk[MAX_LOG2CAP + 1]; /* per capacity, linked through entry.size */
  grt__otree **trees;     /* [NCLASS], allocated on the first overflow */
  grt__otree *store;      /* pooled nodes only: lent to trees[] by reserved inserts */
  uint32_t promised;      /* reserved inserts not yet done */
  uint32_t tree_classes;  /* classes in tree mode */
  uint32_t n_near;        /* bits set in near */
  uint64_t near[NWORDS];  /* bit c: array class c has >= NEAR_N entries and no tree yet */
  size_class cls[NCLASS];
};

_Static_assert(NWORDS <= 64, "one summary word must cover every bitmap word");
_Static_assert(sizeof(size_class) == 8, "size_class is packed to 8 bytes");

static inline unsigned class_of(uint64_t size) {
  if (size < 2u * SUB) return (unsigned)size;
  unsigned e = 63u - (unsigned)__builtin_clzll(size);
  /* (size >> (e - SUB_LOG2)) is in [SUB, 2*SUB): the sub-class plus SUB. */
  return ((e - SUB_LOG2) << SUB_LOG2) + (unsigned)(size >> (e - SUB_LOG2));
}

static inline bool key_less(uint64_t s1, uint64_t a1, uint64_t s2, uint64_t a2) {
  return (s1 < s2) | ((s1 == s2) & (a1 < a2)); /* no short-circuit: no branches */
}

static inline void mark(bins_index *b, unsigned c) {
  b->words[c >> 6] |= 1ULL << (c & 63);
  b->summary |= 1ULL << (c >> 6);
}

static inline void unmark(bins_index *b, unsigned c) {
  uint64_t w = b->words[c >> 6] &= ~(1ULL << (c & 63));
  if (!w) b->summary &= ~(1ULL << (c >> 6));
}

/* First non-empty class >= c, or NCLASS. */
static inline unsigned find_ge(const bins_index *b, unsigned c) {
  if (c >= NCLASS) return NCLASS;
  unsigned w = c >> 6;
  uint64_t m = b->words[w] & (~0ULL << (c & 63));
  if (m) return (w << 6) | (unsigned)__builtin_ctzll(m);
  uint64_t s = w + 1 < 64 ? b->summary & (~0ULL << (w + 1)) : 0;
  if (!s) return NCLASS;
  w = (unsigned)__builtin_ctzll(s);
  return (w << 6) | (unsigned)__builtin_ctzll(b->words[w]);
}

/* Last non-empty class <= c (c < NCLASS), or NCLASS. */
static unsigned find_le(const bins_index *b, unsigned c) {
  unsigned w = c >> 6;
  uint64_t m = b->words[w] & (~0ULL >> (63 - (c & 63)));
  if (m) return (w << 6) | (63u - (unsigned)__builtin_clzll(m));
  uint64_t s = b->summary & ((1ULL << w) - 1);
  if (!s) return NCLASS;
  w = 63u - (unsigned)__builtin_clzll(s);
  return (w << 6) | (63u - (unsigned)__builtin_clzll(b->words[w]));
}

/* Index of the first entry of e[0..n) >= (size, addr). Branch-free halving
 * (conditional moves): the outcome of each comparison is unpredictable, its
 * trip count (log2 n, n small) is not. */
static inline uint32_t pos_ge(const entry *e, uint32_t n, uint64_t size, uint64_t addr) {
  if (n == 0) return 0;
  const entry *base = e;
  while (n > 1) {
    uint32_t half = n >> 1;
    const entry *m = base + half;
    base = key_less(m->size, m->addr, size, addr) ? m : base;
    n -= half;
  }
  return (uint32_t)(base - e) + (uint32_t)key_less(base->size, base->addr, size, addr);
}

/* Entry moves inside one short chunk: a plain loop beats memmove's size dispatch. */
static inline void shift_up(entry *e, uint32_t i, uint32_t n) {
  for (uint32_t j = n; j > i; j--) e[j] = e[j - 1];
}

static inline void shift_down(entry *e, uint32_t i, uint32_t n) {
  for (uint32_t j = i; j + 1 < n; j++) e[j] = e[j + 1];
}

static inline entry *chunk_of(const bins_index *b, const size_class *k) { return b->slab + k->chunk; }

static inline bool put(const entry *e, grt__bin_entry *out) {
  if (out) *out = (grt__bin_entry){e->size, e->addr, e->value};
  return true;
}

static bool class_min(const bins_index *b, unsigned c, grt__bin_entry *out) {
  if (c >= NCLASS) return false;
  const size_class *k = &b->cls[c];
  if (k->in_tree) return grt__otree_first(b->trees[c], out);
  return put(chunk_of(b, k), out);
}

static bool class_max(const bins_index *b, unsigned c, grt__bin_entry *out) {
  if (c >= NCLASS) return false;
  const size_class *k = &b->cls[c];
  if (k->in_tree) return grt__otree_last(b->trees[c], out);
  return put(chunk_of(b, k) + k->n - 1, out);
}

static inline bool has_tree(const bins_index *b, unsigned c) { return b->trees && b->trees[c]; }
static inline void set_near(bins_index *b, unsigned c) {
  uint64_t bit = 1ULL << (c & 63);
  b->n_near += !(b->near[c >> 6] & bit);
  b->near[c >> 6] |= bit;
}
static inline void clear_near(bins_index *b, unsigned c) {
  uint64_t bit = 1ULL << (c & 63);
  b->n_near -= !!(b->near[c >> 6] & bit);
  b->near[c >> 6] &= ~bit;
}

/* Unused slab entries for at least `need` more (the slab grows when short). */
static bool slab_room(bins_index *b, uint64_t need) {
  if (b->slab_cap - b->slab_used >= need) return true;
  if (b->slab_used + need > (UINT32_MAX >> 2)) return false;
  uint64_t cap = b->slab_cap ? b->slab_cap * 2ull : 256;
  while (cap - b->slab_used < need) cap *= 2;
  entry *s = realloc(b->slab, (size_t)cap * sizeof *s);
  if (!s) return false;
  b->slab = s;
  b->slab_cap = (uint32_t)cap;
  return true;
}

/* A chunk of 1 << lg entries: recycled LIFO (still cached), else carved from
 * the slab, leaving `keep` unused entries there for reserved inserts. */
static uint32_t chunk_get(bins_index *b, unsigned lg, uint64_t keep) {
  uint32_t i = b->free_chunk[lg];
  if (i != NO_CHUNK) {
    b->free_chunk[lg] = (uint32_t)b->slab[i].size;
    return i;
  }
  uint32_t need = 1u << lg;
  if (!slab_room(b, need + keep)) return NO_CHUNK;
  i = b->slab_used;
  b->slab_used += need;
  return i;
}

/* Pooled nodes in trees[c] for n inserts, lent from the store when it has them. */
static void lend_nodes(bins_index *b, unsigned c, size_t n) {
  size_t have = grt__otree_spare(b->trees[c]);
  if (have < n && b->store) grt__otree_lend(b->trees[c], b->store, n - have);
}

static void chunk_put(bins_index *b, uint32_t i, unsigned lg) {
  b->slab[i].size = b->free_chunk[lg];
  b->free_chunk[lg] = i;
}

static grt_status ix_create(bins_index **out) {
  bins_index *b = calloc(1, sizeof *b);
  if (!b) return GRT_ERR_NOMEM;
  for (unsigned lg = 0; lg <= MAX_LOG2CAP; lg++) b->free_chunk[lg] = NO_CHUNK;
  for (unsigned c = 0; c < NCLASS; c++) b->cls[c].chunk = NO_CHUNK;
  *out = b;
  return GRT_OK;
}

static void ix_destroy(bins_index *b) {
  if (!b) return;
  if (b->trees)
    for (unsigned c = 0; c < NCLASS; c++) grt__otree_destroy(b->trees[c]);
  free(b->trees);
  grt__otree_destroy(b->store);
  free(b->slab);
  free(b);
}

/* Moves a full array class (ARRAY_MAX entries) into its tree. On failure nothing changed. */
static grt_status to_tree(bins_index *b, unsigned c) {
  size_class *k = &b->cls[c];
  if (!b->trees && !(b->trees = calloc(NCLASS, sizeof *b->trees))) return GRT_ERR_NOMEM;
  if (!b->trees[c]) {
    grt_status st = grt__otree_create(&b->trees[c]);
    if (st) return st;
    clear_near(b, c);
  }
  lend_nodes(b, c, ARRAY_MAX + 1u); /* the entries moved and the one being inserted */
  const entry *e = chunk_of(b, k);
  for (uint32_t i = 0; i < k->n; i++) { /* n == ARRAY_MAX */
    grt_status st = grt__otree_insert(b->trees[c], e[i].size, e[i].addr, e[i].value);
    if (st) {
      while (i--) grt__otree_erase(b->trees[c], e[i].size, e[i].addr);
      return st;
    }
  }
  chunk_put(b, k->chunk, k->log2cap);
  k->chunk = NO_CHUNK;
  k->in_tree = 1;
  b->tree_classes++;
  return GRT_OK;
}

/* Moves a small tree class back into an array chunk; stays a tree if no chunk
 * can be had (still correct, only slower). The tree keeps its nodes pooled. */
static void to_array(bins_index *b, unsigned c) {
  size_class *k = &b->cls[c];
  uint32_t ch = chunk_get(b, MAX_LOG2CAP, (uint64_t)ARRAY_MAX * b->promised);
  if (ch == NO_CHUNK) return;
  grt__bin_entry e;
  uint32_t n = 0;
  while (grt__otree_first(b->trees[c], &e)) {
    b->slab[ch + n++] = (entry){e.size, e.addr, e.value};
    grt__otree_erase(b->trees[c], e.size, e.addr);
  }
  k->n = (uint16_t)n;
  k->chunk = ch;
  k->log2cap = MAX_LOG2CAP;
  k->in_tree = 0;
  b->tree_classes--;
}

static grt_status ix_insert(bins_index *b, uint64_t size, uint64_t addr, void *value) {
  unsigned c = class_of(size);
  size_class *k = &b->cls[c];
  b->promised -= b->promised != 0; /* this insert uses one reserved; the slab keeps room for the rest */
  if (!k->in_tree) {
    if (k->chunk == NO_CHUNK) { /* first use of this class (or after a tree) */
      uint32_t ch = chunk_get(b, 1, (uint64_t)ARRAY_MAX * b->promised);
      if (ch == NO_CHUNK) return GRT_ERR_NOMEM;
      k->chunk = ch;
      k->log2cap = 1;
    }
    entry *e = chunk_of(b, k);
    uint32_t i = pos_ge(e, k->n, size, addr);
    if (i < k->n && e[i].size == size && e[i].addr == addr) return GRT_ERR_INVALID_ARG;
    if (k->n < ARRAY_MAX) {
      if (k->n == 1u << k->log2cap) { /* full: move to a chunk twice the size */
        uint32_t ch = chunk_get(b, k->log2cap + 1u, (uint64_t)ARRAY_MAX * b->promised);
        if (ch == NO_CHUNK) return GRT_ERR_NOMEM;
        e = chunk_of(b, k); /* the slab may have moved */
        memcpy(b->slab + ch, e, k->n * sizeof *e);
        chunk_put(b, k->chunk, k->log2cap);
        k->chunk = ch;
        k->log2cap++;
        e = b->slab + ch;
      }
      shift_up(e, i, k->n);
      e[i] = (entry){size, addr, value};
      if (k->n++ == 0) mark(b, c);
      if (k->n == NEAR_N && !has_tree(b, c)) set_near(b, c);
      b->count++;
      return GRT_OK;
    }
    grt_status st = to_tree(b, c);
    if (st) return st;
  }
  lend_nodes(b, c, 1);
  grt_status st = grt__otree_insert(b->trees[c], size, addr, value);
  if (st) return st;
  b->count++;
  return GRT_OK;
}

static bool ix_erase(bins_index *b, uint64_t size, uint64_t addr) {
  unsigned c = class_of(size);
  size_class *k = &b->cls[c];
  if (k->in_tree) {
    if (!grt__otree_erase(b->trees[c], size, addr)) return false;
    if (grt__otree_count(b->trees[c]) < ARRAY_MIN) to_array(b, c);
  } else {
    if (k->n == 0) return false;
    entry *e = chunk_of(b, k);
    uint32_t i = pos_ge(e, k->n, size, addr);
    if (i >= k->n || e[i].size != size || e[i].addr != addr) return false;
    shift_down(e, i, k->n);
    if (--k->n == 0) unmark(b, c); /* the chunk stays: the class is likely reused */
    if (k->n == NEAR_N - 1u) clear_near(b, c);
  }
  b->count--;
  return true;
}

static bool ix_lower_bound(const bins_index *b, uint64_t size, uint64_t addr, grt__bin_entry *out) {
  unsigned c = class_of(size);
  const size_class *k = &b->cls[c];
  if (k->in_tree) {
    if (grt__otree_lower_bound(b->trees[c], size, addr, out)) return true;
  } else if (k->n) {
    const entry *e = chunk_of(b, k);
    uint32_t i = pos_ge(e, k->n, size, addr);
    if (i < k->n) return put(&e[i], out);
  }
  return class_min(b, find_ge(b, c + 1), out);
}

static bool ix_next(const bins_index *b, uint64_t size, uint64_t addr, grt__bin_entry *out) {
  unsigned c = class_of(size);
  const size_class *k = &b->cls[c];
  if (k->in_tree) {
    if (grt__otree_next(b->trees[c], size, addr, out)) return true;
  } else if (k->n) {
    const entry *e = chunk_of(b, k);
    uint32_t i = pos_ge(e, k->n, size, addr);
    if (i < k->n && e[i].size == size && e[i].addr == addr) i++;
    if (i < k->n) return put(&e[i], out);
  }
  return class_min(b, find_ge(b, c + 1), out);
}

static bool ix_prev(const bins_index *b, uint64_t size, uint64_t addr, grt__bin_entry *out) {
  unsigned c = class_of(size);
  const size_class *k = &b->cls[c];
  if (k->in_tree) {
    if (grt__otree_prev(b->trees[c], size, addr, out)) return true;
  } else if (k->n) {
    const entry *e = chunk_of(b, k);
    uint32_t i = pos_ge(e, k->n, size, addr);
    if (i > 0) return put(&e[i - 1], out);
  }
  return c > 0 && class_max(b, find_le(b, c - 1), out);
}

static bool ix_first(const bins_index *b, grt__bin_entry *out) { return class_min(b, find_ge(b, 0), out); }

static bool ix_last(const bins_index *b, grt__bin_entry *out) {
  return class_max(b, find_le(b, NCLASS - 1), out);
}

static size_t ix_count(const bins_index *b) { return b->count; }

/* A tree for every array class that n inserts could fill past ARRAY_MAX: the
 * near ones for a small n, the non-empty ones up to ARRAY_MAX, else any. */
static grt_status prepare_trees(bins_index *b, size_t n) {
  if (!b->trees && !(b->trees = calloc(NCLASS, sizeof *b->trees))) return GRT_ERR_NOMEM;
  if (n <= FAST_RESERVE && !b->n_near) return GRT_OK;
  for (unsigned w = 0; w < NWORDS; w++) {
    uint64_t m = n <= FAST_RESERVE ? b->near[w] : n <= ARRAY_MAX ? b->words[w] : ~0ULL;
    for (; m; m &= m - 1) {
      unsigned c = (w << 6) | (unsigned)__builtin_ctzll(m);
      if (c >= NCLASS || b->cls[c].in_tree || b->trees[c] || b->cls[c].n + n <= ARRAY_MAX) continue;
      grt_status st = grt__otree_create(&b->trees[c]);
      if (st) return st;
      clear_near(b, c);
    }
  }
  return GRT_OK;
}

static grt_status ix_reserve(bins_index *b, size_t n) {
  if (n <= b->promised) return GRT_OK; /* an earlier reservation still covers them */
  if (n < RESERVE_BATCH) n = RESERVE_BATCH;
  if (n > UINT32_MAX / (ARRAY_MAX + 1u) || !slab_room(b, (uint64_t)ARRAY_MAX * n)) return GRT_ERR_NOMEM;
  bool may_fill = b->count + n > ARRAY_MAX; /* some class could then hold more than ARRAY_MAX */
  if (may_fill && prepare_trees(b, n)) return GRT_ERR_NOMEM;
  size_t nodes = may_fill ? n * (ARRAY_MAX + 1u) : b->tree_classes ? n : 0;
  if (nodes && ((!b->store && grt__otree_create(&b->store)) || grt__otree_reserve(b->store, nodes)))
    return GRT_ERR_NOMEM;
  if (b->promised < n) b->promised = (uint32_t)n;
  return GRT_OK;
}

/* ---- the front: inline entries until the set outgrows them ---- */

#define TINY_MAX 8u

struct grt__bins {
  bins_index *ix;       /* NULL while the entries fit in tiny */
  uint32_t n;           /* entries in tiny (ix == NULL) */
  entry tiny[TINY_MAX]; /* sorted by (size, addr) */
};

grt_status grt__bins_create(grt__bins **out) {
  grt__bins *b = calloc(1, sizeof *b);
  if (!b) return GRT_ERR_NOMEM;
  *out = b;
  return GRT_OK;
}

void grt__bins_destroy(grt__bins *b) {
  if (!b) return;
  ix_destroy(b->ix);
  free(b);
}

/* Moves the inline entries into a new index. On failure nothing changed. */
static grt_status grow_index(grt__bins *b) {
  bins_index *ix;
  grt_status st = ix_create(&ix);
  if (st) return st;
  for (uint32_t i = 0; i < b->n && !st; i++) st = ix_insert(ix, b->tiny[i].size, b->tiny[i].addr, b->tiny[i].value);
  if (st) {
    ix_destroy(ix);
    return st;
  }
  b->ix = ix;
  b->n = 0;
  return GRT_OK;
}

grt_status grt__bins_insert(grt__bins *b, uint64_t size, uint64_t addr, void *value) {
  if (b->ix) return ix_insert(b->ix, size, addr, value);
  uint32_t i = pos_ge(b->tiny, b->n, size, addr);
  if (i < b->n && b->tiny[i].size == size && b->tiny[i].addr == addr) return GRT_ERR_INVALID_ARG;
  if (b->n == TINY_MAX) {
    grt_status st = grow_index(b);
    return st ? st : ix_insert(b->ix, size, addr, value);
  }
  shift_up(b->tiny, i, b->n);
  b->tiny[i] = (entry){size, addr, value};
  b->n++;
  return GRT_OK;
}

grt_status grt__bins_reserve(grt__bins *b, size_t n) {
  if (!b->ix && n <= TINY_MAX - b->n) return GRT_OK; /* they fit inline: no memory needed */
  if (!b->ix) {
    grt_status st = grow_index(b);
    if (st) return st;
  }
  return ix_reserve(b->ix, n);
}

bool grt__bins_erase(grt__bins *b, uint64_t size, uint64_t addr) {
  if (b->ix) return ix_erase(b->ix, size, addr);
  uint32_t i = pos_ge(b->tiny, b->n, size, addr);
  if (i >= b->n || b->tiny[i].size != size || b->tiny[i].addr != addr) return false;
  shift_down(b->tiny, i, b->n);
  b->n--;
  return true;
}

bool grt__bins_lower_bound(const grt__bins *b, uint64_t size, uint64_t addr, grt__bin_entry *out) {
  if (b->ix) return ix_lower_bound(b->ix, size, addr, out);
  uint32_t i = pos_ge(b->tiny, b->n, size, addr);
  return i < b->n && put(&b->tiny[i], out);
}

bool grt__bins_next(const grt__bins *b, uint64_t size, uint64_t addr, grt__bin_entry *out) {
  if (b->ix) return ix_next(b->ix, size, addr, out);
  uint32_t i = pos_ge(b->tiny, b->n, size, addr);
  if (i < b->n && b->tiny[i].size == size && b->tiny[i].addr == addr) i++;
  return i < b->n && put(&b->tiny[i], out);
}

bool grt__bins_prev(const grt__bins *b, uint64_t size, uint64_t addr, grt__bin_entry *out) {
  if (b->ix) return ix_prev(b->ix, size, addr, out);
  uint32_t i = pos_ge(b->tiny, b->n, size, addr);
  return i > 0 && put(&b->tiny[i - 1], out);
}

bool grt__bins_first(const grt__bins *b, grt__bin_entry *out) {
  if (b->ix) return ix_first(b->ix, out);
  return b->n && put(&b->tiny[0], out);
}

bool grt__bins_last(const grt__bins *b, grt__bin_entry *out) {
  if (b->ix) return ix_last(b->ix, out);
  return b->n && put(&b->tiny[b->n - 1], out);
}

size_t grt__bins_count(const grt__bins *b) { return b->ix ? ix_count(b->ix) : b->n; }
