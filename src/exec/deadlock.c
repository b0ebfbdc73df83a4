/* deadlock.c — finds wait-for cycles once the exec is quiescent.
 *
 * Called (lock held) only when nothing is running except host functions
 * blocked in grt_user_event_wait and nothing ready can start. Then no state
 * changes without a host action, and a cycle in the wait-for graph is a
 * deadlock no host action can break (the host is assumed not to signal user
 * events that queued stream work is meant to signal). Nodes are streams; an
 * edge S -> T means S's head cannot proceed until T makes progress:
 *   - an unsatisfied dep (event snapshot or legacy barrier) on T;
 *   - a user-event wait (stream op, or a host function blocked in its body)
 *     whose value will be raised by a signal queued on T;
 *   - a ready op whose engine's slots are all held by blocked ops of T.
 * Plain events can never close a cycle (waits point at earlier-issued work), so
 * every cycle found goes through a user event or a blocked host function.
 */
#include <stdlib.h>
#include <string.h>

#include "exec/exec_impl.h"

enum { E_EVENT, E_LEGACY, E_UEV, E_HOSTFN, E_SLOT };

typedef struct edge {
  size_t from, to;
  int kind;
  const char *what; /* event or user event name */
  uint64_t value;
} edge;

typedef struct signal_ref {
  grt_user_event *u;
  uint64_t value;
  size_t node;
} signal_ref;

typedef struct graph {
  grt_stream **nodes;
  size_t n;
  grt__u64map index; /* stream pointer -> node + 1 */
  edge *edges;
  size_t n_edges, cap_edges;
  size_t *first; /* edges of node i: [first[i], first[i+1]) */
  signal_ref *sigs;
  size_t n_sigs;
  bool host_edge; /* some wait can only be released by the host */
} graph;

static size_t node_of(graph *g, grt_stream *s) { return (size_t)(uintptr_t)grt__u64map_get(&g->index, (uint64_t)(uintptr_t)s) - 1; }

static bool add_edge(graph *g, size_t from, size_t to, int kind, const char *what, uint64_t value) {
  if (g->n_edges == g->cap_edges) {
    size_t cap = g->cap_edges ? 2 * g->cap_edges : 32;
    edge *e = realloc(g->edges, cap * sizeof *e);
    if (!e) return false;
    g->edges = e;
    g->cap_edges = cap;
  }
  g->edges[g->n_edges++] = (edge){from, to, kind, what, value};
  return true;
}

static bool uev_edges(graph *g, size_t from, int kind, grt_user_event *u, uint64_t v) {
  bool any = false;
  for (size_t i = 0; i < g->n_sigs; i++)
    if (g->sigs[i].u == u && g->sigs[i].value >= v) {
      any = true;
      if (!add_edge(g, from, g->sigs[i].node, kind, u->name, v)) return false;
    }
  if (!any) g->host_edge = true;
  return true;
}

static bool stream_edges(grt_exec *exec, graph *g, size_t i) {
  grt_stream *s = g->nodes[i];
  grt__op *h = s->head;
  if (!h) return true;
  if (h->state == GRT__RUNNING) /* a blocked host function whose value came is about to wake */
    return !h->blocked || h->wait_uev->value >= h->wait_value || uev_edges(g, i, E_HOSTFN, h->wait_uev, h->wait_value);
  if (h->state == GRT__READY) { /* its engine is full of blocked ops */
    for (size_t j = 0; j < g->n; j++) {
      grt__op *o = g->nodes[j]->head;
      if (o && o->state == GRT__RUNNING && o->engine == h->engine && o->blocked &&
          !add_edge(g, i, j, E_SLOT, "", 0))
        return false;
    }
    return true;
  }
  bool deps_pending = false;
  for (uint32_t d = h->next_dep; d < h->ndeps; d++) {
    grt__dep *dep = &h->deps[d];
    if (grt__done(dep->stream) >= dep->seq) continue;
    deps_pending = true;
    if (!add_edge(g, i, node_of(g, dep->stream), dep->event ? E_EVENT : E_LEGACY,
                  dep->event ? dep->event->name : "", 0))
      return false;
  }
  (void)exec;
  if (!deps_pending && h->kind == GRT__OP_UEV_WAIT && h->u.uev.uev->value < h->u.uev.value)
    return uev_edges(g, i, E_UEV, h->u.uev.uev, h->u.uev.value);
  return true;
}

