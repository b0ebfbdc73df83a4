/* test_alloc_zoo.c — one seeded randomized invariant suite run against every
 * allocator policy, then targeted tests of each zoo design.
 *
 * The generic driver mixes malloc (sizes log-uniform 1 B .. 64 MiB, four
 * streams), free, block_info, empty_cache and bad frees (interior, unknown and
 * stale pointers, which must fail and change nothing) on a device small
 * enough to run out of memory often. It keeps its own record of every live
 * allocation and checks, after each operation, that the statistics equal its
 * recount and that no two live allocations overlap (a sorted set of physical
 * ranges: slab's paged allocations contribute their pages); the allocator's
 * own structure walker runs after every operation for the first 20,000 and
 * every 13th after that. Each policy sees 1,000,000 operations in all.
 */
#include <stdlib.h>
#include <string.h>

#include "alloc_fixture.h"
#include "gpurt/policy.h"
#include "base/rng.h"

static const char *const all_policies[] = {"caching", "naive", "bump", "buddy", "slab", "async", "bestfit"};
#define N_POLICIES (sizeof all_policies / sizeof all_policies[0])

/* ---- the driver's record: live allocations and a sorted set of physical ranges ---- */

typedef struct range {
  grt_devptr lo, hi; /* [lo, hi) */
} range;

typedef struct live_alloc {
  grt_devptr ptr;
  uint64_t size, requested;
  size_t n_ranges;
  range *ranges;
} live_alloc;

typedef struct driver {
  fixture fx;
  int is_slab, is_naive, is_bestfit;
  grt__rng rng;
  live_alloc *live;
  size_t n_live, cap_live;
  range *set; /* sorted by lo, pairwise disjoint */
  size_t n_set, cap_set;
  int64_t bytes, requested;
  grt_devptr freed[16]; /* recently freed pointers, for stale frees */
  unsigned n_freed;
  uint64_t ops, mallocs, ooms, frees, bad_frees, empties, checks;
} driver;

static size_t set_lower(const driver *d, grt_devptr lo) {
  size_t a = 0, b = d->n_set;
  while (a < b) {
    size_t m = a + (b - a) / 2;
    if (d->set[m].lo < lo) a = m + 1; else b = m;
  }
  return a;
}

static void set_insert(driver *d, range r) {
  size_t i = set_lower(d, r.lo);
  if (i > 0 && d->set[i - 1].hi > r.lo) fail_msg("range 0x%llx overlaps the live range before it", (unsigned long long)r.lo);
  if (i < d->n_set && d->set[i].lo < r.hi) fail_msg("range 0x%llx overlaps the live range after it", (unsigned long long)r.lo);
  if (d->n_set == d->cap_set) {
    d->cap_set = d->cap_set ? 2 * d->cap_set : 256;
    d->set = realloc(d->set, d->cap_set * sizeof *d->set);
    assert_non_null(d->set);
  }
  memmove(&d->set[i + 1], &d->set[i], (d->n_set - i) * sizeof *d->set);
  d->set[i] = r;
  d->n_set++;
}

static void set_erase(driver *d, range r) {
  size_t i = set_lower(d, r.lo);
  assert_true(i < d->n_set && d->set[i].lo == r.lo && d->set[i].hi == r.hi);
  memmove(&d->set[i], &d->set[i + 1], (d->n_set - i - 1) * sizeof *d->set);
  d->n_set--;
}

/* The physical ranges of a fresh allocation: itself, or slab's pages. */
static void ranges_of(driver *d, live_alloc *l) {
  size_t n = 1;
  grt_devptr *pages = NULL;
  if (d->is_slab) {
    assert_int_equal(grt_alloc_slab_pages(d->fx.a, l->ptr, NULL, 0, &n), GRT_OK);
    pages = malloc(n * sizeof *pages);
    assert_non_null(pages);
    size_t n2 = 0;
    assert_int_equal(grt_alloc_slab_pages(d->fx.a, l->ptr, pages, n, &n2), GRT_OK);
    assert_int_equal(n2, n);
    assert_int_equal(l->size % n, 0);
  }
  l->ranges = malloc(n * sizeof *l->ranges);
  assert_non_null(l->ranges);
  l->n_ranges = n;
  for (size_t i = 0; i < n; i++) {
    grt_devptr lo = pages ? pages[i] : l->ptr;
    l->ranges[i] = (range){lo, lo + l->size / n};
  }
  free(pages);
}

static int is_live_start(const driver *d, grt_devptr p) {
  for (size_t i = 0; i < d->n_live; i++)
    if (d->live[i].ptr == p) return 1;
  return 0;
}

/* ---- operations ---- */

static void op_malloc(driver *d) {
  uint64_t size = grt__rng_log_uniform(&d->rng, 1, 64 * MiB);
  grt_stream_id stream = grt__rng_below(&d->rng, 4);
  grt_devptr p = 0;
  grt_status st = grt_alloc_malloc(d->fx.a, size, stream, &p);
  d->mallocs++;
  if (st == GRT_ERR_OOM) {
    assert_non_null(strstr(grt_alloc_last_error(d->fx.a), "out of memory"));
    d->ooms++;
    return;
  }
  assert_int_equal(st, GRT_OK);
  live_alloc l = {p, 0, 0, 0, NULL};
  assert_int_equal(grt_alloc_block_info(d->fx.a, p, &l.size, &l.requested), GRT_OK);
  assert_int_equal(l.requested, size);
  assert_true(l.size >= size);
  ranges_of(d, &l);
  for (size_t i = 0; i < l.n_ranges; i++) set_insert(d, l.ranges[i]);
  if (d->n_live == d->cap_live) {
    d->cap_live = d->cap_live ? 2 * d->cap_live : 256;
    d->live = realloc(d->live, d->cap_live * sizeof *d->live);
    assert_non_null(d->live);
  }
  d->live[d->n_live++] = l;
  d->bytes += (int64_t)l.size;
  d->requested += (int64_t)size;
}

