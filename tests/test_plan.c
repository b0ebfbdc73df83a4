/* test_plan.c — the static planner (gpurt/plan.h): exact plans of small
 * hand-made cases, alignment, every error path (nothing written after a
 * failure), determinism, buffers from a trace, and randomized instances
 * whose every plan is judged by a pairwise checker written here, which
 * also judges grt_plan_check itself on random placements. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "base/rng.h"
#include "gpurt/plan.h"

#define B(id, lo, up, sz) \
  { id, lo, up, sz, 0 }
#define SENTINEL 0xABABABABABABABABull

/* ---- the independent checker: every pair, no shared code with the library ---- */

static bool lifetimes_meet(const grt_plan_buffer *a, const grt_plan_buffer *b) {
  return a->lower < b->upper && b->lower < a->upper;
}

static bool bytes_meet(uint64_t ao, uint64_t as, uint64_t bo, uint64_t bs) { return ao < bo + bs && bo < ao + as; }

/* true when the placement is valid; *heap its heap. */
static bool pairwise_valid(const grt_plan_buffer *b, size_t n, const uint64_t *off, uint64_t *heap) {
  uint64_t top = 0;
  for (size_t i = 0; i < n; i++) {
    uint64_t a = b[i].alignment ? b[i].alignment : 1;
    if (off[i] % a) return false;
    if (off[i] + b[i].size > top) top = off[i] + b[i].size;
    for (size_t j = i + 1; j < n; j++)
      if (lifetimes_meet(&b[i], &b[j]) && bytes_meet(off[i], b[i].size, off[j], b[j].size)) return false;
  }
  if (heap) *heap = top;
  return true;
}

/* The peak by brute force: live bytes at every lower step. */
static uint64_t brute_peak(const grt_plan_buffer *b, size_t n) {
  uint64_t peak = 0;
  for (size_t i = 0; i < n; i++) {
    uint64_t live = 0;
    for (size_t j = 0; j < n; j++)
      if (b[j].lower <= b[i].lower && b[i].lower < b[j].upper) live += b[j].size;
    if (live > peak) peak = live;
  }
  return peak;
}

static grt_plan_result solve_ok(const grt_plan_buffer *b, size_t n, uint64_t *off) {
  grt_plan_result r;
  char err[256];
  grt_status st = grt_plan_solve(b, n, NULL, off, &r, err, sizeof err);
  if (st) fail_msg("%s: %s", grt_status_name(st), err);
  uint64_t heap = 0;
  assert_true(pairwise_valid(b, n, off, &heap));
  assert_int_equal(heap, r.heap);
  assert_int_equal(r.peak_live, brute_peak(b, n));
  assert_int_equal(grt_plan_check(b, n, off, &heap, err, sizeof err), GRT_OK);
  assert_int_equal(heap, r.heap);
  return r;
}

/* ---- exact small cases ---- */

static void test_empty_and_single(void **state) {
  (void)state;
  grt_plan_result r;
  assert_int_equal(grt_plan_solve(NULL, 0, NULL, NULL, &r, NULL, 0), GRT_OK);
  assert_int_equal(r.heap, 0);
  assert_int_equal(r.peak_live, 0);
  assert_true(r.optimal);
  grt_plan_buffer one[] = {B(9, 3, 4, 100)};
  uint64_t off[1];
  r = solve_ok(one, 1, off);
  assert_int_equal(off[0], 0);
  assert_int_equal(r.heap, 100);
  assert_true(r.optimal);
}

static void test_half_open_lifetimes_share(void **state) {
  (void)state;
  /* [0,5) and [5,10) are never live together: both at offset 0 */
  grt_plan_buffer b[] = {B(1, 0, 5, 64), B(2, 5, 10, 32)};
  uint64_t off[2];
  grt_plan_result r = solve_ok(b, 2, off);
  assert_int_equal(off[0], 0);
  assert_int_equal(off[1], 0);
  assert_int_equal(r.heap, 64);
  assert_int_equal(r.peak_live, 64);
}

