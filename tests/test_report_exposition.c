/* test_report_exposition.c — the metrics registry's exposition text: every
 * family typed once with HELP, labels escaped, values equal the stats, and
 * registry bookkeeping (duplicates, removal, empty registry). */
#include <stdlib.h>
#include <string.h>

#include "alloc_fixture.h"
#include "gpurt/report.h"

/* The value of the sample line starting with `series ` (exact), or -1 when absent. */
static double sample(const char *text, const char *series) {
  size_t n = strlen(series);
  for (const char *p = text; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL)
    if (!strncmp(p, series, n) && p[n] == ' ') return strtod(p + n + 1, NULL);
  return -1;
}

static int count(const char *text, const char *needle) {
  int n = 0;
  for (const char *p = strstr(text, needle); p; p = strstr(p + 1, needle)) n++;
  return n;
}

static char *render(grt_metrics *m) {
  char *text = NULL;
  size_t len = 0;
  assert_int_equal(grt_metrics_render(m, &text, &len), GRT_OK);
  assert_int_equal(strlen(text), len);
  return text;
}

static void test_values_equal_stats(void **state) {
  (void)state;
  fixture fx = make_fixture("caching", GRT_GiB, NULL);
  grt_devptr big = must_malloc(fx.a, 5 * MiB, 0), mid = must_malloc(fx.a, 3 * MiB, 0);
  grt_devptr small = must_malloc(fx.a, 1000, 0);
  assert_int_equal(grt_alloc_free(fx.a, big), GRT_OK); /* a 5 MiB hole before `mid`, 12 MiB after */
  grt_metrics *m;
  assert_int_equal(grt_metrics_create(&m), GRT_OK);
  assert_int_equal(grt_metrics_add_allocator(m, fx.a, NULL, "cuda:0"), GRT_OK);
  assert_int_equal(grt_metrics_add_device(m, fx.dev, "cuda:0"), GRT_OK);
  char *t = render(m);
  grt_alloc_stats s = stats_of(fx.a);
#define L(pool) "{device=\"cuda:0\",allocator=\"caching\",pool=\"" pool "\"}"
  assert_true(sample(t, "gpurt_alloc_reserved_bytes" L("all")) == (double)s.reserved_bytes[0].current);
  assert_true(sample(t, "gpurt_alloc_reserved_bytes" L("large")) == 20.0 * MiB);
  assert_true(sample(t, "gpurt_alloc_reserved_bytes" L("small")) == 2.0 * MiB);
  assert_true(sample(t, "gpurt_alloc_allocated_bytes" L("all")) == (double)s.allocated_bytes[0].current);
  assert_true(sample(t, "gpurt_alloc_requested_bytes" L("small")) == 1000.0);
  assert_true(sample(t, "gpurt_alloc_active_bytes" L("large")) == 3.0 * MiB);
  assert_true(sample(t, "gpurt_alloc_cached_bytes" L("all")) == (double)s.cached_bytes);
  assert_true(sample(t, "gpurt_alloc_largest_free_block_bytes" L("all")) == (double)s.largest_free_block);
  assert_true(sample(t, "gpurt_alloc_largest_free_block_bytes" L("large")) == 12.0 * MiB);
  assert_true(sample(t, "gpurt_alloc_free_bytes" L("large")) == 17.0 * MiB);
  double frag = sample(t, "gpurt_alloc_fragmentation_ratio" L("large"));
  assert_true(frag > 0.2941 && frag < 0.2942); /* 1 - 12/17 */
  assert_true(sample(t, "gpurt_alloc_segments" L("all")) == 2.0);
  assert_true(sample(t, "gpurt_alloc_allocations_total" L("all")) == 3.0);
  assert_true(sample(t, "gpurt_alloc_device_mallocs_total{device=\"cuda:0\",allocator=\"caching\"}") == 2.0);
  assert_true(sample(t, "gpurt_alloc_max_split_size_bytes{device=\"cuda:0\",allocator=\"caching\"}") < 0 ||
              strstr(t, "gpurt_alloc_max_split_size_bytes{device=\"cuda:0\",allocator=\"caching\"} +Inf\n"));
  assert_true(sample(t, "gpurt_device_capacity_bytes{device=\"cuda:0\"}") == (double)GRT_GiB);
  assert_true(sample(t, "gpurt_device_segments{device=\"cuda:0\"}") == 2.0);
  assert_true(sample(t, "gpurt_allocator_info{device=\"cuda:0\",allocator=\"caching\",policy=\"caching\"}") == 1.0);
#undef L
  /* Each family once, typed; every counter ends in _total and nothing else does. */
  assert_int_equal(count(t, "# TYPE gpurt_alloc_reserved_bytes gauge\n"), 1);
  assert_int_equal(count(t, "# HELP gpurt_alloc_reserved_bytes "), 1);
  assert_int_equal(count(t, "# TYPE "), count(t, "# HELP "));
  for (const char *p = strstr(t, "# TYPE "); p; p = strstr(p + 1, "# TYPE ")) {
    const char *sp = strchr(p + 7, ' ');
    int is_counter = !strncmp(sp + 1, "counter", 7);
    int ends_total = sp - (p + 7) > 6 && !strncmp(sp - 6, "_total", 6);
    assert_int_equal(is_counter, ends_total);
  }
  grt_report_free(t);
  assert_int_equal(grt_metrics_remove_allocator(m, fx.a), GRT_OK);
  assert_int_equal(grt_metrics_remove_device(m, fx.dev), GRT_OK);
  assert_int_equal(grt_alloc_free(fx.a, mid), GRT_OK);
  assert_int_equal(grt_alloc_free(fx.a, small), GRT_OK);
  assert_int_equal(grt_metrics_destroy(m), GRT_OK);
  drop_fixture(&fx);
}

