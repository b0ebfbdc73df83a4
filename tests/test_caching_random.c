/* test_caching_random.c — seeded randomized runs of the caching allocator:
 * over 1,000,000 operations mixing sizes across both pools, several streams,
 * record_stream with deferred frees completing in random order, empty_cache,
 * bad frees and OOM pressure. After each step the structure walker runs
 * (every step early on, then every 64th), and the test keeps its own ledger:
 * live allocations never overlap, and allocated bytes equal its own sum. */
#include <stdlib.h>
#include <string.h>

#include "alloc_fixture.h"
#include "base/rng.h"

#define SLOTS 512

typedef struct live {
  grt_devptr ptr;
  uint64_t size; /* block size reported by the allocator */
  uint64_t requested;
} live;

typedef struct run_cfg {
  uint64_t seed;
  uint64_t ops;
  uint64_t capacity;
  const char *conf;
  int keeps_segments; /* merge off / idle policy: empty_cache may keep segments */
} run_cfg;

static int cmp_live(const void *x, const void *y) {
  const live *a = x, *b = y;
  return a->ptr < b->ptr ? -1 : a->ptr > b->ptr;
}

/* No two live blocks overlap, and the allocator's byte counts match the ledger. */
static void check_ledger(grt_allocator *a, const live *slots) {
  live sorted[SLOTS];
  size_t n = 0;
  int64_t bytes = 0, requested = 0;
  for (int i = 0; i < SLOTS; i++)
    if (slots[i].ptr) {
      sorted[n++] = slots[i];
      bytes += (int64_t)slots[i].size;
      requested += (int64_t)slots[i].requested;
    }
  qsort(sorted, n, sizeof *sorted, cmp_live);
  for (size_t i = 1; i < n; i++) assert_true(sorted[i - 1].ptr + sorted[i - 1].size <= sorted[i].ptr);
  grt_alloc_stats s = stats_of(a);
  assert_int_equal(s.allocated_bytes[GRT_STAT_ALL].current, bytes);
  assert_int_equal(s.allocation[GRT_STAT_ALL].current, (int64_t)n);
  assert_true(s.requested_bytes[GRT_STAT_ALL].current >= requested); /* + pending frees */
}

static int is_live(const live *slots, grt_devptr p) {
  for (int i = 0; i < SLOTS; i++)
    if (slots[i].ptr == p) return 1;
  return 0;
}

static uint64_t random_size(grt__rng *r) {
  switch (grt__rng_below(r, 4)) {
    case 0: return 1 + grt__rng_below(r, 4096);                    /* tiny: small pool */
    case 1: return grt__rng_log_uniform(r, 4096, GRT_SMALL_SIZE);  /* small pool */
    case 2: return grt__rng_log_uniform(r, GRT_SMALL_SIZE + 1, 10 * MiB); /* 20 MiB segments */
    default: return grt__rng_log_uniform(r, 10 * MiB, 64 * MiB);   /* own segments */
  }
}

