/* cmd_stats.c — `gpurt stats [TRACE]`: runs a trace (any format the
 * replayer reads) or a built-in workload to its end and prints the
 * allocator's statistics as torch.cuda.memory_summary() does (plus the
 * largest-free-block line PyTorch lacks), or as memory_stats() JSON, a
 * snapshot in PyTorch's shape, or Prometheus text. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "input.h"
#include "cli_opts.h"
#include "cli_status.h"
#include "gpurt/report.h"
#include "scenarios/dayshift.h"
#include "replay_run.h"
#include "replay_util.h"

static void usage(FILE *f) {
  fprintf(f,
          "usage: gpurt stats TRACE [--policy P] [--capacity BYTES] [--conf STR] [--device N]\n"
          "                   [--device-model M] [--format summary|json|snapshot|prometheus] [--abbreviated]\n"
          "       gpurt stats [--workload dayshift] [--events N] [--seed S] [--format F] [--abbreviated]\n\n"
          "Replays TRACE (PyTorch snapshot pickle, gpurt native, RMM CSV, minimalloc CSV) through\n"
          "an allocator policy as `gpurt replay` does, or runs a built-in workload, to its end;\n"
          "then prints the allocator's statistics.\n"
          "  --policy P       trace: allocator policy (default caching)\n"
          "  --capacity BYTES trace: device capacity, e.g. 16G (default: automatic, as gpurt replay)\n"
          "  --conf STR       trace: allocator config, PYTORCH_CUDA_ALLOC_CONF style\n"
          "  --memory-fraction F  trace: per_process_memory_fraction F (0 < F <= 1) over --conf\n"
          "  --device N       trace: PyTorch snapshots: which device's trace (default 0)\n"
          "  --device-model M trace: the simulated device, paged (default) or contiguous (gpurt replay --help)\n"
          "  --workload NAME  dayshift: a serving day (reserved flat, allocated flat,\n"
          "                   largest free block sinking, a final OOM) [default]\n"
          "  --events N       length of the day in allocator events (default 20000)\n"
          "  --seed S         workload seed (default 1)\n"
          "  --format F       summary: torch.cuda.memory_summary() layout (default)\n"
          "                   json: torch.cuda.memory_stats() keys; snapshot: memory._snapshot()\n"
          "                   segments; prometheus: the /metrics exposition text\n"
          "  --abbreviated    summary without the per-pool rows\n");
  fputs(CLI_INPUT_HELP, f);
}

/* name: the `allocator` label (NULL: the policy name); device: the device index.
 * A failure goes to *f (nothing is printed then). */
static grt_status print_report(grt_allocator *a, grt_device *d, const char *name, int device, const char *format,
                               int abbreviated, const grt_snapshot_frames *fr, cli_first *f) {
  char *text = NULL;
  char dev[16];
  snprintf(dev, sizeof dev, "%d", device);
  if (!strcmp(format, "prometheus")) {
    grt_metrics *m;
    if (cli_keep(f, "grt_metrics_create", grt_metrics_create(&m))) return f->st;
    if (!cli_keep(f, "grt_metrics_add_allocator", grt_metrics_add_allocator(m, a, name, dev)) &&
        !cli_keep(f, "grt_metrics_add_device", grt_metrics_add_device(m, d, dev)))
      cli_keep(f, "grt_metrics_render", grt_metrics_render(m, &text, NULL));
    cli_keep(f, "grt_metrics_destroy", grt_metrics_destroy(m));
  } else if (!strcmp(format, "snapshot")) {
    grt_alloc_snapshot *snap;
    if (cli_keep_alloc(f, a, "grt_alloc_snapshot_take", grt_alloc_snapshot_take(a, &snap))) return f->st;
    cli_keep(f, "grt_snapshot_json_frames", grt_snapshot_json_frames(snap, device, fr, &text));
    grt_alloc_snapshot_free(snap);
  } else {
    grt_alloc_stats s;
    if (cli_keep_alloc(f, a, "grt_alloc_get_stats", grt_alloc_get_stats(a, &s))) return f->st;
    if (!strcmp(format, "json")) {
      cli_keep(f, "grt_stats_json", grt_stats_json(&s, &text));
    } else {
      grt_alloc_snapshot *snap;
      grt_free_space fs;
      if (cli_keep_alloc(f, a, "grt_alloc_snapshot_take", grt_alloc_snapshot_take(a, &snap))) return f->st;
      cli_keep(f, "grt_free_space_of", grt_free_space_of(snap, &fs));
      grt_alloc_snapshot_free(snap);
      if (!f->st) cli_keep(f, "grt_memory_summary", grt_memory_summary(&s, &fs, device, abbreviated, &text));
    }
  }
  if (!f->st) fputs(text, stdout);
  grt_report_free(text);
  return f->st;
}

