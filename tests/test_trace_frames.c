/* test_trace_frames.c — call stacks: PyTorch `frames` interned (pickles built byte by byte here),
 * malformed frames, the native %frame/%stack syntax (round trip, every error, streaming), and the
 * shared snapshots (skipped when absent). Folding: test_trace_frames_fold.c. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#define PK_CAP (1 << 20)
#include "pickle_builder.h"
#include "trace_test_util.h"

static void frame(pk *p, const char *name, const char *file, int64_t line) {
  dict_open(p);
  kv_str(p, "name", name);
  kv_str(p, "filename", file);
  str(p, "line"), inum(p, line);
  dict_close(p);
}

static grt_trace *load_pk(const pk *p, grt_status *st, grt_trace_error *err) {
  grt_trace *t = NULL;
  *st = grt_trace_load_buffer(p->b, p->n, "snap.pickle", NULL, &t, err);
  return t;
}

static grt_trace *load_ok(const pk *p, grt_trace_info *in) {
  grt_status st;
  grt_trace_error err;
  grt_trace *t = load_pk(p, &st, &err);
  if (st) fail_msg("%s", err.reason);
  assert_int_equal(grt_trace_get_info(t, in), GRT_OK);
  return t;
}

static void ev_head(pk *p, const char *action, uint64_t addr) {
  dict_open(p);
  kv_str(p, "action", action);
  kv_num(p, "addr", addr);
  kv_num(p, "size", 64);
}

/* ---- interning ---- */

/* Memo indices of the frames and the list the interning snapshot reuses. */
enum { M_A, M_B, M_C, M_L1 };

static void frame_a(pk *p) { frame(p, "torch::unwind::unwind()", "??", 0); }
static void frame_b(pk *p) { frame(p, "forward", "/home/u/model.py", 54); }
static void frame_c(pk *p) { frame(p, "<module>", "/home/u/train.py", 131); }

/* Events share stacks every way a pickle can: the same list object, a new list of the same frame
 * dicts, new dicts of equal content; a segment and its block carry frames too. Conversion reads the
 * segments before the traces, so the segment's stack is 1 and the block's (list L1) is 2. */
static void build_interning(pk *p) {
  begin(p);
  str(p, "device_traces"), list_open(p), list_open(p);
  ev_head(p, "alloc", 0x1000), str(p, "frames");
  list_open(p), frame_a(p), memo(p), frame_b(p), memo(p), frame_c(p), memo(p), list_close(p), memo(p);
  dict_close(p);
  ev_head(p, "free_requested", 0x1000), str(p, "frames"), memo_get(p, M_L1), dict_close(p);
  ev_head(p, "free_completed", 0x1000), str(p, "frames");
  list_open(p), memo_get(p, M_A), memo_get(p, M_B), memo_get(p, M_C), list_close(p), dict_close(p);
  ev_head(p, "alloc", 0x2000), str(p, "frames"), list_open(p), frame_a(p), frame_b(p), frame_c(p), list_close(p);
  dict_close(p);
  ev_head(p, "alloc", 0x3000), str(p, "frames"), list_open(p), memo_get(p, M_A), memo_get(p, M_B), list_close(p);
  dict_close(p);
  ev_head(p, "segment_alloc", 0x1000), dict_close(p);
  ev_head(p, "alloc", 0x4000), str(p, "frames"), list_open(p), list_close(p), dict_close(p);
  ev_head(p, "alloc", 0x5000), str(p, "frames"), op(p, 'N'), dict_close(p);
  ev_head(p, "alloc", 0x6000), str(p, "frames"), list_open(p), frame(p, "torch::unwind::unwind()", "??", 3);
  list_close(p), dict_close(p);
  list_close(p), list_close(p);
  str(p, "segments"), list_open(p), dict_open(p);
  kv_num(p, "device", 0), kv_num(p, "address", 0x1000), kv_num(p, "total_size", 2 << 20);
  str(p, "frames"), list_open(p), frame(p, "<module>", "/home/u/train.py", 7), list_close(p);
  str(p, "blocks"), list_open(p);
  dict_open(p), kv_num(p, "size", 512), kv_str(p, "state", "active_allocated"), str(p, "frames");
  memo_get(p, M_L1), dict_close(p);
  dict_open(p), kv_num(p, "size", (2 << 20) - 512), kv_str(p, "state", "inactive"), str(p, "frames");
  list_open(p), list_close(p), dict_close(p);
  list_close(p), dict_close(p), list_close(p);
  end(p);
}

static void assert_frame(const grt_trace_frame *f, const char *name, const char *file, int64_t line) {
  assert_string_equal(f->name, name);
  assert_string_equal(f->filename, file);
  assert_int_equal(f->line, line);
}

