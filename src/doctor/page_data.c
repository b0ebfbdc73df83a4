/* page_data.c — the data of a snapshot's page (grt_doctor_page_save), as one
 * JSON object the page's script reads (page.c wraps it):
 *
 *   allocs  [start, requested, end, addr, size, stack] per allocation: event
 *           indices of its alloc, free_requested and free_completed (-1: before
 *           recording began, or never), its recorded address and requested size
 *   segs    the final segments [addr, size] and every segment event
 *           [event, kind 0 alloc / 1 free / 2 map / 3 unmap, addr, size]; the page
 *           walks them back to the start and forward to any event
 *   stacks  per stack id, its folded frames "name (file:line)" (index 0: none)
 *   series  the faithful replay's reserved, allocated and largest free block and
 *           its device mallocs, at most SERIES_POINTS points (each the largest of
 *           its events); the recorded reserved the page computes from segs
 *   times   each event's recorded time in microseconds from the first, or null
 *   marks   the peak of live bytes, the OOMs, the device mallocs
 *   doctor  the verdict, the sites at the peak and the OOM, the contract
 *
 * Numbers are exact: addresses and sizes stay below 2^53 on every GPU, and
 * the page draws a summary of them, never a rounded copy. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/json.h"
#include "base/u64map.h"
#include "page_impl.h"

#define SERIES_POINTS 4000
#define STACK_FRAMES 8
#define MAX_MARKS 20000

static void put(void *ctx, const char *s, size_t n) { fwrite(s, 1, n, (FILE *)ctx); }

static void jstr(FILE *f, const char *s) { grt__json_write_string(s ? s : "", GRT__JSON_SHORT_ESCAPES, put, f); }

static void write_stacks(FILE *f, const grt_trace *t, size_t n_stacks) {
  fputs("\"stacks\":[[]", f);
  for (uint32_t s = 1; s <= n_stacks; s++) {
    const grt_trace_frame *fr;
    size_t n, keep[STACK_FRAMES];
    fputs(",[", f);
    if (!grt_trace_stack(t, s, &fr, &n)) {
      size_t k = grt_trace_frames_fold(fr, n, keep, STACK_FRAMES);
      for (size_t i = 0; i < k && i < STACK_FRAMES; i++) {
        char line[1024];
        snprintf(line, sizeof line, "%s (%s:%" PRId64 ")", fr[keep[i]].name, fr[keep[i]].filename,
                 (int64_t)fr[keep[i]].line);
        if (i) fputc(',', f);
        jstr(f, line);
      }
    }
    fputc(']', f);
  }
  fputs("],\n", f);
}

/* One allocation's interval, as found walking the events. */
typedef struct interval {
  int64_t start, requested, end;
  uint64_t addr, size;
  uint32_t stack;
} interval;

static grt_status collect_allocs(const grt_trace_info *in, interval **out, size_t *n_out) {
  size_t cap = in->count[GRT_TRACE_ALLOC] + in->count[GRT_TRACE_FREE_COMPLETED] + 1, n = 0;
  interval *v = malloc(cap * sizeof *v);
  grt__u64map open; /* id -> index in v + 1 */
  grt__u64map_init(&open);
  if (!v) return GRT_ERR_NOMEM;
  grt_status st = GRT_OK;
  for (size_t i = 0; i < in->n_events && !st; i++) {
    const grt_trace_event *e = &in->events[i];
    uint32_t stack = in->event_stack ? in->event_stack[i] : 0;
    if (e->kind == GRT_TRACE_ALLOC && n < cap) {
      v[n] = (interval){(int64_t)i, -1, -1, e->addr, e->size, stack};
      if (!grt__u64map_put(&open, e->id, (void *)(uintptr_t)(++n))) st = GRT_ERR_NOMEM;
      continue;
    }
    if (e->kind != GRT_TRACE_FREE_REQUESTED && e->kind != GRT_TRACE_FREE_COMPLETED) continue;
    uintptr_t at = (uintptr_t)grt__u64map_get(&open, e->id);
    if (!at && e->kind == GRT_TRACE_FREE_COMPLETED && n < cap) { /* live since before recording */
      v[n++] = (interval){-1, -1, (int64_t)i, e->addr, e->size, stack};
      continue;
    }
    if (!at) continue;
    if (e->kind == GRT_TRACE_FREE_REQUESTED) {
      v[at - 1].requested = (int64_t)i;
    } else {
      v[at - 1].end = (int64_t)i;
      grt__u64map_del(&open, e->id);
    }
  }
  grt__u64map_free(&open);
  if (st) {
    free(v);
    return st;
  }
  *out = v;
  *n_out = n;
  return GRT_OK;
}

