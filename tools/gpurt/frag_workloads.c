/* frag_workloads.c — trace families for the fragmentation demo.
 *
 * Each family grows the live set slowly (more allocs than frees) so every
 * allocator eventually fails; what differs is how much of the device is
 * really in use (live requested bytes) when the first request fails. The
 * traces are generated from a seed, independent of the allocator, so every
 * policy replays exactly the same requests.
 */
#include "frag_workloads.h"

#include <stdlib.h>
#include <string.h>

#include "base/rng.h"

#define MB GRT_MiB

typedef struct builder {
  frag_op *ops;
  size_t n, cap;
  uint32_t next_id;
  uint32_t *live; /* ids currently live and freeable (for random frees) */
  size_t n_live, cap_live;
  uint64_t *size_of; /* id -> requested size */
  size_t cap_ids;
  uint64_t live_bytes; /* requested bytes live after the ops so far */
  uint64_t stop_bytes; /* generators stop once the live set exceeds this */
} builder;

static int full(const builder *b) { return b->live_bytes > b->stop_bytes; }

static int push(builder *b, frag_op op) {
  if (b->n == b->cap) {
    size_t cap = b->cap ? b->cap * 2 : 1024;
    frag_op *o = realloc(b->ops, cap * sizeof *o);
    if (!o) return 0;
    b->ops = o;
    b->cap = cap;
  }
  b->ops[b->n++] = op;
  return 1;
}

static int alloc_op(builder *b, uint64_t size, int track) {
  uint32_t id = b->next_id++;
  if (id >= b->cap_ids) {
    size_t cap = b->cap_ids ? b->cap_ids * 2 : 1024;
    uint64_t *s = realloc(b->size_of, cap * sizeof *s);
    if (!s) return 0;
    b->size_of = s;
    b->cap_ids = cap;
  }
  b->size_of[id] = size;
  b->live_bytes += size;
  if (!push(b, (frag_op){id, 0, size})) return 0;
  if (!track) return 1;
  if (b->n_live == b->cap_live) {
    size_t cap = b->cap_live ? b->cap_live * 2 : 256;
    uint32_t *l = realloc(b->live, cap * sizeof *l);
    if (!l) return 0;
    b->live = l;
    b->cap_live = cap;
  }
  b->live[b->n_live++] = id;
  return 1;
}

/* Frees a random tracked live id. */
static int free_random(builder *b, grt__rng *r) {
  if (!b->n_live) return 1;
  size_t k = grt__rng_below(r, b->n_live);
  uint32_t id = b->live[k];
  b->live[k] = b->live[--b->n_live];
  b->live_bytes -= b->size_of[id];
  return push(b, (frag_op){id, 1, 0});
}

/* Long-lived small tensors (never freed) interleaved with short-lived large
 * ones: first fit puts each small one right after a large one, so when the
 * large ones go, the holes are pinned apart. */
static int make_small_among_large(builder *b, grt__rng *r, uint64_t capacity) {
  (void)capacity;
  while (!full(b)) {
    uint64_t big = grt__rng_log_uniform(r, 2 * MB, 24 * MB);
    uint64_t small = grt__rng_log_uniform(r, 64 * 1024, 768 * 1024);
    if (!alloc_op(b, big, 1) || !alloc_op(b, small, 0)) return 0;
    if (grt__rng_below(r, 100) < 85 && !free_random(b, r)) return 0;
  }
  return 1;
}

/* Random sizes over three decades, random lifetimes, slowly growing live set. */
static int make_random_churn(builder *b, grt__rng *r, uint64_t capacity) {
  (void)capacity;
  while (!full(b)) {
    uint64_t size = grt__rng_log_uniform(r, 32 * 1024, 32 * MB);
    if (!alloc_op(b, size, 1)) return 0;
    if (grt__rng_below(r, 100) < 92 && !free_random(b, r)) return 0;
  }
  return 1;
}

/* The day-3 story: request sizes drift upward over time while a fraction of
 * every generation stays alive; old holes are too small for new requests. */
