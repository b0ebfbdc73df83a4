/* test_cuda_fake_events.c — the caching allocator's deferred frees over real
 * CUDA events (grt_cuda_events, src/alloc/cuda_events.c) against the fake
 * modern driver: a block used on another stream is not reused until that
 * stream's work completes, events are pooled and reused, the pool grows past
 * its first 64, a failed record leaves the block allocated and the next free
 * works, a driver error on query counts as completion. Skips (77) unless
 * GRT_CUDA_LIBRARY names the modern fake. */
#include "cuda_fake_fixture.h"

typedef struct rig {
  grt_device *dev;
  grt_cuda_events *ev;
  grt_allocator *a;
  grt_cuda_stream *s1, *s2;
} rig;

static rig rig_open(void) {
  rig r = {fk_open(), NULL, NULL, NULL, NULL};
  assert_int_equal(grt_cuda_events_create(r.dev, &r.ev), GRT_OK);
  grt_alloc_config cfg;
  grt_alloc_config_default(&cfg);
  cfg.stream_ops = grt_cuda_events_stream_ops(r.ev);
  assert_int_equal(grt_alloc_create("caching", r.dev, &cfg, &r.a), GRT_OK);
  assert_int_equal(grt_cuda_stream_create(r.dev, GRT_CUDA_STREAM_NON_BLOCKING, 0, &r.s1), GRT_OK);
  assert_int_equal(grt_cuda_stream_create(r.dev, GRT_CUDA_STREAM_NON_BLOCKING, 0, &r.s2), GRT_OK);
  return r;
}

static void rig_close(rig *r) {
  assert_consistent(r->a);
  assert_int_equal(grt_alloc_destroy(r->a), GRT_OK);
  assert_int_equal(grt_cuda_events_destroy(r->ev), GRT_OK);
  assert_int_equal(grt_cuda_stream_destroy(r->s1), GRT_OK);
  assert_int_equal(grt_cuda_stream_destroy(r->s2), GRT_OK);
  assert_int_equal(grt_device_destroy(r->dev), GRT_OK);
}

static grt_stream_id id_of(grt_cuda_stream *s) { return grt_cuda_stream_id(s); }

static void test_deferred_free_across_streams(void **state) {
  (void)state;
  fk_census empty = fk_count();
  rig r = rig_open();
  grt_cuda_gate *gate = fk_hold(r.dev, r.s2);
  grt_devptr b = must_malloc(r.a, 3 * MiB, id_of(r.s1));
  assert_int_equal(grt_alloc_record_stream(r.a, b, id_of(r.s2)), GRT_OK);
  assert_int_equal(grt_alloc_free(r.a, b), GRT_OK);
  assert_int_equal(grt_cuda_events_recorded(r.ev), 1);
  assert_int_equal(fk.live("events"), empty.events + 1);
  assert_int_equal(stats_of(r.a).pending_free_blocks, 1);
  /* s2 has not reached the free: b is not handed out again */
  grt_devptr c = must_malloc(r.a, 3 * MiB, id_of(r.s1));
  assert_int_not_equal(c, b);
  assert_int_equal(stats_of(r.a).pending_free_blocks, 1);
  assert_int_equal(grt_cuda_gate_open(gate), GRT_OK);
  assert_int_equal(grt_cuda_stream_synchronize(r.s2), GRT_OK);
  grt_devptr d = must_malloc(r.a, 3 * MiB, id_of(r.s1));
  assert_int_equal(d, b);
  assert_int_equal(stats_of(r.a).pending_free_blocks, 0);
  assert_int_equal(grt_cuda_gate_destroy(gate), GRT_OK);
  /* events are pooled: later deferred frees reuse the one CUevent */
  unsigned long creates = fk.calls("cuEventCreate");
  for (int i = 0; i < 5; i++) {
    assert_int_equal(grt_alloc_record_stream(r.a, d, id_of(r.s2)), GRT_OK);
    assert_int_equal(grt_alloc_free(r.a, d), GRT_OK);
    d = must_malloc(r.a, 3 * MiB, id_of(r.s1));
    assert_int_equal(d, b);
  }
  assert_int_equal(fk.calls("cuEventCreate"), creates);
  assert_int_equal(grt_cuda_events_recorded(r.ev), 6);
  /* the legacy stream (id 0) works as a use too */
  assert_int_equal(grt_alloc_record_stream(r.a, c, 0), GRT_OK);
  assert_int_equal(grt_alloc_free(r.a, c), GRT_OK);
  assert_int_equal(grt_alloc_free(r.a, d), GRT_OK);
  assert_int_equal(grt_alloc_empty_cache(r.a), GRT_OK);
  assert_int_equal(fk.live("allocs"), 0);
  rig_close(&r);
  fk_assert_census(empty);
}

