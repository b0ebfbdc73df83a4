/* stats.c — PyTorch's statistics arithmetic, shared by every policy
 * (grt__stat_update itself is inline in allocator_impl.h).
 * increase: current += n, peak = max(peak, current), allocated += n;
 * decrease: current -= n, freed += n. */
#include "alloc/allocator_impl.h"

static void reset_array(grt_stat *arr, int n) {
  for (int i = 0; i < n; i++) arr[i].peak = arr[i].current;
}

void grt__stats_reset_peaks(grt_alloc_stats *st) {
  reset_array(st->allocation, GRT_STAT_TYPES);
  reset_array(st->segment, GRT_STAT_TYPES);
  reset_array(st->active, GRT_STAT_TYPES);
  reset_array(st->inactive_split, GRT_STAT_TYPES);
  reset_array(st->allocated_bytes, GRT_STAT_TYPES);
  reset_array(st->reserved_bytes, GRT_STAT_TYPES);
  reset_array(st->active_bytes, GRT_STAT_TYPES);
  reset_array(st->inactive_split_bytes, GRT_STAT_TYPES);
  reset_array(st->requested_bytes, GRT_STAT_TYPES);
  reset_array(&st->oversize_allocations, 1);
  reset_array(&st->oversize_segments, 1);
}

void grt__snapshot_segment_totals(grt_snapshot_segment *seg) {
  seg->total_size = seg->allocated_size = seg->active_size = seg->requested_size = 0;
  for (size_t i = 0; i < seg->n_blocks; i++) {
    const grt_snapshot_block *b = &seg->blocks[i];
    seg->total_size += b->size;
    if (b->state == GRT_BLOCK_ACTIVE_ALLOCATED) {
      seg->allocated_size += b->size;
      seg->requested_size += b->requested_size;
    }
    if (b->state != GRT_BLOCK_INACTIVE) seg->active_size += b->size;
  }
}
