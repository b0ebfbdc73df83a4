/* exec_impl.h — the executor's private structures and cross-file functions.
 *
 * Model: every stream is a FIFO of ops with sequence numbers 1, 2, ...; ops of
 * one stream complete in order, so "stream S reached op n" is S->done_seq >= n
 * and an event snapshot is just (stream, seq). Cross-stream edges are deps
 * (stream, seq) carried by the op that must wait (a WAIT marker for
 * grt_stream_wait_event; the legacy-stream barrier adds deps to ordinary ops).
 *
 * Life of an op: QUEUED in its stream; when it is the head and its deps and
 * user-event condition hold, it is READY: markers (no engine) complete on the
 * spot, others enter their engine's ready queue (compute sorted by priority);
 * a clock driver starts it (RUNNING), runs its body at the end of its interval
 * and completes it (sched.c), which advances the stream and re-evaluates the
 * streams registered as waiting on it.
 *
 * Locking: exec->lock guards everything in these structs except the immutable
 * fields (exec of an object, magic, id, flags, priority, kind) and done_seq,
 * which is also read lock-free (atomic) by spinning waiters. Bodies run without
 * the lock. The device lock is never taken while exec->lock is held.
 */
#ifndef GRT_EXEC_IMPL_H
#define GRT_EXEC_IMPL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>

#include "base/rng.h"
#include "base/u64map.h"
#include "exec/kop.h"
#include "exec/observe.h"
#include "gpurt/exec.h"

#define GRT__STREAM_MAGIC 0x5354524du /* "STRM" */
#define GRT__EVENT_MAGIC 0x4556454eu  /* "EVEN" */
#define GRT__UEV_MAGIC 0x55455654u    /* "UEVT" */
#define GRT__EXEC_MAGIC 0x45584543u   /* "EXEC" */
#define GRT__NAME_MAX 32
#define GRT__OP_NAME_MAX 40
#define GRT__PRIO_LEAST 0
#define GRT__PRIO_GREATEST (-5)
#define GRT__ENGINE_NONE GRT_ENGINE_COUNT /* markers: no engine, no duration */
#define GRT__OP_TIMES_KEEP 4096           /* cfg.op_times_keep's default */
#define GRT__OP_TIMES_KEEP_MAX (1u << 20)

typedef enum grt__op_kind {
  GRT__OP_KERNEL,
  GRT__OP_H2D,
  GRT__OP_D2H,
  GRT__OP_D2D,
  GRT__OP_MEMSET,
  GRT__OP_HOST_FUNC,
  GRT__OP_RECORD,     /* event record marker */
  GRT__OP_WAIT,       /* marker carrying the deps of a stream_wait_event */
  GRT__OP_UEV_SIGNAL, /* marker: user event value = max(value, v) */
  GRT__OP_UEV_WAIT,   /* marker: blocked until user event value >= v */
  GRT__OP_GRAPH,      /* a graph launch: its nodes run, then it completes (graph_exec.c) */
  GRT__OP_GALLOC,     /* graph allocation node (marker) */
  GRT__OP_GFREE,      /* graph free node (marker) */
  GRT__OP_CALLBACK    /* grt_stream_add_callback: a host-engine op told the stream's status */
} grt__op_kind;

/* Graphs (graph_impl.h has the rest). */
typedef struct grt__capture grt__capture;
typedef struct grt__gbody grt__gbody;
typedef struct grt__idxvec {
  uint32_t *v;
  uint32_t n, cap;
} grt__idxvec;

typedef enum grt__op_state { GRT__QUEUED, GRT__READY, GRT__RUNNING } grt__op_state;

typedef enum grt__stream_kind { GRT__STREAM_USER, GRT__STREAM_LEGACY, GRT__STREAM_PER_THREAD } grt__stream_kind;

/* A cross-stream edge: satisfied when stream->done_seq >= seq. */
typedef struct grt__dep {
  grt_stream *stream;
  uint64_t seq;
  uint64_t src_uid; /* the op waited for (timeline flow arrows) */
  grt_event *event; /* the event the edge came from; NULL: legacy barrier */
} grt__dep;

