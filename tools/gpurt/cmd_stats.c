/* cmd_stats.c — `gpurt stats [TRACE]`: runs a trace (any format the
 * replayer reads) or a built-in workload to its end and prints the
 * allocator's statistics as torch.cuda.memory_summary() does (plus the
 * largest-free-block line PyTorch lacks), or as memory_stats() JSON, a
 * snapshot in PyTorch's shape, or Prometheus text. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "gpurt/report.h"
#include "scenarios/dayshift.h"
#include "replay_run.h"
#include "replay_util.h"

static void usage(FILE *f) {
  fprintf(f,
          "usage: gpurt stats TRACE [--policy P] [--capacity BYTES] [--conf STR] [--device N]\n"
          "                   [--format summary|json|snapshot|prometheus] [--abbreviated]\n"
          "       gpurt stats [--workload dayshift] [--events N] [--seed S] [--format F] [--abbreviated]\n\n"
          "Replays TRACE (PyTorch snapshot pickle, gpurt native, RMM CSV, minimalloc CSV) through\n"
          "an allocator policy as `gpurt replay` does, or runs a built-in workload, to its end;\n"
          "then prints the allocator's statistics.\n"
          "  --policy P       trace: allocator policy (default caching)\n"
          "  --capacity BYTES trace: device capacity, e.g. 16G (default: automatic, as gpurt replay)\n"
          "  --conf STR       trace: allocator config, PYTORCH_CUDA_ALLOC_CONF style\n"
          "  --device N       trace: PyTorch snapshots: which device's trace (default 0)\n"
          "  --workload NAME  dayshift: a serving day (reserved flat, allocated flat,\n"
          "                   largest free block sinking, a final OOM) [default]\n"
          "  --events N       length of the day in allocator events (default 20000)\n"
          "  --seed S         workload seed (default 1)\n"
          "  --format F       summary: torch.cuda.memory_summary() layout (default)\n"
          "                   json: torch.cuda.memory_stats() keys; snapshot: memory._snapshot()\n"
          "                   segments; prometheus: the /metrics exposition text\n"
          "  --abbreviated    summary without the per-pool rows\n");
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

/* name: the `allocator` label (NULL: the policy name); device: the device index. */
static grt_status print_report(grt_allocator *a, grt_device *d, const char *name, int device, const char *format,
                               int abbreviated) {
  char *text = NULL;
  grt_status st;
  char dev[16];
  snprintf(dev, sizeof dev, "%d", device);
  if (!strcmp(format, "prometheus")) {
    grt_metrics *m;
    if ((st = grt_metrics_create(&m))) return st;
    st = grt_metrics_add_allocator(m, a, name, dev);
    if (!st) st = grt_metrics_add_device(m, d, dev);
    if (!st) st = grt_metrics_render(m, &text, NULL);
    grt_metrics_destroy(m);
  } else if (!strcmp(format, "snapshot")) {
    grt_alloc_snapshot *snap;
    if ((st = grt_alloc_snapshot_take(a, &snap))) return st;
    st = grt_snapshot_json(snap, device, &text);
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
      if (!st) st = grt_memory_summary(&s, &fs, device, abbreviated, &text);
    }
  }
  if (!st) fputs(text, stdout);
  grt_report_free(text);
  return st;
}

/* Replays a trace to its end, then reports on the replay's allocator. */
static int stats_trace(const char *path, const cli_run_opts *o, const char *format, int abbreviated) {
  grt_trace *t = cli_load_trace("stats", path, o->device);
  if (!t) return 1;
  grt_replay_config c;
  cli_run_config(o, &c);
  c.record_series = false;
  cli_progress prog;
  grt_trace_info info;
  grt_trace_get_info(t, &info);
  cli_progress_init(&prog, cli_basename(path), info.n_events);
  c.on_step = cli_progress_step;
  c.step_ctx = &prog;
  grt_replay *r;
  grt_status st = grt_replay_open(t, &c, &r);
  if (st) {
    fprintf(stderr, "gpurt stats: cannot replay %s with policy '%s': %s\n", cli_basename(path), o->policy,
            st == GRT_ERR_NOT_FOUND ? "no such policy" : grt_status_str(st));
    grt_trace_destroy(t);
    return 1;
  }
  st = grt_replay_run(r);
  cli_progress_done(&prog);
  if (st) {
    fprintf(stderr, "gpurt stats: %s: %s (%s)\n", cli_basename(path), grt_replay_last_error(r), grt_status_str(st));
  } else {
    st = print_report(grt_replay_allocator(r), grt_replay_device(r), NULL, o->device, format, abbreviated);
    if (st) fprintf(stderr, "gpurt stats: %s\n", grt_status_str(st));
  }
  grt_replay_destroy(r);
  grt_trace_destroy(t);
  return st ? 1 : 0;
}

