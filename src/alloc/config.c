/* config.c — allocator configuration: defaults and PyTorch's configuration
 * string (PYTORCH_CUDA_ALLOC_CONF), read from the API or the environment.
 *
 * The syntax is PyTorch's tokenizer's (c10/core/AllocatorConfig.h,
 * ConfigTokenizer): the text splits into words and the four marks ',' ':' '['
 * ']'; whitespace is dropped wherever it stands. Settings are "key:value"
 * separated by ',' (a trailing ',' is allowed); list values are "[a:b,...]".
 * Keys and the booleans True/False are case-sensitive, as in PyTorch. A key
 * named twice keeps its last value. Numbers are plain decimals (PyTorch's
 * stoull/stod accept trailing junk; the model refuses it).
 *
 * Every key of PyTorch's own parsers, 1.13 to the newest, is accepted with
 * PyTorch's limits (c10/cuda/CUDAAllocatorConfig.cpp,
 * c10/core/AllocatorConfig.cpp; docs/ALLOCATORS.md, "The configuration
 * string", says what each does in the model). Keys without effect on the
 * model's decisions are accepted with a note. A value whose effect the model
 * cannot reproduce fails with GRT_ERR_UNSUPPORTED rather than be ignored, so
 * a replay never silently differs from what the string asked for. Any
 * failure leaves the caller's configuration untouched. */
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
  cfg->max_non_split_rounding = GRT_LARGE_BUFFER;
  cfg->roundup_bypass_threshold = GRT_UNLIMITED;
  cfg->cross_stream = GRT_CROSS_STREAM_NEVER;
}

/* ---- tokens ---- */

#define TOKEN_MAX 128 /* longest word, with its terminator */

typedef enum { T_WORD, T_COLON, T_COMMA, T_OPEN, T_CLOSE, T_END } token_kind;

typedef struct token {
  token_kind kind;
  char text[TOKEN_MAX];
} token;

typedef struct parser {
  const char *p;
  char *err;
  size_t err_size;
} parser;

static grt_status fail_with(parser *ps, grt_status st, const char *fmt, va_list ap) {
  if (ps->err && ps->err_size) vsnprintf(ps->err, ps->err_size, fmt, ap);
  return st;
}

static grt_status fail(parser *ps, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  grt_status st = fail_with(ps, GRT_ERR_PARSE, fmt, ap);
  va_end(ap);
  return st;
}

static grt_status unsupported(parser *ps, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  grt_status st = fail_with(ps, GRT_ERR_UNSUPPORTED, fmt, ap);
  va_end(ap);
  return st;
}

static int is_mark(char ch) { return ch == ',' || ch == ':' || ch == '[' || ch == ']'; }

static void skip_ws(parser *ps) {
  while (isspace((unsigned char)*ps->p)) ps->p++;
}

/* A word runs to the next mark or the end; whitespace inside it is dropped,
 * as PyTorch's tokenizer drops it. */
static grt_status read_word(parser *ps, token *t) {
  size_t n = 0;
  const char *start = ps->p;
  for (; *ps->p && !is_mark(*ps->p); ps->p++) {
    if (isspace((unsigned char)*ps->p)) continue;
    if (n + 1 >= TOKEN_MAX) return fail(ps, "'%.20s...' is longer than %d characters", start, TOKEN_MAX - 1);
    t->text[n++] = *ps->p;
  }
  t->text[n] = 0;
  t->kind = T_WORD;
  return GRT_OK;
}

static grt_status next(parser *ps, token *t) {
  static const char marks[] = ":,[]";
  skip_ws(ps);
  if (!*ps->p) {
    t->kind = T_END;
    t->text[0] = 0;
    return GRT_OK;
  }
  if (!is_mark(*ps->p)) return read_word(ps, t);
  /* marks[] lists the marks in token_kind's order */
  t->kind = (token_kind)(strchr(marks, *ps->p) - marks + T_COLON);
  t->text[0] = *ps->p++;
  t->text[1] = 0;
  return GRT_OK;
}

