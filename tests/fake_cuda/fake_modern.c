/* fake_modern.c — what a modern driver adds to the fake (built with FAKE_MODERN):
 * streams, events, host functions, async copies and fills, pinned host
 * memory, cuStreamWaitValue32 and the VMM calls (see fake_libcuda.c).
 *
 * Streams: each has a FIFO of work items and two counters, enq (items issued)
 * and done (items completed). Work that can run at once on an idle stream runs
 * inline, so a stream is idle again as soon as the call returns; a host
 * function, or anything behind an unmet wait, goes to one driver thread that
 * runs the queues in order (host functions are serialized, as the real driver
 * may do). Waits: cuStreamWaitValue32 (a word of pinned host memory >= value)
 * and cuStreamWaitEvent (another stream's done reaching the event's snapshot).
 * An event's record is a work item that stamps the time when it runs; the event
 * is complete when its stream's done reaches the record's position.
 *
 * VMM: reservations are real PROT_NONE address ranges aligned to the 2 MiB
 * granularity; cuMemSetAccess makes mapped pieces readable and writable, so
 * copies into VMM memory work, and copies outside live memory are refused
 * (CUDA_ERROR_INVALID_VALUE) before they touch anything.
 */
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "fake_internal.h"

#define MAX_STREAMS 512
#define MAX_ITEMS 8192
#define MAX_EVENTS 4096
#define MAX_HOST 256
#define MAX_RESERVATIONS 64
#define MAX_HANDLES 1024
#define MAX_MAPPINGS 1024

enum { K_HOST, K_WAIT_VALUE, K_WAIT_EVENT, K_COPY, K_SET, K_RECORD };

typedef struct item {
  int kind, next;
  CUhostFn fn;
  void *arg;
  unsigned char *dst;
  const unsigned char *src;
  size_t n;
  unsigned value; /* K_WAIT_VALUE: the threshold; K_SET: the byte */
  int target;     /* K_WAIT_EVENT: stream slot; K_RECORD: event slot */
  uint64_t seq;   /* K_WAIT_EVENT: done count to reach; K_RECORD: the event's generation */
} item;

enum { CAP_NONE, CAP_ACTIVE, CAP_INVALID }; /* CUstreamCaptureStatus' values */

static struct fstream {
  int used, dead, running;
  int cap; /* CAP_*: capture keeps only the rules the backend's tests need */
  unsigned flags;
  int priority;
  int head, tail; /* item indices, -1: none */
  uint64_t enq, done;
} streams[MAX_STREAMS]; /* slot 0: the default (legacy / per-thread / NULL) stream */

static item items[MAX_ITEMS];
static int free_items = -1;

static struct fevent {
  int used, recorded, stamped;
  unsigned flags;
  int slot;
  uint64_t seq, gen;
  double ts;
} events[MAX_EVENTS];

static struct {
  void *p;
  size_t size;
  unsigned flags;
} host[MAX_HOST];

static struct {
  CUdeviceptr va;
  size_t size;
  void *base; /* what mmap returned (over-sized for the alignment) */
  size_t len;
} resv[MAX_RESERVATIONS];

static struct {
  int used, mapped, released;
  size_t size;
} handles[MAX_HANDLES];

static struct {
  CUdeviceptr va;
  size_t size;
  int handle, access;
} maps[MAX_MAPPINGS];

static pthread_cond_t work_cv = PTHREAD_COND_INITIALIZER;     /* new work queued */
static pthread_cond_t progress_cv = PTHREAD_COND_INITIALIZER; /* work completed */
static int worker_started;

__attribute__((constructor)) static void init_queues(void) {
  for (int i = 0; i < MAX_STREAMS; i++) streams[i].head = streams[i].tail = -1;
  streams[0].used = 1;
  for (int i = MAX_ITEMS - 1; i >= 0; i--) items[i].next = free_items, free_items = i;
}

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* ---- handles (fake_lock held) ---- */

static int stream_slot(CUstream h) {
  if (h == NULL || h == CU_STREAM_LEGACY || h == CU_STREAM_PER_THREAD) return 0;
  uintptr_t p = (uintptr_t)h, base = (uintptr_t)&streams[1];
  if (p < base || p >= (uintptr_t)&streams[MAX_STREAMS] || (p - base) % sizeof streams[0]) return -1;
  int i = 1 + (int)((p - base) / sizeof streams[0]);
  return streams[i].used && !streams[i].dead ? i : -1;
}

static int event_slot(CUevent h) {
  uintptr_t p = (uintptr_t)h, base = (uintptr_t)&events[0];
  if (p < base || p >= (uintptr_t)&events[MAX_EVENTS] || (p - base) % sizeof events[0]) return -1;
  int i = (int)((p - base) / sizeof events[0]);
  return events[i].used ? i : -1;
}

