/* fake_libcuda.c — a stand-in for libcuda.so.1 so the CUDA backend's
 * host-side logic runs in CI without a GPU (tests point GRT_CUDA_LIBRARY here).
 *
 * Built several ways from the same sources (tests/CMakeLists.txt):
 *  - grt_fake_cuda: an *old* driver. cuGetProcAddress_v2 knows only the core
 *    entry points (init, device, context, cuMemAlloc/cuMemFree/cuMemGetInfo,
 *    error strings); streams, events and VMM are missing, so gpurt must report
 *    them as GRT_ERR_UNSUPPORTED by name.
 *  - grt_fake_cuda_modern (FAKE_MODERN): adds streams, events, host functions,
 *    copies, pinned host memory, stream memory operations and VMM
 *    (fake_modern.c).
 *  - grt_fake_cuda_v1 (FAKE_LOOKUP=1): the old driver found through the CUDA
 *    11 cuGetProcAddress (no symbol status); grt_fake_cuda_plain
 *    (FAKE_LOOKUP=0): no cuGetProcAddress at all, only exported symbols.
 *
 * Device memory is real host memory (so copies and fills can be checked),
 * capped at FAKE_CAPACITY (64 MiB) across cuMemAlloc and cuMemCreate; more ->
 * CUDA_ERROR_OUT_OF_MEMORY. Entry points check their arguments and that a
 * primary context is current where the real driver needs one, so a missing
 * push shows up as CUDA_ERROR_INVALID_CONTEXT. Every entry point counts its
 * calls and can be made to fail (fake_cuda_control.h).
 * Test-only code: global state, one lock.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fake_internal.h"

#ifndef FAKE_LOOKUP
#define FAKE_LOOKUP 2 /* 2: cuGetProcAddress_v2, 1: cuGetProcAddress, 0: exported symbols only */
#endif
#ifdef FAKE_MODERN
#define FAKE_DRIVER_VERSION 12080
#else
#define FAKE_DRIVER_VERSION 12000
#endif
#define FAKE_MAX_LIVE 1024

pthread_mutex_t fake_lock = PTHREAD_MUTEX_INITIALIZER;

/* ---- call counts and fault injection (own lock: entry points call in unlocked) ---- */

static pthread_mutex_t ctl_lock = PTHREAD_MUTEX_INITIALIZER;
static struct {
  const char *name;
  unsigned long calls;
} counts[128];
static struct {
  char name[64];
  int countdown, result;
} faults[32];

static unsigned long *count_of(const char *name, int create) {
  for (size_t i = 0; i < sizeof counts / sizeof counts[0]; i++) {
    if (counts[i].name && strcmp(counts[i].name, name) == 0) return &counts[i].calls;
    if (!counts[i].name) {
      if (!create) return NULL;
      counts[i].name = name; /* the entry points pass string literals */
      return &counts[i].calls;
    }
  }
  return NULL;
}

CUresult fake_enter(const char *name) {
  CUresult r = CUDA_SUCCESS;
  pthread_mutex_lock(&ctl_lock);
  unsigned long *n = count_of(name, 1);
  if (n) ++*n;
  for (size_t i = 0; i < sizeof faults / sizeof faults[0]; i++) {
    if (faults[i].countdown <= 0 || strcmp(faults[i].name, name) != 0) continue;
    if (--faults[i].countdown == 0 && r == CUDA_SUCCESS) r = (CUresult)faults[i].result;
  }
  pthread_mutex_unlock(&ctl_lock);
  return r;
}

FAKE_CUDA_API int fake_cuda_fail(const char *name, int nth, int result) {
  int rc = nth > 0 ? -1 : 0;
  pthread_mutex_lock(&ctl_lock);
  for (size_t i = 0; i < sizeof faults / sizeof faults[0]; i++) {
    if (nth <= 0) {
      if (strcmp(faults[i].name, name) == 0) faults[i].countdown = 0;
    } else if (faults[i].countdown <= 0) {
      snprintf(faults[i].name, sizeof faults[i].name, "%s", name);
      faults[i].countdown = nth;
      faults[i].result = result;
      rc = 0;
      break;
    }
  }
  pthread_mutex_unlock(&ctl_lock);
  return rc;
}

FAKE_CUDA_API void fake_cuda_clear_faults(void) {
  pthread_mutex_lock(&ctl_lock);
  for (size_t i = 0; i < sizeof faults / sizeof faults[0]; i++) faults[i].countdown = 0;
  pthread_mutex_unlock(&ctl_lock);
}

