/* gpurt/replay.h — replaying allocation traces through any allocator policy.
 *
 * A replay owns a device and an allocator (any policy grt_alloc_create knows)
 * and applies trace events to them one at a time:
 *   alloc            -> grt_alloc_malloc (the trace's stream value as the stream);
 *                       a failed malloc (GRT_ERR_OOM) is an OOM of the replay,
 *                       not an error: the allocation is skipped and so are its frees;
 *   free_completed   -> grt_alloc_free (PyTorch frees at completion);
 *   free_requested   -> nothing (statistics only in PyTorch);
 *   segment_alloc/map-> with recorded placement, the device's one-shot placement
 *                       hint is set to the recorded address, so the device malloc
 *                       the next alloc triggers lands where PyTorch's did;
 *   segment_free/unmap (the first of a run) and oom
 *                    -> grt_alloc_empty_cache (PyTorch ran release_cached_blocks);
 *   snapshot         -> nothing.
 * Frees of allocations made before the trace began are skipped and counted,
 * unless the starting state was rebuilt (grt_replay_rebuild_start), in which
 * case they free the imported block at the recorded address.
 *
 * Driving it: grt_replay_open() over a loaded trace, then grt_replay_step()
 * (one event; a metrics server can pace a replay and read grt_replay_sample()
 * between steps) or grt_replay_run(); or grt_replay_create() with no trace and
 * grt_replay_feed() per event (the streaming native reader does this in
 * grt_replay_stream_file(), whose memory follows the live allocations, not the
 * trace length, unless a series is recorded). The optional step callback runs
 * after every event.
 *
 * Thread safety: a grt_replay is single-threaded; the caller serializes calls.
 * grt_replay_stream_file starts one reader thread of its own for its duration.
 * Distinct replays share nothing.
 */
#ifndef GPURT_REPLAY_H
#define GPURT_REPLAY_H

#include <stdbool.h>

#include "gpurt/alloc.h"
#include "gpurt/trace.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct grt_replay grt_replay;

typedef enum grt_replay_placement {
  GRT_REPLAY_PLACE_AUTO = 0,  /* recorded when the policy is "caching" and the trace has addresses */
  GRT_REPLAY_PLACE_FIRST_FIT, /* the device's own first fit */
  GRT_REPLAY_PLACE_RECORDED,  /* segment_alloc/segment_map addresses as placement hints */
} grt_replay_placement;

/* One point of the per-step series (after an event). Bytes unless named. */
typedef struct grt_replay_sample {
  uint64_t reserved, allocated, requested, active, cached;
  uint64_t largest_free;  /* largest free block inside reserved memory */
  uint64_t live;          /* the trace's own live requested bytes (policy-independent) */
  uint64_t device_mallocs, device_frees; /* cumulative device calls */
  double fragmentation;   /* 1 - largest_free / cached (0 when nothing is cached) */
} grt_replay_sample;

/* Called after every event. A nonzero status stops the replay and is returned. */
typedef grt_status (*grt_replay_step_fn)(void *ctx, grt_replay *r, const grt_trace_event *ev, uint64_t index);

typedef struct grt_replay_config {
  const char *policy;         /* allocator policy; default "caching" */
  const char *alloc_conf;     /* PyTorch-style config string applied over the trace's settings; NULL: none */
  uint64_t capacity;          /* device bytes; 0 = automatic: covers recorded addresses (PyTorch) or 1 TiB */
  grt_devptr base_address;    /* device base; 0 = automatic */
  grt_replay_placement placement;
  grt_device_model device_model; /* the simulated device: contiguous (default) or paged (gpurt/device.h) */
  bool honor_releases;        /* default true: segment_free runs and oom events call empty_cache */
  bool record_series;         /* keep one grt_replay_sample per event */
  bool prefill_start;         /* grt_replay_min_capacity: each probe starts with grt_replay_prefill_start */
  grt_replay_step_fn on_step; /* may be NULL */
  void *step_ctx;
} grt_replay_config;

GRT_API void grt_replay_config_default(grt_replay_config *cfg);

typedef struct grt_replay_summary {
  uint64_t events;               /* events applied */
  uint64_t allocs, frees;        /* allocations attempted; frees applied */
  uint64_t unmatched_frees;      /* frees of allocations made before the trace (skipped) */
  uint64_t capacity;             /* device bytes */
  uint64_t peak_reserved, peak_allocated, peak_requested, peak_active;
  uint64_t peak_live;            /* peak of the trace's live requested bytes */
  uint64_t peak_reserved_event;  /* event index at the peak of reserved bytes */
  uint64_t peak_cached, peak_largest_free;
  double max_fragmentation;      /* over the steps (computed from the samples) */
  uint64_t final_reserved, final_allocated;
  uint64_t device_mallocs, device_frees; /* policy device calls during the replay */
  uint64_t syncs;                /* device-wide synchronizations (device frees and unmaps) */
  uint64_t num_alloc_retries;
  uint64_t ooms;                 /* allocations the replay could not serve */
  bool has_oom;
  uint64_t first_oom_event;      /* event index of the first OOM */
  uint64_t first_oom_size;       /* its requested bytes */
  uint64_t first_oom_live;       /* live requested bytes at that point */
  double first_oom_utilization;  /* first_oom_live / capacity */
  uint64_t releases;             /* recorded releases replayed: segment_free/unmap runs (also before an oom) */
  uint64_t recorded_ooms;        /* recorded oom events replayed (the request retried on a device capped at
                                    the recorded free memory; `ooms` counts those the model failed too) */
  uint64_t recorded_ooms_failed; /* of those, the ones the model failed too */
} grt_replay_summary;

