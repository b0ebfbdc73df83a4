/* approx_range.c — approximate-fit offset allocator (see approx_range.h).
 *
 * Bins: a size s (in granules) maps to a bin like an 8-bit float, exponent and
 * 3 mantissa bits: s < 8 is its own bin; otherwise with h = floor(log2 s) the
 * bin is ((h - 2) << 3) | (the 3 bits below the top one). Rounding DOWN places
 * a free range (every range of bin b is >= b's lower edge); rounding UP picks
 * where a request looks (the lower edge of that bin is >= the request, so any
 * member fits). Two bitmap levels — 32 top bits, 8 leaf bits each — find the
 * lowest non-empty bin at or above that with two bit scans.
 *
 * Every range (free or allocated) is a node: offset and size in granules,
 * links to its address neighbours (for merging) and, when free, to its bin
 * list (inserted at the front, taken from the front). Unused nodes wait on a
 * stack. The node of offset 0 never goes away (merges absorb into the left
 * range), so the checker starts its address walk there.
 */
#include "workloads/approx_range.h"

#include <stdlib.h>

#define MANT 3u
#define NTOP 32u
#define NBIN (NTOP << MANT)
#define LEAF ((1u << MANT) - 1u) /* the mantissa bits: a bin's place in its top group */
#define NONE UINT32_MAX

/* The list and merge steps inlined into alloc and free, as the peer's
 * compiler inlines them: a call per step cost ~60 instructions per W1 pair
 * (311 against the peer's ~250) and made the reference slower than the peer. */
#if defined(__GNUC__)
#define GRT__HOT_INLINE inline __attribute__((always_inline))
#else
#define GRT__HOT_INLINE inline
#endif

enum { UNUSED = 0, FREE = 1, USED = 2 };

typedef struct anode {
  uint32_t off, size;          /* granules */
  uint32_t bin_prev, bin_next; /* bin list, NONE at the ends (free ranges only) */
  uint32_t left, right;        /* address neighbours, NONE at the ends */
  uint8_t state;
} anode;

struct grt__approx {
  uint32_t top;           /* bit t: leaf[t] != 0 */
  uint8_t leaf[NTOP];     /* bit l of leaf[t]: bin (t << MANT | l) is non-empty */
  uint32_t head[NBIN];    /* first range of each bin, NONE when empty */
  anode *nodes;
  uint32_t *unused;       /* stack of unused node indices */
  uint32_t n_unused, max_nodes;
  uint32_t first;         /* the node at offset 0 */
  unsigned shift;         /* log2(granule) */
  uint32_t capacity;      /* granules */
  uint64_t free_units;
};

static inline unsigned top_bit(uint32_t x) { return 31u - (unsigned)__builtin_clz(x); }

/* The bin a free range of `size` granules lives in (rounded down). */
static inline uint32_t bin_down(uint32_t size) {
  if (size < (1u << MANT)) return size;
  unsigned low = top_bit(size) - MANT; /* bits below the mantissa */
  return ((low + 1u) << MANT) | ((size >> low) & LEAF);
}

/* The lowest bin all of whose ranges hold `size` granules (rounded up; a
 * carry out of the mantissa moves to the next exponent). */
static inline uint32_t bin_up(uint32_t size) {
  if (size < (1u << MANT)) return size;
  unsigned low = top_bit(size) - MANT;
  uint32_t b = ((low + 1u) << MANT) + ((size >> low) & LEAF);
  return b + (uint32_t)((size & ((1u << low) - 1u)) != 0);
}

/* Lowest set bit of mask at or above `from` (< 32), or NONE. */
static inline uint32_t lowest_from(uint32_t mask, unsigned from) {
  uint32_t m = mask & (~0u << from);
  return m ? (uint32_t)__builtin_ctz(m) : NONE;
}

static GRT__HOT_INLINE void bin_insert(grt__approx *a, uint32_t i) {
  anode *n = &a->nodes[i];
  uint32_t b = bin_down(n->size), h = a->head[b];
  n->bin_prev = NONE;
  n->bin_next = h;
  if (h != NONE) a->nodes[h].bin_prev = i;
  a->head[b] = i;
  a->leaf[b >> MANT] |= (uint8_t)(1u << (b & LEAF));
  a->top |= 1u << (b >> MANT);
  n->state = FREE;
}

