/* ref_caching.h — a deliberately simple reference of PyTorch's caching
 * allocator policy, for differential tests against src/alloc/caching*.c.
 *
 * Written for obviousness, not speed, and without looking at gpurt's data
 * structures: the state is a list of segments, each an array of blocks in
 * address order that tile it; every search is a linear scan. It implements
 * the default policy only (cross_stream never, best fit, merge on free, no
 * memory fraction or garbage collection, no expandable segments), with
 * max_split_size and roundup_power2_divisions taken from a grt_alloc_config.
 *
 * The rules, from PyTorch's c10/cuda/CUDACachingAllocator.cpp:
 *   - round_size, pools (small <= 1 MiB), segment sizes 2 MiB / 20 MiB / 2 MiB-rounded;
 *   - best fit = the free block of the pool on the same stream with the
 *     smallest (size, address) at least the rounded size; max_split_size may
 *     then refuse that one block (no second choice);
 *   - malloc: process events; search; device malloc; release oversize blocks
 *     (max_split_size only) + malloc; release everything (sync events) +
 *     malloc (num_alloc_retries); OOM (num_ooms);
 *   - split: small pool when >= 512 B remain, large pool when the request is
 *     below max_split_size and > 1 MiB remains; the allocation takes the front;
 *   - free: one event per recorded stream, the block frees when all completed
 *     (per stream in record order); a freed block merges with free neighbours;
 *   - statistics with PyTorch's increase/decrease arithmetic, including its
 *     net changes of inactive_split on free.
 * Where PyTorch's order is a hash map's (streams of pending events, streams
 * of a block's uses), this reference uses record order, as gpurt documents.
 *
 * Header-only (static functions) so a test file includes it; not thread-safe.
 */
#ifndef GRT_TESTS_REF_CACHING_H
#define GRT_TESTS_REF_CACHING_H

#include <stdlib.h>
#include <string.h>

#include "gpurt/alloc.h"

#define REF_MAX_USES 16

typedef struct ref_block {
  grt_devptr ptr;
  uint64_t size;
  uint64_t requested;     /* 0 while free */
  int allocated;
  int event_count;        /* events still pending after a deferred free */
  grt_stream_id uses[REF_MAX_USES]; /* record_stream set, in insertion order */
  int n_uses;
} ref_block;

typedef struct ref_segment {
  grt_devptr base;
  uint64_t size;
  int is_large;
  grt_stream_id stream; /* every block of the segment belongs to it */
  ref_block *blocks;    /* address order, tiling [base, base + size) */
  size_t n_blocks, cap_blocks;
} ref_segment;

typedef struct ref_event {
  grt_stream_id stream;
  uint64_t id;
  grt_devptr block; /* the pending block's address */
} ref_event;

typedef struct ref_caching {
  grt_device *dev;
  grt_alloc_config cfg;
  ref_segment *segs; /* in creation order */
  size_t n_segs, cap_segs;
  ref_event *events; /* in record order */
  size_t n_events, cap_events;
  grt_alloc_stats stats;
} ref_caching;

/* ---- sizes ---- */

static uint64_t ref_floor_pow2(uint64_t x) {
  uint64_t p = 1;
  while (p <= x / 2) p *= 2;
  return p;
}

static unsigned ref_divisions(const grt_alloc_config *cfg, uint64_t size) {
  int interval = 0; /* 0: below 2 MiB; i: [2^(20+i), 2^(21+i)) */
  for (uint64_t p = ((uint64_t)2 << 20); p <= size && interval < GRT_ROUNDUP_INTERVALS - 1; p *= 2) interval++;
  return cfg->roundup_power2_divisions[interval];
}

static uint64_t ref_round(const grt_alloc_config *cfg, uint64_t size) {
  if (size < 512) return 512;
  unsigned d = ref_divisions(cfg, size);
  if (d > 1 && size > (uint64_t)512 * d) {
    uint64_t p = ref_floor_pow2(size);
    if (p == size) return size;
    uint64_t step = p / ref_floor_pow2(d);
    if (step == 0) return 2 * p;
    return (size + step - 1) / step * step;
  }
  return (size + 511) / 512 * 512;
}

