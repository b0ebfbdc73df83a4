/* replay.c — applying trace events to a device + allocator, one at a time.
 *
 * Invariants: every live id maps to the replay's address of its allocation
 * (or REPLAY_FAILED when the replay could not serve it); `live` is the sum of
 * the requested sizes of live ids; a placement hint set by a segment event is
 * cleared after the next alloc, so it never lands on an unrelated malloc; a
 * run of segment_free/segment_unmap events (with an oom ending it) is one
 * release (replay_release.c). A failed feed changes nothing but the error
 * text.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/status.h"
#include "trace/replay_impl.h"

void grt_replay_config_default(grt_replay_config *cfg) {
  if (!cfg) return;
  memset(cfg, 0, sizeof *cfg);
  cfg->policy = "caching";
  cfg->placement = GRT_REPLAY_PLACE_AUTO;
  cfg->honor_releases = true;
}

void grt__replay_set_error(grt_replay *r, const char *fmt, ...) {
  int n = snprintf(r->err, sizeof r->err, "event %llu: ", (unsigned long long)r->pos);
  if (n < 0 || (size_t)n >= sizeof r->err) return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(r->err + n, sizeof r->err - (size_t)n, fmt, ap);
  va_end(ap);
}

/* ---- ids -> slots ---- */

void grt__replay_ids_init(grt__replay_ids *t) {
  grt__u64map_init(&t->map);
  t->free = NULL;
  t->n_free = t->cap_free = 0;
  t->next = 0;
}

void grt__replay_ids_free(grt__replay_ids *t) {
  grt__u64map_free(&t->map);
  free(t->free);
  grt__replay_ids_init(t);
}

grt_status grt__replay_ids_grow(grt__replay_ids *t) {
  /* a new slot: the free list keeps room for every slot, so a remove never allocates */
  size_t cap = t->cap_free ? t->cap_free * 2 : 1024;
  uint64_t *f = realloc(t->free, cap * sizeof *f);
  if (!f) return GRT_ERR_NOMEM;
  t->free = f;
  t->cap_free = cap;
  return GRT_OK;
}

/* ---- live allocations ---- */

/* The arrays grow to hold index i (slot and sparse modes). */
static grt_status grow_arrays(grt_replay *r, uint64_t i) {
  uint64_t n = r->n_ids ? r->n_ids * 2 : 1024;
  while (n <= i) n *= 2;
  grt_devptr *p = realloc(r->id_ptr, n * sizeof *p);
  if (!p) return GRT_ERR_NOMEM;
  r->id_ptr = p;
  uint64_t *z = realloc(r->id_size, n * sizeof *z);
  if (!z) return GRT_ERR_NOMEM;
  r->id_size = z;
  memset(r->id_ptr + r->n_ids, 0, (n - r->n_ids) * sizeof *p);
  r->n_ids = n;
  return GRT_OK;
}

/* Looks up a live id: *ptr 0 when not live. */
static inline void live_get(grt_replay *r, uint64_t id, grt_devptr *ptr, uint64_t *size) {
  uint64_t i = id;
  if (!r->dense && !grt__replay_ids_find(&r->ids, id, &i)) i = UINT64_MAX;
  *ptr = i < r->n_ids ? r->id_ptr[i] : 0;
  *size = *ptr ? r->id_size[i] : 0;
}

grt_devptr grt__replay_live_ptr(grt_replay *r, uint64_t id) {
  grt_devptr p;
  uint64_t size;
  live_get(r, id, &p, &size);
  return p;
}

/* Room for id (not live) to become live: live_put cannot fail after it. */
static grt_status live_reserve(grt_replay *r, uint64_t id) {
  if (r->dense) return id < r->n_ids ? GRT_OK : grow_arrays(r, id); /* only slot mode gets here past n_ids */
  grt_status st = grt__replay_ids_reserve(&r->ids);
  uint64_t i = grt__replay_ids_peek(&r->ids);
  if (!st && i >= r->n_ids) st = grow_arrays(r, i);
  return st;
}

