/* native.c — the native text trace format: reader (whole and streaming) and writer.
 *
 * Format (docs/TRACE_FORMAT.md is the contract): a first line
 * "gpurt-trace 1"; then one record per line: blank lines and '#' comments are
 * skipped, '%' lines carry metadata (device, allocator settings, frames and
 * stacks, segments and their blocks), every other line is one event:
 *     <kind> <id|-> [<size|-> [<stream|-> [<time|-> [<addr|->]]]] [@<stack>]
 * The same line parser serves the whole-file reader (which feeds the builder,
 * remapping ids densely) and the streaming reader (which hands each event to
 * a callback and keeps nothing but the stream table). Frames and stacks are
 * defined once (%frame, %stack) before the lines that name them; the
 * streaming reader skips their definitions unread, at any length, since a
 * deep C++ stack can be longer than its line limit.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "trace/trace_impl.h"

#define NATIVE_MAGIC "gpurt-trace 1"
#define STREAM_MAX_LINE 4096
#define STREAM_CHUNK 65536

typedef struct nat_event {
  grt_trace_kind kind;
  uint64_t id;
  uint64_t size;
  grt_stream_id stream;
  int64_t time;
  uint64_t addr;
  unsigned flags;
} nat_event;

static bool is_dash(grt__slice s) { return s.n == 1 && s.p[0] == '-'; }

static bool kind_from_name(grt__slice s, grt_trace_kind *k) {
  for (int i = 0; i < GRT_TRACE_KIND_COUNT; i++)
    if (grt__slice_eq(s, grt_trace_kind_name((grt_trace_kind)i))) {
      *k = (grt_trace_kind)i;
      return true;
    }
  if (grt__slice_eq(s, "free")) {
    *k = GRT_TRACE_FREE_COMPLETED;
    return true;
  }
  return false;
}

static bool is_alloc_kind(grt_trace_kind k) {
  return k == GRT_TRACE_ALLOC || k == GRT_TRACE_FREE_REQUESTED || k == GRT_TRACE_FREE_COMPLETED;
}

#define FAIL(...)                                              \
  do {                                                         \
    grt__trace_err(err, lineno, offset, false, __VA_ARGS__);   \
    return GRT_ERR_PARSE;                                      \
  } while (0)

/* A builder failure (host memory) at a line: its own status, with the reason. */
static grt_status build_failed(grt_status st, uint64_t lineno, size_t offset, grt_trace_error *err) {
  grt__trace_err(err, lineno, offset, false, "%s", grt_status_str(st));
  return st;
}

static grt_status parse_event(const grt__slice *f, size_t nf, nat_event *ev, uint64_t lineno,
                              size_t offset, grt_trace_error *err) {
  char q[64];
  memset(ev, 0, sizeof *ev);
  if (nf > 6) FAIL("too many fields (at most 6: kind id size stream time addr)");
  if (!kind_from_name(f[0], &ev->kind)) FAIL("unknown event kind '%s'", grt__quote(f[0], q, sizeof q));
  const char *kname = grt_trace_kind_name(ev->kind);
  ev->id = GRT_TRACE_NO_ID;
  if (is_alloc_kind(ev->kind)) {
    if (nf < 2 || is_dash(f[1])) FAIL("%s needs an id", kname);
    if (!grt__parse_u64(f[1], &ev->id) || ev->id == UINT64_MAX)
      FAIL("id field '%s' is not a number below 2^64-1", grt__quote(f[1], q, sizeof q));
  } else if (nf >= 2 && !is_dash(f[1])) {
    FAIL("%s takes no id (write '-')", kname);
  }
  if (nf >= 3 && !is_dash(f[2])) {
    if (!grt__parse_u64(f[2], &ev->size)) FAIL("size field '%s' is not a number", grt__quote(f[2], q, sizeof q));
  } else if (ev->kind == GRT_TRACE_ALLOC) {
    FAIL("alloc needs a size");
  }
  if (nf >= 4 && !is_dash(f[3]) && !grt__parse_u64_any(f[3], &ev->stream))
    FAIL("stream field '%s' is not a number", grt__quote(f[3], q, sizeof q));
  if (nf >= 5 && !is_dash(f[4])) {
    if (!grt__parse_i64(f[4], &ev->time)) FAIL("time field '%s' is not a number", grt__quote(f[4], q, sizeof q));
    ev->flags |= GRT_TRACE_F_TIME;
  }
  if (nf >= 6 && !is_dash(f[5])) {
    if (!grt__parse_u64_any(f[5], &ev->addr)) FAIL("addr field '%s' is not a number", grt__quote(f[5], q, sizeof q));
    ev->flags |= GRT_TRACE_F_ADDR;
  }
  if (ev->kind >= GRT_TRACE_SEGMENT_ALLOC && ev->kind <= GRT_TRACE_SEGMENT_UNMAP && !(ev->flags & GRT_TRACE_F_ADDR))
    FAIL("%s needs an addr", kname);
  return GRT_OK;
}

