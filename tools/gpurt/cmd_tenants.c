/* cmd_tenants.c — `gpurt tenants --config FILE`: a user's own mix of tenants
 * on one shared GPU (format: docs/TENANTS.md), each tenant's latency, memory
 * refusals and share of the SMs; `--alone` adds each tenant run by itself on
 * the whole device and its interference factor (p99 shared / p99 alone). */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "cli_opts.h"
#include "tenants_run.h"

static const struct option tenants_options[] = {
    {"config", required_argument, NULL, 'c'},
    {"out", required_argument, NULL, 'o'},
    {"alone", no_argument, NULL, 'a'},
    CLI_OPT_HELP_ENTRY,
    {NULL, 0, NULL, 0},
};

static const char *mode_name(grt_share_mode m) {
  return m == GRT_SHARE_MPS ? "MPS" : m == GRT_SHARE_MIG ? "MIG" : "time slicing";
}

/* Tenant i alone on the whole device, as time slicing runs a single context. */
static int alone_p99(const tenants_mix *mix, uint32_t i, uint64_t *p99) {
  tenants_mix one = *mix;
  one.gpu.mode = GRT_SHARE_TIME_SLICE;
  one.t[0] = mix->t[i];
  one.t[0].fault_at_ns = 0;
  one.n = 1;
  tenants_result r;
  if (tenants_run("tenants", &one, NULL, &r)) return 1;
  *p99 = r.t[0].p99_ns;
  return 0;
}

static int report(const tenants_mix *mix, const tenants_result *r, bool alone) {
  printf("gpurt tenants — %u tenants on %u SMs, %s, %.3f ms of arrivals: ended at %.3f ms, utilization %.1f%%, "
         "%llu switches, %llu events\n\n",
         mix->n, mix->gpu.sms, mode_name(mix->gpu.mode), tenants_ms(mix->gpu.horizon_ns), tenants_ms(r->gpu.end_ns),
         100 * r->gpu.utilization, (unsigned long long)r->gpu.switches, (unsigned long long)r->gpu.events);
  printf("  %-16s %9s %9s %8s %8s %9s %9s %9s %9s %8s %-22s\n", "tenant", "arrived", "completed", "oom", "dropped",
         "p50 ms", "p99 ms", "p99.9 ms", "max SMs", "interf.", "status");
  for (uint32_t i = 0; i < mix->n; i++) {
    const grt_tenant_stats *s = &r->t[i];
    uint64_t solo = 0;
    if (alone && s->completed && alone_p99(mix, i, &solo)) return 1;
    char interf[16] = "-";
    if (solo) snprintf(interf, sizeof interf, "%.2fx", (double)s->p99_ns / (double)solo);
    printf("  %-16s %9llu %9llu %8llu %8llu %9.3f %9.3f %9.3f %9u %8s %-22s\n", mix->t[i].name,
           (unsigned long long)s->arrived, (unsigned long long)s->completed, (unsigned long long)s->refused_oom,
           (unsigned long long)s->dropped, tenants_ms(s->p50_ns), tenants_ms(s->p99_ns), tenants_ms(s->p999_ns),
           s->max_sms_held, interf, grt_status_name(s->status));
  }
  return 0;
}

int grt_cmd_tenants(int argc, char **argv) {
  cli_opts p;
  cli_opts_init(&p, "tenants", argc, argv, tenants_options, false);
  if (p.help) {
    printf("usage: gpurt tenants --config FILE [--alone] [--out TIMELINE.json]\n"
           "  Runs the tenants FILE describes on one shared GPU (time slicing, MPS or MIG; the\n"
           "  format is in docs/TENANTS.md) and prints each tenant's latency and refusals.\n"
           "  --alone  also run each tenant alone: interference = p99 shared / p99 alone\n"
           "  --out    write the run's Chrome trace, one track per tenant\n");
    return 0;
  }
  const char *config = NULL, *out = NULL;
  bool alone = false;
  for (int c; (c = cli_opts_next(&p)) != CLI_OPT_END;) {
    if (c == 'c')
      config = p.arg;
    else if (c == 'o')
      out = p.arg;
    else if (c == 'a')
      alone = true;
    else
      return c == CLI_OPT_POSITIONAL ? cli_opts_unexpected(&p) : 2;
  }
  if (!config) return cli_opts_fail(&p, "--config FILE is required");
  tenants_mix mix;
  int rc = tenants_config_load("tenants", config, &mix);
  if (rc) return rc;
  tenants_result r;
  if (tenants_run("tenants", &mix, out, &r)) return 1;
  if (report(&mix, &r, alone)) return 1;
  if (out) printf("\ntimeline: %s\n", out);
  return 0;
}
