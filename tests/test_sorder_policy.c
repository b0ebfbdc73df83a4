/* test_sorder_policy.c — the pool's reuse policies as CUDA defines them
 * (cudaMemPoolAttr; CUDA C++ Programming Guide, Stream Ordered Memory
 * Allocator), under both clocks:
 *  - FOLLOW_EVENT_DEPS reuses another stream's free only when the allocating
 *    stream already depends on it — the program's event edges, transitively,
 *    and the legacy stream's implicit ones — and inserts no wait itself;
 *  - OPPORTUNISTIC reuses a free the device passed, without an edge;
 *  - INTERNAL_DEPS inserts a wait, only when the pool cannot grow;
 *  - with none applicable and no room, GRT_ERR_OOM at once: nothing waits,
 *    nothing changes, no time passes.
 * Gates hold the frees pending, so both clocks give the same figures. */
#include "sorder_pool_fixture.h"

static void teardown(grt_exec *exec, grt_mempool *p) {
  assert_int_equal(grt_exec_synchronize(exec), GRT_OK);
  assert_int_equal(grt_mempool_destroy(p), GRT_OK);
  assert_int_equal(grt_exec_destroy(exec), GRT_OK);
}

/* The legacy stream's edges order a blocking stream after a free on it, and
 * the legacy stream after a free on a blocking stream; a non-blocking stream
 * is not ordered. */
static void test_follow_legacy(void **state) {
  grt_exec *exec = pool_exec(clock_of(state), 16 * GRT_MiB);
  grt_mempool *p = pool_new(exec, NULL, "caching", GRT_REUSE_FOLLOW_EVENT_DEPS);
  grt_stream *leg, *blk = make_stream(exec, GRT_STREAM_DEFAULT, "blocking");
  grt_stream *nonblk = nb(exec, "non-blocking");
  assert_int_equal(grt_exec_legacy_stream(exec, &leg), GRT_OK);
  grt_devptr x, y, z, w, v;
  assert_int_equal(grt_malloc_async(p, 4096, leg, &x), GRT_OK);
  grt_user_event *u = gate_on(exec, leg);
  work(leg, 100000);
  assert_int_equal(grt_free_async(p, x, leg), GRT_OK);
  assert_int_equal(grt_malloc_async(p, 4096, nonblk, &y), GRT_OK);
  assert_int_not_equal(y, x);
  assert_int_equal(grt_malloc_async(p, 4096, blk, &z), GRT_OK);
  assert_int_equal(z, x);
  /* The other way round: a free on the blocking stream, reused on legacy. */
  assert_int_equal(grt_free_async(p, z, blk), GRT_OK);
  assert_int_equal(grt_malloc_async(p, 4096, nonblk, &w), GRT_OK);
  assert_int_not_equal(w, z);
  assert_int_equal(grt_malloc_async(p, 4096, leg, &v), GRT_OK);
  assert_int_equal(v, z);
  grt_mempool_counters k = pool_counters(p);
  assert_int_equal(k.reuse_event_dep, 2);
  assert_int_equal(k.edges_inserted, 0);
  assert_int_equal(k.reuses_deferred, 2);
  gate_open(u);
  assert_int_equal(grt_free_async(p, y, nonblk), GRT_OK);
  assert_int_equal(grt_free_async(p, w, nonblk), GRT_OK);
  assert_int_equal(grt_free_async(p, v, leg), GRT_OK);
  assert_int_equal(grt_user_event_destroy(u), GRT_OK);
  assert_int_equal(grt_stream_destroy(blk), GRT_OK);
  assert_int_equal(grt_stream_destroy(nonblk), GRT_OK);
  teardown(exec, p);
}

