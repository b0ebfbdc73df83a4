/* fusion.c — the fusion pass at instantiate (gpurt/fusion.h): finds the
 * pairs of described kernels that could run as one, merges them greedily in
 * topological order when fusion_check.c allows it, records every pair it
 * considered with the reason, and instantiates the fused graph
 * (fusion_view.c) in place of the graph.
 *
 * Pairs: vertical (a kernel and the producer of a buffer it reads, found
 * by the buffer), horizontal (elementwise kernels over the same indices
 * that read the same buffer and are not ordered), and, for the report,
 * every edge between kernels that stayed apart: an opaque one, or no
 * described buffer flowing along it. */
#include <stdlib.h>
#include <string.h>

#include "exec/fusion_impl.h"

static void fuse_free(grt__fuse *f) {
  free(f->k);
  free(f->parent);
  free(f->ring);
  free(f->succ_first);
  free(f->succ);
  free(f->reach);
  free(f->order);
  free(f->members);
  free(f->mark);
  free(f->queue);
  free(f->ent);
}

static bool fuse_alloc(grt__fuse *f, uint32_t n, uint32_t m) {
  size_t k = n ? n : 1;
  f->words = (n + 63) / 64;
  f->k = calloc(k, sizeof *f->k);
  f->parent = malloc(k * sizeof *f->parent);
  f->ring = malloc(k * sizeof *f->ring);
  f->succ_first = calloc(n + 2, sizeof *f->succ_first);
  f->succ = malloc((m ? m : 1) * sizeof *f->succ);
  f->reach = calloc(k * (f->words ? f->words : 1), sizeof *f->reach);
  f->order = malloc(k * sizeof *f->order);
  f->members = malloc(k * sizeof *f->members);
  f->mark = calloc(k, 1);
  f->queue = malloc(k * sizeof *f->queue);
  return f->k && f->parent && f->ring && f->succ_first && f->succ && f->reach && f->order && f->members && f->mark &&
      f->queue;
}

/* Successors (CSR), a topological order (Kahn; queue as scratch), reachability. */
static void link(grt__fuse *f) {
  const grt_graph *g = f->g;
  uint32_t n = f->n, head = 0, tail = 0;
  for (uint32_t i = 0; i < n; i++)
    for (uint32_t e = 0; e < g->nodes[i].ndeps; e++) f->succ_first[g->nodes[i].deps[e] + 2]++;
  for (uint32_t i = 0; i < n; i++) f->succ_first[i + 2] += f->succ_first[i + 1];
  for (uint32_t i = 0; i < n; i++)
    for (uint32_t e = 0; e < g->nodes[i].ndeps; e++) f->succ[f->succ_first[g->nodes[i].deps[e] + 1]++] = i;
  uint32_t *left = f->queue;
  for (uint32_t i = 0; i < n; i++)
    if (!(left[i] = g->nodes[i].ndeps)) f->order[tail++] = i;
  while (head < tail) {
    uint32_t u = f->order[head++];
    for (uint32_t e = f->succ_first[u]; e < f->succ_first[u + 1]; e++)
      if (!--left[f->succ[e]]) f->order[tail++] = f->succ[e];
  }
  for (uint32_t t = n; t-- > 0;) {
    uint32_t u = f->order[t];
    uint64_t *ru = &f->reach[(size_t)u * f->words];
    for (uint32_t e = f->succ_first[u]; e < f->succ_first[u + 1]; e++) {
      uint32_t v = f->succ[e];
      ru[v / 64] |= (uint64_t)1 << (v % 64);
      const uint64_t *rv = &f->reach[(size_t)v * f->words];
      for (uint32_t w = 0; w < f->words; w++) ru[w] |= rv[w];
    }
  }
}

static grt_status fuse_init(grt__fuse *f, const grt_graph *g, uint32_t max_group) {
  memset(f, 0, sizeof *f);
  f->g = g;
  f->n = g->n;
  f->max_group = max_group ? max_group : 16;
  if (!fuse_alloc(f, g->n, g->n_edges + g->n)) return GRT_ERR_NOMEM;
  for (uint32_t i = 0; i < g->n; i++) {
    const grt__op *p = &g->nodes[i].proto;
    f->parent[i] = f->ring[i] = i;
    if (p->kind == GRT__OP_KERNEL && p->u.call.fn == grt__kop_run) f->k[i] = p->u.call.arg;
  }
  link(f);
  return GRT_OK;
}

