/* allocator.c — the public allocator functions: validation, locking, the
 * policy registry and the last-error text, around a policy's ops. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc/allocator_impl.h"

/* The order of grt_alloc_policies(): the driver first, then PyTorch's
 * allocator, then the others from exact best fit to the paged slab. */
static const grt__alloc_ops *const policies[] = {&grt__naive_ops, &grt__caching_ops, &grt__bestfit_ops, &grt__bump_ops,
                                                 &grt__buddy_ops, &grt__slab_ops, &grt__async_ops, &grt__sharded_ops};
#define N_POLICIES (sizeof policies / sizeof policies[0])
static const char *const policy_names[N_POLICIES] = {"naive", "caching", "bestfit", "bump",
                                                     "buddy", "slab",    "async",   "sharded"};

grt_status grt_alloc_policies(const char *const **names, size_t *count) {
  if (!names || !count) return GRT_ERR_INVALID_ARG;
  *names = policy_names;
  *count = N_POLICIES;
  return GRT_OK;
}

void *grt__alloc_lines(size_t size) {
  size_t rounded = (size + 63) / 64 * 64;
  void *p = aligned_alloc(64, rounded);
  if (p) memset(p, 0, rounded);
  return p;
}

void grt__alloc_set_error(grt_allocator *a, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(a->last_error, sizeof a->last_error, fmt, ap);
  va_end(ap);
}

static grt_status validate_config(const grt_alloc_config *c) {
  if (c->max_split_size != GRT_UNLIMITED && c->max_split_size <= GRT_LARGE_BUFFER) return GRT_ERR_INVALID_ARG;
  if (c->garbage_collection_threshold < 0.0 || c->garbage_collection_threshold >= 1.0) return GRT_ERR_INVALID_ARG;
  if (c->memory_fraction < 0.0 || c->memory_fraction > 1.0) return GRT_ERR_INVALID_ARG;
  if (c->cross_stream != GRT_CROSS_STREAM_NEVER && c->cross_stream != GRT_CROSS_STREAM_WITH_EVENT)
    return GRT_ERR_INVALID_ARG;
  for (int i = 0; i < GRT_ROUNDUP_INTERVALS; i++) {
    unsigned d = c->roundup_power2_divisions[i];
    if (d & (d - 1)) return GRT_ERR_INVALID_ARG;
  }
  if (c->fit != GRT_FIT_BEST && c->fit != GRT_FIT_FIRST) return GRT_ERR_INVALID_ARG;
  if (c->shards > 64) return GRT_ERR_INVALID_ARG;
  const grt_stream_ops *so = c->stream_ops;
  if (so && (!so->record_event || !so->event_query || !so->event_synchronize)) return GRT_ERR_INVALID_ARG;
  return GRT_OK;
}

grt_status grt_alloc_create(const char *policy, grt_device *dev, const grt_alloc_config *cfg, grt_allocator **out) {
  if (!out) return GRT_ERR_INVALID_ARG;
  *out = NULL;
  if (!policy || !dev) return GRT_ERR_INVALID_ARG;
  const grt__alloc_ops *ops = NULL;
  for (size_t i = 0; i < N_POLICIES; i++)
    if (!strcmp(policies[i]->name, policy)) ops = policies[i];
  if (!ops) return GRT_ERR_NOT_FOUND;
  grt_allocator *a = grt__alloc_lines(sizeof *a);
  if (!a) return GRT_ERR_NOMEM;
  if (cfg)
    a->cfg = *cfg;
  else
    grt_alloc_config_default(&a->cfg);
  grt_status st = validate_config(&a->cfg);
  if (st) {
    free(a);
    return st;
  }
  a->ops = ops;
  a->dev = dev;
  a->stats.max_split_size = a->cfg.max_split_size == GRT_UNLIMITED ? -1 : (int64_t)a->cfg.max_split_size;
  st = ops->create(a);
  if (st) {
    free(a);
    return st;
  }
  /* Adaptive (glibc): a contended lock spins briefly before sleeping. The
     critical sections are ~100 ns, shorter than a futex sleep and wake-up:
     with 2 threads on one allocator this took 1.38 -> 3.21 M pairs/s
     (`gpurt bench --only threads`); one thread is unchanged. */
  pthread_mutexattr_t attr;
  pthread_mutexattr_init(&attr);
#ifdef PTHREAD_ADAPTIVE_MUTEX_INITIALIZER_NP
  pthread_mutexattr_settype(&attr, PTHREAD_MUTEX_ADAPTIVE_NP);
#endif
  pthread_mutex_init(&a->lock, &attr);
  pthread_mutexattr_destroy(&attr);
  pthread_mutex_init(&a->err_lock, NULL);
  *out = a;
  return GRT_OK;
}