/* A replay with no trace attached: feed events with grt_replay_feed. `info`
 * (may be NULL) supplies settings, segments and the id range of a loaded
 * trace; rebuild_start needs it. */
GRT_API GRT_MUST_CHECK grt_status grt_replay_create(const grt_replay_config *cfg, const grt_trace_info *info,
                                                    grt_replay **out);
/* A replay over a loaded trace (borrowed: it must outlive the replay). */
GRT_API GRT_MUST_CHECK grt_status grt_replay_open(const grt_trace *trace, const grt_replay_config *cfg,
                                                  grt_replay **out);
/* PyTorch snapshots, "caching" policy with recorded placement, before any
 * event: rebuilds the allocator state at the moment recording began (the
 * segments that already existed, at their recorded addresses, and the blocks
 * live then) from the trace's events and final segments. GRT_ERR_STATE after
 * events were applied; GRT_ERR_INVALID_ARG without a trace or recorded
 * placement; other errors leave the reason in grt_replay_last_error. */
GRT_API GRT_MUST_CHECK grt_status grt_replay_rebuild_start(grt_replay *r);
/* A loaded trace (PyTorch snapshots, or native traces carrying their frees
 * of earlier blocks and final segments), any policy, before any event: what-if replays under
 * another configuration cannot take over the recorded layout, so this
 * allocates every block that was live when recording began (the same blocks
 * the rebuild finds, at their requested sizes, in address order) under the
 * replay's own policy and configuration; the trace's frees of them then free
 * them. Their device calls are not counted as the replay's. GRT_ERR_STATE
 * after events were applied; GRT_ERR_INVALID_ARG without a trace. An
 * allocation the device cannot hold counts as an OOM. */
GRT_API GRT_MUST_CHECK grt_status grt_replay_prefill_start(grt_replay *r);
/* grt_replay_destroy(NULL) is a no-op. */
GRT_API GRT_MUST_CHECK grt_status grt_replay_destroy(grt_replay *r);

/* Applies one event. `stream` is the recorded stream value. A malformed
 * event (an alloc of a live id, a free the allocator refuses) returns
 * GRT_ERR_PARSE with the reason in grt_replay_last_error; the replay is
 * unchanged. An allocation the device cannot serve is an OOM, not an error. */
GRT_API GRT_MUST_CHECK grt_status grt_replay_feed(grt_replay *r, const grt_trace_event *ev, grt_stream_id stream);
/* Attached trace: applies the next event; *done is set once all were applied. */
GRT_API GRT_MUST_CHECK grt_status grt_replay_step(grt_replay *r, bool *done);
/* Attached trace: applies every remaining event. */
GRT_API GRT_MUST_CHECK grt_status grt_replay_run(grt_replay *r);

/* Replays a native trace file with the streaming reader (constant memory plus
 * the live allocations): a reader thread parses batches of events while the
 * calling thread replays them (and runs the step callback). err (may be
 * NULL) gets the line of a failure; when the replay itself fails, the file is
 * replayed again on one thread to find that line, so a step callback sees the
 * events before the failure twice. */
GRT_API GRT_MUST_CHECK grt_status grt_replay_stream_file(const char *path, const grt_replay_config *cfg,
                                                         grt_replay_summary *out,
                                                         grt_trace_error *err);

/* Feeds every event of the native trace file at path to r (from
 * grt_replay_create), on the calling thread, as the streaming reader parses
 * them: memory follows the live allocations, not the file. err (may be NULL)
 * gets the line of a failure and, when the replay refused the event, the
 * replay's reason. r stays valid either way: its allocator can be inspected
 * after the last event (or the failing one). */
GRT_API GRT_MUST_CHECK grt_status grt_replay_feed_native_file(grt_replay *r, const char *path, grt_trace_error *err);
/* The same over an open stream (read to its end, not closed) in a format
 * that streams: GRT_TRACE_FORMAT_NATIVE or GRT_TRACE_FORMAT_RMM (others:
 * GRT_ERR_UNSUPPORTED: a snapshot pickle or a minimalloc CSV is only
 * meaningful whole). name labels err. */
GRT_API GRT_MUST_CHECK grt_status grt_replay_feed_stream(grt_replay *r, FILE *f, grt_trace_format format,
                                                         const char *name, grt_trace_error *err);