static int host_of(const void *p, size_t n, int need_map) {
  uintptr_t a = (uintptr_t)p;
  for (int i = 0; i < MAX_HOST; i++) {
    uintptr_t b = (uintptr_t)host[i].p;
    if (host[i].p && a >= b && n <= host[i].size && a - b <= host[i].size - n &&
        (!need_map || (host[i].flags & CU_MEMHOSTALLOC_DEVICEMAP)))
      return i;
  }
  return -1;
}

static int mapping_at(CUdeviceptr va) {
  for (int i = 0; i < MAX_MAPPINGS; i++)
    if (maps[i].size && maps[i].va == va) return i;
  return -1;
}

static int mapping_holding(CUdeviceptr p) {
  for (int i = 0; i < MAX_MAPPINGS; i++)
    if (maps[i].size && p >= maps[i].va && p - maps[i].va < maps[i].size) return i;
  return -1;
}

/* 1 when [va, va+size) is exactly a run of whole mappings. */
static int whole_mappings(CUdeviceptr va, size_t size) {
  CUdeviceptr at = va, end = va + size;
  if (size == 0 || end < va) return 0;
  while (at < end) {
    int m = mapping_at(at);
    if (m < 0 || maps[m].size > end - at) return 0;
    at += maps[m].size;
  }
  return 1;
}

/* 1 when the GPU may touch [p, p+n): a cuMemAlloc block, accessible mappings, or mapped host memory. */
static int device_range(CUdeviceptr p, size_t n) {
  if (n == 0 || p + n < p) return 0;
  if (fake_in_alloc(p, n) || host_of((const void *)(uintptr_t)p, n, 1) >= 0) return 1;
  CUdeviceptr at = p, end = p + n;
  while (at < end) {
    int m = mapping_holding(at);
    if (m < 0 || !maps[m].access) return 0;
    at = maps[m].va + maps[m].size;
  }
  return 1;
}

static int valid_prop(const CUmemAllocationProp *prop) {
  return prop && prop->type == CU_MEM_ALLOCATION_TYPE_PINNED && prop->location.type == CU_MEM_LOCATION_TYPE_DEVICE &&
         prop->location.id >= 0 && prop->location.id < fake_device_count();
}

/* ---- the work queues (fake_lock held) ---- */

static int runnable(const item *it) {
  if (it->kind == K_WAIT_VALUE) return __atomic_load_n((const uint32_t *)it->dst, __ATOMIC_SEQ_CST) >= it->value;
  if (it->kind == K_WAIT_EVENT) return streams[it->target].done >= it->seq;
  return 1;
}

/* Runs a ready item; a host function runs with the lock released. */
static void execute(item *it) {
  switch (it->kind) {
  case K_HOST:
    pthread_mutex_unlock(&fake_lock);
    it->fn(it->arg);
    pthread_mutex_lock(&fake_lock);
    break;
  case K_COPY: memmove(it->dst, it->src, it->n); break;
  case K_SET: memset(it->dst, (int)it->value, it->n); break;
  case K_RECORD:
    if (events[it->target].gen == it->seq) events[it->target].ts = now_s(), events[it->target].stamped = 1;
    break;
  default: break;
  }
}

static void *worker_main(void *arg) {
  (void)arg;
  pthread_mutex_lock(&fake_lock);
  for (;;) {
    int blocked = 0, progressed = 0;
    for (int s = 0; s < MAX_STREAMS; s++) {
      struct fstream *st = &streams[s];
      while (st->head >= 0) {
        int i = st->head;
        if (!runnable(&items[i])) {
          blocked = 1;
          break;
        }
        item it = items[i];
        st->head = items[i].next;
        if (st->head < 0) st->tail = -1;
        items[i].next = free_items, free_items = i;
        st->running = 1;
        execute(&it);
        st->running = 0;
        st->done++;
        progressed = 1;
      }
    }
    if (progressed) {
      pthread_cond_broadcast(&progress_cv);
    } else if (blocked) {
      struct timespec until;
      clock_gettime(CLOCK_REALTIME, &until);
      until.tv_nsec += 200000;
      if (until.tv_nsec >= 1000000000L) until.tv_sec++, until.tv_nsec -= 1000000000L;
      pthread_cond_timedwait(&work_cv, &fake_lock, &until);
    } else {
      pthread_cond_wait(&work_cv, &fake_lock);
    }
  }
  return NULL;
}

