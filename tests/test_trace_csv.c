/* test_trace_csv.c — the RMM logging CSV and minimalloc CSV readers. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "trace_test_util.h"

static void test_rmm_small(void **state) {
  (void)state;
  grt_trace_error err;
  grt_status st;
  grt_trace *t = tt_load(tt_data("rmm_small.csv"), GRT_TRACE_FORMAT_AUTO, &err, &st);
  assert_int_equal(st, GRT_OK);
  grt_trace_info in;
  assert_int_equal(grt_trace_get_info(t, &in), GRT_OK);
  assert_int_equal(in.format, GRT_TRACE_FORMAT_RMM);
  assert_int_equal(in.n_events, 7);
  assert_int_equal(in.count[GRT_TRACE_ALLOC], 3);
  assert_int_equal(in.count[GRT_TRACE_FREE_COMPLETED], 3);
  assert_int_equal(in.count[GRT_TRACE_OOM], 1);
  assert_int_equal(in.n_ids, 3);
  /* streams are hex: 0x0, 0x2, 0x1a = 26 */
  assert_int_equal(in.n_streams, 3);
  assert_int_equal(in.streams[0], 0);
  assert_int_equal(in.streams[1], 2);
  assert_int_equal(in.streams[2], 26);
  const grt_trace_event *e = in.events;
  assert_int_equal(e[0].kind, GRT_TRACE_ALLOC);
  assert_int_equal(e[0].addr, 0x7f8a40000000ULL);
  assert_int_equal(e[0].size, 1024);
  assert_int_equal(e[0].time, ((10 * 60 + 15) * 60 + 2) * 1000000LL + 100);
  assert_int_equal(e[2].kind, GRT_TRACE_FREE_COMPLETED);
  assert_int_equal(e[2].id, e[0].id);
  assert_int_equal(e[3].kind, GRT_TRACE_OOM);
  assert_int_equal(e[3].size, 1099511627776ULL);
  assert_false(e[3].flags & GRT_TRACE_F_ADDR);
  assert_int_equal(e[3].id, GRT_TRACE_NO_ID);
  /* the pointer reused after its free is a new allocation */
  assert_int_equal(e[4].id, 2);
  assert_int_equal(e[6].id, 2);
  assert_int_equal(e[5].id, 1);
  assert_int_equal(in.streams[e[4].stream], 26);
  assert_int_equal(grt_trace_destroy(t), GRT_OK);
}

static void expect_file_error(const char *name, uint64_t line, const char *needle) {
  grt_trace_error err;
  grt_status st;
  grt_trace *t = tt_load(tt_data(name), GRT_TRACE_FORMAT_AUTO, &err, &st);
  assert_null(t);
  assert_int_equal(st, GRT_ERR_PARSE);
  if (err.line != line || !strstr(err.reason, needle))
    fail_msg("%s: got line %llu '%s'", name, (unsigned long long)err.line, err.reason);
  assert_non_null(strstr(err.file, name));
}

static void expect_error(const char *text, grt_trace_format fmt, uint64_t line, const char *needle) {
  grt_trace_error err;
  grt_status st;
  grt_trace *t = tt_load_str(text, fmt, &err, &st);
  assert_null(t);
  assert_int_equal(st, GRT_ERR_PARSE);
  if (err.line != line || !strstr(err.reason, needle))
    fail_msg("for %s: got line %llu '%s', want line %llu containing '%s'", text,
             (unsigned long long)err.line, err.reason, (unsigned long long)line, needle);
}

#define RMM_H "Thread,Time,Action,Pointer,Size,Stream\n"

