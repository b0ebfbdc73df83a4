/* fusion_impl.h — the fusion pass's working state (fusion.c drives it,
 * fusion_check.c decides whether a set of kernels may become one, and
 * fusion_view.c builds the fused graph instantiate runs).
 *
 * The pass works on a graph's top-level nodes. Groups are a union-find
 * over them; a candidate merge is checked as a whole (the union of two
 * groups), on the graph with every group already made contracted to one
 * node, so a merge never closes a cycle through another fused group. */
#ifndef GRT_FUSION_IMPL_H
#define GRT_FUSION_IMPL_H

#include "exec/graph_impl.h"

/* Graphs above this many nodes are not fused (reachability is a bit matrix). */
#define GRT__FUSE_MAX_NODES 8192u

typedef struct grt__fuse {
  const grt_graph *g;
  uint32_t n;
  uint32_t max_group;
  const grt__kop **k;   /* per node: its description, NULL: not a described kernel */
  uint32_t *parent;     /* union-find */
  uint32_t *ring;       /* each group's members as a circular list */
  uint32_t *succ_first; /* n + 1, CSR successors */
  uint32_t *succ;
  uint64_t *reach; /* n rows of words: j reachable from i (a path of >= 1 edge) */
  uint32_t words;
  uint32_t *order;   /* a topological order */
  uint32_t *members; /* scratch: a candidate union */
  uint8_t *mark;     /* scratch: 1 in the union, 2 reached forward, 4 backward */
  uint32_t *queue;   /* scratch */
  grt_fusion_entry *ent;
  uint32_t n_ent, cap_ent;
} grt__fuse;

uint32_t grt__fuse_find(grt__fuse *f, uint32_t x);
bool grt__fuse_reaches(const grt__fuse *f, uint32_t from, uint32_t to);
/* The reason the groups of a and b may not become one (GRT_FUSE_OK: they may). */
grt_fuse_reason grt__fuse_check(grt__fuse *f, uint32_t a, uint32_t b);
/* Whether buffer x (a member's output read by another member) is internal
 * in the marked group: memory only the group touches, freed in the graph. */
grt_fuse_reason grt__fuse_internal(grt__fuse *f, const grt_op_buffer *x);

static inline bool grt__fuse_same(const grt_op_buffer *a, const grt_op_buffer *b) {
  return a->ptr == b->ptr && grt__kop_buf_bytes(a) == grt__kop_buf_bytes(b);
}
static inline bool grt__fuse_overlap(grt_devptr p, uint64_t n, grt_devptr q, uint64_t m) {
  return p < q + m && q < p + n;
}

/* fusion.c, lock held: the fused view of g into *view (a shallow copy of g
 * when g is too large to fuse), the summary and the entries (malloc'd). */
grt_status grt__fuse_plan(const grt_graph *g, uint32_t max_group, grt_graph *view, grt_fusion_summary *sum,
                          grt_fusion_entry **ent);
void grt__fuse_plan_none(const grt_graph *g, grt_fusion_summary *sum); /* g's figures, before = after */

/* fusion_view.c: the fused graph's nodes (into *view, sharing g's blocks and
 * child graphs, which it does not own) and the summary's after-figures. */
grt_status grt__fuse_view(grt__fuse *f, grt_graph *view, grt_fusion_summary *sum);
void grt__fuse_view_free(grt_graph *view);
/* Flat nodes and engine-run kernel nodes of g, memory-node pool bytes. */
void grt__fuse_count(const grt_graph *g, uint32_t *nodes, uint32_t *launches, uint64_t *pool);

#endif
