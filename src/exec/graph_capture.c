/* graph_capture.c — stream capture: begin/end, ops diverted into a graph,
 * fork/join through events, and the rules of what is illegal while a
 * capture is in progress (docs/EXEC.md, "Graphs"); its memory nodes are in
 * graph_mem.c.
 *
 * Invariants (exec lock): a stream is in at most one capture (s->cap); every
 * member of a capture points back at it; an event with ev->cap set was last
 * recorded inside that capture, which is still in progress. end-capture (or a
 * failed one) clears all three kinds of pointer, so no capture state survives
 * the capture — whether it produced a graph or not. An invalidated capture
 * stays in progress (its streams refuse ops with GRT_ERR_CAPTURE_INVALIDATED)
 * until
 * end-capture reports the error.
 */
#include <stdlib.h>
#include <string.h>

#include "exec/graph_impl.h"

static void invalidate(grt__capture *c) { c->invalid = true; }

static bool add_member(grt__capture *c, grt_stream *s) {
  if (c->n_members == c->cap_members) {
    uint32_t cap = c->cap_members ? 2 * c->cap_members : 4;
    grt_stream **m = realloc(c->members, cap * sizeof *m);
    if (!m) return false;
    c->members = m;
    c->cap_members = cap;
  }
  c->members[c->n_members++] = s;
  s->cap = c;
  s->cap_front.n = 0;
  return true;
}

grt_status grt_stream_begin_capture(grt_stream *s, grt_capture_mode mode) {
  if (mode != GRT_CAPTURE_GLOBAL && mode != GRT_CAPTURE_THREAD_LOCAL && mode != GRT_CAPTURE_RELAXED)
    return GRT_ERR_INVALID_ARG;
  grt_status st = grt__stream_lock(s);
  if (st) return st;
  grt_exec *exec = s->exec;
  grt__capture *c = NULL;
  if (s == exec->legacy) st = GRT_ERR_CAPTURE_UNSUPPORTED; /* never capturable */
  else if (s->cap) st = GRT_ERR_STATE;                       /* cudaErrorIllegalState */
  else if (!(c = calloc(1, sizeof *c)) || !(c->graph = grt__graph_new(exec)) || !add_member(c, s)) {
    if (c) {
      free(c->graph);
      free(c);
    }
    st = GRT_ERR_NOMEM;
  }
  if (!st) {
    c->id = ++exec->next_uid; /* identity only: never reused */
    c->exec = exec;
    c->origin = s;
    c->mode = mode;
    c->thread = pthread_self();
    c->next = exec->captures;
    exec->captures = c;
  }
  pthread_mutex_unlock(&exec->lock);
  return st;
}

/* Marks the ancestors of the origin's frontier; every other member's frontier
 * must be among them (it joined back): GRT_OK, GRT_ERR_CAPTURE_UNJOINED, or
 * GRT_ERR_NOMEM when the marks do not fit (nothing decided). */
static grt_status check_joined(grt__capture *c) {
  grt_graph *g = c->graph;
  if (c->n_members <= 1) return GRT_OK;
  uint8_t *mark = calloc(g->n ? g->n : 1, 1);
  uint32_t *stack = malloc((g->n ? g->n : 1) * sizeof *stack);
  bool ok = mark && stack;
  grt_status st = ok ? GRT_OK : GRT_ERR_NOMEM;
  uint32_t sp = 0;
  for (uint32_t i = 0; ok && i < c->origin->cap_front.n; i++) {
    uint32_t x = c->origin->cap_front.v[i];
    if (!mark[x]) mark[x] = 1, stack[sp++] = x;
  }
  while (ok && sp) {
    const grt__gnode *nd = &g->nodes[stack[--sp]];
    for (uint32_t k = 0; k < nd->ndeps; k++) {
      uint32_t d = nd->deps[k];
      if (!mark[d]) mark[d] = 1, stack[sp++] = d;
    }
  }
  for (uint32_t m = 1; ok && m < c->n_members; m++) {
    const grt__idxvec *f = &c->members[m]->cap_front;
    for (uint32_t i = 0; i < f->n; i++)
      if (!mark[f->v[i]]) ok = false, st = GRT_ERR_CAPTURE_UNJOINED;
  }
  free(mark);
  free(stack);
  return st;
}

