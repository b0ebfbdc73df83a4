/* steady.c — the loop a trace repeats (grt_doctor_steady), so that the
 * runtime contract can tell warm-up from steady state.
 *
 * An iteration of a training or serving loop allocates from the same code
 * each time, though not always the same sizes (sequence lengths drift), and
 * not always from Python (the backward pass allocates from C++ threads, with
 * no Python frames). So an allocation's token is its stack where the trace
 * records frames (allocations without frames share token 0, which never
 * anchors), else its size.
 *
 * A candidate anchor is a token seen at least twice whose occurrences span
 * at least half the allocations; its windows are the allocations from one
 * occurrence to the next (plus, when the trace runs on that far, one more
 * window of the last one's length). It scores the mean multiset Jaccard
 * similarity of consecutive windows. Candidates are tried fewest
 * occurrences first (the outer loop before the loop over layers inside it),
 * earliest first within a count; the first that scores at least
 * STEADY_MIN_SIMILARITY, over iterations of two allocations or more, is the
 * loop. */
#include <stdlib.h>
#include <string.h>

#include "base/u64map.h"
#include "doctor/doctor_impl.h"

#define STEADY_MIN_SIMILARITY 0.8
#define STEADY_MIN_PERIOD 2  /* allocations per iteration: one site recurring alone is no loop */
#define STEADY_PER_COUNT 4   /* anchors tried per occurrence count */
#define STEADY_MAX_TRIES 64  /* anchors tried in all: each costs a pass over the allocations */

typedef struct tokens {
  uint32_t *tok;       /* per allocation */
  uint64_t *event;     /* per allocation: its event index */
  uint64_t *size_of;   /* size tokens: token -> size */
  size_t n, n_tok;
  uint64_t *count, *first, *last; /* per token */
} tokens;

static void tokens_free(tokens *t) {
  free(t->tok);
  free(t->event);
  free(t->size_of);
  free(t->count);
  free(t->first);
  free(t->last);
}

/* Sizes numbered densely from 1, in order of first appearance. */
static grt_status size_tokens(const grt_trace_info *in, tokens *t) {
  grt__u64map ids;
  grt__u64map_init(&ids);
  grt_status st = (t->size_of = malloc((t->n + 1) * sizeof *t->size_of)) ? GRT_OK : GRT_ERR_NOMEM;
  t->n_tok = 1;
  for (size_t j = 0; j < t->n && !st; j++) {
    uint64_t size = in->events[t->event[j]].size;
    void *v = grt__u64map_get(&ids, size);
    if (!v) {
      v = (void *)(uintptr_t)t->n_tok;
      t->size_of[t->n_tok++] = size;
      if (!grt__u64map_put(&ids, size, v)) st = GRT_ERR_NOMEM;
    }
    t->tok[j] = (uint32_t)(uintptr_t)v;
  }
  grt__u64map_free(&ids);
  return st;
}

static grt_status tokens_of(const grt_trace_info *in, tokens *t) {
  size_t n = in->count[GRT_TRACE_ALLOC];
  t->tok = malloc((n + 1) * sizeof *t->tok);
  t->event = malloc((n + 1) * sizeof *t->event);
  if (!t->tok || !t->event) return GRT_ERR_NOMEM;
  for (size_t i = 0; i < in->n_events; i++)
    if (in->events[i].kind == GRT_TRACE_ALLOC && t->n < n) t->event[t->n++] = i;
  grt_status st = GRT_OK;
  if (in->event_stack && in->n_stacks) {
    for (size_t j = 0; j < t->n; j++) t->tok[j] = in->event_stack[t->event[j]];
    t->n_tok = in->n_stacks + 1;
  } else {
    st = size_tokens(in, t);
  }
  if (st) return st;
  t->count = calloc(t->n_tok, sizeof *t->count);
  t->first = malloc(t->n_tok * sizeof *t->first);
  t->last = malloc(t->n_tok * sizeof *t->last);
  if (!t->count || !t->first || !t->last) return GRT_ERR_NOMEM;
  for (size_t j = t->n; j-- > 0;) t->first[t->tok[j]] = j;
  for (size_t j = 0; j < t->n; j++) t->count[t->tok[j]]++, t->last[t->tok[j]] = j;
  return GRT_OK;
}

