/* caching_free.c — the caching allocator's free side: free (deferred when the
 * block was used on other streams), merge with free neighbours, events of
 * deferred frees, and returning segments to the device (release, empty_cache,
 * garbage collection). The device never sees a free in steady state; only
 * release_* calls it, and each such free is a device-wide sync. Every insert
 * into the bins here was reserved by the calling step (caching_reserve.c). */
#include <stdlib.h>
#include <string.h>

#include "alloc/caching.h"

/* Merges src into dst when src is free and in the same mapped state; returns
 * the bytes subsumed (0: no merge). The merge_on_free:False option stops
 * merges of freed blocks, but never of address space being (un)mapped. */
uint64_t grt__caching_try_merge(grt_allocator *a, cblock *dst, cblock *src, int force) {
  caching *c = a->impl;
  if (!src || !cblock_is_free(src) || src->unmapped != dst->unmapped) return 0;
  if (a->cfg.no_merge_on_free && !force) return 0;
  if (src->unmapped)
    grt__bins_erase(src->pool->unmapped, src->stream, src->ptr);
  else
    grt__pool_erase(src->pool, src);
  if (dst->prev == src) {
    dst->ptr = src->ptr;
    dst->prev = src->prev;
    if (dst->prev)
      dst->prev->next = dst;
    else
      dst->seg->head = dst;
  } else {
    dst->next = src->next;
    if (dst->next) dst->next->prev = dst;
  }
  uint64_t subsumed = src->size;
  dst->size += subsumed;
  grt__cblock_release(c, src);
  return subsumed;
}

/* The block is no longer used anywhere: merge it and put it in the bins. */
void grt__caching_free_block(grt_allocator *a, cblock *b) {
  caching *c = a->impl;
  int pool = b->pool->stat_type;
  uint64_t original_size = b->size, requested = b->requested_size;
  grt_devptr original_ptr = b->ptr;
  int64_t net_blocks = 0, net_bytes = 0;
  cblock *candidates[2] = {b->prev, b->next};
  for (int i = 0; i < 2; i++) {
    uint64_t subsumed = grt__caching_try_merge(a, b, candidates[i], 0);
    if (subsumed) {
      net_blocks -= 1;
      net_bytes -= (int64_t)subsumed;
    }
  }
  grt__u64map_del(&c->active, original_ptr);
  b->requested_size = 0;
  grt__pool_add(b->pool, b);
  if (cblock_is_split(b)) {
    net_blocks += 1;
    net_bytes += (int64_t)b->size;
  }
  if (net_blocks && !cblock_is_expandable(b)) grt__stat_update2(a->stats.inactive_split, pool, net_blocks);
  if (net_bytes && !cblock_is_expandable(b)) grt__stat_update2(a->stats.inactive_split_bytes, pool, net_bytes);
  grt__stat_update2(a->stats.active, pool, -1);
  grt__stat_update2(a->stats.active_bytes, pool, -(int64_t)original_size);
  grt__stat_update2(a->stats.requested_bytes, pool, -(int64_t)requested);
}

static int reserve_events(caching *c, size_t more) {
  if (c->n_events + more <= c->cap_events) return 1;
  size_t cap = c->cap_events ? c->cap_events : 16;
  while (cap < c->n_events + more) cap *= 2;
  pending_event *e = realloc(c->events, cap * sizeof *e);
  if (!e) return 0;
  c->events = e;
  c->cap_events = cap;
  return 1;
}

/* Default completion model when no stream_ops are given: events complete at the next malloc. */
static grt_status record(grt_allocator *a, grt_stream_id s, uint64_t *ev) {
  const grt_stream_ops *o = a->cfg.stream_ops;
  if (!o) return *ev = 0, GRT_OK;
  return o->record_event(o->ctx, s, ev);
}
static int query(grt_allocator *a, uint64_t ev) {
  const grt_stream_ops *o = a->cfg.stream_ops;
  return o ? o->event_query(o->ctx, ev) : 1;
}
static void sync_event(grt_allocator *a, uint64_t ev) {
  const grt_stream_ops *o = a->cfg.stream_ops;
  if (o) o->event_synchronize(o->ctx, ev);
}
static void destroy_event(grt_allocator *a, uint64_t ev) {
  const grt_stream_ops *o = a->cfg.stream_ops;
  if (o && o->event_destroy) o->event_destroy(o->ctx, ev);
}

