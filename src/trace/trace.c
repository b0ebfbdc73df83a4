/* trace.c — loading entry points, format detection, accessors and error reporting.
 *
 * grt_trace_load reads the whole file into memory and hands the bytes to
 * grt_trace_load_buffer, which picks the reader (explicit format, else by
 * content: pickle magic byte, native magic line, CSV header) and guarantees
 * that on failure *out is NULL and err says where and why.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "trace/trace_impl.h"

void grt_trace_load_config_default(grt_trace_load_config *cfg) {
  if (!cfg) return;
  memset(cfg, 0, sizeof *cfg);
  cfg->format = GRT_TRACE_FORMAT_AUTO;
  cfg->device = 0;
}

void grt__trace_err_file(grt_trace_error *err, const char *name) {
  if (!err) return;
  snprintf(err->file, sizeof err->file, "%s", name ? name : "<buffer>");
}

void grt__trace_err(grt_trace_error *err, uint64_t line, uint64_t offset, bool has_offset,
                    const char *fmt, ...) {
  if (!err) return;
  err->line = line;
  err->offset = offset;
  err->has_offset = has_offset;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(err->reason, sizeof err->reason, fmt, ap);
  va_end(ap);
}

grt_status grt_trace_error_format(const grt_trace_error *err, char *buf, size_t buf_size) {
  if (!err || !buf || buf_size == 0) return GRT_ERR_INVALID_ARG;
  if (err->has_offset)
    snprintf(buf, buf_size, "%s: byte %llu: %s", err->file, (unsigned long long)err->offset, err->reason);
  else if (err->line)
    snprintf(buf, buf_size, "%s:%llu: %s", err->file, (unsigned long long)err->line, err->reason);
  else
    snprintf(buf, buf_size, "%s: %s", err->file, err->reason);
  return GRT_OK;
}

const char *grt_trace_kind_name(grt_trace_kind kind) {
  static const char *const names[GRT_TRACE_KIND_COUNT] = {
      "alloc",         "free_requested", "free_completed", "segment_alloc", "segment_free",
      "segment_map",   "segment_unmap",  "oom",            "snapshot"};
  return (unsigned)kind < GRT_TRACE_KIND_COUNT ? names[kind] : "unknown";
}

const char *grt_trace_format_name(grt_trace_format format) {
  switch (format) {
    case GRT_TRACE_FORMAT_AUTO: return "auto";
    case GRT_TRACE_FORMAT_NATIVE: return "native";
    case GRT_TRACE_FORMAT_PYTORCH: return "pytorch";
    case GRT_TRACE_FORMAT_RMM: return "rmm";
    case GRT_TRACE_FORMAT_MINIMALLOC: return "minimalloc";
  }
  return "unknown";
}

static bool starts_with(const char *p, size_t n, const char *lit) {
  size_t k = strlen(lit);
  return n >= k && memcmp(p, lit, k) == 0;
}

static grt_trace_format detect(const char *p, size_t n) {
  if (n >= 1 && (unsigned char)p[0] == 0x80) return GRT_TRACE_FORMAT_PYTORCH;
  if (starts_with(p, n, "\xEF\xBB\xBF")) p += 3, n -= 3;
  while (n > 0 && (*p == ' ' || *p == '\t')) p++, n--;
  if (starts_with(p, n, "gpurt-trace")) return GRT_TRACE_FORMAT_NATIVE;
  if (starts_with(p, n, "Thread,Time,Action")) return GRT_TRACE_FORMAT_RMM;
  if (starts_with(p, n, "id,lower,upper,size")) return GRT_TRACE_FORMAT_MINIMALLOC;
  return GRT_TRACE_FORMAT_AUTO;
}

grt_status grt_trace_load_buffer(const void *data, size_t len, const char *name,
                                 const grt_trace_load_config *cfg, grt_trace **out,
                                 grt_trace_error *err) {
  grt_trace_load_config def;
  if (err) memset(err, 0, sizeof *err);
  grt__trace_err_file(err, name);
  if (out) *out = NULL;
  if (!cfg) {
    grt_trace_load_config_default(&def);
    cfg = &def;
  }
  if (!out || (!data && len > 0) || cfg->device < 0) {
    grt__trace_err(err, 0, 0, false, "invalid argument");
    return GRT_ERR_INVALID_ARG;
  }
  if (len == 0) {
    grt__trace_err(err, 0, 0, false, "empty input");
    return GRT_ERR_PARSE;
  }
  grt_trace_format fmt = cfg->format;
  if (fmt == GRT_TRACE_FORMAT_AUTO) fmt = detect(data, len);
  grt_status st;
  switch (fmt) {
    case GRT_TRACE_FORMAT_NATIVE: st = grt__read_native(data, len, out, err); break;
    case GRT_TRACE_FORMAT_PYTORCH: st = grt__read_pytorch(data, len, cfg->device, out, err); break;
    case GRT_TRACE_FORMAT_RMM: st = grt__read_rmm(data, len, out, err); break;
    case GRT_TRACE_FORMAT_MINIMALLOC: st = grt__read_minimalloc(data, len, out, err); break;
    case GRT_TRACE_FORMAT_AUTO:
      grt__trace_err(err, 1, 0, false,
                     "cannot detect the format (expected a pickle, 'gpurt-trace 1', or an RMM or "
                     "minimalloc CSV header)");
      return GRT_ERR_PARSE;
    default:
      grt__trace_err(err, 0, 0, false, "unknown format %d", (int)fmt);
      return GRT_ERR_INVALID_ARG;
  }
  if (st) *out = NULL;
  if (st && err && !err->reason[0]) grt__trace_err(err, 0, 0, false, "%s", grt_status_str(st)); /* e.g. host memory */
  return st;
}

