/* test_replay_fidelity.c — grt_replay_fidelity on small hand-written native
 * traces whose recorded addresses, releases and final segments are chosen to
 * disagree with the faithful replay in each way the report can describe:
 * divergent placements (with what the replay had at the recorded address),
 * releases that freed other segments, and final layouts that differ in
 * presence, size, block count or block size; plus the failures (no device for
 * the recorded span, a starting state that cannot be rebuilt). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "replay_test_util.h"

static grt_fidelity_report fidelity_of(const char *text) {
  grt_trace *t = load(text);
  grt_fidelity_report rep;
  char why[256] = "x";
  grt_status st = grt_replay_fidelity(t, &rep, why, sizeof why);
  if (st) fail_msg("fidelity: %s: %s", grt_status_name(st), why);
  assert_string_equal(why, ""); /* cleared on success */
  assert_true(rep.structure_ok);
  assert_int_equal(grt_trace_destroy(t), GRT_OK);
  return rep;
}

/* Eleven small allocs into one imported 2 MiB segment, all but one recorded one block off. */
static void test_divergences(void **state) {
  (void)state;
  grt_fidelity_report rep = fidelity_of("gpurt-trace 1\n"
                                        "alloc 0 100 0 - 0x30000000\n" /* outside every segment */
                                        "alloc 1 100 0 - 0x10000000\n"
                                        "alloc 2 100 0 - 0x10000200\n"
                                        "alloc 3 100 0 - 0x10000600\n" /* where the replay put it */
                                        "alloc 4 100 0 - 0x10000600\n"
                                        "alloc 5 100 0 - 0x10000800\n"
                                        "alloc 6 100 0 - 0x10000a00\n"
                                        "alloc 7 100 0 - 0x10000c00\n"
                                        "alloc 8 100 0 - 0x10000e00\n"
                                        "alloc 9 100 0 - 0x10001000\n"
                                        "alloc 10 100 0 - 0x10001200\n"
                                        "%segment 0x10000000 2097152 0 small 0\n"
                                        "%block 0x10000000 2097152 0 inactive\n");
  assert_int_equal(rep.allocs, 11);
  assert_int_equal(rep.exact, 1);
  assert_int_equal(rep.divergences, 10);
  assert_int_equal(rep.n_shown, GRT_FIDELITY_MAX_SHOWN); /* the first 8 of 10 */
  assert_int_equal(rep.start_segments, 1);
  assert_int_equal(rep.start_blocks, 0);
  const grt_fidelity_divergence *d = rep.shown;
  assert_int_equal(d[0].event, 0);
  assert_int_equal(d[0].size, 100);
  assert_int_equal(d[0].stream, 0);
  assert_int_equal(d[0].recorded, 0x30000000);
  assert_int_equal(d[0].replayed, 0x10000000);
  assert_string_equal(d[0].context, "no replay segment covers the recorded address; previous event: none");
  assert_int_equal(d[1].event, 1);
  assert_int_equal(d[1].replayed, 0x10000200);
  assert_string_equal(d[1].context, "recorded address is 0 B into a 512 B allocated block of the 2.00 MiB small "
                                    "segment at 0x10000000; previous event: alloc");
  assert_int_equal(d[2].event, 2);
  assert_int_equal(d[3].event, 4); /* alloc 3 (event 3) was exact */
  assert_int_equal(d[3].recorded, 0x10000600);
  assert_int_equal(d[3].replayed, 0x10000800);
  assert_int_equal(d[7].event, 8);
  assert_int_equal(rep.final_recorded, 1);
  assert_int_equal(rep.final_replayed, 1);
  assert_int_equal(rep.final_matching, 0);
  assert_string_equal(rep.layout_note, "segment 0x10000000: recorded 1 blocks, replay 12");
  assert_int_equal(rep.releases, 0);
  assert_false(rep.expandable);
}

