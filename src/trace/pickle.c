/* pickle.c — the plain-data pickle stack machine (see pickle.h).
 *
 * Invariants: the value stack and the mark stack only hold indices/pointers
 * created by this parse; every argument read is bounds-checked against the
 * input length before it is read; every container growth is bounded by the
 * number of opcodes, so memory stays O(len). A value not marked shared is
 * referenced by exactly one container or stack slot, so a taken item's
 * unshared values can be reused at once.
 */
#include "trace/pickle.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/u64map.h"

#define SLAB_VALUES 1024

struct grt__pickle_slab {
  grt__pickle_slab *next;
  size_t used;
  grt__pv v[SLAB_VALUES];
};

typedef struct vm {
  grt__pickle *pk;
  const unsigned char *d;
  size_t len, pos, op_pos;
  grt__pv **stack;
  size_t sp, cap;
  size_t *marks;
  size_t nmarks, cap_marks;
  grt__u64map memo;     /* index -> value, for the indices the pickle fetches */
  grt__idxset fetched;  /* those indices (pickle_scan.c) */
  grt__idxset put;      /* every index stored: MEMOIZE stores at their count */
  grt__pickle_sink sink;
  void *sink_ctx;
  grt__pv **work;       /* release's worklist */
  size_t n_work, cap_work;
  char *reason;
  size_t reason_cap;
  grt__pv *none, *t, *f;
} vm;

static grt__pv *new_value(vm *m, grt__pv_type type) {
  grt__pv *v = m->pk->reuse;
  if (v) {
    m->pk->reuse = (grt__pv *)(uintptr_t)v->u.s.p;
    memset(v, 0, sizeof *v);
    v->type = (uint8_t)type;
    return v;
  }
  grt__pickle_slab *s = m->pk->slabs;
  if (!s || s->used == SLAB_VALUES) {
    s = malloc(sizeof *s);
    if (!s) return NULL;
    s->used = 0;
    s->next = m->pk->slabs;
    m->pk->slabs = s;
  }
  v = &s->v[s->used++];
  memset(v, 0, sizeof *v);
  v->type = (uint8_t)type;
  return v;
}

void grt__pickle_free(grt__pickle *pk) {
  grt__pickle_slab *s = pk->slabs;
  while (s) {
    grt__pickle_slab *next = s->next;
    for (size_t i = 0; i < s->used; i++) {
      uint8_t t = s->v[i].type;
      if (t == GRT__PV_LIST || t == GRT__PV_TUPLE || t == GRT__PV_DICT) free(s->v[i].u.seq.v);
    }
    free(s);
    s = next;
  }
  pk->slabs = NULL;
  pk->reuse = NULL;
}

#if defined(__GNUC__)
__attribute__((format(printf, 2, 3)))
#endif
static grt_status fail(vm *m, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(m->reason, m->reason_cap, fmt, ap);
  va_end(ap);
  return GRT_ERR_PARSE;
}

static grt_status nomem(vm *m) {
  snprintf(m->reason, m->reason_cap, "out of host memory");
  return GRT_ERR_NOMEM;
}


static bool is_container(const grt__pv *v) {
  return v->type == GRT__PV_LIST || v->type == GRT__PV_TUPLE || v->type == GRT__PV_DICT;
}

/* Gives a taken item's unshared values back for reuse (no recursion: a worklist). */
static grt_status release(vm *m, grt__pv *item) {
  m->n_work = 0;
  grt__pv *v = item;
  for (;;) {
    if (!v->shared) {
      if (is_container(v)) {
        size_t n = v->u.seq.n;
        if (m->n_work + n > m->cap_work) {
          size_t nc = m->cap_work ? m->cap_work : 64;
          while (nc < m->n_work + n) nc *= 2;
          grt__pv **p = realloc(m->work, nc * sizeof *p);
          if (!p) return nomem(m);
          m->work = p;
          m->cap_work = nc;
        }
        if (n) memcpy(m->work + m->n_work, v->u.seq.v, n * sizeof *v->u.seq.v);
        m->n_work += n;
        free(v->u.seq.v);
      }
      v->type = GRT__PV_NONE; /* grt__pickle_free must not free its items again */
      v->u.s.p = (const char *)(uintptr_t)m->pk->reuse;
      m->pk->reuse = v;
    }
    if (!m->n_work) return GRT_OK;
    v = m->work[--m->n_work];
  }
}

