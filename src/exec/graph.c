/* graph.c — graph templates and executable graphs as objects: a graph's
 * node list, instantiate, destroy, and the launch's release of its body.
 * Editing is in graph_edit.c, update in graph_update.c.
 *
 * Invariants: a graph's nodes are in creation order and its edges form a
 * DAG; instantiate takes a snapshot (the body, and refs on the memory
 * blocks), so editing the graph later changes no executable graph. A graph with memory nodes
 * has at most one live executable graph (g->live_exec), as in CUDA; each
 * holds refs on the blocks of its memory nodes (graph_mem.c), which go back
 * to the device only after the exec lock is released. Destroyed graphs and
 * executable graphs are zombies (magic kept, contents freed) until the exec
 * is destroyed.
 */
#include <stdlib.h>
#include <string.h>

#include "exec/fusion_impl.h"

bool grt__graph_idx_push(grt__idxvec *v, uint32_t x) {
  for (uint32_t i = 0; i < v->n; i++)
    if (v->v[i] == x) return true;
  if (v->n == v->cap) {
    uint32_t cap = v->cap ? 2 * v->cap : 4;
    uint32_t *p = realloc(v->v, cap * sizeof *p);
    if (!p) return false;
    v->v = p;
    v->cap = cap;
  }
  v->v[v->n++] = x;
  return true;
}

bool grt__graph_idx_copy(grt__idxvec *dst, const grt__idxvec *src) {
  dst->n = 0;
  for (uint32_t i = 0; i < src->n; i++)
    if (!grt__graph_idx_push(dst, src->v[i])) return false;
  return true;
}

void grt__graph_idx_free(grt__idxvec *v) {
  free(v->v);
  *v = (grt__idxvec){0};
}

grt_graph *grt__graph_new(grt_exec *exec) {
  grt_graph *g = calloc(1, sizeof *g);
  if (!g) return NULL;
  g->magic = GRT__GRAPH_MAGIC;
  g->exec = exec;
  snprintf(g->name, sizeof g->name, "graph");
  return g;
}

void grt__graph_free_nodes(grt_graph *g, grt__gblock **batch) {
  for (uint32_t i = 0; i < g->n; i++) {
    grt__gnode *nd = &g->nodes[i];
    free(nd->deps);
    if (nd->proto.kind == GRT__OP_KERNEL) grt__kop_body_free(nd->proto.u.call.fn, nd->proto.u.call.arg);
    if (nd->h) nd->h->destroyed = true;
    if (nd->child) {
      grt__graph_free_nodes(nd->child, batch);
      free(nd->child);
    }
    grt__gblock *b = nd->block;
    if (!b || !batch) continue;
    if (b->owner == g) b->owner = NULL; /* no more free nodes can join it */
    grt__gblock_unref(g->exec, b, batch);
  }
  free(g->nodes);
  g->nodes = NULL;
  g->n = g->cap = g->n_edges = g->n_mem = 0;
}

/* The node type a captured op makes. */
static uint8_t type_of(uint8_t kind) {
  switch (kind) {
    case GRT__OP_H2D:
    case GRT__OP_D2H:
    case GRT__OP_D2D: return GRT_GRAPH_NODE_MEMCPY;
    case GRT__OP_MEMSET: return GRT_GRAPH_NODE_MEMSET;
    case GRT__OP_HOST_FUNC: return GRT_GRAPH_NODE_HOST;
    case GRT__OP_GALLOC: return GRT_GRAPH_NODE_MEM_ALLOC;
    case GRT__OP_GFREE: return GRT_GRAPH_NODE_MEM_FREE;
    default: return GRT_GRAPH_NODE_KERNEL;
  }
}

bool grt__graph_add_node(grt_graph *g, const grt__op *proto, const grt__idxvec *deps, uint32_t *idx) {
  return grt__graph_add_node_deps(g, proto, type_of(proto->kind), deps->v, deps->n, idx);
}

