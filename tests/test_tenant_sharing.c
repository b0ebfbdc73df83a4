/* test_tenant_sharing.c — the three ways of sharing a GPU, exactly (virtual
 * time): time slicing gives busy tenants the device in turns with the switch
 * cost the formula predicts; a MIG instance's latency does not move with
 * its neighbour's load; an MPS client never holds more than its share and
 * an uncapped one may take the whole device; a fault ends every MPS client
 * but only its own MIG instance; memory limits and a shared device's
 * exhaustion refuse with the caching allocator's OOM. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "gpurt/tenant.h"

#define MS 1000000ull
#define S 100u

static grt_gpu_config gpu(grt_share_mode mode, uint64_t horizon) {
  grt_gpu_config g;
  grt_gpu_config_default(&g);
  g.sms = S;
  g.memory_bytes = 1ull << 30;
  g.mode = mode;
  g.horizon_ns = horizon;
  return g;
}

/* A closed-loop tenant of one kernel. */
static grt_tenant_config busy(const char *name, uint64_t work, uint32_t max_sms) {
  grt_tenant_config c;
  grt_tenant_config_default(&c);
  snprintf(c.name, sizeof c.name, "%s", name);
  c.kernels[0] = (grt_tenant_kernel){work, max_sms, -1};
  return c;
}

/* A Poisson tenant: requests of three small kernels in a chain. */
static grt_tenant_config inference(double rate) {
  grt_tenant_config c;
  grt_tenant_config_default(&c);
  snprintf(c.name, sizeof c.name, "infer");
  c.arrival = GRT_ARRIVAL_POISSON;
  c.rate_per_s = rate;
  c.n_kernels = 3;
  for (int i = 0; i < 3; i++) c.kernels[i] = (grt_tenant_kernel){20 * 50000, 20, i - 1}; /* 50 us on 20 SMs */
  return c;
}

static grt_tenant_sim *make(const grt_gpu_config *g, const grt_tenant_config *a, const grt_tenant_config *b) {
  grt_tenant_sim *sim;
  assert_int_equal(grt_tenant_sim_create(g, &sim), GRT_OK);
  uint32_t i;
  assert_int_equal(grt_tenant_sim_add(sim, a, &i), GRT_OK);
  assert_int_equal(i, 0);
  if (b) assert_int_equal(grt_tenant_sim_add(sim, b, &i), GRT_OK);
  assert_int_equal(grt_tenant_sim_run(sim), GRT_OK);
  return sim;
}

static grt_tenant_stats stats_of(grt_tenant_sim *sim, uint32_t i) {
  grt_tenant_stats s;
  assert_int_equal(grt_tenant_sim_stats(sim, i, &s), GRT_OK);
  return s;
}

/* Two tenants, each one request of 10 ms of the whole device, 2 ms slices,
 * 40 us switches: A runs slices at 0, 4.08, ..., 16.32 ms and ends at
 * (k-1)*N*(T+s) + T = 18.32 ms; B, one slot later, at 20.36 ms; 9 switches. */
static void test_time_slicing_turns(void **state) {
  (void)state;
  grt_gpu_config g = gpu(GRT_SHARE_TIME_SLICE, 1);
  grt_tenant_config a = busy("a", 10 * MS * S, S), b = busy("b", 10 * MS * S, S);
  grt_tenant_sim *sim = make(&g, &a, &b);
  grt_tenant_stats sa = stats_of(sim, 0), sb = stats_of(sim, 1);
  const uint64_t T = 2 * MS, sw = 40000, k = 5, N = 2;
  assert_int_equal(sa.completed, 1);
  assert_int_equal(sa.max_ns, (k - 1) * N * (T + sw) + T);
  assert_int_equal(sb.max_ns, (k - 1) * N * (T + sw) + (T + sw) + T);
  assert_int_equal(sa.sm_ns, 10 * MS * S);
  assert_int_equal(sb.sm_ns, 10 * MS * S);
  assert_int_equal(sa.preemptions, k - 1);
  assert_int_equal(sb.preemptions, k - 1);
  grt_gpu_stats gs;
  assert_int_equal(grt_tenant_sim_gpu_stats(sim, &gs), GRT_OK);
  assert_int_equal(gs.switches, 2 * k - 1);
  assert_int_equal(gs.end_ns, sb.max_ns);
  assert_true(gs.utilization > 0.98 && gs.utilization < 0.983); /* 20 / 20.36 */
  assert_int_equal(grt_tenant_sim_destroy(sim), GRT_OK);

  /* Alone, the same request takes its 10 ms and no switch. */
  sim = make(&g, &a, NULL);
  assert_int_equal(stats_of(sim, 0).max_ns, 10 * MS);
  assert_int_equal(grt_tenant_sim_gpu_stats(sim, &gs), GRT_OK);
  assert_int_equal(gs.switches, 0);
  assert_int_equal(grt_tenant_sim_destroy(sim), GRT_OK);
}

