/* cmd_html.c — the CLI side of --html: cli_run results to the report writer. */
#include <stdio.h>
#include <stdlib.h>

#include "gpurt/html.h"
#include "replay_run.h"
#include "replay_util.h"

int cli_write_html(const char *file, const char *title, const cli_run *runs, size_t n) {
  grt_html_run *h = calloc(n ? n : 1, sizeof *h);
  if (!h) return 1;
  for (size_t i = 0; i < n; i++) {
    const cli_run *r = &runs[i];
    h[i] = (grt_html_run){.trace = cli_basename(r->trace_path), .policy = r->policy, .summary = &r->sum,
                          .samples = r->samples, .n_samples = r->n_samples, .min_capacity = r->min_capacity,
                          .heap_ratio = r->heap_ratio, .at_peak = r->at_peak, .peak_event = r->peak_event,
                          .at_oom = r->at_oom, .oom_event = r->oom_event};
  }
  grt_status st = grt_html_save_report(file, title, h, n);
  free(h);
  if (st) {
    fprintf(stderr, "gpurt: cannot write %s: %s\n", file, grt_status_str(st));
    return 1;
  }
  return 0;
}
