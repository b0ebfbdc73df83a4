/* replay_test_util.h — helpers shared by the replayer tests: load a native
 * trace from a string, replay it with a policy and return the summary. */
#ifndef GRT_TESTS_REPLAY_TEST_UTIL_H
#define GRT_TESTS_REPLAY_TEST_UTIL_H

#include "gpurt/replay.h"
#include "trace_test_util.h"

static inline grt_trace *load(const char *text) {
  grt_trace_error err;
  grt_status st;
  grt_trace *t = tt_load_str(text, GRT_TRACE_FORMAT_NATIVE, &err, &st);
  if (st) fail_msg("load: line %llu: %s", (unsigned long long)err.line, err.reason);
  return t;
}

static inline grt_replay_summary replay(grt_trace *t, const char *policy, uint64_t capacity, bool series) {
  grt_replay_config c;
  grt_replay_config_default(&c);
  c.policy = policy;
  c.capacity = capacity;
  c.record_series = series;
  grt_replay *r;
  assert_int_equal(grt_replay_open(t, &c, &r), GRT_OK);
  assert_int_equal(grt_replay_run(r), GRT_OK);
  grt_replay_summary s;
  assert_int_equal(grt_replay_get_summary(r, &s), GRT_OK);
  assert_int_equal(grt_replay_destroy(r), GRT_OK);
  return s;
}

#endif
