/* event.c — plain CUDA events: record (snapshot), query, synchronize, timing;
 * and the exec's grt_stream_ops, which are these events behind stream ids.
 *
 * An event holds only its latest snapshot: (stream, seq) of its record marker
 * and a generation bumped per record. The marker stamps time_ns when it
 * completes, but only if the event was not re-recorded since (gen matches), so
 * timing always belongs to the current record. A never-recorded event
 * (stream == NULL) is complete. Destroyed events stay as zombies.
 */
#include <stdlib.h>
#include <string.h>

#include "base/status.h"
#include "exec/graph_impl.h"

static grt_status ev_check(grt_event *ev) {
  return ev && ev->magic == GRT__EVENT_MAGIC ? GRT_OK : GRT_ERR_INVALID_ARG;
}

/* Locks the event's exec; fails (unlocked) for a destroyed event. */
static grt_status ev_lock(grt_event *ev) {
  grt_status st = ev_check(ev);
  if (st) return st;
  pthread_mutex_lock(&ev->exec->lock);
  if (ev->destroyed) {
    pthread_mutex_unlock(&ev->exec->lock);
    return GRT_ERR_INVALID_HANDLE;
  }
  return GRT_OK;
}

grt_status grt_event_create(grt_exec *exec, unsigned flags, grt_event **out) {
  if (!out) return GRT_ERR_INVALID_ARG;
  *out = NULL;
  if (!exec || exec->magic != GRT__EXEC_MAGIC) return GRT_ERR_INVALID_ARG;
  if (flags & ~(GRT_EVENT_BLOCKING_SYNC | GRT_EVENT_DISABLE_TIMING)) return GRT_ERR_INVALID_ARG;
  grt_event *ev = calloc(1, sizeof *ev);
  if (!ev) return GRT_ERR_NOMEM;
  ev->magic = GRT__EVENT_MAGIC;
  ev->exec = exec;
  ev->flags = flags;
  pthread_mutex_lock(&exec->lock);
  grt_status st = grt__fault_take(exec, GRT_EXEC_FAULT_EVENT_CREATE);
  if (st) {
    pthread_mutex_unlock(&exec->lock);
    free(ev);
    return st;
  }
  snprintf(ev->name, sizeof ev->name, "event-%u", exec->live_events + 1);
  ev->all_next = exec->events;
  exec->events = ev;
  exec->live_events++;
  pthread_mutex_unlock(&exec->lock);
  *out = ev;
  return GRT_OK;
}

grt_status grt_event_destroy(grt_event *ev) {
  if (!ev) return GRT_OK;
  grt_status st = ev_lock(ev);
  if (st) return st;
  ev->destroyed = true;
  ev->exec->live_events--;
  pthread_mutex_unlock(&ev->exec->lock);
  return GRT_OK;
}

grt_status grt_event_set_name(grt_event *ev, const char *name) {
  if (!name) return GRT_ERR_INVALID_ARG;
  grt_status st = ev_lock(ev);
  if (st) return st;
  snprintf(ev->name, sizeof ev->name, "%s", name);
  pthread_mutex_unlock(&ev->exec->lock);
  return GRT_OK;
}

grt_status grt_event_record(grt_event *ev, grt_stream *s) {
  grt_status st = ev_check(ev);
  if (st || (st = grt__stream_check(s))) return st;
  if (ev->exec != s->exec) return GRT_ERR_WRONG_DEVICE;
  if ((st = grt__stream_lock(s))) return st;
  grt_exec *exec = s->exec;
  if (ev->destroyed) {
    pthread_mutex_unlock(&exec->lock);
    return GRT_ERR_INVALID_HANDLE;
  }
  if (s->cap) { /* a captured event: it snapshots the capture's frontier, not stream work */
    st = grt__graph_capture_record(ev, s);
    pthread_mutex_unlock(&exec->lock);
    return st;
  }
  grt__op *op = grt__op_alloc(exec, s, GRT__OP_RECORD);
  if (!op) {
    pthread_mutex_unlock(&exec->lock);
    return GRT_ERR_NOMEM;
  }
  grt_stream *old_stream = ev->stream;
  uint64_t old_seq = ev->seq, old_uid = ev->src_uid;
  /* Set the snapshot before submitting: the marker may complete inside submit. */
  ev->gen++;
  ev->time_valid = false;
  ev->stream = s;
  op->u.rec.event = ev;
  op->u.rec.gen = ev->gen;
  ev->seq = s->issued_seq + 1; /* what submit will assign */
  ev->src_uid = exec->next_uid + 1;
  st = grt__submit(op);
  if (st) { /* nothing changed: restore the previous snapshot */
    ev->stream = old_stream;
    ev->seq = old_seq;
    ev->src_uid = old_uid;
  } else if (ev->cap) { /* recorded outside its capture now: no longer a captured event */
    ev->cap = NULL;
    grt__graph_idx_free(&ev->cap_nodes);
  }
  pthread_mutex_unlock(&exec->lock);
  return st;
}

/* Query or sync of a captured event invalidates its capture. Lock held. */
static grt_status captured(grt_event *ev) {
  if (!ev->cap) return GRT_OK;
  grt__graph_invalidate(ev->cap);
  return GRT_ERR_CAPTURED_EVENT;
}

/* Query or sync of any other event is one of CUDA's "potentially unsafe"
 * calls, which the capture modes govern (capture_mode.c). Lock held. */
static grt_status sync_check(grt_event *ev) {
  grt_status st = captured(ev);
  return st ? st : grt__capture_unsafe_check(ev->exec);
}

/* by_app: the application asks (the capture modes apply); else the exec's
 * completion interface asks for a layer below, which has no capture mode to
 * choose and must get the truth (a refused query would read as complete). */
