/* from_trace.c — a trace's allocations as planner buffers: each alloc is
 * live from its event to its free_completed (the point its block may be
 * reused; free_requested only moves statistics), with the event index as
 * the step. At equal steps nothing can tie, since every event has its own
 * step; a minimalloc CSV's reader already orders frees before allocs at a
 * step, so the overlaps are the file's own. */
#include <stdio.h>
#include <stdlib.h>

#include "plan/plan_impl.h"

#define NONE SIZE_MAX

typedef struct builder {
  grt_plan_buffer *bufs;
  size_t n;
  size_t *by_id; /* n_ids: the buffer of a live allocation, or NONE */
} builder;

static void on_event(builder *b, const grt_trace_event *e, uint64_t step, uint64_t n_ids) {
  if (e->id == GRT_TRACE_NO_ID || e->id >= n_ids || !e->size) return;
  if (e->kind == GRT_TRACE_ALLOC) {
    b->by_id[e->id] = b->n;
    b->bufs[b->n++] = (grt_plan_buffer){e->id, step, UINT64_MAX, e->size, 0};
  } else if (e->kind == GRT_TRACE_FREE_COMPLETED) {
    size_t i = b->by_id[e->id];
    if (i != NONE) {
      b->bufs[i].upper = step;
      b->by_id[e->id] = NONE;
    } else if (e->flags & GRT_TRACE_F_UNMATCHED) {
      b->bufs[b->n++] = (grt_plan_buffer){e->id, 0, step, e->size, 0}; /* live when recording began */
    }
  }
}

grt_status grt_plan_buffers_from_trace(const grt_trace *trace, grt_plan_buffer **out, size_t *n, char *err,
                                       size_t err_size) {
  if (err && err_size) err[0] = '\0';
  grt_trace_info in;
  if (!trace || !out || !n) {
    if (err && err_size) snprintf(err, err_size, "%s is NULL", !trace ? "trace" : !out ? "out" : "n");
    return GRT_ERR_INVALID_ARG;
  }
  grt_status st = grt_trace_get_info(trace, &in);
  if (st) return st;
  size_t cap = in.count[GRT_TRACE_ALLOC] + in.count[GRT_TRACE_FREE_COMPLETED];
  builder b = {malloc((cap ? cap : 1) * sizeof *b.bufs), 0, malloc((in.n_ids ? in.n_ids : 1) * sizeof *b.by_id)};
  if (!b.bufs || !b.by_id) {
    if (err && err_size) snprintf(err, err_size, "no host memory for %zu buffers", cap);
    free(b.bufs);
    free(b.by_id);
    return GRT_ERR_NOMEM;
  }
  for (uint64_t id = 0; id < in.n_ids; id++) b.by_id[id] = NONE;
  for (size_t k = 0; k < in.n_events; k++) on_event(&b, &in.events[k], (uint64_t)k + 1, in.n_ids);
  for (size_t i = 0; i < b.n; i++)
    if (b.bufs[i].upper == UINT64_MAX) b.bufs[i].upper = (uint64_t)in.n_events + 1; /* never freed */
  free(b.by_id);
  if (!b.n) {
    free(b.bufs);
    b.bufs = NULL;
  }
  *out = b.bufs;
  *n = b.n;
  return GRT_OK;
}

void grt_plan_buffers_free(grt_plan_buffer *bufs) { free(bufs); }