static void test_frames_interned(void **state) {
  (void)state;
  pk *p = malloc(sizeof *p);
  build_interning(p);
  grt_trace_info in;
  grt_trace *t = load_ok(p, &in);
  assert_int_equal(in.n_events, 9);
  assert_int_equal(in.n_stacks, 4);
  assert_int_equal(in.n_frames, 5);
  assert_int_equal(in.frames_skipped, 0);
  /* events are read as the pickle is parsed, before the segments: theirs come first */
  static const uint32_t want[9] = {1, 1, 1, 1, 2, 0, 0, 0, 3};
  assert_non_null(in.event_stack);
  assert_memory_equal(in.event_stack, want, sizeof want);
  assert_int_equal(in.segments[0].stack, 4);
  assert_int_equal(in.segments[0].blocks[0].stack, 1);
  assert_int_equal(in.segments[0].blocks[1].stack, 0);
  /* frames in order of first appearance: A, B, C, D, then E (the segment's) */
  assert_frame(&in.frames[0], "torch::unwind::unwind()", "??", 0);
  assert_frame(&in.frames[1], "forward", "/home/u/model.py", 54);
  assert_frame(&in.frames[2], "<module>", "/home/u/train.py", 131);
  assert_frame(&in.frames[3], "torch::unwind::unwind()", "??", 3);
  assert_frame(&in.frames[4], "<module>", "/home/u/train.py", 7);
  /* equal strings are one pointer */
  assert_ptr_equal(in.frames[2].name, in.frames[4].name);
  assert_ptr_equal(in.frames[2].filename, in.frames[4].filename);
  assert_ptr_equal(in.frames[0].name, in.frames[3].name);
  const grt_trace_frame *f;
  size_t n;
  assert_int_equal(grt_trace_stack(t, 1, &f, &n), GRT_OK);
  assert_int_equal(n, 3);
  assert_frame(&f[0], "torch::unwind::unwind()", "??", 0); /* innermost first, as recorded */
  assert_frame(&f[2], "<module>", "/home/u/train.py", 131);
  assert_ptr_equal(f[1].name, in.frames[1].name);
  assert_int_equal(grt_trace_stack(t, 2, &f, &n), GRT_OK);
  assert_int_equal(n, 2);
  assert_frame(&f[1], "forward", "/home/u/model.py", 54);
  assert_int_equal(grt_trace_stack(t, 3, &f, &n), GRT_OK);
  assert_int_equal(n, 1);
  assert_int_equal(f[0].line, 3);
  assert_int_equal(grt_trace_stack(t, 0, &f, &n), GRT_OK);
  assert_null(f);
  assert_int_equal(n, 0);
  size_t strs = sizeof "<module>" + sizeof "/home/u/train.py" + sizeof "torch::unwind::unwind()" + sizeof "??" +
      sizeof "forward" + sizeof "/home/u/model.py";
  size_t entries = 1 + 3 + 2 + 1;
  assert_int_equal(in.stack_bytes,
                   strs + 5 * sizeof(grt_trace_frame) + entries * (sizeof(grt_trace_frame) + 4) + 4 * sizeof(size_t) +
                       9 * sizeof(uint32_t));
  assert_int_equal(sizeof(grt_trace_event), 40);
  assert_int_equal(grt_trace_destroy(t), GRT_OK);
  free(p);
}

static void test_stack_lookup_errors(void **state) {
  (void)state;
  pk *p = malloc(sizeof *p);
  build_interning(p);
  grt_trace_info in;
  grt_trace *t = load_ok(p, &in);
  const grt_trace_frame *f = (const grt_trace_frame *)p;
  size_t n = 77;
  assert_int_equal(grt_trace_stack(t, 5, &f, &n), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt_trace_stack(t, UINT32_MAX, &f, &n), GRT_ERR_INVALID_ARG);
  assert_ptr_equal(f, p); /* a failed call leaves the outputs */
  assert_int_equal(n, 77);
  assert_int_equal(grt_trace_stack(NULL, 1, &f, &n), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt_trace_stack(t, 1, NULL, &n), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt_trace_stack(t, 1, &f, NULL), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt_trace_destroy(t), GRT_OK);
  /* a trace without frames: no tables at all */
  begin(p), str(p, "device_traces"), list_open(p), list_open(p), ev_head(p, "alloc", 0x10), dict_close(p);
  list_close(p), list_close(p), end(p);
  t = load_ok(p, &in);
  assert_null(in.event_stack);
  assert_int_equal(in.n_stacks, 0);
  assert_int_equal(in.n_frames, 0);
  assert_null(in.frames);
  assert_int_equal(in.stack_bytes, 0);
  assert_int_equal(grt_trace_stack(t, 0, &f, &n), GRT_OK);
  assert_int_equal(n, 0);
  assert_int_equal(grt_trace_stack(t, 1, &f, &n), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt_trace_destroy(t), GRT_OK);
  free(p);
}

/* ---- malformed frames ---- */

typedef void (*body_fn)(pk *p);

/* One alloc whose `frames` value is body's. */
static grt_trace *one_event(pk *p, body_fn body, grt_trace_info *in) {
  begin(p);
  str(p, "device_traces"), list_open(p), list_open(p);
  ev_head(p, "alloc", 0x1000), str(p, "frames"), body(p), dict_close(p);
  list_close(p), list_close(p);
  end(p);
  return load_ok(p, in);
}

