/* gpurt/policy.h — the calls specific to one comparison policy.
 *
 * The comparison policies next to PyTorch's "caching" allocator (named in
 * gpurt/alloc.h; design and measured trade-offs in docs/ALLOCATORS.md):
 *   "bump"   arenas with a bump pointer; memory is reused only when an arena's
 *            live count drops to 0 (per-phase reset) or on grt_alloc_bump_reset.
 *   "buddy"  power-of-two blocks (512 B up to the segment size), split on
 *            demand, coalesced with their buddy on free.
 *   "slab"   fixed-size pages; a request above one page gets a virtual handle
 *            and a block table of pages (paged KV cache): no external
 *            fragmentation, no contiguity.
 *   "async"  a cudaMallocAsync-like pool: best fit, split/merge, release
 *            threshold applied at sync points (grt_alloc_empty_cache is one).
 * Their settings go through grt_alloc_set / grt_alloc_get (gpurt/alloc.h).
 * Each call below returns GRT_ERR_UNSUPPORTED (nothing changes) on an
 * allocator of another policy, and holds the allocator's mutex like every
 * other call.
 */
#ifndef GPURT_POLICY_H
#define GPURT_POLICY_H

#include "gpurt/alloc.h"

#ifdef __cplusplus
extern "C" {
#endif

/* bump: ends a phase. Every live allocation becomes invalid at once (counted
 * as freed) and every arena rewinds to its start; arenas stay reserved. */
GRT_API GRT_MUST_CHECK grt_status grt_alloc_bump_reset(grt_allocator *a);

/* slab: the block table of the allocation at handle: writes the device
 * address of its pages, in order, into pages[0 .. min(cap, n) - 1] and the
 * page count into *n_pages (pages may be NULL when cap is 0). A one-page
 * allocation's handle is its page; a larger one's handle is a virtual address
 * that must not be dereferenced. Bad handles fail as grt_alloc_free does. */
GRT_API GRT_MUST_CHECK grt_status grt_alloc_slab_pages(grt_allocator *a, grt_devptr handle, grt_devptr *pages,
                                                       size_t cap,
                                                       size_t *n_pages);

/* async: cudaMemPoolTrimTo: releases whole free segments until reserved bytes
 * are at most bytes or nothing more can be released. */
GRT_API GRT_MUST_CHECK grt_status grt_alloc_async_trim_to(grt_allocator *a, uint64_t bytes);

#ifdef __cplusplus
}
#endif
#endif /* GPURT_POLICY_H */
