/* demo_staging.c — `gpurt demo staging`: the pinned pool and the double-
 * buffered staging pipeline (grt_staging_run) for K = 1, 2, 3 under both clocks,
 * against the serial bound and the ideal overlap bound; then the stream-ordered
 * pool's counters from a 4-stream run, one shared pool vs per-stream pools. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/rng.h"
#include "cli.h"
#include "cli_opts.h"
#include "cli_status.h"
#include "gpurt/sorder.h"

#define CHUNK (256 * GRT_KiB)
#define CHUNKS 12

static grt_status new_exec(grt_clock_kind clock, grt_exec **exec) {
  grt_exec_config cfg;
  grt_exec_config_default(&cfg);
  cfg.clock = clock;
  cfg.device_capacity = 256 * GRT_MiB;
  /* Slow copy engines: one chunk's copy takes ~2 ms, far above sleep noise. */
  cfg.h2d_gbps = 0.128;
  cfg.d2h_gbps = 0.128;
  return grt_exec_create(&cfg, exec);
}

typedef struct stage_row {
  uint64_t elapsed[2], serial, overlap;
  int ok[2];
} stage_row;

static grt_status run_clock(grt_clock_kind clock, stage_row rows[3], grt_pinned_stats *pst, cli_first *f) {
  *f = (cli_first)CLI_FIRST_INIT;
  grt_exec *exec = NULL;
  if (cli_keep(f, "grt_exec_create", new_exec(clock, &exec))) return f->st;
  grt_mempool_config mc;
  grt_mempool_config_default(&mc);
  mc.exec = exec;
  mc.release_threshold = GRT_UNLIMITED; /* keep device buffers cached between runs */
  grt_pinned_config pc;
  grt_pinned_config_default(&pc);
  pc.exec = exec;
  grt_mempool *dp = NULL;
  grt_pinned_pool *hp = NULL;
  unsigned char *src = malloc(CHUNKS * CHUNK), *dst = malloc(CHUNKS * CHUNK);
  if (!src || !dst)
    cli_keep(f, "malloc", GRT_ERR_NOMEM);
  else if (!cli_keep_exec(f, exec, "grt_mempool_create", grt_mempool_create(&mc, &dp)))
    cli_keep_exec(f, exec, "grt_pinned_pool_create", grt_pinned_pool_create(&pc, &hp));
  for (size_t i = 0; !f->st && i < CHUNKS * CHUNK; i++) src[i] = (unsigned char)(i * 131 + 7);
  int c = clock == GRT_CLOCK_VIRTUAL ? 0 : 1;
  for (unsigned k = 1; !f->st && k <= 3; k++) {
    grt_staging_config sc = {exec, dp, hp, k, CHUNK, 0, NULL, NULL};
    if (cli_keep_exec(f, exec, "grt_exec_copy_duration_ns",
                      grt_exec_copy_duration_ns(exec, GRT_ENGINE_COPY_H2D, CHUNK, &sc.kernel_ns))) /* balanced stages */
      break;
    grt_staging_result r;
    memset(dst, 0, CHUNKS * CHUNK);
    if (cli_keep_exec(f, exec, "grt_staging_run", grt_staging_run(&sc, src, dst, CHUNKS * CHUNK, &r))) break;
    stage_row *row = &rows[k - 1];
    row->elapsed[c] = r.elapsed_ns;
    row->serial = r.serial_bound_ns;
    row->overlap = r.overlap_bound_ns;
    row->ok[c] = 1;
    for (size_t i = 0; i < CHUNKS * CHUNK; i++)
      if (dst[i] != (src[i] ^ 0x5a)) row->ok[c] = 0;
  }
  if (!f->st) cli_keep(f, "grt_pinned_get_stats", grt_pinned_get_stats(hp, pst));
  cli_keep(f, "grt_pinned_pool_destroy", grt_pinned_pool_destroy(hp));
  cli_keep(f, "grt_mempool_destroy", grt_mempool_destroy(dp));
  cli_keep(f, "grt_exec_destroy", grt_exec_destroy(exec));
  free(src);
  free(dst);
  return f->st;
}

/* ---- the stream-ordered pool across 4 streams ---- */

