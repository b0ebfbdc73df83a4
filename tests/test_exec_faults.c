/* test_exec_faults.c — fault injection in the executor: every worker-thread,
 * stream, event and user-event creation of a small workload is failed in turn
 * (under both clocks), and each time:
 *   - the failing call returns GRT_ERR_FAULT_INJECTED and its out-parameter is NULL;
 *   - nothing changed: the exec has no sticky error, the injected-failure count
 *     is one, and at the end grt_exec_destroy succeeds (a leaked live child would
 *     make it GRT_ERR_BUSY; leaked memory fails the ASan/LSan run);
 *   - the same call succeeds at once (the fault is one-shot), and the workload
 *     runs to completion with the right results.
 * The sweep stops at the first N where no fault fired: every creation was hit.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "gpurt/exec.h"

typedef struct sweep {
  grt_exec *exec;
  grt_exec_fault kind; /* the kind armed in this run */
  unsigned faults;     /* injected failures seen by the workload */
} sweep;

/* A creation call: on an injected fault, check the invariants and retry once. */
#define CREATE(sw, out, call)                                                     \
  do {                                                                            \
    grt_status st_ = (call);                                                      \
    if (st_ == GRT_ERR_FAULT_INJECTED) {                                          \
      assert_null(out);                                                           \
      check_after_fault(sw);                                                      \
      st_ = (call);                                                               \
    }                                                                             \
    assert_int_equal(st_, GRT_OK);                                                \
    assert_non_null(out);                                                         \
  } while (0)

static void check_after_fault(sweep *sw) {
  uint64_t n = 0;
  sw->faults++;
  assert_int_equal(grt_exec_get_error(sw->exec, NULL, 0), GRT_OK);
  assert_int_equal(grt_exec_injected_failures(sw->exec, sw->kind, &n), GRT_OK);
  assert_int_equal(n, sw->faults);
  assert_int_equal(sw->faults, 1); /* one-shot */
}

static void add_one(void *p) { (*(int *)p)++; }

/* Streams, events, a user event, the per-thread stream and an event of the
 * exec's grt_stream_ops; kernels, a memset, waits and syncs between them. */
static void workload(sweep *sw) {
  grt_exec *exec = sw->exec;
  grt_stream *a = NULL, *b = NULL, *c = NULL, *pt = NULL, *legacy = NULL;
  grt_event *e1 = NULL, *e2 = NULL;
  grt_user_event *u = NULL;
  int counter = 0;
  CREATE(sw, a, grt_stream_create(exec, GRT_STREAM_DEFAULT, 0, &a));
  CREATE(sw, b, grt_stream_create(exec, GRT_STREAM_NON_BLOCKING, -2, &b));
  CREATE(sw, e1, grt_event_create(exec, GRT_EVENT_DEFAULT, &e1));
  CREATE(sw, u, grt_user_event_create(exec, "gate", &u));
  grt_kernel_desc k = {add_one, &counter, 1000, GRT_ENGINE_COMPUTE, "k"};
  assert_int_equal(grt_launch_kernel(a, &k), GRT_OK);
  assert_int_equal(grt_event_record(e1, a), GRT_OK);
  assert_int_equal(grt_stream_wait_event(b, e1), GRT_OK);
  assert_int_equal(grt_launch_kernel(b, &k), GRT_OK);
  CREATE(sw, c, grt_stream_create(exec, GRT_STREAM_NON_BLOCKING, 0, &c));
  CREATE(sw, e2, grt_event_create(exec, GRT_EVENT_DISABLE_TIMING, &e2));
  assert_int_equal(grt_stream_wait_user_event(c, u, 1), GRT_OK);
  assert_int_equal(grt_launch_kernel(c, &k), GRT_OK);
  assert_int_equal(grt_event_record(e2, c), GRT_OK);
  assert_int_equal(grt_stream_signal_user_event(b, u, 1), GRT_OK);
  CREATE(sw, pt, grt_exec_per_thread_stream(exec, &pt));
  grt_device *dev = NULL;
  grt_devptr p = 0;
  assert_int_equal(grt_exec_get_device(exec, &dev), GRT_OK);
  assert_int_equal(grt_device_malloc(dev, 4096, &p), GRT_OK);
  assert_int_equal(grt_memset_async(pt, p, 7, 4096), GRT_OK);
  grt_stream_id id = 0;
  assert_int_equal(grt_stream_get_id(a, &id), GRT_OK);
  grt_stream_ops ops;
  assert_int_equal(grt_exec_stream_ops(exec, &ops), GRT_OK);
  uint64_t hook_id = 0;
  CREATE(sw, hook_id, ops.record_event(ops.ctx, id, &hook_id));
  grt_event *hook_ev = (grt_event *)(uintptr_t)hook_id; /* the exec's ids are its events */
  assert_int_equal(grt_stream_wait_event(a, hook_ev), GRT_OK);
  assert_int_equal(grt_event_synchronize(e2), GRT_OK);
  assert_int_equal(grt_exec_legacy_stream(exec, &legacy), GRT_OK);
  assert_int_equal(grt_launch_kernel(legacy, &k), GRT_OK);
  assert_int_equal(grt_exec_synchronize(exec), GRT_OK);
  assert_int_equal(counter, 4);
  assert_int_equal(ops.event_query(ops.ctx, hook_id), 1);
  ops.event_destroy(ops.ctx, hook_id);
  assert_int_equal(grt_event_query(hook_ev), GRT_ERR_INVALID_HANDLE);
  assert_int_equal(grt_device_free(dev, p), GRT_OK);
  assert_int_equal(grt_event_destroy(e1), GRT_OK);
  assert_int_equal(grt_event_destroy(e2), GRT_OK);
  assert_int_equal(grt_user_event_destroy(u), GRT_OK);
  assert_int_equal(grt_stream_destroy(a), GRT_OK);
  assert_int_equal(grt_stream_destroy(b), GRT_OK);
  assert_int_equal(grt_stream_destroy(c), GRT_OK);
}

