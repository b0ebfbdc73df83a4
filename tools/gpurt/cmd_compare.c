/* cmd_compare.c — `gpurt compare TRACE... [--policies a,b,c]`: one table
 * across policies and traces (peak reserved, heap needed / peak live, the
 * first OOM, device calls, syncs), the geometric mean of heap needed / peak
 * live per policy, and, on google/minimalloc traces, the W3 reference rows
 * (cli_w3_reference, docs/ALLOCATORS.md) next to ours. */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "input.h"
#include "cli_opts.h"
#include "cli_status.h"
#include "replay_run.h"
#include "replay_util.h"

#define MAX_POLICIES 16
#define MAX_TRACES 64

static void usage(FILE *f) {
  fprintf(f,
          "usage: gpurt compare TRACE... [--policies a,b,c] [--capacity BYTES] [--conf STR]\n"
          "                    [--memory-fraction F] [--device N] [--device-model paged|contiguous]\n"
          "                    [--json] [--html FILE]\n\n"
          "Replays every trace with every policy and prints one table: peak reserved, the smallest heap\n"
          "with zero OOMs over the peak live bytes (bisection), the first OOM at --capacity, device\n"
          "calls and syncs. Default policies: every one this build knows (naive, caching, ...).\n"
          "On google/minimalloc CSVs the W3 reference rows of docs/ALLOCATORS.md are printed alongside.\n"
          "The simulated device is paged (any free 2 MiB pages serve a request) unless --device-model\n"
          "contiguous asks for first fit; which one cudaMalloc follows is not yet measured.\n");
  fputs(CLI_INPUT_HELP, f);
}

static void print_row(const cli_run *r) {
  char b1[32], b2[32], oom[64];
  const grt_replay_summary *s = &r->sum;
  if (s->has_oom)
    snprintf(oom, sizeof oom, "ev %" PRIu64 " @ %.1f%%", s->first_oom_event, 100.0 * s->first_oom_utilization);
  else
    snprintf(oom, sizeof oom, "none");
  printf("  %-28.28s %-9s %12s %12s ", cli_basename(r->trace_path), r->policy,
         grt_format_bytes(s->peak_reserved, b1, sizeof b1), grt_format_bytes(s->peak_live, b2, sizeof b2));
  if (r->min_capacity)
    printf("%8.3f", r->heap_ratio);
  else
    printf("%8s", "-");
  printf(" %-18s %9" PRIu64 " %8" PRIu64 "\n", oom, s->device_mallocs + s->device_frees, s->syncs);
}

static int run_all(char **paths, int n_paths, const char **policies, int n_pol, const cli_run_opts *base, cli_run *runs,
                   bool *all_minimalloc) {
  *all_minimalloc = n_paths > 0;
  for (int t = 0; t < n_paths; t++) {
    grt_trace *tr = cli_load_trace("compare", paths[t], base->device);
    if (!tr) return 1;
    grt_trace_info info;
    grt_status st = grt_trace_get_info(tr, &info);
    int rc = st ? cli_fail_status("compare", "grt_trace_get_info", st, NULL) : 0;
    if (!rc && info.format != GRT_TRACE_FORMAT_MINIMALLOC) *all_minimalloc = false;
    for (int p = 0; p < n_pol && !rc; p++) {
      cli_run_opts o = *base;
      o.policy = policies[p];
      rc = cli_run_loaded(tr, paths[t], &o, &runs[t * n_pol + p]); /* reports its failure */
    }
    st = grt_trace_destroy(tr);
    if (st && !rc) rc = cli_fail_status("compare", "grt_trace_destroy", st, NULL); /* else: the first is reported */
    if (rc) return rc;
  }
  return 0;
}

static void print_table(const cli_run *runs, int n_paths, const char **policies, int n_pol, bool minimalloc) {
  printf("  %-28s %-9s %12s %12s %8s %-18s %9s %8s\n", "trace", "policy", "peak reserv.", "peak live", "heap/live",
         "first OOM", "dev calls", "syncs");
  for (int t = 0; t < n_paths; t++)
    for (int p = 0; p < n_pol; p++) print_row(&runs[t * n_pol + p]);
  printf("\n  heap needed / peak live, geometric mean over %d trace%s:\n", n_paths, n_paths == 1 ? "" : "s");
  for (int p = 0; p < n_pol; p++) {
    double logsum = 0;
    int n = 0;
    for (int t = 0; t < n_paths; t++) {
      const cli_run *r = &runs[t * n_pol + p];
      if (r->min_capacity) logsum += log(r->heap_ratio), n++;
    }
    if (n)
      printf("    %-28s %.2f%s\n", policies[p], exp(logsum / n), n < n_paths ? "  (some traces had no figure)" : "");
    else
      printf("    %-28s -\n", policies[p]);
  }
  if (!minimalloc) return;
  printf("  reference (docs/ALLOCATORS.md W3, same figure, measured elsewhere):\n");
  for (size_t i = 0; i < cli_w3_reference_count; i++)
    printf("    %-28s %.2f\n", cli_w3_reference[i].name, cli_w3_reference[i].ratio);
  printf("  (the physical limit is 1.00; MiniMalloc's offline solver packs these into 1.00-1.06)\n");
}