static grt_status pool_run(int per_stream, grt_mempool_counters *k, grt_mempool_attrs *at, uint64_t *reports,
                           cli_first *f) {
  *f = (cli_first)CLI_FIRST_INIT;
  grt_exec *exec = NULL;
  if (cli_keep(f, "grt_exec_create", new_exec(GRT_CLOCK_VIRTUAL, &exec))) return f->st;
  grt_sorder_config scfg;
  grt_sorder_config_default(&scfg);
  scfg.exec = exec;
  grt_sorder *so = NULL;
  grt_mempool *p = NULL;
  grt_stream *s[4] = {0};
  grt_event *ev = NULL;
  grt_mempool_config mc;
  grt_mempool_config_default(&mc);
  mc.exec = exec;
  mc.per_stream = per_stream;
  cli_keep(f, "grt_sorder_create", grt_sorder_create(&scfg, &so));
  mc.sorder = so;
  if (!f->st) cli_keep_exec(f, exec, "grt_mempool_create", grt_mempool_create(&mc, &p));
  for (int i = 0; i < 4 && !f->st; i++)
    cli_keep_exec(f, exec, "grt_stream_create", grt_stream_create(exec, GRT_STREAM_NON_BLOCKING, 0, &s[i]));
  if (!f->st) cli_keep_exec(f, exec, "grt_event_create", grt_event_create(exec, GRT_EVENT_DISABLE_TIMING, &ev));
  grt__rng r;
  grt__rng_seed(&r, 42);
  for (int i = 0; i < 2000 && !f->st; i++) {
    int a = (int)grt__rng_below(&r, 4);
    uint64_t size = grt__rng_log_uniform(&r, 64 * GRT_KiB, 4 * GRT_MiB);
    grt_devptr x;
    if (cli_keep_exec(f, exec, "grt_malloc_async", grt_malloc_async(p, size, s[a], &x))) break;
    grt_access acc = {x, size, 1};
    grt_kernel_desc kd = {NULL, NULL, 10000 + grt__rng_below(&r, 20000), GRT_ENGINE_COMPUTE, "work"};
    if (cli_keep_exec(f, exec, "grt_sorder_launch", grt_sorder_launch(so, s[a], &kd, &acc, 1))) break;
    int fs = grt__rng_below(&r, 2) ? a : (a + 1 + (int)grt__rng_below(&r, 3)) % 4;
    if (fs != a && /* freed on another stream: that stream must be ordered after the use */
        (cli_keep_exec(f, exec, "grt_sorder_event_record", grt_sorder_event_record(so, ev, s[a])) ||
         cli_keep_exec(f, exec, "grt_sorder_stream_wait_event", grt_sorder_stream_wait_event(so, s[fs], ev))))
      break;
    if (cli_keep_exec(f, exec, "grt_free_async", grt_free_async(p, x, s[fs]))) break;
    if (i % 250 == 249) cli_keep_exec(f, exec, "grt_mempool_synchronize", grt_mempool_synchronize(p));
  }
  if (!f->st) cli_keep_exec(f, exec, "grt_mempool_synchronize", grt_mempool_synchronize(p));
  if (!f->st) cli_keep(f, "grt_mempool_get_counters", grt_mempool_get_counters(p, k));
  if (!f->st) cli_keep(f, "grt_mempool_get_attrs", grt_mempool_get_attrs(p, at));
  if (!f->st) cli_keep(f, "grt_sorder_report_count", grt_sorder_report_count(so, NULL, reports));
  cli_keep(f, "grt_event_destroy", grt_event_destroy(ev));
  for (int i = 0; i < 4; i++) cli_keep(f, "grt_stream_destroy", grt_stream_destroy(s[i]));
  cli_keep(f, "grt_mempool_destroy", grt_mempool_destroy(p));
  cli_keep(f, "grt_sorder_destroy", grt_sorder_destroy(so));
  cli_keep(f, "grt_exec_destroy", grt_exec_destroy(exec));
  return f->st;
}

