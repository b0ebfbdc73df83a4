/* graph_edit.c — explicit graph construction: cudaGraphCreate, the
 * cudaGraphAdd*Node calls, cudaGraphAddDependencies /
 * cudaGraphRemoveDependencies, cudaGraphDestroyNode, cudaGraphGetNodes and
 * cudaGraphNodeGetType (CUDA Runtime API, Graph Management; docs/EXEC.md,
 * "Graphs"), on any graph, captured or built by hand.
 *
 * Node handles (grt_graph_node) come from per-exec slabs, made on first use
 * (a captured node gets one only when asked for), and outlive their node: a
 * destroyed node's or graph's handle stays, a zombie, until the exec goes,
 * so a stale handle reads GRT_ERR_INVALID_HANDLE (CUDA leaves it undefined).
 *
 * CUDA's rules kept here: dependencies name nodes of the same graph, without
 * duplicates; an edge added twice or removed while absent is an error; the
 * edges form a DAG (an edge that would close a cycle is refused with
 * GRT_ERR_GRAPH_CYCLE: CUDA's instantiate validates the structure, here the
 * edge itself is refused); a child graph node runs a clone of its graph
 * taken by the call, and a graph with memory nodes cannot be one, nor lose
 * nodes or edges. Every call checks everything and reserves what it may need
 * before its first change, so a failed call changes nothing.
 */
#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "exec/graph_impl.h"

#define HANDLES_PER_SLAB 64

typedef struct grt__hslab {
  struct grt__hslab *next;
  grt_graph_node h[HANDLES_PER_SLAB];
} grt__hslab;

/* ---- handles ------------------------------------------------------------------- */

bool grt__graph_handles_reserve(grt_exec *exec, uint32_t n) {
  while (exec->n_hfree < n) {
    grt__hslab *sl = calloc(1, sizeof *sl);
    if (!sl) return false;
    sl->next = exec->hslabs;
    exec->hslabs = sl;
    for (int i = HANDLES_PER_SLAB - 1; i >= 0; i--) {
      sl->h[i].next = exec->hfree;
      exec->hfree = &sl->h[i];
    }
    exec->n_hfree += HANDLES_PER_SLAB;
  }
  return true;
}

grt_graph_node *grt__graph_handle(grt_graph *g, uint32_t i) {
  grt__gnode *nd = &g->nodes[i];
  if (nd->h) return nd->h;
  grt_exec *exec = g->exec;
  grt_graph_node *h = exec->hfree;
  assert(h); /* reserved by the caller */
  exec->hfree = h->next;
  exec->n_hfree--;
  *h = (grt_graph_node){GRT__GNODE_MAGIC, false, i, g, NULL};
  nd->h = h;
  return h;
}

void grt__graph_handles_free(grt_exec *exec) {
  for (grt__hslab *sl = exec->hslabs, *n; sl; sl = n) {
    n = sl->next;
    free(sl);
  }
  exec->hslabs = NULL;
  exec->hfree = NULL;
  exec->n_hfree = 0;
}

/* A live node of g (lock held). */
static grt_status node_check(const grt_graph *g, const grt_graph_node *h) {
  if (!h || h->magic != GRT__GNODE_MAGIC) return GRT_ERR_INVALID_ARG;
  if (h->graph != g) return h->graph->exec != g->exec ? GRT_ERR_WRONG_DEVICE : GRT_ERR_INVALID_ARG;
  return h->destroyed ? GRT_ERR_INVALID_HANDLE : GRT_OK;
}

/* Locks h's exec when h names a live node. */
static grt_status node_lock(grt_graph_node *h) {
  if (!h || h->magic != GRT__GNODE_MAGIC) return GRT_ERR_INVALID_ARG;
  pthread_mutex_lock(&h->graph->exec->lock);
  if (!h->destroyed) return GRT_OK;
  pthread_mutex_unlock(&h->graph->exec->lock);
  return GRT_ERR_INVALID_HANDLE;
}

/* ---- graphs ------------------------------------------------------------------------ */

