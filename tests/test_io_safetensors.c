/* test_io_safetensors.c — the strict safetensors reader: every dtype, zero
 * size and scalar tensors, metadata, and every malformed file refused with
 * the tensor and the byte offset (gpurt/io.h). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "gpurt/io.h"
#include "safetensors_builder.h"

static grt_safetensors *open_ok(const char *path) {
  grt_safetensors *st = NULL;
  grt_io_error err;
  grt_status s = grt_safetensors_open(path, &st, &err);
  if (s) fail_msg("%s: %s", path, err.reason);
  return st;
}

/* The file is refused with this reason (a substring), tensor and offset. */
static void expect_refused(const char *header, const unsigned char *data, size_t n, const char *reason,
                           const char *tensor, long long offset) {
  char path[64];
  st_write(path, header, data, n);
  grt_safetensors *st = NULL;
  grt_io_error err;
  grt_status s = grt_safetensors_open(path, &st, &err);
  unlink(path);
  assert_int_equal(s, GRT_ERR_PARSE);
  assert_null(st);
  if (!strstr(err.reason, reason)) fail_msg("got '%s', want '%s'", err.reason, reason);
  assert_string_equal(err.tensor, tensor);
  if (offset >= 0) {
    assert_true(err.has_offset);
    assert_int_equal(err.offset, (uint64_t)offset);
  }
}

static void test_every_dtype(void **state) {
  (void)state;
  char header[4096] = "{", path[64];
  size_t off = 0, at = 1;
  for (int d = 0; d < GRT_DTYPE_COUNT; d++) {
    unsigned bits = grt_dtype_bits((grt_dtype)d);
    size_t elems = 8, bytes = elems * bits / 8; /* 8 elements fill whole bytes for 4- and 6-bit types */
    at += (size_t)snprintf(header + at, sizeof header - at, "%s\"t%d\":{\"dtype\":\"%s\",\"shape\":[2,4],"
                           "\"data_offsets\":[%zu,%zu]}", d ? "," : "", d, grt_dtype_name((grt_dtype)d), off, off + bytes);
    off += bytes;
  }
  snprintf(header + at, sizeof header - at, ",\"__metadata__\":{\"format\":\"pt\"}}");
  unsigned char *data = st_bytes(off, 1);
  st_write(path, header, data, off);
  grt_safetensors *st = open_ok(path);
  assert_int_equal(grt_safetensors_count(st), GRT_DTYPE_COUNT);
  assert_int_equal(grt_safetensors_data_size(st), off);
  assert_int_equal(grt_safetensors_data_offset(st), 8 + strlen(header));
  for (int d = 0; d < GRT_DTYPE_COUNT; d++) {
    const grt_st_tensor *t = grt_safetensors_tensor(st, (size_t)d);
    assert_int_equal(t->dtype, d); /* sorted by offset, which follows the dtype order here */
    assert_int_equal(t->ndim, 2);
    assert_int_equal(t->file_offset, 8 + strlen(header) + t->begin);
  }
  const char *k, *v;
  assert_int_equal(grt_safetensors_metadata_count(st), 1);
  assert_int_equal(grt_safetensors_metadata(st, 0, &k, &v), GRT_OK);
  assert_string_equal(k, "format");
  assert_string_equal(v, "pt");
  assert_int_equal(grt_safetensors_metadata(st, 1, &k, &v), GRT_ERR_INVALID_ARG);
  grt_safetensors_free(st);
  unlink(path);
  free(data);
}

