/* test_caching_pools.c — private pools of the caching allocator (PyTorch's
 * CUDA graph pools and torch.cuda.MemPool): isolation both ways, use_count
 * and release with empty_cache, the OOM flush, what a begun pool changes,
 * import into a pool, segment_pool_id in snapshots and JSON, every error
 * with its message and an unchanged allocator, and a randomized run checked
 * by the walker and a model after every step. Addresses are exact: the
 * simulated device places first fit from its base. */
#include <stdlib.h>
#include <string.h>

#include "alloc/caching.h"
#include "alloc_fixture.h"
#include "base/rng.h"
#include "gpurt/report.h"
#include "snapshot_equal.h"

#define B ((grt_devptr)0x7f0000000000ULL) /* the simulated device's base address */
#define POOL(x, y) ((grt_pool_id){(x), (y)})

static void ok(grt_status st) { assert_int_equal(st, GRT_OK); }

static grt_pool_info info_of(grt_allocator *a, grt_pool_id id) {
  grt_pool_info in;
  ok(grt_alloc_pool_info(a, id, &in));
  return in;
}

static void expect_info(grt_allocator *a, grt_pool_id id, uint64_t use_count, uint64_t segments, int begun) {
  grt_pool_info in = info_of(a, id);
  assert_int_equal(in.use_count, use_count);
  assert_int_equal(in.segments, segments);
  assert_int_equal(in.begun, begun);
}

static void expect_error(grt_allocator *a, grt_status got, grt_status want, const char *message) {
  assert_int_equal(got, want);
  assert_string_equal(grt_alloc_last_error(a), message);
}

static void expect_gone(grt_allocator *a, grt_pool_id id) {
  grt_pool_info in;
  char want[128];
  snprintf(want, sizeof want, "pool_info: unknown pool (%llu, %llu) (never created, or erased by empty_cache)",
           (unsigned long long)id.first, (unsigned long long)id.second);
  expect_error(a, grt_alloc_pool_info(a, id, &in), GRT_ERR_NOT_FOUND, want);
}

static grt_alloc_snapshot *snap_of(grt_allocator *a) {
  grt_alloc_snapshot *s;
  ok(grt_alloc_snapshot_take(a, &s));
  return s;
}

/* The snapshot segment holding ptr. */
static const grt_snapshot_segment *segment_of(const grt_alloc_snapshot *s, grt_devptr ptr) {
  for (size_t i = 0; i < s->n_segments; i++)
    if (ptr >= s->segments[i].address && ptr < s->segments[i].address + s->segments[i].total_size)
      return &s->segments[i];
  fail_msg("0x%llx is in no segment", (unsigned long long)ptr);
  return NULL;
}

static void expect_pool_of(grt_allocator *a, grt_devptr ptr, grt_pool_id id) {
  grt_alloc_snapshot *s = snap_of(a);
  const grt_snapshot_segment *g = segment_of(s, ptr);
  assert_int_equal(g->pool_id.first, id.first);
  assert_int_equal(g->pool_id.second, id.second);
  grt_alloc_snapshot_free(s);
}

/* ---- isolation ---- */

/* A freed private block is not reused by a default-pool malloc of the same
 * size, a freed default block not by a private one; each pool reuses its own. */
static void test_isolation_both_ways(void **state) {
  (void)state;
  fixture fx = make_fixture("caching", GRT_GiB, NULL);
  grt_pool_id p1 = POOL(1, 0), q7 = POOL(0, 7);
  ok(grt_alloc_pool_begin(fx.a, p1, 0));
  grt_devptr p = must_malloc(fx.a, 4096, 0);
  assert_int_equal(p, B);
  ok(grt_alloc_free(fx.a, p));
  ok(grt_alloc_pool_end(fx.a, p1, 0));
  grt_devptr d = must_malloc(fx.a, 4096, 0); /* not p: a default segment of its own */
  assert_int_equal(d, B + 2 * MiB);
  grt_alloc_stats st = stats_of(fx.a);
  assert_int_equal(st.num_device_alloc, 2);
  assert_int_equal(st.num_cache_hits, 0);
  assert_int_equal(st.segment[GRT_STAT_SMALL_POOL].current, 2); /* private segments count as any */
  assert_int_equal(st.reserved_bytes[GRT_STAT_ALL].current, 4 * MiB);
  assert_int_equal(st.allocated_bytes[GRT_STAT_ALL].current, 4096);
  ok(grt_alloc_free(fx.a, d));
  ok(grt_alloc_pool_begin(fx.a, q7, 0));
  grt_devptr q = must_malloc(fx.a, 4096, 0); /* neither d nor p */
  assert_int_equal(q, B + 4 * MiB);
  grt_devptr big = must_malloc(fx.a, 3 * MiB, 0);
  assert_int_equal(big, B + 6 * MiB);
  ok(grt_alloc_free(fx.a, q));
  ok(grt_alloc_free(fx.a, big));
  ok(grt_alloc_pool_end(fx.a, q7, 0));
  ok(grt_alloc_pool_begin(fx.a, p1, 0));
  assert_int_equal(must_malloc(fx.a, 4096, 0), B); /* the pool's own block */
  assert_int_equal(stats_of(fx.a).num_cache_hits, 1);
  expect_info(fx.a, p1, 2, 1, 1);
  expect_info(fx.a, q7, 1, 2, 0);
  ok(grt_alloc_free(fx.a, B));
  ok(grt_alloc_pool_end(fx.a, p1, 0));
  grt_alloc_snapshot *s = snap_of(fx.a);
  assert_int_equal(s->n_segments, 4);
  const uint64_t want[4][3] = {{B, 1, 0}, {B + 2 * MiB, 0, 0}, {B + 4 * MiB, 0, 7}, {B + 6 * MiB, 0, 7}};
  for (int i = 0; i < 4; i++) {
    assert_int_equal(s->segments[i].address, want[i][0]);
    assert_int_equal(s->segments[i].pool_id.first, want[i][1]);
    assert_int_equal(s->segments[i].pool_id.second, want[i][2]);
  }
  assert_int_equal(s->segments[3].is_large, 1);
  grt_alloc_snapshot_free(s);
  drop_fixture(&fx);
}

