/* gpurt/exec.h — streams, events and an executor with CUDA's execution semantics.
 *
 * A grt_exec is a device context: it owns (or borrows) a grt_device whose bytes
 * are real host memory, a set of engines (N compute slots, one H2D and one D2H
 * copy engine, host-function slots) and the streams that feed them. Work is
 * issued asynchronously into streams and runs on the engines under one of two
 * clocks behind the same API:
 *
 *   GRT_CLOCK_THREADS  real worker threads; a modelled duration is slept.
 *   GRT_CLOCK_VIRTUAL  a deterministic discrete-event simulation on the same
 *                      engines; virtual time advances only while the host waits
 *                      (synchronize calls, user-event waits) or spends host time
 *                      (grt_exec_host_delay); bodies (kernel functions, copies,
 *                      host functions) run on the waiting thread in virtual-time
 *                      order. Queries and launches never move time or run work.
 *
 * Semantics (docs/EXEC.md; CUDA's rules):
 *  - A stream is a FIFO; different streams are unordered unless an edge says so.
 *  - The legacy default stream waits for all blocking streams before its work
 *    runs, and work issued to a blocking stream afterwards waits for it.
 *    GRT_STREAM_NON_BLOCKING streams are exempt. Per-thread default streams do
 *    not synchronize with other streams but are blocking w.r.t. the legacy one.
 *  - An event record snapshots the work already issued to the stream; a wait
 *    binds to the snapshot at the time of the wait call; a never-recorded event
 *    is complete. Plain events therefore never deadlock.
 *  - A user event (grt_user_event) is the blocking kind: a monotonically rising
 *    64-bit value, waited on until value >= target (cuStreamWaitValue64 / Level
 *    Zero events). Cycles of such waits are detected when nothing can make
 *    progress and reported as GRT_ERR_DEADLOCK naming the cycle — never a hang.
 *    A user event with a signal queued on a stream is taken to be signalled by
 *    that stream; one with none queued awaits the host.
 *  - Priorities: lower number = higher priority, clamped to the range; a hint for
 *    which ready compute work starts next, never preemption.
 *  - An op's body takes effect at the end of its modelled interval (a kernel
 *    function runs after its duration elapsed), so unordered accesses overlap.
 *
 * Waits that cannot end: a host wait (a synchronize call, grt_user_event_wait,
 * the drain in grt_exec_destroy) for what only a host signal could bring
 * would block for ever. The virtual clock takes the host to be one thread
 * (the waiting one), so such a wait is GRT_ERR_DEADLOCK at once. Under
 * threads another thread may still signal, so it is a deadlock only when
 * cfg.host_threads says how many threads there are and that many wait in
 * the exec with nothing queued or running able to release any of them (each
 * wait's condition is false, nothing runs but blocked host functions,
 * nothing ready can start). The message names the user events and values
 * waited for. cfg.wait_timeout_ns bounds every host wait on either clock
 * (virtual: virtual ns, the clock then stands at the deadline, as after a
 * host delay): GRT_ERR_NOT_READY, nothing else changed.
 *
 * Errors: a deadlock (or a body failure) puts the exec in a sticky error state,
 * like a CUDA context: queued work is cancelled, blocked waits return the error,
 * and later calls on the exec return it (grt_exec_get_error has the message).
 *
 * Thread safety: every function here may be called from any thread; one mutex
 * per exec (the exec lock) guards all scheduling state. Bodies run without it.
 * Destroyed streams/events stay allocated as zombies until the exec is destroyed
 * so that using them returns GRT_ERR_INVALID_HANDLE rather than touching freed memory.
 * Kernel functions and host functions must not call blocking functions
 * (synchronize, exec destroy): those return GRT_ERR_NOT_PERMITTED there. The one
 * blocking call allowed inside a host function is grt_user_event_wait, which the
 * deadlock detector sees.
 */
#ifndef GPURT_EXEC_H
#define GPURT_EXEC_H

#include <stdio.h>

#include "gpurt/base.h"
#include "gpurt/device.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct grt_exec grt_exec;
typedef struct grt_stream grt_stream;
typedef struct grt_event grt_event;
typedef struct grt_user_event grt_user_event;

typedef enum grt_clock_kind {
  GRT_CLOCK_THREADS = 0, /* real threads, durations slept */
  GRT_CLOCK_VIRTUAL = 1  /* deterministic discrete-event simulation */
} grt_clock_kind;

typedef enum grt_engine_class {
  GRT_ENGINE_COMPUTE = 0,  /* compute_slots concurrent ops */
  GRT_ENGINE_COPY_H2D = 1, /* one host-to-device copy engine */
  GRT_ENGINE_COPY_D2H = 2, /* one device-to-host copy engine */
  GRT_ENGINE_HOST = 3,     /* host functions: host_slots at a time */
  GRT_ENGINE_COUNT = 4
} grt_engine_class;

typedef struct grt_exec_config {
  grt_clock_kind clock;      /* default GRT_CLOCK_THREADS */
  grt_device *device;        /* borrowed device (must have host_backing); NULL: the exec creates one */
  uint64_t device_capacity;  /* bytes of the device the exec creates (default 256 MiB) */
  unsigned compute_slots;    /* concurrent compute ops, 1..64 (default 4) */
  unsigned host_slots;       /* concurrent host functions, 1..64 (default 2) */
  double h2d_gbps;           /* modelled H2D bandwidth, GB/s = bytes/ns (default 16) */
  double d2h_gbps;           /* modelled D2H bandwidth, GB/s (default 16) */
  double device_gbps;        /* modelled D2D copy / memset bandwidth, GB/s (default 500) */
  uint64_t copy_latency_ns;  /* fixed cost added to each copy and memset, ns (default 0) */
  int record_timeline;       /* nonzero: keep a record per op for grt_exec_timeline_* */
  uint64_t schedule_seed;    /* virtual clock: 0 = canonical tie order; else ties broken by a seeded PRNG */
  uint64_t spin_ns;          /* threads: a host sync spins this long before blocking (default 20000) */
  /* Bounded host waits (see "waits that cannot end" below). */
  uint64_t wait_timeout_ns;  /* a host wait still unmet after this long (the exec's clock) returns
                                GRT_ERR_NOT_READY and changes nothing; 0 (default) = no timeout */
  unsigned host_threads;     /* threads: the application threads that call into the exec while it has
                                work; once all of them wait in it and nothing queued can release any,
                                the waits return GRT_ERR_DEADLOCK. 0 (default) = unknown: not detected */
  uint32_t op_times_keep;    /* grt_exec_op_times keeps the last this many op ids issued, 1..2^20
                                (default 4096; 0 also means 4096) */
  /* Fault injection (tests), counted from the exec's creation, 1 = the first;
   * 0 = never. The Nth creation of that kind fails with GRT_ERR_FAULT_INJECTED
   * (once) and changes nothing; see grt_exec_inject_failure. */
  uint64_t fail_thread_create_at; /* threads clock: the Nth worker thread of grt_exec_create */
  uint64_t fail_stream_create_at; /* user and per-thread default streams */
  uint64_t fail_event_create_at;  /* events (grt_event_create and the allocator hook's events) */
  uint64_t fail_user_event_create_at;
} grt_exec_config;