static grt_status parse_setting(const grt__slice *f, size_t nf, grt_trace_alloc_settings *s,
                                uint64_t lineno, size_t offset, grt_trace_error *err) {
  char q[64];
  uint64_t u;
  s->present = true;
  if (nf < 3) FAIL("%%setting needs a name and a value");
  if (grt__slice_eq(f[1], "expandable_segments")) {
    if (nf != 3 || !grt__parse_u64(f[2], &u) || u > 1) FAIL("expandable_segments must be 0 or 1");
    s->expandable_segments = u == 1;
  } else if (grt__slice_eq(f[1], "max_split_size")) {
    if (nf != 3 || !grt__parse_i64(f[2], &s->max_split_size)) FAIL("max_split_size must be an integer");
  } else if (grt__slice_eq(f[1], "garbage_collection_threshold")) {
    if (nf != 3 || !grt__parse_double(f[2], &s->garbage_collection_threshold))
      FAIL("garbage_collection_threshold must be a number");
  } else if (grt__slice_eq(f[1], "roundup_power2_divisions")) {
    if (nf != 2 + GRT_TRACE_RP2_INTERVALS) FAIL("roundup_power2_divisions needs %d values", GRT_TRACE_RP2_INTERVALS);
    for (int i = 0; i < GRT_TRACE_RP2_INTERVALS; i++) {
      if (!grt__parse_u64(f[2 + i], &u) || u > UINT32_MAX) FAIL("roundup_power2_divisions value '%s' is not a number", grt__quote(f[2 + i], q, sizeof q));
      s->roundup_power2_divisions[i] = (uint32_t)u;
    }
  } else {
    FAIL("unknown setting '%s'", grt__quote(f[1], q, sizeof q));
  }
  return GRT_OK;
}

static grt_status parse_segment(const grt__slice *f, size_t nf, grt_trace_segment *seg,
                                uint64_t lineno, size_t offset, grt_trace_error *err) {
  uint64_t e;
  memset(seg, 0, sizeof *seg);
  if (nf != 6 && nf != 8) FAIL("%%segment needs: addr total_size stream small|large expandable(0|1) [pool pool]");
  if (!grt__parse_u64_any(f[1], &seg->addr)) FAIL("segment addr is not a number");
  if (!grt__parse_u64(f[2], &seg->total_size)) FAIL("segment total_size is not a number");
  if (!grt__parse_u64_any(f[3], &seg->stream)) FAIL("segment stream is not a number");
  if (grt__slice_eq(f[4], "large")) seg->is_large = true;
  else if (!grt__slice_eq(f[4], "small")) FAIL("segment type must be 'small' or 'large'");
  if (!grt__parse_u64(f[5], &e) || e > 1) FAIL("segment expandable flag must be 0 or 1");
  seg->is_expandable = e == 1;
  if (nf == 8 && (!grt__parse_u64(f[6], &seg->pool_id[0]) || !grt__parse_u64(f[7], &seg->pool_id[1])))
    FAIL("segment pool id must be two numbers");
  return GRT_OK;
}

static const char *const block_states[] = {"inactive", "active_allocated", "active_pending_free"};

static grt_status parse_block(const grt__slice *f, size_t nf, grt_trace_block *blk, uint64_t lineno,
                              size_t offset, grt_trace_error *err) {
  memset(blk, 0, sizeof *blk);
  if (nf != 5) FAIL("%%block needs: addr size requested_size state");
  if (!grt__parse_u64_any(f[1], &blk->addr)) FAIL("block addr is not a number");
  if (!grt__parse_u64(f[2], &blk->size)) FAIL("block size is not a number");
  if (!grt__parse_u64(f[3], &blk->requested_size)) FAIL("block requested_size is not a number");
  for (int i = 0; i < 3; i++)
    if (grt__slice_eq(f[4], block_states[i])) {
      blk->state = (grt_trace_block_state)i;
      return GRT_OK;
    }
  FAIL("unknown block state");
}

/* One '%' line. b may be NULL (streaming: validate only); *have_segment tracks %block placement;
 * has_stack: the line ended in a stack field, whose id is `stack`. */
