/* gpurt/html.h — a self-contained HTML report of trace replays.
 *
 * One page, no network: hand-written SVG inside one HTML file. For each trace
 * it plots reserved bytes, allocated bytes and the largest free block per
 * policy over the events, draws segment maps (each segment a bar of its
 * blocks, coloured by state) at the peak of reserved memory and at the first
 * OOM, and closes with the summary table. A few lines of inline script count
 * the drawn plot lines into <body data-plots-drawn="N"> so a headless browser
 * can check that the plots rendered.
 *
 * Thread safety: pure functions of their arguments.
 */
#ifndef GPURT_HTML_H
#define GPURT_HTML_H

#include <stdio.h>

#include "gpurt/replay.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct grt_html_run {
  const char *trace;                  /* trace name (runs of one trace share a plot) */
  const char *policy;
  const grt_replay_summary *summary;
  const grt_replay_sample *samples;   /* the per-step series (may be NULL: no plot line) */
  size_t n_samples;
  uint64_t min_capacity;              /* smallest zero-OOM capacity; 0 = not computed */
  double heap_ratio;                  /* min_capacity / peak live */
  const grt_alloc_snapshot *at_peak;  /* segment map at the peak of reserved bytes (may be NULL) */
  uint64_t peak_event;
  const grt_alloc_snapshot *at_oom;   /* segment map at the first OOM (may be NULL) */
  uint64_t oom_event;
} grt_html_run;

/* Writes the page to f. GRT_ERR_IO when writing fails. */
GRT_API GRT_MUST_CHECK grt_status grt_html_write_report(FILE *f, const char *title, const grt_html_run *runs,
                                                        size_t n_runs);
/* The same into a file at path. */
GRT_API GRT_MUST_CHECK grt_status grt_html_save_report(const char *path, const char *title, const grt_html_run *runs,
                                                       size_t n_runs);

#ifdef __cplusplus
}
#endif
#endif /* GPURT_HTML_H */