static void test_label_escaping_and_pools_per_purpose(void **state) {
  (void)state;
  fixture fx = make_fixture("caching", GRT_GiB, NULL);
  grt_device *dev2 = NULL;
  grt_device_config dc;
  grt_device_config_default(&dc);
  assert_int_equal(grt_device_create(&dc, &dev2), GRT_OK);
  grt_allocator *kv = NULL;
  assert_int_equal(grt_alloc_create("naive", dev2, NULL, &kv), GRT_OK);
  grt_metrics *m;
  assert_int_equal(grt_metrics_create(&m), GRT_OK);
  assert_int_equal(grt_metrics_add_allocator(m, fx.a, "weights \"w\"\\x\nnew", "0"), GRT_OK);
  assert_int_equal(grt_metrics_add_allocator(m, kv, "kv", "0"), GRT_OK);
  char *t = render(m);
  assert_non_null(strstr(t, "allocator=\"weights \\\"w\\\"\\\\x\\nnew\""));
  assert_non_null(strstr(t, "gpurt_allocator_info{device=\"0\",allocator=\"kv\",policy=\"naive\"} 1\n"));
  assert_int_equal(count(t, "# TYPE gpurt_alloc_ooms_total counter"), 1); /* one family, two allocators */
  assert_int_equal(count(t, "gpurt_alloc_ooms_total{"), 2);
  assert_null(strstr(t, "gpurt_device_")); /* no device registered */
  grt_report_free(t);
  /* Duplicates are refused; unknown removals are reported; nothing changes. */
  assert_int_equal(grt_metrics_add_allocator(m, fx.a, "again", "0"), GRT_ERR_STATE);
  assert_int_equal(grt_metrics_add_allocator(m, fx.a, "kv", "0"), GRT_ERR_STATE);
  assert_int_equal(grt_metrics_remove_device(m, dev2), GRT_ERR_NOT_FOUND);
  assert_int_equal(grt_metrics_add_allocator(NULL, fx.a, NULL, NULL), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt_metrics_render(m, NULL, NULL), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt_metrics_remove_allocator(m, fx.a), GRT_OK);
  assert_int_equal(grt_metrics_remove_allocator(m, fx.a), GRT_ERR_NOT_FOUND);
  assert_int_equal(grt_metrics_remove_allocator(m, kv), GRT_OK);
  t = render(m);
  assert_string_equal(t, ""); /* an empty registry is a valid, empty exposition */
  grt_report_free(t);
  assert_int_equal(grt_metrics_destroy(m), GRT_OK);
  assert_int_equal(grt_metrics_destroy(NULL), GRT_OK);
  assert_int_equal(grt_alloc_destroy(kv), GRT_OK);
  assert_int_equal(grt_device_destroy(dev2), GRT_OK);
  drop_fixture(&fx);
}

