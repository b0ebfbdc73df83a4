/* buddy.c — the "buddy" policy: power-of-two blocks, split on demand,
 * coalesced with their buddy on free (the classic kernel page
 * allocator: O(log n), bounded external fragmentation, up to ~50% internal
 * waste, counted as allocated_bytes (the block) minus requested_bytes).
 *
 * A segment of 2^top bytes (default 64 MiB; a larger request gets a segment of
 * its own power of two) is one block of order top when free. A request takes
 * the smallest order k >= 9 (512 B) with 2^k >= size; a free block of the
 * lowest order j >= k is split j - k times, the upper halves going to the free
 * lists. The buddy of the block at offset o (from the segment base) of order
 * k is at offset o ^ 2^k; on free the block merges with its buddy while that
 * is free and of the same order.
 *
 * Invariants (buddy_check): the blocks of a segment tile it, each aligned to
 * its size relative to the base; every block (free or live) is in the address
 * map; a free block is in the free list of its order exactly once and its
 * buddy is not a free block of the same order (coalescing is complete); the
 * statistics equal a recount (inactive_split = free blocks below the top order).
 * Whole free segments stay cached until empty_cache or a device OOM.
 */
#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "policy/zoo.h"
#include "base/status.h"
#include "base/u64map.h"

#define BUDDY_MIN_ORDER 9
#define BUDDY_ORDERS 64
#define BUDDY_DEFAULT_SEGMENT ((uint64_t)64 << 20)

typedef struct bseg {
  grt__zseg seg;  /* its range (the segment table keeps a copy) */
  unsigned top;   /* seg.size == 2^top */
} bseg;

typedef struct bbk bbk;
struct bbk {
  grt_devptr ptr;
  uint64_t requested; /* 0 when free */
  bseg *seg;
  unsigned order;
  int is_free;
  bbk *prev, *next;   /* the free list of its order (free blocks only) */
};

typedef struct buddy {
  grt__segtable segs;         /* bseg*, by base */
  grt__u64map blocks;         /* address -> bbk, free and live */
  bbk *free_list[BUDDY_ORDERS];
  size_t n_free[BUDDY_ORDERS];
  uint64_t seg_size;          /* a power of two, for new segments */
} buddy;

static uint64_t bytes_of(unsigned order) { return (uint64_t)1 << order; }

static unsigned order_for(uint64_t size) {
  unsigned o = BUDDY_MIN_ORDER;
  while (bytes_of(o) < size) o++;
  return o;
}

static bseg *seg_at(const buddy *b, size_t i) { return grt__segtable_at(&b->segs, i); }

static grt_status buddy_create(grt_allocator *a) {
  buddy *b = calloc(1, sizeof *b);
  if (!b) return GRT_ERR_NOMEM;
  grt__u64map_init(&b->blocks);
  b->seg_size = BUDDY_DEFAULT_SEGMENT;
  a->impl = b;
  return GRT_OK;
}

static void buddy_destroy(grt_allocator *a) {
  buddy *b = a->impl;
  grt__u64map_iter it = grt__u64map_begin(&b->blocks);
  void *k;
  while (grt__u64map_next(&b->blocks, &it, NULL, &k)) free(k);
  for (size_t i = 0; i < b->segs.n; i++) {
    /* teardown (void op): a refusal leaves the segment to the device */
    grt__ignore(grt__zoo_device_free(a, seg_at(b, i)->seg.base, seg_at(b, i)->seg.size));
    free(seg_at(b, i));
  }
  grt__segtable_free(&b->segs);
  grt__u64map_free(&b->blocks);
  free(b);
}

/* ---- free lists ---- */

static void push_free(grt_allocator *a, bbk *k) {
  buddy *b = a->impl;
  k->is_free = 1;
  k->requested = 0;
  k->prev = NULL;
  k->next = b->free_list[k->order];
  if (k->next) k->next->prev = k;
  b->free_list[k->order] = k;
  b->n_free[k->order]++;
  if (k->order < k->seg->top) grt__zoo_account_split(a, bytes_of(k->order), +1);
}

static void pop_free(grt_allocator *a, bbk *k) {
  buddy *b = a->impl;
  if (k->prev) k->prev->next = k->next; else b->free_list[k->order] = k->next;
  if (k->next) k->next->prev = k->prev;
  k->prev = k->next = NULL;
  k->is_free = 0;
  b->n_free[k->order]--;
  if (k->order < k->seg->top) grt__zoo_account_split(a, bytes_of(k->order), -1);
}

