/* sorder_impl.h — the stream-ordered layer's private structures (internal).
 *
 * The sanitizer (hb.c) keeps one vector clock per stream it has seen, plus the
 * host's (index 0): clock[i][j] = the last op number of stream j that stream i
 * has seen (happens-before). Issuing an op to stream i joins the host's clock
 * into i's (host program order) and applies CUDA's legacy-stream edges; an op
 * then takes number ++clock[i][i]. A record copies the clock into the event; a
 * wait joins the event's clock; a host synchronization joins into the host.
 * Per buffer: the last write (a free counts as one) and the reads since; an
 * access races with an earlier one of stream j numbered n when clock[i][j] < n.
 *
 * Locking: so->lock guards streams, clocks, buffers, debug flags and the
 * serialization event; it is held across the exec call an op mirrors so that
 * clock order equals issue order. so->rlock (a leaf) guards the reports and the
 * body wrappers: kernel bodies take only rlock. Blocking synchronizations run
 * with no sorder lock held.
 */
#ifndef GRT_SORDER_IMPL_H
#define GRT_SORDER_IMPL_H

#include <pthread.h>
#include <stdbool.h>

#include "base/u64map.h"
#include "exec/observe.h"
#include "gpurt/sorder.h"

#define GRT__HB_HOST 0u
#define GRT__HB_HOST_ID UINT64_MAX
#define GRT__POISON_BYTE 0xDB
#define GRT__POISON_WORD 0xDBDBDBDBDBDBDBDBull

typedef struct grt__hb_clock {
  uint64_t *v;
  uint32_t n, cap;
} grt__hb_clock;

typedef struct grt__hb_ref {
  uint32_t stream; /* index into so->streams (0 = host) */
  uint64_t seq;
  int write;
  char op[40];
} grt__hb_ref;

typedef struct grt__hb_stream {
  grt_stream *s; /* NULL for the host */
  grt_stream_id id;
  bool legacy, blocking;
  grt__hb_clock vc;
} grt__hb_stream;

typedef struct grt__hb_buffer {
  grt_devptr ptr;
  uint64_t bytes;
  bool has_write, freed;
  bool free_done;         /* freed, and the free seen complete: a reallocation is ordered after it */
  grt__hb_ref last_write; /* the free when freed */
  grt__hb_ref *reads;     /* at most one per stream */
  uint32_t n_reads, cap_reads;
} grt__hb_buffer;

/* A kernel body wrapped for the poison check (debug mode). */
typedef struct grt__so_wrap {
  struct grt__so_wrap *next; /* free list / all list */
  struct grt__so_wrap *all_next;
  grt_sorder *so;
  grt_host_fn fn;
  void *arg;
  grt__hb_ref ref;
  grt_stream_id stream_id;
  char stream_name[32];
  size_t n;
  grt_access acc[8]; /* the first 8 declared reads are checked */
} grt__so_wrap;

struct grt_sorder {
  grt_sorder_config cfg;
  grt_exec *exec;
  grt_device *dev;
  pthread_mutex_t lock;
  grt__hb_stream *streams; /* [0] = host */
  size_t n_streams, cap_streams;
  grt__u64map by_id;     /* stream id -> index + 1 */
  grt__u64map ev_clocks; /* grt_event* -> grt__hb_clock* */
  grt__u64map buffers;   /* address -> grt__hb_buffer* */
  int serialize, poison;
  grt_event *serial_ev;  /* re-recorded after each op in serialize mode */
  unsigned users;        /* pools using the context */

  pthread_mutex_t rlock;
  grt_sorder_report *reports;
  size_t n_reports;
  uint64_t total_reports;
  grt__so_wrap *free_wraps, *all_wraps;
};

/* hb.c (so->lock held) */
void grt__hb_init(grt_sorder *so);
void grt__hb_free(grt_sorder *so);
/* Index of s's clock, created on first use; -1 on error (st says why). */
int grt__hb_stream_index(grt_sorder *so, grt_stream *s, grt_status *st);
/* The joins that issuing any op (marker or not) to stream i implies. */
grt_status grt__hb_issue(grt_sorder *so, int i);
/* A new op on stream i: its number and a reference. */
grt__hb_ref grt__hb_op(grt_sorder *so, int i, const char *name, int write);
typedef enum grt__hb_kind { GRT__HB_READ, GRT__HB_WRITE, GRT__HB_FREE, GRT__HB_ALLOC } grt__hb_kind;
void grt__hb_access(grt_sorder *so, int i, const grt__hb_ref *r, grt_devptr ptr, uint64_t bytes, grt__hb_kind k);
grt_status grt__hb_record(grt_sorder *so, int i, grt_event *ev);
grt_status grt__hb_wait(grt_sorder *so, int i, grt_event *ev);
/* Copies of clocks for host joins after an unlocked synchronization. */
grt_status grt__hb_clock_copy(grt__hb_clock *dst, const grt__hb_clock *src);
grt_status grt__hb_join(grt__hb_clock *dst, const grt__hb_clock *src);
void grt__hb_clock_free(grt__hb_clock *c);
grt__hb_clock *grt__hb_event_clock(grt_sorder *so, grt_event *ev); /* NULL: never recorded through the context */
void grt__hb_free_done(grt_sorder *so, grt_devptr ptr);

