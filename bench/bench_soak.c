/* bench_soak.c — a synthetic serving day replayed through the allocator.
 *
 * Usage: bench_soak [--events N] [--seed S] [--policy caching|expandable|both] [--check]
 *
 * Generates the trace on the fly (nothing is stored: memory follows the live
 * allocations) and feeds it with grt_replay_feed to a replay with the caching
 * policy and, separately, with alloc_conf "expandable_segments:True". The day:
 *   - 24 simulated hours of N/24 events each (default N = 100,000,000 events,
 *     every event an alloc or a free_completed);
 *   - steady load: 1,000..2,000 requests in flight at all times (below 1,000
 *     a request starts; between, a coin decides start or end; at 2,000 one
 *     ends); a request allocates 2..16 tensors on one of 4 streams and frees
 *     them together when it ends; which request ends next is random;
 *   - request sizes drift over the day: small tensors 512 B .. 1 MiB and large
 *     ones (30%) 1 MiB .. hi(t), where hi rises from 8 MiB at hour 0 to 48 MiB
 *     at hour 24 (longer prompts as the day goes on);
 *   - long-lived blocks (weights, KV-cache pages, adapters): one every N/3000
 *     events, 256 KiB .. 32 MiB, on stream 0; one in five of those moments also
 *     frees a random older one, so the set grows slowly (about 2,400 at the end).
 * Prints per simulated hour reserved, allocated, largest free block inside
 * reserved memory, fragmentation (1 - largest free / cached), device
 * mallocs/frees in that hour, and the process's max RSS (getrusage); and the
 * max RSS at start and end. --check (the CTest smoke) fails unless 24 rows were
 * printed, max RSS grew by less than 8 MiB between hour 12 and the end (a
 * leak of a few hundred bytes per event shows there) and by less than 64 MiB
 * after hour 1 (the live set is
 * bounded: a replay that kept per-event state would grow with the trace).
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "base/rng.h"
#include "gpurt/replay.h"

#define HOURS 24
#define STREAMS 4
#define MAX_TENSORS 16
#define TARGET_REQUESTS 2000
#define LONG_LIVED_PER_DAY 3000

typedef struct request {
  uint64_t first_id;
  uint32_t n;
  uint32_t stream;
} request;

typedef struct soak {
  grt__rng rng;
  grt_replay *r;
  uint64_t next_id, events, total;
  request *req;
  size_t n_req;
  uint64_t *lived; /* ids of the long-lived blocks */
  size_t n_lived, cap_lived;
  grt_status err;
} soak;

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static long max_rss_kib(void) {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return ru.ru_maxrss;
}

static void feed(soak *k, grt_trace_kind kind, uint64_t id, uint64_t size, grt_stream_id stream) {
  grt_trace_event ev = {.id = id, .size = size, .kind = (uint8_t)kind};
  grt_status st = grt_replay_feed(k->r, &ev, stream);
  if (st && !k->err) {
    k->err = st;
    fprintf(stderr, "bench_soak: %s: %s\n", grt_status_name(st), grt_replay_last_error(k->r));
  }
  k->events++;
}

/* Size of a tensor at day fraction t in [0, 1). Ids are dense per request, so
 * a request's sizes are recomputed from (id, t0) at its free: the replay only
 * needs the id, the size is informative. */
static uint64_t tensor_size(soak *k, double t) {
  if (grt__rng_below(&k->rng, 10) < 7) return grt__rng_log_uniform(&k->rng, 512, GRT_MiB);
  uint64_t hi = (uint64_t)((8.0 + 40.0 * t) * (double)GRT_MiB);
  return grt__rng_log_uniform(&k->rng, GRT_MiB, hi);
}

static void start_request(soak *k, double t) {
  request *q = &k->req[k->n_req++];
  q->first_id = k->next_id;
  q->n = 2 + (uint32_t)grt__rng_below(&k->rng, MAX_TENSORS - 1);
  q->stream = (uint32_t)grt__rng_below(&k->rng, STREAMS);
  k->next_id += q->n;
  for (uint32_t i = 0; i < q->n; i++) feed(k, GRT_TRACE_ALLOC, q->first_id + i, tensor_size(k, t), q->stream);
}

