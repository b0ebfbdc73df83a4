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
#include "input.h"
#include "cli_opts.h"
#include "cli_status.h"
#include "replay_run.h"
#include "replay_timeline.h"
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
          "  --conf STR        allocator config, PYTORCH_CUDA_ALLOC_CONF style (over the trace's settings);\n"
          "                    settings without effect on the model are named on stderr\n"
          "  --memory-fraction F  per_process_memory_fraction F (0 < F <= 1) over --conf\n"
          "  --placement M     auto | first-fit | recorded (recorded segment addresses; auto: recorded\n"
          "                    for the caching policy on PyTorch traces, unless --capacity is given)\n"
          "  --no-releases     ignore recorded release moments (segment_free runs, oom)\n"
          "  --device-model M  the simulated device: paged (default: any free 2 MiB pages serve a\n"
          "                    request) or contiguous (first fit: a request needs one hole); which\n"
          "                    one cudaMalloc follows is not yet measured (docs/CONFORMANCE.md)\n"
          "  --fail-on-oom     exit 3 when the replay had an OOM (a CI gate: \"this trace still fits\")\n"
          "  --from-empty      PyTorch snapshots: start from an empty allocator (default: the state\n"
          "                    rebuilt for the moment recording began, so peaks count memory that was\n"
          "                    in use before it)\n"
          "  --device N        PyTorch snapshots: which device's trace (default 0; --fidelity: every\n"
          "                    device the snapshot traced)\n"
          "  --search / --no-search\n"
          "                    find the smallest capacity with zero OOMs (default: on for traces\n"
          "                    under 2M events)\n"
          "  --csv             print the per-step series as CSV on stdout (no table)\n"
          "  --json            print the summary and the series as JSON on stdout (no table)\n"
          "  --html FILE       write a self-contained HTML report (plots, segment maps, summary)\n"
          "  --timeline FILE   write a Chrome/Perfetto trace: memory counters, segment events, OOMs\n"
          "  --fidelity        PyTorch snapshots: replay with the faithful caching policy from the\n"
          "                    rebuilt starting state and score it against the recording, per device:\n"
          "                    addresses, segment decisions, releases, OOMs, final layout (--json: one\n"
          "                    object per device and line)\n"
          "  --serve HOST:PORT replay at a pace while serving Prometheus metrics at\n"
          "                    http://HOST:PORT/metrics (try: curl 127.0.0.1:9400/metrics); needs a gpurt\n"
          "                    built with libmicrohttpd. Ctrl-C stops.\n"
          "  --rate N          with --serve: trace events per second (default 500; 0 = as fast as possible)\n"
          "  --wait-scrape S   with --serve: start only after the first scrape (or S seconds)\n"
          "  --linger S        with --serve: keep serving S seconds after the replay (default: until Ctrl-C)\n");
  fputs(CLI_INPUT_HELP, f);
}

static void print_bytes_row(const char *label, uint64_t v) {
  char b[32];
  printf("  %-30s %s\n", label, grt_format_bytes(v, b, sizeof b));
}

/* The recorded run's own figures beside the model's, and what makes the trace partial. */
static void print_recorded(const cli_run *run) {
  const grt_trace_recorded *x = &run->rec;
  char b1[32], b2[32], b3[32];
  printf("\n  recorded run (from the snapshot itself)\n");
  printf("  %-30s %s / %s / %s\n", "reserved start / peak / end", grt_format_bytes(x->reserved_start, b1, sizeof b1),
         grt_format_bytes(x->reserved_peak, b2, sizeof b2), grt_format_bytes(x->reserved_end, b3, sizeof b3));
  printf("  %-30s %s / %s / %s\n", "requested start / peak / end", grt_format_bytes(x->requested_start, b1, sizeof b1),
         grt_format_bytes(x->requested_peak, b2, sizeof b2), grt_format_bytes(x->requested_end, b3, sizeof b3));
  print_bytes_row("allocated at the end", x->allocated_end);
  printf("  %-30s %" PRIu64 " / %" PRIu64 "\n", "device mallocs / frees seen", x->device_mallocs, x->device_frees);
  if (x->ooms) printf("  %-30s %" PRIu64 "\n", "OOMs recorded", x->ooms);
  if (x->partial) {
    printf("  warning: the trace is partial: %s was live when recording began", grt_format_bytes(x->requested_start, b1, sizeof b1));
    if (x->unmatched_frees) printf(" (it frees %" PRIu64 " block%s allocated before it)", x->unmatched_frees, x->unmatched_frees == 1 ? "" : "s");
    printf(";\n  the history ring buffer (max_entries) wrapped, or recording started mid-run%s\n",
           run->rebuilt ? "" : "; this replay starts empty (--from-empty)");
  }
}

