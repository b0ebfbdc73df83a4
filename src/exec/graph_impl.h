/* graph_impl.h — private structures of graphs: captures, graph templates,
 * executable graphs and their flat launch bodies (graph.c, graph_edit.c,
 * graph_capture.c, graph_body.c, graph_exec.c, graph_update.c, graph_mem.c).
 *
 * A grt_graph is a list of nodes in creation order (capture order, or the
 * order of the grt_graph_add_*_node calls), each an op prototype, its node
 * type, and the indices of the nodes it depends on in the order their edges
 * were made. The edges form a DAG (graph_edit.c refuses a cycle); a captured
 * graph's edges all point at earlier nodes. Streams in a capture carry a
 * frontier (the nodes their next captured op depends on); a captured event
 * carries the frontier of its stream at the record. A child graph node owns a
 * clone of its graph, which no handle names.
 *
 * An executable graph holds a body: the flat, pre-resolved form a launch runs
 * (graph_body.c), with child graphs flattened into it — one prefilled grt__op
 * per node (what the engines execute), the predecessor count of each node,
 * its successors as one CSR array, and the per-launch countdown; and, for
 * update, each flat node's type and the top-level node it came from.
 * Launches of one executable graph are serialized (each
 * depends on the previous), so one body is run by at most one launch at a time
 * and its per-launch arrays are reused without allocation. An update installs
 * a new body; the old one lives until the launches already issued with it end
 * (refs). Everything here is guarded by the exec lock.
 *
 * Memory nodes (graph_mem.c): each allocation node has a block of device
 * memory (grt__gblock) for its whole life, found by address in the exec's
 * map. Its allocation is live (API order) from a launch of an executable
 * graph made with the node until a free: a free node of that snapshot, a
 * free_async outside any graph, or a launch of another graph with a free
 * node for it. The block goes back to the device (outside the exec lock)
 * once nothing refers to it, it is not live and its last free was reached.
 */
#ifndef GRT_GRAPH_IMPL_H
#define GRT_GRAPH_IMPL_H

#include "exec/exec_impl.h"

#define GRT__GRAPH_MAGIC 0x47525048u /* "GRPH" */
#define GRT__GEXEC_MAGIC 0x47455845u /* "GEXE" */
#define GRT__GNODE_MAGIC 0x474e4f44u /* "GNOD" */

typedef struct grt__gblock {
  grt_devptr ptr;
  uint64_t size;
  unsigned refs;            /* its allocation node, and every free node and executable graph naming it */
  struct grt_graph *owner;  /* the graph of its allocation node; NULL once that graph is destroyed */
  bool freed_in_owner;      /* a free node of the owner names it */
  bool freed_elsewhere;     /* a free node of another graph names it */
  bool live;                /* allocated by a launch and not freed since (API order) */
  grt_stream *free_s;       /* the last free outside the allocating launch: a relaunch waits for it */
  uint64_t free_seq, free_uid;
  struct grt__gblock *next; /* on the exec's list awaiting release, or in a batch being released */
} grt__gblock;

/* A memory node of an executable graph's snapshot. */
typedef enum grt__gmem_how {
  GRT__GMEM_ALLOC,        /* its allocation node, not freed in the snapshot: live after a launch */
  GRT__GMEM_ALLOC_FREED,  /* its allocation node and a free node of the snapshot */
  GRT__GMEM_FOREIGN_FREE  /* a free node for another graph's allocation */
} grt__gmem_how;

typedef struct grt__gmem {
  grt__gblock *b;
  uint8_t how;
} grt__gmem;

typedef struct grt__gnode {
  grt__op proto;             /* kind, engine, duration, u, name */
  uint32_t *deps;            /* predecessors, in the order their edges were made */
  uint32_t ndeps, cap_deps;
  uint8_t type;              /* grt_graph_node_type */
  grt__gblock *block;        /* memory nodes: the block allocated or freed */
  struct grt_graph *child;   /* child graph nodes: the clone it runs (owned) */
  struct grt_graph_node *h;  /* its handle, made on first use; NULL: none yet */
} grt__gnode;

/* A node handle: stays (a zombie once its node or graph is destroyed) until
 * the exec goes, so a stale one reads GRT_ERR_INVALID_HANDLE (graph_edit.c). */
struct grt_graph_node {
  uint32_t magic;
  bool destroyed;
  uint32_t idx;                /* the node's index in graph->nodes while alive */
  struct grt_graph *graph;     /* set once, when the handle is handed out */
  struct grt_graph_node *next; /* the exec's unused handles */
};

struct grt_graph {
  uint32_t magic;              /* 0 for a child graph node's clone: no caller holds one */
  bool destroyed;
  grt_exec *exec;
  char name[GRT__OP_NAME_MAX];
  grt__gnode *nodes;
  uint32_t n, cap;
  uint32_t n_edges;
  uint32_t n_mem;                   /* memory nodes (allocation and free) */
  struct grt_graph_exec *live_exec; /* with memory nodes: its one executable graph */
  struct grt_graph *all_next;
};

