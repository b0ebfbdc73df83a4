/* test_device_differential.c — the simulated device against an interval-list
 * reference (ref_device.h), side by side over seeded random calls: malloc
 * (absurd sizes too), malloc_at, placement hints, free of live, interior,
 * freed and foreign addresses, segment_size, host_ptr, reserve / map / unmap /
 * release, and armed faults. After every call the statuses, returned
 * addresses and the whole device statistics must be identical; every 256
 * calls so must the segment walk.
 *
 * Operation count: GRT_DIFF_OPS (default 1,000,000) split over the variants;
 * GRT_DIFF_SEED changes the seeds. The full run:
 *   GRT_DIFF_OPS=10000000 build/test/tests/test_device_differential
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <cmocka.h>

#include "base/rng.h"
#include "ref_device.h"

#define SLOTS 96
#define RES_SLOTS 4

typedef struct walk {
  grt_devptr addr[4096];
  uint64_t size[4096];
  size_t n;
} walk;

static void collect(void *ctx, grt_devptr addr, uint64_t size) {
  walk *w = ctx;
  if (w->n < 4096) {
    w->addr[w->n] = addr;
    w->size[w->n] = size;
  }
  w->n++;
}

static void compare_walk(grt_device *dev, const ref_device *r, uint64_t step) {
  static walk w;
  w.n = 0;
  assert_int_equal(grt_device_walk_segments(dev, collect, &w), GRT_OK);
  size_t k = 0;
  for (size_t i = 0; i < r->n_iv; i++) {
    if (r->iv[i].kind != REF_SEGMENT) continue;
    if (k >= w.n || w.addr[k] != r->iv[i].addr || w.size[k] != r->iv[i].size)
      fail_msg("step %llu: segment walk differs at entry %zu", (unsigned long long)step, k);
    k++;
  }
  if (k != w.n) fail_msg("step %llu: the walk lists %zu segments, the reference %zu", (unsigned long long)step, w.n, k);
}

typedef struct variant {
  uint64_t capacity, alignment;
  int host_backing;
  unsigned share; /* percent of GRT_DIFF_OPS */
} variant;

#define SAME(x, y, what)                                                                                  \
  do {                                                                                                    \
    if ((x) != (y))                                                                                       \
      fail_msg("step %llu (%s): gpurt 0x%llx, reference 0x%llx", (unsigned long long)step, what,         \
               (unsigned long long)(x), (unsigned long long)(y));                                         \
  } while (0)

static uint64_t pick_size(grt__rng *g, const variant *v) {
  uint64_t dice = grt__rng_below(g, 100);
  if (dice == 0) return 0;
  if (dice == 1) return v->capacity + 1 + grt__rng_below(g, v->capacity);
  if (dice < 40) return 1 + grt__rng_below(g, 8192);
  return grt__rng_log_uniform(g, 8192, v->capacity / 64);
}

/* Some address: a live one, one near it, a freed one, or anywhere around the device. */
static grt_devptr pick_addr(grt__rng *g, const variant *v, const grt_devptr *slots, grt_devptr freed,
                            const grt_devptr *res) {
  grt_devptr base = 0x7f0000000000ULL, p = slots[grt__rng_below(g, SLOTS)];
  switch (grt__rng_below(g, 6)) {
    case 0: return p;
    case 1: return p ? p + 512 * grt__rng_below(g, 64) : base;
    case 2: return freed;
    case 3: return res[grt__rng_below(g, RES_SLOTS)] + REF_PAGE * grt__rng_below(g, 4) + 512 * grt__rng_below(g, 2);
    case 4: return base + v->alignment * grt__rng_below(g, v->capacity / v->alignment + 16);
    default: return base - 4096 + grt__rng_below(g, 8192);
  }
}

