/* replay_start.c — where a replay starts: the device's geometry, the
 * allocator configuration a trace asks for, and (PyTorch snapshots) the
 * allocator state at the moment recording began.
 *
 * Rebuild rules (docs/REPLAY.md, "Fidelity"):
 *   - segments: a final-snapshot segment whose address has no segment event
 *     in the trace existed all along; an address whose first segment event is
 *     segment_free held a segment (of the event's size) when the trace began;
 *     segments created by segment_alloc in the trace did not exist.
 *   - live blocks: final active blocks never allocated in the trace (exact
 *     sizes), plus blocks freed in the trace but never allocated in it (size
 *     round_size(requested); in the large pool a gap of at most 1 MiB after
 *     such a block belongs to it, since a free large remainder is always
 *     larger than 1 MiB).
 *   - expandable segments: a page was mapped at the start when the first
 *     event touching it unmaps it, or no event touches it and it is mapped
 *     at the end (replay_expandable.c).
 *   - the rest of each segment is free, one merged block per gap.
 * Recorded addresses are used only here, as segment bases, and for scoring.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "trace/replay_impl.h"

#define TWO_MIB ((uint64_t)2 << 20)

/* The highest 2 MiB-aligned address: a device's range ends at or below it, never past 2^64. */
#define TOP ((uint64_t)0 - TWO_MIB)

static void span_add(uint64_t *lo, uint64_t *hi, uint64_t addr, uint64_t size) {
  if (!addr) return;
  if (addr < *lo) *lo = addr;
  uint64_t end = size > UINT64_MAX - addr ? UINT64_MAX : addr + size; /* a recorded range may claim to wrap */
  if (end > *hi) *hi = end;
}

/* The addresses a device of this capacity spans from its base (gpurt/device.h:
 * the paged model's virtual space is 8 x capacity, at most 16 TiB). */
static uint64_t device_span(const grt_replay_config *cfg, uint64_t capacity) {
  uint64_t va = (uint64_t)1 << 44;
  if (cfg->device_model != GRT_DEVICE_MODEL_PAGED) return capacity;
  return capacity <= va / 8 ? capacity * 8 : va;
}

void grt__replay_geometry(const grt_replay_config *cfg, const grt_trace_info *info, bool recorded,
                          grt_devptr *base, uint64_t *capacity) {
  grt_device_config dc;
  grt_device_config_default(&dc);
  *base = cfg->base_address ? cfg->base_address : dc.base_address;
  *capacity = cfg->capacity ? cfg->capacity : (uint64_t)1 << 40;
  if (!recorded || !info) return;
  uint64_t lo = UINT64_MAX, hi = 0;
  for (size_t i = 0; i < info->n_segments; i++) span_add(&lo, &hi, info->segments[i].addr, info->segments[i].total_size);
  for (size_t i = 0; i < info->n_events; i++) {
    const grt_trace_event *e = &info->events[i];
    if ((e->flags & GRT_TRACE_F_ADDR) && e->kind != GRT_TRACE_OOM) span_add(&lo, &hi, e->addr, e->size);
  }
  if (hi == 0) return;
  lo &= ~(TWO_MIB - 1);
  if (lo == 0) lo = TWO_MIB;
  if (lo > TOP - TWO_MIB) lo = TOP - TWO_MIB;
  hi = hi > TOP ? TOP : (hi + TWO_MIB - 1) & ~(TWO_MIB - 1);
  if (!cfg->base_address) *base = lo;
  if (!cfg->capacity) {
    uint64_t span = hi > *base ? hi - *base : 0, most = TOP - TWO_MIB;
    *capacity = span > most / 2 ? most : span * 2 < GRT_GiB ? GRT_GiB : span * 2;
  }
  /* Addresses near 2^64: the device keeps its capacity and moves down to end
   * below 2^64, still holding every recorded address (hi is at most TOP). */
  uint64_t need = device_span(cfg, *capacity);
  if (!cfg->base_address && need <= TOP - TWO_MIB && need > TOP - *base) *base = TOP - need;
}

grt_status grt__replay_alloc_config(const grt_replay_config *cfg, const grt_trace_info *info, grt_alloc_config *out,
                                    char *err, size_t err_size) {
  grt_alloc_config_default(out);
  if (info && info->settings.present) {
    const grt_trace_alloc_settings *s = &info->settings;
    if (s->max_split_size > (int64_t)GRT_LARGE_BUFFER) out->max_split_size = (uint64_t)s->max_split_size;
    out->expandable_segments = s->expandable_segments;
    for (int i = 0; i < GRT_ROUNDUP_INTERVALS && i < GRT_TRACE_RP2_INTERVALS; i++) {
      unsigned d = s->roundup_power2_divisions[i];
      out->roundup_power2_divisions[i] = (d & (d - 1)) ? 0 : d;
    }
    if (s->garbage_collection_threshold > 0.0 && s->garbage_collection_threshold < 1.0)
      out->garbage_collection_threshold = s->garbage_collection_threshold;
  }
  for (size_t i = 0; info && i < info->n_segments; i++)
    if (info->segments[i].is_expandable) out->expandable_segments = 1;
  if (cfg->alloc_conf && *cfg->alloc_conf) return grt_alloc_config_parse(out, cfg->alloc_conf, err, err_size);
  return GRT_OK;
}

