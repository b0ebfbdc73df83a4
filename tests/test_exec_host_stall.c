/* test_exec_host_stall.c — no hang, ever: a host wait that nothing can end.
 *
 * The virtual clock takes the host to be one thread, so a wait for what only
 * a host signal could bring is GRT_ERR_DEADLOCK at once. Under threads it is
 * one only when cfg.host_threads says how many application threads there
 * are and all of them wait with nothing queued or running able to release
 * them; cfg.wait_timeout_ns bounds any wait on either clock (GRT_ERR_NOT_READY,
 * nothing else changed). Every wait here runs under a timeout or the
 * watchdog (alarm), so a bug fails the test instead of hanging it. */
#include <pthread.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "test_exec_common.h"

#define WATCHDOG_S 30
#define BOUND_NS (10ull * 1000000000ull) /* a wait that should end long before */

static grt_exec *make(grt_clock_kind clock, unsigned host_threads, uint64_t timeout_ns) {
  alarm(WATCHDOG_S); /* the default action ends the process: a hang fails the test */
  grt_exec_config cfg;
  grt_exec_config_default(&cfg);
  cfg.clock = clock;
  cfg.device_capacity = 16 * GRT_MiB;
  cfg.host_threads = host_threads;
  cfg.wait_timeout_ns = timeout_ns;
  grt_exec *exec = NULL;
  assert_int_equal(grt_exec_create(&cfg, &exec), GRT_OK);
  return exec;
}

static void done(grt_exec *exec) {
  assert_int_equal(grt_exec_destroy(exec), GRT_OK);
  alarm(0);
}

static void expect_error(grt_exec *exec, grt_status want, const char *const *needles) {
  char msg[1024] = "";
  assert_int_equal(grt_exec_get_error(exec, msg, sizeof msg), want);
  print_message("%s\n", msg);
  for (int i = 0; needles[i]; i++)
    if (!strstr(msg, needles[i])) fail_msg("'%s' not in: %s", needles[i], msg);
}

static void count_body(void *p) { atomic_fetch_add((_Atomic int *)p, 1); }

static uint64_t now_of(grt_exec *exec) {
  uint64_t t = 0;
  assert_int_equal(grt_exec_now_ns(exec, &t), GRT_OK);
  return t;
}

/* The only host thread waits for a user event nothing will signal. */
static void test_host_waits_alone(void **state) {
  grt_exec *exec = make(clock_of(state), 1, BOUND_NS);
  grt_user_event *u;
  assert_int_equal(grt_user_event_create(exec, "u", &u), GRT_OK);
  assert_int_equal(grt_user_event_signal(u, 1), GRT_OK);
  assert_int_equal(grt_user_event_wait(u, 2), GRT_ERR_DEADLOCK);
  static const char *const n[] = {"a host thread waits for user event 'u' >= 2 (value 1)",
                                  "no work is pending: nothing will signal it", NULL};
  expect_error(exec, GRT_ERR_DEADLOCK, n);
  assert_int_equal(grt_user_event_wait(u, 2), GRT_ERR_DEADLOCK); /* sticky */
  assert_int_equal(grt_user_event_destroy(u), GRT_OK);
  done(exec);
}

/* A synchronize on a stream held by a user event only the host could raise:
 * the stall waits for the work still running on another stream, then names
 * the stream and the user event. */
static void test_sync_on_gated_stream(void **state) {
  grt_exec *exec = make(clock_of(state), 1, BOUND_NS);
  grt_stream *s = make_stream(exec, GRT_STREAM_NON_BLOCKING, "s");
  grt_stream *t = make_stream(exec, GRT_STREAM_NON_BLOCKING, "t");
  grt_user_event *g;
  assert_int_equal(grt_user_event_create(exec, "g", &g), GRT_OK);
  assert_int_equal(grt_stream_wait_user_event(s, g, 1), GRT_OK);
  grt_kernel_desc k = {NULL, NULL, 1000, GRT_ENGINE_COMPUTE, NULL};
  assert_int_equal(grt_launch_kernel(s, &k), GRT_OK);
  grt_kernel_desc busy = {NULL, NULL, 2000000, GRT_ENGINE_COMPUTE, "busy"};
  assert_int_equal(grt_launch_kernel(t, &busy), GRT_OK);
  assert_int_equal(grt_stream_synchronize(s), GRT_ERR_DEADLOCK);
  static const char *const n[] = {"work on stream 's' waits for user event 'g' >= 1", NULL};
  expect_error(exec, GRT_ERR_DEADLOCK, n);
  /* The kernel on t was running: the stall was declared only after it ended. */
  if (clock_of(state) == GRT_CLOCK_VIRTUAL) assert_int_equal(now_of(exec), 2000000);
  else assert_true(now_of(exec) >= 2000000);
  assert_int_equal(grt_user_event_destroy(g), GRT_OK);
  assert_int_equal(grt_stream_destroy(s), GRT_OK);
  assert_int_equal(grt_stream_destroy(t), GRT_OK);
  done(exec);
}

