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
  grt__u64map_iter it = grt__u64map_begin(&d->reserved);
  uint64_t k;
  void *v;
  while (grt__u64map_next(&d->reserved, &it, &k, &v)) {
    uint64_t n = (uint64_t)(uintptr_t)v;
    if (va >= k && va + size <= k + n && va + size > va) return k;
  }
  return 0;
}

/* Calls fn on each piece overlapping [va, va+size); stops when fn returns nonzero. */
static int each_piece(const grt__cuda_dev *d, grt_devptr va, uint64_t size, int (*fn)(void *, grt__vmm_piece *),
                      void *ctx) {
  grt__u64map_iter it = grt__u64map_begin(&d->pieces);
  void *v;
  while (grt__u64map_next(&d->pieces, &it, NULL, &v)) {
    grt__vmm_piece *p = v;
    if (p->va < va + size && va < p->va + p->size && fn(ctx, p)) return 1;
  }
  return 0;
}

static int any_piece(void *ctx, grt__vmm_piece *p) {
  (void)ctx, (void)p;
  return 1;
}

/* cuMemMap of handle h at [va, va+size) and read-write access for this
 * device; on failure nothing stays mapped and *what names the failing call. */
static CUresult map_handle(grt__cuda_dev *d, grt_devptr va, uint64_t size, CUmemGenericAllocationHandle h,
                           const char **what) {
  CUmemAccessDesc access = {{CU_MEM_LOCATION_TYPE_DEVICE, d->ordinal}, CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
  *what = "cuMemMap";
  CUresult r = d->cu->MemMap(va, (size_t)size, 0, h, 0);
  if (r != CUDA_SUCCESS) return r;
  *what = "cuMemSetAccess";
  if ((r = d->cu->MemSetAccess(va, (size_t)size, &access, 1)) != CUDA_SUCCESS) d->cu->MemUnmap(va, (size_t)size);
  return r;
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
  const char *what = "cuMemCreate";
  int tok = grt__cuda_enter(d), host_oom = 0;
  CUmemGenericAllocationHandle h = 0;
  CUresult r = d->cu->MemCreate(&h, (size_t)size, &prop, 0);
  if (r == CUDA_SUCCESS) {
    r = map_handle(d, va, size, h, &what);
    *piece = (grt__vmm_piece){va, size, h, GRT__PIECE_MAPPED};
    if (r == CUDA_SUCCESS && !grt__u64map_put(&d->pieces, va, piece)) {
      d->cu->MemUnmap(va, (size_t)size);
      r = CUDA_ERROR_OUT_OF_MEMORY, host_oom = 1;
    }
    if (r != CUDA_SUCCESS) d->cu->MemRelease(h);
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
  size_t pieces;
  int partial;
} cover;

static int add_cover(void *ctx, grt__vmm_piece *p) {
  cover *c = ctx;
  if (p->va < c->va || p->va + p->size > c->va + c->size) c->partial = 1;
  c->covered += p->size;
  c->pieces++;
  return c->partial;
}

/* Teardown only: unmaps and releases whatever is left of a piece and forgets
 * it whatever the driver says. */
static void drop_piece(grt__cuda_dev *d, grt__vmm_piece *p) {
  if (p->state == GRT__PIECE_MAPPED) d->cu->MemUnmap(p->va, (size_t)p->size);
  if (p->state != GRT__PIECE_RELEASED) d->cu->MemRelease(p->handle);
  grt__u64map_del(&d->pieces, p->va);
  d->in_use -= p->size;
  free(p);
}

/* Unmaps [va, va+size) all or nothing, in three passes over its pieces (in
 * address order): cuMemUnmap each mapped one — a failure maps the ones this
 * call unmapped again (their handles are still held), so the range stays
 * usable as the caller believes; then cuMemRelease each — a failure keeps
 * every piece in the map, released or not, so a retry of the same range finds
 * them all and finishes; then forget them. */
static grt_status unmap_pieces(grt__cuda_dev *d, grt__vmm_piece **v, unsigned char *was_mapped, size_t n) {
  CUresult r = CUDA_SUCCESS;
  size_t k = 0;
  for (; k < n && r == CUDA_SUCCESS; k++) {
    was_mapped[k] = v[k]->state == GRT__PIECE_MAPPED;
    if (was_mapped[k] && (r = d->cu->MemUnmap(v[k]->va, (size_t)v[k]->size)) == CUDA_SUCCESS)
      v[k]->state = GRT__PIECE_UNMAPPED;
  }
  if (r != CUDA_SUCCESS) {
    const char *unused;
    for (size_t j = 0; j + 1 < k; j++) /* piece k - 1 failed: it is still mapped */
      if (was_mapped[j] && map_handle(d, v[j]->va, v[j]->size, v[j]->handle, &unused) == CUDA_SUCCESS)
        v[j]->state = GRT__PIECE_MAPPED; /* else it stays UNMAPPED: a retry releases it */
    return grt__cuda_fail(d, 1, r, "cuMemUnmap");
  }
  for (k = 0; k < n; k++) {
    if (v[k]->state == GRT__PIECE_RELEASED) continue;
    if ((r = d->cu->MemRelease(v[k]->handle)) != CUDA_SUCCESS) return grt__cuda_fail(d, 1, r, "cuMemRelease");
    v[k]->state = GRT__PIECE_RELEASED;
  }
  for (k = 0; k < n; k++) {
    grt__u64map_del(&d->pieces, v[k]->va);
    d->in_use -= v[k]->size;
    free(v[k]);
  }
  return GRT_OK;
}

grt_status grt__cuda_unmap(void *impl, grt_devptr va, uint64_t size) {
  grt__cuda_dev *d = impl;
  cover c = {va, size, 0, 0, 0};
  if (va + size < va || each_piece(d, va, size, add_cover, &c) || c.covered != size) return GRT_ERR_INVALID_ARG;
  grt__vmm_piece **v = malloc(c.pieces * (sizeof *v + 1));
  if (!v) return GRT_ERR_NOMEM;
  unsigned char *was_mapped = (unsigned char *)(v + c.pieces);
  size_t n = 0;
  for (grt_devptr at = va; at < va + size; at = v[n - 1]->va + v[n - 1]->size)
    v[n++] = grt__u64map_get(&d->pieces, at); /* the pieces tile the range (the cover says so) */
  int tok = grt__cuda_enter(d);
  grt_status st = unmap_pieces(d, v, was_mapped, n);
  grt__cuda_leave(d, tok);
  free(v);
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
  void *v;
  while (grt__u64map_first(&d->pieces, NULL, &v)) drop_piece(d, v); /* each drop erases its entry */
  uint64_t k;
  while (grt__u64map_first(&d->reserved, &k, &v)) {
    d->cu->MemAddressFree(k, (size_t)(uintptr_t)v);
    grt__u64map_del(&d->reserved, k);
  }
  grt__cuda_leave(d, tok);
}
