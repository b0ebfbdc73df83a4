/* test_alloc_zoo_api.c — the zoo policies' own calls and their less-trodden
 * paths: record_stream on every policy, argument validation of each
 * policy-specific setter (each refusal changes nothing), the fallback to a
 * segment of the request's own size when the preferred arena or segment does
 * not fit the device, the fault-injection wording of an OOM, bump's snapshot
 * of dead space, and the sharded policy's fan-out calls. */
#include <stdlib.h>
#include <string.h>

#include "alloc_fixture.h"
#include "gpurt/policy.h"

static const char *const zoo[] = {"bump", "buddy", "slab", "async"};
#define N_ZOO (sizeof zoo / sizeof zoo[0])

/* record_stream: live blocks accept it (no deferral in the zoo), bad pointers fail as free would. */
static void test_record_stream(void **state) {
  (void)state;
  for (size_t p = 0; p < N_ZOO; p++) {
    fixture fx = make_fixture(zoo[p], 256 * MiB, NULL);
    grt_devptr a = must_malloc(fx.a, 5000, 0), b = must_malloc(fx.a, 3 * MiB, 1);
    grt_alloc_stats before = stats_of(fx.a);
    assert_int_equal(grt_alloc_record_stream(fx.a, a, 2), GRT_OK);
    assert_int_equal(grt_alloc_record_stream(fx.a, b, 3), GRT_OK);
    assert_int_equal(grt_alloc_record_stream(fx.a, a + 512, 2), GRT_ERR_INTERIOR_POINTER);
    assert_true(grt_alloc_last_error(fx.a)[0] != 0);
    assert_int_equal(grt_alloc_record_stream(fx.a, 4096, 2), GRT_ERR_UNKNOWN_POINTER);
    grt_alloc_stats after = stats_of(fx.a);
    assert_memory_equal(&before, &after, sizeof before);
    assert_int_equal(grt_alloc_free(fx.a, a), GRT_OK); /* freed at once: nothing pending */
    assert_int_equal(stats_of(fx.a).pending_free_blocks, 0);
    assert_int_equal(stats_of(fx.a).allocation[GRT_STAT_ALL].current, 1);
    assert_int_equal(grt_alloc_record_stream(fx.a, a, 2), GRT_ERR_DOUBLE_FREE);
    assert_int_equal(grt_alloc_free(fx.a, b), GRT_OK);
    drop_fixture(&fx);
  }
}

static void expect_refused(grt_allocator *a, grt_status got, grt_status want) {
  assert_int_equal(got, want);
  assert_true(grt_alloc_last_error(a)[0] != 0);
}

