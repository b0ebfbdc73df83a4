/* conformance.h — the semantic cases run on each backend by gpurt-conformance.
 *
 * A case runs against one backend (a simulated or a CUDA device) and returns
 * PASS / FAIL with a short note of what it measured, or N/A when the backend
 * has no such feature. The simulated device has no streams (that is the
 * executor's job, in another layer), so on sim the stream cases run on the
 * executor instead. main.c prints the markdown table.
 */
#ifndef GRT_TOOLS_CONFORMANCE_H
#define GRT_TOOLS_CONFORMANCE_H

#include <stdio.h>

#include "gpurt/alloc.h"
#include "gpurt/cuda.h"

typedef enum { R_PASS, R_FAIL, R_NA } rkind;

typedef struct result {
  rkind kind;
  char note[480];
} result;

typedef struct backend {
  const char *name; /* "sim" or "cuda" */
  grt_device *dev;
  int is_cuda;
} backend;

typedef struct ccase {
  const char *name;
  const char *expected; /* CUDA's behaviour, in a few words */
  result (*run)(backend *b);
} ccase;

result r_pass(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
result r_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
result r_na(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Fails the case with the location and the device's last error. */
#define CHECK(b, cond, ...)                                                                  \
  do {                                                                                      \
    if (!(cond)) {                                                                          \
      result r_ = r_fail(__VA_ARGS__);                                                      \
      conf_append_error(&r_, (b)->dev);                                                     \
      return r_;                                                                            \
    }                                                                                       \
  } while (0)
#define CHECK_OK(b, expr) CHECK(b, (expr) == GRT_OK, "%s failed (line %d)", #expr, __LINE__)

/* A case that measures first and judges after its cleanup collects the
 * statuses of the calls it does not judge one by one (gate opens,
 * synchronizes, stats, frees, destroys) with KEEP; CHECK_KEPT fails the case
 * with the first of them that failed. */
typedef struct conf_first {
  grt_status st;
  const char *call;
  int line;
} conf_first;
#define CONF_FIRST_INIT {GRT_OK, NULL, 0}
static inline void conf_keep(conf_first *f, grt_status st, const char *call, int line) {
  if (f->st == GRT_OK && st != GRT_OK) *f = (conf_first){st, call, line};
}
#define KEEP(f, expr) conf_keep(&(f), (expr), #expr, __LINE__)
#define CHECK_KEPT(b, f) \
  CHECK(b, (f).st == GRT_OK, "%s failed: %s (line %d)", (f).call, grt_status_name((f).st), (f).line)

void conf_append_error(result *r, grt_device *dev);
/* Polls *flag (set by a host function) for up to ms milliseconds; returns its value. */
int conf_wait_flag(volatile int *flag, int ms);
/* A host function setting *(volatile int *)arg = 1. */
void conf_set_flag(void *arg);

extern const ccase conf_mem_cases[];
extern const size_t conf_mem_count;
extern const ccase conf_stream_cases[];
extern const size_t conf_stream_count;
/* The stream cases' questions asked of the executor (cases_exec.c): the sim
 * column of cases_stream.c, whose simulated device has no streams itself. */
result conf_exec_event_snapshot(void);
result conf_exec_never_recorded(void);
result conf_exec_legacy_stream(void);
result conf_exec_host_func_order(void);
result conf_exec_copies(void);
result conf_exec_destroy_pending(void);
/* Run after the stream cases, so that the numbers docs/CONFORMANCE.md cites
 * for the cases before it stay theirs; it also fills most of the GPU, best
 * done when nothing else follows. */
extern const ccase conf_model_cases[];
extern const size_t conf_model_count;
extern const ccase conf_capture_cases[];
extern const size_t conf_capture_count;

#endif
