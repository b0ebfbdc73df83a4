/* test_alloc_errors.c — error paths of the allocator and device APIs that
 * the behaviour tests do not reach: argument validation, unsupported calls,
 * configurations refused at creation, and what each failure leaves behind. */
#include <stdlib.h>
#include <string.h>

#include "alloc_fixture.h"

/* A request above the device's capacity is an OOM in every policy (the naive
 * one used to pass the device's GRT_ERR_SIZE through; found by fuzz_alloc_api). */
static void test_above_capacity_is_oom(void **state) {
  (void)state;
  const char *policies[] = {"caching", "naive"};
  for (int i = 0; i < 2; i++) {
    fixture fx = make_fixture(policies[i], 64 * MiB, NULL);
    grt_devptr p;
    assert_int_equal(grt_alloc_malloc(fx.a, 100 * MiB, 0, &p), GRT_ERR_OOM);
    assert_int_equal(stats_of(fx.a).num_ooms, 1);
    assert_non_null(strstr(grt_alloc_last_error(fx.a), "out of memory"));
    assert_int_equal(grt_alloc_malloc(fx.a, 0, 0, &p), GRT_ERR_SIZE);
    assert_int_equal(grt_alloc_malloc(fx.a, ((uint64_t)1 << 56) + 1, 0, &p), GRT_ERR_SIZE);
    drop_fixture(&fx);
  }
}

static void test_create_validation(void **state) {
  (void)state;
  grt_device_config dc;
  grt_device_config_default(&dc);
  grt_device *dev;
  assert_int_equal(grt_device_create(&dc, NULL), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt_device_create(NULL, &dev), GRT_ERR_INVALID_ARG);
  dc.alignment = 3;
  assert_int_equal(grt_device_create(&dc, &dev), GRT_ERR_INVALID_ARG);
  assert_null(dev);
  grt_device_config_default(&dc);
  dc.base_address = UINT64_MAX - 4096 + 1;
  assert_int_equal(grt_device_create(&dc, &dev), GRT_ERR_INVALID_ARG);
  grt_device_config_default(&dc);
  assert_int_equal(grt_device_create(&dc, &dev), GRT_OK);

  grt_allocator *a;
  grt_alloc_config c;
  assert_int_equal(grt_alloc_create("caching", dev, NULL, NULL), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt_alloc_create(NULL, dev, NULL, &a), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt_alloc_create("caching", NULL, NULL, &a), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt_alloc_create("bogus", dev, NULL, &a), GRT_ERR_NOT_FOUND);
  grt_alloc_config_default(&c);
  c.max_split_size = 20 * MiB;
  assert_int_equal(grt_alloc_create("caching", dev, &c, &a), GRT_ERR_INVALID_ARG);
  grt_alloc_config_default(&c);
  c.garbage_collection_threshold = 1.0;
  assert_int_equal(grt_alloc_create("caching", dev, &c, &a), GRT_ERR_INVALID_ARG);
  grt_alloc_config_default(&c);
  c.memory_fraction = 1.5;
  assert_int_equal(grt_alloc_create("caching", dev, &c, &a), GRT_ERR_INVALID_ARG);
  grt_alloc_config_default(&c);
  c.cross_stream = (grt_cross_stream_policy)7;
  assert_int_equal(grt_alloc_create("caching", dev, &c, &a), GRT_ERR_INVALID_ARG);
  grt_alloc_config_default(&c);
  c.roundup_power2_divisions[3] = 3;
  assert_int_equal(grt_alloc_create("caching", dev, &c, &a), GRT_ERR_INVALID_ARG);
  grt_alloc_config_default(&c);
  c.fit = (grt_fit_policy)9;
  assert_int_equal(grt_alloc_create("caching", dev, &c, &a), GRT_ERR_INVALID_ARG);
  grt_alloc_config_default(&c);
  grt_stream_ops half = {NULL, NULL, NULL, NULL, NULL};
  c.stream_ops = &half;
  assert_int_equal(grt_alloc_create("caching", dev, &c, &a), GRT_ERR_INVALID_ARG);
  assert_null(a);
  assert_int_equal(grt_alloc_destroy(NULL), GRT_OK);
  assert_int_equal(grt_device_destroy(NULL), GRT_OK);
  assert_int_equal(grt_device_destroy(dev), GRT_OK);
}

