/* fuzz_alloc_api.c — libFuzzer harness for the allocator and device APIs.
 *
 * The input's bytes pick a policy and configuration, then a sequence of
 * public calls, valid and invalid: malloc of any size (0, absurd, above the
 * device) on any stream (mostly 0-4, also UINT64_MAX, UINT64_MAX - 1, 2^63
 * and other values a container could reserve, or anything), free of live,
 * interior, stale and foreign pointers (double frees), record_stream on live,
 * freed and unknown blocks and on streams never used before, empty_cache,
 * event completions, armed device faults, block_info, snapshots, statistics,
 * imports of recorded segments and blocks at arbitrary addresses (on the
 * device, from 0, just below 2^64) and sizes; and raw device calls (malloc, malloc_at, free, reserve, map,
 * unmap, release) on a second device. The oracle:
 *   - grt_alloc_check passes after every call (every 8th after the first 32)
 *     and at the end;
 *   - a call returns only the statuses its contract names;
 *   - a failed free / record_stream / block_info changes no statistics;
 *   - live allocations never overlap and block_info reports what was asked;
 *   - the device's accounting adds up; at the end everything goes back and
 *     both devices can be destroyed (ASan/LSan catch the rest).
 * Any violation aborts with a message.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpurt/alloc.h"

#define SLOTS 32
#define STALE 8
#define MAX_OPS 256 /* short sequences keep executions fast; libFuzzer explores the rest */
#define MiB ((uint64_t)1 << 20)

typedef struct input {
  const unsigned char *p;
  size_t n;
} input;

static unsigned take8(input *in) {
  if (!in->n) return 0;
  in->n--;
  return *in->p++;
}

static uint64_t take64(input *in) {
  uint64_t v = 0;
  for (int i = 0; i < 8; i++) v = v << 8 | take8(in);
  return v;
}

#define CHECK(cond, ...)                                  \
  do {                                                    \
    if (!(cond)) {                                        \
      fprintf(stderr, "fuzz_alloc_api: " __VA_ARGS__);    \
      fprintf(stderr, " (%s:%d)\n", __FILE__, __LINE__);  \
      abort();                                            \
    }                                                     \
  } while (0)

/* ---- a completion oracle whose events complete when the input says so ---- */

typedef struct events {
  unsigned char done[4096];
  uint64_t next;
} events;

static grt_status ev_record(void *ctx, grt_stream_id s, uint64_t *ev) {
  (void)s;
  events *e = ctx;
  *ev = e->next++ % 4096;
  e->done[*ev] = 0;
  return GRT_OK;
}
static int ev_query(void *ctx, uint64_t ev) { return ((events *)ctx)->done[ev]; }
static void ev_sync(void *ctx, uint64_t ev) { ((events *)ctx)->done[ev] = 1; }
static void ev_destroy(void *ctx, uint64_t ev) {
  (void)ctx;
  (void)ev;
}

/* ---- the allocator side ---- */

typedef struct slot {
  grt_devptr ptr;
  uint64_t size, requested;
} slot;

typedef struct state {
  grt_device *dev, *raw; /* raw: the second device, for direct device calls */
  grt_allocator *a;
  uint64_t capacity;
  slot slots[SLOTS];
  grt_devptr stale[STALE];
  unsigned n_stale;
  grt_devptr raw_segs[SLOTS], raw_va[4];
  events ev;
} state;

static void check_alloc(state *s) {
  char msg[256];
  grt_status st = grt_alloc_check(s->a, msg, sizeof msg);
  CHECK(st == GRT_OK, "invariant violated: %s", msg);
}

static grt_devptr pick_ptr(state *s, input *in) {
  unsigned k = take8(in);
  const slot *sl = &s->slots[k % SLOTS];
  switch ((k >> 5) & 7) {
    case 0: case 1: case 2: return sl->ptr;
    case 3: return sl->ptr + 512 * (1 + take8(in) % 8);           /* interior, or past the block */
    case 4: return s->stale[take8(in) % STALE];                    /* freed before */
    case 5: return 0x7f0000000000ULL + 512 * (uint64_t)take8(in) * take8(in); /* somewhere on the device */
    case 6: return take64(in);                                     /* anything */
    default: return sl->ptr + 1;                                   /* unaligned */
  }
}

