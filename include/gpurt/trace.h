/* gpurt/trace.h — allocation traces: one event model for every input format.
 *
 * A trace is an ordered array of events (alloc, free_requested, free_completed,
 * segment_*, oom, snapshot) plus metadata. Readers exist for:
 *   - the native text format (docs/TRACE_FORMAT.md), also written by gpurt;
 *   - PyTorch memory snapshots (`torch.cuda.memory._dump_snapshot` pickles),
 *     read by a self-contained C reader of the plain-data pickle subset: no
 *     Python needed, and every opcode that could name a global is refused;
 *   - RAPIDS RMM logging CSV (`Thread,Time,Action,Pointer,Size,Stream`);
 *   - google/minimalloc CSV (`id,lower,upper,size`).
 *
 * Ids. Every alloc gets an id; the frees of that allocation carry the same id,
 * so a replayer finds the live allocation in O(1) (an array indexed by id).
 * In a loaded grt_trace ids are dense, 0..n_ids-1, numbered in order of first
 * appearance. PyTorch traces have no ids: an alloc at address A is freed by
 * the next free_requested/free_completed at A. A free whose allocation is not
 * in the trace (the block was live when recording started) gets a fresh id
 * and the flag GRT_TRACE_F_UNMATCHED. Events other than alloc/free_* carry
 * id GRT_TRACE_NO_ID. The input's own key of an allocation (a native or
 * minimalloc id, an RMM pointer, a PyTorch address) may be any value but
 * 2^64-1, which readers refuse (GRT_ERR_PARSE, naming the field): a streamed
 * event carries the file's id, which must never read as GRT_TRACE_NO_ID.
 * Every other field takes its whole range: streams, sizes and addresses
 * 2^64-1 included.
 *
 * Frees. free_completed is when the block becomes reusable; free_requested
 * (PyTorch only: the user's free, which may wait on stream events) only moves
 * statistics. Formats without the distinction (native may have both, RMM and
 * minimalloc do not) emit free_completed only.
 *
 * Streams are interned: an event's `stream` is an index into the trace's
 * streams[] array of the recorded stream values (0 is the default stream).
 *
 * Stacks. PyTorch snapshots record the call stack of every event, block and
 * segment; the same stacks recur across millions of events, so a trace
 * stores each distinct frame once (its strings interned) and each distinct
 * stack once, and events, blocks and segments name a stack by its id:
 * 1..n_stacks, 0 = no frames. The tables are bounded by the input's size.
 * grt_trace_stack gives a stack's frames, grt_trace_frames_fold the ones
 * worth showing.
 *
 * Errors. Malformed input yields GRT_ERR_PARSE and a grt_trace_error naming
 * the file, the line (text formats) or byte offset (pickles) and the reason.
 * Readers never crash on hostile input, bound their memory by the input size,
 * and leak nothing on error.
 *
 * Thread safety: a loaded grt_trace is immutable; any number of threads may
 * read it concurrently. Distinct calls share no state.
 */
#ifndef GPURT_TRACE_H
#define GPURT_TRACE_H

#include <stdbool.h>
#include <stdio.h>

#include "gpurt/base.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum grt_trace_format {
  GRT_TRACE_FORMAT_AUTO = 0,   /* detect from the content (pickle magic, header line) */
  GRT_TRACE_FORMAT_NATIVE,     /* docs/TRACE_FORMAT.md */
  GRT_TRACE_FORMAT_PYTORCH,    /* torch.cuda.memory._dump_snapshot pickle */
  GRT_TRACE_FORMAT_RMM,        /* RMM logging_resource_adaptor CSV */
  GRT_TRACE_FORMAT_MINIMALLOC  /* minimalloc id,lower,upper,size CSV */
} grt_trace_format;

