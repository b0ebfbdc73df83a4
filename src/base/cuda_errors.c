/* cuda_errors.c — which CUDA error each grt_status stands for, and back.
 *
 * The codes are CUDA's ABI (driver_types.h and cuda.h give cudaError_t and
 * CUresult the same number for every error listed), so the table needs no
 * CUDA header and the core library stays dependency-free. The first row of a
 * status is its counterpart; later rows are further CUDA codes read as that
 * status (grt_status_from_cuda) that grt_status_to_cuda never answers.
 */
#include <stddef.h>

#include "gpurt/base.h"

typedef struct cuda_row {
  grt_status st;
  int code;
  const char *name; /* the runtime's spelling; the driver's is CUDA_ERROR_... */
} cuda_row;

static const cuda_row rows[] = {
    {GRT_OK, 0, "cudaSuccess"},
    {GRT_ERR_INVALID_ARG, 1, "cudaErrorInvalidValue"},
    {GRT_ERR_OOM, 2, "cudaErrorMemoryAllocation"},
    {GRT_ERR_NO_DEVICE, 100, "cudaErrorNoDevice"},
    {GRT_ERR_INVALID_HANDLE, 400, "cudaErrorInvalidResourceHandle"},
    {GRT_ERR_STATE, 401, "cudaErrorIllegalState"},
    {GRT_ERR_NOT_READY, 600, "cudaErrorNotReady"},
    {GRT_ERR_NOT_PERMITTED, 800, "cudaErrorNotPermitted"},
    {GRT_ERR_UNSUPPORTED, 801, "cudaErrorNotSupported"},
    {GRT_ERR_CAPTURE_UNSUPPORTED, 900, "cudaErrorStreamCaptureUnsupported"},
    {GRT_ERR_CAPTURE_INVALIDATED, 901, "cudaErrorStreamCaptureInvalidated"},
    {GRT_ERR_CAPTURE_MERGE, 902, "cudaErrorStreamCaptureMerge"},
    {GRT_ERR_CAPTURE_UNMATCHED, 903, "cudaErrorStreamCaptureUnmatched"},
    {GRT_ERR_CAPTURE_UNJOINED, 904, "cudaErrorStreamCaptureUnjoined"},
    {GRT_ERR_CAPTURE_ISOLATION, 905, "cudaErrorStreamCaptureIsolation"},
    {GRT_ERR_CAPTURE_IMPLICIT, 906, "cudaErrorStreamCaptureImplicit"},
    {GRT_ERR_CAPTURED_EVENT, 907, "cudaErrorCapturedEvent"},
    {GRT_ERR_CAPTURE_WRONG_THREAD, 908, "cudaErrorStreamCaptureWrongThread"},
    {GRT_ERR_GRAPH_EXEC_UPDATE, 910, "cudaErrorGraphExecUpdateFailure"},
    /* read-only rows: a stub libcuda, a kernel driver older than the library
       and a bad ordinal are "no usable device" and "bad argument" to gpurt */
    {GRT_ERR_NO_DEVICE, 34, "cudaErrorStubLibrary"},
    {GRT_ERR_NO_DEVICE, 803, "cudaErrorSystemDriverMismatch"},
    {GRT_ERR_INVALID_ARG, 101, "cudaErrorInvalidDevice"},
};
#define N_ROWS (sizeof rows / sizeof rows[0])

grt_status grt_status_to_cuda(grt_status st, int *cuda_error, const char **cuda_name) {
  for (size_t i = 0; i < N_ROWS; i++)
    if (rows[i].st == st) {
      if (cuda_error) *cuda_error = rows[i].code;
      if (cuda_name) *cuda_name = rows[i].name;
      return GRT_OK;
    }
  return GRT_ERR_NOT_FOUND;
}

grt_status grt_status_from_cuda(int cuda_error) {
  for (size_t i = 0; i < N_ROWS; i++)
    if (rows[i].code == cuda_error) return rows[i].st;
  return GRT_ERR_DRIVER;
}