static void forget(driver *d, size_t i) {
  live_alloc l = d->live[i];
  for (size_t k = 0; k < l.n_ranges; k++) set_erase(d, l.ranges[k]);
  free(l.ranges);
  d->bytes -= (int64_t)l.size;
  d->requested -= (int64_t)l.requested;
  d->freed[d->n_freed++ % 16] = l.ptr;
  d->live[i] = d->live[--d->n_live];
}

static void op_free(driver *d) {
  size_t i = grt__rng_below(&d->rng, d->n_live);
  assert_int_equal(grt_alloc_free(d->fx.a, d->live[i].ptr), GRT_OK);
  forget(d, i);
  d->frees++;
}

/* A bad free must fail with the right class of error and change nothing. */
static void op_bad_free(driver *d) {
  grt_alloc_stats before = stats_of(d->fx.a), after;
  grt_device_stats dbefore = dev_stats(d->fx.dev), dafter;
  unsigned kind = (unsigned)grt__rng_below(&d->rng, 3);
  grt_devptr p;
  grt_status want = GRT_OK, st;
  if (kind == 0 && d->n_live) { /* interior */
    const live_alloc *l = &d->live[grt__rng_below(&d->rng, d->n_live)];
    p = l->ptr + 1 + grt__rng_below(&d->rng, l->size - 1);
    want = GRT_ERR_INTERIOR_POINTER;
  } else if (kind == 1 && d->n_freed && !is_live_start(d, d->freed[(d->n_freed - 1) % 16])) {
    p = d->freed[(d->n_freed - 1) % 16]; /* stale: freed, maybe reused inside another block, maybe released */
  } else {
    p = 4096 * (1 + grt__rng_below(&d->rng, 1 << 20)); /* far below any device */
    want = GRT_ERR_UNKNOWN_POINTER;
  }
  st = grt_alloc_free(d->fx.a, p);
  if (want == GRT_ERR_INTERIOR_POINTER && d->is_naive && st == GRT_ERR_DOUBLE_FREE)
    ; /* the device names an address it once freed a double free, even inside a live segment */
  else if (want)
    assert_int_equal(st, want);
  else
    assert_true(st == GRT_ERR_DOUBLE_FREE || st == GRT_ERR_INTERIOR_POINTER || st == GRT_ERR_UNKNOWN_POINTER);
  assert_true(grt_alloc_last_error(d->fx.a)[0] != 0);
  after = stats_of(d->fx.a);
  dafter = dev_stats(d->fx.dev);
  assert_memory_equal(&before, &after, sizeof before);
  assert_memory_equal(&dbefore, &dafter, sizeof dbefore);
  d->bad_frees++;
}

static void op_block_info(driver *d) {
  const live_alloc *l = &d->live[grt__rng_below(&d->rng, d->n_live)];
  uint64_t size, req;
  assert_int_equal(grt_alloc_block_info(d->fx.a, l->ptr, &size, &req), GRT_OK);
  assert_int_equal(size, l->size);
  assert_int_equal(req, l->requested);
}

/* Statistics against the driver's recount, the device against the reservation, and (when full) the walker. */
static void verify(driver *d, int full) {
  grt_alloc_stats s = stats_of(d->fx.a);
  assert_int_equal(s.allocation[GRT_STAT_ALL].current, (int64_t)d->n_live);
  assert_int_equal(s.allocated_bytes[GRT_STAT_ALL].current, d->bytes);
  assert_int_equal(s.requested_bytes[GRT_STAT_ALL].current, d->requested);
  assert_true(s.reserved_bytes[GRT_STAT_ALL].current >= d->bytes);
  if (!full) return;
  assert_int_equal(dev_stats(d->fx.dev).bytes_in_use, (uint64_t)s.reserved_bytes[GRT_STAT_ALL].current);
  assert_consistent(d->fx.a);
  d->checks++;
}

static void step(driver *d) {
  uint64_t r = grt__rng_below(&d->rng, 1000);
  if (r < 5) {
    assert_int_equal(grt_alloc_empty_cache(d->fx.a), GRT_OK);
    d->empties++;
  } else if (r < 35)
    op_bad_free(d);
  else if (r < 60 && d->n_live)
    op_block_info(d);
  else if (d->n_live == 0 || r < 540)
    op_malloc(d);
  else
    op_free(d);
  d->ops++;
  verify(d, d->ops <= 20000 || d->ops % 13 == 0);
}