static grt_devptr buddy_of(const bbk *k) {
  return k->seg->seg.base + ((k->ptr - k->seg->seg.base) ^ bytes_of(k->order));
}

/* Frees k (not in any list) and merges it with its buddies as far as they go. */
static void coalesce_insert(grt_allocator *a, bbk *k) {
  buddy *b = a->impl;
  while (k->order < k->seg->top) {
    bbk *mate = grt__u64map_get(&b->blocks, buddy_of(k));
    if (!mate || !mate->is_free || mate->order != k->order) break;
    pop_free(a, mate);
    bbk *upper = mate->ptr > k->ptr ? mate : k;
    bbk *lower = upper == mate ? k : mate;
    grt__u64map_del(&b->blocks, upper->ptr);
    free(upper);
    k = lower;
    k->order++;
  }
  push_free(a, k);
}

/* ---- segments ---- */

/* Block structs a malloc may need (one per split and the new segment's),
 * allocated before anything changes; what is left is freed at the end. */
typedef struct spares {
  bbk *k[BUDDY_ORDERS + 1];
  unsigned n;
} spares;

static bool spares_fill(spares *p, unsigned n) {
  while (p->n < n) {
    bbk *k = calloc(1, sizeof *k);
    if (!k) return false;
    p->k[p->n++] = k;
  }
  return true;
}

static bbk *spares_take(spares *p) {
  assert(p->n); /* filled for every split */
  return p->k[--p->n];
}

static void spares_free(spares *p) {
  while (p->n) free(p->k[--p->n]);
}

/* The device segment of s, of order top, as one free block k (the structs,
 * the table room and the map entry are reserved). */
static grt_status new_segment(grt_allocator *a, bseg *s, bbk *k, unsigned top) {
  buddy *b = a->impl;
  grt_status st = grt__zoo_device_malloc(a, bytes_of(top), &s->seg.base);
  if (st) return st;
  bool put = grt__u64map_put(&b->blocks, s->seg.base, k);
  assert(put);
  (void)put;
  s->seg.size = bytes_of(top);
  s->top = top;
  grt__segtable_add(&b->segs, s->seg.base, s->seg.size, s);
  *k = (bbk){.ptr = s->seg.base, .seg = s, .order = top};
  push_free(a, k);
  return GRT_OK;
}

static int segment_is_free(const buddy *b, const bseg *s) {
  const bbk *k = grt__u64map_get(&b->blocks, s->seg.base);
  return k->is_free && k->order == s->top;
}

/* Stops at the first segment the device refuses (its own memory), which stays. */
static grt_status release_free_segments(grt_allocator *a) {
  buddy *b = a->impl;
  for (size_t i = b->segs.n; i-- > 0;) {
    bseg *s = seg_at(b, i);
    if (!segment_is_free(b, s)) continue;
    grt_status st = grt__zoo_device_free(a, s->seg.base, s->seg.size);
    if (st) return st;
    bbk *k = grt__u64map_del(&b->blocks, s->seg.base);
    pop_free(a, k);
    free(k);
    grt__segtable_remove(&b->segs, s->seg.base, s);
    free(s);
  }
  return GRT_OK;
}

/* The order of a new segment for order k: the configured size, or 2^k when larger. */
static unsigned grow_order(const buddy *b, unsigned k) {
  unsigned top = order_for(b->seg_size);
  return top < k ? k : top;
}

/* A new segment able to hold order k: the configured size; after releasing the
 * cached free segments; last, a segment of exactly 2^k. s and its block k come
 * reserved (freed by the caller on failure). */
static grt_status grow(grt_allocator *a, unsigned k, bseg *s, bbk *blk) {
  unsigned top = grow_order(a->impl, k);
  grt_status st = new_segment(a, s, blk, top);
  if (st == GRT_OK || st == GRT_ERR_NOMEM || (st = release_free_segments(a))) return st;
  st = new_segment(a, s, blk, top);
  if (st && st != GRT_ERR_NOMEM && top > k) st = new_segment(a, s, blk, k);
  return st;
}

/* ---- malloc / free ---- */