static void graph_free(graph *g) {
  free(g->nodes);
  free(g->edges);
  free(g->first);
  free(g->sigs);
  grt__u64map_free(&g->index);
}

static bool graph_build(grt_exec *exec, graph *g) {
  memset(g, 0, sizeof *g);
  grt__u64map_init(&g->index);
  size_t n = 0, n_sigs = 0;
  for (grt_stream *s = exec->streams; s; s = s->all_next) {
    n++;
    for (grt__op *op = s->head; op; op = op->next) n_sigs += op->kind == GRT__OP_UEV_SIGNAL;
  }
  g->nodes = malloc(n * sizeof *g->nodes);
  g->first = malloc((n + 1) * sizeof *g->first);
  g->sigs = malloc((n_sigs + 1) * sizeof *g->sigs);
  if (!g->nodes || !g->first || !g->sigs) return false;
  for (grt_stream *s = exec->streams; s; s = s->all_next) {
    if (!grt__u64map_put(&g->index, (uint64_t)(uintptr_t)s, (void *)(uintptr_t)(g->n + 1))) return false;
    for (grt__op *op = s->head; op; op = op->next)
      if (op->kind == GRT__OP_UEV_SIGNAL) g->sigs[g->n_sigs++] = (signal_ref){op->u.uev.uev, op->u.uev.value, g->n};
    g->nodes[g->n++] = s;
  }
  for (size_t i = 0; i < g->n; i++) {
    g->first[i] = g->n_edges;
    if (!stream_edges(exec, g, i)) return false;
  }
  g->first[g->n] = g->n_edges;
  return true;
}

static void describe_edge(const graph *g, const edge *e, char *buf, size_t n) {
  const char *a = g->nodes[e->from]->name, *b = g->nodes[e->to]->name;
  switch (e->kind) {
    case E_EVENT:
      snprintf(buf, n, "stream '%s' waits for event '%s' recorded on stream '%s'", a, e->what, b);
      break;
    case E_LEGACY:
      snprintf(buf, n, "stream '%s' waits for stream '%s' (legacy default stream synchronization)", a, b);
      break;
    case E_UEV:
      snprintf(buf, n, "stream '%s' waits for user event '%s' >= %llu, signalled by queued work on stream '%s'", a,
               e->what, (unsigned long long)e->value, b);
      break;
    case E_HOSTFN:
      snprintf(buf, n,
               "a host function on stream '%s' waits for user event '%s' >= %llu, signalled only by later work on "
               "stream '%s'",
               a, e->what, (unsigned long long)e->value, b);
      break;
    default:
      snprintf(buf, n, "stream '%s' waits for a host-function slot held by stream '%s'", a, b);
      break;
  }
}

/* Iterative DFS; on a back edge writes the cycle into msg. */
static bool find_cycle(const graph *g, char *msg, size_t msg_size) {
  unsigned char *color = calloc(g->n ? g->n : 1, 1); /* 0 white, 1 on stack, 2 done */
  size_t *stack = malloc((g->n ? g->n : 1) * sizeof *stack), *cursor = malloc((g->n ? g->n : 1) * sizeof *cursor);
  bool found = false;
  if (!color || !stack || !cursor) goto out;
  for (size_t root = 0; root < g->n && !found; root++) {
    if (color[root]) continue;
    size_t depth = 0;
    stack[depth] = root;
    cursor[depth++] = g->first[root];
    color[root] = 1;
    while (depth && !found) {
      size_t u = stack[depth - 1];
      if (cursor[depth - 1] == g->first[u + 1]) {
        color[u] = 2;
        depth--;
        continue;
      }
      const edge *e = &g->edges[cursor[depth - 1]++];
      if (color[e->to] == 0) {
        color[e->to] = 1;
        stack[depth] = e->to;
        cursor[depth++] = g->first[e->to];
      } else if (color[e->to] == 1) {
        size_t start = 0;
        while (stack[start] != e->to) start++;
        size_t len = depth - start;
        int off = snprintf(msg, msg_size, "deadlock: a cycle of %zu wait%s: ", len, len == 1 ? "" : "s");
        for (size_t k = start; k < depth && off >= 0 && (size_t)off < msg_size; k++) {
          const edge *ek = &g->edges[cursor[k] - 1]; /* the edge taken out of stack[k] */
          char line[300];
          describe_edge(g, ek, line, sizeof line);
          off += snprintf(msg + off, msg_size - (size_t)off, "%s%s", k > start ? "; " : "", line);
        }
        if (off >= 0 && (size_t)off < msg_size) {
          off += snprintf(msg + off, msg_size - (size_t)off, " [cycle:");
          for (size_t k = start; k < depth && (size_t)off < msg_size; k++)
            off += snprintf(msg + off, msg_size - (size_t)off, " %s ->", g->nodes[stack[k]]->name);
          if ((size_t)off < msg_size) snprintf(msg + off, msg_size - (size_t)off, " %s]", g->nodes[e->to]->name);
        }
        found = true;
      }
    }
  }
out:
  free(color);
  free(stack);
  free(cursor);
  return found;
}