/* More events outstanding than the pool's first 64; destroy waits for them. */
static void test_many_outstanding(void **state) {
  (void)state;
  fk_census empty = fk_count();
  rig r = rig_open();
  grt_cuda_gate *gate = fk_hold(r.dev, r.s2);
  enum { N = 70 };
  grt_devptr p[N];
  for (int i = 0; i < N; i++) p[i] = must_malloc(r.a, 4096, id_of(r.s1));
  for (int i = 0; i < N; i++) {
    assert_int_equal(grt_alloc_record_stream(r.a, p[i], id_of(r.s2)), GRT_OK);
    assert_int_equal(grt_alloc_free(r.a, p[i]), GRT_OK);
  }
  assert_int_equal(fk.live("events"), empty.events + N);
  assert_int_equal(stats_of(r.a).pending_free_blocks, N);
  assert_int_equal(grt_cuda_events_destroy(r.ev), GRT_ERR_BUSY); /* the allocator holds them */
  assert_int_equal(grt_cuda_gate_open(gate), GRT_OK);
  assert_int_equal(grt_alloc_empty_cache(r.a), GRT_OK); /* waits for every event */
  assert_int_equal(stats_of(r.a).pending_free_blocks, 0);
  assert_int_equal(stats_of(r.a).num_sync_all_streams, 1);
  assert_int_equal(grt_cuda_events_recorded(r.ev), N);
  assert_int_equal(grt_cuda_gate_destroy(gate), GRT_OK);
  rig_close(&r);
  fk_assert_census(empty);
}

/* A record that fails leaves the block allocated; the next free works. */
static void test_record_failures(void **state) {
  (void)state;
  fk_census empty = fk_count();
  rig r = rig_open();
  grt_devptr b = must_malloc(r.a, 3 * MiB, id_of(r.s1));
  assert_int_equal(grt_alloc_record_stream(r.a, b, id_of(r.s2)), GRT_OK);
  fk_arm("cuEventCreate", 1, FK_OUT_OF_MEMORY); /* the pool is empty: the first record creates */
  assert_int_equal(grt_alloc_free(r.a, b), GRT_ERR_OOM);
  fk_error_contains(r.dev, "cuEventCreate: CUDA_ERROR_OUT_OF_MEMORY");
  assert_int_equal(fk.live("events"), empty.events);
  fk_arm("cuEventRecord", 1, FK_ILLEGAL_ADDRESS);
  assert_int_equal(grt_alloc_free(r.a, b), GRT_ERR_DRIVER);
  fk_error_contains(r.dev, "cuEventRecord: CUDA_ERROR_ILLEGAL_ADDRESS");
  assert_int_equal(grt_cuda_events_recorded(r.ev), 0);
  uint64_t size = 0, requested = 0;
  assert_int_equal(grt_alloc_block_info(r.a, b, &size, &requested), GRT_OK); /* still allocated */
  assert_consistent(r.a);
  assert_int_equal(grt_alloc_free(r.a, b), GRT_OK);
  assert_int_equal(grt_cuda_events_recorded(r.ev), 1);
  /* a stream id the driver does not know: every record fails, nothing leaks */
  grt_devptr q = must_malloc(r.a, 3 * MiB, id_of(r.s1));
  assert_int_equal(grt_alloc_record_stream(r.a, q, 0xdead00), GRT_OK);
  assert_int_equal(grt_alloc_free(r.a, q), GRT_ERR_INVALID_HANDLE);
  fk_error_contains(r.dev, "cuEventRecord: CUDA_ERROR_INVALID_HANDLE");
  assert_int_equal(grt_alloc_free(r.a, q), GRT_ERR_INVALID_HANDLE);
  assert_consistent(r.a);
  rig_close(&r); /* destroy drops the block; the event went back to the pool */
  fk_assert_census(empty);
}