static void test_rmm_errors(void **state) {
  (void)state;
  expect_file_error("rmm_bad_size.csv", 3, "size field 'abc' is not a number");
  expect_file_error("rmm_bad_stream.csv", 4, "stream field '0xzz'");
  expect_file_error("rmm_bad_header.csv", 1, "expected the header");
  expect_file_error("rmm_double_alloc.csv", 4, "still allocated");
  expect_error(RMM_H "1,10:00:00.1,allocate,0x10,5\n", GRT_TRACE_FORMAT_RMM, 2, "6 comma-separated");
  expect_error(RMM_H "1,10:00:00.1,malloc,0x10,5,0\n", GRT_TRACE_FORMAT_RMM, 2, "unknown action 'malloc'");
  expect_error(RMM_H "1,25:00:00.1,allocate,0x10,5,0\n", GRT_TRACE_FORMAT_RMM, 2, "time field");
  expect_error(RMM_H "1,x,allocate,0x10,5,0\n", GRT_TRACE_FORMAT_RMM, 2, "time field");
  expect_error(RMM_H "1,,allocate,(nil),5,0\n", GRT_TRACE_FORMAT_RMM, 2, "null pointer");
  expect_error(RMM_H "1,,allocate,0xq,5,0\n", GRT_TRACE_FORMAT_RMM, 2, "pointer field");
  expect_error(RMM_H "1,,allocate,0x1,5,0,7\n", GRT_TRACE_FORMAT_RMM, 2, "more");
  expect_error("", GRT_TRACE_FORMAT_RMM, 0, "empty");
}

static void test_rmm_variants(void **state) {
  (void)state;
  /* CRLF, epoch-seconds time, empty time, "deallocate", free of a pointer never allocated, midnight wrap */
  const char *text = RMM_H "1,1634567890.5,allocate,0x10,5,0\r\n"
                           "1,,deallocate,0x10,5,0\r\n"
                           "1,23:59:59.999999,free,0x20,7,0x0\r\n"
                           "1,00:00:00.000001,allocate,0x20,7,0x0\r\n";
  grt_trace_error err;
  grt_status st;
  grt_trace *t = tt_load_str(text, GRT_TRACE_FORMAT_AUTO, &err, &st);
  assert_int_equal(st, GRT_OK);
  grt_trace_info in;
  assert_int_equal(grt_trace_get_info(t, &in), GRT_OK);
  assert_int_equal(in.n_events, 4);
  assert_int_equal(in.events[0].time, 1634567890500000LL);
  assert_false(in.events[1].flags & GRT_TRACE_F_TIME);
  assert_true(in.events[2].flags & GRT_TRACE_F_UNMATCHED);
  assert_int_equal(in.events[3].time - in.events[2].time, 2);
  assert_int_equal(in.n_streams, 1);
  assert_int_equal(grt_trace_destroy(t), GRT_OK);
}

static void test_minimalloc_small(void **state) {
  (void)state;
  grt_trace_error err;
  grt_status st;
  grt_trace *t = tt_load(tt_data("minimalloc_small.csv"), GRT_TRACE_FORMAT_AUTO, &err, &st);
  assert_int_equal(st, GRT_OK);
  grt_trace_info in;
  assert_int_equal(grt_trace_get_info(t, &in), GRT_OK);
  assert_int_equal(in.format, GRT_TRACE_FORMAT_MINIMALLOC);
  assert_int_equal(in.n_events, 8);
  /* expected order: alloc 1, alloc 3, free 1, alloc 0, alloc 2, free 0, free 2, free 3 */
  const int kinds[8] = {0, 0, 1, 0, 0, 1, 1, 1};
  const uint64_t sizes[8] = {200, 100, 200, 50, 300, 50, 300, 100};
  const int64_t times[8] = {0, 0, 5, 5, 5, 7, 10, 10};
  for (int i = 0; i < 8; i++) {
    assert_int_equal(in.events[i].kind, kinds[i] ? GRT_TRACE_FREE_COMPLETED : GRT_TRACE_ALLOC);
    assert_int_equal(in.events[i].size, sizes[i]);
    assert_int_equal(in.events[i].time, times[i]);
  }
  assert_int_equal(in.events[2].id, in.events[0].id);
  assert_int_equal(in.events[7].id, in.events[1].id);
  assert_int_equal(grt_trace_destroy(t), GRT_OK);
}

#define MM_H "id,lower,upper,size\n"

static void test_minimalloc_errors(void **state) {
  (void)state;
  expect_file_error("minimalloc_bad_upper.csv", 4, "must be greater than lower");
  expect_error(MM_H "0,0,1,x\n", GRT_TRACE_FORMAT_MINIMALLOC, 2, "size field 'x' is not a number");
  expect_error(MM_H "0,0,1\n", GRT_TRACE_FORMAT_MINIMALLOC, 2, "expected 4");
  expect_error(MM_H "0,0,1,5\n0,2,3,5\n", GRT_TRACE_FORMAT_MINIMALLOC, 3, "duplicate buffer id 0");
  expect_error(MM_H "a,0,1,5\n", GRT_TRACE_FORMAT_MINIMALLOC, 2, "id field");
  expect_error("id,upper,lower,size\n", GRT_TRACE_FORMAT_MINIMALLOC, 1, "expected the header");
  /* extra columns are accepted */
  grt_trace_error err;
  grt_status st;
  grt_trace *t = tt_load_str("id,lower,upper,size,alignment\n0,0,4,64,8\n\n", GRT_TRACE_FORMAT_AUTO, &err, &st);
  assert_int_equal(st, GRT_OK);
  assert_int_equal(grt_trace_destroy(t), GRT_OK);
}

