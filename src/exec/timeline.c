/* timeline.c — per-op records and their export as Chrome trace-event JSON.
 *
 * With cfg.record_timeline on, every completed op leaves one record (uid,
 * stream, engine slot, interval) and the uids of the ops its cross-stream deps
 * pointed at (flows). The export has two processes: "streams" (a track per
 * stream, every op: zero-length ones such as event records as instant events,
 * ph "i") and "engines" (a track per engine slot, timed ops only); each dep
 * becomes a flow arrow from the end of the source op to the start of the
 * waiting op. After a deadlock, every stream whose work never ran gets an
 * instant at the moment it stopped naming the cycle, so a timeline with no
 * op in it still shows why. The file follows the Trace Event Format: every
 * event, metadata too, has name, cat, ph, pid and ts. JSON is written by
 * hand; every string goes through json_str (base/json.h), which escapes
 * quotes, backslashes and control characters (each as \u00XX).
 *
 * Per-op times (grt_exec_op_times) are kept apart from those records: the
 * timeline is optional and grows until cleared, while op times must work
 * with it off and in bounded memory. An op issued with an id writes its
 * interval at completion into a ring of cfg.op_times_keep entries at
 * id % keep. An id stays retained while fewer than `keep` ids were issued
 * after it, so the slot an op writes is never one a retained id still owns,
 * and a lookup tells the three cases apart by the ids alone: evicted or
 * never issued (NOT_FOUND), retained with its entry written (the times), or
 * retained without (not ended yet: NOT_READY).
 */
#include <stdlib.h>
#include <string.h>

#include "base/json.h"
#include "exec/exec_impl.h"

static const char *const kind_names[] = {"kernel", "memcpy H2D", "memcpy D2H", "memcpy D2D", "memset",
                                         "host fn", "record", "wait", "signal", "wait value",
                                         "graph launch", "graph alloc", "graph free", "callback"};

void grt__trace_op(grt_exec *exec, const grt__op *op) {
  if (!exec->cfg.record_timeline) return;
  if (exec->trace_n == exec->trace_cap) {
    size_t cap = exec->trace_cap ? 2 * exec->trace_cap : 256;
    grt__trace_rec *t = realloc(exec->trace, cap * sizeof *t);
    if (!t) return; /* the timeline is best effort; execution is not */
    exec->trace = t;
    exec->trace_cap = cap;
  }
  size_t need = exec->flows_n + op->ndeps;
  if (need > exec->flows_cap) {
    size_t cap = exec->flows_cap ? exec->flows_cap : 256;
    while (cap < need) cap *= 2;
    uint64_t *f = realloc(exec->flows, cap * sizeof *f);
    if (!f) return;
    exec->flows = f;
    exec->flows_cap = cap;
  }
  grt__trace_rec *r = &exec->trace[exec->trace_n++];
  r->deadlock = false;
  r->uid = op->uid;
  r->start_ns = op->start_ns;
  r->end_ns = op->end_ns;
  r->stream_id = op->stream->id;
  r->kind = op->kind;
  r->engine = op->engine;
  r->slot = op->slot;
  memcpy(r->name, op->name, sizeof r->name);
  r->flow_first = exec->flows_n;
  r->flow_n = 0;
  for (uint32_t i = 0; i < op->ndeps; i++)
    if (op->deps[i].src_uid) {
      exec->flows[exec->flows_n++] = op->deps[i].src_uid;
      r->flow_n++;
    }
}

static grt__trace_rec *new_rec(grt_exec *exec) {
  if (exec->trace_n == exec->trace_cap) {
    size_t cap = exec->trace_cap ? 2 * exec->trace_cap : 256;
    grt__trace_rec *t = realloc(exec->trace, cap * sizeof *t);
    if (!t) return NULL; /* the timeline is best effort; execution is not */
    exec->trace = t;
    exec->trace_cap = cap;
  }
  grt__trace_rec *r = &exec->trace[exec->trace_n++];
  memset(r, 0, sizeof *r);
  return r;
}

