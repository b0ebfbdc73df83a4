/* whatif_run.h — the what-if sweep as the CLI runs and prints it (whatif_run.c),
 * shared by `gpurt whatif` and `gpurt doctor`'s recommendation. */
#ifndef GRT_TOOLS_WHATIF_RUN_H
#define GRT_TOOLS_WHATIF_RUN_H

#include <stdbool.h>

#include "gpurt/doctor.h"

typedef enum cli_whatif_goal { CLI_GOAL_NO_OOM = 0, CLI_GOAL_MIN_RESERVED, CLI_GOAL_MIN_SYNCS } cli_whatif_goal;

typedef struct cli_whatif_args {
  const char *path;
  int device;
  grt_whatif_options o;
  cli_whatif_goal goal;
  bool json, csv, fail_on_oom;
  const char *html;           /* --html: whatif's page of the settings, doctor's page of the snapshot */
} cli_whatif_args;

/* The sweep of a loaded snapshot: rows sorted by the goal, the capacity used
 * (*capacity, 0 = unbounded) and where it came from. 0, or the exit status
 * after reporting why not. */
typedef struct cli_whatif {
  grt_whatif_row *rows;
  size_t n;
  uint64_t capacity;
  const char *capacity_from; /* "--capacity", "the snapshot's first OOM", "none: unbounded", or capacity_note */
  char capacity_note[160];   /* where the device was full (a retry recorded) */
  grt_trace_recorded rec;
  cli_whatif_goal goal;      /* what the rows are sorted by */
} cli_whatif;

int cli_whatif_sweep(const grt_trace *t, const cli_whatif_args *a, cli_whatif *out);
void cli_whatif_free(cli_whatif *w);
/* The row to recommend (index into w->rows), or -1 when none beats the recorded settings. */
long cli_whatif_best(const cli_whatif *w);
/* `gpurt whatif`: sweep, print, exit status (3 with --fail-on-oom when the best row OOMs). */
int cli_whatif_loaded(const grt_trace *t, const cli_whatif_args *a);

#endif
