/* test_trace_pickle_vm.c — the pickle stack machine (src/trace/pickle.c) on
 * hand-assembled byte strings: the value each opcode builds (ints of every
 * width and sign, floats, strings, containers, memo, marks), the stack
 * discipline errors (each with the offending opcode's byte offset), every
 * refused opcode by name, and the dict lookup helpers. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "trace/pickle.h"

#define B(lit) (const unsigned char *)(lit), sizeof(lit) - 1

typedef struct loaded {
  grt__pickle pk;
  grt__pv *root;
} loaded;

/* Parses and returns the root; the caller frees l->pk. */
static const grt__pv *load_ok(loaded *l, const unsigned char *d, size_t n) {
  uint64_t off = 0;
  char why[128] = "";
  l->root = NULL;
  grt_status st = grt__pickle_load(&l->pk, d, n, &l->root, &off, why, sizeof why);
  if (st) fail_msg("byte %llu: %s", (unsigned long long)off, why);
  assert_non_null(l->root);
  return l->root;
}

static void expect_err(const unsigned char *d, size_t n, uint64_t offset, const char *needle) {
  grt__pickle pk;
  grt__pv *root = NULL;
  uint64_t off = 12345;
  char why[160] = "";
  grt_status st = grt__pickle_load(&pk, d, n, &root, &off, why, sizeof why);
  grt__pickle_free(&pk);
  assert_int_equal(st, GRT_ERR_PARSE);
  if (!strstr(why, needle) || off != offset)
    fail_msg("got byte %llu '%s', want byte %llu '%s'", (unsigned long long)off, why, (unsigned long long)offset,
             needle);
}

static int64_t int_of(const unsigned char *d, size_t n, bool *big) {
  loaded l;
  const grt__pv *v = load_ok(&l, d, n);
  assert_int_equal(v->type, GRT__PV_INT);
  int64_t i = v->u.i;
  *big = v->big;
  grt__pickle_free(&l.pk);
  return i;
}

static void test_scalars(void **state) {
  (void)state;
  bool big;
  assert_int_equal(int_of(B("\x80\x02J\xff\xff\xff\xff."), &big), -1); /* BININT: signed 32-bit */
  assert_int_equal(int_of(B("J\x00\x00\x00\x80."), &big), INT32_MIN);   /* PROTO is optional */
  assert_int_equal(int_of(B("K\xc8."), &big), 200);
  assert_int_equal(int_of(B("M\x34\x12."), &big), 0x1234);
  assert_int_equal(int_of(B("\x8a\x00."), &big), 0); /* LONG1 of no bytes */
  assert_int_equal(int_of(B("\x8a\x02\x00\x80."), &big), -32768); /* sign-extended */
  assert_int_equal(int_of(B("\x8a\x02\xff\x7f."), &big), 32767);
  assert_int_equal(int_of(B("\x8a\x08\xff\xff\xff\xff\xff\xff\xff\xff."), &big), -1);
  assert_false(big);
  /* 2^63 needs a ninth (zero) byte: kept as an unsigned 64-bit value marked big */
  int64_t i = int_of(B("\x8a\x09\x00\x00\x00\x00\x00\x00\x00\x80\x00."), &big);
  assert_true(big);
  assert_int_equal((uint64_t)i, UINT64_C(1) << 63);
  i = int_of(B("\x8a\x09\x01\x00\x00\x00\x00\x00\x00\x00\x00."), &big); /* 9 bytes, small value */
  assert_false(big);
  assert_int_equal(i, 1);
  assert_int_equal(int_of(B("\x8b\x03\x00\x00\x00\x01\x00\x01."), &big), 0x010001); /* LONG4 */
  /* wider than 64 bits: a value without a number, refused where a number is read */
  loaded w;
  const grt__pv *wide = load_ok(&w, B("\x8a\x09\x00\x00\x00\x00\x00\x00\x00\x80\x01."));
  assert_int_equal(wide->type, GRT__PV_INT);
  assert_true(wide->wide);
  grt__pickle_free(&w.pk);
  expect_err(B("\x80\x04\x8a\x05\x01."), 2, "integer runs past the end");
  expect_err(B("\x80\x04\x8b\x01\x00"), 2, "opcode argument runs past the end");
  expect_err(B("\x80\x04M\x01"), 2, "opcode argument runs past the end");

  loaded l;
  const grt__pv *v = load_ok(&l, B("\x80\x03G\x3f\xf8\x00\x00\x00\x00\x00\x00.")); /* BINFLOAT 1.5, big-endian */
  assert_int_equal(v->type, GRT__PV_FLOAT);
  assert_true(v->u.f == 1.5);
  grt__pickle_free(&l.pk);
  expect_err(B("\x80\x03G\x3f\xf8\x00"), 2, "opcode argument runs past the end");
  v = load_ok(&l, B("\x88."));
  assert_int_equal(v->type, GRT__PV_BOOL);
  assert_int_equal(v->u.i, 1);
  grt__pickle_free(&l.pk);
  v = load_ok(&l, B("\x89."));
  assert_int_equal(v->type, GRT__PV_BOOL);
  assert_int_equal(v->u.i, 0);
  grt__pickle_free(&l.pk);
  v = load_ok(&l, B("N."));
  assert_int_equal(v->type, GRT__PV_NONE);
  grt__pickle_free(&l.pk);
  v = load_ok(&l, B("\x80\x05\x95\x03\x00\x00\x00\x00\x00\x00\x00K\x07.")); /* FRAME is skipped */
  assert_int_equal(v->u.i, 7);
  grt__pickle_free(&l.pk);
  expect_err(B("\x80\x05\x95\x03\x00"), 2, "opcode argument runs past the end");
  expect_err(B("\x80\x01N."), 0, "unsupported pickle protocol 1");
  expect_err(B("\x80"), 0, "opcode argument runs past the end");
}

