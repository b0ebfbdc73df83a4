/* test_sorder_pool.c — the stream-ordered pool under both clocks: reuse on the
 * same stream, the three cross-stream policies (CUDA's cudaMemPoolAttr
 * rules), per-stream pools, host sync points, PyTorch's record_stream path,
 * release threshold / trim_to, and bad input (nothing changes on a failed
 * call). Gates (user events) hold the frees where a test needs them pending,
 * so both clocks give the same figures. */
#include "gpurt/sorder.h"
#include "test_exec_common.h"

static grt_exec *exec_cap(grt_clock_kind clock, uint64_t cap) {
  grt_exec_config cfg;
  grt_exec_config_default(&cfg);
  cfg.clock = clock;
  cfg.device_capacity = cap;
  grt_exec *exec = NULL;
  assert_int_equal(grt_exec_create(&cfg, &exec), GRT_OK);
  return exec;
}

static grt_mempool *make_pool(grt_exec *exec, const char *policy, unsigned reuse, int per_stream) {
  grt_mempool_config cfg;
  grt_mempool_config_default(&cfg);
  cfg.exec = exec;
  cfg.policy = policy;
  cfg.reuse = reuse;
  cfg.per_stream = per_stream;
  grt_mempool *p = NULL;
  assert_int_equal(grt_mempool_create(&cfg, &p), GRT_OK);
  return p;
}

static void busy(grt_stream *s, uint64_t ns) {
  grt_kernel_desc d = {NULL, NULL, ns, GRT_ENGINE_COMPUTE, "busy"};
  assert_int_equal(grt_launch_kernel(s, &d), GRT_OK);
}

/* Holds s until the returned user event is signalled (queries cannot step past it). */
static grt_user_event *gate(grt_exec *exec, grt_stream *s) {
  grt_user_event *u = NULL;
  assert_int_equal(grt_user_event_create(exec, "gate", &u), GRT_OK);
  assert_int_equal(grt_stream_wait_user_event(s, u, 1), GRT_OK);
  return u;
}

static void open_gate(grt_user_event *u) {
  assert_int_equal(grt_user_event_signal(u, 1), GRT_OK);
}

static grt_mempool_counters counters(grt_mempool *p) {
  grt_mempool_counters c;
  assert_int_equal(grt_mempool_get_counters(p, &c), GRT_OK);
  return c;
}

static void teardown(grt_exec *exec, grt_mempool *p, grt_stream *a, grt_stream *c) {
  assert_int_equal(grt_exec_synchronize(exec), GRT_OK);
  assert_int_equal(grt_mempool_destroy(p), GRT_OK);
  assert_int_equal(grt_stream_destroy(a), GRT_OK);
  assert_int_equal(grt_stream_destroy(c), GRT_OK);
  assert_int_equal(grt_exec_destroy(exec), GRT_OK);
}

/* Same stream: reusable at once, no edge. */
static void test_same_stream(void **state) {
  grt_exec *exec = make_exec(clock_of(state), 0);
  grt_mempool *p = make_pool(exec, "caching", GRT_REUSE_ALL, 0);
  grt_stream *a = make_stream(exec, GRT_STREAM_NON_BLOCKING, "A");
  grt_devptr x, y;
  assert_int_equal(grt_malloc_async(p, 4096, a, &x), GRT_OK);
  busy(a, 100000);
  assert_int_equal(grt_free_async(p, x, a), GRT_OK);
  assert_int_equal(grt_malloc_async(p, 4000, a, &y), GRT_OK);
  assert_int_equal(y, x);
  grt_mempool_counters c = counters(p);
  assert_int_equal(c.reuse_same_stream, 1);
  assert_int_equal(c.edges_inserted, 0);
  assert_int_equal(grt_free_async(p, y, a), GRT_OK);
  teardown(exec, p, a, NULL);
}

/* Follow event dependencies: another stream reuses the block when it already
 * waits for the free (an event recorded after the free, waited on by the
 * program); the pool inserts nothing. Without that edge it is not reused. */