/* One seeded run; ends by freeing everything (or, on odd seeds, by destroying with live blocks). */
static void run(const char *policy, uint64_t seed, uint64_t capacity, uint64_t n_ops, uint64_t *total_ops) {
  driver d;
  memset(&d, 0, sizeof d);
  d.fx = make_fixture(policy, capacity, NULL);
  d.is_slab = !strcmp(policy, "slab");
  d.is_naive = !strcmp(policy, "naive");
  d.is_bestfit = !strcmp(policy, "bestfit");
  grt__rng_seed(&d.rng, seed);
  for (uint64_t i = 0; i < n_ops; i++) step(&d);
  if (seed % 2 == 0) {
    while (d.n_live) op_free(&d);
    assert_int_equal(grt_alloc_empty_cache(d.fx.a), GRT_OK);
    verify(&d, 1);
    if (d.is_bestfit) { /* a heap keeps its arena; emptied, it is one free range again */
      grt_alloc_stats s = stats_of(d.fx.a);
      assert_true(s.reserved_bytes[GRT_STAT_ALL].current > 0);
      assert_int_equal(s.largest_free_block, (uint64_t)s.reserved_bytes[GRT_STAT_ALL].current);
    } else {
      assert_int_equal(dev_stats(d.fx.dev).bytes_in_use, 0); /* async too: its release threshold is 0 */
    }
  }
  assert_consistent(d.fx.a);
  for (size_t i = 0; i < d.n_live; i++) free(d.live[i].ranges);
  assert_int_equal(grt_alloc_destroy(d.fx.a), GRT_OK);
  assert_int_equal(dev_stats(d.fx.dev).bytes_in_use, 0);
  assert_int_equal(grt_device_destroy(d.fx.dev), GRT_OK);
  printf("  %-8s seed %llu, %4llu MiB: %llu ops, %llu mallocs (%llu OOM), %llu frees, %llu bad frees, %llu checks\n",
         policy, (unsigned long long)seed, (unsigned long long)(capacity / MiB), (unsigned long long)d.ops,
         (unsigned long long)d.mallocs, (unsigned long long)d.ooms, (unsigned long long)d.frees,
         (unsigned long long)d.bad_frees, (unsigned long long)d.checks);
  *total_ops += d.ops; /* the final frees are not counted */
  free(d.live);
  free(d.set);
}

static void test_randomized_invariants(void **state) {
  (void)state;
  static const uint64_t capacity[] = {128 * MiB, 256 * MiB, 384 * MiB, 512 * MiB};
  for (size_t p = 0; p < N_POLICIES; p++) {
    uint64_t total = 0;
    for (uint64_t seed = 1; seed <= 4; seed++) run(all_policies[p], seed * 7919 + p, capacity[seed - 1], 250000, &total);
    assert_true(total >= 1000000);
  }
}

/* ---- targeted tests ---- */

static grt_status free_of(grt_allocator *a, grt_devptr p) { return grt_alloc_free(a, p); }

/* One of the async pool's cudaMemPoolGetAttribute figures, read through grt_alloc_get. */
static uint64_t async_attr(grt_allocator *a, const char *key) {
  uint64_t v = 0;
  assert_int_equal(grt_alloc_get(a, key, &v), GRT_OK);
  return v;
}

/* Bump: freed memory comes back only when the arena empties or the phase is reset. */
static void test_bump_reset(void **state) {
  (void)state;
  fixture fx = make_fixture("bump", 256 * MiB, NULL);
  assert_int_equal(grt_alloc_set(fx.a, "arena_size", 4 * MiB), GRT_OK);
  grt_devptr a = must_malloc(fx.a, 1000, 0), b = must_malloc(fx.a, 1000, 0), c = must_malloc(fx.a, 1000, 0);
  assert_int_equal(b, a + 1024);
  assert_int_equal(c, b + 1024);
  assert_int_equal(free_of(fx.a, b), GRT_OK);
  grt_devptr d = must_malloc(fx.a, 512, 1);
  assert_int_equal(d, c + 1024); /* b's bytes stay dead until a reset */
  assert_int_equal(free_of(fx.a, b), GRT_ERR_DOUBLE_FREE);
  assert_int_equal(free_of(fx.a, a + 8), GRT_ERR_INTERIOR_POINTER);
  assert_int_equal(free_of(fx.a, a), GRT_OK);
  assert_int_equal(free_of(fx.a, c), GRT_OK);
  assert_int_equal(free_of(fx.a, d), GRT_OK); /* the arena empties: per-phase reset */
  assert_int_equal(must_malloc(fx.a, 512, 0), a);
  grt_devptr big = must_malloc(fx.a, 5 * MiB, 0); /* larger than an arena: one of its own */
  grt_alloc_stats s = stats_of(fx.a);
  assert_int_equal(s.segment[GRT_STAT_ALL].current, 2);
  assert_int_equal(s.reserved_bytes[GRT_STAT_ALL].current, 9 * MiB);
  assert_consistent(fx.a);
  assert_int_equal(grt_alloc_bump_reset(fx.a), GRT_OK); /* ends the phase: both allocations die */
  s = stats_of(fx.a);
  assert_int_equal(s.allocation[GRT_STAT_ALL].current, 0);
  assert_int_equal(s.reserved_bytes[GRT_STAT_ALL].current, 9 * MiB); /* arenas stay for the next phase */
  assert_int_equal(free_of(fx.a, big), GRT_ERR_DOUBLE_FREE);
  assert_int_equal(must_malloc(fx.a, 512, 0), a);
  assert_int_equal(grt_alloc_empty_cache(fx.a), GRT_OK); /* the empty 5 MiB arena goes back */
  assert_int_equal(stats_of(fx.a).segment[GRT_STAT_ALL].current, 1);
  assert_int_equal(grt_alloc_set(fx.a, "arena_size", 1000), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt_alloc_set(fx.a, "segment_size", MiB), GRT_ERR_UNSUPPORTED);
  assert_non_null(strstr(grt_alloc_last_error(fx.a), "no setting \"segment_size\""));
  drop_fixture(&fx);
}

