/* demo_emptycache.c — `gpurt demo emptycache`: the reserved-memory sawtooth.
 *
 * A training-like loop: each step allocates activations for a batch whose
 * size varies (four buckets), frees them at the end of the step, and calls
 * empty_cache() — as code that "fixes" OOMs with it does. PyTorch's
 * empty_cache returns every free segment each time: reserved memory saws
 * down to the weights and back up every step, and each segment freed is a
 * device sync and each one re-obtained a device malloc. The idle-cycles policy
 * (empty_cache_idle_cycles:N) returns only segments unused for N calls. The
 * demo prints, per policy, the device calls it paid and reserved memory per
 * step as a strip chart, and writes the series as CSV with --csv FILE.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/rng.h"
#include "cli.h"
#include "cli_opts.h"
#include "cli_status.h"
#include "gpurt/alloc.h"

#define MB GRT_MiB
#define STEPS 40

typedef struct run_result {
  uint64_t reserved[2 * STEPS]; /* per step: at its peak, then after its empty_cache */
  uint64_t peak_reserved, device_mallocs, device_frees;
  double mean_reserved;
} run_result;

static grt_status run_policy(unsigned idle, run_result *out, cli_first *f) {
  *f = (cli_first)CLI_FIRST_INIT;
  memset(out, 0, sizeof *out);
  grt_device_config dc;
  grt_device_config_default(&dc);
  dc.capacity = 8 * GRT_GiB;
  grt_device *dev = NULL;
  grt_allocator *a = NULL;
  grt_alloc_config ac;
  grt_alloc_config_default(&ac);
  ac.empty_cache_idle_cycles = idle;
  if (!cli_keep(f, "grt_device_create", grt_device_create(&dc, &dev)))
    cli_keep(f, "grt_alloc_create", grt_alloc_create("caching", dev, &ac, &a));
  grt_devptr weights = 0;
  if (!f->st && cli_keep_alloc(f, a, "grt_alloc_malloc", grt_alloc_malloc(a, 512 * MB, 0, &weights))) weights = 0;
  grt__rng r;
  grt__rng_seed(&r, 2024);
  static const uint64_t buckets[] = {8, 16, 24, 32};
  grt_alloc_stats s;
  for (int step = 0; step < STEPS && !f->st; step++) {
    uint64_t batch = buckets[grt__rng_below(&r, 4)];
    grt_devptr act[24];
    for (int l = 0; l < 24 && !f->st; l++)
      cli_keep_alloc(f, a, "grt_alloc_malloc", grt_alloc_malloc(a, batch * (MB / 2) + (uint64_t)l * 4096, 0, &act[l]));
    if (!f->st && !cli_keep_alloc(f, a, "grt_alloc_get_stats", grt_alloc_get_stats(a, &s)))
      out->reserved[2 * step] = (uint64_t)s.reserved_bytes[GRT_STAT_ALL].current;
    /* after a failure the activations still allocated go with the allocator */
    for (int l = 23; l >= 0 && !f->st; l--) cli_keep_alloc(f, a, "grt_alloc_free", grt_alloc_free(a, act[l]));
    if (!f->st) cli_keep_alloc(f, a, "grt_alloc_empty_cache", grt_alloc_empty_cache(a));
    if (!f->st && !cli_keep_alloc(f, a, "grt_alloc_get_stats", grt_alloc_get_stats(a, &s))) {
      out->reserved[2 * step + 1] = (uint64_t)s.reserved_bytes[GRT_STAT_ALL].current;
      out->mean_reserved += (double)(out->reserved[2 * step] + out->reserved[2 * step + 1]) / (2 * STEPS);
    }
  }
  if (!f->st && !cli_keep_alloc(f, a, "grt_alloc_get_stats", grt_alloc_get_stats(a, &s))) {
    out->peak_reserved = (uint64_t)s.reserved_bytes[GRT_STAT_ALL].peak;
    out->device_mallocs = s.num_device_alloc;
    out->device_frees = s.num_device_free;
  }
  if (weights) cli_keep_alloc(f, a, "grt_alloc_free", grt_alloc_free(a, weights));
  cli_keep(f, "grt_alloc_destroy", grt_alloc_destroy(a));
  cli_keep(f, "grt_device_destroy", grt_device_destroy(dev));
  return f->st;
}