/* Each setter refuses bad values and other policies; NULL is refused before anything. */
static void test_setter_validation(void **state) {
  (void)state;
  const uint64_t huge = (uint64_t)1 << 57;
  fixture bump = make_fixture("bump", 64 * MiB, NULL), buddy = make_fixture("buddy", 64 * MiB, NULL),
          slab = make_fixture("slab", 64 * MiB, NULL), async = make_fixture("async", 64 * MiB, NULL);
  expect_refused(bump.a, grt_alloc_set(bump.a, "arena_size", 0), GRT_ERR_INVALID_ARG);
  expect_refused(bump.a, grt_alloc_set(bump.a, "arena_size", huge), GRT_ERR_INVALID_ARG);
  expect_refused(buddy.a, grt_alloc_set(buddy.a, "segment_size", 256), GRT_ERR_INVALID_ARG);
  expect_refused(buddy.a, grt_alloc_set(buddy.a, "segment_size", huge), GRT_ERR_INVALID_ARG);
  expect_refused(slab.a, grt_alloc_set(slab.a, "page_size", 0), GRT_ERR_INVALID_ARG);
  expect_refused(slab.a, grt_alloc_set(slab.a, "page_size", 1000), GRT_ERR_INVALID_ARG);
  expect_refused(slab.a, grt_alloc_set(slab.a, "page_size", huge), GRT_ERR_INVALID_ARG);
  /* the refused values changed nothing: the defaults still apply */
  grt_devptr x = must_malloc(bump.a, 1000, 0);
  assert_int_equal(stats_of(bump.a).reserved_bytes[GRT_STAT_ALL].current, 64 * MiB);
  assert_int_equal(grt_alloc_free(bump.a, x), GRT_OK);
  x = must_malloc(slab.a, 1000, 0);
  uint64_t size, req;
  assert_int_equal(grt_alloc_block_info(slab.a, x, &size, &req), GRT_OK);
  assert_int_equal(size, 2 * MiB); /* one default page */
  size_t n;
  grt_devptr pages[2];
  assert_int_equal(grt_alloc_slab_pages(slab.a, x, pages, 2, NULL), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt_alloc_slab_pages(slab.a, x, NULL, 2, &n), GRT_ERR_INVALID_ARG);
  expect_refused(slab.a, grt_alloc_slab_pages(slab.a, 4096, pages, 2, &n), GRT_ERR_UNKNOWN_POINTER);
  expect_refused(slab.a, grt_alloc_slab_pages(slab.a, x + 512, pages, 2, &n), GRT_ERR_INTERIOR_POINTER);
  assert_int_equal(grt_alloc_free(slab.a, x), GRT_OK);
  expect_refused(slab.a, grt_alloc_slab_pages(slab.a, x, pages, 2, &n), GRT_ERR_DOUBLE_FREE);
  assert_int_equal(grt_alloc_get(async.a, "used_mem_high", NULL), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt_alloc_set(async.a, NULL, 0), GRT_ERR_INVALID_ARG);
  /* another policy's setting: unsupported, and the message names the policy's own */
  expect_refused(bump.a, grt_alloc_set(bump.a, "page_size", 4096), GRT_ERR_UNSUPPORTED);
  assert_string_equal(grt_alloc_last_error(bump.a),
                      "policy \"bump\" has no setting \"page_size\" (its settings: arena_size)");
  /* another policy's call: unsupported, and the message names both policies */
  expect_refused(slab.a, grt_alloc_bump_reset(slab.a), GRT_ERR_UNSUPPORTED);
  assert_string_equal(grt_alloc_last_error(slab.a), "this call needs an allocator of policy \"bump\", not \"slab\"");
  expect_refused(slab.a, grt_alloc_slab_pages(bump.a, 0, NULL, 0, &n), GRT_ERR_UNSUPPORTED);
  expect_refused(buddy.a, grt_alloc_async_trim_to(buddy.a, 0), GRT_ERR_UNSUPPORTED);
  expect_refused(slab.a, grt_alloc_set(slab.a, "release_threshold", 0), GRT_ERR_UNSUPPORTED);
  uint64_t v = 7;
  expect_refused(bump.a, grt_alloc_get(bump.a, "used_mem_high", &v), GRT_ERR_UNSUPPORTED);
  assert_int_equal(v, 7);
  expect_refused(async.a, grt_alloc_get(async.a, "no_such_key", &v), GRT_ERR_UNSUPPORTED);
  assert_int_equal(v, 7);
  expect_refused(async.a, grt_alloc_set(async.a, "segment_size", MiB), GRT_ERR_UNSUPPORTED);
  expect_refused(async.a, grt_alloc_set(async.a, "arena_size", MiB), GRT_ERR_UNSUPPORTED);
  assert_int_equal(grt_alloc_set(NULL, "arena_size", MiB), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt_alloc_bump_reset(NULL), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt_alloc_set(NULL, "segment_size", MiB), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt_alloc_set(NULL, "page_size", MiB), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt_alloc_slab_pages(NULL, 0, NULL, 0, &n), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt_alloc_set(NULL, "release_threshold", 0), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt_alloc_async_trim_to(NULL, 0), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt_alloc_get(NULL, "page_size", &v), GRT_ERR_INVALID_ARG);
  drop_fixture(&bump);
  drop_fixture(&buddy);
  drop_fixture(&slab);
  drop_fixture(&async);
}

