/* test_sorder_syncpoints.c — the pool sees every synchronization (CUDA:
 * cudaMemPoolAttrReleaseThreshold applies "on the next call to stream, event
 * or context synchronize"), under both clocks with exact figures: the
 * threshold at plain, front-door and pool syncs; which frees each covers; a
 * failed sync and a sync inside a pool call are no sync points; the reuse
 * policies read back; the high watermarks reset by setting 0; trim_to with a
 * free pending trims what it can and succeeds. Threads only: pools created,
 * used and destroyed while another thread synchronizes (TSan). */
#include <pthread.h>

#include "base/status.h"
#include "sorder_pool_fixture.h"

#define MB12 (12 * GRT_MiB) /* a caching segment of its own: exactly 12 MiB reserved */

static void finish(grt_exec *exec, grt_mempool *p, grt_sorder *so, grt_stream *a, grt_stream *b) {
  assert_int_equal(grt_exec_synchronize(exec), GRT_OK);
  assert_int_equal(grt_mempool_destroy(p), GRT_OK);
  assert_int_equal(grt_sorder_destroy(so), GRT_OK);
  assert_int_equal(grt_stream_destroy(a), GRT_OK);
  assert_int_equal(grt_stream_destroy(b), GRT_OK);
  assert_int_equal(grt_exec_destroy(exec), GRT_OK);
}

/* Every way of synchronizing applies the threshold (0: release all cached). */
static void test_threshold_at_every_sync(void **state) {
  for (int how = 0; how < 6; how++) {
    grt_exec *exec = pool_exec(clock_of(state), 64 * GRT_MiB);
    grt_sorder *so = sorder_new(exec);
    grt_mempool *p = pool_new(exec, how == 4 ? so : NULL, "caching", GRT_REUSE_ALL);
    grt_stream *a = nb(exec, "A"), *b = nb(exec, "B");
    grt_devptr x;
    assert_int_equal(grt_malloc_async(p, MB12, a, &x), GRT_OK);
    work(a, 10000);
    assert_int_equal(grt_free_async(p, x, a), GRT_OK);
    grt_event *ev = mark(exec, a);
    assert_int_equal(pool_attrs(p).reserved_mem_current, MB12);
    grt_status st = how == 0   ? grt_stream_synchronize(a)
                    : how == 1 ? grt_event_synchronize(ev)
                    : how == 2 ? grt_exec_synchronize(exec)
                    : how == 3 ? grt_sorder_stream_synchronize(so, a)
                    : how == 4 ? grt_mempool_stream_synchronize(p, a)
                               : grt_mempool_synchronize(p);
    assert_int_equal(st, GRT_OK);
    grt_mempool_counters k = pool_counters(p);
    assert_int_equal(k.host_syncs, 1);
    assert_int_equal(k.pending_frees, 0);
    assert_int_equal(k.released_to_allocator, 1);
    grt_mempool_attrs at = pool_attrs(p);
    assert_int_equal(at.reserved_mem_current, 0);
    assert_int_equal(at.reserved_mem_high, MB12);
    assert_int_equal(grt_event_destroy(ev), GRT_OK);
    finish(exec, p, so, a, b);
  }
}

/* Under the threshold memory stays; lowered, the next sync (any) releases it,
 * also a sync of an event never recorded. */
static void test_threshold_kept_then_released(void **state) {
  grt_exec *exec = pool_exec(clock_of(state), 64 * GRT_MiB);
  grt_sorder *so = sorder_new(exec);
  grt_mempool *p = pool_new(exec, NULL, "caching", GRT_REUSE_ALL);
  grt_stream *a = nb(exec, "A"), *b = nb(exec, "B");
  assert_int_equal(grt_mempool_set_attribute(p, GRT_MEMPOOL_ATTR_RELEASE_THRESHOLD, 2 * MB12), GRT_OK);
  grt_devptr x;
  assert_int_equal(grt_malloc_async(p, MB12, a, &x), GRT_OK);
  assert_int_equal(grt_free_async(p, x, a), GRT_OK);
  assert_int_equal(grt_stream_synchronize(a), GRT_OK);
  assert_int_equal(pool_counters(p).pending_frees, 0);
  assert_int_equal(pool_attrs(p).reserved_mem_current, MB12);
  assert_int_equal(grt_mempool_set_release_threshold(p, 0), GRT_OK);
  assert_int_equal(pool_attrs(p).reserved_mem_current, MB12); /* not a sync point */
  grt_event *never = NULL;
  assert_int_equal(grt_event_create(exec, 0, &never), GRT_OK);
  assert_int_equal(grt_event_synchronize(never), GRT_OK);
  assert_int_equal(pool_attrs(p).reserved_mem_current, 0);
  assert_int_equal(pool_counters(p).host_syncs, 2);
  assert_int_equal(grt_event_destroy(never), GRT_OK);
  finish(exec, p, so, a, b);
}

