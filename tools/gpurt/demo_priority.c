/* demo_priority.c — `gpurt demo priority`: the latency of a high-priority
 * stream's kernels on a compute engine saturated by low-priority streams,
 * with the high stream at the greatest priority vs at the same priority.
 *
 * LOW_STREAMS streams each queue LOW_KERNELS kernels of 1 ms on 2 compute
 * slots. The high stream issues HI_KERNELS kernels of 200 us, each becoming
 * ready 3.5 ms after the previous one finished (a copy-engine delay keeps the
 * spacing without a host in the loop, so both clocks run the same program).
 * Latency = ready -> done (events), ideal 0.2 ms. Priority lets a ready kernel
 * take the next free slot before the queued low-priority kernels — it never
 * preempts a running one, so the wait is at most one low kernel.
 */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "cli_opts.h"
#include "cli_status.h"
#include "gpurt/exec.h"

#define LOW_STREAMS 6
#define LOW_KERNELS 40
#define HI_KERNELS 10

typedef struct lat {
  double mean_ms, max_ms;
} lat;

static grt_status run_once(grt_clock_kind clock, int hi_prio, lat *out, cli_first *f) {
  *f = (cli_first)CLI_FIRST_INIT;
  grt_exec_config cfg;
  grt_exec_config_default(&cfg);
  cfg.clock = clock;
  cfg.compute_slots = 2;
  cfg.device_capacity = GRT_MiB;
  grt_exec *exec = NULL;
  if (cli_keep(f, "grt_exec_create", grt_exec_create(&cfg, &exec))) return f->st;
  grt_stream *low[LOW_STREAMS] = {0}, *hi = NULL; /* NULL: not created (destroy is a no-op) */
  grt_event *ready[HI_KERNELS] = {0}, *done[HI_KERNELS] = {0};
  for (int i = 0; i < LOW_STREAMS && !f->st; i++)
    cli_keep_exec(f, exec, "grt_stream_create", grt_stream_create(exec, GRT_STREAM_NON_BLOCKING, 0, &low[i]));
  if (!f->st)
    cli_keep_exec(f, exec, "grt_stream_create", grt_stream_create(exec, GRT_STREAM_NON_BLOCKING, hi_prio, &hi));
  for (int k = 0; k < HI_KERNELS && !f->st; k++)
    if (!cli_keep_exec(f, exec, "grt_event_create", grt_event_create(exec, 0, &ready[k])))
      cli_keep_exec(f, exec, "grt_event_create", grt_event_create(exec, 0, &done[k]));
  grt_kernel_desc lk = {NULL, NULL, 1000000, GRT_ENGINE_COMPUTE, "low"};
  grt_kernel_desc hk = {NULL, NULL, 200000, GRT_ENGINE_COMPUTE, "high"};
  grt_kernel_desc gap = {NULL, NULL, 3500000, GRT_ENGINE_COPY_H2D, "gap"};
  for (int k = 0; k < LOW_KERNELS && !f->st; k++)
    for (int i = 0; i < LOW_STREAMS && !f->st; i++)
      cli_keep_exec(f, exec, "grt_launch_kernel", grt_launch_kernel(low[i], &lk));
  for (int k = 0; k < HI_KERNELS && !f->st; k++)
    if (!cli_keep_exec(f, exec, "grt_launch_kernel", grt_launch_kernel(hi, &gap)) &&
        !cli_keep_exec(f, exec, "grt_event_record", grt_event_record(ready[k], hi)) &&
        !cli_keep_exec(f, exec, "grt_launch_kernel", grt_launch_kernel(hi, &hk)))
      cli_keep_exec(f, exec, "grt_event_record", grt_event_record(done[k], hi));
  if (!f->st) cli_keep_exec(f, exec, "grt_exec_synchronize", grt_exec_synchronize(exec));
  double sum = 0, mx = 0;
  for (int k = 0; k < HI_KERNELS && !f->st; k++) {
    int64_t ns;
    if (!cli_keep_exec(f, exec, "grt_event_elapsed_ns", grt_event_elapsed_ns(ready[k], done[k], &ns))) {
      sum += (double)ns / 1e6;
      if ((double)ns / 1e6 > mx) mx = (double)ns / 1e6;
    }
  }
  out->mean_ms = sum / HI_KERNELS;
  out->max_ms = mx;
  for (int k = 0; k < HI_KERNELS; k++) {
    cli_keep(f, "grt_event_destroy", grt_event_destroy(ready[k]));
    cli_keep(f, "grt_event_destroy", grt_event_destroy(done[k]));
  }
  for (int i = 0; i < LOW_STREAMS; i++) cli_keep(f, "grt_stream_destroy", grt_stream_destroy(low[i]));
  cli_keep(f, "grt_stream_destroy", grt_stream_destroy(hi));
  cli_keep(f, "grt_exec_destroy", grt_exec_destroy(exec));
  return f->st;
}