static void test_follow_event_deps(void **state) {
  grt_exec *exec = make_exec(clock_of(state), 0);
  grt_mempool *p = make_pool(exec, "caching", GRT_REUSE_FOLLOW_EVENT_DEPS, 0);
  grt_stream *a = make_stream(exec, GRT_STREAM_NON_BLOCKING, "A");
  grt_stream *c = make_stream(exec, GRT_STREAM_NON_BLOCKING, "C");
  order_log log = {0};
  log_arg l1 = {&log, 1}, l2 = {&log, 2};
  grt_devptr x, y, z;
  assert_int_equal(grt_malloc_async(p, 4096, a, &x), GRT_OK);
  grt_user_event *u = gate(exec, a);
  launch_logged(a, &l1, 200000);
  assert_int_equal(grt_free_async(p, x, a), GRT_OK);
  assert_int_equal(grt_malloc_async(p, 4096, c, &z), GRT_OK); /* no edge yet: not reused */
  assert_int_not_equal(z, x);
  assert_int_equal(counters(p).reuses_deferred, 1);
  grt_event *ev = NULL;
  assert_int_equal(grt_event_create(exec, GRT_EVENT_DISABLE_TIMING, &ev), GRT_OK);
  assert_int_equal(grt_event_record(ev, a), GRT_OK);
  assert_int_equal(grt_stream_wait_event(c, ev), GRT_OK);
  assert_int_equal(grt_malloc_async(p, 4096, c, &y), GRT_OK);
  assert_int_equal(y, x);
  launch_logged(c, &l2, 1000);
  open_gate(u);
  assert_int_equal(grt_exec_synchronize(exec), GRT_OK);
  assert_true(log_pos(&log, 1) < log_pos(&log, 2));
  grt_mempool_counters k = counters(p);
  assert_int_equal(k.reuse_event_dep, 1);
  assert_int_equal(k.edges_inserted, 0);
  assert_int_equal(k.reuses_deferred, 1);
  assert_int_equal(grt_free_async(p, y, c), GRT_OK);
  assert_int_equal(grt_free_async(p, z, c), GRT_OK);
  assert_int_equal(grt_event_destroy(ev), GRT_OK);
  assert_int_equal(grt_user_event_destroy(u), GRT_OK);
  teardown(exec, p, a, c);
}

/* Opportunistic only: a pending free is passed over; once the device passed
 * it, it is reused without edge. The free completes behind a sync of another
 * stream B that waited for it: that sync covers B's frees, not A's, so A's
 * free is still parked, and C does not depend on it. */
static void test_opportunistic(void **state) {
  grt_exec *exec = make_exec(clock_of(state), 0);
  grt_mempool *p = make_pool(exec, "caching", GRT_REUSE_OPPORTUNISTIC, 0);
  grt_stream *a = make_stream(exec, GRT_STREAM_NON_BLOCKING, "A");
  grt_stream *b = make_stream(exec, GRT_STREAM_NON_BLOCKING, "B");
  grt_stream *c = make_stream(exec, GRT_STREAM_NON_BLOCKING, "C");
  grt_devptr x, y, z;
  assert_int_equal(grt_malloc_async(p, 4096, a, &x), GRT_OK);
  grt_user_event *u = gate(exec, a);
  busy(a, 200000);
  assert_int_equal(grt_free_async(p, x, a), GRT_OK);
  assert_int_equal(grt_malloc_async(p, 4096, c, &y), GRT_OK);
  assert_int_not_equal(y, x);
  assert_int_equal(counters(p).reuses_deferred, 1);
  grt_event *ev = NULL;
  assert_int_equal(grt_event_create(exec, GRT_EVENT_DISABLE_TIMING, &ev), GRT_OK);
  assert_int_equal(grt_event_record(ev, a), GRT_OK);
  assert_int_equal(grt_stream_wait_event(b, ev), GRT_OK);
  open_gate(u);
  assert_int_equal(grt_stream_synchronize(b), GRT_OK);
  assert_int_equal(counters(p).pending_frees, 1);
  assert_int_equal(grt_event_destroy(ev), GRT_OK);
  assert_int_equal(grt_stream_destroy(b), GRT_OK);
  assert_int_equal(grt_user_event_destroy(u), GRT_OK);
  assert_int_equal(grt_malloc_async(p, 4096, c, &z), GRT_OK);
  assert_int_equal(z, x);
  grt_mempool_counters k = counters(p);
  assert_int_equal(k.reuse_opportunistic, 1);
  assert_int_equal(k.edges_inserted, 0);
  assert_int_equal(grt_free_async(p, y, c), GRT_OK);
  assert_int_equal(grt_free_async(p, z, c), GRT_OK);
  teardown(exec, p, a, c);
}

