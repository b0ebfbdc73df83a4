/* caching_streams.c — a pool's table of per-stream bins.
 *
 * PyTorch keeps one std::set of free blocks per pool, ordered by (stream,
 * size, address); gpurt keeps one bins set per (pool, stream) and the pool's
 * streams in ascending order, which walks the same blocks in the same order.
 * A walk over every cached block (release_cached_blocks on each OOM, garbage
 * collection, the largest-free-block figure) must not cost one step per
 * stream ever seen: with 50,000 streams and one cached block, every OOM
 * visited 50,000 empty sets. So the table also keeps a bitmap of the streams
 * whose set may hold blocks: a bit is set by the insert that makes a set
 * non-empty and cleared by a walk that finds the set empty (erases do not
 * track it), and walks visit set bits only, in stream order.
 */
#include <stdlib.h>
#include <string.h>

#include "alloc/caching.h"

/* Index of stream in p->streams (its sorted position when absent). */
static size_t stream_pos(const cpool *p, grt_stream_id stream) {
  size_t lo = 0, hi = p->n_streams;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (p->streams[mid] < stream)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo;
}

/* Room for one more stream in each array (a larger capacity alone is harmless). */
static bool table_room(cpool *p) {
  if (p->n_streams < p->cap_streams) return true;
  size_t cap = p->cap_streams ? p->cap_streams * 2 : 4;
  grt_stream_id *s = realloc(p->streams, cap * sizeof *s);
  if (!s) return false;
  p->streams = s;
  grt__bins **b = realloc(p->stream_bins, cap * sizeof *b);
  if (!b) return false;
  p->stream_bins = b;
  size_t words = (cap + 63) / 64, old = (p->cap_streams + 63) / 64;
  uint64_t *w = realloc(p->occupied, words * sizeof *w);
  if (!w) return false;
  memset(w + old, 0, (words - old) * sizeof *w);
  p->occupied = w;
  p->cap_streams = cap;
  return true;
}

static bool bit_at(const uint64_t *w, size_t i) { return w[i >> 6] >> (i & 63) & 1; }
static void set_bit(uint64_t *w, size_t i, bool on) {
  if (on)
    w[i >> 6] |= 1ULL << (i & 63);
  else
    w[i >> 6] &= ~(1ULL << (i & 63));
}

/* Opens slot i in the sorted arrays and the bitmap (n_streams < cap). */
static void open_slot(cpool *p, size_t i) {
  size_t n = p->n_streams;
  memmove(p->streams + i + 1, p->streams + i, (n - i) * sizeof *p->streams);
  memmove(p->stream_bins + i + 1, p->stream_bins + i, (n - i) * sizeof *p->stream_bins);
  /* bits i..n-1 move up one: the word holding i keeps its low bits, whole words carry */
  uint64_t *w = p->occupied;
  size_t first = i >> 6, last = n >> 6;
  for (size_t k = last; k > first; k--) w[k] = w[k] << 1 | w[k - 1] >> 63;
  uint64_t low = (1ULL << (i & 63)) - 1;
  w[first] = (w[first] & low) | ((w[first] & ~low) << 1);
}

grt__bins *grt__pool_bins_lookup(cpool *p, grt_stream_id stream, int create) {
  grt__bins *b = grt__u64map_get(&p->bins, stream);
  if (b) p->last_bins = b, p->last_stream = stream;
  if (b || !create) return b;
  if (!table_room(p) || grt__bins_create(&b)) return NULL;
  if (!grt__u64map_put(&p->bins, stream, b)) {
    grt__bins_destroy(b);
    return NULL;
  }
  size_t i = stream_pos(p, stream);
  open_slot(p, i);
  p->streams[i] = stream;
  p->stream_bins[i] = b;
  p->n_streams++;
  p->last_bins = b;
  p->last_stream = stream;
  return b;
}

void grt__pool_mark_occupied(cpool *p, grt_stream_id stream) {
  size_t i = stream_pos(p, stream);
  if (i < p->n_streams && p->streams[i] == stream) set_bit(p->occupied, i, true);
}

size_t grt__pool_next_occupied(const cpool *p, size_t i) {
  size_t words = (p->n_streams + 63) / 64;
  for (size_t w = i >> 6; w < words; w++) {
    uint64_t m = p->occupied[w] & (w == i >> 6 ? ~0ULL << (i & 63) : ~0ULL);
    if (m) {
      size_t at = w << 6 | (size_t)__builtin_ctzll(m);
      return at < p->n_streams ? at : p->n_streams;
    }
  }
  return p->n_streams;
}

void grt__pool_settle(cpool *p, size_t i) {
  if (!grt__bins_count(p->stream_bins[i])) set_bit(p->occupied, i, false);
}

bool grt__pool_marks_hold(const cpool *p) {
  for (size_t i = 0; i < p->n_streams; i++)
    if (grt__bins_count(p->stream_bins[i]) && !bit_at(p->occupied, i)) return false;
  return true;
}

grt_status grt__cpool_init(cpool *p, int stat_type, cprivate *owner) {
  memset(p, 0, sizeof *p);
  p->stat_type = stat_type;
  p->owner = owner;
  grt__u64map_init(&p->bins);
  return grt__bins_create(&p->unmapped);
}

void grt__cpool_free(cpool *p) {
  for (size_t i = 0; i < p->n_streams; i++) grt__bins_destroy(p->stream_bins[i]);
  grt__u64map_free(&p->bins);
  grt__bins_destroy(p->unmapped);
  free(p->streams);
  free(p->stream_bins);
  free(p->occupied);
}
