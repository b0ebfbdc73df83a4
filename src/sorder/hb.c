/* hb.c — the happens-before sanitizer's core: vector clocks per stream and the
 * per-buffer access history (PyTorch's CUDA sanitizer design).
 *
 * Invariants: streams[0] is the host; a stream's own entry clock[i][i] is the
 * number of its last op; clocks only grow (joins are element-wise max); an
 * event's clock is the recording stream's clock at the record; a buffer's
 * reads all come after its last write in the history (a write clears them).
 * An access by op n on stream i conflicts with an earlier access (j, m) when
 * j != i and clock[i][j] < m; conflicts need a write (or a free) on one side.
 * Everything here runs under so->lock.
 */
#include <stdlib.h>
#include <string.h>

#include "gpurt/exec.h"
#include "sorder/sorder_impl.h"

/* ---- clocks ---- */

static uint64_t clock_get(const grt__hb_clock *c, uint32_t i) { return i < c->n ? c->v[i] : 0; }

static grt_status clock_grow(grt__hb_clock *c, uint32_t n) {
  if (n <= c->n) return GRT_OK;
  if (n > c->cap) {
    uint32_t cap = c->cap ? c->cap : 8;
    while (cap < n) cap *= 2;
    uint64_t *v = realloc(c->v, cap * sizeof *v);
    if (!v) return GRT_ERR_NOMEM;
    c->v = v;
    c->cap = cap;
  }
  memset(c->v + c->n, 0, (n - c->n) * sizeof *c->v);
  c->n = n;
  return GRT_OK;
}

grt_status grt__hb_join(grt__hb_clock *dst, const grt__hb_clock *src) {
  grt_status st = clock_grow(dst, src->n);
  if (st) return st;
  for (uint32_t i = 0; i < src->n; i++)
    if (src->v[i] > dst->v[i]) dst->v[i] = src->v[i];
  return GRT_OK;
}

grt_status grt__hb_clock_copy(grt__hb_clock *dst, const grt__hb_clock *src) {
  dst->n = 0;
  return grt__hb_join(dst, src);
}

void grt__hb_clock_free(grt__hb_clock *c) {
  free(c->v);
  memset(c, 0, sizeof *c);
}

/* ---- streams ---- */

void grt__hb_init(grt_sorder *so) {
  grt__u64map_init(&so->by_id);
  grt__u64map_init(&so->ev_clocks);
  grt__u64map_init(&so->buffers);
}

static void free_clock_entry(grt__u64map *m) {
  grt__u64map_iter it = grt__u64map_begin(m);
  void *v;
  while (grt__u64map_next(m, &it, NULL, &v)) {
    grt__hb_clock *c = v;
    grt__hb_clock_free(c);
    free(c);
  }
  grt__u64map_free(m);
}

void grt__hb_free(grt_sorder *so) {
  for (size_t i = 0; i < so->n_streams; i++) grt__hb_clock_free(&so->streams[i].vc);
  free(so->streams);
  so->streams = NULL;
  so->n_streams = so->cap_streams = 0;
  grt__u64map_free(&so->by_id);
  free_clock_entry(&so->ev_clocks);
  grt__u64map *m = &so->buffers;
  grt__u64map_iter it = grt__u64map_begin(m);
  void *v;
  while (grt__u64map_next(m, &it, NULL, &v)) {
    grt__hb_buffer *b = v;
    free(b->reads);
    free(b);
  }
  grt__u64map_free(m);
}

static int add_stream(grt_sorder *so, grt_stream *s, grt_stream_id id, bool legacy, bool blocking) {
  if (so->n_streams == so->cap_streams) {
    size_t cap = so->cap_streams ? so->cap_streams * 2 : 8;
    grt__hb_stream *v = realloc(so->streams, cap * sizeof *v);
    if (!v) return -1;
    so->streams = v;
    so->cap_streams = cap;
  }
  size_t i = so->n_streams;
  so->streams[i] = (grt__hb_stream){s, id, legacy, blocking, {NULL, 0, 0}};
  if (s && !grt__u64map_put(&so->by_id, id, (void *)(uintptr_t)(i + 1))) return -1;
  so->n_streams++;
  return (int)i;
}

int grt__hb_stream_index(grt_sorder *so, grt_stream *s, grt_status *st) {
  if (!so->n_streams && add_stream(so, NULL, GRT__HB_HOST_ID, false, false) < 0) {
    *st = GRT_ERR_NOMEM;
    return -1;
  }
  grt_stream_id id;
  unsigned flags;
  if ((*st = grt_stream_get_id(s, &id)) || (*st = grt_stream_get_flags(s, &flags))) return -1;
  uintptr_t v = (uintptr_t)grt__u64map_get(&so->by_id, id);
  if (v) {
    so->streams[v - 1].s = s; /* ids are not reused while the exec lives; refresh anyway */
    return (int)(v - 1);
  }
  int i = add_stream(so, s, id, id == 0, !(flags & GRT_STREAM_NON_BLOCKING));
  if (i < 0) *st = GRT_ERR_NOMEM;
  return i;
}

static grt__hb_stream *legacy_stream(grt_sorder *so) {
  uintptr_t v = (uintptr_t)grt__u64map_get(&so->by_id, 0);
  return v ? &so->streams[v - 1] : NULL;
}

