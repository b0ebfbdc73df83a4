/* validate.c — what every planner entry point accepts, checked before
 * anything is written: each buffer's fields, the sum of sizes and
 * alignments (so no offset, heap or padding overflows), and unique ids
 * (errors and the CLI name buffers by id). The messages name the buffer by
 * index and id. */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "plan/plan_impl.h"

void grt__plan_errf(char *err, size_t err_size, size_t index, const grt_plan_buffer *b, const char *fmt, ...) {
  if (!err || !err_size) return;
  int k = snprintf(err, err_size, "buffer %zu (id %" PRIu64 "): ", index, b->id);
  if (k < 0 || (size_t)k >= err_size) return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(err + k, err_size - (size_t)k, fmt, ap);
  va_end(ap);
}

static grt_status check_one(const grt_plan_buffer *b, size_t i, uint64_t *total, char *err, size_t err_size) {
  if (b->upper <= b->lower) {
    grt__plan_errf(err, err_size, i, b, "upper (%" PRIu64 ") must be greater than lower (%" PRIu64 ")", b->upper,
                   b->lower);
    return GRT_ERR_INVALID_ARG;
  }
  if (!b->size) {
    grt__plan_errf(err, err_size, i, b, "size is 0");
    return GRT_ERR_SIZE;
  }
  if (b->alignment & (b->alignment - 1)) {
    grt__plan_errf(err, err_size, i, b, "alignment %" PRIu64 " is not a power of two", b->alignment);
    return GRT_ERR_INVALID_ARG;
  }
  /* size + alignment bounds what one buffer adds to any offset above it */
  uint64_t a = grt__plan_align_of(b);
  if (b->size >= GRT__PLAN_MAX_BYTES || a >= GRT__PLAN_MAX_BYTES || *total + b->size + a >= GRT__PLAN_MAX_BYTES) {
    grt__plan_errf(err, err_size, i, b,
                   "size %" PRIu64 " with alignment %" PRIu64 " takes the buffers' sizes and alignments past 2^63",
                   b->size, a);
    return GRT_ERR_SIZE;
  }
  *total += b->size + a;
  return GRT_OK;
}

typedef struct id_at {
  uint64_t id;
  size_t index;
} id_at;

static int cmp_id(const void *x, const void *y) {
  const id_at *a = x, *b = y;
  if (a->id != b->id) return a->id < b->id ? -1 : 1;
  return a->index < b->index ? -1 : a->index > b->index;
}

static grt_status check_ids(const grt_plan_buffer *bufs, size_t n, char *err, size_t err_size) {
  if (n < 2) return GRT_OK;
  id_at *ids = malloc(n * sizeof *ids);
  if (!ids) {
    if (err && err_size) snprintf(err, err_size, "no host memory to check %zu buffers' ids", n);
    return GRT_ERR_NOMEM;
  }
  for (size_t i = 0; i < n; i++) ids[i] = (id_at){bufs[i].id, i};
  qsort(ids, n, sizeof *ids, cmp_id);
  grt_status st = GRT_OK;
  for (size_t i = 1; i < n && !st; i++) {
    if (ids[i].id != ids[i - 1].id) continue;
    /* the later index is named: the earlier one is the id's first use */
    grt__plan_errf(err, err_size, ids[i].index, &bufs[ids[i].index], "id already used by buffer %zu", ids[i - 1].index);
    st = GRT_ERR_INVALID_ARG;
  }
  free(ids);
  return st;
}

grt_status grt__plan_validate(const grt_plan_buffer *bufs, size_t n, char *err, size_t err_size) {
  if (n && !bufs) {
    if (err && err_size) snprintf(err, err_size, "bufs is NULL with n = %zu", n);
    return GRT_ERR_INVALID_ARG;
  }
  if (n > UINT32_MAX - 1) {
    if (err && err_size) snprintf(err, err_size, "%zu buffers: at most 2^32-2", n);
    return GRT_ERR_SIZE;
  }
  uint64_t total = 0;
  for (size_t i = 0; i < n; i++) {
    grt_status st = check_one(&bufs[i], i, &total, err, err_size);
    if (st) return st;
  }
  return check_ids(bufs, n, err, err_size);
}
