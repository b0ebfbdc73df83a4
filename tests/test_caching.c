/* test_caching.c — the caching allocator's lessons, one test each, with the
 * exact numbers PyTorch's rules produce. */
#include <stdlib.h>
#include <string.h>

#include "alloc_fixture.h"

/* Size classes: 512-byte granularity, power-of-two divisions, segment sizes. */
static void test_rounding(void **state) {
  (void)state;
  grt_alloc_config c;
  grt_alloc_config_default(&c);
  assert_int_equal(grt_alloc_round_size(&c, 1), 512);
  assert_int_equal(grt_alloc_round_size(&c, 512), 512);
  assert_int_equal(grt_alloc_round_size(&c, 513), 1024);
  assert_int_equal(grt_alloc_round_size(&c, 1258291), 1258496); /* 1.2 MB rounds up to a multiple of 512 */
  assert_int_equal(grt_alloc_segment_size(512), 2 * MiB);
  assert_int_equal(grt_alloc_segment_size(MiB), 2 * MiB);
  assert_int_equal(grt_alloc_segment_size(MiB + 512), 20 * MiB);
  assert_int_equal(grt_alloc_segment_size(10 * MiB), 10 * MiB);
  assert_int_equal(grt_alloc_segment_size(11 * MiB + 512), 12 * MiB);
}

/* roundup_power2_divisions, including PyTorch's guard quirk (1200 -> 1536 with d=4). */
static void test_power2_rounding(void **state) {
  (void)state;
  grt_alloc_config c;
  grt_alloc_config_default(&c);
  char err[128];
  assert_int_equal(grt_alloc_config_parse(&c, "roundup_power2_divisions:4", err, sizeof err), GRT_OK);
  assert_int_equal(grt_alloc_round_size(&c, 1200), 1536);           /* 1200 <= 512*4: plain rounding */
  assert_int_equal(grt_alloc_round_size(&c, 5 * MiB + 1), 6 * MiB); /* steps of 1 MiB in [4, 8) MiB */
  assert_int_equal(grt_alloc_round_size(&c, 4 * MiB), 4 * MiB);     /* a power of two stays */
  assert_int_equal(grt_alloc_round_size(&c, 2049), 2560);           /* [2048,4096) in steps of 512 */
  grt_alloc_config_default(&c);
  assert_int_equal(grt_alloc_config_parse(&c, "roundup_power2_divisions:[1:2,256:1,>:8]", err, sizeof err), GRT_OK);
  assert_int_equal(c.roundup_power2_divisions[0], 2);
  assert_int_equal(c.roundup_power2_divisions[8], 1);
  assert_int_equal(c.roundup_power2_divisions[9], 8);
  assert_int_equal(grt_alloc_round_size(&c, 3 * MiB / 2 + 1), 2 * MiB); /* [1,2) MiB in halves */
  grt_alloc_config before = c;
  assert_int_equal(grt_alloc_config_parse(&c, "roundup_power2_divisions:3", err, sizeof err), GRT_ERR_PARSE);
  assert_non_null(strstr(err, "power of two"));
  assert_memory_equal(&before, &c, sizeof c); /* a failed parse changes nothing */
  assert_int_equal(grt_alloc_config_parse(&c, "max_split_size_mb:20", err, sizeof err), GRT_ERR_PARSE);
  assert_int_equal(grt_alloc_config_parse(&c, "bogus:1", err, sizeof err), GRT_ERR_PARSE);
  assert_int_equal(grt_alloc_config_parse(&c, "max_split_size_mb:64, expandable_segments:False,cross_stream:with_event", err, sizeof err), GRT_OK);
  assert_int_equal(c.max_split_size, 64 * MiB);
  assert_int_equal(c.cross_stream, GRT_CROSS_STREAM_WITH_EVENT);
}

/* Reuse from the bins never calls the device. */
static void test_bin_reuse_fast_path(void **state) {
  (void)state;
  fixture fx = make_fixture("caching", GRT_GiB, NULL);
  grt_devptr p = must_malloc(fx.a, 3000, 0);
  assert_int_equal(grt_alloc_free(fx.a, p), GRT_OK);
  for (int i = 0; i < 100; i++) {
    grt_devptr q = must_malloc(fx.a, 3000, 0);
    assert_int_equal(q, p);
    assert_int_equal(grt_alloc_free(fx.a, q), GRT_OK);
  }
  grt_alloc_stats s = stats_of(fx.a);
  assert_int_equal(s.num_device_alloc, 1);
  assert_int_equal(s.num_device_free, 0);
  assert_int_equal(s.num_cache_hits, 100);
  assert_int_equal(dev_stats(fx.dev).free_calls, 0);
  drop_fixture(&fx);
}