static uint64_t pick_size(state *s, input *in) {
  unsigned k = take8(in);
  switch (k & 7) {
    case 0: return take8(in);                           /* 0 .. 255, 0 = GRT_ERR_SIZE */
    case 1: case 2: return 1 + take8(in) * 64 + take8(in);
    case 3: return (1 + take8(in)) * 8192;              /* up to 2 MiB */
    case 4: case 5: return (1 + take8(in)) * (MiB / 4); /* up to 64 MiB */
    case 6: return s->capacity + take8(in) * MiB;       /* never fits */
    default: return take64(in);                         /* absurd */
  }
}

/* Mostly the few streams a program uses, so that blocks meet again on one;
 * else the values a container could take for "empty" or "none" (every
 * stream id is the caller's), or anything. */
static grt_stream_id pick_stream(input *in) {
  static const grt_stream_id extreme[] = {UINT64_MAX, UINT64_MAX - 1, (uint64_t)1 << 63, ((uint64_t)1 << 63) - 1,
                                          UINT32_MAX, (uint64_t)UINT32_MAX + 1, 512, 0x7f0000000000ULL};
  unsigned k = take8(in);
  if (k < 200) return k % 5;
  if (k < 240) return extreme[k % 8];
  return take64(in);
}

/* Where an imported segment or block goes: on the device mostly, else
 * anywhere, near the top of the address space or at the bottom. */
static grt_devptr pick_import_addr(input *in, grt_devptr device_addr) {
  unsigned k = take8(in);
  if (k < 224) return device_addr;
  switch (k % 4) {
    case 0: return take64(in) & ~(uint64_t)511;
    case 1: return (uint64_t)0 - 512 * (uint64_t)(1 + take8(in)); /* the last 128 KiB below 2^64 */
    case 2: return 512 * (uint64_t)take8(in);                     /* from 0 */
    default: return take64(in);
  }
}

static int is_live(const state *s, grt_devptr p) {
  for (int i = 0; i < SLOTS; i++)
    if (s->slots[i].ptr == p) return 1;
  return 0;
}

static void remember_freed(state *s, grt_devptr p) { s->stale[s->n_stale++ % STALE] = p; }

static void do_malloc(state *s, input *in, unsigned k) {
  slot *sl = &s->slots[k % SLOTS];
  if (sl->ptr) return;
  uint64_t size = pick_size(s, in);
  grt_stream_id stream = pick_stream(in);
  grt_devptr p = 0;
  grt_status st = grt_alloc_malloc(s->a, size, stream, &p);
  CHECK(st == GRT_OK || st == GRT_ERR_SIZE || st == GRT_ERR_OOM || st == GRT_ERR_FAULT_INJECTED,
        "malloc(%llu): unexpected %s", (unsigned long long)size, grt_status_name(st));
  if (st == GRT_ERR_SIZE) CHECK(size == 0 || size > ((uint64_t)1 << 56), "GRT_ERR_SIZE for %llu", (unsigned long long)size);
  if (st) return;
  uint64_t bs = 0, rq = 0;
  CHECK(grt_alloc_block_info(s->a, p, &bs, &rq) == GRT_OK, "block_info of a fresh block");
  CHECK(p + bs > p, "block 0x%llx +%llu wraps past 2^64", (unsigned long long)p, (unsigned long long)bs);
  CHECK(rq == size && bs >= size, "block_info: size %llu requested %llu for %llu", (unsigned long long)bs,
        (unsigned long long)rq, (unsigned long long)size);
  for (int i = 0; i < SLOTS; i++)
    CHECK(!s->slots[i].ptr || p + bs <= s->slots[i].ptr || s->slots[i].ptr + s->slots[i].size <= p,
          "0x%llx overlaps the live block 0x%llx", (unsigned long long)p, (unsigned long long)s->slots[i].ptr);
  *sl = (slot){p, bs, rq};
}