GRT_API GRT_MUST_CHECK grt_status grt_replay_get_summary(const grt_replay *r, grt_replay_summary *out);
/* The state now (what the series would record after the last event). */
GRT_API GRT_MUST_CHECK grt_status grt_replay_sample_now(grt_replay *r, grt_replay_sample *out);
/* The recorded series (record_series); *n is 0 otherwise. Valid until the next feed/step. */
GRT_API GRT_MUST_CHECK grt_status grt_replay_series(const grt_replay *r, const grt_replay_sample **samples, size_t *n);
/* Events applied so far. */
GRT_API uint64_t grt_replay_position(const grt_replay *r);
/* The replay's allocator and device (owned by the replay). */
GRT_API grt_allocator *grt_replay_allocator(grt_replay *r);
/* The recorded stack (grt_trace_stack) of what the replay's allocator holds
 * at a model address: the live block there (its alloc event's stack, or for
 * a block live since before recording the final snapshot's) or, with
 * segment, the segment there (its device allocation's). 0 when none is
 * known: no trace attached, no frames recorded, nothing there. The first
 * call after events were applied indexes them (one pass over the events). */
GRT_API GRT_MUST_CHECK grt_status grt_replay_stack_at(grt_replay *r, grt_devptr address, bool segment,
                                                      uint32_t *stack);
GRT_API grt_device *grt_replay_device(grt_replay *r);
/* The last error's text, with the event index ("" if none). */
GRT_API const char *grt_replay_last_error(const grt_replay *r);

/* The smallest device capacity (to `granularity` bytes; 0 = automatic,
 * peak live / 1024 rounded up to 512 B) on which the trace replays with zero OOMs,
 * found by doubling then bisection with a fresh device and allocator each
 * time (first-fit placement, no start-state rebuild, no series, no callback).
 * *peak_live gets the trace's peak live bytes (may be NULL). */
GRT_API GRT_MUST_CHECK grt_status grt_replay_min_capacity(const grt_trace *trace, const grt_replay_config *cfg,
                                                          uint64_t granularity,
                                                          uint64_t *capacity, uint64_t *peak_live);

/* ---- fidelity: does the faithful model place every allocation where PyTorch did? ---- */

#define GRT_FIDELITY_MAX_SHOWN 8

typedef struct grt_fidelity_divergence {
  uint64_t event;         /* index of the alloc event */
  uint64_t size;          /* requested bytes */
  grt_stream_id stream;
  grt_devptr recorded;    /* where PyTorch placed it */
  grt_devptr replayed;    /* where the replay placed it (0: the replay could not serve it) */
  char context[320];      /* what the replay had at the recorded address, and the event before */
} grt_fidelity_divergence;

typedef struct grt_fidelity_report {
  uint64_t allocs;        /* alloc events with a recorded address (M) */
  uint64_t exact;         /* placed at exactly the recorded address (N) */
  uint64_t divergences;   /* allocs - exact */
  grt_fidelity_divergence shown[GRT_FIDELITY_MAX_SHOWN]; /* the first divergences */
  size_t n_shown;
  size_t start_segments, start_blocks; /* the rebuilt starting state */
  /* Segment decisions: each recorded segment_alloc/segment_map is one, and so
   * is each event where the model alone made one; one agrees when the model
   * made a device range appear at the same event covering the same bytes. */
  uint64_t segment_decisions, segment_decisions_agree;
  char decision_note[256];
  /* Releases: runs of segment_free/segment_unmap (also those before an oom);
   * one agrees when the model released exactly the same bytes at the same
   * event (a release that freed or unmapped nothing does not). */
  uint64_t releases;
  uint64_t releases_matching;
  char release_note[256]; /* the first release that differed */
  /* OOMs: recorded oom events; one agrees when the model, on a device capped
   * at the recorded free memory, failed the request too, releasing what
   * PyTorch released. */
  uint64_t ooms_recorded, ooms_agree;
  char oom_note[256];
  /* Events that contradict the snapshot (a free of a block neither live at
   * the start nor allocated in a trace that starts empty). */
  uint64_t contradictions;
  char contradiction_note[256];
  size_t final_recorded, final_replayed; /* segments in the snapshot / in the replay at the end */
  size_t final_matching;  /* same address, size and blocks (address, size, state) */
  bool final_layout_equal; /* every recorded segment matched and the replay has no other */
  char layout_note[256];  /* the first final segment that differed */
  bool expandable;        /* the trace used expandable segments */
  bool structure_ok;      /* grt_alloc_check passed on the replay's final state */
  char structure_note[256]; /* its first violation otherwise */
} grt_fidelity_report;

/* Replays a PyTorch snapshot with the faithful caching policy on a device
 * handing out the recorded segment addresses, from the rebuilt starting
 * state, and scores it. On failure (e.g. the starting state cannot be
 * rebuilt) err (may be NULL) gets the reason. */
GRT_API GRT_MUST_CHECK grt_status grt_replay_fidelity(const grt_trace *trace, grt_fidelity_report *out, char *err,
                                                      size_t err_size);

#ifdef __cplusplus
}
#endif
#endif /* GPURT_REPLAY_H */