typedef struct sig_arg {
  grt_user_event *u;
  grt_status st;
} sig_arg;

static void signal_body(void *p) {
  sig_arg *a = p;
  a->st = grt_user_event_signal(a->u, 1);
}

/* Not a false alarm: a host function queued behind a kernel will signal, so
 * the host's wait is not stalled while that work is pending. */
static void test_queued_host_func_signals(void **state) {
  grt_exec *exec = make(clock_of(state), 1, BOUND_NS);
  grt_stream *s = make_stream(exec, GRT_STREAM_NON_BLOCKING, "s");
  grt_stream *t = make_stream(exec, GRT_STREAM_NON_BLOCKING, "t");
  grt_user_event *g;
  assert_int_equal(grt_user_event_create(exec, "g", &g), GRT_OK);
  assert_int_equal(grt_stream_wait_user_event(s, g, 1), GRT_OK);
  grt_kernel_desc k = {NULL, NULL, 1000000, GRT_ENGINE_COMPUTE, NULL};
  assert_int_equal(grt_launch_kernel(t, &k), GRT_OK);
  sig_arg a = {g, GRT_ERR_INTERNAL};
  assert_int_equal(grt_launch_host_func(t, signal_body, &a), GRT_OK);
  assert_int_equal(grt_stream_synchronize(s), GRT_OK);
  assert_int_equal(grt_stream_synchronize(t), GRT_OK);
  assert_int_equal(a.st, GRT_OK);
  assert_int_equal(grt_user_event_wait(g, 1), GRT_OK);
  assert_int_equal(grt_exec_get_error(exec, NULL, 0), GRT_OK);
  assert_int_equal(grt_exec_synchronize(exec), GRT_OK);
  assert_int_equal(grt_user_event_destroy(g), GRT_OK);
  assert_int_equal(grt_stream_destroy(s), GRT_OK);
  assert_int_equal(grt_stream_destroy(t), GRT_OK);
  done(exec);
}

typedef struct peer {
  grt_user_event *u;
  uint64_t v;
  int signal; /* 1: nap, then signal u to v; 0: wait for u >= v */
  grt_status st;
} peer;

static void *peer_main(void *p) {
  peer *a = p;
  if (a->signal) {
    struct timespec nap = {0, 20 * 1000000};
    nanosleep(&nap, NULL); /* outside the exec: the main thread waits meanwhile */
    a->st = grt_user_event_signal(a->u, a->v);
  } else {
    a->st = grt_user_event_wait(a->u, a->v);
  }
  return NULL;
}

/* Threads only (the virtual clock takes the host to be one thread): with two
 * host threads, one waiting while the other is busy outside the exec is not
 * a deadlock; the other's signal ends the wait. */
static void test_other_thread_signals_later(void **state) {
  (void)state;
  grt_exec *exec = make(GRT_CLOCK_THREADS, 2, BOUND_NS);
  grt_user_event *u;
  assert_int_equal(grt_user_event_create(exec, "later", &u), GRT_OK);
  peer b = {u, 3, 1, GRT_ERR_INTERNAL};
  pthread_t th;
  assert_int_equal(pthread_create(&th, NULL, peer_main, &b), 0);
  assert_int_equal(grt_user_event_wait(u, 3), GRT_OK);
  assert_int_equal(pthread_join(th, NULL), 0);
  assert_int_equal(b.st, GRT_OK);
  assert_int_equal(grt_exec_get_error(exec, NULL, 0), GRT_OK);
  assert_int_equal(grt_user_event_destroy(u), GRT_OK);
  done(exec);
}

/* Threads only: both host threads wait, each for a user event nothing will
 * signal: the second to wait finds the stall and both waits return it. */
