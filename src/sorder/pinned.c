/* pinned.c — a pinned host pool: PyTorch's caching design (the "caching"
 * policy, unchanged) over a "pinned host" device whose underlying allocations
 * are expensive (cudaHostAlloc: page locking, ms-scale).
 *
 * The device is a simulated one with host backing: its bytes are the host
 * buffers handed out. Each underlying allocation costs alloc_cost_ns of host
 * time on the exec's clock (grt_exec_host_delay: slept under threads, virtual
 * time under the virtual clock), charged after the pool's lock is released.
 * A free is immediate, or deferred by record_stream until the events recorded
 * on the streams that used the buffer completed (CachingHostAllocator).
 *
 * Invariant: `live` maps each host pointer handed out to its device address.
 * Locking: p->lock guards live and the counters; the allocator has its own.
 */
#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "base/status.h"
#include "base/u64map.h"
#include "sorder/sorder_impl.h"

struct grt_pinned_pool {
  grt_exec *exec;
  grt_device *dev;
  grt_allocator *a;
  grt_stream_ops ops;
  uint64_t cost_ns;
  pthread_mutex_t lock;
  grt__u64map live; /* host address -> device address */
  grt_pinned_stats st;
};

void grt_pinned_config_default(grt_pinned_config *cfg) {
  if (!cfg) return;
  memset(cfg, 0, sizeof *cfg);
  cfg->capacity = 256 * GRT_MiB;
  cfg->alloc_cost_ns = 2000000;
}

grt_status grt_pinned_pool_create(const grt_pinned_config *cfg, grt_pinned_pool **out) {
  if (!out) return GRT_ERR_INVALID_ARG;
  *out = NULL;
  if (!cfg || !cfg->exec || !cfg->capacity) return GRT_ERR_INVALID_ARG;
  grt_pinned_pool *p = calloc(1, sizeof *p);
  if (!p) return GRT_ERR_NOMEM;
  grt_device_config dc;
  grt_device_config_default(&dc);
  dc.capacity = cfg->capacity;
  dc.host_backing = 1;
  dc.base_address = 0x7e0000000000ull; /* apart from the exec's device, for readable traces */
  grt_alloc_config ac;
  grt_alloc_config_default(&ac);
  ac.stream_ops = &p->ops; /* the exec's events serve record_stream */
  grt_status st = grt_exec_stream_ops(cfg->exec, &p->ops);
  if (!st) st = grt_device_create(&dc, &p->dev);
  if (!st && (st = grt_alloc_create("caching", p->dev, &ac, &p->a))) grt__keep_first(&st, grt_device_destroy(p->dev));
  if (st) {
    free(p);
    return st;
  }
  p->exec = cfg->exec;
  p->cost_ns = cfg->alloc_cost_ns;
  pthread_mutex_init(&p->lock, NULL);
  grt__u64map_init(&p->live);
  *out = p;
  return GRT_OK;
}

grt_status grt_pinned_pool_destroy(grt_pinned_pool *p) {
  if (!p) return GRT_OK;
  pthread_mutex_lock(&p->lock);
  size_t live = p->live.count;
  pthread_mutex_unlock(&p->lock);
  if (live) return GRT_ERR_BUSY;
  grt_status st = grt_alloc_destroy(p->a);
  if (!st) st = grt_device_destroy(p->dev);
  grt__u64map_free(&p->live);
  pthread_mutex_destroy(&p->lock);
  free(p);
  return st;
}

grt_status grt_pinned_malloc(grt_pinned_pool *p, uint64_t size, void **out) {
  if (!p || !out) return GRT_ERR_INVALID_ARG;
  if (!size) return GRT_ERR_SIZE;
  grt_alloc_stats before, after;
  grt_devptr d;
  void *h = NULL;
  pthread_mutex_lock(&p->lock);
  grt_status st = grt_alloc_get_stats(p->a, &before);
  if (!st) st = grt_alloc_malloc(p->a, size, 0, &d);
  if (!st && (grt_device_host_ptr(p->dev, d, size, &h) || !grt__u64map_put(&p->live, (uint64_t)(uintptr_t)h, (void *)(uintptr_t)d))) {
    grt_status fst = grt_alloc_free(p->a, d); /* the block just allocated: its free cannot fail */
    assert(fst == GRT_OK);
    (void)fst;
    st = GRT_ERR_NOMEM;
  }
  uint64_t charged = 0;
  if (!st && !grt_alloc_get_stats(p->a, &after)) {
    uint64_t n = after.num_device_alloc - before.num_device_alloc;
    charged = n * p->cost_ns;
    p->st.host_allocs += n;
    p->st.alloc_cost_ns += charged;
    p->st.cache_hits += n == 0;
    p->st.mallocs++;
  }
  pthread_mutex_unlock(&p->lock);
  if (st) return st;
  /* The host is busy page-locking. The delay only models time: the exec
   * refuses it inside a kernel body and, on the virtual clock, after a
   * sticky error (which later calls report), and the block stands either
   * way, as a cache hit's does. */
  if (charged) grt__ignore(grt_exec_host_delay(p->exec, charged));
  *out = h;
  return GRT_OK;
}

static grt_status lookup(grt_pinned_pool *p, void *ptr, grt_devptr *d) {
  void *v = grt__u64map_get(&p->live, (uint64_t)(uintptr_t)ptr);
  if (!v) return GRT_ERR_UNKNOWN_POINTER;
  *d = (grt_devptr)(uintptr_t)v;
  return GRT_OK;
}

grt_status grt_pinned_free(grt_pinned_pool *p, void *ptr) {
  if (!p || !ptr) return GRT_ERR_INVALID_ARG;
  grt_devptr d;
  pthread_mutex_lock(&p->lock);
  grt_status st = lookup(p, ptr, &d);
  if (!st) st = grt_alloc_free(p->a, d);
  if (!st) grt__u64map_del(&p->live, (uint64_t)(uintptr_t)ptr);
  pthread_mutex_unlock(&p->lock);
  return st;
}

grt_status grt_pinned_record_stream(grt_pinned_pool *p, void *ptr, grt_stream *s) {
  if (!p || !ptr || !s) return GRT_ERR_INVALID_ARG;
  grt_stream_id sid;
  grt_devptr d;
  grt_status st = grt_stream_get_id(s, &sid);
  if (st) return st;
  pthread_mutex_lock(&p->lock);
  if (!(st = lookup(p, ptr, &d))) st = grt_alloc_record_stream(p->a, d, sid);
  pthread_mutex_unlock(&p->lock);
  return st;
}

grt_status grt_pinned_empty_cache(grt_pinned_pool *p) {
  if (!p) return GRT_ERR_INVALID_ARG;
  pthread_mutex_lock(&p->lock);
  grt_status st = grt_alloc_empty_cache(p->a);
  pthread_mutex_unlock(&p->lock);
  return st;
}

grt_status grt_pinned_get_stats(grt_pinned_pool *p, grt_pinned_stats *out) {
  if (!p || !out) return GRT_ERR_INVALID_ARG;
  grt_alloc_stats s;
  pthread_mutex_lock(&p->lock);
  grt_status st = grt_alloc_get_stats(p->a, &s);
  *out = p->st;
  if (!st) {
    out->reserved_bytes = (uint64_t)s.reserved_bytes[GRT_STAT_ALL].current;
    out->allocated_bytes = (uint64_t)s.allocated_bytes[GRT_STAT_ALL].current;
  }
  pthread_mutex_unlock(&p->lock);
  return st;
}
