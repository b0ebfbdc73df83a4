/* event.c — the trace builder: interns streams, assigns allocation ids, owns growth.
 *
 * Invariants while building: every key in `live` names an allocation whose
 * free_completed has not been seen; its value encodes the dense id and whether
 * the allocation's alloc event is missing from the trace (UNMATCHED). Ids are
 * handed out in order of first appearance, so they are exactly 0..n_ids-1.
 */
#include <stdlib.h>
#include <string.h>

#include "trace/trace_impl.h"

bool grt__grow(void **arr, size_t *cap, size_t need, size_t elem) {
  if (need <= *cap) return true;
  size_t nc = *cap ? *cap : 16;
  while (nc < need) {
    if (nc > SIZE_MAX / 2 / elem) return false;
    nc *= 2;
  }
  void *p = realloc(*arr, nc * elem);
  if (!p) return false;
  *arr = p;
  *cap = nc;
  return true;
}

void grt__trace_free(grt_trace *t) {
  if (!t) return;
  free(t->events);
  free(t->streams);
  free(t->segments);
  free(t->blocks);
  grt__stacks_free(t);
  free(t);
}

static void settings_default(grt_trace_alloc_settings *s) {
  memset(s, 0, sizeof *s);
  s->max_split_size = -1;
}

grt_status grt__tb_init(grt__tb *b, grt_trace_format format) {
  memset(b, 0, sizeof *b);
  grt__u64map_init(&b->live);
  grt__u64map_init(&b->stream_idx);
  b->max_stream_idx = -1;
  b->t = calloc(1, sizeof *b->t);
  if (!b->t) return GRT_ERR_NOMEM;
  b->t->format = format;
  b->t->n_devices = 1;
  settings_default(&b->t->settings);
  return GRT_OK;
}

static void tb_release(grt__tb *b) {
  grt__u64map_free(&b->live);
  grt__u64map_free(&b->stream_idx);
  free(b->seg_first);
  b->seg_first = NULL;
  grt__stacks_build_free(&b->sb);
}

void grt__tb_abort(grt__tb *b) {
  tb_release(b);
  grt__trace_free(b->t);
  b->t = NULL;
}

grt_status grt__tb_finish(grt__tb *b, grt_trace **out) {
  grt_trace *t = b->t;
  grt_status st = grt__stacks_finish(b);
  if (st) {
    grt__tb_abort(b);
    return st;
  }
  for (size_t i = 0; i < t->n_segments; i++) {
    size_t first = b->seg_first[i];
    size_t end = i + 1 < t->n_segments ? b->seg_first[i + 1] : t->n_blocks;
    t->segments[i].blocks = end > first ? t->blocks + first : NULL;
    t->segments[i].n_blocks = end - first;
  }
  tb_release(b);
  b->t = NULL;
  *out = t;
  return GRT_OK;
}

grt_status grt__tb_stream(grt__tb *b, grt_stream_id value, uint32_t *index) {
  grt_trace *t = b->t;
  if (value == UINT64_MAX && b->max_stream_idx >= 0) {
    *index = (uint32_t)b->max_stream_idx;
    return GRT_OK;
  }
  if (value != UINT64_MAX) {
    void *v = grt__u64map_get(&b->stream_idx, value);
    if (v) {
      *index = (uint32_t)((uintptr_t)v - 1);
      return GRT_OK;
    }
  }
  if (t->n_streams >= UINT32_MAX - 1) return GRT_ERR_NOMEM;
  if (!grt__grow((void **)&t->streams, &t->cap_streams, t->n_streams + 1, sizeof *t->streams))
    return GRT_ERR_NOMEM;
  uint32_t idx = (uint32_t)t->n_streams;
  if (value == UINT64_MAX)
    b->max_stream_idx = idx;
  else if (!grt__u64map_put(&b->stream_idx, value, (void *)(uintptr_t)(idx + 1)))
    return GRT_ERR_NOMEM;
  t->streams[t->n_streams++] = value;
  *index = idx;
  return GRT_OK;
}

static bool is_alloc_kind(grt_trace_kind k) {
  return k == GRT_TRACE_ALLOC || k == GRT_TRACE_FREE_REQUESTED || k == GRT_TRACE_FREE_COMPLETED;
}