/* Fills cfg with the defaults above. */
GRT_API void grt_exec_config_default(grt_exec_config *cfg);

/* Creates an exec (workers start at once under GRT_CLOCK_THREADS). On failure
 * *out is NULL and nothing leaks. GRT_ERR_INVALID_ARG for a borrowed device
 * without host backing or out-of-range slots. */
GRT_API GRT_MUST_CHECK grt_status grt_exec_create(const grt_exec_config *cfg, grt_exec **out);

/* Waits for all work, stops the workers and frees everything (zombies too),
 * and the device when the exec created it. GRT_ERR_BUSY (nothing changed)
 * while user streams, events or user events are alive, or while the exec's own
 * device still holds segments; GRT_ERR_NOT_PERMITTED from a body;
 * GRT_ERR_NOT_READY (nothing changed) when wait_timeout_ns passed with work
 * pending. NULL: no-op. */
GRT_API GRT_MUST_CHECK grt_status grt_exec_destroy(grt_exec *exec);

/* The device (owned or borrowed); valid for the exec's lifetime. */
GRT_API GRT_MUST_CHECK grt_status grt_exec_get_device(grt_exec *exec, grt_device **out);
GRT_API GRT_MUST_CHECK grt_status grt_exec_get_clock(grt_exec *exec, grt_clock_kind *out);

/* cudaDeviceSynchronize: blocks until every issued op completed (virtual: runs
 * the simulation until then). Returns the sticky error if there is one. */
GRT_API GRT_MUST_CHECK grt_status grt_exec_synchronize(grt_exec *exec);

/* Current time of the exec's clock, ns since creation (virtual: virtual ns). */
GRT_API GRT_MUST_CHECK grt_status grt_exec_now_ns(grt_exec *exec, uint64_t *out);
/* The host spends ns of its own time (an expensive host call such as a pinned
 * allocation): threads: sleeps; virtual: the simulation runs up to now + ns and
 * the virtual clock then stands at least there. GRT_ERR_NOT_PERMITTED in a body. */
GRT_API GRT_MUST_CHECK grt_status grt_exec_host_delay(grt_exec *exec, uint64_t ns);

/* The sticky error (GRT_OK when none); msg (may be NULL) receives its text,
 * e.g. the deadlock cycle with stream and event names. */
GRT_API GRT_MUST_CHECK grt_status grt_exec_get_error(grt_exec *exec, char *msg, size_t msg_size);

/* The modelled duration of a copy (GRT_ENGINE_COPY_H2D/D2H or COMPUTE for D2D
 * and memset) of `bytes` bytes, in ns. */
GRT_API GRT_MUST_CHECK grt_status grt_exec_copy_duration_ns(grt_exec *exec, grt_engine_class engine, uint64_t bytes,
                                            uint64_t *out_ns);

/* ---- streams ---------------------------------------------------------------- */

#define GRT_STREAM_DEFAULT 0u      /* blocking: synchronizes with the legacy default stream */
#define GRT_STREAM_NON_BLOCKING 1u /* exempt from the legacy stream's implicit synchronization */

/* Priority range: [greatest, least] = [-5, 0]; lower number = higher priority. */
GRT_API GRT_MUST_CHECK grt_status grt_exec_stream_priority_range(grt_exec *exec, int *least, int *greatest);

/* Creates a stream; priority is clamped into the range. */
GRT_API GRT_MUST_CHECK grt_status grt_stream_create(grt_exec *exec, unsigned flags, int priority, grt_stream **out);

/* Returns at once; pending work still completes (the stream becomes a zombie).
 * GRT_ERR_NOT_PERMITTED for the legacy and per-thread default streams. */
GRT_API GRT_MUST_CHECK grt_status grt_stream_destroy(grt_stream *s);

/* The legacy default stream (id 0) and the calling thread's per-thread default
 * stream (created on first use); both are owned by the exec. */
GRT_API GRT_MUST_CHECK grt_status grt_exec_legacy_stream(grt_exec *exec, grt_stream **out);
GRT_API GRT_MUST_CHECK grt_status grt_exec_per_thread_stream(grt_exec *exec, grt_stream **out);

/* A name for timelines and deadlock reports (copied, truncated to 31 bytes). */
GRT_API GRT_MUST_CHECK grt_status grt_stream_set_name(grt_stream *s, const char *name);
/* Copies the stream's name ("" when none was set) into buf (truncated). */
GRT_API GRT_MUST_CHECK grt_status grt_stream_get_name(grt_stream *s, char *buf, size_t buf_size);
/* The stable id the allocator layer uses (0 = legacy default stream). */
GRT_API GRT_MUST_CHECK grt_status grt_stream_get_id(grt_stream *s, grt_stream_id *out);
GRT_API GRT_MUST_CHECK grt_status grt_stream_get_priority(grt_stream *s, int *out);
GRT_API GRT_MUST_CHECK grt_status grt_stream_get_flags(grt_stream *s, unsigned *out);
/* Finds a live (or zombie) stream of this exec by id; GRT_ERR_NOT_FOUND. */
GRT_API GRT_MUST_CHECK grt_status grt_exec_stream_from_id(grt_exec *exec, grt_stream_id id, grt_stream **out);

/* GRT_OK when all work issued so far completed, else GRT_ERR_NOT_READY. A
 * query has no side effect on either clock: it starts nothing and (virtual)
 * does not advance time; it may report a deadlock that already holds. */
