/* report_page.h — `gpurt report`: one self-contained HTML page of a
 * snapshot (report_page.c) over its data (report_data.c) and its script
 * and style (tools/gpurt/report/, embedded at build time). */
#ifndef GRT_TOOLS_REPORT_PAGE_H
#define GRT_TOOLS_REPORT_PAGE_H

#include <stddef.h>
#include <stdio.h>

#include "gpurt/doctor.h"
#include "gpurt/replay.h"

typedef struct cli_report_input {
  const grt_trace *trace;
  const char *name;                 /* the snapshot's file name */
  int device;
  const grt_doctor_report *doctor;
  const grt_replay_sample *samples; /* the faithful replay, one per event */
  size_t n_samples;
} cli_report_input;

/* The page's data object (JSON). */
grt_status cli_report_data(FILE *f, const cli_report_input *x);
/* The whole page. */
grt_status cli_report_page(FILE *f, const cli_report_input *x);
/* Examines (unless examined is given: `gpurt doctor --html` has) and
 * replays a loaded snapshot and writes its page to out, printing "report:
 * OUT" on say. 0 or the exit status, after a message naming cmd. */
int cli_report_save(const char *cmd, const grt_trace *t, const grt_doctor_report *examined, const char *snapshot,
                    int device, const char *out, FILE *say);

#endif
