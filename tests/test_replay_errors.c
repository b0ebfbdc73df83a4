/* test_replay_errors.c — the replayer's refusals and rare paths with events fed
 * by hand (grt_replay_create + grt_replay_feed): argument checks, calls that
 * need an attached trace, a live id allocated again, zero-byte allocations,
 * OOMs on a small device and the frees of what was not served, frees of ids
 * never seen, release events, the step callback stopping a replay, the series,
 * and the live-id table growing and shrinking under thousands of ids. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "gpurt/replay.h"

static grt_trace_event ev_of(grt_trace_kind k, uint64_t id, uint64_t size) {
  grt_trace_event ev;
  memset(&ev, 0, sizeof ev);
  ev.kind = (uint8_t)k;
  ev.id = id;
  ev.size = size;
  return ev;
}

static grt_status feed(grt_replay *r, grt_trace_kind k, uint64_t id, uint64_t size) {
  grt_trace_event ev = ev_of(k, id, size);
  return grt_replay_feed(r, &ev, 0);
}

static void test_args(void **state) {
  (void)state;
  grt_replay_config_default(NULL);
  grt_replay_config cfg;
  grt_replay_config_default(&cfg);
  grt_replay *r = NULL;
  assert_int_equal(grt_replay_create(&cfg, NULL, NULL), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt_replay_open(NULL, &cfg, &r), GRT_ERR_INVALID_ARG);
  grt_replay_config odd = cfg;
  odd.placement = (grt_replay_placement)(GRT_REPLAY_PLACE_RECORDED + 1); /* an enum from outside holds anything */
  assert_int_equal(grt_replay_create(&odd, NULL, &r), GRT_ERR_INVALID_ARG);
  assert_null(r);
  odd = cfg;
  odd.device_model = (grt_device_model)7;
  assert_int_equal(grt_replay_create(&odd, NULL, &r), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt_replay_create(NULL, NULL, &r), GRT_OK); /* defaults */
  bool done = false;
  grt_replay_summary sum;
  grt_replay_sample s;
  const grt_replay_sample *series = NULL;
  size_t n = 5;
  grt_trace_event ev = ev_of(GRT_TRACE_ALLOC, 1, 512);
  assert_int_equal(grt_replay_feed(NULL, &ev, 0), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt_replay_feed(r, NULL, 0), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt_replay_step(r, &done), GRT_ERR_INVALID_ARG); /* no trace */
  assert_int_equal(grt_replay_step(NULL, &done), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt_replay_step(r, NULL), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt_replay_run(r), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt_replay_run(NULL), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt_replay_rebuild_start(NULL), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt_replay_rebuild_start(r), GRT_ERR_INVALID_ARG); /* no trace info */
  assert_int_equal(grt_replay_get_summary(NULL, &sum), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt_replay_get_summary(r, NULL), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt_replay_sample_now(NULL, &s), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt_replay_sample_now(r, NULL), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt_replay_series(NULL, &series, &n), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt_replay_series(r, NULL, &n), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt_replay_series(r, &series, NULL), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt_replay_series(r, &series, &n), GRT_OK);
  assert_int_equal(n, 0);
  assert_int_equal(grt_replay_position(NULL), 0);
  assert_null(grt_replay_allocator(NULL));
  assert_null(grt_replay_device(NULL));
  assert_non_null(grt_replay_device(r));
  assert_string_equal(grt_replay_last_error(NULL), "");
  assert_int_equal(grt_replay_feed(r, &ev, 0), GRT_OK);
  assert_int_equal(grt_replay_rebuild_start(r), GRT_ERR_STATE); /* events were applied */
  assert_int_equal(grt_replay_destroy(r), GRT_OK);
  assert_int_equal(grt_replay_destroy(NULL), GRT_OK);
}

