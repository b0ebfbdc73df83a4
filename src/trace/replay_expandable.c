/* replay_expandable.c — the starting state of a trace recorded with
 * expandable segments. PyTorch reserved one address range per (stream, pool)
 * and mapped pages before recording began (no segment_map events for them);
 * the final snapshot lists one segment per mapped range. With no map or unmap
 * event in the trace the mapped ranges at the start are the final ones. The
 * simulated device picks its own reservation addresses, so each recorded
 * reservation gets a translation: the replay keeps every offset inside it,
 * and scoring compares recorded addresses through it. The reservation's
 * recorded base is taken to be its lowest mapped range (mapping always takes
 * the lowest free pages). */
#include <stdlib.h>

#include "alloc/import_expandable.h"
#include "trace/replay_impl.h"

typedef struct group {
  grt_stream_id stream;
  bool is_large;
  grt_devptr base; /* lowest recorded mapped address */
} group;

static uint64_t reservation_size(const grt_replay *r, bool is_large) {
  uint64_t page = is_large ? GRT_LARGE_BUFFER : GRT_SMALL_BUFFER;
  uint64_t want = r->sum.capacity + r->sum.capacity / 8;
  return (want + page - 1) / page * page;
}

grt_status grt__replay_rebuild_expandable(grt_replay *r) {
  const grt_trace_info *in = &r->info;
  group *g = calloc(in->n_segments + 1, sizeof *g);
  size_t n = 0;
  if (!g) return GRT_ERR_NOMEM;
  for (size_t i = 0; i < in->n_segments; i++) {
    const grt_trace_segment *s = &in->segments[i];
    if (!s->is_expandable) continue;
    size_t j = 0;
    while (j < n && !(g[j].stream == s->stream && g[j].is_large == s->is_large)) j++;
    if (j == n) g[n++] = (group){s->stream, s->is_large, s->addr};
    if (s->addr < g[j].base) g[j].base = s->addr;
  }
  grt_status st = GRT_OK;
  r->xlate = calloc(n + 1, sizeof *r->xlate);
  if (!r->xlate) st = GRT_ERR_NOMEM;
  for (size_t i = 0; i < in->n_segments && !st; i++) {
    const grt_trace_segment *s = &in->segments[i];
    if (!s->is_expandable) continue;
    size_t j = 0;
    while (!(g[j].stream == s->stream && g[j].is_large == s->is_large)) j++;
    grt_devptr va;
    st = grt__alloc_import_expandable(r->alloc, s->stream, s->is_large, s->addr - g[j].base, s->total_size, &va);
    if (st) {
      grt__replay_set_error(r, "rebuilding the start: expandable range 0x%llx (+%llu): %s",
                            (unsigned long long)s->addr, (unsigned long long)s->total_size, grt_status_str(st));
      break;
    }
    size_t k = 0;
    while (k < r->n_xlate && r->xlate[k].recorded != g[j].base) k++;
    if (k == r->n_xlate) r->xlate[r->n_xlate++] = (grt__replay_xlate){va, g[j].base, reservation_size(r, s->is_large)};
  }
  /* a recorded reservation cannot run into the next recorded one */
  for (size_t i = 0; i < r->n_xlate; i++)
    for (size_t k = 0; k < r->n_xlate; k++) {
      grt__replay_xlate *x = &r->xlate[i];
      if (r->xlate[k].recorded > x->recorded && r->xlate[k].recorded - x->recorded < x->size)
        x->size = r->xlate[k].recorded - x->recorded;
    }
  free(g);
  return st;
}
