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
 * Pages are known by their address. Final segments name their stream and
 * pool; an event names its stream, and its pool by its pages (a map of whole
 * 20 MiB pages is large; an unmap is in the pool its pages were mapped in).
 * One reservation per (stream, pool) exists at a time; the one live at the
 * start (or, with nothing mapped then, made by the first map) has its
 * recorded base taken to be the lowest page known to be in it: mapped at the
 * start, or touched before it was wholly unmapped (mapping always takes the
 * lowest free pages, and a reservation's first map is at its base). Reservations PyTorch released and made again during the trace are
 * followed as the replay goes (grt__replay_follow).
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
  grt_devptr lo;        /* the start reservation's recorded base (0: not known yet) */
  grt_devptr first_map; /* the first map recorded for this (stream, pool), 0 if none */
  grt__u64map pages;    /* page address -> 1 mapped / 2 unmapped at the start (first touch) */
  size_t n_start;       /* pages mapped at the start */
} group;

typedef struct groups {
  group *g;
  size_t n, cap;
  uint32_t *of_event; /* each map/unmap event's group index */
  grt__u64map mapped; /* page address -> pool + 1, for pages the trace mapped and has not unmapped */
} groups;

static uint64_t page_of(bool is_large) { return is_large ? GRT_LARGE_BUFFER : GRT_SMALL_BUFFER; }

static uint64_t reservation_size(const grt_replay *r, bool is_large) {
  uint64_t page = page_of(is_large);
  uint64_t want = r->sum.capacity + r->sum.capacity / 8;
  return (want + page - 1) / page * page;
}

/* The (stream, pool) group, made when new; NULL when host memory ran out. */
static group *group_for(groups *gs, grt_stream_id stream, bool is_large) {
  for (size_t i = 0; i < gs->n; i++)
    if (gs->g[i].stream == stream && gs->g[i].is_large == is_large) return &gs->g[i];
  if (gs->n == gs->cap) {
    size_t cap = gs->cap ? gs->cap * 2 : 4;
    group *p = realloc(gs->g, cap * sizeof *p);
    if (!p) return NULL;
    gs->g = p;
    gs->cap = cap;
  }
  group *g = &gs->g[gs->n++];
  *g = (group){.stream = stream, .is_large = is_large};
  grt__u64map_init(&g->pages);
  return g;
}

static bool is_map_event(const grt_trace_event *e) {
  return (e->kind == GRT_TRACE_SEGMENT_MAP || e->kind == GRT_TRACE_SEGMENT_UNMAP) && (e->flags & GRT_TRACE_F_ADDR);
}

/* An event's pool: a map of whole large pages is large (a small request maps
 * one or two 2 MiB pages); an unmap takes the pool its first page was mapped
 * in, or, for pages mapped before recording began, its size's. */
static bool event_is_large(const groups *gs, const grt_trace_event *e) {
  void *v = grt__u64map_get(&gs->mapped, e->addr);
  if (e->kind == GRT_TRACE_SEGMENT_UNMAP && v) return (uintptr_t)v == 2;
  return e->size % GRT_LARGE_BUFFER == 0;
}

/* Notes a range's pages: their first touch, and which pool the trace mapped them in. */
static grt_status touch(groups *gs, group *g, const grt_trace_event *e) {
  uint64_t page = page_of(g->is_large);
  bool unmap = e->kind == GRT_TRACE_SEGMENT_UNMAP;
  if (!unmap && !g->first_map) g->first_map = e->addr;
  for (uint64_t off = 0; off < e->size; off += page) {
    grt_devptr p = e->addr + off;
    if (!grt__u64map_get(&g->pages, p) && !grt__u64map_put(&g->pages, p, (void *)(uintptr_t)(unmap ? 1 : 2)))
      return GRT_ERR_NOMEM;
    if (unmap)
      grt__u64map_del(&gs->mapped, p);
    else if (!grt__u64map_put(&gs->mapped, p, (void *)(uintptr_t)(g->is_large ? 2 : 1)))
      return GRT_ERR_NOMEM;
  }
  return GRT_OK;
}

