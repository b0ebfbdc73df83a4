/* test_trace_load.c — the loading entry points (src/trace/trace.c): format
 * detection, argument checks, file reading (large files, unreadable paths,
 * directories), the error formatter and the name tables. */
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

static grt_status count_event(void *ctx, const grt_trace_event *ev, grt_stream_id stream) {
  (void)ev;
  (void)stream;
  (*(uint64_t *)ctx)++;
  return GRT_OK;
}

static grt_trace_format detected(const char *text) {
  grt_trace_error err;
  grt_status st;
  grt_trace *t = tt_load_str(text, GRT_TRACE_FORMAT_AUTO, &err, &st);
  if (st) fail_msg("%s: line %llu: %s", text, (unsigned long long)err.line, err.reason);
  grt_trace_info in;
  assert_int_equal(grt_trace_get_info(t, &in), GRT_OK);
  assert_int_equal(grt_trace_destroy(t), GRT_OK);
  return in.format;
}

static void test_detection(void **state) {
  (void)state;
  assert_int_equal(detected("gpurt-trace 1\nalloc 1 5\n"), GRT_TRACE_FORMAT_NATIVE);
  assert_int_equal(detected(" \tgpurt-trace 1\n"), GRT_TRACE_FORMAT_NATIVE); /* leading blanks */
  assert_int_equal(detected("\xEF\xBB\xBF" "gpurt-trace 1\n"), GRT_TRACE_FORMAT_NATIVE);
  /* the streaming native reader accepts the BOM too */
  char path[64];
  snprintf(path, sizeof path, "/tmp/grt_trace_bom_%d.trace", (int)getpid());
  FILE *f = fopen(path, "wb");
  assert_non_null(f);
  fputs("\xEF\xBB\xBF" "gpurt-trace 1\nalloc 1 5\nfree 1\n", f);
  fclose(f);
  uint64_t events = 0;
  grt_trace_error serr;
  assert_int_equal(grt_trace_read_native_stream(path, count_event, &events, &serr), GRT_OK);
  assert_int_equal(events, 2);
  unlink(path);
  assert_int_equal(detected("\xEF\xBB\xBF\tThread,Time,Action,Pointer,Size,Stream\n"), GRT_TRACE_FORMAT_RMM);
  assert_int_equal(detected("id,lower,upper,size\n0,0,1,5\n"), GRT_TRACE_FORMAT_MINIMALLOC);
  assert_int_equal(detected("\x80\x04]."), GRT_TRACE_FORMAT_PYTORCH);
  static const char *const unknown[] = {"hello\n", "\xEF\xBB\xBF", "   ", "gpurt-trac", "Thread,Time\n"};
  for (size_t i = 0; i < sizeof unknown / sizeof unknown[0]; i++) {
    grt_trace_error err;
    grt_status st;
    grt_trace *t = tt_load_str(unknown[i], GRT_TRACE_FORMAT_AUTO, &err, &st);
    assert_null(t);
    assert_int_equal(st, GRT_ERR_PARSE);
    assert_int_equal(err.line, 1);
    assert_non_null(strstr(err.reason, "cannot detect the format"));
  }
  /* an explicit format overrides detection: the native reader then names the bad header */
  grt_trace_error err;
  grt_status st;
  assert_null(tt_load_str("id,lower,upper,size\n", GRT_TRACE_FORMAT_NATIVE, &err, &st));
  assert_int_equal(st, GRT_ERR_PARSE);
  assert_int_equal(err.line, 1);
}

static void test_arguments(void **state) {
  (void)state;
  grt_trace_load_config cfg;
  grt_trace_load_config_default(&cfg);
  grt_trace_load_config_default(NULL); /* a no-op */
  assert_int_equal(cfg.format, GRT_TRACE_FORMAT_AUTO);
  assert_int_equal(cfg.device, 0);
  grt_trace *t = (grt_trace *)&cfg; /* must be reset to NULL on every failure */
  grt_trace_error err;
  const char *text = "gpurt-trace 1\n";
  assert_int_equal(grt_trace_load_buffer(text, strlen(text), "x", &cfg, NULL, &err), GRT_ERR_INVALID_ARG);
  assert_string_equal(err.reason, "invalid argument");
  assert_int_equal(grt_trace_load_buffer(NULL, 5, "x", &cfg, &t, &err), GRT_ERR_INVALID_ARG);
  assert_null(t);
  cfg.device = -1;
  t = (grt_trace *)&cfg;
  assert_int_equal(grt_trace_load_buffer(text, strlen(text), NULL, &cfg, &t, &err), GRT_ERR_INVALID_ARG);
  assert_null(t);
  assert_string_equal(err.file, "<buffer>");
  cfg.device = 0;
  cfg.format = (grt_trace_format)99;
  assert_int_equal(grt_trace_load_buffer(text, strlen(text), "x", &cfg, &t, &err), GRT_ERR_INVALID_ARG);
  assert_string_equal(err.reason, "unknown format 99");
  assert_null(t);
  cfg.format = GRT_TRACE_FORMAT_AUTO;
  assert_int_equal(grt_trace_load_buffer(NULL, 0, "empty", &cfg, &t, &err), GRT_ERR_PARSE);
  assert_string_equal(err.reason, "empty input");
  /* err may be NULL */
  assert_int_equal(grt_trace_load_buffer("junk", 4, "x", NULL, &t, NULL), GRT_ERR_PARSE);
  assert_int_equal(grt_trace_load_buffer(text, strlen(text), "x", NULL, &t, NULL), GRT_OK);
  grt_trace_info in;
  assert_int_equal(grt_trace_get_info(NULL, &in), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt_trace_get_info(t, NULL), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt_trace_destroy(t), GRT_OK);
  assert_int_equal(grt_trace_destroy(NULL), GRT_OK);
  t = (grt_trace *)&cfg;
  assert_int_equal(grt_trace_load(NULL, NULL, &t, &err), GRT_ERR_INVALID_ARG);
  assert_null(t);
  assert_int_equal(grt_trace_load("x", NULL, NULL, NULL), GRT_ERR_INVALID_ARG);
}