static grt_status parse_meta(const grt__slice *f, size_t nf, grt__tb *b, bool *have_segment, bool has_stack,
                             uint32_t stack, uint64_t lineno, size_t offset, grt_trace_error *err) {
  char q[64];
  grt_status st = GRT_OK;
  bool with_stack = grt__slice_eq(f[0], "%segment") || grt__slice_eq(f[0], "%block");
  if (has_stack && !with_stack) FAIL("%s takes no stack field", grt__quote(f[0], q, sizeof q));
  if (grt__slice_eq(f[0], "%device")) {
    uint64_t d, n;
    if (nf != 3 || !grt__parse_u64(f[1], &d) || !grt__parse_u64(f[2], &n) || n == 0 || d >= n || n > INT32_MAX)
      FAIL("%%device needs: device n_devices (device < n_devices)");
    if (b) b->t->device = (int)d, b->t->n_devices = (int)n;
  } else if (grt__slice_eq(f[0], "%setting")) {
    grt_trace_alloc_settings tmp, *s = b ? &b->t->settings : &tmp;
    st = parse_setting(f, nf, s, lineno, offset, err);
  } else if (grt__slice_eq(f[0], "%segment")) {
    grt_trace_segment seg;
    st = parse_segment(f, nf, &seg, lineno, offset, err);
    seg.stack = stack;
    if (!st) *have_segment = true;
    if (!st && b && (st = grt__tb_segment(b, &seg))) return build_failed(st, lineno, offset, err);
  } else if (grt__slice_eq(f[0], "%block")) {
    grt_trace_block blk;
    if (!*have_segment) FAIL("%%block before any %%segment");
    st = parse_block(f, nf, &blk, lineno, offset, err);
    blk.stack = stack;
    if (!st && b && (st = grt__tb_block(b, &blk))) return build_failed(st, lineno, offset, err);
  } else {
    FAIL("unknown metadata line '%s'", grt__quote(f[0], q, sizeof q));
  }
  return st;
}


/* ---- streaming fast path ----
 * The common event line, `<alloc|free|free_completed|free_requested> <id>
 * <size|-> [<stream>]` with decimal numbers, parsed in one pass without
 * splitting. Anything else (or anything odd) returns false and takes the
 * general path, which owns every error message. */

static inline bool is_blank(char c) { return c == ' ' || c == '\t'; }

/* A decimal field at *p (stops at a blank or the end); false on overflow or junk. */
static inline bool fast_u64(const char **p, const char *end, uint64_t *out) {
  const char *q = *p;
  uint64_t v = 0;
  if (q == end || (unsigned)(*q - '0') > 9) return false;
  do {
    unsigned d = (unsigned)(*q - '0');
    if (d > 9) return false;
    if (v >= UINT64_MAX / 10 && (v > UINT64_MAX / 10 || d > UINT64_MAX % 10)) return false; /* no division */
    v = v * 10 + d;
    q++;
  } while (q < end && !is_blank(*q));
  *p = q;
  *out = v;
  return true;
}

static inline void skip_blanks(const char **p, const char *end) {
  while (*p < end && is_blank(**p)) (*p)++;
}

static bool fast_kind(const char **p, const char *end, grt_trace_kind *k) {
  const char *q = *p;
  size_t n = 0;
  while (q + n < end && !is_blank(q[n])) n++;
  if (n == 5 && !memcmp(q, "alloc", 5)) *k = GRT_TRACE_ALLOC;
  else if (n == 4 && !memcmp(q, "free", 4)) *k = GRT_TRACE_FREE_COMPLETED;
  else if (n == 14 && !memcmp(q, "free_completed", 14)) *k = GRT_TRACE_FREE_COMPLETED;
  else if (n == 14 && !memcmp(q, "free_requested", 14)) *k = GRT_TRACE_FREE_REQUESTED;
  else return false;
  *p = q + n;
  return true;
}

/* Parses the line into ev/stream; false: not a simple event line. */
static bool fast_event(grt__slice line, nat_event *ev) {
  const char *p = line.p, *end = line.p + line.n;
  skip_blanks(&p, end);
  if (!fast_kind(&p, end, &ev->kind)) return false;
  skip_blanks(&p, end);
  if (!fast_u64(&p, end, &ev->id) || ev->id == UINT64_MAX) return false;
  skip_blanks(&p, end);
  ev->size = 0;
  ev->stream = 0;
  ev->time = 0;
  ev->addr = 0;
  ev->flags = 0;
  if (p == end) return ev->kind != GRT_TRACE_ALLOC;
  if (*p == '-' && (p + 1 == end || is_blank(p[1]))) {
    if (ev->kind == GRT_TRACE_ALLOC) return false;
    p++;
  } else if (!fast_u64(&p, end, &ev->size)) {
    return false;
  }
  skip_blanks(&p, end);
  if (p == end) return true;
  if (p + 1 < end && p[0] == '0' && (p[1] == 'x' || p[1] == 'X')) return false; /* hex: general path */
  if (*p == '-' && (p + 1 == end || is_blank(p[1]))) {
    p++;
  } else if (!fast_u64(&p, end, &ev->stream)) {
    return false;
  }
  skip_blanks(&p, end);
  return p == end; /* time/addr fields: general path */
}

typedef struct nat_state {
  grt__tb tb;            /* whole-file: the trace; streaming: the stream table only */
  bool streaming;
  bool have_segment;
  bool seen_magic;
  grt_trace_event_fn fn;
  void *ctx;
  grt_stream_id last_stream; /* streaming: the last stream value and its index */
  uint32_t last_stream_idx;
  bool have_last_stream;
  grt__u64map frame_ids; /* whole-file: the file's frame id -> frame index + 1 */
  grt__u64map stack_ids; /* whole-file: the file's stack id -> the trace's stack id */
  char *text;            /* decoded %frame strings */
  size_t cap_text;
} nat_state;

