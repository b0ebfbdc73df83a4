/* replay_run.c — see replay_run.h. */
#include "replay_run.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli_opts.h"
#include "cli_status.h"
#include "replay_util.h"

#define SEARCH_AUTO_MAX_EVENTS 2000000u

void cli_run_opts_default(cli_run_opts *o) {
  memset(o, 0, sizeof *o);
  o->cmd = "replay";
  o->policy = "caching";
  o->honor_releases = true;
  o->search = -1;
  o->device_model = GRT_DEVICE_MODEL_PAGED;
}

int cli_run_opts_settle(const cli_opts *p, cli_run_opts *o) {
  int cap = cli_opts_check_capacity(p, o->capacity, o->device_model);
  if (cap != CLI_ARGS_OK) return cap;
  if (o->memory_fraction > 0) {
    const char *conf = o->conf ? o->conf : "";
    int n = snprintf(o->conf_joined, sizeof o->conf_joined, "%s%sper_process_memory_fraction:%.17g", conf,
                     *conf ? "," : "", o->memory_fraction);
    if (n < 0 || (size_t)n >= sizeof o->conf_joined) return cli_opts_fail(p, "--conf is too long");
    o->conf = o->conf_joined;
  }
  if (!o->conf) return CLI_ARGS_OK;
  grt_alloc_config cfg;
  grt_alloc_config_default(&cfg);
  char err[256], notes[GRT_ALLOC_CONFIG_NOTES_SIZE];
  if (grt_alloc_config_parse_notes(&cfg, o->conf, err, sizeof err, notes, sizeof notes))
    return cli_opts_fail(p, "--conf '%s': %s", o->conf, err);
  for (const char *line = notes; *line;) {
    size_t len = strcspn(line, "\n");
    fprintf(stderr, "gpurt %s: note: %.*s\n", p->cmd, (int)len, line);
    line += len + (line[len] == '\n');
  }
  return CLI_ARGS_OK;
}

const char *cli_device_model_words(grt_device_model m) {
  return m == GRT_DEVICE_MODEL_PAGED ? "paged device (any free 2 MiB pages serve a request)"
                                     : "contiguous device (first fit: a request needs one hole)";
}

void cli_run_config(const cli_run_opts *o, grt_replay_config *c) {
  grt_replay_config_default(c);
  c->policy = o->policy;
  c->alloc_conf = o->conf;
  c->capacity = o->capacity;
  /* A chosen capacity asks "what if the device were this big": recorded
     addresses (which need the recorded address span) would answer another
     question, so auto placement turns to first fit then. */
  c->placement = o->placement == GRT_REPLAY_PLACE_AUTO && o->capacity ? GRT_REPLAY_PLACE_FIRST_FIT : o->placement;
  c->honor_releases = o->honor_releases;
  c->record_series = o->series;
  c->device_model = o->device_model;
}

static int report_error(const cli_run_opts *o, const char *path, grt_replay *r, grt_status st) {
  fprintf(stderr, "gpurt %s: %s: %s (%s)\n", o->cmd, cli_basename(path), r ? grt_replay_last_error(r) : "",
          grt_status_str(st));
  return 1;
}

/* "gpurt CMD: TRACE: CALL: NAME (message)"; returns 1. */
static int report_first(const cli_run_opts *o, const char *path, const cli_first *f) {
  char what[320];
  snprintf(what, sizeof what, "%s: %s", cli_basename(path), f->what);
  return cli_fail_status(o->cmd, what, f->st, f->msg);
}

static int report_open(const cli_run_opts *o, const char *path, grt_status st) {
  fprintf(stderr, "gpurt %s: cannot replay %s with policy '%s': %s\n", o->cmd, cli_basename(path), o->policy,
          st == GRT_ERR_NOT_FOUND ? "no such policy" : grt_status_str(st));
  return 1;
}

typedef struct snap_ctx {
  cli_run *run;
  cli_progress *progress;
} snap_ctx;

static grt_status take_snaps(void *ctx, grt_replay *r, const grt_trace_event *ev, uint64_t index) {
  snap_ctx *s = ctx;
  (void)ev;
  grt_status st = GRT_OK;
  if (index == s->run->peak_event && !s->run->at_peak)
    st = grt_alloc_snapshot_take(grt_replay_allocator(r), &s->run->at_peak);
  if (!st && s->run->sum.has_oom && index == s->run->oom_event && !s->run->at_oom)
    st = grt_alloc_snapshot_take(grt_replay_allocator(r), &s->run->at_oom);
  return st; /* a failure stops the replay, which returns it */
}

/* Replays t again to take the segment maps at the peak and the first OOM; a
 * failure goes to *f. */