static void good(pk *p) { frame(p, "forward", "/home/u/model.py", 54); }
static void fv_int(pk *p) { small(p, 5); }
static void fv_dict(pk *p) { dict_open(p), dict_close(p); }
static void fv_str(pk *p) { str(p, "forward"); }
static void fv_tuple(pk *p) { op(p, '('), good(p), op(p, 't'); }
static void fv_entry_int(pk *p) { list_open(p), small(p, 5), good(p), list_close(p); }
static void fv_entry_list(pk *p) { list_open(p), list_open(p), list_close(p), good(p), list_close(p); }
static void bad_frame(pk *p, body_fn fields) {
  list_open(p), dict_open(p), fields(p), dict_close(p), good(p), list_close(p);
}
static void f_no_name(pk *p) { kv_str(p, "filename", "a.py"), kv_num(p, "line", 1); }
static void f_no_file(pk *p) { kv_str(p, "name", "f"), kv_num(p, "line", 1); }
static void f_no_line(pk *p) { kv_str(p, "name", "f"), kv_str(p, "filename", "a.py"); }
static void f_name_int(pk *p) { str(p, "name"), small(p, 3), kv_str(p, "filename", "a.py"), kv_num(p, "line", 1); }
static void f_file_none(pk *p) { kv_str(p, "name", "f"), str(p, "filename"), op(p, 'N'), kv_num(p, "line", 1); }
static void f_name_bytes(pk *p) {
  str(p, "name"), op(p, 'C'), op(p, 1), op(p, 'f');
  kv_str(p, "filename", "a.py"), kv_num(p, "line", 1);
}
static void f_line_str(pk *p) { kv_str(p, "name", "f"), kv_str(p, "filename", "a.py"), kv_str(p, "line", "1"); }
static void f_line_float(pk *p) {
  kv_str(p, "name", "f"), kv_str(p, "filename", "a.py"), str(p, "line"), op(p, 'G');
  for (int i = 0; i < 8; i++) op(p, i == 0 ? 0x3f : i == 1 ? 0xf0 : 0); /* 1.0 */
}
static void f_line_big(pk *p) {
  kv_str(p, "name", "f"), kv_str(p, "filename", "a.py"), kv_num(p, "line", UINT64_C(1) << 63);
}
static void f_line_bool(pk *p) { kv_str(p, "name", "f"), kv_str(p, "filename", "a.py"), str(p, "line"), op(p, 0x88); }
static void f_name_nul(pk *p) {
  str(p, "name"), strn(p, "f\0g", 3), kv_str(p, "filename", "a.py"), kv_num(p, "line", 1);
}
static void f_file_nul(pk *p) {
  kv_str(p, "name", "f"), str(p, "filename"), strn(p, "a\0.py", 5), kv_num(p, "line", 1);
}
static void fv_no_name(pk *p) { bad_frame(p, f_no_name); }
static void fv_no_file(pk *p) { bad_frame(p, f_no_file); }
static void fv_no_line(pk *p) { bad_frame(p, f_no_line); }
static void fv_name_int(pk *p) { bad_frame(p, f_name_int); }
static void fv_file_none(pk *p) { bad_frame(p, f_file_none); }
static void fv_name_bytes(pk *p) { bad_frame(p, f_name_bytes); }
static void fv_line_str(pk *p) { bad_frame(p, f_line_str); }
static void fv_line_float(pk *p) { bad_frame(p, f_line_float); }
static void fv_line_big(pk *p) { bad_frame(p, f_line_big); }
static void fv_line_bool(pk *p) { bad_frame(p, f_line_bool); }
static void fv_name_nul(pk *p) { bad_frame(p, f_name_nul); }
static void fv_file_nul(pk *p) { bad_frame(p, f_file_nul); }
static void fv_all_bad(pk *p) { list_open(p), small(p, 1), op(p, 'N'), dict_open(p), dict_close(p), list_close(p); }
/* a list holding itself: the reader must not walk into it */
static void fv_cycle(pk *p) { op(p, ']'), memo(p), op(p, '('), good(p), memo_get(p, 0), op(p, 'e'); }

static void expect_frames(body_fn body, size_t skipped, size_t depth) {
  pk *p = malloc(sizeof *p);
  grt_trace_info in;
  grt_trace *t = one_event(p, body, &in);
  assert_int_equal(in.frames_skipped, skipped);
  assert_int_equal(in.n_events, 1);
  if (depth == 0) {
    assert_null(in.event_stack);
    assert_int_equal(in.n_stacks, 0);
  } else {
    const grt_trace_frame *f;
    size_t n;
    assert_int_equal(in.event_stack[0], 1);
    assert_int_equal(grt_trace_stack(t, 1, &f, &n), GRT_OK);
    assert_int_equal(n, depth);
    assert_frame(&f[0], "forward", "/home/u/model.py", 54);
  }
  assert_int_equal(grt_trace_destroy(t), GRT_OK);
  free(p);
}

