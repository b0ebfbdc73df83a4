/* test_report_summary.c — memory_summary()'s layout, the pacer's contract,
 * and the dayshift workload's story (reserved flat, allocated flat, largest
 * free block sinking, one OOM at the end). */
#include <stdlib.h>
#include <string.h>

#include "alloc_fixture.h"
#include "gpurt/report.h"
#include "scenarios/dayshift.h"

static void test_summary_layout(void **state) {
  (void)state;
  fixture fx = make_fixture("caching", GRT_GiB, NULL);
  grt_devptr p = must_malloc(fx.a, 3 * MiB, 0);
  grt_alloc_stats s = stats_of(fx.a);
  char *t;
  assert_int_equal(grt_memory_summary(&s, NULL, 0, 0, &t), GRT_OK);
  int lines = 0;
  for (char *line = t; *line; lines++) {
    char *nl = strchr(line, '\n');
    assert_non_null(nl);
    assert_int_equal(nl - line, 77); /* "|" + 75 columns + "|", as PyTorch prints */
    assert_true(line[0] == '|' && nl[-1] == '|');
    line = nl + 1;
  }
  assert_int_equal(lines, 6 + 9 * 4 + 2 * 2 + 2 + 1);
  assert_non_null(strstr(t, "|                  PyTorch CUDA memory summary, device ID 0                 |\n"));
  assert_non_null(strstr(t, "|            CUDA OOMs: 0            |        cudaMalloc retries: 0         |\n"));
  assert_non_null(strstr(t, "|        Metric         | Cur Usage  | Peak Usage | Tot Alloc  | Tot Freed  |\n"));
  assert_non_null(strstr(t, "| Allocated memory      |   3072 KiB |   3072 KiB |   3072 KiB |      0 B   |\n"));
  assert_non_null(strstr(t, "|       from small pool |      0 KiB |      0 KiB |      0 KiB |      0 B   |\n"));
  assert_non_null(strstr(t, "| GPU reserved memory   |  20480 KiB |  20480 KiB |  20480 KiB |      0 B   |\n"));
  assert_non_null(strstr(t, "| Allocations           |       1    |       1    |       1    |       0    |\n"));
  assert_non_null(strstr(t, "| Largest free block    |  17408 KiB |"));
  grt_report_free(t);
  /* Abbreviated: no pool rows; with free space: the fragmentation line. */
  grt_free_space f = {{17 * MiB, 0, 17 * MiB}, {17 * MiB, 0, 17 * MiB}, {0, 0, 0}};
  assert_int_equal(grt_memory_summary(&s, &f, 3, 1, &t), GRT_OK);
  assert_null(strstr(t, "from large pool"));
  assert_non_null(strstr(t, "device ID 3    "));
  assert_non_null(strstr(t, "| Largest free block    |  17408 KiB of  17408 KiB free | fragmentation 0.00|\n"));
  grt_report_free(t);
  assert_int_equal(grt_memory_summary(&s, NULL, -1, 0, &t), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt_alloc_free(fx.a, p), GRT_OK);
  drop_fixture(&fx);
}

/* Big numbers step units the way PyTorch's _format_size/_format_count do. */
static void test_summary_units(void **state) {
  (void)state;
  grt_alloc_stats s;
  memset(&s, 0, sizeof s);
  s.reserved_bytes[0].current = (int64_t)(3 * GRT_GiB);
  s.reserved_bytes[0].peak = 768 * 1024 - 1;
  s.reserved_bytes[2].current = 5 * MiB; /* scaled by the "all" row's unit */
  s.allocation[0].allocated = 2500000;
  char *t;
  assert_int_equal(grt_memory_summary(&s, NULL, 0, 0, &t), GRT_OK);
  assert_non_null(strstr(t, "| GPU reserved memory   |   3072 MiB | 786431 B   |"));
  assert_non_null(strstr(t, "|       from large pool |      5 MiB |      0 B   |"));
  assert_non_null(strstr(t, "| Allocations           |       0    |       0    |    2500 K  |"));
  grt_report_free(t);
}

