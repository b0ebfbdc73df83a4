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

#include "base/status.h"
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
  grt__replay_ids ids; /* reader thread only: the file's live ids -> slots */
} pipe_state;

/* Rewrites ev's id as a slot, or marks it (GRT__SLOT_*). */
static grt_status assign_slot(pipe_state *p, grt_trace_event *ev) {
  uint64_t slot;
  bool live;
  if (ev->kind == GRT_TRACE_ALLOC) {
    if (grt__replay_ids_find(&p->ids, ev->id, &slot)) {
      ev->reserved = GRT__SLOT_DUPLICATE;
      return GRT_OK;
    }
    grt_status st = grt__replay_ids_reserve(&p->ids);
    if (!st) ev->id = grt__replay_ids_add(&p->ids, ev->id);
    return st;
  }
  if (ev->kind == GRT_TRACE_FREE_REQUESTED)
    live = grt__replay_ids_find(&p->ids, ev->id, &slot);
  else if (ev->kind == GRT_TRACE_FREE_COMPLETED) /* the slot is free for later allocs (events stay in order) */
    live = grt__replay_ids_remove(&p->ids, ev->id, &slot);
  else
    return GRT_OK;
  if (live)
    ev->id = slot;
  else
    ev->reserved = GRT__SLOT_UNMATCHED;
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

/* A failed read's reason is the replay's when the replay refused the event. */
static grt_status replay_reason(grt_replay *r, grt_status st, grt_trace_error *err) {
  if (st && err && r->err[0]) snprintf(err->reason, sizeof err->reason, "%.200s", r->err);
  return st;
}

grt_status grt_replay_feed_native_file(grt_replay *r, const char *path, grt_trace_error *err) {
  if (!r || !path) return GRT_ERR_INVALID_ARG;
  return replay_reason(r, grt_trace_read_native_stream(path, feed_one, r, err), err);
}

grt_status grt_replay_feed_stream(grt_replay *r, FILE *f, grt_trace_format format, const char *name,
                                  grt_trace_error *err) {
  if (!r || !f || !name) return GRT_ERR_INVALID_ARG;
  if (format == GRT_TRACE_FORMAT_NATIVE)
    return replay_reason(r, grt_trace_read_native_stream_file(f, name, feed_one, r, err), err);
  if (format == GRT_TRACE_FORMAT_RMM)
    return replay_reason(r, grt_trace_read_rmm_stream_file(f, name, feed_one, r, err), err);
  return GRT_ERR_UNSUPPORTED;
}

/* One thread: the reader calls the replay directly (errors get their line). */
static grt_status run_serial(const char *path, const grt_replay_config *cfg, grt_replay_summary *out,
                             grt_trace_error *err) {
  grt_replay *r;
  grt_status st = grt_replay_create(cfg, NULL, &r);
  if (st) return st;
  st = grt_replay_feed_native_file(r, path, err);
  if (!st) st = grt_replay_get_summary(r, out);
  grt__keep_first(&st, grt_replay_destroy(r));
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
    grt__ignore(grt_replay_destroy(r)); /* the NOMEM is the news; a replay that never ran frees cleanly */
    return GRT_ERR_NOMEM;
  }
  pthread_mutex_init(&p->m, NULL);
  pthread_cond_init(&p->cv, NULL);
  p->buf = buf;
  p->path = path;
  grt__replay_ids_init(&p->ids);
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
    grt_status gone = grt_replay_destroy(r);
    r = NULL;
    st = run_serial(path, cfg, out, err);
    grt__keep_first(&st, gone);
  } else if (st) {
    if (err) *err = p->err;
  } else {
    st = grt_replay_get_summary(r, out);
  }
  pthread_cond_destroy(&p->cv);
  pthread_mutex_destroy(&p->m);
  grt__replay_ids_free(&p->ids);
  free(buf);
  free(p);
  grt__keep_first(&st, grt_replay_destroy(r));
  return st;
}
