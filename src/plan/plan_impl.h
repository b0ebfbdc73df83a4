/* plan_impl.h — the static planner's internal pieces (src/plan), shared by
 * its files: input validation, the step sweep, the conflict graph, one
 * greedy placement pass and the search over placement orders. */
#ifndef GRT_PLAN_IMPL_H
#define GRT_PLAN_IMPL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/rng.h"
#include "gpurt/plan.h"

/* Planner inputs stay below this so every offset, size, padding and heap
 * sum fits in a uint64_t with room to spare. */
#define GRT__PLAN_MAX_BYTES ((uint64_t)1 << 63)

/* At most this many adjacency entries (two per time-overlapping pair):
 * 128 MiB of conflict lists. */
#define GRT__PLAN_MAX_ADJ ((size_t)1 << 25)

static inline uint64_t grt__plan_align_of(const grt_plan_buffer *b) { return b->alignment ? b->alignment : 1; }

/* Writes "buffer I (id X): MESSAGE" into err when err is not NULL. */
void grt__plan_errf(char *err, size_t err_size, size_t index, const grt_plan_buffer *b, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 5, 6)))
#endif
    ;

/* Checks the arguments every entry point shares (bufs non-NULL when n > 0)
 * and every buffer's fields, their sums and the ids' uniqueness. Allocates
 * only to find repeated ids (GRT_ERR_NOMEM). */
grt_status grt__plan_validate(const grt_plan_buffer *bufs, size_t n, char *err, size_t err_size);

/* One end of a lifetime: a buffer's alloc (at lower) or free (at upper). */
typedef struct grt__plan_step {
  uint64_t step;
  uint32_t index;
  uint32_t is_alloc; /* 0 free, 1 alloc: at one step frees sort first, since upper is exclusive */
} grt__plan_step;

/* The 2n lifetime ends of valid buffers in step order (ties: frees, then by
 * index), malloc'd into *out. */
grt_status grt__plan_steps(const grt_plan_buffer *bufs, size_t n, grt__plan_step **out);
/* grt__plan_validate, then grt__plan_steps; a failure's message in err. */
grt_status grt__plan_validated_steps(const grt_plan_buffer *bufs, size_t n, grt__plan_step **out, char *err,
                                     size_t err_size);

/* The peak live bytes over the sorted ends ev[0..2n), and its first step. */
uint64_t grt__plan_peak(const grt_plan_buffer *bufs, const grt__plan_step *ev, size_t n, uint64_t *at);

/* Who overlaps whom in time: adj[start[i]..start[i+1]) are the buffers whose
 * lifetimes intersect buffer i's. */
typedef struct grt__plan_graph {
  size_t n;
  size_t *start; /* n + 1 entries */
  uint32_t *adj;
  size_t max_degree;
} grt__plan_graph;

/* Builds g from the sorted ends (GRT_ERR_SIZE with a message past
 * GRT__PLAN_MAX_ADJ entries, GRT_ERR_NOMEM); g is untouched on failure. */
grt_status grt__plan_graph_build(size_t n, const grt__plan_step *ev, grt__plan_graph *g, char *err, size_t err_size);
void grt__plan_graph_free(grt__plan_graph *g);

/* A placement order and what greedy placement made of it. */
typedef struct grt__plan_state {
  uint32_t *order;  /* n: buffer indices, the order they are placed in */
  uint32_t *pos;    /* n: pos[order[k]] == k */
  uint64_t *off;    /* n: offsets by buffer index */
  uint64_t *prefix; /* n + 1: prefix[k] = max(offset + size) over order[0..k) */
} grt__plan_state;

/* A byte range of a placed neighbour (scratch for the pass). */
typedef struct grt__plan_span {
  uint64_t lo, hi;
} grt__plan_span;

/* Places order[from..n) in turn, each at the lowest offset (a multiple of
 * its alignment) clear of every placed buffer it overlaps in time, keeping
 * the offsets of order[0..from). Returns the heap (s->prefix[n]), or
 * UINT64_MAX as soon as it would exceed `limit` (s is then partly placed).
 * scratch holds g->max_degree spans. */
uint64_t grt__plan_place(const grt_plan_buffer *bufs, const grt__plan_graph *g, grt__plan_state *s, size_t from,
                         uint64_t limit, grt__plan_span *scratch);

/* The skyline builder's tables (skyline.c): time cut into sections at the
 * distinct lifetime ends, each buffer's section range, buffers bucketed by
 * their first section. */
typedef struct grt__plan_sky {
  uint64_t *steps; /* n_sections + 1 distinct steps */
  size_t n_sections;
  uint32_t *sl, *su;                         /* buffer i spans sections [sl[i], su[i]) */
  uint32_t *by_start, *first, *left, *where; /* buckets by sl: unplaced ones first */
  uint64_t *floor;                           /* per section */
} grt__plan_sky;

/* Skyline only up to this many buffers: a plan costs O(n S). */
#define GRT__PLAN_SKYLINE_MAX 4096

/* How the skyline builder scores a buffer for the valley: weights of the
 * share of the valley's width it fills, of its size over max_size, a
 * bonus for filling the valley exactly, and of uniform noise. */
typedef struct grt__plan_sky_rule {
  double width, size, exact, noise, max_size;
} grt__plan_sky_rule;

grt_status grt__plan_sky_init(const grt_plan_buffer *bufs, size_t n, grt__plan_sky *k);
void grt__plan_sky_free(grt__plan_sky *k);
/* Builds one plan into off[0..n); its heap, or UINT64_MAX once it would pass limit. */
uint64_t grt__plan_skyline(const grt_plan_buffer *bufs, size_t n, grt__plan_sky *k, const grt__plan_sky_rule *rule,
                           grt__rng *rng, uint64_t limit, uint64_t *off);

#endif
