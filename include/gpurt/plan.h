/* gpurt/plan.h — static (offline) memory planning: every buffer's lifetime
 * is known up front, so offsets are chosen before anything runs, as
 * TensorRT and google/minimalloc do for a graph's intermediate tensors.
 *
 * The problem. n buffers, each live over the steps [lower, upper) with
 * `size` bytes at an offset that is a multiple of its `alignment`. Two
 * buffers whose lifetimes intersect must not intersect in address. The
 * planner picks the offsets and reports the heap they need (the largest
 * offset + size). No heap can be smaller than the peak live bytes (the
 * largest sum of sizes live at one step), so heap / peak_live >= 1 measures
 * how close a plan is to the limit. Finding the smallest heap is NP-hard
 * (dynamic storage allocation); the planner is a bounded heuristic search
 * (docs/PLAN.md: the algorithm, its guarantees, measured results).
 *
 * Results. offsets[i] belongs to bufs[i]. A plan is deterministic: the same
 * buffers, config and seed give the same offsets on every machine, unless
 * the wall-clock cap (budget_ms) stops the search first, in which case
 * they depend on the machine's speed (the result says so).
 *
 * Errors. Every function validates its whole input before it writes
 * anything: a failed call leaves every out-parameter as it was, and err
 * (when not NULL) receives one line naming the buffer, by index and id, and
 * what is wrong with it. GRT_ERR_INVALID_ARG: a NULL pointer, upper <=
 * lower, an alignment that is not a power of two, an id used twice, or (the
 * checker) a placement that breaks a rule. GRT_ERR_SIZE: a size of 0, more
 * than 2^32-1 buffers, or sizes and alignments whose sum does not fit in
 * 2^63 (so no offset or heap can overflow), or (grt_plan_solve) more than 2^24 pairs of
 * buffers live at the same time (its conflict lists would pass 128 MiB). GRT_ERR_NOMEM: host memory ran
 * out; nothing leaks.
 *
 * Thread safety: no state is shared between calls; any number of threads
 * may plan at once (each on its own outputs).
 */
#ifndef GPURT_PLAN_H
#define GPURT_PLAN_H

#include <stdbool.h>

#include "gpurt/base.h"
#include "gpurt/trace.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct grt_plan_buffer {
  uint64_t id;        /* the caller's key, unique among the buffers; named in errors */
  uint64_t lower;     /* the first step the buffer is live */
  uint64_t upper;     /* the first step it is no longer live; > lower */
  uint64_t size;      /* bytes; > 0 */
  uint64_t alignment; /* bytes, a power of two; 0 means 1 */
} grt_plan_buffer;

typedef struct grt_plan_config {
  uint64_t effort;    /* placement orders the search may try after the first ones (the deterministic
                         bound); default 4000; 0: the first orders only */
  uint64_t budget_ms; /* wall-clock cap on the search in milliseconds; 0 = none (default) */
  uint64_t seed;      /* the search's random choices; default 1 */
} grt_plan_config;

typedef struct grt_plan_result {
  uint64_t heap;      /* bytes the plan needs: max(offset + size), 0 for no buffers */
  uint64_t peak_live; /* max over steps of the live bytes: the lower bound of any heap */
  uint64_t orders;    /* placement orders tried */
  bool optimal;       /* heap == peak_live: no plan can be smaller */
  bool budget_hit;    /* budget_ms stopped the search (the plan then depends on the machine's speed) */
} grt_plan_result;

GRT_API void grt_plan_config_default(grt_plan_config *cfg);

/* Places bufs[0..n) (n may be 0): writes offsets[0..n) and *out. cfg may be
 * NULL (defaults); err may be NULL. */
GRT_API GRT_MUST_CHECK grt_status grt_plan_solve(const grt_plan_buffer *bufs, size_t n, const grt_plan_config *cfg,
                                                 uint64_t *offsets, grt_plan_result *out, char *err, size_t err_size);

/* The peak live bytes of bufs[0..n): *peak, and the first step where it is
 * reached in *step (may be NULL; 0 for no buffers). O(n log n). */
GRT_API GRT_MUST_CHECK grt_status grt_plan_peak_live(const grt_plan_buffer *bufs, size_t n, uint64_t *peak,
                                                     uint64_t *step, char *err, size_t err_size);

/* Checks a placement on its own, independently of how it was made: every
 * offset a multiple of its buffer's alignment, offset + size without
 * overflow, and every two buffers whose lifetimes intersect disjoint in
 * address. GRT_OK and *heap (may be NULL) = max(offset + size) when it
 * holds; GRT_ERR_INVALID_ARG and err naming the first broken rule (the two
 * buffers, their steps and byte ranges) when not. A sweep over the steps
 * with the live buffers ordered by offset: O(n log n), not pairwise. */
GRT_API GRT_MUST_CHECK grt_status grt_plan_check(const grt_plan_buffer *bufs, size_t n, const uint64_t *offsets,
                                                 uint64_t *heap, char *err, size_t err_size);

/* The buffers of a loaded trace (any format gpurt reads): one per alloc
 * event, live from it to its allocation's free_completed event, with events
 * numbered as steps (event k is step k + 1). A block freed but never
 * allocated in the trace (live when recording began) is live from step 0,
 * one never freed until the step after the last event. Ids are the trace's
 * (dense, 0..n_ids-1); alignment 1; allocs of 0 bytes take no memory and
 * are left out. *out is malloc'd (grt_plan_buffers_free), NULL when *n is
 * 0. A minimalloc CSV's events keep its lifetimes' overlaps exactly (frees
 * first at each step), so its plans and peak are the file's own. */
GRT_API GRT_MUST_CHECK grt_status grt_plan_buffers_from_trace(const grt_trace *trace, grt_plan_buffer **out, size_t *n,
                                                              char *err, size_t err_size);
/* free() for grt_plan_buffers_from_trace's array; NULL is a no-op. */
GRT_API void grt_plan_buffers_free(grt_plan_buffer *bufs);

#ifdef __cplusplus
}
#endif
#endif /* GPURT_PLAN_H */