/* A call on a pointer that may be bad: when it fails, nothing may change. */
static void do_pointer_call(state *s, input *in, unsigned op) {
  grt_devptr p = pick_ptr(s, in);
  grt_alloc_stats before, after;
  CHECK(grt_alloc_get_stats(s->a, &before) == GRT_OK, "stats");
  grt_status st;
  uint64_t bs, rq;
  if (op == 0) {
    st = grt_alloc_free(s->a, p);
  } else if (op == 1) {
    grt_stream_id stream = pick_stream(in); /* incl. streams never seen */
    st = grt_alloc_record_stream(s->a, p, stream);
  } else {
    st = grt_alloc_block_info(s->a, p, &bs, &rq);
  }
  int live = p && is_live(s, p);
  if (live) {
    CHECK(st == GRT_OK, "call %u on the live block 0x%llx: %s", op, (unsigned long long)p, grt_status_name(st));
    if (op == 0) {
      for (int i = 0; i < SLOTS; i++)
        if (s->slots[i].ptr == p) s->slots[i].ptr = 0;
      remember_freed(s, p);
    }
    return;
  }
  CHECK(st == GRT_ERR_DOUBLE_FREE || st == GRT_ERR_UNKNOWN_POINTER || st == GRT_ERR_INTERIOR_POINTER,
        "call %u on the bad pointer 0x%llx: %s", op, (unsigned long long)p, grt_status_name(st));
  CHECK(grt_alloc_last_error(s->a)[0], "no message for a failed call");
  CHECK(grt_alloc_get_stats(s->a, &after) == GRT_OK, "stats");
  CHECK(!memcmp(&before, &after, sizeof before), "a failed call %u changed the statistics", op);
}

static void do_snapshot(state *s) {
  grt_alloc_snapshot *snap = NULL;
  grt_status st = grt_alloc_snapshot_take(s->a, &snap);
  CHECK(st == GRT_OK, "snapshot: %s", grt_status_name(st));
  grt_alloc_stats stats;
  CHECK(grt_alloc_get_stats(s->a, &stats) == GRT_OK, "stats");
  uint64_t allocated = 0;
  for (size_t i = 0; i < snap->n_segments; i++) {
    const grt_snapshot_segment *seg = &snap->segments[i];
    grt_devptr at = seg->address;
    for (size_t j = 0; j < seg->n_blocks; j++) {
      CHECK(seg->blocks[j].address == at, "snapshot blocks do not tile segment 0x%llx", (unsigned long long)seg->address);
      at += seg->blocks[j].size;
    }
    CHECK(at == seg->address + seg->total_size, "snapshot segment 0x%llx: blocks do not reach its end",
          (unsigned long long)seg->address);
    allocated += seg->allocated_size;
  }
  CHECK(allocated == (uint64_t)stats.allocated_bytes[GRT_STAT_ALL].current, "snapshot allocated %llu != stats %lld",
        (unsigned long long)allocated, (long long)stats.allocated_bytes[GRT_STAT_ALL].current);
  grt_alloc_snapshot_free(snap);
}