/* ---- the starting state ---- */

typedef struct start_block {
  grt_devptr addr;
  uint64_t size, requested;
  bool from_free; /* freed in the trace, never allocated: size rounded, gap rule applies */
  size_t freed_at; /* from_free: the index of its free */
  grt_stream_id stream;
} start_block;

typedef struct start_state {
  grt__replay_ranges segs; /* segments (or mapped runs) that existed when recording began */
  start_block *blocks;
  size_t n_blocks, cap_blocks;
} start_state;

static bool push(void **arr, size_t *n, size_t *cap, size_t elem, const void *v) {
  if (*n == *cap) {
    size_t c = *cap ? *cap * 2 : 16;
    void *p = realloc(*arr, c * elem);
    if (!p) return false;
    *arr = p;
    *cap = c;
  }
  memcpy((char *)*arr + *n * elem, v, elem);
  (*n)++;
  return true;
}

bool grt__replay_ranges_push(grt__replay_ranges *l, const grt__replay_range *x) {
  return push((void **)&l->v, &l->n, &l->cap, sizeof *x, x);
}

static int cmp_block(const void *a, const void *b) {
  const start_block *x = a, *y = b;
  return x->addr < y->addr ? -1 : x->addr > y->addr;
}

static int cmp_seg(const void *a, const void *b) {
  const grt__replay_range *x = a, *y = b;
  return x->addr < y->addr ? -1 : x->addr > y->addr;
}

static const grt__replay_range *seg_of(const start_state *s, grt_devptr addr) {
  const grt__replay_range *v = s->segs.v;
  for (size_t i = 0; i < s->segs.n; i++)
    if (addr >= v[i].addr && addr < v[i].addr + v[i].size) return &v[i];
  return NULL;
}

/* Segments that existed when recording began. */
static grt_status collect_segments(const grt_trace_info *in, start_state *s) {
  grt__u64map first; /* address -> first segment event kind + 1 */
  grt__u64map_init(&first);
  grt_status st = GRT_OK;
  for (size_t i = 0; i < in->n_events && !st; i++) {
    const grt_trace_event *e = &in->events[i];
    if (e->kind < GRT_TRACE_SEGMENT_ALLOC || e->kind > GRT_TRACE_SEGMENT_UNMAP) continue;
    if (grt__u64map_get(&first, e->addr)) continue;
    if (!grt__u64map_put(&first, e->addr, (void *)(uintptr_t)(e->kind + 1u))) st = GRT_ERR_NOMEM;
    bool is_free = e->kind == GRT_TRACE_SEGMENT_FREE || e->kind == GRT_TRACE_SEGMENT_UNMAP;
    grt__replay_range g = {.addr = e->addr, .size = e->size, .stream = in->streams[e->stream], .is_large = e->size != TWO_MIB};
    if (!st && is_free && !grt__replay_ranges_push(&s->segs, &g)) st = GRT_ERR_NOMEM;
  }
  for (size_t i = 0; i < in->n_segments && !st; i++) {
    const grt_trace_segment *g = &in->segments[i];
    if (grt__u64map_get(&first, g->addr)) continue;
    grt__replay_range v = {g->addr, g->total_size, g->stream, g->is_large, {g->pool_id[0], g->pool_id[1]}};
    if (!grt__replay_ranges_push(&s->segs, &v)) st = GRT_ERR_NOMEM;
  }
  grt__u64map_free(&first);
  if (s->segs.n) qsort(s->segs.v, s->segs.n, sizeof *s->segs.v, cmp_seg);
  return st;
}

