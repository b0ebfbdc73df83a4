/* bump.c — the "bump" policy: arenas with a bump pointer (the simplest
 * design: phase-structured lifetimes, as in inference activations).
 *
 * An arena is one device segment (default 64 MiB, or the rounded request when
 * larger). malloc rounds to 512 bytes and moves the arena's top forward; free
 * only unlinks the block and decrements the arena's live count. Memory is
 * reused ONLY on reset: when an arena's live count drops to 0 its top goes back
 * to the start (the per-phase reset), and grt_alloc_bump_reset ends a phase
 * for every arena at once. A freed block in the middle of a busy arena stays
 * dead until then: zero fragmentation inside an arena, no reuse across phases.
 *
 * Invariants (bump_check): each arena's live blocks are listed in address
 * order, lie in [base, base + top) without overlapping; live/live_bytes equal
 * that list; an arena with no live block has top == 0; every live block is in
 * the address map exactly once; statistics equal a recount. Arenas whose live
 * count is 0 go back to the device on empty_cache or when the device is full.
 * The block records exist for checking, block_info and bad-pointer errors; a
 * real bump allocator would keep only the counters.
 */
#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "policy/zoo.h"
#include "base/u64map.h"

#define BUMP_DEFAULT_ARENA ((uint64_t)64 << 20)

typedef struct bblock bblock;

typedef struct barena {
  grt__zseg seg;         /* its range (the arena table keeps a copy) */
  uint64_t top;          /* bytes handed out since the last reset */
  uint64_t live, live_bytes;
  bblock *head, *tail;   /* live blocks, in address order */
} barena;

struct bblock {
  grt_devptr ptr;
  uint64_t size, requested;
  barena *arena;
  bblock *prev, *next;
};

typedef struct bump {
  grt__segtable arenas; /* barena*, by base */
  grt__u64map live;     /* address -> bblock */
  barena *current;      /* the arena served last: tried first */
  uint64_t arena_size;  /* bytes, for new arenas */
} bump;

static barena *arena_at(const bump *b, size_t i) { return grt__segtable_at(&b->arenas, i); }

static grt_status bump_create(grt_allocator *a) {
  bump *b = calloc(1, sizeof *b);
  if (!b) return GRT_ERR_NOMEM;
  grt__u64map_init(&b->live);
  b->arena_size = BUMP_DEFAULT_ARENA;
  a->impl = b;
  return GRT_OK;
}

static void drop_blocks(grt_allocator *a, barena *ar, int count) {
  bump *b = a->impl;
  for (bblock *k = ar->head, *next; k; k = next) {
    next = k->next;
    grt__u64map_del(&b->live, k->ptr);
    if (count) grt__zoo_account(a, k->size, k->requested, -1);
    free(k);
  }
  ar->head = ar->tail = NULL;
  ar->live = ar->live_bytes = ar->top = 0;
}

static void forget_arena(bump *b, barena *ar) {
  grt__segtable_remove(&b->arenas, ar->seg.base, ar);
  if (b->current == ar) b->current = NULL;
  free(ar);
}

/* The device's status when it refuses (its own memory): nothing changes then. */
static grt_status release_arena(grt_allocator *a, barena *ar) {
  grt_status st = grt__zoo_device_free(a, ar->seg.base, ar->seg.size);
  if (!st) forget_arena(a->impl, ar);
  return st;
}

static void bump_destroy(grt_allocator *a) {
  bump *b = a->impl;
  while (b->arenas.n) {
    barena *ar = arena_at(b, b->arenas.n - 1);
    drop_blocks(a, ar, 0);
    if (release_arena(a, ar)) forget_arena(b, ar); /* teardown (void op): a refusal leaves it to the device */
  }
  grt__segtable_free(&b->arenas);
  grt__u64map_free(&b->live);
  free(b);
}

/* Returns every arena with no live block to the device; stops at the first the device refuses. */
static grt_status release_empty(grt_allocator *a) {
  bump *b = a->impl;
  grt_status st = GRT_OK;
  for (size_t i = b->arenas.n; i-- > 0 && !st;)
    if (arena_at(b, i)->live == 0) st = release_arena(a, arena_at(b, i));
  return st;
}

static int has_room(const barena *ar, uint64_t size) { return ar->seg.size - ar->top >= size; }

