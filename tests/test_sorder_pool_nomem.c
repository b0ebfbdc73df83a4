/* test_sorder_pool_nomem.c — the pool's calls that run out of host memory
 * change nothing (nomem_wrap.h fails the 1st, 2nd, ... allocation of a call
 * until one gets through): registering a sync observer, creating a pool
 * (with a sanitizer context: it is left unused), malloc_async through each
 * reuse path (the order query's own allocations included) and free_async.
 * After each refusal the pool's counters and attributes are as before and
 * the next attempt gives the result a call without failures gives. Virtual
 * clock only: no worker thread allocates behind the test's back. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "exec/observe.h"
#include "gpurt/sorder.h"
#include "nomem_wrap.h"

static grt_exec *exec_new(void) {
  grt_exec_config cfg;
  grt_exec_config_default(&cfg);
  cfg.clock = GRT_CLOCK_VIRTUAL;
  cfg.device_capacity = 64 * GRT_MiB;
  grt_exec *exec = NULL;
  assert_int_equal(grt_exec_create(&cfg, &exec), GRT_OK);
  return exec;
}

static void on_sync(void *ctx, const grt__sync_point *sp) {
  (void)sp;
  ++*(int *)ctx;
}

static void test_observe(void **state) {
  (void)state;
  grt_exec *exec = exec_new();
  int calls = 0;
  nomem_all();
  grt_status st = grt__exec_observe(exec, on_sync, &calls);
  assert_true(nomem_disarm());
  assert_int_equal(st, GRT_ERR_NOMEM);
  assert_int_equal(grt_exec_synchronize(exec), GRT_OK);
  assert_int_equal(calls, 0);
  assert_int_equal(grt_exec_destroy(exec), GRT_OK); /* nothing registered */
}

static void test_create(void **state) {
  (void)state;
  grt_exec *exec = exec_new();
  grt_sorder_config sc;
  grt_sorder_config_default(&sc);
  sc.exec = exec;
  sc.use_env = 0;
  grt_sorder *so = NULL;
  assert_int_equal(grt_sorder_create(&sc, &so), GRT_OK);
  for (long k = 1;; k++) {
    grt_mempool_config cfg;
    grt_mempool_config_default(&cfg);
    cfg.exec = exec;
    cfg.sorder = so;
    cfg.policy = k % 2 ? "caching" : "async";
    grt_mempool *p = (grt_mempool *)&cfg;
    nomem_arm(k);
    grt_status st = grt_mempool_create(&cfg, &p);
    bool fired = nomem_disarm();
    if (!fired) {
      assert_int_equal(st, GRT_OK);
      assert_int_equal(grt_mempool_destroy(p), GRT_OK);
      break;
    }
    if (st == GRT_OK) { /* the failure was absorbed */
      assert_int_equal(grt_mempool_destroy(p), GRT_OK);
      continue;
    }
    assert_int_equal(st, GRT_ERR_NOMEM);
    assert_null(p);
    assert_true(k < 1000);
  }
  assert_int_equal(grt_sorder_destroy(so), GRT_OK); /* no pool left attached */
  assert_int_equal(grt_exec_destroy(exec), GRT_OK); /* no observer left registered */
}

typedef struct state_of {
  grt_mempool_counters k;
  grt_mempool_attrs at;
} state_of;

static state_of snap(grt_mempool *p) {
  state_of s;
  memset(&s, 0, sizeof s);
  assert_int_equal(grt_mempool_get_counters(p, &s.k), GRT_OK);
  assert_int_equal(grt_mempool_get_attrs(p, &s.at), GRT_OK);
  return s;
}

/* Calls op with its k-th allocation failing, k = 1, 2, ...: each refusal
 * leaves the pool as it was; returns the first call that got through. */
typedef grt_status (*op_fn)(void *ctx);

