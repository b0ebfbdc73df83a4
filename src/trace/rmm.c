/* rmm.c — RAPIDS RMM logging_resource_adaptor CSV to events.
 *
 * Header "Thread,Time,Action,Pointer,Size,Stream", then one row per call:
 *   Thread  the logging thread's id (ignored)
 *   Time    "HH:MM:SS.ffffff" (spdlog %H:%M:%S.%f; microseconds since
 *           midnight, a backwards jump of more than 12 h is taken as the
 *           next day) or seconds since the epoch "1634567890.123456"; may be empty
 *   Action  "allocate" | "free" (alias "deallocate") | "allocate failure"
 *   Pointer %p: 0x-hex, "(nil)" / "0x0" / "0" for null (only with a failure)
 *   Size    decimal bytes
 *   Stream  hex, with or without 0x (RMM's own replayer wrongly reads it as
 *           decimal, collapsing all streams to 0; we do not)
 * allocate -> alloc (addr = pointer), free -> free_completed (RMM frees are
 * stream-ordered and immediate), allocate failure -> oom. Ids: an allocate
 * at pointer P is freed by the next free of P.
 */
#include <inttypes.h>
#include <string.h>

#include "trace/trace_impl.h"

static bool parse_frac_us(grt__slice s, uint64_t *us) {
  /* up to 6 digits of fraction, right-padded to microseconds */
  uint64_t v = 0;
  if (s.n == 0 || s.n > 9) return false;
  for (size_t i = 0; i < s.n; i++) {
    unsigned d = (unsigned char)s.p[i] - '0';
    if (d > 9) return false;
    if (i < 6) v = v * 10 + d;
  }
  for (size_t i = s.n; i < 6; i++) v *= 10;
  *us = v;
  return true;
}

/* "HH:MM:SS[.ffffff]" or "seconds[.ffffff]" to microseconds. */
static bool parse_time(grt__slice s, int64_t *out) {
  grt__slice f[4];
  size_t nf = grt__split(s, ':', f, 3);
  grt__slice last = f[nf - 1 < 3 ? nf - 1 : 2];
  if (nf != 1 && nf != 3) return false;
  const char *dot = memchr(last.p, '.', last.n);
  grt__slice whole = {last.p, dot ? (size_t)(dot - last.p) : last.n}, frac = {"0", 1};
  if (dot) frac = (grt__slice){dot + 1, last.n - whole.n - 1};
  uint64_t sec, us, h = 0, m = 0;
  if (!grt__parse_u64(whole, &sec) || !parse_frac_us(frac, &us)) return false;
  if (nf == 3) {
    if (!grt__parse_u64(f[0], &h) || !grt__parse_u64(f[1], &m) || h > 23 || m > 59 || sec > 60) return false;
  } else if (sec > (uint64_t)INT64_MAX / 1000000 - 1) {
    return false;
  }
  *out = (int64_t)(((h * 60 + m) * 60 + sec) * 1000000 + us);
  return true;
}

static bool is_null_ptr(grt__slice s) {
  return grt__slice_eq(s, "(nil)") || grt__slice_eq(s, "0x0") || grt__slice_eq(s, "0") ||
         grt__slice_eq(s, "nullptr") || grt__slice_eq(s, "(null)");
}

/* A data row, parsed. */
typedef struct rmm_row {
  grt_trace_kind kind;
  uint64_t ptr, size, stream;
  int64_t time;
  unsigned flags;
} rmm_row;

/* What rows carry from one to the next: the header seen, the day of a
 * time-of-day clock that wrapped past midnight. */
typedef struct rmm_clock {
  bool header;
  int64_t day, prev;
} rmm_clock;

#define ROW_FAIL(...)                                         \
  do {                                                        \
    grt__trace_err(err, lineno, offset, false, __VA_ARGS__);  \
    return GRT_ERR_PARSE;                                     \
  } while (0)

