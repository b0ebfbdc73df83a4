/* cuda_device.c — the CUDA device backend: grt_device over cuMemAlloc/cuMemFree.
 *
 * The backend keeps its own table of live segments (start -> size) so that a
 * foreign pointer, an interior pointer or a double free is reported as such
 * and never reaches cuMemFree. Invariant: in_use = sum of live segment sizes +
 * sum of mapped VMM pieces. Every driver call runs with the device's primary
 * context current (grt__cuda_enter / grt__cuda_leave restore the caller's).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "device/cuda_impl.h"
#include "gpurt/cuda.h"

int grt__cuda_enter(grt__cuda_dev *d) {
  CUcontext cur = NULL;
  if (d->cu->CtxGetCurrent(&cur) == CUDA_SUCCESS && cur == d->ctx) return 0;
  return d->cu->CtxPushCurrent(d->ctx) == CUDA_SUCCESS;
}

void grt__cuda_leave(grt__cuda_dev *d, int token) {
  CUcontext popped;
  if (token) d->cu->CtxPopCurrent(&popped);
}

grt__cuda_dev *grt__cuda_of(grt_device *dev) {
  return dev && dev->ops == &grt__device_cuda_ops ? dev->impl : NULL;
}

grt_status grt__cuda_fail(grt__cuda_dev *d, int locked, CUresult r, const char *what) {
  char msg[sizeof d->dev->last_error];
  grt_status st = grt__cu_status(d->cu, r, what, msg, sizeof msg);
  if (!locked) pthread_mutex_lock(&d->dev->lock);
  memcpy(d->dev->last_error, msg, sizeof msg);
  if (!locked) pthread_mutex_unlock(&d->dev->lock);
  return st;
}

grt_status grt__cuda_fail_missing(grt__cuda_dev *d, int locked, const char *symbol) {
  char msg[sizeof d->dev->last_error];
  grt_status st = grt__cu_missing(symbol, msg, sizeof msg);
  if (!locked) pthread_mutex_lock(&d->dev->lock);
  memcpy(d->dev->last_error, msg, sizeof msg);
  if (!locked) pthread_mutex_unlock(&d->dev->lock);
  return st;
}

void grt__cuda_child(grt__cuda_dev *d, int delta) {
  pthread_mutex_lock(&d->dev->lock);
  d->children += (uint64_t)(int64_t)delta;
  pthread_mutex_unlock(&d->dev->lock);
}

grt_status grt_cuda_probe(int *device_count, char *msg, size_t msg_size) {
  const grt__cu_api *cu;
  char why[512];
  grt_status st = grt__cu_load(&cu, why, sizeof why);
  if (st) {
    if (msg && msg_size) snprintf(msg, msg_size, "%s", why);
    return st;
  }
  int n = 0;
  st = grt__cu_status(cu, cu->DeviceGetCount(&n), "cuDeviceGetCount", msg, msg_size);
  if (st) return st;
  if (device_count) *device_count = n;
  if (n == 0) {
    if (msg && msg_size) snprintf(msg, msg_size, "%s: no CUDA device", why);
    return GRT_ERR_NO_DEVICE;
  }
  if (msg && msg_size) snprintf(msg, msg_size, "%s, %d device%s", why, n, n == 1 ? "" : "s");
  return GRT_OK;
}

/* ---- memory ops (called with the device lock held) ---- */

static grt_status cuda_malloc(void *impl, uint64_t size, grt_devptr *out) {
  grt__cuda_dev *d = impl;
  CUdeviceptr p = 0;
  int tok = grt__cuda_enter(d);
  CUresult r = d->cu->MemAlloc(&p, (size_t)size);
  if (r == CUDA_SUCCESS && !grt__u64map_put(&d->live, p, (void *)(uintptr_t)size)) {
    d->cu->MemFree(p);
    grt__cuda_leave(d, tok);
    return GRT_ERR_NOMEM;
  }
  grt__cuda_leave(d, tok);
  if (r != CUDA_SUCCESS) return grt__cuda_fail(d, 1, r, "cuMemAlloc");
  grt__u64map_del(&d->freed, p);
  d->in_use += size;
  *out = p;
  return GRT_OK;
}

