/* test_trace_pickle.c — the PyTorch snapshot reader on pickles built byte by byte here:
 * schema handling, address matching, block addresses, settings, refused opcodes, hostile input. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "pickle_builder.h"
#include "trace_test_util.h"

static void event(pk *p, const char *action, uint64_t addr, uint64_t size) {
  op(p, '}'), op(p, '(');
  kv_str(p, "action", action);
  kv_num(p, "addr", addr);
  kv_num(p, "size", size);
  kv_num(p, "stream", 0);
  kv_num(p, "time_us", 1000 + p->n);
  str(p, "frames"), op(p, ']'); /* ignored */
  op(p, 'u');
}

/* A snapshot: one segment (two blocks, no block addresses), a trace with a pre-existing block freed. */
static void build_snapshot(pk *p, bool settings_as_int) {
  p->n = 0;
  op(p, 0x80), op(p, 4);
  op(p, '}'), op(p, 0x94), op(p, '(');
  str(p, "segments"), op(p, ']'), op(p, '(');
  {
    op(p, '}'), op(p, '(');
    kv_num(p, "device", 0);
    kv_num(p, "address", 0x10000000);
    kv_num(p, "total_size", 2 << 20);
    kv_num(p, "stream", 0);
    kv_str(p, "segment_type", "small");
    str(p, "is_expandable"), op(p, 0x89);
    str(p, "blocks"), op(p, ']'), op(p, '(');
    op(p, '}'), op(p, '('), kv_num(p, "size", 512), kv_num(p, "requested_size", 100), kv_str(p, "state", "active_allocated"), op(p, 'u');
    op(p, '}'), op(p, '('), kv_num(p, "size", (2 << 20) - 512), kv_str(p, "state", "inactive"), op(p, 'u');
    op(p, 'e');
    op(p, 'u');
    /* a segment of device 1: skipped when loading device 0 */
    op(p, '}'), op(p, '('), kv_num(p, "device", 1), kv_num(p, "address", 0x20000000), kv_num(p, "total_size", 20 << 20), op(p, 'u');
  }
  op(p, 'e');
  str(p, "device_traces"), op(p, ']'), op(p, '(');
  op(p, ']'), op(p, '(');
  event(p, "free_requested", 0x10000200, 64); /* a block live before recording started */
  event(p, "free_completed", 0x10000200, 64);
  event(p, "alloc", 0x10000000, 100);
  event(p, "alloc", 0x10000200, 200);
  event(p, "free_requested", 0x10000200, 200);
  event(p, "free_completed", 0x10000200, 200);
  event(p, "alloc", 0x10000200, 300);
  event(p, "segment_alloc", 0x30000000, 2 << 20);
  op(p, '}'), op(p, '('), kv_str(p, "action", "user_defined"), op(p, 'u');
  op(p, '}'), op(p, '('), kv_str(p, "action", "oom"), kv_num(p, "addr", 4096), kv_num(p, "size", 1 << 30), op(p, 'u');
  op(p, 'e');
  op(p, ']'); /* device 1: empty */
  op(p, 'e');
  str(p, "allocator_settings"), op(p, '}'), op(p, '(');
  str(p, "expandable_segments"), op(p, 0x88);
  str(p, "max_split_size"), op(p, 'J'), op(p, 0), op(p, 0), op(p, 0x40), op(p, 0x01); /* 20 MiB + 0 */
  str(p, "garbage_collection_threshold"), op(p, 'G');
  { const unsigned char d[8] = {0x3f, 0xe8, 0, 0, 0, 0, 0, 0}; for (int i = 0; i < 8; i++) op(p, d[i]); } /* 0.75 */
  str(p, "roundup_power2_divisions");
  if (settings_as_int) {
    small(p, 4);
  } else {
    op(p, '}'), op(p, '('), str(p, "1"), small(p, 2), str(p, "256"), small(p, 8), op(p, 'u');
  }
  op(p, 'u');
  op(p, 'u');
  op(p, '.');
}

static grt_trace *load_pk(const pk *p, int device, grt_status *st, grt_trace_error *err) {
  grt_trace_load_config cfg;
  grt_trace *t = NULL;
  grt_trace_load_config_default(&cfg);
  cfg.device = device;
  *st = grt_trace_load_buffer(p->b, p->n, "snap.pickle", &cfg, &t, err);
  return t;
}

