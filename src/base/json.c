/* json.c — see json.h. */
#include "base/json.h"

#include <stdio.h>

/* The escape for c into buf, or NULL when c goes out as it is. */
static const char *escape(unsigned char c, unsigned flags, char buf[8]) {
  if (c == '"') return "\\\"";
  if (c == '\\') return "\\\\";
  if (c >= 0x20) return NULL;
  if (flags & GRT__JSON_SHORT_ESCAPES) {
    if (c == '\n') return "\\n";
    if (c == '\r') return "\\r";
    if (c == '\t') return "\\t";
  }
  snprintf(buf, 8, "\\u%04x", c);
  return buf;
}

void grt__json_write_string(const char *s, unsigned flags, grt__json_sink put, void *ctx) {
  char buf[8];
  const char *p = s, *run = s; /* run: the first character not written yet */
  put(ctx, "\"", 1);
  for (; *p; p++) {
    const char *e = escape((unsigned char)*p, flags, buf);
    if (!e) continue;
    if (p > run) put(ctx, run, (size_t)(p - run));
    put(ctx, e, e == buf ? 6 : 2);
    run = p + 1;
  }
  if (p > run) put(ctx, run, (size_t)(p - run));
  put(ctx, "\"", 1);
}