grt_status grt_graph_create(grt_exec *exec, grt_graph **out) {
  if (!exec || exec->magic != GRT__EXEC_MAGIC || !out) return GRT_ERR_INVALID_ARG;
  grt_graph *g = grt__graph_new(exec);
  if (!g) return GRT_ERR_NOMEM;
  pthread_mutex_lock(&exec->lock);
  g->all_next = exec->graphs;
  exec->graphs = g;
  exec->live_graphs++;
  pthread_mutex_unlock(&exec->lock);
  *out = g;
  return GRT_OK;
}

grt_graph *grt__graph_clone(const grt_graph *src) {
  grt_graph *g = grt__graph_new(src->exec);
  if (!g) return NULL;
  g->magic = 0;
  memcpy(g->name, src->name, sizeof g->name);
  for (uint32_t i = 0; i < src->n; i++) {
    const grt__gnode *nd = &src->nodes[i];
    uint32_t idx;
    grt_graph *child = nd->child ? grt__graph_clone(nd->child) : NULL;
    if ((nd->child && !child) || !grt__graph_add_node_deps(g, &nd->proto, nd->type, nd->deps, nd->ndeps, &idx)) {
      if (child) grt__graph_free_nodes(child, NULL);
      free(child);
      grt__graph_free_nodes(g, NULL);
      free(g);
      return NULL;
    }
    g->nodes[idx].child = child;
  }
  return g;
}

static void clone_free(grt_graph *g) {
  if (!g) return;
  grt__graph_free_nodes(g, NULL);
  free(g);
}

grt_status grt_graph_get_nodes(grt_graph *g, grt_graph_node **nodes, size_t *n) {
  if (!n) return GRT_ERR_INVALID_ARG;
  grt_status st = grt__graph_lock(g);
  if (st) return st;
  size_t k = nodes && *n < g->n ? *n : g->n;
  if (nodes && !grt__graph_handles_reserve(g->exec, (uint32_t)k)) st = GRT_ERR_NOMEM;
  for (size_t i = 0; !st && nodes && i < *n; i++) nodes[i] = i < k ? grt__graph_handle(g, (uint32_t)i) : NULL;
  if (!st) *n = k;
  pthread_mutex_unlock(&g->exec->lock);
  return st;
}

grt_status grt_graph_node_get_type(grt_graph_node *node, grt_graph_node_type *out) {
  if (!out) return GRT_ERR_INVALID_ARG;
  grt_status st = node_lock(node);
  if (st) return st;
  *out = (grt_graph_node_type)node->graph->nodes[node->idx].type;
  pthread_mutex_unlock(&node->graph->exec->lock);
  return GRT_OK;
}

/* ---- adding nodes ------------------------------------------------------------------ */

/* What a node adds beside its op. */
typedef struct node_spec {
  grt__op proto;
  uint8_t type;
  grt_event *event;   /* event nodes */
  grt_graph *child;   /* child graph nodes: cloned under the lock */
  grt_devptr ptr;     /* memory nodes: the address allocated or freed */
  uint64_t size;      /* allocation nodes */
} node_spec;

static void spec_init(node_spec *sp, uint8_t type, uint8_t kind, uint8_t engine, const char *name) {
  memset(sp, 0, sizeof *sp);
  sp->type = type;
  sp->proto.kind = kind;
  sp->proto.engine = engine;
  if (name) snprintf(sp->proto.name, sizeof sp->proto.name, "%s", name);
}

/* Dependencies: live nodes of g, no duplicates (CUDA). */
static grt_status deps_check(const grt_graph *g, grt_graph_node *const *deps, size_t n) {
  if (n && !deps) return GRT_ERR_INVALID_ARG;
  if (n > UINT32_MAX) return GRT_ERR_SIZE;
  for (size_t i = 0; i < n; i++) {
    grt_status st = node_check(g, deps[i]);
    if (st) return st;
    for (size_t j = 0; j < i; j++)
      if (deps[j] == deps[i]) return GRT_ERR_INVALID_ARG;
  }
  return GRT_OK;
}

