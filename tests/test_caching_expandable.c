/* test_caching_expandable.c — expandable segments: one reservation per
 * (stream, pool), pages mapped on demand at the lowest address, free pages
 * unmapped by empty_cache, PyTorch's statistics. */
#include <malloc.h>
#include <stdlib.h>

#include "alloc/import_expandable.h"
#include "alloc_fixture.h"

static fixture make_expandable(uint64_t capacity) {
  grt_alloc_config c;
  grt_alloc_config_default(&c);
  char err[64];
  assert_int_equal(grt_alloc_config_parse(&c, "expandable_segments:True", err, sizeof err), GRT_OK);
  return make_fixture("caching", capacity, &c);
}

static void test_map_on_demand(void **state) {
  (void)state;
  fixture fx = make_expandable(GRT_GiB);
  grt_devptr a = must_malloc(fx.a, 5 * MiB, 0); /* one 20 MiB page mapped */
  grt_alloc_stats s = stats_of(fx.a);
  assert_int_equal(s.reserved_bytes[GRT_STAT_LARGE_POOL].current, 20 * MiB);
  assert_int_equal(s.segment[GRT_STAT_ALL].current, 0); /* PyTorch counts no segment */
  assert_int_equal(s.num_device_alloc, 1);
  assert_int_equal(s.inactive_split[GRT_STAT_ALL].current, 0); /* expandable blocks excluded */
  grt_device_stats d = dev_stats(fx.dev);
  assert_int_equal(d.mapped_bytes, 20 * MiB);
  assert_int_equal(d.reserved_va_bytes, (GRT_GiB + GRT_GiB / 8 + 20 * MiB - 1) / (20 * MiB) * (20 * MiB));
  /* 18 MiB: the 15 MiB free tail plus one more page, merged; placed right after a */
  grt_devptr b = must_malloc(fx.a, 18 * MiB, 0);
  assert_int_equal(b, a + 5 * MiB);
  s = stats_of(fx.a);
  assert_int_equal(s.reserved_bytes[GRT_STAT_ALL].current, 40 * MiB);
  assert_int_equal(s.num_device_alloc, 2);
  assert_int_equal(s.largest_free_block, 17 * MiB);
  grt_alloc_snapshot *snap;
  assert_int_equal(grt_alloc_snapshot_take(fx.a, &snap), GRT_OK);
  assert_int_equal(snap->n_segments, 1); /* one contiguous mapped range */
  assert_true(snap->segments[0].is_expandable);
  assert_int_equal(snap->segments[0].total_size, 40 * MiB);
  assert_int_equal(snap->segments[0].n_blocks, 3);
  grt_alloc_snapshot_free(snap);
  /* small pool: its own reservation with 2 MiB pages */
  grt_devptr t = must_malloc(fx.a, 1000, 0);
  assert_int_equal(stats_of(fx.a).reserved_bytes[GRT_STAT_SMALL_POOL].current, 2 * MiB);
  assert_int_equal(grt_alloc_free(fx.a, t), GRT_OK);
  assert_int_equal(grt_alloc_free(fx.a, a), GRT_OK);
  assert_int_equal(grt_alloc_free(fx.a, b), GRT_OK);
  assert_consistent(fx.a);
  assert_int_equal(grt_alloc_empty_cache(fx.a), GRT_OK);
  s = stats_of(fx.a);
  assert_int_equal(s.reserved_bytes[GRT_STAT_ALL].current, 0);
  assert_int_equal(s.num_device_free, 2); /* one unmap per pool's free range */
  d = dev_stats(fx.dev);
  assert_int_equal(d.mapped_bytes, 0);
  assert_int_equal(d.reserved_va_bytes, 0); /* wholly unmapped reservations are released */
  drop_fixture(&fx);
}