static uint64_t ref_segment_size(uint64_t rounded) {
  if (rounded <= ((uint64_t)1 << 20)) return (uint64_t)2 << 20;
  if (rounded < ((uint64_t)10 << 20)) return (uint64_t)20 << 20;
  uint64_t two = (uint64_t)2 << 20;
  return (rounded + two - 1) / two * two;
}

/* ---- statistics: PyTorch's increase_stat / decrease_stat ---- */

static void ref_increase(grt_stat *s, int64_t n) {
  s->current += n;
  if (s->current > s->peak) s->peak = s->current;
  s->allocated += n;
}

static void ref_decrease(grt_stat *s, int64_t n) {
  s->current -= n;
  s->freed += n;
}

/* The "all" entry and the pool's entry. */
static void ref_increase2(grt_stat *arr, int is_large, int64_t n) {
  ref_increase(&arr[GRT_STAT_ALL], n);
  ref_increase(&arr[is_large ? GRT_STAT_LARGE_POOL : GRT_STAT_SMALL_POOL], n);
}

static void ref_decrease2(grt_stat *arr, int is_large, int64_t n) {
  ref_decrease(&arr[GRT_STAT_ALL], n);
  ref_decrease(&arr[is_large ? GRT_STAT_LARGE_POOL : GRT_STAT_SMALL_POOL], n);
}

/* ---- blocks ---- */

static int ref_is_free(const ref_block *b) { return !b->allocated && b->event_count == 0; }

static int ref_is_split(const ref_segment *s) { return s->n_blocks > 1; }

static void ref_insert_block(ref_segment *s, size_t at, ref_block b) {
  if (s->n_blocks == s->cap_blocks) {
    s->cap_blocks = s->cap_blocks ? 2 * s->cap_blocks : 4;
    s->blocks = realloc(s->blocks, s->cap_blocks * sizeof *s->blocks);
    if (!s->blocks) abort();
  }
  memmove(&s->blocks[at + 1], &s->blocks[at], (s->n_blocks - at) * sizeof *s->blocks);
  s->blocks[at] = b;
  s->n_blocks++;
}

static void ref_remove_block(ref_segment *s, size_t at) {
  memmove(&s->blocks[at], &s->blocks[at + 1], (s->n_blocks - at - 1) * sizeof *s->blocks);
  s->n_blocks--;
}

/* Finds the block starting at ptr; returns 0 when there is none. */
static int ref_find(const ref_caching *r, grt_devptr ptr, size_t *si, size_t *bi) {
  for (size_t i = 0; i < r->n_segs; i++)
    for (size_t j = 0; j < r->segs[i].n_blocks; j++)
      if (r->segs[i].blocks[j].ptr == ptr) {
        *si = i;
        *bi = j;
        return 1;
      }
  return 0;
}

/* ---- segments ---- */

static void ref_init(ref_caching *r, grt_device *dev, const grt_alloc_config *cfg) {
  memset(r, 0, sizeof *r);
  r->dev = dev;
  r->cfg = *cfg;
  r->stats.max_split_size = cfg->max_split_size == GRT_UNLIMITED ? -1 : (int64_t)cfg->max_split_size;
}

/* cudaFree of a segment that is one free block. */
static void ref_release_segment(ref_caching *r, size_t si) {
  ref_segment *s = &r->segs[si];
  if (grt_device_free(r->dev, s->base) != GRT_OK) abort();
  ref_decrease2(r->stats.segment, s->is_large, 1);
  ref_decrease2(r->stats.reserved_bytes, s->is_large, (int64_t)s->size);
  if (s->size >= r->cfg.max_split_size) ref_decrease(&r->stats.oversize_segments, 1);
  r->stats.num_device_free++;
  free(s->blocks);
  memmove(&r->segs[si], &r->segs[si + 1], (r->n_segs - si - 1) * sizeof *r->segs);
  r->n_segs--;
}

