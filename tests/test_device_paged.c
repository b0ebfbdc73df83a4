/* test_device_paged.c — the paged device model against the contiguous one,
 * the memory limit on both (and on a backend whose free memory comes from a
 * driver), and the model's name and parser. Figures are exact: the paged model
 * charges whole 2 MiB pages and places segments first fit in its virtual space. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "device/device_impl.h"
#include "gpurt/device.h"

#define MiB GRT_MiB
#define BASE 0x7f0000000000ULL

static grt_device *make(uint64_t capacity, grt_device_model model) {
  grt_device_config cfg;
  grt_device_config_default(&cfg);
  cfg.capacity = capacity;
  cfg.model = model;
  grt_device *dev = NULL;
  assert_int_equal(grt_device_create(&cfg, &dev), GRT_OK);
  return dev;
}

static grt_device_stats stats(grt_device *dev) {
  grt_device_stats s;
  assert_int_equal(grt_device_get_stats(dev, &s), GRT_OK);
  return s;
}

/* bytes_in_use, free_bytes, largest_hole, holes, segments. */
static void assert_memory(grt_device *dev, uint64_t in_use, uint64_t free_bytes, uint64_t largest, uint64_t holes,
                          uint64_t segments) {
  grt_device_stats s = stats(dev);
  assert_int_equal(s.bytes_in_use, in_use);
  assert_int_equal(s.free_bytes, free_bytes);
  assert_int_equal(s.largest_hole, largest);
  assert_int_equal(s.holes, holes);
  assert_int_equal(s.segments, segments);
}

/* Free bytes only in 8 MiB holes: a 16 MiB malloc fails contiguous, succeeds paged. */
static void test_holes_contiguous_fails_paged_succeeds(void **state) {
  (void)state;
  grt_device_model models[] = {GRT_DEVICE_MODEL_CONTIGUOUS, GRT_DEVICE_MODEL_PAGED};
  for (int m = 0; m < 2; m++) {
    grt_device *dev = make(64 * MiB, models[m]);
    grt_devptr a[8], big = 0;
    for (int i = 0; i < 8; i++) {
      assert_int_equal(grt_device_malloc(dev, 8 * MiB, &a[i]), GRT_OK);
      assert_int_equal(a[i], BASE + (uint64_t)i * 8 * MiB);
    }
    for (int i = 0; i < 8; i += 2) assert_int_equal(grt_device_free(dev, a[i]), GRT_OK);
    if (m == 0) {
      assert_memory(dev, 32 * MiB, 32 * MiB, 8 * MiB, 4, 4);
      assert_int_equal(grt_device_malloc(dev, 16 * MiB, &big), GRT_ERR_OOM);
      assert_int_equal(stats(dev).failed_mallocs, 1);
      assert_memory(dev, 32 * MiB, 32 * MiB, 8 * MiB, 4, 4);
    } else {
      assert_memory(dev, 32 * MiB, 32 * MiB, 32 * MiB, 1, 4);
      assert_int_equal(grt_device_malloc(dev, 16 * MiB, &big), GRT_OK);
      assert_int_equal(big, BASE + 64 * MiB); /* the first virtual range that fits, above the capacity */
      assert_memory(dev, 48 * MiB, 16 * MiB, 16 * MiB, 1, 5);
      assert_int_equal(grt_device_free(dev, big), GRT_OK);
    }
    for (int i = 1; i < 8; i += 2) assert_int_equal(grt_device_free(dev, a[i]), GRT_OK);
    assert_int_equal(grt_device_destroy(dev), GRT_OK);
  }
}

static void sum_sizes(void *ctx, grt_devptr address, uint64_t size) {
  (void)address;
  *(uint64_t *)ctx += size;
}