static void test_frames_malformed(void **state) {
  (void)state;
  expect_frames(fv_int, 1, 0);
  expect_frames(fv_dict, 1, 0);
  expect_frames(fv_str, 1, 0);
  expect_frames(fv_tuple, 0, 1);
  expect_frames(fv_entry_int, 1, 1);
  expect_frames(fv_entry_list, 1, 1);
  expect_frames(fv_no_name, 1, 1);
  expect_frames(fv_no_file, 1, 1);
  expect_frames(fv_no_line, 1, 1);
  expect_frames(fv_name_int, 1, 1);
  expect_frames(fv_file_none, 1, 1);
  expect_frames(fv_name_bytes, 1, 1);
  expect_frames(fv_line_str, 1, 1);
  expect_frames(fv_line_float, 1, 1);
  expect_frames(fv_line_big, 1, 1);
  expect_frames(fv_line_bool, 1, 1);
  expect_frames(fv_name_nul, 1, 1);
  expect_frames(fv_file_nul, 1, 1);
  expect_frames(fv_all_bad, 1, 0);
  expect_frames(fv_cycle, 1, 1);
}

static void fv_neg(pk *p) { list_open(p), frame(p, "f", "a.py", -1), frame(p, "g", "b.py", INT64_MIN), list_close(p); }

static void test_frames_negative_line(void **state) {
  (void)state;
  pk *p = malloc(sizeof *p);
  grt_trace_info in;
  grt_trace *t = one_event(p, fv_neg, &in);
  assert_int_equal(in.frames_skipped, 0);
  assert_int_equal(in.n_frames, 2);
  assert_int_equal(in.frames[0].line, -1); /* CPython's "no line", kept */
  assert_int_equal(in.frames[1].line, INT64_MIN);
  assert_int_equal(grt_trace_destroy(t), GRT_OK);
  free(p);
}

/* 100000 references to one memoized frame: one frame, one stack of that depth. */
static void fv_huge(pk *p) {
  list_open(p), good(p), memo(p);
  for (int i = 1; i < 100000; i++) memo_get(p, 0);
  list_close(p);
}

static void test_frames_huge(void **state) {
  (void)state;
  pk *p = malloc(sizeof *p);
  grt_trace_info in;
  grt_trace *t = one_event(p, fv_huge, &in);
  assert_int_equal(in.n_frames, 1);
  assert_int_equal(in.n_stacks, 1);
  const grt_trace_frame *f;
  size_t n;
  assert_int_equal(grt_trace_stack(t, 1, &f, &n), GRT_OK);
  assert_int_equal(n, 100000);
  assert_ptr_equal(f[99999].name, f[0].name);
  /* bounded by the input: here 28 bytes per 5-byte reference */
  assert_true(in.stack_bytes < 6 * p->n);
  assert_int_equal(grt_trace_destroy(t), GRT_OK);
  free(p);
}

/* Skips are counted once per owner: two events sharing one malformed list, a block, a segment;
 * not for a user_defined event or a segment of another device, which are not read. */
static void test_frames_skipped_owners(void **state) {
  (void)state;
  pk *p = malloc(sizeof *p);
  begin(p);
  str(p, "device_traces"), list_open(p), list_open(p);
  ev_head(p, "alloc", 0x1000), str(p, "frames"), fv_entry_int(p), memo(p), dict_close(p);
  ev_head(p, "free_completed", 0x1000), str(p, "frames"), memo_get(p, 0), dict_close(p);
  dict_open(p), kv_str(p, "action", "user_defined"), str(p, "frames"), small(p, 1), dict_close(p);
  list_close(p), list_close(p);
  str(p, "segments"), list_open(p);
  dict_open(p), kv_num(p, "address", 0x1000), kv_num(p, "total_size", 1024), str(p, "frames"), small(p, 2);
  str(p, "blocks"), list_open(p), dict_open(p), kv_num(p, "size", 1024), kv_str(p, "state", "inactive");
  str(p, "frames"), fv_no_line(p), dict_close(p), list_close(p), dict_close(p);
  dict_open(p), kv_num(p, "device", 1), kv_num(p, "address", 0x9000), kv_num(p, "total_size", 1024);
  str(p, "frames"), small(p, 3), dict_close(p);
  list_close(p);
  end(p);
  grt_trace_info in;
  grt_trace *t = load_ok(p, &in);
  assert_int_equal(in.frames_skipped, 4);
  assert_int_equal(in.n_events, 2);
  assert_int_equal(in.event_stack[0], 1);
  assert_int_equal(in.event_stack[1], 1);
  assert_int_equal(in.segments[0].stack, 0);
  assert_int_equal(in.segments[0].blocks[0].stack, 1);
  assert_int_equal(grt_trace_destroy(t), GRT_OK);
  free(p);
}

/* ---- the native format ---- */

static char *tmp_path(void) {
  char tmp[] = "/tmp/grt_frames_XXXXXX";
  int fd = mkstemp(tmp);
  assert_true(fd >= 0);
  close(fd);
  return strdup(tmp);
}

static char *slurp(const char *path, size_t *n) {
  FILE *f = fopen(path, "rb");
  assert_non_null(f);
  fseek(f, 0, SEEK_END);
  long len = ftell(f);
  fseek(f, 0, SEEK_SET);
  char *buf = malloc((size_t)len + 1);
  assert_int_equal(fread(buf, 1, (size_t)len, f), (size_t)len);
  fclose(f);
  buf[len] = '\0';
  *n = (size_t)len;
  return buf;
}