/* Every page's state at the start from the first event touching it. */
static grt_status first_touches(const grt_trace_info *in, groups *gs) {
  grt_status st = GRT_OK;
  for (size_t i = 0; i < in->n_events && !st; i++) {
    const grt_trace_event *e = &in->events[i];
    if (!is_map_event(e)) continue;
    group *g = group_for(gs, in->streams[e->stream], event_is_large(gs, e));
    st = g ? touch(gs, g, e) : GRT_ERR_NOMEM;
    if (g) gs->of_event[i] = (uint32_t)(g - gs->g);
  }
  return st;
}

/* Pages of the final mapped ranges that no event touched were mapped all along. */
static grt_status untouched_final(const grt_trace_info *in, groups *gs) {
  for (size_t i = 0; i < in->n_segments; i++) {
    const grt_trace_segment *s = &in->segments[i];
    if (!s->is_expandable) continue;
    group *g = group_for(gs, s->stream, s->is_large);
    if (!g) return GRT_ERR_NOMEM;
    for (uint64_t off = 0; off < s->total_size; off += page_of(g->is_large)) {
      grt_devptr p = s->addr + off;
      if (!grt__u64map_get(&g->pages, p) && !grt__u64map_put(&g->pages, p, (void *)1)) return GRT_ERR_NOMEM;
    }
  }
  return GRT_OK;
}

static int cmp_u64(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return x < y ? -1 : x > y;
}

/* The runs of pages mapped at the start, in recorded coordinates; the
 * group's base is its lowest such page, or its first map (a reservation's
 * first map is at its base). */
static grt_status start_runs(group *g, grt__replay_ranges *out) {
  uint64_t *mapped = malloc((g->pages.count + 1) * sizeof *mapped);
  if (!mapped) return GRT_ERR_NOMEM;
  size_t n = 0;
  grt__u64map_iter it = grt__u64map_begin(&g->pages);
  uint64_t p, page = page_of(g->is_large);
  void *v;
  while (grt__u64map_next(&g->pages, &it, &p, &v))
    if ((uintptr_t)v == 1) mapped[n++] = p;
  qsort(mapped, n, sizeof *mapped, cmp_u64);
  g->lo = n ? mapped[0] : g->first_map;
  g->n_start = n;
  grt_status st = GRT_OK;
  for (size_t i = 0; i < n && !st;) {
    size_t j = i + 1;
    while (j < n && mapped[j] == mapped[j - 1] + page) j++;
    grt__replay_range x = {.addr = mapped[i], .size = (j - i) * page, .stream = g->stream, .is_large = g->is_large};
    if (!grt__replay_ranges_push(out, &x)) st = GRT_ERR_NOMEM;
    i = j;
  }
  free(mapped);
  return st;
}

/* A snapshot can describe mapped pages that no reservation could hold: not
 * whole pages from the group's base, past the end of one reservation, or
 * already in another group's reservation. That is the trace contradicting
 * itself (GRT_ERR_PARSE), checked before anything is reserved. */
static grt_status runs_fit(grt_replay *r, const group *g, const grt__replay_ranges *runs, size_t from) {
  uint64_t page = page_of(g->is_large), room = reservation_size(r, g->is_large);
  for (size_t i = from; i < runs->n; i++) {
    const grt__replay_range *x = &runs->v[i];
    uint64_t off = x->addr - g->lo;
    for (size_t k = 0; k < from; k++) { /* the groups before: one page in two reservations */
      const grt__replay_range *y = &runs->v[k];
      if (x->addr < y->addr + y->size && y->addr < x->addr + x->size) {
        grt__replay_set_error(r,
                              "rebuilding the start: expandable range 0x%llx (+%llu) of the %s pool of stream %llu "
                              "overlaps 0x%llx (+%llu) of the %s pool of stream %llu",
                              (unsigned long long)x->addr, (unsigned long long)x->size, g->is_large ? "large" : "small",
                              (unsigned long long)g->stream, (unsigned long long)y->addr, (unsigned long long)y->size,
                              y->is_large ? "large" : "small", (unsigned long long)y->stream);
        return GRT_ERR_PARSE;
      }
    }
    if (off % page == 0 && x->size % page == 0 && off <= room && x->size <= room - off) continue;
    grt__replay_set_error(r,
                          "rebuilding the start: expandable range 0x%llx (+%llu) of stream %llu is not whole %llu-byte "
                          "pages inside one %llu-byte reservation from 0x%llx",
                          (unsigned long long)x->addr, (unsigned long long)x->size, (unsigned long long)g->stream,
                          (unsigned long long)page, (unsigned long long)room, (unsigned long long)g->lo);
    return GRT_ERR_PARSE;
  }
  return GRT_OK;
}

