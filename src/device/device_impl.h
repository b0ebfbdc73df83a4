/* device_impl.h — the backend contract behind grt_device (internal).
 *
 * device.c owns the public functions: it validates arguments, takes the lock,
 * injects faults and keeps the call counters; a backend only manages memory.
 * A backend op returns a grt_status and must leave its state unchanged when it
 * fails. Ops are called with the device lock held.
 */
#ifndef GRT_DEVICE_IMPL_H
#define GRT_DEVICE_IMPL_H

#include <pthread.h>

#include "gpurt/device.h"

typedef struct grt__device_ops {
  const char *name;
  grt_status (*malloc)(void *impl, uint64_t size, grt_devptr *out);
  grt_status (*malloc_at)(void *impl, grt_devptr addr, uint64_t size);
  /* Frees the segment starting at ptr; classifies bad pointers precisely. */
  grt_status (*free)(void *impl, grt_devptr ptr);
  grt_status (*segment_size)(void *impl, grt_devptr ptr, uint64_t *size);
  grt_status (*host_ptr)(void *impl, grt_devptr ptr, uint64_t len, void **out);
  /* Fills the memory fields of stats (capacity, bytes_in_use, largest_hole, holes, segments). */
  void (*memory_stats)(void *impl, grt_device_stats *stats);
  uint64_t (*bytes_in_use)(void *impl); /* cheap: called after every malloc */
  void (*walk)(void *impl, grt_device_segment_fn fn, void *ctx);
  void (*destroy)(void *impl);
  /* Virtual memory; NULL when the backend has none (GRT_ERR_UNSUPPORTED). */
  uint64_t granularity;
  grt_status (*reserve)(void *impl, uint64_t size, grt_devptr *va);
  grt_status (*map)(void *impl, grt_devptr va, uint64_t size);
  grt_status (*unmap)(void *impl, grt_devptr va, uint64_t size);
  grt_status (*release)(void *impl, grt_devptr va);
} grt__device_ops;

struct grt_device {
  pthread_mutex_t lock; /* guards everything below and the backend's state */
  const grt__device_ops *ops;
  void *impl;
  uint64_t alignment;
  uint64_t capacity;
  uint64_t peak_bytes_in_use;
  uint64_t malloc_calls, failed_mallocs, free_calls, syncs, map_calls, unmap_calls;
  uint64_t fail_countdown; /* 0: no injected fault pending */
  grt_devptr next_addr;    /* placement hint for the next malloc, 0 = none */
};

/* The simulated backend (device_sim.c). */
grt_status grt__device_sim_create(const grt_device_config *cfg, void **impl);
extern const grt__device_ops grt__device_sim_ops;

#endif