static bbk *lowest_free(const buddy *b, unsigned k) {
  for (unsigned j = k; j < BUDDY_ORDERS; j++)
    if (b->free_list[j]) return b->free_list[j];
  return NULL;
}

/* Splits k (taken off its list) down to order `want`; the upper halves go
 * free. Their structs and map entries are reserved. */
static void split_to(grt_allocator *a, bbk *k, unsigned want, spares *sp) {
  buddy *b = a->impl;
  while (k->order > want) {
    bbk *upper = spares_take(sp);
    k->order--;
    *upper = (bbk){.ptr = k->ptr + bytes_of(k->order), .seg = k->seg, .order = k->order};
    bool put = grt__u64map_put(&b->blocks, upper->ptr, upper);
    assert(put);
    (void)put;
    push_free(a, upper);
  }
}

/* Everything a malloc may need from host memory, before anything changes:
 * the split halves' structs and map entries, and for a new segment its struct,
 * its block's struct, map entry and table room. */
static grt_status reserve_malloc(buddy *b, const bbk *blk, unsigned k, spares *sp, bseg **seg) {
  unsigned need = blk ? blk->order - k : grow_order(b, k) - k + 1;
  *seg = blk ? NULL : calloc(1, sizeof **seg);
  if ((blk || (*seg && !grt__segtable_reserve(&b->segs, 1))) && spares_fill(sp, need) &&
      grt__u64map_reserve(&b->blocks, need))
    return GRT_OK;
  free(*seg);
  spares_free(sp);
  return GRT_ERR_NOMEM;
}

static grt_status buddy_malloc(grt_allocator *a, uint64_t size, grt_stream_id stream, grt_devptr *out) {
  buddy *b = a->impl;
  (void)stream; /* one heap for every stream */
  unsigned k = order_for(size);
  bbk *blk = lowest_free(b, k);
  spares sp = {.n = 0};
  bseg *seg;
  grt_status st = reserve_malloc(b, blk, k, &sp, &seg);
  if (st) return st;
  if (blk) {
    a->stats.num_cache_hits++;
  } else {
    bbk *first = spares_take(&sp);
    if ((st = grow(a, k, seg, first))) {
      free(first);
      free(seg);
      spares_free(&sp);
      return grt__zoo_oom(a, st, size, "no free block of that order and the device cannot supply a segment");
    }
    blk = lowest_free(b, k);
  }
  pop_free(a, blk);
  split_to(a, blk, k, &sp);
  spares_free(&sp);
  blk->requested = size;
  grt__zoo_account(a, bytes_of(k), size, +1);
  *out = blk->ptr;
  return GRT_OK;
}

/* Why ptr is not a live block: in free memory, inside a live block, or foreign. */
static grt_status classify(grt_allocator *a, grt_devptr ptr) {
  buddy *b = a->impl;
  const bseg *s = grt__segtable_find(&b->segs, ptr);
  for (unsigned o = BUDDY_MIN_ORDER; s && o <= s->top; o++) {
    grt_devptr start = s->seg.base + ((ptr - s->seg.base) & ~(bytes_of(o) - 1));
    const bbk *k = grt__u64map_get(&b->blocks, start);
    if (!k || k->order != o) continue;
    if (k->is_free) {
      grt__alloc_set_error(a, "double free of 0x%llx: the address lies in a free block of order %u",
                           (unsigned long long)ptr, o);
      return GRT_ERR_DOUBLE_FREE;
    }
    grt__alloc_set_error(a, "0x%llx points %llu bytes inside the block at 0x%llx", (unsigned long long)ptr,
                         (unsigned long long)(ptr - k->ptr), (unsigned long long)k->ptr);
    return GRT_ERR_INTERIOR_POINTER;
  }
  grt__alloc_set_error(a, "0x%llx was not returned by this allocator", (unsigned long long)ptr);
  return GRT_ERR_UNKNOWN_POINTER;
}

static bbk *live_block(const buddy *b, grt_devptr ptr) {
  bbk *k = grt__u64map_get(&b->blocks, ptr);
  return k && !k->is_free ? k : NULL;
}

static grt_status buddy_free(grt_allocator *a, grt_devptr ptr) {
  bbk *k = live_block(a->impl, ptr);
  if (!k) return classify(a, ptr);
  grt__zoo_account(a, bytes_of(k->order), k->requested, -1);
  coalesce_insert(a, k);
  return GRT_OK;
}

