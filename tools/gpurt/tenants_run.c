/* tenants_run.c — one multi-tenant run for the gpurt commands (tenants_run.h). */
#include <errno.h>
#include <string.h>

#include "cli_status.h"
#include "replay_util.h"
#include "tenants_run.h"

static int fail_sim(const char *cmd, const char *what, grt_status st, const grt_tenant_sim *sim) {
  char msg[256] = "";
  if (sim && grt_tenant_sim_last_error(sim, msg, sizeof msg) != GRT_OK) msg[0] = 0;
  return cli_fail_status(cmd, what, st, msg);
}

static int write_timeline(const char *cmd, const grt_tenant_sim *sim, const char *path) {
  FILE *f = fopen(path, "w");
  if (!f) {
    fprintf(stderr, "gpurt %s: cannot write %s: %s\n", cmd, path, strerror(errno));
    return 1;
  }
  grt_status st = grt_tenant_sim_write_timeline(sim, f);
  if (fclose(f) && !st) st = GRT_ERR_IO;
  return st ? fail_sim(cmd, path, st, sim) : 0;
}

/* Simulated milliseconds of the horizon, for the bar of a long run. */
static void on_progress(void *ctx, uint64_t now_ns) { cli_progress_show(ctx, now_ns / 1000000); }

int tenants_run(const char *cmd, const tenants_mix *mix, const char *timeline, tenants_result *out) {
  grt_gpu_config g = mix->gpu;
  g.record_timeline = timeline != NULL;
  cli_progress bar;
  cli_progress_init(&bar, cmd, g.horizon_ns / 1000000);
  bar.unit = "ms simulated";
  g.on_progress = on_progress, g.progress_ctx = &bar;
  grt_tenant_sim *sim = NULL;
  grt_status st = grt_tenant_sim_create(&g, &sim);
  if (st) return cli_fail_status(cmd, "grt_tenant_sim_create", st, "check the gpu line");
  int rc = 0;
  for (uint32_t i = 0; i < mix->n && !rc; i++)
    if ((st = grt_tenant_sim_add(sim, &mix->t[i], NULL))) rc = fail_sim(cmd, "grt_tenant_sim_add", st, sim);
  if (!rc && (st = grt_tenant_sim_run(sim))) rc = fail_sim(cmd, "grt_tenant_sim_run", st, sim);
  for (uint32_t i = 0; i < mix->n && !rc; i++)
    if ((st = grt_tenant_sim_stats(sim, i, &out->t[i]))) rc = fail_sim(cmd, "grt_tenant_sim_stats", st, sim);
  if (!rc && (st = grt_tenant_sim_gpu_stats(sim, &out->gpu))) rc = fail_sim(cmd, "grt_tenant_sim_gpu_stats", st, sim);
  cli_progress_done(&bar);
  if (!rc && timeline) rc = write_timeline(cmd, sim, timeline);
  st = grt_tenant_sim_destroy(sim);
  if (!rc && st) rc = cli_fail_status(cmd, "grt_tenant_sim_destroy", st, NULL);
  return rc;
}
