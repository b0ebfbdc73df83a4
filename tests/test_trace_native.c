/* test_trace_native.c — the native text format: reading, errors, streaming, write->read round trip. */
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

static void test_native_small_file(void **state) {
  (void)state;
  grt_trace_error err;
  grt_status st;
  grt_trace *t = tt_load(tt_data("native_small.trace"), GRT_TRACE_FORMAT_AUTO, &err, &st);
  assert_int_equal(st, GRT_OK);
  grt_trace_info in;
  assert_int_equal(grt_trace_get_info(t, &in), GRT_OK);
  assert_int_equal(in.format, GRT_TRACE_FORMAT_NATIVE);
  assert_int_equal(in.n_events, 8);
  assert_int_equal(in.count[GRT_TRACE_ALLOC], 2);
  assert_int_equal(in.count[GRT_TRACE_FREE_REQUESTED], 1);
  assert_int_equal(in.count[GRT_TRACE_FREE_COMPLETED], 2);
  assert_int_equal(in.count[GRT_TRACE_SEGMENT_ALLOC], 1);
  assert_int_equal(in.count[GRT_TRACE_OOM], 1);
  assert_int_equal(in.count[GRT_TRACE_SNAPSHOT], 1);
  assert_int_equal(in.n_ids, 3);
  /* ids are dense in order of first appearance: file id 7 -> 0, 9 -> 1, 42 -> 2 */
  assert_int_equal(in.events[1].id, 0);
  assert_int_equal(in.events[2].id, 1);
  assert_int_equal(in.events[3].id, 1);
  assert_int_equal(in.events[4].id, 1);
  assert_int_equal(in.events[5].id, 2);
  assert_true(in.events[5].flags & GRT_TRACE_F_UNMATCHED);
  assert_false(in.events[4].flags & GRT_TRACE_F_UNMATCHED);
  assert_int_equal(in.events[0].id, GRT_TRACE_NO_ID);
  assert_int_equal(in.events[0].addr, 0x7f0000000000ULL);
  assert_true(in.events[1].flags & GRT_TRACE_F_ADDR);
  assert_int_equal(in.events[1].time, 11);
  assert_false(in.events[4].flags & GRT_TRACE_F_TIME);
  /* streams: 0 and 7 (0x7 and 7 are the same stream) */
  assert_int_equal(in.n_streams, 2);
  assert_int_equal(in.streams[in.events[2].stream], 7);
  assert_int_equal(in.events[3].stream, in.events[4].stream);
  assert_int_equal(in.events[6].addr, 123456);
  assert_int_equal(in.n_segments, 1);
  assert_int_equal(in.segments[0].n_blocks, 2);
  assert_int_equal(in.segments[0].blocks[1].addr, 0x7f0000000200ULL);
  assert_int_equal(in.segments[0].blocks[0].state, GRT_TRACE_BLOCK_ACTIVE_ALLOCATED);
  assert_true(in.settings.present);
  assert_int_equal(in.settings.max_split_size, -1);
  assert_int_equal(sizeof(grt_trace_event), 40);
  assert_int_equal(grt_trace_destroy(t), GRT_OK);
  assert_int_equal(grt_trace_destroy(NULL), GRT_OK);
}

static void expect_error(const char *text, uint64_t line, const char *needle) {
  grt_trace_error err;
  grt_status st;
  grt_trace *t = tt_load_str(text, GRT_TRACE_FORMAT_NATIVE, &err, &st);
  assert_null(t);
  assert_int_equal(st, GRT_ERR_PARSE);
  if (err.line != line || !strstr(err.reason, needle))
    fail_msg("for %s: got line %llu '%s', want line %llu containing '%s'", text,
             (unsigned long long)err.line, err.reason, (unsigned long long)line, needle);
  assert_string_equal(err.file, "mem");
}