static void test_zero_size_scalar_and_order(void **state) {
  (void)state;
  char path[64];
  /* listed out of order: the reader sorts by offset, as safetensors does */
  const char *h = "{\"b\":{\"dtype\":\"F64\",\"shape\":[],\"data_offsets\":[4,12]},"
                  "\"z\":{\"dtype\":\"F32\",\"shape\":[0,3],\"data_offsets\":[12,12]},"
                  "\"a\":{\"dtype\":\"I32\",\"shape\":[1],\"data_offsets\":[0,4]}}  ";
  unsigned char data[12] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};
  st_write(path, h, data, 12);
  grt_safetensors *st = open_ok(path);
  assert_int_equal(grt_safetensors_count(st), 3);
  assert_string_equal(grt_safetensors_tensor(st, 0)->name, "a");
  assert_string_equal(grt_safetensors_tensor(st, 1)->name, "b");
  assert_int_equal(grt_safetensors_tensor(st, 1)->ndim, 0); /* a scalar: one element */
  assert_string_equal(grt_safetensors_tensor(st, 2)->name, "z");
  assert_int_equal(grt_safetensors_tensor(st, 2)->end - grt_safetensors_tensor(st, 2)->begin, 0);
  grt_safetensors_free(st);
  unlink(path);
  /* no tensors at all, only padding */
  st_write(path, "{}      ", NULL, 0);
  st = open_ok(path);
  assert_int_equal(grt_safetensors_count(st), 0);
  grt_safetensors_free(st);
  unlink(path);
}

static const unsigned char D[64];

static void test_offsets_must_tile(void **state) {
  (void)state;
  /* header "{...}" is 8 + N bytes in: offsets in messages are the file's */
  const char *gap = "{\"a\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[0,4]},"
                    "\"b\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[6,10]}}";
  expect_refused(gap, D, 10, "a gap of unowned bytes", "b", (long long)(8 + strlen(gap) + 6));
  const char *overlap = "{\"a\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[0,4]},"
                        "\"b\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[2,6]}}";
  expect_refused(overlap, D, 6, "the tensors overlap", "b", (long long)(8 + strlen(overlap) + 2));
  const char *late = "{\"a\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[2,6]}}";
  expect_refused(late, D, 6, "the buffer's start", "a", (long long)(8 + strlen(late) + 2));
  const char *size = "{\"a\":{\"dtype\":\"F32\",\"shape\":[2,2],\"data_offsets\":[0,12]}}";
  expect_refused(size, D, 12, "hold 12 bytes, shape x F32 needs 16", "a", (long long)(8 + strlen(size)));
  const char *back = "{\"a\":{\"dtype\":\"U8\",\"shape\":[0],\"data_offsets\":[4,0]}}";
  expect_refused(back, D, 4, "end before they begin", "a", -1);
  const char *part = "{\"a\":{\"dtype\":\"F4\",\"shape\":[3],\"data_offsets\":[0,1]}}";
  expect_refused(part, D, 1, "do not fill whole bytes", "a", -1);
  const char *big = "{\"a\":{\"dtype\":\"F64\",\"shape\":[4294967296,4294967296],\"data_offsets\":[0,8]}}";
  expect_refused(big, D, 8, "overflows 64 bits", "a", -1);
}

