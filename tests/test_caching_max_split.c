/* test_caching_max_split.c — the max_split_size rules at their exact
 * boundaries, on both sides, as PyTorch's c10/cuda/CUDACachingAllocator.cpp
 * has them (every comparison there is >= or <, and an off-by-one one way or
 * the other changes which block a request gets):
 *   get_free_block: a request below max_split_size never takes a cached block
 *     >= max_split_size; a request >= max_split_size takes one only if
 *     block < request + max_non_split_rounding (default kLargeBuffer, 20 MiB);
 *   should_split: a block is split only for a request < max_split_size (and
 *     for the large pool only if more than kSmallSize, 1 MiB, remains);
 *   oversize_segments / oversize_allocations count sizes >= max_split_size;
 *   release_available_cached_blocks frees the smallest unsplit block >=
 *     max(request, max_split_size).
 * With max_split_size_mb:40 every size here is a multiple of 2 MiB (the large
 * segment rounding) or 512 B off one (the request rounding). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <cmocka.h>

#include "alloc_fixture.h"

#define MSS (40 * MiB)

static fixture mss_fixture(uint64_t capacity) {
  grt_alloc_config c;
  grt_alloc_config_default(&c);
  char err[128];
  assert_int_equal(grt_alloc_config_parse(&c, "max_split_size_mb:40", err, sizeof err), GRT_OK);
  assert_int_equal(c.max_split_size, MSS);
  assert_int_equal(c.max_non_split_rounding, GRT_LARGE_BUFFER);
  return make_fixture("caching", capacity, &c);
}

/* A cached (freed) block of exactly `size` bytes, its own segment. */
static grt_devptr cached_block(fixture *fx, uint64_t size) {
  grt_devptr p = must_malloc(fx->a, size, 0);
  assert_int_equal(grt_alloc_free(fx->a, p), GRT_OK);
  return p;
}

/* Whether a request of `size` took the cached block at `cached`: asserts
 * the device calls match the answer. */
static int took(fixture *fx, uint64_t size, grt_devptr cached, grt_devptr *out) {
  uint64_t before = stats_of(fx->a).num_device_alloc;
  *out = must_malloc(fx->a, size, 0);
  uint64_t mallocs = stats_of(fx->a).num_device_alloc - before;
  assert_int_equal(mallocs, *out == cached ? 0 : 1);
  return *out == cached;
}

/* Oversize means >= max_split_size: a 40 MiB segment and allocation are
 * oversize, 38 MiB ones are not. */
static void test_oversize_counts_at_boundary(void **state) {
  (void)state;
  fixture fx = mss_fixture(GRT_GiB);
  grt_devptr below = must_malloc(fx.a, MSS - 2 * MiB, 0);
  grt_alloc_stats s = stats_of(fx.a);
  assert_int_equal(s.oversize_segments.current, 0);
  assert_int_equal(s.oversize_allocations.current, 0);
  grt_devptr at = must_malloc(fx.a, MSS, 0);
  s = stats_of(fx.a);
  assert_int_equal(s.oversize_segments.current, 1);
  assert_int_equal(s.oversize_allocations.current, 1);
  assert_int_equal(grt_alloc_free(fx.a, at), GRT_OK);
  assert_int_equal(grt_alloc_free(fx.a, below), GRT_OK);
  s = stats_of(fx.a);
  assert_int_equal(s.oversize_allocations.current, 0);
  assert_int_equal(s.oversize_segments.current, 1); /* still cached */
  assert_int_equal(grt_alloc_empty_cache(fx.a), GRT_OK);
  s = stats_of(fx.a);
  assert_int_equal(s.num_device_free, 2);
  assert_int_equal(s.oversize_segments.current, 0); /* the 40 MiB segment went */
  assert_int_equal(s.oversize_segments.peak, 1);
  drop_fixture(&fx);
}

/* Rule 1, the block's side: a block of exactly max_split_size is oversize
 * and refused to a smaller request; one 2 MiB smaller is taken (and split,
 * the request being below max_split_size). */
