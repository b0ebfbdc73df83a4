/* test_exec_scenarios.c — the stream scenarios S1–S3 (docs/EXEC.md) under both clocks.
 * Virtual time is exact, so the DAG prediction is asserted to the nanosecond
 * there; under threads only correctness is asserted (no timings). */
#include "base/rng.h"
#include "scenarios/scenario.h"
#include "scenarios/scenario_lifetime.h"
#include "test_exec_common.h"

static grt__pipe_params small_pipe(void) {
  grt__pipe_params p = {6, 64 * 1024, 20000};
  return p;
}

/* S1: overlap across three streams vs one stream. */
static void test_s1_overlap(void **state) {
  grt_clock_kind clock = clock_of(state);
  grt_exec *exec = make_exec(clock, 1);
  grt__pipe_params p = small_pipe();
  grt__pipe_result serial, piped;
  assert_int_equal(grt__scn_pipeline(exec, &p, GRT__PIPE_SERIAL, &serial), GRT_OK);
  assert_int_equal(grt__scn_pipeline(exec, &p, GRT__PIPE_STREAMS, &piped), GRT_OK);
  assert_true(serial.output_ok);
  assert_true(piped.output_ok);
  assert_true(piped.predicted_ns < serial.predicted_ns);
  if (clock == GRT_CLOCK_VIRTUAL) {
    assert_int_equal(serial.elapsed_ns, serial.predicted_ns);
    assert_int_equal(piped.elapsed_ns, piped.predicted_ns);
  }
  assert_int_equal(grt_exec_destroy(exec), GRT_OK);
}

/* S2: compute on the legacy stream serializes blocking copy streams, not
 * non-blocking ones. */
static void test_s2_false_serialization(void **state) {
  grt_clock_kind clock = clock_of(state);
  grt_exec *exec = make_exec(clock, 0);
  grt__pipe_params p = small_pipe();
  grt__pipe_result legacy, legacy_nb, streams;
  assert_int_equal(grt__scn_pipeline(exec, &p, GRT__PIPE_LEGACY, &legacy), GRT_OK);
  assert_int_equal(grt__scn_pipeline(exec, &p, GRT__PIPE_LEGACY_NB, &legacy_nb), GRT_OK);
  assert_int_equal(grt__scn_pipeline(exec, &p, GRT__PIPE_STREAMS, &streams), GRT_OK);
  assert_true(legacy.output_ok && legacy_nb.output_ok && streams.output_ok);
  if (clock == GRT_CLOCK_VIRTUAL) {
    assert_true(legacy.elapsed_ns > legacy_nb.elapsed_ns);
    assert_int_equal(legacy_nb.elapsed_ns, streams.predicted_ns);
  }
  assert_int_equal(grt_exec_destroy(exec), GRT_OK);
}

/* S3, deterministic: the gate lets the writer finish before the reader runs. */
static void test_s3_gated(void **state) {
  grt_exec *exec = make_exec(clock_of(state), 0);
  grt__lifetime lt;
  assert_int_equal(grt__lifetime_init(&lt, exec, 4096), GRT_OK);
  grt__lifetime_sched sc = {1000, 5000, 0, 1000, 1};
  int corrupted = -1;
  assert_int_equal(grt__lifetime_run(&lt, 0, &sc, 1, &corrupted), GRT_OK);
  assert_int_equal(corrupted, 1);
  assert_true(lt.same_block);
  assert_true(lt.reports >= 1); /* the sanitizer flags the host-order free */
  assert_int_equal(grt__lifetime_run(&lt, 1, &sc, 2, &corrupted), GRT_OK);
  assert_int_equal(corrupted, 0);
  assert_true(lt.same_block); /* reused behind the program's event edge */
  assert_int_equal(lt.reports, 0);
  assert_int_equal(grt__lifetime_fini(&lt), GRT_OK);
  assert_int_equal(grt_exec_destroy(exec), GRT_OK);
}

/* S3 under the virtual clock: every schedule of a grid of durations, with
 * three tie-breaking seeds each. */