/* Time fields: both forms, their limits, and fractions of every length. */
static void test_rmm_time_forms(void **state) {
  (void)state;
  static const char *const bad_times[] = {
      "10:00:00.1234567890", /* more than 9 fraction digits */
      "10:00:00.1a",         "10:00:00.",  "10:61:00", "10:00:61", "x:00:00", "10:y:00",
      "10:00",               /* neither one field nor three */
      "9223372036854.0",     /* seconds beyond what microseconds can hold */
  };
  for (size_t i = 0; i < sizeof bad_times / sizeof bad_times[0]; i++) {
    char text[256];
    snprintf(text, sizeof text, RMM_H "1,0.5,allocate,0x10,5,0\n1,%s,free,0x10,5,0\n", bad_times[i]);
    expect_error(text, GRT_TRACE_FORMAT_RMM, 3, "time field");
  }
  /* 7 to 9 fraction digits keep the first six; a leap second is accepted */
  const char *text = RMM_H "1,00:00:01.123456789,allocate,0x10,5,0\n"
                           "1,00:00:60.5,free,0x10,5,0\n"
                           "1,9223372036853,allocate,0x10,5,0\n";
  grt_trace_error err;
  grt_status st;
  grt_trace *t = tt_load_str(text, GRT_TRACE_FORMAT_RMM, &err, &st);
  if (st) fail_msg("line %llu: %s", (unsigned long long)err.line, err.reason);
  grt_trace_info in;
  assert_int_equal(grt_trace_get_info(t, &in), GRT_OK);
  assert_int_equal(in.events[0].time, 1123456);
  assert_int_equal(in.events[1].time, 60500000);
  assert_int_equal(in.events[2].time, 9223372036853000000LL);
  assert_int_equal(grt_trace_destroy(t), GRT_OK);
}

/* Every null-pointer spelling on an allocate failure; a BOM; blank lines; null frees; a bad pointer. */
static void test_rmm_pointers(void **state) {
  (void)state;
  const char *text = "\xEF\xBB\xBF" RMM_H "\n"
                     "1,,allocate failure,(nil),10,0\n"
                     "1,,allocate failure,0x0,11,0\n"
                     "   \n"
                     "1,,allocate failure,0,12,0\n"
                     "1,,allocate failure,nullptr,13,0\n"
                     "1,,allocate failure,(null),14,0x5\n"
                     "1,,allocate failure,0x40,15,0x5\n";
  grt_trace_error err;
  grt_status st;
  grt_trace *t = tt_load_str(text, GRT_TRACE_FORMAT_AUTO, &err, &st);
  if (st) fail_msg("line %llu: %s", (unsigned long long)err.line, err.reason);
  grt_trace_info in;
  assert_int_equal(grt_trace_get_info(t, &in), GRT_OK);
  assert_int_equal(in.format, GRT_TRACE_FORMAT_RMM);
  assert_int_equal(in.n_events, 6);
  for (size_t i = 0; i < 6; i++) {
    assert_int_equal(in.events[i].kind, GRT_TRACE_OOM);
    assert_int_equal(in.events[i].size, 10 + i);
    assert_int_equal(in.events[i].id, GRT_TRACE_NO_ID);
    assert_int_equal(!!(in.events[i].flags & GRT_TRACE_F_ADDR), i == 5); /* only a real pointer is an address */
  }
  assert_int_equal(in.events[5].addr, 0x40);
  assert_int_equal(in.n_streams, 2);
  assert_int_equal(grt_trace_destroy(t), GRT_OK);
  expect_error(RMM_H "1,,free,nullptr,5,0\n", GRT_TRACE_FORMAT_RMM, 2, "free of a null pointer");
  expect_error(RMM_H "1,,allocate,0x10,5,0\n1,,deallocate,(null),5,0\n", GRT_TRACE_FORMAT_RMM, 3,
               "free of a null pointer");
  expect_error(RMM_H "1,,allocate,0xffffffffffffffff,5,0\n", GRT_TRACE_FORMAT_RMM, 2,
               "pointer field '0xffffffffffffffff' is not a hex address");
  expect_error(RMM_H "\n\n1,,allocate,0x10,-5,0\n", GRT_TRACE_FORMAT_RMM, 4, "size field '-5' is not a number");
  expect_error("\n", GRT_TRACE_FORMAT_RMM, 1, "expected the header");
}

