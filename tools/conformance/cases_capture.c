/* cases_capture.c — the capture status codes: one script of stream-capture
 * refusals (and the calls around them) run on the executor under both
 * clocks and on a GPU's driver through the CUDA backend. Each step names
 * the status CUDA documents for it; a step that returns another status
 * fails the case and says which, with both CUDA codes (grt_status_to_cuda),
 * so a GPU run shows where the model's table and the driver part. */
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "conformance.h"
#include "gpurt/exec.h"

/* The calls the script makes, on opaque stream and event handles. */
typedef struct capi {
  void *ctx;
  grt_status (*stream)(void *ctx, int blocking, void **out);
  grt_status (*legacy)(void *ctx, void **out);
  grt_status (*stream_destroy)(void *ctx, void *s);
  grt_status (*event)(void *ctx, int timing, void **out);
  grt_status (*event_destroy)(void *ctx, void *e);
  grt_status (*record)(void *ctx, void *e, void *s);
  grt_status (*wait)(void *ctx, void *s, void *e);
  grt_status (*work)(void *ctx, void *s); /* a little work: a kernel, a memset */
  grt_status (*query)(void *ctx, void *s);
  grt_status (*sync)(void *ctx, void *s);
  grt_status (*event_query)(void *ctx, void *e);
  grt_status (*elapsed)(void *ctx, void *a, void *b);
  grt_status (*begin)(void *ctx, void *s, unsigned mode);
  grt_status (*end)(void *ctx, void *s);              /* a graph it yields is destroyed */
  void (*last_error)(void *ctx, char *buf, size_t n); /* the failed call's text; may be NULL */
} capi;

enum { S, T, B, LEG, N_STREAMS };        /* non-blocking s, t; blocking b; legacy */
enum { E, E2, PLAIN, T1, T2, N_EVENTS }; /* PLAIN has timing disabled */

typedef struct world {
  const capi *api;
  void *st[N_STREAMS], *ev[N_EVENTS];
  int step, failed, refused;
  char codes[200]; /* the CUDA codes of the refusals seen, in order */
  char *why;
  size_t why_size;
} world;

static void cuda_name(grt_status st, char *buf, size_t n) {
  int code;
  if (grt_status_to_cuda(st, &code, NULL) == GRT_OK)
    snprintf(buf, n, "%s (%d)", grt_status_name(st), code);
  else
    snprintf(buf, n, "%s (no CUDA code)", grt_status_name(st));
}

/* One step: the first one that differs is the case's verdict. */
static void expect(world *w, const char *what, grt_status got, grt_status want) {
  w->step++;
  if (w->failed) return;
  int code;
  if (got == want) {
    size_t n = strlen(w->codes);
    if (want != GRT_OK && grt_status_to_cuda(want, &code, NULL) == GRT_OK && n + 8 < sizeof w->codes)
      snprintf(w->codes + n, sizeof w->codes - n, "%s%d", n ? " " : "", code), w->refused++;
    return;
  }
  char g[96], x[96];
  cuda_name(got, g, sizeof g);
  cuda_name(want, x, sizeof x);
  char text[200] = "";
  if (got != GRT_OK && w->api->last_error) w->api->last_error(w->api->ctx, text, sizeof text);
  snprintf(w->why, w->why_size, "step %d (%s): got %s, want %s%s%s%s", w->step, what, g, x, text[0] ? " [" : "", text,
           text[0] ? "]" : "");
  w->failed = 1;
}

typedef struct other_end {
  world *w;
  grt_status st;
} other_end;

static void *end_elsewhere(void *arg) {
  other_end *o = arg;
  o->st = o->w->api->end(o->w->api->ctx, o->w->st[S]);
  return NULL;
}

