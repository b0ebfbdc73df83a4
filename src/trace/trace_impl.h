/* trace_impl.h — the grt_trace object and the helpers its readers share (internal).
 *
 * Readers never build a grt_trace directly: they feed a builder (event.c),
 * which interns streams, assigns dense allocation ids by matching keys
 * (PyTorch: addresses; native/RMM/minimalloc: the file's ids or pointers),
 * counts events per kind and attaches segments with their blocks. On any
 * error the reader calls grt__tb_abort and nothing leaks.
 *
 * Stacks (frames.c): the builder interns strings, frames and stacks, each
 * distinct one stored once, so their tables grow with the distinct content
 * of the input, never with the number of events that repeat it.
 *
 * Text readers work on (pointer, length) slices of an input that is not
 * NUL-terminated; text.c holds the bounded number parsers and field splitters.
 */
#ifndef GRT_TRACE_TRACE_IMPL_H
#define GRT_TRACE_TRACE_IMPL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/u64map.h"
#include "gpurt/trace.h"

/* A (pointer, length) view of input bytes, not NUL-terminated. */
typedef struct grt__slice {
  const char *p;
  size_t n;
} grt__slice;

struct grt_trace {
  grt_trace_format format;
  int device;
  int n_devices;
  grt_trace_event *events;
  size_t n_events, cap_events;
  uint64_t n_ids;
  grt_stream_id *streams;
  size_t n_streams, cap_streams;
  grt_trace_segment *segments;
  size_t n_segments, cap_segments;
  grt_trace_block *blocks; /* all segments' blocks, segment after segment */
  size_t n_blocks, cap_blocks;
  grt_trace_alloc_settings settings;
  size_t count[GRT_TRACE_KIND_COUNT];
  bool has_segments, has_traces;
  /* stacks (frames.c) */
  char *strs;                    /* the distinct strings, each NUL-terminated, back to back */
  size_t n_str_bytes;
  grt_trace_frame *frames;       /* the distinct frames; their pointers are set when finished */
  size_t n_frames;
  uint32_t *entry_frame;         /* every stack's frame indices, stack after stack */
  grt_trace_frame *entries;      /* the same entries as frames (built when finished) */
  size_t n_entries;
  size_t *stack_end;             /* stack s (1-based) is entries [stack_end[s-2] (0 for s = 1), stack_end[s-1]) */
  size_t n_stacks;
  uint32_t *event_stack;         /* per event; NULL while no event has a stack */
  size_t frames_skipped;
};

/* An open-addressing set of indices keyed by 64-bit hashes (frames.c). */
typedef struct grt__itab {
  uint32_t *slot; /* index + 1; 0 = empty */
  uint64_t *hash; /* the hash of the slot's entry */
  size_t mask, count;
} grt__itab;

/* What only building needs, freed when the trace is finished or aborted. */
typedef struct grt__stacks_build {
  grt__itab str_tab, frame_tab, stack_tab;
  struct grt__str_ref {
    size_t off, len;        /* where in t->strs, without the NUL */
  } *str;                   /* per distinct string */
  size_t n_strs, cap_strs, cap_str_bytes;
  uint32_t *frame_str;      /* per distinct frame: name and filename string indices */
  size_t cap_frames, cap_entries, cap_stacks;
  size_t n_event_stack, cap_event_stack; /* event_stack entries written / allocated */
  uint32_t *pending;        /* the stack being read: frame indices, innermost first */
  size_t n_pending, cap_pending;
} grt__stacks_build;

/* ---- builder (event.c) ---- */
typedef struct grt__tb {
  grt_trace *t;
  grt__u64map live;       /* key -> (id << 1 | unmatched) + 1, for allocations not yet free_completed */
  grt__u64map stream_idx; /* stream value -> index + 1 (UINT64_MAX handled apart) */
  int64_t max_stream_idx; /* index of stream value UINT64_MAX, or -1 */
  size_t *seg_first;      /* per segment: index of its first block in t->blocks */
  size_t cap_seg_first;
  grt__stacks_build sb;
} grt__tb;

grt_status grt__tb_init(grt__tb *b, grt_trace_format format);
void grt__tb_abort(grt__tb *b);
/* Fixes the segments' block pointers and the frames' strings, frees the
 * builder's maps, hands over the trace. On failure (GRT_ERR_NOMEM) it has
 * aborted the build itself: *out is untouched and nothing leaks. */
grt_status grt__tb_finish(grt__tb *b, grt_trace **out);
grt_status grt__tb_stream(grt__tb *b, grt_stream_id value, uint32_t *index);
/* Appends an event. For alloc/free_* kinds `key` names the allocation:
 * GRT_ERR_STATE when an alloc's key is still live; GRT_ERR_INVALID_ARG for
 * key UINT64_MAX. flags: GRT_TRACE_F_TIME / _ADDR (UNMATCHED is derived). */
grt_status grt__tb_event(grt__tb *b, grt_trace_kind kind, uint64_t key, uint64_t size,
                         grt_stream_id stream, int64_t time, uint64_t addr, unsigned flags);