static void live_put(grt_replay *r, uint64_t id, grt_devptr ptr, uint64_t size) {
  uint64_t i = r->dense ? id : grt__replay_ids_add(&r->ids, id);
  r->id_ptr[i] = ptr;
  r->id_size[i] = size;
}

static void live_del(grt_replay *r, uint64_t id) {
  uint64_t i = id;
  if (r->dense || grt__replay_ids_remove(&r->ids, id, &i)) r->id_ptr[i] = 0;
}

grt_devptr grt__replay_to_recorded(const grt_replay *r, grt_devptr a) {
  for (size_t i = 0; i < r->n_xlate; i++)
    if (r->xlate[i].replay && a >= r->xlate[i].replay && a < r->xlate[i].replay + r->xlate[i].size)
      return a - r->xlate[i].replay + r->xlate[i].recorded;
  return a;
}

grt_devptr grt__replay_to_replay(const grt_replay *r, grt_devptr a) {
  for (size_t i = 0; i < r->n_xlate; i++)
    if (r->xlate[i].replay && a >= r->xlate[i].recorded && a < r->xlate[i].recorded + r->xlate[i].size)
      return a - r->xlate[i].recorded + r->xlate[i].replay;
  return a;
}

grt_status grt__replay_note_imported(grt_replay *r, grt_devptr addr) {
  return grt__u64map_put(&r->imported, addr, (void *)1) ? GRT_OK : GRT_ERR_NOMEM;
}

/* ---- create / destroy ---- */

/* Frees everything; the first teardown failure (a device still holding
 * segments) is returned. */
static grt_status free_replay(grt_replay *r) {
  if (!r) return GRT_OK;
  grt_status st = grt_alloc_destroy(r->alloc);
  grt__keep_first(&st, grt_device_destroy(r->dev));
  free(r->id_ptr);
  free(r->id_size);
  grt__replay_ids_free(&r->ids);
  grt__u64map_free(&r->imported);
  free(r->pools);
  free(r->series);
  free(r->xlate);
  grt__replay_stacks_free(r);
  free(r);
  return st;
}

static void take_baseline(grt_replay *r) {
  grt_alloc_stats as;
  grt_device_stats ds;
  /* an allocator, a device and buffers: neither can fail */
  grt__ignore(grt_alloc_get_stats(r->alloc, &as));
  grt__ignore(grt_device_get_stats(r->dev, &ds));
  r->base_dev_alloc = as.num_device_alloc;
  r->base_dev_free = as.num_device_free;
  r->base_syncs = ds.syncs;
}

static grt_status make_replay(const grt_replay_config *cfg, const grt_trace_info *info, grt_replay **out) {
  /* an enum from outside may hold any value: one the replay does not know is refused, not guessed at */
  if (cfg && ((unsigned)cfg->placement > GRT_REPLAY_PLACE_RECORDED || (unsigned)cfg->device_model > GRT_DEVICE_MODEL_PAGED))
    return GRT_ERR_INVALID_ARG;
  grt_replay *r = calloc(1, sizeof *r);
  if (!r) return GRT_ERR_NOMEM;
  if (cfg)
    r->cfg = *cfg;
  else
    grt_replay_config_default(&r->cfg);
  if (!r->cfg.policy) r->cfg.policy = "caching";
  snprintf(r->policy, sizeof r->policy, "%s", r->cfg.policy);
  r->cfg.policy = r->policy;
  grt__u64map_init(&r->imported);
  grt__replay_ids_init(&r->ids);
  if (info) {
    r->info = *info;
    r->have_info = true;
  }
  *out = r;
  return GRT_OK;
}

static bool has_recorded_addresses(const grt_trace_info *info) {
  return info && info->format == GRT_TRACE_FORMAT_PYTORCH;
}