/* Everything about stacks is the same in a and b. */
static void assert_same_stacks(const grt_trace *ta, const grt_trace *tb) {
  grt_trace_info a, b;
  assert_int_equal(grt_trace_get_info(ta, &a), GRT_OK);
  assert_int_equal(grt_trace_get_info(tb, &b), GRT_OK);
  assert_int_equal(a.n_events, b.n_events);
  assert_memory_equal(a.events, b.events, a.n_events * sizeof *a.events);
  assert_int_equal(a.event_stack != NULL, b.event_stack != NULL);
  if (a.event_stack) assert_memory_equal(a.event_stack, b.event_stack, a.n_events * sizeof *a.event_stack);
  assert_int_equal(a.n_stacks, b.n_stacks);
  assert_int_equal(a.n_frames, b.n_frames);
  assert_int_equal(a.stack_bytes, b.stack_bytes);
  for (size_t i = 0; i < a.n_frames; i++)
    assert_frame(&b.frames[i], a.frames[i].name, a.frames[i].filename, a.frames[i].line);
  for (uint32_t s = 1; s <= a.n_stacks; s++) {
    const grt_trace_frame *fa, *fb;
    size_t na, nb;
    assert_int_equal(grt_trace_stack(ta, s, &fa, &na), GRT_OK);
    assert_int_equal(grt_trace_stack(tb, s, &fb, &nb), GRT_OK);
    assert_int_equal(na, nb);
    for (size_t k = 0; k < na; k++) assert_frame(&fb[k], fa[k].name, fa[k].filename, fa[k].line);
  }
  assert_int_equal(a.n_segments, b.n_segments);
  for (size_t s = 0; s < a.n_segments; s++) {
    assert_int_equal(a.segments[s].stack, b.segments[s].stack);
    assert_int_equal(a.segments[s].n_blocks, b.segments[s].n_blocks);
    assert_memory_equal(a.segments[s].blocks, b.segments[s].blocks, a.segments[s].n_blocks * sizeof(grt_trace_block));
  }
}

/* trace -> native -> trace -> native: the traces agree and the two files are byte for byte equal. */
static void round_trip(const grt_trace *t) {
  char *p1 = tmp_path(), *p2 = tmp_path();
  grt_trace_error err;
  grt_status st;
  assert_int_equal(grt_trace_save_native(t, p1, &err), GRT_OK);
  grt_trace *u = tt_load(p1, GRT_TRACE_FORMAT_AUTO, &err, &st);
  if (st) fail_msg("%s:%llu: %s", p1, (unsigned long long)err.line, err.reason);
  assert_same_stacks(t, u);
  assert_int_equal(grt_trace_save_native(u, p2, &err), GRT_OK);
  size_t n1, n2;
  char *b1 = slurp(p1, &n1), *b2 = slurp(p2, &n2);
  assert_int_equal(n1, n2);
  assert_memory_equal(b1, b2, n1);
  for (size_t i = 0; i < n1; i++) assert_true(b1[i] == '\n' || (b1[i] >= 0x20 && b1[i] < 0x7f)); /* ASCII */
  free(b1);
  free(b2);
  assert_int_equal(grt_trace_destroy(u), GRT_OK);
  unlink(p1);
  unlink(p2);
  free(p1);
  free(p2);
}

static void test_native_round_trip_frames(void **state) {
  (void)state;
  pk *p = malloc(sizeof *p);
  build_interning(p);
  grt_trace_info in;
  grt_trace *t = load_ok(p, &in);
  round_trip(t);
  char *path = tmp_path();
  grt_trace_error err;
  assert_int_equal(grt_trace_save_native(t, path, &err), GRT_OK);
  size_t n;
  char *text = slurp(path, &n);
  assert_non_null(
      strstr(text, "\n%frame 1 0 \"torch::unwind::unwind()\" \"??\"\n%frame 2 54 \"forward\" \"/home/u/model.py\"\n"));
  assert_non_null(strstr(text, "\n%stack 1 1 2 3\n%stack 2 1 2\n%stack 3 4\n%stack 4 5\n"));
  assert_non_null(strstr(text, "\n%segment 0x1000 2097152 0 small 0 @4\n%block 0x1000 512 0 active_allocated @1\n"));
  assert_non_null(strstr(text, "\nalloc 0 64 0 - 0x1000 @1\n"));
  assert_non_null(strstr(text, "\nsegment_alloc - 64 0 - 0x1000\n"));
  free(text);
  unlink(path);
  free(path);
  assert_int_equal(grt_trace_destroy(t), GRT_OK);
  free(p);
}

/* Every byte a name can hold, escaped and back. */
static void fv_bytes(pk *p) {
  list_open(p);
  dict_open(p), str(p, "name"), strn(p, "q\"b\\t\tn\nr\r\x01\x7f\xc3\xa4 ", 15), kv_str(p, "filename", "");
  kv_num(p, "line", 0), dict_close(p);
  frame(p, "", "x.py", 1);
  list_close(p);
}

