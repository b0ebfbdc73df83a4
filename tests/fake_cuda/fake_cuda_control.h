/* fake_cuda_control.h — the test-only knobs of the fake CUDA driver
 * (tests/fake_cuda). The fake exports these functions next to its entry
 * point; a test reaches them with dlopen(GRT_CUDA_LIBRARY) + dlsym, since gpurt
 * loads the library itself (fake_control_open below does that).
 *
 * Load-time knobs are environment variables, read when the library is loaded:
 *   FAKE_CUDA_HIDE=cuA,cuB   lookups of these symbols fail (CUDA_ERROR_NOT_FOUND)
 *   FAKE_CUDA_OLD=cuA,cuB    lookups succeed with CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT
 *   FAKE_CUDA_FAIL=cuA:N:R,… the Nth call to cuA returns CUresult R (as fake_cuda_fail)
 */
#ifndef FAKE_CUDA_CONTROL_H
#define FAKE_CUDA_CONTROL_H

#include <stddef.h>

#define FAKE_CUDA_API __attribute__((visibility("default")))

/* Arms a fault: the nth call (1 = the next) to entry point `name` returns the
 * CUresult `result` without doing anything. nth <= 0 disarms name's faults.
 * Returns 0, or -1 when the table of armed faults is full. */
FAKE_CUDA_API int fake_cuda_fail(const char *name, int nth, int result);
/* Disarms every fault. */
FAKE_CUDA_API void fake_cuda_clear_faults(void);
/* Calls made so far to entry point `name` (failed ones included). */
FAKE_CUDA_API unsigned long fake_cuda_calls(const char *name);
/* Live driver objects: "allocs" (cuMemAlloc), "bytes" (device memory in use),
 * "contexts" (primary context retains), and in the modern fake "streams",
 * "events", "host" (cuMemHostAlloc), "reservations", "handles" (cuMemCreate),
 * "mappings", "pending" (queued stream work), "graphs" (cuStreamEndCapture's). -1 for an unknown name. */
FAKE_CUDA_API long fake_cuda_live(const char *what);
/* The number of GPUs cuDeviceGetCount reports (default 1, at most 4). */
FAKE_CUDA_API void fake_cuda_set_device_count(int n);
/* The flags and (clamped) priority a stream was created with; -1 for a bad handle. */
FAKE_CUDA_API int fake_cuda_stream_info(void *stream, unsigned *flags, int *priority);
/* Modern fake only: the granularity cuMemGetAllocationGranularity reports
 * (a broken driver's 0 included); negative restores the real one (2 MiB). */
FAKE_CUDA_API void fake_cuda_set_granularity(long g);

/* ---- for tests ---- */
#ifndef FAKE_CUDA_BUILDING
#include <dlfcn.h>
#include <stdlib.h>

typedef struct fake_control {
  int (*arm)(const char *name, int nth, int result); /* fake_cuda_fail ("fail" is a cmocka macro) */
  void (*clear_faults)(void);
  unsigned long (*calls)(const char *name);
  long (*live)(const char *what);
  void (*set_device_count)(int n);
  int (*stream_info)(void *stream, unsigned *flags, int *priority);
  void (*set_granularity)(long g); /* NULL in the old-driver fakes */
  void *(*proc)(const char *symbol); /* the fake's own entry point for symbol (NULL if absent) */
} fake_control;

static void *fake_control_handle_(void) {
  const char *path = getenv("GRT_CUDA_LIBRARY");
  return path ? dlopen(path, RTLD_NOW | RTLD_LOCAL) : NULL;
}

/* An entry point of the fake, looked up the way gpurt does (cuGetProcAddress_v2). */
static inline void *fake_control_proc(const char *symbol) {
  typedef int (*get_proc)(const char *, void **, int, unsigned long long, int *);
  void *h = fake_control_handle_(), *fn = NULL;
  get_proc gp = NULL;
  if (h) *(void **)&gp = dlsym(h, "cuGetProcAddress_v2");
  int status = 0;
  if (gp && gp(symbol, &fn, 12000, 0, &status) != 0) fn = NULL;
  return fn;
}

/* Fills c from the library GRT_CUDA_LIBRARY names; 0 on success. */
static inline int fake_control_open(fake_control *c) {
  void *h = fake_control_handle_();
  if (!h) return -1;
  *(void **)&c->arm = dlsym(h, "fake_cuda_fail");
  *(void **)&c->clear_faults = dlsym(h, "fake_cuda_clear_faults");
  *(void **)&c->calls = dlsym(h, "fake_cuda_calls");
  *(void **)&c->live = dlsym(h, "fake_cuda_live");
  *(void **)&c->set_device_count = dlsym(h, "fake_cuda_set_device_count");
  *(void **)&c->stream_info = dlsym(h, "fake_cuda_stream_info");
  *(void **)&c->set_granularity = dlsym(h, "fake_cuda_set_granularity");
  c->proc = fake_control_proc;
  return c->arm && c->clear_faults && c->calls && c->live && c->set_device_count && c->stream_info ? 0 : -1;
}
#endif
#endif