/* Each segment holds whole pages; its size stays the size asked for. */
static void test_page_rounding(void **state) {
  (void)state;
  grt_device *dev = make(16 * MiB, GRT_DEVICE_MODEL_PAGED);
  grt_devptr a, b, c, x;
  uint64_t size = 0, walked = 0;
  assert_int_equal(grt_device_malloc(dev, MiB, &a), GRT_OK);
  assert_int_equal(a, BASE);
  assert_memory(dev, 2 * MiB, 14 * MiB, 14 * MiB, 1, 1);
  assert_int_equal(grt_device_segment_size(dev, a, &size), GRT_OK);
  assert_int_equal(size, MiB);
  assert_int_equal(grt_device_malloc(dev, 2 * MiB + 1, &b), GRT_OK); /* 2 MiB + 512 after alignment: 2 pages */
  assert_int_equal(b, BASE + MiB);
  assert_int_equal(grt_device_segment_size(dev, b, &size), GRT_OK);
  assert_int_equal(size, 2 * MiB + 512);
  assert_memory(dev, 6 * MiB, 10 * MiB, 10 * MiB, 1, 2);
  assert_int_equal(grt_device_malloc(dev, 10 * MiB + 1, &x), GRT_ERR_OOM); /* 6 pages, 5 free */
  assert_int_equal(grt_device_malloc(dev, 10 * MiB, &c), GRT_OK);
  assert_memory(dev, 16 * MiB, 0, 0, 0, 3);
  assert_int_equal(grt_device_malloc(dev, 1, &x), GRT_ERR_OOM);
  assert_int_equal(grt_device_walk_segments(dev, sum_sizes, &walked), GRT_OK);
  assert_int_equal(walked, 13 * MiB + 512);
  grt_device_stats s = stats(dev);
  assert_int_equal(s.peak_bytes_in_use, 16 * MiB);
  assert_int_equal(s.malloc_calls, 3);
  assert_int_equal(s.failed_mallocs, 2);
  assert_int_equal(grt_device_free(dev, a), GRT_OK);
  assert_int_equal(grt_device_free(dev, b), GRT_OK);
  assert_int_equal(grt_device_free(dev, c), GRT_OK);
  assert_memory(dev, 0, 16 * MiB, 16 * MiB, 1, 0);
  assert_int_equal(grt_device_destroy(dev), GRT_OK);
}

/* A capacity that is not whole pages: the remainder is free but serves nothing. */
static void test_partial_page_capacity(void **state) {
  (void)state;
  grt_device *dev = make(5 * MiB, GRT_DEVICE_MODEL_PAGED);
  grt_devptr a, x;
  uint64_t f = 0, t = 0;
  grt_device_stats s = stats(dev);
  assert_int_equal(s.capacity, 5 * MiB);
  assert_memory(dev, 0, 5 * MiB, 4 * MiB, 1, 0);
  assert_int_equal(grt_device_malloc(dev, 4 * MiB + 1, &x), GRT_ERR_OOM); /* 3 pages of 2 */
  assert_int_equal(grt_device_malloc(dev, 4 * MiB, &a), GRT_OK);
  assert_memory(dev, 4 * MiB, MiB, 0, 0, 1);
  assert_int_equal(grt_device_malloc(dev, 512, &x), GRT_ERR_OOM);
  assert_int_equal(grt_device_mem_get_info(dev, &f, &t), GRT_OK);
  assert_int_equal(f, MiB);
  assert_int_equal(t, 5 * MiB);
  assert_int_equal(grt_device_free(dev, a), GRT_OK);
  assert_int_equal(grt_device_destroy(dev), GRT_OK);
}

/* Freed pages serve a larger request; freed addresses come back first fit;
 * bad frees are classified as in the contiguous model. */