/* A native trace of n alloc/free pairs, then `tail`. */
static void write_big(const char *path, int n, const char *tail) {
  FILE *f = fopen(path, "wb");
  assert_non_null(f);
  fputs("gpurt-trace 1\n", f);
  for (int i = 0; i < n; i++) fprintf(f, "alloc %d 512\nfree %d\n", i, i);
  fputs(tail, f);
  fclose(f);
}

static void test_files(void **state) {
  (void)state;
  grt_trace_error err;
  grt_trace *t = NULL;
  assert_int_equal(grt_trace_load("/nonexistent/dir/x.trace", NULL, &t, &err), GRT_ERR_IO);
  assert_null(t);
  assert_string_equal(err.file, "/nonexistent/dir/x.trace");
  assert_non_null(strstr(err.reason, "cannot open"));
  /* a directory opens but cannot be read */
  assert_int_equal(grt_trace_load("/tmp", NULL, &t, &err), GRT_ERR_IO);
  assert_null(t);
  assert_string_equal(err.reason, "read error");
  /* a file larger than the first read buffer (64 KiB), with an error on its last line */
  char path[64];
  snprintf(path, sizeof path, "/tmp/grt_trace_load_%d.trace", (int)getpid());
  const int n = 20000; /* ~300 KiB */
  write_big(path, n, "alloc 1 x\n");
  assert_int_equal(grt_trace_load(path, NULL, &t, &err), GRT_ERR_PARSE);
  assert_null(t);
  assert_int_equal(err.line, 2 + 2 * (uint64_t)n);
  char msg[512];
  assert_int_equal(grt_trace_error_format(&err, msg, sizeof msg), GRT_OK);
  char want[128];
  snprintf(want, sizeof want, "%s:%d: ", path, 2 + 2 * n);
  assert_memory_equal(msg, want, strlen(want));
  /* without the bad line it loads whole */
  write_big(path, n, "");
  assert_int_equal(grt_trace_load(path, NULL, &t, &err), GRT_OK);
  grt_trace_info in;
  assert_int_equal(grt_trace_get_info(t, &in), GRT_OK);
  assert_int_equal(in.n_events, 2 * (size_t)n);
  assert_int_equal(in.n_ids, (uint64_t)n);
  assert_int_equal(grt_trace_destroy(t), GRT_OK);
  unlink(path);
}

static void test_error_format_and_names(void **state) {
  (void)state;
  grt_trace_error err;
  memset(&err, 0, sizeof err);
  snprintf(err.file, sizeof err.file, "f.pickle");
  snprintf(err.reason, sizeof err.reason, "bad");
  char buf[128];
  assert_int_equal(grt_trace_error_format(&err, buf, sizeof buf), GRT_OK);
  assert_string_equal(buf, "f.pickle: bad");
  err.line = 7;
  assert_int_equal(grt_trace_error_format(&err, buf, sizeof buf), GRT_OK);
  assert_string_equal(buf, "f.pickle:7: bad");
  err.has_offset = true;
  err.offset = 42;
  assert_int_equal(grt_trace_error_format(&err, buf, sizeof buf), GRT_OK);
  assert_string_equal(buf, "f.pickle: byte 42: bad");
  assert_int_equal(grt_trace_error_format(&err, buf, 6), GRT_OK); /* truncated, terminated */
  assert_string_equal(buf, "f.pic");
  assert_int_equal(grt_trace_error_format(NULL, buf, sizeof buf), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt_trace_error_format(&err, NULL, sizeof buf), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt_trace_error_format(&err, buf, 0), GRT_ERR_INVALID_ARG);

  static const char *const kinds[] = {"alloc",       "free_requested", "free_completed", "segment_alloc", "segment_free",
                                      "segment_map", "segment_unmap",  "oom",            "snapshot"};
  for (int k = 0; k < GRT_TRACE_KIND_COUNT; k++) assert_string_equal(grt_trace_kind_name((grt_trace_kind)k), kinds[k]);
  assert_string_equal(grt_trace_kind_name(GRT_TRACE_KIND_COUNT), "unknown");
  assert_string_equal(grt_trace_kind_name((grt_trace_kind)-1), "unknown");
  static const char *const formats[] = {"auto", "native", "pytorch", "rmm", "minimalloc"};
  for (int k = 0; k <= GRT_TRACE_FORMAT_MINIMALLOC; k++)
    assert_string_equal(grt_trace_format_name((grt_trace_format)k), formats[k]);
  assert_string_equal(grt_trace_format_name((grt_trace_format)17), "unknown");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_detection),
      cmocka_unit_test(test_arguments),
      cmocka_unit_test(test_files),
      cmocka_unit_test(test_error_format_and_names),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
