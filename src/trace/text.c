/* text.c — bounded line iteration, field splitting and number parsing for the text readers.
 *
 * Inputs are (pointer, length) slices of a buffer that is not NUL-terminated
 * and may hold any bytes: nothing here reads past a slice or calls strto*.
 * Parsers accept the whole slice or nothing and report overflow as failure.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "trace/trace_impl.h"

void grt__lines_init(grt__lines *it, const char *data, size_t len) {
  it->data = data;
  it->len = len;
  it->pos = 0;
  it->lineno = 0;
  it->offset = 0;
}

bool grt__lines_next(grt__lines *it, grt__slice *line) {
  if (it->pos >= it->len) return false;
  const char *start = it->data + it->pos;
  const char *nl = memchr(start, '\n', it->len - it->pos);
  size_t n = nl ? (size_t)(nl - start) : it->len - it->pos;
  it->offset = it->pos;
  it->pos += n + (nl ? 1 : 0);
  it->lineno++;
  if (n > 0 && start[n - 1] == '\r') n--;
  line->p = start;
  line->n = n;
  return true;
}

grt_status grt__read_lines(FILE *f, size_t max_line, grt__line_fn fn, void *ctx, grt_trace_error *err) {
  size_t cap = max_line + 1 < 65536 ? 65536 : max_line + 1;
  char *buf = malloc(cap);
  if (!buf) return GRT_ERR_NOMEM;
  size_t have = 0, offset = 0; /* buf[0, have): bytes of the file from offset on */
  uint64_t lineno = 0;
  grt_status st = GRT_OK;
  bool eof = false;
  while (!st && (!eof || have)) {
    if (!eof) {
      size_t got = fread(buf + have, 1, cap - have, f);
      have += got;
      eof = got == 0;
      if (eof && ferror(f)) {
        grt__trace_err(err, lineno + 1, offset, false, "read error");
        st = GRT_ERR_IO;
        break;
      }
    }
    size_t start = 0;
    for (char *nl; !st && (nl = memchr(buf + start, '\n', have - start)) != NULL;) {
      size_t n = (size_t)(nl - (buf + start));
      grt__slice line = {buf + start, n && buf[start + n - 1] == '\r' ? n - 1 : n};
      if (n > max_line) {
        grt__trace_err(err, lineno + 1, offset + start, false, "line longer than %zu bytes", max_line);
        st = GRT_ERR_PARSE;
      } else {
        st = fn(ctx, line, ++lineno, offset + start, err);
      }
      start += n + 1;
    }
    if (st) break;
    if (have - start > max_line) {
      grt__trace_err(err, lineno + 1, offset + start, false, "line longer than %zu bytes", max_line);
      st = GRT_ERR_PARSE;
    } else if (eof && have > start) { /* the last line has no newline */
      size_t n = have - start;
      grt__slice line = {buf + start, buf[start + n - 1] == '\r' ? n - 1 : n};
      st = fn(ctx, line, ++lineno, offset + start, err);
      start = have;
    }
    memmove(buf, buf + start, have - start);
    have -= start;
    offset += start;
  }
  free(buf);
  return st;
}

static bool is_blank(char c) { return c == ' ' || c == '\t'; }

grt__slice grt__slice_trim(grt__slice s) {
  while (s.n > 0 && is_blank(s.p[0])) s.p++, s.n--;
  while (s.n > 0 && is_blank(s.p[s.n - 1])) s.n--;
  return s;
}

grt__slice grt__slice_skip_bom(grt__slice s) {
  if (s.n >= 3 && memcmp(s.p, "\xEF\xBB\xBF", 3) == 0) s.p += 3, s.n -= 3;
  return s;
}

bool grt__slice_eq(grt__slice s, const char *lit) {
  size_t n = strlen(lit);
  return s.n == n && memcmp(s.p, lit, n) == 0;
}

