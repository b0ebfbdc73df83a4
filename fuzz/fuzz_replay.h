/* fuzz_replay.h — the reader harnesses' second half: a trace that loaded is
 * replayed, so that whatever a reader accepts (any stream id, size and
 * address it can express) reaches the replayer and the allocators.
 *
 * Two replays per input: the caching policy (the faithful model: recorded
 * placement and the rebuilt starting state for PyTorch snapshots, and the
 * fidelity scoring there), then one other policy, chosen by a byte of the
 * input with the device capacity and model; a native input is replayed a
 * third time as the streaming reader parses it, with the file's own ids. Capacities are small, so OOMs,
 * retries and releases run too. The oracle, any violation of which aborts:
 *   - grt_replay_open succeeds, or fails for lack of host memory only;
 *   - a replay that fails returns a status its contract names (GRT_ERR_PARSE
 *     for an event the replay refuses, GRT_ERR_NOMEM) and says why; a
 *     rebuild of the starting state, or a fidelity run, that fails says why
 *     and is no internal error;
 *   - the summary agrees with the trace (every event applied on success, no
 *     more allocs than alloc events);
 *   - the allocator's snapshot tiles its segments and the recorded stacks
 *     of what it holds are the trace's; the recorded run's own figures
 *     (grt_trace_recorded_figures) are computed without overflow (UBSan);
 *   - grt_alloc_check passes on the replay's allocator at the end, whether
 *     the run succeeded or stopped, and the replay is destroyed cleanly (the
 *     device holds nothing afterwards; LSan finds what leaks).
 * A replay is deterministic: no threads, no clock, fixed seeds.
 * Traces above GRT_FUZZ_REPLAY_MAX_EVENTS events are loaded and round-tripped
 * but not replayed: the fuzzer's inputs are short, and a long replay would
 * cost more executions than the rare input it covers is worth.
 */
#ifndef GRT_FUZZ_REPLAY_H
#define GRT_FUZZ_REPLAY_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpurt/replay.h"

#ifndef GRT_FUZZ_REPLAY_MAX_EVENTS /* -D to trade depth for executions per second */
#define GRT_FUZZ_REPLAY_MAX_EVENTS 256
#endif

#define GRT_FUZZ_FAIL(...)                                  \
  do {                                                      \
    fprintf(stderr, "fuzz replay: " __VA_ARGS__);           \
    fprintf(stderr, " (%s:%d)\n", __FILE__, __LINE__);      \
    abort();                                                \
  } while (0)

/* Statuses a failed replay step may return: a refused event, host memory. */
static inline int grt_fuzz_replay_allowed(grt_status st) { return st == GRT_ERR_PARSE || st == GRT_ERR_NOMEM; }

/* A failed rebuild names its reason; the status is the step's that failed,
 * never one that blames the call (the replay was fresh, placement recorded). */
static inline int grt_fuzz_rebuild_allowed(grt_status st) {
  return st != GRT_ERR_INTERNAL && st != GRT_ERR_STATE && st != GRT_ERR_INVALID_ARG;
}

static inline void grt_fuzz_replay_check(grt_replay *r, const char *what) {
  char msg[256] = "";
  grt_allocator *a = grt_replay_allocator(r);
  if (!a) GRT_FUZZ_FAIL("%s: the replay has no allocator", what);
  if (grt_alloc_check(a, msg, sizeof msg) != GRT_OK) GRT_FUZZ_FAIL("%s: invariant violated: %s", what, msg);
}

/* What stats and the reports read of a replay's end: the allocator's
 * snapshot (its blocks tile each segment, as gpurt/alloc.h promises every
 * policy) and the recorded stacks of what it holds. */
