/* test_cuda_fake_streams.c — the CUDA backend's streams, events, host
 * functions and copies against the fake modern driver (tests/fake_cuda): the
 * flags and priorities gpurt passes, copies and fills that land, ordering
 * behind a held stream, cross-stream event waits, elapsed time, argument and
 * device checks, and the caller's context left as it was. Skips (77) unless
 * GRT_CUDA_LIBRARY names the modern fake. */
#include <time.h>

#include "cuda_fake_fixture.h"

static void test_stream_flags_and_priority(void **state) {
  (void)state;
  grt_device *dev = fk_open();
  grt_cuda_stream *a = NULL, *b = NULL, *c = NULL;
  long before = fk.live("streams");
  assert_int_equal(grt_cuda_stream_create(dev, GRT_CUDA_STREAM_NON_BLOCKING, -1, &a), GRT_OK);
  assert_int_equal(grt_cuda_stream_create(dev, GRT_CUDA_STREAM_DEFAULT, 7, &b), GRT_OK);
  assert_int_equal(grt_cuda_stream_create(dev, GRT_CUDA_STREAM_DEFAULT, -100, &c), GRT_OK);
  assert_int_equal(fk.live("streams"), before + 3);
  fk_assert_no_context();
  unsigned flags = 99;
  int prio = 99;
  assert_int_equal(fk.stream_info(grt_cuda_stream_handle(a), &flags, &prio), 0);
  assert_int_equal(flags, FK_STREAM_NON_BLOCKING);
  assert_int_equal(prio, -1);
  assert_int_equal(fk.stream_info(grt_cuda_stream_handle(b), &flags, &prio), 0);
  assert_int_equal(flags, 0);
  assert_int_equal(prio, 0); /* clamped by the driver */
  assert_int_equal(fk.stream_info(grt_cuda_stream_handle(c), &flags, &prio), 0);
  assert_int_equal(prio, -5);
  /* the allocator's id is the handle's value; handles differ */
  assert_int_equal(grt_cuda_stream_id(a), (grt_stream_id)(uintptr_t)grt_cuda_stream_handle(a));
  assert_int_not_equal(grt_cuda_stream_id(a), grt_cuda_stream_id(b));
  assert_int_equal(grt_cuda_stream_query(a), GRT_OK);
  assert_int_equal(grt_cuda_stream_synchronize(b), GRT_OK);
  assert_int_equal(grt_device_destroy(dev), GRT_ERR_BUSY); /* live streams */
  assert_int_equal(grt_cuda_stream_destroy(a), GRT_OK);
  assert_int_equal(grt_cuda_stream_destroy(b), GRT_OK);
  assert_int_equal(grt_cuda_stream_destroy(c), GRT_OK);
  assert_int_equal(fk.live("streams"), before);
  grt_cuda_stream *s = (grt_cuda_stream *)0x1;
  assert_int_equal(grt_cuda_stream_create(dev, 2u, 0, &s), GRT_ERR_INVALID_ARG); /* unknown flag */
  assert_int_equal(grt_cuda_stream_create(NULL, 0, 0, &s), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt_cuda_stream_create(dev, 0, 0, NULL), GRT_ERR_INVALID_ARG);
  assert_null(grt_cuda_stream_handle(NULL));
  assert_int_equal(grt_cuda_stream_id(NULL), 0);
  assert_int_equal(grt_cuda_stream_query(NULL), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt_cuda_stream_synchronize(NULL), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt_device_destroy(dev), GRT_OK);
  assert_int_equal(fk.live("contexts"), 0);
}