/* A cached 20 MiB block serving a 4 MiB request leaves 16 MiB binned. */
static void test_split_accounting(void **state) {
  (void)state;
  fixture fx = make_fixture("caching", GRT_GiB, NULL);
  grt_devptr p = must_malloc(fx.a, 5 * MiB, 0); /* 20 MiB segment, split 5 + 15 */
  grt_alloc_stats s = stats_of(fx.a);
  assert_int_equal(s.reserved_bytes[GRT_STAT_ALL].current, 20 * MiB);
  assert_int_equal(s.inactive_split_bytes[GRT_STAT_LARGE_POOL].current, 15 * MiB);
  assert_int_equal(grt_alloc_free(fx.a, p), GRT_OK); /* merges back into one 20 MiB block */
  s = stats_of(fx.a);
  assert_int_equal(s.inactive_split[GRT_STAT_ALL].current, 0);
  assert_int_equal(s.largest_free_block, 20 * MiB);
  grt_devptr q = must_malloc(fx.a, 4 * MiB, 0);
  assert_int_equal(q, p); /* the allocation takes the front */
  s = stats_of(fx.a);
  assert_int_equal(s.allocated_bytes[GRT_STAT_ALL].current, 4 * MiB);
  assert_int_equal(s.inactive_split[GRT_STAT_ALL].current, 1);
  assert_int_equal(s.inactive_split_bytes[GRT_STAT_ALL].current, 16 * MiB);
  assert_int_equal(s.largest_free_block, 16 * MiB);
  assert_int_equal(s.num_device_alloc, 1);
  /* A hand-checked trace: 1.2 MB -> large pool, 20 MiB segment, the rest binned. */
  grt_devptr r = must_malloc(fx.a, 1258291, 0);
  assert_int_equal(r, q + 4 * MiB);
  s = stats_of(fx.a);
  assert_int_equal(s.allocated_bytes[GRT_STAT_LARGE_POOL].current, 4 * MiB + 1258496);
  assert_int_equal(s.requested_bytes[GRT_STAT_LARGE_POOL].current, 4 * MiB + 1258291);
  assert_int_equal(s.inactive_split_bytes[GRT_STAT_ALL].current, 16 * MiB - 1258496);
  /* A small-pool split: remainder >= 512 is split off. */
  grt_devptr t = must_malloc(fx.a, 1000, 0);
  s = stats_of(fx.a);
  assert_int_equal(s.reserved_bytes[GRT_STAT_SMALL_POOL].current, 2 * MiB);
  assert_int_equal(s.inactive_split_bytes[GRT_STAT_SMALL_POOL].current, 2 * MiB - 1024);
  assert_int_equal(grt_alloc_free(fx.a, t), GRT_OK);
  assert_int_equal(grt_alloc_free(fx.a, r), GRT_OK);
  assert_int_equal(grt_alloc_free(fx.a, q), GRT_OK);
  drop_fixture(&fx);
}

/* Large-pool blocks are not split when the remainder would be 1 MiB or less. */
static void test_large_no_split_small_remainder(void **state) {
  (void)state;
  fixture fx = make_fixture("caching", GRT_GiB, NULL);
  grt_devptr p = must_malloc(fx.a, 19 * MiB + 512, 0); /* 20 MiB segment, remainder < 1 MiB */
  grt_alloc_stats s = stats_of(fx.a);
  assert_int_equal(s.allocated_bytes[GRT_STAT_ALL].current, 20 * MiB); /* internal waste counted */
  assert_int_equal(s.requested_bytes[GRT_STAT_ALL].current, 19 * MiB + 512);
  assert_int_equal(s.inactive_split[GRT_STAT_ALL].current, 0);
  assert_int_equal(grt_alloc_free(fx.a, p), GRT_OK);
  drop_fixture(&fx);
}

/* with_event policy: another stream's cached block is taken and counted as an edge. */
static void test_cross_stream_sync_counted(void **state) {
  (void)state;
  grt_alloc_config c;
  grt_alloc_config_default(&c);
  c.cross_stream = GRT_CROSS_STREAM_WITH_EVENT;
  fixture fx = make_fixture("caching", GRT_GiB, &c);
  grt_devptr p = must_malloc(fx.a, 4096, 1);
  assert_int_equal(grt_alloc_free(fx.a, p), GRT_OK);
  grt_devptr q = must_malloc(fx.a, 4096, 2);
  assert_int_equal(q, p);
  grt_alloc_stats s = stats_of(fx.a);
  assert_int_equal(s.cross_stream_syncs, 1);
  assert_int_equal(s.num_device_alloc, 1);
  assert_int_equal(grt_alloc_free(fx.a, q), GRT_OK);
  drop_fixture(&fx);
  /* PyTorch's default never reuses across streams: a new segment instead. */
  fx = make_fixture("caching", GRT_GiB, NULL);
  p = must_malloc(fx.a, 4096, 1);
  assert_int_equal(grt_alloc_free(fx.a, p), GRT_OK);
  q = must_malloc(fx.a, 4096, 2);
  assert_int_not_equal(q, p);
  s = stats_of(fx.a);
  assert_int_equal(s.cross_stream_syncs, 0);
  assert_int_equal(s.num_device_alloc, 2);
  assert_int_equal(grt_alloc_free(fx.a, q), GRT_OK);
  drop_fixture(&fx);
}

