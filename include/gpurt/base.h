/* gpurt/base.h — status codes and the few shared types every layer uses.
 *
 * Every public gpurt function returns a grt_status; results travel through
 * out-parameters. GRT_OK is zero so `if (st) return st;` reads naturally.
 * The list below is the single source of the enum, grt_status_str() (a
 * sentence for humans) and grt_status_name() (the enum's spelling).
 *
 * Thread safety: everything here is pure and thread-safe.
 */
#ifndef GPURT_BASE_H
#define GPURT_BASE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(GRT_BUILDING_LIBRARY) && defined(__GNUC__)
#define GRT_API __attribute__((visibility("default")))
#else
#define GRT_API
#endif

/* X(name, value, message) */
#define GRT_STATUS_LIST(X)                                                         \
  X(GRT_OK, 0, "success")                                                         \
  X(GRT_ERR_INVALID_ARG, 1, "invalid argument")                                   \
  X(GRT_ERR_NOMEM, 2, "host out of memory")                                       \
  X(GRT_ERR_OOM, 3, "device out of memory")                                       \
  X(GRT_ERR_DOUBLE_FREE, 4, "double free: the block is already free")             \
  X(GRT_ERR_UNKNOWN_POINTER, 5, "pointer was not returned by this allocator")     \
  X(GRT_ERR_INTERIOR_POINTER, 6, "pointer points inside a block, not at its start") \
  X(GRT_ERR_SIZE, 7, "size is zero or too large")                                 \
  X(GRT_ERR_BUSY, 8, "object still has live children or pending work")           \
  X(GRT_ERR_NOT_READY, 9, "work not completed yet")                               \
  X(GRT_ERR_DESTROYED, 10, "object was destroyed")                                \
  X(GRT_ERR_WRONG_DEVICE, 11, "object belongs to another device")                 \
  X(GRT_ERR_NOT_PERMITTED, 12, "operation not permitted in this context")        \
  X(GRT_ERR_DEADLOCK, 13, "deadlock detected")                                    \
  X(GRT_ERR_CAPTURE_INVALIDATED, 14, "the stream capture was invalidated by an earlier illegal call") \
  X(GRT_ERR_UNSUPPORTED, 15, "not supported by this backend or build")            \
  X(GRT_ERR_PARSE, 16, "malformed input")                                         \
  X(GRT_ERR_IO, 17, "input/output error")                                         \
  X(GRT_ERR_NOT_FOUND, 18, "not found")                                           \
  X(GRT_ERR_STATE, 19, "object is in the wrong state for this call")             \
  X(GRT_ERR_RACE, 20, "unsynchronized access detected")                           \
  X(GRT_ERR_POISON, 21, "read of poisoned (freed) memory detected")               \
  X(GRT_ERR_FAULT_INJECTED, 22, "failure injected by a test")                     \
  X(GRT_ERR_NO_DEVICE, 23, "no device or driver available")                      \
  X(GRT_ERR_DRIVER, 24, "device driver returned an error")                        \
  X(GRT_ERR_INTERNAL, 25, "internal error (a gpurt bug)")                        \
  X(GRT_ERR_CAPTURE_UNSUPPORTED, 26, "operation not permitted while a stream capture is in progress") \
  X(GRT_ERR_CAPTURE_IMPLICIT, 27, "legacy stream use would depend implicitly on a stream capture in progress") \
  X(GRT_ERR_GRAPH_CYCLE, 28, "the edge would close a cycle: a graph's edges must form a DAG") \
  X(GRT_ERR_CAPTURE_MERGE, 29, "the operation would merge two independent stream captures") \
  X(GRT_ERR_CAPTURE_UNMATCHED, 30, "the capture was not begun on this stream") \
  X(GRT_ERR_CAPTURE_UNJOINED, 31, "a stream forked from the capture did not join back to its origin") \
  X(GRT_ERR_CAPTURE_ISOLATION, 32, "the dependency would cross the boundary of a stream capture") \
  X(GRT_ERR_CAPTURED_EVENT, 33, "not permitted on an event last recorded in a capturing stream") \
  X(GRT_ERR_CAPTURE_WRONG_THREAD, 34, "a capture not begun in relaxed mode must be ended by the thread that began it") \
  X(GRT_ERR_INVALID_HANDLE, 35, "the handle names no live object: it was destroyed") \
  X(GRT_ERR_GRAPH_EXEC_UPDATE, 36, "the graph differs from the executable graph in a way an update cannot apply")

