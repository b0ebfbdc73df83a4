/* test_sorder_errors.c — the stream-ordered context's refusals and its less
 * travelled paths: argument checks on every front-door call, copies in both
 * directions through the context (ordered by an event edge: no report; a
 * memset unordered with declared kernel accesses: races), report listing,
 * printing, dropping beyond max_reports and clearing, kind names, and the
 * context without the sanitizer. Both clocks. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "gpurt/sorder.h"

static void test_args(void **state) {
  (void)state;
  grt_sorder_config_default(NULL);
  grt_sorder_config cfg;
  grt_sorder_config_default(&cfg);
  grt_sorder *so = NULL;
  assert_int_equal(grt_sorder_create(&cfg, &so), GRT_ERR_INVALID_ARG); /* no exec */
  assert_int_equal(grt_sorder_create(NULL, &so), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt_sorder_destroy(NULL), GRT_OK);
  size_t kept = 0;
  uint64_t total = 0;
  grt_sorder_report rep;
  int a = 0, b = 0;
  assert_int_equal(grt_sorder_report_count(NULL, &kept, &total), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt_sorder_get_report(NULL, 0, &rep), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt_sorder_clear_reports(NULL), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt_sorder_print_reports(NULL, stdout), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt_sorder_set_debug(NULL, 0, 0), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt_sorder_get_debug(NULL, &a, &b), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt_sorder_synchronize(NULL), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt_sorder_host_access(NULL, 1, 1, 0), GRT_ERR_INVALID_ARG);
  assert_string_equal(grt_sorder_report_kind_name(GRT_SORDER_RACE), "race");
  assert_string_equal(grt_sorder_report_kind_name(GRT_SORDER_USE_AFTER_FREE), "use-after-free");
  assert_string_equal(grt_sorder_report_kind_name(GRT_SORDER_POISON_READ), "poison-read");
  assert_string_equal(grt_sorder_report_kind_name((grt_sorder_report_kind)9), "unknown");
}

