/* bench_runs.c — W1/W2 over any allocator policy, Demo 1's workload, and the
 * multi-thread throughput run, for `gpurt bench`. */
#include "bench_runs.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/rng.h"

static double now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static grt_status new_pair(const char *policy, uint64_t capacity, grt_device **dev, grt_allocator **a, cli_first *err) {
  grt_device_config dc;
  grt_device_config_default(&dc);
  dc.capacity = capacity;
  *dev = NULL;
  *a = NULL;
  if (!cli_keep(err, "grt_device_create", grt_device_create(&dc, dev)) &&
      cli_keep(err, "grt_alloc_create", grt_alloc_create(policy, *dev, NULL, a))) {
    cli_keep(err, "grt_device_destroy", grt_device_destroy(*dev)); /* the create's failure stays first */
    *dev = NULL;
  }
  return err->st;
}

static void drop_pair(grt_device *dev, grt_allocator *a, cli_first *err) {
  cli_keep(err, "grt_alloc_destroy", grt_alloc_destroy(a));
  cli_keep(err, "grt_device_destroy", grt_device_destroy(dev));
}

/* Was there room for size anywhere (one contiguous free range)? */
static int had_room(grt_device *dev, grt_allocator *a, uint64_t size, cli_first *err) {
  grt_device_stats ds;
  grt_alloc_stats as;
  if (cli_keep(err, "grt_device_get_stats", grt_device_get_stats(dev, &ds)) ||
      cli_keep_alloc(err, a, "grt_alloc_get_stats", grt_alloc_get_stats(a, &as)))
    return 0;
  return ds.largest_hole >= size || as.largest_free_block >= size;
}

/* A malloc that may fail for want of memory (counted by the caller as a
 * failed allocation, *out = 0); true when it failed so. Any other failure
 * goes to *err. */
static bool malloc_or_oom(grt_allocator *a, uint64_t size, grt_stream_id stream, grt_devptr *out, cli_first *err) {
  grt_status st = grt_alloc_malloc(a, size, stream, out);
  if (st) *out = 0;
  if (st != GRT_ERR_OOM) cli_keep_alloc(err, a, "grt_alloc_malloc", st);
  return st == GRT_ERR_OOM;
}

static grt_status churn_once(const grt__churn_config *cfg, const grt__churn_ops *ops, const char *policy,
                             grt_devptr *live, policy_churn_result *res, double *elapsed, cli_first *err) {
  grt_device *dev;
  grt_allocator *a;
  if (new_pair(policy, cfg->capacity, &dev, &a, err)) return err->st;
  memset(res, 0, sizeof *res);
  for (uint32_t i = 0; i < cfg->slots && !err->st; i++)
    if (malloc_or_oom(a, ops->fill_size[i], 0, &live[i], err)) res->fill_failures++;
  double t0 = now_ns();
  for (uint32_t i = 0; i < cfg->iterations && !err->st; i++) {
    uint32_t k = ops->slot[i];
    if (live[k] && cli_keep_alloc(err, a, "grt_alloc_free", grt_alloc_free(a, live[k]))) break;
    if (malloc_or_oom(a, ops->size[i], 0, &live[k], err)) {
      res->failures++;
      res->failures_with_hole += (uint64_t)had_room(dev, a, ops->size[i], err); /* rare: off the clock's mind */
    }
  }
  *elapsed = now_ns() - t0;
  drop_pair(dev, a, err); /* the blocks still live go with the allocator */
  return err->st;
}

grt_status bench_policy_churn(const grt__churn_config *cfg, const char *policy, policy_churn_result *out,
                              cli_first *err) {
  *err = (cli_first)CLI_FIRST_INIT;
  grt__churn_ops ops;
  if (cli_keep(err, "grt__churn_draw", grt__churn_draw(cfg, &ops))) return err->st;
  grt_devptr *live = calloc(cfg->slots, sizeof *live);
  double *ns = calloc(cfg->runs, sizeof *ns);
  if (!live || !ns) cli_keep(err, "calloc", GRT_ERR_NOMEM);
  for (uint32_t r = 0; !err->st && r < cfg->runs; r++) {
    double elapsed = 0;
    if (!churn_once(cfg, &ops, policy, live, out, &elapsed, err)) ns[r] = elapsed / cfg->iterations;
  }
  if (!err->st) {
    qsort(ns, cfg->runs, sizeof *ns, cmp_double);
    out->ns_per_pair = ns[cfg->runs / 2];
  }
  free(ns);
  free(live);
  grt__churn_ops_free(&ops);
  return err->st;
}