GRT_API GRT_MUST_CHECK grt_status grt_stream_query(grt_stream *s);
/* Blocks until all work issued so far completed. */
GRT_API GRT_MUST_CHECK grt_status grt_stream_synchronize(grt_stream *s);
/* Work issued to s after this call waits for ev's current snapshot (none if
 * never recorded). GRT_ERR_WRONG_DEVICE for an event of another exec. */
GRT_API GRT_MUST_CHECK grt_status grt_stream_wait_event(grt_stream *s, grt_event *ev);

#define GRT_EVENT_WAIT_DEFAULT 0u  /* cudaEventWaitDefault: as grt_stream_wait_event */
#define GRT_EVENT_WAIT_EXTERNAL 1u /* cudaEventWaitExternal: in a capture, an event wait node */
/* cudaStreamWaitEvent with its flags. DEFAULT is grt_stream_wait_event:
 * while s captures, ev must be an event recorded in the same capture (a fork
 * or join); one recorded outside it is an isolation error
 * (GRT_ERR_CAPTURE_ISOLATION, the capture invalidated; a never-recorded event is a no-op). EXTERNAL is
 * legal only while s captures (GRT_ERR_INVALID_ARG otherwise, nothing
 * changed: CUDA's flag is invalid outside capture): the capture records an
 * event wait node (GRT_GRAPH_NODE_WAIT_EVENT) after s's last node instead
 * of an edge, so ev may have been recorded outside the capture, or not at
 * all; every launch of the graph then waits for ev's record as of the launch
 * (grt_graph_add_event_wait_node). A captured event (last recorded in a
 * capture in progress) has no record a launch could wait for:
 * GRT_ERR_CAPTURED_EVENT, the capture invalidated. Other flags: GRT_ERR_INVALID_ARG. */
GRT_API GRT_MUST_CHECK grt_status grt_stream_wait_event_with_flags(grt_stream *s, grt_event *ev, unsigned flags);

/* ---- ops ---------------------------------------------------------------------- */

typedef void (*grt_host_fn)(void *arg);

typedef struct grt_kernel_desc {
  grt_host_fn fn;           /* the kernel's body, may be NULL (a pure delay) */
  void *arg;                /* passed to fn */
  uint64_t duration_ns;     /* modelled duration, ns */
  grt_engine_class engine;  /* COMPUTE, COPY_H2D or COPY_D2H */
  const char *name;         /* for timelines (copied, 39 bytes), may be NULL */
} grt_kernel_desc;

GRT_API GRT_MUST_CHECK grt_status grt_launch_kernel(grt_stream *s, const grt_kernel_desc *desc);

/* Copies and memset on device buffers (real bytes). Device ranges must lie in a
 * live segment when issued (GRT_ERR_UNKNOWN_POINTER otherwise); if the segment
 * is gone when the op runs, the exec enters a sticky error. Durations follow the
 * bandwidths in the config. Host buffers must stay valid until the op ends. */
GRT_API GRT_MUST_CHECK grt_status grt_memcpy_h2d_async(grt_stream *s, grt_devptr dst, const void *src, uint64_t bytes);
GRT_API GRT_MUST_CHECK grt_status grt_memcpy_d2h_async(grt_stream *s, void *dst, grt_devptr src, uint64_t bytes);
GRT_API GRT_MUST_CHECK grt_status grt_memcpy_d2d_async(grt_stream *s, grt_devptr dst, grt_devptr src, uint64_t bytes);
GRT_API GRT_MUST_CHECK grt_status grt_memset_async(grt_stream *s, grt_devptr dst, int value, uint64_t bytes);

/* cudaLaunchHostFunc: fn(arg) runs after earlier work on s and blocks later work. */
GRT_API GRT_MUST_CHECK grt_status grt_launch_host_func(grt_stream *s, grt_host_fn fn, void *arg);

/* cudaStreamAddCallback: fn(s, status, arg) runs on the host once the work
 * issued to s before it completed, and blocks later work on s, as a host
 * function does. It differs in what it is told and when it runs:
 *  - status is the stream's status: the exec's sticky error when the
 *    callback starts (GRT_OK while there is none; like a CUDA device error,
 *    the sticky error is the status of every stream). A callback still queued
 *    when a sticky error (a deadlock, a failed body) cancels the work runs
 *    anyway, exactly once, with that error, where a host function is
 *    dropped: under threads on a host-function worker soon after, under the
 *    virtual clock in the next synchronizing call or in grt_exec_destroy;
 *  - it is not capturable: into a capturing stream it returns
 *    GRT_ERR_CAPTURE_UNSUPPORTED and invalidates the capture (a host
 *    function becomes a graph node);
 *  - it may not block: grt_user_event_wait in it returns
 *    GRT_ERR_NOT_PERMITTED (CUDA: no synchronization that may depend on
 *    outstanding work), and like every body it gets GRT_ERR_NOT_PERMITTED
 *    from the blocking exec calls.
 * GRT_ERR_INVALID_ARG for a NULL fn or nonzero flags (reserved, as in CUDA);
 * otherwise the errors of a launch (a sticky error queues nothing). */
typedef void (*grt_stream_callback)(grt_stream *s, grt_status status, void *arg);
GRT_API GRT_MUST_CHECK grt_status grt_stream_add_callback(grt_stream *s, grt_stream_callback fn, void *arg,
                                                          unsigned flags);

/* ---- events --------------------------------------------------------------------- */

#define GRT_EVENT_DEFAULT 0u
#define GRT_EVENT_BLOCKING_SYNC 1u  /* synchronize blocks at once instead of spinning first */
#define GRT_EVENT_DISABLE_TIMING 2u /* no timestamps: elapsed time is refused */

GRT_API GRT_MUST_CHECK grt_status grt_event_create(grt_exec *exec, unsigned flags, grt_event **out);
/* Returns at once even if a record is pending (the event becomes a zombie). */
GRT_API GRT_MUST_CHECK grt_status grt_event_destroy(grt_event *ev);
GRT_API GRT_MUST_CHECK grt_status grt_event_set_name(grt_event *ev, const char *name);
/* Snapshot of the work issued to s so far; overwrites an earlier record. */
GRT_API GRT_MUST_CHECK grt_status grt_event_record(grt_event *ev, grt_stream *s);
/* GRT_OK when the snapshot completed (or never recorded), else
 * GRT_ERR_NOT_READY; side-effect free like grt_stream_query. */
