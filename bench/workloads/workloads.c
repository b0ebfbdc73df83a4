/* workloads.c — W1/W2 churn runners over the range allocator (see workloads.h).
 *
 * One run: draw the op stream (untimed), create a fresh range, fill the slots
 * (untimed), time the iterations with CLOCK_MONOTONIC, destroy. Every run of a
 * config sees the same stream, so failures and the checksum must repeat
 * exactly; a difference is reported as GRT_ERR_INTERNAL. Blocks are freed by
 * the handle their allocation returned (as the peers free by allocation
 * handle), so the timed loop does no offset lookup.
 */
#include "workloads/workloads.h"

#include <stdbool.h>
#include <stdlib.h>
#include <time.h>

#include "workloads/approx_range.h"
#include "policy/range_alloc.h"
#include "base/rng.h"

#define EMPTY_SLOT UINT64_MAX

typedef struct op_stream {
  uint64_t *fill_size; /* [slots] */
  uint32_t *slot;      /* [iterations] */
  uint64_t *size;      /* [iterations] */
} op_stream;

static uint64_t draw_size(grt__rng *r, const grt__churn_config *c) {
  uint64_t s = grt__rng_log_uniform(r, c->min_size, c->max_size);
  return (s + c->granule - 1) & ~(c->granule - 1);
}

static void stream_free(op_stream *s) {
  free(s->fill_size);
  free(s->slot);
  free(s->size);
}

static grt_status stream_draw(const grt__churn_config *c, op_stream *s) {
  s->fill_size = malloc(c->slots * sizeof *s->fill_size);
  s->slot = malloc(c->iterations * sizeof *s->slot);
  s->size = malloc(c->iterations * sizeof *s->size);
  if (!s->fill_size || !s->slot || !s->size) {
    stream_free(s);
    return GRT_ERR_NOMEM;
  }
  grt__rng r;
  grt__rng_seed(&r, c->seed);
  for (uint32_t i = 0; i < c->slots; i++) s->fill_size[i] = draw_size(&r, c);
  for (uint32_t i = 0; i < c->iterations; i++) {
    s->slot[i] = (uint32_t)grt__rng_below(&r, c->slots);
    s->size[i] = draw_size(&r, c);
  }
  return GRT_OK;
}

static double now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static inline uint64_t mix(uint64_t ck, uint64_t off) { return ck * 0x100000001b3ULL ^ off; }

/* The loop without an allocator: same reads, same slot bookkeeping. */
static double run_harness(const grt__churn_config *c, const op_stream *s, uint64_t *live,
                          grt__churn_result *res) {
  uint64_t ck = 0;
  for (uint32_t i = 0; i < c->slots; i++) live[i] = s->fill_size[i];
  double t0 = now_ns();
  for (uint32_t i = 0; i < c->iterations; i++) {
    uint32_t k = s->slot[i];
    if (live[k] != EMPTY_SLOT) ck = mix(ck, live[k]);
    live[k] = s->size[i];
  }
  double t1 = now_ns();
  res->checksum = ck;
  return t1 - t0;
}

/* An allocator under test: the range allocator (either index) or the
 * approximate-fit peer design, behind the same three calls. The timed loop is
 * always inlined with a constant target, so the calls are direct. */
typedef struct churn_target {
  void *obj;
  grt_status (*alloc)(void *obj, uint64_t size, uint64_t *offset, uint32_t *handle);
  grt_status (*free)(void *obj, uint32_t handle);
  uint64_t (*largest)(const void *obj);
} churn_target;

static grt_status range_alloc_fn(void *o, uint64_t size, uint64_t *off, uint32_t *h) {
  return grt__range_alloc_handle(o, size, off, h);
}
static grt_status range_free_fn(void *o, uint32_t h) { return grt__range_free_handle(o, h); }
static uint64_t range_largest_fn(const void *o) { return grt__range_largest_free(o); }
static grt_status approx_alloc_fn(void *o, uint64_t size, uint64_t *off, uint32_t *h) {
  return grt__approx_alloc(o, size, off, h);
}
static grt_status approx_free_fn(void *o, uint32_t h) { return grt__approx_free(o, h); }
static uint64_t approx_largest_fn(const void *o) { return grt__approx_largest_free(o); }

