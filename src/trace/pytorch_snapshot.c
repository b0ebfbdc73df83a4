/* pytorch_snapshot.c — PyTorch memory snapshots (torch.cuda.memory._dump_snapshot) to events.
 *
 * The pickle (plain dicts/lists) is parsed by pickle.c; this file walks the
 * fixed schema: `device_traces[device]` becomes the event list (ids matched
 * by address: an alloc at A is freed by the next free_* at A), the final
 * `segments` of that device become the trace's segments (block addresses
 * computed as segment address + sizes of the blocks before, when absent) and
 * `allocator_settings` fill the settings. The `frames` of events, blocks and
 * segments become interned stacks (frames.c). Only known keys are read;
 * unknown keys (compile_context, user_metadata, ...) are ignored. Errors name
 * the element path, e.g. "device_traces[0][17]: 'size' is not an integer".
 *
 * Frames are diagnostics, not allocator state, so a malformed one never makes
 * a snapshot unreadable: a `frames` value that is not a list, or an entry
 * that is not a {'name': str, 'filename': str, 'line': int} dict (strings
 * without NUL bytes, the line within int64), is dropped and counted in
 * frames_skipped, once per owner. PyTorch's pickles memoize the frame dicts
 * they repeat, so events with the same stack hold lists of the same dict
 * addresses: a list is first looked up by those addresses (one hash over
 * the list), and only a new list has its frames looked up one by one.
 */
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "trace/pickle.h"
#include "trace/trace_impl.h"

typedef struct conv {
  grt__tb b;
  grt_trace_error *err;
  int device;
  grt__u64map frame_of; /* frame dict address -> frame index + 2, or 1: malformed */
  grt__u64map list_of;  /* hash of a frames list's item addresses -> lists[] index + 1 */
  struct seen_list {
    size_t first, n;      /* its item addresses: items[first, first + n) */
    uint32_t stack;
    bool malformed;       /* it had a malformed entry */
  } *lists;
  size_t n_lists, cap_lists;
  const grt__pv **items;
  size_t n_items, cap_items;
  grt__u64map taken_of;  /* list address -> taken[] index + 1 */
  struct taken_list *taken;
  size_t n_taken, cap_taken;
} conv;

#if defined(__GNUC__)
__attribute__((format(printf, 2, 3)))
#endif
static grt_status bad(conv *c, const char *fmt, ...) {
  char msg[256];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  grt__trace_err(c->err, 0, 0, false, "%s", msg);
  return GRT_ERR_PARSE;
}

static bool as_u64(const grt__pv *v, uint64_t *out) {
  if (!v || v->wide) return false;
  if (v->type == GRT__PV_INT || v->type == GRT__PV_BOOL) {
    if (!v->big && v->u.i < 0) return false;
    *out = (uint64_t)v->u.i;
    return true;
  }
  return false;
}

static bool as_i64(const grt__pv *v, int64_t *out) {
  if (!v || (v->type != GRT__PV_INT && v->type != GRT__PV_BOOL) || v->big || v->wide) return false;
  *out = v->u.i;
  return true;
}

static bool as_list(const grt__pv *v) { return v && (v->type == GRT__PV_LIST || v->type == GRT__PV_TUPLE); }

/* Reads an unsigned field; absent -> def (or error when required). */
static grt_status field_u64(conv *c, const grt__pv *d, const char *key, bool required, uint64_t def,
                            uint64_t *out, const char *where, size_t i) {
  const grt__pv *v = grt__pv_get(d, key);
  if (!v || v->type == GRT__PV_NONE) {
    if (required) return bad(c, "%s[%zu]: '%s' is missing", where, i, key);
    *out = def;
    return GRT_OK;
  }
  if (!as_u64(v, out))
    return bad(c, "%s[%zu]: '%s' is not a non-negative integer%s", where, i, key, v->wide ? " (wider than 64 bits)" : "");
  return GRT_OK;
}

/* A builder failure: host memory, or more distinct frames than ids. */
static grt_status build_failed(conv *c, grt_status st) {
  if (st == GRT_ERR_SIZE) return bad(c, "more than 2^32-2 distinct strings, frames or stacks");
  grt__trace_err(c->err, 0, 0, false, "%s", grt_status_str(st));
  return st;
}

