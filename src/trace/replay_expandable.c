/* replay_expandable.c — the starting state of a trace recorded with
 * expandable segments.
 *
 * PyTorch reserves one address range per (stream, pool) and maps pages into
 * it: 2 MiB pages for the small pool, 20 MiB for the large one. The trace
 * logs each map (segment_map) and unmap (segment_unmap) during recording; the
 * final snapshot lists one segment per mapped range at the end. A page's
 * state when recording began follows from the first event that touches it:
 * mapped if that event unmaps it, unmapped if it maps it; a page no event
 * touches was at the start what it is at the end.
 *
 * Each recorded range belongs to a reservation: final segments name their
 * stream and pool; an event names its stream, and its pool by its size (a
 * range that is not a whole number of 20 MiB pages is small) or, when the
 * size fits both, by the nearest reservation below it on its stream. The
 * reservation's recorded base is taken to be the lowest address recorded in
 * it (mapping always takes the lowest free pages, and a reservation's first
 * map is at its base).
 *
 * The simulated device picks its own reservation addresses, so each recorded
 * reservation gets a translation: the replay keeps every offset inside it,
 * and scoring compares recorded addresses through it. Reservations are made
 * up front, even with nothing mapped at the start, so that the translation
 * is known before the model's first map. */
#include <assert.h>
#include <stdlib.h>

#include "alloc/allocator_impl.h"
#include "alloc/import_expandable.h"
#include "trace/replay_impl.h"

typedef struct group {
  grt_stream_id stream;
  bool is_large;
  grt_devptr lo;      /* lowest recorded address: the reservation's base */
  grt__u64map pages;  /* page index -> 1 mapped / 2 unmapped at the start (first touch) */
} group;

typedef struct groups {
  group *g;
  size_t n, cap;
} groups;

static uint64_t page_of(bool is_large) { return is_large ? GRT_LARGE_BUFFER : GRT_SMALL_BUFFER; }

static uint64_t reservation_size(const grt_replay *r, bool is_large) {
  uint64_t page = page_of(is_large);
  uint64_t want = r->sum.capacity + r->sum.capacity / 8;
  return (want + page - 1) / page * page;
}

static group *find_group(groups *gs, grt_stream_id stream, bool is_large) {
  for (size_t i = 0; i < gs->n; i++)
    if (gs->g[i].stream == stream && gs->g[i].is_large == is_large) return &gs->g[i];
  return NULL;
}

static grt_status add_group(groups *gs, grt_stream_id stream, bool is_large, grt_devptr addr) {
  group *g = find_group(gs, stream, is_large);
  if (g) {
    if (addr < g->lo) g->lo = addr;
    return GRT_OK;
  }
  if (gs->n == gs->cap) {
    size_t cap = gs->cap ? gs->cap * 2 : 4;
    group *p = realloc(gs->g, cap * sizeof *p);
    if (!p) return GRT_ERR_NOMEM;
    gs->g = p;
    gs->cap = cap;
  }
  g = &gs->g[gs->n++];
  *g = (group){.stream = stream, .is_large = is_large, .lo = addr};
  grt__u64map_init(&g->pages);
  return GRT_OK;
}

static bool is_map_event(const grt_trace_event *e) {
  return (e->kind == GRT_TRACE_SEGMENT_MAP || e->kind == GRT_TRACE_SEGMENT_UNMAP) && (e->flags & GRT_TRACE_F_ADDR);
}

/* The pool of an event's range when its size alone says it: small unless a
 * whole number of large pages. */
static bool size_says_small(uint64_t size) { return size % GRT_LARGE_BUFFER != 0; }

/* The group of a recorded event range (groups already hold every base). */
static group *group_of_event(groups *gs, const grt_trace_event *e, grt_stream_id stream) {
  if (size_says_small(e->size)) return find_group(gs, stream, false);
  group *best = NULL;
  for (size_t i = 0; i < gs->n; i++) {
    group *g = &gs->g[i];
    if (g->stream == stream && g->lo <= e->addr && (!best || g->lo > best->lo)) best = g;
  }
  return best ? best : find_group(gs, stream, true);
}

