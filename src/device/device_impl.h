/* device_impl.h — the backend contract behind grt_device (internal).
 *
 * device.c owns the public functions: it validates arguments, takes the lock,
 * injects faults and keeps the call counters; a backend only manages memory.
 * A backend op returns a grt_status and must leave its state unchanged when it
 * fails. Ops are called with the device lock held. Ops below "optional" may be
 * NULL: the public function then returns GRT_ERR_UNSUPPORTED (synchronize: a
 * backend without it runs no work, so GRT_OK). A backend may write a message
 * for its failures into the device's last_error (it gets the buffer at create).
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
  /* The unit bytes_in_use grows in, a power of two (the paged simulated
   * device: 2 MiB pages). A malloc or map of size charges size rounded up to
   * it and to the alignment; NULL: the alignment. The memory limit needs it
   * to refuse a call before the backend makes it. */
  uint64_t (*charge_unit)(void *impl);
  /* GRT_ERR_NOMEM (fn never called) when the walk cannot take its sorted copy. */
  grt_status (*walk)(void *impl, grt_device_segment_fn fn, void *ctx);
  void (*destroy)(void *impl);
  /* optional (NULL: GRT_ERR_UNSUPPORTED); virtual memory needs all five VMM ops */
  grt_status (*mem_info)(void *impl, uint64_t *free_bytes, uint64_t *total);
  int (*busy)(void *impl); /* nonzero while children (streams, events, reservations) live */
  grt_status (*synchronize)(void *impl);
  grt_status (*vmm_granularity)(void *impl, uint64_t *granularity);
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
  uint64_t memory_limit;   /* cap on bytes_in_use below the capacity, 0 = none */
  char last_error[256];    /* the backend's message for its last failure ("" if none) */
};

/* Wraps a backend instance into a new grt_device (the backend's create
 * functions call this last). On failure the caller still owns impl. */
grt_status grt__device_wrap(const grt__device_ops *ops, void *impl, uint64_t capacity, uint64_t alignment,
                            grt_device **out);

/* The simulated backend (device_sim.c). */
grt_status grt__device_sim_create(const grt_device_config *cfg, void **impl);
extern const grt__device_ops grt__device_sim_ops;

#endif
