/* replay_timeline.h — a replay as a Chrome / Perfetto trace (replay_timeline.c). */
#ifndef GRT_TOOLS_REPLAY_TIMELINE_H
#define GRT_TOOLS_REPLAY_TIMELINE_H

#include "replay_run.h"

/* Writes out from run (its series recorded) and the loaded trace it
 * replayed (its recorded events); path names it. 0, or 1 after a message. */
int cli_write_replay_timeline(const char *out, const grt_trace *t, const char *path, const cli_run *run);

#endif
