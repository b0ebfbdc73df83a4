/* html.c — the replay report: one self-contained HTML page of hand-written
 * SVG (time-series plots per trace, one line per policy; segment maps at the
 * peak and at the first OOM; the summary table). Series are reduced to at
 * most PLOT_POINTS points by keeping each bucket's maximum, so peaks survive.
 * Every drawn element a test looks for carries an id: plot-<metric>-<trace>,
 * line-<metric>-<run>, segmap-<peak|oom>-<run>. A policy keeps one colour
 * (and class p<k>) across the whole page, the first legend's checkboxes
 * hide a policy everywhere, and a plot where one line dwarfs the others
 * (its peak over LOG_RATIO times the next one's) is drawn on a log scale,
 * so the small ones stay readable. */
#include <inttypes.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpurt/html.h"

#define PLOT_W 900
#define PLOT_H 220
#define PAD_L 80
#define PAD_B 28
#define PLOT_POINTS 1200
#define MAP_W 760
#define MAP_ROW 10
#define MAP_MAX_SEGMENTS 400
#define LOG_RATIO 20.0

static const char *const palette[] = {"#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e",
                                      "#8c564b", "#e377c2", "#17becf", "#7f7f7f", "#bcbd22"};
#define N_COLORS (sizeof palette / sizeof palette[0])

/* The policy's number on the page: distinct policies in order of first appearance. */
static size_t policy_index(const grt_html_run *runs, size_t i) {
  size_t k = 0;
  for (size_t j = 0; j < i; j++) {
    bool first = true;
    for (size_t m = 0; m < j && first; m++) first = strcmp(runs[m].policy, runs[j].policy) != 0;
    if (!first) continue;
    if (!strcmp(runs[j].policy, runs[i].policy)) return k;
    k++;
  }
  return k;
}

static void esc(FILE *f, const char *s) {
  for (; s && *s; s++) {
    switch (*s) {
      case '<': fputs("&lt;", f); break;
      case '>': fputs("&gt;", f); break;
      case '&': fputs("&amp;", f); break;
      case '"': fputs("&quot;", f); break;
      default: fputc(*s, f);
    }
  }
}

typedef enum metric { M_RESERVED, M_ALLOCATED, M_LARGEST_FREE, M_COUNT } metric;
static const char *const metric_id[M_COUNT] = {"reserved", "allocated", "largest-free"};
static const char *const metric_title[M_COUNT] = {"reserved bytes", "allocated bytes", "largest free block"};

static uint64_t value(const grt_replay_sample *s, metric m) {
  return m == M_RESERVED ? s->reserved : m == M_ALLOCATED ? s->allocated : s->largest_free;
}

/* The plot's y of v: linear, or log10(1 + v) over log10(1 + ymax). */
static double y_of(uint64_t v, uint64_t ymax, bool log_scale) {
  double frac = log_scale ? log10(1.0 + (double)v) / log10(1.0 + (double)ymax) : (double)v / (double)(ymax ? ymax : 1);
  return 10 + (double)(PLOT_H - PAD_B - 10) * (1.0 - frac);
}

/* The events a run's samples span: one each, or more where the series was reduced (summary->events). */
static uint64_t span_of(const grt_html_run *r) {
  return r->summary->events > r->n_samples ? r->summary->events : r->n_samples;
}

static void polyline(FILE *f, const grt_html_run *r, size_t run_index, size_t policy, metric m, uint64_t ymax,
                     uint64_t xmax, bool log_scale) {
  if (!r->samples || !r->n_samples) return;
  fprintf(f, "<polyline id=\"line-%s-%zu\" class=\"series p%zu\" fill=\"none\" stroke=\"%s\" stroke-width=\"1.5\" "
             "points=\"",
          metric_id[m], run_index, policy, palette[policy % N_COLORS]);
  size_t n = r->n_samples, buckets = n < PLOT_POINTS ? n : PLOT_POINTS;
  for (size_t b = 0; b < buckets; b++) {
    size_t lo = b * n / buckets, hi = (b + 1) * n / buckets;
    uint64_t v = 0;
    for (size_t i = lo; i < hi; i++)
      if (value(&r->samples[i], m) > v) v = value(&r->samples[i], m);
    double at = (double)lo / (double)n * (double)span_of(r); /* the event the bucket starts at */
    double x = PAD_L + (double)(PLOT_W - PAD_L - 10) * at / (double)(xmax ? xmax : 1);
    double y = y_of(v, ymax, log_scale);
    fprintf(f, "%s%.1f,%.1f", b ? " " : "", x, y);
  }
  fprintf(f, "\"><title>");
  esc(f, r->policy);
  fprintf(f, "</title></polyline>\n");
}