static void copies_race(grt_clock_kind clock, int sanitize) {
  grt_exec_config ec;
  grt_exec_config_default(&ec);
  ec.clock = clock;
  ec.device_capacity = 4 * GRT_MiB;
  grt_exec *exec = NULL;
  assert_int_equal(grt_exec_create(&ec, &exec), GRT_OK);
  grt_sorder_config cfg;
  grt_sorder_config_default(&cfg);
  cfg.exec = exec;
  cfg.sanitize = sanitize;
  cfg.use_env = 0;
  cfg.max_reports = 1;
  grt_sorder *so = NULL;
  assert_int_equal(grt_sorder_create(&cfg, &so), GRT_OK);
  grt_stream *s1 = NULL, *s2 = NULL;
  grt_event *ev = NULL;
  assert_int_equal(grt_stream_create(exec, GRT_STREAM_NON_BLOCKING, 0, &s1), GRT_OK);
  assert_int_equal(grt_stream_create(exec, GRT_STREAM_NON_BLOCKING, 0, &s2), GRT_OK);
  assert_int_equal(grt_event_create(exec, 0, &ev), GRT_OK);
  grt_device *dev = NULL;
  grt_devptr p = 0;
  assert_int_equal(grt_exec_get_device(exec, &dev), GRT_OK);
  assert_int_equal(grt_device_malloc(dev, 4096, &p), GRT_OK);
  char host[4096], back[4096];
  memset(host, 0x5a, sizeof host);
  memset(back, 0, sizeof back);
  /* argument checks on the front door */
  grt_kernel_desc k = {NULL, NULL, 100, GRT_ENGINE_COMPUTE, "k"};
  grt_access acc = {p, 4096, 0};
  assert_int_equal(grt_sorder_memcpy_h2d(NULL, s1, p, host, 4096), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt_sorder_memcpy_h2d(so, NULL, p, host, 4096), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt_sorder_memcpy_d2h(so, NULL, back, p, 4096), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt_sorder_memset(so, NULL, p, 0, 4096), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt_sorder_launch(so, s1, NULL, NULL, 0), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt_sorder_launch(so, s1, &k, NULL, 1), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt_sorder_launch(NULL, s1, &k, &acc, 1), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt_sorder_event_record(so, ev, NULL), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt_sorder_stream_wait_event(so, NULL, ev), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt_sorder_stream_synchronize(so, NULL), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt_sorder_event_synchronize(so, NULL), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt_sorder_event_query(so, NULL), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt_sorder_host_access(so, p, 0, 0), GRT_ERR_INVALID_ARG);
  /* ordered: H2D on s1, event edge, D2H on s2 */
  assert_int_equal(grt_sorder_memcpy_h2d(so, s1, p, host, 4096), GRT_OK);
  assert_int_equal(grt_sorder_event_record(so, ev, s1), GRT_OK);
  assert_int_equal(grt_sorder_stream_wait_event(so, s2, ev), GRT_OK);
  assert_int_equal(grt_sorder_memcpy_d2h(so, s2, back, p, 4096), GRT_OK);
  assert_int_equal(grt_sorder_stream_synchronize(so, s2), GRT_OK);
  assert_memory_equal(host, back, sizeof back);
  size_t kept = 9;
  uint64_t total = 9;
  assert_int_equal(grt_sorder_report_count(so, &kept, &total), GRT_OK);
  assert_int_equal(total, 0);
  /* unordered: a memset on s1, then a read and a write declared by kernels on
   * s2 with no edge: two races (one kept). The kernels have no body, so the
   * race is only declared (a real one would be a data race under TSan). */
  assert_int_equal(grt_sorder_memset(so, s1, p, 1, 4096), GRT_OK);
  assert_int_equal(grt_sorder_launch(so, s2, &k, &acc, 1), GRT_OK);
  assert_int_equal(grt_sorder_launch(so, s2, &k, &(grt_access){p, 4096, 1}, 1), GRT_OK);
  assert_int_equal(grt_sorder_event_record(so, ev, s2), GRT_OK);
  assert_int_equal(grt_sorder_event_synchronize(so, ev), GRT_OK);
  assert_int_equal(grt_sorder_event_query(so, ev), GRT_OK);
  assert_int_equal(grt_sorder_synchronize(so), GRT_OK);
  assert_int_equal(grt_sorder_host_access(so, p, 4096, 1), GRT_OK); /* after a full sync: ordered */
  assert_int_equal(grt_sorder_report_count(so, &kept, &total), GRT_OK);
  grt_sorder_report rep;
  if (sanitize) {
    assert_int_equal(kept, 1);
    assert_true(total >= 2);
    assert_int_equal(grt_sorder_get_report(so, 0, &rep), GRT_OK);
    assert_int_equal(rep.kind, GRT_SORDER_RACE);
    assert_int_equal(grt_sorder_get_report(so, 1, &rep), GRT_ERR_NOT_FOUND);
  } else {
    assert_int_equal(total, 0);
  }
  assert_int_equal(grt_sorder_report_count(so, NULL, &total), GRT_OK);
  assert_int_equal(grt_sorder_report_count(so, NULL, NULL), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt_sorder_get_report(so, 0, NULL), GRT_ERR_INVALID_ARG);
  FILE *f = tmpfile();
  assert_non_null(f);
  assert_int_equal(grt_sorder_print_reports(so, NULL), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt_sorder_print_reports(so, f), GRT_OK);
  if (sanitize) assert_true(ftell(f) > 0);
  fclose(f);
  assert_int_equal(grt_sorder_clear_reports(so), GRT_OK);
  assert_int_equal(grt_sorder_report_count(so, &kept, &total), GRT_OK);
  assert_int_equal(total, 0);
  int ser = 9, poi = 9;
  assert_int_equal(grt_sorder_set_debug(so, 1, 1), GRT_OK);
  assert_int_equal(grt_sorder_get_debug(so, &ser, &poi), GRT_OK);
  assert_int_equal(ser + poi, 2);
  assert_int_equal(grt_sorder_memcpy_h2d(so, s1, p, host, 4096), GRT_OK); /* serialized */
  assert_int_equal(grt_sorder_synchronize(so), GRT_OK);
  assert_int_equal(grt_sorder_destroy(so), GRT_OK);
  assert_int_equal(grt_device_free(dev, p), GRT_OK);
  assert_int_equal(grt_event_destroy(ev), GRT_OK);
  assert_int_equal(grt_stream_destroy(s1), GRT_OK);
  assert_int_equal(grt_stream_destroy(s2), GRT_OK);
  assert_int_equal(grt_exec_destroy(exec), GRT_OK);
}

static void test_copies_and_reports(void **state) {
  (void)state;
  for (int c = 1; c >= 0; c--)
    for (int sanitize = 0; sanitize < 2; sanitize++) copies_race(c ? GRT_CLOCK_VIRTUAL : GRT_CLOCK_THREADS, sanitize);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_args),
      cmocka_unit_test(test_copies_and_reports),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
