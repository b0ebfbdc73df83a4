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
#include "replay_run.h"
#include "replay_util.h"

#define MAX_POLICIES 16
#define MAX_TRACES 64

static void usage(FILE *f) {
  fprintf(f,
          "usage: gpurt compare TRACE... [--policies a,b,c] [--capacity BYTES] [--conf STR]\n"
          "                    [--device N] [--json] [--html FILE]\n\n"
          "Replays every trace with every policy and prints one table: peak reserved, the smallest heap\n"
          "with zero OOMs over the peak live bytes (bisection), the first OOM at --capacity, device\n"
          "calls and syncs. Default policies: every one this build knows (naive, caching, ...).\n"
          "On google/minimalloc CSVs the W3 reference rows of docs/ALLOCATORS.md are printed alongside.\n");
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
    grt_trace_get_info(tr, &info);
    if (info.format != GRT_TRACE_FORMAT_MINIMALLOC) *all_minimalloc = false;
    for (int p = 0; p < n_pol; p++) {
      cli_run_opts o = *base;
      o.policy = policies[p];
      if (cli_run_loaded(tr, paths[t], &o, &runs[t * n_pol + p])) {
        grt_trace_destroy(tr);
        return 1;
      }
    }
    grt_trace_destroy(tr);
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

int grt_cmd_compare(int argc, char **argv) {
  cli_run_opts o;
  cli_run_opts_default(&o);
  o.search = 1;
  const char *policies[MAX_POLICIES];
  int n_pol = 0;
  char *paths[MAX_TRACES];
  int n_paths = 0;
  const char *html = NULL;
  bool json = false;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    bool has = i + 1 < argc;
    if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
      usage(stdout);
      return 0;
    } else if (!strcmp(a, "--policies") && has) {
      for (char *tok = strtok(argv[++i], ","); tok && n_pol < MAX_POLICIES; tok = strtok(NULL, ",")) policies[n_pol++] = tok;
    } else if (!strcmp(a, "--capacity") && has) {
      if (!cli_parse_bytes(argv[++i], &o.capacity) || !o.capacity) {
        fprintf(stderr, "gpurt compare: --capacity '%s' is not a size\n", argv[i]);
        return 2;
      }
    } else if (!strcmp(a, "--conf") && has) {
      o.conf = argv[++i];
    } else if (!strcmp(a, "--device") && has) {
      o.device = atoi(argv[++i]);
    } else if (!strcmp(a, "--json")) {
      json = true;
    } else if (!strcmp(a, "--html") && has) {
      html = argv[++i];
    } else if (a[0] == '-' && a[1]) {
      fprintf(stderr, "gpurt compare: unknown option '%s'\n\n", a);
      usage(stderr);
      return 2;
    } else if (n_paths < MAX_TRACES) {
      paths[n_paths++] = argv[i];
    }
  }
  if (!n_paths) {
    usage(stderr);
    return 2;
  }
  if (!n_pol) n_pol = cli_known_policies(policies, MAX_POLICIES);
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
