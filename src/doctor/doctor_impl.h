/* doctor_impl.h — the doctor's internal pieces (src/doctor). */
#ifndef GRT_DOCTOR_IMPL_H
#define GRT_DOCTOR_IMPL_H

#include "base/u64map.h"
#include "gpurt/trace.h"

/* A block live when recording began: no alloc event in the trace made it.
 * Its stack is the final snapshot's block's (still live at the end) or its
 * free event's (PyTorch records a free with the allocation's context unless
 * free stacks were recorded too). */
typedef struct grt__start_block {
  uint64_t size;  /* requested bytes */
  uint32_t stack;
} grt__start_block;

typedef struct grt__start_blocks {
  grt__u64map at;         /* recorded address -> index in v + 1, while live */
  grt__start_block *v;
  size_t n;
} grt__start_blocks;

/* The blocks live at the start of a loaded trace (start_blocks.c). */
grt_status grt__start_blocks_collect(const grt_trace_info *in, grt__start_blocks *out);
void grt__start_blocks_free(grt__start_blocks *s);

#endif
