/* demo_tenants.c — `gpurt demo tenants`: what sharing a GPU costs a
 * latency-sensitive tenant, by mechanism, on an H200-sized device (132 SMs,
 * 141 GB), in exact virtual time.
 *
 * "infer": requests arrive as a Poisson process (400/s by default), each a
 * chain of 6 kernels of 40 us on 66 SMs (a decode step: 0.24 ms alone), 16
 * GB of weights and 1 GB per request in flight. "train": always busy, one
 * kernel of 20 ms on all 132 SMs after another, 60 GB. The first table puts
 * them together under time slicing (several timeslices), MPS (several
 * active thread percentages) and MIG (several partitions); the second runs
 * N identical inference tenants. Interference = p99 shared / p99 alone;
 * "refused": requests whose memory did not fit (a MIG slice of 141/8 GB
 * holds the 16 GB of weights and one request) or beyond the queue.
 */
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "cli.h"
#include "cli_opts.h"
#include "tenants_run.h"

#define GB (1000ull * 1000 * 1000)
#define SMS 132u

static grt_tenant_config infer(double rate) {
  grt_tenant_config c;
  grt_tenant_config_default(&c);
  snprintf(c.name, sizeof c.name, "infer");
  c.arrival = GRT_ARRIVAL_POISSON;
  c.rate_per_s = rate;
  c.n_kernels = 6;
  for (int i = 0; i < 6; i++) c.kernels[i] = (grt_tenant_kernel){66ull * 40000, 66, i - 1};
  c.static_bytes = 16 * GB;
  c.request_bytes = 1 * GB;
  return c;
}

static grt_tenant_config train(void) {
  grt_tenant_config c;
  grt_tenant_config_default(&c);
  snprintf(c.name, sizeof c.name, "train");
  c.kernels[0] = (grt_tenant_kernel){(uint64_t)SMS * 20000000, SMS, -1};
  c.static_bytes = 60 * GB;
  return c;
}

typedef struct opts {
  uint64_t horizon_ms, seed;
  double rate;
  const char *out;
} opts;

static tenants_mix base_mix(const opts *o, grt_share_mode mode) {
  tenants_mix m;
  memset(&m, 0, sizeof m);
  grt_gpu_config_default(&m.gpu);
  m.gpu.sms = SMS;
  m.gpu.memory_bytes = 141 * GB;
  m.gpu.mode = mode;
  m.gpu.horizon_ns = o->horizon_ms * 1000000;
  m.gpu.seed = o->seed;
  return m;
}

/* MIG: instance k of 7 slices gets k/7 of the SMs and of the memory. */
static void mig_slices(tenants_mix *m, uint32_t i, uint32_t sevenths) {
  m->t[i].mig_sms = SMS * sevenths / 7;
  m->t[i].mig_memory = 141 * GB * sevenths / 7;
}

static int run(const opts *o, const char *slug, const tenants_mix *m, tenants_result *r) {
  char path[512];
  if (o->out) snprintf(path, sizeof path, "%s/tenants-%s.json", o->out, slug);
  return tenants_run("demo tenants", m, o->out ? path : NULL, r);
}

static void row(const char *mode, const char *setting, const tenants_result *r, uint64_t alone_p99, double secs) {
  const grt_tenant_stats *in = &r->t[0];
  char train_rate[16] = "-";
  if (r->t[1].kernels) snprintf(train_rate, sizeof train_rate, "%.1f", (double)r->t[1].kernels / secs);
  printf("  %-12s %-22s %9.3f %9.3f %9.3f %8.2fx %8llu %9s %6.1f%% %8llu\n", mode, setting, tenants_ms(in->p50_ns),
         tenants_ms(in->p99_ns), tenants_ms(in->p999_ns), alone_p99 ? (double)in->p99_ns / (double)alone_p99 : 0,
         (unsigned long long)(in->refused_oom + in->dropped), train_rate, 100 * r->gpu.utilization,
         (unsigned long long)r->gpu.switches);
}

