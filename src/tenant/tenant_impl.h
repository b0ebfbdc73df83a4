/* tenant_impl.h — the multi-tenant simulation's state, shared by its files
 * (internal): tenant.c (configuration, memory, stats), tenant_run.c (the
 * event loop and the three sharing modes), tenant_timeline.c (the trace).
 *
 * Kernels and requests live in pools indexed by uint32_t (free lists), so
 * a simulated hour allocates only while its peak of work in flight grows.
 */
#ifndef GRT_TENANT_IMPL_H
#define GRT_TENANT_IMPL_H

#include <stdbool.h>

#include "base/rng.h"
#include "gpurt/alloc.h"
#include "gpurt/tenant.h"

#define GRT__NONE UINT32_MAX

typedef struct grt__tkernel { /* one kernel of one request */
  uint32_t tenant, req, next; /* next: the tenant's ready queue, or the free list */
  uint32_t idx;               /* its index in the tenant's request DAG */
  uint32_t sms;               /* while running: the SMs it holds */
  uint32_t gen;               /* bumped when it stops early: its end event is then stale */
  bool running;
  uint64_t work_left; /* SM-ns still to do */
  uint64_t start_ns;  /* while running: when this run began */
  uint64_t ready_ns;  /* when it became ready: the dispatcher serves the oldest first */
} grt__tkernel;

typedef struct grt__treq {
  uint64_t arrival_ns, seq; /* seq: the tenant's request number, for the timeline */
  uint32_t left;            /* kernels not finished */
  uint32_t next_free;
  uint32_t tenant;
  bool live;
  grt_devptr mem; /* request_bytes, 0 when none */
} grt__treq;

typedef struct grt__slice { /* a kernel's run, for the timeline */
  uint32_t tenant, idx, sms;
  uint64_t req_seq, start_ns, end_ns;
} grt__slice;

typedef struct grt__tenant {
  grt_tenant_config cfg;
  uint32_t children[GRT_TENANT_MAX_KERNELS][GRT_TENANT_MAX_KERNELS]; /* kernel i's dependents */
  uint32_t n_children[GRT_TENANT_MAX_KERNELS];
  uint32_t pool;       /* its SM pool: 0 shared, or its MIG instance */
  uint32_t cap;        /* the most SMs it may hold at once */
  uint32_t held;       /* SMs it holds now */
  uint32_t running;    /* kernels running */
  uint32_t head, tail; /* ready queue (FIFO; preempted kernels go to the front) */
  uint32_t in_flight;  /* requests arrived and not finished */
  bool dead;           /* a fault ended it, or its static memory did not fit */
  grt_device *dev;     /* MIG: its instance's memory; else NULL (the shared one) */
  grt_allocator *alloc;
  grt_devptr static_mem;
  grt__rng rng;
  uint64_t *lat; /* completed requests' latencies */
  size_t n_lat, cap_lat;
  grt_tenant_stats st;
} grt__tenant;

typedef struct grt__tevent {
  uint64_t t, seq;
  uint32_t kind, a, gen;
} grt__tevent;

/* In the order events of one instant are handled: work that ends at t is
 * done at t (before a fault or a slice end at t can stop it). */
enum { GRT__EV_KERNEL_END, GRT__EV_FAULT, GRT__EV_ARRIVAL, GRT__EV_SWITCH_DONE, GRT__EV_SLICE_END };

struct grt_tenant_sim {
  grt_gpu_config cfg;
  grt__tenant *t[GRT_TENANT_MAX];
  uint32_t n;
  bool ran;
  grt_device *dev;                    /* the shared device (time slicing, MPS) */
  uint32_t pool_free[GRT_TENANT_MAX]; /* free SMs per pool */
  grt__tkernel *k;
  uint32_t n_k, cap_k, free_k;
  grt__treq *r;
  uint32_t n_r, cap_r, free_r;
  grt__tevent *heap;
  size_t n_heap, cap_heap;
  uint64_t now, seq;
  /* time slicing */
  uint32_t active, last_active; /* GRT__NONE: no context on the GPU */
  bool switching;
  uint32_t slice_gen;
  grt__slice *slices;
  size_t n_slices, cap_slices;
  uint64_t *switch_log; /* switch start times, for the timeline */
  size_t n_switch, cap_switch;
  grt_gpu_stats gs;
  char err[256];
};

grt_status grt__tenant_fail(grt_tenant_sim *sim, grt_status st, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* The caching allocators and static memory of every tenant (tenant.c). */
grt_status grt__tenant_memory_setup(grt_tenant_sim *sim);
void grt__tenant_memory_teardown(grt_tenant_sim *sim);
/* A completed request's latency (tenant.c). */
grt_status grt__tenant_record_latency(grt__tenant *t, uint64_t ns);
void grt__tenant_finish_stats(grt_tenant_sim *sim);
/* A kernel run for the timeline (tenant_timeline.c); only with record_timeline. */
grt_status grt__tenant_log_slice(grt_tenant_sim *sim, const grt__tkernel *k, uint64_t end_ns);
grt_status grt__tenant_log_switch(grt_tenant_sim *sim, uint64_t start_ns);

#endif
