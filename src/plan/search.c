/* search.c — grt_plan_solve: seed orders, skyline plans, then a local
 * search over placement orders, each order turned into a plan by greedy
 * placement (place.c).
 *
 * 1. Seed orders: the buffers sorted by size, by area (size x lifetime), by
 *    lifetime, by start, each placed; the best is the current plan.
 * 2. Half the effort (up to GRT__PLAN_SKYLINE_MAX buffers): skyline plans
 *    (skyline.c), three fixed scores then random ones; a better one is
 *    adopted as the order of its offsets.
 * 3. The other half: iterated local search. A move changes the current
 *    order (most often it takes a buffer that reaches the heap's top and
 *    places it earlier, since only those make the heap; else it moves or
 *    swaps random buffers), the tail from the first changed position is
 *    re-placed, and the result replaces the current plan when its heap is
 *    no larger (equal heaps are accepted so the search walks across
 *    plateaus). A pass stops as soon as its heap passes the current one.
 *    After a run of moves without a new best the search returns to the
 *    best plan.
 * Every stage stops early when the heap equals the peak live bytes. All
 * random choices come from a xoshiro256** seeded by cfg->seed, so a plan is
 * a pure function of its input unless budget_ms stops the search. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/rng.h"
#include "plan/plan_impl.h"

#define DEFAULT_EFFORT 4000
/* Moves without a new best before the search returns to the best plan. */
#define RESTART_AFTER 2000
/* The clock is read once per this many moves. */
#define CLOCK_EVERY 32

void grt_plan_config_default(grt_plan_config *cfg) {
  if (!cfg) return;
  memset(cfg, 0, sizeof *cfg);
  cfg->effort = DEFAULT_EFFORT;
  cfg->seed = 1;
}

typedef struct search {
  const grt_plan_buffer *bufs;
  size_t n;
  const grt__plan_graph *g;
  grt__plan_state cur, cand, best;
  uint64_t cur_heap, best_heap, lower_bound, orders;
  grt__plan_span *scratch;
  grt__rng rng;
  double deadline; /* CLOCK_MONOTONIC seconds; 0: none */
  bool budget_hit;
} search;

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static bool state_alloc(grt__plan_state *s, size_t n) {
  s->order = malloc((n ? n : 1) * sizeof *s->order);
  s->pos = malloc((n ? n : 1) * sizeof *s->pos);
  s->off = malloc((n ? n : 1) * sizeof *s->off);
  s->prefix = calloc(n + 1, sizeof *s->prefix);
  return s->order && s->pos && s->off && s->prefix;
}

static void state_free(grt__plan_state *s) {
  free(s->order);
  free(s->pos);
  free(s->off);
  free(s->prefix);
}

static void state_copy(grt__plan_state *to, const grt__plan_state *from, size_t n) {
  memcpy(to->order, from->order, n * sizeof *to->order);
  memcpy(to->pos, from->pos, n * sizeof *to->pos);
  memcpy(to->off, from->off, n * sizeof *to->off);
  memcpy(to->prefix, from->prefix, (n + 1) * sizeof *to->prefix);
}

static void state_swap(grt__plan_state *a, grt__plan_state *b) {
  grt__plan_state t = *a;
  *a = *b;
  *b = t;
}

/* ---- seed orders ---- */

typedef enum seed_key { BY_SIZE, BY_AREA, BY_LIFETIME, BY_START, N_SEED_KEYS } seed_key;

typedef struct keyed {
  uint64_t k1, k2;
  uint32_t index;
} keyed;

static int cmp_keyed(const void *x, const void *y) {
  const keyed *a = x, *b = y;
  if (a->k1 != b->k1) return a->k1 > b->k1 ? -1 : 1; /* descending */
  if (a->k2 != b->k2) return a->k2 > b->k2 ? -1 : 1;
  return a->index < b->index ? -1 : a->index > b->index;
}

/* Area in units that cannot overflow: size x lifetime, both scaled into 32 bits. */
static uint64_t area_key(const grt_plan_buffer *b) {
  double a = (double)b->size * (double)(b->upper - b->lower);
  return a >= 1.8e19 ? UINT64_MAX : (uint64_t)a;
}

static void seed_order(const search *s, seed_key key, keyed *tmp, grt__plan_state *st) {
  for (size_t i = 0; i < s->n; i++) {
    const grt_plan_buffer *b = &s->bufs[i];
    uint64_t life = b->upper - b->lower;
    keyed k = {b->size, life, (uint32_t)i};
    if (key == BY_AREA) k = (keyed){area_key(b), b->size, (uint32_t)i};
    if (key == BY_LIFETIME) k = (keyed){life, b->size, (uint32_t)i};
    if (key == BY_START) k = (keyed){UINT64_MAX - b->lower, b->size, (uint32_t)i};
    tmp[i] = k;
  }
  qsort(tmp, s->n, sizeof *tmp, cmp_keyed);
  for (size_t k = 0; k < s->n; k++) {
    st->order[k] = tmp[k].index;
    st->pos[tmp[k].index] = (uint32_t)k;
  }
  st->prefix[0] = 0;
}

