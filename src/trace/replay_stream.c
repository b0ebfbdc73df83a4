/* replay_stream.c — replaying a native trace file without loading it.
 *
 * Two stages on two threads: a reader thread runs the streaming parser, maps
 * the file's allocation ids to small reusable slots (a hash lookup the
 * replaying thread then does not pay: it indexes arrays) and fills batches of
 * events; the caller's thread replays them (and runs the step callback). NBATCH batches circulate, so memory stays constant and the
 * throughput is that of the slower stage. When the replay reports an error
 * the read is stopped and the file is replayed again on one thread, which
 * yields the same error with the reader's line number (errors are rare; the
 * replay is deterministic).
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "trace/replay_impl.h"

#define BATCH 4096
#define NBATCH 4

typedef struct batch {
  grt_trace_event ev[BATCH];
  grt_stream_id stream[BATCH];
  size_t n;
} batch;

typedef struct pipe_state {
  pthread_mutex_t m;
  pthread_cond_t cv;
  batch *buf;          /* NBATCH batches */
  uint64_t head, tail; /* batches produced / consumed (guarded by m) */
  bool done;           /* the reader finished (guarded by m) */
  bool stop;           /* the consumer wants the reader to stop (guarded by m) */
  grt_status read_st;  /* the reader's result (written before done) */
  grt_trace_error err;
  const char *path;
  /* reader thread only: file id -> slot (open addressing), free slots */
  struct slot_entry { uint64_t id, slot; } *tab;
  size_t tab_mask, tab_count;
  uint64_t *free_slots;
  size_t n_free, cap_free;
  uint64_t next_slot;
} pipe_state;

typedef struct slot_entry slot_entry;

static inline size_t slot_hash(uint64_t id) {
  id ^= id >> 31;
  id *= 0x9e3779b97f4a7c15ULL;
  return (size_t)(id ^ (id >> 29));
}

/* The entry holding id, or the empty entry ending its probe run (where an
 * insert goes): one probe serves both the lookup and the insert. */
static inline slot_entry *slot_probe(pipe_state *p, uint64_t id) {
  for (size_t i = slot_hash(id) & p->tab_mask;; i = (i + 1) & p->tab_mask)
    if (p->tab[i].id == id || p->tab[i].id == UINT64_MAX) return &p->tab[i];
}

static bool slot_grow(pipe_state *p) {
  size_t old = p->tab ? p->tab_mask + 1 : 0, cap = old ? old * 2 : 1024;
  slot_entry *t = malloc(cap * sizeof *t);
  if (!t) return false;
  for (size_t i = 0; i < cap; i++) t[i].id = UINT64_MAX;
  for (size_t i = 0; i < old; i++) {
    if (p->tab[i].id == UINT64_MAX) continue;
    size_t j = slot_hash(p->tab[i].id) & (cap - 1);
    while (t[j].id != UINT64_MAX) j = (j + 1) & (cap - 1);
    t[j] = p->tab[i];
  }
  free(p->tab);
  p->tab = t;
  p->tab_mask = cap - 1;
  return true;
}

static void slot_erase(pipe_state *p, slot_entry *e) {
  size_t hole = (size_t)(e - p->tab), mask = p->tab_mask;
  for (size_t i = (hole + 1) & mask; p->tab[i].id != UINT64_MAX; i = (i + 1) & mask) {
    size_t home = slot_hash(p->tab[i].id) & mask;
    if (((i - home) & mask) >= ((i - hole) & mask)) {
      p->tab[hole] = p->tab[i];
      hole = i;
    }
  }
  p->tab[hole].id = UINT64_MAX;
  p->tab_count--;
}

/* Rewrites ev's id as a slot, or marks it (GRT__SLOT_*). */
static grt_status assign_slot(pipe_state *p, grt_trace_event *ev) {
  if (ev->kind != GRT_TRACE_ALLOC && ev->kind != GRT_TRACE_FREE_REQUESTED && ev->kind != GRT_TRACE_FREE_COMPLETED)
    return GRT_OK;
  if ((!p->tab || 2 * (p->tab_count + 1) > p->tab_mask + 1) && !slot_grow(p)) return GRT_ERR_NOMEM;
  slot_entry *e = slot_probe(p, ev->id);
  bool found = e->id == ev->id; /* as before, an id of UINT64_MAX (the empty mark) counts as found */
  if (ev->kind == GRT_TRACE_ALLOC) {
    if (found) {
      ev->reserved = GRT__SLOT_DUPLICATE;
      return GRT_OK;
    }
    uint64_t slot = p->n_free ? p->free_slots[--p->n_free] : p->next_slot++;
    *e = (slot_entry){ev->id, slot};
    p->tab_count++;
    ev->id = slot;
    return GRT_OK;
  }
  if (!found) {
    ev->reserved = GRT__SLOT_UNMATCHED;
    return GRT_OK;
  }
  uint64_t slot = e->slot;
  if (ev->kind == GRT_TRACE_FREE_COMPLETED) { /* the slot is free for later allocs (events stay in order) */
    if (p->n_free == p->cap_free) {
      size_t cap = p->cap_free ? p->cap_free * 2 : 1024;
      uint64_t *f = realloc(p->free_slots, cap * sizeof *f);
      if (!f) return GRT_ERR_NOMEM;
      p->free_slots = f;
      p->cap_free = cap;
    }
    p->free_slots[p->n_free++] = slot;
    slot_erase(p, e);
  }
  ev->id = slot;
  return GRT_OK;
}