/* Only the begun stream's mallocs go to the pool; the newest begin on a stream wins. */
static void test_streams_and_newest_begin(void **state) {
  (void)state;
  fixture fx = make_fixture("caching", GRT_GiB, NULL);
  grt_pool_id p = POOL(1, 0), q = POOL(2, 0);
  ok(grt_alloc_pool_begin(fx.a, p, 3));
  ok(grt_alloc_pool_begin(fx.a, q, 3));
  grt_devptr x = must_malloc(fx.a, 1000, 3), y = must_malloc(fx.a, 1000, 4);
  expect_pool_of(fx.a, x, q);
  expect_pool_of(fx.a, y, POOL(0, 0));
  ok(grt_alloc_pool_end(fx.a, q, 3));
  grt_devptr z = must_malloc(fx.a, 1000, 3);
  expect_pool_of(fx.a, z, p);
  assert_int_equal(x, B);
  assert_int_equal(y, B + 2 * MiB);
  assert_int_equal(z, B + 4 * MiB);
  ok(grt_alloc_pool_end(fx.a, p, 3));
  ok(grt_alloc_free(fx.a, x));
  ok(grt_alloc_free(fx.a, y));
  ok(grt_alloc_free(fx.a, z));
  drop_fixture(&fx);
}

/* ---- use_count, release, empty_cache ---- */

static void test_release_and_empty_cache(void **state) {
  (void)state;
  fixture fx = make_fixture("caching", GRT_GiB, NULL);
  grt_pool_id p = POOL(1, 0);
  ok(grt_alloc_pool_begin(fx.a, p, 0));
  grt_pool_info in = info_of(fx.a, p);
  assert_int_equal(in.use_count, 1);
  assert_int_equal(in.begun, 1);
  assert_int_equal(in.stream, 0);
  ok(grt_alloc_free(fx.a, must_malloc(fx.a, 4096, 0)));
  ok(grt_alloc_pool_end(fx.a, p, 0));
  expect_info(fx.a, p, 1, 1, 0);
  ok(grt_alloc_free(fx.a, must_malloc(fx.a, 4096, 0)));
  ok(grt_alloc_empty_cache(fx.a)); /* the default segment goes, the pool's stays */
  grt_alloc_stats st = stats_of(fx.a);
  assert_int_equal(st.num_device_free, 1);
  assert_int_equal(st.reserved_bytes[GRT_STAT_ALL].current, 2 * MiB);
  expect_info(fx.a, p, 1, 1, 0);
  ok(grt_alloc_pool_retain(fx.a, p));
  expect_info(fx.a, p, 2, 1, 0);
  ok(grt_alloc_pool_release(fx.a, p));
  ok(grt_alloc_empty_cache(fx.a));
  expect_info(fx.a, p, 1, 1, 0);
  ok(grt_alloc_pool_release(fx.a, p));
  expect_info(fx.a, p, 0, 1, 0); /* freeable, not yet emptied */
  ok(grt_alloc_empty_cache(fx.a));
  st = stats_of(fx.a);
  assert_int_equal(st.num_device_free, 2);
  assert_int_equal(st.reserved_bytes[GRT_STAT_ALL].current, 0);
  assert_int_equal(st.segment[GRT_STAT_ALL].current, 0);
  expect_gone(fx.a, p);
  /* An erased id is a new pool: MemPool's life, create .. ~MemPool */
  ok(grt_alloc_pool_retain(fx.a, p));
  ok(grt_alloc_pool_begin(fx.a, p, 0));
  expect_info(fx.a, p, 2, 0, 1);
  ok(grt_alloc_pool_end(fx.a, p, 0));
  ok(grt_alloc_pool_release(fx.a, p));
  ok(grt_alloc_pool_release(fx.a, p));
  uint64_t syncs = stats_of(fx.a).num_sync_all_streams;
  ok(grt_alloc_pool_empty_cache(fx.a, p));
  expect_gone(fx.a, p);
  assert_int_equal(stats_of(fx.a).num_sync_all_streams, syncs + 1);
  drop_fixture(&fx);
}

/* A freeable pool keeps a segment with a live block; its blocks still serve
 * no default malloc; the pool's own empty_cache leaves the default pools alone. */
static void test_freeable_pool_with_live_block(void **state) {
  (void)state;
  fixture fx = make_fixture("caching", GRT_GiB, NULL);
  grt_pool_id p = POOL(4, 4);
  ok(grt_alloc_pool_begin(fx.a, p, 0));
  grt_devptr x = must_malloc(fx.a, 4096, 0), y = must_malloc(fx.a, 4096, 0);
  assert_int_equal(y, B + 4096);
  ok(grt_alloc_pool_end(fx.a, p, 0));
  ok(grt_alloc_pool_release(fx.a, p));
  ok(grt_alloc_free(fx.a, x));
  ok(grt_alloc_empty_cache(fx.a));
  expect_info(fx.a, p, 0, 1, 0);
  ok(grt_alloc_free(fx.a, y)); /* back into the pool */
  grt_devptr d = must_malloc(fx.a, 4096, 0);
  assert_int_equal(d, B + 2 * MiB);
  ok(grt_alloc_free(fx.a, d));
  ok(grt_alloc_pool_empty_cache(fx.a, p));
  expect_gone(fx.a, p);
  grt_alloc_stats st = stats_of(fx.a);
  assert_int_equal(st.num_device_free, 1);
  assert_int_equal(st.reserved_bytes[GRT_STAT_ALL].current, 2 * MiB); /* the default segment */
  drop_fixture(&fx);
}