static void nat_state_init(nat_state *s) {
  memset(s, 0, sizeof *s);
  grt__u64map_init(&s->frame_ids);
  grt__u64map_init(&s->stack_ids);
}

static void nat_state_free(nat_state *s) {
  grt__u64map_free(&s->frame_ids);
  grt__u64map_free(&s->stack_ids);
  free(s->text);
  s->text = NULL;
}

/* Streaming: hands one parsed event to the callback. */
static grt_status nat_emit(nat_state *s, const nat_event *ev, uint64_t lineno, size_t offset, grt_trace_error *err) {
  grt_trace_event out;
  out.id = ev->id;
  out.size = ev->size;
  out.addr = ev->addr;
  out.time = ev->time;
  out.kind = (uint8_t)ev->kind;
  out.flags = (uint8_t)ev->flags;
  out.reserved = 0;
  if (s->have_last_stream && s->last_stream == ev->stream) {
    out.stream = s->last_stream_idx;
  } else {
    grt_status st = grt__tb_stream(&s->tb, ev->stream, &out.stream);
    if (st) return build_failed(st, lineno, offset, err);
    s->last_stream = ev->stream;
    s->last_stream_idx = out.stream;
    s->have_last_stream = true;
  }
  grt_status st = s->fn(s->ctx, &out, ev->stream);
  if (st) {
    grt__trace_err(err, lineno, offset, false, "stopped by callback (%s)", grt_status_name(st));
    return st;
  }
  return GRT_OK;
}

/* ---- frames and stacks ----
 *   %frame <id> <line> "<name>" "<filename>"
 *   %stack <id> <frame id> ...                 (innermost first)
 * and an optional last field @<stack id> on events, %segment and %block.
 * The file's ids are its own; the whole-file reader maps them to the
 * trace's interned frames and stacks. */

/* Whether line is a %frame or %stack definition; *kw is its first field. */
static bool stack_def_keyword(grt__slice line, grt__slice *kw) {
  size_t i = 0, k;
  while (i < line.n && is_blank(line.p[i])) i++;
  for (k = i; k < line.n && !is_blank(line.p[k]);) k++;
  kw->p = line.p + i;
  kw->n = k - i;
  return grt__slice_eq(*kw, "%frame") || grt__slice_eq(*kw, "%stack");
}

/* The next run of non-blanks at or after *pos; false at the end of the line. */
static bool next_field(grt__slice line, size_t *pos, grt__slice *f) {
  size_t i = *pos;
  while (i < line.n && is_blank(line.p[i])) i++;
  if (i == line.n) return false;
  f->p = line.p + i;
  while (i < line.n && !is_blank(line.p[i])) i++;
  f->n = (size_t)(line.p + i - f->p);
  *pos = i;
  return true;
}

static int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

/* Decodes the quoted string at *pos into out (room for the rest of the line). */
static grt_status unquote(grt__slice line, size_t *pos, char *out, size_t *n, const char *what, uint64_t lineno,
                          size_t offset, grt_trace_error *err) {
  size_t i = *pos, k = 0;
  while (i < line.n && is_blank(line.p[i])) i++;
  if (i == line.n || line.p[i] != '"') FAIL("frame %s is not a quoted string", what);
  for (i++;;) {
    if (i == line.n) FAIL("frame %s has no closing quote", what);
    unsigned char c = (unsigned char)line.p[i++];
    if (c == '"') break;
    if (c < 0x20 || c == 0x7f) FAIL("frame %s holds the raw byte 0x%02x (write \\x%02x)", what, c, c);
    if (c != '\\') {
      out[k++] = (char)c;
      continue;
    }
    if (i == line.n) FAIL("frame %s has no closing quote", what);
    c = (unsigned char)line.p[i++];
    int hi, lo;
    switch (c) {
      case '\\':
      case '"': out[k++] = (char)c; break;
      case 't': out[k++] = '\t'; break;
      case 'n': out[k++] = '\n'; break;
      case 'r': out[k++] = '\r'; break;
      case 'x':
        hi = i < line.n ? hex_digit(line.p[i]) : -1;
        lo = i + 1 < line.n ? hex_digit(line.p[i + 1]) : -1;
        if (hi < 0 || lo < 0) FAIL("frame %s: \\x needs two hex digits", what);
        if (hi == 0 && lo == 0) FAIL("frame %s: \\x00 (a NUL byte) is not allowed", what);
        out[k++] = (char)(hi << 4 | lo);
        i += 2;
        break;
      default: FAIL("frame %s: unknown escape '\\%c'", what, c >= 0x20 && c < 0x7f ? c : '?');
    }
  }
  if (i < line.n && !is_blank(line.p[i])) FAIL("frame %s: text right after the closing quote", what);
  *pos = i;
  *n = k;
  return GRT_OK;
}

/* A builder failure while defining frames and stacks. */
static grt_status def_failed(grt_status st, uint64_t lineno, size_t offset, grt_trace_error *err) {
  if (st == GRT_ERR_SIZE) FAIL("more than 2^32-2 distinct strings, frames or stacks");
  return build_failed(st, lineno, offset, err);
}