/* A written snapshot's frames: the recorded stacks of what the replay holds. */
typedef struct replay_frames {
  grt_replay *r;
  const grt_trace *t;
} replay_frames;

static grt_status frames_at(void *ctx, grt_devptr address, bool segment, const grt_trace_frame **frames, size_t *n) {
  replay_frames *x = ctx;
  uint32_t stack;
  *n = 0;
  grt_status st = grt_replay_stack_at(x->r, address, segment, &stack);
  if (st || !stack) return st;
  return grt_trace_stack(x->t, stack, frames, n);
}

/* Replays a loaded trace to its end, then reports on the replay's allocator. */
static int stats_loaded(const grt_trace *t, const char *path, const cli_run_opts *o, const char *format,
                        int abbreviated) {
  grt_replay_config c;
  cli_run_config(o, &c);
  c.record_series = false;
  cli_progress prog;
  grt_trace_info info;
  grt_status st = grt_trace_get_info(t, &info);
  if (st) return cli_fail_status("stats", "grt_trace_get_info", st, NULL);
  cli_progress_init(&prog, cli_basename(path), info.n_events);
  c.on_step = cli_progress_step;
  c.step_ctx = &prog;
  grt_replay *r;
  bool rebuilt;
  if (cli_run_open(t, path, o, &c, &r, &rebuilt)) return 1;
  st = grt_replay_run(r);
  cli_progress_done(&prog);
  int rc = 0;
  cli_first f = CLI_FIRST_INIT;
  if (st) {
    fprintf(stderr, "gpurt stats: %s: %s (%s)\n", cli_basename(path), grt_replay_last_error(r), grt_status_str(st));
    rc = 1;
  } else {
    replay_frames x = {r, t};
    grt_snapshot_frames fr = {frames_at, &x};
    if (print_report(grt_replay_allocator(r), grt_replay_device(r), NULL, o->device, format, abbreviated, &fr, &f))
      rc = cli_fail_first("stats", &f);
  }
  st = grt_replay_destroy(r);
  if (st && !rc) rc = cli_fail_status("stats", "grt_replay_destroy", st, NULL); /* else: the first is reported */
  return rc;
}

/* A big native file, or a native trace on a pipe or compressed, streams
 * through the replay (memory follows the live allocations, not the events),
 * as `gpurt replay` does; no frames then. in: the opened input (NULL: the
 * file at path). */
static int stats_streamed(const char *path, cli_input *in, grt_trace_format in_format, const cli_run_opts *o,
                          const char *format, int abbreviated) {
  grt_replay_config c;
  cli_run_config(o, &c);
  c.record_series = false;
  cli_progress prog;
  cli_progress_init(&prog, cli_basename(path), 0);
  c.on_step = cli_progress_step;
  c.step_ctx = &prog;
  grt_replay *r;
  grt_status st = grt_replay_create(&c, NULL, &r);
  if (st) return cli_fail_status("stats", "grt_replay_create", st, NULL);
  int rc = 0;
  if (in) {
    rc = cli_feed_input("stats", path, in, in_format, r);
  } else {
    grt_trace_error err;
    memset(&err, 0, sizeof err);
    if ((st = grt_replay_feed_native_file(r, path, &err))) {
      char msg[600];
      if (grt_trace_error_format(&err, msg, sizeof msg)) snprintf(msg, sizeof msg, "%s", cli_basename(path));
      fprintf(stderr, "gpurt stats: %s (%s)\n", msg, grt_status_str(st));
      rc = 1;
    }
  }
  cli_progress_done(&prog);
  cli_first f = CLI_FIRST_INIT;
  if (!rc && print_report(grt_replay_allocator(r), grt_replay_device(r), NULL, o->device, format, abbreviated, NULL,
                          &f))
    rc = cli_fail_first("stats", &f);
  st = grt_replay_destroy(r);
  if (st && !rc) rc = cli_fail_status("stats", "grt_replay_destroy", st, NULL); /* else: the first is reported */
  return rc;
}

