/* replay_release.c — the recorded moments when PyTorch gave memory back, and
 * its OOMs.
 *
 * A run of segment_free/segment_unmap events is one release: PyTorch's
 * release_cached_blocks (empty_cache, or the retry path of a malloc that
 * cudaMalloc refused). The model releases its own cache at the run's first
 * event and skips the rest.
 *
 * An oom event is a request PyTorch failed after its release path had run:
 * malloc logs the segment frees of release_available_cached_blocks and
 * release_cached_blocks first, then the oom, whose addr is the free device
 * memory cudaMemGetInfo reported and whose size is the rounded request. With
 * the trace at hand the run is looked ahead: when it ends in an oom (or the
 * oom stands alone), the model gets the failing request itself, on a device
 * capped at what it will hold once the recorded run is freed plus the
 * recorded free memory, so its own release path runs and its own malloc
 * fails, or not. The cap is lifted afterwards: the process went on. A request
 * the model served after all is handed back at once (the program never got
 * it). Fed events one at a time (no look-ahead), the run releases as usual
 * and the oom is replayed at its own event. A what-if replay (first fit, no
 * recorded addresses) tries the request on its own device instead: whether
 * the configuration it replays would have failed it too.
 *
 * A run that segment allocs (or maps) and an alloc follow may be that
 * alloc's retry path (cudaMalloc failed on a full device, the cache went, the
 * retry succeeded) or an empty_cache() followed by a miss: the events alone
 * do not tell. With a block the model's cache could serve the alloc, PyTorch
 * would not have called cudaMalloc: an empty_cache. When an empty_cache now
 * would give back exactly the recorded run, it reads as one too (both
 * readings then end alike). Otherwise the release gave back something other
 * than the cache held whole, which only a malloc's first try can cause (it
 * took pages into its candidate block first), so it is the retry path. The
 * model makes that alloc itself on a device with room for all but one byte
 * of what the recorded retry took, so its first try fails, its own release
 * path runs, and its retry succeeds on what that released. */
#include <stdio.h>
#include <stdlib.h>

#include "alloc/allocator_impl.h"
#include "alloc/probe.h"
#include "base/status.h"
#include "trace/replay_impl.h"

static bool is_free_kind(uint8_t k) { return k == GRT_TRACE_SEGMENT_FREE || k == GRT_TRACE_SEGMENT_UNMAP; }

static grt_status release_cache(grt_replay *r) {
  grt_status st = grt_alloc_empty_cache(r->alloc);
  if (st) {
    grt__replay_set_error(r, "release: %s", grt_alloc_last_error(r->alloc));
    return st;
  }
  r->sum.releases++;
  grt__replay_note_released(r);
  if (r->on_release) r->on_release(r->hook_ctx, r, r->pos);
  return GRT_OK;
}

/* The index of the oom that ends the run of frees starting at pos, and the
 * bytes the run frees; false when the run ends otherwise or no trace is
 * attached. */
static bool run_ends_in_oom(const grt_replay *r, uint64_t *oom_index, uint64_t *run_bytes) {
  if (!r->trace) return false;
  uint64_t i = r->pos, bytes = 0;
  while (i < r->info.n_events && is_free_kind(r->info.events[i].kind)) bytes += r->info.events[i++].size;
  if (i >= r->info.n_events || r->info.events[i].kind != GRT_TRACE_OOM) return false;
  *oom_index = i;
  *run_bytes = bytes;
  return true;
}

typedef struct range_list {
  const grt_replay *r;
  grt__replay_ranges l;
  bool nomem;
} range_list;

static void add_releasable(void *ctx, grt_devptr addr, uint64_t size, grt_stream_id stream) {
  range_list *x = ctx;
  grt__replay_range v = {.addr = grt__replay_to_recorded(x->r, addr), .size = size, .stream = stream};
  if (!grt__replay_ranges_push(&x->l, &v)) x->nomem = true;
}

/* Whether an empty_cache now would release exactly the recorded run
 * [from, to) (segments by base, size and stream; mapped pages by bytes). */
static bool releases_now_as_recorded(const grt_replay *r, uint64_t from, uint64_t to) {
  bool expandable = r->alloc->cfg.expandable_segments;
  range_list now = {.r = r}, rec = {.r = r};
  bool same = grt__alloc_releasable(r->alloc, add_releasable, &now) == GRT_OK;
  for (uint64_t i = from; i < to && same; i++) {
    const grt_trace_event *e = &r->info.events[i];
    grt__replay_range v = {.addr = e->addr, .size = e->size, .stream = r->info.streams[e->stream]};
    if (!grt__replay_ranges_push(&rec.l, &v)) rec.nomem = true;
  }
  if (same && !now.nomem && !rec.nomem) {
    void (*order)(grt__replay_ranges *) = expandable ? grt__ranges_normalize : grt__ranges_sort;
    order(&now.l);
    order(&rec.l);
    same = now.l.n == rec.l.n;
    for (size_t k = 0; k < now.l.n && same; k++)
      same = now.l.v[k].addr == rec.l.v[k].addr && now.l.v[k].size == rec.l.v[k].size &&
             (expandable || now.l.v[k].stream == rec.l.v[k].stream);
  }
  free(now.l.v);
  free(rec.l.v);
  return same && !now.nomem && !rec.nomem;
}

/* Whether the run of frees starting at pos is a malloc's retry path: segment
 * allocs or maps follow it, then the alloc they served (cudaMalloc failed,
 * the cache was released, the retry succeeded). *added: the bytes those
 * segment events took. */
