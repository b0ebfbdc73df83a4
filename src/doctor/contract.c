/* contract.c — the runtime contract's rules a trace can show broken
 * (docs/RUNTIME_CONTRACT.md), checked on the recorded run while the doctor's
 * faithful replay goes through it.
 *
 * A run of segment frees is one release: an empty_cache, the release before a
 * recorded OOM, or the retry path of a malloc the device refused. Its first
 * event's stack says which where the snapshot recorded one: PyTorch logs a
 * segment free with the context of the call that freed it, so an
 * empty_cache's carries `emptyCache` (C++) or torch/cuda/memory.py's
 * `empty_cache` (Python), and a malloc's carries DeviceCachingAllocator::malloc
 * or, recorded with Python stacks only, the allocating code alone. Without a
 * stack the replay's own reading decides (a release an empty_cache would
 * repeat exactly reads as one, so a retry that freed the whole cache is
 * then counted as an empty_cache). A free whose free_completed does not follow its
 * free_requested at once waited for another stream's use of the block
 * (record_stream): PyTorch completes every other free on the spot. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "doctor/doctor_impl.h"
#include "gpurt/report.h"
#include "trace/replay_impl.h"

static const char *const rule_names[GRT_CONTRACT_RULE_COUNT] = {
    "steady-state-mallocs", "empty-cache", "oom-retries", "cross-stream-frees", "stream-stranding"};

const char *grt_contract_rule_name(grt_contract_rule rule) {
  return (unsigned)rule < GRT_CONTRACT_RULE_COUNT ? rule_names[rule] : "?";
}

void grt__contract_init(grt__contract *c, const grt_trace *trace, const grt_trace_info *in, grt_doctor_report *rep) {
  memset(c, 0, sizeof *c);
  c->trace = trace;
  c->in = in;
  c->rep = rep;
  grt__u64map_init(&c->deferred);
  for (int i = 0; i < GRT_CONTRACT_RULE_COUNT; i++)
    rep->contract[i] = (grt_contract_finding){.first_event = UINT64_MAX, .time_us = 0};
}

void grt__contract_free(grt__contract *c) { grt__u64map_free(&c->deferred); }

static int64_t elapsed(grt__contract *c, const grt_trace_event *from, const grt_trace_event *to) {
  if (!(from->flags & GRT_TRACE_F_TIME) || !(to->flags & GRT_TRACE_F_TIME)) {
    c->untimed = true;
    return 0;
  }
  return to->time > from->time ? to->time - from->time : 0;
}

static uint32_t stack_of(const grt__contract *c, uint64_t index) {
  return c->in->event_stack ? c->in->event_stack[index] : 0;
}

static void occur(grt__contract *c, grt_contract_rule rule, uint64_t index, uint64_t bytes, int64_t us) {
  grt_contract_finding *f = &c->rep->contract[rule];
  if (f->first_event == UINT64_MAX) f->first_event = index, f->stack = stack_of(c, index);
  f->count++;
  f->bytes += bytes;
  f->time_us += us;
}

/* What a release run's first event's stack says it came from. */
static int release_origin(const grt__contract *c, uint64_t index) {
  switch (grt_trace_release_origin(c->trace, stack_of(c, index))) {
    case GRT_RELEASE_EMPTY_CACHE: return GRT__RUN_EMPTY_CACHE;
    case GRT_RELEASE_MALLOC: return GRT__RUN_RETRY;
    default: return GRT__RUN_OTHER;
  }
}

static bool steady(const grt__contract *c, uint64_t index) {
  return c->rep->steady.found && index >= c->rep->steady.from_event;
}

