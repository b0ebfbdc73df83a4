/* test_trace_shared.c — the readers on the real traces in ../shared/traces (skips when absent):
 * exact event and segment counts, write->read round trips, truncated and corrupted pickles. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "base/rng.h"
#include "trace_test_util.h"

typedef struct expect {
  const char *file;
  size_t segments, alloc, free_req, free_done, seg_alloc, seg_free, n_devices;
  bool expandable;
} expect;

static const expect pytorch[] = {
    {"MAGMA27_memory_snapshot.pickle", 216, 1721, 1721, 1721, 0, 0, 1, false},
    {"bcrafton_memory_snapshot.pickle", 96, 2162, 2162, 2162, 0, 0, 1, false},
    {"MercuryB1_empty_cache_loop.pickle", 4, 2912, 2912, 2912, 420, 420, 4, false},
    {"HugePandaCoder_inference2.pickle", 6, 782, 777, 777, 22, 17, 1, false},
    {"bolongcheng_expandable_cl128.pickle", 2, 1704, 1704, 1704, 0, 0, 1, true},
};

static char *shared_path(const char *dir, const char *file) {
  static char rel[256];
  snprintf(rel, sizeof rel, "traces/%s/%s", dir, file);
  const char *p = tt_shared(rel);
  assert_non_null(p);
  return strdup(p);
}

static void test_pytorch_counts(void **state) {
  (void)state;
  for (size_t i = 0; i < sizeof pytorch / sizeof pytorch[0]; i++) {
    const expect *x = &pytorch[i];
    char *path = shared_path("pytorch", x->file);
    grt_trace_error err;
    grt_status st;
    grt_trace *t = tt_load(path, GRT_TRACE_FORMAT_AUTO, &err, &st);
    if (st) fail_msg("%s: %s", x->file, err.reason);
    grt_trace_info in;
    assert_int_equal(grt_trace_get_info(t, &in), GRT_OK);
    assert_int_equal(in.format, GRT_TRACE_FORMAT_PYTORCH);
    assert_int_equal(in.n_segments, x->segments);
    assert_int_equal(in.count[GRT_TRACE_ALLOC], x->alloc);
    assert_int_equal(in.count[GRT_TRACE_FREE_REQUESTED], x->free_req);
    assert_int_equal(in.count[GRT_TRACE_FREE_COMPLETED], x->free_done);
    assert_int_equal(in.count[GRT_TRACE_SEGMENT_ALLOC], x->seg_alloc);
    assert_int_equal(in.count[GRT_TRACE_SEGMENT_FREE], x->seg_free);
    assert_int_equal(in.n_devices, x->n_devices);
    assert_true(in.settings.present);
    assert_int_equal(in.settings.expandable_segments, x->expandable);
    assert_int_equal(in.settings.max_split_size, -1);
    /* every free refers to an id whose alloc precedes it, or is flagged unmatched */
    unsigned char *seen = calloc(in.n_ids, 1);
    for (size_t k = 0; k < in.n_events; k++) {
      const grt_trace_event *e = &in.events[k];
      assert_true(e->flags & GRT_TRACE_F_ADDR);
      if (e->kind == GRT_TRACE_ALLOC) {
        assert_true(e->id < in.n_ids);
        assert_false(seen[e->id]);
        seen[e->id] = 1;
      } else if (e->kind == GRT_TRACE_FREE_REQUESTED || e->kind == GRT_TRACE_FREE_COMPLETED) {
        assert_true(e->id < in.n_ids);
        assert_int_equal(seen[e->id] == 0, (e->flags & GRT_TRACE_F_UNMATCHED) != 0);
      }
    }
    free(seen);
    /* blocks tile each segment */
    for (size_t s = 0; s < in.n_segments; s++) {
      const grt_trace_segment *g = &in.segments[s];
      uint64_t a = g->addr;
      assert_int_equal(g->is_expandable, x->expandable);
      for (size_t b = 0; b < g->n_blocks; b++) {
        assert_int_equal(g->blocks[b].addr, a);
        a += g->blocks[b].size;
      }
      assert_int_equal(a, g->addr + g->total_size);
    }
    assert_int_equal(grt_trace_destroy(t), GRT_OK);
    free(path);
  }
}

static void test_pytorch_device_option(void **state) {
  (void)state;
  char *path = shared_path("pytorch", "MercuryB1_empty_cache_loop.pickle");
  grt_trace_load_config cfg;
  grt_trace_load_config_default(&cfg);
  cfg.device = 3;
  grt_trace *t;
  grt_trace_error err;
  assert_int_equal(grt_trace_load(path, &cfg, &t, &err), GRT_OK);
  grt_trace_info in;
  assert_int_equal(grt_trace_get_info(t, &in), GRT_OK);
  assert_int_equal(in.device, 3);
  assert_int_equal(in.n_events, 0);
  assert_int_equal(in.n_segments, 0);
  assert_int_equal(grt_trace_destroy(t), GRT_OK);
  cfg.device = 4;
  assert_int_equal(grt_trace_load(path, &cfg, &t, &err), GRT_ERR_INVALID_ARG);
  assert_null(t);
  free(path);
}