static bool frame_fields(const grt__pv *f, grt__slice *name, grt__slice *file, int64_t *line) {
  if (!f || f->type != GRT__PV_DICT) return false;
  const grt__pv *n = grt__pv_get(f, "name"), *fn = grt__pv_get(f, "filename"), *l = grt__pv_get(f, "line");
  if (!n || n->type != GRT__PV_STR || !fn || fn->type != GRT__PV_STR || !l || l->type != GRT__PV_INT || l->big || l->wide)
    return false;
  *name = (grt__slice){n->u.s.p, n->u.s.n};
  *file = (grt__slice){fn->u.s.p, fn->u.s.n};
  *line = l->u.i;
  return true;
}

/* The frame index of frame dict f; *ok false when it is malformed. */
static grt_status frame_index(conv *c, const grt__pv *f, uint32_t *index, bool *ok) {
  uint64_t key = (uint64_t)(uintptr_t)f;
  uintptr_t v = (uintptr_t)grt__u64map_get(&c->frame_of, key);
  if (v) {
    *ok = v > 1;
    *index = (uint32_t)(v - 2);
    return GRT_OK;
  }
  grt__slice name, file;
  int64_t line;
  *ok = frame_fields(f, &name, &file, &line);
  if (*ok) {
    grt_status st = grt__tb_frame(&c->b, name, file, line, index);
    if (st == GRT_ERR_INVALID_ARG)
      *ok = false; /* a NUL byte in a string */
    else if (st)
      return build_failed(c, st);
  }
  /* an unshared dict is seen once, and its address may be reused once its event is taken */
  if (f->shared && !grt__u64map_put(&c->frame_of, key, (void *)(uintptr_t)(*ok ? (uintptr_t)*index + 2 : 1)))
    return build_failed(c, GRT_ERR_NOMEM);
  return GRT_OK;
}

/* The stack of a list not seen before, frame by frame. */
static grt_status intern_list(conv *c, const grt__pv *fr, uint32_t *stack, bool *malformed) {
  grt_status st = GRT_OK;
  *malformed = false;
  grt__tb_stack_clear(&c->b);
  for (size_t i = 0; i < fr->u.seq.n && !st; i++) {
    uint32_t index;
    bool ok;
    st = frame_index(c, fr->u.seq.v[i], &index, &ok);
    if (!st && ok && (st = grt__tb_stack_push(&c->b, index))) st = build_failed(c, st);
    *malformed |= !ok;
  }
  if (!st && (st = grt__tb_stack_end(&c->b, stack))) st = build_failed(c, st);
  return st;
}

/* Remembers a list's item addresses (under hash h) and what they gave. */
static grt_status remember_list(conv *c, const grt__pv *fr, uint64_t h, uint32_t stack, bool malformed) {
  size_t n = fr->u.seq.n;
  if (grt__u64map_get(&c->list_of, h)) return GRT_OK; /* another list with this hash: not remembered */
  for (size_t i = 0; i < n; i++)
    if (!fr->u.seq.v[i]->shared) return GRT_OK; /* its address may name another dict later */
  if (!grt__grow((void **)&c->items, &c->cap_items, c->n_items + n, sizeof *c->items) ||
      !grt__grow((void **)&c->lists, &c->cap_lists, c->n_lists + 1, sizeof *c->lists) ||
      !grt__u64map_put(&c->list_of, h, (void *)(uintptr_t)(c->n_lists + 1)))
    return build_failed(c, GRT_ERR_NOMEM);
  memcpy(c->items + c->n_items, fr->u.seq.v, n * sizeof *c->items);
  c->lists[c->n_lists++] = (struct seen_list){c->n_items, n, stack, malformed};
  c->n_items += n;
  return GRT_OK;
}

/* The stack id of owner['frames'] (0: absent, None, empty, or nothing well-formed in it). */
static grt_status read_frames(conv *c, const grt__pv *owner, uint32_t *stack) {
  *stack = 0;
  const grt__pv *fr = grt__pv_get(owner, "frames");
  if (!fr || fr->type == GRT__PV_NONE) return GRT_OK;
  if (!as_list(fr)) {
    c->b.t->frames_skipped++;
    return GRT_OK;
  }
  size_t n = fr->u.seq.n;
  if (n == 0) return GRT_OK;
  uint64_t h = grt__hash_bytes(fr->u.seq.v, n * sizeof *fr->u.seq.v, 5);
  uintptr_t v = (uintptr_t)grt__u64map_get(&c->list_of, h);
  const struct seen_list *seen = v ? &c->lists[v - 1] : NULL;
  bool malformed;
  if (seen && seen->n == n && memcmp(c->items + seen->first, fr->u.seq.v, n * sizeof *c->items) == 0) {
    *stack = seen->stack;
    malformed = seen->malformed;
  } else {
    grt_status st = intern_list(c, fr, stack, &malformed);
    if (!st) st = remember_list(c, fr, h, *stack, malformed);
    if (st) return st;
  }
  if (malformed) c->b.t->frames_skipped++;
  return GRT_OK;
}