GRT_API GRT_MUST_CHECK grt_status grt_event_query(grt_event *ev);
GRT_API GRT_MUST_CHECK grt_status grt_event_synchronize(grt_event *ev);
/* Time between two completed, timing-enabled records. As cudaEventElapsedTime:
 * GRT_ERR_INVALID_HANDLE when either was never recorded or has timing
 * disabled, GRT_ERR_NOT_READY when either is pending, GRT_ERR_CAPTURED_EVENT
 * (invalidating the capture) for a captured one; GRT_ERR_WRONG_DEVICE across
 * execs, GRT_ERR_STATE when a sticky error cancelled a record. */
GRT_API GRT_MUST_CHECK grt_status grt_event_elapsed_time(grt_event *start, grt_event *end, float *ms);
GRT_API GRT_MUST_CHECK grt_status grt_event_elapsed_ns(grt_event *start, grt_event *end, int64_t *ns);

/* ---- blocking user events (the kind that can deadlock) --------------------------- */

/* name (copied, 31 bytes) appears in deadlock reports; may be NULL. */
GRT_API GRT_MUST_CHECK grt_status grt_user_event_create(grt_exec *exec, const char *name, grt_user_event **out);
/* GRT_ERR_BUSY while a stream op or a host thread waits on it or a signal is queued. */
GRT_API GRT_MUST_CHECK grt_status grt_user_event_destroy(grt_user_event *u);
/* Host side: value = max(value, v); releases waiters. */
GRT_API GRT_MUST_CHECK grt_status grt_user_event_signal(grt_user_event *u, uint64_t v);
/* Host side: blocks until value >= v. Allowed inside host functions (the
 * deadlock detector sees the wait); GRT_ERR_DEADLOCK when a cycle is found
 * or nothing can ever signal it (see "waits that cannot end" above);
 * GRT_ERR_NOT_READY after cfg.wait_timeout_ns. */
GRT_API GRT_MUST_CHECK grt_status grt_user_event_wait(grt_user_event *u, uint64_t v);
GRT_API GRT_MUST_CHECK grt_status grt_user_event_value(grt_user_event *u, uint64_t *out);
/* Stream side: an op that sets value = max(value, v) when reached. */
GRT_API GRT_MUST_CHECK grt_status grt_stream_signal_user_event(grt_stream *s, grt_user_event *u, uint64_t v);
/* Stream side: later work on s waits until value >= v. */
GRT_API GRT_MUST_CHECK grt_status grt_stream_wait_user_event(grt_stream *s, grt_user_event *u, uint64_t v);

/* ---- timelines (Chrome trace-event JSON, opens in Perfetto / chrome://tracing) ---- */

/* Writes the ops recorded so far (record_timeline must be on): a track per
 * stream and per engine slot, ops as slices, event edges as flow arrows. */
GRT_API GRT_MUST_CHECK grt_status grt_exec_timeline_write_json(grt_exec *exec, FILE *f);
GRT_API GRT_MUST_CHECK grt_status grt_exec_timeline_save(grt_exec *exec, const char *path);
GRT_API GRT_MUST_CHECK grt_status grt_exec_timeline_clear(grt_exec *exec);
/* Number of op records kept. */
GRT_API GRT_MUST_CHECK grt_status grt_exec_timeline_count(grt_exec *exec, size_t *out);

/* ---- graphs: stream capture, instantiate, launch, update (src/exec/graph*.c) ------
 *
 * Capture: grt_stream_begin_capture(s, mode) turns s into a capturing stream:
 * work issued to it (kernels, copies, memset, host functions) is recorded as
 * nodes of a graph instead of running. An event recorded on a capturing stream
 * is a captured event; a stream that waits on it joins the capture (fork) and
 * records into the same graph; the origin joins it back by waiting on an event
 * recorded on the forked stream. grt_stream_end_capture (on the origin) returns
 * the graph; every forked stream must have joined (its last node is an
 * ancestor of the origin's last node), else GRT_ERR_CAPTURE_UNJOINED and no
 * graph. Every status here is CUDA's error 1:1 (grt_status_to_cuda; the table
 * is in docs/EXEC.md, "Status codes").
 *
 * Illegal during capture (an error, and the capture is invalidated: ops
 * issued to its streams then return GRT_ERR_CAPTURE_INVALIDATED and
 * end-capture returns it with no graph; the streams leave capture mode
 * either way):
 *  - GRT_ERR_CAPTURE_UNSUPPORTED: query or synchronize of a capturing stream;
 *    grt_exec_synchronize while any capture is active (in every mode;
 *    invalidates all); user-event ops, stream callbacks and graph launches
 *    into a capturing stream;
 *  - GRT_ERR_CAPTURED_EVENT: query, synchronize or elapsed time of a captured
 *    event (last recorded in a capture in progress);
 *  - GRT_ERR_CAPTURE_ISOLATION: a wait of a capturing stream on an event
 *    recorded outside the capture;
 *  - GRT_ERR_CAPTURE_MERGE: a wait of a capturing stream on an event of
 *    another capture (invalidates both);
 *  - GRT_ERR_CAPTURE_IMPLICIT: use of the legacy default stream (ops, waits,
 *    records, query, sync) while a blocking stream captures (invalidates the
 *    blocking streams' captures; grt_stream_capture_status of the legacy
 *    stream fails the same way but invalidates nothing), and a wait of the
 *    legacy stream on a captured event (it cannot join a capture);
 *  - GRT_ERR_CAPTURE_UNSUPPORTED, too: CUDA's "potentially unsafe" calls —
 *    grt_stream_query / grt_stream_synchronize / grt_event_query /
 *    grt_event_synchronize of a stream or event outside every capture, and
 *    synchronous device malloc/free (grt_exec_device_malloc/free) — where a
 *    capture forbids them to the calling thread: a capture the thread began
 *    in GLOBAL or THREAD_LOCAL mode, or another thread's GLOBAL capture (as
 *    the thread's own mode, grt_exec_thread_exchange_capture_mode, narrows
 *    it). Each capture that forbids the call is invalidated. RELAXED
 *    captures forbid nothing of this kind. The query of the exec's
 *    completion interface (grt_exec_stream_ops' event_query) is not such a
 *    call: it answers a layer below, which has no mode to choose.
 * Modes also decide who may end a capture: GLOBAL and THREAD_LOCAL captures
 * only from the thread that began them (GRT_ERR_CAPTURE_WRONG_THREAD
 * otherwise, capture unchanged); RELAXED from any thread.
 *
 * Launch: grt_graph_launch(ge, s) enqueues the whole graph as one op of s:
 * it starts after earlier work on s and after the previous launch of ge (on
 * any stream) finished; later work on s waits for all of its nodes. Nodes run
 * on the engines like eager ops (kernels at the launching stream's priority).
 * An executable graph is a flat, pre-resolved array of nodes with precomputed
 * dependency counts: a launch allocates nothing per node.
 *
 * Memory nodes: while s captures, grt_stream_malloc_async_graph /
 * grt_stream_free_async_graph record allocation and free nodes. The block
 * behind an allocation node is taken from the exec's device when the node is
 * made (the captured work needs its address): every launch uses the same
 * address, and no one else gets the block while a graph, an executable graph
 * or a live allocation holds it. A launch allocates it; freed by a free node
 * of the same graph, it is free again when the launch ends. Otherwise the
 * allocation stays live after the launch (later stream work may use it)
 * until it is freed outside the graph: grt_stream_free_async_graph on any
 * stream outside a capture, or a launch of another graph with a free node
 * for it; relaunching before that is GRT_ERR_INVALID_ARG (cudaErrorInvalidValue),
 * and the relaunch after it waits for that free. A graph with memory nodes
 * can have one executable graph at a time (GRT_ERR_BUSY), as in CUDA. The
 * stream-ordered pool (sorder.h) routes its malloc_async/free_async here when
 * the stream is capturing, and its free_async of graph memory at any time.
 *
 * Thread safety: every call may come from any thread; capture state, graphs
 * and executable graphs are guarded by the exec lock. Destroyed graphs and
 * executable graphs stay as zombies until the exec goes (GRT_ERR_INVALID_HANDLE).
 */

