/* place.c — one greedy placement pass: buffers in a given order, each at
 * the lowest offset (a multiple of its alignment) clear of every
 * already-placed buffer it overlaps in time. The lowest gap may be a hole
 * under other buffers, not only the top of the "skyline" over the buffer's
 * lifetime, so the order alone decides the plan: the search (search.c)
 * only has to find a good order. A pass can start mid-order (the offsets
 * before `from` are kept), which lets the search re-place only the tail
 * its move changed, and stops as soon as the heap passes a limit. */
#include <stdlib.h>

#include "plan/plan_impl.h"

static int cmp_span(const void *x, const void *y) {
  const grt__plan_span *a = x, *b = y;
  return a->lo < b->lo ? -1 : a->lo > b->lo;
}

/* Insertion sort below this many spans: most buffers have few placed conflicts. */
#define SMALL_SORT 24

static void sort_spans(grt__plan_span *s, size_t m) {
  if (m > SMALL_SORT) {
    qsort(s, m, sizeof *s, cmp_span);
    return;
  }
  for (size_t i = 1; i < m; i++) {
    grt__plan_span v = s[i];
    size_t j = i;
    for (; j && s[j - 1].lo > v.lo; j--) s[j] = s[j - 1];
    s[j] = v;
  }
}

static uint64_t align_up(uint64_t x, uint64_t a) { return (x + a - 1) & ~(a - 1); }

/* The lowest aligned offset for size bytes clear of spans[0..m) (sorted by lo). */
static uint64_t lowest_fit(const grt__plan_span *spans, size_t m, uint64_t size, uint64_t a) {
  uint64_t x = 0;
  for (size_t i = 0; i < m; i++) {
    if (spans[i].lo >= x + size) break; /* the gap below spans[i] holds it */
    if (spans[i].hi > x) x = align_up(spans[i].hi, a);
  }
  return x;
}

uint64_t grt__plan_place(const grt_plan_buffer *bufs, const grt__plan_graph *g, grt__plan_state *s, size_t from,
                         uint64_t limit, grt__plan_span *scratch) {
  size_t n = g->n;
  for (size_t k = from; k < n; k++) {
    uint32_t b = s->order[k];
    size_t m = 0;
    for (size_t e = g->start[b]; e < g->start[b + 1]; e++) {
      uint32_t c = g->adj[e];
      if (s->pos[c] < k) scratch[m++] = (grt__plan_span){s->off[c], s->off[c] + bufs[c].size};
    }
    sort_spans(scratch, m);
    uint64_t x = lowest_fit(scratch, m, bufs[b].size, grt__plan_align_of(&bufs[b]));
    uint64_t top = x + bufs[b].size;
    s->off[b] = x;
    s->prefix[k + 1] = top > s->prefix[k] ? top : s->prefix[k];
    if (s->prefix[k + 1] > limit) return UINT64_MAX;
  }
  return s->prefix[n];
}
