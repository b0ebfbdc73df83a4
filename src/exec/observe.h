/* observe.h — what a layer above the exec may learn about it without changing
 * the schedule (internal: the stream-ordered pool, src/sorder/, is the user).
 *
 * Sync observers: told after every host synchronization CUDA names — a
 * stream's, an event's, the device's — however it was called, so a memory
 * pool applies its release threshold there (cudaMemPoolAttrReleaseThreshold:
 * "on the next call to stream, event or context synchronize").
 *
 * The order query: whether work issued to a stream from now on is ordered
 * after an event's snapshot, through stream order, event waits and the legacy
 * stream's implicit edges, or whether that snapshot already completed. It
 * starts nothing, runs nothing and moves neither clock.
 */
#ifndef GRT_EXEC_OBSERVE_H
#define GRT_EXEC_OBSERVE_H

#include <stdbool.h>

#include "gpurt/exec.h"

typedef enum grt__sync_kind { GRT__SYNC_STREAM, GRT__SYNC_EVENT, GRT__SYNC_DEVICE } grt__sync_kind;

/* What the host synchronized with: a stream (its id), an event (the id of the
 * stream its snapshot is on; has_stream 0 for a never-recorded event), or
 * the device (has_stream 0). */
typedef struct grt__sync_point {
  grt__sync_kind kind;
  bool has_stream;
  grt_stream_id stream;
} grt__sync_point;

/* Called on the synchronizing thread once the sync succeeded, with no exec
 * lock held; that thread may hold locks of its own (a sync made inside a
 * layer above), so an observer must not wait for anything it might hold. */
typedef void (*grt__sync_fn)(void *ctx, const grt__sync_point *sp);

/* GRT_ERR_NOMEM (nothing registered) when host memory runs out. The exec
 * refuses destruction (GRT_ERR_BUSY) while an observer is registered. */
grt_status grt__exec_observe(grt_exec *exec, grt__sync_fn fn, void *ctx);
/* Unregisters (fn, ctx); when it returns, no call of it runs or will run.
 * Must not be called from the observer itself. GRT_ERR_NOT_FOUND if absent. */
grt_status grt__exec_unobserve(grt_exec *exec, grt__sync_fn fn, void *ctx);

typedef enum grt__order {
  GRT__ORDER_UNORDERED = 0, /* pending, and s's next work need not wait for it */
  GRT__ORDER_ORDERED = 1,   /* pending, and s's next work waits for it */
  GRT__ORDER_COMPLETE = 2,  /* the snapshot completed (or the event was never recorded) */
} grt__order;

/* For each of the n events, its order relative to the work issued to s from
 * now on (s NULL: only COMPLETE or UNORDERED). Errors: GRT_ERR_INVALID_ARG,
 * GRT_ERR_INVALID_HANDLE (an event or s), GRT_ERR_WRONG_DEVICE (another exec's),
 * GRT_ERR_CAPTURED_EVENT (a captured event), GRT_ERR_CAPTURE_UNSUPPORTED (s
 * capturing; in neither case is anything invalidated),
 * the exec's sticky error, GRT_ERR_NOMEM; out is written only on success. */
grt_status grt__events_order(grt_stream *s, grt_event *const *evs, size_t n, grt__order *out);

#endif
