/* gpurt/cuda.h — the real CUDA backend: a grt_device on a GPU, plus a thin
 * stream / event API over the CUDA driver.
 *
 * The driver (libcuda.so.1) is loaded at run time with dlopen, once per
 * process, and every entry point is looked up through cuGetProcAddress; gpurt
 * never links against CUDA, so the same binary runs without it. The library
 * path can be overridden with GRT_CUDA_LIBRARY (tests use a fake driver).
 * A build without cuda.h keeps these functions; they return
 * GRT_ERR_UNSUPPORTED.
 *
 * Status mapping: no driver library / no GPU -> GRT_ERR_NO_DEVICE; an entry
 * point the driver lacks -> GRT_ERR_UNSUPPORTED (the message names it); a
 * CUDA error with a status of its own -> that status (grt_status_from_cuda:
 * CUDA_ERROR_OUT_OF_MEMORY -> GRT_ERR_OOM, CUDA_ERROR_NOT_READY ->
 * GRT_ERR_NOT_READY, CUDA_ERROR_INVALID_HANDLE -> GRT_ERR_INVALID_HANDLE,
 * each stream-capture error -> its GRT_ERR_CAPTURE_* status, ...); any other
 * CUDA error -> GRT_ERR_DRIVER. Either way grt_device_last_error() holds the
 * entry point and the CUDA error's name, number and text. Handles from
 * another device's backend (a simulated device) -> GRT_ERR_UNSUPPORTED.
 *
 * The device uses the GPU's primary context (the one the CUDA runtime and
 * PyTorch use), so pointers and streams are interchangeable with theirs. Each
 * call makes that context current for its duration and restores the caller's.
 *
 * Streams: "blocking" streams (the default) synchronize with the legacy
 * default stream; GRT_CUDA_STREAM_NON_BLOCKING ones do not. Events follow CUDA:
 * a record snapshots the work issued so far; a wait binds to the snapshot at
 * the time of the wait call; a never-recorded event counts as complete.
 *
 * Thread safety: every function may be called from several threads. A stream,
 * event or gate must not be destroyed while another thread uses it. Destroying
 * a device with live streams, events or gates returns GRT_ERR_BUSY.
 */
#ifndef GPURT_CUDA_H
#define GPURT_CUDA_H

#include "gpurt/device.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct grt_cuda_stream grt_cuda_stream;
typedef struct grt_cuda_event grt_cuda_event;
typedef struct grt_cuda_gate grt_cuda_gate;

/* Loads the driver (once per process) and counts the GPUs. On failure writes
 * why into msg (if non-NULL): "libcuda.so.1: cannot open shared object...".
 * On success msg holds the driver version, e.g. "CUDA driver 13.0, 1 device". */
GRT_API GRT_MUST_CHECK grt_status grt_cuda_probe(int *device_count, char *msg, size_t msg_size);

/* Creates a device on GPU `ordinal` (retains its primary context). On failure
 * *out is NULL; grt_cuda_probe() says why. */
GRT_API GRT_MUST_CHECK grt_status grt_device_create_cuda(int ordinal, grt_device **out);

/* The GPU's name ("NVIDIA H200") into buf. */
GRT_API GRT_MUST_CHECK grt_status grt_cuda_device_name(grt_device *dev, char *buf, size_t buf_size);

/* ---- streams ---- */
#define GRT_CUDA_STREAM_DEFAULT 0u      /* blocking: ordered with the legacy default stream */
#define GRT_CUDA_STREAM_NON_BLOCKING 1u /* exempt from legacy default stream ordering */

/* Creates a stream; priority: lower = higher priority, clamped by the driver (0 = normal). */
GRT_API GRT_MUST_CHECK grt_status grt_cuda_stream_create(grt_device *dev, unsigned flags, int priority,
                                                         grt_cuda_stream **out);
