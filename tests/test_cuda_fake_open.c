/* test_cuda_fake_open.c — opening the CUDA backend against fake drivers
 * (tests/fake_cuda): bad ordinals and driver failures while a device is
 * created, and — each in a child process of its own, since the driver is
 * loaded once per process — drivers that cannot be used: a required entry
 * point missing or too old, cuInit failing each way, no version, the CUDA 11
 * cuGetProcAddress and plain exports, the default library name, and modern
 * drivers lacking some optional entry points (partial-a/b/c below). Skips (77)
 * unless GRT_CUDA_LIBRARY names the modern fake. */
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cuda_fake_fixture.h"

extern char **environ;

/* ---- in this process: device creation against the modern fake ---- */

static void test_open_arguments(void **state) {
  (void)state;
  grt_device *dev = (grt_device *)0x1;
  assert_int_equal(grt_device_create_cuda(-1, &dev), GRT_ERR_INVALID_ARG);
  assert_null(dev);
  assert_int_equal(grt_device_create_cuda(0, NULL), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt_device_create_cuda(1, &dev), GRT_ERR_INVALID_ARG); /* one GPU */
  assert_int_equal(grt_cuda_probe(NULL, NULL, 0), GRT_OK);
  char msg[128];
  assert_int_equal(grt_cuda_probe(NULL, msg, sizeof msg), GRT_OK);
  assert_non_null(strstr(msg, "CUDA driver 12.8"));
  assert_non_null(strstr(msg, ", 1 device"));
  dev = fk_open();
  char name[64];
  assert_int_equal(grt_cuda_device_name(dev, name, 4), GRT_OK);
  assert_string_equal(name, "Fak");
  assert_int_equal(grt_cuda_device_name(dev, NULL, 4), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt_cuda_device_name(dev, name, 0), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt_cuda_device_name(dev, name, 4097), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt_cuda_device_name(NULL, name, sizeof name), GRT_ERR_INVALID_ARG);
  assert_int_equal(fk.live("contexts"), 1);
  assert_int_equal(grt_device_destroy(dev), GRT_OK);
  assert_int_equal(fk.live("contexts"), 0); /* the primary context was released */
}

static void test_open_driver_failures(void **state) {
  (void)state;
  fk_census before = fk_count();
  grt_device *dev = (grt_device *)0x1;
  char msg[256];
  int n = -1;
  fk_arm("cuDeviceGetCount", 1, FK_ILLEGAL_ADDRESS);
  assert_int_equal(grt_cuda_probe(&n, msg, sizeof msg), GRT_ERR_DRIVER);
  assert_non_null(strstr(msg, "cuDeviceGetCount: CUDA_ERROR_ILLEGAL_ADDRESS"));
  fk_arm("cuDeviceGetCount", 1, FK_ILLEGAL_ADDRESS);
  assert_int_equal(grt_device_create_cuda(0, &dev), GRT_ERR_DRIVER);
  assert_null(dev);
  fk.set_device_count(0);
  assert_int_equal(grt_cuda_probe(&n, msg, sizeof msg), GRT_ERR_NO_DEVICE);
  assert_int_equal(n, 0);
  assert_non_null(strstr(msg, ": no CUDA device"));
  assert_int_equal(grt_device_create_cuda(0, &dev), GRT_ERR_NO_DEVICE);
  fk.set_device_count(1);
  const struct {
    const char *entry;
    int result;
    grt_status status;
  } steps[] = {
      {"cuDeviceGet", FK_INVALID_DEVICE, GRT_ERR_INVALID_ARG},
      {"cuDeviceTotalMem", FK_UNKNOWN, GRT_ERR_DRIVER},
      {"cuDevicePrimaryCtxRetain", FK_OUT_OF_MEMORY, GRT_ERR_OOM},
  };
  for (size_t i = 0; i < sizeof steps / sizeof steps[0]; i++) {
    dev = (grt_device *)0x1;
    fk_arm(steps[i].entry, 1, steps[i].result);
    assert_int_equal(grt_device_create_cuda(0, &dev), steps[i].status);
    assert_null(dev);
    fk_assert_census(before);
  }
  dev = fk_open();
  assert_int_equal(grt_device_destroy(dev), GRT_OK);
  fk_assert_census(before);
}

