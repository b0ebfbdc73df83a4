/* allocator_impl.h — the contract every allocator policy implements (internal).
 *
 * allocator.c owns the public functions: argument validation, the mutex, the
 * last-error text; a policy implements the ops below, called with the mutex
 * held. An op that fails must leave the allocator unchanged (except counters
 * PyTorch itself bumps on failure, such as num_ooms).
 */
#ifndef GRT_ALLOC_IMPL_H
#define GRT_ALLOC_IMPL_H

#include <pthread.h>

#include "gpurt/alloc.h"

/* Private pools (alloc.h), for the policies that have them. */
typedef struct grt__pool_ops {
  grt_status (*retain)(grt_allocator *a, grt_pool_id id);
  grt_status (*begin)(grt_allocator *a, grt_pool_id id, grt_stream_id stream);
  grt_status (*end)(grt_allocator *a, grt_pool_id id, grt_stream_id stream);
  grt_status (*release)(grt_allocator *a, grt_pool_id id);
  grt_status (*empty_cache)(grt_allocator *a, grt_pool_id id);
  grt_status (*info)(grt_allocator *a, grt_pool_id id, grt_pool_info *out);
  grt_status (*import_segment)(grt_allocator *a, grt_pool_id id, grt_devptr base, uint64_t size, grt_stream_id stream,
                               int is_large);
} grt__pool_ops;

typedef struct grt__alloc_ops {
  const char *name;
  int concurrent; /* 1: the policy locks internally; allocator.c takes no mutex around its ops */
  grt_status (*create)(grt_allocator *a);
  void (*destroy)(grt_allocator *a);
  grt_status (*malloc)(grt_allocator *a, uint64_t size, grt_stream_id stream, grt_devptr *out);
  grt_status (*free)(grt_allocator *a, grt_devptr ptr);
  grt_status (*record_stream)(grt_allocator *a, grt_devptr ptr, grt_stream_id stream);
  grt_status (*empty_cache)(grt_allocator *a);
  grt_status (*block_info)(grt_allocator *a, grt_devptr ptr, uint64_t *size, uint64_t *requested);
  /* Fills the fields not kept in a->stats (largest_free_block, pending_free_blocks...). */
  void (*stats)(grt_allocator *a, grt_alloc_stats *out);
  grt_status (*snapshot)(grt_allocator *a, grt_alloc_snapshot *out);
  grt_status (*check)(grt_allocator *a, char *msg, size_t msg_size);
  /* Optional (NULL: GRT_ERR_UNSUPPORTED): rebuilding a recorded state. */
  grt_status (*import_segment)(grt_allocator *a, grt_devptr base, uint64_t size, grt_stream_id stream, int is_large);
  grt_status (*import_block)(grt_allocator *a, grt_devptr addr, uint64_t size, uint64_t requested);
  grt_status (*reset_peaks)(grt_allocator *a); /* optional: policies whose stats live elsewhere */
  /* Optional (NULL: the policy has no settings): grt_alloc_set / grt_alloc_get
   * of one named setting; GRT_ERR_NOT_FOUND for a key the policy lacks.
   * settings names the keys for the error message. */
  grt_status (*set)(grt_allocator *a, const char *key, uint64_t value);
  grt_status (*get)(grt_allocator *a, const char *key, uint64_t *value);
  const char *settings;
  const grt__pool_ops *pools; /* optional (NULL: every pool call is GRT_ERR_UNSUPPORTED) */
} grt__alloc_ops;

struct grt_allocator {
  pthread_mutex_t lock; /* guards everything below and the policy's state */
  const grt__alloc_ops *ops;
  grt_device *dev;
  grt_alloc_config cfg;
  grt_alloc_stats stats; /* PyTorch's counters, kept by the policy */
  char last_error[512]; /* concurrent policies: written under err_lock, on failures only */
  pthread_mutex_t err_lock;
  void *impl;
};

/* Zeroed memory on its own cache lines (64-byte aligned, size rounded up):
 * allocator state written on every call must not share a line with another
 * allocator's (the sharded policy runs one per thread). Free with free(). */
void *grt__alloc_lines(size_t size);

/* Registered policies (one file each). */
extern const grt__alloc_ops grt__naive_ops;
extern const grt__alloc_ops grt__caching_ops;
extern const grt__alloc_ops grt__bump_ops;
extern const grt__alloc_ops grt__buddy_ops;
extern const grt__alloc_ops grt__slab_ops;
extern const grt__alloc_ops grt__async_ops;
extern const grt__alloc_ops grt__sharded_ops;
extern const grt__alloc_ops grt__bestfit_ops;

/* Writes a printf-style message into a->last_error. */
void grt__alloc_set_error(grt_allocator *a, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/* ---- stats helpers (stats.c): PyTorch's update_stat over the selected types ---- */
/* Inline (the caching policy's malloc/free make about ten of these each) and
 * branch-free, so a constant amount folds to two adds and a max. */
static inline void grt__stat_update(grt_stat *s, int64_t amount) {
  int64_t cur = s->current + amount;
  s->current = cur;
  s->peak = cur > s->peak ? cur : s->peak;
  s->allocated += amount > 0 ? amount : 0;
  s->freed += amount < 0 ? -amount : 0;
}
/* Updates stat[ALL] and stat[pool] (pool = GRT_STAT_SMALL_POOL or GRT_STAT_LARGE_POOL). */
static inline void grt__stat_update2(grt_stat *arr, int pool, int64_t amount) {
  grt__stat_update(&arr[GRT_STAT_ALL], amount);
  grt__stat_update(&arr[pool], amount);
}
void grt__stats_reset_peaks(grt_alloc_stats *st);

/* The snapshot's segment totals, from its blocks. */
void grt__snapshot_segment_totals(grt_snapshot_segment *seg);

/* Largest size such that every later sum stays far from overflow: requests above are GRT_ERR_SIZE. */
#define GRT__MAX_REQUEST ((uint64_t)1 << 56)

#endif
