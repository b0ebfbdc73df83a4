/* scenario_pipeline.c — S1 (overlap) and S2 (false serialization): a chunked
 * H2D -> compute -> D2H pipeline issued in different stream layouts.
 *
 * Every layout moves the same bytes: chunk k is copied in, transformed by a
 * kernel (out = in XOR 0x5a, on real device bytes) and copied out, and
 * the output is checked. Cross-stream edges are events re-recorded per chunk
 * (a wait binds to the snapshot at call time, so one event per stage
 * suffices). The DAG prediction for SERIAL and STREAMS is the flow-shop
 * recurrence over the three stages (one engine each, zero-cost markers):
 *   H[k] = H[k-1] + th,  C[k] = max(C[k-1], H[k]) + tc,  D[k] = max(D[k-1], C[k]) + td.
 */
#include <stdlib.h>
#include <string.h>

#include "scenarios/scenario.h"

typedef struct xform {
  grt_device *dev;
  grt_devptr in, out;
  uint64_t n;
} xform;

static void xform_body(void *p) {
  xform *x = p;
  unsigned char *in, *out;
  if (grt_device_host_ptr(x->dev, x->in, x->n, (void **)&in) || grt_device_host_ptr(x->dev, x->out, x->n, (void **)&out))
    return;
  /* Cheap and vectorizable: the modelled duration, not the CPU, is the cost. */
  for (uint64_t i = 0; i < x->n; i++) out[i] = in[i] ^ 0x5a;
}

static uint64_t max_u64(uint64_t a, uint64_t b) { return a > b ? a : b; }

/* *out: the DAG's prediction (0 for the legacy layouts). */
static grt_status predict(grt_exec *exec, const grt__pipe_params *p, grt__pipe_layout layout, uint64_t *out) {
  uint64_t th, td;
  grt_status st = grt_exec_copy_duration_ns(exec, GRT_ENGINE_COPY_H2D, p->chunk_bytes, &th);
  if (!st) st = grt_exec_copy_duration_ns(exec, GRT_ENGINE_COPY_D2H, p->chunk_bytes, &td);
  if (st) return st;
  if (layout == GRT__PIPE_SERIAL) {
    *out = p->chunks * (th + p->kernel_ns + td);
    return GRT_OK;
  }
  uint64_t h = 0, c = 0, d = 0;
  for (unsigned k = 0; layout == GRT__PIPE_STREAMS && k < p->chunks; k++) {
    h += th;
    c = max_u64(c, h) + p->kernel_ns;
    d = max_u64(d, c) + td;
  }
  *out = d;
  return GRT_OK;
}

typedef struct pipe_ctx {
  grt_exec *exec;
  grt_device *dev;
  grt_stream *sh, *sc, *sd; /* stage streams (may alias) */
  grt_stream *owned[3];
  grt_event *eh, *ec, *t0, *t1;
  grt_devptr *din, *dout;
  unsigned char *hin, *hout;
  xform *args;
} pipe_ctx;

static grt_status make_streams(pipe_ctx *pp, grt__pipe_layout layout) {
  grt_status st;
  unsigned copy_flags = layout == GRT__PIPE_LEGACY ? GRT_STREAM_DEFAULT : GRT_STREAM_NON_BLOCKING;
  static const char *const names[3] = {"h2d", "compute", "d2h"};
  if (layout == GRT__PIPE_SERIAL) {
    if ((st = grt_stream_create(pp->exec, GRT_STREAM_NON_BLOCKING, 0, &pp->owned[0]))) return st;
    if ((st = grt_stream_set_name(pp->owned[0], "serial"))) return st;
    pp->sh = pp->sc = pp->sd = pp->owned[0];
    return GRT_OK;
  }
  for (int i = 0; i < 3; i++) {
    if (i == 1 && layout != GRT__PIPE_STREAMS) continue;
    if ((st = grt_stream_create(pp->exec, copy_flags, 0, &pp->owned[i]))) return st;
    if ((st = grt_stream_set_name(pp->owned[i], names[i]))) return st;
  }
  pp->sh = pp->owned[0];
  pp->sd = pp->owned[2];
  if (layout == GRT__PIPE_STREAMS) pp->sc = pp->owned[1];
  else if ((st = grt_exec_legacy_stream(pp->exec, &pp->sc))) return st;
  return GRT_OK;
}