grt_status grt_replay_create(const grt_replay_config *cfg, const grt_trace_info *info, grt_replay **out) {
  if (!out) return GRT_ERR_INVALID_ARG;
  *out = NULL;
  grt_replay *r;
  grt_status st = make_replay(cfg, info, &r);
  if (st) return st;
  const grt_replay_config *c = &r->cfg;
  bool caching = !strcmp(c->policy, "caching");
  r->recorded_placement = c->placement == GRT_REPLAY_PLACE_RECORDED ||
                          (c->placement == GRT_REPLAY_PLACE_AUTO && caching && has_recorded_addresses(info));
  grt_device_config dc;
  grt_device_config_default(&dc);
  grt__replay_geometry(c, info, r->recorded_placement, &dc.base_address, &dc.capacity);
  dc.model = c->device_model;
  grt_alloc_config ac;
  char msg[256] = "";
  if ((st = grt__replay_alloc_config(c, info, &ac, msg, sizeof msg)) || (st = grt_device_create(&dc, &r->dev)) ||
      (st = grt_alloc_create(c->policy, r->dev, &ac, &r->alloc))) {
    grt__keep_first(&st, free_replay(r));
    return st;
  }
  r->sum.capacity = dc.capacity;
  if (r->recorded_placement && caching && info && (st = grt__replay_pools_init(r))) {
    grt__keep_first(&st, free_replay(r));
    return st;
  }
  if (info && info->n_ids && info->events) {
    r->n_ids = info->n_ids;
    r->dense = true;
    r->id_ptr = calloc(info->n_ids, sizeof *r->id_ptr);
    r->id_size = calloc(info->n_ids, sizeof *r->id_size);
    if (!r->id_ptr || !r->id_size) {
      st = GRT_ERR_NOMEM;
      grt__keep_first(&st, free_replay(r));
      return st;
    }
  }
  take_baseline(r);
  *out = r;
  return GRT_OK;
}

grt_status grt_replay_open(const grt_trace *trace, const grt_replay_config *cfg, grt_replay **out) {
  if (!trace || !out) return GRT_ERR_INVALID_ARG;
  grt_trace_info info;
  grt_status st = grt_trace_get_info(trace, &info);
  if (st) return st;
  if ((st = grt_replay_create(cfg, &info, out))) return st;
  (*out)->trace = trace;
  return GRT_OK;
}

grt_status grt_replay_rebuild_start(grt_replay *r) {
  if (!r) return GRT_ERR_INVALID_ARG;
  if (r->pos) return GRT_ERR_STATE;
  if (!r->have_info || !r->recorded_placement || strcmp(r->policy, "caching")) return GRT_ERR_INVALID_ARG;
  grt_status st = grt__replay_rebuild_start(r);
  take_baseline(r);
  return st;
}

grt_status grt_replay_prefill_start(grt_replay *r) {
  if (!r) return GRT_ERR_INVALID_ARG;
  if (r->pos) return GRT_ERR_STATE;
  if (!r->have_info) return GRT_ERR_INVALID_ARG;
  grt_status st = grt__replay_prefill_start(r);
  take_baseline(r);
  return st;
}

grt_status grt_replay_destroy(grt_replay *r) { return free_replay(r); }

/* ---- events ---- */

void grt__replay_use_slots(grt_replay *r) {
  r->dense = true;
  r->slots = true;
}

void grt__replay_note_oom(grt_replay *r, uint64_t size) {
  r->sum.ooms++;
  if (r->sum.has_oom) return;
  r->sum.has_oom = true;
  r->sum.first_oom_event = r->pos;
  r->sum.first_oom_size = size;
  r->sum.first_oom_live = r->live;
  r->sum.first_oom_utilization = r->sum.capacity ? (double)r->live / (double)r->sum.capacity : 0.0;
}

