/* fake_internal.h — what the fake driver's files share (tests/fake_cuda).
 * fake_libcuda.c: the core (errors, devices, contexts, cuMemAlloc, lookup,
 * fault injection); fake_modern.c: streams, events, host memory and VMM, built
 * in only with FAKE_MODERN. Test-only code: one lock guards all state. */
#ifndef FAKE_INTERNAL_H
#define FAKE_INTERNAL_H

#define FAKE_CUDA_BUILDING 1
#include <cuda.h>
#include <pthread.h>
#include <stddef.h>

#include "fake_cuda_control.h"

#define FAKE_CAPACITY ((size_t)64 << 20)
#define FAKE_GRANULARITY ((size_t)2 << 20)
#define FAKE_MAX_DEVICES 4

typedef struct fake_entry {
  const char *name;
  void (*fn)(void);
} fake_entry;
#define FAKE_ENTRY(sym, f) {sym, (void (*)(void))f}

extern pthread_mutex_t fake_lock;

/* Counts a call to `name`; returns the CUresult an armed fault dictates, else CUDA_SUCCESS. */
CUresult fake_enter(const char *name);
#define FAKE_CALL(name)                      \
  do {                                       \
    CUresult fault_ = fake_enter(name);      \
    if (fault_ != CUDA_SUCCESS) return fault_; \
  } while (0)

/* 1 when the calling thread has a retained primary context current. */
int fake_ctx_ok(void);
/* The number of devices cuDeviceGetCount reports. */
int fake_device_count(void);

/* Device memory accounting against FAKE_CAPACITY (fake_lock held). */
int fake_charge(size_t size);
void fake_uncharge(size_t size);
/* 1 when [p, p+n) lies inside one live cuMemAlloc block (fake_lock held). */
int fake_in_alloc(CUdeviceptr p, size_t n);

#ifdef FAKE_MODERN
extern const fake_entry fake_modern_table[];
extern const size_t fake_modern_count;
/* The modern objects' counts for fake_cuda_live; -1 for a name it does not know. */
long fake_modern_live(const char *what);
/* Waits until every stream's queued work has completed. */
void fake_modern_drain(void);
#endif

#endif
