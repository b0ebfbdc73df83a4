/* fake_libcuda.c — a tiny stand-in for libcuda.so.1 so the CUDA backend's
 * host-side logic runs in CI without a GPU (tests point GRT_CUDA_LIBRARY here).
 *
 * It models an *old* driver: cuGetProcAddress_v2 knows only the core entry
 * points (init, device, context, cuMemAlloc/cuMemFree/cuMemGetInfo, error
 * strings); streams, events and VMM are missing, so gpurt must report them as
 * GRT_ERR_UNSUPPORTED by name. Memory: 64 MiB handed out by a bump pointer
 * with a table of live allocations; more than that -> CUDA_ERROR_OUT_OF_MEMORY.
 * Test-only code: global state and no locking beyond one mutex.
 */
#include <cuda.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#define FAKE_CAPACITY ((size_t)64 << 20)
#define FAKE_MAX_LIVE 1024

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct { CUdeviceptr ptr; size_t size; } live[FAKE_MAX_LIVE];
static size_t used;
static CUdeviceptr next_ptr = 0x7a0000000000ULL;
static _Thread_local CUcontext current;
static CUcontext const primary = (CUcontext)0x1234;

static CUresult f_GetErrorName(CUresult r, const char **s) {
  *s = r == CUDA_ERROR_OUT_OF_MEMORY ? "CUDA_ERROR_OUT_OF_MEMORY"
       : r == CUDA_ERROR_INVALID_VALUE ? "CUDA_ERROR_INVALID_VALUE" : "CUDA_ERROR_UNKNOWN";
  return CUDA_SUCCESS;
}
static CUresult f_GetErrorString(CUresult r, const char **s) {
  *s = r == CUDA_ERROR_OUT_OF_MEMORY ? "out of memory" : "fake error";
  return CUDA_SUCCESS;
}
static CUresult f_Init(unsigned int flags) { return flags ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS; }
static CUresult f_DriverGetVersion(int *v) { *v = 12000; return CUDA_SUCCESS; }
static CUresult f_DeviceGetCount(int *n) { *n = 1; return CUDA_SUCCESS; }
static CUresult f_DeviceGet(CUdevice *d, int ordinal) {
  if (ordinal != 0) return CUDA_ERROR_INVALID_DEVICE;
  *d = 0;
  return CUDA_SUCCESS;
}
static CUresult f_DeviceGetName(char *buf, int n, CUdevice d) {
  (void)d;
  snprintf(buf, (size_t)n, "Fake GPU");
  return CUDA_SUCCESS;
}
static CUresult f_DeviceTotalMem(size_t *bytes, CUdevice d) { (void)d; *bytes = FAKE_CAPACITY; return CUDA_SUCCESS; }
static CUresult f_PrimaryCtxRetain(CUcontext *c, CUdevice d) { (void)d; *c = primary; return CUDA_SUCCESS; }
static CUresult f_PrimaryCtxRelease(CUdevice d) { (void)d; return CUDA_SUCCESS; }
static CUresult f_CtxGetCurrent(CUcontext *c) { *c = current; return CUDA_SUCCESS; }
static CUresult f_CtxPushCurrent(CUcontext c) { current = c; return CUDA_SUCCESS; }
static CUresult f_CtxPopCurrent(CUcontext *c) { *c = current; current = NULL; return CUDA_SUCCESS; }
static CUresult f_CtxSynchronize(void) { return current == primary ? CUDA_SUCCESS : CUDA_ERROR_INVALID_CONTEXT; }

static CUresult f_MemAlloc(CUdeviceptr *p, size_t size) {
  if (current != primary) return CUDA_ERROR_INVALID_CONTEXT;
  pthread_mutex_lock(&lock);
  CUresult r = CUDA_ERROR_OUT_OF_MEMORY;
  for (size_t i = 0; size <= FAKE_CAPACITY - used && i < FAKE_MAX_LIVE; i++) {
    if (live[i].ptr) continue;
    live[i].ptr = *p = next_ptr;
    live[i].size = size;
    next_ptr += (size + 0xfffff) & ~(CUdeviceptr)0xfffff;
    used += size;
    r = CUDA_SUCCESS;
    break;
  }
  pthread_mutex_unlock(&lock);
  return r;
}
static CUresult f_MemFree(CUdeviceptr p) {
  pthread_mutex_lock(&lock);
  CUresult r = CUDA_ERROR_INVALID_VALUE;
  for (size_t i = 0; i < FAKE_MAX_LIVE; i++) {
    if (live[i].ptr != p || !p) continue;
    used -= live[i].size;
    live[i].ptr = 0;
    r = CUDA_SUCCESS;
    break;
  }
  pthread_mutex_unlock(&lock);
  return r;
}
static CUresult f_MemGetInfo(size_t *free_bytes, size_t *total) {
  pthread_mutex_lock(&lock);
  *free_bytes = FAKE_CAPACITY - used;
  *total = FAKE_CAPACITY;
  pthread_mutex_unlock(&lock);
  return CUDA_SUCCESS;
}

static const struct { const char *name; void (*fn)(void); } table[] = {
#define E(sym, f) {sym, (void (*)(void))f}
    E("cuGetErrorName", f_GetErrorName), E("cuGetErrorString", f_GetErrorString), E("cuInit", f_Init),
    E("cuDriverGetVersion", f_DriverGetVersion), E("cuDeviceGetCount", f_DeviceGetCount),
    E("cuDeviceGet", f_DeviceGet), E("cuDeviceGetName", f_DeviceGetName), E("cuDeviceTotalMem", f_DeviceTotalMem),
    E("cuDevicePrimaryCtxRetain", f_PrimaryCtxRetain), E("cuDevicePrimaryCtxRelease", f_PrimaryCtxRelease),
    E("cuCtxGetCurrent", f_CtxGetCurrent), E("cuCtxPushCurrent", f_CtxPushCurrent),
    E("cuCtxPopCurrent", f_CtxPopCurrent), E("cuCtxSynchronize", f_CtxSynchronize), E("cuMemAlloc", f_MemAlloc),
    E("cuMemFree", f_MemFree), E("cuMemGetInfo", f_MemGetInfo),
#undef E
};

/* Exported under the real name: the one symbol gpurt dlsym's. */
__attribute__((visibility("default"))) CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int version,
                                                                     cuuint64_t flags,
                                                                     CUdriverProcAddressQueryResult *status) {
  (void)version, (void)flags;
  for (size_t i = 0; i < sizeof table / sizeof table[0]; i++) {
    if (strcmp(table[i].name, symbol) == 0) {
      *(void (**)(void))pfn = table[i].fn;
      if (status) *status = CU_GET_PROC_ADDRESS_SUCCESS;
      return CUDA_SUCCESS;
    }
  }
  *pfn = NULL;
  if (status) *status = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
  return CUDA_ERROR_NOT_FOUND;
}
