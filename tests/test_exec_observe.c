/* test_exec_observe.c — what the stream-ordered pool learns from the exec
 * (src/exec/observe.h), under both clocks: sync observers are told of every
 * successful stream, event and device synchronization and of nothing else;
 * removal waits for a running call; the order query says whether a stream's
 * next work is ordered after an event's snapshot (stream order, event waits,
 * transitively, the legacy stream's implicit edges) and moves nothing.
 * User-event gates hold the work, so the threads clock gives the same answers. */
#include <pthread.h>
#include <time.h>

#include "exec/observe.h"
#include "test_exec_common.h"

typedef struct seen {
  int n;
  grt__sync_point last;
} seen;

static void on_sync(void *ctx, const grt__sync_point *sp) {
  seen *s = ctx;
  s->n++;
  s->last = *sp;
}

static grt_user_event *gate(grt_exec *exec, grt_stream *s) {
  grt_user_event *u = NULL;
  assert_int_equal(grt_user_event_create(exec, "gate", &u), GRT_OK);
  assert_int_equal(grt_stream_wait_user_event(s, u, 1), GRT_OK);
  return u;
}

static void busy(grt_stream *s, uint64_t ns) {
  grt_kernel_desc d = {NULL, NULL, ns, GRT_ENGINE_COMPUTE, "busy"};
  assert_int_equal(grt_launch_kernel(s, &d), GRT_OK);
}

static grt_event *recorded(grt_exec *exec, grt_stream *s) {
  grt_event *ev = NULL;
  assert_int_equal(grt_event_create(exec, GRT_EVENT_DISABLE_TIMING, &ev), GRT_OK);
  assert_int_equal(grt_event_record(ev, s), GRT_OK);
  return ev;
}

static grt__order order_of(grt_stream *s, grt_event *ev) {
  grt__order o = (grt__order)-1;
  assert_int_equal(grt__events_order(s, &ev, 1, &o), GRT_OK);
  return o;
}

/* Each synchronizing call tells the observer what it synchronized with. */
static void test_observer_calls(void **state) {
  grt_exec *exec = make_exec(clock_of(state), 0);
  grt_stream *a = make_stream(exec, GRT_STREAM_NON_BLOCKING, "A");
  grt_stream_id aid;
  assert_int_equal(grt_stream_get_id(a, &aid), GRT_OK);
  seen s = {0};
  assert_int_equal(grt__exec_observe(exec, on_sync, &s), GRT_OK);
  busy(a, 1000);
  assert_int_equal(grt_stream_synchronize(a), GRT_OK);
  assert_int_equal(s.n, 1);
  assert_int_equal(s.last.kind, GRT__SYNC_STREAM);
  assert_true(s.last.has_stream);
  assert_int_equal(s.last.stream, aid);
  grt_event *ev = recorded(exec, a), *never = NULL;
  assert_int_equal(grt_event_synchronize(ev), GRT_OK);
  assert_int_equal(s.n, 2);
  assert_int_equal(s.last.kind, GRT__SYNC_EVENT);
  assert_true(s.last.has_stream);
  assert_int_equal(s.last.stream, aid);
  assert_int_equal(grt_event_create(exec, 0, &never), GRT_OK);
  assert_int_equal(grt_event_synchronize(never), GRT_OK); /* complete: still a sync point */
  assert_int_equal(s.n, 3);
  assert_false(s.last.has_stream);
  assert_int_equal(grt_exec_synchronize(exec), GRT_OK);
  assert_int_equal(s.n, 4);
  assert_int_equal(s.last.kind, GRT__SYNC_DEVICE);
  assert_false(s.last.has_stream);
  /* Queries, waits and records are no sync points. */
  assert_int_equal(grt_stream_query(a), GRT_OK);
  assert_int_equal(grt_event_query(ev), GRT_OK);
  assert_int_equal(grt_stream_wait_event(a, ev), GRT_OK);
  assert_int_equal(s.n, 4);
  assert_int_equal(grt_exec_destroy(exec), GRT_ERR_BUSY); /* still observed */
  assert_int_equal(grt__exec_unobserve(exec, on_sync, &s), GRT_OK);
  assert_int_equal(grt__exec_unobserve(exec, on_sync, &s), GRT_ERR_NOT_FOUND);
  assert_int_equal(grt_stream_synchronize(a), GRT_OK);
  assert_int_equal(s.n, 4);
  assert_int_equal(grt_event_destroy(ev), GRT_OK);
  assert_int_equal(grt_event_destroy(never), GRT_OK);
  assert_int_equal(grt_stream_destroy(a), GRT_OK);
  assert_int_equal(grt_exec_destroy(exec), GRT_OK);
}