static void test_pickle_snapshot(void **state) {
  (void)state;
  pk *p = malloc(sizeof *p);
  build_snapshot(p, false);
  grt_trace_error err;
  grt_status st;
  grt_trace *t = load_pk(p, 0, &st, &err);
  if (st) fail_msg("%s", err.reason);
  grt_trace_info in;
  assert_int_equal(grt_trace_get_info(t, &in), GRT_OK);
  assert_int_equal(in.format, GRT_TRACE_FORMAT_PYTORCH);
  assert_int_equal(in.n_devices, 2);
  assert_int_equal(in.n_events, 9); /* user_defined skipped */
  assert_int_equal(in.count[GRT_TRACE_ALLOC], 3);
  assert_int_equal(in.count[GRT_TRACE_FREE_REQUESTED], 2);
  assert_int_equal(in.count[GRT_TRACE_FREE_COMPLETED], 2);
  assert_int_equal(in.count[GRT_TRACE_SEGMENT_ALLOC], 1);
  assert_int_equal(in.count[GRT_TRACE_OOM], 1);
  assert_int_equal(in.n_ids, 4);
  const grt_trace_event *e = in.events;
  assert_int_equal(e[0].id, 0);
  assert_true(e[0].flags & GRT_TRACE_F_UNMATCHED);
  assert_true(e[1].flags & GRT_TRACE_F_UNMATCHED);
  assert_int_equal(e[1].id, 0);
  assert_int_equal(e[2].id, 1);
  assert_int_equal(e[3].id, 2);
  assert_int_equal(e[5].id, 2);
  assert_false(e[5].flags & GRT_TRACE_F_UNMATCHED);
  assert_int_equal(e[6].id, 3); /* same address after free_completed: a new allocation */
  assert_int_equal(e[6].addr, 0x10000200);
  assert_true(e[6].flags & GRT_TRACE_F_TIME);
  assert_int_equal(e[7].id, GRT_TRACE_NO_ID);
  assert_int_equal(e[8].kind, GRT_TRACE_OOM);
  assert_int_equal(e[8].addr, 4096);
  assert_int_equal(in.n_segments, 1);
  assert_int_equal(in.segments[0].n_blocks, 2);
  assert_int_equal(in.segments[0].blocks[0].addr, 0x10000000);
  assert_int_equal(in.segments[0].blocks[1].addr, 0x10000200); /* computed: segment + 512 */
  assert_int_equal(in.segments[0].blocks[0].requested_size, 100);
  assert_false(in.segments[0].is_large);
  assert_true(in.settings.present);
  assert_true(in.settings.expandable_segments);
  assert_int_equal(in.settings.max_split_size, 20 << 20);
  assert_true(in.settings.garbage_collection_threshold == 0.75);
  assert_int_equal(in.settings.roundup_power2_divisions[0], 2);
  assert_int_equal(in.settings.roundup_power2_divisions[8], 8);
  assert_int_equal(in.settings.roundup_power2_divisions[1], 0);
  assert_int_equal(grt_trace_destroy(t), GRT_OK);

  /* device 1: empty trace, the 20 MiB segment (large by size: no segment_type) */
  t = load_pk(p, 1, &st, &err);
  assert_int_equal(st, GRT_OK);
  assert_int_equal(grt_trace_get_info(t, &in), GRT_OK);
  assert_int_equal(in.n_events, 0);
  assert_int_equal(in.device, 1);
  assert_int_equal(in.n_segments, 1);
  assert_true(in.segments[0].is_large);
  assert_int_equal(grt_trace_destroy(t), GRT_OK);
  t = load_pk(p, 2, &st, &err);
  assert_null(t);
  assert_int_equal(st, GRT_ERR_INVALID_ARG);
  assert_non_null(strstr(err.reason, "device 2 out of range"));

  build_snapshot(p, true);
  t = load_pk(p, 0, &st, &err);
  assert_int_equal(st, GRT_OK);
  assert_int_equal(grt_trace_get_info(t, &in), GRT_OK);
  for (int i = 0; i < GRT_TRACE_RP2_INTERVALS; i++) assert_int_equal(in.settings.roundup_power2_divisions[i], 4);
  assert_int_equal(grt_trace_destroy(t), GRT_OK);
  free(p);
}

static void expect_pk_error(const unsigned char *b, size_t n, const char *needle) {
  grt_trace_error err;
  grt_trace *t = NULL;
  grt_status st = grt_trace_load_buffer(b, n, "x.pickle", NULL, &t, &err);
  assert_null(t);
  assert_int_equal(st, GRT_ERR_PARSE);
  if (!strstr(err.reason, needle)) fail_msg("got '%s', want '%s'", err.reason, needle);
}

static void test_pickle_refuses_globals(void **state) {
  (void)state;
  /* pickle.dumps(os.system) style: GLOBAL 'posix system' */
  const unsigned char g[] = "\x80\x02" "cposix\nsystem\n" "q\x00" ".";
  expect_pk_error(g, sizeof g - 1, "GLOBAL refused");
  grt_trace_error err;
  grt_trace *t;
  assert_int_equal(grt_trace_load_buffer(g, sizeof g - 1, "x.pickle", NULL, &t, &err), GRT_ERR_PARSE);
  assert_true(err.has_offset);
  assert_int_equal(err.offset, 2);
  const unsigned char sg[] = "\x80\x04\x8c\x02os\x8c\x06system\x93" ".";
  expect_pk_error(sg, sizeof sg - 1, "STACK_GLOBAL refused");
  const unsigned char r[] = "\x80\x04)\x8c\x01x\x85R.";
  expect_pk_error(r, sizeof r - 1, "REDUCE refused");
  const unsigned char b[] = "\x80\x04}}b.";
  expect_pk_error(b, sizeof b - 1, "BUILD refused");
  const unsigned char nw[] = "\x80\x04})\x81.";
  expect_pk_error(nw, sizeof nw - 1, "NEWOBJ refused");
}