static void plot(FILE *f, const grt_html_run *runs, size_t n, const char *trace, size_t trace_index, metric m) {
  uint64_t ymax = 0, xmax = 1, second = 0;
  for (size_t i = 0; i < n; i++) {
    if (strcmp(runs[i].trace, trace)) continue;
    if (runs[i].n_samples && span_of(&runs[i]) > xmax) xmax = span_of(&runs[i]);
    uint64_t peak = 0;
    for (size_t k = 0; k < runs[i].n_samples; k++)
      if (value(&runs[i].samples[k], m) > peak) peak = value(&runs[i].samples[k], m);
    if (peak > ymax) second = ymax, ymax = peak;
    else if (peak > second) second = peak;
  }
  bool log_scale = second > 0 && (double)ymax > LOG_RATIO * (double)second;
  if (!ymax) ymax = 1;
  char top[32], mid[32];
  fprintf(f, "<h3>%s%s</h3>\n<svg id=\"plot-%s-%zu\" class=\"plot%s\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\">\n",
          metric_title[m], log_scale ? " (log scale: one policy's line dwarfs the others)" : "", metric_id[m],
          trace_index, log_scale ? " log" : "", PLOT_W, PLOT_H, PLOT_W, PLOT_H);
  int y0 = PLOT_H - PAD_B;
  fprintf(f, "<rect x=\"%d\" y=\"10\" width=\"%d\" height=\"%d\" fill=\"#fafafa\" stroke=\"#ccc\"/>\n", PAD_L,
          PLOT_W - PAD_L - 10, y0 - 10);
  for (int k = 1; k < 4; k++) {
    int y = 10 + (y0 - 10) * k / 4;
    fprintf(f, "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"#e4e4e4\"/>\n", PAD_L, y, PLOT_W - 10, y);
  }
  fprintf(f, "<text x=\"%d\" y=\"16\" text-anchor=\"end\" class=\"ax\">%s</text>\n", PAD_L - 4,
          grt_format_bytes(ymax, top, sizeof top));
  uint64_t half = log_scale ? (uint64_t)(pow(1.0 + (double)ymax, 0.5) - 1.0) : ymax / 2; /* the middle line's value */
  fprintf(f, "<text x=\"%d\" y=\"%d\" text-anchor=\"end\" class=\"ax\">%s</text>\n", PAD_L - 4, 10 + (y0 - 10) / 2 + 4,
          grt_format_bytes(half, mid, sizeof mid));
  fprintf(f, "<text x=\"%d\" y=\"%d\" text-anchor=\"end\" class=\"ax\">0</text>\n", PAD_L - 4, y0);
  fprintf(f, "<text x=\"%d\" y=\"%d\" class=\"ax\">event 0</text>\n", PAD_L, PLOT_H - 8);
  fprintf(f, "<text x=\"%d\" y=\"%d\" text-anchor=\"end\" class=\"ax\">%" PRIu64 "</text>\n", PLOT_W - 10, PLOT_H - 8,
          xmax);
  for (size_t i = 0; i < n; i++)
    if (!strcmp(runs[i].trace, trace)) polyline(f, &runs[i], i, policy_index(runs, i), m, ymax, xmax, log_scale);
  fprintf(f, "</svg>\n");
}

static const char *state_color(grt_block_state s) {
  return s == GRT_BLOCK_ACTIVE_ALLOCATED ? "#3b6fb6" : s == GRT_BLOCK_ACTIVE_PENDING_FREE ? "#f0a030" : "#dde3ea";
}

/* One bar per segment (address order), its blocks to scale inside it. */
static void segmap(FILE *f, const grt_alloc_snapshot *snap, const char *which, size_t run_index, const char *caption) {
  size_t shown = snap->n_segments < MAP_MAX_SEGMENTS ? snap->n_segments : MAP_MAX_SEGMENTS;
  int h = (int)shown * MAP_ROW + 4;
  fprintf(f, "<div class=\"map\"><p>%s: %zu segment%s%s</p>\n", caption, snap->n_segments,
          snap->n_segments == 1 ? "" : "s", shown < snap->n_segments ? " (first 400 shown)" : "");
  fprintf(f, "<svg id=\"segmap-%s-%zu\" class=\"segmap\" width=\"%d\" height=\"%d\">\n", which, run_index, MAP_W + 110,
          h < 10 ? 10 : h);
  for (size_t i = 0; i < shown; i++) {
    const grt_snapshot_segment *s = &snap->segments[i];
    int y = 2 + (int)i * MAP_ROW;
    char sz[32];
    fprintf(f, "<g><title>segment 0x%" PRIx64 " %s %s</title>", s->address, grt_format_bytes(s->total_size, sz, sizeof sz),
            s->is_large ? "large" : "small");
    for (size_t j = 0; j < s->n_blocks; j++) {
      const grt_snapshot_block *b = &s->blocks[j];
      double x = (double)MAP_W * (double)(b->address - s->address) / (double)s->total_size;
      double w = (double)MAP_W * (double)b->size / (double)s->total_size;
      fprintf(f, "<rect x=\"%.1f\" y=\"%d\" width=\"%.2f\" height=\"%d\" fill=\"%s\" stroke=\"#fff\" stroke-width=\"0.3\"/>",
              x, y, w < 0.5 ? 0.5 : w, MAP_ROW - 1, state_color(b->state));
    }
    fprintf(f, "<text x=\"%d\" y=\"%d\" class=\"ax\">%s</text></g>\n", MAP_W + 4, y + MAP_ROW - 1, sz);
  }
  fprintf(f, "</svg></div>\n");
}

static void summary_table(FILE *f, const grt_html_run *runs, size_t n) {
  fprintf(f, "<h2>Summary</h2>\n<table id=\"summary\"><tr><th>trace</th><th>policy</th><th>events</th>"
             "<th>peak reserved</th><th>peak allocated</th><th>peak live</th><th>max frag.</th>"
             "<th>heap needed / peak live</th><th>first OOM</th><th>device mallocs / frees</th><th>syncs</th></tr>\n");
  for (size_t i = 0; i < n; i++) {
    const grt_html_run *r = &runs[i];
    const grt_replay_summary *s = r->summary;
    char a[32], b[32], c[32];
    fprintf(f, "<tr><td>");
    esc(f, r->trace);
    fprintf(f, "</td><td><span class=\"sw\" style=\"background:%s\"></span>", palette[policy_index(runs, i) % N_COLORS]);
    esc(f, r->policy);
    fprintf(f, "</td><td>%" PRIu64 "</td><td>%s</td><td>%s</td><td>%s</td><td>%.1f%%</td>", s->events,
            grt_format_bytes(s->peak_reserved, a, sizeof a), grt_format_bytes(s->peak_allocated, b, sizeof b),
            grt_format_bytes(s->peak_live, c, sizeof c), 100.0 * s->max_fragmentation);
    if (r->min_capacity)
      fprintf(f, "<td>%.3f</td>", r->heap_ratio);
    else
      fprintf(f, "<td>-</td>");
    if (s->has_oom)
      fprintf(f, "<td>event %" PRIu64 " at %.1f%% utilization</td>", s->first_oom_event, 100.0 * s->first_oom_utilization);
    else
      fprintf(f, "<td>none</td>");
    fprintf(f, "<td>%" PRIu64 " / %" PRIu64 "</td><td>%" PRIu64 "</td></tr>\n", s->device_mallocs, s->device_frees,
            s->syncs);
  }
  fprintf(f, "</table>\n");
}

static const char *const style =
    "body{font:14px/1.4 system-ui,sans-serif;margin:24px;color:#222;max-width:1100px}"
    "h1{font-size:22px}h2{font-size:18px;margin-top:32px;border-bottom:1px solid #ddd}h3{font-size:14px;margin:14px 0 2px}"
    "table{border-collapse:collapse;font-size:13px}td,th{border:1px solid #ccc;padding:3px 8px;text-align:right}"
    "td:first-child,td:nth-child(2),th{text-align:left}.ax{font-size:11px;fill:#555}"
    ".sw{display:inline-block;width:10px;height:10px;margin-right:6px}.legend span{margin-right:14px}"
    ".map p{margin:8px 0 2px;color:#444}";

/* Every policy once, in page order; trace NULL: the page's own legend, with a checkbox per policy. */
static void legend(FILE *f, const grt_html_run *runs, size_t n, const char *trace) {
  fprintf(f, "<p class=\"legend\"%s>", trace ? "" : " id=\"legend\"");
  for (size_t i = 0; i < n; i++) {
    size_t k = policy_index(runs, i);
    bool again = false;
    for (size_t j = 0; j < i && !again; j++) again = policy_index(runs, j) == k && (!trace || !strcmp(runs[j].trace, trace));
    if (again || (trace && strcmp(runs[i].trace, trace))) continue;
    fprintf(f, "<span>");
    if (!trace) fprintf(f, "<input type=\"checkbox\" checked id=\"toggle-p%zu\" data-policy=\"p%zu\">", k, k);
    fprintf(f, "<span class=\"sw\" style=\"background:%s\"></span>", palette[k % N_COLORS]);
    esc(f, runs[i].policy);
    fprintf(f, "</span>");
  }
  fprintf(f, "</p>\n");
}

static void trace_section(FILE *f, const grt_html_run *runs, size_t n, size_t first, size_t trace_index) {
  const char *trace = runs[first].trace;
  fprintf(f, "<h2>");
  esc(f, trace);
  fprintf(f, "</h2>\n");
  legend(f, runs, n, trace);
  for (int m = 0; m < M_COUNT; m++) plot(f, runs, n, trace, trace_index, (metric)m);
  for (size_t i = first; i < n; i++) {
    if (strcmp(runs[i].trace, trace)) continue;
    char cap[160];
    if (runs[i].at_peak) {
      snprintf(cap, sizeof cap, "%s: segments at the peak of reserved memory (event %" PRIu64 ")", runs[i].policy,
               runs[i].peak_event);
      segmap(f, runs[i].at_peak, "peak", i, cap);
    }
    if (runs[i].at_oom) {
      snprintf(cap, sizeof cap, "%s: segments at the first OOM (event %" PRIu64 ")", runs[i].policy, runs[i].oom_event);
      segmap(f, runs[i].at_oom, "oom", i, cap);
    }
  }
}

grt_status grt_html_write_report(FILE *f, const char *title, const grt_html_run *runs, size_t n_runs) {
  if (!f || (!runs && n_runs)) return GRT_ERR_INVALID_ARG;
  for (size_t i = 0; i < n_runs; i++)
    if (!runs[i].trace || !runs[i].policy || !runs[i].summary) return GRT_ERR_INVALID_ARG;
  fprintf(f, "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>gpurt replay: ");
  esc(f, title ? title : "report");
  fprintf(f, "</title>\n<style>%s</style></head>\n<body data-plots-drawn=\"0\">\n<h1>gpurt replay report: ", style);
  esc(f, title ? title : "");
  fprintf(f, "</h1>\n<p>Simulated device; each line is one allocator policy replaying the same trace. Segment maps: "
             "<span class=\"sw\" style=\"background:#3b6fb6\"></span>allocated "
             "<span class=\"sw\" style=\"background:#f0a030\"></span>pending free "
             "<span class=\"sw\" style=\"background:#dde3ea\"></span>free (cached).</p>\n");
  fprintf(f, "<p>Policies (one colour each on the whole page; uncheck to hide):</p>\n");
  legend(f, runs, n_runs, NULL);
  size_t trace_index = 0;
  for (size_t i = 0; i < n_runs; i++) {
    bool seen = false;
    for (size_t k = 0; k < i && !seen; k++) seen = !strcmp(runs[k].trace, runs[i].trace);
    if (!seen) trace_section(f, runs, n_runs, i, trace_index++);
  }
  summary_table(f, runs, n_runs);
  /* the headless-browser check: count plot lines that have a rendered extent */
  fprintf(f, "<script>(function(){var n=0;document.querySelectorAll('polyline.series').forEach(function(p){"
             "var b=p.getBBox();if(p.points.numberOfItems>0&&(b.width>0||b.height>0))n++;});"
             "document.body.setAttribute('data-plots-drawn',String(n));"
             "document.querySelectorAll('#legend input').forEach(function(c){c.addEventListener('change',function(){"
             "document.querySelectorAll('polyline.'+c.dataset.policy).forEach(function(p){"
             "p.style.display=c.checked?'':'none';});});});})();</script>\n</body></html>\n");
  return ferror(f) ? GRT_ERR_IO : GRT_OK;
}

grt_status grt_html_save_report(const char *path, const char *title, const grt_html_run *runs, size_t n_runs) {
  if (!path) return GRT_ERR_INVALID_ARG;
  FILE *f = fopen(path, "w");
  if (!f) return GRT_ERR_IO;
  grt_status st = grt_html_write_report(f, title, runs, n_runs);
  if (fclose(f) && !st) st = GRT_ERR_IO;
  return st;
}
