/* test_replay_basic.c — the replayer on small hand-made traces: exact peaks,
 * OOM point and utilization, release at recorded moments, recorded placement,
 * stepping with a callback, the streaming path, error paths with line context
 * (never a crash), and the capacity bisection on a tiny trace. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "replay_test_util.h"


/* naive on 4 KiB: the 1536-byte request finds a 1024 hole at 0 and 1024 at the end */
static const char *oom_trace = "gpurt-trace 1\n"
                               "alloc 0 1024\n"
                               "alloc 1 2048\n"
                               "free 0 1024\n"
                               "alloc 2 1536\n"
                               "free 1 2048\n"
                               "alloc 3 3072\n"
                               "free 3 3072\n"
                               "free 2 1536\n";

static void test_naive_oom_point(void **state) {
  (void)state;
  grt_trace *t = load(oom_trace);
  grt_replay_summary s = replay(t, "naive", 4096, true);
  assert_int_equal(s.events, 8);
  assert_int_equal(s.allocs, 4);
  assert_int_equal(s.frees, 3); /* the failed allocation's free is skipped */
  assert_int_equal(s.unmatched_frees, 0);
  assert_int_equal(s.ooms, 1);
  assert_true(s.has_oom);
  assert_int_equal(s.first_oom_event, 3);
  assert_int_equal(s.first_oom_size, 1536);
  assert_int_equal(s.first_oom_live, 2048);
  assert_true(s.first_oom_utilization == 0.5);
  assert_int_equal(s.peak_live, 3072);
  assert_int_equal(s.peak_reserved, 3072);
  assert_int_equal(s.peak_allocated, 3072);
  assert_int_equal(s.peak_reserved_event, 1);
  assert_int_equal(s.device_mallocs, 3);
  assert_int_equal(s.device_frees, 3);
  assert_int_equal(s.syncs, 3);
  assert_int_equal(s.final_reserved, 0);
  assert_int_equal(grt_trace_destroy(t), GRT_OK);
}

static void test_min_capacity(void **state) {
  (void)state;
  grt_trace *t = load(oom_trace);
  grt_replay_config c;
  grt_replay_config_default(&c);
  c.policy = "naive";
  uint64_t cap = 0, live = 0;
  assert_int_equal(grt_replay_min_capacity(t, &c, 512, &cap, &live), GRT_OK);
  assert_int_equal(live, 4608); /* 1536 + 3072 at the end */
  assert_int_equal(cap, 4608);  /* 1536 goes after the live 2048 block (3072 + 1536); 3072 then fits below it */
  grt_replay_summary s = replay(t, "naive", cap, false);
  assert_false(s.has_oom);
  s = replay(t, "naive", cap - 512, false);
  assert_true(s.has_oom);
  /* defaults: caching, granularity peak/1024 (at least 512 B); the answer is still zero-OOM and tight */
  uint64_t cap2 = 0;
  assert_int_equal(grt_replay_min_capacity(t, NULL, 0, &cap2, NULL), GRT_OK);
  assert_int_equal(cap2 % 512, 0);
  assert_false(replay(t, "caching", cap2, false).has_oom);
  assert_true(replay(t, "caching", cap2 - 512, false).has_oom);
  assert_int_equal(grt_replay_min_capacity(NULL, &c, 512, &cap2, NULL), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt_replay_min_capacity(t, &c, 512, NULL, NULL), GRT_ERR_INVALID_ARG);
  c.policy = "no-such-policy";
  assert_int_equal(grt_replay_min_capacity(t, &c, 512, &cap2, NULL), GRT_ERR_NOT_FOUND);
  assert_int_equal(grt_trace_destroy(t), GRT_OK);
  /* a request larger than any device the search tries: no capacity, but the peak is reported */
  t = load("gpurt-trace 1\nalloc 0 4096\nalloc 1 2199023255552\n");
  live = 0;
  assert_int_equal(grt_replay_min_capacity(t, NULL, 512, &cap2, &live), GRT_ERR_OOM);
  assert_int_equal(live, 4096);
  assert_int_equal(grt_trace_destroy(t), GRT_OK);
  /* nothing allocated: one granule suffices */
  t = load("gpurt-trace 1\nfree 3 100\n");
  assert_int_equal(grt_replay_min_capacity(t, NULL, 4096, &cap2, &live), GRT_OK);
  assert_int_equal(live, 0);
  assert_int_equal(cap2, 4096);
  assert_int_equal(grt_trace_destroy(t), GRT_OK);
}

/* caching: both requests share one small 2 MiB segment; the recorded
 * segment_free is a release moment: the replay empties its cache there. */