/* A -> B -> C by two event edges: C depends on A's free; D does not. */
static void test_follow_transitive(void **state) {
  grt_exec *exec = pool_exec(clock_of(state), 16 * GRT_MiB);
  grt_mempool *p = pool_new(exec, NULL, "caching", GRT_REUSE_ALL);
  grt_stream *a = nb(exec, "A"), *b = nb(exec, "B");
  grt_stream *c = nb(exec, "C"), *d = nb(exec, "D");
  grt_devptr x, y, z;
  assert_int_equal(grt_malloc_async(p, 4096, a, &x), GRT_OK);
  grt_user_event *u = gate_on(exec, a);
  assert_int_equal(grt_free_async(p, x, a), GRT_OK);
  grt_event *e1 = edge(exec, a, b), *e2 = edge(exec, b, c);
  assert_int_equal(grt_malloc_async(p, 4096, d, &y), GRT_OK);
  assert_int_not_equal(y, x);
  assert_int_equal(grt_malloc_async(p, 4096, c, &z), GRT_OK);
  assert_int_equal(z, x);
  grt_mempool_counters k = pool_counters(p);
  assert_int_equal(k.reuse_event_dep, 1);
  assert_int_equal(k.reuse_opportunistic, 0);
  assert_int_equal(k.edges_inserted, 0);
  gate_open(u);
  assert_int_equal(grt_free_async(p, y, d), GRT_OK);
  assert_int_equal(grt_free_async(p, z, c), GRT_OK);
  assert_int_equal(grt_event_destroy(e1), GRT_OK);
  assert_int_equal(grt_event_destroy(e2), GRT_OK);
  assert_int_equal(grt_user_event_destroy(u), GRT_OK);
  grt_stream *all[4] = {a, b, c, d};
  for (int i = 0; i < 4; i++) assert_int_equal(grt_stream_destroy(all[i]), GRT_OK);
  teardown(exec, p);
}

/* With the sanitizer: an edge through the front door, or one made with the
 * plain exec API that the pool found — either way the reuse is ordered and
 * the writer on C is not reported. */
static void test_follow_sanitizer(void **state) {
  for (int plain = 0; plain < 2; plain++) {
    grt_exec *exec = pool_exec(clock_of(state), 16 * GRT_MiB);
    grt_sorder *so = sorder_new(exec);
    grt_mempool *p = pool_new(exec, so, "caching", GRT_REUSE_FOLLOW_EVENT_DEPS);
    grt_stream *a = nb(exec, "A"), *c = nb(exec, "C");
    grt_devptr x, y;
    assert_int_equal(grt_malloc_async(p, 4096, a, &x), GRT_OK);
    grt_user_event *u = gate_on(exec, a);
    grt_access acc = {x, 4096, 0};
    grt_kernel_desc kd = {NULL, NULL, 100000, GRT_ENGINE_COMPUTE, "reader"};
    assert_int_equal(grt_sorder_launch(so, a, &kd, &acc, 1), GRT_OK);
    assert_int_equal(grt_free_async(p, x, a), GRT_OK);
    grt_event *ev = NULL;
    assert_int_equal(grt_event_create(exec, GRT_EVENT_DISABLE_TIMING, &ev), GRT_OK);
    assert_int_equal(plain ? grt_event_record(ev, a) : grt_sorder_event_record(so, ev, a), GRT_OK);
    assert_int_equal(plain ? grt_stream_wait_event(c, ev) : grt_sorder_stream_wait_event(so, c, ev), GRT_OK);
    assert_int_equal(grt_malloc_async(p, 4096, c, &y), GRT_OK);
    assert_int_equal(y, x);
    grt_access wr = {y, 4096, 1};
    kd.name = "writer";
    assert_int_equal(grt_sorder_launch(so, c, &kd, &wr, 1), GRT_OK);
    gate_open(u);
    assert_int_equal(grt_sorder_synchronize(so), GRT_OK);
    uint64_t total = 1;
    assert_int_equal(grt_sorder_report_count(so, NULL, &total), GRT_OK);
    assert_int_equal(total, 0);
    assert_int_equal(grt_free_async(p, y, c), GRT_OK);
    assert_int_equal(grt_event_destroy(ev), GRT_OK);
    assert_int_equal(grt_user_event_destroy(u), GRT_OK);
    assert_int_equal(grt_stream_destroy(a), GRT_OK);
    assert_int_equal(grt_stream_destroy(c), GRT_OK);
    assert_int_equal(grt_exec_synchronize(exec), GRT_OK);
    assert_int_equal(grt_mempool_destroy(p), GRT_OK);
    assert_int_equal(grt_sorder_destroy(so), GRT_OK);
    assert_int_equal(grt_exec_destroy(exec), GRT_OK);
  }
}

/* Without FOLLOW_EVENT_DEPS the program's edge does not license a reuse of a
 * pending free; per-stream pools never cross streams, edge or not. */
