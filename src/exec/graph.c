/* graph.c — graph templates and executable graphs as objects: building a
 * graph's node list, instantiate, update in place, destroy, and the graph
 * memory pool's lifetime.
 *
 * Invariants: a graph's nodes are in capture order and every dependency
 * points at an earlier node (topological order). A graph with memory nodes
 * has at most one live executable graph (g->live_exec), as in CUDA; each
 * holds refs on the blocks of its memory nodes (graph_mem.c), which go back
 * to the device only after the exec lock is released. Destroyed graphs and
 * executable graphs are zombies (magic kept, contents freed) until the exec
 * is destroyed.
 */
#include <stdlib.h>
#include <string.h>

#include "exec/graph_impl.h"

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
    grt__gblock *b = g->nodes[i].block;
    if (!b) continue;
    if (b->owner == g) b->owner = NULL; /* no more free nodes can join it */
    grt__gblock_unref(g->exec, b, batch);
  }
  g->n_mem = 0;
  free(g->nodes);
  free(g->deps);
  g->nodes = NULL;
  g->deps = NULL;
  g->n = g->cap = g->n_deps = g->deps_cap = 0;
}

bool grt__graph_add_node(grt_graph *g, const grt__op *proto, const grt__idxvec *deps, uint32_t *idx) {
  if (g->n == g->cap) {
    uint32_t cap = g->cap ? 2 * g->cap : 16;
    grt__gnode *p = realloc(g->nodes, cap * sizeof *p);
    if (!p) return false;
    g->nodes = p;
    g->cap = cap;
  }
  while (g->n_deps + deps->n > g->deps_cap) {
    uint32_t cap = g->deps_cap ? 2 * g->deps_cap : 16;
    uint32_t *p = realloc(g->deps, cap * sizeof *p);
    if (!p) return false;
    g->deps = p;
    g->deps_cap = cap;
  }
  grt__gnode *nd = &g->nodes[g->n];
  nd->proto = *proto;
  nd->proto.next = nd->proto.rnext = NULL;
  nd->proto.deps = NULL;
  nd->proto.ndeps = nd->proto.next_dep = 0;
  nd->proto.gparent = NULL;
  nd->proto.state = GRT__QUEUED;
  nd->dep_first = g->n_deps;
  nd->ndeps = deps->n;
  nd->block = NULL;
  if (deps->n) memcpy(g->deps + g->n_deps, deps->v, deps->n * sizeof *deps->v);
  g->n_deps += deps->n;
  *idx = g->n++;
  return true;
}

/* Locks g's exec when g is a live graph. */
static grt_status graph_lock(grt_graph *g) {
  if (!g || g->magic != GRT__GRAPH_MAGIC) return GRT_ERR_INVALID_ARG;
  pthread_mutex_lock(&g->exec->lock);
  if (!g->destroyed) return GRT_OK;
  pthread_mutex_unlock(&g->exec->lock);
  return GRT_ERR_DESTROYED;
}

static grt_status gexec_lock(grt_graph_exec *ge) {
  if (!ge || ge->magic != GRT__GEXEC_MAGIC) return GRT_ERR_INVALID_ARG;
  pthread_mutex_lock(&ge->exec->lock);
  if (!ge->destroyed) return GRT_OK;
  pthread_mutex_unlock(&ge->exec->lock);
  return GRT_ERR_DESTROYED;
}

grt_status grt_graph_destroy(grt_graph *g) {
  if (!g) return GRT_OK;
  grt_status st = graph_lock(g);
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
  grt_status st = graph_lock(g);
  if (st) return st;
  snprintf(g->name, sizeof g->name, "%s", name);
  pthread_mutex_unlock(&g->exec->lock);
  return GRT_OK;
}

grt_status grt_graph_node_count(grt_graph *g, size_t *out) {
  if (!out) return GRT_ERR_INVALID_ARG;
  grt_status st = graph_lock(g);
  if (st) return st;
  *out = g->n;
  pthread_mutex_unlock(&g->exec->lock);
  return GRT_OK;
}

grt_status grt_graph_edge_count(grt_graph *g, size_t *out) {
  if (!out) return GRT_ERR_INVALID_ARG;
  grt_status st = graph_lock(g);
  if (st) return st;
  *out = g->n_deps;
  pthread_mutex_unlock(&g->exec->lock);
  return GRT_OK;
}

