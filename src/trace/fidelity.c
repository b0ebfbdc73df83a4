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

static void on_alloc(void *ctx, grt_replay *r, const grt_trace_event *ev, uint64_t index, grt_devptr got,
                     grt_status st) {
  fid *f = ctx;
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

static int cmp_addr(const void *a, const void *b) {
  grt_devptr x = *(const grt_devptr *)a, y = *(const grt_devptr *)b;
  return x < y ? -1 : x > y;
}

static void on_release(void *ctx, grt_replay *r, uint64_t index, const grt_devptr *released, size_t n) {
  fid *f = ctx;
  grt_fidelity_report *rep = f->rep;
  rep->releases++;
  size_t n_rec = 0;
  for (size_t i = index; i < f->info->n_events; i++) {
    grt_trace_kind k = (grt_trace_kind)f->info->events[i].kind;
    if (k != GRT_TRACE_SEGMENT_FREE && k != GRT_TRACE_SEGMENT_UNMAP) break;
    n_rec++;
  }
  grt_devptr *rec = calloc(n_rec + 1, sizeof *rec), *got = calloc(n + 1, sizeof *got);
  if (!rec || !got) {
    free(rec);
    free(got);
    return;
  }
  for (size_t i = 0; i < n_rec; i++) rec[i] = f->info->events[index + i].addr;
  for (size_t i = 0; i < n; i++) got[i] = grt__replay_to_recorded(r, released[i]);
  qsort(rec, n_rec, sizeof *rec, cmp_addr);
  qsort(got, n, sizeof *got, cmp_addr);
  bool same = n == n_rec && !memcmp(rec, got, n * sizeof *rec);
  /* an expandable release unmaps page ranges: the device sees no segment frees; count by number */
  if (same || (rep->expandable && n == 0))
    rep->releases_matching++;
  else if (!rep->release_note[0])
    snprintf(rep->release_note, sizeof rep->release_note,
             "release at event %" PRIu64 ": recorded %zu segment frees, the replay freed %zu", index, n_rec, n);
  free(rec);
  free(got);
}

static bool segment_equal(const grt_trace_segment *want, const grt_snapshot_segment *got, grt_devptr got_addr,
                          char *why, size_t cap) {
  if (got_addr != want->addr || got->total_size != want->total_size) {
    snprintf(why, cap, "segment 0x%" PRIx64 ": recorded %" PRIu64 " B, replay 0x%" PRIx64 " %" PRIu64 " B", want->addr,
             want->total_size, got_addr, got->total_size);
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

grt_status grt_replay_fidelity(const grt_trace *trace, grt_fidelity_report *out, char *err, size_t err_size) {
  if (!trace || !out) return GRT_ERR_INVALID_ARG;
  memset(out, 0, sizeof *out);
  if (err && err_size) err[0] = 0;
  grt_replay_config c;
  grt_replay_config_default(&c);
  c.policy = "caching";
  c.placement = GRT_REPLAY_PLACE_RECORDED;
  grt_replay *r;
  grt_status st = grt_replay_open(trace, &c, &r);
  if (st) {
    if (err) snprintf(err, err_size, "cannot create the replay: %s", grt_status_str(st));
    return st;
  }
  fid f = {out, &r->info};
  for (size_t i = 0; i < r->info.n_segments; i++) out->expandable |= r->info.segments[i].is_expandable;
  out->expandable |= r->info.settings.expandable_segments;
  if ((st = grt_replay_rebuild_start(r))) {
    if (err) snprintf(err, err_size, "%s", r->err);
    grt__keep_first(&st, grt_replay_destroy(r));
    return st;
  }
  grt_alloc_snapshot *start = NULL;
  if ((st = grt_alloc_snapshot_take(r->alloc, &start))) {
    if (err) snprintf(err, err_size, "cannot take the start state's snapshot: %s", grt_status_str(st));
    grt__keep_first(&st, grt_replay_destroy(r));
    return st;
  }
  out->start_segments = start->n_segments;
  for (size_t i = 0; i < start->n_segments; i++)
    for (size_t j = 0; j < start->segments[i].n_blocks; j++)
      out->start_blocks += start->segments[i].blocks[j].state != GRT_BLOCK_INACTIVE;
  grt_alloc_snapshot_free(start);
  r->on_alloc = on_alloc;
  r->on_release = on_release;
  r->hook_ctx = &f;
  st = grt_replay_run(r);
  if (st) {
    if (err) snprintf(err, err_size, "%s", r->err);
  } else {
    compare_layout(r, &r->info, out);
    out->structure_ok = grt_alloc_check(r->alloc, out->structure_note, sizeof out->structure_note) == GRT_OK;
  }
  grt__keep_first(&st, grt_replay_destroy(r));
  return st;
}
