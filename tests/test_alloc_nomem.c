/* test_alloc_nomem.c — a call that runs out of host memory changes nothing.
 *
 * Every policy, and "caching" with expandable segments, max_split_size,
 * deferred frees (record_stream with events completing later), cross-stream
 * reuse and garbage collection, runs a randomized workload in lockstep on two
 * allocators over two identical devices. The reference never fails. The
 * subject makes each call with its 1st, 2nd, 3rd, ... host allocation
 * failing (nomem_wrap.h), until a call gets through without meeting the
 * failure. Each GRT_ERR_NOMEM must leave the subject exactly as it was: the
 * walker passes and the statistics, the snapshot (every block's address,
 * size, requested bytes and state), the device's counters and the events
 * recorded are unchanged. No counter is exempt: a host-memory failure comes
 * before any counter moves (num_ooms, num_alloc_retries and
 * num_sync_all_streams move only on GRT_ERR_OOM, as in PyTorch). A call that
 * gets through — whether it absorbed the failure or never met it — must give
 * the reference's result and leave the reference's state.
 *
 * The devices are not under test: the simulated device allocates host memory
 * in its own calls and has no reservations, so its allocations are shielded
 * (a backend wrapping the simulated one). tests/test_replay_nomem.c fails
 * the device's allocations too, end to end.
 */
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

#include "alloc/allocator_impl.h"
#include "alloc/bins.h"
#include "alloc/import_expandable.h"
#include "base/rng.h"
#include "gpurt/alloc.h"

#define MiB GRT_MiB

/* ---- deferred frees: an event completes a few workload steps after its record ---- */

#define MAX_EVENTS 65536

typedef struct events {
  uint64_t clock, n;
  uint64_t due[MAX_EVENTS];
  uint64_t destroyed;
} events;

static grt_status ev_record(void *ctx, grt_stream_id stream, uint64_t *event) {
  events *e = ctx;
  if (e->n == MAX_EVENTS) return GRT_ERR_INTERNAL;
  e->due[e->n] = e->clock + 1 + 2 * (stream % 3);
  *event = e->n++;
  return GRT_OK;
}
static int ev_query(void *ctx, uint64_t event) {
  const events *e = ctx;
  return e->clock >= e->due[event];
}
static void ev_sync(void *ctx, uint64_t event) { (void)ctx, (void)event; }
static void ev_destroy(void *ctx, uint64_t event) {
  (void)event;
  ((events *)ctx)->destroyed++;
}

/* ---- the configurations ---- */

typedef struct config {
  const char *name;
  const char *policy;
  const char *conf; /* grt_alloc_config_parse text, or NULL */
  bool deferred;    /* stream_ops whose events complete later */
  bool gc;          /* memory_fraction 0.8, garbage_collection_threshold 0.5 */
  bool imports;     /* import_segment / import_block / the expandable import */
} config;

/* One allocator over its device, with its events. */
typedef struct side {
  grt_device *dev;
  grt_allocator *a;
  grt_stream_ops ops;
  events *ev;
} side;

static void side_open(side *s, const config *c) {
  grt_device_config dc;
  grt_device_config_default(&dc);
  s->dev = shielded_device(&dc);
  s->ev = calloc(1, sizeof *s->ev);
  assert_non_null(s->ev);
  s->ops = (grt_stream_ops){s->ev, ev_record, ev_query, ev_sync, ev_destroy};
  grt_alloc_config cfg;
  grt_alloc_config_default(&cfg);
  char err[128];
  if (c->conf) assert_int_equal(grt_alloc_config_parse(&cfg, c->conf, err, sizeof err), GRT_OK);
  if (c->deferred) cfg.stream_ops = &s->ops;
  if (c->gc) cfg.memory_fraction = 0.8, cfg.garbage_collection_threshold = 0.5;
  assert_int_equal(grt_alloc_create(c->policy, s->dev, &cfg, &s->a), GRT_OK);
}

static void side_close(side *s) {
  assert_int_equal(grt_alloc_destroy(s->a), GRT_OK);
  assert_int_equal(s->ev->destroyed, s->ev->n); /* every event recorded was destroyed */
  assert_int_equal(grt_device_destroy(s->dev), GRT_OK);
  free(s->ev);
}

/* ---- the observable state ---- */

typedef struct observed {
  grt_alloc_stats stats;
  grt_device_stats dev;
  grt_alloc_snapshot *snap;
  uint64_t events, destroyed;
} observed;