/* Borrowed handles: the legacy stream, NULL, and a stream made elsewhere. */
static void test_legacy_and_wrapped(void **state) {
  (void)state;
  grt_device *dev = fk_open();
  grt_cuda_stream *legacy = NULL, *null_stream = NULL, *own = NULL, *borrowed = NULL;
  assert_int_equal(grt_cuda_stream_legacy(dev, &legacy), GRT_OK);
  assert_null(grt_cuda_stream_handle(legacy));
  assert_int_equal(grt_cuda_stream_id(legacy), 0);
  assert_int_equal(grt_cuda_stream_query(legacy), GRT_OK);
  assert_int_equal(grt_cuda_stream_synchronize(legacy), GRT_OK);
  assert_int_equal(grt_cuda_stream_wrap(dev, NULL, &null_stream), GRT_OK);
  assert_int_equal(grt_cuda_stream_id(null_stream), 0);
  assert_int_equal(grt_cuda_stream_create(dev, 0, 0, &own), GRT_OK);
  long streams = fk.live("streams");
  assert_int_equal(grt_cuda_stream_wrap(dev, grt_cuda_stream_handle(own), &borrowed), GRT_OK);
  assert_int_equal(grt_cuda_stream_id(borrowed), grt_cuda_stream_id(own));
  unsigned long destroys = fk.calls("cuStreamDestroy");
  assert_int_equal(grt_cuda_stream_destroy(borrowed), GRT_OK); /* only forgotten */
  assert_int_equal(grt_cuda_stream_destroy(legacy), GRT_OK);
  assert_int_equal(grt_cuda_stream_destroy(null_stream), GRT_OK);
  assert_int_equal(fk.calls("cuStreamDestroy"), destroys);
  assert_int_equal(fk.live("streams"), streams);
  assert_int_equal(grt_cuda_stream_query(own), GRT_OK); /* still alive */
  assert_int_equal(grt_cuda_stream_destroy(own), GRT_OK);
  assert_int_equal(fk.calls("cuStreamDestroy"), destroys + 1);
  /* arguments, and a device from another backend */
  grt_cuda_stream *s = (grt_cuda_stream *)0x1;
  assert_int_equal(grt_cuda_stream_legacy(NULL, &s), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt_cuda_stream_legacy(dev, NULL), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt_cuda_stream_wrap(NULL, NULL, &s), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt_cuda_stream_wrap(dev, NULL, NULL), GRT_ERR_INVALID_ARG);
  fixture fx = make_fixture("naive", 64 * MiB, NULL);
  assert_int_equal(grt_cuda_stream_legacy(fx.dev, &s), GRT_ERR_UNSUPPORTED);
  assert_null(s);
  s = (grt_cuda_stream *)0x1;
  assert_int_equal(grt_cuda_stream_wrap(fx.dev, NULL, &s), GRT_ERR_UNSUPPORTED);
  assert_null(s);
  char name[32];
  assert_int_equal(grt_cuda_device_name(fx.dev, name, sizeof name), GRT_ERR_UNSUPPORTED);
  drop_fixture(&fx);
  assert_int_equal(grt_device_destroy(dev), GRT_OK);
}

/* Fill, upload, device-to-device copy and download land where they should. */
static void test_copies_and_fill(void **state) {
  (void)state;
  grt_device *dev = fk_open();
  grt_cuda_stream *s = NULL;
  assert_int_equal(grt_cuda_stream_create(dev, GRT_CUDA_STREAM_NON_BLOCKING, 0, &s), GRT_OK);
  grt_devptr a = 0, b = 0;
  assert_int_equal(grt_device_malloc(dev, MiB, &a), GRT_OK);
  assert_int_equal(grt_device_malloc(dev, MiB, &b), GRT_OK);
  static unsigned char up[4096], down[8192];
  for (size_t i = 0; i < sizeof up; i++) up[i] = (unsigned char)(i * 7 + 1);
  assert_int_equal(grt_cuda_memset_async(s, a, 0x3c, MiB), GRT_OK);
  assert_int_equal(grt_cuda_memcpy_htod_async(s, a + 4096, up, sizeof up), GRT_OK);
  assert_int_equal(grt_cuda_memcpy_dtod_async(s, b, a, 2 * 4096), GRT_OK);
  assert_int_equal(grt_cuda_memcpy_dtoh_async(s, down, b, sizeof down), GRT_OK);
  assert_int_equal(grt_cuda_stream_synchronize(s), GRT_OK);
  for (size_t i = 0; i < 4096; i++) assert_int_equal(down[i], 0x3c);
  assert_memory_equal(down + 4096, up, sizeof up);
  fk_assert_no_context();
  /* A range outside device memory: the driver refuses, gpurt names the call. */
  assert_int_equal(grt_cuda_memset_async(s, a + MiB - 16, 0, 32), GRT_ERR_INVALID_ARG);
  fk_error_contains(dev, "cuMemsetD8Async: CUDA_ERROR_INVALID_VALUE (1: invalid argument)");
  assert_int_equal(grt_cuda_memcpy_htod_async(s, a + MiB, up, 16), GRT_ERR_INVALID_ARG);
  fk_error_contains(dev, "cuMemcpyHtoDAsync: CUDA_ERROR_INVALID_VALUE");
  assert_int_equal(grt_cuda_memcpy_dtoh_async(s, down, 0x1000, 16), GRT_ERR_INVALID_ARG);
  fk_error_contains(dev, "cuMemcpyDtoHAsync: CUDA_ERROR_INVALID_VALUE");
  assert_int_equal(grt_cuda_memcpy_dtod_async(s, b, 0x1000, 16), GRT_ERR_INVALID_ARG);
  fk_error_contains(dev, "cuMemcpyDtoDAsync: CUDA_ERROR_INVALID_VALUE");
  assert_int_equal(fk.live("pending"), 0);
  /* arguments gpurt refuses before the driver */
  unsigned long sets = fk.calls("cuMemsetD8Async");
  assert_int_equal(grt_cuda_memset_async(NULL, a, 0, 1), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt_cuda_memset_async(s, 0, 0, 1), GRT_ERR_INVALID_ARG);
  assert_int_equal(fk.calls("cuMemsetD8Async"), sets);
  assert_int_equal(grt_cuda_memcpy_htod_async(NULL, a, up, 1), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt_cuda_memcpy_htod_async(s, a, NULL, 1), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt_cuda_memcpy_htod_async(s, 0, up, 1), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt_cuda_memcpy_dtoh_async(NULL, down, a, 1), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt_cuda_memcpy_dtoh_async(s, NULL, a, 1), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt_cuda_memcpy_dtoh_async(s, down, 0, 1), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt_cuda_memcpy_dtod_async(NULL, a, b, 1), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt_cuda_memcpy_dtod_async(s, 0, b, 1), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt_cuda_memcpy_dtod_async(s, a, 0, 1), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt_device_free(dev, a), GRT_OK);
  assert_int_equal(grt_device_free(dev, b), GRT_OK);
  assert_int_equal(grt_cuda_stream_destroy(s), GRT_OK);
  assert_int_equal(grt_device_destroy(dev), GRT_OK);
  assert_int_equal(fk.live("allocs"), 0);
}

