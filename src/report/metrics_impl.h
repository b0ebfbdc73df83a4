/* metrics_impl.h — the metrics registry's internals, shared by metrics.c
 * (sources, locking, gathering) and prometheus.c (the text writer).
 *
 * Rendering is two passes: gather copies every source's figures (each under
 * its own lock, one source at a time), then the writer emits family by family
 * from the copies, so no allocator lock is held while text is formatted. */
#ifndef GRT_REPORT_METRICS_IMPL_H
#define GRT_REPORT_METRICS_IMPL_H

#include "gpurt/report.h"

typedef struct grt__alloc_sample {
  const char *name, *device, *policy; /* labels (owned by the registry) */
  grt_alloc_stats stats;
  grt_free_space free;
} grt__alloc_sample;

typedef struct grt__device_sample {
  const char *device;
  grt_device_stats stats;
} grt__device_sample;

/* Writes the exposition text for the gathered samples. */
grt_status grt__prometheus_write(const grt__alloc_sample *as, size_t n_as, const grt__device_sample *ds,
                                 size_t n_ds, char **out, size_t *len);

#endif