/* One event per stream the block was used on; the free completes when all did. */
static grt_status insert_events(grt_allocator *a, cblock *b) {
  caching *c = a->impl;
  if (!reserve_events(c, b->n_uses)) return GRT_ERR_NOMEM;
  size_t first = c->n_events;
  for (uint32_t i = 0; i < b->n_uses; i++) {
    uint64_t ev;
    grt_status st = record(a, b->uses[i], &ev);
    if (st) { /* roll back the events recorded so far */
      while (c->n_events > first) destroy_event(a, c->events[--c->n_events].event);
      return st;
    }
    c->events[c->n_events++] = (pending_event){b->uses[i], ev, b};
  }
  b->event_count = (int)b->n_uses;
  b->n_uses = 0;
  return GRT_OK;
}

/* Room for b's insert into its bins when it becomes free now. */
static grt_status reserve_free(cblock *b) {
  grt__bins *bins = grt__pool_bins(b->pool, b->stream, 1);
  return bins && grt__bins_reserve(bins, 1) == GRT_OK ? GRT_OK : GRT_ERR_NOMEM;
}

grt_status grt__caching_free(grt_allocator *a, grt_devptr ptr) {
  caching *c = a->impl;
  cblock *b = grt__u64map_get(&c->active, ptr);
  if (!b || !b->allocated) return grt__caching_classify(a, ptr);
  grt_status st = b->n_uses ? insert_events(a, b) : reserve_free(b);
  if (st) return st;
  int pool = b->pool->stat_type;
  b->allocated = 0;
  grt__stat_update2(a->stats.allocation, pool, -1);
  grt__stat_update2(a->stats.allocated_bytes, pool, -(int64_t)b->size);
  if (b->size >= a->cfg.max_split_size) grt__stat_update(&a->stats.oversize_allocations, -1);
  if (b->event_count == 0)
    grt__caching_free_block(a, b);
  else
    c->n_pending_blocks++;
  return GRT_OK;
}

static void event_done(grt_allocator *a, cblock *b) {
  if (--b->event_count > 0) return;
  ((caching *)a->impl)->n_pending_blocks--;
  grt__caching_free_block(a, b);
}

/* Per stream, completed events at the front of its queue free their blocks. */
void grt__caching_process_events(grt_allocator *a) {
  caching *c = a->impl;
  if (c->n_events == 0) return;
  grt_stream_id blocked[64];
  size_t n_blocked = 0, kept = 0;
  int overflow = 0;
  for (size_t i = 0; i < c->n_events; i++) {
    pending_event e = c->events[i];
    int is_blocked = overflow;
    for (size_t j = 0; j < n_blocked && !is_blocked; j++) is_blocked = blocked[j] == e.stream;
    if (!is_blocked && query(a, e.event)) {
      destroy_event(a, e.event);
      event_done(a, e.block);
      continue;
    }
    if (!is_blocked) {
      if (n_blocked < 64)
        blocked[n_blocked++] = e.stream;
      else
        overflow = 1; /* keep order safe: stop processing further streams */
    }
    c->events[kept++] = e;
  }
  c->n_events = kept;
}

/* Waits for every outstanding event, then frees their blocks. */
void grt__caching_sync_events(grt_allocator *a) {
  caching *c = a->impl;
  size_t n = c->n_events;
  c->n_events = 0; /* free_block below must not see these entries */
  for (size_t i = 0; i < n; i++) {
    pending_event e = c->events[i];
    sync_event(a, e.event);
    destroy_event(a, e.event);
    event_done(a, e.block);
  }
  a->stats.num_sync_all_streams++;
}

/* The events kept stay in record order. All the events of a block are for
 * the same pool, so a block freed here has no event left behind. */
void grt__caching_sync_pool_events(grt_allocator *a, const cprivate *pp) {
  caching *c = a->impl;
  size_t n = c->n_events, kept = 0;
  for (size_t i = 0; i < n; i++) {
    pending_event e = c->events[i];
    if (e.block->pool->owner != pp) {
      c->events[kept++] = e;
      continue;
    }
    sync_event(a, e.event);
    destroy_event(a, e.event);
    event_done(a, e.block);
  }
  c->n_events = kept;
  a->stats.num_sync_all_streams++;
}

