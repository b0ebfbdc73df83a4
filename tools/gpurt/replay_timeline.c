/* replay_timeline.c — `gpurt replay --timeline FILE`: a replay as a Chrome /
 * Perfetto trace (Trace Event Format, JSON): the model's reserved, allocated
 * and largest free block and the recorded run's reserved as counters (ph
 * "C"), the recorded segment events as instants on the process (ph "i", s
 * "p"), the recorded and the model's OOMs as global instants (s "g").
 * Every event, metadata too, carries name, cat, ph, pid and ts. ts is the
 * event's recorded time in microseconds from the first one where every
 * event has one, else its index (otherData.ts says which). Counters are
 * written where a value changes, at most MAX_POINTS of them (each bucket's
 * largest values beyond that). */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include "base/json.h"
#include "replay_timeline.h"
#include "replay_util.h"

#define MAX_POINTS 200000

static void put(void *ctx, const char *s, size_t n) { fwrite(s, 1, n, (FILE *)ctx); }

typedef struct clock_of {
  const grt_trace_info *in;
  bool timed;
  int64_t t0;
} clock_of;

static double ts_of(const clock_of *c, size_t i) {
  if (i >= c->in->n_events) i = c->in->n_events ? c->in->n_events - 1 : 0;
  return c->timed ? (double)(c->in->events[i].time - c->t0) : (double)i;
}

static void counters(FILE *f, const clock_of *c, const grt_replay_sample *s, size_t n) {
  size_t step = n > MAX_POINTS ? (n + MAX_POINTS - 1) / MAX_POINTS : 1;
  uint64_t last[3] = {UINT64_MAX, UINT64_MAX, UINT64_MAX};
  for (size_t i = 0; i < n; i += step) {
    uint64_t v[3] = {0, 0, 0};
    for (size_t j = i; j < i + step && j < n; j++) {
      if (s[j].reserved > v[0]) v[0] = s[j].reserved;
      if (s[j].allocated > v[1]) v[1] = s[j].allocated;
      if (s[j].largest_free > v[2]) v[2] = s[j].largest_free;
    }
    if (v[0] == last[0] && v[1] == last[1] && v[2] == last[2] && i + step < n) continue;
    fprintf(f, ",\n{\"name\":\"memory (model)\",\"cat\":\"memory\",\"ph\":\"C\",\"pid\":1,\"tid\":0,\"ts\":%.0f,"
               "\"args\":{\"reserved\":%" PRIu64 ",\"allocated\":%" PRIu64 ",\"largest free block\":%" PRIu64 "}}",
            ts_of(c, i), v[0], v[1], v[2]);
    last[0] = v[0], last[1] = v[1], last[2] = v[2];
  }
}

static void recorded(FILE *f, const clock_of *c) {
  static const char *const names[] = {"cudaMalloc", "cudaFree", "map", "unmap"};
  const grt_trace_info *in = c->in;
  int64_t reserved = 0;
  for (size_t i = 0; i < in->n_events; i++) {
    const grt_trace_event *e = &in->events[i];
    int k = e->kind == GRT_TRACE_SEGMENT_ALLOC ? 0 : e->kind == GRT_TRACE_SEGMENT_FREE ? 1
          : e->kind == GRT_TRACE_SEGMENT_MAP ? 2 : e->kind == GRT_TRACE_SEGMENT_UNMAP ? 3 : -1;
    if (e->kind == GRT_TRACE_OOM) {
      fprintf(f, ",\n{\"name\":\"OOM (recorded)\",\"cat\":\"oom\",\"ph\":\"i\",\"s\":\"g\",\"pid\":1,\"tid\":0,"
                 "\"ts\":%.0f,\"args\":{\"event\":%zu,\"size\":%" PRIu64 "}}", ts_of(c, i), i, e->size);
      continue;
    }
    if (k < 0) continue;
    reserved += k % 2 ? -(int64_t)e->size : (int64_t)e->size;
    fprintf(f, ",\n{\"name\":\"%s\",\"cat\":\"segment\",\"ph\":\"i\",\"s\":\"p\",\"pid\":1,\"tid\":0,\"ts\":%.0f,"
               "\"args\":{\"event\":%zu,\"addr\":\"0x%" PRIx64 "\",\"size\":%" PRIu64 "}}",
            names[k], ts_of(c, i), i, e->addr, e->size);
    fprintf(f, ",\n{\"name\":\"reserved (recorded, change since the start)\",\"cat\":\"memory\",\"ph\":\"C\",\"pid\":1,"
               "\"tid\":0,\"ts\":%.0f,\"args\":{\"bytes\":%" PRId64 "}}", ts_of(c, i), reserved);
  }
}

int cli_write_replay_timeline(const char *out, const grt_trace *t, const char *path, const cli_run *run) {
  grt_trace_info in;
  int rc = grt_trace_get_info(t, &in) ? 1 : 0;
  FILE *f = rc ? NULL : fopen(out, "w");
  if (!rc && !f) {
    fprintf(stderr, "gpurt replay: cannot write %s\n", out);
    rc = 1;
  }
  if (f) {
    clock_of c = {&in, in.n_events > 0, in.n_events ? in.events[0].time : 0};
    for (size_t i = 0; i < in.n_events && c.timed; i++) c.timed = (in.events[i].flags & GRT_TRACE_F_TIME) != 0;
    fprintf(f, "{\"displayTimeUnit\":\"ms\",\"otherData\":{\"ts\":\"%s\",\"policy\":",
            c.timed ? "recorded time_us from the first event" : "event index");
    grt__json_write_string(run->policy, 0, put, f);
    fputs("},\"traceEvents\":[\n{\"name\":\"process_name\",\"cat\":\"__metadata\",\"ph\":\"M\",\"pid\":1,\"ts\":0,"
          "\"args\":{\"name\":",
          f);
    char label[300];
    snprintf(label, sizeof label, "gpurt replay: %s", cli_basename(path));
    grt__json_write_string(label, 0, put, f);
    fputs("}}", f);
    counters(f, &c, run->samples, run->n_samples);
    recorded(f, &c);
    if (run->sum.has_oom)
      fprintf(f, ",\n{\"name\":\"OOM (model)\",\"cat\":\"oom\",\"ph\":\"i\",\"s\":\"g\",\"pid\":1,\"tid\":0,\"ts\":%.0f,"
                 "\"args\":{\"event\":%" PRIu64 ",\"size\":%" PRIu64 "}}",
              ts_of(&c, run->sum.first_oom_event), run->sum.first_oom_event, run->sum.first_oom_size);
    fputs("\n]}\n", f);
    if (ferror(f) | fclose(f)) {
      fprintf(stderr, "gpurt replay: cannot write %s\n", out);
      rc = 1;
    }
  }
  return rc;
}