void grt__trace_deadlock(grt_exec *exec) {
  if (!exec->cfg.record_timeline) return;
  uint64_t now = grt__exec_now(exec);
  for (grt_stream *s = exec->streams; s; s = s->all_next) {
    if (!s->head) continue;
    grt__trace_rec *r = new_rec(exec);
    if (!r) return;
    r->start_ns = r->end_ns = now;
    r->stream_id = s->id;
    r->kind = s->head->kind;
    r->engine = GRT_ENGINE_COUNT; /* on its stream's track only */
    r->deadlock = true;
    snprintf(r->name, sizeof r->name, "%s", s->name); /* the stream's: it may be gone when the file is written */
  }
}

grt_status grt__op_id_take(grt_exec *exec, uint64_t *id) {
  if (!exec->op_times && !(exec->op_times = calloc(exec->cfg.op_times_keep, sizeof *exec->op_times)))
    return GRT_ERR_NOMEM;
  *id = ++exec->op_ids;
  return GRT_OK;
}

void grt__op_id_undo(grt_exec *exec, uint64_t id) {
  if (id && id == exec->op_ids) exec->op_ids--; /* the lock was held since the take */
}

static bool op_id_retained(const grt_exec *exec, uint64_t id) {
  return id && id <= exec->op_ids && exec->op_ids - id < exec->cfg.op_times_keep;
}

void grt__op_times_note(grt_exec *exec, const grt__op *op) {
  if (!op_id_retained(exec, op->times_id)) return; /* evicted while it ran */
  exec->op_times[op->times_id % exec->cfg.op_times_keep] = (grt__op_time){op->times_id, op->start_ns, op->end_ns};
}

grt_status grt_exec_op_times(grt_exec *exec, grt_op_id id, uint64_t *start_ns, uint64_t *end_ns) {
  if (!exec || exec->magic != GRT__EXEC_MAGIC || !start_ns || !end_ns) return GRT_ERR_INVALID_ARG;
  pthread_mutex_lock(&exec->lock);
  grt_status st = GRT_ERR_NOT_FOUND;
  if (op_id_retained(exec, id)) {
    const grt__op_time *t = &exec->op_times[id % exec->cfg.op_times_keep];
    if (t->id == id) {
      *start_ns = t->start_ns;
      *end_ns = t->end_ns;
      st = GRT_OK;
    } else {
      st = exec->error ? exec->error : GRT_ERR_NOT_READY; /* a sticky error cancels what has not run */
    }
  }
  pthread_mutex_unlock(&exec->lock);
  return st;
}

void grt__timeline_free(grt_exec *exec) {
  free(exec->trace);
  free(exec->flows);
  free(exec->op_times);
  exec->op_times = NULL;
  exec->trace = NULL;
  exec->flows = NULL;
  exec->trace_n = exec->trace_cap = exec->flows_n = exec->flows_cap = 0;
}

static void put_file(void *f, const char *s, size_t n) { fwrite(s, 1, n, f); }

static void json_str(FILE *f, const char *s) { grt__json_write_string(s, 0, put_file, f); }

/* Microseconds with ns precision, as trace-event "ts" expects. */
static void json_us(FILE *f, uint64_t ns) {
  fprintf(f, "%llu.%03llu", (unsigned long long)(ns / 1000), (unsigned long long)(ns % 1000));
}

static const char *engine_name(unsigned e) {
  static const char *const names[] = {"compute", "copy H2D", "copy D2H", "host"};
  return e < GRT_ENGINE_COUNT ? names[e] : "none";
}

static unsigned engine_tid(unsigned engine, unsigned slot) { return engine * 100 + slot + 1; }

