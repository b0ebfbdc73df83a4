/* test_exec_stream_ops.c — the exec's grt_stream_ops (grt_exec_stream_ops):
 * a "caching" allocator over the exec's device, given those ops, defers a
 * record_stream free until the event recorded at the free completes (under the
 * virtual clock to the nanosecond), and each refusal of the ops changes
 * nothing. */
#include "alloc_fixture.h"
#include "gpurt/alloc.h"
#include "test_exec_common.h"

#define KERNEL_NS 5000u

typedef struct rig {
  grt_exec *exec;
  grt_stream *a, *b; /* a allocates, b uses the block too */
  grt_stream_id ida, idb;
  grt_stream_ops ops;
  grt_allocator *alloc;
} rig;

static void rig_open(rig *r, grt_clock_kind clock) {
  r->exec = make_exec(clock, 0);
  r->a = make_stream(r->exec, GRT_STREAM_NON_BLOCKING, "a");
  r->b = make_stream(r->exec, GRT_STREAM_NON_BLOCKING, "b");
  assert_int_equal(grt_stream_get_id(r->a, &r->ida), GRT_OK);
  assert_int_equal(grt_stream_get_id(r->b, &r->idb), GRT_OK);
  assert_int_equal(grt_exec_stream_ops(r->exec, &r->ops), GRT_OK);
  grt_device *dev = NULL;
  assert_int_equal(grt_exec_get_device(r->exec, &dev), GRT_OK);
  grt_alloc_config cfg;
  grt_alloc_config_default(&cfg);
  cfg.stream_ops = &r->ops;
  assert_int_equal(grt_alloc_create("caching", dev, &cfg, &r->alloc), GRT_OK);
}

static void rig_close(rig *r) {
  assert_int_equal(grt_alloc_destroy(r->alloc), GRT_OK);
  assert_int_equal(grt_stream_destroy(r->a), GRT_OK);
  assert_int_equal(grt_stream_destroy(r->b), GRT_OK);
  assert_int_equal(grt_exec_destroy(r->exec), GRT_OK); /* no event of the ops is left alive */
}

static uint64_t now_of(grt_exec *exec) {
  uint64_t t = 0;
  assert_int_equal(grt_exec_now_ns(exec, &t), GRT_OK);
  return t;
}

/* A block used on stream b by a kernel of KERNEL_NS, then freed: the free is
 * pending while the kernel runs. Returns the block. */
static grt_devptr free_behind_kernel(rig *r) {
  grt_devptr p = 0;
  assert_int_equal(grt_alloc_malloc(r->alloc, 4096, r->ida, &p), GRT_OK);
  grt_kernel_desc k = {NULL, NULL, KERNEL_NS, GRT_ENGINE_COMPUTE, "use"};
  assert_int_equal(grt_launch_kernel(r->b, &k), GRT_OK);
  assert_int_equal(grt_alloc_record_stream(r->alloc, p, r->idb), GRT_OK);
  assert_int_equal(grt_alloc_free(r->alloc, p), GRT_OK);
  grt_alloc_stats s = stats_of(r->alloc);
  assert_int_equal(s.pending_free_blocks, 1);
  assert_int_equal(s.allocated_bytes[GRT_STAT_ALL].current, 0);
  return p;
}

/* Virtual clock: one nanosecond before the kernel ends the block is still
 * pending, and the malloc's query that finds it not ready changes nothing
 * (queries move no clock): however often the host allocates, the block stays
 * parked until host time reaches the kernel's end; then the next malloc
 * gets it. */
static void test_deferred_free_exact(void **state) {
  (void)state;
  rig r;
  rig_open(&r, GRT_CLOCK_VIRTUAL);
  grt_devptr p = free_behind_kernel(&r);
  assert_int_equal(grt_exec_host_delay(r.exec, KERNEL_NS - 1), GRT_OK);
  assert_int_equal(now_of(r.exec), KERNEL_NS - 1);
  grt_devptr t[3] = {0};
  for (int i = 0; i < 2; i++) {
    assert_int_equal(grt_alloc_malloc(r.alloc, 512, r.ida, &t[i]), GRT_OK);
    assert_true(t[i] != p);
    assert_int_equal(stats_of(r.alloc).pending_free_blocks, 1);
    assert_int_equal(now_of(r.exec), KERNEL_NS - 1);
  }
  assert_int_equal(grt_exec_host_delay(r.exec, 1), GRT_OK);
  assert_int_equal(now_of(r.exec), KERNEL_NS);
  assert_int_equal(grt_alloc_malloc(r.alloc, 512, r.ida, &t[2]), GRT_OK);
  assert_int_equal(stats_of(r.alloc).pending_free_blocks, 0);
  assert_int_equal(t[2], p); /* best fit: the 4096-byte block just handed back */
  assert_int_equal(now_of(r.exec), KERNEL_NS);
  for (int i = 0; i < 3; i++) assert_int_equal(grt_alloc_free(r.alloc, t[i]), GRT_OK);
  rig_close(&r);
}

/* empty_cache synchronizes the pending event (the ops' event_synchronize):
 * the virtual clock stands at the kernel's end, and the segment goes back. */
static void test_empty_cache_synchronizes(void **state) {
  rig r;
  rig_open(&r, clock_of(state));
  free_behind_kernel(&r);
  assert_int_equal(grt_alloc_empty_cache(r.alloc), GRT_OK);
  grt_alloc_stats s = stats_of(r.alloc);
  assert_int_equal(s.pending_free_blocks, 0);
  assert_int_equal(s.num_sync_all_streams, 1);
  assert_int_equal(s.num_device_free, 1);
  assert_int_equal(s.reserved_bytes[GRT_STAT_ALL].current, 0);
  if (clock_of(state) == GRT_CLOCK_VIRTUAL) assert_int_equal(now_of(r.exec), KERNEL_NS);
  rig_close(&r);
}

