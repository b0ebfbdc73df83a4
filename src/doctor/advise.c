/* advise.c — the what-if sweep as advice: the capacity the snapshot shows
 * it had, the rows sorted by the user's goal, the setting to recommend. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpurt/doctor.h"

static const char *const goal_names[GRT_WHATIF_GOAL_COUNT] = {"no-oom", "min-reserved", "min-syncs"};

const char *grt_whatif_goal_name(grt_whatif_goal goal) {
  return (unsigned)goal < GRT_WHATIF_GOAL_COUNT ? goal_names[goal] : "?";
}

grt_status grt_whatif_goal_parse(const char *name, grt_whatif_goal *out) {
  if (!name || !out) return GRT_ERR_INVALID_ARG;
  for (int i = 0; i < GRT_WHATIF_GOAL_COUNT; i++)
    if (!strcmp(name, goal_names[i])) return *out = (grt_whatif_goal)i, GRT_OK;
  return GRT_ERR_INVALID_ARG;
}

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

static int (*const comparators[GRT_WHATIF_GOAL_COUNT])(const void *, const void *) = {cmp_no_oom, cmp_min_reserved,
                                                                                     cmp_min_syncs};

/* The capacity the recorded run shows the process had, and where it came from. */
static uint64_t recorded_capacity(const grt_trace_recorded *rec, char *from, size_t cap) {
  if (rec->device_memory) {
    snprintf(from, cap, "the snapshot's first OOM (reserved + free then)");
    return rec->device_memory;
  }
  if (rec->device_full_below > 4 * GRT_MiB) {
    /* a page less than what cudaMalloc was refused: the run's own retry happens again */
    char b[2][32];
    uint64_t held = rec->device_full_held > rec->reserved_peak ? rec->device_full_held : rec->reserved_peak;
    snprintf(from, cap, "a page under what the device refused at event %" PRIu64
             " (the process could hold less than %s, and held %s)", rec->device_full_event,
             grt_format_bytes(rec->device_full_below, b[0], sizeof b[0]), grt_format_bytes(held, b[1], sizeof b[1]));
    return (rec->device_full_below - 1) / (2 * GRT_MiB) * (2 * GRT_MiB);
  }
  snprintf(from, cap, "none recorded: unbounded (give --capacity)");
  return 0;
}

static long pick_best(const grt_whatif_advice *a) {
  const grt_whatif_row *as_recorded = NULL;
  for (size_t i = 0; i < a->n; i++)
    if (!a->rows[i].conf[0]) as_recorded = &a->rows[i];
  if (!a->n || a->rows[0].status || !as_recorded || !a->rows[0].conf[0]) return -1;
  return comparators[a->goal](&a->rows[0], as_recorded) < 0 ? 0 : -1;
}

grt_status grt_whatif_advise(const grt_trace *trace, const grt_whatif_options *o, grt_whatif_goal goal,
                             grt_whatif_advice *out) {
  if (!out) return GRT_ERR_INVALID_ARG;
  memset(out, 0, sizeof *out);
  out->best = -1;
  if (!trace || !o || (unsigned)goal >= GRT_WHATIF_GOAL_COUNT) return GRT_ERR_INVALID_ARG;
  grt_whatif_advice a = {.goal = goal, .best = -1, .device_model = o->device_model};
  grt_status st = grt_trace_recorded_figures(trace, &a.recorded);
  if (st) return st;
  grt_whatif_options run = *o;
  if (o->capacity) snprintf(a.capacity_from, sizeof a.capacity_from, "--capacity");
  else run.capacity = recorded_capacity(&a.recorded, a.capacity_from, sizeof a.capacity_from);
  a.capacity = run.capacity;
  if ((st = grt_whatif_sweep(trace, &a.rows, &a.n))) return st;
  if ((st = grt_whatif_run(trace, &run, a.rows, a.n))) {
    grt_whatif_free(a.rows);
    return st;
  }
  qsort(a.rows, a.n, sizeof *a.rows, comparators[goal]);
  a.best = pick_best(&a);
  *out = a;
  return GRT_OK;
}

void grt_whatif_advice_free(grt_whatif_advice *a) {
  if (!a) return;
  grt_whatif_free(a->rows);
  memset(a, 0, sizeof *a);
  a->best = -1;
}
