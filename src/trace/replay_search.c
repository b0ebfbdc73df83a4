/* replay_search.c — the smallest device capacity on which a trace replays
 * with zero OOMs: doubling from the peak live bytes until a run succeeds,
 * then bisection down to the granularity. Each probe is a fresh device and
 * allocator with first-fit placement. Zero-OOM runs are monotone in the
 * capacity here: a first-fit device makes the same choices on a larger
 * capacity as long as none of them fails. */
#include "base/status.h"
#include "trace/replay_impl.h"

#define MAX_PROBES 96

static grt_status probe(const grt_trace *t, const grt_replay_config *base, uint64_t capacity, bool *ok,
                        uint64_t *peak_live) {
  if (base->device_model == GRT_DEVICE_MODEL_PAGED && capacity < GRT_SMALL_BUFFER) { /* not one page */
    *ok = false;
    return GRT_OK;
  }
  grt_replay_config c = *base;
  c.capacity = capacity;
  c.base_address = 0;
  c.placement = GRT_REPLAY_PLACE_FIRST_FIT;
  c.record_series = false;
  c.on_step = NULL;
  grt_replay *r;
  grt_status st = grt_replay_open(t, &c, &r);
  if (st) return st;
  if (c.prefill_start) st = grt_replay_prefill_start(r);
  if (!st) st = grt_replay_run(r);
  grt_replay_summary s;
  if (!st) st = grt_replay_get_summary(r, &s);
  grt__keep_first(&st, grt_replay_destroy(r));
  if (st) return st;
  *ok = !s.has_oom;
  if (peak_live) *peak_live = s.peak_live;
  return GRT_OK;
}

grt_status grt_replay_min_capacity(const grt_trace *trace, const grt_replay_config *cfg, uint64_t granularity,
                                   uint64_t *capacity, uint64_t *peak_live) {
  if (!trace || !capacity) return GRT_ERR_INVALID_ARG;
  grt_replay_config base;
  if (cfg)
    base = *cfg;
  else
    grt_replay_config_default(&base);
  const uint64_t unbounded = (uint64_t)1 << 40;
  bool ok;
  uint64_t live = 0;
  grt_status st = probe(trace, &base, unbounded, &ok, &live);
  if (st) return st;
  if (peak_live) *peak_live = live;
  if (!ok) return GRT_ERR_OOM;
  uint64_t g = granularity ? granularity : (live / 1024 + 511) / 512 * 512; /* device-aligned steps */
  if (g < 512) g = 512;
  if (base.device_model == GRT_DEVICE_MODEL_PAGED) g = (g + GRT_SMALL_BUFFER - 1) / GRT_SMALL_BUFFER * GRT_SMALL_BUFFER;
  /* below the peak live bytes nothing fits: lo is known to fail */
  uint64_t lo = live ? (live - 1) / g * g : 0, hi = lo + g;
  int probes = 0;
  for (;;) { /* doubling: lo fails, hi to be found */
    if (hi >= unbounded) {
      hi = unbounded;
      break;
    }
    if ((st = probe(trace, &base, hi, &ok, NULL))) return st;
    if (ok || ++probes > MAX_PROBES) break;
    lo = hi;
    hi *= 2;
  }
  while (hi - lo > g && probes++ < MAX_PROBES) {
    uint64_t mid = lo + (hi - lo) / 2;
    mid = (mid + g - 1) / g * g;
    if (mid >= hi) mid = hi - g;
    if (mid <= lo) break;
    if ((st = probe(trace, &base, mid, &ok, NULL))) return st;
    if (ok)
      hi = mid;
    else
      lo = mid;
  }
  *capacity = hi;
  return GRT_OK;
}