bool grt__graph_add_node_deps(grt_graph *g, const grt__op *proto, uint8_t type, const uint32_t *deps, uint32_t n,
                              uint32_t *idx) {
  if (g->n == g->cap) {
    uint32_t cap = g->cap ? 2 * g->cap : 16;
    grt__gnode *p = realloc(g->nodes, cap * sizeof *p);
    if (!p) return false;
    g->nodes = p;
    g->cap = cap;
  }
  uint32_t *d = NULL;
  if (n && !(d = malloc(n * sizeof *d))) return false;
  if (n) memcpy(d, deps, n * sizeof *d);
  void *own = NULL;
  if (proto->kind == GRT__OP_KERNEL && grt__kop_is_body(proto->u.call.fn) &&
      !(own = grt__kop_body_dup(proto->u.call.fn, proto->u.call.arg))) {
    free(d);
    return false;
  }
  grt__gnode *nd = &g->nodes[g->n];
  memset(nd, 0, sizeof *nd);
  nd->proto = *proto;
  if (own) nd->proto.u.call.arg = own;
  nd->proto.next = nd->proto.rnext = NULL;
  nd->proto.deps = NULL;
  nd->proto.ndeps = nd->proto.next_dep = 0;
  nd->proto.gparent = NULL;
  nd->proto.state = GRT__QUEUED;
  nd->deps = d;
  nd->ndeps = nd->cap_deps = n;
  nd->type = type;
  g->n_edges += n;
  *idx = g->n++;
  return true;
}

grt_status grt__graph_lock(grt_graph *g) {
  if (!g || g->magic != GRT__GRAPH_MAGIC) return GRT_ERR_INVALID_ARG;
  pthread_mutex_lock(&g->exec->lock);
  if (!g->destroyed) return GRT_OK;
  pthread_mutex_unlock(&g->exec->lock);
  return GRT_ERR_INVALID_HANDLE;
}

grt_status grt__gexec_lock(grt_graph_exec *ge) {
  if (!ge || ge->magic != GRT__GEXEC_MAGIC) return GRT_ERR_INVALID_ARG;
  pthread_mutex_lock(&ge->exec->lock);
  if (!ge->destroyed) return GRT_OK;
  pthread_mutex_unlock(&ge->exec->lock);
  return GRT_ERR_INVALID_HANDLE;
}

grt_status grt_graph_destroy(grt_graph *g) {
  if (!g) return GRT_OK;
  grt_status st = grt__graph_lock(g);
  if (st) return st;
  grt_exec *exec = g->exec;
  g->destroyed = true;
  exec->live_graphs--;
  grt__gblock *batch = NULL;
  grt__graph_free_nodes(g, &batch);
  grt__graph_mem_sweep(exec, &batch);
  pthread_mutex_unlock(&exec->lock);
  grt__gblocks_release(exec->device, batch);
  return GRT_OK;
}

grt_status grt_graph_set_name(grt_graph *g, const char *name) {
  if (!name) return GRT_ERR_INVALID_ARG;
  grt_status st = grt__graph_lock(g);
  if (st) return st;
  snprintf(g->name, sizeof g->name, "%s", name);
  pthread_mutex_unlock(&g->exec->lock);
  return GRT_OK;
}

grt_status grt_graph_node_count(grt_graph *g, size_t *out) {
  if (!out) return GRT_ERR_INVALID_ARG;
  grt_status st = grt__graph_lock(g);
  if (st) return st;
  *out = g->n;
  pthread_mutex_unlock(&g->exec->lock);
  return GRT_OK;
}

grt_status grt_graph_edge_count(grt_graph *g, size_t *out) {
  if (!out) return GRT_ERR_INVALID_ARG;
  grt_status st = grt__graph_lock(g);
  if (st) return st;
  *out = g->n_edges;
  pthread_mutex_unlock(&g->exec->lock);
  return GRT_OK;
}

grt_status grt_graph_instantiate(grt_graph *g, grt_graph_exec **out) { return grt_graph_instantiate_ex(g, NULL, out); }

/* Lock held: ge's body and memory nodes from g, fused when params ask. */
static grt_status build_exec(grt_graph_exec *ge, grt_graph *g, const grt_graph_instantiate_params *params,
                             grt__gbody **body) {
  grt_graph view = *g;
  grt_status st = GRT_OK;
  ge->fused = params && (params->flags & GRT_GRAPH_INSTANTIATE_FUSE);
  if (ge->fused) st = grt__fuse_plan(g, params->max_group, &view, &ge->fsum, &ge->fent);
  else grt__fuse_plan_none(g, &ge->fsum);
  if (!st && !(*body = grt__graph_body_build(&view))) st = GRT_ERR_NOMEM;
  if (!st) st = grt__graph_mem_snapshot(ge, &view);
  if (view.nodes != g->nodes) grt__fuse_view_free(&view);
  if (st) {
    free(ge->fent);
    ge->fent = NULL;
  }
  return st;
}

