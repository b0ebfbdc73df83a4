/* replay_util.c — see replay_util.h. */
#include "replay_util.h"

#include <sys/stat.h>

#include "input.h"

#include <dirent.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

const char *cli_input_name(const char *path) { return strcmp(path, "-") ? path : "standard input"; }

/* Prints a failed load's reason; NULL. */
static grt_trace *load_failed(const char *cmd, const char *path, grt_status st, const grt_trace_error *err) {
  char msg[600];
  if (grt_trace_error_format(err, msg, sizeof msg)) snprintf(msg, sizeof msg, "%s", path); /* no location to add */
  fprintf(stderr, "gpurt %s: %s (%s)\n", cmd, msg, grt_status_str(st));
  return NULL;
}

grt_trace *cli_load_input(const char *cmd, const char *path, cli_input *in, int device) {
  grt_trace_load_config cfg;
  grt_trace_load_config_default(&cfg);
  cfg.device = device;
  unsigned char *data;
  size_t len;
  char why[300];
  if (cli_input_slurp(in, &data, &len, why, sizeof why))
    return fprintf(stderr, "gpurt %s: %s: %s\n", cmd, cli_input_name(path), why), NULL;
  grt_trace *t = NULL;
  grt_trace_error err;
  grt_status st = grt_trace_load_buffer(data, len, !strcmp(path, "-") ? "<stdin>" : path, &cfg, &t, &err);
  free(data);
  return st ? load_failed(cmd, path, st, &err) : t;
}

grt_trace *cli_load_trace(const char *cmd, const char *path, int device) {
  grt_trace_load_config cfg;
  grt_trace_load_config_default(&cfg);
  cfg.device = device;
  grt_trace *t = NULL;
  grt_trace_error err;
  grt_status st;
  if (cli_input_needs_reader(path)) { /* stdin, a pipe, a compressed file: read (and decompress) first */
    char why[300];
    cli_input *in = cli_input_open(path, why, sizeof why);
    if (!in) return fprintf(stderr, "gpurt %s: %s: %s\n", cmd, cli_input_name(path), why), NULL;
    t = cli_load_input(cmd, path, in, device);
    cli_input_close(in);
    return t;
  } else {
    struct stat sb;
    if (!stat(path, &sb) && (uint64_t)sb.st_size > cli_input_max())
      return fprintf(stderr, "gpurt %s: %s: %llu bytes, more than --max-input-size %llu (give a larger one)\n", cmd,
                     path, (unsigned long long)sb.st_size, (unsigned long long)cli_input_max()), NULL;
    st = grt_trace_load(path, &cfg, &t, &err);
  }
  return st ? load_failed(cmd, path, st, &err) : t;
}

int cli_feed_input(const char *cmd, const char *path, cli_input *in, grt_trace_format format, grt_replay *r) {
  grt_trace_error err;
  memset(&err, 0, sizeof err);
  grt_status st =
      grt_replay_feed_stream(r, cli_input_stream(in), format, !strcmp(path, "-") ? "<stdin>" : path, &err);
  if (!st) return 0;
  char msg[600];
  if (cli_input_error(in))
    snprintf(msg, sizeof msg, "%s: %s", cli_input_name(path), cli_input_error(in)); /* the decoder's reason */
  else if (grt_trace_error_format(&err, msg, sizeof msg))
    snprintf(msg, sizeof msg, "%s", cli_input_name(path));
  fprintf(stderr, "gpurt %s: %s (%s)\n", cmd, msg, grt_status_str(st));
  return 1;
}

bool cli_is_native(const char *path) {
  struct stat sb;
  if (stat(path, &sb) || !S_ISREG(sb.st_mode)) return false; /* peeking would consume a pipe */
  FILE *f = fopen(path, "rb");
  if (!f) return false;
  char buf[12];
  size_t n = fread(buf, 1, sizeof buf, f);
  fclose(f);
  return n >= 11 && !memcmp(buf, "gpurt-trace", 11);
}

/* Below this, loading costs little and lets the replay search capacities. */
#define STREAM_MIN_BYTES ((uint64_t)32 << 20)

static bool is_big(const char *path) {
  struct stat sb;
  return stat(path, &sb) == 0 && S_ISREG(sb.st_mode) && (uint64_t)sb.st_size > STREAM_MIN_BYTES;
}

bool cli_streams(const char *path) { return is_big(path) && cli_is_native(path); }

bool cli_opens_input(const char *path) { return cli_input_needs_reader(path) || is_big(path); }

const char *cli_basename(const char *path) {
  const char *s = strrchr(path, '/');
  return s ? s + 1 : path;
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

void cli_progress_init(cli_progress *p, const char *label, uint64_t total) {
  memset(p, 0, sizeof *p);
  p->label = label;
  p->total = total;
  p->start = now_s();
  p->enabled = isatty(2);
}

void cli_progress_tick(cli_progress *p, uint64_t done) {
  if (p->enabled && !(done & 0xffff)) cli_progress_show(p, done);
}

void cli_progress_show(cli_progress *p, uint64_t done) {
  if (!p->enabled) return;
  double t = now_s();
  if (t - p->start < 1.0 || t - p->last_draw < 0.1) return;
  p->last_draw = t;
  p->drawn = true;
  double rate = (double)done / (t - p->start);
  if (p->unit) { /* a few long steps: a count, not a rate */
    fprintf(stderr, "\r%s: %llu of %llu %s, %.0f s ", p->label, (unsigned long long)done,
            (unsigned long long)p->total, p->unit, t - p->start);
  } else if (p->total) {
    int width = 30, fill = (int)((double)width * (double)done / (double)p->total);
    if (fill > width) fill = width;
    fprintf(stderr, "\r%s [%.*s%*s] %5.1f%%  %.1fM events/s ", p->label, fill, "##############################",
            width - fill, "", 100.0 * (double)done / (double)p->total, rate / 1e6);
  } else {
    fprintf(stderr, "\r%s %.1fM events  %.1fM events/s ", p->label, (double)done / 1e6, rate / 1e6);
  }
  fflush(stderr);
}

void cli_progress_done(cli_progress *p) {
  if (p->drawn) fprintf(stderr, "\r%*s\r", 78, "");
  p->drawn = false;
}

grt_status cli_progress_step(void *ctx, grt_replay *r, const grt_trace_event *ev, uint64_t index) {
  (void)r;
  (void)ev;
  cli_progress_tick(ctx, index + 1);
  return GRT_OK;
}

const cli_w3_ref cli_w3_reference[] = {
    {"exact best fit", 1.58}, {"VMA MIN_MEMORY", 1.58}, {"TLSF", 1.65}, {"VMA default", 1.73}, {"OffsetAllocator", 1.75},
};
const size_t cli_w3_reference_count = sizeof cli_w3_reference / sizeof cli_w3_reference[0];

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

int cli_list_files(const char *dir, const char *suffix, char **out, int max) {
  DIR *d = opendir(dir);
  if (!d) return -1;
  int n = 0;
  size_t ls = strlen(suffix);
  for (struct dirent *e; n < max && (e = readdir(d));) {
    size_t ln = strlen(e->d_name);
    if (ln <= ls || strcmp(e->d_name + ln - ls, suffix)) continue;
    size_t size = strlen(dir) + ln + 2;
    if (!(out[n] = malloc(size))) break;
    snprintf(out[n++], size, "%s/%s", dir, e->d_name);
  }
  closedir(d);
  qsort(out, (size_t)n, sizeof *out, cmp_str);
  return n;
}
