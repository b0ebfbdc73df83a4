/* cases_mem.c — memory cases: the device contract (malloc/free, OOM, bad
 * pointers), the caching allocator on top (reuse, stats, empty_cache, OOM,
 * record_stream deferred frees), virtual memory, and the device model
 * (contiguous or paged; conf_model_cases). Each runs unchanged on
 * the simulated device and on CUDA; only the completion oracle differs for
 * record_stream (real events held back by a gate, or a flag on sim). */
#include <stdlib.h>
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

/* ---- the device model: contiguous or paged (docs/CONFORMANCE.md) ----
 * Does cudaMalloc need a contiguous free range, or only enough free 2 MiB
 * pages? Fill about 90% of the free memory with pairs (large, small), free the
 * large ones, then ask for more than any contiguous free range can hold but
 * less than the free total. The request is the same figure on every backend:
 * a contiguous free range cannot cross a live small segment, so it holds at
 * most the largest run of freed segments between two live ones (address
 * order) plus all the memory the case never took; one small more exceeds it. */

#define PROBE_MAX_PAIRS 128

typedef struct probe {
  uint64_t small, large, pairs; /* the fill: pairs x (large, small), each a multiple of 2 MiB */
  uint64_t untouched;           /* free after the fill (mem_get_info): memory the case never took */
  uint64_t run;                 /* largest run of freed bytes between two live segments */
  uint64_t free_now;            /* free after freeing the large ones (mem_get_info) */
  uint64_t request;             /* run + untouched + small: more than any contiguous free range */
  grt_status big;               /* the request's status: the answer */
} probe;

/* Sizes from the free memory: ~90% of it in at most PROBE_MAX_PAIRS pairs. */
static void probe_size(probe *p, uint64_t free_bytes) {
  uint64_t fill = free_bytes / 10 * 9, page = 2 * MiB;
  p->small = fill / 256 / page * page;
  if (p->small < page) p->small = page;
  p->large = 3 * p->small;
  p->pairs = fill / (4 * p->small);
  if (p->pairs > PROBE_MAX_PAIRS) p->pairs = PROBE_MAX_PAIRS;
}

typedef struct probe_seg {
  grt_devptr addr;
  uint64_t size;
  int freed;
} probe_seg;

static int cmp_probe_seg(const void *a, const void *b) {
  grt_devptr x = ((const probe_seg *)a)->addr, y = ((const probe_seg *)b)->addr;
  return x < y ? -1 : x > y;
}

/* The fill's segments are addr[0..2 pairs): even ones large (freed), odd ones small (live). */
static uint64_t largest_freed_run(const grt_devptr *addr, const probe *p) {
  probe_seg v[2 * PROBE_MAX_PAIRS];
  size_t n = 2 * p->pairs;
  for (size_t k = 0; k < n; k++) v[k] = (probe_seg){addr[k], k % 2 ? p->small : p->large, k % 2 == 0};
  qsort(v, n, sizeof *v, cmp_probe_seg);
  uint64_t run = 0, best = 0;
  for (size_t k = 0; k < n; k++) {
    run = v[k].freed ? run + v[k].size : 0;
    if (run > best) best = run;
  }
  return best;
}

/* With the large ones freed: the figures, then the request that decides. */
static void probe_decide(grt_device *dev, probe *p, const grt_devptr *addr, conf_first *kept, uint64_t *stats_hole) {
  uint64_t total = 0;
  grt_devptr big = 0;
  KEEP(*kept, grt_device_mem_get_info(dev, &p->free_now, &total));
  p->run = largest_freed_run(addr, p);
  p->request = p->run + p->untouched + p->small;
  if (stats_hole) {
    grt_device_stats s;
    KEEP(*kept, grt_device_get_stats(dev, &s));
    *stats_hole = s.largest_hole;
  }
  p->big = grt_device_malloc(dev, p->request, &big);
  if (p->big == GRT_OK) KEEP(*kept, grt_device_free(dev, big));
}

/* Runs the experiment on dev and frees all it took; the first failure of a
 * call other than the request (fill, frees, mem_get_info). Under 4 pairs
 * (too little free memory to ask the question) it takes nothing. */
