/* whatif_run.h — the what-if sweep as the CLI runs and prints it (whatif_run.c),
 * shared by `gpurt whatif` and `gpurt doctor`'s recommendation. */
#ifndef GRT_TOOLS_WHATIF_RUN_H
#define GRT_TOOLS_WHATIF_RUN_H

#include <stdbool.h>

#include "gpurt/doctor.h"


typedef struct cli_whatif_args {
  const char *path;
  int device;
  grt_whatif_options o;
  grt_whatif_goal goal;
  bool json, csv, fail_on_oom;
  const char *html;           /* --html: whatif's page of the settings, doctor's page of the snapshot */
} cli_whatif_args;

/* The sweep of a loaded snapshot as advice (grt_whatif_advise): 0, or the
 * exit status after reporting why not. */
int cli_whatif_sweep(const grt_trace *t, const cli_whatif_args *a, grt_whatif_advice *out);
/* `gpurt whatif`: sweep, print, exit status (3 with --fail-on-oom when the best row OOMs). */
int cli_whatif_loaded(const grt_trace *t, const cli_whatif_args *a);

#endif