static int stats_workload(const grt_dayshift_config *cfg, const char *format, int abbreviated) {
  grt_dayshift *w;
  grt_status st = grt_dayshift_create(cfg, &w);
  if (st) {
    fprintf(stderr, "gpurt stats: cannot create the workload: %s (events must be >= 100)\n", grt_status_str(st));
    return 2;
  }
  grt_step_source src = grt_dayshift_source(w);
  grt_pace_config pace;
  grt_pace_config_default(&pace);
  st = grt_pace_run(&src, &pace, NULL);
  if (!st) st = print_report(grt_dayshift_allocator(w), grt_dayshift_device(w), "dayshift", 0, format, abbreviated);
  if (st) fprintf(stderr, "gpurt stats: %s: %s\n", grt_status_str(st), grt_alloc_last_error(grt_dayshift_allocator(w)));
  grt_dayshift_destroy(w);
  return st ? 1 : 0;
}

int grt_cmd_stats(int argc, char **argv) {
  if (grt_cli_wants_help(argc, argv)) {
    usage(stdout);
    return 0;
  }
  grt_dayshift_config cfg;
  grt_dayshift_config_default(&cfg);
  cli_run_opts o;
  cli_run_opts_default(&o);
  const char *format = "summary", *path = NULL, *trace_opt = NULL, *workload_opt = NULL;
  int abbreviated = 0;
  for (int i = 1; i < argc; i++) {
    const char *arg = argv[i], *val = i + 1 < argc ? argv[i + 1] : NULL;
    if (!strcmp(arg, "--abbreviated")) {
      abbreviated = 1;
      continue;
    }
    if (arg[0] != '-' || !arg[1]) {
      if (path) {
        fprintf(stderr, "gpurt stats: one trace at a time\n");
        return 2;
      }
      path = arg;
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
        fprintf(stderr, "gpurt stats: unknown workload '%s' (known: dayshift; or give a trace file)\n", val);
        return 2;
      }
      workload_opt = arg;
    } else if (!strcmp(arg, "--events")) {
      if (!grt_cli_parse_u64(arg, val, &cfg.events)) return 2;
      workload_opt = arg;
    } else if (!strcmp(arg, "--seed")) {
      if (!grt_cli_parse_u64(arg, val, &cfg.seed)) return 2;
      workload_opt = arg;
    } else if (!strcmp(arg, "--policy")) {
      o.policy = val;
      trace_opt = arg;
    } else if (!strcmp(arg, "--capacity")) {
      if (!cli_parse_bytes(val, &o.capacity) || !o.capacity) {
        fprintf(stderr, "gpurt stats: --capacity '%s' is not a size (e.g. 16G, 512M, 1048576)\n", val);
        return 2;
      }
      trace_opt = arg;
    } else if (!strcmp(arg, "--conf")) {
      o.conf = val;
      trace_opt = arg;
    } else if (!strcmp(arg, "--device")) {
      uint64_t d;
      if (!grt_cli_parse_u64(arg, val, &d)) return 2;
      if (d > 1024) {
        fprintf(stderr, "gpurt stats: --device %s is out of range\n", val);
        return 2;
      }
      o.device = (int)d;
      trace_opt = arg;
    } else if (!strcmp(arg, "--format")) {
      if (strcmp(val, "summary") && strcmp(val, "json") && strcmp(val, "snapshot") && strcmp(val, "prometheus")) {
        fprintf(stderr, "gpurt stats: unknown format '%s' (summary, json, snapshot or prometheus)\n", val);
        return 2;
      }
      format = val;
    } else {
      fprintf(stderr, "gpurt stats: unknown option %s\n", arg);
      usage(stderr);
      return 2;
    }
  }
  if (path && workload_opt) {
    fprintf(stderr, "gpurt stats: %s is for the built-in workload, not a trace\n", workload_opt);
    return 2;
  }
  if (!path && trace_opt) {
    fprintf(stderr, "gpurt stats: %s goes with a trace (gpurt stats TRACE %s ...)\n", trace_opt, trace_opt);
    return 2;
  }
  return path ? stats_trace(path, &o, format, abbreviated) : stats_workload(&cfg, format, abbreviated);
}
