/* free_space.c — free cached memory per pool, read from a snapshot: the
 * largest free block (the fragmentation early warning PyTorch does not
 * export) and the fragmentation ratio derived from it.
 *
 * Only `inactive` blocks count as free: a block pending on stream events is
 * not yet usable by any request. */
#include "gpurt/report.h"

grt_status grt_free_space_of(const grt_alloc_snapshot *snap, grt_free_space *out) {
  if (!snap || !out || (snap->n_segments && !snap->segments)) return GRT_ERR_INVALID_ARG;
  grt_free_space f = {{0}, {0}, {0}};
  for (size_t i = 0; i < snap->n_segments; i++) {
    const grt_snapshot_segment *seg = &snap->segments[i];
    int pool = seg->is_large ? GRT_STAT_LARGE_POOL : GRT_STAT_SMALL_POOL;
    for (size_t j = 0; j < seg->n_blocks; j++) {
      const grt_snapshot_block *b = &seg->blocks[j];
      if (b->state == GRT_BLOCK_ACTIVE_PENDING_FREE) {
        f.pending[pool] += b->size;
        f.pending[GRT_STAT_ALL] += b->size;
      }
      if (b->state != GRT_BLOCK_INACTIVE) continue;
      f.inactive[pool] += b->size;
      f.inactive[GRT_STAT_ALL] += b->size;
      if (b->size > f.largest[pool]) f.largest[pool] = b->size;
      if (b->size > f.largest[GRT_STAT_ALL]) f.largest[GRT_STAT_ALL] = b->size;
    }
  }
  *out = f;
  return GRT_OK;
}

double grt_fragmentation_ratio(uint64_t largest, uint64_t free_bytes) {
  if (free_bytes == 0 || largest >= free_bytes) return 0.0;
  return 1.0 - (double)largest / (double)free_bytes;
}