static inline void grt_fuzz_replay_inspect(grt_replay *r, const grt_trace_info *info, const char *what) {
  grt_alloc_snapshot *snap = NULL;
  grt_status st = grt_alloc_snapshot_take(grt_replay_allocator(r), &snap);
  if (st == GRT_ERR_NOMEM) return;
  if (st != GRT_OK) GRT_FUZZ_FAIL("%s: snapshot: %s", what, grt_status_name(st));
  for (size_t i = 0; i < snap->n_segments; i++) {
    const grt_snapshot_segment *g = &snap->segments[i];
    grt_devptr at = g->address;
    for (size_t j = 0; j < g->n_blocks; j++) {
      if (g->blocks[j].address != at) GRT_FUZZ_FAIL("%s: snapshot blocks do not tile 0x%llx", what, (unsigned long long)g->address);
      at += g->blocks[j].size;
    }
    if (g->n_blocks && at != g->address + g->total_size) GRT_FUZZ_FAIL("%s: snapshot blocks stop short of the end of 0x%llx", what, (unsigned long long)g->address);
    if (g->allocated_size > g->total_size) GRT_FUZZ_FAIL("%s: segment 0x%llx allocates more than it holds", what, (unsigned long long)g->address);
    uint32_t stack = UINT32_MAX;
    for (int seg = 0; seg < 2 && i < 8; seg++) {
      st = grt_replay_stack_at(r, g->n_blocks ? g->blocks[0].address : g->address, seg, &stack);
      if (st == GRT_ERR_NOMEM) continue;
      if (st != GRT_OK || stack > info->n_stacks) GRT_FUZZ_FAIL("%s: stack_at: %s, stack %u", what, grt_status_name(st), stack);
    }
  }
  grt_alloc_snapshot_free(snap);
}

static inline void grt_fuzz_replay_summary(grt_replay *r, const grt_trace_info *info, grt_status st, const char *what) {
  grt_replay_summary s;
  if (grt_replay_get_summary(r, &s) != GRT_OK) GRT_FUZZ_FAIL("%s: summary", what);
  if (s.allocs > info->count[GRT_TRACE_ALLOC]) GRT_FUZZ_FAIL("%s: more allocs than alloc events", what);
  if (st == GRT_OK && s.events != info->n_events)
    GRT_FUZZ_FAIL("%s: %llu of %zu events applied", what, (unsigned long long)s.events, info->n_events);
  if (s.ooms > s.allocs + info->count[GRT_TRACE_OOM]) GRT_FUZZ_FAIL("%s: more OOMs than allocations", what);
}

/* One replay of t under cfg (rebuilt from the snapshot's start when rebuild). */
static inline void grt_fuzz_replay_one(const grt_trace *t, const grt_trace_info *info, const grt_replay_config *cfg,
                                       int rebuild, const char *what) {
  grt_replay *r = NULL;
  grt_status st = grt_replay_open(t, cfg, &r);
  if (st == GRT_ERR_NOMEM && !r) return;
  if (st != GRT_OK || !r) GRT_FUZZ_FAIL("%s: open: %s", what, grt_status_name(st));
  if (rebuild && (st = grt_replay_rebuild_start(r)) != GRT_OK) {
    if (!grt_fuzz_rebuild_allowed(st)) GRT_FUZZ_FAIL("%s: rebuild_start: %s (%s)", what, grt_status_name(st), grt_replay_last_error(r));
    if (!grt_replay_last_error(r)[0]) GRT_FUZZ_FAIL("%s: rebuild_start failed (%s) without a reason", what, grt_status_name(st));
  } else {
    st = grt_replay_run(r);
    if (st != GRT_OK && !grt_fuzz_replay_allowed(st)) GRT_FUZZ_FAIL("%s: run: %s (%s)", what, grt_status_name(st), grt_replay_last_error(r));
    if (st != GRT_OK && !grt_replay_last_error(r)[0]) GRT_FUZZ_FAIL("%s: run failed (%s) without a reason", what, grt_status_name(st));
    grt_fuzz_replay_summary(r, info, st, what);
    grt_fuzz_replay_inspect(r, info, what);
  }
  grt_fuzz_replay_check(r, what);
  st = grt_replay_destroy(r);
  if (st != GRT_OK) GRT_FUZZ_FAIL("%s: destroy: %s", what, grt_status_name(st));
}

