/* test_caching_pools_nomem.c — a call on private pools that runs out of host
 * memory changes nothing.
 *
 * A randomized workload of pool calls (retain, begin, end, release, the
 * pool's empty_cache, import into a pool) among mallocs, frees,
 * record_stream and empty_cache runs in lockstep on two caching allocators
 * over two identical devices (their own allocations shielded, as in
 * tests/test_alloc_nomem.c). The subject makes each call with its 1st, 2nd,
 * ... host allocation failing (nomem_wrap.h) until it gets through; every
 * GRT_ERR_NOMEM must leave the walker passing and the statistics, device
 * counters, snapshot (pool ids included), events and every pool's info as
 * they were, and the call that gets through must match the reference. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "nomem_wrap.h"
#include "shielded_device.h"
#include "snapshot_equal.h"

#include "base/rng.h"
#include "gpurt/alloc.h"

#define MiB GRT_MiB
#define N_IDS 3

/* Events complete a few steps after their record. */
typedef struct events {
  uint64_t clock, n, destroyed;
  uint64_t due[1 << 16];
} events;

static grt_status ev_record(void *ctx, grt_stream_id stream, uint64_t *event) {
  events *e = ctx;
  if (e->n == 1 << 16) return GRT_ERR_INTERNAL;
  e->due[e->n] = e->clock + 1 + 2 * (stream % 3);
  *event = e->n++;
  return GRT_OK;
}
static int ev_query(void *ctx, uint64_t event) { return ((events *)ctx)->clock >= ((events *)ctx)->due[event]; }
static void ev_sync(void *ctx, uint64_t event) { (void)ctx, (void)event; }
static void ev_destroy(void *ctx, uint64_t event) {
  (void)event;
  ((events *)ctx)->destroyed++;
}

typedef struct side {
  grt_device *dev;
  grt_allocator *a;
  grt_stream_ops ops;
  events *ev;
} side;

static void side_open(side *s, const char *conf) {
  grt_device_config dc;
  grt_device_config_default(&dc);
  dc.capacity = 256 * MiB;
  s->dev = shielded_device(&dc);
  s->ev = calloc(1, sizeof *s->ev);
  assert_non_null(s->ev);
  s->ops = (grt_stream_ops){s->ev, ev_record, ev_query, ev_sync, ev_destroy};
  grt_alloc_config cfg;
  grt_alloc_config_default(&cfg);
  char err[128];
  if (conf) assert_int_equal(grt_alloc_config_parse(&cfg, conf, err, sizeof err), GRT_OK);
  cfg.stream_ops = &s->ops;
  assert_int_equal(grt_alloc_create("caching", s->dev, &cfg, &s->a), GRT_OK);
}

static void side_close(side *s) {
  assert_int_equal(grt_alloc_destroy(s->a), GRT_OK);
  assert_int_equal(s->ev->destroyed, s->ev->n);
  assert_int_equal(grt_device_destroy(s->dev), GRT_OK);
  free(s->ev);
}

static grt_pool_id id_of(int i) { return (grt_pool_id){(uint64_t)i + 1, 0}; }

typedef struct observed {
  grt_alloc_stats stats;
  grt_device_stats dev;
  grt_alloc_snapshot *snap;
  uint64_t events, destroyed;
  grt_status info_st[N_IDS];
  grt_pool_info info[N_IDS];
} observed;

static void take(const side *s, observed *o) {
  memset(o, 0, sizeof *o);
  assert_int_equal(grt_alloc_get_stats(s->a, &o->stats), GRT_OK);
  assert_int_equal(grt_device_get_stats(s->dev, &o->dev), GRT_OK);
  assert_int_equal(grt_alloc_snapshot_take(s->a, &o->snap), GRT_OK);
  o->events = s->ev->n;
  o->destroyed = s->ev->destroyed;
  for (int i = 0; i < N_IDS; i++) o->info_st[i] = grt_alloc_pool_info(s->a, id_of(i), &o->info[i]);
}