typedef enum grt_trace_kind {
  GRT_TRACE_ALLOC = 0,       /* id, size = requested bytes, stream, addr (PyTorch/RMM: recorded) */
  GRT_TRACE_FREE_REQUESTED,  /* id, size; stats only */
  GRT_TRACE_FREE_COMPLETED,  /* id, size; the block becomes reusable */
  GRT_TRACE_SEGMENT_ALLOC,   /* addr, size, stream: a device malloc (cudaMalloc) */
  GRT_TRACE_SEGMENT_FREE,    /* addr, size, stream: a device free */
  GRT_TRACE_SEGMENT_MAP,     /* addr, size, stream: expandable segment pages mapped */
  GRT_TRACE_SEGMENT_UNMAP,   /* addr, size, stream: expandable segment pages unmapped */
  GRT_TRACE_OOM,             /* a failed alloc of size on stream; PyTorch: addr = free device bytes */
  GRT_TRACE_SNAPSHOT,        /* a memory snapshot was taken here */
  GRT_TRACE_KIND_COUNT
} grt_trace_kind;

#define GRT_TRACE_NO_ID UINT64_MAX

/* Event flags. */
#define GRT_TRACE_F_TIME 0x01u      /* `time` is valid */
#define GRT_TRACE_F_ADDR 0x02u      /* `addr` is valid */
#define GRT_TRACE_F_UNMATCHED 0x04u /* a free whose alloc is not in the trace (live at its start) */

/* One event: 40 bytes. */
typedef struct grt_trace_event {
  uint64_t id;      /* allocation id (alloc/free_*), else GRT_TRACE_NO_ID */
  uint64_t size;    /* bytes (alloc: requested size) */
  uint64_t addr;    /* recorded device address when GRT_TRACE_F_ADDR, else 0 */
  int64_t time;     /* when GRT_TRACE_F_TIME: PyTorch/RMM microseconds, minimalloc steps */
  uint32_t stream;  /* index into the trace's streams[] */
  uint8_t kind;     /* grt_trace_kind */
  uint8_t flags;    /* GRT_TRACE_F_* */
  uint16_t reserved;
} grt_trace_event;

/* PyTorch snapshot block states. */
typedef enum grt_trace_block_state {
  GRT_TRACE_BLOCK_INACTIVE = 0,       /* free (cached) */
  GRT_TRACE_BLOCK_ACTIVE_ALLOCATED,   /* allocated */
  GRT_TRACE_BLOCK_ACTIVE_PENDING_FREE /* freed, waiting on stream events */
} grt_trace_block_state;

typedef struct grt_trace_block {
  uint64_t addr;           /* computed from the segment when the snapshot omits it */
  uint64_t size;           /* bytes */
  uint64_t requested_size; /* bytes the user asked for (0 for inactive blocks) */
  grt_trace_block_state state;
  uint32_t stack;          /* the allocation's stack id (0 = no frames) */
} grt_trace_block;

/* A segment of the snapshot's final `segments` list (chosen device only). */
typedef struct grt_trace_segment {
  uint64_t addr;
  uint64_t total_size;          /* bytes */
  grt_stream_id stream;         /* the recorded stream value (not an index) */
  bool is_large;                /* segment_type 'large' (else 'small') */
  bool is_expandable;
  uint64_t pool_id[2];          /* segment_pool_id: {0, 0} is the default pool, else a private pool
                                   (CUDA graph capture, torch.cuda.MemPool) */
  const grt_trace_block *blocks; /* owned by the trace; in address order */
  size_t n_blocks;
  uint32_t stack;               /* the stack of the segment's device allocation (0 = no frames) */
} grt_trace_segment;

/* One frame of a recorded call stack (PyTorch: a {'name', 'filename',
 * 'line'} dict). The strings are NUL-terminated, never NULL, owned by the
 * trace and interned: equal strings of one trace are one pointer. */
typedef struct grt_trace_frame {
  const char *name;     /* a Python function, or a demangled C++ symbol */
  const char *filename; /* the source file; "??" or "" where the unwinder found none */
  int64_t line;         /* as recorded: 0 for most C++ frames, -1 where Python had no line */
} grt_trace_frame;

#define GRT_TRACE_RP2_INTERVALS 16

