/* graph_body.c — the flat launch body of an executable graph, built from a
 * graph at instantiate (and update): a snapshot, so editing the graph later
 * changes no executable graph.
 *
 * Child graph nodes are flattened: a child graph node becomes an entry
 * marker (depending on the node's dependencies), its graph's nodes (those
 * without dependencies depend on the entry), and an exit marker (depending
 * on the child's nodes without successors), which the node's dependents
 * depend on. Markers have no body and settle on the spot, so a flattened
 * child runs as if inlined, at no cost per launch. Flat nodes keep their
 * type and the top-level node they came from, which update compares and
 * reports. The edges may join nodes in any order (an edited graph is a DAG,
 * not a list in topological order): the countdown in graph_exec.c needs none.
 */
#include <stdlib.h>
#include <string.h>

#include "exec/graph_impl.h"

void grt__graph_body_free(grt__gbody *b) {
  if (!b) return;
  for (uint32_t i = 0; b->ops && i < b->n; i++)
    if (b->ops[i].kind == GRT__OP_KERNEL) grt__kop_body_free(b->ops[i].u.call.fn, b->ops[i].u.call.arg);
  free(b->ops);
  free(b->type);
  free(b->origin);
  free(b->events);
  free(b->pred_first);
  free(b->preds);
  free(b->succ_first);
  free(b->succ);
  free(b->remaining);
  free(b->stack);
  free(b->chain_next);
  free(b->spot);
  free(b->indeg);
  free(b->roots);
  free(b);
}

/* No body and no duration: nothing for an engine to do. */
static bool settles_on_spot(const grt__op *nd) {
  return nd->engine == GRT__ENGINE_NONE || (nd->kind == GRT__OP_KERNEL && !nd->u.call.fn && !nd->duration_ns);
}

/* j can run on the worker that ran i, right after it, without the lock: it is
 * i's only successor, i is its only predecessor (so nothing else can make it
 * ready), and it needs the same engine — compute or copy, not host functions,
 * which may block in grt_user_event_wait. */
static uint32_t chain_successor(const grt__gbody *b, uint32_t i) {
  if (b->succ_first[i + 1] - b->succ_first[i] != 1) return UINT32_MAX;
  uint32_t j = b->succ[b->succ_first[i]];
  const grt__op *a = &b->ops[i], *c = &b->ops[j];
  if (b->pred_first[j + 1] - b->pred_first[j] != 1 || c->engine != a->engine || c->engine == GRT_ENGINE_HOST ||
      settles_on_spot(c) || settles_on_spot(a))
    return UINT32_MAX;
  return j;
}

/* ---- flattening --------------------------------------------------------------- */

typedef struct flat {
  grt__gbody *b;
  uint32_t n;          /* flat nodes filled so far */
  uint32_t m, cap_m;   /* predecessors filled, room in b->preds */
  uint32_t cap_events; /* room in b->events */
  bool oom;            /* a described kernel's copy could not be made */
} flat;

static uint32_t node_size(const grt__gnode *nd);

/* Flat nodes of g. */
static uint32_t flat_size(const grt_graph *g) {
  uint32_t n = 0;
  for (uint32_t i = 0; i < g->n; i++) n += node_size(&g->nodes[i]);
  return n;
}

static uint32_t node_size(const grt__gnode *nd) { return nd->child ? 2 + flat_size(nd->child) : 1; }

static bool push_u32(uint32_t **v, uint32_t *n, uint32_t *cap, uint32_t x) {
  if (*n == *cap) {
    uint32_t c = *cap ? 2 * *cap : 16;
    uint32_t *p = realloc(*v, c * sizeof *p);
    if (!p) return false;
    *v = p;
    *cap = c;
  }
  (*v)[(*n)++] = x;
  return true;
}

static bool push_pred(flat *f, uint32_t x) { return push_u32(&f->b->preds, &f->m, &f->cap_m, x); }

/* Starts flat node f->n: its op (proto, or a marker when NULL), type and origin. */
static uint32_t begin_node(flat *f, const grt__op *proto, uint8_t type, uint32_t top, const char *name) {
  grt__gbody *b = f->b;
  uint32_t me = f->n++;
  grt__op *op = &b->ops[me];
  if (proto) {
    *op = *proto;
    if (op->kind == GRT__OP_KERNEL && grt__kop_is_body(op->u.call.fn) &&
        !(op->u.call.arg = grt__kop_body_dup(op->u.call.fn, proto->u.call.arg))) {
      op->u.call.fn = NULL; /* nothing to free */
      f->oom = true;
    }
  } else { /* a child graph's entry or exit: no body, settles on the spot */
    memset(op, 0, sizeof *op);
    op->kind = GRT__OP_KERNEL;
    op->engine = GRT__ENGINE_NONE;
    snprintf(op->name, sizeof op->name, "%s", name);
  }
  op->deps = &op->inline_dep;
  op->gindex = me;
  b->n = f->n; /* what body_free releases if the build fails */
  b->type[me] = type;
  b->origin[me] = top;
  b->pred_first[me] = f->m;
  return me;
}

/* Whether each node of g has a successor in g (calloc'd; NULL: out of memory). */
static uint8_t *successors(const grt_graph *g) {
  uint8_t *has = calloc(g->n ? g->n : 1, 1);
  if (!has) return NULL;
  for (uint32_t i = 0; i < g->n; i++)
    for (uint32_t k = 0; k < g->nodes[i].ndeps; k++) has[g->nodes[i].deps[k]] = 1;
  return has;
}