FAKE_CUDA_API unsigned long fake_cuda_calls(const char *name) {
  pthread_mutex_lock(&ctl_lock);
  unsigned long *n = count_of(name, 0);
  unsigned long v = n ? *n : 0;
  pthread_mutex_unlock(&ctl_lock);
  return v;
}

/* ---- load-time knobs (environment) ---- */

static char hide_list[1024], old_list[1024];

#if FAKE_LOOKUP
static int listed(const char *list, const char *symbol) {
  size_t n = strlen(symbol);
  for (const char *p = list; (p = strstr(p, symbol)) != NULL; p += n)
    if ((p == list || p[-1] == ',') && (p[n] == ',' || p[n] == '\0')) return 1;
  return 0;
}
#endif

__attribute__((constructor)) static void read_environment(void) {
  const char *v;
  if ((v = getenv("FAKE_CUDA_HIDE")) != NULL) snprintf(hide_list, sizeof hide_list, "%s", v);
  if ((v = getenv("FAKE_CUDA_OLD")) != NULL) snprintf(old_list, sizeof old_list, "%s", v);
  if ((v = getenv("FAKE_CUDA_FAIL")) != NULL) {
    char buf[1024];
    snprintf(buf, sizeof buf, "%s", v);
    char *save = NULL;
    for (char *item = strtok_r(buf, ",", &save); item; item = strtok_r(NULL, ",", &save)) {
      char name[64];
      int nth, result;
      if (sscanf(item, "%63[^:]:%d:%d", name, &nth, &result) == 3) fake_cuda_fail(name, nth, result);
    }
  }
}

/* ---- errors ---- */