/* The current arena if it has room, else the lowest-addressed one that has. */
static barena *find_room(bump *b, uint64_t size) {
  if (b->current && has_room(b->current, size)) return b->current;
  for (size_t i = 0; i < b->arenas.n; i++)
    if (has_room(arena_at(b, i), size)) return arena_at(b, i);
  return NULL;
}

/* The device segment of ar (its struct and table room are reserved). */
static grt_status new_arena(grt_allocator *a, barena *ar, uint64_t size) {
  bump *b = a->impl;
  grt_status st = grt__zoo_device_malloc(a, size, &ar->seg.base);
  if (st) return st;
  ar->seg.size = size;
  grt__segtable_add(&b->arenas, ar->seg.base, ar->seg.size, ar);
  return GRT_OK;
}

/* A new arena for a request of size bytes: the configured size first; when the
 * device says no, after returning the empty arenas; last, exactly size bytes.
 * Its host memory comes first: after the release only the device can fail. */
static grt_status grow(grt_allocator *a, uint64_t size, barena **out) {
  bump *b = a->impl;
  uint64_t want = size > b->arena_size ? size : b->arena_size;
  barena *ar = calloc(1, sizeof *ar);
  grt_status st = ar ? grt__segtable_reserve(&b->arenas, 1) : GRT_ERR_NOMEM;
  if (!st && (st = new_arena(a, ar, want)) && st != GRT_ERR_NOMEM && !(st = release_empty(a))) {
    st = new_arena(a, ar, want);
    if (st && st != GRT_ERR_NOMEM && want > size) st = new_arena(a, ar, size);
  }
  if (st) {
    free(ar);
    return st;
  }
  *out = ar;
  return GRT_OK;
}

static grt_status bump_malloc(grt_allocator *a, uint64_t size, grt_stream_id stream, grt_devptr *out) {
  bump *b = a->impl;
  (void)stream; /* one arena set for every stream: phases order the work */
  uint64_t rounded = grt__zoo_round(size, GRT_MIN_BLOCK_SIZE);
  bblock *k = calloc(1, sizeof *k);
  if (!k || !grt__u64map_reserve(&b->live, 1)) { /* before the device: a failure changes nothing */
    free(k);
    return GRT_ERR_NOMEM;
  }
  barena *ar = find_room(b, rounded);
  if (ar) {
    a->stats.num_cache_hits++;
  } else {
    grt_status st = grow(a, rounded, &ar);
    if (st) {
      free(k);
      return grt__zoo_oom(a, st, size, "no arena has room and the device cannot supply a new one");
    }
  }
  *k = (bblock){ar->seg.base + ar->top, rounded, size, ar, ar->tail, NULL};
  bool put = grt__u64map_put(&b->live, k->ptr, k);
  assert(put); /* room reserved */
  (void)put;
  if (ar->tail) ar->tail->next = k; else ar->head = k;
  ar->tail = k;
  ar->top += rounded;
  ar->live++;
  ar->live_bytes += rounded;
  b->current = ar;
  grt__zoo_account(a, rounded, size, +1);
  *out = k->ptr;
  return GRT_OK;
}

/* Why ptr is not a live block: inside one, in dead arena memory, or foreign. */
static grt_status classify(grt_allocator *a, grt_devptr ptr) {
  bump *b = a->impl;
  barena *ar = grt__segtable_find(&b->arenas, ptr);
  if (!ar) {
    grt__alloc_set_error(a, "0x%llx was not returned by this allocator", (unsigned long long)ptr);
    return GRT_ERR_UNKNOWN_POINTER;
  }
  for (const bblock *k = ar->head; k; k = k->next)
    if (ptr > k->ptr && ptr < k->ptr + k->size) {
      grt__alloc_set_error(a, "0x%llx points %llu bytes inside the block at 0x%llx", (unsigned long long)ptr,
                           (unsigned long long)(ptr - k->ptr), (unsigned long long)k->ptr);
      return GRT_ERR_INTERIOR_POINTER;
    }
  grt__alloc_set_error(a, "double free of 0x%llx: the address lies in dead memory of the arena at 0x%llx",
                       (unsigned long long)ptr, (unsigned long long)ar->seg.base);
  return GRT_ERR_DOUBLE_FREE;
}