/* Replays a trace to its end, then reports on the replay's allocator. */
static int stats_trace(const char *path, const cli_run_opts *o, const char *format, int abbreviated) {
  bool frames = !strcmp(format, "snapshot");
  if (!frames && cli_streams(path)) return stats_streamed(path, NULL, GRT_TRACE_FORMAT_NATIVE, o, format, abbreviated);
  grt_trace *t;
  grt_trace_format in_format;
  if (cli_opens_input(path)) { /* a pipe, compressed or big: opened once, streamed when its format allows */
    char why[300];
    cli_input *in = cli_input_open(path, why, sizeof why);
    if (!in) return fprintf(stderr, "gpurt stats: %s: %s\n", cli_input_name(path), why), 1;
    if (!frames && cli_input_streams(in, &in_format)) {
      int rc = stats_streamed(path, in, in_format, o, format, abbreviated);
      cli_input_close(in);
      return rc;
    }
    t = cli_load_input("stats", path, in, o->device);
    cli_input_close(in);
  } else {
    t = cli_load_trace("stats", path, o->device);
  }
  if (!t) return 1;
  int rc = stats_loaded(t, path, o, format, abbreviated);
  grt_status st = grt_trace_destroy(t);
  if (st && !rc) rc = cli_fail_status("stats", "grt_trace_destroy", st, NULL); /* else: the first is reported */
  return rc;
}

static void day_progress(void *ctx, uint64_t events_done) { cli_progress_tick(ctx, events_done); }

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
  cli_progress prog; /* a long day shows its progress on a terminal */
  cli_progress_init(&prog, "dayshift", cfg->events);
  pace.after_step = day_progress;
  pace.after_ctx = &prog;
  int rc = 0;
  cli_first f = CLI_FIRST_INIT;
  st = grt_pace_run(&src, &pace, NULL);
  cli_progress_done(&prog);
  if (cli_keep_alloc(&f, grt_dayshift_allocator(w), "grt_pace_run", st) ||
      print_report(grt_dayshift_allocator(w), grt_dayshift_device(w), "dayshift", 0, format, abbreviated, NULL, &f))
    rc = cli_fail_first("stats", &f);
  st = grt_dayshift_destroy(w);
  if (st && !rc) rc = cli_fail_status("stats", "grt_dayshift_destroy", st, NULL); /* else: the first is reported */
  return rc;
}

typedef struct stats_args {
  grt_dayshift_config cfg;
  cli_run_opts o;
  const char *format, *path;
  const char *trace_opt, *workload_opt; /* the last option of each kind given */
  int abbreviated;
} stats_args;

enum {
  ST_POLICY = 256, ST_CAPACITY, ST_CONF, ST_FRACTION, ST_DEVICE, ST_DEVICE_MODEL, ST_WORKLOAD, ST_EVENTS, ST_SEED, ST_FORMAT,
  ST_ABBREVIATED
};

static const struct option stats_options[] = {
    {"policy", required_argument, NULL, ST_POLICY},
    {"capacity", required_argument, NULL, ST_CAPACITY},
    {"device-model", required_argument, NULL, ST_DEVICE_MODEL},
    {"conf", required_argument, NULL, ST_CONF},
    {"memory-fraction", required_argument, NULL, ST_FRACTION},
    {"device", required_argument, NULL, ST_DEVICE},
    {"workload", required_argument, NULL, ST_WORKLOAD},
    {"events", required_argument, NULL, ST_EVENTS},
    {"seed", required_argument, NULL, ST_SEED},
    {"format", required_argument, NULL, ST_FORMAT},
    {"abbreviated", no_argument, NULL, ST_ABBREVIATED},
    CLI_OPT_MAX_INPUT_ENTRY,
    CLI_OPT_HELP_ENTRY,
    {NULL, 0, NULL, 0},
};

