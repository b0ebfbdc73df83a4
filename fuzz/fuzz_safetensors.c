/* fuzz_safetensors.c — libFuzzer harness for the safetensors header reader:
 * any bytes as a whole file; a header it accepts must describe tensors that
 * tile its byte buffer exactly, or the reader broke its own promise. */
#include <stdint.h>
#include <stdlib.h>

#include "gpurt/io.h"

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size);
int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size) {
  grt_safetensors *st = NULL;
  grt_io_error err;
  if (grt_safetensors_parse(data, size, size, &st, &err)) return 0;
  uint64_t expect = 0;
  for (size_t i = 0; i < grt_safetensors_count(st); i++) {
    const grt_st_tensor *t = grt_safetensors_tensor(st, i);
    if (t->begin != expect || t->end < t->begin || t->file_offset != grt_safetensors_data_offset(st) + t->begin) abort();
    expect = t->end;
  }
  if (expect != grt_safetensors_data_size(st) || grt_safetensors_data_offset(st) + expect != size) abort();
  for (size_t i = 0; i < grt_safetensors_metadata_count(st); i++) {
    const char *k, *v;
    if (grt_safetensors_metadata(st, i, &k, &v) || !k || !v) abort();
  }
  grt_safetensors_free(st);
  return 0;
}
