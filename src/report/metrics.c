/* metrics.c — the metrics registry: which allocators and devices to report,
 * under which labels, and the gather pass that copies their figures.
 *
 * Invariants: every registered source appears once; labels are owned copies;
 * the registry mutex guards the source arrays and is held for a whole
 * render, so a source cannot be removed (and then destroyed) mid-read. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "report/metrics_impl.h"

typedef struct alloc_src {
  grt_allocator *a;
  char *name, *device;
} alloc_src;

typedef struct device_src {
  grt_device *d;
  char *device;
} device_src;

struct grt_metrics {
  pthread_mutex_t lock; /* guards everything below */
  alloc_src *allocs;
  size_t n_allocs, cap_allocs;
  device_src *devs;
  size_t n_devs, cap_devs;
};

grt_status grt_metrics_create(grt_metrics **out) {
  if (!out) return GRT_ERR_INVALID_ARG;
  *out = NULL;
  grt_metrics *m = calloc(1, sizeof *m);
  if (!m) return GRT_ERR_NOMEM;
  pthread_mutex_init(&m->lock, NULL);
  *out = m;
  return GRT_OK;
}

grt_status grt_metrics_destroy(grt_metrics *m) {
  if (!m) return GRT_OK;
  for (size_t i = 0; i < m->n_allocs; i++) {
    free(m->allocs[i].name);
    free(m->allocs[i].device);
  }
  for (size_t i = 0; i < m->n_devs; i++) free(m->devs[i].device);
  free(m->allocs);
  free(m->devs);
  pthread_mutex_destroy(&m->lock);
  free(m);
  return GRT_OK;
}

static char *dup_or(const char *s, const char *fallback) { return strdup(s ? s : fallback); }

/* Grows *arr (of elem-sized items) to hold one more. */
static int grow(void **arr, size_t *cap, size_t n, size_t elem) {
  if (n < *cap) return 1;
  size_t nc = *cap ? *cap * 2 : 4;
  void *p = realloc(*arr, nc * elem);
  if (!p) return 0;
  *arr = p;
  *cap = nc;
  return 1;
}

grt_status grt_metrics_add_allocator(grt_metrics *m, grt_allocator *a, const char *name, const char *device) {
  if (!m || !a) return GRT_ERR_INVALID_ARG;
  alloc_src s = {a, dup_or(name, grt_alloc_policy(a)), dup_or(device, "0")};
  if (!s.name || !s.device) {
    free(s.name);
    free(s.device);
    return GRT_ERR_NOMEM;
  }
  grt_status st = GRT_OK;
  pthread_mutex_lock(&m->lock);
  for (size_t i = 0; i < m->n_allocs && !st; i++)
    if (m->allocs[i].a == a || (!strcmp(m->allocs[i].name, s.name) && !strcmp(m->allocs[i].device, s.device)))
      st = GRT_ERR_STATE;
  if (!st && !grow((void **)&m->allocs, &m->cap_allocs, m->n_allocs, sizeof *m->allocs)) st = GRT_ERR_NOMEM;
  if (!st) m->allocs[m->n_allocs++] = s;
  pthread_mutex_unlock(&m->lock);
  if (st) {
    free(s.name);
    free(s.device);
  }
  return st;
}

grt_status grt_metrics_remove_allocator(grt_metrics *m, grt_allocator *a) {
  if (!m || !a) return GRT_ERR_INVALID_ARG;
  grt_status st = GRT_ERR_NOT_FOUND;
  pthread_mutex_lock(&m->lock);
  for (size_t i = 0; i < m->n_allocs; i++) {
    if (m->allocs[i].a != a) continue;
    free(m->allocs[i].name);
    free(m->allocs[i].device);
    memmove(&m->allocs[i], &m->allocs[i + 1], (m->n_allocs - i - 1) * sizeof *m->allocs);
    m->n_allocs--;
    st = GRT_OK;
    break;
  }
  pthread_mutex_unlock(&m->lock);
  return st;
}

grt_status grt_metrics_add_device(grt_metrics *m, grt_device *d, const char *device) {
  if (!m || !d) return GRT_ERR_INVALID_ARG;
  device_src s = {d, dup_or(device, "0")};
  if (!s.device) return GRT_ERR_NOMEM;
  grt_status st = GRT_OK;
  pthread_mutex_lock(&m->lock);
  for (size_t i = 0; i < m->n_devs && !st; i++)
    if (m->devs[i].d == d || !strcmp(m->devs[i].device, s.device)) st = GRT_ERR_STATE;
  if (!st && !grow((void **)&m->devs, &m->cap_devs, m->n_devs, sizeof *m->devs)) st = GRT_ERR_NOMEM;
  if (!st) m->devs[m->n_devs++] = s;
  pthread_mutex_unlock(&m->lock);
  if (st) free(s.device);
  return st;
}

grt_status grt_metrics_remove_device(grt_metrics *m, grt_device *d) {
  if (!m || !d) return GRT_ERR_INVALID_ARG;
  grt_status st = GRT_ERR_NOT_FOUND;
  pthread_mutex_lock(&m->lock);
  for (size_t i = 0; i < m->n_devs; i++) {
    if (m->devs[i].d != d) continue;
    free(m->devs[i].device);
    memmove(&m->devs[i], &m->devs[i + 1], (m->n_devs - i - 1) * sizeof *m->devs);
    m->n_devs--;
    st = GRT_OK;
    break;
  }
  pthread_mutex_unlock(&m->lock);
  return st;
}

/* Copies one allocator's figures: its stats (one locked copy), then the free
 * space from a snapshot (a second locked copy, taken right after). */
static grt_status gather_alloc(const alloc_src *s, grt__alloc_sample *out) {
  out->name = s->name;
  out->device = s->device;
  out->policy = grt_alloc_policy(s->a);
  grt_status st = grt_alloc_get_stats(s->a, &out->stats);
  if (st) return st;
  grt_alloc_snapshot *snap = NULL;
  st = grt_alloc_snapshot_take(s->a, &snap);
  if (st) return st;
  st = grt_free_space_of(snap, &out->free);
  grt_alloc_snapshot_free(snap);
  return st;
}

grt_status grt_metrics_render(grt_metrics *m, char **out, size_t *len) {
  if (!m || !out) return GRT_ERR_INVALID_ARG;
  *out = NULL;
  if (len) *len = 0;
  pthread_mutex_lock(&m->lock);
  grt__alloc_sample *as = calloc(m->n_allocs + 1, sizeof *as);
  grt__device_sample *ds = calloc(m->n_devs + 1, sizeof *ds);
  grt_status st = (as && ds) ? GRT_OK : GRT_ERR_NOMEM;
  for (size_t i = 0; i < m->n_allocs && !st; i++) st = gather_alloc(&m->allocs[i], &as[i]);
  for (size_t i = 0; i < m->n_devs && !st; i++) {
    ds[i].device = m->devs[i].device;
    st = grt_device_get_stats(m->devs[i].d, &ds[i].stats);
  }
  /* The writer reads the label strings, which the registry owns: keep the lock. */
  if (!st) st = grt__prometheus_write(as, m->n_allocs, ds, m->n_devs, out, len);
  pthread_mutex_unlock(&m->lock);
  free(as);
  free(ds);
  return st;
}