typedef struct grt__op grt__op;
struct grt__op {
  grt__op *next;  /* stream FIFO / free list */
  grt__op *rnext; /* engine ready queue */
  grt_stream *stream;
  uint64_t seq, uid;
  uint8_t kind, engine, state, blocked; /* blocked: a host function waiting in grt_user_event_wait */
  int priority;
  uint32_t ndeps, next_dep; /* deps[next_dep..ndeps) may still be unsatisfied */
  grt__dep *deps;           /* inline_dep or heap */
  grt__dep inline_dep;
  uint64_t duration_ns, start_ns, end_ns, order_key;
  uint64_t times_id; /* issued with an id (grt_exec_op_times): its times are kept at completion; 0: not */
  unsigned slot; /* engine slot it ran on */
  union {
    struct { grt_host_fn fn; void *arg; } call; /* kernel, host function */
    struct { grt_devptr dev; grt_devptr dev2; void *host; uint64_t bytes; int value; } mem;
    struct { grt_event *event; uint64_t gen; } rec;
    struct { grt_user_event *uev; uint64_t value; } uev;
    struct { grt__gbody *body; grt_graph_exec *ge; uint32_t left, running; } graph; /* GRT__OP_GRAPH */
    struct { grt_stream_callback fn; void *arg; grt_status status; } cb; /* status: set when it starts */
  } u;
  grt__op *gparent; /* a graph node's launch op; NULL for eager ops */
  uint32_t gindex;  /* a graph node's index in its body */
  grt_user_event *wait_uev; /* a blocked host function: what it waits on */
  uint64_t wait_value;
  char name[GRT__OP_NAME_MAX]; /* user-given kernel name; empty: derived from kind and object */
};

struct grt_stream {
  uint32_t magic;
  bool destroyed;
  uint8_t kind;
  grt_exec *exec;
  grt_stream_id id;
  unsigned flags;
  int priority;
  char name[GRT__NAME_MAX];
  grt__op *head, *tail; /* ops not yet completed, in issue order */
  uint64_t issued_seq;
  _Atomic uint64_t done_seq;
  uint64_t legacy_seen; /* blocking streams: legacy seq already depended upon */
  /* waiting registration: this stream's head waits on `waiting_on` (a stream
   * reaching waiting_seq, or a user event); it sits in that object's list. */
  grt_stream *wait_next;
  uint64_t waiting_seq;
  bool registered;
  grt_stream *waiters; /* streams whose head waits on this one */
  grt_stream *eval_next; bool in_eval; /* re-evaluation worklist */
  grt_stream *all_next;
  grt__capture *cap;     /* the capture it records into; NULL: not capturing */
  grt__idxvec cap_front; /* capturing: the nodes its next captured op depends on */
};

struct grt_event {
  uint32_t magic;
  bool destroyed;
  grt_exec *exec;
  unsigned flags;
  char name[GRT__NAME_MAX];
  grt_stream *stream; /* NULL: never recorded */
  uint64_t seq, gen, src_uid;
  uint64_t time_ns;
  bool time_valid; /* time_ns belongs to the current record */
  grt_event *all_next;
  grt__capture *cap;     /* last recorded inside this capture (a captured event); NULL: not */
  grt__idxvec cap_nodes; /* captured event: the nodes its record snapshots */
};

struct grt_user_event {
  uint32_t magic;
  bool destroyed;
  grt_exec *exec;
  char name[GRT__NAME_MAX];
  uint64_t value;
  grt_stream *waiters; /* streams whose head op waits on this */
  unsigned host_waiters;
  unsigned pending_signals; /* signal ops queued and not yet executed */
  grt_user_event *all_next;
};

