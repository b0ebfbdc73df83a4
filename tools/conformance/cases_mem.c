/* cases_mem.c — memory cases: the device contract (malloc/free, OOM, bad
 * pointers), the caching allocator on top (reuse, stats, empty_cache, OOM,
 * record_stream deferred frees) and virtual memory. Each runs unchanged on
 * the simulated device and on CUDA; only the completion oracle differs for
 * record_stream (real events held back by a gate, or a flag on sim). */
#include <string.h>

#include "conformance.h"

#define MiB GRT_MiB

static result malloc_free(backend *b) {
  grt_device_stats s0, s1;
  CHECK_OK(b, grt_device_get_stats(b->dev, &s0));
  grt_devptr a = 0, c = 0;
  uint64_t size = 0;
  CHECK_OK(b, grt_device_malloc(b->dev, MiB, &a));
  CHECK_OK(b, grt_device_malloc(b->dev, 64 * MiB, &c));
  CHECK_OK(b, grt_device_segment_size(b->dev, c, &size));
  CHECK(b, size == 64 * MiB, "segment size %llu", (unsigned long long)size);
  CHECK(b, a != c && a % 512 == 0 && c % 512 == 0, "bad addresses");
  CHECK_OK(b, grt_device_free(b->dev, a));
  CHECK_OK(b, grt_device_free(b->dev, c));
  CHECK_OK(b, grt_device_get_stats(b->dev, &s1));
  CHECK(b, s1.bytes_in_use == s0.bytes_in_use && s1.malloc_calls == s0.malloc_calls + 2 &&
               s1.free_calls == s0.free_calls + 2, "counters off");
  return r_pass("2 mallocs, 2 frees, in-use back to %llu", (unsigned long long)s1.bytes_in_use);
}

static result oom_status(backend *b) {
  grt_device_stats s;
  CHECK_OK(b, grt_device_get_stats(b->dev, &s));
  grt_devptr hold = 0, x = 0;
  CHECK_OK(b, grt_device_malloc(b->dev, MiB, &hold));
  grt_status st = grt_device_malloc(b->dev, s.capacity, &x); /* the whole memory: never fits now */
  char err[160] = "";
  CHECK_OK(b, grt_device_last_error(b->dev, err, sizeof err));
  CHECK(b, st == GRT_ERR_OOM, "got %s", grt_status_name(st));
  CHECK_OK(b, grt_device_free(b->dev, hold));
  CHECK_OK(b, grt_device_malloc(b->dev, MiB, &x));
  CHECK_OK(b, grt_device_free(b->dev, x));
  return r_pass("GRT_ERR_OOM for %llu MiB, device usable after%s%s", (unsigned long long)(s.capacity >> 20),
                err[0] ? "; " : "", err);
}

static result foreign_free(backend *b) {
  grt_devptr a = 0;
  CHECK_OK(b, grt_device_malloc(b->dev, 4 * MiB, &a));
  grt_status s1 = grt_device_free(b->dev, 0x123450000ULL);
  grt_status s2 = grt_device_free(b->dev, a + 4096);
  CHECK(b, s1 == GRT_ERR_UNKNOWN_POINTER, "foreign: %s", grt_status_name(s1));
  CHECK(b, s2 == GRT_ERR_INTERIOR_POINTER, "interior: %s", grt_status_name(s2));
  CHECK_OK(b, grt_device_free(b->dev, a)); /* the real segment was left alone */
  return r_pass("UNKNOWN_POINTER / INTERIOR_POINTER, never reaching the driver");
}

static result double_free(backend *b) {
  grt_devptr a = 0;
  CHECK_OK(b, grt_device_malloc(b->dev, 2 * MiB, &a));
  CHECK_OK(b, grt_device_free(b->dev, a));
  grt_status st = grt_device_free(b->dev, a);
  CHECK(b, st == GRT_ERR_DOUBLE_FREE, "got %s", grt_status_name(st));
  return r_pass("GRT_ERR_DOUBLE_FREE");
}

/* An allocator with real events on CUDA, or the given oracle on sim. */
static grt_status make_alloc(backend *b, const grt_stream_ops *sim_ops, grt_cuda_events **ev, grt_allocator **a) {
  grt_alloc_config cfg;
  grt_alloc_config_default(&cfg);
  *ev = NULL;
  cfg.stream_ops = sim_ops;
  if (b->is_cuda) {
    grt_status st = grt_cuda_events_create(b->dev, ev);
    if (st) return st;
    cfg.stream_ops = grt_cuda_events_stream_ops(*ev);
  }
  return grt_alloc_create("caching", b->dev, &cfg, a);
}