/* A release the replay took for a retry path: the alloc after it tells. */
static void settle_retry(grt__contract *c, bool retried, const grt_trace_event *ev) {
  const grt_trace_event *first = &c->in->events[c->run_start];
  c->retry_wait = false;
  if (retried) {
    occur(c, GRT_CONTRACT_OOM_RETRIES, c->run_start, c->run_bytes, elapsed(c, first, ev));
    return;
  }
  /* the model's cache served the alloc after all, or another event came between: an empty_cache */
  occur(c, GRT_CONTRACT_EMPTY_CACHE, c->run_start, c->run_bytes, elapsed(c, first, &c->in->events[c->run_end]));
  if (steady(c, c->run_start)) c->empty_cache_steady++;
}

/* The release run ends at event ev (not a segment free). */
static void end_run(grt__contract *c, const grt_trace_event *ev) {
  const grt_trace_event *first = &c->in->events[c->run_start];
  c->in_run = false;
  if (ev && ev->kind == GRT_TRACE_OOM) {
    c->rep->contract[GRT_CONTRACT_OOM_RETRIES].time_us += elapsed(c, first, ev);
    return;
  }
  if (ev && c->run_kind == GRT__RUN_RETRY) {
    c->retry_wait = true; /* the alloc after its segment allocs tells */
    return;
  }
  occur(c, GRT_CONTRACT_EMPTY_CACHE, c->run_start, c->run_bytes, elapsed(c, first, &c->in->events[c->run_end]));
  if (steady(c, c->run_start)) c->empty_cache_steady++;
}

static void on_alloc(grt__contract *c, const grt_replay *r, const grt_trace_event *ev, uint64_t index) {
  const grt_doctor_steady *s = &c->rep->steady;
  uint32_t stack = stack_of(c, index);
  if (s->found && (s->anchor_stack ? stack == s->anchor_stack : ev->size == s->anchor_size)) c->iteration++;
  if (c->retry_wait) settle_retry(c, c->run_stack_says || r->alloc_was_retry, ev);
}

static grt_status on_free(grt__contract *c, const grt_trace_event *ev, uint64_t index) {
  const grt_trace_info *in = c->in;
  if (ev->kind == GRT_TRACE_FREE_REQUESTED) {
    const grt_trace_event *next = index + 1 < in->n_events ? &in->events[index + 1] : NULL;
    bool at_once = next && next->kind == GRT_TRACE_FREE_COMPLETED && next->id == ev->id;
    if (!at_once && ev->id != GRT_TRACE_NO_ID && !grt__u64map_put(&c->deferred, ev->id, (void *)(uintptr_t)(index + 1)))
      return GRT_ERR_NOMEM;
    return GRT_OK;
  }
  void *v = ev->id == GRT_TRACE_NO_ID ? NULL : grt__u64map_get(&c->deferred, ev->id);
  if (!v) return GRT_OK;
  uint64_t req = (uint64_t)(uintptr_t)v - 1;
  grt__u64map_del(&c->deferred, ev->id);
  occur(c, GRT_CONTRACT_CROSS_STREAM_FREES, req, ev->size, elapsed(c, &in->events[req], ev));
  grt_contract_finding *f = &c->rep->contract[GRT_CONTRACT_CROSS_STREAM_FREES];
  if (index - req > f->also) f->also = index - req;
  return GRT_OK;
}

static void on_segment(grt__contract *c, const grt_replay *r, const grt_trace_event *ev, uint64_t index) {
  bool release = ev->kind == GRT_TRACE_SEGMENT_FREE || ev->kind == GRT_TRACE_SEGMENT_UNMAP;
  if (steady(c, index)) {
    grt_contract_finding *f = &c->rep->contract[GRT_CONTRACT_STEADY_MALLOCS];
    if (release) {
      f->also++;
    } else {
      occur(c, GRT_CONTRACT_STEADY_MALLOCS, index, ev->size, 0);
      c->last_malloc_iteration = c->iteration;
    }
  }
  if (!release) return;
  if (!c->in_run) {
    c->in_run = true;
    c->run_start = index;
    c->run_bytes = 0;
    c->run_kind = release_origin(c, index);
    c->run_stack_says = c->run_kind != GRT__RUN_OTHER;
    if (!c->run_stack_says) c->run_kind = r->retry_pending ? GRT__RUN_RETRY : GRT__RUN_EMPTY_CACHE;
  }
  c->run_end = index;
  c->run_bytes += ev->size;
}

