/* input.c — see input.h. Decompression is the CLI's (zlib, libzstd): the
 * library reads plain bytes, so it stays dependency-free. */
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

typedef struct out {
  unsigned char *p;
  size_t len, cap;
} out;

/* -1 (why set) once the input holds more than the limit. */
static int over(const out *o, size_t more, char *why, size_t why_size) {
  if ((uint64_t)o->len + more <= max_input) return 0;
  return snprintf(why, why_size, "more than --max-input-size %llu bytes (the input is cut off there: give a larger "
                                 "--max-input-size)", (unsigned long long)max_input), -1;
}

/* Room for `more` bytes; -1 (why set) without memory. A decoder's room may pass the limit by one
 * chunk: what it wrote is checked after. */
static int grow(out *o, size_t more, char *why, size_t why_size) {
  if (o->len + more <= o->cap) return 0;
  size_t cap = o->cap ? o->cap : 1 << 20;
  while (cap < o->len + more) cap *= 2;
  unsigned char *p = realloc(o->p, cap);
  if (!p) return snprintf(why, why_size, "out of host memory at %zu bytes", o->len), -1;
  o->p = p, o->cap = cap;
  return 0;
}

enum { CHUNK = 1 << 20 };

/* Feeds `in` (the n bytes already read, then the rest of f) through the decoder of kind k. */
static int drain(FILE *f, int k, const unsigned char *head, size_t n, out *o, char *why, size_t why_size) {
  unsigned char *in = malloc(CHUNK);
  if (!in) return snprintf(why, why_size, "out of host memory"), -1;
  memcpy(in, head, n);
  z_stream z;
  memset(&z, 0, sizeof z);
  ZSTD_DStream *zs = NULL;
  int rc = 0;
  if (k == GZIP && inflateInit2(&z, 16 + MAX_WBITS) != Z_OK) rc = -1, snprintf(why, why_size, "zlib: cannot start");
  if (k == ZSTD && !(zs = ZSTD_createDStream())) rc = -1, snprintf(why, why_size, "zstd: cannot start");
  bool ended = false;
  for (size_t have = n; !rc; have = fread(in, 1, CHUNK, f)) {
    if (!have) {
      if (ferror(f)) rc = -1, snprintf(why, why_size, "read error: %s", strerror(errno));
      else if (k != PLAIN && !ended) rc = -1, snprintf(why, why_size, "the %s stream ends early", k == GZIP ? "gzip" : "zstd");
      break;
    }
    if (k == PLAIN) {
      if (!(rc = over(o, have, why, why_size)) && !(rc = grow(o, have, why, why_size)))
        memcpy(o->p + o->len, in, have), o->len += have;
      continue;
    }
    ZSTD_inBuffer zi = {in, have, 0};
    z.next_in = in, z.avail_in = (uInt)have;
    while (!rc && (k == GZIP ? z.avail_in > 0 : zi.pos < zi.size)) {
      if ((rc = over(o, 0, why, why_size)) || (rc = grow(o, CHUNK, why, why_size))) break;
      if (k == GZIP) {
        z.next_out = o->p + o->len, z.avail_out = CHUNK;
        int zr = inflate(&z, Z_NO_FLUSH);
        o->len += CHUNK - z.avail_out;
        if (zr == Z_STREAM_END) { /* a gzip file may hold several members, one after the other */
          ended = true;
          if (z.avail_in && inflateReset(&z) == Z_OK) continue;
        } else if (zr != Z_OK && zr != Z_BUF_ERROR) rc = -1, snprintf(why, why_size, "gzip: %s", z.msg ? z.msg : "corrupt");
        else ended = false;
      } else {
        ZSTD_outBuffer zo = {o->p + o->len, CHUNK, 0};
        size_t zr = ZSTD_decompressStream(zs, &zo, &zi);
        o->len += zo.pos;
        if (ZSTD_isError(zr)) rc = -1, snprintf(why, why_size, "zstd: %s", ZSTD_getErrorName(zr));
        ended = zr == 0;
      }
    }
  }
  if (!rc) rc = over(o, 0, why, why_size); /* the decoder's last chunk */
  if (k == GZIP) inflateEnd(&z);
  ZSTD_freeDStream(zs);
  free(in);
  return rc;
}

int cli_input_read(const char *path, unsigned char **data, size_t *len, char *why, size_t why_size) {
  *data = NULL, *len = 0;
  bool std_in = !strcmp(path, "-");
  FILE *f = std_in ? stdin : fopen(path, "rb");
  if (!f) return snprintf(why, why_size, "cannot open: %s", strerror(errno)), -1;
  unsigned char head[4];
  size_t n = fread(head, 1, sizeof head, f); /* the magic, from a buffered prefix: a pipe is read once */
  out o = {0};
  int rc = drain(f, kind_of(head, n), head, n, &o, why, why_size);
  if (!std_in) fclose(f);
  if (rc) return free(o.p), -1;
  if (!o.len) return free(o.p), snprintf(why, why_size, "empty input"), -1;
  *data = o.p, *len = o.len;
  return 0;
}