static const struct {
  const char *name;
  grt_trace_kind kind;
} actions[] = {
    {"alloc", GRT_TRACE_ALLOC},
    {"free_requested", GRT_TRACE_FREE_REQUESTED},
    {"free_completed", GRT_TRACE_FREE_COMPLETED},
    {"segment_alloc", GRT_TRACE_SEGMENT_ALLOC},
    {"segment_free", GRT_TRACE_SEGMENT_FREE},
    {"segment_map", GRT_TRACE_SEGMENT_MAP},
    {"segment_unmap", GRT_TRACE_SEGMENT_UNMAP},
    {"oom", GRT_TRACE_OOM},
    {"snapshot", GRT_TRACE_SNAPSHOT},
};

/* An event as the sink took it, before it is known which device's it is. */
typedef struct taken_event {
  uint64_t addr, size, stream;
  int64_t time;
  uint32_t stack;
  uint8_t kind, flags;
  bool skip;              /* user_defined: no allocator effect */
  bool frames_malformed;
} taken_event;

#define TAKEN_CHUNK 65536 /* records per chunk: freed as they are fed, never reallocated */

/* The events taken from one list, from its item `first` on. */
typedef struct taken_list {
  const grt__pv *list;
  size_t first;
  taken_event **chunk;
  size_t n, n_chunks, cap_chunks;
  bool failed;            /* item first + n is malformed: why says how (nothing after it is kept) */
  char why[160];
} taken_list;

static void taken_list_free(taken_list *l) {
  for (size_t i = 0; i < l->n_chunks; i++) free(l->chunk[i]);
  free(l->chunk);
  l->chunk = NULL;
  l->n_chunks = 0;
}

/* Room for record n; NULL when host memory ran out. */
static taken_event *taken_slot(taken_list *l) {
  if (l->n / TAKEN_CHUNK == l->n_chunks) {
    if (!grt__grow((void **)&l->chunk, &l->cap_chunks, l->n_chunks + 1, sizeof *l->chunk)) return NULL;
    if (!(l->chunk[l->n_chunks] = malloc(TAKEN_CHUNK * sizeof **l->chunk))) return NULL;
    l->n_chunks++;
  }
  return &l->chunk[l->n / TAKEN_CHUNK][l->n % TAKEN_CHUNK];
}

#if defined(__GNUC__)
__attribute__((format(printf, 3, 4)))
#endif
static grt_status why(char *out, size_t cap, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(out, cap, fmt, ap);
  va_end(ap);
  return GRT_ERR_PARSE;
}

static grt_status event_u64(const grt__pv *e, const char *key, bool required, uint64_t *out, char *w, size_t wn) {
  const grt__pv *v = grt__pv_get(e, key);
  *out = 0;
  if (!v || v->type == GRT__PV_NONE) return required ? why(w, wn, "'%s' is missing", key) : GRT_OK;
  if (!as_u64(v, out))
    return why(w, wn, "'%s' is not a non-negative integer%s", key, v->wide ? " (wider than 64 bits)" : "");
  return GRT_OK;
}