static void test_file_length(void **state) {
  (void)state;
  const char *h = "{\"a\":{\"dtype\":\"U8\",\"shape\":[8],\"data_offsets\":[0,8]}}";
  /* the file ends early: 5 of the 8 bytes */
  expect_refused(h, D, 5, "the file ends 3 bytes early", "a", (long long)(8 + strlen(h) + 8));
  /* an unaligned tail of bytes nobody owns */
  expect_refused(h, D, 11, "trailing bytes no tensor owns", "a", (long long)(8 + strlen(h) + 8));
  /* a header that lies about its length: longer than the file, above the limit, shorter than the JSON */
  char path[64];
  st_write_raw(path, 1000, h, strlen(h), D, 8);
  grt_safetensors *st = NULL;
  grt_io_error err;
  assert_int_equal(grt_safetensors_open(path, &st, &err), GRT_ERR_PARSE);
  assert_non_null(strstr(err.reason, "runs past the end"));
  unlink(path);
  st_write_raw(path, 100000001, h, strlen(h), D, 8);
  assert_int_equal(grt_safetensors_open(path, &st, &err), GRT_ERR_PARSE);
  assert_non_null(strstr(err.reason, "above the format's limit of 100000000"));
  unlink(path);
  st_write_raw(path, strlen(h) - 2, h, strlen(h), D, 8);
  assert_int_equal(grt_safetensors_open(path, &st, &err), GRT_ERR_PARSE);
  assert_non_null(strstr(err.reason, "not JSON"));
  assert_true(err.has_offset);
  unlink(path);
  /* too short for the length itself */
  snprintf(path, sizeof path, "/tmp/grt_st_XXXXXX");
  int fd = mkstemp(path);
  assert_int_equal(write(fd, "abc", 3), 3);
  close(fd);
  assert_int_equal(grt_safetensors_open(path, &st, &err), GRT_ERR_PARSE);
  assert_non_null(strstr(err.reason, "3 bytes: too short"));
  unlink(path);
  assert_int_equal(grt_safetensors_open("/nonexistent.safetensors", &st, &err), GRT_ERR_IO);
}

static void test_header_text(void **state) {
  (void)state;
  const char latin1[] = "{\"caf\xe9\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]}}";
  expect_refused(latin1, D, 1, "not UTF-8", "", 8 + 5);
  const char overlong[] = "{\"\xc0\xaf\":{}}";
  expect_refused(overlong, D, 0, "not UTF-8", "", 8 + 2);
  expect_refused("[1,2]   ", D, 0, "does not begin with '{'", "", 8);
  expect_refused("{\"a\":1,}", D, 0, "not JSON", "", -1);
  const char *dup = "{\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]},"
                    "\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[1,2]}}";
  expect_refused(dup, D, 2, "duplicate", "", -1);
  expect_refused("{\"a\":{\"dtype\":\"Q8\",\"shape\":[1],\"data_offsets\":[0,1]}}", D, 1, "unknown dtype 'Q8'", "a", -1);
  expect_refused("{\"a\":{\"shape\":[1],\"data_offsets\":[0,1]}}", D, 1, "'dtype' is missing", "a", -1);
  expect_refused("{\"a\":{\"dtype\":\"U8\",\"shape\":[-1],\"data_offsets\":[0,1]}}", D, 1, "shape[0]", "a", -1);
  expect_refused("{\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0]}}", D, 1, "'data_offsets' is not two", "a", -1);
  expect_refused("{\"a\":{\"dtype\":\"U8\",\"shape\":\"1\",\"data_offsets\":[0,1]}}", D, 1, "'shape' is missing", "a", -1);
  expect_refused("{\"a\":[]}", D, 0, "not an object", "a", -1);
  expect_refused("{\"__metadata__\":{\"k\":1}}", D, 0, "the value of 'k' is not a string", "__metadata__", -1);
}

static void test_error_format(void **state) {
  (void)state;
  grt_io_error e = {.tensor = "w", .offset = 77, .has_offset = true, .reason = "why"};
  char buf[128];
  assert_int_equal(grt_io_error_format(&e, "f.safetensors", buf, sizeof buf), GRT_OK);
  assert_string_equal(buf, "f.safetensors: byte 77: tensor 'w': why");
  assert_int_equal(grt_io_error_format(&e, "f", buf, 4), GRT_ERR_SIZE);
  grt_dtype d;
  assert_int_equal(grt_dtype_parse("BF16", &d), GRT_OK);
  assert_int_equal(d, GRT_DTYPE_BF16);
  assert_int_equal(grt_dtype_parse("bf16", &d), GRT_ERR_NOT_FOUND);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_every_dtype),      cmocka_unit_test(test_zero_size_scalar_and_order),
      cmocka_unit_test(test_offsets_must_tile), cmocka_unit_test(test_file_length),
      cmocka_unit_test(test_header_text),       cmocka_unit_test(test_error_format),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