static grt_status probe_run(grt_device *dev, probe *p, uint64_t *stats_hole) {
  grt_devptr addr[2 * PROBE_MAX_PAIRS];
  size_t n = 0;
  uint64_t f = 0, total = 0;
  conf_first kept = CONF_FIRST_INIT;
  KEEP(kept, grt_device_mem_get_info(dev, &f, &total));
  probe_size(p, f);
  size_t want = p->pairs >= 4 ? 2 * p->pairs : 0;
  while (kept.st == GRT_OK && n < want) {
    KEEP(kept, grt_device_malloc(dev, n % 2 ? p->small : p->large, &addr[n]));
    if (kept.st == GRT_OK) n++;
  }
  if (kept.st == GRT_OK && n) KEEP(kept, grt_device_mem_get_info(dev, &p->untouched, &total));
  for (size_t k = 0; k < n; k += 2) KEEP(kept, grt_device_free(dev, addr[k]));
  if (kept.st == GRT_OK && n) probe_decide(dev, p, addr, &kept, stats_hole);
  for (size_t k = 1; k < n; k += 2) KEEP(kept, grt_device_free(dev, addr[k]));
  return kept.st;
}

/* The experiment on a fresh simulated device of the given model. */
static grt_status probe_sim(grt_device_model model, uint64_t capacity, probe *p, uint64_t *stats_hole) {
  grt_device_config cfg;
  grt_device_config_default(&cfg);
  cfg.capacity = capacity;
  cfg.model = model;
  grt_device *dev = NULL;
  grt_status st = grt_device_create(&cfg, &dev);
  if (st) return st;
  st = probe_run(dev, p, stats_hole);
  grt_status dst = grt_device_destroy(dev);
  return st ? st : dst;
}

#define M(x) ((unsigned long long)((x) >> 20))

/* The model itself: both models on devices of the simulated device's capacity. */
static result model_on_sim(backend *b) {
  grt_device_stats s;
  CHECK_OK(b, grt_device_get_stats(b->dev, &s));
  probe pc = {0}, pp = {0};
  uint64_t hole_c = 0, hole_p = 0;
  CHECK_OK(b, probe_sim(GRT_DEVICE_MODEL_CONTIGUOUS, s.capacity, &pc, &hole_c));
  CHECK_OK(b, probe_sim(GRT_DEVICE_MODEL_PAGED, s.capacity, &pp, &hole_p));
  CHECK(b, pc.pairs >= 4 && pc.request > hole_c && pc.request < pc.free_now,
        "the request %llu MiB is not between the largest hole %llu MiB and the free %llu MiB", M(pc.request), M(hole_c),
        M(pc.free_now));
  CHECK(b, pc.big == GRT_ERR_OOM && pp.big == GRT_OK, "contiguous: %s, paged: %s (want OOM, OK)",
        grt_status_name(pc.big), grt_status_name(pp.big));
  return r_pass("contiguous: OOM for %llu MiB, largest hole %llu MiB (the model's), free %llu MiB; paged: OK for "
                "%llu MiB, free %llu MiB; each a fresh %llu MiB device, %llu x (%llu + %llu) MiB filled, the "
                "%llu MiB ones freed",
                M(pc.request), M(hole_c), M(pc.free_now), M(pp.request), M(pp.free_now), M(s.capacity),
                (unsigned long long)pc.pairs, M(pc.large), M(pc.small), M(pc.large));
}

/* The hardware's answer: either outcome passes, it is a measurement. */
static result model_on_cuda(backend *b) {
  probe p = {0};
  grt_status st = probe_run(b->dev, &p, NULL);
  CHECK(b, st == GRT_OK, "a fill, free or mem_get_info call failed: %s", grt_status_name(st));
  if (p.pairs < 4) return r_na("too little free memory to ask (%llu pairs)", (unsigned long long)p.pairs);
  CHECK(b, p.big == GRT_OK || p.big == GRT_ERR_OOM, "the request returned %s", grt_status_name(p.big));
  CHECK(b, p.request < p.free_now, "the request %llu MiB is not below the free %llu MiB", M(p.request), M(p.free_now));
  return r_pass("answer: %s: malloc of %llu MiB %s; free %llu MiB; largest hole at most %llu MiB (the driver shows "
                "no holes: the largest run this case freed between its live segments, %llu MiB, plus the %llu "
                "MiB it never took); %llu x (%llu + %llu) MiB filled, the %llu MiB ones freed",
                p.big == GRT_OK ? "PAGED" : "CONTIGUOUS", M(p.request), p.big == GRT_OK ? "succeeded" : "OOM",
                M(p.free_now), M(p.request - p.small), M(p.run), M(p.untouched), (unsigned long long)p.pairs,
                M(p.large), M(p.small), M(p.large));
}

static result device_model(backend *b) { return b->is_cuda ? model_on_cuda(b) : model_on_sim(b); }

const ccase conf_model_cases[] = {
    {"device model: malloc over holes",
     "decides the model what-if analyses use: the malloc succeeds = paged, OOM = contiguous (sim runs both: "
     "contiguous OOM, paged OK)",
     device_model},
};
const size_t conf_model_count = sizeof conf_model_cases / sizeof conf_model_cases[0];

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
