/* load_pipeline.c — the staged load: K page-aligned, page-locked staging
 * buffers of one chunk each; chunk c is read into buffer c mod K (io_uring,
 * up to queue_depth reads in flight, or pread), then copied to the device on
 * the copy stream, and an event recorded after its copies frees the buffer
 * for chunk c + K. So the reads of the next chunks overlap the copy of this
 * one, and host memory stays K x chunk whatever the file's size.
 *
 * With O_DIRECT each read's offset and length are multiples of the file
 * system's alignment: the first read starts at the aligned offset below the
 * byte buffer and the last one may end past the end of the file (a short
 * read); grt__load_copy drops the header bytes and the tail. */
#include <errno.h>
#include <liburing.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/io_impl.h"

typedef struct slot {
  unsigned char *buf;
  bool busy;           /* a copy from it may be in flight (the copier's slot event tells when it is done) */
  uint64_t chunk;      /* the chunk in it */
} slot;

typedef struct pipe_state {
  grt__load *ld;
  slot *slots;
  unsigned k;
  uint64_t chunk, first, end; /* chunk bytes; the first read's offset; where the reads end */
  uint64_t n_chunks;
  struct io_uring ring;
  bool ring_up, fixed;
  unsigned depth;
} pipe_state;

static uint64_t round_up(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }

static grt_status make_slots(pipe_state *p) {
  grt__load *ld = p->ld;
  uint64_t page = 4096, align = ld->mem_align > page ? ld->mem_align : page;
  p->slots = calloc(p->k, sizeof *p->slots);
  if (!p->slots) return grt__io_fail(ld->err, GRT_ERR_NOMEM, NULL, false, 0, "out of host memory");
  for (unsigned i = 0; i < p->k; i++) {
    void *b = NULL;
    grt_status s = grt__copier_host_alloc(&ld->copy, p->chunk, align, &b, ld->l->stats.io_note,
                                          sizeof ld->l->stats.io_note);
    if (s)
      return grt__io_fail(ld->err, s, NULL, false, 0, "cannot allocate %u staging buffers of %llu bytes", p->k,
                          (unsigned long long)p->chunk);
    p->slots[i].buf = b;
    grt__load_host(ld, (int64_t)p->chunk);
  }
  return GRT_OK;
}

static void free_slots(pipe_state *p) {
  if (!p->slots) return;
  grt_status s = grt__copier_drain(&p->ld->copy); /* the copy stream's close reports a failed copy */
  (void)s;
  for (unsigned i = 0; i < p->k; i++) {
    if (!p->slots[i].buf) continue;
    grt__copier_host_free(&p->ld->copy, p->slots[i].buf, p->chunk);
    grt__load_host(p->ld, -(int64_t)p->chunk);
  }
  free(p->slots);
}

/* Waits until slot i's last copy is done, so a read may fill it. */
static grt_status reclaim(pipe_state *p, unsigned i) {
  if (!p->slots[i].busy) return GRT_OK;
  grt_status s = grt__copier_wait(&p->ld->copy, i);
  p->slots[i].busy = false;
  return s ? grt__io_fail(p->ld->err, s, NULL, false, 0, "a copy to the device failed") : GRT_OK;
}

static uint64_t chunk_off(const pipe_state *p, uint64_t c) { return p->first + c * p->chunk; }
static uint64_t chunk_len(const pipe_state *p, uint64_t c) {
  uint64_t off = chunk_off(p, c);
  return p->end - off < p->chunk ? p->end - off : p->chunk;
}

