/* bench_whatif.c — the what-if sweep's speed: 24 allocator settings over a
 * 1,000,000-event trace, in parallel threads, against one setting replayed
 * alone in the same process (the baseline).
 *
 *   ./build/release/bench/bench_whatif [--events N] [--threads K] [--snapshot FILE]
 *
 * The trace is generated deterministically (seeded xoshiro256**, seed 1): a
 * training-shaped loop of alloc/free with sizes drawn log-uniform between
 * 512 B and 64 MiB, a working set of up to 2000 live tensors, and an
 * empty_cache-style segment_free run every 50,000 events; it is written as a
 * native trace text and loaded once. --snapshot loads a file instead (a
 * PyTorch snapshot from bench/gen_snapshot.py: the same loop's shape,
 * pickled as PyTorch does, frames included). Prints wall time, CPU time and
 * the peak RSS against the trace text's or the file's size. */
#include <getopt.h>
#include <stdarg.h>
#include <stdbool.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base/rng.h"
#include "gpurt/doctor.h"

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

typedef struct text {
  char *p;
  size_t n, cap;
} text;

static void put(text *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(text *t, const char *fmt, ...) {
  if (t->n + 128 > t->cap) {
    t->cap = t->cap ? t->cap * 2 : 1 << 20;
    t->p = realloc(t->p, t->cap);
    if (!t->p) exit(1);
  }
  va_list ap;
  va_start(ap, fmt);
  t->n += (size_t)vsnprintf(t->p + t->n, t->cap - t->n, fmt, ap);
  va_end(ap);
}

static text generate(uint64_t events) {
  text t = {0};
  grt__rng rng;
  grt__rng_seed(&rng, 1);
  uint64_t live[2000], live_size[2000], n_live = 0, next_id = 0;
  put(&t, "gpurt-trace 1\n");
  for (uint64_t e = 0; e < events;) {
    if (e % 50000 == 49999) {
      put(&t, "segment_free - 2097152 0 - 0x%llx\n", (unsigned long long)(0x10000000 + e));
      e++;
      continue;
    }
    bool do_free = n_live == 2000 || (n_live && grt__rng_below(&rng, 100) < 48);
    if (do_free) {
      size_t i = (size_t)grt__rng_below(&rng, n_live);
      put(&t, "free_completed %llu %llu\n", (unsigned long long)live[i], (unsigned long long)live_size[i]);
      live[i] = live[--n_live];
      live_size[i] = live_size[n_live];
    } else {
      uint64_t size = grt__rng_log_uniform(&rng, 512, 64ull << 20);
      put(&t, "alloc %llu %llu\n", (unsigned long long)next_id, (unsigned long long)size);
      live[n_live] = next_id++;
      live_size[n_live++] = size;
    }
    e++;
  }
  return t;
}

/* The sweep's own rows, then more of the same kinds up to 24. */
static size_t settings(const grt_trace *t, grt_whatif_row *rows, size_t want) {
  grt_whatif_row *sw;
  size_t n;
  if (grt_whatif_sweep(t, &sw, &n)) exit(1);
  if (n > want) n = want;
  memcpy(rows, sw, n * sizeof *rows);
  grt_whatif_free(sw);
  static const char *const more[] = {"roundup_power2_divisions:2",  "roundup_power2_divisions:16",
                                     "max_split_size_mb:48",        "max_split_size_mb:96",
                                     "max_split_size_mb:384",       "expandable_segments:True,max_split_size_mb:64",
                                     "expandable_segments:True,roundup_power2_divisions:8",
                                     "garbage_collection_threshold:0.7,per_process_memory_fraction:0.9",
                                     "roundup_power2_divisions:[256:1,512:2,1024:4,>:8]",
                                     "max_split_size_mb:768",
                                     "expandable_segments:True,roundup_power2_divisions:2",
                                     "garbage_collection_threshold:0.5,per_process_memory_fraction:0.9",
                                     "expandable_segments:True,garbage_collection_threshold:0.6,per_process_memory_fraction:0.95",
                                     "max_split_size_mb:64,garbage_collection_threshold:0.6,per_process_memory_fraction:0.95",
                                     "expandable_segments:True,max_split_size_mb:256",
                                     "roundup_power2_divisions:[>:4]"};
  for (size_t i = 0; n < want && i < sizeof more / sizeof more[0]; i++, n++) {
    memset(&rows[n], 0, sizeof rows[n]);
    snprintf(rows[n].conf, sizeof rows[n].conf, "%s", more[i]);
  }
  return n;
}

static double cpu_seconds(void) {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 + (double)ru.ru_stime.tv_sec +
         (double)ru.ru_stime.tv_usec / 1e6;
}

int main(int argc, char **argv) {
  uint64_t events = 1000000;
  unsigned threads = 0;
  const char *snapshot = NULL;
  static const struct option opts[] = {{"events", required_argument, NULL, 'e'},
                                       {"threads", required_argument, NULL, 't'},
                                       {"snapshot", required_argument, NULL, 's'},
                                       {NULL, 0, NULL, 0}};
  for (int c; (c = getopt_long(argc, argv, "", opts, NULL)) != -1;) {
    if (c == 'e') events = strtoull(optarg, NULL, 10);
    else if (c == 't') threads = (unsigned)strtoul(optarg, NULL, 10);
    else if (c == 's') snapshot = optarg;
    else return 2;
  }
  double t0 = now();
  text src = {0};
  grt_trace *t;
  grt_trace_load_config lc;
  grt_trace_load_config_default(&lc);
  grt_trace_error err;
  struct stat sb;
  if (snapshot && stat(snapshot, &sb)) {
    fprintf(stderr, "bench_whatif: cannot stat %s\n", snapshot);
    return 1;
  }
  if (!snapshot) src = generate(events);
  if (snapshot ? grt_trace_load(snapshot, &lc, &t, &err)
               : grt_trace_load_buffer(src.p, src.n, "generated.trace", &lc, &t, &err)) {
    fprintf(stderr, "bench_whatif: %s\n", err.reason);
    return 1;
  }
  size_t input = snapshot ? (size_t)sb.st_size : src.n;
  grt_trace_info info;
  if (grt_trace_get_info(t, &info)) return 1;
  events = info.n_events;
  double t1 = now();
  grt_whatif_row rows[24];
  size_t n = settings(t, rows, 24);
  grt_whatif_options o;
  grt_whatif_options_default(&o);
  o.capacity = 24ull << 30;
  o.threads = 1;
  double c0 = cpu_seconds(), t2 = now();
  if (grt_whatif_run(t, &o, rows, 1)) return 1; /* the baseline: one setting alone */
  double one = now() - t2;
  o.threads = threads;
  double t3 = now();
  if (grt_whatif_run(t, &o, rows, n)) return 1;
  double all = now() - t3, cpu = cpu_seconds() - c0;
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  printf("bench_whatif: %" PRIu64 " events (%.1f MiB of %s), %s in %.2f s\n", events, (double)input / (1 << 20),
         snapshot ? "snapshot" : "trace text", snapshot ? "loaded" : "generated and loaded", t1 - t0);
  printf("  one setting alone         %7.3f s wall\n", one);
  printf("  %2zu settings, %u thread%s     %7.3f s wall, %.2f s CPU (%.1fx one setting)\n", n,
         threads ? threads : (unsigned)sysconf(_SC_NPROCESSORS_ONLN), threads == 1 ? "" : "s", all, cpu, all / one);
  printf("  peak RSS                  %7.1f MiB (%.2fx the %s)\n", (double)ru.ru_maxrss / 1024,
         (double)ru.ru_maxrss * 1024 / (double)input, snapshot ? "snapshot file" : "trace text");
  for (size_t i = 0; i < n; i++)
    if (rows[i].status) printf("  row '%s': %s\n", rows[i].conf, rows[i].note);
  free(src.p);
  return grt_trace_destroy(t) ? 1 : 0;
}
