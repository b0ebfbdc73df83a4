/* test_replay_nomem.c — the replayer when host memory runs out.
 *
 * A native trace (a generated one with two streams, releases, OOMs on a small
 * device, and tests/data/native_small.trace) is replayed under several
 * policies with the n-th host allocation failing, for n = 1, 2, ... until a
 * replay never reaches it. Every allocation counts here, the device's own
 * too (nomem_wrap.h; test_alloc_nomem.c shields the device instead).
 *   - whole runs: each returns GRT_ERR_NOMEM cleanly (no leak under ASan) or
 *     completes with exactly the unfailed run's summary, series, statistics
 *     and final snapshot;
 *   - event by event: a feed that fails is fed again until it gets through;
 *     a failed feed moves nothing (position, summary, allocator statistics)
 *     and the replay ends as the unfailed one. Here the replay's device is
 *     swapped for a shielded one (shielded_device.h): the device's own host
 *     allocations have no reservations, and a release it fails halfway stays
 *     half done; the whole runs above cover those failures.
 * A release hook records what the device holds after each release, so that
 * a release failed and fed again shows as one.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "nomem_wrap.h"
#include "shielded_device.h"
#include "snapshot_equal.h"

#include "alloc/allocator_impl.h"
#include "base/rng.h"
#include "gpurt/replay.h"
#include "gpurt/trace.h"
#include "trace/replay_impl.h"

#define MiB GRT_MiB

/* A trace of allocs and frees on two streams, with segment_free runs (a
 * release each), an oom event and a snapshot marker. */
static char *generated_trace(void) {
  size_t cap = 64 * 1024, len = 0;
  char *t = malloc(cap);
  assert_non_null(t);
  len += (size_t)snprintf(t + len, cap - len, "gpurt-trace 1\n");
  grt__rng r;
  grt__rng_seed(&r, 11);
  bool live[64] = {false};
  for (int i = 0; i < 400; i++) {
    unsigned id = (unsigned)grt__rng_below(&r, 64), k = (unsigned)grt__rng_below(&r, 100);
    uint64_t size = k < 60 ? 1 + grt__rng_below(&r, MiB) : k < 95 ? MiB + grt__rng_below(&r, 30 * MiB) : 200 * MiB;
    if (k >= 97)
      len += (size_t)snprintf(t + len, cap - len, "segment_free - %d 0 %d 0x%x\n", 2 << 20, i, 0x1000 * (i + 1));
    else if (k == 96)
      len += (size_t)snprintf(t + len, cap - len, "oom - %llu 1 %d 0\n", (unsigned long long)size, i);
    else if (live[id])
      len += (size_t)snprintf(t + len, cap - len, "free_completed %u %llu %u %d\n", id, (unsigned long long)size,
                              id % 2, i);
    else
      len += (size_t)snprintf(t + len, cap - len, "alloc %u %llu %u %d\n", id, (unsigned long long)size, id % 2, i);
    if (k < 96) live[id] = !live[id];
    assert_true(len < cap - 128);
  }
  len += (size_t)snprintf(t + len, cap - len, "snapshot -\n");
  return t;
}

/* What the release hook saw: the segments left after each release, and a digest. */
typedef struct releases {
  uint64_t calls, segments, digest;
} releases;

/* What the device holds after each release, folded into a digest. */
static void on_release(void *ctx, grt_replay *r, uint64_t index) {
  releases *k = ctx;
  grt_device_stats ds;
  assert_int_equal(grt_device_get_stats(grt_replay_device(r), &ds), GRT_OK);
  k->calls++;
  k->segments += ds.segments;
  k->digest = k->digest * 31 + index + ds.bytes_in_use;
}

typedef struct outcome {
  releases hook;
  grt_replay_summary sum;
  grt_alloc_stats stats;
  grt_alloc_snapshot *snap;
  grt_replay_sample *series;
  size_t n_series;
} outcome;

static void take_outcome(grt_replay *r, outcome *o) {
  o->hook = *(const releases *)r->hook_ctx;
  assert_int_equal(grt_replay_get_summary(r, &o->sum), GRT_OK);
  assert_int_equal(grt_alloc_get_stats(grt_replay_allocator(r), &o->stats), GRT_OK);
  assert_int_equal(grt_alloc_snapshot_take(grt_replay_allocator(r), &o->snap), GRT_OK);
  const grt_replay_sample *s;
  assert_int_equal(grt_replay_series(r, &s, &o->n_series), GRT_OK);
  o->series = malloc((o->n_series + 1) * sizeof *s);
  assert_non_null(o->series);
  memcpy(o->series, s, o->n_series * sizeof *s);
}

