/* main.c — `gpurt`: one command, subcommands in a table. */
#include <stdio.h>
#include <string.h>

#include "cli.h"

static const grt_cli_command commands[] = {
    {"demo", "teaching demos: `gpurt demo all`, `gpurt demo frag`, ...", grt_cmd_demo},
    {"bench", "allocator benchmarks W1, W2, Demo 1, threads for every allocator", grt_cmd_bench},
    {"stats", "replay a trace (or run a workload), print torch.cuda.memory_summary()-style stats", grt_cmd_stats},
    {"serve-demo", "pace a serving day while serving live /metrics", grt_cmd_serve_demo},
    {"replay", "replay a trace through an allocator: summary, series, fidelity, report, live /metrics",
     grt_cmd_replay},
    {"compare", "one table across allocator policies and traces", grt_cmd_compare},
};
#define N_COMMANDS (sizeof commands / sizeof commands[0])

int grt_cli_wants_help(int argc, char **argv) {
  for (int i = 1; i < argc; i++)
    if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) return 1;
  return 0;
}

static void usage(FILE *f) {
  fprintf(f,
          "gpurt — the GPU runtime layer (pools + DAG), modelled on the CPU\n\n"
          "usage: gpurt <command> [options]   (gpurt <command> --help for each)\n\ncommands:\n");
  for (size_t i = 0; i < N_COMMANDS; i++) fprintf(f, "  %-12s %s\n", commands[i].name, commands[i].summary);
}

int main(int argc, char **argv) {
  if (argc < 2) {
    usage(stderr);
    return 2;
  }
  if (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help") || !strcmp(argv[1], "help")) {
    usage(stdout);
    return 0;
  }
  for (size_t i = 0; i < N_COMMANDS; i++)
    if (!strcmp(argv[1], commands[i].name)) return commands[i].run(argc - 1, argv + 1);
  fprintf(stderr, "gpurt: unknown command '%s'\n\n", argv[1]);
  usage(stderr);
  return 2;
}
