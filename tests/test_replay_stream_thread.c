/* test_replay_stream_thread.c — the pipelined streaming replay (a reader
 * thread parses, the caller's thread replays; labelled `threads`, so CI also
 * runs it under ThreadSanitizer): streamed and loaded replays of the same
 * random churn agree exactly, for several policies and with OOMs. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "replay_test_util.h"


static char *write_temp(const char *text) {
  char *path = strdup("/tmp/grt_replay_XXXXXX");
  int fd = mkstemp(path);
  assert_true(fd >= 0);
  FILE *f = fdopen(fd, "w");
  fputs(text, f);
  fclose(f);
  return path;
}

/* streamed (sparse id table, reader thread) and loaded (dense ids) replays of
 * the same random churn agree exactly; ids are large and reused after frees. */
static void test_stream_equals_loaded_random(void **state) {
  (void)state;
  size_t cap = 1 << 22, len = 0;
  char *text = malloc(cap);
  len += (size_t)snprintf(text + len, cap - len, "gpurt-trace 1\n");
  uint64_t live_id[300] = {0}, x = 12345;
  for (int i = 0; i < 60000 && len + 128 < cap; i++) {
    x = x * 6364136223846793005ULL + 1442695040888963407ULL;
    int slot = (int)((x >> 33) % 300);
    if (live_id[slot]) {
      len += (size_t)snprintf(text + len, cap - len, "free %llu\n", (unsigned long long)(live_id[slot] - 1));
      live_id[slot] = 0;
    } else {
      uint64_t id = ((x >> 20) % 1000) * 1000003ULL + (uint64_t)slot; /* sparse, reused across the run */
      live_id[slot] = id + 1;
      len += (size_t)snprintf(text + len, cap - len, "alloc %llu %llu %d\n", (unsigned long long)id,
                              (unsigned long long)(512 + (x >> 40) % (3u << 20)), slot % 3);
    }
  }
  text[len] = 0;
  char *path = write_temp(text);
  grt_trace *t = load(text);
  const char *policies[] = {"caching", "naive"};
  for (int p = 0; p < 2; p++) {
    grt_replay_summary a = replay(t, policies[p], 256u << 20, false), b;
    grt_replay_config c;
    grt_replay_config_default(&c);
    c.policy = policies[p];
    c.capacity = 256u << 20;
    grt_trace_error err;
    assert_int_equal(grt_replay_stream_file(path, &c, &b, &err), GRT_OK);
    assert_int_equal(a.events, b.events);
    assert_int_equal(a.frees, b.frees);
    assert_int_equal(a.ooms, b.ooms);
    assert_int_equal(a.peak_reserved, b.peak_reserved);
    assert_int_equal(a.peak_live, b.peak_live);
    assert_int_equal(a.final_allocated, b.final_allocated);
    assert_int_equal(a.device_mallocs, b.device_mallocs);
    assert_int_equal(a.first_oom_event, b.first_oom_event);
  }
  assert_int_equal(grt_trace_destroy(t), GRT_OK);
  unlink(path);
  free(path);
  free(text);
}

/* Appends text formatted with two numbers (fmt uses at most two %llu) to a growing buffer. */
typedef struct text_buf {
  char *p;
  size_t len, cap;
} text_buf;

static void put(text_buf *t, const char *fmt, unsigned long long a, unsigned long long b) {
  if (t->len + 128 > t->cap) {
    t->cap = t->cap ? 2 * t->cap : 1 << 16;
    t->p = realloc(t->p, t->cap);
    assert_non_null(t->p);
  }
  t->len += (size_t)snprintf(t->p + t->len, t->cap - t->len, fmt, a, b);
}

/* Thousands of ids live at once (the reader's id table grows and rehashes), thousands freed at once (its
 * free-slot list grows), free_requested before free_completed, unmatched frees: streamed equals loaded. */
