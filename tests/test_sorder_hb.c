/* test_sorder_hb.c — the happens-before sanitizer: a table of racy and
 * race-free DAGs (record/wait chains, branches, joins, syncs, re-recorded
 * events, legacy-stream edges, host accesses), use after a stream-ordered
 * free, and the debug mode (poisoned frees, serialized streams, the
 * environment variable), each under both clocks. */
#include <stdlib.h>
#include <string.h>

#include "gpurt/sorder.h"
#include "test_exec_common.h"

enum { K, REC, WAIT, SSYNC, ESYNC, DSYNC, HOST, END };
/* Streams: 0 A, 1 B, 2 C (non-blocking), 3 P (blocking), 4 L (legacy). */
typedef struct step {
  int op, stream, arg, rw; /* arg: buffer (K, HOST) or event (REC, WAIT, ESYNC) */
} step;

typedef struct dag_case {
  const char *name;
  int racy;
  step steps[12];
} dag_case;

#define W 1
#define R 0
static const dag_case cases[] = {
    {"no edge", 1, {{K, 0, 0, W}, {K, 1, 0, R}, {END, 0, 0, 0}}},
    {"record/wait", 0, {{K, 0, 0, W}, {REC, 0, 0, 0}, {WAIT, 1, 0, 0}, {K, 1, 0, R}, {END, 0, 0, 0}}},
    {"chain A->B->C", 0,
     {{K, 0, 0, W}, {REC, 0, 0, 0}, {WAIT, 1, 0, 0}, {REC, 1, 1, 0}, {WAIT, 2, 1, 0}, {K, 2, 0, W}, {END, 0, 0, 0}}},
    {"write back without edge", 1,
     {{K, 0, 0, W}, {REC, 0, 0, 0}, {WAIT, 1, 0, 0}, {K, 1, 0, R}, {K, 0, 0, W}, {END, 0, 0, 0}}},
    {"branch, both read", 0,
     {{K, 0, 0, W}, {REC, 0, 0, 0}, {WAIT, 1, 0, 0}, {WAIT, 2, 0, 0}, {K, 1, 0, R}, {K, 2, 0, R}, {END, 0, 0, 0}}},
    {"branch, sibling writes", 1,
     {{K, 0, 0, W}, {REC, 0, 0, 0}, {WAIT, 1, 0, 0}, {WAIT, 2, 0, 0}, {K, 1, 0, R}, {K, 2, 0, W}, {END, 0, 0, 0}}},
    {"join", 0,
     {{K, 1, 0, R}, {K, 2, 0, R}, {REC, 1, 1, 0}, {REC, 2, 2, 0}, {WAIT, 0, 1, 0}, {WAIT, 0, 2, 0}, {K, 0, 0, W},
      {END, 0, 0, 0}}},
    {"join missing one wait", 1,
     {{K, 1, 0, R}, {K, 2, 0, R}, {REC, 1, 1, 0}, {REC, 2, 2, 0}, {WAIT, 0, 1, 0}, {K, 0, 0, W}, {END, 0, 0, 0}}},
    {"record before the write", 1, {{REC, 0, 0, 0}, {K, 0, 0, W}, {WAIT, 1, 0, 0}, {K, 1, 0, R}, {END, 0, 0, 0}}},
    {"re-recorded after the write", 0,
     {{REC, 0, 0, 0}, {K, 0, 0, W}, {REC, 0, 0, 0}, {WAIT, 1, 0, 0}, {K, 1, 0, R}, {END, 0, 0, 0}}},
    {"wait bound before the re-record", 1,
     {{REC, 0, 0, 0}, {WAIT, 1, 0, 0}, {K, 0, 0, W}, {REC, 0, 0, 0}, {K, 1, 0, R}, {END, 0, 0, 0}}},
    {"never-recorded event", 1, {{WAIT, 1, 0, 0}, {K, 0, 0, W}, {K, 1, 0, R}, {END, 0, 0, 0}}},
    {"stream sync", 0, {{K, 0, 0, W}, {SSYNC, 0, 0, 0}, {K, 1, 0, R}, {END, 0, 0, 0}}},
    {"sync of the wrong stream", 1, {{K, 0, 0, W}, {SSYNC, 2, 0, 0}, {K, 1, 0, R}, {END, 0, 0, 0}}},
    {"event sync", 0, {{K, 0, 0, W}, {REC, 0, 0, 0}, {ESYNC, 0, 0, 0}, {K, 1, 0, W}, {END, 0, 0, 0}}},
    {"device sync", 0, {{K, 0, 0, W}, {K, 1, 1, W}, {DSYNC, 0, 0, 0}, {K, 2, 0, R}, {K, 2, 1, W}, {END, 0, 0, 0}}},
    {"legacy after blocking", 0, {{K, 3, 0, W}, {K, 4, 0, R}, {END, 0, 0, 0}}},
    {"blocking after legacy", 0, {{K, 4, 0, W}, {K, 3, 0, W}, {END, 0, 0, 0}}},
    {"legacy vs non-blocking", 1, {{K, 0, 0, W}, {K, 4, 0, R}, {END, 0, 0, 0}}},
    {"non-blocking after legacy", 1, {{K, 4, 0, W}, {K, 1, 0, R}, {END, 0, 0, 0}}},
    {"legacy chain P->L->B", 0,
     {{K, 3, 0, W}, {K, 4, 1, R}, {REC, 4, 0, 0}, {WAIT, 1, 0, 0}, {K, 1, 0, W}, {END, 0, 0, 0}}},
    {"host read without sync", 1, {{K, 0, 0, W}, {HOST, 0, 0, R}, {END, 0, 0, 0}}},
    {"host read after sync", 0, {{K, 0, 0, W}, {SSYNC, 0, 0, 0}, {HOST, 0, 0, R}, {END, 0, 0, 0}}},
    {"host write then kernel", 0, {{HOST, 0, 0, W}, {K, 1, 0, R}, {END, 0, 0, 0}}},
    {"reads only", 0, {{K, 0, 0, R}, {K, 1, 0, R}, {K, 2, 0, R}, {END, 0, 0, 0}}},
};