grt_status grt__replay_do_alloc(grt_replay *r, const grt_trace_event *ev, grt_stream_id stream) {
  grt_pool_id pool;
  grt_devptr p, old;
  uint64_t old_size;
  live_get(r, ev->id, &old, &old_size);
  if (r->dense && !r->slots && ev->id >= r->n_ids) {
    grt__replay_set_error(r, "alloc id %llu is outside the trace's ids", (unsigned long long)ev->id);
    return GRT_ERR_PARSE;
  }
  if (old) {
    grt__replay_set_error(r, "alloc of id %llu which is still live", (unsigned long long)ev->id);
    return GRT_ERR_PARSE;
  }
  grt_status st = live_reserve(r, ev->id); /* first, so that running out of host memory changes nothing */
  if (!st && r->n_xlate) st = grt__replay_xlate_reserve(r);
  if (st) return st;
  r->alloc_was_retry = r->retry_pending && ev->size;
  if (!ev->size)
    st = GRT_ERR_SIZE;
  else if (r->retry_pending)
    st = grt__replay_retry_malloc(r, ev->size, stream, &p);
  else if (r->n_pools && (ev->flags & GRT_TRACE_F_ADDR) && grt__replay_pool_of(r, ev->addr, &pool))
    st = grt__replay_pool_malloc(r, pool, ev->size, stream, &p);
  else
    st = grt_alloc_malloc(r->alloc, ev->size, stream, &p);
  if (st == GRT_ERR_NOMEM) { /* nothing changed but the device's hint, which the device may have used up */
    grt__replay_set_error(r, "alloc of %llu bytes: %s", (unsigned long long)ev->size, grt_alloc_last_error(r->alloc));
    grt_status hint_st = grt_device_set_next_address(r->dev, r->hint);
    return hint_st ? hint_st : st;
  }
  r->sum.allocs++;
  if (r->hint) {
    r->hint = 0;
    grt__ignore(grt_device_set_next_address(r->dev, 0)); /* 0, no hint, suits every device: it cannot fail */
  }
  if (st == GRT_OK) {
    if (r->n_xlate) {
      grt__replay_note_released(r);
      grt__replay_follow(r, stream, ev->size); /* room reserved */
    }
  } else if (st == GRT_ERR_OOM || (st == GRT_ERR_SIZE && ev->size)) {
    grt__replay_note_oom(r, ev->size);
    p = REPLAY_FAILED;
  } else if (st == GRT_ERR_SIZE) {
    p = REPLAY_FAILED; /* a zero-byte allocation: nothing to place */
  } else {
    grt__replay_set_error(r, "alloc of %llu bytes failed: %s", (unsigned long long)ev->size,
                          grt_alloc_last_error(r->alloc));
    return st;
  }
  r->pending_map = 0;
  if (r->on_alloc) r->on_alloc(r->hook_ctx, r, ev, r->pos, p, st);
  live_put(r, ev->id, p, ev->size);
  if (p != REPLAY_FAILED) {
    r->live += ev->size;
    if (r->live > r->peak_live) r->peak_live = r->live;
  }
  return GRT_OK;
}

static grt_status do_free(grt_replay *r, const grt_trace_event *ev) {
  grt_devptr p;
  uint64_t size;
  live_get(r, ev->id, &p, &size);
  if (!p) {
    if ((ev->flags & GRT_TRACE_F_ADDR) && grt__u64map_get(&r->imported, ev->addr)) {
      grt_status st = grt_alloc_free(r->alloc, grt__replay_to_replay(r, ev->addr));
      if (st) {
        grt__replay_set_error(r, "free of the imported block at 0x%llx failed: %s", (unsigned long long)ev->addr,
                              grt_alloc_last_error(r->alloc));
        return st == GRT_ERR_NOMEM ? st : GRT_ERR_PARSE; /* host memory: nothing changed, the feed may be retried */
      }
      grt__u64map_del(&r->imported, ev->addr);
      r->sum.frees++;
      return GRT_OK;
    }
    r->sum.unmatched_frees++;
    return GRT_OK;
  }
  if (p != REPLAY_FAILED) {
    grt_status st = grt_alloc_free(r->alloc, p);
    if (st) {
      grt__replay_set_error(r, "free of id %llu (0x%llx) failed: %s", (unsigned long long)ev->id,
                            (unsigned long long)p, grt_alloc_last_error(r->alloc));
      return st == GRT_ERR_NOMEM ? st : GRT_ERR_PARSE; /* host memory: nothing changed, the feed may be retried */
    }
    r->sum.frees++;
    r->live -= size;
  }
  live_del(r, ev->id);
  return GRT_OK;
}

