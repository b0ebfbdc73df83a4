/* input.c — see input.h. Decompression is the CLI's (zlib, libzstd): the
 * library reads plain bytes, so it stays dependency-free. An input is one
 * decoding source behind a stdio stream (fopencookie): the first decoded
 * bytes are kept aside to tell the format, then served again, so a pipe is
 * read once whether it is streamed or held. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "input.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <zlib.h>
#include <zstd.h>

/* the CLI process's one setting, from --max-input-size */
static uint64_t max_input = CLI_DEFAULT_MAX_INPUT;

void cli_input_set_max(uint64_t bytes) { max_input = bytes ? bytes : CLI_DEFAULT_MAX_INPUT; }
uint64_t cli_input_max(void) { return max_input; }

enum { GZIP, ZSTD, PLAIN };
enum { CHUNK = 1 << 20, HEAD = 16 };

static int kind_of(const unsigned char *b, size_t n) {
  if (n >= 2 && b[0] == 0x1f && b[1] == 0x8b) return GZIP;
  if (n >= 4 && b[0] == 0x28 && b[1] == 0xb5 && b[2] == 0x2f && b[3] == 0xfd) return ZSTD;
  return PLAIN;
}

bool cli_input_needs_reader(const char *path) {
  struct stat sb;
  if (!strcmp(path, "-")) return true;
  if (stat(path, &sb)) return false; /* the loader says it cannot open it */
  if (!S_ISREG(sb.st_mode)) return true; /* a pipe, a device: read once, as a stream */
  FILE *f = fopen(path, "rb");
  unsigned char b[4];
  size_t n = f ? fread(b, 1, sizeof b, f) : 0;
  if (f) fclose(f);
  return kind_of(b, n) != PLAIN;
}

struct cli_input {
  FILE *raw;                /* the file, or stdin for "-" (not closed) */
  FILE *stream;             /* the decoded bytes */
  int kind;
  z_stream z;
  ZSTD_DStream *zs;
  bool z_started, member_done, ended; /* ended: the last frame or member closed */
  unsigned char *in;        /* raw bytes read and not yet decoded: in[in_pos, in_len) */
  size_t in_pos, in_len;
  unsigned char head[HEAD]; /* the first decoded bytes, served again first */
  size_t head_len, head_pos;
  bool failed;
  char why[200];
};

static ssize_t fail(cli_input *in, const char *fmt, const char *arg) {
  in->failed = true;
  snprintf(in->why, sizeof in->why, fmt, arg);
  errno = EIO;
  return -1;
}

/* More raw bytes; 0 at the end of the file (-1 on a read error). */
static ssize_t refill(cli_input *in) {
  in->in_pos = 0;
  in->in_len = fread(in->in, 1, CHUNK, in->raw);
  if (!in->in_len && ferror(in->raw)) return fail(in, "read error: %s", strerror(errno));
  return (ssize_t)in->in_len;
}

static ssize_t inflate_some(cli_input *in, unsigned char *buf, size_t size) {
  for (;;) {
    if (in->in_pos == in->in_len) {
      ssize_t got = refill(in);
      if (got < 0) return got;
      if (!got) return in->ended ? 0 : fail(in, "the %s stream ends early", "gzip");
    }
    if (in->member_done) { /* a gzip file may hold several members, one after the other */
      if (inflateReset(&in->z) != Z_OK) return fail(in, "gzip: %s", "cannot restart");
      in->member_done = false;
    }
    in->z.next_in = in->in + in->in_pos, in->z.avail_in = (uInt)(in->in_len - in->in_pos);
    in->z.next_out = buf, in->z.avail_out = (uInt)size;
    int zr = inflate(&in->z, Z_NO_FLUSH);
    in->in_pos = in->in_len - in->z.avail_in;
    size_t made = size - in->z.avail_out;
    if (zr == Z_STREAM_END)
      in->member_done = in->ended = true;
    else if (zr != Z_OK && zr != Z_BUF_ERROR)
      return fail(in, "gzip: %s", in->z.msg ? in->z.msg : "corrupt");
    else if (made)
      in->ended = false;
    if (made) return (ssize_t)made;
  }
}

static ssize_t unzstd_some(cli_input *in, unsigned char *buf, size_t size) {
  for (;;) {
    if (in->in_pos == in->in_len) {
      ssize_t got = refill(in);
      if (got < 0) return got;
      if (!got) return in->ended ? 0 : fail(in, "the %s stream ends early", "zstd");
    }
    ZSTD_inBuffer zi = {in->in, in->in_len, in->in_pos};
    ZSTD_outBuffer zo = {buf, size, 0};
    size_t zr = ZSTD_decompressStream(in->zs, &zo, &zi);
    in->in_pos = zi.pos;
    if (ZSTD_isError(zr)) return fail(in, "zstd: %s", ZSTD_getErrorName(zr));
    in->ended = zr == 0;
    if (zo.pos) return (ssize_t)zo.pos;
  }
}

/* Decoded bytes into buf: > 0, 0 at the end, -1 on failure (why set). */
static ssize_t decode(cli_input *in, unsigned char *buf, size_t size) {
  if (in->failed) return -1;
  if (in->kind == GZIP) return inflate_some(in, buf, size);
  if (in->kind == ZSTD) return unzstd_some(in, buf, size);
  if (in->in_pos < in->in_len) { /* what detection read first */
    size_t n = in->in_len - in->in_pos < size ? in->in_len - in->in_pos : size;
    memcpy(buf, in->in + in->in_pos, n);
    in->in_pos += n;
    return (ssize_t)n;
  }
  size_t n = fread(buf, 1, size, in->raw);
  if (!n && ferror(in->raw)) return fail(in, "read error: %s", strerror(errno));
  return (ssize_t)n;
}