static void test_s3_virtual_explore(void **state) {
  (void)state;
  static const uint64_t d[3] = {0, 10000, 20000};
  int unsafe_bad = 0, safe_bad = 0, runs = 0, unsafe_flagged = 0, safe_flagged = 0;
  for (uint64_t seed = 0; seed < 3; seed++) {
    grt_exec_config cfg;
    grt_exec_config_default(&cfg);
    cfg.clock = GRT_CLOCK_VIRTUAL;
    cfg.device_capacity = 4 * GRT_MiB; /* the caching pool takes 2 MiB segments for small blocks */
    cfg.schedule_seed = seed;
    grt_exec *exec;
    assert_int_equal(grt_exec_create(&cfg, &exec), GRT_OK);
    grt__lifetime lt;
    assert_int_equal(grt__lifetime_init(&lt, exec, 2048), GRT_OK);
    for (int i = 0; i < 81; i++) {
      grt__lifetime_sched sc = {d[i % 3], d[i / 3 % 3] + 1000, d[i / 9 % 3], d[i / 27] + 1000, 0};
      int bad = -1;
      assert_int_equal(grt__lifetime_run(&lt, 0, &sc, (uint64_t)i, &bad), GRT_OK);
      unsafe_bad += bad;
      unsafe_flagged += lt.reports > 0;
      assert_int_equal(grt__lifetime_run(&lt, 1, &sc, (uint64_t)i, &bad), GRT_OK);
      safe_bad += bad;
      safe_flagged += lt.reports > 0;
      runs++;
    }
    assert_int_equal(grt__lifetime_fini(&lt), GRT_OK);
    assert_int_equal(grt_exec_destroy(exec), GRT_OK);
  }
  assert_int_equal(runs, 243);
  assert_true(unsafe_bad > 0);
  assert_int_equal(safe_bad, 0);
  assert_int_equal(unsafe_flagged, 243); /* the sanitizer flags every schedule, corrupted or not */
  assert_int_equal(safe_flagged, 0);
}

/* S3 under threads: 1,000 randomized schedules per path; the stream-ordered
 * free never corrupts. (How often the unsafe path corrupts depends on timing
 * and is printed, not asserted.) */
static void test_s3_threads_random(void **state) {
  (void)state;
  grt_exec *exec = make_exec(GRT_CLOCK_THREADS, 0);
  grt__lifetime lt;
  assert_int_equal(grt__lifetime_init(&lt, exec, 2048), GRT_OK);
  grt__rng r;
  grt__rng_seed(&r, 2024);
  int unsafe_bad = 0, safe_bad = 0, unsafe_flagged = 0, safe_flagged = 0;
  for (int i = 0; i < 1000; i++) {
    grt__lifetime_sched sc = {grt__rng_below(&r, 30000), grt__rng_below(&r, 30000), grt__rng_below(&r, 30000),
                              grt__rng_below(&r, 30000), 0};
    int bad = -1;
    assert_int_equal(grt__lifetime_run(&lt, 0, &sc, (uint64_t)i, &bad), GRT_OK);
    unsafe_bad += bad;
    unsafe_flagged += lt.reports > 0;
    assert_int_equal(grt__lifetime_run(&lt, 1, &sc, (uint64_t)i, &bad), GRT_OK);
    safe_bad += bad;
    safe_flagged += lt.reports > 0;
  }
  print_message("S3 threads: unsafe free corrupted %d/1000 schedules, stream-ordered free %d/1000; "
                "sanitizer flagged %d/1000 unsafe, %d/1000 safe\n",
                unsafe_bad, safe_bad, unsafe_flagged, safe_flagged);
  assert_int_equal(safe_bad, 0);
  assert_int_equal(unsafe_flagged, 1000);
  assert_int_equal(safe_flagged, 0);
  assert_int_equal(grt__lifetime_fini(&lt), GRT_OK);
  assert_int_equal(grt_exec_destroy(exec), GRT_OK);
}

/* Creations failing one at a time (fault injection): each scenario returns the fault and leaves the exec
 * without live children (destroy succeeds) and the device empty; bad arguments are refused. */
