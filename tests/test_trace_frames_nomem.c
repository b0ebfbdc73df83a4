/* test_trace_frames_nomem.c — loading traces with stacks when any one host allocation fails:
 * GRT_ERR_NOMEM with a reason, no trace, nothing leaked (the ASan and valgrind runs check the
 * leaks), for every allocation of a PyTorch snapshot and of a native file with frames in turn. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "nomem_wrap.h"
#include "pickle_builder.h"
#include "trace_test_util.h"

static void frame(pk *p, const char *name, const char *file, int64_t line) {
  dict_open(p);
  kv_str(p, "name", name);
  kv_str(p, "filename", file);
  str(p, "line"), inum(p, line);
  dict_close(p);
}

static void event(pk *p, const char *action, uint64_t addr) {
  dict_open(p);
  kv_str(p, "action", action);
  kv_num(p, "addr", addr);
  kv_num(p, "size", 64);
  str(p, "frames");
}

/* Every path that allocates: new strings, frames and stacks, a list met again (memo), a list of
 * known dicts, a new list of equal content, a malformed entry, a segment's and a block's frames. */
static void build(pk *p) {
  begin(p);
  str(p, "device_traces"), list_open(p), list_open(p);
  event(p, "alloc", 0x1000);
  list_open(p), frame(p, "torch::unwind::unwind()", "??", 0), memo(p), frame(p, "forward", "/u/m.py", 5), memo(p);
  list_close(p), memo(p), dict_close(p);
  event(p, "free_completed", 0x1000), memo_get(p, 2), dict_close(p);
  event(p, "alloc", 0x2000), list_open(p), memo_get(p, 0), memo_get(p, 1), list_close(p), dict_close(p);
  event(p, "alloc", 0x3000), list_open(p), frame(p, "forward", "/u/m.py", 5), small(p, 1), list_close(p);
  dict_close(p);
  list_close(p), list_close(p);
  str(p, "segments"), list_open(p), dict_open(p);
  kv_num(p, "address", 0x1000), kv_num(p, "total_size", 4096);
  str(p, "frames"), list_open(p), frame(p, "<module>", "/u/t.py", 9), list_close(p);
  str(p, "blocks"), list_open(p), dict_open(p), kv_num(p, "size", 4096), kv_str(p, "state", "active_allocated");
  str(p, "frames"), memo_get(p, 2), dict_close(p), list_close(p);
  dict_close(p), list_close(p);
  end(p);
}

static const char native_text[] = "gpurt-trace 1\n"
                                  "%frame 1 0 \"torch::unwind::unwind()\" \"??\"\n"
                                  "%frame 2 5 \"forward\" \"/u/m.py\"\n"
                                  "%frame 3 5 \"forward\" \"/u/m.py\"\n"
                                  "%stack 1 1 2\n"
                                  "%stack 2 1 3\n"
                                  "%stack 3 2\n"
                                  "%segment 0x1000 4096 0 small 0 @3\n"
                                  "%block 0x1000 4096 64 active_allocated @1\n"
                                  "alloc 0 64 0 - 0x1000 @1\n"
                                  "free 0 64 0 - 0x1000 @2\n"
                                  "alloc 1 64\n"
                                  "alloc 2 64 0 @3\n";

/* Fails allocation 1, 2, ... in turn until a load no longer needs the failure. */
static void fail_each(const void *data, size_t len, size_t want_stacks) {
  for (long n = 1;; n++) {
    grt_trace *t = (grt_trace *)&t;
    grt_trace_error err;
    nomem_arm(n);
    grt_status st = grt_trace_load_buffer(data, len, "in", NULL, &t, &err);
    bool fired = nomem_disarm();
    if (!fired) {
      assert_int_equal(st, GRT_OK);
      grt_trace_info in;
      assert_int_equal(grt_trace_get_info(t, &in), GRT_OK);
      assert_int_equal(in.n_stacks, want_stacks);
      assert_int_equal(grt_trace_destroy(t), GRT_OK);
      assert_true(n > 10);
      return;
    }
    if (st != GRT_ERR_NOMEM) fail_msg("allocation %ld: %s (%s)", n, grt_status_name(st), err.reason);
    assert_null(t);
    if (!strstr(err.reason, "memory")) fail_msg("allocation %ld: reason '%s'", n, err.reason);
  }
}

static void test_pickle_nomem(void **state) {
  (void)state;
  pk *p = malloc(sizeof *p);
  build(p);
  fail_each(p->b, p->n, 3);
  free(p);
}

static void test_native_nomem(void **state) {
  (void)state;
  fail_each(native_text, strlen(native_text), 2); /* stack 2 has stack 1's frames: merged */
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_pickle_nomem),
      cmocka_unit_test(test_native_nomem),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