static void config(grt_exec_config *cfg, grt_clock_kind clock) {
  grt_exec_config_default(cfg);
  cfg->clock = clock;
  cfg->device_capacity = 16 * GRT_MiB;
  cfg->compute_slots = 2;
  cfg->host_slots = 1;
}

/* Fails the nth creation of `kind` (from exec creation) for n = 1, 2, ...
 * until a run sees no fault; returns how many creations were swept. */
static unsigned sweep_kind(grt_clock_kind clock, grt_exec_fault kind) {
  for (uint64_t n = 1;; n++) {
    grt_exec_config cfg;
    config(&cfg, clock);
    uint64_t *at = kind == GRT_EXEC_FAULT_STREAM_CREATE  ? &cfg.fail_stream_create_at
                   : kind == GRT_EXEC_FAULT_EVENT_CREATE ? &cfg.fail_event_create_at
                                                         : &cfg.fail_user_event_create_at;
    *at = n;
    sweep sw = {NULL, kind, 0};
    assert_int_equal(grt_exec_create(&cfg, &sw.exec), GRT_OK);
    workload(&sw);
    uint64_t fired = 99;
    assert_int_equal(grt_exec_injected_failures(sw.exec, kind, &fired), GRT_OK);
    assert_int_equal(fired, sw.faults);
    assert_int_equal(grt_exec_destroy(sw.exec), GRT_OK);
    if (!sw.faults) return (unsigned)(n - 1);
    assert_true(n < 100);
  }
}

static void test_sweep_streams_events(void **state) {
  (void)state;
  for (int c = 1; c >= 0; c--) {
    grt_clock_kind clock = c ? GRT_CLOCK_VIRTUAL : GRT_CLOCK_THREADS;
    assert_int_equal(sweep_kind(clock, GRT_EXEC_FAULT_STREAM_CREATE), 4); /* a, b, c, per-thread */
    assert_int_equal(sweep_kind(clock, GRT_EXEC_FAULT_EVENT_CREATE), 3);  /* e1, e2, the hook's */
    assert_int_equal(sweep_kind(clock, GRT_EXEC_FAULT_USER_EVENT_CREATE), 1);
  }
}

/* Threads clock: the nth worker thread of grt_exec_create fails; the workers
 * already started are joined, nothing leaks, and a create without the fault
 * then works. Virtual clock: no workers, so the field never fires. */
