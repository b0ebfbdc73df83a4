/* cmd_fidelity.c — `gpurt replay --fidelity SNAPSHOT`: for every device the
 * snapshot traced (or the one --device names), the faithful caching policy
 * replayed from the rebuilt starting state and scored against the recording:
 * placements, segment decisions, releases, OOMs and the final layout. The
 * text report ends each device's table with
 *   exact-address match: N/M (P%)
 * (scripts read it); --json prints one object per device, one per line. */
#include <inttypes.h>
#include <stdio.h>

#include "cli_status.h"
#include "replay_run.h"
#include "replay_util.h"

static double pct(uint64_t n, uint64_t m) { return m ? 100.0 * (double)n / (double)m : 100.0; }

static void print_column(const char *what, uint64_t n, uint64_t m, const char *note) {
  if (!m) {
    printf("  %-22s none recorded\n", what);
    return;
  }
  printf("  %-22s %" PRIu64 "/%" PRIu64 " agree (%.2f%%)\n", what, n, m, pct(n, m));
  if (note[0]) printf("    first difference: %s\n", note);
}

static void print_divergences(const grt_fidelity_report *rep) {
  printf("  divergences: %" PRIu64 " (first %zu below)\n", rep->divergences, rep->n_shown);
  for (size_t i = 0; i < rep->n_shown; i++) {
    const grt_fidelity_divergence *d = &rep->shown[i];
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

static void print_text(const grt_fidelity_report *rep) {
  printf("faithful caching policy%s on a device handing out the recorded segment addresses\n\n",
         rep->expandable ? " (expandable segments)" : "");
  printf("  starting state rebuilt: %zu segments, %zu live blocks\n", rep->start_segments, rep->start_blocks);
  print_column("segment decisions", rep->segment_decisions_agree, rep->segment_decisions, rep->decision_note);
  print_column("releases", rep->releases_matching, rep->releases, rep->release_note);
  print_column("ooms", rep->ooms_agree, rep->ooms_recorded, rep->oom_note);
  printf("  final layout: %zu of %zu recorded segments identical (address, size, blocks); replay has %zu\n",
         rep->final_matching, rep->final_recorded, rep->final_replayed);
  if (rep->layout_note[0]) printf("    first difference: %s\n", rep->layout_note);
  if (rep->contradictions)
    printf("  contradictions: %" PRIu64 "; first: %s\n", rep->contradictions, rep->contradiction_note);
  if (!rep->structure_ok) printf("  allocator structure check failed: %s\n", rep->structure_note);
  if (rep->divergences) print_divergences(rep);
  printf("exact-address match: %" PRIu64 "/%" PRIu64 " (%.2f%%)\n", rep->exact, rep->allocs,
         pct(rep->exact, rep->allocs));
}

static void print_json(int device, const grt_trace_info *info, const grt_fidelity_report *rep) {
  printf("{\"device\": %d, \"events\": %zu, \"no_events\": false, \"allocs\": %" PRIu64 ", \"exact\": %" PRIu64
         ", \"segment_decisions\": %" PRIu64 ", \"segment_decisions_agree\": %" PRIu64
         ", \"releases_recorded\": %" PRIu64 ", \"releases_agree\": %" PRIu64 ", \"ooms_recorded\": %" PRIu64
         ", \"ooms_agree\": %" PRIu64 ", \"final_layout_equal\": %s, \"contradictions\": %" PRIu64 "}\n",
         device, info->n_events, rep->allocs, rep->exact, rep->segment_decisions, rep->segment_decisions_agree,
         rep->releases, rep->releases_matching, rep->ooms_recorded, rep->ooms_agree,
         rep->final_layout_equal ? "true" : "false", rep->contradictions);
}

/* One device's report; 0, or the exit status after reporting why not. */
static int fidelity_device(const char *path, int device, bool json, int *n_devices) {
  grt_trace *t = cli_load_trace("replay --fidelity", path, device);
  if (!t) return 1;
  grt_trace_info info;
  grt_status st = grt_trace_get_info(t, &info);
  int rc = 0;
  if (st) {
    rc = cli_fail_status("replay --fidelity", "grt_trace_get_info", st, NULL);
  } else if (info.format != GRT_TRACE_FORMAT_PYTORCH) {
    fprintf(stderr, "gpurt replay --fidelity: %s is a %s trace; fidelity needs a PyTorch snapshot (recorded addresses)\n",
            cli_basename(path), grt_trace_format_name(info.format));
    rc = 2;
  } else {
    *n_devices = info.n_devices;
    grt_fidelity_report rep;
    char err[512];
    st = info.n_events ? grt_replay_fidelity(t, &rep, err, sizeof err) : GRT_OK;
    if (st) {
      fprintf(stderr, "gpurt replay --fidelity: %s, device %d: %s (%s)\n", cli_basename(path), device, err,
              grt_status_str(st));
      rc = 1;
    } else if (!info.n_events) {
      if (json)
        printf("{\"device\": %d, \"events\": 0, \"no_events\": true}\n", device);
      else
        printf("gpurt replay --fidelity: %s (device %d): no events\n", cli_basename(path), device);
    } else if (json) {
      print_json(device, &info, &rep);
    } else {
      printf("gpurt replay --fidelity: %s (device %d of %d, %zu events)\n", cli_basename(path), device,
             info.n_devices, info.n_events);
      print_text(&rep);
    }
  }
  grt_status dst = grt_trace_destroy(t);
  if (dst && !rc) rc = cli_fail_status("replay --fidelity", "grt_trace_destroy", dst, NULL);
  return rc;
}

int cli_fidelity(const char *path, int device, bool json) {
  int n_devices = 1;
  if (device >= 0) return fidelity_device(path, device, json, &n_devices);
  int rc = 0;
  for (int d = 0; d < n_devices && !rc; d++) {
    if (d && !json) printf("\n");
    rc = fidelity_device(path, d, json, &n_devices);
  }
  return rc;
}