/* Blocks live when recording began. */
static grt_status collect_blocks(const grt_trace_info *in, const grt_alloc_config *ac, start_state *s,
                                 bool in_segments) {
  grt__u64map live_end, seen_unmatched; /* addresses of trace allocations live at the end; ids seen */
  grt__u64map_init(&live_end);
  grt__u64map_init(&seen_unmatched);
  grt_status st = GRT_OK;
  grt_devptr *addr_of = calloc(in->n_ids ? in->n_ids : 1, sizeof *addr_of);
  if (!addr_of) return GRT_ERR_NOMEM;
  for (size_t i = 0; i < in->n_events && !st; i++) {
    const grt_trace_event *e = &in->events[i];
    if (!(e->flags & GRT_TRACE_F_ADDR) || e->id >= in->n_ids) continue;
    if (e->kind == GRT_TRACE_ALLOC) addr_of[e->id] = e->addr;
    if (e->kind == GRT_TRACE_FREE_COMPLETED) addr_of[e->id] = 0;
    bool is_free = e->kind == GRT_TRACE_FREE_COMPLETED || e->kind == GRT_TRACE_FREE_REQUESTED;
    if (!is_free || !(e->flags & GRT_TRACE_F_UNMATCHED) || grt__u64map_get(&seen_unmatched, e->id)) continue;
    if (!grt__u64map_put(&seen_unmatched, e->id, (void *)1)) st = GRT_ERR_NOMEM;
    start_block b = {e->addr, grt_alloc_round_size(ac, e->size ? e->size : 1), e->size, true, i, in->streams[e->stream]};
    if (!st && !push((void **)&s->blocks, &s->n_blocks, &s->cap_blocks, sizeof b, &b)) st = GRT_ERR_NOMEM;
  }
  for (uint64_t id = 0; id < in->n_ids && !st; id++)
    if (addr_of[id] && !grt__u64map_put(&live_end, addr_of[id], (void *)1)) st = GRT_ERR_NOMEM;
  free(addr_of);
  for (size_t i = 0; i < in->n_segments && !st; i++) {
    const grt_trace_segment *g = &in->segments[i];
    for (size_t j = 0; j < g->n_blocks && !st; j++) {
      const grt_trace_block *k = &g->blocks[j];
      /* a block in memory mapped since recording began was allocated since */
      if (k->state == GRT_TRACE_BLOCK_INACTIVE || grt__u64map_get(&live_end, k->addr)) continue;
      if (in_segments && !seg_of(s, k->addr)) continue;
      start_block b = {k->addr, k->size, k->requested_size <= k->size ? k->requested_size : k->size, false, 0, g->stream};
      if (!push((void **)&s->blocks, &s->n_blocks, &s->cap_blocks, sizeof b, &b)) st = GRT_ERR_NOMEM;
    }
  }
  grt__u64map_free(&live_end);
  grt__u64map_free(&seen_unmatched);
  if (s->n_blocks) qsort(s->blocks, s->n_blocks, sizeof *s->blocks, cmp_block);
  return st;
}

/* The lowest address in (b, end) that the trace allocates before b's free:
 * memory past b's end then (b was live until its free). */
static grt_devptr allocated_above(const grt_trace_info *in, const start_block *b, grt_devptr end) {
  for (size_t i = 0; i < b->freed_at && i < in->n_events; i++) {
    const grt_trace_event *e = &in->events[i];
    if (e->kind == GRT_TRACE_ALLOC && (e->flags & GRT_TRACE_F_ADDR) && e->addr > b->addr && e->addr < end) end = e->addr;
  }
  return end;
}

/* Large pool: a block freed but never allocated in the trace is its rounded
 * size plus whatever unsplit remainder it took. Free large space always
 * comes in pieces above 1 MiB (a remainder of at most 1 MiB is never split
 * off, and large blocks are larger than 1 MiB), so a gap of at most 1 MiB up
 * to the next thing known to be there then (a live block, the segment's end,
 * or an allocation the trace makes before the block's free) is part of it. */
static void apply_gap_rule(const grt_trace_info *in, start_state *s) {
  for (size_t i = 0; i < s->n_blocks; i++) {
    start_block *b = &s->blocks[i];
    const grt__replay_range *g = seg_of(s, b->addr);
    if (!b->from_free || !g || !g->is_large) continue;
    uint64_t end = g->addr + g->size;
    if (i + 1 < s->n_blocks && s->blocks[i + 1].addr < end) end = s->blocks[i + 1].addr;
    end = allocated_above(in, b, end);
    if (end > b->addr + b->size && end - (b->addr + b->size) <= GRT_SMALL_SIZE) b->size = end - b->addr;
  }
}

/* Expandable: the pages mapped when recording began, imported with their translations. */
static grt_status expandable_segments(grt_replay *r, start_state *s) {
  grt_status st = grt__replay_rebuild_expandable(r, &s->segs);
  if (s->segs.n) qsort(s->segs.v, s->segs.n, sizeof *s->segs.v, cmp_seg);
  return st;
}

/* The allocator refuses a range that is not whole blocks before it looks at
 * it, with no message of its own: a real snapshot's ranges always are, so
 * the snapshot is malformed, and the rebuild says where. */