/* What the node refers to, checked under the lock. */
static grt_status spec_check(const grt_graph *g, const node_spec *sp) {
  if (sp->event && sp->event->exec != g->exec) return GRT_ERR_WRONG_DEVICE;
  if (sp->event && sp->event->destroyed) return GRT_ERR_INVALID_HANDLE;
  if (sp->child && sp->child->exec != g->exec) return GRT_ERR_WRONG_DEVICE;
  if (sp->child && sp->child->destroyed) return GRT_ERR_INVALID_HANDLE;
  if (sp->child && sp->child->n_mem) return GRT_ERR_NOT_PERMITTED; /* CUDA: such a graph cannot be a child */
  if (sp->type == GRT_GRAPH_NODE_MEM_FREE)
    return grt__graph_mem_free_check(g, grt__u64map_get(&g->exec->gallocs, sp->ptr));
  return GRT_OK;
}

/* Appends the checked node (lock held): the last step, so nothing fails after it. */
static grt_status append(grt_graph *g, grt_graph_node *const *deps, uint32_t n, node_spec *sp, grt_graph *clone,
                         grt_graph_node **out) {
  uint32_t stackbuf[16], *ix = n <= 16 ? stackbuf : malloc(n * sizeof *ix);
  grt__gblock *b = NULL;
  grt_status st = !ix || !grt__graph_handles_reserve(g->exec, 1) ? GRT_ERR_NOMEM : GRT_OK;
  if (!st && sp->type == GRT_GRAPH_NODE_MEM_ALLOC) st = grt__gblock_new(g->exec, g, sp->ptr, sp->size, &b);
  for (uint32_t i = 0; !st && i < n; i++) ix[i] = deps[i]->idx;
  uint32_t idx;
  if (!st && !grt__graph_add_node_deps(g, &sp->proto, sp->type, ix, n, &idx)) st = GRT_ERR_NOMEM;
  if (ix != stackbuf) free(ix);
  if (st) {
    if (b) { /* made just above: nothing else knows it */
      grt__u64map_del(&g->exec->gallocs, b->ptr);
      free(b);
    }
    return st;
  }
  grt__gnode *nd = &g->nodes[idx];
  nd->child = clone;
  if (sp->type == GRT_GRAPH_NODE_MEM_FREE) {
    b = grt__u64map_get(&g->exec->gallocs, sp->ptr);
    grt__graph_mem_freed_by(g, b);
    nd->proto.u.mem.bytes = b->size;
  }
  nd->block = b;
  g->n_mem += b != NULL;
  *out = grt__graph_handle(g, idx);
  return GRT_OK;
}

static grt_status add_node(grt_graph *g, grt_graph_node *const *deps, size_t n, node_spec *sp, grt_graph_node **out) {
  grt_status st = grt__graph_lock(g);
  if (st) return st;
  grt_graph *clone = NULL;
  if (!(st = deps_check(g, deps, n)) && !(st = spec_check(g, sp)) && sp->child &&
      !(clone = grt__graph_clone(sp->child)))
    st = GRT_ERR_NOMEM;
  if (!st) st = append(g, deps, (uint32_t)n, sp, clone, out);
  if (st) clone_free(clone);
  pthread_mutex_unlock(&g->exec->lock);
  return st;
}

static bool graph_ok(const grt_graph *g) { return g && g->magic == GRT__GRAPH_MAGIC; }

static grt_status add_kernel(grt_graph *g, grt_graph_node *const *deps, size_t n_deps, const grt_kernel_desc *desc,
                             const grt_kernel_op *kop, grt_graph_node **out);

grt_status grt_graph_add_kernel_node(grt_graph *g, grt_graph_node *const *deps, size_t n_deps,
                                     const grt_kernel_desc *desc, grt_graph_node **out) {
  return add_kernel(g, deps, n_deps, desc, NULL, out);
}

