/* cmd_html.c — the CLI side of --html (placeholder until src/report/html.c lands). */
#include <stdio.h>

#include "replay_run.h"

int cli_write_html(const char *file, const char *title, const cli_run *runs, size_t n) {
  (void)file; (void)title; (void)runs; (void)n;
  fprintf(stderr, "gpurt: --html not implemented yet\n");
  return 1;
}
