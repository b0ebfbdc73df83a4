/* test_doctor_contract.c — the runtime contract's trace checks on traces
 * built to keep or break each rule: the loop and its warm-up, device mallocs
 * after it, empty_cache bursts, retries told from empty_caches by their
 * stacks, OOMs, frees deferred by another stream, and bytes stranded on
 * another stream. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "gpurt/doctor.h"
#include "replay_test_util.h"

#define SMALL_BASE 0x10000000ull
#define LARGE_BASE 0x20000000ull

/* A trace written line by line. */
typedef struct text {
  char *buf;
  size_t len;
  FILE *f;
  uint64_t events; /* event lines so far: the next one's index */
  int64_t time;
} text;

static void text_open(text *t) {
  memset(t, 0, sizeof *t);
  t->f = open_memstream(&t->buf, &t->len);
  assert_non_null(t->f);
  fputs("gpurt-trace 1\n"
        "%frame 1 10 \"step\" \"/home/u/train.py\"\n"
        "%frame 2 20 \"layer\" \"/home/u/model.py\"\n"
        "%frame 3 30 \"loss\" \"/home/u/train.py\"\n"
        "%frame 4 0 \"c10::cuda::CUDACachingAllocator::Native::NativeCachingAllocator::emptyCache()\" \"\"\n"
        "%frame 5 200 \"empty_cache\" \"/venv/lib/python3.12/site-packages/torch/cuda/memory.py\"\n"
        "%frame 6 0 \"c10::cuda::CUDACachingAllocator::Native::DeviceCachingAllocator::malloc(signed char, "
        "unsigned long, CUstream_st*)\" \"CUDACachingAllocator.cpp\"\n"
        "%stack 1 1\n"
        "%stack 2 2 1\n"
        "%stack 3 3 1\n"
        "%stack 4 4 5 1\n"
        "%stack 5 6 2 1\n",
        t->f);
}

/* One event line: kind, id (or -1), size, stream, addr, stack; the time advances by 10 us. */
static uint64_t ev(text *t, const char *kind, long long id, uint64_t size, unsigned stream, uint64_t addr,
                   unsigned stack) {
  t->time += 10;
  if (id < 0)
    fprintf(t->f, "%s - %llu %u %lld 0x%llx @%u\n", kind, (unsigned long long)size, stream, (long long)t->time,
            (unsigned long long)addr, stack);
  else
    fprintf(t->f, "%s %lld %llu %u %lld 0x%llx @%u\n", kind, id, (unsigned long long)size, stream,
            (long long)t->time, (unsigned long long)addr, stack);
  return t->events++;
}

static uint64_t alloc(text *t, long long id, uint64_t size, uint64_t addr, unsigned stack) {
  return ev(t, "alloc", id, size, 0, addr, stack);
}

static void free_now(text *t, long long id, uint64_t size, uint64_t addr) {
  ev(t, "free_requested", id, size, 0, addr, 0);
  ev(t, "free_completed", id, size, 0, addr, 0);
}

static grt_doctor_report examine_text(text *t) {
  assert_int_equal(fclose(t->f), 0);
  grt_trace *tr = load(t->buf);
  free(t->buf);
  grt_doctor_report rep;
  char err[256];
  grt_status st = grt_doctor_examine(tr, &rep, err, sizeof err);
  if (st) fail_msg("examine: %s (%s)", err, grt_status_name(st));
  assert_int_equal(grt_trace_destroy(tr), GRT_OK);
  return rep;
}

/* One iteration of the loop: three sites on the small segment, all freed;
 * the sizes drift from one iteration to the next (as sequence lengths do). */
static uint64_t iteration(text *t, long long *id, int k) {
  uint64_t a = 512u * (uint64_t)(k + 1), b = 1024, c = 512;
  uint64_t first = alloc(t, *id, a, SMALL_BASE, 1);
  alloc(t, *id + 1, b, SMALL_BASE + a, 2);
  alloc(t, *id + 2, c, SMALL_BASE + a + b, 3);
  free_now(t, *id + 2, c, SMALL_BASE + a + b);
  free_now(t, *id + 1, b, SMALL_BASE + a);
  free_now(t, *id, a, SMALL_BASE);
  *id += 3;
  return first;
}

