/* examine.c — the diagnosis of a recorded run (gpurt/doctor.h): the
 * faithful replay, with the allocator's state taken at the peak of live
 * bytes and just after the first recorded OOM, the verdict, and the
 * segments live blocks pin.
 *
 * Verdict at the first OOM: the process had `reserved + free` bytes (what
 * PyTorch held plus what cudaMemGetInfo reported free). If the live bytes
 * plus the failed request exceed that, no layout could have served it:
 * demand-bound. Otherwise the memory was there, in cached blocks too small
 * or in segments live blocks pinned: fragmentation-bound. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc/probe.h"
#include "base/status.h"
#include "base/u64map.h"
#include "doctor/doctor_impl.h"
#include "gpurt/doctor.h"
#include "gpurt/report.h"
#include "trace/replay_impl.h"

typedef struct exam {
  grt_doctor_report *rep;
  const grt_trace_info *info;
  uint64_t peak_event, oom_event;   /* UINT64_MAX: none */
  grt__u64map live;                 /* recorded address of a live allocation -> its alloc event + 1 */
  grt__start_blocks start;          /* blocks live when recording began, while still live */
  grt__contract contract;
  bool nomem;
} exam;

static void add_bytes(void *ctx, grt_devptr addr, uint64_t size, grt_stream_id stream) {
  (void)addr, (void)stream;
  *(uint64_t *)ctx += size;
}

typedef struct stream_bytes {
  grt_stream_id stream;
  uint64_t allocated, free;
} stream_bytes;

static int cmp_stream(const void *a, const void *b) {
  const stream_bytes *x = a, *y = b;
  return x->stream < y->stream ? -1 : x->stream > y->stream;
}

/* How many streams hold segments, and the cached free bytes on streams other
 * than `own` (NULL: the one holding the most allocated bytes). */
static grt_status stream_split(const grt_alloc_snapshot *snap, const grt_stream_id *own, grt_doctor_moment *m) {
  stream_bytes *v = malloc((snap->n_segments + 1) * sizeof *v);
  if (!v) return GRT_ERR_NOMEM;
  size_t n = 0;
  for (size_t i = 0; i < snap->n_segments; i++) {
    const grt_snapshot_segment *g = &snap->segments[i];
    v[i] = (stream_bytes){g->stream, g->allocated_size, g->total_size - g->allocated_size};
  }
  qsort(v, snap->n_segments, sizeof *v, cmp_stream);
  for (size_t i = 0; i < snap->n_segments; i++) { /* one entry per stream */
    if (n && v[n - 1].stream == v[i].stream) {
      v[n - 1].allocated += v[i].allocated, v[n - 1].free += v[i].free;
    } else {
      v[n++] = v[i];
    }
  }
  size_t main = 0;
  for (size_t i = 0; i < n; i++)
    if (own ? v[i].stream == *own : v[i].allocated > v[main].allocated) main = i;
  uint64_t total_free = 0;
  for (size_t i = 0; i < n; i++) total_free += v[i].free;
  bool own_found = n && (!own || v[main].stream == *own);
  m->streams = n;
  m->other_stream_free = total_free - (own_found ? v[main].free : 0);
  free(v);
  return GRT_OK;
}

static grt_status take_moment(grt_replay *r, uint64_t index, grt_doctor_moment *m, const grt_stream_id *own) {
  grt_allocator *a = grt_replay_allocator(r);
  grt_alloc_stats s;
  grt_alloc_snapshot *snap = NULL;
  grt_free_space fs;
  grt_status st = grt_alloc_get_stats(a, &s);
  if (!st) st = grt_alloc_snapshot_take(a, &snap);
  if (!st) st = grt_free_space_of(snap, &fs);
  if (!st) st = stream_split(snap, own, m);
  grt_alloc_snapshot_free(snap);
  uint64_t releasable = 0;
  if (!st) st = grt__alloc_releasable(a, add_bytes, &releasable);
  if (st) return st;
  m->valid = true;
  m->event = index;
  m->reserved = (uint64_t)s.reserved_bytes[GRT_STAT_ALL].current;
  m->allocated = (uint64_t)s.allocated_bytes[GRT_STAT_ALL].current;
  m->requested = (uint64_t)s.requested_bytes[GRT_STAT_ALL].current;
  m->internal_fragmentation = m->allocated > m->requested ? m->allocated - m->requested : 0;
  m->external_fragmentation = m->reserved > m->allocated ? m->reserved - m->allocated : 0;
  m->releasable = releasable;
  m->largest_free = fs.largest[GRT_STAT_ALL];
  return GRT_OK;
}

