/* cli_status.h — how a gpurt command reports a failed library call.
 *
 * One line on stderr, "gpurt CMD: WHAT: GRT_ERR_X (detail)", where detail is
 * the library's own message when it has one (grt_alloc_last_error, the
 * exec's sticky error) and otherwise grt_status_str; the command then exits
 * 1. A sequence of calls, a teardown above all, runs every step even after
 * one failed and keeps the first failure with the call that produced it
 * (cli_keep), so no status is dropped and the line still names the call
 * that went wrong. */
#ifndef GRT_TOOLS_CLI_STATUS_H
#define GRT_TOOLS_CLI_STATUS_H

#include <stdbool.h>
#include <stdio.h>

#include "gpurt/alloc.h"
#include "gpurt/exec.h"

/* Prints "gpurt CMD: WHAT: NAME (detail)"; msg NULL or "" means grt_status_str(st).
 * Returns 1, the exit status of a command that met a failure. */
static inline int cli_fail_status(const char *cmd, const char *what, grt_status st, const char *msg) {
  fprintf(stderr, "gpurt %s: %s: %s (%s)\n", cmd, what, grt_status_name(st), msg && *msg ? msg : grt_status_str(st));
  return 1;
}

/* The first failure of a sequence of calls: its status, the call that
 * returned it and the library's message about it ("" when none). */
typedef struct cli_first {
  grt_status st; /* GRT_OK while nothing failed */
  const char *what;
  char msg[256];
} cli_first;

#define CLI_FIRST_INIT {GRT_OK, NULL, ""}

/* Keeps st (from the call named what) unless an earlier failure is kept;
 * true when st is a failure, so `if (cli_keep(&f, "x", x(...))) ...` still
 * sees this call's result. */
static inline bool cli_keep(cli_first *f, const char *what, grt_status st) {
  if (st && !f->st) {
    f->st = st;
    f->what = what;
    f->msg[0] = '\0';
  }
  return st != GRT_OK;
}

/* cli_keep for a call on allocator a: a kept failure takes a's message
 * (grt_alloc_last_error, read now: the next call on a replaces it). */
static inline bool cli_keep_alloc(cli_first *f, grt_allocator *a, const char *what, grt_status st) {
  bool kept = st && !f->st && a;
  cli_keep(f, what, st);
  if (kept) snprintf(f->msg, sizeof f->msg, "%s", grt_alloc_last_error(a));
  return st != GRT_OK;
}

/* cli_keep for a call on exec (or one of its streams, events, graphs): a kept
 * failure that is the exec's sticky error takes its message (the deadlock
 * cycle, the failed kernel, ...). */
static inline bool cli_keep_exec(cli_first *f, grt_exec *exec, const char *what, grt_status st) {
  bool kept = st && !f->st && exec;
  cli_keep(f, what, st);
  if (kept && grt_exec_get_error(exec, f->msg, sizeof f->msg) != st) f->msg[0] = '\0'; /* not the sticky error */
  return st != GRT_OK;
}

/* Reports the kept failure (cli_fail_status); returns 1. */
static inline int cli_fail_first(const char *cmd, const cli_first *f) {
  return cli_fail_status(cmd, f->what, f->st, f->msg);
}

#endif
