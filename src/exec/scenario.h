/* scenario.h — Lab 02's scenarios on top of the public exec API (internal).
 *
 * Shared by `gpurt demo streams` and the tests so that both run exactly the
 * same work. Each scenario takes an exec the caller made (either clock) and
 * leaves it without live children; they use only the public API plus the
 * minimal stream-ordered pool below.
 *
 *   S1/S2  a chunked H2D -> compute -> D2H pipeline in several issue layouts.
 *   S3     buffer lifetime across streams: host-order free vs stream-ordered free.
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

/* ---- S3: lifetime, with a minimal stream-ordered pool ----
 * Fixed-size blocks carved from one device segment. free_async makes a block
 * reusable only in stream order: it records an event at the free point, and
 * an allocation on another stream first makes that stream wait for it (the
 * "follow event dependencies" policy of cudaMallocAsync). free_now is the
 * unsafe host-order free. Replaceable by the full allocator (issue 4). */
typedef struct grt__sopool grt__sopool;
grt_status grt__sopool_create(grt_exec *exec, uint64_t block_bytes, unsigned blocks, grt__sopool **out);
grt_status grt__sopool_destroy(grt__sopool *p);
/* Lowest free block. */
grt_status grt__sopool_alloc(grt__sopool *p, grt_stream *s, grt_devptr *out);
grt_status grt__sopool_free_async(grt__sopool *p, grt_devptr ptr, grt_stream *s);
grt_status grt__sopool_free_now(grt__sopool *p, grt_devptr ptr);

typedef struct grt__lifetime_sched {
  uint64_t pre_a_ns; /* work on A before the reader */
  uint64_t read_ns;  /* the reader kernel on A */
  uint64_t pre_c_ns; /* work on C before the writer */
  uint64_t write_ns; /* the writer kernel on C */
  int gated;         /* deterministic: A's reader waits until C's writer finished (unsafe) or the free (safe) */
} grt__lifetime_sched;

typedef struct grt__lifetime {
  grt_exec *exec;
  grt__sopool *pool;
  grt_stream *a, *c;
  uint64_t bytes;
} grt__lifetime;

grt_status grt__lifetime_init(grt__lifetime *lt, grt_exec *exec, uint64_t bytes);
void grt__lifetime_fini(grt__lifetime *lt);
/* One schedule; *corrupted = the reader's checksum did not match. */
grt_status grt__lifetime_run(grt__lifetime *lt, int stream_ordered, const grt__lifetime_sched *sc, uint64_t seed,
                             int *corrupted);

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