/* cudaFree of a whole free segment (the block is the segment). The device may
 * still fail for its own host memory: then nothing changes and the caller
 * stops its release there. */
grt_status grt__caching_release_block(grt_allocator *a, cblock *b) {
  caching *c = a->impl;
  cseg *s = b->seg;
  grt_status st = grt_device_free(a->dev, s->base);
  if (st) return st;
  c->total_allocated_memory -= s->size;
  grt__pool_seg_removed(b->pool);
  int pool = b->pool->stat_type;
  grt__stat_update2(a->stats.segment, pool, -1);
  grt__stat_update2(a->stats.reserved_bytes, pool, -(int64_t)s->size);
  if (s->size >= a->cfg.max_split_size) grt__stat_update(&a->stats.oversize_segments, -1);
  a->stats.num_device_free++;
  grt__pool_erase(b->pool, b);
  grt__seg_remove(c, s);
  grt__cblock_release(c, b);
  free(s);
  return GRT_OK;
}

/* Frees every whole unsplit free segment of the pool idle for at least
 * min_idle cycles, in (stream, size, address) order; then, in the same order,
 * unmaps the free blocks of expandable segments (a second walk: unmapping
 * edits the bins, but only below the key it stands on, since the partial
 * pages it leaves mapped are smaller than the block they came from). */
grt_status grt__caching_release_pool(grt_allocator *a, cpool *pool, uint64_t min_idle) {
  grt_status st = GRT_OK;
  for (int unmapping = 0; unmapping < 2; unmapping++)
    for (size_t i = grt__pool_next_occupied(pool, 0); i < pool->n_streams; i = grt__pool_next_occupied(pool, i + 1)) {
      grt__bins *bins = pool->stream_bins[i];
      grt__bin_entry e, cur;
      for (int more = grt__bins_first(bins, &e); more && !st;) {
        cur = e;
        more = grt__bins_next(bins, cur.size, cur.addr, &e);
        cblock *b = cur.value;
        if (pool->cycle - b->idle_since < min_idle || cblock_is_expandable(b) != unmapping) continue;
        if (unmapping)
          st = grt__caching_unmap_block(a, b);
        else if (!cblock_is_split(b))
          st = grt__caching_release_block(a, b);
      }
      if (st) return st;
      grt__pool_settle(pool, i);
    }
  return GRT_OK;
}

/* PyTorch's release_cached_blocks with the default pool id: while a pool is
 * begun, the default pools keep their segments and no event is waited for;
 * the freeable private pools are released either way. */
grt_status grt__caching_release_cached(grt_allocator *a, uint64_t min_idle) {
  caching *c = a->impl;
  grt_status st = GRT_OK;
  if (!c->n_captures) {
    grt__caching_sync_events(a);
    st = grt__caching_release_pool(a, &c->large, min_idle);
    if (!st) st = grt__caching_release_pool(a, &c->small, min_idle);
  }
  return st ? st : grt__caching_release_freeable(a, NULL, min_idle);
}

/* PyTorch's release_available_cached_blocks: with max_split_size set, free one
 * oversize block big enough, or oversize blocks from the largest down until
 * enough bytes were freed; *enough = 1 when it freed enough. */
grt_status grt__caching_release_available(grt_allocator *a, cpool *pool, grt_stream_id stream, uint64_t size,
                                          int *enough) {
  uint64_t mss = a->cfg.max_split_size;
  *enough = 0;
  grt__bins *bins = mss == GRT_UNLIMITED ? NULL : grt__pool_bins(pool, stream, 0);
  if (!bins) return GRT_OK;
  uint64_t key = size < mss ? mss : size;
  grt__bin_entry e;
  if (grt__bins_lower_bound(bins, key, 0, &e) && !cblock_is_split(e.value) && !cblock_is_expandable(e.value)) {
    *enough = 1;
    return grt__caching_release_block(a, e.value);
  }
  uint64_t released = 0;
  grt_status st = GRT_OK;
  int more = grt__bins_last(bins, &e);
  while (more && released < key && e.size >= mss && !st) {
    grt__bin_entry prev;
    int has_prev = grt__bins_prev(bins, e.size, e.addr, &prev);
    cblock *b = e.value;
    if (!cblock_is_split(b) && !cblock_is_expandable(b)) {
      released += b->size;
      st = grt__caching_release_block(a, b);
    }
    e = prev;
    more = has_prev;
  }
  *enough = released >= key;
  return st;
}

