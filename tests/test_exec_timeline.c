/* test_exec_timeline.c — the Chrome trace-event export: parsed back with a
 * small strict JSON checker (grammar, string escapes) and checked for the
 * expected keys: tracks per stream and engine, slices, flow arrows. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "scenarios/scenario.h"
#include "test_exec_common.h"

/* ---- a strict recursive-descent JSON validator ---- */
typedef struct jp {
  const char *p;
  int depth;
} jp;

static void ws(jp *j) {
  while (*j->p == ' ' || *j->p == '\n' || *j->p == '\t' || *j->p == '\r') j->p++;
}

static int value(jp *j);

static int string(jp *j) {
  if (*j->p != '"') return 0;
  for (j->p++; *j->p != '"'; j->p++) {
    unsigned char c = (unsigned char)*j->p;
    if (c < 0x20) return 0; /* raw control characters are invalid */
    if (c == '\\') {
      j->p++;
      if (*j->p == 'u') {
        for (int i = 1; i <= 4; i++)
          if (!strchr("0123456789abcdefABCDEF", j->p[i]) || !j->p[i]) return 0;
        j->p += 4;
      } else if (!*j->p || !strchr("\"\\/bfnrt", *j->p)) {
        return 0;
      }
    }
  }
  j->p++;
  return 1;
}

static int number(jp *j) {
  const char *s = j->p;
  if (*j->p == '-') j->p++;
  while (*j->p >= '0' && *j->p <= '9') j->p++;
  if (*j->p == '.') {
    j->p++;
    while (*j->p >= '0' && *j->p <= '9') j->p++;
  }
  return j->p > s;
}

static int seq(jp *j, char close, int members) {
  j->p++;
  ws(j);
  if (*j->p == close) {
    j->p++;
    return 1;
  }
  for (;;) {
    ws(j);
    if (members) {
      if (!string(j)) return 0;
      ws(j);
      if (*j->p++ != ':') return 0;
    }
    if (!value(j)) return 0;
    ws(j);
    if (*j->p == ',') {
      j->p++;
      continue;
    }
    if (*j->p++ != close) return 0;
    return 1;
  }
}

static int value(jp *j) {
  ws(j);
  if (++j->depth > 64) return 0;
  int ok;
  if (*j->p == '{') ok = seq(j, '}', 1);
  else if (*j->p == '[') ok = seq(j, ']', 0);
  else if (*j->p == '"') ok = string(j);
  else if (!strncmp(j->p, "true", 4) || !strncmp(j->p, "null", 4)) ok = (j->p += 4, 1);
  else if (!strncmp(j->p, "false", 5)) ok = (j->p += 5, 1);
  else ok = number(j);
  j->depth--;
  return ok;
}

static int json_valid(const char *text) {
  jp j = {text, 0};
  if (!value(&j)) return 0;
  ws(&j);
  return *j.p == '\0';
}

static size_t count(const char *hay, const char *needle) {
  size_t n = 0;
  for (const char *p = hay; (p = strstr(p, needle)); p++) n++;
  return n;
}

static char *export_json(grt_exec *exec) {
  FILE *f = tmpfile();
  assert_non_null(f);
  assert_int_equal(grt_exec_timeline_write_json(exec, f), GRT_OK);
  long n = ftell(f);
  rewind(f);
  char *buf = calloc(1, (size_t)n + 1);
  assert_int_equal(fread(buf, 1, (size_t)n, f), (size_t)n);
  fclose(f);
  return buf;
}

static void test_validator_self_check(void **state) {
  (void)state;
  assert_true(json_valid("{\"a\":[1,2.5,{\"b\":\"x\\\"y\\u0001\"}],\"c\":true}"));
  assert_false(json_valid("{\"a\":[1,2}"));
  assert_false(json_valid("{\"a\":\"raw\nnewline\"}"));
  assert_false(json_valid("{\"a\":\"bad \\q escape\"}"));
  assert_false(json_valid("{\"a\":1}}"));
}

static void test_pipeline_timeline(void **state) {
  grt_exec *exec = make_exec(clock_of(state), 1);
  grt__pipe_params p = {4, 16 * 1024, 5000};
  grt__pipe_result r;
  assert_int_equal(grt__scn_pipeline(exec, &p, GRT__PIPE_STREAMS, &r), GRT_OK);
  size_t n;
  assert_int_equal(grt_exec_timeline_count(exec, &n), GRT_OK);
  assert_true(n >= 4 * 3);
  char *json = export_json(exec);
  assert_true(json_valid(json));
  assert_non_null(strstr(json, "\"traceEvents\""));
  assert_non_null(strstr(json, "\"name\":\"streams\""));
  assert_non_null(strstr(json, "\"name\":\"engines\""));
  assert_non_null(strstr(json, "h2d (id"));
  assert_non_null(strstr(json, "copy D2H [0]"));
  assert_int_equal(count(json, "\"name\":\"xform\""), 4 * 2); /* on its stream and its engine track */
  assert_int_equal(count(json, "\"ph\":\"s\""), count(json, "\"ph\":\"f\""));
  /* Virtual time stands still while the host issues, so every cross-stream
   * wait finds its event pending: two arrows per chunk. Under threads a wait
   * on an event already complete adds no edge (how many: timing). */
  if (clock_of(state) == GRT_CLOCK_VIRTUAL) assert_true(count(json, "\"ph\":\"s\"") >= 2 * 4);
  free(json);
  assert_int_equal(grt_exec_timeline_clear(exec), GRT_OK);
  assert_int_equal(grt_exec_timeline_count(exec, &n), GRT_OK);
  assert_int_equal(n, 0);
  assert_int_equal(grt_exec_destroy(exec), GRT_OK);
}

