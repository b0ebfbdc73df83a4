/* test_alloc_faults.c — fault injection through the device contract.
 *
 * Each workload is a fixed seeded sequence of calls. A clean run counts the
 * device calls that can fail (malloc, malloc_at, map: every one lands in
 * malloc_calls, map_calls or failed_mallocs). Then, for every N from 1 to
 * that count, a fresh device and allocator run the workload with the Nth
 * such call failing (grt_device_inject_malloc_failure). Each time:
 *   - every call returns a clear status: GRT_OK, GRT_ERR_OOM (the allocator's
 *     word for a device that said no, with a message naming the fault when
 *     it was the last device answer) or GRT_ERR_FAULT_INJECTED (the device
 *     and the naive policy pass it through);
 *   - a failed call changes no statistics but the failure counters;
 *   - the structure walker passes after every call;
 *   - with the fault cleared the same call succeeds at once;
 *   - at the end everything goes back to the device (destroy succeeds), and
 *     under ASan/LSan nothing leaks.
 * The executor's thread/event creation faults belong to tests/test_exec*.
 */
#include <stdlib.h>
#include <string.h>

#include "alloc_fixture.h"
#include "base/rng.h"

#define OPS 400
#define SLOTS 24

/* Device calls that may fail so far (each bumps exactly one of these). */
static uint64_t fallible_calls(grt_device *dev) {
  grt_device_stats s = dev_stats(dev);
  return s.malloc_calls + s.map_calls + s.failed_mallocs;
}

/* Statistics that a failed call may still move (PyTorch bumps them on OOM too). */
static void mask_failure_counters(grt_alloc_stats *s) {
  s->num_ooms = s->num_alloc_retries = s->num_sync_all_streams = 0;
  s->num_device_free = 0;
}

typedef struct workload {
  const char *policy;
  const char *conf;
  int gc;            /* garbage collection: memory_fraction 0.9 + threshold 0.5 */
  int import;        /* import a segment and a block first (malloc_at) */
  uint64_t capacity; /* large enough that a clean run never runs out */
} workload;

typedef struct outcome {
  uint64_t fallible;   /* device calls that may fail, clean run */
  uint64_t fired;      /* runs where the injected fault hit a call */
  uint64_t surfaced;   /* ... and that call returned an error */
} outcome;

static uint64_t fault_size(grt__rng *r) {
  switch (grt__rng_below(r, 4)) {
    case 0: return 1 + grt__rng_below(r, 8192);
    case 1: return grt__rng_log_uniform(r, 8192, GRT_SMALL_SIZE);
    case 2: return grt__rng_log_uniform(r, GRT_SMALL_SIZE + 1, 12 * MiB);
    default: return grt__rng_log_uniform(r, 12 * MiB, 48 * MiB);
  }
}