/* How a message names a token: 'text', or "the end". */
static const char *shown(const token *t, char *buf, size_t n) {
  if (t->kind == T_END) return "the end";
  snprintf(buf, n, "'%s'", t->text);
  return buf;
}

/* The value after "key:": one word (a list is an error here). */
static grt_status value(parser *ps, const char *key, token *v) {
  grt_status st = next(ps, v);
  if (st) return st;
  if (v->kind == T_OPEN) return fail(ps, "'%s' takes one value, not a list", key);
  if (v->kind != T_WORD) return fail(ps, "missing value for '%s'", key);
  return GRT_OK;
}

/* ---- values ---- */

/* 1: a decimal that fits in 64 bits, 0: not a number, -1: too large. */
static int parse_u64(const char *s, uint64_t *out) {
  char *end;
  if (!isdigit((unsigned char)*s)) return 0;
  errno = 0;
  unsigned long long v = strtoull(s, &end, 10);
  if (*end) return 0;
  if (errno) return -1;
  *out = v;
  return 1;
}

static int is_pow2(uint64_t v) { return v && !(v & (v - 1)); }

/* text as a count; unit completes "is not a number" (" of MB" or ""). */
static grt_status count_of(parser *ps, const char *key, const char *text, const char *unit, uint64_t *out) {
  int r = parse_u64(text, out);
  if (r == 0) return fail(ps, "%s: '%s' is not a number%s", key, text, unit);
  if (r < 0) return fail(ps, "%s: '%s' is out of range", key, text);
  return GRT_OK;
}

static grt_status count_value(parser *ps, const char *key, const char *unit, token *v, uint64_t *out) {
  grt_status st = value(ps, key, v);
  return st ? st : count_of(ps, key, v->text, unit, out);
}

/* MB to bytes; a size beyond 64 bits is unlimited. */
static uint64_t mb_bytes(uint64_t mb) { return mb > GRT_UNLIMITED / GRT_MiB ? GRT_UNLIMITED : mb * GRT_MiB; }

static grt_status real_value(parser *ps, const char *key, token *v, double *out) {
  grt_status st = value(ps, key, v);
  if (st) return st;
  char *end;
  errno = 0;
  *out = strtod(v->text, &end);
  if (end == v->text || *end || errno == ERANGE) return fail(ps, "%s: '%s' is not a number", key, v->text);
  return GRT_OK;
}

/* PyTorch's booleans: exactly True or False. */
static grt_status bool_value(parser *ps, const char *key, int *out) {
  token v;
  grt_status st = value(ps, key, &v);
  if (st) return st;
  if (!strcmp(v.text, "True")) return *out = 1, GRT_OK;
  if (!strcmp(v.text, "False")) return *out = 0, GRT_OK;
  return fail(ps, "%s: '%s' is not True or False", key, v.text);
}

/* ---- the keys ---- */

typedef struct key_def key_def;
/* Parses the value after "name:" into c; *note: the key's note, or NULL. */
typedef grt_status (*key_fn)(parser *ps, grt_alloc_config *c, const key_def *k, const char **note);

struct key_def {
  const char *name;
  key_fn parse;
  const char *note; /* for keys that only take a note */
};

static const char NOTE_PINNED[] = "accepted, no effect on device allocations (pinned host memory)";
static const char NOTE_GC[] = "no effect without a memory fraction: PyTorch collects only while "
                              "per_process_memory_fraction (or torch.cuda.set_per_process_memory_fraction) "
                              "is below 1";

static grt_status key_max_split_size(parser *ps, grt_alloc_config *c, const key_def *k, const char **note) {
  token v;
  uint64_t mb = 0;
  grt_status st = count_value(ps, k->name, " of MB", &v, &mb);
  if (st) return st;
  /* > 20 as c10/cuda/CUDAAllocatorConfig.cpp requires; c10/core/AllocatorConfig.cpp
     also takes 20, which the model's allocator does not (docs/ALLOCATORS.md) */
  if (mb <= GRT_LARGE_BUFFER / GRT_MiB) return fail(ps, "%s: %s MB is too small, must be > 20", k->name, v.text);
  c->max_split_size = mb_bytes(mb);
  *note = NULL;
  return GRT_OK;
}

