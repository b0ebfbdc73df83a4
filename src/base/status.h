/* status.h — combining the statuses of a teardown (internal).
 *
 * A teardown runs every step even after one fails (each releases something
 * of its own) and reports the first failure, so nothing leaks and no status
 * is dropped. */
#ifndef GRT_BASE_STATUS_H
#define GRT_BASE_STATUS_H

#include "gpurt/base.h"

/* Keeps st in *first unless *first already holds a failure. */
static inline void grt__keep_first(grt_status *first, grt_status st) {
  if (st && !*first) *first = st;
}

#endif