static const struct {
  CUresult code;
  const char *name, *text;
} errors[] = {
    {CUDA_SUCCESS, "CUDA_SUCCESS", "no error"},
    {CUDA_ERROR_INVALID_VALUE, "CUDA_ERROR_INVALID_VALUE", "invalid argument"},
    {CUDA_ERROR_OUT_OF_MEMORY, "CUDA_ERROR_OUT_OF_MEMORY", "out of memory"},
    {CUDA_ERROR_NOT_INITIALIZED, "CUDA_ERROR_NOT_INITIALIZED", "initialization error"},
    {CUDA_ERROR_STUB_LIBRARY, "CUDA_ERROR_STUB_LIBRARY", "CUDA driver is a stub library"},
    {CUDA_ERROR_NO_DEVICE, "CUDA_ERROR_NO_DEVICE", "no CUDA-capable device is detected"},
    {CUDA_ERROR_INVALID_DEVICE, "CUDA_ERROR_INVALID_DEVICE", "invalid device ordinal"},
    {CUDA_ERROR_INVALID_CONTEXT, "CUDA_ERROR_INVALID_CONTEXT", "invalid device context"},
    {CUDA_ERROR_INVALID_HANDLE, "CUDA_ERROR_INVALID_HANDLE", "invalid resource handle"},
    {CUDA_ERROR_NOT_FOUND, "CUDA_ERROR_NOT_FOUND", "named symbol not found"},
    {CUDA_ERROR_ILLEGAL_STATE, "CUDA_ERROR_ILLEGAL_STATE", "the operation cannot be performed in the present state"},
    {CUDA_ERROR_NOT_READY, "CUDA_ERROR_NOT_READY", "device not ready"},
    {CUDA_ERROR_NOT_PERMITTED, "CUDA_ERROR_NOT_PERMITTED", "operation not permitted"},
    {CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED", "operation not permitted when stream is capturing"},
    {CUDA_ERROR_STREAM_CAPTURE_INVALIDATED, "CUDA_ERROR_STREAM_CAPTURE_INVALIDATED", "operation failed due to a previous error during capture"},
    {CUDA_ERROR_STREAM_CAPTURE_MERGE, "CUDA_ERROR_STREAM_CAPTURE_MERGE", "operation would result in a merge of separate capture sequences"},
    {CUDA_ERROR_STREAM_CAPTURE_UNMATCHED, "CUDA_ERROR_STREAM_CAPTURE_UNMATCHED", "capture was not ended in the same stream as it began"},
    {CUDA_ERROR_STREAM_CAPTURE_UNJOINED, "CUDA_ERROR_STREAM_CAPTURE_UNJOINED", "capturing stream has unjoined work"},
    {CUDA_ERROR_STREAM_CAPTURE_ISOLATION, "CUDA_ERROR_STREAM_CAPTURE_ISOLATION", "dependency created on uncaptured work in another stream"},
    {CUDA_ERROR_STREAM_CAPTURE_IMPLICIT, "CUDA_ERROR_STREAM_CAPTURE_IMPLICIT", "operation would make the legacy stream depend on a capturing blocking stream"},
    {CUDA_ERROR_CAPTURED_EVENT, "CUDA_ERROR_CAPTURED_EVENT", "operation not permitted on an event last recorded in a capturing stream"},
    {CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD, "CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD", "attempt to terminate a thread-local capture sequence from another thread"},
    {CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE, "CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE", "the graph update was not performed because it included changes which violated constraints specific to instantiated graph update"},
    {CUDA_ERROR_ILLEGAL_ADDRESS, "CUDA_ERROR_ILLEGAL_ADDRESS", "an illegal memory access was encountered"},
    {CUDA_ERROR_LAUNCH_FAILED, "CUDA_ERROR_LAUNCH_FAILED", "unspecified launch failure"},
    {CUDA_ERROR_NOT_SUPPORTED, "CUDA_ERROR_NOT_SUPPORTED", "operation not supported"},
    {CUDA_ERROR_SYSTEM_DRIVER_MISMATCH, "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH", "system has unsupported display driver / cuda driver combination"},
    {CUDA_ERROR_UNKNOWN, "CUDA_ERROR_UNKNOWN", "unknown error"},
};

/* As the real driver: an unknown code is CUDA_ERROR_INVALID_VALUE with *s = NULL. */
static CUresult error_field(CUresult r, const char **s, int text) {
  *s = NULL;
  for (size_t i = 0; i < sizeof errors / sizeof errors[0]; i++)
    if (errors[i].code == r) return *s = text ? errors[i].text : errors[i].name, CUDA_SUCCESS;
  return CUDA_ERROR_INVALID_VALUE;
}
static CUresult f_GetErrorName(CUresult r, const char **s) {
  FAKE_CALL("cuGetErrorName");
  return s ? error_field(r, s, 0) : CUDA_ERROR_INVALID_VALUE;
}
static CUresult f_GetErrorString(CUresult r, const char **s) {
  FAKE_CALL("cuGetErrorString");
  return s ? error_field(r, s, 1) : CUDA_ERROR_INVALID_VALUE;
}

/* ---- init, devices, contexts ---- */

static int initialized, device_count = 1;
static char ctx_tag[FAKE_MAX_DEVICES]; /* primary context of device i: &ctx_tag[i] */
static int retains[FAKE_MAX_DEVICES];
static _Thread_local CUcontext ctx_stack[16];
static _Thread_local int ctx_depth;

static int primary_index(CUcontext c) {
  for (int i = 0; i < FAKE_MAX_DEVICES; i++)
    if (c == (CUcontext)(void *)&ctx_tag[i]) return i;
  return -1;
}

/* Atomic rather than locked: the VMM calls ask while holding fake_lock. */
int fake_device_count(void) { return __atomic_load_n(&device_count, __ATOMIC_SEQ_CST); }

FAKE_CUDA_API void fake_cuda_set_device_count(int n) {
  __atomic_store_n(&device_count, n < 0 ? 0 : n > FAKE_MAX_DEVICES ? FAKE_MAX_DEVICES : n, __ATOMIC_SEQ_CST);
}

int fake_ctx_ok(void) {
  if (ctx_depth == 0) return 0;
  int i = primary_index(ctx_stack[ctx_depth - 1]);
  pthread_mutex_lock(&fake_lock);
  int ok = i >= 0 && retains[i] > 0;
  pthread_mutex_unlock(&fake_lock);
  return ok;
}

static CUresult f_Init(unsigned int flags) {
  FAKE_CALL("cuInit");
  if (flags) return CUDA_ERROR_INVALID_VALUE;
  initialized = 1;
  return CUDA_SUCCESS;
}
static CUresult f_DriverGetVersion(int *v) {
  FAKE_CALL("cuDriverGetVersion");
  if (!v) return CUDA_ERROR_INVALID_VALUE;
  *v = FAKE_DRIVER_VERSION;
  return CUDA_SUCCESS;
}
static CUresult f_DeviceGetCount(int *n) {
  FAKE_CALL("cuDeviceGetCount");
  if (!initialized) return CUDA_ERROR_NOT_INITIALIZED;
  if (!n) return CUDA_ERROR_INVALID_VALUE;
  *n = fake_device_count();
  return CUDA_SUCCESS;
}
static CUresult f_DeviceGet(CUdevice *d, int ordinal) {
  FAKE_CALL("cuDeviceGet");
  if (ordinal < 0 || ordinal >= fake_device_count()) return CUDA_ERROR_INVALID_DEVICE;
  *d = ordinal;
  return CUDA_SUCCESS;
}
static int valid_device(CUdevice d) { return d >= 0 && d < fake_device_count(); }
static CUresult f_DeviceGetName(char *buf, int n, CUdevice d) {
  FAKE_CALL("cuDeviceGetName");
  if (!valid_device(d)) return CUDA_ERROR_INVALID_DEVICE;
  if (!buf || n <= 0) return CUDA_ERROR_INVALID_VALUE;
  if (d == 0)
    snprintf(buf, (size_t)n, "Fake GPU");
  else
    snprintf(buf, (size_t)n, "Fake GPU #%d", d);
  return CUDA_SUCCESS;
}
static CUresult f_DeviceTotalMem(size_t *bytes, CUdevice d) {
  FAKE_CALL("cuDeviceTotalMem");
  if (!valid_device(d)) return CUDA_ERROR_INVALID_DEVICE;
  *bytes = FAKE_CAPACITY;
  return CUDA_SUCCESS;
}
static CUresult f_PrimaryCtxRetain(CUcontext *c, CUdevice d) {
  FAKE_CALL("cuDevicePrimaryCtxRetain");
  if (!valid_device(d)) return CUDA_ERROR_INVALID_DEVICE;
  pthread_mutex_lock(&fake_lock);
  retains[d]++;
  pthread_mutex_unlock(&fake_lock);
  *c = (CUcontext)(void *)&ctx_tag[d];
  return CUDA_SUCCESS;
}
static CUresult f_PrimaryCtxRelease(CUdevice d) {
  FAKE_CALL("cuDevicePrimaryCtxRelease");
  if (!valid_device(d)) return CUDA_ERROR_INVALID_DEVICE;
  pthread_mutex_lock(&fake_lock);
  CUresult r = retains[d] > 0 ? (retains[d]--, CUDA_SUCCESS) : CUDA_ERROR_INVALID_CONTEXT;
  pthread_mutex_unlock(&fake_lock);
  return r;
}
static CUresult f_CtxGetCurrent(CUcontext *c) {
  FAKE_CALL("cuCtxGetCurrent");
  *c = ctx_depth ? ctx_stack[ctx_depth - 1] : NULL;
  return CUDA_SUCCESS;
}
static CUresult f_CtxPushCurrent(CUcontext c) {
  FAKE_CALL("cuCtxPushCurrent");
  int i = primary_index(c);
  pthread_mutex_lock(&fake_lock);
  int ok = i >= 0 && retains[i] > 0;
  pthread_mutex_unlock(&fake_lock);
  if (!ok) return CUDA_ERROR_INVALID_CONTEXT;
  if (ctx_depth == (int)(sizeof ctx_stack / sizeof ctx_stack[0])) return CUDA_ERROR_OUT_OF_MEMORY;
  ctx_stack[ctx_depth++] = c;
  return CUDA_SUCCESS;
}
static CUresult f_CtxPopCurrent(CUcontext *c) {
  FAKE_CALL("cuCtxPopCurrent");
  if (ctx_depth == 0) return CUDA_ERROR_INVALID_CONTEXT;
  CUcontext top = ctx_stack[--ctx_depth];
  if (c) *c = top;
  return CUDA_SUCCESS;
}

/* ---- device memory ---- */

static struct {
  CUdeviceptr ptr;
  size_t size;
} live[FAKE_MAX_LIVE];
static size_t used, n_live;

int fake_charge(size_t size) {
  if (size > FAKE_CAPACITY - used) return 0;
  used += size;
  return 1;
}
void fake_uncharge(size_t size) { used -= size; }

int fake_in_alloc(CUdeviceptr p, size_t n) {
  for (size_t i = 0; i < FAKE_MAX_LIVE; i++)
    if (live[i].ptr && p >= live[i].ptr && n <= live[i].size && p - live[i].ptr <= live[i].size - n) return 1;
  return 0;
}

static CUresult f_MemAlloc(CUdeviceptr *p, size_t size) {
  FAKE_CALL("cuMemAlloc");
  if (!fake_ctx_ok()) return CUDA_ERROR_INVALID_CONTEXT;
  if (!p || size == 0) return CUDA_ERROR_INVALID_VALUE;
  CUresult r = CUDA_ERROR_OUT_OF_MEMORY;
  pthread_mutex_lock(&fake_lock);
  for (size_t i = 0; n_live < FAKE_MAX_LIVE && i < FAKE_MAX_LIVE; i++) {
    if (live[i].ptr) continue;
    size_t rounded = (size + 4095) & ~(size_t)4095;
    if (!fake_charge(size)) break;
    void *mem = aligned_alloc(4096, rounded);
    if (!mem) {
      fake_uncharge(size);
      break;
    }
    live[i].ptr = *p = (CUdeviceptr)(uintptr_t)mem;
    live[i].size = size;
    n_live++;
    r = CUDA_SUCCESS;
    break;
  }
  pthread_mutex_unlock(&fake_lock);
  return r;
}
static CUresult f_MemFree(CUdeviceptr p) {
  FAKE_CALL("cuMemFree");
  if (!fake_ctx_ok()) return CUDA_ERROR_INVALID_CONTEXT;
  CUresult r = CUDA_ERROR_INVALID_VALUE;
  pthread_mutex_lock(&fake_lock);
  for (size_t i = 0; p && i < FAKE_MAX_LIVE; i++) {
    if (live[i].ptr != p) continue;
    fake_uncharge(live[i].size);
    free((void *)(uintptr_t)p);
    live[i].ptr = 0;
    n_live--;
    r = CUDA_SUCCESS;
    break;
  }
  pthread_mutex_unlock(&fake_lock);
  return r;
}
static CUresult f_MemGetInfo(size_t *free_bytes, size_t *total) {
  FAKE_CALL("cuMemGetInfo");
  if (!fake_ctx_ok()) return CUDA_ERROR_INVALID_CONTEXT;
  pthread_mutex_lock(&fake_lock);
  *free_bytes = FAKE_CAPACITY - used;
  *total = FAKE_CAPACITY;
  pthread_mutex_unlock(&fake_lock);
  return CUDA_SUCCESS;
}
static CUresult f_CtxSynchronize(void) {
  FAKE_CALL("cuCtxSynchronize");
  if (!fake_ctx_ok()) return CUDA_ERROR_INVALID_CONTEXT;
#ifdef FAKE_MODERN
  fake_modern_drain();
#endif
  return CUDA_SUCCESS;
}

FAKE_CUDA_API long fake_cuda_live(const char *what) {
  long v = -1;
  pthread_mutex_lock(&fake_lock);
  if (strcmp(what, "allocs") == 0) v = (long)n_live;
  if (strcmp(what, "bytes") == 0) v = (long)used;
  if (strcmp(what, "contexts") == 0) {
    v = 0;
    for (int i = 0; i < FAKE_MAX_DEVICES; i++) v += retains[i];
  }
  pthread_mutex_unlock(&fake_lock);
#ifdef FAKE_MODERN
  if (v < 0) v = fake_modern_live(what);
#endif
  return v;
}

#ifndef FAKE_MODERN
FAKE_CUDA_API int fake_cuda_stream_info(void *stream, unsigned *flags, int *priority) {
  (void)stream, (void)flags, (void)priority;
  return -1;
}
#endif

/* ---- lookup ---- */

#if FAKE_LOOKUP
static const fake_entry core_table[] = {
    FAKE_ENTRY("cuGetErrorName", f_GetErrorName),
    FAKE_ENTRY("cuGetErrorString", f_GetErrorString),
    FAKE_ENTRY("cuInit", f_Init),
    FAKE_ENTRY("cuDriverGetVersion", f_DriverGetVersion),
    FAKE_ENTRY("cuDeviceGetCount", f_DeviceGetCount),
    FAKE_ENTRY("cuDeviceGet", f_DeviceGet),
    FAKE_ENTRY("cuDeviceGetName", f_DeviceGetName),
    FAKE_ENTRY("cuDeviceTotalMem", f_DeviceTotalMem),
    FAKE_ENTRY("cuDevicePrimaryCtxRetain", f_PrimaryCtxRetain),
    FAKE_ENTRY("cuDevicePrimaryCtxRelease", f_PrimaryCtxRelease),
    FAKE_ENTRY("cuCtxGetCurrent", f_CtxGetCurrent),
    FAKE_ENTRY("cuCtxPushCurrent", f_CtxPushCurrent),
    FAKE_ENTRY("cuCtxPopCurrent", f_CtxPopCurrent),
    FAKE_ENTRY("cuCtxSynchronize", f_CtxSynchronize),
    FAKE_ENTRY("cuMemAlloc", f_MemAlloc),
    FAKE_ENTRY("cuMemFree", f_MemFree),
    FAKE_ENTRY("cuMemGetInfo", f_MemGetInfo),
};

/* 1: found (*fn set), 0: unknown, -1: known but "too old" (FAKE_CUDA_OLD). */
static int lookup(const char *symbol, void **fn) {
  *fn = NULL;
  if (listed(hide_list, symbol)) return 0;
  const fake_entry *hit = NULL;
  for (size_t i = 0; !hit && i < sizeof core_table / sizeof core_table[0]; i++)
    if (strcmp(core_table[i].name, symbol) == 0) hit = &core_table[i];
#ifdef FAKE_MODERN
  for (size_t i = 0; !hit && i < fake_modern_count; i++)
    if (strcmp(fake_modern_table[i].name, symbol) == 0) hit = &fake_modern_table[i];
#endif
  if (!hit) return 0;
  if (listed(old_list, symbol)) return -1;
  *(void (**)(void))fn = hit->fn;
  return 1;
}
#endif

#if FAKE_LOOKUP == 2
FAKE_CUDA_API CUresult fake_get_proc_v2(const char *symbol, void **pfn, int version, cuuint64_t flags,
                                        CUdriverProcAddressQueryResult *status) __asm__("cuGetProcAddress_v2");
CUresult fake_get_proc_v2(const char *symbol, void **pfn, int version, cuuint64_t flags,
                          CUdriverProcAddressQueryResult *status) {
  (void)version, (void)flags;
  if (!symbol || !pfn) return CUDA_ERROR_INVALID_VALUE;
  int found = lookup(symbol, pfn);
  if (status)
    *status = found > 0    ? CU_GET_PROC_ADDRESS_SUCCESS
              : found == 0 ? CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND
                           : CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT;
  return found == 0 ? CUDA_ERROR_NOT_FOUND : CUDA_SUCCESS;
}
#elif FAKE_LOOKUP == 1
/* CUDA 11.3-11.8: no symbol status; a missing symbol is CUDA_ERROR_NOT_FOUND. */
FAKE_CUDA_API CUresult fake_get_proc_v1(const char *symbol, void **pfn, int version, cuuint64_t flags)
    __asm__("cuGetProcAddress");
CUresult fake_get_proc_v1(const char *symbol, void **pfn, int version, cuuint64_t flags) {
  (void)version, (void)flags;
  if (!symbol || !pfn) return CUDA_ERROR_INVALID_VALUE;
  return lookup(symbol, pfn) > 0 ? CUDA_SUCCESS : CUDA_ERROR_NOT_FOUND;
}
#else
/* A driver without cuGetProcAddress: the entry points are plain exports, the
 * versioned ones under their _v2 names (as cuda.h's macros spell them). */
#define FAKE_EXPORT(f, sym) \
  extern __typeof__(f) fake_export_##f __asm__(sym) __attribute__((alias(#f), visibility("default")));
FAKE_EXPORT(f_GetErrorName, "cuGetErrorName")
FAKE_EXPORT(f_GetErrorString, "cuGetErrorString")
FAKE_EXPORT(f_Init, "cuInit")
FAKE_EXPORT(f_DriverGetVersion, "cuDriverGetVersion")
FAKE_EXPORT(f_DeviceGetCount, "cuDeviceGetCount")
FAKE_EXPORT(f_DeviceGet, "cuDeviceGet")
FAKE_EXPORT(f_DeviceGetName, "cuDeviceGetName")
FAKE_EXPORT(f_DeviceTotalMem, "cuDeviceTotalMem_v2")
FAKE_EXPORT(f_PrimaryCtxRetain, "cuDevicePrimaryCtxRetain")
FAKE_EXPORT(f_PrimaryCtxRelease, "cuDevicePrimaryCtxRelease_v2")
FAKE_EXPORT(f_CtxGetCurrent, "cuCtxGetCurrent")
FAKE_EXPORT(f_CtxPushCurrent, "cuCtxPushCurrent_v2")
FAKE_EXPORT(f_CtxPopCurrent, "cuCtxPopCurrent_v2")
FAKE_EXPORT(f_CtxSynchronize, "cuCtxSynchronize")
FAKE_EXPORT(f_MemAlloc, "cuMemAlloc_v2")
FAKE_EXPORT(f_MemFree, "cuMemFree_v2")
FAKE_EXPORT(f_MemGetInfo, "cuMemGetInfo_v2")
#endif