static inline void grt_fuzz_fidelity(const grt_trace *t) {
  grt_fidelity_report rep;
  char err[256] = "";
  grt_status st = grt_replay_fidelity(t, &rep, err, sizeof err);
  if (st == GRT_OK) {
    if (rep.exact > rep.allocs || rep.divergences != rep.allocs - rep.exact || rep.n_shown > GRT_FIDELITY_MAX_SHOWN)
      GRT_FUZZ_FAIL("fidelity: the counts do not add up");
    if (!rep.structure_ok) GRT_FUZZ_FAIL("fidelity: invariant violated: %s", rep.structure_note);
    return;
  }
  if (!grt_fuzz_rebuild_allowed(st)) GRT_FUZZ_FAIL("fidelity: %s (%s)", grt_status_name(st), err);
  if (!err[0]) GRT_FUZZ_FAIL("fidelity failed (%s) without a reason", grt_status_name(st));
}

/* Whether the automatic capacity (twice the recorded addresses' span, for
 * PyTorch snapshots) stays small enough to replay fast: expandable segments
 * reserve 9/8 of the device and map it page by page when a request cannot
 * fit, so a snapshot with addresses 2^50 apart would cost minutes, not the
 * milliseconds of everything else here. */
static inline int grt_fuzz_span_small(const grt_trace_info *info) { /* at most 256 MiB: a 1 GiB device */
  uint64_t lo = UINT64_MAX, hi = 0;
  for (size_t i = 0; i < info->n_segments; i++) {
    uint64_t a = info->segments[i].addr, n = info->segments[i].total_size;
    if (!a) continue;
    if (a < lo) lo = a;
    if (n > UINT64_MAX - a || a + n > hi) hi = n > UINT64_MAX - a ? UINT64_MAX : a + n;
  }
  for (size_t i = 0; i < info->n_events; i++) {
    const grt_trace_event *e = &info->events[i];
    if (!(e->flags & GRT_TRACE_F_ADDR) || e->kind == GRT_TRACE_OOM || !e->addr) continue;
    if (e->addr < lo) lo = e->addr;
    if (e->size > UINT64_MAX - e->addr || e->addr + e->size > hi) hi = e->size > UINT64_MAX - e->addr ? UINT64_MAX : e->addr + e->size;
  }
  return hi <= lo || hi - lo <= ((uint64_t)256 << 20);
}

/* The cheap policies besides caching (every one replays any trace). */
static const char *const grt_fuzz_policies[] = {"naive", "bestfit", "bump", "buddy", "slab", "async", "sharded"};
#define GRT_FUZZ_N_POLICIES (sizeof grt_fuzz_policies / sizeof *grt_fuzz_policies)

/* A native or RMM input fed to a replay as the streaming reader parses it
 * (what `gpurt replay` and `stats` do with a big file or a pipe): the file's own ids, any
 * 64-bit value, name the live allocations, not the dense ids of a loaded
 * trace. It fails, if at all, as a refused line or event (GRT_ERR_PARSE) or
 * for host memory, with a reason. */
static inline grt_status grt_fuzz_feed(void *ctx, const grt_trace_event *ev, grt_stream_id stream) {
  return grt_replay_feed(ctx, ev, stream);
}

