/* start_blocks.c — the blocks live when recording began, with the stacks
 * the snapshot gives them (doctor_impl.h): the frees of blocks the trace
 * never allocated, and the final active blocks no trace allocation made. */
#include <stdlib.h>

#include "doctor/doctor_impl.h"

static grt_status add(grt__start_blocks *s, uint64_t addr, uint64_t size, uint32_t stack) {
  if (grt__u64map_get(&s->at, addr)) return GRT_OK;
  s->v[s->n] = (grt__start_block){size, stack};
  return grt__u64map_put(&s->at, addr, (void *)(uintptr_t)(++s->n)) ? GRT_OK : GRT_ERR_NOMEM;
}

/* Addresses of trace allocations still live at the end. */
static grt_status live_at_end(const grt_trace_info *in, grt__u64map *live) {
  for (size_t i = 0; i < in->n_events; i++) {
    const grt_trace_event *e = &in->events[i];
    if (!(e->flags & GRT_TRACE_F_ADDR)) continue;
    if (e->kind == GRT_TRACE_ALLOC && !grt__u64map_put(live, e->addr, (void *)1)) return GRT_ERR_NOMEM;
    if (e->kind == GRT_TRACE_FREE_COMPLETED) grt__u64map_del(live, e->addr);
  }
  return GRT_OK;
}

grt_status grt__start_blocks_collect(const grt_trace_info *in, grt__start_blocks *s) {
  size_t cap = in->n_events + 1;
  for (size_t i = 0; i < in->n_segments; i++) cap += in->segments[i].n_blocks;
  grt__u64map_init(&s->at);
  s->n = 0;
  if (!(s->v = malloc(cap * sizeof *s->v))) return GRT_ERR_NOMEM;
  grt_status st = GRT_OK;
  for (size_t i = 0; i < in->n_events && !st; i++) {
    const grt_trace_event *e = &in->events[i];
    if (e->kind == GRT_TRACE_FREE_COMPLETED && (e->flags & GRT_TRACE_F_UNMATCHED) && (e->flags & GRT_TRACE_F_ADDR))
      st = add(s, e->addr, e->size, in->event_stack ? in->event_stack[i] : 0);
  }
  grt__u64map end;
  grt__u64map_init(&end);
  if (!st) st = live_at_end(in, &end);
  for (size_t i = 0; i < in->n_segments && !st; i++)
    for (size_t j = 0; j < in->segments[i].n_blocks && !st; j++) {
      const grt_trace_block *b = &in->segments[i].blocks[j];
      if (b->state != GRT_TRACE_BLOCK_INACTIVE && !grt__u64map_get(&end, b->addr))
        st = add(s, b->addr, b->requested_size, b->stack);
    }
  grt__u64map_free(&end);
  if (st) grt__start_blocks_free(s);
  return st;
}

void grt__start_blocks_free(grt__start_blocks *s) {
  grt__u64map_free(&s->at);
  free(s->v);
  s->v = NULL;
  s->n = 0;
}
