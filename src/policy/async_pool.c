/* async_pool.c — the "async" policy: a model of the driver's stream-ordered
 * pool behind cudaMallocAsync (one pool per device), kept apart from PyTorch's
 * caching allocator on purpose: different owner, different knobs.
 *
 * The pool grows by device segments of at least 32 MiB (bigger requests: the
 * request rounded to the 2 MiB mapping granule). A request, rounded to 512 B,
 * takes the best fit among all free blocks (the grt__bins order: smallest
 * size, then lowest address); a remainder of 512 B or more is split off and
 * stays free; a freed block merges with free neighbours. Freed memory is
 * reusable at once; a block last freed on another stream counts one event
 * edge in cross_stream_syncs (the executor will enforce that edge; here the
 * pool only models the mechanics).
 *
 * Release threshold (cudaMemPoolAttrReleaseThreshold, default 0): at a sync
 * point whole free segments go back to the device while reserved bytes exceed
 * it. grt_alloc_empty_cache is the sync point here (the executor adds stream
 * and device syncs later); grt_alloc_async_trim_to releases down to a target
 * at once. Pool attributes map onto the stats: reserved current/high =
 * reserved_bytes current/peak, used current/high = allocated_bytes current/peak.
 *
 * Invariants (async_check): blocks tile their segment in address order; a free
 * block is in the bins exactly once and never next to another free block; an
 * allocated block is in the live map; statistics equal a recount
 * (inactive_split = free blocks in segments split in several blocks).
 */
#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "alloc/bins.h"
#include "policy/zoo.h"
#include "base/status.h"
#include "base/u64map.h"

#define ASYNC_CHUNK ((uint64_t)32 << 20)  /* the smallest growth of the pool */
#define ASYNC_GRANULE ((uint64_t)2 << 20) /* physical mapping granule */

typedef struct ablk ablk;

typedef struct aseg {
  grt__zseg seg; /* its range (the segment table keeps a copy) */
  ablk *head;
} aseg;

struct ablk {
  grt_devptr ptr;
  uint64_t size, requested;
  aseg *seg;
  ablk *prev, *next;      /* neighbours in the segment */
  int allocated;
  int used;               /* has served an allocation since the device supplied it */
  grt_stream_id stream;   /* allocated: the user's stream; free and used: the stream that freed it */
};

typedef struct apool {
  grt__segtable segs;         /* aseg*, by base */
  grt__u64map live;           /* address -> allocated ablk */
  grt__bins *free;            /* free blocks keyed (size, address) */
  uint64_t release_threshold; /* bytes */
} apool;

static aseg *seg_at(const apool *p, size_t i) { return grt__segtable_at(&p->segs, i); }
static int is_split(const ablk *b) { return b->prev || b->next; }
static uint64_t reserved_now(const grt_allocator *a) { return (uint64_t)a->stats.reserved_bytes[GRT_STAT_ALL].current; }

static grt_status async_create(grt_allocator *a) {
  apool *p = calloc(1, sizeof *p);
  if (!p || grt__bins_create(&p->free)) {
    free(p);
    return GRT_ERR_NOMEM;
  }
  grt__u64map_init(&p->live);
  a->impl = p;
  return GRT_OK;
}

static void async_destroy(grt_allocator *a) {
  apool *p = a->impl;
  for (size_t i = 0; i < p->segs.n; i++) {
    aseg *s = seg_at(p, i);
    for (ablk *b = s->head, *next; b; b = next) {
      next = b->next;
      free(b);
    }
    /* teardown (void op): a refusal leaves the segment to the device */
    grt__ignore(grt__zoo_device_free(a, s->seg.base, s->seg.size));
    free(s);
  }
  grt__segtable_free(&p->segs);
  grt__u64map_free(&p->live);
  grt__bins_destroy(p->free);
  free(p);
}

/* ---- the free set: inactive_split is counted on the way in and out ---- */

/* The caller reserved the insert (grt__bins_reserve): it cannot fail. */
static void add_free(grt_allocator *a, ablk *b) {
  apool *p = a->impl;
  grt_status st = grt__bins_insert(p->free, b->size, b->ptr, b);
  assert(st == GRT_OK);
  (void)st;
  if (is_split(b)) grt__zoo_account_split(a, b->size, +1);
}