/* A stream's sync covers its frees, an event's those on its stream, the
 * device's all; the others stay parked (gated: still pending). */
static void test_what_a_sync_covers(void **state) {
  grt_exec *exec = pool_exec(clock_of(state), 64 * GRT_MiB);
  grt_sorder *so = sorder_new(exec);
  grt_mempool *p = pool_new(exec, NULL, "caching", GRT_REUSE_ALL);
  grt_stream *a = nb(exec, "A"), *b = nb(exec, "B");
  grt_stream *c = nb(exec, "C");
  grt_devptr xa, xb, xc;
  assert_int_equal(grt_malloc_async(p, 4096, a, &xa), GRT_OK);
  assert_int_equal(grt_malloc_async(p, 4096, b, &xb), GRT_OK);
  assert_int_equal(grt_malloc_async(p, 4096, c, &xc), GRT_OK);
  grt_user_event *ub = gate_on(exec, b), *uc = gate_on(exec, c);
  assert_int_equal(grt_free_async(p, xa, a), GRT_OK);
  assert_int_equal(grt_free_async(p, xb, b), GRT_OK);
  assert_int_equal(grt_free_async(p, xc, c), GRT_OK);
  grt_event *eb = mark(exec, b);
  assert_int_equal(grt_stream_synchronize(a), GRT_OK);
  assert_int_equal(pool_counters(p).pending_frees, 2);
  gate_open(ub);
  assert_int_equal(grt_event_synchronize(eb), GRT_OK);
  assert_int_equal(pool_counters(p).pending_frees, 1);
  gate_open(uc);
  assert_int_equal(grt_exec_synchronize(exec), GRT_OK);
  grt_mempool_counters k = pool_counters(p);
  assert_int_equal(k.pending_frees, 0);
  assert_int_equal(k.host_syncs, 3);
  assert_int_equal(k.released_to_allocator, 3);
  assert_int_equal(grt_event_destroy(eb), GRT_OK);
  assert_int_equal(grt_user_event_destroy(ub), GRT_OK);
  assert_int_equal(grt_user_event_destroy(uc), GRT_OK);
  assert_int_equal(grt_stream_destroy(c), GRT_OK);
  finish(exec, p, so, a, b);
}

/* A sync that fails (it invalidates a capture) is no sync point; two pools on
 * one exec both see a sync that succeeds. */
static void test_failed_sync_and_two_pools(void **state) {
  grt_exec *exec = pool_exec(clock_of(state), 64 * GRT_MiB);
  grt_sorder *so = sorder_new(exec);
  grt_mempool *p = pool_new(exec, NULL, "caching", GRT_REUSE_ALL), *q = pool_new(exec, NULL, "async", GRT_REUSE_ALL);
  grt_stream *a = nb(exec, "A"), *b = nb(exec, "B");
  grt_devptr x;
  assert_int_equal(grt_malloc_async(p, MB12, a, &x), GRT_OK);
  assert_int_equal(grt_free_async(p, x, a), GRT_OK);
  assert_int_equal(grt_stream_begin_capture(b, GRT_CAPTURE_RELAXED), GRT_OK);
  assert_int_equal(grt_exec_synchronize(exec), GRT_ERR_CAPTURE_UNSUPPORTED);
  grt_graph *g = NULL;
  assert_int_equal(grt_stream_end_capture(b, &g), GRT_ERR_CAPTURE_INVALIDATED);
  assert_int_equal(pool_counters(p).host_syncs, 0);
  assert_int_equal(pool_counters(p).pending_frees, 1);
  assert_int_equal(pool_attrs(p).reserved_mem_current, MB12);
  assert_int_equal(grt_exec_synchronize(exec), GRT_OK);
  assert_int_equal(pool_counters(p).host_syncs, 1);
  assert_int_equal(pool_counters(q).host_syncs, 1);
  assert_int_equal(pool_attrs(p).reserved_mem_current, 0);
  assert_int_equal(grt_mempool_destroy(q), GRT_OK);
  finish(exec, p, so, a, b);
}

/* The allocator's own wait for its record_stream events (PyTorch's retry on
 * an out-of-memory) is made inside a pool call: no sync point. Under threads
 * B's work may end before the malloc asks, and then nothing waits: the wait
 * itself is asserted under the virtual clock only. */
