/* fusion_view.c — the graph an executable graph made with fusion runs: one
 * kernel node per fused group (its program, grt__fused, runs the members
 * index by index), every other node as it was, and the allocation and free
 * nodes of fused-away intermediates turned into empty nodes, which keep
 * their edges but allocate nothing. The view shares g's blocks and child
 * graphs; instantiate builds the body and the memory snapshot from it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exec/fusion_impl.h"

static uint32_t flat_nodes(const grt_graph *g, uint32_t *launches) {
  uint32_t n = 0;
  for (uint32_t i = 0; i < g->n; i++) {
    const grt__gnode *nd = &g->nodes[i];
    if (nd->child) {
      n += 2 + flat_nodes(nd->child, launches);
      continue;
    }
    n++;
    const grt__op *p = &nd->proto;
    *launches += p->kind == GRT__OP_KERNEL && p->engine != GRT__ENGINE_NONE && (p->u.call.fn || p->duration_ns);
  }
  return n;
}

void grt__fuse_count(const grt_graph *g, uint32_t *nodes, uint32_t *launches, uint64_t *pool) {
  *launches = 0;
  *nodes = flat_nodes(g, launches);
  *pool = 0;
  for (uint32_t i = 0; i < g->n; i++)
    if (g->nodes[i].proto.kind == GRT__OP_GALLOC) *pool += g->nodes[i].block->size;
}

void grt__fuse_view_free(grt_graph *view) {
  for (uint32_t i = 0; i < view->n; i++) {
    free(view->nodes[i].deps);
    const grt__op *p = &view->nodes[i].proto;
    if (p->kind == GRT__OP_KERNEL && p->u.call.fn == grt__fused_run) free(p->u.call.arg);
  }
  free(view->nodes);
  view->nodes = NULL;
  view->n = 0;
}

/* ---- a group's program --------------------------------------------------------- */

static uint32_t group_size(const grt__fuse *f, uint32_t r) {
  uint32_t m = 0, w = r;
  do {
    m++;
    w = f->ring[w];
  } while (w != r);
  return m;
}

/* Members of root r's group in topological order into f->members. */
static uint32_t members(grt__fuse *f, uint32_t r) {
  uint32_t m = 0;
  for (uint32_t t = 0; t < f->n; t++)
    if (grt__fuse_find(f, f->order[t]) == r) f->members[m++] = f->order[t];
  return m;
}

static int32_t source_of(const grt__fused *p, uint32_t j, const grt_op_buffer *in) {
  for (uint32_t x = 0; x < j; x++)
    if (grt__fuse_same(&p->m[x].k.op.out, in)) return (int32_t)x;
  return -1;
}

static bool counted_before(const grt__fused *p, uint32_t j, uint32_t k) {
  const grt_op_buffer *b = &p->m[j].k.op.in[k];
  for (uint32_t x = 0; x <= j; x++)
    for (uint32_t q = 0; q < (x < j ? p->m[x].k.op.n_in : k); q++)
      if (p->m[x].src[q] < 0 && grt__fuse_same(&p->m[x].k.op.in[q], b)) return true;
  return false;
}

/* Sources, stores and the modelled bytes. */
static void wire(grt__fused *p) {
  for (uint32_t j = 0; j < p->n_members; j++) {
    grt__fmember *mj = &p->m[j];
    mj->store = true;
    for (uint32_t k = 0; k < GRT_OP_MAX_INPUTS; k++)
      mj->src[k] = k < mj->k.op.n_in ? source_of(p, j, &mj->k.op.in[k]) : -1;
  }
  p->bytes = 0;
  for (uint32_t j = 0; j < p->n_members; j++)
    for (uint32_t k = 0; k < p->m[j].k.op.n_in; k++) {
      if (p->m[j].src[k] >= 0)
        p->m[p->m[j].src[k]].store = false; /* read inside: internal, never written */
      else if (!counted_before(p, j, k))
        p->bytes += grt__kop_buf_bytes(&p->m[j].k.op.in[k]);
    }
  for (uint32_t j = 0; j < p->n_members; j++)
    if (p->m[j].store) p->bytes += grt__kop_buf_bytes(&p->m[j].k.op.out);
}

/* The fused node of root r: its proto (from its first member) and program. */
static bool fused_node(grt__fuse *f, uint32_t r, grt__gnode *out, uint8_t *drop) {
  uint32_t m = members(f, r);
  grt__fused *p = malloc(sizeof *p + m * sizeof p->m[0]);
  if (!p) return false;
  p->dev = f->k[f->members[0]]->dev;
  p->n_members = m;
  uint64_t dur = 0, bytes = 0;
  for (uint32_t j = 0; j < m; j++) {
    uint32_t i = f->members[j];
    p->m[j].k = *f->k[i];
    grt__kop_fix(&p->m[j].k);
    dur += f->g->nodes[i].proto.duration_ns;
    bytes += grt__kop_bytes(&p->m[j].k.op);
  }
  wire(p);
  for (uint32_t j = 0; j < m; j++) /* the intermediates' memory nodes: nothing to allocate */
    if (!p->m[j].store)
      for (uint32_t i = 0; i < f->n; i++) {
        const grt__gblock *b = f->g->nodes[i].block;
        if (b && b->ptr <= p->m[j].k.op.out.ptr && p->m[j].k.op.out.ptr < b->ptr + b->size) drop[i] = 1;
      }
  const grt__gnode *first = &f->g->nodes[f->members[0]];
  out->proto = first->proto;
  out->type = GRT_GRAPH_NODE_KERNEL;
  out->proto.u.call.fn = grt__fused_run;
  out->proto.u.call.arg = p;
  out->proto.duration_ns = bytes ? (uint64_t)((double)dur * (double)p->bytes / (double)bytes + 0.5) : dur;
  snprintf(out->proto.name, sizeof out->proto.name, "fused%u:%.30s", m, first->proto.name);
  return true;
}