static grt_status parse_frame_def(nat_state *s, grt__slice line, size_t pos, uint64_t lineno, size_t offset,
                                  grt_trace_error *err) {
  char q[64];
  grt__slice f;
  uint64_t id;
  int64_t ln;
  size_t nn, fn;
  if (!next_field(line, &pos, &f) || !grt__parse_u64(f, &id) || !next_field(line, &pos, &f))
    FAIL("%%frame needs: id line \"name\" \"filename\"");
  if (!grt__parse_i64(f, &ln)) FAIL("frame line '%s' is not a number", grt__quote(f, q, sizeof q));
  if (line.n > s->cap_text) {
    char *p = realloc(s->text, line.n);
    if (!p) return def_failed(GRT_ERR_NOMEM, lineno, offset, err);
    s->text = p;
    s->cap_text = line.n;
  }
  grt_status st = unquote(line, &pos, s->text, &nn, "name", lineno, offset, err);
  if (!st) st = unquote(line, &pos, s->text + nn, &fn, "filename", lineno, offset, err);
  if (st) return st;
  if (next_field(line, &pos, &f)) FAIL("%%frame: '%s' after the filename", grt__quote(f, q, sizeof q));
  if (grt__u64map_get(&s->frame_ids, id)) FAIL("frame %" PRIu64 " is defined twice", id);
  uint32_t index;
  grt__slice name = {s->text, nn}, file = {s->text + nn, fn};
  if ((st = grt__tb_frame(&s->tb, name, file, ln, &index))) return def_failed(st, lineno, offset, err);
  if (!grt__u64map_put(&s->frame_ids, id, (void *)((uintptr_t)index + 1)))
    return def_failed(GRT_ERR_NOMEM, lineno, offset, err);
  return GRT_OK;
}

static grt_status parse_stack_def(nat_state *s, grt__slice line, grt__slice kw, uint64_t lineno, size_t offset,
                                  grt_trace_error *err) {
  char q[64];
  size_t pos = (size_t)(kw.p + kw.n - line.p);
  if (kw.n == 6 && kw.p[1] == 'f') return parse_frame_def(s, line, pos, lineno, offset, err);
  grt__slice f;
  uint64_t id, fid;
  if (!next_field(line, &pos, &f) || !grt__parse_u64(f, &id) || id == 0)
    FAIL("%%stack needs: id (1 or more) and frame ids");
  if (grt__u64map_get(&s->stack_ids, id)) FAIL("stack %" PRIu64 " is defined twice", id);
  grt_status st = GRT_OK;
  size_t n = 0;
  grt__tb_stack_clear(&s->tb);
  for (; next_field(line, &pos, &f); n++) {
    if (!grt__parse_u64(f, &fid)) FAIL("stack frame id '%s' is not a number", grt__quote(f, q, sizeof q));
    uintptr_t v = (uintptr_t)grt__u64map_get(&s->frame_ids, fid);
    if (!v) FAIL("frame %" PRIu64 " is not defined (its %%frame line must come first)", fid);
    if ((st = grt__tb_stack_push(&s->tb, (uint32_t)(v - 1)))) return def_failed(st, lineno, offset, err);
  }
  if (n == 0) FAIL("stack %" PRIu64 " has no frames (events without frames carry no stack field)", id);
  uint32_t sid;
  if ((st = grt__tb_stack_end(&s->tb, &sid))) return def_failed(st, lineno, offset, err);
  if (!grt__u64map_put(&s->stack_ids, id, (void *)(uintptr_t)sid))
    return def_failed(GRT_ERR_NOMEM, lineno, offset, err);
  return GRT_OK;
}

/* Takes an optional last field @<id> off f[0..*nf): *has_stack, and (whole-file
 * reader) *stack, the trace's id for the file's stack id; @0 means no stack. */
static grt_status stack_field(nat_state *s, const grt__slice *f, size_t *nf, bool *has_stack, uint32_t *stack,
                              uint64_t lineno, size_t offset, grt_trace_error *err) {
  char q[64];
  uint64_t id;
  *has_stack = false;
  *stack = 0;
  for (size_t i = 1; i + 1 < *nf; i++)
    if (f[i].p[0] == '@') FAIL("the stack field '%s' must be the last field", grt__quote(f[i], q, sizeof q));
  if (*nf < 2 || f[*nf - 1].p[0] != '@') return GRT_OK;
  grt__slice v = {f[*nf - 1].p + 1, f[*nf - 1].n - 1};
  if (!grt__parse_u64(v, &id)) FAIL("stack field '%s' is not '@' and a number", grt__quote(f[*nf - 1], q, sizeof q));
  *has_stack = true;
  (*nf)--;
  if (s->streaming || id == 0) return GRT_OK;
  uintptr_t sid = (uintptr_t)grt__u64map_get(&s->stack_ids, id);
  if (!sid) FAIL("stack %" PRIu64 " is not defined (its %%stack line must come first)", id);
  *stack = (uint32_t)sid;
  return GRT_OK;
}