static void test_follow_off(void **state) {
  for (int per_stream = 0; per_stream < 2; per_stream++) {
    grt_exec *exec = pool_exec(clock_of(state), 16 * GRT_MiB);
    grt_mempool_config cfg;
    grt_mempool_config_default(&cfg);
    cfg.exec = exec;
    cfg.reuse = per_stream ? GRT_REUSE_ALL : GRT_REUSE_OPPORTUNISTIC | GRT_REUSE_INTERNAL_DEPS;
    cfg.per_stream = per_stream;
    grt_mempool *p = NULL;
    assert_int_equal(grt_mempool_create(&cfg, &p), GRT_OK);
    grt_stream *a = nb(exec, "A"), *c = nb(exec, "C");
    grt_devptr x, y;
    assert_int_equal(grt_malloc_async(p, 4096, a, &x), GRT_OK);
    grt_user_event *u = gate_on(exec, a);
    assert_int_equal(grt_free_async(p, x, a), GRT_OK);
    grt_event *ev = edge(exec, a, c);
    assert_int_equal(grt_malloc_async(p, 4096, c, &y), GRT_OK);
    assert_int_not_equal(y, x);
    grt_mempool_counters k = pool_counters(p);
    assert_int_equal(k.reuse_event_dep + k.reuse_opportunistic + k.reuse_internal_dep, 0);
    assert_int_equal(k.reuses_deferred, 1);
    assert_int_equal(k.edges_inserted, 0);
    gate_open(u);
    assert_int_equal(grt_free_async(p, y, c), GRT_OK);
    assert_int_equal(grt_event_destroy(ev), GRT_OK);
    assert_int_equal(grt_user_event_destroy(u), GRT_OK);
    assert_int_equal(grt_stream_destroy(a), GRT_OK);
    assert_int_equal(grt_stream_destroy(c), GRT_OK);
    teardown(exec, p);
  }
}

/* FOLLOW_EVENT_DEPS alone: a free the device passed, with no edge to the
 * allocating stream, is not reused (that is OPPORTUNISTIC's); a sync point
 * covering it hands it back to the allocator, where any stream takes it. */
static void test_completed_needs_opportunistic(void **state) {
  grt_exec *exec = pool_exec(clock_of(state), 16 * GRT_MiB);
  grt_mempool *p = pool_new(exec, NULL, "caching", GRT_REUSE_FOLLOW_EVENT_DEPS);
  assert_int_equal(grt_mempool_set_release_threshold(p, UINT64_MAX), GRT_OK);
  grt_stream *a = nb(exec, "A"), *b = nb(exec, "B");
  grt_stream *c = nb(exec, "C");
  grt_devptr x, y, z;
  assert_int_equal(grt_malloc_async(p, 4096, a, &x), GRT_OK);
  work(a, 50000);
  assert_int_equal(grt_free_async(p, x, a), GRT_OK);
  grt_event *ev = edge(exec, a, b);
  assert_int_equal(grt_stream_synchronize(b), GRT_OK); /* A's free completed; B's sync does not cover A */
  assert_int_equal(pool_counters(p).pending_frees, 1);
  assert_int_equal(grt_malloc_async(p, 4096, c, &y), GRT_OK);
  assert_int_not_equal(y, x);
  assert_int_equal(grt_stream_synchronize(a), GRT_OK);
  assert_int_equal(pool_counters(p).pending_frees, 0);
  assert_int_equal(grt_malloc_async(p, 4096, c, &z), GRT_OK);
  assert_int_equal(z, x);
  grt_mempool_counters k = pool_counters(p);
  assert_int_equal(k.reuse_event_dep + k.reuse_opportunistic, 0);
  assert_int_equal(k.reuses_deferred, 1);
  assert_int_equal(k.released_to_allocator, 1);
  assert_int_equal(grt_free_async(p, y, c), GRT_OK);
  assert_int_equal(grt_free_async(p, z, c), GRT_OK);
  assert_int_equal(grt_event_destroy(ev), GRT_OK);
  assert_int_equal(grt_stream_destroy(a), GRT_OK);
  assert_int_equal(grt_stream_destroy(b), GRT_OK);
  assert_int_equal(grt_stream_destroy(c), GRT_OK);
  teardown(exec, p);
}

/* INTERNAL_DEPS only where the pool cannot grow: with room, a new block and
 * no edge; without, the pending free after a wait the pool inserts. */
