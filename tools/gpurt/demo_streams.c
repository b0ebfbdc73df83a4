/* demo_streams.c — `gpurt demo streams`: the four stream scenarios (docs/EXEC.md) on both clocks.
 *
 * S1 overlap, S2 false serialization through the legacy default stream, S3 a
 * cross-stream use-after-free vs a stream-ordered free, S4 deadlocks reported
 * with their cycle. Writes one Chrome trace (Perfetto / chrome://tracing) per
 * scenario and clock into --out DIR (default out/timelines).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/rng.h"
#include "cli.h"
#include "cli_opts.h"
#include "cli_status.h"
#include "scenarios/scenario.h"
#include "scenarios/scenario_lifetime.h"

static const char *clock_name(grt_clock_kind c) { return c == GRT_CLOCK_VIRTUAL ? "virtual" : "threads"; }

static int mkdirs(const char *dir) {
  char path[1024];
  snprintf(path, sizeof path, "%s", dir);
  for (char *p = path + 1; *p; p++) {
    if (*p != '/') continue;
    *p = '\0';
    if (mkdir(path, 0755) && errno != EEXIST) return -1;
    *p = '/';
  }
  return mkdir(path, 0755) && errno != EEXIST ? -1 : 0;
}

static grt_exec *new_exec(grt_clock_kind clock, uint64_t seed) {
  grt_exec_config cfg;
  grt_exec_config_default(&cfg);
  cfg.clock = clock;
  cfg.device_capacity = 64 * GRT_MiB;
  cfg.record_timeline = 1;
  cfg.schedule_seed = seed;
  /* Slow copy engines so one chunk takes ~2 ms: sleeping is then far above
   * scheduler noise and the CPU-side copies are negligible. */
  cfg.h2d_gbps = 0.128;
  cfg.d2h_gbps = 0.128;
  grt_exec *exec = NULL;
  grt_status st = grt_exec_create(&cfg, &exec);
  if (st) cli_fail_status("demo streams", "grt_exec_create", st, NULL);
  return exec;
}

/* Writes the timeline; false (reported) when it could not. */
static int save(grt_exec *exec, const char *dir, const char *name, grt_clock_kind clock) {
  char path[1200], what[1300];
  snprintf(path, sizeof path, "%s/%s_%s.json", dir, name, clock_name(clock));
  grt_status st = grt_exec_timeline_save(exec, path);
  if (!st) {
    printf("  timeline: %s\n", path);
    return 1;
  }
  snprintf(what, sizeof what, "grt_exec_timeline_save %s", path);
  cli_fail_status("demo streams", what, st, NULL);
  return 0;
}

/* Reports the first failure of scenario scn under clock; returns 0 (did not behave). */
static int scenario_failed(const char *scn, grt_clock_kind clock, const cli_first *f) {
  char what[160];
  snprintf(what, sizeof what, "%s, %s clock: %s", scn, clock_name(clock), f->what);
  cli_fail_status("demo streams", what, f->st, f->msg);
  return 0;
}

static double ms(uint64_t ns) { return (double)ns / 1e6; }

static const grt__pipe_params pipe_params = {8, 256 * 1024, 2000000};

