/* capture_mode.c — the calls a stream capture forbids by its mode: CUDA's
 * "potentially unsafe" calls. A capture records work instead of running it,
 * so a call that observes or waits for the device (query or synchronize of a
 * stream or event, synchronous device malloc/free) made while one is in
 * progress may depend on work the graph will only replay later. CUDA forbids
 * such a call in a thread with its own capture not begun RELAXED, and in
 * every thread while another thread's GLOBAL capture runs; the call fails
 * with cudaErrorStreamCaptureUnsupported and invalidates the capture that
 * forbade it (docs/EXEC.md, "Graphs").
 *
 * The streams and events of a capture itself are refused whatever the mode
 * (graph_capture.c, stream.c, event.c): those calls always conflict with it.
 *
 * Which captures forbid a thread also depends on the thread's own capture
 * interaction mode (cudaThreadExchangeStreamCaptureMode): GLOBAL, the
 * default, takes both rules above; THREAD_LOCAL only the first (other
 * threads' captures are ignored); RELAXED neither. The mode is per (exec,
 * thread), with no state outside the exec: the value of a pthread key the
 * exec makes at the first exchange, mode + 1 in each thread that set one
 * (NULL: never set, GLOBAL). The value points to nothing, so a thread that
 * ends needs no destructor, a new thread starts at GLOBAL, and
 * pthread_key_delete at exec destroy drops every thread's value at once.
 */
#include <stdint.h>

#include "exec/graph_impl.h"

/* The calling thread's mode (lock held: mode_key_made is written under it). */
static grt_capture_mode thread_mode(grt_exec *exec) {
  if (!exec->mode_key_made) return GRT_CAPTURE_GLOBAL;
  uintptr_t v = (uintptr_t)pthread_getspecific(exec->mode_key);
  return v ? (grt_capture_mode)(v - 1) : GRT_CAPTURE_GLOBAL;
}

/* Whether capture c forbids unsafe calls to the calling thread, whose mode is tm. */
static bool forbids(const grt__capture *c, pthread_t self, grt_capture_mode tm) {
  if (tm == GRT_CAPTURE_RELAXED) return false;
  if (pthread_equal(c->thread, self)) return c->mode != GRT_CAPTURE_RELAXED;
  return tm == GRT_CAPTURE_GLOBAL && c->mode == GRT_CAPTURE_GLOBAL;
}

grt_status grt__capture_unsafe_check(grt_exec *exec) {
  if (!exec->captures) return GRT_OK;
  pthread_t self = pthread_self();
  grt_capture_mode tm = thread_mode(exec);
  grt_status st = GRT_OK;
  for (grt__capture *c = exec->captures; c; c = c->next)
    if (forbids(c, self, tm)) {
      grt__graph_invalidate(c);
      st = GRT_ERR_CAPTURE_UNSUPPORTED;
    }
  return st;
}

grt_status grt_exec_thread_exchange_capture_mode(grt_exec *exec, grt_capture_mode *mode) {
  if (!exec || exec->magic != GRT__EXEC_MAGIC || !mode) return GRT_ERR_INVALID_ARG;
  grt_capture_mode m = *mode;
  if (m != GRT_CAPTURE_GLOBAL && m != GRT_CAPTURE_THREAD_LOCAL && m != GRT_CAPTURE_RELAXED) return GRT_ERR_INVALID_ARG;
  pthread_mutex_lock(&exec->lock);
  grt_status st = GRT_OK;
  if (!exec->mode_key_made) { /* made once, at the first exchange: execs that never exchange hold no key */
    if (pthread_key_create(&exec->mode_key, NULL)) st = GRT_ERR_NOMEM;
    else exec->mode_key_made = true;
  }
  grt_capture_mode old = st ? m : thread_mode(exec);
  if (!st && pthread_setspecific(exec->mode_key, (void *)(uintptr_t)(m + 1))) st = GRT_ERR_NOMEM;
  pthread_mutex_unlock(&exec->lock);
  if (!st) *mode = old;
  return st;
}

void grt__capture_modes_free(grt_exec *exec) {
  if (exec->mode_key_made) (void)pthread_key_delete(exec->mode_key); /* EINVAL only for a key never made */
  exec->mode_key_made = false;
}
