/* cmd_whatif.c — `gpurt whatif SNAPSHOT`: the recorded run, then every
 * setting worth trying replayed at the user's capacity, in one table sorted
 * by the user's goal (gpurt/doctor.h). */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "input.h"
#include "cli_opts.h"
#include "cli_status.h"
#include "gpurt/doctor.h"
#include "replay_util.h"
#include "whatif_run.h"

static void usage(FILE *f) {
  fprintf(f,
          "usage: gpurt whatif SNAPSHOT [--capacity BYTES] [--goal no-oom|min-reserved|min-syncs]\n"
          "                    [--device N] [--device-model paged|contiguous] [--search] [--threads N]\n"
          "                    [--json | --csv] [--fail-on-oom] [--html FILE]\n\n"
          "Replays a PyTorch snapshot under every PYTORCH_CUDA_ALLOC_CONF setting worth trying (fitted to the\n"
          "trace's sizes), applied over the snapshot's own settings, at the capacity asked about, and prints\n"
          "one table: the recorded run first, then the settings sorted by the goal (default no-oom).\n\n"
          "  --capacity BYTES  the device to answer for (default: the memory the snapshot shows the process\n"
          "                    had at its first OOM, reserved plus the free bytes recorded; else a page under\n"
          "                    what the device refused where a cudaMalloc failed and was retried; else unbounded)\n"
          "  --search          also each setting's smallest capacity with zero OOMs (about 20 replays more)\n"
          "  --threads N       replays in parallel (default: one per CPU)\n"
          "  --fail-on-oom     exit 3 when the best setting still OOMs at the capacity\n"
          "  --html FILE       a page of the table's first 7 settings and the recorded ones over time, one\n"
          "                    colour each (reserved, allocated, largest free block)\n"
          "Every figure comes from a replay by the caching policy on the simulated device named in the\n"
          "header, starting with what was live when recording began allocated under each setting.\n");
  fputs(CLI_INPUT_HELP, f);
}

enum { WI_CAPACITY = 256, WI_GOAL, WI_DEVICE, WI_DEVICE_MODEL, WI_SEARCH, WI_THREADS, WI_JSON, WI_CSV, WI_FAIL, WI_HTML };

static const struct option whatif_options[] = {
    {"capacity", required_argument, NULL, WI_CAPACITY},
    {"goal", required_argument, NULL, WI_GOAL},
    {"device", required_argument, NULL, WI_DEVICE},
    {"device-model", required_argument, NULL, WI_DEVICE_MODEL},
    {"search", no_argument, NULL, WI_SEARCH},
    {"threads", required_argument, NULL, WI_THREADS},
    {"json", no_argument, NULL, WI_JSON},
    {"csv", no_argument, NULL, WI_CSV},
    {"fail-on-oom", no_argument, NULL, WI_FAIL},
    {"html", required_argument, NULL, WI_HTML},
    CLI_OPT_MAX_INPUT_ENTRY,
    CLI_OPT_HELP_ENTRY,
    {NULL, 0, NULL, 0},
};

static const char *const goals[] = {"no-oom", "min-reserved", "min-syncs"};

static bool whatif_arg(const cli_opts *p, int c, cli_whatif_args *a) {
  uint64_t u;
  size_t i;
  switch (c) {
  case WI_CAPACITY: return cli_opt_bytes(p, &a->o.capacity);
  case WI_GOAL:
    if (!cli_opt_choice(p, goals, 3, &i)) return false;
    a->goal = (grt_whatif_goal)i;
    return true;
  case WI_DEVICE: return cli_opt_device(p, &a->device);
  case WI_DEVICE_MODEL: return cli_opt_device_model(p, &a->o.device_model);
  case WI_SEARCH: a->o.search = true; return true;
  case WI_THREADS:
    if (!cli_opt_u64(p, 1, 256, &u)) return false;
    a->o.threads = (unsigned)u;
    return true;
  case WI_JSON: a->json = true; return true;
  case WI_CSV: a->csv = true; return true;
  case WI_FAIL: a->fail_on_oom = true; return true;
  case WI_HTML: a->html = p->arg; return true;
  case CLI_OPT_POSITIONAL:
    if (a->path) {
      cli_opts_fail(p, "one snapshot at a time");
      return false;
    }
    a->path = p->arg;
    return true;
  default: return false; /* CLI_OPT_ERROR: already reported */
  }
}

static int whatif_parse(int argc, char **argv, cli_whatif_args *a) {
  cli_opts p;
  cli_opts_init(&p, "whatif", argc, argv, whatif_options, false);
  if (p.help) {
    usage(stdout);
    return 0;
  }
  for (int c; (c = cli_opts_next(&p)) != CLI_OPT_END;)
    if (!whatif_arg(&p, c, a)) return 2;
  if (!a->path) {
    usage(stderr);
    return 2;
  }
  if (a->json && a->csv) return cli_opts_fail(&p, "--json and --csv are two outputs; pick one");
  return cli_opts_check_capacity(&p, a->o.capacity, a->o.device_model);
}

int grt_cmd_whatif(int argc, char **argv) {
  cli_whatif_args a;
  memset(&a, 0, sizeof a);
  grt_whatif_options_default(&a.o);
  int parsed = whatif_parse(argc, argv, &a);
  if (parsed != CLI_ARGS_OK) return parsed;
  grt_trace *t = cli_load_trace("whatif", a.path, a.device);
  if (!t) return 1;
  int rc = cli_whatif_loaded(t, &a);
  grt_status st = grt_trace_destroy(t);
  if (st && !rc) rc = cli_fail_status("whatif", "grt_trace_destroy", st, NULL);
  return rc;
}
