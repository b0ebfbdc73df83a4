/* mempool_sync.c — the stream-ordered pool's sync points, release threshold,
 * trim and attributes (CUDA Runtime API: cudaMemPoolAttr, cudaMemPoolTrimTo,
 * cudaMemPoolSetAttribute / cudaMemPoolGetAttribute).
 *
 * Sync points: the pool observes every synchronization of its exec (stream,
 * event, device; exec/observe.h), however it was called, because CUDA applies
 * the release threshold "on the next call to stream, event or context
 * synchronize". There the completed frees the sync covered (those on the
 * synchronized stream or on the event's stream; all for the device) go back to
 * the allocator, then cached memory above the threshold is released. A
 * synchronization made inside a pool call (the allocator waiting for its own
 * record_stream events) is not a sync point: the per-thread count of pool
 * locks held says so, and it keeps a pool from waiting for a lock that thread
 * holds. The pool's own wrappers do the work themselves, to return its status.
 */
#include "base/status.h"
#include "gpurt/policy.h"
#include "sorder/sorder_impl.h"

static _Thread_local unsigned tl_locks;              /* pool locks this thread holds */
static _Thread_local const grt_mempool *tl_wrapping; /* the pool whose wrapper syncs on this thread */

void grt__mp_lock(grt_mempool *p) {
  pthread_mutex_lock(&p->lock);
  tl_locks++;
}

void grt__mp_unlock(grt_mempool *p) {
  tl_locks--;
  pthread_mutex_unlock(&p->lock);
}

bool grt__mp_in_call(void) { return tl_locks != 0; }

static uint64_t reserved_now(grt_mempool *p) {
  grt_alloc_stats s;
  return grt_alloc_get_stats(p->a, &s) ? 0 : (uint64_t)s.reserved_bytes[GRT_STAT_ALL].current;
}

grt_status grt__mp_shrink(grt_mempool *p, uint64_t bytes) {
  if (reserved_now(p) <= bytes) return GRT_OK;
  return p->is_async ? grt_alloc_async_trim_to(p->a, bytes) : grt_alloc_empty_cache(p->a);
}

/* Lock held. After a successful sync: what it covered, then the threshold. */
static grt_status after_sync(grt_mempool *p, const grt__sync_point *sp) {
  p->c.host_syncs++;
  grt_status st = GRT_OK;
  if (sp->kind == GRT__SYNC_DEVICE || sp->has_stream)
    st = grt__mp_release_completed(p, sp->kind == GRT__SYNC_DEVICE, sp->stream);
  grt__keep_first(&st, grt__mp_shrink(p, p->cfg.release_threshold));
  return st;
}

void grt__mp_on_sync(void *ctx, const grt__sync_point *sp) {
  grt_mempool *p = ctx;
  if (grt__mp_in_call() || tl_wrapping == p) return;
  grt__mp_lock(p);
  /* A release that fails leaves the memory cached; the next sync point tries again. */
  grt__ignore(after_sync(p, sp));
  grt__mp_unlock(p);
}

grt_status grt_mempool_stream_synchronize(grt_mempool *p, grt_stream *s) {
  if (!p || !s) return GRT_ERR_INVALID_ARG;
  grt_stream_id sid;
  grt_status st = grt_stream_get_id(s, &sid);
  if (st) return st;
  tl_wrapping = p;
  st = p->so ? grt_sorder_stream_synchronize(p->so, s) : grt_stream_synchronize(s);
  tl_wrapping = NULL;
  if (st) return st;
  grt__sync_point sp = {GRT__SYNC_STREAM, true, sid};
  grt__mp_lock(p);
  st = after_sync(p, &sp);
  grt__mp_unlock(p);
  return st;
}

grt_status grt_mempool_synchronize(grt_mempool *p) {
  if (!p) return GRT_ERR_INVALID_ARG;
  tl_wrapping = p;
  grt_status st = p->so ? grt_sorder_synchronize(p->so) : grt_exec_synchronize(p->exec);
  tl_wrapping = NULL;
  if (st) return st;
  grt__sync_point sp = {GRT__SYNC_DEVICE, false, 0};
  grt__mp_lock(p);
  st = after_sync(p, &sp);
  grt__mp_unlock(p);
  return st;
}

/* ---- threshold, trim ---- */

static grt_status set_threshold(grt_mempool *p, uint64_t bytes) {
  grt_status st = p->is_async ? grt_alloc_set(p->a, "release_threshold", bytes) : GRT_OK;
  if (!st) p->cfg.release_threshold = bytes;
  return st;
}

grt_status grt_mempool_set_release_threshold(grt_mempool *p, uint64_t bytes) {
  if (!p) return GRT_ERR_INVALID_ARG;
  grt__mp_lock(p);
  grt_status st = set_threshold(p, bytes);
  grt__mp_unlock(p);
  return st;
}

grt_status grt_mempool_trim_to(grt_mempool *p, uint64_t bytes) {
  if (!p) return GRT_ERR_INVALID_ARG;
  grt__mp_lock(p);
  /* Frees the host has not seen complete count as outstanding (CUDA's note),
   * except where completion alone makes them reusable. What cannot go stays:
   * trimming what it can is a success. */
  if (p->cfg.reuse & GRT_REUSE_OPPORTUNISTIC) grt__ignore(grt__mp_release_completed(p, true, 0));
  grt_status st = grt__mp_shrink(p, bytes);
  grt__mp_unlock(p);
  return st;
}

