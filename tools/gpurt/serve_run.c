/* serve_run.c — see serve_run.h. The stop flag is the one piece of global
 * state: a signal handler can reach nothing else. */
#include "serve_run.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#ifdef GRT_HAVE_SERVE
#include "cli_status.h"
#include "gpurt/serve.h"
#endif

void cli_serve_opts_default(cli_serve_opts *o) {
  o->listen = NULL;
  o->rate = 500;
  o->wait_scrape = 0;
  o->linger = -1;
  o->done_word = "done";
  o->on_done = NULL;
  o->done_ctx = NULL;
}

bool cli_serve_available(void) {
#ifdef GRT_HAVE_SERVE
  return true;
#else
  return false;
#endif
}

void cli_serve_progress_step(void *ctx, uint64_t done) {
  cli_serve_progress *p = ctx;
  if (!p->every || done % p->every) return;
  grt_alloc_stats s;
  if (grt_alloc_get_stats(p->a, &s)) return;
  char r[32], al[32], lf[32];
  fprintf(stderr, "  %8llu events  reserved %s  allocated %s  largest free block %s  ooms %llu\n",
          (unsigned long long)done, grt_format_bytes((uint64_t)s.reserved_bytes[GRT_STAT_ALL].current, r, sizeof r),
          grt_format_bytes((uint64_t)s.allocated_bytes[GRT_STAT_ALL].current, al, sizeof al),
          grt_format_bytes(s.largest_free_block, lf, sizeof lf), (unsigned long long)s.num_ooms);
}

#ifdef GRT_HAVE_SERVE

static volatile sig_atomic_t cli_serve_stop_flag;

static void cli_serve_on_signal(int sig) {
  (void)sig;
  cli_serve_stop_flag = 1;
}

static void cli_serve_sleep(double s) {
  struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
  nanosleep(&ts, NULL);
}

int cli_serve_run(const char *cmd, grt_metrics *m, const grt_step_source *src, grt_pace_config *pace,
                  const cli_serve_opts *o) {
  grt_serve_config sc;
  grt_serve_config_default(&sc);
  if (o->listen && grt_serve_config_parse(&sc, o->listen)) {
    fprintf(stderr, "gpurt %s: --serve wants HOST:PORT, got '%s'\n", cmd, o->listen);
    return 2;
  }
  cli_serve_stop_flag = 0;
  signal(SIGINT, cli_serve_on_signal);
  signal(SIGTERM, cli_serve_on_signal);
  char err[256];
  grt_metrics_server *srv;
  grt_status st = grt_metrics_serve(m, &sc, &srv, err, sizeof err);
  if (st) {
    fprintf(stderr, "gpurt %s: cannot serve metrics: %s\n", cmd, err);
    return 1;
  }
  fprintf(stderr, "gpurt: serving metrics at http://%s:%u/metrics\n", sc.address,
          (unsigned)grt_metrics_server_port(srv));
  for (double t = 0; t < o->wait_scrape && !cli_serve_stop_flag && !grt_metrics_server_scrapes(srv); t += 0.05)
    cli_serve_sleep(0.05);
  pace->rate = o->rate;
  pace->stop = &cli_serve_stop_flag;
  uint64_t events = 0;
  st = grt_pace_run(src, pace, &events);
  bool interrupted = cli_serve_stop_flag != 0;
  fprintf(stderr, "gpurt: %s after %llu events\n",
          st ? grt_status_str(st) : interrupted ? "interrupted" : o->done_word, (unsigned long long)events);
  if (o->on_done) o->on_done(o->done_ctx, st, events, interrupted);
  if (o->linger < 0 && !cli_serve_stop_flag) fprintf(stderr, "gpurt: still serving; Ctrl-C to stop\n");
  for (double t = 0; (o->linger < 0 || t < o->linger) && !cli_serve_stop_flag; t += 0.05) cli_serve_sleep(0.05);
  grt_status stopped = grt_metrics_server_stop(srv); /* before the caller destroys anything the server reads */
  signal(SIGINT, SIG_DFL);
  signal(SIGTERM, SIG_DFL);
  if (st) return 1; /* reported above */
  return stopped ? cli_fail_status(cmd, "grt_metrics_server_stop", stopped, NULL) : 0;
}

#else /* built without libmicrohttpd */

int cli_serve_run(const char *cmd, grt_metrics *m, const grt_step_source *src, grt_pace_config *pace,
                  const cli_serve_opts *o) {
  (void)m;
  (void)src;
  (void)pace;
  (void)o;
  fprintf(stderr, "gpurt %s: this gpurt was built without libmicrohttpd, so it cannot serve /metrics "
                  "(install libmicrohttpd-dev and rebuild)\n", cmd);
  return 2;
}

#endif
