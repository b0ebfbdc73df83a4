/* prometheus.c — the Prometheus text exposition format (version 0.0.4).
 *
 * Every family is written once: `# HELP`, `# TYPE`, then one sample per
 * source (and per pool for pool-split families), so samples of a family are
 * contiguous as the format requires. Names carry the unit (`_bytes`,
 * `_ratio`); counters end in `_total`. The `pool` label takes "all", "small"
 * and "large" like PyTorch's all/small_pool/large_pool keys: sum over
 * pool!="all" (or read pool="all") — never over every pool. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "report/metrics_impl.h"
#include "report/textbuf.h"

typedef enum scope { PER_POOL, PER_ALLOC, PER_DEVICE } scope;

typedef double (*alloc_get)(const grt__alloc_sample *s, int pool);
typedef double (*device_get)(const grt_device_stats *s);

typedef struct family {
  const char *name, *type, *help;
  scope scope;
  alloc_get aget;
  device_get dget;
} family;

static const char *const pool_names[GRT_STAT_TYPES] = {"all", "small", "large"};

#define A(field) (double)s->stats.field[pool].current
#define AFN(fn, expr)                                          \
  static double fn(const grt__alloc_sample *s, int pool) {     \
    (void)pool;                                                \
    (void)s;                                                   \
    return (expr);                                             \
  }
AFN(g_reserved, A(reserved_bytes))
AFN(g_reserved_peak, (double)s->stats.reserved_bytes[pool].peak)
AFN(g_allocated, A(allocated_bytes))
AFN(g_allocated_peak, (double)s->stats.allocated_bytes[pool].peak)
AFN(g_active, A(active_bytes))
AFN(g_requested, A(requested_bytes))
AFN(g_cached, A(reserved_bytes) - A(allocated_bytes))
AFN(g_free, (double)s->free.inactive[pool])
AFN(g_pending, (double)s->free.pending[pool])
AFN(g_inactive_split, A(inactive_split_bytes))
AFN(g_largest, (double)s->free.largest[pool])
AFN(g_frag, grt_fragmentation_ratio(s->free.largest[pool], s->free.inactive[pool]))
AFN(g_segments, A(segment))
AFN(g_allocations, A(allocation))
AFN(g_allocations_total, (double)s->stats.allocation[pool].allocated)
AFN(g_segments_total, (double)s->stats.segment[pool].allocated)
AFN(g_dev_mallocs, (double)s->stats.num_device_alloc)
AFN(g_dev_frees, (double)s->stats.num_device_free)
AFN(g_syncs, (double)s->stats.num_sync_all_streams)
AFN(g_ooms, (double)s->stats.num_ooms)
AFN(g_retries, (double)s->stats.num_alloc_retries)
AFN(g_edges, (double)s->stats.cross_stream_syncs)
AFN(g_hits, (double)s->stats.num_cache_hits)
AFN(g_pending_blocks, (double)s->stats.pending_free_blocks)
AFN(g_oversize_allocs, (double)s->stats.oversize_allocations.current)
AFN(g_oversize_segs, (double)s->stats.oversize_segments.current)
AFN(g_max_split, s->stats.max_split_size < 0 ? INFINITY : (double)s->stats.max_split_size)
AFN(g_info, 1.0)
#undef AFN
#undef A

#define DFN(fn, field) \
  static double fn(const grt_device_stats *s) { return (double)s->field; }
DFN(d_capacity, capacity)
DFN(d_used, bytes_in_use)
DFN(d_used_peak, peak_bytes_in_use)
DFN(d_free, free_bytes)
DFN(d_hole, largest_hole)
DFN(d_holes, holes)
DFN(d_segments, segments)
DFN(d_mallocs, malloc_calls)
DFN(d_failed, failed_mallocs)
DFN(d_frees, free_calls)
DFN(d_syncs, syncs)
#undef DFN

#define POOL(n, t, h, f) {n, t, h, PER_POOL, f, NULL}
#define ALLOC(n, t, h, f) {n, t, h, PER_ALLOC, f, NULL}
#define DEV(n, t, h, f) {n, t, h, PER_DEVICE, NULL, f}
static const family families[] = {
    ALLOC("gpurt_allocator_info", "gauge", "Registered allocator (value 1) and its policy.", g_info),
    POOL("gpurt_alloc_reserved_bytes", "gauge",
         "Bytes in segments the allocator holds from the device (PyTorch reserved_bytes.current).", g_reserved),
    POOL("gpurt_alloc_reserved_peak_bytes", "gauge", "High-water mark of reserved bytes.", g_reserved_peak),
    POOL("gpurt_alloc_allocated_bytes", "gauge",
         "Bytes in blocks handed to callers, rounded sizes (PyTorch allocated_bytes.current).", g_allocated),
    POOL("gpurt_alloc_allocated_peak_bytes", "gauge", "High-water mark of allocated bytes.", g_allocated_peak),
    POOL("gpurt_alloc_active_bytes", "gauge",
         "Bytes in allocated or pending-free blocks (PyTorch active_bytes.current).", g_active),
    POOL("gpurt_alloc_requested_bytes", "gauge",
         "Bytes callers asked for, before rounding (PyTorch requested_bytes.current).", g_requested),
    POOL("gpurt_alloc_cached_bytes", "gauge", "Reserved minus allocated: memory held by the cache, not a leak.",
         g_cached),
    POOL("gpurt_alloc_free_bytes", "gauge", "Bytes in free (inactive) cached blocks.", g_free),
    POOL("gpurt_alloc_pending_free_bytes", "gauge", "Bytes in freed blocks still waiting on stream events.",
         g_pending),
    POOL("gpurt_alloc_inactive_split_bytes", "gauge",
         "Free bytes in split segments, which empty_cache cannot release (PyTorch inactive_split_bytes).",
         g_inactive_split),
    POOL("gpurt_alloc_largest_free_block_bytes", "gauge",
         "Largest free cached block: the biggest request served without a device malloc (fragmentation early "
         "warning).",
         g_largest),
    POOL("gpurt_alloc_fragmentation_ratio", "gauge",
         "1 - largest free block / free cached bytes (0: one free block, near 1: free cache is dust).", g_frag),
    POOL("gpurt_alloc_segments", "gauge", "Segments held from the device.", g_segments),
    POOL("gpurt_alloc_segments_created_total", "counter", "Segments obtained from the device since start.",
         g_segments_total),
    POOL("gpurt_alloc_allocations", "gauge", "Live allocations.", g_allocations),
    POOL("gpurt_alloc_allocations_total", "counter", "Allocations served since start.", g_allocations_total),
    ALLOC("gpurt_alloc_device_mallocs_total", "counter", "Device mallocs (cudaMalloc) issued by the allocator.",
          g_dev_mallocs),
    ALLOC("gpurt_alloc_device_frees_total", "counter", "Device frees (cudaFree) issued by the allocator.",
          g_dev_frees),
    ALLOC("gpurt_alloc_syncs_total", "counter",
          "Synchronizations of all streams before releasing cache (PyTorch num_sync_all_streams).", g_syncs),
    ALLOC("gpurt_alloc_ooms_total", "counter", "Requests that failed with out-of-memory.", g_ooms),
    ALLOC("gpurt_alloc_retries_total", "counter",
          "Device mallocs retried after releasing the cache (PyTorch num_alloc_retries).", g_retries),
    ALLOC("gpurt_alloc_cross_stream_edges_total", "counter",
          "Event edges added by reusing another stream's cached block.", g_edges),
    ALLOC("gpurt_alloc_cache_hits_total", "counter", "Allocations served from the cache without a device malloc.",
          g_hits),
    ALLOC("gpurt_alloc_pending_free_blocks", "gauge", "Freed blocks waiting on stream events.", g_pending_blocks),
    ALLOC("gpurt_alloc_oversize_allocations", "gauge", "Live allocations at or above max_split_size.",
          g_oversize_allocs),
    ALLOC("gpurt_alloc_oversize_segments", "gauge", "Segments at or above max_split_size.", g_oversize_segs),
    ALLOC("gpurt_alloc_max_split_size_bytes", "gauge", "Configured max_split_size (+Inf when unlimited).",
          g_max_split),
    DEV("gpurt_device_capacity_bytes", "gauge", "Device memory capacity.", d_capacity),
    DEV("gpurt_device_used_bytes", "gauge", "Device bytes in live segments.", d_used),
    DEV("gpurt_device_used_peak_bytes", "gauge", "High-water mark of device bytes in live segments.", d_used_peak),
    DEV("gpurt_device_free_bytes", "gauge", "Device bytes not in any segment.", d_free),
    DEV("gpurt_device_largest_hole_bytes", "gauge", "Largest contiguous free device range.", d_hole),
    DEV("gpurt_device_holes", "gauge", "Free device ranges.", d_holes),
    DEV("gpurt_device_segments", "gauge", "Live device segments.", d_segments),
    DEV("gpurt_device_mallocs_total", "counter", "Successful device mallocs.", d_mallocs),
    DEV("gpurt_device_failed_mallocs_total", "counter", "Device mallocs that failed.", d_failed),
    DEV("gpurt_device_frees_total", "counter", "Device frees.", d_frees),
    DEV("gpurt_device_syncs_total", "counter", "Device-wide synchronizations (one per device free).", d_syncs),
};
#undef POOL
#undef ALLOC
#undef DEV

/* A label value: backslash, double quote and newline escaped. */
static void label(grt__textbuf *tb, const char *key, const char *value, int first) {
  grt__textbuf_printf(tb, "%s%s=\"", first ? "" : ",", key);
  for (const char *p = value; *p; p++) {
    if (*p == '\\')
      grt__textbuf_puts(tb, "\\\\");
    else if (*p == '"')
      grt__textbuf_puts(tb, "\\\"");
    else if (*p == '\n')
      grt__textbuf_puts(tb, "\\n");
    else
      grt__textbuf_putn(tb, p, 1);
  }
  grt__textbuf_puts(tb, "\"");
}