static void do_import(state *s, input *in) {
  unsigned k = take8(in);
  if (k & 1) {
    grt_devptr base = 0x7f0000000000ULL + (uint64_t)take8(in) * MiB + (k & 2 ? 0 : 512 * take8(in));
    base = pick_import_addr(in, base);
    uint64_t size = k & 4 ? (uint64_t)(1 + take8(in)) * MiB : k & 0x80 ? take64(in) : take64(in) % (64 * MiB);
    grt_status st = grt_alloc_import_segment(s->a, base, size, pick_stream(in), (k >> 3) & 1);
    CHECK(st == GRT_OK || st == GRT_ERR_INVALID_ARG || st == GRT_ERR_OOM || st == GRT_ERR_SIZE ||
              st == GRT_ERR_UNSUPPORTED || st == GRT_ERR_FAULT_INJECTED,
          "import_segment: %s", grt_status_name(st));
    return;
  }
  slot *sl = &s->slots[take8(in) % SLOTS];
  if (sl->ptr) return;
  grt_devptr addr = 0x7f0000000000ULL + (uint64_t)take8(in) * MiB + 512 * (uint64_t)take8(in);
  addr = pick_import_addr(in, addr);
  uint64_t size = 512 * (uint64_t)(1 + take8(in) * (k & 2 ? 64 : 1)), requested = size - take8(in) * (k & 4 ? 1 : 0);
  if (k & 0x80) size = take64(in), requested = size; /* anything, up to a range that wraps past 2^64 */
  grt_status st = grt_alloc_import_block(s->a, addr, size, requested);
  CHECK(st == GRT_OK || st == GRT_ERR_INVALID_ARG || st == GRT_ERR_UNSUPPORTED, "import_block: %s",
        grt_status_name(st));
  if (st == GRT_OK) {
    uint64_t bs = 0, rq = 0;
    CHECK(addr && size && addr + size > addr, "imported block 0x%llx +%llu is empty or wraps past 2^64",
          (unsigned long long)addr, (unsigned long long)size);
    CHECK(grt_alloc_block_info(s->a, addr, &bs, &rq) == GRT_OK && bs == size && rq == requested,
          "an imported block reads back differently");
    for (int i = 0; i < SLOTS; i++)
      CHECK(!s->slots[i].ptr || addr + size <= s->slots[i].ptr || s->slots[i].ptr + s->slots[i].size <= addr,
            "imported 0x%llx overlaps a live block", (unsigned long long)addr);
    *sl = (slot){addr, size, requested};
  }
}

/* ---- raw device calls on the second device ---- */

static void check_device(grt_device *d) {
  grt_device_stats st;
  CHECK(grt_device_get_stats(d, &st) == GRT_OK, "device stats");
  CHECK(st.bytes_in_use + st.free_bytes == st.capacity, "device bytes do not add up");
  CHECK(st.bytes_in_use <= st.capacity && st.largest_hole <= st.free_bytes, "device hole figures");
  CHECK((st.holes == 0) == (st.free_bytes == 0), "holes vs free bytes");
  CHECK(st.mapped_bytes <= st.bytes_in_use, "mapped above in use");
}

