/* bins.c — grt__bins as a size-class index: exact best fit at O(1)-class cost.
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
 * Inside a class: a sorted array of entries (at most ARRAY_MAX). A class that
 * grows past ARRAY_MAX (thousands of equal-size blocks) moves its entries into
 * an ordered tree (ordered_tree.c) and back when it shrinks below ARRAY_MIN,
 * so no operation degrades to a long memmove. Arrays never shrink and the tree
 * is kept (empty, its nodes pooled) after moving back, so steady-state churn
 * does not call malloc.
 *
 * Invariants (checked by tests/test_bins_index.c through the public order):
 *   - bit c of words[] set  <=>  class c holds >= 1 entry; summary bit w set
 *     <=> words[w] != 0;
 *   - an array-mode class's entries are strictly increasing in (size, addr)
 *     and all satisfy class_of(size) == c;
 *   - count is the sum of the classes' n.
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
#define ARRAY_MAX 64u /* more entries than this: the class becomes a tree */
#define ARRAY_MIN 16u /* fewer than this in a tree: back to the array */

typedef struct entry {
  uint64_t size, addr;
  void *value;
} entry;

typedef struct size_class {
  uint32_t n;       /* entries in this class (array or tree) */
  uint32_t cap;     /* capacity of e */
  uint32_t in_tree; /* 1: the entries live in tree, e is unused */
  entry *e;         /* sorted by (size, addr) */
  grt__otree *tree; /* created on first overflow, kept afterwards */
} size_class;

struct grt__bins {
  uint64_t summary;       /* bit w: words[w] != 0 */
  uint64_t words[NWORDS]; /* bit c: class c non-empty */
  size_t count;
  size_class cls[NCLASS];
};

_Static_assert(NWORDS <= 64, "one summary word must cover every bitmap word");

static inline unsigned class_of(uint64_t size) {
  if (size < 2u * SUB) return (unsigned)size;
  unsigned e = 63u - (unsigned)__builtin_clzll(size);
  /* (size >> (e - SUB_LOG2)) is in [SUB, 2*SUB): the sub-class plus SUB. */
  return ((e - SUB_LOG2) << SUB_LOG2) + (unsigned)(size >> (e - SUB_LOG2));
}

static inline bool key_less(uint64_t s1, uint64_t a1, uint64_t s2, uint64_t a2) {
  return s1 < s2 || (s1 == s2 && a1 < a2);
}

static inline void mark(grt__bins *b, unsigned c) {
  b->words[c >> 6] |= 1ULL << (c & 63);
  b->summary |= 1ULL << (c >> 6);
}

static inline void unmark(grt__bins *b, unsigned c) {
  uint64_t w = b->words[c >> 6] &= ~(1ULL << (c & 63));
  if (!w) b->summary &= ~(1ULL << (c >> 6));
}