/* One run; inject = 0 is the clean run. Returns whether the fault fired. */
static int run_once(const workload *w, uint64_t inject, outcome *out) {
  grt_alloc_config cfg;
  grt_alloc_config_default(&cfg);
  char err[128];
  assert_int_equal(grt_alloc_config_parse(&cfg, w->conf, err, sizeof err), GRT_OK);
  if (w->gc) {
    cfg.memory_fraction = 0.9;
    cfg.garbage_collection_threshold = 0.5;
  }
  fixture fx = make_fixture(w->policy, w->capacity, &cfg);
  assert_int_equal(grt_device_inject_malloc_failure(fx.dev, inject), GRT_OK);
  grt_devptr slots[SLOTS] = {0};
  grt__rng r;
  grt__rng_seed(&r, 42);
  int fired = 0;
  uint64_t ops = 0;
  if (w->import) { /* a recorded 20 MiB segment with one live block, at the top of the device */
    grt_devptr base = 0x7f0000000000ULL + w->capacity - 20 * MiB;
    uint64_t before = fallible_calls(fx.dev);
    grt_status st = grt_alloc_import_segment(fx.a, base, 20 * MiB, 0, 1);
    if (st) {
      assert_int_equal(st, GRT_ERR_FAULT_INJECTED);
      assert_true(inject == before + 1);
      fired = 1;
      out->surfaced++;
      assert_int_equal(stats_of(fx.a).reserved_bytes[GRT_STAT_ALL].current, 0);
      assert_int_equal(grt_device_inject_malloc_failure(fx.dev, 0), GRT_OK);
      st = grt_alloc_import_segment(fx.a, base, 20 * MiB, 0, 1);
    }
    assert_int_equal(st, GRT_OK);
    assert_int_equal(grt_alloc_import_block(fx.a, base + 2 * MiB, 4 * MiB, 4 * MiB - 100), GRT_OK);
    slots[0] = base + 2 * MiB;
    fired |= inject && inject <= fallible_calls(fx.dev);
  }
  for (; ops < OPS; ops++) {
    int i = (int)grt__rng_below(&r, SLOTS);
    uint64_t dice = grt__rng_below(&r, 100);
    uint64_t before = fallible_calls(fx.dev);
    grt_alloc_stats s0 = stats_of(fx.a);
    grt_status st;
    if (dice < 3) {
      st = grt_alloc_empty_cache(fx.a);
    } else if (slots[i]) {
      st = GRT_OK;
      if (dice < 30) st = grt_alloc_record_stream(fx.a, slots[i], 1 + grt__rng_below(&r, 2));
      if (st == GRT_OK) st = grt_alloc_free(fx.a, slots[i]);
      slots[i] = 0;
    } else {
      uint64_t size = fault_size(&r);
      grt_stream_id stream = grt__rng_below(&r, 3);
      st = grt_alloc_malloc(fx.a, size, stream, &slots[i]);
      if (st) {
        assert_true(st == GRT_ERR_OOM || st == GRT_ERR_FAULT_INJECTED);
        assert_true(inject > before && inject <= fallible_calls(fx.dev)); /* only the fault can fail it */
        assert_true(grt_alloc_last_error(fx.a)[0] != 0);
        if (st == GRT_ERR_OOM) assert_non_null(strstr(grt_alloc_last_error(fx.a), "fault injection"));
        grt_alloc_stats s1 = stats_of(fx.a);
        mask_failure_counters(&s0);
        mask_failure_counters(&s1);
        /* the flush before the retry may have returned cached segments: compare what the caller sees */
        assert_int_equal(s0.allocated_bytes[GRT_STAT_ALL].current, s1.allocated_bytes[GRT_STAT_ALL].current);
        assert_int_equal(s0.allocation[GRT_STAT_ALL].current, s1.allocation[GRT_STAT_ALL].current);
        assert_int_equal(s0.requested_bytes[GRT_STAT_ALL].current, s1.requested_bytes[GRT_STAT_ALL].current);
        out->surfaced++;
        assert_consistent(fx.a);
        assert_int_equal(grt_device_inject_malloc_failure(fx.dev, 0), GRT_OK);
        st = grt_alloc_malloc(fx.a, size, stream, &slots[i]); /* cleared: succeeds */
      }
    }
    assert_int_equal(st, GRT_OK);
    if (inject > before && inject <= fallible_calls(fx.dev)) fired = 1;
    assert_consistent(fx.a);
  }
  for (int i = 0; i < SLOTS; i++)
    if (slots[i]) assert_int_equal(grt_alloc_free(fx.a, slots[i]), GRT_OK);
  assert_int_equal(grt_alloc_empty_cache(fx.a), GRT_OK);
  if (!inject) {
    out->fallible = fallible_calls(fx.dev);
    assert_int_equal(stats_of(fx.a).num_ooms, 0);
    assert_int_equal(stats_of(fx.a).num_alloc_retries, 0);
  } else if (fired && !strcmp(w->policy, "caching") && !strstr(w->conf, "max_split") && out->surfaced == 0) {
    /* the caching allocator hides a single failed device call behind its flush-and-retry */
    assert_true(stats_of(fx.a).num_alloc_retries > 0);
  }
  assert_int_equal(stats_of(fx.a).allocation[GRT_STAT_ALL].current, 0);
  drop_fixture(&fx); /* device destroy succeeds: no segment or reservation left behind */
  return fired;
}

static void sweep(const workload *w) {
  outcome o = {0};
  run_once(w, 0, &o);
  assert_true(o.fallible > 10);
  o.surfaced = 0;
  for (uint64_t n = 1; n <= o.fallible; n++) o.fired += (uint64_t)run_once(w, n, &o);
  assert_int_equal(o.fired, o.fallible); /* every device call of the workload was failed once */
  printf("  %-8s %-40s %3llu device calls failed in turn, %llu reached the caller\n", w->policy,
         w->conf[0] ? w->conf : (w->gc ? "gc + memory_fraction" : w->import ? "import" : "(defaults)"),
         (unsigned long long)o.fallible, (unsigned long long)o.surfaced);
}