/* A recorded address in free space of a large segment; allocations the replay could not serve. */
static void test_divergence_contexts(void **state) {
  (void)state;
  grt_fidelity_report rep = fidelity_of("gpurt-trace 1\n"
                                        "segment_alloc - 20971520 0 - 0x20000000\n"
                                        "alloc 1 2000000 0 - 0x20000000\n"
                                        "alloc 2 2000000 0 - 0x20400000\n"
                                        "alloc 3 144115188075855872 7 - 0x24000000\n" /* 2^57 B: refused */
                                        "alloc 4 0 0 - 0x20000000\n"                  /* nothing to place */
                                        "free 3\n");
  assert_int_equal(rep.allocs, 4);
  assert_int_equal(rep.exact, 1);
  assert_int_equal(rep.n_shown, 3);
  assert_int_equal(rep.shown[0].event, 2);
  assert_int_equal(rep.shown[0].replayed, 0x20000000 + 2000384); /* right after the first block */
  assert_string_equal(rep.shown[0].context, "recorded address is 193536 B into a 16.18 MiB free block of the "
                                            "20.00 MiB large segment at 0x20000000; previous event: alloc");
  assert_int_equal(rep.shown[1].event, 3);
  assert_int_equal(rep.shown[1].stream, 7);
  assert_int_equal(rep.shown[1].replayed, 0); /* not served */
  assert_string_equal(rep.shown[1].context, "no replay segment covers the recorded address; previous event: alloc");
  assert_int_equal(rep.shown[2].event, 4);
  assert_int_equal(rep.shown[2].replayed, 0);
  assert_non_null(strstr(rep.shown[2].context, "0 B into a 1.91 MiB allocated block of the 20.00 MiB large segment"));
  assert_int_equal(rep.final_recorded, 0); /* no %segment lines: nothing to compare */
  assert_int_equal(rep.final_replayed, 1);
}

/* Releases: one freeing exactly the recorded segment, one freeing another;
 * an oom the model fails too (nothing cached to release, as recorded). */
static void test_releases(void **state) {
  (void)state;
  grt_fidelity_report rep = fidelity_of("gpurt-trace 1\n"
                                        "segment_alloc - 2097152 0 - 0x10000000\n"
                                        "alloc 0 100 0 - 0x10000000\n"
                                        "free 0 100 0 - 0x10000000\n"
                                        "segment_free - 2097152 0 - 0x10000000\n"
                                        "segment_alloc - 20971520 0 - 0x20000000\n"
                                        "alloc 1 2000000 0 - 0x20000000\n"
                                        "free 1 2000000 0 - 0x20000000\n"
                                        "alloc 2 3000000 0 - 0x20000000\n"
                                        "oom - 1024 0 - 5\n" /* 5 B free: the 2 MiB small segment cannot come */
                                        "free 2 3000000 0 - 0x20000000\n"
                                        "segment_alloc - 2097152 0 - 0x60000000\n"
                                        "segment_free - 2097152 0 - 0x60000000\n");
  assert_int_equal(rep.allocs, 3);
  assert_int_equal(rep.exact, 3);
  assert_int_equal(rep.n_shown, 0);
  assert_int_equal(rep.segment_decisions, 2); /* the third segment_alloc has no alloc to make it */
  assert_int_equal(rep.segment_decisions_agree, 2);
  assert_int_equal(rep.ooms_recorded, 1);
  assert_int_equal(rep.ooms_agree, 1);
  assert_string_equal(rep.oom_note, "");
  assert_int_equal(rep.releases, 2);
  assert_int_equal(rep.releases_matching, 1);
  /* the replay freed its cached 20 MiB segment, not the recorded one */
  assert_string_equal(rep.release_note, "release at event 11: recorded 1 range from 0x60000000 (2.00 MiB), "
                                        "the model 1 range from 0x20000000 (20.00 MiB)");
  assert_int_equal(rep.final_replayed, 0);

  /* expandable: the page is mapped by the trace, unmapped by a release (the
     wholly unmapped reservation goes, as PyTorch releases it), then mapped
     again in a new reservation, which the translation follows */
  const char *remap = "gpurt-trace 1\n"
                      "%setting expandable_segments 1\n"
                      "segment_map - 2097152 0 - 0x10000000\n"
                      "alloc 0 100 0 - 0x10000000\n"
                      "free 0 100 0 - 0x10000000\n"
                      "segment_unmap - 2097152 0 - 0x10000000\n"
                      "segment_map - 2097152 0 - 0x30000000\n" /* CUDA reserved elsewhere */
                      "alloc 1 100 0 - 0x30000000\n";
  rep = fidelity_of(remap);
  assert_true(rep.expandable);
  assert_int_equal(rep.start_segments, 0); /* the page's first event maps it */
  assert_int_equal(rep.releases, 1);
  assert_int_equal(rep.releases_matching, 1);
  assert_string_equal(rep.release_note, "");
  assert_int_equal(rep.segment_decisions, 2);
  assert_int_equal(rep.segment_decisions_agree, 2);
  assert_int_equal(rep.allocs, 2);
  assert_int_equal(rep.exact, 2);
  /* the same without the second map: the model's map has nothing recorded to stand for */
  rep = fidelity_of("gpurt-trace 1\n"
                    "%setting expandable_segments 1\n"
                    "segment_map - 2097152 0 - 0x10000000\n"
                    "alloc 0 100 0 - 0x10000000\n"
                    "free 0 100 0 - 0x10000000\n"
                    "segment_unmap - 2097152 0 - 0x10000000\n"
                    "alloc 1 100 0 - 0x10000000\n");
  assert_int_equal(rep.segment_decisions, 2);
  assert_int_equal(rep.segment_decisions_agree, 1);
  assert_non_null(strstr(rep.decision_note, "alloc at event 4: recorded nothing, the model 1 range from 0x"));
  assert_int_equal(rep.exact, 1);
}