typedef struct grt__engine {
  unsigned slots, busy, blocked; /* blocked: busy slots held by blocked host functions */
  unsigned kicks_pending;        /* ready ops pushed while deferring (threads) */
  grt__op *rq_head, *rq_tail;    /* ready queue */
  uint64_t slot_mask;            /* virtual: which slots are busy (timeline) */
  grt__op *handed_head, *handed_tail; /* threads: ops another worker started for this engine (rnext) */
  pthread_cond_t cv;             /* threads: idle workers wait here */
  unsigned idle;
} grt__engine;

/* The times of an op issued with an id, in a ring of cfg.op_times_keep
 * entries indexed by id (timeline.c). */
typedef struct grt__op_time {
  uint64_t id, start_ns, end_ns; /* id 0: an empty entry */
} grt__op_time;

/* One timeline record per completed op. */
typedef struct grt__trace_rec {
  uint64_t uid, start_ns, end_ns, stream_id;
  size_t flow_first, flow_n; /* source uids of its cross-stream deps in exec->flows */
  uint8_t kind, engine;
  bool deadlock;             /* not an op: where a stream stood when a deadlock was found */
  unsigned slot;
  char name[GRT__OP_NAME_MAX];
} grt__trace_rec;

typedef struct grt__worker {
  grt_exec *exec;
  pthread_t thread;
  unsigned engine; /* ops take a free slot of their engine, not one per thread */
  grt__op *current; /* the op whose body it runs (lock) */
} grt__worker;

typedef struct grt__heap_item {
  uint64_t t, key;
  grt__op *op;
} grt__heap_item;

struct grt_exec {
  uint32_t magic;
  grt_exec_config cfg;
  grt_device *device;
  bool own_device;
  pthread_mutex_t lock;
  pthread_cond_t done_cv; /* host threads in sync calls and user-event waits */
  unsigned host_waiters;
  struct grt__waiter *host_waits; /* host threads' waits in progress (not host functions') */
  unsigned n_host_waits;

  grt_stream *streams; /* every stream ever created (zombies too) */
  grt_event *events;
  grt_user_event *uevs;
  unsigned live_streams, live_events, live_uevs; /* user-created, not destroyed */
  grt_stream *legacy;
  grt__u64map per_thread; /* pthread_self -> stream */
  grt__u64map by_id;      /* stream id -> stream */
  uint64_t next_stream_id, next_uid, next_order;

  grt__op *free_ops;
  struct grt__op_slab *slabs; /* ops are carved from slabs, freed with the exec */
  bool deferring;             /* a worker holds the lock around a completion: kicks and wake-ups wait */
  bool notify_pending;        /* host threads to wake once the lock is released */
  grt__engine engines[GRT_ENGINE_COUNT];
  uint64_t pending_ops; /* issued, not completed */
  unsigned running, blocked_running;
  uint64_t state_gen, detect_gen; /* the detector skips states it already cleared */
  grt_stream *eval_head;          /* streams to re-evaluate (sched.c) */
  bool draining;
  _Atomic uint64_t completions;   /* bumped per completion: spinning waiters watch it */

  grt_status error;
  char error_msg[1024];

  /* threads clock */
  grt__worker *workers;
  unsigned n_workers;
  bool stop;
  struct grt__worker *helper; /* a host thread running an op inside a synchronize call (sched_threads.c) */
  uint64_t t0_ns;

  /* virtual clock */
  uint64_t now_ns;
  grt__heap_item *heap;
  size_t heap_n, heap_cap;
  grt__rng rng;
  bool driving;
  pthread_t driver;
  unsigned cb_depth; /* bodies running on the driver thread */
  grt__op *cb_op;    /* the body running on the driver thread */

  /* graphs (graph*.c) */
  grt__capture *captures;     /* captures in progress */
  struct grt_graph *graphs;   /* every graph ever made (zombies too) */
  struct grt_graph_exec *gexecs;
  unsigned live_graphs, live_gexecs;
  grt__u64map gallocs;          /* graph allocations by address: every block not yet back on the device */
  struct grt__gblock *gpending; /* blocks nothing refers to whose last free is still ahead */
  struct grt__hslab *hslabs;    /* graph node handles, freed with the exec (graph_edit.c) */
  struct grt_graph_node *hfree; /* handles not handed out yet */
  uint32_t n_hfree;