static void take(const side *s, observed *out) {
  assert_int_equal(grt_alloc_get_stats(s->a, &out->stats), GRT_OK);
  assert_int_equal(grt_device_get_stats(s->dev, &out->dev), GRT_OK);
  assert_int_equal(grt_alloc_snapshot_take(s->a, &out->snap), GRT_OK);
  out->events = s->ev->n;
  out->destroyed = s->ev->destroyed;
}

static void drop(observed *s) { grt_alloc_snapshot_free(s->snap); }

/* The alloc stats have no padding (every field is 64 bits), nor have the device's. */
static void expect_same(const observed *x, const observed *y, const char *what, const char *where) {
  if (memcmp(&x->stats, &y->stats, sizeof x->stats)) fail_msg("%s: %s: allocator statistics differ", where, what);
  if (memcmp(&x->dev, &y->dev, sizeof x->dev)) fail_msg("%s: %s: device statistics differ", where, what);
  if (!snapshots_equal(x->snap, y->snap)) fail_msg("%s: %s: snapshots differ", where, what);
  if (x->events != y->events || x->destroyed != y->destroyed) fail_msg("%s: %s: events differ", where, what);
}

static void expect_walker(const side *s, const char *where) {
  char msg[256];
  if (grt_alloc_check(s->a, msg, sizeof msg) != GRT_OK) fail_msg("%s: walker: %s", where, msg);
}

/* ---- calls ---- */

enum { OP_MALLOC, OP_FREE, OP_RECORD, OP_EMPTY, OP_INFO, OP_SNAPSHOT, OP_IMPORT_SEG, OP_IMPORT_BLOCK, OP_IMPORT_EXP };
static const char *const op_names[] = {"malloc",   "free",           "record_stream", "empty_cache",      "block_info",
                                       "snapshot", "import_segment", "import_block",  "import_expandable"};

typedef struct op {
  int kind;
  uint64_t size, requested; /* import_expandable: size and offset */
  grt_stream_id stream;
  grt_devptr ptr;
} op;

typedef struct result {
  grt_status st;
  grt_devptr ptr;
  uint64_t size, requested;
  grt_alloc_snapshot *snap;
} result;

static result apply(const side *s, const op *o) {
  result r = {0};
  switch (o->kind) {
    case OP_MALLOC: r.st = grt_alloc_malloc(s->a, o->size, o->stream, &r.ptr); break;
    case OP_FREE: r.st = grt_alloc_free(s->a, o->ptr); break;
    case OP_RECORD: r.st = grt_alloc_record_stream(s->a, o->ptr, o->stream); break;
    case OP_EMPTY: r.st = grt_alloc_empty_cache(s->a); break;
    case OP_INFO: r.st = grt_alloc_block_info(s->a, o->ptr, &r.size, &r.requested); break;
    case OP_SNAPSHOT: r.st = grt_alloc_snapshot_take(s->a, &r.snap); break;
    case OP_IMPORT_SEG: r.st = grt_alloc_import_segment(s->a, o->ptr, o->size, o->stream, 1); break;
    case OP_IMPORT_BLOCK: r.st = grt_alloc_import_block(s->a, o->ptr, o->size, o->requested); break;
    case OP_IMPORT_EXP:
      r.st = grt__alloc_import_expandable(s->a, o->stream, 1, o->requested, o->size, &r.ptr);
      if (r.st) r.ptr = 0;
      break;
  }
  return r;
}

static void expect_same_result(const result *x, const result *y, const char *where) {
  if (x->st != y->st)
    fail_msg("%s: status %s, the reference's %s", where, grt_status_name(y->st), grt_status_name(x->st));
  if (x->ptr != y->ptr || x->size != y->size || x->requested != y->requested)
    fail_msg("%s: results differ from the reference's", where);
  if (x->snap && !snapshots_equal(x->snap, y->snap)) fail_msg("%s: the snapshot taken differs", where);
}

/* ---- the lockstep run ---- */

typedef struct live {
  grt_devptr ptr;
  uint64_t size;
} live;

#define MAX_LIVE 4096

typedef struct world {
  const config *cfg;
  side ref, sub;
  grt__rng rng;
  live live[MAX_LIVE];
  size_t n_live;
  uint64_t live_bytes;
  grt_devptr imported_va; /* the expandable import's reservation */
  uint64_t steps, failures, absorbed;
} world;

/* The call with the n-th host allocation failing, for n = 1, 2, ...: each
 * GRT_ERR_NOMEM changes nothing; the call that gets through matches the reference. */