/* An oom the model serves: the recorded free memory holds the request. */
static void test_oom_disagrees(void **state) {
  (void)state;
  grt_fidelity_report rep = fidelity_of("gpurt-trace 1\n"
                                        "segment_alloc - 20971520 0 - 0x20000000\n"
                                        "alloc 0 2000000 0 - 0x20000000\n"
                                        "oom - 2097152 0 - 1073741824\n"); /* 1 GiB free */
  assert_int_equal(rep.ooms_recorded, 1);
  assert_int_equal(rep.ooms_agree, 0);
  assert_string_equal(rep.oom_note, "oom at event 2: the model served the 2.00 MiB request (GRT_OK) on a device "
                                    "with the recorded 1073741824 B free");
  assert_int_equal(rep.segment_decisions, 1); /* the served request's segment is the model's alone, but is */
  assert_int_equal(rep.segment_decisions_agree, 1); /* scored at allocs only */
}

/* A trace that starts with nothing: a free of a block it never allocated contradicts it. */
static void test_contradiction(void **state) {
  (void)state;
  grt_fidelity_report rep = fidelity_of("gpurt-trace 1\n"
                                        "segment_alloc - 2097152 0 - 0x10000000\n"
                                        "alloc 0 100 0 - 0x10000000\n"
                                        "free 9 100 0 - 0x10000200\n");
  assert_int_equal(rep.contradictions, 1);
  assert_string_equal(rep.contradiction_note, "event 2 frees the block at 0x10000200, which was never allocated: "
                                              "the trace starts with nothing on the device");
}

/* Private pools: an allocation whose recorded address lies in a final
 * segment of a private pool is made in that pool; a release frees only the
 * default pool's segments. Without the pool id the model reuses the default
 * pool's cached block instead. */
static void test_private_pools(void **state) {
  (void)state;
  const char *events = "gpurt-trace 1\n"
                       "segment_alloc - 2097152 0 - 0x10000000\n"
                       "alloc 0 100 0 - 0x10000000\n"
                       "free 0 100 0 - 0x10000000\n"
                       "segment_alloc - 2097152 0 - 0x20000000\n"
                       "alloc 1 100 0 - 0x20000000\n" /* into the pool: the default pool's block stays free */
                       "free 1 100 0 - 0x20000000\n"
                       "alloc 2 100 0 - 0x10000000\n"
                       "alloc 3 100 0 - 0x20000000\n"
                       "free 2 100 0 - 0x10000000\n"
                       "free 3 100 0 - 0x20000000\n"
                       "segment_free - 2097152 0 - 0x10000000\n"; /* the pool's segment stays */
  char text[1024];
  snprintf(text, sizeof text, "%s%%segment 0x20000000 2097152 0 small 0 1 0\n%%block 0x20000000 2097152 0 inactive\n",
           events);
  grt_fidelity_report rep = fidelity_of(text);
  assert_int_equal(rep.allocs, 4);
  assert_int_equal(rep.exact, 4);
  assert_int_equal(rep.segment_decisions, 2);
  assert_int_equal(rep.segment_decisions_agree, 2);
  assert_int_equal(rep.releases, 1);
  assert_int_equal(rep.releases_matching, 1);
  assert_true(rep.final_layout_equal);
  snprintf(text, sizeof text, "%s%%segment 0x20000000 2097152 0 small 0\n%%block 0x20000000 2097152 0 inactive\n",
           events);
  rep = fidelity_of(text);
  assert_int_equal(rep.exact, 2); /* allocs 1 and 3 reuse the default pool's block */
  assert_false(rep.final_layout_equal);
}

/* Final layout: one segment matching, one with a different block size, one with a different
 * block count, one of a different size, one missing. */
