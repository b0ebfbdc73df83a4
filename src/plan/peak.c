/* peak.c — the lifetime ends in step order and the peak live bytes: the
 * largest sum of sizes live at one step, which no heap can be below.
 * Lifetimes are half-open, so at a step the frees come before the allocs:
 * a buffer freed at step t and one allocated at t are never live together. */
#include <stdio.h>
#include <stdlib.h>

#include "plan/plan_impl.h"

static int cmp_step(const void *x, const void *y) {
  const grt__plan_step *a = x, *b = y;
  if (a->step != b->step) return a->step < b->step ? -1 : 1;
  if (a->is_alloc != b->is_alloc) return a->is_alloc < b->is_alloc ? -1 : 1;
  return a->index < b->index ? -1 : a->index > b->index;
}

grt_status grt__plan_steps(const grt_plan_buffer *bufs, size_t n, grt__plan_step **out) {
  grt__plan_step *ev = malloc((n ? 2 * n : 1) * sizeof *ev);
  if (!ev) return GRT_ERR_NOMEM;
  for (size_t i = 0; i < n; i++) {
    ev[2 * i] = (grt__plan_step){bufs[i].lower, (uint32_t)i, 1};
    ev[2 * i + 1] = (grt__plan_step){bufs[i].upper, (uint32_t)i, 0};
  }
  qsort(ev, 2 * n, sizeof *ev, cmp_step);
  *out = ev;
  return GRT_OK;
}

uint64_t grt__plan_peak(const grt_plan_buffer *bufs, const grt__plan_step *ev, size_t n, uint64_t *at) {
  uint64_t live = 0, peak = 0, peak_at = 0;
  for (size_t k = 0; k < 2 * n; k++) {
    const grt_plan_buffer *b = &bufs[ev[k].index];
    if (!ev[k].is_alloc) {
      live -= b->size;
      continue;
    }
    live += b->size; /* validation bounds the sum of sizes below 2^63 */
    if (live > peak) peak = live, peak_at = ev[k].step;
  }
  if (at) *at = peak_at;
  return peak;
}

grt_status grt_plan_peak_live(const grt_plan_buffer *bufs, size_t n, uint64_t *peak, uint64_t *step, char *err,
                              size_t err_size) {
  if (err && err_size) err[0] = '\0';
  if (!peak) {
    if (err && err_size) snprintf(err, err_size, "peak is NULL");
    return GRT_ERR_INVALID_ARG;
  }
  grt__plan_step *ev = NULL;
  grt_status st = grt__plan_validated_steps(bufs, n, &ev, err, err_size);
  if (st) return st;
  uint64_t at = 0;
  *peak = grt__plan_peak(bufs, ev, n, &at);
  if (step) *step = at;
  free(ev);
  return GRT_OK;
}

grt_status grt__plan_validated_steps(const grt_plan_buffer *bufs, size_t n, grt__plan_step **out, char *err,
                                     size_t err_size) {
  grt_status st = grt__plan_validate(bufs, n, err, err_size);
  if (st) return st;
  st = grt__plan_steps(bufs, n, out);
  if (st && err && err_size) snprintf(err, err_size, "no host memory to sort %zu buffers' steps", n);
  return st;
}
