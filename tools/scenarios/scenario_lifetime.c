/* scenario_lifetime.c — S3: a buffer's lifetime is a position in stream order.
 *
 * Stream A runs a reader kernel over buffer B; the host frees B at once and the
 * pool hands the same memory to stream C, whose writer kernel overwrites it.
 * With a host-order free the writer may land before the reader's body: the
 * reader's checksum is wrong — corruption detected. With a stream-ordered free
 * (free_async on A, then C waits for an event recorded after it, as a CUDA
 * program hands a stream-ordered free to another stream) the pool reuses B on
 * C behind that edge, so the writer always lands after the reader. The sanitizer sees both kernels'
 * declared accesses and the pool's frees and edges, so it judges each run
 * independently of the schedule.
 *
 * The racing accesses use relaxed atomics: the unsafe path is a modelled race
 * on device memory, not a C data race (ThreadSanitizer stays quiet).
 */
#include <stdlib.h>
#include <string.h>

#include "base/rng.h"
#include "scenarios/scenario_lifetime.h"

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
  grt_sorder_config scfg;
  grt_sorder_config_default(&scfg);
  scfg.exec = exec;
  grt_mempool_config pcfg;
  grt_mempool_config_default(&pcfg);
  pcfg.exec = exec;
  grt_status st = grt_sorder_create(&scfg, &lt->so);
  pcfg.sorder = lt->so;
  if (!st) st = grt_mempool_create(&pcfg, &lt->pool);
  if (!st) st = grt_stream_create(exec, GRT_STREAM_NON_BLOCKING, 0, &lt->a);
  if (!st) st = grt_stream_create(exec, GRT_STREAM_NON_BLOCKING, 0, &lt->c);
  if (!st) st = grt_event_create(exec, GRT_EVENT_DISABLE_TIMING, &lt->handoff);
  if (!st) st = grt_stream_set_name(lt->a, "A (reader)");
  if (!st) st = grt_stream_set_name(lt->c, "C (writer)");
  /* Best effort: the set-up's failure is the one the caller needs to see. */
  if (st) (void)grt__lifetime_fini(lt);
  return st;
}

grt_status grt__lifetime_fini(grt__lifetime *lt) {
  grt_status st = grt_exec_synchronize(lt->exec), d;
  /* Idle after the synchronize: each destroy runs even if one before failed. */
  if ((d = grt_stream_destroy(lt->a)) && !st) st = d;
  if ((d = grt_stream_destroy(lt->c)) && !st) st = d;
  if ((d = grt_event_destroy(lt->handoff)) && !st) st = d;
  if ((d = grt_mempool_destroy(lt->pool)) && !st) st = d;
  if ((d = grt_sorder_destroy(lt->so)) && !st) st = d;
  memset(lt, 0, sizeof *lt);
  return st;
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
  uint64_t before = 0;
  grt_status st = grt_exec_get_device(lt->exec, &dev);
  if (!st) st = grt_sorder_report_count(lt->so, NULL, &before);
  if (!st && sc->gated) st = grt_user_event_create(lt->exec, "gate", &gate);
  if (!st) st = grt_malloc_async(lt->pool, lt->bytes, lt->a, &b);
  if (st) goto out;
  buf_access rd = {dev, b, lt->bytes / 8, 0, 0};
  buf_access wr = {dev, 0, lt->bytes / 8, 0x5eed0000ull << 1, 0}; /* even: fill() values are odd */
  /* The host fills B once it is usable (A has reached the allocation: a
   * stream-ordered allocation is not the host's before that). */
  if ((st = grt_sorder_stream_synchronize(lt->so, lt->a))) goto out;
  if ((st = grt_sorder_host_access(lt->so, b, lt->bytes, 1))) goto out;
  uint64_t expect = fill(dev, b, rd.words, seed);
  grt_kernel_desc kr = {reader_body, &rd, sc->read_ns, GRT_ENGINE_COMPUTE, "read B"};
  grt_kernel_desc kw = {writer_body, &wr, sc->write_ns, GRT_ENGINE_COMPUTE, "write B'"};
  grt_access ar = {b, lt->bytes, 0};
  if ((st = delay(lt->a, sc->pre_a_ns))) goto out;
  if (gate && (st = grt_stream_wait_user_event(lt->a, gate, 1))) goto out;
  if ((st = grt_sorder_launch(lt->so, lt->a, &kr, &ar, 1))) goto out;
  /* The host is done with B: it frees it right away. */
  st = stream_ordered ? grt_free_async(lt->pool, b, lt->a) : grt_mempool_free_host_order(lt->pool, b);
  /* Safe: C's work from here on waits for A's free, so the pool may give C the block. */
  if (!st && stream_ordered && !(st = grt_sorder_event_record(lt->so, lt->handoff, lt->a)))
    st = grt_sorder_stream_wait_event(lt->so, lt->c, lt->handoff);
  if (st || (st = grt_malloc_async(lt->pool, lt->bytes, lt->c, &b2))) goto out;
  wr.ptr = b2;
  lt->same_block = b2 == b;
  grt_access aw = {b2, lt->bytes, 1};
  if ((st = delay(lt->c, sc->pre_c_ns)) || (st = grt_sorder_launch(lt->so, lt->c, &kw, &aw, 1))) goto out;
  if (gate) {
    /* Unsafe: let the writer finish first. Safe: the writer waits for A, so open the gate first. */
    if (!stream_ordered && (st = grt_sorder_stream_synchronize(lt->so, lt->c))) goto out;
    if ((st = grt_user_event_signal(gate, 1))) goto out;
  }
  if ((st = grt_sorder_synchronize(lt->so))) goto out;
  *corrupted = rd.sum != expect;
  /* Idle after the sync: free B' and let the pool's sync point hand it back. */
  if (!(st = grt_free_async(lt->pool, b2, lt->c))) st = grt_mempool_synchronize(lt->pool);
  uint64_t after = before;
  if (!st) st = grt_sorder_report_count(lt->so, NULL, &after);
  lt->reports = after - before;
out:
  if (gate) {
    grt_status d = grt_user_event_destroy(gate); /* signalled and idle after a sync, unless st failed first */
    if (!st) st = d;
  }
  return st;
}
