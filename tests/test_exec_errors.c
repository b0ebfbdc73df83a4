/* test_exec_errors.c — the executor's refusals: every public exec, stream,
 * event and user-event function with a missing or wrong argument, a destroyed
 * object, an object of another exec, and an exec with live children; the
 * borrowed-device paths of grt_exec_create. Each refusal changes nothing (the
 * objects work afterwards and the exec is destroyed cleanly). Both clocks. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "gpurt/exec.h"

static grt_exec_config cfg_of(grt_clock_kind clock) {
  grt_exec_config cfg;
  grt_exec_config_default(&cfg);
  cfg.clock = clock;
  cfg.device_capacity = 4 * GRT_MiB;
  return cfg;
}

static void test_create_config(void **state) {
  (void)state;
  grt_exec_config_default(NULL); /* no-op */
  grt_exec_config cfg = cfg_of(GRT_CLOCK_VIRTUAL);
  grt_exec *exec = (grt_exec *)&cfg;
  assert_int_equal(grt_exec_create(&cfg, NULL), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt_exec_create(NULL, &exec), GRT_ERR_INVALID_ARG);
  assert_null(exec);
  grt_exec_config bad[10];
  for (int i = 0; i < 10; i++) bad[i] = cfg_of(GRT_CLOCK_VIRTUAL);
  bad[0].clock = (grt_clock_kind)7;
  bad[1].compute_slots = 0;
  bad[2].compute_slots = 65;
  bad[3].host_slots = 0;
  bad[4].host_slots = 65;
  bad[5].h2d_gbps = 0;
  bad[6].d2h_gbps = -1;
  bad[7].device_gbps = 0;
  bad[8].device_capacity = 0;
  bad[9].clock = (grt_clock_kind)-1;
  for (int i = 0; i < 10; i++) {
    assert_int_equal(grt_exec_create(&bad[i], &exec), GRT_ERR_INVALID_ARG);
    assert_null(exec);
  }
}

static void test_borrowed_device(void **state) {
  (void)state;
  for (int c = 1; c >= 0; c--) {
    grt_device_config dc;
    grt_device_config_default(&dc);
    dc.capacity = 4 * GRT_MiB;
    dc.host_backing = 0;
    grt_device *plain = NULL, *backed = NULL;
    assert_int_equal(grt_device_create(&dc, &plain), GRT_OK);
    dc.host_backing = 1;
    assert_int_equal(grt_device_create(&dc, &backed), GRT_OK);
    grt_exec_config cfg = cfg_of(c ? GRT_CLOCK_VIRTUAL : GRT_CLOCK_THREADS);
    cfg.device_capacity = 0; /* ignored with a borrowed device */
    grt_exec *exec = NULL;
    cfg.device = plain;
    assert_int_equal(grt_exec_create(&cfg, &exec), GRT_ERR_INVALID_ARG); /* no host backing */
    assert_null(exec);
    /* a full device cannot even be probed: its malloc status comes back */
    grt_devptr all = 0;
    assert_int_equal(grt_device_malloc(backed, 4 * GRT_MiB, &all), GRT_OK);
    cfg.device = backed;
    assert_int_not_equal(grt_exec_create(&cfg, &exec), GRT_OK);
    assert_null(exec);
    assert_int_equal(grt_device_free(backed, all), GRT_OK);
    assert_int_equal(grt_exec_create(&cfg, &exec), GRT_OK);
    grt_device *got = NULL;
    assert_int_equal(grt_exec_get_device(exec, &got), GRT_OK);
    assert_ptr_equal(got, backed);
    /* a borrowed device's segments do not keep the exec alive */
    grt_devptr p = 0;
    assert_int_equal(grt_device_malloc(backed, 4096, &p), GRT_OK);
    assert_int_equal(grt_exec_destroy(exec), GRT_OK);
    assert_int_equal(grt_device_free(backed, p), GRT_OK);
    assert_int_equal(grt_device_destroy(backed), GRT_OK);
    assert_int_equal(grt_device_destroy(plain), GRT_OK);
  }
}

