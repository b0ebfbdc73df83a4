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
 */
#ifndef GRT_TRACE_PICKLE_H
#define GRT_TRACE_PICKLE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

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
  bool big; /* INT: the value is (uint64_t)i, at least 2^63 */
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
} grt__pickle;

/* Parses data[0..len). On GRT_ERR_PARSE, *err_offset is the offending
 * opcode's byte offset and reason says why; GRT_ERR_NOMEM on host OOM.
 * Call grt__pickle_free afterwards in every case. */
grt_status grt__pickle_load(grt__pickle *pk, const unsigned char *data, size_t len, grt__pv **root,
                            uint64_t *err_offset, char *reason, size_t reason_cap);
void grt__pickle_free(grt__pickle *pk);

/* dict[key] for a str key (the last one set wins), or NULL. */
const grt__pv *grt__pv_get(const grt__pv *dict, const char *key);
bool grt__pv_is_str(const grt__pv *v, const char *lit);

#endif