static void run_seeds(search *s, keyed *tmp) {
  s->cur_heap = UINT64_MAX;
  for (int key = 0; key < N_SEED_KEYS; key++) {
    seed_order(s, (seed_key)key, tmp, &s->cand);
    uint64_t h = grt__plan_place(s->bufs, s->g, &s->cand, 0, UINT64_MAX, s->scratch);
    s->orders++;
    if (h < s->cur_heap) {
      s->cur_heap = h;
      state_swap(&s->cur, &s->cand);
    }
  }
  state_copy(&s->best, &s->cur, s->n);
  s->best_heap = s->cur_heap;
}

/* ---- moves ---- */

/* Moves the buffer at position from to position to, shifting those between. */
static void move_to(grt__plan_state *st, size_t from, size_t to) {
  uint32_t b = st->order[from];
  if (to < from) {
    memmove(st->order + to + 1, st->order + to, (from - to) * sizeof *st->order);
    for (size_t k = to + 1; k <= from; k++) st->pos[st->order[k]] = (uint32_t)k;
  } else {
    memmove(st->order + from, st->order + from + 1, (to - from) * sizeof *st->order);
    for (size_t k = from; k < to; k++) st->pos[st->order[k]] = (uint32_t)k;
  }
  st->order[to] = b;
  st->pos[b] = (uint32_t)to;
}

/* A position whose buffer reaches the heap's top, chosen at random among them. */
static size_t critical_position(search *s, const grt__plan_state *st, uint64_t heap) {
  size_t pick = 0, seen = 0;
  for (size_t i = 0; i < s->n; i++) {
    if (st->off[i] + s->bufs[i].size != heap) continue;
    if (grt__rng_below(&s->rng, ++seen) == 0) pick = st->pos[i];
  }
  return pick;
}

/* Changes s->cand's order; returns the first position whose placement may change. */
static size_t make_move(search *s) {
  size_t n = s->n;
  uint64_t r = grt__rng_below(&s->rng, 10);
  if (r < 6) {
    size_t p = critical_position(s, &s->cand, s->cur_heap);
    if (p > 0) {
      size_t q = (size_t)grt__rng_below(&s->rng, p);
      move_to(&s->cand, p, q);
      return q;
    }
  }
  size_t i = (size_t)grt__rng_below(&s->rng, n), j = (size_t)grt__rng_below(&s->rng, n);
  if (r == 9) {
    uint32_t a = s->cand.order[i], b = s->cand.order[j];
    s->cand.order[i] = b, s->cand.order[j] = a;
    s->cand.pos[a] = (uint32_t)j, s->cand.pos[b] = (uint32_t)i;
  } else {
    move_to(&s->cand, i, j);
  }
  return i < j ? i : j;
}

static void one_move(search *s) {
  state_copy(&s->cand, &s->cur, s->n);
  size_t from = make_move(s);
  uint64_t h = grt__plan_place(s->bufs, s->g, &s->cand, from, s->cur_heap, s->scratch);
  s->orders++;
  if (h == UINT64_MAX) return;
  state_swap(&s->cur, &s->cand);
  s->cur_heap = h;
  if (h < s->best_heap) {
    s->best_heap = h;
    state_copy(&s->best, &s->cur, s->n);
  }
}

static bool out_of_time(search *s, uint64_t it) {
  if (!s->deadline || it % CLOCK_EVERY) return false;
  if (now() < s->deadline) return false;
  s->budget_hit = true;
  return true;
}

static void run_moves(search *s, uint64_t effort) {
  uint64_t since_best = 0, best_seen = s->best_heap;
  for (uint64_t it = 0; it < effort && s->best_heap > s->lower_bound && s->n > 1; it++) {
    if (out_of_time(s, it)) break;
    one_move(s);
    if (s->best_heap < best_seen) best_seen = s->best_heap, since_best = 0;
    if (++since_best < RESTART_AFTER) continue;
    state_copy(&s->cur, &s->best, s->n);
    s->cur_heap = s->best_heap;
    since_best = 0;
  }
}

/* ---- skyline plans ---- */

typedef struct by_offset {
  uint64_t off;
  uint32_t index;
} by_offset;

static int cmp_by_offset(const void *x, const void *y) {
  const by_offset *a = x, *b = y;
  if (a->off != b->off) return a->off < b->off ? -1 : 1;
  return a->index < b->index ? -1 : a->index > b->index;
}

/* Takes a skyline plan as the current order: its buffers by offset. Greedy
 * placement in that order puts each buffer at or below its skyline offset
 * (nothing placed before it can be in the way there), so the heap can only
 * shrink. */
static void adopt(search *s, const uint64_t *off, by_offset *tmp) {
  for (size_t i = 0; i < s->n; i++) tmp[i] = (by_offset){off[i], (uint32_t)i};
  qsort(tmp, s->n, sizeof *tmp, cmp_by_offset);
  for (size_t k = 0; k < s->n; k++) {
    s->cand.order[k] = tmp[k].index;
    s->cand.pos[tmp[k].index] = (uint32_t)k;
  }
  uint64_t h = grt__plan_place(s->bufs, s->g, &s->cand, 0, UINT64_MAX, s->scratch);
  s->orders++;
  if (h >= s->best_heap) return;
  state_swap(&s->cur, &s->cand);
  s->cur_heap = s->best_heap = h;
  state_copy(&s->best, &s->cur, s->n);
}