/* ---- the OOM path ---- */

static void test_oom_flush_frees_freeable_pools(void **state) {
  (void)state;
  fixture fx = make_fixture("caching", 64 * MiB, NULL);
  grt_pool_id p = POOL(1, 0);
  ok(grt_alloc_pool_begin(fx.a, p, 0));
  assert_int_equal(must_malloc(fx.a, 40 * MiB, 0), B);
  ok(grt_alloc_free(fx.a, B));
  ok(grt_alloc_pool_end(fx.a, p, 0));
  grt_devptr x = 0;
  expect_error(fx.a, grt_alloc_malloc(fx.a, 40 * MiB, 0, &x), GRT_ERR_OOM,
               "out of memory: tried to allocate 40.00 MiB; the device has a total capacity of 64.00 MiB of which "
               "24.00 MiB is free. Of the memory in use, 40.00 MiB is allocated, with 40.00 MiB allocated in private "
               "pools, and 0 B is reserved but unallocated");
  grt_alloc_stats st = stats_of(fx.a);
  assert_int_equal(st.num_alloc_retries, 1);
  assert_int_equal(st.num_ooms, 1);
  assert_int_equal(st.num_device_free, 0);
  expect_info(fx.a, p, 1, 1, 0);
  ok(grt_alloc_pool_release(fx.a, p));
  assert_int_equal(must_malloc(fx.a, 40 * MiB, 0), B); /* the flush freed the pool's segment */
  st = stats_of(fx.a);
  assert_int_equal(st.num_alloc_retries, 2);
  assert_int_equal(st.num_device_free, 1);
  assert_int_equal(st.segment[GRT_STAT_LARGE_POOL].current, 1);
  expect_gone(fx.a, p);
  expect_pool_of(fx.a, B, POOL(0, 0));
  ok(grt_alloc_free(fx.a, B));
  drop_fixture(&fx);
}

/* While a pool is begun: no final flush on OOM, and empty_cache frees only the
 * freeable private pools, waiting for no event. */
static void test_begun_pool_spares_default_pools(void **state) {
  (void)state;
  fixture fx = make_fixture("caching", 64 * MiB, NULL);
  grt_pool_id p = POOL(1, 0), q = POOL(2, 0);
  ok(grt_alloc_free(fx.a, must_malloc(fx.a, 40 * MiB, 0))); /* cached at B */
  ok(grt_alloc_pool_begin(fx.a, q, 3));
  assert_int_equal(must_malloc(fx.a, 4096, 3), B + 40 * MiB);
  ok(grt_alloc_free(fx.a, B + 40 * MiB));
  ok(grt_alloc_pool_end(fx.a, q, 3));
  ok(grt_alloc_pool_release(fx.a, q));
  ok(grt_alloc_pool_begin(fx.a, p, 1));
  grt_devptr x = 0;
  assert_int_equal(grt_alloc_malloc(fx.a, 30 * MiB, 2, &x), GRT_ERR_OOM);
  grt_alloc_stats st = stats_of(fx.a);
  assert_int_equal(st.num_alloc_retries, 0);
  assert_int_equal(st.num_device_free, 0);
  ok(grt_alloc_empty_cache(fx.a));
  st = stats_of(fx.a);
  assert_int_equal(st.num_device_free, 1); /* q's segment only */
  assert_int_equal(st.num_sync_all_streams, 0);
  assert_int_equal(st.reserved_bytes[GRT_STAT_ALL].current, 40 * MiB);
  expect_gone(fx.a, q);
  ok(grt_alloc_pool_end(fx.a, p, 1));
  x = must_malloc(fx.a, 30 * MiB, 2); /* now the flush runs */
  assert_int_equal(x, B);
  st = stats_of(fx.a);
  assert_int_equal(st.num_alloc_retries, 1);
  assert_int_equal(st.num_sync_all_streams, 1);
  ok(grt_alloc_free(fx.a, x));
  drop_fixture(&fx);
}

/* ---- events ---- */

/* While a pool is begun, mallocs process no completed event (PyTorch queries
 * none during a capture); the pool's empty_cache waits for its own events only. */
