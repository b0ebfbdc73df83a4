/* cmd_doctor.c — `gpurt doctor SNAPSHOT`: one screen for a person whose run
 * OOMed or whose reserved memory dwarfs its allocated memory: the verdict
 * and the numbers behind it, the segments live blocks pin, and the setting
 * to paste, with what it saves (gpurt/doctor.h). */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "input.h"
#include "cli_opts.h"
#include "cli_status.h"
#include "gpurt/doctor.h"
#include "replay_run.h"
#include "replay_util.h"
#include "whatif_run.h"

static void usage(FILE *f) {
  fprintf(f,
          "usage: gpurt doctor SNAPSHOT [--capacity BYTES] [--device N] [--device-model paged|contiguous]\n"
          "                    [--json] [--fail-on-oom] [--html FILE]\n\n"
          "Examines a PyTorch memory snapshot: whether its OOM was demand or fragmentation (with the numbers\n"
          "at the peak and at the first OOM, from the faithful replay), the segments live blocks pin, the\n"
          "runtime contract's rules the recorded run kept or broke (docs/RUNTIME_CONTRACT.md), and\n"
          "the PYTORCH_CUDA_ALLOC_CONF that would have done best at the capacity (default: the memory the\n"
          "snapshot shows the process had at its first OOM, or under what a full device refused), with what\n"
          "it saves (the `gpurt whatif` sweep).\n"
          "  --fail-on-oom     exit 3 when the snapshot's own settings OOM at the capacity\n"
          "  --html FILE       also write the snapshot's page (gpurt report: timeline, state, figures)\n");
  fputs(CLI_INPUT_HELP, f);
}

enum { DR_CAPACITY = 256, DR_DEVICE, DR_DEVICE_MODEL, DR_JSON, DR_FAIL, DR_HTML };

static const struct option doctor_options[] = {
    {"capacity", required_argument, NULL, DR_CAPACITY},
    {"device", required_argument, NULL, DR_DEVICE},
    {"device-model", required_argument, NULL, DR_DEVICE_MODEL},
    {"json", no_argument, NULL, DR_JSON},
    {"fail-on-oom", no_argument, NULL, DR_FAIL},
    {"html", required_argument, NULL, DR_HTML},
    CLI_OPT_MAX_INPUT_ENTRY,
    CLI_OPT_HELP_ENTRY,
    {NULL, 0, NULL, 0},
};

static bool doctor_arg(const cli_opts *p, int c, cli_whatif_args *a) {
  switch (c) {
  case DR_CAPACITY: return cli_opt_bytes(p, &a->o.capacity);
  case DR_DEVICE: return cli_opt_device(p, &a->device);
  case DR_DEVICE_MODEL: return cli_opt_device_model(p, &a->o.device_model);
  case DR_JSON: a->json = true; return true;
  case DR_FAIL: a->fail_on_oom = true; return true;
  case DR_HTML: a->html = p->arg; return true;
  case CLI_OPT_POSITIONAL:
    if (a->path) {
      cli_opts_fail(p, "one snapshot at a time");
      return false;
    }
    a->path = p->arg;
    return true;
  default: return false; /* CLI_OPT_ERROR: already reported */
  }
}

static void print_moment(const char *what, const grt_doctor_moment *m) {
  char b[7][32];
  if (!m->valid) return;
  printf("  %-12s reserved %s, allocated %s (requested %s), largest free block %s\n", what,
         grt_format_bytes(m->reserved, b[0], 32), grt_format_bytes(m->allocated, b[1], 32),
         grt_format_bytes(m->requested, b[2], 32), grt_format_bytes(m->largest_free, b[3], 32));
  printf("  %-12s fragmentation: internal %s (rounding), external %s (cached free: %s releasable, %s pinned)\n", "",
         grt_format_bytes(m->internal_fragmentation, b[4], 32), grt_format_bytes(m->external_fragmentation, b[5], 32),
         grt_format_bytes(m->releasable, b[6], 32),
         grt_format_bytes(m->external_fragmentation - (m->releasable < m->external_fragmentation ? m->releasable
                                                                                                  : m->external_fragmentation),
                          b[0], 32));
}

/* The innermost frame worth showing of a stack, "name (file:line)", or NULL. */
static const grt_trace_frame *shown_frame(const grt_trace *t, uint32_t stack) {
  const grt_trace_frame *f;
  size_t n, keep[1];
  if (!stack || grt_trace_stack(t, stack, &f, &n) || !grt_trace_frames_fold(f, n, keep, 1)) return NULL;
  return &f[keep[0]];
}