static const struct option priority_options[] = {
    CLI_OPT_HELP_ENTRY,
    {NULL, 0, NULL, 0},
};

int grt_demo_priority(int argc, char **argv) {
  cli_opts args;
  cli_opts_init(&args, "demo priority", argc, argv, priority_options, false);
  if (args.help) {
    printf("usage: gpurt demo priority\n"
           "  Latency of a high-priority stream under low-priority load, with and without\n"
           "  stream priorities, under the virtual (exact) and threads clocks.\n");
    return 0;
  }
  if (cli_opts_expect_end(&args)) return 2;
  int least, greatest;
  grt_exec *probe = NULL;
  grt_exec_config cfg;
  grt_exec_config_default(&cfg);
  cfg.clock = GRT_CLOCK_VIRTUAL;
  cfg.device_capacity = GRT_MiB;
  cli_first f = CLI_FIRST_INIT;
  if (!cli_keep(&f, "grt_exec_create", grt_exec_create(&cfg, &probe)))
    cli_keep_exec(&f, probe, "grt_exec_stream_priority_range",
                  grt_exec_stream_priority_range(probe, &least, &greatest));
  cli_keep(&f, "grt_exec_destroy", grt_exec_destroy(probe));
  if (f.st) return cli_fail_first("demo priority", &f);
  printf("gpurt demo priority — %d low-priority streams x %d kernels of 1 ms on 2 compute slots;\n"
         "a high stream's %d kernels of 0.2 ms, each ready 3.5 ms after the last; latency ready -> done\n"
         "(priority range [%d, %d]; ideal latency 0.2 ms; no preemption: at most one 1 ms kernel to wait for)\n\n",
         LOW_STREAMS, LOW_KERNELS, HI_KERNELS, greatest, least);
  printf("  %-8s %-28s %10s %10s\n", "clock", "high stream", "mean ms", "max ms");
  int rc = 0;
  for (int c = 1; c >= 0; c--)
    for (int p = 0; p < 2; p++) {
      lat l;
      if (run_once((grt_clock_kind)c, p ? greatest : least, &l, &f)) {
        char what[96];
        snprintf(what, sizeof what, "%s clock, high stream at priority %d: %s", c ? "virtual" : "threads",
                 p ? greatest : least, f.what);
        return cli_fail_status("demo priority", what, f.st, f.msg);
      }
      printf("  %-8s %-28s %10.3f %10.3f\n", c ? "virtual" : "threads",
             p ? "priority -5 (greatest)" : "priority 0 (same as load)", l.mean_ms, l.max_ms);
      if (c && p && l.max_ms > 1.2 + 1e-9) rc = 1; /* exact clock: at most one low kernel + its own */
    }
  printf("\n%s\n", rc ? "UNEXPECTED: a high-priority kernel waited for more than one low kernel"
                      : "with priorities a ready high-priority kernel takes the next free slot");
  return rc;
}
