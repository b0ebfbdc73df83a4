/* whatif.c — the what-if sweep (gpurt/doctor.h): the settings worth trying
 * on a trace, and their replays in parallel threads over the one loaded
 * trace. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/status.h"
#include "gpurt/doctor.h"

#define MiB ((uint64_t)1 << 20)
#define MAX_ROWS 32

void grt_whatif_options_default(grt_whatif_options *o) {
  if (!o) return;
  memset(o, 0, sizeof *o);
  o->device_model = GRT_DEVICE_MODEL_PAGED;
}

void grt_whatif_free(grt_whatif_row *rows) { free(rows); }

static void add(grt_whatif_row *rows, size_t *n, const char *fmt, unsigned long long v) {
  if (*n >= MAX_ROWS) return;
  memset(&rows[*n], 0, sizeof rows[*n]);
  snprintf(rows[*n].conf, sizeof rows[*n].conf, fmt, v);
  (*n)++;
}

/* The largest request of the trace, in MiB. */
static uint64_t largest_request_mib(const grt_trace_info *in) {
  uint64_t big = 0;
  for (size_t i = 0; i < in->n_events; i++)
    if (in->events[i].kind == GRT_TRACE_ALLOC && in->events[i].size > big) big = in->events[i].size;
  return big / MiB;
}

/* max_split_size_mb values: PyTorch refuses 20 MiB and below, and a limit
 * above the largest request changes nothing; powers of two between. */
static size_t split_ladder(const grt_trace_info *in, uint64_t *mb, size_t cap) {
  uint64_t top = largest_request_mib(in);
  size_t n = 0;
  for (uint64_t v = 32; v <= top && n < cap; v *= 2) mb[n++] = v;
  return n;
}

grt_status grt_whatif_sweep(const grt_trace *trace, grt_whatif_row **out, size_t *n_out) {
  if (!trace || !out || !n_out) return GRT_ERR_INVALID_ARG;
  grt_trace_info in;
  grt_status st = grt_trace_get_info(trace, &in);
  if (st) return st;
  grt_whatif_row *rows = calloc(MAX_ROWS, sizeof *rows);
  if (!rows) return GRT_ERR_NOMEM;
  size_t n = 0;
  uint64_t mb[6];
  size_t n_mb = split_ladder(&in, mb, 6);
  add(rows, &n, "", 0);
  add(rows, &n, "expandable_segments:True", 0);
  for (size_t i = 0; i < n_mb; i++) add(rows, &n, "max_split_size_mb:%llu", (unsigned long long)mb[i]);
  add(rows, &n, "roundup_power2_divisions:4", 0);
  add(rows, &n, "roundup_power2_divisions:8", 0);
  for (size_t i = 0; i < n_mb; i += 2)
    add(rows, &n, "expandable_segments:True,max_split_size_mb:%llu", (unsigned long long)mb[i]);
  add(rows, &n, "expandable_segments:True,roundup_power2_divisions:4", 0);
  /* garbage collection acts only under a memory fraction (PyTorch's allowed_memory_maximum) */
  add(rows, &n, "garbage_collection_threshold:0.6,per_process_memory_fraction:0.95", 0);
  add(rows, &n, "garbage_collection_threshold:0.8,per_process_memory_fraction:0.95", 0);
  if (n_mb) add(rows, &n, "max_split_size_mb:%llu,roundup_power2_divisions:4", (unsigned long long)mb[n_mb / 2]);
  *out = rows;
  *n_out = n;
  return GRT_OK;
}

/* ---- one row ---- */

static void fail_row(grt_whatif_row *row, grt_status st, const char *why) {
  row->status = st;
  snprintf(row->note, sizeof row->note, "%s", why);
}

static void config_of(const grt_whatif_options *o, const char *conf, grt_replay_config *c) {
  grt_replay_config_default(c);
  c->policy = "caching";
  c->alloc_conf = conf[0] ? conf : NULL;
  c->capacity = o->capacity;
  c->placement = GRT_REPLAY_PLACE_FIRST_FIT;
  c->device_model = o->device_model;
  c->prefill_start = true;
}

static void fill(grt_whatif_row *row, const grt_replay_summary *s) {
  row->ooms = s->ooms;
  row->recorded_ooms = s->recorded_ooms;
  row->recorded_ooms_avoided = s->recorded_ooms - s->recorded_ooms_failed;
  row->peak_reserved = s->peak_reserved;
  row->final_reserved = s->final_reserved;
  row->peak_allocated = s->peak_allocated;
  row->device_mallocs = s->device_mallocs;
  row->device_frees = s->device_frees;
  row->syncs = s->syncs;
  row->alloc_retries = s->num_alloc_retries;
}