static grt_status push(vm *m, grt__pv *v) {
  if (!v) return nomem(m);
  if (m->sp == m->cap) {
    size_t nc = m->cap ? m->cap * 2 : 256;
    grt__pv **p = realloc(m->stack, nc * sizeof *p);
    if (!p) return nomem(m);
    m->stack = p;
    m->cap = nc;
  }
  m->stack[m->sp++] = v;
  return GRT_OK;
}

static grt_status need(vm *m, size_t n) {
  if (m->len - m->pos < n) return fail(m, "truncated: opcode argument runs past the end");
  return GRT_OK;
}

static uint64_t le(const unsigned char *p, size_t n) {
  uint64_t v = 0;
  for (size_t i = n; i-- > 0;) v = v << 8 | p[i];
  return v;
}

/* Index of the innermost mark on the stack. */
static grt_status pop_mark(vm *m, size_t *base) {
  if (m->nmarks == 0) return fail(m, "no MARK on the stack");
  *base = m->marks[--m->nmarks];
  return GRT_OK;
}

static grt_status seq_add(vm *m, grt__pv *c, grt__pv **items, size_t n) {
  if (n == 0) return GRT_OK;
  if (c->u.seq.n + n > c->u.seq.cap) {
    size_t nc = c->u.seq.cap ? c->u.seq.cap : 4;
    while (nc < c->u.seq.n + n) nc *= 2;
    grt__pv **p = realloc(c->u.seq.v, nc * sizeof *p);
    if (!p) return nomem(m);
    c->u.seq.v = p;
    c->u.seq.cap = nc;
  }
  memcpy(c->u.seq.v + c->u.seq.n, items, n * sizeof *items);
  c->u.seq.n += n;
  return GRT_OK;
}

/* Builds a container from stack[base..sp) and replaces them with it. */
static grt_status collect(vm *m, grt__pv_type type, size_t base) {
  size_t n = m->sp - base;
  if (type == GRT__PV_DICT && n % 2) return fail(m, "odd number of items for a dict");
  grt__pv *c = new_value(m, type);
  if (!c) return nomem(m);
  grt_status st = n ? seq_add(m, c, m->stack + base, n) : GRT_OK; /* stack may be NULL when n == 0 */
  if (st) return st;
  m->sp = base;
  return push(m, c);
}

/* APPEND(S)/SETITEM(S)/ADDITEMS: add stack[base..sp) to the container at stack[base-1]. */
static grt_status extend(vm *m, size_t base, bool dict) {
  if (base == 0) return fail(m, "stack underflow");
  grt__pv *c = m->stack[base - 1];
  size_t n = m->sp - base;
  if (dict ? c->type != GRT__PV_DICT : c->type != GRT__PV_LIST)
    return fail(m, dict ? "SETITEM(S) target is not a dict" : "APPEND(S) target is not a list");
  if (dict && n % 2) return fail(m, "odd number of items for SETITEMS");
  grt_status st = GRT_OK;
  size_t kept = n;
  if (!dict && m->sink) { /* taken items leave the list; the others keep their order */
    kept = 0;
    for (size_t i = 0; i < n && !st; i++) {
      bool taken = false;
      grt__pv *item = m->stack[base + i];
      st = m->sink(m->sink_ctx, c, c->u.seq.n + kept, item, &taken);
      if (!st && taken) st = release(m, item);
      else m->stack[base + kept++] = item;
    }
  }
  if (!st && kept) st = seq_add(m, c, m->stack + base, kept);
  m->sp = base;
  return st;
}