  /* timeline */
  grt__trace_rec *trace;
  size_t trace_n, trace_cap;
  uint64_t *flows;
  size_t flows_n, flows_cap;
  grt__op_time *op_times; /* allocated with the first id */
  uint64_t op_ids;        /* ids issued (the last one) */

  /* sync observers (observe.c): obs_lock guards the list and the counts */
  pthread_mutex_t obs_lock;
  pthread_cond_t obs_cv; /* a removed observer's last call ended */
  struct grt__sync_obs *observers;
  unsigned live_observers, obs_walkers;

  /* fault injection (fault.c): creations left before the armed one fails (0: none armed) */
  uint64_t fault_left[GRT_EXEC_FAULT_COUNT];
  uint64_t fault_fired[GRT_EXEC_FAULT_COUNT];

  /* capture_mode.c: each thread's capture interaction mode, as the value of a
   * pthread key made by the first exchange (mode_key_made, under the lock) */
  pthread_key_t mode_key;
  bool mode_key_made;

  /* Callbacks the sticky error cancelled, in cancel order, each still to run
   * once with the error (sched.c): the host workers run them (threads), the
   * next synchronizing call or exec destroy (virtual). */
  grt__op *orphans, *orphans_tail;
};

#define GRT__SLAB_OPS 64
typedef struct grt__op_slab {
  struct grt__op_slab *next;
  grt__op ops[GRT__SLAB_OPS];
} grt__op_slab;

/* exec.c */
uint64_t grt__mono_ns(void);
uint64_t grt__exec_now(grt_exec *exec); /* lock held */
/* timeline.c: the streams a deadlock stopped, as instants (lock held). */
void grt__trace_deadlock(grt_exec *exec);
bool grt__in_body(grt_exec *exec);      /* calling thread runs a body of this exec */
grt__op *grt__current_op(grt_exec *exec); /* the op whose body the calling thread runs */
void grt__set_error(grt_exec *exec, grt_status st, const char *msg); /* lock held */
grt_stream *grt__stream_new(grt_exec *exec, uint8_t kind, unsigned flags, int priority); /* lock held */
uint64_t grt__copy_ns(const grt_exec_config *cfg, unsigned engine, uint64_t bytes);

/* op.c */
grt__op *grt__op_alloc(grt_exec *exec, grt_stream *s, uint8_t kind); /* lock held */
void grt__op_free(grt_exec *exec, grt__op *op);
bool grt__op_add_dep(grt__op *op, grt_stream *src, uint64_t seq, uint64_t src_uid, grt_event *ev);
grt_status grt__stream_check(grt_stream *s); /* validity, no lock */
grt_status grt__stream_lock(grt_stream *s);  /* locks; fails (unlocked) if destroyed or in error */
grt_status grt__submit(grt__op *op);         /* lock held; takes ownership */
grt_status grt__submit_ex(grt__op *op, uint64_t *seq_out, uint64_t *uid_out);

/* sched.c (lock held throughout) */
void grt__sched_eval(grt_exec *exec, grt_stream *s);
void grt__sched_drain(grt_exec *exec);
grt__op *grt__engine_pop(grt_exec *exec, unsigned engine);
/* The lowest slot of e no running op holds (64 when all are held). The threads
 * clock takes it too: a worker may run another engine's op (sched_threads.c). */