static void test_exec_args(void **state) {
  (void)state;
  for (int c = 1; c >= 0; c--) {
    grt_clock_kind clock = c ? GRT_CLOCK_VIRTUAL : GRT_CLOCK_THREADS;
    grt_exec_config cfg = cfg_of(clock);
    grt_exec *exec = NULL;
    assert_int_equal(grt_exec_create(&cfg, &exec), GRT_OK);
    uint32_t junk[64];
    memset(junk, 0, sizeof junk);
    grt_exec *fake = (grt_exec *)junk; /* wrong magic */
    grt_device *dev = NULL;
    grt_clock_kind ck;
    uint64_t u = 0;
    int least = 1, greatest = 1;
    grt_stream *s = NULL;
    char msg[16];
    assert_int_equal(grt_exec_destroy(NULL), GRT_OK);
    assert_int_equal(grt_exec_destroy(fake), GRT_ERR_INVALID_ARG);
    assert_int_equal(grt_exec_get_device(NULL, &dev), GRT_ERR_INVALID_ARG);
    assert_int_equal(grt_exec_get_device(exec, NULL), GRT_ERR_INVALID_ARG);
    assert_int_equal(grt_exec_get_device(fake, &dev), GRT_ERR_INVALID_ARG);
    assert_int_equal(grt_exec_get_clock(NULL, &ck), GRT_ERR_INVALID_ARG);
    assert_int_equal(grt_exec_get_clock(exec, NULL), GRT_ERR_INVALID_ARG);
    assert_int_equal(grt_exec_get_clock(fake, &ck), GRT_ERR_INVALID_ARG);
    assert_int_equal(grt_exec_get_clock(exec, &ck), GRT_OK);
    assert_int_equal(ck, clock);
    assert_int_equal(grt_exec_synchronize(NULL), GRT_ERR_INVALID_ARG);
    assert_int_equal(grt_exec_synchronize(fake), GRT_ERR_INVALID_ARG);
    assert_int_equal(grt_exec_now_ns(NULL, &u), GRT_ERR_INVALID_ARG);
    assert_int_equal(grt_exec_now_ns(exec, NULL), GRT_ERR_INVALID_ARG);
    assert_int_equal(grt_exec_now_ns(fake, &u), GRT_ERR_INVALID_ARG);
    assert_int_equal(grt_exec_get_error(NULL, msg, sizeof msg), GRT_ERR_INVALID_ARG);
    assert_int_equal(grt_exec_get_error(fake, msg, sizeof msg), GRT_ERR_INVALID_ARG);
    assert_int_equal(grt_exec_get_error(exec, msg, 0), GRT_ERR_INVALID_ARG);
    assert_int_equal(grt_exec_get_error(exec, msg, sizeof msg), GRT_OK);
    assert_string_equal(msg, "");
    assert_int_equal(grt_exec_copy_duration_ns(NULL, GRT_ENGINE_COMPUTE, 1, &u), GRT_ERR_INVALID_ARG);
    assert_int_equal(grt_exec_copy_duration_ns(exec, GRT_ENGINE_COMPUTE, 1, NULL), GRT_ERR_INVALID_ARG);
    assert_int_equal(grt_exec_copy_duration_ns(fake, GRT_ENGINE_COMPUTE, 1, &u), GRT_ERR_INVALID_ARG);
    assert_int_equal(grt_exec_copy_duration_ns(exec, GRT_ENGINE_HOST, 1, &u), GRT_ERR_INVALID_ARG);
    assert_int_equal(grt_exec_copy_duration_ns(exec, GRT_ENGINE_COUNT, 1, &u), GRT_ERR_INVALID_ARG);
    assert_int_equal(grt_exec_copy_duration_ns(exec, GRT_ENGINE_COPY_D2H, 16, &u), GRT_OK);
    assert_int_equal(u, 1);
    assert_int_equal(grt_exec_stream_priority_range(NULL, &least, &greatest), GRT_ERR_INVALID_ARG);
    assert_int_equal(grt_exec_stream_priority_range(exec, NULL, &greatest), GRT_ERR_INVALID_ARG);
    assert_int_equal(grt_exec_stream_priority_range(exec, &least, NULL), GRT_ERR_INVALID_ARG);
    assert_int_equal(grt_exec_stream_priority_range(fake, &least, &greatest), GRT_ERR_INVALID_ARG);
    assert_int_equal(grt_exec_legacy_stream(NULL, &s), GRT_ERR_INVALID_ARG);
    assert_int_equal(grt_exec_legacy_stream(exec, NULL), GRT_ERR_INVALID_ARG);
    assert_int_equal(grt_exec_legacy_stream(fake, &s), GRT_ERR_INVALID_ARG);
    assert_int_equal(grt_exec_per_thread_stream(NULL, &s), GRT_ERR_INVALID_ARG);
    assert_int_equal(grt_exec_per_thread_stream(exec, NULL), GRT_ERR_INVALID_ARG);
    assert_int_equal(grt_exec_per_thread_stream(fake, &s), GRT_ERR_INVALID_ARG);
    assert_int_equal(grt_exec_stream_from_id(exec, 12345, &s), GRT_ERR_NOT_FOUND);
    assert_int_equal(grt_exec_stream_from_id(exec, 0, NULL), GRT_ERR_INVALID_ARG);
    assert_int_equal(grt_exec_stream_from_id(NULL, 0, &s), GRT_ERR_INVALID_ARG);
    /* the per-thread stream is created once and is not the user's to destroy */
    grt_stream *pt = NULL, *pt2 = NULL, *legacy = NULL;
    assert_int_equal(grt_exec_per_thread_stream(exec, &pt), GRT_OK);
    assert_int_equal(grt_exec_per_thread_stream(exec, &pt2), GRT_OK);
    assert_ptr_equal(pt, pt2);
    assert_int_equal(grt_stream_destroy(pt), GRT_ERR_NOT_PERMITTED);
    assert_int_equal(grt_exec_legacy_stream(exec, &legacy), GRT_OK);
    assert_int_equal(grt_stream_destroy(legacy), GRT_ERR_NOT_PERMITTED);
    assert_int_equal(grt_exec_destroy(exec), GRT_OK);
  }
}

