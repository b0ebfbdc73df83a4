/* naive.c — the "naive" policy: every malloc is a device malloc, every free a
 * device free (and so a device-wide sync). The baseline the caching allocator
 * is measured against: no cache, no rounding beyond the device's alignment. */
#include <stdio.h>
#include <stdlib.h>

#include <assert.h>

#include "alloc/allocator_impl.h"
#include "base/status.h"
#include "base/u64map.h"

typedef struct nblock {
  uint64_t size, requested;
  grt_stream_id stream;
} nblock;

typedef struct naive {
  grt__u64map live; /* address -> nblock */
} naive;

static int pool_of(uint64_t size) { return size <= GRT_SMALL_SIZE ? GRT_STAT_SMALL_POOL : GRT_STAT_LARGE_POOL; }

static grt_status naive_create(grt_allocator *a) {
  naive *n = calloc(1, sizeof *n);
  if (!n) return GRT_ERR_NOMEM;
  grt__u64map_init(&n->live);
  a->impl = n;
  return GRT_OK;
}

static int addr_order(const void *x, const void *y) {
  uint64_t a = *(const uint64_t *)x, b = *(const uint64_t *)y;
  return (a > b) - (a < b);
}

/* The live segments go back in address order: in the map's slot order the
 * device's own address maps would receive their keys in runs of
 * neighbouring home slots, and its inserts would probe for thousands of slots
 * (a quadratic teardown). Without memory for the list, slot order it is. */
static void naive_destroy(grt_allocator *a) {
  naive *n = a->impl;
  uint64_t *addrs = malloc((n->live.count + 1) * sizeof *addrs);
  size_t k = 0;
  grt__u64map_iter it = grt__u64map_begin(&n->live);
  uint64_t addr;
  void *b;
  while (grt__u64map_next(&n->live, &it, &addr, &b)) {
    if (addrs)
      addrs[k++] = addr;
    else /* teardown (void op): a refusal leaves the segment to the device */
      grt__ignore(grt_device_free(a->dev, addr));
    free(b);
  }
  if (addrs) {
    qsort(addrs, k, sizeof *addrs, addr_order);
    for (size_t i = 0; i < k; i++) grt__ignore(grt_device_free(a->dev, addrs[i]));
  }
  free(addrs);
  grt__u64map_free(&n->live);
  free(n);
}

static void account(grt_allocator *a, const nblock *b, int sign) {
  grt_alloc_stats *s = &a->stats;
  int pool = pool_of(b->size);
  int64_t sz = sign * (int64_t)b->size;
  grt__stat_update2(s->allocation, pool, sign);
  grt__stat_update2(s->segment, pool, sign);
  grt__stat_update2(s->active, pool, sign);
  grt__stat_update2(s->allocated_bytes, pool, sz);
  grt__stat_update2(s->reserved_bytes, pool, sz);
  grt__stat_update2(s->active_bytes, pool, sz);
  grt__stat_update2(s->requested_bytes, pool, sign * (int64_t)b->requested);
}

static grt_status naive_malloc(grt_allocator *a, uint64_t size, grt_stream_id stream, grt_devptr *out) {
  naive *n = a->impl;
  nblock *b = malloc(sizeof *b);
  if (!b || !grt__u64map_reserve(&n->live, 1)) { /* before the device: a failure changes nothing */
    free(b);
    return GRT_ERR_NOMEM;
  }
  uint64_t rounded = (size + GRT_MIN_BLOCK_SIZE - 1) / GRT_MIN_BLOCK_SIZE * GRT_MIN_BLOCK_SIZE;
  grt_devptr p;
  grt_status st = grt_device_malloc(a->dev, rounded, &p);
  if (st == GRT_ERR_SIZE) st = GRT_ERR_OOM; /* above the device's capacity: an OOM, as in the caching policy */
  if (st) {
    free(b);
    if (st == GRT_ERR_OOM) {
      a->stats.num_ooms++;
      grt_device_stats ds;
      grt__ignore(grt_device_get_stats(a->dev, &ds)); /* a device and a buffer: it cannot fail */
      char want[32], fr[32], hole[32];
      grt__alloc_set_error(a, "out of memory: tried to allocate %s; %s free on the device but the largest hole is %s",
                           grt_format_bytes(size, want, sizeof want), grt_format_bytes(ds.free_bytes, fr, sizeof fr),
                           grt_format_bytes(ds.largest_hole, hole, sizeof hole));
    }
    return st;
  }
  *b = (nblock){rounded, size, stream};
  bool put = grt__u64map_put(&n->live, p, b);
  assert(put); /* room reserved */
  (void)put;
  a->stats.num_device_alloc++;
  account(a, b, +1);
  *out = p;
  return GRT_OK;
}