/* Issues it to stream slot s: inline when s is idle and it can run now (not a host function). */
static CUresult submit(int s, item it) {
  struct fstream *st = &streams[s];
  if (st->cap) return st->cap == CAP_ACTIVE ? CUDA_SUCCESS : CUDA_ERROR_STREAM_CAPTURE_INVALIDATED; /* captured */
  if (st->head < 0 && !st->running && it.kind != K_HOST && runnable(&it)) {
    st->enq++;
    execute(&it);
    st->done++;
    pthread_cond_broadcast(&progress_cv);
    return CUDA_SUCCESS;
  }
  if (free_items < 0) return CUDA_ERROR_OUT_OF_MEMORY;
  if (!worker_started) {
    pthread_t t;
    if (pthread_create(&t, NULL, worker_main, NULL) != 0) return CUDA_ERROR_OUT_OF_MEMORY;
    pthread_detach(t);
    worker_started = 1;
  }
  int i = free_items;
  free_items = items[i].next;
  it.next = -1;
  items[i] = it;
  if (st->tail >= 0)
    items[st->tail].next = i;
  else
    st->head = i;
  st->tail = i;
  st->enq++;
  pthread_cond_signal(&work_cv);
  return CUDA_SUCCESS;
}

static void wait_done(int s, uint64_t target) {
  while (streams[s].done < target) pthread_cond_wait(&progress_cv, &fake_lock);
}

void fake_modern_drain(void) {
  pthread_mutex_lock(&fake_lock);
  for (int s = 0; s < MAX_STREAMS; s++) wait_done(s, streams[s].enq);
  pthread_mutex_unlock(&fake_lock);
}

/* Entry-point prologue: counts the call, checks the context, takes the lock. */
#define ENTER_CTX(name)                                      \
  FAKE_CALL(name);                                           \
  if (!fake_ctx_ok()) return CUDA_ERROR_INVALID_CONTEXT;     \
  pthread_mutex_lock(&fake_lock)
#define RETURN(r)                       \
  do {                                  \
    CUresult r__ = (r);                 \
    pthread_mutex_unlock(&fake_lock);   \
    return r__;                         \
  } while (0)

/* ---- streams ---- */

static CUresult f_StreamCreateWithPriority(CUstream *ph, unsigned int flags, int priority) {
  ENTER_CTX("cuStreamCreateWithPriority");
  if (!ph || (flags != CU_STREAM_DEFAULT && flags != CU_STREAM_NON_BLOCKING)) RETURN(CUDA_ERROR_INVALID_VALUE);
  for (int i = 1; i < MAX_STREAMS; i++) {
    struct fstream *st = &streams[i];
    if (st->used && !(st->dead && st->head < 0 && !st->running)) continue;
    /* enq/done carry over from a reused slot, so old events stay complete */
    st->used = 1, st->dead = 0, st->cap = CAP_NONE, st->head = st->tail = -1;
    st->flags = flags;
    st->priority = priority < -5 ? -5 : priority > 0 ? 0 : priority; /* the range of a recent GPU */
    *ph = (CUstream)(void *)st;
    RETURN(CUDA_SUCCESS);
  }
  RETURN(CUDA_ERROR_OUT_OF_MEMORY);
}

static CUresult f_StreamDestroy(CUstream h) {
  ENTER_CTX("cuStreamDestroy");
  int s = stream_slot(h);
  if (s <= 0) RETURN(CUDA_ERROR_INVALID_HANDLE);
  streams[s].dead = 1; /* queued work still completes */
  RETURN(CUDA_SUCCESS);
}

/* Query or sync of a capturing stream invalidates its capture. */
static int refuse_capturing(int s) {
  if (!streams[s].cap) return 0;
  streams[s].cap = CAP_INVALID;
  return 1;
}

