/* op.c — issuing work: op allocation, the legacy-stream implicit edges, and the
 * public enqueue functions (kernels, copies, memset, host functions).
 *
 * Every op reaches its stream through grt__submit, the single choke point where
 * stream capture (graph_capture.c) diverts ops into a graph instead of running
 * them. Arguments are validated before anything changes; device ranges are
 * checked against the device (outside the exec lock) when issued, and again by
 * the body when it runs.
 */
#include <stdlib.h>
#include <string.h>

#include "exec/exec_impl.h"

grt__op *grt__op_alloc(grt_exec *exec, grt_stream *s, uint8_t kind) {
  grt__op *op = exec->free_ops;
  if (!op) { /* one malloc per 64 ops keeps the issue path cheap */
    grt__op_slab *slab = malloc(sizeof *slab);
    if (!slab) return NULL;
    slab->next = exec->slabs;
    exec->slabs = slab;
    for (int i = GRT__SLAB_OPS - 1; i >= 0; i--) {
      slab->ops[i].next = exec->free_ops;
      exec->free_ops = &slab->ops[i];
    }
    op = exec->free_ops;
  }
  exec->free_ops = op->next;
  memset(op, 0, offsetof(grt__op, u)); /* the union and tail are set by the issuer */
  op->wait_uev = NULL;
  op->gparent = NULL;
  op->name[0] = '\0';
  op->stream = s;
  op->kind = kind;
  op->engine = GRT__ENGINE_NONE;
  op->priority = s->priority;
  op->deps = &op->inline_dep;
  return op;
}

void grt__op_free(grt_exec *exec, grt__op *op) {
  if (op->deps != &op->inline_dep) free(op->deps);
  if (op->kind == GRT__OP_KERNEL) grt__kop_body_free(op->u.call.fn, op->u.call.arg); /* an eager op's copy */
  if (op->kind == GRT__OP_GRAPH && op->u.graph.body) grt__graph_launch_release(exec, op);
  op->next = exec->free_ops;
  exec->free_ops = op;
}

bool grt__op_add_dep(grt__op *op, grt_stream *src, uint64_t seq, uint64_t src_uid, grt_event *ev) {
  if (op->ndeps == 1 && op->deps == &op->inline_dep) {
    grt__dep *d = malloc(4 * sizeof *d);
    if (!d) return false;
    d[0] = op->inline_dep;
    op->deps = d;
  } else if (op->ndeps >= 4 && (op->ndeps & (op->ndeps - 1)) == 0) {
    grt__dep *d = realloc(op->deps, 2 * op->ndeps * sizeof *d);
    if (!d) return false;
    op->deps = d;
  }
  op->deps[op->ndeps++] = (grt__dep){src, seq, src_uid, ev};
  return true;
}

grt_status grt__stream_check(grt_stream *s) {
  if (!s || s->magic != GRT__STREAM_MAGIC) return GRT_ERR_INVALID_ARG;
  return GRT_OK;
}

/* Locks the stream's exec; fails (unlocked) for destroyed streams and execs in error. */
grt_status grt__stream_lock(grt_stream *s) {
  grt_status st = grt__stream_check(s);
  if (st) return st;
  pthread_mutex_lock(&s->exec->lock);
  st = s->destroyed ? GRT_ERR_INVALID_HANDLE : s->exec->error;
  if (st) pthread_mutex_unlock(&s->exec->lock);
  return st;
}

static uint64_t tail_uid(const grt_stream *s) { return s->tail ? s->tail->uid : 0; }

/* CUDA's legacy default stream rules as deps on op (issued to s). */
static bool add_legacy_deps(grt_exec *exec, grt_stream *s, grt__op *op) {
  grt_stream *leg = exec->legacy;
  if (s == leg) {
    for (grt_stream *t = exec->streams; t; t = t->all_next) {
      if (t == leg || (t->flags & GRT_STREAM_NON_BLOCKING) || grt__done(t) >= t->issued_seq) continue;
      if (!grt__op_add_dep(op, t, t->issued_seq, tail_uid(t), NULL)) return false;
    }
    return true;
  }
  if ((s->flags & GRT_STREAM_NON_BLOCKING) || leg->issued_seq <= s->legacy_seen) return true;
  if (grt__done(leg) < leg->issued_seq && !grt__op_add_dep(op, leg, leg->issued_seq, tail_uid(leg), NULL))
    return false;
  return true;
}