static void run_row(const grt_trace *t, const grt_whatif_options *o, grt_whatif_row *row) {
  grt_replay_config c;
  config_of(o, row->conf, &c);
  grt_replay *r;
  grt_status st = grt_replay_open(t, &c, &r);
  if (st) {
    fail_row(row, st, st == GRT_ERR_PARSE ? "the settings do not parse" : grt_status_str(st));
    return;
  }
  if (!(st = grt_replay_prefill_start(r))) st = grt_replay_run(r);
  grt_replay_summary s;
  if (!st) st = grt_replay_get_summary(r, &s);
  if (st) fail_row(row, st, grt_replay_last_error(r));
  grt__keep_first(&st, grt_replay_destroy(r));
  if (st) {
    if (!row->status) fail_row(row, st, grt_status_str(st));
    return;
  }
  fill(row, &s);
  uint64_t cap = 0;
  if (o->search && grt_replay_min_capacity(t, &c, 0, &cap, NULL) == GRT_OK) row->min_capacity = cap;
}

/* ---- one row's figures over time ---- */

static void reduce(const grt_replay_sample *in, size_t n, size_t max_points, grt_replay_sample *out, size_t *n_out) {
  size_t buckets = n < max_points ? n : max_points;
  for (size_t b = 0; b < buckets; b++) {
    size_t lo = b * n / buckets, hi = (b + 1) * n / buckets;
    grt_replay_sample m = in[lo];
    for (size_t i = lo + 1; i < hi; i++) {
      const grt_replay_sample *x = &in[i];
      if (x->reserved > m.reserved) m.reserved = x->reserved;
      if (x->allocated > m.allocated) m.allocated = x->allocated;
      if (x->requested > m.requested) m.requested = x->requested;
      if (x->active > m.active) m.active = x->active;
      if (x->cached > m.cached) m.cached = x->cached;
      if (x->largest_free > m.largest_free) m.largest_free = x->largest_free;
      if (x->live > m.live) m.live = x->live;
      if (x->fragmentation > m.fragmentation) m.fragmentation = x->fragmentation;
      m.device_mallocs = x->device_mallocs, m.device_frees = x->device_frees; /* cumulative: the last */
    }
    out[b] = m;
  }
  *n_out = buckets;
}

grt_status grt_whatif_series(const grt_trace *trace, const grt_whatif_options *o, const char *conf, size_t max_points,
                             grt_replay_sample **samples, size_t *n, grt_replay_summary *summary) {
  if (!trace || !o || !conf || !max_points || !samples || !n || !summary) return GRT_ERR_INVALID_ARG;
  *samples = NULL;
  *n = 0;
  grt_replay_config c;
  config_of(o, conf, &c);
  c.record_series = true;
  grt_replay *r;
  grt_status st = grt_replay_open(trace, &c, &r);
  if (st) return st;
  const grt_replay_sample *all = NULL;
  size_t n_all = 0;
  if (!(st = grt_replay_prefill_start(r))) st = grt_replay_run(r);
  if (!st) st = grt_replay_get_summary(r, summary);
  if (!st) st = grt_replay_series(r, &all, &n_all);
  grt_replay_sample *out = NULL;
  if (!st && !(out = malloc((n_all < max_points ? n_all : max_points) * sizeof *out + 1))) st = GRT_ERR_NOMEM;
  if (!st) reduce(all, n_all, max_points, out, n);
  grt__keep_first(&st, grt_replay_destroy(r));
  if (st) {
    free(out);
    *n = 0;
    return st;
  }
  *samples = out;
  return GRT_OK;
}

/* ---- threads ---- */

typedef struct pool {
  const grt_trace *t;
  const grt_whatif_options *o;
  grt_whatif_row *rows;
  size_t n, next;
  pthread_mutex_t lock;
} pool;

static void *worker(void *arg) {
  pool *p = arg;
  for (;;) {
    pthread_mutex_lock(&p->lock);
    size_t i = p->next < p->n ? p->next++ : p->n;
    pthread_mutex_unlock(&p->lock);
    if (i == p->n) return NULL;
    run_row(p->t, p->o, &p->rows[i]);
  }
}

static unsigned thread_count(const grt_whatif_options *o, size_t n) {
  long cpus = sysconf(_SC_NPROCESSORS_ONLN);
  unsigned k = o->threads ? o->threads : (unsigned)(cpus > 0 ? cpus : 1);
  if (k > n) k = (unsigned)n;
  return k ? k : 1;
}

grt_status grt_whatif_run(const grt_trace *trace, const grt_whatif_options *o, grt_whatif_row *rows, size_t n) {
  if (!trace || !o || (!rows && n)) return GRT_ERR_INVALID_ARG;
  if (!n) return GRT_OK;
  pool p = {trace, o, rows, n, 0, PTHREAD_MUTEX_INITIALIZER};
  unsigned k = thread_count(o, n);
  pthread_t *th = calloc(k, sizeof *th);
  if (!th) return GRT_ERR_NOMEM;
  unsigned started = 0;
  grt_status st = GRT_OK;
  for (; started < k; started++)
    if (pthread_create(&th[started], NULL, worker, &p)) {
      st = GRT_ERR_NOMEM;
      break;
    }
  if (!started) worker(&p); /* no thread at all: this one does the work */
  for (unsigned i = 0; i < started; i++) pthread_join(th[i], NULL);
  free(th);
  return started ? GRT_OK : st;
}
