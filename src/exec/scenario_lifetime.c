/* scenario_lifetime.c — S3: a buffer's lifetime is a position in stream order.
 *
 * Stream A runs a reader kernel over buffer B; the host frees B at once and the
 * pool hands the same memory to stream C, whose writer kernel overwrites it.
 * With a host-order free (free_now) the writer may land before the reader's
 * body: the reader's checksum is wrong — corruption detected. With a
 * stream-ordered free (free_async on A) the allocation on C waits for A to
 * reach the free point, so the writer always lands after the reader.
 *
 * The racing accesses use relaxed atomics: the unsafe path is a modelled race
 * on device memory, not a C data race (ThreadSanitizer stays quiet).
 *
 * The pool (grt__sopool) is deliberately minimal — fixed-size blocks from one
 * device segment — and is meant to be replaced by the stream-ordered allocator.
 */
#include <stdlib.h>
#include <string.h>

#include "base/rng.h"
#include "exec/scenario.h"

typedef struct sopool_block {
  grt_devptr ptr;
  int in_use;
  grt_event *free_event;   /* recorded at the stream-ordered free point; NULL: none pending */
  grt_stream *free_stream; /* where the free happened */
} sopool_block;

struct grt__sopool {
  grt_exec *exec;
  grt_device *dev;
  grt_devptr base;
  uint64_t block_bytes;
  unsigned n;
  sopool_block *blocks;
};

grt_status grt__sopool_create(grt_exec *exec, uint64_t block_bytes, unsigned blocks, grt__sopool **out) {
  if (!exec || !block_bytes || !blocks || !out) return GRT_ERR_INVALID_ARG;
  grt__sopool *p = calloc(1, sizeof *p);
  if (!p) return GRT_ERR_NOMEM;
  p->blocks = calloc(blocks, sizeof *p->blocks);
  grt_status st = p->blocks ? grt_exec_get_device(exec, &p->dev) : GRT_ERR_NOMEM;
  if (!st) st = grt_device_malloc(p->dev, block_bytes * blocks, &p->base);
  if (st) {
    free(p->blocks);
    free(p);
    return st;
  }
  p->exec = exec;
  p->block_bytes = block_bytes;
  p->n = blocks;
  for (unsigned i = 0; i < blocks; i++) p->blocks[i].ptr = p->base + i * block_bytes;
  *out = p;
  return GRT_OK;
}

grt_status grt__sopool_destroy(grt__sopool *p) {
  if (!p) return GRT_OK;
  for (unsigned i = 0; i < p->n; i++) grt_event_destroy(p->blocks[i].free_event);
  grt_status st = grt_device_free(p->dev, p->base);
  free(p->blocks);
  free(p);
  return st;
}

static sopool_block *find(grt__sopool *p, grt_devptr ptr) {
  if (ptr < p->base || (ptr - p->base) % p->block_bytes) return NULL;
  uint64_t i = (ptr - p->base) / p->block_bytes;
  return i < p->n ? &p->blocks[i] : NULL;
}

grt_status grt__sopool_alloc(grt__sopool *p, grt_stream *s, grt_devptr *out) {
  if (!p || !s || !out) return GRT_ERR_INVALID_ARG;
  for (unsigned i = 0; i < p->n; i++) {
    sopool_block *b = &p->blocks[i];
    if (b->in_use) continue;
    /* Reuse on another stream waits for the free point; same stream: FIFO. */
    if (b->free_stream && b->free_stream != s) {
      grt_status st = grt_stream_wait_event(s, b->free_event);
      if (st) return st;
    }
    b->in_use = 1;
    b->free_stream = NULL;
    *out = b->ptr;
    return GRT_OK;
  }
  return GRT_ERR_OOM;
}

grt_status grt__sopool_free_async(grt__sopool *p, grt_devptr ptr, grt_stream *s) {
  sopool_block *b = p && s ? find(p, ptr) : NULL;
  if (!b) return GRT_ERR_UNKNOWN_POINTER;
  if (!b->in_use) return GRT_ERR_DOUBLE_FREE;
  grt_status st = b->free_event ? GRT_OK : grt_event_create(p->exec, GRT_EVENT_DISABLE_TIMING, &b->free_event);
  if (!st) st = grt_event_record(b->free_event, s);
  if (st) return st;
  b->free_stream = s;
  b->in_use = 0;
  return GRT_OK;
}

grt_status grt__sopool_free_now(grt__sopool *p, grt_devptr ptr) {
  sopool_block *b = p ? find(p, ptr) : NULL;
  if (!b) return GRT_ERR_UNKNOWN_POINTER;
  if (!b->in_use) return GRT_ERR_DOUBLE_FREE;
  b->in_use = 0;
  b->free_stream = NULL;
  return GRT_OK;
}

/* ---- the scenario ---- */

typedef struct buf_access {
  grt_device *dev;
  grt_devptr ptr;
  uint64_t words;
  uint64_t pattern; /* writer: value stored; reader: unused */
  uint64_t sum;     /* reader: checksum observed */
} buf_access;