/* A device smaller than the preferred arena/segment: the request gets one of its own size. */
static void test_small_device_fallback(void **state) {
  (void)state;
  static const struct {
    const char *policy;
    uint64_t reserved; /* for a 3 MiB request on a 48 MiB device */
  } cases[] = {
      {"bump", 3 * MiB},  /* the 64 MiB arena does not fit: an arena of the request's size */
      {"buddy", 4 * MiB}, /* nor the 64 MiB top order: the request's own power of two */
      {"async", 32 * MiB}, /* its 32 MiB chunk fits */
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    fixture fx = make_fixture(cases[i].policy, 48 * MiB, NULL);
    grt_devptr p = must_malloc(fx.a, 3 * MiB, 0);
    grt_alloc_stats s = stats_of(fx.a);
    assert_int_equal(s.reserved_bytes[GRT_STAT_ALL].current, cases[i].reserved);
    assert_int_equal(s.num_ooms, 0);
    assert_int_equal(grt_alloc_free(fx.a, p), GRT_OK);
    drop_fixture(&fx);
  }
  /* async on a device with 28 MiB free: not its 32 MiB chunk, the request rounded to 2 MiB */
  fixture fx = make_fixture("async", 48 * MiB, NULL);
  grt_devptr hog, p;
  assert_int_equal(grt_device_malloc(fx.dev, 20 * MiB, &hog), GRT_OK);
  assert_int_equal(grt_alloc_malloc(fx.a, 40 * MiB, 0, &p), GRT_ERR_OOM);
  p = must_malloc(fx.a, 26 * MiB - 4096, 0);
  assert_int_equal(stats_of(fx.a).reserved_bytes[GRT_STAT_ALL].current, 26 * MiB);
  assert_int_equal(grt_alloc_free(fx.a, p), GRT_OK);
  assert_int_equal(grt_alloc_async_trim_to(fx.a, 0), GRT_OK);
  assert_int_equal(grt_device_free(fx.dev, hog), GRT_OK);
  /* ... and with 25.5 MiB free, not even that: exactly the request */
  assert_int_equal(grt_device_malloc(fx.dev, 22 * MiB + MiB / 2, &hog), GRT_OK);
  p = must_malloc(fx.a, 25 * MiB + 512, 0);
  assert_int_equal(stats_of(fx.a).reserved_bytes[GRT_STAT_ALL].current, 25 * MiB + 512);
  assert_int_equal(grt_alloc_free(fx.a, p), GRT_OK);
  assert_int_equal(grt_alloc_async_trim_to(fx.a, 0), GRT_OK);
  assert_int_equal(grt_device_free(fx.dev, hog), GRT_OK);
  drop_fixture(&fx);
}

/* A device malloc failed by fault injection: when it is the last device answer, the OOM message names it;
 * when a retry follows (bump, buddy: after returning empty arenas/segments), the retry hides it. */