static grt_status event_query(grt_event *ev, bool by_app) {
  grt_status st = ev_lock(ev);
  if (st) return st;
  if (!(st = by_app ? sync_check(ev) : captured(ev))) st = grt__query_seq(ev->exec, ev->stream, ev->seq);
  pthread_mutex_unlock(&ev->exec->lock);
  return st;
}

grt_status grt_event_query(grt_event *ev) { return event_query(ev, true); }

typedef struct snap {
  grt_stream *s;
  uint64_t seq;
} snap;

static bool snap_done(grt_exec *exec, void *ctx) {
  (void)exec;
  snap *t = ctx;
  return grt__done(t->s) >= t->seq;
}

grt_status grt_event_synchronize(grt_event *ev) {
  grt_status st = ev_lock(ev);
  if (st) return st;
  grt_exec *exec = ev->exec;
  grt_stream *on = ev->stream; /* the snapshot's stream, for the sync observers */
  if (grt__in_body(exec)) st = GRT_ERR_NOT_PERMITTED;
  else if (exec->error) st = exec->error;
  else if ((st = sync_check(ev))) {
  } else if (ev->stream) {
    snap t = {ev->stream, ev->seq}; /* the snapshot at call time */
    st = grt__wait(exec, snap_done, &t, !(ev->flags & GRT_EVENT_BLOCKING_SYNC), false);
  }
  pthread_mutex_unlock(&exec->lock);
  if (!st) grt__sync_notify(exec, GRT__SYNC_EVENT, on);
  return st;
}

grt_status grt_event_elapsed_ns(grt_event *start, grt_event *end, int64_t *ns) {
  grt_status st = ev_check(start);
  if (st || (st = ev_check(end)) || !ns) return st ? st : GRT_ERR_INVALID_ARG;
  if (start->exec != end->exec) return GRT_ERR_WRONG_DEVICE;
  grt_exec *exec = start->exec;
  pthread_mutex_lock(&exec->lock);
  if (start->destroyed || end->destroyed) st = GRT_ERR_INVALID_HANDLE;
  else if (start->cap || end->cap) {
    st = captured(start);
    if (captured(end)) st = GRT_ERR_CAPTURED_EVENT;
  } else if (!start->stream || !end->stream) st = GRT_ERR_INVALID_HANDLE; /* CUDA: never recorded */
  else if ((start->flags | end->flags) & GRT_EVENT_DISABLE_TIMING) st = GRT_ERR_INVALID_HANDLE; /* CUDA, too */
  else if (grt__done(start->stream) < start->seq || grt__done(end->stream) < end->seq) st = GRT_ERR_NOT_READY;
  else if (!start->time_valid || !end->time_valid) st = GRT_ERR_STATE; /* cancelled by a sticky error */
  else *ns = (int64_t)(end->time_ns - start->time_ns);
  pthread_mutex_unlock(&exec->lock);
  return st;
}

grt_status grt_event_elapsed_time(grt_event *start, grt_event *end, float *ms) {
  if (!ms) return GRT_ERR_INVALID_ARG;
  int64_t ns;
  grt_status st = grt_event_elapsed_ns(start, end, &ns);
  if (!st) *ms = (float)((double)ns / 1e6);
  return st;
}

/* ---- grt_stream_ops over these events (ctx is the exec) ----
 * An id is the address of a timing-disabled event the id owns. The ops only
 * compose the public event calls above, so their validation is those calls'. */

static grt_event *id_event(uint64_t id) { return (grt_event *)(uintptr_t)id; }

/* GRT_ERR_WRONG_DEVICE for a valid event of another exec; anything else is
 * left to the event call's own validation. */
static grt_status foreign(void *ctx, const grt_event *ev) {
  return ev && ev->magic == GRT__EVENT_MAGIC && ev->exec != ctx ? GRT_ERR_WRONG_DEVICE : GRT_OK;
}

static grt_status ops_record(void *ctx, grt_stream_id id, uint64_t *event) {
  grt_exec *exec = ctx;
  grt_stream *s;
  grt_event *ev;
  if (!event) return GRT_ERR_INVALID_ARG;
  grt_status st = grt_exec_stream_from_id(exec, id, &s);
  if (st || (st = grt_event_create(exec, GRT_EVENT_DISABLE_TIMING, &ev))) return st;
  if ((st = grt_event_record(ev, s))) {
    grt__ignore(grt_event_destroy(ev)); /* just created by this thread: cannot fail */
    return st;
  }
  *event = (uint64_t)(uintptr_t)ev;
  return GRT_OK;
}

/* A failed query counts as done: the caller's deferred free must not hang. */
static int ops_query(void *ctx, uint64_t event) {
  grt_event *ev = id_event(event);
  grt_status st = foreign(ctx, ev);
  if (!st) st = event_query(ev, false);
  return st != GRT_ERR_NOT_READY;
}

/* The contract returns nothing: a failure is the exec's sticky error, which
 * later calls report and which makes ops_query say done. */
static void ops_synchronize(void *ctx, uint64_t event) {
  (void)ctx;
  grt__ignore(grt_event_synchronize(id_event(event)));
}

static void ops_destroy(void *ctx, uint64_t event) {
  grt_event *ev = id_event(event);
  if (!foreign(ctx, ev)) grt__ignore(grt_event_destroy(ev)); /* a destroyed id: nothing left to do */
}

grt_status grt_exec_stream_ops(grt_exec *exec, grt_stream_ops *out) {
  if (!exec || exec->magic != GRT__EXEC_MAGIC || !out) return GRT_ERR_INVALID_ARG;
  *out = (grt_stream_ops){exec, ops_record, ops_query, ops_synchronize, ops_destroy};
  return GRT_OK;
}