static CUresult f_StreamQuery(CUstream h) {
  ENTER_CTX("cuStreamQuery");
  int s = stream_slot(h);
  if (s < 0) RETURN(CUDA_ERROR_INVALID_HANDLE);
  if (refuse_capturing(s)) RETURN(CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
  RETURN(streams[s].done == streams[s].enq ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY);
}

static CUresult f_StreamSynchronize(CUstream h) {
  ENTER_CTX("cuStreamSynchronize");
  int s = stream_slot(h);
  if (s < 0) RETURN(CUDA_ERROR_INVALID_HANDLE);
  if (refuse_capturing(s)) RETURN(CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
  wait_done(s, streams[s].enq);
  RETURN(CUDA_SUCCESS);
}

static CUresult f_StreamWaitEvent(CUstream h, CUevent ev, unsigned int flags) {
  ENTER_CTX("cuStreamWaitEvent");
  int s = stream_slot(h), e = event_slot(ev);
  if (s < 0 || e < 0) RETURN(CUDA_ERROR_INVALID_HANDLE);
  if (flags != 0) RETURN(CUDA_ERROR_INVALID_VALUE);
  if (!events[e].recorded) RETURN(CUDA_SUCCESS); /* a never-recorded event counts as complete */
  item it = {.kind = K_WAIT_EVENT, .target = events[e].slot, .seq = events[e].seq};
  RETURN(submit(s, it));
}

static CUresult f_StreamWaitValue32(CUstream h, CUdeviceptr addr, cuuint32_t value, unsigned int flags) {
  ENTER_CTX("cuStreamWaitValue32");
  int s = stream_slot(h);
  if (s < 0) RETURN(CUDA_ERROR_INVALID_HANDLE);
  if (flags != CU_STREAM_WAIT_VALUE_GEQ || addr % 4 || host_of((void *)(uintptr_t)addr, 4, 1) < 0)
    RETURN(CUDA_ERROR_INVALID_VALUE); /* this fake models GEQ on mapped host memory only */
  item it = {.kind = K_WAIT_VALUE, .dst = (unsigned char *)(uintptr_t)addr, .value = value};
  RETURN(submit(s, it));
}

static CUresult f_LaunchHostFunc(CUstream h, CUhostFn fn, void *arg) {
  ENTER_CTX("cuLaunchHostFunc");
  int s = stream_slot(h);
  if (s < 0) RETURN(CUDA_ERROR_INVALID_HANDLE);
  if (!fn) RETURN(CUDA_ERROR_INVALID_VALUE);
  item it = {.kind = K_HOST, .fn = fn, .arg = arg};
  RETURN(submit(s, it));
}

static CUresult copy_item(CUstream h, void *dst, const void *src, size_t n, int dst_dev, int src_dev) {
  int s = stream_slot(h);
  if (s < 0) return CUDA_ERROR_INVALID_HANDLE;
  if (n == 0) return CUDA_SUCCESS;
  if (!dst || !src || (dst_dev && !device_range((CUdeviceptr)(uintptr_t)dst, n)) ||
      (src_dev && !device_range((CUdeviceptr)(uintptr_t)src, n)))
    return CUDA_ERROR_INVALID_VALUE;
  item it = {.kind = K_COPY, .dst = dst, .src = src, .n = n};
  return submit(s, it);
}

static CUresult f_MemcpyHtoDAsync(CUdeviceptr dst, const void *src, size_t n, CUstream h) {
  ENTER_CTX("cuMemcpyHtoDAsync");
  RETURN(copy_item(h, (void *)(uintptr_t)dst, src, n, 1, 0));
}
static CUresult f_MemcpyDtoHAsync(void *dst, CUdeviceptr src, size_t n, CUstream h) {
  ENTER_CTX("cuMemcpyDtoHAsync");
  RETURN(copy_item(h, dst, (const void *)(uintptr_t)src, n, 0, 1));
}
static CUresult f_MemcpyDtoDAsync(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream h) {
  ENTER_CTX("cuMemcpyDtoDAsync");
  RETURN(copy_item(h, (void *)(uintptr_t)dst, (const void *)(uintptr_t)src, n, 1, 1));
}
static CUresult f_MemsetD8Async(CUdeviceptr dst, unsigned char v, size_t n, CUstream h) {
  ENTER_CTX("cuMemsetD8Async");
  int s = stream_slot(h);
  if (s < 0) RETURN(CUDA_ERROR_INVALID_HANDLE);
  if (n == 0) RETURN(CUDA_SUCCESS);
  if (!device_range(dst, n)) RETURN(CUDA_ERROR_INVALID_VALUE);
  item it = {.kind = K_SET, .dst = (unsigned char *)(uintptr_t)dst, .n = n, .value = v};
  RETURN(submit(s, it));
}

/* ---- events ---- */

static int event_complete(int e) {
  return !events[e].recorded || streams[events[e].slot].done >= events[e].seq;
}

static CUresult f_EventCreate(CUevent *ph, unsigned int flags) {
  ENTER_CTX("cuEventCreate");
  unsigned known = CU_EVENT_BLOCKING_SYNC | CU_EVENT_DISABLE_TIMING | CU_EVENT_INTERPROCESS;
  if (!ph || (flags & ~known)) RETURN(CUDA_ERROR_INVALID_VALUE);
  for (int i = 0; i < MAX_EVENTS; i++) {
    if (events[i].used) continue;
    uint64_t gen = events[i].gen + 1; /* stale records of an earlier event here stay ignored */
    events[i] = (struct fevent){.used = 1, .flags = flags, .gen = gen};
    *ph = (CUevent)(void *)&events[i];
    RETURN(CUDA_SUCCESS);
  }
  RETURN(CUDA_ERROR_OUT_OF_MEMORY);
}

static CUresult f_EventDestroy(CUevent ev) {
  ENTER_CTX("cuEventDestroy");
  int e = event_slot(ev);
  if (e < 0) RETURN(CUDA_ERROR_INVALID_HANDLE);
  events[e].used = 0;
  events[e].gen++;
  RETURN(CUDA_SUCCESS);
}

static CUresult f_EventRecord(CUevent ev, CUstream h) {
  ENTER_CTX("cuEventRecord");
  int e = event_slot(ev), s = stream_slot(h);
  if (e < 0 || s < 0) RETURN(CUDA_ERROR_INVALID_HANDLE);
  struct fevent *fe = &events[e], before = *fe;
  fe->gen++; /* a pending earlier record of this event no longer stamps it */
  fe->stamped = 0;
  item it = {.kind = K_RECORD, .target = e, .seq = fe->gen};
  CUresult r = submit(s, it);
  if (r == CUDA_SUCCESS)
    fe->recorded = 1, fe->slot = s, fe->seq = streams[s].enq;
  else
    *fe = before;
  RETURN(r);
}

static CUresult f_EventQuery(CUevent ev) {
  ENTER_CTX("cuEventQuery");
  int e = event_slot(ev);
  if (e < 0) RETURN(CUDA_ERROR_INVALID_HANDLE);
  RETURN(event_complete(e) ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY);
}

static CUresult f_EventSynchronize(CUevent ev) {
  ENTER_CTX("cuEventSynchronize");
  int e = event_slot(ev);
  if (e < 0) RETURN(CUDA_ERROR_INVALID_HANDLE);
  if (events[e].recorded) wait_done(events[e].slot, events[e].seq);
  RETURN(CUDA_SUCCESS);
}

static CUresult f_EventElapsedTime(float *ms, CUevent start, CUevent end) {
  ENTER_CTX("cuEventElapsedTime");
  int a = event_slot(start), b = event_slot(end);
  if (!ms) RETURN(CUDA_ERROR_INVALID_VALUE);
  if (a < 0 || b < 0 || !events[a].recorded || !events[b].recorded ||
      ((events[a].flags | events[b].flags) & CU_EVENT_DISABLE_TIMING))
    RETURN(CUDA_ERROR_INVALID_HANDLE);
  if (!event_complete(a) || !event_complete(b) || !events[a].stamped || !events[b].stamped)
    RETURN(CUDA_ERROR_NOT_READY);
  *ms = (float)((events[b].ts - events[a].ts) * 1e3);
  RETURN(CUDA_SUCCESS);
}

/* ---- pinned host memory ---- */

static CUresult f_MemHostAlloc(void **pp, size_t size, unsigned int flags) {
  ENTER_CTX("cuMemHostAlloc");
  unsigned known = CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP | CU_MEMHOSTALLOC_WRITECOMBINED;
  if (!pp || size == 0 || (flags & ~known)) RETURN(CUDA_ERROR_INVALID_VALUE);
  for (int i = 0; i < MAX_HOST; i++) {
    if (host[i].p) continue;
    void *p = calloc(1, size);
    if (!p) break;
    host[i].p = *pp = p;
    host[i].size = size;
    host[i].flags = flags;
    RETURN(CUDA_SUCCESS);
  }
  RETURN(CUDA_ERROR_OUT_OF_MEMORY);
}

static CUresult f_MemFreeHost(void *p) {
  ENTER_CTX("cuMemFreeHost");
  int i = host_of(p, 1, 0);
  if (i < 0 || host[i].p != p) RETURN(CUDA_ERROR_INVALID_VALUE);
  for (int s = 0; s < MAX_STREAMS; s++) wait_done(s, streams[s].enq); /* as the real one: it synchronizes */
  free(host[i].p);
  host[i].p = NULL;
  RETURN(CUDA_SUCCESS);
}

static CUresult f_MemHostGetDevicePointer(CUdeviceptr *pd, void *p, unsigned int flags) {
  ENTER_CTX("cuMemHostGetDevicePointer");
  if (!pd || flags != 0 || host_of(p, 1, 1) < 0) RETURN(CUDA_ERROR_INVALID_VALUE);
  *pd = (CUdeviceptr)(uintptr_t)p; /* unified addressing: the same address */
  RETURN(CUDA_SUCCESS);
}

/* ---- virtual memory ---- */

static long reported_granularity = -1; /* fake_cuda_set_granularity */

FAKE_CUDA_API void fake_cuda_set_granularity(long g) { reported_granularity = g; }

static CUresult f_MemGetAllocationGranularity(size_t *g, const CUmemAllocationProp *prop,
                                              CUmemAllocationGranularity_flags option) {
  FAKE_CALL("cuMemGetAllocationGranularity");
  if (!g || !valid_prop(prop) ||
      (option != CU_MEM_ALLOC_GRANULARITY_MINIMUM && option != CU_MEM_ALLOC_GRANULARITY_RECOMMENDED))
    return CUDA_ERROR_INVALID_VALUE;
  *g = reported_granularity < 0 ? FAKE_GRANULARITY : (size_t)reported_granularity;
  return CUDA_SUCCESS;
}

static CUresult f_MemAddressReserve(CUdeviceptr *p, size_t size, size_t align, CUdeviceptr addr,
                                    unsigned long long flags) {
  ENTER_CTX("cuMemAddressReserve");
  (void)addr; /* a hint only */
  if (!p || size == 0 || size % FAKE_GRANULARITY || (align & (align - 1)) || flags) RETURN(CUDA_ERROR_INVALID_VALUE);
  for (int i = 0; i < MAX_RESERVATIONS; i++) {
    if (resv[i].size) continue;
    size_t len = size + FAKE_GRANULARITY;
    void *base = mmap(NULL, len, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (base == MAP_FAILED) break;
    uintptr_t va = ((uintptr_t)base + FAKE_GRANULARITY - 1) & ~(uintptr_t)(FAKE_GRANULARITY - 1);
    resv[i].va = *p = va;
    resv[i].size = size;
    resv[i].base = base;
    resv[i].len = len;
    RETURN(CUDA_SUCCESS);
  }
  RETURN(CUDA_ERROR_OUT_OF_MEMORY);
}

static CUresult f_MemAddressFree(CUdeviceptr va, size_t size) {
  ENTER_CTX("cuMemAddressFree");
  for (int i = 0; i < MAX_RESERVATIONS; i++) {
    if (!resv[i].size || resv[i].va != va || resv[i].size != size) continue;
    for (int m = 0; m < MAX_MAPPINGS; m++)
      if (maps[m].size && maps[m].va >= va && maps[m].va - va < size) RETURN(CUDA_ERROR_INVALID_VALUE);
    munmap(resv[i].base, resv[i].len);
    resv[i].size = 0;
    RETURN(CUDA_SUCCESS);
  }
  RETURN(CUDA_ERROR_INVALID_VALUE);
}

static CUresult f_MemCreate(CUmemGenericAllocationHandle *h, size_t size, const CUmemAllocationProp *prop,
                            unsigned long long flags) {
  ENTER_CTX("cuMemCreate");
  if (!h || size == 0 || size % FAKE_GRANULARITY || !valid_prop(prop) || flags) RETURN(CUDA_ERROR_INVALID_VALUE);
  for (int i = 0; i < MAX_HANDLES; i++) {
    if (handles[i].used) continue;
    if (!fake_charge(size)) break;
    handles[i].used = 1, handles[i].mapped = 0, handles[i].released = 0;
    handles[i].size = size;
    *h = (CUmemGenericAllocationHandle)i + 1;
    RETURN(CUDA_SUCCESS);
  }
  RETURN(CUDA_ERROR_OUT_OF_MEMORY);
}

static int handle_slot(CUmemGenericAllocationHandle h) {
  return h >= 1 && h <= MAX_HANDLES && handles[h - 1].used && !handles[h - 1].released ? (int)(h - 1) : -1;
}

static void drop_handle(int i) {
  fake_uncharge(handles[i].size);
  handles[i].used = 0;
}

static CUresult f_MemRelease(CUmemGenericAllocationHandle h) {
  ENTER_CTX("cuMemRelease");
  int i = handle_slot(h);
  if (i < 0) RETURN(CUDA_ERROR_INVALID_VALUE);
  handles[i].released = 1; /* the memory goes when the last mapping does */
  if (!handles[i].mapped) drop_handle(i);
  RETURN(CUDA_SUCCESS);
}

static CUresult f_MemMap(CUdeviceptr va, size_t size, size_t offset, CUmemGenericAllocationHandle h,
                         unsigned long long flags) {
  ENTER_CTX("cuMemMap");
  int hi = handle_slot(h), r = -1;
  if (hi < 0 || offset || flags || handles[hi].mapped || size != handles[hi].size) RETURN(CUDA_ERROR_INVALID_VALUE);
  for (int i = 0; r < 0 && i < MAX_RESERVATIONS; i++)
    if (resv[i].size && va >= resv[i].va && size <= resv[i].size && va - resv[i].va <= resv[i].size - size) r = i;
  if (r < 0) RETURN(CUDA_ERROR_INVALID_VALUE);
  for (int m = 0; m < MAX_MAPPINGS; m++)
    if (maps[m].size && maps[m].va < va + size && va < maps[m].va + maps[m].size) RETURN(CUDA_ERROR_INVALID_VALUE);
  for (int m = 0; m < MAX_MAPPINGS; m++) {
    if (maps[m].size) continue;
    maps[m].va = va, maps[m].size = size, maps[m].handle = hi, maps[m].access = 0;
    handles[hi].mapped = 1;
    RETURN(CUDA_SUCCESS);
  }
  RETURN(CUDA_ERROR_OUT_OF_MEMORY);
}

static CUresult f_MemSetAccess(CUdeviceptr va, size_t size, const CUmemAccessDesc *desc, size_t count) {
  ENTER_CTX("cuMemSetAccess");
  if (!desc || count == 0 || desc[0].location.type != CU_MEM_LOCATION_TYPE_DEVICE || desc[0].location.id < 0 ||
      desc[0].location.id >= fake_device_count() || desc[0].flags != CU_MEM_ACCESS_FLAGS_PROT_READWRITE ||
      !whole_mappings(va, size))
    RETURN(CUDA_ERROR_INVALID_VALUE);
  for (CUdeviceptr at = va; at < va + size;) {
    int m = mapping_at(at);
    mprotect((void *)(uintptr_t)at, maps[m].size, PROT_READ | PROT_WRITE);
    maps[m].access = 1;
    at += maps[m].size;
  }
  RETURN(CUDA_SUCCESS);
}

static CUresult f_MemUnmap(CUdeviceptr va, size_t size) {
  ENTER_CTX("cuMemUnmap");
  if (!whole_mappings(va, size)) RETURN(CUDA_ERROR_INVALID_VALUE);
  for (CUdeviceptr at = va; at < va + size;) {
    int m = mapping_at(at);
    void *p = (void *)(uintptr_t)at;
    madvise(p, maps[m].size, MADV_DONTNEED);
    mprotect(p, maps[m].size, PROT_NONE);
    int hi = maps[m].handle;
    handles[hi].mapped = 0;
    if (handles[hi].released) drop_handle(hi);
    at += maps[m].size;
    maps[m].size = 0;
  }
  RETURN(CUDA_SUCCESS);
}

/* ---- knobs and the table ---- */
/* ---- stream capture: one stream per capture, no events across it ---- */

static long live_graphs;

static CUresult f_StreamBeginCapture(CUstream h, CUstreamCaptureMode mode) {
  ENTER_CTX("cuStreamBeginCapture");
  int s = stream_slot(h);
  if (s < 0) RETURN(CUDA_ERROR_INVALID_HANDLE);
  if ((unsigned)mode > CU_STREAM_CAPTURE_MODE_RELAXED) RETURN(CUDA_ERROR_INVALID_VALUE);
  if (s == 0) RETURN(CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
  if (streams[s].cap) RETURN(CUDA_ERROR_ILLEGAL_STATE);
  streams[s].cap = CAP_ACTIVE;
  RETURN(CUDA_SUCCESS);
}

static CUresult f_StreamEndCapture(CUstream h, CUgraph *g) {
  ENTER_CTX("cuStreamEndCapture");
  int s = stream_slot(h);
  if (s < 0) RETURN(CUDA_ERROR_INVALID_HANDLE);
  if (!g) RETURN(CUDA_ERROR_INVALID_VALUE);
  *g = NULL;
  int was = streams[s].cap;
  if (!was) RETURN(CUDA_ERROR_ILLEGAL_STATE);
  streams[s].cap = CAP_NONE;
  if (was == CAP_INVALID) RETURN(CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
  live_graphs++;
  *g = (CUgraph)(void *)&live_graphs; /* one opaque token serves every graph */
  RETURN(CUDA_SUCCESS);
}

static CUresult f_StreamIsCapturing(CUstream h, CUstreamCaptureStatus *cs) {
  ENTER_CTX("cuStreamIsCapturing");
  int s = stream_slot(h);
  if (s < 0) RETURN(CUDA_ERROR_INVALID_HANDLE);
  if (!cs) RETURN(CUDA_ERROR_INVALID_VALUE);
  for (int i = 1; s == 0 && i < MAX_STREAMS; i++)
    if (streams[i].cap && !(streams[i].flags & CU_STREAM_NON_BLOCKING)) RETURN(CUDA_ERROR_STREAM_CAPTURE_IMPLICIT);
  *cs = (CUstreamCaptureStatus)streams[s].cap;
  RETURN(CUDA_SUCCESS);
}

static CUresult f_GraphDestroy(CUgraph g) {
  ENTER_CTX("cuGraphDestroy");
  if (g != (CUgraph)(void *)&live_graphs || live_graphs <= 0) RETURN(CUDA_ERROR_INVALID_VALUE);
  live_graphs--;
  RETURN(CUDA_SUCCESS);
}

long fake_modern_live(const char *what) {
  long n = 0;
  pthread_mutex_lock(&fake_lock);
  if (strcmp(what, "streams") == 0) {
    for (int i = 1; i < MAX_STREAMS; i++) n += streams[i].used && !streams[i].dead;
  } else if (strcmp(what, "events") == 0) {
    for (int i = 0; i < MAX_EVENTS; i++) n += events[i].used;
  } else if (strcmp(what, "host") == 0) {
    for (int i = 0; i < MAX_HOST; i++) n += host[i].p != NULL;
  } else if (strcmp(what, "reservations") == 0) {
    for (int i = 0; i < MAX_RESERVATIONS; i++) n += resv[i].size != 0;
  } else if (strcmp(what, "handles") == 0) {
    for (int i = 0; i < MAX_HANDLES; i++) n += handles[i].used;
  } else if (strcmp(what, "mappings") == 0) {
    for (int i = 0; i < MAX_MAPPINGS; i++) n += maps[i].size != 0;
  } else if (strcmp(what, "graphs") == 0) {
    n = live_graphs;
  } else if (strcmp(what, "pending") == 0) {
    for (int i = 0; i < MAX_STREAMS; i++) n += (long)(streams[i].enq - streams[i].done);
  } else {
    n = -1;
  }
  pthread_mutex_unlock(&fake_lock);
  return n;
}

FAKE_CUDA_API int fake_cuda_stream_info(void *stream, unsigned *flags, int *priority) {
  pthread_mutex_lock(&fake_lock);
  int s = stream_slot((CUstream)stream);
  if (s >= 0) *flags = streams[s].flags, *priority = streams[s].priority;
  pthread_mutex_unlock(&fake_lock);
  return s >= 0 ? 0 : -1;
}

const fake_entry fake_modern_table[] = {
    FAKE_ENTRY("cuStreamCreateWithPriority", f_StreamCreateWithPriority),
    FAKE_ENTRY("cuStreamDestroy", f_StreamDestroy),
    FAKE_ENTRY("cuStreamQuery", f_StreamQuery),
    FAKE_ENTRY("cuStreamSynchronize", f_StreamSynchronize),
    FAKE_ENTRY("cuStreamWaitEvent", f_StreamWaitEvent),
    FAKE_ENTRY("cuStreamWaitValue32", f_StreamWaitValue32),
    FAKE_ENTRY("cuLaunchHostFunc", f_LaunchHostFunc),
    FAKE_ENTRY("cuStreamBeginCapture", f_StreamBeginCapture),
    FAKE_ENTRY("cuStreamEndCapture", f_StreamEndCapture),
    FAKE_ENTRY("cuStreamIsCapturing", f_StreamIsCapturing),
    FAKE_ENTRY("cuGraphDestroy", f_GraphDestroy),
    FAKE_ENTRY("cuEventCreate", f_EventCreate),
    FAKE_ENTRY("cuEventDestroy", f_EventDestroy),
    FAKE_ENTRY("cuEventRecord", f_EventRecord),
    FAKE_ENTRY("cuEventQuery", f_EventQuery),
    FAKE_ENTRY("cuEventSynchronize", f_EventSynchronize),
    FAKE_ENTRY("cuEventElapsedTime", f_EventElapsedTime),
    FAKE_ENTRY("cuMemcpyHtoDAsync", f_MemcpyHtoDAsync),
    FAKE_ENTRY("cuMemcpyDtoHAsync", f_MemcpyDtoHAsync),
    FAKE_ENTRY("cuMemcpyDtoDAsync", f_MemcpyDtoDAsync),
    FAKE_ENTRY("cuMemsetD8Async", f_MemsetD8Async),
    FAKE_ENTRY("cuMemHostAlloc", f_MemHostAlloc),
    FAKE_ENTRY("cuMemFreeHost", f_MemFreeHost),
    FAKE_ENTRY("cuMemHostGetDevicePointer", f_MemHostGetDevicePointer),
    FAKE_ENTRY("cuMemGetAllocationGranularity", f_MemGetAllocationGranularity),
    FAKE_ENTRY("cuMemAddressReserve", f_MemAddressReserve),
    FAKE_ENTRY("cuMemAddressFree", f_MemAddressFree),
    FAKE_ENTRY("cuMemCreate", f_MemCreate),
    FAKE_ENTRY("cuMemRelease", f_MemRelease),
    FAKE_ENTRY("cuMemMap", f_MemMap),
    FAKE_ENTRY("cuMemUnmap", f_MemUnmap),
    FAKE_ENTRY("cuMemSetAccess", f_MemSetAccess),
};
const size_t fake_modern_count = sizeof fake_modern_table / sizeof fake_modern_table[0];
