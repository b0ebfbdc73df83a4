/* load_target.h — the device a weight load fills, for `gpurt load` and
 * bench_load: an exec on the threads clock whose simulated device has host
 * backing, its pages touched before the load (a GPU's memory is resident,
 * so a first-touch page fault is no cost of loading), copies timed by the
 * real memcpy (the modelled H2D bandwidth is set out of the way), and the
 * caching allocator over it. */
#ifndef GRT_WORKLOADS_LOAD_TARGET_H
#define GRT_WORKLOADS_LOAD_TARGET_H

#include "gpurt/io.h"

typedef struct grt_load_target {
  grt_exec *exec;
  grt_device *dev;
  grt_allocator *alloc;
} grt_load_target;

/* Device bytes enough for every tensor under the caching allocator's rounding. */
uint64_t grt_load_target_capacity(const grt_safetensors *st, bool blob);
grt_status grt_load_target_create(uint64_t capacity, grt_load_target *out);
grt_status grt_load_target_destroy(grt_load_target *t);

#endif