/* Every string and bytes opcode: the value points into the input. */
static void test_strings(void **state) {
  (void)state;
  static const struct {
    const char *bytes;
    size_t n;
    uint8_t type;
  } cases[] = {
      {"X\x03\x00\x00\x00" "abc.", 9, GRT__PV_STR},                       /* BINUNICODE */
      {"\x8c\x03" "abc.", 6, GRT__PV_STR},                                /* SHORT_BINUNICODE */
      {"\x8d\x03\x00\x00\x00\x00\x00\x00\x00" "abc.", 13, GRT__PV_STR},   /* BINUNICODE8 */
      {"B\x03\x00\x00\x00" "abc.", 9, GRT__PV_BYTES},                     /* BINBYTES */
      {"T\x03\x00\x00\x00" "abc.", 9, GRT__PV_BYTES},                     /* BINSTRING (py2 str) */
      {"C\x03" "abc.", 6, GRT__PV_BYTES},                                 /* SHORT_BINBYTES */
      {"U\x03" "abc.", 6, GRT__PV_BYTES},                                 /* SHORT_BINSTRING */
      {"\x8e\x03\x00\x00\x00\x00\x00\x00\x00" "abc.", 13, GRT__PV_BYTES}, /* BINBYTES8 */
      {"\x96\x03\x00\x00\x00\x00\x00\x00\x00" "abc.", 13, GRT__PV_BYTES}, /* BYTEARRAY8 */
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    loaded l;
    const unsigned char *d = (const unsigned char *)cases[i].bytes;
    const grt__pv *v = load_ok(&l, d, cases[i].n);
    assert_int_equal(v->type, cases[i].type);
    assert_int_equal(v->u.s.n, 3);
    assert_ptr_equal(v->u.s.p, (const char *)d + cases[i].n - 4);
    assert_memory_equal(v->u.s.p, "abc", 3);
    grt__pickle_free(&l.pk);
    expect_err(d, cases[i].n - 2, 0, "truncated: string of 3 bytes runs past the end");
  }
  expect_err(B("\x80\x04X\x03\x00"), 2, "opcode argument runs past the end");
}

