/* replay_stacks.c — which recorded stack made what the replay's allocator
 * holds now (grt_replay_stack_at), so a snapshot written after a replay
 * carries frames as PyTorch's does.
 *
 * A live block's stack is its alloc event's (the latest alloc of its id
 * among the events applied); a block live since before recording, the final
 * snapshot's block at its recorded address. A segment's stack is that of
 * the segment_alloc that made it, as long as no allocation split it:
 * PyTorch keeps a segment's context on its first block, and a split puts a
 * new block object there (matches both GPU recordings' 96 segments). A
 * segment the trace did not allocate takes the final snapshot's. The index is built on the first call after
 * events were applied (one pass over them), not on the replay's hot path. */
#include <stdlib.h>

#include "trace/replay_impl.h"

static grt_status put_stack(grt__u64map *m, uint64_t key, uint32_t stack) {
  if (!stack) return GRT_OK;
  return grt__u64map_put(m, key, (void *)(uintptr_t)stack) ? GRT_OK : GRT_ERR_NOMEM;
}

/* The final snapshot's blocks and segments, by recorded address. */
static grt_status index_final(const grt_trace_info *in, grt__u64map *blocks, grt__u64map *segs) {
  grt_status st = GRT_OK;
  for (size_t i = 0; i < in->n_segments && !st; i++) {
    const grt_trace_segment *s = &in->segments[i];
    st = put_stack(segs, s->addr, s->stack);
    for (size_t j = 0; j < s->n_blocks && !st; j++) st = put_stack(blocks, s->blocks[j].addr, s->blocks[j].stack);
  }
  return st;
}

/* A device allocation the events applied made: where, while when, split or not. */
typedef struct seg_life {
  uint64_t addr, size, born, died; /* event indices; died UINT64_MAX: live */
  uint32_t stack;
  bool split;
} seg_life;

typedef struct seg_lives {
  seg_life *v;
  size_t n;
} seg_lives;

static int cmp_life(const void *a, const void *b) {
  const seg_life *x = a, *y = b;
  if (x->addr != y->addr) return x->addr < y->addr ? -1 : 1;
  return x->born < y->born ? -1 : x->born > y->born;
}

#define SPLIT_WALK_MAX 64 /* segments below an address looked at for the live one holding it */

/* An allocation at addr of size at event i splits the live segment holding it unless it takes it whole. */
static void note_alloc(seg_lives *l, uint64_t addr, uint64_t size, uint64_t i) {
  size_t lo = 0, hi = l->n;
  while (lo < hi) { /* the first segment starting above addr */
    size_t mid = lo + (hi - lo) / 2;
    if (l->v[mid].addr <= addr) lo = mid + 1;
    else hi = mid;
  }
  uint64_t rounded = size < 512 ? 512 : (size + 511) / 512 * 512;
  for (size_t k = lo, walked = 0; k-- > 0 && walked < SPLIT_WALK_MAX; walked++) {
    seg_life *s = &l->v[k];
    if (s->born > i || s->died < i) continue;
    if (addr - s->addr < s->size && rounded < s->size) s->split = true;
    return;
  }
}