void cli_print_summary(const cli_run *run) {
  const grt_replay_summary *s = &run->sum;
  char b1[32], b2[32];
  if (run->have_recorded)
    printf("  model starts from %s\n", run->rebuilt ? "the state rebuilt for the moment recording began"
                                                    : "an empty allocator");
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
  if (run->min_capacity || run->search_failed) printf("  %-30s (first fit, from an empty allocator)\n", "");
  if (run->have_recorded) print_recorded(run);
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

typedef struct replay_args {
  cli_run_opts o;
  cli_serve_opts so;
  const char *path, *html, *timeline;
  bool csv, json, fidelity, serve, search, no_search;
  bool device_set, model_set, fail_on_oom;
  const char *serve_only; /* the last of --rate, --wait-scrape, --linger given */
} replay_args;

enum {
  RP_POLICY = 256, RP_CAPACITY, RP_CONF, RP_FRACTION, RP_PLACEMENT, RP_NO_RELEASES, RP_DEVICE, RP_SEARCH, RP_NO_SEARCH,
  RP_CSV, RP_JSON, RP_HTML, RP_FIDELITY, RP_SERVE, RP_RATE, RP_WAIT_SCRAPE, RP_LINGER, RP_FROM_EMPTY,
  RP_DEVICE_MODEL, RP_FAIL_ON_OOM, RP_TIMELINE
};

static const struct option replay_options[] = {
    {"policy", required_argument, NULL, RP_POLICY},
    {"capacity", required_argument, NULL, RP_CAPACITY},
    {"conf", required_argument, NULL, RP_CONF},
    {"memory-fraction", required_argument, NULL, RP_FRACTION},
    {"placement", required_argument, NULL, RP_PLACEMENT},
    {"no-releases", no_argument, NULL, RP_NO_RELEASES},
    {"device", required_argument, NULL, RP_DEVICE},
    {"from-empty", no_argument, NULL, RP_FROM_EMPTY},
    {"device-model", required_argument, NULL, RP_DEVICE_MODEL},
    {"fail-on-oom", no_argument, NULL, RP_FAIL_ON_OOM},
    {"search", no_argument, NULL, RP_SEARCH},
    {"no-search", no_argument, NULL, RP_NO_SEARCH},
    {"csv", no_argument, NULL, RP_CSV},
    {"json", no_argument, NULL, RP_JSON},
    {"html", required_argument, NULL, RP_HTML},
    {"timeline", required_argument, NULL, RP_TIMELINE},
    {"fidelity", no_argument, NULL, RP_FIDELITY},
    {"serve", required_argument, NULL, RP_SERVE},
    {"rate", required_argument, NULL, RP_RATE},
    {"wait-scrape", required_argument, NULL, RP_WAIT_SCRAPE},
    {"linger", required_argument, NULL, RP_LINGER},
    CLI_OPT_MAX_INPUT_ENTRY,
    CLI_OPT_HELP_ENTRY,
    {NULL, 0, NULL, 0},
};

static const char *const placements[] = {"auto", "first-fit", "recorded"};
static const grt_replay_placement placement_of[] = {GRT_REPLAY_PLACE_AUTO, GRT_REPLAY_PLACE_FIRST_FIT,
                                                    GRT_REPLAY_PLACE_RECORDED};

/* One option (c, the val getopt returned); false when it is refused. */
static bool replay_option(const cli_opts *p, int c, replay_args *a) {
  size_t i;
  switch (c) {
  case RP_POLICY: a->o.policy = p->arg; return true;
  case RP_CAPACITY: return cli_opt_bytes(p, &a->o.capacity);
  case RP_CONF: a->o.conf = p->arg; return true;
  case RP_FRACTION: return cli_opt_fraction(p, &a->o.memory_fraction);
  case RP_PLACEMENT:
    if (!cli_opt_choice(p, placements, sizeof placements / sizeof placements[0], &i)) return false;
    a->o.placement = placement_of[i];
    return true;
  case RP_NO_RELEASES: a->o.honor_releases = false; return true;
  case RP_FROM_EMPTY: a->o.from_empty = true; return true;
  case RP_FAIL_ON_OOM: a->fail_on_oom = true; return true;
  case RP_DEVICE_MODEL: a->model_set = true; return cli_opt_device_model(p, &a->o.device_model);
  case RP_DEVICE: a->device_set = true; return cli_opt_device(p, &a->o.device);
  case RP_SEARCH: a->search = true; return true;
  case RP_NO_SEARCH: a->no_search = true; return true;
  case RP_CSV: a->csv = true; return true;
  case RP_JSON: a->json = true; return true;
  case RP_HTML: a->html = p->arg; return true;
  case RP_TIMELINE: a->timeline = p->arg; return true;
  case RP_FIDELITY: a->fidelity = true; return true;
  case RP_SERVE:
    a->serve = true;
    a->so.listen = p->arg;
    return true;
  case RP_RATE: a->serve_only = p->name; return cli_opt_real(p, 0, CLI_SERVE_MAX, &a->so.rate);
  case RP_WAIT_SCRAPE: a->serve_only = p->name; return cli_opt_real(p, 0, CLI_SERVE_MAX, &a->so.wait_scrape);
  case RP_LINGER: a->serve_only = p->name; return cli_opt_real(p, 0, CLI_SERVE_MAX, &a->so.linger);
  default: return false; /* CLI_OPT_ERROR: already reported */
  }
}

/* The first option --fidelity cannot honour: it replays the faithful caching
 * policy from the snapshot's own state, settings and addresses, and prints
 * a text report. NULL when there is none. */
static const char *fidelity_conflict(const replay_args *a) {
  if (strcmp(a->o.policy, "caching")) return "--policy (it replays the caching policy)";
  if (a->o.placement == GRT_REPLAY_PLACE_FIRST_FIT) return "--placement first-fit (it hands out the recorded addresses)";
  if (a->o.capacity) return "--capacity (the device covers the recorded addresses)";
  if (a->o.conf) return "--conf (it replays the snapshot's own settings)";
  if (a->o.from_empty) return "--from-empty (it starts from the snapshot's own start)";
  if (a->model_set) return "--device-model (it hands out the recorded addresses)";
  if (a->fail_on_oom) return "--fail-on-oom (it scores the recorded OOMs)";
  if (!a->o.honor_releases) return "--no-releases (it replays the recorded releases)";
  if (a->search) return "--search";
  if (a->csv) return "--csv";
  if (a->html) return "--html (it prints a text report)";
  if (a->timeline) return "--timeline (it prints a text report)";
  return NULL;
}

/* Options that contradict each other; CLI_ARGS_OK when there are none. */
static int replay_conflicts(const cli_opts *p, replay_args *a) {
  if (a->csv && a->json) return cli_opts_fail(p, "--csv and --json are two outputs; pick one");
  if (a->search && a->no_search) return cli_opts_fail(p, "--search and --no-search contradict each other");
  if (a->serve_only && !a->serve) return cli_opts_fail(p, "--%s goes with --serve HOST:PORT", a->serve_only);
  if (a->serve && (a->fidelity || a->csv || a->json || a->html || a->timeline || a->search || a->fail_on_oom))
    return cli_opts_fail(p, "--serve does not combine with --fidelity, --csv, --json, --html, --timeline, --search "
                            "or --fail-on-oom");
  int cap = cli_run_opts_settle(p, &a->o);
  if (cap != CLI_ARGS_OK) return cap;
  const char *why = a->fidelity ? fidelity_conflict(a) : NULL;
  if (why) return cli_opts_fail(p, "--fidelity does not combine with %s", why);
  return CLI_ARGS_OK;
}

/* CLI_ARGS_OK or the exit status. */
static int replay_parse(int argc, char **argv, replay_args *a) {
  cli_opts p;
  cli_opts_init(&p, "replay", argc, argv, replay_options, false);
  if (p.help) {
    usage(stdout);
    return 0;
  }
  for (int c; (c = cli_opts_next(&p)) != CLI_OPT_END;) {
    if (c == CLI_OPT_POSITIONAL) {
      if (a->path) return cli_opts_fail(&p, "one trace at a time; `gpurt compare` takes several");
      a->path = p.arg;
    } else if (!replay_option(&p, c, a)) {
      return 2;
    }
  }
  if (!a->path) {
    usage(stderr);
    return 2;
  }
  return replay_conflicts(&p, a);
}

int grt_cmd_replay(int argc, char **argv) {
  replay_args a = {.path = NULL};
  cli_run_opts_default(&a.o);
  cli_serve_opts_default(&a.so);
  int parsed = replay_parse(argc, argv, &a);
  if (parsed != CLI_ARGS_OK) return parsed;
  cli_run_opts o = a.o;
  const char *path = a.path, *html = a.html;
  bool csv = a.csv, json = a.json;
  if (a.serve) return cli_replay_serve(path, &o, &a.so);
  if (a.fidelity) return cli_fidelity(path, a.device_set ? o.device : -1, json);
  o.series = csv || json || html || a.timeline;
  o.search = a.search ? 1 : a.no_search ? 0 : -1;
  o.snapshots = html != NULL;
  cli_run run;
  /* --timeline reads the recorded events too: the trace is loaded once for both */
  grt_trace *t = a.timeline ? cli_load_trace("replay", path, o.device) : NULL;
  if (a.timeline && !t) return 1;
  int rc = t ? cli_run_loaded(t, path, &o, &run) : cli_run_trace(path, &o, &run);
  if (rc) {
    if (t && grt_trace_destroy(t)) rc = 1; /* the run's failure is the one reported */
    return rc;
  }
  if (csv) {
    print_csv(&run);
  } else if (json) {
    cli_print_summary_json(&run, true);
    printf("\n");
  } else {
    char b[32];
    printf("gpurt replay: %s (%s", cli_basename(path), run.format);
    if (run.n_events) printf(", %" PRIu64 " events", run.n_events);
    printf(")\npolicy %s on a %s %s%s\n\n", run.policy, grt_format_bytes(run.sum.capacity, b, sizeof b),
           cli_device_model_words(o.device_model),
           run.recorded ? " handing out the recorded segment addresses" : "");
    cli_print_summary(&run);
  }
  if (html) {
    rc = cli_write_html(html, cli_basename(path), &run, 1);
    if (!rc && !csv && !json) printf("\nreport: %s\n", html);
  }
  if (!rc && a.timeline) {
    rc = cli_write_replay_timeline(a.timeline, t, path, &run);
    if (!rc && !csv && !json) printf("timeline: %s\n", a.timeline);
  }
  if (!rc && a.fail_on_oom && run.sum.ooms) rc = 3;
  cli_run_free(&run);
  grt_status dst = t ? grt_trace_destroy(t) : GRT_OK;
  if (dst && !rc) rc = cli_fail_status("replay", "grt_trace_destroy", dst, NULL);
  return rc;
}
