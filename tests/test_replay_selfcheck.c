/* test_replay_selfcheck.c — snapshots recorded from the model itself, then
 * scored by fidelity: every column must agree.
 *
 * A random workload runs on the caching allocator over a small paged device
 * (so real OOMs happen, with and without expandable segments), and the run is
 * written down as PyTorch's history records it: a malloc's segment frees or
 * unmaps (its release path) first, then its segment allocs or maps, then the
 * alloc, or the oom with the free device memory; a free as free_requested +
 * free_completed; empty_cache as its frees. The final state becomes the
 * snapshot's segments. The trace is then cut as a wrapped history ring buffer
 * cuts it (the first k events lost), and fidelity must rebuild the start and
 * agree with the recording on placements, segment decisions, releases, OOMs
 * and the final layout. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "base/rng.h"
#include "replay_test_util.h"

typedef struct range {
  uint64_t addr, size, stream;
} range;

typedef struct ranges {
  range v[4096];
  size_t n;
} ranges;

typedef struct gen {
  grt_device *dev;
  grt_allocator *a;
  grt_alloc_config cfg;
  bool expandable;
  char **lines;
  size_t n_lines, cap_lines;
  ranges held;
  uint64_t live_id[512], live_ptr[512], live_size[512];
  size_t n_live;
  uint64_t next_id;
  uint64_t ooms;
} gen;

static void emit(gen *g, const char *fmt, ...) {
  char buf[160];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  if (g->n_lines == g->cap_lines) {
    g->cap_lines = g->cap_lines ? g->cap_lines * 2 : 1024;
    g->lines = realloc(g->lines, g->cap_lines * sizeof *g->lines);
    assert_non_null(g->lines);
  }
  g->lines[g->n_lines] = strdup(buf);
  assert_non_null(g->lines[g->n_lines++]);
}

/* The device ranges with their streams: segments one by one, or the mapped
 * runs of expandable segments (the snapshot lists exactly those). */
static void footprint(gen *g, ranges *out) {
  out->n = 0;
  grt_alloc_snapshot *s;
  assert_int_equal(grt_alloc_snapshot_take(g->a, &s), GRT_OK);
  for (size_t i = 0; i < s->n_segments; i++) {
    assert_true(out->n < sizeof out->v / sizeof out->v[0]);
    out->v[out->n++] = (range){s->segments[i].address, s->segments[i].total_size, s->segments[i].stream};
  }
  grt_alloc_snapshot_free(s);
}

/* Emits `kind` for each byte range of a that b does not cover (both sorted). */
static void emit_minus(gen *g, const ranges *a, const ranges *b, const char *kind) {
  for (size_t i = 0; i < a->n; i++) {
    uint64_t lo = a->v[i].addr, hi = lo + a->v[i].size;
    for (size_t k = 0; k < b->n && lo < hi; k++) {
      uint64_t blo = b->v[k].addr, bhi = blo + b->v[k].size;
      if (bhi <= lo || blo >= hi) continue;
      if (blo > lo)
        emit(g, "%s - %llu %llu - 0x%llx", kind, (unsigned long long)(blo - lo), (unsigned long long)a->v[i].stream,
             (unsigned long long)lo);
      lo = bhi;
    }
    if (lo < hi)
      emit(g, "%s - %llu %llu - 0x%llx", kind, (unsigned long long)(hi - lo), (unsigned long long)a->v[i].stream,
           (unsigned long long)lo);
  }
}

/* Emits `kind` for each segment of a that b does not hold (same base, size and stream). */
static void emit_missing(gen *g, const ranges *a, const ranges *b, const char *kind) {
  for (size_t i = 0; i < a->n; i++) {
    bool kept = false;
    for (size_t k = 0; k < b->n && !kept; k++)
      kept = b->v[k].addr == a->v[i].addr && b->v[k].size == a->v[i].size && b->v[k].stream == a->v[i].stream;
    if (!kept)
      emit(g, "%s - %llu %llu - 0x%llx", kind, (unsigned long long)a->v[i].size, (unsigned long long)a->v[i].stream,
           (unsigned long long)a->v[i].addr);
  }
}

/* What changed on the device since `held`: releases first, then new ranges
 * (segments by identity: one freed and another made at its base are two
 * events; mapped pages by bytes). */
static void emit_changes(gen *g, bool gains) {
  ranges *now = malloc(sizeof *now);
  assert_non_null(now);
  footprint(g, now);
  if (g->expandable) {
    emit_minus(g, &g->held, now, "segment_unmap");
    if (gains) emit_minus(g, now, &g->held, "segment_map");
  } else {
    emit_missing(g, &g->held, now, "segment_free");
    if (gains) emit_missing(g, now, &g->held, "segment_alloc");
  }
  g->held = *now;
  free(now);
}