typedef struct grt_graph grt_graph;           /* a graph (template): captured or built node by node */
typedef struct grt_graph_exec grt_graph_exec; /* an instantiated, launchable graph */
typedef struct grt_graph_node grt_graph_node; /* a node of a graph (see "explicit construction") */

/* A capture's mode (grt_stream_begin_capture) and a thread's capture
 * interaction mode (grt_exec_thread_exchange_capture_mode) share the values. */
typedef enum grt_capture_mode {
  GRT_CAPTURE_GLOBAL = 0,       /* capture: forbids unsafe calls in this thread and in every other thread
                                   (thread mode, the default: obeys both) */
  GRT_CAPTURE_THREAD_LOCAL = 1, /* capture: forbids unsafe calls in this thread only
                                   (thread mode: ignores other threads' captures) */
  GRT_CAPTURE_RELAXED = 2       /* capture: forbids no unsafe calls; may be ended from any thread
                                   (thread mode: no capture forbids this thread anything) */
} grt_capture_mode;

typedef enum grt_capture_status {
  GRT_CAPTURE_STATUS_NONE = 0,       /* not capturing */
  GRT_CAPTURE_STATUS_ACTIVE = 1,     /* capturing */
  GRT_CAPTURE_STATUS_INVALIDATED = 2 /* capturing, but an illegal call invalidated it */
} grt_capture_status;

/* Begins a capture with s as origin. GRT_ERR_STATE (cudaErrorIllegalState)
 * if s already captures, GRT_ERR_CAPTURE_UNSUPPORTED for the legacy default
 * stream, which CUDA never captures. */
GRT_API GRT_MUST_CHECK grt_status grt_stream_begin_capture(grt_stream *s, grt_capture_mode mode);
/* Ends the capture begun on s; *graph_out receives the graph (NULL on error).
 * Capture unchanged: GRT_ERR_STATE if s does not capture,
 * GRT_ERR_CAPTURE_UNMATCHED if s joined a capture begun on another stream,
 * GRT_ERR_CAPTURE_WRONG_THREAD from the wrong thread (non-relaxed),
 * GRT_ERR_NOMEM. The capture is over: GRT_ERR_CAPTURE_INVALIDATED if it was
 * invalidated, GRT_ERR_CAPTURE_UNJOINED if a forked stream did not join, the
 * exec's sticky error. */
GRT_API GRT_MUST_CHECK grt_status grt_stream_end_capture(grt_stream *s, grt_graph **graph_out);
/* Legal during capture. GRT_ERR_CAPTURE_IMPLICIT (*out unwritten, nothing
 * invalidated) for the legacy stream while a blocking stream captures. */
GRT_API GRT_MUST_CHECK grt_status grt_stream_capture_status(grt_stream *s, grt_capture_status *out);

/* cudaThreadExchangeStreamCaptureMode: sets the calling thread's capture
 * interaction mode to *mode and writes its previous mode to *mode, so that
 * calling it again with what it returned restores the mode (push and pop).
 * The thread's mode decides which captures forbid it the "potentially
 * unsafe" calls above: GLOBAL (every thread's default) its own captures not
 * begun RELAXED and other threads' GLOBAL captures; THREAD_LOCAL only its
 * own; RELAXED none. The streams and events of a capture stay refused in
 * every mode. A mode belongs to one thread and one exec: other threads keep
 * theirs (a thread starts at GLOBAL), another exec has its own, and it goes
 * with the thread or the exec. Any thread may call it at any time.
 * GRT_ERR_INVALID_ARG (nothing changed) for a NULL exec or mode or an unknown
 * mode; GRT_ERR_NOMEM (nothing changed) when no per-thread slot can be had. */
GRT_API GRT_MUST_CHECK grt_status grt_exec_thread_exchange_capture_mode(grt_exec *exec, grt_capture_mode *mode);

GRT_API GRT_MUST_CHECK grt_status grt_graph_destroy(grt_graph *g);
GRT_API GRT_MUST_CHECK grt_status grt_graph_set_name(grt_graph *g, const char *name); /* copied, 39 bytes */
GRT_API grt_status grt_graph_node_count(grt_graph *g, size_t *out);
/* Edges of the graph (after transitive duplicates within one node's list are removed). */
GRT_API GRT_MUST_CHECK grt_status grt_graph_edge_count(grt_graph *g, size_t *out);