static void test_containers(void **state) {
  (void)state;
  loaded l;
  /* MARK 1 2 3 TUPLE; EMPTY_TUPLE; TUPLE1..3; all inside a LIST built by APPENDS */
  const grt__pv *v = load_ok(&l, B("]((K\x01K\x02K\x03t)K\x04\x85K\x05K\x06\x86K\x07K\x08K\x09\x87" "e."));
  assert_int_equal(v->type, GRT__PV_LIST);
  assert_int_equal(v->u.seq.n, 5);
  static const size_t lens[] = {3, 0, 1, 2, 3};
  int64_t next = 1;
  for (size_t k = 0; k < 5; k++) {
    const grt__pv *t = v->u.seq.v[k];
    assert_int_equal(t->type, GRT__PV_TUPLE);
    assert_int_equal(t->u.seq.n, lens[k]);
    for (size_t j = 0; j < t->u.seq.n; j++) assert_int_equal(t->u.seq.v[j]->u.i, next++);
  }
  grt__pickle_free(&l.pk);
  /* DICT from a MARK, SETITEM, APPEND, LIST from a MARK, EMPTY_SET + ADDITEMS, FROZENSET */
  v = load_ok(&l, B("(\x8c\x01" "aK\x01" "d\x8c\x01" "b]K\x02" "as\x8c\x01" "c(K\x03K\x04" "ls\x8c\x01"
                    "d\x8f(K\x05K\x06\x90s\x8c\x01" "e(K\x07\x91s."));
  assert_int_equal(v->type, GRT__PV_DICT);
  assert_int_equal(v->u.seq.n, 10);
  assert_int_equal(grt__pv_get(v, "a")->u.i, 1);
  const grt__pv *b = grt__pv_get(v, "b");
  assert_int_equal(b->type, GRT__PV_LIST);
  assert_int_equal(b->u.seq.n, 1);
  assert_int_equal(b->u.seq.v[0]->u.i, 2);
  const grt__pv *c = grt__pv_get(v, "c");
  assert_int_equal(c->type, GRT__PV_LIST);
  assert_int_equal(c->u.seq.n, 2);
  assert_int_equal(c->u.seq.v[1]->u.i, 4);
  const grt__pv *d = grt__pv_get(v, "d"); /* sets are lists */
  assert_int_equal(d->type, GRT__PV_LIST);
  assert_int_equal(d->u.seq.n, 2);
  assert_int_equal(d->u.seq.v[0]->u.i, 5);
  const grt__pv *e = grt__pv_get(v, "e");
  assert_int_equal(e->type, GRT__PV_LIST);
  assert_int_equal(e->u.seq.n, 1);
  assert_null(grt__pv_get(v, "f"));
  assert_null(grt__pv_get(v, "ab")); /* a longer key never matches a prefix */
  assert_null(grt__pv_get(b, "a")); /* not a dict */
  assert_null(grt__pv_get(NULL, "a"));
  grt__pickle_free(&l.pk);
  /* a repeated key: the last one set wins; a non-string key is skipped */
  v = load_ok(&l, B("}(\x8c\x01kK\x01K\x09K\x09\x8c\x01jK\x03\x8c\x01kK\x02u."));
  assert_int_equal(v->u.seq.n, 8);
  assert_int_equal(grt__pv_get(v, "j")->u.i, 3);
  assert_int_equal(grt__pv_get(v, "k")->u.i, 2);
  assert_true(grt__pv_is_str(v->u.seq.v[0], "k"));
  assert_false(grt__pv_is_str(v->u.seq.v[0], "kk"));
  assert_false(grt__pv_is_str(v->u.seq.v[0], "j"));
  assert_false(grt__pv_is_str(v->u.seq.v[1], "k"));
  assert_false(grt__pv_is_str(NULL, "k"));
  grt__pickle_free(&l.pk);
}

/* More MARKs than the first mark stack holds, more values than the first value stack. */
static void test_deep_nesting(void **state) {
  (void)state;
  enum { MARKS = 100, ITEMS = 300 };
  unsigned char d[MARKS + 2 * ITEMS + MARKS + 2];
  size_t n = 0;
  for (int k = 0; k < MARKS; k++) d[n++] = '(';
  for (int k = 0; k < ITEMS; k++) d[n++] = 'K', d[n++] = (unsigned char)(k % 256);
  for (int k = 0; k < MARKS; k++) d[n++] = 'l';
  d[n++] = '.';
  loaded l;
  const grt__pv *v = load_ok(&l, d, n);
  for (int depth = 0; depth < MARKS - 1; depth++) { /* lists of one list ... */
    assert_int_equal(v->type, GRT__PV_LIST);
    assert_int_equal(v->u.seq.n, 1);
    v = v->u.seq.v[0];
  }
  assert_int_equal(v->u.seq.n, ITEMS); /* ... around the 300 ints */
  assert_int_equal(v->u.seq.v[299]->u.i, 299 % 256);
  grt__pickle_free(&l.pk);
}

