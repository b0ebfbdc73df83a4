/* scenario.h — the executor scenarios (docs/EXEC.md) on the public exec API (internal).
 *
 * Shared by `gpurt demo streams` and the tests so that both run exactly the
 * same work. Each scenario takes an exec the caller made (either clock) and
 * leaves it without live children; they use only the public API.
 *
 *   S1/S2  a chunked H2D -> compute -> D2H pipeline in several issue layouts.
 *   S3     buffer lifetime across streams: in scenario_lifetime.h.
 *   S4     deadlocks through blocking user events, and plain events that cannot.
 */
#ifndef GRT_EXEC_SCENARIO_H
#define GRT_EXEC_SCENARIO_H

#include "gpurt/exec.h"

/* ---- S1 / S2: the pipeline ---- */

typedef enum grt__pipe_layout {
  GRT__PIPE_SERIAL,         /* everything on one stream */
  GRT__PIPE_STREAMS,        /* H2D, compute, D2H on three non-blocking streams joined by events */
  GRT__PIPE_LEGACY,         /* compute on the legacy default stream, copies on blocking streams */
  GRT__PIPE_LEGACY_NB       /* compute on the legacy default stream, copies on non-blocking streams */
} grt__pipe_layout;

typedef struct grt__pipe_params {
  unsigned chunks;      /* number of chunks */
  uint64_t chunk_bytes; /* bytes per chunk */
  uint64_t kernel_ns;   /* modelled duration of the compute per chunk */
} grt__pipe_params;

typedef struct grt__pipe_result {
  uint64_t elapsed_ns;   /* first op start to last op end, from events */
  uint64_t predicted_ns; /* what the DAG predicts (SERIAL and STREAMS only; 0 otherwise) */
  int output_ok;         /* every output byte equals input XOR 0x5a */
} grt__pipe_result;

grt_status grt__scn_pipeline(grt_exec *exec, const grt__pipe_params *p, grt__pipe_layout layout,
                             grt__pipe_result *out);

/* ---- S3: lifetime — in scenario_lifetime.h (it runs on the stream-ordered pool) ---- */

/* ---- S4: deadlocks ---- */

typedef enum grt__deadlock_case {
  GRT__DL_UEV_CYCLE,      /* A waits u1 then signals u2; B waits u2 then signals u1 */
  GRT__DL_UEV_CYCLE3,     /* three streams, one edge a plain event */
  GRT__DL_HOST_FN,        /* a host function waits for a signal issued after it on its stream */
  GRT__DL_HOST_FN_CROSS,  /* a host function waits for work on B that waits for A past the host function */
  GRT__DL_PLAIN_EVENTS    /* plain events recorded/waited "in a cycle": completes */
} grt__deadlock_case;

/* Runs the case and a device synchronize; returns that status (GRT_ERR_DEADLOCK
 * expected except for PLAIN_EVENTS) and the exec's error message. */
grt_status grt__scn_deadlock(grt_exec *exec, grt__deadlock_case c, char *msg, size_t msg_size);

#endif