static void refusals(world *w) {
  const capi *a = w->api;
  void *c = a->ctx, *s = w->st[S], *t = w->st[T], *b = w->st[B], *leg = w->st[LEG];
  void *e = w->ev[E], *e2 = w->ev[E2];
  expect(w, "begin on the legacy stream", a->begin(c, leg, GRT_CAPTURE_GLOBAL), GRT_ERR_CAPTURE_UNSUPPORTED);
  expect(w, "begin", a->begin(c, s, GRT_CAPTURE_GLOBAL), GRT_OK);
  expect(w, "begin on a capturing stream", a->begin(c, s, GRT_CAPTURE_GLOBAL), GRT_ERR_STATE);
  expect(w, "query of a capturing stream", a->query(c, s), GRT_ERR_CAPTURE_UNSUPPORTED);
  expect(w, "work into an invalidated capture", a->work(c, s), GRT_ERR_CAPTURE_INVALIDATED);
  expect(w, "end of an invalidated capture", a->end(c, s), GRT_ERR_CAPTURE_INVALIDATED);
  expect(w, "end of a stream not capturing", a->end(c, s), GRT_ERR_STATE);
  /* isolation: an event recorded outside the capture */
  expect(w, "work", a->work(c, t), GRT_OK);
  expect(w, "record outside", a->record(c, e, t), GRT_OK);
  expect(w, "begin", a->begin(c, s, GRT_CAPTURE_GLOBAL), GRT_OK);
  expect(w, "wait on an event recorded outside", a->wait(c, s, e), GRT_ERR_CAPTURE_ISOLATION);
  expect(w, "end", a->end(c, s), GRT_ERR_CAPTURE_INVALIDATED);
  expect(w, "sync", a->sync(c, t), GRT_OK);
  /* a captured event */
  expect(w, "begin", a->begin(c, s, GRT_CAPTURE_RELAXED), GRT_OK);
  expect(w, "work", a->work(c, s), GRT_OK);
  expect(w, "record inside", a->record(c, e, s), GRT_OK);
  expect(w, "query of a captured event", a->event_query(c, e), GRT_ERR_CAPTURED_EVENT);
  expect(w, "end", a->end(c, s), GRT_ERR_CAPTURE_INVALIDATED);
  /* fork, end on the forked stream, join, end */
  expect(w, "begin", a->begin(c, s, GRT_CAPTURE_GLOBAL), GRT_OK);
  expect(w, "record inside", a->record(c, e, s), GRT_OK);
  expect(w, "fork", a->wait(c, t, e), GRT_OK);
  expect(w, "work on the fork", a->work(c, t), GRT_OK);
  expect(w, "end on the forked stream", a->end(c, t), GRT_ERR_CAPTURE_UNMATCHED);
  expect(w, "record on the fork", a->record(c, e2, t), GRT_OK);
  expect(w, "join", a->wait(c, s, e2), GRT_OK);
  expect(w, "end of the joined capture", a->end(c, s), GRT_OK);
  /* a fork that never joins */
  expect(w, "begin", a->begin(c, s, GRT_CAPTURE_GLOBAL), GRT_OK);
  expect(w, "record inside", a->record(c, e, s), GRT_OK);
  expect(w, "fork", a->wait(c, t, e), GRT_OK);
  expect(w, "work on the fork", a->work(c, t), GRT_OK);
  expect(w, "end with the fork unjoined", a->end(c, s), GRT_ERR_CAPTURE_UNJOINED);
  /* two captures merged by an event */
  expect(w, "begin", a->begin(c, s, GRT_CAPTURE_RELAXED), GRT_OK);
  expect(w, "begin", a->begin(c, t, GRT_CAPTURE_RELAXED), GRT_OK);
  expect(w, "record inside", a->record(c, e, s), GRT_OK);
  expect(w, "wait across two captures", a->wait(c, t, e), GRT_ERR_CAPTURE_MERGE);
  expect(w, "end", a->end(c, t), GRT_ERR_CAPTURE_INVALIDATED);
  expect(w, "end", a->end(c, s), GRT_ERR_CAPTURE_INVALIDATED);
  /* a GLOBAL capture ended from another thread */
  expect(w, "begin", a->begin(c, s, GRT_CAPTURE_GLOBAL), GRT_OK);
  other_end o = {w, GRT_ERR_INTERNAL};
  pthread_t th;
  if (pthread_create(&th, NULL, end_elsewhere, &o) == 0) pthread_join(th, NULL);
  expect(w, "end from another thread", o.st, GRT_ERR_CAPTURE_WRONG_THREAD);
  expect(w, "end from its own thread", a->end(c, s), GRT_OK);
  /* the legacy stream while a blocking stream captures */
  expect(w, "begin on a blocking stream", a->begin(c, b, GRT_CAPTURE_RELAXED), GRT_OK);
  expect(w, "query of the legacy stream", a->query(c, leg), GRT_ERR_CAPTURE_IMPLICIT);
  expect(w, "end", a->end(c, b), GRT_ERR_CAPTURE_INVALIDATED);
  /* elapsed time without two timed records */
  expect(w, "elapsed, never recorded", a->elapsed(c, w->ev[T1], w->ev[T2]), GRT_ERR_INVALID_HANDLE);
  expect(w, "record", a->record(c, w->ev[T1], s), GRT_OK);
  expect(w, "record", a->record(c, w->ev[PLAIN], s), GRT_OK);
  expect(w, "sync", a->sync(c, s), GRT_OK);
  expect(w, "elapsed, timing disabled", a->elapsed(c, w->ev[T1], w->ev[PLAIN]), GRT_ERR_INVALID_HANDLE);
}