static void second_pass(const grt_trace *t, const grt_replay_config *base, cli_run *run, cli_first *f) {
  grt_replay_config c = *base;
  snap_ctx sc = {run, NULL};
  c.record_series = false;
  c.on_step = take_snaps;
  c.step_ctx = &sc;
  grt_replay *r;
  if (cli_keep(f, "grt_replay_open (snapshot pass)", grt_replay_open(t, &c, &r))) return;
  if (run->rebuilt && cli_keep(f, "grt_replay_rebuild_start (snapshot pass)", grt_replay_rebuild_start(r)))
    snprintf(f->msg, sizeof f->msg, "%s", grt_replay_last_error(r));
  else if (cli_keep(f, "grt_replay_run (snapshot pass)", grt_replay_run(r)))
    snprintf(f->msg, sizeof f->msg, "%s", grt_replay_last_error(r));
  cli_keep(f, "grt_replay_destroy", grt_replay_destroy(r));
}

int cli_run_open(const grt_trace *t, const char *path, const cli_run_opts *o, const grt_replay_config *c,
                 grt_replay **out, bool *rebuilt) {
  grt_trace_info info;
  grt_status st = grt_trace_get_info(t, &info);
  if (!st) st = grt_replay_open(t, c, out);
  if (st) return report_open(o, path, st);
  /* the caching policy on the recorded addresses can start where the snapshot starts */
  *rebuilt = info.format == GRT_TRACE_FORMAT_PYTORCH && !o->from_empty && !strcmp(o->policy, "caching") &&
             c->placement != GRT_REPLAY_PLACE_FIRST_FIT;
  if (!*rebuilt || !(st = grt_replay_rebuild_start(*out))) return 0;
  report_error(o, path, *out, st);
  grt_status dst = grt_replay_destroy(*out);
  *out = NULL;
  if (dst) cli_fail_status(o->cmd, "grt_replay_destroy", dst, NULL); /* reported as well */
  return 1;
}

int cli_run_loaded(const grt_trace *t, const char *path, const cli_run_opts *o, cli_run *run) {
  memset(run, 0, sizeof *run);
  run->trace_path = path;
  snprintf(run->policy, sizeof run->policy, "%s", o->policy);
  grt_trace_info info;
  cli_first f = CLI_FIRST_INIT;
  if (cli_keep(&f, "grt_trace_get_info", grt_trace_get_info(t, &info))) return report_first(o, path, &f);
  run->format = grt_trace_format_name(info.format);
  run->n_events = info.n_events;
  grt_replay_config c;
  cli_run_config(o, &c);
  cli_progress prog;
  char label[96];
  snprintf(label, sizeof label, "%s/%s", cli_basename(path), o->policy);
  cli_progress_init(&prog, label, info.n_events);
  c.on_step = cli_progress_step;
  c.step_ctx = &prog;
  grt_replay *r;
  if (cli_run_open(t, path, o, &c, &r, &run->rebuilt)) return 1;
  if (info.format == GRT_TRACE_FORMAT_PYTORCH) run->have_recorded = grt_trace_recorded_figures(t, &run->rec) == GRT_OK;
  grt_status st = grt_replay_run(r);
  cli_progress_done(&prog);
  if (cli_keep(&f, "grt_replay_run", st)) report_error(o, path, r, st); /* now: its message goes with r */
  if (!f.st) cli_keep(&f, "grt_replay_get_summary", grt_replay_get_summary(r, &run->sum));
  run->recorded = c.placement == GRT_REPLAY_PLACE_RECORDED ||
                  (c.placement == GRT_REPLAY_PLACE_AUTO && !strcmp(o->policy, "caching") &&
                   info.format == GRT_TRACE_FORMAT_PYTORCH);
  const grt_replay_sample *s = NULL;
  size_t n = 0;
  if (!f.st) cli_keep(&f, "grt_replay_series", grt_replay_series(r, &s, &n));
  if (!f.st && o->series && n) {
    run->samples = malloc(n * sizeof *s);
    if (run->samples) {
      memcpy(run->samples, s, n * sizeof *s);
      run->n_samples = n;
      run->have_series = true;
    }
  }
  cli_keep(&f, "grt_replay_destroy", grt_replay_destroy(r));
  run->peak_event = run->sum.peak_reserved_event;
  run->oom_event = run->sum.first_oom_event;
  if (!f.st && o->snapshots && run->have_series) {
    c.on_step = NULL;
    second_pass(t, &c, run, &f);
  }
  if (f.st) {
    cli_run_free(run);
    return st ? 1 : report_first(o, path, &f); /* a failed run was reported above */
  }
  bool search = o->search == 1 || (o->search == -1 && info.n_events < SEARCH_AUTO_MAX_EVENTS);
  if (search) {
    uint64_t cap = 0, live = 0;
    cli_run_config(o, &c);
    st = grt_replay_min_capacity(t, &c, 0, &cap, &live);
    if (st == GRT_OK && live) {
      run->min_capacity = cap;
      run->heap_ratio = (double)cap / (double)live;
    } else {
      run->search_failed = true;
      snprintf(run->search_note, sizeof run->search_note, "%s",
               st == GRT_ERR_OOM ? "OOMs even on a 1 TiB device" : live ? grt_status_str(st) : "no live bytes");
    }
  }
  return 0;
}

