/* probe.h — questions the replayer asks the caching allocator without
 * changing it (internal). */
#ifndef GRT_ALLOC_PROBE_H
#define GRT_ALLOC_PROBE_H

#include <stdbool.h>

#include "gpurt/alloc.h"

/* Whether a malloc of size on stream would be served from the cache now, as
 * get_free_block would find it (pending stream events not processed). It
 * only looks; takes the allocator's lock. GRT_ERR_UNSUPPORTED for policies
 * other than caching. */
grt_status grt__alloc_cache_would_serve(grt_allocator *a, uint64_t size, grt_stream_id stream, bool *out);

/* What release_cached_blocks (empty_cache) would give back now, without
 * doing it: each free unsplit segment of a default or freeable pool, and the
 * whole pages inside free mapped blocks of expandable segments, with the
 * stream that made them; in address order. Takes the allocator's lock; fn
 * must not call the allocator. */
typedef void (*grt__range_fn)(void *ctx, grt_devptr addr, uint64_t size, grt_stream_id stream);
grt_status grt__alloc_releasable(grt_allocator *a, grt__range_fn fn, void *ctx);

#endif
