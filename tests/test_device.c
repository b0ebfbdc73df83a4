/* test_device.c — the simulated driver: first fit, coalescing, counters, errors. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "gpurt/device.h"

static grt_device *make(uint64_t capacity) {
  grt_device_config cfg;
  grt_device_config_default(&cfg);
  cfg.capacity = capacity;
  grt_device *dev = NULL;
  assert_int_equal(grt_device_create(&cfg, &dev), GRT_OK);
  return dev;
}

/* First fit picks the lowest hole that fits; frees coalesce both ways. */
static void test_first_fit_and_coalesce(void **state) {
  (void)state;
  grt_device *dev = make(64 * GRT_MiB);
  grt_devptr a, b, c, d;
  assert_int_equal(grt_device_malloc(dev, 16 * GRT_MiB, &a), GRT_OK);
  assert_int_equal(grt_device_malloc(dev, 16 * GRT_MiB, &b), GRT_OK);
  assert_int_equal(grt_device_malloc(dev, 16 * GRT_MiB, &c), GRT_OK);
  assert_int_equal(b, a + 16 * GRT_MiB);
  assert_int_equal(c, b + 16 * GRT_MiB);
  assert_int_equal(grt_device_free(dev, a), GRT_OK);
  assert_int_equal(grt_device_free(dev, c), GRT_OK);
  grt_device_stats s;
  assert_int_equal(grt_device_get_stats(dev, &s), GRT_OK);
  assert_int_equal(s.holes, 2); /* [a,16M) and [c, end) merged with the tail */
  assert_int_equal(s.largest_hole, 32 * GRT_MiB);
  /* 8 MiB goes to the first hole (a), not the larger later one. */
  assert_int_equal(grt_device_malloc(dev, 8 * GRT_MiB, &d), GRT_OK);
  assert_int_equal(d, a);
  assert_int_equal(grt_device_free(dev, d), GRT_OK);
  assert_int_equal(grt_device_free(dev, b), GRT_OK); /* a-hole, b, c-hole merge into one */
  assert_int_equal(grt_device_get_stats(dev, &s), GRT_OK);
  assert_int_equal(s.holes, 1);
  assert_int_equal(s.largest_hole, 64 * GRT_MiB);
  assert_int_equal(s.malloc_calls, 4);
  assert_int_equal(s.free_calls, 4);
  assert_int_equal(s.syncs, 4);
  assert_int_equal(s.peak_bytes_in_use, 48 * GRT_MiB);
  assert_int_equal(grt_device_destroy(dev), GRT_OK);
}

static void test_errors_leave_state_intact(void **state) {
  (void)state;
  grt_device *dev = make(8 * GRT_MiB);
  grt_devptr a, x;
  assert_int_equal(grt_device_malloc(dev, 0, &x), GRT_ERR_SIZE);
  assert_int_equal(grt_device_malloc(dev, 9 * GRT_MiB, &x), GRT_ERR_SIZE);
  assert_int_equal(grt_device_malloc(dev, 6 * GRT_MiB, &a), GRT_OK);
  assert_int_equal(grt_device_malloc(dev, 4 * GRT_MiB, &x), GRT_ERR_OOM);
  assert_int_equal(grt_device_free(dev, a + 512), GRT_ERR_INTERIOR_POINTER);
  assert_int_equal(grt_device_free(dev, 12345), GRT_ERR_UNKNOWN_POINTER);
  assert_int_equal(grt_device_destroy(dev), GRT_ERR_BUSY);
  assert_int_equal(grt_device_free(dev, a), GRT_OK);
  assert_int_equal(grt_device_free(dev, a), GRT_ERR_DOUBLE_FREE);
  grt_device_stats s;
  assert_int_equal(grt_device_get_stats(dev, &s), GRT_OK);
  assert_int_equal(s.failed_mallocs, 1);
  assert_int_equal(s.free_calls, 1);
  assert_int_equal(s.bytes_in_use, 0);
  assert_int_equal(s.largest_hole, 8 * GRT_MiB);
  assert_int_equal(grt_device_destroy(dev), GRT_OK);
  assert_int_equal(grt_device_destroy(NULL), GRT_OK);
}

