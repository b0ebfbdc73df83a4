/* test_exec_capture_unsafe.c — CUDA's "potentially unsafe" calls during a
 * stream capture, under both clocks: query and synchronize of a stream or
 * event outside the capture and synchronous device malloc/free fail with
 * GRT_ERR_CAPTURE_UNSUPPORTED where the capture's mode forbids them (this
 * thread's GLOBAL or THREAD_LOCAL capture, another thread's GLOBAL one) and
 * invalidate that capture; RELAXED allows them. Legacy-stream use while a
 * blocking stream captures fails with GRT_ERR_CAPTURE_IMPLICIT. The calling
 * thread's own mode (grt_exec_thread_exchange_capture_mode) narrows which
 * captures forbid it, per exec and per thread. A refused call
 * moves nothing else: on the virtual clock the time and the work stand where
 * they were (exact figures). */
#include <pthread.h>
#include <stdbool.h>
#include <string.h>

#include "test_exec_common.h"

typedef struct fixture {
  grt_exec *exec;
  grt_stream *s, *t; /* s captures; t is outside the capture */
  grt_event *before; /* recorded on t before the capture */
  order_log log;
  log_arg a[4];
  bool virt;
} fixture;

/* t holds a 1000 ns kernel (id 1) and `before` after it; s captures in mode m
 * (its kernel, id 0, becomes a node). */
static void setup(fixture *f, grt_clock_kind clock, unsigned flags, grt_capture_mode m) {
  memset(f, 0, sizeof *f);
  f->virt = clock == GRT_CLOCK_VIRTUAL;
  f->exec = make_exec(clock, 0);
  f->s = make_stream(f->exec, flags, "origin");
  f->t = make_stream(f->exec, flags, "outside");
  for (int i = 0; i < 4; i++) f->a[i] = (log_arg){&f->log, i};
  assert_int_equal(grt_event_create(f->exec, 0, &f->before), GRT_OK);
  launch_logged(f->t, &f->a[1], 1000);
  assert_int_equal(grt_event_record(f->before, f->t), GRT_OK);
  assert_int_equal(grt_stream_begin_capture(f->s, m), GRT_OK);
  launch_logged(f->s, &f->a[0], 10);
}

static void teardown(fixture *f) {
  assert_int_equal(grt_exec_synchronize(f->exec), GRT_OK);
  assert_int_equal(grt_event_destroy(f->before), GRT_OK);
  assert_int_equal(grt_stream_destroy(f->s), GRT_OK);
  assert_int_equal(grt_stream_destroy(f->t), GRT_OK);
  assert_int_equal(grt_exec_destroy(f->exec), GRT_OK);
}

static grt_capture_status status_of(grt_stream *s) {
  grt_capture_status cs;
  assert_int_equal(grt_stream_capture_status(s, &cs), GRT_OK);
  return cs;
}

static uint64_t now_of(grt_exec *exec) {
  uint64_t now;
  assert_int_equal(grt_exec_now_ns(exec, &now), GRT_OK);
  return now;
}

/* Ends f's capture: a graph of one node when it was valid, else no graph. */
static void end_capture(fixture *f, bool valid) {
  grt_graph *g = (grt_graph *)&g;
  assert_int_equal(grt_stream_end_capture(f->s, &g), valid ? GRT_OK : GRT_ERR_CAPTURE_INVALIDATED);
  if (!valid) {
    assert_null(g);
    return;
  }
  size_t n;
  assert_int_equal(grt_graph_node_count(g, &n), GRT_OK);
  assert_int_equal(n, 1);
  assert_int_equal(grt_graph_destroy(g), GRT_OK);
}

typedef enum call { C_STREAM_QUERY, C_STREAM_SYNC, C_EVENT_QUERY, C_EVENT_SYNC, C_MALLOC, C_COUNT } call;

static grt_status unsafe_call(fixture *f, call c) {
  grt_devptr p;
  grt_status st;
  switch (c) {
    case C_STREAM_QUERY: return grt_stream_query(f->t);
    case C_STREAM_SYNC: return grt_stream_synchronize(f->t);
    case C_EVENT_QUERY: return grt_event_query(f->before);
    case C_EVENT_SYNC: return grt_event_synchronize(f->before);
    case C_MALLOC:
      if (!(st = grt_exec_device_malloc(f->exec, 4096, &p))) st = grt_exec_device_free(f->exec, p);
      return st;
    default: return GRT_ERR_INTERNAL;
  }
}