static void ref_destroy(ref_caching *r) {
  while (r->n_segs) {
    if (grt_device_free(r->dev, r->segs[0].base) != GRT_OK) abort();
    free(r->segs[0].blocks);
    memmove(&r->segs[0], &r->segs[1], (r->n_segs - 1) * sizeof *r->segs);
    r->n_segs--;
  }
  free(r->segs);
  free(r->events);
}

/* cudaMalloc of a new segment; its index, or -1. */
static long ref_new_segment(ref_caching *r, uint64_t size, grt_stream_id stream, int is_large, int is_retry) {
  if (is_retry) r->stats.num_alloc_retries++;
  grt_devptr base;
  if (grt_device_malloc(r->dev, size, &base) != GRT_OK) return -1;
  if (r->n_segs == r->cap_segs) {
    r->cap_segs = r->cap_segs ? 2 * r->cap_segs : 16;
    r->segs = realloc(r->segs, r->cap_segs * sizeof *r->segs);
    if (!r->segs) abort();
  }
  ref_segment *s = &r->segs[r->n_segs++];
  memset(s, 0, sizeof *s);
  s->base = base;
  s->size = size;
  s->is_large = is_large;
  s->stream = stream;
  ref_block whole = {0};
  whole.ptr = base;
  whole.size = size;
  ref_insert_block(s, 0, whole);
  ref_increase2(r->stats.segment, is_large, 1);
  ref_increase2(r->stats.reserved_bytes, is_large, (int64_t)size);
  if (size >= r->cfg.max_split_size) ref_increase(&r->stats.oversize_segments, 1);
  r->stats.num_device_alloc++;
  return (long)(r->n_segs - 1);
}

/* ---- free side ---- */

/* The block (event_count 0, not allocated) becomes free: merge, stats. */
static void ref_free_block(ref_caching *r, size_t si, size_t bi) {
  ref_segment *s = &r->segs[si];
  uint64_t original_size = s->blocks[bi].size, requested = s->blocks[bi].requested;
  int64_t net_blocks = 0, net_bytes = 0;
  if (bi + 1 < s->n_blocks && ref_is_free(&s->blocks[bi + 1])) { /* the next one first: bi stays valid */
    net_blocks -= 1;
    net_bytes -= (int64_t)s->blocks[bi + 1].size;
    s->blocks[bi].size += s->blocks[bi + 1].size;
    ref_remove_block(s, bi + 1);
  }
  if (bi > 0 && ref_is_free(&s->blocks[bi - 1])) {
    net_blocks -= 1;
    net_bytes -= (int64_t)s->blocks[bi - 1].size;
    s->blocks[bi - 1].size += s->blocks[bi].size;
    ref_remove_block(s, bi);
    bi--;
  }
  s->blocks[bi].requested = 0;
  if (ref_is_split(s)) {
    net_blocks += 1;
    net_bytes += (int64_t)s->blocks[bi].size;
  }
  if (net_blocks > 0) ref_increase2(r->stats.inactive_split, s->is_large, net_blocks);
  if (net_blocks < 0) ref_decrease2(r->stats.inactive_split, s->is_large, -net_blocks);
  if (net_bytes > 0) ref_increase2(r->stats.inactive_split_bytes, s->is_large, net_bytes);
  if (net_bytes < 0) ref_decrease2(r->stats.inactive_split_bytes, s->is_large, -net_bytes);
  ref_decrease2(r->stats.active, s->is_large, 1);
  ref_decrease2(r->stats.active_bytes, s->is_large, (int64_t)original_size);
  ref_decrease2(r->stats.requested_bytes, s->is_large, (int64_t)requested);
}

/* One of the block's events completed. */
static void ref_event_done(ref_caching *r, grt_devptr block) {
  size_t si, bi;
  if (!ref_find(r, block, &si, &bi)) abort();
  if (--r->segs[si].blocks[bi].event_count == 0) ref_free_block(r, si, bi);
}