static void test_minimalloc_edges(void **state) {
  (void)state;
  expect_error("", GRT_TRACE_FORMAT_MINIMALLOC, 0, "empty input");
  expect_error("id,lower,upper\n", GRT_TRACE_FORMAT_MINIMALLOC, 1, "expected the header");
  expect_error("id,low,upper,size\n", GRT_TRACE_FORMAT_MINIMALLOC, 1, "found 'id,low,upper,size'");
  expect_error("id,lower,up,size\n", GRT_TRACE_FORMAT_MINIMALLOC, 1, "expected the header");
  expect_error("id,lower,upper,bytes\n", GRT_TRACE_FORMAT_MINIMALLOC, 1, "expected the header");
  expect_error("id,lower,upper,size,a,b,c,d,e,f,g,h,i,j,k,l,m\n", GRT_TRACE_FORMAT_MINIMALLOC, 1,
               "expected the header"); /* 17 columns: more than the reader keeps */
  expect_error(MM_H "0,0,1,5,6,7,8,9,10,11,12,13,14,15,16,17,18\n", GRT_TRACE_FORMAT_MINIMALLOC, 2,
               "expected 4 comma-separated fields, found more than 16");
  expect_error(MM_H "\n0,x,1,5\n", GRT_TRACE_FORMAT_MINIMALLOC, 3, "lower field 'x' is not a number");
  expect_error(MM_H "0,0,-1,5\n", GRT_TRACE_FORMAT_MINIMALLOC, 2, "upper field '-1' is not a number");
  expect_error(MM_H "18446744073709551615,0,1,5\n", GRT_TRACE_FORMAT_MINIMALLOC, 2, "id field");
  expect_error(MM_H "1,9223372036854775808,9223372036854775809,5\n", GRT_TRACE_FORMAT_MINIMALLOC, 2,
               "time step out of range");
  expect_error(MM_H "1,0,9223372036854775808,5\n", GRT_TRACE_FORMAT_MINIMALLOC, 2, "time step out of range");
  /* a header alone is an empty trace; a BOM before it is skipped; ids need not be dense */
  grt_trace_error err;
  grt_status st;
  grt_trace *t = tt_load_str(MM_H, GRT_TRACE_FORMAT_MINIMALLOC, &err, &st);
  assert_int_equal(st, GRT_OK);
  grt_trace_info in;
  assert_int_equal(grt_trace_get_info(t, &in), GRT_OK);
  assert_int_equal(in.n_events, 0);
  assert_int_equal(in.n_ids, 0);
  assert_int_equal(grt_trace_destroy(t), GRT_OK);
  t = tt_load_str("\xEF\xBB\xBF" MM_H "900,3,9223372036854775807,64\n", GRT_TRACE_FORMAT_AUTO, &err, &st);
  if (st) fail_msg("line %llu: %s", (unsigned long long)err.line, err.reason);
  assert_int_equal(grt_trace_get_info(t, &in), GRT_OK);
  assert_int_equal(in.format, GRT_TRACE_FORMAT_MINIMALLOC);
  assert_int_equal(in.n_events, 2);
  assert_int_equal(in.n_ids, 1);
  assert_int_equal(in.events[0].id, 0);
  assert_int_equal(in.events[1].time, INT64_MAX);
  assert_int_equal(grt_trace_destroy(t), GRT_OK);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_rmm_small),       cmocka_unit_test(test_rmm_errors),
      cmocka_unit_test(test_rmm_variants),    cmocka_unit_test(test_minimalloc_small),
      cmocka_unit_test(test_minimalloc_errors), cmocka_unit_test(test_rmm_time_forms),
      cmocka_unit_test(test_rmm_pointers),      cmocka_unit_test(test_minimalloc_edges),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