static void print_pinned(const grt_trace *t, const grt_doctor_report *rep) {
  char b[3][32];
  if (!rep->n_pinned) return;
  printf("\nsegments an empty_cache cannot give back (live blocks pin their free bytes), at the %s:\n",
         rep->oom.valid ? "first OOM" : "peak");
  for (size_t i = 0; i < rep->n_pinned; i++) {
    const grt_doctor_pinned *p = &rep->pinned[i];
    printf("  0x%" PRIx64 "  %9s segment, %9s free, %" PRIu64 " live block%s (%s)", p->address,
           grt_format_bytes(p->size, b[0], 32), grt_format_bytes(p->free_bytes, b[1], 32), p->live_blocks,
           p->live_blocks == 1 ? "" : "s", grt_format_bytes(p->live_bytes, b[2], 32));
    if (p->first_live_event != UINT64_MAX) printf("; first allocated at event %" PRIu64, p->first_live_event);
    printf("\n");
    const grt_trace_frame *fr = shown_frame(t, p->first_live_stack);
    if (fr) printf("      pinned by %s (%s:%" PRId64 ")\n", fr->name, fr->filename, (int64_t)fr->line);
  }
}

/* The recommendation: the sweep's best row against the snapshot's own settings. */
static void print_recommendation(const grt_whatif_advice *w, const cli_whatif_args *a) {
  char b[3][32];
  const grt_whatif_row *own = NULL;
  for (size_t i = 0; i < w->n; i++)
    if (!w->rows[i].conf[0]) own = &w->rows[i];
  long best = w->best;
  printf("\nrecommendation (%zu settings replayed on a %s %s; capacity: %s):\n", w->n,
         w->capacity ? grt_format_bytes(w->capacity, b[0], 32) : "1 TiB", cli_device_model_words(a->o.device_model),
         w->capacity_from);
  if (!own || own->status) {
    printf("  none: the snapshot's own settings could not be replayed\n");
    return;
  }
  if (best < 0) {
    printf("  keep the snapshot's settings: no setting tried does better (%" PRIu64 " OOMs, peak reserved %s)\n",
           own->ooms, grt_format_bytes(own->peak_reserved, b[0], 32));
    return;
  }
  const grt_whatif_row *r = &w->rows[best];
  printf("  PYTORCH_CUDA_ALLOC_CONF=%s\n", r->conf);
  printf("  OOMs %" PRIu64 " -> %" PRIu64 ", peak reserved %s -> %s", own->ooms, r->ooms,
         grt_format_bytes(own->peak_reserved, b[0], 32), grt_format_bytes(r->peak_reserved, b[1], 32));
  if (r->peak_reserved < own->peak_reserved)
    printf(" (saves %s)", grt_format_bytes(own->peak_reserved - r->peak_reserved, b[2], 32));
  printf(", device calls %" PRIu64 " -> %" PRIu64 "\n", own->device_mallocs + own->device_frees,
         r->device_mallocs + r->device_frees);
  printf("  (both replayed the same way; `gpurt whatif %s` shows every setting)\n", cli_basename(a->path));
}

/* A site's frames as the fold shows them: at most three, "name (file:line)". */
static void print_site_frames(const grt_trace *t, uint32_t stack) {
  const grt_trace_frame *f;
  size_t n, keep[3];
  if (!stack || grt_trace_stack(t, stack, &f, &n)) {
    printf("      (no Python frames recorded: allocated off the Python thread, as autograd's backward pass is)\n");
    return;
  }
  size_t k = grt_trace_frames_fold(f, n, keep, 3);
  for (size_t i = 0; i < k && i < 3; i++)
    printf("      %s (%s:%" PRId64 ")\n", f[keep[i]].name, f[keep[i]].filename, (int64_t)f[keep[i]].line);
  if (k > 3) printf("      ... %zu more\n", k - 3);
}

static void print_sites(const grt_trace *t, const char *when, const grt_doctor_moment *m,
                        const grt_doctor_site *sites, size_t n) {
  char b[32], c[32];
  if (!m->valid) return;
  printf("\nwhich code held the memory %s (bytes live by allocation site, allocator frames folded):\n", when);
  if (m->requested > m->traced)
    printf("  %10s live since before recording began, not in the snapshot's blocks\n",
           grt_format_bytes(m->requested - m->traced, b, 32));
  if (!n) printf("  %10s allocated by the trace\n", grt_format_bytes(0, c, 32));
  for (size_t i = 0; i < n; i++) {
    printf("  %10s in %" PRIu64 " allocation%s\n", grt_format_bytes(sites[i].bytes, b, 32), sites[i].count,
           sites[i].count == 1 ? "" : "s");
    print_site_frames(t, sites[i].stack);
  }
}

