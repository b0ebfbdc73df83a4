/* test_io_load.c — the load path: every method, per tensor and as one blob,
 * buffered and O_DIRECT, puts the file's bytes on the device; a read error
 * or a device OOM mid-load frees everything it took and names the tensor. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "gpurt/io.h"
#include "safetensors_builder.h"

typedef struct fixture {
  char path[64];
  grt_exec *exec;
  grt_allocator *alloc;
  unsigned char *data;
  size_t n;
} fixture;

/* 7 tensors of awkward sizes (a zero-size one, a scalar, a 1-byte one), data 3 bytes past a 512 multiple. */
static const struct {
  const char *name, *dtype, *shape;
  size_t bytes;
} T[] = {{"embed", "F32", "[1000,33]", 132000}, {"scalar", "F64", "[]", 8}, {"empty", "BF16", "[0,5]", 0},
         {"byte", "U8", "[1]", 1}, {"big", "F16", "[70000]", 140000}, {"small", "I32", "[33]", 132},
         {"tail", "U8", "[1090]", 1090}};
#define NT (sizeof T / sizeof T[0])

static int setup(void **state) {
  fixture *f = calloc(1, sizeof *f);
  char header[2048] = "{";
  size_t at = 1, off = 0;
  for (size_t i = 0; i < NT; i++) {
    at += (size_t)snprintf(header + at, sizeof header - at, "%s\"%s\":{\"dtype\":\"%s\",\"shape\":%s,\"data_offsets\":[%zu,%zu]}",
                           i ? "," : "", T[i].name, T[i].dtype, T[i].shape, off, off + T[i].bytes);
    off += T[i].bytes;
  }
  snprintf(header + at, sizeof header - at, "}");
  f->n = off;
  f->data = st_bytes(off, 7);
  st_write(f->path, header, f->data, off);
  grt_exec_config ec;
  grt_exec_config_default(&ec);
  ec.device_capacity = 64 * GRT_MiB;
  ec.h2d_gbps = 1e9;
  grt_device *dev;
  grt_alloc_config ac;
  grt_alloc_config_default(&ac);
  assert_int_equal(grt_exec_create(&ec, &f->exec), GRT_OK);
  assert_int_equal(grt_exec_get_device(f->exec, &dev), GRT_OK);
  assert_int_equal(grt_alloc_create("caching", dev, &ac, &f->alloc), GRT_OK);
  *state = f;
  return 0;
}

static int teardown(void **state) {
  fixture *f = *state;
  unlink(f->path);
  assert_int_equal(grt_alloc_destroy(f->alloc), GRT_OK);
  assert_int_equal(grt_exec_destroy(f->exec), GRT_OK);
  free(f->data);
  free(f);
  return 0;
}

static grt_load_config config(fixture *f, grt_load_method m) {
  grt_load_config c;
  grt_load_config_default(&c);
  c.exec = f->exec, c.alloc = f->alloc, c.method = m;
  c.chunk_bytes = 4096; /* many chunks, chunks spanning tensors */
  c.buffers = 3;
  return c;
}

static uint64_t allocated(fixture *f) {
  grt_alloc_stats s;
  assert_int_equal(grt_alloc_get_stats(f->alloc, &s), GRT_OK);
  return s.allocated_bytes[0].current;
}