unsigned grt__engine_free_slot(const grt__engine *e);
void grt__sched_start(grt_exec *exec, grt__op *op, unsigned slot, uint64_t now);
void grt__sched_complete(grt_exec *exec, grt__op *op, uint64_t now);
void grt__sched_ready(grt_exec *exec, grt__op *op);         /* into its engine's ready queue */
void grt__rq_remove(grt_exec *exec, grt__op *op);           /* out of it */
void grt__sched_release_engine(grt_exec *exec, grt__op *op); /* a running op leaves its slot */
grt_status grt__run_body(grt_exec *exec, grt__op *op); /* lock NOT held */
void grt__wake_uev(grt_exec *exec, grt_user_event *u);
void grt__notify_hosts(grt_exec *exec); /* wakes host threads in waits (deferred while a worker completes) */
void grt__cancel_all(grt_exec *exec);
/* A cancelled callback to run now (off the orphan list; NULL: none). The
 * caller marks it as the body it runs, runs grt__run_body without the lock,
 * then calls grt__orphan_done. */
grt__op *grt__orphan_take(grt_exec *exec);
void grt__orphan_done(grt_exec *exec, grt__op *op);
bool grt__quiescent(grt_exec *exec);
/* Query helper for streams and events (stream.c): GRT_OK, NOT_READY or the sticky error. */
grt_status grt__query_seq(grt_exec *exec, grt_stream *s, uint64_t seq);
static inline uint64_t grt__done(const grt_stream *s) {
  return atomic_load_explicit(&((grt_stream *)s)->done_seq, memory_order_acquire);
}

/* Waiting: cond(ctx) under the lock. Returns GRT_OK when it holds, the
 * sticky error, or GRT_ERR_NOT_READY when cfg.wait_timeout_ns passed first. */
typedef bool (*grt__cond_fn)(grt_exec *exec, void *ctx);
/* One wait. A host thread's (not a host function's) is on exec->host_waits
 * while it lasts: the stall rule counts them and its report names what each
 * waits for. */
typedef struct grt__waiter {
  grt__cond_fn cond;
  void *ctx;
  bool spin;           /* threads: spin a while before sleeping */
  bool in_body;        /* a host function's wait, on a worker thread */
  grt_user_event *uev; /* a wait for a user event (value >= value); NULL: another condition */
  uint64_t value;
  struct grt__waiter *next;
} grt__waiter;
grt_status grt__wait_on(grt_exec *exec, grt__waiter *w);
grt_status grt__wait(grt_exec *exec, grt__cond_fn cond, void *ctx, bool spin, bool host_func_wait);
void grt__wait_idle(grt_exec *exec); /* threads: until no body runs */

/* sched_threads.c */
grt_status grt__threads_start(grt_exec *exec);
void grt__threads_stop(grt_exec *exec);
void grt__threads_kick(grt_exec *exec, unsigned engine);
grt_status grt__threads_wait(grt_exec *exec, const grt__waiter *w);
void grt__cond_init_monotonic(pthread_cond_t *cv); /* timed waits measure CLOCK_MONOTONIC */

/* sched_virtual.c */
/* Runs the simulation until cond holds; GRT_ERR_NOT_READY with the clock at
 * `deadline` (virtual ns, UINT64_MAX: none) when nothing happens before it. */
grt_status grt__virtual_wait(grt_exec *exec, grt__cond_fn cond, void *ctx, uint64_t deadline);
grt_status grt__virtual_host_delay(grt_exec *exec, uint64_t ns); /* lock held; grt_exec_host_delay */
void grt__virtual_free(grt_exec *exec);
void grt__virtual_run_orphans(grt_exec *exec); /* lock held; exec destroy: the cancelled callbacks left */

/* deadlock.c: at quiescence, looks for a cycle; on one sets the sticky
 * GRT_ERR_DEADLOCK with the cycle's text and returns true. */
bool grt__detect_deadlock(grt_exec *exec);
/* Text for "no cycle, but the waiting host threads can't be released". */
void grt__describe_host_stall(grt_exec *exec, char *buf, size_t n);
/* Threads, at quiescence: every one of cfg.host_threads application threads
 * waits in the exec and nothing queued can release any of them; sets the
 * sticky GRT_ERR_DEADLOCK naming what they wait for and returns true. */
bool grt__detect_host_stall(grt_exec *exec);

