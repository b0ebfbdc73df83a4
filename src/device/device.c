/* device.c — the public grt_device functions: validation, locking, counters,
 * fault injection and the memory limit around a backend (device_impl.h).
 * The limit lives here, not in a backend, so that it caps every backend the
 * same way: a call over it is refused before the backend sees it, which keeps
 * "a failed call changes nothing" without an undo. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "device/device_impl.h"

void grt_device_config_default(grt_device_config *cfg) {
  if (!cfg) return;
  cfg->capacity = GRT_GiB;
  cfg->base_address = 0x7f0000000000ULL;
  cfg->alignment = 512;
  cfg->host_backing = 0;
  cfg->fail_malloc_at = 0;
  cfg->model = GRT_DEVICE_MODEL_CONTIGUOUS;
}

const char *grt_device_model_name(grt_device_model model) {
  switch (model) {
    case GRT_DEVICE_MODEL_CONTIGUOUS: return "contiguous";
    case GRT_DEVICE_MODEL_PAGED: return "paged";
  }
  return "unknown";
}

grt_status grt_device_model_parse(const char *name, grt_device_model *out) {
  if (!name || !out) return GRT_ERR_INVALID_ARG;
  if (strcmp(name, "contiguous") == 0) {
    *out = GRT_DEVICE_MODEL_CONTIGUOUS;
  } else if (strcmp(name, "paged") == 0) {
    *out = GRT_DEVICE_MODEL_PAGED;
  } else {
    return GRT_ERR_INVALID_ARG;
  }
  return GRT_OK;
}

static int is_pow2(uint64_t x) { return x && !(x & (x - 1)); }

grt_status grt__device_wrap(const grt__device_ops *ops, void *impl, uint64_t capacity, uint64_t alignment,
                            grt_device **out) {
  grt_device *dev = calloc(1, sizeof *dev);
  if (!dev) return GRT_ERR_NOMEM;
  pthread_mutex_init(&dev->lock, NULL);
  dev->ops = ops;
  dev->impl = impl;
  dev->alignment = alignment;
  dev->capacity = capacity;
  *out = dev;
  return GRT_OK;
}

grt_status grt_device_create(const grt_device_config *cfg, grt_device **out) {
  if (!out) return GRT_ERR_INVALID_ARG;
  *out = NULL;
  if (!cfg || cfg->capacity == 0 || cfg->base_address == 0 || !is_pow2(cfg->alignment) ||
      cfg->base_address % cfg->alignment != 0 || cfg->base_address + cfg->capacity < cfg->base_address ||
      (cfg->model != GRT_DEVICE_MODEL_CONTIGUOUS && cfg->model != GRT_DEVICE_MODEL_PAGED))
    return GRT_ERR_INVALID_ARG;
  void *impl = NULL;
  grt_status st = grt__device_sim_create(cfg, &impl);
  if (st) return st;
  st = grt__device_wrap(&grt__device_sim_ops, impl, cfg->capacity, cfg->alignment, out);
  if (st) {
    grt__device_sim_ops.destroy(impl);
    return st;
  }
  (*out)->fail_countdown = cfg->fail_malloc_at;
  return GRT_OK;
}

grt_status grt_device_destroy(grt_device *dev) {
  if (!dev) return GRT_OK;
  grt_device_stats s = {0};
  pthread_mutex_lock(&dev->lock);
  dev->ops->memory_stats(dev->impl, &s);
  pthread_mutex_unlock(&dev->lock);
  pthread_mutex_lock(&dev->lock);
  int busy = s.segments || s.reserved_va_bytes || (dev->ops->busy && dev->ops->busy(dev->impl));
  pthread_mutex_unlock(&dev->lock);
  if (busy) return GRT_ERR_BUSY;
  dev->ops->destroy(dev->impl);
  pthread_mutex_destroy(&dev->lock);
  free(dev);
  return GRT_OK;
}

/* Called with the lock held before each malloc: true when this one must fail. */
static int fault_fires(grt_device *dev) {
  if (dev->fail_countdown == 0) return 0;
  return --dev->fail_countdown == 0;
}