static void ref_remove_event(ref_caching *r, size_t i) {
  memmove(&r->events[i], &r->events[i + 1], (r->n_events - i - 1) * sizeof *r->events);
  r->n_events--;
}

/* Each stream's events complete in record order: an event is looked at only
 * when no earlier event of its stream is still waiting. */
static void ref_process_events(ref_caching *r) {
  const grt_stream_ops *o = r->cfg.stream_ops;
  size_t i = 0;
  while (i < r->n_events) {
    int blocked = 0;
    for (size_t j = 0; j < i; j++) blocked |= r->events[j].stream == r->events[i].stream;
    if (!blocked && o->event_query(o->ctx, r->events[i].id)) {
      ref_event e = r->events[i];
      o->event_destroy(o->ctx, e.id);
      ref_remove_event(r, i); /* the next event moved to i */
      ref_event_done(r, e.block);
    } else {
      i++;
    }
  }
}

static void ref_sync_events(ref_caching *r) {
  const grt_stream_ops *o = r->cfg.stream_ops;
  while (r->n_events) {
    ref_event e = r->events[0];
    ref_remove_event(r, 0);
    o->event_synchronize(o->ctx, e.id);
    o->event_destroy(o->ctx, e.id);
    ref_event_done(r, e.block);
  }
  r->stats.num_sync_all_streams++;
}

/* release_cached_blocks: sync, then free every segment that is one free block. */
static void ref_release_cached(ref_caching *r) {
  ref_sync_events(r);
  size_t i = 0;
  while (i < r->n_segs) {
    if (r->segs[i].n_blocks == 1 && ref_is_free(&r->segs[i].blocks[0]))
      ref_release_segment(r, i);
    else
      i++;
  }
}

/* The free block of (pool, stream) with the smallest (size, address) >= (size, 0), or the largest when want_largest. */
static int ref_pick(const ref_caching *r, int is_large, grt_stream_id stream, uint64_t min_size, int want_largest,
                    size_t *si, size_t *bi) {
  int found = 0;
  const ref_block *best = NULL;
  for (size_t i = 0; i < r->n_segs; i++) {
    const ref_segment *s = &r->segs[i];
    if (s->is_large != is_large || s->stream != stream) continue;
    for (size_t j = 0; j < s->n_blocks; j++) {
      const ref_block *b = &s->blocks[j];
      if (!ref_is_free(b) || b->size < min_size) continue;
      int better = !found || (want_largest ? (b->size > best->size || (b->size == best->size && b->ptr > best->ptr))
                                           : (b->size < best->size || (b->size == best->size && b->ptr < best->ptr)));
      if (better) {
        best = b;
        *si = i;
        *bi = j;
        found = 1;
      }
    }
  }
  return found;
}

/* release_available_cached_blocks (max_split_size set): free the smallest
 * oversize block that covers the request, else oversize blocks from the
 * largest down until enough bytes went back. */
static int ref_release_available(ref_caching *r, int is_large, grt_stream_id stream, uint64_t size) {
  uint64_t mss = r->cfg.max_split_size;
  if (mss == GRT_UNLIMITED) return 0;
  uint64_t key = size < mss ? mss : size;
  size_t si, bi;
  if (ref_pick(r, is_large, stream, key, 0, &si, &bi)) {
    ref_release_segment(r, si);
    return 1;
  }
  uint64_t released = 0;
  while (released < key && ref_pick(r, is_large, stream, mss, 1, &si, &bi)) {
    released += r->segs[si].blocks[bi].size;
    ref_release_segment(r, si);
  }
  return released >= key;
}

/* ---- public calls ---- */