/* Buddy: power-of-two blocks, buddies side by side, everything coalesces back to the top order. */
static void test_buddy_coalescing(void **state) {
  (void)state;
  fixture fx = make_fixture("buddy", 64 * MiB, NULL);
  assert_int_equal(grt_alloc_set(fx.a, "segment_size", MiB), GRT_OK);
  assert_int_equal(grt_alloc_set(fx.a, "segment_size", 3 * MiB), GRT_ERR_INVALID_ARG);
  grt_devptr p = must_malloc(fx.a, 600, 0), q = must_malloc(fx.a, 100, 0);
  uint64_t size, req;
  assert_int_equal(grt_alloc_block_info(fx.a, p, &size, &req), GRT_OK);
  assert_int_equal(size, 1024);
  assert_int_equal(req, 600);
  assert_int_equal(q, p + 1024); /* the 1 KiB block's sibling half, split down to 512 */
  grt_alloc_stats s = stats_of(fx.a);
  assert_int_equal(s.allocated_bytes[GRT_STAT_ALL].current - s.requested_bytes[GRT_STAT_ALL].current, 424 + 412);
  assert_int_equal(free_of(fx.a, p + 512), GRT_ERR_INTERIOR_POINTER);
  assert_int_equal(free_of(fx.a, p + 1536), GRT_ERR_DOUBLE_FREE); /* q's free buddy */
  grt__rng rng;
  grt__rng_seed(&rng, 7);
  grt_devptr live[600];
  size_t n = 0;
  for (int round = 0; round < 20; round++) {
    while (n < 600) {
      grt_devptr x;
      if (grt_alloc_malloc(fx.a, grt__rng_log_uniform(&rng, 1, 3 * MiB), 0, &x)) break;
      live[n++] = x;
    }
    for (size_t k = n / 2; k > 0; k--) { /* free a random half */
      size_t i = grt__rng_below(&rng, n);
      assert_int_equal(free_of(fx.a, live[i]), GRT_OK);
      live[i] = live[--n];
    }
    assert_consistent(fx.a);
  }
  while (n) assert_int_equal(free_of(fx.a, live[--n]), GRT_OK);
  assert_int_equal(free_of(fx.a, p), GRT_OK);
  assert_int_equal(free_of(fx.a, q), GRT_OK);
  s = stats_of(fx.a);
  assert_int_equal(s.inactive_split[GRT_STAT_ALL].current, 0); /* every segment is one top-order block again */
  grt_alloc_snapshot *snap;
  assert_int_equal(grt_alloc_snapshot_take(fx.a, &snap), GRT_OK);
  assert_true(snap->n_segments > 1);
  for (size_t i = 0; i < snap->n_segments; i++) {
    assert_int_equal(snap->segments[i].n_blocks, 1);
    assert_int_equal(snap->segments[i].blocks[0].state, GRT_BLOCK_INACTIVE);
    assert_true(snap->segments[i].total_size >= MiB);
  }
  grt_alloc_snapshot_free(snap);
  assert_true(stats_of(fx.a).largest_free_block >= MiB);
  assert_int_equal(grt_alloc_empty_cache(fx.a), GRT_OK);
  assert_int_equal(dev_stats(fx.dev).bytes_in_use, 0);
  drop_fixture(&fx);
}

