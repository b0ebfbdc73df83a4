/* kop.c — described kernels: checking a description, copying it, its
 * modelled traffic, and the one loop that runs a kernel or a fused group.
 *
 * Unfused and fused kernels share that loop: index by index, each member
 * computes one element into its scratch slot from memory or from the slot of
 * the member that produced it. So a fused group computes every element with
 * the same functions, on the same bytes, in the same order as its members
 * run one after another: the outputs agree bit for bit. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exec/kop.h"

static grt_status bad(char *err, size_t err_size, const char *msg, long k) {
  if (err && err_size) {
    if (k >= 0)
      snprintf(err, err_size, "kernel op: input %ld: %s", k, msg);
    else
      snprintf(err, err_size, "kernel op: %s", msg);
  }
  return GRT_ERR_INVALID_ARG;
}

/* A buffer's count and div filled in: the layout check below works on these. */
static grt_op_buffer norm_buf(const grt_op_buffer *b, uint64_t n) {
  grt_op_buffer r = *b;
  if (!r.div) r.div = 1;
  if (!r.count) r.count = n / r.div ? n / r.div : 1;
  return r;
}

static uint64_t out_count(const grt_kernel_op *op) {
  return op->cls == GRT_OP_REDUCTION && op->group ? op->n / op->group : op->n;
}

static grt_status check_buf(const grt_op_buffer *b, char *err, size_t es, long k) {
  if (!b->ptr) return bad(err, es, "null buffer", k);
  if (!b->elem_size || b->elem_size > GRT_OP_MAX_ELEM) return bad(err, es, "element size outside 1..64", k);
  if (b->count > UINT64_MAX / b->elem_size) return bad(err, es, "buffer too large", k);
  return GRT_OK;
}

static grt_status check_fields(const grt_kernel_op *op, char *err, size_t es) {
  if (op->cls > GRT_OP_OUTPUT_FUSIBLE) return bad(err, es, "unknown class", -1);
  if (op->cls == GRT_OP_OPAQUE) return bad(err, es, "an opaque kernel has no description: pass op NULL", -1);
  if (!op->n) return bad(err, es, "an empty index space", -1);
  if (op->n_in > GRT_OP_MAX_INPUTS || (op->n_in && !op->in)) return bad(err, es, "more than 8 inputs", -1);
  if (op->cls == GRT_OP_REDUCTION) {
    if (!op->group || op->n % op->group) return bad(err, es, "a reduction's group must divide n", -1);
    if (!op->combine || !op->init) return bad(err, es, "a reduction needs combine and init", -1);
    if (!op->fn && op->n_in != 1) return bad(err, es, "a reduction without fn reads exactly one input", -1);
    if (!op->fn && op->in[0].elem_size != op->out.elem_size)
      return bad(err, es, "a reduction without fn combines elements of its output's size", -1);
  } else if (!op->fn) {
    return bad(err, es, "no per-element function", -1);
  }
  return GRT_OK;
}

/* [ptr, ptr + bytes) of two buffers intersect. */
static bool overlaps(const grt_op_buffer *a, const grt_op_buffer *b) {
  return a->ptr < b->ptr + grt__kop_buf_bytes(b) && b->ptr < a->ptr + grt__kop_buf_bytes(a);
}

static grt_status check_layouts(const grt_kernel_op *op, const grt_op_buffer *in, const grt_op_buffer *out, char *err,
                                size_t es) {
  grt_status st = check_buf(out, err, es, -1);
  if (st) return st;
  if (out->div != 1 || out->count != out_count(op)) return bad(err, es, "the output must be written at its index", -1);
  for (uint32_t k = 0; k < op->n_in; k++) {
    if ((st = check_buf(&in[k], err, es, k))) return st;
    bool in_place = in[k].ptr == out->ptr && grt__kop_buf_bytes(&in[k]) == grt__kop_buf_bytes(out) && in[k].div == 1 &&
        op->cls == GRT_OP_ELEMENTWISE;
    if (overlaps(&in[k], out) && !in_place)
      return bad(err, es, "overlaps the output (only an elementwise kernel may update its input in place)", k);
  }
  return GRT_OK;
}

