/* skyline.c — a plan built bottom-up, the lowest point of the skyline first.
 *
 * Time is cut into sections at every lifetime end; each section has a floor
 * (the top of what is placed over it, nothing is ever placed below it).
 * Each step takes the lowest run of sections (the valley: contiguous, all
 * at the minimum floor) and places there one unplaced buffer whose
 * lifetime lies inside the valley, chosen by a score: how much of the
 * valley's width it fills (a buffer filling it exactly first), its size,
 * and seeded noise. When no buffer fits inside, the valley rises to its
 * lower neighbour: every buffer still to come over those sections also
 * spans a higher neighbour, so it can never sit lower, and raising loses
 * nothing. Every plan in which each buffer rests on another or on 0 (some
 * optimal plan always does) is one sequence of these choices; random
 * scores sample them, as the best-fit heuristic for strip packing does.
 *
 * Cost: O(S) to find a valley, S sections (<= 2n), and the candidates'
 * scan over the buffers starting inside it: O(n S) per plan at worst, so
 * the search uses it only up to GRT__PLAN_SKYLINE_MAX buffers. */
#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "plan/plan_impl.h"

static int cmp_u64(const void *x, const void *y) {
  uint64_t a = *(const uint64_t *)x, b = *(const uint64_t *)y;
  return a < b ? -1 : a > b;
}

/* The index of step v among the sorted distinct steps t[0..m). */
static uint32_t section_of(const uint64_t *t, size_t m, uint64_t v) {
  size_t lo = 0, hi = m;
  while (hi - lo > 1) {
    size_t mid = (lo + hi) / 2;
    if (t[mid] <= v)
      lo = mid;
    else
      hi = mid;
  }
  return (uint32_t)lo;
}

grt_status grt__plan_sky_init(const grt_plan_buffer *bufs, size_t n, grt__plan_sky *k) {
  memset(k, 0, sizeof *k);
  uint64_t *t = malloc((n ? 2 * n : 1) * sizeof *t);
  k->sl = malloc((n ? n : 1) * sizeof *k->sl);
  k->su = malloc((n ? n : 1) * sizeof *k->su);
  k->by_start = malloc((n ? n : 1) * sizeof *k->by_start);
  k->first = calloc(2 * n + 2, sizeof *k->first);
  k->floor = malloc((2 * n + 1) * sizeof *k->floor);
  k->left = malloc((2 * n + 2) * sizeof *k->left);
  k->where = malloc((n ? n : 1) * sizeof *k->where);
  if (!t || !k->sl || !k->su || !k->by_start || !k->first || !k->floor || !k->left || !k->where) {
    free(t);
    grt__plan_sky_free(k);
    return GRT_ERR_NOMEM;
  }
  for (size_t i = 0; i < n; i++) t[2 * i] = bufs[i].lower, t[2 * i + 1] = bufs[i].upper;
  qsort(t, 2 * n, sizeof *t, cmp_u64);
  size_t m = 0;
  for (size_t i = 0; i < 2 * n; i++)
    if (!m || t[m - 1] != t[i]) t[m++] = t[i];
  k->n_sections = m ? m - 1 : 0;
  k->steps = t;
  for (size_t i = 0; i < n; i++) {
    k->sl[i] = section_of(t, m, bufs[i].lower);
    k->su[i] = section_of(t, m, bufs[i].upper);
    k->first[k->sl[i] + 1]++;
  }
  for (size_t s = 0; s < k->n_sections; s++) k->first[s + 1] += k->first[s];
  for (size_t s = 0; s <= k->n_sections; s++) k->left[s] = k->first[s];
  for (size_t i = 0; i < n; i++) k->by_start[k->left[k->sl[i]]++] = (uint32_t)i;
  return GRT_OK;
}

