/* test_caching_fraction.c — per_process_memory_fraction at its exact
 * boundary. PyTorch's DeviceCachingAllocator refuses a cudaMalloc when
 * total_allocated_memory + size > allowed_memory_maximum (fraction x the
 * device's total memory): a segment that brings reserved memory to exactly
 * the allowed amount is made, anything beyond it is an OOM of the caller
 * (after the cache was flushed), even with the device itself far from full. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <cmocka.h>

#include "alloc_fixture.h"

static fixture quarter_of(uint64_t capacity) {
  grt_alloc_config c;
  grt_alloc_config_default(&c);
  char err[128];
  /* 0.25: exact in binary, so allowed memory is exactly a quarter */
  assert_int_equal(grt_alloc_config_parse(&c, "per_process_memory_fraction:0.25", err, sizeof err), GRT_OK);
  return make_fixture("caching", capacity, &c);
}

/* 80 MiB device, 20 MiB allowed: a 5 MiB request's 20 MiB segment fills it
 * exactly; one more small segment (2 MiB) does not fit. */
static void test_segment_filling_the_fraction_fits(void **state) {
  (void)state;
  fixture fx = quarter_of(80 * MiB);
  grt_devptr p = must_malloc(fx.a, 5 * MiB, 0);
  grt_alloc_stats s = stats_of(fx.a);
  assert_int_equal(s.reserved_bytes[GRT_STAT_ALL].current, 20 * MiB);
  assert_int_equal(s.num_ooms, 0);
  grt_devptr q;
  assert_int_equal(grt_alloc_malloc(fx.a, 1024, 0, &q), GRT_ERR_OOM);
  s = stats_of(fx.a);
  assert_int_equal(s.num_ooms, 1);
  assert_int_equal(s.reserved_bytes[GRT_STAT_ALL].current, 20 * MiB);
  assert_int_equal(dev_stats(fx.dev).free_bytes, 60 * MiB); /* the device had room: the fraction said no */
  assert_int_equal(grt_alloc_free(fx.a, p), GRT_OK);
  drop_fixture(&fx);
}

/* A single segment of exactly the allowed memory, and one 2 MiB larger. */
static void test_largest_segment_at_the_fraction(void **state) {
  (void)state;
  fixture fx = quarter_of(160 * MiB); /* 40 MiB allowed */
  grt_devptr p = must_malloc(fx.a, 40 * MiB, 0);
  assert_int_equal(stats_of(fx.a).reserved_bytes[GRT_STAT_ALL].current, 40 * MiB);
  assert_int_equal(grt_alloc_free(fx.a, p), GRT_OK);
  grt_devptr q;
  assert_int_equal(grt_alloc_malloc(fx.a, 40 * MiB + 512, 0, &q), GRT_ERR_OOM); /* a 42 MiB segment */
  grt_alloc_stats s = stats_of(fx.a);
  assert_int_equal(s.num_ooms, 1);
  assert_int_equal(s.num_device_free, 1); /* the OOM path flushed the cached 40 MiB segment first */
  assert_int_equal(s.reserved_bytes[GRT_STAT_ALL].current, 0);
  drop_fixture(&fx);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_segment_filling_the_fraction_fits),
      cmocka_unit_test(test_largest_segment_at_the_fraction),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
