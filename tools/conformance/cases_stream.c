/* cases_stream.c — execution cases on real streams: event snapshots, the
 * never-recorded event, legacy default stream ordering, host function order,
 * copies and fills, destroying a stream with pending work. Streams are held
 * back with gates (a GPU-side wait on a host word) and progress is observed
 * through host functions setting flags, so each case is a yes/no question,
 * not a timing. "Does not run while blocked" is checked by waiting 300 ms.
 * The simulated device has no streams (the executor layer models them), so
 * on sim each case asks its question of the executor (cases_exec.c). */
#include <stdlib.h>
#include <string.h>

#include "conformance.h"

#define GATE_MS 5000 /* a gate opens by itself after this: no case can hang */
#define QUIET_MS 300 /* how long "does not run" is watched */
#define RUN_MS 3000  /* how long "runs" may take */

#define EXEC_ON_SIM(b, on_exec) \
  if (!(b)->is_cuda) return on_exec()

static result event_snapshot(backend *b) {
  EXEC_ON_SIM(b, conf_exec_event_snapshot);
  grt_cuda_stream *s1 = NULL, *s2 = NULL;
  grt_cuda_gate *g1 = NULL, *g3 = NULL;
  grt_cuda_event *e = NULL;
  volatile int ran = 0;
  CHECK_OK(b, grt_cuda_stream_create(b->dev, GRT_CUDA_STREAM_NON_BLOCKING, 0, &s1));
  CHECK_OK(b, grt_cuda_stream_create(b->dev, GRT_CUDA_STREAM_NON_BLOCKING, 0, &s2));
  CHECK_OK(b, grt_cuda_gate_create(b->dev, GATE_MS, &g1));
  CHECK_OK(b, grt_cuda_gate_create(b->dev, GATE_MS, &g3));
  CHECK_OK(b, grt_cuda_event_create(b->dev, 0, &e));
  CHECK_OK(b, grt_cuda_gate_block(g1, s1));
  CHECK_OK(b, grt_cuda_event_record(e, s1));        /* snapshot 1: up to g1 */
  CHECK_OK(b, grt_cuda_stream_wait_event(s2, e));    /* binds to snapshot 1 */
  CHECK_OK(b, grt_cuda_launch_host_func(s2, conf_set_flag, (void *)&ran));
  CHECK_OK(b, grt_cuda_gate_block(g3, s1));
  CHECK_OK(b, grt_cuda_event_record(e, s1));        /* snapshot 2: up to g3 */
  conf_first kept = CONF_FIRST_INIT;
  int early = conf_wait_flag(&ran, QUIET_MS);        /* g1 closed: s2 must wait */
  KEEP(kept, grt_cuda_gate_open(g1));
  int after = conf_wait_flag(&ran, RUN_MS);          /* g3 still closed */
  grt_status q = grt_cuda_event_query(e);            /* snapshot 2 not done */
  int t3 = grt_cuda_gate_timed_out(g3);
  KEEP(kept, grt_cuda_gate_open(g3));
  grt_status sync = grt_cuda_event_synchronize(e);
  grt_status q2 = grt_cuda_event_query(e);
  KEEP(kept, grt_cuda_stream_synchronize(s2));
  const char *mech = grt_cuda_gate_mechanism(g1);
  KEEP(kept, grt_cuda_event_destroy(e));
  KEEP(kept, grt_cuda_gate_destroy(g1));
  KEEP(kept, grt_cuda_gate_destroy(g3));
  KEEP(kept, grt_cuda_stream_destroy(s1));
  KEEP(kept, grt_cuda_stream_destroy(s2));
  CHECK_KEPT(b, kept);
  CHECK(b, !early, "s2 ran before the first snapshot completed");
  CHECK(b, after && !t3, "s2 waited for the re-recorded event (wait did not bind at call time; gate %s)", mech);
  CHECK(b, q == GRT_ERR_NOT_READY, "query of re-recorded event: %s", grt_status_name(q));
  CHECK(b, sync == GRT_OK && q2 == GRT_OK, "after: sync %s query %s", grt_status_name(sync), grt_status_name(q2));
  return r_pass("wait bound to the snapshot at wait time; re-record did not move it (%s)", mech);
}