bool grt__detect_deadlock(grt_exec *exec) {
  if (exec->error) return true;
  graph g;
  char msg[sizeof exec->error_msg];
  bool found = false;
  if (graph_build(exec, &g)) found = find_cycle(&g, msg, sizeof msg);
  graph_free(&g);
  if (found) grt__trace_deadlock(exec), grt__set_error(exec, GRT_ERR_DEADLOCK, msg); /* before its ops are cancelled */
  return found;
}

/* Appends to buf (at *off) what a stall holds: host threads waiting for user
 * events, and stream heads (ops or blocked host functions) waiting for them. */
static void describe_waits(grt_exec *exec, char *buf, size_t n, int *off) {
  for (const grt__waiter *w = exec->host_waits; w && *off >= 0 && (size_t)*off < n; w = w->next)
    if (w->uev && w->uev->value < w->value)
      *off += snprintf(buf + *off, n - (size_t)*off, "; a host thread waits for user event '%s' >= %llu (value %llu)",
                       w->uev->name, (unsigned long long)w->value, (unsigned long long)w->uev->value);
  for (grt_stream *s = exec->streams; s && *off >= 0 && (size_t)*off < n; s = s->all_next) {
    grt__op *h = s->head;
    if (!h) continue;
    grt_user_event *u = h->blocked ? h->wait_uev : h->kind == GRT__OP_UEV_WAIT ? h->u.uev.uev : NULL;
    uint64_t v = h->blocked ? h->wait_value : h->u.uev.value;
    if (!u || u->value >= v) continue;
    *off += snprintf(buf + *off, n - (size_t)*off, "; %s on stream '%s' waits for user event '%s' >= %llu",
                     h->blocked ? "a host function" : "work", s->name, u->name, (unsigned long long)v);
  }
}

void grt__describe_host_stall(grt_exec *exec, char *buf, size_t n) {
  int off = exec->cfg.clock == GRT_CLOCK_VIRTUAL
                ? snprintf(buf, n,
                           "deadlock: the host thread driving the virtual clock waits for work that only a host "
                           "signal can release")
                : snprintf(buf, n,
                           "deadlock: every host thread (host_threads = %u) waits in the exec, and only a host "
                           "signal could release one",
                           exec->cfg.host_threads);
  describe_waits(exec, buf, n, &off);
  if (exec->pending_ops == 0 && off >= 0 && (size_t)off < n)
    snprintf(buf + off, n - (size_t)off, "; no work is pending: nothing will signal it");
}

/* Nothing runs but host functions blocked in grt_user_event_wait (the caller
 * checked quiescence, or that no work is pending), so only a host action
 * could change anything; when
 * every host thread there is waits here and no wait, host function's
 * included, has what it waits for, none ever will. */
bool grt__detect_host_stall(grt_exec *exec) {
  unsigned want = exec->cfg.host_threads;
  if (!want || exec->n_host_waits < want) return false;
  for (const grt__waiter *w = exec->host_waits; w; w = w->next)
    if (w->cond(exec, w->ctx)) return false; /* woken, not yet running */
  for (grt_stream *s = exec->streams; s; s = s->all_next)
    if (s->head && s->head->blocked && s->head->wait_uev->value >= s->head->wait_value) return false;
  char msg[sizeof exec->error_msg];
  grt__describe_host_stall(exec, msg, sizeof msg);
  grt__trace_deadlock(exec);
  grt__set_error(exec, GRT_ERR_DEADLOCK, msg);
  return true;
}