static void test_small_request_block_at_boundary(void **state) {
  (void)state;
  fixture fx = mss_fixture(GRT_GiB);
  grt_devptr blk = cached_block(&fx, MSS), p;
  assert_false(took(&fx, MSS - 2 * MiB, blk, &p));
  assert_int_equal(grt_alloc_free(fx.a, p), GRT_OK);
  drop_fixture(&fx);

  fx = mss_fixture(GRT_GiB);
  blk = cached_block(&fx, MSS - 2 * MiB);
  assert_true(took(&fx, MSS - 4 * MiB, blk, &p));
  grt_alloc_stats s = stats_of(fx.a);
  assert_int_equal(s.allocated_bytes[GRT_STAT_ALL].current, MSS - 4 * MiB); /* split: 2 MiB remain */
  assert_int_equal(s.inactive_split[GRT_STAT_ALL].current, 1);
  assert_int_equal(grt_alloc_free(fx.a, p), GRT_OK);
  drop_fixture(&fx);
}

/* Rule 1, the request's side: 512 B below max_split_size is a small request
 * and refuses an oversize block; exactly max_split_size is an oversize
 * request and takes it whole (58 < 40 + 20 MiB), unsplit. */
static void test_request_at_boundary(void **state) {
  (void)state;
  fixture fx = mss_fixture(GRT_GiB);
  grt_devptr blk = cached_block(&fx, MSS + 18 * MiB), p;
  assert_false(took(&fx, MSS - 512, blk, &p));
  grt_devptr q;
  assert_true(took(&fx, MSS, blk, &q));
  grt_alloc_stats s = stats_of(fx.a);
  /* the small request's own 40 MiB segment is not split either (512 B remain) */
  assert_int_equal(s.allocated_bytes[GRT_STAT_ALL].current, MSS + (MSS + 18 * MiB));
  assert_int_equal(s.requested_bytes[GRT_STAT_ALL].current, (MSS - 512) + MSS);
  assert_int_equal(s.inactive_split[GRT_STAT_ALL].current, 0);
  assert_int_equal(s.oversize_allocations.current, 2); /* by block size: both blocks are >= 40 MiB */
  assert_int_equal(grt_alloc_free(fx.a, q), GRT_OK);
  assert_int_equal(grt_alloc_free(fx.a, p), GRT_OK);
  drop_fixture(&fx);
}

/* Rule 2: an oversize request takes a block only if block < request + 20
 * MiB. A 60 MiB block is refused to a 40 MiB request (60 >= 40 + 20) and
 * taken by 40 MiB + 512 B (60 < 60 MiB + 512 B), whole. */
static void test_waste_limit_at_boundary(void **state) {
  (void)state;
  fixture fx = mss_fixture(GRT_GiB);
  grt_devptr blk = cached_block(&fx, MSS + GRT_LARGE_BUFFER), p;
  assert_false(took(&fx, MSS, blk, &p));
  grt_devptr q;
  assert_true(took(&fx, MSS + 512, blk, &q));
  grt_alloc_stats s = stats_of(fx.a);
  assert_int_equal(s.allocated_bytes[GRT_STAT_ALL].current, MSS + (MSS + GRT_LARGE_BUFFER));
  assert_int_equal(s.inactive_split[GRT_STAT_ALL].current, 0);
  assert_int_equal(s.num_cache_hits, 1);
  assert_int_equal(grt_alloc_free(fx.a, q), GRT_OK);
  assert_int_equal(grt_alloc_free(fx.a, p), GRT_OK);
  drop_fixture(&fx);
}

/* The large pool's remainder rule without max_split_size: a 20 MiB segment
 * is split for a request leaving more than 1 MiB, not for one leaving
 * exactly 1 MiB. */
static void test_split_remainder_at_boundary(void **state) {
  (void)state;
  fixture fx = make_fixture("caching", GRT_GiB, NULL);
  grt_devptr p = must_malloc(fx.a, 19 * MiB, 0); /* a 20 MiB segment, 1 MiB left: whole */
  grt_alloc_stats s = stats_of(fx.a);
  assert_int_equal(s.reserved_bytes[GRT_STAT_ALL].current, 20 * MiB);
  assert_int_equal(s.allocated_bytes[GRT_STAT_ALL].current, 20 * MiB);
  assert_int_equal(s.inactive_split[GRT_STAT_ALL].current, 0);
  assert_int_equal(grt_alloc_free(fx.a, p), GRT_OK);
  p = must_malloc(fx.a, 19 * MiB - 512, 0); /* the cached 20 MiB block, 1 MiB + 512 B left: split */
  s = stats_of(fx.a);
  assert_int_equal(s.num_device_alloc, 1);
  assert_int_equal(s.allocated_bytes[GRT_STAT_ALL].current, 19 * MiB - 512);
  assert_int_equal(s.inactive_split[GRT_STAT_ALL].current, 1);
  assert_int_equal(s.inactive_split_bytes[GRT_STAT_ALL].current, MiB + 512);
  assert_int_equal(grt_alloc_free(fx.a, p), GRT_OK);
  drop_fixture(&fx);
}