/* Reader side: publish the batch being filled; wait for room. */
static grt_status publish(pipe_state *p) {
  pthread_mutex_lock(&p->m);
  p->head++;
  pthread_cond_broadcast(&p->cv);
  while (p->head - p->tail >= NBATCH && !p->stop) pthread_cond_wait(&p->cv, &p->m);
  bool stop = p->stop;
  pthread_mutex_unlock(&p->m);
  if (stop) return GRT_ERR_STATE;
  p->buf[p->head % NBATCH].n = 0;
  return GRT_OK;
}

static grt_status push_event(void *ctx, const grt_trace_event *ev, grt_stream_id stream) {
  pipe_state *p = ctx;
  batch *b = &p->buf[p->head % NBATCH]; /* only the reader moves head */
  b->ev[b->n] = *ev;
  b->ev[b->n].reserved = 0;
  grt_status st = assign_slot(p, &b->ev[b->n]);
  if (st) return st;
  b->stream[b->n] = stream;
  if (++b->n == BATCH) return publish(p);
  return GRT_OK;
}

static void *reader_main(void *arg) {
  pipe_state *p = arg;
  p->buf[0].n = 0;
  grt_status st = grt_trace_read_native_stream(p->path, push_event, p, &p->err);
  pthread_mutex_lock(&p->m);
  if (!st && p->buf[p->head % NBATCH].n) p->head++; /* the last, partial batch */
  p->read_st = st;
  p->done = true;
  pthread_cond_broadcast(&p->cv);
  pthread_mutex_unlock(&p->m);
  return NULL;
}

/* Consumer side: replays batches until the reader is done or the replay fails. */
static grt_status consume(pipe_state *p, grt_replay *r) {
  for (;;) {
    pthread_mutex_lock(&p->m);
    while (p->tail == p->head && !p->done) pthread_cond_wait(&p->cv, &p->m);
    bool empty = p->tail == p->head;
    pthread_mutex_unlock(&p->m);
    if (empty) return GRT_OK;
    const batch *b = &p->buf[p->tail % NBATCH];
    grt_status st = GRT_OK;
    for (size_t i = 0; i < b->n && !st; i++) st = grt_replay_feed(r, &b->ev[i], b->stream[i]);
    pthread_mutex_lock(&p->m);
    p->tail++;
    if (st) p->stop = true;
    pthread_cond_broadcast(&p->cv);
    pthread_mutex_unlock(&p->m);
    if (st) return st;
  }
}

static grt_status feed_one(void *ctx, const grt_trace_event *ev, grt_stream_id stream) {
  return grt_replay_feed(ctx, ev, stream);
}

/* One thread: the reader calls the replay directly (errors get their line). */
static grt_status run_serial(const char *path, const grt_replay_config *cfg, grt_replay_summary *out,
                             grt_trace_error *err) {
  grt_replay *r;
  grt_status st = grt_replay_create(cfg, NULL, &r);
  if (st) return st;
  st = grt_trace_read_native_stream(path, feed_one, r, err);
  if (st && err && r->err[0]) snprintf(err->reason, sizeof err->reason, "%.200s", r->err);
  if (!st) st = grt_replay_get_summary(r, out);
  grt_replay_destroy(r);
  return st;
}

grt_status grt_replay_stream_file(const char *path, const grt_replay_config *cfg, grt_replay_summary *out,
                                  grt_trace_error *err) {
  if (!path || !out) return GRT_ERR_INVALID_ARG;
  grt_replay *r;
  grt_status st = grt_replay_create(cfg, NULL, &r);
  if (st) return st;
  pipe_state *p = calloc(1, sizeof *p);
  batch *buf = calloc(NBATCH, sizeof *buf);
  pthread_t reader;
  if (!p || !buf) {
    free(p);
    free(buf);
    grt_replay_destroy(r);
    return GRT_ERR_NOMEM;
  }
  pthread_mutex_init(&p->m, NULL);
  pthread_cond_init(&p->cv, NULL);
  p->buf = buf;
  p->path = path;
  grt__replay_use_slots(r);
  bool threaded = pthread_create(&reader, NULL, reader_main, p) == 0;
  grt_status replay_st = GRT_OK;
  if (threaded) {
    replay_st = consume(p, r);
    pthread_join(reader, NULL);
  }
  st = replay_st ? replay_st : p->read_st;
  if (!threaded || replay_st) {
    /* no thread, or the replay failed: replay on one thread for the line context */
    grt_replay_destroy(r);
    r = NULL;
    st = run_serial(path, cfg, out, err);
  } else if (st) {
    if (err) *err = p->err;
  } else {
    st = grt_replay_get_summary(r, out);
  }
  pthread_cond_destroy(&p->cv);
  pthread_mutex_destroy(&p->m);
  free(p->tab);
  free(p->free_slots);
  free(buf);
  free(p);
  grt_replay_destroy(r);
  return st;
}
