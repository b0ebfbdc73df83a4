/* fidelity.c — scoring a faithful replay of a PyTorch snapshot against the
 * recording: the share of allocations placed at exactly the recorded address,
 * the first divergences with what the replay had there, whether each recorded
 * release returned the same segments, and the final segment layout against
 * the snapshot's `segments`. The replay uses recorded addresses only for the
 * starting state, as segment bases, and here, for scoring. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/status.h"
#include "trace/replay_impl.h"

typedef struct fid {
  grt_fidelity_report *rep;
  const grt_trace_info *info;
  bool expandable;
  uint64_t dev_alloc, dev_free;   /* the allocator's device calls when `held` was taken */
  grt__replay_ranges held;        /* the model's device ranges (recorded coordinates) */
  grt__replay_ranges now, added, removed, want; /* scratch */
  bool failed;                    /* host memory ran out while scoring */
} fid;

static const char *state_name(grt_block_state s) {
  return s == GRT_BLOCK_ACTIVE_ALLOCATED ? "allocated" : s == GRT_BLOCK_ACTIVE_PENDING_FREE ? "pending-free" : "free";
}

/* What the replay holds at the recorded address (in replay coordinates). */
static void describe(grt_replay *r, grt_devptr want, char *buf, size_t cap) {
  grt_alloc_snapshot *snap = NULL;
  if (grt_alloc_snapshot_take(r->alloc, &snap) != GRT_OK) {
    snprintf(buf, cap, "(no snapshot)");
    return;
  }
  snprintf(buf, cap, "no replay segment covers the recorded address");
  for (size_t i = 0; i < snap->n_segments; i++) {
    const grt_snapshot_segment *s = &snap->segments[i];
    if (want < s->address || want >= s->address + s->total_size) continue;
    for (size_t j = 0; j < s->n_blocks; j++) {
      const grt_snapshot_block *b = &s->blocks[j];
      if (want < b->address || want >= b->address + b->size) continue;
      char bs[32], ss[32];
      snprintf(buf, cap, "recorded address is %" PRIu64 " B into a %s %s block of the %s %s segment at 0x%" PRIx64,
               want - b->address, grt_format_bytes(b->size, bs, sizeof bs), state_name(b->state),
               grt_format_bytes(s->total_size, ss, sizeof ss), s->is_large ? "large" : "small",
               grt__replay_to_recorded(r, s->address));
    }
  }
  grt_alloc_snapshot_free(snap);
}

/* Brings `held` up to date; `added`/`removed` get what changed since. The
 * allocator's device counters say whether anything can have changed. */
static void update(fid *f, grt_replay *r) {
  f->added.n = f->removed.n = 0;
  grt_alloc_stats as;
  grt__ignore(grt_alloc_get_stats(r->alloc, &as)); /* an allocator and a buffer: it cannot fail */
  if (as.num_device_alloc == f->dev_alloc && as.num_device_free == f->dev_free) return;
  grt_status (*minus)(const grt__replay_ranges *, const grt__replay_ranges *, grt__replay_ranges *) =
      f->expandable ? grt__ranges_minus : grt__ranges_missing;
  if (grt__replay_footprint(r, f->expandable, &f->now) || minus(&f->now, &f->held, &f->added) ||
      minus(&f->held, &f->now, &f->removed)) {
    f->failed = true;
    return;
  }
  grt__replay_ranges t = f->held;
  f->held = f->now;
  f->now = t;
  f->dev_alloc = as.num_device_alloc;
  f->dev_free = as.num_device_free;
}

/* `want` = the ranges of the events [from, to), normalized. */
static void recorded_ranges(fid *f, uint64_t from, uint64_t to) {
  f->want.n = 0;
  for (uint64_t i = from; i < to; i++) {
    const grt_trace_event *e = &f->info->events[i];
    grt__replay_range x = {.addr = e->addr, .size = e->size, .stream = f->info->streams[e->stream]};
    if (!grt__replay_ranges_push(&f->want, &x)) f->failed = true;
  }
  if (f->expandable)
    grt__ranges_normalize(&f->want);
  else
    grt__ranges_sort(&f->want);
}

static void describe_ranges(const grt__replay_ranges *l, char *buf, size_t cap) {
  if (!l->n) {
    snprintf(buf, cap, "nothing");
    return;
  }
  char b[32];
  snprintf(buf, cap, "%zu range%s from 0x%" PRIx64 " (%s%s)", l->n, l->n == 1 ? "" : "s", l->v[0].addr,
           grt_format_bytes(l->v[0].size, b, sizeof b), l->n > 1 ? ", ..." : "");
}