static void test_stream_many_live_ids(void **state) {
  (void)state;
  text_buf t = {0};
  put(&t, "gpurt-trace 1\n", 0, 0);
  for (int round = 0; round < 2; round++) {
    for (unsigned long long i = 0; i < 3000; i++) put(&t, "alloc %llu %llu\n", i * 7919 + 13, 512 + i % 4096);
    for (unsigned long long i = 0; i < 3000; i++) {
      if (i % 3 == 0) put(&t, "free_requested %llu %llu\n", i * 7919 + 13, 512 + i % 4096);
      put(&t, "free %llu %llu\n", i * 7919 + 13, 512 + i % 4096);
    }
    put(&t, "free %llu %llu\n", 5, 0);                /* unmatched: never allocated */
    put(&t, "free_requested %llu %llu\n", 11, 0);    /* unmatched too */
  }
  char *path = write_temp(t.p);
  grt_trace *tr = load(t.p);
  grt_replay_summary a = replay(tr, "caching", 1ull << 32, false), b;
  grt_replay_config c;
  grt_replay_config_default(&c);
  c.capacity = 1ull << 32;
  grt_trace_error err;
  assert_int_equal(grt_replay_stream_file(path, &c, &b, &err), GRT_OK);
  assert_int_equal(b.events, a.events);
  assert_int_equal(b.allocs, 6000);
  assert_int_equal(b.frees, 6000);
  assert_int_equal(b.unmatched_frees, a.unmatched_frees);
  assert_int_equal(b.unmatched_frees, 2); /* free_requested changes nothing, matched or not */
  assert_int_equal(b.peak_live, a.peak_live);
  assert_int_equal(b.peak_reserved, a.peak_reserved);
  assert_int_equal(b.final_allocated, 0);
  assert_int_equal(grt_trace_destroy(tr), GRT_OK);
  unlink(path);
  free(path);
  free(t.p);
}

/* Errors deep in a long file, after the reader has filled every batch: a replay error (the reader is told to
 * stop, the file is replayed again on one thread for the line) and a parse error (the reader's own line). */
static void test_stream_late_errors(void **state) {
  (void)state;
  text_buf t = {0};
  put(&t, "gpurt-trace 1\n", 0, 0);
  const unsigned long long n = 30000; /* 60,000 events: several times the reader's batches */
  for (unsigned long long i = 0; i < n; i++) put(&t, "alloc %llu %llu\n", i, 1 + i), put(&t, "free %llu\n", i, 0);
  put(&t, "alloc 1 512\nalloc 1 512\n", 0, 0); /* line 2n + 3: id 1 is still live */
  for (unsigned long long i = 0; i < n; i++) put(&t, "alloc %llu 512\nfree %llu\n", i + 10, i + 10);
  char *path = write_temp(t.p);
  grt_replay_config c;
  grt_replay_config_default(&c);
  c.policy = "naive";
  grt_replay_summary s;
  grt_trace_error err;
  assert_int_equal(grt_replay_stream_file(path, &c, &s, &err), GRT_ERR_PARSE);
  assert_int_equal(err.line, 2 * n + 3);
  assert_non_null(strstr(err.reason, "alloc of id 1 which is still live"));
  assert_int_equal(grt_replay_stream_file(path, &c, &s, NULL), GRT_ERR_PARSE); /* err is optional */
  unlink(path);
  free(path);

  t.len = 0;
  put(&t, "gpurt-trace 1\n", 0, 0);
  for (unsigned long long i = 0; i < n; i++) put(&t, "alloc %llu %llu\n", i, 1 + i), put(&t, "free %llu\n", i, 0);
  put(&t, "alloc 7 seven\n", 0, 0);
  path = write_temp(t.p);
  assert_int_equal(grt_replay_stream_file(path, &c, &s, &err), GRT_ERR_PARSE);
  assert_int_equal(err.line, 2 * n + 2);
  assert_non_null(strstr(err.reason, "size field 'seven'"));
  assert_int_equal(grt_replay_stream_file(path, &c, &s, NULL), GRT_ERR_PARSE);
  unlink(path);
  free(path);
  free(t.p);

  /* arguments and configuration are checked before any thread starts */
  assert_int_equal(grt_replay_stream_file(NULL, &c, &s, &err), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt_replay_stream_file("/tmp/x", &c, NULL, &err), GRT_ERR_INVALID_ARG);
  c.policy = "no-such-policy";
  assert_int_equal(grt_replay_stream_file("/tmp/x", &c, &s, &err), GRT_ERR_NOT_FOUND);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_stream_equals_loaded_random),
      cmocka_unit_test(test_stream_many_live_ids),
      cmocka_unit_test(test_stream_late_errors),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
