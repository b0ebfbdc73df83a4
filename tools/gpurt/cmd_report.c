/* cmd_report.c — `gpurt report SNAPSHOT -o report.html`: one self-contained
 * page to look at: the doctor's verdict and sites first, then the live
 * allocations over time, the allocator's state at any event and the figures
 * over time (grt_doctor_page_save). */
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "input.h"
#include "cli_opts.h"
#include "cli_status.h"
#include "replay_util.h"

static void usage(FILE *f) {
  fprintf(f, "usage: gpurt report SNAPSHOT -o FILE [--device N]\n\n"
             "Writes one HTML page (script and style inline: it opens offline) for a PyTorch memory snapshot:\n"
             "the doctor's verdict, allocation sites and runtime contract; every live allocation as a band over\n"
             "time (hover: size, address, lifetime, stack; click pins; wheel zooms, drag pans); the allocator's\n"
             "segments and blocks at any event (jump to the peak, an OOM, a device malloc); and reserved,\n"
             "allocated and largest free block over time, the recorded run's reserved beside the model's.\n"
             "  -o, --output FILE  the page to write\n");
  fputs(CLI_INPUT_HELP, f);
}

enum { RP_DEVICE = 256 };

static const struct option report_options[] = {
    {"output", required_argument, NULL, 'o'},
    {"device", required_argument, NULL, RP_DEVICE},
    CLI_OPT_MAX_INPUT_ENTRY,
    CLI_OPT_HELP_ENTRY,
    {NULL, 0, NULL, 0},
};

typedef struct report_args {
  const char *path, *out;
  int device;
} report_args;

int cli_report_save(const char *cmd, const grt_trace *t, const grt_doctor_report *examined, const char *snapshot,
                    int device, const char *out, FILE *say) {
  char err[512] = "";
  size_t n = 0;
  grt_status st = grt_doctor_page_save(t, examined, cli_basename(snapshot), device, out, &n, err, sizeof err);
  if (st) return fprintf(stderr, "gpurt %s: %s: %s (%s)\n", cmd, cli_basename(snapshot), err, grt_status_str(st)), 1;
  fprintf(say, "report: %s (%zu events)\n", out, n);
  return 0;
}

int grt_cmd_report(int argc, char **argv) {
  report_args a = {0};
  cli_opts p;
  cli_opts_init(&p, "report", argc, argv, report_options, false);
  if (p.help) {
    usage(stdout);
    return 0;
  }
  for (int c; (c = cli_opts_next(&p)) != CLI_OPT_END;) {
    if (c == 'o') a.out = p.arg;
    else if (c == RP_DEVICE) { if (!cli_opt_device(&p, &a.device)) return 2; }
    else if (c == CLI_OPT_POSITIONAL && !a.path) a.path = p.arg;
    else if (c == CLI_OPT_POSITIONAL) return cli_opts_fail(&p, "one snapshot at a time");
    else return 2;
  }
  if (!a.path || !a.out) {
    usage(stderr);
    return 2;
  }
  grt_trace *t = cli_load_trace("report", a.path, a.device);
  if (!t) return 1;
  int rc = cli_report_save("report", t, NULL, a.path, a.device, a.out, stdout);
  grt_status st = grt_trace_destroy(t);
  if (st && !rc) rc = cli_fail_status("report", "grt_trace_destroy", st, NULL);
  return rc;
}