/* PyTorch `allocator_settings` (defaults when absent; see `present`). */
typedef struct grt_trace_alloc_settings {
  bool present;                 /* the snapshot had allocator_settings */
  bool expandable_segments;
  int64_t max_split_size;       /* bytes; -1 = unlimited */
  double garbage_collection_threshold; /* 0 = off */
  /* divisions for sizes in [2^i MiB, 2^(i+1) MiB) (i = 0 also covers smaller
   * sizes, the last entry also larger ones); 0 or 1 = off */
  uint32_t roundup_power2_divisions[GRT_TRACE_RP2_INTERVALS];
} grt_trace_alloc_settings;

/* Everything a loaded trace holds; pointers are owned by the trace and valid until it is destroyed. */
typedef struct grt_trace_info {
  grt_trace_format format;   /* the format it was read from */
  int device;                /* PyTorch: the device_traces[] entry read; else 0 */
  int n_devices;             /* PyTorch: number of device_traces; else 1 */
  const grt_trace_event *events;
  size_t n_events;
  uint64_t n_ids;            /* ids are 0..n_ids-1 */
  const grt_stream_id *streams; /* stream values by index */
  size_t n_streams;
  const grt_trace_segment *segments; /* PyTorch final segments; else none */
  size_t n_segments;
  grt_trace_alloc_settings settings;
  size_t count[GRT_TRACE_KIND_COUNT]; /* events per kind */
  bool has_segments;         /* PyTorch: the snapshot has a `segments` list (other formats: true) */
  bool has_traces;           /* PyTorch: the snapshot has `device_traces` (other formats: true) */
  const uint32_t *event_stack; /* per event, its stack id (0 = no frames); NULL when no event has one */
  size_t n_stacks;           /* stack ids are 1..n_stacks (grt_trace_stack) */
  const grt_trace_frame *frames; /* the distinct frames, in order of first appearance */
  size_t n_frames;
  size_t frames_skipped;     /* PyTorch: `frames` values that were malformed in part or whole, one per
                                event, block or segment; their bad entries were dropped (docs/TRACE_FORMAT.md) */
  size_t stack_bytes;        /* host bytes of the frame tables: strings, frames, stacks, event_stack */
} grt_trace_info;

typedef struct grt_trace grt_trace;

/* Where and why reading failed. `line` is 1-based for text formats (0 when
 * not applicable); `offset` is the byte offset (pickles; text: line start). */
typedef struct grt_trace_error {
  char file[256];    /* path, or the name given to grt_trace_load_buffer (truncated) */
  uint64_t line;
  uint64_t offset;
  bool has_offset;   /* binary input: report the offset, not the line */
  char reason[256];  /* e.g. "size field 'abc' is not a number" */
} grt_trace_error;

typedef struct grt_trace_load_config {
  grt_trace_format format; /* default GRT_TRACE_FORMAT_AUTO */
  int device;              /* PyTorch: which device_traces[] entry; default 0 */
} grt_trace_load_config;

GRT_API void grt_trace_load_config_default(grt_trace_load_config *cfg);

/* What a recorded run itself shows (PyTorch snapshots; other formats give
 * what their events and segments hold). The start is derived backwards from
 * the final segments through every segment, alloc and free_completed event:
 * memory in use before recording began counts at the start and in the peaks.
 * Requested bytes are what the program asked for (the events' sizes). */
typedef struct grt_trace_recorded {
  uint64_t reserved_start, reserved_peak, reserved_end;   /* segments (mapped pages: expandable) */
  uint64_t reserved_peak_event;
  uint64_t requested_start, requested_peak, requested_end; /* live requested bytes */
  uint64_t requested_peak_event;
  uint64_t allocated_end;                    /* the final active blocks' sizes */
  uint64_t device_mallocs, device_frees;     /* segment_alloc + segment_map / segment_free + segment_unmap */
  uint64_t ooms;                             /* oom events */
  uint64_t device_memory;                    /* at the first oom: reserved + the free device bytes
                                                recorded, the memory the process could have had
                                                (0: no oom recorded) */
  uint64_t unmatched_frees;                  /* frees of blocks allocated before recording began */
  bool partial;                              /* memory was live at the start (history ring buffer wrapped,
                                                or recording began mid-run) */
  uint64_t device_full_event;                /* the first release a malloc made because cudaMalloc failed
                                                (its stack says so; the retried cudaMalloc follows it):
                                                the device was full there. UINT64_MAX: none */
  uint64_t device_full_below;                /* there: reserved + that cudaMalloc's size, more than the
                                                process could have had (0: none) */
  uint64_t device_full_held;                 /* and what it held once the retry succeeded: reserved less the
                                                release plus that size, at most what it could have had */
} grt_trace_recorded;

