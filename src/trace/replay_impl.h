/* replay_impl.h — the grt_replay object, shared by replay*.c, series.c and fidelity.c (internal).
 *
 * Live allocations: with a loaded trace (dense ids 0..n_ids-1) two arrays
 * indexed by id; without one (the streaming reader passes the file's ids) an
 * open-addressing table of live ids, so memory follows the live allocations.
 * A live entry's ptr is the replay's address; REPLAY_FAILED marks an
 * allocation the replay could not serve (its frees are skipped).
 */
#ifndef GRT_TRACE_REPLAY_IMPL_H
#define GRT_TRACE_REPLAY_IMPL_H

#include "base/u64map.h"
#include "gpurt/replay.h"

#define REPLAY_FAILED ((grt_devptr)1)

typedef struct live_entry {
  uint64_t id; /* UINT64_MAX: empty slot */
  grt_devptr ptr;
  uint64_t size;
} live_entry;

typedef struct grt__replay_xlate {
  grt_devptr replay, recorded;
  uint64_t size;
} grt__replay_xlate;

/* Per-alloc fidelity hook: recorded vs replay address (fidelity.c sets it). */
typedef void (*grt__replay_alloc_hook)(void *ctx, grt_replay *r, const grt_trace_event *ev, uint64_t index,
                                       grt_devptr got, grt_status st);
/* Release hook: the recorded run of segment frees starting at index and what the replay released. */
typedef void (*grt__replay_release_hook)(void *ctx, grt_replay *r, uint64_t index, const grt_devptr *released,
                                         size_t n_released);

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
  live_entry *tab;           /* sparse mode: open-addressing table of live ids */
  size_t tab_mask, tab_count;
  grt__u64map imported;      /* start-state blocks still live: recorded addr -> 1 */
  uint64_t live, peak_live;
  /* release runs */
  bool in_release_run;
  grt_devptr hint;           /* placement hint pending until the next alloc */
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
  size_t n_xlate;
  /* hooks (fidelity) */
  grt__replay_alloc_hook on_alloc;
  grt__replay_release_hook on_release;
  void *hook_ctx;
};

/* replay_start.c: device geometry and the PyTorch starting-state rebuild. */
void grt__replay_geometry(const grt_replay_config *cfg, const grt_trace_info *info, bool recorded,
                          grt_devptr *base, uint64_t *capacity);
grt_status grt__replay_rebuild_start(grt_replay *r);
/* Expandable segments' starting state (replay_expandable.c). */
grt_status grt__replay_rebuild_expandable(grt_replay *r);
/* The alloc configuration a trace asks for (its settings, then cfg->alloc_conf). */
grt_status grt__replay_alloc_config(const grt_replay_config *cfg, const grt_trace_info *info, grt_alloc_config *out,
                                    char *err, size_t err_size);

/* series.c */
grt_status grt__replay_record_sample(grt_replay *r);
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
grt_devptr grt__replay_to_replay(const grt_replay *r, grt_devptr recorded);

/* Slot mode (replay_stream.c): the reader thread maps file ids to small
 * reusable slots, so the replaying thread indexes arrays instead of hashing;
 * its verdicts travel in grt_trace_event.reserved. */
#define GRT__SLOT_DUPLICATE 1 /* alloc of a live id (ev->id is the file's id) */
#define GRT__SLOT_UNMATCHED 2 /* a free of no live allocation */
void grt__replay_use_slots(grt_replay *r);

/* Recorded address <-> the replay's (identity outside the translated ranges). */
grt_devptr grt__replay_to_recorded(const grt_replay *r, grt_devptr replay);
grt_devptr grt__replay_to_replay(const grt_replay *r, grt_devptr recorded);

#endif
