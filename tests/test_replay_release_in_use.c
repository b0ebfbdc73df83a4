/* test_replay_release_in_use.c — a recorded segment_free the model cannot
 * perform: in a PyTorch snapshot, PyTorch frees a segment that, in the
 * model's replay, still holds a live block (the model placed a later
 * allocation in that segment's cached block where PyTorch made a new
 * segment). The replay is not an error and frees nothing it holds: the
 * release runs the model's own empty_cache, which cannot give back a
 * segment in use; it is counted as a release (grt_replay_summary.releases)
 * that made no device free, and fidelity scores it as a release that
 * disagrees, its note naming the event and the recorded range against
 * "nothing" (docs/REPLAY.md: releasing nothing disagrees). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "gpurt/replay.h"
#include "pickle_builder.h"

#define MiB ((uint64_t)1 << 20)
#define SEG_A 0x10000000u
#define SEG_B 0x20000000u

static void event(pk *p, const char *action, uint64_t addr, uint64_t size) {
  dict_open(p);
  kv_str(p, "action", action), kv_num(p, "addr", addr), kv_num(p, "size", size), kv_num(p, "stream", 0);
  dict_close(p);
}

/* Events 0-5: segment A, a block in it and its free; segment B and PyTorch's
 * block in it (the model takes A's cached block instead); A's segment_free.
 * At the end B holds the live block. */
static void snapshot(pk *p) {
  begin(p);
  str(p, "segments"), list_open(p);
  dict_open(p);
  kv_num(p, "device", 0), kv_num(p, "address", SEG_B), kv_num(p, "total_size", 2 * MiB), kv_num(p, "stream", 0);
  kv_str(p, "segment_type", "small");
  str(p, "blocks"), list_open(p);
  dict_open(p), kv_num(p, "size", 512), kv_num(p, "requested_size", 100), kv_str(p, "state", "active_allocated");
  dict_close(p);
  dict_open(p), kv_num(p, "size", 2 * MiB - 512), kv_num(p, "requested_size", 0), kv_str(p, "state", "inactive");
  dict_close(p);
  list_close(p);
  dict_close(p);
  list_close(p);
  str(p, "device_traces"), list_open(p), list_open(p);
  event(p, "segment_alloc", SEG_A, 2 * MiB);
  event(p, "alloc", SEG_A, 100);
  event(p, "free_completed", SEG_A, 100);
  event(p, "segment_alloc", SEG_B, 2 * MiB);
  event(p, "alloc", SEG_B, 100);
  event(p, "segment_free", SEG_A, 2 * MiB);
  list_close(p), list_close(p);
  end(p);
}

static grt_trace *load_snapshot(void) {
  pk *p = malloc(sizeof *p);
  assert_non_null(p);
  snapshot(p);
  grt_trace_load_config cfg;
  grt_trace_load_config_default(&cfg);
  grt_trace *t = NULL;
  grt_trace_error err;
  grt_status st = grt_trace_load_buffer(p->b, p->n, "in_use.pickle", &cfg, &t, &err);
  if (st) fail_msg("load: %s", err.reason);
  free(p);
  return t;
}

static void test_fidelity_scores_release_as_disagreeing(void **state) {
  (void)state;
  grt_trace *t = load_snapshot();
  grt_trace_info info;
  assert_int_equal(grt_trace_get_info(t, &info), GRT_OK);
  assert_int_equal(info.n_events, 6);
  grt_fidelity_report rep;
  char err[256];
  grt_status st = grt_replay_fidelity(t, &rep, err, sizeof err);
  if (st) fail_msg("fidelity: %s", err);
  assert_int_equal(rep.allocs, 2);
  assert_int_equal(rep.exact, 1); /* the second alloc went to A's cached block */
  assert_int_equal(rep.shown[0].event, 4);
  assert_int_equal(rep.shown[0].recorded, SEG_B);
  assert_int_equal(rep.shown[0].replayed, SEG_A);
  assert_int_equal(rep.releases, 1);
  assert_int_equal(rep.releases_matching, 0);
  assert_string_equal(rep.release_note,
                      "release at event 5: recorded 1 range from 0x10000000 (2.00 MiB), the model nothing");
  assert_int_equal(rep.contradictions, 0);
  assert_int_equal(rep.final_recorded, 1);
  assert_int_equal(rep.final_replayed, 1);
  assert_false(rep.final_layout_equal); /* the model still has A, with the block, not B */
  assert_true(rep.structure_ok);
  assert_int_equal(grt_trace_destroy(t), GRT_OK);
}

static void test_replay_counts_release_frees_nothing(void **state) {
  (void)state;
  grt_trace *t = load_snapshot();
  grt_replay_config c;
  grt_replay_config_default(&c);
  grt_replay *r;
  assert_int_equal(grt_replay_open(t, &c, &r), GRT_OK);
  assert_int_equal(grt_replay_rebuild_start(r), GRT_OK);
  assert_int_equal(grt_replay_run(r), GRT_OK);
  grt_replay_summary s;
  assert_int_equal(grt_replay_get_summary(r, &s), GRT_OK);
  assert_int_equal(s.events, 6);
  assert_int_equal(s.allocs, 2);
  assert_int_equal(s.frees, 1);
  assert_int_equal(s.ooms, 0);
  assert_int_equal(s.releases, 1);       /* the recorded release was replayed */
  assert_int_equal(s.device_mallocs, 1); /* segment A only: B was never needed */
  assert_int_equal(s.device_frees, 0);   /* A holds the live block: nothing to give back */
  assert_int_equal(s.final_reserved, 2 * MiB);
  assert_int_equal(s.final_allocated, 512);
  assert_int_equal(grt_replay_destroy(r), GRT_OK);
  assert_int_equal(grt_trace_destroy(t), GRT_OK);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_fidelity_scores_release_as_disagreeing),
      cmocka_unit_test(test_replay_counts_release_frees_nothing),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
