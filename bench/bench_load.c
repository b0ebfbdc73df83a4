/* bench_load.c — weight loading against this machine's limits.
 *
 * Usage: bench_load [--size BYTES] [--file PATH] [--chunk BYTES] [--buffers N] [--depth N]
 *                   [--repeat N] [--json]
 * Writes a safetensors file of --size bytes (default 2 GiB; tensors of 64 MiB
 * down to 4 KiB, F16 and F32, bytes from a seeded generator, so the same
 * arguments give the same file; an existing file with the same bytes is
 * kept), measures in this process the two bounds a load cannot beat:
 *   read     O_DIRECT sequential reads of the whole file, after its pages
 *            were evicted: the iouring method's own reads with the copies
 *            left out (grt_load_config.read_only), and plain 8 MiB preads,
 *            the faster of the two;
 *   memcpy   one resident buffer into another (256 MiB, the best of 4);
 * and loads the file cold (pages evicted, O_DIRECT where the method can)
 * by every method (one device allocation per tensor; iouring also into one
 * blob), in --repeat rounds (default 3) of [read bound, every
 * method] (the methods' order turned each round), each figure its best round, checking every tensor's
 * device bytes against the file's, and prints each method's GB/s as a
 * fraction of min(read, memcpy), its ratio to naive, its CPU time and peak
 * host memory, against the targets: iouring >= 0.8 of the bound, >= 3x
 * naive, peak host memory <= buffers x chunk. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base/rng.h"
#include "gpurt/io.h"
#include "workloads/load_target.h"

typedef struct opts {
  uint64_t size, chunk;
  unsigned buffers, depth, repeat;
  const char *file;
  bool json;
} opts;

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int usage(void) {
  fprintf(stderr, "usage: bench_load [--size BYTES] [--file PATH] [--chunk BYTES] [--buffers N] [--depth N] "
                  "[--repeat N] [--json]\n");
  return 2;
}

static bool parse_u64(const char *s, uint64_t *out) {
  char *end;
  errno = 0;
  double v = strtod(s, &end);
  uint64_t m = *end == 'G' || *end == 'g' ? 1ull << 30 : *end == 'M' || *end == 'm' ? 1ull << 20
             : *end == 'K' || *end == 'k' ? 1ull << 10 : 1;
  if (m > 1) end++;
  if (errno || end == s || *end || !(v > 0) || v * (double)m >= 0x1p62) return false;
  *out = (uint64_t)(v * (double)m);
  return true;
}

static int parse(int argc, char **argv, opts *o) {
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    uint64_t x = 0;
    if (!strcmp(a, "--json")) o->json = true;
    else if (!strcmp(a, "--help") || !strcmp(a, "-h")) return usage(), 1;
    else if (!v) return usage();
    else if (!strcmp(a, "--file")) o->file = v, i++;
    else if (!parse_u64(v, &x)) return fprintf(stderr, "bench_load: %s: not a size or count: %s\n", a, v), 2;
    else if (!strcmp(a, "--size")) o->size = x, i++;
    else if (!strcmp(a, "--chunk")) o->chunk = x, i++;
    else if (!strcmp(a, "--buffers") && x <= 64) o->buffers = (unsigned)x, i++;
    else if (!strcmp(a, "--depth") && x <= 64) o->depth = (unsigned)x, i++;
    else if (!strcmp(a, "--repeat") && x <= 100) o->repeat = (unsigned)x, i++;
    else return usage();
  }
  return 0;
}

/* ---- the file ---- */

