/* check.c — grt_plan_check: is a placement valid, judged on its own?
 *
 * A sweep over the lifetime ends in step order (frees first at a step)
 * keeps the live buffers in a treap ordered by offset. Live buffers are
 * pairwise disjoint (each was checked when it went in), so ordered by
 * offset they are ordered by end too: a new buffer overlaps some live one
 * exactly when it overlaps its predecessor (the live buffer with the
 * largest offset <= its own) or its successor (the smallest offset above
 * its own). That makes the whole check O(n log n), never pairwise. The
 * treap's priorities are a hash of the buffer's index: deterministic, and
 * balanced in expectation whatever the offsets are. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include "plan/plan_impl.h"

#define NIL UINT32_MAX

typedef struct treap {
  uint32_t *left, *right;
  const uint64_t *key; /* the offsets, by buffer index */
  uint32_t root;
} treap;

static uint32_t prio(uint32_t i) {
  uint64_t z = (uint64_t)i * 0x9e3779b97f4a7c15ULL;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  return (uint32_t)((z ^ (z >> 27)) >> 32);
}

/* Splits t into keys < k (*l) and keys >= k (*r). */
static void split(treap *tr, uint32_t t, uint64_t k, uint32_t *l, uint32_t *r) {
  if (t == NIL) {
    *l = *r = NIL;
  } else if (tr->key[t] < k) {
    split(tr, tr->right[t], k, &tr->right[t], r);
    *l = t;
  } else {
    split(tr, tr->left[t], k, l, &tr->left[t]);
    *r = t;
  }
}

/* Every key of a is below every key of b. */
static uint32_t merge(treap *tr, uint32_t a, uint32_t b) {
  if (a == NIL) return b;
  if (b == NIL) return a;
  if (prio(a) > prio(b)) {
    tr->right[a] = merge(tr, tr->right[a], b);
    return a;
  }
  tr->left[b] = merge(tr, a, tr->left[b]);
  return b;
}

static void insert(treap *tr, uint32_t i) {
  uint32_t l, r;
  tr->left[i] = tr->right[i] = NIL;
  split(tr, tr->root, tr->key[i], &l, &r);
  tr->root = merge(tr, merge(tr, l, i), r);
}

/* Offsets of live buffers are distinct, so [key, key + 1) holds exactly i. */
static void erase(treap *tr, uint32_t i) {
  uint32_t l, m, r;
  split(tr, tr->root, tr->key[i], &l, &m);
  split(tr, m, tr->key[i] + 1, &m, &r);
  tr->root = merge(tr, l, r);
}

/* The live buffer with the largest offset <= k (pred) and the smallest > k (succ). */
static void neighbours(const treap *tr, uint64_t k, uint32_t *pred, uint32_t *succ) {
  *pred = *succ = NIL;
  for (uint32_t t = tr->root; t != NIL;) {
    if (tr->key[t] <= k) {
      *pred = t;
      t = tr->right[t];
    } else {
      *succ = t;
      t = tr->left[t];
    }
  }
}

static void overlap_msg(const grt_plan_buffer *bufs, const uint64_t *off, uint32_t a, uint32_t b, char *err,
                        size_t err_size) {
  const grt_plan_buffer *x = &bufs[a], *y = &bufs[b];
  grt__plan_errf(err, err_size, a, x,
                 "overlaps buffer %" PRIu32 " (id %" PRIu64 ") at step %" PRIu64 ": bytes [%" PRIu64 ", %" PRIu64
                 ") and [%" PRIu64 ", %" PRIu64 ")",
                 b, y->id, x->lower > y->lower ? x->lower : y->lower, off[a], off[a] + x->size, off[b],
                 off[b] + y->size);
}

static grt_status check_each(const grt_plan_buffer *bufs, size_t n, const uint64_t *off, uint64_t *heap, char *err,
                             size_t err_size) {
  uint64_t top = 0;
  for (size_t i = 0; i < n; i++) {
    const grt_plan_buffer *b = &bufs[i];
    if (off[i] & (grt__plan_align_of(b) - 1)) {
      grt__plan_errf(err, err_size, i, b, "offset %" PRIu64 " is not a multiple of its alignment %" PRIu64, off[i],
                     grt__plan_align_of(b));
      return GRT_ERR_INVALID_ARG;
    }
    if (off[i] > UINT64_MAX - b->size) {
      grt__plan_errf(err, err_size, i, b, "offset %" PRIu64 " + size %" PRIu64 " overflows", off[i], b->size);
      return GRT_ERR_INVALID_ARG;
    }
    if (off[i] + b->size > top) top = off[i] + b->size;
  }
  *heap = top;
  return GRT_OK;
}

static grt_status sweep(const grt_plan_buffer *bufs, size_t n, const uint64_t *off, const grt__plan_step *ev, treap *tr,
                        char *err, size_t err_size) {
  for (size_t k = 0; k < 2 * n; k++) {
    uint32_t i = ev[k].index, pred, succ;
    if (!ev[k].is_alloc) {
      erase(tr, i);
      continue;
    }
    neighbours(tr, off[i], &pred, &succ);
    uint32_t other = NIL;
    if (pred != NIL && off[pred] + bufs[pred].size > off[i])
      other = pred;
    else if (succ != NIL && off[i] + bufs[i].size > off[succ])
      other = succ;
    if (other != NIL) {
      overlap_msg(bufs, off, i, other, err, err_size);
      return GRT_ERR_INVALID_ARG;
    }
    insert(tr, i);
  }
  return GRT_OK;
}

grt_status grt_plan_check(const grt_plan_buffer *bufs, size_t n, const uint64_t *offsets, uint64_t *heap, char *err,
                          size_t err_size) {
  if (err && err_size) err[0] = '\0';
  if (n && !offsets) {
    if (err && err_size) snprintf(err, err_size, "offsets is NULL with n = %zu", n);
    return GRT_ERR_INVALID_ARG;
  }
  grt_status st = grt__plan_validate(bufs, n, err, err_size);
  uint64_t top = 0;
  if (!st) st = check_each(bufs, n, offsets, &top, err, err_size);
  if (st) return st;
  grt__plan_step *ev = NULL;
  treap tr = {malloc((n ? n : 1) * sizeof *tr.left), malloc((n ? n : 1) * sizeof *tr.right), offsets, NIL};
  st = tr.left && tr.right ? grt__plan_steps(bufs, n, &ev) : GRT_ERR_NOMEM;
  if (st && err && err_size) snprintf(err, err_size, "no host memory to check %zu buffers", n);
  if (!st) st = sweep(bufs, n, offsets, ev, &tr, err, err_size);
  if (!st && heap) *heap = top;
  free(ev);
  free(tr.left);
  free(tr.right);
  return st;
}