static void test_internal_only_without_room(void **state) {
  for (int full = 0; full < 2; full++) {
    grt_exec *exec = pool_exec(clock_of(state), (full ? 24 : 48) * GRT_MiB);
    grt_mempool *p = pool_new(exec, NULL, "caching", GRT_REUSE_INTERNAL_DEPS);
    grt_stream *a = nb(exec, "A"), *c = nb(exec, "C");
    order_log log = {0};
    log_arg l1 = {&log, 1}, l2 = {&log, 2};
    grt_devptr x, y;
    assert_int_equal(grt_malloc_async(p, 16 * GRT_MiB, a, &x), GRT_OK);
    grt_user_event *u = gate_on(exec, a);
    launch_logged(a, &l1, 100000);
    assert_int_equal(grt_free_async(p, x, a), GRT_OK);
    assert_int_equal(grt_malloc_async(p, 16 * GRT_MiB, c, &y), GRT_OK);
    launch_logged(c, &l2, 1000);
    grt_mempool_counters k = pool_counters(p);
    assert_int_equal(k.reuse_internal_dep, full);
    assert_int_equal(k.edges_inserted, full);
    assert_int_equal(k.reuses_deferred, 1 - full);
    assert_int_equal(k.device_mallocs, 2 - full);
    if (full) assert_int_equal(y, x);
    else assert_int_not_equal(y, x);
    gate_open(u);
    assert_int_equal(grt_exec_synchronize(exec), GRT_OK);
    if (full) assert_true(log_pos(&log, 1) < log_pos(&log, 2)); /* the inserted wait */
    assert_int_equal(grt_free_async(p, y, c), GRT_OK);
    assert_int_equal(grt_user_event_destroy(u), GRT_OK);
    assert_int_equal(grt_stream_destroy(a), GRT_OK);
    assert_int_equal(grt_stream_destroy(c), GRT_OK);
    teardown(exec, p);
  }
}

/* The best fit among the frees a policy allows: C depends on B's (larger)
 * free, not on A's smaller one. */
static void test_best_allowed_fit(void **state) {
  grt_exec *exec = pool_exec(clock_of(state), 16 * GRT_MiB);
  grt_mempool *p = pool_new(exec, NULL, "caching", GRT_REUSE_ALL);
  grt_stream *a = nb(exec, "A"), *b = nb(exec, "B");
  grt_stream *c = nb(exec, "C");
  grt_devptr xa, xb, y;
  assert_int_equal(grt_malloc_async(p, 4096, a, &xa), GRT_OK);
  assert_int_equal(grt_malloc_async(p, 8192, b, &xb), GRT_OK);
  grt_user_event *ua = gate_on(exec, a), *ub = gate_on(exec, b);
  assert_int_equal(grt_free_async(p, xa, a), GRT_OK);
  assert_int_equal(grt_free_async(p, xb, b), GRT_OK);
  grt_event *ev = edge(exec, b, c);
  assert_int_equal(grt_malloc_async(p, 4096, c, &y), GRT_OK);
  assert_int_equal(y, xb);
  grt_mempool_counters k = pool_counters(p);
  assert_int_equal(k.reuse_event_dep, 1);
  assert_int_equal(k.reuses_deferred, 0);
  assert_int_equal(k.pending_frees, 1);
  gate_open(ua);
  gate_open(ub);
  assert_int_equal(grt_free_async(p, y, c), GRT_OK);
  assert_int_equal(grt_event_destroy(ev), GRT_OK);
  assert_int_equal(grt_user_event_destroy(ua), GRT_OK);
  assert_int_equal(grt_user_event_destroy(ub), GRT_OK);
  assert_int_equal(grt_stream_destroy(a), GRT_OK);
  assert_int_equal(grt_stream_destroy(b), GRT_OK);
  assert_int_equal(grt_stream_destroy(c), GRT_OK);
  teardown(exec, p);
}

/* A free much larger than asked (more than twice) is reused only when the
 * device cannot supply the request: 30 MiB parked, 12 MiB asked. */