static void write_meta(grt_exec *exec, FILE *f) {
  fprintf(f, "{\"name\":\"process_name\",\"cat\":\"__metadata\",\"ph\":\"M\",\"pid\":1,\"ts\":0,"
             "\"args\":{\"name\":\"streams\"}},\n");
  fprintf(f, "{\"name\":\"process_name\",\"cat\":\"__metadata\",\"ph\":\"M\",\"pid\":2,\"ts\":0,"
             "\"args\":{\"name\":\"engines\"}}");
  for (grt_stream *s = exec->streams; s; s = s->all_next) {
    char label[64];
    snprintf(label, sizeof label, "%s (id %llu%s)", s->name, (unsigned long long)s->id,
             s->flags & GRT_STREAM_NON_BLOCKING ? ", non-blocking" : "");
    fprintf(f, ",\n{\"name\":\"thread_name\",\"cat\":\"__metadata\",\"ph\":\"M\",\"pid\":1,\"tid\":%llu,\"ts\":0,"
               "\"args\":{\"name\":",
            (unsigned long long)s->id + 1);
    json_str(f, label);
    fprintf(f, "}}");
    fprintf(f, ",\n{\"name\":\"thread_sort_index\",\"cat\":\"__metadata\",\"ph\":\"M\",\"pid\":1,\"tid\":%llu,"
               "\"ts\":0,\"args\":{\"sort_index\":%llu}}",
            (unsigned long long)s->id + 1, (unsigned long long)s->id);
  }
  for (unsigned e = 0; e < GRT_ENGINE_COUNT; e++)
    for (unsigned slot = 0; slot < exec->engines[e].slots; slot++) {
      char label[48];
      snprintf(label, sizeof label, "%s [%u]", engine_name(e), slot);
      fprintf(f, ",\n{\"name\":\"thread_name\",\"cat\":\"__metadata\",\"ph\":\"M\",\"pid\":2,\"tid\":%u,\"ts\":0,"
                 "\"args\":{\"name\":",
              engine_tid(e, slot));
      json_str(f, label);
      fprintf(f, "}}");
    }
}

static void write_slice(grt_exec *exec, FILE *f, const grt__trace_rec *r, unsigned pid, unsigned long long tid) {
  fprintf(f, ",\n{\"name\":");
  if (r->deadlock) {
    char label[sizeof r->name + 32];
    snprintf(label, sizeof label, "deadlock: stream %s waits", r->name);
    json_str(f, label);
  } else {
    json_str(f, r->name[0] ? r->name : kind_names[r->kind]);
  }
  fprintf(f, ",\"cat\":");
  json_str(f, r->deadlock ? "deadlock" : kind_names[r->kind]);
  if (r->deadlock) { /* the cycle, in words */
    fprintf(f, ",\"ph\":\"i\",\"s\":\"t\",\"pid\":%u,\"tid\":%llu,\"ts\":", pid, tid);
    json_us(f, r->start_ns);
    fprintf(f, ",\"args\":{\"stream\":%llu,\"cycle\":", (unsigned long long)r->stream_id);
    json_str(f, exec->error_msg);
    fprintf(f, "}}");
    return;
  }
  bool instant = r->end_ns == r->start_ns; /* a marker, not a zero-length slice */
  fprintf(f, ",\"ph\":\"%s\",\"pid\":%u,\"tid\":%llu,\"ts\":", instant ? "i" : "X", pid, tid);
  json_us(f, r->start_ns);
  if (instant) {
    fprintf(f, ",\"s\":\"t\"");
  } else {
    fprintf(f, ",\"dur\":");
    json_us(f, r->end_ns - r->start_ns);
  }
  fprintf(f, ",\"args\":{\"uid\":%llu,\"stream\":%llu}}", (unsigned long long)r->uid,
          (unsigned long long)r->stream_id);
}

static int cmp_uid(const void *a, const void *b) {
  const grt__trace_rec *x = *(const grt__trace_rec *const *)a, *y = *(const grt__trace_rec *const *)b;
  return x->uid < y->uid ? -1 : x->uid > y->uid;
}

static const grt__trace_rec *find_uid(const grt__trace_rec **sorted, size_t n, uint64_t uid) {
  size_t lo = 0, hi = n;
  while (lo < hi) {
    size_t mid = (lo + hi) / 2;
    if (sorted[mid]->uid < uid) lo = mid + 1;
    else hi = mid;
  }
  return lo < n && sorted[lo]->uid == uid ? sorted[lo] : NULL;
}