typedef struct trail {
  int n;
  int order[8];
} trail;
typedef struct step {
  trail *t;
  int id;
} step;
static void note(void *arg) {
  step *s = arg;
  s->t->order[s->t->n++] = s->id; /* host functions run one at a time, in stream order */
}

static void test_host_functions(void **state) {
  (void)state;
  grt_device *dev = fk_open();
  grt_cuda_stream *s = NULL;
  assert_int_equal(grt_cuda_stream_create(dev, 0, 0, &s), GRT_OK);
  trail t = {0, {0}};
  step steps[3] = {{&t, 1}, {&t, 2}, {&t, 3}};
  for (int i = 0; i < 3; i++) assert_int_equal(grt_cuda_launch_host_func(s, note, &steps[i]), GRT_OK);
  assert_int_equal(grt_cuda_stream_synchronize(s), GRT_OK);
  assert_int_equal(t.n, 3);
  assert_int_equal(t.order[0], 1);
  assert_int_equal(t.order[1], 2);
  assert_int_equal(t.order[2], 3);
  assert_int_equal(grt_cuda_stream_query(s), GRT_OK);
  assert_int_equal(grt_cuda_launch_host_func(s, NULL, NULL), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt_cuda_launch_host_func(NULL, note, &steps[0]), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt_cuda_stream_destroy(s), GRT_OK);
  assert_int_equal(grt_device_destroy(dev), GRT_OK);
}