static void test_free_reuse_and_bad_frees(void **state) {
  (void)state;
  grt_device *dev = make(8 * MiB, GRT_DEVICE_MODEL_PAGED);
  grt_devptr a[4], big, again;
  for (int i = 0; i < 4; i++) assert_int_equal(grt_device_malloc(dev, 2 * MiB, &a[i]), GRT_OK);
  assert_int_equal(grt_device_free(dev, a[1]), GRT_OK);
  assert_int_equal(grt_device_free(dev, a[3]), GRT_OK);
  assert_memory(dev, 4 * MiB, 4 * MiB, 4 * MiB, 1, 2);
  assert_int_equal(grt_device_free(dev, a[1]), GRT_ERR_DOUBLE_FREE);
  assert_int_equal(grt_device_free(dev, a[0] + 512), GRT_ERR_INTERIOR_POINTER);
  assert_int_equal(grt_device_free(dev, BASE + 40 * MiB), GRT_ERR_UNKNOWN_POINTER); /* free virtual space */
  assert_int_equal(grt_device_free(dev, BASE + 64 * MiB), GRT_ERR_UNKNOWN_POINTER); /* past it */
  assert_memory(dev, 4 * MiB, 4 * MiB, 4 * MiB, 1, 2);
  assert_int_equal(grt_device_malloc(dev, 4 * MiB, &big), GRT_OK);
  assert_int_equal(big, a[3]); /* a[1]'s range is too small; a[3]'s runs on into free virtual space */
  assert_memory(dev, 8 * MiB, 0, 0, 0, 3);
  assert_int_equal(grt_device_malloc(dev, 2 * MiB, &again), GRT_ERR_OOM);
  assert_int_equal(grt_device_free(dev, big), GRT_OK);
  assert_int_equal(grt_device_malloc(dev, 2 * MiB, &again), GRT_OK);
  assert_int_equal(again, a[1]);
  assert_int_equal(grt_device_free(dev, again), GRT_OK);
  assert_int_equal(grt_device_free(dev, a[0]), GRT_OK);
  assert_int_equal(grt_device_free(dev, a[2]), GRT_OK);
  assert_int_equal(grt_device_destroy(dev), GRT_OK);
}

/* Recorded addresses above the capacity (inside 8 x capacity) are placeable. */
static void test_placement_in_virtual_space(void **state) {
  (void)state;
  grt_device *dev = make(64 * MiB, GRT_DEVICE_MODEL_PAGED);
  grt_devptr p, q;
  uint64_t size = 0;
  assert_int_equal(grt_device_malloc_at(dev, BASE + 300 * MiB, 4 * MiB), GRT_OK);
  assert_int_equal(grt_device_segment_size(dev, BASE + 300 * MiB, &size), GRT_OK);
  assert_int_equal(size, 4 * MiB);
  assert_int_equal(grt_device_set_next_address(dev, BASE + 400 * MiB), GRT_OK);
  assert_int_equal(grt_device_malloc(dev, 2 * MiB, &p), GRT_OK);
  assert_int_equal(p, BASE + 400 * MiB);
  assert_int_equal(grt_device_malloc_at(dev, BASE + 510 * MiB, 4 * MiB), GRT_ERR_OOM); /* runs past 512 MiB */
  assert_int_equal(grt_device_malloc_at(dev, BASE + 301 * MiB, MiB), GRT_ERR_OOM);     /* overlaps */
  assert_int_equal(grt_device_set_next_address(dev, BASE + 300 * MiB), GRT_OK);
  assert_int_equal(grt_device_malloc(dev, 2 * MiB, &q), GRT_OK); /* taken: first fit instead */
  assert_int_equal(q, BASE);
  assert_memory(dev, 8 * MiB, 56 * MiB, 56 * MiB, 1, 3);
  assert_int_equal(grt_device_free(dev, BASE + 300 * MiB), GRT_OK);
  assert_int_equal(grt_device_free(dev, p), GRT_OK);
  assert_int_equal(grt_device_free(dev, q), GRT_OK);
  assert_int_equal(grt_device_destroy(dev), GRT_OK);

  dev = make(4 * MiB, GRT_DEVICE_MODEL_PAGED); /* free virtual space, no free page */
  assert_int_equal(grt_device_malloc(dev, 4 * MiB, &p), GRT_OK);
  assert_int_equal(grt_device_malloc_at(dev, BASE + 20 * MiB, 512), GRT_ERR_OOM);
  assert_int_equal(grt_device_free(dev, p), GRT_OK);
  assert_int_equal(grt_device_destroy(dev), GRT_OK);

  dev = make(64 * MiB, GRT_DEVICE_MODEL_CONTIGUOUS); /* the contiguous model has no space above capacity */
  assert_int_equal(grt_device_malloc_at(dev, BASE + 100 * MiB, 2 * MiB), GRT_ERR_OOM);
  assert_int_equal(grt_device_destroy(dev), GRT_OK);
}