static int s1(const char *dir) {
  int ok = 1;
  printf("\nS1 overlap: %u chunks x 256 KiB, H2D -> compute (2 ms) -> D2H; one stream vs three joined by events\n"
         "  (threads: best of 3 runs per layout)\n",
         pipe_params.chunks);
  printf("  %-8s %-18s %12s %16s %9s\n", "clock", "layout", "measured", "DAG predicts", "speedup");
  for (int c = 1; c >= 0; c--) {
    grt_clock_kind clock = (grt_clock_kind)c;
    grt_exec *exec = new_exec(clock, 0);
    if (!exec) return 0;
    grt__pipe_result serial, piped, r;
    grt_status st = grt__scn_pipeline(exec, &pipe_params, GRT__PIPE_SERIAL, &serial);
    if (!st) st = grt__scn_pipeline(exec, &pipe_params, GRT__PIPE_STREAMS, &piped);
    /* Threads: best of 3 per layout, as benchmarks do — a loaded 2-core box
     * adds scheduling delays that have nothing to do with the model. */
    for (int rep = 1; rep < 3 && !st && clock == GRT_CLOCK_THREADS; rep++) {
      if (!(st = grt__scn_pipeline(exec, &pipe_params, GRT__PIPE_SERIAL, &r)) && r.elapsed_ns < serial.elapsed_ns)
        serial.elapsed_ns = r.elapsed_ns, serial.output_ok &= r.output_ok;
      if (!st && !(st = grt__scn_pipeline(exec, &pipe_params, GRT__PIPE_STREAMS, &r)) &&
          r.elapsed_ns < piped.elapsed_ns)
        piped.elapsed_ns = r.elapsed_ns, piped.output_ok &= r.output_ok;
    }
    cli_first f = CLI_FIRST_INIT;
    if (cli_keep_exec(&f, exec, "grt__scn_pipeline", st)) {
      cli_keep(&f, "grt_exec_destroy", grt_exec_destroy(exec));
      return scenario_failed("S1", clock, &f);
    }
    double speedup = (double)serial.elapsed_ns / (double)piped.elapsed_ns;
    printf("  %-8s %-18s %9.3f ms %13.3f ms %9s %s\n", clock_name(clock), "1 stream", ms(serial.elapsed_ns),
           ms(serial.predicted_ns), "", serial.elapsed_ns == serial.predicted_ns ? "(exact)" : "");
    printf("  %-8s %-18s %9.3f ms %13.3f ms %8.2fx %s\n", clock_name(clock), "3 streams + events",
           ms(piped.elapsed_ns), ms(piped.predicted_ns), speedup,
           piped.elapsed_ns == piped.predicted_ns ? "(exact)" : "");
    if (!serial.output_ok || !piped.output_ok) {
      printf("  output check FAILED\n");
      ok = 0;
    }
    if (clock == GRT_CLOCK_THREADS) {
      /* measured and printed, not required: a loaded machine or Valgrind changes it */
      printf("  threads speedup %.2fx vs the 1.7x target: %s\n", speedup, speedup >= 1.7 ? "PASS" : "MISS");
    } else {
      ok &= serial.elapsed_ns == serial.predicted_ns && piped.elapsed_ns == piped.predicted_ns;
    }
    ok &= save(exec, dir, "s1_overlap", clock);
    if (cli_keep(&f, "grt_exec_destroy", grt_exec_destroy(exec))) return scenario_failed("S1", clock, &f);
  }
  return ok;
}

static int s2(const char *dir) {
  int ok = 1;
  printf("\nS2 false serialization: the same pipeline, compute issued to the legacy default stream\n");
  printf("  %-8s %-43s %12s\n", "clock", "layout", "measured");
  for (int c = 1; c >= 0; c--) {
    grt_clock_kind clock = (grt_clock_kind)c;
    grt_exec *exec = new_exec(clock, 0);
    if (!exec) return 0;
    grt__pipe_result leg, nb, streams;
    grt_status st = grt__scn_pipeline(exec, &pipe_params, GRT__PIPE_LEGACY, &leg);
    if (!st) st = grt__scn_pipeline(exec, &pipe_params, GRT__PIPE_LEGACY_NB, &nb);
    if (!st) st = grt__scn_pipeline(exec, &pipe_params, GRT__PIPE_STREAMS, &streams);
    cli_first f = CLI_FIRST_INIT;
    if (cli_keep_exec(&f, exec, "grt__scn_pipeline", st)) {
      cli_keep(&f, "grt_exec_destroy", grt_exec_destroy(exec));
      return scenario_failed("S2", clock, &f);
    }
    printf("  %-8s %-43s %9.3f ms\n", clock_name(clock), "legacy compute + blocking copy streams", ms(leg.elapsed_ns));
    printf("  %-8s %-43s %9.3f ms\n", clock_name(clock), "legacy compute + non-blocking copy streams",
           ms(nb.elapsed_ns));
    printf("  %-8s %-43s %9.3f ms\n", clock_name(clock), "three non-blocking streams (S1)", ms(streams.elapsed_ns));
    printf("  %-8s lost overlap: %.3f ms (%.0f%% slower) — the legacy stream's implicit barriers\n",
           clock_name(clock), ms(leg.elapsed_ns - nb.elapsed_ns),
           100.0 * ((double)leg.elapsed_ns / (double)nb.elapsed_ns - 1.0));
    ok &= save(exec, dir, "s2_false_serialization", clock);
    if (cli_keep(&f, "grt_exec_destroy", grt_exec_destroy(exec))) return scenario_failed("S2", clock, &f);
  }
  return ok;
}