/* Runs the script; the note is the verdict. Streams and events are made
 * first and freed last whatever happened. */
static result run_script(const capi *a) {
  char why[400] = "";
  world w = {.api = a, .why = why, .why_size = sizeof why};
  grt_status st = GRT_OK;
  for (int i = 0; i < N_STREAMS && !st; i++)
    st = i == LEG ? a->legacy(a->ctx, &w.st[i]) : a->stream(a->ctx, i == B, &w.st[i]);
  for (int i = 0; i < N_EVENTS && !st; i++) st = a->event(a->ctx, i == T1 || i == T2, &w.ev[i]);
  if (!st) refusals(&w);
  /* A failed step may leave a capture open: end it (its answer is not the
     verdict), then free everything, keeping the first failure. */
  grt_status td = GRT_OK, x;
  for (int i = 0; i < N_STREAMS; i++)
    if (w.st[i] && i != LEG) {
      if (w.failed) (void)a->end(a->ctx, w.st[i]);
      if ((x = a->sync(a->ctx, w.st[i])) && !td) td = x;
    }
  for (int i = 0; i < N_EVENTS; i++)
    if (w.ev[i] && (x = a->event_destroy(a->ctx, w.ev[i])) && !td) td = x;
  for (int i = 0; i < N_STREAMS; i++)
    if (w.st[i] && (x = a->stream_destroy(a->ctx, w.st[i])) && !td) td = x;
  if (st) return r_fail("setup: %s", grt_status_name(st));
  if (w.failed) return r_fail("%s", why);
  if (td) return r_fail("teardown: %s", grt_status_name(td));
  return r_pass("%d steps; the %d refusals gave CUDA's codes %s", w.step, w.refused, w.codes);
}

/* ---- on the executor ---------------------------------------------------------------- */

static grt_status x_stream(void *c, int blocking, void **out) {
  return grt_stream_create(c, blocking ? GRT_STREAM_DEFAULT : GRT_STREAM_NON_BLOCKING, 0, (grt_stream **)out);
}
static grt_status x_legacy(void *c, void **out) { return grt_exec_legacy_stream(c, (grt_stream **)out); }
static grt_status x_stream_destroy(void *c, void *s) {
  grt_stream *leg;
  grt_status st = grt_exec_legacy_stream(c, &leg);
  return st ? st : s == leg ? GRT_OK : grt_stream_destroy(s);
}
static grt_status x_event(void *c, int timing, void **out) {
  return grt_event_create(c, timing ? 0 : GRT_EVENT_DISABLE_TIMING, (grt_event **)out);
}
static grt_status x_event_destroy(void *c, void *e) { return (void)c, grt_event_destroy(e); }
static grt_status x_record(void *c, void *e, void *s) { return (void)c, grt_event_record(e, s); }
static grt_status x_wait(void *c, void *s, void *e) { return (void)c, grt_stream_wait_event(s, e); }
static grt_status x_work(void *c, void *s) {
  grt_kernel_desc k = {NULL, NULL, 1000, GRT_ENGINE_COMPUTE, "work"};
  return (void)c, grt_launch_kernel(s, &k);
}
static grt_status x_query(void *c, void *s) { return (void)c, grt_stream_query(s); }
static grt_status x_sync(void *c, void *s) { return (void)c, grt_stream_synchronize(s); }
static grt_status x_event_query(void *c, void *e) { return (void)c, grt_event_query(e); }
static grt_status x_elapsed(void *c, void *a, void *b) {
  int64_t ns;
  return (void)c, grt_event_elapsed_ns(a, b, &ns);
}
static grt_status x_begin(void *c, void *s, unsigned mode) {
  return (void)c, grt_stream_begin_capture(s, (grt_capture_mode)mode);
}
static grt_status x_end(void *c, void *s) {
  grt_graph *g = NULL;
  grt_status st = grt_stream_end_capture(s, &g);
  grt_status d = g ? grt_graph_destroy(g) : GRT_OK;
  return (void)c, st ? st : d;
}

static result on_executor(grt_clock_kind clock) {
  grt_exec_config cfg;
  grt_exec_config_default(&cfg);
  cfg.clock = clock;
  grt_exec *exec;
  grt_status st = grt_exec_create(&cfg, &exec);
  if (st) return r_fail("grt_exec_create: %s", grt_status_name(st));
  const capi a = {exec,   x_stream, x_legacy, x_stream_destroy, x_event,   x_event_destroy, x_record, x_wait,
                  x_work, x_query,  x_sync,   x_event_query,    x_elapsed, x_begin,         x_end,    NULL};
  result r = run_script(&a);
  st = grt_exec_destroy(exec);
  if (r.kind == R_PASS && st) r = r_fail("grt_exec_destroy: %s", grt_status_name(st));
  return r;
}