static void test_events_and_pools(void **state) {
  (void)state;
  fixture fx = make_fixture("caching", GRT_GiB, NULL); /* events complete at the next malloc */
  grt_devptr x = must_malloc(fx.a, 4096, 0);
  ok(grt_alloc_record_stream(fx.a, x, 1));
  ok(grt_alloc_free(fx.a, x));
  ok(grt_alloc_pool_begin(fx.a, POOL(1, 0), 5));
  assert_int_equal(must_malloc(fx.a, 4096, 0), B + 4096);
  assert_int_equal(stats_of(fx.a).pending_free_blocks, 1);
  ok(grt_alloc_pool_end(fx.a, POOL(1, 0), 5));
  assert_int_equal(must_malloc(fx.a, 4096, 0), B);
  assert_int_equal(stats_of(fx.a).pending_free_blocks, 0);
  drop_fixture(&fx);

  fake_events *ev = calloc(1, sizeof *ev);
  assert_non_null(ev);
  grt_stream_ops ops = fake_ops(ev);
  grt_alloc_config cfg;
  grt_alloc_config_default(&cfg);
  cfg.stream_ops = &ops;
  fx = make_fixture("caching", GRT_GiB, &cfg);
  grt_pool_id p = POOL(1, 0);
  ok(grt_alloc_pool_begin(fx.a, p, 0));
  x = must_malloc(fx.a, 4096, 0);
  ok(grt_alloc_record_stream(fx.a, x, 1));
  ok(grt_alloc_free(fx.a, x));
  ok(grt_alloc_pool_end(fx.a, p, 0));
  grt_devptr d = must_malloc(fx.a, 4096, 0);
  ok(grt_alloc_record_stream(fx.a, d, 2));
  ok(grt_alloc_free(fx.a, d));
  ok(grt_alloc_pool_release(fx.a, p));
  ok(grt_alloc_pool_empty_cache(fx.a, p));
  assert_int_equal(ev->synced, 1);
  grt_alloc_stats st = stats_of(fx.a);
  assert_int_equal(st.pending_free_blocks, 1); /* the default block still waits */
  assert_int_equal(st.num_device_free, 1);
  assert_int_equal(st.num_sync_all_streams, 1);
  expect_gone(fx.a, p);
  ok(grt_alloc_empty_cache(fx.a));
  assert_int_equal(ev->synced, 2);
  assert_int_equal(stats_of(fx.a).pending_free_blocks, 0);
  drop_fixture(&fx);
  assert_int_equal(ev->destroyed, ev->recorded);
  free(ev);
}

/* ---- import ---- */

static void test_import_into_pool(void **state) {
  (void)state;
  fixture fx = make_fixture("caching", GRT_GiB, NULL);
  grt_devptr hi = B + GRT_GiB - 64 * MiB;
  grt_pool_id p = POOL(5, 5);
  ok(grt_alloc_import_segment_pool(fx.a, p, hi, 20 * MiB, 2, 1));
  expect_info(fx.a, p, 1, 1, 0);
  ok(grt_alloc_import_block(fx.a, hi + 2 * MiB, 4 * MiB, 4 * MiB - 100));
  grt_alloc_stats st = stats_of(fx.a);
  assert_int_equal(st.segment[GRT_STAT_LARGE_POOL].current, 1);
  assert_int_equal(st.inactive_split[GRT_STAT_ALL].current, 2);
  assert_int_equal(st.num_device_alloc, 0);
  grt_alloc_snapshot *s = snap_of(fx.a);
  assert_int_equal(s->n_segments, 1);
  assert_int_equal(s->segments[0].pool_id.first, 5);
  assert_int_equal(s->segments[0].pool_id.second, 5);
  assert_int_equal(s->segments[0].n_blocks, 3);
  grt_alloc_snapshot_free(s);
  ok(grt_alloc_free(fx.a, hi + 2 * MiB));
  assert_int_equal(must_malloc(fx.a, 4 * MiB, 2), B); /* not the pool's free 20 MiB */
  ok(grt_alloc_free(fx.a, B));
  ok(grt_alloc_pool_retain(fx.a, p));
  ok(grt_alloc_import_segment_pool(fx.a, p, hi + 20 * MiB, 2 * MiB, 2, 0));
  expect_info(fx.a, p, 2, 2, 0); /* importing is not a use */
  ok(grt_alloc_import_segment_pool(fx.a, POOL(0, 0), hi + 40 * MiB, 2 * MiB, 0, 0));
  expect_pool_of(fx.a, hi + 40 * MiB, POOL(0, 0));
  expect_pool_of(fx.a, hi + 20 * MiB, p);
  assert_int_equal(grt_alloc_import_segment_pool(fx.a, POOL(6, 0), hi, 2 * MiB, 0, 0), GRT_ERR_OOM);
  assert_string_equal(grt_alloc_last_error(fx.a),
                      "cannot place an imported segment at 0x7f003c000000 (+2097152 bytes): device out of memory");
  expect_gone(fx.a, POOL(6, 0)); /* a failed import creates no pool */
  ok(grt_alloc_pool_release(fx.a, p));
  ok(grt_alloc_pool_release(fx.a, p));
  ok(grt_alloc_empty_cache(fx.a));
  expect_gone(fx.a, p);
  st = stats_of(fx.a);
  assert_int_equal(st.reserved_bytes[GRT_STAT_ALL].current, 0);
  assert_int_equal(st.num_device_free, 4);
  drop_fixture(&fx);
}

/* ---- snapshots and JSON ---- */

static void test_snapshot_json_pool_ids(void **state) {
  (void)state;
  fixture fx = make_fixture("caching", GRT_GiB, NULL);
  ok(grt_alloc_pool_begin(fx.a, POOL(7, 3), 0));
  grt_devptr x = must_malloc(fx.a, 4096, 0);
  ok(grt_alloc_pool_end(fx.a, POOL(7, 3), 0));
  grt_devptr y = must_malloc(fx.a, 2 * MiB, 0);
  grt_alloc_snapshot *s = snap_of(fx.a);
  char *text;
  ok(grt_snapshot_json(s, 0, &text));
  const char *seg0 = strstr(text, "\"address\": 139637976727552, \"total_size\": 2097152");
  const char *seg1 = strstr(text, "\"address\": 139637978824704, \"total_size\": 20971520");
  assert_non_null(seg0);
  assert_non_null(seg1);
  const char *id0 = strstr(seg0, "\"segment_pool_id\": [7, 3]"), *id1 = strstr(seg1, "\"segment_pool_id\": [0, 0]");
  assert_true(id0 && id0 < seg1);
  assert_non_null(id1);
  free(text);
  grt_alloc_snapshot_free(s);
  ok(grt_alloc_free(fx.a, x));
  ok(grt_alloc_free(fx.a, y));
  drop_fixture(&fx);
}