static void test_events(void **state) {
  (void)state;
  grt_device *dev = fk_open();
  grt_cuda_stream *s = NULL;
  assert_int_equal(grt_cuda_stream_create(dev, 0, 0, &s), GRT_OK);
  grt_cuda_event *plain = NULL, *t0 = NULL, *t1 = NULL, *never = NULL;
  long events = fk.live("events");
  assert_int_equal(grt_cuda_event_create(dev, GRT_CUDA_EVENT_DEFAULT, &plain), GRT_OK);
  assert_int_equal(grt_cuda_event_create(dev, GRT_CUDA_EVENT_TIMING, &t0), GRT_OK);
  assert_int_equal(grt_cuda_event_create(dev, GRT_CUDA_EVENT_TIMING, &t1), GRT_OK);
  assert_int_equal(grt_cuda_event_create(dev, GRT_CUDA_EVENT_TIMING, &never), GRT_OK);
  assert_int_equal(fk.live("events"), events + 4);
  /* never recorded: complete */
  assert_int_equal(grt_cuda_event_query(never), GRT_OK);
  assert_int_equal(grt_cuda_event_synchronize(never), GRT_OK);
  assert_int_equal(grt_cuda_event_record(t0, s), GRT_OK);
  struct timespec nap = {0, 20 * 1000000L};
  nanosleep(&nap, NULL);
  assert_int_equal(grt_cuda_event_record(t1, s), GRT_OK);
  assert_int_equal(grt_cuda_event_record(plain, s), GRT_OK);
  assert_int_equal(grt_cuda_event_synchronize(t1), GRT_OK);
  assert_int_equal(grt_cuda_event_query(plain), GRT_OK);
  float ms = -1;
  assert_int_equal(grt_cuda_event_elapsed_ms(t0, t1, &ms), GRT_OK);
  assert_true(ms >= 19.0f && ms < 10000.0f);
  /* a non-timing event (the allocator's kind: CU_EVENT_DISABLE_TIMING), or one
     never recorded, has no time */
  ms = -1;
  assert_int_equal(grt_cuda_event_elapsed_ms(t0, plain, &ms), GRT_ERR_INVALID_HANDLE);
  fk_error_contains(dev, "cuEventElapsedTime: CUDA_ERROR_INVALID_HANDLE");
  assert_true(ms == -1.0f);
  assert_int_equal(grt_cuda_event_elapsed_ms(never, t1, &ms), GRT_ERR_INVALID_HANDLE);
  fk_assert_no_context();
  /* arguments */
  grt_cuda_event *e = (grt_cuda_event *)0x1;
  assert_int_equal(grt_cuda_event_create(dev, 4u, &e), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt_cuda_event_create(NULL, 0, &e), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt_cuda_event_create(dev, 0, NULL), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt_cuda_event_record(NULL, s), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt_cuda_event_record(t0, NULL), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt_cuda_event_query(NULL), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt_cuda_event_synchronize(NULL), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt_cuda_event_elapsed_ms(NULL, t1, &ms), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt_cuda_event_elapsed_ms(t0, NULL, &ms), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt_cuda_event_elapsed_ms(t0, t1, NULL), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt_cuda_stream_wait_event(NULL, t0), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt_cuda_stream_wait_event(s, NULL), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt_device_destroy(dev), GRT_ERR_BUSY);
  assert_int_equal(grt_cuda_event_destroy(plain), GRT_OK);
  assert_int_equal(grt_cuda_event_destroy(t0), GRT_OK);
  assert_int_equal(grt_cuda_event_destroy(t1), GRT_OK);
  assert_int_equal(grt_cuda_event_destroy(never), GRT_OK);
  assert_int_equal(fk.live("events"), events);
  assert_int_equal(grt_cuda_stream_destroy(s), GRT_OK);
  assert_int_equal(grt_device_destroy(dev), GRT_OK);
}

static void set_flag(void *arg) { __atomic_store_n((int *)arg, 1, __ATOMIC_SEQ_CST); }
static int flag_of(int *f) { return __atomic_load_n(f, __ATOMIC_SEQ_CST); }

/* A held stream: its work, its events and a stream waiting on them stay pending
 * until the gate opens; the wait binds to the snapshot at the time of the call. */