/* ---- child processes ---- */

static const char *lib_path(const char *var) {
  const char *p = getenv(var);
  if (!p) fprintf(stderr, "%s is not set (tests/CMakeLists.txt sets it)\n", var);
  assert_non_null(p);
  return p;
}

/* Runs this program as `--child mode` with GRT_CUDA_LIBRARY=lib and `extra`
 * (NAME=VALUE) in a clean fake environment; its output into out; returns its
 * exit status (-1 when it did not exit normally). */
static int run_child(const char *mode, const char *lib, const char *extra, char *out, size_t out_size) {
  char *envp[512];
  size_t n = 0;
  for (char **e = environ; *e && n < 500; e++)
    if (strncmp(*e, "GRT_CUDA_LIBRARY=", 17) != 0 && strncmp(*e, "FAKE_CUDA_", 10) != 0) envp[n++] = *e;
  char lib_var[1024];
  snprintf(lib_var, sizeof lib_var, "GRT_CUDA_LIBRARY=%s", lib);
  envp[n++] = lib_var;
  if (extra) envp[n++] = (char *)extra;
  envp[n] = NULL;
  int fds[2];
  assert_int_equal(pipe(fds), 0);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, fds[1], 1);
  posix_spawn_file_actions_adddup2(&fa, fds[1], 2);
  posix_spawn_file_actions_addclose(&fa, fds[0]);
  char *argv[] = {"test_cuda_fake_open", "--child", (char *)mode, NULL};
  pid_t pid;
  assert_int_equal(posix_spawn(&pid, "/proc/self/exe", &fa, NULL, argv, envp), 0);
  posix_spawn_file_actions_destroy(&fa);
  close(fds[1]);
  size_t got = 0;
  ssize_t r;
  while ((r = read(fds[0], out + got, out_size - 1 - got)) > 0) got += (size_t)r;
  out[got] = '\0';
  close(fds[0]);
  int status = 0;
  assert_int_equal(waitpid(pid, &status, 0), pid);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/* A child's probe: "status=NAME\nmsg=TEXT\nuse=NAME\n". */
typedef struct probe {
  char status[64], msg[600], use[64];
} probe;

static probe probe_with(const char *lib, const char *extra) {
  char out[4096];
  int rc = run_child("probe", lib, extra, out, sizeof out);
  if (rc != 0) fprintf(stderr, "child exited %d:\n%s\n", rc, out);
  assert_int_equal(rc, 0);
  probe p = {"", "", ""};
  char *s = strstr(out, "status="), *m = strstr(out, "\nmsg="), *u = strstr(out, "\nuse=");
  assert_true(s && m && u);
  sscanf(s, "status=%63[^\n]", p.status);
  sscanf(m, "\nmsg=%599[^\n]", p.msg);
  sscanf(u, "\nuse=%63[^\n]", p.use);
  return p;
}

static int child_probe(void) {
  char msg[600] = "";
  int n = 0;
  grt_status st = grt_cuda_probe(&n, msg, sizeof msg), use = st;
  if (st == GRT_OK) {
    grt_device *dev = NULL;
    grt_devptr p = 0;
    use = grt_device_create_cuda(0, &dev);
    if (use == GRT_OK) use = grt_device_malloc(dev, MiB, &p);
    if (use == GRT_OK) use = grt_device_free(dev, p);
    if (dev && use == GRT_OK) use = grt_device_destroy(dev);
  }
  printf("status=%s\nmsg=%s\nuse=%s\n", grt_status_name(st), msg, grt_status_name(use));
  return 0;
}

/* The entry points gpurt cannot work without (src/device/cuda_driver.h). */
static const char *const required[] = {
    "cuGetErrorName",  "cuGetErrorString",  "cuInit",           "cuDriverGetVersion",       "cuDeviceGetCount",
    "cuDeviceGet",     "cuDeviceGetName",   "cuDeviceTotalMem", "cuDevicePrimaryCtxRetain", "cuDevicePrimaryCtxRelease",
    "cuCtxGetCurrent", "cuCtxPushCurrent",  "cuCtxPopCurrent",  "cuCtxSynchronize",         "cuMemAlloc",
    "cuMemFree",       "cuMemGetInfo",
};

