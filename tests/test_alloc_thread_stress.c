/* test_alloc_thread_stress.c — one caching allocator shared by 4 host threads.
 *
 * Each thread runs GRT_STRESS_OPS operations (default 1,000,000) of seeded
 * random malloc / free / record_stream / empty_cache / stats / bad free, on
 * its own stream and on streams every thread shares (0, 1, 2). Blocks are
 * owned by the thread that allocated them, so every free is legal; the
 * allocator's own mutex is all that orders the threads. At the end the
 * structure walker runs and everything must go back to the device. Labelled
 * `threads` (the name), so CI also runs it under ThreadSanitizer, where
 * GRT_STRESS_OPS may scale it down (scripts/test.sh tsan sets nothing: the
 * default fits the time limit there too).
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "alloc_fixture.h"
#include "base/rng.h"

#define THREADS 4
#define SLOTS 64

typedef struct worker {
  grt_allocator *a;
  uint64_t seed, ops;
  uint64_t ooms, failures; /* failures: a call returned what it must not */
} worker;

static uint64_t stress_size(grt__rng *r) {
  switch (grt__rng_below(r, 4)) {
    case 0: return 1 + grt__rng_below(r, 2048);
    case 1: return grt__rng_log_uniform(r, 2048, GRT_SMALL_SIZE);
    case 2: return grt__rng_log_uniform(r, GRT_SMALL_SIZE + 1, 10 * MiB);
    default: return grt__rng_log_uniform(r, 10 * MiB, 40 * MiB);
  }
}

static void *work(void *arg) {
  worker *w = arg;
  grt__rng r;
  grt__rng_seed(&r, w->seed);
  grt_devptr slots[SLOTS] = {0};
  grt_stream_id own = 100 + w->seed;
  for (uint64_t i = 0; i < w->ops; i++) {
    int k = (int)grt__rng_below(&r, SLOTS);
    uint64_t dice = grt__rng_below(&r, 1000);
    grt_status st;
    if (dice == 0) {
      st = grt_alloc_empty_cache(w->a);
    } else if (dice < 10) {
      grt_alloc_stats s;
      st = grt_alloc_get_stats(w->a, &s);
    } else if (dice < 20) { /* never handed out by anyone: below the device's base */
      st = grt_alloc_free(w->a, 0x1000 + 512 * grt__rng_below(&r, 100)) == GRT_ERR_UNKNOWN_POINTER ? GRT_OK
                                                                                                   : GRT_ERR_INTERNAL;
    } else if (slots[k]) {
      st = GRT_OK;
      if (grt__rng_below(&r, 4) == 0) st = grt_alloc_record_stream(w->a, slots[k], grt__rng_below(&r, 3));
      if (st == GRT_OK) st = grt_alloc_free(w->a, slots[k]);
      slots[k] = 0;
    } else {
      grt_stream_id s = grt__rng_below(&r, 2) ? own : grt__rng_below(&r, 3);
      st = grt_alloc_malloc(w->a, stress_size(&r), s, &slots[k]);
      if (st == GRT_ERR_OOM) {
        w->ooms++;
        slots[k] = 0;
        st = GRT_OK;
      }
    }
    if (st) w->failures++;
  }
  for (int k = 0; k < SLOTS; k++)
    if (slots[k] && grt_alloc_free(w->a, slots[k])) w->failures++;
  return NULL;
}

static uint64_t ops_per_thread(void) {
  const char *e = getenv("GRT_STRESS_OPS");
  uint64_t n = e ? strtoull(e, NULL, 10) : 0;
  return n ? n : 1000000;
}

static void test_four_threads_one_allocator(void **state) {
  (void)state;
  /* About half the slots are live, a quarter of them 10-40 MiB: 1 GiB keeps
     OOM and its flush-and-retry path in the mix. */
  fixture fx = make_fixture("caching", GRT_GiB, NULL);
  worker w[THREADS];
  pthread_t t[THREADS];
  for (int i = 0; i < THREADS; i++) {
    w[i] = (worker){.a = fx.a, .seed = (uint64_t)i + 1, .ops = ops_per_thread()};
    assert_int_equal(pthread_create(&t[i], NULL, work, &w[i]), 0);
  }
  uint64_t ooms = 0;
  for (int i = 0; i < THREADS; i++) {
    assert_int_equal(pthread_join(t[i], NULL), 0);
    assert_int_equal(w[i].failures, 0);
    ooms += w[i].ooms;
  }
  assert_consistent(fx.a);
  grt_alloc_stats s = stats_of(fx.a);
  assert_int_equal(s.allocation[GRT_STAT_ALL].current, 0);
  assert_int_equal((uint64_t)s.num_ooms, ooms);
  assert_int_equal(grt_alloc_empty_cache(fx.a), GRT_OK);
  s = stats_of(fx.a);
  assert_int_equal(s.reserved_bytes[GRT_STAT_ALL].current, 0);
  assert_int_equal(dev_stats(fx.dev).bytes_in_use, 0);
  printf("%d threads x %llu ops: %llu OOMs, %llu device mallocs\n", THREADS, (unsigned long long)ops_per_thread(),
         (unsigned long long)ooms, (unsigned long long)s.num_device_alloc);
  drop_fixture(&fx);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_four_threads_one_allocator),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