static grt_status cuda_malloc_at(void *impl, grt_devptr addr, uint64_t size) {
  (void)impl, (void)addr, (void)size;
  return GRT_ERR_UNSUPPORTED; /* cuMemAlloc cannot choose addresses */
}

/* Classifies a pointer that does not start a live segment. */
static grt_status classify_bad(const grt__cuda_dev *d, grt_devptr ptr) {
  if (grt__u64map_get(&d->freed, ptr)) return GRT_ERR_DOUBLE_FREE;
  grt__u64map_iter it = grt__u64map_begin(&d->live);
  uint64_t k;
  void *size;
  while (grt__u64map_next(&d->live, &it, &k, &size))
    if (ptr > k && ptr < k + (uint64_t)(uintptr_t)size) return GRT_ERR_INTERIOR_POINTER;
  return GRT_ERR_UNKNOWN_POINTER;
}

static grt_status cuda_free(void *impl, grt_devptr ptr) {
  grt__cuda_dev *d = impl;
  uint64_t size = (uint64_t)(uintptr_t)grt__u64map_get(&d->live, ptr);
  if (!size) {
    grt_status st = classify_bad(d, ptr);
    snprintf(d->dev->last_error, sizeof d->dev->last_error,
             "free of 0x%llx refused before reaching cuMemFree: %s", (unsigned long long)ptr, grt_status_str(st));
    return st;
  }
  if (!grt__u64map_put(&d->freed, ptr, (void *)1)) return GRT_ERR_NOMEM;
  int tok = grt__cuda_enter(d);
  CUresult r = d->cu->MemFree(ptr);
  grt__cuda_leave(d, tok);
  if (r != CUDA_SUCCESS) {
    grt__u64map_del(&d->freed, ptr);
    return grt__cuda_fail(d, 1, r, "cuMemFree");
  }
  grt__u64map_del(&d->live, ptr);
  d->in_use -= size;
  return GRT_OK;
}

static grt_status cuda_segment_size(void *impl, grt_devptr ptr, uint64_t *size) {
  grt__cuda_dev *d = impl;
  uint64_t sz = (uint64_t)(uintptr_t)grt__u64map_get(&d->live, ptr);
  if (!sz) return classify_bad(d, ptr);
  *size = sz;
  return GRT_OK;
}

static grt_status cuda_host_ptr(void *impl, grt_devptr ptr, uint64_t len, void **out) {
  (void)impl, (void)ptr, (void)len, (void)out;
  return GRT_ERR_UNSUPPORTED; /* device memory has no host view; copy instead */
}

static grt_status cuda_mem_info(void *impl, uint64_t *free_bytes, uint64_t *total) {
  grt__cuda_dev *d = impl;
  size_t f = 0, t = 0;
  int tok = grt__cuda_enter(d);
  CUresult r = d->cu->MemGetInfo(&f, &t);
  grt__cuda_leave(d, tok);
  if (r != CUDA_SUCCESS) return grt__cuda_fail(d, 1, r, "cuMemGetInfo");
  *free_bytes = f;
  *total = t;
  return GRT_OK;
}

static void cuda_memory_stats(void *impl, grt_device_stats *st) {
  grt__cuda_dev *d = impl;
  uint64_t f = 0, t = 0;
  st->capacity = d->total;
  st->bytes_in_use = d->in_use;
  st->segments = d->live.count + d->pieces.count;
  /* The driver's free memory is the closest thing to a hole we can see. */
  st->holes = 1;
  st->largest_hole = cuda_mem_info(impl, &f, &t) == GRT_OK ? f : 0;
}

static uint64_t cuda_bytes_in_use(void *impl) { return ((grt__cuda_dev *)impl)->in_use; }

static int cmp_u64(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return x < y ? -1 : x > y;
}

static grt_status cuda_walk(void *impl, grt_device_segment_fn fn, void *ctx) {
  grt__cuda_dev *d = impl;
  uint64_t *addrs = malloc((d->live.count + 1) * sizeof *addrs);
  size_t n = 0;
  if (!addrs) return GRT_ERR_NOMEM;
  grt__u64map_iter it = grt__u64map_begin(&d->live);
  uint64_t addr;
  while (grt__u64map_next(&d->live, &it, &addr, NULL)) addrs[n++] = addr;
  qsort(addrs, n, sizeof *addrs, cmp_u64);
  for (size_t i = 0; i < n; i++) fn(ctx, addrs[i], (uint64_t)(uintptr_t)grt__u64map_get(&d->live, addrs[i]));
  free(addrs);
  return GRT_OK;
}

