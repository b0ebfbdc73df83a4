/* fusion_check.c — whether two groups of described kernels may run as one
 * kernel: the rules of gpurt/fusion.h, each refusal with its reason.
 *
 * The union is checked as a whole: index spaces, streams, the classes'
 * places (an output-fusible kernel starts a group, a reduction ends one),
 * every buffer one member writes and another reads (read at its own index,
 * memory of an allocation node freed in the graph that nothing outside the
 * group may touch), aliasing, and that contracting the union to one node
 * leaves the graph acyclic. */
#include <string.h>

#include "exec/fusion_impl.h"

uint32_t grt__fuse_find(grt__fuse *f, uint32_t x) {
  while (f->parent[x] != x) x = f->parent[x] = f->parent[f->parent[x]];
  return x;
}

bool grt__fuse_reaches(const grt__fuse *f, uint32_t from, uint32_t to) {
  return (f->reach[(size_t)from * f->words + to / 64] >> (to % 64)) & 1;
}

/* The members of the groups of a and b into f->members, in topological order; marks them 1. */
static uint32_t collect(grt__fuse *f, uint32_t a, uint32_t b) {
  memset(f->mark, 0, f->n);
  uint32_t ra = grt__fuse_find(f, a), rb = grt__fuse_find(f, b), m = 0;
  for (uint32_t t = 0; t < f->n; t++) {
    uint32_t i = f->order[t], r = grt__fuse_find(f, i);
    if (r == ra || r == rb) {
      f->members[m++] = i;
      f->mark[i] = 1;
    }
  }
  return m;
}

static bool in_place(const grt_kernel_op *op) {
  for (uint32_t k = 0; k < op->n_in; k++)
    if (grt__fuse_same(&op->in[k], &op->out)) return true;
  return false;
}

static grt_fuse_reason shape(grt__fuse *f, uint32_t m) {
  const grt__kop *k0 = f->k[f->members[0]];
  grt_stream *s0 = f->g->nodes[f->members[0]].proto.stream;
  uint32_t reductions = 0, heads = 0;
  for (uint32_t j = 0; j < m; j++) {
    uint32_t i = f->members[j];
    const grt_kernel_op *op = &f->k[i]->op;
    if (op->n != k0->op.n) return GRT_FUSE_SHAPE;
    if (f->g->nodes[i].proto.stream != s0) return GRT_FUSE_STREAMS;
    if (in_place(op)) return GRT_FUSE_IN_PLACE;
    reductions += op->cls == GRT_OP_REDUCTION;
    heads += op->cls == GRT_OP_OUTPUT_FUSIBLE;
  }
  if (reductions > 1) return GRT_FUSE_REDUCTION;
  return heads > 1 ? GRT_FUSE_HEAD : GRT_FUSE_OK;
}

static bool buf_overlap(const grt_op_buffer *a, const grt_op_buffer *b) {
  return grt__fuse_overlap(a->ptr, grt__kop_buf_bytes(a), b->ptr, grt__kop_buf_bytes(b));
}

/* Input k of member y against the members' outputs. */
static grt_fuse_reason input_rule(grt__fuse *f, uint32_t m, uint32_t y, uint32_t k) {
  const grt_kernel_op *ry = &f->k[y]->op;
  const grt_op_buffer *in = &ry->in[k];
  for (uint32_t j = 0; j < m; j++) {
    uint32_t x = f->members[j];
    const grt_kernel_op *wx = &f->k[x]->op;
    if (x == y || !buf_overlap(in, &wx->out)) continue;
    if (in->ptr != wx->out.ptr || in->elem_size != wx->out.elem_size) return GRT_FUSE_ALIAS;
    if (ry->cls == GRT_OP_OUTPUT_FUSIBLE) return GRT_FUSE_HEAD;
    if (wx->cls == GRT_OP_REDUCTION) return GRT_FUSE_REDUCTION;
    if (in->div != 1 || in->count != ry->n) return GRT_FUSE_LAYOUT; /* the same buffer, read elsewhere */
    if (!grt__fuse_same(in, &wx->out)) return GRT_FUSE_ALIAS;
    return grt__fuse_internal(f, in);
  }
  return GRT_FUSE_OK;
}

static grt_fuse_reason buffers(grt__fuse *f, uint32_t m) {
  for (uint32_t j = 0; j < m; j++) {
    uint32_t y = f->members[j];
    for (uint32_t j2 = j + 1; j2 < m; j2++)
      if (buf_overlap(&f->k[y]->op.out, &f->k[f->members[j2]]->op.out)) return GRT_FUSE_ALIAS;
    for (uint32_t k = 0; k < f->k[y]->op.n_in; k++) {
      grt_fuse_reason r = input_rule(f, m, y, k);
      if (r) return r;
    }
  }
  return GRT_FUSE_OK;
}

/* ---- internal buffers ---------------------------------------------------------- */

static uint32_t node_of_block(const grt__fuse *f, uint8_t kind, const grt__gblock *b, const grt_op_buffer *x) {
  for (uint32_t i = 0; i < f->n; i++) {
    const grt__gnode *nd = &f->g->nodes[i];
    if (nd->proto.kind != kind || !nd->block) continue;
    if (b ? nd->block == b
          : nd->block->ptr <= x->ptr && x->ptr + grt__kop_buf_bytes(x) <= nd->block->ptr + nd->block->size)
      return i;
  }
  return UINT32_MAX;
}

static bool kop_touches(const grt_kernel_op *op, grt_devptr p, uint64_t n) {
  if (grt__fuse_overlap(op->out.ptr, grt__kop_buf_bytes(&op->out), p, n)) return true;
  for (uint32_t k = 0; k < op->n_in; k++)
    if (grt__fuse_overlap(op->in[k].ptr, grt__kop_buf_bytes(&op->in[k]), p, n)) return true;
  return false;
}

