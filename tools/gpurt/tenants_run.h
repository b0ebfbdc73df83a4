/* tenants_run.h — what `gpurt demo tenants` and `gpurt tenants` share: one
 * multi-tenant run (gpurt/tenant.h) with its figures, its timeline written
 * when asked, and the configuration file format (tenants_config.c). */
#ifndef GRT_TOOLS_TENANTS_RUN_H
#define GRT_TOOLS_TENANTS_RUN_H

#include <stdio.h>

#include "gpurt/tenant.h"

typedef struct tenants_mix {
  grt_gpu_config gpu;
  grt_tenant_config t[GRT_TENANT_MAX];
  uint32_t n;
} tenants_mix;

typedef struct tenants_result {
  grt_tenant_stats t[GRT_TENANT_MAX];
  grt_gpu_stats gpu;
} tenants_result;

/* Runs the mix; with timeline non-NULL also writes its Chrome trace there.
 * 0, or 1 after "gpurt CMD: ..." on stderr. */
int tenants_run(const char *cmd, const tenants_mix *mix, const char *timeline, tenants_result *out);

/* Reads a mix from a text file (format in docs/TENANTS.md): 0, or 2 after a
 * message naming the file and line. */
int tenants_config_load(const char *cmd, const char *path, tenants_mix *mix);

/* Milliseconds, for tables. */
static inline double tenants_ms(uint64_t ns) { return (double)ns / 1e6; }

#endif
