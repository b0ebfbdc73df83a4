/* config.c — allocator configuration: defaults and PyTorch's configuration
 * string ("key:value,key:value", as in PYTORCH_CUDA_ALLOC_CONF), read from the
 * API or from the GRT_ALLOC_CONF environment variable. A failed parse leaves
 * the caller's configuration untouched. */
#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc/allocator_impl.h"

void grt_alloc_config_default(grt_alloc_config *cfg) {
  if (!cfg) return;
  memset(cfg, 0, sizeof *cfg);
  cfg->max_split_size = GRT_UNLIMITED;
  cfg->cross_stream = GRT_CROSS_STREAM_NEVER;
}

typedef struct parser {
  const char *p;
  char *err;
  size_t err_size;
} parser;

static grt_status fail(parser *ps, const char *fmt, ...) {
  if (ps->err && ps->err_size) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(ps->err, ps->err_size, fmt, ap);
    va_end(ap);
  }
  return GRT_ERR_PARSE;
}

static void skip_ws(parser *ps) {
  while (isspace((unsigned char)*ps->p)) ps->p++;
}

/* Reads a token of [A-Za-z0-9_.>] into buf. */
static int token(parser *ps, char *buf, size_t n) {
  skip_ws(ps);
  size_t i = 0;
  while (*ps->p && (isalnum((unsigned char)*ps->p) || *ps->p == '_' || *ps->p == '.' || *ps->p == '>')) {
    if (i + 1 >= n) return 0;
    buf[i++] = *ps->p++;
  }
  buf[i] = 0;
  skip_ws(ps);
  return i > 0;
}

static int expect(parser *ps, char c) {
  skip_ws(ps);
  if (*ps->p != c) return 0;
  ps->p++;
  return 1;
}

static int parse_u64(const char *s, uint64_t *out) {
  char *end;
  if (!isdigit((unsigned char)*s)) return 0;
  errno = 0;
  unsigned long long v = strtoull(s, &end, 10);
  if (*end || errno) return 0;
  *out = v;
  return 1;
}

static int is_pow2(uint64_t v) { return v && !(v & (v - 1)); }

static grt_status parse_divisions(parser *ps, grt_alloc_config *c) {
  char k[64], v[64];
  uint64_t div;
  if (!expect(ps, '[')) {
    if (!token(ps, v, sizeof v) || !parse_u64(v, &div) || (div && !is_pow2(div)))
      return fail(ps, "roundup_power2_divisions: '%s' is not 0 or a power of two", v);
    for (int i = 0; i < GRT_ROUNDUP_INTERVALS; i++) c->roundup_power2_divisions[i] = (unsigned)div;
    return GRT_OK;
  }
  int first = 1, last_index = -1;
  for (;;) {
    if (!token(ps, k, sizeof k) || !expect(ps, ':') || !token(ps, v, sizeof v))
      return fail(ps, "roundup_power2_divisions: expected [MB:divisions,...,>:divisions]");
    if (!parse_u64(v, &div) || (div && !is_pow2(div)))
      return fail(ps, "roundup_power2_divisions: '%s' is not 0 or a power of two", v);
    if (!strcmp(k, ">")) {
      for (int i = last_index + 1; i < GRT_ROUNDUP_INTERVALS; i++) c->roundup_power2_divisions[i] = (unsigned)div;
    } else {
      uint64_t mb;
      if (!parse_u64(k, &mb) || !is_pow2(mb))
        return fail(ps, "roundup_power2_divisions: interval '%s' MB is not a power of two", k);
      int index = 63 - __builtin_clzll(mb);
      if (index > GRT_ROUNDUP_INTERVALS - 1) index = GRT_ROUNDUP_INTERVALS - 1;
      if (first)
        for (int i = 0; i < index; i++) c->roundup_power2_divisions[i] = (unsigned)div;
      first = 0;
      c->roundup_power2_divisions[index] = (unsigned)div;
      last_index = index;
    }
    if (expect(ps, ']')) return GRT_OK;
    if (!expect(ps, ',')) return fail(ps, "roundup_power2_divisions: expected ',' or ']'");
  }
}

