/* cmd_replay.c — `gpurt replay TRACE`: drive one allocator policy through a
 * trace and summarize (peaks, first OOM, device calls, the smallest capacity
 * with zero OOMs). --csv/--json print the per-step series for machines,
 * --html writes a self-contained report, --fidelity scores a PyTorch
 * snapshot replay against the recorded addresses (cmd_fidelity.c), --serve
 * replays at a pace while serving live /metrics (replay_serve.c). */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "replay_run.h"
#include "replay_util.h"
#include "serve_run.h"

static void usage(FILE *f) {
  fprintf(f,
          "usage: gpurt replay TRACE [options]\n\n"
          "Replays an allocation trace (PyTorch snapshot pickle, gpurt native, RMM CSV, minimalloc CSV)\n"
          "through one allocator policy on a simulated device, and summarizes what happened.\n\n"
          "options:\n"
          "  --policy P        allocator policy (default caching; see `gpurt compare --help`)\n"
          "  --capacity BYTES  device capacity, e.g. 16G, 512M (default: unbounded; PyTorch traces:\n"
          "                    a device covering the recorded addresses)\n"
          "  --conf STR        allocator config, PYTORCH_CUDA_ALLOC_CONF style (over the trace's settings)\n"
          "  --placement M     auto | first-fit | recorded (recorded segment addresses; auto: recorded\n"
          "                    for the caching policy on PyTorch traces, unless --capacity is given)\n"
          "  --no-releases     ignore recorded release moments (segment_free runs, oom)\n"
          "  --device N        PyTorch snapshots: which device's trace (default 0)\n"
          "  --search / --no-search\n"
          "                    find the smallest capacity with zero OOMs (default: on for traces\n"
          "                    under 2M events)\n"
          "  --csv             print the per-step series as CSV on stdout (no table)\n"
          "  --json            print the summary and the series as JSON on stdout (no table)\n"
          "  --html FILE       write a self-contained HTML report (plots, segment maps, summary)\n"
          "  --fidelity        PyTorch snapshots: replay with the faithful caching policy from the\n"
          "                    rebuilt starting state and score the addresses against the recording\n"
          "  --serve HOST:PORT replay at a pace while serving Prometheus metrics at\n"
          "                    http://HOST:PORT/metrics (try: curl 127.0.0.1:9400/metrics); needs a gpurt\n"
          "                    built with libmicrohttpd. Ctrl-C stops.\n"
          "  --rate N          with --serve: trace events per second (default 500; 0 = as fast as possible)\n"
          "  --wait-scrape S   with --serve: start only after the first scrape (or S seconds)\n"
          "  --linger S        with --serve: keep serving S seconds after the replay (default: until Ctrl-C)\n");
}

static bool parse_placement(const char *s, grt_replay_placement *out) {
  if (!strcmp(s, "auto")) *out = GRT_REPLAY_PLACE_AUTO;
  else if (!strcmp(s, "first-fit")) *out = GRT_REPLAY_PLACE_FIRST_FIT;
  else if (!strcmp(s, "recorded")) *out = GRT_REPLAY_PLACE_RECORDED;
  else return false;
  return true;
}

static void print_bytes_row(const char *label, uint64_t v) {
  char b[32];
  printf("  %-30s %s\n", label, grt_format_bytes(v, b, sizeof b));
}