grt_status grt_graph_add_kernel_op_node(grt_graph *g, grt_graph_node *const *deps, size_t n_deps,
                                        const grt_kernel_desc *desc, const grt_kernel_op *kop, grt_graph_node **out) {
  return kop ? add_kernel(g, deps, n_deps, desc, kop, out) : GRT_ERR_INVALID_ARG;
}

static grt_status add_kernel(grt_graph *g, grt_graph_node *const *deps, size_t n_deps, const grt_kernel_desc *desc,
                             const grt_kernel_op *kop, grt_graph_node **out) {
  if (!out || !desc || (desc->engine != GRT_ENGINE_COMPUTE && desc->engine != GRT_ENGINE_COPY_H2D &&
                        desc->engine != GRT_ENGINE_COPY_D2H))
    return GRT_ERR_INVALID_ARG;
  grt__kop *k = NULL;
  grt_status st = kop && graph_ok(g) ? grt__kop_from_desc(g->exec->device, desc, kop, &k) : GRT_OK;
  if (st) return st;
  node_spec sp;
  spec_init(&sp, GRT_GRAPH_NODE_KERNEL, GRT__OP_KERNEL, (uint8_t)desc->engine, desc->name);
  sp.proto.duration_ns = desc->duration_ns;
  sp.proto.u.call.fn = k ? grt__kop_run : desc->fn;
  sp.proto.u.call.arg = k ? (void *)k : desc->arg;
  st = add_node(g, deps, n_deps, &sp, out); /* the node keeps its own copy */
  free(k);
  return st;
}

grt_status grt_graph_add_host_node(grt_graph *g, grt_graph_node *const *deps, size_t n_deps, grt_host_fn fn,
                                   void *arg, grt_graph_node **out) {
  if (!out || !fn) return GRT_ERR_INVALID_ARG;
  node_spec sp;
  spec_init(&sp, GRT_GRAPH_NODE_HOST, GRT__OP_HOST_FUNC, GRT_ENGINE_HOST, NULL);
  sp.proto.u.call.fn = fn;
  sp.proto.u.call.arg = arg;
  return add_node(g, deps, n_deps, &sp, out);
}

grt_status grt_graph_add_empty_node(grt_graph *g, grt_graph_node *const *deps, size_t n_deps,
                                    grt_graph_node **out) {
  if (!out) return GRT_ERR_INVALID_ARG;
  node_spec sp;
  spec_init(&sp, GRT_GRAPH_NODE_EMPTY, GRT__OP_KERNEL, GRT__ENGINE_NONE, "empty");
  return add_node(g, deps, n_deps, &sp, out);
}

/* [p, p+n) in a live segment of g's device (outside the exec lock). */
static grt_status check_range(const grt_graph *g, grt_devptr p, uint64_t n) {
  void *h;
  grt_status st = grt_device_host_ptr(g->exec->device, p, n, &h);
  return st == GRT_ERR_INVALID_ARG ? GRT_ERR_UNKNOWN_POINTER : st;
}

grt_status grt_graph_add_memcpy_node(grt_graph *g, grt_graph_node *const *deps, size_t n_deps,
                                     const grt_memcpy_desc *desc, grt_graph_node **out) {
  if (!out || !desc || !graph_ok(g)) return GRT_ERR_INVALID_ARG;
  static const uint8_t kinds[] = {GRT__OP_H2D, GRT__OP_D2H, GRT__OP_D2D};
  static const uint8_t engines[] = {GRT_ENGINE_COPY_H2D, GRT_ENGINE_COPY_D2H, GRT_ENGINE_COMPUTE};
  if ((unsigned)desc->kind > GRT_MEMCPY_D2D || (desc->kind != GRT_MEMCPY_D2D && !desc->host))
    return GRT_ERR_INVALID_ARG;
  grt_devptr dev = desc->kind == GRT_MEMCPY_D2H ? desc->src : desc->dst;
  grt_status st = GRT_OK;
  if (desc->bytes && (st = check_range(g, dev, desc->bytes))) return st;
  if (desc->bytes && desc->kind == GRT_MEMCPY_D2D && (st = check_range(g, desc->src, desc->bytes))) return st;
  node_spec sp;
  spec_init(&sp, GRT_GRAPH_NODE_MEMCPY, kinds[desc->kind], engines[desc->kind], NULL);
  sp.proto.duration_ns = grt__copy_ns(&g->exec->cfg, engines[desc->kind], desc->bytes);
  sp.proto.u.mem.dev = dev;
  sp.proto.u.mem.dev2 = desc->kind == GRT_MEMCPY_D2D ? desc->src : 0;
  sp.proto.u.mem.host = desc->host;
  sp.proto.u.mem.bytes = desc->bytes;
  return add_node(g, deps, n_deps, &sp, out);
}

