/* test_trace_malformed.c — the native reader's error paths, each input read
 * twice: whole (grt_trace_load_buffer) and streaming (grt_trace_read_native_stream
 * over a temporary file), which share the line parser but not the line
 * splitting; and well-formed inputs using every optional field form (dashes,
 * hex, times, addresses, CRLF, comments, every %setting) which must give the
 * same events on both paths. Also the writer's refusals. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "trace_test_util.h"

static char tmp_path[64];

static const char *write_tmp(const char *text) {
  snprintf(tmp_path, sizeof tmp_path, "/tmp/grt_malformed_%d.trace", (int)getpid());
  FILE *f = fopen(tmp_path, "wb");
  assert_non_null(f);
  fputs(text, f);
  fclose(f);
  return tmp_path;
}

static grt_status count_fn(void *ctx, const grt_trace_event *ev, grt_stream_id stream) {
  (void)ev;
  (void)stream;
  (*(uint64_t *)ctx)++;
  return GRT_OK;
}

static grt_status stop_fn(void *ctx, const grt_trace_event *ev, grt_stream_id stream) {
  (void)ctx;
  (void)ev;
  (void)stream;
  return GRT_ERR_STATE;
}

static void expect_bad(const char *text) {
  grt_trace_error err;
  grt_status st;
  grt_trace *t = tt_load_str(text, GRT_TRACE_FORMAT_NATIVE, &err, &st);
  if (st != GRT_ERR_PARSE) fail_msg("whole reader accepted (%s): %s", grt_status_name(st), text);
  assert_null(t);
  assert_true(err.reason[0] != '\0');
  uint64_t n = 0;
  st = grt_trace_read_native_stream(write_tmp(text), count_fn, &n, &err);
  if (st != GRT_ERR_PARSE) fail_msg("streaming reader accepted (%s): %s", grt_status_name(st), text);
  unlink(tmp_path);
}

static void test_bad_lines(void **state) {
  (void)state;
  static const char *bad[] = {
      "",
      "# only a comment\n",
      "gpurt-trace 1\nalloc\n",
      "gpurt-trace 1\nalloc 1 5 zz\n",
      "gpurt-trace 1\nalloc 1 5 0 notatime\n",
      "gpurt-trace 1\nalloc 1 5 0 7 nothex\n",
      "gpurt-trace 1\nalloc 1 5 0 - 0xzz\n",
      "gpurt-trace 1\nfree_requested x\n",
      "gpurt-trace 1\nalloc 1 -\n",
      "gpurt-trace 1\nalloc 1 5 -1\n",
      "gpurt-trace 1\nalloc 123456789012345678901234 5\n",
      "gpurt-trace 1\nalloc 1 0x\n",
      "gpurt-trace 1\n%setting\n",
      "gpurt-trace 1\n%setting expandable_segments 2\n",
      "gpurt-trace 1\n%setting expandable_segments 1 1\n",
      "gpurt-trace 1\n%setting max_split_size abc\n",
      "gpurt-trace 1\n%setting garbage_collection_threshold x1\n",
      "gpurt-trace 1\n%setting garbage_collection_threshold 1e999\n",
      "gpurt-trace 1\n%setting roundup_power2_divisions 1 2\n",
      "gpurt-trace 1\n%setting roundup_power2_divisions a b c d e f g h i j k l m n o p\n",
      "gpurt-trace 1\n%device 1\n",
      "gpurt-trace 1\n%device 2 2\n",
      "gpurt-trace 1\n%device 0 0\n",
      "gpurt-trace 1\n%device x 2\n",
      "gpurt-trace 1\n%segment 0x0 1 0 small\n",
      "gpurt-trace 1\n%segment zz 1 0 small 0\n",
      "gpurt-trace 1\n%segment 0x0 zz 0 small 0\n",
      "gpurt-trace 1\n%segment 0x0 1 zz small 0\n",
      "gpurt-trace 1\n%segment 0x0 1 0 small 2\n",
      "gpurt-trace 1\n%segment 0x0 512 0 small 0\n%block 0x0 512 0\n",
      "gpurt-trace 1\n%segment 0x0 512 0 small 0\n%block zz 512 0 inactive\n",
      "gpurt-trace 1\n%segment 0x0 512 0 small 0\n%block 0x0 zz 0 inactive\n",
      "gpurt-trace 1\n%segment 0x0 512 0 small 0\n%block 0x0 512 zz inactive\n",
      "gpurt-trace 1\n%segment 0x0 512 0 small 0\n%block 0x0 512 0 sleeping\n",
      "gpurt-trace 1\n%frobnicate 1\n",
      "gpurt-trace 1\nsnapshot 1\n",
      "gpurt-trace 1\nalloc 1 0x200\n",
      "gpurt-trace 1\nalloc 1 5 0 - 0x1FFFFFFFFFFFFFFFF\n",
      "gpurt-trace 1\nalloc 1 5 0 - 0x\n",
      "gpurt-trace 1\nalloc 1 5 0 - 0xABCDEFG\n",
      "gpurt-trace 1\nalloc 1 5 0 -9223372036854775809\n",
      "gpurt-trace 1\nalloc 1 5 0 9223372036854775808\n",
      "gpurt-trace 1\n%setting garbage_collection_threshold 0.5x\n",
      "gpurt-trace 1\n%setting garbage_collection_threshold 123456789012345678901234567890123456789012345678901234567890123456789012345678901234567890\n",
      "gpurt-trace 1\nthis_is_a_very_long_unknown_event_kind_name_that_will_be_truncated_in_the_message_\x01\x02 1\n",
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) expect_bad(bad[i]);
}

static void test_good_forms(void **state) {
  (void)state;
  const char *text =
      "gpurt-trace 1\r\n"
      "# settings\n"
      "%setting expandable_segments 1\n"
      "%setting max_split_size -1\n"
      "%setting garbage_collection_threshold 0.5\n"
      "%setting roundup_power2_divisions 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16\n"
      "%device 0 2\n"
      "%segment 0x1000 1024 0 small 0\n"
      "%block 0x1000 512 500 active_allocated\n"
      "%block 0x1200 512 0 inactive\n"
      "\n"
      "alloc 1 512 0x7 - -\n"
      "alloc 2 512 - -9223372036854775808 0X0000000000000000000000ABCDEF00\n"
      "alloc 3 512 7\n"
      "free_requested 1 - 7\n"
      "free 1 - 7\n"
      "free_completed 2 512 - 100\n"
      "segment_alloc - 4096 0 - 0x5000\n"
      "segment_map - 4096 0 - 0x9000\n"
      "segment_unmap - 4096 0 - 0x9000\n"
      "segment_free - 4096 0 - 0x5000\n"
      "oom - 1024 0\n"
      "snapshot -\n"
      "free 3 512 7\r\n";
  grt_trace_error err;
  grt_status st;
  grt_trace *t = tt_load_str(text, GRT_TRACE_FORMAT_NATIVE, &err, &st);
  if (st) fail_msg("whole reader: %s at line %llu: %s", grt_status_name(st), (unsigned long long)err.line, err.reason);
  grt_trace_info info;
  assert_int_equal(grt_trace_get_info(t, &info), GRT_OK);
  uint64_t n = 0;
  st = grt_trace_read_native_stream(write_tmp(text), count_fn, &n, &err);
  if (st) fail_msg("streaming: %s at line %llu: %s", grt_status_name(st), (unsigned long long)err.line, err.reason);
  assert_int_equal(n, info.n_events);
  /* a callback's status stops the read */
  assert_int_equal(grt_trace_read_native_stream(tmp_path, stop_fn, NULL, &err), GRT_ERR_STATE);
  assert_int_equal(grt_trace_read_native_stream(NULL, count_fn, &n, &err), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt_trace_read_native_stream(tmp_path, NULL, &n, NULL), GRT_ERR_INVALID_ARG);
  assert_int_not_equal(grt_trace_read_native_stream("/nonexistent/x.trace", count_fn, &n, &err), GRT_OK);
  unlink(tmp_path);
  /* round trip through the writer */
  FILE *f = tmpfile();
  assert_non_null(f);
  assert_int_equal(grt_trace_write_native(t, f), GRT_OK);
  assert_int_equal(grt_trace_write_native(NULL, f), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt_trace_write_native(t, NULL), GRT_ERR_INVALID_ARG);
  fclose(f);
  assert_int_equal(grt_trace_save_native(t, "/nonexistent/dir/x.trace", &err), GRT_ERR_IO);
  assert_int_equal(grt_trace_save_native(NULL, "/tmp/x", &err), GRT_ERR_INVALID_ARG);
  grt_trace_event ev = {.id = GRT_TRACE_NO_ID, .kind = GRT_TRACE_ALLOC};
  assert_int_equal(grt_trace_write_native_header(NULL), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt_trace_write_native_event(NULL, &ev, 0), GRT_ERR_INVALID_ARG);
  f = tmpfile();
  assert_int_equal(grt_trace_write_native_event(f, NULL, 0), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt_trace_write_native_event(f, &ev, 0), GRT_ERR_INVALID_ARG); /* an alloc needs an id */
  ev.kind = GRT_TRACE_KIND_COUNT;
  assert_int_equal(grt_trace_write_native_event(f, &ev, 0), GRT_ERR_INVALID_ARG);
  fclose(f);
  assert_int_equal(grt_trace_destroy(t), GRT_OK);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_bad_lines),
      cmocka_unit_test(test_good_forms),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
