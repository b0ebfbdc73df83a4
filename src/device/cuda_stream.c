/* cuda_stream.c — streams, events, host functions and copies on the CUDA
 * backend: thin wrappers over the driver that check their handles, make the
 * device's context current and turn CUresults into grt_status + message.
 *
 * A grt_cuda_stream either owns its CUstream (created here) or borrows one
 * (the legacy stream, or a handle from PyTorch); each live wrapper and event
 * counts as a child of the device, which refuses destroy while any live.
 */
#include <stdint.h>
#include <stdlib.h>

#include "device/cuda_impl.h"
#include "gpurt/cuda.h"

struct grt_cuda_stream {
  grt__cuda_dev *d;
  CUstream h;
  int owned;
};

struct grt_cuda_event {
  grt__cuda_dev *d;
  CUevent h;
};

/* Runs `call` (a CUresult expression) with the context current; on failure
 * records the message and returns the mapped status. */
#define CU_RUN(d, fnfield, sym, call)                                    \
  do {                                                                   \
    if (!(d)->cu->fnfield) return grt__cuda_fail_missing((d), 0, sym);   \
    int tok_ = grt__cuda_enter(d);                                       \
    CUresult r_ = (call);                                                \
    grt__cuda_leave((d), tok_);                                          \
    if (r_ != CUDA_SUCCESS) return grt__cuda_fail((d), 0, r_, sym);      \
  } while (0)

static grt_status new_stream(grt__cuda_dev *d, CUstream h, int owned, grt_cuda_stream **out) {
  grt_cuda_stream *s = malloc(sizeof *s);
  if (!s) return GRT_ERR_NOMEM;
  *s = (grt_cuda_stream){d, h, owned};
  grt__cuda_child(d, +1);
  *out = s;
  return GRT_OK;
}

grt_status grt_cuda_stream_create(grt_device *dev, unsigned flags, int priority, grt_cuda_stream **out) {
  if (!dev || !out || (flags & ~GRT_CUDA_STREAM_NON_BLOCKING)) return GRT_ERR_INVALID_ARG;
  *out = NULL;
  grt__cuda_dev *d = grt__cuda_of(dev);
  if (!d) return GRT_ERR_UNSUPPORTED;
  CUstream h = NULL;
  unsigned cf = (flags & GRT_CUDA_STREAM_NON_BLOCKING) ? CU_STREAM_NON_BLOCKING : CU_STREAM_DEFAULT;
  CU_RUN(d, StreamCreateWithPriority, "cuStreamCreateWithPriority", d->cu->StreamCreateWithPriority(&h, cf, priority));
  grt_status st = new_stream(d, h, 1, out);
  if (st) d->cu->StreamDestroy(h);
  return st;
}

grt_status grt_cuda_stream_legacy(grt_device *dev, grt_cuda_stream **out) {
  if (!dev || !out) return GRT_ERR_INVALID_ARG;
  *out = NULL;
  grt__cuda_dev *d = grt__cuda_of(dev);
  return d ? new_stream(d, CU_STREAM_LEGACY, 0, out) : GRT_ERR_UNSUPPORTED;
}

grt_status grt_cuda_stream_wrap(grt_device *dev, void *cu_stream, grt_cuda_stream **out) {
  if (!dev || !out) return GRT_ERR_INVALID_ARG;
  *out = NULL;
  grt__cuda_dev *d = grt__cuda_of(dev);
  return d ? new_stream(d, (CUstream)cu_stream, 0, out) : GRT_ERR_UNSUPPORTED;
}

grt_status grt_cuda_stream_destroy(grt_cuda_stream *s) {
  if (!s) return GRT_OK;
  grt__cuda_dev *d = s->d;
  if (s->owned) CU_RUN(d, StreamDestroy, "cuStreamDestroy", d->cu->StreamDestroy(s->h));
  grt__cuda_child(d, -1);
  free(s);
  return GRT_OK;
}

void *grt_cuda_stream_handle(const grt_cuda_stream *s) {
  return s && s->h != CU_STREAM_LEGACY ? (void *)s->h : NULL;
}

grt_stream_id grt_cuda_stream_id(const grt_cuda_stream *s) { return (grt_stream_id)(uintptr_t)grt_cuda_stream_handle(s); }