grt_status grt_graph_add_memset_node(grt_graph *g, grt_graph_node *const *deps, size_t n_deps, grt_devptr dst,
                                     int value, uint64_t bytes, grt_graph_node **out) {
  if (!out || !graph_ok(g)) return GRT_ERR_INVALID_ARG;
  grt_status st = bytes ? check_range(g, dst, bytes) : GRT_OK;
  if (st) return st;
  node_spec sp;
  spec_init(&sp, GRT_GRAPH_NODE_MEMSET, GRT__OP_MEMSET, GRT_ENGINE_COMPUTE, NULL);
  sp.proto.duration_ns = grt__copy_ns(&g->exec->cfg, GRT_ENGINE_COMPUTE, bytes);
  sp.proto.u.mem.dev = dst;
  sp.proto.u.mem.value = value;
  sp.proto.u.mem.bytes = bytes;
  return add_node(g, deps, n_deps, &sp, out);
}

static grt_status add_event_node(grt_graph *g, grt_graph_node *const *deps, size_t n_deps, grt_event *ev,
                                 bool record, grt_graph_node **out) {
  if (!out || !ev || ev->magic != GRT__EVENT_MAGIC) return GRT_ERR_INVALID_ARG;
  node_spec sp;
  spec_init(&sp, record ? GRT_GRAPH_NODE_EVENT_RECORD : GRT_GRAPH_NODE_WAIT_EVENT,
            record ? GRT__OP_RECORD : GRT__OP_WAIT, GRT__ENGINE_NONE, NULL);
  sp.event = ev;
  sp.proto.u.rec.event = ev;
  return add_node(g, deps, n_deps, &sp, out);
}

grt_status grt_graph_add_event_record_node(grt_graph *g, grt_graph_node *const *deps, size_t n_deps, grt_event *ev,
                                           grt_graph_node **out) {
  return add_event_node(g, deps, n_deps, ev, true, out);
}

grt_status grt_graph_add_event_wait_node(grt_graph *g, grt_graph_node *const *deps, size_t n_deps, grt_event *ev,
                                         grt_graph_node **out) {
  return add_event_node(g, deps, n_deps, ev, false, out);
}

grt_status grt_graph_add_child_graph_node(grt_graph *g, grt_graph_node *const *deps, size_t n_deps,
                                          grt_graph *child, grt_graph_node **out) {
  if (!out || !graph_ok(child)) return GRT_ERR_INVALID_ARG;
  node_spec sp;
  spec_init(&sp, GRT_GRAPH_NODE_GRAPH, GRT__OP_KERNEL, GRT__ENGINE_NONE, NULL);
  sp.child = child;
  return add_node(g, deps, n_deps, &sp, out);
}

grt_status grt_graph_add_mem_alloc_node(grt_graph *g, grt_graph_node *const *deps, size_t n_deps, uint64_t size,
                                        grt_devptr *ptr, grt_graph_node **out) {
  if (!out || !ptr || !graph_ok(g)) return GRT_ERR_INVALID_ARG;
  grt_exec *exec = g->exec;
  grt_devptr p;
  grt_status st = grt_device_malloc(exec->device, size, &p); /* outside the exec lock, as the device wants */
  if (st) return st;
  node_spec sp;
  spec_init(&sp, GRT_GRAPH_NODE_MEM_ALLOC, GRT__OP_GALLOC, GRT__ENGINE_NONE, NULL);
  snprintf(sp.proto.name, sizeof sp.proto.name, "graph alloc 0x%llx", (unsigned long long)p);
  sp.proto.u.mem.dev = sp.ptr = p;
  sp.proto.u.mem.bytes = sp.size = size;
  if ((st = add_node(g, deps, n_deps, &sp, out))) {
    grt_status fst = grt_device_free(exec->device, p); /* allocated just above */
    assert(fst == GRT_OK);
    (void)fst;
    return st;
  }
  *ptr = p;
  return GRT_OK;
}