grt_status grt_alloc_destroy(grt_allocator *a) {
  if (!a) return GRT_OK;
  a->ops->destroy(a);
  pthread_mutex_destroy(&a->lock);
  pthread_mutex_destroy(&a->err_lock);
  free(a);
  return GRT_OK;
}

/* Runs op under the lock and records its status in last_error when it fails
 * without having written a message of its own. */
#define LOCKED_CALL(a, expr)                                                    \
  do {                                                                          \
    if ((a)->ops->concurrent) return (expr); /* the policy locks and reports */ \
    pthread_mutex_lock(&(a)->lock);                                             \
    (a)->last_error[0] = 0;                                                     \
    grt_status st_ = (expr);                                                    \
    if (st_ && !(a)->last_error[0])                                             \
      snprintf((a)->last_error, sizeof (a)->last_error, "%s", grt_status_str(st_)); \
    pthread_mutex_unlock(&(a)->lock);                                           \
    return st_;                                                                 \
  } while (0)

grt_status grt_alloc_malloc(grt_allocator *a, uint64_t size, grt_stream_id stream, grt_devptr *out) {
  if (!a || !out) return GRT_ERR_INVALID_ARG;
  if (size == 0 || size > GRT__MAX_REQUEST) return GRT_ERR_SIZE;
  LOCKED_CALL(a, a->ops->malloc(a, size, stream, out));
}

grt_status grt_alloc_free(grt_allocator *a, grt_devptr ptr) {
  if (!a) return GRT_ERR_INVALID_ARG;
  LOCKED_CALL(a, a->ops->free(a, ptr));
}

grt_status grt_alloc_record_stream(grt_allocator *a, grt_devptr ptr, grt_stream_id stream) {
  if (!a) return GRT_ERR_INVALID_ARG;
  LOCKED_CALL(a, a->ops->record_stream(a, ptr, stream));
}

grt_status grt_alloc_empty_cache(grt_allocator *a) {
  if (!a) return GRT_ERR_INVALID_ARG;
  LOCKED_CALL(a, a->ops->empty_cache(a));
}

grt_status grt_alloc_block_info(grt_allocator *a, grt_devptr ptr, uint64_t *size, uint64_t *requested) {
  if (!a || !size || !requested) return GRT_ERR_INVALID_ARG;
  LOCKED_CALL(a, a->ops->block_info(a, ptr, size, requested));
}

grt_status grt_alloc_import_segment(grt_allocator *a, grt_devptr base, uint64_t size, grt_stream_id stream,
                                    int is_large) {
  if (!a) return GRT_ERR_INVALID_ARG;
  if (!a->ops->import_segment) return GRT_ERR_UNSUPPORTED;
  if (size == 0 || size % GRT_MIN_BLOCK_SIZE || base % GRT_MIN_BLOCK_SIZE || size > GRT__MAX_REQUEST)
    return GRT_ERR_INVALID_ARG;
  LOCKED_CALL(a, a->ops->import_segment(a, base, size, stream, is_large));
}

grt_status grt_alloc_import_block(grt_allocator *a, grt_devptr addr, uint64_t size, uint64_t requested) {
  if (!a) return GRT_ERR_INVALID_ARG;
  if (!a->ops->import_block) return GRT_ERR_UNSUPPORTED;
  if (size == 0 || size % GRT_MIN_BLOCK_SIZE || addr % GRT_MIN_BLOCK_SIZE || requested > size) return GRT_ERR_INVALID_ARG;
  LOCKED_CALL(a, a->ops->import_block(a, addr, size, requested));
}