static void test_children_args(void **state) {
  (void)state;
  for (int c = 1; c >= 0; c--) {
    grt_exec_config cfg = cfg_of(c ? GRT_CLOCK_VIRTUAL : GRT_CLOCK_THREADS);
    grt_exec *exec = NULL, *other = NULL;
    assert_int_equal(grt_exec_create(&cfg, &exec), GRT_OK);
    assert_int_equal(grt_exec_create(&cfg, &other), GRT_OK);
    uint32_t junk[64];
    memset(junk, 0, sizeof junk);
    grt_stream *s = NULL, *os = NULL;
    assert_int_equal(grt_stream_create(exec, 0, 0, NULL), GRT_ERR_INVALID_ARG);
    assert_int_equal(grt_stream_create(NULL, 0, 0, &s), GRT_ERR_INVALID_ARG);
    assert_int_equal(grt_stream_create((grt_exec *)junk, 0, 0, &s), GRT_ERR_INVALID_ARG);
    assert_int_equal(grt_stream_create(exec, 4u, 0, &s), GRT_ERR_INVALID_ARG);
    assert_null(s);
    int prio = 0;
    assert_int_equal(grt_stream_create(exec, 0, 99, &s), GRT_OK); /* clamped to the least */
    assert_int_equal(grt_stream_get_priority(s, &prio), GRT_OK);
    assert_int_equal(prio, 0);
    assert_int_equal(grt_stream_destroy(s), GRT_OK);
    assert_int_equal(grt_stream_create(exec, 0, -99, &s), GRT_OK); /* clamped to the greatest */
    assert_int_equal(grt_stream_get_priority(s, &prio), GRT_OK);
    assert_int_equal(prio, -5);
    assert_int_equal(grt_stream_create(other, 0, 0, &os), GRT_OK);
    /* getters */
    unsigned flags = 9;
    grt_stream_id id = 0;
    char name[8];
    assert_int_equal(grt_stream_get_priority(s, NULL), GRT_ERR_INVALID_ARG);
    assert_int_equal(grt_stream_get_priority(NULL, &prio), GRT_ERR_INVALID_ARG);
    assert_int_equal(grt_stream_get_flags(s, NULL), GRT_ERR_INVALID_ARG);
    assert_int_equal(grt_stream_get_flags(s, &flags), GRT_OK);
    assert_int_equal(grt_stream_get_id(s, NULL), GRT_ERR_INVALID_ARG);
    assert_int_equal(grt_stream_get_id(NULL, &id), GRT_ERR_INVALID_ARG);
    assert_int_equal(grt_stream_set_name(s, NULL), GRT_ERR_INVALID_ARG);
    assert_int_equal(grt_stream_set_name(NULL, "x"), GRT_ERR_INVALID_ARG);
    assert_int_equal(grt_stream_set_name((grt_stream *)junk, "x"), GRT_ERR_INVALID_ARG);
    assert_int_equal(grt_stream_set_name(s, "a-rather-long-stream-name"), GRT_OK);
    assert_int_equal(grt_stream_get_name(s, name, sizeof name), GRT_OK);
    assert_string_equal(name, "a-rathe");
    assert_int_equal(grt_stream_query(NULL), GRT_ERR_INVALID_ARG);
    assert_int_equal(grt_stream_synchronize(NULL), GRT_ERR_INVALID_ARG);
    /* events */
    grt_event *e = NULL, *oe = NULL, *e2 = NULL;
    float ms = 0;
    int64_t ns = 0;
    assert_int_equal(grt_event_create(exec, 0, NULL), GRT_ERR_INVALID_ARG);
    assert_int_equal(grt_event_create(NULL, 0, &e), GRT_ERR_INVALID_ARG);
    assert_int_equal(grt_event_create((grt_exec *)junk, 0, &e), GRT_ERR_INVALID_ARG);
    assert_int_equal(grt_event_create(exec, 8u, &e), GRT_ERR_INVALID_ARG);
    assert_null(e);
    assert_int_equal(grt_event_create(exec, 0, &e), GRT_OK);
    assert_int_equal(grt_event_create(exec, GRT_EVENT_BLOCKING_SYNC, &e2), GRT_OK);
    assert_int_equal(grt_event_create(other, 0, &oe), GRT_OK);
    assert_int_equal(grt_event_set_name(e, NULL), GRT_ERR_INVALID_ARG);
    assert_int_equal(grt_event_set_name(NULL, "x"), GRT_ERR_INVALID_ARG);
    assert_int_equal(grt_event_record(NULL, s), GRT_ERR_INVALID_ARG);
    assert_int_equal(grt_event_record(e, NULL), GRT_ERR_INVALID_ARG);
    assert_int_equal(grt_event_record(oe, s), GRT_ERR_WRONG_DEVICE);
    assert_int_equal(grt_stream_wait_event(s, oe), GRT_ERR_WRONG_DEVICE);
    assert_int_equal(grt_stream_wait_event(s, NULL), GRT_ERR_INVALID_ARG);
    assert_int_equal(grt_stream_wait_event(NULL, e), GRT_ERR_INVALID_ARG);
    assert_int_equal(grt_event_query(NULL), GRT_ERR_INVALID_ARG);
    assert_int_equal(grt_event_synchronize(NULL), GRT_ERR_INVALID_ARG);
    assert_int_equal(grt_event_elapsed_time(e, e2, NULL), GRT_ERR_INVALID_ARG);
    assert_int_equal(grt_event_elapsed_ns(NULL, e2, &ns), GRT_ERR_INVALID_ARG);
    assert_int_equal(grt_event_elapsed_ns(e, NULL, &ns), GRT_ERR_INVALID_ARG);
    assert_int_equal(grt_event_elapsed_ns(e, e2, NULL), GRT_ERR_INVALID_ARG);
    assert_int_equal(grt_event_elapsed_ns(e, oe, &ns), GRT_ERR_WRONG_DEVICE);
    assert_int_equal(grt_event_elapsed_time(e, e2, &ms), GRT_ERR_INVALID_HANDLE); /* never recorded */
    assert_int_equal(grt_event_record(e, s), GRT_OK);
    assert_int_equal(grt_event_record(e2, s), GRT_OK);
    assert_int_equal(grt_event_synchronize(e2), GRT_OK);
    assert_int_equal(grt_event_elapsed_ns(e, e2, &ns), GRT_OK);
    assert_true(ns >= 0);
    /* the completion interface (grt_stream_ops): a refused record writes nothing */
    grt_stream_ops ops;
    uint64_t hev = 77;
    assert_int_equal(grt_exec_stream_ops(NULL, &ops), GRT_ERR_INVALID_ARG);
    assert_int_equal(grt_exec_stream_ops((grt_exec *)junk, &ops), GRT_ERR_INVALID_ARG);
    assert_int_equal(grt_exec_stream_ops(exec, NULL), GRT_ERR_INVALID_ARG);
    assert_int_equal(grt_exec_stream_ops(exec, &ops), GRT_OK);
    assert_int_equal(ops.record_event(ops.ctx, 0, NULL), GRT_ERR_INVALID_ARG);
    assert_int_equal(ops.record_event(NULL, 0, &hev), GRT_ERR_INVALID_ARG);
    assert_int_equal(ops.record_event(junk, 0, &hev), GRT_ERR_INVALID_ARG);
    assert_int_equal(ops.record_event(ops.ctx, 9999, &hev), GRT_ERR_NOT_FOUND);
    assert_int_equal(hev, 77);
    /* another exec's event: the query says done (a free never hangs on it), the destroy leaves it */
    uint64_t oid = (uint64_t)(uintptr_t)oe;
    assert_int_equal(ops.event_query(ops.ctx, oid), 1);
    ops.event_destroy(ops.ctx, oid);
    assert_int_equal(grt_event_synchronize(oe), GRT_OK);
    /* user events */
    grt_user_event *u = NULL, *ou = NULL;
    uint64_t v = 0;
    assert_int_equal(grt_user_event_create(exec, NULL, NULL), GRT_ERR_INVALID_ARG);
    assert_int_equal(grt_user_event_create(NULL, NULL, &u), GRT_ERR_INVALID_ARG);
    assert_int_equal(grt_user_event_create((grt_exec *)junk, NULL, &u), GRT_ERR_INVALID_ARG);
    assert_int_equal(grt_user_event_create(exec, NULL, &u), GRT_OK);
    assert_int_equal(grt_user_event_create(other, "o", &ou), GRT_OK);
    assert_int_equal(grt_user_event_value(NULL, &v), GRT_ERR_INVALID_ARG);
    assert_int_equal(grt_user_event_value(u, NULL), GRT_ERR_INVALID_ARG);
    assert_int_equal(grt_user_event_signal(NULL, 1), GRT_ERR_INVALID_ARG);
    assert_int_equal(grt_user_event_wait(NULL, 1), GRT_ERR_INVALID_ARG);
    assert_int_equal(grt_stream_signal_user_event(s, ou, 1), GRT_ERR_WRONG_DEVICE);
    assert_int_equal(grt_stream_wait_user_event(s, ou, 1), GRT_ERR_WRONG_DEVICE);
    assert_int_equal(grt_stream_signal_user_event(s, NULL, 1), GRT_ERR_INVALID_ARG);
    assert_int_equal(grt_stream_wait_user_event(NULL, u, 1), GRT_ERR_INVALID_ARG);
    /* a user event with a queued wait is busy; the host's signal releases it */
    assert_int_equal(grt_stream_wait_user_event(s, u, 3), GRT_OK);
    assert_int_equal(grt_user_event_destroy(u), GRT_ERR_BUSY);
    assert_int_equal(grt_user_event_signal(u, 3), GRT_OK);
    assert_int_equal(grt_stream_synchronize(s), GRT_OK);
    assert_int_equal(grt_user_event_value(u, &v), GRT_OK);
    assert_int_equal(v, 3);
    assert_int_equal(grt_user_event_wait(u, 2), GRT_OK); /* already reached */
    /* live children keep the exec */
    assert_int_equal(grt_exec_destroy(exec), GRT_ERR_BUSY);
    assert_int_equal(grt_user_event_destroy(u), GRT_OK);
    assert_int_equal(grt_user_event_destroy(u), GRT_ERR_INVALID_HANDLE);
    assert_int_equal(grt_user_event_signal(u, 9), GRT_ERR_INVALID_HANDLE);
    assert_int_equal(grt_exec_destroy(exec), GRT_ERR_BUSY); /* events, stream */
    assert_int_equal(grt_event_destroy(e), GRT_OK);
    assert_int_equal(grt_event_destroy(e), GRT_ERR_INVALID_HANDLE);
    assert_int_equal(grt_event_record(e, s), GRT_ERR_INVALID_HANDLE);
    assert_int_equal(grt_event_query(e), GRT_ERR_INVALID_HANDLE);
    assert_int_equal(grt_event_set_name(e, "z"), GRT_ERR_INVALID_HANDLE);
    assert_int_equal(grt_stream_wait_event(s, e), GRT_ERR_INVALID_HANDLE);
    assert_int_equal(grt_event_destroy(e2), GRT_OK);
    assert_int_equal(grt_exec_destroy(exec), GRT_ERR_BUSY); /* the stream */
    assert_int_equal(grt_stream_destroy(s), GRT_OK);
    assert_int_equal(grt_stream_destroy(s), GRT_ERR_INVALID_HANDLE);
    assert_int_equal(grt_stream_set_name(s, "z"), GRT_ERR_INVALID_HANDLE);
    assert_int_equal(grt_stream_get_priority(s, &prio), GRT_ERR_INVALID_HANDLE);
    assert_int_equal(grt_launch_kernel(s, &(grt_kernel_desc){NULL, NULL, 0, GRT_ENGINE_COMPUTE, NULL}),
                     GRT_ERR_INVALID_HANDLE);
    /* device segments of the exec's own device keep it too */
    grt_device *dev = NULL;
    grt_devptr p = 0;
    assert_int_equal(grt_exec_get_device(exec, &dev), GRT_OK);
    assert_int_equal(grt_device_malloc(dev, 512, &p), GRT_OK);
    assert_int_equal(grt_exec_destroy(exec), GRT_ERR_BUSY);
    assert_int_equal(grt_device_free(dev, p), GRT_OK);
    assert_int_equal(grt_exec_destroy(exec), GRT_OK);
    assert_int_equal(grt_user_event_destroy(ou), GRT_OK);
    assert_int_equal(grt_event_destroy(oe), GRT_OK);
    assert_int_equal(grt_stream_destroy(os), GRT_OK);
    assert_int_equal(grt_exec_destroy(other), GRT_OK);
  }
}

