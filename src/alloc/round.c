/* round.c — PyTorch's size rounding and segment sizing.
 *
 * round_size: below 512 -> 512; with roundup_power2_divisions d > 1 for the
 * size's interval and size > 512*d -> the next 1/d step of the power-of-two
 * interval (a power of two stays as is); else the next multiple of 512.
 * The d used is floor-log2-exact as in PT: the step is floor(2^k / 2^floor(log2 d)).
 * Sizes above roundup_bypass_threshold skip the divisions (roundup_bypass_threshold_mb
 * of older PyTorch, e.g. 1.13; its default, unlimited, skips none).
 */
#include "alloc/allocator_impl.h"

static unsigned log2_floor(uint64_t x) { return 63u - (unsigned)__builtin_clzll(x); }

static unsigned divisions_for(const grt_alloc_config *cfg, uint64_t size) {
  int index = (int)log2_floor(size) - 20; /* intervals start at 1 MiB */
  if (index < 0) index = 0;
  if (index > GRT_ROUNDUP_INTERVALS - 1) index = GRT_ROUNDUP_INTERVALS - 1;
  return cfg->roundup_power2_divisions[index];
}

static uint64_t roundup_power2_next_division(uint64_t size, unsigned divisions) {
  if ((size & (size - 1)) == 0) return size;
  uint64_t floor2 = (uint64_t)1 << log2_floor(size);
  uint64_t step = floor2 >> log2_floor(divisions);
  if (step == 0) return floor2 << 1;
  uint64_t down = size & ~(step - 1);
  return down == size ? size : down + step;
}

uint64_t grt_alloc_round_size(const grt_alloc_config *cfg, uint64_t size) {
  grt_alloc_config defaults;
  if (!cfg) {
    grt_alloc_config_default(&defaults);
    cfg = &defaults;
  }
  if (size < GRT_MIN_BLOCK_SIZE) return GRT_MIN_BLOCK_SIZE;
  unsigned d = size > cfg->roundup_bypass_threshold ? 0 : divisions_for(cfg, size);
  if (d > 1 && size > GRT_MIN_BLOCK_SIZE * d) return roundup_power2_next_division(size, d);
  return GRT_MIN_BLOCK_SIZE * ((size + GRT_MIN_BLOCK_SIZE - 1) / GRT_MIN_BLOCK_SIZE);
}

uint64_t grt_alloc_segment_size(uint64_t size) {
  if (size <= GRT_SMALL_SIZE) return GRT_SMALL_BUFFER;
  if (size < GRT_MIN_LARGE_ALLOC) return GRT_LARGE_BUFFER;
  return GRT_ROUND_LARGE * ((size + GRT_ROUND_LARGE - 1) / GRT_ROUND_LARGE);
}