/* ---- private pools ---- */

/* Under the allocator's lock (or, for a concurrent policy, err_lock). */
static grt_status no_pools(grt_allocator *a) {
  grt__alloc_set_error(a, "policy \"%s\" has no private pools (only \"caching\" has them)", a->ops->name);
  return GRT_ERR_UNSUPPORTED;
}

static grt_status no_pools_concurrent(grt_allocator *a) {
  pthread_mutex_lock(&a->err_lock);
  grt_status st = no_pools(a);
  pthread_mutex_unlock(&a->err_lock);
  return st;
}

/* The policy's pool op `op` with `args`, or GRT_ERR_UNSUPPORTED with the reason. */
#define POOL_CALL(a, op, args)                                 \
  do {                                                         \
    if (!(a)->ops->pools) {                                    \
      if ((a)->ops->concurrent) return no_pools_concurrent(a); \
      LOCKED_CALL(a, no_pools(a));                             \
    }                                                          \
    LOCKED_CALL(a, (a)->ops->pools->op args);                  \
  } while (0)

grt_status grt_alloc_pool_retain(grt_allocator *a, grt_pool_id id) {
  if (!a) return GRT_ERR_INVALID_ARG;
  POOL_CALL(a, retain, (a, id));
}

grt_status grt_alloc_pool_begin(grt_allocator *a, grt_pool_id id, grt_stream_id stream) {
  if (!a) return GRT_ERR_INVALID_ARG;
  POOL_CALL(a, begin, (a, id, stream));
}

grt_status grt_alloc_pool_end(grt_allocator *a, grt_pool_id id, grt_stream_id stream) {
  if (!a) return GRT_ERR_INVALID_ARG;
  POOL_CALL(a, end, (a, id, stream));
}

grt_status grt_alloc_pool_release(grt_allocator *a, grt_pool_id id) {
  if (!a) return GRT_ERR_INVALID_ARG;
  POOL_CALL(a, release, (a, id));
}

grt_status grt_alloc_pool_empty_cache(grt_allocator *a, grt_pool_id id) {
  if (!a) return GRT_ERR_INVALID_ARG;
  if (!id.first && !id.second) return grt_alloc_empty_cache(a);
  POOL_CALL(a, empty_cache, (a, id));
}

grt_status grt_alloc_pool_info(grt_allocator *a, grt_pool_id id, grt_pool_info *out) {
  if (!a || !out) return GRT_ERR_INVALID_ARG;
  POOL_CALL(a, info, (a, id, out));
}

grt_status grt_alloc_import_segment_pool(grt_allocator *a, grt_pool_id id, grt_devptr base, uint64_t size,
                                         grt_stream_id stream, int is_large) {
  if (!a) return GRT_ERR_INVALID_ARG;
  if (!id.first && !id.second) return grt_alloc_import_segment(a, base, size, stream, is_large);
  if (size == 0 || size % GRT_MIN_BLOCK_SIZE || base % GRT_MIN_BLOCK_SIZE || size > GRT__MAX_REQUEST)
    return GRT_ERR_INVALID_ARG;
  POOL_CALL(a, import_segment, (a, id, base, size, stream, is_large));
}

/* Both called under the allocator's lock: NULL set/get ops and keys the
 * policy lacks become GRT_ERR_UNSUPPORTED with the policy's keys named. */
static grt_status no_setting(grt_allocator *a, const char *key) {
  const char *keys = a->ops->settings ? a->ops->settings : "none";
  grt__alloc_set_error(a, "policy \"%s\" has no setting \"%s\" (its settings: %s)", a->ops->name, key, keys);
  return GRT_ERR_UNSUPPORTED;
}

static grt_status set_locked(grt_allocator *a, const char *key, uint64_t value) {
  grt_status st = a->ops->set ? a->ops->set(a, key, value) : GRT_ERR_NOT_FOUND;
  return st == GRT_ERR_NOT_FOUND ? no_setting(a, key) : st;
}