static void test_fragmentation_ratio(void **state) {
  (void)state;
  assert_true(grt_fragmentation_ratio(0, 0) == 0.0);
  assert_true(grt_fragmentation_ratio(10, 10) == 0.0);
  assert_true(grt_fragmentation_ratio(1, 4) == 0.75);
  grt_free_space f;
  assert_int_equal(grt_free_space_of(NULL, &f), GRT_ERR_INVALID_ARG);
}

/* Devices: several at once (the label defaults to "0"), duplicates by pointer or label refused, removal of
 * any of them; null arguments. */
static void test_devices_registry(void **state) {
  (void)state;
  grt_device *d[3];
  grt_device_config dc;
  grt_device_config_default(&dc);
  for (int i = 0; i < 3; i++) {
    dc.capacity = (uint64_t)(i + 1) * GRT_GiB;
    assert_int_equal(grt_device_create(&dc, &d[i]), GRT_OK);
  }
  grt_metrics *m;
  assert_int_equal(grt_metrics_create(&m), GRT_OK);
  assert_int_equal(grt_metrics_add_device(m, d[0], NULL), GRT_OK);
  assert_int_equal(grt_metrics_add_device(m, d[1], "cuda:1"), GRT_OK);
  assert_int_equal(grt_metrics_add_device(m, d[2], "cuda:2"), GRT_OK);
  assert_int_equal(grt_metrics_add_device(m, d[1], "cuda:9"), GRT_ERR_STATE); /* the same device */
  assert_int_equal(grt_metrics_add_device(m, d[2], "0"), GRT_ERR_STATE);      /* and by label */
  char *t = render(m);
  assert_non_null(strstr(t, "gpurt_device_capacity_bytes{device=\"0\"} 1073741824\n"));
  assert_non_null(strstr(t, "gpurt_device_capacity_bytes{device=\"cuda:1\"} 2147483648\n"));
  assert_non_null(strstr(t, "gpurt_device_capacity_bytes{device=\"cuda:2\"} 3221225472\n"));
  assert_null(strstr(t, "cuda:9"));
  grt_report_free(t);
  assert_int_equal(grt_metrics_remove_device(m, d[1]), GRT_OK); /* from the middle */
  assert_int_equal(grt_metrics_remove_device(m, d[1]), GRT_ERR_NOT_FOUND);
  t = render(m);
  assert_null(strstr(t, "cuda:1"));
  assert_non_null(strstr(t, "device=\"cuda:2\""));
  grt_report_free(t);
  assert_int_equal(grt_metrics_add_device(m, d[1], "cuda:1"), GRT_OK); /* the label is free again */
  assert_int_equal(grt_metrics_remove_device(m, d[2]), GRT_OK);
  assert_int_equal(grt_metrics_remove_device(m, d[1]), GRT_OK);
  assert_int_equal(grt_metrics_remove_device(m, d[0]), GRT_OK);
  assert_int_equal(grt_metrics_add_device(NULL, d[0], "0"), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt_metrics_add_device(m, NULL, "0"), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt_metrics_remove_device(NULL, d[0]), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt_metrics_remove_device(m, NULL), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt_metrics_add_allocator(m, NULL, "x", "0"), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt_metrics_remove_allocator(NULL, NULL), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt_metrics_create(NULL), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt_metrics_destroy(m), GRT_OK);
  for (int i = 0; i < 3; i++) assert_int_equal(grt_device_destroy(d[i]), GRT_OK);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_values_equal_stats),
      cmocka_unit_test(test_devices_registry),
      cmocka_unit_test(test_label_escaping_and_pools_per_purpose),
      cmocka_unit_test(test_fragmentation_ratio),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
