/* graph_update.c — cudaGraphExecUpdate: an executable graph takes the node
 * parameters of a topologically identical graph, or says why not with
 * CUDA's result enum and the node of the graph that made it fail (CUDA
 * Runtime API, Graph Management, cudaGraphExecUpdate and
 * cudaGraphExecUpdateResultInfo; docs/EXEC.md, "Graphs").
 *
 * The graph is flattened as instantiate would (graph_body.c) and paired with
 * the executable graph's body node by node, in creation order; dependencies
 * are paired in edge order. The checks, in CUDA's terms: the count of nodes
 * (TOPOLOGY_CHANGED, no node), memory nodes (NOT_SUPPORTED: CUDA cannot
 * update them), each node's type (NODE_TYPE_CHANGED), what a kernel runs on
 * (UNSUPPORTED_FUNCTION_CHANGE: the engine is the model's launch kind; the
 * function itself may change), a copy's direction (PARAMETERS_CHANGED), then
 * each node's dependencies (TOPOLOGY_CHANGED, naming the node and the
 * mismatched dependency). A difference inside a child graph is reported on
 * the child graph node, the node of the graph the caller holds. Bodies,
 * arguments, durations, names, copy and memset addresses and sizes, events
 * and host functions are parameters: they change. Launches already issued
 * keep the body they were issued with (refs).
 */
#include <stdlib.h>
#include <string.h>

#include "exec/graph_impl.h"

typedef struct mismatch {
  grt_graph_update_result result;
  uint32_t node, from; /* flat indices in the new body; UINT32_MAX: none */
} mismatch;

static mismatch found(grt_graph_update_result r, uint32_t node, uint32_t from) { return (mismatch){r, node, from}; }

static bool is_mem(uint8_t type) { return type == GRT_GRAPH_NODE_MEM_ALLOC || type == GRT_GRAPH_NODE_MEM_FREE; }

/* The first memory node of either body: of the new one when it has any. */
static mismatch mem_nodes(const grt__gbody *b, const grt__gbody *c) {
  for (uint32_t i = 0; i < c->n; i++)
    if (is_mem(c->type[i])) return found(GRT_GRAPH_UPDATE_NOT_SUPPORTED, i, UINT32_MAX);
  for (uint32_t i = 0; i < b->n; i++)
    if (is_mem(b->type[i])) return found(GRT_GRAPH_UPDATE_NOT_SUPPORTED, UINT32_MAX, UINT32_MAX);
  return found(GRT_GRAPH_UPDATE_OK, UINT32_MAX, UINT32_MAX);
}

/* Flat node i of both: same type, same launch kind. */
static grt_graph_update_result node_kind(const grt__gbody *b, const grt__gbody *c, uint32_t i) {
  if (b->type[i] != c->type[i]) return GRT_GRAPH_UPDATE_NODE_TYPE_CHANGED;
  const grt__op *x = &b->ops[i], *y = &c->ops[i];
  if (c->type[i] == GRT_GRAPH_NODE_KERNEL && x->engine != y->engine)
    return GRT_GRAPH_UPDATE_UNSUPPORTED_FUNCTION_CHANGE;
  if (c->type[i] == GRT_GRAPH_NODE_MEMCPY && x->kind != y->kind) return GRT_GRAPH_UPDATE_PARAMETERS_CHANGED;
  return GRT_GRAPH_UPDATE_OK;
}

/* Flat node i's dependencies, paired in edge order. */
static mismatch node_deps(const grt__gbody *b, const grt__gbody *c, uint32_t i) {
  uint32_t nb = b->pred_first[i + 1] - b->pred_first[i], nc = c->pred_first[i + 1] - c->pred_first[i];
  if (nb != nc) return found(GRT_GRAPH_UPDATE_TOPOLOGY_CHANGED, i, UINT32_MAX);
  for (uint32_t k = 0; k < nc; k++) {
    uint32_t d = c->preds[c->pred_first[i] + k];
    if (b->preds[b->pred_first[i] + k] != d) return found(GRT_GRAPH_UPDATE_TOPOLOGY_CHANGED, i, d);
  }
  return found(GRT_GRAPH_UPDATE_OK, UINT32_MAX, UINT32_MAX);
}

