/* sorder_pool_fixture.h — helpers shared by the stream-ordered pool's tests
 * (tests/test_sorder_policy.c, test_sorder_syncpoints.c, test_sorder_queries.c):
 * an exec with a device of a given size, a pool, user-event gates that hold a
 * stream (so a free stays pending under either clock), recorded events, and
 * the pool's figures. */
#ifndef GRT_TESTS_SORDER_POOL_FIXTURE_H
#define GRT_TESTS_SORDER_POOL_FIXTURE_H

#include <string.h>

#include "gpurt/sorder.h"
#include "test_exec_common.h"

static inline grt_exec *pool_exec(grt_clock_kind clock, uint64_t cap) {
  grt_exec_config cfg;
  grt_exec_config_default(&cfg);
  cfg.clock = clock;
  cfg.device_capacity = cap;
  grt_exec *exec = NULL;
  assert_int_equal(grt_exec_create(&cfg, &exec), GRT_OK);
  return exec;
}

static inline grt_mempool *pool_new(grt_exec *exec, grt_sorder *so, const char *policy, unsigned reuse) {
  grt_mempool_config cfg;
  grt_mempool_config_default(&cfg);
  cfg.exec = exec;
  cfg.sorder = so;
  cfg.policy = policy;
  cfg.reuse = reuse;
  grt_mempool *p = NULL;
  assert_int_equal(grt_mempool_create(&cfg, &p), GRT_OK);
  return p;
}

static inline grt_sorder *sorder_new(grt_exec *exec) {
  grt_sorder_config cfg;
  grt_sorder_config_default(&cfg);
  cfg.exec = exec;
  cfg.use_env = 0;
  grt_sorder *so = NULL;
  assert_int_equal(grt_sorder_create(&cfg, &so), GRT_OK);
  return so;
}

static inline grt_stream *nb(grt_exec *exec, const char *name) {
  return make_stream(exec, GRT_STREAM_NON_BLOCKING, name);
}

/* Holds s until the returned user event is signalled. */
static inline grt_user_event *gate_on(grt_exec *exec, grt_stream *s) {
  grt_user_event *u = NULL;
  assert_int_equal(grt_user_event_create(exec, "gate", &u), GRT_OK);
  assert_int_equal(grt_stream_wait_user_event(s, u, 1), GRT_OK);
  return u;
}

static inline void gate_open(grt_user_event *u) { assert_int_equal(grt_user_event_signal(u, 1), GRT_OK); }

static inline void work(grt_stream *s, uint64_t ns) {
  grt_kernel_desc d = {NULL, NULL, ns, GRT_ENGINE_COMPUTE, "work"};
  assert_int_equal(grt_launch_kernel(s, &d), GRT_OK);
}

/* An event recorded on s now (the caller destroys it). */
static inline grt_event *mark(grt_exec *exec, grt_stream *s) {
  grt_event *ev = NULL;
  assert_int_equal(grt_event_create(exec, GRT_EVENT_DISABLE_TIMING, &ev), GRT_OK);
  assert_int_equal(grt_event_record(ev, s), GRT_OK);
  return ev;
}

/* The program's own edge: `to` waits for what `from` issued so far. */
static inline grt_event *edge(grt_exec *exec, grt_stream *from, grt_stream *to) {
  grt_event *ev = mark(exec, from);
  assert_int_equal(grt_stream_wait_event(to, ev), GRT_OK);
  return ev;
}

static inline grt_mempool_counters pool_counters(grt_mempool *p) {
  grt_mempool_counters c;
  memset(&c, 0, sizeof c);
  assert_int_equal(grt_mempool_get_counters(p, &c), GRT_OK);
  return c;
}

static inline grt_mempool_attrs pool_attrs(grt_mempool *p) {
  grt_mempool_attrs a;
  memset(&a, 0, sizeof a); /* the padding too: tests compare whole structs */
  assert_int_equal(grt_mempool_get_attrs(p, &a), GRT_OK);
  return a;
}

static inline uint64_t now_of(grt_exec *exec) {
  uint64_t t;
  assert_int_equal(grt_exec_now_ns(exec, &t), GRT_OK);
  return t;
}

#endif
