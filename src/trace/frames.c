/* frames.c — call stacks: interning strings, frames and stacks; looking a stack up; folding it.
 *
 * Interning. A PyTorch snapshot repeats the same few hundred stacks across
 * all its events, so the trace keeps each distinct string once (an arena of
 * NUL-terminated strings), each distinct frame (name, filename, line) once
 * and each distinct stack (a sequence of frame indices) once. Three hash sets
 * (grt__itab, open addressing over 64-bit hashes, content compared on a hash
 * match) find an existing entry; a new one is appended. Every table grows
 * only when new content arrives, so it is bounded by the input's size.
 * While building, frames hold string indices (the arena may move); finishing
 * turns them into pointers and copies each stack's frames contiguously, so
 * grt_trace_stack hands out one array.
 *
 * Folding (grt_trace_frames_fold) follows the rule documented in trace.h and
 * docs/TRACE_FORMAT.md: plumbing dropped, the user's Python frames first.
 * It is pure: it only reads the frames it is given.
 */
#include <stdlib.h>
#include <string.h>

#include "trace/trace_impl.h"

#define MAX_INDEX (UINT32_MAX - 1) /* indices are stored + 1 in the hash sets */

static uint64_t mix64(uint64_t k) {
  k ^= k >> 33;
  k *= 0xff51afd7ed558ccdULL;
  k ^= k >> 33;
  k *= 0xc4ceb9fe1a85ec53ULL;
  k ^= k >> 33;
  return k;
}

uint64_t grt__hash_bytes(const void *data, size_t n, uint64_t h) {
  const char *p = data;
  h = mix64(h ^ (n * 0x9e3779b97f4a7c15ULL));
  for (; n >= 8; p += 8, n -= 8) {
    uint64_t w;
    memcpy(&w, p, 8);
    h = (h ^ w) * 0x9e3779b97f4a7c15ULL; /* one multiply a word: the final mix spreads it */
    h ^= h >> 32;
  }
  uint64_t w = 0;
  memcpy(&w, p, n);
  return mix64(h ^ w);
}

/* ---- the hash sets ---- */

typedef bool (*itab_eq)(const void *ctx, uint32_t index);

static void itab_free(grt__itab *t) {
  free(t->slot);
  free(t->hash);
  memset(t, 0, sizeof *t);
}

/* Room for one more entry at a load of at most 1/2. */
static bool itab_reserve(grt__itab *t) {
  size_t cap = t->slot ? t->mask + 1 : 0;
  if ((t->count + 1) * 2 <= cap) return true;
  size_t nc = cap ? cap * 2 : 64;
  if (nc > SIZE_MAX / sizeof(uint64_t)) return false;
  uint32_t *slot = calloc(nc, sizeof *slot);
  uint64_t *hash = malloc(nc * sizeof *hash);
  if (!slot || !hash) {
    free(slot);
    free(hash);
    return false;
  }
  for (size_t i = 0; i < cap; i++) {
    if (!t->slot[i]) continue;
    size_t j = (size_t)t->hash[i] & (nc - 1);
    while (slot[j]) j = (j + 1) & (nc - 1);
    slot[j] = t->slot[i];
    hash[j] = t->hash[i];
  }
  free(t->slot);
  free(t->hash);
  t->slot = slot;
  t->hash = hash;
  t->mask = nc - 1;
  return true;
}

/* The index of the entry with hash h that eq accepts, or UINT32_MAX; *pos is
 * the free slot where a new entry with that hash goes. */
static uint32_t itab_find(const grt__itab *t, uint64_t h, itab_eq eq, const void *ctx, size_t *pos) {
  size_t j = (size_t)h & t->mask;
  for (; t->slot[j]; j = (j + 1) & t->mask)
    if (t->hash[j] == h && eq(ctx, t->slot[j] - 1)) return t->slot[j] - 1;
  *pos = j;
  return UINT32_MAX;
}

static void itab_put(grt__itab *t, size_t pos, uint64_t h, uint32_t index) {
  t->slot[pos] = index + 1;
  t->hash[pos] = h;
  t->count++;
}

/* ---- strings ---- */

typedef struct str_key {
  const grt__tb *b;
  grt__slice s;
} str_key;

static bool str_eq(const void *ctx, uint32_t i) {
  const str_key *k = ctx;
  const grt__stacks_build *sb = &k->b->sb;
  return sb->str[i].len == k->s.n && (k->s.n == 0 || memcmp(k->b->t->strs + sb->str[i].off, k->s.p, k->s.n) == 0);
}