/* Expandable segments: one reservation per (stream, pool), the pool's included. */
static void test_expandable_pools(void **state) {
  (void)state;
  grt_alloc_config cfg;
  grt_alloc_config_default(&cfg);
  cfg.expandable_segments = 1;
  fixture fx = make_fixture("caching", GRT_GiB, &cfg);
  grt_pool_id p = POOL(1, 0);
  ok(grt_alloc_pool_begin(fx.a, p, 0));
  grt_devptr x = must_malloc(fx.a, 4096, 0);
  ok(grt_alloc_pool_end(fx.a, p, 0));
  grt_devptr y = must_malloc(fx.a, 4096, 0);
  grt_alloc_snapshot *s = snap_of(fx.a);
  assert_int_equal(s->n_segments, 2);
  const grt_snapshot_segment *gx = segment_of(s, x), *gy = segment_of(s, y);
  assert_true(gx != gy && gx->is_expandable && gy->is_expandable);
  assert_int_equal(gx->address, x);
  assert_int_equal(gy->address, y);
  assert_int_equal(gx->pool_id.first, 1);
  assert_int_equal(gy->pool_id.first, 0);
  assert_int_equal(gx->total_size, 2 * MiB);
  grt_alloc_snapshot_free(s);
  expect_info(fx.a, p, 1, 1, 0);
  ok(grt_alloc_free(fx.a, x));
  ok(grt_alloc_free(fx.a, y));
  ok(grt_alloc_empty_cache(fx.a)); /* in use: mapped and reserved */
  grt_alloc_stats st = stats_of(fx.a);
  assert_int_equal(st.reserved_bytes[GRT_STAT_ALL].current, 2 * MiB);
  ok(grt_alloc_pool_release(fx.a, p));
  ok(grt_alloc_empty_cache(fx.a));
  expect_gone(fx.a, p);
  st = stats_of(fx.a);
  assert_int_equal(st.reserved_bytes[GRT_STAT_ALL].current, 0);
  assert_int_equal(st.num_device_alloc, 2);
  assert_int_equal(st.num_device_free, 2);
  drop_fixture(&fx);
}

/* ---- errors ---- */

typedef struct seen {
  grt_alloc_stats stats;
  grt_device_stats dev;
  grt_alloc_snapshot *snap;
  grt_pool_info p, q;
} seen;

static seen look(const fixture *fx) {
  seen s;
  s.stats = stats_of(fx->a);
  s.dev = dev_stats(fx->dev);
  s.snap = snap_of(fx->a);
  s.p = info_of(fx->a, POOL(1, 0));
  s.q = info_of(fx->a, POOL(2, 0));
  return s;
}

static void expect_unchanged(const fixture *fx, seen *before) {
  seen now = look(fx);
  assert_memory_equal(&before->stats, &now.stats, sizeof now.stats);
  assert_memory_equal(&before->dev, &now.dev, sizeof now.dev);
  assert_true(snapshots_equal(before->snap, now.snap));
  assert_memory_equal(&before->p, &now.p, sizeof now.p);
  assert_memory_equal(&before->q, &now.q, sizeof now.q);
  assert_consistent(fx->a);
  grt_alloc_snapshot_free(now.snap);
}