/* An event dict to its record; GRT_ERR_PARSE with the reason in w; other errors: the builder's. */
static grt_status parse_event(conv *c, const grt__pv *e, taken_event *o, char *w, size_t wn) {
  char q[64];
  memset(o, 0, sizeof *o);
  if (!e || e->type != GRT__PV_DICT) return why(w, wn, "not a dict");
  const grt__pv *a = grt__pv_get(e, "action");
  if (!a || a->type != GRT__PV_STR) return why(w, wn, "'action' is missing or not a string");
  if (grt__pv_is_str(a, "user_defined")) return o->skip = true, GRT_OK; /* annotations carry no allocator effect */
  o->kind = GRT_TRACE_KIND_COUNT;
  for (size_t k = 0; k < sizeof actions / sizeof actions[0]; k++)
    if (grt__pv_is_str(a, actions[k].name)) o->kind = (uint8_t)actions[k].kind;
  if (o->kind == GRT_TRACE_KIND_COUNT) {
    grt__slice sl = {a->u.s.p, a->u.s.n};
    return why(w, wn, "unknown action '%s'", grt__quote(sl, q, sizeof q));
  }
  o->flags = GRT_TRACE_F_ADDR;
  grt_status st = event_u64(e, "addr", o->kind <= GRT_TRACE_SEGMENT_UNMAP, &o->addr, w, wn);
  if (!st) st = event_u64(e, "size", o->kind <= GRT_TRACE_OOM, &o->size, w, wn);
  if (!st) st = event_u64(e, "stream", false, &o->stream, w, wn);
  if (st) return st;
  const grt__pv *t = grt__pv_get(e, "time_us");
  if (t && t->type != GRT__PV_NONE) {
    if (!as_i64(t, &o->time)) return why(w, wn, "'time_us' is not an integer");
    o->flags |= GRT_TRACE_F_TIME;
  }
  size_t skipped = c->b.t->frames_skipped;
  st = read_frames(c, e, &o->stack);
  o->frames_malformed = c->b.t->frames_skipped != skipped;
  c->b.t->frames_skipped = skipped; /* counted when the event is known to be the device's */
  return st;
}

/* Adds a record to the trace; GRT_ERR_PARSE with the reason in w. */
static grt_status feed_core(conv *c, const taken_event *o, char *w, size_t wn) {
  if (o->skip) return GRT_OK;
  grt_status st = grt__tb_event(&c->b, (grt_trace_kind)o->kind, o->addr, o->size, o->stream, o->time, o->addr,
                                o->flags);
  if (st == GRT_ERR_STATE)
    return why(w, wn, "alloc at 0x%" PRIx64 ", which is still allocated (no free_completed since its alloc)",
               o->addr);
  if (st == GRT_ERR_INVALID_ARG) return why(w, wn, "address out of range: 0x%" PRIx64 " (at most 2^64-2)", o->addr);
  if (st) return build_failed(c, st);
  if (o->frames_malformed) c->b.t->frames_skipped++;
  if ((st = grt__tb_event_stack(&c->b, o->stack))) return build_failed(c, st);
  return GRT_OK;
}

static grt_status feed_event(conv *c, const taken_event *o, size_t i) {
  char w[160];
  grt_status st = feed_core(c, o, w, sizeof w);
  return st == GRT_ERR_PARSE ? bad(c, "device_traces[%d][%zu]: %s", c->device, i, w) : st;
}

static grt_status read_event(conv *c, const grt__pv *e, size_t i) {
  taken_event o;
  char w[160];
  grt_status st = parse_event(c, e, &o, w, sizeof w);
  if (st == GRT_ERR_PARSE) return bad(c, "device_traces[%d][%zu]: %s", c->device, i, w);
  return st ? st : feed_event(c, &o, i);
}

/* The pickle's sink: takes every item of a list whose items are events (its
 * first dict with an 'action' key on), so the events are never held as
 * dicts. The first such list (a snapshot's only device, most often) goes
 * straight into the trace; any other is kept as records until the parse
 * says which list is the device's. A malformed event ends what is kept of
 * its list: the reason waits until then too. */
static grt_status take_event(void *ctx, const grt__pv *list, size_t index, const grt__pv *item, bool *taken) {
  conv *c = ctx;
  uintptr_t at = (uintptr_t)grt__u64map_get(&c->taken_of, (uint64_t)(uintptr_t)list);
  if (!at) {
    if (!item || item->type != GRT__PV_DICT || !grt__pv_get(item, "action")) return GRT_OK;
    if (!grt__grow((void **)&c->taken, &c->cap_taken, c->n_taken + 1, sizeof *c->taken) ||
        !grt__u64map_put(&c->taken_of, (uint64_t)(uintptr_t)list, (void *)(uintptr_t)(c->n_taken + 1)))
      return build_failed(c, GRT_ERR_NOMEM);
    c->taken[c->n_taken] = (taken_list){.list = list, .first = index};
    at = ++c->n_taken;
  }
  taken_list *l = &c->taken[at - 1];
  *taken = true;
  if (l->failed) return GRT_OK;
  taken_event direct, *o = at == 1 ? &direct : taken_slot(l);
  if (!o) return build_failed(c, GRT_ERR_NOMEM);
  grt_status st = parse_event(c, item, o, l->why, sizeof l->why);
  if (!st && at == 1) st = feed_core(c, o, l->why, sizeof l->why);
  if (st == GRT_ERR_PARSE) return l->failed = true, GRT_OK;
  if (!st) l->n++;
  return st;
}