static const char *const formats[] = {"summary", "json", "snapshot", "prometheus"};
static const char *const workloads[] = {"dayshift"};

/* One option (c, the val getopt returned); false when it is refused. */
static bool stats_option(const cli_opts *p, int c, stats_args *a) {
  size_t i;
  bool ok = true;
  switch (c) {
  case ST_POLICY: a->o.policy = p->arg; break;
  case ST_CAPACITY: ok = cli_opt_bytes(p, &a->o.capacity); break;
  case ST_DEVICE_MODEL: ok = cli_opt_device_model(p, &a->o.device_model); break;
  case ST_CONF: a->o.conf = p->arg; break;
  case ST_FRACTION: ok = cli_opt_fraction(p, &a->o.memory_fraction); break;
  case ST_DEVICE: ok = cli_opt_device(p, &a->o.device); break;
  case ST_WORKLOAD: ok = cli_opt_choice(p, workloads, sizeof workloads / sizeof workloads[0], &i); break;
  case ST_EVENTS: ok = cli_opt_u64(p, 100, UINT64_MAX, &a->cfg.events) /* a day needs 100 */; break;
  case ST_SEED: ok = cli_opt_u64(p, 0, UINT64_MAX, &a->cfg.seed); break;
  case ST_FORMAT:
    ok = cli_opt_choice(p, formats, sizeof formats / sizeof formats[0], &i);
    if (ok) a->format = formats[i];
    break;
  case ST_ABBREVIATED: a->abbreviated = 1; break;
  default: return false; /* CLI_OPT_ERROR: already reported */
  }
  if (c == ST_POLICY || c == ST_CAPACITY || c == ST_CONF || c == ST_FRACTION || c == ST_DEVICE || c == ST_DEVICE_MODEL)
    a->trace_opt = p->name;
  if (c == ST_WORKLOAD || c == ST_EVENTS || c == ST_SEED) a->workload_opt = p->name;
  return ok;
}

/* CLI_ARGS_OK or the exit status. */
static int stats_parse(int argc, char **argv, stats_args *a) {
  cli_opts p;
  cli_opts_init(&p, "stats", argc, argv, stats_options, false);
  if (p.help) {
    usage(stdout);
    return 0;
  }
  for (int c; (c = cli_opts_next(&p)) != CLI_OPT_END;) {
    if (c == CLI_OPT_POSITIONAL) {
      if (a->path) return cli_opts_fail(&p, "one trace at a time");
      a->path = p.arg;
    } else if (!stats_option(&p, c, a)) {
      return 2;
    }
  }
  if (a->path && a->workload_opt)
    return cli_opts_fail(&p, "--%s is for the built-in workload, not a trace", a->workload_opt);
  if (!a->path && a->trace_opt)
    return cli_opts_fail(&p, "--%s goes with a trace: gpurt stats TRACE --%s ...", a->trace_opt, a->trace_opt);
  if (a->abbreviated && strcmp(a->format, "summary"))
    return cli_opts_fail(&p, "--abbreviated shortens the summary, not --format %s", a->format);
  return cli_run_opts_settle(&p, &a->o);
}

int grt_cmd_stats(int argc, char **argv) {
  stats_args a = {.format = "summary"};
  grt_dayshift_config_default(&a.cfg);
  cli_run_opts_default(&a.o);
  a.o.cmd = "stats";
  int rc = stats_parse(argc, argv, &a);
  if (rc != CLI_ARGS_OK) return rc;
  return a.path ? stats_trace(a.path, &a.o, a.format, a.abbreviated) : stats_workload(&a.cfg, a.format, a.abbreviated);
}
