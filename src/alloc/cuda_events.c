/* cuda_events.c — grt_stream_ops over real CUDA events, so the caching
 * allocator's record_stream / deferred frees work on GPU streams.
 *
 * Event ids index a growing array of grt_cuda_event; destroyed ids go to a free
 * list and their CUevent is reused (creating events costs a driver call).
 * Streams are wrapped once per id and cached (id -> grt_cuda_stream). The
 * mutex guards every field; the ops are called with the allocator's mutex
 * held (lock order: allocator, then this).
 */
#include <assert.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "base/status.h"
#include "base/u64map.h"
#include "gpurt/alloc.h"
#include "gpurt/cuda.h"

struct grt_cuda_events {
  pthread_mutex_t lock;
  grt_device *dev;
  grt_stream_ops ops;
  grt__u64map streams; /* stream id -> grt_cuda_stream* (borrowed handles) */
  grt_cuda_event **events;
  size_t n_events, cap_events;
  uint64_t *free_ids;
  size_t n_free;
  uint64_t recorded;
};

/* The wrapper of stream id, made on its first use. */
static grt_status stream_for(grt_cuda_events *e, grt_stream_id id, grt_cuda_stream **out) {
  grt_cuda_stream *s = grt__u64map_get(&e->streams, id);
  if (s) {
    *out = s;
    return GRT_OK;
  }
  if (!grt__u64map_reserve(&e->streams, 1)) return GRT_ERR_NOMEM; /* before the wrapper: nothing to undo */
  grt_status st = grt_cuda_stream_wrap(e->dev, (void *)(uintptr_t)id, &s);
  if (st) return st;
  bool put = grt__u64map_put(&e->streams, id, s);
  assert(put);
  (void)put;
  *out = s;
  return GRT_OK;
}

/* A free event id, creating an event when none is pooled. */
static grt_status take_event(grt_cuda_events *e, uint64_t *id) {
  if (e->n_free) {
    *id = e->free_ids[--e->n_free];
    return GRT_OK;
  }
  if (e->n_events == e->cap_events) {
    size_t cap = e->cap_events ? 2 * e->cap_events : 64;
    grt_cuda_event **ev = realloc(e->events, cap * sizeof *ev);
    if (!ev) return GRT_ERR_NOMEM;
    e->events = ev;
    uint64_t *fr = realloc(e->free_ids, cap * sizeof *fr);
    if (!fr) return GRT_ERR_NOMEM;
    e->free_ids = fr;
    e->cap_events = cap;
  }
  grt_status st = grt_cuda_event_create(e->dev, GRT_CUDA_EVENT_DEFAULT, &e->events[e->n_events]);
  if (st) return st;
  *id = e->n_events++;
  return GRT_OK;
}

static grt_status ev_record(void *ctx, grt_stream_id stream, uint64_t *event) {
  grt_cuda_events *e = ctx;
  pthread_mutex_lock(&e->lock);
  grt_cuda_stream *s = NULL;
  uint64_t id = 0;
  grt_status st = stream_for(e, stream, &s);
  if (!st) st = take_event(e, &id);
  if (st == GRT_OK) {
    st = grt_cuda_event_record(e->events[id], s);
    if (st) e->free_ids[e->n_free++] = id;
  }
  if (st == GRT_OK) {
    e->recorded++;
    *event = id;
  }
  pthread_mutex_unlock(&e->lock);
  return st;
}

static grt_cuda_event *event_at(grt_cuda_events *e, uint64_t id) {
  pthread_mutex_lock(&e->lock);
  grt_cuda_event *ev = id < e->n_events ? e->events[id] : NULL;
  pthread_mutex_unlock(&e->lock);
  return ev;
}

/* A driver error counts as completed: the allocator must not hold memory forever. */
static int ev_query(void *ctx, uint64_t event) {
  grt_cuda_event *ev = event_at(ctx, event);
  return !ev || grt_cuda_event_query(ev) != GRT_ERR_NOT_READY;
}

static void ev_sync(void *ctx, uint64_t event) {
  grt_cuda_event *ev = event_at(ctx, event);
  /* A driver error counts as completed, as in ev_query: the interface has
   * no status here, and the caller then treats the event as done. */
  if (ev) grt__ignore(grt_cuda_event_synchronize(ev));
}

static void ev_destroy(void *ctx, uint64_t event) {
  grt_cuda_events *e = ctx;
  pthread_mutex_lock(&e->lock);
  if (event < e->n_events) e->free_ids[e->n_free++] = event;
  pthread_mutex_unlock(&e->lock);
}

grt_status grt_cuda_events_create(grt_device *dev, grt_cuda_events **out) {
  if (!dev || !out) return GRT_ERR_INVALID_ARG;
  *out = NULL;
  if (strcmp(grt_device_backend(dev), "cuda") != 0) return GRT_ERR_UNSUPPORTED;
  grt_cuda_events *e = calloc(1, sizeof *e);
  if (!e) return GRT_ERR_NOMEM;
  pthread_mutex_init(&e->lock, NULL);
  e->dev = dev;
  grt__u64map_init(&e->streams);
  e->ops = (grt_stream_ops){e, ev_record, ev_query, ev_sync, ev_destroy};
  *out = e;
  return GRT_OK;
}

grt_status grt_cuda_events_destroy(grt_cuda_events *e) {
  if (!e) return GRT_OK;
  pthread_mutex_lock(&e->lock);
  int busy = e->n_free != e->n_events;
  pthread_mutex_unlock(&e->lock);
  if (busy) return GRT_ERR_BUSY;
  /* Every step runs; the first driver failure is the result. */
  grt_status st = GRT_OK;
  for (size_t i = 0; i < e->n_events; i++) grt__keep_first(&st, grt_cuda_event_destroy(e->events[i]));
  grt__u64map_iter it = grt__u64map_begin(&e->streams);
  void *s;
  while (grt__u64map_next(&e->streams, &it, NULL, &s)) grt__keep_first(&st, grt_cuda_stream_destroy(s));
  grt__u64map_free(&e->streams);
  free(e->events);
  free(e->free_ids);
  pthread_mutex_destroy(&e->lock);
  free(e);
  return st;
}

const grt_stream_ops *grt_cuda_events_stream_ops(grt_cuda_events *e) { return e ? &e->ops : NULL; }

uint64_t grt_cuda_events_recorded(grt_cuda_events *e) {
  if (!e) return 0;
  pthread_mutex_lock(&e->lock);
  uint64_t n = e->recorded;
  pthread_mutex_unlock(&e->lock);
  return n;
}