static void note_in_use(grt_device *dev) {
  uint64_t in_use = dev->ops->bytes_in_use(dev->impl);
  if (in_use > dev->peak_bytes_in_use) dev->peak_bytes_in_use = in_use;
}

/* Counts a malloc/map outcome (lock held): successes in *calls, failures once. */
static void count_alloc(grt_device *dev, grt_status st, uint64_t *calls) {
  if (st == GRT_OK) {
    (*calls)++;
    note_in_use(dev);
  } else if (st == GRT_ERR_OOM || st == GRT_ERR_FAULT_INJECTED) {
    dev->failed_mallocs++;
  }
}

static uint64_t align_up(uint64_t v, uint64_t a) { return (v + a - 1) & ~(a - 1); }

/* The unit bytes_in_use grows in (lock held): a power of two, at least the alignment. */
static uint64_t charge_unit(grt_device *dev) {
  uint64_t unit = dev->ops->charge_unit ? dev->ops->charge_unit(dev->impl) : 1;
  return unit > dev->alignment ? unit : dev->alignment;
}

/* Bytes a malloc or map of size adds to bytes_in_use (lock held); UINT64_MAX
 * when rounding up overflows, which no limit admits. */
static uint64_t charge_of(grt_device *dev, uint64_t size) {
  uint64_t unit = charge_unit(dev);
  return size > UINT64_MAX - (unit - 1) ? UINT64_MAX : align_up(size, unit);
}

/* Bytes the limit leaves free (lock held): UINT64_MAX without a limit, 0 when
 * use is already above it. */
static uint64_t limit_room(grt_device *dev) {
  if (!dev->memory_limit) return UINT64_MAX;
  uint64_t in_use = dev->ops->bytes_in_use(dev->impl);
  return in_use < dev->memory_limit ? dev->memory_limit - in_use : 0;
}

/* True (with the reason in last_error) when a malloc or map of size would
 * take bytes_in_use above the limit (lock held). */
static int over_limit(grt_device *dev, uint64_t size) {
  uint64_t room = limit_room(dev), need = charge_of(dev, size);
  if (need <= room) return 0;
  snprintf(dev->last_error, sizeof dev->last_error,
           "memory limit: %llu bytes in use of a %llu-byte limit, the call needs %llu more",
           (unsigned long long)dev->ops->bytes_in_use(dev->impl), (unsigned long long)dev->memory_limit,
           (unsigned long long)need);
  return 1;
}

grt_status grt_device_malloc(grt_device *dev, uint64_t size, grt_devptr *out) {
  if (!dev || !out) return GRT_ERR_INVALID_ARG;
  if (size == 0 || size > dev->capacity) return GRT_ERR_SIZE;
  size = align_up(size, dev->alignment);
  pthread_mutex_lock(&dev->lock);
  grt_devptr hint = dev->next_addr;
  grt_status st;
  if (fault_fires(dev))
    st = GRT_ERR_FAULT_INJECTED;
  else if (over_limit(dev, size))
    st = GRT_ERR_OOM;
  else if (hint && dev->ops->malloc_at(dev->impl, hint, size) == GRT_OK)
    st = GRT_OK, *out = hint;
  else
    st = dev->ops->malloc(dev->impl, size, out);
  if (st == GRT_OK) dev->next_addr = 0; /* a refused malloc changes nothing, its hint included */
  count_alloc(dev, st, &dev->malloc_calls);
  pthread_mutex_unlock(&dev->lock);
  return st;
}

grt_status grt_device_malloc_at(grt_device *dev, grt_devptr addr, uint64_t size) {
  if (!dev) return GRT_ERR_INVALID_ARG;
  if (size == 0 || size > dev->capacity) return GRT_ERR_SIZE;
  if (addr % dev->alignment) return GRT_ERR_INVALID_ARG;
  size = align_up(size, dev->alignment);
  pthread_mutex_lock(&dev->lock);
  grt_status st = fault_fires(dev) ? GRT_ERR_FAULT_INJECTED
      : over_limit(dev, size)      ? GRT_ERR_OOM
                                   : dev->ops->malloc_at(dev->impl, addr, size);
  count_alloc(dev, st, &dev->malloc_calls);
  pthread_mutex_unlock(&dev->lock);
  return st;
}