/* A kernel's duration follows from the SMs it gets; a DAG's branches share the SMs. */
static void test_kernel_shapes(void **state) {
  (void)state;
  grt_gpu_config g = gpu(GRT_SHARE_TIME_SLICE, 1);
  grt_tenant_config c = busy("dag", 1, 1);
  c.n_kernels = 4;
  c.kernels[0] = (grt_tenant_kernel){100000, 50, -1}; /* 2000 ns on 50 SMs */
  c.kernels[1] = (grt_tenant_kernel){100000, 50, 0};  /* 1 and 2 side by side: 2000 ns */
  c.kernels[2] = (grt_tenant_kernel){100000, 50, 0};
  c.kernels[3] = (grt_tenant_kernel){100001, 200, 1}; /* all 100 SMs: ceil(1000.01) = 1001 ns */
  grt_tenant_sim *sim = make(&g, &c, NULL);
  grt_tenant_stats s = stats_of(sim, 0);
  assert_int_equal(s.max_ns, 2000 + 2000 + 1001);
  assert_int_equal(s.kernels, 4);
  assert_int_equal(s.max_sms_held, 100);
  assert_int_equal(grt_tenant_sim_destroy(sim), GRT_OK);
}

/* MIG: the inference tenant's every figure is the same beside an idle or a
 * saturating neighbour. */
static void test_mig_isolation(void **state) {
  (void)state;
  grt_gpu_config g = gpu(GRT_SHARE_MIG, 200 * MS);
  grt_tenant_config a = inference(2000), idle = inference(1), load = busy("train", 50 * MS * 50, 50);
  a.mig_sms = 50, a.mig_memory = 512ull << 20;
  idle.mig_sms = load.mig_sms = 50;
  idle.mig_memory = load.mig_memory = 512ull << 20;
  grt_tenant_sim *quiet = make(&g, &a, &idle), *noisy = make(&g, &a, &load);
  grt_tenant_stats q = stats_of(quiet, 0), n = stats_of(noisy, 0);
  assert_true(q.completed > 300);
  assert_int_equal(q.completed, n.completed);
  assert_int_equal(q.p50_ns, n.p50_ns);
  assert_int_equal(q.p99_ns, n.p99_ns);
  assert_int_equal(q.max_ns, n.max_ns);
  assert_int_equal(q.p50_ns, 150000); /* three 50 us kernels, never queued at this rate */
  assert_true(stats_of(noisy, 1).sm_ns > 0);
  assert_int_equal(grt_tenant_sim_destroy(quiet), GRT_OK);
  assert_int_equal(grt_tenant_sim_destroy(noisy), GRT_OK);
}

/* MPS: a 25% client holds at most 25 SMs even alone; an uncapped one takes 100. */
static void test_mps_cap(void **state) {
  (void)state;
  grt_gpu_config g = gpu(GRT_SHARE_MPS, 20 * MS);
  grt_tenant_config a = busy("capped", MS * S, S), b = busy("free", MS * S, S);
  a.sm_percent = 25;
  a.concurrency = 8;
  grt_tenant_sim *sim = make(&g, &a, NULL);
  grt_tenant_stats s = stats_of(sim, 0);
  assert_int_equal(s.max_sms_held, 25);
  assert_int_equal(s.max_ns, 8 * 4 * MS); /* 8 kernels of 100 SM-ms one after another on 25 SMs */
  assert_int_equal(grt_tenant_sim_destroy(sim), GRT_OK);
  sim = make(&g, &b, &a); /* b first: at t = 0 it takes every SM, the cap reserves none for a */
  assert_int_equal(stats_of(sim, 0).max_sms_held, 100);
  assert_int_equal(stats_of(sim, 1).max_sms_held, 25);
  grt_gpu_stats gs;
  assert_int_equal(grt_tenant_sim_gpu_stats(sim, &gs), GRT_OK);
  assert_int_equal(gs.switches, 0);
  assert_int_equal(grt_tenant_sim_destroy(sim), GRT_OK);
}