static void test_scenarios_clean_up_after_faults(void **state) {
  (void)state;
  static const struct {
    grt_exec_fault kind;
    unsigned pipe_creations, deadlock_creations; /* STREAMS layout; CYCLE3 */
  } kinds[] = {{GRT_EXEC_FAULT_STREAM_CREATE, 3, 3},
               {GRT_EXEC_FAULT_EVENT_CREATE, 4, 2},
               {GRT_EXEC_FAULT_USER_EVENT_CREATE, 0, 2}};
  grt__pipe_params p = {3, 4096, 1000};
  for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++) {
    for (unsigned nth = 1; nth <= 5; nth++) {
      grt_exec *exec = make_exec(GRT_CLOCK_VIRTUAL, 0);
      grt__pipe_result r;
      assert_int_equal(grt_exec_inject_failure(exec, kinds[k].kind, nth), GRT_OK);
      grt_status st = grt__scn_pipeline(exec, &p, GRT__PIPE_STREAMS, &r);
      assert_int_equal(st, nth <= kinds[k].pipe_creations ? GRT_ERR_FAULT_INJECTED : GRT_OK);
      if (!st) assert_true(r.output_ok);
      assert_int_equal(grt_exec_inject_failure(exec, kinds[k].kind, nth), GRT_OK);
      char msg[512] = "";
      st = grt__scn_deadlock(exec, GRT__DL_UEV_CYCLE3, msg, sizeof msg);
      assert_int_equal(st, nth <= kinds[k].deadlock_creations ? GRT_ERR_FAULT_INJECTED : GRT_ERR_DEADLOCK);
      grt_device *dev;
      assert_int_equal(grt_exec_get_device(exec, &dev), GRT_OK);
      grt_device_stats ds;
      assert_int_equal(grt_device_get_stats(dev, &ds), GRT_OK);
      assert_int_equal(ds.bytes_in_use, 0);
      assert_int_equal(grt_exec_destroy(exec), GRT_OK); /* nothing left behind */
    }
  }
  /* a pipeline whose buffers do not fit the device: the buffers taken so far go back */
  grt_exec *exec = make_exec(GRT_CLOCK_VIRTUAL, 0);
  grt__pipe_params big = {3, 6 * GRT_MiB, 1000};
  grt__pipe_result r;
  assert_int_equal(grt__scn_pipeline(exec, &big, GRT__PIPE_SERIAL, &r), GRT_ERR_OOM);
  grt_device *dev;
  assert_int_equal(grt_exec_get_device(exec, &dev), GRT_OK);
  grt_device_stats ds;
  assert_int_equal(grt_device_get_stats(dev, &ds), GRT_OK);
  assert_int_equal(ds.bytes_in_use, 0);
  grt__pipe_params bad = p;
  assert_int_equal(grt__scn_pipeline(NULL, &p, GRT__PIPE_SERIAL, &r), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt__scn_pipeline(exec, NULL, GRT__PIPE_SERIAL, &r), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt__scn_pipeline(exec, &p, GRT__PIPE_SERIAL, NULL), GRT_ERR_INVALID_ARG);
  bad.chunks = 0;
  assert_int_equal(grt__scn_pipeline(exec, &bad, GRT__PIPE_SERIAL, &r), GRT_ERR_INVALID_ARG);
  bad = p;
  bad.chunk_bytes = 0;
  assert_int_equal(grt__scn_pipeline(exec, &bad, GRT__PIPE_SERIAL, &r), GRT_ERR_INVALID_ARG);
  char msg[8];
  assert_int_equal(grt__scn_deadlock(NULL, GRT__DL_UEV_CYCLE, msg, sizeof msg), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt__scn_deadlock(exec, GRT__DL_UEV_CYCLE, msg, 0), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt__scn_deadlock(exec, GRT__DL_PLAIN_EVENTS, NULL, 0), GRT_OK); /* the message is optional */
  assert_int_equal(grt_exec_destroy(exec), GRT_OK);

  /* S3's set-up: a stream creation failing leaves nothing behind either */
  for (unsigned nth = 1; nth <= 2; nth++) {
    exec = make_exec(GRT_CLOCK_VIRTUAL, 0);
    assert_int_equal(grt_exec_inject_failure(exec, GRT_EXEC_FAULT_STREAM_CREATE, nth), GRT_OK);
    grt__lifetime lt;
    assert_int_equal(grt__lifetime_init(&lt, exec, 4096), GRT_ERR_FAULT_INJECTED);
    assert_int_equal(grt_exec_destroy(exec), GRT_OK);
  }
  int corrupted;
  grt__lifetime_sched sc = {0, 1000, 0, 1000, 0};
  assert_int_equal(grt__lifetime_run(NULL, 1, &sc, 1, &corrupted), GRT_ERR_INVALID_ARG);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      BOTH_CLOCKS(test_s1_overlap),
      BOTH_CLOCKS(test_s2_false_serialization),
      BOTH_CLOCKS(test_s3_gated),
      cmocka_unit_test(test_s3_virtual_explore),
      cmocka_unit_test(test_s3_threads_random),
      cmocka_unit_test(test_scenarios_clean_up_after_faults),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