static grt_status intern_str(grt__tb *b, grt__slice s, uint32_t *index) {
  grt__stacks_build *sb = &b->sb;
  grt_trace *t = b->t;
  if (s.n && memchr(s.p, '\0', s.n)) return GRT_ERR_INVALID_ARG;
  if (!itab_reserve(&sb->str_tab)) return GRT_ERR_NOMEM;
  uint64_t h = s.n ? grt__hash_bytes(s.p, s.n, 1) : 1;
  str_key k = {b, s};
  size_t pos;
  uint32_t i = itab_find(&sb->str_tab, h, str_eq, &k, &pos);
  if (i != UINT32_MAX) {
    *index = i;
    return GRT_OK;
  }
  if (sb->n_strs >= MAX_INDEX || s.n >= SIZE_MAX - t->n_str_bytes - 1) return GRT_ERR_SIZE;
  if (!grt__grow((void **)&t->strs, &sb->cap_str_bytes, t->n_str_bytes + s.n + 1, 1) ||
      !grt__grow((void **)&sb->str, &sb->cap_strs, sb->n_strs + 1, sizeof *sb->str))
    return GRT_ERR_NOMEM;
  if (s.n) memcpy(t->strs + t->n_str_bytes, s.p, s.n);
  t->strs[t->n_str_bytes + s.n] = '\0';
  sb->str[sb->n_strs].off = t->n_str_bytes;
  sb->str[sb->n_strs].len = s.n;
  t->n_str_bytes += s.n + 1;
  itab_put(&sb->str_tab, pos, h, (uint32_t)sb->n_strs);
  *index = (uint32_t)sb->n_strs++;
  return GRT_OK;
}

/* ---- frames ---- */

typedef struct frame_key {
  const grt__tb *b;
  uint32_t name, file;
  int64_t line;
} frame_key;

static bool frame_eq(const void *ctx, uint32_t i) {
  const frame_key *k = ctx;
  const uint32_t *fs = k->b->sb.frame_str + 2 * (size_t)i;
  return fs[0] == k->name && fs[1] == k->file && k->b->t->frames[i].line == k->line;
}

grt_status grt__tb_frame(grt__tb *b, grt__slice name, grt__slice filename, int64_t line, uint32_t *index) {
  grt__stacks_build *sb = &b->sb;
  grt_trace *t = b->t;
  frame_key k = {b, 0, 0, line};
  grt_status st = intern_str(b, name, &k.name);
  if (!st) st = intern_str(b, filename, &k.file);
  if (st) return st;
  if (!itab_reserve(&sb->frame_tab)) return GRT_ERR_NOMEM;
  uint64_t h = mix64(mix64(((uint64_t)k.name << 32 | k.file) + 2) ^ (uint64_t)line);
  size_t pos;
  uint32_t i = itab_find(&sb->frame_tab, h, frame_eq, &k, &pos);
  if (i != UINT32_MAX) {
    *index = i;
    return GRT_OK;
  }
  if (t->n_frames >= MAX_INDEX) return GRT_ERR_SIZE;
  size_t cap = sb->cap_frames;
  if (!grt__grow((void **)&t->frames, &cap, t->n_frames + 1, sizeof *t->frames) ||
      !grt__grow((void **)&sb->frame_str, &sb->cap_frames, t->n_frames + 1, 2 * sizeof *sb->frame_str))
    return GRT_ERR_NOMEM;
  t->frames[t->n_frames] = (grt_trace_frame){NULL, NULL, line};
  sb->frame_str[2 * t->n_frames] = k.name;
  sb->frame_str[2 * t->n_frames + 1] = k.file;
  itab_put(&sb->frame_tab, pos, h, (uint32_t)t->n_frames);
  *index = (uint32_t)t->n_frames++;
  return GRT_OK;
}

/* ---- stacks ---- */

grt_status grt__tb_stack_push(grt__tb *b, uint32_t index) {
  grt__stacks_build *sb = &b->sb;
  if (index >= b->t->n_frames) return GRT_ERR_INVALID_ARG;
  if (!grt__grow((void **)&sb->pending, &sb->cap_pending, sb->n_pending + 1, sizeof *sb->pending)) return GRT_ERR_NOMEM;
  sb->pending[sb->n_pending++] = index;
  return GRT_OK;
}

void grt__tb_stack_clear(grt__tb *b) { b->sb.n_pending = 0; }

