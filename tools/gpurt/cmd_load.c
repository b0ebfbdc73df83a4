/* cmd_load.c — `gpurt load FILE.safetensors`: the weights to the simulated
 * device by one method (gpurt/io.h), with GB/s, CPU time, peak host memory,
 * copies per byte, and per tensor a checksum of the device's bytes beside
 * one of the file's. The device is a fresh resident one (load_target.h). */
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "cli_opts.h"
#include "replay_util.h"

#ifdef GRT_HAVE_IO
#include "gpurt/cuda.h"
#include "gpurt/io.h"
#include "workloads/load_target.h"

static void usage(FILE *f) {
  fprintf(f, "usage: gpurt load FILE.safetensors [--method iouring|pread|mmap|naive] [--cold] [--direct]\n"
             "                  [--chunk SIZE] [--buffers N] [--depth N] [--blob] [--no-fixed] [--gpu N] [--list]\n"
             "                  [--json]\n\n"
             "Loads every tensor of a safetensors file into the simulated device's memory (a real memcpy into\n"
             "its backing bytes, on a copy stream) through the caching allocator, and prints GB/s, CPU time,\n"
             "peak host memory, copies per byte and whether each tensor's device bytes equal the file's.\n"
             "  --method M      iouring (default): io_uring reads into page-locked staging buffers, each\n"
             "                  chunk copied to the device while the next ones are read; pread: the same\n"
             "                  with pread; mmap: copies straight from the mapped file; naive: per tensor,\n"
             "                  read into malloc'd memory, copy, wait, free\n"
             "  --cold          evict the file's cached pages first and use O_DIRECT where the method can\n"
             "  --direct        O_DIRECT (iouring, pread) without evicting\n"
             "  --chunk SIZE    staging buffer size (default 8M)   --buffers N  staging buffers (default 4)\n"
             "  --depth N       io_uring reads in flight (default: --buffers)\n"
             "  --blob          one device allocation for all tensors (default: one per tensor)\n"
             "  --no-fixed      no io_uring registered buffers\n"
             "  --gpu N         load into GPU N through the CUDA backend (staging in driver-pinned memory,\n"
             "                  cuMemcpyHtoDAsync on a stream) instead of the simulated device\n"
             "  --list          every tensor's checksums, not only the count that match\n"
             "  --json          one JSON object on stdout\n");
}

enum { LD_METHOD = 256, LD_COLD, LD_DIRECT, LD_CHUNK, LD_BUFFERS, LD_DEPTH, LD_BLOB, LD_NOFIXED, LD_LIST, LD_JSON, LD_GPU };

static const struct option load_options[] = {
    {"method", required_argument, NULL, LD_METHOD}, {"cold", no_argument, NULL, LD_COLD},
    {"direct", no_argument, NULL, LD_DIRECT},       {"chunk", required_argument, NULL, LD_CHUNK},
    {"buffers", required_argument, NULL, LD_BUFFERS}, {"depth", required_argument, NULL, LD_DEPTH},
    {"blob", no_argument, NULL, LD_BLOB},           {"no-fixed", no_argument, NULL, LD_NOFIXED},
    {"list", no_argument, NULL, LD_LIST},           {"json", no_argument, NULL, LD_JSON},
    {"gpu", required_argument, NULL, LD_GPU},
    CLI_OPT_HELP_ENTRY,                             {NULL, 0, NULL, 0},
};

typedef struct load_args {
  const char *path;
  grt_load_config c;
  bool list, json;
  int gpu;                    /* -1: the simulated device */
} load_args;

typedef struct bar {
  bool on, drawn;
  struct timespec t0;
} bar;

static double since(const struct timespec *t0) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)(t.tv_sec - t0->tv_sec) + (double)(t.tv_nsec - t0->tv_nsec) * 1e-9;
}

/* The progress bar on a terminal, after half a second. */
static void draw(void *ctx, uint64_t done, uint64_t total) {
  bar *b = ctx;
  double t = since(&b->t0);
  if (!b->on || t < 0.5) return;
  int width = 30, fill = total ? (int)((double)width * (double)done / (double)total) : width;
  fprintf(stderr, "\rloading [%.*s%*s] %5.1f%%  %.2f GB/s ", fill, "##############################", width - fill, "",
          total ? 100.0 * (double)done / (double)total : 100.0, (double)done / t / 1e9);
  b->drawn = true;
}

