/* graph_mem.c — graph memory nodes: the blocks behind allocation nodes, their
 * allocations across launches, and frees outside the allocating graph
 * (docs/EXEC.md, "Graphs"; CUDA Runtime API, cudaGraphAddMemAllocNode and
 * cudaGraphLaunch; CUDA Programming Guide, "Graph Memory Nodes").
 *
 * A block is taken from the device when its allocation node is made (the
 * address is fixed for the node's life, and captured work needs it at once)
 * and is entered in the exec's map by address. A launch of an executable
 * graph made with the node allocates it: it is live from then until it is
 * freed, in API order. Freed in the graph itself (a free node of the same
 * snapshot), it is never live between launches. Otherwise it stays live after
 * the launch, usable by later stream work, until a free outside the graph:
 * grt_stream_free_async_graph outside a capture (the stream-ordered pool's
 * free_async routes graph memory there), or the launch of another graph with
 * a free node for it. While it is live, the executable graph cannot be
 * launched again (GRT_ERR_INVALID_ARG, cudaErrorInvalidValue). The next
 * launch that allocates it waits for that free's position in its stream, so
 * work ordered before the free never sees the new allocation.
 *
 * The block goes back to the device when no node or executable graph refers
 * to it, it is not live (a destroyed graph's live allocation must still be
 * freed, as in CUDA) and its last free was reached; one whose free is still
 * ahead waits on exec->gpending until a sweep finds it reached. Device calls
 * happen outside the exec lock, on a batch collected under it.
 */
#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "exec/graph_impl.h"

/* ---- blocks ------------------------------------------------------------------ */

static bool free_reached(const grt__gblock *b) { return !b->free_s || grt__done(b->free_s) >= b->free_seq; }

static void to_batch(grt_exec *exec, grt__gblock *b, grt__gblock **batch) {
  grt__u64map_del(&exec->gallocs, b->ptr);
  b->next = *batch;
  *batch = b;
}

/* b may have become unreferenced and free: to the batch, or to wait for its free. */
static void settle_block(grt_exec *exec, grt__gblock *b, grt__gblock **batch) {
  if (b->refs || b->live) return;
  if (free_reached(b)) {
    to_batch(exec, b, batch);
  } else {
    b->next = exec->gpending;
    exec->gpending = b;
  }
}

void grt__gblock_unref(grt_exec *exec, grt__gblock *b, grt__gblock **batch) {
  assert(b->refs > 0);
  b->refs--;
  settle_block(exec, b, batch);
}

void grt__graph_mem_sweep(grt_exec *exec, grt__gblock **batch) {
  for (grt__gblock **pp = &exec->gpending; *pp;) {
    grt__gblock *b = *pp;
    if (!free_reached(b)) {
      pp = &b->next;
      continue;
    }
    *pp = b->next;
    to_batch(exec, b, batch);
  }
}

void grt__gblocks_release(grt_device *dev, grt__gblock *batch) {
  for (grt__gblock *b = batch, *n; b; b = n) {
    n = b->next;
    grt_status st = grt_device_free(dev, b->ptr); /* memory the exec allocated itself */
    assert(st == GRT_OK);
    (void)st;
    free(b);
  }
}

size_t grt__graph_mem_segments(grt_exec *exec) { return exec->gallocs.count; }

void grt__graph_mem_free_all(grt_exec *exec) {
  uint64_t key;
  void *v;
  grt__gblock *batch = NULL;
  while (grt__u64map_first(&exec->gallocs, &key, &v)) to_batch(exec, v, &batch);
  grt__u64map_free(&exec->gallocs);
  exec->gpending = NULL;
  grt__gblocks_release(exec->device, batch);
}

