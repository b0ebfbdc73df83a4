/* test_extreme_values.c — values at the ends of their range, which a
 * container or a bounds check could mistake for "none" or wrap on: stream
 * ids UINT64_MAX, UINT64_MAX - 1 and 2^63 through every policy of a replay;
 * ranges whose end passes 2^64 (a block import, a device map or unmap, a
 * host pointer's length); devices whose reservations would wrap past 2^64
 * or land on their own segments; a PyTorch snapshot recorded just below
 * 2^64; a snapshot whose ranges are not whole 512-byte blocks; a slab
 * request no device could hold; recorded figures whose sums pass 2^63. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "gpurt/alloc.h"
#include "gpurt/replay.h"
#include "pickle_builder.h"

#define MiB ((uint64_t)1 << 20)
#define TOP_STREAM UINT64_MAX

static grt_trace *load(const void *data, size_t n, grt_trace_format fmt) {
  grt_trace_load_config cfg;
  grt_trace_load_config_default(&cfg);
  cfg.format = fmt;
  grt_trace *t = NULL;
  grt_trace_error err;
  grt_status st = grt_trace_load_buffer(data, n, "extreme", &cfg, &t, &err);
  if (st) fail_msg("load: %s", err.reason);
  return t;
}

static void check_replay_allocator(grt_replay *r) {
  char msg[256] = "";
  assert_int_equal(grt_alloc_check(grt_replay_allocator(r), msg, sizeof msg), GRT_OK);
}

/* Streams a container could reserve, replayed under every policy: the
 * allocations on each stream meet again on it, the checks pass. */
static void test_extreme_streams_every_policy(void **state) {
  (void)state;
  static const char text[] = "gpurt-trace 1\n"
                             "alloc 1 1000 0xffffffffffffffff\n"
                             "alloc 2 4096 0xfffffffffffffffe\n"
                             "alloc 3 512 0x8000000000000000\n"
                             "free 1 1000 0xffffffffffffffff\n"
                             "alloc 4 1000 0xffffffffffffffff\n"
                             "alloc 5 72057594037927936 0xffffffffffffffff\n"
                             "free 2 4096 0xfffffffffffffffe\n"
                             "free 3 512 0x8000000000000000\n"
                             "oom - 9223372036854775808 0xffffffffffffffff\n"
                             "free 4 1000 0xffffffffffffffff\n";
  static const char *const policies[] = {"caching", "naive", "bestfit", "bump", "buddy", "slab", "async", "sharded"};
  grt_trace *t = load(text, sizeof text - 1, GRT_TRACE_FORMAT_NATIVE);
  for (size_t i = 0; i < sizeof policies / sizeof *policies; i++) {
    grt_replay_config cfg;
    grt_replay_config_default(&cfg);
    cfg.policy = policies[i];
    cfg.capacity = 64 * MiB;
    grt_replay *r = NULL;
    assert_int_equal(grt_replay_open(t, &cfg, &r), GRT_OK);
    if (grt_replay_run(r)) fail_msg("%s: %s", policies[i], grt_replay_last_error(r));
    grt_replay_summary s;
    assert_int_equal(grt_replay_get_summary(r, &s), GRT_OK);
    assert_int_equal(s.events, 10);
    assert_int_equal(s.unmatched_frees, 0);
    assert_true(s.ooms >= 1);            /* the 2^56-byte request; the recorded oom */
    assert_int_equal(s.final_allocated, 0); /* every served block came back */
    check_replay_allocator(r);
    assert_int_equal(grt_replay_destroy(r), GRT_OK);
  }
  assert_int_equal(grt_trace_destroy(t), GRT_OK);
}

/* The recorded run's own figures of a trace whose sizes sum past 2^63: exact,
 * not a signed overflow. */