/* Follows which alloc event made each live allocation (recorded addresses). */
static void track(exam *x, const grt_trace_event *ev, uint64_t index) {
  if (!(ev->flags & GRT_TRACE_F_ADDR)) return;
  if (ev->kind == GRT_TRACE_ALLOC && !grt__u64map_put(&x->live, ev->addr, (void *)(uintptr_t)(index + 1)))
    x->nomem = true;
  if (ev->kind == GRT_TRACE_FREE_COMPLETED) {
    grt__u64map_del(&x->live, ev->addr);
    grt__u64map_del(&x->start.at, ev->addr);
  }
}

static int cmp_pinned(const void *a, const void *b) {
  const grt_doctor_pinned *x = a, *y = b;
  return x->free_bytes > y->free_bytes ? -1 : x->free_bytes < y->free_bytes;
}

static void note_pinned(exam *x, const grt_snapshot_segment *s, grt_devptr recorded) {
  grt_doctor_report *rep = x->rep;
  grt_doctor_pinned p = {.address = recorded, .size = s->total_size, .first_live_event = UINT64_MAX};
  for (size_t j = 0; j < s->n_blocks; j++) {
    const grt_snapshot_block *b = &s->blocks[j];
    if (b->state == GRT_BLOCK_INACTIVE) {
      p.free_bytes += b->size;
      continue;
    }
    p.live_blocks++;
    p.live_bytes += b->size;
    grt_devptr at = recorded + (b->address - s->address);
    void *v = grt__u64map_get(&x->live, at);
    if (v && p.first_live_event == UINT64_MAX) {
      p.first_live_event = (uint64_t)(uintptr_t)v - 1;
      if (!p.first_live_stack && x->info->event_stack) p.first_live_stack = x->info->event_stack[p.first_live_event];
    }
    void *sb = v ? NULL : grt__u64map_get(&x->start.at, at);
    if (sb && !p.first_live_stack) p.first_live_stack = x->start.v[(uintptr_t)sb - 1].stack;
  }
  if (!p.free_bytes || !p.live_blocks) return;
  if (rep->n_pinned < GRT_DOCTOR_MAX_PINNED) {
    rep->pinned[rep->n_pinned++] = p;
  } else if (p.free_bytes > rep->pinned[GRT_DOCTOR_MAX_PINNED - 1].free_bytes) {
    rep->pinned[GRT_DOCTOR_MAX_PINNED - 1] = p;
  } else {
    return;
  }
  qsort(rep->pinned, rep->n_pinned, sizeof *rep->pinned, cmp_pinned);
}

/* Segments holding both live blocks and cached free bytes, in recorded
 * coordinates (expandable reservations translated). */
static grt_status find_pinned(exam *x, grt_replay *r) {
  grt_alloc_snapshot *snap = NULL;
  grt_status st = grt_alloc_snapshot_take(grt_replay_allocator(r), &snap);
  if (st) return st;
  x->rep->n_pinned = 0;
  for (size_t i = 0; i < snap->n_segments; i++)
    note_pinned(x, &snap->segments[i], grt__replay_to_recorded(r, snap->segments[i].address));
  grt_alloc_snapshot_free(snap);
  return GRT_OK;
}

static int cmp_site(const void *a, const void *b) {
  const grt_doctor_site *x = a, *y = b;
  if (x->bytes != y->bytes) return x->bytes > y->bytes ? -1 : 1;
  return x->stack < y->stack ? -1 : x->stack > y->stack;
}

typedef struct site_set {
  grt_doctor_site *all;
  size_t n;
  grt__u64map at; /* stack id -> index in all + 1 */
} site_set;

