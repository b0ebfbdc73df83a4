/* test_caching_streams.c — per-stream state stays small: 50,000 streams that
 * each cache one free block cost the caching allocator a few hundred bytes of
 * host memory apiece, not a class table each (they used to cost 620 MB), and
 * the model stays exact over them (stream ids at the ends of the range too). */
#include <malloc.h>
#include <stdlib.h>

#include "alloc_fixture.h"

#if defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define HEAP_FROM_SANITIZER 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define HEAP_FROM_SANITIZER 1
#endif
#ifdef HEAP_FROM_SANITIZER
/* the sanitizer runtimes' own count (declared here: gcc ships no header for it) */
size_t __sanitizer_get_current_allocated_bytes(void);
static size_t heap_in_use(void) { return __sanitizer_get_current_allocated_bytes(); }
#else
static size_t heap_in_use(void) {
  struct mallinfo2 m = mallinfo2();
  return m.uordblks + m.hblkhd;
}
#endif

#define STREAMS 50000u

static grt_stream_id stream_of(unsigned i) {
  if (i == 0) return UINT64_MAX;
  if (i == 1) return UINT64_MAX - 1;
  return (grt_stream_id)i * 0x9e3779b97f4a7c15ULL; /* scattered over the whole range */
}

static void test_many_streams_small_state(void **state) {
  (void)state;
  fixture fx = make_fixture("caching", (uint64_t)1 << 40, NULL);
  size_t before = heap_in_use();
  for (unsigned i = 0; i < STREAMS; i++) {
    grt_devptr p;
    assert_int_equal(grt_alloc_malloc(fx.a, 4096, stream_of(i), &p), GRT_OK);
    assert_int_equal(grt_alloc_free(fx.a, p), GRT_OK);
  }
  size_t per_stream = (heap_in_use() - before) / STREAMS;
  printf("host memory per stream with one cached segment: %zu bytes\n", per_stream);
  assert_true(per_stream < 1024);
  grt_alloc_stats s = stats_of(fx.a);
  assert_int_equal(s.segment[GRT_STAT_ALL].current, STREAMS); /* small segments are never shared across streams */
  assert_int_equal(s.reserved_bytes[GRT_STAT_ALL].current, (uint64_t)STREAMS * 2 * MiB);
  assert_int_equal(s.allocated_bytes[GRT_STAT_ALL].current, 0);
  assert_consistent(fx.a);
  /* each stream finds its own cached block again: no new segment */
  for (unsigned i = 0; i < STREAMS; i += 997) {
    grt_devptr p;
    assert_int_equal(grt_alloc_malloc(fx.a, 8192, stream_of(i), &p), GRT_OK);
    assert_int_equal(grt_alloc_free(fx.a, p), GRT_OK);
  }
  assert_int_equal(stats_of(fx.a).segment[GRT_STAT_ALL].current, STREAMS);
  assert_int_equal(grt_alloc_empty_cache(fx.a), GRT_OK);
  s = stats_of(fx.a);
  assert_int_equal(s.segment[GRT_STAT_ALL].current, 0);
  assert_int_equal(s.num_device_free, STREAMS);
  drop_fixture(&fx);
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_many_streams_small_state)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