/* A filled chunk (got bytes of it) goes to the device; its slot is busy until the copies end. */
static grt_status ship(pipe_state *p, uint64_t c, uint64_t got) {
  grt__load *ld = p->ld;
  slot *sl = &p->slots[c % p->k];
  uint64_t off = chunk_off(p, c), data_end = ld->l->st->data_offset + ld->l->st->data_size;
  if (got < chunk_len(p, c) && off + got < data_end)
    return grt__io_fail(ld->err, GRT_ERR_IO, grt__load_tensor_at(ld, off + got), true, off + got,
                        "the file ends early: read %llu of %llu bytes", (unsigned long long)got,
                        (unsigned long long)chunk_len(p, c));
  grt_status s = grt__load_copy(ld, off, sl->buf, got);
  if (!s && (s = grt__copier_mark(&ld->copy, (unsigned)(c % p->k))))
    s = grt__io_fail(ld->err, s, NULL, false, 0, "cannot record the copy's event");
  if (s) return s;
  sl->busy = true;
  uint64_t lo = off > ld->l->st->data_offset ? off : ld->l->st->data_offset;
  grt__load_progress(ld, off + got > lo ? off + got - lo : 0);
  return GRT_OK;
}

static grt_status read_failed(pipe_state *p, uint64_t c, int e) {
  uint64_t off = chunk_off(p, c);
  return grt__io_fail(p->ld->err, GRT_ERR_IO, grt__load_tensor_at(p->ld, off < p->ld->l->st->data_offset
                                                                            ? p->ld->l->st->data_offset
                                                                            : off),
                      true, off, "read of %llu bytes failed: %s", (unsigned long long)chunk_len(p, c), strerror(e));
}

static grt_status run_pread(pipe_state *p) {
  for (uint64_t c = 0; c < p->n_chunks; c++) {
    grt_status s = reclaim(p, (unsigned)(c % p->k));
    if (s) return s;
    int64_t got = grt__load_pread(p->ld, p->slots[c % p->k].buf, chunk_len(p, c), chunk_off(p, c));
    if (got < 0) return read_failed(p, c, (int)-got);
    if ((s = ship(p, c, (uint64_t)got))) return s;
  }
  return GRT_OK;
}

/* ---- io_uring ---- */

static grt_status ring_up(pipe_state *p) {
  grt__load *ld = p->ld;
  p->depth = ld->cfg->queue_depth ? ld->cfg->queue_depth : p->k;
  if (p->depth > p->k) p->depth = p->k;
  int rc = io_uring_queue_init(p->depth, &p->ring, 0);
  if (rc < 0) return grt__io_fail(ld->err, GRT_ERR_UNSUPPORTED, NULL, false, 0, "io_uring: %s", strerror(-rc));
  p->ring_up = true;
  if (!ld->cfg->register_buffers) return GRT_OK;
  struct iovec *iov = calloc(p->k, sizeof *iov);
  if (!iov) return grt__io_fail(ld->err, GRT_ERR_NOMEM, NULL, false, 0, "out of host memory");
  for (unsigned i = 0; i < p->k; i++) iov[i] = (struct iovec){p->slots[i].buf, p->chunk};
  rc = io_uring_register_buffers(&p->ring, iov, p->k);
  free(iov);
  p->fixed = rc == 0;
  ld->l->stats.fixed_buffers = p->fixed;
  if (rc && !ld->l->stats.io_note[0])
    snprintf(ld->l->stats.io_note, sizeof ld->l->stats.io_note, "io_uring fixed buffers refused (%s)", strerror(-rc));
  return GRT_OK;
}

/* Queues the read of chunk c (its slot reclaimed). */
static grt_status submit_read(pipe_state *p, uint64_t c, uint64_t have) {
  unsigned i = (unsigned)(c % p->k);
  struct io_uring_sqe *sqe = io_uring_get_sqe(&p->ring);
  if (!sqe) return grt__io_fail(p->ld->err, GRT_ERR_INTERNAL, NULL, false, 0, "io_uring: no free submission entry");
  unsigned len = (unsigned)(chunk_len(p, c) - have);
  if (p->fixed) io_uring_prep_read_fixed(sqe, p->ld->fd, p->slots[i].buf + have, len, chunk_off(p, c) + have, (int)i);
  else io_uring_prep_read(sqe, p->ld->fd, p->slots[i].buf + have, len, chunk_off(p, c) + have);
  io_uring_sqe_set_data64(sqe, c);
  p->slots[i].chunk = c;
  return GRT_OK;
}