static void test_known_optimal(void **state) {
  (void)state;
  /* a chain: a|b overlap, b|c overlap, a and c do not; the optimum stacks b
   * over a and c side by side: 3 = the peak */
  grt_plan_buffer chain[] = {B(0, 0, 2, 2), B(1, 1, 3, 1), B(2, 2, 4, 2)};
  uint64_t off[8];
  grt_plan_result r = solve_ok(chain, 3, off);
  assert_int_equal(r.heap, 3);
  assert_true(r.optimal);
  /* everything live at once: the sum */
  grt_plan_buffer all[] = {B(0, 0, 9, 5), B(1, 0, 9, 7), B(2, 0, 9, 11), B(3, 0, 9, 13)};
  r = solve_ok(all, 4, off);
  assert_int_equal(r.heap, 36);
  /* a staircase whose peak any plan can reach: 8 buffers of 1..8 bytes, each live one step longer */
  grt_plan_buffer stair[8];
  for (uint64_t i = 0; i < 8; i++) stair[i] = (grt_plan_buffer)B(i, i, 8 + i, i + 1);
  r = solve_ok(stair, 8, off);
  assert_int_equal(r.heap, r.peak_live);
  /* two phases reusing the same bytes */
  grt_plan_buffer phases[] = {B(0, 0, 4, 100), B(1, 0, 4, 50), B(2, 4, 8, 120), B(3, 4, 8, 30)};
  r = solve_ok(phases, 4, off);
  assert_int_equal(r.heap, 150);
}

static void test_alignment(void **state) {
  (void)state;
  /* the 8-aligned 4 bytes at 0, the 3 unaligned bytes above: 7 */
  grt_plan_buffer b[] = {{1, 0, 2, 3, 1}, {2, 0, 2, 4, 8}};
  uint64_t off[2];
  grt_plan_result r = solve_ok(b, 2, off);
  assert_int_equal(r.heap, 7);
  assert_int_equal(off[1], 0);
  assert_int_equal(off[0], 4);
  /* both aligned to 64: 5 + pad + 5 */
  grt_plan_buffer c[] = {{1, 0, 2, 5, 64}, {2, 0, 2, 5, 64}};
  r = solve_ok(c, 2, off);
  assert_int_equal(r.heap, 69);
  assert_int_equal(off[0] % 64, 0);
  assert_int_equal(off[1] % 64, 0);
}

/* ---- errors: precise, and nothing written ---- */

static void expect_fail(const grt_plan_buffer *b, size_t n, grt_status want, const char *msg) {
  uint64_t off[8];
  for (int i = 0; i < 8; i++) off[i] = SENTINEL;
  grt_plan_result r;
  memset(&r, 0x5a, sizeof r);
  grt_plan_result before = r;
  char err[256] = "";
  assert_int_equal(grt_plan_solve(b, n, NULL, off, &r, err, sizeof err), want);
  if (!strstr(err, msg)) fail_msg("message '%s' lacks '%s'", err, msg);
  for (int i = 0; i < 8; i++) assert_true(off[i] == SENTINEL);
  assert_memory_equal(&r, &before, sizeof r);
  uint64_t peak = SENTINEL;
  assert_int_equal(grt_plan_peak_live(b, n, &peak, NULL, err, sizeof err), want);
  assert_true(peak == SENTINEL);
}

static void test_bad_buffers(void **state) {
  (void)state;
  grt_plan_buffer up[] = {B(3, 0, 4, 1), B(7, 3, 3, 1)};
  expect_fail(up, 2, GRT_ERR_INVALID_ARG, "buffer 1 (id 7): upper (3) must be greater than lower (3)");
  grt_plan_buffer zero[] = {B(3, 0, 4, 0)};
  expect_fail(zero, 1, GRT_ERR_SIZE, "buffer 0 (id 3): size is 0");
  grt_plan_buffer align[] = {B(3, 0, 4, 8), {4, 0, 4, 8, 12}};
  expect_fail(align, 2, GRT_ERR_INVALID_ARG, "buffer 1 (id 4): alignment 12 is not a power of two");
  grt_plan_buffer huge[] = {B(3, 0, 4, (uint64_t)1 << 63)};
  expect_fail(huge, 1, GRT_ERR_SIZE, "buffer 0 (id 3): size 9223372036854775808");
  grt_plan_buffer sum[] = {B(1, 0, 4, (uint64_t)1 << 62), B(2, 0, 4, (uint64_t)1 << 62)};
  expect_fail(sum, 2, GRT_ERR_SIZE, "buffer 1 (id 2)");
  grt_plan_buffer big_align[] = {{1, 0, 4, 1, (uint64_t)1 << 63}};
  expect_fail(big_align, 1, GRT_ERR_SIZE, "past 2^63");
  grt_plan_buffer dup[] = {B(5, 0, 4, 1), B(6, 0, 4, 1), B(5, 1, 2, 1)};
  expect_fail(dup, 3, GRT_ERR_INVALID_ARG, "buffer 2 (id 5): id already used by buffer 0");
  expect_fail(NULL, 2, GRT_ERR_INVALID_ARG, "bufs is NULL");
}