static grt_status bump_free(grt_allocator *a, grt_devptr ptr) {
  bump *b = a->impl;
  bblock *k = grt__u64map_get(&b->live, ptr);
  if (!k) return classify(a, ptr);
  barena *ar = k->arena;
  grt__u64map_del(&b->live, ptr);
  if (k->prev) k->prev->next = k->next; else ar->head = k->next;
  if (k->next) k->next->prev = k->prev; else ar->tail = k->prev;
  ar->live--;
  ar->live_bytes -= k->size;
  if (ar->live == 0) ar->top = 0; /* the per-phase reset */
  grt__zoo_account(a, k->size, k->requested, -1);
  free(k);
  return GRT_OK;
}

static grt_status bump_record_stream(grt_allocator *a, grt_devptr ptr, grt_stream_id stream) {
  bump *b = a->impl;
  (void)stream; /* memory is reused only after a reset, which the caller orders */
  return grt__u64map_get(&b->live, ptr) ? GRT_OK : classify(a, ptr);
}

static grt_status bump_empty_cache(grt_allocator *a) { return release_empty(a); }

static grt_status bump_block_info(grt_allocator *a, grt_devptr ptr, uint64_t *size, uint64_t *requested) {
  bump *b = a->impl;
  const bblock *k = grt__u64map_get(&b->live, ptr);
  if (!k) return classify(a, ptr);
  *size = k->size;
  *requested = k->requested;
  return GRT_OK;
}

static void bump_stats(grt_allocator *a, grt_alloc_stats *out) {
  bump *b = a->impl;
  uint64_t best = 0;
  for (size_t i = 0; i < b->arenas.n; i++) {
    const barena *ar = arena_at(b, i);
    if (ar->seg.size - ar->top > best) best = ar->seg.size - ar->top;
  }
  out->largest_free_block = best;
  out->pending_free_blocks = 0;
}

/* One arena as a snapshot segment: live blocks, the dead gaps and the free tail as inactive blocks. */
static grt_status snap_arena(grt_alloc_snapshot *out, const barena *ar) {
  grt_snapshot_segment *seg = grt__zoo_snap_add(out, ar->seg.base, 2 * ar->live + 1);
  if (!seg) return GRT_ERR_NOMEM;
  grt_devptr at = ar->seg.base, end = ar->seg.base + ar->seg.size;
  size_t n = 0;
  for (const bblock *k = ar->head; k; k = k->next) {
    if (k->ptr > at) seg->blocks[n++] = (grt_snapshot_block){at, k->ptr - at, 0, GRT_BLOCK_INACTIVE};
    seg->blocks[n++] = (grt_snapshot_block){k->ptr, k->size, k->requested, GRT_BLOCK_ACTIVE_ALLOCATED};
    at = k->ptr + k->size;
  }
  if (at < end) seg->blocks[n++] = (grt_snapshot_block){at, end - at, 0, GRT_BLOCK_INACTIVE};
  seg->n_blocks = n;
  grt__snapshot_segment_totals(seg);
  return GRT_OK;
}

static grt_status bump_snapshot(grt_allocator *a, grt_alloc_snapshot *out) {
  bump *b = a->impl;
  grt_status st = grt__zoo_snap_begin(out, b->arenas.n);
  for (size_t i = 0; st == GRT_OK && i < b->arenas.n; i++) st = snap_arena(out, arena_at(b, i));
  return st;
}