/* The device's events: those the sink took, and any it left before them. */
static grt_status read_events(conv *c, const grt__pv *tr) {
  uintptr_t at = (uintptr_t)grt__u64map_get(&c->taken_of, (uint64_t)(uintptr_t)tr);
  taken_list *l = at ? &c->taken[at - 1] : NULL;
  if (c->n_taken && at != 1) grt__tb_reset_events(&c->b); /* the events fed as parsed are another device's */
  size_t first = l ? l->first : tr->u.seq.n; /* the items before the sink's first: still in the list */
  grt_status st = GRT_OK;
  /* those are not events (not dicts, or without 'action'): the first one is the error, before any fed */
  for (size_t i = 0; i < first && !st; i++) st = read_event(c, tr->u.seq.v[i], i);
  for (size_t k = 0; l && at != 1 && k < l->n && !st; k++) {
    /* the trace grows a chunk at a time as the records go: the two are never held whole together */
    if (k % TAKEN_CHUNK == 0) {
      size_t more = l->n - k < TAKEN_CHUNK ? l->n - k : TAKEN_CHUNK;
      if ((st = grt__tb_reserve_events(&c->b, more))) return build_failed(c, st);
    }
    st = feed_event(c, &l->chunk[k / TAKEN_CHUNK][k % TAKEN_CHUNK], first + k);
    if (k % TAKEN_CHUNK == TAKEN_CHUNK - 1 || k + 1 == l->n) { /* fed: give the chunk back */
      free(l->chunk[k / TAKEN_CHUNK]);
      l->chunk[k / TAKEN_CHUNK] = NULL;
    }
  }
  if (!st && l && l->failed) st = bad(c, "device_traces[%d][%zu]: %s", c->device, first + l->n, l->why);
  return st;
}

static grt_status read_block(conv *c, const grt__pv *bv, uint64_t *next_addr, size_t i) {
  const char *where = "segment blocks";
  grt_trace_block blk;
  memset(&blk, 0, sizeof blk);
  if (!bv || bv->type != GRT__PV_DICT) return bad(c, "%s[%zu]: not a dict", where, i);
  grt_status st = field_u64(c, bv, "size", true, 0, &blk.size, where, i);
  if (!st) st = field_u64(c, bv, "requested_size", false, 0, &blk.requested_size, where, i);
  if (!st) st = field_u64(c, bv, "address", false, *next_addr, &blk.addr, where, i);
  if (st) return st;
  const grt__pv *s = grt__pv_get(bv, "state");
  if (grt__pv_is_str(s, "active_allocated"))
    blk.state = GRT_TRACE_BLOCK_ACTIVE_ALLOCATED;
  else if (grt__pv_is_str(s, "active_pending_free"))
    blk.state = GRT_TRACE_BLOCK_ACTIVE_PENDING_FREE;
  else if (grt__pv_is_str(s, "inactive"))
    blk.state = GRT_TRACE_BLOCK_INACTIVE;
  else
    return bad(c, "%s[%zu]: 'state' is not inactive/active_allocated/active_pending_free", where, i);
  *next_addr = blk.addr + blk.size;
  if ((st = read_frames(c, bv, &blk.stack))) return st;
  st = grt__tb_block(&c->b, &blk);
  if (st) grt__trace_err(c->err, 0, 0, false, "%s", grt_status_str(st));
  return st;
}