/* Every public call refuses NULL handles and NULL out-parameters. */
static void test_null_arguments(void **state) {
  (void)state;
  fixture fx = make_fixture("caching", 64 * MiB, NULL);
  grt_devptr p;
  uint64_t x, y;
  grt_alloc_stats s;
  grt_alloc_snapshot *snap;
  assert_int_equal(grt_alloc_malloc(NULL, 1, 0, &p), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt_alloc_malloc(fx.a, 1, 0, NULL), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt_alloc_free(NULL, 1), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt_alloc_record_stream(NULL, 1, 0), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt_alloc_empty_cache(NULL), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt_alloc_block_info(NULL, 1, &x, &y), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt_alloc_block_info(fx.a, 1, NULL, &y), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt_alloc_import_segment(NULL, 0, 512, 0, 0), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt_alloc_import_block(NULL, 0, 512, 0), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt_alloc_get_stats(NULL, &s), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt_alloc_get_stats(fx.a, NULL), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt_alloc_reset_peak_stats(NULL), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt_alloc_snapshot_take(NULL, &snap), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt_alloc_snapshot_take(fx.a, NULL), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt_alloc_check(NULL, NULL, 0), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt_alloc_check(fx.a, NULL, 0), GRT_OK);
  assert_string_equal(grt_alloc_policy(NULL), "");
  assert_string_equal(grt_alloc_last_error(NULL), "");
  grt_alloc_snapshot_free(NULL);

  grt_device_stats ds;
  assert_int_equal(grt_device_malloc(NULL, 1, &p), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt_device_malloc_at(NULL, 0, 1), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt_device_malloc_at(fx.dev, 0x7f0000000000ULL, 0), GRT_ERR_SIZE);
  assert_int_equal(grt_device_malloc_at(fx.dev, 0x7f0000000001ULL, 512), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt_device_set_next_address(NULL, 0), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt_device_set_next_address(fx.dev, 3), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt_device_free(NULL, 0), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt_device_segment_size(NULL, 0, &x), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt_device_get_stats(NULL, &ds), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt_device_mem_get_info(fx.dev, NULL, &y), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt_device_mem_get_info(NULL, &x, &y), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt_device_mem_get_info(fx.dev, &x, &y), GRT_OK);
  assert_int_equal(y, 64 * MiB);
  void *h;
  assert_int_equal(grt_device_host_ptr(NULL, 0, 1, &h), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt_device_host_ptr(fx.dev, 0x7f0000000000ULL, 1, &h), GRT_ERR_UNSUPPORTED);
  assert_int_equal(grt_device_inject_malloc_failure(NULL, 1), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt_device_walk_segments(NULL, NULL, NULL), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt_device_vmm_granularity(NULL, &x), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt_device_reserve(NULL, 2 * MiB, &p), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt_device_reserve(fx.dev, 2 * MiB, NULL), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt_device_reserve(fx.dev, MiB, &p), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt_device_release(NULL, 0), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt_device_release(fx.dev, 12345), GRT_ERR_UNKNOWN_POINTER);
  drop_fixture(&fx);
}

/* The naive policy has no import and reports bad pointers like the device. */
static void test_naive_errors(void **state) {
  (void)state;
  fixture fx = make_fixture("naive", 64 * MiB, NULL);
  assert_int_equal(grt_alloc_import_segment(fx.a, 0x7f0000000000ULL, 2 * MiB, 0, 0), GRT_ERR_UNSUPPORTED);
  assert_int_equal(grt_alloc_import_block(fx.a, 0x7f0000000000ULL, 512, 1), GRT_ERR_UNSUPPORTED);
  grt_devptr p = must_malloc(fx.a, 4096, 1);
  uint64_t size, req;
  assert_int_equal(grt_alloc_block_info(fx.a, p, &size, &req), GRT_OK);
  assert_int_equal(req, 4096);
  assert_int_equal(grt_alloc_record_stream(fx.a, p, 2), GRT_OK);
  assert_int_equal(grt_alloc_free(fx.a, p + 512), GRT_ERR_INTERIOR_POINTER);
  assert_int_equal(grt_alloc_block_info(fx.a, p + 512, &size, &req), GRT_ERR_INTERIOR_POINTER);
  assert_int_equal(grt_alloc_record_stream(fx.a, 12345, 2), GRT_ERR_UNKNOWN_POINTER);
  assert_int_equal(grt_alloc_free(fx.a, p), GRT_OK);
  assert_int_equal(grt_alloc_free(fx.a, p), GRT_ERR_DOUBLE_FREE);
  assert_int_equal(grt_alloc_empty_cache(fx.a), GRT_OK);
  grt_alloc_snapshot *snap;
  must_malloc(fx.a, 3 * MiB, 0);
  assert_int_equal(grt_alloc_snapshot_take(fx.a, &snap), GRT_OK);
  assert_int_equal(snap->n_segments, 1);
  grt_alloc_snapshot_free(snap);
  assert_int_equal(grt_alloc_reset_peak_stats(fx.a), GRT_OK);
  assert_int_equal(grt_alloc_destroy(fx.a), GRT_OK); /* returns the live block to the device */
  assert_int_equal(grt_device_destroy(fx.dev), GRT_OK);
}

/* Import arguments are validated before the policy sees them. */
static void test_import_validation(void **state) {
  (void)state;
  fixture fx = make_fixture("caching", 64 * MiB, NULL);
  grt_devptr base = 0x7f0000000000ULL;
  assert_int_equal(grt_alloc_import_segment(fx.a, base, 0, 0, 0), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt_alloc_import_segment(fx.a, base, 1000, 0, 0), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt_alloc_import_segment(fx.a, base + 1, 1024, 0, 0), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt_alloc_import_block(fx.a, base, 0, 0), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt_alloc_import_block(fx.a, base, 512, 513), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt_alloc_import_block(fx.a, base + 1, 512, 1), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt_alloc_import_block(fx.a, base, 512, 1), GRT_ERR_INVALID_ARG); /* no segment there */
  assert_int_equal(grt_alloc_import_segment(fx.a, base + 128 * MiB, 2 * MiB, 0, 0), GRT_ERR_OOM);
  assert_true(grt_alloc_last_error(fx.a)[0] != 0);
  drop_fixture(&fx);
}

