/* fuzz_pytorch.c — libFuzzer harness for the PyTorch snapshot (pickle) reader (see fuzz_common.h).
 * The input's last byte picks the device (0-3), so the device selection path is fuzzed too. */
#include "fuzz_common.h"

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size);
int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size) {
  int device = size ? data[size - 1] % 4 == 3 ? 1 : 0 : 0;
  return grt_fuzz_one(data, size, GRT_TRACE_FORMAT_PYTORCH, device);
}