static void test_required_entry_point_missing(void **state) {
  (void)state;
  const char *lib = lib_path("GRT_FAKE_CUDA_OLD");
  for (size_t i = 0; i < sizeof required / sizeof required[0]; i++) {
    char env[128], want[1200];
    snprintf(env, sizeof env, "FAKE_CUDA_HIDE=%s", required[i]);
    probe p = probe_with(lib, env);
    snprintf(want, sizeof want, "the CUDA driver (%s) lacks the entry point %s", lib, required[i]);
    if (strcmp(p.msg, want) != 0) fprintf(stderr, "got \"%s\"\nwant \"%s\"\n", p.msg, want);
    assert_string_equal(p.status, "GRT_ERR_UNSUPPORTED");
    assert_string_equal(p.msg, want);
  }
  /* a driver older than the ABI asked for answers "version not sufficient" */
  probe p = probe_with(lib, "FAKE_CUDA_OLD=cuMemGetInfo");
  assert_string_equal(p.status, "GRT_ERR_UNSUPPORTED");
  assert_non_null(strstr(p.msg, "lacks the entry point cuMemGetInfo"));
}

static void test_init_failures(void **state) {
  (void)state;
  const struct {
    int result;
    const char *status, *text;
  } cases[] = {
      {FK_NO_DEVICE, "GRT_ERR_NO_DEVICE", "cuInit: CUDA_ERROR_NO_DEVICE (100: no CUDA-capable device is detected)"},
      {FK_STUB_LIBRARY, "GRT_ERR_NO_DEVICE", "cuInit: CUDA_ERROR_STUB_LIBRARY"},
      {FK_SYSTEM_DRIVER_MISMATCH, "GRT_ERR_NO_DEVICE", "cuInit: CUDA_ERROR_SYSTEM_DRIVER_MISMATCH"},
      {FK_NOT_SUPPORTED, "GRT_ERR_UNSUPPORTED", "cuInit: CUDA_ERROR_NOT_SUPPORTED"},
      {FK_OUT_OF_MEMORY, "GRT_ERR_OOM", "cuInit: CUDA_ERROR_OUT_OF_MEMORY"},
      {FK_NOT_INITIALIZED, "GRT_ERR_DRIVER", "cuInit: CUDA_ERROR_NOT_INITIALIZED"},
  };
  const char *lib = lib_path("GRT_FAKE_CUDA_OLD");
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    char env[128];
    snprintf(env, sizeof env, "FAKE_CUDA_FAIL=cuInit:1:%d", cases[i].result);
    probe p = probe_with(lib, env);
    assert_string_equal(p.status, cases[i].status);
    assert_non_null(strstr(p.msg, cases[i].text));
    assert_string_equal(p.use, cases[i].status); /* the same answer every time */
  }
  /* no version: the driver still works, reported as 0.0 */
  probe p = probe_with(lib, "FAKE_CUDA_FAIL=cuDriverGetVersion:1:999");
  assert_string_equal(p.status, "GRT_OK");
  assert_non_null(strstr(p.msg, "CUDA driver 0.0"));
  assert_string_equal(p.use, "GRT_OK");
}

/* Older ways to find the entry points: cuGetProcAddress (CUDA 11) and dlsym. */
static void test_lookup_variants(void **state) {
  (void)state;
  const char *vars[] = {"GRT_FAKE_CUDA_V1", "GRT_FAKE_CUDA_PLAIN", "GRT_FAKE_CUDA_OLD", "GRT_FAKE_CUDA_MODERN"};
  const char *versions[] = {"12.0", "12.0", "12.0", "12.8"};
  for (size_t i = 0; i < 4; i++) {
    const char *lib = lib_path(vars[i]);
    probe p = probe_with(lib, NULL);
    char want[1200];
    snprintf(want, sizeof want, "CUDA driver %s (%s), 1 device", versions[i], lib);
    assert_string_equal(p.status, "GRT_OK");
    assert_string_equal(p.msg, want);
    assert_string_equal(p.use, "GRT_OK");
  }
}

