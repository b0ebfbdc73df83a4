/* safetensors.c — the strict safetensors header reader (gpurt/io.h). The
 * JSON is jansson's to parse (duplicate keys refused); this file checks
 * what the format promises: UTF-8, the types of every field, offsets that
 * tile the byte buffer exactly, sizes that match shape x dtype. */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "io/io_impl.h"

static const struct {
  const char *name;
  unsigned bits;
} dtypes[GRT_DTYPE_COUNT] = {
    {"BOOL", 8}, {"U8", 8},    {"I8", 8},    {"F8_E5M2", 8}, {"F8_E4M3", 8}, {"F8_E8M0", 8}, {"I16", 16},
    {"U16", 16}, {"F16", 16},  {"BF16", 16}, {"I32", 32},    {"U32", 32},    {"F32", 32},    {"F64", 64},
    {"I64", 64}, {"U64", 64},  {"C64", 64},  {"F4", 4},      {"F6_E2M3", 6}, {"F6_E3M2", 6},
};

const char *grt_dtype_name(grt_dtype d) { return (unsigned)d < GRT_DTYPE_COUNT ? dtypes[d].name : "?"; }
unsigned grt_dtype_bits(grt_dtype d) { return (unsigned)d < GRT_DTYPE_COUNT ? dtypes[d].bits : 0; }

grt_status grt_dtype_parse(const char *name, grt_dtype *out) {
  if (!name || !out) return GRT_ERR_INVALID_ARG;
  for (int i = 0; i < GRT_DTYPE_COUNT; i++)
    if (!strcmp(name, dtypes[i].name)) return *out = (grt_dtype)i, GRT_OK;
  return GRT_ERR_NOT_FOUND;
}

grt_status grt__io_fail(grt_io_error *err, grt_status st, const char *tensor, bool has_offset, uint64_t offset,
                        const char *fmt, ...) {
  if (!err) return st;
  memset(err, 0, sizeof *err);
  snprintf(err->tensor, sizeof err->tensor, "%s", tensor ? tensor : "");
  err->has_offset = has_offset;
  err->offset = offset;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(err->reason, sizeof err->reason, fmt, ap);
  va_end(ap);
  return st;
}

grt_status grt_io_error_format(const grt_io_error *err, const char *file, char *buf, size_t buf_size) {
  if (!err || !buf || !buf_size) return GRT_ERR_INVALID_ARG;
  char where[64] = "", what[160] = "";
  if (err->has_offset) snprintf(where, sizeof where, "byte %llu: ", (unsigned long long)err->offset);
  if (err->tensor[0]) snprintf(what, sizeof what, "tensor '%s': ", err->tensor);
  int n = snprintf(buf, buf_size, "%s%s%s%s%s", file ? file : "", file ? ": " : "", where, what, err->reason);
  return n < 0 || (size_t)n >= buf_size ? GRT_ERR_SIZE : GRT_OK;
}

/* Strict UTF-8 (no overlongs, no surrogates, at most U+10FFFF): the offset of the first bad byte, or len. */
static size_t utf8_bad(const unsigned char *s, size_t len) {
  size_t i = 0;
  while (i < len) {
    unsigned c = s[i];
    size_t n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
    if (!n || i + n > len) return i;
    uint32_t cp = n == 1 ? c : c & (0x7fu >> n);
    for (size_t k = 1; k < n; k++) {
      if ((s[i + k] & 0xc0) != 0x80) return i;
      cp = cp << 6 | (s[i + k] & 0x3f);
    }
    static const uint32_t min[5] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < min[n] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return i;
    i += n;
  }
  return len;
}

static int by_offsets(const void *a, const void *b) {
  const grt_st_tensor *x = a, *y = b;
  if (x->begin != y->begin) return x->begin < y->begin ? -1 : 1;
  return x->end < y->end ? -1 : x->end > y->end;
}