static void test_pickle_hostile(void **state) {
  (void)state;
  const unsigned char trunc[] = "\x80\x04\x8c\x10" "ab";
  expect_pk_error(trunc, sizeof trunc - 1, "truncated");
  const unsigned char nostop[] = "\x80\x04}";
  expect_pk_error(nostop, sizeof nostop - 1, "no STOP");
  const unsigned char huge[] = "\x80\x04\x8d\xff\xff\xff\xff\xff\xff\xff\xff.";
  expect_pk_error(huge, sizeof huge - 1, "truncated");
  const unsigned char memo[] = "\x80\x04j\xff\xff\xff\x7f.";
  expect_pk_error(memo, sizeof memo - 1, "memo key");
  const unsigned char nomark[] = "\x80\x04}u.";
  expect_pk_error(nomark, sizeof nomark - 1, "no MARK");
  const unsigned char under[] = "\x80\x04K\x01s.";
  expect_pk_error(under, sizeof under - 1, "underflow");
  const unsigned char notdict[] = "\x80\x04]K\x01K\x02s.";
  expect_pk_error(notdict, sizeof notdict - 1, "not a dict");
  const unsigned char proto[] = "\x80\x09}.";
  expect_pk_error(proto, sizeof proto - 1, "protocol");
  const unsigned char frame[] = "\x80\x04\x95\x00\x00\x00\x00\x00\x00\x00\x80}.";
  expect_pk_error(frame, sizeof frame - 1, "FRAME declares 9223372036854775808 bytes where 2 remain");
  const unsigned char big[] = "\x80\x04\x8a\x0a\x01\x02\x03\x04\x05\x06\x07\x08\x09\x0a.";
  expect_pk_error(big, sizeof big - 1, "top level is neither a dict nor a list"); /* a wide int is a value */
  const unsigned char text[] = "\x80\x04I1\n.";
  expect_pk_error(text, sizeof text - 1, "unsupported pickle opcode 0x49");
  /* a self-containing list (cycle) is harmless: the converter never walks generically */
  const unsigned char cyc[] = "\x80\x04}\x94(\x8c\x08segments]\x94h\x01\x61u.";
  expect_pk_error(cyc, sizeof cyc - 1, "not a dict");
  /* schema errors name the element */
  const unsigned char top[] = "\x80\x04K\x05.";
  expect_pk_error(top, sizeof top - 1, "neither a dict nor a list");
  pk *p = malloc(sizeof *p);
  p->n = 0;
  op(p, 0x80), op(p, 4), op(p, '}'), op(p, '(');
  str(p, "device_traces"), op(p, ']'), op(p, '('), op(p, ']'), op(p, '(');
  event(p, "alloc", 0x100, 5);
  op(p, '}'), op(p, '('), kv_str(p, "action", "alloc"), kv_num(p, "addr", 0x200), kv_str(p, "size", "big"), op(p, 'u');
  op(p, 'e'), op(p, 'e'), op(p, 'u'), op(p, '.');
  expect_pk_error(p->b, p->n, "device_traces[0][1]: 'size' is not a non-negative integer");
  p->n = 0;
  op(p, 0x80), op(p, 4), op(p, '}'), op(p, '(');
  str(p, "device_traces"), op(p, ']'), op(p, '('), op(p, ']'), op(p, '(');
  event(p, "alloc", 0x100, 5);
  event(p, "alloc", 0x100, 5);
  op(p, 'e'), op(p, 'e'), op(p, 'u'), op(p, '.');
  expect_pk_error(p->b, p->n, "still allocated");
  p->n = 0;
  op(p, 0x80), op(p, 4), op(p, '}'), op(p, '(');
  str(p, "device_traces"), op(p, ']'), op(p, '('), op(p, ']'), op(p, '(');
  event(p, "realloc", 0x100, 5);
  op(p, 'e'), op(p, 'e'), op(p, 'u'), op(p, '.');
  expect_pk_error(p->b, p->n, "unknown action 'realloc'");
  free(p);
}

/* An event dict: action, addr, size, stream. */
static void ev(pk *p, const char *action, uint64_t addr, uint64_t size, uint64_t stream) {
  op(p, '}'), op(p, '('), kv_str(p, "action", action), kv_num(p, "addr", addr), kv_num(p, "size", size);
  kv_num(p, "stream", stream), op(p, 'u');
}

/* Events are taken as the pickle is parsed: the first device's straight into
 * the trace, another's kept until the parse says which is wanted; a shared
 * (memo-fetched or DUPed) event dict is read again intact; a malformed event
 * fails only the device it belongs to. */