static void test_errors(void **state) {
  (void)state;
  fixture fx = make_fixture("caching", GRT_GiB, NULL);
  grt_pool_id p = POOL(1, 0), q = POOL(2, 0), none = POOL(9, 9), dflt = POOL(0, 0);
  ok(grt_alloc_pool_begin(fx.a, p, 3));
  grt_devptr x = must_malloc(fx.a, 4096, 3);
  ok(grt_alloc_pool_retain(fx.a, q));
  ok(grt_alloc_pool_release(fx.a, q)); /* q: freeable, not emptied */
  seen before = look(&fx);
  grt_pool_info in;
  expect_error(fx.a, grt_alloc_pool_begin(fx.a, dflt, 0), GRT_ERR_INVALID_ARG,
               "pool_begin: pool id (0, 0) is the default pool; a private pool's id is nonzero");
  expect_error(fx.a, grt_alloc_pool_retain(fx.a, dflt), GRT_ERR_INVALID_ARG,
               "pool_retain: pool id (0, 0) is the default pool; a private pool's id is nonzero");
  expect_error(fx.a, grt_alloc_pool_info(fx.a, dflt, &in), GRT_ERR_INVALID_ARG,
               "pool_info: pool id (0, 0) is the default pool; a private pool's id is nonzero");
  expect_error(fx.a, grt_alloc_pool_begin(fx.a, p, 4), GRT_ERR_STATE,
               "pool_begin: pool (1, 0) is already begun (on stream 3)");
  expect_error(fx.a, grt_alloc_pool_begin(fx.a, q, 4), GRT_ERR_STATE,
               "pool_begin: pool (2, 0) was released (use_count 0) and cannot be used again");
  expect_error(fx.a, grt_alloc_pool_retain(fx.a, q), GRT_ERR_STATE,
               "pool_retain: pool (2, 0) was released (use_count 0) and cannot be used again");
  expect_error(fx.a, grt_alloc_pool_end(fx.a, none, 3), GRT_ERR_NOT_FOUND,
               "pool_end: unknown pool (9, 9) (never created, or erased by empty_cache)");
  expect_error(fx.a, grt_alloc_pool_end(fx.a, q, 3), GRT_ERR_STATE, "pool_end: pool (2, 0) is not begun");
  expect_error(fx.a, grt_alloc_pool_end(fx.a, p, 4), GRT_ERR_INVALID_ARG,
               "pool_end: pool (1, 0) was begun on stream 3, not 4");
  expect_error(fx.a, grt_alloc_pool_release(fx.a, none), GRT_ERR_NOT_FOUND,
               "pool_release: unknown pool (9, 9) (never created, or erased by empty_cache)");
  expect_error(fx.a, grt_alloc_pool_release(fx.a, q), GRT_ERR_STATE,
               "pool_release: pool (2, 0) is already released (use_count 0)");
  expect_error(fx.a, grt_alloc_pool_release(fx.a, p), GRT_ERR_BUSY,
               "pool_release: pool (1, 0) is still begun on stream 3; end it before its last release");
  expect_error(fx.a, grt_alloc_pool_empty_cache(fx.a, q), GRT_ERR_CAPTURE_UNSUPPORTED,
               "pool_empty_cache: pool (2, 0) cannot be emptied while pool (1, 0) is begun (its pending frees "
               "would be waited for during a capture)");
  expect_error(fx.a, grt_alloc_pool_empty_cache(fx.a, none), GRT_ERR_NOT_FOUND,
               "pool_empty_cache: unknown pool (9, 9) (never created, or erased by empty_cache)");
  expect_error(fx.a, grt_alloc_pool_info(fx.a, none, &in), GRT_ERR_NOT_FOUND,
               "pool_info: unknown pool (9, 9) (never created, or erased by empty_cache)");
  assert_int_equal(grt_alloc_import_segment_pool(fx.a, q, B + 3, 2 * MiB, 0, 0), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt_alloc_pool_info(fx.a, p, NULL), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt_alloc_pool_begin(NULL, p, 0), GRT_ERR_INVALID_ARG);
  /* a free returns a block to its own pool whichever pool is begun */
  expect_error(fx.a, grt_alloc_free(fx.a, x + 512), GRT_ERR_INTERIOR_POINTER,
               "0x7f0000000200 points 512 bytes inside the block at 0x7f0000000000");
  expect_unchanged(&fx, &before);
  grt_alloc_snapshot_free(before.snap);
  ok(grt_alloc_free(fx.a, x));
  expect_error(fx.a, grt_alloc_free(fx.a, x), GRT_ERR_DOUBLE_FREE,
               "double free of 0x7f0000000000: the address lies in free cached memory");
  ok(grt_alloc_pool_end(fx.a, p, 3));
  ok(grt_alloc_pool_release(fx.a, p));
  drop_fixture(&fx);
}

/* Every other policy refuses the pool calls; (0, 0) keeps its default meaning. */
static void test_other_policies(void **state) {
  (void)state;
  const char *const names[] = {"naive", "bestfit", "sharded", "bump", "buddy", "slab", "async"};
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
    fixture fx = make_fixture(names[i], GRT_GiB, NULL);
    char want[96];
    snprintf(want, sizeof want, "policy \"%s\" has no private pools (only \"caching\" has them)", names[i]);
    grt_pool_info in;
    expect_error(fx.a, grt_alloc_pool_begin(fx.a, POOL(1, 0), 0), GRT_ERR_UNSUPPORTED, want);
    expect_error(fx.a, grt_alloc_pool_retain(fx.a, POOL(1, 0)), GRT_ERR_UNSUPPORTED, want);
    expect_error(fx.a, grt_alloc_pool_end(fx.a, POOL(1, 0), 0), GRT_ERR_UNSUPPORTED, want);
    expect_error(fx.a, grt_alloc_pool_release(fx.a, POOL(1, 0)), GRT_ERR_UNSUPPORTED, want);
    expect_error(fx.a, grt_alloc_pool_empty_cache(fx.a, POOL(1, 0)), GRT_ERR_UNSUPPORTED, want);
    expect_error(fx.a, grt_alloc_pool_info(fx.a, POOL(1, 0), &in), GRT_ERR_UNSUPPORTED, want);
    expect_error(fx.a, grt_alloc_import_segment_pool(fx.a, POOL(1, 0), B, 2 * MiB, 0, 0), GRT_ERR_UNSUPPORTED, want);
    ok(grt_alloc_pool_empty_cache(fx.a, POOL(0, 0)));
    drop_fixture(&fx);
  }
}

/* ---- the walker sees broken pool invariants ---- */

static void expect_walker_says(grt_allocator *a, const char *message) {
  char msg[256] = "";
  assert_int_equal(grt_alloc_check(a, msg, sizeof msg), GRT_ERR_INTERNAL);
  assert_string_equal(msg, message);
}