static void test_faults_caching_default(void **state) {
  (void)state;
  workload w = {"caching", "", 0, 0, 512 * MiB};
  sweep(&w);
}

static void test_faults_caching_max_split(void **state) {
  (void)state;
  workload w = {"caching", "max_split_size_mb:24,roundup_power2_divisions:4", 0, 0, 512 * MiB};
  sweep(&w);
}

static void test_faults_caching_expandable(void **state) {
  (void)state;
  workload w = {"caching", "expandable_segments:True", 0, 0, 512 * MiB};
  sweep(&w);
}

static void test_faults_caching_gc(void **state) {
  (void)state;
  workload w = {"caching", "", 1, 0, 512 * MiB};
  sweep(&w);
}

static void test_faults_caching_import(void **state) {
  (void)state;
  workload w = {"caching", "", 0, 1, 512 * MiB};
  sweep(&w);
}

static void test_faults_naive(void **state) {
  (void)state;
  workload w = {"naive", "", 0, 0, 2 * GRT_GiB};
  sweep(&w);
}

/* The device alone: the Nth of malloc / malloc_at / map fails with
 * GRT_ERR_FAULT_INJECTED, changes nothing but failed_mallocs, and the same
 * call succeeds right after. */
static void test_faults_device_calls(void **state) {
  (void)state;
  for (uint64_t n = 1; n <= 12; n++) {
    grt_device_config dc;
    grt_device_config_default(&dc);
    dc.capacity = 64 * MiB;
    grt_device *dev;
    assert_int_equal(grt_device_create(&dc, &dev), GRT_OK);
    assert_int_equal(grt_device_inject_malloc_failure(dev, n), GRT_OK);
    grt_devptr seg[4], va;
    assert_int_equal(grt_device_reserve(dev, 8 * MiB, &va), GRT_OK);
    uint64_t failed = 0;
    for (int k = 0; k < 4; k++) {
      for (int kind = 0; kind < 3; kind++) {
        grt_device_stats before = dev_stats(dev);
        grt_status st;
        if (kind == 0) st = grt_device_malloc(dev, MiB, &seg[k]);
        else if (kind == 1) st = grt_device_malloc_at(dev, dc.base_address + 32 * MiB + (uint64_t)k * MiB, 512);
        else st = grt_device_map(dev, va + (uint64_t)k * 2 * MiB, 2 * MiB);
        if (st) {
          assert_int_equal(st, GRT_ERR_FAULT_INJECTED);
          grt_device_stats after = dev_stats(dev);
          before.failed_mallocs++;
          assert_memory_equal(&before, &after, sizeof before);
          failed++;
          if (kind == 0) st = grt_device_malloc(dev, MiB, &seg[k]);
          else if (kind == 1) st = grt_device_malloc_at(dev, dc.base_address + 32 * MiB + (uint64_t)k * MiB, 512);
          else st = grt_device_map(dev, va + (uint64_t)k * 2 * MiB, 2 * MiB);
        }
        assert_int_equal(st, GRT_OK);
      }
    }
    assert_int_equal(failed, 1);
    assert_int_equal(grt_device_unmap(dev, va, 8 * MiB), GRT_OK);
    assert_int_equal(grt_device_release(dev, va), GRT_OK);
    for (int k = 0; k < 4; k++) {
      assert_int_equal(grt_device_free(dev, seg[k]), GRT_OK);
      assert_int_equal(grt_device_free(dev, dc.base_address + 32 * MiB + (uint64_t)k * MiB), GRT_OK);
    }
    assert_int_equal(grt_device_destroy(dev), GRT_OK);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_faults_device_calls),   cmocka_unit_test(test_faults_caching_default),
      cmocka_unit_test(test_faults_caching_max_split), cmocka_unit_test(test_faults_caching_expandable),
      cmocka_unit_test(test_faults_caching_gc),     cmocka_unit_test(test_faults_caching_import),
      cmocka_unit_test(test_faults_naive),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
