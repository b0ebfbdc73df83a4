/* cuda_gate.c — a stream held back until the host opens a gate.
 *
 * The gate is one 32-bit word of pinned, device-mapped host memory. Blocking a
 * stream enqueues cuStreamWaitValue32(word >= 1), so the GPU itself waits and
 * no driver thread is tied up; where the driver refuses that, a host function
 * polls the word instead (host functions may be serialized, so that fallback
 * can also hold back other streams' host functions; gate_mechanism says which
 * was used). A watchdog thread opens the gate after timeout_ms, so a lost open
 * cannot hang the device. Invariant: the word goes 0 -> 1 once, never back.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "device/cuda_impl.h"
#include "gpurt/cuda.h"

struct grt_cuda_gate {
  grt__cuda_dev *d;
  volatile uint32_t *word; /* pinned host memory, mapped for the device */
  CUdeviceptr dword;
  unsigned timeout_ms;
  pthread_t watchdog;
  pthread_mutex_t lock; /* guards closing and timed_out */
  pthread_cond_t cond;
  int closing, timed_out;
  const char *mechanism;
};

static void open_word(grt_cuda_gate *g) { __atomic_store_n(g->word, 1u, __ATOMIC_SEQ_CST); }
static int is_open(grt_cuda_gate *g) { return __atomic_load_n(g->word, __ATOMIC_SEQ_CST) != 0; }

static void *watchdog_main(void *arg) {
  grt_cuda_gate *g = arg;
  struct timespec until;
  clock_gettime(CLOCK_REALTIME, &until);
  until.tv_sec += g->timeout_ms / 1000;
  until.tv_nsec += (long)(g->timeout_ms % 1000) * 1000000L;
  if (until.tv_nsec >= 1000000000L) until.tv_sec++, until.tv_nsec -= 1000000000L;
  pthread_mutex_lock(&g->lock);
  int rc = 0;
  while (!g->closing && !is_open(g) && rc != ETIMEDOUT) rc = pthread_cond_timedwait(&g->cond, &g->lock, &until);
  if (!g->closing && !is_open(g)) {
    g->timed_out = 1;
    open_word(g);
  }
  pthread_mutex_unlock(&g->lock);
  return NULL;
}

grt_status grt_cuda_gate_create(grt_device *dev, unsigned timeout_ms, grt_cuda_gate **out) {
  if (!dev || !out || timeout_ms == 0) return GRT_ERR_INVALID_ARG;
  *out = NULL;
  grt__cuda_dev *d = grt__cuda_of(dev);
  if (!d) return GRT_ERR_UNSUPPORTED;
  if (!d->cu->MemHostAlloc || !d->cu->MemFreeHost || !d->cu->MemHostGetDevicePointer)
    return grt__cuda_fail_missing(d, 0, "cuMemHostAlloc/cuMemHostGetDevicePointer");
  grt_cuda_gate *g = calloc(1, sizeof *g);
  if (!g) return GRT_ERR_NOMEM;
  g->d = d;
  g->timeout_ms = timeout_ms;
  g->mechanism = "";
  void *p = NULL;
  int tok = grt__cuda_enter(d);
  CUresult r = d->cu->MemHostAlloc(&p, 64, CU_MEMHOSTALLOC_DEVICEMAP | CU_MEMHOSTALLOC_PORTABLE);
  const char *what = "cuMemHostAlloc";
  if (r == CUDA_SUCCESS) {
    what = "cuMemHostGetDevicePointer";
    r = d->cu->MemHostGetDevicePointer(&g->dword, p, 0);
    if (r != CUDA_SUCCESS) d->cu->MemFreeHost(p);
  }
  grt__cuda_leave(d, tok);
  if (r != CUDA_SUCCESS) {
    free(g);
    return grt__cuda_fail(d, 0, r, what);
  }
  g->word = p;
  *g->word = 0;
  pthread_mutex_init(&g->lock, NULL);
  pthread_cond_init(&g->cond, NULL);
  if (pthread_create(&g->watchdog, NULL, watchdog_main, g) != 0) {
    d->cu->MemFreeHost(p);
    pthread_mutex_destroy(&g->lock);
    pthread_cond_destroy(&g->cond);
    free(g);
    return GRT_ERR_NOMEM;
  }
  grt__cuda_child(d, +1);
  *out = g;
  return GRT_OK;
}

/* The fallback: a host function spinning (politely) until the word is set. */
static void poll_gate(void *arg) {
  volatile uint32_t *word = arg;
  struct timespec nap = {0, 200000};
  while (__atomic_load_n(word, __ATOMIC_SEQ_CST) == 0) nanosleep(&nap, NULL);
}

grt_status grt_cuda_gate_block(grt_cuda_gate *g, grt_cuda_stream *s) {
  if (!g || !s) return GRT_ERR_INVALID_ARG;
  grt__cuda_dev *d = NULL;
  CUstream h = grt__cuda_stream_raw(s, &d);
  if (d != g->d) return GRT_ERR_WRONG_DEVICE;
  int tok = grt__cuda_enter(d);
  CUresult r = CUDA_ERROR_NOT_SUPPORTED;
  if (d->cu->StreamWaitValue32) r = d->cu->StreamWaitValue32(h, g->dword, 1, CU_STREAM_WAIT_VALUE_GEQ);
  if (r == CUDA_SUCCESS) {
    g->mechanism = "wait_value32";
  } else if (d->cu->LaunchHostFunc) {
    r = d->cu->LaunchHostFunc(h, poll_gate, (void *)g->word);
    if (r == CUDA_SUCCESS) g->mechanism = "host_func";
  }
  grt__cuda_leave(d, tok);
  return r == CUDA_SUCCESS ? GRT_OK : grt__cuda_fail(d, 0, r, "cuStreamWaitValue32/cuLaunchHostFunc");
}

grt_status grt_cuda_gate_open(grt_cuda_gate *g) {
  if (!g) return GRT_ERR_INVALID_ARG;
  pthread_mutex_lock(&g->lock);
  open_word(g);
  pthread_cond_broadcast(&g->cond);
  pthread_mutex_unlock(&g->lock);
  return GRT_OK;
}

int grt_cuda_gate_timed_out(const grt_cuda_gate *g) {
  if (!g) return 0;
  grt_cuda_gate *m = (grt_cuda_gate *)g; /* the lock is not part of the gate's value */
  pthread_mutex_lock(&m->lock);
  int t = m->timed_out;
  pthread_mutex_unlock(&m->lock);
  return t;
}

const char *grt_cuda_gate_mechanism(const grt_cuda_gate *g) { return g ? g->mechanism : ""; }

grt_status grt_cuda_gate_destroy(grt_cuda_gate *g) {
  if (!g) return GRT_OK;
  pthread_mutex_lock(&g->lock);
  g->closing = 1;
  open_word(g);
  pthread_cond_broadcast(&g->cond);
  pthread_mutex_unlock(&g->lock);
  pthread_join(g->watchdog, NULL);
  grt__cuda_dev *d = g->d;
  int tok = grt__cuda_enter(d);
  CUresult r = d->cu->MemFreeHost((void *)g->word);
  grt__cuda_leave(d, tok);
  pthread_mutex_destroy(&g->lock);
  pthread_cond_destroy(&g->cond);
  grt__cuda_child(d, -1);
  free(g);
  return r == CUDA_SUCCESS ? GRT_OK : grt__cuda_fail(d, 0, r, "cuMemFreeHost");
}