static void test_recorded_figures_huge(void **state) {
  (void)state;
  static const char text[] = "gpurt-trace 1\n"
                             "%segment 0x200000 4611686018427387904 0 large 0\n"
                             "%segment 0x4000000000200000 4611686018427387904 0 large 0\n"
                             "%segment 0x8000000000200000 4611686018427387904 0xffffffffffffffff large 0\n"
                             "segment_alloc - 4611686018427387904 0 - 0x200000\n"
                             "segment_alloc - 4611686018427387904 0 - 0x4000000000200000\n"
                             "segment_alloc - 4611686018427387904 0xffffffffffffffff - 0x8000000000200000\n"
                             "alloc 0 9223372036854775808 0xffffffffffffffff\n"
                             "free 0 9223372036854775808 0xffffffffffffffff\n";
  grt_trace *t = load(text, sizeof text - 1, GRT_TRACE_FORMAT_NATIVE);
  grt_trace_recorded rec;
  assert_int_equal(grt_trace_recorded_figures(t, &rec), GRT_OK);
  assert_int_equal(rec.reserved_start, 0);
  assert_int_equal(rec.reserved_peak, 3 * ((uint64_t)1 << 62));
  assert_int_equal(rec.reserved_peak_event, 2);
  assert_int_equal(rec.reserved_end, 3 * ((uint64_t)1 << 62));
  assert_int_equal(rec.requested_start, 0);
  assert_int_equal(rec.requested_peak, (uint64_t)1 << 63);
  assert_int_equal(rec.requested_end, 0);
  assert_int_equal(rec.device_mallocs, 3);
  assert_int_equal(grt_trace_destroy(t), GRT_OK);
}

/* A request above the device is an OOM before the slab sizes a block table by it. */
static void test_slab_request_above_device(void **state) {
  (void)state;
  grt_device_config dc;
  grt_device_config_default(&dc);
  dc.capacity = 64 * MiB;
  grt_device *dev = NULL;
  grt_allocator *a = NULL;
  assert_int_equal(grt_device_create(&dc, &dev), GRT_OK);
  assert_int_equal(grt_alloc_create("slab", dev, NULL, &a), GRT_OK);
  grt_devptr p = 0;
  assert_int_equal(grt_alloc_malloc(a, (uint64_t)1 << 56, 0, &p), GRT_ERR_OOM);
  assert_non_null(strstr(grt_alloc_last_error(a), "pages"));
  assert_int_equal(grt_alloc_malloc(a, 4 * MiB, TOP_STREAM, &p), GRT_OK);
  assert_int_equal(grt_alloc_free(a, p), GRT_OK);
  assert_int_equal(grt_alloc_destroy(a), GRT_OK);
  assert_int_equal(grt_device_destroy(dev), GRT_OK);
}

/* An imported block whose size wraps its end past 2^64 is not inside the free block. */
static void test_import_block_wrapping(void **state) {
  (void)state;
  grt_device_config dc;
  grt_device_config_default(&dc);
  dc.capacity = 64 * MiB;
  grt_device *dev = NULL;
  grt_allocator *a = NULL;
  assert_int_equal(grt_device_create(&dc, &dev), GRT_OK);
  assert_int_equal(grt_alloc_create("caching", dev, NULL, &a), GRT_OK);
  grt_devptr base = dc.base_address;
  assert_int_equal(grt_alloc_import_segment(a, base, 2 * MiB, TOP_STREAM, 0), GRT_OK);
  uint64_t wraps = (uint64_t)0 - 512; /* base + 512 + wraps == base */
  assert_int_equal(grt_alloc_import_block(a, base + 512, wraps, wraps), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt_alloc_import_block(a, base + 512, 2 * MiB, 0), GRT_ERR_INVALID_ARG); /* past the end */
  assert_int_equal(grt_alloc_import_block(a, base + 512, 2 * MiB - 512, 100), GRT_OK);
  char msg[256] = "";
  assert_int_equal(grt_alloc_check(a, msg, sizeof msg), GRT_OK);
  assert_int_equal(grt_alloc_free(a, base + 512), GRT_OK);
  assert_int_equal(grt_alloc_destroy(a), GRT_OK);
  assert_int_equal(grt_device_destroy(dev), GRT_OK);
}