static int colocated(const opts *o, uint64_t *alone_p99) {
  double secs = (double)o->horizon_ms / 1e3;
  tenants_result r;
  tenants_mix m = base_mix(o, GRT_SHARE_TIME_SLICE);
  m.t[0] = infer(o->rate), m.n = 1;
  if (run(o, "alone", &m, &r)) return 1;
  *alone_p99 = r.t[0].p99_ns;
  printf("infer (Poisson %.0f/s, 6 x 40 us kernels on 66 SMs) beside train (20 ms kernels on all 132 SMs):\n\n",
         o->rate);
  printf("  %-12s %-22s %9s %9s %9s %9s %8s %9s %7s %8s\n", "mode", "setting", "p50 ms", "p99 ms", "p99.9 ms",
         "interf.", "refused", "train k/s", "util", "switches");
  r.t[1].kernels = 0;
  row("alone", "infer only, whole GPU", &r, *alone_p99, secs);
  static const uint64_t slices_ms[] = {1, 2, 10, 30};
  for (size_t i = 0; i < 4; i++) {
    m = base_mix(o, GRT_SHARE_TIME_SLICE);
    m.gpu.timeslice_ns = slices_ms[i] * 1000000;
    m.t[0] = infer(o->rate), m.t[1] = train(), m.n = 2;
    char set[32], slug[32];
    snprintf(set, sizeof set, "%llu ms slice, 40 us switch", (unsigned long long)slices_ms[i]);
    snprintf(slug, sizeof slug, "timeslice-%llums", (unsigned long long)slices_ms[i]);
    if (run(o, slug, &m, &r)) return 1;
    row("time slicing", set, &r, *alone_p99, secs);
  }
  static const uint32_t pct[][2] = {{100, 100}, {100, 50}, {50, 50}, {25, 75}};
  for (size_t i = 0; i < 4; i++) {
    m = base_mix(o, GRT_SHARE_MPS);
    m.t[0] = infer(o->rate), m.t[1] = train(), m.n = 2;
    m.t[0].sm_percent = pct[i][0], m.t[1].sm_percent = pct[i][1];
    char set[32], slug[32];
    snprintf(set, sizeof set, "infer %u%% / train %u%%", pct[i][0], pct[i][1]);
    snprintf(slug, sizeof slug, "mps-%u-%u", pct[i][0], pct[i][1]);
    if (run(o, slug, &m, &r)) return 1;
    row("MPS", set, &r, *alone_p99, secs);
  }
  for (int preempt = 0; preempt <= 1; preempt++) { /* infer at a higher priority, both at 100% */
    m = base_mix(o, GRT_SHARE_MPS);
    m.gpu.preempt_ns = preempt ? 40000 : 0;
    m.t[0] = infer(o->rate), m.t[1] = train(), m.n = 2;
    m.t[0].priority = 1;
    if (run(o, preempt ? "mps-priority-preempt" : "mps-priority", &m, &r)) return 1;
    row("MPS", preempt ? "priority, 40 us preempt" : "priority, no preemption", &r, *alone_p99, secs);
  }
  static const uint32_t sevenths[] = {2, 3, 4};
  for (size_t i = 0; i < 3; i++) {
    m = base_mix(o, GRT_SHARE_MIG);
    m.t[0] = infer(o->rate), m.t[1] = train(), m.n = 2;
    mig_slices(&m, 0, sevenths[i]);
    mig_slices(&m, 1, 7 - sevenths[i]);
    char set[32], slug[32];
    snprintf(set, sizeof set, "%u/7 (%u SMs) + %u/7", sevenths[i], m.t[0].mig_sms, 7 - sevenths[i]);
    snprintf(slug, sizeof slug, "mig-%u-%u", sevenths[i], 7 - sevenths[i]);
    if (run(o, slug, &m, &r)) return 1;
    row("MIG", set, &r, *alone_p99, secs);
  }
  return 0;
}

/* N copies of infer: the mean of their p99s and the worst p99.9. */
static void n_row(const char *mode, const char *setting, uint32_t n, const tenants_result *r, uint64_t alone_p99) {
  double p99 = 0, worst = 0;
  uint64_t refused = 0, arrived = 0;
  for (uint32_t i = 0; i < n; i++) {
    p99 += tenants_ms(r->t[i].p99_ns) / n;
    if (tenants_ms(r->t[i].p999_ns) > worst) worst = tenants_ms(r->t[i].p999_ns);
    refused += r->t[i].refused_oom + r->t[i].dropped;
    arrived += r->t[i].arrived;
  }
  printf("  %3u  %-12s %-24s %12.3f %14.3f %8.2fx %8llu %9llu %6.1f%%\n", n, mode, setting, p99, worst,
         p99 / tenants_ms(alone_p99), (unsigned long long)refused, (unsigned long long)arrived,
         100 * r->gpu.utilization);
}

