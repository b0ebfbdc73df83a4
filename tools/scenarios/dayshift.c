/* dayshift.c — "dayshift", the built-in serving day that tells the day-3
 * fragmentation story on a caching allocator, one event per step.
 *
 * Shape of the day (events = mallocs + frees):
 *   event 0-1   warm-up: one request of `reserve` bytes, freed: one big cached
 *               segment; the device keeps only `headroom` beyond it.
 *   steady      traffic in waves (+-35%) around load x reserve; requests
 *               finish in arrival order; sizes are log-uniform and drift
 *               upward through the day (1-4 MiB at dawn, 4-16 MiB at dusk).
 *               The request arriving at each wave's crest gets stuck and lives
 *               to the end (a stuck request's KV): it lands at the high-water
 *               mark, so each wave pins the free tail a little lower.
 *   last event  the day-3 request: half the free cache, larger than any hole
 *               and than the headroom: it OOMs with most of the cache free.
 * Reserved stays flat, allocated stays flat, the largest free block sinks.
 *
 * Invariants: live[] holds exactly the blocks this workload allocated and has
 * not freed; live_bytes is the sum of their requested sizes. */
#include <stdlib.h>
#include <string.h>

#include "base/rng.h"
#include "base/status.h"
#include "scenarios/dayshift.h"

#define WAVES_PER_DAY 40     /* traffic waves (500 events each at the default length) */
#define WAVE_AMPLITUDE 0.35 /* the load swings +-35% around its target */

typedef struct live_block {
  grt_devptr ptr;
  uint64_t size;
  int long_lived;
} live_block;

struct grt_dayshift {
  grt_dayshift_config cfg;
  grt_device *dev;
  grt_allocator *a;
  grt__rng rng;
  live_block *live;
  size_t n_live, cap_live, n_short;
  uint64_t live_bytes, long_bytes, target, done;
  int pin_due; /* the next request arrives at a wave's crest */
  uint64_t next_size; /* the next request's size, drawn ahead so the load check can use it */
};

void grt_dayshift_config_default(grt_dayshift_config *cfg) {
  if (!cfg) return;
  cfg->seed = 1;
  cfg->events = 20000;
  cfg->reserve = 512 * GRT_MiB;
  cfg->headroom = 64 * GRT_MiB;
  cfg->load = 0.55;
}

grt_allocator *grt_dayshift_allocator(grt_dayshift *w) { return w ? w->a : NULL; }
grt_device *grt_dayshift_device(grt_dayshift *w) { return w ? w->dev : NULL; }
uint64_t grt_dayshift_events_done(const grt_dayshift *w) { return w ? w->done : 0; }

static grt_status step_fn(void *ctx) { return grt_dayshift_step(ctx); }

grt_step_source grt_dayshift_source(grt_dayshift *w) {
  grt_step_source s = {w, step_fn};
  return s;
}

/* Request sizes drift from [1, 4] MiB to [4, 16] MiB over the day. */
static uint64_t draw_size(grt_dayshift *w) {
  double t = (double)w->done / (double)w->cfg.events;
  double scale = 1.0 + 3.0 * t;
  uint64_t lo = (uint64_t)(scale * (double)GRT_MiB), hi = (uint64_t)(4.0 * scale * (double)GRT_MiB);
  return grt__rng_log_uniform(&w->rng, lo, hi);
}

grt_status grt_dayshift_create(const grt_dayshift_config *cfg, grt_dayshift **out) {
  if (!cfg || !out) return GRT_ERR_INVALID_ARG;
  *out = NULL;
  if (cfg->events < 100 || cfg->reserve < 64 * GRT_MiB || cfg->reserve > 64 * GRT_GiB ||
      cfg->headroom > 64 * GRT_GiB || !(cfg->load > 0.05 && cfg->load < 0.9))
    return GRT_ERR_INVALID_ARG;
  grt_dayshift *w = calloc(1, sizeof *w);
  if (!w) return GRT_ERR_NOMEM;
  w->cfg = *cfg;
  grt__rng_seed(&w->rng, cfg->seed);
  w->target = (uint64_t)(cfg->load * (double)cfg->reserve);
  grt_device_config dc;
  grt_device_config_default(&dc);
  dc.capacity = grt_alloc_segment_size(grt_alloc_round_size(NULL, cfg->reserve)) + cfg->headroom;
  grt_status st = grt_device_create(&dc, &w->dev);
  if (!st) st = grt_alloc_create("caching", w->dev, NULL, &w->a);
  if (st) {
    /* Best effort on the failure path: st is what the caller needs; the
     * device (NULL, or with no allocator on it) is idle anyway. */
    grt__ignore(grt_device_destroy(w->dev));
    free(w);
    return st;
  }
  *out = w;
  return GRT_OK;
}