grt_status grt_cuda_stream_query(grt_cuda_stream *s) {
  if (!s) return GRT_ERR_INVALID_ARG;
  grt__cuda_dev *d = s->d;
  if (!d->cu->StreamQuery) return grt__cuda_fail_missing(d, 0, "cuStreamQuery");
  int tok = grt__cuda_enter(d);
  CUresult r = d->cu->StreamQuery(s->h);
  grt__cuda_leave(d, tok);
  if (r == CUDA_ERROR_NOT_READY) return GRT_ERR_NOT_READY;
  return r == CUDA_SUCCESS ? GRT_OK : grt__cuda_fail(d, 0, r, "cuStreamQuery");
}

grt_status grt_cuda_stream_synchronize(grt_cuda_stream *s) {
  if (!s) return GRT_ERR_INVALID_ARG;
  CU_RUN(s->d, StreamSynchronize, "cuStreamSynchronize", s->d->cu->StreamSynchronize(s->h));
  return GRT_OK;
}

grt_status grt_cuda_stream_wait_event(grt_cuda_stream *s, grt_cuda_event *ev) {
  if (!s || !ev) return GRT_ERR_INVALID_ARG;
  if (s->d != ev->d) return GRT_ERR_WRONG_DEVICE;
  CU_RUN(s->d, StreamWaitEvent, "cuStreamWaitEvent", s->d->cu->StreamWaitEvent(s->h, ev->h, 0));
  return GRT_OK;
}

grt_status grt_cuda_launch_host_func(grt_cuda_stream *s, void (*fn)(void *arg), void *arg) {
  if (!s || !fn) return GRT_ERR_INVALID_ARG;
  CU_RUN(s->d, LaunchHostFunc, "cuLaunchHostFunc", s->d->cu->LaunchHostFunc(s->h, fn, arg));
  return GRT_OK;
}

grt_status grt_cuda_memcpy_htod_async(grt_cuda_stream *s, grt_devptr dst, const void *src, uint64_t bytes) {
  if (!s || !src || !dst) return GRT_ERR_INVALID_ARG;
  CU_RUN(s->d, MemcpyHtoDAsync, "cuMemcpyHtoDAsync", s->d->cu->MemcpyHtoDAsync(dst, src, (size_t)bytes, s->h));
  return GRT_OK;
}

grt_status grt_cuda_memcpy_dtoh_async(grt_cuda_stream *s, void *dst, grt_devptr src, uint64_t bytes) {
  if (!s || !src || !dst) return GRT_ERR_INVALID_ARG;
  CU_RUN(s->d, MemcpyDtoHAsync, "cuMemcpyDtoHAsync", s->d->cu->MemcpyDtoHAsync(dst, src, (size_t)bytes, s->h));
  return GRT_OK;
}

grt_status grt_cuda_memcpy_dtod_async(grt_cuda_stream *s, grt_devptr dst, grt_devptr src, uint64_t bytes) {
  if (!s || !src || !dst) return GRT_ERR_INVALID_ARG;
  CU_RUN(s->d, MemcpyDtoDAsync, "cuMemcpyDtoDAsync", s->d->cu->MemcpyDtoDAsync(dst, src, (size_t)bytes, s->h));
  return GRT_OK;
}

grt_status grt_cuda_host_alloc(grt_device *dev, uint64_t bytes, void **out) {
  if (!dev || !out || !bytes) return GRT_ERR_INVALID_ARG;
  *out = NULL;
  grt__cuda_dev *d = grt__cuda_of(dev);
  if (!d) return GRT_ERR_UNSUPPORTED;
  CU_RUN(d, MemHostAlloc, "cuMemHostAlloc", d->cu->MemHostAlloc(out, (size_t)bytes, CU_MEMHOSTALLOC_PORTABLE));
  return GRT_OK;
}

grt_status grt_cuda_host_free(grt_device *dev, void *p) {
  if (!dev) return GRT_ERR_INVALID_ARG;
  if (!p) return GRT_OK;
  grt__cuda_dev *d = grt__cuda_of(dev);
  if (!d) return GRT_ERR_UNSUPPORTED;
  CU_RUN(d, MemFreeHost, "cuMemFreeHost", d->cu->MemFreeHost(p));
  return GRT_OK;
}

