/* zoo.c — shared plumbing of the zoo policies (see zoo.h): device segments
 * with their counters, block accounting, the OOM message, the recount
 * comparison and the public-entry lock helpers. */
#include <stdlib.h>

#include "base/status.h"
#include "policy/zoo.h"

/* ---- device segments and accounting ---- */

grt_status grt__zoo_device_malloc(grt_allocator *a, uint64_t size, grt_devptr *out) {
  grt_status st = grt_device_malloc(a->dev, size, out);
  if (st) return st;
  a->stats.num_device_alloc++;
  grt__stat_update2(a->stats.segment, GRT__ZOO_POOL, 1);
  grt__stat_update2(a->stats.reserved_bytes, GRT__ZOO_POOL, (int64_t)size);
  return GRT_OK;
}

grt_status grt__zoo_device_free(grt_allocator *a, grt_devptr base, uint64_t size) {
  grt_status st = grt_device_free(a->dev, base);
  if (st) return st; /* the allocator owns the segment: only the device's own memory can fail it */
  a->stats.num_device_free++;
  grt__stat_update2(a->stats.segment, GRT__ZOO_POOL, -1);
  grt__stat_update2(a->stats.reserved_bytes, GRT__ZOO_POOL, -(int64_t)size);
  return GRT_OK;
}

void grt__zoo_account(grt_allocator *a, uint64_t size, uint64_t requested, int sign) {
  grt_alloc_stats *s = &a->stats;
  grt__stat_update2(s->allocation, GRT__ZOO_POOL, sign);
  grt__stat_update2(s->active, GRT__ZOO_POOL, sign);
  grt__stat_update2(s->allocated_bytes, GRT__ZOO_POOL, sign * (int64_t)size);
  grt__stat_update2(s->active_bytes, GRT__ZOO_POOL, sign * (int64_t)size);
  grt__stat_update2(s->requested_bytes, GRT__ZOO_POOL, sign * (int64_t)requested);
}

void grt__zoo_account_split(grt_allocator *a, uint64_t size, int sign) {
  grt__stat_update2(a->stats.inactive_split, GRT__ZOO_POOL, sign);
  grt__stat_update2(a->stats.inactive_split_bytes, GRT__ZOO_POOL, sign * (int64_t)size);
}

grt_status grt__zoo_oom(grt_allocator *a, grt_status device_status, uint64_t requested, const char *why) {
  if (device_status == GRT_ERR_NOMEM) return GRT_ERR_NOMEM;
  a->stats.num_ooms++;
  grt_device_stats ds;
  grt__ignore(grt_device_get_stats(a->dev, &ds)); /* a device and a buffer: it cannot fail */
  uint64_t allocated = (uint64_t)a->stats.allocated_bytes[GRT_STAT_ALL].current;
  uint64_t reserved = (uint64_t)a->stats.reserved_bytes[GRT_STAT_ALL].current;
  char want[32], fr[32], hole[32], al[32], un[32];
  grt__alloc_set_error(a,
                       "out of memory (%s): tried to allocate %s; %s %s; the device has %s free, largest hole %s; "
                       "%s allocated, %s reserved but unallocated",
                       a->ops->name, grt_format_bytes(requested, want, sizeof want), why,
                       device_status == GRT_ERR_FAULT_INJECTED ? "(device malloc failed by fault injection)" : "",
                       grt_format_bytes(ds.free_bytes, fr, sizeof fr), grt_format_bytes(ds.largest_hole, hole, sizeof hole),
                       grt_format_bytes(allocated, al, sizeof al), grt_format_bytes(reserved - allocated, un, sizeof un));
  return GRT_ERR_OOM;
}

/* ---- the walkers' recount ---- */

static grt_status compare(const char *name, const grt_stat *st, int64_t count, char *msg, size_t msg_size) {
  const int64_t want[GRT_STAT_TYPES] = {[GRT_STAT_ALL] = count, [GRT__ZOO_POOL] = count};
  for (int t = 0; t < GRT_STAT_TYPES; t++)
    if (st[t].current != want[t])
      GRT__ZOO_FAIL("stat %s[%d].current = %lld but a recount gives %lld", name, t, (long long)st[t].current,
                    (long long)want[t]);
  return GRT_OK;
}

grt_status grt__zoo_check_stats(grt_allocator *a, const grt__zoo_recount *r, char *msg, size_t msg_size) {
  const grt_alloc_stats *s = &a->stats;
  grt_status st;
  if ((st = compare("allocation", s->allocation, r->allocation, msg, msg_size)) ||
      (st = compare("active", s->active, r->allocation, msg, msg_size)) ||
      (st = compare("allocated_bytes", s->allocated_bytes, r->allocated_bytes, msg, msg_size)) ||
      (st = compare("active_bytes", s->active_bytes, r->allocated_bytes, msg, msg_size)) ||
      (st = compare("requested_bytes", s->requested_bytes, r->requested_bytes, msg, msg_size)) ||
      (st = compare("segment", s->segment, r->segment, msg, msg_size)) ||
      (st = compare("reserved_bytes", s->reserved_bytes, r->reserved_bytes, msg, msg_size)) ||
      (st = compare("inactive_split", s->inactive_split, r->inactive_split, msg, msg_size)) ||
      (st = compare("inactive_split_bytes", s->inactive_split_bytes, r->inactive_split_bytes, msg, msg_size)))
    return st;
  if (r->requested_bytes > r->allocated_bytes) GRT__ZOO_FAIL("requested bytes above allocated bytes");
  if (r->allocated_bytes > r->reserved_bytes) GRT__ZOO_FAIL("allocated bytes above reserved bytes");
  return GRT_OK;
}

/* ---- snapshot ---- */

grt_status grt__zoo_snap_begin(grt_alloc_snapshot *out, size_t n) {
  out->segments = calloc(n + 1, sizeof *out->segments);
  return out->segments ? GRT_OK : GRT_ERR_NOMEM;
}

grt_snapshot_segment *grt__zoo_snap_add(grt_alloc_snapshot *out, grt_devptr base, size_t n_blocks) {
  grt_snapshot_segment *seg = &out->segments[out->n_segments];
  seg->blocks = calloc(n_blocks ? n_blocks : 1, sizeof *seg->blocks);
  if (!seg->blocks) return NULL;
  out->n_segments++;
  seg->address = base;
  seg->is_large = 1;
  return seg;
}

/* ---- policy-specific public functions ---- */

grt_status grt__zoo_enter(grt_allocator *a, const grt__alloc_ops *ops) {
  if (!a) return GRT_ERR_INVALID_ARG;
  pthread_mutex_lock(&a->lock);
  a->last_error[0] = 0;
  if (a->ops == ops) return GRT_OK;
  grt__alloc_set_error(a, "this call needs an allocator of policy \"%s\", not \"%s\"", ops->name, a->ops->name);
  pthread_mutex_unlock(&a->lock);
  return GRT_ERR_UNSUPPORTED;
}

grt_status grt__zoo_leave(grt_allocator *a, grt_status st) {
  if (st && !a->last_error[0]) grt__alloc_set_error(a, "%s", grt_status_str(st));
  pthread_mutex_unlock(&a->lock);
  return st;
}