/* A failed synchronization is no sync point; bad arguments register nothing. */
static void test_observer_failures(void **state) {
  grt_exec *exec = make_exec(clock_of(state), 0);
  grt_stream *a = make_stream(exec, GRT_STREAM_NON_BLOCKING, "A");
  seen s = {0}, t = {0};
  assert_int_equal(grt__exec_observe(NULL, on_sync, &s), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt__exec_observe(exec, NULL, &s), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt__exec_unobserve(NULL, on_sync, &s), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt__exec_unobserve(exec, NULL, &s), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt__exec_unobserve(exec, on_sync, &s), GRT_ERR_NOT_FOUND);
  assert_int_equal(grt__exec_observe(exec, on_sync, &s), GRT_OK);
  assert_int_equal(grt__exec_observe(exec, on_sync, &t), GRT_OK); /* two observers, both told */
  assert_int_equal(grt_stream_begin_capture(a, GRT_CAPTURE_RELAXED), GRT_OK);
  assert_int_equal(grt_stream_synchronize(a), GRT_ERR_CAPTURE_UNSUPPORTED);
  grt_graph *g = NULL;
  assert_int_equal(grt_stream_end_capture(a, &g), GRT_ERR_CAPTURE_INVALIDATED);
  assert_int_equal(s.n, 0);
  /* A sticky error: a memset whose range is freed before it runs. */
  grt_devptr x;
  assert_int_equal(grt_exec_device_malloc(exec, 4096, &x), GRT_OK);
  grt_user_event *u = gate(exec, a);
  assert_int_equal(grt_memset_async(a, x, 0, 4096), GRT_OK);
  assert_int_equal(grt_exec_device_free(exec, x), GRT_OK);
  assert_int_equal(grt_user_event_signal(u, 1), GRT_OK);
  assert_int_not_equal(grt_exec_synchronize(exec), GRT_OK);
  assert_int_not_equal(grt_stream_synchronize(a), GRT_OK);
  assert_int_equal(s.n, 0);
  assert_int_equal(t.n, 0);
  assert_int_equal(grt__exec_unobserve(exec, on_sync, &t), GRT_OK);
  assert_int_equal(grt__exec_unobserve(exec, on_sync, &s), GRT_OK);
  assert_int_equal(grt_user_event_destroy(u), GRT_OK);
  assert_int_equal(grt_stream_destroy(a), GRT_OK);
  assert_int_equal(grt_exec_destroy(exec), GRT_OK);
}

/* An observer may synchronize itself: it is told of that nested sync too. */
typedef struct nested {
  grt_stream *s;
  int calls, inner;
} nested;

static void on_sync_nested(void *ctx, const grt__sync_point *sp) {
  (void)sp;
  nested *n = ctx;
  if (n->calls++ == 0) n->inner = grt_stream_synchronize(n->s);
}

static void test_observer_nested(void **state) {
  grt_exec *exec = make_exec(clock_of(state), 0);
  grt_stream *a = make_stream(exec, GRT_STREAM_NON_BLOCKING, "A");
  nested n = {a, 0, -1};
  assert_int_equal(grt__exec_observe(exec, on_sync_nested, &n), GRT_OK);
  assert_int_equal(grt_exec_synchronize(exec), GRT_OK);
  assert_int_equal(n.calls, 2);
  assert_int_equal(n.inner, GRT_OK);
  assert_int_equal(grt__exec_unobserve(exec, on_sync_nested, &n), GRT_OK);
  assert_int_equal(grt_stream_destroy(a), GRT_OK);
  assert_int_equal(grt_exec_destroy(exec), GRT_OK);
}

