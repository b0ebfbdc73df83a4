/* test_plan_nomem.c — the planner when host memory runs out: every
 * allocation of grt_plan_solve, grt_plan_check, grt_plan_peak_live and
 * grt_plan_buffers_from_trace is made to fail in turn (tests/nomem_wrap.h);
 * each failure is GRT_ERR_NOMEM with a message, the outputs untouched, and
 * nothing leaked (AddressSanitizer's leak check in the asan build). */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "gpurt/plan.h"
#include "nomem_wrap.h"

#define SENTINEL 0xABABABABABABABABull
enum { N = 40 };

static void make(grt_plan_buffer *b) {
  for (uint64_t i = 0; i < N; i++)
    b[i] = (grt_plan_buffer){i, i % 7, i % 7 + 1 + i % 5, 1 + (i * 37) % 97, i % 3 ? 0 : 8};
}

static void test_solve_nomem(void **state) {
  (void)state;
  grt_plan_buffer b[N];
  make(b);
  grt_plan_config cfg;
  grt_plan_config_default(&cfg);
  cfg.effort = 50;
  bool done = false;
  for (long k = 1; !done && k < 1000; k++) {
    uint64_t off[N];
    for (int i = 0; i < N; i++) off[i] = SENTINEL;
    grt_plan_result r;
    memset(&r, 0x5a, sizeof r);
    char err[128] = "";
    nomem_arm(k);
    grt_status st = grt_plan_solve(b, N, &cfg, off, &r, err, sizeof err);
    bool fired = nomem_disarm();
    if (!fired) {
      assert_int_equal(st, GRT_OK);
      done = true;
      continue;
    }
    assert_int_equal(st, GRT_ERR_NOMEM);
    assert_non_null(strstr(err, "no host memory"));
    for (int i = 0; i < N; i++) assert_true(off[i] == SENTINEL);
    assert_true(r.heap == 0x5a5a5a5a5a5a5a5aull);
  }
  assert_true(done);
}

static void test_check_and_peak_nomem(void **state) {
  (void)state;
  grt_plan_buffer b[N];
  make(b);
  uint64_t off[N];
  grt_plan_result r;
  assert_int_equal(grt_plan_solve(b, N, NULL, off, &r, NULL, 0), GRT_OK);
  for (long k = 1;; k++) {
    uint64_t heap = SENTINEL, peak = SENTINEL;
    nomem_arm(k);
    grt_status st = grt_plan_check(b, N, off, &heap, NULL, 0);
    bool fired = nomem_disarm();
    if (!fired) {
      assert_int_equal(st, GRT_OK);
      break;
    }
    assert_int_equal(st, GRT_ERR_NOMEM);
    assert_true(heap == SENTINEL);
    nomem_arm(k);
    st = grt_plan_peak_live(b, N, &peak, NULL, NULL, 0);
    if (nomem_disarm()) {
      assert_int_equal(st, GRT_ERR_NOMEM);
      assert_true(peak == SENTINEL);
    }
  }
}

static void test_from_trace_nomem(void **state) {
  (void)state;
  static const char csv[] = "id,lower,upper,size\n0,0,2,10\n1,2,4,20\n2,1,3,5\n";
  grt_trace *t = NULL;
  grt_trace_error e;
  assert_int_equal(grt_trace_load_buffer(csv, sizeof csv - 1, "t.csv", NULL, &t, &e), GRT_OK);
  for (long k = 1;; k++) {
    grt_plan_buffer *b = (grt_plan_buffer *)&k;
    size_t n = 77;
    nomem_arm(k);
    grt_status st = grt_plan_buffers_from_trace(t, &b, &n, NULL, 0);
    if (!nomem_disarm()) {
      assert_int_equal(st, GRT_OK);
      assert_int_equal(n, 3);
      grt_plan_buffers_free(b);
      break;
    }
    assert_int_equal(st, GRT_ERR_NOMEM);
    assert_true(b == (grt_plan_buffer *)&k && n == 77);
  }
  assert_int_equal(grt_trace_destroy(t), GRT_OK);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_solve_nomem),
      cmocka_unit_test(test_check_and_peak_nomem),
      cmocka_unit_test(test_from_trace_nomem),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
