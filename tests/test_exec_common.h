/* test_exec_common.h — helpers shared by the tests/test_exec_*.c executables.
 * Every semantic test runs once per clock: cmocka passes the clock as the
 * test's initial state (cmocka_unit_test_prestate). The virtual clock goes
 * first: a logic error fails there at once, deterministically, where the
 * threads clock might block until the test's timeout. */
#ifndef GRT_TEST_EXEC_COMMON_H
#define GRT_TEST_EXEC_COMMON_H

#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "gpurt/exec.h"

static grt_clock_kind clock_threads = GRT_CLOCK_THREADS;
static grt_clock_kind clock_virtual = GRT_CLOCK_VIRTUAL;

#define BOTH_CLOCKS(fn) cmocka_unit_test_prestate(fn, &clock_virtual), cmocka_unit_test_prestate(fn, &clock_threads)

static inline grt_clock_kind clock_of(void **state) { return *(grt_clock_kind *)*state; }

static inline grt_exec *make_exec(grt_clock_kind clock, int timeline) {
  grt_exec_config cfg;
  grt_exec_config_default(&cfg);
  cfg.clock = clock;
  cfg.device_capacity = 16 * GRT_MiB;
  cfg.record_timeline = timeline;
  grt_exec *exec = NULL;
  assert_int_equal(grt_exec_create(&cfg, &exec), GRT_OK);
  return exec;
}

static inline grt_stream *make_stream(grt_exec *exec, unsigned flags, const char *name) {
  grt_stream *s = NULL;
  assert_int_equal(grt_stream_create(exec, flags, 0, &s), GRT_OK);
  if (name) assert_int_equal(grt_stream_set_name(s, name), GRT_OK);
  return s;
}

/* An order log that kernel bodies append to; bodies of one exec may run on
 * several threads, so the cursor is atomic. */
typedef struct order_log {
  _Atomic int n;
  int items[256];
} order_log;

typedef struct log_arg {
  order_log *log;
  int id;
} log_arg;

static inline void log_body(void *p) {
  log_arg *a = p;
  int i = atomic_fetch_add(&a->log->n, 1);
  if (i < 256) a->log->items[i] = a->id;
}

static inline void launch_logged(grt_stream *s, log_arg *a, uint64_t ns) {
  grt_kernel_desc d = {log_body, a, ns, GRT_ENGINE_COMPUTE, NULL};
  assert_int_equal(grt_launch_kernel(s, &d), GRT_OK);
}

/* Position of id in the log, -1 if absent. */
static inline int log_pos(order_log *log, int id) {
  int n = atomic_load(&log->n);
  for (int i = 0; i < n && i < 256; i++)
    if (log->items[i] == id) return i;
  return -1;
}

#endif