static void test_bad_pointers(void **state) {
  (void)state;
  grt_plan_buffer b[] = {B(1, 0, 4, 8)};
  grt_plan_result r;
  uint64_t off[1] = {SENTINEL};
  char err[128];
  assert_int_equal(grt_plan_solve(b, 1, NULL, NULL, &r, err, sizeof err), GRT_ERR_INVALID_ARG);
  assert_string_equal(err, "offsets is NULL");
  assert_int_equal(grt_plan_solve(b, 1, NULL, off, NULL, err, sizeof err), GRT_ERR_INVALID_ARG);
  assert_string_equal(err, "out is NULL");
  assert_true(off[0] == SENTINEL);
  assert_int_equal(grt_plan_peak_live(b, 1, NULL, NULL, err, sizeof err), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt_plan_check(b, 1, NULL, NULL, err, sizeof err), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt_plan_buffers_from_trace(NULL, NULL, NULL, err, sizeof err), GRT_ERR_INVALID_ARG);
  /* err may be NULL, and a 1-byte err is only terminated */
  assert_int_equal(grt_plan_solve(b, 1, NULL, NULL, &r, NULL, 0), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt_plan_solve(b, 1, NULL, NULL, &r, err, 1), GRT_ERR_INVALID_ARG);
  assert_string_equal(err, "");
}

static void test_check_rejects(void **state) {
  (void)state;
  grt_plan_buffer b[] = {B(10, 0, 4, 8), B(11, 2, 6, 8), {12, 5, 9, 4, 4}};
  char err[256];
  uint64_t heap = SENTINEL;
  uint64_t overlap[] = {0, 4, 0};
  assert_int_equal(grt_plan_check(b, 3, overlap, &heap, err, sizeof err), GRT_ERR_INVALID_ARG);
  assert_string_equal(err, "buffer 1 (id 11): overlaps buffer 0 (id 10) at step 2: bytes [4, 12) and [0, 8)");
  assert_true(heap == SENTINEL);
  uint64_t misaligned[] = {0, 8, 2};
  assert_int_equal(grt_plan_check(b, 3, misaligned, &heap, err, sizeof err), GRT_ERR_INVALID_ARG);
  assert_string_equal(err, "buffer 2 (id 12): offset 2 is not a multiple of its alignment 4");
  uint64_t wraps[] = {0, 8, UINT64_MAX - 3};
  assert_int_equal(grt_plan_check(b, 3, wraps, &heap, err, sizeof err), GRT_ERR_INVALID_ARG);
  assert_non_null(strstr(err, "overflows"));
  uint64_t good[] = {0, 8, 0}; /* id 12 reuses id 10's bytes: their lifetimes do not meet */
  assert_int_equal(grt_plan_check(b, 3, good, &heap, err, sizeof err), GRT_OK);
  assert_int_equal(heap, 16);
}

/* ---- randomized ---- */

static size_t random_instance(grt__rng *rng, grt_plan_buffer *b, size_t max_n) {
  size_t n = 1 + (size_t)grt__rng_below(rng, max_n);
  uint64_t horizon = 2 + grt__rng_below(rng, 40);
  for (size_t i = 0; i < n; i++) {
    uint64_t lo = grt__rng_below(rng, horizon), len = 1 + grt__rng_below(rng, horizon / 2 + 1);
    uint64_t align = grt__rng_below(rng, 3) ? 0 : (uint64_t)1 << grt__rng_below(rng, 6);
    b[i] = (grt_plan_buffer){1000 + i * 7, lo, lo + len, 1 + grt__rng_below(rng, grt__rng_below(rng, 2) ? 16 : 5000),
                             align};
  }
  return n;
}

static void test_random_plans_valid(void **state) {
  (void)state;
  grt__rng rng;
  grt__rng_seed(&rng, 7);
  grt_plan_buffer b[80];
  uint64_t off[80], again[80];
  grt_plan_config cfg;
  grt_plan_config_default(&cfg);
  cfg.effort = 300;
  for (int round = 0; round < 200; round++) {
    size_t n = random_instance(&rng, b, 80);
    grt_plan_result r, r2;
    char err[256];
    cfg.seed = (uint64_t)round;
    assert_int_equal(grt_plan_solve(b, n, &cfg, off, &r, err, sizeof err), GRT_OK);
    uint64_t heap;
    if (!pairwise_valid(b, n, off, &heap)) fail_msg("round %d: invalid plan", round);
    assert_int_equal(heap, r.heap);
    assert_int_equal(r.peak_live, brute_peak(b, n));
    assert_true(r.heap >= r.peak_live);
    assert_int_equal(r.optimal, r.heap == r.peak_live);
    assert_false(r.budget_hit);
    /* deterministic: the same input, config and seed, the same plan */
    assert_int_equal(grt_plan_solve(b, n, &cfg, again, &r2, err, sizeof err), GRT_OK);
    assert_memory_equal(off, again, n * sizeof *off);
  }
}