grt_status grt__contract_step(grt__contract *c, const grt_replay *r, const grt_trace_event *ev, uint64_t index) {
  bool release = ev->kind == GRT_TRACE_SEGMENT_FREE || ev->kind == GRT_TRACE_SEGMENT_UNMAP;
  bool segment = ev->kind == GRT_TRACE_SEGMENT_ALLOC || ev->kind == GRT_TRACE_SEGMENT_MAP;
  if (c->in_run && !release) end_run(c, ev);
  if (c->retry_wait && !segment && ev->kind != GRT_TRACE_ALLOC) settle_retry(c, false, ev);
  switch ((grt_trace_kind)ev->kind) {
    case GRT_TRACE_ALLOC: on_alloc(c, r, ev, index); break;
    case GRT_TRACE_FREE_REQUESTED:
    case GRT_TRACE_FREE_COMPLETED: return on_free(c, ev, index);
    case GRT_TRACE_SEGMENT_ALLOC:
    case GRT_TRACE_SEGMENT_MAP:
    case GRT_TRACE_SEGMENT_FREE:
    case GRT_TRACE_SEGMENT_UNMAP: on_segment(c, r, ev, index); break;
    case GRT_TRACE_OOM: {
      grt_contract_finding *f = &c->rep->contract[GRT_CONTRACT_OOM_RETRIES];
      if (f->first_event == UINT64_MAX) f->first_event = index, f->stack = stack_of(c, index);
      f->also++;
      break;
    }
    default: break;
  }
  return GRT_OK;
}

static const char *plural(uint64_t n) { return n == 1 ? "" : "s"; }

static void say_steady(const grt__contract *c, grt_contract_finding *f) {
  const grt_doctor_steady *s = &c->rep->steady;
  char b[32];
  if (!s->found) {
    f->outcome = GRT_CONTRACT_UNKNOWN;
    snprintf(f->detail, sizeof f->detail, "no repeating loop found in the allocations: warm-up and steady state "
             "cannot be told apart");
    return;
  }
  f->outcome = f->count || f->also ? GRT_CONTRACT_BROKEN : GRT_CONTRACT_KEPT;
  if (f->outcome == GRT_CONTRACT_KEPT)
    snprintf(f->detail, sizeof f->detail, "no device malloc or free after warm-up (%" PRIu64 " iterations of about %"
             PRIu64 " allocations from event %" PRIu64 ")", s->iterations, s->period, s->from_event);
  else
    snprintf(f->detail, sizeof f->detail, "%" PRIu64 " device malloc%s (%s) and %" PRIu64 " device free%s after "
             "warm-up (from event %" PRIu64 ", iteration 2 of %" PRIu64 "); the last malloc in iteration %" PRIu64,
             f->count, plural(f->count), grt_format_bytes(f->bytes, b, sizeof b), f->also, plural(f->also),
             s->from_event, s->iterations, c->last_malloc_iteration);
}

static void say_empty_cache(const grt__contract *c, grt_contract_finding *f) {
  char b[32];
  bool known = c->rep->steady.found;
  uint64_t in_loop = known ? c->empty_cache_steady : f->count;
  f->outcome = in_loop ? GRT_CONTRACT_BROKEN : GRT_CONTRACT_KEPT;
  if (!f->count)
    snprintf(f->detail, sizeof f->detail, "no empty_cache");
  else
    snprintf(f->detail, sizeof f->detail, "%" PRIu64 " empty_cache burst%s gave back %s (%s); every device free "
             "in them synchronizes the device", f->count, plural(f->count), grt_format_bytes(f->bytes, b, sizeof b),
             known ? in_loop ? "after warm-up too" : "during warm-up only" : "no loop found: each counts");
}

