/* replay_footprint.c — what the model holds on the device, in recorded
 * coordinates: its segments (cudaMalloc), or, with expandable segments, its
 * mapped pages. Fidelity compares the change of this set across one event
 * with the segment events PyTorch recorded there: a segment_alloc or
 * segment_map is a range that appeared, a segment_free or segment_unmap one
 * that went. Segments compare by identity (base, size and stream: one freed
 * and another made at its base are two changes); mapped pages by bytes, in sets
 * sorted, disjoint and merged, so a map recorded as two calls and made by the
 * model as one compare equal. */
#include <stdlib.h>
#include <string.h>

#include "trace/replay_impl.h"

static int cmp_range(const void *a, const void *b) {
  const grt__replay_range *x = a, *y = b;
  return x->addr < y->addr ? -1 : x->addr > y->addr;
}

void grt__ranges_sort(grt__replay_ranges *l) {
  if (l->n > 1) qsort(l->v, l->n, sizeof *l->v, cmp_range);
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
        grt__replay_range x = {.addr = lo, .size = b->v[k].addr - lo};
        if (!grt__replay_ranges_push(out, &x)) return GRT_ERR_NOMEM;
      }
      uint64_t end = b->v[k].addr + b->v[k].size;
      lo = end > lo ? end : lo;
    }
    if (lo < hi) {
      grt__replay_range x = {.addr = lo, .size = hi - lo};
      if (!grt__replay_ranges_push(out, &x)) return GRT_ERR_NOMEM;
    }
  }
  return GRT_OK;
}

grt_status grt__ranges_missing(const grt__replay_ranges *a, const grt__replay_ranges *b, grt__replay_ranges *out) {
  out->n = 0;
  size_t j = 0;
  for (size_t i = 0; i < a->n; i++) {
    while (j < b->n && b->v[j].addr < a->v[i].addr) j++;
    bool kept = false;
    for (size_t k = j; k < b->n && b->v[k].addr == a->v[i].addr && !kept; k++)
      kept = b->v[k].size == a->v[i].size && b->v[k].stream == a->v[i].stream;
    if (kept) continue;
    if (!grt__replay_ranges_push(out, &a->v[i])) return GRT_ERR_NOMEM;
  }
  return GRT_OK;
}

/* The allocator's snapshot lists each segment, or each mapped run of an
 * expandable segment, with its stream. */
static grt_status snapshot_ranges(grt_replay *r, grt__replay_ranges *out) {
  grt_alloc_snapshot *snap = NULL;
  grt_status st = grt_alloc_snapshot_take(r->alloc, &snap);
  for (size_t i = 0; !st && i < snap->n_segments; i++) {
    const grt_snapshot_segment *s = &snap->segments[i];
    grt__replay_range x = {.addr = grt__replay_to_recorded(r, s->address), .size = s->total_size, .stream = s->stream,
                           .is_large = s->is_large != 0};
    if (!grt__replay_ranges_push(out, &x)) st = GRT_ERR_NOMEM;
  }
  grt_alloc_snapshot_free(snap);
  return st;
}

grt_status grt__replay_footprint(grt_replay *r, bool expandable, grt__replay_ranges *out) {
  out->n = 0;
  grt_status st = snapshot_ranges(r, out);
  if (!st && expandable) grt__ranges_normalize(out);
  if (!st && !expandable) grt__ranges_sort(out);
  return st;
}