static void end_request(soak *k) {
  size_t i = (size_t)grt__rng_below(&k->rng, k->n_req);
  request q = k->req[i];
  k->req[i] = k->req[--k->n_req];
  for (uint32_t j = 0; j < q.n; j++) feed(k, GRT_TRACE_FREE_COMPLETED, q.first_id + j, 0, q.stream);
}

static void long_lived(soak *k) {
  if (k->n_lived && grt__rng_below(&k->rng, 5) == 0) {
    size_t i = (size_t)grt__rng_below(&k->rng, k->n_lived);
    feed(k, GRT_TRACE_FREE_COMPLETED, k->lived[i], 0, 0);
    k->lived[i] = k->lived[--k->n_lived];
  }
  if (k->n_lived == k->cap_lived) {
    size_t cap = k->cap_lived ? 2 * k->cap_lived : 256;
    uint64_t *p = realloc(k->lived, cap * sizeof *p);
    if (!p) {
      k->err = GRT_ERR_NOMEM;
      return;
    }
    k->lived = p;
    k->cap_lived = cap;
  }
  uint64_t id = k->next_id++;
  k->lived[k->n_lived++] = id;
  feed(k, GRT_TRACE_ALLOC, id, grt__rng_log_uniform(&k->rng, 256 * GRT_KiB, 32 * GRT_MiB), 0);
}

static void fmt(uint64_t b, char *buf) { grt_format_bytes(b, buf, 32); }

/* 1 when st failed: reports the call, and k keeps its first failure. */
static int failed(soak *k, grt_status st, const char *call) {
  if (st == GRT_OK) return 0;
  if (!k->err) k->err = st;
  fprintf(stderr, "bench_soak: %s: %s\n", call, grt_status_name(st));
  return 1;
}

/* One replay of the day; returns the number of hourly rows printed (or -1). */
static int run_day(const char *label, const char *alloc_conf, uint64_t total, uint64_t seed, long *rss_h1,
                   long *rss_h12, long *rss_end) {
  soak k;
  memset(&k, 0, sizeof k);
  grt__rng_seed(&k.rng, seed);
  k.total = total;
  k.req = calloc(TARGET_REQUESTS + 1, sizeof *k.req);
  grt_replay_config cfg;
  grt_replay_config_default(&cfg);
  cfg.policy = "caching";
  cfg.alloc_conf = alloc_conf;
  if (!k.req || grt_replay_create(&cfg, NULL, &k.r)) {
    free(k.req);
    return -1;
  }
  printf("\n== %s (%s), %llu events, 24 simulated hours\n", label, alloc_conf ? alloc_conf : "default",
         (unsigned long long)total);
  printf("%4s %12s %12s %12s %6s %10s %10s %8s %9s %10s\n", "hour", "reserved", "allocated", "largest_free", "frag",
         "dev_malloc", "dev_free", "requests", "long_lvd", "maxrss_MiB");
  uint64_t every_long = total / LONG_LIVED_PER_DAY ? total / LONG_LIVED_PER_DAY : 1, next_long = every_long;
  uint64_t prev_mallocs = 0, prev_frees = 0;
  int rows = 0;
  double t0 = now_s();
  for (int h = 0; h < HOURS && !k.err; h++) {
    uint64_t hour_end = h == HOURS - 1 ? total : total / HOURS * (uint64_t)(h + 1);
    while (k.events < hour_end && !k.err) {
      double t = (double)k.events / (double)total;
      if (k.events >= next_long) {
        long_lived(&k);
        next_long += every_long;
      } else if (k.n_req < TARGET_REQUESTS && (k.n_req < TARGET_REQUESTS / 2 || grt__rng_below(&k.rng, 2))) {
        start_request(&k, t);
      } else {
        end_request(&k);
      }
    }
    grt_replay_sample s;
    if (failed(&k, grt_replay_sample_now(k.r, &s), "grt_replay_sample_now")) break;
    char res[32], alc[32], lf[32];
    fmt(s.reserved, res);
    fmt(s.allocated, alc);
    fmt(s.largest_free, lf);
    long rss = max_rss_kib();
    if (h == 0) *rss_h1 = rss;
    if (h == HOURS / 2 - 1) *rss_h12 = rss;
    printf("%4d %12s %12s %12s %6.3f %10llu %10llu %8zu %9zu %10.1f\n", h + 1, res, alc, lf, s.fragmentation,
           (unsigned long long)(s.device_mallocs - prev_mallocs), (unsigned long long)(s.device_frees - prev_frees),
           k.n_req, k.n_lived, (double)rss / 1024.0);
    fflush(stdout);
    prev_mallocs = s.device_mallocs;
    prev_frees = s.device_frees;
    rows++;
  }
  double secs = now_s() - t0;
  grt_replay_summary sum;
  int have_sum = !failed(&k, grt_replay_get_summary(k.r, &sum), "grt_replay_get_summary");
  char pr[32], pa[32];
  if (have_sum) {
    fmt(sum.peak_reserved, pr);
    fmt(sum.peak_allocated, pa);
  }
  *rss_end = max_rss_kib();
  if (have_sum)
    printf("%s: %llu events in %.1f s (%.2f M events/s); peak reserved %s, peak allocated %s; "
           "device mallocs %llu, frees %llu; OOMs %llu\n",
           label, (unsigned long long)sum.events, secs, (double)sum.events / secs / 1e6, pr, pa,
           (unsigned long long)sum.device_mallocs, (unsigned long long)sum.device_frees,
           (unsigned long long)sum.ooms);
  failed(&k, grt_replay_destroy(k.r), "grt_replay_destroy");
  free(k.req);
  free(k.lived);
  return k.err ? -1 : rows;
}