/* Loads with c and checks every tensor's device bytes against the file's own bytes. */
static void load_and_check(fixture *f, const grt_load_config *c) {
  grt_loaded *l = NULL;
  grt_io_error err;
  grt_status s = grt_load_safetensors(f->path, c, &l, &err);
  if (s) fail_msg("%s: %s", grt_load_method_name(c->method), err.reason);
  grt_device *dev;
  assert_int_equal(grt_exec_get_device(f->exec, &dev), GRT_OK);
  const grt_safetensors *st = grt_loaded_header(l);
  assert_int_equal(grt_safetensors_count(st), NT);
  size_t off = 0;
  for (size_t i = 0; i < NT; i++) {
    const grt_st_tensor *t = grt_safetensors_tensor(st, i);
    assert_string_equal(t->name, T[i].name);
    uint64_t want = grt_io_checksum(f->data + off, T[i].bytes, 0), dev_sum, file_sum;
    assert_int_equal(grt_loaded_device_checksum(l, i, &dev_sum), GRT_OK);
    assert_int_equal(grt_io_file_checksum(f->path, t->file_offset, T[i].bytes, &file_sum), GRT_OK);
    assert_int_equal(dev_sum, want);
    assert_int_equal(file_sum, want);
    if (T[i].bytes) { /* byte for byte, not only the checksum */
      grt_devptr p;
      void *host;
      assert_int_equal(grt_loaded_tensor(l, i, &p), GRT_OK);
      assert_int_equal(grt_device_host_ptr(dev, p, T[i].bytes, &host), GRT_OK);
      assert_memory_equal(host, f->data + off, T[i].bytes);
    }
    off += T[i].bytes;
  }
  grt_load_stats x;
  assert_int_equal(grt_loaded_stats(l, &x), GRT_OK);
  assert_int_equal(x.bytes, f->n);
  assert_int_equal(x.device_allocs, c->blob ? 1 : NT - 1); /* the zero-size tensor owns nothing */
  uint64_t chunk = (c->chunk_bytes + 4095) / 4096 * 4096; /* staging buffers are whole pages */
  if (c->method <= GRT_LOAD_PREAD) assert_int_equal(x.peak_host_bytes, (uint64_t)c->buffers * chunk);
  if (c->method == GRT_LOAD_NAIVE) assert_int_equal(x.peak_host_bytes, 140000); /* the largest tensor */
  if (c->method == GRT_LOAD_MMAP) assert_int_equal(x.peak_host_bytes, 0);
  assert_true(x.copies_per_byte == (x.direct || c->method == GRT_LOAD_MMAP ? 1.0 : 2.0));
  assert_int_equal(grt_loaded_free(l), GRT_OK);
  assert_int_equal(allocated(f), 0);
}

static void test_every_method(void **state) {
  fixture *f = *state;
  for (int m = 0; m < GRT_LOAD_METHOD_COUNT; m++)
    for (int blob = 0; blob < 2; blob++)
      for (int direct = 0; direct < 2; direct++) {
        grt_load_config c = config(f, (grt_load_method)m);
        c.blob = blob, c.direct = direct, c.drop_cache = direct;
        load_and_check(f, &c);
      }
}

static void test_uring_variants(void **state) {
  fixture *f = *state;
  grt_load_config c = config(f, GRT_LOAD_IOURING);
  c.queue_depth = 1;
  load_and_check(f, &c);
  c.register_buffers = false, c.buffers = 1, c.queue_depth = 0;
  load_and_check(f, &c);
  c.buffers = 8, c.chunk_bytes = 1 << 20; /* one chunk holds the whole file */
  load_and_check(f, &c);
}

/* A read error at every read in turn: the load fails, naming a tensor, and leaves nothing allocated. */
static void test_read_error_frees_everything(void **state) {
  fixture *f = *state;
  for (int m = 0; m < GRT_LOAD_METHOD_COUNT; m++)
    for (uint64_t nth = 1;; nth++) {
      grt_load_config c = config(f, (grt_load_method)m);
      c.fail_read_at = nth;
      grt_loaded *l = (grt_loaded *)1;
      grt_io_error err;
      grt_status s = grt_load_safetensors(f->path, &c, &l, &err);
      if (s == GRT_OK) { /* past the last read: the load completes */
        assert_int_equal(grt_loaded_free(l), GRT_OK);
        assert_true(nth > 1);
        break;
      }
      assert_int_equal(s, GRT_ERR_IO);
      assert_null(l);
      assert_true(err.tensor[0]);
      assert_non_null(strstr(err.reason, "Input/output error"));
      assert_int_equal(allocated(f), 0);
    }
}