static size_t stack_start(const grt_trace *t, size_t s) { return s ? t->stack_end[s - 1] : 0; }

static bool stack_eq(const void *ctx, uint32_t i) {
  const grt__tb *b = ctx;
  const grt_trace *t = b->t;
  size_t first = stack_start(t, i), n = t->stack_end[i] - first;
  return n == b->sb.n_pending && memcmp(t->entry_frame + first, b->sb.pending, n * sizeof *b->sb.pending) == 0;
}

grt_status grt__tb_stack_end(grt__tb *b, uint32_t *id) {
  grt__stacks_build *sb = &b->sb;
  grt_trace *t = b->t;
  size_t n = sb->n_pending;
  *id = 0;
  if (n == 0) return GRT_OK;
  if (!itab_reserve(&sb->stack_tab)) return GRT_ERR_NOMEM;
  uint64_t h = grt__hash_bytes((const char *)sb->pending, n * sizeof *sb->pending, 3);
  size_t pos;
  uint32_t i = itab_find(&sb->stack_tab, h, stack_eq, b, &pos);
  if (i == UINT32_MAX) {
    if (t->n_stacks >= MAX_INDEX - 1) return GRT_ERR_SIZE;
    size_t cap = sb->cap_stacks;
    if (!grt__grow((void **)&t->entry_frame, &sb->cap_entries, t->n_entries + n, sizeof *t->entry_frame) ||
        !grt__grow((void **)&t->stack_end, &cap, t->n_stacks + 1, sizeof *t->stack_end))
      return GRT_ERR_NOMEM;
    sb->cap_stacks = cap;
    memcpy(t->entry_frame + t->n_entries, sb->pending, n * sizeof *sb->pending);
    t->n_entries += n;
    t->stack_end[t->n_stacks] = t->n_entries;
    itab_put(&sb->stack_tab, pos, h, (uint32_t)t->n_stacks);
    i = (uint32_t)t->n_stacks++;
  }
  sb->n_pending = 0;
  *id = i + 1;
  return GRT_OK;
}

/* Zero-fills event_stack up to the events appended so far. */
static bool event_stack_fill(grt__tb *b) {
  grt__stacks_build *sb = &b->sb;
  grt_trace *t = b->t;
  if (!grt__grow((void **)&t->event_stack, &sb->cap_event_stack, t->n_events, sizeof *t->event_stack)) return false;
  memset(t->event_stack + sb->n_event_stack, 0, (t->n_events - sb->n_event_stack) * sizeof *t->event_stack);
  sb->n_event_stack = t->n_events;
  return true;
}

grt_status grt__tb_event_stack(grt__tb *b, uint32_t id) {
  grt_trace *t = b->t;
  if (t->n_events == 0 || id > t->n_stacks) return GRT_ERR_INVALID_ARG;
  if (id == 0 && !t->event_stack) return GRT_OK; /* the array appears with the first stack */
  if (!event_stack_fill(b)) return GRT_ERR_NOMEM;
  t->event_stack[t->n_events - 1] = id;
  return GRT_OK;
}

void grt__stacks_build_free(grt__stacks_build *sb) {
  itab_free(&sb->str_tab);
  itab_free(&sb->frame_tab);
  itab_free(&sb->stack_tab);
  free(sb->str);
  free(sb->frame_str);
  free(sb->pending);
  memset(sb, 0, sizeof *sb);
}

void grt__stacks_free(grt_trace *t) {
  free(t->strs);
  free(t->frames);
  free(t->entry_frame);
  free(t->entries);
  free(t->stack_end);
  free(t->event_stack);
}

grt_status grt__stacks_finish(grt__tb *b) {
  grt__stacks_build *sb = &b->sb;
  grt_trace *t = b->t;
  if (t->event_stack && !event_stack_fill(b)) return GRT_ERR_NOMEM;
  if (t->n_entries) {
    t->entries = malloc(t->n_entries * sizeof *t->entries);
    if (!t->entries) return GRT_ERR_NOMEM;
  }
  for (size_t i = 0; i < t->n_frames; i++) {
    t->frames[i].name = t->strs + sb->str[sb->frame_str[2 * i]].off;
    t->frames[i].filename = t->strs + sb->str[sb->frame_str[2 * i + 1]].off;
  }
  for (size_t i = 0; i < t->n_entries; i++) t->entries[i] = t->frames[t->entry_frame[i]];
  grt__stacks_build_free(sb);
  return GRT_OK;
}