void grt__plan_sky_free(grt__plan_sky *k) {
  free(k->steps);
  free(k->sl);
  free(k->su);
  free(k->by_start);
  free(k->first);
  free(k->floor);
  free(k->left);
  free(k->where);
  memset(k, 0, sizeof *k);
}

/* Unplaced buffers starting at section s are by_start[first[s]..left[s]). */
static void take(grt__plan_sky *k, uint32_t b) {
  uint32_t s = k->sl[b], slot = k->where[b], last = k->by_start[--k->left[s]];
  k->by_start[slot] = last;
  k->where[last] = slot;
  k->by_start[k->left[s]] = b;
  k->where[b] = k->left[s];
}

static void reset(grt__plan_sky *k) {
  for (size_t s = 0; s < k->n_sections; s++) k->floor[s] = 0;
  for (size_t s = 0; s < k->n_sections; s++) {
    k->left[s] = k->first[s + 1];
    for (uint32_t j = k->first[s]; j < k->first[s + 1]; j++) k->where[k->by_start[j]] = j;
  }
}

/* The lowest valley [*vl, *vr). */
static void valley(const grt__plan_sky *k, size_t *vl, size_t *vr) {
  size_t best = 0;
  for (size_t s = 1; s < k->n_sections; s++)
    if (k->floor[s] < k->floor[best]) best = s;
  size_t l = best, r = best + 1;
  while (l > 0 && k->floor[l - 1] == k->floor[best]) l--;
  while (r < k->n_sections && k->floor[r] == k->floor[best]) r++;
  *vl = l, *vr = r;
}

static uint64_t align_up(uint64_t x, uint64_t a) { return (x + a - 1) & ~(a - 1); }

/* The best-scoring buffer inside [vl, vr), or UINT32_MAX. */
static uint32_t pick(const grt_plan_buffer *bufs, const grt__plan_sky *k, size_t vl, size_t vr,
                     const grt__plan_sky_rule *rule, grt__rng *rng) {
  double width = (double)(k->steps[vr] - k->steps[vl]), best_score = -1;
  uint32_t best = UINT32_MAX;
  for (size_t s = vl; s < vr; s++)
    for (uint32_t j = k->first[s]; j < k->left[s]; j++) {
      uint32_t b = k->by_start[j];
      if (k->su[b] > vr) continue;
      double w = (double)(bufs[b].upper - bufs[b].lower) / width;
      double score = rule->width * w + rule->size * (double)bufs[b].size / rule->max_size +
          (k->sl[b] == vl && k->su[b] == vr ? rule->exact : 0) + rule->noise * grt__rng_unit(rng);
      if (score > best_score) best_score = score, best = b;
    }
  return best;
}

uint64_t grt__plan_skyline(const grt_plan_buffer *bufs, size_t n, grt__plan_sky *k, const grt__plan_sky_rule *rule,
                           grt__rng *rng, uint64_t limit, uint64_t *off) {
  reset(k);
  uint64_t heap = 0;
  for (size_t placed = 0; placed < n;) {
    size_t vl, vr;
    valley(k, &vl, &vr);
    uint32_t b = pick(bufs, k, vl, vr, rule, rng);
    if (b == UINT32_MAX) { /* nothing fits inside: rise to the lower neighbour */
      uint64_t up = vl > 0 ? k->floor[vl - 1] : UINT64_MAX;
      if (vr < k->n_sections && k->floor[vr] < up) up = k->floor[vr];
      assert(up != UINT64_MAX); /* a valley spanning all time holds every unplaced buffer */
      for (size_t s = vl; s < vr; s++) k->floor[s] = up;
      continue;
    }
    uint64_t x = align_up(k->floor[vl], grt__plan_align_of(&bufs[b])), top = x + bufs[b].size;
    if (top > limit) return UINT64_MAX;
    off[b] = x;
    for (size_t s = k->sl[b]; s < k->su[b]; s++) k->floor[s] = top;
    if (top > heap) heap = top;
    take(k, b);
    placed++;
  }
  return heap;
}
