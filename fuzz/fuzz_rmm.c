/* fuzz_rmm.c — libFuzzer harness for the rmm trace reader (see fuzz_common.h). */
#include "fuzz_common.h"

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size);
int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size) {
  return grt_fuzz_one(data, size, GRT_TRACE_FORMAT_RMM, 0);
}