static void test_pickle_taken_events(void **state) {
  (void)state;
  pk *p = malloc(sizeof *p);
  begin(p);
  str(p, "device_traces"), op(p, ']'), op(p, '(');
  op(p, ']'), op(p, '('); /* device 0 */
  ev(p, "alloc", 0x1000, 64, 7), memo(p); /* memo 0, fetched below */
  ev(p, "free_requested", 0x1000, 64, 7), op(p, '2'); /* the same dict twice */
  ev(p, "free_completed", 0x1000, 64, 7);
  op(p, '}'), op(p, '('), kv_str(p, "action", "alloc"), kv_num(p, "addr", 0x5000), kv_str(p, "size", "big"), op(p, 'u');
  op(p, 'e');
  op(p, ']'), op(p, '('); /* device 1 */
  ev(p, "alloc", 0x2000, 128, 3);
  memo_get(p, 0); /* device 0's first event, again */
  op(p, 'e');
  op(p, 'e');
  end(p);
  grt_trace_error err;
  grt_status st;
  grt_trace *t = load_pk(p, 1, &st, &err);
  if (st) fail_msg("%s", err.reason);
  grt_trace_info in;
  assert_int_equal(grt_trace_get_info(t, &in), GRT_OK);
  assert_int_equal(in.n_events, 2);
  assert_int_equal(in.events[0].addr, 0x2000);
  assert_int_equal(in.events[0].size, 128);
  assert_int_equal(in.events[1].addr, 0x1000);
  assert_int_equal(in.events[1].size, 64);
  assert_int_equal(in.n_streams, 2); /* device 1's streams only: 3, then 7 */
  assert_int_equal(in.streams[in.events[0].stream], 3);
  assert_int_equal(in.streams[in.events[1].stream], 7);
  assert_int_equal(in.n_ids, 2);
  assert_int_equal(grt_trace_destroy(t), GRT_OK);
  /* device 0: its four good events were fed, then its fifth fails */
  assert_null(load_pk(p, 0, &st, &err));
  assert_int_equal(st, GRT_ERR_PARSE);
  assert_string_equal(err.reason, "device_traces[0][4]: 'size' is not a non-negative integer");
  free(p);
}

/* Found by fuzz_pytorch: metadata must stay writable as native (device < n_devices). */
static void test_pickle_device_count(void **state) {
  (void)state;
  const unsigned char list_root[] = "\x80\x04].";
  const unsigned char no_traces[] = "\x80\x04}\x8c\x0d" "device_traces]s.";
  grt_trace_load_config cfg;
  grt_trace_load_config_default(&cfg);
  grt_trace *t;
  grt_trace_error err;
  grt_trace_info in;
  cfg.device = 1;
  assert_int_equal(grt_trace_load_buffer(list_root, sizeof list_root - 1, NULL, &cfg, &t, &err), GRT_OK);
  assert_int_equal(grt_trace_get_info(t, &in), GRT_OK);
  assert_int_equal(in.device, 1);
  assert_int_equal(in.n_devices, 2);
  assert_int_equal(grt_trace_destroy(t), GRT_OK);
  cfg.device = 0;
  assert_int_equal(grt_trace_load_buffer(no_traces, sizeof no_traces - 1, NULL, &cfg, &t, &err), GRT_OK);
  assert_int_equal(grt_trace_get_info(t, &in), GRT_OK);
  assert_int_equal(in.n_devices, 1);
  assert_int_equal(grt_trace_destroy(t), GRT_OK);
}

/* ---- the snapshot schema: each malformed element is named by its path; well-formed variants ---- */

static void traces_open(pk *p) { str(p, "device_traces"), op(p, ']'), op(p, '('), op(p, ']'), op(p, '('); }
static void traces_close(pk *p) { op(p, 'e'), op(p, 'e'); }
static void neg(pk *p, unsigned v) { op(p, 0x8a), op(p, 1), op(p, (unsigned char)(256 - v)); } /* -v, v <= 128 */
static void flt(pk *p, const unsigned char be[8]) {
  op(p, 'G');
  for (int i = 0; i < 8; i++) op(p, be[i]);
}

/* A snapshot of one event whose dict body `body` writes. */
typedef void (*body_fn)(pk *p);
static void one_event(pk *p, body_fn body) {
  begin(p), traces_open(p);
  dict_open(p), body(p), dict_close(p);
  traces_close(p), end(p);
}
/* A snapshot of one segment whose dict body `body` writes. */
static void one_segment(pk *p, body_fn body) {
  begin(p), str(p, "segments"), op(p, ']'), op(p, '(');
  dict_open(p), body(p), dict_close(p);
  op(p, 'e'), end(p);
}
/* A snapshot with allocator_settings written by `body`. */
static void settings(pk *p, body_fn body) {
  begin(p), str(p, "allocator_settings"), dict_open(p), body(p), dict_close(p), end(p);
}