static grt_status check_ranges(grt_device *dev, const grt_op_buffer *in, uint32_t n_in, const grt_op_buffer *out) {
  void *h;
  for (uint32_t k = 0; k <= n_in; k++) {
    const grt_op_buffer *b = k < n_in ? &in[k] : out;
    grt_status st = grt_device_host_ptr(dev, b->ptr, grt__kop_buf_bytes(b), &h);
    if (st) return st == GRT_ERR_INVALID_ARG ? GRT_ERR_UNKNOWN_POINTER : st;
  }
  return GRT_OK;
}

grt_status grt_kernel_op_check(grt_device *dev, const grt_kernel_op *op, char *err, size_t err_size) {
  if (!op) return bad(err, err_size, "NULL", -1);
  grt_status st = check_fields(op, err, err_size);
  if (st) return st;
  grt_op_buffer in[GRT_OP_MAX_INPUTS], out = norm_buf(&op->out, out_count(op));
  for (uint32_t k = 0; k < op->n_in; k++) in[k] = norm_buf(&op->in[k], op->n);
  if ((st = check_layouts(op, in, &out, err, err_size))) return st;
  if (dev && (st = check_ranges(dev, in, op->n_in, &out)) && err && err_size)
    snprintf(err, err_size, "kernel op: a buffer is not inside a live segment of the device");
  return st;
}

uint64_t grt__kop_bytes(const grt_kernel_op *op) {
  uint64_t b = grt__kop_buf_bytes(&op->out);
  for (uint32_t k = 0; k < op->n_in; k++) b += grt__kop_buf_bytes(&op->in[k]);
  return b;
}

grt_status grt_kernel_op_bytes(const grt_kernel_op *op, uint64_t *out) {
  if (!out) return GRT_ERR_INVALID_ARG;
  grt_status st = grt_kernel_op_check(NULL, op, NULL, 0);
  if (st) return st;
  grt__kop k;
  memset(&k, 0, sizeof k);
  k.op = *op;
  k.op.out = norm_buf(&op->out, out_count(op));
  for (uint32_t i = 0; i < op->n_in; i++) k.in[i] = norm_buf(&op->in[i], op->n);
  k.op.in = k.in;
  *out = grt__kop_bytes(&k.op);
  return GRT_OK;
}

grt__kop *grt__kop_new(grt_device *dev, const grt_kernel_op *op) {
  grt__kop *k = calloc(1, sizeof *k);
  if (!k) return NULL;
  k->op = *op;
  k->dev = dev;
  for (uint32_t i = 0; i < op->n_in; i++) k->in[i] = norm_buf(&op->in[i], op->n);
  k->op.in = k->in;
  k->op.out = norm_buf(&op->out, out_count(op));
  if (op->init) memcpy(k->init, op->init, op->out.elem_size);
  k->op.init = op->init ? k->init : NULL;
  return k;
}

void grt__kop_fix(grt__kop *k) {
  k->op.in = k->in;
  if (k->op.init) k->op.init = k->init;
}

grt_status grt__kop_from_desc(grt_device *dev, const grt_kernel_desc *desc, const grt_kernel_op *op, grt__kop **out) {
  if (!desc || desc->fn) return GRT_ERR_INVALID_ARG; /* gpurt runs a described kernel from its description */
  grt_status st = grt_kernel_op_check(dev, op, NULL, 0);
  if (st) return st;
  return (*out = grt__kop_new(dev, op)) ? GRT_OK : GRT_ERR_NOMEM;
}

grt__kop *grt__kop_dup(const grt__kop *src) {
  grt__kop *k = malloc(sizeof *k);
  if (!k) return NULL;
  *k = *src;
  grt__kop_fix(k);
  return k;
}

/* ---- running ----------------------------------------------------------------- */

typedef struct run_state {
  const unsigned char *in[GRT_OP_MAX_INPUTS]; /* memory inputs: host views */
  unsigned char *out;                         /* stored output: its host view */
  unsigned char slot[GRT_OP_MAX_ELEM];        /* this index's value */
  unsigned char acc[GRT_OP_MAX_ELEM];         /* a reduction's accumulator */
} run_state;

