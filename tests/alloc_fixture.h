/* alloc_fixture.h — shared helpers for allocator tests: a device + allocator
 * pair, and a fake completion oracle whose events complete when told to. */
#ifndef GRT_TESTS_ALLOC_FIXTURE_H
#define GRT_TESTS_ALLOC_FIXTURE_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <cmocka.h>

#include "gpurt/alloc.h"

#define MiB GRT_MiB

typedef struct fake_events {
  unsigned char done[1 << 16]; /* event id -> completed */
  uint64_t next;
  uint64_t recorded, synced, destroyed;
  grt_stream_id last_stream[1 << 16];
} fake_events;

static inline grt_status fake_record(void *ctx, grt_stream_id s, uint64_t *ev) {
  fake_events *f = ctx;
  uint64_t id = f->next++ % (1 << 16);
  f->done[id] = 0;
  f->last_stream[id] = s;
  f->recorded++;
  *ev = id;
  return GRT_OK;
}
static inline int fake_query(void *ctx, uint64_t ev) { return ((fake_events *)ctx)->done[ev]; }
static inline void fake_sync(void *ctx, uint64_t ev) {
  fake_events *f = ctx;
  f->done[ev] = 1;
  f->synced++;
}
static inline void fake_destroy(void *ctx, uint64_t ev) {
  (void)ev;
  ((fake_events *)ctx)->destroyed++;
}

static inline grt_stream_ops fake_ops(fake_events *f) {
  grt_stream_ops o = {f, fake_record, fake_query, fake_sync, fake_destroy};
  return o;
}

typedef struct fixture {
  grt_device *dev;
  grt_allocator *a;
} fixture;

static inline fixture make_fixture(const char *policy, uint64_t capacity, const grt_alloc_config *cfg) {
  fixture fx;
  grt_device_config dc;
  grt_device_config_default(&dc);
  dc.capacity = capacity;
  assert_int_equal(grt_device_create(&dc, &fx.dev), GRT_OK);
  assert_int_equal(grt_alloc_create(policy, fx.dev, cfg, &fx.a), GRT_OK);
  return fx;
}

static inline void assert_consistent(grt_allocator *a) {
  char msg[256];
  grt_status st = grt_alloc_check(a, msg, sizeof msg);
  if (st) fprintf(stderr, "invariant violated: %s\n", msg);
  assert_int_equal(st, GRT_OK);
}

static inline void drop_fixture(fixture *fx) {
  assert_consistent(fx->a);
  assert_int_equal(grt_alloc_destroy(fx->a), GRT_OK);
  assert_int_equal(grt_device_destroy(fx->dev), GRT_OK);
}

static inline grt_alloc_stats stats_of(grt_allocator *a) {
  grt_alloc_stats s;
  assert_int_equal(grt_alloc_get_stats(a, &s), GRT_OK);
  return s;
}

static inline grt_device_stats dev_stats(grt_device *d) {
  grt_device_stats s;
  assert_int_equal(grt_device_get_stats(d, &s), GRT_OK);
  return s;
}

static inline grt_devptr must_malloc(grt_allocator *a, uint64_t size, grt_stream_id s) {
  grt_devptr p = 0;
  grt_status st = grt_alloc_malloc(a, size, s, &p);
  if (st) fprintf(stderr, "malloc(%llu) failed: %s\n", (unsigned long long)size, grt_alloc_last_error(a));
  assert_int_equal(st, GRT_OK);
  return p;
}

#endif