static void test_native_escapes(void **state) {
  (void)state;
  pk *p = malloc(sizeof *p);
  grt_trace_info in;
  grt_trace *t = one_event(p, fv_bytes, &in);
  assert_int_equal(in.frames_skipped, 0);
  assert_memory_equal(in.frames[0].name, "q\"b\\t\tn\nr\r\x01\x7f\xc3\xa4 ", 16);
  assert_string_equal(in.frames[1].name, "");
  round_trip(t);
  char *path = tmp_path();
  grt_trace_error err;
  assert_int_equal(grt_trace_save_native(t, path, &err), GRT_OK);
  size_t n;
  char *text = slurp(path, &n);
  assert_non_null(
      strstr(text, "\n%frame 1 0 \"q\\\"b\\\\t\\tn\\nr\\r\\x01\\x7f\\xc3\\xa4 \" \"\"\n%frame 2 1 \"\" \"x.py\"\n"));
  free(text);
  unlink(path);
  free(path);
  assert_int_equal(grt_trace_destroy(t), GRT_OK);
  free(p);
}

/* The file's own ids, in any order, mapped to the trace's; equal content merged. */
static void test_native_read_frames(void **state) {
  (void)state;
  const char *text = "gpurt-trace 1\n"
                     "%frame 10 54 \"forward\" \"/home/u/model.py\"\n"
                     "  %frame 3 -1   \"<module>\"\t\"/home/u/tr\\x61in.py\"  \n"
                     "%frame 99 54 \"forward\" \"/home/u/model.py\"\n" /* same as 10 */
                     "%frame 4 0 \"\xc3\xa4\" \"\"\n"
                     "%stack 7 10 3\n"
                     "%stack 2 3\n"
                     "%stack 5 99 3\n" /* same frames as 7 */
                     "%segment 0x1000 4096 0 small 0 0 0 @2\n"
                     "%block 0x1000 4096 4096 active_allocated @5\n"
                     "alloc 1 4096 0 @7\n"
                     "free 1 4096 0 5 0x1000 @0\n"
                     "alloc 2 8 @2\n"
                     "%stack 1 4\n"
                     "alloc 3 8 - - - @1\n";
  grt_trace_error err;
  grt_status st;
  grt_trace *t = tt_load_str(text, GRT_TRACE_FORMAT_NATIVE, &err, &st);
  if (st) fail_msg("%llu: %s", (unsigned long long)err.line, err.reason);
  grt_trace_info in;
  assert_int_equal(grt_trace_get_info(t, &in), GRT_OK);
  assert_int_equal(in.n_frames, 3);
  assert_frame(&in.frames[0], "forward", "/home/u/model.py", 54);
  assert_frame(&in.frames[1], "<module>", "/home/u/train.py", -1);
  assert_frame(&in.frames[2], "\xc3\xa4", "", 0);
  assert_int_equal(in.n_stacks, 3);
  static const uint32_t want[4] = {1, 0, 2, 3};
  assert_memory_equal(in.event_stack, want, sizeof want);
  assert_int_equal(in.segments[0].stack, 2);
  assert_int_equal(in.segments[0].blocks[0].stack, 1);
  assert_int_equal(in.segments[0].pool_id[0], 0);
  assert_int_equal(in.events[1].addr, 0x1000);
  const grt_trace_frame *f;
  size_t n;
  assert_int_equal(grt_trace_stack(t, 1, &f, &n), GRT_OK);
  assert_int_equal(n, 2);
  assert_string_equal(f[0].name, "forward");
  assert_string_equal(f[1].name, "<module>");
  round_trip(t);
  assert_int_equal(grt_trace_destroy(t), GRT_OK);
}

static void expect_error(const char *body, uint64_t line, const char *reason) {
  char text[512];
  snprintf(text, sizeof text, "gpurt-trace 1\n%%frame 1 0 \"f\" \"a.py\"\n%%stack 1 1\n%s", body);
  grt_trace_error err;
  grt_status st;
  grt_trace *t = tt_load_str(text, GRT_TRACE_FORMAT_NATIVE, &err, &st);
  assert_int_equal(st, GRT_ERR_PARSE);
  assert_null(t);
  if (strcmp(err.reason, reason) != 0) fail_msg("%s: got '%s', want '%s'", body, err.reason, reason);
  assert_int_equal(err.line, line);
}

