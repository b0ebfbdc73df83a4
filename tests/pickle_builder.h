/* pickle_builder.h — writes the plain-data pickles of PyTorch memory
 * snapshots byte by byte, for the reader and replay tests (protocol 4
 * opcodes only: dicts, lists, short strings, LONG1 integers). */
#ifndef GRT_TESTS_PICKLE_BUILDER_H
#define GRT_TESTS_PICKLE_BUILDER_H

#include <stdint.h>
#include <string.h>

typedef struct pk {
  unsigned char b[8192];
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