static void erase_free(grt_allocator *a, ablk *b) {
  apool *p = a->impl;
  grt__bins_erase(p->free, b->size, b->ptr);
  if (is_split(b)) grt__zoo_account_split(a, b->size, -1);
}

/* ---- segments ---- */

/* The device segment of s as one free block b (their structs, the table room
 * and the insert are reserved). */
static grt_status new_segment(grt_allocator *a, aseg *s, ablk *b, uint64_t size) {
  apool *p = a->impl;
  grt_status st = grt__zoo_device_malloc(a, size, &s->seg.base);
  if (st) return st;
  *b = (ablk){.ptr = s->seg.base, .size = size, .seg = s};
  add_free(a, b);
  s->seg.size = size;
  s->head = b;
  grt__segtable_add(&p->segs, s->seg.base, s->seg.size, s);
  return GRT_OK;
}

/* The device's status when it refuses (its own memory): nothing changes then. */
static grt_status release_segment(grt_allocator *a, aseg *s) {
  apool *p = a->impl;
  grt_status st = grt__zoo_device_free(a, s->seg.base, s->seg.size);
  if (st) return st;
  erase_free(a, s->head);
  free(s->head);
  grt__segtable_remove(&p->segs, s->seg.base, s);
  free(s);
  return GRT_OK;
}

/* Releases whole free segments, largest first, while reserved bytes exceed
 * target; stops at a segment the device refuses. */
static grt_status release_down_to(grt_allocator *a, uint64_t target) {
  apool *p = a->impl;
  grt__bin_entry e;
  grt_status st = GRT_OK;
  int have = grt__bins_last(p->free, &e);
  while (have && reserved_now(a) > target && !st) {
    grt__bin_entry cur = e;
    have = grt__bins_prev(p->free, cur.size, cur.addr, &e);
    ablk *b = cur.value;
    if (!is_split(b)) st = release_segment(a, b->seg);
  }
  return st;
}

/* Grows the pool for a request of size bytes: a chunk; after trimming the
 * pool's free segments; last, just the request rounded to the granule. Every
 * try uses the structs s and b reserved by the caller. */
static grt_status grow(grt_allocator *a, uint64_t size, aseg *s, ablk *b) {
  uint64_t fit = grt__zoo_round(size, ASYNC_GRANULE);
  uint64_t want = fit > ASYNC_CHUNK ? fit : ASYNC_CHUNK;
  grt_status st = new_segment(a, s, b, want);
  if (st == GRT_OK || st == GRT_ERR_NOMEM || (st = release_down_to(a, 0))) return st;
  st = new_segment(a, s, b, want);
  if (st && st != GRT_ERR_NOMEM && want > fit) st = new_segment(a, s, b, fit);
  if (st && st != GRT_ERR_NOMEM && fit > size) st = new_segment(a, s, b, size);
  return st;
}

/* ---- malloc / free ---- */

static ablk *best_fit(apool *p, uint64_t size) {
  grt__bin_entry e;
  return grt__bins_lower_bound(p->free, size, 0, &e) ? e.value : NULL;
}

/* Cuts the tail of b (just taken from the free set) beyond size into the free
 * block r (reserved, with its insert); false when there is no tail (r unused). */
static bool split(grt_allocator *a, ablk *b, uint64_t size, ablk *r) {
  if (b->size - size < GRT_MIN_BLOCK_SIZE) return false;
  *r = (ablk){.ptr = b->ptr + size, .size = b->size - size, .seg = b->seg, .prev = b, .next = b->next,
              .used = b->used, .stream = b->stream};
  if (b->next) b->next->prev = r;
  b->next = r;
  b->size = size;
  add_free(a, r);
  return true;
}

/* Everything a malloc may need from host memory, before anything changes: the
 * split's block, the live entry, two free-set inserts (a new segment's block,
 * the remainder) and, without a fit, a new segment's structs and table room. */