static void check_kept(const grt_doctor_report *rep, grt_contract_rule rule) {
  const grt_contract_finding *f = &rep->contract[rule];
  if (f->outcome != GRT_CONTRACT_KEPT) fail_msg("%s: %s", grt_contract_rule_name(rule), f->detail);
}

/* Six iterations after a warm-up segment: the loop is found, and nothing breaks. */
static void test_loop_kept(void **state) {
  (void)state;
  text t;
  text_open(&t);
  long long id = 0;
  ev(&t, "segment_alloc", -1, 2 * GRT_MiB, 0, SMALL_BASE, 1);
  uint64_t second = 0;
  for (int k = 0; k < 6; k++) {
    uint64_t first = iteration(&t, &id, k);
    if (k == 1) second = first;
  }
  grt_doctor_report rep = examine_text(&t);
  assert_true(rep.steady.found);
  assert_int_equal(rep.steady.iterations, 6);
  assert_int_equal(rep.steady.from_event, second);
  assert_int_equal(rep.steady.period, 3);
  assert_int_equal(rep.steady.anchor_stack, 1);
  assert_true(rep.steady.similarity == 1.0);
  for (int r = 0; r < GRT_CONTRACT_RULE_COUNT; r++) check_kept(&rep, (grt_contract_rule)r);
  assert_int_equal(rep.contract[GRT_CONTRACT_STREAM_STRANDING].count, 1); /* one stream */
  assert_string_equal(rep.contract[GRT_CONTRACT_STEADY_MALLOCS].detail,
                      "no device malloc or free after warm-up (6 iterations of about 3 allocations from event 10)");
}

/* Iteration 3 allocates 4 MiB, which takes a 20 MiB device malloc. */
static void test_malloc_after_warmup(void **state) {
  (void)state;
  text t;
  text_open(&t);
  long long id = 0;
  ev(&t, "segment_alloc", -1, 2 * GRT_MiB, 0, SMALL_BASE, 1);
  uint64_t seg = 0;
  for (int k = 0; k < 6; k++) {
    iteration(&t, &id, k);
    if (k != 2) continue;
    seg = ev(&t, "segment_alloc", -1, 20 * GRT_MiB, 0, LARGE_BASE, 2);
    alloc(&t, id, 4 * GRT_MiB, LARGE_BASE, 2);
    free_now(&t, id++, 4 * GRT_MiB, LARGE_BASE);
  }
  grt_doctor_report rep = examine_text(&t);
  const grt_contract_finding *f = &rep.contract[GRT_CONTRACT_STEADY_MALLOCS];
  assert_int_equal(f->outcome, GRT_CONTRACT_BROKEN);
  assert_int_equal(f->count, 1);
  assert_int_equal(f->bytes, 20 * GRT_MiB);
  assert_int_equal(f->also, 0);
  assert_int_equal(f->first_event, seg);
  assert_int_equal(f->stack, 2);
  assert_non_null(strstr(f->detail, "the last malloc in iteration 3"));
  check_kept(&rep, GRT_CONTRACT_EMPTY_CACHE);
}

/* Without frames, sizes are the sites: sizes that never repeat make no loop,
 * sizes that do make one. */
static void test_loops_by_size(void **state) {
  (void)state;
  text t = {0};
  t.f = open_memstream(&t.buf, &t.len);
  assert_non_null(t.f);
  fputs("gpurt-trace 1\n", t.f);
  ev(&t, "segment_alloc", -1, 2 * GRT_MiB, 0, SMALL_BASE, 0);
  for (long long i = 0; i < 8; i++) {
    alloc(&t, i, 512 * (uint64_t)(i + 1), SMALL_BASE, 0);
    free_now(&t, i, 512 * (uint64_t)(i + 1), SMALL_BASE);
  }
  grt_doctor_report rep = examine_text(&t);
  assert_false(rep.steady.found);
  assert_int_equal(rep.contract[GRT_CONTRACT_STEADY_MALLOCS].outcome, GRT_CONTRACT_UNKNOWN);

  memset(&t, 0, sizeof t);
  t.f = open_memstream(&t.buf, &t.len);
  assert_non_null(t.f);
  fputs("gpurt-trace 1\n", t.f);
  ev(&t, "segment_alloc", -1, 2 * GRT_MiB, 0, SMALL_BASE, 0);
  for (long long i = 0; i < 8; i++) {
    alloc(&t, 2 * i, 4096, SMALL_BASE, 0);
    alloc(&t, 2 * i + 1, 1024, SMALL_BASE + 4096, 0);
    free_now(&t, 2 * i + 1, 1024, SMALL_BASE + 4096);
    free_now(&t, 2 * i, 4096, SMALL_BASE);
  }
  rep = examine_text(&t);
  assert_true(rep.steady.found);
  assert_int_equal(rep.steady.iterations, 8);
  assert_int_equal(rep.steady.anchor_stack, 0);
  assert_int_equal(rep.steady.anchor_size, 4096);
  assert_int_equal(rep.steady.from_event, 1 + 6);
  assert_int_equal(rep.contract[GRT_CONTRACT_STEADY_MALLOCS].outcome, GRT_CONTRACT_KEPT);
}