static int s3_clock(const char *dir, grt_clock_kind clock) {
  int bad[2] = {0, 0}, flagged[2] = {0, 0}, runs = 0, saved = 1;
  cli_first f = CLI_FIRST_INIT;
  /* Virtual: every schedule of a grid of durations, times 3 tie-break seeds.
   * Threads: 1,000 random schedules. Then one gated run each for the timeline. */
  for (uint64_t seed = 0; seed < (clock == GRT_CLOCK_VIRTUAL ? 3u : 1u) && !f.st; seed++) {
    grt_exec *exec = new_exec(clock, seed);
    if (!exec) return 0;
    grt__lifetime lt;
    if (cli_keep_exec(&f, exec, "grt__lifetime_init", grt__lifetime_init(&lt, exec, 4096))) {
      cli_keep(&f, "grt_exec_destroy", grt_exec_destroy(exec)); /* init cleaned up after itself */
      break;
    }
    grt__rng r;
    grt__rng_seed(&r, 7);
    int n = clock == GRT_CLOCK_VIRTUAL ? 81 : 1000;
    static const uint64_t d[3] = {0, 10000, 20000};
    for (int i = 0; i < n && !f.st; i++, runs++) {
      grt__lifetime_sched sc = {d[i % 3], d[i / 3 % 3] + 1000, d[i / 9 % 3], d[i / 27 % 3] + 1000, 0};
      if (clock == GRT_CLOCK_THREADS)
        sc = (grt__lifetime_sched){grt__rng_below(&r, 30000), grt__rng_below(&r, 30000), grt__rng_below(&r, 30000),
                                   grt__rng_below(&r, 30000), 0};
      for (int safe = 0; safe < 2 && !f.st; safe++) {
        int corrupted = 0;
        cli_keep_exec(&f, exec, "grt__lifetime_run", grt__lifetime_run(&lt, safe, &sc, (uint64_t)i, &corrupted));
        bad[safe] += corrupted;
        flagged[safe] += lt.reports > 0;
      }
    }
    if (!f.st && seed == 0) {
      grt__lifetime_sched gated = {500000, 1000000, 0, 500000, 1};
      int c0 = 0, c1 = 0;
      grt_sorder_report rep;
      grt_status got = GRT_ERR_NOT_FOUND;
      if (!cli_keep_exec(&f, exec, "grt_exec_timeline_clear", grt_exec_timeline_clear(exec)) &&
          !cli_keep(&f, "grt_sorder_clear_reports", grt_sorder_clear_reports(lt.so)) &&
          !cli_keep_exec(&f, exec, "grt__lifetime_run", grt__lifetime_run(&lt, 0, &gated, 99, &c0))) {
        got = grt_sorder_get_report(lt.so, 0, &rep);
        if (got != GRT_ERR_NOT_FOUND) cli_keep(&f, "grt_sorder_get_report", got); /* NOT_FOUND: nothing flagged */
      }
      if (!f.st && !got) printf("  %-8s sanitizer: %s\n", clock_name(clock), rep.text);
      if (!f.st && !cli_keep_exec(&f, exec, "grt__lifetime_run", grt__lifetime_run(&lt, 1, &gated, 99, &c1))) {
        printf("  %-8s gated run (writer lands first): host-order free %s, stream-ordered free %s\n", clock_name(clock),
               c0 ? "CORRUPTED (checksum mismatch)" : "clean", c1 ? "CORRUPTED" : "clean");
        saved = save(exec, dir, "s3_lifetime", clock);
      }
    }
    cli_keep_exec(&f, exec, "grt__lifetime_fini", grt__lifetime_fini(&lt));
    cli_keep(&f, "grt_exec_destroy", grt_exec_destroy(exec));
  }
  if (f.st) return scenario_failed("S3", clock, &f);
  printf("  %-8s %d schedules: host-order free corrupted %d (%.0f%%), stream-ordered free corrupted %d\n",
         clock_name(clock), runs, bad[0], 100.0 * bad[0] / runs, bad[1]);
  printf("  %-8s sanitizer flagged the host-order free on %d/%d schedules, the stream-ordered free on %d/%d\n",
         clock_name(clock), flagged[0], runs, flagged[1], runs);
  /* Safety holds on every schedule under both clocks; that the unsafe free
     actually corrupts is a timing fact under threads (e.g. not under Valgrind):
     printed, not required, there. */
  int corrupts = clock == GRT_CLOCK_VIRTUAL ? bad[0] > 0 : 1;
  return bad[1] == 0 && corrupts && flagged[0] == runs && flagged[1] == 0 && saved;
}

