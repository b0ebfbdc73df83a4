/* cmd_diff.c — `gpurt diff A B`: two snapshots of one program, before and
 * after a change: the recorded figures side by side, the allocation sites
 * whose bytes at the peak changed most (sites matched across the two by
 * their folded frames, since stack ids are each trace's own), and the final
 * segments only one of them holds. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "input.h"
#include "cli_opts.h"
#include "cli_status.h"
#include "gpurt/doctor.h"
#include "replay_util.h"

#define KEY_MAX 512
#define MAX_DIFF_SITES (2 * GRT_DOCTOR_MAX_SITES)

static void usage(FILE *f) {
  fprintf(f, "usage: gpurt diff A B [--device N]\n\n"
             "Compares two PyTorch snapshots (before and after a change): the recorded reserved and requested\n"
             "bytes at the start, the peak and the end, the device calls and OOMs; the allocation sites whose\n"
             "bytes live at the peak changed most (sites matched by their folded frames; the peak as the\n"
             "faithful replay of each snapshot has it); and the final segments only one of them holds.\n");
  fputs(CLI_INPUT_HELP, f);
}

typedef struct side {
  const char *path;
  grt_trace *t;
  grt_trace_info info;
  grt_trace_recorded rec;
  grt_doctor_report rep;
} side;

typedef struct dsite {
  char key[KEY_MAX];
  uint64_t bytes[2];
} dsite;

/* A site's key: its folded frames, "name (file:line)" joined by " < ". */
static void site_key(const grt_trace *t, uint32_t stack, char *key, size_t cap) {
  const grt_trace_frame *f;
  size_t n, keep[4];
  snprintf(key, cap, "(no frames recorded)");
  if (!stack || grt_trace_stack(t, stack, &f, &n)) return;
  size_t k = grt_trace_frames_fold(f, n, keep, 4), at = 0;
  key[0] = 0;
  for (size_t i = 0; i < k && i < 4 && at < cap; i++)
    at += (size_t)snprintf(key + at, cap - at, "%s%s (%s:%" PRId64 ")", i ? " < " : "", f[keep[i]].name,
                           f[keep[i]].filename, f[keep[i]].line);
}

static void add_site(dsite *d, size_t *n, const char *key, int which, uint64_t bytes) {
  size_t i = 0;
  while (i < *n && strcmp(d[i].key, key)) i++;
  if (i == *n) {
    if (*n == MAX_DIFF_SITES) return;
    memset(&d[i], 0, sizeof d[i]);
    snprintf(d[i].key, sizeof d[i].key, "%s", key);
    (*n)++;
  }
  d[i].bytes[which] += bytes;
}

static uint64_t delta(const dsite *d) { return d->bytes[0] > d->bytes[1] ? d->bytes[0] - d->bytes[1] : d->bytes[1] - d->bytes[0]; }

static int cmp_delta(const void *a, const void *b) {
  uint64_t x = delta(a), y = delta(b);
  return x > y ? -1 : x < y;
}

/* The recorded bytes of one snapshot in the order print_figures names them. */
static void figures_of(const grt_trace_recorded *r, uint64_t v[6]) {
  uint64_t x[6] = {r->reserved_start, r->reserved_peak, r->reserved_end,
                   r->requested_start, r->requested_peak, r->requested_end};
  memcpy(v, x, sizeof x);
}

static void print_figures(const side *s) {
  char b[2][32];
  static const char *const names[] = {"reserved at the start", "reserved at the peak", "reserved at the end",
                                      "requested at the start", "requested at the peak", "requested at the end"};
  uint64_t v[2][6];
  figures_of(&s[0].rec, v[0]);
  figures_of(&s[1].rec, v[1]);
  printf("  %-34s %14s %14s\n", "", cli_basename(s[0].path), cli_basename(s[1].path));
  for (int k = 0; k < 6; k++)
    printf("  %-34s %14s %14s\n", names[k], grt_format_bytes(v[0][k], b[0], 32), grt_format_bytes(v[1][k], b[1], 32));
  printf("  %-34s %14" PRIu64 " %14" PRIu64 "\n", "device mallocs + frees", s[0].rec.device_mallocs + s[0].rec.device_frees,
         s[1].rec.device_mallocs + s[1].rec.device_frees);
  printf("  %-34s %14" PRIu64 " %14" PRIu64 "\n", "OOMs", s[0].rec.ooms, s[1].rec.ooms);
}