/* Each iteration ends in an empty_cache giving back two segments. */
static void test_empty_cache_bursts(void **state) {
  (void)state;
  text t;
  text_open(&t);
  long long id = 0;
  for (int k = 0; k < 4; k++) {
    ev(&t, "segment_alloc", -1, 2 * GRT_MiB, 0, SMALL_BASE, 1);
    iteration(&t, &id, 0);
    ev(&t, "segment_alloc", -1, 20 * GRT_MiB, 0, LARGE_BASE, 2);
    alloc(&t, id, 4 * GRT_MiB, LARGE_BASE, 2);
    free_now(&t, id++, 4 * GRT_MiB, LARGE_BASE);
    ev(&t, "segment_free", -1, 2 * GRT_MiB, 0, SMALL_BASE, 4);
    ev(&t, "segment_free", -1, 20 * GRT_MiB, 0, LARGE_BASE, 4);
  }
  grt_doctor_report rep = examine_text(&t);
  assert_true(rep.steady.found);
  assert_int_equal(rep.steady.iterations, 4);
  const grt_contract_finding *f = &rep.contract[GRT_CONTRACT_EMPTY_CACHE];
  assert_int_equal(f->outcome, GRT_CONTRACT_BROKEN);
  assert_int_equal(f->count, 4);
  assert_int_equal(f->bytes, 4 * 22 * GRT_MiB);
  assert_int_equal(f->time_us, 4 * 10); /* first to last free of each burst */
  assert_int_equal(f->stack, 4);
  assert_non_null(strstr(f->detail, "after warm-up too"));
  /* the loop's own mallocs and frees after warm-up (the second iteration's small
     segment comes before its first alloc, so in warm-up) */
  f = &rep.contract[GRT_CONTRACT_STEADY_MALLOCS];
  assert_int_equal(f->outcome, GRT_CONTRACT_BROKEN);
  assert_int_equal(f->count, 5);
  assert_int_equal(f->also, 6);
  check_kept(&rep, GRT_CONTRACT_OOM_RETRIES);
}

/* A 20 MiB segment cached whole, given back (the segment free's stack:
 * release_stack), then a 40 MiB malloc at its place (last alloc's stack:
 * alloc_stack). Returns the release's event index. */
static uint64_t release_then_malloc(text *t, unsigned release_stack, unsigned alloc_stack) {
  text_open(t);
  ev(t, "segment_alloc", -1, 20 * GRT_MiB, 0, LARGE_BASE, 2);
  alloc(t, 0, 4 * GRT_MiB, LARGE_BASE, 2);
  free_now(t, 0, 4 * GRT_MiB, LARGE_BASE);
  uint64_t run = ev(t, "segment_free", -1, 20 * GRT_MiB, 0, LARGE_BASE, release_stack);
  ev(t, "segment_alloc", -1, 40 * GRT_MiB, 0, LARGE_BASE, 5);
  alloc(t, 1, 40 * GRT_MiB, LARGE_BASE, alloc_stack);
  return run;
}

