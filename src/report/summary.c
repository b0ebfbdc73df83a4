/* summary.c — torch.cuda.memory_summary(): PyTorch's 75-column table, built
 * the same way (each pool row scaled by the unit its "all" row chose), plus
 * the line PyTorch lacks: the largest free block and the fragmentation ratio.
 *
 * Matches torch/cuda/memory.py's memory_summary() formatting: _format_size
 * steps B/KiB/MiB/GiB/TiB/PiB while the reference value is >= 768 KiB-units,
 * _format_count steps ' '/K/M while it is >= 750 thousand. */
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "gpurt/report.h"
#include "report/textbuf.h"

#define WIDTH 75

/* "%6lld UNIT" (10 columns), the unit chosen by ref. */
static void format_size(char *buf, size_t n, int64_t sz, int64_t ref) {
  static const char *const units[] = {"B  ", "KiB", "MiB", "GiB", "TiB", "PiB"};
  double pref = (double)ref;
  int u = 0;
  while (u < 5 && pref >= 768.0 * 1024.0) {
    u++;
    sz /= 1024;
    pref /= 1024.0;
  }
  snprintf(buf, n, "%6lld %s", (long long)sz, units[u]);
}

/* "%7lld U " (10 columns). */
static void format_count(char *buf, size_t n, int64_t cnt, int64_t ref) {
  static const char units[] = {' ', 'K', 'M'};
  double pref = (double)ref;
  int u = 0;
  while (u < 2 && pref >= 750.0 * 1000.0) {
    u++;
    cnt /= 1000;
    pref /= 1000.0;
  }
  snprintf(buf, n, "%7lld %c ", (long long)cnt, units[u]);
}

typedef void (*formatter)(char *, size_t, int64_t, int64_t);

/* One table line between the outer bars. */
static void line(grt__textbuf *tb, const char *text) { grt__textbuf_printf(tb, "|%-*s|\n", WIDTH, text); }

static void rule(grt__textbuf *tb, char c) {
  char r[WIDTH + 1];
  memset(r, c, WIDTH);
  r[WIDTH] = 0;
  line(tb, r);
}

static void row(grt__textbuf *tb, const char *name, const grt_stat *s, const grt_stat *ref, formatter fmt) {
  char c[4][24];
  fmt(c[0], sizeof c[0], s->current, ref->current);
  fmt(c[1], sizeof c[1], s->peak, ref->peak);
  fmt(c[2], sizeof c[2], s->allocated, ref->allocated);
  fmt(c[3], sizeof c[3], s->freed, ref->freed);
  char text[128];
  snprintf(text, sizeof text, " %-21s | %s | %s | %s | %s ", name, c[0], c[1], c[2], c[3]);
  line(tb, text);
}

typedef struct metric {
  size_t offset;
  const char *name;
  formatter fmt;
} metric;

#define M(f, name, fmt) {offsetof(grt_alloc_stats, f), name, fmt}
static const metric metrics[] = {
    M(allocated_bytes, "Allocated memory", format_size),
    M(active_bytes, "Active memory", format_size),
    M(requested_bytes, "Requested memory", format_size),
    M(reserved_bytes, "GPU reserved memory", format_size),
    M(inactive_split_bytes, "Non-releasable memory", format_size),
    M(allocation, "Allocations", format_count),
    M(active, "Active allocs", format_count),
    M(segment, "GPU reserved segments", format_count),
    M(inactive_split, "Non-releasable allocs", format_count),
};
#undef M

static void free_block_line(grt__textbuf *tb, const grt_alloc_stats *s, const grt_free_space *f) {
  char largest[24], cached[24], text[160];
  uint64_t lfb = f ? f->largest[GRT_STAT_ALL] : s->largest_free_block;
  format_size(largest, sizeof largest, (int64_t)lfb, (int64_t)lfb);
  if (!f) {
    snprintf(text, sizeof text, " %-21s | %s | (gpurt; PyTorch lacks this line)", "Largest free block", largest);
    line(tb, text);
    return;
  }
  format_size(cached, sizeof cached, (int64_t)f->inactive[GRT_STAT_ALL], (int64_t)f->inactive[GRT_STAT_ALL]);
  snprintf(text, sizeof text, " %-21s | %s of %s free | fragmentation %.2f", "Largest free block", largest,
           cached, grt_fragmentation_ratio(lfb, f->inactive[GRT_STAT_ALL]));
  line(tb, text);
}

grt_status grt_memory_summary(const grt_alloc_stats *s, const grt_free_space *f, int device, int abbreviated,
                              char **out) {
  if (!s || !out || device < 0) return GRT_ERR_INVALID_ARG;
  *out = NULL;
  grt__textbuf tb = {0};
  char text[160];
  rule(&tb, '=');
  snprintf(text, sizeof text, " %16s PyTorch CUDA memory summary, device ID %-17d ", "", device);
  line(&tb, text);
  rule(&tb, '-');
  snprintf(text, sizeof text, "  %9s CUDA OOMs: %-12llu | %6s cudaMalloc retries: %-8llu  ", "",
           (unsigned long long)s->num_ooms, "", (unsigned long long)s->num_alloc_retries);
  line(&tb, text);
  rule(&tb, '=');
  line(&tb, "        Metric         | Cur Usage  | Peak Usage | Tot Alloc  | Tot Freed  ");
  for (size_t i = 0; i < sizeof metrics / sizeof metrics[0]; i++) {
    const grt_stat *arr = (const grt_stat *)((const char *)s + metrics[i].offset);
    rule(&tb, '-');
    row(&tb, metrics[i].name, &arr[GRT_STAT_ALL], &arr[GRT_STAT_ALL], metrics[i].fmt);
    if (abbreviated) continue;
    row(&tb, "      from large pool", &arr[GRT_STAT_LARGE_POOL], &arr[GRT_STAT_ALL], metrics[i].fmt);
    row(&tb, "      from small pool", &arr[GRT_STAT_SMALL_POOL], &arr[GRT_STAT_ALL], metrics[i].fmt);
  }
  rule(&tb, '-');
  row(&tb, "Oversize allocations", &s->oversize_allocations, &s->oversize_allocations, format_count);
  rule(&tb, '-');
  row(&tb, "Oversize GPU segments", &s->oversize_segments, &s->oversize_segments, format_count);
  rule(&tb, '-');
  free_block_line(&tb, s, f);
  rule(&tb, '=');
  return grt__textbuf_finish(&tb, out, NULL);
}