/* Same-stream blocks are chosen first, even when another stream's block is a better fit. */
static void test_same_stream_preferred(void **state) {
  (void)state;
  grt_alloc_config c;
  grt_alloc_config_default(&c);
  c.cross_stream = GRT_CROSS_STREAM_WITH_EVENT;
  fixture fx = make_fixture("caching", GRT_GiB, &c);
  grt_devptr a2 = must_malloc(fx.a, 30 * MiB, 2); /* 30 MiB segment on stream 2 */
  grt_devptr a1 = must_malloc(fx.a, 12 * MiB, 1); /* 12 MiB segment on stream 1 */
  assert_int_equal(grt_alloc_free(fx.a, a1), GRT_OK);
  assert_int_equal(grt_alloc_free(fx.a, a2), GRT_OK);
  grt_devptr b = must_malloc(fx.a, 12 * MiB, 2);
  assert_int_equal(b, a2); /* stream 2's own block, although stream 1's fits exactly */
  assert_int_equal(stats_of(fx.a).cross_stream_syncs, 0);
  assert_int_equal(grt_alloc_free(fx.a, b), GRT_OK);
  drop_fixture(&fx);
}

/* Reserved stays after frees: the gap is cache, not a leak. */
static void test_reserved_vs_allocated(void **state) {
  (void)state;
  fixture fx = make_fixture("caching", GRT_GiB, NULL);
  grt_devptr p[10];
  for (int i = 0; i < 10; i++) p[i] = must_malloc(fx.a, 8 * MiB, 0);
  for (int i = 0; i < 10; i++) assert_int_equal(grt_alloc_free(fx.a, p[i]), GRT_OK);
  grt_alloc_stats s = stats_of(fx.a);
  assert_int_equal(s.allocated_bytes[GRT_STAT_ALL].current, 0);
  assert_int_equal(s.allocated_bytes[GRT_STAT_ALL].peak, 80 * MiB);
  /* each 20 MiB segment serves two 8 MiB blocks; the 4 MiB tails stay free */
  assert_int_equal(s.reserved_bytes[GRT_STAT_ALL].current, 100 * MiB);
  assert_int_equal(s.cached_bytes, 100 * MiB);
  assert_int_equal(dev_stats(fx.dev).bytes_in_use, 100 * MiB);
  assert_int_equal(grt_alloc_empty_cache(fx.a), GRT_OK);
  s = stats_of(fx.a);
  assert_int_equal(s.reserved_bytes[GRT_STAT_ALL].current, 0);
  assert_int_equal(s.num_device_free, 5);
  assert_int_equal(s.num_sync_all_streams, 1);
  drop_fixture(&fx);
}

/* The pre-OOM stall: cached segments are freed and the device malloc retried. */
static void test_flush_and_retry_on_oom(void **state) {
  (void)state;
  fixture fx = make_fixture("caching", 40 * MiB, NULL);
  grt_devptr p = must_malloc(fx.a, 5 * MiB, 0); /* 20 MiB segment */
  assert_int_equal(grt_alloc_free(fx.a, p), GRT_OK);
  grt_devptr q = must_malloc(fx.a, 30 * MiB, 0); /* needs the cached 20 MiB back */
  grt_alloc_stats s = stats_of(fx.a);
  assert_int_equal(s.num_alloc_retries, 1);
  assert_int_equal(s.num_device_free, 1);
  assert_int_equal(s.num_ooms, 0);
  assert_int_equal(s.reserved_bytes[GRT_STAT_ALL].current, 30 * MiB);
  assert_int_equal(q, p); /* first fit on the emptied device */
  assert_int_equal(grt_alloc_free(fx.a, q), GRT_OK);
  drop_fixture(&fx);
}