static void test_sync_inside_pool_call(void **state) {
  grt_exec *exec = pool_exec(clock_of(state), 24 * GRT_MiB);
  grt_sorder *so = sorder_new(exec);
  grt_mempool *p = pool_new(exec, NULL, "caching", GRT_REUSE_ALL);
  grt_stream *a = nb(exec, "A"), *b = nb(exec, "B");
  grt_devptr x, y;
  assert_int_equal(grt_mempool_malloc(p, 16 * GRT_MiB, a, &x), GRT_OK);
  assert_int_equal(grt_mempool_record_stream(p, x, b), GRT_OK);
  work(b, 100000);
  assert_int_equal(grt_mempool_free(p, x), GRT_OK);
  assert_int_equal(grt_mempool_malloc(p, 16 * GRT_MiB, a, &y), GRT_OK);
  assert_int_equal(y, x);
  grt_allocator *al;
  grt_alloc_stats st;
  assert_int_equal(grt_mempool_get_allocator(p, &al), GRT_OK);
  assert_int_equal(grt_alloc_get_stats(al, &st), GRT_OK);
  if (clock_of(state) == GRT_CLOCK_VIRTUAL) assert_int_equal(st.num_sync_all_streams, 1);
  assert_int_equal(pool_counters(p).host_syncs, 0);
  assert_int_equal(grt_mempool_free(p, y), GRT_OK);
  finish(exec, p, so, a, b);
}

/* The exec refuses destruction while a pool watches its syncs. */
static void test_exec_busy_while_pool(void **state) {
  grt_exec *exec = pool_exec(clock_of(state), 16 * GRT_MiB);
  grt_mempool *p = pool_new(exec, NULL, "caching", GRT_REUSE_ALL);
  assert_int_equal(grt_exec_destroy(exec), GRT_ERR_BUSY);
  assert_int_equal(grt_mempool_destroy(p), GRT_OK);
  assert_int_equal(grt_exec_destroy(exec), GRT_OK);
}

/* cudaMemPoolAttr one at a time: the reuse policies read back and change the
 * next decision; the currents are read only; a high watermark resets by
 * setting 0 and refuses anything else, each on its own. */
