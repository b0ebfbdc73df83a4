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

/* Rows that failed sort last; rows that OOM after those that do not; then
 * by the goal's figure, then the others. */
static int cmp_by(const grt_whatif_row *a, const grt_whatif_row *b, const int order[3]) {
  if ((a->status != GRT_OK) != (b->status != GRT_OK)) return a->status != GRT_OK ? 1 : -1;
  uint64_t x[3] = {a->ooms, a->peak_reserved, a->syncs}, y[3] = {b->ooms, b->peak_reserved, b->syncs};
  for (int k = 0; k < 3; k++)
    if (x[order[k]] != y[order[k]]) return x[order[k]] < y[order[k]] ? -1 : 1;
  return strcmp(a->conf, b->conf);
}

static int cmp_no_oom(const void *a, const void *b) { return cmp_by(a, b, (const int[3]){0, 1, 2}); }
static int cmp_min_reserved(const void *a, const void *b) {
  const grt_whatif_row *x = a, *y = b;
  if (!x->status && !y->status && (x->ooms == 0) == (y->ooms == 0) && x->peak_reserved != y->peak_reserved)
    return x->peak_reserved < y->peak_reserved ? -1 : 1;
  return cmp_by(a, b, (const int[3]){0, 1, 2});
}
static int cmp_min_syncs(const void *a, const void *b) { return cmp_by(a, b, (const int[3]){0, 2, 1}); }

static int (*const comparators[])(const void *, const void *) = {cmp_no_oom, cmp_min_reserved, cmp_min_syncs};

int cli_whatif_sweep(const grt_trace *t, const cli_whatif_args *a, cli_whatif *w) {
  memset(w, 0, sizeof *w);
  grt_status st = grt_trace_recorded_figures(t, &w->rec);
  if (st) return cli_fail_status("whatif", "grt_trace_recorded_figures", st, NULL);
  grt_whatif_options o = a->o;
  w->capacity_from = "--capacity";
  if (!o.capacity && w->rec.device_memory) {
    o.capacity = w->rec.device_memory;
    w->capacity_from = "the snapshot's first OOM (reserved + free then)";
  } else if (!o.capacity && w->rec.device_full_below > 4 * GRT_MiB) {
    /* a page less than what cudaMalloc was refused: the run's own retry happens again */
    char b[2][32];
    o.capacity = (w->rec.device_full_below - 1) / (2 * GRT_MiB) * (2 * GRT_MiB);
    snprintf(w->capacity_note, sizeof w->capacity_note, "a page under what the device refused at event %" PRIu64
             " (the process could hold less than %s, and held %s)", w->rec.device_full_event,
             grt_format_bytes(w->rec.device_full_below, b[0], sizeof b[0]),
             grt_format_bytes(w->rec.device_full_held > w->rec.reserved_peak ? w->rec.device_full_held
                                                                             : w->rec.reserved_peak, b[1], sizeof b[1]));
    w->capacity_from = w->capacity_note;
  } else if (!o.capacity) {
    w->capacity_from = "none recorded: unbounded (give --capacity)";
  }
  w->capacity = o.capacity;
  if ((st = grt_whatif_sweep(t, &w->rows, &w->n))) return cli_fail_status("whatif", "grt_whatif_sweep", st, NULL);
  if (isatty(STDERR_FILENO))
    fprintf(stderr, "gpurt whatif: replaying %zu settings%s...\n", w->n, o.search ? " with capacity searches" : "");
  if ((st = grt_whatif_run(t, &o, w->rows, w->n))) {
    cli_whatif_free(w);
    return cli_fail_status("whatif", "grt_whatif_run", st, NULL);
  }
  w->goal = a->goal;
  qsort(w->rows, w->n, sizeof *w->rows, comparators[a->goal]);
  return 0;
}

void cli_whatif_free(cli_whatif *w) {
  grt_whatif_free(w->rows);
  memset(w, 0, sizeof *w);
}

long cli_whatif_best(const cli_whatif *w) {
  const grt_whatif_row *as_recorded = NULL;
  for (size_t i = 0; i < w->n; i++)
    if (!w->rows[i].conf[0]) as_recorded = &w->rows[i];
  if (!w->n || w->rows[0].status || !as_recorded || !w->rows[0].conf[0]) return -1;
  return comparators[w->goal](&w->rows[0], as_recorded) < 0 ? 0 : -1;
}