static grt_status check_arena(const bump *b, const barena *ar, grt__zoo_recount *r, char *msg, size_t msg_size) {
  grt_devptr at = ar->seg.base;
  uint64_t live = 0, bytes = 0;
  if (ar->top > ar->seg.size) GRT__ZOO_FAIL("arena 0x%llx: top beyond its end", (unsigned long long)ar->seg.base);
  for (const bblock *k = ar->head; k; k = k->next) {
    if (k->arena != ar || (k->next && k->next->prev != k) || (!k->next && ar->tail != k))
      GRT__ZOO_FAIL("arena 0x%llx: broken block list at 0x%llx", (unsigned long long)ar->seg.base, (unsigned long long)k->ptr);
    if (k->ptr < at || k->ptr + k->size > ar->seg.base + ar->top)
      GRT__ZOO_FAIL("block 0x%llx overlaps its neighbour or lies beyond the arena's top", (unsigned long long)k->ptr);
    if (k->size == 0 || k->size % GRT_MIN_BLOCK_SIZE || k->requested > k->size || k->requested == 0)
      GRT__ZOO_FAIL("block 0x%llx: bad size %llu", (unsigned long long)k->ptr, (unsigned long long)k->size);
    if (grt__u64map_get(&b->live, k->ptr) != k) GRT__ZOO_FAIL("block 0x%llx is not in the map", (unsigned long long)k->ptr);
    at = k->ptr + k->size;
    live++;
    bytes += k->size;
    r->requested_bytes += (int64_t)k->requested;
  }
  if (live != ar->live || bytes != ar->live_bytes)
    GRT__ZOO_FAIL("arena 0x%llx: counts %llu live blocks but lists %llu", (unsigned long long)ar->seg.base,
                  (unsigned long long)ar->live, (unsigned long long)live);
  if (live == 0 && ar->top != 0) GRT__ZOO_FAIL("arena 0x%llx: empty but not reset", (unsigned long long)ar->seg.base);
  r->allocation += (int64_t)live;
  r->allocated_bytes += (int64_t)bytes;
  r->segment++;
  r->reserved_bytes += (int64_t)ar->seg.size;
  return GRT_OK;
}

static grt_status bump_check(grt_allocator *a, char *msg, size_t msg_size) {
  bump *b = a->impl;
  grt__zoo_recount r;
  memset(&r, 0, sizeof r);
  for (size_t i = 0; i < b->arenas.n; i++) {
    const barena *ar = arena_at(b, i);
    if (i > 0 && arena_at(b, i - 1)->seg.base + arena_at(b, i - 1)->seg.size > ar->seg.base)
      GRT__ZOO_FAIL("arenas 0x%llx and 0x%llx overlap", (unsigned long long)arena_at(b, i - 1)->seg.base,
                    (unsigned long long)ar->seg.base);
    grt_status st = check_arena(b, ar, &r, msg, msg_size);
    if (st) return st;
  }
  if ((int64_t)b->live.count != r.allocation)
    GRT__ZOO_FAIL("%zu blocks in the map but %lld listed", b->live.count, (long long)r.allocation);
  return grt__zoo_check_stats(a, &r, msg, msg_size);
}

/* ---- settings (grt_alloc_set / grt_alloc_get) and calls specific to this policy ---- */

static grt_status bump_set(grt_allocator *a, const char *key, uint64_t bytes) {
  if (strcmp(key, "arena_size")) return GRT_ERR_NOT_FOUND;
  if (bytes == 0 || bytes % GRT_MIN_BLOCK_SIZE || bytes > GRT__MAX_REQUEST) {
    grt__alloc_set_error(a, "arena size %llu is not a positive multiple of 512", (unsigned long long)bytes);
    return GRT_ERR_INVALID_ARG;
  }
  ((bump *)a->impl)->arena_size = bytes;
  return GRT_OK;
}

static grt_status bump_get(grt_allocator *a, const char *key, uint64_t *value) {
  if (strcmp(key, "arena_size")) return GRT_ERR_NOT_FOUND;
  *value = ((const bump *)a->impl)->arena_size;
  return GRT_OK;
}

grt_status grt_alloc_bump_reset(grt_allocator *a) {
  grt_status st = grt__zoo_enter(a, &grt__bump_ops);
  if (st) return st;
  bump *b = a->impl;
  for (size_t i = 0; i < b->arenas.n; i++) drop_blocks(a, arena_at(b, i), 1);
  b->current = NULL; /* the next phase starts in the lowest arena */
  return grt__zoo_leave(a, GRT_OK);
}

const grt__alloc_ops grt__bump_ops = {
    .name = "bump",
    .create = bump_create,
    .destroy = bump_destroy,
    .malloc = bump_malloc,
    .free = bump_free,
    .record_stream = bump_record_stream,
    .empty_cache = bump_empty_cache,
    .block_info = bump_block_info,
    .stats = bump_stats,
    .snapshot = bump_snapshot,
    .check = bump_check,
    .set = bump_set,
    .get = bump_get,
    .settings = "arena_size",
};