static grt_status nat_line(nat_state *s, grt__slice line, uint64_t lineno, size_t offset,
                           grt_trace_error *err) {
  grt__slice f[2 + GRT_TRACE_RP2_INTERVALS + 1];
  char q[64];
  if (!s->seen_magic) {
    /* a UTF-8 BOM may precede the magic, as format detection and the CSV readers allow */
    if (!grt__slice_eq(grt__slice_trim(grt__slice_skip_bom(line)), NATIVE_MAGIC))
      FAIL("first line must be '" NATIVE_MAGIC "', found '%s'", grt__quote(line, q, sizeof q));
    s->seen_magic = true;
    return GRT_OK;
  }
  nat_event ev;
  if (s->streaming && line.n && line.p[0] != '#' && line.p[0] != '%' && fast_event(line, &ev)) return nat_emit(s, &ev, lineno, offset, err);
  grt__slice kw;
  if (stack_def_keyword(line, &kw)) return s->streaming ? GRT_OK : parse_stack_def(s, line, kw, lineno, offset, err);
  size_t nf = grt__split(line, ' ', f, sizeof f / sizeof f[0] - 1);
  if (nf == 0 || f[0].p[0] == '#') return GRT_OK;
  if (nf > sizeof f / sizeof f[0] - 1) FAIL("too many fields");
  bool has_stack = false;
  uint32_t stack = 0;
  grt_status st = stack_field(s, f, &nf, &has_stack, &stack, lineno, offset, err);
  if (st) return st;
  if (f[0].p[0] == '%')
    return parse_meta(f, nf, s->streaming ? NULL : &s->tb, &s->have_segment, has_stack, stack, lineno, offset, err);
  st = parse_event(f, nf, &ev, lineno, offset, err);
  if (st) return st;
  if (!s->streaming) {
    st = grt__tb_event(&s->tb, ev.kind, ev.id, ev.size, ev.stream, ev.time, ev.addr, ev.flags);
    if (st == GRT_ERR_STATE) FAIL("alloc of id %" PRIu64 " which is still live", ev.id);
    if (!st) st = grt__tb_event_stack(&s->tb, stack);
    if (st) return build_failed(st, lineno, offset, err);
    return GRT_OK;
  }
  return nat_emit(s, &ev, lineno, offset, err);
}

grt_status grt__read_native(const char *data, size_t len, grt_trace **out, grt_trace_error *err) {
  nat_state s;
  nat_state_init(&s);
  grt_status st = grt__tb_init(&s.tb, GRT_TRACE_FORMAT_NATIVE);
  if (st) return st;
  grt__lines it;
  grt__slice line;
  grt__lines_init(&it, data, len);
  while (grt__lines_next(&it, &line)) {
    st = nat_line(&s, line, it.lineno, it.offset, err);
    if (st) break;
  }
  if (!st && !s.seen_magic) {
    grt__trace_err(err, 1, 0, false, "empty input (expected '" NATIVE_MAGIC "')");
    st = GRT_ERR_PARSE;
  }
  nat_state_free(&s);
  if (st) {
    grt__tb_abort(&s.tb);
    return st;
  }
  st = grt__tb_finish(&s.tb, out);
  if (st) grt__trace_err(err, 0, 0, false, "%s", grt_status_str(st));
  return st;
}

/* Streaming: whether an over-long line is a frame or stack definition (skipped, not refused). */
static bool long_def(const char *p, size_t n) {
  grt__slice kw;
  return stack_def_keyword((grt__slice){p, n}, &kw);
}

grt_status grt_trace_read_native_stream(const char *path, grt_trace_event_fn fn, void *ctx,
                                        grt_trace_error *err) {
  if (err) memset(err, 0, sizeof *err);
  if (!path || !fn) return GRT_ERR_INVALID_ARG;
  grt__trace_err_file(err, path);
  FILE *f = fopen(path, "rb");
  if (!f) {
    grt__trace_err(err, 0, 0, false, "cannot open: %s", strerror(errno));
    return GRT_ERR_IO;
  }
  grt_status st = grt_trace_read_native_stream_file(f, path, fn, ctx, err);
  fclose(f);
  return st;
}

