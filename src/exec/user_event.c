/* user_event.c — blocking user events: a 64-bit value that only rises, waited
 * on until value >= target (cuStreamWaitValue64 >=, Level Zero events,
 * timeline semaphores). Unlike plain events a wait here can wait for work that
 * has not been issued yet, so waits can form cycles: deadlock.c finds them.
 *
 * Waiters: streams whose head is a UEV_WAIT op sit in u->waiters; host
 * threads (including host functions) count in u->host_waiters and sleep on the
 * exec's done_cv. pending_signals counts queued UEV_SIGNAL ops: a user event
 * with one queued is taken to be signalled by that stream; the detector treats
 * one with none queued as awaiting the host.
 */
#include <stdlib.h>
#include <string.h>

#include "exec/exec_impl.h"

static grt_status uev_lock(grt_user_event *u) {
  if (!u || u->magic != GRT__UEV_MAGIC) return GRT_ERR_INVALID_ARG;
  pthread_mutex_lock(&u->exec->lock);
  if (u->destroyed) {
    pthread_mutex_unlock(&u->exec->lock);
    return GRT_ERR_INVALID_HANDLE;
  }
  return GRT_OK;
}

grt_status grt_user_event_create(grt_exec *exec, const char *name, grt_user_event **out) {
  if (!out) return GRT_ERR_INVALID_ARG;
  *out = NULL;
  if (!exec || exec->magic != GRT__EXEC_MAGIC) return GRT_ERR_INVALID_ARG;
  grt_user_event *u = calloc(1, sizeof *u);
  if (!u) return GRT_ERR_NOMEM;
  u->magic = GRT__UEV_MAGIC;
  u->exec = exec;
  pthread_mutex_lock(&exec->lock);
  grt_status st = grt__fault_take(exec, GRT_EXEC_FAULT_USER_EVENT_CREATE);
  if (st) {
    pthread_mutex_unlock(&exec->lock);
    free(u);
    return st;
  }
  if (name) snprintf(u->name, sizeof u->name, "%s", name);
  else snprintf(u->name, sizeof u->name, "user-event-%u", exec->live_uevs + 1);
  u->all_next = exec->uevs;
  exec->uevs = u;
  exec->live_uevs++;
  pthread_mutex_unlock(&exec->lock);
  *out = u;
  return GRT_OK;
}

grt_status grt_user_event_destroy(grt_user_event *u) {
  if (!u) return GRT_OK;
  grt_status st = uev_lock(u);
  if (st) return st;
  if (u->waiters || u->host_waiters || u->pending_signals) {
    st = GRT_ERR_BUSY;
  } else {
    /* A queued UEV_WAIT that is not yet the head also references u. */
    for (grt_stream *s = u->exec->streams; s && !st; s = s->all_next)
      for (grt__op *op = s->head; op; op = op->next)
        if (op->kind == GRT__OP_UEV_WAIT && op->u.uev.uev == u) {
          st = GRT_ERR_BUSY;
          break;
        }
  }
  if (!st) {
    u->destroyed = true;
    u->exec->live_uevs--;
  }
  pthread_mutex_unlock(&u->exec->lock);
  return st;
}

grt_status grt_user_event_signal(grt_user_event *u, uint64_t v) {
  grt_status st = uev_lock(u);
  if (st) return st;
  grt_exec *exec = u->exec;
  if (v > u->value) {
    u->value = v;
    grt__wake_uev(exec, u);
    grt__sched_drain(exec);
  }
  pthread_mutex_unlock(&exec->lock);
  return GRT_OK;
}

grt_status grt_user_event_value(grt_user_event *u, uint64_t *out) {
  if (!out) return GRT_ERR_INVALID_ARG;
  grt_status st = uev_lock(u);
  if (st) return st;
  *out = u->value;
  pthread_mutex_unlock(&u->exec->lock);
  return GRT_OK;
}

typedef struct uev_target {
  grt_user_event *u;
  uint64_t v;
} uev_target;

static bool uev_reached(grt_exec *exec, void *ctx) {
  (void)exec;
  uev_target *t = ctx;
  return t->u->value >= t->v;
}

grt_status grt_user_event_wait(grt_user_event *u, uint64_t v) {
  grt_status st = uev_lock(u);
  if (st) return st;
  grt_exec *exec = u->exec;
  if (exec->error) {
    st = exec->error;
  } else if (u->value < v) {
    /* Inside a host function: its op is blocked, the detector follows the wait. */
    grt__op *op = grt__current_op(exec);
    if (op && op->kind != GRT__OP_HOST_FUNC) {
      st = GRT_ERR_NOT_PERMITTED; /* kernels never block */
    } else {
      if (op) {
        op->blocked = 1;
        op->wait_uev = u;
        op->wait_value = v;
        exec->blocked_running++;
        exec->engines[op->engine].blocked++;
      }
      u->host_waiters++;
      exec->state_gen++;
      uev_target t = {u, v};
      grt__waiter w = {uev_reached, &t, false, op != NULL, u, v, NULL};
      st = grt__wait_on(exec, &w);
      u->host_waiters--;
      if (op) {
        op->blocked = 0;
        op->wait_uev = NULL;
        exec->blocked_running--;
        exec->engines[op->engine].blocked--;
      }
    }
  }
  pthread_mutex_unlock(&exec->lock);
  return st;
}

static grt_status uev_op(grt_stream *s, grt_user_event *u, uint64_t v, uint8_t kind) {
  if (!u || u->magic != GRT__UEV_MAGIC) return GRT_ERR_INVALID_ARG;
  grt_status st = grt__stream_check(s);
  if (st) return st;
  if (u->exec != s->exec) return GRT_ERR_WRONG_DEVICE;
  if ((st = grt__stream_lock(s))) return st;
  grt_exec *exec = s->exec;
  grt__op *op = NULL;
  if (u->destroyed) st = GRT_ERR_INVALID_HANDLE;
  else if (!(op = grt__op_alloc(exec, s, kind))) st = GRT_ERR_NOMEM;
  if (op) {
    op->u.uev.uev = u;
    op->u.uev.value = v;
    st = grt__submit(op);
  }
  pthread_mutex_unlock(&exec->lock);
  return st;
}

grt_status grt_stream_signal_user_event(grt_stream *s, grt_user_event *u, uint64_t v) {
  return uev_op(s, u, v, GRT__OP_UEV_SIGNAL);
}

grt_status grt_stream_wait_user_event(grt_stream *s, grt_user_event *u, uint64_t v) {
  return uev_op(s, u, v, GRT__OP_UEV_WAIT);
}
