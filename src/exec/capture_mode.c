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
 */
#include "exec/graph_impl.h"

/* Whether capture c forbids unsafe calls to the calling thread. */
static bool forbids(const grt__capture *c, pthread_t self) {
  if (pthread_equal(c->thread, self)) return c->mode != GRT_CAPTURE_RELAXED;
  return c->mode == GRT_CAPTURE_GLOBAL;
}

grt_status grt__capture_unsafe_check(grt_exec *exec) {
  pthread_t self = pthread_self();
  grt_status st = GRT_OK;
  for (grt__capture *c = exec->captures; c; c = c->next)
    if (forbids(c, self)) {
      grt__graph_invalidate(c);
      st = GRT_ERR_CAPTURE_UNSUPPORTED;
    }
  return st;
}