static void test_native_errors(void **state) {
  (void)state;
  expect_error("gpurt-trace 2\n", 1, "first line");
  expect_error("gpurt-trace 1\nalloc 1 abc 0\n", 2, "size field 'abc' is not a number");
  expect_error("gpurt-trace 1\n\n# c\nalloc 1\n", 4, "alloc needs a size");
  expect_error("gpurt-trace 1\nallocate 1 5\n", 2, "unknown event kind 'allocate'");
  expect_error("gpurt-trace 1\nalloc 1 5\nalloc 1 5\n", 3, "still live");
  expect_error("gpurt-trace 1\nalloc - 5\n", 2, "needs an id");
  expect_error("gpurt-trace 1\nsegment_alloc 3 5 0 1 0x10\n", 2, "takes no id");
  expect_error("gpurt-trace 1\nsegment_free - 5 0\n", 2, "needs an addr");
  expect_error("gpurt-trace 1\nalloc 1 5 0 1 2 3\n", 2, "too many fields");
  expect_error("gpurt-trace 1\nalloc 1 5 0x\n", 2, "stream field");
  expect_error("gpurt-trace 1\nalloc 1 99999999999999999999 0\n", 2, "size field");
  expect_error("gpurt-trace 1\nalloc 18446744073709551615 5\n", 2, "id field");
  expect_error("gpurt-trace 1\n%block 0x0 1 1 inactive\n", 2, "before any %segment");
  expect_error("gpurt-trace 1\n%setting foo 1\n", 2, "unknown setting");
  expect_error("gpurt-trace 1\n%device 1 1\n", 2, "%device");
  expect_error("gpurt-trace 1\n%segment 0x0 1 0 medium 0\n", 2, "small");
  grt_trace_error err;
  grt_status st;
  grt_trace *t = tt_load(tt_data("native_bad_size.trace"), GRT_TRACE_FORMAT_AUTO, &err, &st);
  assert_null(t);
  assert_int_equal(st, GRT_ERR_PARSE);
  assert_int_equal(err.line, 5);
  char msg[700];
  assert_int_equal(grt_trace_error_format(&err, msg, sizeof msg), GRT_OK);
  assert_non_null(strstr(msg, "native_bad_size.trace:5: size field 'abc' is not a number"));
  t = tt_load("/nonexistent/x.trace", GRT_TRACE_FORMAT_AUTO, &err, &st);
  assert_null(t);
  assert_int_equal(st, GRT_ERR_IO);
  assert_string_equal(err.file, "/nonexistent/x.trace");
  t = tt_load_str("hello\n", GRT_TRACE_FORMAT_AUTO, &err, &st);
  assert_int_equal(st, GRT_ERR_PARSE);
  assert_non_null(strstr(err.reason, "cannot detect"));
  assert_int_equal(grt_trace_load_buffer("", 0, NULL, NULL, &t, &err), GRT_ERR_PARSE);
  assert_int_equal(grt_trace_load_buffer("x", 1, NULL, NULL, NULL, &err), GRT_ERR_INVALID_ARG);
}

/* Writes t to a temp file and reads it back; the events and metadata must be identical. */
static void assert_round_trip(const grt_trace *t) {
  char path[] = "/tmp/grt_trace_rtXXXXXX";
  int fd = mkstemp(path);
  assert_true(fd >= 0);
  close(fd);
  grt_trace_error err;
  assert_int_equal(grt_trace_save_native(t, path, &err), GRT_OK);
  grt_status st;
  grt_trace *u = tt_load(path, GRT_TRACE_FORMAT_NATIVE, &err, &st);
  assert_int_equal(st, GRT_OK);
  grt_trace_info a, b;
  assert_int_equal(grt_trace_get_info(t, &a), GRT_OK);
  assert_int_equal(grt_trace_get_info(u, &b), GRT_OK);
  assert_int_equal(a.n_events, b.n_events);
  assert_int_equal(a.n_ids, b.n_ids);
  assert_int_equal(a.n_streams, b.n_streams);
  assert_memory_equal(a.streams, b.streams, a.n_streams * sizeof *a.streams);
  assert_memory_equal(a.events, b.events, a.n_events * sizeof *a.events);
  assert_memory_equal(a.count, b.count, sizeof a.count);
  assert_int_equal(a.device, b.device);
  assert_int_equal(a.n_devices, b.n_devices);
  assert_memory_equal(&a.settings, &b.settings, sizeof a.settings);
  assert_int_equal(a.n_segments, b.n_segments);
  for (size_t i = 0; i < a.n_segments; i++) {
    assert_int_equal(a.segments[i].addr, b.segments[i].addr);
    assert_int_equal(a.segments[i].total_size, b.segments[i].total_size);
    assert_int_equal(a.segments[i].stream, b.segments[i].stream);
    assert_int_equal(a.segments[i].is_large, b.segments[i].is_large);
    assert_int_equal(a.segments[i].is_expandable, b.segments[i].is_expandable);
    assert_int_equal(a.segments[i].n_blocks, b.segments[i].n_blocks);
    if (a.segments[i].n_blocks)
      assert_memory_equal(a.segments[i].blocks, b.segments[i].blocks, a.segments[i].n_blocks * sizeof(grt_trace_block));
  }
  assert_int_equal(grt_trace_destroy(u), GRT_OK);
  unlink(path);
}