/* What a release run's first event's stack says made it (grt_trace_release_origin). */
typedef enum grt_release_origin {
  GRT_RELEASE_UNKNOWN = 0,      /* no stack, or one that names neither */
  GRT_RELEASE_EMPTY_CACHE,      /* emptyCache (C++) or torch/cuda/memory.py's empty_cache */
  GRT_RELEASE_MALLOC            /* a malloc's release path: DeviceCachingAllocator::malloc, or Python frames
                                   only (the allocating code's) */
} grt_release_origin;

/* PyTorch logs a segment free with the context of the call that freed it:
 * what made the release whose first event has this stack. */
GRT_API grt_release_origin grt_trace_release_origin(const grt_trace *trace, uint32_t stack);

GRT_API GRT_MUST_CHECK grt_status grt_trace_recorded_figures(const grt_trace *trace, grt_trace_recorded *out);

/* Reads a whole trace file. cfg may be NULL (defaults); err may be NULL.
 * On failure *out is NULL, nothing leaks, and err says where and why:
 * GRT_ERR_IO (cannot open/read), GRT_ERR_PARSE (malformed), GRT_ERR_NOMEM,
 * GRT_ERR_INVALID_ARG (bad arguments or device out of range). */
GRT_API GRT_MUST_CHECK grt_status grt_trace_load(const char *path, const grt_trace_load_config *cfg,
                                                 grt_trace **out, grt_trace_error *err);

/* As grt_trace_load, from memory (data is not retained). `name` appears in
 * errors (may be NULL: "<buffer>"). len 0 is a parse error. */
GRT_API GRT_MUST_CHECK grt_status grt_trace_load_buffer(const void *data, size_t len, const char *name,
                                                        const grt_trace_load_config *cfg, grt_trace **out,
                                                        grt_trace_error *err);

/* grt_trace_destroy(NULL) is a no-op. */
GRT_API GRT_MUST_CHECK grt_status grt_trace_destroy(grt_trace *trace);

/* Fills *out; its pointers stay valid until the trace is destroyed. */
GRT_API GRT_MUST_CHECK grt_status grt_trace_get_info(const grt_trace *trace, grt_trace_info *out);

/* The frames of stack id `stack`, innermost first as PyTorch records them;
 * valid until the trace is destroyed. Stack 0 gives *frames = NULL, *n = 0.
 * GRT_ERR_INVALID_ARG for a NULL argument or an id above n_stacks (the
 * outputs are then left as they were). */
GRT_API GRT_MUST_CHECK grt_status grt_trace_stack(const grt_trace *trace, uint32_t stack,
                                                  const grt_trace_frame **frames, size_t *n);

/* Which frames of a stack (innermost first) to show, and in what order.
 * Writes the indices of the frames to show into keep[0..cap) and returns how
 * many there are (possibly more than cap: then only the first cap are
 * written; keep may be NULL when cap is 0). The rule (docs/TRACE_FORMAT.md,
 * "Folding stacks"), each group innermost first:
 *   1. Plumbing is dropped: every frame whose filename does not end in ".py"
 *      and that is the recorder or the allocator (names with unwind::unwind,
 *      CapturedTraceback::, gather_with_cpp; CUDACachingAllocator in the name
 *      or filename), PyTorch's C++ and the bindings (a function qualified
 *      by c10::, at::, torch::, std::, pybind11::, or named THP...,
 *      dynamo_...), the CPython interpreter
 *      (Py..., _Py...; files under Objects/, Python/, Include/, Modules/,
 *      Parser/; "<frozen ...>"), libc and threads (__libc_..., __clone...,
 *      start_thread, _start; files under sysdeps/, csu/, nptl/), a frame of
 *      unknown file ("??") or unnamed, and every frame memory_viz's own
 *      frame filter omits (torch/cuda/_memory_viz.py).
 *   2. Shown: the user's Python frames (".py" files outside torch's package:
 *      not under site-packages/torch/, dist-packages/torch/, pytorch/torch/,
 *      nor torchinductor_* generated code), then the remaining native frames.
 *   3. If none: torch's own Python frames.
 *   4. If none: autograd's backward nodes (torch::autograd::generated::...),
 *      which name the operator on a backward-engine thread.
 *   5. If none: the innermost frame that is neither recorder nor allocator.
 * Pure: no allocation, no state; frames NULL gives 0. */