size_t grt__stacks_bytes(const grt_trace *t) {
  size_t n = t->n_str_bytes + t->n_frames * sizeof *t->frames;
  n += t->n_entries * (sizeof *t->entries + sizeof *t->entry_frame);
  n += t->n_stacks * sizeof *t->stack_end;
  if (t->event_stack) n += t->n_events * sizeof *t->event_stack;
  return n;
}

grt_status grt_trace_stack(const grt_trace *t, uint32_t stack, const grt_trace_frame **frames, size_t *n) {
  if (!t || !frames || !n || stack > t->n_stacks) return GRT_ERR_INVALID_ARG;
  if (stack == 0) {
    *frames = NULL;
    *n = 0;
    return GRT_OK;
  }
  size_t first = stack_start(t, stack - 1);
  *frames = t->entries + first;
  *n = t->stack_end[stack - 1] - first;
  return GRT_OK;
}

/* ---- folding ---- */

static bool starts(const char *s, const char *lit) { return strncmp(s, lit, strlen(lit)) == 0; }

static bool ends(const char *s, const char *lit) {
  size_t n = strlen(s), k = strlen(lit);
  return n >= k && memcmp(s + n - k, lit, k) == 0;
}

static bool sep(char c) { return c == '/' || c == '\\'; }

/* Whether pat occurs in s, a '/' in pat matching either path separator. */
static bool has_path(const char *s, const char *pat) {
  size_t k = strlen(pat);
  for (; *s; s++) {
    size_t i = 0;
    while (i < k && s[i] && (pat[i] == '/' ? sep(s[i]) : s[i] == pat[i])) i++;
    if (i == k) return true;
  }
  return false;
}

/* Whether a path component of s starts with dir followed by a separator ("Objects/"). */
static bool has_dir(const char *s, const char *dir) {
  size_t k = strlen(dir);
  for (const char *p = s; *p; p++)
    if ((p == s || sep(p[-1])) && strncmp(p, dir, k) == 0 && sep(p[k])) return true;
  return false;
}

#define ANON "(anonymous namespace)"

/* The qualified function name inside a demangled symbol: after the return
 * type (the last blank outside template brackets), before the argument
 * list; a leading "(anonymous namespace)::" is skipped. Writes [*b, *e). */
static void qualified(const char *name, const char **b, const char **e) {
  const char *start = name, *p = name;
  int depth = 0;
  while (*p) {
    if (strncmp(p, ANON, sizeof ANON - 1) == 0) {
      p += sizeof ANON - 1;
      continue;
    }
    if (*p == '<')
      depth++;
    else if (*p == '>' && depth > 0)
      depth--;
    else if (depth == 0 && *p == ' ')
      start = p + 1;
    else if (depth == 0 && *p == '(')
      break;
    p++;
  }
  if (strncmp(start, ANON "::", sizeof ANON + 1) == 0) start += sizeof ANON + 1;
  *b = start;
  *e = p;
}

static bool qual_starts(const char *name, const char *lit) {
  const char *b, *e;
  qualified(name, &b, &e);
  size_t k = strlen(lit);
  return (size_t)(e - b) >= k && memcmp(b, lit, k) == 0;
}

static bool any_in(const char *s, const char *const *pats) {
  for (; *pats; pats++)
    if (strstr(s, *pats)) return true;
  return false;
}

/* torch/cuda/_memory_viz.py's _frame_filter (and MemoryViz.js's frameFilter). */
static bool memory_viz_omits(const grt_trace_frame *f) {
  static const char *const names[] = {"unwind::unwind",
                                      "CapturedTraceback::gather",
                                      "gather_with_cpp",
                                      "_start",
                                      "__libc_start_main",
                                      "PyEval_",
                                      "PyObject_",
                                      "PyFunction_",
                                      NULL};
  static const char *const files[] = {"core/boxing",
                                      "/Register",
                                      "/Redispatch",
                                      "pythonrun.c",
                                      "Modules/main.c",
                                      "Objects/call.c",
                                      "Objects/methodobject.c",
                                      "pycore_ceval.h",
                                      "ceval.c",
                                      "cpython/abstract.h",
                                      NULL};
  return any_in(f->name, names) || any_in(f->filename, files);
}

static bool recorder_or_allocator(const grt_trace_frame *f) {
  static const char *const names[] = {"unwind::unwind", "CapturedTraceback::", "gather_with_cpp",
                                      "CUDACachingAllocator", NULL};
  return any_in(f->name, names) || strstr(f->filename, "CUDACachingAllocator");
}