/* The events applied: the latest alloc of each id, and the segments' lives. */
static grt_status index_events(grt_replay *r, uint64_t *last_alloc, seg_lives *l) {
  const grt_trace_info *in = &r->info;
  grt__u64map open;
  grt__u64map_init(&open);
  grt_status st = GRT_OK;
  uint64_t n = r->pos < in->n_events ? r->pos : in->n_events;
  for (uint64_t i = 0; i < n && !st; i++) {
    const grt_trace_event *ev = &in->events[i];
    if (ev->kind == GRT_TRACE_ALLOC && ev->id < in->n_ids) last_alloc[ev->id] = i + 1;
    if (!(ev->flags & GRT_TRACE_F_ADDR)) continue;
    if (ev->kind == GRT_TRACE_SEGMENT_ALLOC) {
      l->v[l->n] = (seg_life){ev->addr, ev->size, i, UINT64_MAX, in->event_stack[i], false};
      if (!grt__u64map_put(&open, ev->addr, (void *)(uintptr_t)(++l->n))) st = GRT_ERR_NOMEM;
    } else if (ev->kind == GRT_TRACE_SEGMENT_FREE) {
      void *v = grt__u64map_get(&open, ev->addr);
      if (v) l->v[(uintptr_t)v - 1].died = i, grt__u64map_del(&open, ev->addr);
    }
  }
  grt__u64map_free(&open);
  if (st) return st;
  qsort(l->v, l->n, sizeof *l->v, cmp_life);
  for (uint64_t i = 0; i < n; i++) {
    const grt_trace_event *ev = &in->events[i];
    if (ev->kind == GRT_TRACE_ALLOC && (ev->flags & GRT_TRACE_F_ADDR)) note_alloc(l, ev->addr, ev->size, i);
  }
  return GRT_OK;
}

/* The live segments' stacks (none for a split one), replacing the final snapshot's. */
static grt_status index_segments(const seg_lives *l, grt__u64map *segs) {
  for (size_t k = 0; k < l->n; k++) {
    const seg_life *s = &l->v[k];
    if (s->died != UINT64_MAX) continue;
    if (s->split || !s->stack) grt__u64map_del(segs, s->addr);
    else if (!grt__u64map_put(segs, s->addr, (void *)(uintptr_t)s->stack)) return GRT_ERR_NOMEM;
  }
  return GRT_OK;
}

static grt_status build(grt_replay *r, grt__u64map *live, grt__u64map *final_blocks, grt__u64map *segs) {
  const grt_trace_info *in = &r->info;
  uint64_t *last_alloc = calloc(in->n_ids + 1, sizeof *last_alloc);
  seg_lives l = {malloc((in->count[GRT_TRACE_SEGMENT_ALLOC] + 1) * sizeof *l.v), 0};
  grt_status st = last_alloc && l.v ? GRT_OK : GRT_ERR_NOMEM;
  if (!st) st = index_final(in, final_blocks, segs);
  if (!st) st = index_events(r, last_alloc, &l);
  if (!st) st = index_segments(&l, segs);
  for (uint64_t id = 0; id < in->n_ids && !st; id++) {
    grt_devptr p = last_alloc[id] ? grt__replay_live_ptr(r, id) : 0;
    if (p && p != REPLAY_FAILED) st = put_stack(live, p, in->event_stack[last_alloc[id] - 1]);
  }
  free(l.v);
  free(last_alloc);
  return st;
}

static void drop(grt_replay *r) {
  grt__u64map_free(&r->stacks_live);
  grt__u64map_free(&r->stacks_final);
  grt__u64map_free(&r->stacks_segments);
  r->stacks_built = false;
}

void grt__replay_stacks_free(grt_replay *r) { drop(r); }

grt_status grt_replay_stack_at(grt_replay *r, grt_devptr address, bool segment, uint32_t *stack) {
  if (!r || !stack) return GRT_ERR_INVALID_ARG;
  *stack = 0;
  if (!r->trace || !r->info.event_stack) return GRT_OK;
  if (!r->stacks_built || r->stacks_pos != r->pos) {
    drop(r);
    grt_status st = build(r, &r->stacks_live, &r->stacks_final, &r->stacks_segments);
    if (st) {
      drop(r);
      return st;
    }
    r->stacks_built = true;
    r->stacks_pos = r->pos;
  }
  grt_devptr recorded = grt__replay_to_recorded(r, address);
  void *v = segment ? grt__u64map_get(&r->stacks_segments, recorded) : grt__u64map_get(&r->stacks_live, address);
  if (!v && !segment && r->recorded_placement) v = grt__u64map_get(&r->stacks_final, recorded);
  *stack = (uint32_t)(uintptr_t)v;
  return GRT_OK;
}