/* Instantiates g. GRT_ERR_BUSY when g has memory nodes and an executable
 * graph of it still lives. The executable graph is independent of g. */
GRT_API GRT_MUST_CHECK grt_status grt_graph_instantiate(grt_graph *g, grt_graph_exec **out);
/* Enqueues one replay of ge on s (see above). GRT_ERR_INVALID_ARG for a
 * pointer that is not an executable graph or while an allocation of ge's
 * previous launch is not freed, GRT_ERR_DOUBLE_FREE when a free node of ge
 * names another graph's allocation that is not live, GRT_ERR_INVALID_HANDLE after
 * destroy, GRT_ERR_WRONG_DEVICE across execs, GRT_ERR_CAPTURE_UNSUPPORTED
 * into a capturing stream (invalidating its capture), GRT_ERR_CAPTURED_EVENT
 * when an event wait node's event is captured. A refused launch changes nothing. */
GRT_API GRT_MUST_CHECK grt_status grt_graph_launch(grt_graph_exec *ge, grt_stream *s);

/* cudaGraphExecUpdateResult, with CUDA's values. */
typedef enum grt_graph_update_result {
  GRT_GRAPH_UPDATE_OK = 0,                          /* cudaGraphExecUpdateSuccess */
  GRT_GRAPH_UPDATE_ERROR = 1,                       /* a bad argument; the status says which */
  GRT_GRAPH_UPDATE_TOPOLOGY_CHANGED = 2,            /* node count or edges differ */
  GRT_GRAPH_UPDATE_NODE_TYPE_CHANGED = 3,           /* a node's type differs */
  GRT_GRAPH_UPDATE_FUNCTION_CHANGED = 4,            /* CUDA drivers before 11.2; never returned */
  GRT_GRAPH_UPDATE_PARAMETERS_CHANGED = 5,          /* a copy's direction differs */
  GRT_GRAPH_UPDATE_NOT_SUPPORTED = 6,               /* memory nodes can't be updated */
  GRT_GRAPH_UPDATE_UNSUPPORTED_FUNCTION_CHANGE = 7, /* a kernel's engine differs */
  GRT_GRAPH_UPDATE_ATTRIBUTES_CHANGED = 8,          /* node attributes; the model has none: never returned */
  GRT_GRAPH_UPDATE_NODE_KIND_CHANGED = GRT_GRAPH_UPDATE_NODE_TYPE_CHANGED /* the same result */
} grt_graph_update_result;

/* cudaGraphExecUpdateResultInfo. */
typedef struct grt_graph_update_info {
  grt_graph_update_result result;
  grt_graph_node *error_node;      /* the node of g the failure is about (NULL: not one node) */
  grt_graph_node *error_from_node; /* TOPOLOGY_CHANGED on an edge: the mismatched dependency in g */
} grt_graph_update_info;

/* cudaGraphExecUpdate: updates ge in place from g when g is topologically
 * identical to the graph ge was made from (nodes paired in creation order,
 * dependencies in edge order, child graphs compared as flattened): node
 * parameters (kernel and host functions, arguments, durations, names, copy
 * and memset addresses, sizes and values, events) are replaced for launches
 * issued afterwards; launches already issued run the old ones. Otherwise
 * GRT_ERR_GRAPH_EXEC_UPDATE (cudaErrorGraphExecUpdateFailure), ge unchanged, and
 * *info (may be NULL) says why and names the node of g; a bad argument gives
 * its status with GRT_GRAPH_UPDATE_ERROR. The node handles it names may be
 * made by this call (GRT_ERR_NOMEM when they cannot be). */
GRT_API GRT_MUST_CHECK grt_status grt_graph_exec_update_ex(grt_graph_exec *ge, grt_graph *g,
                                                           grt_graph_update_info *info);
/* grt_graph_exec_update_ex with only the result (result may be NULL). */
GRT_API GRT_MUST_CHECK grt_status grt_graph_exec_update(grt_graph_exec *ge, grt_graph *g,
                                                        grt_graph_update_result *result);
/* GRT_ERR_BUSY while a launch of ge is pending (nothing changed). */
GRT_API GRT_MUST_CHECK grt_status grt_graph_exec_destroy(grt_graph_exec *ge);
/* Node count (a child graph node counts as its graph's nodes plus an entry
 * and an exit marker), and graph-pool bytes held (the blocks of its
 * allocation nodes). */
GRT_API GRT_MUST_CHECK grt_status grt_graph_exec_info(grt_graph_exec *ge, size_t *nodes, uint64_t *pool_bytes);

/* Allocation node: legal only while s captures (GRT_ERR_STATE otherwise).
 * *out is fixed for the node's lifetime. GRT_ERR_OOM / GRT_ERR_SIZE from the device. */
GRT_API GRT_MUST_CHECK grt_status grt_stream_malloc_async_graph(grt_stream *s, uint64_t size, grt_devptr *out);
/* While s captures: a free node for ptr, the address of an allocation node of
 * this capture or of another graph. CUDA's rules: an allocation is freed in
 * its own graph or in other graphs, never both, and once per graph
 * (GRT_ERR_DOUBLE_FREE otherwise). Outside a capture: frees a live graph
 * allocation at this point of s (cudaFreeAsync of graph memory);
 * GRT_ERR_DOUBLE_FREE when it is not live. GRT_ERR_UNKNOWN_POINTER when ptr
 * is not the address of an allocation node of this exec. */
GRT_API GRT_MUST_CHECK grt_status grt_stream_free_async_graph(grt_stream *s, grt_devptr ptr);
/* cudaDeviceGraphMemTrim: returns to the device the graph memory that waited
 * only for its last free to be reached (blocks of destroyed graphs). */
GRT_API GRT_MUST_CHECK grt_status grt_exec_graph_mem_trim(grt_exec *exec);

