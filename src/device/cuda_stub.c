/* cuda_stub.c — the CUDA API in a build without cuda.h: every function exists
 * and reports GRT_ERR_UNSUPPORTED, so callers need no #ifdefs. Compiled
 * instead of the other cuda_*.c files (CMakeLists.txt chooses). */
#include <stdio.h>

#include "gpurt/cuda.h"

#define UNSUP return GRT_ERR_UNSUPPORTED

grt_status grt_cuda_probe(int *device_count, char *msg, size_t msg_size) {
  if (device_count) *device_count = 0;
  if (msg && msg_size) snprintf(msg, msg_size, "gpurt was built without the CUDA headers (cuda.h)");
  UNSUP;
}
grt_status grt_device_create_cuda(int ordinal, grt_device **out) {
  (void)ordinal;
  if (!out) return GRT_ERR_INVALID_ARG;
  *out = NULL;
  UNSUP;
}
grt_status grt_cuda_device_name(grt_device *dev, char *buf, size_t n) { (void)dev, (void)buf, (void)n; UNSUP; }
grt_status grt_cuda_stream_create(grt_device *dev, unsigned f, int p, grt_cuda_stream **out) {
  (void)dev, (void)f, (void)p;
  if (out) *out = NULL;
  UNSUP;
}
grt_status grt_cuda_stream_legacy(grt_device *dev, grt_cuda_stream **out) {
  (void)dev;
  if (out) *out = NULL;
  UNSUP;
}
grt_status grt_cuda_stream_wrap(grt_device *dev, void *h, grt_cuda_stream **out) {
  (void)dev, (void)h;
  if (out) *out = NULL;
  UNSUP;
}
grt_status grt_cuda_stream_destroy(grt_cuda_stream *s) { return s ? GRT_ERR_UNSUPPORTED : GRT_OK; }
void *grt_cuda_stream_handle(const grt_cuda_stream *s) { (void)s; return NULL; }
grt_stream_id grt_cuda_stream_id(const grt_cuda_stream *s) { (void)s; return 0; }
grt_status grt_cuda_stream_query(grt_cuda_stream *s) { (void)s; UNSUP; }
grt_status grt_cuda_stream_synchronize(grt_cuda_stream *s) { (void)s; UNSUP; }
grt_status grt_cuda_stream_wait_event(grt_cuda_stream *s, grt_cuda_event *e) { (void)s, (void)e; UNSUP; }
grt_status grt_cuda_launch_host_func(grt_cuda_stream *s, void (*fn)(void *), void *a) { (void)s, (void)fn, (void)a; UNSUP; }
grt_status grt_cuda_memcpy_htod_async(grt_cuda_stream *s, grt_devptr d, const void *h, uint64_t n) {
  (void)s, (void)d, (void)h, (void)n;
  UNSUP;
}
grt_status grt_cuda_memcpy_dtoh_async(grt_cuda_stream *s, void *h, grt_devptr d, uint64_t n) {
  (void)s, (void)d, (void)h, (void)n;
  UNSUP;
}
grt_status grt_cuda_memcpy_dtod_async(grt_cuda_stream *s, grt_devptr d, grt_devptr e, uint64_t n) {
  (void)s, (void)d, (void)e, (void)n;
  UNSUP;
}
grt_status grt_cuda_memset_async(grt_cuda_stream *s, grt_devptr d, uint8_t v, uint64_t n) {
  (void)s, (void)d, (void)v, (void)n;
  UNSUP;
}
grt_status grt_cuda_event_create(grt_device *dev, unsigned f, grt_cuda_event **out) {
  (void)dev, (void)f;
  if (out) *out = NULL;
  UNSUP;
}
grt_status grt_cuda_event_destroy(grt_cuda_event *e) { return e ? GRT_ERR_UNSUPPORTED : GRT_OK; }
grt_status grt_cuda_event_record(grt_cuda_event *e, grt_cuda_stream *s) { (void)e, (void)s; UNSUP; }
grt_status grt_cuda_event_query(grt_cuda_event *e) { (void)e; UNSUP; }
grt_status grt_cuda_event_synchronize(grt_cuda_event *e) { (void)e; UNSUP; }
grt_status grt_cuda_event_elapsed_ms(grt_cuda_event *a, grt_cuda_event *b, float *ms) { (void)a, (void)b, (void)ms; UNSUP; }
grt_status grt_cuda_stream_begin_capture(grt_cuda_stream *s, unsigned mode) { (void)s, (void)mode; UNSUP; }
grt_status grt_cuda_stream_end_capture(grt_cuda_stream *s, void **graph) {
  (void)s;
  if (graph) *graph = NULL;
  UNSUP;
}
grt_status grt_cuda_stream_capture_status(grt_cuda_stream *s, int *status) { (void)s, (void)status; UNSUP; }
grt_status grt_cuda_graph_destroy(grt_device *dev, void *graph) {
  (void)dev;
  return graph ? GRT_ERR_UNSUPPORTED : GRT_OK;
}
grt_status grt_cuda_gate_create(grt_device *dev, unsigned t, grt_cuda_gate **out) {
  (void)dev, (void)t;
  if (out) *out = NULL;
  UNSUP;
}
grt_status grt_cuda_gate_block(grt_cuda_gate *g, grt_cuda_stream *s) { (void)g, (void)s; UNSUP; }
grt_status grt_cuda_gate_open(grt_cuda_gate *g) { (void)g; UNSUP; }
int grt_cuda_gate_timed_out(const grt_cuda_gate *g) { (void)g; return 0; }
const char *grt_cuda_gate_mechanism(const grt_cuda_gate *g) { (void)g; return ""; }
grt_status grt_cuda_gate_destroy(grt_cuda_gate *g) { return g ? GRT_ERR_UNSUPPORTED : GRT_OK; }
grt_status grt_cuda_host_alloc(grt_device *dev, uint64_t bytes, void **out) {
  (void)dev, (void)bytes;
  if (out) *out = NULL;
  UNSUP;
}
grt_status grt_cuda_host_free(grt_device *dev, void *p) { (void)dev, (void)p; UNSUP; }
