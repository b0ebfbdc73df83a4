/* cuda_vmm.c — virtual memory on the CUDA backend: cuMemAddressReserve,
 * cuMemCreate + cuMemMap + cuMemSetAccess, cuMemUnmap + cuMemRelease,
 * cuMemAddressFree (the driver calls under PyTorch's expandable segments).
 *
 * Each map call creates one physical allocation (a "piece"); unmap takes back
 * whole pieces only. Invariants: pieces lie inside reservations and never
 * overlap; a reservation is freed only when no piece lies inside it. All ops
 * run under the device lock.
 */
#include <stdio.h>
#include <stdlib.h>

#include "device/cuda_impl.h"

static CUmemAllocationProp alloc_prop(const grt__cuda_dev *d) {
  CUmemAllocationProp p = {0};
  p.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  p.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  p.location.id = d->ordinal;
  return p;
}

grt_status grt__cuda_vmm_granularity(void *impl, uint64_t *granularity) {
  grt__cuda_dev *d = impl;
  if (!d->cu->MemGetAllocationGranularity) return grt__cuda_fail_missing(d, 1, "cuMemGetAllocationGranularity");
  CUmemAllocationProp p = alloc_prop(d);
  size_t g = 0;
  int tok = grt__cuda_enter(d);
  CUresult r = d->cu->MemGetAllocationGranularity(&g, &p, CU_MEM_ALLOC_GRANULARITY_MINIMUM);
  grt__cuda_leave(d, tok);
  if (r != CUDA_SUCCESS) return grt__cuda_fail(d, 1, r, "cuMemGetAllocationGranularity");
  if (g == 0) { /* every range check divides by it */
    snprintf(d->dev->last_error, sizeof d->dev->last_error,
             "cuMemGetAllocationGranularity reported a granularity of 0: virtual memory is unusable on this driver");
    return GRT_ERR_UNSUPPORTED;
  }
  *granularity = g;
  return GRT_OK;
}

/* GRT_OK when both are multiples of the granularity. */
static grt_status check_aligned(grt__cuda_dev *d, uint64_t a, uint64_t b) {
  uint64_t g = 0;
  grt_status st = grt__cuda_vmm_granularity(d, &g);
  if (st) return st;
  return (a % g || b % g) ? GRT_ERR_INVALID_ARG : GRT_OK;
}

grt_status grt__cuda_reserve(void *impl, uint64_t size, grt_devptr *va) {
  grt__cuda_dev *d = impl;
  if (!d->cu->MemAddressReserve) return grt__cuda_fail_missing(d, 1, "cuMemAddressReserve");
  grt_status st = check_aligned(d, size, 0);
  if (st) return st;
  CUdeviceptr p = 0;
  int tok = grt__cuda_enter(d);
  CUresult r = d->cu->MemAddressReserve(&p, (size_t)size, 0, 0, 0);
  if (r == CUDA_SUCCESS && !grt__u64map_put(&d->reserved, p, (void *)(uintptr_t)size)) {
    d->cu->MemAddressFree(p, (size_t)size);
    grt__cuda_leave(d, tok);
    return GRT_ERR_NOMEM;
  }
  grt__cuda_leave(d, tok);
  if (r != CUDA_SUCCESS) return grt__cuda_fail(d, 1, r, "cuMemAddressReserve");
  *va = p;
  return GRT_OK;
}

/* The reservation holding [va, va+size) entirely, or 0. */
static grt_devptr reservation_of(const grt__cuda_dev *d, grt_devptr va, uint64_t size) {
  for (size_t i = 0; d->reserved.slots && i <= d->reserved.mask; i++) {
    uint64_t k = d->reserved.slots[i].key, n = (uint64_t)(uintptr_t)d->reserved.slots[i].value;
    if (k != UINT64_MAX && va >= k && va + size <= k + n && va + size > va) return k;
  }
  return 0;
}

/* Calls fn on each piece overlapping [va, va+size); stops when fn returns nonzero. */
static int each_piece(const grt__cuda_dev *d, grt_devptr va, uint64_t size, int (*fn)(void *, grt__vmm_piece *),
                      void *ctx) {
  for (size_t i = 0; d->pieces.slots && i <= d->pieces.mask; i++) {
    if (d->pieces.slots[i].key == UINT64_MAX) continue;
    grt__vmm_piece *p = d->pieces.slots[i].value;
    if (p->va < va + size && va < p->va + p->size && fn(ctx, p)) return 1;
  }
  return 0;
}

static int any_piece(void *ctx, grt__vmm_piece *p) {
  (void)ctx, (void)p;
  return 1;
}

