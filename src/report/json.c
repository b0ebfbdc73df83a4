/* json.c — statistics and snapshots as JSON in PyTorch's own shapes, so
 * tooling written for torch.cuda.memory_stats() and memory._snapshot()
 * (PyTorch's memory_viz, notebooks) reads gpurt's output unchanged.
 *
 * Write-only and hand-written: integers are printed exactly, strings go
 * through grt__textbuf_json_string (every control character escaped). */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpurt/report.h"
#include "report/textbuf.h"

typedef struct kv {
  char key[48];
  int64_t value;
} kv;

static int kv_cmp(const void *x, const void *y) { return strcmp(((const kv *)x)->key, ((const kv *)y)->key); }

static const char *const type_names[GRT_STAT_TYPES] = {"all", "small_pool", "large_pool"};

typedef struct array_stat {
  const char *name;
  size_t offset; /* of the grt_stat[GRT_STAT_TYPES] array in grt_alloc_stats */
} array_stat;

#define ARR(f) {#f, offsetof(grt_alloc_stats, f)}
static const array_stat array_stats[] = {
    ARR(allocation),  ARR(segment),      ARR(active),          ARR(inactive_split),       ARR(allocated_bytes),
    ARR(reserved_bytes), ARR(active_bytes), ARR(inactive_split_bytes), ARR(requested_bytes),
};
#undef ARR
#define N_ARRAY (sizeof array_stats / sizeof array_stats[0])
#define N_KEYS (N_ARRAY * GRT_STAT_TYPES * 4 + 2 * 4 + 6 + 5)

static void put_stat(kv *k, size_t *n, const char *prefix, const grt_stat *s) {
  static const char *const fields[4] = {"current", "peak", "allocated", "freed"};
  const int64_t vals[4] = {s->current, s->peak, s->allocated, s->freed};
  for (int f = 0; f < 4; f++) {
    snprintf(k[*n].key, sizeof k[*n].key, "%s.%s", prefix, fields[f]);
    k[(*n)++].value = vals[f];
  }
}

static void put(kv *k, size_t *n, const char *key, int64_t v) {
  snprintf(k[*n].key, sizeof k[*n].key, "%s", key);
  k[(*n)++].value = v;
}

grt_status grt_stats_json(const grt_alloc_stats *s, char **out) {
  if (!s || !out) return GRT_ERR_INVALID_ARG;
  *out = NULL;
  kv keys[N_KEYS];
  size_t n = 0;
  char prefix[40];
  for (size_t i = 0; i < N_ARRAY; i++) {
    const grt_stat *arr = (const grt_stat *)((const char *)s + array_stats[i].offset);
    for (int t = 0; t < GRT_STAT_TYPES; t++) {
      snprintf(prefix, sizeof prefix, "%s.%s", array_stats[i].name, type_names[t]);
      put_stat(keys, &n, prefix, &arr[t]);
    }
  }
  put_stat(keys, &n, "oversize_allocations", &s->oversize_allocations);
  put_stat(keys, &n, "oversize_segments", &s->oversize_segments);
  put(keys, &n, "num_alloc_retries", (int64_t)s->num_alloc_retries);
  put(keys, &n, "num_ooms", (int64_t)s->num_ooms);
  put(keys, &n, "num_sync_all_streams", (int64_t)s->num_sync_all_streams);
  put(keys, &n, "num_device_alloc", (int64_t)s->num_device_alloc);
  put(keys, &n, "num_device_free", (int64_t)s->num_device_free);
  put(keys, &n, "max_split_size", s->max_split_size);
  put(keys, &n, "cached_bytes", (int64_t)s->cached_bytes);
  put(keys, &n, "largest_free_block", (int64_t)s->largest_free_block);
  put(keys, &n, "num_cache_hits", (int64_t)s->num_cache_hits);
  put(keys, &n, "cross_stream_syncs", (int64_t)s->cross_stream_syncs);
  put(keys, &n, "pending_free_blocks", (int64_t)s->pending_free_blocks);
  qsort(keys, n, sizeof keys[0], kv_cmp); /* torch.cuda.memory_stats() sorts its keys */
  grt__textbuf tb = {0};
  grt__textbuf_puts(&tb, "{");
  for (size_t i = 0; i < n; i++)
    grt__textbuf_printf(&tb, "%s\n  \"%s\": %lld", i ? "," : "", keys[i].key, (long long)keys[i].value);
  grt__textbuf_puts(&tb, "\n}\n");
  return grt__textbuf_finish(&tb, out, NULL);
}

