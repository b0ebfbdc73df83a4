/* test_sorder_queries.c — the pool's own questions have no side effects.
 * Asking whether a free completed or whether a stream waits for it, inside
 * malloc_async, free_async, trim_to, the attribute calls and the PyTorch
 * path's record_stream completions, starts no work and moves no clock: only
 * synchronizing calls do. So one program gives the same answers on both
 * clocks (asserted by running it on each and comparing every figure). */
#include <string.h>

#include "sorder_pool_fixture.h"

/* Virtual clock only: there "no work ran, no time passed" is exact; under
 * threads the workers run work whenever it is ready, whatever the pool asks. */
static void test_pool_calls_move_nothing(void **state) {
  (void)state;
  grt_exec *exec = pool_exec(GRT_CLOCK_VIRTUAL, 48 * GRT_MiB);
  grt_mempool *p = pool_new(exec, NULL, "caching", GRT_REUSE_ALL);
  grt_stream *a = nb(exec, "A"), *c = nb(exec, "C");
  order_log log = {0};
  log_arg l1 = {&log, 1}, l2 = {&log, 2};
  grt_devptr x, y, z, t, big;
  assert_int_equal(grt_malloc_async(p, 4096, a, &x), GRT_OK);
  launch_logged(a, &l1, 1000); /* ready at once: any step of the simulation would run it */
  assert_int_equal(grt_free_async(p, x, a), GRT_OK);
  assert_int_equal(grt_malloc_async(p, 4096, c, &y), GRT_OK); /* asks OPPORTUNISTIC and FOLLOW about x */
  assert_int_equal(grt_malloc_async(p, 4096, a, &z), GRT_OK); /* same stream */
  assert_int_equal(z, x);
  assert_int_equal(grt_free_async(p, z, a), GRT_OK);
  assert_int_equal(grt_malloc_async(p, 47 * GRT_MiB, c, &big), GRT_ERR_OOM); /* the whole OOM path */
  assert_int_equal(grt_mempool_trim_to(p, 0), GRT_OK);
  uint64_t v;
  assert_int_equal(grt_mempool_get_attribute(p, GRT_MEMPOOL_ATTR_RESERVED_MEM_CURRENT, &v), GRT_OK);
  assert_int_equal(grt_mempool_set_attribute(p, GRT_MEMPOOL_ATTR_USED_MEM_HIGH, 0), GRT_OK);
  grt_mempool_counters k = pool_counters(p);
  /* PyTorch's path: a block with a pending record_stream event, then mallocs
   * that ask the allocator's completions. */
  assert_int_equal(grt_mempool_malloc(p, 4096, c, &t), GRT_OK);
  assert_int_equal(grt_mempool_record_stream(p, t, a), GRT_OK);
  launch_logged(a, &l2, 1000);
  assert_int_equal(grt_mempool_free(p, t), GRT_OK);
  grt_devptr t2;
  assert_int_equal(grt_mempool_malloc(p, 4096, c, &t2), GRT_OK);
  assert_int_not_equal(t2, t); /* still pending on A's event */
  assert_int_equal(now_of(exec), 0);
  assert_int_equal(log.n, 0);
  assert_int_equal(grt_stream_query(a), GRT_ERR_NOT_READY);
  assert_int_equal(k.pending_frees, 1);
  assert_int_equal(k.host_syncs, 0);
  assert_int_equal(k.edges_inserted, 0);
  /* A synchronizing call moves time and runs the work. */
  assert_int_equal(grt_stream_synchronize(a), GRT_OK);
  assert_int_equal(now_of(exec), 2000);
  assert_int_equal(log.n, 2);
  assert_int_equal(grt_mempool_free(p, t2), GRT_OK);
  assert_int_equal(grt_free_async(p, y, c), GRT_OK);
  assert_int_equal(grt_stream_destroy(a), GRT_OK);
  assert_int_equal(grt_stream_destroy(c), GRT_OK);
  assert_int_equal(grt_exec_synchronize(exec), GRT_OK);
  assert_int_equal(grt_mempool_destroy(p), GRT_OK);
  assert_int_equal(grt_exec_destroy(exec), GRT_OK);
}

/* Everything a program can learn from the pool. */
typedef struct answers {
  grt_devptr addr[8];
  grt_status st[4];
  grt_mempool_counters k[3];
  grt_mempool_attrs at[3];
} answers;

/* A program whose frees' completion does not depend on timing: the gate
 * holds A until the program opens it, and the program polls in between. */