/* A streamed native run's record and replay config, its progress bar on the steps. */
static void stream_setup(const char *path, const cli_run_opts *o, cli_run *run, grt_replay_config *c,
                         cli_progress *prog) {
  memset(run, 0, sizeof *run);
  run->trace_path = path;
  run->format = "native";
  snprintf(run->policy, sizeof run->policy, "%s", o->policy);
  cli_run_config(o, c);
  cli_progress_init(prog, cli_basename(path), 0);
  c->on_step = cli_progress_step;
  c->step_ctx = prog;
}

static int stream_run(const char *path, const cli_run_opts *o, cli_run *run) {
  grt_replay_config c;
  cli_progress prog;
  stream_setup(path, o, run, &c, &prog);
  grt_trace_error err;
  memset(&err, 0, sizeof err);
  grt_status st = grt_replay_stream_file(path, &c, &run->sum, &err);
  cli_progress_done(&prog);
  if (st && !err.file[0]) return report_open(o, path, st); /* the replay could not even start */
  if (st) {
    char msg[600];
    if (grt_trace_error_format(&err, msg, sizeof msg)) snprintf(msg, sizeof msg, "%s", cli_basename(path));
    fprintf(stderr, "gpurt %s: %s (%s)\n", o->cmd, msg, grt_status_str(st));
    return 1;
  }
  run->n_events = run->sum.events;
  return 0;
}

/* A trace in a format that streams (native, RMM CSV) on a pipe, standard
 * input, compressed or big: replayed as it is decoded, on this thread (its
 * size is unknown up front, so no capacity search). */
static int stream_input(const char *path, cli_input *in, grt_trace_format format, const cli_run_opts *o,
                        cli_run *run) {
  grt_replay_config c;
  cli_progress prog;
  stream_setup(path, o, run, &c, &prog);
  grt_replay *r;
  grt_status st = grt_replay_create(&c, NULL, &r);
  if (st) return report_open(o, path, st);
  run->format = grt_trace_format_name(format);
  int rc = cli_feed_input(o->cmd, path, in, format, r);
  cli_progress_done(&prog);
  if (!rc && (st = grt_replay_get_summary(r, &run->sum))) rc = cli_fail_status(o->cmd, "grt_replay_get_summary", st, NULL);
  run->n_events = run->sum.events;
  st = grt_replay_destroy(r);
  if (st && !rc) rc = cli_fail_status(o->cmd, "grt_replay_destroy", st, NULL);
  return rc;
}

/* Opens a pipe, compressed or big input once: streamed when its format
 * allows and nothing needs the whole trace, else held (up to --max-input-size). *t gets the
 * loaded trace, or stays NULL when the input was streamed (rc in *rc). */
static void open_input(const char *path, const cli_run_opts *o, cli_run *run, grt_trace **t, int *rc) {
  char why[300];
  *t = NULL;
  cli_input *in = cli_input_open(path, why, sizeof why);
  if (!in) {
    fprintf(stderr, "gpurt %s: %s: %s\n", o->cmd, cli_input_name(path), why);
    *rc = 1;
    return;
  }
  grt_trace_format format;
  if (cli_input_streams(in, &format) && !o->series && !o->snapshots && o->search != 1)
    *rc = stream_input(path, in, format, o, run);
  else if (!(*t = cli_load_input(o->cmd, path, in, o->device)))
    *rc = 1;
  cli_input_close(in);
}

int cli_run_trace(const char *path, const cli_run_opts *o, cli_run *run) {
  /* big native files stream (memory follows the live allocations); small ones load, for the search */
  if (cli_is_native(path) && !o->series && !o->snapshots && (o->search == 0 || (o->search == -1 && cli_streams(path))))
    return stream_run(path, o, run);
  grt_trace *t = NULL;
  if (cli_opens_input(path)) {
    int rc = 0;
    open_input(path, o, run, &t, &rc);
    if (!t) return rc;
  } else if (!(t = cli_load_trace(o->cmd, path, o->device))) {
    return 1;
  }
  int rc = cli_run_loaded(t, path, o, run);
  grt_status st = grt_trace_destroy(t);
  if (st && !rc) {
    cli_run_free(run);
    rc = cli_fail_status("replay", "grt_trace_destroy", st, NULL);
  }
  return rc;
}

void cli_run_free(cli_run *run) {
  free(run->samples);
  grt_alloc_snapshot_free(run->at_peak);
  grt_alloc_snapshot_free(run->at_oom);
  memset(run, 0, sizeof *run);
}