/* "at event I: recorded X, the model Y" into note, once. */
static void note_once(char *note, size_t cap, const char *what, uint64_t index, const grt__replay_ranges *want,
                      const grt__replay_ranges *got) {
  if (note[0]) return;
  char w[80], g[80];
  describe_ranges(want, w, sizeof w);
  describe_ranges(got, g, sizeof g);
  int n = snprintf(note, cap, "%s at event %" PRIu64 ": recorded %s, the model %s", what, index, w, g);
  if (n < 0 || (size_t)n >= cap) note[cap - 1] = 0; /* cut: the note stays a sentence's start */
}

/* The recorded segment_alloc/segment_map events right before the alloc at index. */
static uint64_t decisions_before(const fid *f, uint64_t index) {
  uint64_t i = index;
  while (i > 0) {
    uint8_t k = f->info->events[i - 1].kind;
    if (k != GRT_TRACE_SEGMENT_ALLOC && k != GRT_TRACE_SEGMENT_MAP) break;
    i--;
  }
  return i;
}

/* The start of the run of segment frees/unmaps that ends at index. */
static uint64_t release_before(const fid *f, uint64_t index) {
  uint64_t i = index;
  while (i > 0) {
    uint8_t k = f->info->events[i - 1].kind;
    if (k != GRT_TRACE_SEGMENT_FREE && k != GRT_TRACE_SEGMENT_UNMAP) break;
    i--;
  }
  return i;
}

/* An alloc whose recorded segment events follow a release run made that
 * release itself (its retry path): the bytes it released must be the run's. */
static bool score_retry_release(fid *f, const grt_replay *r, uint64_t from) {
  grt_fidelity_report *rep = f->rep;
  uint64_t run = release_before(f, from);
  if (run == from || !r->alloc_was_retry) return !f->removed.n;
  recorded_ranges(f, run, from);
  bool same = grt__ranges_equal(&f->want, &f->removed);
  rep->releases++;
  rep->releases_matching += same;
  if (!same) note_once(rep->release_note, sizeof rep->release_note, "release", run, &f->want, &f->removed);
  return true;
}

static void score_decisions(fid *f, grt_replay *r, uint64_t index) {
  grt_fidelity_report *rep = f->rep;
  uint64_t from = decisions_before(f, index);
  update(f, r);
  uint64_t n = index - from;
  if (!n && !f->added.n && !f->removed.n) return;
  bool releases_scored = n && score_retry_release(f, r, from);
  recorded_ranges(f, from, index);
  rep->segment_decisions += n ? n : 1;
  if (n && releases_scored && grt__ranges_equal(&f->want, &f->added)) {
    rep->segment_decisions_agree += n;
    return;
  }
  bool released = f->removed.n && !releases_scored;
  note_once(rep->decision_note, sizeof rep->decision_note, released ? "device ranges released by an alloc" : "alloc",
            index, &f->want, released ? &f->removed : &f->added);
}

static void score_placement(fid *f, grt_replay *r, const grt_trace_event *ev, uint64_t index, grt_devptr got,
                            grt_status st) {
  grt_fidelity_report *rep = f->rep;
  if (!(ev->flags & GRT_TRACE_F_ADDR)) return;
  rep->allocs++;
  grt_devptr mapped = st == GRT_OK ? grt__replay_to_recorded(r, got) : 0;
  if (mapped == ev->addr) {
    rep->exact++;
    return;
  }
  rep->divergences++;
  if (rep->n_shown >= GRT_FIDELITY_MAX_SHOWN) return;
  grt_fidelity_divergence *d = &rep->shown[rep->n_shown++];
  d->event = index;
  d->size = ev->size;
  d->stream = f->info->streams[ev->stream];
  d->recorded = ev->addr;
  d->replayed = mapped;
  char here[200];
  describe(r, grt__replay_to_replay(r, ev->addr), here, sizeof here); /* just after the alloc */
  const char *prev = index ? grt_trace_kind_name((grt_trace_kind)f->info->events[index - 1].kind) : "none";
  snprintf(d->context, sizeof d->context, "%s; previous event: %s", here, prev);
}

static void on_alloc(void *ctx, grt_replay *r, const grt_trace_event *ev, uint64_t index, grt_devptr got,
                     grt_status st) {
  fid *f = ctx;
  score_placement(f, r, ev, index, got, st);
  score_decisions(f, r, index);
}

/* The end of the run of segment frees/unmaps starting at index. */
static uint64_t run_end(const fid *f, uint64_t index) {
  uint64_t i = index;
  while (i < f->info->n_events) {
    uint8_t k = f->info->events[i].kind;
    if (k != GRT_TRACE_SEGMENT_FREE && k != GRT_TRACE_SEGMENT_UNMAP) break;
    i++;
  }
  return i;
}

