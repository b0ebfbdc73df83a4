/* sharded.c — the "sharded" policy: N caching allocators, one per stream shard.
 *
 * PyTorch's allocator holds one mutex per device, so host threads feeding
 * different streams serialize on it. Cached blocks never cross streams in
 * PyTorch's policy, so streams can be split across independent caching
 * allocators (shards) without changing any decision a single stream sees:
 * a stream always lands on the same shard. Only the OOM path differs: a
 * shard releases its own cache, not the other shards'.
 *
 * free() does not know the stream. Each shard recognizes its own addresses
 * (they lie in its segments): a shard that does not returns
 * GRT_ERR_UNKNOWN_POINTER and the next is asked. A thread-local hint — the
 * shard this thread last allocated from — is asked first, so a thread freeing
 * what it allocated touches only its own shard's lock and cache lines. The
 * hint is only an ordering of the search: a stale one costs a miss, never a
 * wrong answer.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc/allocator_impl.h"
#include "alloc/caching.h" /* the two halves of a shard's empty_cache; base/status.h */

typedef struct sharded {
  unsigned n;
  grt_allocator **shard;
} sharded;

static _Thread_local const sharded *tl_owner; /* the hint: which sharded allocator... */
static _Thread_local unsigned tl_shard;         /* ...and which of its shards this thread used last */

static unsigned mix(uint64_t x, unsigned n) {
  x ^= x >> 31;
  x *= 0x7fb5d329728ea185ULL;
  x ^= x >> 27;
  return (unsigned)(x % n);
}

static void sharded_destroy(grt_allocator *a) {
  sharded *s = a->impl;
  /* GRT_OK for any allocator; no array when create ran out of memory for it */
  for (unsigned i = 0; s->shard && i < s->n; i++) grt__ignore(grt_alloc_destroy(s->shard[i]));
  free(s->shard);
  free(s);
}

static grt_status sharded_create(grt_allocator *a) {
  sharded *s = calloc(1, sizeof *s);
  if (!s) return GRT_ERR_NOMEM;
  s->n = a->cfg.shards ? a->cfg.shards : 2;
  s->shard = calloc(s->n, sizeof *s->shard);
  a->impl = s;
  if (!s->shard) {
    sharded_destroy(a);
    return GRT_ERR_NOMEM;
  }
  grt_alloc_config cfg = a->cfg;
  cfg.shards = 0;
  for (unsigned i = 0; i < s->n; i++) {
    grt_status st = grt_alloc_create("caching", a->dev, &cfg, &s->shard[i]);
    if (st) {
      sharded_destroy(a);
      return st;
    }
  }
  return GRT_OK;
}

/* Copies a shard's message into the sharded allocator's (failures only). */
static grt_status report(grt_allocator *a, grt_allocator *from, grt_status st) {
  if (st) {
    pthread_mutex_lock(&a->err_lock);
    snprintf(a->last_error, sizeof a->last_error, "%s", grt_alloc_last_error(from));
    pthread_mutex_unlock(&a->err_lock);
  }
  return st;
}

static grt_status sharded_malloc(grt_allocator *a, uint64_t size, grt_stream_id stream, grt_devptr *out) {
  sharded *s = a->impl;
  unsigned i = mix(stream, s->n);
  grt_status st = grt_alloc_malloc(s->shard[i], size, stream, out);
  if (st) return report(a, s->shard[i], st);
  tl_owner = s;
  tl_shard = i;
  return GRT_OK;
}

/* Runs fn on shards, the hinted one first, until one recognizes ptr. */
static grt_status on_owner(grt_allocator *a, grt_devptr ptr, grt_status (*fn)(grt_allocator *, grt_devptr, void *),
                           void *arg) {
  sharded *s = a->impl;
  unsigned first = tl_owner == s && tl_shard < s->n ? tl_shard : 0;
  for (unsigned k = 0; k < s->n; k++) {
    unsigned i = (first + k) % s->n;
    grt_status st = fn(s->shard[i], ptr, arg);
    if (st != GRT_ERR_UNKNOWN_POINTER) return report(a, s->shard[i], st);
  }
  return report(a, s->shard[first], GRT_ERR_UNKNOWN_POINTER);
}

static grt_status do_free(grt_allocator *shard, grt_devptr ptr, void *arg) {
  (void)arg;
  return grt_alloc_free(shard, ptr);
}
static grt_status do_record(grt_allocator *shard, grt_devptr ptr, void *arg) {
  return grt_alloc_record_stream(shard, ptr, *(grt_stream_id *)arg);
}
static grt_status do_info(grt_allocator *shard, grt_devptr ptr, void *arg) {
  uint64_t *out = arg;
  return grt_alloc_block_info(shard, ptr, &out[0], &out[1]);
}

static grt_status sharded_free(grt_allocator *a, grt_devptr ptr) { return on_owner(a, ptr, do_free, NULL); }

static grt_status sharded_record_stream(grt_allocator *a, grt_devptr ptr, grt_stream_id stream) {
  return on_owner(a, ptr, do_record, &stream);
}

static grt_status sharded_block_info(grt_allocator *a, grt_devptr ptr, uint64_t *size, uint64_t *requested) {
  uint64_t out[2];
  grt_status st = on_owner(a, ptr, do_info, out);
  if (st == GRT_OK) *size = out[0], *requested = out[1];
  return st;
}

