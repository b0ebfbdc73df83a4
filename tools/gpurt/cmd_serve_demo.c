/* cmd_serve_demo.c — `gpurt serve-demo`: replays the built-in serving day
 * (dayshift) at a chosen pace while serving live metrics at /metrics, so a
 * dashboard shows the day-3 story as it happens: reserved flat, allocated
 * flat, largest free block sinking, then the OOM.
 *
 * The run is a grt_step_source driven by grt_pace_run; `gpurt replay TRACE
 * --serve` plugs a trace replayer's step function into the same loop
 * (see run_served below). */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"
#include "gpurt/report.h"

#ifdef GRT_HAVE_SERVE
#include "gpurt/serve.h"

static volatile sig_atomic_t stop_requested;

static void on_signal(int sig) {
  (void)sig;
  stop_requested = 1;
}

static void usage(FILE *f) {
  fprintf(f,
          "usage: gpurt serve-demo [--serve HOST:PORT] [--rate EVENTS_PER_S] [--events N] [--seed S]\n"
          "                        [--wait-scrape SECONDS] [--linger SECONDS]\n\n"
          "Runs the dayshift serving day at the given pace while serving Prometheus\n"
          "metrics at http://HOST:PORT/metrics (try: curl 127.0.0.1:9400/metrics).\n"
          "  --serve HOST:PORT     listen address (default 127.0.0.1:9400; port 0 = any free port)\n"
          "  --rate N              allocator events per second (default 500; 0 = as fast as possible)\n"
          "  --events N            length of the day in events (default 20000)\n"
          "  --seed S              workload seed (default 1)\n"
          "  --wait-scrape S       start the day only after the first scrape (or S seconds)\n"
          "  --linger S            keep serving S seconds after the day ends (default: until Ctrl-C)\n");
}

static void sleep_s(double s) {
  struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
  nanosleep(&ts, NULL);
}

typedef struct progress {
  grt_allocator *a;
  uint64_t every;
} progress;

/* Prints a line every tenth of the day: what the dashboard should be showing. */
static void report_progress(void *ctx, uint64_t done) {
  progress *p = ctx;
  if (done % p->every) return;
  grt_alloc_stats s;
  if (grt_alloc_get_stats(p->a, &s)) return;
  char r[32], al[32], lf[32];
  fprintf(stderr, "  %8llu events  reserved %s  allocated %s  largest free block %s  ooms %llu\n",
          (unsigned long long)done, grt_format_bytes((uint64_t)s.reserved_bytes[GRT_STAT_ALL].current, r, sizeof r),
          grt_format_bytes((uint64_t)s.allocated_bytes[GRT_STAT_ALL].current, al, sizeof al),
          grt_format_bytes(s.largest_free_block, lf, sizeof lf), (unsigned long long)s.num_ooms);
}

/* Serves m while src runs at pace; then lingers. The replayer's hook point. */
static int run_served(grt_metrics *m, const grt_serve_config *sc, const grt_step_source *src, grt_pace_config *pace,
                      double wait_scrape, double linger) {
  char err[256];
  grt_metrics_server *srv;
  grt_status st = grt_metrics_serve(m, sc, &srv, err, sizeof err);
  if (st) {
    fprintf(stderr, "gpurt: cannot serve metrics: %s\n", err);
    return 1;
  }
  fprintf(stderr, "gpurt: serving metrics at http://%s:%u/metrics\n", sc->address,
          (unsigned)grt_metrics_server_port(srv));
  for (double t = 0; t < wait_scrape && !stop_requested && !grt_metrics_server_scrapes(srv); t += 0.05) sleep_s(0.05);
  pace->stop = &stop_requested;
  uint64_t events = 0;
  st = grt_pace_run(src, pace, &events);
  fprintf(stderr, "gpurt: %s after %llu events\n",
          st ? grt_status_str(st) : stop_requested ? "interrupted" : "day done", (unsigned long long)events);
  if (linger < 0 && !stop_requested) fprintf(stderr, "gpurt: still serving; Ctrl-C to stop\n");
  for (double t = 0; (linger < 0 || t < linger) && !stop_requested; t += 0.05) sleep_s(0.05);
  grt_metrics_server_stop(srv);
  return st ? 1 : 0;
}