/* A driver error while asking about an event counts as completed: the allocator
 * must not hold memory forever. */
static void test_query_error_counts_as_done(void **state) {
  (void)state;
  rig r = rig_open();
  grt_cuda_gate *gate = fk_hold(r.dev, r.s2);
  grt_devptr b = must_malloc(r.a, 3 * MiB, id_of(r.s1));
  assert_int_equal(grt_alloc_record_stream(r.a, b, id_of(r.s2)), GRT_OK);
  assert_int_equal(grt_alloc_free(r.a, b), GRT_OK);
  grt_devptr c = must_malloc(r.a, 3 * MiB, id_of(r.s1)); /* queries: not ready */
  assert_int_not_equal(c, b);
  fk_arm("cuEventQuery", 1, FK_LAUNCH_FAILED);
  grt_devptr d = must_malloc(r.a, 3 * MiB, id_of(r.s1));
  assert_int_equal(d, b);
  assert_int_equal(stats_of(r.a).pending_free_blocks, 0);
  assert_int_equal(grt_cuda_gate_open(gate), GRT_OK);
  assert_int_equal(grt_cuda_gate_destroy(gate), GRT_OK);
  assert_int_equal(grt_alloc_free(r.a, c), GRT_OK);
  assert_int_equal(grt_alloc_free(r.a, d), GRT_OK);
  rig_close(&r);
}

/* The grt_stream_ops contract as the allocator sees it, called directly. */
static void test_ops_contract(void **state) {
  (void)state;
  grt_device *dev = fk_open();
  grt_cuda_events *ev = NULL;
  assert_int_equal(grt_cuda_events_create(NULL, &ev), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt_cuda_events_create(dev, NULL), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt_cuda_events_recorded(NULL), 0);
  assert_int_equal(grt_cuda_events_create(dev, &ev), GRT_OK);
  const grt_stream_ops *ops = grt_cuda_events_stream_ops(ev);
  assert_non_null(ops);
  uint64_t id = 99, id2 = 99;
  assert_int_equal(ops->record_event(ops->ctx, 0, &id), GRT_OK);
  assert_int_equal(id, 0);
  assert_int_equal(ops->event_query(ops->ctx, id), 1);
  ops->event_synchronize(ops->ctx, id);
  assert_int_equal(ops->record_event(ops->ctx, 0, &id2), GRT_OK);
  assert_int_equal(id2, 1); /* id 0 is still held */
  ops->event_destroy(ops->ctx, id);
  ops->event_destroy(ops->ctx, id2);
  /* ids it never handed out: complete, and ignored */
  assert_int_equal(ops->event_query(ops->ctx, 12345), 1);
  ops->event_synchronize(ops->ctx, 12345);
  ops->event_destroy(ops->ctx, 12345);
  assert_int_equal(grt_cuda_events_recorded(ev), 2);
  assert_int_equal(grt_device_destroy(dev), GRT_ERR_BUSY); /* its pooled events */
  assert_int_equal(grt_cuda_events_destroy(ev), GRT_OK);
  assert_int_equal(grt_device_destroy(dev), GRT_OK);
}

int main(void) {
  int ready = fk_ready("test_cuda_fake_events", "modern");
  if (ready != 1) return fk_not_ready(ready);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_deferred_free_across_streams),
      cmocka_unit_test(test_many_outstanding),
      cmocka_unit_test(test_record_failures),
      cmocka_unit_test(test_query_error_counts_as_done),
      cmocka_unit_test(test_ops_contract),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