static void ev_action_int(pk *p) { str(p, "action"), small(p, 3); }
static void ev_addr_none(pk *p) { kv_str(p, "action", "alloc"), str(p, "addr"), op(p, 'N'), kv_num(p, "size", 5); }
static void ev_size_neg(pk *p) { kv_str(p, "action", "alloc"), kv_num(p, "addr", 0x100), str(p, "size"), neg(p, 1); }
static void ev_size_str(pk *p) { kv_str(p, "action", "free_completed"), kv_num(p, "addr", 0x100), kv_str(p, "size", "1"); }
static void ev_size_wide(pk *p) { /* 2^72: a LONG1 of 10 bytes, as Python pickles it */
  static const unsigned char wide[] = {0x8a, 10, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
  kv_str(p, "action", "alloc"), kv_num(p, "addr", 0x100), str(p, "size");
  for (size_t i = 0; i < sizeof wide; i++) op(p, wide[i]);
}
static void ev_size_missing(pk *p) { kv_str(p, "action", "alloc"), kv_num(p, "addr", 0x100); }
static void ev_stream_float(pk *p) {
  static const unsigned char one[8] = {0x3f, 0xf0, 0, 0, 0, 0, 0, 0};
  kv_str(p, "action", "alloc"), kv_num(p, "addr", 0x100), kv_num(p, "size", 1), str(p, "stream"), flt(p, one);
}
static void ev_time_str(pk *p) {
  kv_str(p, "action", "alloc"), kv_num(p, "addr", 0x100), kv_num(p, "size", 1), kv_str(p, "time_us", "now");
}
static void ev_time_big(pk *p) {
  kv_str(p, "action", "alloc"), kv_num(p, "addr", 0x100), kv_num(p, "size", 1), kv_num(p, "time_us", UINT64_C(1) << 63);
}
static void ev_addr_max(pk *p) { kv_str(p, "action", "alloc"), kv_num(p, "addr", UINT64_MAX), kv_num(p, "size", 1); }
static void ev_segment_no_addr(pk *p) { kv_str(p, "action", "segment_unmap"), kv_num(p, "size", 4096); }

static void seg_not_int_device(pk *p) { kv_str(p, "device", "0"); }
static void seg_no_address(pk *p) { kv_num(p, "total_size", 512); }
static void seg_no_total(pk *p) { kv_num(p, "address", 0x1000); }
static void seg_bad_stream(pk *p) { kv_num(p, "address", 0x1000), kv_num(p, "total_size", 512), str(p, "stream"), neg(p, 2); }
static void seg_base(pk *p) { kv_num(p, "address", 0x1000), kv_num(p, "total_size", 1024); }
static void seg_bad_type(pk *p) { seg_base(p), kv_str(p, "segment_type", "medium"); }
static void seg_bad_blocks(pk *p) { seg_base(p), str(p, "blocks"), small(p, 1); }
static void seg_pool_str(pk *p) { seg_base(p), kv_str(p, "segment_pool_id", "0"); }
static void seg_pool_neg(pk *p) { seg_base(p), str(p, "segment_pool_id"), small(p, 1), neg(p, 1), op(p, 0x86); }
static void seg_pool_one(pk *p) { seg_base(p), str(p, "segment_pool_id"), small(p, 1), op(p, 0x85); }
static void seg_pool_ok(pk *p) { seg_base(p), str(p, "segment_pool_id"), small(p, 3), num(p, 7), op(p, 0x86); }
static void seg_block_not_dict(pk *p) { seg_base(p), str(p, "blocks"), op(p, ']'), small(p, 1), op(p, 'a'); }
static void block(pk *p, body_fn body) { op(p, '}'), op(p, '('), body(p), op(p, 'u'), op(p, 'a'); }
static void blk_no_size(pk *p) { kv_str(p, "state", "inactive"); }
static void blk_bad_requested(pk *p) { kv_num(p, "size", 512), kv_str(p, "requested_size", "x"); }
static void blk_bad_address(pk *p) { kv_num(p, "size", 512), str(p, "address"), neg(p, 5); }
static void blk_no_state(pk *p) { kv_num(p, "size", 512); }
static void blk_bad_state(pk *p) { kv_num(p, "size", 512), kv_str(p, "state", "active"); }
/* A snapshot of one segment holding one block whose dict body `body` writes. */
static void one_block(pk *p, body_fn body) {
  begin(p), str(p, "segments"), op(p, ']'), op(p, '(');
  dict_open(p), seg_base(p), str(p, "blocks"), op(p, ']'), block(p, body), dict_close(p);
  op(p, 'e'), end(p);
}

static void set_max_split_str(pk *p) { kv_str(p, "max_split_size", "20MB"); }
static void set_gc_str(pk *p) { kv_str(p, "garbage_collection_threshold", "0.5"); }
static void set_gc_inf(pk *p) {
  static const unsigned char inf[8] = {0x7f, 0xf0, 0, 0, 0, 0, 0, 0};
  str(p, "garbage_collection_threshold"), flt(p, inf);
}
static void set_gc_big(pk *p) { kv_num(p, "garbage_collection_threshold", UINT64_C(1) << 63); }
static void set_rp2_str(pk *p) { kv_str(p, "roundup_power2_divisions", "4"); }
static void set_rp2_huge(pk *p) { kv_num(p, "roundup_power2_divisions", UINT64_C(1) << 32); }
static void rp2_dict(pk *p, const char *key, int int_key, uint64_t v, int str_value) {
  str(p, "roundup_power2_divisions"), dict_open(p);
  if (int_key) small(p, 4); else str(p, key);
  if (str_value) str(p, "2"); else num(p, v);
  dict_close(p);
}
static void set_rp2_key3(pk *p) { rp2_dict(p, "3", 0, 2, 0); }
static void set_rp2_key0(pk *p) { rp2_dict(p, "0", 0, 2, 0); }
static void set_rp2_keyx(pk *p) { rp2_dict(p, "x", 0, 2, 0); }
static void set_rp2_intkey(pk *p) { rp2_dict(p, NULL, 1, 2, 0); }
static void set_rp2_strval(pk *p) { rp2_dict(p, "4", 0, 0, 1); }
static void set_rp2_bigval(pk *p) { rp2_dict(p, "4", 0, UINT64_C(1) << 32, 0); }

static void expect_schema_error(pk *p, const char *needle) {
  grt_trace_error err;
  grt_status st;
  grt_trace *t = load_pk(p, 0, &st, &err);
  assert_null(t);
  assert_int_equal(st, GRT_ERR_PARSE);
  assert_false(err.has_offset); /* a schema error names the element, not a byte */
  assert_int_equal(err.line, 0);
  assert_string_equal(err.file, "snap.pickle");
  if (strcmp(err.reason, needle)) fail_msg("got '%s', want '%s'", err.reason, needle);
}

static void test_pickle_schema_errors(void **state) {
  (void)state;
  pk *p = malloc(sizeof *p);
  begin(p), traces_open(p), small(p, 5), traces_close(p), end(p);
  expect_schema_error(p, "device_traces[0][0]: not a dict");
  one_event(p, ev_action_int);
  expect_schema_error(p, "device_traces[0][0]: 'action' is missing or not a string");
  one_event(p, ev_addr_none);
  expect_schema_error(p, "device_traces[0][0]: 'addr' is missing");
  one_event(p, ev_segment_no_addr);
  expect_schema_error(p, "device_traces[0][0]: 'addr' is missing");
  one_event(p, ev_size_neg);
  expect_schema_error(p, "device_traces[0][0]: 'size' is not a non-negative integer");
  one_event(p, ev_size_str);
  expect_schema_error(p, "device_traces[0][0]: 'size' is not a non-negative integer");
  one_event(p, ev_size_wide);
  expect_schema_error(p, "device_traces[0][0]: 'size' is not a non-negative integer (wider than 64 bits)");
  one_event(p, ev_size_missing);
  expect_schema_error(p, "device_traces[0][0]: 'size' is missing");
  one_event(p, ev_stream_float);
  expect_schema_error(p, "device_traces[0][0]: 'stream' is not a non-negative integer");
  one_event(p, ev_time_str);
  expect_schema_error(p, "device_traces[0][0]: 'time_us' is not an integer");
  one_event(p, ev_time_big);
  expect_schema_error(p, "device_traces[0][0]: 'time_us' is not an integer");
  one_event(p, ev_addr_max);
  expect_schema_error(p, "device_traces[0][0]: address out of range: 0xffffffffffffffff (at most 2^64-2)");
  begin(p), str(p, "device_traces"), op(p, ']'), small(p, 1), op(p, 'a'), end(p);
  expect_schema_error(p, "device_traces[0] is not a list");
  begin(p), str(p, "device_traces"), small(p, 1), end(p);
  expect_schema_error(p, "'device_traces' is not a list");
  begin(p), str(p, "segments"), dict_open(p), dict_close(p), end(p);
  expect_schema_error(p, "'segments' is not a list");
  p->n = 0, op(p, 0x80), op(p, 4), op(p, 'N'), op(p, '.');
  expect_schema_error(p, "top level is neither a dict nor a list: not a memory snapshot");

  begin(p), str(p, "segments"), op(p, ']'), small(p, 1), op(p, 'a'), end(p);
  expect_schema_error(p, "segments[0]: not a dict");
  one_segment(p, seg_not_int_device);
  expect_schema_error(p, "segments[0]: 'device' is not a non-negative integer");
  one_segment(p, seg_no_address);
  expect_schema_error(p, "segments[0]: 'address' is missing");
  one_segment(p, seg_no_total);
  expect_schema_error(p, "segments[0]: 'total_size' is missing");
  one_segment(p, seg_bad_stream);
  expect_schema_error(p, "segments[0]: 'stream' is not a non-negative integer");
  one_segment(p, seg_bad_type);
  expect_schema_error(p, "segments[0]: 'segment_type' is not 'small' or 'large'");
  one_segment(p, seg_pool_str);
  expect_schema_error(p, "segments[0]: 'segment_pool_id' is not a pair of non-negative integers");
  one_segment(p, seg_pool_neg);
  expect_schema_error(p, "segments[0]: 'segment_pool_id' is not a pair of non-negative integers");
  one_segment(p, seg_pool_one);
  expect_schema_error(p, "segments[0]: 'segment_pool_id' is not a pair of non-negative integers");
  one_segment(p, seg_pool_ok); /* a private pool's id, as a tuple */
  {
    grt_trace_error e;
    grt_status s;
    grt_trace *t = load_pk(p, 0, &s, &e);
    assert_non_null(t);
    grt_trace_info info;
    assert_int_equal(grt_trace_get_info(t, &info), GRT_OK);
    assert_int_equal(info.n_segments, 1);
    assert_int_equal(info.segments[0].pool_id[0], 3);
    assert_int_equal(info.segments[0].pool_id[1], 7);
    assert_int_equal(grt_trace_destroy(t), GRT_OK);
  }
  one_segment(p, seg_bad_blocks);
  expect_schema_error(p, "segments[0]: 'blocks' is not a list");
  one_segment(p, seg_block_not_dict);
  expect_schema_error(p, "segment blocks[0]: not a dict");
  static const struct {
    body_fn body;
    const char *want;
  } blocks[] = {
      {blk_no_size, "segment blocks[0]: 'size' is missing"},
      {blk_bad_requested, "segment blocks[0]: 'requested_size' is not a non-negative integer"},
      {blk_bad_address, "segment blocks[0]: 'address' is not a non-negative integer"},
      {blk_no_state, "segment blocks[0]: 'state' is not inactive/active_allocated/active_pending_free"},
      {blk_bad_state, "segment blocks[0]: 'state' is not inactive/active_allocated/active_pending_free"},
  };
  for (size_t i = 0; i < sizeof blocks / sizeof blocks[0]; i++) {
    one_block(p, blocks[i].body);
    expect_schema_error(p, blocks[i].want);
  }

  begin(p), str(p, "allocator_settings"), op(p, ']'), end(p);
  expect_schema_error(p, "allocator_settings is not a dict");
  settings(p, set_max_split_str);
  expect_schema_error(p, "allocator_settings: 'max_split_size' is not an integer");
  settings(p, set_gc_str);
  expect_schema_error(p, "allocator_settings: 'garbage_collection_threshold' is not a number");
  settings(p, set_gc_inf);
  expect_schema_error(p, "allocator_settings: 'garbage_collection_threshold' is not finite");
  settings(p, set_gc_big);
  expect_schema_error(p, "allocator_settings: 'garbage_collection_threshold' is not a number");
  settings(p, set_rp2_str);
  expect_schema_error(p, "allocator_settings: 'roundup_power2_divisions' is not a dict or integer");
  settings(p, set_rp2_huge);
  expect_schema_error(p, "allocator_settings: 'roundup_power2_divisions' is not a dict or integer");
  static const body_fn bad_rp2[] = {set_rp2_key3, set_rp2_key0, set_rp2_keyx, set_rp2_intkey, set_rp2_strval,
                                    set_rp2_bigval};
  for (size_t i = 0; i < sizeof bad_rp2 / sizeof bad_rp2[0]; i++) {
    settings(p, bad_rp2[i]);
    expect_schema_error(p, "allocator_settings: bad roundup_power2_divisions entry");
  }

  /* device 1 of a snapshot whose device_traces list is empty */
  begin(p), str(p, "device_traces"), op(p, ']'), end(p);
  grt_trace_error err;
  grt_status st;
  assert_null(load_pk(p, 1, &st, &err));
  assert_int_equal(st, GRT_ERR_INVALID_ARG);
  assert_string_equal(err.reason, "device 1 out of range: the snapshot has 0 device traces");
  free(p);
}

static void set_variants(pk *p) {
  str(p, "expandable_segments"), small(p, 1); /* an int counts as a bool */
  str(p, "garbage_collection_threshold"), small(p, 1);
  str(p, "max_split_size"), neg(p, 1); /* unlimited */
  str(p, "roundup_power2_divisions"), dict_open(p);
  kv_num(p, "65536", 9); /* past the last interval: ignored */
  kv_num(p, "32768", 7);
  dict_close(p);
}
static void set_none(pk *p) { str(p, "roundup_power2_divisions"), op(p, 'N'), str(p, "expandable_segments"), str(p, "yes"); }

/* Well-formed variants: every action, missing optional fields, unusual value types, settings forms. */
static void test_pickle_schema_variants(void **state) {
  (void)state;
  pk *p = malloc(sizeof *p);
  begin(p), traces_open(p);
  static const char *const actions[] = {"segment_alloc", "segment_free", "segment_map", "segment_unmap", "snapshot"};
  static const grt_trace_kind kinds[] = {GRT_TRACE_SEGMENT_ALLOC, GRT_TRACE_SEGMENT_FREE, GRT_TRACE_SEGMENT_MAP,
                                         GRT_TRACE_SEGMENT_UNMAP, GRT_TRACE_SNAPSHOT};
  for (size_t i = 0; i < 5; i++) {
    dict_open(p), kv_str(p, "action", actions[i]), kv_num(p, "addr", 0x40000000), kv_num(p, "size", 2 << 20);
    kv_num(p, "stream", UINT64_MAX); /* the largest stream value, twice: one stream */
    dict_close(p);
  }
  dict_open(p), kv_str(p, "action", "oom"), kv_num(p, "size", 1 << 20); /* no addr: optional for an oom */
  str(p, "stream"), op(p, 0x88), str(p, "time_us"), op(p, 'N'), dict_close(p); /* stream True = 1; no time */
  dict_open(p), kv_str(p, "action", "alloc"), kv_num(p, "addr", UINT64_C(1) << 63), str(p, "size"), op(p, 0x88);
  kv_num(p, "stream", 0), str(p, "time_us"), neg(p, 3), dict_close(p); /* a big address, a negative time */
  traces_close(p);
  str(p, "segments"), op(p, ']'), op(p, '(');
  dict_open(p), kv_num(p, "address", 0x1000), kv_num(p, "total_size", 1024), kv_num(p, "stream", 7);
  kv_str(p, "segment_type", "large"), str(p, "is_expandable"), op(p, 0x88);
  str(p, "blocks"), op(p, ']'), op(p, '(');
  dict_open(p), kv_num(p, "size", 512), kv_num(p, "address", 0x1200), kv_str(p, "state", "active_pending_free"), dict_close(p);
  dict_open(p), kv_num(p, "size", 512), kv_str(p, "state", "active_allocated"), str(p, "requested_size"), op(p, 'N'), dict_close(p);
  op(p, 'e'), dict_close(p);
  dict_open(p), kv_num(p, "address", 0x2000), kv_num(p, "total_size", 2 << 20), str(p, "device"), op(p, 'N');
  str(p, "is_expandable"), small(p, 1), dict_close(p); /* no blocks; an int is not a bool here */
  op(p, 'e');
  str(p, "allocator_settings"), dict_open(p), set_variants(p), dict_close(p);
  end(p);
  grt_trace_error err;
  grt_status st;
  grt_trace *t = load_pk(p, 0, &st, &err);
  if (st) fail_msg("%s", err.reason);
  grt_trace_info in;
  assert_int_equal(grt_trace_get_info(t, &in), GRT_OK);
  assert_int_equal(in.n_events, 7);
  for (size_t i = 0; i < 5; i++) {
    assert_int_equal(in.events[i].kind, kinds[i]);
    assert_int_equal(in.events[i].addr, 0x40000000);
    assert_int_equal(in.events[i].id, GRT_TRACE_NO_ID);
    assert_int_equal(in.events[i].stream, 0);
  }
  assert_int_equal(in.n_streams, 3);
  assert_int_equal(in.streams[0], UINT64_MAX);
  assert_int_equal(in.streams[1], 1);
  assert_int_equal(in.streams[2], 0);
  assert_int_equal(in.events[5].kind, GRT_TRACE_OOM);
  assert_int_equal(in.events[5].addr, 0);
  assert_false(in.events[5].flags & GRT_TRACE_F_TIME);
  assert_int_equal(in.events[6].addr, UINT64_C(1) << 63);
  assert_int_equal(in.events[6].size, 1);
  assert_int_equal(in.events[6].time, -3);
  assert_true(in.events[6].flags & GRT_TRACE_F_TIME);
  assert_int_equal(in.n_segments, 2);
  const grt_trace_segment *s = &in.segments[0];
  assert_true(s->is_large);
  assert_true(s->is_expandable);
  assert_int_equal(s->stream, 7);
  assert_int_equal(s->n_blocks, 2);
  assert_int_equal(s->blocks[0].addr, 0x1200); /* given */
  assert_int_equal(s->blocks[0].state, GRT_TRACE_BLOCK_ACTIVE_PENDING_FREE);
  assert_int_equal(s->blocks[1].addr, 0x1400); /* computed from the block before */
  assert_int_equal(s->blocks[1].requested_size, 0);
  s = &in.segments[1];
  assert_false(s->is_large); /* exactly 2 MiB: small by size */
  assert_false(s->is_expandable);
  assert_int_equal(s->n_blocks, 0);
  assert_true(in.settings.present);
  assert_true(in.settings.expandable_segments);
  assert_true(in.settings.garbage_collection_threshold == 1.0);
  assert_int_equal(in.settings.max_split_size, -1);
  assert_int_equal(in.settings.roundup_power2_divisions[15], 7);
  assert_int_equal(in.settings.roundup_power2_divisions[0], 0);
  assert_int_equal(grt_trace_destroy(t), GRT_OK);

  settings(p, set_none); /* null divisions are absent; a string is not true */
  t = load_pk(p, 0, &st, &err);
  assert_int_equal(st, GRT_OK);
  assert_int_equal(grt_trace_get_info(t, &in), GRT_OK);
  assert_true(in.settings.present);
  assert_false(in.settings.expandable_segments);
  assert_int_equal(in.settings.roundup_power2_divisions[0], 0);
  assert_int_equal(in.n_devices, 1);
  assert_int_equal(grt_trace_destroy(t), GRT_OK);
  begin(p), str(p, "allocator_settings"), op(p, 'N'), end(p);
  t = load_pk(p, 0, &st, &err);
  assert_int_equal(st, GRT_OK);
  assert_int_equal(grt_trace_get_info(t, &in), GRT_OK);
  assert_false(in.settings.present);
  assert_int_equal(grt_trace_destroy(t), GRT_OK);
  /* the oldest format: a tuple of segments */
  p->n = 0, op(p, 0x80), op(p, 4), op(p, '(');
  dict_open(p), seg_base(p), dict_close(p);
  op(p, 't'), op(p, '.');
  t = load_pk(p, 0, &st, &err);
  assert_int_equal(st, GRT_OK);
  assert_int_equal(grt_trace_get_info(t, &in), GRT_OK);
  assert_int_equal(in.n_segments, 1);
  assert_int_equal(in.segments[0].total_size, 1024);
  assert_int_equal(in.n_events, 0);
  assert_int_equal(grt_trace_destroy(t), GRT_OK);
  free(p);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_pickle_snapshot),
      cmocka_unit_test(test_pickle_refuses_globals),
      cmocka_unit_test(test_pickle_hostile),
      cmocka_unit_test(test_pickle_device_count),
      cmocka_unit_test(test_pickle_taken_events),
      cmocka_unit_test(test_pickle_schema_errors),
      cmocka_unit_test(test_pickle_schema_variants),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