static void test_walker_pool_invariants(void **state) {
  (void)state;
  fixture fx = make_fixture("caching", GRT_GiB, NULL);
  caching *c = fx.a->impl;
  ok(grt_alloc_pool_begin(fx.a, POOL(1, 0), 0));
  grt_devptr x = must_malloc(fx.a, 4096, 0);
  ok(grt_alloc_pool_retain(fx.a, POOL(2, 0)));
  cprivate *p = c->pools[0], *q = c->pools[1];
  p->n_segs++;
  expect_walker_says(fx.a, "private pool (1, 0) counts 2 segments but holds 1");
  p->n_segs--;
  q->id = p->id;
  expect_walker_says(fx.a, "two private pools have the id (1, 0)");
  q->id = POOL(0, 0);
  expect_walker_says(fx.a, "private pool 1 has the default id (0, 0)");
  q->id = POOL(2, 0);
  q->small.owner = p;
  expect_walker_says(fx.a, "private pool (2, 0): its small or large pool is not its own");
  q->small.owner = q;
  cblock *b = grt__u64map_get(&c->active, x);
  b->pool = &q->small;
  expect_walker_says(fx.a, "block 0x7f0000000000: wrong segment or pool");
  b->pool = &p->small;
  cpool stray = p->small;
  b->seg->pool = &stray;
  expect_walker_says(fx.a, "segment 0x7f0000000000: its pool is not a known pool");
  b->seg->pool = &p->small;
  p->use_count = 0;
  expect_walker_says(fx.a, "begun pool (1, 0) is freeable");
  p->use_count = 1;
  c->captures[0].pool = q;
  c->captures[1] = (ccapture){q, 1};
  c->n_captures = 2;
  expect_walker_says(fx.a, "pool (2, 0) is begun twice");
  c->n_captures = 1;
  c->captures[0].pool = p;
  assert_consistent(fx.a);
  ok(grt_alloc_free(fx.a, x));
  ok(grt_alloc_pool_end(fx.a, POOL(1, 0), 0));
  drop_fixture(&fx);
}

/* ---- randomized ---- */

enum { N_IDS = 4, N_STREAMS = 3, MAX_LIVE = 256 };

/* What the test knows of each pool id: -1 unknown, else its use_count; and the stream it is begun on. */
typedef struct model {
  int strict; /* no pool in use loses memory (false where max_split_size lets a malloc free its pool's) */
  unsigned may_erase, must_erase; /* the last step may erase / must have erased freeable empty pools */
  int64_t use[N_IDS];
  int begun[N_IDS];          /* -1: not begun */
  uint64_t held[N_IDS];      /* bytes its segments held after the last step */
  int order[N_IDS], n_order; /* begun ids, oldest first */
  grt_devptr live[MAX_LIVE];
  size_t n_live;
  unsigned pool_mallocs, ooms, erased, calls; /* what the run exercised */
} model;

static grt_pool_id id_of(int i) { return POOL((uint64_t)i + 1, (uint64_t)i * 3); }

/* Bytes held by each pool's segments, from a snapshot; each segment of a known pool id. */
static void held_by(grt_allocator *a, uint64_t held[N_IDS]) {
  memset(held, 0, N_IDS * sizeof *held);
  grt_alloc_snapshot *s = snap_of(a);
  for (size_t k = 0; k < s->n_segments; k++) {
    grt_pool_id id = s->segments[k].pool_id;
    if (!id.first && !id.second) continue;
    assert_true(id.first >= 1 && id.first <= N_IDS && id.second == (id.first - 1) * 3);
    held[id.first - 1] += s->segments[k].total_size;
  }
  grt_alloc_snapshot_free(s);
}

/* The pool a malloc on the stream goes to: the newest begun there, else -1 (default). */
static int expected_pool(const model *m, int stream) {
  for (int k = m->n_order; k-- > 0;)
    if (m->begun[m->order[k]] == stream) return m->order[k];
  return -1;
}

static void unbegin(model *m, int i) {
  int k = 0;
  while (m->order[k] != i) k++;
  memmove(&m->order[k], &m->order[k + 1], (size_t)(m->n_order - k - 1) * sizeof *m->order);
  m->n_order--;
  m->begun[i] = -1;
}

static void random_malloc(grt_allocator *a, model *m, grt__rng *r) {
  int s = (int)grt__rng_below(r, N_STREAMS);
  uint64_t size = grt__rng_below(r, 4) ? 1 + grt__rng_below(r, MiB) : MiB + grt__rng_below(r, 24 * MiB);
  grt_devptr p;
  grt_status st = grt_alloc_malloc(a, size, (grt_stream_id)s, &p);
  if (st == GRT_ERR_OOM) {
    m->ooms++;
    return;
  }
  ok(st);
  int want = expected_pool(m, s);
  m->pool_mallocs += want >= 0;
  expect_pool_of(a, p, want < 0 ? POOL(0, 0) : id_of(want));
  m->live[m->n_live++] = p;
}

static void random_pool_call(grt_allocator *a, model *m, grt__rng *r) {
  int i = (int)grt__rng_below(r, N_IDS), s = (int)grt__rng_below(r, N_STREAMS);
  grt_pool_id id = id_of(i);
  uint64_t kind = grt__rng_below(r, 6);
  switch (kind == 5 ? 2 : kind) { /* releases twice as often, so that pools are erased */
    case 0:                       /* begin */
      if (m->use[i] == 0 || m->begun[i] >= 0) return;
      ok(grt_alloc_pool_begin(a, id, (grt_stream_id)s));
      m->use[i] = m->use[i] < 0 ? 1 : m->use[i] + 1;
      m->begun[i] = s;
      m->order[m->n_order++] = i;
      return;
    case 1: /* end */
      if (m->begun[i] < 0) return;
      ok(grt_alloc_pool_end(a, id, (grt_stream_id)m->begun[i]));
      unbegin(m, i);
      return;
    case 2: /* release */
      if (m->use[i] <= 0 || (m->use[i] == 1 && m->begun[i] >= 0)) return;
      ok(grt_alloc_pool_release(a, id));
      m->use[i]--;
      return;
    case 3: /* retain */
      if (m->use[i] == 0) return;
      ok(grt_alloc_pool_retain(a, id));
      m->use[i] = m->use[i] < 0 ? 1 : m->use[i] + 1;
      return;
    default: /* the pool's empty_cache (refused while any pool is begun) */
      if (m->use[i] < 0 || m->n_order) return;
      ok(grt_alloc_pool_empty_cache(a, id));
      m->may_erase = m->must_erase = 1u << i;
      return;
  }
}