static void test_pending_work_and_waits(void **state) {
  (void)state;
  grt_device *dev = fk_open();
  grt_cuda_stream *producer = NULL, *consumer = NULL;
  assert_int_equal(grt_cuda_stream_create(dev, GRT_CUDA_STREAM_NON_BLOCKING, 0, &producer), GRT_OK);
  assert_int_equal(grt_cuda_stream_create(dev, GRT_CUDA_STREAM_NON_BLOCKING, 0, &consumer), GRT_OK);
  grt_cuda_event *start = NULL, *done = NULL, *early = NULL;
  assert_int_equal(grt_cuda_event_create(dev, GRT_CUDA_EVENT_TIMING, &start), GRT_OK);
  assert_int_equal(grt_cuda_event_create(dev, GRT_CUDA_EVENT_TIMING, &done), GRT_OK);
  assert_int_equal(grt_cuda_event_create(dev, 0, &early), GRT_OK);
  assert_int_equal(grt_cuda_event_record(start, producer), GRT_OK);
  assert_int_equal(grt_cuda_event_record(early, producer), GRT_OK);
  grt_cuda_gate *gate = fk_hold(dev, producer);
  int produced = 0, consumed = 0, unblocked = 0;
  assert_int_equal(grt_cuda_launch_host_func(producer, set_flag, &produced), GRT_OK);
  assert_int_equal(grt_cuda_event_record(done, producer), GRT_OK);
  assert_int_equal(grt_cuda_stream_query(producer), GRT_ERR_NOT_READY);
  assert_int_equal(grt_cuda_event_query(done), GRT_ERR_NOT_READY);
  assert_int_equal(grt_cuda_event_query(early), GRT_OK); /* recorded before the gate */
  float ms = 0;
  assert_int_equal(grt_cuda_event_elapsed_ms(start, done, &ms), GRT_ERR_NOT_READY);
  /* consumer waits for `done`; a second wait on `early` is satisfied at once */
  assert_int_equal(grt_cuda_stream_wait_event(consumer, early), GRT_OK);
  assert_int_equal(grt_cuda_stream_wait_event(consumer, done), GRT_OK);
  assert_int_equal(grt_cuda_launch_host_func(consumer, set_flag, &consumed), GRT_OK);
  struct timespec nap = {0, 5 * 1000000L};
  nanosleep(&nap, NULL);
  assert_int_equal(grt_cuda_stream_query(consumer), GRT_ERR_NOT_READY);
  assert_int_equal(flag_of(&produced), 0);
  assert_int_equal(flag_of(&consumed), 0);
  /* other streams still run; re-recording `done` there completes the event but
     does not move the consumer's snapshot */
  grt_cuda_stream *other = NULL;
  assert_int_equal(grt_cuda_stream_create(dev, 0, 0, &other), GRT_OK);
  assert_int_equal(grt_cuda_launch_host_func(other, set_flag, &unblocked), GRT_OK);
  assert_int_equal(grt_cuda_event_record(done, other), GRT_OK);
  assert_int_equal(grt_cuda_stream_synchronize(other), GRT_OK);
  assert_int_equal(flag_of(&unblocked), 1);
  assert_int_equal(grt_cuda_event_query(done), GRT_OK);
  assert_int_equal(grt_cuda_stream_query(consumer), GRT_ERR_NOT_READY);
  assert_int_equal(flag_of(&consumed), 0);
  assert_int_equal(grt_cuda_gate_open(gate), GRT_OK);
  assert_int_equal(grt_cuda_stream_synchronize(consumer), GRT_OK);
  assert_int_equal(flag_of(&produced), 1);
  assert_int_equal(flag_of(&consumed), 1);
  assert_int_equal(grt_cuda_event_query(done), GRT_OK);
  assert_int_equal(grt_cuda_event_elapsed_ms(start, done, &ms), GRT_OK);
  assert_true(ms >= 4.0f);
  assert_int_equal(grt_cuda_gate_timed_out(gate), 0);
  assert_int_equal(grt_cuda_gate_destroy(gate), GRT_OK);
  assert_int_equal(grt_device_synchronize(dev), GRT_OK);
  assert_int_equal(fk.live("pending"), 0);
  assert_int_equal(grt_cuda_event_destroy(start), GRT_OK);
  assert_int_equal(grt_cuda_event_destroy(done), GRT_OK);
  assert_int_equal(grt_cuda_event_destroy(early), GRT_OK);
  assert_int_equal(grt_cuda_stream_destroy(producer), GRT_OK);
  assert_int_equal(grt_cuda_stream_destroy(consumer), GRT_OK);
  assert_int_equal(grt_cuda_stream_destroy(other), GRT_OK);
  assert_int_equal(grt_device_destroy(dev), GRT_OK);
}

