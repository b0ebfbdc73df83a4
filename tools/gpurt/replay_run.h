/* replay_run.h — one replay as the CLI runs it (load or stream, progress bar,
 * capacity search, snapshots for the report), shared by replay and compare. */
#ifndef GRT_TOOLS_REPLAY_RUN_H
#define GRT_TOOLS_REPLAY_RUN_H

#include <stdbool.h>

#include "gpurt/replay.h"

typedef struct cli_run_opts {
  const char *cmd;            /* the command reporting failures ("replay", "compare", ...) */
  const char *policy, *conf;
  uint64_t capacity;          /* 0 = automatic */
  grt_replay_placement placement;
  bool honor_releases;
  int device;
  bool series;                /* keep the per-step series */
  int search;                 /* -1 auto (traces under 2M events), 0 off, 1 on */
  bool snapshots;             /* segment maps at the peak and at the first OOM (a second pass) */
  bool from_empty;            /* PyTorch snapshots: start from an empty allocator, not the rebuilt start */
  grt_device_model device_model; /* what-if replays: paged until a GPU says cudaMalloc needs contiguity */
  double memory_fraction;     /* --memory-fraction: per_process_memory_fraction over conf (0: none) */
  char conf_joined[1024];     /* conf with the fraction added */
} cli_run_opts;

typedef struct cli_run {
  const char *trace_path;
  char policy[64];
  const char *format;
  uint64_t n_events;
  bool recorded;              /* recorded segment addresses were handed out */
  grt_replay_summary sum;
  grt_replay_sample *samples; /* owned */
  size_t n_samples;
  bool have_series;
  uint64_t min_capacity;      /* 0 = not searched / not found */
  double heap_ratio;          /* min_capacity / peak live */
  bool search_failed;
  char search_note[128];
  grt_alloc_snapshot *at_peak, *at_oom; /* owned, may be NULL */
  bool rebuilt;               /* started from the snapshot's rebuilt start state */
  bool have_recorded;         /* rec holds the recorded run's own figures (PyTorch snapshots) */
  grt_trace_recorded rec;
  uint64_t peak_event, oom_event;
} cli_run;

void cli_run_opts_default(cli_run_opts *o);
/* After the options are read: the capacity checked for the device model,
 * --memory-fraction joined to --conf, and the settings parsed as the replay
 * will parse them, so a mistake is reported before any trace is read and
 * the settings accepted without effect are named on stderr. CLI_ARGS_OK or
 * the exit status. */
struct cli_opts;
int cli_run_opts_settle(const struct cli_opts *p, cli_run_opts *o);
/* "paged device (...)": the device model in words, for reports. */
const char *cli_device_model_words(grt_device_model m);
/* The replay configuration the options describe (no step callback). */
void cli_run_config(const cli_run_opts *o, grt_replay_config *c);
/* Loads (or streams) and replays path; prints errors; 0 on success. */
int cli_run_trace(const char *path, const cli_run_opts *o, cli_run *run);
/* Opens a replay of t with c and, for a PyTorch snapshot replayed by the
 * caching policy on the recorded addresses (and not o->from_empty), rebuilds
 * the state at the moment recording began (*rebuilt says whether). Prints
 * failures; 0 on success. */
int cli_run_open(const grt_trace *t, const char *path, const cli_run_opts *o, const grt_replay_config *c,
                 grt_replay **out, bool *rebuilt);
/* Replays an already loaded trace. */
int cli_run_loaded(const grt_trace *t, const char *path, const cli_run_opts *o, cli_run *run);
void cli_run_free(cli_run *run);

void cli_print_summary(const cli_run *run);
void cli_print_summary_json(const cli_run *run, bool with_series);
/* Writes the HTML report of n runs (cmd_html.c); 0 on success. */
int cli_write_html(const char *file, const char *title, const cli_run *runs, size_t n);
/* `gpurt replay TRACE --serve` (replay_serve.c): replays path at a pace
 * while serving live /metrics; `so` is a cli_serve_opts (serve_run.h). */
struct cli_serve_opts;
int cli_replay_serve(const char *path, const cli_run_opts *o, const struct cli_serve_opts *so);
/* `gpurt replay --fidelity` (cmd_fidelity.c); its conflicting options were refused when parsed. */
/* device < 0: every device the snapshot traced. */
int cli_fidelity(const char *path, int device, bool json);

#endif