/* ---- the view ------------------------------------------------------------------ */

static void as_empty(grt__gnode *nd) {
  char name[GRT__OP_NAME_MAX];
  memcpy(name, nd->proto.name, sizeof name);
  grt_stream *s = nd->proto.stream;
  memset(&nd->proto, 0, sizeof nd->proto);
  nd->proto.kind = GRT__OP_KERNEL;
  nd->proto.engine = GRT__ENGINE_NONE;
  nd->proto.stream = s;
  memcpy(nd->proto.name, name, sizeof name);
  nd->type = GRT_GRAPH_NODE_EMPTY;
  nd->block = NULL;
}

/* i's dependencies outside its own view node v, each once, appended to nd. */
static bool add_deps(const grt__fuse *f, const uint32_t *newidx, uint32_t i, uint32_t v, grt__gnode *nd) {
  const grt__gnode *src = &f->g->nodes[i];
  for (uint32_t e = 0; e < src->ndeps; e++) {
    uint32_t d = newidx[src->deps[e]];
    bool dup = d == v;
    for (uint32_t q = 0; q < nd->ndeps && !dup; q++) dup = nd->deps[q] == d;
    if (dup) continue;
    if (nd->ndeps == nd->cap_deps) {
      uint32_t c = nd->cap_deps ? 2 * nd->cap_deps : 4;
      uint32_t *p = realloc(nd->deps, c * sizeof *p);
      if (!p) return false;
      nd->deps = p;
      nd->cap_deps = c;
    }
    nd->deps[nd->ndeps++] = d;
  }
  return true;
}

static bool fill(grt__fuse *f, uint32_t *newidx, uint8_t *drop, grt_graph *view, uint32_t nv) {
  uint32_t *head = newidx + f->n; /* per view node: its first graph node, or UINT32_MAX */
  for (uint32_t v = 0; v < nv; v++) head[v] = UINT32_MAX;
  for (uint32_t i = 0; i < f->n; i++)
    if (head[newidx[i]] == UINT32_MAX) head[newidx[i]] = i;
  for (uint32_t v = 0; v < nv; v++) {
    uint32_t i = head[v], r = grt__fuse_find(f, i);
    if (group_size(f, r) > 1 && !fused_node(f, r, &view->nodes[v], drop)) return false;
    view->n = v + 1;
  }
  for (uint32_t v = 0; v < nv; v++) {
    uint32_t i = head[v];
    grt__gnode *nd = &view->nodes[v];
    if (nd->proto.kind == GRT__OP_KERNEL && nd->proto.u.call.fn == grt__fused_run) continue;
    *nd = f->g->nodes[i];
    nd->deps = NULL;
    nd->ndeps = nd->cap_deps = 0;
    nd->h = NULL;
    if (drop[i]) as_empty(nd);
  }
  for (uint32_t i = 0; i < f->n; i++)
    if (!add_deps(f, newidx, i, newidx[i], &view->nodes[newidx[i]])) return false;
  return true;
}

grt_status grt__fuse_view(grt__fuse *f, grt_graph *view, grt_fusion_summary *sum) {
  uint32_t n = f->n, nv = 0, groups = 0, fused = 0;
  uint32_t *newidx = malloc(2 * (n ? n : 1) * sizeof *newidx), *gidx = malloc((n ? n : 1) * sizeof *gidx);
  uint8_t *drop = calloc(n ? n : 1, 1);
  grt__gnode *nodes = calloc(n ? n : 1, sizeof *nodes);
  bool ok = newidx && gidx && drop && nodes;
  for (uint32_t i = 0; ok && i < n; i++) gidx[i] = UINT32_MAX;
  for (uint32_t i = 0; ok && i < n; i++) {
    uint32_t r = grt__fuse_find(f, i);
    if (gidx[r] == UINT32_MAX) {
      gidx[r] = nv++;
      uint32_t m = group_size(f, r);
      groups += m > 1;
      fused += m > 1 ? m : 0;
    }
    newidx[i] = gidx[r];
  }
  *view = *f->g;
  view->nodes = nodes;
  view->n = 0;
  if (ok) ok = fill(f, newidx, drop, view, nv);
  free(newidx);
  free(gidx);
  free(drop);
  if (!ok) {
    if (nodes) grt__fuse_view_free(view);
    return GRT_ERR_NOMEM;
  }
  view->n_mem = 0;
  for (uint32_t v = 0; v < nv; v++)
    view->n_mem += view->nodes[v].proto.kind == GRT__OP_GALLOC || view->nodes[v].proto.kind == GRT__OP_GFREE;
  sum->groups = groups;
  sum->kernels_fused = fused;
  grt__fuse_count(view, &sum->nodes_after, &sum->launches_after, &sum->pool_after);
  return GRT_OK;
}
