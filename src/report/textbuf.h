/* textbuf.h — a growable NUL-terminated text buffer for the report writers (internal).
 *
 * Appends never fail visibly: the first allocation failure sets `failed`, later
 * appends do nothing, and grt__tb_finish reports GRT_ERR_NOMEM. Writers can
 * therefore append freely and check once at the end.
 */
#ifndef GRT_REPORT_TEXTBUF_H
#define GRT_REPORT_TEXTBUF_H

#include <stddef.h>

#include "gpurt/base.h"

typedef struct grt__tb {
  char *data; /* NUL-terminated when non-NULL */
  size_t len, cap;
  int failed;
} grt__tb;

void grt__tb_putn(grt__tb *tb, const char *s, size_t n);
void grt__tb_puts(grt__tb *tb, const char *s);
void grt__tb_printf(grt__tb *tb, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
/* A JSON string literal, quotes included, with every required escape. */
void grt__tb_json_string(grt__tb *tb, const char *s);
/* Hands the text to *out (and its length to *len if non-NULL); frees on failure. */
grt_status grt__tb_finish(grt__tb *tb, char **out, size_t *len);
void grt__tb_discard(grt__tb *tb);

#endif