/* Threads only (it needs two host threads at once): removal waits for the
 * observer's running call, which holds until the remover has started. */
typedef struct slow {
  pthread_mutex_t m;
  pthread_cond_t cv;
  int in_call, release, done;
} slow;

static void on_sync_slow(void *ctx, const grt__sync_point *sp) {
  (void)sp;
  slow *w = ctx;
  pthread_mutex_lock(&w->m);
  w->in_call = 1;
  pthread_cond_broadcast(&w->cv);
  while (!w->release) pthread_cond_wait(&w->cv, &w->m);
  w->done = 1;
  pthread_mutex_unlock(&w->m);
}

static void *syncer(void *p) {
  grt_exec *exec = p;
  return (void *)(intptr_t)grt_exec_synchronize(exec);
}

static void *remover(void *p) {
  slow *w = *(slow **)p;
  grt_exec *exec = ((grt_exec **)p)[1];
  grt_status st = grt__exec_unobserve(exec, on_sync_slow, w);
  pthread_mutex_lock(&w->m);
  int done = w->done; /* the call ended before removal returned */
  pthread_mutex_unlock(&w->m);
  return (void *)(intptr_t)(st == GRT_OK && done);
}

static void test_observer_remove_waits(void **state) {
  (void)state;
  grt_exec *exec = make_exec(GRT_CLOCK_THREADS, 0);
  slow w = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, 0, 0};
  assert_int_equal(grt__exec_observe(exec, on_sync_slow, &w), GRT_OK);
  pthread_t t1, t2;
  assert_int_equal(pthread_create(&t1, NULL, syncer, exec), 0);
  pthread_mutex_lock(&w.m);
  while (!w.in_call) pthread_cond_wait(&w.cv, &w.m);
  pthread_mutex_unlock(&w.m);
  void *args[2] = {&w, exec};
  assert_int_equal(pthread_create(&t2, NULL, remover, args), 0);
  /* Give the remover time to block; if it has not yet, the check still holds. */
  struct timespec ts = {0, 20000000};
  nanosleep(&ts, NULL);
  pthread_mutex_lock(&w.m);
  w.release = 1;
  pthread_cond_broadcast(&w.cv);
  pthread_mutex_unlock(&w.m);
  void *r1, *r2;
  assert_int_equal(pthread_join(t1, &r1), 0);
  assert_int_equal(pthread_join(t2, &r2), 0);
  assert_int_equal((intptr_t)r1, GRT_OK);
  assert_int_equal((intptr_t)r2, 1);
  assert_int_equal(grt_exec_destroy(exec), GRT_OK);
}