static void expect_same(const observed *x, const observed *y, const char *what, const char *where) {
  if (memcmp(&x->stats, &y->stats, sizeof x->stats)) fail_msg("%s: %s: allocator statistics differ", where, what);
  if (memcmp(&x->dev, &y->dev, sizeof x->dev)) fail_msg("%s: %s: device statistics differ", where, what);
  if (!snapshots_equal(x->snap, y->snap)) fail_msg("%s: %s: snapshots differ", where, what);
  if (x->events != y->events || x->destroyed != y->destroyed) fail_msg("%s: %s: events differ", where, what);
  if (memcmp(x->info_st, y->info_st, sizeof x->info_st) || memcmp(x->info, y->info, sizeof x->info))
    fail_msg("%s: %s: pools differ", where, what);
}

static void expect_walker(const side *s, const char *where) {
  char msg[256];
  if (grt_alloc_check(s->a, msg, sizeof msg) != GRT_OK) fail_msg("%s: walker: %s", where, msg);
}

enum { OP_MALLOC, OP_FREE, OP_RECORD, OP_EMPTY, OP_RETAIN, OP_BEGIN, OP_END, OP_RELEASE, OP_POOL_EMPTY, OP_IMPORT };
static const char *const op_names[] = {"malloc",     "free",     "record_stream", "empty_cache",      "pool_retain",
                                       "pool_begin", "pool_end", "pool_release",  "pool_empty_cache", "import_pool"};

typedef struct op {
  int kind, pool;
  uint64_t size;
  grt_stream_id stream;
  grt_devptr ptr;
} op;

static grt_status apply(const side *s, const op *o, grt_devptr *ptr) {
  grt_pool_id id = id_of(o->pool);
  switch (o->kind) {
    case OP_MALLOC: return grt_alloc_malloc(s->a, o->size, o->stream, ptr);
    case OP_FREE: return grt_alloc_free(s->a, o->ptr);
    case OP_RECORD: return grt_alloc_record_stream(s->a, o->ptr, o->stream);
    case OP_EMPTY: return grt_alloc_empty_cache(s->a);
    case OP_RETAIN: return grt_alloc_pool_retain(s->a, id);
    case OP_BEGIN: return grt_alloc_pool_begin(s->a, id, o->stream);
    case OP_END: return grt_alloc_pool_end(s->a, id, o->stream);
    case OP_RELEASE: return grt_alloc_pool_release(s->a, id);
    case OP_POOL_EMPTY: return grt_alloc_pool_empty_cache(s->a, id);
    default: return grt_alloc_import_segment_pool(s->a, id, o->ptr, o->size, o->stream, 1);
  }
}

#define MAX_LIVE 512

typedef struct world {
  side ref, sub;
  grt__rng rng;
  grt_devptr live[MAX_LIVE];
  size_t n_live;
  uint64_t steps, failures, imports;
  uint64_t got_through[OP_IMPORT + 1], refused_nomem[OP_IMPORT + 1]; /* by kind of call */
} world;

/* The call with its n-th host allocation failing, n = 1, 2, ...; returns the reference's status. */
static grt_status run_call(world *w, const op *o, grt_devptr *out) {
  char where[96];
  snprintf(where, sizeof where, "step %llu (%s)", (unsigned long long)w->steps, op_names[o->kind]);
  grt_devptr rp = 0, sp = 0;
  grt_status rst = apply(&w->ref, o, &rp), sst;
  observed before, now;
  take(&w->sub, &before);
  for (long n = 1;; n++) {
    if (n > 100000) fail_msg("%s: the call never got through", where);
    nomem_arm(n);
    sst = apply(&w->sub, o, &sp);
    bool fired = nomem_disarm();
    if (sst != GRT_ERR_NOMEM) break;
    if (!fired) fail_msg("%s: GRT_ERR_NOMEM with no failed allocation", where);
    w->failures++;
    w->refused_nomem[o->kind]++;
    expect_walker(&w->sub, where);
    take(&w->sub, &now);
    expect_same(&before, &now, "after GRT_ERR_NOMEM", where);
    grt_alloc_snapshot_free(now.snap);
  }
  grt_alloc_snapshot_free(before.snap);
  w->got_through[o->kind] += sst == GRT_OK;
  if (sst != rst || sp != rp) fail_msg("%s: %s, the reference's %s", where, grt_status_name(sst), grt_status_name(rst));
  expect_walker(&w->ref, where);
  expect_walker(&w->sub, where);
  observed x, y;
  take(&w->ref, &x);
  take(&w->sub, &y);
  expect_same(&x, &y, "against the reference", where);
  grt_alloc_snapshot_free(x.snap);
  grt_alloc_snapshot_free(y.snap);
  w->ref.ev->clock++;
  w->sub.ev->clock++;
  w->steps++;
  *out = rp;
  return rst;
}