static grt_status buddy_record_stream(grt_allocator *a, grt_devptr ptr, grt_stream_id stream) {
  (void)stream; /* stream order is the executor's concern */
  return live_block(a->impl, ptr) ? GRT_OK : classify(a, ptr);
}

static grt_status buddy_empty_cache(grt_allocator *a) { return release_free_segments(a); }

static grt_status buddy_block_info(grt_allocator *a, grt_devptr ptr, uint64_t *size, uint64_t *requested) {
  const bbk *k = live_block(a->impl, ptr);
  if (!k) return classify(a, ptr);
  *size = bytes_of(k->order);
  *requested = k->requested;
  return GRT_OK;
}

static void buddy_stats(grt_allocator *a, grt_alloc_stats *out) {
  buddy *b = a->impl;
  out->largest_free_block = 0;
  for (unsigned j = BUDDY_ORDERS; j-- > 0;)
    if (b->n_free[j]) {
      out->largest_free_block = bytes_of(j);
      break;
    }
  out->pending_free_blocks = 0;
}

/* ---- snapshot and the structure walker ---- */

static grt_status snap_segment(const buddy *b, const bseg *s, grt_alloc_snapshot *out) {
  size_t n = 0;
  grt_devptr end = s->seg.base + s->seg.size;
  for (grt_devptr at = s->seg.base; at < end; n++) at += bytes_of(((bbk *)grt__u64map_get(&b->blocks, at))->order);
  grt_snapshot_segment *seg = grt__zoo_snap_add(out, s->seg.base, n);
  if (!seg) return GRT_ERR_NOMEM;
  seg->n_blocks = n;
  n = 0;
  for (grt_devptr at = s->seg.base; at < end; n++) {
    const bbk *k = grt__u64map_get(&b->blocks, at);
    seg->blocks[n] = (grt_snapshot_block){at, bytes_of(k->order), k->requested,
                                          k->is_free ? GRT_BLOCK_INACTIVE : GRT_BLOCK_ACTIVE_ALLOCATED};
    at += bytes_of(k->order);
  }
  grt__snapshot_segment_totals(seg);
  return GRT_OK;
}

static grt_status buddy_snapshot(grt_allocator *a, grt_alloc_snapshot *out) {
  buddy *b = a->impl;
  grt_status st = grt__zoo_snap_begin(out, b->segs.n);
  for (size_t i = 0; st == GRT_OK && i < b->segs.n; i++) st = snap_segment(b, seg_at(b, i), out);
  return st;
}

static grt_status check_block(const buddy *b, const bseg *s, const bbk *k, grt__zoo_recount *r, size_t *n_free,
                              char *msg, size_t msg_size) {
  if (k->seg != s || k->order < BUDDY_MIN_ORDER || k->order > s->top || (k->ptr - s->seg.base) % bytes_of(k->order))
    GRT__ZOO_FAIL("block 0x%llx: bad order %u or misaligned in segment 0x%llx", (unsigned long long)k->ptr, k->order,
                  (unsigned long long)s->seg.base);
  if (k->is_free) {
    const bbk *mate = k->order < s->top ? grt__u64map_get(&b->blocks, buddy_of(k)) : NULL;
    if (mate && mate->is_free && mate->order == k->order)
      GRT__ZOO_FAIL("free block 0x%llx and its buddy 0x%llx were not coalesced", (unsigned long long)k->ptr,
                    (unsigned long long)mate->ptr);
    n_free[k->order]++;
    if (k->order < s->top) {
      r->inactive_split++;
      r->inactive_split_bytes += (int64_t)bytes_of(k->order);
    }
    return GRT_OK;
  }
  if (k->requested == 0 || k->requested > bytes_of(k->order) || order_for(k->requested) != k->order)
    GRT__ZOO_FAIL("block 0x%llx: order %u does not fit request %llu", (unsigned long long)k->ptr, k->order,
                  (unsigned long long)k->requested);
  r->allocation++;
  r->allocated_bytes += (int64_t)bytes_of(k->order);
  r->requested_bytes += (int64_t)k->requested;
  return GRT_OK;
}

