/* textbuf.c — the growable text buffer behind every report writer. */
#include "report/textbuf.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/json.h"
#include "gpurt/report.h"

static int reserve(grt__textbuf *tb, size_t extra) {
  if (tb->failed) return 0;
  if (tb->len + extra + 1 <= tb->cap) return 1;
  size_t cap = tb->cap ? tb->cap : 1024;
  while (cap < tb->len + extra + 1) {
    if (cap > SIZE_MAX / 2) {
      tb->failed = 1;
      return 0;
    }
    cap *= 2;
  }
  char *d = realloc(tb->data, cap);
  if (!d) {
    tb->failed = 1;
    return 0;
  }
  tb->data = d;
  tb->cap = cap;
  return 1;
}

void grt__textbuf_putn(grt__textbuf *tb, const char *s, size_t n) {
  if (!reserve(tb, n)) return;
  memcpy(tb->data + tb->len, s, n);
  tb->len += n;
  tb->data[tb->len] = 0;
}

void grt__textbuf_puts(grt__textbuf *tb, const char *s) { grt__textbuf_putn(tb, s, strlen(s)); }

void grt__textbuf_printf(grt__textbuf *tb, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  char small[256];
  int n = vsnprintf(small, sizeof small, fmt, ap);
  va_end(ap);
  if (n < 0) {
    tb->failed = 1;
    return;
  }
  if ((size_t)n < sizeof small) {
    grt__textbuf_putn(tb, small, (size_t)n);
    return;
  }
  if (!reserve(tb, (size_t)n)) return;
  va_start(ap, fmt);
  vsnprintf(tb->data + tb->len, (size_t)n + 1, fmt, ap);
  va_end(ap);
  tb->len += (size_t)n;
}

static void put_text(void *tb, const char *s, size_t n) { grt__textbuf_putn(tb, s, n); }

void grt__textbuf_json_string(grt__textbuf *tb, const char *s) {
  grt__json_write_string(s, GRT__JSON_SHORT_ESCAPES, put_text, tb);
}

grt_status grt__textbuf_finish(grt__textbuf *tb, char **out, size_t *len) {
  if (!tb->failed && !tb->data) reserve(tb, 0);
  if (tb->failed) {
    grt__textbuf_discard(tb);
    return GRT_ERR_NOMEM;
  }
  tb->data[tb->len] = 0;
  *out = tb->data;
  if (len) *len = tb->len;
  tb->data = NULL;
  tb->len = tb->cap = 0;
  return GRT_OK;
}

void grt__textbuf_discard(grt__textbuf *tb) {
  free(tb->data);
  tb->data = NULL;
  tb->len = tb->cap = 0;
}

void grt_report_free(char *text) { free(text); }
