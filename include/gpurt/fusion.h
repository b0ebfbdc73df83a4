/* gpurt/fusion.h — kernels that say what they compute, and a fusion pass
 * over captured or built graphs at instantiate.
 *
 * A kernel launch (grt_launch_kernel_op) may describe itself: its operator
 * class, the buffers it reads and writes with their element layout, and its
 * per-element function. gpurt then runs the kernel from that description
 * (desc->fn stays NULL), so an unfused and a fused graph compute every byte
 * with the same functions in the same order. A launch without a description
 * is opaque: it runs desc->fn and never fuses.
 *
 * The index space. A kernel computes over n indices i = 0..n-1. An input
 * buffer is read at element (i / div) % count: div 1 and count n is the
 * identity, count c < n a broadcast along the last axis (a bias over
 * columns), div = cols a per-row value (a norm's scale). The output is
 * written at element i (a reduction: at i / group, one element per group of
 * consecutive indices).
 *
 * Classes:
 *   ELEMENTWISE     out[i] = fn(in_0[idx_0(i)], ..., i). Fuses with its
 *                   producers and consumers.
 *   REDUCTION       acc_j = init; acc_j = combine(acc_j, x_i) for the group's
 *                   i in order, x_i = fn(inputs at i) (fn NULL: x_i is the
 *                   one input's element); out[j] = acc_j. Elementwise
 *                   producers fuse into it; it ends its group.
 *   OUTPUT_FUSIBLE  a GEMM/convolution-like kernel: out[i] = fn(in_0, ...,
 *                   i) where in_k points at input k's first element (the
 *                   whole buffer is readable). Elementwise consumers fuse
 *                   into it as an epilogue; it starts its group.
 *
 * Modelled traffic. A kernel moves the bytes of its input buffers
 * (count x elem_size each) plus its output; a fused kernel moves its group's
 * inputs from outside (each distinct buffer once) and the outputs read
 * outside, so a chain of k elementwise kernels over N elements of b bytes
 * moves 2kNb unfused and 2Nb fused. A fused kernel's modelled duration is
 * its members' total scaled by fused / unfused bytes (memory-bound kernels).
 *
 * Lifetime: a graph node copies the description (not params, which the
 * caller keeps valid while launches may run, like a host function's arg);
 * an eager launch reads it when the kernel runs, so it must stay valid
 * until then.
 */
#ifndef GPURT_FUSION_H
#define GPURT_FUSION_H

#include "gpurt/exec.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum grt_op_class {
  GRT_OP_OPAQUE = 0,
  GRT_OP_ELEMENTWISE = 1,
  GRT_OP_REDUCTION = 2,
  GRT_OP_OUTPUT_FUSIBLE = 3
} grt_op_class;

#define GRT_OP_MAX_INPUTS 8u
#define GRT_OP_MAX_ELEM 64u /* bytes of one element */

typedef struct grt_op_buffer {
  grt_devptr ptr;     /* its first element */
  uint32_t elem_size; /* bytes per element, 1..GRT_OP_MAX_ELEM */
  uint64_t count;     /* elements; 0: the kernel's n (the output: n, or n / group) */
  uint64_t div;       /* index i reads element (i / div) % count; 0: 1 */
} grt_op_buffer;

/* Elementwise and output-fusible: out = f(inputs, i). Reduction: fn maps
 * the inputs at i to the value combined (out.elem_size bytes). */
typedef void (*grt_elem_fn)(void *out, const void *const *in, uint64_t i, const void *params);
/* Reduction: acc = combine(acc, x), in place. */
typedef void (*grt_combine_fn)(void *acc, const void *x, const void *params);

typedef struct grt_kernel_op {
  grt_op_class cls;
  uint64_t n;              /* indices computed (a reduction: indices read) */
  uint64_t group;          /* reduction: indices per output element (divides n) */
  const grt_op_buffer *in; /* n_in inputs, read */
  uint32_t n_in;           /* 0..GRT_OP_MAX_INPUTS */
  grt_op_buffer out;       /* written; disjoint from the inputs */
  grt_elem_fn fn;          /* required, except a reduction of one input */
  grt_combine_fn combine;  /* reduction */
  const void *init;        /* reduction: the accumulator's first value, out.elem_size bytes (copied) */
  const void *params;      /* passed to fn and combine; not copied */
} grt_kernel_op;

/* grt_launch_kernel of a described kernel: desc gives the duration, engine
 * and name (desc->fn must be NULL: gpurt runs op). In a capture it becomes a
 * kernel node keeping a copy of op. GRT_ERR_INVALID_ARG / _UNKNOWN_POINTER
 * as grt_kernel_op_check, nothing issued. */
GRT_API GRT_MUST_CHECK grt_status grt_launch_kernel_op(grt_stream *s, const grt_kernel_desc *desc,
                                                       const grt_kernel_op *op);
/* grt_graph_add_kernel_node of a described kernel (the node copies op). */
GRT_API GRT_MUST_CHECK grt_status grt_graph_add_kernel_op_node(grt_graph *g, grt_graph_node *const *deps, size_t n_deps,
                                                               const grt_kernel_desc *desc, const grt_kernel_op *op,
                                                               grt_graph_node **out);

