/* test_cuda_fake_vmm.c — virtual memory on the CUDA backend against the fake
 * modern driver (tests/fake_cuda): reserve / map / unmap / release and the
 * ranges gpurt refuses before the driver sees them, mapped memory that copies
 * reach, OOM from cuMemCreate, and the caching allocator's expandable
 * segments on top, down to every driver object given back. Skips (77) unless
 * GRT_CUDA_LIBRARY names the modern fake. */
#include "cuda_fake_fixture.h"

#define G (2 * MiB) /* the fake's granularity */

static void test_primitives(void **state) {
  (void)state;
  fk_census empty = fk_count();
  grt_device *dev = fk_open();
  uint64_t g = 0;
  assert_int_equal(grt_device_vmm_granularity(dev, &g), GRT_OK);
  assert_int_equal(g, G);
  grt_devptr va = 0, other = 0;
  assert_int_equal(grt_device_map(dev, 64 * G, G), GRT_ERR_INVALID_ARG); /* nothing reserved yet */
  assert_int_equal(grt_device_reserve(dev, 4 * G, &va), GRT_OK);
  assert_int_equal(va % G, 0);
  assert_int_equal(fk.live("reservations"), empty.reservations + 1);
  assert_int_equal(grt_device_reserve(dev, G + 4096, &other), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt_device_reserve(dev, 0, &other), GRT_ERR_SIZE);
  fk_assert_no_context();
  assert_int_equal(grt_device_map(dev, va, G), GRT_OK);
  assert_int_equal(grt_device_map(dev, va + G, 2 * G), GRT_OK);
  grt_device_stats ds = dev_stats(dev);
  assert_int_equal(ds.bytes_in_use, 3 * G);
  assert_int_equal(ds.segments, 2);
  assert_int_equal(ds.map_calls, 2);
  assert_int_equal(fk.live("mappings"), 2);
  assert_int_equal(fk.live("handles"), 2);
  assert_int_equal(fk.live("bytes"), (long)(3 * G));
  /* the pieces are device memory: a fill spanning both lands */
  grt_cuda_stream *s = NULL;
  assert_int_equal(grt_cuda_stream_create(dev, 0, 0, &s), GRT_OK);
  static unsigned char back[8192];
  assert_int_equal(grt_cuda_memset_async(s, va + G - 4096, 0x5a, sizeof back), GRT_OK);
  assert_int_equal(grt_cuda_memcpy_dtoh_async(s, back, va + G - 4096, sizeof back), GRT_OK);
  assert_int_equal(grt_cuda_stream_synchronize(s), GRT_OK);
  for (size_t i = 0; i < sizeof back; i++) assert_int_equal(back[i], 0x5a);
  /* the unmapped tail of the reservation is not */
  assert_int_equal(grt_cuda_memset_async(s, va + 3 * G, 0, 16), GRT_ERR_INVALID_ARG);
  /* refused before any driver call: overlaps, outside the reservation, partial pieces */
  unsigned long creates = fk.calls("cuMemCreate"), unmaps = fk.calls("cuMemUnmap");
  assert_int_equal(grt_device_map(dev, va, G), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt_device_map(dev, va + 2 * G, 2 * G), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt_device_map(dev, va + 3 * G, 2 * G), GRT_ERR_INVALID_ARG); /* runs past the end */
  assert_int_equal(grt_device_map(dev, va + 64 * G, G), GRT_ERR_INVALID_ARG);    /* not reserved */
  assert_int_equal(grt_device_unmap(dev, va + G, G), GRT_ERR_INVALID_ARG);       /* half a piece */
  assert_int_equal(grt_device_unmap(dev, va, 4 * G), GRT_ERR_INVALID_ARG);       /* includes unmapped */
  assert_int_equal(grt_device_unmap(dev, va + 3 * G, G), GRT_ERR_INVALID_ARG);   /* nothing mapped */
  assert_int_equal(grt_device_unmap(dev, va + 2 * G, G), GRT_ERR_INVALID_ARG);   /* a piece's second half */
  const grt_devptr top = UINT64_MAX - G + 1;                                      /* ranges that wrap around */
  assert_int_equal(grt_device_map(dev, top, 2 * G), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt_device_unmap(dev, top, 2 * G), GRT_ERR_INVALID_ARG);
  assert_int_equal(fk.calls("cuMemCreate"), creates);
  assert_int_equal(fk.calls("cuMemUnmap"), unmaps);
  assert_int_equal(grt_device_release(dev, va), GRT_ERR_BUSY);
  assert_int_equal(grt_device_release(dev, va + G), GRT_ERR_UNKNOWN_POINTER);
  assert_int_equal(grt_cuda_stream_destroy(s), GRT_OK);
  assert_int_equal(grt_device_destroy(dev), GRT_ERR_BUSY);
  /* one unmap over both pieces */
  assert_int_equal(grt_device_unmap(dev, va, 3 * G), GRT_OK);
  assert_int_equal(fk.calls("cuMemUnmap"), unmaps + 2);
  ds = dev_stats(dev);
  assert_int_equal(ds.bytes_in_use, 0);
  assert_int_equal(ds.unmap_calls, 1);
  assert_int_equal(fk.live("mappings"), 0);
  assert_int_equal(fk.live("handles"), 0);
  assert_int_equal(grt_device_release(dev, va), GRT_OK);
  assert_int_equal(grt_device_release(dev, va), GRT_ERR_UNKNOWN_POINTER);
  assert_int_equal(grt_device_destroy(dev), GRT_OK);
  fk_assert_census(empty);
}