static grt_status apply_kind(grt_replay *r, const grt_trace_event *ev, grt_stream_id stream) {
  grt_trace_kind k = (grt_trace_kind)ev->kind;
  if (r->slots && ev->reserved) { /* the reader thread's verdicts on the file's ids */
    r->in_release_run = false;
    if (ev->reserved == GRT__SLOT_DUPLICATE) {
      grt__replay_set_error(r, "alloc of id %llu which is still live", (unsigned long long)ev->id);
      return GRT_ERR_PARSE;
    }
    if (k == GRT_TRACE_FREE_COMPLETED) r->sum.unmatched_frees++; /* GRT__SLOT_UNMATCHED */
    return GRT_OK;
  }
  bool release_kind = k == GRT_TRACE_SEGMENT_FREE || k == GRT_TRACE_SEGMENT_UNMAP || k == GRT_TRACE_OOM;
  if (!release_kind) r->in_release_run = false;
  if (k != GRT_TRACE_ALLOC && k != GRT_TRACE_SEGMENT_ALLOC && k != GRT_TRACE_SEGMENT_MAP && !release_kind)
    r->retry_pending = false; /* not the retry after all: another event came between */
  switch (k) {
    case GRT_TRACE_ALLOC: return grt__replay_do_alloc(r, ev, stream);
    case GRT_TRACE_FREE_COMPLETED: return do_free(r, ev);
    case GRT_TRACE_FREE_REQUESTED:
    case GRT_TRACE_SNAPSHOT: return GRT_OK;
    case GRT_TRACE_SEGMENT_ALLOC:
    case GRT_TRACE_SEGMENT_MAP:
      if (k == GRT_TRACE_SEGMENT_MAP && !r->pending_map && (ev->flags & GRT_TRACE_F_ADDR)) r->pending_map = ev->addr;
      if (r->recorded_placement && (ev->flags & GRT_TRACE_F_ADDR) && ev->addr % 512 == 0) {
        grt_status st = grt_device_set_next_address(r->dev, ev->addr);
        if (st) return st;
        r->hint = ev->addr;
      }
      return GRT_OK;
    case GRT_TRACE_SEGMENT_FREE:
    case GRT_TRACE_SEGMENT_UNMAP:
    case GRT_TRACE_OOM: return grt__replay_release_event(r, ev, stream);
    default: break;
  }
  grt__replay_set_error(r, "unknown event kind %u", (unsigned)ev->kind);
  return GRT_ERR_PARSE;
}

/* An event whose application fails leaves the release run as it was. */
static grt_status apply(grt_replay *r, const grt_trace_event *ev, grt_stream_id stream) {
  bool in_run = r->in_release_run, oom_replayed = r->oom_replayed, retry = r->retry_pending;
  grt_status st = apply_kind(r, ev, stream);
  if (st) r->in_release_run = in_run, r->oom_replayed = oom_replayed, r->retry_pending = retry;
  return st;
}

grt_status grt_replay_feed(grt_replay *r, const grt_trace_event *ev, grt_stream_id stream) {
  if (!r || !ev) return GRT_ERR_INVALID_ARG;
  /* Room for the event's sample first, so that the sample cannot fail after
   * the event changed the replay. */
  grt_status st = r->cfg.record_series ? grt__replay_series_room(r) : GRT_OK;
  if (st || (st = apply(r, ev, stream))) return st;
  if (r->cfg.record_series) grt__replay_fill_sample(r, &r->series[r->n_series++]); /* room reserved */
  uint64_t index = r->pos++;
  r->sum.events++;
  if (r->cfg.on_step) return r->cfg.on_step(r->cfg.step_ctx, r, ev, index);
  return GRT_OK;
}