/* A block for ptr, owned by g's allocation node; registered by address. */
grt_status grt__gblock_new(grt_exec *exec, grt_graph *g, grt_devptr ptr, uint64_t size, grt__gblock **out) {
  grt__gblock *b = calloc(1, sizeof *b);
  if (!b || !grt__u64map_reserve(&exec->gallocs, 1)) {
    free(b);
    return GRT_ERR_NOMEM;
  }
  b->ptr = ptr;
  b->size = size;
  b->owner = g;
  b->refs = 1;
  bool ok = grt__u64map_put(&exec->gallocs, ptr, b); /* reserved above */
  assert(ok);
  (void)ok;
  *out = b;
  return GRT_OK;
}

/* ---- executable graphs ---------------------------------------------------------- */

static grt__gmem *find_alloc(grt__gmem *m, uint32_t n, const grt__gblock *b) {
  for (uint32_t i = 0; i < n; i++)
    if (m[i].b == b && m[i].how != GRT__GMEM_FOREIGN_FREE) return &m[i];
  return NULL;
}

grt_status grt__graph_mem_snapshot(grt_graph_exec *ge, const grt_graph *g) {
  if (!g->n_mem) return GRT_OK;
  grt__gmem *m = malloc(g->n_mem * sizeof *m);
  if (!m) return GRT_ERR_NOMEM;
  uint32_t n = 0;
  for (uint32_t i = 0; i < g->n; i++) /* allocations first: a free node may come before its allocation */
    if (g->nodes[i].proto.kind == GRT__OP_GALLOC) m[n++] = (grt__gmem){g->nodes[i].block, GRT__GMEM_ALLOC};
  for (uint32_t i = 0; i < g->n; i++) {
    if (g->nodes[i].proto.kind != GRT__OP_GFREE) continue;
    grt__gmem *a = find_alloc(m, n, g->nodes[i].block);
    if (a) a->how = GRT__GMEM_ALLOC_FREED;
    else m[n++] = (grt__gmem){g->nodes[i].block, GRT__GMEM_FOREIGN_FREE};
  }
  ge->mem = m;
  ge->n_mem = n;
  for (uint32_t i = 0; i < n; i++) {
    m[i].b->refs++;
    if (m[i].how != GRT__GMEM_FOREIGN_FREE) ge->pool_bytes += m[i].b->size;
  }
  return GRT_OK;
}

void grt__graph_mem_drop(grt_graph_exec *ge, grt__gblock **batch) {
  for (uint32_t i = 0; i < ge->n_mem; i++) grt__gblock_unref(ge->exec, ge->mem[i].b, batch);
  free(ge->mem);
  ge->mem = NULL;
  ge->n_mem = 0;
}

grt_status grt__graph_mem_launch_check(const grt_graph_exec *ge, grt__op *op) {
  for (uint32_t i = 0; i < ge->n_mem; i++) {
    const grt__gblock *b = ge->mem[i].b;
    bool foreign = ge->mem[i].how == GRT__GMEM_FOREIGN_FREE;
    if (!foreign && b->live) return GRT_ERR_INVALID_ARG; /* the previous allocation is not freed yet */
    if (foreign && !b->live) return GRT_ERR_DOUBLE_FREE; /* nothing to free */
  }
  for (uint32_t i = 0; i < ge->n_mem; i++) {
    const grt__gblock *b = ge->mem[i].b;
    if (ge->mem[i].how == GRT__GMEM_FOREIGN_FREE || free_reached(b) || b->free_s == op->stream) continue;
    if (!grt__op_add_dep(op, b->free_s, b->free_seq, b->free_uid, NULL)) return GRT_ERR_NOMEM;
  }
  return GRT_OK;
}

void grt__graph_mem_launched(grt_graph_exec *ge, grt_stream *s, uint64_t seq, uint64_t uid) {
  for (uint32_t i = 0; i < ge->n_mem; i++) {
    grt__gblock *b = ge->mem[i].b;
    if (ge->mem[i].how == GRT__GMEM_FOREIGN_FREE) { /* freed by this launch: the owner's relaunch waits for it */
      b->live = false;
      b->free_s = s;
      b->free_seq = seq;
      b->free_uid = uid;
    } else { /* allocated by this launch, after everything it waits for */
      b->live = ge->mem[i].how == GRT__GMEM_ALLOC;
      b->free_s = NULL;
    }
  }
}