static void value(grt__textbuf *tb, double v) {
  if (isinf(v))
    grt__textbuf_puts(tb, v > 0 ? " +Inf\n" : " -Inf\n");
  else if (isnan(v))
    grt__textbuf_puts(tb, " NaN\n");
  else if (v == floor(v) && fabs(v) < 9007199254740992.0)
    grt__textbuf_printf(tb, " %.0f\n", v);
  else
    grt__textbuf_printf(tb, " %.17g\n", v);
}

static void write_family(grt__textbuf *tb, const family *f, const grt__alloc_sample *as, size_t n_as,
                         const grt__device_sample *ds, size_t n_ds) {
  if ((f->scope == PER_DEVICE && !n_ds) || (f->scope != PER_DEVICE && !n_as)) return;
  grt__textbuf_printf(tb, "# HELP %s %s\n# TYPE %s %s\n", f->name, f->help, f->name, f->type);
  if (f->scope == PER_DEVICE) {
    for (size_t i = 0; i < n_ds; i++) {
      grt__textbuf_printf(tb, "%s{", f->name);
      label(tb, "device", ds[i].device, 1);
      grt__textbuf_puts(tb, "}");
      value(tb, f->dget(&ds[i].stats));
    }
    return;
  }
  for (size_t i = 0; i < n_as; i++) {
    int pools = f->scope == PER_POOL ? GRT_STAT_TYPES : 1;
    for (int p = 0; p < pools; p++) {
      grt__textbuf_printf(tb, "%s{", f->name);
      label(tb, "device", as[i].device, 1);
      label(tb, "allocator", as[i].name, 0);
      if (f->scope == PER_POOL) label(tb, "pool", pool_names[p], 0);
      if (f->aget == g_info) label(tb, "policy", as[i].policy, 0);
      grt__textbuf_puts(tb, "}");
      value(tb, f->aget(&as[i], p));
    }
  }
}

grt_status grt__prometheus_write(const grt__alloc_sample *as, size_t n_as, const grt__device_sample *ds,
                                 size_t n_ds, char **out, size_t *len) {
  grt__textbuf tb = {0};
  for (size_t i = 0; i < sizeof families / sizeof families[0]; i++) write_family(&tb, &families[i], as, n_as, ds, n_ds);
  return grt__textbuf_finish(&tb, out, len);
}
