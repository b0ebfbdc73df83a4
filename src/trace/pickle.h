/* pickle.h — a reader of the plain-data subset of Python pickles (internal).
 *
 * Runs the pickle stack machine (protocols 2-5, binary opcodes) for None,
 * bool, int (up to 64 bits), float, str, bytes, list, tuple, dict and set,
 * with memo and marks, and refuses every opcode that could name or call a
 * global (GLOBAL, STACK_GLOBAL, REDUCE, BUILD, INST, OBJ, NEWOBJ*, EXT*,
 * PERSID, buffers). Strings point into the input, which must outlive the
 * values. All values live in the grt__pickle and are freed together, so
 * shared (memoized) and even cyclic references are safe to hold; consumers
 * must not walk the graph generically (cycles are possible).
 * Memory is O(input length); there is no recursion.
 *
 * A sink sees each item as APPEND(S) adds it to a list and may take it: the
 * item then never enters the list, and its values nothing else can reach
 * (not shared: never fetched from the memo, never DUPed) are reused for
 * later values, so a million-event snapshot is never held whole. A
 * first pass over the opcodes (pickle_scan.c) finds the memo entries the
 * pickle fetches; only those are kept.
 */
#ifndef GRT_TRACE_PICKLE_H
#define GRT_TRACE_PICKLE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/u64map.h"
#include "gpurt/base.h"

typedef enum grt__pv_type {
  GRT__PV_NONE,
  GRT__PV_BOOL,
  GRT__PV_INT,
  GRT__PV_FLOAT,
  GRT__PV_STR,
  GRT__PV_BYTES,
  GRT__PV_LIST, /* also sets and frozensets */
  GRT__PV_TUPLE,
  GRT__PV_DICT  /* seq holds key, value, key, value, ... */
} grt__pv_type;

typedef struct grt__pv grt__pv;
struct grt__pv {
  uint8_t type;
  bool big;    /* INT: the value is (uint64_t)i, at least 2^63 */
  bool wide;   /* INT: wider than 64 bits (a LONG of more bytes): no value, refused where a number is read */
  bool shared; /* reachable other than through its one container (memo fetch, DUP, a singleton) */
  union {
    int64_t i; /* INT, BOOL */
    double f;
    struct {
      const char *p;
      size_t n;
    } s; /* STR (UTF-8), BYTES */
    struct {
      grt__pv **v;
      size_t n, cap;
    } seq;
  } u;
};

typedef struct grt__pickle_slab grt__pickle_slab;
typedef struct grt__pickle {
  grt__pickle_slab *slabs; /* every value, for freeing */
  grt__pv *reuse;          /* values taken and released, chained through u.s.p */
} grt__pickle;

/* Called for each item APPEND(S) adds to list, index the position it would take.
 * Set *taken to take it (the sink must not keep pointers into the item's
 * values that are not shared). A nonzero status stops the parse, reported
 * as the sink left it in reason. */
typedef grt_status (*grt__pickle_sink)(void *ctx, const grt__pv *list, size_t index, const grt__pv *item,
                                       bool *taken);

/* Parses data[0..len). On GRT_ERR_PARSE, *err_offset is the offending
 * opcode's byte offset and reason says why; GRT_ERR_NOMEM on host OOM.
 * Call grt__pickle_free afterwards in every case. */
grt_status grt__pickle_load(grt__pickle *pk, const unsigned char *data, size_t len, grt__pv **root,
                            uint64_t *err_offset, char *reason, size_t reason_cap);
/* grt__pickle_load with a sink (may be NULL). */
grt_status grt__pickle_load_sink(grt__pickle *pk, const unsigned char *data, size_t len, grt__pv **root,
                                 uint64_t *err_offset, char *reason, size_t reason_cap, grt__pickle_sink sink,
                                 void *sink_ctx);

/* A set of memo indices: a bitmap below dense_bits, a map above (pickle_scan.c). */
typedef struct grt__idxset {
  uint64_t *bits;
  size_t dense_bits;
  grt__u64map sparse;
  uint64_t count;
} grt__idxset;

void grt__idxset_init(grt__idxset *s, size_t dense_bits);
void grt__idxset_free(grt__idxset *s);
bool grt__idxset_has(const grt__idxset *s, uint64_t i);
bool grt__idxset_add(grt__idxset *s, uint64_t i, bool *added);
/* The memo indices data[0..len) fetches (BINGET, LONG_BINGET) into *fetched. */
grt_status grt__pickle_scan_fetched(const unsigned char *data, size_t len, grt__idxset *fetched);
void grt__pickle_free(grt__pickle *pk);

/* dict[key] for a str key (the last one set wins), or NULL. */
const grt__pv *grt__pv_get(const grt__pv *dict, const char *key);
bool grt__pv_is_str(const grt__pv *v, const char *lit);

#endif
