/* load.c — grt_load_safetensors: the header read, device memory allocated
 * (one blob or one allocation per tensor, through the caller's allocator),
 * the file opened (O_DIRECT when asked and the file system takes it, its
 * alignment from statx), a reader run (load_pipeline.c, load_direct.c) and
 * the figures kept. A failure frees everything it took. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "io/io_impl.h"

static const char *const method_names[GRT_LOAD_METHOD_COUNT] = {"iouring", "pread", "mmap", "naive"};

const char *grt_load_method_name(grt_load_method m) {
  return (unsigned)m < GRT_LOAD_METHOD_COUNT ? method_names[m] : "?";
}

grt_status grt_load_method_parse(const char *name, grt_load_method *out) {
  if (!name || !out) return GRT_ERR_INVALID_ARG;
  for (int i = 0; i < GRT_LOAD_METHOD_COUNT; i++)
    if (!strcmp(name, method_names[i])) return *out = (grt_load_method)i, GRT_OK;
  return GRT_ERR_NOT_FOUND;
}

void grt_load_config_default(grt_load_config *cfg) {
  if (!cfg) return;
  memset(cfg, 0, sizeof *cfg);
  cfg->method = GRT_LOAD_IOURING;
  cfg->chunk_bytes = 8 * GRT_MiB;
  cfg->buffers = 4;
  cfg->register_buffers = true;
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static double cpu_s(void) {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) + (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1e-6;
}

static uint64_t tensor_size(const grt_st_tensor *t) { return t->end - t->begin; }

static void free_device(grt_loaded *l) {
  for (size_t i = 0; i < l->n_allocs; i++) {
    grt_status st = grt_alloc_free(l->alloc, l->allocs[i]);
    (void)st; /* ours, allocated above: a refusal would be an allocator bug, and there is nothing left to undo */
  }
  l->n_allocs = 0;
}

/* Device memory for every tensor; on failure nothing stays allocated. */
static grt_status alloc_device(grt_loaded *l, bool blob, grt_io_error *err) {
  const grt_safetensors *st = l->st;
  size_t want = blob ? 1 : st->n;
  l->ptrs = calloc(st->n ? st->n : 1, sizeof *l->ptrs);
  l->allocs = calloc(want ? want : 1, sizeof *l->allocs);
  if (!l->ptrs || !l->allocs) return grt__io_fail(err, GRT_ERR_NOMEM, NULL, false, 0, "out of host memory");
  if (blob) {
    if (!st->data_size) return GRT_OK;
    grt_status s = grt_alloc_malloc(l->alloc, st->data_size, 0, &l->allocs[0]);
    if (s)
      return grt__io_fail(err, s, st->n ? st->tensors[0].name : NULL, false, 0, "cannot allocate the %llu-byte blob: %s",
                          (unsigned long long)st->data_size, grt_alloc_last_error(l->alloc));
    l->n_allocs = 1;
    for (size_t i = 0; i < st->n; i++)
      if (tensor_size(&st->tensors[i])) l->ptrs[i] = l->allocs[0] + st->tensors[i].begin;
    return GRT_OK;
  }
  for (size_t i = 0; i < st->n; i++) {
    const grt_st_tensor *t = &st->tensors[i];
    if (!tensor_size(t)) continue; /* zero-size tensors own no device bytes */
    grt_status s = grt_alloc_malloc(l->alloc, tensor_size(t), 0, &l->ptrs[i]);
    if (s) {
      free_device(l);
      return grt__io_fail(err, s, t->name, true, t->file_offset, "cannot allocate %llu bytes on the device: %s",
                          (unsigned long long)tensor_size(t), grt_alloc_last_error(l->alloc));
    }
    l->allocs[l->n_allocs++] = l->ptrs[i];
  }
  return GRT_OK;
}

