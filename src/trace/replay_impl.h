/* replay_impl.h — the grt_replay object, shared by replay*.c, series.c and fidelity.c (internal).
 *
 * Live allocations: two arrays, indexed by id with a loaded trace (dense ids
 * 0..n_ids-1), else by a small reusable slot: the streaming reader's (slot
 * mode) or one the replay assigns itself (sparse mode, through `ids`), so
 * memory follows the live allocations. A live entry's ptr is the replay's
 * address; REPLAY_FAILED marks an allocation the replay could not serve (its
 * frees are skipped).
 */
#ifndef GRT_TRACE_REPLAY_IMPL_H
#define GRT_TRACE_REPLAY_IMPL_H

#include <assert.h>

#include "base/u64map.h"
#include "gpurt/replay.h"

#define REPLAY_FAILED ((grt_devptr)1)

/* Ids -> small reusable slots: the streaming reader's translation of the
 * file's ids and the sparse mode's index of live ids (replay.c). The slot
 * released last is handed out first, so slots stay below the peak number of
 * live ids and the arrays they index stay small. Inline: the reader maps
 * every event's id. */
typedef struct grt__replay_ids {
  grt__u64map map;  /* live id -> slot + 1 */
  uint64_t *free;   /* released slots; room for every slot handed out */
  size_t n_free, cap_free;
  uint64_t next;    /* slots handed out so far */
} grt__replay_ids;

void grt__replay_ids_init(grt__replay_ids *t);
void grt__replay_ids_free(grt__replay_ids *t);
/* The slot of live id into *slot; false when id is not live. */
static inline bool grt__replay_ids_find(const grt__replay_ids *t, uint64_t id, uint64_t *slot) {
  void *v = grt__u64map_get(&t->map, id);
  if (v) *slot = (uint64_t)(uintptr_t)v - 1;
  return v != NULL;
}
/* The slot the next add hands out. */
static inline uint64_t grt__replay_ids_peek(const grt__replay_ids *t) {
  return t->n_free ? t->free[t->n_free - 1] : t->next;
}
/* The slow half of grt__replay_ids_reserve: grows the free list. */
grt_status grt__replay_ids_grow(grt__replay_ids *t);
/* Room for one more live id: the next add cannot fail (nor can removes).
 * The map keeps room for as many ids again as are live, so it stays under
 * 3/8 full: every free erases, and an erase walks the rest of its probe run. */
static inline grt_status grt__replay_ids_reserve(grt__replay_ids *t) {
  if (!grt__u64map_reserve(&t->map, t->map.count + 1)) return GRT_ERR_NOMEM;
  if (t->n_free || t->next < t->cap_free) return GRT_OK;
  return grt__replay_ids_grow(t);
}
/* Makes id (not live; room reserved) live in grt__replay_ids_peek's slot, which it returns. */
static inline uint64_t grt__replay_ids_add(grt__replay_ids *t, uint64_t id) {
  uint64_t slot = t->n_free ? t->free[--t->n_free] : t->next++;
  bool put = grt__u64map_put(&t->map, id, (void *)(uintptr_t)(slot + 1));
  assert(put); /* room reserved */
  (void)put;
  return slot;
}
/* Ends id's life, its slot into *slot; false when id was not live. */
static inline bool grt__replay_ids_remove(grt__replay_ids *t, uint64_t id, uint64_t *slot) {
  void *v = grt__u64map_del(&t->map, id);
  if (!v) return false;
  *slot = (uint64_t)(uintptr_t)v - 1;
  t->free[t->n_free++] = *slot; /* room: the free list holds every slot handed out */
  return true;
}

typedef struct grt__replay_xlate {
  grt_devptr replay, recorded; /* replay 0: the reservation was released */
  uint64_t size;
  grt_stream_id stream; /* the (stream, pool) reservation it translates */
  bool is_large;
} grt__replay_xlate;

/* A final segment of a private pool, in recorded coordinates (replay_pools.c). */
typedef struct grt__replay_pool_range {
  grt_devptr addr;
  uint64_t size;
  grt_pool_id id;
} grt__replay_pool_range;

/* Per-alloc fidelity hook: recorded vs replay address (fidelity.c sets it). */
typedef void (*grt__replay_alloc_hook)(void *ctx, grt_replay *r, const grt_trace_event *ev, uint64_t index,
                                       grt_devptr got, grt_status st);