#if defined(__GNUC__)
#define CHURN_INLINE inline __attribute__((always_inline))
#else
#define CHURN_INLINE inline
#endif

/* Fills the slots (untimed) and times the iterations on t. *elapsed in ns. */
static CHURN_INLINE grt_status churn_timed(const churn_target *t, const grt__churn_config *c, const op_stream *s,
                                           uint64_t *live, uint32_t *handle, grt__churn_result *res,
                                           double *elapsed) {
  *res = (grt__churn_result){0};
  for (uint32_t i = 0; i < c->slots; i++) {
    grt_status st = t->alloc(t->obj, s->fill_size[i], &live[i], &handle[i]);
    if (st == GRT_ERR_OOM) {
      live[i] = EMPTY_SLOT;
      res->fill_failures++;
    } else if (st) {
      return st;
    }
  }
  uint64_t ck = 0, failures = 0;
  double t0 = now_ns();
  for (uint32_t i = 0; i < c->iterations; i++) {
    uint32_t k = s->slot[i];
    if (live[k] != EMPTY_SLOT && t->free(t->obj, handle[k]) != GRT_OK) return GRT_ERR_INTERNAL;
    grt_status st = t->alloc(t->obj, s->size[i], &live[k], &handle[k]);
    if (st == GRT_OK) {
      ck = mix(ck, live[k]);
    } else if (st == GRT_ERR_OOM) {
      live[k] = EMPTY_SLOT;
      failures++;
      /* Untimed in spirit but cheap (index maximum); counts policy losses. */
      if (t->largest(t->obj) >= s->size[i]) res->failures_with_hole++;
    } else {
      return st;
    }
  }
  *elapsed = now_ns() - t0;
  res->failures = failures;
  res->checksum = ck;
  return GRT_OK;
}

/* One timed run on a fresh range of the given index kind. */
static grt_status run_range(const grt__churn_config *c, grt__index_kind kind, const op_stream *s,
                            uint64_t *live, uint32_t *handle, grt__churn_result *res, double *elapsed) {
  grt__range *r;
  grt_status st = grt__range_create(c->capacity, kind, &r);
  if (st) return st;
  const churn_target t = {r, range_alloc_fn, range_free_fn, range_largest_fn};
  st = churn_timed(&t, c, s, live, handle, res, elapsed);
  grt__range_destroy(r);
  return st;
}

/* Node budget of the approximate design: its peer's default (maxAllocs). */
#define APPROX_NODES (128u * 1024u)

