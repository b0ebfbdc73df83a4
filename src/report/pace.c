/* pace.c — runs a step source at a chosen pace (events per second).
 *
 * The schedule is absolute: event k is due at start + k / rate, so a slow
 * step is caught up on rather than stretching the run. Sleeps are cut into
 * slices of at most 100 ms so a stop request is honoured promptly even at
 * low rates. */
#include <errno.h>
#include <time.h>

#include "gpurt/report.h"

#define SLICE_NS 100000000LL

void grt_pace_config_default(grt_pace_config *cfg) {
  if (!cfg) return;
  cfg->rate = 0.0;
  cfg->max_events = 0;
  cfg->stop = NULL;
  cfg->after_step = NULL;
  cfg->after_ctx = NULL;
}

static long long now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static int stopped(const grt_pace_config *cfg) { return cfg->stop && *cfg->stop; }

/* Sleeps until the monotonic time due_ns, or until a stop request. */
static void wait_until(long long due_ns, const grt_pace_config *cfg) {
  for (;;) {
    long long left = due_ns - now_ns();
    if (left <= 0 || stopped(cfg)) return;
    if (left > SLICE_NS) left = SLICE_NS;
    struct timespec ts = {(time_t)(left / 1000000000LL), (long)(left % 1000000000LL)};
    while (nanosleep(&ts, &ts) == -1 && errno == EINTR && !stopped(cfg)) {
    }
  }
}

grt_status grt_pace_run(const grt_step_source *src, const grt_pace_config *cfg, uint64_t *events) {
  if (events) *events = 0;
  if (!src || !src->step || !cfg || !(cfg->rate >= 0.0) || cfg->rate > 1e9) return GRT_ERR_INVALID_ARG;
  long long start = now_ns();
  uint64_t done = 0;
  grt_status st = GRT_OK;
  while (!stopped(cfg) && (!cfg->max_events || done < cfg->max_events)) {
    if (cfg->rate > 0.0) wait_until(start + (long long)((double)done * 1e9 / cfg->rate), cfg);
    if (stopped(cfg)) break;
    st = src->step(src->ctx);
    if (st == GRT_ERR_NOT_FOUND) {
      st = GRT_OK;
      break;
    }
    if (st) break;
    done++;
    if (cfg->after_step) cfg->after_step(cfg->after_ctx, done);
  }
  if (events) *events = done;
  return st;
}