static void print_sites(const side *s) {
  dsite d[MAX_DIFF_SITES];
  size_t n = 0;
  char key[KEY_MAX], b[3][32];
  for (int w = 0; w < 2; w++)
    for (size_t i = 0; i < s[w].rep.n_peak_sites; i++) {
      site_key(s[w].t, s[w].rep.peak_sites[i].stack, key, sizeof key);
      add_site(d, &n, key, w, s[w].rep.peak_sites[i].bytes);
    }
  qsort(d, n, sizeof *d, cmp_delta);
  printf("\nallocation sites whose bytes at the peak changed most (the %d largest of each side):\n",
         GRT_DOCTOR_MAX_SITES);
  for (size_t i = 0; i < n && i < 8; i++) {
    if (!delta(&d[i])) break;
    printf("  %10s -> %10s  (%s%s)  %s\n", grt_format_bytes(d[i].bytes[0], b[0], 32),
           grt_format_bytes(d[i].bytes[1], b[1], 32), d[i].bytes[1] >= d[i].bytes[0] ? "+" : "-",
           grt_format_bytes(delta(&d[i]), b[2], 32), d[i].key);
  }
}

static bool has_segment(const grt_trace_info *in, const grt_trace_segment *g) {
  for (size_t i = 0; i < in->n_segments; i++)
    if (in->segments[i].addr == g->addr && in->segments[i].total_size == g->total_size) return true;
  return false;
}

static void print_segments(const side *s) {
  char b[32];
  printf("\nfinal segments only one snapshot holds (same address and size):\n");
  size_t shown = 0;
  for (int w = 0; w < 2; w++) {
    size_t only = 0;
    for (size_t i = 0; i < s[w].info.n_segments; i++) {
      const grt_trace_segment *g = &s[w].info.segments[i];
      if (has_segment(&s[1 - w].info, g)) continue;
      if (only++ < 5)
        printf("  only in %s: 0x%" PRIx64 " %s %s\n", cli_basename(s[w].path), g->addr,
               grt_format_bytes(g->total_size, b, 32), g->is_large ? "large" : "small");
    }
    if (only > 5) printf("  only in %s: ... %zu more\n", cli_basename(s[w].path), only - 5);
    shown += only;
  }
  if (!shown) printf("  none\n");
}

static int load_side(side *s, int device) {
  s->t = cli_load_trace("diff", s->path, device);
  if (!s->t) return 1;
  grt_status st = grt_trace_get_info(s->t, &s->info);
  if (!st) st = grt_trace_recorded_figures(s->t, &s->rec);
  if (st) return cli_fail_status("diff", "grt_trace_recorded_figures", st, NULL);
  char err[512];
  if ((st = grt_doctor_examine(s->t, &s->rep, err, sizeof err))) {
    fprintf(stderr, "gpurt diff: %s: %s (%s)\n", cli_basename(s->path), err, grt_status_str(st));
    return 1;
  }
  return 0;
}

int grt_cmd_diff(int argc, char **argv) {
  static const struct option opts[] = {{"device", required_argument, NULL, 256}, CLI_OPT_MAX_INPUT_ENTRY, CLI_OPT_HELP_ENTRY, {NULL, 0, NULL, 0}};
  cli_opts p;
  cli_opts_init(&p, "diff", argc, argv, opts, false);
  if (p.help) {
    usage(stdout);
    return 0;
  }
  side s[2];
  memset(s, 0, sizeof s);
  int device = 0, n_paths = 0;
  for (int c; (c = cli_opts_next(&p)) != CLI_OPT_END;) {
    if (c == 256 && !cli_opt_device(&p, &device)) return 2;
    if (c == CLI_OPT_POSITIONAL && n_paths == 2) return cli_opts_fail(&p, "two snapshots: before and after");
    if (c == CLI_OPT_POSITIONAL) s[n_paths++].path = p.arg;
    if (c == CLI_OPT_ERROR) return 2;
  }
  if (n_paths != 2) {
    usage(stderr);
    return 2;
  }
  int rc = load_side(&s[0], device);
  if (!rc) rc = load_side(&s[1], device);
  if (!rc) {
    printf("gpurt diff: %s -> %s (device %d; figures recorded by each snapshot)\n\n", cli_basename(s[0].path),
           cli_basename(s[1].path), device);
    print_figures(s);
    print_sites(s);
    print_segments(s);
  }
  for (int w = 0; w < 2; w++) {
    grt_status st = s[w].t ? grt_trace_destroy(s[w].t) : GRT_OK;
    if (st && !rc) rc = cli_fail_status("diff", "grt_trace_destroy", st, NULL);
  }
  return rc;
}