/* The allocator's destroy status, else the events'. */
static grt_status drop_alloc(grt_allocator *a, grt_cuda_events *ev) {
  grt_status st = grt_alloc_destroy(a);
  grt_status st_ev = grt_cuda_events_destroy(ev);
  return st ? st : st_ev;
}

static result caching_reuse(backend *b) {
  grt_allocator *a;
  grt_cuda_events *ev;
  CHECK_OK(b, make_alloc(b, NULL, &ev, &a));
  grt_devptr p = 0, q = 0, big = 0;
  int same = 1;
  conf_first kept = CONF_FIRST_INIT;
  KEEP(kept, grt_alloc_malloc(a, 3000, 0, &p));
  KEEP(kept, grt_alloc_free(a, p));
  for (int i = 0; i < 100; i++) {
    KEEP(kept, grt_alloc_malloc(a, 3000, 0, &q));
    same &= q == p;
    KEEP(kept, grt_alloc_free(a, q));
  }
  grt_status st = grt_alloc_malloc(a, 5 * MiB, 0, &big);
  grt_alloc_stats s;
  KEEP(kept, grt_alloc_get_stats(a, &s));
  if (st == GRT_OK) KEEP(kept, grt_alloc_free(a, big));
  KEEP(kept, drop_alloc(a, ev));
  CHECK_KEPT(b, kept);
  CHECK(b, st == GRT_OK && same, "reuse broke (%s)", grt_status_name(st));
  CHECK(b, s.num_device_alloc == 2 && s.num_cache_hits == 100, "device allocs %llu, hits %llu",
        (unsigned long long)s.num_device_alloc, (unsigned long long)s.num_cache_hits);
  CHECK(b, s.reserved_bytes[GRT_STAT_ALL].current == (int64_t)(22 * MiB), "reserved %lld",
        (long long)s.reserved_bytes[GRT_STAT_ALL].current);
  return r_pass("100 reuses at one address, 2 device mallocs, 22 MiB reserved");
}

static result empty_cache(backend *b) {
  grt_allocator *a;
  grt_cuda_events *ev;
  CHECK_OK(b, make_alloc(b, NULL, &ev, &a));
  grt_devptr p = 0;
  uint64_t f0 = 0, f1 = 0, t = 0;
  conf_first kept = CONF_FIRST_INIT;
  grt_status st = grt_alloc_malloc(a, 256 * MiB, 0, &p);
  if (st == GRT_OK) KEEP(kept, grt_alloc_free(a, p));
  KEEP(kept, grt_device_mem_get_info(b->dev, &f0, &t));
  grt_status st2 = grt_alloc_empty_cache(a);
  KEEP(kept, grt_device_mem_get_info(b->dev, &f1, &t));
  grt_alloc_stats s;
  KEEP(kept, grt_alloc_get_stats(a, &s));
  KEEP(kept, drop_alloc(a, ev));
  CHECK_KEPT(b, kept);
  CHECK(b, st == GRT_OK && st2 == GRT_OK, "malloc %s, empty_cache %s", grt_status_name(st), grt_status_name(st2));
  CHECK(b, s.reserved_bytes[GRT_STAT_ALL].current == 0, "reserved still %lld",
        (long long)s.reserved_bytes[GRT_STAT_ALL].current);
  CHECK(b, f1 >= f0 + 255 * MiB, "mem_get_info free grew by %lld MiB only", (long long)((int64_t)(f1 - f0) >> 20));
  return r_pass("mem_get_info free +%llu MiB, reserved 0", (unsigned long long)((f1 - f0) >> 20));
}

static result alloc_oom(backend *b) {
  grt_allocator *a;
  grt_cuda_events *ev;
  CHECK_OK(b, make_alloc(b, NULL, &ev, &a));
  uint64_t f = 0, t = 0;
  CHECK_OK(b, grt_device_mem_get_info(b->dev, &f, &t));
  grt_devptr p = 0, q = 0, hold = 0;
  conf_first kept = CONF_FIRST_INIT;
  grt_status st0 = grt_alloc_malloc(a, 32 * MiB, 0, &hold); /* live: keeps the request from fitting */
  if (st0 == GRT_OK) st0 = grt_alloc_malloc(a, 64 * MiB, 0, &p);
  if (st0 == GRT_OK) KEEP(kept, grt_alloc_free(a, p)); /* cached: the retry must release it */
  grt_status st = grt_alloc_malloc(a, t - 16 * MiB, 0, &q);
  char msg[200];
  snprintf(msg, sizeof msg, "%s", grt_alloc_last_error(a));
  if (hold) KEEP(kept, grt_alloc_free(a, hold));
  grt_alloc_stats s;
  KEEP(kept, grt_alloc_get_stats(a, &s));
  KEEP(kept, drop_alloc(a, ev));
  CHECK_KEPT(b, kept);
  CHECK(b, st0 == GRT_OK && st == GRT_ERR_OOM, "got %s", grt_status_name(st));
  CHECK(b, s.num_ooms == 1 && s.num_alloc_retries == 1 && s.num_device_free == 1, "ooms %llu retries %llu",
        (unsigned long long)s.num_ooms, (unsigned long long)s.num_alloc_retries);
  CHECK(b, strstr(msg, "out of memory") != NULL, "message: %s", msg);
  return r_pass("GRT_ERR_OOM after releasing the cache and one retry");
}