static void test_attributes(void **state) {
  grt_exec *exec = pool_exec(clock_of(state), 64 * GRT_MiB);
  grt_sorder *so = sorder_new(exec);
  grt_mempool *p = pool_new(exec, NULL, "caching", GRT_REUSE_FOLLOW_EVENT_DEPS | GRT_REUSE_INTERNAL_DEPS);
  grt_stream *a = nb(exec, "A"), *b = nb(exec, "B");
  uint64_t v = 9;
  assert_int_equal(grt_mempool_get_attribute(p, GRT_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPS, &v), GRT_OK);
  assert_int_equal(v, 1);
  assert_int_equal(grt_mempool_get_attribute(p, GRT_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC, &v), GRT_OK);
  assert_int_equal(v, 0);
  assert_int_equal(grt_mempool_get_attribute(p, GRT_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPS, &v), GRT_OK);
  assert_int_equal(v, 1);
  assert_int_equal(pool_attrs(p).reuse, GRT_REUSE_FOLLOW_EVENT_DEPS | GRT_REUSE_INTERNAL_DEPS);
  assert_int_equal(grt_mempool_set_attribute(p, GRT_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC, 1), GRT_OK);
  assert_int_equal(grt_mempool_set_attribute(p, GRT_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPS, 0), GRT_OK);
  assert_int_equal(pool_attrs(p).reuse, GRT_REUSE_OPPORTUNISTIC | GRT_REUSE_INTERNAL_DEPS);
  /* FOLLOW_EVENT_DEPS now off: the program's edge no longer licenses the reuse. */
  grt_devptr x, y, z;
  assert_int_equal(grt_malloc_async(p, MB12, a, &x), GRT_OK);
  grt_user_event *u = gate_on(exec, a);
  assert_int_equal(grt_free_async(p, x, a), GRT_OK);
  grt_event *ev = edge(exec, a, b);
  assert_int_equal(grt_malloc_async(p, MB12, b, &y), GRT_OK);
  assert_int_not_equal(y, x);
  assert_int_equal(grt_mempool_set_attribute(p, GRT_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPS, 1), GRT_OK);
  assert_int_equal(grt_malloc_async(p, MB12, b, &z), GRT_OK);
  assert_int_equal(z, x);
  gate_open(u);
  /* Refusals change nothing. */
  grt_mempool_attrs before = pool_attrs(p);
  assert_int_equal(grt_mempool_set_attribute(p, GRT_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC, 2), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt_mempool_set_attribute(p, GRT_MEMPOOL_ATTR_RESERVED_MEM_CURRENT, 0), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt_mempool_set_attribute(p, GRT_MEMPOOL_ATTR_USED_MEM_CURRENT, 0), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt_mempool_set_attribute(p, GRT_MEMPOOL_ATTR_RESERVED_MEM_HIGH, 1), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt_mempool_set_attribute(p, GRT_MEMPOOL_ATTR_USED_MEM_HIGH, MB12), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt_mempool_set_attribute(p, (grt_mempool_attr)0, 0), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt_mempool_set_attribute(p, (grt_mempool_attr)9, 0), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt_mempool_get_attribute(p, (grt_mempool_attr)9, &v), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt_mempool_set_attribute(NULL, GRT_MEMPOOL_ATTR_RELEASE_THRESHOLD, 0), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt_mempool_get_attribute(NULL, GRT_MEMPOOL_ATTR_RELEASE_THRESHOLD, &v), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt_mempool_get_attribute(p, GRT_MEMPOOL_ATTR_RELEASE_THRESHOLD, NULL), GRT_ERR_INVALID_ARG);
  grt_mempool_attrs after = pool_attrs(p);
  assert_memory_equal(&before, &after, sizeof before);
  /* High watermarks: 24 MiB reserved and used at the peak; y freed and synced. */
  assert_int_equal(grt_free_async(p, y, b), GRT_OK);
  assert_int_equal(grt_stream_synchronize(b), GRT_OK);
  grt_mempool_attr order[4] = {GRT_MEMPOOL_ATTR_RESERVED_MEM_CURRENT, GRT_MEMPOOL_ATTR_RESERVED_MEM_HIGH,
                               GRT_MEMPOOL_ATTR_USED_MEM_CURRENT, GRT_MEMPOOL_ATTR_USED_MEM_HIGH};
  uint64_t want[3][4] = {{MB12, 2 * MB12, MB12, 2 * MB12}, {MB12, 2 * MB12, MB12, MB12}, {MB12, MB12, MB12, MB12}};
  for (int step = 0; step < 3; step++) {
    if (step == 1) assert_int_equal(grt_mempool_set_attribute(p, GRT_MEMPOOL_ATTR_USED_MEM_HIGH, 0), GRT_OK);
    if (step == 2) assert_int_equal(grt_mempool_set_attribute(p, GRT_MEMPOOL_ATTR_RESERVED_MEM_HIGH, 0), GRT_OK);
    for (int i = 0; i < 4; i++) {
      assert_int_equal(grt_mempool_get_attribute(p, order[i], &v), GRT_OK);
      assert_int_equal(v, want[step][i]);
    }
  }
  assert_int_equal(grt_mempool_get_attribute(p, GRT_MEMPOOL_ATTR_RELEASE_THRESHOLD, &v), GRT_OK);
  assert_int_equal(v, 0);
  assert_int_equal(grt_free_async(p, z, b), GRT_OK);
  assert_int_equal(grt_event_destroy(ev), GRT_OK);
  assert_int_equal(grt_user_event_destroy(u), GRT_OK);
  finish(exec, p, so, a, b);
}

/* trim_to with a free pending: what is cached goes, the pending free's
 * segment stays, and it succeeds. A free the device passed but no sync
 * covered counts as outstanding, except under OPPORTUNISTIC. */