typedef struct compare_args {
  cli_run_opts o;
  const char *policies[MAX_POLICIES];
  size_t n_pol;
  char *paths[MAX_TRACES];
  int n_paths;
  const char *html;
  bool json;
} compare_args;

enum { CMP_POLICIES = 256, CMP_CAPACITY, CMP_CONF, CMP_FRACTION, CMP_DEVICE, CMP_DEVICE_MODEL, CMP_JSON, CMP_HTML };

static const struct option compare_options[] = {
    {"policies", required_argument, NULL, CMP_POLICIES},
    {"capacity", required_argument, NULL, CMP_CAPACITY},
    {"conf", required_argument, NULL, CMP_CONF},
    {"memory-fraction", required_argument, NULL, CMP_FRACTION},
    {"device", required_argument, NULL, CMP_DEVICE},
    {"device-model", required_argument, NULL, CMP_DEVICE_MODEL},
    {"json", no_argument, NULL, CMP_JSON},
    {"html", required_argument, NULL, CMP_HTML},
    CLI_OPT_MAX_INPUT_ENTRY,
    CLI_OPT_HELP_ENTRY,
    {NULL, 0, NULL, 0},
};

/* One argument (c, what getopt returned); false when it is refused. */
static bool compare_arg(const cli_opts *p, int c, compare_args *a) {
  switch (c) {
  case CMP_POLICIES: return cli_opt_policies(p, a->policies, MAX_POLICIES, &a->n_pol); /* repeats add up */
  case CMP_CAPACITY: return cli_opt_bytes(p, &a->o.capacity);
  case CMP_CONF: a->o.conf = p->arg; return true;
  case CMP_FRACTION: return cli_opt_fraction(p, &a->o.memory_fraction);
  case CMP_DEVICE: return cli_opt_device(p, &a->o.device);
  case CMP_DEVICE_MODEL: return cli_opt_device_model(p, &a->o.device_model);
  case CMP_JSON: a->json = true; return true;
  case CMP_HTML: a->html = p->arg; return true;
  case CLI_OPT_POSITIONAL:
    if (a->n_paths == MAX_TRACES) {
      cli_opts_fail(p, "at most %d traces at a time", MAX_TRACES);
      return false;
    }
    a->paths[a->n_paths++] = (char *)p->arg;
    return true;
  default: return false; /* CLI_OPT_ERROR: already reported */
  }
}

/* CLI_ARGS_OK or the exit status. */
static int compare_parse(int argc, char **argv, compare_args *a) {
  cli_opts p;
  cli_opts_init(&p, "compare", argc, argv, compare_options, false);
  if (p.help) {
    usage(stdout);
    return 0;
  }
  for (int c; (c = cli_opts_next(&p)) != CLI_OPT_END;)
    if (!compare_arg(&p, c, a)) return 2;
  if (!a->n_paths) {
    usage(stderr);
    return 2;
  }
  return cli_run_opts_settle(&p, &a->o);
}

int grt_cmd_compare(int argc, char **argv) {
  compare_args a;
  memset(&a, 0, sizeof a);
  cli_run_opts_default(&a.o);
  a.o.cmd = "compare";
  a.o.search = 1;
  int parsed = compare_parse(argc, argv, &a);
  if (parsed != CLI_ARGS_OK) return parsed;
  cli_run_opts o = a.o;
  const char **policies = a.policies;
  int n_pol = (int)a.n_pol;
  char **paths = a.paths;
  int n_paths = a.n_paths;
  const char *html = a.html;
  bool json = a.json;
  if (!n_pol) { /* every policy the library has */
    const char *const *names = NULL;
    size_t count = 0;
    grt_status st = grt_alloc_policies(&names, &count);
    if (st) return cli_fail_status("compare", "grt_alloc_policies", st, NULL);
    for (size_t i = 0; i < count && n_pol < MAX_POLICIES; i++) policies[n_pol++] = names[i];
  }
  o.series = html != NULL;
  o.snapshots = html != NULL;
  cli_run *runs = calloc((size_t)(n_paths * n_pol), sizeof *runs);
  if (!runs) return 1;
  bool minimalloc;
  int rc = run_all(paths, n_paths, policies, n_pol, &o, runs, &minimalloc);
  if (!rc && json) {
    printf("[");
    for (int i = 0; i < n_paths * n_pol; i++) {
      printf(i ? ",\n" : "");
      cli_print_summary_json(&runs[i], false);
    }
    printf("]\n");
  } else if (!rc) {
    char b[32];
    printf("gpurt compare: %d trace%s x %d polic%s", n_paths, n_paths == 1 ? "" : "s", n_pol, n_pol == 1 ? "y" : "ies");
    if (o.capacity) printf(", OOM point on a %s device", grt_format_bytes(o.capacity, b, sizeof b));
    printf("; %s", cli_device_model_words(o.device_model));
    printf("\n\n");
    print_table(runs, n_paths, policies, n_pol, minimalloc);
  }
  if (!rc && html) {
    rc = cli_write_html(html, n_paths == 1 ? cli_basename(paths[0]) : "gpurt compare", runs, (size_t)(n_paths * n_pol));
    if (!rc && !json) printf("\nreport: %s\n", html);
  }
  for (int i = 0; i < n_paths * n_pol; i++) cli_run_free(&runs[i]);
  free(runs);
  return rc;
}
