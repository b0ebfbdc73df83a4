/* load_direct.c — the loaders people use, for comparison with the staged
 * path: the file mapped and each chunk copied to the device straight from
 * the mapping (the copy engine takes the page faults), and the naive one:
 * per tensor, read it into malloc'd memory, copy it, wait, free it. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>

#include "io/io_impl.h"

grt_status grt__load_mmap(grt__load *ld) {
  const grt_safetensors *st = ld->l->st;
  if (!st->data_size) return GRT_OK;
  uint64_t size = st->data_offset + st->data_size;
  if (grt__load_inject(ld))
    return grt__io_fail(ld->err, GRT_ERR_IO, st->tensors[0].name, true, st->data_offset, "mmap failed: %s",
                        strerror(EIO));
  void *m = mmap(NULL, size, PROT_READ, MAP_PRIVATE, ld->fd, 0);
  if (m == MAP_FAILED)
    return grt__io_fail(ld->err, GRT_ERR_IO, NULL, false, 0, "mmap of %llu bytes failed: %s",
                        (unsigned long long)size, strerror(errno));
  madvise(m, size, MADV_SEQUENTIAL);
  grt_status s = GRT_OK;
  uint64_t chunk = ld->cfg->chunk_bytes;
  for (uint64_t off = st->data_offset; !s && off < size; off += chunk) {
    uint64_t n = size - off < chunk ? size - off : chunk;
    if (!(s = grt__load_copy(ld, off, (const unsigned char *)m + off, n))) grt__load_progress(ld, n);
  }
  /* the copies read the mapping: it stays until they end */
  grt_status w = grt__copier_drain(&ld->copy);
  if (!s && w) s = grt__io_fail(ld->err, w, NULL, false, 0, "a copy to the device failed");
  munmap(m, size);
  return s;
}

grt_status grt__load_naive(grt__load *ld) {
  const grt_safetensors *st = ld->l->st;
  grt_status s = GRT_OK;
  for (size_t i = 0; !s && i < st->n; i++) {
    const grt_st_tensor *t = &st->tensors[i];
    uint64_t n = t->end - t->begin;
    if (!n) continue;
    unsigned char *buf = malloc(n);
    if (!buf) return grt__io_fail(ld->err, GRT_ERR_NOMEM, t->name, true, t->file_offset,
                                  "cannot allocate %llu bytes of host memory", (unsigned long long)n);
    grt__load_host(ld, (int64_t)n);
    int64_t got = grt__load_pread(ld, buf, n, t->file_offset);
    if (got < 0) s = grt__io_fail(ld->err, GRT_ERR_IO, t->name, true, t->file_offset, "read failed: %s", strerror((int)-got));
    else if ((uint64_t)got < n)
      s = grt__io_fail(ld->err, GRT_ERR_IO, t->name, true, t->file_offset + (uint64_t)got,
                       "the file ends early: read %lld of %llu bytes", (long long)got, (unsigned long long)n);
    if (!s) s = grt__load_copy(ld, t->file_offset, buf, n);
    grt_status w = grt__copier_drain(&ld->copy); /* the buffer goes once its copy is done */
    if (!s && w) s = grt__io_fail(ld->err, w, t->name, true, t->file_offset, "the copy to the device failed");
    free(buf);
    grt__load_host(ld, -(int64_t)n);
    if (!s) grt__load_progress(ld, n);
  }
  return s;
}
