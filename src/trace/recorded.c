/* recorded.c — what the recorded run itself shows, from a PyTorch snapshot's
 * events and final segments alone: reserved and live requested bytes at the
 * start, at their peaks and at the end, and the device calls PyTorch made.
 * The start follows backwards from the end: every segment event and every
 * alloc/free_completed in the trace moved the totals by its size, so what
 * was there before the first event is the end minus those moves. A release
 * a malloc made on a full device (its stack says so, and the retried
 * cudaMalloc follows it) bounds the memory the process had. */
#include <string.h>

#include "trace/trace_impl.h"

/* Byte totals as what came and what went, apart, one of them 0: a trace's
 * sizes may be anything up to 2^64-1, which a signed running sum would
 * overflow. The level is the difference, 0 where more went than came. */
typedef struct level {
  uint64_t came, went;
} level;

static uint64_t uadd(uint64_t a, uint64_t b) { return b > UINT64_MAX - a ? UINT64_MAX : a + b; }
static uint64_t level_of(level l) { return l.came > l.went ? l.came - l.went : 0; }
static level settled(level l) { return l.came >= l.went ? (level){l.came - l.went, 0} : (level){0, l.went - l.came}; }

/* The end's totals from the final segments. */
static void end_totals(const grt_trace *t, grt_trace_recorded *o) {
  for (size_t i = 0; i < t->n_segments; i++) {
    const grt_trace_segment *s = &t->segments[i];
    o->reserved_end = uadd(o->reserved_end, s->total_size);
    for (size_t j = 0; j < s->n_blocks; j++) {
      const grt_trace_block *b = &s->blocks[j];
      if (b->state == GRT_TRACE_BLOCK_INACTIVE) continue;
      o->allocated_end = uadd(o->allocated_end, b->size);
      o->requested_end = uadd(o->requested_end, b->requested_size);
    }
  }
}

/* The change an event makes to reserved and to live requested bytes. */
static void moves(const grt_trace_event *e, level *reserved, level *requested) {
  switch ((grt_trace_kind)e->kind) {
    case GRT_TRACE_SEGMENT_ALLOC:
    case GRT_TRACE_SEGMENT_MAP: reserved->came = uadd(reserved->came, e->size); break;
    case GRT_TRACE_SEGMENT_FREE:
    case GRT_TRACE_SEGMENT_UNMAP: reserved->went = uadd(reserved->went, e->size); break;
    case GRT_TRACE_ALLOC: requested->came = uadd(requested->came, e->size); break;
    case GRT_TRACE_FREE_COMPLETED: requested->went = uadd(requested->went, e->size); break;
    default: break;
  }
  *reserved = settled(*reserved);
  *requested = settled(*requested);
}

static bool is_release(const grt_trace_event *e) {
  return e->kind == GRT_TRACE_SEGMENT_FREE || e->kind == GRT_TRACE_SEGMENT_UNMAP;
}

/* Whether the release run starting at i was a malloc's on a full device; *size: the cudaMalloc retried
 * after it, *freed: what the run gave back. */
static bool device_full_at(const grt_trace *t, size_t i, uint64_t *size, uint64_t *freed) {
  if (!t->event_stack || (i && is_release(&t->events[i - 1]))) return false;
  if (grt_trace_release_origin(t, t->event_stack[i]) != GRT_RELEASE_MALLOC) return false;
  size_t j = i;
  *freed = 0;
  while (j < t->n_events && is_release(&t->events[j])) *freed = uadd(*freed, t->events[j++].size);
  if (j == t->n_events) return false;
  const grt_trace_event *next = &t->events[j];
  if (next->kind != GRT_TRACE_SEGMENT_ALLOC && next->kind != GRT_TRACE_SEGMENT_MAP) return false;
  *size = next->size;
  return true;
}

grt_status grt_trace_recorded_figures(const grt_trace *t, grt_trace_recorded *out) {
  if (!t || !out) return GRT_ERR_INVALID_ARG;
  memset(out, 0, sizeof *out);
  end_totals(t, out);
  level net_reserved = {0, 0}, net_requested = {0, 0};
  for (size_t i = 0; i < t->n_events; i++) {
    const grt_trace_event *e = &t->events[i];
    moves(e, &net_reserved, &net_requested);
    out->device_mallocs += e->kind == GRT_TRACE_SEGMENT_ALLOC || e->kind == GRT_TRACE_SEGMENT_MAP;
    out->device_frees += e->kind == GRT_TRACE_SEGMENT_FREE || e->kind == GRT_TRACE_SEGMENT_UNMAP;
    out->ooms += e->kind == GRT_TRACE_OOM;
    out->unmatched_frees += e->kind == GRT_TRACE_FREE_COMPLETED && (e->flags & GRT_TRACE_F_UNMATCHED);
  }
  /* the start is the end less what the events moved (below zero where the trace contradicts its end) */
  level reserved = settled((level){uadd(out->reserved_end, net_reserved.went), net_reserved.came});
  level requested = settled((level){uadd(out->requested_end, net_requested.went), net_requested.came});
  out->reserved_start = out->reserved_peak = level_of(reserved);
  out->requested_start = out->requested_peak = level_of(requested);
  out->device_full_event = UINT64_MAX;
  for (size_t i = 0; i < t->n_events; i++) {
    const grt_trace_event *e = &t->events[i];
    uint64_t retried, freed, now = level_of(reserved);
    if (is_release(e) && out->device_full_event == UINT64_MAX && device_full_at(t, i, &retried, &freed)) {
      out->device_full_event = i;
      out->device_full_below = uadd(now, retried);
      out->device_full_held = uadd(now - (freed < now ? freed : now), retried);
    }
    /* at an oom PyTorch held `reserved` and the device had addr bytes free: the process's memory */
    if (e->kind == GRT_TRACE_OOM && (e->flags & GRT_TRACE_F_ADDR) && !out->device_memory)
      out->device_memory = uadd(now, e->addr);
    moves(e, &reserved, &requested);
    if (level_of(reserved) > out->reserved_peak) out->reserved_peak = level_of(reserved), out->reserved_peak_event = i;
    if (level_of(requested) > out->requested_peak)
      out->requested_peak = level_of(requested), out->requested_peak_event = i;
  }
  out->partial = out->requested_start > 0 || out->unmatched_frees > 0;
  return GRT_OK;
}