static void test_native_frame_errors(void **state) {
  (void)state;
  expect_error("%frame 2\n", 4, "%frame needs: id line \"name\" \"filename\"");
  expect_error("%frame x 0 \"a\" \"b\"\n", 4, "%frame needs: id line \"name\" \"filename\"");
  expect_error("%frame 2 zz \"a\" \"b\"\n", 4, "frame line 'zz' is not a number");
  expect_error("%frame 2 0 a \"b\"\n", 4, "frame name is not a quoted string");
  expect_error("%frame 2 0 \"a\"\n", 4, "frame filename is not a quoted string");
  expect_error("%frame 2 0 \"a\" b\n", 4, "frame filename is not a quoted string");
  expect_error("%frame 2 0 \"abc\n", 4, "frame name has no closing quote");
  expect_error("%frame 2 0 \"ab\\", 4, "frame name has no closing quote");
  expect_error("%frame 2 0 \"a\tb\" \"c\"\n", 4, "frame name holds the raw byte 0x09 (write \\x09)");
  expect_error("%frame 2 0 \"a\" \"\x7f\"\n", 4, "frame filename holds the raw byte 0x7f (write \\x7f)");
  expect_error("%frame 2 0 \"a\\q\" \"c\"\n", 4, "frame name: unknown escape '\\q'");
  expect_error("%frame 2 0 \"a\\x4\" \"c\"\n", 4, "frame name: \\x needs two hex digits");
  expect_error("%frame 2 0 \"a\\xZZ\" \"c\"\n", 4, "frame name: \\x needs two hex digits");
  expect_error("%frame 2 0 \"a\\x00\" \"c\"\n", 4, "frame name: \\x00 (a NUL byte) is not allowed");
  expect_error("%frame 2 0 \"a\"b \"c\"\n", 4, "frame name: text right after the closing quote");
  expect_error("%frame 2 0 \"a\" \"c\" extra\n", 4, "%frame: 'extra' after the filename");
  expect_error("%frame 1 5 \"g\" \"b.py\"\n", 4, "frame 1 is defined twice");
  expect_error("%stack\n", 4, "%stack needs: id (1 or more) and frame ids");
  expect_error("%stack 0 1\n", 4, "%stack needs: id (1 or more) and frame ids");
  expect_error("%stack 2\n", 4, "stack 2 has no frames (events without frames carry no stack field)");
  expect_error("%stack 2 1 x\n", 4, "stack frame id 'x' is not a number");
  expect_error("%stack 2 1 9\n", 4, "frame 9 is not defined (its %frame line must come first)");
  expect_error("%stack 1 1\n", 4, "stack 1 is defined twice");
  expect_error("alloc 0 8 0 @x\n", 4, "stack field '@x' is not '@' and a number");
  expect_error("alloc 0 8 0 @\n", 4, "stack field '@' is not '@' and a number");
  expect_error("alloc 0 8 0 @5\n", 4, "stack 5 is not defined (its %stack line must come first)");
  expect_error("alloc 0 8 @1 0\n", 4, "the stack field '@1' must be the last field");
  expect_error("alloc 0 8 0 1 0x10 7 @1\n", 4, "too many fields (at most 6: kind id size stream time addr)");
  expect_error("%device 0 1 @1\n", 4, "%device takes no stack field");
  expect_error("%setting expandable_segments 1 @1\n", 4, "%setting takes no stack field");
  expect_error("%segment 0x0 8 0 small 0 @x\n", 4, "stack field '@x' is not '@' and a number");
  expect_error("%segment 0x0 8 0 small 0 @3\n", 4, "stack 3 is not defined (its %stack line must come first)");
  expect_error("%segment 0x0 8 0 small 0 @1 5\n", 4, "the stack field '@1' must be the last field");
}

/* ---- streaming ---- */

typedef struct seen {
  size_t n;
  uint64_t ids[8];
} seen;

static grt_status on_event(void *ctx, const grt_trace_event *ev, grt_stream_id stream) {
  (void)stream;
  seen *s = ctx;
  if (s->n < 8) s->ids[s->n] = ev->id;
  s->n++;
  return GRT_OK;
}

static char *write_text(const char *text, size_t n) {
  char *path = tmp_path();
  FILE *f = fopen(path, "wb");
  assert_non_null(f);
  assert_int_equal(fwrite(text, 1, n, f), n);
  fclose(f);
  return path;
}

/* A frame name of `len` bytes and a stack of `depth` frames: both past the streaming line limit,
 * the name past its read chunk too; then events, and a bad line whose number must be right. */
static char *long_defs(size_t len, size_t depth, const char *tail, size_t *n) {
  size_t cap = len + depth * 4 + 4096;
  char *b = malloc(cap);
  size_t k = (size_t)snprintf(b, cap, "gpurt-trace 1\n%%frame 1 0 \"");
  memset(b + k, 'x', len);
  k += len;
  k += (size_t)snprintf(b + k, cap - k, "\" \"a.py\"\n%%stack 1");
  for (size_t i = 0; i < depth; i++) k += (size_t)snprintf(b + k, cap - k, " 1");
  k += (size_t)snprintf(b + k, cap - k, "\nalloc 4 8 0 @1\nfree 4 8 0 - - @1\n%s", tail);
  *n = k;
  return b;
}