/* Slab: block tables; after any churn a request of all the free pages succeeds without the device. */
static void test_slab_zero_external_fragmentation(void **state) {
  (void)state;
  const uint64_t page = 64 * GRT_KiB;
  fixture fx = make_fixture("slab", 64 * MiB, NULL);
  assert_int_equal(grt_alloc_set(fx.a, "page_size", page), GRT_OK);
  grt__rng rng;
  grt__rng_seed(&rng, 11);
  grt_devptr live[4096];
  size_t n = 0;
  for (int round = 0; round < 50; round++) {
    while (n < 4096) {
      grt_devptr x;
      if (grt_alloc_malloc(fx.a, grt__rng_log_uniform(&rng, 1, 2 * MiB), 0, &x)) break;
      live[n++] = x;
    }
    for (size_t k = n / 2; k > 0; k--) {
      size_t i = grt__rng_below(&rng, n);
      assert_int_equal(free_of(fx.a, live[i]), GRT_OK);
      live[i] = live[--n];
    }
    grt_alloc_stats s = stats_of(fx.a);
    uint64_t free_pages = (uint64_t)(s.reserved_bytes[GRT_STAT_ALL].current - s.allocated_bytes[GRT_STAT_ALL].current) / page;
    assert_int_equal(s.largest_free_block, free_pages * page);
    grt_devptr all = must_malloc(fx.a, free_pages * page, 1); /* scattered pages, one request */
    assert_int_equal(stats_of(fx.a).num_device_alloc, s.num_device_alloc);
    size_t np = 0;
    assert_int_equal(grt_alloc_slab_pages(fx.a, all, NULL, 0, &np), GRT_OK);
    assert_int_equal(np, free_pages);
    assert_consistent(fx.a);
    assert_int_equal(free_of(fx.a, all), GRT_OK);
  }
  while (n) assert_int_equal(free_of(fx.a, live[--n]), GRT_OK);
  grt_devptr v = must_malloc(fx.a, 3 * page - 5, 0); /* a paged allocation: virtual handle */
  grt_devptr pages[3];
  size_t np;
  assert_int_equal(grt_alloc_slab_pages(fx.a, v, pages, 3, &np), GRT_OK);
  assert_int_equal(np, 3);
  uint64_t size, req;
  assert_int_equal(grt_alloc_block_info(fx.a, v, &size, &req), GRT_OK);
  assert_int_equal(size, 3 * page);
  assert_int_equal(free_of(fx.a, v + page), GRT_ERR_INTERIOR_POINTER);
  assert_int_equal(free_of(fx.a, pages[1]), GRT_ERR_INTERIOR_POINTER); /* a page is not the handle */
  assert_int_equal(grt_alloc_set(fx.a, "page_size", page), GRT_ERR_BUSY);
  grt_devptr one = must_malloc(fx.a, 10, 0);
  assert_int_equal(grt_alloc_slab_pages(fx.a, one, pages, 3, &np), GRT_OK);
  assert_int_equal(np, 1);
  assert_int_equal(pages[0], one); /* a one-page allocation is its page */
  assert_int_equal(free_of(fx.a, v), GRT_OK);
  assert_int_equal(free_of(fx.a, v), GRT_ERR_DOUBLE_FREE);
  assert_int_equal(free_of(fx.a, one), GRT_OK);
  assert_int_equal(free_of(fx.a, one), GRT_ERR_DOUBLE_FREE);
  grt_devptr too_big;
  assert_int_equal(grt_alloc_malloc(fx.a, 65 * MiB, 0, &too_big), GRT_ERR_OOM);
  assert_non_null(strstr(grt_alloc_last_error(fx.a), "pages"));
  assert_int_equal(grt_alloc_empty_cache(fx.a), GRT_OK);
  assert_int_equal(dev_stats(fx.dev).bytes_in_use, 0);
  drop_fixture(&fx);
}

/* Async: best fit with split/merge; the release threshold at sync points; trim_to; pool attributes. */
static void test_async_release_threshold(void **state) {
  (void)state;
  fixture fx = make_fixture("async", 512 * MiB, NULL);
  grt_devptr a = must_malloc(fx.a, MiB, 0), b = must_malloc(fx.a, 2 * MiB, 0);
  assert_int_equal(b, a + MiB); /* split from one 32 MiB chunk */
  assert_int_equal(free_of(fx.a, a), GRT_OK);
  assert_int_equal(free_of(fx.a, b), GRT_OK);
  grt_alloc_snapshot *snap;
  assert_int_equal(grt_alloc_snapshot_take(fx.a, &snap), GRT_OK);
  assert_int_equal(snap->n_segments, 1);
  assert_int_equal(snap->segments[0].n_blocks, 1); /* merged back */
  grt_alloc_snapshot_free(snap);
  grt_devptr x = must_malloc(fx.a, 40 * MiB, 0), y = must_malloc(fx.a, 50 * MiB, 0);
  assert_int_equal(free_of(fx.a, x), GRT_OK);
  assert_int_equal(free_of(fx.a, y), GRT_OK); /* 32 + 40 + 50 MiB reserved, nothing used */
  assert_int_equal(async_attr(fx.a, "reserved_mem_current"), 122 * MiB);
  assert_int_equal(async_attr(fx.a, "used_mem_current"), 0);
  assert_int_equal(async_attr(fx.a, "used_mem_high"), 90 * MiB);
  assert_int_equal(grt_alloc_set(fx.a, "release_threshold", UINT64_MAX), GRT_OK);
  assert_int_equal(grt_alloc_empty_cache(fx.a), GRT_OK); /* a sync point: below the threshold, nothing goes */
  assert_int_equal(dev_stats(fx.dev).bytes_in_use, 122 * MiB);
  assert_int_equal(grt_alloc_set(fx.a, "release_threshold", 80 * MiB), GRT_OK);
  assert_int_equal(dev_stats(fx.dev).bytes_in_use, 122 * MiB); /* nothing until the next sync point */
  assert_int_equal(grt_alloc_empty_cache(fx.a), GRT_OK);
  assert_int_equal(dev_stats(fx.dev).bytes_in_use, 72 * MiB); /* the largest (50 MiB) went: 72 <= 80 */
  grt_devptr z = must_malloc(fx.a, 10 * MiB, 3);
  assert_int_equal(grt_alloc_async_trim_to(fx.a, 0), GRT_OK); /* the segment holding z stays */
  assert_int_equal(dev_stats(fx.dev).bytes_in_use, 32 * MiB);
  assert_int_equal(async_attr(fx.a, "reserved_mem_high"), 122 * MiB);
  assert_int_equal(async_attr(fx.a, "release_threshold"), 80 * MiB);
  assert_int_equal(free_of(fx.a, z + 512), GRT_ERR_INTERIOR_POINTER);
  assert_int_equal(free_of(fx.a, z + 10 * MiB), GRT_ERR_DOUBLE_FREE); /* the free remainder */
  assert_int_equal(free_of(fx.a, z), GRT_OK);
  uint64_t edges = stats_of(fx.a).cross_stream_syncs;
  grt_devptr w = must_malloc(fx.a, MiB, 4); /* reuse of stream 3's free on stream 4: one event edge */
  assert_int_equal(w, z);
  assert_int_equal(stats_of(fx.a).cross_stream_syncs, edges + 1);
  assert_int_equal(free_of(fx.a, w), GRT_OK);
  assert_int_equal(grt_alloc_async_trim_to(fx.a, 0), GRT_OK);
  assert_int_equal(dev_stats(fx.dev).bytes_in_use, 0);
  assert_int_equal(grt_alloc_bump_reset(fx.a), GRT_ERR_UNSUPPORTED);
  drop_fixture(&fx);
}

