/* workloads.h — the allocator benchmark workloads W1 and W2 (internal).
 *
 * As the reference figures define them (docs/ALLOCATORS.md, with the peers'):
 *   W1 "random-8g": an 8 GiB range (offsets only), sizes log-uniform in
 *      [512 B, 64 MiB] rounded up to 256 B; fill 1000 slots (untimed), then
 *      1,000,000 timed iterations: free a uniformly random slot, allocate a new
 *      size into it. Seed 42. Figure: ns per free+alloc pair.
 *   W2: the same with 1200 slots (~80% mean demand). Figure: failed
 *      allocations per 1e6 iterations, and how many of those failed although
 *      one free range was large enough (0 for exact best fit).
 * A failed allocation leaves its slot empty; freeing an empty slot is skipped.
 * Slots keep the block's handle and free by it (grt__range_free_handle), as
 * the peers (OffsetAllocator, VMA) free by allocation handle.
 *
 * The operation stream (slot, size) does not depend on the allocator, so it is
 * drawn up front from base/rng.h (xoshiro256**) and the timed loop only reads
 * it; the "harness" allocator runs the same loop without an allocator, giving
 * the loop's own cost. Our PRNG stream differs from the peers', so failure
 * counts compare with theirs only statistically; between our allocators they
 * compare exactly (same stream).
 *
 * Used by bench/bench_index.c and, later, the `gpurt bench` command.
 */
#ifndef GRT_ALLOC_WORKLOADS_H
#define GRT_ALLOC_WORKLOADS_H

#include <stdint.h>

#include "workloads/block_index.h"

typedef enum grt__workload_allocator {
  GRT__WALLOC_BINS = GRT__INDEX_BINS,   /* range allocator on the size-class index */
  GRT__WALLOC_OTREE = GRT__INDEX_OTREE, /* range allocator on the ordered tree */
  GRT__WALLOC_APPROX,                   /* approximate fit, OffsetAllocator's design (approx_range.h) */
  GRT__WALLOC_HARNESS,                  /* the loop alone, no allocator */
  GRT__WALLOC_COUNT
} grt__workload_allocator;

typedef struct grt__churn_config {
  uint64_t capacity;   /* bytes in the range */
  uint32_t slots;      /* live-block slots filled before timing */
  uint32_t iterations; /* timed free+alloc pairs */
  uint64_t min_size, max_size; /* log-uniform bounds, bytes */
  uint64_t granule;    /* sizes rounded up to a multiple of this (power of two) */
  uint64_t seed;
  uint32_t runs;       /* timed repetitions; ns_per_pair is their median (>= 1) */
} grt__churn_config;

typedef struct grt__churn_result {
  double ns_per_pair;          /* median over runs of timed ns / iterations */
  double ns_min;               /* the fastest run's ns / iterations */
  uint64_t failures;           /* failed allocations in the timed iterations */
  uint64_t failures_with_hole; /* of those, failed although largest free >= size */
  uint64_t fill_failures;      /* failed allocations while filling (untimed) */
  uint64_t checksum;           /* mixes every offset handed out: equal for equal choices */
} grt__churn_result;

/* W1 / W2 as defined above with the given seed and number of timed runs. */
void grt__w1_config(grt__churn_config *cfg, uint64_t seed, uint32_t runs);
void grt__w2_config(grt__churn_config *cfg, uint64_t seed, uint32_t runs);
/* Runs the churn on `alloc`. GRT_ERR_INVALID_ARG for a bad config or allocator;
 * GRT_ERR_NOMEM; GRT_ERR_INTERNAL if the allocator misbehaves (a bug). */
grt_status grt__churn_run(const grt__churn_config *cfg, grt__workload_allocator alloc, grt__churn_result *out);
/* The same for n allocators on one op stream, their runs interleaved (run 1
 * of each, then run 2 of each, ...): a machine whose speed drifts between
 * runs affects them alike, so ratios between them hold better. out[k] is
 * allocs[k]'s result. */
grt_status grt__churn_run_interleaved(const grt__churn_config *cfg, const grt__workload_allocator *allocs, size_t n,
                                      grt__churn_result *out);
grt_status grt__w1_run(grt__workload_allocator alloc, uint64_t seed, uint32_t runs, grt__churn_result *out);
grt_status grt__w2_run(grt__workload_allocator alloc, uint64_t seed, uint32_t runs, grt__churn_result *out);
/* The op stream of a config, drawn from its seed and independent of the
 * allocator (so other allocators — `gpurt bench` runs every policy — replay
 * exactly the same requests). Free with grt__churn_ops_free. */
typedef struct grt__churn_ops {
  uint64_t *fill_size; /* [slots] */
  uint32_t *slot;      /* [iterations] */
  uint64_t *size;      /* [iterations] */
} grt__churn_ops;
grt_status grt__churn_draw(const grt__churn_config *cfg, grt__churn_ops *out);
void grt__churn_ops_free(grt__churn_ops *ops);

/* The long-class workload (no peer figure; it guards the size-class index's
 * worst case): n free ranges of GRT__LONG_UNIT bytes between live
 * GRT__LONG_SPACER-byte blocks, so that they cannot merge and all share one
 * size class; n/2 of them are taken (lowest offsets first), then each timed
 * iteration frees a taken one drawn at random (seed 42) and allocates a unit
 * again, which best fit takes at the lowest free offset. The class stays ~n/2
 * long and its minimum leaves on every allocation. ns_per_pair / ns_min as in
 * grt__churn_result (median and min over runs, runs interleaved over kinds);
 * the checksum must agree between kinds (GRT_ERR_INTERNAL otherwise). */
#define GRT__LONG_UNIT 4096u
#define GRT__LONG_SPACER 256u
grt_status grt__long_class_run(const grt__index_kind *kinds, size_t n_kinds, uint32_t n, uint32_t iterations,
                               uint32_t runs, grt__churn_result *out);

/* W3 on an offset allocator (docs/ALLOCATORS.md: google/minimalloc buffer
 * lifetimes): the ops of one trace in replay order (frees before allocations
 * at a step), ids below n_ids. *heap is the smallest capacity (bytes) on
 * which every allocation succeeds, found by bisection between the peak live
 * bytes and a capacity that works (doubling); *peak_live the peak of the
 * live bytes. Sizes are exact (approx: 1-byte granules). GRT_ERR_INVALID_ARG
 * for an unknown allocator (the harness has no heap), an id out of range, a
 * free of a dead id or an allocation of a live one (or no allocation at all);
 * GRT_ERR_OOM when no capacity up to 1 TiB (approx: 4 GiB) works;
 * GRT_ERR_NOMEM. */
typedef struct grt__lifetime_op {
  uint64_t size; /* bytes (allocations) */
  uint32_t id;
  uint32_t is_free;
} grt__lifetime_op;
grt_status grt__w3_heap_needed(grt__workload_allocator alloc, const grt__lifetime_op *ops, size_t n, uint32_t n_ids,
                               uint64_t *heap, uint64_t *peak_live);

/* "bins", "otree", "approx" or "harness"; NULL for an unknown value. */
const char *grt__workload_allocator_name(grt__workload_allocator alloc);

#endif