grt_status grt_device_set_next_address(grt_device *dev, grt_devptr addr) {
  if (!dev) return GRT_ERR_INVALID_ARG;
  if (addr % dev->alignment) return GRT_ERR_INVALID_ARG;
  pthread_mutex_lock(&dev->lock);
  dev->next_addr = addr;
  pthread_mutex_unlock(&dev->lock);
  return GRT_OK;
}

grt_status grt_device_free(grt_device *dev, grt_devptr ptr) {
  if (!dev) return GRT_ERR_INVALID_ARG;
  pthread_mutex_lock(&dev->lock);
  grt_status st = dev->ops->free(dev->impl, ptr);
  if (st == GRT_OK) {
    dev->free_calls++;
    dev->syncs++; /* cudaFree waits for the whole device */
  }
  pthread_mutex_unlock(&dev->lock);
  return st;
}

grt_status grt_device_segment_size(grt_device *dev, grt_devptr ptr, uint64_t *size) {
  if (!dev || !size) return GRT_ERR_INVALID_ARG;
  pthread_mutex_lock(&dev->lock);
  grt_status st = dev->ops->segment_size(dev->impl, ptr, size);
  pthread_mutex_unlock(&dev->lock);
  return st;
}

grt_status grt_device_get_stats(grt_device *dev, grt_device_stats *out) {
  if (!dev || !out) return GRT_ERR_INVALID_ARG;
  grt_device_stats s = {0};
  pthread_mutex_lock(&dev->lock);
  dev->ops->memory_stats(dev->impl, &s);
  s.peak_bytes_in_use = dev->peak_bytes_in_use;
  s.malloc_calls = dev->malloc_calls;
  s.failed_mallocs = dev->failed_mallocs;
  s.free_calls = dev->free_calls;
  s.syncs = dev->syncs;
  s.map_calls = dev->map_calls;
  s.unmap_calls = dev->unmap_calls;
  s.memory_limit = dev->memory_limit;
  uint64_t unit = charge_unit(dev);
  pthread_mutex_unlock(&dev->lock);
  uint64_t usable = s.memory_limit && s.memory_limit < s.capacity ? s.memory_limit : s.capacity;
  s.free_bytes = s.bytes_in_use < usable ? usable - s.bytes_in_use : 0;
  /* Under a limit no malloc larger than what it leaves (in whole units) can succeed. */
  if (s.memory_limit && s.largest_hole > s.free_bytes / unit * unit) s.largest_hole = s.free_bytes / unit * unit;
  *out = s;
  return GRT_OK;
}

grt_status grt_device_mem_get_info(grt_device *dev, uint64_t *free_bytes, uint64_t *total) {
  grt_device_stats s;
  if (!dev || !free_bytes || !total) return GRT_ERR_INVALID_ARG;
  if (dev->ops->mem_info) {
    uint64_t f = 0, t = 0;
    pthread_mutex_lock(&dev->lock);
    grt_status st = dev->ops->mem_info(dev->impl, &f, &t);
    uint64_t room = limit_room(dev);
    pthread_mutex_unlock(&dev->lock);
    if (st) return st;
    *free_bytes = f < room ? f : room;
    *total = t;
    return GRT_OK;
  }
  grt_status st = grt_device_get_stats(dev, &s);
  if (st) return st;
  *free_bytes = s.free_bytes;
  *total = s.capacity;
  return GRT_OK;
}

grt_status grt_device_set_memory_limit(grt_device *dev, uint64_t limit_bytes) {
  if (!dev) return GRT_ERR_INVALID_ARG;
  pthread_mutex_lock(&dev->lock);
  dev->memory_limit = limit_bytes;
  pthread_mutex_unlock(&dev->lock);
  return GRT_OK;
}

