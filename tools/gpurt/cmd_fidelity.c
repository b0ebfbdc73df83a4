/* cmd_fidelity.c — `gpurt replay --fidelity SNAPSHOT` (placeholder until fidelity.c lands). */
#include <stdio.h>

#include "replay_run.h"

int cli_fidelity(const char *path, int device, const char *html) {
  (void)path; (void)device; (void)html;
  fprintf(stderr, "gpurt replay --fidelity: not implemented yet\n");
  return 1;
}