static void run_case(grt_clock_kind clock, const dag_case *dc) {
  grt_exec *exec = make_exec(clock, 0);
  grt_sorder_config cfg;
  grt_sorder_config_default(&cfg);
  cfg.exec = exec;
  cfg.use_env = 0;
  grt_sorder *so;
  assert_int_equal(grt_sorder_create(&cfg, &so), GRT_OK);
  grt_stream *s[5];
  s[0] = make_stream(exec, GRT_STREAM_NON_BLOCKING, "A");
  s[1] = make_stream(exec, GRT_STREAM_NON_BLOCKING, "B");
  s[2] = make_stream(exec, GRT_STREAM_NON_BLOCKING, "C");
  s[3] = make_stream(exec, GRT_STREAM_DEFAULT, "P");
  assert_int_equal(grt_exec_legacy_stream(exec, &s[4]), GRT_OK);
  grt_event *ev[3];
  for (int i = 0; i < 3; i++) assert_int_equal(grt_event_create(exec, 0, &ev[i]), GRT_OK);
  grt_device *dev;
  grt_devptr buf[2];
  assert_int_equal(grt_exec_get_device(exec, &dev), GRT_OK);
  for (int i = 0; i < 2; i++) assert_int_equal(grt_device_malloc(dev, 4096, &buf[i]), GRT_OK);
  for (const step *t = dc->steps; t->op != END; t++) {
    grt_access acc = {buf[t->arg & 1], 4096, t->rw};
    grt_kernel_desc d = {NULL, NULL, 20000, GRT_ENGINE_COMPUTE, t->rw ? "writer" : "reader"};
    switch (t->op) {
    case K: assert_int_equal(grt_sorder_launch(so, s[t->stream], &d, &acc, 1), GRT_OK); break;
    case REC: assert_int_equal(grt_sorder_event_record(so, ev[t->arg], s[t->stream]), GRT_OK); break;
    case WAIT: assert_int_equal(grt_sorder_stream_wait_event(so, s[t->stream], ev[t->arg]), GRT_OK); break;
    case SSYNC: assert_int_equal(grt_sorder_stream_synchronize(so, s[t->stream]), GRT_OK); break;
    case ESYNC: assert_int_equal(grt_sorder_event_synchronize(so, ev[t->arg]), GRT_OK); break;
    case DSYNC: assert_int_equal(grt_sorder_synchronize(so), GRT_OK); break;
    case HOST: assert_int_equal(grt_sorder_host_access(so, acc.ptr, 4096, t->rw), GRT_OK); break;
    }
  }
  size_t kept;
  uint64_t total;
  assert_int_equal(grt_sorder_report_count(so, &kept, &total), GRT_OK);
  if ((total > 0) != dc->racy) {
    print_message("case '%s': expected %s, got %llu reports\n", dc->name, dc->racy ? "a race" : "none",
                  (unsigned long long)total);
    assert_int_equal(grt_sorder_print_reports(so, stderr), GRT_OK);
    fail();
  }
  if (dc->racy) {
    grt_sorder_report r;
    assert_int_equal(grt_sorder_get_report(so, 0, &r), GRT_OK);
    assert_int_equal(r.kind, GRT_SORDER_RACE);
    assert_non_null(strstr(r.text, r.access.stream));
    assert_non_null(strstr(r.text, r.prior.stream));
  }
  assert_int_equal(grt_exec_synchronize(exec), GRT_OK);
  for (int i = 0; i < 2; i++) assert_int_equal(grt_device_free(dev, buf[i]), GRT_OK);
  for (int i = 0; i < 3; i++) assert_int_equal(grt_event_destroy(ev[i]), GRT_OK);
  for (int i = 0; i < 4; i++) assert_int_equal(grt_stream_destroy(s[i]), GRT_OK);
  assert_int_equal(grt_sorder_destroy(so), GRT_OK);
  assert_int_equal(grt_exec_destroy(exec), GRT_OK);
}