static void test_caching_release(void **state) {
  (void)state;
  grt_trace *t = load("gpurt-trace 1\n"
                      "alloc 0 1000\n"
                      "alloc 1 3000\n"
                      "free 0\n"
                      "free 1\n"
                      "segment_free - 2097152 0 - 0x7f0000000000\n"
                      "segment_free - 2097152 0 - 0x7f0000200000\n"
                      "alloc 2 5000\n");
  grt_replay_summary s = replay(t, "caching", 0, true);
  assert_int_equal(s.peak_reserved, 2 << 20);
  assert_int_equal(s.peak_allocated, 5120);
  assert_int_equal(s.peak_requested, 5000);
  assert_int_equal(s.peak_live, 5000);
  assert_int_equal(s.releases, 1); /* one run of segment_free events = one release */
  assert_int_equal(s.device_mallocs, 2);
  assert_int_equal(s.device_frees, 1);
  assert_int_equal(s.final_reserved, 2 << 20);
  assert_int_equal(s.final_allocated, 5120);
  assert_int_equal(s.peak_cached, 2 << 20);
  assert_false(s.has_oom);
  assert_int_equal(grt_trace_destroy(t), GRT_OK);
}

typedef struct step_log {
  uint64_t calls, last_index, reserved_at_2;
} step_log;

static grt_status on_step(void *ctx, grt_replay *r, const grt_trace_event *ev, uint64_t index) {
  step_log *l = ctx;
  (void)ev;
  l->calls++;
  l->last_index = index;
  if (index == 2) {
    grt_replay_sample s;
    assert_int_equal(grt_replay_sample_now(r, &s), GRT_OK);
    l->reserved_at_2 = s.reserved;
  }
  return GRT_OK;
}

static void test_step_and_callback(void **state) {
  (void)state;
  grt_trace *t = load(oom_trace);
  grt_replay_config c;
  grt_replay_config_default(&c);
  c.policy = "naive";
  c.capacity = 1 << 20;
  step_log log = {0, 0, 0};
  c.on_step = on_step;
  c.step_ctx = &log;
  grt_replay *r;
  assert_int_equal(grt_replay_open(t, &c, &r), GRT_OK);
  bool done = false;
  int steps = 0;
  while (!done) {
    assert_int_equal(grt_replay_step(r, &done), GRT_OK);
    steps++;
  }
  assert_int_equal(steps, 8);
  assert_int_equal(grt_replay_position(r), 8);
  assert_int_equal(log.calls, 8);
  assert_int_equal(log.last_index, 7);
  assert_int_equal(log.reserved_at_2, 2048); /* after free 0 */
  assert_int_equal(grt_replay_step(r, &done), GRT_OK);
  assert_true(done);
  assert_int_equal(grt_replay_destroy(r), GRT_OK);
  assert_int_equal(grt_trace_destroy(t), GRT_OK);
}

static char *write_temp(const char *text) {
  char *path = strdup("/tmp/grt_replay_XXXXXX");
  int fd = mkstemp(path);
  assert_true(fd >= 0);
  FILE *f = fdopen(fd, "w");
  fputs(text, f);
  fclose(f);
  return path;
}

static void test_stream_matches_loaded(void **state) {
  (void)state;
  char *path = write_temp(oom_trace);
  grt_replay_config c;
  grt_replay_config_default(&c);
  c.policy = "naive";
  c.capacity = 4096;
  grt_replay_summary s;
  grt_trace_error err;
  assert_int_equal(grt_replay_stream_file(path, &c, &s, &err), GRT_OK);
  assert_int_equal(s.ooms, 1);
  assert_int_equal(s.first_oom_event, 3);
  assert_int_equal(s.peak_live, 3072);
  assert_int_equal(s.frees, 3);
  unlink(path);
  free(path);
}