static grt_status read_segment(conv *c, const grt__pv *sv, size_t i) {
  const char *where = "segments";
  grt_trace_segment seg;
  memset(&seg, 0, sizeof seg);
  if (!sv || sv->type != GRT__PV_DICT) return bad(c, "%s[%zu]: not a dict", where, i);
  uint64_t dev = 0;
  grt_status st = field_u64(c, sv, "device", false, (uint64_t)c->device, &dev, where, i);
  if (st) return st;
  if (dev != (uint64_t)c->device) return GRT_OK;
  st = field_u64(c, sv, "address", true, 0, &seg.addr, where, i);
  if (!st) st = field_u64(c, sv, "total_size", true, 0, &seg.total_size, where, i);
  if (!st) st = field_u64(c, sv, "stream", false, 0, &seg.stream, where, i);
  if (st) return st;
  const grt__pv *t = grt__pv_get(sv, "segment_type");
  if (grt__pv_is_str(t, "large")) seg.is_large = true;
  else if (grt__pv_is_str(t, "small")) seg.is_large = false;
  else if (!t) seg.is_large = seg.total_size > 2 * GRT_MiB; /* small-pool segments are 2 MiB */
  else return bad(c, "%s[%zu]: 'segment_type' is not 'small' or 'large'", where, i);
  const grt__pv *e = grt__pv_get(sv, "is_expandable");
  seg.is_expandable = e && e->type == GRT__PV_BOOL && e->u.i;
  const grt__pv *pool = grt__pv_get(sv, "segment_pool_id");
  if (pool && pool->type != GRT__PV_NONE &&
      (!(pool->type == GRT__PV_TUPLE || pool->type == GRT__PV_LIST) || pool->u.seq.n != 2 ||
       !as_u64(pool->u.seq.v[0], &seg.pool_id[0]) || !as_u64(pool->u.seq.v[1], &seg.pool_id[1])))
    return bad(c, "%s[%zu]: 'segment_pool_id' is not a pair of non-negative integers", where, i);
  if ((st = read_frames(c, sv, &seg.stack))) return st;
  if ((st = grt__tb_segment(&c->b, &seg))) return build_failed(c, st);
  const grt__pv *blocks = grt__pv_get(sv, "blocks");
  if (!blocks) return GRT_OK;
  if (!as_list(blocks)) return bad(c, "%s[%zu]: 'blocks' is not a list", where, i);
  uint64_t next = seg.addr;
  for (size_t k = 0; k < blocks->u.seq.n && !st; k++) st = read_block(c, blocks->u.seq.v[k], &next, k);
  return st;
}

static grt_status read_settings(conv *c, const grt__pv *s) {
  grt_trace_alloc_settings *o = &c->b.t->settings;
  if (!s || s->type == GRT__PV_NONE) return GRT_OK;
  if (s->type != GRT__PV_DICT) return bad(c, "allocator_settings is not a dict");
  o->present = true;
  const grt__pv *v = grt__pv_get(s, "expandable_segments");
  if (v) o->expandable_segments = (v->type == GRT__PV_BOOL || v->type == GRT__PV_INT) && v->u.i != 0;
  v = grt__pv_get(s, "max_split_size");
  if (v && !as_i64(v, &o->max_split_size)) return bad(c, "allocator_settings: 'max_split_size' is not an integer");
  v = grt__pv_get(s, "garbage_collection_threshold");
  if (v && v->type == GRT__PV_FLOAT) o->garbage_collection_threshold = v->u.f;
  else if (v && v->type == GRT__PV_INT && !v->big && !v->wide) o->garbage_collection_threshold = (double)v->u.i;
  else if (v) return bad(c, "allocator_settings: 'garbage_collection_threshold' is not a number");
  if (!isfinite(o->garbage_collection_threshold))
    return bad(c, "allocator_settings: 'garbage_collection_threshold' is not finite");
  v = grt__pv_get(s, "roundup_power2_divisions");
  uint64_t u;
  if (v && v->type == GRT__PV_DICT) {
    /* keys are interval starts in MiB ("1", "2", ..., "32768"): index log2(key) */
    for (size_t k = 0; k + 1 < v->u.seq.n; k += 2) {
      const grt__pv *key = v->u.seq.v[k];
      grt__slice ks = {key->type == GRT__PV_STR ? key->u.s.p : "", key->type == GRT__PV_STR ? key->u.s.n : 0};
      uint64_t mb;
      if (!grt__parse_u64(ks, &mb) || mb == 0 || (mb & (mb - 1)) || !as_u64(v->u.seq.v[k + 1], &u) || u > UINT32_MAX)
        return bad(c, "allocator_settings: bad roundup_power2_divisions entry");
      int idx = 0;
      while ((mb >> idx) > 1) idx++;
      if (idx < GRT_TRACE_RP2_INTERVALS) o->roundup_power2_divisions[idx] = (uint32_t)u;
    }
  } else if (v && as_u64(v, &u) && u <= UINT32_MAX) {
    for (int k = 0; k < GRT_TRACE_RP2_INTERVALS; k++) o->roundup_power2_divisions[k] = (uint32_t)u;
  } else if (v && v->type != GRT__PV_NONE) {
    return bad(c, "allocator_settings: 'roundup_power2_divisions' is not a dict or integer");
  }
  return GRT_OK;
}