grt_status grt_replay_step(grt_replay *r, bool *done) {
  if (!r || !done || !r->trace) return GRT_ERR_INVALID_ARG;
  if (r->pos >= r->info.n_events) {
    *done = true;
    return GRT_OK;
  }
  const grt_trace_event *ev = &r->info.events[r->pos];
  grt_status st = grt_replay_feed(r, ev, r->info.streams[ev->stream]);
  *done = r->pos >= r->info.n_events;
  return st;
}

grt_status grt_replay_run(grt_replay *r) {
  if (!r || !r->trace) return GRT_ERR_INVALID_ARG;
  const grt_trace_event *evs = r->info.events;
  const grt_stream_id *streams = r->info.streams;
  while (r->pos < r->info.n_events) {
    const grt_trace_event *ev = &evs[r->pos];
    grt_status st = grt_replay_feed(r, ev, streams[ev->stream]);
    if (st) return st;
  }
  return GRT_OK;
}

/* ---- results ---- */

grt_status grt_replay_get_summary(const grt_replay *r, grt_replay_summary *out) {
  if (!r || !out) return GRT_ERR_INVALID_ARG;
  *out = r->sum;
  grt_alloc_stats as;
  grt_device_stats ds;
  grt__ignore(grt_alloc_get_stats(r->alloc, &as)); /* an allocator, a device and buffers: they cannot fail */
  grt__ignore(grt_device_get_stats(r->dev, &ds));
  out->peak_reserved = (uint64_t)as.reserved_bytes[GRT_STAT_ALL].peak;
  out->peak_allocated = (uint64_t)as.allocated_bytes[GRT_STAT_ALL].peak;
  out->peak_requested = (uint64_t)as.requested_bytes[GRT_STAT_ALL].peak;
  out->peak_active = (uint64_t)as.active_bytes[GRT_STAT_ALL].peak;
  out->final_reserved = (uint64_t)as.reserved_bytes[GRT_STAT_ALL].current;
  out->final_allocated = (uint64_t)as.allocated_bytes[GRT_STAT_ALL].current;
  out->peak_live = r->peak_live;
  out->device_mallocs = as.num_device_alloc - r->base_dev_alloc;
  out->device_frees = as.num_device_free - r->base_dev_free;
  out->syncs = ds.syncs - r->base_syncs;
  out->num_alloc_retries = as.num_alloc_retries;
  out->peak_reserved_event = UINT64_MAX;
  uint64_t best = 0;
  for (size_t i = 0; i < r->n_series; i++) {
    const grt_replay_sample *s = &r->series[i];
    if (s->reserved > best || out->peak_reserved_event == UINT64_MAX) best = s->reserved, out->peak_reserved_event = i;
    if (s->cached > out->peak_cached) out->peak_cached = s->cached;
    if (s->largest_free > out->peak_largest_free) out->peak_largest_free = s->largest_free;
    if (s->fragmentation > out->max_fragmentation) out->max_fragmentation = s->fragmentation;
  }
  return GRT_OK;
}

grt_status grt_replay_series(const grt_replay *r, const grt_replay_sample **samples, size_t *n) {
  if (!r || !samples || !n) return GRT_ERR_INVALID_ARG;
  *samples = r->series;
  *n = r->n_series;
  return GRT_OK;
}

grt_status grt_replay_sample_now(grt_replay *r, grt_replay_sample *out) {
  if (!r || !out) return GRT_ERR_INVALID_ARG;
  grt__replay_fill_sample(r, out);
  return GRT_OK;
}

uint64_t grt_replay_position(const grt_replay *r) { return r ? r->pos : 0; }
grt_allocator *grt_replay_allocator(grt_replay *r) { return r ? r->alloc : NULL; }
grt_device *grt_replay_device(grt_replay *r) { return r ? r->dev : NULL; }
const char *grt_replay_last_error(const grt_replay *r) { return r ? r->err : ""; }
