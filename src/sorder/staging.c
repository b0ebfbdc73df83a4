/* staging.c — the double-buffered staging pipeline (docs/SORDER.md): chunk ->
 * H2D on a copy stream -> kernel on a compute stream (event edge) -> D2H on a
 * second copy stream (event edge), with K slots in flight.
 *
 * Slot k holds a pinned input and output buffer and a device input and output
 * buffer. Chunk i uses slot i mod K; before refilling the slot the host waits
 * for the D2H of chunk i - K (which follows that chunk's H2D and kernel), then
 * drains its output. With K = 1 nothing overlaps; with K >= 2 chunk i+1's H2D
 * runs under chunk i's kernel, as the copy engines exist to allow.
 *
 * Invariant: a slot's buffers are touched by the host only after the event of
 * the slot's previous D2H completed. Single-threaded per call.
 */
#include <stdlib.h>
#include <string.h>

#include "base/status.h"
#include "sorder/sorder_impl.h"

#define MAX_SLOTS 16

typedef struct slot {
  unsigned char *hin, *hout; /* pinned */
  grt_devptr din, dout;
  grt_event *h2d, *comp, *d2h;
  struct { grt_device *dev; grt_devptr in, out; uint64_t n; grt_staging_fn fn; void *arg; } k; /* kernel argument */
  int64_t pending; /* chunk whose output is still to drain, -1 none */
} slot;

typedef struct pipe {
  const grt_staging_config *cfg;
  grt_stream *h2d, *comp, *d2h;
  slot s[MAX_SLOTS];
  unsigned n;
} pipe;

static void xor_fn(void *arg, const unsigned char *in, unsigned char *out, uint64_t n) {
  (void)arg;
  for (uint64_t i = 0; i < n; i++) out[i] = in[i] ^ 0x5a;
}

static void kernel_body(void *p) {
  slot *s = p;
  void *in, *out;
  if (grt_device_host_ptr(s->k.dev, s->k.in, s->k.n, &in) || grt_device_host_ptr(s->k.dev, s->k.out, s->k.n, &out))
    return;
  s->k.fn(s->k.arg, in, out, s->k.n);
}

static grt_status setup(pipe *p, grt_device *dev) {
  const grt_staging_config *c = p->cfg;
  grt_status st = GRT_OK;
  grt_stream **ss[3] = {&p->h2d, &p->comp, &p->d2h};
  for (int i = 0; i < 3 && !st; i++) st = grt_stream_create(c->exec, GRT_STREAM_NON_BLOCKING, 0, ss[i]);
  for (unsigned k = 0; k < c->buffers && !st; k++, p->n++) {
    slot *s = &p->s[k];
    s->pending = -1;
    if ((st = grt_pinned_malloc(c->host_pool, c->chunk_bytes, (void **)&s->hin))) break;
    if ((st = grt_pinned_malloc(c->host_pool, c->chunk_bytes, (void **)&s->hout))) break;
    if ((st = grt_malloc_async(c->device_pool, c->chunk_bytes, p->comp, &s->din))) break;
    if ((st = grt_malloc_async(c->device_pool, c->chunk_bytes, p->comp, &s->dout))) break;
    grt_event **ev[3] = {&s->h2d, &s->comp, &s->d2h};
    for (int i = 0; i < 3 && !st; i++) st = grt_event_create(c->exec, GRT_EVENT_DISABLE_TIMING, ev[i]);
    s->k.dev = dev;
    s->k.fn = c->fn ? c->fn : xor_fn;
    s->k.arg = c->arg;
  }
  /* The device buffers become usable on every stream once the compute stream reached their allocation. */
  if (!st) st = grt_mempool_stream_synchronize(c->device_pool, p->comp);
  return st;
}

/* Releases everything setup made, after the work in flight finished; the first failure. */
static grt_status teardown(pipe *p) {
  const grt_staging_config *c = p->cfg;
  grt_status first = grt_exec_synchronize(c->exec);
  for (unsigned k = 0; k < MAX_SLOTS; k++) {
    slot *s = &p->s[k];
    if (s->hin) grt__keep_first(&first, grt_pinned_free(c->host_pool, s->hin));
    if (s->hout) grt__keep_first(&first, grt_pinned_free(c->host_pool, s->hout));
    if (s->din) grt__keep_first(&first, grt_free_async(c->device_pool, s->din, p->comp));
    if (s->dout) grt__keep_first(&first, grt_free_async(c->device_pool, s->dout, p->comp));
    grt__keep_first(&first, grt_event_destroy(s->h2d));
    grt__keep_first(&first, grt_event_destroy(s->comp));
    grt__keep_first(&first, grt_event_destroy(s->d2h));
  }
  if (p->comp) grt__keep_first(&first, grt_mempool_stream_synchronize(c->device_pool, p->comp));
  grt__keep_first(&first, grt_stream_destroy(p->h2d));
  grt__keep_first(&first, grt_stream_destroy(p->comp));
  grt__keep_first(&first, grt_stream_destroy(p->d2h));
  return first;
}

