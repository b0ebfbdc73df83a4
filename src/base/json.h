/* json.h — the one JSON string writer (internal): the report layer's text
 * buffers and the executor's timeline files both write through it (base sits
 * below both layers).
 *
 * The text goes out through a sink, in runs: the characters between two
 * escapes in one call. Quotes and backslashes are escaped with a backslash,
 * other control characters as \u00XX (lowercase hex); with
 * GRT__JSON_SHORT_ESCAPES, \n, \r and \t take their two-character forms
 * instead (the reports have always written those; the timeline files have
 * always written \u000a and the like, and each stays byte for byte as it was).
 */
#ifndef GRT_BASE_JSON_H
#define GRT_BASE_JSON_H

#include <stddef.h>

/* Appends n bytes of s to wherever ctx writes. */
typedef void (*grt__json_sink)(void *ctx, const char *s, size_t n);

enum { GRT__JSON_SHORT_ESCAPES = 1 };

/* Writes s (NUL-terminated) as a JSON string literal, quotes included. */
void grt__json_write_string(const char *s, unsigned flags, grt__json_sink put, void *ctx);

#endif