/* What an allowed call returns: a query of t's pending kernel is NOT_READY on
 * the virtual clock (nothing ran) and either answer under threads. */
static void expect_allowed(fixture *f, call c, grt_status st) {
  bool query = c == C_STREAM_QUERY || c == C_EVENT_QUERY;
  if (query && f->virt) assert_int_equal(st, GRT_ERR_NOT_READY);
  else if (query) assert_true(st == GRT_OK || st == GRT_ERR_NOT_READY);
  else assert_int_equal(st, GRT_OK);
  if (f->virt) assert_int_equal(now_of(f->exec), c == C_STREAM_SYNC || c == C_EVENT_SYNC ? 1000 : 0);
}

/* This thread's capture: GLOBAL and THREAD_LOCAL forbid every unsafe call,
 * RELAXED none. A refused call waits for nothing and runs nothing. */
static void test_unsafe_calls_this_thread(void **state) {
  for (int m = 0; m < 3; m++)
    for (int c = 0; c < C_COUNT; c++) {
      fixture f;
      setup(&f, clock_of(state), GRT_STREAM_NON_BLOCKING, (grt_capture_mode)m);
      grt_status st = unsafe_call(&f, (call)c);
      print_message("mode %d, call %d: %s\n", m, c, grt_status_name(st));
      if (m == GRT_CAPTURE_RELAXED) {
        expect_allowed(&f, (call)c, st);
        assert_int_equal(status_of(f.s), GRT_CAPTURE_STATUS_ACTIVE);
        end_capture(&f, true);
      } else {
        assert_int_equal(st, GRT_ERR_CAPTURE_UNSUPPORTED);
        assert_int_equal(status_of(f.s), GRT_CAPTURE_STATUS_INVALIDATED);
        if (f.virt) {
          assert_int_equal(now_of(f.exec), 0); /* the refused sync did not wait */
          assert_int_equal(atomic_load(&f.log.n), 0);
        }
        end_capture(&f, false);
      }
      /* t's work is untouched; the captured kernel never ran. */
      assert_int_equal(grt_event_synchronize(f.before), GRT_OK);
      if (f.virt) assert_int_equal(now_of(f.exec), 1000);
      assert_int_equal(atomic_load(&f.log.n), 1);
      assert_int_equal(f.log.items[0], 1);
      teardown(&f);
    }
}

typedef struct other {
  fixture *f;
  call c;
  grt_status st;
} other;

static void *other_main(void *p) {
  other *o = p;
  o->st = unsafe_call(o->f, o->c);
  return NULL;
}

static grt_status from_other_thread(fixture *f, call c) {
  other o = {f, c, GRT_ERR_INTERNAL};
  pthread_t th;
  assert_int_equal(pthread_create(&th, NULL, other_main, &o), 0);
  pthread_join(th, NULL);
  return o.st;
}

/* Another thread's capture forbids only in GLOBAL mode. */
static void test_unsafe_calls_other_thread(void **state) {
  for (int m = 0; m < 3; m++)
    for (int c = 0; c < C_COUNT; c++) {
      fixture f;
      setup(&f, clock_of(state), GRT_STREAM_NON_BLOCKING, (grt_capture_mode)m);
      grt_status st = from_other_thread(&f, (call)c);
      print_message("mode %d, call %d from another thread: %s\n", m, c, grt_status_name(st));
      bool refused = m == GRT_CAPTURE_GLOBAL;
      if (refused) assert_int_equal(st, GRT_ERR_CAPTURE_UNSUPPORTED);
      else expect_allowed(&f, (call)c, st);
      assert_int_equal(status_of(f.s), refused ? GRT_CAPTURE_STATUS_INVALIDATED : GRT_CAPTURE_STATUS_ACTIVE);
      end_capture(&f, !refused);
      teardown(&f);
    }
}

/* Only the captures that forbid the call are invalidated: a thread's unsafe
 * call is refused by another thread's GLOBAL capture, not by its RELAXED one. */
