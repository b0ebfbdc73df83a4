/* graph_exec.c — running executable graphs: the flat launch body, launch
 * (one op on the stream), expansion when the launch op becomes ready, node
 * completion and cancellation.
 *
 * A launch is a single GRT__OP_GRAPH op in its stream's FIFO. When it reaches
 * the head with its deps met, grt__graph_expand resets the body's countdown
 * (remaining[i] = number of predecessors), and settles the nodes with none:
 * nodes that need an engine enter its ready queue as ordinary ops (at the
 * launching stream's priority); empty nodes (no body, no duration: allocation
 * and free nodes, empty kernels) complete on the spot. Each completion counts
 * down its successors; the launch op completes — advancing its stream like
 * any op — when its last node did. Nothing is allocated per node: the body's
 * op array, countdown and work queue are reused by each launch (launches of
 * one executable graph are serialized, see graph_impl.h).
 *
 * Timeline: the launch is a slice on its stream's track spanning its nodes,
 * which are slices on the same track (nested) and on their engine slots.
 * All of it runs under the exec lock, like the rest of the scheduling core.
 */
#include <stdlib.h>
#include <string.h>

#include "exec/graph_impl.h"

void grt__graph_body_free(grt__gbody *b) {
  if (!b) return;
  free(b->ops);
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

grt__gbody *grt__graph_body_build(const grt_graph *g) {
  grt__gbody *b = calloc(1, sizeof *b);
  if (!b) return NULL;
  uint32_t n = g->n, m = g->n_deps;
  b->n = n;
  b->ops = calloc(n ? n : 1, sizeof *b->ops);
  b->pred_first = calloc(n + 1, sizeof *b->pred_first);
  b->preds = malloc((m ? m : 1) * sizeof *b->preds);
  b->succ_first = calloc(n + 2, sizeof *b->succ_first);
  b->succ = malloc((m ? m : 1) * sizeof *b->succ);
  b->remaining = malloc((n ? n : 1) * sizeof *b->remaining);
  b->stack = malloc((n ? n : 1) * sizeof *b->stack);
  b->chain_next = malloc((n ? n : 1) * sizeof *b->chain_next);
  b->spot = malloc(n ? n : 1);
  b->indeg = malloc((n ? n : 1) * sizeof *b->indeg);
  b->roots = malloc((n ? n : 1) * sizeof *b->roots);
  if (!b->indeg || !b->roots || !b->spot || !b->ops || !b->pred_first || !b->preds || !b->succ_first || !b->succ || !b->remaining || !b->stack ||
      !b->chain_next) {
    grt__graph_body_free(b);
    return NULL;
  }
  for (uint32_t i = 0; i < n; i++) {
    const grt__gnode *nd = &g->nodes[i];
    b->ops[i] = nd->proto;
    b->ops[i].deps = &b->ops[i].inline_dep;
    b->ops[i].gindex = i;
    b->pred_first[i + 1] = b->pred_first[i] + nd->ndeps;
    if (nd->ndeps) memcpy(b->preds + b->pred_first[i], g->deps + nd->dep_first, nd->ndeps * sizeof *b->preds);
    for (uint32_t k = 0; k < nd->ndeps; k++) b->succ_first[g->deps[nd->dep_first + k] + 2]++;
  }
  /* CSR fill: succ_first[i + 1] is the write cursor of i, ending at succ_first[i + 1]'s final value. */
  for (uint32_t i = 0; i < n; i++) b->succ_first[i + 2] += b->succ_first[i + 1];
  for (uint32_t i = 0; i < n; i++)
    for (uint32_t k = b->pred_first[i]; k < b->pred_first[i + 1]; k++) b->succ[b->succ_first[b->preds[k] + 1]++] = i;
  for (uint32_t i = 0; i < n; i++) {
    b->chain_next[i] = chain_successor(b, i);
    b->spot[i] = settles_on_spot(&b->ops[i]);
    b->indeg[i] = b->pred_first[i + 1] - b->pred_first[i];
    if (!b->indeg[i]) b->roots[b->n_roots++] = i;
  }
  return b;
}

grt_status grt_graph_launch(grt_graph_exec *ge, grt_stream *s) { return grt_graph_launch_ex(ge, s, NULL); }

/* The launch op waits for the previous launch when that was on another
 * stream, and for the frees its allocations wait for (graph_mem.c); with id
 * it gets one (op.c's rule: written only on success). */
static grt_status submit_launch(grt_graph_exec *ge, grt_stream *s, grt__op *op, grt_op_id *id) {
  grt_exec *exec = s->exec;
  grt_stream *prev = ge->last_stream;
  uint64_t t = 0;
  grt_status st = grt__graph_mem_launch_check(ge, op);
  if (!st && prev && prev != s && grt__done(prev) < ge->last_seq &&
      !grt__op_add_dep(op, prev, ge->last_seq, ge->last_uid, NULL))
    st = GRT_ERR_NOMEM;
  if (!st && id) st = grt__op_id_take(exec, &t);
  if (st) {
    grt__op_free(exec, op);
    return st;
  }
  op->times_id = t;
  uint64_t seq, uid;
  if ((st = grt__submit_ex(op, &seq, &uid))) {
    grt__op_id_undo(exec, t);
    return st;
  }
  ge->last_stream = s;
  ge->last_seq = seq;
  ge->last_uid = uid;
  grt__graph_mem_launched(ge, s, seq, uid);
  if (id) *id = t;
  return GRT_OK;
}

grt_status grt_graph_launch_ex(grt_graph_exec *ge, grt_stream *s, grt_op_id *id) {
  if (!ge || ge->magic != GRT__GEXEC_MAGIC) return GRT_ERR_INVALID_ARG;
  grt_status st = grt__stream_check(s);
  if (st) return st;
  if (ge->exec != s->exec) return GRT_ERR_WRONG_DEVICE;
  if ((st = grt__stream_lock(s))) return st;
  grt_exec *exec = s->exec;
  grt__op *op = NULL;
  if (ge->destroyed) st = GRT_ERR_DESTROYED;
  else if (s->cap) {
    grt__graph_invalidate(s->cap); /* no nested graphs in a capture */
    st = GRT_ERR_CAPTURE;
  } else if (!(op = grt__op_alloc(exec, s, GRT__OP_GRAPH))) st = GRT_ERR_NOMEM;
  if (st) {
    pthread_mutex_unlock(&exec->lock);
    return st;
  }
  op->u.graph.body = ge->body;
  op->u.graph.ge = ge;
  op->u.graph.left = op->u.graph.running = 0;
  ge->body->refs++;
  ge->inflight++;
  memcpy(op->name, ge->name, sizeof op->name);
  st = submit_launch(ge, s, op, id);
  pthread_mutex_unlock(&exec->lock);
  return st;
}

/* Counts down i's successors; those reaching zero join the work queue. */
static void release_succ(grt__gbody *b, uint32_t i, uint32_t *tail) {
  for (uint32_t k = b->succ_first[i]; k < b->succ_first[i + 1]; k++) {
    uint32_t j = b->succ[k];
    if (--b->remaining[j] == 0) b->stack[(*tail)++] = j;
  }
}

/* Settles the queued nodes (and what they release in turn); completes the
 * launch when no node is left. */
static void settle(grt_exec *exec, grt__op *op, uint32_t head, uint32_t tail, uint64_t now) {
  grt__gbody *b = op->u.graph.body;
  bool trace = exec->cfg.record_timeline;
  while (head < tail) {
    uint32_t i = b->stack[head++];
    if (b->spot[i] && !trace) { /* the replay fast path: only the compact arrays are touched */
      op->u.graph.left--;
      release_succ(b, i, &tail);
      continue;
    }
    grt__op *nd = &b->ops[i];
    nd->stream = op->stream;
    nd->priority = op->priority;
    nd->gparent = op;
    nd->next = nd->rnext = NULL;
    nd->blocked = 0;
    if (trace) nd->uid = ++exec->next_uid;
    if (b->spot[i]) {
      nd->start_ns = nd->end_ns = now;
      grt__trace_op(exec, nd);
      op->u.graph.left--;
      release_succ(b, i, &tail);
    } else {
      nd->state = GRT__QUEUED;
      op->u.graph.running++;
      grt__sched_ready(exec, nd);
    }
  }
  if (op->u.graph.left == 0) grt__sched_complete(exec, op, now);
}

void grt__graph_expand(grt_exec *exec, grt__op *op, uint64_t now) {
  grt__gbody *b = op->u.graph.body;
  op->state = GRT__RUNNING;
  op->start_ns = now;
  op->u.graph.left = b->n;
  op->u.graph.running = 0;
  exec->state_gen++;
  memcpy(b->remaining, b->indeg, b->n * sizeof *b->remaining);
  memcpy(b->stack, b->roots, b->n_roots * sizeof *b->stack);
  settle(exec, op, 0, b->n_roots, now);
}

void grt__graph_node_complete(grt_exec *exec, grt__op *nd, uint64_t now) {
  grt__op *op = nd->gparent;
  grt__gbody *b = op->u.graph.body;
  grt__sched_release_engine(exec, nd);
  nd->end_ns = now;
  nd->state = GRT__QUEUED; /* done: no longer READY or RUNNING */
  grt__trace_op(exec, nd);
  exec->state_gen++;
  op->u.graph.running--;
  op->u.graph.left--;
  if (exec->error) { /* cancelled: finish once the nodes still running are done */
    if (!op->u.graph.running) grt__sched_complete(exec, op, now);
    return;
  }
  uint32_t tail = 0;
  release_succ(b, nd->gindex, &tail);
  settle(exec, op, 0, tail, now);
}

bool grt__graph_cancel(grt_exec *exec, grt__op *op) {
  if (op->state != GRT__RUNNING) return true;
  grt__gbody *b = op->u.graph.body;
  for (uint32_t i = 0; i < b->n; i++)
    if (b->ops[i].state == GRT__READY) { /* only the current launch's nodes can be READY */
      grt__rq_remove(exec, &b->ops[i]);
      b->ops[i].state = GRT__QUEUED;
      op->u.graph.running--;
    }
  return op->u.graph.running == 0;
}

/* ---- the worker's lock-free chain (sched_threads.c) ----------------------- */

grt__op *grt__graph_chain_next(const grt__op *first, const grt__op *node) {
  const grt__gbody *b = first->gparent->u.graph.body;
  uint32_t j = b->chain_next[node->gindex];
  return j == UINT32_MAX ? NULL : &b->ops[j];
}

void grt__graph_chain_adopt(const grt__op *first, grt__op *node) {
  node->stream = first->stream;
  node->priority = first->priority;
  node->gparent = first->gparent;
  node->slot = first->slot;
  node->next = node->rnext = NULL;
}

void grt__graph_chain_done(grt_exec *exec, grt__op *first, grt__op *last, uint32_t count) {
  grt__op *op = first->gparent;
  const grt__gbody *b = op->u.graph.body;
  first->state = GRT__QUEUED; /* done; the others in between never left QUEUED */
  last->state = GRT__RUNNING; /* it holds first's slot now */
  op->u.graph.left -= count;
  exec->state_gen++;
  if (!exec->cfg.record_timeline) return;
  for (grt__op *c = first; c != last; c = &b->ops[b->chain_next[c->gindex]]) {
    c->uid = ++exec->next_uid;
    grt__trace_op(exec, c);
  }
  last->uid = ++exec->next_uid;
}