grt_status grt__submit_ex(grt__op *op, uint64_t *seq_out, uint64_t *uid_out) {
  grt_stream *s = op->stream;
  grt_exec *exec = s->exec;
  /* Stream capture (graph_capture.c): legacy-stream use while a blocking
   * stream captures is illegal; a capturing stream's op becomes a graph node. */
  grt_status st = grt__graph_legacy_check(exec, s);
  if (st || s->cap) {
    if (st) {
      grt__op_free(exec, op);
      return st;
    }
    return grt__graph_capture_submit(op);
  }
  if (!add_legacy_deps(exec, s, op)) {
    grt__op_free(exec, op);
    return GRT_ERR_NOMEM;
  }
  if (s != exec->legacy && !(s->flags & GRT_STREAM_NON_BLOCKING)) s->legacy_seen = exec->legacy->issued_seq;
  op->seq = ++s->issued_seq;
  op->uid = ++exec->next_uid;
  if (seq_out) *seq_out = op->seq;
  if (uid_out) *uid_out = op->uid;
  if (op->kind == GRT__OP_UEV_SIGNAL) op->u.uev.uev->pending_signals++;
  op->next = NULL;
  if (s->tail) s->tail->next = op;
  else s->head = op;
  s->tail = op;
  exec->pending_ops++;
  exec->state_gen++;
  if (s->head == op) grt__sched_eval(exec, s);
  return GRT_OK;
}

grt_status grt__submit(grt__op *op) { return grt__submit_ex(op, NULL, NULL); }

static void set_name(grt__op *op, const char *name) {
  if (!name) return;
  size_t n = strlen(name);
  if (n >= sizeof op->name) n = sizeof op->name - 1;
  memcpy(op->name, name, n);
  op->name[n] = '\0';
}

/* Allocates an op on a locked stream; unlocks and reports on failure. */
static grt__op *start_op(grt_stream *s, uint8_t kind, grt_status *st) {
  *st = grt__stream_lock(s);
  if (*st) return NULL;
  grt__op *op = grt__op_alloc(s->exec, s, kind);
  if (!op) {
    pthread_mutex_unlock(&s->exec->lock);
    *st = GRT_ERR_NOMEM;
  }
  return op;
}

/* Issues op (lock held; unlocks). With id: the op gets one first, unless s
 * captures (the op becomes a graph node: *id = 0). *id is written only on
 * success; a failure gives the id back. */
static grt_status finish_op_id(grt_stream *s, grt__op *op, grt_op_id *id) {
  grt_exec *exec = s->exec;
  uint64_t t = 0;
  grt_status st = id && !s->cap ? grt__op_id_take(exec, &t) : GRT_OK;
  if (st) {
    grt__op_free(exec, op);
  } else {
    op->times_id = t;
    if ((st = grt__submit(op))) grt__op_id_undo(exec, t);
  }
  pthread_mutex_unlock(&exec->lock);
  if (!st && id) *id = t;
  return st;
}

static grt_status finish_op(grt_stream *s, grt__op *op) { return finish_op_id(s, op, NULL); }

static grt_status launch_kernel(grt_stream *s, const grt_kernel_desc *desc, const grt_kernel_op *kop, grt_op_id *id);

grt_status grt_launch_kernel(grt_stream *s, const grt_kernel_desc *desc) { return grt_launch_kernel_ex(s, desc, NULL); }

grt_status grt_launch_kernel_ex(grt_stream *s, const grt_kernel_desc *desc, grt_op_id *id) {
  return launch_kernel(s, desc, NULL, id);
}

grt_status grt_launch_kernel_op(grt_stream *s, const grt_kernel_desc *desc, const grt_kernel_op *kop) {
  return kop ? launch_kernel(s, desc, kop, NULL) : GRT_ERR_INVALID_ARG;
}

static grt_status launch_kernel(grt_stream *s, const grt_kernel_desc *desc, const grt_kernel_op *kop, grt_op_id *id) {
  if (!desc || (desc->engine != GRT_ENGINE_COMPUTE && desc->engine != GRT_ENGINE_COPY_H2D &&
                desc->engine != GRT_ENGINE_COPY_D2H))
    return GRT_ERR_INVALID_ARG;
  grt__kop *k = NULL;
  grt_status st = kop ? grt__stream_check(s) : GRT_OK;
  if (!st && kop) st = grt__kop_from_desc(s->exec->device, desc, kop, &k);
  if (st) return st;
  grt__op *op = start_op(s, GRT__OP_KERNEL, &st);
  if (!op) {
    free(k);
    return st;
  }
  op->engine = (uint8_t)desc->engine;
  op->duration_ns = desc->duration_ns;
  op->u.call.fn = k ? grt__kop_run : desc->fn;
  op->u.call.arg = k ? (void *)k : desc->arg;
  set_name(op, desc->name);
  return finish_op_id(s, op, id);
}