int main(int argc, char **argv) {
  uint64_t events = 100000000ull, seed = 20261130;
  const char *policy = "both";
  bool check = false;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--events") && i + 1 < argc) events = strtoull(argv[++i], NULL, 10);
    else if (!strcmp(argv[i], "--seed") && i + 1 < argc) seed = strtoull(argv[++i], NULL, 10);
    else if (!strcmp(argv[i], "--policy") && i + 1 < argc) policy = argv[++i];
    else if (!strcmp(argv[i], "--check")) check = true;
    else {
      fprintf(stderr, "usage: bench_soak [--events N] [--seed S] [--policy caching|expandable|both] [--check]\n");
      return 2;
    }
  }
  if (events < HOURS * 100) {
    fprintf(stderr, "bench_soak: --events must be at least %d\n", HOURS * 100);
    return 2;
  }
  long rss_start = max_rss_kib();
  printf("bench_soak: max RSS at start %.1f MiB\n", (double)rss_start / 1024.0);
  int fail = 0;
  const char *labels[2] = {"caching", "expandable"};
  const char *confs[2] = {NULL, "expandable_segments:True"};
  for (int p = 0; p < 2; p++) {
    if (strcmp(policy, "both") && strcmp(policy, labels[p])) continue;
    long rss_h1 = 0, rss_h12 = 0, rss_end = 0;
    int rows = run_day(labels[p], confs[p], events, seed, &rss_h1, &rss_h12, &rss_end);
    double growth = (double)(rss_end - rss_h1) / 1024.0, late = (double)(rss_end - rss_h12) / 1024.0;
    printf("%s: max RSS after hour 1 %.1f MiB, after hour 12 %.1f MiB, at the end %.1f MiB (growth %.1f MiB, "
           "%.1f MiB in the second half)\n", labels[p], (double)rss_h1 / 1024.0, (double)rss_h12 / 1024.0,
           (double)rss_end / 1024.0, growth, late);
    if (rows != HOURS) {
      printf("FAIL: %s printed %d hourly rows\n", labels[p], rows);
      fail = 1;
    } else if (check && growth >= 64.0) {
      printf("FAIL: %s: max RSS grew by %.1f MiB after hour 1\n", labels[p], growth);
      fail = 1;
    } else if (check && late >= 8.0) {
      /* by noon the day's live set has been reached: what grows after is kept per event, a leak */
      printf("FAIL: %s: max RSS grew by %.1f MiB in the day's second half (a leak: bounded at 8 MiB)\n", labels[p],
             late);
      fail = 1;
    }
  }
  printf("bench_soak: max RSS at start %.1f MiB, at the end %.1f MiB\n", (double)rss_start / 1024.0,
         (double)max_rss_kib() / 1024.0);
  return fail;
}
