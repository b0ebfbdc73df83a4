/* holes.h — a device's free ranges in address order, with first fit in
 * O(log n) (internal).
 *
 * The simulated device takes the front of the lowest-addressed hole that
 * fits; a sorted array made that a scan over every hole and each split or
 * merge a shift of every later one, so a device fragmented into 10^5 holes
 * cost 10^5 steps per call. This is a treap keyed by address whose nodes
 * also carry the largest hole size in their subtree: first fit walks one
 * path down, and every other query and edit is one path too. The shape
 * comes from a per-set generator, so runs are reproducible; the answers
 * never depend on it. Holes never overlap (the caller's invariant).
 * Not thread-safe: the owning device's lock guards it.
 */
#ifndef GRT_DEVICE_HOLES_H
#define GRT_DEVICE_HOLES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct grt__hole {
  uint64_t addr, size;
} grt__hole;

typedef struct grt__hole_node grt__hole_node;

typedef struct grt__holes {
  grt__hole_node *nodes; /* pool; index 0 is unused (the empty subtree) */
  uint32_t root, free_list; /* free nodes are linked through `left` */
  uint32_t used, cap, n_free; /* nodes [1, used) were handed out; n_free of them are free again */
  size_t count;
  uint64_t seed; /* priorities: shape only */
} grt__holes;

void grt__holes_init(grt__holes *h);
void grt__holes_free(grt__holes *h);
/* Room for n more holes: the next n inserts cannot fail. False (the set
 * unchanged) when host memory runs out. */
bool grt__holes_reserve(grt__holes *h, size_t n);
/* Adds [addr, addr + size); false when host memory runs out (set unchanged). */
bool grt__holes_insert(grt__holes *h, uint64_t addr, uint64_t size);
/* Removes the hole starting at addr (absent: nothing happens). */
void grt__holes_erase(grt__holes *h, uint64_t addr);
/* Replaces the hole starting at addr by [new_addr, new_addr + new_size),
 * which must keep its place in the order (it shrinks or grows in place). */
void grt__holes_update(grt__holes *h, uint64_t addr, uint64_t new_addr, uint64_t new_size);
/* The lowest-addressed hole of at least size bytes. */
bool grt__holes_first_fit(const grt__holes *h, uint64_t size, grt__hole *out);
/* The first hole ending above addr: the one containing addr, else the next. */
bool grt__holes_end_above(const grt__holes *h, uint64_t addr, grt__hole *out);
/* The last hole starting below addr. */
bool grt__holes_before(const grt__holes *h, uint64_t addr, grt__hole *out);
/* The largest hole's size (0 when none). */
uint64_t grt__holes_largest(const grt__holes *h);

#endif
