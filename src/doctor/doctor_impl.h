/* doctor_impl.h — the doctor's internal pieces (src/doctor). */
#ifndef GRT_DOCTOR_IMPL_H
#define GRT_DOCTOR_IMPL_H

#include "base/u64map.h"
#include "gpurt/doctor.h"
#include "gpurt/replay.h"
#include "gpurt/trace.h"

/* A block live when recording began: no alloc event in the trace made it.
 * Its stack is the final snapshot's block's (still live at the end) or its
 * free event's (PyTorch records a free with the allocation's context unless
 * free stacks were recorded too). */
typedef struct grt__start_block {
  uint64_t size;  /* requested bytes */
  uint32_t stack;
} grt__start_block;

typedef struct grt__start_blocks {
  grt__u64map at;         /* recorded address -> index in v + 1, while live */
  grt__start_block *v;
  size_t n;
} grt__start_blocks;

/* The blocks live at the start of a loaded trace (start_blocks.c). */
grt_status grt__start_blocks_collect(const grt_trace_info *in, grt__start_blocks *out);
void grt__start_blocks_free(grt__start_blocks *s);

/* The loop the trace repeats (steady.c). */
grt_status grt__doctor_steady_find(const grt_trace_info *in, grt_doctor_steady *out);

/* The runtime contract's trace checks (contract.c), fed every event after
 * the replay applied it; rep->steady must be found first. */
enum { GRT__RUN_OTHER = 0, GRT__RUN_EMPTY_CACHE, GRT__RUN_RETRY }; /* what a release run was */

typedef struct grt__contract {
  const grt_trace *trace;
  const grt_trace_info *in;
  grt_doctor_report *rep;
  uint64_t iteration;             /* occurrences of the steady state's anchor so far */
  uint64_t last_malloc_iteration;
  uint64_t empty_cache_steady;    /* empty_cache bursts after warm-up */
  bool in_run;                    /* inside a run of segment frees */
  bool retry_wait;                /* the run just ended was read as a retry path: the next alloc tells */
  int run_kind;
  bool run_stack_says;            /* its kind is its stack's, not the replay's reading */
  uint64_t run_start, run_end, run_bytes;
  bool untimed;                   /* an event measured had no time */
  grt__u64map deferred;           /* id -> its free_requested index + 1, while its free waits */
} grt__contract;

void grt__contract_init(grt__contract *c, const grt_trace *trace, const grt_trace_info *in,
                        grt_doctor_report *rep);
grt_status grt__contract_step(grt__contract *c, const grt_replay *r, const grt_trace_event *ev, uint64_t index);
void grt__contract_finish(grt__contract *c);
void grt__contract_free(grt__contract *c);

#endif
