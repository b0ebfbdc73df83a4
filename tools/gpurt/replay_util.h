/* replay_util.h — helpers shared by `gpurt replay` and `gpurt compare`:
 * trace loading with readable errors, the progress bar (option values are
 * parsed in cli_opts.c). */
#ifndef GRT_TOOLS_REPLAY_UTIL_H
#define GRT_TOOLS_REPLAY_UTIL_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "gpurt/replay.h"
#include "input.h"

/* Loads a trace; prints "gpurt CMD: file:line: reason" on failure. */
grt_trace *cli_load_trace(const char *cmd, const char *path, int device);
/* The same from an opened input (held whole, up to --max-input-size). */
grt_trace *cli_load_input(const char *cmd, const char *path, cli_input *in, int device);
/* Feeds an input that streams (cli_input_streams: its format) to r as it is
 * read (memory follows the live allocations); 0, or 1 after printing the failure. */
int cli_feed_input(const char *cmd, const char *path, cli_input *in, grt_trace_format format, grt_replay *r);
/* How messages name path ("standard input" for "-"). */
const char *cli_input_name(const char *path);
/* True when the file starts with the native magic. */
bool cli_is_native(const char *path);
/* True for a native file big enough to stream rather than load (loading
 * holds every event; streaming only the live allocations). */
bool cli_streams(const char *path);
/* True when path is read through cli_input (a pipe, compressed, or a big
 * file in another format that may stream): see cli_input_streams. */
bool cli_opens_input(const char *path);
/* The file name without its directories. */
const char *cli_basename(const char *path);
/* The paths "dir/name" of the files in dir whose name ends with suffix, in
 * name order, at most max (malloc'd; free each); -1 when dir cannot be read. */
int cli_list_files(const char *dir, const char *suffix, char **out, int max);

/* Progress bar on stderr, drawn only on a terminal and only after a second. */
typedef struct cli_progress {
  const char *label;
  uint64_t total; /* events, 0 = unknown */
  double start;
  double last_draw;
  bool drawn, enabled;
  const char *unit; /* set: few, long steps, shown as "done of total unit" */
} cli_progress;

void cli_progress_init(cli_progress *p, const char *label, uint64_t total);
/* Call after each event (cheap: checks the clock every 64Ki events). */
void cli_progress_tick(cli_progress *p, uint64_t done);
/* Draws now (after the first second, at most ten times a second). */
void cli_progress_show(cli_progress *p, uint64_t done);
void cli_progress_done(cli_progress *p);
/* A step callback that ticks a cli_progress (ctx). */
grt_status cli_progress_step(void *ctx, grt_replay *r, const grt_trace_event *ev, uint64_t index);

/* W3's reference rows (docs/ALLOCATORS.md): the peers' heap needed / peak
 * live, geometric mean over the google/minimalloc traces (measured elsewhere). */
typedef struct cli_w3_ref {
  const char *name;
  double ratio;
} cli_w3_ref;
extern const cli_w3_ref cli_w3_reference[];
extern const size_t cli_w3_reference_count;

#endif