static bool run_is_retry(const grt_replay *r, uint64_t *added) {
  if (!r->trace || !r->recorded_placement) return false; /* a what-if model makes its own retries */
  const grt_trace_event *ev = r->info.events;
  uint64_t i = r->pos, n = r->info.n_events, bytes = 0;
  while (i < n && is_free_kind(ev[i].kind)) i++;
  uint64_t first = i;
  while (i < n && (ev[i].kind == GRT_TRACE_SEGMENT_ALLOC || ev[i].kind == GRT_TRACE_SEGMENT_MAP)) bytes += ev[i++].size;
  if (i == first || i >= n || ev[i].kind != GRT_TRACE_ALLOC) return false;
  /* PyTorch tried its cache first: a block the model's cache holds for it
     now means the release came before (empty_cache), not from this alloc */
  bool cached = true;
  if (grt__alloc_cache_would_serve(r->alloc, ev[i].size, r->info.streams[ev[i].stream], &cached) || cached)
    return false;
  /* an empty_cache now would give back exactly the recorded run: read it as one */
  if (releases_now_as_recorded(r, r->pos, first)) return false;
  *added = bytes;
  return true;
}

grt_status grt__replay_retry_malloc(grt_replay *r, uint64_t size, grt_stream_id stream, grt_devptr *p) {
  grt_device_stats ds;
  grt_status st = grt_device_get_stats(r->dev, &ds);
  if (st) return st;
  uint64_t limit = ds.bytes_in_use + (r->retry_added ? r->retry_added - 1 : 0);
  if ((st = grt_device_set_memory_limit(r->dev, limit ? limit : 1))) return st;
  grt_status got = grt_alloc_malloc(r->alloc, size, stream, p);
  st = grt_device_set_memory_limit(r->dev, ds.memory_limit);
  r->retry_pending = false;
  grt__replay_note_released(r);
  if (st && got == GRT_OK) { /* cannot lift the cap: hand the block back, nothing changed */
    grt__keep_first(&st, grt_alloc_free(r->alloc, *p));
    return st;
  }
  return st ? st : got;
}

/* The failing request, on a device capped so that it has the recorded free
 * memory once run_bytes are freed. */
static grt_status replay_oom(grt_replay *r, const grt_trace_event *oom, grt_stream_id stream, uint64_t run_index,
                             uint64_t oom_index, uint64_t run_bytes) {
  grt_device_stats ds;
  grt_status st = grt_device_get_stats(r->dev, &ds);
  if (st) return st;
  uint64_t kept = ds.bytes_in_use > run_bytes ? ds.bytes_in_use - run_bytes : 0;
  uint64_t device_free = (oom->flags & GRT_TRACE_F_ADDR) ? oom->addr : 0;
  uint64_t limit = kept + device_free;
  /* a what-if model (no recorded addresses) tries the request on its own device: would it have failed? */
  if (!r->recorded_placement) limit = ds.memory_limit;
  else if (!limit) limit = 1;
  if ((st = grt_device_set_memory_limit(r->dev, limit))) return st;
  grt_devptr p = 0;
  grt_status got = oom->size ? grt_alloc_malloc(r->alloc, oom->size, stream, &p) : GRT_ERR_SIZE;
  st = grt_device_set_memory_limit(r->dev, ds.memory_limit);
  if (got == GRT_OK) grt__keep_first(&st, grt_alloc_free(r->alloc, p)); /* the program never got it */
  if (got == GRT_ERR_NOMEM) {
    grt__replay_set_error(r, "oom at event %llu: %s", (unsigned long long)oom_index, grt_alloc_last_error(r->alloc));
    return got;
  }
  if (st) return st;
  if (got == GRT_ERR_OOM || got == GRT_ERR_SIZE) grt__replay_note_oom(r, oom->size), r->sum.recorded_ooms_failed++;
  grt__replay_note_released(r);
  r->sum.recorded_ooms++;
  if (run_index < oom_index) r->sum.releases++;
  if (r->on_oom) r->on_oom(r->hook_ctx, r, run_index, oom_index, got);
  return GRT_OK;
}

grt_status grt__replay_release_event(grt_replay *r, const grt_trace_event *ev, grt_stream_id stream) {
  bool is_oom = ev->kind == GRT_TRACE_OOM;
  if (!r->cfg.honor_releases) return GRT_OK;
  if (is_oom && r->oom_replayed) { /* replayed at its run's start */
    r->oom_replayed = r->in_release_run = false;
    return GRT_OK;
  }
  if (is_oom) {
    grt_status st = replay_oom(r, ev, stream, r->pos, r->pos, 0);
    if (!st) r->in_release_run = false;
    return st;
  }
  if (r->in_release_run) return GRT_OK;
  uint64_t oom_index, run_bytes;
  grt_status st;
  uint64_t added;
  if (run_ends_in_oom(r, &oom_index, &run_bytes)) {
    const grt_trace_event *oom = &r->info.events[oom_index];
    st = replay_oom(r, oom, r->info.streams[oom->stream], r->pos, oom_index, run_bytes);
    r->oom_replayed = st == GRT_OK;
  } else if (run_is_retry(r, &added)) { /* the alloc the run served releases it itself */
    r->retry_pending = true;
    r->retry_added = added;
    r->sum.releases++;
    st = GRT_OK;
  } else {
    st = release_cache(r);
  }
  r->in_release_run = st == GRT_OK;
  return st;
}