/* The tensor index holding file offset off (the first tensor at or after it otherwise). */
static size_t tensor_index(const grt_safetensors *st, uint64_t off) {
  size_t lo = 0, hi = st->n;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (st->tensors[mid].file_offset + tensor_size(&st->tensors[mid]) <= off) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

const char *grt__load_tensor_at(const grt__load *ld, uint64_t file_off) {
  size_t i = tensor_index(ld->l->st, file_off);
  return i < ld->l->st->n ? ld->l->st->tensors[i].name : NULL;
}

grt_status grt__load_copy(grt__load *ld, uint64_t file_off, const unsigned char *src, uint64_t len) {
  const grt_safetensors *st = ld->l->st;
  if (ld->cfg->read_only) return GRT_OK;
  uint64_t lo = st->data_offset, hi = st->data_offset + st->data_size;
  if (file_off < lo) { /* the aligned read's head: header bytes */
    uint64_t skip = lo - file_off < len ? lo - file_off : len;
    file_off += skip, src += skip, len -= skip;
  }
  if (file_off + len > hi) len = file_off < hi ? hi - file_off : 0; /* the aligned read's tail */
  for (size_t i = tensor_index(st, file_off); len && i < st->n; i++) {
    const grt_st_tensor *t = &st->tensors[i];
    uint64_t size = tensor_size(t);
    if (!size) continue;
    uint64_t at = file_off - t->file_offset, n = size - at < len ? size - at : len;
    grt_status s = grt__copier_h2d(&ld->copy, ld->l->ptrs[i] + at, src, n);
    if (s) return grt__io_fail(ld->err, s, t->name, true, file_off, "the copy to the device was refused");
    file_off += n, src += n, len -= n;
  }
  return GRT_OK;
}

bool grt__load_inject(grt__load *ld) {
  ld->reads++;
  return ld->cfg->fail_read_at && ld->reads == ld->cfg->fail_read_at;
}

int64_t grt__load_pread(grt__load *ld, void *buf, uint64_t len, uint64_t off) {
  if (grt__load_inject(ld)) return -EIO;
  uint64_t got = 0;
  while (got < len) {
    ssize_t r = pread(ld->fd, (char *)buf + got, len - got, (off_t)(off + got));
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return -errno;
    if (r == 0) break; /* end of file: an aligned read's tail */
    got += (uint64_t)r;
  }
  return (int64_t)got;
}

void grt__load_host(grt__load *ld, int64_t delta) {
  ld->host_bytes = (uint64_t)((int64_t)ld->host_bytes + delta);
  if (ld->host_bytes > ld->peak_host_bytes) ld->peak_host_bytes = ld->host_bytes;
}

void grt__load_progress(grt__load *ld, uint64_t bytes) {
  ld->done_bytes += bytes;
  if (ld->cfg->progress) ld->cfg->progress(ld->cfg->progress_ctx, ld->done_bytes, ld->l->st->data_size);
}

/* Opens the file as the method wants it; O_DIRECT falls back to buffered reads, saying why. */
static grt_status open_file(grt__load *ld, bool want_direct) {
  grt_load_stats *s = &ld->l->stats;
  ld->align = ld->mem_align = 1;
  if (want_direct) {
    struct statx sx;
    memset(&sx, 0, sizeof sx);
    int fd = -1;
    if (statx(AT_FDCWD, ld->path, 0, STATX_DIOALIGN, &sx) || !(sx.stx_mask & STATX_DIOALIGN) ||
        !sx.stx_dio_offset_align)
      snprintf(s->io_note, sizeof s->io_note, "O_DIRECT: the file system reports no direct I/O alignment; buffered reads");
    else if ((fd = open(ld->path, O_RDONLY | O_DIRECT | O_CLOEXEC)) < 0)
      snprintf(s->io_note, sizeof s->io_note, "O_DIRECT refused (%s); buffered reads", strerror(errno));
    if (fd >= 0) {
      ld->fd = fd;
      ld->align = sx.stx_dio_offset_align;
      ld->mem_align = sx.stx_dio_mem_align > 1 ? sx.stx_dio_mem_align : 1;
      s->direct = true;
      return GRT_OK;
    }
  }
  ld->fd = open(ld->path, O_RDONLY | O_CLOEXEC);
  if (ld->fd < 0) return grt__io_fail(ld->err, GRT_ERR_IO, NULL, false, 0, "cannot open: %s", strerror(errno));
  return GRT_OK;
}

static grt_status run_method(grt__load *ld) {
  const grt_load_config *c = ld->cfg;
  bool direct = c->direct && (c->method == GRT_LOAD_IOURING || c->method == GRT_LOAD_PREAD);
  if (c->direct && !direct)
    snprintf(ld->l->stats.io_note, sizeof ld->l->stats.io_note, "O_DIRECT: %s reads through the page cache",
             grt_load_method_name(c->method));
  grt_status s = open_file(ld, direct);
  if (s) return s;
  if (c->drop_cache) {
    int rc = posix_fadvise(ld->fd, 0, 0, POSIX_FADV_DONTNEED); /* clean pages go; nothing to undo if it cannot */
    (void)rc;
  }
  switch (c->method) {
  case GRT_LOAD_IOURING: return grt__load_pipeline(ld, true);
  case GRT_LOAD_PREAD: return grt__load_pipeline(ld, false);
  case GRT_LOAD_MMAP: return grt__load_mmap(ld);
  default: return grt__load_naive(ld);
  }
}

static bool config_ok(const grt_load_config *c) {
  return c && (c->cuda_stream ? c->cuda_device != NULL : c->exec != NULL) && c->alloc && (unsigned)c->method < GRT_LOAD_METHOD_COUNT && c->chunk_bytes &&
         c->chunk_bytes <= ((uint64_t)1 << 32) && c->buffers >= 1 && c->buffers <= 64 && c->queue_depth <= 64;
}

grt_status grt_load_safetensors(const char *path, const grt_load_config *cfg, grt_loaded **out, grt_io_error *err) {
  if (out) *out = NULL;
  if (!path || !out || !config_ok(cfg))
    return grt__io_fail(err, GRT_ERR_INVALID_ARG, NULL, false, 0,
                        "a load needs a path, an exec (or a CUDA stream and its device) and an allocator; "
                        "chunk 1 B..4 GiB, 1..64 buffers, depth <= 64");
  grt_loaded *l = calloc(1, sizeof *l);
  if (!l) return grt__io_fail(err, GRT_ERR_NOMEM, NULL, false, 0, "out of host memory");
  l->alloc = cfg->alloc;
  grt__load ld = {.cfg = cfg, .l = l, .path = path, .fd = -1, .err = err};
  double t0 = now_s(), c0 = cpu_s();
  l->cuda = cfg->cuda_stream;
  grt_status s = grt_safetensors_open(path, &l->st, err);
  if (!s) s = cfg->cuda_stream ? (l->dev = cfg->cuda_device, GRT_OK) : grt_exec_get_device(cfg->exec, &l->dev);
  if (!s) s = alloc_device(l, cfg->blob, err);
  if (!s && (s = grt__copier_open(&ld.copy, cfg, cfg->buffers)))
    s = grt__io_fail(err, s, NULL, false, 0, "cannot create the copy stream and its events");
  if (!s) s = run_method(&ld);
  grt_status c = grt__copier_close(&ld.copy); /* every copy ends before the buffers it reads go */
  if (!s && c) s = grt__io_fail(err, c, NULL, false, 0, "the copy stream failed");
  if (ld.fd >= 0) close(ld.fd);
  grt_load_stats *st = &l->stats;
  st->seconds = now_s() - t0;
  st->cpu_seconds = cpu_s() - c0;
  st->bytes = l->st ? l->st->data_size : 0;
  st->reads = ld.reads;
  st->peak_host_bytes = ld.peak_host_bytes;
  st->device_allocs = l->n_allocs;
  bool buffered = cfg->method == GRT_LOAD_NAIVE || ((cfg->method == GRT_LOAD_IOURING || cfg->method == GRT_LOAD_PREAD) &&
                                                     !st->direct);
  st->copies_per_byte = buffered ? 2.0 : 1.0;
  if (s) {
    grt_status f = grt_loaded_free(l);
    (void)f; /* the failure is the load's, reported in err */
    return s;
  }
  *out = l;
  return GRT_OK;
}

grt_status grt_loaded_free(grt_loaded *l) {
  if (!l) return GRT_OK;
  if (l->alloc) free_device(l);
  grt_safetensors_free(l->st);
  free(l->ptrs);
  free(l->allocs);
  free(l);
  return GRT_OK;
}

const grt_safetensors *grt_loaded_header(const grt_loaded *l) { return l ? l->st : NULL; }

grt_status grt_loaded_stats(const grt_loaded *l, grt_load_stats *out) {
  if (!l || !out) return GRT_ERR_INVALID_ARG;
  *out = l->stats;
  return GRT_OK;
}

grt_status grt_loaded_tensor(const grt_loaded *l, size_t i, grt_devptr *ptr) {
  if (!l || !ptr || i >= l->st->n) return GRT_ERR_INVALID_ARG;
  *ptr = l->ptrs[i];
  return GRT_OK;
}

/* A GPU's bytes, copied back 8 MiB at a time (a multiple of 8: the checksum chains). */
static grt_status readback_checksum(grt_loaded *l, grt_devptr p, uint64_t n, uint64_t *out) {
  enum { PIECE = 8 << 20 };
  unsigned char *buf = malloc(n < PIECE ? (size_t)n : PIECE);
  if (!buf) return GRT_ERR_NOMEM;
  grt_status s = GRT_OK;
  uint64_t h = 0;
  for (uint64_t done = 0; !s && done < n;) {
    uint64_t k = n - done < PIECE ? n - done : PIECE;
    if (!(s = grt_cuda_memcpy_dtoh_async(l->cuda, buf, p + done, k)) && !(s = grt_cuda_stream_synchronize(l->cuda)))
      h = grt_io_checksum(buf, (size_t)k, h), done += k;
  }
  free(buf);
  if (!s) *out = h;
  return s;
}

grt_status grt_loaded_device_checksum(grt_loaded *l, size_t i, uint64_t *out) {
  if (!l || !out || i >= l->st->n) return GRT_ERR_INVALID_ARG;
  uint64_t n = tensor_size(&l->st->tensors[i]);
  if (!n) return *out = grt_io_checksum(NULL, 0, 0), GRT_OK;
  if (l->cuda) return readback_checksum(l, l->ptrs[i], n, out);
  void *p = NULL;
  grt_status s = grt_device_host_ptr(l->dev, l->ptrs[i], n, &p);
  if (s) return s;
  *out = grt_io_checksum(p, (size_t)n, 0);
  return GRT_OK;
}

/* Word at a time, no finalizer: checksum(A || B) = checksum(B, checksum(A)) when |A| is a multiple of 8. */
uint64_t grt_io_checksum(const void *data, size_t len, uint64_t seed) {
  const unsigned char *p = data;
  uint64_t h = seed;
  size_t i = 0;
  for (; i + 8 <= len; i += 8) {
    uint64_t w;
    memcpy(&w, p + i, 8);
    h = ((h ^ w) << 27 | (h ^ w) >> 37) * 0x100000001b3ull + 0x27d4eb2f165667c5ull;
  }
  if (i < len) {
    uint64_t w = 0;
    memcpy(&w, p + i, len - i);
    h = ((h ^ w ^ ((uint64_t)(len - i) << 56)) << 27 | (h ^ w ^ ((uint64_t)(len - i) << 56)) >> 37) * 0x100000001b3ull;
  }
  return h;
}

grt_status grt_io_file_checksum(const char *path, uint64_t offset, uint64_t len, uint64_t *out) {
  if (!path || !out) return GRT_ERR_INVALID_ARG;
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return GRT_ERR_IO;
  enum { BUF = 1 << 20 }; /* a multiple of 8: the checksum chains across reads */
  unsigned char *buf = malloc(BUF);
  grt_status s = buf ? GRT_OK : GRT_ERR_NOMEM;
  uint64_t h = 0;
  for (uint64_t done = 0; !s && done < len;) {
    size_t want = len - done < BUF ? (size_t)(len - done) : BUF;
    ssize_t r = pread(fd, buf, want, (off_t)(offset + done));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) s = GRT_ERR_IO;
    else if ((size_t)r < want && done + (uint64_t)r < len && r % 8) s = GRT_ERR_IO; /* keeps the chain aligned */
    else h = grt_io_checksum(buf, (size_t)r, done ? h : 0), done += (uint64_t)r;
  }
  if (!s && !len) h = grt_io_checksum(NULL, 0, 0);
  free(buf);
  close(fd);
  if (!s) *out = h;
  return s;
}
