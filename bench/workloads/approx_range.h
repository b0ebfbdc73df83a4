/* approx_range.h — an approximate-fit offset allocator over [0, capacity)
 * (internal): the comparison point for the exact index of range_alloc.h.
 *
 * It follows the design of OffsetAllocator (Sebastian Aaltonen, 2023), the
 * fastest peer of the reference figures (docs/ALLOCATORS.md: W1 47.5 ns per pair), so
 * that the benchmarks can run that peer's algorithm in the same process as
 * ours and report a ratio that does not depend on the machine. 256 bins
 * spaced like a tiny float (5-bit exponent, 3-bit mantissa); a request is
 * rounded UP to a bin every member of which fits, and the first member of the
 * lowest non-empty such bin is taken: O(1), no search inside a bin, hence
 * approximate (a fitting range in the request's own bin is never seen).
 * Sizes and offsets are kept in units of `granule` bytes as 32-bit numbers, as
 * the peer does; requests are rounded up to the granule. Node storage is fixed
 * at creation (the peer's maxAllocs). Freeing merges with free neighbours.
 *
 * Not thread-safe: the owner serialises calls.
 */
#ifndef GRT_ALLOC_APPROX_RANGE_H
#define GRT_ALLOC_APPROX_RANGE_H

#include <stdint.h>

#include "gpurt/base.h"

typedef struct grt__approx grt__approx;

/* A range of `capacity` bytes, all free, in units of `granule` (a power of
 * two) with room for `max_nodes` (>= 2) ranges. GRT_ERR_INVALID_ARG when the
 * capacity is 0, not a multiple of the granule or over 2^32 - 1 granules, or
 * max_nodes is out of [2, 2^31]; GRT_ERR_NOMEM. */
grt_status grt__approx_create(uint64_t capacity, uint64_t granule, uint32_t max_nodes, grt__approx **out);
/* Frees the metadata. NULL is a no-op. */
void grt__approx_destroy(grt__approx *a);
/* Allocates `size` bytes (rounded up to the granule) at *offset; *handle (if
 * not NULL) names the block for grt__approx_free. GRT_ERR_SIZE for 0 or more
 * than the capacity; GRT_ERR_OOM when no bin guaranteed to fit has a range
 * (even if some smaller bin holds a range that would); GRT_ERR_NOMEM when
 * every node is in use. A failed call changes nothing. */
grt_status grt__approx_alloc(grt__approx *a, uint64_t size, uint64_t *offset, uint32_t *handle);
/* Frees the block `handle` names. GRT_ERR_DOUBLE_FREE when it names a free
 * range; GRT_ERR_UNKNOWN_POINTER when it names no range. */
grt_status grt__approx_free(grt__approx *a, uint32_t handle);
/* The exact size of the largest free range in bytes (0 when full). */
uint64_t grt__approx_largest_free(const grt__approx *a);
/* Total free bytes. */
uint64_t grt__approx_free_bytes(const grt__approx *a);
/* Structure walker for tests: the ranges tile [0, capacity) in address order,
 * no two free ranges are adjacent, every free range sits in the bin its size
 * rounds down to and nothing else does, the bitmaps mark exactly the non-empty
 * bins, the node stack holds exactly the unused nodes, the free total agrees.
 * GRT_OK or GRT_ERR_INTERNAL. */
grt_status grt__approx_check(const grt__approx *a);

#endif
