/* bench_replay.c — replay speed on the native format.
 *
 * Usage: bench_replay [--workload training|churn] [--events N] [--live L]
 *                     [--policy P] [--keep FILE]
 * Writes a synthetic native trace of N events (default 20M) to a temporary
 * file with the streaming writer:
 *   training (default) shaped like the shipped PyTorch snapshots: each tensor
 *            is alloc, free_requested, free_completed; an iteration allocates
 *            200 tensors of fixed per-position sizes (60% small-pool, the rest
 *            1-64 MiB) with short-lived workspaces in between, and frees them
 *            in reverse order; iterations repeat;
 *   churn    the stress case: random alloc/free churn over L live allocations
 *            (default 1000), sizes 512 B .. 16 MiB, 4 streams, no
 *            free_requested lines;
 * then times, in this process:
 *   parse   the streaming reader with an empty callback (the baseline);
 *   replay  the streaming reader feeding the replayer with the policy
 *           (default caching), no series.
 * Prints events/s for both and their ratio, and the peak resident memory.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "base/rng.h"
#include "gpurt/replay.h"

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Writes one event unless an earlier write failed (*st keeps the first failure). */
static void emit(FILE *f, grt_status *st, grt_trace_kind k, uint64_t id, uint64_t size, grt_stream_id stream) {
  grt_trace_event ev = {.id = id, .size = size, .kind = (uint8_t)k};
  if (*st == GRT_OK) *st = grt_trace_write_native_event(f, &ev, stream);
}

#define TENSORS 200

static grt_status write_training(FILE *f, uint64_t n_events) {
  grt__rng rng;
  grt__rng_seed(&rng, 7);
  uint64_t size[TENSORS], id[TENSORS], next = 0, written = 0;
  for (int k = 0; k < TENSORS; k++)
    size[k] = grt__rng_below(&rng, 10) < 6 ? 512 * (1 + grt__rng_below(&rng, 2048))
                                           : ((uint64_t)1 << 20) * (1 + grt__rng_below(&rng, 64));
  grt_status st = grt_trace_write_native_header(f);
  while (st == GRT_OK && written + 6 * TENSORS <= n_events) {
    for (int k = 0; k < TENSORS; k++) {
      id[k] = next++;
      emit(f, &st, GRT_TRACE_ALLOC, id[k], size[k], 0);
      written++;
      if (k % 4 == 0) { /* a workspace: allocated and freed right away */
        uint64_t w = next++, ws = size[(k * 7) % TENSORS] / 2 + 512;
        emit(f, &st, GRT_TRACE_ALLOC, w, ws, 0);
        emit(f, &st, GRT_TRACE_FREE_REQUESTED, w, ws, 0);
        emit(f, &st, GRT_TRACE_FREE_COMPLETED, w, ws, 0);
        written += 3;
      }
    }
    for (int k = TENSORS - 1; k >= 0; k--) {
      emit(f, &st, GRT_TRACE_FREE_REQUESTED, id[k], size[k], 0);
      emit(f, &st, GRT_TRACE_FREE_COMPLETED, id[k], size[k], 0);
      written += 2;
    }
  }
  return st;
}

/* The trace file at path; the first failing write's status (GRT_ERR_IO also
 * for an open or close that failed). */
static grt_status write_trace(const char *path, uint64_t n_events, uint32_t live, bool training) {
  FILE *f = fopen(path, "w");
  if (!f) return GRT_ERR_IO;
  static char buf[1 << 20];
  setvbuf(f, buf, _IOFBF, sizeof buf);
  if (training) {
    grt_status st = write_training(f, n_events);
    if (fclose(f) && st == GRT_OK) st = GRT_ERR_IO;
    return st;
  }
  grt__rng rng;
  grt__rng_seed(&rng, 42);
  uint64_t *ids = calloc(live, sizeof *ids), *sizes = calloc(live, sizeof *sizes), next_id = 0;
  if (!ids || !sizes) {
    free(ids);
    free(sizes);
    fclose(f);
    return GRT_ERR_NOMEM;
  }
  grt_status st = grt_trace_write_native_header(f);
  grt_trace_event ev;
  memset(&ev, 0, sizeof ev);
  uint64_t written = 0;
  for (uint32_t i = 0; st == GRT_OK && i < live && written < n_events; i++, written++) {
    ids[i] = next_id++;
    sizes[i] = (uint64_t)512 << grt__rng_below(&rng, 15);
    sizes[i] += grt__rng_below(&rng, sizes[i]);
    ev = (grt_trace_event){.id = ids[i], .size = sizes[i], .kind = GRT_TRACE_ALLOC};
    st = grt_trace_write_native_event(f, &ev, i % 4);
  }
  while (st == GRT_OK && written + 2 <= n_events) {
    uint32_t slot = (uint32_t)grt__rng_below(&rng, live);
    ev = (grt_trace_event){.id = ids[slot], .size = sizes[slot], .kind = GRT_TRACE_FREE_COMPLETED};
    if ((st = grt_trace_write_native_event(f, &ev, slot % 4))) break;
    ids[slot] = next_id++;
    sizes[slot] = (uint64_t)512 << grt__rng_below(&rng, 15);
    sizes[slot] += grt__rng_below(&rng, sizes[slot]);
    ev = (grt_trace_event){.id = ids[slot], .size = sizes[slot], .kind = GRT_TRACE_ALLOC};
    st = grt_trace_write_native_event(f, &ev, slot % 4);
    written += 2;
  }
  free(ids);
  free(sizes);
  if (fclose(f) && st == GRT_OK) st = GRT_ERR_IO;
  return st;
}

