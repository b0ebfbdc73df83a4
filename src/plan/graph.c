/* graph.c — the conflict graph: which buffers' lifetimes intersect. Built
 * by one sweep over the sorted lifetime ends with the live set in an array
 * (O(n + E) for E intersecting pairs); greedy placement then visits only a
 * buffer's own conflicts instead of every placed buffer. The first sweep
 * counts each buffer's conflicts, so the lists are one exact allocation. */
#include <stdio.h>
#include <stdlib.h>

#include "plan/plan_impl.h"

/* The live set: live[0..n_live) with where[i] the slot of buffer i. */
typedef struct live_set {
  uint32_t *live, *where;
  size_t n_live;
} live_set;

static void live_add(live_set *l, uint32_t i) {
  l->where[i] = (uint32_t)l->n_live;
  l->live[l->n_live++] = i;
}

static void live_remove(live_set *l, uint32_t i) {
  uint32_t slot = l->where[i], last = l->live[--l->n_live];
  l->live[slot] = last;
  l->where[last] = slot;
}

/* deg[i]: the buffers live when i is allocated, plus those allocated while i is live. */
static size_t count_degrees(const grt__plan_step *ev, size_t n, size_t *deg, size_t *allocs_before) {
  size_t live = 0, allocs = 0, total = 0;
  for (size_t k = 0; k < 2 * n; k++) {
    uint32_t i = ev[k].index;
    if (ev[k].is_alloc) {
      deg[i] = live;
      total += live;
      allocs_before[i] = allocs++;
      live++;
    } else {
      deg[i] += allocs - allocs_before[i] - 1;
      live--;
    }
  }
  return total;
}

static void fill(const grt__plan_step *ev, size_t n, live_set *l, grt__plan_graph *g, size_t *next) {
  for (size_t k = 0; k < 2 * n; k++) {
    uint32_t i = ev[k].index;
    if (!ev[k].is_alloc) {
      live_remove(l, i);
      continue;
    }
    for (size_t s = 0; s < l->n_live; s++) {
      uint32_t j = l->live[s];
      g->adj[next[i]++] = j;
      g->adj[next[j]++] = i;
    }
    live_add(l, i);
  }
}

grt_status grt__plan_graph_build(size_t n, const grt__plan_step *ev, grt__plan_graph *g, char *err, size_t err_size) {
  size_t *start = calloc(n + 1, sizeof *start), *next = calloc(n + 1, sizeof *next);
  uint32_t *live = malloc((n ? n : 1) * sizeof *live), *where = malloc((n ? n : 1) * sizeof *where);
  uint32_t *adj = NULL;
  grt_status st = start && next && live && where ? GRT_OK : GRT_ERR_NOMEM;
  size_t pairs = st ? 0 : count_degrees(ev, n, start, next);
  if (!st && pairs > GRT__PLAN_MAX_ADJ / 2) {
    if (err && err_size)
      snprintf(err, err_size, "%zu buffers overlap in time in %zu pairs: more than the planner holds (%zu)", n, pairs,
               GRT__PLAN_MAX_ADJ / 2);
    st = GRT_ERR_SIZE;
  }
  if (!st && !(adj = malloc((pairs ? 2 * pairs : 1) * sizeof *adj))) st = GRT_ERR_NOMEM;
  if (st == GRT_ERR_NOMEM && err && err_size) snprintf(err, err_size, "no host memory for %zu buffers' conflicts", n);
  if (!st) {
    size_t max_degree = 0, sum = 0;
    for (size_t i = 0; i < n; i++) {
      size_t d = start[i];
      if (d > max_degree) max_degree = d;
      start[i] = next[i] = sum;
      sum += d;
    }
    start[n] = sum;
    *g = (grt__plan_graph){n, start, adj, max_degree};
    live_set l = {live, where, 0};
    fill(ev, n, &l, g, next);
    start = NULL;
    adj = NULL;
  }
  free(start);
  free(next);
  free(live);
  free(where);
  free(adj);
  return st;
}

void grt__plan_graph_free(grt__plan_graph *g) {
  free(g->start);
  free(g->adj);
  g->start = NULL;
  g->adj = NULL;
}