/* ---- on the CUDA backend ------------------------------------------------------------ */

typedef struct cctx {
  grt_device *dev;
  grt_devptr buf;
} cctx;

static grt_status c_stream(void *c, int blocking, void **out) {
  cctx *x = c;
  return grt_cuda_stream_create(x->dev, blocking ? GRT_CUDA_STREAM_DEFAULT : GRT_CUDA_STREAM_NON_BLOCKING, 0,
                                (grt_cuda_stream **)out);
}
static grt_status c_legacy(void *c, void **out) {
  return grt_cuda_stream_legacy(((cctx *)c)->dev, (grt_cuda_stream **)out);
}
static grt_status c_stream_destroy(void *c, void *s) { return (void)c, grt_cuda_stream_destroy(s); }
static grt_status c_event(void *c, int timing, void **out) {
  return grt_cuda_event_create(((cctx *)c)->dev, timing ? GRT_CUDA_EVENT_TIMING : GRT_CUDA_EVENT_DEFAULT,
                               (grt_cuda_event **)out);
}
static grt_status c_event_destroy(void *c, void *e) { return (void)c, grt_cuda_event_destroy(e); }
static grt_status c_record(void *c, void *e, void *s) { return (void)c, grt_cuda_event_record(e, s); }
static grt_status c_wait(void *c, void *s, void *e) { return (void)c, grt_cuda_stream_wait_event(s, e); }
static grt_status c_work(void *c, void *s) { return grt_cuda_memset_async(s, ((cctx *)c)->buf, 1, 4096); }
static grt_status c_query(void *c, void *s) { return (void)c, grt_cuda_stream_query(s); }
static grt_status c_sync(void *c, void *s) { return (void)c, grt_cuda_stream_synchronize(s); }
static grt_status c_event_query(void *c, void *e) { return (void)c, grt_cuda_event_query(e); }
static grt_status c_elapsed(void *c, void *a, void *b) {
  float ms;
  return (void)c, grt_cuda_event_elapsed_ms(a, b, &ms);
}
static grt_status c_begin(void *c, void *s, unsigned mode) { return (void)c, grt_cuda_stream_begin_capture(s, mode); }
static grt_status c_end(void *c, void *s) {
  void *g = NULL;
  grt_status st = grt_cuda_stream_end_capture(s, &g);
  grt_status d = grt_cuda_graph_destroy(((cctx *)c)->dev, g);
  return st ? st : d;
}

static void c_last_error(void *c, char *buf, size_t n) {
  if (grt_device_last_error(((cctx *)c)->dev, buf, n) != GRT_OK && n) buf[0] = 0;
}

static result on_cuda(backend *b) {
  cctx x = {b->dev, 0};
  grt_status st = grt_device_malloc(b->dev, 4096, &x.buf);
  if (st) return r_fail("grt_device_malloc: %s", grt_status_name(st));
  const capi a = {&x,     c_stream, c_legacy, c_stream_destroy, c_event,   c_event_destroy, c_record, c_wait,
                  c_work, c_query,  c_sync,   c_event_query,    c_elapsed, c_begin,         c_end,    c_last_error};
  result r = run_script(&a);
  st = grt_device_free(b->dev, x.buf);
  if (r.kind == R_PASS && st) r = r_fail("grt_device_free: %s", grt_status_name(st));
  return r;
}

static result capture_codes(backend *b) {
  if (b->is_cuda) return on_cuda(b);
  result v = on_executor(GRT_CLOCK_VIRTUAL);
  if (v.kind != R_PASS) return r_fail("virtual clock: %s", v.note);
  result t = on_executor(GRT_CLOCK_THREADS);
  if (t.kind != R_PASS) return r_fail("threads clock: %s", t.note);
  size_t n = strlen(t.note);
  snprintf(t.note + n, sizeof t.note - n, "; on the executor, both clocks");
  return t;
}

const ccase conf_capture_cases[] = {
    {"capture status codes",
     "each refusal is CUDA's error: unsupported, invalidated, illegal state, isolation, captured event, "
     "unmatched, unjoined, merge, wrong thread, implicit, invalid handle",
     capture_codes},
};
const size_t conf_capture_count = sizeof conf_capture_cases / sizeof conf_capture_cases[0];