static grt_status add_site(site_set *ss, uint32_t stack, uint64_t bytes) {
  void *slot = grt__u64map_get(&ss->at, stack);
  if (!slot) {
    ss->all[ss->n] = (grt_doctor_site){.stack = stack};
    slot = (void *)(uintptr_t)(++ss->n);
    if (!grt__u64map_put(&ss->at, stack, slot)) return GRT_ERR_NOMEM;
  }
  grt_doctor_site *s = &ss->all[(uintptr_t)slot - 1];
  s->bytes += bytes;
  s->count++;
  return GRT_OK;
}

/* The live allocations grouped by the stack that made them, most bytes
 * first: the trace's own and those live since before it began. */
static grt_status sites_now(exam *x, grt_doctor_site *out, size_t *n_out, uint64_t *traced) {
  const grt_trace_info *in = x->info;
  site_set ss = {.all = calloc(x->live.count + x->start.at.count + 1, sizeof *ss.all)};
  grt__u64map_init(&ss.at);
  if (!ss.all) return GRT_ERR_NOMEM;
  grt_status st = GRT_OK;
  grt__u64map_iter it = grt__u64map_begin(&x->live);
  uint64_t addr;
  void *v;
  while (!st && grt__u64map_next(&x->live, &it, &addr, &v)) {
    uint64_t idx = (uint64_t)(uintptr_t)v - 1;
    st = add_site(&ss, in->event_stack ? in->event_stack[idx] : 0, in->events[idx].size);
    *traced += in->events[idx].size;
  }
  it = grt__u64map_begin(&x->start.at);
  while (!st && grt__u64map_next(&x->start.at, &it, &addr, &v)) {
    const grt__start_block *b = &x->start.v[(uintptr_t)v - 1];
    st = add_site(&ss, b->stack, b->size);
    *traced += b->size;
  }
  if (!st) {
    qsort(ss.all, ss.n, sizeof *ss.all, cmp_site);
    *n_out = ss.n < GRT_DOCTOR_MAX_SITES ? ss.n : GRT_DOCTOR_MAX_SITES;
    memcpy(out, ss.all, *n_out * sizeof *out);
  }
  grt__u64map_free(&ss.at);
  free(ss.all);
  return st;
}

static grt_status on_step(void *ctx, grt_replay *r, const grt_trace_event *ev, uint64_t index) {
  exam *x = ctx;
  track(x, ev, index);
  grt_status st = grt__contract_step(&x->contract, r, ev, index);
  /* PyTorch logs a segment before the alloc it serves; the model makes it at that alloc */
  bool at_peak = !x->rep->peak.valid && index >= x->peak_event && ev->kind != GRT_TRACE_SEGMENT_ALLOC &&
                 ev->kind != GRT_TRACE_SEGMENT_MAP;
  if (!st && at_peak) st = take_moment(r, index, &x->rep->peak, NULL);
  if (!st && at_peak) st = sites_now(x, x->rep->peak_sites, &x->rep->n_peak_sites, &x->rep->peak.traced);
  if (!st && at_peak && x->oom_event == UINT64_MAX) st = find_pinned(x, r);
  if (!st && index == x->oom_event) {
    st = take_moment(r, index, &x->rep->oom, &x->info->streams[ev->stream]);
    x->rep->oom.request = ev->size;
    x->rep->oom.device_free = (ev->flags & GRT_TRACE_F_ADDR) ? ev->addr : 0;
    if (!st) st = find_pinned(x, r);
    if (!st) st = sites_now(x, x->rep->oom_sites, &x->rep->n_oom_sites, &x->rep->oom.traced);
  }
  return st ? st : x->nomem ? GRT_ERR_NOMEM : GRT_OK;
}