/* First non-empty class >= c, or NCLASS. */
static inline unsigned find_ge(const grt__bins *b, unsigned c) {
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
static unsigned find_le(const grt__bins *b, unsigned c) {
  unsigned w = c >> 6;
  uint64_t m = b->words[w] & (~0ULL >> (63 - (c & 63)));
  if (m) return (w << 6) | (63u - (unsigned)__builtin_clzll(m));
  uint64_t s = b->summary & ((1ULL << w) - 1);
  if (!s) return NCLASS;
  w = 63u - (unsigned)__builtin_clzll(s);
  return (w << 6) | (63u - (unsigned)__builtin_clzll(b->words[w]));
}

/* Index of the first array entry >= (size, addr). */
static inline uint32_t pos_ge(const size_class *k, uint64_t size, uint64_t addr) {
  uint32_t lo = 0, hi = k->n;
  while (lo < hi) {
    uint32_t mid = (lo + hi) >> 1;
    if (key_less(k->e[mid].size, k->e[mid].addr, size, addr))
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo;
}

static inline bool put(const entry *e, grt__bin_entry *out) {
  if (out) *out = (grt__bin_entry){e->size, e->addr, e->value};
  return true;
}

static bool class_min(const grt__bins *b, unsigned c, grt__bin_entry *out) {
  if (c >= NCLASS) return false;
  const size_class *k = &b->cls[c];
  if (k->in_tree) return grt__otree_first(k->tree, out);
  return put(&k->e[0], out);
}

static bool class_max(const grt__bins *b, unsigned c, grt__bin_entry *out) {
  if (c >= NCLASS) return false;
  const size_class *k = &b->cls[c];
  if (k->in_tree) return grt__otree_last(k->tree, out);
  return put(&k->e[k->n - 1], out);
}

grt_status grt__bins_create(grt__bins **out) {
  grt__bins *b = calloc(1, sizeof *b);
  if (!b) return GRT_ERR_NOMEM;
  *out = b;
  return GRT_OK;
}

void grt__bins_destroy(grt__bins *b) {
  if (!b) return;
  for (unsigned c = 0; c < NCLASS; c++) {
    free(b->cls[c].e);
    grt__otree_destroy(b->cls[c].tree);
  }
  free(b);
}

/* Moves a full array class into its tree. On failure nothing changed. */
static grt_status to_tree(size_class *k) {
  if (!k->tree) {
    grt_status st = grt__otree_create(&k->tree);
    if (st) return st;
  }
  for (uint32_t i = 0; i < k->n; i++) {
    grt_status st = grt__otree_insert(k->tree, k->e[i].size, k->e[i].addr, k->e[i].value);
    if (st) {
      while (i--) grt__otree_erase(k->tree, k->e[i].size, k->e[i].addr);
      return st;
    }
  }
  k->in_tree = 1;
  return GRT_OK;
}

/* Moves a small tree class back into its array (cap >= ARRAY_MAX already). */
static void to_array(size_class *k) {
  grt__bin_entry e;
  uint32_t n = 0;
  assert(k->cap >= k->n);
  while (grt__otree_first(k->tree, &e)) {
    k->e[n++] = (entry){e.size, e.addr, e.value};
    grt__otree_erase(k->tree, e.size, e.addr);
  }
  assert(n == k->n);
  k->in_tree = 0;
}

grt_status grt__bins_insert(grt__bins *b, uint64_t size, uint64_t addr, void *value) {
  unsigned c = class_of(size);
  size_class *k = &b->cls[c];
  if (!k->in_tree) {
    uint32_t i = pos_ge(k, size, addr);
    if (i < k->n && k->e[i].size == size && k->e[i].addr == addr) return GRT_ERR_INVALID_ARG;
    if (k->n < ARRAY_MAX) {
      if (k->n == k->cap) {
        uint32_t cap = k->cap ? k->cap * 2 : 4;
        entry *e = realloc(k->e, cap * sizeof *e);
        if (!e) return GRT_ERR_NOMEM;
        k->e = e;
        k->cap = cap;
      }
      memmove(&k->e[i + 1], &k->e[i], (k->n - i) * sizeof *k->e);
      k->e[i] = (entry){size, addr, value};
      if (k->n++ == 0) mark(b, c);
      b->count++;
      return GRT_OK;
    }
    grt_status st = to_tree(k);
    if (st) return st;
  }
  grt_status st = grt__otree_insert(k->tree, size, addr, value);
  if (st) return st;
  k->n++;
  b->count++;
  return GRT_OK;
}

bool grt__bins_erase(grt__bins *b, uint64_t size, uint64_t addr) {
  unsigned c = class_of(size);
  size_class *k = &b->cls[c];
  if (k->in_tree) {
    if (!grt__otree_erase(k->tree, size, addr)) return false;
    if (--k->n < ARRAY_MIN) to_array(k);
  } else {
    uint32_t i = pos_ge(k, size, addr);
    if (i >= k->n || k->e[i].size != size || k->e[i].addr != addr) return false;
    memmove(&k->e[i], &k->e[i + 1], (k->n - i - 1) * sizeof *k->e);
    if (--k->n == 0) unmark(b, c);
  }
  b->count--;
  return true;
}

bool grt__bins_lower_bound(const grt__bins *b, uint64_t size, uint64_t addr, grt__bin_entry *out) {
  unsigned c = class_of(size);
  const size_class *k = &b->cls[c];
  if (k->in_tree) {
    if (grt__otree_lower_bound(k->tree, size, addr, out)) return true;
  } else {
    uint32_t i = pos_ge(k, size, addr);
    if (i < k->n) return put(&k->e[i], out);
  }
  return class_min(b, find_ge(b, c + 1), out);
}

bool grt__bins_next(const grt__bins *b, uint64_t size, uint64_t addr, grt__bin_entry *out) {
  unsigned c = class_of(size);
  const size_class *k = &b->cls[c];
  if (k->in_tree) {
    if (grt__otree_next(k->tree, size, addr, out)) return true;
  } else {
    uint32_t i = pos_ge(k, size, addr);
    if (i < k->n && k->e[i].size == size && k->e[i].addr == addr) i++;
    if (i < k->n) return put(&k->e[i], out);
  }
  return class_min(b, find_ge(b, c + 1), out);
}

bool grt__bins_prev(const grt__bins *b, uint64_t size, uint64_t addr, grt__bin_entry *out) {
  unsigned c = class_of(size);
  const size_class *k = &b->cls[c];
  if (k->in_tree) {
    if (grt__otree_prev(k->tree, size, addr, out)) return true;
  } else {
    uint32_t i = pos_ge(k, size, addr);
    if (i > 0) return put(&k->e[i - 1], out);
  }
  return c > 0 && class_max(b, find_le(b, c - 1), out);
}

bool grt__bins_first(const grt__bins *b, grt__bin_entry *out) { return class_min(b, find_ge(b, 0), out); }

bool grt__bins_last(const grt__bins *b, grt__bin_entry *out) {
  return class_max(b, find_le(b, NCLASS - 1), out);
}

size_t grt__bins_count(const grt__bins *b) { return b->count; }
