/* gpurt/tenant.h — several tenants sharing one GPU, under the three ways a
 * device is shared: time slicing, MPS-style spatial sharing and MIG-style
 * partitions (docs/TENANTS.md has the model and its formulas).
 *
 * A tenant is a context: its own requests, kernels and allocator. A request
 * is a small DAG of kernels; a kernel declares its work (SM-nanoseconds) and
 * how many SMs it can use, and runs for ceil(work / SMs it got) ns on the
 * SMs it was given at its start. Requests arrive as a seeded Poisson process
 * (latency-sensitive inference) or in a closed loop (a busy training job:
 * the next request is issued when one completes). Memory is gpurt's caching
 * allocator on a simulated device: one device shared by every tenant
 * (time slicing, MPS: a tenant's limit is its allocator's memory fraction,
 * so one tenant's growth can OOM another) or one device per MIG instance.
 *
 * Time is virtual and exact: nanoseconds, integer arithmetic, one seed; the
 * same configuration gives the same figures run after run. (The threads
 * clock of the executor, gpurt/exec.h, models one process; sharing between
 * processes is this layer's.)
 *
 * Thread safety: a grt_tenant_sim is used by one thread at a time.
 */
#ifndef GPURT_TENANT_H
#define GPURT_TENANT_H

#include <stdio.h>

#include "gpurt/base.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum grt_share_mode {
  GRT_SHARE_TIME_SLICE = 0, /* contexts take the whole GPU in turns (the default between processes) */
  GRT_SHARE_MPS = 1,        /* kernels of all clients run at once; a client's SM share is capped, not reserved */
  GRT_SHARE_MIG = 2,        /* static instances: own SMs and memory, no borrowing */
} grt_share_mode;

typedef struct grt_gpu_config {
  uint32_t sms;          /* streaming multiprocessors (H100/H200 SXM: 132) */
  uint64_t memory_bytes; /* device memory (H200: 141 GB) */
  grt_share_mode mode;
  uint64_t timeslice_ns; /* time slicing: how long a context runs while others wait (default 2 ms) */
  uint64_t switch_ns;    /* time slicing: a context switch, the GPU idle meanwhile (default 40 us) */
  uint64_t preempt_ns;   /* MPS: 0 = priorities never preempt running kernels (CUDA's stream
                            priorities); else a ready kernel of a higher-priority tenant that finds
                            no free SM stops lower-priority kernels and starts this much later
                            (the save/restore), as REEF- or GPreempt-style systems do */
  uint64_t horizon_ns;   /* arrivals stop here; work in flight then completes */
  uint64_t seed;         /* the arrival processes' seed */
  int record_timeline;   /* keep every kernel slice for grt_tenant_sim_write_timeline */
  uint64_t max_events;   /* the run stops (GRT_ERR_SIZE) past this many events; 0 = 2^32: a mix
                            of nanosecond kernels over hours would otherwise run for days */
  void (*on_progress)(void *ctx, uint64_t now_ns); /* every 65536 events, may be NULL */
  void *progress_ctx;
} grt_gpu_config;

/* 132 SMs, 141 GB, time slicing at 2 ms with a 40 us switch, 1 s, seed 1. */
GRT_API void grt_gpu_config_default(grt_gpu_config *cfg);

#define GRT_TENANT_MAX_KERNELS 32 /* kernels of one request */
#define GRT_TENANT_MAX 64         /* tenants of one device */

typedef struct grt_tenant_kernel {
  uint64_t work_sm_ns; /* the work: SM-nanoseconds (> 0) */
  uint32_t max_sms;    /* the SMs it can use at once (>= 1): its grid's parallelism */
  int32_t after;       /* the kernel of the same request it waits for (earlier index), -1: none */
} grt_tenant_kernel;

typedef enum grt_arrival_kind {
  GRT_ARRIVAL_POISSON = 0, /* requests arrive at rate_per_s, exponential gaps (seeded) */
  GRT_ARRIVAL_CLOSED = 1,  /* `concurrency` requests always in flight: a new one when one completes */
} grt_arrival_kind;