static void test_final_layout(void **state) {
  (void)state;
  grt_fidelity_report rep = fidelity_of("gpurt-trace 1\n"
                                        "alloc 7 1000 0 - 0x10000000\n"
                                        "segment_alloc - 20971520 0 - 0x20000000\n"
                                        "alloc 1 2000000 0 - 0x20000000\n"
                                        "segment_alloc - 2097152 0 - 0x40000000\n" /* never used */
                                        "%segment 0x10000000 2097152 0 small 0\n"
                                        "%block 0x10000000 512 100 active_allocated\n"
                                        "%block 0x10000200 2096640 0 inactive\n"
                                        "%segment 0x12000000 2097152 0 small 0\n"
                                        "%block 0x12000000 512 0 inactive\n"
                                        "%block 0x12000200 2096640 0 inactive\n"
                                        "%segment 0x14000000 2097152 0 small 0\n"
                                        "%block 0x14000000 2097152 2000000 active_allocated\n"
                                        "%segment 0x20000000 2097152 0 large 0\n"
                                        "%segment 0x40000000 2097152 0 small 0\n");
  assert_int_equal(rep.start_segments, 3); /* the three without segment events existed all along */
  assert_int_equal(rep.start_blocks, 1);   /* 0x14000000's block, never allocated in the trace */
  assert_int_equal(rep.allocs, 2);
  assert_int_equal(rep.exact, 2);
  assert_int_equal(rep.final_recorded, 5);
  assert_int_equal(rep.final_replayed, 4);
  assert_int_equal(rep.final_matching, 1);
  assert_string_equal(rep.layout_note, "segment 0x10000000 block 0: recorded 512 B active, replay 1024 B active");
  /* each other difference, alone */
  rep = fidelity_of("gpurt-trace 1\n"
                    "%segment 0x12000000 2097152 0 small 0\n"
                    "%block 0x12000000 512 0 inactive\n"
                    "%block 0x12000200 2096640 0 inactive\n");
  assert_string_equal(rep.layout_note, "segment 0x12000000: recorded 2 blocks, replay 1");
  rep = fidelity_of("gpurt-trace 1\n"
                    "segment_alloc - 20971520 0 - 0x20000000\n"
                    "alloc 1 2000000 0 - 0x20000000\n"
                    "%segment 0x20000000 2097152 0 large 0\n");
  assert_string_equal(rep.layout_note, "segment 0x20000000: recorded 2097152 B, replay 0x20000000 20971520 B");
  rep = fidelity_of("gpurt-trace 1\n"
                    "segment_alloc - 2097152 0 - 0x40000000\n"
                    "%segment 0x40000000 2097152 0 small 0\n");
  assert_string_equal(rep.layout_note, "segment 0x40000000 (2097152 B) is missing from the replay");
  assert_int_equal(rep.final_matching, 0);
  rep = fidelity_of("gpurt-trace 1\n"
                    "alloc 0 100 0 - 0x12000000\n"
                    "%segment 0x12000000 2097152 0 small 0\n"
                    "%block 0x12000000 512 100 active_allocated\n"
                    "%block 0x12000200 2096640 0 inactive\n");
  assert_int_equal(rep.final_matching, 1);
  assert_string_equal(rep.layout_note, "");
}

static void expect_failure(const char *text, grt_status want, const char *why_want) {
  grt_trace *t = load(text);
  grt_fidelity_report rep;
  char why[256];
  assert_int_equal(grt_replay_fidelity(t, &rep, why, sizeof why), want);
  if (strcmp(why, why_want)) fail_msg("got '%s', want '%s'", why, why_want);
  assert_int_equal(grt_replay_fidelity(t, &rep, NULL, 0), want); /* err is optional */
  assert_int_equal(grt_trace_destroy(t), GRT_OK);
}