/* A fatal fault at 5 ms: under MPS both clients end, under MIG only its instance. */
static void test_fault_scope(void **state) {
  (void)state;
  for (int mig = 0; mig <= 1; mig++) {
    grt_gpu_config g = gpu(mig ? GRT_SHARE_MIG : GRT_SHARE_MPS, 20 * MS);
    grt_tenant_config a = busy("faulty", MS * 50, 50), b = busy("bystander", MS * 50, 50);
    a.mig_sms = b.mig_sms = 50;
    a.mig_memory = b.mig_memory = 256ull << 20;
    a.fault_at_ns = 5 * MS + 500000;
    grt_tenant_sim *sim = make(&g, &a, &b);
    grt_tenant_stats sa = stats_of(sim, 0), sb = stats_of(sim, 1);
    assert_int_equal(sa.status, GRT_ERR_FAULT_INJECTED);
    assert_int_equal(sa.completed, 5);
    assert_int_equal(sa.cancelled, 1);
    if (mig) {
      assert_int_equal(sb.status, GRT_OK);
      assert_int_equal(sb.completed, 20);
    } else {
      assert_int_equal(sb.status, GRT_ERR_FAULT_INJECTED);
      assert_int_equal(sb.completed, 5);
    }
    assert_int_equal(grt_tenant_sim_destroy(sim), GRT_OK);
  }
}

/* A limit below a request refuses it with the allocator's OOM; on a shared
 * device the first tenant's weights leave too little for the second's. */
static void test_memory_limits(void **state) {
  (void)state;
  grt_gpu_config g = gpu(GRT_SHARE_MPS, 10 * MS);
  grt_tenant_config a = busy("limited", MS * 10, 10), big = busy("big", MS, 10), late = busy("late", MS, 10);
  a.memory_limit = 256ull << 20;
  a.request_bytes = 300ull << 20;
  grt_tenant_sim *sim = make(&g, &a, NULL);
  grt_tenant_stats s = stats_of(sim, 0);
  assert_int_equal(s.refused_oom, 1);
  assert_int_equal(s.completed, 0);
  assert_int_equal(grt_tenant_sim_destroy(sim), GRT_OK);
  big.static_bytes = 700ull << 20;
  late.static_bytes = 400ull << 20;
  sim = make(&g, &big, &late);
  assert_int_equal(stats_of(sim, 0).status, GRT_OK);
  assert_int_equal(stats_of(sim, 1).status, GRT_ERR_OOM);
  assert_int_equal(stats_of(sim, 1).completed, 0);
  assert_int_equal(grt_tenant_sim_destroy(sim), GRT_OK);
  /* MIG: the same pair fits, each in its own instance */
  g.mode = GRT_SHARE_MIG;
  big.mig_sms = late.mig_sms = 50;
  big.mig_memory = 768ull << 20;
  late.mig_memory = 256ull << 20;
  sim = make(&g, &big, &late);
  assert_int_equal(stats_of(sim, 1).status, GRT_ERR_OOM); /* 400 MiB do not fit its 256 */
  assert_int_equal(stats_of(sim, 0).status, GRT_OK);
  assert_int_equal(grt_tenant_sim_destroy(sim), GRT_OK);
}

/* MPS priorities: a hint by default (a high-priority kernel waits for SMs
 * to free, here behind 10 ms training kernels); with preempt_ns it stops
 * them and starts that much later, so no request takes more than its
 * 100 us kernel plus the 20 us preemption. */
static void test_mps_priority_preemption(void **state) {
  (void)state;
  for (int preempt = 0; preempt <= 1; preempt++) {
    grt_gpu_config g = gpu(GRT_SHARE_MPS, 200 * MS);
    g.preempt_ns = preempt ? 20000 : 0;
    grt_tenant_config hi = inference(100), lo = busy("train", 10 * MS * S, S);
    hi.n_kernels = 1;
    hi.kernels[0] = (grt_tenant_kernel){50 * 100000, 50, -1}; /* 100 us on 50 SMs */
    hi.priority = 1;
    grt_tenant_sim *sim = make(&g, &lo, &hi);
    grt_tenant_stats h = stats_of(sim, 1), l = stats_of(sim, 0);
    assert_true(h.completed > 5);
    assert_int_equal(h.preemptions, 0);
    if (preempt) {
      assert_true(l.preemptions > 0);
      assert_int_equal(h.max_ns, 100000 + 20000);
      assert_true(h.p50_ns >= 100000);
    } else {
      assert_int_equal(l.preemptions, 0);
      assert_true(h.max_ns > MS); /* behind a running 10 ms kernel */
    }
    assert_int_equal(grt_tenant_sim_destroy(sim), GRT_OK);
  }
}