/* grt_plan_check against the pairwise checker on random placements, valid or not. */
static void test_check_matches_pairwise(void **state) {
  (void)state;
  grt__rng rng;
  grt__rng_seed(&rng, 11);
  grt_plan_buffer b[60];
  uint64_t off[60];
  int valid = 0, invalid = 0;
  for (int round = 0; round < 3000; round++) {
    size_t n = random_instance(&rng, b, 60);
    for (size_t i = 0; i < n; i++) {
      uint64_t a = b[i].alignment ? b[i].alignment : 1;
      off[i] = grt__rng_below(&rng, 3 * n + 1) * 16 * a; /* aligned, sparse enough to be valid at times */
    }
    if (round % 10 == 0) off[grt__rng_below(&rng, n)] |= 1; /* sometimes misaligned */
    uint64_t want_heap = 0, heap = 0;
    bool want = pairwise_valid(b, n, off, &want_heap);
    grt_status st = grt_plan_check(b, n, off, &heap, NULL, 0);
    assert_int_equal(st == GRT_OK, want);
    if (want)
      assert_int_equal(heap, want_heap), valid++;
    else
      invalid++;
  }
  assert_true(valid > 100 && invalid > 100); /* both outcomes were exercised */
}

static void test_effort_zero_and_budget(void **state) {
  (void)state;
  grt__rng rng;
  grt__rng_seed(&rng, 3);
  grt_plan_buffer b[50];
  uint64_t off[50];
  size_t n = random_instance(&rng, b, 50);
  grt_plan_config cfg;
  grt_plan_config_default(&cfg);
  cfg.effort = 0;
  grt_plan_result r;
  assert_int_equal(grt_plan_solve(b, n, &cfg, off, &r, NULL, 0), GRT_OK);
  assert_true(pairwise_valid(b, n, off, NULL));
  cfg.effort = 1000;
  cfg.budget_ms = 60000; /* a cap far beyond the effort's time: the result is the effort's */
  grt_plan_result r2;
  uint64_t off2[50];
  assert_int_equal(grt_plan_solve(b, n, &cfg, off2, &r2, NULL, 0), GRT_OK);
  assert_true(pairwise_valid(b, n, off2, NULL));
  assert_true(r2.heap <= r.heap);
}

/* ---- buffers from a trace ---- */

static void test_from_trace(void **state) {
  (void)state;
  static const char csv[] = "id,lower,upper,size\n0,0,2,10\n1,2,4,20\n2,1,3,5\n";
  grt_trace *t = NULL;
  grt_trace_error e;
  assert_int_equal(grt_trace_load_buffer(csv, sizeof csv - 1, "t.csv", NULL, &t, &e), GRT_OK);
  grt_plan_buffer *b = NULL;
  size_t n = 0;
  assert_int_equal(grt_plan_buffers_from_trace(t, &b, &n, NULL, 0), GRT_OK);
  assert_int_equal(grt_trace_destroy(t), GRT_OK);
  assert_int_equal(n, 3);
  /* the file's overlaps: 0 and 1 never live together, 2 meets both */
  size_t i0 = 0, i1 = 0, i2 = 0;
  for (size_t i = 0; i < n; i++) {
    if (b[i].size == 10) i0 = i;
    if (b[i].size == 20) i1 = i;
    if (b[i].size == 5) i2 = i;
  }
  assert_false(lifetimes_meet(&b[i0], &b[i1]));
  assert_true(lifetimes_meet(&b[i0], &b[i2]));
  assert_true(lifetimes_meet(&b[i1], &b[i2]));
  uint64_t off[3];
  grt_plan_result r = solve_ok(b, n, off);
  assert_int_equal(r.peak_live, 25);
  assert_int_equal(r.heap, 25);
  grt_plan_buffers_free(b);
  grt_plan_buffers_free(NULL);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_empty_and_single),
      cmocka_unit_test(test_half_open_lifetimes_share),
      cmocka_unit_test(test_known_optimal),
      cmocka_unit_test(test_alignment),
      cmocka_unit_test(test_bad_buffers),
      cmocka_unit_test(test_bad_pointers),
      cmocka_unit_test(test_check_rejects),
      cmocka_unit_test(test_random_plans_valid),
      cmocka_unit_test(test_check_matches_pairwise),
      cmocka_unit_test(test_effort_zero_and_budget),
      cmocka_unit_test(test_from_trace),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