/* The header of a file of about `size` bytes: tensors of 64 MiB down to 4 KiB. */
static char *make_header(uint64_t size, uint64_t *data_bytes) {
  static const uint64_t sizes[] = {64 << 20, 16 << 20, 4 << 20, 1 << 20, 256 << 10, 4 << 10};
  size_t cap = 1 << 20, at = 1;
  char *h = malloc(cap);
  if (!h) return NULL;
  h[0] = '{';
  uint64_t off = 0;
  for (unsigned i = 0; off < size && at + 200 < cap; i++) {
    uint64_t n = sizes[i % 6];
    bool f32 = i % 3 == 0;
    at += (size_t)snprintf(h + at, cap - at, "%s\"layers.%u.w\":{\"dtype\":\"%s\",\"shape\":[%" PRIu64 ",%d],"
                           "\"data_offsets\":[%" PRIu64 ",%" PRIu64 "]}", i ? "," : "", i, f32 ? "F32" : "F16",
                           n / (f32 ? 4 : 2) / 64, 64, off, off + n);
    off += n;
  }
  at += (size_t)snprintf(h + at, cap - at, ",\"__metadata__\":{\"format\":\"pt\",\"generator\":\"bench_load\"}}");
  while (at % 8) h[at++] = ' ';
  h[at] = 0;
  *data_bytes = off;
  return h;
}

/* Writes the file unless it is there with the same header and size (the data follows from them). */
static int write_file(const char *path, uint64_t size) {
  uint64_t data = 0;
  char *h = make_header(size, &data);
  if (!h) return 1;
  uint64_t n = strlen(h), total = 8 + n + data;
  struct stat sb;
  int rc = 0;
  char *old = malloc(n);
  int fd = open(path, O_RDONLY);
  bool same = fd >= 0 && !fstat(fd, &sb) && (uint64_t)sb.st_size == total && old &&
              pread(fd, old, n, 8) == (ssize_t)n && !memcmp(old, h, n);
  if (fd >= 0) close(fd);
  free(old);
  if (!same) {
    fprintf(stderr, "bench_load: writing %s (%.2f GiB)...\n", path, (double)total / (1 << 30));
    FILE *f = fopen(path, "wb");
    unsigned char len8[8];
    for (int i = 0; i < 8; i++) len8[i] = (unsigned char)(n >> (8 * i));
    enum { BUF = 8 << 20 };
    uint64_t *buf = malloc(BUF);
    grt__rng rng;
    grt__rng_seed(&rng, 1);
    rc = !f || !buf || fwrite(len8, 1, 8, f) != 8 || fwrite(h, 1, n, f) != n;
    for (uint64_t done = 0; !rc && done < data; done += BUF) {
      for (size_t i = 0; i < BUF / 8; i++) buf[i] = grt__rng_next(&rng);
      size_t w = data - done < BUF ? (size_t)(data - done) : BUF;
      rc = fwrite(buf, 1, w, f) != w;
    }
    if (f && fclose(f)) rc = 1;
    free(buf);
    if (rc) fprintf(stderr, "bench_load: cannot write %s: %s\n", path, strerror(errno));
  }
  free(h);
  return rc;
}

/* ---- the bounds ---- */

static void evict(const char *path) {
  int fd = open(path, O_RDONLY);
  if (fd < 0) return;
  if (fdatasync(fd) || posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED)) { /* best effort: the figure says cold */ }
  close(fd);
}

static double memcpy_bound(void) {
  size_t n = 256u << 20;
  unsigned char *a = malloc(n), *b = malloc(n);
  if (!a || !b) return free(a), free(b), 0;
  memset(a, 1, n), memset(b, 2, n); /* resident */
  double best = 0;
  for (int r = 0; r < 4; r++) {
    double t0 = now_s();
    memcpy(b, a, n);
    double gbps = (double)n / (now_s() - t0) / 1e9;
    if (gbps > best) best = gbps;
    a[r] = b[n - 1 - (size_t)r]; /* the copy is used */
  }
  free(a), free(b);
  return best;
}

/* ---- the loads ---- */

/* The rows: every method with one device allocation per tensor, then iouring into one blob. */
#define ROWS (GRT_LOAD_METHOD_COUNT + 1)
#define BLOB_ROW GRT_LOAD_METHOD_COUNT

typedef struct run {
  grt_load_method m;
  bool blob;
  grt_load_stats best;
  bool ok, direct;
  size_t equal, tensors;
} run;

static double gbps(const grt_load_stats *x) { return x->seconds > 0 ? (double)x->bytes / x->seconds / 1e9 : 0; }