static GRT__HOT_INLINE void bin_remove(grt__approx *a, uint32_t i) {
  anode *n = &a->nodes[i];
  if (n->bin_next != NONE) a->nodes[n->bin_next].bin_prev = n->bin_prev;
  if (n->bin_prev != NONE) {
    a->nodes[n->bin_prev].bin_next = n->bin_next;
    return;
  }
  uint32_t b = bin_down(n->size);
  a->head[b] = n->bin_next;
  if (n->bin_next != NONE) return;
  a->leaf[b >> MANT] &= (uint8_t)~(1u << (b & LEAF)); /* the bin emptied */
  if (!a->leaf[b >> MANT]) a->top &= ~(1u << (b >> MANT));
}

grt_status grt__approx_create(uint64_t capacity, uint64_t granule, uint32_t max_nodes, grt__approx **out) {
  if (!out || !granule || (granule & (granule - 1)) || !capacity || capacity % granule ||
      capacity / granule > UINT32_MAX - 1 || max_nodes < 2 || max_nodes > (1u << 31))
    return GRT_ERR_INVALID_ARG;
  grt__approx *a = calloc(1, sizeof *a);
  if (!a) return GRT_ERR_NOMEM;
  a->nodes = calloc(max_nodes, sizeof *a->nodes);
  a->unused = malloc((size_t)max_nodes * sizeof *a->unused);
  if (!a->nodes || !a->unused) {
    grt__approx_destroy(a);
    return GRT_ERR_NOMEM;
  }
  a->shift = (unsigned)__builtin_ctzll(granule);
  a->capacity = (uint32_t)(capacity / granule);
  a->max_nodes = max_nodes;
  for (uint32_t b = 0; b < NBIN; b++) a->head[b] = NONE;
  for (uint32_t i = 0; i < max_nodes - 1; i++) a->unused[i] = max_nodes - 1 - i; /* pops 1, 2, ... */
  a->n_unused = max_nodes - 1;
  a->first = 0;
  a->nodes[0] = (anode){0, a->capacity, NONE, NONE, NONE, NONE, UNUSED};
  bin_insert(a, 0);
  a->free_units = a->capacity;
  *out = a;
  return GRT_OK;
}

void grt__approx_destroy(grt__approx *a) {
  if (!a) return;
  free(a->nodes);
  free(a->unused);
  free(a);
}

grt_status grt__approx_alloc(grt__approx *a, uint64_t size, uint64_t *offset, uint32_t *handle) {
  if (!offset) return GRT_ERR_INVALID_ARG;
  if (!size || size > (uint64_t)a->capacity << a->shift) return GRT_ERR_SIZE;
  uint32_t units = (uint32_t)((size + (1ULL << a->shift) - 1) >> a->shift);
  uint32_t want = bin_up(units), t = want >> MANT, l = NONE;
  if (a->top & (1u << t)) l = lowest_from(a->leaf[t], want & LEAF);
  if (l == NONE) {
    t = t + 1 < NTOP ? lowest_from(a->top, t + 1) : NONE;
    if (t == NONE) return GRT_ERR_OOM;
    l = (uint32_t)__builtin_ctz(a->leaf[t]);
  }
  uint32_t i = a->head[(t << MANT) | l];
  anode *n = &a->nodes[i];
  uint32_t rest = n->size - units;
  if (rest && !a->n_unused) return GRT_ERR_NOMEM;
  bin_remove(a, i);
  if (rest) {
    uint32_t j = a->unused[--a->n_unused];
    a->nodes[j] = (anode){n->off + units, rest, NONE, NONE, i, n->right, UNUSED};
    if (n->right != NONE) a->nodes[n->right].left = j;
    n->right = j;
    bin_insert(a, j);
  }
  n->size = units;
  n->state = USED;
  a->free_units -= units;
  *offset = (uint64_t)n->off << a->shift;
  if (handle) *handle = i;
  return GRT_OK;
}