/* OOM: a precise status and PyTorch's explanation; the allocator stays intact. */
static void test_oom_message(void **state) {
  (void)state;
  fixture fx = make_fixture("caching", 40 * MiB, NULL);
  grt_devptr p = must_malloc(fx.a, 5 * MiB, 0);
  grt_devptr q = 0;
  assert_int_equal(grt_alloc_malloc(fx.a, 30 * MiB, 0, &q), GRT_ERR_OOM);
  const char *m = grt_alloc_last_error(fx.a);
  assert_non_null(strstr(m, "tried to allocate 30.00 MiB"));
  assert_non_null(strstr(m, "5.00 MiB is allocated and 15.00 MiB is reserved but unallocated"));
  grt_alloc_stats s = stats_of(fx.a);
  assert_int_equal(s.num_ooms, 1);
  assert_int_equal(s.num_alloc_retries, 1);
  assert_consistent(fx.a);
  assert_int_equal(grt_alloc_free(fx.a, p), GRT_OK);
  drop_fixture(&fx);
}

/* A split segment cannot be returned to the device. */
static void test_split_block_not_returnable(void **state) {
  (void)state;
  fixture fx = make_fixture("caching", GRT_GiB, NULL);
  grt_devptr p = must_malloc(fx.a, 5 * MiB, 0);
  grt_devptr q = must_malloc(fx.a, 5 * MiB, 0); /* same segment */
  assert_int_equal(q, p + 5 * MiB);
  assert_int_equal(grt_alloc_free(fx.a, p), GRT_OK);
  assert_int_equal(grt_alloc_empty_cache(fx.a), GRT_OK);
  assert_int_equal(stats_of(fx.a).num_device_free, 0);
  assert_int_equal(dev_stats(fx.dev).free_calls, 0);
  assert_int_equal(grt_alloc_free(fx.a, q), GRT_OK); /* merges the whole segment back */
  assert_int_equal(grt_alloc_empty_cache(fx.a), GRT_OK);
  assert_int_equal(stats_of(fx.a).num_device_free, 1);
  assert_int_equal(dev_stats(fx.dev).bytes_in_use, 0);
  drop_fixture(&fx);
}

/* Free merges with free neighbours on both sides, in any order. */
static void test_merge_on_free(void **state) {
  (void)state;
  fixture fx = make_fixture("caching", GRT_GiB, NULL);
  grt_devptr a = must_malloc(fx.a, 4 * MiB, 0);
  grt_devptr b = must_malloc(fx.a, 4 * MiB, 0);
  grt_devptr c = must_malloc(fx.a, 4 * MiB, 0);
  assert_int_equal(grt_alloc_free(fx.a, b), GRT_OK);
  grt_alloc_stats s = stats_of(fx.a);
  assert_int_equal(s.inactive_split[GRT_STAT_ALL].current, 2); /* b's hole and the tail */
  assert_int_equal(grt_alloc_free(fx.a, a), GRT_OK);
  s = stats_of(fx.a);
  assert_int_equal(s.inactive_split[GRT_STAT_ALL].current, 2);
  assert_int_equal(s.largest_free_block, 8 * MiB);
  assert_int_equal(grt_alloc_free(fx.a, c), GRT_OK);
  s = stats_of(fx.a);
  assert_int_equal(s.inactive_split[GRT_STAT_ALL].current, 0);
  assert_int_equal(s.inactive_split_bytes[GRT_STAT_ALL].current, 0);
  assert_int_equal(s.largest_free_block, 20 * MiB);
  /* After merging, a 16 MiB request fits in the segment again. */
  grt_devptr d = must_malloc(fx.a, 16 * MiB, 0);
  assert_int_equal(d, a);
  assert_int_equal(stats_of(fx.a).num_device_alloc, 1);
  assert_int_equal(grt_alloc_free(fx.a, d), GRT_OK);
  drop_fixture(&fx);
}

/* max_split_size: small requests never take oversize blocks; oversize blocks
 * are not split and are released first when memory is short. */