static void verdict(grt_doctor_report *rep) {
  char b[5][32];
  const grt_doctor_moment *m = &rep->oom;
  if (!m->valid) {
    const grt_doctor_moment *p = &rep->peak;
    uint64_t pinned = p->external_fragmentation > p->releasable ? p->external_fragmentation - p->releasable : 0;
    rep->verdict = GRT_DOCTOR_HEALTHY;
    snprintf(rep->why, sizeof rep->why, "no OOM recorded; at the peak %s reserved held %s allocated, and %s of the "
             "cached rest was pinned by live blocks (an empty_cache cannot return it)",
             grt_format_bytes(p->reserved, b[0], sizeof b[0]), grt_format_bytes(p->allocated, b[1], sizeof b[1]),
             grt_format_bytes(pinned, b[2], sizeof b[2]));
    return;
  }
  rep->process_memory = m->reserved + m->device_free;
  bool demand = m->allocated + m->request > rep->process_memory;
  rep->verdict = demand ? GRT_DOCTOR_DEMAND_BOUND : GRT_DOCTOR_FRAGMENTATION_BOUND;
  snprintf(rep->why, sizeof rep->why, "at the first OOM %s allocated + the %s request %s the %s the process had "
           "(%s reserved + %s free)",
           grt_format_bytes(m->allocated, b[0], sizeof b[0]), grt_format_bytes(m->request, b[1], sizeof b[1]),
           demand ? "exceed" : "fit in", grt_format_bytes(rep->process_memory, b[2], sizeof b[2]),
           grt_format_bytes(m->reserved, b[3], sizeof b[3]), grt_format_bytes(m->device_free, b[4], sizeof b[4]));
}

/* The first oom event and the peak of live (requested) bytes, from the recording. */
static void moments_of(const grt_trace *t, const grt_trace_info *in, exam *x) {
  x->peak_event = x->oom_event = UINT64_MAX;
  for (size_t i = 0; i < in->n_events && x->oom_event == UINT64_MAX; i++)
    if (in->events[i].kind == GRT_TRACE_OOM) x->oom_event = i;
  grt_trace_recorded rec;
  if (grt_trace_recorded_figures(t, &rec) == GRT_OK) {
    x->peak_event = in->n_events ? rec.requested_peak_event : UINT64_MAX;
    x->rep->partial = rec.partial;
  }
}

static grt_status examine(const grt_trace *t, exam *x, char *err, size_t err_size) {
  grt_replay_config c;
  grt_replay_config_default(&c);
  c.placement = GRT_REPLAY_PLACE_RECORDED;
  c.on_step = on_step;
  c.step_ctx = x;
  grt_replay *r;
  grt_status st = grt_replay_open(t, &c, &r);
  if (st) {
    if (err) snprintf(err, err_size, "cannot create the replay: %s", grt_status_str(st));
    return st;
  }
  if (!(st = grt_replay_rebuild_start(r))) st = grt_replay_run(r);
  if (st && err) snprintf(err, err_size, "%s", x->nomem ? "no host memory" : grt_replay_last_error(r));
  grt__keep_first(&st, grt_replay_destroy(r));
  return st;
}

grt_status grt_doctor_examine(const grt_trace *trace, grt_doctor_report *out, char *err, size_t err_size) {
  if (!trace || !out) return GRT_ERR_INVALID_ARG;
  memset(out, 0, sizeof *out);
  if (err && err_size) err[0] = 0;
  grt_trace_info in;
  grt_status st = grt_trace_get_info(trace, &in);
  if (st) return st;
  if (in.format != GRT_TRACE_FORMAT_PYTORCH && in.format != GRT_TRACE_FORMAT_NATIVE) {
    if (err) snprintf(err, err_size, "the doctor needs a PyTorch snapshot (recorded addresses)");
    return GRT_ERR_INVALID_ARG;
  }
  exam x = {.rep = out, .info = &in};
  grt__u64map_init(&x.live);
  moments_of(trace, &in, &x);
  grt__contract_init(&x.contract, trace, &in, out);
  st = grt__doctor_steady_find(&in, &out->steady);
  if (!st) st = grt__start_blocks_collect(&in, &x.start);
  if (!st) st = examine(trace, &x, err, err_size);
  else if (err) snprintf(err, err_size, "no host memory");
  grt__u64map_free(&x.live);
  grt__start_blocks_free(&x.start);
  if (!st) verdict(out), grt__contract_finish(&x.contract);
  grt__contract_free(&x.contract);
  return st;
}