/* Every zoo policy: OOM with a message, snapshot tiling its segments, a failed malloc leaving the counts. */
static void test_zoo_oom_and_snapshot(void **state) {
  (void)state;
  for (size_t p = 2; p < N_POLICIES; p++) {
    fixture fx = make_fixture(all_policies[p], 96 * MiB, NULL);
    grt_devptr a = must_malloc(fx.a, 5000, 0), b = must_malloc(fx.a, 3 * MiB, 1), c;
    uint64_t in_use = dev_stats(fx.dev).bytes_in_use;
    grt_status st = grt_alloc_malloc(fx.a, 200 * MiB, 0, &c);
    assert_int_equal(st, GRT_ERR_OOM);
    assert_non_null(strstr(grt_alloc_last_error(fx.a), "out of memory"));
    assert_int_equal(dev_stats(fx.dev).bytes_in_use, in_use); /* slab gave back what it had gathered */
    grt_alloc_stats s = stats_of(fx.a);
    assert_int_equal(s.num_ooms, 1);
    assert_int_equal(s.reserved_bytes[GRT_STAT_ALL].current, (int64_t)in_use);
    assert_int_equal(s.allocation[GRT_STAT_ALL].current, 2);
    grt_alloc_snapshot *snap;
    assert_int_equal(grt_alloc_snapshot_take(fx.a, &snap), GRT_OK);
    uint64_t total = 0, allocated = 0;
    for (size_t i = 0; i < snap->n_segments; i++) {
      const grt_snapshot_segment *g = &snap->segments[i];
      grt_devptr at = g->address;
      for (size_t k = 0; k < g->n_blocks; k++) {
        assert_int_equal(g->blocks[k].address, at);
        at += g->blocks[k].size;
      }
      assert_int_equal(at, g->address + g->total_size);
      total += g->total_size;
      allocated += g->allocated_size;
    }
    assert_int_equal(total, (uint64_t)s.reserved_bytes[GRT_STAT_ALL].current);
    assert_int_equal(allocated, (uint64_t)s.allocated_bytes[GRT_STAT_ALL].current);
    grt_alloc_snapshot_free(snap);
    assert_int_equal(grt_alloc_free(fx.a, a), GRT_OK);
    assert_int_equal(grt_alloc_free(fx.a, b), GRT_OK);
    assert_int_equal(grt_alloc_empty_cache(fx.a), GRT_OK);
    /* bestfit's arena is the whole device and stays until destroy */
    assert_int_equal(dev_stats(fx.dev).bytes_in_use, strcmp(all_policies[p], "bestfit") ? 0 : 96 * MiB);
    drop_fixture(&fx);
  }
}