grt_status grt__cuda_map(void *impl, grt_devptr va, uint64_t size) {
  grt__cuda_dev *d = impl;
  if (!d->cu->MemCreate || !d->cu->MemMap || !d->cu->MemSetAccess || !d->cu->MemUnmap || !d->cu->MemRelease)
    return grt__cuda_fail_missing(d, 1, "cuMemCreate/cuMemMap/cuMemSetAccess/cuMemUnmap/cuMemRelease");
  grt_status st = check_aligned(d, va, size);
  if (st) return st;
  if (!reservation_of(d, va, size) || each_piece(d, va, size, any_piece, NULL)) return GRT_ERR_INVALID_ARG;
  grt__vmm_piece *piece = malloc(sizeof *piece);
  if (!piece) return GRT_ERR_NOMEM;
  CUmemAllocationProp prop = alloc_prop(d);
  CUmemAccessDesc access = {{CU_MEM_LOCATION_TYPE_DEVICE, d->ordinal}, CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
  const char *what = "cuMemCreate";
  int tok = grt__cuda_enter(d), mapped = 0, host_oom = 0;
  CUmemGenericAllocationHandle h = 0;
  CUresult r = d->cu->MemCreate(&h, (size_t)size, &prop, 0);
  if (r == CUDA_SUCCESS) {
    what = "cuMemMap";
    r = d->cu->MemMap(va, (size_t)size, 0, h, 0);
    mapped = r == CUDA_SUCCESS;
    if (mapped) what = "cuMemSetAccess", r = d->cu->MemSetAccess(va, (size_t)size, &access, 1);
    *piece = (grt__vmm_piece){va, size, h, 0};
    if (r == CUDA_SUCCESS && !grt__u64map_put(&d->pieces, va, piece)) r = CUDA_ERROR_OUT_OF_MEMORY, host_oom = 1;
    if (r != CUDA_SUCCESS) {
      if (mapped) d->cu->MemUnmap(va, (size_t)size);
      d->cu->MemRelease(h);
    }
  }
  grt__cuda_leave(d, tok);
  if (r != CUDA_SUCCESS) {
    free(piece);
    return host_oom ? GRT_ERR_NOMEM : grt__cuda_fail(d, 1, r, what);
  }
  d->in_use += size;
  return GRT_OK;
}

typedef struct cover {
  grt_devptr va;
  uint64_t size, covered;
  int partial;
} cover;

static int add_cover(void *ctx, grt__vmm_piece *p) {
  cover *c = ctx;
  if (p->va < c->va || p->va + p->size > c->va + c->size) c->partial = 1;
  c->covered += p->size;
  return c->partial;
}

/* A release that fails after the unmap worked is retried alone next time
 * (unmapping again would fail: the piece would be stuck). */
static grt_status unmap_piece(grt__cuda_dev *d, grt__vmm_piece *p) {
  CUresult r = p->unmapped ? CUDA_SUCCESS : d->cu->MemUnmap(p->va, (size_t)p->size);
  if (r == CUDA_SUCCESS) {
    p->unmapped = 1;
    r = d->cu->MemRelease(p->handle);
  }
  if (r != CUDA_SUCCESS) return grt__cuda_fail(d, 1, r, "cuMemUnmap/cuMemRelease");
  grt__u64map_del(&d->pieces, p->va);
  d->in_use -= p->size;
  free(p);
  return GRT_OK;
}

grt_status grt__cuda_unmap(void *impl, grt_devptr va, uint64_t size) {
  grt__cuda_dev *d = impl;
  cover c = {va, size, 0, 0};
  if (va + size < va || each_piece(d, va, size, add_cover, &c) || c.covered != size) return GRT_ERR_INVALID_ARG;
  grt_status st = GRT_OK;
  int tok = grt__cuda_enter(d);
  /* Pieces are removed one at a time; restart the scan after each removal. */
  for (grt_devptr at = va; st == GRT_OK && at < va + size;) {
    grt__vmm_piece *p = grt__u64map_get(&d->pieces, at);
    if (!p) break;
    at = p->va + p->size;
    st = unmap_piece(d, p);
  }
  grt__cuda_leave(d, tok);
  return st;
}

grt_status grt__cuda_release(void *impl, grt_devptr va) {
  grt__cuda_dev *d = impl;
  uint64_t size = (uint64_t)(uintptr_t)grt__u64map_get(&d->reserved, va);
  if (!size) return GRT_ERR_UNKNOWN_POINTER;
  if (each_piece(d, va, size, any_piece, NULL)) return GRT_ERR_BUSY;
  int tok = grt__cuda_enter(d);
  CUresult r = d->cu->MemAddressFree(va, (size_t)size);
  grt__cuda_leave(d, tok);
  if (r != CUDA_SUCCESS) return grt__cuda_fail(d, 1, r, "cuMemAddressFree");
  grt__u64map_del(&d->reserved, va);
  return GRT_OK;
}

void grt__cuda_vmm_teardown(grt__cuda_dev *d) {
  int tok = grt__cuda_enter(d);
  while (d->pieces.count) {
    for (size_t i = 0; i <= d->pieces.mask; i++) {
      if (d->pieces.slots[i].key == UINT64_MAX) continue;
      grt__vmm_piece *p = d->pieces.slots[i].value;
      if (unmap_piece(d, p) != GRT_OK) { /* keep going: forget it */
        grt__u64map_del(&d->pieces, p->va);
        free(p);
      }
      break;
    }
  }
  while (d->reserved.count) {
    for (size_t i = 0; i <= d->reserved.mask; i++) {
      uint64_t k = d->reserved.slots[i].key;
      if (k == UINT64_MAX) continue;
      d->cu->MemAddressFree(k, (size_t)(uintptr_t)d->reserved.slots[i].value);
      grt__u64map_del(&d->reserved, k);
      break;
    }
  }
  grt__cuda_leave(d, tok);
}