static grt_status alloc_buffers(pipe_ctx *pp, const grt__pipe_params *p) {
  size_t total = (size_t)p->chunks * p->chunk_bytes;
  pp->din = calloc(p->chunks, sizeof *pp->din);
  pp->dout = calloc(p->chunks, sizeof *pp->dout);
  pp->args = calloc(p->chunks, sizeof *pp->args);
  pp->hin = malloc(total);
  pp->hout = calloc(1, total);
  if (!pp->din || !pp->dout || !pp->args || !pp->hin || !pp->hout) return GRT_ERR_NOMEM;
  for (size_t i = 0; i < total; i++) pp->hin[i] = (unsigned char)(i * 131 + 7);
  for (unsigned k = 0; k < p->chunks; k++) {
    grt_status st = grt_device_malloc(pp->dev, p->chunk_bytes, &pp->din[k]);
    if (st || (st = grt_device_malloc(pp->dev, p->chunk_bytes, &pp->dout[k]))) return st;
    pp->args[k] = (xform){pp->dev, pp->din[k], pp->dout[k], p->chunk_bytes};
  }
  /* Touch every page now: first-touch page faults would otherwise land inside
   * the first layout's ops and bias the comparison. */
  memset(pp->hout, 0, total);
  for (unsigned k = 0; k < p->chunks; k++) {
    void *h;
    if (!grt_device_host_ptr(pp->dev, pp->din[k], p->chunk_bytes, &h)) memset(h, 0, p->chunk_bytes);
    if (!grt_device_host_ptr(pp->dev, pp->dout[k], p->chunk_bytes, &h)) memset(h, 0, p->chunk_bytes);
  }
  return GRT_OK;
}

static grt_status issue(pipe_ctx *pp, const grt__pipe_params *p) {
  grt_status st;
  if ((st = grt_event_record(pp->t0, pp->sh))) return st;
  for (unsigned k = 0; k < p->chunks; k++) {
    size_t off = (size_t)k * p->chunk_bytes;
    grt_kernel_desc kd = {xform_body, &pp->args[k], p->kernel_ns, GRT_ENGINE_COMPUTE, "xform"};
    if ((st = grt_memcpy_h2d_async(pp->sh, pp->din[k], pp->hin + off, p->chunk_bytes))) return st;
    if ((st = grt_event_record(pp->eh, pp->sh)) || (st = grt_stream_wait_event(pp->sc, pp->eh))) return st;
    if ((st = grt_launch_kernel(pp->sc, &kd))) return st;
    if ((st = grt_event_record(pp->ec, pp->sc)) || (st = grt_stream_wait_event(pp->sd, pp->ec))) return st;
    if ((st = grt_memcpy_d2h_async(pp->sd, pp->hout + off, pp->dout[k], p->chunk_bytes))) return st;
  }
  return grt_event_record(pp->t1, pp->sd);
}

static void keep_first(grt_status *first, grt_status st) {
  if (*first == GRT_OK) *first = st;
}

/* Frees and destroys whatever was made (NULL and 0 are skipped); the first
 * failure, GRT_OK when all went. */
static grt_status release(pipe_ctx *pp, const grt__pipe_params *p) {
  grt_status st = GRT_OK;
  for (unsigned k = 0; k < p->chunks; k++) {
    if (pp->din && pp->din[k]) keep_first(&st, grt_device_free(pp->dev, pp->din[k]));
    if (pp->dout && pp->dout[k]) keep_first(&st, grt_device_free(pp->dev, pp->dout[k]));
  }
  for (int i = 0; i < 3; i++) keep_first(&st, grt_stream_destroy(pp->owned[i]));
  keep_first(&st, grt_event_destroy(pp->eh));
  keep_first(&st, grt_event_destroy(pp->ec));
  keep_first(&st, grt_event_destroy(pp->t0));
  keep_first(&st, grt_event_destroy(pp->t1));
  free(pp->din);
  free(pp->dout);
  free(pp->args);
  free(pp->hin);
  free(pp->hout);
  return st;
}

grt_status grt__scn_pipeline(grt_exec *exec, const grt__pipe_params *p, grt__pipe_layout layout,
                             grt__pipe_result *out) {
  if (!exec || !p || !out || !p->chunks || !p->chunk_bytes) return GRT_ERR_INVALID_ARG;
  memset(out, 0, sizeof *out);
  pipe_ctx pp = {0};
  pp.exec = exec;
  grt_status st = grt_exec_get_device(exec, &pp.dev);
  if (!st) st = make_streams(&pp, layout);
  if (!st) st = grt_event_create(exec, GRT_EVENT_DISABLE_TIMING, &pp.eh);
  if (!st) st = grt_event_create(exec, GRT_EVENT_DISABLE_TIMING, &pp.ec);
  if (!st) st = grt_event_create(exec, 0, &pp.t0);
  if (!st) st = grt_event_create(exec, 0, &pp.t1);
  if (!st) st = alloc_buffers(&pp, p);
  if (!st) st = issue(&pp, p);
  if (!st) st = grt_exec_synchronize(exec);
  int64_t ns = 0;
  if (!st) st = grt_event_elapsed_ns(pp.t0, pp.t1, &ns);
  if (!st) st = predict(exec, p, layout, &out->predicted_ns);
  if (!st) {
    out->elapsed_ns = (uint64_t)ns;
    out->output_ok = 1;
    size_t total = (size_t)p->chunks * p->chunk_bytes;
    for (size_t i = 0; i < total; i++)
      if (pp.hout[i] != (pp.hin[i] ^ 0x5a)) {
        out->output_ok = 0;
        break;
      }
  }
  grt_status rst = release(&pp, p);
  return st ? st : rst;
}
