/* status.c — grt_status_str / grt_status_name, generated from GRT_STATUS_LIST. */
#include "gpurt/base.h"

#include <stdio.h>

const char *grt_status_str(grt_status st) {
  switch (st) {
#define GRT__CASE(name, value, msg) \
  case name:                        \
    return msg;
    GRT_STATUS_LIST(GRT__CASE)
#undef GRT__CASE
  }
  return "unknown status code";
}

const char *grt_status_name(grt_status st) {
  switch (st) {
#define GRT__CASE(name, value, msg) \
  case name:                        \
    return #name;
    GRT_STATUS_LIST(GRT__CASE)
#undef GRT__CASE
  }
  return "GRT_STATUS_UNKNOWN";
}

char *grt_format_bytes(uint64_t bytes, char *buf, size_t buf_size) {
  static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
  double v = (double)bytes;
  size_t u = 0;
  if (!buf || buf_size == 0) return buf;
  while (v >= 1024.0 && u + 1 < sizeof units / sizeof units[0]) {
    v /= 1024.0;
    u++;
  }
  if (u == 0)
    snprintf(buf, buf_size, "%llu B", (unsigned long long)bytes);
  else
    snprintf(buf, buf_size, "%.2f %s", v, units[u]);
  return buf;
}