/* 0, or 1 after reporting a failed run. */
static int print_pools(void) {
  grt_mempool_counters k[2];
  grt_mempool_attrs at[2];
  uint64_t rep[2];
  for (int i = 0; i < 2; i++) {
    cli_first f;
    if (pool_run(i, &k[i], &at[i], &rep[i], &f)) {
      char what[96];
      snprintf(what, sizeof what, "%s pool run: %s", i ? "per-stream" : "shared", f.what);
      return cli_fail_status("demo staging", what, f.st, f.msg);
    }
  }
  printf("\nStream-ordered pool, 4 streams x 2,000 malloc_async/kernel/free_async (half freed on another\n"
         "stream after an event edge), virtual clock, sync point every 250:\n\n");
  printf("  %-34s %12s %12s\n", "", "shared pool", "per-stream");
#define ROW(label, field) printf("  %-34s %12llu %12llu\n", label, (unsigned long long)k[0].field, (unsigned long long)k[1].field)
  ROW("reuse on the freeing stream", reuse_same_stream);
  ROW("reuse behind an event edge", reuse_event_dep);
  ROW("reuse, device already passed", reuse_opportunistic);
  ROW("reuse on OOM (internal dep)", reuse_internal_dep);
  ROW("edges inserted", edges_inserted);
  ROW("host syncs", host_syncs);
  ROW("reuses deferred", reuses_deferred);
  ROW("blocks handed back to allocator", released_to_allocator);
  ROW("device mallocs", device_mallocs);
#undef ROW
  printf("  %-34s %9.1f MiB %9.1f MiB\n", "reserved high", at[0].reserved_mem_high / (double)GRT_MiB,
         at[1].reserved_mem_high / (double)GRT_MiB);
  printf("  %-34s %9.1f MiB %9.1f MiB\n", "used high", at[0].used_mem_high / (double)GRT_MiB,
         at[1].used_mem_high / (double)GRT_MiB);
  printf("  %-34s %12llu %12llu\n", "sanitizer reports", (unsigned long long)rep[0], (unsigned long long)rep[1]);
  return 0;
}

static const struct option staging_options[] = {
    CLI_OPT_HELP_ENTRY,
    {NULL, 0, NULL, 0},
};

int grt_demo_staging(int argc, char **argv) {
  cli_opts p;
  cli_opts_init(&p, "demo staging", argc, argv, staging_options, false);
  if (p.help) {
    printf("usage: gpurt demo staging\n"
           "  pinned pool + staging pipeline (H2D -> compute -> D2H, K buffers in flight) under both\n"
           "  clocks against the serial and ideal-overlap bounds; then stream-ordered pool counters.\n");
    return 0;
  }
  if (cli_opts_expect_end(&p)) return 2;
  stage_row rows[3];
  memset(rows, 0, sizeof rows);
  grt_pinned_stats ps[2];
  memset(ps, 0, sizeof ps);
  for (int c = 0; c < 2; c++) {
    cli_first f;
    grt_clock_kind clock = c ? GRT_CLOCK_THREADS : GRT_CLOCK_VIRTUAL;
    if (run_clock(clock, rows, &ps[c], &f)) {
      char what[96];
      snprintf(what, sizeof what, "%s clock: %s", c ? "threads" : "virtual", f.what);
      return cli_fail_status("demo staging", what, f.st, f.msg);
    }
  }
  int ok = 1;
  printf("gpurt demo staging — %d chunks of %llu KiB; H2D, compute and D2H ~2 ms each\n\n", CHUNKS,
         (unsigned long long)(CHUNK / GRT_KiB));
  printf("  %-3s %12s %12s %14s %14s %8s\n", "K", "virtual ms", "threads ms", "serial bound", "overlap bound",
         "output");
  for (int k = 0; k < 3; k++) {
    stage_row *r = &rows[k];
    printf("  %-3d %12.2f %12.2f %14.2f %14.2f %8s\n", k + 1, r->elapsed[0] / 1e6, r->elapsed[1] / 1e6,
           r->serial / 1e6, r->overlap / 1e6, r->ok[0] && r->ok[1] ? "ok" : "WRONG");
    ok &= r->ok[0] && r->ok[1];
  }
  printf("\n  pinned pool: %llu calls, %llu host allocations (%.1f ms of modelled cudaHostAlloc), %llu cache hits\n",
         (unsigned long long)ps[0].mallocs, (unsigned long long)ps[0].host_allocs, ps[0].alloc_cost_ns / 1e6,
         (unsigned long long)ps[0].cache_hits);
  if (print_pools()) return 1;
  return ok ? 0 : 1;
}