/* Mapped pages and segments draw on the same pages. */
static void test_paged_vmm(void **state) {
  (void)state;
  grt_device *dev = make(8 * MiB, GRT_DEVICE_MODEL_PAGED);
  grt_devptr va, a, x;
  void *host = NULL;
  assert_int_equal(grt_device_reserve(dev, 8 * MiB, &va), GRT_OK);
  assert_int_equal(grt_device_map(dev, va, 4 * MiB), GRT_OK);
  grt_device_stats s = stats(dev);
  assert_int_equal(s.mapped_bytes, 4 * MiB);
  assert_int_equal(s.reserved_va_bytes, 8 * MiB);
  assert_memory(dev, 4 * MiB, 4 * MiB, 4 * MiB, 1, 0);
  assert_int_equal(grt_device_malloc(dev, 6 * MiB, &x), GRT_ERR_OOM);
  assert_int_equal(grt_device_malloc(dev, 3 * MiB, &a), GRT_OK);
  assert_memory(dev, 8 * MiB, 0, 0, 0, 1);
  assert_int_equal(grt_device_map(dev, va + 4 * MiB, 2 * MiB), GRT_ERR_OOM);
  assert_int_equal(stats(dev).mapped_bytes, 4 * MiB);
  assert_int_equal(grt_device_host_ptr(dev, a, 16, &host), GRT_ERR_UNSUPPORTED);
  assert_int_equal(grt_device_free(dev, a), GRT_OK);
  assert_int_equal(grt_device_map(dev, va + 4 * MiB, 2 * MiB), GRT_OK);
  assert_memory(dev, 6 * MiB, 2 * MiB, 2 * MiB, 1, 0);
  assert_int_equal(grt_device_unmap(dev, va, 4 * MiB), GRT_OK);
  assert_int_equal(grt_device_unmap(dev, va + 4 * MiB, 2 * MiB), GRT_OK);
  assert_int_equal(grt_device_release(dev, va), GRT_OK);
  s = stats(dev);
  assert_int_equal(s.map_calls, 2);
  assert_int_equal(s.unmap_calls, 2);
  assert_int_equal(s.failed_mallocs, 2);
  assert_memory(dev, 0, 8 * MiB, 8 * MiB, 1, 0);
  assert_int_equal(grt_device_destroy(dev), GRT_OK);
}