/* One tensor entry's fields; `at` is the header's offset in the file for messages. */
static grt_status read_tensor(const char *name, json_t *v, grt_st_tensor *t, uint64_t at, grt_io_error *err) {
  if (!json_is_object(v)) return grt__io_fail(err, GRT_ERR_PARSE, name, true, at, "not an object");
  json_t *dt = json_object_get(v, "dtype"), *shape = json_object_get(v, "shape"),
         *off = json_object_get(v, "data_offsets");
  if (!json_is_string(dt)) return grt__io_fail(err, GRT_ERR_PARSE, name, true, at, "'dtype' is missing or not a string");
  if (grt_dtype_parse(json_string_value(dt), &t->dtype))
    return grt__io_fail(err, GRT_ERR_PARSE, name, true, at, "unknown dtype '%.40s'", json_string_value(dt));
  if (!json_is_array(shape)) return grt__io_fail(err, GRT_ERR_PARSE, name, true, at, "'shape' is missing or not a list");
  if (json_array_size(shape) > GRT_SAFETENSORS_MAX_DIMS)
    return grt__io_fail(err, GRT_ERR_PARSE, name, true, at, "%zu dimensions (at most %d)", json_array_size(shape),
                        GRT_SAFETENSORS_MAX_DIMS);
  t->ndim = (unsigned)json_array_size(shape);
  for (unsigned k = 0; k < t->ndim; k++) {
    json_t *d = json_array_get(shape, k);
    if (!json_is_integer(d) || json_integer_value(d) < 0)
      return grt__io_fail(err, GRT_ERR_PARSE, name, true, at, "shape[%u] is not a non-negative integer", k);
    t->shape[k] = (uint64_t)json_integer_value(d);
  }
  if (!json_is_array(off) || json_array_size(off) != 2 || !json_is_integer(json_array_get(off, 0)) ||
      !json_is_integer(json_array_get(off, 1)) || json_integer_value(json_array_get(off, 0)) < 0 ||
      json_integer_value(json_array_get(off, 1)) < 0)
    return grt__io_fail(err, GRT_ERR_PARSE, name, true, at, "'data_offsets' is not two non-negative integers");
  t->begin = (uint64_t)json_integer_value(json_array_get(off, 0));
  t->end = (uint64_t)json_integer_value(json_array_get(off, 1));
  return GRT_OK;
}

/* Bytes of a tensor by shape and dtype; false on overflow or a part byte (*bits_left set). */
static bool tensor_bytes(const grt_st_tensor *t, uint64_t *bytes, bool *part) {
  uint64_t n = 1;
  for (unsigned k = 0; k < t->ndim; k++)
    if (__builtin_mul_overflow(n, t->shape[k], &n)) return false;
  uint64_t bits;
  if (__builtin_mul_overflow(n, (uint64_t)grt_dtype_bits(t->dtype), &bits)) return false;
  *part = bits % 8 != 0;
  *bytes = bits / 8;
  return true;
}

/* Sorted tensors tile [0, data_size) exactly. */
static grt_status check_tiling(grt_safetensors *st, grt_io_error *err) {
  uint64_t expect = 0, base = st->data_offset;
  for (size_t i = 0; i < st->n; i++) {
    grt_st_tensor *t = &st->tensors[i];
    const char *prev = i ? st->tensors[i - 1].name : NULL;
    if (t->end < t->begin)
      return grt__io_fail(err, GRT_ERR_PARSE, t->name, true, base + t->begin, "data_offsets [%llu, %llu) end before they begin",
                          (unsigned long long)t->begin, (unsigned long long)t->end);
    if (t->begin != expect)
      return grt__io_fail(err, GRT_ERR_PARSE, t->name, true, base + t->begin,
                          "data_offsets begin at %llu, where %s ends at %llu: %s", (unsigned long long)t->begin,
                          prev ? prev : "the buffer's start", (unsigned long long)expect,
                          t->begin < expect ? "the tensors overlap" : "a gap of unowned bytes");
    uint64_t bytes;
    bool part;
    if (!tensor_bytes(t, &bytes, &part))
      return grt__io_fail(err, GRT_ERR_PARSE, t->name, true, base + t->begin, "shape x dtype size overflows 64 bits");
    if (part)
      return grt__io_fail(err, GRT_ERR_PARSE, t->name, true, base + t->begin, "%s elements do not fill whole bytes",
                          grt_dtype_name(t->dtype));
    if (t->end - t->begin != bytes)
      return grt__io_fail(err, GRT_ERR_PARSE, t->name, true, base + t->begin,
                          "data_offsets hold %llu bytes, shape x %s needs %llu", (unsigned long long)(t->end - t->begin),
                          grt_dtype_name(t->dtype), (unsigned long long)bytes);
    t->file_offset = base + t->begin;
    expect = t->end;
  }
  if (expect != st->data_size)
    return grt__io_fail(err, GRT_ERR_PARSE, st->n ? st->tensors[st->n - 1].name : NULL, true, base + expect,
                        expect < st->data_size ? "the tensors end at byte %llu of the buffer, the file %llu bytes later: "
                                                 "trailing bytes no tensor owns"
                                               : "the tensors need %llu bytes of the buffer; the file ends %llu bytes early",
                        (unsigned long long)expect,
                        (unsigned long long)(expect < st->data_size ? st->data_size - expect : expect - st->data_size));
  return GRT_OK;
}