/* Only whole free pages are unmapped; a page holding a live block stays. */
static void test_partial_unmap(void **state) {
  (void)state;
  fixture fx = make_expandable(GRT_GiB);
  grt_devptr a = must_malloc(fx.a, 30 * MiB, 0); /* pages 0-1 (40 MiB) */
  grt_devptr b = must_malloc(fx.a, 30 * MiB, 0); /* pages 1-3 */
  grt_devptr c = must_malloc(fx.a, 4 * MiB, 0);
  assert_int_equal(b, a + 30 * MiB);
  assert_int_equal(c, b + 30 * MiB);
  assert_int_equal(grt_alloc_free(fx.a, b), GRT_OK); /* [30, 60) MiB free: page 2 ([40,60)) is whole */
  assert_int_equal(grt_alloc_empty_cache(fx.a), GRT_OK);
  assert_consistent(fx.a);
  grt_alloc_stats s = stats_of(fx.a);
  assert_int_equal(s.reserved_bytes[GRT_STAT_ALL].current, 60 * MiB); /* 80 mapped - 20 unmapped */
  grt_alloc_snapshot *snap;
  assert_int_equal(grt_alloc_snapshot_take(fx.a, &snap), GRT_OK);
  assert_int_equal(snap->n_segments, 2); /* the hole splits the mapped range in two */
  grt_alloc_snapshot_free(snap);
  /* A 25 MiB request maps the hole again, extended back over the free 10 MiB before it. */
  grt_devptr d = must_malloc(fx.a, 25 * MiB, 0);
  assert_int_equal(d, a + 30 * MiB);
  assert_consistent(fx.a);
  assert_int_equal(grt_alloc_free(fx.a, a), GRT_OK);
  assert_int_equal(grt_alloc_free(fx.a, c), GRT_OK);
  assert_int_equal(grt_alloc_free(fx.a, d), GRT_OK);
  drop_fixture(&fx);
}

/* OOM: mapping fails, the cache is released, and the request fails cleanly. */
static void test_expandable_oom(void **state) {
  (void)state;
  fixture fx = make_expandable(100 * MiB);
  grt_devptr a = must_malloc(fx.a, 70 * MiB, 0), x;
  assert_int_equal(grt_alloc_malloc(fx.a, 40 * MiB, 0, &x), GRT_ERR_OOM);
  grt_alloc_stats s = stats_of(fx.a);
  assert_int_equal(s.num_ooms, 1);
  assert_consistent(fx.a);
  assert_int_equal(grt_alloc_free(fx.a, a), GRT_OK);
  grt_devptr b = must_malloc(fx.a, 90 * MiB, 0); /* fits once a's pages are reused */
  assert_int_equal(b, a);
  assert_int_equal(grt_alloc_free(fx.a, b), GRT_OK);
  drop_fixture(&fx);
}

/* An absurd request (far beyond the device) is an OOM whose reservation is
 * bounded by the blocks that exist, not by the request's pages: host memory
 * barely moves (mallinfo2 counts only without a sanitizer's allocator). */
static void test_expandable_absurd_request(void **state) {
  (void)state;
  fixture fx = make_expandable(100 * MiB);
  grt_devptr a = must_malloc(fx.a, 30 * MiB, 0), x;
  size_t before = mallinfo2().uordblks;
  assert_int_equal(grt_alloc_malloc(fx.a, (uint64_t)1 << 55, 0, &x), GRT_ERR_OOM);
  size_t after = mallinfo2().uordblks;
  assert_true(after < before + 1024 * 1024);
  assert_consistent(fx.a);
  assert_int_equal(grt_alloc_free(fx.a, a), GRT_OK);
  drop_fixture(&fx);
}

/* The replayer's import of a recorded expandable state: mapped ranges anywhere in a (stream, pool)
 * reservation become free mapped blocks between unmapped ones; misplaced ranges are refused. */