grt_status grt_device_host_ptr(grt_device *dev, grt_devptr ptr, uint64_t len, void **out) {
  if (!dev || !out) return GRT_ERR_INVALID_ARG;
  pthread_mutex_lock(&dev->lock);
  grt_status st = dev->ops->host_ptr(dev->impl, ptr, len, out);
  pthread_mutex_unlock(&dev->lock);
  return st;
}

grt_status grt_device_inject_malloc_failure(grt_device *dev, uint64_t nth) {
  if (!dev) return GRT_ERR_INVALID_ARG;
  pthread_mutex_lock(&dev->lock);
  dev->fail_countdown = nth;
  pthread_mutex_unlock(&dev->lock);
  return GRT_OK;
}

grt_status grt_device_walk_segments(grt_device *dev, grt_device_segment_fn fn, void *ctx) {
  if (!dev || !fn) return GRT_ERR_INVALID_ARG;
  pthread_mutex_lock(&dev->lock);
  grt_status st = dev->ops->walk(dev->impl, fn, ctx);
  pthread_mutex_unlock(&dev->lock);
  return st;
}

/* ---- virtual memory ---- */

grt_status grt_device_vmm_granularity(grt_device *dev, uint64_t *bytes) {
  if (!dev || !bytes) return GRT_ERR_INVALID_ARG;
  if (!dev->ops->vmm_granularity || !dev->ops->reserve) return GRT_ERR_UNSUPPORTED;
  pthread_mutex_lock(&dev->lock);
  grt_status st = dev->ops->vmm_granularity(dev->impl, bytes);
  pthread_mutex_unlock(&dev->lock);
  return st;
}

static grt_status check_vm_range(grt_device *dev, grt_devptr va, uint64_t size) {
  if (!dev) return GRT_ERR_INVALID_ARG;
  uint64_t g;
  grt_status st = grt_device_vmm_granularity(dev, &g);
  if (st) return st;
  if (size == 0) return GRT_ERR_SIZE;
  if (size % g || va % g) return GRT_ERR_INVALID_ARG;
  return GRT_OK;
}

grt_status grt_device_reserve(grt_device *dev, uint64_t size, grt_devptr *va) {
  grt_status st = check_vm_range(dev, 0, size);
  if (st) return st;
  if (!va) return GRT_ERR_INVALID_ARG;
  pthread_mutex_lock(&dev->lock);
  st = dev->ops->reserve(dev->impl, size, va);
  pthread_mutex_unlock(&dev->lock);
  return st;
}

grt_status grt_device_map(grt_device *dev, grt_devptr va, uint64_t size) {
  grt_status st = check_vm_range(dev, va, size);
  if (st) return st;
  pthread_mutex_lock(&dev->lock);
  st = fault_fires(dev)       ? GRT_ERR_FAULT_INJECTED
      : over_limit(dev, size) ? GRT_ERR_OOM
                              : dev->ops->map(dev->impl, va, size);
  count_alloc(dev, st, &dev->map_calls);
  pthread_mutex_unlock(&dev->lock);
  return st;
}

grt_status grt_device_unmap(grt_device *dev, grt_devptr va, uint64_t size) {
  grt_status st = check_vm_range(dev, va, size);
  if (st) return st;
  pthread_mutex_lock(&dev->lock);
  st = dev->ops->unmap(dev->impl, va, size);
  if (st == GRT_OK) {
    dev->unmap_calls++;
    dev->syncs++; /* unmapping waits for the work that used the pages */
  }
  pthread_mutex_unlock(&dev->lock);
  return st;
}

grt_status grt_device_release(grt_device *dev, grt_devptr va) {
  if (!dev) return GRT_ERR_INVALID_ARG;
  if (!dev->ops->release) return GRT_ERR_UNSUPPORTED;
  pthread_mutex_lock(&dev->lock);
  grt_status st = dev->ops->release(dev->impl, va);
  pthread_mutex_unlock(&dev->lock);
  return st;
}
