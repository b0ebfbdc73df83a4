/* test_replay_devices.c — fidelity on a PyTorch snapshot of three devices:
 * each device's trace is scored on its own (device 1 traced nothing, device
 * 2 ends in a real OOM), and a snapshot without `segments` or without
 * `device_traces` is refused with the reason, not scored as an empty
 * success. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "gpurt/replay.h"
#include "pickle_builder.h"

#define MiB ((uint64_t)1 << 20)

static void event(pk *p, const char *action, uint64_t addr, uint64_t size) {
  dict_open(p);
  kv_str(p, "action", action), kv_num(p, "addr", addr), kv_num(p, "size", size), kv_num(p, "stream", 0);
  dict_close(p);
}

static void block(pk *p, uint64_t size, uint64_t requested, const char *state) {
  dict_open(p), kv_num(p, "size", size), kv_num(p, "requested_size", requested), kv_str(p, "state", state);
  dict_close(p);
}

/* A segment holding one allocated block at its base, the rest free. */
static void segment(pk *p, unsigned device, uint64_t addr, uint64_t total, const char *type, uint64_t used,
                    uint64_t requested) {
  dict_open(p);
  kv_num(p, "device", device), kv_num(p, "address", addr), kv_num(p, "total_size", total), kv_num(p, "stream", 0);
  kv_str(p, "segment_type", type);
  str(p, "blocks"), list_open(p), block(p, used, requested, "active_allocated"), block(p, total - used, 0, "inactive");
  list_close(p);
  dict_close(p);
}

static void segments(pk *p) {
  str(p, "segments"), list_open(p);
  segment(p, 0, 0x10000000, 2 * MiB, "small", 512, 100);
  segment(p, 2, 0x20000000, 20 * MiB, "large", 2000384, 2000000);
  list_close(p);
}

static void traces(pk *p) {
  str(p, "device_traces"), list_open(p);
  list_open(p), event(p, "segment_alloc", 0x10000000, 2 * MiB), event(p, "alloc", 0x10000000, 100), list_close(p);
  list_open(p), list_close(p); /* device 1 traced nothing */
  list_open(p);
  event(p, "segment_alloc", 0x20000000, 20 * MiB), event(p, "alloc", 0x20000000, 2000000);
  event(p, "oom", 1 * MiB, 30 * MiB); /* 30 MiB asked with 1 MiB free, nothing cached to release */
  list_close(p);
  list_close(p);
}

static grt_trace *load_device(const pk *p, int device) {
  grt_trace_load_config cfg;
  grt_trace_load_config_default(&cfg);
  cfg.device = device;
  grt_trace *t = NULL;
  grt_trace_error err;
  grt_status st = grt_trace_load_buffer(p->b, p->n, "devices.pickle", &cfg, &t, &err);
  if (st) fail_msg("device %d: %s", device, err.reason);
  return t;
}

static grt_fidelity_report score(const pk *p, int device, grt_trace_info *info) {
  grt_trace *t = load_device(p, device);
  assert_int_equal(grt_trace_get_info(t, info), GRT_OK);
  grt_fidelity_report rep;
  char err[256];
  grt_status st = grt_replay_fidelity(t, &rep, err, sizeof err);
  if (st) fail_msg("device %d: %s", device, err);
  assert_int_equal(grt_trace_destroy(t), GRT_OK);
  return rep;
}

static void test_every_device(void **state) {
  (void)state;
  pk *p = malloc(sizeof *p);
  assert_non_null(p);
  begin(p), segments(p), traces(p), end(p);
  grt_trace_info info;
  grt_fidelity_report rep = score(p, 0, &info);
  assert_int_equal(info.n_devices, 3);
  assert_int_equal(rep.allocs, 1);
  assert_int_equal(rep.exact, 1);
  assert_int_equal(rep.segment_decisions_agree, 1);
  assert_int_equal(rep.segment_decisions, 1);
  assert_int_equal(rep.ooms_recorded, 0);
  assert_true(rep.final_layout_equal);
  assert_int_equal(rep.final_recorded, 1); /* device 0's segment only */

  rep = score(p, 1, &info);
  assert_int_equal(info.n_events, 0);
  assert_int_equal(rep.allocs, 0);
  assert_int_equal(rep.final_recorded, 0);

  rep = score(p, 2, &info);
  assert_int_equal(info.n_events, 3);
  assert_int_equal(rep.exact, 1);
  assert_int_equal(rep.segment_decisions_agree, 1);
  assert_int_equal(rep.ooms_recorded, 1);
  assert_int_equal(rep.ooms_agree, 1);
  assert_string_equal(rep.oom_note, "");
  assert_int_equal(rep.releases, 0); /* the oom freed nothing, as recorded */
  assert_true(rep.final_layout_equal);
  free(p);
}

static void expect_refused(const pk *p, const char *why) {
  grt_trace *t = load_device(p, 0);
  grt_fidelity_report rep;
  char err[256];
  assert_int_equal(grt_replay_fidelity(t, &rep, err, sizeof err), GRT_ERR_PARSE);
  if (!strstr(err, why)) fail_msg("got '%s', want '%s'", err, why);
  assert_int_equal(grt_trace_destroy(t), GRT_OK);
}

static void test_missing_parts(void **state) {
  (void)state;
  pk *p = malloc(sizeof *p);
  assert_non_null(p);
  begin(p), segments(p), end(p);
  expect_refused(p, "the snapshot has no device_traces");
  begin(p), traces(p), end(p);
  expect_refused(p, "the snapshot has no segments");
  free(p);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_every_device),
      cmocka_unit_test(test_missing_parts),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