static void test_stack_and_memo(void **state) {
  (void)state;
  bool big;
  assert_int_equal(int_of(B("K\x01K\x02" "0."), &big), 1);           /* POP */
  assert_int_equal(int_of(B("K\x07(K\x01K\x02" "1."), &big), 7);     /* POP_MARK drops back to the mark */
  assert_int_equal(int_of(B("K\x07q\x05" "0h\x05."), &big), 7);      /* BINPUT, POP, BINGET */
  assert_int_equal(int_of(B("K\x08r\x00\x01\x00\x00" "0j\x00\x01\x00\x00."), &big), 8); /* LONG_ forms */
  loaded l;
  /* DUP and MEMOIZE share one value, not a copy */
  const grt__pv *v = load_ok(&l, B("]\x94" "2h\x00\x87."));
  assert_int_equal(v->type, GRT__PV_TUPLE);
  assert_int_equal(v->u.seq.n, 3);
  assert_ptr_equal(v->u.seq.v[0], v->u.seq.v[1]);
  assert_ptr_equal(v->u.seq.v[0], v->u.seq.v[2]);
  grt__pickle_free(&l.pk);

  v = load_ok(&l, B("](e.")); /* APPENDS of nothing */
  assert_int_equal(v->type, GRT__PV_LIST);
  assert_int_equal(v->u.seq.n, 0);
  grt__pickle_free(&l.pk);
  v = load_ok(&l, B("(K\x01K\x02" "0l.")); /* POP above a MARK */
  assert_int_equal(v->u.seq.n, 1);
  assert_int_equal(v->u.seq.v[0]->u.i, 1);
  grt__pickle_free(&l.pk);

  expect_err(B("\x80\x04."), 2, "STOP with an empty stack");
  expect_err(B("\x80\x04K\x01q"), 4, "opcode argument runs past the end");
  expect_err(B("\x80\x04K\x01r\x00\x00"), 4, "opcode argument runs past the end");
  expect_err(B("\x80\x04h"), 2, "opcode argument runs past the end");
  expect_err(B("\x80\x04j\x00"), 2, "opcode argument runs past the end");
  expect_err(B("\x80\x04K"), 2, "opcode argument runs past the end");
  expect_err(B("\x80\x04J\x01\x02"), 2, "opcode argument runs past the end");
  expect_err(B("\x80\x04" "0."), 2, "POP from an empty stack");
  expect_err(B("\x80\x04K\x01(0."), 5, "POP of a MARK");
  expect_err(B("\x80\x04K\x01" "1."), 4, "no MARK on the stack");
  expect_err(B("\x80\x04" "2."), 2, "DUP of an empty stack");
  expect_err(B("\x80\x04q\x01."), 2, "memo store with an empty stack");
  expect_err(B("\x80\x04\x94."), 2, "memo store with an empty stack");
  expect_err(B("\x80\x04h\x03."), 2, "memo key 3 not found");
  expect_err(B("\x80\x04K\x01\x86."), 4, "stack underflow");
  expect_err(B("\x80\x04K\x01(K\x02\x86."), 7, "stack underflow"); /* TUPLE2 may not reach below a MARK */
  expect_err(B("\x80\x04}(K\x01K\x02s."), 8, "crosses a MARK");
  expect_err(B("\x80\x04](K\x01" "a."), 6, "crosses a MARK");
  expect_err(B("\x80\x04K\x01" "a."), 4, "stack underflow");
  expect_err(B("\x80\x04(K\x01" "e."), 5, "stack underflow"); /* APPENDS with nothing below its MARK */
  expect_err(B("\x80\x04}(K\x01K\x02K\x03u."), 10, "odd number of items for SETITEMS");
  expect_err(B("\x80\x04](K\x01K\x02u."), 8, "SETITEM(S) target is not a dict");
  expect_err(B("\x80\x04}(K\x01" "e."), 6, "APPEND(S) target is not a list");
  expect_err(B("\x80\x04(K\x01" "d."), 5, "odd number of items for a dict");
  expect_err(B("\x80\x04K\x01t."), 4, "no MARK on the stack");
}

/* Every opcode that could name or call a global is refused by name, at its offset. */
static void test_refused(void **state) {
  (void)state;
  static const struct {
    unsigned char op;
    const char *name;
  } refused[] = {
      {'c', "GLOBAL"},         {0x93, "STACK_GLOBAL"}, {'R', "REDUCE"},     {'b', "BUILD"},
      {'i', "INST"},           {'o', "OBJ"},           {0x81, "NEWOBJ"},    {0x92, "NEWOBJ_EX"},
      {0x82, "EXT"},           {0x83, "EXT"},          {0x84, "EXT"},       {'P', "PERSID"},
      {'Q', "BINPERSID"},      {0x97, "NEXT_BUFFER"},  {0x98, "READONLY_BUFFER"},
  };
  for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
    unsigned char d[] = {0x80, 0x05, 'N', 'N', refused[i].op, '.'};
    char want[64];
    snprintf(want, sizeof want, "opcode %s refused", refused[i].name);
    expect_err(d, sizeof d, 4, want);
  }
  expect_err(B("\x80\x04NF1.0\n."), 3, "unsupported pickle opcode 0x46"); /* text FLOAT */
  expect_err(B("\x80\x04N\xff."), 3, "unsupported pickle opcode 0xff");
  expect_err(B("\x80\x04N"), 3, "truncated: no STOP opcode");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_scalars),        cmocka_unit_test(test_strings),
      cmocka_unit_test(test_containers),     cmocka_unit_test(test_deep_nesting),
      cmocka_unit_test(test_stack_and_memo), cmocka_unit_test(test_refused),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
