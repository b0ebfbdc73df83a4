/* zoo.h — shared plumbing of the zoo policies ("bump", "buddy", "slab",
 * "async"): device segments (each policy keeps its own in a base/segtable.h
 * table), statistics accounting, the OOM message, the recount comparison of
 * the structure walkers and the entry/exit of the policy-specific public
 * functions (internal).
 *
 * Statistics convention of the zoo: there is one pool per allocator, so every
 * count goes to GRT_STAT_ALL and GRT_STAT_LARGE_POOL (the small pool stays 0);
 * nothing is ever pending on a stream, so active == allocation and
 * active_bytes == allocated_bytes. allocated_bytes counts what a block
 * occupies (page, power of two, rounded size), requested_bytes what was asked.
 * Not thread-safe: the owning allocator's lock guards everything here.
 */
#ifndef GRT_ALLOC_ZOO_H
#define GRT_ALLOC_ZOO_H

#include <stdio.h>

#include "alloc/allocator_impl.h"
#include "base/segtable.h"
#include "gpurt/policy.h"

#define GRT__ZOO_POOL GRT_STAT_LARGE_POOL

/* A device segment's range; each policy's segment struct embeds one. */
typedef struct grt__zseg {
  grt_devptr base;
  uint64_t size;
} grt__zseg;

/* Device malloc of one segment, counted (segment, reserved_bytes, num_device_alloc). */
grt_status grt__zoo_device_malloc(grt_allocator *a, uint64_t size, grt_devptr *out);
/* Device free of a segment the allocator owns, counted. The device may fail
 * it for its own host memory: nothing changes then, and a release stops there. */
GRT_MUST_CHECK grt_status grt__zoo_device_free(grt_allocator *a, grt_devptr base, uint64_t size);
/* One block allocated (sign +1) or freed (-1): allocation, active and the byte counts. */
void grt__zoo_account(grt_allocator *a, uint64_t size, uint64_t requested, int sign);
/* One free block inside a split segment appears (+1) or disappears (-1). */
void grt__zoo_account_split(grt_allocator *a, uint64_t size, int sign);
/* Turns a failed device malloc into the call's status: GRT_ERR_NOMEM stays,
 * everything else becomes GRT_ERR_OOM with an explanation (num_ooms counted). */
grt_status grt__zoo_oom(grt_allocator *a, grt_status device_status, uint64_t requested, const char *why);
/* size rounded up to a multiple of unit (unit > 0). */
static inline uint64_t grt__zoo_round(uint64_t size, uint64_t unit) { return (size + unit - 1) / unit * unit; }

/* What a structure walker counted; compared against a->stats. */
typedef struct grt__zoo_recount {
  int64_t allocation, allocated_bytes, requested_bytes;
  int64_t segment, reserved_bytes;
  int64_t inactive_split, inactive_split_bytes;
} grt__zoo_recount;

grt_status grt__zoo_check_stats(grt_allocator *a, const grt__zoo_recount *r, char *msg, size_t msg_size);

#define GRT__ZOO_FAIL(...)                \
  do {                                    \
    snprintf(msg, msg_size, __VA_ARGS__); \
    return GRT_ERR_INTERNAL;              \
  } while (0)

/* Snapshot: room for n segments, then one segment with room for n_blocks blocks. */
grt_status grt__zoo_snap_begin(grt_alloc_snapshot *out, size_t n);
grt_snapshot_segment *grt__zoo_snap_add(grt_alloc_snapshot *out, grt_devptr base, size_t n_blocks);

/* Entry of a policy-specific public function: validates a, takes the lock,
 * clears last_error; GRT_ERR_UNSUPPORTED (lock released, message set) when a
 * is of another policy. Every GRT_OK must be paired with grt__zoo_leave. */
grt_status grt__zoo_enter(grt_allocator *a, const grt__alloc_ops *ops);
/* Records st in last_error (when no message was written), unlocks, returns st. */
grt_status grt__zoo_leave(grt_allocator *a, grt_status st);

#endif