/* An empty GRT_CUDA_LIBRARY means the default, libcuda.so.1 (present or not here). */
static void test_default_library(void **state) {
  (void)state;
  probe p = probe_with("", NULL);
  assert_true(strcmp(p.status, "GRT_OK") == 0 || strcmp(p.status, "GRT_ERR_NO_DEVICE") == 0);
  assert_non_null(strstr(p.msg, "libcuda.so.1"));
}

static void expect_child(const char *mode, const char *hide) {
  char out[8192];
  int rc = run_child(mode, lib_path("GRT_FAKE_CUDA_MODERN"), hide, out, sizeof out);
  if (rc != 0) fprintf(stderr, "child %s exited %d:\n%s\n", mode, rc, out);
  assert_int_equal(rc, 0);
}

/* Modern drivers lacking some optional entry points: each call that needs one
 * says which; the rest keeps working (the children's tests are below). */
static void test_partial_drivers(void **state) {
  (void)state;
  expect_child("partial-a", "FAKE_CUDA_HIDE=cuStreamWaitEvent,cuEventRecord,cuEventQuery,cuEventSynchronize,"
                            "cuEventElapsedTime,cuStreamWaitValue32,cuLaunchHostFunc");
  expect_child("partial-b", "FAKE_CUDA_HIDE=cuMemFreeHost,cuEventDestroy");
  expect_child("partial-c", "FAKE_CUDA_HIDE=cuMemHostGetDevicePointer,cuMemAddressReserve,cuMemCreate");
}

/* ---- the partial drivers' own checks (run in the children) ---- */

static void nothing(void *arg) { (void)arg; }

static void partial_a(void **state) {
  (void)state;
  grt_device *dev = fk_open();
  grt_cuda_stream *s = NULL;
  grt_cuda_event *e = NULL, *t = NULL;
  assert_int_equal(grt_cuda_stream_create(dev, 0, 0, &s), GRT_OK);
  assert_int_equal(grt_cuda_event_create(dev, 0, &e), GRT_OK); /* create and destroy exist */
  assert_int_equal(grt_cuda_event_create(dev, GRT_CUDA_EVENT_TIMING, &t), GRT_OK);
  float ms;
  assert_int_equal(grt_cuda_event_record(e, s), GRT_ERR_UNSUPPORTED);
  fk_error_contains(dev, "the CUDA driver lacks the entry point cuEventRecord");
  assert_int_equal(grt_cuda_event_query(e), GRT_ERR_UNSUPPORTED);
  fk_error_contains(dev, "cuEventQuery");
  assert_int_equal(grt_cuda_event_synchronize(e), GRT_ERR_UNSUPPORTED);
  fk_error_contains(dev, "cuEventSynchronize");
  assert_int_equal(grt_cuda_event_elapsed_ms(t, t, &ms), GRT_ERR_UNSUPPORTED);
  fk_error_contains(dev, "cuEventElapsedTime");
  assert_int_equal(grt_cuda_stream_wait_event(s, e), GRT_ERR_UNSUPPORTED);
  fk_error_contains(dev, "cuStreamWaitEvent");
  assert_int_equal(grt_cuda_launch_host_func(s, nothing, NULL), GRT_ERR_UNSUPPORTED);
  fk_error_contains(dev, "cuLaunchHostFunc");
  /* a gate can be made but no stream held: neither mechanism exists */
  grt_cuda_gate *g = NULL;
  assert_int_equal(grt_cuda_gate_create(dev, 1000, &g), GRT_OK);
  assert_int_equal(grt_cuda_gate_block(g, s), GRT_ERR_UNSUPPORTED);
  fk_error_contains(dev, "cuStreamWaitValue32/cuLaunchHostFunc: CUDA_ERROR_NOT_SUPPORTED");
  assert_int_equal(grt_cuda_gate_destroy(g), GRT_OK);
  /* the allocator's deferred frees need cuEventRecord: the free says so and can be retried */
  grt_cuda_events *ev = NULL;
  assert_int_equal(grt_cuda_events_create(dev, &ev), GRT_OK);
  grt_alloc_config cfg;
  grt_alloc_config_default(&cfg);
  cfg.stream_ops = grt_cuda_events_stream_ops(ev);
  grt_allocator *a = NULL;
  assert_int_equal(grt_alloc_create("caching", dev, &cfg, &a), GRT_OK);
  grt_devptr p = must_malloc(a, 4096, 0);
  assert_int_equal(grt_alloc_record_stream(a, p, grt_cuda_stream_id(s)), GRT_OK);
  assert_int_equal(grt_alloc_free(a, p), GRT_ERR_UNSUPPORTED);
  assert_consistent(a);
  assert_int_equal(grt_alloc_destroy(a), GRT_OK);
  assert_int_equal(grt_cuda_events_destroy(ev), GRT_OK);
  assert_int_equal(grt_cuda_event_destroy(e), GRT_OK);
  assert_int_equal(grt_cuda_event_destroy(t), GRT_OK);
  assert_int_equal(grt_cuda_stream_destroy(s), GRT_OK);
  assert_int_equal(grt_device_destroy(dev), GRT_OK);
}

