/* gpurt_torch_alloc.c — libgpurt_torch_alloc.so: gpurt's caching allocator on
 * the CUDA backend as a PyTorch pluggable allocator:
 *
 *   torch.cuda.memory.change_current_allocator(
 *       torch.cuda.memory.CUDAPluggableAllocator(path, "gpurt_alloc", "gpurt_free"))
 *
 * One device + CUDA event oracle + "caching" allocator per GPU, created at the
 * first allocation on it (GRT_ALLOC_CONF configures it, like
 * PYTORCH_CUDA_ALLOC_CONF). Stream ids are the cudaStream_t values PyTorch
 * passes (0 = default stream), so blocks are cached per stream as in PyTorch.
 *
 * Process-wide state is unavoidable here (PyTorch calls plain functions): one
 * table of per-device slots, each published once under g_lock and read with
 * acquire loads afterwards; the allocators themselves are thread-safe.
 */
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/types.h>

#include "gpurt/alloc.h"
#include "gpurt/cuda.h"
#include "gpurt_torch_alloc.h"

#define EXPORT GPURT_TORCH_EXPORT
#define MAX_DEVICES 64

typedef struct slot {
  grt_device *dev;
  grt_cuda_events *events;
  grt_allocator *alloc; /* published last (release store) */
  int failed;           /* creation failed once: do not retry on every call */
} slot;

static slot g_slots[MAX_DEVICES];
static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;

static grt_allocator *create_slot(int device) {
  slot *s = &g_slots[device];
  grt_alloc_config cfg;
  char err[256] = "";
  grt_alloc_config_default(&cfg);
  grt_status st = grt_alloc_config_from_env(&cfg, err, sizeof err);
  if (!st) st = grt_device_create_cuda(device, &s->dev);
  if (!st) st = grt_cuda_events_create(s->dev, &s->events);
  if (!st) {
    cfg.stream_ops = grt_cuda_events_stream_ops(s->events);
    grt_allocator *a = NULL;
    st = grt_alloc_create("caching", s->dev, &cfg, &a);
    if (!st) {
      __atomic_store_n(&s->alloc, a, __ATOMIC_RELEASE);
      return a;
    }
  }
  if (!err[0]) {
    /* The driver's state explains most set-up failures; the probe describes it
     * in err whether or not it succeeds, and says when it failed too. */
    grt_status pst = grt_cuda_probe(NULL, err, sizeof err);
    size_t n = strlen(err);
    if (pst) snprintf(err + n, sizeof err - n, "; probe: %s", grt_status_name(pst));
  }
  fprintf(stderr, "gpurt_torch_alloc: cannot set up device %d: %s (%s)\n", device, grt_status_name(st), err);
  /* Nothing was allocated on them: both are idle, so a failure here is a bug. */
  grt_status est = grt_cuda_events_destroy(s->events);
  grt_status dst = grt_device_destroy(s->dev);
  if (est || dst)
    fprintf(stderr, "gpurt_torch_alloc: cleaning up device %d: events %s, device %s\n", device, grt_status_name(est),
            grt_status_name(dst));
  s->events = NULL;
  s->dev = NULL;
  s->failed = 1;
  return NULL;
}

static grt_allocator *allocator_for(int device) {
  if (device < 0 || device >= MAX_DEVICES) return NULL;
  grt_allocator *a = __atomic_load_n(&g_slots[device].alloc, __ATOMIC_ACQUIRE);
  if (a) return a;
  pthread_mutex_lock(&g_lock);
  a = g_slots[device].alloc;
  if (!a && !g_slots[device].failed) a = create_slot(device);
  pthread_mutex_unlock(&g_lock);
  return a;
}

EXPORT void *gpurt_alloc(ssize_t size, int device, void *stream) {
  grt_allocator *a = allocator_for(device);
  if (!a || size <= 0) return NULL;
  grt_devptr p = 0;
  grt_status st = grt_alloc_malloc(a, (uint64_t)size, (grt_stream_id)(uintptr_t)stream, &p);
  if (st) {
    fprintf(stderr, "gpurt_alloc(%zd bytes, device %d): %s: %s\n", size, device, grt_status_name(st),
            grt_alloc_last_error(a));
    return NULL;
  }
  return (void *)(uintptr_t)p;
}

EXPORT void gpurt_free(void *ptr, ssize_t size, int device, void *stream) {
  (void)size, (void)stream;
  grt_allocator *a = allocator_for(device);
  if (!a || !ptr) return;
  grt_status st = grt_alloc_free(a, (grt_devptr)(uintptr_t)ptr);
  if (st) fprintf(stderr, "gpurt_free(%p, device %d): %s\n", ptr, device, grt_status_name(st));
}

/* Returns every cached segment to the driver (torch.cuda.empty_cache analogue). */
EXPORT int gpurt_empty_cache(int device) {
  grt_allocator *a = allocator_for(device);
  return a ? (int)grt_alloc_empty_cache(a) : (int)GRT_ERR_NO_DEVICE;
}

EXPORT int gpurt_reset_peak_stats(int device) {
  grt_allocator *a = allocator_for(device);
  return a ? (int)grt_alloc_reset_peak_stats(a) : (int)GRT_ERR_NO_DEVICE;
}

/* Writes the allocator's counters as one JSON object into buf; returns the
 * length written (or needed), or -1 when the device has no allocator yet. */
EXPORT int gpurt_stats_json(int device, char *buf, size_t buf_size) {
  if (device < 0 || device >= MAX_DEVICES) return -1;
  grt_allocator *a = __atomic_load_n(&g_slots[device].alloc, __ATOMIC_ACQUIRE);
  grt_alloc_stats s;
  grt_device_stats ds;
  if (!a || grt_alloc_get_stats(a, &s) || grt_device_get_stats(g_slots[device].dev, &ds)) return -1;
  const grt_stat *al = &s.allocated_bytes[GRT_STAT_ALL], *rs = &s.reserved_bytes[GRT_STAT_ALL];
  return snprintf(buf, buf_size,
                  "{\"allocated_current\": %lld, \"allocated_peak\": %lld, \"reserved_current\": %lld, "
                  "\"reserved_peak\": %lld, \"requested_peak\": %lld, \"allocations\": %lld, "
                  "\"segments_current\": %lld, \"segments_peak\": %lld, \"num_device_alloc\": %llu, "
                  "\"num_device_free\": %llu, \"num_alloc_retries\": %llu, \"num_ooms\": %llu, "
                  "\"num_cache_hits\": %llu, \"pending_free_blocks\": %llu, \"events_recorded\": %llu, "
                  "\"device_malloc_calls\": %llu, \"device_peak_bytes\": %llu}",
                  (long long)al->current, (long long)al->peak, (long long)rs->current, (long long)rs->peak,
                  (long long)s.requested_bytes[GRT_STAT_ALL].peak, (long long)s.allocation[GRT_STAT_ALL].allocated,
                  (long long)s.segment[GRT_STAT_ALL].current, (long long)s.segment[GRT_STAT_ALL].peak,
                  (unsigned long long)s.num_device_alloc, (unsigned long long)s.num_device_free,
                  (unsigned long long)s.num_alloc_retries, (unsigned long long)s.num_ooms,
                  (unsigned long long)s.num_cache_hits, (unsigned long long)s.pending_free_blocks,
                  (unsigned long long)grt_cuda_events_recorded(g_slots[device].events),
                  (unsigned long long)ds.malloc_calls, (unsigned long long)ds.peak_bytes_in_use);
}