/* Pieces and cuMemAlloc share the device's memory; running out is GRT_ERR_OOM. */
/* A driver reporting a granularity of 0 makes virtual memory unsupported
 * with a message; nothing divides by it. */
static void test_zero_granularity(void **state) {
  (void)state;
  assert_non_null(fk.set_granularity);
  grt_device *dev = fk_open();
  fk.set_granularity(0);
  uint64_t g = 7;
  grt_devptr va = 0;
  assert_int_equal(grt_device_vmm_granularity(dev, &g), GRT_ERR_UNSUPPORTED);
  assert_int_equal(g, 7);
  fk_error_contains(dev, "granularity of 0");
  assert_int_equal(grt_device_reserve(dev, 4 * G, &va), GRT_ERR_UNSUPPORTED);
  assert_int_equal(grt_device_map(dev, 64 * G, G), GRT_ERR_UNSUPPORTED);
  assert_int_equal(grt_device_unmap(dev, 64 * G, G), GRT_ERR_UNSUPPORTED);
  assert_int_equal(fk.live("reservations"), 0);
  fk.set_granularity(-1);
  assert_int_equal(grt_device_reserve(dev, 4 * G, &va), GRT_OK);
  assert_int_equal(grt_device_release(dev, va), GRT_OK);
  assert_int_equal(grt_device_destroy(dev), GRT_OK);
}

static void test_out_of_memory(void **state) {
  (void)state;
  fk_census empty = fk_count();
  grt_device *dev = fk_open();
  grt_devptr va = 0, p = 0;
  assert_int_equal(grt_device_reserve(dev, 64 * G, &va), GRT_OK);
  assert_int_equal(grt_device_map(dev, va, 30 * G), GRT_OK);
  assert_int_equal(grt_device_malloc(dev, 3 * G, &p), GRT_ERR_OOM);
  fk_error_contains(dev, "cuMemAlloc: CUDA_ERROR_OUT_OF_MEMORY");
  assert_int_equal(grt_device_malloc(dev, 3 * MiB, &p), GRT_OK);
  assert_int_equal(grt_device_map(dev, va + 30 * G, G), GRT_ERR_OOM);
  fk_error_contains(dev, "cuMemCreate: CUDA_ERROR_OUT_OF_MEMORY (2: out of memory)");
  assert_int_equal(fk.live("handles"), 1);
  assert_int_equal(dev_stats(dev).failed_mallocs, 2);
  assert_int_equal(grt_device_free(dev, p), GRT_OK);
  assert_int_equal(grt_device_map(dev, va + 30 * G, G), GRT_OK);
  uint64_t free_b = 1, total = 0;
  assert_int_equal(grt_device_mem_get_info(dev, &free_b, &total), GRT_OK);
  assert_int_equal(free_b, 64 * MiB - 31 * G);
  assert_int_equal(total, 64 * MiB);
  assert_int_equal(grt_device_unmap(dev, va + 30 * G, G), GRT_OK);
  assert_int_equal(grt_device_unmap(dev, va, 30 * G), GRT_OK);
  assert_int_equal(grt_device_release(dev, va), GRT_OK);
  assert_int_equal(grt_device_destroy(dev), GRT_OK);
  fk_assert_census(empty);
}

