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

#endif