/* One character per step: reserved memory on an 8-level scale up to `top`. */
static void strip(const run_result *r, uint64_t top) {
  static const char *levels[] = {" ", "\u2581", "\u2582", "\u2583", "\u2584", "\u2585", "\u2586", "\u2587", "\u2588"};
  for (int i = 0; i < 2 * STEPS; i++) {
    int l = (int)((double)r->reserved[i] / (double)top * 8.0 + 0.5);
    printf("%s", levels[l < 0 ? 0 : l > 8 ? 8 : l]);
  }
}

enum { EMPTYCACHE_CSV = 256 };

static const struct option emptycache_options[] = {
    {"csv", required_argument, NULL, EMPTYCACHE_CSV},
    CLI_OPT_HELP_ENTRY,
    {NULL, 0, NULL, 0},
};

int grt_demo_emptycache(int argc, char **argv) {
  const char *csv = NULL;
  cli_opts args;
  cli_opts_init(&args, "demo emptycache", argc, argv, emptycache_options, false);
  if (args.help) {
    printf("usage: gpurt demo emptycache [--csv FILE]\n\n"
           "A training loop calling empty_cache() every step, with PyTorch's policy (return every\n"
           "free segment) and the idle-cycles policy (return segments unused for N calls).\n");
    return 0;
  }
  for (int c; (c = cli_opts_next(&args)) != CLI_OPT_END;) {
    if (c != EMPTYCACHE_CSV) return c == CLI_OPT_POSITIONAL ? cli_opts_unexpected(&args) : 2;
    csv = args.arg;
  }
  static const unsigned idles[] = {0, 1, 4, 16};
  run_result res[4];
  uint64_t top = 0;
  for (int p = 0; p < 4; p++) {
    cli_first f;
    if (run_policy(idles[p], &res[p], &f)) return cli_fail_first("demo emptycache", &f);
    if (res[p].peak_reserved > top) top = res[p].peak_reserved;
  }
  printf("== empty_cache() every step: the reserved-memory sawtooth ==\n"
         "  512 MB of weights, 24 activations per step for a batch of 8/16/24/32, %d steps\n\n", STEPS);
  printf("  %-18s %11s %9s %8s %8s   reserved: each step's peak, then after empty_cache (top %llu MB)\n", "policy", "dev mallocs",
         "dev frees", "mean MB", "peak MB", (unsigned long long)(top / MB));
  for (int p = 0; p < 4; p++) {
    char name[32];
    snprintf(name, sizeof name, p ? "idle %u cycles" : "PyTorch (idle 0)", idles[p]);
    printf("  %-18s %11llu %9llu %8.0f %8llu   |", name, (unsigned long long)res[p].device_mallocs,
           (unsigned long long)res[p].device_frees, res[p].mean_reserved / MB,
           (unsigned long long)(res[p].peak_reserved / MB));
    strip(&res[p], top);
    printf("|\n");
  }
  printf("\n  Each device free is a device-wide sync and each re-malloc a driver round trip. Keeping\n"
         "  segments through a few idle calls removes most of them; the price is a higher reserved\n"
         "  floor, and a higher peak when the held segments do not fit the next step's sizes.\n");
  if (csv) {
    FILE *f = fopen(csv, "w");
    if (!f) {
      fprintf(stderr, "gpurt demo emptycache: cannot write %s\n", csv);
      return 1;
    }
    fprintf(f, "sample,idle0,idle1,idle4,idle16\n");
    for (int i = 0; i < 2 * STEPS; i++)
      fprintf(f, "%d,%llu,%llu,%llu,%llu\n", i, (unsigned long long)res[0].reserved[i],
              (unsigned long long)res[1].reserved[i], (unsigned long long)res[2].reserved[i],
              (unsigned long long)res[3].reserved[i]);
    fclose(f);
  }
  return 0;
}
