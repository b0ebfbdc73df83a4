/* kop.h — described kernels inside the exec layer (kop.c): the copy a
 * launch, a graph node or an executable graph's body owns, and the bodies
 * that run one kernel (kop.c) or a fused group (fusion_run.c).
 *
 * A kernel op proto carries fn = grt__kop_run (or grt__fused_run) and arg =
 * a grt__kop (or grt__fused) it owns: an eager op frees it with the op, a
 * graph node with the node, a body with the body (grt__body_owns). */
#ifndef GRT_KOP_H
#define GRT_KOP_H

#include <stdbool.h>

#include "gpurt/fusion.h"

typedef struct grt__kop {
  grt_kernel_op op; /* in and init point into this block */
  grt_device *dev;  /* resolves the buffers when it runs */
  grt_op_buffer in[GRT_OP_MAX_INPUTS];
  unsigned char init[GRT_OP_MAX_ELEM];
} grt__kop;

/* A fused group's kernel (fusion.c builds it): members in topological
 * order, an output-fusible one first, a reduction last. */
typedef struct grt__fmember {
  grt__kop k;
  int32_t src[GRT_OP_MAX_INPUTS]; /* per input: the member computing it, or -1: read from memory */
  bool store;                     /* its output is written to memory */
} grt__fmember;

typedef struct grt__fused {
  grt_device *dev;
  uint64_t bytes; /* modelled traffic: the inputs from memory (each once) and the stored outputs */
  uint32_t n_members;
  grt__fmember m[];
} grt__fused;

void grt__fused_run(void *arg);

/* A copy of op (normalized: count and div filled in); NULL: out of memory. */
grt__kop *grt__kop_new(grt_device *dev, const grt_kernel_op *op);
grt__kop *grt__kop_dup(const grt__kop *k);
void grt__kop_run(void *arg);

/* Elements of buffer b and its bytes. */
static inline uint64_t grt__kop_buf_bytes(const grt_op_buffer *b) { return b->count * b->elem_size; }
uint64_t grt__kop_bytes(const grt_kernel_op *op); /* normalized op */

/* desc's described kernel, checked against dev (desc->fn must be NULL). */
grt_status grt__kop_from_desc(grt_device *dev, const grt_kernel_desc *desc, const grt_kernel_op *op, grt__kop **out);
void grt__kop_fix(grt__kop *k); /* after a byte copy: in and init point into k again */

/* Whether fn/arg is a described kernel's (either body), and a copy of its arg. */
bool grt__kop_is_body(grt_host_fn fn);
void *grt__kop_body_dup(grt_host_fn fn, const void *arg);
void grt__kop_body_free(grt_host_fn fn, void *arg);

#endif