static result never_recorded(backend *b) {
  EXEC_ON_SIM(b, conf_exec_never_recorded);
  grt_cuda_stream *s = NULL;
  grt_cuda_event *e = NULL;
  volatile int ran = 0;
  CHECK_OK(b, grt_cuda_stream_create(b->dev, GRT_CUDA_STREAM_NON_BLOCKING, 0, &s));
  CHECK_OK(b, grt_cuda_event_create(b->dev, 0, &e));
  grt_status q = grt_cuda_event_query(e);
  grt_status sy = grt_cuda_event_synchronize(e);
  CHECK_OK(b, grt_cuda_stream_wait_event(s, e));
  CHECK_OK(b, grt_cuda_launch_host_func(s, conf_set_flag, (void *)&ran));
  int r = conf_wait_flag(&ran, RUN_MS);
  conf_first kept = CONF_FIRST_INIT;
  KEEP(kept, grt_cuda_stream_synchronize(s));
  KEEP(kept, grt_cuda_event_destroy(e));
  KEEP(kept, grt_cuda_stream_destroy(s));
  CHECK_KEPT(b, kept);
  CHECK(b, q == GRT_OK && sy == GRT_OK, "query %s, synchronize %s", grt_status_name(q), grt_status_name(sy));
  CHECK(b, r, "a stream waiting on a never-recorded event did not proceed");
  return r_pass("query done, synchronize returns, a wait on it does not wait");
}

/* k1 on s, k2 on legacy: k2 waits for k1 (s blocking) or not (s non-blocking);
 * k1 on legacy, k2 on blocking s: k2 waits. */
static result legacy_stream(backend *b) {
  EXEC_ON_SIM(b, conf_exec_legacy_stream);
  grt_cuda_stream *leg = NULL, *blk = NULL, *nb = NULL;
  grt_cuda_gate *g[3] = {0};
  volatile int f[3] = {0};
  int quiet[3] = {0}, later[3] = {0}, to[3] = {0};
  CHECK_OK(b, grt_cuda_stream_legacy(b->dev, &leg));
  CHECK_OK(b, grt_cuda_stream_create(b->dev, GRT_CUDA_STREAM_DEFAULT, 0, &blk));
  CHECK_OK(b, grt_cuda_stream_create(b->dev, GRT_CUDA_STREAM_NON_BLOCKING, 0, &nb));
  for (int i = 0; i < 3; i++) CHECK_OK(b, grt_cuda_gate_create(b->dev, GATE_MS, &g[i]));
  conf_first kept = CONF_FIRST_INIT;
  /* (a) blocking stream held; legacy work must wait for it */
  CHECK_OK(b, grt_cuda_gate_block(g[0], blk));
  CHECK_OK(b, grt_cuda_launch_host_func(leg, conf_set_flag, (void *)&f[0]));
  quiet[0] = !conf_wait_flag(&f[0], QUIET_MS);
  KEEP(kept, grt_cuda_gate_open(g[0]));
  later[0] = conf_wait_flag(&f[0], RUN_MS);
  KEEP(kept, grt_cuda_stream_synchronize(leg));
  /* (b) non-blocking stream held; legacy work runs anyway */
  CHECK_OK(b, grt_cuda_gate_block(g[1], nb));
  CHECK_OK(b, grt_cuda_launch_host_func(leg, conf_set_flag, (void *)&f[1]));
  later[1] = conf_wait_flag(&f[1], RUN_MS);
  to[1] = grt_cuda_gate_timed_out(g[1]);
  KEEP(kept, grt_cuda_gate_open(g[1]));
  KEEP(kept, grt_cuda_stream_synchronize(nb));
  /* (c) legacy held; later work on a blocking stream waits for it */
  CHECK_OK(b, grt_cuda_gate_block(g[2], leg));
  CHECK_OK(b, grt_cuda_launch_host_func(blk, conf_set_flag, (void *)&f[2]));
  quiet[2] = !conf_wait_flag(&f[2], QUIET_MS);
  KEEP(kept, grt_cuda_gate_open(g[2]));
  later[2] = conf_wait_flag(&f[2], RUN_MS);
  KEEP(kept, grt_device_synchronize(b->dev));
  const char *mech = grt_cuda_gate_mechanism(g[0]);
  for (int i = 0; i < 3; i++) KEEP(kept, grt_cuda_gate_destroy(g[i]));
  KEEP(kept, grt_cuda_stream_destroy(leg));
  KEEP(kept, grt_cuda_stream_destroy(blk));
  KEEP(kept, grt_cuda_stream_destroy(nb));
  CHECK_KEPT(b, kept);
  CHECK(b, quiet[0] && later[0], "(a) legacy after blocking stream: waited %d, ran %d", quiet[0], later[0]);
  CHECK(b, later[1] && !to[1], "(b) legacy did not overtake a held non-blocking stream (gate %s)", mech);
  CHECK(b, quiet[2] && later[2], "(c) blocking stream after legacy: waited %d, ran %d", quiet[2], later[2]);
  return r_pass("legacy waits for blocking streams and they for it; non-blocking exempt (%s)", mech);
}