/* Takes c off the exec and every stream and event; lock held. */
static void detach(grt_exec *exec, grt__capture *c) {
  for (uint32_t i = 0; i < c->n_members; i++) {
    c->members[i]->cap = NULL;
    grt__graph_idx_free(&c->members[i]->cap_front);
  }
  for (grt_event *ev = exec->events; ev; ev = ev->all_next)
    if (ev->cap == c) {
      ev->cap = NULL;
      grt__graph_idx_free(&ev->cap_nodes);
    }
  for (grt__capture **pp = &exec->captures; *pp; pp = &(*pp)->next)
    if (*pp == c) {
      *pp = c->next;
      break;
    }
  free(c->members);
}

grt_status grt_stream_end_capture(grt_stream *s, grt_graph **graph_out) {
  if (!graph_out) return GRT_ERR_INVALID_ARG;
  *graph_out = NULL;
  grt_status st = grt__stream_check(s);
  if (st) return st;
  grt_exec *exec = s->exec;
  pthread_mutex_lock(&exec->lock); /* not grt__stream_lock: a sticky error must still end the capture */
  grt__capture *c = s->cap;
  if (s->destroyed) st = GRT_ERR_INVALID_HANDLE;
  else if (!c) st = GRT_ERR_STATE;                         /* cudaErrorIllegalState */
  else if (c->origin != s) st = GRT_ERR_CAPTURE_UNMATCHED; /* a forked member */
  else if (c->mode != GRT_CAPTURE_RELAXED && !pthread_equal(c->thread, pthread_self()))
    st = GRT_ERR_CAPTURE_WRONG_THREAD; /* the capture goes on */
  /* The verdict on a valid capture comes before anything is taken apart:
     without memory for it the capture goes on and the call can be repeated. */
  grt_status verdict = GRT_OK;
  if (!st) {
    verdict = exec->error ? exec->error : c->invalid ? GRT_ERR_CAPTURE_INVALIDATED : check_joined(c);
    if (verdict == GRT_ERR_NOMEM && !exec->error) st = GRT_ERR_NOMEM;
  }
  if (st) {
    pthread_mutex_unlock(&exec->lock);
    return st;
  }
  st = verdict;
  bool ok = !st;
  detach(exec, c);
  grt_graph *g = c->graph;
  grt__gblock *batch = NULL; /* an unfinished graph's memory goes back */
  if (ok) {
    g->all_next = exec->graphs;
    exec->graphs = g;
    exec->live_graphs++;
    *graph_out = g;
  } else {
    grt__graph_free_nodes(g, &batch);
    free(g);
  }
  pthread_mutex_unlock(&exec->lock);
  free(c);
  grt__gblocks_release(exec->device, batch);
  return st;
}

/* A blocking stream (not GRT_STREAM_NON_BLOCKING) is a member of c. */
static bool has_blocking_member(const grt__capture *c) {
  for (uint32_t i = 0; i < c->n_members; i++)
    if (!(c->members[i]->flags & GRT_STREAM_NON_BLOCKING)) return true;
  return false;
}

/* True while a capture has a blocking member: the legacy stream is then
 * unusable (lock held). */
static bool legacy_blocked(grt_exec *exec) {
  for (const grt__capture *c = exec->captures; c; c = c->next)
    if (has_blocking_member(c)) return true;
  return false;
}

/* cudaStreamIsCapturing: asked of the legacy stream while a blocking stream
 * captures it fails with cudaErrorStreamCaptureImplicit (the status left
 * unwritten) and, unlike other uses of it, does not invalidate the capture. */
