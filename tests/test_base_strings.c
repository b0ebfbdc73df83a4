/* test_base_strings.c — the JSON string writer (base/json.h): every byte
 * value in both escape styles against a reference written out by hand, runs
 * of plain characters written in one piece, and the empty string. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "base/json.h"

typedef struct sink {
  char text[4096];
  size_t len, calls;
} sink;

static void put(void *ctx, const char *s, size_t n) {
  sink *k = ctx;
  assert_true(n > 0);
  assert_true(k->len + n < sizeof k->text);
  memcpy(k->text + k->len, s, n);
  k->len += n;
  k->text[k->len] = 0;
  k->calls++;
}

static const char *write_to(sink *k, const char *s, unsigned flags) {
  memset(k, 0, sizeof *k);
  grt__json_write_string(s, flags, put, k);
  return k->text;
}

/* The escape of byte c (1..255) as the reports (short) or the timeline files write it. */
static void reference(unsigned char c, int short_escapes, char *out) {
  if (c == '"' || c == '\\')
    snprintf(out, 8, "\\%c", c);
  else if (short_escapes && (c == '\n' || c == '\r' || c == '\t'))
    snprintf(out, 8, "\\%c", c == '\n' ? 'n' : c == '\r' ? 'r' : 't');
  else if (c < 0x20)
    snprintf(out, 8, "\\u%04x", c);
  else
    snprintf(out, 8, "%c", c);
}

static void test_every_byte(void **state) {
  (void)state;
  sink k;
  for (int style = 0; style < 2; style++)
    for (int c = 1; c < 256; c++) {
      char in[4] = {'a', (char)c, 'z', 0}, want[16], esc[8];
      reference((unsigned char)c, style, esc);
      snprintf(want, sizeof want, "\"a%sz\"", esc);
      assert_string_equal(write_to(&k, in, style ? GRT__JSON_SHORT_ESCAPES : 0), want);
    }
}

static void test_runs_and_empty(void **state) {
  (void)state;
  sink k;
  assert_string_equal(write_to(&k, "", 0), "\"\"");
  assert_string_equal(write_to(&k, "stream 7 (non-blocking)", 0), "\"stream 7 (non-blocking)\"");
  assert_int_equal(k.calls, 3); /* quote, the whole run, quote */
  assert_string_equal(write_to(&k, "we\"ird\\name\n\t\x01", 0), "\"we\\\"ird\\\\name\\u000a\\u0009\\u0001\"");
  assert_string_equal(write_to(&k, "we\"ird\\name\n\t\x01", GRT__JSON_SHORT_ESCAPES),
                      "\"we\\\"ird\\\\name\\n\\t\\u0001\"");
  assert_string_equal(write_to(&k, "\x7f\xc3\xa9", 0), "\"\x7f\xc3\xa9\""); /* DEL and UTF-8 bytes go out as they are */
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_every_byte), cmocka_unit_test(test_runs_and_empty)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
