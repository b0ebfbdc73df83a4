/* test_caching_differential.c — the caching allocator against a deliberately
 * simple reference of PyTorch's policy (ref_caching.h), side by side.
 *
 * Each run drives both over the same seeded random operations — sizes across
 * both pools, up to 5 streams, record_stream with deferred frees whose events
 * complete in a seeded random order, empty_cache, peak resets, bad frees
 * (interior, double, foreign), absurd sizes and OOM pressure — each on its own
 * simulated device of the same capacity. After every operation the statuses,
 * returned addresses and the whole statistics struct must be identical; every
 * 1024 operations (and at the end) so must the device statistics and the
 * memory snapshot, and the structure walker must pass.
 *
 * Operation count: GRT_DIFF_OPS (default 1,000,000) split over the variants
 * (default config, max_split_size + roundup_power2_divisions, divisions only,
 * a small max_split_size); GRT_DIFF_SEED changes the seeds. The full run:
 *   GRT_DIFF_OPS=10000000 build/test/tests/test_caching_differential
 */
#include <stdlib.h>
#include <string.h>

#include "alloc_fixture.h"
#include "base/rng.h"
#include "ref_caching.h"

#define SLOTS 256
#define STREAMS 5

/* ---- the completion oracle: one per allocator, told the same completions ---- */

typedef struct oracle {
  unsigned char *done; /* event id -> completed */
  size_t cap;
  uint64_t next;
  uint64_t *open; /* recorded, maybe not completed yet */
  size_t n_open, cap_open;
} oracle;

static grt_status oracle_record(void *ctx, grt_stream_id s, uint64_t *ev) {
  (void)s;
  oracle *o = ctx;
  if (o->next == o->cap) {
    o->cap = o->cap ? 2 * o->cap : 1024;
    o->done = realloc(o->done, o->cap);
    assert_non_null(o->done);
  }
  if (o->n_open == o->cap_open) {
    o->cap_open = o->cap_open ? 2 * o->cap_open : 1024;
    o->open = realloc(o->open, o->cap_open * sizeof *o->open);
    assert_non_null(o->open);
  }
  o->done[o->next] = 0;
  o->open[o->n_open++] = o->next;
  *ev = o->next++;
  return GRT_OK;
}
static int oracle_query(void *ctx, uint64_t ev) { return ((oracle *)ctx)->done[ev]; }
static void oracle_sync(void *ctx, uint64_t ev) { ((oracle *)ctx)->done[ev] = 1; }
static void oracle_destroy(void *ctx, uint64_t ev) {
  (void)ctx;
  (void)ev;
}

/* Completes the k-th open event (the same k on both sides). */
static void oracle_complete(oracle *o, size_t k) {
  if (k >= o->n_open) return;
  o->done[o->open[k]] = 1;
  o->open[k] = o->open[--o->n_open];
}

static void oracle_free(oracle *o) {
  free(o->done);
  free(o->open);
}

/* ---- comparing ---- */

_Static_assert(sizeof(grt_alloc_stats) % 8 == 0, "grt_alloc_stats is made of 8-byte fields");

static void compare_stats(const grt_alloc_stats *got, const grt_alloc_stats *want, uint64_t step, const char *what) {
  if (!memcmp(got, want, sizeof *got)) return;
  const uint64_t *g = (const uint64_t *)got, *w = (const uint64_t *)want;
  for (size_t i = 0; i < sizeof *got / 8; i++)
    if (g[i] != w[i])
      fprintf(stderr, "step %llu (%s): stats word %zu: gpurt %lld, reference %lld\n", (unsigned long long)step, what, i,
              (long long)g[i], (long long)w[i]);
  fail_msg("statistics differ at step %llu after %s", (unsigned long long)step, what);
}

static int cmp_seg_base(const void *x, const void *y) {
  const ref_segment *a = *(const ref_segment *const *)x, *b = *(const ref_segment *const *)y;
  return a->base < b->base ? -1 : a->base > b->base;
}

static void compare_snapshot(grt_allocator *a, const ref_caching *r, uint64_t step) {
  grt_alloc_snapshot *snap;
  assert_int_equal(grt_alloc_snapshot_take(a, &snap), GRT_OK);
  assert_int_equal(snap->n_segments, r->n_segs);
  const ref_segment **order = malloc((r->n_segs + 1) * sizeof *order);
  assert_non_null(order);
  for (size_t i = 0; i < r->n_segs; i++) order[i] = &r->segs[i];
  qsort(order, r->n_segs, sizeof *order, cmp_seg_base);
  for (size_t i = 0; i < r->n_segs; i++) {
    const grt_snapshot_segment *g = &snap->segments[i];
    const ref_segment *w = order[i];
    if (g->address != w->base || g->total_size != w->size || g->stream != w->stream || g->is_large != w->is_large ||
        g->n_blocks != w->n_blocks)
      fail_msg("step %llu: snapshot segment %zu differs (0x%llx vs 0x%llx)", (unsigned long long)step, i,
               (unsigned long long)g->address, (unsigned long long)w->base);
    for (size_t j = 0; j < w->n_blocks; j++) {
      const ref_block *b = &w->blocks[j];
      grt_block_state st = b->allocated ? GRT_BLOCK_ACTIVE_ALLOCATED
                           : b->event_count ? GRT_BLOCK_ACTIVE_PENDING_FREE
                                            : GRT_BLOCK_INACTIVE;
      const grt_snapshot_block *gb = &g->blocks[j];
      if (gb->address != b->ptr || gb->size != b->size || gb->requested_size != b->requested || gb->state != st)
        fail_msg("step %llu: block 0x%llx differs", (unsigned long long)step, (unsigned long long)b->ptr);
    }
  }
  free(order);
  grt_alloc_snapshot_free(snap);
}