static void unite(grt__fuse *f, uint32_t a, uint32_t b) {
  uint32_t ra = grt__fuse_find(f, a), rb = grt__fuse_find(f, b);
  f->parent[rb] = ra;
  uint32_t t = f->ring[ra]; /* splice the two rings */
  f->ring[ra] = f->ring[rb];
  f->ring[rb] = t;
}

static bool note(grt__fuse *f, uint32_t a, uint32_t b, grt_fuse_kind kind, grt_fuse_reason why) {
  if (f->n_ent == f->cap_ent) {
    uint32_t c = f->cap_ent ? 2 * f->cap_ent : 32;
    grt_fusion_entry *p = realloc(f->ent, c * sizeof *p);
    if (!p) return false;
    f->ent = p;
    f->cap_ent = c;
  }
  grt_fusion_entry *e = &f->ent[f->n_ent++];
  memset(e, 0, sizeof *e);
  *e = (grt_fusion_entry){.a = a, .b = b, .kind = kind, .reason = why};
  snprintf(e->a_name, sizeof e->a_name, "%s", f->g->nodes[a].proto.name);
  snprintf(e->b_name, sizeof e->b_name, "%s", f->g->nodes[b].proto.name);
  return true;
}

/* Considers a and b: merged when the check allows. */
static bool consider(grt__fuse *f, uint32_t a, uint32_t b, grt_fuse_kind kind) {
  if (grt__fuse_find(f, a) == grt__fuse_find(f, b)) return true;
  grt_fuse_reason why = grt__fuse_check(f, a, b);
  if (!why) unite(f, a, b);
  return note(f, a, b, kind, why);
}

/* The producer of y's input k: the last described kernel before y writing that buffer. */
static uint32_t producer(const grt__fuse *f, uint32_t y, const grt_op_buffer *in) {
  uint32_t best = UINT32_MAX;
  for (uint32_t t = 0; t < f->n && f->order[t] != y; t++) {
    uint32_t x = f->order[t];
    if (f->k[x] &&
        grt__fuse_overlap(f->k[x]->op.out.ptr, grt__kop_buf_bytes(&f->k[x]->op.out), in->ptr, grt__kop_buf_bytes(in)) &&
        grt__fuse_reaches(f, x, y))
      best = x;
  }
  return best;
}

static bool vertical(grt__fuse *f) {
  for (uint32_t t = 0; t < f->n; t++) {
    uint32_t y = f->order[t];
    for (uint32_t k = 0; f->k[y] && k < f->k[y]->op.n_in; k++) {
      uint32_t x = producer(f, y, &f->k[y]->op.in[k]);
      if (x != UINT32_MAX && !consider(f, x, y, GRT_FUSE_VERTICAL)) return false;
    }
  }
  return true;
}

static bool reads(const grt_kernel_op *op, const grt_op_buffer *b) {
  for (uint32_t k = 0; k < op->n_in; k++)
    if (grt__fuse_same(&op->in[k], b)) return true;
  return false;
}

/* y and the last earlier unordered elementwise kernel over the same indices reading one of y's inputs. */
static bool horizontal(grt__fuse *f) {
  for (uint32_t t = 0; t < f->n; t++) {
    uint32_t y = f->order[t];
    if (!f->k[y] || f->k[y]->op.cls != GRT_OP_ELEMENTWISE) continue;
    for (uint32_t s = t; s-- > 0;) {
      uint32_t x = f->order[s];
      const grt__kop *kx = f->k[x];
      if (!kx || kx->op.cls != GRT_OP_ELEMENTWISE || kx->op.n != f->k[y]->op.n || grt__fuse_reaches(f, x, y)) continue;
      bool shared = false;
      for (uint32_t k = 0; k < f->k[y]->op.n_in && !shared; k++) shared = reads(&kx->op, &f->k[y]->op.in[k]);
      if (!shared) continue;
      if (!consider(f, x, y, GRT_FUSE_HORIZONTAL)) return false;
      break;
    }
  }
  return true;
}

static bool is_kernel(const grt__fuse *f, uint32_t i) {
  const grt__gnode *nd = &f->g->nodes[i];
  return nd->type == GRT_GRAPH_NODE_KERNEL && (f->k[i] || nd->proto.u.call.fn);
}

