/* cuda_capture.c — stream capture on the CUDA backend: begin, end, status
 * and freeing the graph, over the driver's cuStreamBeginCapture family. No
 * rule is checked here: the driver's verdict, read through the one status
 * table (grt_status_from_cuda), is the point, so that the model's capture
 * errors can be held against a real GPU's. */
#include <stdint.h>

#include "device/cuda_impl.h"
#include "gpurt/cuda.h"

/* The calls below run with the device's context current and name their
 * entry point in last_error when they fail. */
static grt_status finish(grt__cuda_dev *d, int token, CUresult r, const char *what) {
  grt__cuda_leave(d, token);
  return r == CUDA_SUCCESS ? GRT_OK : grt__cuda_fail(d, 0, r, what);
}

grt_status grt_cuda_stream_begin_capture(grt_cuda_stream *s, unsigned mode) {
  if (!s || mode > GRT_CUDA_CAPTURE_RELAXED) return GRT_ERR_INVALID_ARG;
  grt__cuda_dev *d;
  CUstream h = grt__cuda_stream_raw(s, &d);
  if (!d->cu->StreamBeginCapture) return grt__cuda_fail_missing(d, 0, "cuStreamBeginCapture");
  int tok = grt__cuda_enter(d);
  return finish(d, tok, d->cu->StreamBeginCapture(h, (CUstreamCaptureMode)mode), "cuStreamBeginCapture");
}

grt_status grt_cuda_stream_end_capture(grt_cuda_stream *s, void **graph) {
  if (!s || !graph) return GRT_ERR_INVALID_ARG;
  *graph = NULL;
  grt__cuda_dev *d;
  CUstream h = grt__cuda_stream_raw(s, &d);
  if (!d->cu->StreamEndCapture) return grt__cuda_fail_missing(d, 0, "cuStreamEndCapture");
  CUgraph g = NULL;
  int tok = grt__cuda_enter(d);
  grt_status st = finish(d, tok, d->cu->StreamEndCapture(h, &g), "cuStreamEndCapture");
  if (!st) *graph = (void *)g;
  return st;
}

grt_status grt_cuda_stream_capture_status(grt_cuda_stream *s, int *status) {
  if (!s || !status) return GRT_ERR_INVALID_ARG;
  grt__cuda_dev *d;
  CUstream h = grt__cuda_stream_raw(s, &d);
  if (!d->cu->StreamIsCapturing) return grt__cuda_fail_missing(d, 0, "cuStreamIsCapturing");
  CUstreamCaptureStatus cs = CU_STREAM_CAPTURE_STATUS_NONE;
  int tok = grt__cuda_enter(d);
  grt_status st = finish(d, tok, d->cu->StreamIsCapturing(h, &cs), "cuStreamIsCapturing");
  if (!st) *status = (int)cs; /* unwritten on failure, as CUDA leaves it unspecified */
  return st;
}

grt_status grt_cuda_graph_destroy(grt_device *dev, void *graph) {
  if (!graph) return GRT_OK;
  if (!dev) return GRT_ERR_INVALID_ARG;
  grt__cuda_dev *d = grt__cuda_of(dev);
  if (!d) return GRT_ERR_UNSUPPORTED;
  if (!d->cu->GraphDestroy) return grt__cuda_fail_missing(d, 0, "cuGraphDestroy");
  int tok = grt__cuda_enter(d);
  return finish(d, tok, d->cu->GraphDestroy((CUgraph)graph), "cuGraphDestroy");
}
