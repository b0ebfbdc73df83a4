/* test_report_json.c — the JSON writers, read back with jansson: PyTorch's
 * memory_stats() keys (flat, sorted, exact values) and memory._snapshot()
 * segments (fields, types, blocks tiling each segment, states). */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "alloc_fixture.h"
#include "gpurt/report.h"

static json_t *parse(const char *text) {
  json_error_t err;
  json_t *j = json_loads(text, JSON_REJECT_DUPLICATES, &err);
  if (!j) fprintf(stderr, "JSON error line %d: %s\n", err.line, err.text);
  assert_non_null(j);
  return j;
}

static json_int_t int_at(json_t *obj, const char *key) {
  json_t *v = json_object_get(obj, key);
  if (!v) fprintf(stderr, "missing key %s\n", key);
  assert_true(json_is_integer(v));
  return json_integer_value(v);
}

static void test_stats_json(void **state) {
  (void)state;
  fixture fx = make_fixture("caching", GRT_GiB, NULL);
  grt_devptr p = must_malloc(fx.a, 5 * MiB, 0), q = must_malloc(fx.a, 700, 0);
  grt_alloc_stats s = stats_of(fx.a);
  char *text;
  assert_int_equal(grt_stats_json(&s, &text), GRT_OK);
  json_t *j = parse(text);
  assert_true(json_is_object(j));
  /* 9 array stats x 3 pools x 4 + 2 plain stats x 4 + 6 scalars + 5 gpurt extras */
  assert_int_equal(json_object_size(j), 9 * 3 * 4 + 8 + 6 + 5);
  assert_int_equal(int_at(j, "allocated_bytes.all.current"), s.allocated_bytes[0].current);
  assert_int_equal(int_at(j, "reserved_bytes.large_pool.peak"), 20 * MiB);
  assert_int_equal(int_at(j, "requested_bytes.small_pool.current"), 700);
  assert_int_equal(int_at(j, "segment.all.allocated"), 2);
  assert_int_equal(int_at(j, "inactive_split_bytes.large_pool.current"), 15 * MiB);
  assert_int_equal(int_at(j, "oversize_allocations.current"), 0);
  assert_int_equal(int_at(j, "max_split_size"), -1);
  assert_int_equal(int_at(j, "num_device_alloc"), 2);
  assert_int_equal(int_at(j, "largest_free_block"), (json_int_t)s.largest_free_block);
  /* Keys in sorted order, as torch.cuda.memory_stats() returns them. */
  const char *prev = "";
  for (const char *k = strstr(text, "\n  \""); k; k = strstr(k + 1, "\n  \"")) {
    assert_true(strcmp(prev, k + 4) < 0);
    prev = k + 4;
  }
  json_decref(j);
  grt_report_free(text);
  assert_int_equal(grt_stats_json(NULL, &text), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt_alloc_free(fx.a, p), GRT_OK);
  assert_int_equal(grt_alloc_free(fx.a, q), GRT_OK);
  drop_fixture(&fx);
}

static void test_snapshot_json(void **state) {
  (void)state;
  fake_events ev = {0};
  grt_stream_ops ops = fake_ops(&ev);
  grt_alloc_config cfg;
  grt_alloc_config_default(&cfg);
  cfg.stream_ops = &ops;
  fixture fx = make_fixture("caching", GRT_GiB, &cfg);
  grt_devptr a = must_malloc(fx.a, 3 * MiB, 7), b = must_malloc(fx.a, 2 * MiB, 7);
  grt_devptr c = must_malloc(fx.a, 4000, 0);
  assert_int_equal(grt_alloc_record_stream(fx.a, b, 9), GRT_OK);
  assert_int_equal(grt_alloc_free(fx.a, b), GRT_OK); /* pending on stream 9's event */
  grt_alloc_snapshot *snap;
  assert_int_equal(grt_alloc_snapshot_take(fx.a, &snap), GRT_OK);
  char *text;
  assert_int_equal(grt_snapshot_json(snap, 1, &text), GRT_OK);
  json_t *j = parse(text);
  json_t *segs = json_object_get(j, "segments");
  assert_true(json_is_array(segs));
  assert_int_equal(json_array_size(segs), snap->n_segments);
  assert_int_equal(json_array_size(json_object_get(j, "device_traces")), 2);
  int states[3] = {0, 0, 0};
  for (size_t i = 0; i < json_array_size(segs); i++) {
    json_t *s = json_array_get(segs, i);
    assert_int_equal(int_at(s, "address"), (json_int_t)snap->segments[i].address);
    assert_int_equal(int_at(s, "device"), 1);
    const char *type = json_string_value(json_object_get(s, "segment_type"));
    assert_string_equal(type, snap->segments[i].is_large ? "large" : "small");
    assert_true(json_is_boolean(json_object_get(s, "is_expandable")));
    assert_true(json_is_array(json_object_get(s, "frames")));
    json_int_t at = int_at(s, "address"), total = 0, allocated = 0;
    json_t *blocks = json_object_get(s, "blocks");
    for (size_t k = 0; k < json_array_size(blocks); k++) {
      json_t *blk = json_array_get(blocks, k);
      assert_int_equal(int_at(blk, "address"), at); /* blocks tile the segment */
      at += int_at(blk, "size");
      total += int_at(blk, "size");
      const char *st = json_string_value(json_object_get(blk, "state"));
      if (!strcmp(st, "active_allocated")) {
        states[0]++;
        allocated += int_at(blk, "size");
      } else if (!strcmp(st, "active_pending_free")) {
        states[1]++;
      } else {
        assert_string_equal(st, "inactive");
        states[2]++;
      }
      int_at(blk, "requested_size");
    }
    assert_int_equal(total, int_at(s, "total_size"));
    assert_int_equal(allocated, int_at(s, "allocated_size"));
    int_at(s, "requested_size");
    int_at(s, "active_size");
    int_at(s, "stream");
  }
  assert_int_equal(states[0], 2);
  assert_int_equal(states[1], 1);
  assert_true(states[2] >= 1);
  json_decref(j);
  grt_report_free(text);
  assert_int_equal(grt_snapshot_json(snap, -1, &text), GRT_ERR_INVALID_ARG);
  grt_alloc_snapshot_free(snap);
  assert_int_equal(grt_alloc_free(fx.a, a), GRT_OK);
  assert_int_equal(grt_alloc_free(fx.a, c), GRT_OK);
  assert_int_equal(grt_alloc_empty_cache(fx.a), GRT_OK);
  drop_fixture(&fx);
}

/* An empty snapshot is still the full shape. */
static void test_empty_snapshot(void **state) {
  (void)state;
  grt_alloc_snapshot snap = {0, NULL};
  char *text;
  assert_int_equal(grt_snapshot_json(&snap, 0, &text), GRT_OK);
  json_t *j = parse(text);
  assert_int_equal(json_array_size(json_object_get(j, "segments")), 0);
  json_decref(j);
  grt_report_free(text);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_stats_json),
      cmocka_unit_test(test_snapshot_json),
      cmocka_unit_test(test_empty_snapshot),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