/* One timed run on a fresh approximate-fit range (granule = the config's). */
static grt_status run_approx(const grt__churn_config *c, const op_stream *s, uint64_t *live, uint32_t *handle,
                             grt__churn_result *res, double *elapsed) {
  grt__approx *a;
  grt_status st = grt__approx_create(c->capacity, c->granule, APPROX_NODES, &a);
  if (st) return st;
  const churn_target t = {a, approx_alloc_fn, approx_free_fn, approx_largest_fn};
  st = churn_timed(&t, c, s, live, handle, res, elapsed);
  grt__approx_destroy(a);
  return st;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static bool config_ok(const grt__churn_config *c) {
  return c->capacity && c->slots && c->iterations && c->runs && c->min_size &&
         c->min_size <= c->max_size && c->granule && !(c->granule & (c->granule - 1)) &&
         c->max_size <= UINT64_MAX - c->granule;
}

/* One timed run of allocator `alloc` on stream s; *elapsed in ns. */
static grt_status run_once(const grt__churn_config *c, grt__workload_allocator alloc, const op_stream *s,
                           uint64_t *live, uint32_t *handle, grt__churn_result *res, double *elapsed) {
  if (alloc == GRT__WALLOC_HARNESS) {
    *res = (grt__churn_result){0};
    *elapsed = run_harness(c, s, live, res);
    return GRT_OK;
  }
  if (alloc == GRT__WALLOC_APPROX) return run_approx(c, s, live, handle, res, elapsed);
  return run_range(c, (grt__index_kind)alloc, s, live, handle, res, elapsed);
}

static void summarize(double *ns, uint32_t runs, grt__churn_result *out) {
  qsort(ns, runs, sizeof *ns, cmp_double);
  out->ns_min = ns[0];
  out->ns_per_pair = runs % 2 ? ns[runs / 2] : (ns[runs / 2 - 1] + ns[runs / 2]) / 2;
}

/* One timed run of subject k (ctx is the caller's); *elapsed in ns. */
typedef grt_status (*timed_run_fn)(void *ctx, size_t k, grt__churn_result *res, double *elapsed);

/* Runs n subjects `runs` times, interleaved (run 1 of each, then run 2 of
 * each, ...), so a drift of the machine's speed hits them alike. out[k] is
 * subject k's first result, with ns_per_pair / ns_min the median / min of
 * its runs per iteration; a run whose failures or checksum differ from its
 * first (the same ops, other choices: a bug) gives GRT_ERR_INTERNAL. */
static grt_status run_interleaved(uint32_t runs, size_t n, uint32_t iterations, timed_run_fn fn, void *ctx,
                                  grt__churn_result *out) {
  double *ns = malloc((size_t)runs * n * sizeof *ns); /* [k * runs + run] */
  if (!ns) return GRT_ERR_NOMEM;
  grt_status st = GRT_OK;
  for (uint32_t run = 0; run < runs && !st; run++)
    for (size_t k = 0; k < n && !st; k++) {
      grt__churn_result res;
      double elapsed = 0;
      if ((st = fn(ctx, k, &res, &elapsed))) break;
      if (run == 0) out[k] = res;
      if (res.failures != out[k].failures || res.checksum != out[k].checksum) st = GRT_ERR_INTERNAL;
      ns[k * runs + run] = elapsed / iterations;
    }
  if (!st)
    for (size_t k = 0; k < n; k++) summarize(ns + k * runs, runs, &out[k]);
  free(ns);
  return st;
}

typedef struct churn_ctx {
  const grt__churn_config *c;
  const grt__workload_allocator *allocs;
  const op_stream *s;
  uint64_t *live;
  uint32_t *handle;
} churn_ctx;

static grt_status churn_once(void *ctx, size_t k, grt__churn_result *res, double *elapsed) {
  const churn_ctx *x = ctx;
  return run_once(x->c, x->allocs[k], x->s, x->live, x->handle, res, elapsed);
}

grt_status grt__churn_run_interleaved(const grt__churn_config *c, const grt__workload_allocator *allocs, size_t n,
                                      grt__churn_result *out) {
  if (!c || !allocs || !out || !n || !config_ok(c)) return GRT_ERR_INVALID_ARG;
  for (size_t k = 0; k < n; k++)
    if ((unsigned)allocs[k] >= GRT__WALLOC_COUNT) return GRT_ERR_INVALID_ARG;
  op_stream s;
  grt_status st = stream_draw(c, &s);
  if (st) return st;
  uint64_t *live = malloc(c->slots * sizeof *live);
  uint32_t *handle = malloc(c->slots * sizeof *handle);
  churn_ctx x = {c, allocs, &s, live, handle};
  st = live && handle ? run_interleaved(c->runs, n, c->iterations, churn_once, &x, out) : GRT_ERR_NOMEM;
  free(handle);
  free(live);
  stream_free(&s);
  return st;
}

grt_status grt__churn_run(const grt__churn_config *c, grt__workload_allocator alloc, grt__churn_result *out) {
  return grt__churn_run_interleaved(c, &alloc, 1, out);
}

void grt__w1_config(grt__churn_config *c, uint64_t seed, uint32_t runs) {
  *c = (grt__churn_config){.capacity = 8 * GRT_GiB,
                           .slots = 1000,
                           .iterations = 1000000,
                           .min_size = 512,
                           .max_size = 64 * GRT_MiB,
                           .granule = 256,
                           .seed = seed,
                           .runs = runs};
}

void grt__w2_config(grt__churn_config *c, uint64_t seed, uint32_t runs) {
  grt__w1_config(c, seed, runs);
  c->slots = 1200;
}

grt_status grt__w1_run(grt__workload_allocator alloc, uint64_t seed, uint32_t runs, grt__churn_result *out) {
  grt__churn_config c;
  grt__w1_config(&c, seed, runs);
  return grt__churn_run(&c, alloc, out);
}

grt_status grt__w2_run(grt__workload_allocator alloc, uint64_t seed, uint32_t runs, grt__churn_result *out) {
  grt__churn_config c;
  grt__w2_config(&c, seed, runs);
  return grt__churn_run(&c, alloc, out);
}

typedef struct long_class_ctx {
  const grt__index_kind *kinds;
  uint32_t n, iterations;
  const uint32_t *pick; /* [iterations]: the taken unit each iteration frees */
  uint32_t *handle;     /* [n] */
} long_class_ctx;

/* One timed run of the long-class workload on a fresh range (see workloads.h). */
static grt_status long_class_once(void *ctx, size_t k, grt__churn_result *res, double *elapsed) {
  const long_class_ctx *x = ctx;
  uint32_t n = x->n, iterations = x->iterations, *handle = x->handle;
  const uint32_t *pick = x->pick;
  grt__range *r;
  uint64_t off, ck = 0;
  grt_status st = grt__range_create((uint64_t)n * (GRT__LONG_UNIT + GRT__LONG_SPACER), x->kinds[k], &r);
  if (st) return st;
  for (uint32_t i = 0; i < n && !st; i++) { /* unit, spacer, unit, spacer, ... then every unit freed */
    uint32_t spacer;
    st = grt__range_alloc_handle(r, GRT__LONG_UNIT, &off, &handle[i]);
    if (!st) st = grt__range_alloc_handle(r, GRT__LONG_SPACER, &off, &spacer);
  }
  for (uint32_t i = 0; i < n && !st; i++) st = grt__range_free_handle(r, handle[i]);
  for (uint32_t i = 0; i < n / 2 && !st; i++) st = grt__range_alloc_handle(r, GRT__LONG_UNIT, &off, &handle[i]);
  double t0 = now_ns();
  for (uint32_t i = 0; i < iterations && !st; i++) {
    uint32_t slot = pick[i];
    st = grt__range_free_handle(r, handle[slot]);
    if (!st) st = grt__range_alloc_handle(r, GRT__LONG_UNIT, &off, &handle[slot]);
    ck = mix(ck, off);
  }
  *elapsed = now_ns() - t0;
  grt__range_destroy(r);
  *res = (grt__churn_result){.checksum = ck};
  return st == GRT_ERR_OOM ? GRT_ERR_INTERNAL : st; /* half the units are always free */
}

grt_status grt__long_class_run(const grt__index_kind *kinds, size_t n_kinds, uint32_t n, uint32_t iterations,
                               uint32_t runs, grt__churn_result *out) {
  if (!kinds || !n_kinds || !out || n < 2 || !iterations || !runs) return GRT_ERR_INVALID_ARG;
  uint32_t *pick = malloc((size_t)iterations * sizeof *pick), *handle = malloc((size_t)n * sizeof *handle);
  grt_status st = GRT_ERR_NOMEM;
  if (pick && handle) {
    grt__rng g;
    grt__rng_seed(&g, 42);
    for (uint32_t i = 0; i < iterations; i++) pick[i] = (uint32_t)grt__rng_below(&g, n / 2);
    long_class_ctx x = {kinds, n, iterations, pick, handle};
    st = run_interleaved(runs, n_kinds, iterations, long_class_once, &x, out);
  }
  for (size_t k = 1; k < n_kinds && !st; k++) /* every kind is exact best fit: the same choices */
    if (out[k].checksum != out[0].checksum) st = GRT_ERR_INTERNAL;
  free(handle);
  free(pick);
  return st;
}

/* Checks the ops (ids in range, alive when freed, dead when allocated) and
 * returns their peak live bytes in *peak. */
static grt_status lifetime_peak(const grt__lifetime_op *ops, size_t n, uint32_t n_ids, uint64_t *peak) {
  uint64_t *size = calloc(n_ids ? n_ids : 1, sizeof *size), live = 0;
  if (!size) return GRT_ERR_NOMEM;
  grt_status st = GRT_OK;
  *peak = 0;
  for (size_t i = 0; i < n && !st; i++) {
    const grt__lifetime_op *o = &ops[i];
    if (o->id >= n_ids || (o->is_free ? !size[o->id] : size[o->id] || !o->size)) {
      st = GRT_ERR_INVALID_ARG;
    } else if (o->is_free) {
      live -= size[o->id];
      size[o->id] = 0;
    } else {
      size[o->id] = o->size;
      live += o->size;
      if (live > *peak) *peak = live;
    }
  }
  free(size);
  return st;
}

/* Replays the ops on a fresh allocator of `capacity` bytes: *ok when no
 * allocation failed. handle[] has n_ids entries. */
static grt_status lifetime_fits(grt__workload_allocator alloc, const grt__lifetime_op *ops, size_t n,
                                uint64_t capacity, uint32_t *handle, bool *ok) {
  grt__range *r = NULL;
  grt__approx *a = NULL;
  grt_status st = alloc == GRT__WALLOC_APPROX ? grt__approx_create(capacity, 1, APPROX_NODES, &a)
                                              : grt__range_create(capacity, (grt__index_kind)alloc, &r);
  const churn_target t = a ? (churn_target){a, approx_alloc_fn, approx_free_fn, approx_largest_fn}
                           : (churn_target){r, range_alloc_fn, range_free_fn, range_largest_fn};
  *ok = true;
  for (size_t i = 0; i < n && !st && *ok; i++) {
    const grt__lifetime_op *o = &ops[i];
    uint64_t off;
    st = o->is_free ? t.free(t.obj, handle[o->id]) : t.alloc(t.obj, o->size, &off, &handle[o->id]);
    if (st == GRT_ERR_OOM || st == GRT_ERR_SIZE) {
      *ok = false;
      st = GRT_OK;
    }
  }
  grt__approx_destroy(a);
  grt__range_destroy(r);
  return st;
}

grt_status grt__w3_heap_needed(grt__workload_allocator alloc, const grt__lifetime_op *ops, size_t n, uint32_t n_ids,
                               uint64_t *heap, uint64_t *peak_live) {
  if (!ops || !n || !heap || !peak_live || (alloc != GRT__WALLOC_BINS && alloc != GRT__WALLOC_OTREE &&
                                            alloc != GRT__WALLOC_APPROX))
    return GRT_ERR_INVALID_ARG;
  grt_status st = lifetime_peak(ops, n, n_ids, peak_live);
  if (st || !*peak_live) return st ? st : GRT_ERR_INVALID_ARG;
  /* approx counts 1-byte granules in 32 bits; the range allocators go to 1 TiB. */
  const uint64_t limit = alloc == GRT__WALLOC_APPROX ? UINT32_MAX - 1 : (uint64_t)1 << 40;
  if (*peak_live > limit) return GRT_ERR_OOM;
  uint32_t *handle = malloc((size_t)n_ids * sizeof *handle);
  if (!handle) return GRT_ERR_NOMEM;
  /* lo never fits (or is below the peak), hi fits. */
  uint64_t lo = *peak_live - 1, hi = *peak_live;
  bool ok = false;
  while (!(st = lifetime_fits(alloc, ops, n, hi, handle, &ok)) && !ok) {
    if (hi > limit / 2) {
      st = GRT_ERR_OOM; /* no capacity up to the limit */
      break;
    }
    lo = hi;
    hi *= 2;
  }
  while (!st && hi - lo > 1) {
    uint64_t mid = lo + (hi - lo) / 2;
    if (!(st = lifetime_fits(alloc, ops, n, mid, handle, &ok))) *(ok ? &hi : &lo) = mid;
  }
  free(handle);
  if (!st) *heap = hi;
  return st;
}

const char *grt__workload_allocator_name(grt__workload_allocator alloc) {
  switch (alloc) {
    case GRT__WALLOC_BINS: return "bins";
    case GRT__WALLOC_OTREE: return "otree";
    case GRT__WALLOC_APPROX: return "approx";
    case GRT__WALLOC_HARNESS: return "harness";
    default: return NULL;
  }
}

grt_status grt__churn_draw(const grt__churn_config *c, grt__churn_ops *out) {
  if (!c || !out || !config_ok(c)) return GRT_ERR_INVALID_ARG;
  op_stream s;
  grt_status st = stream_draw(c, &s);
  if (st) return st;
  *out = (grt__churn_ops){s.fill_size, s.slot, s.size};
  return GRT_OK;
}

void grt__churn_ops_free(grt__churn_ops *ops) {
  if (!ops) return;
  op_stream s = {ops->fill_size, ops->slot, ops->size};
  stream_free(&s);
  *ops = (grt__churn_ops){0};
}
