/* segtable.c — see segtable.h. */
#include "base/segtable.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

void grt__segtable_free(grt__segtable *t) {
  free(t->v);
  memset(t, 0, sizeof *t);
}

/* The first entry whose base is >= addr (n when none). */
static size_t lower(const grt__segtable *t, grt_devptr addr) {
  size_t lo = 0, hi = t->n;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (t->v[mid].base < addr)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo;
}

grt_status grt__segtable_reserve(grt__segtable *t, size_t n) {
  if (n <= t->cap - t->n) return GRT_OK;
  if (n > SIZE_MAX / 2 / sizeof *t->v - t->n) return GRT_ERR_NOMEM;
  size_t cap = t->cap ? t->cap : 16;
  while (cap - t->n < n) cap *= 2;
  grt__segtable_entry *v = realloc(t->v, cap * sizeof *v);
  if (!v) return GRT_ERR_NOMEM;
  t->v = v;
  t->cap = cap;
  return GRT_OK;
}

void grt__segtable_add(grt__segtable *t, grt_devptr base, uint64_t size, void *item) {
  assert(t->n < t->cap);
  size_t i = lower(t, base);
  memmove(&t->v[i + 1], &t->v[i], (t->n - i) * sizeof *t->v);
  t->v[i] = (grt__segtable_entry){base, size, item};
  t->n++;
}

grt_status grt__segtable_insert(grt__segtable *t, grt_devptr base, uint64_t size, void *item) {
  grt_status st = grt__segtable_reserve(t, 1);
  if (st == GRT_OK) grt__segtable_add(t, base, size, item);
  return st;
}

void grt__segtable_remove(grt__segtable *t, grt_devptr base, const void *item) {
  size_t i = lower(t, base);
  if (i == t->n || t->v[i].item != item) return;
  memmove(&t->v[i], &t->v[i + 1], (t->n - i - 1) * sizeof *t->v);
  t->n--;
}

void *grt__segtable_find(const grt__segtable *t, grt_devptr addr) {
  size_t i = lower(t, addr + 1); /* the first base above addr (UINT64_MAX: none is found) */
  if (i == 0) return NULL;
  const grt__segtable_entry *e = &t->v[i - 1];
  return addr - e->base < e->size ? e->item : NULL;
}