static void do_device(state *s, input *in) {
  unsigned k = take8(in), i = take8(in) % SLOTS, v = take8(in) % 4;
  grt_status st;
  switch (k % 7) {
    case 0:
      if (s->raw_segs[i]) return;
      st = grt_device_malloc(s->raw, pick_size(s, in) / 4, &s->raw_segs[i]);
      if (st) s->raw_segs[i] = 0;
      CHECK(st == GRT_OK || st == GRT_ERR_SIZE || st == GRT_ERR_OOM || st == GRT_ERR_FAULT_INJECTED, "device malloc: %s",
            grt_status_name(st));
      break;
    case 1: {
      grt_devptr p = k & 0x80 ? s->raw_segs[i] : s->raw_segs[i] + 512 * take8(in);
      st = grt_device_free(s->raw, p);
      if (st == GRT_OK)
        for (int j = 0; j < SLOTS; j++)
          if (s->raw_segs[j] == p) s->raw_segs[j] = 0;
      CHECK(st == GRT_OK || st == GRT_ERR_DOUBLE_FREE || st == GRT_ERR_UNKNOWN_POINTER || st == GRT_ERR_INTERIOR_POINTER,
            "device free: %s", grt_status_name(st));
      if (st == GRT_OK) CHECK(p, "device free(0) succeeded");
      break;
    }
    case 2: {
      if (s->raw_segs[i]) return;
      grt_devptr p = 0x7f0000000000ULL + 512 * (uint64_t)take8(in) * take8(in) + (k & 0x40 ? 0 : take8(in));
      st = grt_device_malloc_at(s->raw, p, 1 + take8(in) * 4096);
      if (st == GRT_OK) s->raw_segs[i] = p;
      break;
    }
    case 3:
      if (s->raw_va[v]) return;
      st = grt_device_reserve(s->raw, (uint64_t)(take8(in) % 8) * 2 * MiB + (k & 0x40 ? 512 : 0), &s->raw_va[v]);
      if (st) s->raw_va[v] = 0;
      break;
    case 4: /* also sizes that run past the reservation, up to ones that wrap past 2^64 */
      st = grt_device_map(s->raw, s->raw_va[v] + 2 * MiB * (take8(in) % 8),
                          k & 0x40 ? take64(in) & ~(2 * MiB - 1) : 2 * MiB * (take8(in) % 4));
      CHECK(st == GRT_OK || st == GRT_ERR_INVALID_ARG || st == GRT_ERR_SIZE || st == GRT_ERR_OOM ||
                st == GRT_ERR_FAULT_INJECTED,
            "map: %s",
            grt_status_name(st));
      break;
    case 5:
      st = grt_device_unmap(s->raw, s->raw_va[v] + 2 * MiB * (take8(in) % 8),
                            k & 0x40 ? take64(in) & ~(2 * MiB - 1) : 2 * MiB * (take8(in) % 4));
      CHECK(st == GRT_OK || st == GRT_ERR_INVALID_ARG || st == GRT_ERR_SIZE, "unmap: %s", grt_status_name(st));
      break;
    default:
      st = grt_device_release(s->raw, s->raw_va[v] + (k & 0x40 ? 2 * MiB : 0));
      if (st == GRT_OK) s->raw_va[v] = 0;
      CHECK(st == GRT_OK || st == GRT_ERR_BUSY || st == GRT_ERR_UNKNOWN_POINTER, "release: %s", grt_status_name(st));
      break;
  }
  check_device(s->raw);
}

/* Unmaps every page of the raw device's reservations, releases them, frees its segments. */
static void drain_raw(state *s) {
  for (int v = 0; v < 4; v++) {
    if (!s->raw_va[v]) continue;
    /* whole mappings only: at each page, the one length that unmaps the mapping starting there */
    for (uint64_t p = 0; p < 8; p++)
      for (uint64_t n = 1; p + n <= 8; n++)
        if (grt_device_unmap(s->raw, s->raw_va[v] + p * 2 * MiB, n * 2 * MiB) == GRT_OK) break;
    CHECK(grt_device_release(s->raw, s->raw_va[v]) == GRT_OK, "release after unmapping everything");
  }
  for (int i = 0; i < SLOTS; i++)
    if (s->raw_segs[i]) CHECK(grt_device_free(s->raw, s->raw_segs[i]) == GRT_OK, "free of a raw segment");
}