/* Either clock: a gate only the host opens holds the free however long the
 * host polls; once the stream passed it, the next malloc takes the block. */
static void test_deferred_free_gated(void **state) {
  rig r;
  rig_open(&r, clock_of(state));
  grt_user_event *gate = NULL;
  assert_int_equal(grt_user_event_create(r.exec, "gate", &gate), GRT_OK);
  assert_int_equal(grt_stream_wait_user_event(r.b, gate, 1), GRT_OK);
  grt_devptr p = free_behind_kernel(&r), t = 0;
  for (int i = 0; i < 3; i++) {
    assert_int_equal(grt_alloc_malloc(r.alloc, 512, r.ida, &t), GRT_OK);
    assert_true(t != p);
    assert_int_equal(stats_of(r.alloc).pending_free_blocks, 1);
    assert_int_equal(grt_alloc_free(r.alloc, t), GRT_OK);
  }
  assert_int_equal(grt_user_event_signal(gate, 1), GRT_OK);
  assert_int_equal(grt_stream_synchronize(r.b), GRT_OK);
  assert_int_equal(grt_alloc_malloc(r.alloc, 4096, r.ida, &t), GRT_OK);
  assert_int_equal(stats_of(r.alloc).pending_free_blocks, 0);
  assert_int_equal(t, p);
  assert_int_equal(grt_alloc_free(r.alloc, t), GRT_OK);
  assert_int_equal(grt_user_event_destroy(gate), GRT_OK);
  rig_close(&r);
}

/* A failed record writes no id and leaves no event; the allocator's free that
 * needed it fails and changes nothing, so the block can be freed again. */
static void test_record_failures(void **state) {
  rig r;
  rig_open(&r, clock_of(state));
  uint64_t ev = 77;
  assert_int_equal(grt_exec_inject_failure(r.exec, GRT_EXEC_FAULT_EVENT_CREATE, 1), GRT_OK);
  assert_int_equal(r.ops.record_event(r.ops.ctx, r.idb, &ev), GRT_ERR_FAULT_INJECTED);
  assert_int_equal(ev, 77);
  grt_devptr p = 0;
  assert_int_equal(grt_alloc_malloc(r.alloc, 4096, r.ida, &p), GRT_OK);
  assert_int_equal(grt_alloc_record_stream(r.alloc, p, r.idb), GRT_OK);
  assert_int_equal(grt_exec_inject_failure(r.exec, GRT_EXEC_FAULT_EVENT_CREATE, 1), GRT_OK);
  assert_int_equal(grt_alloc_free(r.alloc, p), GRT_ERR_FAULT_INJECTED);
  grt_alloc_stats s = stats_of(r.alloc);
  assert_int_equal(s.allocation[GRT_STAT_ALL].current, 1);
  assert_int_equal(s.pending_free_blocks, 0);
  assert_int_equal(grt_alloc_free(r.alloc, p), GRT_OK);
  assert_int_equal(stats_of(r.alloc).pending_free_blocks, 1);
  /* a destroyed stream's id is unknown */
  grt_stream *c = make_stream(r.exec, 0, "c");
  grt_stream_id idc = 0;
  assert_int_equal(grt_stream_get_id(c, &idc), GRT_OK);
  assert_int_equal(grt_stream_destroy(c), GRT_OK);
  assert_int_equal(r.ops.record_event(r.ops.ctx, idc, &ev), GRT_ERR_NOT_FOUND);
  assert_int_equal(ev, 77);
  rig_close(&r);
}

/* Virtual clock: after a sticky error the ops report every event done, so a
 * pending free is handed back instead of waiting for ever; a record fails
 * with the error and leaves no event behind. */
static void test_sticky_error_counts_done(void **state) {
  (void)state;
  rig r;
  rig_open(&r, GRT_CLOCK_VIRTUAL);
  grt_user_event *never = NULL;
  assert_int_equal(grt_user_event_create(r.exec, "never", &never), GRT_OK);
  assert_int_equal(grt_stream_wait_user_event(r.b, never, 1), GRT_OK);
  grt_devptr p = free_behind_kernel(&r), t = 0;
  uint64_t ev = 0;
  assert_int_equal(r.ops.record_event(r.ops.ctx, r.idb, &ev), GRT_OK);
  assert_int_equal(r.ops.event_query(r.ops.ctx, ev), 0);
  assert_int_equal(grt_exec_synchronize(r.exec), GRT_ERR_DEADLOCK); /* the host waits for itself */
  assert_int_equal(r.ops.event_query(r.ops.ctx, ev), 1);
  r.ops.event_synchronize(r.ops.ctx, ev); /* returns: the error stays in the exec */
  r.ops.event_destroy(r.ops.ctx, ev);
  uint64_t ev2 = 77;
  assert_int_equal(r.ops.record_event(r.ops.ctx, r.ida, &ev2), GRT_ERR_DEADLOCK);
  assert_int_equal(ev2, 77);
  assert_int_equal(grt_alloc_malloc(r.alloc, 4096, r.ida, &t), GRT_OK);
  assert_int_equal(stats_of(r.alloc).pending_free_blocks, 0);
  assert_int_equal(t, p);
  assert_int_equal(grt_alloc_free(r.alloc, t), GRT_OK);
  assert_int_equal(grt_user_event_destroy(never), GRT_OK);
  rig_close(&r);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_deferred_free_exact),
      BOTH_CLOCKS(test_empty_cache_synchronizes),
      BOTH_CLOCKS(test_deferred_free_gated),
      BOTH_CLOCKS(test_record_failures),
      cmocka_unit_test(test_sticky_error_counts_done),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