static void test_fault_injected_device(void **state) {
  (void)state;
  static const struct {
    const char *policy;
    uint64_t request;
  } cases[] = {{"bump", 64 * MiB}, {"buddy", 64 * MiB}, {"slab", 2 * MiB}, {"async", 64 * MiB}};
  for (size_t p = 0; p < sizeof cases / sizeof cases[0]; p++) {
    fixture fx = make_fixture(cases[p].policy, 256 * MiB, NULL);
    grt_devptr hog, x;
    assert_int_equal(grt_device_malloc(fx.dev, 255 * MiB, &hog), GRT_OK);
    /* each policy asks the device twice for this request (preferred size, then after releasing): fail the 2nd */
    assert_int_equal(grt_device_inject_malloc_failure(fx.dev, 2), GRT_OK);
    assert_int_equal(grt_alloc_malloc(fx.a, cases[p].request, 0, &x), GRT_ERR_OOM);
    assert_non_null(strstr(grt_alloc_last_error(fx.a), "(device malloc failed by fault injection)"));
    char want[64];
    snprintf(want, sizeof want, "out of memory (%s)", cases[p].policy);
    assert_non_null(strstr(grt_alloc_last_error(fx.a), want));
    assert_int_equal(dev_stats(fx.dev).failed_mallocs, 2);
    assert_int_equal(grt_alloc_malloc(fx.a, cases[p].request, 0, &x), GRT_ERR_OOM); /* a real OOM now */
    assert_null(strstr(grt_alloc_last_error(fx.a), "fault injection"));
    grt_alloc_stats s = stats_of(fx.a);
    assert_int_equal(s.num_ooms, 2);
    assert_int_equal(s.reserved_bytes[GRT_STAT_ALL].current, 0);
    assert_int_equal(grt_device_free(fx.dev, hog), GRT_OK);
    x = must_malloc(fx.a, cases[p].request, 0);
    assert_int_equal(grt_alloc_free(fx.a, x), GRT_OK);
    drop_fixture(&fx);
  }
  static const char *const retry[] = {"bump", "buddy"};
  for (size_t p = 0; p < 2; p++) {
    fixture fx = make_fixture(retry[p], 256 * MiB, NULL);
    assert_int_equal(grt_device_inject_malloc_failure(fx.dev, 1), GRT_OK);
    grt_devptr x = must_malloc(fx.a, MiB, 0);
    grt_alloc_stats s = stats_of(fx.a);
    assert_int_equal(s.reserved_bytes[GRT_STAT_ALL].current, 64 * MiB); /* the preferred size, on the retry */
    assert_int_equal(s.num_ooms, 0);
    assert_int_equal(dev_stats(fx.dev).failed_mallocs, 1);
    assert_int_equal(grt_alloc_free(fx.a, x), GRT_OK);
    drop_fixture(&fx);
  }
}

/* Bump: freed blocks stay dead until the arena empties; the snapshot shows them as inactive gaps. */
static void test_bump_snapshot_gaps(void **state) {
  (void)state;
  fixture fx = make_fixture("bump", 64 * MiB, NULL);
  assert_int_equal(grt_alloc_set(fx.a, "arena_size", MiB), GRT_OK);
  grt_devptr a = must_malloc(fx.a, 512, 0), b = must_malloc(fx.a, 1024, 0), c = must_malloc(fx.a, 512, 0);
  assert_int_equal(grt_alloc_free(fx.a, a), GRT_OK); /* dead space at the arena's start */
  assert_int_equal(grt_alloc_free(fx.a, c), GRT_OK); /* dead space after the live block */
  grt_alloc_snapshot *snap;
  assert_int_equal(grt_alloc_snapshot_take(fx.a, &snap), GRT_OK);
  assert_int_equal(snap->n_segments, 1);
  const grt_snapshot_segment *g = &snap->segments[0];
  assert_int_equal(g->address, a);
  assert_int_equal(g->total_size, MiB);
  assert_int_equal(g->n_blocks, 3);
  assert_int_equal(g->blocks[0].state, GRT_BLOCK_INACTIVE);
  assert_int_equal(g->blocks[0].size, 512);
  assert_int_equal(g->blocks[1].address, b);
  assert_int_equal(g->blocks[1].state, GRT_BLOCK_ACTIVE_ALLOCATED);
  assert_int_equal(g->blocks[1].requested_size, 1024);
  assert_int_equal(g->blocks[2].address, b + 1024);
  assert_int_equal(g->blocks[2].size, MiB - 1536);
  assert_int_equal(g->allocated_size, 1024);
  grt_alloc_snapshot_free(snap);
  assert_int_equal(must_malloc(fx.a, 512, 0), c + 512); /* c's bytes are not reused */
  drop_fixture(&fx);
}