static ssize_t cookie_read(void *c, char *buf, size_t size) {
  cli_input *in = c;
  if (in->head_pos < in->head_len) {
    size_t n = in->head_len - in->head_pos < size ? in->head_len - in->head_pos : size;
    memcpy(buf, in->head + in->head_pos, n);
    in->head_pos += n;
    return (ssize_t)n;
  }
  return decode(in, (unsigned char *)buf, size);
}

void cli_input_close(cli_input *in) {
  if (!in) return;
  if (in->stream) fclose(in->stream);
  if (in->raw && in->raw != stdin) fclose(in->raw);
  if (in->z_started) inflateEnd(&in->z);
  ZSTD_freeDStream(in->zs);
  free(in->in);
  free(in);
}

/* The decoder for the first raw bytes, then the first decoded bytes aside. */
static int start(cli_input *in, char *why, size_t why_size) {
  if (refill(in) < 0) return snprintf(why, why_size, "%s", in->why), -1;
  in->kind = kind_of(in->in, in->in_len);
  if (in->kind == GZIP && inflateInit2(&in->z, 16 + MAX_WBITS) != Z_OK)
    return snprintf(why, why_size, "zlib: cannot start"), -1;
  in->z_started = in->kind == GZIP;
  if (in->kind == ZSTD && !(in->zs = ZSTD_createDStream())) return snprintf(why, why_size, "zstd: cannot start"), -1;
  for (ssize_t n = 1; n > 0 && in->head_len < HEAD; in->head_len += (size_t)(n > 0 ? n : 0))
    n = decode(in, in->head + in->head_len, HEAD - in->head_len);
  if (in->failed) return snprintf(why, why_size, "%s", in->why), -1;
  cookie_io_functions_t io = {.read = cookie_read};
  if (!(in->stream = fopencookie(in, "rb", io))) return snprintf(why, why_size, "out of host memory"), -1;
  return 0;
}

cli_input *cli_input_open(const char *path, char *why, size_t why_size) {
  cli_input *in = calloc(1, sizeof *in);
  if (!in || !(in->in = malloc(CHUNK))) {
    free(in);
    snprintf(why, why_size, "out of host memory");
    return NULL;
  }
  in->raw = strcmp(path, "-") ? fopen(path, "rb") : stdin;
  if (!in->raw) {
    snprintf(why, why_size, "cannot open: %s", strerror(errno));
    cli_input_close(in);
    return NULL;
  }
  if (start(in, why, why_size)) {
    cli_input_close(in);
    return NULL;
  }
  return in;
}

FILE *cli_input_stream(cli_input *in) { return in->stream; }

static bool starts_with(const cli_input *in, size_t at, const char *lit) {
  size_t n = strlen(lit);
  return in->head_len >= at + n && !memcmp(in->head + at, lit, n);
}

bool cli_input_streams(const cli_input *in, grt_trace_format *format) {
  if (starts_with(in, 0, "gpurt-trace")) return *format = GRT_TRACE_FORMAT_NATIVE, true;
  size_t bom = starts_with(in, 0, "\xEF\xBB\xBF") ? 3 : 0;
  if (starts_with(in, bom, "Thread,Time,")) return *format = GRT_TRACE_FORMAT_RMM, true;
  return false;
}

const char *cli_input_error(const cli_input *in) { return in->failed ? in->why : NULL; }

/* -1 (why set) once the input holds more than the limit. */
static int over(uint64_t len, char *why, size_t why_size) {
  if (len <= max_input) return 0;
  return snprintf(why, why_size, "more than --max-input-size %llu bytes (the input is cut off there: give a larger "
                                 "--max-input-size)", (unsigned long long)max_input), -1;
}

int cli_input_slurp(cli_input *in, unsigned char **data, size_t *len, char *why, size_t why_size) {
  *data = NULL, *len = 0;
  unsigned char *p = NULL;
  size_t n = 0, cap = 0;
  for (;;) {
    if (cap - n < CHUNK) { /* the cap is exact: at most one chunk is read past it, then refused */
      size_t want = cap ? cap * 2 : CHUNK;
      unsigned char *q = realloc(p, want);
      if (!q) return free(p), snprintf(why, why_size, "out of host memory at %zu bytes", n), -1;
      p = q, cap = want;
    }
    size_t got = fread(p + n, 1, CHUNK, in->stream);
    n += got;
    if (over(n, why, why_size)) return free(p), -1;
    if (got < CHUNK) break;
  }
  if (in->failed) return free(p), snprintf(why, why_size, "%s", in->why), -1;
  if (!n) return free(p), snprintf(why, why_size, "empty input"), -1;
  *data = p, *len = n;
  return 0;
}

int cli_input_read(const char *path, unsigned char **data, size_t *len, char *why, size_t why_size) {
  cli_input *in = cli_input_open(path, why, why_size);
  if (!in) return -1;
  int rc = cli_input_slurp(in, data, len, why, why_size);
  cli_input_close(in);
  return rc;
}
