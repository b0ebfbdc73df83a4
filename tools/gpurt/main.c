/* main.c — `gpurt`: one command, subcommands in a table; `gpurt help CMD`
 * and `gpurt version` beside them. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "cli_opts.h"

#ifndef GRT_VERSION_STRING
#error "GRT_VERSION_STRING comes from project(VERSION) in CMake (tools/CMakeLists.txt)"
#endif

static const grt_cli_command commands[] = {
    {"demo", "teaching demos: `gpurt demo all`, `gpurt demo frag`, ...", grt_cmd_demo},
    {"bench", "allocator benchmarks W1, W2, Demo 1, threads for every allocator", grt_cmd_bench},
    {"stats", "replay a trace (or run a workload), print torch.cuda.memory_summary()-style stats", grt_cmd_stats},
    {"serve-demo", "pace a serving day while serving live /metrics", grt_cmd_serve_demo},
    {"replay", "replay a trace through an allocator: summary, series, fidelity, report, live /metrics",
     grt_cmd_replay},
    {"compare", "one table across allocator policies and traces", grt_cmd_compare},
    {"doctor", "why a snapshot OOMed (demand or fragmentation) and the setting that fixes it", grt_cmd_doctor},
    {"diff", "two snapshots before and after a change: figures, sites, segments", grt_cmd_diff},
    {"whatif", "a snapshot replayed under every PYTORCH_CUDA_ALLOC_CONF worth trying", grt_cmd_whatif},
    {"report", "one self-contained HTML page of a snapshot: timeline, state at any event, doctor", grt_cmd_report},
    {"plan", "place a trace's buffers offline, every lifetime known: heap needed / peak live", grt_cmd_plan},
    {"load", "safetensors weights to the device: io_uring, O_DIRECT, pinned staging (and mmap, naive)",
     grt_cmd_load},
    {"tenants", "tenants sharing one GPU (time slicing, MPS, MIG): latency, refusals, interference",
     grt_cmd_tenants},
};
#define N_COMMANDS (sizeof commands / sizeof commands[0])

enum { OPT_VERSION = 256 };

static const struct option main_options[] = {
    {"version", no_argument, NULL, OPT_VERSION},
    CLI_OPT_HELP_ENTRY,
    {NULL, 0, NULL, 0},
};

static const struct option help_only[] = {
    CLI_OPT_HELP_ENTRY,
    {NULL, 0, NULL, 0},
};

static void usage(FILE *f) {
  fprintf(f,
          "gpurt — the GPU runtime layer (pools + DAG), modelled on the CPU\n\n"
          "usage: gpurt <command> [options]   (gpurt <command> --help for each)\n\ncommands:\n");
  for (size_t i = 0; i < N_COMMANDS; i++) fprintf(f, "  %-12s %s\n", commands[i].name, commands[i].summary);
  fprintf(f, "\n`gpurt help CMD` prints one command's options, `gpurt --version` the version.\n");
}

static int version(int argc, char **argv) {
  cli_opts p;
  cli_opts_init(&p, "version", argc, argv, help_only, false);
  if (p.help) {
    printf("usage: gpurt version   (or gpurt --version)\n\nPrints gpurt's version.\n");
    return 0;
  }
  int rc = cli_opts_expect_end(&p);
  if (!rc) printf("gpurt %s\n", GRT_VERSION_STRING);
  return rc;
}

static int help(int argc, char **argv);

/* argv[0] names the command. */
static int run_command(int argc, char **argv) {
  if (!strcmp(argv[0], "help")) return help(argc, argv);
  if (!strcmp(argv[0], "version")) return version(argc, argv);
  for (size_t i = 0; i < N_COMMANDS; i++)
    if (!strcmp(argv[0], commands[i].name)) return commands[i].run(argc, argv);
  const cli_opts top = {.cmd = NULL};
  return cli_opts_fail(&top, "unknown command '%s'", argv[0]);
}

/* `gpurt help CMD [SUB...]` runs `gpurt CMD [SUB...] --help`, so the two
 * print the same text by construction. */
static int help(int argc, char **argv) {
  cli_opts p;
  cli_opts_init(&p, "help", argc, argv, help_only, true);
  int c = p.help ? CLI_OPT_END : cli_opts_next(&p);
  if (c == CLI_OPT_ERROR) return 2;
  if (c == CLI_OPT_END) {
    usage(stdout);
    return 0;
  }
  int first = cli_opts_index(&p) - 1, n = argc - first;
  static char help_flag[] = "--help";
  char **args = malloc(((size_t)n + 2) * sizeof *args);
  if (!args) {
    fprintf(stderr, "gpurt help: out of memory\n");
    return 1;
  }
  memcpy(args, argv + first, (size_t)n * sizeof *args);
  args[n] = help_flag;
  args[n + 1] = NULL;
  int rc = run_command(n + 1, args);
  free(args);
  return rc;
}

int main(int argc, char **argv) {
  if (argc < 2) {
    usage(stderr);
    return 2;
  }
  cli_opts p;
  cli_opts_init(&p, NULL, argc, argv, main_options, true);
  if (p.help) {
    usage(stdout);
    return 0;
  }
  int c = cli_opts_next(&p);
  if (c == OPT_VERSION) {
    if (cli_opts_expect_end(&p)) return 2;
    printf("gpurt %s\n", GRT_VERSION_STRING);
    return 0;
  }
  if (c == CLI_OPT_ERROR) return 2;
  if (c == CLI_OPT_END) {
    usage(stderr);
    return 2;
  }
  int first = cli_opts_index(&p) - 1;
  return run_command(argc - first, argv + first);
}