grt_status grt_launch_host_func(grt_stream *s, grt_host_fn fn, void *arg) {
  return grt_launch_host_func_ex(s, fn, arg, NULL);
}

grt_status grt_launch_host_func_ex(grt_stream *s, grt_host_fn fn, void *arg, grt_op_id *id) {
  if (!fn) return GRT_ERR_INVALID_ARG;
  grt_status st;
  grt__op *op = start_op(s, GRT__OP_HOST_FUNC, &st);
  if (!op) return st;
  op->engine = GRT_ENGINE_HOST;
  op->u.call.fn = fn;
  op->u.call.arg = arg;
  return finish_op_id(s, op, id);
}

/* A host-engine op like a host function; what differs (the status it is
 * told, running after a sticky error, no capture) is in sched*.c and
 * graph_capture.c. */
grt_status grt_stream_add_callback(grt_stream *s, grt_stream_callback fn, void *arg, unsigned flags) {
  if (!fn || flags) return GRT_ERR_INVALID_ARG;
  grt_status st;
  grt__op *op = start_op(s, GRT__OP_CALLBACK, &st);
  if (!op) return st;
  op->engine = GRT_ENGINE_HOST;
  op->u.cb.fn = fn;
  op->u.cb.arg = arg;
  op->u.cb.status = GRT_OK;
  return finish_op(s, op);
}

/* Checks that [p, p+n) lies in a live segment of s's device. */
static grt_status check_range(grt_stream *s, grt_devptr p, uint64_t n) {
  void *h;
  grt_status st = grt_device_host_ptr(s->exec->device, p, n, &h);
  return st == GRT_ERR_INVALID_ARG ? GRT_ERR_UNKNOWN_POINTER : st;
}

static grt_status mem_op(grt_stream *s, uint8_t kind, unsigned engine, grt_devptr dev, grt_devptr dev2, void *host,
                         int value, uint64_t bytes) {
  grt_status st = grt__stream_check(s);
  if (st) return st;
  if ((kind == GRT__OP_H2D || kind == GRT__OP_D2H) && !host) return GRT_ERR_INVALID_ARG;
  if (bytes == 0) return GRT_OK; /* CUDA: a zero-byte copy is a no-op */
  if ((st = check_range(s, dev, bytes))) return st;
  if (kind == GRT__OP_D2D && (st = check_range(s, dev2, bytes))) return st;
  grt__op *op = start_op(s, kind, &st);
  if (!op) return st;
  op->engine = (uint8_t)engine;
  op->duration_ns = grt__copy_ns(&s->exec->cfg, engine, bytes);
  op->u.mem.dev = dev;
  op->u.mem.dev2 = dev2;
  op->u.mem.host = host;
  op->u.mem.value = value;
  op->u.mem.bytes = bytes;
  return finish_op(s, op);
}

grt_status grt_memcpy_h2d_async(grt_stream *s, grt_devptr dst, const void *src, uint64_t bytes) {
  return mem_op(s, GRT__OP_H2D, GRT_ENGINE_COPY_H2D, dst, 0, (void *)(uintptr_t)src, 0, bytes);
}

grt_status grt_memcpy_d2h_async(grt_stream *s, void *dst, grt_devptr src, uint64_t bytes) {
  return mem_op(s, GRT__OP_D2H, GRT_ENGINE_COPY_D2H, src, 0, dst, 0, bytes);
}

grt_status grt_memcpy_d2d_async(grt_stream *s, grt_devptr dst, grt_devptr src, uint64_t bytes) {
  return mem_op(s, GRT__OP_D2D, GRT_ENGINE_COMPUTE, dst, src, NULL, 0, bytes);
}

grt_status grt_memset_async(grt_stream *s, grt_devptr dst, int value, uint64_t bytes) {
  return mem_op(s, GRT__OP_MEMSET, GRT_ENGINE_COMPUTE, dst, 0, NULL, value, bytes);
}
