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
  grt_trace_destroy(t);
  unlink(path);
  free(path);
  free(text);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_stream_equals_loaded_random),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