static void test_failures(void **state) {
  (void)state;
  grt_fidelity_report rep;
  char why[64];
  assert_int_equal(grt_replay_fidelity(NULL, &rep, why, sizeof why), GRT_ERR_INVALID_ARG);
  grt_trace *t = load("gpurt-trace 1\n");
  assert_int_equal(grt_replay_fidelity(t, NULL, why, sizeof why), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt_replay_fidelity(t, &rep, why, 0), GRT_OK); /* an empty trace scores nothing */
  assert_int_equal(rep.allocs, 0);
  assert_int_equal(grt_trace_destroy(t), GRT_OK);
  /* recorded just below 2^64: the device moves down to hold it, and the replay is scored */
  t = load("gpurt-trace 1\nalloc 0 100 0 - 0xffffffffff000000\n");
  assert_int_equal(grt_replay_fidelity(t, &rep, why, sizeof why), GRT_OK);
  assert_int_equal(rep.allocs, 1);
  assert_true(rep.structure_ok);
  assert_int_equal(grt_trace_destroy(t), GRT_OK);
  /* overlapping recorded segments cannot both be rebuilt */
  expect_failure("gpurt-trace 1\n"
                 "alloc 0 100 0 - 0x10000000\n"
                 "%segment 0x10000000 2097152 0 small 0\n"
                 "%segment 0x10100000 2097152 0 small 0\n",
                 GRT_ERR_OOM,
                 "event 0: rebuilding the start: cannot place an imported segment at 0x10100000 (+2097152 bytes): "
                 "device out of memory");
  /* two blocks live before the trace at one address: the snapshot contradicts itself */
  expect_failure("gpurt-trace 1\n"
                 "free 0 100 0 - 0x10000000\n"
                 "free 1 100 0 - 0x10000000\n"
                 "%segment 0x10000000 2097152 0 small 0\n",
                 GRT_ERR_PARSE,
                 "event 0: rebuilding the start: block 0x10000000 (+512): imported block 0x10000000 (+512) is "
                 "not inside one free block");
}

/* The rebuilt start: settings applied, blocks freed-but-never-allocated rounded with them, the large-pool
 * gap rule, segments held before the trace (first event a free or unmap), frees outside every segment. */
static void test_start_state(void **state) {
  (void)state;
  grt_trace *t = load("gpurt-trace 1\n"
                      "%setting max_split_size 41943040\n"
                      "%setting garbage_collection_threshold 0.5\n"
                      "%setting roundup_power2_divisions 4 3 0 0 0 0 0 0 0 0 0 0 0 0 0 0\n"
                      "free 0 1500000 0 - 0x20000000\n"
                      "free 1 3000000 0 - 0x20200000\n"
                      "free 2 100 0 - 0x10000000\n"
                      "free 3 100 0 - 0x70000000\n"
                      "free 4 1153434 0 - 0x30000000\n"
                      "segment_unmap - 2097152 0 - 0x50000000\n"
                      "%segment 0x20000000 8388608 0 large 0\n"
                      "%segment 0x10000000 2097152 0 small 0\n"
                      "%segment 0x30000000 20971520 0 large 0\n");
  grt_replay_config c;
  grt_replay_config_default(&c);
  c.placement = GRT_REPLAY_PLACE_RECORDED;
  grt_replay *r;
  assert_int_equal(grt_replay_open(t, &c, &r), GRT_OK);
  assert_int_equal(grt_replay_rebuild_start(r), GRT_OK);
  grt_alloc_stats as;
  assert_int_equal(grt_alloc_get_stats(grt_replay_allocator(r), &as), GRT_OK);
  assert_int_equal(as.max_split_size, 41943040);
  grt_alloc_snapshot *snap;
  assert_int_equal(grt_alloc_snapshot_take(grt_replay_allocator(r), &snap), GRT_OK);
  static const struct {
    grt_devptr addr;
    uint64_t size;
    int active;
  } want[] = {
      {0x10000000, 512, 1},     {0x10000200, 2096640, 0}, /* small pool: no gap rule */
      {0x20000000, 2097152, 1},                           /* 1.5 MiB (4 divisions) + the 0.5 MiB gap after it */
      {0x20200000, 3000320, 1},                           /* 3 divisions are not a power of two: 512 B rounding */
      {0x204dc800, 3291136, 0},                           /* a gap over 1 MiB stays free */
      {0x30000000, 1310720, 1}, {0x30140000, 19660800, 0}, /* 1153434 B in quarter-MiB steps */
      {0x50000000, 2097152, 0},                           /* held before its recorded unmap */
  };
  size_t k = 0, n = sizeof want / sizeof want[0];
  for (size_t i = 0; i < snap->n_segments; i++) {
    for (size_t j = 0; j < snap->segments[i].n_blocks; j++, k++) {
      assert_true(k < n);
      const grt_snapshot_block *b = &snap->segments[i].blocks[j];
      assert_int_equal(b->address, want[k].addr);
      assert_int_equal(b->size, want[k].size);
      assert_int_equal(b->state, want[k].active ? GRT_BLOCK_ACTIVE_ALLOCATED : GRT_BLOCK_INACTIVE);
    }
  }
  assert_int_equal(k, n);
  grt_alloc_snapshot_free(snap);
  assert_int_equal(grt_replay_run(r), GRT_OK);
  grt_replay_summary sum;
  assert_int_equal(grt_replay_get_summary(r, &sum), GRT_OK);
  assert_int_equal(sum.frees, 4); /* the imported blocks */
  assert_int_equal(sum.unmatched_frees, 1); /* the one outside every segment */
  assert_int_equal(sum.final_allocated, 0);
  assert_int_equal(grt_replay_destroy(r), GRT_OK);
  c.alloc_conf = "bogus:1"; /* the caller's configuration string is parsed over the trace's settings */
  r = (grt_replay *)&c;
  assert_int_equal(grt_replay_open(t, &c, &r), GRT_ERR_PARSE);
  assert_null(r);
  c.alloc_conf = "max_split_size_mb:64";
  assert_int_equal(grt_replay_open(t, &c, &r), GRT_OK);
  assert_int_equal(grt_alloc_get_stats(grt_replay_allocator(r), &as), GRT_OK);
  assert_int_equal(as.max_split_size, 64 << 20);
  assert_int_equal(grt_replay_destroy(r), GRT_OK);
  assert_int_equal(grt_trace_destroy(t), GRT_OK);
}