/* "frames": [...] of the block or segment at address. */
static grt_status write_frames(grt__textbuf *tb, const grt_snapshot_frames *fr, grt_devptr address, bool segment) {
  const grt_trace_frame *f = NULL;
  size_t n = 0;
  grt_status st = fr ? fr->frames_at(fr->ctx, address, segment, &f, &n) : GRT_OK;
  if (st) return st;
  grt__textbuf_puts(tb, "\"frames\": [");
  for (size_t i = 0; i < n; i++) {
    grt__textbuf_puts(tb, i ? ", {\"filename\": " : "{\"filename\": ");
    grt__textbuf_json_string(tb, f[i].filename ? f[i].filename : "");
    grt__textbuf_printf(tb, ", \"line\": %lld, \"name\": ", (long long)f[i].line);
    grt__textbuf_json_string(tb, f[i].name ? f[i].name : "");
    grt__textbuf_puts(tb, "}");
  }
  grt__textbuf_puts(tb, "]");
  return GRT_OK;
}

static grt_status write_block(grt__textbuf *tb, const grt_snapshot_block *b, const grt_snapshot_frames *fr) {
  grt__textbuf_printf(tb, "{\"address\": %llu, \"size\": %llu, \"requested_size\": %llu, \"state\": ",
                 (unsigned long long)b->address, (unsigned long long)b->size, (unsigned long long)b->requested_size);
  grt__textbuf_json_string(tb, grt_block_state_name(b->state));
  grt__textbuf_puts(tb, ", ");
  /* a cached free block has no allocation: PyTorch keeps the last one's frames, the model none */
  grt_status st = write_frames(tb, b->state == GRT_BLOCK_INACTIVE ? NULL : fr, b->address, false);
  grt__textbuf_puts(tb, "}");
  return st;
}

static grt_status write_segment(grt__textbuf *tb, const grt_snapshot_segment *s, int device,
                                const grt_snapshot_frames *fr) {
  grt__textbuf_printf(tb,
                 "{\"device\": %d, \"address\": %llu, \"total_size\": %llu, \"allocated_size\": %llu, "
                 "\"active_size\": %llu, \"requested_size\": %llu, \"stream\": %llu, \"segment_type\": \"%s\", "
                 "\"segment_pool_id\": [%llu, %llu], \"is_expandable\": %s, ",
                 device, (unsigned long long)s->address, (unsigned long long)s->total_size,
                 (unsigned long long)s->allocated_size, (unsigned long long)s->active_size,
                 (unsigned long long)s->requested_size, (unsigned long long)s->stream,
                 s->is_large ? "large" : "small", (unsigned long long)s->pool_id.first,
                 (unsigned long long)s->pool_id.second, s->is_expandable ? "true" : "false");
  grt_status st = write_frames(tb, fr, s->address, true);
  grt__textbuf_puts(tb, ", \"blocks\": [");
  for (size_t j = 0; j < s->n_blocks && !st; j++) {
    grt__textbuf_puts(tb, j ? ",\n      " : "\n      ");
    st = write_block(tb, &s->blocks[j], fr);
  }
  grt__textbuf_puts(tb, s->n_blocks ? "\n    ]}" : "]}");
  return st;
}

grt_status grt_snapshot_json(const grt_alloc_snapshot *snap, int device, char **out) {
  return grt_snapshot_json_frames(snap, device, NULL, out);
}

grt_status grt_snapshot_json_frames(const grt_alloc_snapshot *snap, int device, const grt_snapshot_frames *fr,
                                    char **out) {
  if (!snap || !out || device < 0 || device > 4096 || (snap->n_segments && !snap->segments) ||
      (fr && !fr->frames_at))
    return GRT_ERR_INVALID_ARG;
  *out = NULL;
  for (size_t i = 0; i < snap->n_segments; i++)
    if (snap->segments[i].n_blocks && !snap->segments[i].blocks) return GRT_ERR_INVALID_ARG;
  grt__textbuf tb = {0};
  grt_status st = GRT_OK;
  grt__textbuf_puts(&tb, "{\"segments\": [");
  for (size_t i = 0; i < snap->n_segments && !st; i++) {
    grt__textbuf_puts(&tb, i ? ",\n    " : "\n    ");
    st = write_segment(&tb, &snap->segments[i], device, fr);
  }
  grt__textbuf_puts(&tb, snap->n_segments ? "\n  ],\n  \"device_traces\": [" : "],\n  \"device_traces\": [");
  /* One (empty) trace list per device up to this one, as PyTorch indexes them by device. */
  for (int d = 0; d <= device; d++) grt__textbuf_puts(&tb, d ? ", []" : "[]");
  grt__textbuf_puts(&tb, "]}\n");
  if (st) {
    grt__textbuf_discard(&tb);
    return st;
  }
  return grt__textbuf_finish(&tb, out, NULL);
}
