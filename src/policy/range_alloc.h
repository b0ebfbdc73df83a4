/* range_alloc.h — an offset allocator over one range [0, capacity) (internal).
 *
 * Exact best fit: an allocation takes the smallest free range whose size is
 * >= the request, ties to the lowest offset (PyTorch's choice), and splits it
 * at the front (the block keeps the range's offset, the tail stays free).
 * Freeing merges the block with free neighbours at once, so no two free ranges
 * are ever adjacent. The free-range index is chosen by grt__index_kind:
 * GRT__INDEX_BINS is a size-class index private to range_alloc.c (bins.h's
 * idea, but intrusive in the block nodes), GRT__INDEX_OTREE the ordered tree
 * (ordered_tree.h); both give identical results, they differ only in speed
 * (a size class of the first holding many ranges moves into a tree of its
 * own, so no step degrades to a long scan). All metadata lives in host
 * memory outside the range (offsets only, nothing is touched). Freeing by
 * handle costs no lookup; freeing by offset goes through a hash map that is
 * built on the first such call (callers that only use handles never pay it).
 *
 * Not thread-safe: the owner serialises calls.
 */
#ifndef GRT_ALLOC_RANGE_ALLOC_H
#define GRT_ALLOC_RANGE_ALLOC_H

#include <stdint.h>

#include "gpurt/base.h"

typedef enum grt__index_kind {
  GRT__INDEX_BINS = 0,  /* size-class index, exact best fit at O(1)-class cost */
  GRT__INDEX_OTREE = 1, /* balanced ordered tree, O(log n) (PyTorch's std::set approach) */
  GRT__INDEX_KIND_COUNT
} grt__index_kind;

typedef struct grt__range grt__range;

/* A range of `capacity` bytes (> 0), all free. GRT_ERR_INVALID_ARG for a zero
 * capacity or an unknown kind; GRT_ERR_NOMEM. */
grt_status grt__range_create(uint64_t capacity, grt__index_kind kind, grt__range **out);
/* Frees the metadata; live blocks simply vanish. NULL is a no-op. */
void grt__range_destroy(grt__range *r);
/* Allocates `size` bytes (exactly; callers round) at *offset. GRT_ERR_SIZE for
 * 0 or more than the capacity; GRT_ERR_OOM when no free range is big enough;
 * GRT_ERR_NOMEM when host memory runs out. A failed call changes nothing. */
grt_status grt__range_alloc(grt__range *r, uint64_t size, uint64_t *offset);
/* As grt__range_alloc, and also returns the block's handle in *handle (when
 * not NULL): a small integer valid until the block is freed, which
 * grt__range_free_handle takes instead of the offset (as OffsetAllocator and
 * VMA free by allocation handle). */
grt_status grt__range_alloc_handle(grt__range *r, uint64_t size, uint64_t *offset, uint32_t *handle);
/* Frees the block at `offset`. GRT_ERR_DOUBLE_FREE when a free range starts
 * there; GRT_ERR_UNKNOWN_POINTER for any other offset that starts no block;
 * GRT_ERR_NOMEM (nothing changed). */
grt_status grt__range_free(grt__range *r, uint64_t offset);
/* Frees the block whose handle grt__range_alloc_handle returned: no lookup.
 * GRT_ERR_DOUBLE_FREE when the handle names a free range; GRT_ERR_UNKNOWN_POINTER
 * when it names no block. A handle kept past its block's free may name a later
 * block (handles are reused); never fails otherwise. */
grt_status grt__range_free_handle(grt__range *r, uint32_t handle);
/* Size of the largest free range (0 when full). */
uint64_t grt__range_largest_free(const grt__range *r);
/* Total free bytes. */
uint64_t grt__range_free_bytes(const grt__range *r);
/* Number of free ranges. */
uint64_t grt__range_free_count(const grt__range *r);
/* Size classes of the GRT__INDEX_BINS kind held in a tree because they grew
 * long (0 for the other kind): for tests and diagnostics. */
uint32_t grt__range_long_classes(const grt__range *r);
/* Structure walker for tests: the blocks tile [0, capacity) in address order,
 * no two free ranges are adjacent, every free range is in the index under its
 * (size, offset) and nothing else is, every block is found by its offset, and
 * the counters agree. GRT_OK or GRT_ERR_INTERNAL. O(n log n). */
grt_status grt__range_check(const grt__range *r);

#endif
