/* bestfit.c — the "bestfit" policy: exact best fit over one arena.
 *
 * The block index (range_alloc.c: smallest free range that fits, ties to the
 * lowest offset) run as a plain offset allocator over a single device segment
 * spanning the whole device, taken at the first malloc. No size classes
 * beyond 512-byte alignment, no segments, no cache: the "exact best fit" row
 * of W3's reference figures (docs/ALLOCATORS.md), measured with our own index. Frees coalesce at
 * once; nothing is ever returned to the device before destroy (a heap, not a
 * cache: empty_cache is a no-op).
 */
#include <assert.h>
#include <stdio.h>
#include <stdlib.h>

#include "alloc/allocator_impl.h"
#include "base/status.h"
#include "base/u64map.h"
#include "policy/range_alloc.h"

typedef struct fblock {
  uint64_t size, requested;
  grt_stream_id stream;
} fblock;

typedef struct bestfit {
  grt__range *range;   /* NULL until the first malloc */
  grt_devptr base;
  uint64_t capacity;
  grt__u64map live;    /* address -> fblock */
} bestfit;

static int pool_of(uint64_t size) { return size <= GRT_SMALL_SIZE ? GRT_STAT_SMALL_POOL : GRT_STAT_LARGE_POOL; }

static grt_status bf_create(grt_allocator *a) {
  bestfit *b = calloc(1, sizeof *b);
  if (!b) return GRT_ERR_NOMEM;
  grt__u64map_init(&b->live);
  a->impl = b;
  return GRT_OK;
}

static void bf_destroy(grt_allocator *a) {
  bestfit *b = a->impl;
  grt__u64map_iter it = grt__u64map_begin(&b->live);
  void *f;
  while (grt__u64map_next(&b->live, &it, NULL, &f)) free(f);
  grt__u64map_free(&b->live);
  if (b->range) {
    grt__range_destroy(b->range);
    grt__ignore(grt_device_free(a->dev, b->base)); /* teardown (void op): a refusal leaves the arena to the device */
  }
  free(b);
}

/* The arena: the whole device as one segment (one device malloc). */
static grt_status arena(grt_allocator *a, bestfit *b) {
  if (b->range) return GRT_OK;
  grt_device_stats ds;
  grt__ignore(grt_device_get_stats(a->dev, &ds)); /* a device and a buffer: it cannot fail */
  uint64_t cap = ds.largest_hole / GRT_MIN_BLOCK_SIZE * GRT_MIN_BLOCK_SIZE;
  if (!cap) return GRT_ERR_OOM;
  grt_status st = grt__range_create(cap, GRT__INDEX_BINS, &b->range);
  if (st) return st;
  if ((st = grt_device_malloc(a->dev, cap, &b->base))) {
    grt__range_destroy(b->range);
    b->range = NULL;
    return st;
  }
  b->capacity = cap;
  a->stats.num_device_alloc++;
  grt__stat_update2(a->stats.segment, GRT_STAT_LARGE_POOL, 1);
  grt__stat_update2(a->stats.reserved_bytes, GRT_STAT_LARGE_POOL, (int64_t)cap);
  return GRT_OK;
}

static void account(grt_allocator *a, const fblock *f, int sign) {
  int pool = pool_of(f->size);
  grt__stat_update2(a->stats.allocation, pool, sign);
  grt__stat_update2(a->stats.active, pool, sign);
  grt__stat_update2(a->stats.allocated_bytes, pool, sign * (int64_t)f->size);
  grt__stat_update2(a->stats.active_bytes, pool, sign * (int64_t)f->size);
  grt__stat_update2(a->stats.requested_bytes, pool, sign * (int64_t)f->requested);
}

/* The block record and its map entry come first, so that nothing after the
 * arena's device malloc needs host memory but the range allocator's split,
 * which changes nothing when it fails (and cannot, on the fresh range of a
 * first call: it holds nodes for its first splits). */
static grt_status bf_malloc(grt_allocator *a, uint64_t size, grt_stream_id stream, grt_devptr *out) {
  bestfit *b = a->impl;
  uint64_t rounded = (size + GRT_MIN_BLOCK_SIZE - 1) / GRT_MIN_BLOCK_SIZE * GRT_MIN_BLOCK_SIZE;
  uint64_t off = 0;
  fblock *f = malloc(sizeof *f);
  grt_status st = f && grt__u64map_reserve(&b->live, 1) ? arena(a, b) : GRT_ERR_NOMEM;
  if (!st) st = grt__range_alloc(b->range, rounded, &off);
  if (st == GRT_ERR_SIZE) st = GRT_ERR_OOM; /* larger than the whole arena */
  if (!st) {
    bool put = grt__u64map_put(&b->live, b->base + off, f);
    assert(put); /* room reserved */
    (void)put;
  }
  if (st) {
    free(f);
    if (st == GRT_ERR_OOM) {
      a->stats.num_ooms++;
      char want[32], big[32];
      grt__alloc_set_error(a, "out of memory (bestfit): tried to allocate %s; the largest free range is %s",
                           grt_format_bytes(size, want, sizeof want),
                           grt_format_bytes(b->range ? grt__range_largest_free(b->range) : 0, big, sizeof big));
    }
    return st;
  }
  *f = (fblock){rounded, size, stream};
  account(a, f, +1);
  a->stats.num_cache_hits++;
  *out = b->base + off;
  return GRT_OK;
}

