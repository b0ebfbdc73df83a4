/* bench_exec.c — executor overheads under the threads clock.
 *
 *   1. enqueue cost per op while the stream's worker is busy (amortized);
 *      baseline: a naive queue push (malloc'd node + mutex) in-process;
 *   2. empty-op throughput per stream (issue + execute + complete), 1 and 4 streams;
 *   3. cross-stream event wake-up latency: end of A's op -> start of B's op body,
 *      when B's op lands on the same engine (pool hand-off) and on another engine
 *      (B is zero-length: the completing worker starts and runs it, see
 *      start_fed_ops in src/exec/sched_threads.c); and host wake-up from event
 *      synchronize.
 * Targets: <= 150 ns per enqueued op, <= 5 us wake-up. CUDA anchors printed alongside.
 * Usage: bench_exec [ops]   (default 200000)
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gpurt/exec.h"

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* A failed call ends the bench: the numbers after it would measure nothing. */
static void die(const char *call, grt_status st) {
  fprintf(stderr, "bench_exec: %s: %s\n", call, grt_status_name(st));
  exit(1);
}
#define MUST(call)                                \
  do {                                            \
    grt_status must_st_ = (call);                 \
    if (must_st_ != GRT_OK) die(#call, must_st_); \
  } while (0)

static grt_exec *make(void) {
  grt_exec_config cfg;
  grt_exec_config_default(&cfg);
  cfg.device_capacity = GRT_MiB;
  grt_exec *e = NULL;
  if (grt_exec_create(&cfg, &e)) {
    fprintf(stderr, "exec create failed\n");
    exit(1);
  }
  return e;
}

/* ---- baseline: what a naive locked queue costs per push ---- */
typedef struct node {
  struct node *next;
  void *payload[8];
} node;

/* Enqueue cost at CUDA's queue depth (~1024 pending launches): the stream is
 * held by a user event while `depth` ops are issued (timed), then released and
 * drained (untimed); repeated until n ops were issued. */
static double enqueue_at_depth(int n, int depth) {
  grt_exec *exec = make();
  grt_stream *s;
  grt_user_event *gate;
  MUST(grt_stream_create(exec, GRT_STREAM_NON_BLOCKING, 0, &s));
  MUST(grt_user_event_create(exec, "gate", &gate));
  grt_kernel_desc empty = {NULL, NULL, 0, GRT_ENGINE_COMPUTE, NULL};
  uint64_t timed = 0, issued = 0;
  for (uint64_t round = 1; issued < (uint64_t)n; round++) {
    MUST(grt_stream_wait_user_event(s, gate, round));
    uint64_t t = now_ns();
    for (int i = 0; i < depth; i++) MUST(grt_launch_kernel(s, &empty));
    timed += now_ns() - t;
    issued += (uint64_t)depth;
    MUST(grt_user_event_signal(gate, round));
    MUST(grt_stream_synchronize(s));
  }
  MUST(grt_user_event_destroy(gate));
  MUST(grt_stream_destroy(s));
  MUST(grt_exec_destroy(exec));
  return (double)timed / (double)issued;
}

static double baseline_push(int n) {
  pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
  node *head = NULL, **tail = &head;
  uint64_t t = now_ns();
  for (int i = 0; i < n; i++) {
    node *x = malloc(sizeof *x);
    x->next = NULL;
    x->payload[0] = (void *)(uintptr_t)i;
    pthread_mutex_lock(&m);
    *tail = x;
    tail = &x->next;
    pthread_mutex_unlock(&m);
  }
  double per = (double)(now_ns() - t) / n;
  while (head) {
    node *x = head;
    head = head->next;
    free(x);
  }
  return per;
}

/* warm: the exec already recycled n ops (steady state); cold: every op's
 * memory is fresh (first-touch page faults included). */
static double enqueue_while_busy(int n, int warm) {
  grt_exec *exec = make();
  grt_stream *s;
  MUST(grt_stream_create(exec, GRT_STREAM_NON_BLOCKING, 0, &s));
  grt_kernel_desc busy = {NULL, NULL, 300000000ull, GRT_ENGINE_COMPUTE, "busy"}; /* 300 ms */
  grt_kernel_desc empty = {NULL, NULL, 0, GRT_ENGINE_COMPUTE, NULL};
  if (warm) {
    grt_kernel_desc gate = {NULL, NULL, 1000000ull, GRT_ENGINE_COMPUTE, "warm-up"};
    MUST(grt_launch_kernel(s, &gate));
    for (int i = 0; i < n; i++) MUST(grt_launch_kernel(s, &empty));
    MUST(grt_stream_synchronize(s));
  }
  MUST(grt_launch_kernel(s, &busy));
  uint64_t t = now_ns();
  for (int i = 0; i < n; i++) MUST(grt_launch_kernel(s, &empty));
  double per = (double)(now_ns() - t) / n;
  MUST(grt_stream_synchronize(s));
  MUST(grt_stream_destroy(s));
  MUST(grt_exec_destroy(exec));
  return per;
}

typedef struct tp_arg {
  grt_exec *exec;
  int n;
} tp_arg;

static void *throughput_thread(void *p) {
  tp_arg *a = p;
  grt_stream *s;
  MUST(grt_stream_create(a->exec, GRT_STREAM_NON_BLOCKING, 0, &s));
  grt_kernel_desc empty = {NULL, NULL, 0, GRT_ENGINE_COMPUTE, NULL};
  for (int i = 0; i < a->n; i++) MUST(grt_launch_kernel(s, &empty));
  MUST(grt_stream_synchronize(s));
  MUST(grt_stream_destroy(s));
  return NULL;
}

/* ns per op, issue to completion, `streams` streams each fed by its own thread. */
static double throughput(int n, int streams) {
  grt_exec *exec = make();
  pthread_t th[8];
  tp_arg a = {exec, n / streams};
  uint64_t t = now_ns();
  for (int i = 0; i < streams; i++) pthread_create(&th[i], NULL, throughput_thread, &a);
  for (int i = 0; i < streams; i++) pthread_join(th[i], NULL);
  double per = (double)(now_ns() - t) / ((double)a.n * streams);
  MUST(grt_exec_destroy(exec));
  return per;
}

static _Atomic uint64_t stamp_a, stamp_b;
static void mark_a(void *p) {
  (void)p;
  atomic_store(&stamp_a, now_ns());
}
static void mark_b(void *p) {
  (void)p;
  atomic_store(&stamp_b, now_ns());
}

static int cmp_u64(const void *x, const void *y) {
  uint64_t a = *(const uint64_t *)x, b = *(const uint64_t *)y;
  return a < b ? -1 : a > b;
}

typedef struct lat {
  double p50, p99;
} lat;

static lat summarize(uint64_t *v, int n) {
  qsort(v, (size_t)n, sizeof *v, cmp_u64);
  return (lat){(double)v[n / 2], (double)v[n * 99 / 100]};
}

/* A: op marking its end; B waits on A's event; B's op marks its start. */
static lat wakeup(int iters, grt_engine_class b_engine) {
  grt_exec *exec = make();
  grt_stream *a, *b;
  grt_event *e;
  MUST(grt_stream_create(exec, GRT_STREAM_NON_BLOCKING, 0, &a));
  MUST(grt_stream_create(exec, GRT_STREAM_NON_BLOCKING, 0, &b));
  MUST(grt_event_create(exec, GRT_EVENT_DISABLE_TIMING, &e));
  uint64_t *v = malloc((size_t)iters * sizeof *v);
  grt_kernel_desc ka = {mark_a, NULL, 20000, GRT_ENGINE_COMPUTE, NULL}; /* B is issued while A runs */
  grt_kernel_desc kb = {mark_b, NULL, 0, b_engine, NULL};
  for (int i = 0; i < iters; i++) {
    MUST(grt_launch_kernel(a, &ka));
    MUST(grt_event_record(e, a));
    MUST(grt_stream_wait_event(b, e));
    MUST(grt_launch_kernel(b, &kb));
    MUST(grt_exec_synchronize(exec));
    v[i] = atomic_load(&stamp_b) - atomic_load(&stamp_a);
  }
  lat r = summarize(v, iters);
  free(v);
  MUST(grt_event_destroy(e));
  MUST(grt_stream_destroy(a));
  MUST(grt_stream_destroy(b));
  MUST(grt_exec_destroy(exec));
  return r;
}

/* Baseline: the OS floor for waking a sleeping thread (pthread condvar), the
 * same path as waking an idle worker of another engine. */
static pthread_mutex_t cv_m = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv_c = PTHREAD_COND_INITIALIZER;
static int cv_turn; /* 1: the sleeper may go */
static uint64_t cv_t;

static void *cv_sleeper(void *p) {
  uint64_t *v = p;
  for (int i = 0; i < 2000; i++) {
    pthread_mutex_lock(&cv_m);
    while (cv_turn != 1) pthread_cond_wait(&cv_c, &cv_m);
    v[i] = now_ns() - cv_t;
    cv_turn = 0;
    pthread_cond_broadcast(&cv_c);
    pthread_mutex_unlock(&cv_m);
  }
  return NULL;
}

static lat condvar_baseline(void) {
  uint64_t *v = calloc(2000, sizeof *v);
  pthread_t t;
  pthread_create(&t, NULL, cv_sleeper, v);
  for (int i = 0; i < 2000; i++) {
    struct timespec ts = {0, 50000};
    nanosleep(&ts, NULL); /* let the sleeper block */
    pthread_mutex_lock(&cv_m);
    cv_turn = 1;
    cv_t = now_ns();
    pthread_cond_broadcast(&cv_c);
    while (cv_turn != 0) pthread_cond_wait(&cv_c, &cv_m);
    pthread_mutex_unlock(&cv_m);
  }
  pthread_join(t, NULL);
  lat r = summarize(v, 2000);
  free(v);
  return r;
}

/* End of A's op body -> return from grt_event_synchronize on the host. */
static lat host_wakeup(int iters, unsigned flags) {
  grt_exec *exec = make();
  grt_stream *a;
  grt_event *e;
  MUST(grt_stream_create(exec, GRT_STREAM_NON_BLOCKING, 0, &a));
  MUST(grt_event_create(exec, flags, &e));
  uint64_t *v = malloc((size_t)iters * sizeof *v);
  grt_kernel_desc ka = {mark_a, NULL, flags ? 50000 : 0, GRT_ENGINE_COMPUTE, NULL};
  for (int i = 0; i < iters; i++) {
    MUST(grt_launch_kernel(a, &ka));
    MUST(grt_event_record(e, a));
    MUST(grt_event_synchronize(e));
    v[i] = now_ns() - atomic_load(&stamp_a);
  }
  lat r = summarize(v, iters);
  free(v);
  MUST(grt_event_destroy(e));
  MUST(grt_stream_destroy(a));
  MUST(grt_exec_destroy(exec));
  return r;
}

int main(int argc, char **argv) {
  char *end = NULL;
  long ops = argc > 1 ? strtol(argv[1], &end, 10) : 200000;
  if (argc > 2 || (argc > 1 && (*end || ops < 1000 || ops > 100000000))) {
    fprintf(stderr, "usage: bench_exec [OPS]   ops per run, 1000..100000000 (default 200000)\n");
    return !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") ? 0 : 2;
  }
  int n = (int)ops;
  printf("bench_exec: threads clock, %d ops per run (best of 3)\n\n", n);
  double base = 1e18, enq = 1e18, cold = 1e18, depth = 1e18, tp1 = 1e18, tp4 = 1e18;
  for (int r = 0; r < 3; r++) {
    double x;
    if ((x = baseline_push(n)) < base) base = x;
    if ((x = enqueue_while_busy(n, 1)) < enq) enq = x;
    if ((x = enqueue_while_busy(n, 0)) < cold) cold = x;
    if ((x = enqueue_at_depth(n, 1024)) < depth) depth = x;
    if ((x = throughput(n, 1)) < tp1) tp1 = x;
    if ((x = throughput(n, 4)) < tp4) tp4 = x;
  }
  printf("1. enqueue, 1024 ops queued per burst  %7.1f ns/op   (target <= 150 ns)  %s\n", depth,
         depth <= 150 ? "OK" : "MISS");
  printf("   enqueue while the worker is busy, %d queued: %.1f ns/op (op memory beyond the caches)\n", n, enq);
  printf("   same, cold (fresh op memory)        %7.1f ns/op   (first-touch page faults of the op slabs)\n", cold);
  printf("   baseline: malloc'd node + mutex push %6.1f ns/op   ratio %.2fx (1024-deep bursts)\n", base, depth / base);
  printf("2. empty-op throughput, 1 stream       %7.1f ns/op   (%.2f M ops/s, issue to completion)\n", tp1,
         1e3 / tp1);
  printf("   empty-op throughput, 4 streams      %7.1f ns/op   (%.2f M ops/s, 4 issuing threads)\n", tp4,
         1e3 / tp4);
  int iters = 2000;
  lat same = wakeup(iters, GRT_ENGINE_COMPUTE);
  lat other = wakeup(iters, GRT_ENGINE_COPY_D2H);
  lat spin = host_wakeup(iters, GRT_EVENT_DEFAULT);
  lat block = host_wakeup(iters, GRT_EVENT_BLOCKING_SYNC);
  lat cv = condvar_baseline();
  printf("3. cross-stream event wake-up (end of A's op -> start of B's op body), %d iterations:\n", iters);
  printf("   B on the same engine (pool hand-off) p50 %6.2f us  p99 %6.2f us  (target <= 5 us)  %s\n",
         same.p50 / 1e3, same.p99 / 1e3, same.p50 <= 5000 ? "OK" : "MISS");
  printf("   B on another engine, zero-length    p50 %6.2f us  p99 %6.2f us  (target <= 5 us)  %s\n",
         other.p50 / 1e3, other.p99 / 1e3, other.p50 <= 5000 ? "OK" : "MISS");
  printf("     (A's worker starts B at A's completion and, B being zero-length, runs it: no thread is woken;\n"
         "      a B with a duration also starts then, and its own engine's worker, woken, sleeps through it)\n");
  printf("   baseline: raw condvar wake-up        p50 %6.2f us  p99 %6.2f us  (OS floor for waking a sleeper)\n",
         cv.p50 / 1e3, cv.p99 / 1e3);
  printf("   host event synchronize, spinning     p50 %6.2f us  p99 %6.2f us  (default flags, short op)\n",
         spin.p50 / 1e3, spin.p99 / 1e3);
  printf("   host event synchronize, blocking     p50 %6.2f us  p99 %6.2f us  (GRT_EVENT_BLOCKING_SYNC, 50 us op)\n",
         block.p50 / 1e3, block.p99 / 1e3);
  printf("\nCUDA anchors (CPU side): eager launch 2-4 us per kernel (V100 3.8 us, H100 2.1 us); graph launch\n"
         "1.3-3.4 us per kernel; cudaEventRecord ~1.6 us; CPU thread pool ~0.85 us per task; submit-and-wait\n"
         "round trip with a sleeping worker 5.7 us.\n");
  printf("enqueue here vs a 2.1-3.8 us eager launch: %.0fx-%.0fx cheaper\n", 2100 / depth, 3800 / depth);
  return 0;
}