/* graph*.c (graph_impl.h for the rest) */
grt_status grt__graph_capture_submit(grt__op *op); /* lock held; op issued to a capturing stream */
grt_status grt__graph_legacy_check(grt_exec *exec, grt_stream *s); /* lock held; legacy use during capture */
grt_status grt__graph_capture_record(grt_event *ev, grt_stream *s); /* lock held; s captures */
grt_status grt__graph_capture_wait(grt_stream *s, grt_event *ev);   /* lock held; s captures or ev is captured */
grt_status grt__graph_capture_wait_external(grt_stream *s, grt_event *ev); /* lock held; s captures */
void grt__graph_invalidate(grt__capture *c);                        /* lock held */
grt_status grt__graph_device_sync_check(grt_exec *exec);            /* lock held; invalidates every capture */
/* capture_mode.c, lock held: a "potentially unsafe" call (stream or event query or synchronize,
 * synchronous device malloc/free) by the calling thread. GRT_ERR_CAPTURE_UNSUPPORTED when a capture
 * in progress forbids it to this thread (each such capture is invalidated), else GRT_OK. */
grt_status grt__capture_unsafe_check(grt_exec *exec);
void grt__capture_modes_free(grt_exec *exec); /* exec destroy: every thread's mode goes */
void grt__graph_expand(grt_exec *exec, grt__op *op, uint64_t now); /* lock held; a launch became ready */
void grt__graph_node_complete(grt_exec *exec, grt__op *node, uint64_t now); /* lock held */
bool grt__graph_cancel(grt_exec *exec, grt__op *op); /* lock held; true: op dropped */
void grt__graph_launch_release(grt_exec *exec, grt__op *op); /* lock held; a launch op goes */
void grt__graph_free_all(grt_exec *exec);              /* exec destroy */
/* Lock held: device segments the exec's graph memory holds (exec destroy frees them). */
size_t grt__graph_mem_segments(grt_exec *exec);
/* Threads: a worker that ran node's body may run the returned node next
 * without the lock (NULL: none); grt__graph_chain_done (lock held) then
 * accounts for the count nodes first .. last (exclusive) before last
 * completes normally. */
/* The node after `node` in the chain that started at `first` (a node the
 * scheduler started), or NULL; nothing is written to it. */
grt__op *grt__graph_chain_next(const grt__op *first, const grt__op *node);
/* Gives a chained node first's launch fields (stream, priority, launch, slot):
 * every node when a timeline records them, else only the one a chain ends on
 * (the one completed under the lock). */
void grt__graph_chain_adopt(const grt__op *first, grt__op *node);
void grt__graph_chain_done(grt_exec *exec, grt__op *first, grt__op *last, uint32_t count);
/* fault.c: lock held. GRT_ERR_FAULT_INJECTED when this creation of `kind` is
 * the armed one (disarming it), else GRT_OK. */
grt_status grt__fault_take(grt_exec *exec, grt_exec_fault kind);
void grt__fault_arm_from_config(grt_exec *exec);

/* observe.c (observe.h has the rest) */
typedef struct grt__sync_obs grt__sync_obs;
void grt__observers_init(grt_exec *exec);
void grt__observers_free(grt_exec *exec);
unsigned grt__observers_live(grt_exec *exec);
/* After a successful host sync, no exec lock held: s is the stream
 * synchronized (stream), the one the event's snapshot is on (event), or NULL. */
void grt__sync_notify(grt_exec *exec, grt__sync_kind kind, const grt_stream *s);

/* timeline.c */
void grt__trace_op(grt_exec *exec, const grt__op *op); /* lock held */
/* Lock held. An id for an op about to be issued (GRT_ERR_NOMEM: none, nothing
 * changed); grt__op_id_undo gives it back when the issue failed after all. */
grt_status grt__op_id_take(grt_exec *exec, uint64_t *id);
void grt__op_id_undo(grt_exec *exec, uint64_t id);
void grt__op_times_note(grt_exec *exec, const grt__op *op); /* lock held; at its completion */
void grt__timeline_free(grt_exec *exec);

#endif
