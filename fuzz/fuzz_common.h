/* fuzz_common.h — the shared libFuzzer body: load an input with one reader and, when it
 * loads, check that the native writer and reader reproduce it exactly (write -> read), its
 * stacks included, and that every stack folds to indices inside it; then replay it
 * (fuzz_replay.h). */
#ifndef GRT_FUZZ_COMMON_H
#define GRT_FUZZ_COMMON_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_replay.h"
#include "gpurt/trace.h"

static inline void grt_fuzz_stacks(const grt_trace *t, const grt_trace *u, const grt_trace_info *a,
                                   const grt_trace_info *b) {
  if (a->n_stacks != b->n_stacks || a->n_frames != b->n_frames || (a->event_stack == NULL) != (b->event_stack == NULL))
    abort();
  for (size_t i = 0; a->event_stack && i < a->n_events; i++)
    if (a->event_stack[i] != b->event_stack[i] || a->event_stack[i] > a->n_stacks) abort();
  for (uint32_t s = 1; s <= a->n_stacks; s++) {
    const grt_trace_frame *fa, *fb;
    size_t na, nb, keep[8];
    if (grt_trace_stack(t, s, &fa, &na) != GRT_OK || grt_trace_stack(u, s, &fb, &nb) != GRT_OK || na != nb || !na)
      abort();
    for (size_t i = 0; i < na; i++)
      if (strcmp(fa[i].name, fb[i].name) || strcmp(fa[i].filename, fb[i].filename) || fa[i].line != fb[i].line) abort();
    size_t k = grt_trace_frames_fold(fa, na, keep, 8);
    for (size_t i = 0; i < k && i < 8; i++)
      if (keep[i] >= na) abort();
  }
}

static inline void grt_fuzz_round_trip(const grt_trace *t) {
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  if (!f) return;
  if (grt_trace_write_native(t, f) != GRT_OK) abort();
  fclose(f);
  grt_trace_load_config cfg;
  grt_trace_load_config_default(&cfg);
  cfg.format = GRT_TRACE_FORMAT_NATIVE;
  grt_trace *u = NULL;
  grt_trace_error err;
  if (grt_trace_load_buffer(buf, len, "rt", &cfg, &u, &err) != GRT_OK) {
    fprintf(stderr, "round trip failed: line %llu: %s\n", (unsigned long long)err.line, err.reason);
    abort();
  }
  grt_trace_info a, b;
  if (grt_trace_get_info(t, &a) != GRT_OK || grt_trace_get_info(u, &b) != GRT_OK) abort();
  if (a.n_events != b.n_events || a.n_ids != b.n_ids || a.n_segments != b.n_segments ||
      (a.n_events && memcmp(a.events, b.events, a.n_events * sizeof *a.events) != 0))
    abort();
  grt_fuzz_stacks(t, u, &a, &b);
  if (grt_trace_destroy(u) != GRT_OK) abort();
  free(buf);
}

static inline int grt_fuzz_one(const unsigned char *data, size_t size, grt_trace_format fmt, int device) {
  grt_trace_load_config cfg;
  grt_trace_load_config_default(&cfg);
  cfg.format = fmt;
  cfg.device = device;
  grt_trace *t = NULL;
  grt_trace_error err;
  grt_status st = grt_trace_load_buffer(data, size, "fuzz", &cfg, &t, &err);
  if (st == GRT_OK) {
    grt_fuzz_round_trip(t);
    unsigned pick = size ? (unsigned)(data[size / 2] ^ data[size - 1]) : 0; /* a byte the mutations move */
    grt_fuzz_replay(t, pick);
    grt_trace_info info;
    if ((fmt == GRT_TRACE_FORMAT_NATIVE || fmt == GRT_TRACE_FORMAT_RMM) && grt_trace_get_info(t, &info) == GRT_OK &&
        info.n_events <= GRT_FUZZ_REPLAY_MAX_EVENTS)
      grt_fuzz_stream_replay(data, size, pick, fmt, info.n_events);
    if (grt_trace_destroy(t) != GRT_OK) abort();
  } else if (t != NULL || err.reason[0] == '\0') {
    abort(); /* a failed load must leave *out NULL and say why */
  }
  return 0;
}

#endif