static grt_status string_op(vm *m, grt__pv_type type, size_t lenbytes) {
  grt_status st = need(m, lenbytes);
  if (st) return st;
  uint64_t n = le(m->d + m->pos, lenbytes);
  m->pos += lenbytes;
  if (n > m->len - m->pos) return fail(m, "truncated: string of %llu bytes runs past the end", (unsigned long long)n);
  grt__pv *v = new_value(m, type);
  if (!v) return nomem(m);
  v->u.s.p = (const char *)m->d + m->pos;
  v->u.s.n = (size_t)n;
  m->pos += (size_t)n;
  return push(m, v);
}

static grt_status int_value(vm *m, int64_t i, bool big) {
  grt__pv *v = new_value(m, GRT__PV_INT);
  if (!v) return nomem(m);
  v->u.i = i;
  v->big = big;
  return push(m, v);
}

/* LONG1/LONG4: little-endian two's complement of n bytes. */
static grt_status long_op(vm *m, size_t lenbytes) {
  grt_status st = need(m, lenbytes);
  if (st) return st;
  uint64_t n = le(m->d + m->pos, lenbytes);
  m->pos += lenbytes;
  if (n > m->len - m->pos) return fail(m, "truncated: integer runs past the end");
  const unsigned char *p = m->d + m->pos;
  m->pos += (size_t)n;
  if (n == 0) return int_value(m, 0, false);
  if (n == 9 && p[8] == 0) return int_value(m, (int64_t)le(p, 8), (p[7] & 0x80) != 0);
  if (n > 8) { /* kept, so the reader can name the field that holds it */
    grt_status st2 = int_value(m, 0, false);
    if (!st2) m->stack[m->sp - 1]->wide = true;
    return st2;
  }
  uint64_t u = le(p, (size_t)n);
  if (n < 8 && (p[n - 1] & 0x80)) u |= ~(uint64_t)0 << (8 * n); /* sign-extend */
  return int_value(m, (int64_t)u, false);
}

/* Only an index the pickle fetches is kept; the value stored there is then shared. */
static grt_status memo_put(vm *m, uint64_t idx) {
  if (m->sp == 0) return fail(m, "memo store with an empty stack");
  bool added;
  if (!grt__idxset_add(&m->put, idx, &added)) return nomem(m);
  if (!grt__idxset_has(&m->fetched, idx)) return GRT_OK;
  grt__pv *v = m->stack[m->sp - 1];
  if (!grt__u64map_put(&m->memo, idx, v)) return nomem(m);
  v->shared = true;
  return GRT_OK;
}

static grt_status memo_get(vm *m, uint64_t idx) {
  grt__pv *v = grt__u64map_get(&m->memo, idx);
  if (!v) return fail(m, "memo key %llu not found", (unsigned long long)idx);
  return push(m, v);
}

static grt_status arg(vm *m, size_t n, uint64_t *out) {
  grt_status st = need(m, n);
  if (st) return st;
  *out = le(m->d + m->pos, n);
  m->pos += n;
  return GRT_OK;
}

static const char *refused_name(unsigned char op) {
  switch (op) {
    case 'c': return "GLOBAL";
    case 0x93: return "STACK_GLOBAL";
    case 'R': return "REDUCE";
    case 'b': return "BUILD";
    case 'i': return "INST";
    case 'o': return "OBJ";
    case 0x81: return "NEWOBJ";
    case 0x92: return "NEWOBJ_EX";
    case 0x82: case 0x83: case 0x84: return "EXT";
    case 'P': return "PERSID";
    case 'Q': return "BINPERSID";
    case 0x97: return "NEXT_BUFFER";
    case 0x98: return "READONLY_BUFFER";
  }
  return NULL;
}