typedef struct counter {
  int n, fail_at;
  volatile sig_atomic_t *stop;
} counter;

static grt_status count_step(void *ctx) {
  counter *c = ctx;
  if (c->n == c->fail_at) return GRT_ERR_IO;
  if (c->n == 50) return GRT_ERR_NOT_FOUND;
  if (++c->n == 30 && c->stop) *c->stop = 1;
  return GRT_OK;
}

static void test_pace(void **state) {
  (void)state;
  counter c = {0, -1, NULL};
  grt_step_source src = {&c, count_step};
  grt_pace_config pc;
  grt_pace_config_default(&pc);
  uint64_t events = 99;
  assert_int_equal(grt_pace_run(&src, &pc, &events), GRT_OK); /* runs until the source ends */
  assert_int_equal(events, 50);
  c.n = 0;
  pc.max_events = 20;
  pc.rate = 1e6;
  assert_int_equal(grt_pace_run(&src, &pc, &events), GRT_OK);
  assert_int_equal(events, 20);
  c.n = 0;
  c.fail_at = 10;
  pc.max_events = 0;
  assert_int_equal(grt_pace_run(&src, &pc, &events), GRT_ERR_IO);
  assert_int_equal(events, 10);
  volatile sig_atomic_t stop = 0;
  c = (counter){0, -1, &stop};
  pc.stop = &stop;
  assert_int_equal(grt_pace_run(&src, &pc, &events), GRT_OK);
  assert_int_equal(events, 30);
  pc.rate = -1;
  assert_int_equal(grt_pace_run(&src, &pc, &events), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt_pace_run(NULL, &pc, &events), GRT_ERR_INVALID_ARG);
}

static void test_dayshift_story(void **state) {
  (void)state;
  grt_dayshift_config cfg;
  grt_dayshift_config_default(&cfg);
  grt_dayshift *w;
  assert_int_equal(grt_dayshift_create(&cfg, &w), GRT_OK);
  grt_allocator *a = grt_dayshift_allocator(w);
  double lfb_early = 0, lfb_late = 0, alloc_early = 0, alloc_late = 0;
  uint64_t window = cfg.events / 10;
  grt_status st;
  while (!(st = grt_dayshift_step(w))) {
    uint64_t d = grt_dayshift_events_done(w);
    if (d < 2 || d == cfg.events) continue;
    grt_alloc_stats s = stats_of(a);
    assert_int_equal(s.reserved_bytes[GRT_STAT_ALL].current, 512 * MiB); /* flat all day */
    assert_int_equal(s.num_device_alloc, 1);
    if (d >= window && d < 2 * window) {
      lfb_early += (double)s.largest_free_block;
      alloc_early += (double)s.allocated_bytes[GRT_STAT_ALL].current;
    } else if (d >= 9 * window) {
      lfb_late += (double)s.largest_free_block;
      alloc_late += (double)s.allocated_bytes[GRT_STAT_ALL].current;
    }
  }
  assert_int_equal(st, GRT_ERR_NOT_FOUND);
  assert_int_equal(grt_dayshift_events_done(w), cfg.events);
  assert_true(alloc_late > 0.85 * alloc_early && alloc_late < 1.15 * alloc_early); /* allocated flat */
  assert_true(lfb_late < 0.75 * lfb_early);                                       /* the early warning sinks */
  grt_alloc_stats s = stats_of(a);
  assert_int_equal(s.num_ooms, 1); /* the day-3 request, with most of the cache free */
  assert_true(s.cached_bytes > 2 * s.largest_free_block);
  assert_consistent(a);
  assert_int_equal(grt_dayshift_destroy(w), GRT_OK);
  cfg.events = 10;
  assert_int_equal(grt_dayshift_create(&cfg, &w), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt_dayshift_destroy(NULL), GRT_OK);
}