static bool parse(int argc, char **argv, load_args *a, int *rc) {
  cli_opts p;
  cli_opts_init(&p, "load", argc, argv, load_options, false);
  if (p.help) return usage(stdout), *rc = 0, false;
  static const char *const methods[] = {"iouring", "pread", "mmap", "naive"};
  uint64_t v;
  size_t i;
  for (int c; (c = cli_opts_next(&p)) != CLI_OPT_END;) {
    bool ok = true;
    if (c == LD_METHOD) ok = cli_opt_choice(&p, methods, 4, &i), a->c.method = (grt_load_method)i;
    else if (c == LD_COLD) a->c.drop_cache = a->c.direct = true;
    else if (c == LD_DIRECT) a->c.direct = true;
    else if (c == LD_CHUNK) ok = cli_opt_bytes(&p, &v) && (v <= ((uint64_t)1 << 30) || !cli_opts_fail(&p, "--chunk: at most 1G")),
                            a->c.chunk_bytes = v;
    else if (c == LD_BUFFERS) ok = cli_opt_u64(&p, 1, 64, &v), a->c.buffers = (unsigned)v;
    else if (c == LD_DEPTH) ok = cli_opt_u64(&p, 1, 64, &v), a->c.queue_depth = (unsigned)v;
    else if (c == LD_BLOB) a->c.blob = true;
    else if (c == LD_NOFIXED) a->c.register_buffers = false;
    else if (c == LD_LIST) a->list = true;
    else if (c == LD_JSON) a->json = true;
    else if (c == LD_GPU) ok = cli_opt_u64(&p, 0, 1023, &v), a->gpu = (int)v;
    else if (c == CLI_OPT_POSITIONAL && !a->path) a->path = p.arg;
    else if (c == CLI_OPT_POSITIONAL) ok = !cli_opts_fail(&p, "one file at a time");
    else ok = false;
    if (!ok) return *rc = 2, false;
  }
  if (!a->path) return usage(stderr), *rc = 2, false;
  return true;
}

typedef struct sums {
  size_t equal, n;
  uint64_t *dev, *file;
} sums;

static int verify(const char *path, grt_loaded *l, sums *s) {
  const grt_safetensors *st = grt_loaded_header(l);
  s->n = grt_safetensors_count(st);
  s->dev = calloc(s->n ? s->n : 1, sizeof *s->dev);
  s->file = calloc(s->n ? s->n : 1, sizeof *s->file);
  if (!s->dev || !s->file) return fprintf(stderr, "gpurt load: out of host memory\n"), 1;
  for (size_t i = 0; i < s->n; i++) {
    const grt_st_tensor *t = grt_safetensors_tensor(st, i);
    if (grt_loaded_device_checksum(l, i, &s->dev[i]) ||
        grt_io_file_checksum(path, t->file_offset, t->end - t->begin, &s->file[i]))
      return fprintf(stderr, "gpurt load: cannot checksum tensor '%s'\n", t->name), 1;
    s->equal += s->dev[i] == s->file[i];
  }
  return 0;
}

static void print_text(const load_args *a, grt_loaded *l, const sums *s) {
  const grt_safetensors *st = grt_loaded_header(l);
  grt_load_stats x;
  if (grt_loaded_stats(l, &x)) return;
  char b[3][32];
  char where[32] = "the simulated device";
  if (a->gpu >= 0) snprintf(where, sizeof where, "GPU %d", a->gpu);
  printf("gpurt load %s into %s: %zu tensors, %s, method %s (%s", cli_basename(a->path), where, s->n,
         grt_format_bytes(grt_safetensors_data_size(st), b[0], 32), grt_load_method_name(a->c.method),
         x.direct ? "O_DIRECT" : "buffered reads");
  if (a->c.method <= GRT_LOAD_PREAD)
    printf(", %u x %s staging", a->c.buffers, grt_format_bytes(a->c.chunk_bytes, b[1], 32));
  if (a->c.method == GRT_LOAD_IOURING)
    printf(", depth %u%s", a->c.queue_depth ? a->c.queue_depth : a->c.buffers, x.fixed_buffers ? ", fixed buffers" : "");
  printf("%s)\n", a->c.drop_cache ? ", cold" : "");
  if (x.io_note[0]) printf("  note: %s\n", x.io_note);
  printf("  %s in %.3f s = %.2f GB/s; CPU %.3f s; peak host memory %s; copies per byte %.0f; %" PRIu64
         " reads; %" PRIu64 " device allocations\n",
         grt_format_bytes(x.bytes, b[0], 32), x.seconds, x.seconds > 0 ? (double)x.bytes / x.seconds / 1e9 : 0.0,
         x.cpu_seconds, grt_format_bytes(x.peak_host_bytes, b[2], 32), x.copies_per_byte, x.reads, x.device_allocs);
  printf("  checksums: %zu of %zu tensors' device bytes equal the file's\n", s->equal, s->n);
  for (size_t i = 0; a->list && i < s->n; i++)
    printf("    %-48s %016" PRIx64 " %016" PRIx64 "%s\n", grt_safetensors_tensor(st, i)->name, s->dev[i], s->file[i],
           s->dev[i] == s->file[i] ? "" : "  DIFFER");
}

static void print_json(const load_args *a, grt_loaded *l, const sums *s) {
  grt_load_stats x;
  if (grt_loaded_stats(l, &x)) return;
  printf("{\"file\": \"%s\", \"gpu\": %d, \"method\": \"%s\", \"cold\": %s, \"direct\": %s, \"fixed_buffers\": %s, \"tensors\": %zu, "
         "\"bytes\": %" PRIu64 ", \"seconds\": %.6f, \"gbps\": %.4f, \"cpu_seconds\": %.6f, \"peak_host_bytes\": %" PRIu64
         ", \"copies_per_byte\": %.1f, \"reads\": %" PRIu64 ", \"device_allocs\": %" PRIu64
         ", \"checksums_equal\": %zu}\n",
         cli_basename(a->path), a->gpu, grt_load_method_name(a->c.method), a->c.drop_cache ? "true" : "false",
         x.direct ? "true" : "false", x.fixed_buffers ? "true" : "false", s->n, x.bytes, x.seconds,
         x.seconds > 0 ? (double)x.bytes / x.seconds / 1e9 : 0.0, x.cpu_seconds, x.peak_host_bytes, x.copies_per_byte,
         x.reads, x.device_allocs, s->equal);
}