static void partial_b(void **state) {
  (void)state;
  grt_device *dev = fk_open();
  grt_cuda_gate *g = (grt_cuda_gate *)0x1;
  assert_int_equal(grt_cuda_gate_create(dev, 1000, &g), GRT_ERR_UNSUPPORTED);
  assert_null(g);
  fk_error_contains(dev, "lacks the entry point cuMemHostAlloc/cuMemHostGetDevicePointer");
  grt_cuda_event *e = (grt_cuda_event *)0x1;
  assert_int_equal(grt_cuda_event_create(dev, 0, &e), GRT_ERR_UNSUPPORTED); /* without a destroy, no create */
  assert_null(e);
  fk_error_contains(dev, "lacks the entry point cuEventDestroy"); /* the one missing is named */
  assert_int_equal(grt_device_destroy(dev), GRT_OK);
}

static void partial_c(void **state) {
  (void)state;
  grt_device *dev = fk_open();
  grt_cuda_gate *g = NULL;
  assert_int_equal(grt_cuda_gate_create(dev, 1000, &g), GRT_ERR_UNSUPPORTED);
  uint64_t gran = 0;
  grt_devptr va = 0;
  assert_int_equal(grt_device_vmm_granularity(dev, &gran), GRT_OK); /* that one exists */
  assert_int_equal(grt_device_reserve(dev, gran, &va), GRT_ERR_UNSUPPORTED);
  fk_error_contains(dev, "cuMemAddressReserve");
  /* no cuMemCreate: map is refused (a reservation is needed to get that far, which
     this driver cannot make; the device's own check already says unsupported) */
  assert_int_equal(grt_device_map(dev, gran, gran), GRT_ERR_UNSUPPORTED);
  fk_error_contains(dev, "cuMemCreate/cuMemMap/cuMemSetAccess/cuMemUnmap/cuMemRelease");
  assert_int_equal(grt_device_destroy(dev), GRT_OK);
}

static int child_main(const char *mode) {
  if (strcmp(mode, "probe") == 0) return child_probe();
  if (fake_control_open(&fk) != 0) return 2;
  const struct CMUnitTest a[] = {cmocka_unit_test(partial_a)}, b[] = {cmocka_unit_test(partial_b)},
                          c[] = {cmocka_unit_test(partial_c)};
  if (strcmp(mode, "partial-a") == 0) return cmocka_run_group_tests(a, NULL, NULL);
  if (strcmp(mode, "partial-b") == 0) return cmocka_run_group_tests(b, NULL, NULL);
  if (strcmp(mode, "partial-c") == 0) return cmocka_run_group_tests(c, NULL, NULL);
  return 2;
}

int main(int argc, char **argv) {
  if (argc == 3 && strcmp(argv[1], "--child") == 0) return child_main(argv[2]);
  int ready = fk_ready("test_cuda_fake_open", "modern");
  if (ready != 1) return fk_not_ready(ready);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_open_arguments),
      cmocka_unit_test(test_open_driver_failures),
      cmocka_unit_test(test_required_entry_point_missing),
      cmocka_unit_test(test_init_failures),
      cmocka_unit_test(test_lookup_variants),
      cmocka_unit_test(test_default_library),
      cmocka_unit_test(test_partial_drivers),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
