/* gpurt/report.h — observability: Prometheus text, PyTorch-shaped JSON,
 * torch.cuda.memory_summary(), and a paced demo workload to watch them move.
 *
 * Everything here only reads allocators and devices through their public
 * calls (grt_alloc_get_stats and grt_alloc_snapshot_take copy under the
 * allocator's lock, briefly), so reporting never blocks an allocator for
 * longer than one copy. Writers produce malloc'ed NUL-terminated text that the
 * caller releases with grt_report_free(). The library stays dependency-free:
 * the HTTP endpoint lives in the separate gpurt_serve library (gpurt/serve.h).
 *
 * Thread safety: a grt_metrics registry is safe to use from several threads
 * (its own mutex guards the list of sources; rendering holds it, then takes
 * each allocator's lock in turn: lock order registry -> allocator -> device).
 * The pure writers (grt_stats_json, grt_snapshot_json, grt_memory_summary)
 * are thread-safe.
 */
#ifndef GPURT_REPORT_H
#define GPURT_REPORT_H

#include <signal.h>

#include "gpurt/alloc.h"
#include "gpurt/base.h"
#include "gpurt/device.h"
#include "gpurt/trace.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Releases text returned by any writer below. NULL is a no-op. */
GRT_API void grt_report_free(char *text);

/* ---- free space per pool (what PyTorch does not export) ---- */

typedef struct grt_free_space {
  /* indexed GRT_STAT_ALL / GRT_STAT_SMALL_POOL / GRT_STAT_LARGE_POOL */
  uint64_t largest[GRT_STAT_TYPES];  /* bytes: largest inactive block */
  uint64_t inactive[GRT_STAT_TYPES]; /* bytes: sum of inactive (free, cached) blocks */
  uint64_t pending[GRT_STAT_TYPES];  /* bytes: blocks freed but waiting on stream events */
} grt_free_space;

/* Sums a snapshot's inactive blocks per pool. */
GRT_API GRT_MUST_CHECK grt_status grt_free_space_of(const grt_alloc_snapshot *snap, grt_free_space *out);

/* 1 - largest / free_bytes, in [0, 1]; 0 when free_bytes is 0. 0 means the
 * free cache is one block; near 1 means it is dust no large request can use. */
GRT_API double grt_fragmentation_ratio(uint64_t largest, uint64_t free_bytes);

/* ---- the metrics registry (Prometheus text exposition format 0.0.4) ---- */

typedef struct grt_metrics grt_metrics;

GRT_API GRT_MUST_CHECK grt_status grt_metrics_create(grt_metrics **out);
/* Frees the registry (not the sources: they are borrowed). destroy(NULL) is a no-op. */
GRT_API GRT_MUST_CHECK grt_status grt_metrics_destroy(grt_metrics *m);

/* Adds an allocator (borrowed: remove it before destroying it). name becomes
 * the `allocator` label (NULL: the policy name), device the `device` label
 * (NULL: "0"). Segregated per-purpose pools (weights, activations, KV) are one
 * allocator each, added under their purpose's name. Labels are copied.
 * GRT_ERR_STATE when the allocator, or the (allocator, device) label pair, is
 * already registered. */
GRT_API GRT_MUST_CHECK grt_status grt_metrics_add_allocator(grt_metrics *m, grt_allocator *a, const char *name,
                                                            const char *device);
/* GRT_ERR_NOT_FOUND when a is not registered. */
GRT_API GRT_MUST_CHECK grt_status grt_metrics_remove_allocator(grt_metrics *m, grt_allocator *a);

/* Adds a device (borrowed) under the `device` label (NULL: "0"). */
GRT_API GRT_MUST_CHECK grt_status grt_metrics_add_device(grt_metrics *m, grt_device *d, const char *device);
GRT_API GRT_MUST_CHECK grt_status grt_metrics_remove_device(grt_metrics *m, grt_device *d);

/* Renders every source as Prometheus text (HELP and TYPE for each family,
 * gauges and `_total` counters, labels device/allocator/pool). *out is
 * malloc'ed (grt_report_free); *len (may be NULL) receives its length. */