/* ---- record_stream: a freed block waits for the other stream's work ---- */

typedef struct oracle {
  int done;
} oracle;
static grt_status o_record(void *ctx, grt_stream_id s, uint64_t *ev) {
  (void)ctx, (void)s;
  *ev = 1;
  return GRT_OK;
}
static int o_query(void *ctx, uint64_t ev) { return (void)ev, ((oracle *)ctx)->done; }
static void o_sync(void *ctx, uint64_t ev) { (void)ev, ((oracle *)ctx)->done = 1; }
static void o_destroy(void *ctx, uint64_t ev) { (void)ctx, (void)ev; }

static result record_stream(backend *b) {
  oracle orc = {0};
  grt_stream_ops ops = {&orc, o_record, o_query, o_sync, o_destroy};
  grt_cuda_stream *sa = NULL, *sb = NULL;
  grt_cuda_gate *gate = NULL;
  grt_stream_id ida = 1, idb = 2;
  if (b->is_cuda) {
    CHECK_OK(b, grt_cuda_stream_create(b->dev, GRT_CUDA_STREAM_NON_BLOCKING, 0, &sa));
    CHECK_OK(b, grt_cuda_stream_create(b->dev, GRT_CUDA_STREAM_NON_BLOCKING, 0, &sb));
    CHECK_OK(b, grt_cuda_gate_create(b->dev, 5000, &gate));
    CHECK_OK(b, grt_cuda_gate_block(gate, sb)); /* work on B cannot finish yet */
    ida = grt_cuda_stream_id(sa), idb = grt_cuda_stream_id(sb);
  }
  grt_allocator *a;
  grt_cuda_events *ev;
  CHECK_OK(b, make_alloc(b, &ops, &ev, &a));
  grt_devptr p = 0, q = 0, r = 0;
  grt_alloc_stats s1, s2;
  conf_first kept = CONF_FIRST_INIT;
  grt_status st = grt_alloc_malloc(a, 4 * MiB, ida, &p);
  if (!st) st = grt_alloc_record_stream(a, p, idb);
  if (!st) st = grt_alloc_free(a, p);
  KEEP(kept, grt_alloc_get_stats(a, &s1));
  if (!st) st = grt_alloc_malloc(a, 4 * MiB, ida, &q); /* p is pending: must not be reused */
  if (b->is_cuda) {
    KEEP(kept, grt_cuda_gate_open(gate));
    KEEP(kept, grt_cuda_stream_synchronize(sb));
  } else {
    orc.done = 1;
  }
  if (!st) st = grt_alloc_free(a, q);
  if (!st) st = grt_alloc_malloc(a, 4 * MiB, ida, &r); /* events done: p's block is back */
  KEEP(kept, grt_alloc_get_stats(a, &s2));
  if (!st) st = grt_alloc_free(a, r);
  int timed_out = grt_cuda_gate_timed_out(gate);
  const char *mech = b->is_cuda ? grt_cuda_gate_mechanism(gate) : "flag";
  KEEP(kept, drop_alloc(a, ev));
  KEEP(kept, grt_cuda_gate_destroy(gate));
  KEEP(kept, grt_cuda_stream_destroy(sa));
  KEEP(kept, grt_cuda_stream_destroy(sb));
  CHECK(b, st == GRT_OK, "allocator call failed: %s", grt_status_name(st));
  CHECK_KEPT(b, kept);
  CHECK(b, !timed_out, "the gate timed out");
  CHECK(b, s1.pending_free_blocks == 1 && q != p, "pending %llu, reused while pending: %d",
        (unsigned long long)s1.pending_free_blocks, q == p);
  CHECK(b, s2.pending_free_blocks == 0 && r == p && s2.num_device_alloc == 1, "after completion: pending %llu, r==p %d",
        (unsigned long long)s2.pending_free_blocks, r == p);
  return r_pass("pending while the event is not done, reused after (%s)", mech);
}

/* ---- virtual memory ---- */