typedef struct order_log {
  int seen[64];
  int n;
} order_log;
typedef struct order_arg {
  order_log *log;
  int i;
} order_arg;
static void log_order(void *arg) {
  order_arg *a = arg;
  a->log->seen[a->log->n++] = a->i; /* host functions of one stream never overlap */
}

static result host_func_order(backend *b) {
  EXEC_ON_SIM(b, conf_exec_host_func_order);
  grt_cuda_stream *s = NULL;
  grt_cuda_gate *g = NULL;
  order_log log = {{0}, 0};
  order_arg args[64];
  CHECK_OK(b, grt_cuda_stream_create(b->dev, GRT_CUDA_STREAM_NON_BLOCKING, 0, &s));
  CHECK_OK(b, grt_cuda_gate_create(b->dev, GATE_MS, &g));
  CHECK_OK(b, grt_cuda_gate_block(g, s)); /* queue everything first */
  for (int i = 0; i < 64; i++) {
    args[i] = (order_arg){&log, i};
    CHECK_OK(b, grt_cuda_launch_host_func(s, log_order, &args[i]));
  }
  grt_status q = grt_cuda_stream_query(s);
  CHECK_OK(b, grt_cuda_gate_open(g));
  CHECK_OK(b, grt_cuda_stream_synchronize(s));
  grt_status q2 = grt_cuda_stream_query(s);
  conf_first kept = CONF_FIRST_INIT;
  KEEP(kept, grt_cuda_gate_destroy(g));
  KEEP(kept, grt_cuda_stream_destroy(s));
  CHECK_KEPT(b, kept);
  int in_order = log.n == 64;
  for (int i = 0; in_order && i < 64; i++) in_order = log.seen[i] == i;
  CHECK(b, in_order, "%d host functions ran, not in issue order", log.n);
  CHECK(b, q == GRT_ERR_NOT_READY && q2 == GRT_OK, "stream query while held %s, after %s", grt_status_name(q),
        grt_status_name(q2));
  return r_pass("64 host functions in issue order; query NOT_READY while held");
}

