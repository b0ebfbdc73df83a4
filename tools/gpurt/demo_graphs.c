/* demo_graphs.c — `gpurt demo graphs`: an LLM decode step, eager vs CUDA-graph
 * replay, one graph per batch-size bucket.
 *
 * A decode step is LAYERS x KERNELS_PER_LAYER short kernels (threads clock, no
 * modelled duration: the step is CPU-bound, which is when graphs help). Each
 * step's batch size is drawn at random and padded to its bucket (1, 2, 4, ...
 * 64); every bucket's step was captured once as a graph whose activation
 * buffer is an allocation node (graph memory pool: a fixed address per bucket,
 * memory held per bucket). The same steps run eagerly and as graph replays;
 * the table gives wall time per step.
 */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/rng.h"
#include "cli.h"
#include "cli_opts.h"
#include "cli_status.h"
#include "gpurt/exec.h"

#define LAYERS 24
#define KERNELS_PER_LAYER 6
#define HIDDEN 256 /* floats per token in the activation buffer */
#define N_BUCKETS 7

static const unsigned buckets[N_BUCKETS] = {1, 2, 4, 8, 16, 32, 64};

typedef struct kernel_arg {
  float *x;      /* the bucket's activations (host view of device bytes) */
  unsigned n;    /* floats touched: bucket x 8 */
  float scale;
} kernel_arg;

/* A tiny "kernel": a scaled update over a slice of the activations. */
static void decode_kernel(void *p) {
  kernel_arg *a = p;
  for (unsigned i = 0; i < a->n; i++) a->x[i] = a->x[i] * a->scale + 1.0f;
}

typedef struct bucket_state {
  grt_graph_exec *ge;
  grt_devptr eager_buf;
  kernel_arg eager_args[KERNELS_PER_LAYER], graph_args[KERNELS_PER_LAYER];
  uint64_t pool_bytes;
  unsigned steps;
  double eager_us, graph_us;
} bucket_state;

static grt_status now_us(grt_exec *exec, double *us) {
  uint64_t t = 0;
  grt_status st = grt_exec_now_ns(exec, &t);
  *us = (double)t / 1000.0;
  return st;
}

static grt_status issue_step(grt_stream *s, kernel_arg *args) {
  grt_status st = GRT_OK;
  for (int l = 0; l < LAYERS && !st; l++)
    for (int k = 0; k < KERNELS_PER_LAYER && !st; k++) {
      grt_kernel_desc d = {decode_kernel, &args[k], 0, GRT_ENGINE_COMPUTE, NULL};
      st = grt_launch_kernel(s, &d);
    }
  return st;
}

static void fill_args(kernel_arg *args, float *x, unsigned bucket) {
  for (int k = 0; k < KERNELS_PER_LAYER; k++) args[k] = (kernel_arg){x, bucket * 8, 0.5f + 0.01f * (float)k};
}

/* Captures bucket b's step: alloc node for the activations, the kernels, free
 * node. A failure goes to *f; the capture is ended and its graph destroyed
 * after one too. */
static void capture_bucket(grt_exec *exec, grt_stream *s, bucket_state *bs, unsigned b, cli_first *f) {
  grt_device *dev;
  grt_devptr act;
  void *host;
  grt_graph *g = NULL;
  uint64_t bytes = (uint64_t)b * HIDDEN * sizeof(float);
  if (cli_keep_exec(f, exec, "grt_exec_get_device", grt_exec_get_device(exec, &dev)) ||
      cli_keep_exec(f, exec, "grt_stream_begin_capture", grt_stream_begin_capture(s, GRT_CAPTURE_THREAD_LOCAL)))
    return;
  if (!cli_keep_exec(f, exec, "grt_stream_malloc_async_graph", grt_stream_malloc_async_graph(s, bytes, &act)) &&
      !cli_keep(f, "grt_device_host_ptr", grt_device_host_ptr(dev, act, bytes, &host))) {
    fill_args(bs->graph_args, host, b);
    if (!cli_keep_exec(f, exec, "grt_launch_kernel", issue_step(s, bs->graph_args)))
      cli_keep_exec(f, exec, "grt_stream_free_async_graph", grt_stream_free_async_graph(s, act));
  }
  if (cli_keep_exec(f, exec, "grt_stream_end_capture", grt_stream_end_capture(s, &g)) || f->st) {
    cli_keep(f, "grt_graph_destroy", grt_graph_destroy(g)); /* NULL when the capture failed */
    return;
  }
  char name[32];
  snprintf(name, sizeof name, "decode b=%u", b);
  if (!cli_keep(f, "grt_graph_set_name", grt_graph_set_name(g, name)))
    cli_keep_exec(f, exec, "grt_graph_instantiate", grt_graph_instantiate(g, &bs->ge));
  cli_keep(f, "grt_graph_destroy", grt_graph_destroy(g));
  size_t nodes;
  if (!f->st) cli_keep(f, "grt_graph_exec_info", grt_graph_exec_info(bs->ge, &nodes, &bs->pool_bytes));
}