/* A cycle through the legacy stream's implicit barrier: a blocking stream
 * waits for a user event that only the legacy stream signals, and the legacy
 * stream's signal waits for that blocking stream. The report names the
 * barrier; the sticky error then refuses new work. */
static void test_legacy_cycle(void **state) {
  (void)state;
  for (int c = 1; c >= 0; c--) {
    grt_exec_config cfg = cfg_of(c ? GRT_CLOCK_VIRTUAL : GRT_CLOCK_THREADS);
    grt_exec *exec = NULL;
    assert_int_equal(grt_exec_create(&cfg, &exec), GRT_OK);
    grt_stream *a = NULL, *legacy = NULL, *late = NULL;
    grt_user_event *u = NULL;
    assert_int_equal(grt_stream_create(exec, GRT_STREAM_DEFAULT, 0, &a), GRT_OK);
    assert_int_equal(grt_user_event_create(exec, "gate", &u), GRT_OK);
    assert_int_equal(grt_exec_legacy_stream(exec, &legacy), GRT_OK);
    assert_int_equal(grt_stream_wait_user_event(a, u, 1), GRT_OK);
    assert_int_equal(grt_stream_signal_user_event(legacy, u, 1), GRT_OK);
    assert_int_equal(grt_exec_synchronize(exec), GRT_ERR_DEADLOCK);
    char msg[1024];
    assert_int_equal(grt_exec_get_error(exec, msg, sizeof msg), GRT_ERR_DEADLOCK);
    assert_non_null(strstr(msg, "legacy"));
    assert_int_equal(grt_stream_create(exec, 0, 0, &late), GRT_ERR_DEADLOCK);
    assert_null(late);
    assert_int_equal(grt_stream_destroy(a), GRT_OK);
    grt_status st = grt_user_event_destroy(u);
    if (st) fail_msg("user event after the cancel: %s", grt_status_name(st));
    assert_int_equal(grt_exec_destroy(exec), GRT_OK);
  }
}