grt_status grt_graph_add_mem_free_node(grt_graph *g, grt_graph_node *const *deps, size_t n_deps, grt_devptr ptr,
                                       grt_graph_node **out) {
  if (!out) return GRT_ERR_INVALID_ARG;
  node_spec sp;
  spec_init(&sp, GRT_GRAPH_NODE_MEM_FREE, GRT__OP_GFREE, GRT__ENGINE_NONE, NULL);
  snprintf(sp.proto.name, sizeof sp.proto.name, "graph free 0x%llx", (unsigned long long)ptr);
  sp.proto.u.mem.dev = sp.ptr = ptr;
  return add_node(g, deps, n_deps, &sp, out);
}

/* ---- edges -------------------------------------------------------------------------- */

static bool has_dep(const grt__gnode *nd, uint32_t d) {
  for (uint32_t k = 0; k < nd->ndeps; k++)
    if (nd->deps[k] == d) return true;
  return false;
}

/* Both ends of each edge live nodes of g; same pair twice in one call: GRT_ERR_INVALID_ARG. */
static grt_status edges_check(const grt_graph *g, grt_graph_node *const *from, grt_graph_node *const *to, size_t n) {
  if (n && (!from || !to)) return GRT_ERR_INVALID_ARG;
  for (size_t i = 0; i < n; i++) {
    grt_status st = node_check(g, from[i]);
    if (st || (st = node_check(g, to[i]))) return st;
    for (size_t j = 0; j < i; j++)
      if (from[j] == from[i] && to[j] == to[i]) return GRT_ERR_INVALID_ARG;
  }
  return GRT_OK;
}

/* Room for every new edge in its node's list: growing it changes nothing else. */
static bool reserve_edges(grt_graph *g, grt_graph_node *const *to, size_t n) {
  for (size_t i = 0; i < n; i++) {
    grt__gnode *nd = &g->nodes[to[i]->idx];
    uint32_t need = nd->ndeps;
    for (size_t j = 0; j < n; j++) need += to[j] == to[i];
    if (need <= nd->cap_deps) continue;
    uint32_t *p = realloc(nd->deps, need * sizeof *p);
    if (!p) return false;
    nd->deps = p;
    nd->cap_deps = need;
  }
  return true;
}

/* Whether `target` is `from` or one of its ancestors: then an edge from ->
 * target closes a cycle. mark (g->n bytes, zeroed) and stack are scratch. */
static bool reaches(const grt_graph *g, uint32_t from, uint32_t target, uint8_t *mark, uint32_t *stack) {
  uint32_t sp = 0;
  bool found = false;
  mark[from] = 1;
  stack[sp++] = from;
  while (sp && !found) {
    const grt__gnode *nd = &g->nodes[stack[--sp]];
    for (uint32_t k = 0; k < nd->ndeps && !found; k++) {
      uint32_t d = nd->deps[k];
      if (d == target) found = true;
      else if (!mark[d]) mark[d] = 1, stack[sp++] = d;
    }
  }
  return found || from == target;
}

/* Adds the checked edges one by one; at the first that would close a cycle,
 * takes back the ones added (each the last of its list) and refuses. */