/* The limit in both models: 3 MiB of room serves 3 MiB contiguous, 2 MiB paged. */
static void test_limit_both_models(void **state) {
  (void)state;
  for (int m = 0; m < 2; m++) {
    int paged = m == 1;
    grt_device *dev = make(64 * MiB, paged ? GRT_DEVICE_MODEL_PAGED : GRT_DEVICE_MODEL_CONTIGUOUS);
    grt_devptr a, b, c, x;
    char err[256];
    assert_int_equal(grt_device_set_memory_limit(dev, 11 * MiB), GRT_OK);
    assert_int_equal(grt_device_malloc(dev, 8 * MiB, &a), GRT_OK);
    assert_int_equal(grt_device_malloc(dev, 4 * MiB, &x), GRT_ERR_OOM);
    assert_int_equal(grt_device_last_error(dev, err, sizeof err), GRT_OK);
    assert_non_null(strstr(err, "memory limit"));
    grt_device_stats s = stats(dev);
    assert_int_equal(s.memory_limit, 11 * MiB);
    assert_int_equal(s.failed_mallocs, 1);
    assert_memory(dev, 8 * MiB, 3 * MiB, paged ? 2 * MiB : 3 * MiB, 1, 1);
    if (paged) {
      assert_int_equal(grt_device_malloc(dev, 3 * MiB, &b), GRT_ERR_OOM); /* 2 pages */
      assert_int_equal(grt_device_malloc(dev, 2 * MiB, &b), GRT_OK);
      assert_memory(dev, 10 * MiB, MiB, 0, 1, 2);
    } else {
      assert_int_equal(grt_device_malloc(dev, 3 * MiB, &b), GRT_OK);
      assert_memory(dev, 11 * MiB, 0, 0, 1, 2);
    }
    assert_int_equal(grt_device_malloc_at(dev, BASE + 32 * MiB, 2 * MiB), GRT_ERR_OOM);
    assert_int_equal(stats(dev).failed_mallocs, paged ? 3 : 2);
    assert_int_equal(grt_device_set_memory_limit(dev, 0), GRT_OK);
    assert_int_equal(grt_device_malloc(dev, 4 * MiB, &c), GRT_OK);
    s = stats(dev);
    assert_int_equal(s.memory_limit, 0);
    assert_int_equal(s.bytes_in_use, paged ? 14 * MiB : 15 * MiB);
    assert_int_equal(s.free_bytes, paged ? 50 * MiB : 49 * MiB);
    assert_int_equal(grt_device_free(dev, a), GRT_OK);
    assert_int_equal(grt_device_free(dev, b), GRT_OK);
    assert_int_equal(grt_device_free(dev, c), GRT_OK);
    assert_int_equal(grt_device_destroy(dev), GRT_OK);
  }
}

/* A limit below the current use: everything fails until frees bring use under it. */
static void test_limit_below_use(void **state) {
  (void)state;
  grt_device *dev = make(64 * MiB, GRT_DEVICE_MODEL_CONTIGUOUS);
  grt_devptr a, b, x, va;
  uint64_t f = 1, t = 0;
  assert_int_equal(grt_device_malloc(dev, 16 * MiB, &a), GRT_OK);
  assert_int_equal(grt_device_set_memory_limit(dev, 8 * MiB), GRT_OK);
  grt_device_stats s = stats(dev);
  assert_int_equal(s.memory_limit, 8 * MiB);
  assert_memory(dev, 16 * MiB, 0, 0, 1, 1);
  assert_int_equal(grt_device_malloc(dev, 512, &x), GRT_ERR_OOM);
  assert_int_equal(grt_device_mem_get_info(dev, &f, &t), GRT_OK);
  assert_int_equal(f, 0);
  assert_int_equal(t, 64 * MiB);
  assert_int_equal(grt_device_reserve(dev, 2 * MiB, &va), GRT_OK); /* address space only: allowed */
  assert_int_equal(grt_device_map(dev, va, 2 * MiB), GRT_ERR_OOM);
  s = stats(dev);
  assert_int_equal(s.failed_mallocs, 2);
  assert_int_equal(s.map_calls, 0);
  assert_int_equal(s.mapped_bytes, 0);
  assert_int_equal(grt_device_free(dev, a), GRT_OK);
  assert_memory(dev, 0, 8 * MiB, 8 * MiB, 1, 0);
  assert_int_equal(grt_device_malloc(dev, 8 * MiB, &b), GRT_OK);
  assert_int_equal(grt_device_malloc(dev, 512, &x), GRT_ERR_OOM);
  assert_int_equal(grt_device_free(dev, b), GRT_OK);
  assert_int_equal(grt_device_release(dev, va), GRT_OK);
  assert_int_equal(grt_device_destroy(dev), GRT_OK);

  dev = make(64 * MiB, GRT_DEVICE_MODEL_PAGED); /* in pages: 3 x 1 MiB hold 6 MiB */
  grt_devptr p[3];
  for (int i = 0; i < 3; i++) assert_int_equal(grt_device_malloc(dev, MiB, &p[i]), GRT_OK);
  assert_int_equal(grt_device_set_memory_limit(dev, 4 * MiB), GRT_OK);
  assert_int_equal(grt_device_free(dev, p[0]), GRT_OK);
  assert_int_equal(grt_device_malloc(dev, 1, &x), GRT_ERR_OOM); /* 4 MiB held: no room */
  assert_int_equal(grt_device_free(dev, p[1]), GRT_OK);
  assert_int_equal(grt_device_malloc(dev, 1, &p[0]), GRT_OK);
  assert_memory(dev, 4 * MiB, 0, 0, 1, 2);
  assert_int_equal(grt_device_free(dev, p[0]), GRT_OK);
  assert_int_equal(grt_device_free(dev, p[2]), GRT_OK);
  assert_int_equal(grt_device_destroy(dev), GRT_OK);
}