/* The order query: FIFO, a wait, a chain of waits, nothing, completion. */
static void test_order_edges(void **state) {
  grt_exec *exec = make_exec(clock_of(state), 0);
  grt_stream *a = make_stream(exec, GRT_STREAM_NON_BLOCKING, "A");
  grt_stream *b = make_stream(exec, GRT_STREAM_NON_BLOCKING, "B");
  grt_stream *c = make_stream(exec, GRT_STREAM_NON_BLOCKING, "C");
  grt_user_event *u = gate(exec, a);
  busy(a, 1000);
  grt_event *ev = recorded(exec, a), *never = NULL;
  assert_int_equal(grt_event_create(exec, 0, &never), GRT_OK);
  uint64_t t0, t1;
  assert_int_equal(grt_exec_now_ns(exec, &t0), GRT_OK);
  assert_int_equal(order_of(a, ev), GRT__ORDER_ORDERED);
  assert_int_equal(order_of(b, ev), GRT__ORDER_UNORDERED);
  assert_int_equal(order_of(NULL, ev), GRT__ORDER_UNORDERED);
  assert_int_equal(order_of(b, never), GRT__ORDER_COMPLETE);
  assert_int_equal(grt_stream_wait_event(b, ev), GRT_OK);
  assert_int_equal(order_of(b, ev), GRT__ORDER_ORDERED);
  assert_int_equal(order_of(c, ev), GRT__ORDER_UNORDERED);
  grt_event *evb = recorded(exec, b);
  assert_int_equal(grt_stream_wait_event(c, evb), GRT_OK); /* c -> b -> a */
  assert_int_equal(order_of(c, ev), GRT__ORDER_ORDERED);
  grt_event *both[3] = {ev, evb, never};
  grt__order o[3];
  assert_int_equal(grt__events_order(c, both, 3, o), GRT_OK);
  assert_int_equal(o[0], GRT__ORDER_ORDERED);
  assert_int_equal(o[1], GRT__ORDER_ORDERED);
  assert_int_equal(o[2], GRT__ORDER_COMPLETE);
  /* Asking moved nothing: no time passed, nothing ran. */
  assert_int_equal(grt_exec_now_ns(exec, &t1), GRT_OK);
  if (clock_of(state) == GRT_CLOCK_VIRTUAL) assert_int_equal(t1, t0);
  assert_int_equal(grt_stream_query(a), GRT_ERR_NOT_READY);
  assert_int_equal(grt_user_event_signal(u, 1), GRT_OK);
  assert_int_equal(grt_exec_synchronize(exec), GRT_OK);
  assert_int_equal(order_of(b, ev), GRT__ORDER_COMPLETE);
  assert_int_equal(order_of(NULL, ev), GRT__ORDER_COMPLETE);
  assert_int_equal(grt__events_order(c, both, 0, o), GRT_OK);
  assert_int_equal(grt_event_destroy(ev), GRT_OK);
  assert_int_equal(grt_event_destroy(evb), GRT_OK);
  assert_int_equal(grt_event_destroy(never), GRT_OK);
  assert_int_equal(grt_user_event_destroy(u), GRT_OK);
  assert_int_equal(grt_stream_destroy(a), GRT_OK);
  assert_int_equal(grt_stream_destroy(b), GRT_OK);
  assert_int_equal(grt_stream_destroy(c), GRT_OK);
  assert_int_equal(grt_exec_destroy(exec), GRT_OK);
}

/* The legacy stream's implicit edges: a blocking stream's next work waits for
 * the legacy stream, the legacy stream's for every blocking stream. */
static void test_order_legacy(void **state) {
  grt_exec *exec = make_exec(clock_of(state), 0);
  grt_stream *leg, *blk = make_stream(exec, GRT_STREAM_DEFAULT, "blocking");
  grt_stream *nb = make_stream(exec, GRT_STREAM_NON_BLOCKING, "non-blocking");
  assert_int_equal(grt_exec_legacy_stream(exec, &leg), GRT_OK);
  grt_user_event *u = gate(exec, leg);
  grt_event *on_leg = recorded(exec, leg);
  assert_int_equal(order_of(blk, on_leg), GRT__ORDER_ORDERED);
  assert_int_equal(order_of(nb, on_leg), GRT__ORDER_UNORDERED);
  assert_int_equal(grt_user_event_signal(u, 1), GRT_OK);
  assert_int_equal(grt_exec_synchronize(exec), GRT_OK);
  assert_int_equal(grt_user_event_destroy(u), GRT_OK);
  u = gate(exec, blk);
  grt_event *on_blk = recorded(exec, blk), *on_nb;
  grt_user_event *v = gate(exec, nb);
  on_nb = recorded(exec, nb);
  assert_int_equal(order_of(leg, on_blk), GRT__ORDER_ORDERED);
  assert_int_equal(order_of(leg, on_nb), GRT__ORDER_UNORDERED);
  assert_int_equal(order_of(nb, on_blk), GRT__ORDER_UNORDERED);
  assert_int_equal(grt_user_event_signal(u, 1), GRT_OK);
  assert_int_equal(grt_user_event_signal(v, 1), GRT_OK);
  assert_int_equal(grt_exec_synchronize(exec), GRT_OK);
  assert_int_equal(grt_event_destroy(on_leg), GRT_OK);
  assert_int_equal(grt_event_destroy(on_blk), GRT_OK);
  assert_int_equal(grt_event_destroy(on_nb), GRT_OK);
  assert_int_equal(grt_user_event_destroy(u), GRT_OK);
  assert_int_equal(grt_user_event_destroy(v), GRT_OK);
  assert_int_equal(grt_stream_destroy(blk), GRT_OK);
  assert_int_equal(grt_stream_destroy(nb), GRT_OK);
  assert_int_equal(grt_exec_destroy(exec), GRT_OK);
}