static int make_size_drift(builder *b, grt__rng *r, uint64_t capacity) {
  (void)capacity;
  for (double scale = 1.0; !full(b); scale *= 1.0015) {
    uint64_t size = (uint64_t)((double)grt__rng_log_uniform(r, 256 * 1024, 4 * MB) * scale);
    int keep = grt__rng_below(r, 100) < 10;
    if (!alloc_op(b, size, !keep)) return 0;
    if (grt__rng_below(r, 100) < 90 && !free_random(b, r)) return 0;
  }
  return 1;
}

/* Same-size batches (one "model step" of activations) freed together, with
 * one output per step kept: the caching allocator's home ground. */
static int make_step_batches(builder *b, grt__rng *r, uint64_t capacity) {
  (void)capacity;
  while (!full(b)) {
    uint64_t unit = grt__rng_log_uniform(r, 512 * 1024, 6 * MB);
    size_t first = b->n_live;
    for (int k = 0; k < 8; k++)
      if (!alloc_op(b, unit + 4096 * k, 1)) return 0;
    if (!alloc_op(b, unit / 2 + 1000, 0)) return 0; /* the step's kept output */
    while (b->n_live > first) {
      uint32_t id = b->live[--b->n_live];
      b->live_bytes -= b->size_of[id];
      if (!push(b, (frag_op){id, 1, 0})) return 0;
    }
  }
  return 1;
}

/* The serving-day checkerboard: big short-lived buffers (KV, activations)
 * churn while small long-lived ones (metadata, cached outputs) accumulate.
 * First fit drops every small one into the front of a hole a big one left,
 * so the holes shrink just below the next big request. */
static int make_checkerboard(builder *b, grt__rng *r, uint64_t capacity) {
  (void)capacity;
  while (!full(b)) {
    uint64_t big = grt__rng_log_uniform(r, 16 * MB, 64 * MB);
    if (!alloc_op(b, big, 1)) return 0;
    for (int k = 0; k < 3; k++)
      if (!alloc_op(b, grt__rng_log_uniform(r, 4 * 1024, 256 * 1024), 0)) return 0;
    if (grt__rng_below(r, 100) < 80 && !free_random(b, r)) return 0;
  }
  return 1;
}

/* Growing phases (longer sequences each step): a batch of same-size buffers,
 * each followed by a small long-lived tensor, then the batch is freed. The
 * next batch is larger than every hole the small tensors pinned. */
static int make_phase_growth(builder *b, grt__rng *r, uint64_t capacity) {
  (void)capacity;
  double size = (double)grt__rng_log_uniform(r, 1 * MB, 3 * MB);
  while (!full(b)) {
    size_t first = b->n_live;
    int batch = 8 + (int)grt__rng_below(r, 8);
    for (int k = 0; k < batch && !full(b); k++) {
      if (!alloc_op(b, (uint64_t)size, 1)) return 0;
      if (!alloc_op(b, grt__rng_log_uniform(r, 16 * 1024, 256 * 1024), 0)) return 0;
    }
    if (full(b)) break;
    while (b->n_live > first) {
      uint32_t id = b->live[--b->n_live];
      b->live_bytes -= b->size_of[id];
      if (!push(b, (frag_op){id, 1, 0})) return 0;
    }
    size *= 1.25;
    if (size > 48.0 * MB) size = (double)grt__rng_log_uniform(r, 1 * MB, 3 * MB);
  }
  return 1;
}

typedef struct family {
  const char *name, *why;
  int (*make)(builder *, grt__rng *, uint64_t);
} family;

static const family families[] = {
    {"phase-growth", "each phase's buffers are 25% larger than the holes the last phase left", make_phase_growth},
    {"checkerboard", "small long-lived tensors land in the holes 16-64 MB buffers leave", make_checkerboard},
    {"small-among-large", "long-lived <1 MB tensors pinned between short-lived 2-24 MB ones", make_small_among_large},
    {"random-churn", "log-uniform 32 KB-32 MB sizes, random lifetimes, slowly growing live set", make_random_churn},
    {"size-drift", "request sizes drift upward; 10% of each generation lives forever", make_size_drift},
    {"step-batches", "8 same-size activations per step freed together, one small output kept", make_step_batches},
};

size_t frag_family_count(void) { return sizeof families / sizeof families[0]; }