/* Bestfit: one arena spanning the device; each request takes the smallest free range that fits. */
static void test_bestfit_exact_fit(void **state) {
  (void)state;
  fixture fx = make_fixture("bestfit", 64 * MiB, NULL);
  const grt_devptr base = 0x7f0000000000ull; /* the device's default base: the arena starts there */
  uint64_t size, req;
  /* before the first malloc there is no arena: every pointer is unknown */
  assert_int_equal(free_of(fx.a, base), GRT_ERR_UNKNOWN_POINTER);
  assert_int_equal(grt_alloc_record_stream(fx.a, base, 1), GRT_ERR_UNKNOWN_POINTER);
  assert_int_equal(grt_alloc_block_info(fx.a, base, &size, &req), GRT_ERR_UNKNOWN_POINTER);
  grt_alloc_snapshot *snap;
  assert_int_equal(grt_alloc_snapshot_take(fx.a, &snap), GRT_OK);
  assert_int_equal(snap->n_segments, 0);
  grt_alloc_snapshot_free(snap);
  assert_int_equal(stats_of(fx.a).largest_free_block, 0);
  assert_int_equal(dev_stats(fx.dev).bytes_in_use, 0);
  assert_consistent(fx.a);

  grt_devptr a = must_malloc(fx.a, 1000, 0);
  assert_int_equal(a, base);
  assert_int_equal(grt_alloc_block_info(fx.a, a, &size, &req), GRT_OK);
  assert_int_equal(size, 1024);
  assert_int_equal(req, 1000);
  grt_alloc_stats s = stats_of(fx.a);
  assert_int_equal(s.reserved_bytes[GRT_STAT_ALL].current, 64 * MiB);
  assert_int_equal(s.segment[GRT_STAT_LARGE_POOL].current, 1);
  assert_int_equal(s.num_device_alloc, 1);
  assert_int_equal(dev_stats(fx.dev).bytes_in_use, 64 * MiB);
  grt_devptr b = must_malloc(fx.a, 4096, 1), c = must_malloc(fx.a, 512, 0), d = must_malloc(fx.a, 2048, 2),
             e = must_malloc(fx.a, 512, 0);
  assert_int_equal(b, a + 1024);
  assert_int_equal(c, b + 4096);
  assert_int_equal(d, c + 512);
  assert_int_equal(e, d + 2048);
  assert_int_equal(free_of(fx.a, b), GRT_OK); /* holes of 4 KiB and 2 KiB */
  assert_int_equal(free_of(fx.a, d), GRT_OK);
  assert_int_equal(must_malloc(fx.a, 1500, 0), d); /* the 2 KiB hole fits best */
  assert_int_equal(must_malloc(fx.a, 3000, 0), b); /* then the 4 KiB one */
  assert_int_equal(must_malloc(fx.a, 400, 3), d + 1536); /* the 512 B rest of d's hole beats b's 1 KiB rest */
  grt_devptr big = must_malloc(fx.a, 2 * MiB, 0);
  assert_int_equal(big, e + 512); /* no hole fits: the tail of the arena */
  s = stats_of(fx.a);
  assert_int_equal(s.allocation[GRT_STAT_LARGE_POOL].current, 1);
  assert_int_equal(s.allocation[GRT_STAT_SMALL_POOL].current, 6);
  assert_int_equal(s.num_device_alloc, 1); /* one arena, never another device malloc */
  assert_int_equal(s.largest_free_block, 64 * MiB - (e + 512 - base) - 2 * MiB);

  /* bad pointers: the right class of error, nothing changes */
  grt_alloc_stats before = stats_of(fx.a);
  assert_int_equal(free_of(fx.a, a + 512), GRT_ERR_INTERIOR_POINTER);
  assert_non_null(strstr(grt_alloc_last_error(fx.a), "inside a block"));
  assert_int_equal(grt_alloc_record_stream(fx.a, big + MiB, 1), GRT_ERR_INTERIOR_POINTER);
  assert_int_equal(grt_alloc_block_info(fx.a, a + 8, &size, &req), GRT_ERR_INTERIOR_POINTER);
  assert_int_equal(free_of(fx.a, b + 3072), GRT_ERR_DOUBLE_FREE); /* the free 1 KiB rest of b's hole */
  assert_int_equal(grt_alloc_record_stream(fx.a, b + 3072, 0), GRT_ERR_DOUBLE_FREE);
  assert_int_equal(free_of(fx.a, base + 64 * MiB), GRT_ERR_UNKNOWN_POINTER); /* just past the arena */
  assert_int_equal(free_of(fx.a, base - 512), GRT_ERR_UNKNOWN_POINTER);
  assert_int_equal(grt_alloc_record_stream(fx.a, c, 5), GRT_OK); /* a heap: nothing to defer */
  grt_alloc_stats after = stats_of(fx.a);
  assert_memory_equal(&before, &after, sizeof before);
  grt_devptr huge;
  assert_int_equal(grt_alloc_malloc(fx.a, 63 * MiB, 0, &huge), GRT_ERR_OOM); /* fits the device, not a hole */
  assert_non_null(strstr(grt_alloc_last_error(fx.a), "out of memory (bestfit)"));
  assert_non_null(strstr(grt_alloc_last_error(fx.a), "the largest free range is 61.99 MiB"));
  assert_int_equal(grt_alloc_malloc(fx.a, 65 * MiB, 0, &huge), GRT_ERR_OOM); /* larger than the arena */
  after = stats_of(fx.a);
  assert_int_equal(after.num_ooms, 2);
  assert_int_equal(after.allocated_bytes[GRT_STAT_ALL].current, before.allocated_bytes[GRT_STAT_ALL].current);
  assert_consistent(fx.a);

  /* the snapshot: one large segment, live blocks and the gaps between them in address order */
  assert_int_equal(grt_alloc_snapshot_take(fx.a, &snap), GRT_OK);
  assert_int_equal(snap->n_segments, 1);
  const grt_snapshot_segment *g = &snap->segments[0];
  assert_int_equal(g->address, base);
  assert_int_equal(g->total_size, 64 * MiB);
  assert_true(g->is_large);
  assert_int_equal(g->allocated_size, (uint64_t)after.allocated_bytes[GRT_STAT_ALL].current);
  static const struct {
    uint64_t off, size;
    int active;
  } want[] = {{0, 1024, 1},    {1024, 3072, 1},    {4096, 1024, 0},    {5120, 512, 1},
              {5632, 1536, 1}, {7168, 512, 1},     {7680, 512, 1},     {8192, 2 * MiB, 1}};
  assert_int_equal(g->n_blocks, sizeof want / sizeof want[0] + 1);
  for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
    assert_int_equal(g->blocks[i].address, base + want[i].off);
    assert_int_equal(g->blocks[i].size, want[i].size);
    assert_int_equal(g->blocks[i].state, want[i].active ? GRT_BLOCK_ACTIVE_ALLOCATED : GRT_BLOCK_INACTIVE);
  }
  assert_int_equal(g->blocks[8].state, GRT_BLOCK_INACTIVE); /* the tail */
  assert_int_equal(g->blocks[8].address + g->blocks[8].size, base + 64 * MiB);
  grt_alloc_snapshot_free(snap);

  /* everything freed: one free range again; the arena stays through empty_cache */
  grt_devptr live[] = {a, b, c, d, d + 1536, e, big};
  for (size_t i = 0; i < sizeof live / sizeof live[0]; i++) assert_int_equal(free_of(fx.a, live[i]), GRT_OK);
  assert_int_equal(free_of(fx.a, a), GRT_ERR_DOUBLE_FREE);
  assert_int_equal(grt_alloc_empty_cache(fx.a), GRT_OK);
  s = stats_of(fx.a);
  assert_int_equal(s.allocated_bytes[GRT_STAT_ALL].current, 0);
  assert_int_equal(s.requested_bytes[GRT_STAT_ALL].current, 0);
  assert_int_equal(s.largest_free_block, 64 * MiB);
  assert_int_equal(dev_stats(fx.dev).bytes_in_use, 64 * MiB);
  assert_int_equal(must_malloc(fx.a, 64 * MiB, 0), base); /* the whole arena in one block */
  assert_consistent(fx.a);
  assert_int_equal(grt_alloc_destroy(fx.a), GRT_OK); /* with a live block: the arena goes back */
  assert_int_equal(dev_stats(fx.dev).bytes_in_use, 0);
  assert_int_equal(grt_device_destroy(fx.dev), GRT_OK);
}

