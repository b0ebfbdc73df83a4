/* shielded_device.h — a simulated device whose own host allocations are
 * never failed by nomem_wrap.h (tests named *nomem*): a backend wrapping the
 * simulated one raises nomem_shield around every call. The device has no
 * reservations of its own; such tests put the allocator, not the device,
 * under the failures. Include after nomem_wrap.h and cmocka.h. */
#ifndef GRT_TESTS_SHIELDED_DEVICE_H
#define GRT_TESTS_SHIELDED_DEVICE_H

#include "device/device_impl.h"

#define SHIELDED(ret, op, params, args)  \
  static ret sh_##op params {            \
    nomem_shield++;                      \
    ret r = grt__device_sim_ops.op args; \
    nomem_shield--;                      \
    return r;                            \
  }
SHIELDED(grt_status, malloc, (void *i, uint64_t s, grt_devptr *o), (i, s, o))
SHIELDED(grt_status, malloc_at, (void *i, grt_devptr p, uint64_t s), (i, p, s))
SHIELDED(grt_status, free, (void *i, grt_devptr p), (i, p))
SHIELDED(grt_status, segment_size, (void *i, grt_devptr p, uint64_t *s), (i, p, s))
SHIELDED(grt_status, host_ptr, (void *i, grt_devptr p, uint64_t n, void **o), (i, p, n, o))
SHIELDED(uint64_t, bytes_in_use, (void *i), (i))
SHIELDED(grt_status, vmm_granularity, (void *i, uint64_t *g), (i, g))
SHIELDED(grt_status, reserve, (void *i, uint64_t s, grt_devptr *va), (i, s, va))
SHIELDED(grt_status, map, (void *i, grt_devptr va, uint64_t s), (i, va, s))
SHIELDED(grt_status, unmap, (void *i, grt_devptr va, uint64_t s), (i, va, s))
SHIELDED(grt_status, release, (void *i, grt_devptr va), (i, va))

static void sh_memory_stats(void *i, grt_device_stats *s) {
  nomem_shield++;
  grt__device_sim_ops.memory_stats(i, s);
  nomem_shield--;
}
static grt_status sh_walk(void *i, grt_device_segment_fn fn, void *ctx) { return grt__device_sim_ops.walk(i, fn, ctx); }
static void sh_destroy(void *i) { grt__device_sim_ops.destroy(i); }

static const grt__device_ops shielded_ops = {
    .name = "simulated (shielded)",
    .malloc = sh_malloc,
    .malloc_at = sh_malloc_at,
    .free = sh_free,
    .segment_size = sh_segment_size,
    .host_ptr = sh_host_ptr,
    .memory_stats = sh_memory_stats,
    .bytes_in_use = sh_bytes_in_use,
    .walk = sh_walk,
    .destroy = sh_destroy,
    .vmm_granularity = sh_vmm_granularity,
    .reserve = sh_reserve,
    .map = sh_map,
    .unmap = sh_unmap,
    .release = sh_release,
};

static grt_device *shielded_device(const grt_device_config *cfg) {
  void *impl;
  grt_device *dev;
  assert_int_equal(grt__device_sim_create(cfg, &impl), GRT_OK);
  assert_int_equal(grt__device_wrap(&shielded_ops, impl, cfg->capacity, cfg->alignment, &dev), GRT_OK);
  return dev;
}

#endif