grt_status grt_stream_capture_status(grt_stream *s, grt_capture_status *out) {
  if (!out) return GRT_ERR_INVALID_ARG;
  grt_status st = grt__stream_check(s);
  if (st) return st;
  pthread_mutex_lock(&s->exec->lock);
  if (s->destroyed) st = GRT_ERR_INVALID_HANDLE;
  else if (s == s->exec->legacy && legacy_blocked(s->exec)) st = GRT_ERR_CAPTURE_IMPLICIT;
  else *out = !s->cap ? GRT_CAPTURE_STATUS_NONE : s->cap->invalid ? GRT_CAPTURE_STATUS_INVALIDATED
                                                                    : GRT_CAPTURE_STATUS_ACTIVE;
  pthread_mutex_unlock(&s->exec->lock);
  return st;
}

/* s's frontier becomes node idx, just appended after it. */
static grt_status advance_front(grt_stream *s, uint32_t idx) {
  s->cap_front.n = 0;
  if (grt__graph_idx_push(&s->cap_front, idx)) return GRT_OK;
  invalidate(s->cap); /* the frontier is lost: the graph can't be trusted */
  return GRT_ERR_NOMEM;
}

/* Appends a node after s's frontier; s's frontier becomes that node. */
static grt_status capture_node(grt_stream *s, const grt__op *proto) {
  grt__capture *c = s->cap;
  uint32_t idx;
  if (!grt__graph_add_node(c->graph, proto, &s->cap_front, &idx)) return GRT_ERR_NOMEM;
  return advance_front(s, idx);
}

grt_status grt__graph_capture_submit(grt__op *op) {
  grt_stream *s = op->stream;
  grt_exec *exec = s->exec;
  grt__capture *c = s->cap;
  grt_status st = GRT_OK;
  if (c->invalid) st = GRT_ERR_CAPTURE_INVALIDATED;
  else if (op->kind == GRT__OP_CALLBACK) {
    invalidate(c); /* cudaStreamAddCallback is not supported in stream capture */
    st = GRT_ERR_CAPTURE_UNSUPPORTED;
  } else if (op->kind == GRT__OP_UEV_SIGNAL || op->kind == GRT__OP_UEV_WAIT || op->kind == GRT__OP_GRAPH) {
    invalidate(c); /* blocking user events and graph launches are not capturable */
    st = GRT_ERR_CAPTURE_UNSUPPORTED;
  } else {
    st = capture_node(s, op);
  }
  grt__op_free(exec, op); /* a launch op releases its refs here */
  return st;
}

/* Legacy-stream use while a blocking stream captures: CUDA would make the
 * capturing stream wait on (or be waited on by) the legacy stream, so it
 * fails with cudaErrorStreamCaptureImplicit and invalidates the capture. */
grt_status grt__graph_legacy_check(grt_exec *exec, grt_stream *s) {
  if (s != exec->legacy || !exec->captures) return GRT_OK;
  grt_status st = GRT_OK;
  for (grt__capture *c = exec->captures; c; c = c->next)
    if (has_blocking_member(c)) {
      invalidate(c);
      st = GRT_ERR_CAPTURE_IMPLICIT;
    }
  return st;
}

grt_status grt__graph_capture_record(grt_event *ev, grt_stream *s) {
  grt__capture *c = s->cap;
  if (c->invalid) return GRT_ERR_CAPTURE_INVALIDATED;
  if (!grt__graph_idx_copy(&ev->cap_nodes, &s->cap_front)) return GRT_ERR_NOMEM;
  ev->cap = c;
  return GRT_OK;
}