/* ---- attributes and figures ---- */

static grt_status read_attrs(grt_mempool *p, grt_mempool_attrs *out) {
  grt_alloc_stats s;
  grt_status st = grt_alloc_get_stats(p->a, &s);
  if (st) return st;
  out->release_threshold = p->cfg.release_threshold;
  out->reserved_mem_current = (uint64_t)s.reserved_bytes[GRT_STAT_ALL].current;
  out->reserved_mem_high = (uint64_t)s.reserved_bytes[GRT_STAT_ALL].peak;
  out->used_mem_current = p->used;
  out->used_mem_high = p->used_high;
  out->reuse = p->cfg.reuse;
  return GRT_OK;
}

grt_status grt_mempool_get_attrs(grt_mempool *p, grt_mempool_attrs *out) {
  if (!p || !out) return GRT_ERR_INVALID_ARG;
  grt__mp_lock(p);
  grt_status st = read_attrs(p, out);
  grt__mp_unlock(p);
  return st;
}

grt_status grt_mempool_reset_high(grt_mempool *p) {
  if (!p) return GRT_ERR_INVALID_ARG;
  grt__mp_lock(p);
  grt_status st = grt_alloc_reset_peak_stats(p->a);
  if (!st) p->used_high = p->used;
  grt__mp_unlock(p);
  return st;
}

static unsigned flag_of(grt_mempool_attr attr) {
  return attr == GRT_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPS     ? GRT_REUSE_FOLLOW_EVENT_DEPS
         : attr == GRT_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC ? GRT_REUSE_OPPORTUNISTIC
         : attr == GRT_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPS ? GRT_REUSE_INTERNAL_DEPS
                                                              : 0;
}

static grt_status set_locked(grt_mempool *p, grt_mempool_attr attr, uint64_t value) {
  unsigned flag = flag_of(attr);
  if (flag) {
    if (value > 1) return GRT_ERR_INVALID_ARG;
    p->cfg.reuse = value ? p->cfg.reuse | flag : p->cfg.reuse & ~flag;
    return GRT_OK;
  }
  switch (attr) {
  case GRT_MEMPOOL_ATTR_RELEASE_THRESHOLD: return set_threshold(p, value);
  case GRT_MEMPOOL_ATTR_RESERVED_MEM_HIGH: /* CUDA: setting a non-zero value is illegal */
    return value ? GRT_ERR_INVALID_ARG : grt_alloc_reset_peak_stats(p->a);
  case GRT_MEMPOOL_ATTR_USED_MEM_HIGH:
    if (value) return GRT_ERR_INVALID_ARG;
    p->used_high = p->used;
    return GRT_OK;
  default: return GRT_ERR_INVALID_ARG; /* the current values are read only */
  }
}

grt_status grt_mempool_set_attribute(grt_mempool *p, grt_mempool_attr attr, uint64_t value) {
  if (!p) return GRT_ERR_INVALID_ARG;
  grt__mp_lock(p);
  grt_status st = set_locked(p, attr, value);
  grt__mp_unlock(p);
  return st;
}

grt_status grt_mempool_get_attribute(grt_mempool *p, grt_mempool_attr attr, uint64_t *value) {
  if (!p || !value) return GRT_ERR_INVALID_ARG;
  grt_mempool_attrs a;
  grt__mp_lock(p);
  grt_status st = read_attrs(p, &a);
  grt__mp_unlock(p);
  if (st) return st;
  unsigned flag = flag_of(attr);
  uint64_t v = flag ? (a.reuse & flag) != 0 : 0;
  switch (attr) {
  case GRT_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPS:
  case GRT_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC:
  case GRT_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPS: break;
  case GRT_MEMPOOL_ATTR_RELEASE_THRESHOLD: v = a.release_threshold; break;
  case GRT_MEMPOOL_ATTR_RESERVED_MEM_CURRENT: v = a.reserved_mem_current; break;
  case GRT_MEMPOOL_ATTR_RESERVED_MEM_HIGH: v = a.reserved_mem_high; break;
  case GRT_MEMPOOL_ATTR_USED_MEM_CURRENT: v = a.used_mem_current; break;
  case GRT_MEMPOOL_ATTR_USED_MEM_HIGH: v = a.used_mem_high; break;
  default: return GRT_ERR_INVALID_ARG;
  }
  *value = v;
  return GRT_OK;
}

grt_status grt_mempool_get_counters(grt_mempool *p, grt_mempool_counters *out) {
  if (!p || !out) return GRT_ERR_INVALID_ARG;
  grt_alloc_stats s;
  grt__mp_lock(p);
  grt_status st = grt_alloc_get_stats(p->a, &s);
  *out = p->c;
  out->pending_frees = p->n_parked;
  out->device_mallocs = st ? 0 : s.num_device_alloc;
  grt__mp_unlock(p);
  return st;
}

grt_status grt_mempool_get_allocator(grt_mempool *p, grt_allocator **out) {
  if (!p || !out) return GRT_ERR_INVALID_ARG;
  *out = p->a;
  return GRT_OK;
}