/* Final active blocks no event made or freed: live all along. */
static void write_allocs(FILE *f, const grt_trace_info *in, const interval *v, size_t n) {
  grt__u64map seen;
  grt__u64map_init(&seen);
  fputs("\"allocs\":[", f);
  for (size_t i = 0; i < n; i++) {
    fprintf(f, "%s[%" PRId64 ",%" PRId64 ",%" PRId64 ",%" PRIu64 ",%" PRIu64 ",%u]", i ? "," : "", v[i].start,
            v[i].requested, v[i].end, v[i].addr, v[i].size, v[i].stack);
    if (!grt__u64map_put(&seen, v[i].addr, (void *)1)) continue; /* out of memory: a final block may repeat */
  }
  bool first = n == 0;
  for (size_t s = 0; s < in->n_segments; s++)
    for (size_t b = 0; b < in->segments[s].n_blocks; b++) {
      const grt_trace_block *blk = &in->segments[s].blocks[b];
      if (blk->state == GRT_TRACE_BLOCK_INACTIVE || grt__u64map_get(&seen, blk->addr)) continue;
      fprintf(f, "%s[-1,-1,-1,%" PRIu64 ",%" PRIu64 ",%u]", first ? "" : ",", blk->addr,
              blk->requested_size ? blk->requested_size : blk->size, blk->stack);
      first = false;
    }
  fputs("],\n", f);
  grt__u64map_free(&seen);
}

static void write_segments(FILE *f, const grt_trace_info *in) {
  fputs("\"segs\":{\"final\":[", f);
  for (size_t s = 0; s < in->n_segments; s++)
    fprintf(f, "%s[%" PRIu64 ",%" PRIu64 "]", s ? "," : "", in->segments[s].addr, in->segments[s].total_size);
  fputs("],\"ev\":[", f);
  bool first = true;
  for (size_t i = 0; i < in->n_events; i++) {
    const grt_trace_event *e = &in->events[i];
    int kind = e->kind == GRT_TRACE_SEGMENT_ALLOC ? 0 : e->kind == GRT_TRACE_SEGMENT_FREE ? 1
             : e->kind == GRT_TRACE_SEGMENT_MAP ? 2 : e->kind == GRT_TRACE_SEGMENT_UNMAP ? 3 : -1;
    if (kind < 0) continue;
    fprintf(f, "%s[%zu,%d,%" PRIu64 ",%" PRIu64 "]", first ? "" : ",", i, kind, e->addr, e->size);
    first = false;
  }
  fprintf(f, "],\"known\":%s},\n", in->has_segments ? "true" : "false");
}

/* Each point: the largest value of its events (a peak is never averaged away). */
static void write_series(FILE *f, const grt_replay_sample *s, size_t n) {
  size_t step = n > SERIES_POINTS ? (n + SERIES_POINTS - 1) / SERIES_POINTS : 1;
  static const char *const names[] = {"reserved", "allocated", "largest", "mallocs"};
  fprintf(f, "\"series\":{\"step\":%zu", step);
  for (int k = 0; k < 4; k++) {
    fprintf(f, ",\"%s\":[", names[k]);
    for (size_t i = 0; i < n; i += step) {
      uint64_t m = 0;
      for (size_t j = i; j < i + step && j < n; j++) {
        uint64_t x = k == 0 ? s[j].reserved : k == 1 ? s[j].allocated : k == 2 ? s[j].largest_free : s[j].device_mallocs;
        if (x > m) m = x;
      }
      fprintf(f, "%s%" PRIu64, i ? "," : "", m);
    }
    fputc(']', f);
  }
  fputs("},\n", f);
}

/* Each event's recorded time in microseconds from the first (never decreasing), or null when an event has none. */
static void write_times(FILE *f, const grt_trace_info *in) {
  bool timed = in->n_events > 0;
  for (size_t i = 0; i < in->n_events && timed; i++) timed = (in->events[i].flags & GRT_TRACE_F_TIME) != 0;
  if (!timed) {
    fputs("\"times\":null,\n", f);
    return;
  }
  int64_t t0 = in->events[0].time, last = 0;
  fputs("\"times\":[", f);
  for (size_t i = 0; i < in->n_events; i++) {
    int64_t t = in->events[i].time - t0;
    if (t < last) t = last; /* clocks step back across threads: keep the axis monotone */
    fprintf(f, "%s%" PRId64, i ? "," : "", t);
    last = t;
  }
  fputs("],\n", f);
}

