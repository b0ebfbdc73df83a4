/* cmd_demo.c — `gpurt demo NAME`: dispatches to the teaching demos (demo_*.c). */
#include <stdio.h>
#include <string.h>

#include "cli.h"

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

static void usage(FILE *f) {
  fprintf(f, "usage: gpurt demo <name> [options]\n\ndemos:\n  %-10s %s\n", "all", "run every demo below");
  for (size_t i = 0; demos[i].name; i++) fprintf(f, "  %-10s %s\n", demos[i].name, demos[i].summary);
}

int grt_cmd_demo(int argc, char **argv) {
  if (argc < 2 || !strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) {
    usage(argc < 2 ? stderr : stdout);
    return argc < 2 ? 2 : 0;
  }
  if (!strcmp(argv[1], "all")) return run_all();
  for (size_t i = 0; demos[i].name; i++)
    if (!strcmp(argv[1], demos[i].name)) return demos[i].run(argc - 1, argv + 1);
  fprintf(stderr, "gpurt demo: unknown demo '%s'\n", argv[1]);
  usage(stderr);
  return 2;
}