/* Device geometry for recorded placement: addresses below 2 MiB, an explicit base. */
static void test_geometry(void **state) {
  (void)state;
  grt_trace *t = load("gpurt-trace 1\nalloc 0 100 0 - 0x1000\nalloc 1 100 0 - 0\nfree 1 100 0 - 0\n");
  grt_replay_config c;
  grt_replay_config_default(&c);
  c.placement = GRT_REPLAY_PLACE_RECORDED;
  grt_replay *r;
  assert_int_equal(grt_replay_open(t, &c, &r), GRT_OK);
  assert_int_equal(grt_replay_run(r), GRT_OK);
  grt_replay_summary sum;
  assert_int_equal(grt_replay_get_summary(r, &sum), GRT_OK);
  assert_int_equal(sum.capacity, GRT_GiB); /* the span is tiny: the 1 GiB floor */
  assert_int_equal(sum.frees, 1);
  grt_alloc_snapshot *snap;
  assert_int_equal(grt_alloc_snapshot_take(grt_replay_allocator(r), &snap), GRT_OK);
  assert_int_equal(snap->n_segments, 1);
  assert_int_equal(snap->segments[0].address, 2 << 20); /* a base of 0 is never used: 2 MiB */
  grt_alloc_snapshot_free(snap);
  assert_int_equal(grt_replay_destroy(r), GRT_OK);
  assert_int_equal(grt_trace_destroy(t), GRT_OK);

  t = load("gpurt-trace 1\nsegment_alloc - 2097152 0 - 0x50000000\nalloc 0 100 0 - 0x50000000\n");
  c.base_address = 0x10000000; /* below the recorded span: the device covers twice the span above it */
  assert_int_equal(grt_replay_open(t, &c, &r), GRT_OK);
  assert_int_equal(grt_replay_run(r), GRT_OK);
  assert_int_equal(grt_replay_get_summary(r, &sum), GRT_OK);
  assert_int_equal(sum.capacity, 2 * (0x50200000ull - 0x10000000ull));
  assert_int_equal(grt_alloc_snapshot_take(grt_replay_allocator(r), &snap), GRT_OK);
  assert_int_equal(snap->segments[0].address, 0x50000000); /* the recorded placement */
  grt_alloc_snapshot_free(snap);
  assert_int_equal(grt_replay_destroy(r), GRT_OK);
  c.base_address = 0x60000000; /* above it: nothing of the span is on the device, 1 GiB */
  assert_int_equal(grt_replay_open(t, &c, &r), GRT_OK);
  assert_int_equal(grt_replay_get_summary(r, &sum), GRT_OK);
  assert_int_equal(sum.capacity, GRT_GiB);
  assert_int_equal(grt_replay_destroy(r), GRT_OK);
  assert_int_equal(grt_trace_destroy(t), GRT_OK);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_divergences), cmocka_unit_test(test_divergence_contexts),
      cmocka_unit_test(test_releases),
      cmocka_unit_test(test_oom_disagrees),
      cmocka_unit_test(test_contradiction),
      cmocka_unit_test(test_private_pools),    cmocka_unit_test(test_final_layout),
      cmocka_unit_test(test_failures),    cmocka_unit_test(test_start_state),
      cmocka_unit_test(test_geometry),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