/* The mean similarity of consecutive windows of anchor a; *period: their
 * mean length. prev and cur are zeroed count arrays of n_tok entries, and
 * are left zeroed. Returns -1 when there are fewer than two windows. */
static double score(const tokens *t, uint32_t a, uint32_t *prev, uint32_t *cur, uint64_t *period) {
  size_t start = t->first[a], end, k = 0, plen = 0;
  double sum = 0;
  *period = t->count[a] > 1 ? (t->last[a] - t->first[a]) / (t->count[a] - 1) : 0;
  bool tail = false;
  for (size_t s = start; s < t->n && !tail; s = end) {
    end = s + 1;
    while (end < t->n && t->tok[end] != a) end++;
    if (end == t->n) { /* the tail: one more window of the last length, if the trace has it */
      if (!plen || t->n - s < plen) break;
      end = s + plen;
      tail = true;
    }
    size_t inter = 0;
    for (size_t j = s; j < end; j++)
      if (++cur[t->tok[j]] <= prev[t->tok[j]]) inter++;
    if (plen) sum += (double)inter / (double)(plen + (end - s) - inter), k++;
    for (size_t j = s - plen; j < s; j++) prev[t->tok[j]] = 0;
    uint32_t *x = prev;
    prev = cur, cur = x;
    plen = end - s;
  }
  for (size_t j = start; j < t->n; j++) prev[t->tok[j]] = cur[t->tok[j]] = 0;
  return k ? sum / (double)k : -1;
}

/* Candidates sort fewest occurrences first, then earliest (qsort takes no context: the key carries both). */
typedef struct anchor_key {
  uint64_t count, first;
  uint32_t tok;
} anchor_key;

static int cmp_key(const void *x, const void *y) {
  const anchor_key *a = x, *b = y;
  if (a->count != b->count) return a->count < b->count ? -1 : 1;
  return a->first < b->first ? -1 : a->first > b->first;
}

static grt_status candidates(const tokens *t, anchor_key **out, size_t *n_out) {
  anchor_key *k = malloc(t->n_tok * sizeof *k);
  if (!k) return GRT_ERR_NOMEM;
  size_t n = 0;
  for (uint32_t a = 1; a < t->n_tok; a++)
    if (t->count[a] >= 2 && 2 * (t->last[a] - t->first[a]) >= t->n)
      k[n++] = (anchor_key){t->count[a], t->first[a], a};
  qsort(k, n, sizeof *k, cmp_key);
  *out = k;
  *n_out = n;
  return GRT_OK;
}

static void choose(const tokens *t, const anchor_key *k, size_t n, uint32_t *prev, uint32_t *cur,
                   grt_doctor_steady *out) {
  size_t tries = 0, in_count = 0;
  for (size_t i = 0; i < n && tries < STEADY_MAX_TRIES; i++) {
    in_count = i && k[i].count == k[i - 1].count ? in_count + 1 : 0;
    if (in_count >= STEADY_PER_COUNT) continue;
    tries++;
    uint64_t period;
    double s = score(t, k[i].tok, prev, cur, &period);
    if (s < STEADY_MIN_SIMILARITY || period < STEADY_MIN_PERIOD) continue;
    uint32_t a = k[i].tok;
    size_t second = t->first[a] + 1;
    while (t->tok[second] != a) second++;
    *out = (grt_doctor_steady){.found = true, .iterations = t->count[a], .from_event = t->event[second],
                               .period = period, .similarity = s};
    if (t->size_of) out->anchor_size = t->size_of[a];
    else out->anchor_stack = a;
    return;
  }
}

grt_status grt__doctor_steady_find(const grt_trace_info *in, grt_doctor_steady *out) {
  memset(out, 0, sizeof *out);
  tokens t = {0};
  anchor_key *k = NULL;
  size_t n = 0;
  uint32_t *prev = NULL, *cur = NULL;
  grt_status st = tokens_of(in, &t);
  if (!st) st = candidates(&t, &k, &n);
  if (!st && n) {
    prev = calloc(t.n_tok, sizeof *prev);
    cur = calloc(t.n_tok, sizeof *cur);
    if (!prev || !cur) st = GRT_ERR_NOMEM;
  }
  if (!st && n) choose(&t, k, n, prev, cur, out);
  free(prev);
  free(cur);
  free(k);
  tokens_free(&t);
  return st;
}