static void test_dag_table(void **state) {
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) run_case(clock_of(state), &cases[i]);
}

typedef struct fixture {
  grt_exec *exec;
  grt_sorder *so;
  grt_mempool *pool;
  grt_stream *a, *b;
} fixture;

static void fx_init(fixture *f, grt_clock_kind clock, int serialize, int poison) {
  f->exec = make_exec(clock, 0);
  grt_sorder_config cfg;
  grt_sorder_config_default(&cfg);
  cfg.exec = f->exec;
  cfg.use_env = 0;
  cfg.serialize = serialize;
  cfg.poison = poison;
  assert_int_equal(grt_sorder_create(&cfg, &f->so), GRT_OK);
  grt_mempool_config pc;
  grt_mempool_config_default(&pc);
  pc.exec = f->exec;
  pc.sorder = f->so;
  assert_int_equal(grt_mempool_create(&pc, &f->pool), GRT_OK);
  f->a = make_stream(f->exec, GRT_STREAM_NON_BLOCKING, "A");
  f->b = make_stream(f->exec, GRT_STREAM_NON_BLOCKING, "B");
}

static void fx_fini(fixture *f) {
  assert_int_equal(grt_mempool_synchronize(f->pool), GRT_OK);
  assert_int_equal(grt_sorder_destroy(f->so), GRT_ERR_BUSY); /* the pool still uses it */
  assert_int_equal(grt_mempool_destroy(f->pool), GRT_OK);
  assert_int_equal(grt_sorder_destroy(f->so), GRT_OK);
  assert_int_equal(grt_stream_destroy(f->a), GRT_OK);
  assert_int_equal(grt_stream_destroy(f->b), GRT_OK);
  assert_int_equal(grt_exec_destroy(f->exec), GRT_OK);
}

static uint64_t reports_of(grt_sorder *so, grt_sorder_report_kind kind) {
  size_t kept;
  uint64_t n = 0;
  assert_int_equal(grt_sorder_report_count(so, &kept, NULL), GRT_OK);
  for (size_t i = 0; i < kept; i++) {
    grt_sorder_report r;
    assert_int_equal(grt_sorder_get_report(so, i, &r), GRT_OK);
    n += r.kind == kind;
  }
  return n;
}

/* A kernel reading a buffer after its stream-ordered free, on the same stream. */
static void test_use_after_free(void **state) {
  fixture f;
  fx_init(&f, clock_of(state), 0, 1);
  grt_devptr x;
  assert_int_equal(grt_malloc_async(f.pool, 4096, f.a, &x), GRT_OK);
  grt_access w = {x, 4096, 1}, r = {x, 4096, 0};
  grt_kernel_desc d = {NULL, NULL, 1000, GRT_ENGINE_COMPUTE, "producer"};
  assert_int_equal(grt_sorder_launch(f.so, f.a, &d, &w, 1), GRT_OK);
  assert_int_equal(grt_free_async(f.pool, x, f.a), GRT_OK);
  d.name = "late reader";
  assert_int_equal(grt_sorder_launch(f.so, f.a, &d, &r, 1), GRT_OK);
  assert_int_equal(grt_sorder_synchronize(f.so), GRT_OK);
  assert_int_equal(reports_of(f.so, GRT_SORDER_USE_AFTER_FREE), 1);
  assert_int_equal(reports_of(f.so, GRT_SORDER_POISON_READ), 1); /* the free poisoned it in stream order */
  /* Under the threads clock the reader's body (the poison check) may run
     before grt_sorder_launch returns, i.e. before the launch's own analysis
     reports the use after free: find that report by kind, not by position. */
  grt_sorder_report rep;
  size_t k = 0;
  do assert_int_equal(grt_sorder_get_report(f.so, k++, &rep), GRT_OK);
  while (rep.kind != GRT_SORDER_USE_AFTER_FREE);
  assert_non_null(strstr(rep.text, "late reader"));
  assert_non_null(strstr(rep.text, "free_async"));
  fx_fini(&f);
}

