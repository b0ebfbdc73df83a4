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

#define FAIL(...)                                                   \
  do {                                                              \
    grt__trace_err(err, it.lineno, it.offset, false, __VA_ARGS__);  \
    st = GRT_ERR_PARSE;                                             \
    goto out;                                                       \
  } while (0)

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

grt_status grt__read_rmm(const char *data, size_t len, grt_trace **out, grt_trace_error *err) {
  grt__tb b;
  grt_status st = grt__tb_init(&b, GRT_TRACE_FORMAT_RMM);
  if (st) return st;
  grt__lines it;
  grt__slice line, f[7];
  char q[64];
  int64_t day = 0, prev = 0;
  bool header = false;
  grt__lines_init(&it, data, len);
  while (grt__lines_next(&it, &line)) {
    if (!header) {
      if (!grt__slice_eq(grt__slice_trim(grt__slice_skip_bom(line)), "Thread,Time,Action,Pointer,Size,Stream"))
        FAIL("expected the header 'Thread,Time,Action,Pointer,Size,Stream', found '%s'", grt__quote(line, q, sizeof q));
      header = true;
      continue;
    }
    if (grt__slice_trim(line).n == 0) continue;
    size_t nf = grt__split(line, ',', f, 6);
    if (nf != 6) FAIL("expected 6 comma-separated fields, found %s", nf > 6 ? "more" : "fewer");
    grt_trace_kind kind;
    if (grt__slice_eq(f[2], "allocate")) kind = GRT_TRACE_ALLOC;
    else if (grt__slice_eq(f[2], "free") || grt__slice_eq(f[2], "deallocate")) kind = GRT_TRACE_FREE_COMPLETED;
    else if (grt__slice_eq(f[2], "allocate failure")) kind = GRT_TRACE_OOM;
    else FAIL("unknown action '%s' (expected allocate, free or allocate failure)", grt__quote(f[2], q, sizeof q));
    uint64_t ptr = 0, size, stream;
    unsigned flags = 0;
    int64_t time = 0;
    if (f[1].n > 0) {
      if (!parse_time(f[1], &time)) FAIL("time field '%s' is not HH:MM:SS.ffffff or seconds", grt__quote(f[1], q, sizeof q));
      if (memchr(f[1].p, ':', f[1].n)) { /* time of day: unwrap midnight */
        if (time + day < prev - 12LL * 3600 * 1000000) day += 24LL * 3600 * 1000000;
        time += day;
      }
      prev = time;
      flags |= GRT_TRACE_F_TIME;
    }
    if (is_null_ptr(f[3])) {
      if (kind != GRT_TRACE_OOM) FAIL("%s of a null pointer", kind == GRT_TRACE_ALLOC ? "allocate" : "free");
    } else {
      if (!grt__parse_hex(f[3], &ptr) || ptr == UINT64_MAX) FAIL("pointer field '%s' is not a hex address below 0xffffffffffffffff", grt__quote(f[3], q, sizeof q));
      flags |= GRT_TRACE_F_ADDR;
    }
    if (!grt__parse_u64(f[4], &size)) FAIL("size field '%s' is not a number", grt__quote(f[4], q, sizeof q));
    if (!grt__parse_hex(f[5], &stream)) FAIL("stream field '%s' is not a hex number", grt__quote(f[5], q, sizeof q));
    st = grt__tb_event(&b, kind, ptr, size, stream, time, ptr, flags);
    if (st == GRT_ERR_STATE) FAIL("allocate returned 0x%" PRIx64 ", which is still allocated", ptr);
    if (st) FAIL("%s", grt_status_str(st));
  }
  if (!header) {
    grt__trace_err(err, 1, 0, false, "empty input (expected the RMM CSV header)");
    st = GRT_ERR_PARSE;
  }
out:
  if (st) {
    grt__tb_abort(&b);
    return st;
  }
  return grt__tb_finish(&b, out);
}