/* Every reservation the trace shows, with its lowest recorded address. */
static grt_status collect_groups(const grt_trace_info *in, groups *gs) {
  grt_status st = GRT_OK;
  for (size_t i = 0; i < in->n_segments && !st; i++) {
    const grt_trace_segment *s = &in->segments[i];
    if (s->is_expandable) st = add_group(gs, s->stream, s->is_large, s->addr);
  }
  /* events whose size names the pool first, then the rest by position */
  for (int pass = 0; pass < 2 && !st; pass++)
    for (size_t i = 0; i < in->n_events && !st; i++) {
      const grt_trace_event *e = &in->events[i];
      if (!is_map_event(e)) continue;
      grt_stream_id stream = in->streams[e->stream];
      bool small = size_says_small(e->size);
      if (pass == 0 && small) st = add_group(gs, stream, false, e->addr);
      if (pass == 1 && !small) {
        group *g = group_of_event(gs, e, stream);
        st = add_group(gs, stream, g ? g->is_large : true, e->addr);
      }
    }
  return st;
}

/* Records each page's state at the start from the first event touching it. */
static grt_status first_touches(const grt_trace_info *in, groups *gs) {
  for (size_t i = 0; i < in->n_events; i++) {
    const grt_trace_event *e = &in->events[i];
    if (!is_map_event(e)) continue;
    group *g = group_of_event(gs, e, in->streams[e->stream]);
    uint64_t page = page_of(g->is_large);
    uint64_t first = (e->addr - g->lo) / page, end = (e->addr - g->lo + e->size + page - 1) / page;
    void *state = (void *)(uintptr_t)(e->kind == GRT_TRACE_SEGMENT_UNMAP ? 1 : 2);
    for (uint64_t p = first; p < end; p++)
      if (!grt__u64map_get(&g->pages, p) && !grt__u64map_put(&g->pages, p, state)) return GRT_ERR_NOMEM;
  }
  return GRT_OK;
}

/* Pages of the final mapped ranges that no event touched were mapped all along. */
static grt_status untouched_final(const grt_trace_info *in, groups *gs) {
  for (size_t i = 0; i < in->n_segments; i++) {
    const grt_trace_segment *s = &in->segments[i];
    if (!s->is_expandable) continue;
    group *g = find_group(gs, s->stream, s->is_large);
    uint64_t page = page_of(g->is_large);
    uint64_t first = (s->addr - g->lo) / page, end = (s->addr - g->lo + s->total_size + page - 1) / page;
    for (uint64_t p = first; p < end; p++)
      if (!grt__u64map_get(&g->pages, p) && !grt__u64map_put(&g->pages, p, (void *)1)) return GRT_ERR_NOMEM;
  }
  return GRT_OK;
}

static int cmp_u64(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return x < y ? -1 : x > y;
}

static grt_status push_run(grt__replay_ranges *out, const group *g, uint64_t first, uint64_t n) {
  uint64_t page = page_of(g->is_large);
  grt__replay_range v = {g->lo + first * page, n * page, g->stream, g->is_large};
  return grt__replay_ranges_push(out, &v) ? GRT_OK : GRT_ERR_NOMEM;
}

/* The runs of pages mapped at the start, in recorded coordinates. */
static grt_status start_runs(const group *g, grt__replay_ranges *out) {
  uint64_t *mapped = malloc((g->pages.count + 1) * sizeof *mapped);
  if (!mapped) return GRT_ERR_NOMEM;
  size_t n = 0;
  grt__u64map_iter it = grt__u64map_begin(&g->pages);
  uint64_t p;
  void *v;
  while (grt__u64map_next(&g->pages, &it, &p, &v))
    if ((uintptr_t)v == 1) mapped[n++] = p;
  qsort(mapped, n, sizeof *mapped, cmp_u64);
  grt_status st = GRT_OK;
  for (size_t i = 0; i < n && !st;) {
    size_t j = i + 1;
    while (j < n && mapped[j] == mapped[j - 1] + 1) j++;
    st = push_run(out, g, mapped[i], j - i);
    i = j;
  }
  free(mapped);
  return st;
}

/* Reserves every recorded reservation in the model, maps its start runs, and
 * notes its translation. */