grt_status grt_graph_instantiate_ex(grt_graph *g, const grt_graph_instantiate_params *params, grt_graph_exec **out) {
  if (!out || (params && (params->flags & ~GRT_GRAPH_INSTANTIATE_FUSE))) return GRT_ERR_INVALID_ARG;
  *out = NULL;
  grt_status st = grt__graph_lock(g);
  if (st) return st;
  grt_exec *exec = g->exec;
  grt_graph_exec *ge = NULL;
  grt__gbody *body = NULL;
  if (exec->error) st = exec->error;
  else if (g->n_mem && g->live_exec) st = GRT_ERR_BUSY;
  else if (!(ge = calloc(1, sizeof *ge))) st = GRT_ERR_NOMEM;
  else st = build_exec(ge, g, params, &body);
  if (st) {
    grt__graph_body_free(body);
    free(ge);
    pthread_mutex_unlock(&exec->lock);
    return st;
  }
  ge->magic = GRT__GEXEC_MAGIC;
  ge->exec = exec;
  memcpy(ge->name, g->name, sizeof ge->name);
  ge->body = body;
  body->refs = 1;
  ge->src = g;
  if (g->n_mem) g->live_exec = ge;
  ge->all_next = exec->gexecs;
  exec->gexecs = ge;
  exec->live_gexecs++;
  pthread_mutex_unlock(&exec->lock);
  *out = ge;
  return GRT_OK;
}

void grt__graph_body_unref(grt_graph_exec *ge, grt__gbody *b) {
  if (--b->refs) return;
  for (grt__gbody **pp = &ge->retired; *pp; pp = &(*pp)->next_retired)
    if (*pp == b) {
      *pp = b->next_retired;
      break;
    }
  grt__graph_body_free(b);
}

grt_status grt_graph_exec_destroy(grt_graph_exec *ge) {
  if (!ge) return GRT_OK;
  grt_status st = grt__gexec_lock(ge);
  if (st) return st;
  grt_exec *exec = ge->exec;
  if (ge->inflight) {
    pthread_mutex_unlock(&exec->lock);
    return GRT_ERR_BUSY;
  }
  ge->destroyed = true;
  exec->live_gexecs--;
  free(ge->fent);
  ge->fent = NULL;
  grt__graph_body_free(ge->body);
  ge->body = NULL;
  if (ge->src->live_exec == ge) ge->src->live_exec = NULL;
  grt__gblock *batch = NULL;
  grt__graph_mem_drop(ge, &batch);
  grt__graph_mem_sweep(exec, &batch);
  pthread_mutex_unlock(&exec->lock);
  grt__gblocks_release(exec->device, batch);
  return GRT_OK;
}

grt_status grt_graph_exec_info(grt_graph_exec *ge, size_t *nodes, uint64_t *pool_bytes) {
  grt_status st = grt__gexec_lock(ge);
  if (st) return st;
  if (nodes) *nodes = ge->body->n;
  if (pool_bytes) *pool_bytes = ge->pool_bytes;
  pthread_mutex_unlock(&ge->exec->lock);
  return GRT_OK;
}

/* A launch op goes away (completed or cancelled): its body ref and the
 * executable graph's in-flight count. */
void grt__graph_launch_release(grt_exec *exec, grt__op *op) {
  (void)exec;
  grt_graph_exec *ge = op->u.graph.ge;
  ge->inflight--;
  grt__graph_body_unref(ge, op->u.graph.body);
  op->u.graph.body = NULL;
}

void grt__graph_free_all(grt_exec *exec) {
  for (grt__capture *c = exec->captures, *n; c; c = n) {
    n = c->next;
    for (uint32_t i = 0; i < c->n_members; i++) grt__graph_idx_free(&c->members[i]->cap_front);
    grt__graph_free_nodes(c->graph, NULL); /* its blocks go with the rest of graph memory below */
    free(c->graph);
    free(c->members);
    free(c);
  }
  for (grt_event *ev = exec->events; ev; ev = ev->all_next) grt__graph_idx_free(&ev->cap_nodes);
  for (grt_graph_exec *ge = exec->gexecs, *n; ge; ge = n) {
    n = ge->all_next;
    if (ge->body) grt__graph_body_free(ge->body);
    for (grt__gbody *b = ge->retired, *bn; b; b = bn) {
      bn = b->next_retired;
      grt__graph_body_free(b);
    }
    free(ge->mem);
    free(ge->fent);
    free(ge);
  }
  for (grt_graph *g = exec->graphs, *n; g; g = n) {
    n = g->all_next;
    grt__graph_free_nodes(g, NULL);
    free(g);
  }
  grt__graph_mem_free_all(exec);
  grt__graph_handles_free(exec);
}