/* Forgets every event (and the ids and streams they named); frames, stacks and segments stay. */
void grt__tb_reset_events(grt__tb *b);
/* Room for n more events, exactly (a reader that knows their number saves the doubling's slack). */
grt_status grt__tb_reserve_events(grt__tb *b, size_t n);
/* Adds a segment (its blocks pointer/count are ignored); blocks added next belong to it. */
grt_status grt__tb_segment(grt__tb *b, const grt_trace_segment *seg);
grt_status grt__tb_block(grt__tb *b, const grt_trace_block *blk);
void grt__trace_free(grt_trace *t);

/* Grows *arr (of *cap elements of elem bytes) to hold need, doubling; false when out of memory. */
bool grt__grow(void **arr, size_t *cap, size_t need, size_t elem);
/* A 64-bit hash of n bytes (frames.c). */
uint64_t grt__hash_bytes(const void *p, size_t n, uint64_t seed);

/* ---- stacks (frames.c) ----
 * Interning: equal content gives the same index. A string must not contain
 * a NUL byte (GRT_ERR_INVALID_ARG); GRT_ERR_SIZE past 2^32-2 distinct
 * strings, frames or stacks (an input of many gigabytes). */
grt_status grt__tb_frame(grt__tb *b, grt__slice name, grt__slice filename, int64_t line, uint32_t *index);
/* Appends frame `index` (from grt__tb_frame) to the pending stack. */
grt_status grt__tb_stack_push(grt__tb *b, uint32_t index);
/* Interns the pending stack and empties it: *id is its stack id, 0 when it was empty. */
grt_status grt__tb_stack_end(grt__tb *b, uint32_t *id);
void grt__tb_stack_clear(grt__tb *b);
/* Sets the stack id of the event appended last (id <= n_stacks). */
grt_status grt__tb_event_stack(grt__tb *b, uint32_t id);
/* Fills the frames' string pointers and the stacks' frame copies; frees the build tables. */
grt_status grt__stacks_finish(grt__tb *b);
void grt__stacks_build_free(grt__stacks_build *sb);
void grt__stacks_free(grt_trace *t);
/* Bytes of the finished frame tables (grt_trace_info.stack_bytes). */
size_t grt__stacks_bytes(const grt_trace *t);

/* ---- errors (trace.c) ---- */
#if defined(__GNUC__)
#define GRT__PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#define GRT__PRINTF(a, b)
#endif
/* Sets err's position and reason (err may be NULL); file is left as set by the caller. */
void grt__trace_err(grt_trace_error *err, uint64_t line, uint64_t offset, bool has_offset,
                    const char *fmt, ...) GRT__PRINTF(5, 6);
void grt__trace_err_file(grt_trace_error *err, const char *name);

/* ---- readers: each parses a whole in-memory input ---- */
grt_status grt__read_native(const char *data, size_t len, grt_trace **out, grt_trace_error *err);
grt_status grt__read_pytorch(const unsigned char *data, size_t len, int device, grt_trace **out,
                             grt_trace_error *err);
grt_status grt__read_rmm(const char *data, size_t len, grt_trace **out, grt_trace_error *err);
grt_status grt__read_minimalloc(const char *data, size_t len, grt_trace **out, grt_trace_error *err);

/* ---- text helpers (text.c) ---- */

/* Iterates lines of a buffer; strips a trailing '\r'. */
typedef struct grt__lines {
  const char *data;
  size_t len, pos;
  uint64_t lineno; /* of the line last returned, 1-based */
  size_t offset;   /* byte offset of the line last returned */
} grt__lines;

void grt__lines_init(grt__lines *it, const char *data, size_t len);
bool grt__lines_next(grt__lines *it, grt__slice *line);
/* Lines of a stream, as grt__lines_next cuts them, handed to fn in order;
 * memory is one buffer of about max_line bytes. A line longer than max_line
 * is a parse error at its line; fn's first nonzero status stops the read and
 * is returned; a read error is GRT_ERR_IO. */
typedef grt_status (*grt__line_fn)(void *ctx, grt__slice line, uint64_t lineno, size_t offset, grt_trace_error *err);
grt_status grt__read_lines(FILE *f, size_t max_line, grt__line_fn fn, void *ctx, grt_trace_error *err);

grt__slice grt__slice_trim(grt__slice s);
/* s without a leading UTF-8 byte order mark (readers take it on a first line). */
grt__slice grt__slice_skip_bom(grt__slice s);
bool grt__slice_eq(grt__slice s, const char *lit);
/* Splits on `sep` (',' for CSV; ' ' meaning runs of blanks). Returns the
 * number of fields, or max + 1 when there are more than max. */
size_t grt__split(grt__slice line, char sep, grt__slice *fields, size_t max);
/* Strict parsers: the whole slice must be the number; false on overflow. */
bool grt__parse_u64(grt__slice s, uint64_t *out);     /* decimal */
bool grt__parse_hex(grt__slice s, uint64_t *out);     /* hex, optional 0x/0X */
bool grt__parse_u64_any(grt__slice s, uint64_t *out); /* 0x-prefixed hex or decimal */
bool grt__parse_i64(grt__slice s, int64_t *out);      /* optional '-', decimal */
bool grt__parse_double(grt__slice s, double *out);
/* Copies s into buf (cap >= 8) for messages: at most ~40 chars, non-printables as '?'. */
const char *grt__quote(grt__slice s, char *buf, size_t cap);

#endif