static grt_status read_metadata(grt_safetensors *st, json_t *meta, grt_io_error *err) {
  if (!json_is_object(meta)) return grt__io_fail(err, GRT_ERR_PARSE, "__metadata__", true, 8, "not an object of strings");
  size_t n = json_object_size(meta), i = 0;
  st->meta = calloc(n ? n : 1, sizeof *st->meta);
  if (!st->meta) return grt__io_fail(err, GRT_ERR_NOMEM, NULL, false, 0, "out of host memory");
  const char *k;
  json_t *v;
  json_object_foreach(meta, k, v) {
    if (!json_is_string(v))
      return grt__io_fail(err, GRT_ERR_PARSE, "__metadata__", true, 8, "the value of '%.60s' is not a string", k);
    st->meta[i].key = strdup(k);
    st->meta[i].value = strdup(json_string_value(v));
    st->n_meta = ++i;
    if (!st->meta[i - 1].key || !st->meta[i - 1].value)
      return grt__io_fail(err, GRT_ERR_NOMEM, NULL, false, 0, "out of host memory");
  }
  return GRT_OK;
}

static grt_status read_entries(grt_safetensors *st, json_t *root, grt_io_error *err) {
  size_t n = json_object_size(root);
  st->tensors = calloc(n ? n : 1, sizeof *st->tensors);
  if (!st->tensors) return grt__io_fail(err, GRT_ERR_NOMEM, NULL, false, 0, "out of host memory");
  const char *k;
  json_t *v;
  grt_status s = GRT_OK;
  json_object_foreach(root, k, v) {
    if (!strcmp(k, "__metadata__")) {
      if ((s = read_metadata(st, v, err))) return s;
      continue;
    }
    grt_st_tensor *t = &st->tensors[st->n];
    if (!(t->name = strdup(k))) return grt__io_fail(err, GRT_ERR_NOMEM, NULL, false, 0, "out of host memory");
    st->n++;
    if ((s = read_tensor(k, v, t, 8, err))) return s;
  }
  qsort(st->tensors, st->n, sizeof *st->tensors, by_offsets);
  return check_tiling(st, err);
}

grt_status grt_safetensors_parse(const void *data, size_t len, uint64_t file_size, grt_safetensors **out,
                                 grt_io_error *err) {
  if (!out) return GRT_ERR_INVALID_ARG;
  *out = NULL;
  if (!data && len) return GRT_ERR_INVALID_ARG;
  const unsigned char *p = data;
  if (len < 8 || file_size < 8)
    return grt__io_fail(err, GRT_ERR_PARSE, NULL, true, 0, "%llu bytes: too short for the 8-byte header length",
                        (unsigned long long)(file_size < len ? file_size : len));
  uint64_t n = 0;
  for (int i = 7; i >= 0; i--) n = n << 8 | p[i];
  if (n > GRT_SAFETENSORS_MAX_HEADER)
    return grt__io_fail(err, GRT_ERR_PARSE, NULL, true, 0, "header length %llu is above the format's limit of %u bytes",
                        (unsigned long long)n, GRT_SAFETENSORS_MAX_HEADER);
  if (8 + n > file_size)
    return grt__io_fail(err, GRT_ERR_PARSE, NULL, true, 0, "header length %llu runs past the end of the %llu-byte file",
                        (unsigned long long)n, (unsigned long long)file_size);
  if (8 + n > len) return grt__io_fail(err, GRT_ERR_PARSE, NULL, true, len, "the data ends inside the header");
  size_t bad = utf8_bad(p + 8, (size_t)n);
  if (bad < n) return grt__io_fail(err, GRT_ERR_PARSE, NULL, true, 8 + bad, "the header is not UTF-8");
  if (!n || p[8] != '{') return grt__io_fail(err, GRT_ERR_PARSE, NULL, true, 8, "the header does not begin with '{'");
  json_error_t je;
  json_t *root = json_loadb((const char *)p + 8, (size_t)n, JSON_REJECT_DUPLICATES, &je);
  if (!root)
    return grt__io_fail(err, GRT_ERR_PARSE, NULL, true, 8 + (uint64_t)(je.position > 0 ? je.position : 0),
                        "the header is not JSON: %s", je.text);
  grt_safetensors *st = calloc(1, sizeof *st);
  grt_status s = st ? GRT_OK : grt__io_fail(err, GRT_ERR_NOMEM, NULL, false, 0, "out of host memory");
  if (st) {
    st->data_offset = 8 + n;
    st->data_size = file_size - 8 - n;
    s = json_is_object(root) ? read_entries(st, root, err)
                             : grt__io_fail(err, GRT_ERR_PARSE, NULL, true, 8, "the header is not a JSON object");
  }
  json_decref(root);
  if (s) grt_safetensors_free(st);
  else *out = st;
  return s;
}