static unsigned bucket_of(unsigned batch) {
  for (unsigned i = 0; i < N_BUCKETS; i++)
    if (batch <= buckets[i]) return i;
  return N_BUCKETS - 1;
}

static int run(unsigned steps, uint64_t seed) {
  grt_exec_config cfg;
  grt_exec_config_default(&cfg);
  cfg.device_capacity = 64 * GRT_MiB;
  cli_first f = CLI_FIRST_INIT;
  grt_exec *exec = NULL;
  grt_stream *s = NULL;
  grt_device *dev = NULL;
  if (cli_keep(&f, "grt_exec_create", grt_exec_create(&cfg, &exec))) return cli_fail_first("demo graphs", &f);
  if (!cli_keep_exec(&f, exec, "grt_stream_create", grt_stream_create(exec, GRT_STREAM_NON_BLOCKING, 0, &s)))
    cli_keep_exec(&f, exec, "grt_exec_get_device", grt_exec_get_device(exec, &dev));
  bucket_state bs[N_BUCKETS];
  memset(bs, 0, sizeof bs); /* eager_buf 0: not allocated (no segment starts at 0) */
  for (unsigned i = 0; i < N_BUCKETS && !f.st; i++) {
    void *host;
    uint64_t bytes = (uint64_t)buckets[i] * HIDDEN * sizeof(float);
    if (cli_keep_exec(&f, exec, "grt_exec_device_malloc", grt_exec_device_malloc(exec, bytes, &bs[i].eager_buf)))
      bs[i].eager_buf = 0;
    else if (!cli_keep(&f, "grt_device_host_ptr", grt_device_host_ptr(dev, bs[i].eager_buf, bytes, &host)))
      fill_args(bs[i].eager_args, host, buckets[i]);
    if (!f.st) capture_bucket(exec, s, &bs[i], buckets[i], &f);
  }
  for (unsigned i = 0; i < N_BUCKETS && !f.st; i++) /* warm-up: caches, op slabs, worker threads */
    if (!cli_keep_exec(&f, exec, "grt_launch_kernel", issue_step(s, bs[i].eager_args)) &&
        !cli_keep_exec(&f, exec, "grt_graph_launch", grt_graph_launch(bs[i].ge, s)))
      cli_keep_exec(&f, exec, "grt_stream_synchronize", grt_stream_synchronize(s));
  grt__rng rng;
  grt__rng_seed(&rng, seed);
  uint64_t real = 0, padded = 0;
  for (unsigned step = 0; step < steps && !f.st; step++) {
    unsigned batch = 1 + (unsigned)grt__rng_below(&rng, 64), b = bucket_of(batch);
    real += batch;
    padded += buckets[b];
    double t0, t1, t2;
    if (cli_keep_exec(&f, exec, "grt_exec_now_ns", now_us(exec, &t0)) ||
        cli_keep_exec(&f, exec, "grt_launch_kernel", issue_step(s, bs[b].eager_args)) ||
        cli_keep_exec(&f, exec, "grt_stream_synchronize", grt_stream_synchronize(s)) ||
        cli_keep_exec(&f, exec, "grt_exec_now_ns", now_us(exec, &t1)) ||
        cli_keep_exec(&f, exec, "grt_graph_launch", grt_graph_launch(bs[b].ge, s)) ||
        cli_keep_exec(&f, exec, "grt_stream_synchronize", grt_stream_synchronize(s)) ||
        cli_keep_exec(&f, exec, "grt_exec_now_ns", now_us(exec, &t2)))
      break;
    bs[b].steps++;
    bs[b].eager_us += t1 - t0;
    bs[b].graph_us += t2 - t1;
  }
  if (!f.st) {
    printf("decode step: %d layers x %d kernels = %d kernels; %u steps, batch 1..64 padded to its bucket\n"
           "(threads clock, wall time per step; kernels carry no modelled duration: CPU-bound issue)\n\n",
           LAYERS, KERNELS_PER_LAYER, LAYERS * KERNELS_PER_LAYER, steps);
    printf("  %6s %6s %12s %12s %8s %12s\n", "bucket", "steps", "eager us", "graph us", "speedup", "graph pool");
    double te = 0, tg = 0;
    uint64_t pool = 0;
    for (unsigned i = 0; i < N_BUCKETS; i++) {
      pool += bs[i].pool_bytes;
      if (!bs[i].steps) continue;
      te += bs[i].eager_us;
      tg += bs[i].graph_us;
      printf("  %6u %6u %12.1f %12.1f %7.1fx %9llu KiB\n", buckets[i], bs[i].steps, bs[i].eager_us / bs[i].steps,
             bs[i].graph_us / bs[i].steps, bs[i].eager_us / bs[i].graph_us,
             (unsigned long long)(bs[i].pool_bytes / 1024));
    }
    printf("  %6s %6u %12.1f %12.1f %7.1fx %9llu KiB\n", "all", steps, te / steps, tg / steps, te / tg,
           (unsigned long long)(pool / 1024));
    printf("\n  padding: %.1f%% more tokens computed than requested (%llu padded / %llu real)\n",
           100.0 * (double)(padded - real) / (double)real, (unsigned long long)padded, (unsigned long long)real);
    printf("  CUDA scale (anchors): %d kernels eager at 2-4 us each = %.0f-%.0f us of CPU per step; as one\n"
           "  graph ~2.5 us + ~1 ns/node = ~%.1f us. Graph pools: one per bucket, %llu KiB here.\n",
           LAYERS * KERNELS_PER_LAYER, 2.0 * LAYERS * KERNELS_PER_LAYER, 4.0 * LAYERS * KERNELS_PER_LAYER,
           2.5 + 0.001 * LAYERS * KERNELS_PER_LAYER, (unsigned long long)(pool / 1024));
  }
  /* Teardown, after a failure too. */
  for (unsigned i = 0; i < N_BUCKETS; i++) {
    cli_keep(&f, "grt_graph_exec_destroy", grt_graph_exec_destroy(bs[i].ge));
    if (bs[i].eager_buf) cli_keep_exec(&f, exec, "grt_exec_device_free", grt_exec_device_free(exec, bs[i].eager_buf));
  }
  cli_keep(&f, "grt_stream_destroy", grt_stream_destroy(s));
  cli_keep(&f, "grt_exec_destroy", grt_exec_destroy(exec));
  return f.st ? cli_fail_first("demo graphs", &f) : 0;
}