static void test_native_stream_skips_frames(void **state) {
  (void)state;
  size_t n;
  char *text = long_defs(200000, 3000, "", &n);
  char *path = write_text(text, n);
  seen s = {0};
  grt_trace_error err;
  grt_status st = grt_trace_read_native_stream(path, on_event, &s, &err);
  if (st) fail_msg("%llu: %s", (unsigned long long)err.line, err.reason);
  assert_int_equal(s.n, 2);
  assert_int_equal(s.ids[0], 4);
  /* the whole-file reader takes the same lines */
  grt_trace *t = tt_load(path, GRT_TRACE_FORMAT_AUTO, &err, &st);
  assert_int_equal(st, GRT_OK);
  grt_trace_info in;
  assert_int_equal(grt_trace_get_info(t, &in), GRT_OK);
  assert_int_equal(strlen(in.frames[0].name), 200000);
  const grt_trace_frame *f;
  size_t depth;
  assert_int_equal(grt_trace_stack(t, 1, &f, &depth), GRT_OK);
  assert_int_equal(depth, 3000);
  assert_int_equal(grt_trace_destroy(t), GRT_OK);
  unlink(path);
  free(path);
  free(text);
  /* line numbers count the skipped lines: the bad line is line 6 */
  text = long_defs(5000, 10, "alloc 5 8 0 @x\n", &n);
  path = write_text(text, n);
  st = grt_trace_read_native_stream(path, on_event, &s, &err);
  assert_int_equal(st, GRT_ERR_PARSE);
  assert_int_equal(err.line, 6);
  assert_string_equal(err.reason, "stack field '@x' is not '@' and a number");
  unlink(path);
  free(path);
  free(text);
  /* streaming does not resolve stacks: an undefined one passes; a long definition at EOF is skipped */
  const char *undef = "gpurt-trace 1\nalloc 1 8 0 @9\n%stack 2 1 1 1";
  path = write_text(undef, strlen(undef));
  s.n = 0;
  assert_int_equal(grt_trace_read_native_stream(path, on_event, &s, &err), GRT_OK);
  assert_int_equal(s.n, 1);
  unlink(path);
  free(path);
  text = long_defs(70000, 1, "", &n);
  n = strlen("gpurt-trace 1\n%frame 1 0 \"") + 70000; /* ends inside the %frame line */
  path = write_text(text, n);
  s.n = 0;
  assert_int_equal(grt_trace_read_native_stream(path, on_event, &s, &err), GRT_OK);
  assert_int_equal(s.n, 0);
  unlink(path);
  free(path);
  free(text);
  /* any other long line is still refused */
  text = long_defs(10, 1, "# ", &n);
  char *longer = malloc(n + 6000);
  memcpy(longer, text, n);
  memset(longer + n, 'c', 5000);
  path = write_text(longer, n + 5000);
  st = grt_trace_read_native_stream(path, on_event, &s, &err);
  assert_int_equal(st, GRT_ERR_PARSE);
  assert_int_equal(err.line, 6);
  assert_string_equal(err.reason, "line longer than 4096 bytes");
  unlink(path);
  free(path);
  free(longer);
  free(text);
}

#define N(a) (sizeof(a) / sizeof((a)[0]))

/* ---- the shared snapshots ---- */

static const struct {
  const char *file;
  size_t events, with_stack, stacks, frames;
} shared[] = {
    {"HugePandaCoder_inference2.pickle", 2375, 2375, 159, 260},
    {"MAGMA27_memory_snapshot.pickle", 5163, 1421, 54, 55},
    {"MercuryB1_empty_cache_loop.pickle", 9576, 9576, 149, 302},
    {"bcrafton_memory_snapshot.pickle", 6486, 6486, 142, 443},
    {"bolongcheng_expandable_cl128.pickle", 5112, 5112, 88, 306},
};

static void test_shared_snapshots(void **state) {
  (void)state;
  if (!tt_shared("traces/pytorch/MAGMA27_memory_snapshot.pickle")) {
    fprintf(stderr, "test_shared_snapshots: skipped: $GRT_SHARED_DIR/traces/pytorch not found\n");
    skip();
  }
  for (size_t i = 0; i < N(shared); i++) {
    char rel[128];
    snprintf(rel, sizeof rel, "traces/pytorch/%s", shared[i].file);
    char *path = strdup(tt_shared(rel));
    grt_trace_error err;
    grt_status st;
    grt_trace *t = tt_load(path, GRT_TRACE_FORMAT_AUTO, &err, &st);
    if (st) fail_msg("%s: %s", path, err.reason);
    grt_trace_info in;
    assert_int_equal(grt_trace_get_info(t, &in), GRT_OK);
    assert_int_equal(in.n_events, shared[i].events);
    size_t with = 0;
    for (size_t k = 0; k < in.n_events; k++) with += in.event_stack[k] != 0;
    assert_int_equal(with, shared[i].with_stack);
    assert_int_equal(in.n_stacks, shared[i].stacks);
    assert_int_equal(in.n_frames, shared[i].frames);
    assert_int_equal(in.frames_skipped, 0);
    for (uint32_t s = 1; s <= in.n_stacks; s++) {
      const grt_trace_frame *f;
      size_t n;
      assert_int_equal(grt_trace_stack(t, s, &f, &n), GRT_OK);
      assert_true(grt_trace_frames_fold(f, n, NULL, 0) > 0); /* every real stack shows something */
    }
    round_trip(t);
    assert_int_equal(grt_trace_destroy(t), GRT_OK);
    free(path);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_frames_interned),
      cmocka_unit_test(test_stack_lookup_errors),
      cmocka_unit_test(test_frames_malformed),
      cmocka_unit_test(test_frames_negative_line),
      cmocka_unit_test(test_frames_huge),
      cmocka_unit_test(test_frames_skipped_owners),
      cmocka_unit_test(test_native_round_trip_frames),
      cmocka_unit_test(test_native_escapes),
      cmocka_unit_test(test_native_read_frames),
      cmocka_unit_test(test_native_frame_errors),
      cmocka_unit_test(test_native_stream_skips_frames),
      cmocka_unit_test(test_shared_snapshots),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