grt_status grt__graph_capture_wait(grt_stream *s, grt_event *ev) {
  grt_exec *exec = s->exec;
  grt__capture *c = ev->cap, *sc = s->cap;
  if (!c) { /* s captures; ev was recorded outside: only "never recorded" is harmless */
    if (!ev->stream) return GRT_OK;
    invalidate(sc);
    return GRT_ERR_CAPTURE_ISOLATION;
  }
  if (sc && sc != c) { /* would merge two captures */
    invalidate(sc);
    invalidate(c);
    return GRT_ERR_CAPTURE_MERGE;
  }
  if (c->invalid) return GRT_ERR_CAPTURE_INVALIDATED;
  if (!sc) { /* fork: s joins the capture */
    if (s->destroyed) return GRT_ERR_INVALID_HANDLE;
    if (s == exec->legacy) { /* the legacy stream would depend on the capture */
      invalidate(c);
      return GRT_ERR_CAPTURE_IMPLICIT;
    }
    if (!add_member(c, s)) return GRT_ERR_NOMEM;
    if (!grt__graph_idx_copy(&s->cap_front, &ev->cap_nodes)) return GRT_ERR_NOMEM;
    return GRT_OK;
  }
  for (uint32_t i = 0; i < ev->cap_nodes.n; i++)
    if (!grt__graph_idx_push(&s->cap_front, ev->cap_nodes.v[i])) return GRT_ERR_NOMEM;
  return GRT_OK;
}

/* cudaEventWaitExternal: an event wait node after s's frontier, bound to
 * ev's record when the graph is launched (graph_exec.c), not an edge: ev may
 * be recorded outside the capture. A captured event's record is a frontier
 * in a capture, nothing a launch could wait for. */
grt_status grt__graph_capture_wait_external(grt_stream *s, grt_event *ev) {
  grt__capture *c = s->cap;
  if (c->invalid) return GRT_ERR_CAPTURE_INVALIDATED;
  if (ev->cap) {
    invalidate(c);
    return GRT_ERR_CAPTURED_EVENT;
  }
  grt__op proto;
  memset(&proto, 0, sizeof proto);
  proto.stream = s;
  proto.kind = GRT__OP_WAIT;
  proto.engine = GRT__ENGINE_NONE;
  proto.u.rec.event = ev;
  snprintf(proto.name, sizeof proto.name, "wait %s", ev->name);
  uint32_t idx;
  if (!grt__graph_add_node_deps(c->graph, &proto, GRT_GRAPH_NODE_WAIT_EVENT, s->cap_front.v, s->cap_front.n, &idx))
    return GRT_ERR_NOMEM;
  return advance_front(s, idx);
}

void grt__graph_invalidate(grt__capture *c) { invalidate(c); }

grt_status grt__graph_device_sync_check(grt_exec *exec) {
  if (!exec->captures) return GRT_OK;
  for (grt__capture *c = exec->captures; c; c = c->next) invalidate(c);
  return GRT_ERR_CAPTURE_UNSUPPORTED; /* in every mode: CUDA has no safe device-wide sync */
}

/* ---- synchronous device calls (cudaMalloc / cudaFree) ------------------------ */

/* "Potentially unsafe" calls: the capture modes' rule (capture_mode.c). */
static grt_status unsafe_call_check(grt_exec *exec) {
  pthread_mutex_lock(&exec->lock);
  grt_status st = grt__capture_unsafe_check(exec);
  if (!st) st = exec->error;
  pthread_mutex_unlock(&exec->lock);
  return st;
}

grt_status grt_exec_device_malloc(grt_exec *exec, uint64_t size, grt_devptr *out) {
  if (!exec || exec->magic != GRT__EXEC_MAGIC || !out) return GRT_ERR_INVALID_ARG;
  grt_status st = unsafe_call_check(exec);
  return st ? st : grt_device_malloc(exec->device, size, out);
}

grt_status grt_exec_device_free(grt_exec *exec, grt_devptr ptr) {
  if (!exec || exec->magic != GRT__EXEC_MAGIC) return GRT_ERR_INVALID_ARG;
  grt_status st = unsafe_call_check(exec);
  bool graph_memory = false;
  if (!st) st = grt__graph_mem_free_now(exec, ptr, &graph_memory);
  return st || graph_memory ? st : grt_device_free(exec->device, ptr);
}