static void next_rule(search *s, uint64_t i, grt__plan_sky_rule *r) {
  static const grt__plan_sky_rule fixed[] = {{1, 0.01, 10, 0, 1}, {0.01, 1, 10, 0, 1}, {1, 1, 10, 0, 1}};
  if (i < sizeof fixed / sizeof fixed[0]) {
    *r = fixed[i];
  } else {
    r->width = grt__rng_unit(&s->rng);
    r->size = grt__rng_unit(&s->rng);
    r->exact = 2 * grt__rng_unit(&s->rng);
    r->noise = 0.5 * grt__rng_unit(&s->rng);
  }
}

static void sample_skylines(search *s, grt__plan_sky *k, uint64_t tries, uint64_t *off, by_offset *tmp) {
  uint64_t max_size = 1;
  for (size_t i = 0; i < s->n; i++)
    if (s->bufs[i].size > max_size) max_size = s->bufs[i].size;
  for (uint64_t i = 0; i < tries && s->best_heap > s->lower_bound; i++) {
    if (out_of_time(s, i)) break;
    grt__plan_sky_rule r;
    next_rule(s, i, &r);
    r.max_size = (double)max_size;
    uint64_t h = grt__plan_skyline(s->bufs, s->n, k, &r, &s->rng, s->best_heap - 1, off);
    s->orders++;
    if (h != UINT64_MAX) adopt(s, off, tmp);
  }
}

static grt_status run_skyline(search *s, uint64_t tries) {
  grt__plan_sky k;
  memset(&k, 0, sizeof k);
  uint64_t *off = malloc((s->n ? s->n : 1) * sizeof *off);
  by_offset *tmp = malloc((s->n ? s->n : 1) * sizeof *tmp);
  grt_status st = off && tmp ? grt__plan_sky_init(s->bufs, s->n, &k) : GRT_ERR_NOMEM;
  if (!st) sample_skylines(s, &k, tries, off, tmp);
  grt__plan_sky_free(&k);
  free(off);
  free(tmp);
  return st;
}

/* ---- the entry point ---- */

static grt_status solve(search *s, const grt_plan_config *cfg, char *err, size_t err_size) {
  grt_status st = GRT_ERR_NOMEM;
  keyed *tmp = malloc((s->n ? s->n : 1) * sizeof *tmp);
  s->scratch = malloc((s->g->max_degree ? s->g->max_degree : 1) * sizeof *s->scratch);
  bool ok = state_alloc(&s->cur, s->n) && state_alloc(&s->cand, s->n) && state_alloc(&s->best, s->n);
  if (tmp && s->scratch && ok) {
    grt__rng_seed(&s->rng, cfg->seed);
    s->deadline = cfg->budget_ms ? now() + (double)cfg->budget_ms / 1e3 : 0;
    run_seeds(s, tmp);
    st = s->n <= GRT__PLAN_SKYLINE_MAX ? run_skyline(s, cfg->effort / 2) : GRT_OK;
    if (!st) run_moves(s, cfg->effort - cfg->effort / 2);
  }
  if (st && err && err_size) snprintf(err, err_size, "no host memory to plan %zu buffers", s->n);
  free(tmp);
  return st;
}

static void search_free(search *s) {
  state_free(&s->cur);
  state_free(&s->cand);
  state_free(&s->best);
  free(s->scratch);
}

grt_status grt_plan_solve(const grt_plan_buffer *bufs, size_t n, const grt_plan_config *cfg, uint64_t *offsets,
                          grt_plan_result *out, char *err, size_t err_size) {
  if (err && err_size) err[0] = '\0';
  if ((n && !offsets) || !out) {
    if (err && err_size) snprintf(err, err_size, "%s is NULL", out ? "offsets" : "out");
    return GRT_ERR_INVALID_ARG;
  }
  grt_plan_config defaults;
  grt_plan_config_default(&defaults);
  if (!cfg) cfg = &defaults;
  grt__plan_step *ev = NULL;
  grt_status st = grt__plan_validated_steps(bufs, n, &ev, err, err_size);
  if (st) return st;
  search s = {.bufs = bufs, .n = n, .lower_bound = grt__plan_peak(bufs, ev, n, NULL)};
  grt__plan_graph g;
  st = grt__plan_graph_build(n, ev, &g, err, err_size);
  free(ev);
  if (st) return st;
  s.g = &g;
  st = solve(&s, cfg, err, err_size);
  if (!st) {
    if (n) memcpy(offsets, s.best.off, n * sizeof *offsets);
    *out = (grt_plan_result){s.best_heap, s.lower_bound, s.orders, s.best_heap == s.lower_bound, s.budget_hit};
  }
  search_free(&s);
  grt__plan_graph_free(&g);
  return st;
}
