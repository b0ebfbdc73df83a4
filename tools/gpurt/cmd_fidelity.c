/* cmd_fidelity.c — `gpurt replay --fidelity SNAPSHOT`: the faithful caching
 * policy replayed from the rebuilt starting state, scored against the
 * recorded addresses. The last line is always
 *   exact-address match: N/M (P%)
 * (scripts read it). */
#include <inttypes.h>
#include <stdio.h>

#include "cli_status.h"
#include "replay_run.h"
#include "replay_util.h"

/* The report on a loaded trace; 0, or the exit status after reporting why not. */
static int fidelity_loaded(const grt_trace *t, const char *path) {
  grt_trace_info info;
  grt_status st = grt_trace_get_info(t, &info);
  if (st) return cli_fail_status("replay --fidelity", "grt_trace_get_info", st, NULL);
  if (info.format != GRT_TRACE_FORMAT_PYTORCH) {
    fprintf(stderr, "gpurt replay --fidelity: %s is a %s trace; fidelity needs a PyTorch snapshot (recorded addresses)\n",
            cli_basename(path), grt_trace_format_name(info.format));
    return 2;
  }
  grt_fidelity_report rep;
  char err[512];
  st = grt_replay_fidelity(t, &rep, err, sizeof err);
  if (st) {
    fprintf(stderr, "gpurt replay --fidelity: %s: %s (%s)\n", cli_basename(path), err, grt_status_str(st));
    return 1;
  }
  printf("gpurt replay --fidelity: %s (device %d, %zu events)\n", cli_basename(path), info.device, info.n_events);
  printf("faithful caching policy%s on a device handing out the recorded segment addresses\n\n",
         rep.expandable ? " (expandable segments)" : "");
  printf("  starting state rebuilt: %zu segments, %zu live blocks\n", rep.start_segments, rep.start_blocks);
  if (rep.releases)
    printf("  recorded releases: %" PRIu64 ", replay released the same segments at %" PRIu64 "\n", rep.releases,
           rep.releases_matching);
  if (rep.release_note[0]) printf("    first difference: %s\n", rep.release_note);
  printf("  final layout: %zu of %zu recorded segments identical (address, size, blocks); replay has %zu\n",
         rep.final_matching, rep.final_recorded, rep.final_replayed);
  if (rep.layout_note[0]) printf("    first difference: %s\n", rep.layout_note);
  if (rep.divergences) {
    printf("  divergences: %" PRIu64 " (first %zu below)\n", rep.divergences, rep.n_shown);
    for (size_t i = 0; i < rep.n_shown; i++) {
      const grt_fidelity_divergence *d = &rep.shown[i];
      char b[32];
      printf("    event %" PRIu64 ": alloc %s on stream %" PRIu64 ": recorded 0x%" PRIx64 ", replay ", d->event,
             grt_format_bytes(d->size, b, sizeof b), d->stream, d->recorded);
      if (d->replayed)
        printf("0x%" PRIx64 "\n", d->replayed);
      else
        printf("OOM\n");
      printf("      %s\n", d->context);
    }
  }
  double pct = rep.allocs ? 100.0 * (double)rep.exact / (double)rep.allocs : 100.0;
  printf("exact-address match: %" PRIu64 "/%" PRIu64 " (%.2f%%)\n", rep.exact, rep.allocs, pct);
  return 0;
}

int cli_fidelity(const char *path, int device) {
  grt_trace *t = cli_load_trace("replay", path, device);
  if (!t) return 1;
  int rc = fidelity_loaded(t, path);
  grt_status st = grt_trace_destroy(t);
  if (st && !rc) rc = cli_fail_status("replay --fidelity", "grt_trace_destroy", st, NULL); /* else: reported */
  return rc;
}