GRT_API GRT_MUST_CHECK grt_status grt_metrics_render(grt_metrics *m, char **out, size_t *len);

/* ---- JSON in PyTorch's shapes ---- */

/* torch.cuda.memory_stats(): one flat object, keys sorted, e.g.
 * "allocated_bytes.all.current", "num_ooms", "max_split_size"; plus gpurt's
 * extras ("cached_bytes", "largest_free_block", "num_cache_hits",
 * "cross_stream_syncs", "pending_free_blocks"). */
GRT_API GRT_MUST_CHECK grt_status grt_stats_json(const grt_alloc_stats *s, char **out);

/* torch.cuda.memory._snapshot(): {"segments": [...], "device_traces": [[]]}
 * with each segment's device, address, total_size, allocated_size,
 * active_size, requested_size, stream, segment_type, segment_pool_id,
 * is_expandable, frames and blocks [{address, size, requested_size, state,
 * frames}]. device is the `device` index written into each segment (>= 0). */
GRT_API GRT_MUST_CHECK grt_status grt_snapshot_json(const grt_alloc_snapshot *snap, int device, char **out);

/* Where a written snapshot's frames come from: the frames (innermost first,
 * as PyTorch records them) of the block or, with segment, the segment at a
 * snapshot address; *n = 0 for none. A failure stops the writer and is
 * returned. */
typedef struct grt_snapshot_frames {
  grt_status (*frames_at)(void *ctx, grt_devptr address, bool segment, const grt_trace_frame **frames, size_t *n);
  void *ctx;
} grt_snapshot_frames;

/* grt_snapshot_json with every segment's and block's "frames" from fr
 * ({"filename", "line", "name"} each, as memory._snapshot() writes them);
 * fr NULL: empty lists. */
GRT_API GRT_MUST_CHECK grt_status grt_snapshot_json_frames(const grt_alloc_snapshot *snap, int device,
                                                           const grt_snapshot_frames *fr, char **out);

/* torch.cuda.memory_summary(device, abbreviated): the same 75-column table,
 * plus a line PyTorch lacks: largest free block, free cache and fragmentation
 * (free may be NULL: the line then shows stats->largest_free_block only). */
GRT_API GRT_MUST_CHECK grt_status grt_memory_summary(const grt_alloc_stats *s, const grt_free_space *free, int device,
                                                     int abbreviated, char **out);

/* ---- a paced, steppable workload ---- */

/* One step = one allocator event (a malloc or a free). A trace replayer is a
 * workload too: anything with a step function plugs into grt_pace_run. */
typedef struct grt_step_source {
  void *ctx;
  /* Performs the next event. Returns GRT_OK after an event, GRT_ERR_NOT_FOUND
   * when there is none left, another status on failure (the run stops). */
  grt_status (*step)(void *ctx);
} grt_step_source;

typedef struct grt_pace_config {
  double rate;          /* events per second; 0 = as fast as possible */
  uint64_t max_events;  /* stop after this many events; 0 = until the source ends */
  const volatile sig_atomic_t *stop; /* optional: the run stops once *stop is nonzero (set it from a signal handler) */
  /* optional: called after every event (the server needs nothing: it reads live) */
  void (*after_step)(void *ctx, uint64_t events_done);
  void *after_ctx;
} grt_pace_config;

GRT_API void grt_pace_config_default(grt_pace_config *cfg);

/* Runs src at cfg->rate until it ends, max_events or *stop. *events (may be
 * NULL) receives the number of events done. GRT_OK when the source ended or a
 * limit was reached; the source's status otherwise. Sleeps between events on
 * an absolute schedule, so the average pace holds even when steps vary. */
GRT_API GRT_MUST_CHECK grt_status grt_pace_run(const grt_step_source *src, const grt_pace_config *cfg,
                                               uint64_t *events);

#ifdef __cplusplus
}
#endif
#endif /* GPURT_REPORT_H */