static grt_status get_locked(grt_allocator *a, const char *key, uint64_t *value) {
  grt_status st = a->ops->get ? a->ops->get(a, key, value) : GRT_ERR_NOT_FOUND;
  return st == GRT_ERR_NOT_FOUND ? no_setting(a, key) : st;
}

/* A concurrent policy takes no allocator lock around its ops: its messages
 * are written under err_lock. */
static grt_status no_setting_concurrent(grt_allocator *a, const char *key) {
  pthread_mutex_lock(&a->err_lock);
  grt_status st = no_setting(a, key);
  pthread_mutex_unlock(&a->err_lock);
  return st;
}

grt_status grt_alloc_set(grt_allocator *a, const char *key, uint64_t value) {
  if (!a || !key) return GRT_ERR_INVALID_ARG;
  if (a->ops->concurrent && !a->ops->set) return no_setting_concurrent(a, key);
  LOCKED_CALL(a, set_locked(a, key, value));
}

grt_status grt_alloc_get(grt_allocator *a, const char *key, uint64_t *value) {
  if (!a || !key || !value) return GRT_ERR_INVALID_ARG;
  if (a->ops->concurrent && !a->ops->get) return no_setting_concurrent(a, key);
  LOCKED_CALL(a, get_locked(a, key, value));
}

const char *grt_alloc_policy(const grt_allocator *a) { return a ? a->ops->name : ""; }

const char *grt_alloc_last_error(const grt_allocator *a) { return a ? a->last_error : ""; }

grt_status grt_alloc_get_stats(grt_allocator *a, grt_alloc_stats *out) {
  if (!a || !out) return GRT_ERR_INVALID_ARG;
  pthread_mutex_lock(&a->lock);
  *out = a->stats;
  a->ops->stats(a, out); /* concurrent policies fill every field from their parts */
  out->cached_bytes = (uint64_t)(out->reserved_bytes[GRT_STAT_ALL].current - out->allocated_bytes[GRT_STAT_ALL].current);
  pthread_mutex_unlock(&a->lock);
  return GRT_OK;
}

grt_status grt_alloc_reset_peak_stats(grt_allocator *a) {
  if (!a) return GRT_ERR_INVALID_ARG;
  if (a->ops->reset_peaks) return a->ops->reset_peaks(a);
  pthread_mutex_lock(&a->lock);
  grt__stats_reset_peaks(&a->stats);
  pthread_mutex_unlock(&a->lock);
  return GRT_OK;
}

const char *grt_block_state_name(grt_block_state s) {
  switch (s) {
    case GRT_BLOCK_ACTIVE_ALLOCATED: return "active_allocated";
    case GRT_BLOCK_ACTIVE_PENDING_FREE: return "active_pending_free";
    case GRT_BLOCK_INACTIVE: return "inactive";
  }
  return "unknown";
}

grt_status grt_alloc_snapshot_take(grt_allocator *a, grt_alloc_snapshot **out) {
  if (!a || !out) return GRT_ERR_INVALID_ARG;
  *out = NULL;
  grt_alloc_snapshot *snap = calloc(1, sizeof *snap);
  if (!snap) return GRT_ERR_NOMEM;
  pthread_mutex_lock(&a->lock);
  grt_status st = a->ops->snapshot(a, snap);
  pthread_mutex_unlock(&a->lock);
  if (st) {
    grt_alloc_snapshot_free(snap);
    return st;
  }
  *out = snap;
  return GRT_OK;
}

void grt_alloc_snapshot_free(grt_alloc_snapshot *snap) {
  if (!snap) return;
  for (size_t i = 0; i < snap->n_segments; i++) free(snap->segments[i].blocks);
  free(snap->segments);
  free(snap);
}

grt_status grt_alloc_check(grt_allocator *a, char *msg, size_t msg_size) {
  if (!a) return GRT_ERR_INVALID_ARG;
  char local[8];
  if (!msg || !msg_size) {
    msg = local;
    msg_size = sizeof local;
  }
  msg[0] = 0;
  pthread_mutex_lock(&a->lock);
  grt_status st = a->ops->check(a, msg, msg_size);
  pthread_mutex_unlock(&a->lock);
  return st;
}