static void do_malloc(gen *g, uint64_t size, grt_stream_id stream) {
  grt_devptr p;
  grt_status st = grt_alloc_malloc(g->a, size, stream, &p);
  emit_changes(g, true);
  if (st == GRT_ERR_OOM) {
    uint64_t free_bytes, total;
    assert_int_equal(grt_device_mem_get_info(g->dev, &free_bytes, &total), GRT_OK);
    emit(g, "oom - %llu %llu - %llu", (unsigned long long)grt_alloc_round_size(&g->cfg, size),
         (unsigned long long)stream, (unsigned long long)free_bytes);
    g->ooms++;
    return;
  }
  assert_int_equal(st, GRT_OK);
  uint64_t id = g->next_id++;
  emit(g, "alloc %llu %llu %llu - 0x%llx", (unsigned long long)id, (unsigned long long)size,
       (unsigned long long)stream, (unsigned long long)p);
  g->live_id[g->n_live] = id;
  g->live_ptr[g->n_live] = p;
  g->live_size[g->n_live++] = size;
}

static void do_free(gen *g, size_t i) {
  assert_int_equal(grt_alloc_free(g->a, g->live_ptr[i]), GRT_OK);
  for (int k = 0; k < 2; k++)
    emit(g, "%s %llu %llu 0 - 0x%llx", k ? "free_completed" : "free_requested", (unsigned long long)g->live_id[i],
         (unsigned long long)g->live_size[i], (unsigned long long)g->live_ptr[i]);
  g->n_live--;
  g->live_id[i] = g->live_id[g->n_live];
  g->live_ptr[i] = g->live_ptr[g->n_live];
  g->live_size[i] = g->live_size[g->n_live];
}

static uint64_t random_size(grt__rng *rng) {
  uint64_t r = grt__rng_next(rng) % 100;
  if (r < 55) return 1 + grt__rng_next(rng) % GRT_MiB;               /* small pool */
  if (r < 90) return GRT_MiB + grt__rng_next(rng) % (9 * GRT_MiB);   /* 1-10 MiB: 20 MiB segments */
  return 10 * GRT_MiB + grt__rng_next(rng) % (54 * GRT_MiB);        /* own segments */
}

static void run_workload(gen *g, uint64_t seed, size_t steps) {
  grt__rng rng;
  grt__rng_seed(&rng, seed);
  for (size_t s = 0; s < steps; s++) {
    uint64_t r = grt__rng_next(&rng) % 100;
    if (r < 2) {
      assert_int_equal(grt_alloc_empty_cache(g->a), GRT_OK);
      emit_changes(g, false);
    } else if ((r < 45 && g->n_live) || g->n_live == 512) {
      do_free(g, (size_t)(grt__rng_next(&rng) % g->n_live));
    } else {
      grt_stream_id stream = grt__rng_next(&rng) % 8 ? 0 : 7; /* drawn in this order on every compiler */
      do_malloc(g, random_size(&rng), stream);
    }
  }
}

static void gen_open(gen *g, bool expandable) {
  memset(g, 0, sizeof *g);
  g->expandable = expandable;
  grt_device_config dc;
  grt_device_config_default(&dc);
  dc.capacity = 384 * GRT_MiB;
  dc.model = GRT_DEVICE_MODEL_PAGED; /* an OOM is a lack of bytes, as the replay's capped device has it */
  dc.base_address = 0x7f0000000000;
  assert_int_equal(grt_device_create(&dc, &g->dev), GRT_OK);
  grt_alloc_config_default(&g->cfg);
  g->cfg.expandable_segments = expandable;
  assert_int_equal(grt_alloc_create("caching", g->dev, &g->cfg, &g->a), GRT_OK);
}

static void gen_close(gen *g) {
  for (size_t i = 0; i < g->n_lines; i++) free(g->lines[i]);
  free(g->lines);
  assert_int_equal(grt_alloc_destroy(g->a), GRT_OK);
  assert_int_equal(grt_device_destroy(g->dev), GRT_OK);
}

static void append(char **buf, size_t *n, size_t *cap, const char *s) {
  size_t k = strlen(s);
  if (*n + k + 2 > *cap) {
    while (*n + k + 2 > *cap) *cap = *cap ? *cap * 2 : 1 << 16;
    *buf = realloc(*buf, *cap);
    assert_non_null(*buf);
  }
  memcpy(*buf + *n, s, k);
  (*buf)[*n + k] = '\n';
  *n += k + 1;
  (*buf)[*n] = 0;
}