static grt_status reserve_malloc(apool *p, bool fit, ablk **r, aseg **s, ablk **sb) {
  *r = calloc(1, sizeof **r);
  *s = fit ? NULL : calloc(1, sizeof **s);
  *sb = fit ? NULL : calloc(1, sizeof **sb);
  if (*r && (fit || (*s && *sb && !grt__segtable_reserve(&p->segs, 1))) && grt__u64map_reserve(&p->live, 1) &&
      !grt__bins_reserve(p->free, 2))
    return GRT_OK;
  free(*r);
  free(*s);
  free(*sb);
  return GRT_ERR_NOMEM;
}

static grt_status async_malloc(grt_allocator *a, uint64_t size, grt_stream_id stream, grt_devptr *out) {
  apool *p = a->impl;
  uint64_t rounded = grt__zoo_round(size, GRT_MIN_BLOCK_SIZE);
  ablk *b = best_fit(p, rounded), *r, *sb;
  aseg *s;
  grt_status st = reserve_malloc(p, b != NULL, &r, &s, &sb);
  if (st) return st;
  if (b) {
    a->stats.num_cache_hits++;
  } else if ((st = grow(a, rounded, s, sb))) {
    free(r);
    free(s);
    free(sb);
    return grt__zoo_oom(a, st, size, "no free block in the pool fits and the device cannot grow it");
  } else {
    b = best_fit(p, rounded);
  }
  erase_free(a, b);
  bool put = grt__u64map_put(&p->live, b->ptr, b);
  assert(put); /* room reserved */
  (void)put;
  if (!split(a, b, rounded, r)) free(r);
  if (b->used && b->stream != stream) a->stats.cross_stream_syncs++; /* reuse after another stream's free */
  b->allocated = 1;
  b->used = 1;
  b->requested = size;
  b->stream = stream;
  grt__zoo_account(a, b->size, size, +1);
  *out = b->ptr;
  return GRT_OK;
}

/* Why ptr is not an allocated block: in free memory, inside a block, or foreign. */
static grt_status classify(grt_allocator *a, grt_devptr ptr) {
  apool *p = a->impl;
  const aseg *s = grt__segtable_find(&p->segs, ptr);
  for (const ablk *b = s ? s->head : NULL; b; b = b->next) {
    if (ptr < b->ptr || ptr - b->ptr >= b->size) continue;
    if (!b->allocated) {
      grt__alloc_set_error(a, "double free of 0x%llx: the address lies in free pool memory", (unsigned long long)ptr);
      return GRT_ERR_DOUBLE_FREE;
    }
    grt__alloc_set_error(a, "0x%llx points %llu bytes inside the block at 0x%llx", (unsigned long long)ptr,
                         (unsigned long long)(ptr - b->ptr), (unsigned long long)b->ptr);
    return GRT_ERR_INTERIOR_POINTER;
  }
  grt__alloc_set_error(a, "0x%llx was not returned by this allocator", (unsigned long long)ptr);
  return GRT_ERR_UNKNOWN_POINTER;
}

/* lo absorbs its next neighbour hi (already out of the free set). */
static void merge(ablk *lo, ablk *hi) {
  lo->size += hi->size;
  lo->next = hi->next;
  if (hi->next) hi->next->prev = lo;
  free(hi);
}

static grt_status async_free(grt_allocator *a, grt_devptr ptr) {
  apool *p = a->impl;
  ablk *b = grt__u64map_get(&p->live, ptr);
  if (!b) return classify(a, ptr);
  if (grt__bins_reserve(p->free, 1)) return GRT_ERR_NOMEM; /* the merged block's insert, before any change */
  grt__u64map_del(&p->live, ptr);
  grt__zoo_account(a, b->size, b->requested, -1);
  b->allocated = 0;
  b->requested = 0;
  grt_stream_id stream = b->stream;
  if (b->next && !b->next->allocated) {
    erase_free(a, b->next);
    merge(b, b->next);
  }
  if (b->prev && !b->prev->allocated) {
    b = b->prev;
    erase_free(a, b);
    merge(b, b->next);
  }
  b->stream = stream;
  b->used = 1;
  add_free(a, b);
  return GRT_OK;
}