static grt_status ref_malloc(ref_caching *r, uint64_t size, grt_stream_id stream, grt_devptr *out) {
  if (size == 0 || size > ((uint64_t)1 << 56)) return GRT_ERR_SIZE;
  ref_process_events(r);
  uint64_t rounded = ref_round(&r->cfg, size);
  int is_large = rounded > ((uint64_t)1 << 20);
  uint64_t mss = r->cfg.max_split_size;
  size_t si = 0, bi = 0;
  int found = ref_pick(r, is_large, stream, rounded, 0, &si, &bi);
  if (found) {
    uint64_t bsize = r->segs[si].blocks[bi].size;
    if ((rounded < mss && bsize >= mss) || (rounded >= mss && bsize >= rounded + ((uint64_t)20 << 20))) found = 0;
  }
  if (found) {
    r->stats.num_cache_hits++;
  } else {
    uint64_t seg_size = ref_segment_size(rounded);
    long n = ref_new_segment(r, seg_size, stream, is_large, 0);
    if (n < 0 && ref_release_available(r, is_large, stream, rounded)) n = ref_new_segment(r, seg_size, stream, is_large, 0);
    if (n < 0) {
      ref_release_cached(r);
      n = ref_new_segment(r, seg_size, stream, is_large, 1);
    }
    if (n < 0) {
      r->stats.num_ooms++;
      return GRT_ERR_OOM;
    }
    si = (size_t)n;
    bi = 0;
  }
  ref_segment *s = &r->segs[si];
  int was_split = ref_is_split(s);
  uint64_t remaining = s->blocks[bi].size - rounded;
  int split = is_large ? (rounded < mss && remaining > ((uint64_t)1 << 20)) : remaining >= 512;
  if (split) {
    ref_block front = {0};
    front.ptr = s->blocks[bi].ptr;
    front.size = rounded;
    s->blocks[bi].ptr += rounded;
    s->blocks[bi].size = remaining;
    ref_insert_block(s, bi, front);
    if (was_split) {
      ref_decrease2(r->stats.inactive_split_bytes, is_large, (int64_t)rounded);
    } else {
      ref_increase2(r->stats.inactive_split_bytes, is_large, (int64_t)remaining);
      ref_increase2(r->stats.inactive_split, is_large, 1);
    }
  } else if (was_split) {
    ref_decrease2(r->stats.inactive_split_bytes, is_large, (int64_t)s->blocks[bi].size);
    ref_decrease2(r->stats.inactive_split, is_large, 1);
  }
  ref_block *b = &s->blocks[bi];
  b->allocated = 1;
  b->requested = size;
  ref_increase2(r->stats.allocation, is_large, 1);
  ref_increase2(r->stats.allocated_bytes, is_large, (int64_t)b->size);
  ref_increase2(r->stats.active, is_large, 1);
  ref_increase2(r->stats.active_bytes, is_large, (int64_t)b->size);
  ref_increase2(r->stats.requested_bytes, is_large, (int64_t)size);
  if (b->size >= mss) ref_increase(&r->stats.oversize_allocations, 1);
  *out = b->ptr;
  return GRT_OK;
}

/* Why ptr is not a live allocation. */
static grt_status ref_classify(const ref_caching *r, grt_devptr ptr) {
  for (size_t i = 0; i < r->n_segs; i++) {
    const ref_segment *s = &r->segs[i];
    if (ptr < s->base || ptr >= s->base + s->size) continue;
    for (size_t j = 0; j < s->n_blocks; j++) {
      const ref_block *b = &s->blocks[j];
      if (ptr < b->ptr || ptr >= b->ptr + b->size) continue;
      if (ptr == b->ptr && !b->allocated && b->event_count) return GRT_ERR_DOUBLE_FREE; /* pending */
      if (ref_is_free(b)) return GRT_ERR_DOUBLE_FREE; /* inside cached memory */
      return GRT_ERR_INTERIOR_POINTER;
    }
  }
  return GRT_ERR_UNKNOWN_POINTER;
}