static void poison_reader(void *p) { (void)p; }

/* Debug mode reproduces the host-order free's garbage on demand: the reader is
 * held by a gate, the host frees (poisoning at once), the reader reads poison. */
static void test_poison_host_order(void **state) {
  fixture f;
  fx_init(&f, clock_of(state), 1, 1);
  grt_devptr x;
  assert_int_equal(grt_malloc_async(f.pool, 4096, f.a, &x), GRT_OK);
  assert_int_equal(grt_sorder_memset(f.so, f.a, x, 1, 4096), GRT_OK);
  assert_int_equal(grt_sorder_stream_synchronize(f.so, f.a), GRT_OK); /* B holds real data */
  grt_user_event *u;
  assert_int_equal(grt_user_event_create(f.exec, "gate", &u), GRT_OK);
  assert_int_equal(grt_stream_wait_user_event(f.a, u, 1), GRT_OK);
  grt_access r = {x, 4096, 0};
  grt_kernel_desc d = {poison_reader, NULL, 1000, GRT_ENGINE_COMPUTE, "reader"};
  assert_int_equal(grt_sorder_launch(f.so, f.a, &d, &r, 1), GRT_OK);
  assert_int_equal(grt_mempool_free_host_order(f.pool, x), GRT_OK);
  assert_int_equal(grt_user_event_signal(u, 1), GRT_OK);
  assert_int_equal(grt_sorder_synchronize(f.so), GRT_OK);
  assert_int_equal(reports_of(f.so, GRT_SORDER_POISON_READ), 1);
  assert_int_equal(reports_of(f.so, GRT_SORDER_RACE), 1); /* the free is not ordered after the read */
  assert_int_equal(grt_user_event_destroy(u), GRT_OK);
  fx_fini(&f);
}

/* Serialized streams: B's short kernel issued after A's long one ends after it. */
static void test_serialize(void **state) {
  for (int ser = 0; ser < 2; ser++) {
    fixture f;
    fx_init(&f, clock_of(state), ser, 0);
    order_log log = {0};
    log_arg l1 = {&log, 1}, l2 = {&log, 2};
    grt_kernel_desc d1 = {log_body, &l1, 300000, GRT_ENGINE_COMPUTE, "long"};
    grt_kernel_desc d2 = {log_body, &l2, 1000, GRT_ENGINE_COMPUTE, "short"};
    assert_int_equal(grt_sorder_launch(f.so, f.a, &d1, NULL, 0), GRT_OK);
    assert_int_equal(grt_sorder_launch(f.so, f.b, &d2, NULL, 0), GRT_OK);
    assert_int_equal(grt_sorder_synchronize(f.so), GRT_OK);
    if (ser) assert_true(log_pos(&log, 1) < log_pos(&log, 2));
    else if (clock_of(state) == GRT_CLOCK_VIRTUAL) assert_true(log_pos(&log, 2) < log_pos(&log, 1));
    fx_fini(&f);
  }
}

static void test_env(void **state) {
  (void)state;
  grt_exec *exec = make_exec(GRT_CLOCK_VIRTUAL, 0);
  grt_sorder_config cfg;
  grt_sorder_config_default(&cfg);
  cfg.exec = exec;
  setenv("GRT_SORDER_DEBUG", "1", 1);
  grt_sorder *so;
  int ser, poi;
  assert_int_equal(grt_sorder_create(&cfg, &so), GRT_OK);
  unsetenv("GRT_SORDER_DEBUG");
  assert_int_equal(grt_sorder_get_debug(so, &ser, &poi), GRT_OK);
  assert_true(ser && poi);
  assert_int_equal(grt_sorder_set_debug(so, 0, 0), GRT_OK);
  assert_int_equal(grt_sorder_get_debug(so, &ser, &poi), GRT_OK);
  assert_false(ser || poi);
  assert_int_equal(grt_sorder_launch(so, NULL, NULL, NULL, 0), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt_sorder_get_debug(so, NULL, &poi), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt_sorder_get_debug(so, &ser, NULL), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt_sorder_event_query(so, NULL), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt_sorder_event_synchronize(so, NULL), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt_sorder_host_access(so, 0x1000, 0, 0), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt_sorder_destroy(so), GRT_OK);
  /* "0" or an empty value leave the configured mode; use_env = 0 ignores the variable */
  static const struct {
    const char *value;
    int use_env, on;
  } envs[] = {{"0", 1, 0}, {"", 1, 0}, {"yes", 1, 1}, {"1", 0, 0}};
  for (size_t i = 0; i < sizeof envs / sizeof envs[0]; i++) {
    setenv("GRT_SORDER_DEBUG", envs[i].value, 1);
    cfg.use_env = envs[i].use_env;
    assert_int_equal(grt_sorder_create(&cfg, &so), GRT_OK);
    unsetenv("GRT_SORDER_DEBUG");
    assert_int_equal(grt_sorder_get_debug(so, &ser, &poi), GRT_OK);
    assert_int_equal(ser, envs[i].on);
    assert_int_equal(poi, envs[i].on);
    assert_int_equal(grt_sorder_destroy(so), GRT_OK);
  }
  assert_int_equal(grt_sorder_create(&cfg, NULL), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt_exec_destroy(exec), GRT_OK);
}