/* One line: the header (first), a blank line (*row kind stays GRT_TRACE_KIND_COUNT: nothing to add) or a row. */
static grt_status rmm_line(rmm_clock *c, grt__slice line, uint64_t lineno, size_t offset, rmm_row *row,
                           grt_trace_error *err) {
  grt__slice f[7];
  char q[64];
  row->kind = GRT_TRACE_KIND_COUNT;
  if (!c->header) {
    if (!grt__slice_eq(grt__slice_trim(grt__slice_skip_bom(line)), "Thread,Time,Action,Pointer,Size,Stream"))
      ROW_FAIL("expected the header 'Thread,Time,Action,Pointer,Size,Stream', found '%s'", grt__quote(line, q, sizeof q));
    c->header = true;
    return GRT_OK;
  }
  if (grt__slice_trim(line).n == 0) return GRT_OK;
  size_t nf = grt__split(line, ',', f, 6);
  if (nf != 6) ROW_FAIL("expected 6 comma-separated fields, found %s", nf > 6 ? "more" : "fewer");
  grt_trace_kind kind;
  if (grt__slice_eq(f[2], "allocate")) kind = GRT_TRACE_ALLOC;
  else if (grt__slice_eq(f[2], "free") || grt__slice_eq(f[2], "deallocate")) kind = GRT_TRACE_FREE_COMPLETED;
  else if (grt__slice_eq(f[2], "allocate failure")) kind = GRT_TRACE_OOM;
  else ROW_FAIL("unknown action '%s' (expected allocate, free or allocate failure)", grt__quote(f[2], q, sizeof q));
  rmm_row r = {.kind = kind};
  if (f[1].n > 0) {
    if (!parse_time(f[1], &r.time)) ROW_FAIL("time field '%s' is not HH:MM:SS.ffffff or seconds", grt__quote(f[1], q, sizeof q));
    if (memchr(f[1].p, ':', f[1].n)) { /* time of day: unwrap midnight */
      if (r.time + c->day < c->prev - 12LL * 3600 * 1000000) c->day += 24LL * 3600 * 1000000;
      r.time += c->day;
    }
    c->prev = r.time;
    r.flags |= GRT_TRACE_F_TIME;
  }
  if (is_null_ptr(f[3])) {
    if (kind != GRT_TRACE_OOM) ROW_FAIL("%s of a null pointer", kind == GRT_TRACE_ALLOC ? "allocate" : "free");
  } else {
    if (!grt__parse_hex(f[3], &r.ptr) || r.ptr == UINT64_MAX)
      ROW_FAIL("pointer field '%s' is not a hex address below 0xffffffffffffffff", grt__quote(f[3], q, sizeof q));
    r.flags |= GRT_TRACE_F_ADDR;
  }
  if (!grt__parse_u64(f[4], &r.size)) ROW_FAIL("size field '%s' is not a number", grt__quote(f[4], q, sizeof q));
  if (!grt__parse_hex(f[5], &r.stream)) ROW_FAIL("stream field '%s' is not a hex number", grt__quote(f[5], q, sizeof q));
  *row = r;
  return GRT_OK;
}

static grt_status no_header(grt_trace_error *err) {
  grt__trace_err(err, 1, 0, false, "empty input (expected the RMM CSV header)");
  return GRT_ERR_PARSE;
}

grt_status grt__read_rmm(const char *data, size_t len, grt_trace **out, grt_trace_error *err) {
  grt__tb b;
  grt_status st = grt__tb_init(&b, GRT_TRACE_FORMAT_RMM);
  if (st) return st;
  grt__lines it;
  grt__slice line;
  rmm_clock c = {0};
  grt__lines_init(&it, data, len);
  while (!st && grt__lines_next(&it, &line)) {
    rmm_row r;
    if ((st = rmm_line(&c, line, it.lineno, it.offset, &r, err)) || r.kind == GRT_TRACE_KIND_COUNT) continue;
    st = grt__tb_event(&b, r.kind, r.ptr, r.size, r.stream, r.time, r.ptr, r.flags);
    if (st == GRT_ERR_STATE) {
      grt__trace_err(err, it.lineno, it.offset, false, "allocate returned 0x%" PRIx64 ", which is still allocated", r.ptr);
      st = GRT_ERR_PARSE;
    } else if (st) {
      grt__trace_err(err, it.lineno, it.offset, false, "%s", grt_status_str(st));
      st = GRT_ERR_PARSE;
    }
  }
  if (!st && !c.header) st = no_header(err);
  if (st) {
    grt__tb_abort(&b);
    return st;
  }
  return grt__tb_finish(&b, out);
}

/* ---- streaming: rows to the callback as they are read ---- */

/* An RMM row is six short fields; the whole reader takes any length, so the
 * stream takes up to a length no real row reaches (its buffer's size). */
#define RMM_MAX_LINE ((size_t)1 << 20)

typedef struct rmm_stream {
  rmm_clock c;
  grt__tb tb; /* the stream table only */
  grt_trace_event_fn fn;
  void *ctx;
} rmm_stream;

static grt_status stream_line(void *ctx, grt__slice line, uint64_t lineno, size_t offset, grt_trace_error *err) {
  rmm_stream *s = ctx;
  rmm_row r;
  grt_status st = rmm_line(&s->c, line, lineno, offset, &r, err);
  if (st || r.kind == GRT_TRACE_KIND_COUNT) return st;
  /* the pointer names the allocation: unique while live, reused after its free, as a native id */
  grt_trace_event ev = {.id = r.kind == GRT_TRACE_OOM ? GRT_TRACE_NO_ID : r.ptr, .size = r.size, .addr = r.ptr, .time = r.time, .kind = (uint8_t)r.kind,
                        .flags = (uint8_t)r.flags};
  if ((st = grt__tb_stream(&s->tb, r.stream, &ev.stream))) {
    grt__trace_err(err, lineno, offset, false, "%s", grt_status_str(st));
    return st;
  }
  if ((st = s->fn(s->ctx, &ev, r.stream))) grt__trace_err(err, lineno, offset, false, "stopped by callback (%s)", grt_status_name(st));
  return st;
}

grt_status grt_trace_read_rmm_stream_file(FILE *f, const char *name, grt_trace_event_fn fn, void *ctx,
                                          grt_trace_error *err) {
  if (err) memset(err, 0, sizeof *err);
  if (!f || !name || !fn) return GRT_ERR_INVALID_ARG;
  grt__trace_err_file(err, name);
  rmm_stream s = {.fn = fn, .ctx = ctx};
  grt_status st = grt__tb_init(&s.tb, GRT_TRACE_FORMAT_RMM);
  if (st) return st;
  st = grt__read_lines(f, RMM_MAX_LINE, stream_line, &s, err);
  if (!st && !s.c.header) st = no_header(err);
  grt__tb_abort(&s.tb);
  return st;
}