static void test_all_threads_wait(void **state) {
  (void)state;
  grt_exec *exec = make(GRT_CLOCK_THREADS, 2, BOUND_NS);
  grt_user_event *u1, *u2;
  assert_int_equal(grt_user_event_create(exec, "u1", &u1), GRT_OK);
  assert_int_equal(grt_user_event_create(exec, "u2", &u2), GRT_OK);
  peer b = {u2, 7, 0, GRT_ERR_INTERNAL};
  pthread_t th;
  assert_int_equal(pthread_create(&th, NULL, peer_main, &b), 0);
  assert_int_equal(grt_user_event_wait(u1, 5), GRT_ERR_DEADLOCK);
  assert_int_equal(pthread_join(th, NULL), 0);
  assert_int_equal(b.st, GRT_ERR_DEADLOCK);
  static const char *const n[] = {"every host thread (host_threads = 2)", "user event 'u1' >= 5 (value 0)",
                                  "user event 'u2' >= 7 (value 0)", NULL};
  expect_error(exec, GRT_ERR_DEADLOCK, n);
  assert_int_equal(grt_user_event_destroy(u1), GRT_OK);
  assert_int_equal(grt_user_event_destroy(u2), GRT_OK);
  done(exec);
}

/* Threads, host_threads unknown: a wait on a gated stream gives up after the
 * timeout with GRT_ERR_NOT_READY and changes nothing: the work still runs
 * once the gate opens. (Virtual would say GRT_ERR_DEADLOCK at once: its host
 * is the one waiting thread.) */
static void test_timeout_changes_nothing(void **state) {
  (void)state;
  const uint64_t timeout = 20000000; /* 20 ms */
  grt_exec *exec = make(GRT_CLOCK_THREADS, 0, timeout);
  grt_stream *s = make_stream(exec, GRT_STREAM_NON_BLOCKING, "s");
  grt_user_event *g;
  grt_event *e;
  _Atomic int ran = 0;
  assert_int_equal(grt_user_event_create(exec, "g", &g), GRT_OK);
  assert_int_equal(grt_event_create(exec, GRT_EVENT_BLOCKING_SYNC, &e), GRT_OK);
  assert_int_equal(grt_stream_wait_user_event(s, g, 1), GRT_OK);
  grt_kernel_desc k = {count_body, &ran, 1000, GRT_ENGINE_COMPUTE, NULL};
  assert_int_equal(grt_launch_kernel(s, &k), GRT_OK);
  assert_int_equal(grt_event_record(e, s), GRT_OK);
  uint64_t t0 = now_of(exec);
  assert_int_equal(grt_stream_synchronize(s), GRT_ERR_NOT_READY);
  assert_true(now_of(exec) - t0 >= timeout);
  assert_int_equal(grt_event_synchronize(e), GRT_ERR_NOT_READY);
  assert_int_equal(grt_exec_synchronize(exec), GRT_ERR_NOT_READY);
  assert_int_equal(grt_user_event_wait(g, 1), GRT_ERR_NOT_READY);
  assert_int_equal(grt_exec_get_error(exec, NULL, 0), GRT_OK);
  assert_int_equal(grt_stream_query(s), GRT_ERR_NOT_READY);
  assert_int_equal(atomic_load(&ran), 0);
  assert_int_equal(grt_user_event_signal(g, 1), GRT_OK);
  grt_status st;
  for (int i = 0; (st = grt_stream_synchronize(s)) == GRT_ERR_NOT_READY && i < 100; i++) {
  }
  assert_int_equal(st, GRT_OK);
  assert_int_equal(grt_event_query(e), GRT_OK);
  assert_int_equal(atomic_load(&ran), 1);
  assert_int_equal(grt_event_destroy(e), GRT_OK);
  assert_int_equal(grt_user_event_destroy(g), GRT_OK);
  assert_int_equal(grt_stream_destroy(s), GRT_OK);
  done(exec);
}

/* Virtual: the timeout is virtual time, exact. A 3000 ns kernel with a
 * 1000 ns timeout: each wait gives up 1000 ns later with the clock at its
 * deadline, and the third sees the kernel end at its deadline. exec_destroy's
 * drain is bounded the same way. */
