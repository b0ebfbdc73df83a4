/* import_expandable.h — rebuilding a recorded expandable-segments state
 * (internal; the replayer in src/trace calls it). The public import calls in
 * alloc.h cover ordinary segments; an expandable segment is a reservation
 * with mapped ranges, which PyTorch snapshots report one segment per mapped
 * range, and whose address the simulated device chooses itself. */
#ifndef GRT_ALLOC_IMPORT_EXPANDABLE_H
#define GRT_ALLOC_IMPORT_EXPANDABLE_H

#include <stdbool.h>

#include "gpurt/alloc.h"

/* "caching" with expandable_segments only (else GRT_ERR_UNSUPPORTED): maps
 * [offset, offset + size) of the (stream, pool) reservation, creating the
 * reservation (sized as the malloc path sizes it) on first use, as one free
 * block; *va gets the reservation's base address. offset and size must be
 * multiples of the pool's page (2 MiB small, 20 MiB large) and the range
 * wholly unmapped (GRT_ERR_INVALID_ARG). Counts as reserved memory, not as
 * device mallocs of the replay. Takes the allocator's lock. */
grt_status grt__alloc_import_expandable(grt_allocator *a, grt_stream_id stream, int is_large, uint64_t offset,
                                        uint64_t size, grt_devptr *va);

/* The (stream, pool) reservation's base address into *va. When there is
 * none: with create, reserves it with nothing mapped (the malloc path would
 * reserve it at its first map; reserving earlier changes no decision, and
 * tells the replayer where the model's pages will be); else
 * GRT_ERR_NOT_FOUND. */
grt_status grt__alloc_expandable_reservation(grt_allocator *a, grt_stream_id stream, int is_large, bool create,
                                             grt_devptr *va);

#endif