static void test_import_mapped_ranges(void **state) {
  (void)state;
  fixture fx = make_expandable(GRT_GiB);
  grt_devptr va = 0, va2 = 0;
  const uint64_t P = 2 * MiB; /* the small pool's page */
  assert_int_equal(grt__alloc_import_expandable(fx.a, 0, 0, 2 * P, P, &va), GRT_OK); /* splits off the front */
  assert_true(va != 0);
  assert_int_equal(grt__alloc_import_expandable(fx.a, 0, 0, 4 * P, P, &va2), GRT_OK); /* after a gap */
  assert_int_equal(va2, va); /* the same reservation */
  grt_alloc_stats s = stats_of(fx.a);
  assert_int_equal(s.reserved_bytes[GRT_STAT_SMALL_POOL].current, 2 * P);
  assert_int_equal(s.num_device_alloc, 0); /* imported, not a device malloc of the replay */
  grt_device_stats d = dev_stats(fx.dev);
  assert_int_equal(d.mapped_bytes, 2 * P);
  assert_int_equal(d.map_calls, 2);
  assert_consistent(fx.a);
  /* refusals: mapped already, not page-aligned, empty, past the reservation; nothing changes */
  assert_int_equal(grt__alloc_import_expandable(fx.a, 0, 0, 2 * P, P, &va2), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt__alloc_import_expandable(fx.a, 0, 0, 2 * P, 2 * P, &va2), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt__alloc_import_expandable(fx.a, 0, 0, P / 2, P, &va2), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt__alloc_import_expandable(fx.a, 0, 0, 0, P / 2, &va2), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt__alloc_import_expandable(fx.a, 0, 0, 0, 0, &va2), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt__alloc_import_expandable(fx.a, 0, 0, 0, 2 * GRT_GiB, &va2), GRT_ERR_INVALID_ARG);
  assert_int_equal(stats_of(fx.a).reserved_bytes[GRT_STAT_ALL].current, 2 * P);
  /* the gap between the two ranges, exactly: no split needed */
  assert_int_equal(grt__alloc_import_expandable(fx.a, 0, 0, 3 * P, P, &va2), GRT_OK);
  assert_consistent(fx.a);
  /* the three pages are one mapped range holding one free block */
  grt_alloc_snapshot *snap;
  assert_int_equal(grt_alloc_snapshot_take(fx.a, &snap), GRT_OK);
  assert_int_equal(snap->n_segments, 1);
  assert_int_equal(snap->segments[0].address, va + 2 * P);
  assert_int_equal(snap->segments[0].total_size, 3 * P);
  assert_int_equal(snap->segments[0].n_blocks, 1);
  assert_int_equal(snap->segments[0].blocks[0].state, GRT_BLOCK_INACTIVE);
  grt_alloc_snapshot_free(snap);
  grt_devptr p = must_malloc(fx.a, MiB, 0); /* served from it without a device call */
  assert_int_equal(p, va + 2 * P);
  s = stats_of(fx.a);
  assert_int_equal(s.num_device_alloc, 0);
  assert_int_equal(dev_stats(fx.dev).map_calls, 3);
  /* the large pool of another stream: a reservation of its own */
  assert_int_equal(grt__alloc_import_expandable(fx.a, 7, 1, 0, 20 * MiB, &va2), GRT_OK);
  assert_true(va2 != va);
  assert_int_equal(stats_of(fx.a).reserved_bytes[GRT_STAT_LARGE_POOL].current, 20 * MiB);
  assert_consistent(fx.a);
  assert_int_equal(grt_alloc_free(fx.a, p), GRT_OK);
  assert_int_equal(grt_alloc_empty_cache(fx.a), GRT_OK); /* every imported page is unmapped */
  assert_int_equal(dev_stats(fx.dev).mapped_bytes, 0);
  assert_int_equal(stats_of(fx.a).reserved_bytes[GRT_STAT_ALL].current, 0);
  drop_fixture(&fx);

  /* only "caching" with expandable segments */
  assert_int_equal(grt__alloc_import_expandable(NULL, 0, 0, 0, P, &va), GRT_ERR_INVALID_ARG);
  fx = make_fixture("caching", GRT_GiB, NULL);
  assert_int_equal(grt__alloc_import_expandable(fx.a, 0, 0, 0, P, NULL), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt__alloc_import_expandable(fx.a, 0, 0, 0, P, &va), GRT_ERR_UNSUPPORTED);
  drop_fixture(&fx);
  fx = make_fixture("naive", GRT_GiB, NULL);
  assert_int_equal(grt__alloc_import_expandable(fx.a, 0, 0, 0, P, &va), GRT_ERR_UNSUPPORTED);
  drop_fixture(&fx);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_map_on_demand),
      cmocka_unit_test(test_partial_unmap),
      cmocka_unit_test(test_expandable_oom),
      cmocka_unit_test(test_expandable_absurd_request),
      cmocka_unit_test(test_import_mapped_ranges),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