/* A handle to the legacy default stream (CU_STREAM_LEGACY); destroying the handle leaves the stream. */
GRT_API GRT_MUST_CHECK grt_status grt_cuda_stream_legacy(grt_device *dev, grt_cuda_stream **out);
/* Borrows a CUstream / cudaStream_t made elsewhere (NULL = the default stream). */
GRT_API GRT_MUST_CHECK grt_status grt_cuda_stream_wrap(grt_device *dev, void *cu_stream, grt_cuda_stream **out);
/* Destroys the stream (a borrowed one is only forgotten). Pending work still
 * completes; the call does not wait for it. destroy(NULL) is a no-op. */
GRT_API GRT_MUST_CHECK grt_status grt_cuda_stream_destroy(grt_cuda_stream *s);
/* The CUstream handle (NULL for the default stream). */
GRT_API void *grt_cuda_stream_handle(const grt_cuda_stream *s);
/* The id the allocator uses for this stream: the handle's value; 0 for the
 * default / legacy stream (as PyTorch passes it). */
GRT_API grt_stream_id grt_cuda_stream_id(const grt_cuda_stream *s);
/* GRT_OK when all work issued to s completed, GRT_ERR_NOT_READY otherwise. */
GRT_API GRT_MUST_CHECK grt_status grt_cuda_stream_query(grt_cuda_stream *s);
GRT_API GRT_MUST_CHECK grt_status grt_cuda_stream_synchronize(grt_cuda_stream *s);
/* Work issued to s after this call waits for ev's snapshot taken at this call. */
GRT_API GRT_MUST_CHECK grt_status grt_cuda_stream_wait_event(grt_cuda_stream *s, grt_cuda_event *ev);

/* Runs fn(arg) on a driver thread after all earlier work on s; later work on s
 * waits for it. fn must not call CUDA (nor gpurt's CUDA functions). Host
 * functions on different streams may run in any order, and may be serialized. */
GRT_API GRT_MUST_CHECK grt_status grt_cuda_launch_host_func(grt_cuda_stream *s, void (*fn)(void *arg), void *arg);

/* Stream-ordered copies and fill (cuMemcpy*Async, cuMemsetD8Async). With
 * pageable host memory the driver may complete the copy before returning. */
GRT_API GRT_MUST_CHECK grt_status grt_cuda_memcpy_htod_async(grt_cuda_stream *s, grt_devptr dst, const void *src,
                                                             uint64_t bytes);
GRT_API GRT_MUST_CHECK grt_status grt_cuda_memcpy_dtoh_async(grt_cuda_stream *s, void *dst, grt_devptr src,
                                                             uint64_t bytes);
GRT_API GRT_MUST_CHECK grt_status grt_cuda_memcpy_dtod_async(grt_cuda_stream *s, grt_devptr dst, grt_devptr src,
                                                             uint64_t bytes);
GRT_API GRT_MUST_CHECK grt_status grt_cuda_memset_async(grt_cuda_stream *s, grt_devptr dst, uint8_t value,
                                                        uint64_t bytes);

/* Page-locked host memory the driver maps for DMA (cuMemHostAlloc, portable):
 * copies from it are truly asynchronous. Page aligned. free(NULL) is a no-op. */
GRT_API GRT_MUST_CHECK grt_status grt_cuda_host_alloc(grt_device *dev, uint64_t bytes, void **out);
GRT_API GRT_MUST_CHECK grt_status grt_cuda_host_free(grt_device *dev, void *p);

/* ---- events ---- */
#define GRT_CUDA_EVENT_DEFAULT 0u /* no timing (cheapest; what the allocator uses) */
#define GRT_CUDA_EVENT_TIMING 1u  /* usable with grt_cuda_event_elapsed_ms */