/* A grt_status must never be dropped: a failed call changes nothing, so an
 * unchecked failure silently loses the caller's intent. Clang marks the type
 * itself (every function returning it, static ones too); GCC only accepts
 * the attribute on functions, so declarations carry GRT_MUST_CHECK. */
#if defined(__GNUC__)
#define GRT_MUST_CHECK __attribute__((warn_unused_result))
#else
#define GRT_MUST_CHECK
#endif
#if defined(__clang__)
#define GRT__STATUS_TYPE_ATTR __attribute__((warn_unused_result))
#else
#define GRT__STATUS_TYPE_ATTR
#endif

typedef enum GRT__STATUS_TYPE_ATTR grt_status {
#define GRT__STATUS_ENUM(name, value, msg) name = value,
  GRT_STATUS_LIST(GRT__STATUS_ENUM)
#undef GRT__STATUS_ENUM
} grt_status;

/* A sentence describing the status; never NULL (unknown codes get a generic text). */
GRT_API const char *grt_status_str(grt_status st);
/* The enum constant's name, e.g. "GRT_ERR_OOM"; never NULL. */
GRT_API const char *grt_status_name(grt_status st);

/* CUDA's counterpart of a status: its code, which cudaError_t and CUresult
 * share for every error gpurt maps, and the runtime's name for it, e.g.
 * GRT_ERR_CAPTURE_MERGE -> 902, "cudaErrorStreamCaptureMerge" (docs/EXEC.md,
 * "Status codes", has the table). Either out-parameter may be NULL.
 * GRT_ERR_NOT_FOUND, nothing written, for a status CUDA has no code for (a
 * parse error, the sanitizer's race report, ...). */
GRT_API GRT_MUST_CHECK grt_status grt_status_to_cuda(grt_status st, int *cuda_error, const char **cuda_name);
/* The status a CUDA error code (cudaError_t or CUresult) stands for: GRT_OK
 * for 0, the status of the table above for a mapped code (a few codes share
 * one: CUDA's three ways of saying "no usable driver" all read
 * GRT_ERR_NO_DEVICE), GRT_ERR_DRIVER for every other code. */
GRT_API GRT_MUST_CHECK grt_status grt_status_from_cuda(int cuda_error);

/* A device address. Modelled devices hand out numbers; the CUDA backend hands out CUdeviceptr. */
typedef uint64_t grt_devptr;

/* A stream as the allocator sees it: an opaque id (0 is the default stream). */
typedef uint64_t grt_stream_id;

/* Completion interface: "has the work issued to a stream so far finished?"
 * asked without knowing how streams run. It lives here, at the bottom, so that
 * every layer speaks it: the allocator consumes it for deferred frees
 * (record_stream), the executor (grt_exec_stream_ops) and CUDA events
 * (grt_cuda_events_stream_ops) implement it, tests fake it.
 *
 * Event ids are the implementation's, opaque to the caller. record_event,
 * event_query and event_synchronize are required; event_destroy may be NULL
 * (ids that need no release). An allocator calls these with its own mutex
 * held: they must not call back into that allocator. */
typedef struct grt_stream_ops {
  void *ctx;
  /* Records an event on stream; returns an id the other calls receive. */
  grt_status (*record_event)(void *ctx, grt_stream_id stream, uint64_t *event);
  /* 1 when the event has completed, 0 when not yet. */
  int (*event_query)(void *ctx, uint64_t event);
  /* Blocks until the event completed (empty_cache and the OOM retry call it). */
  void (*event_synchronize)(void *ctx, uint64_t event);
  void (*event_destroy)(void *ctx, uint64_t event);
} grt_stream_ops;

#define GRT_KiB ((uint64_t)1024)
#define GRT_MiB ((uint64_t)1024 * 1024)
#define GRT_GiB ((uint64_t)1024 * 1024 * 1024)

/* Formats `bytes` as "12.50 MiB" into buf (at least 32 bytes); returns buf. */
GRT_API char *grt_format_bytes(uint64_t bytes, char *buf, size_t buf_size);

#ifdef __cplusplus
}
#endif
#endif /* GPURT_BASE_H */