/* No policy: only a host sync covering the free makes it reusable elsewhere
 * (a plain one too: the pool observes every sync of its exec). */
static void test_host_sync_point(void **state) {
  for (int plain = 0; plain < 2; plain++) {
    grt_exec *exec = make_exec(clock_of(state), 0);
    grt_mempool *p = make_pool(exec, "caching", 0, 0);
    grt_stream *a = make_stream(exec, GRT_STREAM_NON_BLOCKING, "A");
    grt_stream *c = make_stream(exec, GRT_STREAM_NON_BLOCKING, "C");
    grt_devptr x, y, z;
    assert_int_equal(grt_malloc_async(p, 4096, a, &x), GRT_OK);
    busy(a, 100000);
    assert_int_equal(grt_free_async(p, x, a), GRT_OK);
    assert_int_equal(grt_malloc_async(p, 4096, c, &y), GRT_OK);
    assert_int_not_equal(y, x);
    assert_int_equal(plain ? grt_stream_synchronize(a) : grt_mempool_stream_synchronize(p, a), GRT_OK);
    grt_mempool_counters k = counters(p);
    assert_int_equal(k.host_syncs, 1);
    assert_int_equal(k.pending_frees, 0);
    assert_int_equal(grt_malloc_async(p, 4096, c, &z), GRT_OK);
    assert_int_equal(z, x); /* back in the allocator: best fit, lowest address */
    assert_int_equal(counters(p).edges_inserted, 0);
    assert_int_equal(grt_free_async(p, y, c), GRT_OK);
    assert_int_equal(grt_free_async(p, z, c), GRT_OK);
    teardown(exec, p, a, c);
  }
}

/* The pool cannot grow: INTERNAL_DEPS waits on the freeing stream and reuses
 * its free; without it the call fails with OOM at once — the host does not
 * wait for the pending free, nothing changes, no time passes. */
static void test_oom_paths(void **state) {
  for (unsigned reuse = 0; reuse <= GRT_REUSE_INTERNAL_DEPS; reuse += GRT_REUSE_INTERNAL_DEPS) {
    grt_exec *exec = exec_cap(clock_of(state), 24 * GRT_MiB);
    grt_mempool *p = make_pool(exec, "caching", reuse, 0);
    grt_stream *a = make_stream(exec, GRT_STREAM_NON_BLOCKING, "A");
    grt_stream *c = make_stream(exec, GRT_STREAM_NON_BLOCKING, "C");
    order_log log = {0};
    log_arg l1 = {&log, 1}, l2 = {&log, 2};
    grt_devptr x, y = 0;
    assert_int_equal(grt_malloc_async(p, 15 * GRT_MiB, a, &x), GRT_OK);
    grt_user_event *u = gate(exec, a);
    launch_logged(a, &l1, 200000);
    assert_int_equal(grt_free_async(p, x, a), GRT_OK);
    uint64_t t0, t1;
    assert_int_equal(grt_exec_now_ns(exec, &t0), GRT_OK);
    assert_int_equal(grt_malloc_async(p, 15 * GRT_MiB, c, &y), reuse ? GRT_OK : GRT_ERR_OOM);
    assert_int_equal(grt_exec_now_ns(exec, &t1), GRT_OK);
    if (clock_of(state) == GRT_CLOCK_VIRTUAL) assert_int_equal(t1, t0);
    grt_mempool_counters k = counters(p);
    assert_int_equal(k.host_syncs, 0);
    if (reuse) {
      assert_int_equal(y, x);
      launch_logged(c, &l2, 1000);
      assert_int_equal(k.reuse_internal_dep, 1);
      assert_int_equal(k.edges_inserted, 1);
      assert_int_equal(k.mallocs, 2);
      assert_int_equal(k.pending_frees, 0);
    } else {
      assert_int_equal(k.edges_inserted, 0);
      assert_int_equal(k.mallocs, 1);
      assert_int_equal(k.pending_frees, 1);
      assert_int_equal(log.n, 0); /* the free's stream did not move */
    }
    open_gate(u);
    assert_int_equal(grt_exec_synchronize(exec), GRT_OK);
    if (reuse) assert_true(log_pos(&log, 1) < log_pos(&log, 2));
    assert_int_equal(grt_malloc_async(p, 15 * GRT_MiB, c, &x), reuse ? GRT_ERR_OOM : GRT_OK);
    assert_int_equal(grt_free_async(p, reuse ? y : x, c), GRT_OK);
    assert_int_equal(grt_user_event_destroy(u), GRT_OK);
    teardown(exec, p, a, c);
  }
}