static void write_flows(grt_exec *exec, FILE *f, const grt__trace_rec **sorted) {
  unsigned long long id = 0;
  for (size_t i = 0; i < exec->trace_n; i++) {
    const grt__trace_rec *r = &exec->trace[i];
    for (size_t k = 0; k < r->flow_n; k++) {
      const grt__trace_rec *src = find_uid(sorted, exec->trace_n, exec->flows[r->flow_first + k]);
      if (!src) continue; /* its record was cleared */
      id++;
      fprintf(f, ",\n{\"name\":\"edge\",\"cat\":\"dependency\",\"ph\":\"s\",\"id\":%llu,\"pid\":1,\"tid\":%llu,\"ts\":",
              id, (unsigned long long)src->stream_id + 1);
      json_us(f, src->end_ns);
      fprintf(f, "},\n{\"name\":\"edge\",\"cat\":\"dependency\",\"ph\":\"f\",\"bp\":\"e\",\"id\":%llu,\"pid\":1,"
                 "\"tid\":%llu,\"ts\":",
              id, (unsigned long long)r->stream_id + 1);
      json_us(f, r->start_ns);
      fprintf(f, "}");
    }
  }
}

grt_status grt_exec_timeline_write_json(grt_exec *exec, FILE *f) {
  if (!exec || !f || exec->magic != GRT__EXEC_MAGIC) return GRT_ERR_INVALID_ARG;
  pthread_mutex_lock(&exec->lock);
  grt_status st = GRT_OK;
  const grt__trace_rec **sorted = malloc((exec->trace_n + 1) * sizeof *sorted);
  if (!sorted) st = GRT_ERR_NOMEM;
  else if (!exec->cfg.record_timeline) st = GRT_ERR_STATE;
  if (!st) {
    for (size_t i = 0; i < exec->trace_n; i++) sorted[i] = &exec->trace[i];
    qsort(sorted, exec->trace_n, sizeof *sorted, cmp_uid);
    fprintf(f, "{\"displayTimeUnit\":\"ns\",\"otherData\":{\"clock\":\"%s\"},\"traceEvents\":[\n",
            exec->cfg.clock == GRT_CLOCK_VIRTUAL ? "virtual" : "threads");
    write_meta(exec, f);
    for (size_t i = 0; i < exec->trace_n; i++) {
      const grt__trace_rec *r = &exec->trace[i];
      write_slice(exec, f, r, 1, (unsigned long long)r->stream_id + 1);
      if (r->engine < GRT_ENGINE_COUNT) write_slice(exec, f, r, 2, engine_tid(r->engine, r->slot));
    }
    write_flows(exec, f, sorted);
    fprintf(f, "\n]}\n");
    if (ferror(f)) st = GRT_ERR_IO;
  }
  free(sorted);
  pthread_mutex_unlock(&exec->lock);
  return st;
}

grt_status grt_exec_timeline_save(grt_exec *exec, const char *path) {
  if (!exec || !path) return GRT_ERR_INVALID_ARG;
  FILE *f = fopen(path, "w");
  if (!f) return GRT_ERR_IO;
  grt_status st = grt_exec_timeline_write_json(exec, f);
  if (fclose(f) && !st) st = GRT_ERR_IO;
  return st;
}

grt_status grt_exec_timeline_clear(grt_exec *exec) {
  if (!exec || exec->magic != GRT__EXEC_MAGIC) return GRT_ERR_INVALID_ARG;
  pthread_mutex_lock(&exec->lock);
  exec->trace_n = 0;
  exec->flows_n = 0;
  pthread_mutex_unlock(&exec->lock);
  return GRT_OK;
}

grt_status grt_exec_timeline_count(grt_exec *exec, size_t *out) {
  if (!exec || !out || exec->magic != GRT__EXEC_MAGIC) return GRT_ERR_INVALID_ARG;
  pthread_mutex_lock(&exec->lock);
  *out = exec->trace_n;
  pthread_mutex_unlock(&exec->lock);
  return GRT_OK;
}