/* ---- graphs: explicit construction (cudaGraphCreate, cudaGraphAdd*Node, ...) ------
 *
 * A graph built node by node, or a captured one edited: every call below
 * works on either. Dependencies (deps, n_deps) are nodes of the same graph
 * without duplicates (GRT_ERR_INVALID_ARG; another exec's: GRT_ERR_WRONG_DEVICE;
 * a destroyed node: GRT_ERR_INVALID_HANDLE); n_deps = 0 makes a root. The edges
 * form a DAG: an edge that would close a cycle is GRT_ERR_GRAPH_CYCLE (CUDA
 * requires a DAG). A graph with memory nodes keeps its nodes and edges
 * (removing one is GRT_ERR_NOT_PERMITTED) and cannot be a child graph, as in
 * CUDA. Instantiate takes a snapshot: editing the graph later (nodes, edges,
 * a child graph's source) changes no executable graph made before. Every
 * call checks everything before its first change: a failed call changes
 * nothing. *out is written only on success.
 *
 * A node handle stays valid until the exec is destroyed; once its node or
 * graph is destroyed, calls with it return GRT_ERR_INVALID_HANDLE. A captured
 * graph's nodes get handles from grt_graph_get_nodes.
 *
 * Event nodes act at the launch, as the stream calls they stand for do at
 * the point they are issued: a wait node's event is bound when the launch is
 * issued (the launch waits for that snapshot, all of it: the model's
 * granularity, CUDA's nodes may start earlier); a record node records its
 * event at the launch (waits and queries then see the whole launch; its time
 * is the node's). Child graph nodes run a clone of the child taken by the
 * call, flattened into the launch. */

/* cudaGraphNodeType, with CUDA's values (no external semaphore or conditional nodes). */
typedef enum grt_graph_node_type {
  GRT_GRAPH_NODE_KERNEL = 0,
  GRT_GRAPH_NODE_MEMCPY = 1,
  GRT_GRAPH_NODE_MEMSET = 2,
  GRT_GRAPH_NODE_HOST = 3,
  GRT_GRAPH_NODE_GRAPH = 4, /* a child graph */
  GRT_GRAPH_NODE_EMPTY = 5,
  GRT_GRAPH_NODE_WAIT_EVENT = 6,
  GRT_GRAPH_NODE_EVENT_RECORD = 7,
  GRT_GRAPH_NODE_MEM_ALLOC = 10,
  GRT_GRAPH_NODE_MEM_FREE = 11
} grt_graph_node_type;

typedef enum grt_memcpy_kind { GRT_MEMCPY_H2D = 0, GRT_MEMCPY_D2H = 1, GRT_MEMCPY_D2D = 2 } grt_memcpy_kind;

typedef struct grt_memcpy_desc {
  grt_memcpy_kind kind;
  grt_devptr dst; /* H2D, D2D: the device destination */
  grt_devptr src; /* D2H, D2D: the device source */
  void *host;     /* H2D: the source, D2H: the destination; valid while launches may run */
  uint64_t bytes;
} grt_memcpy_desc;

/* cudaGraphCreate: an empty graph of exec (destroy with grt_graph_destroy). */
GRT_API GRT_MUST_CHECK grt_status grt_graph_create(grt_exec *exec, grt_graph **out);
/* The launch's kernel: desc as for grt_launch_kernel (the name is copied). */
GRT_API GRT_MUST_CHECK grt_status grt_graph_add_kernel_node(grt_graph *g, grt_graph_node *const *deps,
                                                            size_t n_deps, const grt_kernel_desc *desc,
                                                            grt_graph_node **out);
GRT_API GRT_MUST_CHECK grt_status grt_graph_add_host_node(grt_graph *g, grt_graph_node *const *deps, size_t n_deps,
                                                          grt_host_fn fn, void *arg, grt_graph_node **out);
/* Device ranges are checked now as for the stream calls (GRT_ERR_UNKNOWN_POINTER). */
GRT_API GRT_MUST_CHECK grt_status grt_graph_add_memcpy_node(grt_graph *g, grt_graph_node *const *deps,
                                                            size_t n_deps, const grt_memcpy_desc *desc,
                                                            grt_graph_node **out);
GRT_API GRT_MUST_CHECK grt_status grt_graph_add_memset_node(grt_graph *g, grt_graph_node *const *deps,
                                                            size_t n_deps, grt_devptr dst, int value, uint64_t bytes,
                                                            grt_graph_node **out);
/* A node that does nothing: an ordering point. */
GRT_API GRT_MUST_CHECK grt_status grt_graph_add_empty_node(grt_graph *g, grt_graph_node *const *deps, size_t n_deps,
                                                           grt_graph_node **out);
GRT_API GRT_MUST_CHECK grt_status grt_graph_add_event_record_node(grt_graph *g, grt_graph_node *const *deps,
                                                                  size_t n_deps, grt_event *ev, grt_graph_node **out);
GRT_API GRT_MUST_CHECK grt_status grt_graph_add_event_wait_node(grt_graph *g, grt_graph_node *const *deps,
                                                                size_t n_deps, grt_event *ev, grt_graph_node **out);
/* Runs a clone of child, taken now; GRT_ERR_NOT_PERMITTED when child has memory nodes. */
GRT_API GRT_MUST_CHECK grt_status grt_graph_add_child_graph_node(grt_graph *g, grt_graph_node *const *deps,
                                                                 size_t n_deps, grt_graph *child,
                                                                 grt_graph_node **out);
/* cudaGraphAddMemAllocNode: *ptr receives the address, fixed for the node's
 * life (memory nodes above; GRT_ERR_OOM / GRT_ERR_SIZE from the device). */
GRT_API GRT_MUST_CHECK grt_status grt_graph_add_mem_alloc_node(grt_graph *g, grt_graph_node *const *deps,
                                                               size_t n_deps, uint64_t size, grt_devptr *ptr,
                                                               grt_graph_node **out);
/* cudaGraphAddMemFreeNode: ptr as for grt_stream_free_async_graph while capturing. */
GRT_API GRT_MUST_CHECK grt_status grt_graph_add_mem_free_node(grt_graph *g, grt_graph_node *const *deps,
                                                              size_t n_deps, grt_devptr ptr, grt_graph_node **out);
/* cudaGraphAddDependencies: to[i] comes to depend on from[i], for i < n.
 * GRT_ERR_INVALID_ARG for an edge that exists (or is given twice),
 * GRT_ERR_GRAPH_CYCLE when one would close a cycle (a node on itself too). */
GRT_API GRT_MUST_CHECK grt_status grt_graph_add_dependencies(grt_graph *g, grt_graph_node *const *from,
                                                             grt_graph_node *const *to, size_t n);