/* Whether the model released exactly the run [index, end); counts it. */
static bool score_release(fid *f, grt_replay *r, uint64_t index, uint64_t end) {
  grt_fidelity_report *rep = f->rep;
  update(f, r);
  recorded_ranges(f, index, end);
  bool same = f->want.n && !f->added.n && grt__ranges_equal(&f->want, &f->removed);
  if (end > index) {
    rep->releases++;
    rep->releases_matching += same;
    if (!same) note_once(rep->release_note, sizeof rep->release_note, "release", index, &f->want, &f->removed);
  }
  return same || (end == index && !f->removed.n && !f->added.n);
}

static void on_release(void *ctx, grt_replay *r, uint64_t index) {
  fid *f = ctx;
  grt__ignore(score_release(f, r, index, run_end(f, index)));
}

static void on_oom(void *ctx, grt_replay *r, uint64_t run_index, uint64_t oom_index, grt_status st) {
  fid *f = ctx;
  grt_fidelity_report *rep = f->rep;
  bool released_same = score_release(f, r, run_index, oom_index);
  rep->ooms_recorded++;
  if (st == GRT_ERR_OOM && released_same) {
    rep->ooms_agree++;
    return;
  }
  if (rep->oom_note[0]) return;
  char b[32];
  const grt_trace_event *e = &f->info->events[oom_index];
  if (st != GRT_ERR_OOM)
    snprintf(rep->oom_note, sizeof rep->oom_note,
             "oom at event %" PRIu64 ": the model served the %s request (%s) on a device with the recorded %" PRIu64
             " B free",
             oom_index, grt_format_bytes(e->size, b, sizeof b), grt_status_name(st), e->addr);
  else
    snprintf(rep->oom_note, sizeof rep->oom_note,
             "oom at event %" PRIu64 ": failed too, but released other memory than PyTorch did", oom_index);
}

static bool segment_equal(const grt_trace_segment *want, const grt_snapshot_segment *got, grt_devptr got_addr,
                          char *why, size_t cap) {
  if (got_addr != want->addr || got->total_size != want->total_size) {
    snprintf(why, cap, "segment 0x%" PRIx64 ": recorded %" PRIu64 " B, replay 0x%" PRIx64 " %" PRIu64 " B", want->addr,
             want->total_size, got_addr, got->total_size);
    return false;
  }
  if (got->pool_id.first != want->pool_id[0] || got->pool_id.second != want->pool_id[1]) {
    snprintf(why, cap, "segment 0x%" PRIx64 ": recorded in pool (%" PRIu64 ", %" PRIu64 "), replay in (%" PRIu64
             ", %" PRIu64 ")", want->addr, want->pool_id[0], want->pool_id[1], got->pool_id.first, got->pool_id.second);
    return false;
  }
  if (got->n_blocks != want->n_blocks) {
    snprintf(why, cap, "segment 0x%" PRIx64 ": recorded %zu blocks, replay %zu", want->addr, want->n_blocks,
             got->n_blocks);
    return false;
  }
  for (size_t j = 0; j < got->n_blocks; j++) {
    const grt_trace_block *w = &want->blocks[j];
    const grt_snapshot_block *g = &got->blocks[j];
    bool w_free = w->state == GRT_TRACE_BLOCK_INACTIVE, g_free = g->state == GRT_BLOCK_INACTIVE;
    if (g->size != w->size || w_free != g_free) {
      snprintf(why, cap, "segment 0x%" PRIx64 " block %zu: recorded %" PRIu64 " B %s, replay %" PRIu64 " B %s",
               want->addr, j, w->size, w_free ? "free" : "active", g->size, g_free ? "free" : "active");
      return false;
    }
  }
  return true;
}

static void compare_layout(grt_replay *r, const grt_trace_info *info, grt_fidelity_report *rep) {
  grt_alloc_snapshot *snap = NULL;
  rep->final_recorded = info->n_segments;
  if (grt_alloc_snapshot_take(r->alloc, &snap) != GRT_OK) return;
  rep->final_replayed = snap->n_segments;
  for (size_t i = 0; i < info->n_segments; i++) {
    const grt_trace_segment *w = &info->segments[i];
    const grt_snapshot_segment *hit = NULL;
    for (size_t j = 0; j < snap->n_segments && !hit; j++)
      if (grt__replay_to_recorded(r, snap->segments[j].address) == w->addr) hit = &snap->segments[j];
    char why[256];
    if (!hit) {
      snprintf(why, sizeof why, "segment 0x%" PRIx64 " (%" PRIu64 " B) is missing from the replay", w->addr,
               w->total_size);
    } else if (segment_equal(w, hit, grt__replay_to_recorded(r, hit->address), why, sizeof why)) {
      rep->final_matching++;
      continue;
    }
    if (!rep->layout_note[0]) snprintf(rep->layout_note, sizeof rep->layout_note, "%s", why);
  }
  grt_alloc_snapshot_free(snap);
}