static void test_max_split_size(void **state) {
  (void)state;
  grt_alloc_config c;
  grt_alloc_config_default(&c);
  char err[128];
  assert_int_equal(grt_alloc_config_parse(&c, "max_split_size_mb:40", err, sizeof err), GRT_OK);
  fixture fx = make_fixture("caching", 100 * MiB, &c);
  assert_int_equal(stats_of(fx.a).max_split_size, 40 * MiB);
  grt_devptr big = must_malloc(fx.a, 50 * MiB, 0);
  assert_int_equal(stats_of(fx.a).oversize_allocations.current, 1);
  assert_int_equal(grt_alloc_free(fx.a, big), GRT_OK);
  grt_devptr small = must_malloc(fx.a, 8 * MiB, 0); /* refuses the cached 50 MiB block */
  assert_int_not_equal(small, big);
  grt_alloc_stats s = stats_of(fx.a);
  assert_int_equal(s.num_device_alloc, 2);
  assert_int_equal(s.oversize_segments.current, 1);
  /* 45 MiB would take the 50 MiB block (50 < 45 + 20), unsplit. */
  grt_devptr mid = must_malloc(fx.a, 45 * MiB, 0);
  assert_int_equal(mid, big);
  s = stats_of(fx.a);
  assert_int_equal(s.allocated_bytes[GRT_STAT_ALL].current, 8 * MiB + 50 * MiB);
  assert_int_equal(grt_alloc_free(fx.a, mid), GRT_OK);
  /* 32 MiB (< max_split) refuses the cached 50 MiB block; the device has only
     30 MiB free, so release_available frees that oversize block first. */
  grt_devptr huge = must_malloc(fx.a, 32 * MiB, 0);
  s = stats_of(fx.a);
  assert_int_equal(s.num_device_free, 1);
  assert_int_equal(s.num_alloc_retries, 0);
  assert_int_equal(huge, big);
  /* 60 MiB: oversize blocks are released (none left), then everything; the
     device's largest hole is 50 MiB, so this is an OOM, as in PyTorch. */
  grt_devptr none;
  assert_int_equal(grt_alloc_free(fx.a, huge), GRT_OK);
  assert_int_equal(grt_alloc_malloc(fx.a, 60 * MiB, 0, &none), GRT_ERR_OOM);
  huge = must_malloc(fx.a, 48 * MiB, 0);
  assert_int_equal(grt_alloc_free(fx.a, huge), GRT_OK);
  assert_int_equal(grt_alloc_free(fx.a, small), GRT_OK);
  drop_fixture(&fx);
}

/* Bad input gets a precise status and changes nothing. */
static void test_error_paths(void **state) {
  (void)state;
  fixture fx = make_fixture("caching", GRT_GiB, NULL);
  grt_devptr p = must_malloc(fx.a, 4 * MiB, 0), x;
  grt_alloc_stats before = stats_of(fx.a);
  assert_int_equal(grt_alloc_malloc(fx.a, 0, 0, &x), GRT_ERR_SIZE);
  assert_int_equal(grt_alloc_malloc(fx.a, UINT64_MAX / 2, 0, &x), GRT_ERR_SIZE);
  assert_int_equal(grt_alloc_malloc(fx.a, 4 * MiB, 0, NULL), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt_alloc_free(fx.a, p + 512), GRT_ERR_INTERIOR_POINTER);
  assert_int_equal(grt_alloc_free(fx.a, 0xdead0000), GRT_ERR_UNKNOWN_POINTER);
  assert_int_equal(grt_alloc_free(fx.a, p + 8 * MiB), GRT_ERR_DOUBLE_FREE); /* free cached memory */
  assert_int_equal(grt_alloc_record_stream(fx.a, p + 1024, 3), GRT_ERR_INTERIOR_POINTER);
  grt_alloc_stats after = stats_of(fx.a);
  assert_memory_equal(&before, &after, sizeof before);
  assert_int_equal(grt_alloc_free(fx.a, p), GRT_OK);
  assert_int_equal(grt_alloc_free(fx.a, p), GRT_ERR_DOUBLE_FREE);
  assert_non_null(strstr(grt_alloc_last_error(fx.a), "double free"));
  grt_allocator *bad;
  assert_int_equal(grt_alloc_create("no-such-policy", fx.dev, NULL, &bad), GRT_ERR_NOT_FOUND);
  assert_null(bad);
  grt_alloc_config c;
  grt_alloc_config_default(&c);
  c.max_split_size = 4 * MiB;
  assert_int_equal(grt_alloc_create("caching", fx.dev, &c, &bad), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt_alloc_destroy(NULL), GRT_OK);
  drop_fixture(&fx);
}