static void test_only_forbidding_capture_invalidated(void **state) {
  fixture f;
  setup(&f, clock_of(state), GRT_STREAM_NON_BLOCKING, GRT_CAPTURE_RELAXED);
  grt_stream *u = make_stream(f.exec, GRT_STREAM_NON_BLOCKING, "global");
  assert_int_equal(grt_stream_begin_capture(u, GRT_CAPTURE_GLOBAL), GRT_OK);
  assert_int_equal(from_other_thread(&f, C_EVENT_QUERY), GRT_ERR_CAPTURE_UNSUPPORTED);
  assert_int_equal(status_of(u), GRT_CAPTURE_STATUS_INVALIDATED);
  assert_int_equal(status_of(f.s), GRT_CAPTURE_STATUS_ACTIVE);
  grt_graph *g;
  assert_int_equal(grt_stream_end_capture(u, &g), GRT_ERR_CAPTURE_INVALIDATED);
  expect_allowed(&f, C_EVENT_QUERY, from_other_thread(&f, C_EVENT_QUERY)); /* only the RELAXED one is left */
  end_capture(&f, true);
  assert_int_equal(grt_stream_destroy(u), GRT_OK);
  teardown(&f);
}

/* The exec's completion interface answers a layer below truthfully during a
 * capture: not an unsafe call, the capture goes on. */
static void test_stream_ops_query_not_unsafe(void **state) {
  fixture f;
  setup(&f, clock_of(state), GRT_STREAM_NON_BLOCKING, GRT_CAPTURE_GLOBAL);
  grt_stream_ops ops;
  assert_int_equal(grt_exec_stream_ops(f.exec, &ops), GRT_OK);
  grt_stream_id tid;
  assert_int_equal(grt_stream_get_id(f.t, &tid), GRT_OK);
  uint64_t ev;
  assert_int_equal(ops.record_event(ops.ctx, tid, &ev), GRT_OK);
  int done = ops.event_query(ops.ctx, ev);
  if (f.virt) assert_int_equal(done, 0);
  assert_int_equal(status_of(f.s), GRT_CAPTURE_STATUS_ACTIVE);
  end_capture(&f, true);
  ops.event_synchronize(ops.ctx, ev);
  assert_int_equal(ops.event_query(ops.ctx, ev), 1);
  ops.event_destroy(ops.ctx, ev);
  teardown(&f);
}

typedef enum legacy_use { L_QUERY, L_SYNC, L_KERNEL, L_RECORD, L_WAIT, L_COUNT } legacy_use;

static grt_status use_legacy(fixture *f, grt_stream *leg, legacy_use u) {
  grt_kernel_desc d = {log_body, &f->a[3], 0, GRT_ENGINE_COMPUTE, NULL};
  switch (u) {
    case L_QUERY: return grt_stream_query(leg);
    case L_SYNC: return grt_stream_synchronize(leg);
    case L_KERNEL: return grt_launch_kernel(leg, &d);
    case L_RECORD: return grt_event_record(f->before, leg);
    case L_WAIT: return grt_stream_wait_event(leg, f->before);
    default: return GRT_ERR_INTERNAL;
  }
}

/* A blocking stream captures: asking the legacy stream's capture status fails
 * (status unwritten, capture unharmed); any other use of it fails and
 * invalidates the capture, whatever the mode (not one of the mode's calls). */
static void test_legacy_implicit(void **state) {
  for (int m = 0; m < 3; m++)
    for (int u = 0; u < L_COUNT; u++) {
      fixture f;
      setup(&f, clock_of(state), GRT_STREAM_DEFAULT, (grt_capture_mode)m);
      grt_stream *leg;
      assert_int_equal(grt_exec_legacy_stream(f.exec, &leg), GRT_OK);
      grt_capture_status cs = (grt_capture_status)99;
      assert_int_equal(grt_stream_capture_status(leg, &cs), GRT_ERR_CAPTURE_IMPLICIT);
      assert_int_equal(cs, 99);
      assert_int_equal(status_of(f.s), GRT_CAPTURE_STATUS_ACTIVE);
      assert_int_equal(use_legacy(&f, leg, (legacy_use)u), GRT_ERR_CAPTURE_IMPLICIT);
      assert_int_equal(status_of(f.s), GRT_CAPTURE_STATUS_INVALIDATED);
      if (f.virt) assert_int_equal(now_of(f.exec), 0);
      end_capture(&f, false);
      assert_int_equal(status_of(leg), GRT_CAPTURE_STATUS_NONE);
      assert_int_equal(grt_stream_synchronize(leg), GRT_OK); /* usable again; the refused ops left nothing */
      assert_int_equal(grt_event_synchronize(f.before), GRT_OK);
      if (f.virt) assert_int_equal(now_of(f.exec), 1000);
      assert_int_equal(atomic_load(&f.log.n), 1);
      teardown(&f);
    }
}

