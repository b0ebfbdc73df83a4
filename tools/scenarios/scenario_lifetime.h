/* scenario_lifetime.h — scenario S3 (docs/EXEC.md) on the stream-ordered pool (internal).
 *
 * Stream A reads buffer B; the host frees B at once and the pool hands the same
 * memory to stream C, whose writer overwrites it. The unsafe variant frees in
 * host order (grt_mempool_free_host_order); the safe one with free_async on A
 * and an event edge from there to C, so the pool hands B to C only behind
 * A's free (FOLLOW_EVENT_DEPS: CUDA's pool inserts no wait). Kernels declare
 * their accesses, so the happens-before sanitizer judges every run: it flags
 * the unsafe variant on every schedule (the free is not ordered after the
 * read) and reports nothing for the safe one. Shared by `gpurt demo streams`
 * and the tests.
 */
#ifndef GRT_SORDER_SCENARIO_LIFETIME_H
#define GRT_SORDER_SCENARIO_LIFETIME_H

#include "gpurt/sorder.h"

typedef struct grt__lifetime_sched {
  uint64_t pre_a_ns; /* work on A before the reader */
  uint64_t read_ns;  /* the reader kernel on A */
  uint64_t pre_c_ns; /* work on C before the writer */
  uint64_t write_ns; /* the writer kernel on C */
  int gated;         /* deterministic: A's reader waits until C's writer finished (unsafe) or the free (safe) */
} grt__lifetime_sched;

typedef struct grt__lifetime {
  grt_exec *exec;
  grt_sorder *so;    /* sanitizer (and debug mode when GRT_SORDER_DEBUG=1) */
  grt_mempool *pool; /* the stream-ordered pool, "caching" underneath */
  grt_stream *a, *c;
  grt_event *handoff; /* safe variant: recorded on A after the free, waited on by C */
  uint64_t bytes;
  uint64_t reports;  /* sanitizer reports of the last run */
  int same_block;    /* the last run's writer got the reader's block */
} grt__lifetime;

grt_status grt__lifetime_init(grt__lifetime *lt, grt_exec *exec, uint64_t bytes);
/* Synchronizes the exec and destroys the streams, pool and sanitizer (all of
 * them, whatever fails); the first failure. */
grt_status grt__lifetime_fini(grt__lifetime *lt);
/* One schedule; *corrupted = the reader's checksum did not match. */
grt_status grt__lifetime_run(grt__lifetime *lt, int stream_ordered, const grt__lifetime_sched *sc, uint64_t seed,
                             int *corrupted);

#endif