/* A backend whose free memory comes from a driver (as CUDA's does): 40 MiB. */
static grt_status driver_mem_info(void *impl, uint64_t *free_bytes, uint64_t *total) {
  (void)impl;
  *free_bytes = 40 * MiB;
  *total = 64 * MiB;
  return GRT_OK;
}

static grt_device *make_driver_like(grt__device_ops *ops) {
  grt_device_config cfg;
  grt_device_config_default(&cfg);
  cfg.capacity = 64 * MiB;
  *ops = grt__device_sim_ops;
  ops->name = "driver-like";
  ops->mem_info = driver_mem_info;
  ops->charge_unit = NULL; /* charges the aligned size, as the CUDA backend does */
  void *impl = NULL;
  grt_device *dev = NULL;
  assert_int_equal(grt__device_sim_create(&cfg, &impl), GRT_OK);
  assert_int_equal(grt__device_wrap(ops, impl, cfg.capacity, cfg.alignment, &dev), GRT_OK);
  return dev;
}

static void assert_info(grt_device *dev, uint64_t free_bytes, uint64_t total) {
  uint64_t f = 0, t = 0;
  assert_int_equal(grt_device_mem_get_info(dev, &f, &t), GRT_OK);
  assert_int_equal(f, free_bytes);
  assert_int_equal(t, total);
}

static void test_mem_get_info_with_limit(void **state) {
  (void)state;
  grt_device *dev = make(64 * MiB, GRT_DEVICE_MODEL_CONTIGUOUS);
  grt_devptr a, b, x;
  assert_int_equal(grt_device_set_memory_limit(dev, 32 * MiB), GRT_OK);
  assert_int_equal(grt_device_malloc(dev, 10 * MiB, &a), GRT_OK);
  assert_info(dev, 22 * MiB, 64 * MiB);
  assert_int_equal(grt_device_set_memory_limit(dev, 128 * MiB), GRT_OK); /* above capacity: capacity rules */
  assert_info(dev, 54 * MiB, 64 * MiB);
  grt_device_stats s = stats(dev);
  assert_int_equal(s.memory_limit, 128 * MiB);
  assert_int_equal(s.free_bytes, 54 * MiB);
  assert_int_equal(grt_device_free(dev, a), GRT_OK);
  assert_int_equal(grt_device_destroy(dev), GRT_OK);

  dev = make(64 * MiB, GRT_DEVICE_MODEL_PAGED);
  assert_int_equal(grt_device_set_memory_limit(dev, 32 * MiB), GRT_OK);
  assert_int_equal(grt_device_malloc(dev, MiB, &a), GRT_OK);
  assert_info(dev, 30 * MiB, 64 * MiB);
  assert_int_equal(grt_device_free(dev, a), GRT_OK);
  assert_int_equal(grt_device_destroy(dev), GRT_OK);

  grt__device_ops ops;
  dev = make_driver_like(&ops);
  assert_int_equal(grt_device_malloc(dev, 10 * MiB, &a), GRT_OK);
  assert_info(dev, 40 * MiB, 64 * MiB); /* no limit: the driver's figure */
  assert_int_equal(grt_device_set_memory_limit(dev, 16 * MiB), GRT_OK);
  assert_info(dev, 6 * MiB, 64 * MiB); /* the limit leaves less */
  assert_int_equal(grt_device_malloc(dev, 6 * MiB, &b), GRT_OK);
  assert_int_equal(grt_device_malloc(dev, 512, &x), GRT_ERR_OOM);
  assert_info(dev, 0, 64 * MiB);
  assert_int_equal(grt_device_set_memory_limit(dev, 60 * MiB), GRT_OK);
  assert_info(dev, 40 * MiB, 64 * MiB); /* the driver leaves less */
  assert_int_equal(grt_device_free(dev, a), GRT_OK);
  assert_int_equal(grt_device_free(dev, b), GRT_OK);
  assert_int_equal(grt_device_destroy(dev), GRT_OK);
}