struct grt__gbody {
  uint32_t n;           /* flat nodes: a child graph node is an entry and an exit marker around its graph's */
  uint32_t n_top;       /* nodes of the graph it was built from */
  grt__op *ops;         /* per node: the op engines run (prefilled at instantiate) */
  uint8_t *type;        /* per node: its grt_graph_node_type (the markers': GRT_GRAPH_NODE_GRAPH) */
  uint32_t *origin;     /* per node: the top-level node it came from */
  uint32_t *events;     /* the event record and wait nodes */
  uint32_t n_events;
  uint32_t *pred_first; /* n + 1: predecessors of i in preds[pred_first[i] .. pred_first[i+1]) */
  uint32_t *preds;
  uint32_t *succ_first; /* n + 1: successors, same layout */
  uint32_t *succ;
  uint32_t *indeg;      /* predecessor counts: a launch starts remaining as a copy */
  uint32_t *roots;      /* the nodes without predecessors, in capture order */
  uint32_t n_roots;
  uint32_t *remaining;  /* per launch: predecessors not yet done */
  uint32_t *stack;      /* per launch: nodes to settle on the spot */
  uint8_t *spot;        /* i settles on the spot (no engine): GRT__SPOT_PLAIN, or _RECORD (stamps its event) */
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
  grt__gmem *mem;      /* its memory nodes */
  uint32_t n_mem;
  uint64_t pool_bytes; /* the blocks of its allocation nodes */
  grt_graph *src;      /* the graph it was made from (zombie-safe) */
  bool fused;          /* made by the fusion pass: no update */
  grt_fusion_summary fsum;
  grt_fusion_entry *fent; /* fsum.entries */
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
  grt_stream **members;
  uint32_t n_members, cap_members;
  grt__capture *next;
};

#define GRT__SPOT_PLAIN 1
#define GRT__SPOT_RECORD 2

/* graph.c */
bool grt__graph_idx_push(grt__idxvec *v, uint32_t x);      /* appends if absent */
bool grt__graph_idx_copy(grt__idxvec *dst, const grt__idxvec *src);
void grt__graph_idx_free(grt__idxvec *v);
grt_graph *grt__graph_new(grt_exec *exec);
/* Frees g's nodes and marks their handles destroyed; blocks that lose their
 * last ref join *batch (lock held). batch NULL: the exec's teardown, which
 * frees every block itself. */
void grt__graph_free_nodes(grt_graph *g, grt__gblock **batch);
/* A captured node: its type follows from proto's kind. */
bool grt__graph_add_node(grt_graph *g, const grt__op *proto, const grt__idxvec *deps, uint32_t *idx);
/* Appends a node of type with the n predecessors deps (distinct, of g). */
bool grt__graph_add_node_deps(grt_graph *g, const grt__op *proto, uint8_t type, const uint32_t *deps, uint32_t n,
                              uint32_t *idx);
/* Locks g's exec when g is a live graph (GRT_ERR_INVALID_ARG, GRT_ERR_INVALID_HANDLE otherwise; unlocked). */
grt_status grt__graph_lock(grt_graph *g);
grt_status grt__gexec_lock(grt_graph_exec *ge);
void grt__graph_body_unref(grt_graph_exec *ge, grt__gbody *b);

/* graph_edit.c (lock held) */
bool grt__graph_handles_reserve(grt_exec *exec, uint32_t n); /* room for n more handles */
grt_graph_node *grt__graph_handle(grt_graph *g, uint32_t i); /* node i's handle (reserved before) */
grt_graph *grt__graph_clone(const grt_graph *src);            /* NULL: host memory ran out */
void grt__graph_handles_free(grt_exec *exec);                 /* exec destroy */

/* graph_mem.c (lock held unless said otherwise). A batch is a list of blocks
 * taken off the exec, to be freed on the device once the lock is released. */
void grt__gblock_unref(grt_exec *exec, grt__gblock *b, grt__gblock **batch);
void grt__gblocks_release(grt_device *dev, grt__gblock *batch); /* lock NOT held */
/* Blocks whose release waited for a free that has now been reached join *batch. */
void grt__graph_mem_sweep(grt_exec *exec, grt__gblock **batch);
/* ge's memory nodes from g at instantiate (refs taken); GRT_ERR_NOMEM, nothing taken. */
grt_status grt__graph_mem_snapshot(grt_graph_exec *ge, const grt_graph *g);
void grt__graph_mem_drop(grt_graph_exec *ge, grt__gblock **batch); /* ge destroyed */
/* Before a launch op of ge is issued: refuses (nothing changed) a launch
 * whose allocations are still live or whose free nodes free memory that is
 * not, and adds to op the deps on the frees its allocations wait for. */
grt_status grt__graph_mem_launch_check(const grt_graph_exec *ge, grt__op *op);
/* The launch (s, seq, uid) was issued: its allocations are live, its foreign frees done. */
void grt__graph_mem_launched(grt_graph_exec *ge, grt_stream *s, uint64_t seq, uint64_t uid);
void grt__graph_mem_free_all(grt_exec *exec); /* exec destroy, lock NOT held: every block to the device */
/* cudaFree of graph memory (lock NOT held): *graph_memory says whether ptr is
 * an allocation node's; if so a live allocation ends at once (GRT_ERR_DOUBLE_FREE
 * when it is not live) and the device block stays with its graph. */
grt_status grt__graph_mem_free_now(grt_exec *exec, grt_devptr ptr, bool *graph_memory);

/* graph_mem.c, for graph_edit.c (lock held): a block for ptr owned by g's new allocation node. */
grt_status grt__gblock_new(grt_exec *exec, grt_graph *g, grt_devptr ptr, uint64_t size, grt__gblock **out);
/* Whether g may get a free node for b (CUDA's rules): GRT_ERR_UNKNOWN_POINTER, GRT_ERR_DOUBLE_FREE. */
grt_status grt__graph_mem_free_check(const grt_graph *g, const grt__gblock *b);
/* A free node of g for b was added: its ref and the owner's rule. */
void grt__graph_mem_freed_by(const grt_graph *g, grt__gblock *b);

/* graph_body.c */
grt__gbody *grt__graph_body_build(const grt_graph *g);
void grt__graph_body_free(grt__gbody *b);

#endif