static void test_malloc_at_and_fault_injection(void **state) {
  (void)state;
  grt_device *dev = make(64 * GRT_MiB);
  grt_device_config cfg;
  grt_device_config_default(&cfg);
  grt_devptr base = cfg.base_address, x;
  assert_int_equal(grt_device_malloc_at(dev, base + 20 * GRT_MiB, 4 * GRT_MiB), GRT_OK);
  assert_int_equal(grt_device_malloc_at(dev, base + 22 * GRT_MiB, 4 * GRT_MiB), GRT_ERR_OOM);
  assert_int_equal(grt_device_malloc(dev, 24 * GRT_MiB, &x), GRT_OK);
  assert_int_equal(x, base + 24 * GRT_MiB); /* the 20 MiB hole in front is too small */
  assert_int_equal(grt_device_inject_malloc_failure(dev, 2), GRT_OK);
  grt_devptr y;
  assert_int_equal(grt_device_malloc(dev, GRT_MiB, &y), GRT_OK);
  assert_int_equal(grt_device_malloc(dev, GRT_MiB, &x), GRT_ERR_FAULT_INJECTED);
  assert_int_equal(grt_device_free(dev, y), GRT_OK);
  grt_device_stats s;
  assert_int_equal(grt_device_get_stats(dev, &s), GRT_OK);
  assert_int_equal(s.segments, 2);
  assert_int_equal(grt_device_free(dev, base + 20 * GRT_MiB), GRT_OK);
  assert_int_equal(grt_device_free(dev, base + 24 * GRT_MiB), GRT_OK);
  assert_int_equal(grt_device_destroy(dev), GRT_OK);
}

static void test_host_backing(void **state) {
  (void)state;
  grt_device_config cfg;
  grt_device_config_default(&cfg);
  cfg.capacity = 4 * GRT_MiB;
  cfg.host_backing = 1;
  grt_device *dev;
  assert_int_equal(grt_device_create(&cfg, &dev), GRT_OK);
  grt_devptr a;
  void *p;
  assert_int_equal(grt_device_malloc(dev, GRT_MiB, &a), GRT_OK);
  assert_int_equal(grt_device_host_ptr(dev, a, GRT_MiB, &p), GRT_OK);
  ((unsigned char *)p)[GRT_MiB - 1] = 7;
  assert_int_equal(grt_device_host_ptr(dev, a + GRT_MiB, 1, &p), GRT_ERR_UNKNOWN_POINTER);
  assert_int_equal(grt_device_free(dev, a), GRT_OK);
  assert_int_equal(grt_device_destroy(dev), GRT_OK);
}