grt_status grt_trace_read_native_stream_file(FILE *f, const char *name, grt_trace_event_fn fn, void *ctx,
                                             grt_trace_error *err) {
  if (err) memset(err, 0, sizeof *err);
  if (!f || !name || !fn) return GRT_ERR_INVALID_ARG;
  grt__trace_err_file(err, name);
  nat_state s;
  nat_state_init(&s);
  s.streaming = true;
  s.fn = fn;
  s.ctx = ctx;
  grt_status st = grt__tb_init(&s.tb, GRT_TRACE_FORMAT_NATIVE);
  char *buf = malloc(STREAM_CHUNK);
  if (st || !buf) {
    free(buf);
    grt__tb_abort(&s.tb);
    return GRT_ERR_NOMEM;
  }
  /* buf[start, have) holds unread bytes; a line is processed once its '\n' (or EOF) is in.
   * A frame or stack definition longer than a line may be is skipped (`skipping`) as it streams by. */
  size_t have = 0, start = 0, offset = 0;
  uint64_t lineno = 0;
  bool eof = false, skipping = false;
  while (!st) {
    char *nl = memchr(buf + start, '\n', have - start);
    if (skipping) {
      size_t n = nl ? (size_t)(nl - (buf + start)) + 1 : have - start;
      offset += n;
      start += n;
      if (nl)
        skipping = false;
      else if (eof)
        break;
      else if ((have = fread(buf, 1, STREAM_CHUNK, f)) == 0)
        eof = true;
      if (!nl) start = 0;
      continue;
    }
    if (!nl && !eof) {
      if (have - start > STREAM_MAX_LINE && long_def(buf + start, have - start)) {
        skipping = true;
        lineno++;
        continue;
      }
      if (have - start > STREAM_MAX_LINE) {
        grt__trace_err(err, lineno + 1, offset, false, "line longer than %d bytes", STREAM_MAX_LINE);
        st = GRT_ERR_PARSE;
        break;
      }
      memmove(buf, buf + start, have - start);
      have -= start;
      start = 0;
      size_t n = fread(buf + have, 1, STREAM_CHUNK - have, f);
      if (n == 0) eof = true;
      have += n;
      continue;
    }
    if (!nl && start == have) break; /* EOF, nothing left */
    size_t n = nl ? (size_t)(nl - (buf + start)) : have - start;
    if (n > STREAM_MAX_LINE && long_def(buf + start, n)) {
      lineno++;
      offset += n + (nl ? 1 : 0);
      start += n + (nl ? 1 : 0);
      continue;
    }
    if (n > STREAM_MAX_LINE) {
      grt__trace_err(err, lineno + 1, offset, false, "line longer than %d bytes", STREAM_MAX_LINE);
      st = GRT_ERR_PARSE;
      break;
    }
    grt__slice line = {buf + start, n};
    if (line.n > 0 && line.p[line.n - 1] == '\r') line.n--;
    lineno++;
    st = nat_line(&s, line, lineno, offset, err);
    offset += n + (nl ? 1 : 0);
    start += n + (nl ? 1 : 0);
  }
  if (!st && ferror(f)) {
    grt__trace_err(err, lineno, offset, false, "read error");
    st = GRT_ERR_IO;
  }
  if (!st && !s.seen_magic) {
    grt__trace_err(err, 1, 0, false, "empty input (expected '" NATIVE_MAGIC "')");
    st = GRT_ERR_PARSE;
  }
  free(buf);
  nat_state_free(&s);
  grt__tb_abort(&s.tb);
  return st;
}

/* ---- writer ---- */

grt_status grt_trace_write_native_header(FILE *f) {
  if (!f) return GRT_ERR_INVALID_ARG;
  return fprintf(f, NATIVE_MAGIC "\n") < 0 ? GRT_ERR_IO : GRT_OK;
}

/* One event line; a nonzero stack adds the stack field. */
static grt_status write_event(FILE *f, const grt_trace_event *ev, grt_stream_id stream, uint32_t stack) {
  char id[24] = "-", t[24] = "-", a[24] = "-", at[16] = "";
  if (!f || !ev || ev->kind >= GRT_TRACE_KIND_COUNT) return GRT_ERR_INVALID_ARG;
  bool with_id = is_alloc_kind((grt_trace_kind)ev->kind);
  if (with_id) {
    if (ev->id == GRT_TRACE_NO_ID) return GRT_ERR_INVALID_ARG;
    snprintf(id, sizeof id, "%" PRIu64, ev->id);
  }
  if (ev->flags & GRT_TRACE_F_TIME) snprintf(t, sizeof t, "%" PRId64, ev->time);
  if (ev->flags & GRT_TRACE_F_ADDR) snprintf(a, sizeof a, "0x%" PRIx64, ev->addr);
  if (stack) snprintf(at, sizeof at, " @%" PRIu32, stack);
  const char *k = grt_trace_kind_name((grt_trace_kind)ev->kind);
  int r;
  if (ev->flags & GRT_TRACE_F_ADDR)
    r = fprintf(f, "%s %s %" PRIu64 " %" PRIu64 " %s %s%s\n", k, id, ev->size, stream, t, a, at);
  else if (ev->flags & GRT_TRACE_F_TIME)
    r = fprintf(f, "%s %s %" PRIu64 " %" PRIu64 " %s%s\n", k, id, ev->size, stream, t, at);
  else
    r = fprintf(f, "%s %s %" PRIu64 " %" PRIu64 "%s\n", k, id, ev->size, stream, at);
  return r < 0 ? GRT_ERR_IO : GRT_OK;
}

grt_status grt_trace_write_native_event(FILE *f, const grt_trace_event *ev, grt_stream_id stream) {
  return write_event(f, ev, stream, 0);
}