static grt_status import_group(grt_replay *r, const group *g, grt__replay_ranges *runs, size_t from) {
  grt_devptr va;
  grt_status st = grt__alloc_expandable_reservation(r->alloc, g->stream, g->is_large, true, &va);
  if (st) {
    grt__replay_set_error(r, "rebuilding the start: reserving the %s pool's range of stream %llu: %s",
                          g->is_large ? "large" : "small", (unsigned long long)g->stream, grt_status_str(st));
    return st;
  }
  r->xlate[r->n_xlate++] = (grt__replay_xlate){va, g->lo, reservation_size(r, g->is_large), g->stream, g->is_large};
  for (size_t i = from; i < runs->n && !st; i++) {
    const grt__replay_range *x = &runs->v[i];
    st = grt__alloc_import_expandable(r->alloc, g->stream, g->is_large, x->addr - g->lo, x->size, &va);
    if (st)
      grt__replay_set_error(r, "rebuilding the start: expandable range 0x%llx (+%llu): %s",
                            (unsigned long long)x->addr, (unsigned long long)x->size, grt_status_str(st));
  }
  return st;
}

/* A recorded reservation cannot run into the next recorded one. */
static void clip_translations(grt_replay *r) {
  for (size_t i = 0; i < r->n_xlate; i++)
    for (size_t k = 0; k < r->n_xlate; k++) {
      grt__replay_xlate *x = &r->xlate[i];
      if (r->xlate[k].recorded > x->recorded && r->xlate[k].recorded - x->recorded < x->size)
        x->size = r->xlate[k].recorded - x->recorded;
    }
}

grt_status grt__replay_rebuild_expandable(grt_replay *r, grt__replay_ranges *runs) {
  groups gs = {0};
  grt_status st = collect_groups(&r->info, &gs);
  if (!st) st = first_touches(&r->info, &gs);
  if (!st) st = untouched_final(&r->info, &gs);
  if (!st && !(r->xlate = calloc(gs.n + 1, sizeof *r->xlate))) st = GRT_ERR_NOMEM;
  if (!st) r->cap_xlate = gs.n + 1;
  for (size_t i = 0; i < gs.n && !st; i++) {
    size_t from = runs->n;
    if (!(st = start_runs(&gs.g[i], runs))) st = import_group(r, &gs.g[i], runs, from);
  }
  if (!st) clip_translations(r);
  for (size_t i = 0; i < gs.n; i++) grt__u64map_free(&gs.g[i].pages);
  free(gs.g);
  return st;
}

void grt__replay_note_released(grt_replay *r) {
  for (size_t i = 0; i < r->n_xlate; i++) {
    grt__replay_xlate *x = &r->xlate[i];
    grt_devptr va;
    if (x->replay && grt__alloc_expandable_reservation(r->alloc, x->stream, x->is_large, false, &va) != GRT_OK)
      x->replay = 0;
  }
}

grt_status grt__replay_xlate_reserve(grt_replay *r) {
  if (r->n_xlate < r->cap_xlate) return GRT_OK;
  size_t cap = r->cap_xlate ? r->cap_xlate * 2 : 4;
  grt__replay_xlate *x = realloc(r->xlate, cap * sizeof *x);
  if (!x) return GRT_ERR_NOMEM;
  r->xlate = x;
  r->cap_xlate = cap;
  return GRT_OK;
}

void grt__replay_follow(grt_replay *r, grt_stream_id stream, uint64_t size) {
  bool is_large = grt_alloc_round_size(&r->alloc->cfg, size) > GRT_SMALL_SIZE;
  size_t i = 0;
  while (i < r->n_xlate && !(r->xlate[i].stream == stream && r->xlate[i].is_large == is_large)) i++;
  if (i < r->n_xlate && r->xlate[i].replay) return;
  grt_devptr va;
  if (grt__alloc_expandable_reservation(r->alloc, stream, is_large, false, &va) != GRT_OK) return;
  assert(i < r->cap_xlate); /* room reserved */
  if (i == r->n_xlate) r->n_xlate++;
  grt_devptr recorded = r->pending_map ? r->pending_map : va;
  r->xlate[i] = (grt__replay_xlate){va, recorded, reservation_size(r, is_large), stream, is_large};
  clip_translations(r);
}