static int parse_bool(const char *v, int *out) {
  if (!strcmp(v, "True") || !strcmp(v, "true") || !strcmp(v, "1")) return *out = 1, 1;
  if (!strcmp(v, "False") || !strcmp(v, "false") || !strcmp(v, "0")) return *out = 0, 1;
  return 0;
}

static grt_status parse_pair(parser *ps, grt_alloc_config *c) {
  char key[64], v[64];
  if (!token(ps, key, sizeof key)) return fail(ps, "expected a key at '%.20s'", ps->p);
  if (!expect(ps, ':')) return fail(ps, "expected ':' after '%s'", key);
  if (!strcmp(key, "roundup_power2_divisions")) return parse_divisions(ps, c);
  if (!token(ps, v, sizeof v)) return fail(ps, "missing value for '%s'", key);
  if (!strcmp(key, "max_split_size_mb")) {
    uint64_t mb;
    if (!parse_u64(v, &mb)) return fail(ps, "max_split_size_mb: '%s' is not a number", v);
    if (mb <= GRT_LARGE_BUFFER / GRT_MiB) return fail(ps, "max_split_size_mb too small, must be > 20");
    c->max_split_size = mb > (UINT64_MAX / GRT_MiB) ? GRT_UNLIMITED : mb * GRT_MiB;
  } else if (!strcmp(key, "garbage_collection_threshold")) {
    char *end;
    double t = strtod(v, &end);
    if (*end || !(t > 0.0 && t < 1.0))
      return fail(ps, "garbage_collection_threshold: '%s' must be in (0.0, 1.0)", v);
    c->garbage_collection_threshold = t;
  } else if (!strcmp(key, "expandable_segments")) {
    if (!parse_bool(v, &c->expandable_segments)) return fail(ps, "expandable_segments: '%s' is not True/False", v);
  } else if (!strcmp(key, "cross_stream")) {
    if (!strcmp(v, "never"))
      c->cross_stream = GRT_CROSS_STREAM_NEVER;
    else if (!strcmp(v, "with_event"))
      c->cross_stream = GRT_CROSS_STREAM_WITH_EVENT;
    else
      return fail(ps, "cross_stream: '%s' is not never/with_event", v);
  } else if (!strcmp(key, "shards")) {
    uint64_t n;
    if (!parse_u64(v, &n) || n < 1 || n > 64) return fail(ps, "shards: '%s' is not a count in 1..64", v);
    c->shards = (unsigned)n;
  } else if (!strcmp(key, "fit")) {
    if (!strcmp(v, "best"))
      c->fit = GRT_FIT_BEST;
    else if (!strcmp(v, "first"))
      c->fit = GRT_FIT_FIRST;
    else
      return fail(ps, "fit: '%s' is not best/first", v);
  } else if (!strcmp(key, "merge_on_free")) {
    int merge;
    if (!parse_bool(v, &merge)) return fail(ps, "merge_on_free: '%s' is not True/False", v);
    c->no_merge_on_free = !merge;
  } else if (!strcmp(key, "empty_cache_idle_cycles")) {
    uint64_t n;
    if (!parse_u64(v, &n) || n > 1000000) return fail(ps, "empty_cache_idle_cycles: '%s' is not a count", v);
    c->empty_cache_idle_cycles = (unsigned)n;
  } else {
    return fail(ps, "unknown key '%s'", key);
  }
  return GRT_OK;
}

grt_status grt_alloc_config_parse(grt_alloc_config *cfg, const char *text, char *err, size_t err_size) {
  if (!cfg || !text) return GRT_ERR_INVALID_ARG;
  grt_alloc_config c = *cfg;
  parser ps = {text, err, err_size};
  skip_ws(&ps);
  while (*ps.p) {
    grt_status st = parse_pair(&ps, &c);
    if (st) return st;
    if (*ps.p && !expect(&ps, ',')) return fail(&ps, "expected ',' at '%.20s'", ps.p);
    skip_ws(&ps);
  }
  *cfg = c;
  return GRT_OK;
}

grt_status grt_alloc_config_from_env(grt_alloc_config *cfg, char *err, size_t err_size) {
  if (!cfg) return GRT_ERR_INVALID_ARG;
  const char *text = getenv("GRT_ALLOC_CONF");
  if (!text) return GRT_OK;
  return grt_alloc_config_parse(cfg, text, err, err_size);
}