/* Executes one opcode; sets *done at STOP. */
static grt_status step(vm *m, bool *done) {
  unsigned char op = m->d[m->pos++];
  uint64_t a;
  size_t base = 0;
  grt_status st = GRT_OK;
  switch (op) {
    case 0x80: /* PROTO */
      if ((st = arg(m, 1, &a))) return st;
      if (a < 2 || a > 5) return fail(m, "unsupported pickle protocol %llu (2-5 are read)", (unsigned long long)a);
      return GRT_OK;
    case 0x95: /* FRAME: framing is only a read-ahead hint, but it must fit in what is left */
      if ((st = arg(m, 8, &a))) return st;
      if (a > m->len - m->pos)
        return fail(m, "FRAME declares %llu bytes where %llu remain", (unsigned long long)a,
                    (unsigned long long)(m->len - m->pos));
      return GRT_OK;
    case '.': /* STOP */
      if (m->sp == 0) return fail(m, "STOP with an empty stack");
      *done = true;
      return GRT_OK;
    case '(': /* MARK */
      if (m->nmarks == m->cap_marks) {
        size_t nc = m->cap_marks ? m->cap_marks * 2 : 64;
        size_t *p = realloc(m->marks, nc * sizeof *p);
        if (!p) return nomem(m);
        m->marks = p;
        m->cap_marks = nc;
      }
      m->marks[m->nmarks++] = m->sp;
      return GRT_OK;
    case '0': /* POP */
      if (m->sp == 0) return fail(m, "POP from an empty stack");
      if (m->nmarks && m->marks[m->nmarks - 1] == m->sp) return fail(m, "POP of a MARK");
      m->sp--;
      return GRT_OK;
    case '1': /* POP_MARK */
      if ((st = pop_mark(m, &base))) return st;
      m->sp = base;
      return GRT_OK;
    case '2': /* DUP */
      if (m->sp == 0) return fail(m, "DUP of an empty stack");
      m->stack[m->sp - 1]->shared = true;
      return push(m, m->stack[m->sp - 1]);
    case '}': return push(m, new_value(m, GRT__PV_DICT));
    case ']': return push(m, new_value(m, GRT__PV_LIST));
    case ')': return push(m, new_value(m, GRT__PV_TUPLE));
    case 0x8f: return push(m, new_value(m, GRT__PV_LIST)); /* EMPTY_SET */
    case 'd': case 'l': case 't': case 0x91: /* DICT LIST TUPLE FROZENSET */
      if ((st = pop_mark(m, &base))) return st;
      return collect(m, op == 'd' ? GRT__PV_DICT : op == 't' ? GRT__PV_TUPLE : GRT__PV_LIST, base);
    case 0x85: case 0x86: case 0x87: { /* TUPLE1..3 */
      size_t n = (size_t)(op - 0x84);
      if (m->sp < n || (m->nmarks && m->marks[m->nmarks - 1] > m->sp - n))
        return fail(m, "stack underflow");
      return collect(m, GRT__PV_TUPLE, m->sp - n);
    }
    case 's': case 'a': /* SETITEM APPEND */
      if (m->sp < (op == 's' ? 3u : 2u)) return fail(m, "stack underflow");
      if (m->nmarks && m->marks[m->nmarks - 1] > m->sp - (op == 's' ? 3u : 2u))
        return fail(m, "stack underflow (crosses a MARK)");
      return extend(m, m->sp - (op == 's' ? 2 : 1), op == 's');
    case 'u': case 'e': case 0x90: /* SETITEMS APPENDS ADDITEMS */
      if ((st = pop_mark(m, &base))) return st;
      return extend(m, base, op == 'u');
    case 'X': return string_op(m, GRT__PV_STR, 4);
    case 0x8c: return string_op(m, GRT__PV_STR, 1);
    case 0x8d: return string_op(m, GRT__PV_STR, 8);
    case 'B': case 'T': return string_op(m, GRT__PV_BYTES, 4);
    case 'C': case 'U': return string_op(m, GRT__PV_BYTES, 1);
    case 0x8e: case 0x96: return string_op(m, GRT__PV_BYTES, 8);
    case 'J':
      if ((st = arg(m, 4, &a))) return st;
      return int_value(m, (int64_t)(int32_t)(uint32_t)a, false);
    case 'K':
      if ((st = arg(m, 1, &a))) return st;
      return int_value(m, (int64_t)a, false);
    case 'M':
      if ((st = arg(m, 2, &a))) return st;
      return int_value(m, (int64_t)a, false);
    case 0x8a: return long_op(m, 1);
    case 0x8b: return long_op(m, 4);
    case 'G': { /* BINFLOAT: big-endian IEEE 754 double */
      if ((st = need(m, 8))) return st;
      uint64_t u = 0;
      for (int i = 0; i < 8; i++) u = u << 8 | m->d[m->pos + (size_t)i];
      m->pos += 8;
      grt__pv *v = new_value(m, GRT__PV_FLOAT);
      if (!v) return nomem(m);
      memcpy(&v->u.f, &u, sizeof u);
      return push(m, v);
    }
    case 0x88: return push(m, m->t);
    case 0x89: return push(m, m->f);
    case 'N': return push(m, m->none);
    case 0x94: return memo_put(m, m->put.count);
    case 'q':
      if ((st = arg(m, 1, &a))) return st;
      return memo_put(m, a);
    case 'r':
      if ((st = arg(m, 4, &a))) return st;
      return memo_put(m, a);
    case 'h':
      if ((st = arg(m, 1, &a))) return st;
      return memo_get(m, a);
    case 'j':
      if ((st = arg(m, 4, &a))) return st;
      return memo_get(m, a);
  }
  const char *name = refused_name(op);
  if (name) return fail(m, "opcode %s refused: the reader only accepts plain data, never globals or objects", name);
  return fail(m, "unsupported pickle opcode 0x%02x", op);
}

