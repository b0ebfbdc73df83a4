/* serve_run.h — the loop shared by `gpurt serve-demo` and `gpurt replay
 * --serve`: serve a metrics registry at /metrics, pace a step source while
 * it is served, linger, stop the server. Ctrl-C (SIGINT/SIGTERM) ends the run
 * and the linger cleanly. Needs gpurt_serve (libmicrohttpd): without it,
 * cli_serve_available() is false and cli_serve_run() only says so. */
#ifndef GRT_TOOLS_SERVE_RUN_H
#define GRT_TOOLS_SERVE_RUN_H

#include <stdbool.h>
#include <stdint.h>

#include "gpurt/report.h"

typedef struct cli_serve_opts {
  const char *listen;  /* "HOST:PORT", ":PORT" or "PORT"; NULL: 127.0.0.1:9400 */
  double rate;         /* events per second; 0 = as fast as possible */
  double wait_scrape;  /* seconds to wait for the first scrape before starting; 0 = none */
  double linger;       /* seconds to keep serving after the run; < 0 = until Ctrl-C */
  const char *done_word; /* printed when the source ends: "day done", "replay done" */
  /* optional: after the run, before lingering (the server is still up) */
  void (*on_done)(void *ctx, grt_status st, uint64_t events, bool interrupted);
  void *done_ctx;
} cli_serve_opts;

void cli_serve_opts_default(cli_serve_opts *o);

/* True when this gpurt was built with the /metrics server. */
bool cli_serve_available(void);

/* The largest --rate (events per second), --wait-scrape and --linger
 * (seconds) the commands accept: beyond it a value is a typo, not a plan. */
#define CLI_SERVE_MAX 1e7

/* Installs the SIGINT/SIGTERM handlers, serves m, runs src at o->rate (pace
 * may carry max_events and after_step; its rate and stop are set here),
 * lingers, stops the server. m must stay registered until this returns.
 * 0 when the run ended (or was interrupted) cleanly, 1 on failure, 2 when the
 * address does not parse or the server is not built. */
int cli_serve_run(const char *cmd, grt_metrics *m, const grt_step_source *src, grt_pace_config *pace,
                  const cli_serve_opts *o);

/* An after_step callback (pace.after_ctx = a cli_serve_progress) printing a
 * line on stderr every `every` events: what a dashboard should be showing. */
typedef struct cli_serve_progress {
  grt_allocator *a;
  uint64_t every;
} cli_serve_progress;

void cli_serve_progress_step(void *ctx, uint64_t done);

#endif