static grt_status async_record_stream(grt_allocator *a, grt_devptr ptr, grt_stream_id stream) {
  (void)stream; /* stream order is the executor's concern */
  return grt__u64map_get(&((apool *)a->impl)->live, ptr) ? GRT_OK : classify(a, ptr);
}

/* A sync point: the release threshold applies. */
static grt_status async_empty_cache(grt_allocator *a) {
  grt_status st = release_down_to(a, ((apool *)a->impl)->release_threshold);
  if (!st) a->stats.num_sync_all_streams++;
  return st;
}

static grt_status async_block_info(grt_allocator *a, grt_devptr ptr, uint64_t *size, uint64_t *requested) {
  const ablk *b = grt__u64map_get(&((apool *)a->impl)->live, ptr);
  if (!b) return classify(a, ptr);
  *size = b->size;
  *requested = b->requested;
  return GRT_OK;
}

static void async_stats(grt_allocator *a, grt_alloc_stats *out) {
  grt__bin_entry e;
  out->largest_free_block = grt__bins_last(((apool *)a->impl)->free, &e) ? e.size : 0;
  out->pending_free_blocks = 0;
}

/* ---- snapshot and the structure walker ---- */

static grt_status snap_segment(const aseg *s, grt_alloc_snapshot *out) {
  size_t n = 0;
  for (const ablk *b = s->head; b; b = b->next) n++;
  grt_snapshot_segment *seg = grt__zoo_snap_add(out, s->seg.base, n);
  if (!seg) return GRT_ERR_NOMEM;
  seg->n_blocks = n;
  n = 0;
  for (const ablk *b = s->head; b; b = b->next)
    seg->blocks[n++] = (grt_snapshot_block){b->ptr, b->size, b->requested,
                                            b->allocated ? GRT_BLOCK_ACTIVE_ALLOCATED : GRT_BLOCK_INACTIVE};
  grt__snapshot_segment_totals(seg);
  return GRT_OK;
}

static grt_status async_snapshot(grt_allocator *a, grt_alloc_snapshot *out) {
  apool *p = a->impl;
  grt_status st = grt__zoo_snap_begin(out, p->segs.n);
  for (size_t i = 0; st == GRT_OK && i < p->segs.n; i++) st = snap_segment(seg_at(p, i), out);
  return st;
}

static grt_status check_block(const apool *p, const aseg *s, const ablk *b, grt__zoo_recount *r, char *msg,
                              size_t msg_size) {
  if (b->seg != s || (b->next && b->next->prev != b) || (b->next && b->ptr + b->size != b->next->ptr))
    GRT__ZOO_FAIL("block 0x%llx: broken links or does not touch its next", (unsigned long long)b->ptr);
  if (b->size == 0 || b->size % GRT_MIN_BLOCK_SIZE)
    GRT__ZOO_FAIL("block 0x%llx: bad size %llu", (unsigned long long)b->ptr, (unsigned long long)b->size);
  if (!b->allocated) {
    grt__bin_entry e;
    if (!grt__bins_lower_bound(p->free, b->size, b->ptr, &e) || e.value != b || e.addr != b->ptr)
      GRT__ZOO_FAIL("free block 0x%llx is not in the free set", (unsigned long long)b->ptr);
    if (b->next && !b->next->allocated) GRT__ZOO_FAIL("free block 0x%llx and its next were not merged", (unsigned long long)b->ptr);
    if (is_split(b)) {
      r->inactive_split++;
      r->inactive_split_bytes += (int64_t)b->size;
    }
    return GRT_OK;
  }
  if (grt__u64map_get(&p->live, b->ptr) != b) GRT__ZOO_FAIL("allocated block 0x%llx is not in the live map", (unsigned long long)b->ptr);
  if (b->requested == 0 || b->size != grt__zoo_round(b->requested, GRT_MIN_BLOCK_SIZE))
    GRT__ZOO_FAIL("block 0x%llx: size %llu for request %llu", (unsigned long long)b->ptr, (unsigned long long)b->size,
                  (unsigned long long)b->requested);
  r->allocation++;
  r->allocated_bytes += (int64_t)b->size;
  r->requested_bytes += (int64_t)b->requested;
  return GRT_OK;
}