/* Reads a whole file (works for pipes too). */
static grt_status slurp(const char *path, char **data, size_t *len, grt_trace_error *err) {
  FILE *f = fopen(path, "rb");
  if (!f) {
    grt__trace_err(err, 0, 0, false, "cannot open: %s", strerror(errno));
    return GRT_ERR_IO;
  }
  size_t cap = 1 << 16, n = 0;
  char *buf = malloc(cap);
  while (buf) {
    if (n == cap) {
      char *nb = cap <= SIZE_MAX / 2 ? realloc(buf, cap * 2) : NULL;
      if (!nb) {
        free(buf);
        buf = NULL;
        break;
      }
      buf = nb;
      cap *= 2;
    }
    size_t r = fread(buf + n, 1, cap - n, f);
    n += r;
    if (r == 0) break;
  }
  bool bad = ferror(f) != 0;
  fclose(f);
  if (!buf) {
    grt__trace_err(err, 0, 0, false, "out of host memory reading the file");
    return GRT_ERR_NOMEM;
  }
  if (bad) {
    free(buf);
    grt__trace_err(err, 0, n, false, "read error");
    return GRT_ERR_IO;
  }
  *data = buf;
  *len = n;
  return GRT_OK;
}

grt_status grt_trace_load(const char *path, const grt_trace_load_config *cfg, grt_trace **out,
                          grt_trace_error *err) {
  if (err) memset(err, 0, sizeof *err);
  if (out) *out = NULL;
  if (!path || !out) {
    grt__trace_err(err, 0, 0, false, "invalid argument");
    return GRT_ERR_INVALID_ARG;
  }
  grt__trace_err_file(err, path);
  char *data;
  size_t len;
  grt_status st = slurp(path, &data, &len, err);
  if (st) return st;
  st = grt_trace_load_buffer(data, len, path, cfg, out, err);
  free(data);
  return st;
}

grt_status grt_trace_destroy(grt_trace *trace) {
  grt__trace_free(trace);
  return GRT_OK;
}

grt_status grt_trace_get_info(const grt_trace *t, grt_trace_info *out) {
  if (!t || !out) return GRT_ERR_INVALID_ARG;
  memset(out, 0, sizeof *out);
  out->format = t->format;
  out->device = t->device;
  out->n_devices = t->n_devices;
  out->events = t->events;
  out->n_events = t->n_events;
  out->n_ids = t->n_ids;
  out->streams = t->streams;
  out->n_streams = t->n_streams;
  out->segments = t->segments;
  out->n_segments = t->n_segments;
  out->settings = t->settings;
  out->has_segments = t->format != GRT_TRACE_FORMAT_PYTORCH || t->has_segments;
  out->has_traces = t->format != GRT_TRACE_FORMAT_PYTORCH || t->has_traces;
  memcpy(out->count, t->count, sizeof out->count);
  out->event_stack = t->event_stack;
  out->n_stacks = t->n_stacks;
  out->frames = t->frames;
  out->n_frames = t->n_frames;
  out->frames_skipped = t->frames_skipped;
  out->stack_bytes = grt__stacks_bytes(t);
  return GRT_OK;
}