static void test_sweep_threads(void **state) {
  (void)state;
  unsigned swept = 0;
  for (uint64_t n = 1;; n++) {
    grt_exec_config cfg;
    config(&cfg, GRT_CLOCK_THREADS);
    cfg.fail_thread_create_at = n;
    grt_exec *exec = (grt_exec *)&cfg; /* must be reset to NULL on failure */
    grt_status st = grt_exec_create(&cfg, &exec);
    if (st == GRT_OK) {
      sweep sw = {exec, GRT_EXEC_FAULT_THREAD_CREATE, 0};
      workload(&sw);
      assert_int_equal(grt_exec_destroy(exec), GRT_OK);
      break;
    }
    assert_int_equal(st, GRT_ERR_FAULT_INJECTED);
    assert_null(exec);
    swept++;
    cfg.fail_thread_create_at = 0;
    assert_int_equal(grt_exec_create(&cfg, &exec), GRT_OK);
    sweep sw = {exec, GRT_EXEC_FAULT_THREAD_CREATE, 0};
    workload(&sw);
    assert_int_equal(grt_exec_destroy(exec), GRT_OK);
    assert_true(n < 100);
  }
  assert_int_equal(swept, 2 + 1 + 1 + 1); /* compute 2, H2D, D2H, host 1 */
  grt_exec_config cfg;
  config(&cfg, GRT_CLOCK_VIRTUAL);
  cfg.fail_thread_create_at = 1;
  grt_exec *exec = NULL;
  assert_int_equal(grt_exec_create(&cfg, &exec), GRT_OK);
  assert_int_equal(grt_exec_destroy(exec), GRT_OK);
}

/* The API form: armed from now, one-shot, disarmed by 0; argument checks. */
static void test_inject_api(void **state) {
  (void)state;
  for (int c = 1; c >= 0; c--) {
    grt_exec_config cfg;
    config(&cfg, c ? GRT_CLOCK_VIRTUAL : GRT_CLOCK_THREADS);
    grt_exec *exec = NULL;
    assert_int_equal(grt_exec_create(&cfg, &exec), GRT_OK);
    uint64_t n = 0;
    assert_int_equal(grt_exec_inject_failure(NULL, GRT_EXEC_FAULT_EVENT_CREATE, 1), GRT_ERR_INVALID_ARG);
    assert_int_equal(grt_exec_inject_failure(exec, GRT_EXEC_FAULT_COUNT, 1), GRT_ERR_INVALID_ARG);
    assert_int_equal(grt_exec_inject_failure(exec, GRT_EXEC_FAULT_THREAD_CREATE, 1), GRT_ERR_UNSUPPORTED);
    assert_int_equal(grt_exec_injected_failures(exec, GRT_EXEC_FAULT_EVENT_CREATE, NULL), GRT_ERR_INVALID_ARG);
    assert_int_equal(grt_exec_injected_failures(NULL, GRT_EXEC_FAULT_EVENT_CREATE, &n), GRT_ERR_INVALID_ARG);

    grt_event *e[3] = {NULL, NULL, NULL};
    assert_int_equal(grt_exec_inject_failure(exec, GRT_EXEC_FAULT_EVENT_CREATE, 2), GRT_OK);
    assert_int_equal(grt_event_create(exec, 0, &e[0]), GRT_OK);
    assert_int_equal(grt_event_create(exec, 0, &e[1]), GRT_ERR_FAULT_INJECTED);
    assert_null(e[1]);
    assert_int_equal(grt_event_create(exec, 0, &e[1]), GRT_OK);
    assert_int_equal(grt_exec_injected_failures(exec, GRT_EXEC_FAULT_EVENT_CREATE, &n), GRT_OK);
    assert_int_equal(n, 1);
    /* armed then disarmed: nothing fails */
    assert_int_equal(grt_exec_inject_failure(exec, GRT_EXEC_FAULT_EVENT_CREATE, 1), GRT_OK);
    assert_int_equal(grt_exec_inject_failure(exec, GRT_EXEC_FAULT_EVENT_CREATE, 0), GRT_OK);
    assert_int_equal(grt_event_create(exec, 0, &e[2]), GRT_OK);

    grt_stream *s = NULL;
    grt_user_event *u = NULL;
    assert_int_equal(grt_exec_inject_failure(exec, GRT_EXEC_FAULT_STREAM_CREATE, 1), GRT_OK);
    assert_int_equal(grt_stream_create(exec, 0, 0, &s), GRT_ERR_FAULT_INJECTED);
    assert_null(s);
    assert_int_equal(grt_exec_inject_failure(exec, GRT_EXEC_FAULT_USER_EVENT_CREATE, 1), GRT_OK);
    assert_int_equal(grt_user_event_create(exec, NULL, &u), GRT_ERR_FAULT_INJECTED);
    assert_null(u);
    /* a failed creation left no child behind: destroy is not BUSY once the real ones go */
    for (int i = 0; i < 3; i++) assert_int_equal(grt_event_destroy(e[i]), GRT_OK);
    assert_int_equal(grt_exec_destroy(exec), GRT_OK);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_sweep_streams_events),
      cmocka_unit_test(test_sweep_threads),
      cmocka_unit_test(test_inject_api),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
