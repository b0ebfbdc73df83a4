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
    {"streams", "stream/event scenarios: overlap, false serialization, lifetime, deadlock", grt_demo_streams},
    {NULL, NULL, NULL},
};

static void usage(FILE *f) {
  fprintf(f, "usage: gpurt demo <name> [options]\n\ndemos:\n");
  for (size_t i = 0; demos[i].name; i++) fprintf(f, "  %-10s %s\n", demos[i].name, demos[i].summary);
}

int grt_cmd_demo(int argc, char **argv) {
  if (argc < 2 || !strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) {
    usage(argc < 2 ? stderr : stdout);
    return argc < 2 ? 2 : 0;
  }
  for (size_t i = 0; demos[i].name; i++)
    if (!strcmp(argv[1], demos[i].name)) return demos[i].run(argc - 1, argv + 1);
  fprintf(stderr, "gpurt demo: unknown demo '%s'\n", argv[1]);
  usage(stderr);
  return 2;
}