static int cuda_busy(void *impl) {
  grt__cuda_dev *d = impl;
  return d->children > 0 || d->reserved.count > 0;
}

static grt_status cuda_synchronize(void *impl) {
  grt__cuda_dev *d = impl;
  int tok = grt__cuda_enter(d);
  CUresult r = d->cu->CtxSynchronize();
  grt__cuda_leave(d, tok);
  return r == CUDA_SUCCESS ? GRT_OK : grt__cuda_fail(d, 0, r, "cuCtxSynchronize");
}

static void cuda_destroy(void *impl) {
  grt__cuda_dev *d = impl;
  grt__cuda_vmm_teardown(d);
  d->cu->DevicePrimaryCtxRelease(d->cudev);
  grt__u64map_free(&d->live);
  grt__u64map_free(&d->freed);
  grt__u64map_free(&d->reserved);
  grt__u64map_free(&d->pieces);
  free(d);
}

const grt__device_ops grt__device_cuda_ops = {
    .name = "cuda",
    .malloc = cuda_malloc,
    .malloc_at = cuda_malloc_at,
    .free = cuda_free,
    .segment_size = cuda_segment_size,
    .host_ptr = cuda_host_ptr,
    .memory_stats = cuda_memory_stats,
    .bytes_in_use = cuda_bytes_in_use,
    .walk = cuda_walk,
    .destroy = cuda_destroy,
    .mem_info = cuda_mem_info,
    .busy = cuda_busy,
    .synchronize = cuda_synchronize,
    .vmm_granularity = grt__cuda_vmm_granularity,
    .reserve = grt__cuda_reserve,
    .map = grt__cuda_map,
    .unmap = grt__cuda_unmap,
    .release = grt__cuda_release,
};

grt_status grt_device_create_cuda(int ordinal, grt_device **out) {
  if (!out) return GRT_ERR_INVALID_ARG;
  *out = NULL;
  if (ordinal < 0) return GRT_ERR_INVALID_ARG;
  const grt__cu_api *cu;
  int count = 0;
  grt_status st = grt_cuda_probe(&count, NULL, 0);
  if (st) return st;
  if (ordinal >= count) return GRT_ERR_INVALID_ARG;
  if ((st = grt__cu_load(&cu, NULL, 0))) return st; /* loaded by the probe: the same answer */
  grt__cuda_dev *d = calloc(1, sizeof *d);
  if (!d) return GRT_ERR_NOMEM;
  d->cu = cu;
  d->ordinal = ordinal;
  size_t total = 0;
  CUresult r = cu->DeviceGet(&d->cudev, ordinal);
  if (r == CUDA_SUCCESS) r = cu->DeviceTotalMem(&total, d->cudev);
  if (r == CUDA_SUCCESS) r = cu->DevicePrimaryCtxRetain(&d->ctx, d->cudev);
  if (r != CUDA_SUCCESS) {
    free(d);
    return grt__cu_status(cu, r, "cuDevicePrimaryCtxRetain", NULL, 0);
  }
  d->total = total;
  grt__u64map_init(&d->live);
  grt__u64map_init(&d->freed);
  grt__u64map_init(&d->reserved);
  grt__u64map_init(&d->pieces);
  st = grt__device_wrap(&grt__device_cuda_ops, d, total, 512, out);
  if (st) {
    cuda_destroy(d);
    return st;
  }
  d->dev = *out;
  return GRT_OK;
}

grt_status grt_cuda_device_name(grt_device *dev, char *buf, size_t buf_size) {
  grt__cuda_dev *d = grt__cuda_of(dev);
  if (!dev || !buf || buf_size == 0 || buf_size > 4096) return GRT_ERR_INVALID_ARG;
  if (!d) return GRT_ERR_UNSUPPORTED;
  CUresult r = d->cu->DeviceGetName(buf, (int)buf_size, d->cudev);
  return r == CUDA_SUCCESS ? GRT_OK : grt__cuda_fail(d, 0, r, "cuDeviceGetName");
}