static void reader_body(void *p) {
  buf_access *a = p;
  uint64_t *w;
  if (grt_device_host_ptr(a->dev, a->ptr, a->words * 8, (void **)&w)) return;
  uint64_t sum = 0;
  for (uint64_t i = 0; i < a->words; i++) sum = sum * 31 + __atomic_load_n(&w[i], __ATOMIC_RELAXED);
  a->sum = sum;
}

static void writer_body(void *p) {
  buf_access *a = p;
  uint64_t *w;
  if (grt_device_host_ptr(a->dev, a->ptr, a->words * 8, (void **)&w)) return;
  for (uint64_t i = 0; i < a->words; i++) __atomic_store_n(&w[i], a->pattern + i, __ATOMIC_RELAXED);
}

grt_status grt__lifetime_init(grt__lifetime *lt, grt_exec *exec, uint64_t bytes) {
  memset(lt, 0, sizeof *lt);
  lt->exec = exec;
  lt->bytes = (bytes + 7) & ~(uint64_t)7;
  grt_status st = grt__sopool_create(exec, lt->bytes, 1, &lt->pool);
  if (!st) st = grt_stream_create(exec, GRT_STREAM_NON_BLOCKING, 0, &lt->a);
  if (!st) st = grt_stream_create(exec, GRT_STREAM_NON_BLOCKING, 0, &lt->c);
  if (!st) st = grt_stream_set_name(lt->a, "A (reader)");
  if (!st) st = grt_stream_set_name(lt->c, "C (writer)");
  if (st) grt__lifetime_fini(lt);
  return st;
}

void grt__lifetime_fini(grt__lifetime *lt) {
  grt_exec_synchronize(lt->exec);
  grt_stream_destroy(lt->a);
  grt_stream_destroy(lt->c);
  grt__sopool_destroy(lt->pool);
  memset(lt, 0, sizeof *lt);
}

static grt_status delay(grt_stream *s, uint64_t ns) {
  if (!ns) return GRT_OK;
  grt_kernel_desc d = {NULL, NULL, ns, GRT_ENGINE_COMPUTE, "other work"};
  return grt_launch_kernel(s, &d);
}

/* Fills B (idle: the previous schedule ended with a device sync) and returns its checksum. */
static uint64_t fill(grt_device *dev, grt_devptr b, uint64_t words, uint64_t seed) {
  uint64_t *w, sum = 0;
  grt__rng r;
  grt__rng_seed(&r, seed);
  if (grt_device_host_ptr(dev, b, words * 8, (void **)&w)) return 0;
  for (uint64_t i = 0; i < words; i++) {
    uint64_t v = grt__rng_next(&r) | 1; /* never equal to the writer's pattern */
    __atomic_store_n(&w[i], v, __ATOMIC_RELAXED);
    sum = sum * 31 + v;
  }
  return sum;
}

grt_status grt__lifetime_run(grt__lifetime *lt, int stream_ordered, const grt__lifetime_sched *sc, uint64_t seed,
                             int *corrupted) {
  if (!lt || !sc || !corrupted) return GRT_ERR_INVALID_ARG;
  grt_device *dev;
  grt_devptr b, b2;
  grt_user_event *gate = NULL;
  grt_status st = grt_exec_get_device(lt->exec, &dev);
  if (!st && sc->gated) st = grt_user_event_create(lt->exec, "gate", &gate);
  if (!st) st = grt__sopool_alloc(lt->pool, lt->a, &b);
  if (st) goto out;
  buf_access rd = {dev, b, lt->bytes / 8, 0, 0};
  buf_access wr = {dev, 0, lt->bytes / 8, 0x5eed0000ull << 1, 0}; /* even: fill() values are odd */
  uint64_t expect = fill(dev, b, rd.words, seed);
  grt_kernel_desc kr = {reader_body, &rd, sc->read_ns, GRT_ENGINE_COMPUTE, "read B"};
  grt_kernel_desc kw = {writer_body, &wr, sc->write_ns, GRT_ENGINE_COMPUTE, "write B'"};
  if ((st = delay(lt->a, sc->pre_a_ns))) goto out;
  if (gate && (st = grt_stream_wait_user_event(lt->a, gate, 1))) goto out;
  if ((st = grt_launch_kernel(lt->a, &kr))) goto out;
  /* The host is done with B: it frees it right away. */
  st = stream_ordered ? grt__sopool_free_async(lt->pool, b, lt->a) : grt__sopool_free_now(lt->pool, b);
  if (st || (st = grt__sopool_alloc(lt->pool, lt->c, &b2))) goto out;
  wr.ptr = b2; /* the same block: the pool has one */
  if ((st = delay(lt->c, sc->pre_c_ns)) || (st = grt_launch_kernel(lt->c, &kw))) goto out;
  if (gate) {
    /* Unsafe: let the writer finish first. Safe: the writer waits for A, so open the gate first. */
    if (!stream_ordered && (st = grt_stream_synchronize(lt->c))) goto out;
    if ((st = grt_user_event_signal(gate, 1))) goto out;
  }
  if ((st = grt_exec_synchronize(lt->exec))) goto out;
  *corrupted = rd.sum != expect;
  st = grt__sopool_free_now(lt->pool, b2); /* idle after the sync */
out:
  if (gate) grt_user_event_destroy(gate);
  return st;
}