/* Release hook: the model released its cache at the recorded run of segment
 * frees/unmaps starting at event index. */
typedef void (*grt__replay_release_hook)(void *ctx, grt_replay *r, uint64_t index);
/* OOM hook: the recorded oom at event oom_index (its release run starts at
 * run_index; run_index == oom_index when there is none) was replayed; st is
 * the model's answer to the failing request (GRT_ERR_OOM when it agreed). */
typedef void (*grt__replay_oom_hook)(void *ctx, grt_replay *r, uint64_t run_index, uint64_t oom_index,
                                     grt_status st);

struct grt_replay {
  grt_replay_config cfg;
  char policy[64];
  grt_device *dev;
  grt_allocator *alloc;
  const grt_trace *trace;    /* attached trace or NULL */
  grt_trace_info info;       /* of the attached/given trace (zeroed when none) */
  bool have_info;
  bool recorded_placement;
  uint64_t pos;              /* events applied */
  /* live allocations */
  bool dense;                /* ids index the arrays below */
  bool slots;                /* dense arrays of reader-assigned slots, grown on demand */
  uint64_t n_ids;            /* array length */
  grt_devptr *id_ptr;
  uint64_t *id_size;
  grt__replay_ids ids;       /* sparse mode: live ids -> their index in the arrays (grown on demand) */
  grt__u64map imported;      /* start-state blocks still live: recorded addr -> 1 */
  grt__replay_pool_range *pools; /* the final segments of private pools, by address */
  size_t n_pools;
  uint64_t live, peak_live;
  /* release runs */
  bool in_release_run;
  bool oom_replayed;         /* the run's ending oom was replayed at the run's start */
  bool retry_pending;        /* the next alloc is the retry path of the release run just seen */
  uint64_t retry_added;      /* the bytes the recorded retry took (its segment allocs/maps) */
  bool alloc_was_retry;      /* the last alloc ran as its release run's retry path */
  grt_devptr hint;           /* placement hint pending until the next alloc */
  grt_devptr pending_map;    /* the first recorded segment_map since the last alloc (0: none) */
  /* counters */
  grt_replay_summary sum;
  uint64_t base_dev_alloc, base_dev_free, base_syncs;
  /* series */
  grt_replay_sample *series;
  size_t n_series, cap_series;
  char err[512];
  /* address translation (expandable segments: the replay's reservations sit
     elsewhere than the recorded ones; offsets inside them are kept) */
  grt__replay_xlate *xlate;
  size_t n_xlate, cap_xlate;
  /* stacks of what the allocator holds (replay_stacks.c), built on demand at stacks_pos */
  bool stacks_built;
  uint64_t stacks_pos;
  grt__u64map stacks_live, stacks_final, stacks_segments;
  /* hooks (fidelity) */
  grt__replay_alloc_hook on_alloc;
  grt__replay_release_hook on_release;
  grt__replay_oom_hook on_oom;
  void *hook_ctx;
};

/* A recorded device range (a segment, or a run of mapped pages) and a growable list of them. */
typedef struct grt__replay_range {
  grt_devptr addr;
  uint64_t size;
  grt_stream_id stream;
  bool is_large;
  grt_pool_id pool; /* final segments: their segment_pool_id; else the default pool */
} grt__replay_range;

typedef struct grt__replay_ranges {
  grt__replay_range *v;
  size_t n, cap;
} grt__replay_ranges;

bool grt__replay_ranges_push(grt__replay_ranges *l, const grt__replay_range *x);

/* replay_start.c: device geometry and the PyTorch starting-state rebuild. */
void grt__replay_geometry(const grt_replay_config *cfg, const grt_trace_info *info, bool recorded,
                          grt_devptr *base, uint64_t *capacity);
grt_status grt__replay_rebuild_start(grt_replay *r);
/* What was live at the start, allocated under the replay's own config (what-if replays). */
grt_status grt__replay_prefill_start(grt_replay *r);
/* An alloc event applied (replay.c), also for the start's allocations. */
grt_status grt__replay_do_alloc(grt_replay *r, const grt_trace_event *ev, grt_stream_id stream);
/* Expandable segments' starting state (replay_expandable.c): reserves every
 * recorded reservation, maps the pages mapped when recording began, notes the
 * translations, and appends those mapped runs (recorded coordinates) to runs. */