/* Each malformed configuration string fails with a reason and changes nothing. */
static void test_config_parse_errors(void **state) {
  (void)state;
  const char *bad[] = {
      "roundup_power2_divisions:[1:2",      "roundup_power2_divisions:[1:3]",   "roundup_power2_divisions:[3:2]",
      "roundup_power2_divisions:[1:2;2:4]", "roundup_power2_divisions:[1]",     "roundup_power2_divisions:x",
      ":1",                                 "max_split_size_mb",                "max_split_size_mb:",
      "max_split_size_mb:abc",              "garbage_collection_threshold:1.5", "garbage_collection_threshold:0.5x",
      "expandable_segments:maybe",          "cross_stream:sometimes",           "fit:worst",
      "merge_on_free:2",                    "empty_cache_idle_cycles:-1",       "empty_cache_idle_cycles:9999999",
      "fit:best;fit:first",
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    grt_alloc_config c, before;
    grt_alloc_config_default(&c);
    before = c;
    char err[128] = "";
    grt_status st = grt_alloc_config_parse(&c, bad[i], err, sizeof err);
    if (st != GRT_ERR_PARSE) fail_msg("'%s' parsed (%s)", bad[i], grt_status_name(st));
    assert_true(err[0] != 0);
    assert_memory_equal(&c, &before, sizeof c);
    assert_int_equal(grt_alloc_config_parse(&c, bad[i], NULL, 0), GRT_ERR_PARSE); /* no buffer: still a status */
  }
  grt_alloc_config c;
  grt_alloc_config_default(&c);
  assert_int_equal(grt_alloc_config_parse(NULL, "", NULL, 0), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt_alloc_config_parse(&c, NULL, NULL, 0), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt_alloc_config_parse(&c, "max_split_size_mb:99999999999999999,merge_on_free:true", NULL, 0), GRT_OK);
  assert_int_equal(c.max_split_size, GRT_UNLIMITED);
  assert_int_equal(c.no_merge_on_free, 0);
  assert_int_equal(grt_alloc_config_parse(&c, "roundup_power2_divisions:[1:2,1048576:8]", NULL, 0), GRT_OK);
  assert_int_equal(c.roundup_power2_divisions[GRT_ROUNDUP_INTERVALS - 1], 8);
}

/* GRT_ALLOC_CONF overrides a configuration; unset leaves it alone. */
static void test_config_from_env(void **state) {
  (void)state;
  grt_alloc_config c;
  grt_alloc_config_default(&c);
  char err[128];
  assert_int_equal(grt_alloc_config_from_env(NULL, err, sizeof err), GRT_ERR_INVALID_ARG);
  unsetenv("GRT_ALLOC_CONF");
  assert_int_equal(grt_alloc_config_from_env(&c, err, sizeof err), GRT_OK);
  assert_int_equal(c.max_split_size, GRT_UNLIMITED);
  setenv("GRT_ALLOC_CONF", "max_split_size_mb:64", 1);
  assert_int_equal(grt_alloc_config_from_env(&c, err, sizeof err), GRT_OK);
  assert_int_equal(c.max_split_size, 64 * MiB);
  setenv("GRT_ALLOC_CONF", "nonsense", 1);
  assert_int_equal(grt_alloc_config_from_env(&c, err, sizeof err), GRT_ERR_PARSE);
  unsetenv("GRT_ALLOC_CONF");
}

/* Every status has its own name and sentence; unknown codes get generic ones. */
static void test_every_status_string(void **state) {
  (void)state;
  for (int a = GRT_OK; a <= GRT_ERR_GRAPH_EXEC_UPDATE; a++) { /* the last status */
    assert_non_null(strstr(grt_status_name((grt_status)a), "GRT_"));
    assert_true(grt_status_str((grt_status)a)[0] != 0);
    for (int b = GRT_OK; b < a; b++) {
      assert_string_not_equal(grt_status_name((grt_status)a), grt_status_name((grt_status)b));
      assert_string_not_equal(grt_status_str((grt_status)a), grt_status_str((grt_status)b));
    }
  }
  assert_non_null(grt_status_str((grt_status)999));
  assert_string_equal(grt_status_name((grt_status)999), "GRT_STATUS_UNKNOWN");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_above_capacity_is_oom), cmocka_unit_test(test_create_validation),
      cmocka_unit_test(test_null_arguments),        cmocka_unit_test(test_naive_errors),
      cmocka_unit_test(test_import_validation),    cmocka_unit_test(test_config_parse_errors),
      cmocka_unit_test(test_config_from_env),      cmocka_unit_test(test_every_status_string),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