/* Checks op as grt_launch_kernel_op does: GRT_ERR_INVALID_ARG (a class, size,
 * count, layout or function that breaks the rules above; err says which),
 * GRT_ERR_UNKNOWN_POINTER (a buffer not inside a live segment of dev). */
GRT_API GRT_MUST_CHECK grt_status grt_kernel_op_check(grt_device *dev, const grt_kernel_op *op, char *err,
                                                      size_t err_size);
/* Bytes the kernel moves in the model (above). */
GRT_API GRT_MUST_CHECK grt_status grt_kernel_op_bytes(const grt_kernel_op *op, uint64_t *out);

/* ---- the fusion pass --------------------------------------------------------------- */

#define GRT_GRAPH_INSTANTIATE_FUSE 1u

typedef struct grt_graph_instantiate_params {
  unsigned flags;     /* GRT_GRAPH_INSTANTIATE_FUSE: run the fusion pass */
  uint32_t max_group; /* kernels in one fused kernel; 0: 16 */
} grt_graph_instantiate_params;

/* grt_graph_instantiate with params (NULL: none). With FUSE, the executable
 * graph runs fused kernels in place of groups of described kernels:
 * vertical chains (a producer's output read, at its own index, by its
 * consumer), elementwise producers into a reduction, elementwise epilogues
 * into an output-fusible kernel, and independent elementwise kernels that
 * read the same buffer over the same indices. A fused-away intermediate is
 * never written; when it is an allocation node's memory, the executable
 * graph does not allocate it (its pool_bytes shrink). An executable graph
 * made with FUSE cannot be updated (GRT_GRAPH_UPDATE_NOT_SUPPORTED). */
GRT_API GRT_MUST_CHECK grt_status grt_graph_instantiate_ex(grt_graph *g, const grt_graph_instantiate_params *params,
                                                           grt_graph_exec **out);

/* Why two kernels were not fused (or GRT_FUSE_OK). */
typedef enum grt_fuse_reason {
  GRT_FUSE_OK = 0,
  GRT_FUSE_OPAQUE,        /* one of them is opaque */
  GRT_FUSE_NO_DATA,       /* an edge no described buffer flows along */
  GRT_FUSE_SHAPE,         /* different index spaces */
  GRT_FUSE_LAYOUT,        /* the intermediate is read at another index (a broadcast) */
  GRT_FUSE_READ_OUTSIDE,  /* the intermediate is read outside the group */
  GRT_FUSE_HOST_MAY_READ, /* a host node or an opaque kernel may read the intermediate */
  GRT_FUSE_OUTLIVES,      /* the intermediate outlives the graph (not an allocation freed in it) */
  GRT_FUSE_CYCLE,         /* fusing would create a cycle */
  GRT_FUSE_EVENT_BETWEEN, /* an event node lies between them */
  GRT_FUSE_HOST_BETWEEN,  /* a host node lies between them */
  GRT_FUSE_STREAMS,       /* captured on different streams: joined only by the user's events, kept */
  GRT_FUSE_ALIAS,         /* buffers overlap without being the same, or one is written twice */
  GRT_FUSE_IN_PLACE,      /* a kernel writes a buffer it reads */
  GRT_FUSE_SIZE_LIMIT,    /* the group would pass max_group */
  GRT_FUSE_REDUCTION,     /* a reduction's output would be read inside its group, or two reductions */
  GRT_FUSE_HEAD           /* an output-fusible kernel would not start its group */
} grt_fuse_reason;

GRT_API const char *grt_fuse_reason_str(grt_fuse_reason r);

typedef enum grt_fuse_kind {
  GRT_FUSE_VERTICAL = 0,  /* producer into consumer */
  GRT_FUSE_HORIZONTAL = 1 /* siblings reading the same buffer */
} grt_fuse_kind;

/* One pair the pass considered: nodes by index in creation order. */
typedef struct grt_fusion_entry {
  uint32_t a, b;
  grt_fuse_kind kind;
  grt_fuse_reason reason;
  char a_name[40], b_name[40];
} grt_fusion_entry;

typedef struct grt_fusion_summary {
  uint32_t nodes_before, nodes_after;       /* flat nodes of the executable graph */
  uint32_t launches_before, launches_after; /* kernel nodes an engine runs */
  uint32_t groups;                          /* fused kernels (2 or more members) */
  uint32_t kernels_fused;                   /* members of those */
  uint64_t bytes_before, bytes_after;       /* modelled traffic of described kernels per launch */
  uint64_t pool_before, pool_after;         /* graph-pool bytes without and with fusion */
  uint32_t entries;                         /* pairs considered */
} grt_fusion_summary;

/* What the pass did for ge: *sum, and up to *n entries (entries may be NULL
 * with *n 0; *n receives the number written). An executable graph made
 * without FUSE reports its own figures as both before and after, no entries. */
GRT_API GRT_MUST_CHECK grt_status grt_graph_fusion_report(grt_graph_exec *ge, grt_fusion_summary *sum,
                                                          grt_fusion_entry *entries, size_t *n);

#ifdef __cplusplus
}
#endif
#endif /* GPURT_FUSION_H */