/* record_stream defers the free until the other stream's event completes. */
static void test_record_stream_deferred_free(void **state) {
  (void)state;
  fake_events *f = calloc(1, sizeof *f);
  grt_stream_ops ops = fake_ops(f);
  grt_alloc_config c;
  grt_alloc_config_default(&c);
  c.stream_ops = &ops;
  fixture fx = make_fixture("caching", GRT_GiB, &c);
  grt_devptr p = must_malloc(fx.a, 4096, 1);
  assert_int_equal(grt_alloc_record_stream(fx.a, p, 2), GRT_OK);
  assert_int_equal(grt_alloc_record_stream(fx.a, p, 2), GRT_OK); /* a set: once */
  assert_int_equal(grt_alloc_record_stream(fx.a, p, 1), GRT_OK); /* own stream: no-op */
  assert_int_equal(grt_alloc_free(fx.a, p), GRT_OK);
  assert_int_equal(f->recorded, 1);
  assert_int_equal(f->last_stream[0], 2);
  grt_alloc_snapshot *snap;
  assert_int_equal(grt_alloc_snapshot_take(fx.a, &snap), GRT_OK);
  assert_int_equal(snap->segments[0].blocks[0].state, GRT_BLOCK_ACTIVE_PENDING_FREE);
  assert_string_equal(grt_block_state_name(snap->segments[0].blocks[0].state), "active_pending_free");
  grt_alloc_snapshot_free(snap);
  assert_int_equal(grt_alloc_free(fx.a, p), GRT_ERR_DOUBLE_FREE);
  grt_alloc_stats s = stats_of(fx.a);
  assert_int_equal(s.pending_free_blocks, 1);
  assert_int_equal(s.active[GRT_STAT_ALL].current, 1);
  assert_int_equal(s.allocation[GRT_STAT_ALL].current, 0);
  grt_devptr q = must_malloc(fx.a, 4096, 1); /* event not done: p is not reused */
  assert_int_not_equal(q, p);
  f->done[0] = 1;
  grt_devptr r = must_malloc(fx.a, 4096, 1); /* processed at the start of malloc */
  assert_int_equal(r, p);
  assert_int_equal(f->destroyed, 1);
  assert_int_equal(stats_of(fx.a).pending_free_blocks, 0);
  assert_int_equal(grt_alloc_free(fx.a, q), GRT_OK);
  assert_int_equal(grt_alloc_free(fx.a, r), GRT_OK);
  /* empty_cache synchronizes outstanding events. */
  p = must_malloc(fx.a, 4096, 1);
  assert_int_equal(grt_alloc_record_stream(fx.a, p, 7), GRT_OK);
  assert_int_equal(grt_alloc_free(fx.a, p), GRT_OK);
  assert_int_equal(grt_alloc_empty_cache(fx.a), GRT_OK);
  assert_int_equal(f->synced, 1);
  assert_int_equal(stats_of(fx.a).reserved_bytes[GRT_STAT_ALL].current, 0);
  drop_fixture(&fx);
  free(f);
}

/* The snapshot tiles each segment with PyTorch's block states. */
static void test_snapshot(void **state) {
  (void)state;
  fixture fx = make_fixture("caching", GRT_GiB, NULL);
  grt_devptr a = must_malloc(fx.a, 3 * MiB, 5);
  grt_devptr b = must_malloc(fx.a, 3000, 5);
  grt_alloc_snapshot *snap;
  assert_int_equal(grt_alloc_snapshot_take(fx.a, &snap), GRT_OK);
  assert_int_equal(snap->n_segments, 2);
  uint64_t total = 0;
  for (size_t i = 0; i < snap->n_segments; i++) {
    const grt_snapshot_segment *sg = &snap->segments[i];
    assert_int_equal(sg->stream, 5);
    uint64_t at = sg->address;
    for (size_t j = 0; j < sg->n_blocks; j++) {
      assert_int_equal(sg->blocks[j].address, at);
      at += sg->blocks[j].size;
    }
    assert_int_equal(at, sg->address + sg->total_size);
    total += sg->total_size;
    if (sg->is_large) {
      assert_int_equal(sg->total_size, 20 * MiB);
      assert_int_equal(sg->allocated_size, 3 * MiB);
      assert_int_equal(sg->blocks[0].state, GRT_BLOCK_ACTIVE_ALLOCATED);
      assert_int_equal(sg->blocks[1].state, GRT_BLOCK_INACTIVE);
    } else {
      assert_int_equal(sg->requested_size, 3000);
    }
  }
  assert_int_equal(total, 22 * MiB);
  grt_alloc_snapshot_free(snap);
  assert_int_equal(grt_alloc_free(fx.a, a), GRT_OK);
  assert_int_equal(grt_alloc_free(fx.a, b), GRT_OK);
  drop_fixture(&fx);
}