/* Map, unmap and host pointers of a reservation refuse lengths that wrap past 2^64. */
static void test_vm_lengths_wrapping(void **state) {
  (void)state;
  grt_device_config dc;
  grt_device_config_default(&dc);
  dc.capacity = 64 * MiB;
  dc.host_backing = true;
  grt_device *dev = NULL;
  assert_int_equal(grt_device_create(&dc, &dev), GRT_OK);
  grt_devptr va = 0;
  assert_int_equal(grt_device_reserve(dev, 8 * MiB, &va), GRT_OK);
  uint64_t wraps = (uint64_t)0 - 2 * MiB; /* va + 2 MiB + wraps == va */
  assert_int_equal(grt_device_map(dev, va + 2 * MiB, wraps), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt_device_map(dev, va, 2 * MiB), GRT_OK);
  assert_int_equal(grt_device_unmap(dev, va + 2 * MiB, wraps), GRT_ERR_INVALID_ARG);
  void *host = NULL;
  assert_int_equal(grt_device_host_ptr(dev, va + 512, 1024, &host), GRT_OK);
  assert_int_equal(grt_device_host_ptr(dev, va + 512, UINT64_MAX - 100, &host), GRT_ERR_UNKNOWN_POINTER);
  assert_int_equal(grt_device_unmap(dev, va, 2 * MiB), GRT_OK);
  assert_int_equal(grt_device_release(dev, va), GRT_OK);
  assert_int_equal(grt_device_destroy(dev), GRT_OK);
}

static grt_devptr reserve_one(grt_device *dev, uint64_t size) {
  grt_devptr va = 0;
  assert_int_equal(grt_device_reserve(dev, size, &va), GRT_OK);
  return va;
}

/* Reservations never wrap past 2^64, never land at 0 or on the segments. */
static void test_reservations_placement(void **state) {
  (void)state;
  grt_device_config dc;
  grt_device_config_default(&dc);
  grt_device *dev = NULL;
  /* ending 2^44 below 2^64: reservations go below the base */
  dc.base_address = (uint64_t)0 - ((uint64_t)1 << 44) - 64 * MiB;
  dc.capacity = 64 * MiB;
  assert_int_equal(grt_device_create(&dc, &dev), GRT_OK);
  grt_devptr vas[3];
  for (int i = 0; i < 3; i++) {
    grt_devptr va = vas[i] = reserve_one(dev, 1024 * MiB);
    assert_true(va != 0 && va + 1024 * MiB > va);
    assert_true(va + 1024 * MiB <= dc.base_address || va >= dc.base_address + dc.capacity);
  }
  for (int i = 0; i < 3; i++) assert_int_equal(grt_device_release(dev, vas[i]), GRT_OK);
  assert_int_equal(grt_device_destroy(dev), GRT_OK);
  /* a contiguous device larger than the usual gap: reservations go past its segments */
  dc.base_address = 2 * MiB;
  dc.capacity = (uint64_t)1 << 45;
  assert_int_equal(grt_device_create(&dc, &dev), GRT_OK);
  grt_devptr va = reserve_one(dev, 2 * MiB);
  assert_true(va >= dc.base_address + dc.capacity);
  assert_int_equal(grt_device_release(dev, va), GRT_OK);
  assert_int_equal(grt_device_destroy(dev), GRT_OK);
  /* a device spanning nearly every address: no room is left, and none is made up */
  dc.capacity = (uint64_t)0 - 4 * MiB;
  assert_int_equal(grt_device_create(&dc, &dev), GRT_OK);
  va = 1;
  assert_int_equal(grt_device_reserve(dev, 2 * MiB, &va), GRT_ERR_OOM);
  assert_int_equal(grt_device_destroy(dev), GRT_OK);
}

/* ---- PyTorch snapshots at the top of the address space ---- */

static void event(pk *p, const char *action, uint64_t addr, uint64_t size, uint64_t stream) {
  dict_open(p);
  kv_str(p, "action", action), kv_num(p, "addr", addr), kv_num(p, "size", size), kv_num(p, "stream", stream);
  dict_close(p);
}

static void block(pk *p, uint64_t size, uint64_t requested, const char *state) {
  dict_open(p), kv_num(p, "size", size), kv_num(p, "requested_size", requested), kv_str(p, "state", state);
  dict_close(p);
}

/* One small segment at base (a block of `used` bytes allocated since
 * before the trace, the rest free), and a trace that allocates and frees
 * there and in a second segment it makes and releases. */
