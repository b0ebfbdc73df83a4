/* replay_expandable.c — the starting state of a trace recorded with expandable segments. */
#include "trace/replay_impl.h"

grt_status grt__replay_rebuild_expandable(grt_replay *r) {
  grt__replay_set_error(r, "rebuilding expandable segments is not implemented yet");
  return GRT_ERR_UNSUPPORTED;
}
