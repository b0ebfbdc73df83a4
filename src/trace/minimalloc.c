/* minimalloc.c — google/minimalloc CSV (`id,lower,upper,size`) to events.
 *
 * Each row is one buffer live over the time steps [lower, upper) with `size`
 * bytes. Output events are in time order: at each step all frees (buffers
 * whose upper is the step) come before all allocations (buffers whose lower
 * is the step), and ties within each group go by ascending id, so the event
 * order is a pure function of the file. Event time = the step. Extra columns
 * after `size` (minimalloc's optional alignment, gaps) are accepted and
 * ignored; ids must be unique non-negative integers.
 */
#include <inttypes.h>
#include <stdlib.h>

#include "trace/trace_impl.h"

typedef struct mm_ev {
  uint64_t step;
  uint64_t id;
  uint64_t size;
  int is_alloc; /* 0 free, 1 alloc: frees sort first */
} mm_ev;

static int cmp_ev(const void *a, const void *b) {
  const mm_ev *x = a, *y = b;
  if (x->step != y->step) return x->step < y->step ? -1 : 1;
  if (x->is_alloc != y->is_alloc) return x->is_alloc - y->is_alloc;
  return x->id < y->id ? -1 : x->id > y->id;
}

#define FAIL(...)                                                   \
  do {                                                              \
    grt__trace_err(err, it.lineno, it.offset, false, __VA_ARGS__);  \
    st = GRT_ERR_PARSE;                                             \
    goto out;                                                       \
  } while (0)

#define MAX_COLS 16

grt_status grt__read_minimalloc(const char *data, size_t len, grt_trace **out, grt_trace_error *err) {
  grt__tb b;
  grt_status st = grt__tb_init(&b, GRT_TRACE_FORMAT_MINIMALLOC);
  if (st) return st;
  grt__u64map seen;
  grt__u64map_init(&seen);
  mm_ev *evs = NULL;
  size_t n = 0, cap = 0, ncols = 0;
  grt__lines it;
  grt__slice line, f[MAX_COLS + 1];
  char q[64];
  grt__lines_init(&it, data, len);
  while (grt__lines_next(&it, &line)) {
    if (ncols == 0) {
      ncols = grt__split(grt__slice_skip_bom(line), ',', f, MAX_COLS);
      if (ncols < 4 || ncols > MAX_COLS || !grt__slice_eq(f[0], "id") || !grt__slice_eq(f[1], "lower") ||
          !grt__slice_eq(f[2], "upper") || !grt__slice_eq(f[3], "size")) {
        ncols = 0;
        FAIL("expected the header 'id,lower,upper,size', found '%s'", grt__quote(line, q, sizeof q));
      }
      continue;
    }
    if (grt__slice_trim(line).n == 0) continue;
    size_t nf = grt__split(line, ',', f, MAX_COLS);
    if (nf != ncols) FAIL("expected %zu comma-separated fields, found %s%zu", ncols, nf > MAX_COLS ? "more than " : "", nf > MAX_COLS ? (size_t)MAX_COLS : nf);
    uint64_t id, lower, upper, size;
    if (!grt__parse_u64(f[0], &id) || id == UINT64_MAX) FAIL("id field '%s' is not a number below 2^64-1", grt__quote(f[0], q, sizeof q));
    if (!grt__parse_u64(f[1], &lower)) FAIL("lower field '%s' is not a number", grt__quote(f[1], q, sizeof q));
    if (!grt__parse_u64(f[2], &upper)) FAIL("upper field '%s' is not a number", grt__quote(f[2], q, sizeof q));
    if (!grt__parse_u64(f[3], &size)) FAIL("size field '%s' is not a number", grt__quote(f[3], q, sizeof q));
    if (upper <= lower) FAIL("buffer %" PRIu64 ": upper (%" PRIu64 ") must be greater than lower (%" PRIu64 ")", id, upper, lower);
    if (lower > INT64_MAX || upper > INT64_MAX) FAIL("time step out of range");
    if (grt__u64map_get(&seen, id)) FAIL("duplicate buffer id %" PRIu64, id);
    if (!grt__u64map_put(&seen, id, (void *)1)) {
      st = GRT_ERR_NOMEM;
      goto out;
    }
    if (n + 2 > cap) {
      size_t nc = cap ? cap * 2 : 256;
      mm_ev *p = realloc(evs, nc * sizeof *p);
      if (!p) {
        st = GRT_ERR_NOMEM;
        goto out;
      }
      evs = p;
      cap = nc;
    }
    evs[n++] = (mm_ev){lower, id, size, 1};
    evs[n++] = (mm_ev){upper, id, size, 0};
  }
  if (ncols == 0) {
    grt__trace_err(err, 1, 0, false, "empty input (expected the header 'id,lower,upper,size')");
    st = GRT_ERR_PARSE;
    goto out;
  }
  if (n) qsort(evs, n, sizeof *evs, cmp_ev);
  for (size_t i = 0; i < n && !st; i++)
    st = grt__tb_event(&b, evs[i].is_alloc ? GRT_TRACE_ALLOC : GRT_TRACE_FREE_COMPLETED, evs[i].id,
                       evs[i].size, 0, (int64_t)evs[i].step, 0, GRT_TRACE_F_TIME);
  if (st) grt__trace_err(err, 0, 0, false, "%s", grt_status_str(st));
out:
  free(evs);
  grt__u64map_free(&seen);
  if (st) {
    grt__tb_abort(&b);
    return st;
  }
  return grt__tb_finish(&b, out);
}