/* Reserves every recorded reservation in the model, maps its start runs, and
 * notes its translation. */
static grt_status import_group(grt_replay *r, const group *g, grt__replay_ranges *runs, size_t from) {
  grt_status st = runs_fit(r, g, runs, from);
  if (st) return st;
  grt_devptr va;
  st = grt__alloc_expandable_reservation(r->alloc, g->stream, g->is_large, true, &va);
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
      grt__replay_set_error(r, "rebuilding the start: expandable range 0x%llx (+%llu): %s", (unsigned long long)x->addr,
                            (unsigned long long)x->size, grt_status_str(st));
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

/* The start reservation's base: the lowest page known to be in it, mapped
 * at the start or touched by the trace before the reservation was wholly
 * unmapped (PyTorch then releases it and maps into a new one). */
static grt_status refine_base(const grt_trace_info *in, const groups *gs, size_t gi) {
  group *g = &gs->g[gi];
  grt__u64map live;
  grt__u64map_init(&live);
  grt_status st = GRT_OK;
  grt__u64map_iter it = grt__u64map_begin(&g->pages);
  uint64_t p, page = page_of(g->is_large), count = 0;
  void *v;
  while (!st && grt__u64map_next(&g->pages, &it, &p, &v))
    if ((uintptr_t)v == 1) st = grt__u64map_put(&live, p, (void *)1) ? (count++, GRT_OK) : GRT_ERR_NOMEM;
  bool begun = count > 0;
  for (size_t i = 0; i < in->n_events && !st; i++) {
    const grt_trace_event *e = &in->events[i];
    if (!is_map_event(e) || gs->of_event[i] != gi) continue;
    bool unmap = e->kind == GRT_TRACE_SEGMENT_UNMAP;
    if (!begun && unmap) continue;
    begun = true;
    if (e->addr < g->lo) g->lo = e->addr;
    for (uint64_t off = 0; off < e->size && !st; off += page) {
      bool had = grt__u64map_get(&live, e->addr + off) != NULL;
      if (unmap && had) grt__u64map_del(&live, e->addr + off), count--;
      if (!unmap && !had) st = grt__u64map_put(&live, e->addr + off, (void *)1) ? (count++, GRT_OK) : GRT_ERR_NOMEM;
    }
    if (unmap && !count) break; /* wholly unmapped: released */
  }
  grt__u64map_free(&live);
  return st;
}

grt_status grt__replay_rebuild_expandable(grt_replay *r, grt__replay_ranges *runs) {
  groups gs = {0};
  grt__u64map_init(&gs.mapped);
  grt_status st = (gs.of_event = calloc(r->info.n_events + 1, sizeof *gs.of_event)) ? GRT_OK : GRT_ERR_NOMEM;
  if (!st) st = first_touches(&r->info, &gs);
  if (!st) st = untouched_final(&r->info, &gs);
  if (!st && !(r->xlate = calloc(gs.n + 1, sizeof *r->xlate))) st = GRT_ERR_NOMEM;
  if (!st) r->cap_xlate = gs.n + 1;
  for (size_t i = 0; i < gs.n && !st; i++) {
    size_t from = runs->n;
    if (!(st = start_runs(&gs.g[i], runs)) && !(st = refine_base(&r->info, &gs, i)) && gs.g[i].lo)
      st = import_group(r, &gs.g[i], runs, from);
  }
  if (!st) clip_translations(r);
  for (size_t i = 0; i < gs.n; i++) grt__u64map_free(&gs.g[i].pages);
  grt__u64map_free(&gs.mapped);
  free(gs.of_event);
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
