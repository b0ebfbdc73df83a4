/* stream.c — stream objects: creation, names and ids, query, synchronize,
 * wait-on-event, destruction with pending work.
 *
 * A destroyed stream keeps running what was issued to it (CUDA semantics) and
 * stays allocated as a zombie until the exec goes, so a later call with it
 * returns GRT_ERR_INVALID_HANDLE. Waits bind to the event's snapshot at call time:
 * the dep copies (stream, seq) out of the event, so re-recording the event
 * later changes nothing for this wait.
 */
#include <stdlib.h>
#include <string.h>

#include "exec/exec_impl.h"

static grt_status exec_check(grt_exec *exec) {
  return exec && exec->magic == GRT__EXEC_MAGIC ? GRT_OK : GRT_ERR_INVALID_ARG;
}

grt_status grt_stream_create(grt_exec *exec, unsigned flags, int priority, grt_stream **out) {
  if (!out) return GRT_ERR_INVALID_ARG;
  *out = NULL;
  if (exec_check(exec) || (flags & ~GRT_STREAM_NON_BLOCKING)) return GRT_ERR_INVALID_ARG;
  if (priority < GRT__PRIO_GREATEST) priority = GRT__PRIO_GREATEST;
  if (priority > GRT__PRIO_LEAST) priority = GRT__PRIO_LEAST;
  pthread_mutex_lock(&exec->lock);
  grt_status st = exec->error;
  grt_stream *s = NULL;
  if (!st) st = grt__fault_take(exec, GRT_EXEC_FAULT_STREAM_CREATE);
  if (!st) {
    s = grt__stream_new(exec, GRT__STREAM_USER, flags, priority);
    if (s) exec->live_streams++;
    else st = GRT_ERR_NOMEM;
  }
  pthread_mutex_unlock(&exec->lock);
  *out = s;
  return st;
}

grt_status grt_stream_destroy(grt_stream *s) {
  if (!s) return GRT_OK;
  grt_status st = grt__stream_check(s);
  if (st) return st;
  grt_exec *exec = s->exec;
  pthread_mutex_lock(&exec->lock);
  if (s->destroyed) st = GRT_ERR_INVALID_HANDLE;
  else if (s->kind != GRT__STREAM_USER) st = GRT_ERR_NOT_PERMITTED;
  else if (s->cap) st = GRT_ERR_BUSY; /* in a capture until end-capture */
  else {
    s->destroyed = true;
    exec->live_streams--;
    grt__u64map_del(&exec->by_id, s->id);
  }
  pthread_mutex_unlock(&exec->lock);
  return st;
}

grt_status grt_stream_set_name(grt_stream *s, const char *name) {
  grt_status st = grt__stream_check(s);
  if (st || !name) return st ? st : GRT_ERR_INVALID_ARG;
  pthread_mutex_lock(&s->exec->lock);
  if (s->destroyed) st = GRT_ERR_INVALID_HANDLE;
  else snprintf(s->name, sizeof s->name, "%s", name);
  pthread_mutex_unlock(&s->exec->lock);
  return st;
}

/* Unlike the setter it answers for a destroyed stream too: a race report may
 * name a stream destroyed since. */
grt_status grt_stream_get_name(grt_stream *s, char *buf, size_t buf_size) {
  grt_status st = grt__stream_check(s);
  if (st || !buf || !buf_size) return st ? st : GRT_ERR_INVALID_ARG;
  pthread_mutex_lock(&s->exec->lock);
  snprintf(buf, buf_size, "%s", s->name);
  pthread_mutex_unlock(&s->exec->lock);
  return GRT_OK;
}

/* Immutable fields: no lock needed, but a destroyed stream still refuses. */
static grt_status getter_check(grt_stream *s, const void *out) {
  grt_status st = grt__stream_check(s);
  if (st || !out) return st ? st : GRT_ERR_INVALID_ARG;
  pthread_mutex_lock(&s->exec->lock);
  st = s->destroyed ? GRT_ERR_INVALID_HANDLE : GRT_OK;
  pthread_mutex_unlock(&s->exec->lock);
  return st;
}

grt_status grt_stream_get_id(grt_stream *s, grt_stream_id *out) {
  grt_status st = getter_check(s, out);
  if (!st) *out = s->id;
  return st;
}

grt_status grt_stream_get_priority(grt_stream *s, int *out) {
  grt_status st = getter_check(s, out);
  if (!st) *out = s->priority;
  return st;
}

grt_status grt_stream_get_flags(grt_stream *s, unsigned *out) {
  grt_status st = getter_check(s, out);
  if (!st) *out = s->flags;
  return st;
}

grt_status grt_exec_stream_from_id(grt_exec *exec, grt_stream_id id, grt_stream **out) {
  if (exec_check(exec) || !out) return GRT_ERR_INVALID_ARG;
  pthread_mutex_lock(&exec->lock);
  grt_stream *s = grt__u64map_get(&exec->by_id, id);
  pthread_mutex_unlock(&exec->lock);
  if (!s) return GRT_ERR_NOT_FOUND;
  *out = s;
  return GRT_OK;
}

