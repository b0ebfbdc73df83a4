/* cmd_plan.c — `gpurt plan TRACE [--budget-ms N] [--json]`: the static
 * planner (gpurt/plan.h) over a trace's buffers, each live from its alloc
 * event to its free (events as steps): the plan, checked by
 * grt_plan_check, then the buffers, the peak live bytes, the heap the
 * plan needs, their ratio and the planner's time. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"
#include "cli_opts.h"
#include "cli_status.h"
#include "gpurt/plan.h"
#include "replay_util.h"

static void usage(FILE *f) {
  fprintf(f,
          "usage: gpurt plan TRACE [--budget-ms N] [--effort N] [--seed S] [--device N] [--list] [--json]\n\n"
          "Places every buffer of the trace offline, knowing all lifetimes (a buffer lives from its alloc\n"
          "event to its free), as a graph's memory planner does, checks the placement, and prints the\n"
          "buffers, the peak live bytes, the heap the plan needs and heap / peak live (1.00 is the limit).\n"
          "  --budget-ms N  cap the search's wall time (the plan then depends on the machine's speed)\n"
          "  --effort N     placement orders to try (default 4000; deterministic)\n"
          "  --seed S       the search's random choices (default 1)\n"
          "  --device N     which device of a PyTorch snapshot (default 0)\n"
          "  --list         every buffer's id, steps, size and offset\n"
          "  --json         one JSON object instead of text\n"
          "docs/PLAN.md describes the algorithm.\n");
  fputs(CLI_INPUT_HELP, f);
}

typedef struct plan_args {
  const char *path;
  grt_plan_config cfg;
  int device;
  bool json, list;
} plan_args;

enum { PL_BUDGET = 256, PL_EFFORT, PL_SEED, PL_DEVICE, PL_LIST, PL_JSON };

static const struct option plan_options[] = {
    {"budget-ms", required_argument, NULL, PL_BUDGET},
    {"effort", required_argument, NULL, PL_EFFORT},
    {"seed", required_argument, NULL, PL_SEED},
    {"device", required_argument, NULL, PL_DEVICE},
    {"list", no_argument, NULL, PL_LIST},
    {"json", no_argument, NULL, PL_JSON},
    CLI_OPT_MAX_INPUT_ENTRY,
    CLI_OPT_HELP_ENTRY,
    {NULL, 0, NULL, 0},
};

static bool plan_arg(const cli_opts *p, int c, plan_args *a) {
  switch (c) {
    case PL_BUDGET: return cli_opt_u64(p, 1, UINT64_MAX / 2000, &a->cfg.budget_ms);
    case PL_EFFORT: return cli_opt_u64(p, 0, UINT64_MAX, &a->cfg.effort);
    case PL_SEED: return cli_opt_u64(p, 0, UINT64_MAX, &a->cfg.seed);
    case PL_DEVICE: return cli_opt_device(p, &a->device);
    case PL_LIST: a->list = true; return true;
    case PL_JSON: a->json = true; return true;
    case CLI_OPT_POSITIONAL:
      if (a->path) {
        cli_opts_unexpected(p);
        return false;
      }
      a->path = p->arg;
      return true;
    default: return false; /* CLI_OPT_ERROR: already reported */
  }
}

/* CLI_ARGS_OK or the exit status. */
static int plan_parse(int argc, char **argv, plan_args *a) {
  cli_opts p;
  cli_opts_init(&p, "plan", argc, argv, plan_options, false);
  if (p.help) {
    usage(stdout);
    return 0;
  }
  for (int c; (c = cli_opts_next(&p)) != CLI_OPT_END;)
    if (!plan_arg(&p, c, a)) return 2;
  if (!a->path) {
    usage(stderr);
    return 2;
  }
  return CLI_ARGS_OK;
}

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

typedef struct planned {
  grt_plan_buffer *bufs;
  size_t n;
  uint64_t *off;
  grt_plan_result res;
  double ms;
} planned;