/* Every shard or none: each shard's reservation under its lock (taken in
 * index order, the only place that holds several), then every release. */
static grt_status sharded_empty_cache(grt_allocator *a) {
  sharded *s = a->impl;
  grt_status st = GRT_OK;
  unsigned locked = 0;
  while (locked < s->n && !st) {
    pthread_mutex_lock(&s->shard[locked]->lock);
    st = grt__caching_empty_cache_reserve(s->shard[locked++]);
  }
  for (unsigned i = 0; i < s->n && !st; i++) st = grt__caching_empty_cache_commit(s->shard[i]);
  while (locked) pthread_mutex_unlock(&s->shard[--locked]->lock);
  if (st) {
    pthread_mutex_lock(&a->err_lock);
    grt__alloc_set_error(a, "empty_cache: %s", grt_status_str(st));
    pthread_mutex_unlock(&a->err_lock);
  }
  return st;
}

static void add_stat(grt_stat *dst, const grt_stat *src, int n) {
  for (int i = 0; i < n; i++) {
    dst[i].current += src[i].current;
    dst[i].peak += src[i].peak; /* an upper bound: shards peak at different moments */
    dst[i].allocated += src[i].allocated;
    dst[i].freed += src[i].freed;
  }
}

static void sharded_stats(grt_allocator *a, grt_alloc_stats *out) {
  sharded *s = a->impl;
  grt_alloc_stats sum;
  memset(&sum, 0, sizeof sum);
  for (unsigned i = 0; i < s->n; i++) {
    grt_alloc_stats t;
    grt__ignore(grt_alloc_get_stats(s->shard[i], &t)); /* a shard and a buffer: it cannot fail */
#define ARR(f) add_stat(sum.f, t.f, GRT_STAT_TYPES)
    ARR(allocation), ARR(segment), ARR(active), ARR(inactive_split), ARR(allocated_bytes);
    ARR(reserved_bytes), ARR(active_bytes), ARR(inactive_split_bytes), ARR(requested_bytes);
#undef ARR
    add_stat(&sum.oversize_allocations, &t.oversize_allocations, 1);
    add_stat(&sum.oversize_segments, &t.oversize_segments, 1);
    sum.num_alloc_retries += t.num_alloc_retries;
    sum.num_ooms += t.num_ooms;
    sum.num_sync_all_streams += t.num_sync_all_streams;
    sum.num_device_alloc += t.num_device_alloc;
    sum.num_device_free += t.num_device_free;
    sum.num_cache_hits += t.num_cache_hits;
    sum.cross_stream_syncs += t.cross_stream_syncs;
    sum.pending_free_blocks += t.pending_free_blocks;
    if (t.largest_free_block > sum.largest_free_block) sum.largest_free_block = t.largest_free_block;
    sum.max_split_size = t.max_split_size;
  }
  *out = sum;
}

static grt_status sharded_reset_peaks(grt_allocator *a) {
  sharded *s = a->impl;
  grt_status st = GRT_OK;
  for (unsigned i = 0; i < s->n; i++) grt__keep_first(&st, grt_alloc_reset_peak_stats(s->shard[i]));
  return st;
}

static int cmp_seg(const void *x, const void *y) {
  const grt_snapshot_segment *p = x, *q = y;
  return p->address < q->address ? -1 : p->address > q->address;
}

static grt_status sharded_snapshot(grt_allocator *a, grt_alloc_snapshot *out) {
  sharded *s = a->impl;
  for (unsigned i = 0; i < s->n; i++) {
    grt_alloc_snapshot *part;
    grt_status st = grt_alloc_snapshot_take(s->shard[i], &part);
    if (st) return st;
    grt_snapshot_segment *segs = realloc(out->segments, (out->n_segments + part->n_segments + 1) * sizeof *segs);
    if (!segs) {
      grt_alloc_snapshot_free(part);
      return GRT_ERR_NOMEM;
    }
    out->segments = segs;
    memcpy(segs + out->n_segments, part->segments, part->n_segments * sizeof *segs);
    out->n_segments += part->n_segments;
    free(part->segments); /* the blocks moved to out */
    free(part);
  }
  qsort(out->segments, out->n_segments, sizeof *out->segments, cmp_seg);
  return GRT_OK;
}

static grt_status sharded_check(grt_allocator *a, char *msg, size_t msg_size) {
  sharded *s = a->impl;
  for (unsigned i = 0; i < s->n; i++) {
    grt_status st = grt_alloc_check(s->shard[i], msg, msg_size);
    if (st) return st;
  }
  return GRT_OK;
}

const grt__alloc_ops grt__sharded_ops = {
    .name = "sharded",
    .concurrent = 1,
    .create = sharded_create,
    .destroy = sharded_destroy,
    .malloc = sharded_malloc,
    .free = sharded_free,
    .record_stream = sharded_record_stream,
    .empty_cache = sharded_empty_cache,
    .block_info = sharded_block_info,
    .stats = sharded_stats,
    .snapshot = sharded_snapshot,
    .check = sharded_check,
    .reset_peaks = sharded_reset_peaks,
};