grt_status grt_dayshift_destroy(grt_dayshift *w) {
  if (!w) return GRT_OK;
  grt_status st = GRT_OK, d;
  for (size_t i = 0; i < w->n_live; i++)
    if ((d = grt_alloc_free(w->a, w->live[i].ptr)) && !st) st = d;
  free(w->live);
  d = grt_alloc_destroy(w->a);
  if (!d) d = grt_device_destroy(w->dev); /* the device is busy while the allocator lives */
  free(w);
  return st ? st : d;
}

static grt_status do_malloc(grt_dayshift *w, uint64_t size, int long_lived) {
  if (w->n_live == w->cap_live) {
    size_t nc = w->cap_live ? w->cap_live * 2 : 64;
    live_block *p = realloc(w->live, nc * sizeof *p);
    if (!p) return GRT_ERR_NOMEM;
    w->live = p;
    w->cap_live = nc;
  }
  grt_devptr ptr;
  grt_status st = grt_alloc_malloc(w->a, size, 0, &ptr);
  if (st) return st;
  w->live[w->n_live++] = (live_block){ptr, size, long_lived};
  w->live_bytes += size;
  if (!long_lived) w->n_short++;
  return GRT_OK;
}

/* Frees the k-th short-lived block (k < n_short). */
static grt_status free_short(grt_dayshift *w, size_t k) {
  for (size_t i = 0; i < w->n_live; i++) {
    if (w->live[i].long_lived || k--) continue;
    grt_status st = grt_alloc_free(w->a, w->live[i].ptr);
    if (st) return st;
    w->live_bytes -= w->live[i].size;
    memmove(&w->live[i], &w->live[i + 1], (--w->n_live - i) * sizeof *w->live); /* keep age order */
    w->n_short--;
    return GRT_OK;
  }
  return GRT_ERR_INTERNAL;
}

/* The day-3 request: half the free cache, if that exceeds every hole and the headroom. */
static grt_status last_request(grt_dayshift *w) {
  grt_alloc_stats s;
  grt_status st = grt_alloc_get_stats(w->a, &s);
  if (st) return st;
  uint64_t want = (s.cached_bytes / 2) & ~(GRT_MiB - 1);
  if (want <= s.largest_free_block || want <= w->cfg.headroom) return GRT_OK; /* the day ended well */
  st = do_malloc(w, want, 1);
  return st == GRT_ERR_OOM ? GRT_OK : st;
}

static uint64_t wave_period(const grt_dayshift *w) { return w->cfg.events / WAVES_PER_DAY; }

/* Traffic comes in waves around the target: a triangle wave of WAVE_AMPLITUDE. */
static uint64_t target_now(const grt_dayshift *w) {
  uint64_t period = wave_period(w);
  double phase = (double)(w->done % period) / (double)period;
  double tri = phase < 0.5 ? 4.0 * phase - 1.0 : 3.0 - 4.0 * phase;
  return (uint64_t)((double)w->target * (1.0 + WAVE_AMPLITUDE * tri));
}

grt_status grt_dayshift_step(grt_dayshift *w) {
  if (!w) return GRT_ERR_INVALID_ARG;
  if (w->done >= w->cfg.events) return GRT_ERR_NOT_FOUND;
  if (w->done % wave_period(w) == wave_period(w) / 2) w->pin_due = 1;
  grt_status st;
  if (w->done == 0) {
    st = do_malloc(w, w->cfg.reserve, 0);
  } else if (w->done == 1) {
    st = free_short(w, 0);
  } else if (w->done == w->cfg.events - 1) {
    st = last_request(w);
  } else {
    if (!w->next_size) w->next_size = draw_size(w);
    if (w->live_bytes + w->next_size <= target_now(w) || !w->n_short) {
      /* The request that arrives at a wave's crest gets stuck: it lives for the rest of the day. */
      int long_lived = w->pin_due && w->long_bytes + w->next_size <= w->target / 2;
      w->pin_due = 0;
      st = do_malloc(w, w->next_size, long_lived);
      if (!st && long_lived) w->long_bytes += w->next_size;
      if (st == GRT_ERR_OOM) st = GRT_OK; /* a failed request is an event too; num_ooms counts it */
      w->next_size = 0;
    } else {
      st = free_short(w, 0); /* requests finish in arrival order */
    }
  }
  if (st) return st;
  w->done++;
  return GRT_OK;
}
