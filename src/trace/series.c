/* series.c — the replay's per-step samples: allocator and device figures
 * after each event (reserved, allocated, requested, active, cached, largest
 * free block, fragmentation, cumulative device calls) and the trace's own
 * live bytes. Kept only when the configuration asks for a series, so a plain
 * replay's memory does not grow with the trace. */
#include <assert.h>
#include <stdlib.h>

#include "trace/replay_impl.h"

void grt__replay_fill_sample(grt_replay *r, grt_replay_sample *s) {
  grt_alloc_stats as;
  grt_status st = grt_alloc_get_stats(r->alloc, &as); /* the replay's own allocator: cannot fail */
  assert(st == GRT_OK);
  (void)st;
  s->reserved = (uint64_t)as.reserved_bytes[GRT_STAT_ALL].current;
  s->allocated = (uint64_t)as.allocated_bytes[GRT_STAT_ALL].current;
  s->requested = (uint64_t)as.requested_bytes[GRT_STAT_ALL].current;
  s->active = (uint64_t)as.active_bytes[GRT_STAT_ALL].current;
  s->cached = as.cached_bytes;
  s->largest_free = as.largest_free_block;
  s->live = r->live;
  s->device_mallocs = as.num_device_alloc - r->base_dev_alloc;
  s->device_frees = as.num_device_free - r->base_dev_free;
  s->fragmentation = s->cached ? 1.0 - (double)s->largest_free / (double)s->cached : 0.0;
  if (s->fragmentation < 0.0) s->fragmentation = 0.0;
}

grt_status grt__replay_series_room(grt_replay *r) {
  if (r->n_series < r->cap_series) return GRT_OK;
  size_t cap = r->cap_series ? r->cap_series * 2 : 1024;
  grt_replay_sample *n = realloc(r->series, cap * sizeof *n);
  if (!n) return GRT_ERR_NOMEM;
  r->series = n;
  r->cap_series = cap;
  return GRT_OK;
}