static result vmm(backend *b) {
  uint64_t g = 0;
  grt_status st = grt_device_vmm_granularity(b->dev, &g);
  CHECK(b, st == GRT_OK && g > 0, "granularity: %s", grt_status_name(st));
  grt_devptr va = 0;
  CHECK_OK(b, grt_device_reserve(b->dev, 8 * g, &va));
  grt_device_stats s0, s1;
  conf_first kept = CONF_FIRST_INIT;
  KEEP(kept, grt_device_get_stats(b->dev, &s0));
  grt_status m1 = grt_device_map(b->dev, va, 2 * g);
  grt_status m2 = grt_device_map(b->dev, va + 4 * g, 2 * g);
  grt_status overlap = grt_device_map(b->dev, va + g, 2 * g);
  grt_status partial = grt_device_unmap(b->dev, va, g);
  grt_status busy = grt_device_release(b->dev, va);
  KEEP(kept, grt_device_get_stats(b->dev, &s1));
  /* Touch the mapped memory: fill, copy back, check. */
  grt_cuda_stream *s = NULL;
  static unsigned char host[1 << 16];
  int ok_bytes = 0;
  void *hp = NULL;
  if (!b->is_cuda) { /* the model: bytes through its host view when it has one */
    grt_status hs = grt_device_host_ptr(b->dev, va + g, g, &hp);
    ok_bytes = hs == GRT_ERR_UNSUPPORTED || (hs == GRT_OK && (memset(hp, 0x5a, g), ((unsigned char *)hp)[g - 1] == 0x5a));
  } else if (m1 == GRT_OK && grt_cuda_stream_create(b->dev, GRT_CUDA_STREAM_NON_BLOCKING, 0, &s) == GRT_OK) {
    memset(host, 0, sizeof host);
    if (grt_cuda_memset_async(s, va + 2 * g - sizeof host, 0x5a, sizeof host) == GRT_OK &&
        grt_cuda_memcpy_dtoh_async(s, host, va + 2 * g - sizeof host, sizeof host) == GRT_OK &&
        grt_cuda_stream_synchronize(s) == GRT_OK)
      ok_bytes = host[0] == 0x5a && host[sizeof host - 1] == 0x5a;
    KEEP(kept, grt_cuda_stream_destroy(s));
  }
  grt_status u1 = grt_device_unmap(b->dev, va, 2 * g);
  grt_status u2 = grt_device_unmap(b->dev, va + 4 * g, 2 * g);
  grt_status rel = grt_device_release(b->dev, va);
  CHECK_KEPT(b, kept);
  CHECK(b, m1 == GRT_OK && m2 == GRT_OK, "map: %s / %s", grt_status_name(m1), grt_status_name(m2));
  CHECK(b, overlap == GRT_ERR_INVALID_ARG && partial == GRT_ERR_INVALID_ARG && busy == GRT_ERR_BUSY,
        "overlap %s, partial unmap %s, release while mapped %s", grt_status_name(overlap), grt_status_name(partial),
        grt_status_name(busy));
  CHECK(b, s1.bytes_in_use == s0.bytes_in_use + 4 * g, "bytes_in_use did not grow by the mapped bytes");
  CHECK(b, ok_bytes, "mapped memory did not hold a memset");
  CHECK(b, u1 == GRT_OK && u2 == GRT_OK && rel == GRT_OK, "unmap/release: %s %s %s", grt_status_name(u1),
        grt_status_name(u2), grt_status_name(rel));
  return r_pass("granularity %llu KiB; map, access, unmap, release", (unsigned long long)(g >> 10));
}

const ccase conf_mem_cases[] = {
    {"malloc/free round trip", "segments come and go; counters match", malloc_free},
    {"device OOM status", "CUDA_ERROR_OUT_OF_MEMORY -> GRT_ERR_OOM; device still usable", oom_status},
    {"foreign / interior pointer free", "refused (cuMemFree would fail or corrupt)", foreign_free},
    {"double free", "refused", double_free},
    {"caching allocator reuse + stats", "cache hits need no cudaMalloc (PyTorch counters)", caching_reuse},
    {"empty_cache returns memory", "cudaFree of whole free segments; cudaMemGetInfo shows it", empty_cache},
    {"allocator OOM: release cache, retry", "PyTorch: free cached segments, retry once, then OOM", alloc_oom},
    {"record_stream deferred free", "block not reused until the other stream's event completes", record_stream},
    {"VMM reserve/map/unmap/release", "cuMemAddressReserve/cuMemCreate/cuMemMap semantics", vmm},
};
const size_t conf_mem_count = sizeof conf_mem_cases / sizeof conf_mem_cases[0];