void cli_print_summary(const cli_run *run) {
  const grt_replay_summary *s = &run->sum;
  char b1[32], b2[32];
  printf("  %-30s %" PRIu64 "  (%" PRIu64 " allocs, %" PRIu64 " frees", "events", s->events, s->allocs, s->frees);
  if (s->unmatched_frees) printf(", %" PRIu64 " frees of allocations made before the trace", s->unmatched_frees);
  printf(")\n");
  print_bytes_row("peak reserved", s->peak_reserved);
  print_bytes_row("peak allocated", s->peak_allocated);
  print_bytes_row("peak requested", s->peak_requested);
  print_bytes_row("peak active", s->peak_active);
  print_bytes_row("peak live (trace)", s->peak_live);
  if (run->have_series) {
    printf("  %-30s %s / %s\n", "peak cached / largest free", grt_format_bytes(s->peak_cached, b1, sizeof b1),
           grt_format_bytes(s->peak_largest_free, b2, sizeof b2));
    printf("  %-30s %.1f%%\n", "max fragmentation", 100.0 * s->max_fragmentation);
  }
  printf("  %-30s %s / %s\n", "final reserved / allocated", grt_format_bytes(s->final_reserved, b1, sizeof b1),
         grt_format_bytes(s->final_allocated, b2, sizeof b2));
  printf("  %-30s %" PRIu64 " / %" PRIu64 " / %" PRIu64 "\n", "device mallocs / frees / syncs", s->device_mallocs,
         s->device_frees, s->syncs);
  if (s->releases) printf("  %-30s %" PRIu64 "\n", "recorded releases applied", s->releases);
  if (s->has_oom)
    printf("  %-30s %" PRIu64 " OOMs; first at event %" PRIu64 " (%s), utilization %.1f%% (%s live of %s)\n",
           "out of memory", s->ooms, s->first_oom_event, grt_format_bytes(s->first_oom_size, b1, sizeof b1),
           100.0 * s->first_oom_utilization, grt_format_bytes(s->first_oom_live, b2, sizeof b2),
           grt_format_bytes(s->capacity, (char[32]){0}, 32));
  else
    printf("  %-30s none (capacity %s)\n", "out of memory", grt_format_bytes(s->capacity, b1, sizeof b1));
  if (run->min_capacity)
    printf("  %-30s %s = %.3f x peak live\n", "smallest capacity, zero OOMs",
           grt_format_bytes(run->min_capacity, b1, sizeof b1), run->heap_ratio);
  else if (run->search_failed)
    printf("  %-30s not found (%s)\n", "smallest capacity, zero OOMs", run->search_note);
}

static void print_csv(const cli_run *run) {
  printf("event,reserved,allocated,requested,active,cached,largest_free,fragmentation,live,device_mallocs,device_frees\n");
  for (size_t i = 0; i < run->n_samples; i++) {
    const grt_replay_sample *s = &run->samples[i];
    printf("%zu,%" PRIu64 ",%" PRIu64 ",%" PRIu64 ",%" PRIu64 ",%" PRIu64 ",%" PRIu64 ",%.6f,%" PRIu64 ",%" PRIu64
           ",%" PRIu64 "\n",
           i, s->reserved, s->allocated, s->requested, s->active, s->cached, s->largest_free, s->fragmentation,
           s->live, s->device_mallocs, s->device_frees);
  }
}

void cli_print_summary_json(const cli_run *run, bool with_series) {
  const grt_replay_summary *s = &run->sum;
  printf("{\"trace\":\"%s\",\"policy\":\"%s\",\"events\":%" PRIu64 ",\"allocs\":%" PRIu64 ",\"frees\":%" PRIu64
         ",\"unmatched_frees\":%" PRIu64 ",\"capacity\":%" PRIu64 ",\"peak_reserved\":%" PRIu64
         ",\"peak_allocated\":%" PRIu64 ",\"peak_requested\":%" PRIu64 ",\"peak_active\":%" PRIu64
         ",\"peak_live\":%" PRIu64 ",\"peak_cached\":%" PRIu64 ",\"peak_largest_free\":%" PRIu64
         ",\"max_fragmentation\":%.6f,\"final_reserved\":%" PRIu64 ",\"final_allocated\":%" PRIu64
         ",\"device_mallocs\":%" PRIu64 ",\"device_frees\":%" PRIu64 ",\"syncs\":%" PRIu64 ",\"ooms\":%" PRIu64,
         cli_basename(run->trace_path), run->policy, s->events, s->allocs, s->frees, s->unmatched_frees, s->capacity,
         s->peak_reserved, s->peak_allocated, s->peak_requested, s->peak_active, s->peak_live, s->peak_cached,
         s->peak_largest_free, s->max_fragmentation, s->final_reserved, s->final_allocated, s->device_mallocs,
         s->device_frees, s->syncs, s->ooms);
  if (s->has_oom)
    printf(",\"first_oom\":{\"event\":%" PRIu64 ",\"size\":%" PRIu64 ",\"live\":%" PRIu64 ",\"utilization\":%.6f}",
           s->first_oom_event, s->first_oom_size, s->first_oom_live, s->first_oom_utilization);
  else
    printf(",\"first_oom\":null");
  if (run->min_capacity)
    printf(",\"min_capacity\":%" PRIu64 ",\"heap_ratio\":%.6f", run->min_capacity, run->heap_ratio);
  else
    printf(",\"min_capacity\":null,\"heap_ratio\":null");
  if (with_series) {
    static const char *const names[] = {"reserved", "allocated", "requested", "active", "cached", "largest_free", "live"};
    printf(",\"series\":{");
    for (int k = 0; k < 7; k++) {
      printf("%s\"%s\":[", k ? "," : "", names[k]);
      for (size_t i = 0; i < run->n_samples; i++) {
        const uint64_t *v = (const uint64_t *)&run->samples[i];
        printf("%s%" PRIu64, i ? "," : "", v[k]);
      }
      printf("]");
    }
    printf(",\"fragmentation\":[");
    for (size_t i = 0; i < run->n_samples; i++) printf("%s%.4f", i ? "," : "", run->samples[i].fragmentation);
    printf("]}");
  }
  printf("}");
}