static void say_retries(grt_contract_finding *f) {
  char b[32];
  f->outcome = f->count || f->also ? GRT_CONTRACT_BROKEN : GRT_CONTRACT_KEPT;
  if (f->outcome == GRT_CONTRACT_KEPT)
    snprintf(f->detail, sizeof f->detail, "no allocation found the device full");
  else if (!f->count)
    snprintf(f->detail, sizeof f->detail, "%" PRIu64 " OOM%s recorded; no allocation succeeded on a retry",
             f->also, plural(f->also));
  else
    snprintf(f->detail, sizeof f->detail, "%" PRIu64 " allocation%s found the device full, flushed the cache (%s) "
             "and retried cudaMalloc; %" PRIu64 " OOM%s recorded", f->count, plural(f->count),
             grt_format_bytes(f->bytes, b, sizeof b), f->also, plural(f->also));
}

static void say_cross_stream(grt_contract_finding *f) {
  char b[32];
  f->outcome = f->count ? GRT_CONTRACT_BROKEN : GRT_CONTRACT_KEPT;
  if (!f->count)
    snprintf(f->detail, sizeof f->detail, "every free completed at once: no block waited for another stream");
  else
    snprintf(f->detail, sizeof f->detail, "%" PRIu64 " free%s (%s) waited for another stream's use of the block "
             "(record_stream), up to %" PRIu64 " events later", f->count, plural(f->count), grt_format_bytes(f->bytes, b, sizeof b),
             f->also);
}

/* Cached bytes on other streams: at an OOM, what the failed request's stream
 * could not use; at the peak, what the busiest stream could not. */
static void say_stranding(const grt__contract *c, grt_contract_finding *f) {
  const grt_doctor_report *rep = c->rep;
  const grt_doctor_moment *m = rep->oom.valid ? &rep->oom : &rep->peak;
  char b[2][32];
  if (!m->valid) {
    f->outcome = GRT_CONTRACT_UNKNOWN;
    snprintf(f->detail, sizeof f->detail, "no allocation in the trace");
    return;
  }
  f->count = m->streams;
  f->bytes = m->other_stream_free;
  f->first_event = m->event;
  f->time_us = 0;
  bool broken = m->other_stream_free && 16 * m->other_stream_free >= m->reserved;
  if (rep->oom.valid) broken = broken || (m->other_stream_free && m->other_stream_free >= m->request);
  f->outcome = broken ? GRT_CONTRACT_BROKEN : GRT_CONTRACT_KEPT;
  snprintf(f->detail, sizeof f->detail, "at the %s, %" PRIu64 " stream%s held segments; %s cached free on streams "
           "other than the %s (of %s reserved)", rep->oom.valid ? "first OOM" : "peak", m->streams,
           m->streams == 1 ? "" : "s", grt_format_bytes(m->other_stream_free, b[0], sizeof b[0]),
           rep->oom.valid ? "failed request's" : "busiest one's", grt_format_bytes(m->reserved, b[1], sizeof b[1]));
}

void grt__contract_finish(grt__contract *c) {
  grt_contract_finding *f = c->rep->contract;
  if (c->in_run) end_run(c, NULL);
  if (c->retry_wait) settle_retry(c, false, &c->in->events[c->run_end]);
  say_steady(c, &f[GRT_CONTRACT_STEADY_MALLOCS]);
  say_empty_cache(c, &f[GRT_CONTRACT_EMPTY_CACHE]);
  say_retries(&f[GRT_CONTRACT_OOM_RETRIES]);
  say_cross_stream(&f[GRT_CONTRACT_CROSS_STREAM_FREES]);
  say_stranding(c, &f[GRT_CONTRACT_STREAM_STRANDING]);
  if (c->untimed) /* the rules that measure time */
    f[GRT_CONTRACT_EMPTY_CACHE].time_us = f[GRT_CONTRACT_OOM_RETRIES].time_us =
        f[GRT_CONTRACT_CROSS_STREAM_FREES].time_us = -1;
}