grt_status grt__hb_issue(grt_sorder *so, int i) {
  grt__hb_stream *t = &so->streams[i];
  grt_status st = grt__hb_join(&t->vc, &so->streams[GRT__HB_HOST].vc); /* host program order */
  if (st) return st;
  if (t->legacy) { /* waits for everything issued to blocking streams */
    for (size_t j = 1; j < so->n_streams && !st; j++)
      if ((int)j != i && so->streams[j].blocking) st = grt__hb_join(&so->streams[i].vc, &so->streams[j].vc);
  } else if (t->blocking) {
    grt__hb_stream *leg = legacy_stream(so);
    if (leg) st = grt__hb_join(&t->vc, &leg->vc);
  }
  return st;
}

grt__hb_ref grt__hb_op(grt_sorder *so, int i, const char *name, int write) {
  grt__hb_ref r;
  memset(&r, 0, sizeof r);
  grt__hb_clock *c = &so->streams[i].vc;
  if (clock_grow(c, (uint32_t)i + 1) == GRT_OK) c->v[i]++;
  r.stream = (uint32_t)i;
  r.seq = clock_get(c, (uint32_t)i);
  r.write = write;
  snprintf(r.op, sizeof r.op, "%s", name && *name ? name : "kernel");
  return r;
}

/* ---- events ---- */

grt__hb_clock *grt__hb_event_clock(grt_sorder *so, grt_event *ev) {
  return grt__u64map_get(&so->ev_clocks, (uint64_t)(uintptr_t)ev);
}

grt_status grt__hb_record(grt_sorder *so, int i, grt_event *ev) {
  grt__hb_clock *c = grt__hb_event_clock(so, ev);
  if (!c) {
    c = calloc(1, sizeof *c);
    if (!c || !grt__u64map_put(&so->ev_clocks, (uint64_t)(uintptr_t)ev, c)) {
      free(c);
      return GRT_ERR_NOMEM;
    }
  }
  return grt__hb_clock_copy(c, &so->streams[i].vc); /* re-recording overwrites the snapshot */
}

grt_status grt__hb_wait(grt_sorder *so, int i, grt_event *ev) {
  grt__hb_clock *c = grt__hb_event_clock(so, ev);
  return c ? grt__hb_join(&so->streams[i].vc, c) : GRT_OK; /* never recorded: a no-op, as in CUDA */
}

/* ---- buffers ---- */

static grt__hb_buffer *buffer_get(grt_sorder *so, grt_devptr ptr, uint64_t bytes) {
  grt__hb_buffer *b = grt__u64map_get(&so->buffers, ptr);
  if (b) {
    if (bytes > b->bytes) b->bytes = bytes;
    return b;
  }
  b = calloc(1, sizeof *b);
  if (!b || !grt__u64map_put(&so->buffers, ptr, b)) {
    free(b);
    return NULL;
  }
  b->ptr = ptr;
  b->bytes = bytes;
  return b;
}

static bool ordered(const grt__hb_clock *c, int i, const grt__hb_ref *p) {
  return (int)p->stream == i || clock_get(c, p->stream) >= p->seq;
}

static void add_read(grt__hb_buffer *b, const grt__hb_ref *r) {
  for (uint32_t k = 0; k < b->n_reads; k++)
    if (b->reads[k].stream == r->stream) { /* a later read of the same stream covers the earlier one */
      b->reads[k] = *r;
      return;
    }
  if (b->n_reads == b->cap_reads) {
    uint32_t cap = b->cap_reads ? b->cap_reads * 2 : 4;
    grt__hb_ref *v = realloc(b->reads, cap * sizeof *v);
    if (!v) return; /* host OOM: the read is not remembered (a missed report, never a false one) */
    b->reads = v;
    b->cap_reads = cap;
  }
  b->reads[b->n_reads++] = *r;
}

void grt__hb_access(grt_sorder *so, int i, const grt__hb_ref *r, grt_devptr ptr, uint64_t bytes, grt__hb_kind k) {
  grt__hb_buffer *b = buffer_get(so, ptr, bytes);
  if (!b) return;
  const grt__hb_clock *c = &so->streams[i].vc;
  if (b->freed && (k == GRT__HB_READ || k == GRT__HB_WRITE || k == GRT__HB_FREE)) {
    grt__so_report(so, GRT_SORDER_USE_AFTER_FREE, ptr, r, &b->last_write);
  } else if (b->has_write && !(k == GRT__HB_ALLOC && b->free_done) && !ordered(c, i, &b->last_write)) {
    grt__so_report(so, GRT_SORDER_RACE, ptr, r, &b->last_write);
  }
  if (k != GRT__HB_READ) {
    for (uint32_t n = 0; n < b->n_reads; n++)
      if (!ordered(c, i, &b->reads[n])) {
        grt__so_report(so, GRT_SORDER_RACE, ptr, r, &b->reads[n]);
        break; /* one report per access is enough to name the problem */
      }
    b->n_reads = 0;
    b->has_write = true;
    b->last_write = *r;
    b->freed = k == GRT__HB_FREE;
    b->free_done = false;
  } else {
    add_read(b, r);
  }
}

void grt__hb_free_done(grt_sorder *so, grt_devptr ptr) {
  grt__hb_buffer *b = grt__u64map_get(&so->buffers, ptr);
  if (b && b->freed) b->free_done = true;
}