static double cpu_s(void) {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec * 1e-6 + (double)ru.ru_stime.tv_sec +
         (double)ru.ru_stime.tv_usec * 1e-6;
}

static grt_status count_event(void *ctx, const grt_trace_event *ev, grt_stream_id stream) {
  (void)stream;
  *(uint64_t *)ctx += ev->kind == GRT_TRACE_ALLOC;
  return GRT_OK;
}

int main(int argc, char **argv) {
  uint64_t n = 20000000;
  uint32_t live = 1000;
  const char *policy = "caching", *keep = NULL;
  bool training = true;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--events") && i + 1 < argc) n = strtoull(argv[++i], NULL, 10);
    else if (!strcmp(argv[i], "--live") && i + 1 < argc) live = (uint32_t)strtoul(argv[++i], NULL, 10);
    else if (!strcmp(argv[i], "--policy") && i + 1 < argc) policy = argv[++i];
    else if (!strcmp(argv[i], "--keep") && i + 1 < argc) keep = argv[++i];
    else if (!strcmp(argv[i], "--workload") && i + 1 < argc) training = !strcmp(argv[++i], "training");
    else {
      fprintf(stderr, "usage: bench_replay [--workload training|churn] [--events N] [--live L] [--policy P] [--keep FILE]\n");
      return 2;
    }
  }
  if (live == 0 || n < live) {
    fprintf(stderr, "bench_replay: need --live >= 1 and --events >= --live\n");
    return 2;
  }
  char tmp[] = "/tmp/bench_replay_XXXXXX";
  const char *path = keep;
  if (!path) {
    int fd = mkstemp(tmp);
    if (fd < 0) return 1;
    close(fd);
    path = tmp;
  }
  double t0 = now_s();
  grt_status wst = write_trace(path, n, live, training);
  if (wst) {
    fprintf(stderr, "bench_replay: cannot write %s: %s\n", path, grt_status_name(wst));
    return 1;
  }
  double t1 = now_s(), c1 = cpu_s();
  uint64_t allocs = 0;
  grt_trace_error err;
  grt_status st = grt_trace_read_native_stream(path, count_event, &allocs, &err);
  double t2 = now_s(), c2 = cpu_s();
  grt_replay_config c;
  grt_replay_config_default(&c);
  c.policy = policy;
  grt_replay_summary s;
  if (!st) st = grt_replay_stream_file(path, &c, &s, &err);
  double t3 = now_s(), c3 = cpu_s();
  if (!keep) unlink(path);
  if (st) {
    fprintf(stderr, "bench_replay: %s:%llu: %s\n", path, (unsigned long long)err.line, err.reason);
    return 1;
  }
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  double parse = (double)n / (t2 - t1), replay = (double)n / (t3 - t2);
  printf("bench_replay: %s workload, %llu events (%llu allocs), policy %s\n", training ? "training" : "churn",
         (unsigned long long)s.events, (unsigned long long)allocs, policy);
  printf("  write (fprintf)   %6.2f s\n", t1 - t0);
  printf("  parse only        %6.2f s  %6.2f M events/s   (baseline)\n", t2 - t1, parse / 1e6);
  printf("  parse + replay    %6.2f s  %6.2f M events/s   (%.2fx the parse-only time)\n", t3 - t2, replay / 1e6,
         (t3 - t2) / (t2 - t1));
  double replay_cpu = (c3 - c2) - (c2 - c1); /* the replaying thread's share, the reader's being the parse */
  printf("  cpu time: parse %.2f s, parse + replay %.2f s (both threads)\n", c2 - c1, c3 - c2);
  if (replay_cpu > 0)
    printf("  pipelined throughput on two free cores (the slower stage): %.2f M events/s\n",
           (double)n / (replay_cpu > c2 - c1 ? replay_cpu : c2 - c1) / 1e6);
  printf("  peak reserved %.1f MiB, device mallocs %llu; max RSS %ld MiB\n", (double)s.peak_reserved / 1048576.0,
         (unsigned long long)s.device_mallocs, ru.ru_maxrss / 1024);
  return 0;
}