static void test_minimalloc_counts(void **state) {
  (void)state;
  const char *files[] = {"A", "B", "C", "D", "E", "F"};
  const size_t buffers[] = {154, 170, 203, 213, 215, 296};
  for (int i = 0; i < 6; i++) {
    char name[32];
    snprintf(name, sizeof name, "%s.1048576.csv", files[i]);
    char *path = shared_path("minimalloc", name);
    grt_trace_error err;
    grt_status st;
    grt_trace *t = tt_load(path, GRT_TRACE_FORMAT_AUTO, &err, &st);
    if (st) fail_msg("%s: %s", name, err.reason);
    grt_trace_info in;
    assert_int_equal(grt_trace_get_info(t, &in), GRT_OK);
    assert_int_equal(in.count[GRT_TRACE_ALLOC], buffers[i]);
    assert_int_equal(in.count[GRT_TRACE_FREE_COMPLETED], buffers[i]);
    /* time order, frees before allocations at equal steps */
    for (size_t k = 1; k < in.n_events; k++) {
      const grt_trace_event *a = &in.events[k - 1], *b = &in.events[k];
      assert_true(a->time <= b->time);
      if (a->time == b->time) assert_false(a->kind == GRT_TRACE_ALLOC && b->kind == GRT_TRACE_FREE_COMPLETED);
    }
    assert_int_equal(grt_trace_destroy(t), GRT_OK);
    free(path);
  }
}

static void test_pytorch_round_trip(void **state) {
  (void)state;
  for (size_t i = 0; i < sizeof pytorch / sizeof pytorch[0]; i++) {
    char *path = shared_path("pytorch", pytorch[i].file);
    grt_trace_error err;
    grt_status st;
    grt_trace *t = tt_load(path, GRT_TRACE_FORMAT_AUTO, &err, &st);
    assert_int_equal(st, GRT_OK);
    char tmp[] = "/tmp/grt_trace_ptXXXXXX";
    int fd = mkstemp(tmp);
    assert_true(fd >= 0);
    close(fd);
    assert_int_equal(grt_trace_save_native(t, tmp, &err), GRT_OK);
    grt_trace *u = tt_load(tmp, GRT_TRACE_FORMAT_AUTO, &err, &st);
    if (st) fail_msg("%s: %s", tmp, err.reason);
    grt_trace_info a, b;
    assert_int_equal(grt_trace_get_info(t, &a), GRT_OK);
    assert_int_equal(grt_trace_get_info(u, &b), GRT_OK);
    assert_int_equal(b.format, GRT_TRACE_FORMAT_NATIVE);
    assert_int_equal(a.n_events, b.n_events);
    assert_memory_equal(a.events, b.events, a.n_events * sizeof *a.events);
    assert_memory_equal(&a.settings, &b.settings, sizeof a.settings);
    assert_int_equal(a.n_segments, b.n_segments);
    for (size_t s = 0; s < a.n_segments; s++) {
      assert_int_equal(a.segments[s].n_blocks, b.segments[s].n_blocks);
      assert_memory_equal(a.segments[s].blocks, b.segments[s].blocks, a.segments[s].n_blocks * sizeof(grt_trace_block));
    }
    assert_int_equal(grt_trace_destroy(u), GRT_OK);
    assert_int_equal(grt_trace_destroy(t), GRT_OK);
    unlink(tmp);
    free(path);
  }
}

/* Every prefix length class and random byte corruptions: a status, never a crash or a leak. */
static void test_pytorch_corrupted(void **state) {
  (void)state;
  char *path = shared_path("pytorch", "HugePandaCoder_inference2.pickle");
  FILE *f = fopen(path, "rb");
  assert_non_null(f);
  unsigned char *buf = malloc(1 << 20);
  size_t n = fread(buf, 1, 1 << 20, f);
  fclose(f);
  unsigned char *copy = malloc(n);
  grt__rng r;
  grt__rng_seed(&r, 5);
  for (int i = 0; i < 300; i++) {
    size_t len = (size_t)grt__rng_below(&r, n);
    grt_trace *t;
    grt_trace_error err;
    grt_status st = grt_trace_load_buffer(buf, len, "cut.pickle", NULL, &t, &err);
    assert_true(st == GRT_ERR_PARSE);
    assert_true(err.has_offset || err.reason[0]);
  }
  for (int i = 0; i < 200; i++) {
    memcpy(copy, buf, n);
    for (int k = 0; k < 4; k++) copy[grt__rng_below(&r, n)] = (unsigned char)grt__rng_below(&r, 256);
    grt_trace *t;
    grt_trace_error err;
    grt_status st = grt_trace_load_buffer(copy, n, "flip.pickle", NULL, &t, &err);
    assert_true(st == GRT_OK || st == GRT_ERR_PARSE || st == GRT_ERR_INVALID_ARG);
    assert_int_equal(grt_trace_destroy(t), GRT_OK);
  }
  free(copy);
  free(buf);
  free(path);
}

int main(void) {
  if (!tt_shared("traces/pytorch/MAGMA27_memory_snapshot.pickle") ||
      !tt_shared("traces/minimalloc/A.1048576.csv")) {
    fprintf(stderr, "test_trace_shared: skipped: $GRT_SHARED_DIR/traces not found (set GRT_SHARED_DIR to ../shared)\n");
    return 77;
  }
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_pytorch_counts),      cmocka_unit_test(test_pytorch_device_option),
      cmocka_unit_test(test_minimalloc_counts),   cmocka_unit_test(test_pytorch_round_trip),
      cmocka_unit_test(test_pytorch_corrupted),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