static uint64_t below(world *w, uint64_t n) { return grt__rng_below(&w->rng, n); }

/* Pool calls are drawn blind: refused ones (an unknown pool, an end without
 * begin) must be refused alike and change nothing either. */
static op random_op(world *w) {
  op o = {.stream = below(w, 3), .pool = (int)below(w, N_IDS)};
  uint64_t k = below(w, 100);
  size_t i = w->n_live ? (size_t)below(w, w->n_live) : 0;
  if (!w->n_live || k < 30) {
    o.kind = OP_MALLOC;
    o.size = below(w, 3) ? 1 + below(w, MiB) : MiB + below(w, 30 * MiB);
  } else if (k < 50) {
    o.kind = OP_FREE;
    o.ptr = w->live[i];
  } else if (k < 56) {
    o.kind = OP_RECORD;
    o.ptr = w->live[i];
  } else if (k < 60) {
    o.kind = OP_EMPTY;
  } else if (k < 98) {
    o.kind = OP_RETAIN + (int)below(w, 5);
  } else {
    grt_device_config dc;
    grt_device_config_default(&dc);
    o.kind = OP_IMPORT;
    o.ptr = dc.base_address + 256 * MiB - 20 * MiB * (1 + w->imports % 3);
    o.size = 20 * MiB;
    w->imports++;
  }
  return o;
}

static void step(world *w, const op *o) {
  grt_devptr p;
  grt_status st = run_call(w, o, &p);
  if (st) return;
  if (o->kind == OP_MALLOC && w->n_live < MAX_LIVE) w->live[w->n_live++] = p;
  if (o->kind != OP_FREE) return;
  for (size_t i = 0; i < w->n_live; i++)
    if (w->live[i] == o->ptr) {
      w->live[i] = w->live[--w->n_live];
      return;
    }
}

static void run(void **state) {
  const char *conf = *(const char *const *)*state;
  world *w = calloc(1, sizeof *w);
  assert_non_null(w);
  grt__rng_seed(&w->rng, 20261201);
  side_open(&w->ref, conf);
  side_open(&w->sub, conf);
  for (int i = 0; i < 2500; i++) {
    op o = random_op(w);
    step(w, &o);
  }
  while (w->n_live) step(w, &(op){.kind = OP_FREE, .ptr = w->live[w->n_live - 1]});
  print_message("%s: %llu calls, %llu failed with GRT_ERR_NOMEM\n", conf ? conf : "default",
                (unsigned long long)w->steps, (unsigned long long)w->failures);
  for (int k = 0; k <= OP_IMPORT; k++)
    print_message("  %s: %llu succeeded, %llu refused for host memory\n", op_names[k],
                  (unsigned long long)w->got_through[k], (unsigned long long)w->refused_nomem[k]);
  /* the calls that create pools were each made to fail, and each pool call got through */
  const int allocating[] = {OP_MALLOC, OP_RETAIN, OP_BEGIN, OP_IMPORT};
  for (size_t k = 0; k < sizeof allocating / sizeof *allocating; k++) assert_true(w->refused_nomem[allocating[k]] > 0);
  for (int k = OP_RETAIN; k <= OP_IMPORT; k++) assert_true(w->got_through[k] > 0);
  side_close(&w->ref);
  side_close(&w->sub);
  free(w);
}

static int disarm(void **state) {
  (void)state;
  nomem_disarm();
  return 0;
}

int main(void) {
  static const char *confs[] = {NULL, "expandable_segments:True", "max_split_size_mb:64,cross_stream:with_event"};
  struct CMUnitTest tests[3];
  for (int i = 0; i < 3; i++)
    tests[i] = (struct CMUnitTest){confs[i] ? confs[i] : "default", run, disarm, NULL, &confs[i]};
  return _cmocka_run_group_tests("caching_pools_nomem", tests, 3, NULL, NULL);
}
