/* test_replay_stacks.c — the recorded stacks of what a replay holds
 * (grt_replay_stack_at) and the snapshot written with them
 * (grt_snapshot_json_frames): a live block's alloc stack, none for a freed
 * one, a segment's device allocation stack until an allocation splits it,
 * and the writer's failure paths. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "gpurt/report.h"
#include "replay_test_util.h"

static const char *const trace_text =
    "gpurt-trace 1\n"
    "%frame 1 10 \"step\" \"train.py\"\n"
    "%frame 2 20 \"layer\" \"model.py\"\n"
    "%frame 3 30 \"head\" \"model.py\"\n"
    "%stack 1 1\n"
    "%stack 2 2 1\n"
    "%stack 3 3 1\n"
    "segment_alloc - 2097152 0 - 0x10000000 @1\n"
    "alloc 0 1000 0 - 0x10000000 @2\n"
    "alloc 1 1000 0 - 0x10000400 @3\n"
    "free 0 1000 0 - 0x10000000\n"
    "segment_alloc - 20971520 0 - 0x20000000 @2\n"
    "alloc 2 20971520 0 - 0x20000000 @3\n";

static grt_replay *run(grt_trace *t) {
  grt_replay_config c;
  grt_replay_config_default(&c);
  c.placement = GRT_REPLAY_PLACE_RECORDED;
  grt_replay *r;
  assert_int_equal(grt_replay_open(t, &c, &r), GRT_OK);
  assert_int_equal(grt_replay_run(r), GRT_OK);
  return r;
}

static uint32_t stack_at(grt_replay *r, grt_devptr a, bool segment) {
  uint32_t s = 99;
  assert_int_equal(grt_replay_stack_at(r, a, segment, &s), GRT_OK);
  return s;
}

static void test_stack_at(void **state) {
  (void)state;
  grt_trace *t = load(trace_text);
  grt_replay *r = run(t);
  assert_int_equal(stack_at(r, 0x10000400, false), 3); /* live: its alloc's */
  assert_int_equal(stack_at(r, 0x10000000, false), 0); /* freed */
  assert_int_equal(stack_at(r, 0x10000000, true), 0);  /* split by its 1000-byte blocks */
  assert_int_equal(stack_at(r, 0x20000000, true), 2);  /* taken whole: its segment_alloc's */
  assert_int_equal(stack_at(r, 0x20000000, false), 3);
  assert_int_equal(stack_at(r, 0x30000000, false), 0); /* nothing there */
  uint32_t s;
  assert_int_equal(grt_replay_stack_at(NULL, 0, false, &s), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt_replay_stack_at(r, 0, false, NULL), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt_replay_destroy(r), GRT_OK);
  assert_int_equal(grt_trace_destroy(t), GRT_OK);
}

typedef struct frames_ctx {
  grt_replay *r;
  const grt_trace *t;
  int fail_after; /* calls before a failure; -1 never */
} frames_ctx;

static grt_status frames_at(void *ctx, grt_devptr a, bool segment, const grt_trace_frame **f, size_t *n) {
  frames_ctx *x = ctx;
  *n = 0;
  if (x->fail_after >= 0 && x->fail_after-- == 0) return GRT_ERR_NOMEM;
  uint32_t s;
  grt_status st = grt_replay_stack_at(x->r, a, segment, &s);
  return st || !s ? st : grt_trace_stack(x->t, s, f, n);
}

static void test_snapshot_frames(void **state) {
  (void)state;
  grt_trace *t = load(trace_text);
  grt_replay *r = run(t);
  grt_alloc_snapshot *snap;
  assert_int_equal(grt_alloc_snapshot_take(grt_replay_allocator(r), &snap), GRT_OK);
  frames_ctx x = {r, t, -1};
  grt_snapshot_frames fr = {frames_at, &x};
  char *text = NULL;
  assert_int_equal(grt_snapshot_json_frames(snap, 0, &fr, &text), GRT_OK);
  assert_non_null(strstr(text, "\"frames\": [{\"filename\": \"model.py\", \"line\": 30, \"name\": \"head\"}, "
                               "{\"filename\": \"train.py\", \"line\": 10, \"name\": \"step\"}]"));
  assert_non_null(strstr(text, "\"is_expandable\": false, \"frames\": [{\"filename\": \"model.py\", \"line\": 20"));
  grt_report_free(text);
  /* without a source: PyTorch's shape, empty lists */
  assert_int_equal(grt_snapshot_json(snap, 0, &text), GRT_OK);
  assert_null(strstr(text, "\"name\""));
  grt_report_free(text);
  /* a source that fails: its status, and nothing written */
  for (int k = 0; k < 4; k++) {
    x.fail_after = k;
    text = (char *)1;
    assert_int_equal(grt_snapshot_json_frames(snap, 0, &fr, &text), GRT_ERR_NOMEM);
    assert_null(text);
  }
  grt_snapshot_frames bad = {NULL, NULL};
  assert_int_equal(grt_snapshot_json_frames(snap, 0, &bad, &text), GRT_ERR_INVALID_ARG);
  grt_alloc_snapshot_free(snap);
  assert_int_equal(grt_replay_destroy(r), GRT_OK);
  assert_int_equal(grt_trace_destroy(t), GRT_OK);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_stack_at),
      cmocka_unit_test(test_snapshot_frames),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