GRT_API size_t grt_trace_frames_fold(const grt_trace_frame *frames, size_t n, size_t *keep, size_t cap);

/* Streaming native reader: calls fn once per event in file order, without
 * keeping events, so memory stays constant (plus the stream table). Ids are
 * the file's own (unique among live allocations, possibly reused after the
 * free_completed; not remapped). `stream` is the recorded stream value and
 * ev->stream its index in first-seen order. Metadata lines are validated and
 * skipped, except %frame and %stack lines, which are skipped unread at any
 * length; an event's stack field is checked to be a number and dropped.
 * A nonzero status from fn stops the read and is returned (err reason
 * "stopped by callback"). */
typedef grt_status (*grt_trace_event_fn)(void *ctx, const grt_trace_event *ev, grt_stream_id stream);
GRT_API GRT_MUST_CHECK grt_status grt_trace_read_native_stream(const char *path, grt_trace_event_fn fn, void *ctx,
                                                               grt_trace_error *err);
/* The same over an open stream (a pipe, a decompressor, standard input), read
 * to its end and not closed; name labels err. */
GRT_API GRT_MUST_CHECK grt_status grt_trace_read_native_stream_file(FILE *f, const char *name, grt_trace_event_fn fn,
                                                                    void *ctx, grt_trace_error *err);
/* The streaming reader of RMM logging_resource_adaptor CSV (the rows of
 * grt_trace_load's RMM reader, handed to fn as read): an event's id is its
 * pointer (unique while allocated, reused after its free, as a native id),
 * an allocate failure's is GRT_TRACE_NO_ID. */
GRT_API GRT_MUST_CHECK grt_status grt_trace_read_rmm_stream_file(FILE *f, const char *name, grt_trace_event_fn fn,
                                                                 void *ctx, grt_trace_error *err);

/* Writes the trace in the native format (lossless for everything in
 * grt_trace_info except `count`, which is recomputed, and `frames_skipped`;
 * frames and stacks keep their ids). */
GRT_API GRT_MUST_CHECK grt_status grt_trace_write_native(const grt_trace *trace, FILE *f);
/* Line-at-a-time writer for traces too large to hold: the header line, then
 * one line per event (`stream` is the stream value; ev->stream is ignored). */
GRT_API GRT_MUST_CHECK grt_status grt_trace_write_native_header(FILE *f);
GRT_API GRT_MUST_CHECK grt_status grt_trace_write_native_event(FILE *f, const grt_trace_event *ev,
                                                               grt_stream_id stream);
GRT_API GRT_MUST_CHECK grt_status grt_trace_save_native(const grt_trace *trace, const char *path, grt_trace_error *err);

/* Formats err as "file:line: reason" or "file: byte N: reason" into buf. */
GRT_API GRT_MUST_CHECK grt_status grt_trace_error_format(const grt_trace_error *err, char *buf, size_t buf_size);

/* Names: "alloc", "free_requested", ...; "pytorch", "native", ... Never NULL. */
GRT_API const char *grt_trace_kind_name(grt_trace_kind kind);
GRT_API const char *grt_trace_format_name(grt_trace_format format);

#ifdef __cplusplus
}
#endif
#endif /* GPURT_TRACE_H */