/* After each step: the walker, each pool's use_count and existence, and no
 * pool in use lost memory. Only a step that may release (a malloc's flush,
 * an empty_cache) may erase a pool, only a freeable one, and an empty_cache
 * must erase each freeable pool it looked at that holds no segment. */
static void check_step(grt_allocator *a, model *m) {
  assert_consistent(a);
  uint64_t held[N_IDS];
  held_by(a, held);
  for (int i = 0; i < N_IDS; i++) {
    grt_pool_info in;
    grt_status st = grt_alloc_pool_info(a, id_of(i), &in);
    if (m->use[i] < 0) {
      assert_int_equal(st, GRT_ERR_NOT_FOUND);
      continue;
    }
    if (st == GRT_ERR_NOT_FOUND) {
      if (m->use[i] != 0 || !(m->may_erase & 1u << i)) fail_msg("pool %d erased while in use or untouched", i);
      m->use[i] = -1;
      m->erased++;
      continue;
    }
    ok(st);
    if (m->use[i] == 0 && (m->must_erase & 1u << i) && in.segments == 0) fail_msg("pool %d: empty yet kept", i);
    assert_int_equal(in.use_count, (uint64_t)m->use[i]);
    assert_int_equal(in.begun, m->begun[i] >= 0);
    if (held[i] && !in.segments) fail_msg("pool %d holds memory but counts no segment", i);
    if (m->use[i] > 0 && held[i] < m->held[i] && (m->strict || m->begun[i] < 0))
      fail_msg("pool %d lost memory while in use", i);
  }
  memcpy(m->held, held, sizeof held);
  m->may_erase = m->must_erase = 0;
}

static void run_random(const char *conf, uint64_t seed) {
  grt_alloc_config cfg;
  grt_alloc_config_default(&cfg);
  char err[128];
  if (conf) ok(grt_alloc_config_parse(&cfg, conf, err, sizeof err));
  fixture fx = make_fixture("caching", 256 * MiB, &cfg);
  model m = {.strict = cfg.max_split_size == GRT_UNLIMITED};
  for (int i = 0; i < N_IDS; i++) m.use[i] = -1, m.begun[i] = -1;
  grt__rng r;
  grt__rng_seed(&r, seed);
  for (int step = 0; step < 5000; step++) {
    uint64_t k = grt__rng_below(&r, 100);
    if (k < 35 && m.n_live < MAX_LIVE) {
      random_malloc(fx.a, &m, &r);
      m.may_erase = ~0u; /* an OOM flush */
    } else if (k < 65 && m.n_live) {
      size_t j = (size_t)grt__rng_below(&r, m.n_live);
      if (grt__rng_below(&r, 4) == 0) ok(grt_alloc_record_stream(fx.a, m.live[j], 1 + grt__rng_below(&r, 2)));
      ok(grt_alloc_free(fx.a, m.live[j]));
      m.live[j] = m.live[--m.n_live];
    } else if (k < 70) {
      ok(grt_alloc_empty_cache(fx.a));
      m.may_erase = m.must_erase = ~0u;
    } else {
      random_pool_call(fx.a, &m, &r);
      m.calls++;
    }
    check_step(fx.a, &m);
  }
  print_message("%s: %u mallocs into pools, %u OOMs, %u pools erased, %u pool calls\n", conf ? conf : "default",
                m.pool_mallocs, m.ooms, m.erased, m.calls);
  assert_true(m.pool_mallocs > 400 && m.erased > 20);
  while (m.n_live) ok(grt_alloc_free(fx.a, m.live[--m.n_live]));
  for (int i = 0; i < N_IDS; i++) {
    if (m.begun[i] >= 0) ok(grt_alloc_pool_end(fx.a, id_of(i), (grt_stream_id)m.begun[i]));
    for (; m.use[i] > 0; m.use[i]--) ok(grt_alloc_pool_release(fx.a, id_of(i)));
  }
  ok(grt_alloc_empty_cache(fx.a));
  for (int i = 0; i < N_IDS; i++) expect_gone(fx.a, id_of(i));
  grt_alloc_stats st = stats_of(fx.a);
  assert_int_equal(st.reserved_bytes[GRT_STAT_ALL].current, 0);
  if (!cfg.expandable_segments) assert_int_equal(st.num_device_alloc, st.num_device_free); /* maps and unmaps differ */
  drop_fixture(&fx);
}

/* Three configurations: default, expandable segments, and max_split_size with cross-stream reuse. */
static void test_random(void **state) {
  (void)state;
  run_random(NULL, 20261201);
  run_random("expandable_segments:True", 7);
  run_random("max_split_size_mb:32,cross_stream:with_event", 99);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_isolation_both_ways),
      cmocka_unit_test(test_streams_and_newest_begin),
      cmocka_unit_test(test_release_and_empty_cache),
      cmocka_unit_test(test_freeable_pool_with_live_block),
      cmocka_unit_test(test_oom_flush_frees_freeable_pools),
      cmocka_unit_test(test_begun_pool_spares_default_pools),
      cmocka_unit_test(test_events_and_pools),
      cmocka_unit_test(test_import_into_pool),
      cmocka_unit_test(test_snapshot_json_pool_ids),
      cmocka_unit_test(test_expandable_pools),
      cmocka_unit_test(test_errors),
      cmocka_unit_test(test_other_policies),
      cmocka_unit_test(test_walker_pool_invariants),
      cmocka_unit_test(test_random),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
