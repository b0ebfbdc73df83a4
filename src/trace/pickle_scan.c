/* pickle_scan.c — which memo entries a pickle ever fetches (pickle.h).
 *
 * Python's pickler memoizes every container and string it writes, but a
 * snapshot fetches back only what it repeats (frame dicts, key strings).
 * One pass over the opcodes, reading no values, finds the fetched indices,
 * so the parse keeps only those in its memo and may reuse a value nothing
 * else can reach once it has been taken (grt__pickle_load's sink). The
 * scan stops at the first opcode it does not know or whose argument runs
 * past the end: the parse reports that one. */
#include <stdlib.h>
#include <string.h>

#include "trace/pickle.h"

void grt__idxset_init(grt__idxset *s, size_t dense_bits) {
  memset(s, 0, sizeof *s);
  s->dense_bits = dense_bits;
  grt__u64map_init(&s->sparse);
}

void grt__idxset_free(grt__idxset *s) {
  free(s->bits);
  grt__u64map_free(&s->sparse);
  memset(s, 0, sizeof *s);
}

bool grt__idxset_has(const grt__idxset *s, uint64_t i) {
  if (i < s->dense_bits) return s->bits && (s->bits[i / 64] >> (i % 64) & 1);
  return grt__u64map_get(&s->sparse, i) != NULL;
}

/* Adds i; *added: it was not there. False when host memory ran out. */
bool grt__idxset_add(grt__idxset *s, uint64_t i, bool *added) {
  *added = !grt__idxset_has(s, i);
  if (!*added) return true;
  s->count++;
  if (i >= s->dense_bits) return grt__u64map_put(&s->sparse, i, (void *)1);
  if (!s->bits && !(s->bits = calloc(s->dense_bits / 64 + 1, sizeof *s->bits))) return false;
  s->bits[i / 64] |= (uint64_t)1 << (i % 64);
  return true;
}

static uint64_t le(const unsigned char *p, size_t n) {
  uint64_t v = 0;
  for (size_t i = n; i-- > 0;) v = v << 8 | p[i];
  return v;
}

/* Bytes of the argument of op at p (len bytes left after op); false: unknown op or truncated. */
static bool arg_size(unsigned char op, const unsigned char *p, size_t left, size_t *n) {
  size_t fixed = 0, lenbytes = 0;
  switch (op) {
    case 0x80: case 'K': case 'q': case 'h': fixed = 1; break;
    case 'M': fixed = 2; break;
    case 'J': case 'r': case 'j': fixed = 4; break;
    case 0x95: case 'G': fixed = 8; break;
    case 0x8c: case 'C': case 'U': case 0x8a: lenbytes = 1; break;
    case 'X': case 'B': case 'T': case 0x8b: lenbytes = 4; break;
    case 0x8d: case 0x8e: case 0x96: lenbytes = 8; break;
    case '.': case '(': case ')': case ']': case '}': case 0x8f: case 'd': case 'l': case 't': case 0x91:
    case 0x85: case 0x86: case 0x87: case 's': case 'a': case 'u': case 'e': case 0x90: case '0': case '1':
    case '2': case 0x88: case 0x89: case 'N': case 0x94: break;
    default: return false;
  }
  if (lenbytes) {
    if (left < lenbytes) return false;
    uint64_t v = le(p, lenbytes);
    if (v > left - lenbytes) return false;
    *n = lenbytes + (size_t)v;
    return true;
  }
  *n = fixed;
  return left >= fixed;
}

grt_status grt__pickle_scan_fetched(const unsigned char *d, size_t len, grt__idxset *fetched) {
  grt__idxset put;
  grt__idxset_init(&put, len + 1);
  grt_status st = GRT_OK;
  bool added;
  for (size_t pos = 0; pos < len && !st;) {
    unsigned char op = d[pos++];
    size_t n;
    if (op == '.' || !arg_size(op, d + pos, len - pos, &n)) break;
    uint64_t idx = UINT64_MAX;
    if (op == 'q' || op == 'h') idx = d[pos];
    if (op == 'r' || op == 'j') idx = le(d + pos, 4);
    if (op == 0x94) idx = put.count;
    if ((op == 'q' || op == 'r' || op == 0x94) && !grt__idxset_add(&put, idx, &added)) st = GRT_ERR_NOMEM;
    if ((op == 'h' || op == 'j') && !grt__idxset_add(fetched, idx, &added)) st = GRT_ERR_NOMEM;
    pos += n;
  }
  grt__idxset_free(&put);
  return st;
}