static void compare_devices(grt_device *x, grt_device *y, uint64_t step) {
  grt_device_stats a = dev_stats(x), b = dev_stats(y);
  if (memcmp(&a, &b, sizeof a)) fail_msg("step %llu: device statistics differ", (unsigned long long)step);
}

/* ---- the run ---- */

typedef struct slot {
  grt_devptr ptr;
  uint64_t requested;
} slot;

static int is_live(const slot *slots, grt_devptr p) {
  for (int i = 0; i < SLOTS; i++)
    if (slots[i].ptr == p) return 1;
  return 0;
}

typedef struct variant {
  const char *conf;
  uint64_t capacity;
  unsigned share; /* of GRT_DIFF_OPS, in percent */
} variant;

static uint64_t diff_size(grt__rng *g, uint64_t capacity) {
  uint64_t dice = grt__rng_below(g, 1000);
  if (dice == 0) return 0;                               /* GRT_ERR_SIZE */
  if (dice == 1) return ((uint64_t)1 << 56) + 1;         /* GRT_ERR_SIZE */
  if (dice == 2) return capacity + grt__rng_below(g, capacity); /* never fits: OOM path */
  switch (dice % 5) {
    case 0: return 1 + grt__rng_below(g, 4096);
    case 1: return grt__rng_log_uniform(g, 4096, GRT_SMALL_SIZE);
    case 2: return grt__rng_log_uniform(g, GRT_SMALL_SIZE + 1, 10 * MiB);
    case 3: return grt__rng_log_uniform(g, 10 * MiB, 24 * MiB);
    default: return grt__rng_log_uniform(g, 20 * MiB, 160 * MiB);
  }
}

#define SAME(x, y, what)                                                                                        \
  do {                                                                                                          \
    if ((x) != (y))                                                                                             \
      fail_msg("step %llu (%s): gpurt 0x%llx, reference 0x%llx", (unsigned long long)step, what,               \
               (unsigned long long)(x), (unsigned long long)(y));                                               \
  } while (0)