static result run_call(world *w, const op *o) {
  char where[128];
  snprintf(where, sizeof where, "%s, step %llu (%s)", w->cfg->name, (unsigned long long)w->steps, op_names[o->kind]);
  result ref = apply(&w->ref, o);
  observed before, now;
  take(&w->sub, &before);
  result got;
  for (long n = 1;; n++) {
    if (n > 100000) fail_msg("%s: the call never got through", where);
    nomem_arm(n);
    got = apply(&w->sub, o);
    bool fired = nomem_disarm();
    if (got.st != GRT_ERR_NOMEM) {
      w->absorbed += fired;
      break;
    }
    if (!fired) fail_msg("%s: GRT_ERR_NOMEM with no failed allocation", where);
    w->failures++;
    expect_walker(&w->sub, where);
    take(&w->sub, &now);
    expect_same(&before, &now, "after GRT_ERR_NOMEM", where);
    drop(&now);
  }
  drop(&before);
  expect_same_result(&ref, &got, where);
  grt_alloc_snapshot_free(got.snap);
  grt_alloc_snapshot_free(ref.snap);
  expect_walker(&w->ref, where);
  expect_walker(&w->sub, where);
  observed a, b;
  take(&w->ref, &a);
  take(&w->sub, &b);
  expect_same(&a, &b, "against the reference", where);
  drop(&a);
  drop(&b);
  w->ref.ev->clock++;
  w->sub.ev->clock++;
  w->steps++;
  return ref;
}

static void add_live(world *w, grt_devptr ptr, uint64_t size) {
  assert_true(w->n_live < MAX_LIVE);
  w->live[w->n_live++] = (live){ptr, size};
  w->live_bytes += size;
}

static void step(world *w, const op *o) {
  result r = run_call(w, o);
  if (r.st) return;
  if (o->kind == OP_MALLOC) add_live(w, r.ptr, o->size);
  if (o->kind == OP_IMPORT_BLOCK) add_live(w, o->ptr, o->size);
  if (o->kind == OP_IMPORT_EXP) w->imported_va = r.ptr;
  if (o->kind != OP_FREE) return;
  for (size_t i = 0; i < w->n_live; i++)
    if (w->live[i].ptr == o->ptr) {
      w->live_bytes -= w->live[i].size;
      w->live[i] = w->live[--w->n_live];
      return;
    }
}

static uint64_t below(world *w, uint64_t n) { return grt__rng_below(&w->rng, n); }

static uint64_t random_size(world *w) {
  uint64_t k = below(w, 100);
  if (k < 60) return 1 + below(w, MiB);             /* small pool */
  if (k < 90) return MiB + below(w, 9 * MiB);       /* large pool, 20 MiB segments */
  if (k < 97) return 10 * MiB + below(w, 54 * MiB); /* large segments of their own */
  return 300 * MiB + below(w, 400 * MiB);           /* the device's limit: flush, retry, OOM */
}

static op random_op(world *w) {
  op o = {.stream = below(w, 3)};
  uint64_t k = below(w, 100);
  size_t i = w->n_live ? (size_t)below(w, w->n_live) : 0;
  if (!w->n_live || (k < 45 && w->live_bytes < 400 * MiB)) {
    o.kind = OP_MALLOC;
    o.size = random_size(w);
  } else if (k < 75) {
    o.kind = OP_FREE;
    o.ptr = w->live[i].ptr;
  } else if (k < 85) {
    o.kind = OP_RECORD;
    o.ptr = w->live[i].ptr;
  } else if (k < 89) {
    o.kind = OP_EMPTY;
  } else if (k < 93) {
    o.kind = OP_INFO;
    o.ptr = w->live[i].ptr;
  } else if (k < 96) {
    o.kind = OP_SNAPSHOT;
  } else {
    o.kind = k < 98 ? OP_FREE : OP_INFO; /* refused: inside a block, or foreign */
    o.ptr = k % 2 ? w->live[i].ptr + 256 : 0x1000;
  }
  return o;
}

/* Segments and blocks that existed before: a segment near the top of the
 * device with a live block in it, or a mapped range of a reservation. */
static void imports(world *w) {
  grt_device_config dc;
  grt_device_config_default(&dc);
  if (!strstr(w->cfg->conf ? w->cfg->conf : "", "expandable")) {
    grt_devptr base = dc.base_address + dc.capacity - 64 * MiB;
    step(w, &(op){.kind = OP_IMPORT_SEG, .ptr = base, .size = 20 * MiB});
    step(w, &(op){.kind = OP_IMPORT_BLOCK, .ptr = base + 2 * MiB, .size = 4 * MiB, .requested = 4 * MiB - 100});
    return;
  }
  step(w, &(op){.kind = OP_IMPORT_EXP, .stream = 5, .size = 40 * MiB, .requested = 20 * MiB});
  if (w->imported_va)
    step(w, &(op){.kind = OP_IMPORT_BLOCK, .ptr = w->imported_va + 24 * MiB, .size = 2 * MiB, .requested = MiB});
}

