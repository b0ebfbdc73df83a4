/* cuda_impl.h — the CUDA backend's device state, shared by its files (internal).
 *
 * cuda_device.c: create, memory ops; cuda_vmm.c: reserve/map/unmap/release;
 * cuda_stream.c: streams, events, copies; cuda_gate.c: gates. All state below
 * is guarded by the owning grt_device's lock (the ops run under it; the stream
 * functions take it only to count children). Only compiled with cuda.h.
 */
#ifndef GRT_CUDA_IMPL_H
#define GRT_CUDA_IMPL_H

#include "base/u64map.h"
#include "device/cuda_driver.h"
#include "device/device_impl.h"
#include "gpurt/cuda.h"

/* A piece's progress through an unmap; a failed unmap leaves its pieces in the
 * map at these states and a retry carries on from them. */
enum { GRT__PIECE_MAPPED, GRT__PIECE_UNMAPPED /* handle still held */, GRT__PIECE_RELEASED };

typedef struct grt__vmm_piece {
  grt_devptr va;
  uint64_t size;
  CUmemGenericAllocationHandle handle;
  int state;    /* GRT__PIECE_*: how far an unmap of it has come */
} grt__vmm_piece;

typedef struct grt__cuda_dev {
  const grt__cu_api *cu;
  grt_device *dev; /* the owner (for its lock and last_error) */
  int ordinal;
  CUdevice cudev;
  CUcontext ctx; /* the primary context, retained */
  uint64_t total;
  uint64_t in_use;     /* bytes in live segments + mapped pieces */
  grt__u64map live;    /* segment start -> size */
  grt__u64map freed;   /* starts freed and not live again: double-free detection */
  grt__u64map reserved; /* reservation start -> size */
  grt__u64map pieces;  /* mapped piece start -> grt__vmm_piece* */
  uint64_t children;   /* live streams, events and gates */
} grt__cuda_dev;

extern const grt__device_ops grt__device_cuda_ops;

/* Makes the device's context current; returns a token for grt__cuda_leave. */
int grt__cuda_enter(grt__cuda_dev *d);
void grt__cuda_leave(grt__cuda_dev *d, int token);

/* The backend behind dev, or NULL when dev is not a CUDA device. */
grt__cuda_dev *grt__cuda_of(grt_device *dev);

/* Records a failure message in the owner's last_error (takes the lock unless locked). */
grt_status grt__cuda_fail(grt__cuda_dev *d, int locked, CUresult r, const char *what);
grt_status grt__cuda_fail_missing(grt__cuda_dev *d, int locked, const char *symbol);

/* Children accounting (takes the device lock). */
void grt__cuda_child(grt__cuda_dev *d, int delta);

/* The raw handle and backend of a stream (cuda_stream.c, for cuda_gate.c). */
CUstream grt__cuda_stream_raw(grt_cuda_stream *s, grt__cuda_dev **d);

/* The VMM ops (cuda_vmm.c). */
grt_status grt__cuda_vmm_granularity(void *impl, uint64_t *granularity);
grt_status grt__cuda_reserve(void *impl, uint64_t size, grt_devptr *va);
grt_status grt__cuda_map(void *impl, grt_devptr va, uint64_t size);
grt_status grt__cuda_unmap(void *impl, grt_devptr va, uint64_t size);
grt_status grt__cuda_release(void *impl, grt_devptr va);
/* Unmaps every piece and frees every reservation (device destroy). */
void grt__cuda_vmm_teardown(grt__cuda_dev *d);

#endif