static void test_bad_input(void **state) {
  (void)state;
  grt_gpu_config g = gpu(GRT_SHARE_MIG, MS);
  grt_tenant_sim *sim = NULL;
  g.sms = 0;
  assert_int_equal(grt_tenant_sim_create(&g, &sim), GRT_ERR_INVALID_ARG);
  assert_null(sim);
  g.sms = S;
  assert_int_equal(grt_tenant_sim_create(&g, &sim), GRT_OK);
  assert_int_equal(grt_tenant_sim_run(sim), GRT_ERR_INVALID_ARG); /* no tenant */
  grt_tenant_config c = busy("x", MS, 10);
  c.mig_sms = 60, c.mig_memory = 1 << 20;
  assert_int_equal(grt_tenant_sim_add(sim, &c, NULL), GRT_OK);
  assert_int_equal(grt_tenant_sim_add(sim, &c, NULL), GRT_ERR_INVALID_ARG); /* 120 SMs of 100 */
  char err[256];
  assert_int_equal(grt_tenant_sim_last_error(sim, err, sizeof err), GRT_OK);
  assert_non_null(strstr(err, "tenant 1 'x': MIG instances"));
  c.mig_sms = 40;
  c.kernels[0].after = 0;
  assert_int_equal(grt_tenant_sim_add(sim, &c, NULL), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt_tenant_sim_last_error(sim, err, sizeof err), GRT_OK);
  assert_non_null(strstr(err, "kernel 0 waits for kernel 0"));
  c.kernels[0].after = -1;
  c.kernels[0].work_sm_ns = 0;
  assert_int_equal(grt_tenant_sim_add(sim, &c, NULL), GRT_ERR_INVALID_ARG);
  c.kernels[0].work_sm_ns = 1;
  c.arrival = GRT_ARRIVAL_POISSON; /* rate 0 */
  assert_int_equal(grt_tenant_sim_add(sim, &c, NULL), GRT_ERR_INVALID_ARG);
  grt_tenant_stats s;
  assert_int_equal(grt_tenant_sim_stats(sim, 1, &s), GRT_ERR_INVALID_ARG); /* the refused ones left nothing */
  assert_int_equal(grt_tenant_sim_run(sim), GRT_OK);
  assert_int_equal(grt_tenant_sim_run(sim), GRT_ERR_STATE);
  assert_int_equal(grt_tenant_sim_add(sim, &c, NULL), GRT_ERR_STATE);
  assert_int_equal(grt_tenant_sim_write_timeline(sim, stderr), GRT_ERR_STATE); /* not recorded */
  assert_int_equal(grt_tenant_sim_destroy(sim), GRT_OK);
  assert_int_equal(grt_tenant_sim_destroy(NULL), GRT_OK);

  /* a runaway mix (1 ns kernels for an hour) stops at max_events, with stats so far */
  g = gpu(GRT_SHARE_TIME_SLICE, 3600ull * 1000 * MS);
  g.max_events = 100000;
  assert_int_equal(grt_tenant_sim_create(&g, &sim), GRT_OK);
  c = busy("tiny", 1, 1);
  assert_int_equal(grt_tenant_sim_add(sim, &c, NULL), GRT_OK);
  assert_int_equal(grt_tenant_sim_run(sim), GRT_ERR_SIZE);
  assert_int_equal(grt_tenant_sim_last_error(sim, err, sizeof err), GRT_OK);
  assert_non_null(strstr(err, "max_events (100000)"));
  grt_gpu_stats gs;
  assert_int_equal(grt_tenant_sim_gpu_stats(sim, &gs), GRT_OK);
  assert_int_equal(gs.events, 100000);
  assert_int_equal(grt_tenant_sim_stats(sim, 0, &s), GRT_OK);
  assert_true(s.completed > 0 && s.completed < 100000);
  assert_int_equal(grt_tenant_sim_destroy(sim), GRT_OK);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_time_slicing_turns),
      cmocka_unit_test(test_kernel_shapes),
      cmocka_unit_test(test_mig_isolation),
      cmocka_unit_test(test_mps_cap),
      cmocka_unit_test(test_fault_scope),
      cmocka_unit_test(test_memory_limits),
      cmocka_unit_test(test_mps_priority_preemption),
      cmocka_unit_test(test_bad_input),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