/* Per-stream pools: blocks never cross streams, parked or handed back (the
 * threshold keeps the segments cached across the sync point). */
static void test_per_stream(void **state) {
  grt_exec *exec = make_exec(clock_of(state), 0);
  grt_mempool *p = make_pool(exec, "caching", GRT_REUSE_ALL, 1);
  grt_stream *a = make_stream(exec, GRT_STREAM_NON_BLOCKING, "A");
  grt_stream *c = make_stream(exec, GRT_STREAM_NON_BLOCKING, "C");
  grt_devptr x, y, w, z;
  assert_int_equal(grt_mempool_set_release_threshold(p, UINT64_MAX), GRT_OK);
  assert_int_equal(grt_malloc_async(p, 4096, a, &x), GRT_OK);
  assert_int_equal(grt_free_async(p, x, a), GRT_OK);
  assert_int_equal(grt_malloc_async(p, 4096, c, &y), GRT_OK);
  assert_int_not_equal(y, x);
  assert_int_equal(counters(p).reuses_deferred, 1);
  assert_int_equal(grt_exec_synchronize(exec), GRT_OK);
  assert_int_equal(counters(p).pending_frees, 0);
  assert_int_equal(grt_malloc_async(p, 4096, c, &w), GRT_OK);
  assert_int_not_equal(w, x); /* in A's bins of the allocator */
  assert_int_equal(grt_malloc_async(p, 4096, a, &z), GRT_OK);
  assert_int_equal(z, x);
  assert_int_equal(grt_free_async(p, y, c), GRT_OK);
  assert_int_equal(grt_free_async(p, w, c), GRT_OK);
  assert_int_equal(grt_free_async(p, z, a), GRT_OK);
  teardown(exec, p, a, c);
}

/* PyTorch's path over the executor: the free waits for the recorded stream. */
static void test_record_stream(void **state) {
  grt_exec *exec = make_exec(clock_of(state), 0);
  grt_mempool *p = make_pool(exec, "caching", GRT_REUSE_ALL, 0);
  grt_stream *a = make_stream(exec, GRT_STREAM_NON_BLOCKING, "A");
  grt_stream *c = make_stream(exec, GRT_STREAM_NON_BLOCKING, "C");
  grt_devptr x, y, z;
  grt_allocator *al;
  grt_alloc_stats st;
  assert_int_equal(grt_mempool_get_allocator(p, &al), GRT_OK);
  assert_int_equal(grt_mempool_malloc(p, 4096, a, &x), GRT_OK);
  assert_int_equal(grt_mempool_record_stream(p, x, c), GRT_OK);
  grt_user_event *u = gate(exec, c);
  busy(c, 200000);
  assert_int_equal(grt_mempool_free(p, x), GRT_OK);
  assert_int_equal(grt_mempool_free(p, x), GRT_ERR_UNKNOWN_POINTER);
  assert_int_equal(grt_mempool_malloc(p, 4096, a, &y), GRT_OK);
  assert_int_not_equal(y, x); /* still pending on C's event */
  assert_int_equal(grt_alloc_get_stats(al, &st), GRT_OK);
  assert_int_equal(st.pending_free_blocks, 1);
  open_gate(u);
  assert_int_equal(grt_exec_synchronize(exec), GRT_OK);
  assert_int_equal(grt_user_event_destroy(u), GRT_OK);
  assert_int_equal(grt_mempool_malloc(p, 4096, a, &z), GRT_OK);
  assert_int_equal(z, x);
  assert_int_equal(grt_mempool_free(p, y), GRT_OK);
  assert_int_equal(grt_mempool_free(p, z), GRT_OK);
  teardown(exec, p, a, c);
}