grt_status bench_demo1(const char *policy, demo1_result *out, cli_first *err) {
  *err = (cli_first)CLI_FIRST_INIT;
  grt_device *dev;
  grt_allocator *a;
  if (new_pair(policy, 256 * GRT_MiB, &dev, &a, err)) return err->st;
  memset(out, 0, sizeof *out);
  grt_devptr p[32], big;
  for (int i = 0; i < 32 && !err->st; i++)
    if (malloc_or_oom(a, 8 * GRT_MiB, 0, &p[i], err)) out->fill_failures++;
  for (int i = 1; i < 32 && !err->st; i += 2)
    if (p[i]) cli_keep_alloc(err, a, "grt_alloc_free", grt_alloc_free(a, p[i]));
  if (!err->st) out->big_ok = !malloc_or_oom(a, 16 * GRT_MiB, 0, &big, err);
  grt_device_stats ds;
  grt_alloc_stats as;
  if (!err->st && !cli_keep(err, "grt_device_get_stats", grt_device_get_stats(dev, &ds)) &&
      !cli_keep_alloc(err, a, "grt_alloc_get_stats", grt_alloc_get_stats(a, &as))) {
    out->largest_free = ds.largest_hole > as.largest_free_block ? ds.largest_hole : as.largest_free_block;
    out->device_mallocs = as.num_device_alloc;
  }
  drop_pair(dev, a, err); /* the blocks still live go with the allocator */
  return err->st;
}

typedef struct worker {
  grt_allocator *a;
  grt_stream_id stream;
  uint64_t pairs;
  cli_first err; /* the thread's first failure (the allocator's message is not
                    read: other threads replace it) */
} worker;

/* Small tensors (the small pool) with a few live at a time: allocator-bound, not device-bound. */
static void *churn_thread(void *arg) {
  worker *w = arg;
  grt__rng r;
  grt__rng_seed(&r, w->stream);
  grt_devptr live[16] = {0};
  for (uint64_t i = 0; i < w->pairs; i++) {
    int k = (int)(i & 15);
    if (live[k] && cli_keep(&w->err, "grt_alloc_free", grt_alloc_free(w->a, live[k]))) break;
    if (cli_keep(&w->err, "grt_alloc_malloc",
                 grt_alloc_malloc(w->a, 512 + grt__rng_below(&r, 64 * 1024), w->stream, &live[k]))) {
      live[k] = 0;
      break;
    }
  }
  for (int k = 0; k < 16; k++)
    if (live[k]) cli_keep(&w->err, "grt_alloc_free", grt_alloc_free(w->a, live[k]));
  return NULL;
}

grt_status bench_threads(const char *policy, int threads, uint64_t pairs_per_thread, double *pairs_per_s,
                         cli_first *err) {
  *err = (cli_first)CLI_FIRST_INIT;
  /* "independent": one caching allocator (and device) per thread, nothing
     shared: what the machine itself allows two threads (the control). */
  int own = !strcmp(policy, "independent");
  if (threads < 1 || threads > 8) threads = 1;
  grt_device *dev[8] = {0};
  grt_allocator *a[8] = {0};
  for (int i = 0; i < (own ? threads : 1); i++)
    if (new_pair(own ? "caching" : policy, 4 * GRT_GiB, &dev[i], &a[i], err)) break;
  pthread_t t[8];
  worker w[8];
  if (!err->st) {
    double t0 = now_ns();
    for (int i = 0; i < threads; i++) {
      w[i] = (worker){a[own ? i : 0], (grt_stream_id)(i + 1), pairs_per_thread, CLI_FIRST_INIT};
      pthread_create(&t[i], NULL, churn_thread, &w[i]);
    }
    for (int i = 0; i < threads; i++) {
      pthread_join(t[i], NULL);
      if (w[i].err.st) cli_keep(err, w[i].err.what, w[i].err.st);
    }
    double secs = (now_ns() - t0) / 1e9;
    *pairs_per_s = (double)pairs_per_thread * threads / secs;
  }
  for (int i = 0; i < 8; i++)
    if (a[i]) drop_pair(dev[i], a[i], err);
  return err->st;
}