size_t grt__split(grt__slice line, char sep, grt__slice *fields, size_t max) {
  size_t nf = 0, i = 0;
  if (sep == ' ') {
    while (i < line.n) {
      while (i < line.n && is_blank(line.p[i])) i++;
      if (i >= line.n) break;
      size_t s = i;
      while (i < line.n && !is_blank(line.p[i])) i++;
      if (nf == max) return max + 1;
      fields[nf].p = line.p + s;
      fields[nf].n = i - s;
      nf++;
    }
    return nf;
  }
  size_t s = 0;
  for (i = 0; i <= line.n; i++) {
    if (i < line.n && line.p[i] != sep) continue;
    if (nf == max) return max + 1;
    fields[nf].p = line.p + s;
    fields[nf].n = i - s;
    fields[nf] = grt__slice_trim(fields[nf]);
    nf++;
    s = i + 1;
  }
  return nf;
}

bool grt__parse_u64(grt__slice s, uint64_t *out) {
  uint64_t v = 0;
  if (s.n == 0) return false;
  for (size_t i = 0; i < s.n; i++) {
    unsigned d = (unsigned char)s.p[i] - '0';
    if (d > 9) return false;
    if (v > (UINT64_MAX - d) / 10) return false;
    v = v * 10 + d;
  }
  *out = v;
  return true;
}

bool grt__parse_hex(grt__slice s, uint64_t *out) {
  uint64_t v = 0;
  if (s.n >= 2 && s.p[0] == '0' && (s.p[1] == 'x' || s.p[1] == 'X')) s.p += 2, s.n -= 2;
  if (s.n == 0 || s.n > 16) {
    /* allow leading zeros beyond 16 digits */
    while (s.n > 16 && s.p[0] == '0') s.p++, s.n--;
    if (s.n == 0 || s.n > 16) return false;
  }
  for (size_t i = 0; i < s.n; i++) {
    char c = s.p[i];
    unsigned d;
    if (c >= '0' && c <= '9')
      d = (unsigned)(c - '0');
    else if (c >= 'a' && c <= 'f')
      d = (unsigned)(c - 'a' + 10);
    else if (c >= 'A' && c <= 'F')
      d = (unsigned)(c - 'A' + 10);
    else
      return false;
    v = v << 4 | d;
  }
  *out = v;
  return true;
}

bool grt__parse_u64_any(grt__slice s, uint64_t *out) {
  if (s.n >= 2 && s.p[0] == '0' && (s.p[1] == 'x' || s.p[1] == 'X')) {
    if (s.n == 2) return false;
    return grt__parse_hex(s, out);
  }
  return grt__parse_u64(s, out);
}

bool grt__parse_i64(grt__slice s, int64_t *out) {
  bool neg = s.n > 0 && s.p[0] == '-';
  uint64_t v;
  if (neg) s.p++, s.n--;
  if (!grt__parse_u64(s, &v)) return false;
  if (neg) {
    if (v > (uint64_t)INT64_MAX + 1) return false;
    *out = v == (uint64_t)INT64_MAX + 1 ? INT64_MIN : -(int64_t)v;
  } else {
    if (v > (uint64_t)INT64_MAX) return false;
    *out = (int64_t)v;
  }
  return true;
}

bool grt__parse_double(grt__slice s, double *out) {
  char buf[64];
  if (s.n == 0 || s.n >= sizeof buf) return false;
  for (size_t i = 0; i < s.n; i++) {
    char c = s.p[i];
    if (!((c >= '0' && c <= '9') || c == '.' || c == '-' || c == '+' || c == 'e' || c == 'E'))
      return false;
  }
  memcpy(buf, s.p, s.n);
  buf[s.n] = '\0';
  char *end;
  double v = strtod(buf, &end);
  if (*end != '\0' || !isfinite(v)) return false;
  *out = v;
  return true;
}

const char *grt__quote(grt__slice s, char *buf, size_t cap) {
  size_t n = 0, lim = cap - 4 < 40 ? cap - 4 : 40;
  for (size_t i = 0; i < s.n && n < lim; i++) {
    unsigned char c = (unsigned char)s.p[i];
    buf[n++] = (c >= 0x20 && c < 0x7f) ? (char)c : '?';
  }
  if (s.n > lim) {
    buf[n++] = '.';
    buf[n++] = '.';
  }
  buf[n] = '\0';
  return buf;
}