int frag_trace_make(size_t family_index, uint64_t seed, uint64_t capacity, frag_trace *out) {
  memset(out, 0, sizeof *out);
  if (family_index >= frag_family_count()) return 0;
  builder b;
  memset(&b, 0, sizeof b);
  grt__rng r;
  grt__rng_seed(&r, seed * 7919 + family_index);
  b.stop_bytes = capacity + capacity / 4; /* beyond the device: every policy fails */
  int ok = families[family_index].make(&b, &r, capacity);
  free(b.live);
  free(b.size_of);
  if (!ok) {
    free(b.ops);
    return 0;
  }
  out->name = families[family_index].name;
  out->why = families[family_index].why;
  out->ops = b.ops;
  out->n_ops = b.n;
  out->n_ids = b.next_id;
  return 1;
}

void frag_trace_free(frag_trace *t) {
  free(t->ops);
  t->ops = NULL;
}

/* Fills res at the first failed allocation; a failure of its own goes to *err. */
static void fill_failure(grt_device *dev, grt_allocator *a, uint64_t capacity, uint64_t live_requested,
                         frag_result *res, cli_first *err) {
  grt_device_stats ds;
  grt_alloc_stats as;
  if (cli_keep(err, "grt_device_get_stats", grt_device_get_stats(dev, &ds)) ||
      cli_keep_alloc(err, a, "grt_alloc_get_stats", grt_alloc_get_stats(a, &as)))
    return;
  res->failed = 1;
  res->utilization = (double)live_requested / (double)capacity;
  res->largest_free = ds.largest_hole > as.largest_free_block ? ds.largest_hole : as.largest_free_block;
}

grt_status frag_run(const frag_trace *t, const char *policy, uint64_t capacity, frag_result *res, cli_first *err) {
  memset(res, 0, sizeof *res);
  *err = (cli_first)CLI_FIRST_INIT;
  grt_device_config dc;
  grt_device_config_default(&dc);
  dc.capacity = capacity;
  grt_device *dev = NULL;
  grt_allocator *a = NULL;
  grt_devptr *ptrs = calloc(t->n_ids + 1, sizeof *ptrs);
  uint64_t *sizes = calloc(t->n_ids + 1, sizeof *sizes);
  if (!ptrs || !sizes)
    cli_keep(err, "calloc", GRT_ERR_NOMEM);
  else if (!cli_keep(err, "grt_device_create", grt_device_create(&dc, &dev)))
    cli_keep(err, "grt_alloc_create", grt_alloc_create(policy, dev, NULL, &a));
  uint64_t live = 0;
  for (size_t i = 0; !err->st && i < t->n_ops; i++) {
    const frag_op *op = &t->ops[i];
    if (op->is_free) {
      if (ptrs[op->id]) {
        if (cli_keep_alloc(err, a, "grt_alloc_free", grt_alloc_free(a, ptrs[op->id]))) break;
        ptrs[op->id] = 0;
        live -= sizes[op->id];
      }
      res->ops_done = i + 1;
      continue;
    }
    grt_status st = grt_alloc_malloc(a, op->size, 0, &ptrs[op->id]);
    if (st == GRT_ERR_OOM) { /* the first failed allocation: where the run ends */
      ptrs[op->id] = 0;
      res->failed_size = op->size;
      fill_failure(dev, a, capacity, live, res, err);
      break;
    }
    if (cli_keep_alloc(err, a, "grt_alloc_malloc", st)) break;
    sizes[op->id] = op->size;
    live += op->size;
    res->ops_done = i + 1;
  }
  if (!err->st) {
    grt_alloc_stats as;
    if (!cli_keep_alloc(err, a, "grt_alloc_get_stats", grt_alloc_get_stats(a, &as))) {
      res->device_mallocs = as.num_device_alloc;
      res->device_frees = as.num_device_free;
    }
  }
  /* The blocks still allocated go with the allocator (as at process exit). */
  cli_keep(err, "grt_alloc_destroy", grt_alloc_destroy(a));
  cli_keep(err, "grt_device_destroy", grt_device_destroy(dev));
  free(ptrs);
  free(sizes);
  return err->st;
}