static grt_status key_max_non_split_rounding(parser *ps, grt_alloc_config *c, const key_def *k, const char **note) {
  token v;
  uint64_t mb = 0;
  grt_status st = count_value(ps, k->name, " of MB", &v, &mb);
  if (st) return st;
  if (mb < GRT_LARGE_BUFFER / GRT_MiB) return fail(ps, "%s: %s MB is too small, must be >= 20", k->name, v.text);
  c->max_non_split_rounding = mb_bytes(mb);
  *note = NULL;
  return GRT_OK;
}

static grt_status key_gc_threshold(parser *ps, grt_alloc_config *c, const key_def *k, const char **note) {
  token v;
  double t;
  grt_status st = real_value(ps, k->name, &v, &t);
  if (st) return st;
  if (!(t > 0.0 && t < 1.0)) return fail(ps, "%s: %s is not in (0, 1)", k->name, v.text);
  c->garbage_collection_threshold = t;
  *note = NULL; /* its note depends on the final memory fraction: see finish() */
  return GRT_OK;
}

/* The entries 0..15 hold the intervals [2^i, 2^(i+1)) MB (0: also below,
 * 15: also above). An entry "M:d" sets M's interval, the first one also
 * every interval below it, and ">:d" those after the last one set. */
static grt_status divisions_entry(parser *ps, grt_alloc_config *c, const char *key, int *first, int *last) {
  token iv, dv;
  uint64_t div, mb;
  grt_status st;
  char b[TOKEN_MAX + 2];
  if ((st = next(ps, &iv))) return st;
  if (iv.kind == T_END) return fail(ps, "%s: missing ']'", key);
  if (iv.kind != T_WORD) return fail(ps, "%s: expected MB:divisions, found %s", key, shown(&iv, b, sizeof b));
  if ((st = next(ps, &dv))) return st;
  if (dv.kind != T_COLON) return fail(ps, "%s: expected ':' after '%s'", key, iv.text);
  if ((st = next(ps, &dv))) return st;
  if (dv.kind != T_WORD) return fail(ps, "%s: missing divisions for '%s'", key, iv.text);
  if ((st = count_of(ps, key, dv.text, "", &div))) return st;
  if (div && !is_pow2(div)) return fail(ps, "%s: %s for '%s' is not 0 or a power of two", key, dv.text, iv.text);
  if (div > 1u << 31) return fail(ps, "%s: %s for '%s' is more than 2147483648", key, dv.text, iv.text);
  if (!strcmp(iv.text, ">")) {
    for (int i = *last + 1; i < GRT_ROUNDUP_INTERVALS; i++) c->roundup_power2_divisions[i] = (unsigned)div;
    return GRT_OK;
  }
  if ((st = count_of(ps, key, iv.text, " of MB", &mb))) return st;
  if (!is_pow2(mb)) return fail(ps, "%s: interval %s MB is not a power of two", key, iv.text);
  int index = 63 - __builtin_clzll(mb);
  if (index > GRT_ROUNDUP_INTERVALS - 1) index = GRT_ROUNDUP_INTERVALS - 1;
  for (int i = *first ? 0 : index; i <= index; i++) c->roundup_power2_divisions[i] = (unsigned)div;
  *first = 0;
  *last = index;
  return GRT_OK;
}

static grt_status divisions_list(parser *ps, grt_alloc_config *c, const char *key) {
  int first = 1, last = -1;
  token t;
  char b[TOKEN_MAX + 2];
  for (;;) {
    const char *before = ps->p;
    grt_status st = next(ps, &t);
    if (st) return st;
    if (t.kind == T_CLOSE) return GRT_OK; /* "[]" and a trailing ',' too, as in PyTorch */
    ps->p = before;
    if ((st = divisions_entry(ps, c, key, &first, &last)) || (st = next(ps, &t))) return st;
    if (t.kind == T_CLOSE) return GRT_OK;
    if (t.kind == T_END) return fail(ps, "%s: missing ']'", key);
    if (t.kind != T_COMMA) return fail(ps, "%s: expected ',' or ']', found %s", key, shown(&t, b, sizeof b));
  }
}