/* A frame string between quotes: printable ASCII as is, the rest escaped. */
static int write_quoted(FILE *f, const char *s) {
  int r = fputc('"', f) == EOF ? -1 : 0;
  for (; *s; s++) {
    unsigned char c = (unsigned char)*s;
    if (c == '"' || c == '\\')
      r |= fprintf(f, "\\%c", c);
    else if (c == '\t')
      r |= fprintf(f, "\\t");
    else if (c == '\n')
      r |= fprintf(f, "\\n");
    else if (c == '\r')
      r |= fprintf(f, "\\r");
    else if (c < 0x20 || c >= 0x7f)
      r |= fprintf(f, "\\x%02x", c);
    else
      r |= fputc(c, f) == EOF ? -1 : 0;
  }
  return r | (fputc('"', f) == EOF ? -1 : 0);
}

/* Every distinct frame, then every stack, with the trace's own ids (frames 1-based). */
static int write_stacks(const grt_trace *t, FILE *f) {
  int r = 0;
  for (size_t i = 0; i < t->n_frames; i++) {
    r |= fprintf(f, "%%frame %zu %" PRId64 " ", i + 1, t->frames[i].line);
    r |= write_quoted(f, t->frames[i].name);
    r |= fputc(' ', f) == EOF ? -1 : 0;
    r |= write_quoted(f, t->frames[i].filename);
    r |= fputc('\n', f) == EOF ? -1 : 0;
  }
  for (size_t s = 0; s < t->n_stacks; s++) {
    r |= fprintf(f, "%%stack %zu", s + 1);
    for (size_t j = s ? t->stack_end[s - 1] : 0; j < t->stack_end[s]; j++)
      r |= fprintf(f, " %" PRIu32, t->entry_frame[j] + 1);
    r |= fputc('\n', f) == EOF ? -1 : 0;
  }
  return r;
}

static int write_meta(const grt_trace *t, FILE *f) {
  int r = fprintf(f, "%%device %d %d\n", t->device, t->n_devices);
  const grt_trace_alloc_settings *s = &t->settings;
  if (s->present) {
    r |= fprintf(f, "%%setting expandable_segments %d\n", s->expandable_segments ? 1 : 0);
    r |= fprintf(f, "%%setting max_split_size %" PRId64 "\n", s->max_split_size);
    r |= fprintf(f, "%%setting garbage_collection_threshold %.17g\n", s->garbage_collection_threshold);
    r |= fprintf(f, "%%setting roundup_power2_divisions");
    for (int i = 0; i < GRT_TRACE_RP2_INTERVALS; i++) r |= fprintf(f, " %" PRIu32, s->roundup_power2_divisions[i]);
    r |= fprintf(f, "\n");
  }
  r |= write_stacks(t, f);
  for (size_t i = 0; i < t->n_segments; i++) {
    const grt_trace_segment *g = &t->segments[i];
    r |= fprintf(f, "%%segment 0x%" PRIx64 " %" PRIu64 " %" PRIu64 " %s %d", g->addr, g->total_size, g->stream,
                 g->is_large ? "large" : "small", g->is_expandable ? 1 : 0);
    if (g->pool_id[0] || g->pool_id[1]) r |= fprintf(f, " %" PRIu64 " %" PRIu64, g->pool_id[0], g->pool_id[1]);
    if (g->stack) r |= fprintf(f, " @%" PRIu32, g->stack);
    r |= fprintf(f, "\n");
    for (size_t j = 0; j < g->n_blocks; j++) {
      const grt_trace_block *k = &g->blocks[j];
      r |= fprintf(f, "%%block 0x%" PRIx64 " %" PRIu64 " %" PRIu64 " %s", k->addr, k->size, k->requested_size,
                   block_states[k->state]);
      r |= k->stack ? fprintf(f, " @%" PRIu32 "\n", k->stack) : fprintf(f, "\n");
    }
  }
  return r;
}

grt_status grt_trace_write_native(const grt_trace *t, FILE *f) {
  if (!t || !f) return GRT_ERR_INVALID_ARG;
  grt_status st = grt_trace_write_native_header(f);
  if (st) return st;
  if (write_meta(t, f) < 0) return GRT_ERR_IO;
  for (size_t i = 0; i < t->n_events && !st; i++)
    st = write_event(f, &t->events[i], t->streams[t->events[i].stream], t->event_stack ? t->event_stack[i] : 0);
  return st;
}

grt_status grt_trace_save_native(const grt_trace *t, const char *path, grt_trace_error *err) {
  if (err) memset(err, 0, sizeof *err);
  if (!t || !path) return GRT_ERR_INVALID_ARG;
  grt__trace_err_file(err, path);
  FILE *f = fopen(path, "wb");
  if (!f) {
    grt__trace_err(err, 0, 0, false, "cannot create: %s", strerror(errno));
    return GRT_ERR_IO;
  }
  grt_status st = grt_trace_write_native(t, f);
  if (fclose(f) != 0 && !st) st = GRT_ERR_IO;
  if (st) grt__trace_err(err, 0, 0, false, "write failed");
  return st;
}
