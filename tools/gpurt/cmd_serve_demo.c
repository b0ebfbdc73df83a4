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
#include "cli_opts.h"
#include "cli_status.h"
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

enum { SD_SERVE = 256, SD_RATE, SD_EVENTS, SD_SEED, SD_WAIT_SCRAPE, SD_LINGER };

static const struct option serve_demo_options[] = {
    {"serve", required_argument, NULL, SD_SERVE},
    {"rate", required_argument, NULL, SD_RATE},
    {"events", required_argument, NULL, SD_EVENTS},
    {"seed", required_argument, NULL, SD_SEED},
    {"wait-scrape", required_argument, NULL, SD_WAIT_SCRAPE},
    {"linger", required_argument, NULL, SD_LINGER},
    CLI_OPT_HELP_ENTRY,
    {NULL, 0, NULL, 0},
};

/* CLI_ARGS_OK or the exit status. */
static int serve_demo_parse(int argc, char **argv, cli_serve_opts *so, grt_dayshift_config *wc) {
  cli_opts p;
  cli_opts_init(&p, "serve-demo", argc, argv, serve_demo_options, false);
  if (p.help) {
    usage(stdout);
    return 0;
  }
  for (int c; (c = cli_opts_next(&p)) != CLI_OPT_END;) {
    bool ok = true;
    switch (c) {
    case SD_SERVE: so->listen = p.arg; break;
    case SD_RATE: ok = cli_opt_real(&p, 0, CLI_SERVE_MAX, &so->rate); break;
    case SD_EVENTS: ok = cli_opt_u64(&p, 100, UINT64_MAX, &wc->events) /* a day needs 100 */; break;
    case SD_SEED: ok = cli_opt_u64(&p, 0, UINT64_MAX, &wc->seed); break;
    case SD_WAIT_SCRAPE: ok = cli_opt_real(&p, 0, CLI_SERVE_MAX, &so->wait_scrape); break;
    case SD_LINGER: ok = cli_opt_real(&p, 0, CLI_SERVE_MAX, &so->linger); break;
    case CLI_OPT_POSITIONAL: return cli_opts_unexpected(&p);
    default: return 2; /* CLI_OPT_ERROR: already reported */
    }
    if (!ok) return 2;
  }
  return CLI_ARGS_OK;
}

int grt_cmd_serve_demo(int argc, char **argv) {
  if (!cli_serve_available()) {
    fprintf(stderr, "gpurt serve-demo: this gpurt was built without libmicrohttpd (install libmicrohttpd-dev "
                    "and rebuild); `gpurt stats --format prometheus` prints the same metrics once\n");
    return 2;
  }
  cli_serve_opts so;
  cli_serve_opts_default(&so);
  so.done_word = "day done";
  grt_dayshift_config wc;
  grt_dayshift_config_default(&wc);
  int parsed = serve_demo_parse(argc, argv, &so, &wc);
  if (parsed != CLI_ARGS_OK) return parsed;
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
  cli_first f = CLI_FIRST_INIT;
  /* the server is stopped: nothing reads the registry any more */
  cli_keep(&f, "grt_metrics_destroy", grt_metrics_destroy(m));
  cli_keep(&f, "grt_dayshift_destroy", grt_dayshift_destroy(w));
  if (f.st && !rc) rc = cli_fail_first("serve-demo", &f); /* a failure before this one was reported */
  return rc;
}