/* Node j (free, right of keep) joins keep and goes back to the stack. */
static GRT__HOT_INLINE void absorb(grt__approx *a, uint32_t keep, uint32_t j) {
  anode *k = &a->nodes[keep], *n = &a->nodes[j];
  k->size += n->size;
  k->right = n->right;
  if (n->right != NONE) a->nodes[n->right].left = keep;
  n->state = UNUSED;
  a->unused[a->n_unused++] = j;
}

grt_status grt__approx_free(grt__approx *a, uint32_t handle) {
  if (handle >= a->max_nodes || a->nodes[handle].state == UNUSED) return GRT_ERR_UNKNOWN_POINTER;
  if (a->nodes[handle].state == FREE) return GRT_ERR_DOUBLE_FREE;
  uint32_t i = handle, r = a->nodes[i].right, l = a->nodes[i].left;
  a->free_units += a->nodes[i].size;
  if (r != NONE && a->nodes[r].state == FREE) {
    bin_remove(a, r);
    absorb(a, i, r);
  }
  if (l != NONE && a->nodes[l].state == FREE) {
    bin_remove(a, l);
    absorb(a, l, i);
    i = l;
  }
  bin_insert(a, i);
  return GRT_OK;
}

uint64_t grt__approx_largest_free(const grt__approx *a) {
  if (!a->top) return 0;
  uint32_t t = top_bit(a->top), b = (t << MANT) | top_bit(a->leaf[t]), best = 0;
  for (uint32_t i = a->head[b]; i != NONE; i = a->nodes[i].bin_next)
    if (a->nodes[i].size > best) best = a->nodes[i].size;
  return (uint64_t)best << a->shift;
}

uint64_t grt__approx_free_bytes(const grt__approx *a) { return a->free_units << a->shift; }

/* Bins and bitmaps: lists well linked, members free and in the bin their size
 * rounds down to. Counts the members. */
static grt_status check_bins(const grt__approx *a, uint64_t *members) {
  uint32_t top = 0;
  for (uint32_t b = 0; b < NBIN; b++) {
    int bit = (a->leaf[b >> MANT] >> (b & LEAF)) & 1;
    if (bit != (a->head[b] != NONE)) return GRT_ERR_INTERNAL;
    if (a->leaf[b >> MANT]) top |= 1u << (b >> MANT);
    uint32_t prev = NONE;
    for (uint32_t i = a->head[b]; i != NONE; prev = i, i = a->nodes[i].bin_next) {
      const anode *n = &a->nodes[i];
      if (i >= a->max_nodes || n->state != FREE || n->bin_prev != prev || bin_down(n->size) != b)
        return GRT_ERR_INTERNAL;
      if (++*members > a->max_nodes) return GRT_ERR_INTERNAL; /* a cycle */
    }
  }
  return top == a->top ? GRT_OK : GRT_ERR_INTERNAL;
}

grt_status grt__approx_check(const grt__approx *a) {
  uint64_t off = 0, free_units = 0, free_n = 0, live = 0, members = 0;
  uint32_t prev = NONE;
  int prev_free = 0;
  for (uint32_t i = a->first; i != NONE; prev = i, i = a->nodes[i].right) {
    const anode *n = &a->nodes[i];
    if (i >= a->max_nodes || n->state == UNUSED || n->off != off || !n->size || n->left != prev)
      return GRT_ERR_INTERNAL;
    int is_free = n->state == FREE;
    if (is_free && prev_free) return GRT_ERR_INTERNAL;
    if (is_free) {
      free_units += n->size;
      free_n++;
    }
    prev_free = is_free;
    off += n->size;
    if (++live > a->max_nodes) return GRT_ERR_INTERNAL; /* a cycle */
  }
  if (off != a->capacity || free_units != a->free_units) return GRT_ERR_INTERNAL;
  if (live + a->n_unused != a->max_nodes) return GRT_ERR_INTERNAL;
  for (uint32_t k = 0; k < a->n_unused; k++)
    if (a->unused[k] >= a->max_nodes || a->nodes[a->unused[k]].state != UNUSED) return GRT_ERR_INTERNAL;
  grt_status st = check_bins(a, &members);
  return st ? st : members == free_n ? GRT_OK : GRT_ERR_INTERNAL;
}
