/* status.h — combining and deliberately dropping statuses (internal).
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

/* Drops a status on purpose; the call site's comment says why. (GCC does
 * not accept a cast to void for a function marked warn_unused_result.) */
static inline void grt__ignore(grt_status st) { (void)st; }

#endif
