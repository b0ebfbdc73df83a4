/* whatif_run.c — see whatif_run.h. */
#include "whatif_run.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli_status.h"
#include "gpurt/html.h"
#include "replay_run.h"
#include "replay_util.h"

int cli_whatif_sweep(const grt_trace *t, const cli_whatif_args *a, grt_whatif_advice *w) {
  if (isatty(STDERR_FILENO))
    fprintf(stderr, "gpurt whatif: replaying the settings%s...\n", a->o.search ? " with capacity searches" : "");
  grt_status st = grt_whatif_advise(t, &a->o, a->goal, w);
  return st ? cli_fail_status("whatif", "grt_whatif_advise", st, NULL) : 0;
}

static const char *label(const grt_whatif_row *r) { return r->conf[0] ? r->conf : "(as recorded)"; }

static void print_table(const grt_whatif_advice *w, const cli_whatif_args *a, const char *path) {
  char b1[32], b2[32], b3[32];
  printf("gpurt whatif: %s (device %d)\n", cli_basename(path), a->device);
  printf("caching policy, first fit on a %s %s; capacity: %s\n\n",
         w->capacity ? grt_format_bytes(w->capacity, b1, sizeof b1) : "1 TiB", cli_device_model_words(a->o.device_model),
         w->capacity_from);
  printf("  %-66s %5s %9s %11s %11s %11s %9s %7s\n", "PYTORCH_CUDA_ALLOC_CONF (over the snapshot's own)", "OOMs", "rec.OOM ok", "peak resv",
         "end resv", "min cap", "dev calls", "retries");
  bool known = w->recorded.reserved_peak > 0; /* a trace without segments says nothing of reserved memory */
  printf("  %-66s %5" PRIu64 " %9s %11s %11s %11s %9" PRIu64 " %7s\n", "recorded run", w->recorded.ooms, "-",
         known ? grt_format_bytes(w->recorded.reserved_peak, b1, sizeof b1) : "-",
         known ? grt_format_bytes(w->recorded.reserved_end, b2, sizeof b2) : "-", "-",
         w->recorded.device_mallocs + w->recorded.device_frees, "-");
  for (size_t i = 0; i < w->n; i++) {
    const grt_whatif_row *r = &w->rows[i];
    if (r->status) {
      printf("  %-66.66s  (%s)\n", label(r), r->note);
      continue;
    }
    printf("  %-66.66s %5" PRIu64 " %4" PRIu64 "/%-4" PRIu64 " %11s %11s %11s %9" PRIu64 " %7" PRIu64 "\n", label(r),
           r->ooms, r->recorded_ooms_avoided, r->recorded_ooms, grt_format_bytes(r->peak_reserved, b1, sizeof b1),
           grt_format_bytes(r->final_reserved, b2, sizeof b2),
           r->min_capacity ? grt_format_bytes(r->min_capacity, b3, sizeof b3) : "-", r->device_mallocs + r->device_frees,
           r->alloc_retries);
  }
  if (w->recorded.partial)
    printf("\n  note: the trace is partial; each setting starts with what was live when recording began\n");
}

static int print_json(const grt_whatif_advice *w, const cli_whatif_args *a) {
  char *text = NULL;
  grt_status st = grt_whatif_json(w, cli_basename(a->path), a->device, &text);
  if (st) return cli_fail_status("whatif", "grt_whatif_json", st, NULL);
  fputs(text, stdout);
  free(text);
  return 0;
}

static void print_csv(const grt_whatif_advice *w) {
  printf("conf,ok,ooms,recorded_ooms,recorded_ooms_avoided,peak_reserved,final_reserved,min_capacity,device_mallocs,"
         "device_frees,syncs,alloc_retries\n");
  for (size_t i = 0; i < w->n; i++) {
    const grt_whatif_row *r = &w->rows[i];
    printf("\"%s\",%d,%" PRIu64 ",%" PRIu64 ",%" PRIu64 ",%" PRIu64 ",%" PRIu64 ",%" PRIu64 ",%" PRIu64 ",%" PRIu64
           ",%" PRIu64 ",%" PRIu64 "\n",
           r->conf, !r->status, r->ooms, r->recorded_ooms, r->recorded_ooms_avoided, r->peak_reserved, r->final_reserved,
           r->min_capacity, r->device_mallocs, r->device_frees, r->syncs, r->alloc_retries);
  }
}

#define HTML_ROWS 8         /* settings drawn: the table's first ones, the recorded settings among them */
#define HTML_POINTS 2400    /* samples kept per setting (each its events' largest) */

/* --html: the first rows of the table and the recorded settings, one line each (gpurt/html.h). */
static int write_html(const grt_trace *t, const grt_whatif_advice *w, const cli_whatif_args *a) {
  size_t pick[HTML_ROWS], k = 0;
  for (size_t i = 0; i < w->n && k < HTML_ROWS - 1; i++)
    if (!w->rows[i].status && w->rows[i].conf[0]) pick[k++] = i;
  for (size_t i = 0; i < w->n; i++)
    if (!w->rows[i].status && !w->rows[i].conf[0]) pick[k++] = i; /* the recorded settings, last */
  grt_whatif_options o = a->o;
  o.capacity = w->capacity;
  grt_html_run runs[HTML_ROWS];
  grt_replay_summary sums[HTML_ROWS];
  grt_replay_sample *series[HTML_ROWS] = {0};
  const char *name = cli_basename(a->path);
  int rc = 0;
  size_t n = 0;
  for (; n < k && !rc; n++) {
    const grt_whatif_row *r = &w->rows[pick[n]];
    size_t ns = 0;
    grt_status st = grt_whatif_series(t, &o, r->conf, HTML_POINTS, &series[n], &ns, &sums[n]);
    if (st) rc = cli_fail_status("whatif", "grt_whatif_series", st, r->conf);
    runs[n] = (grt_html_run){.trace = name, .policy = r->conf[0] ? r->conf : "(as recorded)", .summary = &sums[n],
                             .samples = series[n], .n_samples = ns, .min_capacity = r->min_capacity};
  }
  if (!rc) {
    char title[300];
    snprintf(title, sizeof title, "gpurt whatif %s", name);
    grt_status st = grt_html_save_report(a->html, title, runs, n);
    if (st) rc = cli_fail_status("whatif", "grt_html_save_report", st, a->html);
    else fprintf(a->json || a->csv ? stderr : stdout, "report: %s (%zu settings)\n", a->html, n);
  }
  for (size_t i = 0; i < n; i++) free(series[i]);
  return rc;
}

int cli_whatif_loaded(const grt_trace *t, const cli_whatif_args *a) {
  grt_whatif_advice w;
  int rc = cli_whatif_sweep(t, a, &w);
  if (rc) return rc;
  if (a->json)
    rc = print_json(&w, a);
  else if (a->csv)
    print_csv(&w);
  else
    print_table(&w, a, a->path);
  if (a->fail_on_oom && w.n && (w.rows[0].status || w.rows[0].ooms)) rc = 3;
  if (a->html) {
    int hrc = write_html(t, &w, a);
    if (hrc) rc = hrc;
  }
  grt_whatif_advice_free(&w);
  return rc;
}