static bool flatten(flat *f, const grt_graph *g, uint32_t top, uint32_t entry);

/* Node i of g (flat positions of g's nodes in pos): its predecessors are the
 * last flat nodes of its dependencies, or the child graph's entry. */
static bool flatten_node(flat *f, const grt_graph *g, uint32_t i, const uint32_t *pos, uint32_t top,
                         uint32_t entry) {
  const grt__gnode *nd = &g->nodes[i];
  if (top == UINT32_MAX) top = i;
  uint32_t me = begin_node(f, nd->child ? NULL : &nd->proto, nd->type, top, nd->proto.name);
  bool ok = !f->oom && (nd->ndeps || entry == UINT32_MAX || push_pred(f, entry));
  for (uint32_t k = 0; ok && k < nd->ndeps; k++) ok = push_pred(f, pos[nd->deps[k] + 1] - 1);
  if (ok && (nd->type == GRT_GRAPH_NODE_EVENT_RECORD || nd->type == GRT_GRAPH_NODE_WAIT_EVENT))
    ok = push_u32(&f->b->events, &f->b->n_events, &f->cap_events, me);
  return ok && (!nd->child || flatten(f, nd->child, top, me));
}

/* g's nodes from f->n on; inside a child graph node (entry: its entry
 * marker) followed by the exit marker. */
static bool flatten(flat *f, const grt_graph *g, uint32_t top, uint32_t entry) {
  uint32_t *pos = malloc((g->n + 1) * sizeof *pos);
  uint8_t *has_succ = entry == UINT32_MAX ? NULL : successors(g);
  bool ok = pos && (entry == UINT32_MAX || has_succ);
  if (ok) {
    pos[0] = f->n;
    for (uint32_t i = 0; i < g->n; i++) pos[i + 1] = pos[i] + node_size(&g->nodes[i]);
  }
  for (uint32_t i = 0; ok && i < g->n; i++) ok = flatten_node(f, g, i, pos, top, entry);
  if (ok && entry != UINT32_MAX) { /* the exit: after the child's last nodes, or its entry when it has none */
    begin_node(f, NULL, GRT_GRAPH_NODE_GRAPH, top, f->b->ops[entry].name);
    ok = g->n || push_pred(f, entry);
    for (uint32_t i = 0; ok && i < g->n; i++)
      if (!has_succ[i]) ok = push_pred(f, pos[i + 1] - 1);
  }
  free(pos);
  free(has_succ);
  return ok;
}

/* ---- the body ---------------------------------------------------------------------- */

static bool alloc_arrays(grt__gbody *b, uint32_t n, uint32_t m) {
  uint32_t k = n ? n : 1;
  b->succ_first = calloc(n + 2, sizeof *b->succ_first);
  b->succ = malloc((m ? m : 1) * sizeof *b->succ);
  b->remaining = malloc(k * sizeof *b->remaining);
  b->stack = malloc(k * sizeof *b->stack);
  b->chain_next = malloc(k * sizeof *b->chain_next);
  b->spot = malloc(k);
  b->indeg = malloc(k * sizeof *b->indeg);
  b->roots = malloc(k * sizeof *b->roots);
  return b->succ_first && b->succ && b->remaining && b->stack && b->chain_next && b->spot && b->indeg && b->roots;
}

/* Successors (CSR), counts, roots, the spot and chain tables from the predecessors. */
static void link_body(grt__gbody *b) {
  uint32_t n = b->n;
  for (uint32_t i = 0; i < n; i++)
    for (uint32_t k = b->pred_first[i]; k < b->pred_first[i + 1]; k++) b->succ_first[b->preds[k] + 2]++;
  /* CSR fill: succ_first[i + 1] is the write cursor of i, ending at succ_first[i + 1]'s final value. */
  for (uint32_t i = 0; i < n; i++) b->succ_first[i + 2] += b->succ_first[i + 1];
  for (uint32_t i = 0; i < n; i++)
    for (uint32_t k = b->pred_first[i]; k < b->pred_first[i + 1]; k++) b->succ[b->succ_first[b->preds[k] + 1]++] = i;
  for (uint32_t i = 0; i < n; i++) {
    b->chain_next[i] = chain_successor(b, i);
    b->spot[i] = !settles_on_spot(&b->ops[i]) ? 0 : b->ops[i].kind == GRT__OP_RECORD ? GRT__SPOT_RECORD
                                                                                    : GRT__SPOT_PLAIN;
    b->indeg[i] = b->pred_first[i + 1] - b->pred_first[i];
    if (!b->indeg[i]) b->roots[b->n_roots++] = i;
  }
}

grt__gbody *grt__graph_body_build(const grt_graph *g) {
  grt__gbody *b = calloc(1, sizeof *b);
  if (!b) return NULL;
  uint32_t n = flat_size(g), k = n ? n : 1;
  b->n_top = g->n;
  b->ops = calloc(k, sizeof *b->ops);
  b->type = malloc(k);
  b->origin = malloc(k * sizeof *b->origin);
  b->pred_first = calloc(n + 1, sizeof *b->pred_first);
  flat f = {b, 0, 0, 0, 0, false};
  bool ok = b->ops && b->type && b->origin && b->pred_first && flatten(&f, g, UINT32_MAX, UINT32_MAX);
  if (ok) {
    b->pred_first[n] = f.m;
    ok = alloc_arrays(b, n, f.m);
  }
  if (!ok) {
    grt__graph_body_free(b);
    return NULL;
  }
  link_body(b);
  return b;
}