/* Bestfit's arena: the largest device hole at the first malloc; a failed take leaves no arena behind. */
static void test_bestfit_arena(void **state) {
  (void)state;
  fixture fx = make_fixture("bestfit", 64 * MiB, NULL);
  grt_devptr x, hog;
  assert_int_equal(grt_device_inject_malloc_failure(fx.dev, 1), GRT_OK);
  /* the device's answer passes through, as with naive */
  assert_int_equal(grt_alloc_malloc(fx.a, 1000, 0, &x), GRT_ERR_FAULT_INJECTED);
  assert_non_null(strstr(grt_alloc_last_error(fx.a), "injected"));
  grt_alloc_stats s = stats_of(fx.a);
  assert_int_equal(s.num_ooms, 0);
  assert_int_equal(s.num_device_alloc, 0);
  assert_int_equal(s.reserved_bytes[GRT_STAT_ALL].current, 0);
  assert_int_equal(free_of(fx.a, 0x7f0000000000ull), GRT_ERR_UNKNOWN_POINTER); /* still no arena */
  assert_consistent(fx.a);
  /* a device with no memory left: no arena can be taken */
  assert_int_equal(grt_device_malloc(fx.dev, 64 * MiB, &hog), GRT_OK);
  assert_int_equal(grt_alloc_malloc(fx.a, 1000, 0, &x), GRT_ERR_OOM);
  assert_non_null(strstr(grt_alloc_last_error(fx.a), "the largest free range is 0 B"));
  assert_int_equal(stats_of(fx.a).num_ooms, 1);
  assert_int_equal(grt_device_free(fx.dev, hog), GRT_OK);
  /* another user holds the first MiB: the arena is the 63 MiB hole after it */
  assert_int_equal(grt_device_malloc(fx.dev, MiB, &hog), GRT_OK);
  x = must_malloc(fx.a, 1000, 0);
  assert_int_equal(x, hog + MiB);
  s = stats_of(fx.a);
  assert_int_equal(s.reserved_bytes[GRT_STAT_ALL].current, 63 * MiB);
  assert_int_equal(s.num_device_alloc, 1);
  assert_int_equal(free_of(fx.a, hog), GRT_ERR_UNKNOWN_POINTER); /* below the arena: not ours */
  assert_int_equal(grt_device_free(fx.dev, hog), GRT_OK);
  grt_devptr y;
  assert_int_equal(grt_alloc_malloc(fx.a, 63 * MiB, 0, &y), GRT_ERR_OOM); /* the arena never grows */
  assert_int_equal(free_of(fx.a, x), GRT_OK);
  assert_int_equal(must_malloc(fx.a, 63 * MiB, 0), x);
  drop_fixture(&fx);

  fx = make_fixture("bestfit", 64 * MiB, NULL); /* never used: destroy has no arena to return */
  drop_fixture(&fx);
  /* a first request larger than the device: the arena is taken, the request fails */
  fx = make_fixture("bestfit", 64 * MiB, NULL);
  assert_int_equal(grt_alloc_malloc(fx.a, 65 * MiB, 0, &x), GRT_ERR_OOM);
  assert_non_null(strstr(grt_alloc_last_error(fx.a), "tried to allocate 65.00 MiB; the largest free range is 64.00 MiB"));
  assert_int_equal(free_of(fx.a, 0x7f0000000000ull + MiB), GRT_ERR_DOUBLE_FREE); /* inside the empty arena */
  grt_alloc_snapshot *snap;
  assert_int_equal(grt_alloc_snapshot_take(fx.a, &snap), GRT_OK);
  assert_int_equal(snap->n_segments, 1);
  assert_int_equal(snap->segments[0].n_blocks, 1);
  assert_int_equal(snap->segments[0].blocks[0].state, GRT_BLOCK_INACTIVE);
  assert_int_equal(snap->segments[0].blocks[0].size, 64 * MiB);
  assert_int_equal(snap->segments[0].allocated_size, 0);
  grt_alloc_snapshot_free(snap);
  drop_fixture(&fx);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_bump_reset),
      cmocka_unit_test(test_buddy_coalescing),
      cmocka_unit_test(test_slab_zero_external_fragmentation),
      cmocka_unit_test(test_async_release_threshold),
      cmocka_unit_test(test_zoo_oom_and_snapshot),
      cmocka_unit_test(test_bestfit_exact_fit),
      cmocka_unit_test(test_bestfit_arena),
      cmocka_unit_test(test_randomized_invariants),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