/* Edges between kernels left apart that no pair above explains. */
static bool edges(grt__fuse *f) {
  uint32_t considered = f->n_ent;
  for (uint32_t y = 0; y < f->n; y++) {
    const grt__gnode *nd = &f->g->nodes[y];
    for (uint32_t e = 0; e < nd->ndeps; e++) {
      uint32_t x = nd->deps[e];
      if (!is_kernel(f, x) || !is_kernel(f, y) || (!f->k[x] && !f->k[y]) ||
          grt__fuse_find(f, x) == grt__fuse_find(f, y))
        continue;
      bool seen = false;
      for (uint32_t j = 0; j < considered && !seen; j++) seen = f->ent[j].a == x && f->ent[j].b == y;
      if (seen) continue;
      grt_fuse_reason why = !f->k[x] || !f->k[y] ? GRT_FUSE_OPAQUE : GRT_FUSE_NO_DATA;
      if (!note(f, x, y, GRT_FUSE_VERTICAL, why)) return false;
    }
  }
  return true;
}

/* ---- instantiate ----------------------------------------------------------------- */

static uint64_t described_bytes(const grt_graph *g) {
  uint64_t b = 0;
  for (uint32_t i = 0; i < g->n; i++) {
    const grt__op *p = &g->nodes[i].proto;
    if (p->kind == GRT__OP_KERNEL && p->u.call.fn == grt__kop_run)
      b += grt__kop_bytes(&((const grt__kop *)p->u.call.arg)->op);
    else if (p->kind == GRT__OP_KERNEL && p->u.call.fn == grt__fused_run) {
      const grt__fused *fz = p->u.call.arg;
      b += fz->bytes;
    }
  }
  return b;
}

void grt__fuse_plan_none(const grt_graph *g, grt_fusion_summary *sum) {
  memset(sum, 0, sizeof *sum);
  grt__fuse_count(g, &sum->nodes_before, &sum->launches_before, &sum->pool_before);
  sum->bytes_before = described_bytes(g);
  sum->nodes_after = sum->nodes_before;
  sum->launches_after = sum->launches_before;
  sum->pool_after = sum->pool_before;
  sum->bytes_after = sum->bytes_before;
}

/* Lock held. The fused view of g into *view (g itself when nothing fuses or g is too large), with the report. */
grt_status grt__fuse_plan(const grt_graph *g, uint32_t max_group, grt_graph *view, grt_fusion_summary *sum,
                          grt_fusion_entry **ent) {
  grt__fuse_plan_none(g, sum);
  *ent = NULL;
  *view = *g;
  if (g->n > GRT__FUSE_MAX_NODES) return GRT_OK;
  grt__fuse f;
  grt_status st = fuse_init(&f, g, max_group);
  if (!st && !(vertical(&f) && horizontal(&f) && edges(&f))) st = GRT_ERR_NOMEM;
  if (!st) st = grt__fuse_view(&f, view, sum);
  if (!st) {
    sum->entries = f.n_ent;
    sum->bytes_after = described_bytes(view);
    *ent = f.ent;
    f.ent = NULL;
  }
  fuse_free(&f);
  return st;
}

/* ---- the report ------------------------------------------------------------------- */

grt_status grt_graph_fusion_report(grt_graph_exec *ge, grt_fusion_summary *sum, grt_fusion_entry *entries, size_t *n) {
  if (!sum || !n || (*n && !entries)) return GRT_ERR_INVALID_ARG;
  grt_status st = grt__gexec_lock(ge);
  if (st) return st;
  *sum = ge->fsum;
  size_t k = *n < ge->fsum.entries ? *n : ge->fsum.entries;
  if (k) memcpy(entries, ge->fent, k * sizeof *entries);
  *n = k;
  pthread_mutex_unlock(&ge->exec->lock);
  return GRT_OK;
}

const char *grt_fuse_reason_str(grt_fuse_reason r) {
  static const char *const s[] = {
      "fused",
      "an opaque kernel",
      "no described buffer flows along the edge",
      "different index spaces",
      "the intermediate is read at another index (a broadcast)",
      "the intermediate is read outside the group",
      "a host node or opaque kernel may read the intermediate",
      "the intermediate outlives the graph",
      "fusing would create a cycle",
      "an event node lies between them",
      "a host node lies between them",
      "different streams, joined by the user's events: the edge is kept",
      "buffers alias, or one is written twice",
      "a kernel updates its input in place",
      "the group would pass the size limit",
      "a reduction's output would be read inside its group, or two reductions",
      "an output-fusible kernel would not start its group",
  };
  return (unsigned)r < sizeof s / sizeof s[0] ? s[r] : "unknown reason";
}