/* release_available_cached_blocks on a full device: the key is
 * max(request, max_split_size), and a cached block of exactly that size is
 * released (lower bound: >=), not every cached segment. */
static void test_release_available_at_boundary(void **state) {
  (void)state;
  fixture fx = mss_fixture(80 * MiB);
  grt_devptr keep = must_malloc(fx.a, MSS - 4 * MiB, 0); /* 36 MiB segment, kept */
  grt_devptr other = cached_block(&fx, MiB);             /* a cached 2 MiB small-pool segment */
  grt_devptr blk = cached_block(&fx, MSS);               /* oversize, exactly the key */
  assert_int_equal(dev_stats(fx.dev).free_bytes, 2 * MiB);
  /* 38 MiB refuses the 40 MiB block (rule 1); the device has 2 MiB free */
  grt_devptr p = must_malloc(fx.a, MSS - 2 * MiB, 0);
  grt_alloc_stats s = stats_of(fx.a);
  assert_int_equal(s.num_device_free, 1);   /* the 40 MiB block only */
  assert_int_equal(s.num_alloc_retries, 0); /* release_available sufficed */
  assert_int_equal(p, blk);                 /* first fit: where it was */
  assert_int_equal(s.reserved_bytes[GRT_STAT_ALL].current, 36 * MiB + 2 * MiB + 38 * MiB);
  assert_int_equal(must_malloc(fx.a, MiB, 0), other); /* the small pool's segment stayed */
  assert_int_equal(grt_alloc_free(fx.a, other), GRT_OK);
  assert_int_equal(grt_alloc_free(fx.a, p), GRT_OK);
  assert_int_equal(grt_alloc_free(fx.a, keep), GRT_OK);
  drop_fixture(&fx);
}

/* release_available_cached_blocks when no single block is large enough:
 * unsplit oversize blocks (>= max_split_size, so exactly 40 MiB counts) are
 * freed from the largest down until the request's size is freed, and the
 * malloc's first retry succeeds: no flush of the whole cache
 * (num_alloc_retries stays 0). */
static void test_release_available_frees_blocks_at_boundary(void **state) {
  (void)state;
  fixture fx = mss_fixture(100 * MiB);
  grt_devptr a = must_malloc(fx.a, MSS, 0), b = must_malloc(fx.a, MSS, 0);
  grt_devptr keep = must_malloc(fx.a, 18 * MiB, 0);
  assert_int_equal(grt_alloc_free(fx.a, a), GRT_OK);
  assert_int_equal(grt_alloc_free(fx.a, b), GRT_OK);
  assert_int_equal(dev_stats(fx.dev).free_bytes, 2 * MiB);
  grt_devptr p = must_malloc(fx.a, 2 * MSS, 0); /* 80 MiB: neither block alone; both together */
  grt_alloc_stats s = stats_of(fx.a);
  assert_int_equal(s.num_device_free, 2);
  assert_int_equal(s.num_alloc_retries, 0);
  assert_int_equal(p, a); /* the hole the two left, first fit */
  assert_int_equal(s.oversize_segments.current, 1);
  assert_int_equal(grt_alloc_free(fx.a, p), GRT_OK);
  assert_int_equal(grt_alloc_free(fx.a, keep), GRT_OK);
  drop_fixture(&fx);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_oversize_counts_at_boundary),
      cmocka_unit_test(test_small_request_block_at_boundary),
      cmocka_unit_test(test_request_at_boundary),
      cmocka_unit_test(test_waste_limit_at_boundary),
      cmocka_unit_test(test_split_remainder_at_boundary),
      cmocka_unit_test(test_release_available_at_boundary),
      cmocka_unit_test(test_release_available_frees_blocks_at_boundary),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