enum { EQUAL = 100, RANDOM_STEPS = 1500 };

static void run_config(void **state) {
  const config *c = *state;
  world *w = calloc(1, sizeof *w);
  assert_non_null(w);
  w->cfg = c;
  grt__rng_seed(&w->rng, 20261130);
  side_open(&w->ref, c);
  side_open(&w->sub, c);
  if (c->imports) imports(w);
  /* a long size class: more equal free blocks than an index chunk holds */
  grt_devptr equal[EQUAL];
  for (int i = 0; i < EQUAL; i++) {
    step(w, &(op){.kind = OP_MALLOC, .size = 4096});
    equal[i] = w->live[w->n_live - 1].ptr;
    step(w, &(op){.kind = OP_MALLOC, .size = 512});
  }
  for (int i = 0; i < EQUAL; i++) step(w, &(op){.kind = OP_FREE, .ptr = equal[i]});
  for (int i = 0; i < RANDOM_STEPS; i++) {
    op o = random_op(w);
    step(w, &o);
  }
  while (w->n_live) step(w, &(op){.kind = OP_FREE, .ptr = w->live[w->n_live - 1].ptr});
  step(w, &(op){.kind = OP_EMPTY});
  grt_alloc_stats st;
  assert_int_equal(grt_alloc_get_stats(w->ref.a, &st), GRT_OK);
  print_message("%s: %llu calls, %llu failed with GRT_ERR_NOMEM, %llu absorbed a failure; %llu OOMs, %llu retries, "
                "%llu events\n",
                c->name, (unsigned long long)w->steps, (unsigned long long)w->failures, (unsigned long long)w->absorbed,
                (unsigned long long)st.num_ooms, (unsigned long long)st.num_alloc_retries,
                (unsigned long long)w->ref.ev->n);
  assert_true(w->failures > 0);
  side_close(&w->ref);
  side_close(&w->sub);
  free(w);
}

/* Creation with the n-th allocation failing: GRT_ERR_NOMEM and nothing left
 * behind (ASan's leak check), or an allocator that works. */
static void create_config(void **state) {
  const config *c = *state;
  side s;
  side_open(&s, c); /* a reference for the configuration */
  grt_alloc_config cfg = s.a->cfg;
  long failed = 0;
  for (long n = 1;; n++) {
    grt_allocator *a = NULL;
    nomem_arm(n);
    grt_status st = grt_alloc_create(c->policy, s.dev, &cfg, &a);
    bool fired = nomem_disarm();
    if (st == GRT_ERR_NOMEM && fired) {
      assert_null(a);
      failed++;
      continue;
    }
    assert_int_equal(st, GRT_OK);
    grt_devptr p;
    assert_int_equal(grt_alloc_malloc(a, 4096, 0, &p), GRT_OK);
    assert_int_equal(grt_alloc_free(a, p), GRT_OK);
    assert_int_equal(grt_alloc_destroy(a), GRT_OK);
    if (!fired) break;
  }
  print_message("%s: creation failed %ld times\n", c->name, failed);
  side_close(&s);
}

/* ---- the index itself: reserved inserts succeed with every allocation failing ---- */

static void test_bins_reserved_inserts(void **state) {
  (void)state;
  grt__bins *b;
  assert_int_equal(grt__bins_create(&b), GRT_OK);
  grt__rng r;
  grt__rng_seed(&r, 7);
  uint64_t addr = 0, keys[4096][2];
  size_t n = 0;
  for (int round = 0; round < 400; round++) {
    size_t want =
        round == 200 ? 100 : 1 + grt__rng_below(&r, 12); /* past the near-class bitmap's reach, and far past */
    assert_int_equal(grt__bins_reserve(b, want), GRT_OK);
    nomem_all();
    for (size_t i = 0; i < want; i++) {
      if (n && grt__rng_below(&r, 3) == 0) { /* erases in between keep the room */
        size_t j = grt__rng_below(&r, n);
        assert_true(grt__bins_erase(b, keys[j][0], keys[j][1]));
        n--;
        keys[j][0] = keys[n][0];
        keys[j][1] = keys[n][1];
      }
      uint64_t size = grt__rng_below(&r, 4) ? 4096 : 512 * (1 + grt__rng_below(&r, 4096));
      addr += 512;
      assert_true(n < 4096);
      keys[n][0] = size;
      keys[n++][1] = addr;
      assert_int_equal(grt__bins_insert(b, size, addr, (void *)(uintptr_t)addr), GRT_OK);
    }
    nomem_disarm();
  }
  assert_int_equal(grt__bins_count(b), n);
  for (size_t i = 0; i < n; i++) {
    grt__bin_entry e;
    assert_true(grt__bins_lower_bound(b, keys[i][0], keys[i][1], &e));
    assert_int_equal(e.addr, keys[i][1]);
  }
  grt__bins_destroy(b);
}