/* The snapshot: settings, the events from `first`, the final segments. */
static char *snapshot_text(const gen *g, size_t first) {
  char *buf = NULL, line[200];
  size_t n = 0, cap = 0;
  append(&buf, &n, &cap, "gpurt-trace 1");
  append(&buf, &n, &cap, g->expandable ? "%setting expandable_segments 1" : "%setting expandable_segments 0");
  for (size_t i = first; i < g->n_lines; i++) append(&buf, &n, &cap, g->lines[i]);
  grt_alloc_snapshot *s;
  assert_int_equal(grt_alloc_snapshot_take(g->a, &s), GRT_OK);
  for (size_t i = 0; i < s->n_segments; i++) {
    const grt_snapshot_segment *x = &s->segments[i];
    snprintf(line, sizeof line, "%%segment 0x%llx %llu %llu %s %d", (unsigned long long)x->address,
             (unsigned long long)x->total_size, (unsigned long long)x->stream, x->is_large ? "large" : "small",
             x->is_expandable);
    append(&buf, &n, &cap, line);
    for (size_t j = 0; j < x->n_blocks; j++) {
      const grt_snapshot_block *b = &x->blocks[j];
      snprintf(line, sizeof line, "%%block 0x%llx %llu %llu %s", (unsigned long long)b->address,
               (unsigned long long)b->size, (unsigned long long)b->requested_size, grt_block_state_name(b->state));
      append(&buf, &n, &cap, line);
    }
  }
  grt_alloc_snapshot_free(s);
  return buf;
}

static void expect_agreement(const char *text, const char *what) {
  grt_trace *t = load(text);
  grt_fidelity_report rep;
  char err[256];
  grt_status st = grt_replay_fidelity(t, &rep, err, sizeof err);
  if (st) fail_msg("%s: %s (%s)", what, err, grt_status_name(st));
  print_message("%s: %llu/%llu exact, decisions %llu/%llu, releases %llu/%llu, ooms %llu/%llu, start %zu "
                "segments %zu blocks\n",
                what, (unsigned long long)rep.exact, (unsigned long long)rep.allocs,
                (unsigned long long)rep.segment_decisions_agree, (unsigned long long)rep.segment_decisions,
                (unsigned long long)rep.releases_matching, (unsigned long long)rep.releases,
                (unsigned long long)rep.ooms_agree, (unsigned long long)rep.ooms_recorded, rep.start_segments,
                rep.start_blocks);
  if (rep.divergences) fail_msg("%s: first divergence at event %llu: %s", what, (unsigned long long)rep.shown[0].event,
                                rep.shown[0].context);
  if (rep.decision_note[0]) fail_msg("%s: %s", what, rep.decision_note);
  if (rep.release_note[0]) fail_msg("%s: %s", what, rep.release_note);
  if (rep.oom_note[0]) fail_msg("%s: %s", what, rep.oom_note);
  if (!rep.final_layout_equal) fail_msg("%s: %s", what, rep.layout_note);
  assert_int_equal(rep.contradictions, 0);
  assert_true(rep.structure_ok);
  assert_int_equal(grt_trace_destroy(t), GRT_OK);
}

static void selfcheck(bool expandable, uint64_t seed) {
  gen g;
  gen_open(&g, expandable);
  run_workload(&g, seed, 4000);
  assert_true(g.ooms > 0); /* the device is small enough to run out */
  size_t cuts[] = {0, g.n_lines / 3, 2 * g.n_lines / 3};
  for (size_t i = 0; i < sizeof cuts / sizeof cuts[0]; i++) {
    char what[96];
    snprintf(what, sizeof what, "%s seed %llu, first %zu events lost", expandable ? "expandable" : "segments",
             (unsigned long long)seed, cuts[i]);
    char *text = snapshot_text(&g, cuts[i]);
    const char *dump = getenv("GRT_SELFCHECK_DUMP"); /* a directory: keep each snapshot to look at */
    if (dump) {
      char path[512];
      snprintf(path, sizeof path, "%s/%s-%llu-%zu.trace", dump, expandable ? "expandable" : "segments",
               (unsigned long long)seed, cuts[i]);
      FILE *f = fopen(path, "w");
      if (f) fputs(text, f), fclose(f);
    }
    expect_agreement(text, what);
    free(text);
  }
  gen_close(&g);
}

static void test_segments(void **state) {
  (void)state;
  for (uint64_t seed = 1; seed <= 3; seed++) selfcheck(false, seed);
}

static void test_expandable(void **state) {
  (void)state;
  for (uint64_t seed = 1; seed <= 3; seed++) selfcheck(true, seed);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_segments),
      cmocka_unit_test(test_expandable),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
