/* cmd_compare.c — placeholder. */
#include <stdio.h>
#include "cli.h"
int grt_cmd_compare(int argc, char **argv) { (void)argc; (void)argv; return 1; }