/* Only non-blocking streams capture: the legacy stream is an ordinary stream
 * outside the capture (its status NONE; its query an unsafe call, allowed in
 * RELAXED mode). */
static void test_legacy_with_nonblocking_capture(void **state) {
  fixture f;
  setup(&f, clock_of(state), GRT_STREAM_NON_BLOCKING, GRT_CAPTURE_RELAXED);
  grt_stream *leg;
  assert_int_equal(grt_exec_legacy_stream(f.exec, &leg), GRT_OK);
  assert_int_equal(status_of(leg), GRT_CAPTURE_STATUS_NONE);
  assert_int_equal(grt_stream_query(leg), GRT_OK);
  assert_int_equal(status_of(f.s), GRT_CAPTURE_STATUS_ACTIVE);
  end_capture(&f, true);
  teardown(&f);
}

/* ---- the calling thread's capture interaction mode ---- */

static grt_capture_mode exchange(grt_exec *exec, grt_capture_mode m) {
  assert_int_equal(grt_exec_thread_exchange_capture_mode(exec, &m), GRT_OK);
  return m;
}

static void *first_exchange_main(void *p) {
  grt_exec *exec = p;
  grt_capture_mode m = exchange(exec, GRT_CAPTURE_RELAXED); /* then the thread ends with it set */
  return (void *)(uintptr_t)m;
}

static grt_capture_mode first_exchange_in_new_thread(grt_exec *exec) {
  pthread_t th;
  void *ret;
  assert_int_equal(pthread_create(&th, NULL, first_exchange_main, exec), 0);
  pthread_join(th, &ret);
  return (grt_capture_mode)(uintptr_t)ret;
}

/* Push and pop; a refused exchange changes nothing; the mode is this
 * thread's and this exec's: new threads (also one that may reuse an ended
 * thread's id) and another exec start at GLOBAL. */
static void test_exchange_push_pop(void **state) {
  grt_exec *exec = make_exec(clock_of(state), 0), *exec2 = make_exec(clock_of(state), 0);
  assert_int_equal(exchange(exec, GRT_CAPTURE_RELAXED), GRT_CAPTURE_GLOBAL);
  assert_int_equal(exchange(exec, GRT_CAPTURE_THREAD_LOCAL), GRT_CAPTURE_RELAXED);
  grt_capture_mode bad = (grt_capture_mode)7;
  assert_int_equal(grt_exec_thread_exchange_capture_mode(exec, &bad), GRT_ERR_INVALID_ARG);
  assert_int_equal(bad, 7);
  assert_int_equal(grt_exec_thread_exchange_capture_mode(exec, NULL), GRT_ERR_INVALID_ARG);
  bad = GRT_CAPTURE_RELAXED;
  assert_int_equal(grt_exec_thread_exchange_capture_mode(NULL, &bad), GRT_ERR_INVALID_ARG);
  assert_int_equal(bad, GRT_CAPTURE_RELAXED);
  for (int i = 0; i < 2; i++) assert_int_equal(first_exchange_in_new_thread(exec), GRT_CAPTURE_GLOBAL);
  assert_int_equal(exchange(exec2, GRT_CAPTURE_GLOBAL), GRT_CAPTURE_GLOBAL);
  assert_int_equal(exchange(exec, GRT_CAPTURE_GLOBAL), GRT_CAPTURE_THREAD_LOCAL); /* still this thread's */
  assert_int_equal(grt_exec_destroy(exec2), GRT_OK);
  assert_int_equal(grt_exec_destroy(exec), GRT_OK);
}

typedef struct moded {
  fixture *f;
  grt_capture_mode tm;
  call c;
  grt_status st;
} moded;