/* memory_fraction caps reserved memory; garbage collection frees old cached blocks first. */
static void test_memory_fraction_and_gc(void **state) {
  (void)state;
  grt_alloc_config c;
  grt_alloc_config_default(&c);
  c.memory_fraction = 0.5;
  fixture fx = make_fixture("caching", 100 * MiB, &c);
  grt_devptr x;
  assert_int_equal(grt_alloc_malloc(fx.a, 60 * MiB, 0, &x), GRT_ERR_OOM);
  assert_int_equal(dev_stats(fx.dev).failed_mallocs, 0); /* refused before the device */
  drop_fixture(&fx);
  char err[64];
  assert_int_equal(grt_alloc_config_parse(&c, "garbage_collection_threshold:0.5", err, sizeof err), GRT_OK);
  c.memory_fraction = 1.0;
  fx = make_fixture("caching", 100 * MiB, &c);
  grt_devptr a = must_malloc(fx.a, 30 * MiB, 0), b = must_malloc(fx.a, 30 * MiB, 0);
  assert_int_equal(grt_alloc_free(fx.a, a), GRT_OK);
  assert_int_equal(grt_alloc_free(fx.a, b), GRT_OK);
  /* 60 MiB reserved > 50 MiB threshold: a 40 MiB request (no cached block fits)
     first garbage-collects both cached blocks (each as old as the average). */
  grt_devptr d = must_malloc(fx.a, 40 * MiB, 0);
  grt_alloc_stats s = stats_of(fx.a);
  assert_int_equal(s.num_device_free, 2);
  assert_int_equal(s.num_alloc_retries, 0);
  assert_int_equal(s.reserved_bytes[GRT_STAT_ALL].current, 40 * MiB);
  assert_int_equal(grt_alloc_free(fx.a, d), GRT_OK);
  drop_fixture(&fx);
}

/* The naive policy: every call reaches the device. */
static void test_naive(void **state) {
  (void)state;
  fixture fx = make_fixture("naive", 64 * MiB, NULL);
  assert_string_equal(grt_alloc_policy(fx.a), "naive");
  grt_devptr p = must_malloc(fx.a, 1000, 0);
  assert_int_equal(grt_alloc_free(fx.a, p), GRT_OK);
  assert_int_equal(grt_alloc_free(fx.a, p), GRT_ERR_DOUBLE_FREE);
  p = must_malloc(fx.a, 1000, 0);
  grt_device_stats d = dev_stats(fx.dev);
  assert_int_equal(d.malloc_calls, 2);
  assert_int_equal(d.free_calls, 1);
  grt_alloc_stats s = stats_of(fx.a);
  assert_int_equal(s.reserved_bytes[GRT_STAT_ALL].current, 1024);
  assert_int_equal(s.requested_bytes[GRT_STAT_ALL].current, 1000);
  grt_devptr q;
  assert_int_equal(grt_alloc_malloc(fx.a, 64 * MiB, 0, &q), GRT_ERR_OOM);
  assert_int_equal(grt_alloc_free(fx.a, p), GRT_OK);
  drop_fixture(&fx);
}

/* Policy options: first fit, no merging, empty_cache of idle segments only. */
static void test_policy_options(void **state) {
  (void)state;
  grt_alloc_config c;
  grt_alloc_config_default(&c);
  char err[128];
  assert_int_equal(grt_alloc_config_parse(&c, "fit:first", err, sizeof err), GRT_OK);
  fixture fx = make_fixture("caching", GRT_GiB, &c);
  grt_devptr a = must_malloc(fx.a, 30 * MiB, 0), b = must_malloc(fx.a, 12 * MiB, 0);
  assert_int_equal(grt_alloc_free(fx.a, a), GRT_OK);
  assert_int_equal(grt_alloc_free(fx.a, b), GRT_OK);
  assert_int_equal(must_malloc(fx.a, 12 * MiB, 0), a); /* lowest address, not the exact fit */
  drop_fixture(&fx);
  grt_alloc_config_default(&c);
  fx = make_fixture("caching", GRT_GiB, &c);
  a = must_malloc(fx.a, 30 * MiB, 0);
  b = must_malloc(fx.a, 12 * MiB, 0);
  assert_int_equal(grt_alloc_free(fx.a, a), GRT_OK);
  assert_int_equal(grt_alloc_free(fx.a, b), GRT_OK);
  assert_int_equal(must_malloc(fx.a, 12 * MiB, 0), b); /* best fit */
  drop_fixture(&fx);

  grt_alloc_config_default(&c);
  assert_int_equal(grt_alloc_config_parse(&c, "merge_on_free:False", err, sizeof err), GRT_OK);
  fx = make_fixture("caching", GRT_GiB, &c);
  grt_devptr x = must_malloc(fx.a, 4 * MiB, 0), y = must_malloc(fx.a, 4 * MiB, 0);
  assert_int_equal(grt_alloc_free(fx.a, x), GRT_OK);
  assert_int_equal(grt_alloc_free(fx.a, y), GRT_OK);
  assert_consistent(fx.a);
  assert_int_equal(stats_of(fx.a).largest_free_block, 12 * MiB); /* 4 + 4 + 12 never coalesce */
  grt_devptr z = must_malloc(fx.a, 16 * MiB, 0);                   /* needs a new segment */
  assert_int_equal(stats_of(fx.a).num_device_alloc, 2);
  assert_int_equal(grt_alloc_free(fx.a, z), GRT_OK);
  assert_int_equal(grt_alloc_empty_cache(fx.a), GRT_OK); /* the split first segment can never go back */
  assert_int_equal(stats_of(fx.a).reserved_bytes[GRT_STAT_ALL].current, 20 * MiB);
  drop_fixture(&fx);

  grt_alloc_config_default(&c);
  assert_int_equal(grt_alloc_config_parse(&c, "empty_cache_idle_cycles:2", err, sizeof err), GRT_OK);
  fx = make_fixture("caching", GRT_GiB, &c);
  x = must_malloc(fx.a, 12 * MiB, 0);
  assert_int_equal(grt_alloc_free(fx.a, x), GRT_OK);
  assert_int_equal(grt_alloc_empty_cache(fx.a), GRT_OK); /* sat through 0 earlier calls: kept */
  assert_int_equal(grt_alloc_empty_cache(fx.a), GRT_OK); /* 1: kept */
  assert_int_equal(stats_of(fx.a).num_device_free, 0);
  assert_int_equal(grt_alloc_empty_cache(fx.a), GRT_OK); /* 2: released */
  assert_int_equal(stats_of(fx.a).num_device_free, 1);
  drop_fixture(&fx);
}

