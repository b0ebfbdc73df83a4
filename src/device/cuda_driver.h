/* cuda_driver.h — the CUDA driver API, loaded at run time (internal).
 *
 * One table of function pointers per process, filled once (pthread_once) from
 * libcuda.so.1 (or $GRT_CUDA_LIBRARY) through cuGetProcAddress, asking for the
 * ABI of the cuda.h we compiled against (CUDA_VERSION, legacy default stream).
 * The table is written only inside the once-routine and read-only afterwards,
 * so it is process-wide constant state, not mutable state in the API sense.
 * Required entry points missing -> the load fails with GRT_ERR_UNSUPPORTED
 * naming the symbol; optional ones stay NULL and the call that needs one
 * returns GRT_ERR_UNSUPPORTED naming it (an old driver keeps what it can do).
 *
 * Only compiled with cuda.h (GRT_HAVE_CUDA_H).
 */
#ifndef GRT_CUDA_DRIVER_H
#define GRT_CUDA_DRIVER_H

#include <cuda.h>
#include <stddef.h>

#include "gpurt/base.h"

/* X(field, symbol, required, return type, parameters) */
#define GRT__CU_FUNCS(X)                                                                                     \
  X(GetErrorName, "cuGetErrorName", 1, CUresult, (CUresult, const char **))                                 \
  X(GetErrorString, "cuGetErrorString", 1, CUresult, (CUresult, const char **))                             \
  X(Init, "cuInit", 1, CUresult, (unsigned int))                                                             \
  X(DriverGetVersion, "cuDriverGetVersion", 1, CUresult, (int *))                                           \
  X(DeviceGetCount, "cuDeviceGetCount", 1, CUresult, (int *))                                               \
  X(DeviceGet, "cuDeviceGet", 1, CUresult, (CUdevice *, int))                                               \
  X(DeviceGetName, "cuDeviceGetName", 1, CUresult, (char *, int, CUdevice))                                 \
  X(DeviceTotalMem, "cuDeviceTotalMem", 1, CUresult, (size_t *, CUdevice))                                  \
  X(DevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain", 1, CUresult, (CUcontext *, CUdevice))               \
  X(DevicePrimaryCtxRelease, "cuDevicePrimaryCtxRelease", 1, CUresult, (CUdevice))                          \
  X(CtxGetCurrent, "cuCtxGetCurrent", 1, CUresult, (CUcontext *))                                           \
  X(CtxPushCurrent, "cuCtxPushCurrent", 1, CUresult, (CUcontext))                                           \
  X(CtxPopCurrent, "cuCtxPopCurrent", 1, CUresult, (CUcontext *))                                           \
  X(CtxSynchronize, "cuCtxSynchronize", 1, CUresult, (void))                                                \
  X(MemAlloc, "cuMemAlloc", 1, CUresult, (CUdeviceptr *, size_t))                                           \
  X(MemFree, "cuMemFree", 1, CUresult, (CUdeviceptr))                                                       \
  X(MemGetInfo, "cuMemGetInfo", 1, CUresult, (size_t *, size_t *))                                          \
  X(StreamCreateWithPriority, "cuStreamCreateWithPriority", 0, CUresult, (CUstream *, unsigned int, int))   \
  X(StreamDestroy, "cuStreamDestroy", 0, CUresult, (CUstream))                                              \
  X(StreamQuery, "cuStreamQuery", 0, CUresult, (CUstream))                                                  \
  X(StreamSynchronize, "cuStreamSynchronize", 0, CUresult, (CUstream))                                      \
  X(StreamWaitEvent, "cuStreamWaitEvent", 0, CUresult, (CUstream, CUevent, unsigned int))                   \
  X(StreamWaitValue32, "cuStreamWaitValue32", 0, CUresult, (CUstream, CUdeviceptr, cuuint32_t, unsigned int)) \
  X(LaunchHostFunc, "cuLaunchHostFunc", 0, CUresult, (CUstream, CUhostFn, void *))                          \
  X(StreamBeginCapture, "cuStreamBeginCapture", 0, CUresult, (CUstream, CUstreamCaptureMode))               \
  X(StreamEndCapture, "cuStreamEndCapture", 0, CUresult, (CUstream, CUgraph *))                             \
  X(StreamIsCapturing, "cuStreamIsCapturing", 0, CUresult, (CUstream, CUstreamCaptureStatus *))             \
  X(GraphDestroy, "cuGraphDestroy", 0, CUresult, (CUgraph))                                                 \
  X(EventCreate, "cuEventCreate", 0, CUresult, (CUevent *, unsigned int))                                   \
  X(EventDestroy, "cuEventDestroy", 0, CUresult, (CUevent))                                                 \
  X(EventRecord, "cuEventRecord", 0, CUresult, (CUevent, CUstream))                                         \
  X(EventQuery, "cuEventQuery", 0, CUresult, (CUevent))                                                     \
  X(EventSynchronize, "cuEventSynchronize", 0, CUresult, (CUevent))                                         \
  X(EventElapsedTime, "cuEventElapsedTime", 0, CUresult, (float *, CUevent, CUevent))                       \
  X(MemcpyHtoDAsync, "cuMemcpyHtoDAsync", 0, CUresult, (CUdeviceptr, const void *, size_t, CUstream))       \
  X(MemcpyDtoHAsync, "cuMemcpyDtoHAsync", 0, CUresult, (void *, CUdeviceptr, size_t, CUstream))             \
  X(MemcpyDtoDAsync, "cuMemcpyDtoDAsync", 0, CUresult, (CUdeviceptr, CUdeviceptr, size_t, CUstream))        \
  X(MemsetD8Async, "cuMemsetD8Async", 0, CUresult, (CUdeviceptr, unsigned char, size_t, CUstream))          \
  X(MemHostAlloc, "cuMemHostAlloc", 0, CUresult, (void **, size_t, unsigned int))                           \
  X(MemFreeHost, "cuMemFreeHost", 0, CUresult, (void *))                                                    \
  X(MemHostGetDevicePointer, "cuMemHostGetDevicePointer", 0, CUresult, (CUdeviceptr *, void *, unsigned int)) \
  X(MemGetAllocationGranularity, "cuMemGetAllocationGranularity", 0, CUresult,                              \
    (size_t *, const CUmemAllocationProp *, CUmemAllocationGranularity_flags))                              \
  X(MemAddressReserve, "cuMemAddressReserve", 0, CUresult,                                                  \
    (CUdeviceptr *, size_t, size_t, CUdeviceptr, unsigned long long))                                       \
  X(MemAddressFree, "cuMemAddressFree", 0, CUresult, (CUdeviceptr, size_t))                                 \
  X(MemCreate, "cuMemCreate", 0, CUresult,                                                                  \
    (CUmemGenericAllocationHandle *, size_t, const CUmemAllocationProp *, unsigned long long))              \
  X(MemRelease, "cuMemRelease", 0, CUresult, (CUmemGenericAllocationHandle))                                \
  X(MemMap, "cuMemMap", 0, CUresult,                                                                        \
    (CUdeviceptr, size_t, size_t, CUmemGenericAllocationHandle, unsigned long long))                        \
  X(MemUnmap, "cuMemUnmap", 0, CUresult, (CUdeviceptr, size_t))                                             \
  X(MemSetAccess, "cuMemSetAccess", 0, CUresult, (CUdeviceptr, size_t, const CUmemAccessDesc *, size_t))

typedef struct grt__cu_api {
#define GRT__CU_FIELD(field, sym, req, ret, params) ret(*field) params;
  GRT__CU_FUNCS(GRT__CU_FIELD)
#undef GRT__CU_FIELD
  int driver_version; /* cuDriverGetVersion, e.g. 13000 */
} grt__cu_api;

/* Loads the driver once per process. On success *api points at the table; on
 * failure msg says why (the same text on every call). */
grt_status grt__cu_load(const grt__cu_api **api, char *msg, size_t msg_size);

/* Maps a CUresult to a grt_status (grt_status_from_cuda) and, for errors, writes "what: CUDA_ERROR_X
 * (text)" into msg (if non-NULL). */
grt_status grt__cu_status(const grt__cu_api *cu, CUresult r, const char *what, char *msg, size_t msg_size);

/* GRT_ERR_UNSUPPORTED with "the CUDA driver lacks <symbol>" in msg. */
grt_status grt__cu_missing(const char *symbol, char *msg, size_t msg_size);

#endif
