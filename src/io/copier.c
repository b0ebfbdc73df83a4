/* copier.c — where a load's copies go: the exec's copy stream (the
 * simulated device: a real memcpy into its backing bytes) or a CUDA stream
 * (cuMemcpyHtoDAsync from page-locked memory the driver allocated), behind
 * one interface: copy, mark a staging slot after its copies, wait for a
 * slot, drain, and the staging memory itself. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "gpurt/cuda.h"
#include "io/io_impl.h"

grt_status grt__copier_open(grt__copier *c, const grt_load_config *cfg, unsigned slots) {
  memset(c, 0, sizeof *c);
  c->cuda = cfg->cuda_stream;
  c->slots = slots;
  grt_status s = GRT_OK;
  if (c->cuda) {
    c->cuda_dev = cfg->cuda_device;
    c->cuda_events = calloc(slots ? slots : 1, sizeof *c->cuda_events);
    if (!c->cuda_events) return GRT_ERR_NOMEM;
    for (unsigned i = 0; !s && i < slots; i++) s = grt_cuda_event_create(c->cuda_dev, GRT_CUDA_EVENT_DEFAULT, &c->cuda_events[i]);
    return s;
  }
  c->events = calloc(slots ? slots : 1, sizeof *c->events);
  if (!c->events) return GRT_ERR_NOMEM;
  if (!(s = grt_stream_create(cfg->exec, 0, 0, &c->stream))) s = grt_stream_set_name(c->stream, "load copy");
  for (unsigned i = 0; !s && i < slots; i++) s = grt_event_create(cfg->exec, 0, &c->events[i]);
  return s;
}

grt_status grt__copier_h2d(grt__copier *c, grt_devptr dst, const void *src, uint64_t n) {
  return c->cuda ? grt_cuda_memcpy_htod_async(c->cuda, dst, src, n) : grt_memcpy_h2d_async(c->stream, dst, src, n);
}

grt_status grt__copier_mark(grt__copier *c, unsigned slot) {
  return c->cuda ? grt_cuda_event_record(c->cuda_events[slot], c->cuda) : grt_event_record(c->events[slot], c->stream);
}

grt_status grt__copier_wait(grt__copier *c, unsigned slot) {
  return c->cuda ? grt_cuda_event_synchronize(c->cuda_events[slot]) : grt_event_synchronize(c->events[slot]);
}

grt_status grt__copier_drain(grt__copier *c) {
  if (c->cuda) return grt_cuda_stream_synchronize(c->cuda);
  return c->stream ? grt_stream_synchronize(c->stream) : GRT_OK;
}

grt_status grt__copier_close(grt__copier *c) {
  grt_status first = grt__copier_drain(c), s;
  for (unsigned i = 0; c->events && i < c->slots; i++)
    if (c->events[i] && (s = grt_event_destroy(c->events[i])) && !first) first = s;
  for (unsigned i = 0; c->cuda_events && i < c->slots; i++)
    if (c->cuda_events[i] && (s = grt_cuda_event_destroy(c->cuda_events[i])) && !first) first = s;
  if (c->stream && (s = grt_stream_destroy(c->stream)) && !first) first = s;
  free(c->events);
  free(c->cuda_events);
  memset(c, 0, sizeof *c);
  return first;
}

grt_status grt__copier_host_alloc(grt__copier *c, uint64_t bytes, uint64_t align, void **out, char *note, size_t note_size) {
  *out = NULL;
  if (c->cuda) return grt_cuda_host_alloc(c->cuda_dev, bytes, out); /* page-locked by the driver, page aligned */
  if (posix_memalign(out, align, bytes)) return *out = NULL, GRT_ERR_NOMEM;
  if (mlock(*out, bytes) && note && !note[0]) /* page-locked where RLIMIT_MEMLOCK allows */
    snprintf(note, note_size, "staging buffers not page-locked: %s (RLIMIT_MEMLOCK)", strerror(errno));
  return GRT_OK;
}

void grt__copier_host_free(grt__copier *c, void *p, uint64_t bytes) {
  if (!p) return;
  if (c->cuda) {
    grt_status s = grt_cuda_host_free(c->cuda_dev, p);
    (void)s; /* the driver reports nothing a caller could act on here */
    return;
  }
  munlock(p, bytes);
  free(p);
}