/* Names with quotes, backslashes and control characters come out escaped. */
static void test_escaping(void **state) {
  grt_exec *exec = make_exec(clock_of(state), 1);
  grt_stream *s = make_stream(exec, GRT_STREAM_NON_BLOCKING, "we\"ird\\name\n\t\x01");
  grt_kernel_desc k = {NULL, NULL, 100, GRT_ENGINE_COMPUTE, "k\"1\\"};
  assert_int_equal(grt_launch_kernel(s, &k), GRT_OK);
  assert_int_equal(grt_stream_synchronize(s), GRT_OK);
  char *json = export_json(exec);
  assert_true(json_valid(json));
  assert_non_null(strstr(json, "we\\\"ird\\\\name\\u000a\\u0009\\u0001"));
  assert_non_null(strstr(json, "k\\\"1\\\\"));
  free(json);
  assert_int_equal(grt_stream_destroy(s), GRT_OK);
  assert_int_equal(grt_exec_destroy(exec), GRT_OK);
}

static void test_timeline_off(void **state) {
  grt_exec *exec = make_exec(clock_of(state), 0);
  FILE *f = tmpfile();
  assert_int_equal(grt_exec_timeline_write_json(exec, f), GRT_ERR_STATE);
  fclose(f);
  assert_int_equal(grt_exec_timeline_save(exec, "/nonexistent-dir/x.json"), GRT_ERR_IO);
  assert_int_equal(grt_exec_destroy(exec), GRT_OK);
}

typedef struct delay_arg {
  grt_exec *exec;
  grt_status st;
} delay_arg;

/* A host function may not delay the host: it runs on the device side. */
static void delay_in_body(void *p) {
  delay_arg *d = p;
  d->st = grt_exec_host_delay(d->exec, 1000);
}

/* The timeline's write failures and refusals; host delays and stream names (the sorder support calls). */
static void test_timeline_io_and_host_delay(void **state) {
  grt_exec *exec = make_exec(clock_of(state), 1);
  grt_stream *s = make_stream(exec, GRT_STREAM_NON_BLOCKING, "a stream with a rather long name");
  grt_kernel_desc k = {NULL, NULL, 2000, GRT_ENGINE_COMPUTE, "k"};
  assert_int_equal(grt_launch_kernel(s, &k), GRT_OK);
  assert_int_equal(grt_stream_synchronize(s), GRT_OK);
  FILE *ro = fopen("/dev/null", "r");
  assert_non_null(ro);
  assert_int_equal(grt_exec_timeline_write_json(exec, ro), GRT_ERR_IO); /* every write fails */
  fclose(ro);
  FILE *full = fopen("/dev/full", "w");
  if (full) {
    fclose(full);
    assert_int_equal(grt_exec_timeline_save(exec, "/dev/full"), GRT_ERR_IO); /* fails at close */
  }
  assert_int_equal(grt_exec_timeline_write_json(NULL, stdout), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt_exec_timeline_write_json(exec, NULL), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt_exec_timeline_save(NULL, "/tmp/x"), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt_exec_timeline_save(exec, NULL), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt_exec_timeline_clear(NULL), GRT_ERR_INVALID_ARG);
  size_t n;
  assert_int_equal(grt_exec_timeline_count(NULL, &n), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt_exec_timeline_count(exec, NULL), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt_exec_timeline_count(exec, &n), GRT_OK);
  assert_int_equal(n, 1); /* the refusals recorded nothing */

  char name[8];
  assert_int_equal(grt_stream_get_name(s, name, sizeof name), GRT_OK);
  assert_string_equal(name, "a strea"); /* truncated to the buffer */
  assert_int_equal(grt_stream_get_name(s, NULL, 8), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt_stream_get_name(s, name, 0), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt_stream_get_name(NULL, name, sizeof name), GRT_ERR_INVALID_ARG);

  uint64_t t0, t1;
  assert_int_equal(grt_exec_now_ns(exec, &t0), GRT_OK);
  assert_int_equal(grt_exec_host_delay(exec, 0), GRT_OK);
  assert_int_equal(grt_exec_host_delay(exec, 50000), GRT_OK);
  assert_int_equal(grt_exec_now_ns(exec, &t1), GRT_OK);
  assert_true(t1 - t0 >= 50000);
  assert_int_equal(grt_exec_host_delay(NULL, 10), GRT_ERR_INVALID_ARG);
  delay_arg d = {exec, GRT_OK};
  assert_int_equal(grt_launch_host_func(s, delay_in_body, &d), GRT_OK);
  assert_int_equal(grt_stream_synchronize(s), GRT_OK);
  assert_int_equal(d.st, GRT_ERR_NOT_PERMITTED);
  assert_int_equal(grt_stream_destroy(s), GRT_OK);
  assert_int_equal(grt_exec_destroy(exec), GRT_OK);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_validator_self_check),
      BOTH_CLOCKS(test_pipeline_timeline),
      BOTH_CLOCKS(test_escaping),
      BOTH_CLOCKS(test_timeline_off),
      BOTH_CLOCKS(test_timeline_io_and_host_delay),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
