/* cli.h — the gpurt command's subcommand table (tools/gpurt).
 * Each subcommand lives in its own cmd_*.c file and is listed in main.c. */
#ifndef GRT_TOOLS_CLI_H
#define GRT_TOOLS_CLI_H

#include <stdint.h>
#include <stdio.h>

#include "gpurt/doctor.h"

typedef struct grt_cli_command {
  const char *name;    /* "demo", "replay", ... */
  const char *summary; /* one line for `gpurt --help` */
  int (*run)(int argc, char **argv); /* argv[0] is the subcommand name */
} grt_cli_command;

int grt_cmd_demo(int argc, char **argv);
int grt_cmd_bench(int argc, char **argv);
int grt_cmd_stats(int argc, char **argv);
int grt_cmd_serve_demo(int argc, char **argv);
int grt_cmd_replay(int argc, char **argv);
int grt_cmd_compare(int argc, char **argv);
int grt_cmd_whatif(int argc, char **argv);
int grt_cmd_doctor(int argc, char **argv);
int grt_cmd_diff(int argc, char **argv);
int grt_cmd_report(int argc, char **argv);
int grt_cmd_load(int argc, char **argv);
int grt_cmd_tenants(int argc, char **argv);
int grt_cmd_plan(int argc, char **argv);
/* Writes a loaded snapshot's page to out (grt_doctor_page_save; `examined`
 * may be NULL), printing "report: OUT" on say. 0 or the exit status, after
 * a message naming cmd. */
int cli_report_save(const char *cmd, const grt_trace *t, const grt_doctor_report *examined, const char *snapshot,
                    int device, const char *out, FILE *say);

/* Demos (tools/gpurt/demo_*.c). */
int grt_demo_frag(int argc, char **argv);
int grt_demo_emptycache(int argc, char **argv);

/* Demos (demo_*.c), listed in cmd_demo.c; argv[0] is the demo's name. */
int grt_demo_streams(int argc, char **argv);
int grt_demo_staging(int argc, char **argv);
int grt_demo_graphs(int argc, char **argv);
int grt_demo_priority(int argc, char **argv);
int grt_demo_tenants(int argc, char **argv);

#endif