static void test_errors_have_context(void **state) {
  (void)state;
  /* streaming: an alloc of a live id is an error at its line */
  char *path = write_temp("gpurt-trace 1\n# comment\nalloc 5 100\nalloc 5 200\n");
  grt_replay_summary s;
  grt_trace_error err;
  assert_int_equal(grt_replay_stream_file(path, NULL, &s, &err), GRT_ERR_PARSE);
  assert_int_equal(err.line, 4);
  assert_non_null(strstr(err.reason, "still live"));
  char msg[600];
  assert_int_equal(grt_trace_error_format(&err, msg, sizeof msg), GRT_OK);
  assert_non_null(strstr(msg, ":4:"));
  unlink(path);
  free(path);
  /* a malformed line is the reader's parse error, with the line */
  path = write_temp("gpurt-trace 1\nalloc 1 abc\n");
  assert_int_equal(grt_replay_stream_file(path, NULL, &s, &err), GRT_ERR_PARSE);
  assert_int_equal(err.line, 2);
  unlink(path);
  free(path);
  /* frees of allocations the trace never made are counted, not fatal */
  grt_trace *t = load("gpurt-trace 1\nfree 9 100\nfree_completed 10\nalloc 1 10\n");
  s = replay(t, "caching", 0, false);
  assert_int_equal(s.unmatched_frees, 2);
  assert_int_equal(s.allocs, 1);
  assert_int_equal(grt_trace_destroy(t), GRT_OK);
  /* feeding a bogus event kind is a parse error naming the event; nothing changes */
  grt_replay *r;
  assert_int_equal(grt_replay_create(NULL, NULL, &r), GRT_OK);
  grt_trace_event ev = {.id = 1, .size = 10, .kind = 200};
  assert_int_equal(grt_replay_feed(r, &ev, 0), GRT_ERR_PARSE);
  assert_non_null(strstr(grt_replay_last_error(r), "event 0"));
  assert_int_equal(grt_replay_position(r), 0);
  ev.kind = GRT_TRACE_ALLOC;
  assert_int_equal(grt_replay_feed(r, &ev, 0), GRT_OK);
  assert_int_equal(grt_replay_feed(r, &ev, 0), GRT_ERR_PARSE); /* id 1 still live */
  ev.kind = GRT_TRACE_FREE_COMPLETED;
  assert_int_equal(grt_replay_feed(r, &ev, 0), GRT_OK);
  assert_int_equal(grt_replay_destroy(r), GRT_OK);
  /* bad arguments */
  assert_int_equal(grt_replay_open(NULL, NULL, &r), GRT_ERR_INVALID_ARG);
  grt_replay_config c;
  grt_replay_config_default(&c);
  c.policy = "no-such-policy";
  assert_int_equal(grt_replay_create(&c, NULL, &r), GRT_ERR_NOT_FOUND);
  assert_null(r);
  assert_int_equal(grt_replay_destroy(NULL), GRT_OK);
  assert_int_equal(grt_replay_stream_file("/nonexistent/x.trace", NULL, &s, &err), GRT_ERR_IO);
}

/* feeding a caller's replay from a file: the allocator is inspectable after
 * the last event, and after a refused one, which names its line */
