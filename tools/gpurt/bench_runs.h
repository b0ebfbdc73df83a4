/* bench_runs.h — the measurements behind `gpurt bench` (tools/gpurt). */
#ifndef GRT_TOOLS_BENCH_RUNS_H
#define GRT_TOOLS_BENCH_RUNS_H

#include "workloads/workloads.h"
#include "cli_status.h"
#include "gpurt/alloc.h"

typedef struct policy_churn_result {
  double ns_per_pair;         /* median over runs */
  uint64_t failures;          /* failed allocations in the timed loop */
  uint64_t failures_with_hole; /* of those, failed although the device's largest hole or the
                                  allocator's largest cached block was big enough */
  uint64_t fill_failures;
} policy_churn_result;

/* Every function below counts the allocations that fail for want of memory
 * (GRT_ERR_OOM) in its result; any other failure ends it and is returned, with
 * the call that failed (and the allocator's message) in *err. */

/* W1/W2 (cfg) through the allocator interface: a device of cfg->capacity,
 * the named policy, the same op stream as the range allocators. */
grt_status bench_policy_churn(const grt__churn_config *cfg, const char *policy, policy_churn_result *out,
                              cli_first *err);

typedef struct demo1_result {
  uint64_t fill_failures; /* of the 32 x 8 MB allocations into 256 MB */
  int big_ok;             /* the 16 MB request after freeing every other block */
  uint64_t largest_free;  /* largest free range then: device hole or cached block */
  uint64_t device_mallocs;
} demo1_result;

/* Demo 1's workload (32 x 8 MB in 256 MB, free every other, then 16 MB) on a policy. */
grt_status bench_demo1(const char *policy, demo1_result *out, cli_first *err);

/* Aggregate malloc+free pairs per second with `threads` host threads, each on
 * its own stream, over one allocator of `policy`; policy "independent" gives
 * each thread its own caching allocator and device (nothing shared: the
 * machine's own scaling, the control for the others). */
grt_status bench_threads(const char *policy, int threads, uint64_t pairs_per_thread, double *pairs_per_s,
                         cli_first *err);

#endif