/* Plain O_DIRECT preads of 8 MiB over the whole file: GB/s, or 0 when O_DIRECT is refused. */
static double pread_bound(const char *path) {
  enum { CH = 8 << 20 };
  evict(path);
  int fd = open(path, O_RDONLY | O_DIRECT);
  void *b = NULL;
  if (fd < 0 || posix_memalign(&b, 4096, CH)) return fd >= 0 ? close(fd), 0 : 0;
  uint64_t done = 0;
  ssize_t r;
  double t0 = now_s();
  while ((r = pread(fd, b, CH, (off_t)done)) > 0) done += (uint64_t)r;
  double t = now_s() - t0;
  free(b);
  close(fd);
  return r == 0 && t > 0 ? (double)done / t / 1e9 : 0;
}

static int load_once(const opts *o, const grt_safetensors *st, grt_load_method m, bool read_only, run *r) {
  grt_load_target tg;
  grt_status s = grt_load_target_create(grt_load_target_capacity(st, r->blob), &tg);
  if (s) return fprintf(stderr, "bench_load: cannot create the device: %s\n", grt_status_str(s)), 1;
  grt_load_config c;
  grt_load_config_default(&c);
  c.exec = tg.exec, c.alloc = tg.alloc, c.method = m, c.direct = c.drop_cache = true;
  c.chunk_bytes = o->chunk, c.buffers = o->buffers, c.queue_depth = o->depth, c.read_only = read_only;
  c.blob = r->blob;
  evict(o->file);
  grt_loaded *l = NULL;
  grt_io_error err;
  if ((s = grt_load_safetensors(o->file, &c, &l, &err)))
    fprintf(stderr, "bench_load: %s: %s (%s)\n", grt_load_method_name(m), err.reason, grt_status_str(s));
  grt_load_stats x;
  size_t equal = 0, n = grt_safetensors_count(st);
  for (size_t i = 0; !s && !read_only && i < n; i++) {
    const grt_st_tensor *t = grt_safetensors_tensor(st, i);
    uint64_t a = 0, b = 1;
    if (!grt_loaded_device_checksum(l, i, &a) && !grt_io_file_checksum(o->file, t->file_offset, t->end - t->begin, &b))
      equal += a == b;
  }
  if (!s && !(s = grt_loaded_stats(l, &x)) && (!r->ok || x.seconds < r->best.seconds)) r->best = x;
  if (!s) r->ok = true, r->equal = equal, r->tensors = n;
  if (grt_loaded_free(l) || grt_load_target_destroy(&tg)) s = s ? s : GRT_ERR_INTERNAL;
  return s != GRT_OK;
}