/* sorder.c */
void grt__so_report(grt_sorder *so, grt_sorder_report_kind kind, grt_devptr buf, const grt__hb_ref *access,
                    const grt__hb_ref *prior); /* so->lock held */
void grt__so_add_report(grt_sorder *so, const grt_sorder_report *r); /* takes rlock */
void grt__so_ref_out(grt_sorder *so, const grt__hb_ref *r, grt_sorder_op_ref *out);

/* Pool hooks (sorder.c). */
grt_status grt__sorder_attach(grt_sorder *so, grt_exec *exec); /* a pool starts using so */
void grt__sorder_detach(grt_sorder *so);
/* Stream-ordered free on s: poison memset (debug), the free as an access, then ev recorded on s. */
grt_status grt__sorder_free_async(grt_sorder *so, grt_devptr ptr, uint64_t bytes, grt_stream *s, grt_event *ev);
/* Host-order free: the free is a host access; poison is written at once (debug). */
grt_status grt__sorder_free_host(grt_sorder *so, grt_devptr ptr, uint64_t bytes);
/* What a later grt__sorder_alloc on s needs in host memory (s's clock and the
 * joins issuing makes), so that a pool can fail before it changes anything. */
grt_status grt__sorder_prepare(grt_sorder *so, grt_stream *s);
/* A (re)allocation on s: a write-like access that must come after the last free. */
grt_status grt__sorder_alloc(grt_sorder *so, grt_devptr ptr, uint64_t bytes, grt_stream *s);

/* Poison fill from the host with relaxed atomic stores (may race with device ops by design). */
void grt__sorder_poison_fill(void *host, uint64_t bytes);
/* The pool found s's next work ordered after ev (an edge the program made):
 * s's clock joins ev's, as a wait through the front door would. */
grt_status grt__sorder_ordered(grt_sorder *so, grt_stream *s, grt_event *ev);
/* The pool saw the free of ptr complete: a reallocation on any stream comes
 * after it (accesses through the old pointer are still uses after free). */
void grt__sorder_free_done(grt_sorder *so, grt_devptr ptr);

/* ---- the stream-ordered pool (mempool.c: blocks, malloc/free; mempool_sync.c:
 * sync points, threshold, trim, attributes, figures) ---- */

typedef struct grt__mp_block {
  grt_devptr ptr;
  uint64_t size;     /* the block's size in the allocator */
  grt_stream_id sid; /* live: allocating stream; parked: freeing stream */
  grt_event *ev;     /* parked: the free point */
  struct grt__mp_block *prev, *next;
  bool parked;
} grt__mp_block;

struct grt_mempool {
  grt_mempool_config cfg; /* cfg.reuse and cfg.release_threshold change with the attributes */
  grt_exec *exec;
  grt_sorder *so;
  grt_allocator *a;
  bool is_async;
  grt_alloc_config acfg;
  grt_stream_ops ops;  /* the exec's */
  grt_stream_ops aops; /* the allocator's: the exec's, with a query that moves nothing */
  pthread_mutex_t lock;
  grt__u64map blocks; /* ptr -> grt__mp_block (live or parked) */
  grt__u64map torch;  /* PyTorch path: ptr -> size (live) */
  grt__mp_block *park_head, *park_tail;
  size_t n_parked, n_live;
  grt_event **spare;
  size_t n_spare, cap_spare;
  /* scratch for one call, room for every parked block (reserved by free_async) */
  grt__mp_block **cand;
  grt_event **cand_ev;
  grt__order *cand_order;
  size_t cap_cand;
  grt_mempool_counters c;
  uint64_t used, used_high;
};

/* The pool's lock. Each thread counts the pool locks it holds, so that a
 * synchronization made inside a pool call is not taken for a sync point
 * (and no pool waits for a lock that thread holds). */
void grt__mp_lock(grt_mempool *p);
void grt__mp_unlock(grt_mempool *p);
bool grt__mp_in_call(void);
/* mempool.c, lock held: hands back the parked frees the device passed (of
 * stream sid, or all), as the sync points and OPPORTUNISTIC do. */
grt_status grt__mp_release_completed(grt_mempool *p, bool all, grt_stream_id sid);
/* mempool_sync.c */
void grt__mp_on_sync(void *ctx, const grt__sync_point *sp);
grt_status grt__mp_shrink(grt_mempool *p, uint64_t bytes); /* lock held */

#endif
