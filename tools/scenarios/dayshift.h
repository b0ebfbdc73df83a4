/* dayshift.h — the built-in serving day (demo and test workload, not installed).
 *
 * Used by `gpurt stats --workload dayshift`, `gpurt serve-demo` and the
 * report tests. Not thread-safe: one thread drives a day.
 */
#ifndef GRT_SCENARIOS_DAYSHIFT_H
#define GRT_SCENARIOS_DAYSHIFT_H

#include "gpurt/report.h"

/* The built-in "serving day" (dayshift): a caching allocator on a device with
 * little headroom, warmed once with one big segment, then steady load whose
 * request sizes drift upward while a few requests live long (a resident
 * model, a stuck request's KV). Reserved stays flat, allocated stays flat,
 * the largest free block sinks; the last event is the day-3 request that
 * OOMs with most of the cache free. Deterministic for a given seed. */
typedef struct grt_dayshift grt_dayshift;

typedef struct grt_dayshift_config {
  uint64_t seed;       /* default 1 */
  uint64_t events;     /* length of the day in events (mallocs + frees), >= 100; default 20000 */
  uint64_t reserve;    /* bytes held from the device at warm-up; default 512 MiB */
  uint64_t headroom;   /* device bytes beyond reserve; default 64 MiB */
  double load;         /* target allocated / reserve; default 0.55 */
} grt_dayshift_config;

void grt_dayshift_config_default(grt_dayshift_config *cfg);

/* Creates the device, the caching allocator and the day's schedule (owned by the workload). */
grt_status grt_dayshift_create(const grt_dayshift_config *cfg, grt_dayshift **out);
/* Frees the blocks still live, the allocator and the device. NULL is a no-op. */
grt_status grt_dayshift_destroy(grt_dayshift *w);
/* The workload's allocator and device (owned by it; valid until destroy). */
grt_allocator *grt_dayshift_allocator(grt_dayshift *w);
grt_device *grt_dayshift_device(grt_dayshift *w);
/* The next event (see grt_step_source): GRT_ERR_NOT_FOUND once the day is over.
 * The final request's expected OOM counts as an event, not a failure. */
grt_status grt_dayshift_step(grt_dayshift *w);
/* A step source over the workload, for grt_pace_run. */
grt_step_source grt_dayshift_source(grt_dayshift *w);
/* Events done so far. */
uint64_t grt_dayshift_events_done(const grt_dayshift *w);

#endif
