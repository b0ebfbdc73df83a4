/* replay_footprint.c — what the model holds on the device, in recorded
 * coordinates, as a set of byte ranges: its segments (cudaMalloc) or, with
 * expandable segments, its mapped pages. Fidelity compares the change of this
 * set across one event with the segment events PyTorch recorded there: a
 * segment_alloc or segment_map is a range that appeared, a segment_free or
 * segment_unmap one that went. Sets are sorted, disjoint and merged (touching
 * ranges are one), so a map recorded as two calls and made by the model as
 * one compare equal: both cover the same bytes. */
#include <stdlib.h>
#include <string.h>

#include "trace/replay_impl.h"

static int cmp_range(const void *a, const void *b) {
  const grt__replay_range *x = a, *y = b;
  return x->addr < y->addr ? -1 : x->addr > y->addr;
}

/* Sorts and merges touching or overlapping ranges, in place. */
void grt__ranges_normalize(grt__replay_ranges *l) {
  if (l->n < 2) return;
  qsort(l->v, l->n, sizeof *l->v, cmp_range);
  size_t k = 0;
  for (size_t i = 1; i < l->n; i++) {
    grt__replay_range *last = &l->v[k];
    if (l->v[i].addr <= last->addr + last->size) {
      uint64_t end = l->v[i].addr + l->v[i].size;
      if (end > last->addr + last->size) last->size = end - last->addr;
    } else {
      l->v[++k] = l->v[i];
    }
  }
  l->n = k + 1;
}

bool grt__ranges_equal(const grt__replay_ranges *a, const grt__replay_ranges *b) {
  if (a->n != b->n) return false;
  for (size_t i = 0; i < a->n; i++)
    if (a->v[i].addr != b->v[i].addr || a->v[i].size != b->v[i].size) return false;
  return true;
}

/* out = a - b (both normalized); out is emptied first. */
grt_status grt__ranges_minus(const grt__replay_ranges *a, const grt__replay_ranges *b, grt__replay_ranges *out) {
  out->n = 0;
  size_t j = 0;
  for (size_t i = 0; i < a->n; i++) {
    uint64_t lo = a->v[i].addr, hi = lo + a->v[i].size;
    while (j < b->n && b->v[j].addr + b->v[j].size <= lo) j++;
    for (size_t k = j; k < b->n && b->v[k].addr < hi && lo < hi; k++) {
      if (b->v[k].addr > lo) {
        grt__replay_range x = {lo, b->v[k].addr - lo, 0, false};
        if (!grt__replay_ranges_push(out, &x)) return GRT_ERR_NOMEM;
      }
      uint64_t end = b->v[k].addr + b->v[k].size;
      lo = end > lo ? end : lo;
    }
    if (lo < hi) {
      grt__replay_range x = {lo, hi - lo, 0, false};
      if (!grt__replay_ranges_push(out, &x)) return GRT_ERR_NOMEM;
    }
  }
  return GRT_OK;
}

typedef struct walk_ctx {
  const grt_replay *r;
  grt__replay_ranges *out;
  bool nomem;
} walk_ctx;

static void add_segment(void *ctx, grt_devptr address, uint64_t size) {
  walk_ctx *w = ctx;
  grt__replay_range x = {grt__replay_to_recorded(w->r, address), size, 0, false};
  if (!grt__replay_ranges_push(w->out, &x)) w->nomem = true;
}

/* Expandable: the mapped runs the allocator's snapshot lists. */
static grt_status mapped_runs(grt_replay *r, grt__replay_ranges *out) {
  grt_alloc_snapshot *snap = NULL;
  grt_status st = grt_alloc_snapshot_take(r->alloc, &snap);
  for (size_t i = 0; !st && i < snap->n_segments; i++) {
    const grt_snapshot_segment *s = &snap->segments[i];
    grt__replay_range x = {grt__replay_to_recorded(r, s->address), s->total_size, 0, false};
    if (!grt__replay_ranges_push(out, &x)) st = GRT_ERR_NOMEM;
  }
  grt_alloc_snapshot_free(snap);
  return st;
}

grt_status grt__replay_footprint(grt_replay *r, bool expandable, grt__replay_ranges *out) {
  out->n = 0;
  grt_status st;
  if (expandable) {
    st = mapped_runs(r, out);
  } else {
    walk_ctx w = {r, out, false};
    st = grt_device_walk_segments(r->dev, add_segment, &w);
    if (!st && w.nomem) st = GRT_ERR_NOMEM;
  }
  if (!st) grt__ranges_normalize(out);
  return st;
}