static grt_status key_divisions(parser *ps, grt_alloc_config *c, const key_def *k, const char **note) {
  token v;
  uint64_t div = 0;
  const char *before = ps->p;
  grt_status st = next(ps, &v);
  if (st) return st;
  *note = NULL;
  if (v.kind == T_OPEN) return divisions_list(ps, c, k->name);
  ps->p = before;
  if ((st = count_value(ps, k->name, "", &v, &div))) return st;
  if (!div) return fail(ps, "%s: 0 is not a power of two (0 is taken only inside a [MB:divisions] list)", k->name);
  if (!is_pow2(div)) return fail(ps, "%s: %s is not a power of two", k->name, v.text);
  if (div > 1u << 31) return fail(ps, "%s: %s is more than 2147483648", k->name, v.text);
  for (int i = 0; i < GRT_ROUNDUP_INTERVALS; i++) c->roundup_power2_divisions[i] = (unsigned)div;
  return GRT_OK;
}

static grt_status key_bypass(parser *ps, grt_alloc_config *c, const key_def *k, const char **note) {
  token v;
  uint64_t mb = 0;
  grt_status st = count_value(ps, k->name, " of MB", &v, &mb);
  if (st) return st;
  c->roundup_bypass_threshold = mb_bytes(mb);
  *note = NULL;
  return GRT_OK;
}

static grt_status key_expandable(parser *ps, grt_alloc_config *c, const key_def *k, const char **note) {
  *note = NULL;
  return bool_value(ps, k->name, &c->expandable_segments);
}

static grt_status key_backend(parser *ps, grt_alloc_config *c, const key_def *k, const char **note) {
  token v;
  grt_status st = value(ps, k->name, &v);
  (void)c;
  if (st) return st;
  if (!strcmp(v.text, "native")) {
    *note = "native is the caching allocator, the model's default";
    return GRT_OK;
  }
  /* the driver's pool serves such a run: the caching model's decisions would
     be another allocator's, so refuse rather than replay the wrong one */
  if (!strcmp(v.text, "cudaMallocAsync") || !strcmp(v.text, "hipMallocAsync"))
    return unsupported(ps,
                       "%s: %s runs without the caching allocator; model it with policy 'async' and leave "
                       "this key out",
                       k->name, v.text);
  return fail(ps, "%s: '%s' is not native, cudaMallocAsync or hipMallocAsync", k->name, v.text);
}

/* A boolean with no effect on the model: only a note. */
static grt_status key_note_bool(parser *ps, grt_alloc_config *c, const key_def *k, const char **note) {
  int b;
  (void)c;
  *note = k->note;
  return bool_value(ps, k->name, &b);
}

static grt_status key_register_threads(parser *ps, grt_alloc_config *c, const key_def *k, const char **note) {
  token v;
  uint64_t n = 0;
  grt_status st = count_value(ps, k->name, "", &v, &n);
  (void)c;
  if (st) return st;
  if (!is_pow2(n)) return fail(ps, "%s: %s is not a power of two", k->name, v.text);
  if (n > 128) return fail(ps, "%s: %s is more than 128", k->name, v.text);
  *note = k->note;
  return GRT_OK;
}

/* A size in MB for the pinned host allocator: only a note. PyTorch wants
 * the reserved segment's size positive; the other sizes may be 0. */
static grt_status key_pinned_mb(parser *ps, grt_alloc_config *c, const key_def *k, const char **note) {
  token v;
  uint64_t mb = 0;
  grt_status st = count_value(ps, k->name, " of MB", &v, &mb);
  (void)c;
  if (st) return st;
  if (!mb && !strcmp(k->name, "pinned_reserve_segment_size_mb"))
    return fail(ps, "%s: %s MB is too small, must be > 0", k->name, v.text);
  *note = k->note;
  return GRT_OK;
}