static bool copy_touches(const grt__op *o, grt_devptr p, uint64_t n) {
  switch (o->kind) {
    case GRT__OP_H2D:
    case GRT__OP_D2H:
    case GRT__OP_MEMSET: return grt__fuse_overlap(o->u.mem.dev, o->u.mem.bytes, p, n);
    case GRT__OP_D2D:
      return grt__fuse_overlap(o->u.mem.dev, o->u.mem.bytes, p, n) ||
          grt__fuse_overlap(o->u.mem.dev2, o->u.mem.bytes, p, n);
    default: return false;
  }
}

/* A node whose accesses are unknown: a host node, a child graph, an opaque kernel with a body. */
static bool unknown_access(const grt__fuse *f, uint32_t i) {
  const grt__gnode *nd = &f->g->nodes[i];
  if (nd->type == GRT_GRAPH_NODE_HOST || nd->child) return true;
  return nd->type == GRT_GRAPH_NODE_KERNEL && !f->k[i] && nd->proto.u.call.fn;
}

/* Node i outside the group against the block [p, p + n) allocated by node al and freed by fr. */
static grt_fuse_reason outside_rule(const grt__fuse *f, uint32_t i, grt_devptr p, uint64_t n, uint32_t al,
                                    uint32_t fr) {
  const grt__gnode *nd = &f->g->nodes[i];
  if (f->k[i] && kop_touches(&f->k[i]->op, p, n)) return GRT_FUSE_READ_OUTSIDE;
  if (copy_touches(&nd->proto, p, n)) return GRT_FUSE_READ_OUTSIDE;
  if (unknown_access(f, i) && !grt__fuse_reaches(f, i, al) && !grt__fuse_reaches(f, fr, i))
    return GRT_FUSE_HOST_MAY_READ;
  return GRT_FUSE_OK;
}

grt_fuse_reason grt__fuse_internal(grt__fuse *f, const grt_op_buffer *x) {
  uint32_t al = node_of_block(f, GRT__OP_GALLOC, NULL, x);
  if (al == UINT32_MAX) return GRT_FUSE_OUTLIVES;
  const grt__gblock *b = f->g->nodes[al].block;
  uint32_t fr = node_of_block(f, GRT__OP_GFREE, b, x);
  if (fr == UINT32_MAX) return GRT_FUSE_OUTLIVES;
  for (uint32_t i = 0; i < f->n; i++) {
    if (f->mark[i] & 1) { /* members touch the block only as x */
      const grt_kernel_op *op = &f->k[i]->op;
      if (grt__fuse_overlap(op->out.ptr, grt__kop_buf_bytes(&op->out), b->ptr, b->size) && !grt__fuse_same(&op->out, x))
        return GRT_FUSE_ALIAS;
      for (uint32_t k = 0; k < op->n_in; k++)
        if (grt__fuse_overlap(op->in[k].ptr, grt__kop_buf_bytes(&op->in[k]), b->ptr, b->size) &&
            !grt__fuse_same(&op->in[k], x))
          return GRT_FUSE_ALIAS;
      continue;
    }
    grt_fuse_reason why = outside_rule(f, i, b->ptr, b->size, al, fr);
    if (why) return why;
  }
  return GRT_FUSE_OK;
}

/* ---- cycles ---------------------------------------------------------------------- */

/* Marks bit with every node reachable from the union (forward: successors),
 * a reached node standing for its whole group. */
static void sweep(grt__fuse *f, uint32_t m, uint8_t bit, bool forward) {
  uint32_t head = 0, tail = 0;
  for (uint32_t j = 0; j < m; j++) f->queue[tail++] = f->members[j];
  while (head < tail) {
    uint32_t u = f->queue[head++];
    const grt__gnode *nd = &f->g->nodes[u];
    uint32_t cnt = forward ? f->succ_first[u + 1] - f->succ_first[u] : nd->ndeps;
    for (uint32_t e = 0; e < cnt; e++) {
      uint32_t v = forward ? f->succ[f->succ_first[u] + e] : nd->deps[e];
      if (f->mark[v] & (1 | bit)) continue;
      uint32_t w = v;
      do { /* the contracted node: all of v's group */
        if (!(f->mark[w] & bit)) {
          f->mark[w] |= bit;
          f->queue[tail++] = w;
        }
        w = f->ring[w];
      } while (w != v);
    }
  }
}

static grt_fuse_reason cycles(grt__fuse *f, uint32_t m) {
  sweep(f, m, 2, true);
  sweep(f, m, 4, false);
  grt_fuse_reason why = GRT_FUSE_OK;
  for (uint32_t i = 0; i < f->n && why != GRT_FUSE_EVENT_BETWEEN; i++) {
    if ((f->mark[i] & 6) != 6) continue;
    uint8_t t = f->g->nodes[i].type;
    if (t == GRT_GRAPH_NODE_EVENT_RECORD || t == GRT_GRAPH_NODE_WAIT_EVENT)
      why = GRT_FUSE_EVENT_BETWEEN;
    else if (t == GRT_GRAPH_NODE_HOST)
      why = GRT_FUSE_HOST_BETWEEN;
    else if (!why)
      why = GRT_FUSE_CYCLE;
  }
  return why;
}

grt_fuse_reason grt__fuse_check(grt__fuse *f, uint32_t a, uint32_t b) {
  uint32_t m = collect(f, a, b);
  if (m > f->max_group) return GRT_FUSE_SIZE_LIMIT;
  grt_fuse_reason why = shape(f, m);
  if (!why) why = cycles(f, m); /* first: a node between them is the reason, not what it may read */
  if (!why) why = buffers(f, m);
  return why;
}