static const char *const configs[] = {
    "",
    "max_split_size_mb:32",
    "roundup_power2_divisions:[1:2,4:4,>:8]",
    "expandable_segments:True",
    "cross_stream:with_event",
    "fit:first,merge_on_free:False,empty_cache_idle_cycles:2",
    "max_split_size_mb:21,roundup_power2_divisions:4",
    "expandable_segments:True,max_split_size_mb:40",
};

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size);
int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size) {
  input in = {data, size};
  static state s; /* large; reset for every input */
  memset(&s, 0, sizeof s);
  unsigned mode = take8(&in), shape = take8(&in);
  const char *conf = configs[(mode >> 1) % 8];
  /* expandable segments map a request that cannot fit page by page up to the
   * capacity before they give up (as PyTorch does): a small device keeps
   * those OOMs, a quarter of the mallocs, as cheap as the rest */
  s.capacity = (64 * MiB) << (shape % (strstr(conf, "expandable") ? 2 : 4));
  grt_device_config dc;
  grt_device_config_default(&dc);
  dc.capacity = s.capacity;
  dc.fail_malloc_at = shape & 0x80 ? (shape >> 4) % 8 : 0;
  CHECK(grt_device_create(&dc, &s.dev) == GRT_OK, "device create");
  dc.fail_malloc_at = 0;
  dc.capacity = 64 * MiB;
  CHECK(grt_device_create(&dc, &s.raw) == GRT_OK, "raw device create");
  grt_alloc_config cfg;
  grt_alloc_config_default(&cfg);
  CHECK(grt_alloc_config_parse(&cfg, conf, NULL, 0) == GRT_OK, "config");
  grt_stream_ops ops = {&s.ev, ev_record, ev_query, ev_sync, ev_destroy};
  if (mode & 0x10) cfg.stream_ops = &ops;
  if (mode & 0x20) { /* garbage collection needs a memory fraction */
    cfg.memory_fraction = 0.75;
    cfg.garbage_collection_threshold = shape & 0x40 ? 0.5 : 0.0;
  }
  /* mostly caching; sharded puts streams on shards by their value */
  const char *policy = (mode & 0xc1) == 0xc1 ? "naive" : (mode & 0xc1) == 0x41 ? "sharded" : "caching";
  CHECK(grt_alloc_create(policy, s.dev, &cfg, &s.a) == GRT_OK, "allocator create");
  for (int n = 0; in.n && n < MAX_OPS; n++) {
    unsigned op = take8(&in);
    switch (op % 20) {
      case 0: case 1: case 2: case 3: case 4: do_malloc(&s, &in, op >> 3); break;
      case 5: case 6: do_pointer_call(&s, &in, 0); break; /* free */
      case 7: do_pointer_call(&s, &in, 1); break;         /* record_stream */
      case 8: do_pointer_call(&s, &in, 2); break;         /* block_info */
      case 9: CHECK(grt_alloc_empty_cache(s.a) == GRT_OK, "empty_cache"); break;
      case 10: /* some events complete */
        for (unsigned j = take8(&in) % 8; j > 0; j--) s.ev.done[(take8(&in) << 4 | take8(&in)) % 4096] = 1;
        break;
      case 11: CHECK(grt_device_inject_malloc_failure(s.dev, take8(&in) % 6) == GRT_OK, "inject"); break;
      case 12: do_snapshot(&s); break;
      case 13: {
        grt_alloc_stats st;
        CHECK(grt_alloc_get_stats(s.a, &st) == GRT_OK, "stats");
        if (op & 0x80) CHECK(grt_alloc_reset_peak_stats(s.a) == GRT_OK, "reset_peak_stats");
        break;
      }
      case 14: do_import(&s, &in); break;
      case 15: { /* free of the block just freed */
        slot *sl = &s.slots[(op >> 5) % SLOTS];
        if (!sl->ptr) break;
        CHECK(grt_alloc_free(s.a, sl->ptr) == GRT_OK, "free of a live block");
        grt_status st = grt_alloc_free(s.a, sl->ptr);
        CHECK(st == GRT_ERR_DOUBLE_FREE || st == GRT_ERR_UNKNOWN_POINTER, "double free: %s", grt_status_name(st));
        remember_freed(&s, sl->ptr);
        sl->ptr = 0;
        break;
      }
      default: do_device(&s, &in); break;
    }
    if (n < 32 || n % 8 == 0) check_alloc(&s); /* the walker is most of the cost: every call early, then sampled */
  }
  CHECK(grt_device_inject_malloc_failure(s.dev, 0) == GRT_OK, "inject");
  for (int i = 0; i < SLOTS; i++)
    if (s.slots[i].ptr) CHECK(grt_alloc_free(s.a, s.slots[i].ptr) == GRT_OK, "final free");
  check_alloc(&s);
  grt_alloc_stats st;
  CHECK(grt_alloc_get_stats(s.a, &st) == GRT_OK, "stats");
  CHECK(st.allocation[GRT_STAT_ALL].current == 0, "allocations left after freeing everything");
  CHECK(grt_alloc_destroy(s.a) == GRT_OK, "allocator destroy");
  CHECK(grt_device_destroy(s.dev) == GRT_OK, "device still holds memory after the allocator was destroyed");
  drain_raw(&s);
  CHECK(grt_device_destroy(s.raw) == GRT_OK, "raw device still holds memory");
  return 0;
}