static void run(const variant *v, uint64_t seed, uint64_t ops) {
  oracle og = {0}, orf = {0};
  grt_stream_ops sg = {&og, oracle_record, oracle_query, oracle_sync, oracle_destroy};
  grt_stream_ops sr = {&orf, oracle_record, oracle_query, oracle_sync, oracle_destroy};
  grt_alloc_config cfg;
  grt_alloc_config_default(&cfg);
  char err[128];
  assert_int_equal(grt_alloc_config_parse(&cfg, v->conf, err, sizeof err), GRT_OK);
  cfg.stream_ops = &sg;
  fixture fx = make_fixture("caching", v->capacity, &cfg);
  grt_device_config dc;
  grt_device_config_default(&dc);
  dc.capacity = v->capacity;
  grt_device *rdev;
  assert_int_equal(grt_device_create(&dc, &rdev), GRT_OK);
  cfg.stream_ops = &sr;
  ref_caching r;
  ref_init(&r, rdev, &cfg);

  slot slots[SLOTS];
  memset(slots, 0, sizeof slots);
  grt__rng g;
  grt__rng_seed(&g, seed);
  grt_devptr last_freed = 0;
  uint64_t ooms = 0, deferred = 0;
  for (uint64_t step = 0; step < ops; step++) {
    int i = (int)grt__rng_below(&g, SLOTS);
    uint64_t dice = grt__rng_below(&g, 1000);
    const char *what;
    grt_status a, b;
    if (dice < 3) {
      what = "empty_cache";
      a = grt_alloc_empty_cache(fx.a);
      b = ref_empty_cache(&r);
    } else if (dice < 4) {
      what = "reset_peak_stats";
      a = grt_alloc_reset_peak_stats(fx.a);
      ref_reset_peaks(&r);
      b = GRT_OK;
    } else if (dice < 120) { /* some events complete, in random order */
      what = "complete events";
      for (int k = (int)grt__rng_below(&g, 4); k >= 0; k--) {
        size_t which = (size_t)grt__rng_below(&g, og.n_open + 1);
        oracle_complete(&og, which);
        oracle_complete(&orf, which);
      }
      a = b = GRT_OK;
    } else if (dice < 140) { /* bad frees: interior, double, foreign */
      grt_devptr bad = 0x1000 + 512 * grt__rng_below(&g, 64); /* below the device: foreign */
      if (dice < 127 && slots[i].ptr && slots[i].requested > 512) /* strictly inside the block */
        bad = slots[i].ptr + 512 * (1 + grt__rng_below(&g, (slots[i].requested - 1) / 512));
      else if (dice < 134 && last_freed && !is_live(slots, last_freed))
        bad = last_freed;
      what = "bad free";
      if (dice & 1) {
        a = grt_alloc_free(fx.a, bad);
        b = ref_free(&r, bad);
      } else {
        what = "bad record_stream";
        grt_stream_id s = grt__rng_below(&g, STREAMS);
        a = grt_alloc_record_stream(fx.a, bad, s);
        b = ref_record_stream(&r, bad, s);
      }
    } else if (slots[i].ptr && dice < 260) {
      what = "record_stream";
      grt_stream_id s = grt__rng_below(&g, STREAMS);
      a = grt_alloc_record_stream(fx.a, slots[i].ptr, s);
      b = ref_record_stream(&r, slots[i].ptr, s);
    } else if (slots[i].ptr && dice < 300) {
      what = "block_info";
      uint64_t s1 = 0, q1 = 0, s2 = 0, q2 = 0;
      a = grt_alloc_block_info(fx.a, slots[i].ptr, &s1, &q1);
      b = ref_block_info(&r, slots[i].ptr, &s2, &q2);
      SAME(s1, s2, what);
      SAME(q1, q2, what);
    } else if (slots[i].ptr) {
      what = "free";
      a = grt_alloc_free(fx.a, slots[i].ptr);
      b = ref_free(&r, slots[i].ptr);
      last_freed = slots[i].ptr;
      slots[i].ptr = 0;
      deferred += r.n_events > 0;
    } else {
      what = "malloc";
      uint64_t size = diff_size(&g, v->capacity);
      grt_stream_id s = grt__rng_below(&g, STREAMS);
      grt_devptr p1 = 0, p2 = 0;
      a = grt_alloc_malloc(fx.a, size, s, &p1);
      b = ref_malloc(&r, size, s, &p2);
      if (a == GRT_OK && b == GRT_OK) {
        SAME(p1, p2, what);
        slots[i] = (slot){p1, size};
      }
      ooms += a == GRT_ERR_OOM;
    }
    if (a != b)
      fail_msg("step %llu (%s): gpurt %s, reference %s", (unsigned long long)step, what, grt_status_name(a),
               grt_status_name(b));
    grt_alloc_stats got = stats_of(fx.a), want = ref_stats(&r);
    compare_stats(&got, &want, step, what);
    if (step % 1024 == 0 || step + 1 == ops) {
      compare_devices(fx.dev, rdev, step);
      compare_snapshot(fx.a, &r, step);
      assert_consistent(fx.a);
    }
  }
  grt_alloc_stats s = stats_of(fx.a);
  printf("  %-60s seed %llu: %llu ops, %llu OOMs, %llu device mallocs, %llu retries, %llu deferred frees\n",
         v->conf[0] ? v->conf : "(defaults)", (unsigned long long)seed, (unsigned long long)ops,
         (unsigned long long)ooms, (unsigned long long)s.num_device_alloc, (unsigned long long)s.num_alloc_retries,
         (unsigned long long)deferred);
  if (ops >= 100000) {
    assert_true(ooms > 0); /* the capacity presses */
    assert_true(s.num_alloc_retries > 0);
  }
  drop_fixture(&fx);
  ref_destroy(&r);
  assert_int_equal(grt_device_destroy(rdev), GRT_OK);
  oracle_free(&og);
  oracle_free(&orf);
}

static uint64_t env_u64(const char *name, uint64_t fallback) {
  const char *e = getenv(name);
  return e && *e ? strtoull(e, NULL, 10) : fallback;
}

static const variant variants[] = {
    {"", 2 * GRT_GiB, 40},
    {"max_split_size_mb:64,roundup_power2_divisions:[1:2,16:4,>:8]", 2 * GRT_GiB, 25},
    {"roundup_power2_divisions:4", GRT_GiB + 512 * MiB, 20},
    {"max_split_size_mb:21", GRT_GiB, 15},
};

static void run_variant(int k) {
  uint64_t total = env_u64("GRT_DIFF_OPS", 1000000);
  uint64_t seed = env_u64("GRT_DIFF_SEED", 1) * 100 + (uint64_t)k;
  run(&variants[k], seed, total * variants[k].share / 100);
}

static void test_diff_default(void **state) {
  (void)state;
  run_variant(0);
}
static void test_diff_max_split_power2(void **state) {
  (void)state;
  run_variant(1);
}
static void test_diff_power2(void **state) {
  (void)state;
  run_variant(2);
}
static void test_diff_small_max_split(void **state) {
  (void)state;
  run_variant(3);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_diff_default),
      cmocka_unit_test(test_diff_max_split_power2),
      cmocka_unit_test(test_diff_power2),
      cmocka_unit_test(test_diff_small_max_split),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
