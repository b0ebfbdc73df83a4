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

static grt_status new_pair(const char *policy, uint64_t capacity, grt_device **dev, grt_allocator **a) {
  grt_device_config dc;
  grt_device_config_default(&dc);
  dc.capacity = capacity;
  grt_status st = grt_device_create(&dc, dev);
  if (st) return st;
  st = grt_alloc_create(policy, *dev, NULL, a);
  if (st) grt_device_destroy(*dev);
  return st;
}

static void drop_pair(grt_device *dev, grt_allocator *a) {
  grt_alloc_destroy(a);
  grt_device_destroy(dev);
}

/* Was there room for size anywhere (one contiguous free range)? */
static int had_room(grt_device *dev, grt_allocator *a, uint64_t size) {
  grt_device_stats ds;
  grt_alloc_stats as;
  grt_device_get_stats(dev, &ds);
  grt_alloc_get_stats(a, &as);
  return ds.largest_hole >= size || as.largest_free_block >= size;
}

static grt_status churn_once(const grt__churn_config *cfg, const grt__churn_ops *ops, const char *policy,
                             grt_devptr *live, policy_churn_result *res, double *elapsed) {
  grt_device *dev;
  grt_allocator *a;
  grt_status st = new_pair(policy, cfg->capacity, &dev, &a);
  if (st) return st;
  memset(res, 0, sizeof *res);
  for (uint32_t i = 0; i < cfg->slots; i++)
    if (grt_alloc_malloc(a, ops->fill_size[i], 0, &live[i]) != GRT_OK) {
      live[i] = 0;
      res->fill_failures++;
    }
  double t0 = now_ns();
  for (uint32_t i = 0; i < cfg->iterations; i++) {
    uint32_t k = ops->slot[i];
    if (live[k]) grt_alloc_free(a, live[k]);
    if (grt_alloc_malloc(a, ops->size[i], 0, &live[k]) != GRT_OK) {
      live[k] = 0;
      res->failures++;
      res->failures_with_hole += (uint64_t)had_room(dev, a, ops->size[i]); /* rare: off the clock's mind */
    }
  }
  *elapsed = now_ns() - t0;
  drop_pair(dev, a);
  return GRT_OK;
}

grt_status bench_policy_churn(const grt__churn_config *cfg, const char *policy, policy_churn_result *out) {
  grt__churn_ops ops;
  grt_status st = grt__churn_draw(cfg, &ops);
  if (st) return st;
  grt_devptr *live = calloc(cfg->slots, sizeof *live);
  double *ns = calloc(cfg->runs, sizeof *ns);
  st = live && ns ? GRT_OK : GRT_ERR_NOMEM;
  for (uint32_t r = 0; !st && r < cfg->runs; r++) {
    double elapsed = 0;
    st = churn_once(cfg, &ops, policy, live, out, &elapsed);
    ns[r] = elapsed / cfg->iterations;
  }
  if (!st) {
    qsort(ns, cfg->runs, sizeof *ns, cmp_double);
    out->ns_per_pair = ns[cfg->runs / 2];
  }
  free(ns);
  free(live);
  grt__churn_ops_free(&ops);
  return st;
}

grt_status bench_demo1(const char *policy, demo1_result *out) {
  grt_device *dev;
  grt_allocator *a;
  grt_status st = new_pair(policy, 256 * GRT_MiB, &dev, &a);
  if (st) return st;
  memset(out, 0, sizeof *out);
  grt_devptr p[32], big;
  for (int i = 0; i < 32; i++)
    if (grt_alloc_malloc(a, 8 * GRT_MiB, 0, &p[i]) != GRT_OK) p[i] = 0, out->fill_failures++;
  for (int i = 1; i < 32; i += 2)
    if (p[i]) grt_alloc_free(a, p[i]);
  out->big_ok = grt_alloc_malloc(a, 16 * GRT_MiB, 0, &big) == GRT_OK;
  grt_device_stats ds;
  grt_alloc_stats as;
  grt_device_get_stats(dev, &ds);
  grt_alloc_get_stats(a, &as);
  out->largest_free = ds.largest_hole > as.largest_free_block ? ds.largest_hole : as.largest_free_block;
  out->device_mallocs = as.num_device_alloc;
  drop_pair(dev, a);
  return GRT_OK;
}

typedef struct worker {
  grt_allocator *a;
  grt_stream_id stream;
  uint64_t pairs;
  int errors;
} worker;

/* Small tensors (the small pool) with a few live at a time: allocator-bound, not device-bound. */
static void *churn_thread(void *arg) {
  worker *w = arg;
  grt__rng r;
  grt__rng_seed(&r, w->stream);
  grt_devptr live[16] = {0};
  for (uint64_t i = 0; i < w->pairs; i++) {
    int k = (int)(i & 15);
    if (live[k] && grt_alloc_free(w->a, live[k])) w->errors++;
    if (grt_alloc_malloc(w->a, 512 + grt__rng_below(&r, 64 * 1024), w->stream, &live[k])) live[k] = 0, w->errors++;
  }
  for (int k = 0; k < 16; k++)
    if (live[k]) grt_alloc_free(w->a, live[k]);
  return NULL;
}

grt_status bench_threads(const char *policy, int threads, uint64_t pairs_per_thread, double *pairs_per_s) {
  /* "independent": one caching allocator (and device) per thread, nothing
     shared: what the machine itself allows two threads (the control). */
  int own = !strcmp(policy, "independent");
  if (threads < 1 || threads > 8) threads = 1;
  grt_device *dev[8] = {0};
  grt_allocator *a[8] = {0};
  grt_status st = GRT_OK;
  for (int i = 0; i < (own ? threads : 1) && !st; i++)
    st = new_pair(own ? "caching" : policy, 4 * GRT_GiB, &dev[i], &a[i]);
  pthread_t t[8];
  worker w[8];
  int errors = 0;
  if (!st) {
    double t0 = now_ns();
    for (int i = 0; i < threads; i++) {
      w[i] = (worker){a[own ? i : 0], (grt_stream_id)(i + 1), pairs_per_thread, 0};
      pthread_create(&t[i], NULL, churn_thread, &w[i]);
    }
    for (int i = 0; i < threads; i++) {
      pthread_join(t[i], NULL);
      errors += w[i].errors;
    }
    double secs = (now_ns() - t0) / 1e9;
    *pairs_per_s = (double)pairs_per_thread * threads / secs;
  }
  for (int i = 0; i < 8; i++)
    if (a[i]) drop_pair(dev[i], a[i]);
  return st ? st : errors ? GRT_ERR_INTERNAL : GRT_OK;
}
