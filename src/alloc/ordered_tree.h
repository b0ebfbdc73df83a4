/* ordered_tree.h — an ordered set of (size, address) keys as a balanced tree (internal).
 *
 * The same operations and semantics as grt__bins (bins.h) under the prefix
 * grt__otree_: the smallest entry >= a key, strict successor/predecessor,
 * minimum, maximum, duplicates refused. O(log n) per operation (a treap).
 * It is the baseline the fast index is benchmarked against, the reference the
 * differential tests compare it with, and the container bins.c falls back to
 * inside one size class holding many blocks.
 * Not thread-safe: the owner's lock guards it.
 */
#ifndef GRT_ALLOC_ORDERED_TREE_H
#define GRT_ALLOC_ORDERED_TREE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "alloc/bins.h" /* grt__bin_entry */

typedef struct grt__otree grt__otree;

grt_status grt__otree_create(grt__otree **out);
void grt__otree_destroy(grt__otree *t);
/* GRT_ERR_INVALID_ARG when (size, addr) is already present; GRT_ERR_NOMEM. */
grt_status grt__otree_insert(grt__otree *t, uint64_t size, uint64_t addr, void *value);
/* Returns false when (size, addr) is absent. */
bool grt__otree_erase(grt__otree *t, uint64_t size, uint64_t addr);
/* Smallest entry >= (size, addr). */
bool grt__otree_lower_bound(const grt__otree *t, uint64_t size, uint64_t addr, grt__bin_entry *out);
/* Entry strictly after / before (size, addr) (which need not be present). */
bool grt__otree_next(const grt__otree *t, uint64_t size, uint64_t addr, grt__bin_entry *out);
bool grt__otree_prev(const grt__otree *t, uint64_t size, uint64_t addr, grt__bin_entry *out);
bool grt__otree_first(const grt__otree *t, grt__bin_entry *out);
bool grt__otree_last(const grt__otree *t, grt__bin_entry *out);
size_t grt__otree_count(const grt__otree *t);
/* Pools nodes until n are spare, so that the next n inserts cannot fail for
 * lack of memory (callers that must not fail halfway reserve first). GRT_ERR_NOMEM
 * leaves the nodes pooled so far. */
grt_status grt__otree_reserve(grt__otree *t, size_t n);
/* Nodes pooled (the next that many inserts need no memory). */
size_t grt__otree_spare(const grt__otree *t);
/* Moves up to n pooled nodes from src's pool to dst's (no memory is allocated);
 * returns how many moved. A caller keeping one tree as a store of nodes for
 * many (bins.c) lends them where an insert is about to need one. */
size_t grt__otree_lend(grt__otree *dst, grt__otree *src, size_t n);

#endif