/* Release threshold at sync points, trim_to (it succeeds with a free pending,
 * keeping that memory), reserved/used current/high. */
static void test_threshold_trim(void **state) {
  static const char *policies[] = {"caching", "async"};
  for (int k = 0; k < 2; k++) {
    grt_exec *exec = exec_cap(clock_of(state), 128 * GRT_MiB);
    grt_mempool *p = make_pool(exec, policies[k], GRT_REUSE_ALL, 0);
    grt_stream *a = make_stream(exec, GRT_STREAM_NON_BLOCKING, "A");
    grt_mempool_attrs at;
    grt_devptr x;
    assert_int_equal(grt_mempool_set_release_threshold(p, 64 * GRT_MiB), GRT_OK);
    assert_int_equal(grt_malloc_async(p, 12 * GRT_MiB, a, &x), GRT_OK);
    assert_int_equal(grt_mempool_get_attrs(p, &at), GRT_OK);
    assert_true(at.used_mem_current >= 12 * GRT_MiB && at.reserved_mem_current >= at.used_mem_current);
    uint64_t reserved = at.reserved_mem_current;
    grt_user_event *u = gate(exec, a);
    busy(a, 100000);
    assert_int_equal(grt_free_async(p, x, a), GRT_OK);
    assert_int_equal(grt_mempool_trim_to(p, 0), GRT_OK); /* the free is not reached yet: its memory stays */
    assert_int_equal(grt_mempool_get_attrs(p, &at), GRT_OK);
    assert_int_equal(at.reserved_mem_current, reserved);
    open_gate(u);
    assert_int_equal(grt_mempool_get_attrs(p, &at), GRT_OK);
    assert_int_equal(at.reserved_mem_current, reserved);
    assert_int_equal(at.used_mem_current, 0);
    assert_true(at.used_mem_high >= 12 * GRT_MiB);
    assert_int_equal(grt_mempool_synchronize(p), GRT_OK); /* under the threshold: kept */
    assert_int_equal(grt_mempool_get_attrs(p, &at), GRT_OK);
    assert_int_equal(at.reserved_mem_current, reserved);
    assert_int_equal(grt_mempool_set_release_threshold(p, 0), GRT_OK);
    assert_int_equal(grt_mempool_synchronize(p), GRT_OK);
    assert_int_equal(grt_mempool_get_attrs(p, &at), GRT_OK);
    assert_int_equal(at.reserved_mem_current, 0);
    assert_int_equal(at.reserved_mem_high, reserved);
    assert_int_equal(grt_mempool_reset_high(p), GRT_OK);
    assert_int_equal(grt_mempool_get_attrs(p, &at), GRT_OK);
    assert_int_equal(at.reserved_mem_high, 0);
    assert_int_equal(at.used_mem_high, 0);
    assert_int_equal(grt_mempool_trim_to(p, 0), GRT_OK);
    assert_int_equal(grt_user_event_destroy(u), GRT_OK);
    teardown(exec, p, a, NULL);
  }
}