grt_status grt_cuda_memset_async(grt_cuda_stream *s, grt_devptr dst, uint8_t value, uint64_t bytes) {
  if (!s || !dst) return GRT_ERR_INVALID_ARG;
  CU_RUN(s->d, MemsetD8Async, "cuMemsetD8Async", s->d->cu->MemsetD8Async(dst, value, (size_t)bytes, s->h));
  return GRT_OK;
}

/* ---- events ---- */

grt_status grt_cuda_event_create(grt_device *dev, unsigned flags, grt_cuda_event **out) {
  if (!dev || !out || (flags & ~GRT_CUDA_EVENT_TIMING)) return GRT_ERR_INVALID_ARG;
  *out = NULL;
  grt__cuda_dev *d = grt__cuda_of(dev);
  if (!d) return GRT_ERR_UNSUPPORTED;
  grt_cuda_event *ev = malloc(sizeof *ev);
  if (!ev) return GRT_ERR_NOMEM;
  CUevent h = NULL;
  unsigned cf = (flags & GRT_CUDA_EVENT_TIMING) ? CU_EVENT_DEFAULT : CU_EVENT_DISABLE_TIMING;
  grt_status st = GRT_OK;
  if (!d->cu->EventCreate || !d->cu->EventDestroy) {
    st = grt__cuda_fail_missing(d, 0, d->cu->EventCreate ? "cuEventDestroy" : "cuEventCreate");
  } else {
    int tok = grt__cuda_enter(d);
    CUresult r = d->cu->EventCreate(&h, cf);
    grt__cuda_leave(d, tok);
    if (r != CUDA_SUCCESS) st = grt__cuda_fail(d, 0, r, "cuEventCreate");
  }
  if (st) {
    free(ev);
    return st;
  }
  *ev = (grt_cuda_event){d, h};
  grt__cuda_child(d, +1);
  *out = ev;
  return GRT_OK;
}

grt_status grt_cuda_event_destroy(grt_cuda_event *ev) {
  if (!ev) return GRT_OK;
  grt__cuda_dev *d = ev->d;
  CU_RUN(d, EventDestroy, "cuEventDestroy", d->cu->EventDestroy(ev->h));
  grt__cuda_child(d, -1);
  free(ev);
  return GRT_OK;
}

grt_status grt_cuda_event_record(grt_cuda_event *ev, grt_cuda_stream *s) {
  if (!ev || !s) return GRT_ERR_INVALID_ARG;
  if (s->d != ev->d) return GRT_ERR_WRONG_DEVICE;
  CU_RUN(ev->d, EventRecord, "cuEventRecord", ev->d->cu->EventRecord(ev->h, s->h));
  return GRT_OK;
}

grt_status grt_cuda_event_query(grt_cuda_event *ev) {
  if (!ev) return GRT_ERR_INVALID_ARG;
  grt__cuda_dev *d = ev->d;
  if (!d->cu->EventQuery) return grt__cuda_fail_missing(d, 0, "cuEventQuery");
  int tok = grt__cuda_enter(d);
  CUresult r = d->cu->EventQuery(ev->h);
  grt__cuda_leave(d, tok);
  if (r == CUDA_ERROR_NOT_READY) return GRT_ERR_NOT_READY;
  return r == CUDA_SUCCESS ? GRT_OK : grt__cuda_fail(d, 0, r, "cuEventQuery");
}

grt_status grt_cuda_event_synchronize(grt_cuda_event *ev) {
  if (!ev) return GRT_ERR_INVALID_ARG;
  CU_RUN(ev->d, EventSynchronize, "cuEventSynchronize", ev->d->cu->EventSynchronize(ev->h));
  return GRT_OK;
}

grt_status grt_cuda_event_elapsed_ms(grt_cuda_event *start, grt_cuda_event *end, float *ms) {
  if (!start || !end || !ms) return GRT_ERR_INVALID_ARG;
  if (start->d != end->d) return GRT_ERR_WRONG_DEVICE;
  float v = 0;
  CU_RUN(start->d, EventElapsedTime, "cuEventElapsedTime", start->d->cu->EventElapsedTime(&v, start->h, end->h));
  *ms = v;
  return GRT_OK;
}

CUstream grt__cuda_stream_raw(grt_cuda_stream *s, grt__cuda_dev **d) {
  *d = s->d;
  return s->h;
}