/* Rebuilding a recorded state: segments at recorded addresses, live blocks at recorded offsets. */
static void test_import_state(void **state) {
  (void)state;
  fixture fx = make_fixture("caching", GRT_GiB, NULL);
  grt_device_config dc;
  grt_device_config_default(&dc);
  grt_devptr base = dc.base_address + 100 * MiB;
  assert_int_equal(grt_alloc_import_segment(fx.a, base, 20 * MiB, 3, 1), GRT_OK);
  assert_int_equal(grt_alloc_import_segment(fx.a, base + 10 * MiB, 2 * MiB, 3, 0), GRT_ERR_OOM); /* taken */
  assert_int_equal(grt_alloc_import_block(fx.a, base + 4 * MiB, 4 * MiB, 4 * MiB - 100), GRT_OK);
  assert_int_equal(grt_alloc_import_block(fx.a, base + 6 * MiB, MiB, MiB), GRT_ERR_INVALID_ARG); /* not free */
  assert_consistent(fx.a);
  grt_alloc_stats s = stats_of(fx.a);
  assert_int_equal(s.reserved_bytes[GRT_STAT_LARGE_POOL].current, 20 * MiB);
  assert_int_equal(s.allocated_bytes[GRT_STAT_LARGE_POOL].current, 4 * MiB);
  assert_int_equal(s.inactive_split[GRT_STAT_ALL].current, 2);
  assert_int_equal(s.num_device_alloc, 0);
  /* The replay continues from there: best fit picks the 4 MiB hole in front. */
  assert_int_equal(must_malloc(fx.a, 3 * MiB, 3), base);
  assert_int_equal(grt_alloc_free(fx.a, base + 4 * MiB), GRT_OK);
  /* The device placement hint hands out a recorded segment address. */
  assert_int_equal(grt_device_set_next_address(fx.dev, base + 200 * MiB), GRT_OK);
  assert_int_equal(must_malloc(fx.a, 30 * MiB, 0), base + 200 * MiB);
  drop_fixture(&fx);
  fx = make_fixture("naive", GRT_GiB, NULL);
  assert_int_equal(grt_alloc_import_segment(fx.a, base, 20 * MiB, 0, 1), GRT_ERR_UNSUPPORTED);
  drop_fixture(&fx);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_rounding),
      cmocka_unit_test(test_power2_rounding),
      cmocka_unit_test(test_bin_reuse_fast_path),
      cmocka_unit_test(test_split_accounting),
      cmocka_unit_test(test_large_no_split_small_remainder),
      cmocka_unit_test(test_cross_stream_sync_counted),
      cmocka_unit_test(test_same_stream_preferred),
      cmocka_unit_test(test_reserved_vs_allocated),
      cmocka_unit_test(test_flush_and_retry_on_oom),
      cmocka_unit_test(test_oom_message),
      cmocka_unit_test(test_split_block_not_returnable),
      cmocka_unit_test(test_merge_on_free),
      cmocka_unit_test(test_max_split_size),
      cmocka_unit_test(test_error_paths),
      cmocka_unit_test(test_record_stream_deferred_free),
      cmocka_unit_test(test_snapshot),
      cmocka_unit_test(test_memory_fraction_and_gc),
      cmocka_unit_test(test_naive),
      cmocka_unit_test(test_policy_options),
      cmocka_unit_test(test_import_state),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