grt_status grt__replay_rebuild_expandable(grt_replay *r, grt__replay_ranges *runs);
/* Translations follow the model's reservations: PyTorch releases a
 * reservation once it is wholly unmapped, and makes a new one at its next
 * map. note_released (after anything that may release) marks the
 * translations whose reservation went; follow (after an alloc of `size` on
 * `stream`) binds a new reservation's base to the recorded map pending (a new
 * reservation's first map is at its base), or to itself when none is. */
void grt__replay_note_released(grt_replay *r);
void grt__replay_follow(grt_replay *r, grt_stream_id stream, uint64_t size);
/* Room for one more translation, so that follow cannot fail. */
grt_status grt__replay_xlate_reserve(grt_replay *r);
/* The alloc configuration a trace asks for (its settings, then cfg->alloc_conf). */
grt_status grt__replay_alloc_config(const grt_replay_config *cfg, const grt_trace_info *info, grt_alloc_config *out,
                                    char *err, size_t err_size);

/* replay_release.c: a segment_free, segment_unmap or oom event. */
grt_status grt__replay_release_event(grt_replay *r, const grt_trace_event *ev, grt_stream_id stream);
/* The alloc a release run was the retry path of, on a device capped so that
 * its first try fails and a retry fits once anything is released. */
grt_status grt__replay_retry_malloc(grt_replay *r, uint64_t size, grt_stream_id stream, grt_devptr *p);
void grt__replay_note_oom(grt_replay *r, uint64_t size);

/* replay_pools.c: the private pools' final segments (recorded placement);
 * whether a recorded address lies in one (*id: its pool); a malloc made in
 * a private pool. */
grt_status grt__replay_pools_init(grt_replay *r);
bool grt__replay_pool_of(const grt_replay *r, grt_devptr recorded, grt_pool_id *id);
grt_status grt__replay_pool_malloc(grt_replay *r, grt_pool_id id, uint64_t size, grt_stream_id stream,
                                   grt_devptr *p);

/* replay_footprint.c: the model's device ranges in recorded coordinates:
 * segments, sorted; or mapped pages with expandable segments, normalized
 * (sorted, disjoint, touching ranges merged). */
grt_status grt__replay_footprint(grt_replay *r, bool expandable, grt__replay_ranges *out);
void grt__ranges_normalize(grt__replay_ranges *l);
bool grt__ranges_equal(const grt__replay_ranges *a, const grt__replay_ranges *b);
grt_status grt__ranges_minus(const grt__replay_ranges *a, const grt__replay_ranges *b, grt__replay_ranges *out);
/* Sorted lists of segments: those of a that b lacks (same base, size and stream). */
void grt__ranges_sort(grt__replay_ranges *l);
grt_status grt__ranges_missing(const grt__replay_ranges *a, const grt__replay_ranges *b, grt__replay_ranges *out);

/* series.c: room for one more sample in r->series. */
grt_status grt__replay_series_room(grt_replay *r);
void grt__replay_fill_sample(grt_replay *r, grt_replay_sample *s);

void grt__replay_set_error(grt_replay *r, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/* Marks a recorded address as an imported live block (replay_start.c). */
grt_status grt__replay_note_imported(grt_replay *r, grt_devptr addr);

/* Slot mode (replay_stream.c): the reader thread maps file ids to small
 * reusable slots, so the replaying thread indexes arrays instead of hashing;
 * its verdicts travel in grt_trace_event.reserved. */
#define GRT__SLOT_DUPLICATE 1 /* alloc of a live id (ev->id is the file's id) */
#define GRT__SLOT_UNMATCHED 2 /* a free of no live allocation */
void grt__replay_use_slots(grt_replay *r);

/* Recorded address <-> the replay's (identity outside the translated ranges). */
grt_devptr grt__replay_to_recorded(const grt_replay *r, grt_devptr replay);
/* The model's address of live id (0: not live; REPLAY_FAILED: not served). */
grt_devptr grt__replay_live_ptr(grt_replay *r, uint64_t id);
void grt__replay_stacks_free(grt_replay *r);
grt_devptr grt__replay_to_replay(const grt_replay *r, grt_devptr recorded);

#endif
