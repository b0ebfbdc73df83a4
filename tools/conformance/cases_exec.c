/* cases_exec.c — the stream cases' sim column: the questions cases_stream.c
 * asks of CUDA, asked of the executor (gpurt/exec.h) on a host-backed
 * simulated device (the 1 GiB device of the memory cases has no host bytes,
 * which copies need).
 *
 * Every case runs on both clocks. A user event holds a stream back, as a gate
 * does on CUDA; under the threads clock a watchdog opens it after GATE_MS,
 * so a case that waits for the wrong thing fails instead of hanging, and under
 * the virtual clock the simulation reports such a wait as a deadlock. Order is
 * observed by probes: kernel bodies and host functions that note, when they
 * run, which other probes had already run and at what time. "Did not run
 * while held" is then what a probe saw, not a quiet period watched. Under the
 * virtual clock durations are exact, so each case also asserts the virtual
 * time every probe ran at. */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "conformance.h"
#include "gpurt/exec.h"

#define GATE_MS 5000     /* a gate opens by itself after this (threads clock) */
#define RUN_MS 3000      /* how long "runs" may take (threads clock) */
#define KERNEL_NS 100000 /* modelled duration of the held work */
#define NB GRT_STREAM_NON_BLOCKING

typedef struct xgate {
  grt_user_event *u;
  pthread_t thread;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int watching;           /* a watchdog thread runs (threads clock) */
  int opened, timed_out;  /* guarded by mu */
  grt_status fire_status; /* the watchdog's signal */
} xgate;

/* A kernel body or host function noting when it ran and what it saw. */
typedef struct probe {
  grt_exec *exec;
  const struct probe *watch[2];
  int saw[2];
  int ran;
  uint64_t t;
} probe;

/* What one case run created, torn down whatever the outcome. Whatever a
 * body may still touch (probes, host buffers) lives here, not in the case's
 * frame: a case that fails returns with work pending, which runs when the
 * teardown opens the gates. */
typedef struct xenv {
  grt_exec *exec;
  int virt;
  grt_stream *streams[4]; /* each array sized for the case that needs the most */
  grt_event *events[2];
  xgate gates[3];
  grt_devptr bufs[2];
  probe probes[8];
  void *host[2]; /* freed after the exec */
  int nstreams, nevents, ngates, nbufs, nprobes, nhost;
  char times[240]; /* the exact virtual times the run asserted */
} xenv;

static void probe_run(void *arg) {
  probe *p = arg;
  for (int i = 0; i < 2; i++) p->saw[i] = p->watch[i] && __atomic_load_n(&p->watch[i]->ran, __ATOMIC_SEQ_CST);
  if (grt_exec_now_ns(p->exec, &p->t) != GRT_OK) p->t = UINT64_MAX;
  __atomic_store_n(&p->ran, 1, __ATOMIC_SEQ_CST);
}

static probe *x_probe(xenv *x, const probe *w0, const probe *w1) {
  probe *p = &x->probes[x->nprobes++];
  *p = (probe){x->exec, {w0, w1}, {0, 0}, 0, 0};
  return p;
}
static int ran(const probe *p) { return __atomic_load_n(&p->ran, __ATOMIC_SEQ_CST); }

