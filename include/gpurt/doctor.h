/* gpurt/doctor.h — the memory doctor: a recorded PyTorch snapshot examined
 * (what it held at its peak and its first OOM, whether that OOM was demand
 * or fragmentation, which segments live blocks pinned), and the what-if
 * sweep: the snapshot replayed under allocator settings it was not run
 * with, at the capacity the user asks about, to find the
 * PYTORCH_CUDA_ALLOC_CONF that would have avoided its OOMs or saved memory.
 *
 * Each row is one replay of the whole trace by the caching policy, first fit
 * on the simulated device the options name (paged unless asked otherwise:
 * docs/CONFORMANCE.md, case 16), starting with every block that was live
 * when recording began allocated under the row's own settings
 * (grt_replay_prefill_start); the settings string is applied over the
 * snapshot's own (allocator_settings). Recorded empty_cache() moments are
 * kept (the program calls them whatever the settings); at a recorded OOM the
 * row's model tries the failing request on its own device.
 *
 * Rows run in parallel threads over the one loaded trace (a loaded trace is
 * immutable). */
#ifndef GPURT_DOCTOR_H
#define GPURT_DOCTOR_H

#include <stdbool.h>

#include "gpurt/replay.h"

#ifdef __cplusplus
extern "C" {
#endif

#define GRT_WHATIF_CONF_MAX 160

typedef struct grt_whatif_row {
  char conf[GRT_WHATIF_CONF_MAX]; /* applied over the snapshot's settings; "" = as recorded */
  grt_status status;              /* GRT_OK, or why the row has no figures */
  char note[200];                 /* the reason, or the settings parser's notes */
  uint64_t ooms;                  /* requests the model could not serve at the capacity */
  uint64_t recorded_ooms;         /* oom events the trace recorded ... */
  uint64_t recorded_ooms_avoided; /* ... whose request this row's model served */
  uint64_t peak_reserved, final_reserved, peak_allocated;
  uint64_t min_capacity;          /* smallest device with zero OOMs (0 = not searched or not found) */
  uint64_t device_mallocs, device_frees, syncs, alloc_retries;
} grt_whatif_row;

typedef struct grt_whatif_options {
  uint64_t capacity;              /* device bytes; 0 = unbounded (1 TiB) */
  grt_device_model device_model;  /* default: paged */
  unsigned threads;               /* 0 = one per CPU */
  bool search;                    /* also each row's smallest zero-OOM capacity (about 20 replays more) */
} grt_whatif_options;

GRT_API void grt_whatif_options_default(grt_whatif_options *o);

/* The settings worth trying on this trace, fitted to its sizes: as recorded;
 * expandable_segments; a max_split_size_mb ladder between 20 MiB and its
 * largest request; roundup_power2_divisions; garbage_collection_threshold
 * under a 0.95 memory fraction (it acts only under one); and the
 * combinations known to interact (expandable with max_split). *rows (free with grt_whatif_free)
 * gets one row per setting, figures zeroed. */
GRT_API GRT_MUST_CHECK grt_status grt_whatif_sweep(const grt_trace *trace, grt_whatif_row **rows, size_t *n);

/* Replays each of the n rows' settings (rows[i].conf) and fills its figures.
 * A row whose settings do not parse, or whose replay fails, gets its status
 * and note; the others are still filled. Returns the first failure that is
 * not a row's own (host memory, a thread that could not start). */
GRT_API GRT_MUST_CHECK grt_status grt_whatif_run(const grt_trace *trace, const grt_whatif_options *o,
                                                 grt_whatif_row *rows, size_t n);

GRT_API void grt_whatif_free(grt_whatif_row *rows);

/* One setting replayed as a row is (grt_whatif_run), its per-event figures
 * kept: at most max_points samples (max_points >= 1), each the largest
 * value of its run of events, so a peak is never averaged away; *summary
 * gets the replay's summary. *samples is freed with free(); it is NULL and
 * *n 0 after a failure. GRT_ERR_PARSE when the settings do not parse. */
GRT_API GRT_MUST_CHECK grt_status grt_whatif_series(const grt_trace *trace, const grt_whatif_options *o,
                                                    const char *conf, size_t max_points,
                                                    grt_replay_sample **samples, size_t *n,
                                                    grt_replay_summary *summary);

/* ---- the advice: the sweep as gpurt whatif and gpurt doctor give it ---- */

typedef enum grt_whatif_goal {
  GRT_WHATIF_GOAL_NO_OOM = 0,     /* fewest OOMs, then least peak reserved, then fewest device syncs */
  GRT_WHATIF_GOAL_MIN_RESERVED,   /* least peak reserved among rows with as few OOMs */
  GRT_WHATIF_GOAL_MIN_SYNCS,      /* fewest OOMs, then fewest device syncs */
  GRT_WHATIF_GOAL_COUNT
} grt_whatif_goal;

/* "no-oom", "min-reserved", "min-syncs" ("?" otherwise); parse: GRT_ERR_INVALID_ARG for another name. */
GRT_API const char *grt_whatif_goal_name(grt_whatif_goal goal);
GRT_API GRT_MUST_CHECK grt_status grt_whatif_goal_parse(const char *name, grt_whatif_goal *out);

typedef struct grt_whatif_advice {
  grt_whatif_row *rows;           /* the sweep's rows, sorted by the goal: failed rows last, then by OOMs */
  size_t n;
  long best;                      /* the row to recommend, -1 when none beats the recorded settings */
  grt_whatif_goal goal;
  uint64_t capacity;              /* the capacity the rows ran at (0: unbounded, 1 TiB) */
  char capacity_from[200];        /* where it came from, in words */
  grt_device_model device_model;
  grt_trace_recorded recorded;    /* the recorded run's own figures */
} grt_whatif_advice;

/* The sweep (grt_whatif_sweep + grt_whatif_run) at o's capacity or, when
 * o->capacity is 0, at the capacity the snapshot shows it had: reserved +
 * free at its first recorded OOM, else a 2 MiB page under what the device
 * refused at a recorded retry, else unbounded; rows sorted by the goal and
 * the best one picked. Free with grt_whatif_advice_free. On failure *out
 * holds nothing to free. */
GRT_API GRT_MUST_CHECK grt_status grt_whatif_advise(const grt_trace *trace, const grt_whatif_options *o,
                                                    grt_whatif_goal goal, grt_whatif_advice *out);
GRT_API void grt_whatif_advice_free(grt_whatif_advice *a);
/* The advice as one JSON object (what gpurt whatif --json prints): the
 * snapshot's name and device, the capacity, the recorded figures, the best
 * setting and every row. *out is malloc'd, NUL-terminated. */
GRT_API GRT_MUST_CHECK grt_status grt_whatif_json(const grt_whatif_advice *a, const char *name, int device,
                                                  char **out);

/* ---- the diagnosis: what the recorded run held, and why it failed ---- */

typedef enum grt_doctor_verdict {
  GRT_DOCTOR_HEALTHY = 0,          /* no OOM recorded */
  GRT_DOCTOR_DEMAND_BOUND,         /* live memory plus the request exceeded the process's memory */
  GRT_DOCTOR_FRAGMENTATION_BOUND   /* it fitted: the cache's layout did not */
} grt_doctor_verdict;

/* The allocator's state at one moment of the faithful replay (it places
 * every allocation where PyTorch did: docs/REPLAY.md, Fidelity). */
typedef struct grt_doctor_moment {
  bool valid;
  uint64_t event;                  /* the event index just applied */
  uint64_t reserved, allocated, requested; /* bytes: segments, active blocks, what was asked for */
  uint64_t internal_fragmentation; /* allocated - requested (rounding, unsplit remainders) */
  uint64_t external_fragmentation; /* reserved - allocated (cached free blocks) */
  uint64_t releasable;             /* of those, what an empty_cache would give back */
  uint64_t largest_free;           /* the largest cached free block */
  uint64_t request;                /* at an OOM: the request that failed */
  uint64_t device_free;            /* at an OOM: the free device bytes PyTorch saw */
  uint64_t streams;                /* streams whose segments hold bytes */
  uint64_t other_stream_free;      /* cached free bytes on streams other than the request's (the OOM) or
                                      the one holding the most allocated bytes (the peak) */
  uint64_t traced;                 /* requested bytes the sites hold (allocations the trace made, and
                                      blocks live since before it began that the snapshot names) */
} grt_doctor_moment;

#define GRT_DOCTOR_MAX_PINNED 8

/* A segment an empty_cache cannot give back because live blocks pin it. */
typedef struct grt_doctor_pinned {
  grt_devptr address;              /* recorded address */
  uint64_t size, free_bytes;       /* the segment, and its cached free bytes */
  uint64_t live_blocks, live_bytes;
  uint64_t first_live_event;       /* the alloc event of its lowest live block the trace made (UINT64_MAX: none) */
  uint32_t first_live_stack;       /* the stack of its lowest live block with one: its alloc event's, or for a
                                      block live since before recording, the snapshot's (0: none) */
} grt_doctor_pinned;

#define GRT_DOCTOR_MAX_SITES 8

/* An allocation site: the allocations made under one recorded stack that
 * were live at a moment (grt_trace_stack gives its frames,
 * grt_trace_frames_fold the ones to show). Stack 0: allocations without
 * frames. */
typedef struct grt_doctor_site {
  uint32_t stack;
  uint64_t bytes;                  /* requested bytes live */
  uint64_t count;                  /* live allocations */
} grt_doctor_site;

/* ---- the runtime contract: what a serving platform requires of its runtime,
 * the rules a trace can show broken (docs/RUNTIME_CONTRACT.md) ---- */

typedef enum grt_contract_rule {
  GRT_CONTRACT_STEADY_MALLOCS = 0, /* no device malloc/free once the loop repeats */
  GRT_CONTRACT_EMPTY_CACHE,        /* no empty_cache bursts (each device free synchronizes) */
  GRT_CONTRACT_OOM_RETRIES,        /* no flush-and-retry on a full device, no OOM */
  GRT_CONTRACT_CROSS_STREAM_FREES, /* stream-ordered lifetimes: no frees deferred by record_stream */
  GRT_CONTRACT_STREAM_STRANDING,   /* no cached bytes one stream holds while another needs them */
  GRT_CONTRACT_RULE_COUNT
} grt_contract_rule;

typedef enum grt_contract_outcome {
  GRT_CONTRACT_KEPT = 0,
  GRT_CONTRACT_BROKEN,
  GRT_CONTRACT_UNKNOWN             /* the trace cannot tell (no repetition found, no times recorded) */
} grt_contract_outcome;

/* One rule as the trace shows it. The figures are the recorded run's. */
typedef struct grt_contract_finding {
  grt_contract_outcome outcome;
  uint64_t count;                  /* occurrences: device mallocs after warm-up, empty_cache bursts,
                                      retries, deferred frees, streams holding cached bytes */
  uint64_t also;                   /* device frees after warm-up, OOMs, the longest deferral in events,
                                      the streams in use (by rule) */
  uint64_t bytes;                  /* bytes they involved (for stranding: cached free bytes on other streams) */
  uint64_t first_event;            /* the first occurrence (UINT64_MAX: none) */
  uint32_t stack;                  /* its recorded stack (0: none) */
  int64_t time_us;                 /* recorded microseconds they took (-1: the trace has no times) */
  char detail[256];                /* the figures in a sentence */
} grt_contract_finding;

/* The loop the trace repeats: iterations begin where one allocation site
 * (the anchor) recurs, and the allocation sites between two of its
 * occurrences are the same from one iteration to the next. */
typedef struct grt_doctor_steady {
  bool found;
  uint64_t iterations;             /* occurrences of the anchor */
  uint64_t from_event;             /* the event that begins the second iteration: warm-up ends */
  uint64_t period;                 /* allocations per iteration (mean) */
  uint32_t anchor_stack;           /* the anchor's stack; 0 for a trace without frames (anchor_size then) */
  uint64_t anchor_size;
  double similarity;               /* mean multiset Jaccard of consecutive iterations' sites, 0..1 */
} grt_doctor_steady;

/* The rule's short name ("steady-state-mallocs", ...), or "?" */
GRT_API const char *grt_contract_rule_name(grt_contract_rule rule);

typedef struct grt_doctor_report {
  grt_doctor_verdict verdict;
  char why[320];                   /* the numbers behind the verdict, in a sentence */
  uint64_t process_memory;         /* reserved + free at the first OOM (0: no OOM recorded) */
  grt_doctor_moment peak;          /* at the peak of live (requested) bytes, as recorded */
  grt_doctor_moment oom;           /* just after the first recorded OOM (its release path run) */
  grt_doctor_pinned pinned[GRT_DOCTOR_MAX_PINNED]; /* at the OOM, else the peak: most free bytes first */
  size_t n_pinned;
  /* The sites holding the most bytes at the peak and at the OOM: allocations
   * the trace made (their alloc event's stack) and blocks live since before
   * it began (the final block's stack, or their free event's). */
  grt_doctor_site peak_sites[GRT_DOCTOR_MAX_SITES], oom_sites[GRT_DOCTOR_MAX_SITES];
  size_t n_peak_sites, n_oom_sites;
  bool partial;                    /* the trace began mid-run: the start was rebuilt */
  grt_doctor_steady steady;
  grt_contract_finding contract[GRT_CONTRACT_RULE_COUNT];
} grt_doctor_report;

/* "healthy", "demand-bound", "fragmentation-bound"; "kept", "broken", "unknown". */
GRT_API const char *grt_doctor_verdict_name(grt_doctor_verdict verdict);
GRT_API const char *grt_contract_outcome_name(grt_contract_outcome outcome);

/* Replays a PyTorch snapshot faithfully (rebuilt start, recorded addresses,
 * recorded OOMs replayed) and reports the state at its peak of live bytes and at its
 * first OOM, the verdict, and the segments live blocks pin. err (may be
 * NULL) gets the reason of a failure. */
GRT_API GRT_MUST_CHECK grt_status grt_doctor_examine(const grt_trace *trace, grt_doctor_report *out, char *err,
                                                     size_t err_size);


/* The diagnosis as one JSON object (what gpurt doctor --json prints): the
 * verdict and why, the moments at the peak and the first OOM, the sites
 * with their folded frames, the pinned segments, the loop and the runtime
 * contract, and the advice's capacity and recommendation (advice may be
 * NULL: no recommendation). *out is malloc'd, NUL-terminated. */
GRT_API GRT_MUST_CHECK grt_status grt_doctor_json(const grt_trace *trace, const grt_doctor_report *report,
                                                  const grt_whatif_advice *advice, const char *name, int device,
                                                  char **out);

/* ---- the snapshot's page ---- */

/* Writes one self-contained HTML page of a PyTorch snapshot to path (script
 * and style inline: it opens offline): the doctor's verdict, sites and
 * contract; every allocation as a band over time; the allocator's segments
 * at any event; reserved, allocated and largest free block over time (the
 * faithful replay beside the recorded run). `examined` (may be NULL: the
 * trace is examined here) is the trace's grt_doctor_examine report; `name`
 * titles the page; `device` is the device the trace was loaded for, said on
 * the page. *events (may be NULL) gets the events drawn. err (may be NULL)
 * gets the reason of a failure; a failed write may leave a partial file. */
GRT_API GRT_MUST_CHECK grt_status grt_doctor_page_save(const grt_trace *trace, const grt_doctor_report *examined,
                                                       const char *name, int device, const char *path,
                                                       size_t *events, char *err, size_t err_size);

#ifdef __cplusplus
}
#endif
#endif /* GPURT_DOCTOR_H */