static inline void grt_fuzz_stream_replay(const unsigned char *data, size_t size, unsigned pick, grt_trace_format fmt,
                                          size_t n_events) {
  FILE *f = size ? fmemopen((void *)data, size, "r") : NULL;
  if (!f) return;
  grt_replay_config cfg;
  grt_replay_config_default(&cfg);
  cfg.policy = pick & 1 ? "caching" : grt_fuzz_policies[(pick >> 1) % GRT_FUZZ_N_POLICIES];
  cfg.capacity = (uint64_t)16 << 20;
  grt_replay *r = NULL;
  grt_status st = grt_replay_create(&cfg, NULL, &r);
  if (st != GRT_OK) GRT_FUZZ_FAIL("stream: create: %s", grt_status_name(st));
  grt_trace_error err;
  st = fmt == GRT_TRACE_FORMAT_RMM ? grt_trace_read_rmm_stream_file(f, "fuzz", grt_fuzz_feed, r, &err)
                                   : grt_trace_read_native_stream_file(f, "fuzz", grt_fuzz_feed, r, &err);
  fclose(f);
  const char *why = grt_replay_last_error(r)[0] ? grt_replay_last_error(r) : err.reason; /* the replay's, or the reader's */
  if (st != GRT_OK && !grt_fuzz_replay_allowed(st)) GRT_FUZZ_FAIL("stream: %s (%s)", grt_status_name(st), why);
  if (st != GRT_OK && !why[0]) GRT_FUZZ_FAIL("stream: failed (%s) without a reason", grt_status_name(st));
  /* a row the whole reader took is one the streaming reader takes, event for event */
  if (fmt == GRT_TRACE_FORMAT_RMM && (st != GRT_OK || grt_replay_position(r) != n_events))
    GRT_FUZZ_FAIL("stream: RMM input loaded whole (%zu events) but streamed %llu: %s (%s)", n_events,
                  (unsigned long long)grt_replay_position(r), grt_status_name(st), why);
  grt_fuzz_replay_check(r, "stream");
  if ((st = grt_replay_destroy(r)) != GRT_OK) GRT_FUZZ_FAIL("stream: destroy: %s", grt_status_name(st));
}

/* Replays a loaded trace; pick (a byte of the input) varies the second replay. */
static inline void grt_fuzz_replay(const grt_trace *t, unsigned pick) {
  /* 0: automatic (PyTorch: the recorded span; others would get 1 TiB, which 64 MiB stands for).
   * Small devices: with expandable segments an OOM maps every free 2 MiB
   * page before it gives up, so a replay costs about capacity / 2 MiB device
   * calls per OOM; the inputs' sizes are arbitrary, so most of them OOM. */
  static const uint64_t capacities[] = {(uint64_t)4 << 20, (uint64_t)16 << 20, (uint64_t)64 << 20, 0};
  grt_trace_info info;
  if (grt_trace_get_info(t, &info) != GRT_OK) GRT_FUZZ_FAIL("info");
  grt_trace_recorded rec; /* what a snapshot itself shows (replay, doctor, diff print it) */
  if (grt_trace_recorded_figures(t, &rec) != GRT_OK) GRT_FUZZ_FAIL("recorded figures");
  if (rec.reserved_peak < rec.reserved_start || rec.requested_peak < rec.requested_start)
    GRT_FUZZ_FAIL("recorded figures: a peak below the start");
  if (info.n_events > GRT_FUZZ_REPLAY_MAX_EVENTS) return;
  int pytorch = info.format == GRT_TRACE_FORMAT_PYTORCH, small = grt_fuzz_span_small(&info);
  grt_replay_config cfg;
  grt_replay_config_default(&cfg);
  cfg.capacity = capacities[pick & 3];
  if (!cfg.capacity && (!pytorch || !small)) cfg.capacity = (uint64_t)64 << 20;
  /* the recorded start needs room for the recorded segments: only on the automatic capacity */
  grt_fuzz_replay_one(t, &info, &cfg, pytorch && !cfg.capacity, "caching");
  if (pytorch && small && info.n_events) grt_fuzz_fidelity(t);
  grt_replay_config_default(&cfg);
  cfg.policy = grt_fuzz_policies[(pick >> 2) % GRT_FUZZ_N_POLICIES];
  cfg.capacity = capacities[(pick >> 5) & 1];
  cfg.device_model = pick & 0x40 ? GRT_DEVICE_MODEL_PAGED : GRT_DEVICE_MODEL_CONTIGUOUS;
  cfg.honor_releases = !(pick & 0x80);
  grt_fuzz_replay_one(t, &info, &cfg, 0, cfg.policy);
}

#endif