static void test_device_oom_names_the_tensor(void **state) {
  fixture *f = *state;
  grt_device *dev;
  assert_int_equal(grt_exec_get_device(f->exec, &dev), GRT_OK);
  grt_devptr hog[2];
  /* one 2 MiB small-pool segment left with 100 KB free, and no room for another */
  assert_int_equal(grt_device_set_memory_limit(dev, 2 * GRT_MiB), GRT_OK);
  assert_int_equal(grt_alloc_malloc(f->alloc, 1 << 20, 0, &hog[0]), GRT_OK);
  assert_int_equal(grt_alloc_malloc(f->alloc, (1 << 20) - 100352, 0, &hog[1]), GRT_OK);
  uint64_t held = allocated(f);
  grt_load_config c = config(f, GRT_LOAD_IOURING);
  grt_loaded *l = NULL;
  grt_io_error err;
  assert_int_equal(grt_load_safetensors(f->path, &c, &l, &err), GRT_ERR_OOM);
  assert_null(l);
  assert_string_equal(err.tensor, "embed");
  assert_non_null(strstr(err.reason, "cannot allocate 132000 bytes on the device"));
  assert_int_equal(allocated(f), held);
  c.blob = true;
  assert_int_equal(grt_load_safetensors(f->path, &c, &l, &err), GRT_ERR_OOM);
  assert_non_null(strstr(err.reason, "blob"));
  assert_int_equal(allocated(f), held);
  /* room for the first tensors but not for "big": those already allocated are freed */
  assert_int_equal(grt_alloc_free(f->alloc, hog[1]), GRT_OK);
  assert_int_equal(grt_alloc_malloc(f->alloc, (1 << 20) - 200704, 0, &hog[1]), GRT_OK);
  held = allocated(f);
  c.blob = false;
  assert_int_equal(grt_load_safetensors(f->path, &c, &l, &err), GRT_ERR_OOM);
  assert_string_equal(err.tensor, "big");
  grt_safetensors *st;
  assert_int_equal(grt_safetensors_open(f->path, &st, NULL), GRT_OK);
  assert_true(err.has_offset);
  assert_int_equal(err.offset, grt_safetensors_tensor(st, 4)->file_offset); /* where "big" begins in the file */
  grt_safetensors_free(st);
  assert_int_equal(allocated(f), held);
  assert_int_equal(grt_alloc_free(f->alloc, hog[0]), GRT_OK);
  assert_int_equal(grt_alloc_free(f->alloc, hog[1]), GRT_OK);
  assert_int_equal(grt_device_set_memory_limit(dev, 0), GRT_OK);
}

static void test_bad_arguments(void **state) {
  fixture *f = *state;
  grt_load_config c = config(f, GRT_LOAD_PREAD);
  grt_loaded *l;
  grt_io_error err;
  c.buffers = 0;
  assert_int_equal(grt_load_safetensors(f->path, &c, &l, &err), GRT_ERR_INVALID_ARG);
  c = config(f, GRT_LOAD_PREAD);
  c.exec = NULL;
  assert_int_equal(grt_load_safetensors(f->path, &c, &l, &err), GRT_ERR_INVALID_ARG);
  c = config(f, GRT_LOAD_PREAD);
  assert_int_equal(grt_load_safetensors("/nonexistent.safetensors", &c, &l, &err), GRT_ERR_IO);
  grt_load_method m;
  assert_int_equal(grt_load_method_parse("mmap", &m), GRT_OK);
  assert_int_equal(m, GRT_LOAD_MMAP);
  assert_int_equal(grt_load_method_parse("fast", &m), GRT_ERR_NOT_FOUND);
  assert_int_equal(grt_loaded_free(NULL), GRT_OK);
}

/* Chained checksums equal the whole one (the file side reads in pieces). */
static void test_checksum_chains(void **state) {
  (void)state;
  unsigned char *b = st_bytes(1000, 3);
  uint64_t whole = grt_io_checksum(b, 1000, 0), h = grt_io_checksum(b, 512, 0);
  assert_int_equal(grt_io_checksum(b + 512, 488, h), whole);
  assert_true(grt_io_checksum(b, 999, 0) != whole);
  b[17] ^= 1;
  assert_true(grt_io_checksum(b, 1000, 0) != whole);
  free(b);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_every_method, setup, teardown),
      cmocka_unit_test_setup_teardown(test_uring_variants, setup, teardown),
      cmocka_unit_test_setup_teardown(test_read_error_frees_everything, setup, teardown),
      cmocka_unit_test_setup_teardown(test_device_oom_names_the_tensor, setup, teardown),
      cmocka_unit_test_setup_teardown(test_bad_arguments, setup, teardown),
      cmocka_unit_test(test_checksum_chains),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