static void drop_outcome(outcome *o) {
  grt_alloc_snapshot_free(o->snap);
  free(o->series);
}

/* The summary has padding (a bool among the counters): field by field. */
static bool same_summary(const grt_replay_summary *x, const grt_replay_summary *y) {
#define F(f) (x->f == y->f)
  return F(events) && F(allocs) && F(frees) && F(unmatched_frees) && F(capacity) && F(peak_reserved) &&
      F(peak_allocated) && F(peak_requested) && F(peak_active) && F(peak_live) && F(peak_reserved_event) &&
      F(peak_cached) && F(peak_largest_free) && F(max_fragmentation) && F(final_reserved) && F(final_allocated) &&
      F(device_mallocs) && F(device_frees) && F(syncs) && F(num_alloc_retries) && F(ooms) && F(has_oom) &&
      F(first_oom_event) && F(first_oom_size) && F(first_oom_live) && F(first_oom_utilization) && F(releases);
#undef F
}

/* The sample fields are all 64 bits wide: no padding. */
static void expect_same_outcome(const outcome *x, const outcome *y, const char *where) {
  if (memcmp(&x->hook, &y->hook, sizeof x->hook))
    fail_msg("%s: the release hook saw other releases (%llu/%llu calls, %llu/%llu segments)", where,
             (unsigned long long)x->hook.calls, (unsigned long long)y->hook.calls, (unsigned long long)x->hook.segments,
             (unsigned long long)y->hook.segments);
  if (!same_summary(&x->sum, &y->sum)) fail_msg("%s: summaries differ", where);
  if (memcmp(&x->stats, &y->stats, sizeof x->stats)) fail_msg("%s: allocator statistics differ", where);
  if (!snapshots_equal(x->snap, y->snap)) fail_msg("%s: final snapshots differ", where);
  if (x->n_series != y->n_series || memcmp(x->series, y->series, x->n_series * sizeof *x->series))
    fail_msg("%s: series differ", where);
}

typedef struct replay_case {
  const char *name;
  const char *policy, *conf;
  /* whole runs skipped: the simulated device's unmap cannot report a failure
     of its own host memory (a page it could not free stays held) */
  bool shielded_only;
} replay_case;

static void config_of(const replay_case *c, grt_replay_config *cfg) {
  grt_replay_config_default(cfg);
  cfg->policy = c->policy;
  cfg->alloc_conf = c->conf;
  cfg->capacity = 512 * MiB; /* small enough for OOMs and flushes */
  cfg->record_series = true;
}

static void hook(grt_replay *r, releases *k) {
  *k = (releases){0};
  r->on_release = on_release;
  r->hook_ctx = k;
}

/* The replay's fresh device and allocator swapped for a shielded device and
 * an allocator of the same configuration (nothing was placed yet). */
static void shield(grt_replay *r) {
  grt_alloc_config ac = r->alloc->cfg;
  grt_device_config dc;
  grt_device_config_default(&dc);
  dc.capacity = r->sum.capacity;
  assert_int_equal(grt_alloc_destroy(r->alloc), GRT_OK);
  assert_int_equal(grt_device_destroy(r->dev), GRT_OK);
  r->dev = shielded_device(&dc);
  assert_int_equal(grt_alloc_create(r->policy, r->dev, &ac, &r->alloc), GRT_OK);
}

static void reference(const grt_trace *t, const replay_case *c, outcome *o) {
  grt_replay_config cfg;
  config_of(c, &cfg);
  grt_replay *r;
  releases k;
  assert_int_equal(grt_replay_open(t, &cfg, &r), GRT_OK);
  hook(r, &k);
  assert_int_equal(grt_replay_run(r), GRT_OK);
  take_outcome(r, o);
  assert_int_equal(grt_replay_destroy(r), GRT_OK);
}

/* Whole runs with the n-th allocation failing; the number of failed runs. */
static long whole_runs(const grt_trace *t, const replay_case *c, const outcome *ref) {
  grt_replay_config cfg;
  config_of(c, &cfg);
  long failed = 0;
  for (long n = 1;; n++) {
    char where[96];
    snprintf(where, sizeof where, "%s, whole run failing allocation %ld", c->name, n);
    grt_replay *r = NULL;
    releases k;
    nomem_arm(n);
    grt_status st = grt_replay_open(t, &cfg, &r);
    if (!st) {
      hook(r, &k);
      st = grt_replay_run(r);
    }
    bool fired = nomem_disarm();
    if (st == GRT_ERR_NOMEM && fired) {
      failed++;
      grt_status gone = grt_replay_destroy(r);
      if (gone) fail_msg("%s: after GRT_ERR_NOMEM, destroy: %s", where, grt_status_name(gone));
      continue;
    }
    if (st) fail_msg("%s: %s", where, grt_status_name(st));
    outcome got;
    take_outcome(r, &got);
    expect_same_outcome(ref, &got, where);
    drop_outcome(&got);
    assert_int_equal(grt_replay_destroy(r), GRT_OK);
    if (!fired) return failed;
  }
}

