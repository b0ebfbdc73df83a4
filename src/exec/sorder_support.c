/* sorder_support.c — two small additions the stream-ordered layer needs from
 * the executor: a stream's name (reports name both streams of a race) and a
 * host delay (a pinned-host allocation costs host time on either clock).
 *
 * Kept in a file of its own so that nothing else in src/exec changes. The host
 * delay under the virtual clock runs the simulation until no event remains at
 * or before the target time, then moves the clock to the target: the device
 * keeps working while the host is busy, exactly as with a slept delay.
 */
#include <errno.h>
#include <time.h>

#include "exec/exec_impl.h"

grt_status grt_stream_get_name(grt_stream *s, char *buf, size_t buf_size) {
  grt_status st = grt__stream_check(s);
  if (st || !buf || !buf_size) return st ? st : GRT_ERR_INVALID_ARG;
  pthread_mutex_lock(&s->exec->lock);
  snprintf(buf, buf_size, "%s", s->name);
  pthread_mutex_unlock(&s->exec->lock);
  return GRT_OK;
}

typedef struct delay_target {
  uint64_t t;
} delay_target;

/* True when nothing can happen before the target any more: no ready op waits
 * for a free slot and the earliest running op ends after the target. */
static bool delay_done(grt_exec *exec, void *ctx) {
  const delay_target *d = ctx;
  if (exec->now_ns >= d->t) return true;
  for (unsigned e = 0; e < GRT_ENGINE_COUNT; e++) {
    const grt__engine *g = &exec->engines[e];
    if (g->rq_head && g->busy < g->slots) return false; /* dispatch first */
  }
  return exec->heap_n == 0 || exec->heap[0].t > d->t;
}

grt_status grt_exec_host_delay(grt_exec *exec, uint64_t ns) {
  if (!exec || exec->magic != GRT__EXEC_MAGIC) return GRT_ERR_INVALID_ARG;
  if (exec->cfg.clock == GRT_CLOCK_THREADS) {
    pthread_mutex_lock(&exec->lock);
    grt_status st = grt__in_body(exec) ? GRT_ERR_NOT_PERMITTED : GRT_OK;
    pthread_mutex_unlock(&exec->lock);
    if (st || !ns) return st;
    struct timespec ts = {(time_t)(ns / 1000000000u), (long)(ns % 1000000000u)};
    while (nanosleep(&ts, &ts) == -1 && errno == EINTR) {
    }
    return GRT_OK;
  }
  pthread_mutex_lock(&exec->lock);
  grt_status st = grt__in_body(exec) ? GRT_ERR_NOT_PERMITTED : exec->error;
  if (!st) {
    delay_target d = {exec->now_ns + ns};
    st = grt__virtual_wait(exec, delay_done, &d);
    if (!st && exec->now_ns < d.t) exec->now_ns = d.t;
  }
  pthread_mutex_unlock(&exec->lock);
  return st;
}