/* A release whose stack is a malloc's: the device was full, the cache went, cudaMalloc was retried. */
static void test_retry_told_by_stack(void **state) {
  (void)state;
  text t;
  uint64_t run = release_then_malloc(&t, 5, 2);
  grt_doctor_report rep = examine_text(&t);
  const grt_contract_finding *f = &rep.contract[GRT_CONTRACT_OOM_RETRIES];
  assert_int_equal(f->outcome, GRT_CONTRACT_BROKEN);
  assert_int_equal(f->count, 1);
  assert_int_equal(f->also, 0);
  assert_int_equal(f->bytes, 20 * GRT_MiB);
  assert_int_equal(f->first_event, run);
  assert_int_equal(f->time_us, 20); /* the free to the alloc it served */
  check_kept(&rep, GRT_CONTRACT_EMPTY_CACHE);
}

/* The same retry bounds the memory the process had: under 20 MiB reserved + the 40 MiB cudaMalloc
 * refused, at least the 40 MiB held once it succeeded; an empty_cache's release bounds nothing. */
static void test_device_full_bound(void **state) {
  (void)state;
  for (int empty = 0; empty < 2; empty++) {
    text t;
    uint64_t run = release_then_malloc(&t, empty ? 4 : 5, 2);
    fputs("%segment 0x20000000 41943040 0 large 0\n%block 0x20000000 41943040 41943040 active_allocated\n", t.f);
    assert_int_equal(fclose(t.f), 0);
    grt_trace *tr = load(t.buf);
    free(t.buf);
    grt_trace_recorded rec;
    assert_int_equal(grt_trace_recorded_figures(tr, &rec), GRT_OK);
    assert_int_equal(rec.device_full_event, empty ? UINT64_MAX : run);
    assert_int_equal(rec.device_full_below, empty ? 0 : 60 * GRT_MiB);
    assert_int_equal(rec.device_full_held, empty ? 0 : 40 * GRT_MiB);
    assert_int_equal(grt_trace_release_origin(tr, 4), GRT_RELEASE_EMPTY_CACHE);
    assert_int_equal(grt_trace_release_origin(tr, 5), GRT_RELEASE_MALLOC);
    assert_int_equal(grt_trace_release_origin(tr, 1), GRT_RELEASE_MALLOC); /* Python frames only */
    assert_int_equal(grt_trace_release_origin(tr, 0), GRT_RELEASE_UNKNOWN);
    assert_int_equal(grt_trace_release_origin(NULL, 5), GRT_RELEASE_UNKNOWN);
    assert_int_equal(grt_trace_destroy(tr), GRT_OK);
  }
}

/* The same release from an empty_cache's stack is one. */
static void test_empty_cache_told_by_stack(void **state) {
  (void)state;
  text t;
  release_then_malloc(&t, 4, 3);
  grt_doctor_report rep = examine_text(&t);
  assert_int_equal(rep.contract[GRT_CONTRACT_EMPTY_CACHE].count, 1);
  assert_int_equal(rep.contract[GRT_CONTRACT_EMPTY_CACHE].time_us, 0);
  check_kept(&rep, GRT_CONTRACT_OOM_RETRIES);
  /* two allocations from two sites: no loop, so an empty_cache anywhere counts */
  assert_false(rep.steady.found);
  assert_int_equal(rep.contract[GRT_CONTRACT_EMPTY_CACHE].outcome, GRT_CONTRACT_BROKEN);
  assert_int_equal(rep.contract[GRT_CONTRACT_STEADY_MALLOCS].outcome, GRT_CONTRACT_UNKNOWN);
}

/* A recorded OOM after its release run: an OOM, and the time from the run to it. */
static void test_oom(void **state) {
  (void)state;
  text t;
  text_open(&t);
  ev(&t, "segment_alloc", -1, 20 * GRT_MiB, 0, LARGE_BASE, 2);
  alloc(&t, 0, 18 * GRT_MiB, LARGE_BASE, 2);
  ev(&t, "segment_alloc", -1, 20 * GRT_MiB, 0, LARGE_BASE + 20 * GRT_MiB, 2);
  alloc(&t, 1, 4 * GRT_MiB, LARGE_BASE + 20 * GRT_MiB, 2);
  free_now(&t, 1, 4 * GRT_MiB, LARGE_BASE + 20 * GRT_MiB);
  ev(&t, "segment_free", -1, 20 * GRT_MiB, 0, LARGE_BASE + 20 * GRT_MiB, 5);
  uint64_t oom = ev(&t, "oom", -1, 40 * GRT_MiB, 0, 2 * GRT_MiB, 2);
  grt_doctor_report rep = examine_text(&t);
  const grt_contract_finding *f = &rep.contract[GRT_CONTRACT_OOM_RETRIES];
  assert_int_equal(f->outcome, GRT_CONTRACT_BROKEN);
  assert_int_equal(f->count, 0);
  assert_int_equal(f->also, 1);
  assert_int_equal(f->first_event, oom);
  assert_int_equal(f->time_us, 10);
  check_kept(&rep, GRT_CONTRACT_EMPTY_CACHE);
  assert_int_equal(rep.verdict, GRT_DOCTOR_DEMAND_BOUND);
}