static int s3(const char *dir) {
  printf("\nS3 lifetime: kernel on A reads B; host frees B at once; the pool hands B to C, which writes it\n");
  int ok = s3_clock(dir, GRT_CLOCK_VIRTUAL);
  ok &= s3_clock(dir, GRT_CLOCK_THREADS);
  return ok;
}

static int s4(const char *dir) {
  static const struct {
    grt__deadlock_case c;
    const char *what;
  } cases[] = {
      {GRT__DL_UEV_CYCLE, "user events waited in a cycle across 2 streams"},
      {GRT__DL_UEV_CYCLE3, "3 streams: user events + one plain event edge"},
      {GRT__DL_HOST_FN, "host function waits for work issued after it"},
      {GRT__DL_HOST_FN_CROSS, "host function waits for a stream that waits for it"},
      {GRT__DL_PLAIN_EVENTS, "plain events recorded and waited 'in a cycle'"},
  };
  int ok = 1;
  printf("\nS4 deadlock: detected at quiescence, reported with the cycle (never a hang)\n");
  for (int c = 1; c >= 0; c--) {
    grt_clock_kind clock = (grt_clock_kind)c;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
      grt_exec *exec = new_exec(clock, 0);
      if (!exec) return 0;
      char msg[1024] = "";
      grt_status st = grt__scn_deadlock(exec, cases[i].c, msg, sizeof msg);
      printf("  %-8s %-52s -> %s\n", clock_name(clock), cases[i].what, grt_status_name(st));
      if (st) printf("           %s\n", msg);
      ok &= cases[i].c == GRT__DL_PLAIN_EVENTS ? st == GRT_OK : st == GRT_ERR_DEADLOCK;
      if (i == 0) ok &= save(exec, dir, "s4_deadlock", clock);
      cli_first f = CLI_FIRST_INIT;
      if (cli_keep(&f, "grt_exec_destroy", grt_exec_destroy(exec))) return scenario_failed("S4", clock, &f);
    }
  }
  return ok;
}

enum { STREAMS_OUT = 256 };

static const struct option streams_options[] = {
    {"out", required_argument, NULL, STREAMS_OUT},
    CLI_OPT_HELP_ENTRY,
    {NULL, 0, NULL, 0},
};

int grt_demo_streams(int argc, char **argv) {
  const char *dir = "out/timelines";
  cli_opts p;
  cli_opts_init(&p, "demo streams", argc, argv, streams_options, false);
  if (p.help) {
    printf("usage: gpurt demo streams [--out DIR]\n"
           "  The stream scenarios (overlap, false serialization, lifetime, deadlock) under the\n"
           "  threads and virtual clocks; one Chrome trace per scenario and clock in DIR\n"
           "  (default out/timelines; open in https://ui.perfetto.dev or chrome://tracing).\n");
    return 0;
  }
  for (int c; (c = cli_opts_next(&p)) != CLI_OPT_END;) {
    if (c != STREAMS_OUT) return c == CLI_OPT_POSITIONAL ? cli_opts_unexpected(&p) : 2;
    dir = p.arg;
  }
  if (mkdirs(dir)) {
    fprintf(stderr, "gpurt demo streams: cannot create %s: %s\n", dir, strerror(errno));
    return 1;
  }
  printf("gpurt demo streams — CUDA stream/event semantics, virtual clock (exact) and threads (real)\n");
  int ok = s1(dir);
  ok &= s2(dir);
  ok &= s3(dir);
  ok &= s4(dir);
  printf("\n%s\n", ok ? "all scenarios behaved as expected" : "SOME SCENARIOS DID NOT BEHAVE AS EXPECTED");
  return ok ? 0 : 1;
}