static void test_virtual_timeout_exact(void **state) {
  (void)state;
  grt_exec *exec = make(GRT_CLOCK_VIRTUAL, 0, 1000);
  grt_stream *s = make_stream(exec, GRT_STREAM_NON_BLOCKING, "s");
  grt_event *e;
  assert_int_equal(grt_event_create(exec, 0, &e), GRT_OK);
  grt_kernel_desc k = {NULL, NULL, 3000, GRT_ENGINE_COMPUTE, NULL};
  assert_int_equal(grt_launch_kernel(s, &k), GRT_OK);
  assert_int_equal(grt_event_record(e, s), GRT_OK);
  assert_int_equal(grt_stream_synchronize(s), GRT_ERR_NOT_READY);
  assert_int_equal(now_of(exec), 1000);
  assert_int_equal(grt_event_synchronize(e), GRT_ERR_NOT_READY);
  assert_int_equal(now_of(exec), 2000);
  assert_int_equal(grt_stream_query(s), GRT_ERR_NOT_READY);
  assert_int_equal(grt_exec_synchronize(exec), GRT_OK);
  assert_int_equal(now_of(exec), 3000);
  assert_int_equal(grt_exec_get_error(exec, NULL, 0), GRT_OK);
  /* Work left on a destroyed stream: destroy's drain times out, then ends. */
  assert_int_equal(grt_launch_kernel(s, &k), GRT_OK);
  assert_int_equal(grt_stream_destroy(s), GRT_OK);
  assert_int_equal(grt_event_destroy(e), GRT_OK);
  assert_int_equal(grt_exec_destroy(exec), GRT_ERR_NOT_READY);
  assert_int_equal(now_of(exec), 4000);
  assert_int_equal(grt_exec_destroy(exec), GRT_ERR_NOT_READY);
  assert_int_equal(now_of(exec), 5000);
  done(exec); /* the kernel ends at 6000, the drain's deadline */
}

/* Threads: a wait with a timeout is bounded however long the work; the
 * kernel (1 s) cannot end within a 20 ms wait, and destroy retries until the
 * drain is done. */
static void test_threads_destroy_bounded(void **state) {
  (void)state;
  grt_exec *exec = make(GRT_CLOCK_THREADS, 0, 20000000);
  grt_stream *s = make_stream(exec, GRT_STREAM_NON_BLOCKING, "s");
  grt_kernel_desc k = {NULL, NULL, 1000000000ull, GRT_ENGINE_COMPUTE, "long"};
  assert_int_equal(grt_launch_kernel(s, &k), GRT_OK);
  assert_int_equal(grt_stream_destroy(s), GRT_OK);
  grt_status st = grt_exec_destroy(exec);
  assert_int_equal(st, GRT_ERR_NOT_READY);
  for (int i = 0; st == GRT_ERR_NOT_READY && i < 500; i++) st = grt_exec_destroy(exec);
  assert_int_equal(st, GRT_OK);
  alarm(0);
}

typedef struct hf_wait {
  grt_user_event *u;
  grt_status st;
} hf_wait;

static void hf_wait_body(void *p) {
  hf_wait *a = p;
  a->st = grt_user_event_wait(a->u, 1);
}

/* Threads: a host function's wait is bounded too; it returns
 * GRT_ERR_NOT_READY and the stream goes on. */
static void test_host_func_wait_bounded(void **state) {
  (void)state;
  grt_exec *exec = make(GRT_CLOCK_THREADS, 0, 20000000);
  grt_stream *s = make_stream(exec, GRT_STREAM_NON_BLOCKING, "s");
  grt_user_event *u;
  assert_int_equal(grt_user_event_create(exec, "host-only", &u), GRT_OK);
  hf_wait a = {u, GRT_ERR_INTERNAL};
  assert_int_equal(grt_launch_host_func(s, hf_wait_body, &a), GRT_OK);
  grt_status st;
  for (int i = 0; (st = grt_stream_synchronize(s)) == GRT_ERR_NOT_READY && i < 100; i++) {
  }
  assert_int_equal(st, GRT_OK);
  assert_int_equal(a.st, GRT_ERR_NOT_READY);
  assert_int_equal(grt_exec_get_error(exec, NULL, 0), GRT_OK);
  assert_int_equal(grt_user_event_destroy(u), GRT_OK);
  assert_int_equal(grt_stream_destroy(s), GRT_OK);
  done(exec);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      BOTH_CLOCKS(test_host_waits_alone),
      BOTH_CLOCKS(test_sync_on_gated_stream),
      BOTH_CLOCKS(test_queued_host_func_signals),
      cmocka_unit_test(test_other_thread_signals_later),
      cmocka_unit_test(test_all_threads_wait),
      cmocka_unit_test(test_timeout_changes_nothing),
      cmocka_unit_test(test_virtual_timeout_exact),
      cmocka_unit_test(test_threads_destroy_bounded),
      cmocka_unit_test(test_host_func_wait_bounded),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