static grt_status key_fraction(parser *ps, grt_alloc_config *c, const key_def *k, const char **note) {
  token v;
  double f;
  grt_status st = real_value(ps, k->name, &v, &f);
  if (st) return st;
  if (!(f >= 0.0 && f <= 1.0)) return fail(ps, "%s: %s is not in [0, 1]", k->name, v.text);
  if (f == 0.0)
    return unsupported(ps, "%s: %s lets no allocation succeed, which the model does not reproduce; use (0, 1]", k->name,
                       v.text);
  /* PyTorch sets no limit at 1 (its default), so garbage collection stays off */
  c->memory_fraction = f < 1.0 ? f : 0.0;
  *note = f < 1.0 ? NULL : "1 sets no limit (PyTorch's default)";
  return GRT_OK;
}

static grt_status key_large_segment(parser *ps, grt_alloc_config *c, const key_def *k, const char **note) {
  token v;
  uint64_t mb = 0;
  grt_status st = count_value(ps, k->name, " of MB", &v, &mb);
  (void)c;
  if (st) return st;
  if (mb <= GRT_MIN_LARGE_ALLOC / GRT_MiB) return fail(ps, "%s: %s MB is too small, must be > 10", k->name, v.text);
  if (mb != GRT_LARGE_BUFFER / GRT_MiB)
    return unsupported(ps, "%s: %s MB is not modelled: the model's large segments are 20 MiB (PyTorch's default)",
                       k->name, v.text);
  *note = "20 is PyTorch's default, no change";
  return GRT_OK;
}

/* ---- gpurt's own keys ---- */

/* gpurt's keys keep their lenient booleans (true/1, false/0 too). */
static grt_status key_merge(parser *ps, grt_alloc_config *c, const key_def *k, const char **note) {
  token v;
  grt_status st = value(ps, k->name, &v);
  if (st) return st;
  *note = NULL;
  if (!strcmp(v.text, "True") || !strcmp(v.text, "true") || !strcmp(v.text, "1"))
    return c->no_merge_on_free = 0, GRT_OK;
  if (!strcmp(v.text, "False") || !strcmp(v.text, "false") || !strcmp(v.text, "0"))
    return c->no_merge_on_free = 1, GRT_OK;
  return fail(ps, "%s: '%s' is not True/False", k->name, v.text);
}

static grt_status key_cross_stream(parser *ps, grt_alloc_config *c, const key_def *k, const char **note) {
  token v;
  grt_status st = value(ps, k->name, &v);
  if (st) return st;
  *note = NULL;
  if (!strcmp(v.text, "never")) return c->cross_stream = GRT_CROSS_STREAM_NEVER, GRT_OK;
  if (!strcmp(v.text, "with_event")) return c->cross_stream = GRT_CROSS_STREAM_WITH_EVENT, GRT_OK;
  return fail(ps, "%s: '%s' is not never/with_event", k->name, v.text);
}

static grt_status key_fit(parser *ps, grt_alloc_config *c, const key_def *k, const char **note) {
  token v;
  grt_status st = value(ps, k->name, &v);
  if (st) return st;
  *note = NULL;
  if (!strcmp(v.text, "best")) return c->fit = GRT_FIT_BEST, GRT_OK;
  if (!strcmp(v.text, "first")) return c->fit = GRT_FIT_FIRST, GRT_OK;
  return fail(ps, "%s: '%s' is not best/first", k->name, v.text);
}

static grt_status key_shards(parser *ps, grt_alloc_config *c, const key_def *k, const char **note) {
  token v;
  uint64_t n = 0;
  grt_status st = value(ps, k->name, &v);
  if (st) return st;
  if (parse_u64(v.text, &n) != 1 || n < 1 || n > 64)
    return fail(ps, "%s: '%s' is not a count in 1..64", k->name, v.text);
  c->shards = (unsigned)n;
  *note = NULL;
  return GRT_OK;
}