/* The caching allocator with expandable segments: reservations and pages come
 * from the driver, data written into a block reads back, empty_cache and
 * destroy give everything back. */
static void test_expandable_segments(void **state) {
  (void)state;
  fk_census empty = fk_count();
  grt_device *dev = fk_open();
  grt_alloc_config cfg;
  grt_alloc_config_default(&cfg);
  assert_int_equal(grt_alloc_config_parse(&cfg, "expandable_segments:True", NULL, 0), GRT_OK);
  grt_allocator *a = NULL;
  assert_int_equal(grt_alloc_create("caching", dev, &cfg, &a), GRT_OK);
  grt_devptr big = must_malloc(a, 3 * MiB, 0);
  grt_devptr big2 = must_malloc(a, 5 * MiB, 0);
  grt_devptr small = must_malloc(a, 1000, 0);
  assert_int_equal(fk.live("reservations"), 2); /* one per pool */
  assert_int_equal(fk.live("mappings"), 2);     /* one 20 MiB page, one 2 MiB page */
  assert_int_equal(fk.live("bytes"), (long)(22 * MiB));
  assert_int_equal(big2, big + 3 * MiB);
  grt_alloc_stats st = stats_of(a);
  assert_int_equal(st.num_device_alloc, 2);
  assert_int_equal(st.reserved_bytes[GRT_STAT_ALL].current, 22 * MiB);
  grt_cuda_stream *s = NULL;
  assert_int_equal(grt_cuda_stream_legacy(dev, &s), GRT_OK);
  static unsigned char back[4096];
  assert_int_equal(grt_cuda_memset_async(s, big2, 0x77, 5 * MiB), GRT_OK);
  assert_int_equal(grt_cuda_memcpy_dtoh_async(s, back, big2 + 5 * MiB - sizeof back, sizeof back), GRT_OK);
  assert_int_equal(grt_cuda_stream_synchronize(s), GRT_OK);
  assert_int_equal(back[0], 0x77);
  assert_int_equal(back[sizeof back - 1], 0x77);
  assert_int_equal(grt_cuda_stream_destroy(s), GRT_OK);
  /* growing: 45 MiB more needs three more pages in total; 20 MiB beyond that does not fit */
  grt_devptr grown = must_malloc(a, 45 * MiB, 0);
  assert_int_equal(fk.live("mappings"), 4);
  grt_devptr x = 0;
  assert_int_equal(grt_alloc_malloc(a, 20 * MiB, 0, &x), GRT_ERR_OOM);
  assert_non_null(strstr(grt_alloc_last_error(a), "out of memory"));
  assert_consistent(a);
  assert_int_equal(grt_alloc_free(a, grown), GRT_OK);
  assert_int_equal(grt_alloc_free(a, big), GRT_OK);
  assert_int_equal(grt_alloc_free(a, big2), GRT_OK);
  assert_int_equal(grt_alloc_free(a, small), GRT_OK);
  assert_int_equal(grt_alloc_empty_cache(a), GRT_OK);
  assert_int_equal(fk.live("mappings"), 0);
  assert_int_equal(fk.live("reservations"), 0);
  st = stats_of(a);
  assert_int_equal(st.reserved_bytes[GRT_STAT_ALL].current, 0);
  /* destroy with a block still mapped gives it back too */
  (void)must_malloc(a, 7 * MiB, 0);
  assert_int_equal(fk.live("mappings"), 1);
  assert_consistent(a);
  assert_int_equal(grt_alloc_destroy(a), GRT_OK);
  assert_int_equal(grt_device_destroy(dev), GRT_OK);
  fk_assert_census(empty);
}

int main(void) {
  int ready = fk_ready("test_cuda_fake_vmm", "modern");
  if (ready != 1) return fk_not_ready(ready);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_primitives),
      cmocka_unit_test(test_zero_granularity),
      cmocka_unit_test(test_out_of_memory),
      cmocka_unit_test(test_expandable_segments),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