static void test_malformed_and_oom(void **state) {
  (void)state;
  grt_replay_config cfg;
  grt_replay_config_default(&cfg);
  cfg.capacity = 4 * GRT_MiB;
  grt_replay *r = NULL;
  assert_int_equal(grt_replay_create(&cfg, NULL, &r), GRT_OK);
  assert_int_equal(feed(r, GRT_TRACE_ALLOC, 1, 1000), GRT_OK);
  assert_int_equal(feed(r, GRT_TRACE_ALLOC, 1, 1000), GRT_ERR_PARSE); /* still live */
  assert_non_null(strstr(grt_replay_last_error(r), "still live"));
  assert_int_equal(feed(r, GRT_TRACE_ALLOC, 2, 0), GRT_OK);         /* zero bytes: nothing placed */
  assert_int_equal(feed(r, GRT_TRACE_ALLOC, 3, 64 * GRT_MiB), GRT_OK); /* an OOM, not an error */
  assert_int_equal(feed(r, GRT_TRACE_FREE_REQUESTED, 1, 1000), GRT_OK);
  assert_int_equal(feed(r, GRT_TRACE_FREE_COMPLETED, 2, 0), GRT_OK);
  assert_int_equal(feed(r, GRT_TRACE_FREE_COMPLETED, 3, 64 * GRT_MiB), GRT_OK);
  assert_int_equal(feed(r, GRT_TRACE_FREE_COMPLETED, 77, 8), GRT_OK); /* never allocated: skipped */
  assert_int_equal(feed(r, GRT_TRACE_SNAPSHOT, GRT_TRACE_NO_ID, 0), GRT_OK);
  assert_int_equal(feed(r, GRT_TRACE_SEGMENT_ALLOC, GRT_TRACE_NO_ID, 2 * GRT_MiB), GRT_OK);
  assert_int_equal(feed(r, GRT_TRACE_SEGMENT_FREE, GRT_TRACE_NO_ID, 2 * GRT_MiB), GRT_OK);
  assert_int_equal(feed(r, GRT_TRACE_SEGMENT_FREE, GRT_TRACE_NO_ID, 2 * GRT_MiB), GRT_OK); /* same run */
  assert_int_equal(feed(r, GRT_TRACE_OOM, GRT_TRACE_NO_ID, 8 * GRT_MiB), GRT_OK);
  assert_int_equal(feed(r, GRT_TRACE_FREE_COMPLETED, 1, 1000), GRT_OK);
  grt_replay_summary sum;
  assert_int_equal(grt_replay_get_summary(r, &sum), GRT_OK);
  assert_int_equal(sum.ooms, 2); /* the 64 MiB alloc, and the recorded oom: no free memory recorded, so it fails */
  assert_int_equal(sum.recorded_ooms, 1);
  assert_true(sum.has_oom);
  assert_int_equal(sum.first_oom_size, 64 * GRT_MiB);
  assert_int_equal(sum.unmatched_frees, 1);
  assert_int_equal(sum.allocs, 3);
  assert_true(sum.releases >= 1);
  assert_int_equal(sum.final_allocated, 0);
  assert_int_equal(grt_replay_destroy(r), GRT_OK);
}

typedef struct stop_ctx {
  uint64_t stop_at, seen;
} stop_ctx;

static grt_status stop_step(void *ctx, grt_replay *r, const grt_trace_event *ev, uint64_t index) {
  (void)r;
  (void)ev;
  stop_ctx *c = ctx;
  c->seen++;
  return index == c->stop_at ? GRT_ERR_STATE : GRT_OK;
}

static void test_series_and_callback(void **state) {
  (void)state;
  grt_replay_config cfg;
  grt_replay_config_default(&cfg);
  cfg.record_series = true;
  stop_ctx c = {3, 0};
  cfg.on_step = stop_step;
  cfg.step_ctx = &c;
  grt_replay *r = NULL;
  assert_int_equal(grt_replay_create(&cfg, NULL, &r), GRT_OK);
  assert_int_equal(feed(r, GRT_TRACE_ALLOC, 1, 4096), GRT_OK);
  assert_int_equal(feed(r, GRT_TRACE_ALLOC, 2, 3 * GRT_MiB), GRT_OK);
  assert_int_equal(feed(r, GRT_TRACE_FREE_COMPLETED, 2, 3 * GRT_MiB), GRT_OK);
  assert_int_equal(feed(r, GRT_TRACE_FREE_COMPLETED, 1, 4096), GRT_ERR_STATE); /* the callback's */
  assert_int_equal(c.seen, 4);
  const grt_replay_sample *s = NULL;
  size_t n = 0;
  assert_int_equal(grt_replay_series(r, &s, &n), GRT_OK);
  assert_int_equal(n, 4);
  assert_int_equal(s[1].live, 4096 + 3 * GRT_MiB);
  assert_int_equal(s[3].allocated, 0);
  grt_replay_summary sum;
  assert_int_equal(grt_replay_get_summary(r, &sum), GRT_OK);
  assert_int_equal(sum.peak_live, 4096 + 3 * GRT_MiB);
  assert_true(sum.max_fragmentation >= 0.0);
  assert_int_equal(grt_replay_destroy(r), GRT_OK);
}

/* Thousands of live ids: the open-addressing table grows (rehash) and
 * deletions shift entries back; every id stays findable. */
static void test_many_ids(void **state) {
  (void)state;
  const char *policies[] = {"caching", "naive"};
  for (int p = 0; p < 2; p++) {
    grt_replay_config cfg;
    grt_replay_config_default(&cfg);
    cfg.policy = policies[p];
    grt_replay *r = NULL;
    assert_int_equal(grt_replay_create(&cfg, NULL, &r), GRT_OK);
    enum { N = 5000 };
    for (uint64_t i = 0; i < N; i++) assert_int_equal(feed(r, GRT_TRACE_ALLOC, i * 7919 + 13, 512 + i % 4096), GRT_OK);
    for (uint64_t k = 0; k < N; k++) { /* a permutation: stride coprime with N */
      uint64_t i = (k * 3001) % N;
      assert_int_equal(feed(r, GRT_TRACE_FREE_COMPLETED, i * 7919 + 13, 0), GRT_OK);
    }
    grt_replay_summary sum;
    assert_int_equal(grt_replay_get_summary(r, &sum), GRT_OK);
    assert_int_equal(sum.unmatched_frees, 0);
    assert_int_equal(sum.frees, N);
    assert_int_equal(sum.final_allocated, 0);
    assert_int_equal(grt_replay_destroy(r), GRT_OK);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_args),
      cmocka_unit_test(test_malformed_and_oom),
      cmocka_unit_test(test_series_and_callback),
      cmocka_unit_test(test_many_ids),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