grt_status grt_graph_instantiate(grt_graph *g, grt_graph_exec **out) {
  if (!out) return GRT_ERR_INVALID_ARG;
  *out = NULL;
  grt_status st = graph_lock(g);
  if (st) return st;
  grt_exec *exec = g->exec;
  grt_graph_exec *ge = NULL;
  grt__gbody *body = NULL;
  if (exec->error) st = exec->error;
  else if (g->n_mem && g->live_exec) st = GRT_ERR_BUSY;
  else if (!(ge = calloc(1, sizeof *ge)) || !(body = grt__graph_body_build(g))) st = GRT_ERR_NOMEM;
  else st = grt__graph_mem_snapshot(ge, g);
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

/* Same nodes, kinds, engines and edges? */
static grt_graph_update_result compare(const grt__gbody *b, const grt_graph *g) {
  if (b->n != g->n) return GRT_GRAPH_UPDATE_TOPOLOGY_CHANGED;
  for (uint32_t i = 0; i < g->n; i++) {
    const grt__op *a = &b->ops[i], *c = &g->nodes[i].proto;
    if (a->kind == GRT__OP_GALLOC || a->kind == GRT__OP_GFREE || c->kind == GRT__OP_GALLOC ||
        c->kind == GRT__OP_GFREE)
      return GRT_GRAPH_UPDATE_NOT_SUPPORTED;
    if (a->kind != c->kind || a->engine != c->engine) return GRT_GRAPH_UPDATE_NODE_KIND_CHANGED;
  }
  for (uint32_t i = 0; i < g->n; i++) {
    uint32_t n = b->pred_first[i + 1] - b->pred_first[i];
    if (n != g->nodes[i].ndeps ||
        (n && memcmp(b->preds + b->pred_first[i], g->deps + g->nodes[i].dep_first, n * sizeof *b->preds)))
      return GRT_GRAPH_UPDATE_TOPOLOGY_CHANGED;
  }
  return GRT_GRAPH_UPDATE_OK;
}

static void body_unref(grt_graph_exec *ge, grt__gbody *b) {
  if (--b->refs) return;
  for (grt__gbody **pp = &ge->retired; *pp; pp = &(*pp)->next_retired)
    if (*pp == b) {
      *pp = b->next_retired;
      break;
    }
  grt__graph_body_free(b);
}

grt_status grt_graph_exec_update(grt_graph_exec *ge, grt_graph *g, grt_graph_update_result *result) {
  grt_graph_update_result dummy;
  if (!result) result = &dummy;
  *result = GRT_GRAPH_UPDATE_OK;
  if (!g || g->magic != GRT__GRAPH_MAGIC) return GRT_ERR_INVALID_ARG;
  grt_status st = gexec_lock(ge);
  if (st) return st;
  grt_exec *exec = ge->exec;
  grt__gbody *nb = NULL;
  if (g->exec != exec) st = GRT_ERR_WRONG_DEVICE;
  else if (g->destroyed) st = GRT_ERR_DESTROYED;
  else if ((*result = compare(ge->body, g)) != GRT_GRAPH_UPDATE_OK) st = GRT_ERR_NOT_PERMITTED;
  else if (!(nb = grt__graph_body_build(g))) st = GRT_ERR_NOMEM;
  if (!st) {
    grt__gbody *old = ge->body;
    nb->refs = 1;
    ge->body = nb;
    old->next_retired = ge->retired;
    ge->retired = old;
    body_unref(ge, old);
  }
  pthread_mutex_unlock(&exec->lock);
  return st;
}

grt_status grt_graph_exec_destroy(grt_graph_exec *ge) {
  if (!ge) return GRT_OK;
  grt_status st = gexec_lock(ge);
  if (st) return st;
  grt_exec *exec = ge->exec;
  if (ge->inflight) {
    pthread_mutex_unlock(&exec->lock);
    return GRT_ERR_BUSY;
  }
  ge->destroyed = true;
  exec->live_gexecs--;
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
  grt_status st = gexec_lock(ge);
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
  body_unref(ge, op->u.graph.body);
  op->u.graph.body = NULL;
}

void grt__graph_free_all(grt_exec *exec) {
  for (grt__capture *c = exec->captures, *n; c; c = n) {
    n = c->next;
    for (uint32_t i = 0; i < c->n_members; i++) grt__graph_idx_free(&c->members[i]->cap_front);
    free(c->graph->nodes); /* its blocks go with the rest of graph memory below */
    free(c->graph->deps);
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
    free(ge);
  }
  for (grt_graph *g = exec->graphs, *n; g; g = n) {
    n = g->all_next;
    free(g->nodes);
    free(g->deps);
    free(g);
  }
  grt__graph_mem_free_all(exec);
}
