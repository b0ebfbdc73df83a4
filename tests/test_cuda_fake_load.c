/* test_cuda_fake_load.c — the weight load on the CUDA backend, against the
 * fake driver: staging buffers from cuMemHostAlloc, cuMemcpyHtoDAsync on a
 * stream, an event per buffer; the device bytes read back equal the file's;
 * a read error or a failed copy leaves no device memory, host buffer,
 * stream or event behind. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "cuda_fake_fixture.h"
#include "gpurt/io.h"
#include "safetensors_builder.h"

typedef struct gpu {
  grt_device *dev;
  grt_allocator *alloc;
  grt_cuda_stream *s;
  char path[64];
  unsigned char *data;
  size_t n;
} gpu;

static const size_t sizes[] = {70000, 8, 0, 123457, 4096, 3};

static void open_gpu(gpu *g) {
  memset(g, 0, sizeof *g);
  g->dev = fk_open();
  grt_alloc_config ac;
  grt_alloc_config_default(&ac);
  assert_int_equal(grt_alloc_create("caching", g->dev, &ac, &g->alloc), GRT_OK);
  assert_int_equal(grt_cuda_stream_create(g->dev, GRT_CUDA_STREAM_NON_BLOCKING, 0, &g->s), GRT_OK);
  char header[1024] = "{";
  size_t at = 1, off = 0;
  for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
    at += (size_t)snprintf(header + at, sizeof header - at, "%s\"t%zu\":{\"dtype\":\"U8\",\"shape\":[%zu],"
                           "\"data_offsets\":[%zu,%zu]}", i ? "," : "", i, sizes[i], off, off + sizes[i]);
    off += sizes[i];
  }
  snprintf(header + at, sizeof header - at, "}");
  g->n = off;
  g->data = st_bytes(off, 11);
  st_write(g->path, header, g->data, off);
}

static void close_gpu(gpu *g) {
  unlink(g->path);
  free(g->data);
  assert_int_equal(grt_cuda_stream_destroy(g->s), GRT_OK);
  assert_int_equal(grt_alloc_destroy(g->alloc), GRT_OK);
  assert_int_equal(grt_device_destroy(g->dev), GRT_OK);
}

static grt_load_config config(gpu *g, grt_load_method m) {
  grt_load_config c;
  grt_load_config_default(&c);
  c.cuda_stream = g->s, c.cuda_device = g->dev, c.alloc = g->alloc, c.method = m;
  c.chunk_bytes = 8192, c.buffers = 3;
  return c;
}

static void test_every_method_on_the_gpu(void **state) {
  (void)state;
  gpu g;
  open_gpu(&g);
  fk_census before = fk_count();
  for (int m = 0; m < GRT_LOAD_METHOD_COUNT; m++)
    for (int blob = 0; blob < 2; blob++) {
      grt_load_config c = config(&g, (grt_load_method)m);
      c.blob = blob;
      unsigned long copies = fk.calls("cuMemcpyHtoDAsync"), hosts = fk.calls("cuMemHostAlloc");
      grt_loaded *l = NULL;
      grt_io_error err;
      grt_status s = grt_load_safetensors(g.path, &c, &l, &err);
      if (s) fail_msg("%s: %s", grt_load_method_name((grt_load_method)m), err.reason);
      size_t off = 0;
      for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        uint64_t dev_sum;
        assert_int_equal(grt_loaded_device_checksum(l, i, &dev_sum), GRT_OK); /* read back through the stream */
        assert_int_equal(dev_sum, grt_io_checksum(g.data + off, sizes[i], 0));
        off += sizes[i];
      }
      assert_true(fk.calls("cuMemcpyHtoDAsync") > copies);
      /* the staged methods stage in driver-pinned memory, the others use none */
      assert_int_equal(fk.calls("cuMemHostAlloc") - hosts, m <= GRT_LOAD_PREAD ? 3 : 0);
      assert_int_equal(grt_loaded_free(l), GRT_OK);
      assert_int_equal(grt_alloc_empty_cache(g.alloc), GRT_OK);
      fk_assert_census(before);
    }
  close_gpu(&g);
}

static void test_failures_leave_nothing(void **state) {
  (void)state;
  gpu g;
  open_gpu(&g);
  fk_census before = fk_count();
  grt_loaded *l = NULL;
  grt_io_error err;
  /* a read error in the middle */
  grt_load_config c = config(&g, GRT_LOAD_IOURING);
  c.fail_read_at = 4;
  assert_int_equal(grt_load_safetensors(g.path, &c, &l, &err), GRT_ERR_IO);
  assert_null(l);
  assert_true(err.tensor[0]);
  assert_int_equal(grt_alloc_empty_cache(g.alloc), GRT_OK);
  fk_assert_census(before);
  /* the driver refuses the third copy */
  c = config(&g, GRT_LOAD_PREAD);
  fk_arm("cuMemcpyHtoDAsync", 3, FK_UNKNOWN);
  assert_int_equal(grt_load_safetensors(g.path, &c, &l, &err), GRT_ERR_DRIVER);
  assert_null(l);
  assert_non_null(strstr(err.reason, "the copy to the device was refused"));
  assert_int_equal(grt_alloc_empty_cache(g.alloc), GRT_OK);
  fk_assert_census(before);
  /* no pinned memory to be had */
  fk_arm("cuMemHostAlloc", 2, FK_OUT_OF_MEMORY);
  assert_int_not_equal(grt_load_safetensors(g.path, &c, &l, &err), GRT_OK);
  assert_non_null(strstr(err.reason, "staging buffers"));
  assert_int_equal(grt_alloc_empty_cache(g.alloc), GRT_OK);
  fk_assert_census(before);
  close_gpu(&g);
}

int main(void) {
  int ready = fk_ready("test_cuda_fake_load", "modern");
  if (ready != 1) return fk_not_ready(ready);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_every_method_on_the_gpu),
      cmocka_unit_test(test_failures_leave_nothing),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
