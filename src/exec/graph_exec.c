/* graph_exec.c — running executable graphs: launch (one op on the stream),
 * expansion when the launch op becomes ready, node completion and
 * cancellation. The flat body a launch runs is built in graph_body.c.
 *
 * A launch is a single GRT__OP_GRAPH op in its stream's FIFO. When it reaches
 * the head with its deps met, grt__graph_expand resets the body's countdown
 * (remaining[i] = number of predecessors), and settles the nodes with none:
 * nodes that need an engine enter its ready queue as ordinary ops (at the
 * launching stream's priority); empty nodes (no body, no duration: allocation
 * and free nodes, empty nodes and kernels, event nodes, a child graph's
 * markers) complete on the spot. Each completion counts
 * down its successors; the launch op completes — advancing its stream like
 * any op — when its last node did. Nothing is allocated per node: the body's
 * op array, countdown and work queue are reused by each launch (launches of
 * one executable graph are serialized, see graph_impl.h).
 *
 * Event nodes act at the launch, in API order, like the stream calls they
 * stand for: a wait node binds to its event's snapshot when the launch is
 * issued and the whole launch waits for it; a record node records its event
 * at the launch (a wait on it waits for the whole launch), and stamps its
 * time when the node itself settles.
 *
 * Timeline: the launch is a slice on its stream's track spanning its nodes,
 * which are slices on the same track (nested) and on their engine slots.
 * All of it runs under the exec lock, like the rest of the scheduling core.
 */
#include <stdlib.h>
#include <string.h>

#include "exec/graph_impl.h"

grt_status grt_graph_launch(grt_graph_exec *ge, grt_stream *s) { return grt_graph_launch_ex(ge, s, NULL); }

/* An event's snapshot, to put back when the launch that overwrote it fails. */
typedef struct ev_saved {
  grt_event *ev;
  grt_stream *stream;
  uint64_t seq, gen, src_uid, time_ns;
  bool time_valid;
} ev_saved;

/* The wait nodes' events: the launch waits for their snapshots as of now.
 * Refused: a destroyed event, or one recorded in a capture in progress (the
 * launch cannot join it). Counts the record nodes into *n_records. */
static grt_status bind_waits(const grt__gbody *b, grt__op *op, uint32_t *n_records) {
  *n_records = 0;
  for (uint32_t k = 0; k < b->n_events; k++) {
    const grt__op *nd = &b->ops[b->events[k]];
    grt_event *ev = nd->u.rec.event;
    if (ev->destroyed) return GRT_ERR_INVALID_HANDLE;
    if (nd->kind == GRT__OP_RECORD) {
      ++*n_records;
      continue;
    }
    if (ev->cap) return GRT_ERR_CAPTURED_EVENT;
    if (ev->stream && ev->stream != op->stream && grt__done(ev->stream) < ev->seq &&
        !grt__op_add_dep(op, ev->stream, ev->seq, ev->src_uid, ev))
      return GRT_ERR_NOMEM;
  }
  return GRT_OK;
}

/* The record nodes' events snapshot the launch about to be issued on s, as
 * grt_event_record does (the launch may complete inside the submit); saved
 * first into save (n_records entries). */
static void record_events(const grt__gbody *b, grt_stream *s, ev_saved *save) {
  uint32_t j = 0;
  for (uint32_t k = 0; k < b->n_events; k++) {
    const grt__op *nd = &b->ops[b->events[k]];
    if (nd->kind != GRT__OP_RECORD) continue;
    grt_event *ev = nd->u.rec.event;
    save[j++] = (ev_saved){ev, ev->stream, ev->seq, ev->gen, ev->src_uid, ev->time_ns, ev->time_valid};
    ev->gen++;
    ev->time_valid = false;
    ev->stream = s;
    ev->seq = s->issued_seq + 1;
    ev->src_uid = s->exec->next_uid + 1;
  }
}

static void unrecord_events(ev_saved *save, uint32_t n) {
  while (n--) { /* backwards: an event recorded twice gets its first snapshot back */
    ev_saved *v = &save[n];
    v->ev->stream = v->stream;
    v->ev->seq = v->seq;
    v->ev->gen = v->gen;
    v->ev->src_uid = v->src_uid;
    v->ev->time_ns = v->time_ns;
    v->ev->time_valid = v->time_valid;
  }
}

/* Recorded outside their capture now: no longer captured events. */
static void uncapture_events(ev_saved *save, uint32_t n) {
  for (uint32_t i = 0; i < n; i++)
    if (save[i].ev->cap) {
      save[i].ev->cap = NULL;
      grt__graph_idx_free(&save[i].ev->cap_nodes);
    }
}

/* Everything a launch checks or needs before it is issued, in op. */
static grt_status prepare_launch(grt_graph_exec *ge, grt__op *op, ev_saved **save, uint32_t *n_records) {
  grt_stream *prev = ge->last_stream, *s = op->stream;
  grt_status st = grt__graph_mem_launch_check(ge, op);
  if (!st && prev && prev != s && grt__done(prev) < ge->last_seq &&
      !grt__op_add_dep(op, prev, ge->last_seq, ge->last_uid, NULL))
    st = GRT_ERR_NOMEM;
  if (!st) st = bind_waits(ge->body, op, n_records);
  if (!st && *n_records && !(*save = malloc(*n_records * sizeof **save))) st = GRT_ERR_NOMEM;
  return st;
}

/* The launch op waits for the previous launch when that was on another
 * stream, for the frees its allocations wait for (graph_mem.c) and for its
 * wait nodes' events; with id it gets one (op.c's rule: written only on
 * success). */
static grt_status submit_launch(grt_graph_exec *ge, grt_stream *s, grt__op *op, grt_op_id *id) {
  grt_exec *exec = s->exec;
  uint64_t t = 0;
  ev_saved *save = NULL;
  uint32_t n_records = 0;
  grt_status st = prepare_launch(ge, op, &save, &n_records);
  if (!st && id) st = grt__op_id_take(exec, &t);
  if (st) {
    free(save);
    grt__op_free(exec, op);
    return st;
  }
  op->times_id = t;
  record_events(ge->body, s, save);
  uint64_t seq, uid;
  if ((st = grt__submit_ex(op, &seq, &uid))) {
    unrecord_events(save, n_records);
    free(save);
    grt__op_id_undo(exec, t);
    return st;
  }
  uncapture_events(save, n_records);
  free(save);
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
  if (ge->destroyed) st = GRT_ERR_INVALID_HANDLE;
  else if (s->cap) {
    grt__graph_invalidate(s->cap); /* CUDA captures no graph launch */
    st = GRT_ERR_CAPTURE_UNSUPPORTED;
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

/* A record node reached: its event's time, if the event's snapshot is still this launch. */
static void stamp_record(const grt__op *nd, const grt__op *launch, uint64_t now) {
  grt_event *ev = nd->u.rec.event;
  if (ev->stream != launch->stream || ev->seq != launch->seq) return;
  ev->time_ns = now;
  ev->time_valid = true;
}

/* Settles the queued nodes (and what they release in turn); completes the
 * launch when no node is left. */
static void settle(grt_exec *exec, grt__op *op, uint32_t head, uint32_t tail, uint64_t now) {
  grt__gbody *b = op->u.graph.body;
  bool trace = exec->cfg.record_timeline;
  while (head < tail) {
    uint32_t i = b->stack[head++];
    if (b->spot[i] == GRT__SPOT_PLAIN && !trace) { /* the replay fast path: only the compact arrays are touched */
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
      if (b->spot[i] == GRT__SPOT_RECORD) stamp_record(nd, op, now);
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