static int identical(const opts *o, uint64_t alone_p99) {
  printf("\nN identical infer tenants (each Poisson %.0f/s):\n\n", o->rate);
  printf("  %3s  %-12s %-24s %12s %14s %9s %8s %9s %7s\n", "N", "mode", "setting", "mean p99 ms", "worst p99.9 ms",
         "interf.", "refused", "arrived", "util");
  static const uint32_t ns[] = {2, 4, 8};
  for (size_t k = 0; k < 3; k++) {
    uint32_t n = ns[k];
    for (int mode = 0; mode < 3; mode++) {
      tenants_mix m = base_mix(o, (grt_share_mode)mode);
      m.n = n;
      char set[32], slug[40];
      for (uint32_t i = 0; i < n; i++) {
        m.t[i] = infer(o->rate);
        snprintf(m.t[i].name, sizeof m.t[i].name, "infer%u", i);
        m.t[i].sm_percent = 100 / n;
        m.t[i].mig_sms = SMS / n, m.t[i].mig_memory = 141 * GB / n;
      }
      if (mode == GRT_SHARE_TIME_SLICE)
        snprintf(set, sizeof set, "2 ms slice");
      else if (mode == GRT_SHARE_MPS)
        snprintf(set, sizeof set, "%u%% each", 100 / n);
      else
        snprintf(set, sizeof set, "%u SMs each", SMS / n);
      snprintf(slug, sizeof slug, "%ux-%s", n, mode == 0 ? "timeslice" : mode == 1 ? "mps" : "mig");
      tenants_result r;
      if (run(o, slug, &m, &r)) return 1;
      n_row(mode == 0 ? "time slicing" : mode == 1 ? "MPS" : "MIG", set, n, &r, alone_p99);
    }
  }
  return 0;
}

static const struct option tenant_options[] = {
    {"horizon-ms", required_argument, NULL, 'H'},
    {"seed", required_argument, NULL, 's'},
    {"rate", required_argument, NULL, 'r'},
    {"out", required_argument, NULL, 'o'},
    CLI_OPT_HELP_ENTRY,
    {NULL, 0, NULL, 0},
};

static int parse(int argc, char **argv, opts *o) {
  cli_opts p;
  cli_opts_init(&p, "demo tenants", argc, argv, tenant_options, false);
  if (p.help) {
    printf("usage: gpurt demo tenants [--horizon-ms N] [--seed N] [--rate R] [--out DIR]\n"
           "  Tail latency of an inference tenant sharing a GPU with a training job, and of N\n"
           "  identical inference tenants, under time slicing, MPS and MIG (exact virtual time).\n"
           "  --horizon-ms N  simulated time of arrivals (default 2000)\n"
           "  --rate R        inference requests per second (default 400)\n"
           "  --out DIR       a Chrome trace per run, one track per tenant\n");
    return 0;
  }
  for (int c; (c = cli_opts_next(&p)) != CLI_OPT_END;) {
    bool ok = true;
    if (c == 'H')
      ok = cli_opt_u64(&p, 1, 3600000, &o->horizon_ms);
    else if (c == 's')
      ok = cli_opt_u64(&p, 0, UINT64_MAX, &o->seed);
    else if (c == 'r')
      ok = cli_opt_real(&p, 0.001, 1e6, &o->rate);
    else if (c == 'o')
      o->out = p.arg;
    else
      return c == CLI_OPT_POSITIONAL ? cli_opts_unexpected(&p) : 2;
    if (!ok) return 2;
  }
  struct stat sb;
  if (o->out && mkdir(o->out, 0777) && (stat(o->out, &sb) || !S_ISDIR(sb.st_mode)))
    return cli_opts_fail(&p, "--out %s: cannot create that folder", o->out);
  return CLI_ARGS_OK;
}

int grt_demo_tenants(int argc, char **argv) {
  opts o = {2000, 1, 400, NULL};
  int rc = parse(argc, argv, &o);
  if (rc != CLI_ARGS_OK) return rc;
  printf("gpurt demo tenants — one H200-sized GPU (%u SMs, 141 GB) shared by tenants; virtual time, seed %llu,\n"
         "%llu ms of arrivals. Time slicing: contexts take the GPU in turns; MPS: kernels of all clients run\n"
         "at once, capped by their thread percentage; MIG: fixed instances of SMs and memory.\n\n",
         SMS, (unsigned long long)o.seed, (unsigned long long)o.horizon_ms);
  uint64_t alone = 0;
  if (colocated(&o, &alone) || identical(&o, alone)) return 1;
  if (o.out) printf("\ntimelines: %s/tenants-*.json (chrome://tracing or ui.perfetto.dev)\n", o.out);
  return 0;
}