static void program(grt_clock_kind clock, answers *r) {
  memset(r, 0, sizeof *r);
  grt_exec *exec = pool_exec(clock, 32 * GRT_MiB);
  grt_mempool *p = pool_new(exec, NULL, "caching", GRT_REUSE_ALL);
  grt_stream *a = nb(exec, "A"), *b = nb(exec, "B");
  grt_stream *c = nb(exec, "C");
  assert_int_equal(grt_malloc_async(p, 4096, a, &r->addr[0]), GRT_OK);
  grt_user_event *u = gate_on(exec, a);
  work(a, 5000);
  assert_int_equal(grt_free_async(p, r->addr[0], a), GRT_OK);
  grt_event *ev = mark(exec, a);
  for (int i = 0; i < 100; i++) r->st[0] |= grt_event_query(ev) == GRT_OK; /* polling: never done */
  assert_int_equal(grt_malloc_async(p, 4096, c, &r->addr[1]), GRT_OK);
  assert_int_equal(grt_stream_wait_event(c, ev), GRT_OK);
  assert_int_equal(grt_malloc_async(p, 4096, c, &r->addr[2]), GRT_OK);
  assert_int_equal(grt_free_async(p, r->addr[1], c), GRT_OK);
  assert_int_equal(grt_malloc_async(p, 4096, b, &r->addr[3]), GRT_OK);
  r->st[1] = grt_malloc_async(p, 31 * GRT_MiB, b, &r->addr[4]);
  r->st[2] = grt_mempool_trim_to(p, 0);
  assert_int_equal(grt_mempool_get_counters(p, &r->k[0]), GRT_OK);
  assert_int_equal(grt_mempool_get_attrs(p, &r->at[0]), GRT_OK);
  gate_open(u);
  assert_int_equal(grt_stream_synchronize(c), GRT_OK);
  assert_int_equal(grt_mempool_get_counters(p, &r->k[1]), GRT_OK);
  assert_int_equal(grt_mempool_get_attrs(p, &r->at[1]), GRT_OK);
  assert_int_equal(grt_malloc_async(p, 4096, b, &r->addr[5]), GRT_OK);
  assert_int_equal(grt_exec_synchronize(exec), GRT_OK);
  r->st[3] = grt_event_query(ev);
  assert_int_equal(grt_mempool_get_counters(p, &r->k[2]), GRT_OK);
  assert_int_equal(grt_mempool_get_attrs(p, &r->at[2]), GRT_OK);
  grt_devptr live[3] = {r->addr[2], r->addr[3], r->addr[5]};
  for (int i = 0; i < 3; i++) assert_int_equal(grt_free_async(p, live[i], b), GRT_OK);
  assert_int_equal(grt_event_destroy(ev), GRT_OK);
  assert_int_equal(grt_user_event_destroy(u), GRT_OK);
  grt_stream *all[3] = {a, b, c};
  for (int i = 0; i < 3; i++) assert_int_equal(grt_stream_destroy(all[i]), GRT_OK);
  assert_int_equal(grt_exec_synchronize(exec), GRT_OK);
  assert_int_equal(grt_mempool_destroy(p), GRT_OK);
  assert_int_equal(grt_exec_destroy(exec), GRT_OK);
}

static void test_same_answers_on_both_clocks(void **state) {
  (void)state;
  answers v, t;
  program(GRT_CLOCK_VIRTUAL, &v);
  program(GRT_CLOCK_THREADS, &t);
  assert_memory_equal(&v, &t, sizeof v);
  /* And they are CUDA's: no completion seen while gated, A's free reused on C
   * behind the program's edge only, C's own free not handed to B, the big
   * request out of memory, nothing waited for until the sync. */
  assert_int_equal(v.st[0], 0);
  assert_int_not_equal(v.addr[1], v.addr[0]);
  assert_int_equal(v.addr[2], v.addr[0]);
  assert_int_not_equal(v.addr[3], v.addr[1]);
  assert_int_equal(v.st[1], GRT_ERR_OOM);
  assert_int_equal(v.st[2], GRT_OK);
  assert_int_equal(v.k[0].reuse_event_dep, 1);
  assert_int_equal(v.k[0].reuses_deferred, 2);
  assert_int_equal(v.k[0].pending_frees, 1);
  assert_int_equal(v.k[0].host_syncs, 0);
  assert_int_equal(v.k[1].pending_frees, 0);
  assert_int_equal(v.k[1].host_syncs, 1);
  assert_int_equal(v.addr[5], v.addr[1]); /* handed back by C's sync */
  assert_int_equal(v.st[3], GRT_OK);
}

int main(void) {
  (void)clock_threads, (void)clock_virtual; /* each test picks its clocks itself */
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_pool_calls_move_nothing),
      cmocka_unit_test(test_same_answers_on_both_clocks),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
