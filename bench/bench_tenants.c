/* bench_tenants.c — how fast the multi-tenant simulation runs.
 *
 * Usage: bench_tenants [--seconds S] [--tenants N]
 * Simulates S seconds (default 60) of N inference tenants (default 8; each
 * Poisson 2,000 requests/s of 6 kernels) beside one training tenant, under
 * each sharing mode, and prints kernels simulated per second of CPU: a
 * kernel event is its start or its end. The baseline, in this process, is
 * a bare binary heap pushing and popping as many events, so the ratio says
 * what the model costs above its event queue. Target: >= 1,000,000 kernel
 * events per second.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gpurt/tenant.h"

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static grt_tenant_config inference(unsigned i, unsigned n) {
  grt_tenant_config c;
  grt_tenant_config_default(&c);
  snprintf(c.name, sizeof c.name, "infer%u", i);
  c.arrival = GRT_ARRIVAL_POISSON;
  c.rate_per_s = 2000;
  c.n_kernels = 6;
  for (int k = 0; k < 6; k++) c.kernels[k] = (grt_tenant_kernel){66ull * 40000, 66, k - 1};
  c.sm_percent = 100 / (n + 1);
  c.mig_sms = 132 / (n + 1), c.mig_memory = 1ull << 30;
  c.request_bytes = 64ull << 20;
  return c;
}

static int run(grt_share_mode mode, double seconds, unsigned n, uint64_t *events, double *secs) {
  grt_gpu_config g;
  grt_gpu_config_default(&g);
  g.mode = mode;
  g.horizon_ns = (uint64_t)(seconds * 1e9);
  grt_tenant_sim *sim;
  if (grt_tenant_sim_create(&g, &sim)) return 1;
  int bad = 0;
  for (unsigned i = 0; i < n && !bad; i++) {
    grt_tenant_config c = inference(i, n);
    bad = grt_tenant_sim_add(sim, &c, NULL) != GRT_OK;
  }
  grt_tenant_config t;
  grt_tenant_config_default(&t);
  t.kernels[0] = (grt_tenant_kernel){132ull * 2000000, 132, -1};
  t.sm_percent = 100 / (n + 1), t.mig_sms = 132 / (n + 1), t.mig_memory = 1ull << 30;
  if (!bad) bad = grt_tenant_sim_add(sim, &t, NULL) != GRT_OK;
  double t0 = now_s();
  if (!bad) bad = grt_tenant_sim_run(sim) != GRT_OK;
  *secs = now_s() - t0;
  uint64_t kernels = 0;
  for (unsigned i = 0; i <= n && !bad; i++) {
    grt_tenant_stats s;
    bad = grt_tenant_sim_stats(sim, i, &s) != GRT_OK;
    kernels += s.kernels;
  }
  *events = 2 * kernels;
  if (grt_tenant_sim_destroy(sim)) bad = 1;
  return bad;
}

/* The baseline: n pushes and pops through a binary min-heap of (time, seq). */
static double heap_only(uint64_t n) {
  typedef struct {
    uint64_t t, seq;
  } ev;
  size_t cap = 4096, len = 0;
  ev *h = malloc(cap * sizeof *h);
  if (!h) return 0;
  uint64_t x = 88172645463325252ull, sink = 0, seq = 0;
  double t0 = now_s();
  for (uint64_t i = 0; i < n; i++) {
    if (len < cap - 1 && (len < 64 || (x & 1))) { /* push */
      x ^= x << 13, x ^= x >> 7, x ^= x << 17;
      ev e = {sink + (x % 1000000), seq++};
      size_t k = len++;
      while (k && (h[(k - 1) / 2].t > e.t)) h[k] = h[(k - 1) / 2], k = (k - 1) / 2;
      h[k] = e;
    } else { /* pop */
      sink = h[0].t;
      ev last = h[--len];
      size_t k = 0;
      for (;;) {
        size_t c = 2 * k + 1;
        if (c >= len) break;
        if (c + 1 < len && h[c + 1].t < h[c].t) c++;
        if (h[c].t >= last.t) break;
        h[k] = h[c], k = c;
      }
      if (len) h[k] = last;
    }
  }
  double s = now_s() - t0;
  free(h);
  return s > 0 ? (double)n / s : 0;
}

int main(int argc, char **argv) {
  double seconds = 60;
  unsigned n = 8;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!strcmp(argv[i], "--seconds"))
      seconds = atof(argv[i + 1]);
    else if (!strcmp(argv[i], "--tenants"))
      n = (unsigned)atoi(argv[i + 1]);
  }
  if (!(seconds > 0 && seconds <= 3600) || n < 1 || n > 60) {
    fprintf(stderr, "usage: bench_tenants [--seconds 0..3600] [--tenants 1..60]\n");
    return 2;
  }
  printf("bench_tenants: %.0f s simulated, %u inference tenants (2,000 req/s x 6 kernels each) + 1 training\n\n",
         seconds, n);
  printf("  %-14s %14s %10s %18s %12s\n", "mode", "kernel events", "CPU s", "kernel events/s", "vs heap only");
  static const char *names[] = {"time slicing", "MPS", "MIG"};
  int rc = 0;
  for (int m = 0; m < 3; m++) {
    uint64_t events = 0;
    double secs = 0;
    if (run((grt_share_mode)m, seconds, n, &events, &secs)) {
      fprintf(stderr, "bench_tenants: the %s run failed\n", names[m]);
      return 1;
    }
    double rate = secs > 0 ? (double)events / secs : 0, base = heap_only(events);
    printf("  %-14s %14llu %10.3f %18.0f %11.2fx\n", names[m], (unsigned long long)events, secs, rate,
           base > 0 ? rate / base : 0);
    if (rate < 1e6) rc = 1;
  }
  printf("\n%s\n",
         rc ? "BELOW TARGET: fewer than 1,000,000 kernel events per second"
            : "every mode above 1,000,000 kernel events per second");
  return rc;
}