static void write_marks(FILE *f, const grt_trace_info *in, const grt_doctor_report *rep) {
  fprintf(f, "\"marks\":{\"peak\":%" PRId64 ",\"ooms\":[", rep->peak.valid ? (int64_t)rep->peak.event : -1);
  size_t k = 0;
  for (size_t i = 0; i < in->n_events && k < MAX_MARKS; i++)
    if (in->events[i].kind == GRT_TRACE_OOM) fprintf(f, "%s%zu", k++ ? "," : "", i);
  fputs("],\"mallocs\":[", f);
  k = 0;
  for (size_t i = 0; i < in->n_events && k < MAX_MARKS; i++)
    if (in->events[i].kind == GRT_TRACE_SEGMENT_ALLOC || in->events[i].kind == GRT_TRACE_SEGMENT_MAP)
      fprintf(f, "%s%zu", k++ ? "," : "", i);
  fputs("]},\n", f);
}

static void write_moment(FILE *f, const char *name, const grt_doctor_moment *m) {
  if (!m->valid) {
    fprintf(f, "\"%s\":null,", name);
    return;
  }
  fprintf(f, "\"%s\":{\"event\":%" PRIu64 ",\"reserved\":%" PRIu64 ",\"allocated\":%" PRIu64 ",\"requested\":%" PRIu64
          ",\"internal\":%" PRIu64 ",\"external\":%" PRIu64 ",\"releasable\":%" PRIu64 ",\"largest\":%" PRIu64
          ",\"request\":%" PRIu64 "},",
          name, m->event, m->reserved, m->allocated, m->requested, m->internal_fragmentation,
          m->external_fragmentation, m->releasable, m->largest_free, m->request);
}

static void write_sites(FILE *f, const char *name, const grt_doctor_site *s, size_t n) {
  fprintf(f, "\"%s\":[", name);
  for (size_t i = 0; i < n; i++)
    fprintf(f, "%s[%" PRIu64 ",%" PRIu64 ",%u]", i ? "," : "", s[i].bytes, s[i].count, s[i].stack);
  fputs("],", f);
}

static void write_doctor(FILE *f, const grt_doctor_report *rep) {
  static const char *const verdicts[] = {"healthy", "demand-bound", "fragmentation-bound"};
  static const char *const outcomes[] = {"kept", "broken", "unknown"};
  fprintf(f, "\"doctor\":{\"verdict\":\"%s\",\"why\":", verdicts[rep->verdict]);
  jstr(f, rep->why);
  fputc(',', f);
  write_moment(f, "peak", &rep->peak);
  write_moment(f, "oom", &rep->oom);
  write_sites(f, "peak_sites", rep->peak_sites, rep->n_peak_sites);
  write_sites(f, "oom_sites", rep->oom_sites, rep->n_oom_sites);
  fputs("\"contract\":[", f);
  for (int i = 0; i < GRT_CONTRACT_RULE_COUNT; i++) {
    const grt_contract_finding *c = &rep->contract[i];
    fprintf(f, "%s[\"%s\",\"%s\",", i ? "," : "", grt_contract_rule_name((grt_contract_rule)i), outcomes[c->outcome]);
    jstr(f, c->detail);
    fprintf(f, ",%" PRId64 ",%u]", c->first_event == UINT64_MAX ? (int64_t)-1 : (int64_t)c->first_event, c->stack);
  }
  fprintf(f, "],\"partial\":%s}", rep->partial ? "true" : "false");
}

grt_status grt__page_data(FILE *f, const grt__page_input *x) {
  grt_trace_info in;
  grt_status st = grt_trace_get_info(x->trace, &in);
  interval *v = NULL;
  size_t n = 0;
  if (!st) st = collect_allocs(&in, &v, &n);
  if (st) return st;
  fputs("{\"name\":", f);
  jstr(f, x->name);
  fprintf(f, ",\"n_events\":%zu,\"device\":%d,\n", in.n_events, x->device);
  write_allocs(f, &in, v, n);
  free(v);
  write_segments(f, &in);
  write_stacks(f, x->trace, in.n_stacks);
  write_series(f, x->samples, x->n_samples);
  write_times(f, &in);
  write_marks(f, &in, x->doctor);
  write_doctor(f, x->doctor);
  fputs("}", f);
  return ferror(f) ? GRT_ERR_IO : GRT_OK;
}