static grt_status until_through(grt_mempool *p, op_fn op, void *ctx) {
  for (long k = 1; k < 1000; k++) {
    state_of before = snap(p);
    nomem_arm(k);
    grt_status st = op(ctx);
    bool fired = nomem_disarm();
    if (st != GRT_ERR_NOMEM) return st;
    assert_true(fired);
    state_of after = snap(p);
    assert_memory_equal(&before, &after, sizeof before);
  }
  fail_msg("no attempt got through");
  return GRT_ERR_INTERNAL;
}

typedef struct call {
  grt_mempool *p;
  grt_stream *s;
  uint64_t size;
  grt_devptr ptr;
} call;

static grt_status do_malloc(void *ctx) {
  call *c = ctx;
  return grt_malloc_async(c->p, c->size, c->s, &c->ptr);
}

static grt_status do_free(void *ctx) {
  call *c = ctx;
  return grt_free_async(c->p, c->ptr, c->s);
}

/* Each malloc_async path and free_async, with and without the sanitizer. */
static void test_calls(void **state) {
  (void)state;
  for (int with_so = 0; with_so < 2; with_so++) {
    grt_exec *exec = exec_new();
    grt_sorder *so = NULL;
    if (with_so) {
      grt_sorder_config sc;
      grt_sorder_config_default(&sc);
      sc.exec = exec;
      sc.use_env = 0;
      assert_int_equal(grt_sorder_create(&sc, &so), GRT_OK);
    }
    grt_mempool_config cfg;
    grt_mempool_config_default(&cfg);
    cfg.exec = exec;
    cfg.sorder = so;
    grt_mempool *p = NULL;
    assert_int_equal(grt_mempool_create(&cfg, &p), GRT_OK);
    grt_stream *a = NULL, *c = NULL;
    assert_int_equal(grt_stream_create(exec, GRT_STREAM_NON_BLOCKING, 0, &a), GRT_OK);
    assert_int_equal(grt_stream_create(exec, GRT_STREAM_NON_BLOCKING, 0, &c), GRT_OK);
    grt_user_event *u = NULL;
    assert_int_equal(grt_user_event_create(exec, "gate", &u), GRT_OK);
    assert_int_equal(grt_stream_wait_user_event(a, u, 1), GRT_OK);
    call x = {p, a, 4096, 0};
    assert_int_equal(until_through(p, do_malloc, &x), GRT_OK); /* a new block */
    assert_int_equal(until_through(p, do_free, &x), GRT_OK);
    call y = {p, c, 4096, 0};
    assert_int_equal(until_through(p, do_malloc, &y), GRT_OK); /* passes over x's pending free */
    assert_int_not_equal(y.ptr, x.ptr);
    grt_event *ev = NULL;
    assert_int_equal(grt_event_create(exec, GRT_EVENT_DISABLE_TIMING, &ev), GRT_OK);
    assert_int_equal(grt_event_record(ev, a), GRT_OK);
    assert_int_equal(grt_stream_wait_event(c, ev), GRT_OK);
    call z = {p, c, 4096, 0};
    assert_int_equal(until_through(p, do_malloc, &z), GRT_OK); /* behind the program's edge */
    assert_int_equal(z.ptr, x.ptr);
    assert_int_equal(until_through(p, do_free, &z), GRT_OK);
    call w = {p, c, 4096, 0};
    assert_int_equal(until_through(p, do_malloc, &w), GRT_OK); /* on the freeing stream */
    assert_int_equal(w.ptr, x.ptr);
    grt_mempool_counters k;
    assert_int_equal(grt_mempool_get_counters(p, &k), GRT_OK);
    assert_int_equal(k.reuse_event_dep, 1);
    assert_int_equal(k.reuse_same_stream, 1);
    assert_int_equal(k.mallocs, 4);
    assert_int_equal(k.frees, 2);
    assert_int_equal(grt_user_event_signal(u, 1), GRT_OK);
    assert_int_equal(grt_free_async(p, y.ptr, c), GRT_OK);
    assert_int_equal(grt_free_async(p, w.ptr, c), GRT_OK);
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

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_observe),
      cmocka_unit_test(test_create),
      cmocka_unit_test(test_calls),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