static bool plumbing(const grt_trace_frame *f) {
  static const char *const quals[] = {"c10::", "at::", "torch::", "std::",   "pybind11::",   "THP",    "dynamo_",
                                      "Py",    "_Py",  "__libc_", "__clone", "start_thread", "_start", NULL};
  static const char *const dirs[] = {"Objects", "Python", "Include", "Modules", "Parser",
                                     "sysdeps", "csu",    "nptl",    NULL};
  if (!f->name[0] || strcmp(f->name, "??") == 0 || strcmp(f->filename, "??") == 0) return true;
  if (recorder_or_allocator(f) || memory_viz_omits(f) || starts(f->filename, "<frozen ")) return true;
  for (const char *const *q = quals; *q; q++)
    if (qual_starts(f->name, *q)) return true;
  for (const char *const *d = dirs; *d; d++)
    if (has_dir(f->filename, *d)) return true;
  return false;
}

static bool is_python(const grt_trace_frame *f) { return ends(f->filename, ".py"); }

static bool torch_python(const grt_trace_frame *f) {
  static const char *const pkgs[] = {"site-packages/torch/", "dist-packages/torch/", "pytorch/torch/", NULL};
  for (const char *const *p = pkgs; *p; p++)
    if (has_path(f->filename, *p)) return true;
  for (const char *p = f->filename; *p; p++)
    if ((p == f->filename || sep(p[-1])) && starts(p, "torchinductor_")) return true;
  return false;
}

/* FOLD_NEVER: the recorder, the allocator, and frames with a NULL string (only a caller's own frames). */
enum fold_class { FOLD_USER, FOLD_NATIVE, FOLD_TORCH, FOLD_BACKWARD, FOLD_OTHER, FOLD_NEVER };

static enum fold_class fold_class(const grt_trace_frame *f) {
  if (!f->name || !f->filename) return FOLD_NEVER;
  if (is_python(f)) return torch_python(f) ? FOLD_TORCH : FOLD_USER;
  if (!plumbing(f)) return FOLD_NATIVE;
  if (qual_starts(f->name, "torch::autograd::generated::")) return FOLD_BACKWARD;
  return recorder_or_allocator(f) ? FOLD_NEVER : FOLD_OTHER;
}

/* Appends the frames of class c (innermost first) after the *count already chosen. */
static void fold_take(const grt_trace_frame *frames, size_t n, enum fold_class c, size_t *keep, size_t cap,
                      size_t *count) {
  for (size_t i = 0; i < n; i++) {
    if (fold_class(&frames[i]) != c) continue;
    if (*count < cap) keep[*count] = i;
    (*count)++;
  }
}

size_t grt_trace_frames_fold(const grt_trace_frame *frames, size_t n, size_t *keep, size_t cap) {
  size_t count = 0;
  if (!frames) return 0;
  if (!keep) cap = 0;
  fold_take(frames, n, FOLD_USER, keep, cap, &count);
  fold_take(frames, n, FOLD_NATIVE, keep, cap, &count);
  if (!count) fold_take(frames, n, FOLD_TORCH, keep, cap, &count);
  if (!count) fold_take(frames, n, FOLD_BACKWARD, keep, cap, &count);
  for (size_t i = 0; !count && i < n; i++)
    if (fold_class(&frames[i]) == FOLD_OTHER) {
      if (cap) keep[0] = i;
      count = 1;
    }
  return count;
}

/* PyTorch logs a segment free with the context of the call that freed it:
 * an empty_cache's stack names it, a malloc's release path names the
 * allocator's malloc or, recorded with Python frames only, the allocating
 * code alone. */
grt_release_origin grt_trace_release_origin(const grt_trace *t, uint32_t stack) {
  const grt_trace_frame *f;
  size_t n;
  if (!t || !stack || grt_trace_stack(t, stack, &f, &n) || !n) return GRT_RELEASE_UNKNOWN;
  bool native = false;
  for (size_t i = 0; i < n; i++) {
    bool python_empty_cache = !strcmp(f[i].name, "empty_cache") && ends(f[i].filename, "cuda/memory.py");
    if (strstr(f[i].name, "emptyCache") || python_empty_cache) return GRT_RELEASE_EMPTY_CACHE;
    if (strstr(f[i].name, "DeviceCachingAllocator::malloc")) return GRT_RELEASE_MALLOC;
    native = native || !is_python(&f[i]);
  }
  return native ? GRT_RELEASE_UNKNOWN : GRT_RELEASE_MALLOC;
}
