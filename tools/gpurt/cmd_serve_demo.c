/* cmd_serve_demo.c — `gpurt serve-demo`: replays the built-in serving day
 * (dayshift) at a chosen pace while serving live metrics at /metrics, so a
 * dashboard shows the day-3 story as it happens: reserved flat, allocated
 * flat, largest free block sinking, then the OOM.
 *
 * The run is a grt_step_source driven by grt_pace_run inside cli_serve_run
 * (serve_run.c); `gpurt replay TRACE --serve` plugs a trace replayer's step
 * function into the same loop (replay_serve.c). */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "gpurt/report.h"
#include "scenarios/dayshift.h"
#include "serve_run.h"

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

int grt_cmd_serve_demo(int argc, char **argv) {
  if (!cli_serve_available()) {
    fprintf(stderr, "gpurt serve-demo: this gpurt was built without libmicrohttpd (install libmicrohttpd-dev "
                    "and rebuild); `gpurt stats --format prometheus` prints the same metrics once\n");
    return 2;
  }
  if (grt_cli_wants_help(argc, argv)) {
    usage(stdout);
    return 0;
  }
  cli_serve_opts so;
  cli_serve_opts_default(&so);
  so.done_word = "day done";
  grt_dayshift_config wc;
  grt_dayshift_config_default(&wc);
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
      so.listen = val;
    } else if (!strcmp(arg, "--rate")) {
      ok = cli_parse_seconds("serve-demo", arg, val, &so.rate);
    } else if (!strcmp(arg, "--events")) {
      ok = grt_cli_parse_u64(arg, val, &wc.events);
    } else if (!strcmp(arg, "--seed")) {
      ok = grt_cli_parse_u64(arg, val, &wc.seed);
    } else if (!strcmp(arg, "--wait-scrape")) {
      ok = cli_parse_seconds("serve-demo", arg, val, &so.wait_scrape);
    } else if (!strcmp(arg, "--linger")) {
      ok = cli_parse_seconds("serve-demo", arg, val, &so.linger);
    } else {
      fprintf(stderr, "gpurt serve-demo: unknown option %s\n", arg);
      usage(stderr);
      ok = 0;
    }
    if (!ok) return 2;
  }
  grt_dayshift *w;
  grt_metrics *m = NULL;
  if (grt_dayshift_create(&wc, &w)) {
    fprintf(stderr, "gpurt serve-demo: bad workload settings (events must be >= 100)\n");
    return 2;
  }
  grt_status st = grt_metrics_create(&m);
  if (!st) st = grt_metrics_add_allocator(m, grt_dayshift_allocator(w), "dayshift", "0");
  if (!st) st = grt_metrics_add_device(m, grt_dayshift_device(w), "0");
  int rc = 1;
  if (st) {
    fprintf(stderr, "gpurt serve-demo: %s\n", grt_status_str(st));
  } else {
    grt_pace_config pace;
    grt_pace_config_default(&pace);
    cli_serve_progress p = {grt_dayshift_allocator(w), wc.events / 10 ? wc.events / 10 : 1};
    pace.after_step = cli_serve_progress_step;
    pace.after_ctx = &p;
    grt_step_source src = grt_dayshift_source(w);
    rc = cli_serve_run("serve-demo", m, &src, &pace, &so);
  }
  grt_metrics_destroy(m); /* the server is stopped: nothing reads the registry any more */
  grt_dayshift_destroy(w);
  return rc;
}