GRT_API GRT_MUST_CHECK grt_status grt_cuda_event_create(grt_device *dev, unsigned flags, grt_cuda_event **out);
GRT_API GRT_MUST_CHECK grt_status grt_cuda_event_destroy(grt_cuda_event *ev);
/* Snapshots the work issued to s so far; re-recording overwrites the snapshot. */
GRT_API GRT_MUST_CHECK grt_status grt_cuda_event_record(grt_cuda_event *ev, grt_cuda_stream *s);
/* GRT_OK when the snapshot completed (or the event was never recorded), else GRT_ERR_NOT_READY. */
GRT_API GRT_MUST_CHECK grt_status grt_cuda_event_query(grt_cuda_event *ev);
GRT_API GRT_MUST_CHECK grt_status grt_cuda_event_synchronize(grt_cuda_event *ev);
/* Milliseconds between two completed timing events. */
GRT_API GRT_MUST_CHECK grt_status grt_cuda_event_elapsed_ms(grt_cuda_event *start, grt_cuda_event *end, float *ms);

/* ---- stream capture (cuStreamBeginCapture ... cuStreamEndCapture) ----
 * The driver's own rules apply and its errors come back as the executor's
 * statuses do (docs/EXEC.md, "Status codes"), which is what lets
 * gpurt-conformance put the two side by side. Modes have the values of
 * grt_capture_mode (exec.h) and of CUstreamCaptureMode. */
#define GRT_CUDA_CAPTURE_GLOBAL 0u
#define GRT_CUDA_CAPTURE_THREAD_LOCAL 1u
#define GRT_CUDA_CAPTURE_RELAXED 2u
GRT_API GRT_MUST_CHECK grt_status grt_cuda_stream_begin_capture(grt_cuda_stream *s, unsigned mode);
/* Ends the capture begun on s; *graph receives the CUgraph (NULL on failure),
 * the caller's to launch elsewhere or free with grt_cuda_graph_destroy. */
GRT_API GRT_MUST_CHECK grt_status grt_cuda_stream_end_capture(grt_cuda_stream *s, void **graph);
/* 0 not capturing, 1 capturing, 2 capturing but invalidated (CUstreamCaptureStatus). */
GRT_API GRT_MUST_CHECK grt_status grt_cuda_stream_capture_status(grt_cuda_stream *s, int *status);
/* Frees a graph from grt_cuda_stream_end_capture; NULL is a no-op. */
GRT_API GRT_MUST_CHECK grt_status grt_cuda_graph_destroy(grt_device *dev, void *graph);

/* ---- gates: a stream blocked until the host opens it ----
 * A gate is a pinned host word the GPU waits on (cuStreamWaitValue32); where
 * the driver refuses that, a host function that polls the word. It lets tests
 * hold a stream back deterministically. A gate opens by itself after
 * timeout_ms (so a mistake cannot hang the GPU); gates are one-shot. */
GRT_API GRT_MUST_CHECK grt_status grt_cuda_gate_create(grt_device *dev, unsigned timeout_ms, grt_cuda_gate **out);
/* Work issued to s after this call waits until the gate is open. */
GRT_API GRT_MUST_CHECK grt_status grt_cuda_gate_block(grt_cuda_gate *g, grt_cuda_stream *s);
GRT_API GRT_MUST_CHECK grt_status grt_cuda_gate_open(grt_cuda_gate *g);
/* 1 when the gate opened by its timeout rather than grt_cuda_gate_open. */
GRT_API int grt_cuda_gate_timed_out(const grt_cuda_gate *g);
/* "wait_value32" or "host_func" (the mechanism of the last block), "" before any. */
GRT_API const char *grt_cuda_gate_mechanism(const grt_cuda_gate *g);
/* Opens the gate if still closed and frees it. Call after the blocked work drained
 * (or accept a device-wide wait: freeing pinned memory synchronizes). */
GRT_API GRT_MUST_CHECK grt_status grt_cuda_gate_destroy(grt_cuda_gate *g);

#ifdef __cplusplus
}
#endif
#endif /* GPURT_CUDA_H */
