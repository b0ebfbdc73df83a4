/* test_caching_walker.c — the caching allocator's structure walker
 * (grt_alloc_check -> grt__caching_check) must notice each kind of
 * corruption: every test here breaks one invariant of a live allocator by
 * hand (through the internal structures), checks that the walker fails with
 * the message naming it, restores the field and checks that it passes again.
 * A walker that cannot fail would make every randomized suite vacuous. */
#include <stdlib.h>
#include <string.h>

#include "alloc/allocator_impl.h"
#include "alloc/caching.h"
#include "alloc_fixture.h"

typedef struct scene {
  fixture fx;
  caching *c;
  cblock *a, *b, *rest; /* a small segment: [a][b][rest, free] */
  cblock *big;          /* alone at the start of a large segment */
  grt_devptr pa, pb, pbig;
} scene;

static void setup(scene *s) {
  s->fx = make_fixture("caching", 256 * MiB, NULL);
  s->c = s->fx.a->impl;
  s->pa = must_malloc(s->fx.a, 1000, 0);
  s->pb = must_malloc(s->fx.a, 2000, 0);
  s->pbig = must_malloc(s->fx.a, 3 * MiB, 0);
  s->a = grt__u64map_get(&s->c->active, s->pa);
  s->b = grt__u64map_get(&s->c->active, s->pb);
  s->big = grt__u64map_get(&s->c->active, s->pbig);
  assert_non_null(s->a);
  assert_non_null(s->b);
  assert_non_null(s->big);
  assert_ptr_equal(s->a->next, s->b);
  s->rest = s->b->next;
  assert_non_null(s->rest);
  assert_null(s->rest->next);
  assert_int_equal(s->c->segs.n, 2);
  assert_consistent(s->fx.a);
}

static void teardown(scene *s) {
  assert_int_equal(grt_alloc_free(s->fx.a, s->pa), GRT_OK);
  assert_int_equal(grt_alloc_free(s->fx.a, s->pb), GRT_OK);
  assert_int_equal(grt_alloc_free(s->fx.a, s->pbig), GRT_OK);
  drop_fixture(&s->fx);
}

/* The walker fails naming `needle`. */
static void expect_broken(scene *s, const char *needle) {
  char msg[256] = "";
  assert_int_equal(grt_alloc_check(s->fx.a, msg, sizeof msg), GRT_ERR_INTERNAL);
  if (!strstr(msg, needle)) fail_msg("walker said '%s', want '%s'", msg, needle);
}

static void test_walker_statistics(void **state) {
  (void)state;
  scene s;
  setup(&s);
  grt_alloc_stats *st = &s.fx.a->stats;
  struct {
    grt_stat *stat;
    const char *name;
  } stats[] = {
      {st->allocation, "stat allocation[0]"},         {st->allocated_bytes, "stat allocated_bytes[0]"},
      {st->active, "stat active[0]"},                 {st->active_bytes, "stat active_bytes[0]"},
      {st->requested_bytes, "stat requested_bytes[0]"}, {st->segment, "stat segment[0]"},
      {st->reserved_bytes, "stat reserved_bytes[0]"}, {st->inactive_split, "stat inactive_split[0]"},
      {st->inactive_split_bytes, "stat inactive_split_bytes[0]"},
  };
  for (size_t i = 0; i < sizeof stats / sizeof stats[0]; i++) {
    stats[i].stat[GRT_STAT_ALL].current += 512;
    expect_broken(&s, stats[i].name);
    stats[i].stat[GRT_STAT_ALL].current -= 512;
    assert_consistent(s.fx.a);
  }
  st->allocation[GRT_STAT_SMALL_POOL].current++; /* a pool's figure alone */
  expect_broken(&s, "stat allocation[1].current = 3 but a recount gives 2");
  st->allocation[GRT_STAT_SMALL_POOL].current--;
  s.c->total_allocated_memory += 512;
  expect_broken(&s, "reserved recount");
  s.c->total_allocated_memory -= 512;
  assert_consistent(s.fx.a);
  teardown(&s);
}

static void test_walker_blocks(void **state) {
  (void)state;
  scene s;
  setup(&s);
  s.a->requested_size = s.a->size + 1;
  expect_broken(&s, "requested above size");
  s.a->requested_size = 1000;

  cseg *seg = s.a->seg;
  s.a->seg = s.big->seg;
  expect_broken(&s, "wrong segment or pool");
  s.a->seg = seg;

  s.b->prev = NULL;
  expect_broken(&s, "broken next/prev links");
  s.b->prev = s.a;

  s.a->size += 512;
  expect_broken(&s, "does not touch the next block");
  s.a->size -= 512;

  uint64_t rest_size = s.rest->size;
  s.rest->size = rest_size - 100; /* the last block: no neighbour to disagree with */
  expect_broken(&s, "bad size");
  s.rest->size = rest_size + 512; /* a valid size, but not the one its bins know */
  expect_broken(&s, "is not in its bins");
  s.rest->size = rest_size - 512; /* smaller than its key: caught by the bins, before the segment's end */
  expect_broken(&s, "is not in its bins");
  s.rest->size = rest_size;

  s.a->prev = s.b;
  expect_broken(&s, "bad head");
  s.a->prev = NULL;

  seg->size += 512;
  expect_broken(&s, "blocks do not reach its end");
  seg->size -= 512;
  assert_consistent(s.fx.a);
  teardown(&s);
}

static void test_walker_indexes(void **state) {
  (void)state;
  scene s;
  setup(&s);
  grt__u64map_del(&s.c->active, s.pa);
  expect_broken(&s, "is not in the active map");
  assert_true(grt__u64map_put(&s.c->active, s.pa, s.a));

  assert_true(grt__u64map_put(&s.c->active, s.rest->ptr, s.rest));
  expect_broken(&s, "is still active");
  grt__u64map_del(&s.c->active, s.rest->ptr);

  assert_true(grt__u64map_put(&s.c->active, 0x10, s.a)); /* an entry no block owns */
  expect_broken(&s, "3 live blocks found");
  grt__u64map_del(&s.c->active, 0x10);

  /* the two segments are sorted by base: make the first run into the second */
  cseg *first = grt__seg_at(s.c, 0), *second = grt__seg_at(s.c, 1);
  grt_devptr base = second->base;
  second->base = first->base;
  expect_broken(&s, "overlap");
  second->base = base;
  assert_consistent(s.fx.a);
  teardown(&s);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_walker_statistics),
      cmocka_unit_test(test_walker_blocks),
      cmocka_unit_test(test_walker_indexes),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