static grt_status run_uring(pipe_state *p) {
  grt_status s = ring_up(p);
  uint64_t next = 0, shipped = 0, inflight = 0;
  uint64_t *got = s ? NULL : calloc(p->n_chunks ? p->n_chunks : 1, sizeof *got);
  bool *ready = got ? calloc(p->n_chunks ? p->n_chunks : 1, sizeof *ready) : NULL;
  if (!s && !ready) s = grt__io_fail(p->ld->err, GRT_ERR_NOMEM, NULL, false, 0, "out of host memory");
  while (!s && shipped < p->n_chunks) {
    /* keep depth reads in flight, never more than k chunks ahead of the copies */
    while (!s && next < p->n_chunks && inflight < p->depth && next < shipped + p->k) {
      if (!(s = reclaim(p, (unsigned)(next % p->k))) && !(s = submit_read(p, next, 0))) next++, inflight++;
    }
    if (s) break;
    if (io_uring_submit(&p->ring) < 0) s = grt__io_fail(p->ld->err, GRT_ERR_IO, NULL, false, 0, "io_uring_submit failed");
    struct io_uring_cqe *cqe = NULL;
    while (!s && inflight && !ready[shipped]) {
      int rc = io_uring_wait_cqe(&p->ring, &cqe);
      if (rc == -EINTR) continue;
      if (rc < 0) {
        s = grt__io_fail(p->ld->err, GRT_ERR_IO, NULL, false, 0, "io_uring_wait_cqe: %s", strerror(-rc));
        break;
      }
      uint64_t c = io_uring_cqe_get_data64(cqe);
      int res = grt__load_inject(p->ld) ? -EIO : cqe->res;
      io_uring_cqe_seen(&p->ring, cqe);
      inflight--;
      if (res < 0) s = read_failed(p, c, -res);
      else if (res > 0 && (got[c] += (uint64_t)res) < chunk_len(p, c)) { /* a short read: ask for the rest */
        if (!(s = submit_read(p, c, got[c])) && (inflight++, io_uring_submit(&p->ring) < 0))
          s = grt__io_fail(p->ld->err, GRT_ERR_IO, NULL, false, 0, "io_uring_submit failed");
      } else ready[c] = true;
    }
    /* copies go in file order: chunk shipped waits for its own read only */
    while (!s && shipped < next && ready[shipped]) s = ship(p, shipped, got[shipped]), shipped++;
  }
  while (p->ring_up && inflight) { /* a failure: the reads in flight still write into the buffers */
    struct io_uring_cqe *cqe;
    if (io_uring_wait_cqe(&p->ring, &cqe) == 0) io_uring_cqe_seen(&p->ring, cqe), inflight--;
    else break;
  }
  free(got);
  free(ready);
  return s;
}

grt_status grt__load_pipeline(grt__load *ld, bool uring) {
  const grt_safetensors *st = ld->l->st;
  pipe_state p = {.ld = ld, .k = ld->cfg->buffers};
  p.chunk = round_up(ld->cfg->chunk_bytes, ld->align > 4096 ? ld->align : 4096);
  p.first = st->data_offset / ld->align * ld->align;
  p.end = round_up(st->data_offset + st->data_size, ld->align);
  p.n_chunks = st->data_size ? (p.end - p.first + p.chunk - 1) / p.chunk : 0;
  if (p.n_chunks >> 32) return grt__io_fail(ld->err, GRT_ERR_SIZE, NULL, false, 0, "more than 2^32 chunks: a larger chunk");
  grt_status s = make_slots(&p);
  if (!s) s = uring ? run_uring(&p) : run_pread(&p);
  if (p.ring_up) io_uring_queue_exit(&p.ring);
  free_slots(&p);
  return s;
}
