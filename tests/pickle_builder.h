/* pickle_builder.h — writes the plain-data pickles of PyTorch memory
 * snapshots byte by byte, for the reader and replay tests (protocol 4
 * opcodes only: dicts, lists, short strings, LONG1 integers, the memo).
 * The buffer holds PK_CAP bytes (define it before including for more). */
#ifndef GRT_TESTS_PICKLE_BUILDER_H
#define GRT_TESTS_PICKLE_BUILDER_H

#include <stdint.h>
#include <string.h>

#ifndef PK_CAP
#define PK_CAP 8192
#endif

typedef struct pk {
  unsigned char b[PK_CAP];
  size_t n;
} pk;

static inline void op(pk *p, unsigned char c) { p->b[p->n++] = c; }
static inline void str(pk *p, const char *s) {
  size_t n = strlen(s);
  op(p, 0x8c);
  op(p, (unsigned char)n);
  memcpy(p->b + p->n, s, n);
  p->n += n;
}
static inline void num(pk *p, uint64_t v) { /* LONG1 with 8 bytes (+1 zero byte so it stays positive) */
  op(p, 0x8a);
  op(p, 9);
  for (int i = 0; i < 8; i++) op(p, (unsigned char)(v >> (8 * i)));
  op(p, 0);
}
static inline void small(pk *p, unsigned v) { op(p, 'K'), op(p, (unsigned char)v); }
/* A string of n bytes (may hold NUL bytes), n < 256. */
static inline void strn(pk *p, const char *s, size_t n) {
  op(p, 0x8c);
  op(p, (unsigned char)n);
  memcpy(p->b + p->n, s, n);
  p->n += n;
}
/* A signed 64-bit integer (LONG1, 8 bytes two's complement). */
static inline void inum(pk *p, int64_t v) {
  op(p, 0x8a);
  op(p, 8);
  for (int i = 0; i < 8; i++) op(p, (unsigned char)((uint64_t)v >> (8 * i)));
}
/* MEMOIZE the value on top of the stack (memo indices count from 0), and push memo[i] (LONG_BINGET). */
static inline void memo(pk *p) { op(p, 0x94); }
static inline void memo_get(pk *p, uint32_t i) {
  op(p, 'j');
  for (int k = 0; k < 4; k++) op(p, (unsigned char)(i >> (8 * k)));
}
static inline void kv_num(pk *p, const char *k, uint64_t v) { str(p, k), num(p, v); }
static inline void kv_str(pk *p, const char *k, const char *v) { str(p, k), str(p, v); }
/* The top-level dict: begin(p), key-value pairs, end(p). */
static inline void begin(pk *p) { p->n = 0, op(p, 0x80), op(p, 4), op(p, '}'), op(p, '('); }
static inline void end(pk *p) { op(p, 'u'), op(p, '.'); }
static inline void dict_open(pk *p) { op(p, '}'), op(p, '('); }
static inline void dict_close(pk *p) { op(p, 'u'); }
/* A list: list_open, items, list_close. */
static inline void list_open(pk *p) { op(p, ']'), op(p, '('); }
static inline void list_close(pk *p) { op(p, 'e'); }

#endif
