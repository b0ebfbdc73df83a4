/* frag_workloads.h — deterministic adversarial traces for the utilization
 * table of `gpurt demo frag`, and a driver that replays one on any allocator
 * until the first failed allocation. */
#ifndef GRT_TOOLS_FRAG_WORKLOADS_H
#define GRT_TOOLS_FRAG_WORKLOADS_H

#include <stddef.h>
#include <stdint.h>

#include "cli_status.h"
#include "gpurt/alloc.h"

typedef struct frag_op {
  uint32_t id;   /* allocation id (index into the live table) */
  uint32_t is_free;
  uint64_t size; /* bytes requested (allocs) */
} frag_op;

typedef struct frag_trace {
  const char *name;
  const char *why; /* one line: what makes it adversarial */
  frag_op *ops;
  size_t n_ops;
  uint32_t n_ids;
} frag_trace;

typedef struct frag_result {
  int failed;            /* 1 when some allocation failed */
  size_t ops_done;       /* ops executed before the failure */
  double utilization;    /* live requested bytes / capacity at the first failure */
  uint64_t failed_size;  /* the request that failed */
  uint64_t largest_free; /* device largest hole + allocator's largest cached block at failure */
  uint64_t device_mallocs, device_frees;
} frag_result;

/* Number of built-in families; trace i of `seed` for a device of `capacity` bytes. */
size_t frag_family_count(void);
int frag_trace_make(size_t family, uint64_t seed, uint64_t capacity, frag_trace *out);
void frag_trace_free(frag_trace *t);

/* Replays t on a fresh device of `capacity` with the named policy until the
 * first allocation that fails for want of memory (GRT_ERR_OOM: the outcome
 * out describes). Any other failure is an error: returned, with the call
 * that failed and the allocator's message in *err. */
grt_status frag_run(const frag_trace *t, const char *policy, uint64_t capacity, frag_result *out, cli_first *err);

#endif