/* The call made under thread mode tm, which is then restored. */
static void *moded_call(void *p) {
  moded *m = p;
  grt_capture_mode prev = exchange(m->f->exec, m->tm);
  m->st = unsafe_call(m->f, m->c);
  assert_int_equal(exchange(m->f->exec, prev), m->tm);
  return NULL;
}

/* CUDA's table: a thread in mode tm is forbidden the unsafe calls by its own
 * capture unless that was begun RELAXED, and by another thread's capture
 * only when both are GLOBAL; a RELAXED thread by none. */
static bool forbidden(int cm, int other_thread, int tm) {
  if (tm == GRT_CAPTURE_RELAXED) return false;
  return other_thread ? tm == GRT_CAPTURE_GLOBAL && cm == GRT_CAPTURE_GLOBAL : cm != GRT_CAPTURE_RELAXED;
}

static void thread_mode_case(grt_clock_kind clock, int cm, int other_thread, int tm, call c) {
  fixture f;
  setup(&f, clock, GRT_STREAM_NON_BLOCKING, (grt_capture_mode)cm);
  moded m = {&f, (grt_capture_mode)tm, c, GRT_ERR_INTERNAL};
  if (other_thread) {
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, moded_call, &m), 0);
    pthread_join(th, NULL);
  } else {
    moded_call(&m);
  }
  bool refused = forbidden(cm, other_thread, tm);
  print_message("capture %d, %s thread in mode %d, call %d: %s\n", cm, other_thread ? "other" : "same", tm, c,
                grt_status_name(m.st));
  if (refused) assert_int_equal(m.st, GRT_ERR_CAPTURE_UNSUPPORTED);
  else expect_allowed(&f, c, m.st);
  assert_int_equal(status_of(f.s), refused ? GRT_CAPTURE_STATUS_INVALIDATED : GRT_CAPTURE_STATUS_ACTIVE);
  end_capture(&f, !refused);
  teardown(&f);
}

/* Every capture mode x caller (the capturing thread, another) x caller's
 * thread mode, for a query and a malloc: refused exactly where the table
 * says, and then the capture is invalidated; an allowed call leaves it going. */
static void test_thread_modes(void **state) {
  for (int cm = 0; cm < 3; cm++)
    for (int other_thread = 0; other_thread < 2; other_thread++)
      for (int tm = 0; tm < 3; tm++) {
        thread_mode_case(clock_of(state), cm, other_thread, tm, C_EVENT_QUERY);
        thread_mode_case(clock_of(state), cm, other_thread, tm, C_MALLOC);
      }
}

/* The mode does not reach the calls that always conflict with a capture:
 * a RELAXED thread still may not synchronize a capturing stream, nor use the
 * legacy stream while a blocking stream captures. */
static void test_relaxed_thread_still_conflicts(void **state) {
  fixture f;
  setup(&f, clock_of(state), GRT_STREAM_DEFAULT, GRT_CAPTURE_GLOBAL);
  assert_int_equal(exchange(f.exec, GRT_CAPTURE_RELAXED), GRT_CAPTURE_GLOBAL);
  assert_int_equal(unsafe_call(&f, C_EVENT_SYNC), GRT_OK);
  grt_stream *leg;
  assert_int_equal(grt_exec_legacy_stream(f.exec, &leg), GRT_OK);
  assert_int_equal(grt_stream_query(leg), GRT_ERR_CAPTURE_IMPLICIT);
  assert_int_equal(grt_stream_synchronize(f.s), GRT_ERR_CAPTURE_UNSUPPORTED);
  assert_int_equal(exchange(f.exec, GRT_CAPTURE_GLOBAL), GRT_CAPTURE_RELAXED);
  end_capture(&f, false);
  teardown(&f);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      BOTH_CLOCKS(test_unsafe_calls_this_thread),
      BOTH_CLOCKS(test_unsafe_calls_other_thread),
      BOTH_CLOCKS(test_only_forbidding_capture_invalidated),
      BOTH_CLOCKS(test_stream_ops_query_not_unsafe),
      BOTH_CLOCKS(test_legacy_implicit),
      BOTH_CLOCKS(test_legacy_with_nonblocking_capture),
      BOTH_CLOCKS(test_exchange_push_pop),
      BOTH_CLOCKS(test_thread_modes),
      BOTH_CLOCKS(test_relaxed_thread_still_conflicts),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