/* Waits for the slot's D2H and copies its output to dst. */
static grt_status drain(pipe *p, slot *s, unsigned char *dst, uint64_t total) {
  if (s->pending < 0) return GRT_OK;
  grt_status st = grt_event_synchronize(s->d2h);
  if (st) return st;
  uint64_t off = (uint64_t)s->pending * p->cfg->chunk_bytes;
  uint64_t n = total - off < p->cfg->chunk_bytes ? total - off : p->cfg->chunk_bytes;
  memcpy(dst + off, s->hout, n);
  s->pending = -1;
  return GRT_OK;
}

static grt_status issue_chunk(pipe *p, slot *s, uint64_t n) {
  const grt_staging_config *c = p->cfg;
  grt_kernel_desc kd = {kernel_body, s, c->kernel_ns, GRT_ENGINE_COMPUTE, "stage compute"};
  s->k.in = s->din;
  s->k.out = s->dout;
  s->k.n = n;
  grt_status st = grt_memcpy_h2d_async(p->h2d, s->din, s->hin, n);
  if (!st) st = grt_event_record(s->h2d, p->h2d);
  if (!st) st = grt_stream_wait_event(p->comp, s->h2d);
  if (!st) st = grt_launch_kernel(p->comp, &kd);
  if (!st) st = grt_event_record(s->comp, p->comp);
  if (!st) st = grt_stream_wait_event(p->d2h, s->comp);
  if (!st) st = grt_memcpy_d2h_async(p->d2h, s->hout, s->dout, n);
  if (!st) st = grt_event_record(s->d2h, p->d2h);
  return st;
}

static grt_status bounds(const grt_staging_config *c, unsigned chunks, grt_staging_result *out) {
  uint64_t h = 0, d = 0;
  grt_status st = grt_exec_copy_duration_ns(c->exec, GRT_ENGINE_COPY_H2D, c->chunk_bytes, &h);
  if (!st) st = grt_exec_copy_duration_ns(c->exec, GRT_ENGINE_COPY_D2H, c->chunk_bytes, &d);
  if (st) return st;
  uint64_t k = c->kernel_ns, m = h > k ? h : k;
  if (d > m) m = d;
  out->serial_bound_ns = chunks * (h + k + d);
  out->overlap_bound_ns = (h + k + d) + (chunks ? chunks - 1 : 0) * m;
  return GRT_OK;
}

grt_status grt_staging_run(const grt_staging_config *cfg, const void *src, void *dst, uint64_t bytes,
                           grt_staging_result *out) {
  if (!cfg || !cfg->exec || !cfg->device_pool || !cfg->host_pool || !src || !dst || !out || !bytes ||
      !cfg->chunk_bytes || cfg->buffers < 1 || cfg->buffers > MAX_SLOTS)
    return GRT_ERR_INVALID_ARG;
  pipe p;
  memset(&p, 0, sizeof p);
  p.cfg = cfg;
  grt_device *dev;
  grt_event *t0 = NULL, *t1 = NULL;
  grt_status st = grt_exec_get_device(cfg->exec, &dev);
  if (!st) st = setup(&p, dev);
  if (!st) st = grt_event_create(cfg->exec, 0, &t0);
  if (!st) st = grt_event_create(cfg->exec, 0, &t1);
  unsigned chunks = (unsigned)((bytes + cfg->chunk_bytes - 1) / cfg->chunk_bytes);
  if (!st) st = grt_event_record(t0, p.h2d);
  for (unsigned i = 0; i < chunks && !st; i++) {
    slot *s = &p.s[i % cfg->buffers];
    if ((st = drain(&p, s, dst, bytes))) break;
    uint64_t off = (uint64_t)i * cfg->chunk_bytes, n = bytes - off < cfg->chunk_bytes ? bytes - off : cfg->chunk_bytes;
    memcpy(s->hin, (const unsigned char *)src + off, n);
    st = issue_chunk(&p, s, n);
    s->pending = i;
  }
  if (!st) st = grt_event_record(t1, p.d2h);
  for (unsigned k = 0; k < cfg->buffers && !st; k++) st = drain(&p, &p.s[k], dst, bytes);
  if (!st) st = grt_event_synchronize(t1);
  int64_t ns = 0;
  if (!st) st = grt_event_elapsed_ns(t0, t1, &ns);
  if (!st) {
    memset(out, 0, sizeof *out);
    out->chunks = chunks;
    out->elapsed_ns = (uint64_t)ns;
    st = bounds(cfg, chunks, out);
  }
  grt__keep_first(&st, grt_event_destroy(t0));
  grt__keep_first(&st, grt_event_destroy(t1));
  grt__keep_first(&st, teardown(&p));
  return st;
}