/* Event by event, each feed retried until it gets through; the number of failed feeds. */
static long retried_feeds(const grt_trace *t, const replay_case *c, const outcome *ref) {
  grt_replay_config cfg;
  config_of(c, &cfg);
  grt_replay *r;
  releases k;
  assert_int_equal(grt_replay_open(t, &cfg, &r), GRT_OK);
  shield(r);
  hook(r, &k);
  long failed = 0;
  for (bool done = false; !done;) {
    uint64_t pos = grt_replay_position(r);
    grt_replay_summary before, after;
    grt_alloc_stats sb, sa;
    assert_int_equal(grt_replay_get_summary(r, &before), GRT_OK);
    assert_int_equal(grt_alloc_get_stats(grt_replay_allocator(r), &sb), GRT_OK);
    for (long n = 1;; n++) {
      nomem_arm(n);
      grt_status st = grt_replay_step(r, &done);
      bool fired = nomem_disarm();
      if (st != GRT_ERR_NOMEM) {
        if (st) fail_msg("%s: event %llu: %s", c->name, (unsigned long long)pos, grt_status_name(st));
        break;
      }
      if (!fired) fail_msg("%s: event %llu: GRT_ERR_NOMEM with no failed allocation", c->name, (unsigned long long)pos);
      failed++;
      assert_int_equal(grt_replay_position(r), pos);
      assert_int_equal(grt_replay_get_summary(r, &after), GRT_OK);
      assert_int_equal(grt_alloc_get_stats(grt_replay_allocator(r), &sa), GRT_OK);
      if (!same_summary(&before, &after) || memcmp(&sb, &sa, sizeof sa))
        fail_msg("%s: event %llu: a failed feed changed the replay", c->name, (unsigned long long)pos);
    }
  }
  outcome got;
  take_outcome(r, &got);
  expect_same_outcome(ref, &got, c->name);
  drop_outcome(&got);
  assert_int_equal(grt_replay_destroy(r), GRT_OK);
  return failed;
}

static void replay_under_failures(const grt_trace *t, const char *trace_name) {
  static const replay_case cases[] = {
      {"caching", "caching", NULL, false},
      {"caching expandable", "caching", "expandable_segments:True", true},
      {"caching max_split_size", "caching", "max_split_size_mb:64", false},
      {"naive", "naive", NULL, false},
      {"bestfit", "bestfit", NULL, false},
      {"buddy", "buddy", NULL, false},
      {"async", "async", NULL, false},
      {"bump", "bump", NULL, false},
      {"slab", "slab", NULL, false},
      {"sharded", "sharded", NULL, false},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    outcome ref;
    reference(t, &cases[i], &ref);
    long runs = cases[i].shielded_only ? -1 : whole_runs(t, &cases[i], &ref);
    long feeds = retried_feeds(t, &cases[i], &ref);
    print_message("%s, %s: %llu events; %ld whole runs (-1: not run) and %ld feeds failed with GRT_ERR_NOMEM\n",
                  trace_name, cases[i].name, (unsigned long long)ref.sum.events, runs, feeds);
    assert_true(runs != 0 && feeds > 0);
    drop_outcome(&ref);
  }
}

static void test_generated_trace(void **state) {
  (void)state;
  char *text = generated_trace();
  grt_trace *t;
  grt_trace_error err;
  assert_int_equal(grt_trace_load_buffer(text, strlen(text), "generated", NULL, &t, &err), GRT_OK);
  free(text);
  replay_under_failures(t, "generated");
  assert_int_equal(grt_trace_destroy(t), GRT_OK);
}

static void test_small_trace(void **state) {
  (void)state;
  grt_trace *t;
  grt_trace_error err;
  assert_int_equal(grt_trace_load(GRT_TEST_DATA_DIR "/native_small.trace", NULL, &t, &err), GRT_OK);
  replay_under_failures(t, "native_small");
  assert_int_equal(grt_trace_destroy(t), GRT_OK);
}

/* A test stopped by a failed assertion may leave a failure armed. */
static int disarm(void **state) {
  (void)state;
  nomem_disarm();
  return 0;
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup(test_generated_trace, disarm),
      cmocka_unit_test_setup(test_small_trace, disarm),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