grt_status grt__pickle_load(grt__pickle *pk, const unsigned char *data, size_t len, grt__pv **root,
                            uint64_t *err_offset, char *reason, size_t reason_cap) {
  return grt__pickle_load_sink(pk, data, len, root, err_offset, reason, reason_cap, NULL, NULL);
}

grt_status grt__pickle_load_sink(grt__pickle *pk, const unsigned char *data, size_t len, grt__pv **root,
                                 uint64_t *err_offset, char *reason, size_t reason_cap, grt__pickle_sink sink,
                                 void *sink_ctx) {
  vm m;
  memset(&m, 0, sizeof m);
  pk->slabs = NULL;
  pk->reuse = NULL;
  m.pk = pk;
  m.d = data;
  m.len = len;
  m.reason = reason;
  m.reason_cap = reason_cap;
  m.sink = sink;
  m.sink_ctx = sink_ctx;
  grt__u64map_init(&m.memo);
  grt__idxset_init(&m.fetched, len + 1);
  grt__idxset_init(&m.put, len + 1);
  grt_status st = grt__pickle_scan_fetched(data, len, &m.fetched);
  if (st) st = nomem(&m);
  m.none = new_value(&m, GRT__PV_NONE);
  m.t = new_value(&m, GRT__PV_BOOL);
  m.f = new_value(&m, GRT__PV_BOOL);
  if (!m.none || !m.t || !m.f) st = nomem(&m);
  else m.t->u.i = 1, m.none->shared = m.t->shared = m.f->shared = true;
  bool done = false;
  while (!st && !done) {
    if (m.pos >= m.len) {
      m.op_pos = m.pos;
      st = fail(&m, "truncated: no STOP opcode");
      break;
    }
    m.op_pos = m.pos;
    st = step(&m, &done);
  }
  if (!st) *root = m.stack[m.sp - 1];
  *err_offset = m.op_pos;
  free(m.stack);
  free(m.marks);
  free(m.work);
  grt__u64map_free(&m.memo);
  grt__idxset_free(&m.fetched);
  grt__idxset_free(&m.put);
  return st;
}

const grt__pv *grt__pv_get(const grt__pv *dict, const char *key) {
  if (!dict || dict->type != GRT__PV_DICT) return NULL;
  size_t kn = strlen(key);
  for (size_t i = dict->u.seq.n; i >= 2; i -= 2) {
    const grt__pv *k = dict->u.seq.v[i - 2];
    if (k->type == GRT__PV_STR && k->u.s.n == kn && memcmp(k->u.s.p, key, kn) == 0)
      return dict->u.seq.v[i - 1];
  }
  return NULL;
}

bool grt__pv_is_str(const grt__pv *v, const char *lit) {
  size_t n = strlen(lit);
  return v && v->type == GRT__PV_STR && v->u.s.n == n && memcmp(v->u.s.p, lit, n) == 0;
}