/* Outgrowing the inline entries needs memory: without it the insert (or the
 * reservation) fails and the set is what it was. */
static void test_bins_outgrow_inline(void **state) {
  (void)state;
  grt__bins *b;
  assert_int_equal(grt__bins_create(&b), GRT_OK);
  nomem_all();
  for (uint64_t i = 0; i < 8; i++) assert_int_equal(grt__bins_insert(b, 4096 - 512 * i, i, NULL), GRT_OK);
  assert_int_equal(grt__bins_reserve(b, 0), GRT_OK);
  assert_int_equal(grt__bins_insert(b, 512, 99, NULL), GRT_ERR_NOMEM);
  assert_int_equal(grt__bins_reserve(b, 1), GRT_ERR_NOMEM);
  assert_true(grt__bins_erase(b, 4096, 0));
  assert_int_equal(grt__bins_reserve(b, 1), GRT_OK); /* room inline again */
  nomem_disarm();
  assert_int_equal(grt__bins_count(b), 7);
  grt__bin_entry e;
  assert_true(grt__bins_first(b, &e));
  assert_int_equal(e.size, 512);
  assert_true(grt__bins_last(b, &e));
  assert_int_equal(e.size, 3584);
  assert_false(grt__bins_lower_bound(b, 3585, 0, &e));
  assert_int_equal(grt__bins_insert(b, 512, 99, NULL), GRT_OK);
  assert_int_equal(grt__bins_insert(b, 100, 5, NULL), GRT_OK); /* the ninth: now an index */
  assert_int_equal(grt__bins_insert(b, 100, 5, NULL), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt__bins_count(b), 9);
  assert_true(grt__bins_first(b, &e));
  assert_int_equal(e.size, 100);
  assert_true(grt__bins_next(b, 512, 7, &e));
  assert_int_equal(e.addr, 99);
  assert_true(grt__bins_prev(b, 512, 7, &e));
  assert_int_equal(e.size, 100);
  grt__bins_destroy(b);
}

/* A test stopped by a failed assertion may leave a failure armed. */
static int disarm(void **state) {
  (void)state;
  nomem_disarm();
  return 0;
}

int main(void) {
  static config configs[] = {
      {"caching", "caching", NULL, false, false, true},
      {"caching expandable", "caching", "expandable_segments:True", false, false, true},
      {"caching max_split_size", "caching", "max_split_size_mb:64", false, false, true},
      {"caching deferred frees", "caching", NULL, true, false, true},
      {"caching expandable deferred", "caching", "expandable_segments:True", true, false, true},
      {"caching with_event", "caching", "cross_stream:with_event", true, false, false},
      {"caching gc", "caching", NULL, false, true, false},
      {"sharded", "sharded", NULL, true, false, true},
      {.name = "naive", .policy = "naive"},
      {.name = "bestfit", .policy = "bestfit"},
      {.name = "bump", .policy = "bump"},
      {.name = "buddy", .policy = "buddy"},
      {.name = "slab", .policy = "slab"},
      {.name = "async", .policy = "async"},
  };
  enum { N_CONFIGS = sizeof configs / sizeof configs[0] };
  struct CMUnitTest tests[2 * N_CONFIGS + 2];
  size_t n = 0;
  tests[n++] = (struct CMUnitTest)cmocka_unit_test_setup(test_bins_reserved_inserts, disarm);
  tests[n++] = (struct CMUnitTest)cmocka_unit_test_setup(test_bins_outgrow_inline, disarm);
  for (size_t i = 0; i < N_CONFIGS; i++)
    tests[n++] = (struct CMUnitTest){"create", create_config, disarm, NULL, &configs[i]};
  for (size_t i = 0; i < N_CONFIGS; i++)
    tests[n++] = (struct CMUnitTest){configs[i].name, run_config, disarm, NULL, &configs[i]};
  return _cmocka_run_group_tests("alloc_nomem", tests, n, NULL, NULL);
}
