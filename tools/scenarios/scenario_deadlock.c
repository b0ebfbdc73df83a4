/* scenario_deadlock.c — S4: waits that can and cannot deadlock.
 *
 * Blocking user events can wait for work not yet issued, so a cycle of them
 * (or a host function waiting for work queued behind itself) never finishes;
 * the exec detects the quiescent cycle and reports GRT_ERR_DEADLOCK naming the
 * streams and events. Plain events arranged "in a cycle" finish: each wait
 * binds to work issued before the wait call, and never-recorded is done.
 */
#include <stdio.h>
#include <string.h>

#include "scenarios/scenario.h"

typedef struct dl_objs {
  grt_stream *s[3];
  grt_user_event *u[2];
  grt_event *e[2];
} dl_objs;

typedef struct hf_wait {
  grt_user_event *u;
  grt_status st;
} hf_wait;

static void host_fn_wait(void *p) {
  hf_wait *h = p;
  h->st = grt_user_event_wait(h->u, 1);
}

static void noop(void *p) { (void)p; }

static grt_status make(grt_exec *exec, dl_objs *o, int streams) {
  static const char *const sn[3] = {"A", "B", "C"};
  static const char *const un[2] = {"u1", "u2"};
  static const char *const en[2] = {"eA", "eB"};
  grt_status st = GRT_OK;
  for (int i = 0; i < streams && !st; i++) {
    st = grt_stream_create(exec, GRT_STREAM_NON_BLOCKING, 0, &o->s[i]);
    if (!st) st = grt_stream_set_name(o->s[i], sn[i]);
  }
  for (int i = 0; i < 2 && !st; i++) st = grt_user_event_create(exec, un[i], &o->u[i]);
  for (int i = 0; i < 2 && !st; i++) {
    st = grt_event_create(exec, 0, &o->e[i]);
    if (!st) st = grt_event_set_name(o->e[i], en[i]);
  }
  return st;
}

/* Destroys what make() made (NULL slots are no-ops); the first failure. The
 * exec resolves a deadlock before it reports it, so even then nothing here
 * is busy. */
static grt_status destroy(dl_objs *o) {
  grt_status st = GRT_OK, d;
  for (int i = 0; i < 3; i++)
    if ((d = grt_stream_destroy(o->s[i])) && !st) st = d;
  for (int i = 0; i < 2; i++)
    if ((d = grt_user_event_destroy(o->u[i])) && !st) st = d;
  for (int i = 0; i < 2; i++)
    if ((d = grt_event_destroy(o->e[i])) && !st) st = d;
  return st;
}

static grt_status issue(grt_exec *exec, grt__deadlock_case c, dl_objs *o, hf_wait *hw) {
  grt_kernel_desc k = {noop, NULL, 1000, GRT_ENGINE_COMPUTE, "work"};
  grt_stream *A = o->s[0], *B = o->s[1], *C = o->s[2];
  grt_user_event *u1 = o->u[0], *u2 = o->u[1];
  grt_status st = GRT_OK;
  (void)exec;
#define TRY(x) \
  if ((st = (x))) return st
  switch (c) {
    case GRT__DL_UEV_CYCLE:
      TRY(grt_stream_wait_user_event(A, u1, 1));
      TRY(grt_launch_kernel(A, &k));
      TRY(grt_stream_signal_user_event(A, u2, 1));
      TRY(grt_stream_wait_user_event(B, u2, 1));
      TRY(grt_launch_kernel(B, &k));
      TRY(grt_stream_signal_user_event(B, u1, 1));
      break;
    case GRT__DL_UEV_CYCLE3:
      TRY(grt_stream_wait_user_event(A, u1, 1));
      TRY(grt_launch_kernel(A, &k));
      TRY(grt_event_record(o->e[0], A));
      TRY(grt_stream_wait_event(B, o->e[0]));
      TRY(grt_stream_signal_user_event(B, u2, 1));
      TRY(grt_stream_wait_user_event(C, u2, 1));
      TRY(grt_stream_signal_user_event(C, u1, 1));
      break;
    case GRT__DL_HOST_FN:
      hw->u = u1;
      TRY(grt_launch_kernel(A, &k));
      TRY(grt_launch_host_func(A, host_fn_wait, hw));
      TRY(grt_stream_signal_user_event(A, u1, 1));
      break;
    case GRT__DL_HOST_FN_CROSS:
      hw->u = u1;
      TRY(grt_launch_host_func(A, host_fn_wait, hw));
      TRY(grt_event_record(o->e[0], A));
      TRY(grt_stream_wait_event(B, o->e[0]));
      TRY(grt_launch_kernel(B, &k));
      TRY(grt_stream_signal_user_event(B, u1, 1));
      break;
    case GRT__DL_PLAIN_EVENTS:
      TRY(grt_stream_wait_event(A, o->e[1])); /* never recorded: no wait */
      TRY(grt_launch_kernel(A, &k));
      TRY(grt_event_record(o->e[0], A));
      TRY(grt_launch_kernel(B, &k));
      TRY(grt_event_record(o->e[1], B));
      TRY(grt_stream_wait_event(B, o->e[0]));
      TRY(grt_stream_wait_event(A, o->e[1]));
      TRY(grt_launch_kernel(A, &k));
      TRY(grt_launch_kernel(B, &k));
      TRY(grt_event_record(o->e[0], A));
      TRY(grt_event_record(o->e[1], B));
      TRY(grt_stream_wait_event(A, o->e[1]));
      TRY(grt_stream_wait_event(B, o->e[0]));
      break;
  }
#undef TRY
  return st;
}

grt_status grt__scn_deadlock(grt_exec *exec, grt__deadlock_case c, char *msg, size_t msg_size) {
  if (!exec || (msg && !msg_size)) return GRT_ERR_INVALID_ARG;
  dl_objs o;
  memset(&o, 0, sizeof o);
  hf_wait hw = {NULL, GRT_OK};
  grt_status st = make(exec, &o, c == GRT__DL_UEV_CYCLE3 ? 3 : 2);
  if (!st) st = issue(exec, c, &o, &hw);
  if (!st) st = grt_exec_synchronize(exec);
  if (msg) {
    /* Returns the sticky error the message describes: the synchronize's own
     * status, unless the case failed earlier. */
    grt_status sticky = grt_exec_get_error(exec, msg, msg_size);
    if (!st) st = sticky;
    if ((c == GRT__DL_HOST_FN || c == GRT__DL_HOST_FN_CROSS) && hw.st) {
      size_t n = strlen(msg);
      snprintf(msg + n, msg_size - n, " (the host function's wait returned %s)", grt_status_name(hw.st));
    }
  }
  grt_status dst = destroy(&o);
  return st ? st : dst;
}