static grt_status link_edges(grt_graph *g, grt_graph_node *const *from, grt_graph_node *const *to, size_t n,
                             uint8_t *mark, uint32_t *stack) {
  for (size_t i = 0; i < n; i++) {
    memset(mark, 0, g->n);
    if (reaches(g, from[i]->idx, to[i]->idx, mark, stack)) {
      while (i--) g->nodes[to[i]->idx].ndeps--;
      return GRT_ERR_GRAPH_CYCLE;
    }
    grt__gnode *nd = &g->nodes[to[i]->idx];
    nd->deps[nd->ndeps++] = from[i]->idx;
  }
  g->n_edges += (uint32_t)n;
  return GRT_OK;
}

grt_status grt_graph_add_dependencies(grt_graph *g, grt_graph_node *const *from, grt_graph_node *const *to,
                                      size_t n) {
  grt_status st = grt__graph_lock(g);
  if (st) return st;
  uint8_t *mark = NULL;
  uint32_t *stack = NULL;
  if (!(st = edges_check(g, from, to, n)))
    for (size_t i = 0; i < n && !st; i++)
      if (has_dep(&g->nodes[to[i]->idx], from[i]->idx)) st = GRT_ERR_INVALID_ARG; /* CUDA: an existing edge */
  if (!st && n > UINT32_MAX - g->n_edges) st = GRT_ERR_SIZE;
  if (!st && n && (!(mark = malloc(g->n)) || !(stack = malloc(g->n * sizeof *stack)) || !reserve_edges(g, to, n)))
    st = GRT_ERR_NOMEM;
  if (!st) st = link_edges(g, from, to, n, mark, stack);
  free(mark);
  free(stack);
  pthread_mutex_unlock(&g->exec->lock);
  return st;
}

/* Removes d from nd's list, keeping the order of the others. */
static void unlink_dep(grt__gnode *nd, uint32_t d) {
  uint32_t k = 0;
  while (nd->deps[k] != d) k++;
  memmove(nd->deps + k, nd->deps + k + 1, (nd->ndeps - k - 1) * sizeof *nd->deps);
  nd->ndeps--;
}

grt_status grt_graph_remove_dependencies(grt_graph *g, grt_graph_node *const *from, grt_graph_node *const *to,
                                         size_t n) {
  grt_status st = grt__graph_lock(g);
  if (st) return st;
  if (!(st = edges_check(g, from, to, n)) && n && g->n_mem) st = GRT_ERR_NOT_PERMITTED; /* CUDA: memory nodes */
  for (size_t i = 0; i < n && !st; i++)
    if (!has_dep(&g->nodes[to[i]->idx], from[i]->idx)) st = GRT_ERR_NOT_FOUND;
  for (size_t i = 0; i < n && !st; i++) unlink_dep(&g->nodes[to[i]->idx], from[i]->idx);
  if (!st) g->n_edges -= (uint32_t)n;
  pthread_mutex_unlock(&g->exec->lock);
  return st;
}

/* ---- destroying nodes ------------------------------------------------------------------ */

/* Takes node i out of g: its edges both ways, and every index after it moves down. */
static void remove_node(grt_graph *g, uint32_t i) {
  grt__gnode *gone = &g->nodes[i];
  g->n_edges -= gone->ndeps;
  free(gone->deps);
  clone_free(gone->child);
  gone->h->destroyed = true;
  memmove(gone, gone + 1, (g->n - i - 1) * sizeof *gone);
  g->n--;
  for (uint32_t j = 0; j < g->n; j++) {
    grt__gnode *nd = &g->nodes[j];
    if (has_dep(nd, i)) {
      unlink_dep(nd, i);
      g->n_edges--;
    }
    for (uint32_t k = 0; k < nd->ndeps; k++) nd->deps[k] -= nd->deps[k] > i;
    if (nd->h) nd->h->idx = j;
  }
}

grt_status grt_graph_destroy_node(grt_graph_node *node) {
  grt_status st = node_lock(node);
  if (st) return st;
  grt_graph *g = node->graph;
  if (g->n_mem) st = GRT_ERR_NOT_PERMITTED; /* CUDA: nodes of a graph with memory nodes cannot be deleted */
  else remove_node(g, node->idx);
  pthread_mutex_unlock(&g->exec->lock);
  return st;
}
