/* textbuf.h — a growable NUL-terminated text buffer for the report writers (internal).
 *
 * Appends never fail visibly: the first allocation failure sets `failed`, later
 * appends do nothing, and grt__textbuf_finish reports GRT_ERR_NOMEM. Writers can
 * therefore append freely and check once at the end.
 */
#ifndef GRT_REPORT_TEXTBUF_H
#define GRT_REPORT_TEXTBUF_H

#include <stddef.h>

#include "gpurt/base.h"

typedef struct grt__textbuf {
  char *data; /* NUL-terminated when non-NULL */
  size_t len, cap;
  int failed;
} grt__textbuf;

void grt__textbuf_putn(grt__textbuf *tb, const char *s, size_t n);
void grt__textbuf_puts(grt__textbuf *tb, const char *s);
void grt__textbuf_printf(grt__textbuf *tb, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
/* A JSON string literal, quotes included, with every required escape. */
void grt__textbuf_json_string(grt__textbuf *tb, const char *s);
/* Hands the text to *out (and its length to *len if non-NULL); frees on failure. */
grt_status grt__textbuf_finish(grt__textbuf *tb, char **out, size_t *len);
void grt__textbuf_discard(grt__textbuf *tb);

#endif