static int parse_seconds(const char *flag, const char *text, double *out) {
  char *end;
  double v = strtod(text, &end);
  if (*end || !(v >= 0) || v > 1e7) {
    fprintf(stderr, "gpurt serve-demo: %s needs a number of seconds >= 0, got '%s'\n", flag, text);
    return 0;
  }
  *out = v;
  return 1;
}

int grt_cmd_serve_demo(int argc, char **argv) {
  if (grt_cli_wants_help(argc, argv)) {
    usage(stdout);
    return 0;
  }
  grt_serve_config sc;
  grt_serve_config_default(&sc);
  grt_workload_config wc;
  grt_workload_config_default(&wc);
  grt_pace_config pace;
  grt_pace_config_default(&pace);
  pace.rate = 500;
  double wait_scrape = 0, linger = -1;
  for (int i = 1; i < argc; i++) {
    const char *arg = argv[i], *val = i + 1 < argc ? argv[i + 1] : NULL;
    if (!val) {
      fprintf(stderr, "gpurt serve-demo: unknown option or missing value: %s\n", arg);
      usage(stderr);
      return 2;
    }
    i++;
    int ok = 1;
    if (!strcmp(arg, "--serve")) {
      if (grt_serve_config_parse(&sc, val)) {
        fprintf(stderr, "gpurt serve-demo: --serve wants HOST:PORT, got '%s'\n", val);
        ok = 0;
      }
    } else if (!strcmp(arg, "--rate")) {
      ok = parse_seconds(arg, val, &pace.rate);
    } else if (!strcmp(arg, "--events")) {
      ok = grt_cli_parse_u64(arg, val, &wc.events);
    } else if (!strcmp(arg, "--seed")) {
      ok = grt_cli_parse_u64(arg, val, &wc.seed);
    } else if (!strcmp(arg, "--wait-scrape")) {
      ok = parse_seconds(arg, val, &wait_scrape);
    } else if (!strcmp(arg, "--linger")) {
      ok = parse_seconds(arg, val, &linger);
    } else {
      fprintf(stderr, "gpurt serve-demo: unknown option %s\n", arg);
      usage(stderr);
      ok = 0;
    }
    if (!ok) return 2;
  }
  grt_workload *w;
  grt_metrics *m = NULL;
  if (grt_workload_create(&wc, &w)) {
    fprintf(stderr, "gpurt serve-demo: bad workload settings (events must be >= 100)\n");
    return 2;
  }
  grt_status st = grt_metrics_create(&m);
  if (!st) st = grt_metrics_add_allocator(m, grt_workload_allocator(w), "dayshift", "0");
  if (!st) st = grt_metrics_add_device(m, grt_workload_device(w), "0");
  int rc = 1;
  if (st) {
    fprintf(stderr, "gpurt serve-demo: %s\n", grt_status_str(st));
  } else {
    signal(SIGINT, on_signal);
    signal(SIGTERM, on_signal);
    progress p = {grt_workload_allocator(w), wc.events / 10 ? wc.events / 10 : 1};
    pace.after_step = report_progress;
    pace.after_ctx = &p;
    grt_step_source src = grt_workload_source(w);
    rc = run_served(m, &sc, &src, &pace, wait_scrape, linger);
  }
  grt_metrics_destroy(m); /* the server is stopped: nothing reads the registry any more */
  grt_workload_destroy(w);
  return rc;
}

#else /* built without libmicrohttpd */

int grt_cmd_serve_demo(int argc, char **argv) {
  (void)argc;
  (void)argv;
  fprintf(stderr, "gpurt serve-demo: this gpurt was built without libmicrohttpd (install libmicrohttpd-dev "
                  "and rebuild); `gpurt stats --format prometheus` prints the same metrics once\n");
  return 2;
}

#endif