static void report(const opts *o, run *runs, double rd, double mc) {
  double bound = rd > 0 && rd < mc ? rd : mc, naive = gbps(&runs[GRT_LOAD_NAIVE].best);
  const run *u = &runs[GRT_LOAD_IOURING];
  uint64_t staging = (uint64_t)o->buffers * ((o->chunk + 4095) / 4096 * 4096);
  if (o->json) {
    printf("{\"size\": %" PRIu64 ", \"read_gbps\": %.4f, \"memcpy_gbps\": %.4f, \"bound_gbps\": %.4f, \"runs\": [", o->size,
           rd, mc, bound);
    for (int m = 0; m < ROWS; m++)
      printf("%s{\"method\": \"%s\", \"blob\": %s, \"gbps\": %.4f, \"of_bound\": %.4f, \"cpu_seconds\": %.4f, \"peak_host_bytes\": %" PRIu64
             ", \"direct\": %s, \"checksums_equal\": %zu, \"tensors\": %zu}", m ? ", " : "", grt_load_method_name(runs[m].m),
             runs[m].blob ? "true" : "false",
             gbps(&runs[m].best), bound > 0 ? gbps(&runs[m].best) / bound : 0, runs[m].best.cpu_seconds,
             runs[m].best.peak_host_bytes, runs[m].best.direct ? "true" : "false", runs[m].equal, runs[m].tensors);
    printf("]}\n");
    return;
  }
  printf("bench_load: %s, %.2f GiB; chunk %.0f MiB x %u buffers, depth %u; cold (pages evicted), best of %u rounds\n", o->file,
         (double)o->size / (1 << 30), (double)o->chunk / (1 << 20), o->buffers, o->depth ? o->depth : o->buffers, o->repeat);
  printf("  bounds: O_DIRECT read %.2f GB/s, memcpy %.2f GB/s -> bound %.2f GB/s\n", rd, mc, bound);
  printf("  %-12s %8s %9s %8s %9s %12s %7s %10s\n", "method", "GB/s", "of bound", "x naive", "CPU s", "peak host",
         "direct", "checksums");
  for (int m = 0; m < ROWS; m++) {
    const run *r = &runs[m];
    char b[32];
    char name[16];
    snprintf(name, sizeof name, "%s%s", grt_load_method_name(r->m), r->blob ? "+blob" : "");
    printf("  %-12s %8.2f %9.2f %8.2f %9.3f %12s %7s %5zu/%-4zu\n", name, gbps(&r->best),
           bound > 0 ? gbps(&r->best) / bound : 0, naive > 0 ? gbps(&r->best) / naive : 0, r->best.cpu_seconds,
           grt_format_bytes(r->best.peak_host_bytes, b, sizeof b), r->best.direct ? "yes" : "no", r->equal, r->tensors);
  }
  double f = bound > 0 ? gbps(&u->best) / bound : 0, x = naive > 0 ? gbps(&u->best) / naive : 0;
  printf("  targets: iouring %.2f of the bound (>= 0.8: %s), %.2fx naive (>= 3: %s), peak host %" PRIu64
         " <= %" PRIu64 " (%s)\n", f, f >= 0.8 ? "met" : "missed", x, x >= 3 ? "met" : "missed",
         u->best.peak_host_bytes, staging, u->best.peak_host_bytes <= staging ? "met" : "missed");
}

int main(int argc, char **argv) {
  char def[512];
  const char *tmp = getenv("TMPDIR");
  snprintf(def, sizeof def, "%s/gpurt_bench_load.safetensors", tmp && *tmp ? tmp : "/var/tmp");
  opts o = {.size = 2ull << 30, .chunk = 8 << 20, .buffers = 8, .depth = 8, .repeat = 3, .file = def};
  int rc = parse(argc, argv, &o);
  if (rc) return rc == 1 ? 0 : rc;
  if (write_file(o.file, o.size)) return 1;
  grt_safetensors *st = NULL;
  grt_io_error err;
  if (grt_safetensors_open(o.file, &st, &err)) return fprintf(stderr, "bench_load: %s: %s\n", o.file, err.reason), 1;
  o.size = grt_safetensors_data_size(st);
  double rd = 0, mc = memcpy_bound();
  run runs[ROWS];
  memset(runs, 0, sizeof runs);
  for (int m = 0; m < ROWS; m++) runs[m].m = m == BLOB_ROW ? GRT_LOAD_IOURING : (grt_load_method)m;
  runs[BLOB_ROW].blob = true;
  /* rounds of [read bound, every method]: a disk whose speed drifts (a VM's, with the host's cache
     behind it) drifts under the bound and the methods alike; each figure is its best round */
  for (unsigned k = 0; k < o.repeat && !rc; k++) {
    run reads = {0};
    double p = pread_bound(o.file);
    if (!(rc = load_once(&o, st, GRT_LOAD_IOURING, true, &reads))) {
      double r = gbps(&reads.best) > p ? gbps(&reads.best) : p;
      if (r > rd) rd = r;
    }
    /* the order turns each round: what ran just before a row (a buffered read, the host's cache) changes it */
    for (int i = 0; i < ROWS && !rc; i++) {
      int m = (int)((unsigned)i + k) % ROWS;
      rc = load_once(&o, st, runs[m].m, false, &runs[m]);
    }
  }
  if (!rc) report(&o, runs, rd, mc);
  grt_safetensors_free(st);
  return rc;
}