/* Resolves the id for an alloc/free event; updates `live`. */
static grt_status assign_id(grt__tb *b, grt_trace_kind kind, uint64_t key, uint64_t *id,
                            unsigned *flags) {
  if (key == UINT64_MAX) return GRT_ERR_INVALID_ARG;
  uintptr_t v = (uintptr_t)grt__u64map_get(&b->live, key);
  if (kind == GRT_TRACE_ALLOC) {
    if (v) return GRT_ERR_STATE;
    *id = b->t->n_ids++;
    if (!grt__u64map_put(&b->live, key, (void *)(uintptr_t)((*id << 1) + 1))) return GRT_ERR_NOMEM;
    return GRT_OK;
  }
  uint64_t enc;
  if (v) {
    enc = (uint64_t)v - 1;
  } else {
    enc = (b->t->n_ids++ << 1) | 1u;
    if (kind == GRT_TRACE_FREE_REQUESTED &&
        !grt__u64map_put(&b->live, key, (void *)(uintptr_t)(enc + 1)))
      return GRT_ERR_NOMEM;
  }
  if (kind == GRT_TRACE_FREE_COMPLETED && v) grt__u64map_del(&b->live, key);
  *id = enc >> 1;
  if (enc & 1u) *flags |= GRT_TRACE_F_UNMATCHED;
  return GRT_OK;
}

void grt__tb_reset_events(grt__tb *b) {
  grt_trace *t = b->t;
  t->n_events = 0;
  t->n_ids = 0;
  t->n_streams = 0;
  memset(t->count, 0, sizeof t->count);
  grt__u64map_free(&b->live);
  grt__u64map_free(&b->stream_idx);
  b->max_stream_idx = -1;
  free(t->event_stack);
  t->event_stack = NULL;
  b->sb.n_event_stack = b->sb.cap_event_stack = 0;
}

grt_status grt__tb_reserve_events(grt__tb *b, size_t n) {
  grt_trace *t = b->t;
  if (n <= t->cap_events - t->n_events) return GRT_OK;
  if (n > SIZE_MAX / sizeof *t->events - t->n_events) return GRT_ERR_NOMEM;
  grt_trace_event *p = realloc(t->events, (t->n_events + n) * sizeof *p);
  if (!p) return GRT_ERR_NOMEM;
  t->events = p;
  t->cap_events = t->n_events + n;
  return GRT_OK;
}

grt_status grt__tb_event(grt__tb *b, grt_trace_kind kind, uint64_t key, uint64_t size,
                         grt_stream_id stream, int64_t time, uint64_t addr, unsigned flags) {
  grt_trace *t = b->t;
  if ((unsigned)kind >= GRT_TRACE_KIND_COUNT) return GRT_ERR_INVALID_ARG;
  if (!grt__grow((void **)&t->events, &t->cap_events, t->n_events + 1, sizeof *t->events))
    return GRT_ERR_NOMEM;
  grt_trace_event ev;
  memset(&ev, 0, sizeof ev);
  flags &= GRT_TRACE_F_TIME | GRT_TRACE_F_ADDR;
  ev.id = GRT_TRACE_NO_ID;
  if (is_alloc_kind(kind)) {
    grt_status st = assign_id(b, kind, key, &ev.id, &flags);
    if (st) return st;
  }
  grt_status st = grt__tb_stream(b, stream, &ev.stream);
  if (st) return st;
  ev.size = size;
  ev.addr = (flags & GRT_TRACE_F_ADDR) ? addr : 0;
  ev.time = (flags & GRT_TRACE_F_TIME) ? time : 0;
  ev.kind = (uint8_t)kind;
  ev.flags = (uint8_t)flags;
  t->events[t->n_events++] = ev;
  t->count[kind]++;
  return GRT_OK;
}

grt_status grt__tb_segment(grt__tb *b, const grt_trace_segment *seg) {
  grt_trace *t = b->t;
  if (!grt__grow((void **)&t->segments, &t->cap_segments, t->n_segments + 1, sizeof *t->segments) ||
      !grt__grow((void **)&b->seg_first, &b->cap_seg_first, t->n_segments + 1, sizeof *b->seg_first))
    return GRT_ERR_NOMEM;
  t->segments[t->n_segments] = *seg;
  t->segments[t->n_segments].blocks = NULL;
  t->segments[t->n_segments].n_blocks = 0;
  b->seg_first[t->n_segments++] = t->n_blocks;
  return GRT_OK;
}

grt_status grt__tb_block(grt__tb *b, const grt_trace_block *blk) {
  grt_trace *t = b->t;
  if (t->n_segments == 0) return GRT_ERR_STATE;
  if (!grt__grow((void **)&t->blocks, &t->cap_blocks, t->n_blocks + 1, sizeof *t->blocks))
    return GRT_ERR_NOMEM;
  t->blocks[t->n_blocks++] = *blk;
  return GRT_OK;
}