enum { GRAPHS_STEPS = 256, GRAPHS_SEED };

static const struct option graphs_options[] = {
    {"steps", required_argument, NULL, GRAPHS_STEPS},
    {"seed", required_argument, NULL, GRAPHS_SEED},
    CLI_OPT_HELP_ENTRY,
    {NULL, 0, NULL, 0},
};

int grt_demo_graphs(int argc, char **argv) {
  uint64_t steps = 300, seed = 7;
  cli_opts p;
  cli_opts_init(&p, "demo graphs", argc, argv, graphs_options, false);
  if (p.help) {
    printf("usage: gpurt demo graphs [--steps N] [--seed S]\n"
           "  An LLM decode step issued eagerly vs replayed as a CUDA-style graph, one graph per\n"
           "  batch-size bucket (batches padded to the bucket); wall time per step.\n");
    return 0;
  }
  for (int c; (c = cli_opts_next(&p)) != CLI_OPT_END;) {
    if (c == GRAPHS_STEPS) {
      if (!cli_opt_u64(&p, 1, UINT_MAX, &steps)) return 2;
    } else if (c == GRAPHS_SEED) {
      if (!cli_opt_u64(&p, 0, UINT64_MAX, &seed)) return 2;
    } else {
      return c == CLI_OPT_POSITIONAL ? cli_opts_unexpected(&p) : 2;
    }
  }
  printf("gpurt demo graphs — capture once per bucket, pad, replay\n\n");
  return run((unsigned)steps, seed);
}