static void test_feed_native_file(void **state) {
  (void)state;
  char *path = write_temp("gpurt-trace 1\nalloc 1 1000 0\nalloc 2 3000 7\nfree_completed 1 1000 0\n");
  grt_replay *r;
  assert_int_equal(grt_replay_create(NULL, NULL, &r), GRT_OK);
  grt_trace_error err;
  assert_int_equal(grt_replay_feed_native_file(r, path, &err), GRT_OK);
  assert_int_equal(grt_replay_position(r), 3);
  grt_alloc_stats st;
  assert_int_equal(grt_alloc_get_stats(grt_replay_allocator(r), &st), GRT_OK);
  assert_int_equal(st.allocation[GRT_STAT_ALL].current, 1);
  assert_int_equal(st.requested_bytes[GRT_STAT_ALL].current, 3000);
  unlink(path);
  free(path);
  path = write_temp("gpurt-trace 1\nalloc 3 10\nalloc 2 20\n");
  assert_int_equal(grt_replay_feed_native_file(r, path, &err), GRT_ERR_PARSE);
  assert_int_equal(err.line, 3);
  assert_non_null(strstr(err.reason, "still live"));
  assert_int_equal(grt_replay_position(r), 4); /* the refused event changed nothing */
  assert_int_equal(grt_replay_feed_native_file(r, "/nonexistent/x.trace", &err), GRT_ERR_IO);
  assert_int_equal(grt_replay_feed_native_file(NULL, path, &err), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt_replay_feed_native_file(r, NULL, &err), GRT_ERR_INVALID_ARG);
  /* an open stream (a pipe, a decoder) feeds the same way, and names itself in errors */
  static const char more[] = "gpurt-trace 1\nfree_completed 2 3000 7\nalloc 2 10\nalloc 2 20\n";
  FILE *f = fmemopen((void *)more, sizeof more - 1, "r");
  assert_non_null(f);
  assert_int_equal(grt_replay_feed_stream(r, f, GRT_TRACE_FORMAT_MINIMALLOC, "<pipe>", &err), GRT_ERR_UNSUPPORTED);
  assert_int_equal(grt_replay_feed_stream(r, f, GRT_TRACE_FORMAT_NATIVE, "<pipe>", &err), GRT_ERR_PARSE);
  assert_int_equal(err.line, 4);
  assert_string_equal(err.file, "<pipe>");
  assert_int_equal(grt_replay_position(r), 6);
  assert_int_equal(grt_replay_feed_stream(r, NULL, GRT_TRACE_FORMAT_NATIVE, "<pipe>", &err), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt_replay_feed_stream(r, f, GRT_TRACE_FORMAT_NATIVE, NULL, &err), GRT_ERR_INVALID_ARG);
  fclose(f);
  /* RMM rows stream too: the pointer names the allocation; a free of one never allocated is counted */
  static const char rmm[] = "Thread,Time,Action,Pointer,Size,Stream\n"
                            "1,00:00:01.000000,allocate,0x7f00,4096,0x0\n"
                            "1,00:00:01.000100,free,0x9f00,4096,0x0\n"
                            "1,00:00:01.000200,allocate failure,(nil),99999999999999,0x0\n"
                            "1,00:00:01.000300,free,0x7f00,4096,0x0\n"
                            "1,00:00:01.000400,allocate,0x7f00,512,0xffffffffffffffff";
  f = fmemopen((void *)rmm, sizeof rmm - 1, "r");
  assert_non_null(f);
  grt_replay *q;
  assert_int_equal(grt_replay_create(NULL, NULL, &q), GRT_OK);
  assert_int_equal(grt_replay_feed_stream(q, f, GRT_TRACE_FORMAT_RMM, "<rmm>", &err), GRT_OK);
  fclose(f);
  grt_replay_summary sum;
  assert_int_equal(grt_replay_get_summary(q, &sum), GRT_OK);
  assert_int_equal(sum.events, 5);
  assert_int_equal(sum.allocs, 2);
  assert_int_equal(sum.unmatched_frees, 1);
  assert_int_equal(sum.recorded_ooms, 1);
  assert_int_equal(grt_alloc_get_stats(grt_replay_allocator(q), &st), GRT_OK);
  assert_int_equal(st.requested_bytes[GRT_STAT_ALL].current, 512);
  assert_int_equal(grt_replay_destroy(q), GRT_OK);
  static const char bad[] = "Thread,Time,Action,Pointer,Size,Stream\n1,,allocate,0x10,ten,0\n";
  f = fmemopen((void *)bad, sizeof bad - 1, "r");
  assert_int_equal(grt_replay_create(NULL, NULL, &q), GRT_OK);
  assert_int_equal(grt_replay_feed_stream(q, f, GRT_TRACE_FORMAT_RMM, "<rmm>", &err), GRT_ERR_PARSE);
  assert_int_equal(err.line, 2);
  assert_non_null(strstr(err.reason, "size field 'ten'"));
  assert_int_equal(grt_replay_destroy(q), GRT_OK);
  fclose(f);
  assert_int_equal(grt_replay_destroy(r), GRT_OK);
  unlink(path);
  free(path);
}

/* recorded placement: the device hands out the segment_alloc address */
static void test_recorded_placement(void **state) {
  (void)state;
  grt_trace *t = load("gpurt-trace 1\n"
                      "segment_alloc - 20971520 0 - 0x7f0004000000\n"
                      "alloc 0 4194304\n");
  grt_replay_config c;
  grt_replay_config_default(&c);
  c.placement = GRT_REPLAY_PLACE_RECORDED;
  c.capacity = (uint64_t)1 << 30;
  grt_replay *r;
  assert_int_equal(grt_replay_open(t, &c, &r), GRT_OK);
  assert_int_equal(grt_replay_run(r), GRT_OK);
  grt_alloc_snapshot *snap;
  assert_int_equal(grt_alloc_snapshot_take(grt_replay_allocator(r), &snap), GRT_OK);
  assert_int_equal(snap->n_segments, 1);
  assert_int_equal(snap->segments[0].address, 0x7f0004000000ull);
  grt_alloc_snapshot_free(snap);
  assert_int_equal(grt_replay_destroy(r), GRT_OK);
  assert_int_equal(grt_trace_destroy(t), GRT_OK);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_naive_oom_point),      cmocka_unit_test(test_min_capacity),
      cmocka_unit_test(test_caching_release),      cmocka_unit_test(test_step_and_callback),
      cmocka_unit_test(test_stream_matches_loaded), cmocka_unit_test(test_errors_have_context),
      cmocka_unit_test(test_recorded_placement),      cmocka_unit_test(test_feed_native_file),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