/* Reserve, map page by page (physical memory from the same capacity), unmap, release. */
static void test_virtual_memory(void **state) {
  (void)state;
  grt_device_config cfg;
  grt_device_config_default(&cfg);
  cfg.capacity = 16 * GRT_MiB;
  cfg.host_backing = 1;
  grt_device *dev;
  assert_int_equal(grt_device_create(&cfg, &dev), GRT_OK);
  uint64_t g;
  assert_int_equal(grt_device_vmm_granularity(dev, &g), GRT_OK);
  assert_int_equal(g, 2 * GRT_MiB);
  grt_devptr va, seg;
  assert_int_equal(grt_device_reserve(dev, 64 * GRT_MiB, &va), GRT_OK); /* more than capacity: VA only */
  assert_int_equal(grt_device_malloc(dev, 10 * GRT_MiB, &seg), GRT_OK);
  assert_int_equal(grt_device_map(dev, va + 2 * g, 4 * GRT_MiB), GRT_OK);
  assert_int_equal(grt_device_map(dev, va + 2 * g, 2 * GRT_MiB), GRT_ERR_INVALID_ARG); /* mapped already */
  assert_int_equal(grt_device_map(dev, va + 8 * g, 4 * GRT_MiB), GRT_ERR_OOM);         /* 2 MiB left */
  grt_device_stats s;
  assert_int_equal(grt_device_get_stats(dev, &s), GRT_OK);
  assert_int_equal(s.bytes_in_use, 14 * GRT_MiB);
  assert_int_equal(s.mapped_bytes, 4 * GRT_MiB);
  assert_int_equal(s.segments, 1);
  assert_int_equal(s.map_calls, 1);
  void *p;
  assert_int_equal(grt_device_host_ptr(dev, va + 2 * g + 100, 1000, &p), GRT_OK);
  assert_int_equal(grt_device_host_ptr(dev, va, 1, &p), GRT_ERR_UNKNOWN_POINTER); /* unmapped page */
  assert_int_equal(grt_device_release(dev, va), GRT_ERR_BUSY);
  assert_int_equal(grt_device_unmap(dev, va + 2 * g, 2 * GRT_MiB), GRT_ERR_INVALID_ARG); /* half a mapping */
  assert_int_equal(grt_device_unmap(dev, va + 3 * g, 2 * GRT_MiB), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt_device_unmap(dev, va + 2 * g, 4 * GRT_MiB), GRT_OK);
  assert_int_equal(grt_device_unmap(dev, va + 2 * g, 2 * GRT_MiB), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt_device_destroy(dev), GRT_ERR_BUSY);
  assert_int_equal(grt_device_release(dev, va), GRT_OK);
  assert_int_equal(grt_device_free(dev, seg), GRT_OK);
  assert_int_equal(grt_device_get_stats(dev, &s), GRT_OK);
  assert_int_equal(s.bytes_in_use, 0);
  assert_int_equal(s.syncs, 2);
  assert_int_equal(grt_device_destroy(dev), GRT_OK);
}

/* A mapped page's physical address is not a segment: free and segment_size
 * refuse it (found by the differential test: free used to return it to the
 * holes while the reservation still mapped it). */
static void test_mapped_page_is_not_a_segment(void **state) {
  (void)state;
  grt_device *dev = make(8 * GRT_MiB);
  grt_devptr va;
  uint64_t size;
  assert_int_equal(grt_device_reserve(dev, 4 * GRT_MiB, &va), GRT_OK);
  assert_int_equal(grt_device_map(dev, va, 2 * GRT_MiB), GRT_OK);
  grt_devptr page = 0x7f0000000000ULL; /* first fit: the first physical page */
  assert_int_equal(grt_device_free(dev, page), GRT_ERR_UNKNOWN_POINTER);
  assert_int_equal(grt_device_segment_size(dev, page, &size), GRT_ERR_UNKNOWN_POINTER);
  grt_device_stats s;
  assert_int_equal(grt_device_get_stats(dev, &s), GRT_OK);
  assert_int_equal(s.bytes_in_use, 2 * GRT_MiB);
  assert_int_equal(s.segments, 0);
  assert_int_equal(grt_device_unmap(dev, va, 2 * GRT_MiB), GRT_OK);
  assert_int_equal(grt_device_free(dev, page), GRT_ERR_DOUBLE_FREE); /* returned by the unmap */
  assert_int_equal(grt_device_release(dev, va), GRT_OK);
  assert_int_equal(grt_device_destroy(dev), GRT_OK);
}

static void test_status_strings(void **state) {
  (void)state;
  assert_string_equal(grt_status_name(GRT_ERR_OOM), "GRT_ERR_OOM");
  assert_string_equal(grt_status_str(GRT_OK), "success");
  assert_non_null(grt_status_str((grt_status)999));
  char buf[32];
  assert_string_equal(grt_format_bytes(20 * GRT_MiB, buf, sizeof buf), "20.00 MiB");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_first_fit_and_coalesce),
      cmocka_unit_test(test_errors_leave_state_intact),
      cmocka_unit_test(test_malloc_at_and_fault_injection),
      cmocka_unit_test(test_host_backing),
      cmocka_unit_test(test_virtual_memory),
      cmocka_unit_test(test_mapped_page_is_not_a_segment),
      cmocka_unit_test(test_status_strings),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