static grt_status key_idle_cycles(parser *ps, grt_alloc_config *c, const key_def *k, const char **note) {
  token v;
  uint64_t n = 0;
  grt_status st = value(ps, k->name, &v);
  if (st) return st;
  if (parse_u64(v.text, &n) != 1 || n > 1000000) return fail(ps, "%s: '%s' is not a count", k->name, v.text);
  c->empty_cache_idle_cycles = (unsigned)n;
  *note = NULL;
  return GRT_OK;
}

#define NOTE_LOCK "accepted, no effect on the model's decisions (PyTorch only drops its lock around cudaMalloc)"

/* ROCm builds spell "cuda" as "hip" in two keys; PyTorch takes both. */
static const key_def keys[] = {
    {"max_split_size_mb", key_max_split_size, NULL},
    {"max_non_split_rounding_mb", key_max_non_split_rounding, NULL},
    {"garbage_collection_threshold", key_gc_threshold, NULL},
    {"roundup_power2_divisions", key_divisions, NULL},
    {"roundup_bypass_threshold_mb", key_bypass, NULL},
    {"expandable_segments", key_expandable, NULL},
    {"per_process_memory_fraction", key_fraction, NULL},
    {"large_segment_size_mb", key_large_segment, NULL},
    {"backend", key_backend, NULL},
    {"release_lock_on_cudamalloc", key_note_bool, NOTE_LOCK},
    {"release_lock_on_hipmalloc", key_note_bool, NOTE_LOCK},
    {"graph_capture_record_stream_reuse", key_note_bool,
     "accepted, not modelled (it lets blocks freed with record_stream during a CUDA graph capture be reused; "
     "the model treats such frees as outside a capture)"},
    {"throw_on_cudamalloc_oom", key_note_bool,
     "accepted, not modelled (PyTorch raises the OOM before a cudaMalloc it expects to fail; the model asks "
     "its device)"},
    {"pinned_use_cuda_host_register", key_note_bool, NOTE_PINNED},
    {"pinned_use_hip_host_register", key_note_bool, NOTE_PINNED},
    {"pinned_num_register_threads", key_register_threads, NOTE_PINNED},
    {"pinned_use_background_threads", key_note_bool, NOTE_PINNED},
    {"pinned_reserve_segment_size_mb", key_pinned_mb, NOTE_PINNED},
    {"pinned_max_round_threshold_mb", key_pinned_mb, NOTE_PINNED},
    {"pinned_max_cached_size_mb", key_pinned_mb, NOTE_PINNED},
    {"pinned_free_catch_all", key_note_bool, NOTE_PINNED},
    {"cross_stream", key_cross_stream, NULL},
    {"fit", key_fit, NULL},
    {"merge_on_free", key_merge, NULL},
    {"empty_cache_idle_cycles", key_idle_cycles, NULL},
    {"shards", key_shards, NULL},
};

#define N_KEYS ((int)(sizeof keys / sizeof keys[0]))

static int find_key(const char *name) {
  for (int i = 0; i < N_KEYS; i++)
    if (!strcmp(keys[i].name, name)) return i;
  return -1;
}

/* ---- the string ---- */

/* Each key's latest note, listed in the order keys first appear. */
typedef struct notes {
  const char *note[N_KEYS];
  int seen[N_KEYS];
  int order[N_KEYS];
  int n;
} notes;

static void note_key(notes *ns, int k, const char *note) {
  if (!ns->seen[k]) ns->order[ns->n++] = k;
  ns->seen[k] = 1;
  ns->note[k] = note;
}