static grt_status ref_free(ref_caching *r, grt_devptr ptr) {
  size_t si, bi;
  if (!ref_find(r, ptr, &si, &bi) || !r->segs[si].blocks[bi].allocated) return ref_classify(r, ptr);
  ref_segment *s = &r->segs[si];
  ref_block *b = &s->blocks[bi];
  const grt_stream_ops *o = r->cfg.stream_ops;
  for (int k = 0; k < b->n_uses; k++) {
    if (r->n_events == r->cap_events) {
      r->cap_events = r->cap_events ? 2 * r->cap_events : 16;
      r->events = realloc(r->events, r->cap_events * sizeof *r->events);
      if (!r->events) abort();
    }
    ref_event e = {b->uses[k], 0, b->ptr};
    if (o->record_event(o->ctx, e.stream, &e.id) != GRT_OK) abort();
    r->events[r->n_events++] = e;
  }
  b->event_count = b->n_uses;
  b->n_uses = 0;
  b->allocated = 0;
  ref_decrease2(r->stats.allocation, s->is_large, 1);
  ref_decrease2(r->stats.allocated_bytes, s->is_large, (int64_t)b->size);
  if (b->size >= r->cfg.max_split_size) ref_decrease(&r->stats.oversize_allocations, 1);
  if (b->event_count == 0) ref_free_block(r, si, bi);
  return GRT_OK;
}

static grt_status ref_record_stream(ref_caching *r, grt_devptr ptr, grt_stream_id stream) {
  size_t si, bi;
  if (!ref_find(r, ptr, &si, &bi) || !r->segs[si].blocks[bi].allocated) return ref_classify(r, ptr);
  ref_block *b = &r->segs[si].blocks[bi];
  if (stream == r->segs[si].stream) return GRT_OK;
  for (int k = 0; k < b->n_uses; k++)
    if (b->uses[k] == stream) return GRT_OK;
  if (b->n_uses == REF_MAX_USES) abort(); /* the tests use fewer streams */
  b->uses[b->n_uses++] = stream;
  return GRT_OK;
}

static grt_status ref_empty_cache(ref_caching *r) {
  ref_release_cached(r);
  return GRT_OK;
}

static grt_status ref_block_info(const ref_caching *r, grt_devptr ptr, uint64_t *size, uint64_t *requested) {
  size_t si, bi;
  if (!ref_find(r, ptr, &si, &bi) || !r->segs[si].blocks[bi].allocated) return ref_classify(r, ptr);
  *size = r->segs[si].blocks[bi].size;
  *requested = r->segs[si].blocks[bi].requested;
  return GRT_OK;
}

static void ref_reset_peaks(ref_caching *r) {
  grt_stat *arrays[] = {r->stats.allocation,     r->stats.segment,         r->stats.active,
                        r->stats.inactive_split, r->stats.allocated_bytes, r->stats.reserved_bytes,
                        r->stats.active_bytes,   r->stats.inactive_split_bytes, r->stats.requested_bytes};
  for (size_t i = 0; i < sizeof arrays / sizeof arrays[0]; i++)
    for (int t = 0; t < GRT_STAT_TYPES; t++) arrays[i][t].peak = arrays[i][t].current;
  r->stats.oversize_allocations.peak = r->stats.oversize_allocations.current;
  r->stats.oversize_segments.peak = r->stats.oversize_segments.current;
}

/* The full statistics, with gpurt's additions computed by a scan. */
static grt_alloc_stats ref_stats(const ref_caching *r) {
  grt_alloc_stats s = r->stats;
  s.cached_bytes = (uint64_t)(s.reserved_bytes[GRT_STAT_ALL].current - s.allocated_bytes[GRT_STAT_ALL].current);
  s.largest_free_block = 0;
  s.pending_free_blocks = 0;
  for (size_t i = 0; i < r->n_segs; i++)
    for (size_t j = 0; j < r->segs[i].n_blocks; j++) {
      const ref_block *b = &r->segs[i].blocks[j];
      if (ref_is_free(b) && b->size > s.largest_free_block) s.largest_free_block = b->size;
      if (!b->allocated && b->event_count) s.pending_free_blocks++;
    }
  return s;
}

#endif