/* The workload's limits, its accessors on NULL, a day driven by the pacer, a day that ends well. */
static void test_dayshift_edges(void **state) {
  (void)state;
  grt_dayshift_config_default(NULL); /* a no-op */
  grt_dayshift_config good;
  grt_dayshift_config_default(&good);
  assert_int_equal(good.seed, 1);
  assert_int_equal(good.events, 20000);
  grt_dayshift_config bad[7];
  for (int i = 0; i < 7; i++) bad[i] = good;
  bad[0].reserve = 32 * MiB;
  bad[1].reserve = 65 * GRT_GiB;
  bad[2].headroom = 65 * GRT_GiB;
  bad[3].load = 0.05;
  bad[4].load = 0.9;
  bad[5].load = 0.0 / 0.0; /* NaN */
  bad[6].events = 99;
  grt_dayshift *w = (grt_dayshift *)&good;
  for (int i = 0; i < 7; i++) {
    assert_int_equal(grt_dayshift_create(&bad[i], &w), GRT_ERR_INVALID_ARG);
    assert_null(w);
  }
  assert_int_equal(grt_dayshift_create(NULL, &w), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt_dayshift_create(&good, NULL), GRT_ERR_INVALID_ARG);
  assert_null(grt_dayshift_allocator(NULL));
  assert_null(grt_dayshift_device(NULL));
  assert_int_equal(grt_dayshift_events_done(NULL), 0);
  assert_int_equal(grt_dayshift_step(NULL), GRT_ERR_INVALID_ARG);

  /* paced: the source stops the run at its end; max_events stops it earlier */
  grt_dayshift_config cfg = good;
  cfg.events = 400;
  cfg.reserve = 64 * MiB;
  assert_int_equal(grt_dayshift_create(&cfg, &w), GRT_OK);
  grt_device_stats ds;
  assert_int_equal(grt_device_get_stats(grt_dayshift_device(w), &ds), GRT_OK);
  assert_int_equal(ds.capacity, 64 * MiB + cfg.headroom);
  grt_step_source src = grt_dayshift_source(w);
  grt_pace_config pc;
  grt_pace_config_default(&pc);
  pc.max_events = 150;
  uint64_t events = 0;
  assert_int_equal(grt_pace_run(&src, &pc, &events), GRT_OK);
  assert_int_equal(events, 150);
  assert_int_equal(grt_dayshift_events_done(w), 150);
  pc.max_events = 0;
  assert_int_equal(grt_pace_run(&src, &pc, &events), GRT_OK);
  assert_int_equal(grt_dayshift_events_done(w), 400);
  assert_int_equal(grt_dayshift_step(w), GRT_ERR_NOT_FOUND); /* over: nothing changes */
  assert_int_equal(grt_dayshift_events_done(w), 400);
  assert_consistent(grt_dayshift_allocator(w));
  assert_int_equal(grt_dayshift_destroy(w), GRT_OK);

  /* headroom larger than half the cache: the last request would fit, so it is not made */
  cfg.headroom = GRT_GiB;
  assert_int_equal(grt_dayshift_create(&cfg, &w), GRT_OK);
  grt_status st;
  while (!(st = grt_dayshift_step(w))) {
  }
  assert_int_equal(st, GRT_ERR_NOT_FOUND);
  grt_alloc_stats s = stats_of(grt_dayshift_allocator(w));
  assert_int_equal(s.num_ooms, 0);
  assert_true(s.reserved_bytes[GRT_STAT_ALL].current >= (int64_t)(64 * MiB));
  assert_consistent(grt_dayshift_allocator(w));
  assert_int_equal(grt_dayshift_destroy(w), GRT_OK);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_summary_layout),
      cmocka_unit_test(test_summary_units),
      cmocka_unit_test(test_pace),
      cmocka_unit_test(test_dayshift_story),
      cmocka_unit_test(test_dayshift_edges),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