static grt_status parse_setting(parser *ps, const token *key, grt_alloc_config *c, notes *ns) {
  char b[TOKEN_MAX + 2];
  token colon;
  if (key->kind != T_WORD) return fail(ps, "expected a key, found %s", shown(key, b, sizeof b));
  int k = find_key(key->text);
  if (k < 0) return fail(ps, "unknown key '%s'", key->text);
  grt_status st = next(ps, &colon);
  if (st) return st;
  if (colon.kind != T_COLON) return fail(ps, "expected ':' after '%s'", key->text);
  const char *note = NULL;
  if ((st = keys[k].parse(ps, c, &keys[k], &note))) return st;
  note_key(ns, k, note);
  return GRT_OK;
}

static grt_status parse_all(parser *ps, grt_alloc_config *c, notes *ns) {
  token t;
  char b[TOKEN_MAX + 2];
  for (;;) {
    grt_status st = next(ps, &t);
    if (st) return st;
    if (t.kind == T_END) return GRT_OK;
    char key[TOKEN_MAX];
    snprintf(key, sizeof key, "%s", t.text);
    if ((st = parse_setting(ps, &t, c, ns)) || (st = next(ps, &t))) return st;
    if (t.kind == T_END) return GRT_OK;
    if (t.kind != T_COMMA)
      return fail(ps, "expected ',' after the value of '%s', found %s", key, shown(&t, b, sizeof b));
  }
}

/* The threshold's note: PyTorch garbage-collects only under a memory
 * fraction (DeviceCachingAllocator::malloc, allowed_memory_maximum). */
static void finish(const grt_alloc_config *c, notes *ns) {
  int k = find_key("garbage_collection_threshold");
  if (ns->seen[k] && c->garbage_collection_threshold > 0.0 && c->memory_fraction == 0.0) ns->note[k] = NOTE_GC;
}

/* One "key: note" line per note; a line that does not fit is left out. */
static void write_notes(const notes *ns, char *out, size_t size) {
  size_t used = 0;
  if (!out || !size) return;
  out[0] = 0;
  for (int i = 0; i < ns->n; i++) {
    int k = ns->order[i];
    if (!ns->note[k]) continue;
    size_t len = strlen(keys[k].name) + 2 + strlen(ns->note[k]) + 1;
    if (used + len + 1 > size) continue;
    used += (size_t)snprintf(out + used, size - used, "%s: %s\n", keys[k].name, ns->note[k]);
  }
}

grt_status grt_alloc_config_parse_notes(grt_alloc_config *cfg, const char *text, char *err, size_t err_size,
                                        char *notes_out, size_t notes_size) {
  if (notes_out && notes_size) notes_out[0] = 0;
  if (!cfg || !text) return GRT_ERR_INVALID_ARG;
  grt_alloc_config c = *cfg;
  parser ps = {text, err, err_size};
  notes ns;
  memset(&ns, 0, sizeof ns);
  grt_status st = parse_all(&ps, &c, &ns);
  if (st) return st;
  finish(&c, &ns);
  write_notes(&ns, notes_out, notes_size);
  *cfg = c;
  return GRT_OK;
}

grt_status grt_alloc_config_parse(grt_alloc_config *cfg, const char *text, char *err, size_t err_size) {
  return grt_alloc_config_parse_notes(cfg, text, err, err_size, NULL, 0);
}

/* gpurt's own variable first; then PyTorch's, in the order its newest
 * versions read them (CUDAAllocatorConfig::instance). */
static const char *const env_vars[] = {"GRT_ALLOC_CONF", "PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_HIP_ALLOC_CONF",
                                       "PYTORCH_ALLOC_CONF"};

grt_status grt_alloc_config_from_env(grt_alloc_config *cfg, char *err, size_t err_size) {
  if (!cfg) return GRT_ERR_INVALID_ARG;
  for (size_t i = 0; i < sizeof env_vars / sizeof env_vars[0]; i++) {
    const char *text = getenv(env_vars[i]);
    if (!text) continue;
    char why[256] = "";
    grt_status st = grt_alloc_config_parse(cfg, text, why, sizeof why);
    if (st && err && err_size) snprintf(err, err_size, "%s: %s", env_vars[i], why);
    return st;
  }
  return GRT_OK;
}