static grt_status classify(bestfit *b, grt_devptr ptr) {
  if (!b->range || ptr < b->base || ptr >= b->base + b->capacity) return GRT_ERR_UNKNOWN_POINTER;
  grt__u64map_iter it = grt__u64map_begin(&b->live);
  uint64_t k;
  void *f;
  while (grt__u64map_next(&b->live, &it, &k, &f)) /* error path: a scan is fine */
    if (ptr > k && ptr < k + ((fblock *)f)->size) return GRT_ERR_INTERIOR_POINTER;
  return GRT_ERR_DOUBLE_FREE; /* inside the arena, in free space */
}

static grt_status bf_free(grt_allocator *a, grt_devptr ptr) {
  bestfit *b = a->impl;
  fblock *f = grt__u64map_get(&b->live, ptr);
  if (!f) return classify(b, ptr);
  grt_status st = grt__range_free(b->range, ptr - b->base);
  if (st) return st;
  grt__u64map_del(&b->live, ptr);
  account(a, f, -1);
  free(f);
  return GRT_OK;
}

static grt_status bf_record_stream(grt_allocator *a, grt_devptr ptr, grt_stream_id stream) {
  bestfit *b = a->impl;
  (void)stream; /* a heap without streams: nothing to defer */
  return grt__u64map_get(&b->live, ptr) ? GRT_OK : classify(b, ptr);
}

static grt_status bf_empty_cache(grt_allocator *a) {
  (void)a;
  return GRT_OK;
}

static grt_status bf_block_info(grt_allocator *a, grt_devptr ptr, uint64_t *size, uint64_t *requested) {
  bestfit *b = a->impl;
  fblock *f = grt__u64map_get(&b->live, ptr);
  if (!f) return classify(b, ptr);
  *size = f->size;
  *requested = f->requested;
  return GRT_OK;
}

static void bf_stats(grt_allocator *a, grt_alloc_stats *out) {
  bestfit *b = a->impl;
  out->largest_free_block = b->range ? grt__range_largest_free(b->range) : 0;
  out->pending_free_blocks = 0;
}

typedef struct live_block {
  grt_devptr addr;
  const fblock *f;
} live_block;

static int cmp_live(const void *x, const void *y) {
  const live_block *p = x, *q = y;
  return p->addr < q->addr ? -1 : p->addr > q->addr;
}

/* One segment: the live blocks in address order, the gaps as inactive blocks. */
static grt_status bf_snapshot(grt_allocator *a, grt_alloc_snapshot *out) {
  bestfit *b = a->impl;
  out->segments = calloc(1, sizeof *out->segments);
  if (!out->segments) return GRT_ERR_NOMEM;
  if (!b->range) return GRT_OK;
  size_t n = b->live.count, k = 0;
  live_block *lb = malloc((n + 1) * sizeof *lb);
  grt_snapshot_segment *seg = &out->segments[0];
  seg->blocks = calloc(2 * n + 1, sizeof *seg->blocks);
  out->n_segments = 1; /* so that grt_alloc_snapshot_free frees seg->blocks on the error path too */
  if (!lb || !seg->blocks) {
    free(lb);
    return GRT_ERR_NOMEM;
  }
  grt__u64map_iter it = grt__u64map_begin(&b->live);
  uint64_t addr;
  void *f;
  while (grt__u64map_next(&b->live, &it, &addr, &f)) lb[k++] = (live_block){addr, f};
  qsort(lb, n, sizeof *lb, cmp_live);
  grt_devptr at = b->base;
  for (size_t i = 0; i <= n; i++) {
    grt_devptr next = i < n ? lb[i].addr : b->base + b->capacity;
    if (next > at) seg->blocks[seg->n_blocks++] = (grt_snapshot_block){at, next - at, 0, GRT_BLOCK_INACTIVE};
    if (i == n) break;
    seg->blocks[seg->n_blocks++] = (grt_snapshot_block){lb[i].addr, lb[i].f->size, lb[i].f->requested, GRT_BLOCK_ACTIVE_ALLOCATED};
    at = lb[i].addr + lb[i].f->size;
  }
  free(lb);
  seg->address = b->base;
  seg->is_large = 1;
  grt__snapshot_segment_totals(seg);
  return GRT_OK;
}

static grt_status bf_check(grt_allocator *a, char *msg, size_t msg_size) {
  bestfit *b = a->impl;
  if (b->range && grt__range_check(b->range) != GRT_OK) {
    snprintf(msg, msg_size, "bestfit: the range allocator's walker failed");
    return GRT_ERR_INTERNAL;
  }
  int64_t bytes = 0;
  grt__u64map_iter it = grt__u64map_begin(&b->live);
  void *f;
  while (grt__u64map_next(&b->live, &it, NULL, &f)) bytes += (int64_t)((fblock *)f)->size;
  uint64_t free_bytes = b->range ? grt__range_free_bytes(b->range) : 0;
  if (bytes != a->stats.allocated_bytes[GRT_STAT_ALL].current || (b->range && (uint64_t)bytes + free_bytes != b->capacity)) {
    snprintf(msg, msg_size, "bestfit: %lld live bytes, stats say %lld, %llu free of %llu", (long long)bytes,
             (long long)a->stats.allocated_bytes[GRT_STAT_ALL].current, (unsigned long long)free_bytes,
             (unsigned long long)b->capacity);
    return GRT_ERR_INTERNAL;
  }
  return GRT_OK;
}

const grt__alloc_ops grt__bestfit_ops = {
    .name = "bestfit",
    .create = bf_create,
    .destroy = bf_destroy,
    .malloc = bf_malloc,
    .free = bf_free,
    .record_stream = bf_record_stream,
    .empty_cache = bf_empty_cache,
    .block_info = bf_block_info,
    .stats = bf_stats,
    .snapshot = bf_snapshot,
    .check = bf_check,
};