static void run(const variant *v, uint64_t seed, uint64_t ops) {
  grt_device_config cfg;
  grt_device_config_default(&cfg);
  cfg.capacity = v->capacity;
  cfg.alignment = v->alignment;
  cfg.host_backing = v->host_backing;
  grt_device *dev;
  assert_int_equal(grt_device_create(&cfg, &dev), GRT_OK);
  ref_device r;
  ref_dev_init(&r, &cfg);
  grt_devptr slots[SLOTS] = {0}, res[RES_SLOTS] = {0}, freed = 0;
  grt__rng g;
  grt__rng_seed(&g, seed);
  uint64_t oks = 0;
  for (uint64_t step = 0; step < ops; step++) {
    int i = (int)grt__rng_below(&g, SLOTS), k = (int)grt__rng_below(&g, RES_SLOTS);
    uint64_t dice = grt__rng_below(&g, 1000);
    const char *what;
    grt_status a, b;
    if (dice < 300 && !slots[i]) {
      what = "malloc";
      uint64_t size = pick_size(&g, v);
      grt_devptr p1 = 0, p2 = 0;
      a = grt_device_malloc(dev, size, &p1);
      b = ref_dev_malloc(&r, size, &p2);
      if (a == GRT_OK && b == GRT_OK) {
        SAME(p1, p2, what);
        slots[i] = p1;
      }
    } else if (dice < 550) {
      what = "free";
      grt_devptr p = dice < 500 && slots[i] ? slots[i] : pick_addr(&g, v, slots, freed, res);
      a = grt_device_free(dev, p);
      b = ref_dev_free(&r, p);
      if (a == GRT_OK) {
        freed = p;
        for (int j = 0; j < SLOTS; j++)
          if (slots[j] == p) slots[j] = 0;
      }
    } else if (dice < 600 && !slots[i]) {
      what = "malloc_at";
      grt_devptr p = pick_addr(&g, v, slots, freed, res);
      uint64_t size = pick_size(&g, v);
      a = grt_device_malloc_at(dev, p, size);
      b = ref_dev_malloc_at(&r, p, size);
      if (a == GRT_OK) slots[i] = p;
    } else if (dice < 630) {
      what = "set_next_address";
      grt_devptr p = grt__rng_below(&g, 4) ? pick_addr(&g, v, slots, freed, res) : 0;
      a = grt_device_set_next_address(dev, p);
      b = ref_dev_set_next_address(&r, p);
    } else if (dice < 680) {
      what = "segment_size";
      grt_devptr p = pick_addr(&g, v, slots, freed, res);
      uint64_t s1 = 0, s2 = 0;
      a = grt_device_segment_size(dev, p, &s1);
      b = ref_dev_segment_size(&r, p, &s2);
      if (a == GRT_OK) SAME(s1, s2, what);
    } else if (dice < 710) {
      what = "host_ptr";
      grt_devptr p = pick_addr(&g, v, slots, freed, res);
      uint64_t len = grt__rng_below(&g, 3) ? grt__rng_below(&g, 4096) : grt__rng_below(&g, 8 * REF_PAGE);
      void *h = NULL;
      a = grt_device_host_ptr(dev, p, len, &h);
      b = ref_dev_host_ptr(&r, p, len);
      if (a == GRT_OK && len) ((volatile unsigned char *)h)[len - 1] ^= 1; /* must be addressable (ASan) */
    } else if (dice < 980 && !res[k]) { /* a slot keeps its reservation until released */
      what = "reserve";
      uint64_t size = REF_PAGE * (4 + grt__rng_below(&g, 5)) + (grt__rng_below(&g, 16) ? 0 : 512);
      grt_devptr v1 = 0, v2 = 0;
      a = grt_device_reserve(dev, size, &v1);
      b = ref_dev_reserve(&r, size, &v2);
      if (a == GRT_OK) {
        SAME(v1, v2, what);
        res[k] = v1;
      }
    } else if (dice < 850) {
      what = "map";
      grt_devptr va = res[k] + REF_PAGE * grt__rng_below(&g, 5) + (grt__rng_below(&g, 32) ? 0 : 512);
      uint64_t size = REF_PAGE * grt__rng_below(&g, 4); /* 0: invalid */
      a = grt_device_map(dev, va, size);
      b = ref_dev_map(&r, va, size);
    } else if (dice < 950) {
      what = "unmap";
      grt_devptr va = res[k] + REF_PAGE * grt__rng_below(&g, 5);
      uint64_t size = REF_PAGE * (grt__rng_below(&g, 8) ? 1 : grt__rng_below(&g, 3));
      a = grt_device_unmap(dev, va, size);
      b = ref_dev_unmap(&r, va, size);
    } else if (dice < 980) {
      what = "release";
      grt_devptr va = grt__rng_below(&g, 8) ? res[k] : res[k] + REF_PAGE;
      a = grt_device_release(dev, va);
      b = ref_dev_release(&r, va);
      if (a == GRT_OK) res[k] = 0;
    } else {
      what = "inject";
      uint64_t n = grt__rng_below(&g, 8);
      a = grt_device_inject_malloc_failure(dev, n);
      r.countdown = n;
      b = GRT_OK;
    }
    if (a != b)
      fail_msg("step %llu (%s): gpurt %s, reference %s", (unsigned long long)step, what, grt_status_name(a),
               grt_status_name(b));
    oks += a == GRT_OK;
    grt_device_stats got, want = ref_dev_stats(&r);
    assert_int_equal(grt_device_get_stats(dev, &got), GRT_OK);
    if (memcmp(&got, &want, sizeof got)) {
      const uint64_t *x = (const uint64_t *)&got, *y = (const uint64_t *)&want;
      for (size_t j = 0; j < sizeof got / 8; j++)
        if (x[j] != y[j]) fprintf(stderr, "stats word %zu: gpurt %llu, reference %llu\n", j, (unsigned long long)x[j], (unsigned long long)y[j]);
      fail_msg("step %llu (%s): device statistics differ", (unsigned long long)step, what);
    }
    if (step % 256 == 0) compare_walk(dev, &r, step);
  }
  grt_device_stats s;
  assert_int_equal(grt_device_get_stats(dev, &s), GRT_OK);
  printf("  capacity %llu MiB, alignment %llu%s, seed %llu: %llu calls (%llu OK), %llu mallocs, %llu maps, %llu faults/OOMs\n",
         (unsigned long long)(v->capacity >> 20), (unsigned long long)v->alignment, v->host_backing ? ", host-backed" : "",
         (unsigned long long)seed, (unsigned long long)ops, (unsigned long long)oks, (unsigned long long)s.malloc_calls,
         (unsigned long long)s.map_calls, (unsigned long long)s.failed_mallocs);
  /* teardown through the public calls: destroy is busy until everything went back */
  for (size_t j = 0; j < r.n_res; j++) {
    grt_devptr va = r.res[j].va;
    uint64_t pages = r.res[j].size / REF_PAGE;
    for (uint64_t p = 0; p < pages; p++) { /* one unmap per mapping, as cuMemUnmap requires */
      if (!r.res[j].phys[p] || r.res[j].first[p] != p) continue;
      uint64_t end = p + 1;
      while (end < pages && r.res[j].phys[end] && r.res[j].first[end] == p) end++;
      assert_int_equal(grt_device_unmap(dev, va + p * REF_PAGE, (end - p) * REF_PAGE), GRT_OK);
    }
  }
  if (r.n_res || s.segments) assert_int_equal(grt_device_destroy(dev), GRT_ERR_BUSY);
  for (size_t j = 0; j < r.n_res; j++) assert_int_equal(grt_device_release(dev, r.res[j].va), GRT_OK);
  for (size_t j = 0; j < r.n_iv; j++)
    if (r.iv[j].kind == REF_SEGMENT) assert_int_equal(grt_device_free(dev, r.iv[j].addr), GRT_OK);
  assert_int_equal(grt_device_destroy(dev), GRT_OK);
  ref_dev_destroy(&r);
}

static uint64_t env_u64(const char *name, uint64_t fallback) {
  const char *e = getenv(name);
  return e && *e ? strtoull(e, NULL, 10) : fallback;
}

static const variant variants[] = {
    {256 * GRT_MiB, 512, 0, 60},
    {64 * GRT_MiB, 4096, 1, 40},
};

static void run_variant(int k) {
  uint64_t total = env_u64("GRT_DIFF_OPS", 1000000);
  run(&variants[k], env_u64("GRT_DIFF_SEED", 1) * 100 + (uint64_t)k, total * variants[k].share / 100);
}

static void test_device_diff_plain(void **state) {
  (void)state;
  run_variant(0);
}
static void test_device_diff_host_backed(void **state) {
  (void)state;
  run_variant(1);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_device_diff_plain),
      cmocka_unit_test(test_device_diff_host_backed),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