static void run(const run_cfg *rc) {
  fake_events *f = calloc(1, sizeof *f);
  grt_stream_ops ops = fake_ops(f);
  grt_alloc_config c;
  grt_alloc_config_default(&c);
  char err[128];
  assert_int_equal(grt_alloc_config_parse(&c, rc->conf, err, sizeof err), GRT_OK);
  c.stream_ops = &ops;
  fixture fx = make_fixture("caching", rc->capacity, &c);
  live slots[SLOTS];
  memset(slots, 0, sizeof slots);
  grt__rng r;
  grt__rng_seed(&r, rc->seed);
  uint64_t ooms = 0, mallocs = 0;
  grt_devptr last_freed = 0;
  for (uint64_t step = 0; step < rc->ops; step++) {
    int i = (int)grt__rng_below(&r, SLOTS);
    uint64_t dice = grt__rng_below(&r, 1000);
    if (dice < 5) {
      assert_int_equal(grt_alloc_empty_cache(fx.a), GRT_OK);
    } else if (dice < 60) { /* complete some outstanding events, in random order */
      for (int k = 0; k < 8; k++) f->done[grt__rng_below(&r, f->next < 65536 ? f->next + 1 : 65536)] = 1;
    } else if (dice < 70 && slots[i].ptr && slots[i].size > 512) { /* interior pointer */
      grt_alloc_stats before = stats_of(fx.a);
      grt_devptr bad = slots[i].ptr + 512 * (1 + grt__rng_below(&r, slots[i].size / 512 - 1));
      assert_int_equal(grt_alloc_free(fx.a, bad), GRT_ERR_INTERIOR_POINTER);
      grt_alloc_stats after = stats_of(fx.a);
      assert_memory_equal(&before, &after, sizeof before);
    } else if (dice < 80 && last_freed && !is_live(slots, last_freed)) { /* double free */
      grt_alloc_stats before = stats_of(fx.a);
      grt_status st = grt_alloc_free(fx.a, last_freed);
      assert_true(st == GRT_ERR_DOUBLE_FREE || st == GRT_ERR_UNKNOWN_POINTER || st == GRT_ERR_INTERIOR_POINTER);
      grt_alloc_stats after = stats_of(fx.a);
      assert_memory_equal(&before, &after, sizeof before);
    } else if (slots[i].ptr) {
      if (grt__rng_below(&r, 4) == 0)
        assert_int_equal(grt_alloc_record_stream(fx.a, slots[i].ptr, 1 + grt__rng_below(&r, 3)), GRT_OK);
      assert_int_equal(grt_alloc_free(fx.a, slots[i].ptr), GRT_OK);
      last_freed = slots[i].ptr;
      slots[i].ptr = 0;
    } else {
      uint64_t size = random_size(&r);
      grt_stream_id s = grt__rng_below(&r, 3);
      grt_devptr p;
      grt_status st = grt_alloc_malloc(fx.a, size, s, &p);
      mallocs++;
      if (st == GRT_ERR_OOM) {
        ooms++;
      } else {
        assert_int_equal(st, GRT_OK);
        uint64_t bs, rq;
        assert_int_equal(grt_alloc_block_info(fx.a, p, &bs, &rq), GRT_OK);
        assert_int_equal(rq, size);
        assert_true(bs >= grt_alloc_round_size(&c, size));
        slots[i] = (live){p, bs, rq};
      }
    }
    if (step < 20000 || step % 64 == 0) {
      assert_consistent(fx.a);
      check_ledger(fx.a, slots);
    }
  }
  grt_alloc_stats s = stats_of(fx.a);
  assert_int_equal(s.num_ooms, ooms);
  assert_true(ooms > 0);                 /* the capacity is small enough to press */
  assert_true(ooms < mallocs / 2);
  assert_true(s.num_alloc_retries >= ooms);
  for (int i = 0; i < SLOTS; i++)
    if (slots[i].ptr) assert_int_equal(grt_alloc_free(fx.a, slots[i].ptr), GRT_OK);
  assert_int_equal(grt_alloc_empty_cache(fx.a), GRT_OK);
  s = stats_of(fx.a);
  if (!rc->keeps_segments) {
    assert_int_equal(s.reserved_bytes[GRT_STAT_ALL].current, 0); /* everything returned */
    assert_int_equal(dev_stats(fx.dev).bytes_in_use, 0);
  }
  drop_fixture(&fx);
  free(f);
}

static void test_random_default(void **state) {
  (void)state;
  run_cfg rc = {1, 400000, 2 * GRT_GiB, "", 0};
  run(&rc);
}

static void test_random_max_split_power2(void **state) {
  (void)state;
  run_cfg rc = {2, 300000, 2 * GRT_GiB, "max_split_size_mb:32,roundup_power2_divisions:[1:2,16:4,>:8]", 0};
  run(&rc);
}

static void test_random_cross_stream(void **state) {
  (void)state;
  run_cfg rc = {3, 300000, 2 * GRT_GiB, "cross_stream:with_event", 0};
  run(&rc);
}

static void test_random_options(void **state) {
  (void)state;
  run_cfg rc = {4, 100000, 2 * GRT_GiB, "fit:first,merge_on_free:False,empty_cache_idle_cycles:3", 1};
  run(&rc);
}

static void test_random_expandable(void **state) {
  (void)state;
  run_cfg rc = {5, 200000, 2 * GRT_GiB, "expandable_segments:True", 0};
  run(&rc);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_random_default),
      cmocka_unit_test(test_random_max_split_power2),
      cmocka_unit_test(test_random_cross_stream),
      cmocka_unit_test(test_random_options),
      cmocka_unit_test(test_random_expandable),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