/* A user event named by a wait queued behind other work is still in use; values only rise; a destroyed
 * user event refuses stream ops. */
static void test_user_event_lifetime(void **state) {
  (void)state;
  for (int c = 1; c >= 0; c--) {
    grt_exec_config cfg;
    grt_exec_config_default(&cfg);
    cfg.clock = c ? GRT_CLOCK_VIRTUAL : GRT_CLOCK_THREADS;
    grt_exec *exec = NULL;
    assert_int_equal(grt_exec_create(&cfg, &exec), GRT_OK);
    grt_stream *s = NULL;
    assert_int_equal(grt_stream_create(exec, GRT_STREAM_NON_BLOCKING, 0, &s), GRT_OK);
    grt_user_event *first, *second;
    assert_int_equal(grt_user_event_create(exec, "first", &first), GRT_OK);
    assert_int_equal(grt_user_event_create(exec, "second", &second), GRT_OK);
    assert_int_equal(grt_stream_wait_user_event(s, first, 1), GRT_OK);  /* the head: s waits here */
    assert_int_equal(grt_stream_wait_user_event(s, second, 1), GRT_OK); /* queued behind it */
    assert_int_equal(grt_user_event_destroy(second), GRT_ERR_BUSY);
    assert_int_equal(grt_user_event_signal(second, 7), GRT_OK);
    assert_int_equal(grt_user_event_signal(second, 3), GRT_OK); /* lower: ignored */
    uint64_t v;
    assert_int_equal(grt_user_event_value(second, &v), GRT_OK);
    assert_int_equal(v, 7);
    assert_int_equal(grt_user_event_signal(first, 1), GRT_OK);
    assert_int_equal(grt_stream_synchronize(s), GRT_OK);
    assert_int_equal(grt_user_event_destroy(second), GRT_OK);
    assert_int_equal(grt_stream_wait_user_event(s, second, 1), GRT_ERR_INVALID_HANDLE);
    assert_int_equal(grt_stream_signal_user_event(s, second, 1), GRT_ERR_INVALID_HANDLE);
    assert_int_equal(grt_user_event_value(second, &v), GRT_ERR_INVALID_HANDLE);
    assert_int_equal(grt_user_event_wait(second, 1), GRT_ERR_INVALID_HANDLE);
    assert_int_equal(grt_stream_query(s), GRT_OK); /* the refused ops queued nothing */
    assert_int_equal(grt_user_event_destroy(first), GRT_OK);
    assert_int_equal(grt_user_event_destroy(NULL), GRT_OK);
    assert_int_equal(grt_stream_destroy(s), GRT_OK);
    assert_int_equal(grt_exec_destroy(exec), GRT_OK);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_create_config),
      cmocka_unit_test(test_borrowed_device),
      cmocka_unit_test(test_exec_args),
      cmocka_unit_test(test_children_args),
      cmocka_unit_test(test_legacy_cycle),
      cmocka_unit_test(test_user_event_lifetime),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