typedef struct seglist {
  grt_devptr addr[16];
  uint64_t size[16];
  int n;
} seglist;

static void collect(void *ctx, grt_devptr address, uint64_t size) {
  seglist *l = ctx;
  if (l->n < 16) l->addr[l->n] = address, l->size[l->n] = size;
  l->n++;
}

static seglist segments(grt_device *dev) {
  seglist l;
  memset(&l, 0, sizeof l);
  assert_int_equal(grt_device_walk_segments(dev, collect, &l), GRT_OK);
  return l;
}

/* Every failed call leaves the device as it was, but for failed_mallocs. */
static void test_failed_calls_change_nothing(void **state) {
  (void)state;
  grt_device *dev = make(16 * MiB, GRT_DEVICE_MODEL_PAGED);
  grt_devptr a, b, va, x;
  assert_int_equal(grt_device_malloc(dev, 3 * MiB, &a), GRT_OK);
  assert_int_equal(grt_device_malloc(dev, MiB, &b), GRT_OK);
  assert_int_equal(grt_device_reserve(dev, 4 * MiB, &va), GRT_OK);
  assert_int_equal(grt_device_map(dev, va, 2 * MiB), GRT_OK);
  grt_device_stats s0 = stats(dev);
  seglist l0 = segments(dev);
  assert_int_equal(grt_device_malloc(dev, 9 * MiB, &x), GRT_ERR_OOM);             /* 5 pages, 4 free */
  assert_int_equal(grt_device_malloc_at(dev, a + 2 * MiB, 2 * MiB), GRT_ERR_OOM); /* overlaps a */
  assert_int_equal(grt_device_map(dev, va, 2 * MiB), GRT_ERR_INVALID_ARG);        /* mapped already */
  assert_int_equal(grt_device_inject_malloc_failure(dev, 1), GRT_OK);
  assert_int_equal(grt_device_malloc(dev, MiB, &x), GRT_ERR_FAULT_INJECTED);
  assert_int_equal(grt_device_set_memory_limit(dev, 10 * MiB), GRT_OK);   /* 8 MiB held: room for one page */
  assert_int_equal(grt_device_malloc(dev, 2 * MiB + 1, &x), GRT_ERR_OOM); /* 2 pages */
  assert_int_equal(grt_device_map(dev, va + 2 * MiB, 2 * MiB), GRT_OK);   /* the one page */
  assert_int_equal(grt_device_unmap(dev, va + 2 * MiB, 2 * MiB), GRT_OK);
  assert_int_equal(grt_device_set_memory_limit(dev, 8 * MiB), GRT_OK);
  assert_int_equal(grt_device_map(dev, va + 2 * MiB, 2 * MiB), GRT_ERR_OOM);
  assert_int_equal(grt_device_set_memory_limit(dev, 0), GRT_OK);
  grt_device_stats s1 = stats(dev);
  seglist l1 = segments(dev);
  assert_int_equal(s1.failed_mallocs, s0.failed_mallocs + 5);
  assert_int_equal(s1.map_calls, s0.map_calls + 1);
  assert_int_equal(s1.unmap_calls, s0.unmap_calls + 1);
  s1.failed_mallocs = s0.failed_mallocs;
  s1.map_calls = s0.map_calls;
  s1.unmap_calls = s0.unmap_calls;
  s1.syncs = s0.syncs;
  s1.peak_bytes_in_use = s0.peak_bytes_in_use;
  assert_memory_equal(&s0, &s1, sizeof s0);
  assert_memory_equal(&l0, &l1, sizeof l0);
  assert_int_equal(grt_device_unmap(dev, va, 2 * MiB), GRT_OK);
  assert_int_equal(grt_device_release(dev, va), GRT_OK);
  assert_int_equal(grt_device_free(dev, a), GRT_OK);
  assert_int_equal(grt_device_free(dev, b), GRT_OK);
  assert_int_equal(grt_device_destroy(dev), GRT_OK);
}