/* Refusals: nothing is invalidated, nothing written. */
static void test_order_errors(void **state) {
  grt_exec *exec = make_exec(clock_of(state), 0), *other = make_exec(clock_of(state), 0);
  grt_stream *a = make_stream(exec, GRT_STREAM_NON_BLOCKING, "A");
  grt_stream *gone = make_stream(exec, GRT_STREAM_NON_BLOCKING, "gone");
  grt_stream *x = make_stream(other, GRT_STREAM_NON_BLOCKING, "X");
  grt_event *ev = recorded(exec, a), *dead = recorded(exec, a), *foreign = recorded(other, x);
  grt__order o = (grt__order)7;
  assert_int_equal(grt__events_order(a, NULL, 1, &o), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt__events_order(a, &ev, 1, NULL), GRT_ERR_INVALID_ARG);
  grt_event *nul = NULL;
  assert_int_equal(grt__events_order(a, &nul, 1, &o), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt__events_order((grt_stream *)(void *)ev, &ev, 1, &o), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt__events_order(a, &foreign, 1, &o), GRT_ERR_WRONG_DEVICE);
  assert_int_equal(grt__events_order(x, &ev, 1, &o), GRT_ERR_WRONG_DEVICE);
  assert_int_equal(grt_event_destroy(dead), GRT_OK);
  assert_int_equal(grt__events_order(a, &dead, 1, &o), GRT_ERR_INVALID_HANDLE);
  assert_int_equal(grt_stream_destroy(gone), GRT_OK);
  assert_int_equal(grt__events_order(gone, &ev, 1, &o), GRT_ERR_INVALID_HANDLE);
  /* A captured event, and a capturing stream: refused, the capture goes on. */
  grt_event *cap = NULL;
  assert_int_equal(grt_event_create(exec, 0, &cap), GRT_OK);
  assert_int_equal(grt_stream_begin_capture(a, GRT_CAPTURE_RELAXED), GRT_OK);
  assert_int_equal(grt_event_record(cap, a), GRT_OK);
  assert_int_equal(grt__events_order(NULL, &cap, 1, &o), GRT_ERR_CAPTURED_EVENT);
  assert_int_equal(grt__events_order(a, &ev, 1, &o), GRT_ERR_CAPTURE_UNSUPPORTED);
  grt_capture_status cs;
  assert_int_equal(grt_stream_capture_status(a, &cs), GRT_OK);
  assert_int_equal(cs, GRT_CAPTURE_STATUS_ACTIVE);
  grt_graph *g = NULL;
  assert_int_equal(grt_stream_end_capture(a, &g), GRT_OK);
  assert_int_equal(grt_graph_destroy(g), GRT_OK);
  assert_int_equal((int)o, 7);
  assert_int_equal(grt_exec_synchronize(exec), GRT_OK);
  assert_int_equal(grt_event_destroy(cap), GRT_OK);
  assert_int_equal(grt_event_destroy(ev), GRT_OK);
  assert_int_equal(grt_event_destroy(foreign), GRT_OK);
  assert_int_equal(grt_stream_destroy(a), GRT_OK);
  assert_int_equal(grt_stream_destroy(x), GRT_OK);
  assert_int_equal(grt_exec_destroy(exec), GRT_OK);
  assert_int_equal(grt_exec_destroy(other), GRT_OK);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      BOTH_CLOCKS(test_observer_calls), BOTH_CLOCKS(test_observer_failures), BOTH_CLOCKS(test_observer_nested),
      cmocka_unit_test(test_observer_remove_waits), BOTH_CLOCKS(test_order_edges), BOTH_CLOCKS(test_order_legacy),
      BOTH_CLOCKS(test_order_errors),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