typedef struct seq_target {
  grt_stream *s;
  uint64_t seq;
} seq_target;

static bool reached(grt_exec *exec, void *ctx) {
  (void)exec;
  seq_target *t = ctx;
  return grt__done(t->s) >= t->seq;
}

/* Query or sync of a capturing stream invalidates its capture; so does the
 * legacy stream's while a blocking stream captures. Of any other stream it is
 * one of CUDA's "potentially unsafe" calls, which the capture modes govern
 * (capture_mode.c). Lock held. */
static grt_status capture_check(grt_exec *exec, grt_stream *s) {
  if (s->cap) {
    grt__graph_invalidate(s->cap);
    return GRT_ERR_CAPTURE_UNSUPPORTED;
  }
  grt_status st = grt__graph_legacy_check(exec, s);
  return st ? st : grt__capture_unsafe_check(exec);
}

/* Shared by stream and event query: lock held. A query only observes, as
 * CUDA's does (it reports completion; only a synchronizing call waits): it
 * starts nothing, runs no body and moves neither clock, so a program that
 * polls sees the same answers under both. What it may report is a cycle of
 * waits that already holds the exec (quiescent: nothing can run): no amount
 * of polling or waiting could change that answer. */
grt_status grt__query_seq(grt_exec *exec, grt_stream *s, uint64_t seq) {
  if (exec->error) return exec->error;
  if (!s || grt__done(s) >= seq) return GRT_OK;
  if (grt__quiescent(exec) && exec->detect_gen != exec->state_gen) {
    if (grt__detect_deadlock(exec)) return exec->error;
    exec->detect_gen = exec->state_gen;
  }
  return GRT_ERR_NOT_READY;
}

grt_status grt_stream_query(grt_stream *s) {
  grt_status st = grt__stream_check(s);
  if (st) return st;
  grt_exec *exec = s->exec;
  pthread_mutex_lock(&exec->lock);
  if (s->destroyed) st = GRT_ERR_INVALID_HANDLE;
  else if (!(st = capture_check(exec, s))) st = grt__query_seq(exec, s, s->issued_seq);
  pthread_mutex_unlock(&exec->lock);
  return st;
}

grt_status grt_stream_synchronize(grt_stream *s) {
  grt_status st = grt__stream_check(s);
  if (st) return st;
  grt_exec *exec = s->exec;
  pthread_mutex_lock(&exec->lock);
  if (s->destroyed) st = GRT_ERR_INVALID_HANDLE;
  else if (grt__in_body(exec)) st = GRT_ERR_NOT_PERMITTED;
  else if ((st = capture_check(exec, s))) {
  } else {
    seq_target t = {s, s->issued_seq};
    st = grt__wait(exec, reached, &t, true, false);
  }
  pthread_mutex_unlock(&exec->lock);
  if (!st) grt__sync_notify(exec, GRT__SYNC_STREAM, s);
  return st;
}

grt_status grt_stream_wait_event(grt_stream *s, grt_event *ev) {
  return grt_stream_wait_event_with_flags(s, ev, GRT_EVENT_WAIT_DEFAULT);
}

grt_status grt_stream_wait_event_with_flags(grt_stream *s, grt_event *ev, unsigned flags) {
  if (!ev || ev->magic != GRT__EVENT_MAGIC || (flags & ~GRT_EVENT_WAIT_EXTERNAL)) return GRT_ERR_INVALID_ARG;
  grt_status st = grt__stream_check(s);
  if (st) return st;
  if (ev->exec != s->exec) return GRT_ERR_WRONG_DEVICE;
  if ((st = grt__stream_lock(s))) return st;
  grt_exec *exec = s->exec;
  if (ev->destroyed) st = GRT_ERR_INVALID_HANDLE;
  else if ((st = grt__graph_legacy_check(exec, s))) {
  } else if (flags & GRT_EVENT_WAIT_EXTERNAL) {
    st = s->cap ? grt__graph_capture_wait_external(s, ev) : GRT_ERR_INVALID_ARG; /* only in a capture */
  } else if (s->cap || ev->cap) {
    st = grt__graph_capture_wait(s, ev); /* fork, join or a capture rule */
  }
  /* Never recorded, already complete or on s itself: FIFO order already holds. */
  else if (ev->stream && ev->stream != s && grt__done(ev->stream) < ev->seq) {
    grt__op *op = grt__op_alloc(exec, s, GRT__OP_WAIT);
    if (!op || !grt__op_add_dep(op, ev->stream, ev->seq, ev->src_uid, ev)) {
      if (op) grt__op_free(exec, op);
      st = GRT_ERR_NOMEM;
    } else {
      st = grt__submit(op);
    }
  }
  pthread_mutex_unlock(&exec->lock);
  return st;
}
