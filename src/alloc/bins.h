/* bins.h — an ordered set of free ranges keyed (size, address) (internal).
 *
 * The caching allocator keeps one per (pool, stream); the best-fit search is
 * lower_bound(size): the smallest size >= the request, ties to the lowest
 * address — PyTorch's std::set<Block*> order within one stream. Iteration
 * (next/prev) walks the same order, as release_cached_blocks does.
 *
 * Implementation: bins.c, a size-class index (two-level bitmap over TLSF-style
 * classes, a short sorted array per class): lower_bound, insert and erase cost
 * O(1) bit scans plus a search inside one small class; next/prev/first/last
 * likewise. It returns exactly the entries the ordered tree (ordered_tree.h,
 * grt__otree_*) returns for every call; tests/test_bins_index.c checks it on
 * millions of random operations. Entry storage is pooled (no malloc in steady
 * state); metadata never lives in the managed ranges.
 * Not thread-safe: the owning allocator's lock guards it.
 */
#ifndef GRT_ALLOC_BINS_H
#define GRT_ALLOC_BINS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gpurt/base.h"

typedef struct grt__bins grt__bins;

typedef struct grt__bin_entry {
  uint64_t size;
  uint64_t addr;
  void *value;
} grt__bin_entry;

grt_status grt__bins_create(grt__bins **out);
void grt__bins_destroy(grt__bins *b);
/* GRT_ERR_INVALID_ARG when (size, addr) is already present; GRT_ERR_NOMEM. */
grt_status grt__bins_insert(grt__bins *b, uint64_t size, uint64_t addr, void *value);
/* Room for the next n inserts, whatever their keys: they cannot fail for
 * lack of memory (erases in between do not take the room away). GRT_ERR_NOMEM
 * when host memory runs out (the set is unchanged; some room may be kept). */
grt_status grt__bins_reserve(grt__bins *b, size_t n);
/* Returns false when (size, addr) is absent. */
bool grt__bins_erase(grt__bins *b, uint64_t size, uint64_t addr);
/* Smallest entry >= (size, addr). */
bool grt__bins_lower_bound(const grt__bins *b, uint64_t size, uint64_t addr, grt__bin_entry *out);
/* Entry strictly after / before (size, addr) (which need not be present). */
bool grt__bins_next(const grt__bins *b, uint64_t size, uint64_t addr, grt__bin_entry *out);
bool grt__bins_prev(const grt__bins *b, uint64_t size, uint64_t addr, grt__bin_entry *out);
bool grt__bins_first(const grt__bins *b, grt__bin_entry *out);
bool grt__bins_last(const grt__bins *b, grt__bin_entry *out);
size_t grt__bins_count(const grt__bins *b);

#endif
