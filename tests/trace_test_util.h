/* trace_test_util.h — helpers shared by the tests/test_trace_*.c executables. */
#ifndef GRT_TESTS_TRACE_TEST_UTIL_H
#define GRT_TESTS_TRACE_TEST_UTIL_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpurt/trace.h"

/* Path of a file in tests/data (static buffer: use before the next call). */
static inline const char *tt_data(const char *name) {
  static char buf[1024];
  snprintf(buf, sizeof buf, "%s/%s", GRT_TEST_DATA_DIR, name);
  return buf;
}

/* Path under $GRT_SHARED_DIR, or NULL when the shared data is absent. */
static inline const char *tt_shared(const char *rel) {
  static char buf[1024];
  const char *dir = getenv("GRT_SHARED_DIR");
  if (!dir || !*dir) return NULL;
  snprintf(buf, sizeof buf, "%s/%s", dir, rel);
  FILE *f = fopen(buf, "rb");
  if (!f) return NULL;
  fclose(f);
  return buf;
}

static inline grt_trace *tt_load(const char *path, grt_trace_format fmt, grt_trace_error *err,
                                 grt_status *st) {
  grt_trace_load_config cfg;
  grt_trace *t = NULL;
  grt_trace_load_config_default(&cfg);
  cfg.format = fmt;
  *st = grt_trace_load(path, &cfg, &t, err);
  return t;
}

static inline grt_trace *tt_load_str(const char *text, grt_trace_format fmt, grt_trace_error *err,
                                     grt_status *st) {
  grt_trace_load_config cfg;
  grt_trace *t = NULL;
  grt_trace_load_config_default(&cfg);
  cfg.format = fmt;
  *st = grt_trace_load_buffer(text, strlen(text), "mem", &cfg, &t, err);
  return t;
}

#endif