typedef struct grt_tenant_config {
  char name[32];
  grt_arrival_kind arrival;
  double rate_per_s;                                 /* POISSON: mean arrivals per second (> 0) */
  uint32_t concurrency;                              /* CLOSED: requests in flight (>= 1) */
  grt_tenant_kernel kernels[GRT_TENANT_MAX_KERNELS]; /* one request's DAG */
  uint32_t n_kernels;                                /* 1 .. GRT_TENANT_MAX_KERNELS */
  uint32_t sm_percent;                               /* MPS: active thread percentage, 1..100 (100 = no cap) */
  uint32_t mig_sms;                                  /* MIG: the instance's SMs (>= 1; instances' sum <= sms) */
  uint64_t mig_memory;                               /* MIG: the instance's memory (> 0; sum <= memory_bytes) */
  uint64_t memory_limit;  /* time slicing / MPS: the tenant's cap on the shared device, 0 = none */
  uint64_t static_bytes;  /* allocated when the tenant starts (weights), 0 = none */
  uint64_t request_bytes; /* allocated by each request while it runs (activations), 0 = none */
  uint64_t fault_at_ns;   /* a fatal fault in one of its kernels at this time, 0 = never */
  int32_t priority;       /* MPS: higher goes first when SMs free (and preempts, with preempt_ns) */
  uint32_t max_queued;    /* requests waiting or running beyond which arrivals are dropped (0: 65536) */
} grt_tenant_config;

/* A closed-loop tenant of one kernel (work, max_sms), everything else off. */
GRT_API void grt_tenant_config_default(grt_tenant_config *cfg);

typedef struct grt_tenant_stats {
  grt_status status; /* GRT_OK; GRT_ERR_OOM when its static memory did not fit;
                               GRT_ERR_FAULT_INJECTED when a fault ended it (its own or, under
                               MPS, another client's) */
  uint64_t arrived, completed;
  uint64_t refused_oom;                     /* requests refused: their memory did not fit (the allocator's OOM) */
  uint64_t dropped;                         /* arrivals beyond max_queued */
  uint64_t cancelled;                       /* requests ended by a fault */
  uint64_t p50_ns, p99_ns, p999_ns, max_ns; /* request latency, arrival to last kernel's end */
  double mean_ns;
  uint64_t kernels;      /* kernels completed */
  uint64_t sm_ns;        /* SM-nanoseconds its kernels held SMs */
  uint32_t max_sms_held; /* the most SMs it held at one time */
  uint64_t preemptions;  /* its kernels stopped early (a context switch, a higher priority) and resumed later */
} grt_tenant_stats;

typedef struct grt_gpu_stats {
  uint64_t end_ns;    /* when the last work ended */
  double utilization; /* SM-time held / (sms x end_ns) */
  uint64_t switches;  /* time slicing: context switches */
  uint64_t events;    /* events the simulation processed (arrivals, starts, ends, switches) */
} grt_gpu_stats;

typedef struct grt_tenant_sim grt_tenant_sim;

/* Validates cfg and makes an empty simulation (GRT_ERR_INVALID_ARG with a
 * message for bad values; no tenant yet). */
GRT_API GRT_MUST_CHECK grt_status grt_tenant_sim_create(const grt_gpu_config *cfg, grt_tenant_sim **out);
GRT_API GRT_MUST_CHECK grt_status grt_tenant_sim_destroy(grt_tenant_sim *sim);
/* Adds a tenant (before run); *index is its index in the stats. Refused with a
 * message (nothing changed): a bad kernel DAG, a share outside its range, MIG
 * instances over the device, more than GRT_TENANT_MAX tenants, a run done. */
GRT_API GRT_MUST_CHECK grt_status grt_tenant_sim_add(grt_tenant_sim *sim, const grt_tenant_config *cfg,
                                                     uint32_t *index);
/* Runs to the horizon and until the work in flight completed. Once. */
GRT_API GRT_MUST_CHECK grt_status grt_tenant_sim_run(grt_tenant_sim *sim);
GRT_API GRT_MUST_CHECK grt_status grt_tenant_sim_stats(const grt_tenant_sim *sim, uint32_t index,
                                                       grt_tenant_stats *out);
GRT_API GRT_MUST_CHECK grt_status grt_tenant_sim_gpu_stats(const grt_tenant_sim *sim, grt_gpu_stats *out);
/* The last error's message ("tenant 2 'train': kernel 3 waits for kernel 5, a later one"). */
GRT_API GRT_MUST_CHECK grt_status grt_tenant_sim_last_error(const grt_tenant_sim *sim, char *buf, size_t buf_size);
/* Chrome trace JSON (chrome://tracing, Perfetto): one process track per
 * tenant, a slice per kernel run (a preempted kernel is one slice per run),
 * and the context switches on a "device" track. Needs record_timeline. */
GRT_API GRT_MUST_CHECK grt_status grt_tenant_sim_write_timeline(const grt_tenant_sim *sim, FILE *f);

#ifdef __cplusplus
}
#endif
#endif /* GPURT_TENANT_H */
