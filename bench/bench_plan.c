/* bench_plan.c — the static planner (gpurt/plan.h) on google/minimalloc's
 * six "challenging" traces, against online best fit on the same buffers
 * in the same process (the baseline: what an allocator that sees one event
 * at a time needs).
 *
 *   ./build/release/bench/bench_plan [--traces DIR] [--effort N] [--budget-ms N] [--seed S]
 *
 * DIR defaults to $GRT_SHARED_DIR/traces/minimalloc (e.g. GRT_SHARED_DIR=../shared);
 * without either the benchmark says so and exits 0. Per trace: heap / peak
 * live of the plan and of best fit, the planner's milliseconds (wall), the
 * orders it tried; then the geometric means and their ratio. Every plan is
 * checked with grt_plan_check before its figure is printed. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gpurt/plan.h"

static const char *const traces[] = {"A.1048576.csv", "B.1048576.csv", "C.1048576.csv",
                                     "D.1048576.csv", "E.1048576.csv", "F.1048576.csv"};
#define N_TRACES (sizeof traces / sizeof traces[0])

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* ---- the baseline: online best fit over an unbounded heap ---- */

typedef struct hole {
  uint64_t lo, hi;
} hole;

typedef struct best_fit {
  hole *holes; /* free ranges below top, by address, never adjacent */
  size_t n;
  uint64_t top, heap;
} best_fit;

static uint64_t bf_alloc(best_fit *f, uint64_t size) {
  size_t best = f->n;
  for (size_t i = 0; i < f->n; i++)
    if (f->holes[i].hi - f->holes[i].lo >= size &&
        (best == f->n || f->holes[i].hi - f->holes[i].lo < f->holes[best].hi - f->holes[best].lo))
      best = i;
  if (best < f->n) {
    uint64_t at = f->holes[best].lo;
    f->holes[best].lo += size;
    if (f->holes[best].lo == f->holes[best].hi)
      memmove(&f->holes[best], &f->holes[best + 1], (--f->n - best) * sizeof(hole));
    return at;
  }
  /* none fits: the top grows, starting in the last hole when it touches the top */
  uint64_t at = f->top;
  if (f->n && f->holes[f->n - 1].hi == f->top) at = f->holes[--f->n].lo;
  f->top = at + size;
  if (f->top > f->heap) f->heap = f->top;
  return at;
}

static void bf_free(best_fit *f, uint64_t lo, uint64_t hi) {
  size_t i = 0;
  while (i < f->n && f->holes[i].lo < lo) i++;
  bool left = i > 0 && f->holes[i - 1].hi == lo, right = i < f->n && f->holes[i].lo == hi;
  if (left && right) {
    f->holes[i - 1].hi = f->holes[i].hi;
    memmove(&f->holes[i], &f->holes[i + 1], (--f->n - i) * sizeof(hole));
  } else if (left) {
    f->holes[i - 1].hi = hi;
  } else if (right) {
    f->holes[i].lo = lo;
  } else {
    memmove(&f->holes[i + 1], &f->holes[i], (f->n - i) * sizeof(hole));
    f->holes[i] = (hole){lo, hi};
    f->n++;
  }
  if (f->n && f->holes[f->n - 1].hi == f->top) f->top = f->holes[--f->n].lo; /* the top shrinks back */
}

typedef struct end {
  uint64_t step;
  size_t index;
  int is_alloc;
} end;

static int cmp_end(const void *x, const void *y) {
  const end *a = x, *b = y;
  if (a->step != b->step) return a->step < b->step ? -1 : 1;
  if (a->is_alloc != b->is_alloc) return a->is_alloc - b->is_alloc;
  return a->index < b->index ? -1 : a->index > b->index;
}

/* The heap online best fit needs for bufs, events in step order. */
static uint64_t best_fit_heap(const grt_plan_buffer *bufs, size_t n) {
  end *ev = malloc(2 * n * sizeof *ev);
  uint64_t *at = malloc(n * sizeof *at);
  best_fit f = {malloc((n + 1) * sizeof(hole)), 0, 0, 0};
  if (!ev || !at || !f.holes) exit(1);
  for (size_t i = 0; i < n; i++) {
    ev[2 * i] = (end){bufs[i].lower, i, 1};
    ev[2 * i + 1] = (end){bufs[i].upper, i, 0};
  }
  qsort(ev, 2 * n, sizeof *ev, cmp_end);
  for (size_t k = 0; k < 2 * n; k++) {
    const grt_plan_buffer *b = &bufs[ev[k].index];
    if (ev[k].is_alloc)
      at[ev[k].index] = bf_alloc(&f, b->size);
    else
      bf_free(&f, at[ev[k].index], at[ev[k].index] + b->size);
  }
  free(ev);
  free(at);
  free(f.holes);
  return f.heap;
}

/* ---- the runs ---- */

typedef struct row {
  double plan_ratio, fit_ratio, ms;
  uint64_t orders;
  bool optimal;
} row;