/* The start state's figures, and the footprint scoring begins from. */
static grt_status take_start(fid *f, grt_replay *r, char *err, size_t err_size) {
  grt_alloc_snapshot *start = NULL;
  grt_status st = grt_alloc_snapshot_take(r->alloc, &start);
  if (st) {
    if (err) snprintf(err, err_size, "cannot take the start state's snapshot: %s", grt_status_str(st));
    return st;
  }
  f->rep->start_segments = start->n_segments;
  for (size_t i = 0; i < start->n_segments; i++)
    for (size_t j = 0; j < start->segments[i].n_blocks; j++)
      f->rep->start_blocks += start->segments[i].blocks[j].state != GRT_BLOCK_INACTIVE;
  grt_alloc_snapshot_free(start);
  grt_alloc_stats as;
  grt__ignore(grt_alloc_get_stats(r->alloc, &as)); /* an allocator and a buffer: it cannot fail */
  f->dev_alloc = as.num_device_alloc;
  f->dev_free = as.num_device_free;
  if ((st = grt__replay_footprint(r, f->expandable, &f->held)) && err)
    snprintf(err, err_size, "cannot list the start state's device ranges: %s", grt_status_str(st));
  return st;
}

/* A trace that starts with nothing on the device holds every allocation it
 * frees: a free of an unknown block contradicts the snapshot. */
static void find_contradictions(const grt_trace_info *in, grt_fidelity_report *rep) {
  if (rep->start_segments) return;
  for (size_t i = 0; i < in->n_events; i++) {
    const grt_trace_event *e = &in->events[i];
    if (e->kind != GRT_TRACE_FREE_COMPLETED || !(e->flags & GRT_TRACE_F_UNMATCHED)) continue;
    if (!rep->contradictions++)
      snprintf(rep->contradiction_note, sizeof rep->contradiction_note,
               "event %zu frees the block at 0x%" PRIx64 ", which was never allocated: the trace starts with "
               "nothing on the device",
               i, e->addr);
  }
}

static grt_status run_scored(grt_replay *r, fid *f, char *err, size_t err_size) {
  grt_fidelity_report *out = f->rep;
  r->on_alloc = on_alloc;
  r->on_release = on_release;
  r->on_oom = on_oom;
  r->hook_ctx = f;
  grt_status st = grt_replay_run(r);
  if (!st && f->failed) st = GRT_ERR_NOMEM;
  if (st) {
    if (err) snprintf(err, err_size, "%s", f->failed ? "no host memory to score the replay" : r->err);
    return st;
  }
  compare_layout(r, &r->info, out);
  out->final_layout_equal = out->final_matching == out->final_recorded && out->final_replayed == out->final_recorded;
  out->structure_ok = grt_alloc_check(r->alloc, out->structure_note, sizeof out->structure_note) == GRT_OK;
  find_contradictions(&r->info, out);
  return GRT_OK;
}

grt_status grt_replay_fidelity(const grt_trace *trace, grt_fidelity_report *out, char *err, size_t err_size) {
  if (!trace || !out) return GRT_ERR_INVALID_ARG;
  memset(out, 0, sizeof *out);
  if (err && err_size) err[0] = 0;
  grt_trace_info info;
  grt_status st = grt_trace_get_info(trace, &info);
  if (st) return st;
  if (!info.has_segments || !info.has_traces) {
    if (err)
      snprintf(err, err_size, "the snapshot has no %s: %s", info.has_segments ? "device_traces" : "segments",
               info.has_segments ? "it was taken without torch.cuda.memory._record_memory_history, so there are no "
                                   "events to replay"
                                 : "the final state to check the replay against is missing");
    return GRT_ERR_PARSE;
  }
  grt_replay_config c;
  grt_replay_config_default(&c);
  c.policy = "caching";
  c.placement = GRT_REPLAY_PLACE_RECORDED;
  grt_replay *r;
  st = grt_replay_open(trace, &c, &r);
  if (st) {
    if (err) snprintf(err, err_size, "cannot create the replay: %s", grt_status_str(st));
    return st;
  }
  fid f = {.rep = out, .info = &r->info};
  for (size_t i = 0; i < r->info.n_segments; i++) out->expandable |= r->info.segments[i].is_expandable;
  out->expandable |= r->info.settings.expandable_segments;
  f.expandable = out->expandable;
  if ((st = grt_replay_rebuild_start(r))) {
    if (err) snprintf(err, err_size, "%s", r->err);
  } else if (!(st = take_start(&f, r, err, err_size))) {
    st = run_scored(r, &f, err, err_size);
  }
  free(f.held.v);
  free(f.now.v);
  free(f.added.v);
  free(f.removed.v);
  free(f.want.v);
  grt__keep_first(&st, grt_replay_destroy(r));
  return st;
}
