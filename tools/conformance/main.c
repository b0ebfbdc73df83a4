/* main.c — gpurt-conformance: runs each semantic case on the simulated device
 * and, where a GPU and driver are present, on CUDA; prints a markdown table
 * (case | expected (CUDA semantics) | sim | cuda). Exit 0 when nothing failed.
 * Usage: gpurt-conformance [--sim-only] */
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "conformance.h"

static result make(rkind k, const char *fmt, va_list ap) {
  result r = {k, ""};
  vsnprintf(r.note, sizeof r.note, fmt, ap);
  return r;
}
result r_pass(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  result r = make(R_PASS, fmt, ap);
  va_end(ap);
  return r;
}
result r_fail(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  result r = make(R_FAIL, fmt, ap);
  va_end(ap);
  return r;
}
result r_na(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  result r = make(R_NA, fmt, ap);
  va_end(ap);
  return r;
}

void conf_append_error(result *r, grt_device *dev) {
  char err[200];
  if (grt_device_last_error(dev, err, sizeof err) == GRT_OK && err[0]) {
    size_t n = strlen(r->note);
    snprintf(r->note + n, sizeof r->note - n, " [%s]", err);
  }
}

int conf_wait_flag(volatile int *flag, int ms) {
  struct timespec nap = {0, 1000000};
  for (int i = 0; i < ms && !__atomic_load_n(flag, __ATOMIC_SEQ_CST); i++) nanosleep(&nap, NULL);
  return __atomic_load_n(flag, __ATOMIC_SEQ_CST);
}

void conf_set_flag(void *arg) { __atomic_store_n((volatile int *)arg, 1, __ATOMIC_SEQ_CST); }

/* Markdown cells must not contain '|' or newlines. */
static void cell(const result *r) {
  static const char *const kinds[] = {"PASS", "**FAIL**", "n/a"};
  printf(" %s", kinds[r->kind]);
  if (r->note[0]) {
    printf(": ");
    for (const char *c = r->note; *c; c++) putchar(*c == '|' ? '/' : *c == '\n' ? ' ' : *c);
  }
  printf(" |");
}

int main(int argc, char **argv) {
  int sim_only = argc > 1 && strcmp(argv[1], "--sim-only") == 0;
  alarm(240); /* last resort: gates open by themselves, but never hang a CI job */
  setvbuf(stdout, NULL, _IOLBF, 0);
  backend sim = {"sim", NULL, 0}, cuda = {"cuda", NULL, 1};
  grt_device_config cfg;
  grt_device_config_default(&cfg);
  if (grt_device_create(&cfg, &sim.dev) != GRT_OK) return 2;
  char probe[512] = "";
  int n = 0;
  grt_status pst = sim_only ? GRT_ERR_NO_DEVICE : grt_cuda_probe(&n, probe, sizeof probe);
  if (sim_only) snprintf(probe, sizeof probe, "--sim-only given");
  char cuda_cell[800];
  if (pst == GRT_OK) pst = grt_device_create_cuda(0, &cuda.dev);
  if (pst == GRT_OK) {
    char name[128] = "?";
    grt_status nst = grt_cuda_device_name(cuda.dev, name, sizeof name);
    if (nst) snprintf(name, sizeof name, "? (%s)", grt_status_name(nst));
    snprintf(cuda_cell, sizeof cuda_cell, "%s, device 0: %s", probe, name);
  } else {
    snprintf(cuda_cell, sizeof cuda_cell, "no CUDA: %s (%s)", grt_status_name(pst), probe);
  }
  printf("# gpurt conformance\n\n");
  printf("- sim: the simulated device (1 GiB), gpurt's model\n- cuda: %s\n\n", cuda_cell);
  printf("| # | case | expected (CUDA semantics) | sim | cuda |\n|---|---|---|---|---|\n");
  int failures = 0, idx = 0;
  const ccase *lists[] = {conf_mem_cases, conf_stream_cases, conf_model_cases, conf_capture_cases};
  size_t counts[] = {conf_mem_count, conf_stream_count, conf_model_count, conf_capture_count};
  for (int l = 0; l < 4; l++) {
    for (size_t i = 0; i < counts[l]; i++) {
      const ccase *c = &lists[l][i];
      fprintf(stderr, "conformance: %s ...\n", c->name);
      result rs = c->run(&sim);
      result rc = cuda.dev ? c->run(&cuda) : r_na("no CUDA device");
      failures += (rs.kind == R_FAIL) + (rc.kind == R_FAIL);
      printf("| %d | %s | %s |", ++idx, c->name, c->expected);
      cell(&rs);
      cell(&rc);
      printf("\n");
    }
  }
  printf("\n%d case(s), %d failure(s); CUDA %s\n", idx, failures, cuda.dev ? "ran" : "not available");
  grt_status st = grt_device_destroy(cuda.dev);
  if (st) fprintf(stderr, "conformance: destroying the CUDA device: %s\n", grt_status_name(st));
  grt_status sst = grt_device_destroy(sim.dev); /* every case freed what it took: idle */
  if (sst) fprintf(stderr, "conformance: destroying the simulated device: %s\n", grt_status_name(sst));
  return failures || sst ? 1 : 0;
}