static mismatch compare(const grt__gbody *b, const grt__gbody *c) {
  if (b->n_top != c->n_top) return found(GRT_GRAPH_UPDATE_TOPOLOGY_CHANGED, UINT32_MAX, UINT32_MAX);
  mismatch m = mem_nodes(b, c);
  if (m.result) return m;
  uint32_t n = b->n < c->n ? b->n : c->n;
  for (uint32_t i = 0; i < n; i++) {
    grt_graph_update_result r = node_kind(b, c, i);
    if (r) return found(r, i, UINT32_MAX);
  }
  if (b->n != c->n) /* a child graph of another size: flat nodes run out on one side */
    return found(GRT_GRAPH_UPDATE_TOPOLOGY_CHANGED, n < c->n ? n : c->n - 1, UINT32_MAX);
  for (uint32_t i = 0; i < n; i++)
    if ((m = node_deps(b, c, i)).result) return m;
  return m;
}

/* The handle of the top-level node of g that flat node i of c came from (handles reserved). */
static grt_graph_node *node_of(grt_graph *g, const grt__gbody *c, uint32_t i) {
  return i == UINT32_MAX ? NULL : grt__graph_handle(g, c->origin[i]);
}

static void install(grt_graph_exec *ge, grt__gbody *nb) {
  grt__gbody *old = ge->body;
  nb->refs = 1;
  ge->body = nb;
  old->next_retired = ge->retired;
  ge->retired = old;
  grt__graph_body_unref(ge, old);
}

/* Lock held, g valid and of ge's exec: the update, or why not into *info. */
static grt_status update(grt_graph_exec *ge, grt_graph *g, grt_graph_update_info *info) {
  grt__gbody *nb = NULL;
  if (ge->fused) { /* the fused body pairs with no graph node by node */
    info->result = GRT_GRAPH_UPDATE_NOT_SUPPORTED;
    return GRT_ERR_GRAPH_EXEC_UPDATE;
  }
  if (!grt__graph_handles_reserve(ge->exec, 2) || !(nb = grt__graph_body_build(g))) return GRT_ERR_NOMEM;
  mismatch m = compare(ge->body, nb);
  if (m.result) {
    info->result = m.result;
    info->error_node = node_of(g, nb, m.node);
    info->error_from_node = node_of(g, nb, m.from);
    grt__graph_body_free(nb);
    return GRT_ERR_GRAPH_EXEC_UPDATE;
  }
  install(ge, nb);
  info->result = GRT_GRAPH_UPDATE_OK;
  return GRT_OK;
}

grt_status grt_graph_exec_update_ex(grt_graph_exec *ge, grt_graph *g, grt_graph_update_info *info) {
  grt_graph_update_info dummy;
  if (!info) info = &dummy;
  *info = (grt_graph_update_info){GRT_GRAPH_UPDATE_ERROR, NULL, NULL};
  if (!g || g->magic != GRT__GRAPH_MAGIC) return GRT_ERR_INVALID_ARG;
  grt_status st = grt__gexec_lock(ge);
  if (st) return st;
  grt_exec *exec = ge->exec;
  if (g->exec != exec) st = GRT_ERR_WRONG_DEVICE;
  else if (g->destroyed) st = GRT_ERR_INVALID_HANDLE;
  else st = update(ge, g, info);
  pthread_mutex_unlock(&exec->lock);
  return st;
}

grt_status grt_graph_exec_update(grt_graph_exec *ge, grt_graph *g, grt_graph_update_result *result) {
  grt_graph_update_info info;
  grt_status st = grt_graph_exec_update_ex(ge, g, &info);
  if (result) *result = info.result;
  return st;
}
