/* cmd_demo.c — `gpurt demo NAME`: dispatches to the teaching demos (demo_*.c). */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "cli_opts.h"

typedef struct demo {
  const char *name;
  const char *summary;
  int (*run)(int argc, char **argv);
} demo;

static const demo demos[] = {
    {"frag", "fragmentation: first-fit layouts, cache vs driver, utilization table", grt_demo_frag},
    {"emptycache", "empty_cache() every step: the reserved sawtooth, PyTorch vs idle-cycles", grt_demo_emptycache},
    {"streams", "stream/event scenarios: overlap, false serialization, lifetime, deadlock", grt_demo_streams},
    {"staging", "pinned pool + staging pipeline (K in flight, both clocks); stream-ordered pool counters",
     grt_demo_staging},
    {"graphs", "decode step eager vs graph replay, one graph per batch bucket", grt_demo_graphs},
    {"priority", "high-priority stream latency under low-priority load, with/without priorities", grt_demo_priority},
    {"tenants", "tail latency of GPU sharing: time slicing, MPS and MIG; N tenants", grt_demo_tenants},
    {NULL, NULL, NULL},
};

/* `gpurt demo all`: every demo in turn, with its default options. */
static int run_all(void) {
  int rc = 0;
  for (size_t i = 0; demos[i].name; i++) {
    char *args[] = {(char *)demos[i].name, NULL};
    printf("\n######## gpurt demo %s ########\n\n", demos[i].name);
    fflush(stdout);
    int r = demos[i].run(1, args);
    if (r) rc = r;
  }
  return rc;
}

static const struct option help_only[] = {
    CLI_OPT_HELP_ENTRY,
    {NULL, 0, NULL, 0},
};

static void usage(FILE *f) {
  fprintf(f, "usage: gpurt demo <name> [options]\n\ndemos:\n  %-10s %s\n", "all", "run every demo below");
  for (size_t i = 0; demos[i].name; i++) fprintf(f, "  %-10s %s\n", demos[i].name, demos[i].summary);
}

/* The demo's name comes first; its own options follow it and are its to parse. */
int grt_cmd_demo(int argc, char **argv) {
  cli_opts p;
  cli_opts_init(&p, "demo", argc, argv, help_only, true);
  if (p.help) {
    usage(stdout);
    return 0;
  }
  int c = cli_opts_next(&p);
  if (c == CLI_OPT_ERROR) return 2;
  if (c == CLI_OPT_END) {
    usage(stderr);
    return 2;
  }
  int first = cli_opts_index(&p) - 1;
  argc -= first;
  argv += first;
  if (!strcmp(argv[0], "all")) {
    cli_opts_init(&p, "demo all", argc, argv, help_only, false);
    if (p.help) {
      usage(stdout);
      return 0;
    }
    return cli_opts_expect_end(&p) ? 2 : run_all();
  }
  for (size_t i = 0; demos[i].name; i++)
    if (!strcmp(argv[0], demos[i].name)) return demos[i].run(argc, argv);
  return cli_opts_fail(&p, "unknown demo '%s'", argv[0]);
}