/* Loads, plans and checks; 0, or the exit status after the message. */
static int make_plan(const plan_args *a, planned *pl) {
  char msg[512];
  grt_trace *t = cli_load_trace("plan", a->path, a->device);
  if (!t) return 1;
  grt_status st = grt_plan_buffers_from_trace(t, &pl->bufs, &pl->n, msg, sizeof msg);
  grt_status st2 = grt_trace_destroy(t);
  if (st) return cli_fail_status("plan", "grt_plan_buffers_from_trace", st, msg);
  if (st2) return cli_fail_status("plan", "grt_trace_destroy", st2, NULL);
  pl->off = malloc((pl->n ? pl->n : 1) * sizeof *pl->off);
  if (!pl->off) return cli_fail_status("plan", "offsets", GRT_ERR_NOMEM, NULL);
  double t0 = now_ms();
  st = grt_plan_solve(pl->bufs, pl->n, &a->cfg, pl->off, &pl->res, msg, sizeof msg);
  pl->ms = now_ms() - t0;
  if (st) return cli_fail_status("plan", "grt_plan_solve", st, msg);
  uint64_t heap = 0;
  st = grt_plan_check(pl->bufs, pl->n, pl->off, &heap, msg, sizeof msg);
  if (st) return cli_fail_status("plan", "grt_plan_check", st, msg);
  if (heap != pl->res.heap) return cli_fail_status("plan", "grt_plan_check", GRT_ERR_INTERNAL, "the heaps differ");
  return 0;
}

static double ratio(const grt_plan_result *r) { return r->peak_live ? (double)r->heap / (double)r->peak_live : 1.0; }

static void print_text(const plan_args *a, const planned *pl) {
  char b1[32], b2[32];
  const grt_plan_result *r = &pl->res;
  printf("gpurt plan: %s\n\n", cli_basename(a->path));
  printf("  buffers          %zu\n", pl->n);
  printf("  peak live        %s (%" PRIu64 " B)\n", grt_format_bytes(r->peak_live, b1, sizeof b1), r->peak_live);
  printf("  heap needed      %s (%" PRIu64 " B)\n", grt_format_bytes(r->heap, b2, sizeof b2), r->heap);
  printf("  heap / peak      %.4f%s\n", ratio(r), r->optimal ? " (optimal)" : "");
  printf("  planner time     %.1f ms, %" PRIu64 " orders tried%s\n", pl->ms, r->orders,
         r->budget_hit ? " (stopped by --budget-ms)" : "");
  printf("  check            every time-overlapping pair disjoint\n");
  if (!a->list) return;
  printf("\n  %12s %12s %12s %14s %14s\n", "id", "lower", "upper", "size", "offset");
  for (size_t i = 0; i < pl->n; i++)
    printf("  %12" PRIu64 " %12" PRIu64 " %12" PRIu64 " %14" PRIu64 " %14" PRIu64 "\n", pl->bufs[i].id,
           pl->bufs[i].lower, pl->bufs[i].upper, pl->bufs[i].size, pl->off[i]);
}

static void print_json(const plan_args *a, const planned *pl) {
  const grt_plan_result *r = &pl->res;
  printf("{\"buffers\":%zu,\"peak_live\":%" PRIu64 ",\"heap\":%" PRIu64 ",\"heap_over_peak\":%.6f,"
         "\"optimal\":%s,\"planner_ms\":%.3f,\"orders\":%" PRIu64 ",\"budget_hit\":%s,\"valid\":true",
         pl->n, r->peak_live, r->heap, ratio(r), r->optimal ? "true" : "false", pl->ms, r->orders,
         r->budget_hit ? "true" : "false");
  if (a->list) {
    printf(",\"placements\":[");
    for (size_t i = 0; i < pl->n; i++)
      printf("%s{\"id\":%" PRIu64 ",\"lower\":%" PRIu64 ",\"upper\":%" PRIu64 ",\"size\":%" PRIu64
             ",\"offset\":%" PRIu64 "}",
             i ? "," : "", pl->bufs[i].id, pl->bufs[i].lower, pl->bufs[i].upper, pl->bufs[i].size, pl->off[i]);
    printf("]");
  }
  printf("}\n");
}

int grt_cmd_plan(int argc, char **argv) {
  plan_args a;
  memset(&a, 0, sizeof a);
  grt_plan_config_default(&a.cfg);
  int rc = plan_parse(argc, argv, &a);
  if (rc != CLI_ARGS_OK) return rc;
  planned pl;
  memset(&pl, 0, sizeof pl);
  rc = make_plan(&a, &pl);
  if (!rc && a.json)
    print_json(&a, &pl);
  else if (!rc)
    print_text(&a, &pl);
  grt_plan_buffers_free(pl.bufs);
  free(pl.off);
  return rc;
}