/* Loads into the target run->c names and reports. */
static int load_and_report(load_args *run) {
  bar b = {.on = isatty(STDERR_FILENO) != 0};
  clock_gettime(CLOCK_MONOTONIC, &b.t0);
  run->c.progress = draw, run->c.progress_ctx = &b;
  grt_loaded *l = NULL;
  grt_io_error err;
  grt_status s = grt_load_safetensors(run->path, &run->c, &l, &err);
  if (b.drawn) fprintf(stderr, "\r%*s\r", 78, "");
  int rc = 0;
  sums sm = {0};
  if (s) {
    char msg[600];
    if (grt_io_error_format(&err, run->path, msg, sizeof msg)) snprintf(msg, sizeof msg, "%s", err.reason);
    fprintf(stderr, "gpurt load: %s (%s)\n", msg, grt_status_str(s));
    rc = 1;
  } else if (!(rc = verify(run->path, l, &sm))) {
    if (run->json) print_json(run, l, &sm);
    else print_text(run, l, &sm);
    if (sm.equal != sm.n) rc = 1;
  }
  free(sm.dev);
  free(sm.file);
  if (grt_loaded_free(l)) return fprintf(stderr, "gpurt load: grt_loaded_free failed\n"), 1;
  return rc;
}

/* GPU N: the CUDA backend's device, the caching allocator over it, a copy stream. */
static int load_into_gpu(const load_args *a) {
  grt_device *dev = NULL;
  grt_allocator *alloc = NULL;
  grt_cuda_stream *s = NULL;
  grt_alloc_config ac;
  grt_alloc_config_default(&ac);
  char why[256] = "";
  grt_status st = grt_device_create_cuda(a->gpu, &dev);
  if (st && grt_cuda_probe(NULL, why, sizeof why) == GRT_OK) snprintf(why, sizeof why, "%s", grt_status_str(st));
  if (!st) st = grt_alloc_create("caching", dev, &ac, &alloc);
  if (!st) st = grt_cuda_stream_create(dev, GRT_CUDA_STREAM_NON_BLOCKING, 0, &s);
  int rc = 1;
  if (st) fprintf(stderr, "gpurt load: GPU %d: %s\n", a->gpu, why[0] ? why : grt_status_str(st));
  else {
    load_args run = *a;
    run.c.cuda_stream = s, run.c.cuda_device = dev, run.c.alloc = alloc;
    rc = load_and_report(&run);
  }
  if ((s && grt_cuda_stream_destroy(s)) || (alloc && grt_alloc_destroy(alloc)) || (dev && grt_device_destroy(dev)))
    return fprintf(stderr, "gpurt load: GPU teardown failed\n"), 1;
  return rc;
}

/* Loads into a fresh resident device (workloads/load_target.h) and checks the bytes. */
static int load_into_device(const load_args *a, const grt_safetensors *st) {
  grt_load_target tg;
  uint64_t cap = grt_load_target_capacity(st, a->c.blob);
  grt_status s = grt_load_target_create(cap, &tg);
  if (s) {
    char b[32];
    return fprintf(stderr, "gpurt load: cannot create a %s device: %s\n", grt_format_bytes(cap, b, sizeof b),
                   grt_status_str(s)), 1;
  }
  load_args run = *a;
  run.c.exec = tg.exec, run.c.alloc = tg.alloc;
  int rc = load_and_report(&run);
  if (grt_load_target_destroy(&tg)) return fprintf(stderr, "gpurt load: teardown failed\n"), 1;
  return rc;
}

int grt_cmd_load(int argc, char **argv) {
  load_args a;
  memset(&a, 0, sizeof a);
  a.gpu = -1;
  grt_load_config_default(&a.c);
  int rc = 0;
  if (!parse(argc, argv, &a, &rc)) return rc;
  grt_safetensors *st = NULL;
  grt_io_error err;
  grt_status s = grt_safetensors_open(a.path, &st, &err);
  if (s) {
    char msg[600];
    if (grt_io_error_format(&err, a.path, msg, sizeof msg)) snprintf(msg, sizeof msg, "%s", err.reason);
    fprintf(stderr, "gpurt load: %s (%s)\n", msg, grt_status_str(s));
    return 1;
  }
  rc = a.gpu >= 0 ? load_into_gpu(&a) : load_into_device(&a, st);
  grt_safetensors_free(st);
  return rc;
}

#else

int grt_cmd_load(int argc, char **argv) {
  (void)argc, (void)argv;
  fprintf(stderr, "gpurt load: this build has no loader (it needs libjansson-dev and liburing-dev)\n");
  return 1;
}

#endif