static grt_status convert(conv *c, const grt__pv *root) {
  const grt__pv *segments = NULL, *traces = NULL, *settings = NULL;
  grt_status st = GRT_OK;
  if (as_list(root)) {
    segments = root; /* oldest format: just the segment list */
  } else if (root->type == GRT__PV_DICT) {
    segments = grt__pv_get(root, "segments");
    traces = grt__pv_get(root, "device_traces");
    settings = grt__pv_get(root, "allocator_settings");
  } else {
    return bad(c, "top level is neither a dict nor a list: not a memory snapshot");
  }
  if (segments && !as_list(segments)) return bad(c, "'segments' is not a list");
  c->b.t->has_segments = segments != NULL;
  c->b.t->has_traces = traces != NULL;
  if (traces && !as_list(traces)) return bad(c, "'device_traces' is not a list");
  if (traces) {
    if ((size_t)c->device >= traces->u.seq.n && (traces->u.seq.n > 0 || c->device > 0)) {
      grt__trace_err(c->err, 0, 0, false, "device %d out of range: the snapshot has %zu device traces",
                     c->device, traces->u.seq.n);
      return GRT_ERR_INVALID_ARG;
    }
    /* an empty device_traces list still describes device 0 (with no events) */
    size_t nd = traces->u.seq.n ? traces->u.seq.n : 1;
    c->b.t->n_devices = nd > INT32_MAX ? INT32_MAX : (int)nd;
  }
  c->b.t->device = c->device;
  if (c->b.t->n_devices <= c->device) /* no device_traces: the chosen device is all we know of */
    c->b.t->n_devices = c->device < INT32_MAX ? c->device + 1 : INT32_MAX;
  if ((st = read_settings(c, settings))) return st;
  for (size_t i = 0; segments && i < segments->u.seq.n && !st; i++) st = read_segment(c, segments->u.seq.v[i], i);
  if (st || !traces || traces->u.seq.n == 0) return st;
  const grt__pv *tr = traces->u.seq.v[c->device];
  if (!as_list(tr)) return bad(c, "device_traces[%d] is not a list", c->device);
  return read_events(c, tr);
}

static void conv_free(conv *c) {
  grt__u64map_free(&c->frame_of);
  grt__u64map_free(&c->list_of);
  grt__u64map_free(&c->taken_of);
  for (size_t i = 0; i < c->n_taken; i++) taken_list_free(&c->taken[i]);
  free(c->taken);
  free(c->lists);
  free(c->items);
}

grt_status grt__read_pytorch(const unsigned char *data, size_t len, int device, grt_trace **out,
                             grt_trace_error *err) {
  grt__pickle pk;
  grt__pv *root = NULL;
  uint64_t off = 0;
  char reason[200];
  conv c;
  memset(&c, 0, sizeof c);
  c.err = err;
  c.device = device;
  grt__u64map_init(&c.frame_of);
  grt__u64map_init(&c.list_of);
  grt__u64map_init(&c.taken_of);
  grt_status st = grt__tb_init(&c.b, GRT_TRACE_FORMAT_PYTORCH);
  if (st) {
    grt__trace_err(err, 0, 0, false, "%s", grt_status_str(st));
    return st;
  }
  reason[0] = 0;
  st = grt__pickle_load_sink(&pk, data, len, &root, &off, reason, sizeof reason, take_event, &c);
  if (st && reason[0]) grt__trace_err(err, 0, off, true, "%s", reason); /* else the sink reported it */
  if (!st) st = convert(&c, root);
  grt__pickle_free(&pk);
  conv_free(&c);
  if (st) {
    grt__tb_abort(&c.b);
    return st;
  }
  st = grt__tb_finish(&c.b, out);
  if (st) grt__trace_err(err, 0, 0, false, "%s", grt_status_str(st));
  return st;
}