int grt_cmd_replay(int argc, char **argv) {
  cli_run_opts o;
  cli_run_opts_default(&o);
  const char *path = NULL, *html = NULL;
  bool csv = false, json = false, fidelity = false;
  int search = -1;
  cli_serve_opts so;
  cli_serve_opts_default(&so);
  bool serve = false, serve_only = false; /* --serve; an option that needs it */
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    bool has = i + 1 < argc;
    if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
      usage(stdout);
      return 0;
    } else if (!strcmp(a, "--policy") && has) {
      o.policy = argv[++i];
    } else if (!strcmp(a, "--capacity") && has) {
      if (!cli_parse_bytes(argv[++i], &o.capacity) || !o.capacity) {
        fprintf(stderr, "gpurt replay: --capacity '%s' is not a size (e.g. 16G, 512M, 1048576)\n", argv[i]);
        return 2;
      }
    } else if (!strcmp(a, "--conf") && has) {
      o.conf = argv[++i];
    } else if (!strcmp(a, "--placement") && has) {
      if (!parse_placement(argv[++i], &o.placement)) {
        fprintf(stderr, "gpurt replay: --placement must be auto, first-fit or recorded\n");
        return 2;
      }
    } else if (!strcmp(a, "--no-releases")) {
      o.honor_releases = false;
    } else if (!strcmp(a, "--device") && has) {
      o.device = atoi(argv[++i]);
    } else if (!strcmp(a, "--search")) {
      search = 1;
    } else if (!strcmp(a, "--no-search")) {
      search = 0;
    } else if (!strcmp(a, "--csv")) {
      csv = true;
    } else if (!strcmp(a, "--json")) {
      json = true;
    } else if (!strcmp(a, "--html") && has) {
      html = argv[++i];
    } else if (!strcmp(a, "--fidelity")) {
      fidelity = true;
    } else if (!strcmp(a, "--serve") && has) {
      serve = true;
      so.listen = argv[++i];
    } else if ((!strcmp(a, "--rate") || !strcmp(a, "--wait-scrape") || !strcmp(a, "--linger")) && has) {
      serve_only = true;
      double *dst = a[2] == 'r' ? &so.rate : a[2] == 'w' ? &so.wait_scrape : &so.linger;
      if (!cli_parse_seconds("replay", a, argv[++i], dst)) return 2;
    } else if (a[0] == '-' && a[1]) {
      fprintf(stderr, "gpurt replay: unknown option '%s'\n\n", a);
      usage(stderr);
      return 2;
    } else if (!path) {
      path = a;
    } else {
      fprintf(stderr, "gpurt replay: one trace at a time (use `gpurt compare` for several)\n");
      return 2;
    }
  }
  if (!path) {
    usage(stderr);
    return 2;
  }
  if (serve_only && !serve) {
    fprintf(stderr, "gpurt replay: --rate, --wait-scrape and --linger go with --serve HOST:PORT\n");
    return 2;
  }
  if (serve && (fidelity || csv || json || html)) {
    fprintf(stderr, "gpurt replay: --serve does not combine with --fidelity, --csv, --json or --html\n");
    return 2;
  }
  if (serve) return cli_replay_serve(path, &o, &so);
  if (fidelity) return cli_fidelity(path, o.device, html);
  o.series = csv || json || html;
  o.search = search;
  o.snapshots = html != NULL;
  cli_run run;
  int rc = cli_run_trace(path, &o, &run);
  if (rc) return rc;
  if (csv) {
    print_csv(&run);
  } else if (json) {
    cli_print_summary_json(&run, true);
    printf("\n");
  } else {
    char b[32];
    printf("gpurt replay: %s (%s", cli_basename(path), run.format);
    if (run.n_events) printf(", %" PRIu64 " events", run.n_events);
    printf(")\npolicy %s on a %s device%s\n\n", run.policy, grt_format_bytes(run.sum.capacity, b, sizeof b),
           run.recorded ? " handing out the recorded segment addresses" : "");
    cli_print_summary(&run);
  }
  if (html) {
    rc = cli_write_html(html, cli_basename(path), &run, 1);
    if (!rc && !csv && !json) printf("\nreport: %s\n", html);
  }
  cli_run_free(&run);
  return rc;
}