static const char *label(const grt_whatif_row *r) { return r->conf[0] ? r->conf : "(as recorded)"; }

static void print_table(const cli_whatif *w, const cli_whatif_args *a, const char *path) {
  char b1[32], b2[32], b3[32];
  printf("gpurt whatif: %s (device %d)\n", cli_basename(path), a->device);
  printf("caching policy, first fit on a %s %s; capacity: %s\n\n",
         w->capacity ? grt_format_bytes(w->capacity, b1, sizeof b1) : "1 TiB", cli_device_model_words(a->o.device_model),
         w->capacity_from);
  printf("  %-66s %5s %9s %11s %11s %11s %9s %7s\n", "PYTORCH_CUDA_ALLOC_CONF (over the snapshot's own)", "OOMs", "rec.OOM ok", "peak resv",
         "end resv", "min cap", "dev calls", "retries");
  bool known = w->rec.reserved_peak > 0; /* a trace without segments says nothing of reserved memory */
  printf("  %-66s %5" PRIu64 " %9s %11s %11s %11s %9" PRIu64 " %7s\n", "recorded run", w->rec.ooms, "-",
         known ? grt_format_bytes(w->rec.reserved_peak, b1, sizeof b1) : "-",
         known ? grt_format_bytes(w->rec.reserved_end, b2, sizeof b2) : "-", "-",
         w->rec.device_mallocs + w->rec.device_frees, "-");
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
  if (w->rec.partial)
    printf("\n  note: the trace is partial; each setting starts with what was live when recording began\n");
}

static void print_json_row(const grt_whatif_row *r, bool last) {
  printf("  {\"conf\": \"%s\", \"ok\": %s, \"ooms\": %" PRIu64 ", \"recorded_ooms\": %" PRIu64
         ", \"recorded_ooms_avoided\": %" PRIu64 ", \"peak_reserved\": %" PRIu64 ", \"final_reserved\": %" PRIu64
         ", \"peak_allocated\": %" PRIu64 ", \"min_capacity\": %" PRIu64 ", \"device_mallocs\": %" PRIu64
         ", \"device_frees\": %" PRIu64 ", \"syncs\": %" PRIu64 ", \"alloc_retries\": %" PRIu64 "}%s\n",
         r->conf, r->status ? "false" : "true", r->ooms, r->recorded_ooms, r->recorded_ooms_avoided, r->peak_reserved,
         r->final_reserved, r->peak_allocated, r->min_capacity, r->device_mallocs, r->device_frees, r->syncs,
         r->alloc_retries, last ? "" : ",");
}

static void print_json(const cli_whatif *w, const cli_whatif_args *a, const char *path) {
  printf("{\"snapshot\": \"%s\", \"device\": %d, \"capacity\": %" PRIu64 ", \"device_model\": \"%s\",\n", cli_basename(path),
         a->device, w->capacity, grt_device_model_name(a->o.device_model));
  printf(" \"recorded\": {\"ooms\": %" PRIu64 ", \"peak_reserved\": %" PRIu64 ", \"final_reserved\": %" PRIu64
         ", \"device_mallocs\": %" PRIu64 ", \"device_frees\": %" PRIu64 ", \"partial\": %s},\n",
         w->rec.ooms, w->rec.reserved_peak, w->rec.reserved_end, w->rec.device_mallocs, w->rec.device_frees,
         w->rec.partial ? "true" : "false");
  long best = cli_whatif_best(w);
  printf(" \"best\": %s%s%s,\n \"rows\": [\n", best < 0 ? "" : "\"", best < 0 ? "null" : w->rows[best].conf,
         best < 0 ? "" : "\"");
  for (size_t i = 0; i < w->n; i++) print_json_row(&w->rows[i], i + 1 == w->n);
  printf(" ]}\n");
}

static void print_csv(const cli_whatif *w) {
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
static int write_html(const grt_trace *t, const cli_whatif *w, const cli_whatif_args *a) {
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
  cli_whatif w;
  int rc = cli_whatif_sweep(t, a, &w);
  if (rc) return rc;
  if (a->json)
    print_json(&w, a, a->path);
  else if (a->csv)
    print_csv(&w);
  else
    print_table(&w, a, a->path);
  if (a->fail_on_oom && w.n && (w.rows[0].status || w.rows[0].ooms)) rc = 3;
  if (a->html) {
    int hrc = write_html(t, &w, a);
    if (hrc) rc = hrc;
  }
  cli_whatif_free(&w);
  return rc;
}