static void print_contract(const grt_trace *t, const grt_doctor_report *rep) {
  const grt_doctor_steady *s = &rep->steady;
  printf("\nruntime contract (docs/RUNTIME_CONTRACT.md), as the recorded run kept it:\n");
  if (s->found)
    printf("  the loop: %" PRIu64 " iterations of about %" PRIu64 " allocations; warm-up ends at event %" PRIu64 "\n",
           s->iterations, s->period, s->from_event);
  for (int i = 0; i < GRT_CONTRACT_RULE_COUNT; i++) {
    const grt_contract_finding *f = &rep->contract[i];
    printf("  %-7s %-20s %s", grt_contract_outcome_name(f->outcome), grt_contract_rule_name((grt_contract_rule)i), f->detail);
    if (f->count && f->time_us > 0) printf("; %.3f ms recorded", (double)f->time_us / 1000.0);
    printf("\n");
    const grt_trace_frame *fr = f->outcome == GRT_CONTRACT_BROKEN ? shown_frame(t, f->stack) : NULL;
    if (fr)
      printf("  %-28s first at event %" PRIu64 ": %s (%s:%" PRId64 ")\n", "", f->first_event, fr->name,
             fr->filename, (int64_t)fr->line);
  }
}

static void print_text(const grt_trace *t, const grt_doctor_report *rep, const grt_whatif_advice *w,
                       const cli_whatif_args *a) {
  printf("gpurt doctor: %s (device %d)\n\n", cli_basename(a->path), a->device);
  printf("verdict: %s\n  %s\n\n", grt_doctor_verdict_name(rep->verdict), rep->why);
  print_moment("at the peak:", &rep->peak);
  print_moment("at the OOM:", &rep->oom);
  if (rep->partial) printf("  (the trace began mid-run: the state when recording began was rebuilt)\n");
  print_sites(t, "at the peak", &rep->peak, rep->peak_sites, rep->n_peak_sites);
  print_sites(t, "at the first OOM", &rep->oom, rep->oom_sites, rep->n_oom_sites);
  print_pinned(t, rep);
  print_contract(t, rep);
  print_recommendation(w, a);
}

static int print_json(const grt_trace *t, const grt_doctor_report *rep, const grt_whatif_advice *w,
                      const cli_whatif_args *a) {
  char *text = NULL;
  grt_status st = grt_doctor_json(t, rep, w, cli_basename(a->path), a->device, &text);
  if (st) return cli_fail_status("doctor", "grt_doctor_json", st, NULL);
  fputs(text, stdout);
  free(text);
  return 0;
}

static int doctor_loaded(const grt_trace *t, const cli_whatif_args *a) {
  grt_doctor_report rep;
  char err[512];
  grt_status st = grt_doctor_examine(t, &rep, err, sizeof err);
  if (st) {
    fprintf(stderr, "gpurt doctor: %s: %s (%s)\n", cli_basename(a->path), err, grt_status_str(st));
    return 1;
  }
  grt_whatif_advice w;
  int rc = cli_whatif_sweep(t, a, &w);
  if (rc) return rc;
  if (a->json)
    rc = print_json(t, &rep, &w, a);
  else
    print_text(t, &rep, &w, a);
  for (size_t i = 0; i < w.n && a->fail_on_oom; i++)
    if (!w.rows[i].conf[0] && (w.rows[i].status || w.rows[i].ooms)) rc = 3;
  grt_whatif_advice_free(&w);
  if (a->html) { /* after the screen; the page's line on stderr, so --json stays one object */
    fflush(stdout);
    int hrc = cli_report_save("doctor", t, &rep, a->path, a->device, a->html, stderr);
    if (hrc && (!rc || rc == 3)) rc = hrc;
  }
  return rc;
}

int grt_cmd_doctor(int argc, char **argv) {
  cli_whatif_args a;
  memset(&a, 0, sizeof a);
  grt_whatif_options_default(&a.o);
  cli_opts p;
  cli_opts_init(&p, "doctor", argc, argv, doctor_options, false);
  if (p.help) {
    usage(stdout);
    return 0;
  }
  for (int c; (c = cli_opts_next(&p)) != CLI_OPT_END;)
    if (!doctor_arg(&p, c, &a)) return 2;
  if (!a.path) {
    usage(stderr);
    return 2;
  }
  int cap = cli_opts_check_capacity(&p, a.o.capacity, a.o.device_model);
  if (cap != CLI_ARGS_OK) return cap;
  grt_trace *t = cli_load_trace("doctor", a.path, a.device);
  if (!t) return 1;
  int rc = doctor_loaded(t, &a);
  grt_status st = grt_trace_destroy(t);
  if (st && !rc) rc = cli_fail_status("doctor", "grt_trace_destroy", st, NULL);
  return rc;
}