static int load(const char *path, grt_plan_buffer **bufs, size_t *n) {
  grt_trace *t = NULL;
  grt_trace_error e;
  char msg[512];
  grt_status st = grt_trace_load(path, NULL, &t, &e);
  if (st) {
    if (grt_trace_error_format(&e, msg, sizeof msg)) snprintf(msg, sizeof msg, "cannot read the trace");
    fprintf(stderr, "bench_plan: %s: %s\n", msg, grt_status_name(st));
    return 1;
  }
  st = grt_plan_buffers_from_trace(t, bufs, n, msg, sizeof msg);
  grt_status st2 = grt_trace_destroy(t);
  if (st || st2) {
    fprintf(stderr, "bench_plan: %s: %s %s\n", path, grt_status_name(st ? st : st2), msg);
    return 1;
  }
  return 0;
}

static int run_one(const char *path, const grt_plan_config *cfg, row *r) {
  grt_plan_buffer *bufs = NULL;
  size_t n = 0;
  if (load(path, &bufs, &n)) return 1;
  uint64_t *off = malloc((n ? n : 1) * sizeof *off), heap = 0;
  grt_plan_result res;
  char msg[512];
  if (!off) return 1;
  double t0 = now_ms();
  grt_status st = grt_plan_solve(bufs, n, cfg, off, &res, msg, sizeof msg);
  r->ms = now_ms() - t0;
  if (!st) st = grt_plan_check(bufs, n, off, &heap, msg, sizeof msg);
  if (!st && heap != res.heap)
    fprintf(stderr, "bench_plan: %s: checked heap %llu != planned\n", path, (unsigned long long)heap),
        st = GRT_ERR_INTERNAL;
  if (st) {
    fprintf(stderr, "bench_plan: %s: %s %s\n", path, grt_status_name(st), msg);
  } else {
    r->plan_ratio = (double)res.heap / (double)res.peak_live;
    r->fit_ratio = (double)best_fit_heap(bufs, n) / (double)res.peak_live;
    r->orders = res.orders;
    r->optimal = res.optimal;
  }
  free(off);
  grt_plan_buffers_free(bufs);
  return st != GRT_OK;
}

static int parse(int argc, char **argv, const char **dir, grt_plan_config *cfg) {
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    char *endp = NULL;
    if (!strcmp(a, "--traces") && v)
      *dir = v, i++;
    else if (!strcmp(a, "--effort") && v)
      cfg->effort = strtoull(v, &endp, 10), i++;
    else if (!strcmp(a, "--budget-ms") && v)
      cfg->budget_ms = strtoull(v, &endp, 10), i++;
    else if (!strcmp(a, "--seed") && v)
      cfg->seed = strtoull(v, &endp, 10), i++;
    else {
      fprintf(stderr, "usage: bench_plan [--traces DIR] [--effort N] [--budget-ms N] [--seed S]\n");
      return 2;
    }
    if (endp && *endp) {
      fprintf(stderr, "bench_plan: %s wants a number, not '%s'\n", a, v);
      return 2;
    }
  }
  return 0;
}

int main(int argc, char **argv) {
  static char dirbuf[1024];
  const char *dir = NULL;
  grt_plan_config cfg;
  grt_plan_config_default(&cfg);
  int rc = parse(argc, argv, &dir, &cfg);
  if (rc) return rc;
  if (!dir && getenv("GRT_SHARED_DIR")) {
    snprintf(dirbuf, sizeof dirbuf, "%s/traces/minimalloc", getenv("GRT_SHARED_DIR"));
    dir = dirbuf;
  }
  if (!dir) {
    printf("bench_plan: skipped: no traces (--traces DIR, or GRT_SHARED_DIR=../shared)\n");
    return 0;
  }
  printf("bench_plan: effort %llu, budget %llu ms, seed %llu\n\n", (unsigned long long)cfg.effort,
         (unsigned long long)cfg.budget_ms, (unsigned long long)cfg.seed);
  printf("  %-16s %10s %10s %9s %8s %9s\n", "trace", "plan/peak", "bestfit", "plan ms", "orders", "optimal");
  double lp = 0, lf = 0, ms = 0;
  for (size_t i = 0; i < N_TRACES; i++) {
    char path[1200];
    snprintf(path, sizeof path, "%s/%s", dir, traces[i]);
    row r;
    if (run_one(path, &cfg, &r)) return 1;
    printf("  %-16s %10.4f %10.4f %9.1f %8llu %9s\n", traces[i], r.plan_ratio, r.fit_ratio, r.ms,
           (unsigned long long)r.orders, r.optimal ? "yes" : "no");
    lp += log(r.plan_ratio), lf += log(r.fit_ratio), ms += r.ms;
  }
  double gp = exp(lp / N_TRACES), gf = exp(lf / N_TRACES);
  printf("\n  geometric mean   %10.4f %10.4f %9.1f (total ms)\n", gp, gf, ms);
  printf("  plan / best fit  %10.4f\n", gp / gf);
  return 0;
}