static grt_status check_segment(const buddy *b, const bseg *s, grt__zoo_recount *r, size_t *n_free, size_t *n_blocks,
                                char *msg, size_t msg_size) {
  if (s->seg.size != bytes_of(s->top)) GRT__ZOO_FAIL("segment 0x%llx: size is not 2^top", (unsigned long long)s->seg.base);
  grt_devptr end = s->seg.base + s->seg.size;
  for (grt_devptr at = s->seg.base; at < end;) {
    const bbk *k = grt__u64map_get(&b->blocks, at);
    if (!k || k->ptr != at) GRT__ZOO_FAIL("segment 0x%llx: no block at 0x%llx", (unsigned long long)s->seg.base, (unsigned long long)at);
    grt_status st = check_block(b, s, k, r, n_free, msg, msg_size);
    if (st) return st;
    at += bytes_of(k->order);
    ++*n_blocks;
  }
  r->segment++;
  r->reserved_bytes += (int64_t)s->seg.size;
  return GRT_OK;
}

static grt_status check_free_lists(const buddy *b, const size_t *n_free, char *msg, size_t msg_size) {
  for (unsigned j = 0; j < BUDDY_ORDERS; j++) {
    size_t n = 0;
    for (const bbk *k = b->free_list[j]; k; k = k->next, n++)
      if (!k->is_free || k->order != j || (k->next && k->next->prev != k) || grt__u64map_get(&b->blocks, k->ptr) != k)
        GRT__ZOO_FAIL("free list of order %u: bad entry 0x%llx", j, (unsigned long long)k->ptr);
    if (n != b->n_free[j] || n != n_free[j])
      GRT__ZOO_FAIL("order %u: %zu listed, %zu counted, %zu found in segments", j, n, b->n_free[j], n_free[j]);
  }
  return GRT_OK;
}

static grt_status buddy_check(grt_allocator *a, char *msg, size_t msg_size) {
  buddy *b = a->impl;
  grt__zoo_recount r;
  memset(&r, 0, sizeof r);
  size_t n_free[BUDDY_ORDERS] = {0}, n_blocks = 0;
  for (size_t i = 0; i < b->segs.n; i++) {
    if (i > 0 && seg_at(b, i - 1)->seg.base + seg_at(b, i - 1)->seg.size > seg_at(b, i)->seg.base)
      GRT__ZOO_FAIL("segments 0x%llx and 0x%llx overlap", (unsigned long long)seg_at(b, i - 1)->seg.base,
                    (unsigned long long)seg_at(b, i)->seg.base);
    grt_status st = check_segment(b, seg_at(b, i), &r, n_free, &n_blocks, msg, msg_size);
    if (st) return st;
  }
  if (n_blocks != b->blocks.count) GRT__ZOO_FAIL("%zu blocks in the map but %zu tile the segments", b->blocks.count, n_blocks);
  grt_status st = check_free_lists(b, n_free, msg, msg_size);
  return st ? st : grt__zoo_check_stats(a, &r, msg, msg_size);
}

/* ---- settings (grt_alloc_set / grt_alloc_get) ---- */

static grt_status buddy_set(grt_allocator *a, const char *key, uint64_t bytes) {
  if (strcmp(key, "segment_size")) return GRT_ERR_NOT_FOUND;
  if (bytes < bytes_of(BUDDY_MIN_ORDER) || (bytes & (bytes - 1)) || bytes > GRT__MAX_REQUEST) {
    grt__alloc_set_error(a, "buddy segment size %llu is not a power of two >= 512", (unsigned long long)bytes);
    return GRT_ERR_INVALID_ARG;
  }
  ((buddy *)a->impl)->seg_size = bytes;
  return GRT_OK;
}

static grt_status buddy_get(grt_allocator *a, const char *key, uint64_t *value) {
  if (strcmp(key, "segment_size")) return GRT_ERR_NOT_FOUND;
  *value = ((const buddy *)a->impl)->seg_size;
  return GRT_OK;
}

const grt__alloc_ops grt__buddy_ops = {
    .name = "buddy",
    .create = buddy_create,
    .destroy = buddy_destroy,
    .malloc = buddy_malloc,
    .free = buddy_free,
    .record_stream = buddy_record_stream,
    .empty_cache = buddy_empty_cache,
    .block_info = buddy_block_info,
    .stats = buddy_stats,
    .snapshot = buddy_snapshot,
    .check = buddy_check,
    .set = buddy_set,
    .get = buddy_get,
    .settings = "segment_size",
};