/* ---- memory nodes in a capture -------------------------------------------------- */

/* Locks s's exec and finds its valid capture. */
static grt_status capture_lock(grt_stream *s, grt__capture **out) {
  grt_status st = grt__stream_lock(s);
  if (st) return st;
  *out = s->cap;
  st = !s->cap ? GRT_ERR_STATE : s->cap->invalid ? GRT_ERR_CAPTURE_INVALIDATED : GRT_OK;
  if (st) pthread_mutex_unlock(&s->exec->lock);
  return st;
}

static void mem_proto(grt__op *proto, grt_stream *s, uint8_t kind, grt_devptr ptr, uint64_t size) {
  memset(proto, 0, sizeof *proto);
  proto->stream = s;
  proto->kind = kind;
  proto->engine = GRT__ENGINE_NONE;
  proto->u.mem.dev = ptr;
  proto->u.mem.bytes = size;
  snprintf(proto->name, sizeof proto->name, "%s 0x%llx", kind == GRT__OP_GALLOC ? "graph alloc" : "graph free",
           (unsigned long long)ptr);
}

/* Appends a memory node for b after s's frontier (lock held): the node holds a ref. */
static grt_status capture_mem_node(grt_stream *s, uint8_t kind, grt__gblock *b) {
  grt__capture *c = s->cap;
  grt__idxvec *f = &s->cap_front;
  if (!f->cap) { /* room for the new frontier first, so nothing fails after the node is in */
    if (!grt__graph_idx_push(f, 0)) return GRT_ERR_NOMEM;
    f->n = 0;
  }
  grt__op proto;
  mem_proto(&proto, s, kind, b->ptr, b->size);
  uint32_t idx;
  if (!grt__graph_add_node(c->graph, &proto, f, &idx)) return GRT_ERR_NOMEM;
  c->graph->nodes[idx].block = b;
  c->graph->n_mem++;
  f->n = 0;
  bool ok = grt__graph_idx_push(f, idx); /* room made above */
  assert(ok);
  (void)ok;
  return GRT_OK;
}

grt_status grt_stream_malloc_async_graph(grt_stream *s, uint64_t size, grt_devptr *out) {
  if (!out) return GRT_ERR_INVALID_ARG;
  grt__capture *c;
  grt_status st = capture_lock(s, &c);
  if (st) return st;
  grt_exec *exec = s->exec;
  uint64_t id = c->id;
  pthread_mutex_unlock(&exec->lock); /* the device lock is never taken under the exec lock */
  grt_devptr p;
  if ((st = grt_device_malloc(exec->device, size, &p))) return st;
  pthread_mutex_lock(&exec->lock);
  c = s->cap;
  grt__gblock *b = NULL;
  if (!c || c->id != id) st = GRT_ERR_STATE; /* the capture ended meanwhile */
  else if (c->invalid) st = GRT_ERR_CAPTURE_INVALIDATED;
  else if (!(st = grt__gblock_new(exec, c->graph, p, size, &b)) && (st = capture_mem_node(s, GRT__OP_GALLOC, b))) {
    grt__u64map_del(&exec->gallocs, p);
    free(b);
  }
  pthread_mutex_unlock(&exec->lock);
  if (st) {
    grt_status fst = grt_device_free(exec->device, p); /* allocated just above */
    assert(fst == GRT_OK);
    (void)fst;
  } else {
    *out = p;
  }
  return st;
}

/* Whether g already has a free node for b. */
static bool frees_in(const grt_graph *g, const grt__gblock *b) {
  for (uint32_t i = 0; i < g->n; i++)
    if (g->nodes[i].block == b && g->nodes[i].proto.kind == GRT__OP_GFREE) return true;
  return false;
}

/* CUDA's rule: an allocation is freed in its own graph or in others, never
 * both, and at most once per graph. */