static grt_status classify(grt_allocator *a, grt_devptr ptr) {
  uint64_t size;
  grt_status st = grt_device_segment_size(a->dev, ptr, &size);
  return st == GRT_OK ? GRT_ERR_UNKNOWN_POINTER : st; /* a live segment of someone else */
}

static grt_status naive_free(grt_allocator *a, grt_devptr ptr) {
  naive *n = a->impl;
  nblock *b = grt__u64map_get(&n->live, ptr);
  if (!b) return classify(a, ptr);
  grt_status st = grt_device_free(a->dev, ptr);
  if (st) return st;
  grt__u64map_del(&n->live, ptr);
  a->stats.num_device_free++;
  account(a, b, -1);
  free(b);
  return GRT_OK;
}

static grt_status naive_record_stream(grt_allocator *a, grt_devptr ptr, grt_stream_id stream) {
  naive *n = a->impl;
  (void)stream; /* a device free synchronizes everything: no event needed */
  return grt__u64map_get(&n->live, ptr) ? GRT_OK : classify(a, ptr);
}

static grt_status naive_empty_cache(grt_allocator *a) {
  (void)a;
  return GRT_OK;
}

static grt_status naive_block_info(grt_allocator *a, grt_devptr ptr, uint64_t *size, uint64_t *requested) {
  naive *n = a->impl;
  nblock *b = grt__u64map_get(&n->live, ptr);
  if (!b) return classify(a, ptr);
  *size = b->size;
  *requested = b->requested;
  return GRT_OK;
}

static void naive_stats(grt_allocator *a, grt_alloc_stats *out) {
  (void)a;
  out->largest_free_block = 0; /* nothing is cached */
  out->pending_free_blocks = 0;
}

static int cmp_seg(const void *x, const void *y) {
  const grt_snapshot_segment *p = x, *q = y;
  return p->address < q->address ? -1 : p->address > q->address;
}

static grt_status naive_snapshot(grt_allocator *a, grt_alloc_snapshot *out) {
  naive *n = a->impl;
  out->segments = calloc(n->live.count + 1, sizeof *out->segments);
  if (!out->segments) return GRT_ERR_NOMEM;
  grt__u64map_iter it = grt__u64map_begin(&n->live);
  uint64_t addr;
  void *v;
  while (grt__u64map_next(&n->live, &it, &addr, &v)) {
    const nblock *b = v;
    grt_snapshot_segment *seg = &out->segments[out->n_segments];
    seg->blocks = malloc(sizeof *seg->blocks);
    if (!seg->blocks) return GRT_ERR_NOMEM;
    out->n_segments++;
    seg->address = addr;
    seg->stream = b->stream;
    seg->is_large = pool_of(b->size) == GRT_STAT_LARGE_POOL;
    seg->n_blocks = 1;
    seg->blocks[0] = (grt_snapshot_block){seg->address, b->size, b->requested, GRT_BLOCK_ACTIVE_ALLOCATED};
    grt__snapshot_segment_totals(seg);
  }
  qsort(out->segments, out->n_segments, sizeof *out->segments, cmp_seg);
  return GRT_OK;
}

static grt_status naive_check(grt_allocator *a, char *msg, size_t msg_size) {
  naive *n = a->impl;
  int64_t bytes = 0;
  grt__u64map_iter it = grt__u64map_begin(&n->live);
  void *b;
  while (grt__u64map_next(&n->live, &it, NULL, &b)) bytes += (int64_t)((nblock *)b)->size;
  if (bytes != a->stats.allocated_bytes[GRT_STAT_ALL].current ||
      (int64_t)n->live.count != a->stats.allocation[GRT_STAT_ALL].current) {
    snprintf(msg, msg_size, "naive: recount %lld bytes in %zu blocks, stats say %lld in %lld", (long long)bytes,
             n->live.count, (long long)a->stats.allocated_bytes[GRT_STAT_ALL].current,
             (long long)a->stats.allocation[GRT_STAT_ALL].current);
    return GRT_ERR_INTERNAL;
  }
  return GRT_OK;
}

const grt__alloc_ops grt__naive_ops = {
    .name = "naive",
    .create = naive_create,
    .destroy = naive_destroy,
    .malloc = naive_malloc,
    .free = naive_free,
    .record_stream = naive_record_stream,
    .empty_cache = naive_empty_cache,
    .block_info = naive_block_info,
    .stats = naive_stats,
    .snapshot = naive_snapshot,
    .check = naive_check,
};