/* cudaGraphRemoveDependencies: GRT_ERR_NOT_FOUND for an edge that does not exist. */
GRT_API GRT_MUST_CHECK grt_status grt_graph_remove_dependencies(grt_graph *g, grt_graph_node *const *from,
                                                                grt_graph_node *const *to, size_t n);
/* cudaGraphDestroyNode: the node and its edges, both ways. */
GRT_API GRT_MUST_CHECK grt_status grt_graph_destroy_node(grt_graph_node *node);
/* cudaGraphGetNodes: nodes NULL: *n = the node count. Else fills up to *n
 * handles in creation order, sets the rest of the *n entries to NULL and
 * writes the number filled to *n. */
GRT_API GRT_MUST_CHECK grt_status grt_graph_get_nodes(grt_graph *g, grt_graph_node **nodes, size_t *n);
GRT_API GRT_MUST_CHECK grt_status grt_graph_node_get_type(grt_graph_node *node, grt_graph_node_type *out);

/* cudaMalloc / cudaFree through the runtime: the synchronous device calls the
 * capture modes restrict (see above); otherwise grt_device_malloc / free. The
 * free of graph memory ends its live allocation at once (GRT_ERR_DOUBLE_FREE
 * when it is not live); the block stays with its graph. */
GRT_API GRT_MUST_CHECK grt_status grt_exec_device_malloc(grt_exec *exec, uint64_t size, grt_devptr *out);
GRT_API GRT_MUST_CHECK grt_status grt_exec_device_free(grt_exec *exec, grt_devptr ptr);

/* ---- per-op times ------------------------------------------------------------------
 * An op issued through one of the _ex calls below gets an id; once it ended,
 * grt_exec_op_times says when it started (began running on its engine; a
 * graph launch: its nodes were released) and when it ended (completed), on
 * the exec's clock: ns since the exec was created, exact under the virtual
 * clock. Retention: the exec keeps the times of the last cfg.op_times_keep
 * ids issued (a ring, allocated with the first id: 24 bytes per entry); an
 * older id is evicted, even if its op is still pending. Ids are per exec,
 * rising, never 0. The timeline is not needed (record_timeline may be off). */

typedef uint64_t grt_op_id;

/* grt_launch_kernel, grt_launch_host_func and grt_graph_launch with *id (may
 * be NULL: the plain call) receiving the op's id; written only on success. A
 * stream that captures turns the op into a graph node, which does not run:
 * *id = 0 there (the graph's launch has its own id). GRT_ERR_NOMEM when the
 * times' ring cannot be allocated (nothing issued). */
GRT_API GRT_MUST_CHECK grt_status grt_launch_kernel_ex(grt_stream *s, const grt_kernel_desc *desc, grt_op_id *id);
GRT_API GRT_MUST_CHECK grt_status grt_launch_host_func_ex(grt_stream *s, grt_host_fn fn, void *arg, grt_op_id *id);
GRT_API GRT_MUST_CHECK grt_status grt_graph_launch_ex(grt_graph_exec *ge, grt_stream *s, grt_op_id *id);

/* When op `id` started and ended (both outputs required). GRT_ERR_NOT_READY
 * before it ended; GRT_ERR_NOT_FOUND for 0, an id this exec never issued, or
 * an evicted one; the sticky error once the exec has one and the op has no
 * times (it was cancelled, or still runs). A query: no side effects. */
GRT_API GRT_MUST_CHECK grt_status grt_exec_op_times(grt_exec *exec, grt_op_id id, uint64_t *start_ns,
                                                    uint64_t *end_ns);

/* ---- completion interface (grt_stream_ops, base.h) ---------------------------------
 * The exec implements grt_stream_ops, so a layer below it (an allocator's
 * record_stream) asks whether a stream's work finished knowing only stream ids.
 * ctx is the exec. An event id is the address of a timing-disabled grt_event it
 * owns, so a caller above the exec may use it as one, e.g. to order a stream
 * after it: grt_stream_wait_event(s, (grt_event *)(uintptr_t)id).
 *   record_event       records a new event on stream `stream`: GRT_ERR_INVALID_ARG
 *                      for a NULL out pointer or a ctx that is not an exec,
 *                      GRT_ERR_NOT_FOUND for an unknown stream id, else any error
 *                      of grt_event_create / grt_event_record; nothing is left
 *                      behind on failure and *event is written only on success.
 *   event_query        1 when the event completed; a failing query (the exec's
 *                      sticky error, an event of another exec) also says 1, so a
 *                      deferred free never waits for ever.
 *   event_synchronize  grt_event_synchronize (an error stays in the exec).
 *   event_destroy      destroys the event; an event of another exec is left alone.
 * The ops keep no state but ctx: they stay valid as long as the exec. */
GRT_API GRT_MUST_CHECK grt_status grt_exec_stream_ops(grt_exec *exec, grt_stream_ops *out);

/* ---- fault injection (tests; src/exec/fault.c) ------------------------------------ */

typedef enum grt_exec_fault {
  GRT_EXEC_FAULT_THREAD_CREATE = 0, /* worker threads: only at exec creation (config field) */
  GRT_EXEC_FAULT_STREAM_CREATE = 1, /* grt_stream_create, a per-thread default stream's creation */
  GRT_EXEC_FAULT_EVENT_CREATE = 2,  /* grt_event_create, the stream ops' record_event */
  GRT_EXEC_FAULT_USER_EVENT_CREATE = 3,
  GRT_EXEC_FAULT_COUNT = 4
} grt_exec_fault;

/* Arms a one-shot failure: the nth creation of `kind` from now (1 = the next)
 * returns GRT_ERR_FAULT_INJECTED and changes nothing; nth = 0 disarms. Later
 * creations succeed. GRT_ERR_UNSUPPORTED for THREAD_CREATE (workers are created
 * with the exec: use cfg.fail_thread_create_at). */
GRT_API GRT_MUST_CHECK grt_status grt_exec_inject_failure(grt_exec *exec, grt_exec_fault kind, uint64_t nth);
/* How many creations of `kind` failed by injection since the exec was created. */
GRT_API GRT_MUST_CHECK grt_status grt_exec_injected_failures(grt_exec *exec, grt_exec_fault kind, uint64_t *out);

#ifdef __cplusplus
}
#endif
#endif /* GPURT_EXEC_H */