/* A free that waits for another stream: its free_completed comes three events later. */
static void test_cross_stream_free(void **state) {
  (void)state;
  text t;
  text_open(&t);
  ev(&t, "segment_alloc", -1, 2 * GRT_MiB, 0, SMALL_BASE, 1);
  alloc(&t, 0, 1024, SMALL_BASE, 1);
  uint64_t req = ev(&t, "free_requested", 0, 1024, 0, SMALL_BASE, 1);
  alloc(&t, 1, 512, SMALL_BASE + 1024, 2);
  free_now(&t, 1, 512, SMALL_BASE + 1024);
  uint64_t done = ev(&t, "free_completed", 0, 1024, 0, SMALL_BASE, 1);
  grt_doctor_report rep = examine_text(&t);
  const grt_contract_finding *f = &rep.contract[GRT_CONTRACT_CROSS_STREAM_FREES];
  assert_int_equal(f->outcome, GRT_CONTRACT_BROKEN);
  assert_int_equal(f->count, 1);
  assert_int_equal(f->bytes, 1024);
  assert_int_equal(f->first_event, req);
  assert_int_equal(f->also, done - req);
  assert_int_equal(f->time_us, (int64_t)(done - req) * 10);
}

/* Stream 7 caches a nearly empty 2 MiB segment while stream 0 holds the bytes. */
static void test_stream_stranding(void **state) {
  (void)state;
  text t;
  text_open(&t);
  ev(&t, "segment_alloc", -1, 2 * GRT_MiB, 0, SMALL_BASE, 1);
  alloc(&t, 0, GRT_MiB, SMALL_BASE, 1);
  ev(&t, "segment_alloc", -1, 2 * GRT_MiB, 7, SMALL_BASE + 2 * GRT_MiB, 2);
  ev(&t, "alloc", 1, 512, 7, SMALL_BASE + 2 * GRT_MiB, 2);
  ev(&t, "free_requested", 1, 512, 7, SMALL_BASE + 2 * GRT_MiB, 0);
  ev(&t, "free_completed", 1, 512, 7, SMALL_BASE + 2 * GRT_MiB, 0);
  grt_doctor_report rep = examine_text(&t);
  const grt_contract_finding *f = &rep.contract[GRT_CONTRACT_STREAM_STRANDING];
  assert_int_equal(f->outcome, GRT_CONTRACT_BROKEN);
  assert_int_equal(f->count, 2);
  assert_int_equal(f->bytes, 2 * GRT_MiB - 512);
  assert_int_equal(rep.peak.streams, 2);
  assert_int_equal(rep.peak.other_stream_free, 2 * GRT_MiB - 512);
}

static void test_rule_names(void **state) {
  (void)state;
  assert_string_equal(grt_contract_rule_name(GRT_CONTRACT_STEADY_MALLOCS), "steady-state-mallocs");
  assert_string_equal(grt_contract_rule_name(GRT_CONTRACT_STREAM_STRANDING), "stream-stranding");
  assert_string_equal(grt_contract_rule_name(GRT_CONTRACT_RULE_COUNT), "?");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_loop_kept),
      cmocka_unit_test(test_malloc_after_warmup),
      cmocka_unit_test(test_loops_by_size),
      cmocka_unit_test(test_empty_cache_bursts),
      cmocka_unit_test(test_retry_told_by_stack),
      cmocka_unit_test(test_empty_cache_told_by_stack),
      cmocka_unit_test(test_device_full_bound),
      cmocka_unit_test(test_oom),
      cmocka_unit_test(test_cross_stream_free),
      cmocka_unit_test(test_stream_stranding),
      cmocka_unit_test(test_rule_names),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