/* Poison checking without the sanitizer: only declared reads are checked (the first 8 of them), an unnamed
 * kernel is called "kernel", and a host-order free poisons a block whose size is not a multiple of 8. */
static void test_poison_without_sanitizer(void **state) {
  (void)state;
  grt_exec *exec = make_exec(GRT_CLOCK_VIRTUAL, 0);
  grt_sorder_config cfg;
  grt_sorder_config_default(&cfg);
  cfg.exec = exec;
  cfg.use_env = 0;
  cfg.sanitize = 0;
  cfg.poison = 1;
  grt_sorder *so;
  assert_int_equal(grt_sorder_create(&cfg, &so), GRT_OK);
  grt_mempool_config pc;
  grt_mempool_config_default(&pc);
  pc.exec = exec;
  pc.sorder = so;
  grt_mempool *pool;
  assert_int_equal(grt_mempool_create(&pc, &pool), GRT_OK);
  grt_stream *a = make_stream(exec, GRT_STREAM_NON_BLOCKING, "A");
  grt_devptr x, y;
  assert_int_equal(grt_malloc_async(pool, 4096, a, &x), GRT_OK);
  assert_int_equal(grt_malloc_async(pool, 1001, a, &y), GRT_OK);
  assert_int_equal(grt_free_async(pool, x, a), GRT_OK); /* poisoned in stream order */
  assert_int_equal(grt_mempool_free_host_order(pool, y), GRT_OK); /* poisoned at once */
  grt_access acc[10];
  for (int k = 0; k < 10; k++) acc[k] = (grt_access){k == 0 ? x : 0x1000, 64, 0};
  acc[1] = (grt_access){x, 4096, 1}; /* a write is never checked */
  grt_kernel_desc d = {NULL, NULL, 1000, GRT_ENGINE_COMPUTE, NULL};
  assert_int_equal(grt_sorder_launch(so, a, &d, acc, 10), GRT_OK);
  acc[0] = (grt_access){y, 1001, 0};
  d.name = "tail reader";
  assert_int_equal(grt_sorder_launch(so, a, &d, acc, 1), GRT_OK);
  assert_int_equal(grt_sorder_synchronize(so), GRT_OK);
  size_t kept = 0;
  uint64_t total = 0;
  assert_int_equal(grt_sorder_report_count(so, &kept, &total), GRT_OK);
  assert_int_equal(kept, 2);
  grt_sorder_report r;
  assert_int_equal(grt_sorder_get_report(so, 0, &r), GRT_OK);
  assert_int_equal(r.kind, GRT_SORDER_POISON_READ);
  assert_int_equal(r.buffer, x);
  assert_string_equal(r.access.op, "kernel");
  assert_string_equal(r.access.stream, "A");
  assert_int_equal(r.access.seq, 0); /* no sanitizer: no sequence numbers */
  assert_int_equal(grt_sorder_get_report(so, 1, &r), GRT_OK);
  assert_int_equal(r.buffer, y);
  assert_string_equal(r.access.op, "tail reader");
  assert_int_equal(grt_stream_destroy(a), GRT_OK);
  assert_int_equal(grt_mempool_destroy(pool), GRT_OK);
  assert_int_equal(grt_sorder_destroy(so), GRT_OK);
  assert_int_equal(grt_exec_destroy(exec), GRT_OK);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      BOTH_CLOCKS(test_dag_table),   BOTH_CLOCKS(test_use_after_free), BOTH_CLOCKS(test_poison_host_order),
      BOTH_CLOCKS(test_serialize),   cmocka_unit_test(test_env),      cmocka_unit_test(test_poison_without_sanitizer),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
