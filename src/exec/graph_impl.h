/* graph_impl.h — private structures of graphs: captures, graph templates,
 * executable graphs and their flat launch bodies (graph.c, graph_capture.c,
 * graph_exec.c).
 *
 * A capture grows a grt_graph: nodes in capture order, each an op prototype
 * plus the indices of the nodes it depends on. Every dependency points at an
 * earlier node, so capture order is a topological order. Streams in a capture
 * carry a frontier (the nodes their next captured op depends on); a captured
 * event carries the frontier of its stream at the record.
 *
 * An executable graph holds a body: the flat, pre-resolved form a launch runs
 * — one prefilled grt__op per node (what the engines execute), the
 * predecessor count of each node, its successors as one CSR array, and the
 * per-launch countdown. Launches of one executable graph are serialized (each
 * depends on the previous), so one body is run by at most one launch at a time
 * and its per-launch arrays are reused without allocation. An update installs
 * a new body; the old one lives until the launches already issued with it end
 * (refs). Everything here is guarded by the exec lock.
 *
 * Memory nodes: the blocks behind allocation nodes form the graph's pool
 * (grt__gpool), shared by refcount between the graph and its one executable
 * graph; the device blocks are freed (outside the exec lock) with the last ref.
 */
#ifndef GRT_GRAPH_IMPL_H
#define GRT_GRAPH_IMPL_H

#include "exec/exec_impl.h"

#define GRT__GRAPH_MAGIC 0x47525048u /* "GRPH" */
#define GRT__GEXEC_MAGIC 0x47455845u /* "GEXE" */

typedef struct grt__gblock {
  grt_devptr ptr;
  uint64_t size;
  bool freed_in_graph; /* a free node of the capture names it */
} grt__gblock;

typedef struct grt__gpool {
  unsigned refs;
  grt__gblock *blocks;
  uint32_t n, cap;
  uint64_t bytes;
} grt__gpool;

typedef struct grt__gnode {
  grt__op proto;             /* kind, engine, duration, u, name */
  uint32_t dep_first, ndeps; /* predecessors: graph->deps[dep_first .. +ndeps) */
} grt__gnode;

struct grt_graph {
  uint32_t magic;
  bool destroyed;
  grt_exec *exec;
  char name[GRT__OP_NAME_MAX];
  grt__gnode *nodes;
  uint32_t n, cap;
  uint32_t *deps;
  uint32_t n_deps, deps_cap;
  grt__gpool *pool;              /* NULL: no memory nodes */
  struct grt_graph_exec *live_exec; /* with memory nodes: its one executable graph */
  struct grt_graph *all_next;
};

struct grt__gbody {
  uint32_t n;
  grt__op *ops;         /* per node: the op engines run (prefilled at instantiate) */
  uint32_t *pred_first; /* n + 1: predecessors of i in preds[pred_first[i] .. pred_first[i+1]) */
  uint32_t *preds;
  uint32_t *succ_first; /* n + 1: successors, same layout */
  uint32_t *succ;
  uint32_t *indeg;      /* predecessor counts: a launch starts remaining as a copy */
  uint32_t *roots;      /* the nodes without predecessors, in capture order */
  uint32_t n_roots;
  uint32_t *remaining;  /* per launch: predecessors not yet done */
  uint32_t *stack;      /* per launch: nodes to settle on the spot */
  uint8_t *spot;        /* 1: i settles on the spot (no body, no duration: no engine) */
  uint32_t *chain_next; /* the node a worker may run right after i without the lock, or UINT32_MAX */
  unsigned refs;        /* launches issued and not released, + 1 while current */
  grt__gbody *next_retired;
};

struct grt_graph_exec {
  uint32_t magic;
  bool destroyed;
  grt_exec *exec;
  char name[GRT__OP_NAME_MAX];
  grt__gbody *body;    /* current */
  grt__gbody *retired; /* replaced by an update, launches pending */
  grt__gpool *pool;    /* NULL: no memory nodes */
  grt_graph *src;      /* the graph it was made from (zombie-safe) */
  unsigned inflight;   /* launches issued, not finished */
  grt_stream *last_stream; /* the previous launch: (stream, seq, uid) */
  uint64_t last_seq, last_uid;
  struct grt_graph_exec *all_next;
};

struct grt__capture {
  grt_exec *exec;
  uint64_t id;
  grt_stream *origin;
  grt_capture_mode mode;
  pthread_t thread;
  bool invalid;
  grt_graph *graph; /* being built; joins exec->graphs at end-capture */
  grt__gpool pool;  /* blocks of its allocation nodes */
  grt_stream **members;
  uint32_t n_members, cap_members;
  grt__capture *next;
};

/* graph.c */
bool grt__graph_idx_push(grt__idxvec *v, uint32_t x);      /* appends if absent */
bool grt__graph_idx_copy(grt__idxvec *dst, const grt__idxvec *src);
void grt__graph_idx_free(grt__idxvec *v);
grt_graph *grt__graph_new(grt_exec *exec);
void grt__graph_free_nodes(grt_graph *g);
bool grt__graph_add_node(grt_graph *g, const grt__op *proto, const grt__idxvec *deps, uint32_t *idx);
/* Drops a pool ref; when it was the last, moves the blocks into *blocks (the
 * caller frees them on the device after unlocking). */
void grt__graph_pool_unref(grt__gpool *p, grt__gblock **blocks, uint32_t *n);
void grt__graph_free_blocks(grt_device *dev, grt__gblock *blocks, uint32_t n); /* lock NOT held */

/* graph_exec.c */
grt__gbody *grt__graph_body_build(const grt_graph *g);
void grt__graph_body_free(grt__gbody *b);

#endif