grt_status grt__graph_mem_free_check(const grt_graph *g, const grt__gblock *b) {
  if (!b) return GRT_ERR_UNKNOWN_POINTER;
  if (b->owner == g) return b->freed_in_owner || b->freed_elsewhere ? GRT_ERR_DOUBLE_FREE : GRT_OK;
  return b->freed_in_owner || frees_in(g, b) ? GRT_ERR_DOUBLE_FREE : GRT_OK;
}

void grt__graph_mem_freed_by(const grt_graph *g, grt__gblock *b) {
  b->refs++;
  if (b->owner == g) b->freed_in_owner = true;
  else b->freed_elsewhere = true;
}

static grt_status capture_free(grt_stream *s, grt_devptr ptr) {
  grt_graph *g = s->cap->graph;
  grt__gblock *b = grt__u64map_get(&s->exec->gallocs, ptr);
  grt_status st = grt__graph_mem_free_check(g, b);
  if (st || (st = capture_mem_node(s, GRT__OP_GFREE, b))) return st;
  grt__graph_mem_freed_by(g, b);
  return GRT_OK;
}

/* ---- frees outside any graph ------------------------------------------------------ */

/* free_async of graph memory on s (lock held): a marker at this point of s,
 * where the allocation's life ends; the next launch allocating it waits for it. */
static grt_status stream_free(grt_stream *s, grt_devptr ptr, grt__gblock **batch) {
  grt_exec *exec = s->exec;
  grt__gblock *b = grt__u64map_get(&exec->gallocs, ptr);
  if (!b) return GRT_ERR_UNKNOWN_POINTER;
  if (!b->live) return GRT_ERR_DOUBLE_FREE;
  grt__op *op = grt__op_alloc(exec, s, GRT__OP_GFREE);
  if (!op) return GRT_ERR_NOMEM;
  snprintf(op->name, sizeof op->name, "graph free 0x%llx", (unsigned long long)ptr);
  op->u.mem.dev = ptr;
  op->u.mem.bytes = b->size;
  uint64_t seq, uid;
  grt_status st = grt__submit_ex(op, &seq, &uid);
  if (st) return st;
  b->live = false;
  b->free_s = s;
  b->free_seq = seq;
  b->free_uid = uid;
  settle_block(exec, b, batch);
  return GRT_OK;
}

grt_status grt_stream_free_async_graph(grt_stream *s, grt_devptr ptr) {
  grt_status st = grt__stream_lock(s);
  if (st) return st;
  grt_exec *exec = s->exec;
  grt__gblock *batch = NULL;
  if (!s->cap) st = stream_free(s, ptr, &batch);
  else if (s->cap->invalid) st = GRT_ERR_CAPTURE_INVALIDATED;
  else st = capture_free(s, ptr);
  grt__graph_mem_sweep(exec, &batch);
  pthread_mutex_unlock(&exec->lock);
  grt__gblocks_release(exec->device, batch);
  return st;
}

grt_status grt__graph_mem_free_now(grt_exec *exec, grt_devptr ptr, bool *graph_memory) {
  grt__gblock *batch = NULL;
  grt_status st = GRT_OK;
  pthread_mutex_lock(&exec->lock);
  grt__gblock *b = grt__u64map_get(&exec->gallocs, ptr);
  *graph_memory = b != NULL;
  if (b && !b->live) {
    st = GRT_ERR_DOUBLE_FREE;
  } else if (b) { /* "immediately upon the freeing call to cudaFree()": no position to wait for */
    b->live = false;
    b->free_s = NULL;
    settle_block(exec, b, &batch);
  }
  pthread_mutex_unlock(&exec->lock);
  grt__gblocks_release(exec->device, batch);
  return st;
}

grt_status grt_exec_graph_mem_trim(grt_exec *exec) {
  if (!exec || exec->magic != GRT__EXEC_MAGIC) return GRT_ERR_INVALID_ARG;
  grt__gblock *batch = NULL;
  pthread_mutex_lock(&exec->lock);
  grt__graph_mem_sweep(exec, &batch);
  pthread_mutex_unlock(&exec->lock);
  grt__gblocks_release(exec->device, batch);
  return GRT_OK;
}