static grt_status async_check(grt_allocator *a, char *msg, size_t msg_size) {
  apool *p = a->impl;
  grt__zoo_recount r;
  memset(&r, 0, sizeof r);
  size_t n_free = 0;
  for (size_t i = 0; i < p->segs.n; i++) {
    const aseg *s = seg_at(p, i);
    if (i > 0 && seg_at(p, i - 1)->seg.base + seg_at(p, i - 1)->seg.size > s->seg.base)
      GRT__ZOO_FAIL("segments 0x%llx and 0x%llx overlap", (unsigned long long)seg_at(p, i - 1)->seg.base,
                    (unsigned long long)s->seg.base);
    if (!s->head || s->head->ptr != s->seg.base || s->head->prev) GRT__ZOO_FAIL("segment 0x%llx: bad head", (unsigned long long)s->seg.base);
    const ablk *last = NULL;
    for (const ablk *b = s->head; b; b = b->next) {
      grt_status st = check_block(p, s, b, &r, msg, msg_size);
      if (st) return st;
      n_free += !b->allocated;
      last = b;
    }
    if (last->ptr + last->size != s->seg.base + s->seg.size)
      GRT__ZOO_FAIL("segment 0x%llx: blocks do not reach its end", (unsigned long long)s->seg.base);
    r.segment++;
    r.reserved_bytes += (int64_t)s->seg.size;
  }
  if (n_free != grt__bins_count(p->free)) GRT__ZOO_FAIL("%zu blocks indexed but %zu free blocks found", grt__bins_count(p->free), n_free);
  if ((int64_t)p->live.count != r.allocation) GRT__ZOO_FAIL("%zu live entries but %lld allocated blocks", p->live.count, (long long)r.allocation);
  return grt__zoo_check_stats(a, &r, msg, msg_size);
}

/* ---- settings (grt_alloc_set / grt_alloc_get) and calls specific to this policy ---- */

static grt_status async_set(grt_allocator *a, const char *key, uint64_t bytes) {
  if (strcmp(key, "release_threshold")) return GRT_ERR_NOT_FOUND;
  ((apool *)a->impl)->release_threshold = bytes; /* applies at the next sync point, as in CUDA */
  return GRT_OK;
}

/* cudaMemPoolGetAttribute's memory figures under their attribute names. */
static grt_status async_get(grt_allocator *a, const char *key, uint64_t *value) {
  const grt_alloc_stats *s = &a->stats;
  if (!strcmp(key, "release_threshold"))
    *value = ((const apool *)a->impl)->release_threshold;
  else if (!strcmp(key, "reserved_mem_current"))
    *value = (uint64_t)s->reserved_bytes[GRT_STAT_ALL].current;
  else if (!strcmp(key, "reserved_mem_high"))
    *value = (uint64_t)s->reserved_bytes[GRT_STAT_ALL].peak;
  else if (!strcmp(key, "used_mem_current"))
    *value = (uint64_t)s->allocated_bytes[GRT_STAT_ALL].current;
  else if (!strcmp(key, "used_mem_high"))
    *value = (uint64_t)s->allocated_bytes[GRT_STAT_ALL].peak;
  else
    return GRT_ERR_NOT_FOUND;
  return GRT_OK;
}

grt_status grt_alloc_async_trim_to(grt_allocator *a, uint64_t bytes) {
  grt_status st = grt__zoo_enter(a, &grt__async_ops);
  if (st) return st;
  return grt__zoo_leave(a, release_down_to(a, bytes));
}

const grt__alloc_ops grt__async_ops = {
    .name = "async",
    .create = async_create,
    .destroy = async_destroy,
    .malloc = async_malloc,
    .free = async_free,
    .record_stream = async_record_stream,
    .empty_cache = async_empty_cache,
    .block_info = async_block_info,
    .stats = async_stats,
    .snapshot = async_snapshot,
    .check = async_check,
    .set = async_set,
    .get = async_get,
    .settings = "release_threshold (get also: reserved_mem_current, reserved_mem_high, used_mem_current, "
                "used_mem_high)",
};