static result copies(backend *b) {
  EXEC_ON_SIM(b, conf_exec_copies);
  enum { N = 16 << 20 };
  unsigned char *h = malloc(N), *back = malloc(N);
  grt_cuda_stream *s = NULL;
  grt_devptr d1 = 0, d2 = 0;
  if (!h || !back) return free(h), free(back), r_fail("host out of memory");
  for (size_t i = 0; i < N; i++) h[i] = (unsigned char)(i * 131 + 7);
  grt_status st = grt_cuda_stream_create(b->dev, GRT_CUDA_STREAM_NON_BLOCKING, 0, &s);
  if (!st) st = grt_device_malloc(b->dev, N, &d1);
  if (!st) st = grt_device_malloc(b->dev, N, &d2);
  int fill_ok = 0, copy_ok = 0;
  if (!st) st = grt_cuda_memset_async(s, d1, 0xab, N);
  if (!st) st = grt_cuda_memcpy_dtoh_async(s, back, d1, N);
  if (!st) st = grt_cuda_stream_synchronize(s);
  if (!st) {
    fill_ok = 1;
    for (size_t i = 0; i < N; i++) fill_ok &= back[i] == 0xab;
  }
  if (!st) st = grt_cuda_memcpy_htod_async(s, d1, h, N);
  if (!st) st = grt_cuda_memcpy_dtod_async(s, d2, d1, N);
  if (!st) st = grt_cuda_memcpy_dtoh_async(s, back, d2, N);
  if (!st) st = grt_cuda_stream_synchronize(s);
  if (!st) copy_ok = memcmp(h, back, N) == 0;
  grt_status st_end = st;
  conf_first kept = CONF_FIRST_INIT;
  if (d1) KEEP(kept, grt_device_free(b->dev, d1));
  if (d2) KEEP(kept, grt_device_free(b->dev, d2));
  KEEP(kept, grt_cuda_stream_destroy(s));
  free(h);
  free(back);
  CHECK(b, st_end == GRT_OK, "a call failed: %s", grt_status_name(st_end));
  CHECK_KEPT(b, kept);
  CHECK(b, fill_ok && copy_ok, "memset ok %d, H->D->D->H round trip ok %d", fill_ok, copy_ok);
  return r_pass("16 MiB memset, H2D, D2D, D2H byte-exact");
}

static result destroy_pending(backend *b) {
  EXEC_ON_SIM(b, conf_exec_destroy_pending);
  grt_cuda_stream *s = NULL;
  grt_cuda_gate *g = NULL;
  volatile int ran = 0;
  CHECK_OK(b, grt_cuda_stream_create(b->dev, GRT_CUDA_STREAM_NON_BLOCKING, 0, &s));
  CHECK_OK(b, grt_cuda_gate_create(b->dev, GATE_MS, &g));
  CHECK_OK(b, grt_cuda_gate_block(g, s));
  CHECK_OK(b, grt_cuda_launch_host_func(s, conf_set_flag, (void *)&ran));
  grt_status d = grt_cuda_stream_destroy(s); /* returns at once */
  int before = __atomic_load_n(&ran, __ATOMIC_SEQ_CST);
  int to = grt_cuda_gate_timed_out(g);
  conf_first kept = CONF_FIRST_INIT;
  KEEP(kept, grt_cuda_gate_open(g));
  int after = conf_wait_flag(&ran, RUN_MS);
  KEEP(kept, grt_device_synchronize(b->dev));
  KEEP(kept, grt_cuda_gate_destroy(g));
  CHECK_KEPT(b, kept);
  CHECK(b, d == GRT_OK && !before && !to, "destroy %s, work ran early %d", grt_status_name(d), before);
  CHECK(b, after, "pending work on the destroyed stream never ran");
  return r_pass("destroy returned at once; the pending work still ran");
}

const ccase conf_stream_cases[] = {
    {"event snapshot at wait time", "wait binds to the snapshot at the wait call; re-record does not move it",
     event_snapshot},
    {"never-recorded event", "query = done, synchronize returns, waiting on it does not wait", never_recorded},
    {"legacy default stream", "serializes with blocking streams both ways; non-blocking streams exempt", legacy_stream},
    {"host function order", "host functions of one stream run in issue order", host_func_order},
    {"memcpy / memset", "stream-ordered, byte-exact", copies},
    {"destroy stream with pending work", "returns at once; the work still completes", destroy_pending},
};
const size_t conf_stream_count = sizeof conf_stream_cases / sizeof conf_stream_cases[0];