/* Bad input: a clear status and nothing changed. */
static void test_bad_input(void **state) {
  grt_exec *exec = make_exec(clock_of(state), 0);
  grt_mempool *p = make_pool(exec, "caching", GRT_REUSE_ALL, 0);
  grt_mempool *q = make_pool(exec, "async", GRT_REUSE_ALL, 0);
  grt_stream *a = make_stream(exec, GRT_STREAM_NON_BLOCKING, "A");
  grt_stream *gone = make_stream(exec, GRT_STREAM_NON_BLOCKING, "gone");
  grt_devptr x, y, z;
  assert_int_equal(grt_malloc_async(p, 0, a, &x), GRT_ERR_SIZE);
  assert_int_equal(grt_malloc_async(NULL, 8, a, &x), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt_malloc_async(p, 8, a, NULL), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt_malloc_async(p, 4096, a, &x), GRT_OK);
  assert_int_equal(grt_malloc_async(q, 4096, a, &y), GRT_OK);
  assert_int_equal(grt_stream_destroy(gone), GRT_OK);
  assert_int_equal(grt_malloc_async(p, 4096, gone, &z), GRT_ERR_INVALID_HANDLE);
  assert_int_equal(grt_free_async(p, x, gone), GRT_ERR_INVALID_HANDLE); /* the block stays live */
  assert_int_equal(grt_free_async(p, y, a), GRT_ERR_UNKNOWN_POINTER); /* another pool's */
  assert_int_equal(grt_free_async(p, x + 512, a), GRT_ERR_UNKNOWN_POINTER);
  assert_int_equal(grt_mempool_destroy(p), GRT_ERR_BUSY);
  grt_mempool_counters k = counters(p);
  assert_int_equal(k.frees, 0);
  assert_int_equal(grt_free_async(p, x, a), GRT_OK);
  assert_int_equal(grt_free_async(p, x, a), GRT_ERR_DOUBLE_FREE);
  assert_int_equal(grt_mempool_free_host_order(p, x), GRT_ERR_DOUBLE_FREE);
  assert_int_equal(grt_mempool_malloc(q, 64, a, &z), GRT_ERR_UNSUPPORTED);
  assert_int_equal(grt_free_async(q, y, a), GRT_OK);
  assert_int_equal(counters(p).frees, 1);
  char msg[128];
  assert_int_equal(grt_alloc_check(NULL, msg, sizeof msg), GRT_ERR_INVALID_ARG);
  grt_allocator *al;
  assert_int_equal(grt_mempool_get_allocator(p, &al), GRT_OK);
  assert_int_equal(grt_alloc_check(al, msg, sizeof msg), GRT_OK);
  /* A context of another exec. */
  grt_exec *other = make_exec(clock_of(state), 0);
  grt_sorder_config scfg;
  grt_sorder_config_default(&scfg);
  scfg.exec = other;
  grt_sorder *so;
  assert_int_equal(grt_sorder_create(&scfg, &so), GRT_OK);
  grt_mempool_config cfg;
  grt_mempool_config_default(&cfg);
  cfg.exec = exec;
  cfg.sorder = so;
  grt_mempool *r = NULL;
  assert_int_equal(grt_mempool_create(&cfg, &r), GRT_ERR_WRONG_DEVICE);
  assert_null(r);
  cfg.sorder = NULL;
  cfg.policy = "naive";
  assert_int_equal(grt_mempool_create(&cfg, &r), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt_sorder_destroy(so), GRT_OK);
  assert_int_equal(grt_exec_destroy(other), GRT_OK);
  assert_int_equal(grt_mempool_destroy(q), GRT_OK);
  teardown(exec, p, a, NULL);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      BOTH_CLOCKS(test_same_stream),    BOTH_CLOCKS(test_follow_event_deps), BOTH_CLOCKS(test_opportunistic),
      BOTH_CLOCKS(test_host_sync_point), BOTH_CLOCKS(test_oom_paths),        BOTH_CLOCKS(test_per_stream),
      BOTH_CLOCKS(test_record_stream),  BOTH_CLOCKS(test_threshold_trim),    BOTH_CLOCKS(test_bad_input),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