/* garbage_collection_threshold: above threshold x allowed memory, free unsplit
 * large cached blocks whose age (get_free_block calls since they became free)
 * is at least the average, repeating until enough is reclaimed. */
grt_status grt__caching_garbage_collect(grt_allocator *a) {
  caching *c = a->impl;
  cpool *pool = &c->large;
  uint64_t threshold = (uint64_t)(a->cfg.garbage_collection_threshold * (double)c->allowed_memory);
  if (c->total_allocated_memory <= threshold) return GRT_OK;
  uint64_t target = c->total_allocated_memory - threshold, reclaimed = 0, total_age = 0, freeable = 0;
  for (size_t i = grt__pool_next_occupied(pool, 0); i < pool->n_streams; i = grt__pool_next_occupied(pool, i + 1)) {
    grt__bins *bins = pool->stream_bins[i];
    grt__bin_entry e;
    for (int more = grt__bins_first(bins, &e); more; more = grt__bins_next(bins, e.size, e.addr, &e)) {
      cblock *b = e.value;
      if (!cblock_is_split(b) && !cblock_is_expandable(b)) {
        total_age += pool->get_free_calls - b->gc_base;
        freeable++;
      }
    }
  }
  int freed_one = 1;
  while (reclaimed < target && freed_one && freeable > 0) {
    double age_threshold = (double)total_age / (double)freeable;
    freed_one = 0;
    for (size_t i = grt__pool_next_occupied(pool, 0); i < pool->n_streams; i = grt__pool_next_occupied(pool, i + 1)) {
      grt__bins *bins = pool->stream_bins[i];
      grt__bin_entry e, next;
      int more = grt__bins_first(bins, &e);
      while (more) {
        int has_next = grt__bins_next(bins, e.size, e.addr, &next);
        cblock *b = e.value;
        uint64_t age = pool->get_free_calls - b->gc_base;
        if (!cblock_is_split(b) && !cblock_is_expandable(b) && (double)age >= age_threshold) {
          freed_one = 1;
          reclaimed += b->size;
          total_age -= age;
          freeable--;
          grt_status st = grt__caching_release_block(a, b);
          if (st) return st;
        }
        e = next;
        more = has_next;
      }
    }
  }
  return GRT_OK;
}

grt_status grt__caching_record_stream(grt_allocator *a, grt_devptr ptr, grt_stream_id stream) {
  caching *c = a->impl;
  cblock *b = grt__u64map_get(&c->active, ptr);
  if (!b || !b->allocated) return grt__caching_classify(a, ptr);
  if (stream == b->stream) return GRT_OK;
  for (uint32_t i = 0; i < b->n_uses; i++)
    if (b->uses[i] == stream) return GRT_OK;
  if (b->n_uses == b->cap_uses) {
    uint32_t cap = b->cap_uses ? b->cap_uses * 2 : 2;
    grt_stream_id *u = realloc(b->uses, cap * sizeof *u);
    if (!u) return GRT_ERR_NOMEM;
    b->uses = u;
    b->cap_uses = cap;
  }
  b->uses[b->n_uses++] = stream;
  return GRT_OK;
}

grt_status grt__caching_empty_cache_reserve(grt_allocator *a) {
  cneeds nd;
  grt__needs_init(&nd);
  grt_status st = grt__needs_release(a, &nd);
  return st ? st : grt__caching_reserve(a, &nd);
}

/* The device may still fail a free or unmap for its own host memory: the
 * release stops there (what it released stays released) and reports it. */
grt_status grt__caching_empty_cache_commit(grt_allocator *a) {
  caching *c = a->impl;
  /* idle = empty_cache calls a free segment has sat through unused, this one not counted */
  grt_status st = grt__caching_release_cached(a, a->cfg.empty_cache_idle_cycles);
  if (st) return st;
  c->small.cycle++;
  c->large.cycle++;
  for (size_t i = 0; i < c->n_pools; i++) {
    c->pools[i]->small.cycle++;
    c->pools[i]->large.cycle++;
  }
  return GRT_OK;
}

grt_status grt__caching_empty_cache(grt_allocator *a) {
  grt_status st = grt__caching_empty_cache_reserve(a);
  return st ? st : grt__caching_empty_cache_commit(a);
}