static result x_fail(xenv *x, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static result x_fail(xenv *x, const char *fmt, ...) {
  result r = {R_FAIL, ""};
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(r.note, sizeof r.note, fmt, ap);
  va_end(ap);
  char msg[200] = "";
  if (x->exec && grt_exec_get_error(x->exec, msg, sizeof msg) != GRT_OK && msg[0]) {
    size_t n = strlen(r.note);
    snprintf(r.note + n, sizeof r.note - n, " [%s]", msg);
  }
  return r;
}

static void x_times(xenv *x, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void x_times(xenv *x, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(x->times, sizeof x->times, fmt, ap);
  va_end(ap);
}

#define XCHECK(x, cond, ...)                    \
  do {                                          \
    if (!(cond)) return x_fail(x, __VA_ARGS__); \
  } while (0)
#define XOK(x, expr)                                                                     \
  do {                                                                                   \
    grt_status st_ = (expr);                                                             \
    XCHECK(x, st_ == GRT_OK, "%s: %s (line %d)", #expr, grt_status_name(st_), __LINE__); \
  } while (0)

/* ---- gates -------------------------------------------------------------------- */

static void *watchdog(void *arg) {
  xgate *g = arg;
  struct timespec until;
  clock_gettime(CLOCK_REALTIME, &until);
  until.tv_sec += GATE_MS / 1000;
  pthread_mutex_lock(&g->mu);
  int rc = 0;
  while (!g->opened && rc != ETIMEDOUT) rc = pthread_cond_timedwait(&g->cv, &g->mu, &until);
  int fire = !g->opened;
  g->timed_out = fire;
  pthread_mutex_unlock(&g->mu);
  if (fire) g->fire_status = grt_user_event_signal(g->u, 1);
  return NULL;
}

static grt_status x_gate(xenv *x, const char *name, xgate **out) {
  xgate *g = &x->gates[x->ngates];
  *g = (xgate){.fire_status = GRT_OK};
  grt_status st = grt_user_event_create(x->exec, name, &g->u);
  if (st) return st;
  pthread_mutex_init(&g->mu, NULL);
  pthread_cond_init(&g->cv, NULL);
  x->ngates++;
  if (!x->virt) {
    if (pthread_create(&g->thread, NULL, watchdog, g) != 0) return GRT_ERR_NOMEM;
    g->watching = 1;
  }
  *out = g;
  return GRT_OK;
}

static int gate_timed_out(xgate *g) {
  pthread_mutex_lock(&g->mu);
  int t = g->timed_out;
  pthread_mutex_unlock(&g->mu);
  return t;
}

static grt_status gate_open(xgate *g) {
  grt_status st = grt_user_event_signal(g->u, 1);
  pthread_mutex_lock(&g->mu);
  g->opened = 1;
  pthread_cond_signal(&g->cv);
  pthread_mutex_unlock(&g->mu);
  if (g->watching) pthread_join(g->thread, NULL);
  g->watching = 0;
  return st ? st : g->fire_status;
}

/* ---- the case's objects ---------------------------------------------------------- */

static grt_status x_stream(xenv *x, unsigned flags, grt_stream **out) {
  grt_status st = grt_stream_create(x->exec, flags, 0, out);
  if (!st) x->streams[x->nstreams++] = *out;
  return st;
}

static grt_status x_event(xenv *x, grt_event **out) {
  grt_status st = grt_event_create(x->exec, 0, out);
  if (!st) x->events[x->nevents++] = *out;
  return st;
}

static grt_status x_malloc(xenv *x, uint64_t bytes, grt_devptr *out) {
  grt_status st = grt_exec_device_malloc(x->exec, bytes, out);
  if (!st) x->bufs[x->nbufs++] = *out;
  return st;
}

static void *x_calloc(xenv *x, size_t bytes) {
  void *p = calloc(1, bytes);
  if (p) x->host[x->nhost++] = p;
  return p;
}

static grt_status x_kernel(grt_stream *s, probe *p) {
  grt_kernel_desc k = {probe_run, p, KERNEL_NS, GRT_ENGINE_COMPUTE, "held work"};
  return grt_launch_kernel(s, &k);
}

static grt_status x_now(xenv *x, uint64_t *t) { return grt_exec_now_ns(x->exec, t); }

/* Waits until s has finished what was issued. Virtual: synchronize (a wait
 * that only the host could end is reported, not hung). Threads: polls for up
 * to RUN_MS, so a stream held by a closed gate reads as NOT_READY. */
static grt_status x_drain(xenv *x, grt_stream *s) {
  if (x->virt) return grt_stream_synchronize(s);
  struct timespec nap = {0, 1000000};
  grt_status st = grt_stream_query(s);
  for (int i = 0; i < RUN_MS && st == GRT_ERR_NOT_READY; i++) {
    nanosleep(&nap, NULL);
    st = grt_stream_query(s);
  }
  return st;
}

static grt_status x_create(xenv *x, grt_clock_kind clock) {
  grt_exec_config cfg;
  grt_exec_config_default(&cfg);
  cfg.clock = clock;
  cfg.device_capacity = 64 * GRT_MiB; /* two 16 MiB buffers for the copies */
  *x = (xenv){.virt = clock == GRT_CLOCK_VIRTUAL};
  return grt_exec_create(&cfg, &x->exec);
}

static void keep(grt_status *first, grt_status st) {
  if (*first == GRT_OK) *first = st;
}

/* Opens every gate first, so that no work still waits when the exec goes. */
static grt_status x_teardown(xenv *x) {
  grt_status first = GRT_OK;
  for (int i = 0; i < x->ngates; i++) keep(&first, gate_open(&x->gates[i]));
  keep(&first, grt_exec_synchronize(x->exec));
  for (int i = 0; i < x->nbufs; i++) keep(&first, grt_exec_device_free(x->exec, x->bufs[i]));
  for (int i = 0; i < x->nevents; i++) keep(&first, grt_event_destroy(x->events[i]));
  for (int i = 0; i < x->nstreams; i++)
    if (x->streams[i]) keep(&first, grt_stream_destroy(x->streams[i]));
  for (int i = 0; i < x->ngates; i++) {
    keep(&first, grt_user_event_destroy(x->gates[i].u));
    pthread_mutex_destroy(&x->gates[i].mu);
    pthread_cond_destroy(&x->gates[i].cv);
  }
  keep(&first, grt_exec_destroy(x->exec));
  for (int i = 0; i < x->nhost; i++) free(x->host[i]);
  return first;
}

/* ---- the cases ------------------------------------------------------------------ */

/* s1: [gate g1, k1] record e [gate g3, k3] record e again; s2 waits on e
 * between the two records, then runs a probe. */
static result event_snapshot(xenv *x) {
  grt_stream *s1, *s2;
  grt_event *e;
  xgate *g1, *g3;
  XOK(x, x_stream(x, NB, &s1));
  XOK(x, x_stream(x, NB, &s2));
  XOK(x, x_event(x, &e));
  XOK(x, x_gate(x, "g1", &g1));
  XOK(x, x_gate(x, "g3", &g3));
  probe *k1 = x_probe(x, NULL, NULL), *k3 = x_probe(x, NULL, NULL), *hf = x_probe(x, k1, k3);
  XOK(x, grt_stream_wait_user_event(s1, g1->u, 1));
  XOK(x, x_kernel(s1, k1));
  XOK(x, grt_event_record(e, s1));      /* snapshot 1: up to k1 */
  XOK(x, grt_stream_wait_event(s2, e)); /* binds to snapshot 1 */
  XOK(x, grt_launch_host_func(s2, probe_run, hf));
  XOK(x, grt_stream_wait_user_event(s1, g3->u, 1));
  XOK(x, x_kernel(s1, k3));
  XOK(x, grt_event_record(e, s1)); /* snapshot 2: up to k3 */
  grt_status held = grt_stream_query(s2);
  uint64_t t1, t3;
  XOK(x, x_now(x, &t1));
  XOK(x, gate_open(g1));
  grt_status drained = x_drain(x, s2); /* g3 still closed */
  int t3_out = gate_timed_out(g3);
  grt_status q = grt_event_query(e);
  XCHECK(x, held == GRT_ERR_NOT_READY, "s2 query while the first snapshot was held: %s", grt_status_name(held));
  XCHECK(x, drained == GRT_OK && !t3_out, "s2 waited for the re-recorded event: %s", grt_status_name(drained));
  XCHECK(x, hf->saw[0] && !hf->saw[1], "s2's host function saw k1 %d, k3 %d", hf->saw[0], hf->saw[1]);
  XCHECK(x, q == GRT_ERR_NOT_READY, "query of the re-recorded event: %s", grt_status_name(q));
  XOK(x, x_now(x, &t3));
  XOK(x, gate_open(g3));
  XOK(x, grt_event_synchronize(e));
  grt_status q2 = grt_event_query(e);
  XCHECK(x, q2 == GRT_OK && ran(k3), "after: query %s, k3 ran %d", grt_status_name(q2), ran(k3));
  if (x->virt) {
    XCHECK(x, hf->t == t1 + KERNEL_NS && k3->t == t3 + KERNEL_NS, "times: s2 %" PRIu64 ", k3 %" PRIu64, hf->t, k3->t);
    x_times(x,
            "s2 ran at %" PRIu64 " ns (g1 opened at %" PRIu64 " + k1), the re-recorded e completed at %" PRIu64
            " ns (g3 opened at %" PRIu64 " + k3)",
            hf->t, t1, k3->t, t3);
  }
  return r_pass("wait bound to the snapshot at wait time; re-record did not move it; query of it NOT_READY");
}

static result never_recorded(xenv *x) {
  grt_stream *s;
  grt_event *e;
  XOK(x, x_stream(x, NB, &s));
  XOK(x, x_event(x, &e));
  probe *hf = x_probe(x, NULL, NULL);
  grt_status q = grt_event_query(e);
  grt_status sy = grt_event_synchronize(e);
  uint64_t t0;
  XOK(x, x_now(x, &t0));
  XOK(x, grt_stream_wait_event(s, e));
  XOK(x, grt_launch_host_func(s, probe_run, hf));
  grt_status d = x_drain(x, s);
  XCHECK(x, q == GRT_OK && sy == GRT_OK, "query %s, synchronize %s", grt_status_name(q), grt_status_name(sy));
  XCHECK(x, d == GRT_OK && ran(hf), "a stream waiting on a never-recorded event did not proceed: %s",
         grt_status_name(d));
  if (x->virt) {
    XCHECK(x, hf->t == t0, "the wait took %" PRIu64 " ns of virtual time", hf->t - t0);
    x_times(x, "the host function behind the wait ran at %" PRIu64 " ns, the time it was issued", hf->t);
  }
  return r_pass("query done, synchronize returns, a wait on it does not wait");
}

/* One part of the legacy case: `held` is held by gate g behind work k; a probe
 * issued to `after` must see k done (waits) or not (exempt). */
typedef struct legacy_part {
  grt_stream *held, *after;
  int waits;
  uint64_t t_open, t_ran;
} legacy_part;

static result legacy_run(xenv *x, legacy_part *p, const char *tag, const char *gname) {
  xgate *g;
  XOK(x, x_gate(x, gname, &g));
  probe *k = x_probe(x, NULL, NULL), *hf = x_probe(x, k, NULL);
  XOK(x, grt_stream_wait_user_event(p->held, g->u, 1));
  XOK(x, x_kernel(p->held, k));
  XOK(x, grt_launch_host_func(p->after, probe_run, hf));
  grt_status q = grt_stream_query(p->after);
  if (p->waits) XCHECK(x, q == GRT_ERR_NOT_READY, "%s: done while the other stream was held", tag);
  XOK(x, x_now(x, &p->t_open));
  if (p->waits) XOK(x, gate_open(g));
  grt_status d = x_drain(x, p->after);
  int to = gate_timed_out(g);
  XCHECK(x, d == GRT_OK && ran(hf) && !to, "%s: did not run (%s)", tag, grt_status_name(d));
  XCHECK(x, hf->saw[0] == p->waits, "%s: ran %s the held work", tag, hf->saw[0] ? "after" : "before");
  XOK(x, gate_open(g));
  XOK(x, grt_exec_synchronize(x->exec));
  p->t_ran = hf->t;
  uint64_t want = p->t_open + (p->waits ? KERNEL_NS : 0);
  if (x->virt) XCHECK(x, hf->t == want, "%s: ran at %" PRIu64 " ns, not %" PRIu64, tag, hf->t, want);
  return r_pass("%s", tag);
}

/* (a) blocking stream held: legacy work waits; (b) non-blocking stream held:
 * legacy work runs anyway; (c) legacy held: later blocking work waits. */
static result legacy_stream(xenv *x) {
  grt_stream *leg, *blk, *nb;
  XOK(x, grt_exec_legacy_stream(x->exec, &leg));
  XOK(x, x_stream(x, GRT_STREAM_DEFAULT, &blk));
  XOK(x, x_stream(x, NB, &nb));
  legacy_part parts[3] = {{blk, leg, 1, 0, 0}, {nb, leg, 0, 0, 0}, {leg, blk, 1, 0, 0}};
  static const char *const tags[3] = {"(a) legacy after blocking", "(b) legacy past non-blocking",
                                      "(c) blocking after legacy"};
  static const char *const gates[3] = {"g0", "g1", "g2"};
  for (int i = 0; i < 3; i++) {
    result r = legacy_run(x, &parts[i], tags[i], gates[i]);
    if (r.kind != R_PASS) return r;
  }
  if (x->virt)
    x_times(x,
            "(a) ran at %" PRIu64 " ns (gate + held work), (b) at %" PRIu64 " ns (when issued), (c) at %" PRIu64
            " ns (gate + held work)",
            parts[0].t_ran, parts[1].t_ran, parts[2].t_ran);
  return r_pass("legacy waits for blocking streams and they for it; non-blocking exempt");
}

typedef struct order_log {
  int seen[64];
  int n;
} order_log;
typedef struct order_arg {
  order_log *log;
  grt_exec *exec;
  int i;
  uint64_t t;
} order_arg;
typedef struct order_state {
  order_log log;
  order_arg args[64];
} order_state;
static void log_order(void *arg) {
  order_arg *a = arg;
  if (grt_exec_now_ns(a->exec, &a->t) != GRT_OK) a->t = UINT64_MAX;
  a->log->seen[a->log->n++] = a->i; /* host functions of one stream never overlap */
}

static result host_func_order(xenv *x) {
  grt_stream *s;
  xgate *g;
  order_state *o = x_calloc(x, sizeof *o);
  XCHECK(x, o, "host out of memory");
  order_log *log = &o->log;
  order_arg *args = o->args;
  XOK(x, x_stream(x, NB, &s));
  XOK(x, x_gate(x, "g", &g));
  XOK(x, grt_stream_wait_user_event(s, g->u, 1)); /* queue everything first */
  for (int i = 0; i < 64; i++) {
    args[i] = (order_arg){log, x->exec, i, 0};
    XOK(x, grt_launch_host_func(s, log_order, &args[i]));
  }
  grt_status q = grt_stream_query(s);
  uint64_t t0;
  XOK(x, x_now(x, &t0));
  XOK(x, gate_open(g));
  XOK(x, grt_stream_synchronize(s));
  grt_status q2 = grt_stream_query(s);
  int in_order = log->n == 64, at_open = 1;
  for (int i = 0; in_order && i < 64; i++) in_order = log->seen[i] == i;
  for (int i = 0; i < 64; i++) at_open &= args[i].t == t0;
  XCHECK(x, in_order, "%d host functions ran, not in issue order", log->n);
  XCHECK(x, q == GRT_ERR_NOT_READY && q2 == GRT_OK, "stream query while held %s, after %s", grt_status_name(q),
         grt_status_name(q2));
  if (x->virt) {
    XCHECK(x, at_open, "host functions took virtual time: the last ran at %" PRIu64 " ns", args[63].t);
    x_times(x, "all 64 at %" PRIu64 " ns, when the gate opened (host functions take no modelled time)", t0);
  }
  return r_pass("64 host functions in issue order; query NOT_READY while held");
}

enum { COPY_N = 16 << 20 };

/* Synchronizes s; *ns is the time that took (exact under the virtual clock). */
static grt_status timed_sync(xenv *x, grt_stream *s, uint64_t *ns) {
  uint64_t t0, t1;
  grt_status st = x_now(x, &t0);
  if (!st) st = grt_stream_synchronize(s);
  if (!st) st = x_now(x, &t1);
  if (!st) *ns = t1 - t0;
  return st;
}

static grt_status copy_ns(xenv *x, const grt_engine_class *engines, int n, uint64_t *out) {
  *out = 0;
  for (int i = 0; i < n; i++) {
    uint64_t d;
    grt_status st = grt_exec_copy_duration_ns(x->exec, engines[i], COPY_N, &d);
    if (st) return st;
    *out += d;
  }
  return GRT_OK;
}

static result copies_with(xenv *x, unsigned char *h, unsigned char *back) {
  grt_stream *s;
  grt_devptr d1, d2;
  for (size_t i = 0; i < COPY_N; i++) h[i] = (unsigned char)(i * 131 + 7);
  XOK(x, x_stream(x, NB, &s));
  XOK(x, x_malloc(x, COPY_N, &d1));
  XOK(x, x_malloc(x, COPY_N, &d2));
  uint64_t fill_ns, trip_ns, fill_want, trip_want;
  XOK(x, grt_memset_async(s, d1, 0xab, COPY_N));
  XOK(x, grt_memcpy_d2h_async(s, back, d1, COPY_N));
  XOK(x, timed_sync(x, s, &fill_ns));
  int fill_ok = 1;
  for (size_t i = 0; i < COPY_N; i++) fill_ok &= back[i] == 0xab;
  XOK(x, grt_memcpy_h2d_async(s, d1, h, COPY_N));
  XOK(x, grt_memcpy_d2d_async(s, d2, d1, COPY_N));
  XOK(x, grt_memcpy_d2h_async(s, back, d2, COPY_N));
  XOK(x, timed_sync(x, s, &trip_ns));
  int copy_ok = memcmp(h, back, COPY_N) == 0;
  XCHECK(x, fill_ok && copy_ok, "memset ok %d, H->D->D->H round trip ok %d", fill_ok, copy_ok);
  if (x->virt) {
    static const grt_engine_class fill[] = {GRT_ENGINE_COMPUTE, GRT_ENGINE_COPY_D2H};
    static const grt_engine_class trip[] = {GRT_ENGINE_COPY_H2D, GRT_ENGINE_COMPUTE, GRT_ENGINE_COPY_D2H};
    XOK(x, copy_ns(x, fill, 2, &fill_want));
    XOK(x, copy_ns(x, trip, 3, &trip_want));
    XCHECK(x, fill_ns == fill_want && trip_ns == trip_want,
           "memset + D2H took %" PRIu64 " ns (model %" PRIu64 "), H2D + D2D + D2H %" PRIu64 " ns (model %" PRIu64 ")",
           fill_ns, fill_want, trip_ns, trip_want);
    x_times(x,
            "memset + D2H %" PRIu64 " ns, H2D + D2D + D2H %" PRIu64 " ns, each the sum of its ops' modelled durations",
            fill_ns, trip_ns);
  }
  return r_pass("16 MiB memset, H2D, D2D, D2H byte-exact");
}

static result copies(xenv *x) {
  unsigned char *h = x_calloc(x, COPY_N), *back = x_calloc(x, COPY_N);
  return h && back ? copies_with(x, h, back) : x_fail(x, "host out of memory");
}

static result destroy_pending(xenv *x) {
  grt_stream *s;
  xgate *g;
  XOK(x, x_stream(x, NB, &s));
  XOK(x, x_gate(x, "g", &g));
  probe *k = x_probe(x, NULL, NULL), *hf = x_probe(x, k, NULL);
  XOK(x, grt_stream_wait_user_event(s, g->u, 1));
  XOK(x, x_kernel(s, k));
  XOK(x, grt_launch_host_func(s, probe_run, hf));
  grt_status d = grt_stream_destroy(s); /* returns at once */
  if (d == GRT_OK) x->streams[x->nstreams - 1] = NULL;
  int before = ran(hf), to = gate_timed_out(g);
  uint64_t t0;
  XOK(x, x_now(x, &t0));
  XOK(x, gate_open(g));
  XOK(x, grt_exec_synchronize(x->exec));
  XCHECK(x, d == GRT_OK && !before && !to, "destroy %s, work ran early %d", grt_status_name(d), before);
  XCHECK(x, ran(hf) && hf->saw[0], "pending work on the destroyed stream never ran");
  if (x->virt) {
    XCHECK(x, hf->t == t0 + KERNEL_NS, "the pending work ended at %" PRIu64 " ns", hf->t);
    x_times(x, "the pending work ran at %" PRIu64 " ns (gate opened at %" PRIu64 " + held work)", hf->t, t0);
  }
  return r_pass("destroy returned at once; the pending work still ran");
}

/* ---- both clocks ------------------------------------------------------------------ */

static result on_clock(grt_clock_kind clock, result (*run)(xenv *), char *times, size_t times_size) {
  xenv x;
  grt_status st = x_create(&x, clock);
  if (st) return r_fail("grt_exec_create: %s", grt_status_name(st));
  result r = run(&x);
  grt_status td = x_teardown(&x); /* joins every watchdog */
  int late = 0;
  for (int i = 0; i < x.ngates; i++) late += x.gates[i].timed_out;
  if (r.kind == R_PASS && td) r = r_fail("teardown: %s", grt_status_name(td));
  if (r.kind == R_PASS && late)
    r = r_fail("%d gate(s) opened by their watchdog: the case waited on a closed gate", late);
  snprintf(times, times_size, "%s", x.times);
  return r;
}

/* The virtual run first: a wrong answer shows there at once, where the
 * threads run could wait for a watchdog. */
static result both_clocks(result (*run)(xenv *)) {
  char vt[240], tt[240];
  result v = on_clock(GRT_CLOCK_VIRTUAL, run, vt, sizeof vt);
  if (v.kind != R_PASS) return r_fail("virtual clock: %s", v.note);
  result t = on_clock(GRT_CLOCK_THREADS, run, tt, sizeof tt);
  if (t.kind != R_PASS) return r_fail("threads clock: %s", t.note);
  return r_pass("%s; on the executor, both clocks; virtual times, asserted exactly: %s", t.note, vt);
}

result conf_exec_event_snapshot(void) { return both_clocks(event_snapshot); }
result conf_exec_never_recorded(void) { return both_clocks(never_recorded); }
result conf_exec_legacy_stream(void) { return both_clocks(legacy_stream); }
result conf_exec_host_func_order(void) { return both_clocks(host_func_order); }
result conf_exec_copies(void) { return both_clocks(copies); }
result conf_exec_destroy_pending(void) { return both_clocks(destroy_pending); }