grt_status grt_safetensors_open(const char *path, grt_safetensors **out, grt_io_error *err) {
  if (!path || !out) return GRT_ERR_INVALID_ARG;
  *out = NULL;
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return grt__io_fail(err, GRT_ERR_IO, NULL, false, 0, "cannot open: %s", strerror(errno));
  struct stat sb;
  unsigned char len8[8] = {0};
  grt_status s = GRT_OK;
  if (fstat(fd, &sb) || !S_ISREG(sb.st_mode)) s = grt__io_fail(err, GRT_ERR_IO, NULL, false, 0, "not a regular file");
  else if (sb.st_size < 8) s = grt_safetensors_parse(len8, 8, (uint64_t)sb.st_size, out, err);
  else if (pread(fd, len8, 8, 0) != 8) s = grt__io_fail(err, GRT_ERR_IO, NULL, true, 0, "cannot read the header length");
  if (s) return close(fd), s;
  uint64_t n = 0, size = (uint64_t)sb.st_size;
  for (int i = 7; i >= 0; i--) n = n << 8 | len8[i];
  /* a length the parser refuses is refused from the first 8 bytes alone */
  size_t want = n > GRT_SAFETENSORS_MAX_HEADER || 8 + n > size ? 8 : (size_t)(8 + n);
  unsigned char *buf = malloc(want);
  if (!buf) return close(fd), grt__io_fail(err, GRT_ERR_NOMEM, NULL, false, 0, "out of host memory");
  ssize_t got = pread(fd, buf, want, 0);
  close(fd);
  if (got != (ssize_t)want) s = grt__io_fail(err, GRT_ERR_IO, NULL, true, 0, "short read of the header");
  else s = grt_safetensors_parse(buf, want, size, out, err);
  free(buf);
  return s;
}

void grt_safetensors_free(grt_safetensors *st) {
  if (!st) return;
  for (size_t i = 0; i < st->n; i++) free((char *)st->tensors[i].name);
  for (size_t i = 0; i < st->n_meta; i++) free(st->meta[i].key), free(st->meta[i].value);
  free(st->tensors);
  free(st->meta);
  free(st);
}

size_t grt_safetensors_count(const grt_safetensors *st) { return st ? st->n : 0; }
const grt_st_tensor *grt_safetensors_tensor(const grt_safetensors *st, size_t i) {
  return st && i < st->n ? &st->tensors[i] : NULL;
}
uint64_t grt_safetensors_data_offset(const grt_safetensors *st) { return st ? st->data_offset : 0; }
uint64_t grt_safetensors_data_size(const grt_safetensors *st) { return st ? st->data_size : 0; }
size_t grt_safetensors_metadata_count(const grt_safetensors *st) { return st ? st->n_meta : 0; }

grt_status grt_safetensors_metadata(const grt_safetensors *st, size_t i, const char **key, const char **value) {
  if (!st || !key || !value || i >= st->n_meta) return GRT_ERR_INVALID_ARG;
  *key = st->meta[i].key;
  *value = st->meta[i].value;
  return GRT_OK;
}
