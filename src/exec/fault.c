/* fault.c — fault injection for the executor's creations (tests only).
 *
 * Each kind (worker thread, stream, event, user event) has a countdown:
 * fault_left[kind] = n means the nth creation of that kind from the arming
 * fails with GRT_ERR_FAULT_INJECTED; it then disarms itself (one-shot), so the
 * next attempt succeeds. A creation that fails this way changes nothing: the
 * callers take the fault before they link anything into the exec.
 *
 * Invariants: fault_left and fault_fired are guarded by exec->lock (worker
 * threads are created under it too). A disarmed kind costs one compare.
 */
#include "exec/exec_impl.h"

void grt__fault_arm_from_config(grt_exec *exec) {
  exec->fault_left[GRT_EXEC_FAULT_THREAD_CREATE] = exec->cfg.fail_thread_create_at;
  exec->fault_left[GRT_EXEC_FAULT_STREAM_CREATE] = exec->cfg.fail_stream_create_at;
  exec->fault_left[GRT_EXEC_FAULT_EVENT_CREATE] = exec->cfg.fail_event_create_at;
  exec->fault_left[GRT_EXEC_FAULT_USER_EVENT_CREATE] = exec->cfg.fail_user_event_create_at;
}

grt_status grt__fault_take(grt_exec *exec, grt_exec_fault kind) {
  if (!exec->fault_left[kind] || --exec->fault_left[kind]) return GRT_OK;
  exec->fault_fired[kind]++;
  return GRT_ERR_FAULT_INJECTED;
}

static bool kind_ok(grt_exec *exec, grt_exec_fault kind) {
  return exec && exec->magic == GRT__EXEC_MAGIC && (unsigned)kind < GRT_EXEC_FAULT_COUNT;
}

grt_status grt_exec_inject_failure(grt_exec *exec, grt_exec_fault kind, uint64_t nth) {
  if (!kind_ok(exec, kind)) return GRT_ERR_INVALID_ARG;
  if (kind == GRT_EXEC_FAULT_THREAD_CREATE) return GRT_ERR_UNSUPPORTED;
  pthread_mutex_lock(&exec->lock);
  exec->fault_left[kind] = nth;
  pthread_mutex_unlock(&exec->lock);
  return GRT_OK;
}

grt_status grt_exec_injected_failures(grt_exec *exec, grt_exec_fault kind, uint64_t *out) {
  if (!kind_ok(exec, kind) || !out) return GRT_ERR_INVALID_ARG;
  pthread_mutex_lock(&exec->lock);
  *out = exec->fault_fired[kind];
  pthread_mutex_unlock(&exec->lock);
  return GRT_OK;
}