/* Two GPUs: handles of one cannot be used with the other. */
static void test_wrong_device(void **state) {
  (void)state;
  fk.set_device_count(2);
  int n = 0;
  char msg[128];
  assert_int_equal(grt_cuda_probe(&n, msg, sizeof msg), GRT_OK);
  assert_int_equal(n, 2);
  assert_non_null(strstr(msg, "2 devices"));
  grt_device *d0 = fk_open(), *d1 = NULL, *none = (grt_device *)0x1;
  assert_int_equal(grt_device_create_cuda(2, &none), GRT_ERR_INVALID_ARG);
  assert_null(none);
  assert_int_equal(grt_device_create_cuda(1, &d1), GRT_OK);
  char name[32];
  assert_int_equal(grt_cuda_device_name(d1, name, sizeof name), GRT_OK);
  assert_string_equal(name, "Fake GPU #1");
  grt_cuda_stream *s1 = NULL;
  grt_cuda_event *e0 = NULL, *e1 = NULL;
  assert_int_equal(grt_cuda_stream_create(d1, 0, 0, &s1), GRT_OK);
  assert_int_equal(grt_cuda_event_create(d0, GRT_CUDA_EVENT_TIMING, &e0), GRT_OK);
  assert_int_equal(grt_cuda_event_create(d1, GRT_CUDA_EVENT_TIMING, &e1), GRT_OK);
  assert_int_equal(grt_cuda_event_record(e0, s1), GRT_ERR_WRONG_DEVICE);
  assert_int_equal(grt_cuda_stream_wait_event(s1, e0), GRT_ERR_WRONG_DEVICE);
  float ms;
  assert_int_equal(grt_cuda_event_elapsed_ms(e0, e1, &ms), GRT_ERR_WRONG_DEVICE);
  grt_cuda_gate *g = NULL;
  assert_int_equal(grt_cuda_gate_create(d0, 1000, &g), GRT_OK);
  assert_int_equal(grt_cuda_gate_block(g, s1), GRT_ERR_WRONG_DEVICE);
  assert_int_equal(grt_cuda_gate_destroy(g), GRT_OK);
  assert_int_equal(grt_cuda_event_record(e1, s1), GRT_OK);
  assert_int_equal(grt_cuda_stream_wait_event(s1, e1), GRT_OK);
  assert_int_equal(grt_cuda_event_destroy(e0), GRT_OK);
  assert_int_equal(grt_cuda_event_destroy(e1), GRT_OK);
  assert_int_equal(grt_cuda_stream_destroy(s1), GRT_OK);
  assert_int_equal(grt_device_destroy(d1), GRT_OK);
  assert_int_equal(grt_device_destroy(d0), GRT_OK);
  fk.set_device_count(1);
}

/* A caller that already has the device's context current keeps it: gpurt
 * neither pushes nor pops. */
static void test_context_already_current(void **state) {
  (void)state;
  int (*retain)(void **, int) = NULL, (*release)(int) = NULL, (*push)(void *) = NULL, (*pop)(void **) = NULL,
      (*get)(void **) = NULL;
  *(void **)&retain = fk.proc("cuDevicePrimaryCtxRetain");
  *(void **)&release = fk.proc("cuDevicePrimaryCtxRelease");
  *(void **)&push = fk.proc("cuCtxPushCurrent");
  *(void **)&pop = fk.proc("cuCtxPopCurrent");
  *(void **)&get = fk.proc("cuCtxGetCurrent");
  assert_true(retain && release && push && pop && get);
  void *ctx = NULL, *cur = NULL;
  assert_int_equal(retain(&ctx, 0), 0);
  assert_int_equal(push(ctx), 0);
  grt_device *dev = fk_open();
  unsigned long pushes = fk.calls("cuCtxPushCurrent"), pops = fk.calls("cuCtxPopCurrent");
  grt_cuda_stream *s = NULL;
  assert_int_equal(grt_cuda_stream_create(dev, 0, 0, &s), GRT_OK);
  assert_int_equal(grt_cuda_stream_synchronize(s), GRT_OK);
  assert_int_equal(grt_cuda_stream_destroy(s), GRT_OK);
  assert_int_equal(fk.calls("cuCtxPushCurrent"), pushes);
  assert_int_equal(fk.calls("cuCtxPopCurrent"), pops);
  assert_int_equal(get(&cur), 0);
  assert_ptr_equal(cur, ctx);
  assert_int_equal(grt_device_destroy(dev), GRT_OK);
  assert_int_equal(pop(&cur), 0);
  assert_int_equal(release(0), 0);
  fk_assert_no_context();
}

int main(void) {
  int ready = fk_ready("test_cuda_fake_streams", "modern");
  if (ready != 1) return fk_not_ready(ready);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_stream_flags_and_priority),
      cmocka_unit_test(test_legacy_and_wrapped),
      cmocka_unit_test(test_copies_and_fill),
      cmocka_unit_test(test_host_functions),
      cmocka_unit_test(test_events),
      cmocka_unit_test(test_pending_work_and_waits),
      cmocka_unit_test(test_wrong_device),
      cmocka_unit_test(test_context_already_current),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