static void test_native_round_trip(void **state) {
  (void)state;
  const char *files[] = {"native_small.trace", "rmm_small.csv", "minimalloc_small.csv"};
  for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
    grt_trace_error err;
    grt_status st;
    grt_trace *t = tt_load(tt_data(files[i]), GRT_TRACE_FORMAT_AUTO, &err, &st);
    assert_int_equal(st, GRT_OK);
    assert_round_trip(t);
    assert_int_equal(grt_trace_destroy(t), GRT_OK);
  }
}

typedef struct collect {
  size_t n;
  uint64_t ids[16];
  grt_stream_id streams[16];
  size_t stop_at;
} collect;

static grt_status on_event(void *ctx, const grt_trace_event *ev, grt_stream_id stream) {
  collect *c = ctx;
  if (c->n < 16) c->ids[c->n] = ev->id, c->streams[c->n] = stream;
  c->n++;
  return c->n == c->stop_at ? GRT_ERR_STATE : GRT_OK;
}

static void test_native_stream(void **state) {
  (void)state;
  collect c = {0};
  grt_trace_error err;
  assert_int_equal(grt_trace_read_native_stream(tt_data("native_small.trace"), on_event, &c, &err), GRT_OK);
  assert_int_equal(c.n, 8);
  assert_int_equal(c.ids[1], 7); /* file ids pass through */
  assert_int_equal(c.ids[5], 42);
  assert_int_equal(c.streams[2], 7);
  memset(&c, 0, sizeof c);
  c.stop_at = 3;
  assert_int_equal(grt_trace_read_native_stream(tt_data("native_small.trace"), on_event, &c, &err), GRT_ERR_STATE);
  assert_int_equal(c.n, 3);
  assert_non_null(strstr(err.reason, "stopped by callback"));
  memset(&c, 0, sizeof c);
  assert_int_equal(grt_trace_read_native_stream(tt_data("native_bad_size.trace"), on_event, &c, &err), GRT_ERR_PARSE);
  assert_int_equal(err.line, 5);
  assert_int_equal(c.n, 2);
  assert_int_equal(grt_trace_read_native_stream("/nonexistent", on_event, &c, &err), GRT_ERR_IO);
  assert_int_equal(grt_trace_read_native_stream(NULL, on_event, &c, &err), GRT_ERR_INVALID_ARG);

  /* a long stream across many read chunks, and an over-long line */
  char path[] = "/tmp/grt_trace_stXXXXXX";
  int fd = mkstemp(path);
  assert_true(fd >= 0);
  FILE *f = fdopen(fd, "w");
  assert_int_equal(grt_trace_write_native_header(f), GRT_OK);
  for (uint64_t i = 0; i < 20000; i++) {
    grt_trace_event ev = {.id = i, .size = 512 + i, .kind = GRT_TRACE_ALLOC};
    assert_int_equal(grt_trace_write_native_event(f, &ev, i % 3), GRT_OK);
    ev.kind = GRT_TRACE_FREE_COMPLETED;
    assert_int_equal(grt_trace_write_native_event(f, &ev, i % 3), GRT_OK);
  }
  fclose(f);
  memset(&c, 0, sizeof c);
  assert_int_equal(grt_trace_read_native_stream(path, on_event, &c, &err), GRT_OK);
  assert_int_equal(c.n, 40000);
  f = fopen(path, "a");
  fputs("alloc 1 ", f);
  for (int i = 0; i < 5000; i++) fputc('1', f);
  fputc('\n', f);
  fclose(f);
  assert_int_equal(grt_trace_read_native_stream(path, on_event, &c, &err), GRT_ERR_PARSE);
  assert_int_equal(err.line, 40002);
  assert_non_null(strstr(err.reason, "longer than"));
  unlink(path);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_native_small_file),
      cmocka_unit_test(test_native_errors),
      cmocka_unit_test(test_native_round_trip),
      cmocka_unit_test(test_native_stream),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