/* Host views of every buffer read from or written to memory; false when one
 * is no longer inside a live segment (the kernel then writes nothing). */
static bool resolve(grt_device *dev, const grt__fmember *m, uint32_t n, run_state *rs) {
  for (uint32_t j = 0; j < n; j++) {
    const grt_kernel_op *op = &m[j].k.op;
    void *h;
    for (uint32_t k = 0; k < op->n_in; k++) {
      if (m[j].src[k] >= 0) continue;
      if (grt_device_host_ptr(dev, op->in[k].ptr, grt__kop_buf_bytes(&op->in[k]), &h)) return false;
      rs[j].in[k] = h;
    }
    if (m[j].store && grt_device_host_ptr(dev, op->out.ptr, grt__kop_buf_bytes(&op->out), &h)) return false;
    rs[j].out = m[j].store ? h : NULL;
    if (op->cls == GRT_OP_REDUCTION) memcpy(rs[j].acc, op->init, op->out.elem_size);
  }
  return true;
}

/* Member j at index i. */
static void step(const grt__fmember *m, run_state *rs, uint32_t j, uint64_t i) {
  const grt_kernel_op *op = &m[j].k.op;
  const void *args[GRT_OP_MAX_INPUTS];
  for (uint32_t k = 0; k < op->n_in; k++) {
    const grt_op_buffer *b = &op->in[k];
    if (m[j].src[k] >= 0)
      args[k] = rs[m[j].src[k]].slot;
    else if (op->cls == GRT_OP_OUTPUT_FUSIBLE)
      args[k] = rs[j].in[k];
    else
      args[k] = rs[j].in[k] + (i / b->div % b->count) * b->elem_size;
  }
  uint32_t es = op->out.elem_size;
  if (op->cls != GRT_OP_REDUCTION) {
    op->fn(rs[j].slot, args, i, op->params);
    if (rs[j].out) memcpy(rs[j].out + i * es, rs[j].slot, es);
    return;
  }
  const void *x = args[0];
  if (op->fn) {
    op->fn(rs[j].slot, args, i, op->params);
    x = rs[j].slot;
  }
  op->combine(rs[j].acc, x, op->params);
  if ((i + 1) % op->group) return;
  if (rs[j].out) memcpy(rs[j].out + i / op->group * es, rs[j].acc, es);
  memcpy(rs[j].acc, op->init, es);
}

static void run_members(grt_device *dev, const grt__fmember *m, uint32_t n) {
  run_state stack[4], *rs = n <= 4 ? stack : malloc(n * sizeof *rs);
  if (!rs) return; /* a body cannot fail: the model's limit, like a lost segment */
  if (resolve(dev, m, n, rs))
    for (uint64_t i = 0, end = m[0].k.op.n; i < end; i++)
      for (uint32_t j = 0; j < n; j++) step(m, rs, j, i);
  if (rs != stack) free(rs);
}

void grt__kop_run(void *arg) {
  grt__fmember one;
  one.k = *(const grt__kop *)arg;
  grt__kop_fix(&one.k);
  for (uint32_t k = 0; k < GRT_OP_MAX_INPUTS; k++) one.src[k] = -1;
  one.store = true;
  run_members(one.k.dev, &one, 1);
}

void grt__fused_run(void *arg) {
  const grt__fused *f = arg;
  run_members(f->dev, f->m, f->n_members);
}

/* ---- ownership --------------------------------------------------------------- */

bool grt__kop_is_body(grt_host_fn fn) { return fn == grt__kop_run || fn == grt__fused_run; }

void *grt__kop_body_dup(grt_host_fn fn, const void *arg) {
  if (fn == grt__kop_run) return grt__kop_dup(arg);
  const grt__fused *f = arg;
  size_t sz = sizeof *f + f->n_members * sizeof f->m[0];
  grt__fused *c = malloc(sz);
  if (!c) return NULL;
  memcpy(c, f, sz);
  for (uint32_t j = 0; j < c->n_members; j++) grt__kop_fix(&c->m[j].k);
  return c;
}

void grt__kop_body_free(grt_host_fn fn, void *arg) {
  if (grt__kop_is_body(fn)) free(arg);
}