static void test_trim_with_pending(void **state) {
  for (int opp = 0; opp < 2; opp++) {
    grt_exec *exec = pool_exec(clock_of(state), 64 * GRT_MiB);
    grt_sorder *so = sorder_new(exec);
    grt_mempool *p = pool_new(exec, NULL, "caching", opp ? GRT_REUSE_ALL : GRT_REUSE_FOLLOW_EVENT_DEPS);
    grt_stream *a = nb(exec, "A"), *b = nb(exec, "B");
    grt_stream *c = nb(exec, "C");
    assert_int_equal(grt_mempool_set_release_threshold(p, UINT64_MAX), GRT_OK);
    grt_devptr xa, xb, xc;
    assert_int_equal(grt_malloc_async(p, MB12, a, &xa), GRT_OK);
    assert_int_equal(grt_malloc_async(p, MB12, b, &xb), GRT_OK);
    assert_int_equal(grt_malloc_async(p, MB12, c, &xc), GRT_OK);
    assert_int_equal(grt_free_async(p, xa, a), GRT_OK);
    assert_int_equal(grt_stream_synchronize(a), GRT_OK); /* handed back, cached */
    grt_user_event *u = gate_on(exec, b);
    assert_int_equal(grt_free_async(p, xb, b), GRT_OK); /* pending */
    assert_int_equal(grt_free_async(p, xc, c), GRT_OK);
    grt_event *ev = edge(exec, c, a);
    assert_int_equal(grt_stream_synchronize(a), GRT_OK); /* C's free completed, not covered */
    assert_int_equal(pool_counters(p).pending_frees, 2);
    assert_int_equal(pool_attrs(p).reserved_mem_current, 3 * MB12);
    uint64_t t0 = now_of(exec);
    assert_int_equal(grt_mempool_trim_to(p, 0), GRT_OK);
    if (clock_of(state) == GRT_CLOCK_VIRTUAL) assert_int_equal(now_of(exec), t0);
    assert_int_equal(pool_counters(p).pending_frees, 2 - opp);
    assert_int_equal(pool_attrs(p).reserved_mem_current, (2 - opp) * MB12);
    gate_open(u);
    assert_int_equal(grt_event_destroy(ev), GRT_OK);
    assert_int_equal(grt_user_event_destroy(u), GRT_OK);
    assert_int_equal(grt_stream_destroy(c), GRT_OK);
    finish(exec, p, so, a, b);
  }
}

/* Threads only: one thread allocates, frees and synchronizes on a pool while
 * another creates, uses and destroys pools of the same exec and synchronizes
 * the device (observers registered and removed under concurrent syncs). */
typedef struct churn {
  grt_exec *exec;
  grt_status st;
} churn;

static void *churn_pools(void *arg) {
  churn *c = arg;
  grt_stream *s = NULL;
  if ((c->st = grt_stream_create(c->exec, GRT_STREAM_NON_BLOCKING, 0, &s))) return NULL;
  for (int i = 0; i < 100 && !c->st; i++) {
    grt_mempool_config cfg;
    grt_mempool_config_default(&cfg);
    cfg.exec = c->exec;
    grt_mempool *q = NULL;
    grt_devptr x;
    if ((c->st = grt_mempool_create(&cfg, &q))) break;
    if (!(c->st = grt_malloc_async(q, 4096, s, &x)) && !(c->st = grt_free_async(q, x, s)))
      c->st = grt_exec_synchronize(c->exec);
    grt__keep_first(&c->st, grt_mempool_destroy(q));
  }
  grt__keep_first(&c->st, grt_stream_destroy(s));
  return NULL;
}

static void test_concurrent_observers(void **state) {
  (void)state;
  grt_exec *exec = pool_exec(GRT_CLOCK_THREADS, 64 * GRT_MiB);
  grt_mempool *p = pool_new(exec, NULL, "caching", GRT_REUSE_ALL);
  grt_stream *a = nb(exec, "A");
  churn c = {exec, GRT_OK};
  pthread_t t;
  assert_int_equal(pthread_create(&t, NULL, churn_pools, &c), 0);
  for (int i = 0; i < 200; i++) {
    grt_devptr x;
    assert_int_equal(grt_malloc_async(p, 4096 * (1 + i % 4), a, &x), GRT_OK);
    work(a, 1000);
    assert_int_equal(grt_free_async(p, x, a), GRT_OK);
    if (i % 3 == 0) assert_int_equal(grt_stream_synchronize(a), GRT_OK);
  }
  assert_int_equal(pthread_join(t, NULL), 0);
  assert_int_equal(c.st, GRT_OK);
  assert_true(pool_counters(p).host_syncs >= 67);
  assert_int_equal(grt_stream_destroy(a), GRT_OK);
  assert_int_equal(grt_exec_synchronize(exec), GRT_OK);
  assert_int_equal(grt_mempool_destroy(p), GRT_OK);
  assert_int_equal(grt_exec_destroy(exec), GRT_OK);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      BOTH_CLOCKS(test_threshold_at_every_sync),
      BOTH_CLOCKS(test_threshold_kept_then_released),
      BOTH_CLOCKS(test_what_a_sync_covers),
      BOTH_CLOCKS(test_failed_sync_and_two_pools),
      BOTH_CLOCKS(test_sync_inside_pool_call),
      BOTH_CLOCKS(test_exec_busy_while_pool),
      BOTH_CLOCKS(test_attributes),
      BOTH_CLOCKS(test_trim_with_pending),
      cmocka_unit_test(test_concurrent_observers),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