static void test_loose_fit_without_room(void **state) {
  for (int full = 0; full < 2; full++) {
    grt_exec *exec = pool_exec(clock_of(state), (full ? 40 : 64) * GRT_MiB);
    grt_mempool *p = pool_new(exec, NULL, "caching", GRT_REUSE_FOLLOW_EVENT_DEPS);
    grt_stream *a = nb(exec, "A"), *c = nb(exec, "C");
    grt_devptr x, y;
    assert_int_equal(grt_malloc_async(p, 30 * GRT_MiB, a, &x), GRT_OK);
    grt_user_event *u = gate_on(exec, a);
    assert_int_equal(grt_free_async(p, x, a), GRT_OK);
    grt_event *ev = edge(exec, a, c);
    assert_int_equal(grt_malloc_async(p, 12 * GRT_MiB, c, &y), GRT_OK);
    if (full) assert_int_equal(y, x);
    else assert_int_not_equal(y, x);
    grt_mempool_counters k = pool_counters(p);
    assert_int_equal(k.reuse_event_dep, full);
    assert_int_equal(k.edges_inserted, 0);
    assert_int_equal(k.device_mallocs, 2 - full);
    gate_open(u);
    assert_int_equal(grt_free_async(p, y, c), GRT_OK);
    assert_int_equal(grt_event_destroy(ev), GRT_OK);
    assert_int_equal(grt_user_event_destroy(u), GRT_OK);
    assert_int_equal(grt_stream_destroy(a), GRT_OK);
    assert_int_equal(grt_stream_destroy(c), GRT_OK);
    teardown(exec, p);
  }
}

/* No policy applies and no room: GRT_ERR_OOM at once. The pending free is
 * not waited for: its stream did not move, the virtual clock stands, the
 * pool's figures and the sanitizer's reports are as before. */
static void test_oom_does_not_wait(void **state) {
  grt_exec *exec = pool_exec(clock_of(state), 24 * GRT_MiB);
  grt_sorder *so = sorder_new(exec);
  grt_mempool *p = pool_new(exec, so, "caching", GRT_REUSE_FOLLOW_EVENT_DEPS | GRT_REUSE_OPPORTUNISTIC);
  grt_stream *a = nb(exec, "A"), *c = nb(exec, "C");
  order_log log = {0};
  log_arg l1 = {&log, 1};
  grt_devptr x, y = 0;
  assert_int_equal(grt_malloc_async(p, 16 * GRT_MiB, a, &x), GRT_OK);
  grt_user_event *u = gate_on(exec, a);
  launch_logged(a, &l1, 100000);
  assert_int_equal(grt_free_async(p, x, a), GRT_OK);
  grt_mempool_counters before = pool_counters(p);
  grt_mempool_attrs at = pool_attrs(p);
  uint64_t t0 = now_of(exec);
  assert_int_equal(grt_malloc_async(p, 16 * GRT_MiB, c, &y), GRT_ERR_OOM);
  assert_int_equal(y, 0);
  if (clock_of(state) == GRT_CLOCK_VIRTUAL) assert_int_equal(now_of(exec), t0);
  assert_int_equal(log.n, 0);
  grt_mempool_counters after = pool_counters(p);
  assert_memory_equal(&before, &after, sizeof before);
  grt_mempool_attrs at2 = pool_attrs(p);
  assert_memory_equal(&at, &at2, sizeof at);
  uint64_t total = 1;
  assert_int_equal(grt_sorder_report_count(so, NULL, &total), GRT_OK);
  assert_int_equal(total, 0);
  gate_open(u);
  assert_int_equal(grt_user_event_destroy(u), GRT_OK);
  assert_int_equal(grt_stream_destroy(a), GRT_OK);
  assert_int_equal(grt_stream_destroy(c), GRT_OK);
  assert_int_equal(grt_exec_synchronize(exec), GRT_OK);
  assert_int_equal(grt_mempool_destroy(p), GRT_OK);
  assert_int_equal(grt_sorder_destroy(so), GRT_OK);
  assert_int_equal(grt_exec_destroy(exec), GRT_OK);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      BOTH_CLOCKS(test_follow_legacy),
      BOTH_CLOCKS(test_follow_transitive),
      BOTH_CLOCKS(test_follow_sanitizer),
      BOTH_CLOCKS(test_follow_off),
      BOTH_CLOCKS(test_completed_needs_opportunistic),
      BOTH_CLOCKS(test_internal_only_without_room),
      BOTH_CLOCKS(test_best_allowed_fit),
      BOTH_CLOCKS(test_loose_fit_without_room),
      BOTH_CLOCKS(test_oom_does_not_wait),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