static void test_model_names_and_errors(void **state) {
  (void)state;
  grt_device_model m = GRT_DEVICE_MODEL_PAGED;
  assert_string_equal(grt_device_model_name(GRT_DEVICE_MODEL_CONTIGUOUS), "contiguous");
  assert_string_equal(grt_device_model_name(GRT_DEVICE_MODEL_PAGED), "paged");
  assert_string_equal(grt_device_model_name((grt_device_model)7), "unknown");
  assert_int_equal(grt_device_model_parse("contiguous", &m), GRT_OK);
  assert_int_equal(m, GRT_DEVICE_MODEL_CONTIGUOUS);
  assert_int_equal(grt_device_model_parse("paged", &m), GRT_OK);
  assert_int_equal(m, GRT_DEVICE_MODEL_PAGED);
  const char *bad[] = {"Paged", "", "paged ", "contig", "cuda"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    assert_int_equal(grt_device_model_parse(bad[i], &m), GRT_ERR_INVALID_ARG);
    assert_int_equal(m, GRT_DEVICE_MODEL_PAGED); /* unchanged */
  }
  assert_int_equal(grt_device_model_parse(NULL, &m), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt_device_model_parse("paged", NULL), GRT_ERR_INVALID_ARG);

  grt_device_config cfg;
  grt_device_config_default(&cfg);
  assert_int_equal(cfg.model, GRT_DEVICE_MODEL_CONTIGUOUS);
  grt_device *dev = (grt_device *)&cfg;
  cfg.model = (grt_device_model)7;
  assert_int_equal(grt_device_create(&cfg, &dev), GRT_ERR_INVALID_ARG);
  assert_null(dev);
  cfg.model = GRT_DEVICE_MODEL_PAGED;
  cfg.capacity = 2 * MiB - 1; /* not one page */
  assert_int_equal(grt_device_create(&cfg, &dev), GRT_ERR_INVALID_ARG);
  assert_null(dev);
  cfg.capacity = 2 * MiB;
  cfg.host_backing = 1;
  assert_int_equal(grt_device_create(&cfg, &dev), GRT_ERR_UNSUPPORTED);
  assert_null(dev);
  cfg.host_backing = 0;
  cfg.base_address = UINT64_MAX - 8 * MiB + 1 - 511; /* capacity fits below 2^64, 8 x capacity does not */
  cfg.base_address &= ~(uint64_t)511;
  assert_int_equal(grt_device_create(&cfg, &dev), GRT_ERR_INVALID_ARG);
  assert_null(dev);
  assert_int_equal(grt_device_set_memory_limit(NULL, MiB), GRT_ERR_INVALID_ARG);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_holes_contiguous_fails_paged_succeeds),
      cmocka_unit_test(test_page_rounding),
      cmocka_unit_test(test_partial_page_capacity),
      cmocka_unit_test(test_free_reuse_and_bad_frees),
      cmocka_unit_test(test_placement_in_virtual_space),
      cmocka_unit_test(test_paged_vmm),
      cmocka_unit_test(test_limit_both_models),
      cmocka_unit_test(test_limit_below_use),
      cmocka_unit_test(test_mem_get_info_with_limit),
      cmocka_unit_test(test_failed_calls_change_nothing),
      cmocka_unit_test(test_model_names_and_errors),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