/* Sharded: empty_cache and reset_peak_stats reach every shard; the snapshot merges shards in address order. */
static void test_sharded_fan_out(void **state) {
  (void)state;
  grt_alloc_config c;
  grt_alloc_config_default(&c);
  c.shards = 4;
  fixture fx = make_fixture("sharded", GRT_GiB, &c);
  grt_devptr p[8];
  for (int i = 0; i < 8; i++) p[i] = must_malloc(fx.a, 3 * MiB, (grt_stream_id)(i + 1));
  grt_alloc_snapshot *snap;
  assert_int_equal(grt_alloc_snapshot_take(fx.a, &snap), GRT_OK);
  assert_true(snap->n_segments >= 2);
  for (size_t i = 1; i < snap->n_segments; i++) assert_true(snap->segments[i - 1].address < snap->segments[i].address);
  grt_alloc_snapshot_free(snap);
  grt_alloc_stats s = stats_of(fx.a);
  uint64_t reserved = (uint64_t)s.reserved_bytes[GRT_STAT_ALL].current;
  for (int i = 0; i < 8; i++) assert_int_equal(grt_alloc_free(fx.a, p[i]), GRT_OK);
  assert_int_equal(dev_stats(fx.dev).bytes_in_use, reserved); /* cached in their shards */
  assert_int_equal(grt_alloc_reset_peak_stats(fx.a), GRT_OK);
  s = stats_of(fx.a);
  assert_int_equal(s.allocated_bytes[GRT_STAT_ALL].peak, 0);
  assert_int_equal(s.reserved_bytes[GRT_STAT_ALL].peak, (int64_t)reserved);
  assert_int_equal(grt_alloc_empty_cache(fx.a), GRT_OK);
  assert_int_equal(dev_stats(fx.dev).bytes_in_use, 0);
  assert_int_equal(stats_of(fx.a).reserved_bytes[GRT_STAT_ALL].current, 0);
  drop_fixture(&fx);
}

/* grt_alloc_policies lists exactly the names grt_alloc_create accepts;
 * each policy's settings read back what was set, every other key is refused. */
static void test_policies_and_settings(void **state) {
  (void)state;
  const char *const *names = NULL;
  size_t n = 0;
  assert_int_equal(grt_alloc_policies(NULL, &n), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt_alloc_policies(&names, NULL), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt_alloc_policies(&names, &n), GRT_OK);
  const char *const want[] = {"naive", "caching", "bestfit", "bump", "buddy", "slab", "async", "sharded"};
  assert_int_equal(n, sizeof want / sizeof want[0]);
  static const struct {
    const char *policy, *key;
    uint64_t dflt, value;
  } settings[] = {{"bump", "arena_size", 64 * MiB, 4 * MiB},
                  {"buddy", "segment_size", 64 * MiB, 8 * MiB},
                  {"slab", "page_size", 2 * MiB, 64 * 1024},
                  {"async", "release_threshold", 0, 5 * MiB}};
  for (size_t i = 0; i < n; i++) {
    assert_string_equal(names[i], want[i]);
    fixture fx = make_fixture(names[i], 64 * MiB, NULL);
    assert_string_equal(grt_alloc_policy(fx.a), names[i]);
    int has = 0;
    for (size_t k = 0; k < sizeof settings / sizeof settings[0]; k++) {
      if (strcmp(settings[k].policy, names[i])) continue;
      has = 1;
      uint64_t v = 0;
      assert_int_equal(grt_alloc_get(fx.a, settings[k].key, &v), GRT_OK);
      assert_int_equal(v, settings[k].dflt);
      assert_int_equal(grt_alloc_set(fx.a, settings[k].key, settings[k].value), GRT_OK);
      assert_int_equal(grt_alloc_get(fx.a, settings[k].key, &v), GRT_OK);
      assert_int_equal(v, settings[k].value);
    }
    uint64_t v = 3;
    expect_refused(fx.a, grt_alloc_set(fx.a, "no_such_key", 1), GRT_ERR_UNSUPPORTED);
    expect_refused(fx.a, grt_alloc_get(fx.a, "no_such_key", &v), GRT_ERR_UNSUPPORTED);
    assert_int_equal(v, 3);
    if (!has) assert_non_null(strstr(grt_alloc_last_error(fx.a), "(its settings: none)"));
    drop_fixture(&fx);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_record_stream),          cmocka_unit_test(test_setter_validation),
      cmocka_unit_test(test_policies_and_settings),
      cmocka_unit_test(test_small_device_fallback),  cmocka_unit_test(test_fault_injected_device),
      cmocka_unit_test(test_bump_snapshot_gaps),     cmocka_unit_test(test_sharded_fan_out),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
