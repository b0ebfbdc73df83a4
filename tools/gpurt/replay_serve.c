/* replay_serve.c — `gpurt replay TRACE --serve HOST:PORT [--rate N]`: replays
 * a trace at a chosen pace while serving live /metrics, so a dashboard (or
 * curl) watches the trace's reserved, allocated and largest free block move
 * as PyTorch's did.
 *
 * The replay's allocator and device are registered in a grt_metrics; the
 * replay is a grt_step_source (one trace event per step) paced by
 * cli_serve_run (serve_run.c), the loop `gpurt serve-demo` uses. Order of
 * teardown: the server stops inside cli_serve_run, then the registry, the
 * replay and the trace are destroyed. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "cli_status.h"
#include "replay_run.h"
#include "replay_util.h"
#include "serve_run.h"

typedef struct replay_source {
  grt_replay *r;
  uint64_t n_events;
} replay_source;

/* One trace event per step; GRT_ERR_NOT_FOUND once all were applied. */
static grt_status replay_source_step(void *ctx) {
  replay_source *s = ctx;
  if (grt_replay_position(s->r) >= s->n_events) return GRT_ERR_NOT_FOUND;
  bool done;
  return grt_replay_step(s->r, &done);
}

typedef struct replay_done_ctx {
  grt_replay *r;
  const char *path;
  const char *policy;
  const char *format;
  uint64_t n_events;
  bool recorded;
  int failed; /* 1 when the summary could not be made (reported) */
  grt_device_model model;
} replay_done_ctx;

/* Once the replay ends, while /metrics is still served: the usual summary. */
static void replay_serve_done(void *ctx, grt_status st, uint64_t events, bool interrupted) {
  replay_done_ctx *d = ctx;
  (void)events;
  if (st) {
    fprintf(stderr, "gpurt replay: %s: %s (%s)\n", cli_basename(d->path), grt_replay_last_error(d->r),
            grt_status_str(st));
    return;
  }
  cli_run run;
  memset(&run, 0, sizeof run);
  run.trace_path = d->path;
  snprintf(run.policy, sizeof run.policy, "%s", d->policy);
  grt_status st_sum = grt_replay_get_summary(d->r, &run.sum);
  if (st_sum) {
    d->failed = cli_fail_status("replay", "grt_replay_get_summary", st_sum, NULL);
    return;
  }
  char b[32];
  printf("gpurt replay: %s (%s, %" PRIu64 " events%s)\npolicy %s on a %s %s%s\n\n", cli_basename(d->path),
         d->format, d->n_events, interrupted ? ", interrupted" : "", run.policy,
         grt_format_bytes(run.sum.capacity, b, sizeof b), cli_device_model_words(d->model),
         d->recorded ? " handing out the recorded segment addresses" : "");
  cli_print_summary(&run);
  fflush(stdout);
}

static int serve_loaded(const grt_trace *t, const char *path, const cli_run_opts *o, const cli_serve_opts *so_in) {
  grt_trace_info info;
  grt_status st = grt_trace_get_info(t, &info);
  if (st) return cli_fail_status("replay", "grt_trace_get_info", st, NULL);
  grt_replay_config c;
  cli_run_config(o, &c);
  c.record_series = false;
  grt_replay *r;
  bool rebuilt;
  if (cli_run_open(t, path, o, &c, &r, &rebuilt)) return 1;
  char device[16];
  snprintf(device, sizeof device, "%d", o->device);
  grt_metrics *m = NULL;
  st = grt_metrics_create(&m);
  if (!st) st = grt_metrics_add_allocator(m, grt_replay_allocator(r), NULL, device);
  if (!st) st = grt_metrics_add_device(m, grt_replay_device(r), device);
  int rc = 1;
  if (st) {
    fprintf(stderr, "gpurt replay: cannot register the replay's metrics: %s\n", grt_status_str(st));
  } else {
    replay_source rs = {r, info.n_events};
    grt_step_source src = {&rs, replay_source_step};
    bool recorded = c.placement == GRT_REPLAY_PLACE_RECORDED ||
        (c.placement == GRT_REPLAY_PLACE_AUTO && !strcmp(o->policy, "caching") &&
         info.format == GRT_TRACE_FORMAT_PYTORCH);
    replay_done_ctx dc = {r, path, o->policy, grt_trace_format_name(info.format), info.n_events, recorded, 0,
                          o->device_model};
    cli_serve_opts so = *so_in;
    so.done_word = "replay done";
    so.on_done = replay_serve_done;
    so.done_ctx = &dc;
    grt_pace_config pace;
    grt_pace_config_default(&pace);
    cli_serve_progress p = {grt_replay_allocator(r), info.n_events / 10 ? info.n_events / 10 : 1};
    pace.after_step = cli_serve_progress_step;
    pace.after_ctx = &p;
    char pace_text[48];
    if (so.rate > 0) snprintf(pace_text, sizeof pace_text, "%g events/s", so.rate);
    else snprintf(pace_text, sizeof pace_text, "full speed");
    fprintf(stderr, "gpurt: replaying %s (%" PRIu64 " events) at %s\n", cli_basename(path), info.n_events,
            pace_text);
    rc = cli_serve_run("replay", m, &src, &pace, &so);
    if (!rc) rc = dc.failed;
  }
  cli_first f = CLI_FIRST_INIT;
  /* the server is stopped: nothing reads the registry any more */
  cli_keep(&f, "grt_metrics_destroy", grt_metrics_destroy(m));
  cli_keep(&f, "grt_replay_destroy", grt_replay_destroy(r));
  if (f.st && !rc) rc = cli_fail_first("replay", &f); /* a failure before this one was reported */
  return rc;
}

int cli_replay_serve(const char *path, const cli_run_opts *o, const struct cli_serve_opts *so) {
  if (!cli_serve_available()) {
    fprintf(stderr, "gpurt replay: --serve needs the /metrics server, and this gpurt was built without "
                    "libmicrohttpd (install libmicrohttpd-dev and rebuild); `gpurt stats TRACE --format "
                    "prometheus` prints the metrics at the end of the replay instead\n");
    return 2;
  }
  grt_trace *t = cli_load_trace("replay", path, o->device);
  if (!t) return 1;
  int rc = serve_loaded(t, path, o, so);
  grt_status st = grt_trace_destroy(t);
  if (st && !rc) rc = cli_fail_status("replay", "grt_trace_destroy", st, NULL);
  return rc;
}