static grt_status check_range(grt_replay *r, const char *what, grt_devptr addr, uint64_t size) {
  if (size && addr % GRT_MIN_BLOCK_SIZE == 0 && size % GRT_MIN_BLOCK_SIZE == 0 && size - 1 <= UINT64_MAX - addr)
    return GRT_OK;
  grt__replay_set_error(r, "rebuilding the start: the snapshot's %s 0x%llx (+%llu bytes) is not whole %llu-byte blocks",
                        what, (unsigned long long)addr, (unsigned long long)size, (unsigned long long)GRT_MIN_BLOCK_SIZE);
  return GRT_ERR_PARSE;
}

/* The allocator's reason, or the status's where the call was refused before it ran. */
static const char *alloc_reason(grt_replay *r, grt_status st) {
  const char *m = grt_alloc_last_error(r->alloc);
  return m[0] ? m : grt_status_str(st);
}

/* An import the allocator refuses as an invalid range is the snapshot's
 * fault (its ranges do not fit together), not the caller's. */
static grt_status import_status(grt_status st) { return st == GRT_ERR_INVALID_ARG ? GRT_ERR_PARSE : st; }

grt_status grt__replay_rebuild_start(grt_replay *r) {
  const grt_trace_info *in = &r->info;
  grt_alloc_config ac;
  char msg[128];
  grt_status st = grt__replay_alloc_config(&r->cfg, in, &ac, msg, sizeof msg);
  if (st) return st;
  bool expandable = ac.expandable_segments;
  start_state s;
  memset(&s, 0, sizeof s);
  st = expandable ? expandable_segments(r, &s) : collect_segments(in, &s);
  if (!st && !(st = collect_blocks(in, &ac, &s, true))) {
    if (!expandable) apply_gap_rule(in, &s); /* expandable blocks split whenever 512 B would remain */
    for (size_t i = 0; i < s.segs.n && !st && !expandable; i++) {
      const grt__replay_range *g = &s.segs.v[i];
      if ((st = check_range(r, "segment", g->addr, g->size))) break;
      st = grt_alloc_import_segment_pool(r->alloc, g->pool, g->addr, g->size, g->stream, g->is_large);
      if (st) grt__replay_set_error(r, "rebuilding the start: %s", alloc_reason(r, st));
      st = import_status(st);
    }
    for (size_t i = 0; i < s.n_blocks && !st; i++) {
      const start_block *b = &s.blocks[i];
      if (!seg_of(&s, b->addr)) continue; /* not in a segment that existed: nothing to rebuild */
      if ((st = check_range(r, "block", b->addr, b->size))) break;
      st = grt_alloc_import_block(r->alloc, grt__replay_to_replay(r, b->addr), b->size, b->requested);
      if (st) {
        grt__replay_set_error(r, "rebuilding the start: block 0x%llx (+%llu): %s", (unsigned long long)b->addr,
                              (unsigned long long)b->size, alloc_reason(r, st));
        st = import_status(st);
        break;
      }
      st = grt__replay_note_imported(r, b->addr);
    }
  }
  free(s.segs.v);
  free(s.blocks);
  return st;
}

/* One block live at the start, allocated now under the replay's own config:
 * through the replay when the trace frees it (its free then finds it), else
 * straight from the allocator (the trace never frees it). */
static grt_status prefill_block(grt_replay *r, const start_block *b) {
  if (b->from_free) {
    const grt_trace_event *f = &r->info.events[b->freed_at];
    grt_trace_event ev = {.id = f->id, .size = b->requested ? b->requested : 1, .addr = b->addr,
                          .stream = f->stream, .kind = GRT_TRACE_ALLOC, .flags = GRT_TRACE_F_ADDR};
    return grt__replay_do_alloc(r, &ev, b->stream);
  }
  grt_devptr p;
  grt_status st = grt_alloc_malloc(r->alloc, b->requested ? b->requested : 1, b->stream, &p);
  if (st == GRT_OK) {
    r->live += b->requested;
    if (r->live > r->peak_live) r->peak_live = r->live;
  } else if (st == GRT_ERR_OOM || st == GRT_ERR_SIZE) {
    grt__replay_note_oom(r, b->requested);
    st = GRT_OK;
  } else {
    grt__replay_set_error(r, "allocating the start: %s", grt_alloc_last_error(r->alloc));
  }
  return st;
}

grt_status grt__replay_prefill_start(grt_replay *r) {
  grt_alloc_config ac;
  char msg[128];
  grt_status st = grt__replay_alloc_config(&r->cfg, &r->info, &ac, msg, sizeof msg);
  if (st) return st;
  start_state s;
  memset(&s, 0, sizeof s);
  st = collect_blocks(&r->info, &ac, &s, false);
  for (size_t i = 0; i < s.n_blocks && !st; i++) st = prefill_block(r, &s.blocks[i]);
  free(s.blocks);
  return st;
}