static void snapshot(pk *p, uint64_t base, uint64_t total, uint64_t used) {
  begin(p);
  str(p, "segments"), list_open(p), dict_open(p);
  kv_num(p, "device", 0), kv_num(p, "address", base), kv_num(p, "total_size", total), kv_num(p, "stream", TOP_STREAM);
  kv_str(p, "segment_type", "small");
  str(p, "blocks"), list_open(p), block(p, used, 100, "active_allocated"), block(p, total - used, 0, "inactive");
  list_close(p), dict_close(p), list_close(p);
  str(p, "device_traces"), list_open(p), list_open(p);
  event(p, "segment_alloc", base + 2 * MiB, 2 * MiB, TOP_STREAM - 1);
  event(p, "alloc", base + 2 * MiB, 100, TOP_STREAM - 1);
  event(p, "alloc", base + used, 700, TOP_STREAM);
  event(p, "free_requested", base + used, 700, TOP_STREAM);
  event(p, "free_completed", base + used, 700, TOP_STREAM);
  event(p, "free_completed", base + 2 * MiB, 100, TOP_STREAM - 1);
  event(p, "segment_free", base + 2 * MiB, 2 * MiB, TOP_STREAM - 1);
  list_close(p), list_close(p);
  end(p);
}

/* Recorded just below 2^64: the replay's device moves down to hold it, and
 * the faithful model places every allocation where PyTorch did. */
static void test_snapshot_below_2_64(void **state) {
  (void)state;
  pk p;
  snapshot(&p, (uint64_t)0 - 12 * MiB, 2 * MiB, 512);
  grt_trace *t = load(p.b, p.n, GRT_TRACE_FORMAT_PYTORCH);
  grt_fidelity_report rep;
  char err[256] = "";
  grt_status st = grt_replay_fidelity(t, &rep, err, sizeof err);
  if (st) fail_msg("fidelity: %s: %s", grt_status_name(st), err);
  assert_int_equal(rep.allocs, 2);
  assert_int_equal(rep.exact, 2);
  assert_true(rep.structure_ok);
  grt_replay_config cfg;
  grt_replay_config_default(&cfg);
  cfg.capacity = 16 * MiB; /* from the lowest recorded address it would pass 2^64 */
  grt_replay *r = NULL;
  assert_int_equal(grt_replay_open(t, &cfg, &r), GRT_OK);
  assert_int_equal(grt_replay_rebuild_start(r), GRT_OK);
  assert_int_equal(grt_replay_run(r), GRT_OK);
  check_replay_allocator(r);
  assert_int_equal(grt_replay_destroy(r), GRT_OK);
  assert_int_equal(grt_trace_destroy(t), GRT_OK);
}

/* A snapshot segment of a size that is no multiple of 512: the rebuild
 * refuses the snapshot, naming the segment. */
static void test_snapshot_ranges_not_blocks(void **state) {
  (void)state;
  pk p;
  snapshot(&p, 0x7f0000000000ULL, 2 * MiB + 100, 512);
  grt_trace *t = load(p.b, p.n, GRT_TRACE_FORMAT_PYTORCH);
  grt_replay *r = NULL;
  assert_int_equal(grt_replay_open(t, NULL, &r), GRT_OK);
  assert_int_equal(grt_replay_rebuild_start(r), GRT_ERR_PARSE);
  assert_non_null(strstr(grt_replay_last_error(r), "segment 0x7f0000000000 (+2097252 bytes) is not whole 512-byte blocks"));
  check_replay_allocator(r);
  assert_int_equal(grt_replay_destroy(r), GRT_OK);
  grt_fidelity_report rep;
  char err[256] = "";
  assert_int_equal(grt_replay_fidelity(t, &rep, err, sizeof err), GRT_ERR_PARSE);
  assert_non_null(strstr(err, "512-byte blocks"));
  assert_int_equal(grt_trace_destroy(t), GRT_OK);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_extreme_streams_every_policy), cmocka_unit_test(test_slab_request_above_device),
      cmocka_unit_test(test_import_block_wrapping),        cmocka_unit_test(test_vm_lengths_wrapping),
      cmocka_unit_test(test_reservations_placement),       cmocka_unit_test(test_snapshot_below_2_64),
      cmocka_unit_test(test_snapshot_ranges_not_blocks),   cmocka_unit_test(test_recorded_figures_huge),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
