/* cmd_stats.c — `gpurt stats`: runs a workload to its end and prints the
 * allocator's statistics as torch.cuda.memory_summary() does (plus the
 * largest-free-block line PyTorch lacks), or as memory_stats() JSON, a
 * snapshot in PyTorch's shape, or Prometheus text. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "gpurt/report.h"

static void usage(FILE *f) {
  fprintf(f,
          "usage: gpurt stats [--workload dayshift] [--events N] [--seed S]\n"
          "                   [--format summary|json|snapshot|prometheus] [--abbreviated]\n\n"
          "Runs the workload to its end, then prints the allocator's statistics.\n"
          "  --workload NAME  dayshift: a serving day (reserved flat, allocated flat,\n"
          "                   largest free block sinking, a final OOM) [default]\n"
          "  --events N       length of the day in allocator events (default 20000)\n"
          "  --seed S         workload seed (default 1)\n"
          "  --format F       summary: torch.cuda.memory_summary() layout (default)\n"
          "                   json: torch.cuda.memory_stats() keys; snapshot: memory._snapshot()\n"
          "                   segments; prometheus: the /metrics exposition text\n"
          "  --abbreviated    summary without the per-pool rows\n"
          "Trace replay (gpurt replay TRACE) reports through the same writers.\n");
}

int grt_cli_parse_u64(const char *flag, const char *text, uint64_t *out) {
  char *end;
  if (!text || !*text || *text == '-') {
    fprintf(stderr, "gpurt: %s needs a non-negative number\n", flag);
    return 0;
  }
  unsigned long long v = strtoull(text, &end, 10);
  if (*end) {
    fprintf(stderr, "gpurt: %s: '%s' is not a number\n", flag, text);
    return 0;
  }
  *out = v;
  return 1;
}

static grt_status print_report(grt_workload *w, const char *format, int abbreviated) {
  grt_allocator *a = grt_workload_allocator(w);
  char *text = NULL;
  grt_status st;
  if (!strcmp(format, "prometheus")) {
    grt_metrics *m;
    if ((st = grt_metrics_create(&m))) return st;
    st = grt_metrics_add_allocator(m, a, "dayshift", "0");
    if (!st) st = grt_metrics_add_device(m, grt_workload_device(w), "0");
    if (!st) st = grt_metrics_render(m, &text, NULL);
    grt_metrics_destroy(m);
  } else if (!strcmp(format, "snapshot")) {
    grt_alloc_snapshot *snap;
    if ((st = grt_alloc_snapshot_take(a, &snap))) return st;
    st = grt_snapshot_json(snap, 0, &text);
    grt_alloc_snapshot_free(snap);
  } else {
    grt_alloc_stats s;
    if ((st = grt_alloc_get_stats(a, &s))) return st;
    if (!strcmp(format, "json")) {
      st = grt_stats_json(&s, &text);
    } else {
      grt_alloc_snapshot *snap;
      grt_free_space fs;
      if ((st = grt_alloc_snapshot_take(a, &snap))) return st;
      st = grt_free_space_of(snap, &fs);
      grt_alloc_snapshot_free(snap);
      if (!st) st = grt_memory_summary(&s, &fs, 0, abbreviated, &text);
    }
  }
  if (!st) fputs(text, stdout);
  grt_report_free(text);
  return st;
}

int grt_cmd_stats(int argc, char **argv) {
  if (grt_cli_wants_help(argc, argv)) {
    usage(stdout);
    return 0;
  }
  grt_workload_config cfg;
  grt_workload_config_default(&cfg);
  const char *format = "summary";
  int abbreviated = 0;
  for (int i = 1; i < argc; i++) {
    const char *arg = argv[i], *val = i + 1 < argc ? argv[i + 1] : NULL;
    if (!strcmp(arg, "--abbreviated")) {
      abbreviated = 1;
      continue;
    }
    if (!val) {
      fprintf(stderr, "gpurt stats: unknown option or missing value: %s\n", arg);
      usage(stderr);
      return 2;
    }
    i++;
    if (!strcmp(arg, "--workload")) {
      if (strcmp(val, "dayshift")) {
        fprintf(stderr, "gpurt stats: unknown workload '%s' (known: dayshift)\n", val);
        return 2;
      }
    } else if (!strcmp(arg, "--events")) {
      if (!grt_cli_parse_u64(arg, val, &cfg.events)) return 2;
    } else if (!strcmp(arg, "--seed")) {
      if (!grt_cli_parse_u64(arg, val, &cfg.seed)) return 2;
    } else if (!strcmp(arg, "--format")) {
      if (strcmp(val, "summary") && strcmp(val, "json") && strcmp(val, "snapshot") && strcmp(val, "prometheus")) {
        fprintf(stderr, "gpurt stats: unknown format '%s'\n", val);
        return 2;
      }
      format = val;
    } else {
      fprintf(stderr, "gpurt stats: unknown option %s\n", arg);
      usage(stderr);
      return 2;
    }
  }
  grt_workload *w;
  grt_status st = grt_workload_create(&cfg, &w);
  if (st) {
    fprintf(stderr, "gpurt stats: cannot create the workload: %s (events must be >= 100)\n", grt_status_str(st));
    return 2;
  }
  grt_step_source src = grt_workload_source(w);
  grt_pace_config pace;
  grt_pace_config_default(&pace);
  st = grt_pace_run(&src, &pace, NULL);
  if (!st) st = print_report(w, format, abbreviated);
  if (st) fprintf(stderr, "gpurt stats: %s: %s\n", grt_status_str(st), grt_alloc_last_error(grt_workload_allocator(w)));
  grt_workload_destroy(w);
  return st ? 1 : 0;
}
