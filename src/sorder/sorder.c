/* sorder.c — the stream-ordered context: the instrumented front door (every
 * call mirrors one exec call into the sanitizer's clocks), the debug mode
 * (serialized streams, poisoned frees with a poison check in kernel bodies),
 * the report list, and the hooks the pools call.
 *
 * Serialization: each op issued through the context first waits for a shared
 * event that the previous op recorded, so all of them run in issue order.
 * Those edges belong to the debug schedule, not to the program: they are not
 * fed into the clocks, so the sanitizer still reports the program's missing
 * edges while the schedule reproduces its corruption deterministically.
 */
#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "base/status.h"
#include "sorder/sorder_impl.h"

void grt_sorder_config_default(grt_sorder_config *cfg) {
  if (!cfg) return;
  memset(cfg, 0, sizeof *cfg);
  cfg->sanitize = 1;
  cfg->use_env = 1;
  cfg->max_reports = 1024;
}

grt_status grt_sorder_create(const grt_sorder_config *cfg, grt_sorder **out) {
  if (!out) return GRT_ERR_INVALID_ARG;
  *out = NULL;
  if (!cfg || !cfg->exec) return GRT_ERR_INVALID_ARG;
  grt_sorder *so = calloc(1, sizeof *so);
  if (!so) return GRT_ERR_NOMEM;
  so->cfg = *cfg;
  so->exec = cfg->exec;
  so->serialize = cfg->serialize;
  so->poison = cfg->poison;
  const char *env = cfg->use_env ? getenv("GRT_SORDER_DEBUG") : NULL;
  if (env && *env && strcmp(env, "0") != 0) so->serialize = so->poison = 1;
  grt_status st = grt_exec_get_device(cfg->exec, &so->dev);
  if (!st) st = grt_event_create(cfg->exec, GRT_EVENT_DISABLE_TIMING, &so->serial_ev);
  if (st) {
    free(so);
    return st;
  }
  st = grt_event_set_name(so->serial_ev, "sorder-serialize"); /* a fresh event: cannot fail */
  assert(st == GRT_OK);
  pthread_mutex_init(&so->lock, NULL);
  pthread_mutex_init(&so->rlock, NULL);
  grt__hb_init(so);
  *out = so;
  return GRT_OK;
}

grt_status grt_sorder_destroy(grt_sorder *so) {
  if (!so) return GRT_OK;
  pthread_mutex_lock(&so->lock);
  unsigned users = so->users;
  pthread_mutex_unlock(&so->lock);
  if (users) return GRT_ERR_BUSY;
  /* Wrapped bodies still queued use their wrappers: let them finish first. */
  pthread_mutex_lock(&so->rlock);
  bool wrapped = so->all_wraps != NULL;
  pthread_mutex_unlock(&so->rlock);
  /* A sticky exec error does not stop the teardown; it is reported. */
  grt_status st = wrapped ? grt_exec_synchronize(so->exec) : GRT_OK;
  grt__keep_first(&st, grt_event_destroy(so->serial_ev));
  grt__hb_free(so);
  for (grt__so_wrap *w = so->all_wraps, *n; w; w = n) {
    n = w->all_next;
    free(w);
  }
  free(so->reports);
  pthread_mutex_destroy(&so->lock);
  pthread_mutex_destroy(&so->rlock);
  free(so);
  return st;
}

grt_status grt_sorder_set_debug(grt_sorder *so, int serialize, int poison) {
  if (!so) return GRT_ERR_INVALID_ARG;
  pthread_mutex_lock(&so->lock);
  so->serialize = !!serialize;
  so->poison = !!poison;
  pthread_mutex_unlock(&so->lock);
  return GRT_OK;
}

grt_status grt_sorder_get_debug(grt_sorder *so, int *serialize, int *poison) {
  if (!so || !serialize || !poison) return GRT_ERR_INVALID_ARG;
  pthread_mutex_lock(&so->lock);
  *serialize = so->serialize;
  *poison = so->poison;
  pthread_mutex_unlock(&so->lock);
  return GRT_OK;
}

/* ---- reports ---- */

const char *grt_sorder_report_kind_name(grt_sorder_report_kind k) {
  switch (k) {
  case GRT_SORDER_RACE: return "race";
  case GRT_SORDER_USE_AFTER_FREE: return "use-after-free";
  case GRT_SORDER_POISON_READ: return "poison-read";
  }
  return "unknown";
}

static const char *verb(int w) {
  static const char *v[] = {"read", "write", "free", "allocation"};
  return w >= 0 && w < 4 ? v[w] : "access";
}

void grt__so_ref_out(grt_sorder *so, const grt__hb_ref *r, grt_sorder_op_ref *out) {
  memset(out, 0, sizeof *out);
  snprintf(out->op, sizeof out->op, "%s", r->op);
  out->seq = r->seq;
  out->write = r->write;
  const grt__hb_stream *t = &so->streams[r->stream];
  out->stream_id = t->id;
  if (r->stream == GRT__HB_HOST || grt_stream_get_name(t->s, out->stream, sizeof out->stream))
    snprintf(out->stream, sizeof out->stream, "host");
}

void grt__so_add_report(grt_sorder *so, const grt_sorder_report *r) {
  pthread_mutex_lock(&so->rlock);
  so->total_reports++;
  if (so->n_reports < so->cfg.max_reports) {
    grt_sorder_report *v = realloc(so->reports, (so->n_reports + 1) * sizeof *v);
    if (v) {
      so->reports = v;
      v[so->n_reports++] = *r;
    }
  }
  pthread_mutex_unlock(&so->rlock);
}

void grt__so_report(grt_sorder *so, grt_sorder_report_kind kind, grt_devptr buf, const grt__hb_ref *access,
                    const grt__hb_ref *prior) {
  grt_sorder_report r;
  memset(&r, 0, sizeof r);
  r.kind = kind;
  r.buffer = buf;
  grt__so_ref_out(so, access, &r.access);
  grt__so_ref_out(so, prior, &r.prior);
  const grt_sorder_op_ref *a = &r.access, *p = &r.prior;
  if (kind == GRT_SORDER_USE_AFTER_FREE)
    snprintf(r.text, sizeof r.text, "use after free of 0x%llx: %s by '%s' on stream '%s' (#%llu) after '%s' on stream '%s' (#%llu)",
             (unsigned long long)buf, verb(a->write), a->op, a->stream, (unsigned long long)a->seq, p->op, p->stream,
             (unsigned long long)p->seq);
  else
    snprintf(r.text, sizeof r.text, "race on 0x%llx: %s by '%s' on stream '%s' (#%llu) is not ordered after %s by '%s' on stream '%s' (#%llu)",
             (unsigned long long)buf, verb(a->write), a->op, a->stream, (unsigned long long)a->seq, verb(p->write),
             p->op, p->stream, (unsigned long long)p->seq);
  grt__so_add_report(so, &r);
}

grt_status grt_sorder_report_count(grt_sorder *so, size_t *kept, uint64_t *total) {
  if (!so || (!kept && !total)) return GRT_ERR_INVALID_ARG;
  pthread_mutex_lock(&so->rlock);
  if (kept) *kept = so->n_reports;
  if (total) *total = so->total_reports;
  pthread_mutex_unlock(&so->rlock);
  return GRT_OK;
}

grt_status grt_sorder_get_report(grt_sorder *so, size_t i, grt_sorder_report *out) {
  if (!so || !out) return GRT_ERR_INVALID_ARG;
  pthread_mutex_lock(&so->rlock);
  grt_status st = i < so->n_reports ? GRT_OK : GRT_ERR_NOT_FOUND;
  if (!st) *out = so->reports[i];
  pthread_mutex_unlock(&so->rlock);
  return st;
}

grt_status grt_sorder_clear_reports(grt_sorder *so) {
  if (!so) return GRT_ERR_INVALID_ARG;
  pthread_mutex_lock(&so->rlock);
  so->n_reports = 0;
  so->total_reports = 0;
  pthread_mutex_unlock(&so->rlock);
  return GRT_OK;
}

grt_status grt_sorder_print_reports(grt_sorder *so, FILE *f) {
  if (!so || !f) return GRT_ERR_INVALID_ARG;
  pthread_mutex_lock(&so->rlock);
  for (size_t i = 0; i < so->n_reports; i++)
    fprintf(f, "[%s] %s\n", grt_sorder_report_kind_name(so->reports[i].kind), so->reports[i].text);
  if (so->total_reports > so->n_reports)
    fprintf(f, "(%llu more not kept)\n", (unsigned long long)(so->total_reports - so->n_reports));
  pthread_mutex_unlock(&so->rlock);
  return GRT_OK;
}

/* ---- poison ---- */

void grt__sorder_poison_fill(void *host, uint64_t bytes) {
  unsigned char *p = host;
  uint64_t i = 0;
  for (; i < bytes && ((uintptr_t)(p + i) & 7); i++) __atomic_store_n(p + i, GRT__POISON_BYTE, __ATOMIC_RELAXED);
  for (; i + 8 <= bytes; i += 8) __atomic_store_n((uint64_t *)(void *)(p + i), GRT__POISON_WORD, __ATOMIC_RELAXED);
  for (; i < bytes; i++) __atomic_store_n(p + i, GRT__POISON_BYTE, __ATOMIC_RELAXED);
}

/* Offset of the first aligned all-poison word in [p, p+bytes), or -1. Real data
 * equal to 0xDBDBDBDBDBDBDBDB is reported too: a documented false positive. */
static int64_t find_poison(const unsigned char *p, uint64_t bytes) {
  uint64_t i = (8 - ((uintptr_t)p & 7)) & 7;
  for (; i + 8 <= bytes; i += 8)
    if (__atomic_load_n((const uint64_t *)(const void *)(p + i), __ATOMIC_RELAXED) == GRT__POISON_WORD)
      return (int64_t)i;
  return -1;
}

static void wrap_body(void *arg) {
  grt__so_wrap *w = arg;
  grt_sorder *so = w->so;
  for (size_t k = 0; k < w->n; k++) {
    void *h;
    if (grt_device_host_ptr(so->dev, w->acc[k].ptr, w->acc[k].bytes, &h)) continue;
    int64_t off = find_poison(h, w->acc[k].bytes);
    if (off < 0) continue;
    grt_sorder_report r;
    memset(&r, 0, sizeof r);
    r.kind = GRT_SORDER_POISON_READ;
    r.buffer = w->acc[k].ptr;
    snprintf(r.access.op, sizeof r.access.op, "%s", w->ref.op);
    snprintf(r.access.stream, sizeof r.access.stream, "%s", w->stream_name);
    r.access.stream_id = w->stream_id;
    r.access.seq = w->ref.seq;
    snprintf(r.text, sizeof r.text, "poison read of 0x%llx: '%s' on stream '%s' read freed memory (0xDB at offset %lld)",
             (unsigned long long)r.buffer, w->ref.op, w->stream_name, (long long)off);
    grt__so_add_report(so, &r);
  }
  if (w->fn) w->fn(w->arg);
  pthread_mutex_lock(&so->rlock);
  w->next = so->free_wraps;
  so->free_wraps = w;
  pthread_mutex_unlock(&so->rlock);
}

static grt__so_wrap *wrap_get(grt_sorder *so) {
  pthread_mutex_lock(&so->rlock);
  grt__so_wrap *w = so->free_wraps;
  if (w) so->free_wraps = w->next;
  else if ((w = calloc(1, sizeof *w))) {
    w->all_next = so->all_wraps;
    so->all_wraps = w;
  }
  pthread_mutex_unlock(&so->rlock);
  return w;
}

static void wrap_put(grt_sorder *so, grt__so_wrap *w) {
  pthread_mutex_lock(&so->rlock);
  w->next = so->free_wraps;
  so->free_wraps = w;
  pthread_mutex_unlock(&so->rlock);
}

/* ---- the front door ---- */

/* Locks so and resolves s's clock index (when sanitizing); unlocks on failure. */
static grt_status enter(grt_sorder *so, grt_stream *s, int *idx) {
  if (!so || !s) return GRT_ERR_INVALID_ARG;
  pthread_mutex_lock(&so->lock);
  grt_status st = GRT_OK;
  *idx = so->cfg.sanitize ? grt__hb_stream_index(so, s, &st) : 0;
  if (st) pthread_mutex_unlock(&so->lock);
  return st;
}

static grt_status serial_before(grt_sorder *so, grt_stream *s) {
  return so->serialize ? grt_stream_wait_event(s, so->serial_ev) : GRT_OK;
}

/* The launch was issued: a failed record (a sticky exec error) is the call's result. */
static grt_status serial_after(grt_sorder *so, grt_stream *s) {
  return so->serialize ? grt_event_record(so->serial_ev, s) : GRT_OK;
}

static void mirror(grt_sorder *so, int i, const char *name, const grt_access *acc, size_t n) {
  if (!so->cfg.sanitize || grt__hb_issue(so, i)) return;
  int any_write = 0;
  for (size_t k = 0; k < n; k++) any_write |= acc[k].write != 0;
  grt__hb_ref r = grt__hb_op(so, i, name, any_write);
  for (size_t k = 0; k < n; k++) {
    r.write = acc[k].write != 0;
    grt__hb_access(so, i, &r, acc[k].ptr, acc[k].bytes, acc[k].write ? GRT__HB_WRITE : GRT__HB_READ);
  }
}

grt_status grt_sorder_launch(grt_sorder *so, grt_stream *s, const grt_kernel_desc *desc, const grt_access *acc,
                             size_t n) {
  if (!desc || (n && !acc)) return GRT_ERR_INVALID_ARG;
  int i;
  grt_status st = enter(so, s, &i);
  if (st) return st;
  grt_kernel_desc d = *desc;
  grt__so_wrap *w = NULL;
  if (so->poison && n) {
    if (!(w = wrap_get(so))) st = GRT_ERR_NOMEM;
    else {
      w->so = so;
      w->fn = desc->fn;
      w->arg = desc->arg;
      w->n = 0;
      for (size_t k = 0; k < n && w->n < 8; k++)
        if (!acc[k].write) w->acc[w->n++] = acc[k];
      if (grt_stream_get_id(s, &w->stream_id)) w->stream_id = 0; /* s was checked on entry */
      if (grt_stream_get_name(s, w->stream_name, sizeof w->stream_name)) w->stream_name[0] = '\0';
      /* the body may run before this call returns: name and number it now */
      snprintf(w->ref.op, sizeof w->ref.op, "%s", desc->name ? desc->name : "kernel");
      const grt__hb_clock *c = so->cfg.sanitize ? &so->streams[i].vc : NULL;
      w->ref.seq = c && (uint32_t)i < c->n ? c->v[i] + 1 : 0;
      d.fn = wrap_body;
      d.arg = w;
    }
  }
  if (!st) st = serial_before(so, s);
  if (!st) st = grt_launch_kernel(s, &d);
  if (st) {
    if (w) wrap_put(so, w);
  } else {
    mirror(so, i, desc->name, acc, n);
    st = serial_after(so, s);
  }
  pthread_mutex_unlock(&so->lock);
  return st;
}

static grt_status mem_front(grt_sorder *so, grt_stream *s, int kind, grt_devptr dev, void *host, int value,
                            uint64_t bytes) {
  int i;
  grt_status st = enter(so, s, &i);
  if (st) return st;
  if (!(st = serial_before(so, s))) {
    if (kind == 0) st = grt_memcpy_h2d_async(s, dev, host, bytes);
    else if (kind == 1) st = grt_memcpy_d2h_async(s, host, dev, bytes);
    else st = grt_memset_async(s, dev, value, bytes);
  }
  if (!st) {
    static const char *names[] = {"memcpy_h2d", "memcpy_d2h", "memset"};
    grt_access a = {dev, bytes, kind != 1};
    mirror(so, i, names[kind], &a, bytes ? 1 : 0);
    st = serial_after(so, s);
  }
  pthread_mutex_unlock(&so->lock);
  return st;
}

grt_status grt_sorder_memcpy_h2d(grt_sorder *so, grt_stream *s, grt_devptr dst, const void *src, uint64_t bytes) {
  return mem_front(so, s, 0, dst, (void *)(uintptr_t)src, 0, bytes);
}

grt_status grt_sorder_memcpy_d2h(grt_sorder *so, grt_stream *s, void *dst, grt_devptr src, uint64_t bytes) {
  return mem_front(so, s, 1, src, dst, 0, bytes);
}

grt_status grt_sorder_memset(grt_sorder *so, grt_stream *s, grt_devptr dst, int value, uint64_t bytes) {
  return mem_front(so, s, 2, dst, NULL, value, bytes);
}

grt_status grt_sorder_event_record(grt_sorder *so, grt_event *ev, grt_stream *s) {
  int i;
  grt_status st = enter(so, s, &i);
  if (st) return st;
  st = grt_event_record(ev, s);
  if (!st && so->cfg.sanitize && !(st = grt__hb_issue(so, i))) st = grt__hb_record(so, i, ev);
  pthread_mutex_unlock(&so->lock);
  return st;
}

grt_status grt_sorder_stream_wait_event(grt_sorder *so, grt_stream *s, grt_event *ev) {
  int i;
  grt_status st = enter(so, s, &i);
  if (st) return st;
  st = grt_stream_wait_event(s, ev);
  if (!st && so->cfg.sanitize && !(st = grt__hb_issue(so, i))) st = grt__hb_wait(so, i, ev);
  pthread_mutex_unlock(&so->lock);
  return st;
}

/* Ensures the host's clock exists (index 0). */
static grt_status host_ready(grt_sorder *so) {
  if (so->n_streams) return GRT_OK;
  grt_stream *leg;
  grt_status st = grt_exec_legacy_stream(so->exec, &leg);
  if (!st) grt__hb_stream_index(so, leg, &st); /* creates the host entry first */
  return st;
}

/* Joins a snapshot into the host's clock after an unlocked synchronization. */
static grt_status host_join(grt_sorder *so, grt__hb_clock *snap, grt_status st) {
  if (!st && so->cfg.sanitize) {
    pthread_mutex_lock(&so->lock);
    if (!(st = host_ready(so))) st = grt__hb_join(&so->streams[GRT__HB_HOST].vc, snap);
    pthread_mutex_unlock(&so->lock);
  }
  grt__hb_clock_free(snap);
  return st;
}

grt_status grt_sorder_stream_synchronize(grt_sorder *so, grt_stream *s) {
  int i;
  grt_status st = enter(so, s, &i);
  if (st) return st;
  grt__hb_clock snap = {NULL, 0, 0};
  if (so->cfg.sanitize) st = grt__hb_clock_copy(&snap, &so->streams[i].vc);
  pthread_mutex_unlock(&so->lock);
  if (!st) st = grt_stream_synchronize(s);
  return host_join(so, &snap, st);
}

static grt_status event_snapshot(grt_sorder *so, grt_event *ev, grt__hb_clock *snap) {
  if (!so || !ev) return GRT_ERR_INVALID_ARG;
  pthread_mutex_lock(&so->lock);
  grt__hb_clock *c = so->cfg.sanitize ? grt__hb_event_clock(so, ev) : NULL;
  grt_status st = c ? grt__hb_clock_copy(snap, c) : GRT_OK;
  pthread_mutex_unlock(&so->lock);
  return st;
}

grt_status grt_sorder_event_synchronize(grt_sorder *so, grt_event *ev) {
  grt__hb_clock snap = {NULL, 0, 0};
  grt_status st = event_snapshot(so, ev, &snap);
  if (!st) st = grt_event_synchronize(ev);
  return so ? host_join(so, &snap, st) : st;
}

grt_status grt_sorder_event_query(grt_sorder *so, grt_event *ev) {
  grt__hb_clock snap = {NULL, 0, 0};
  grt_status st = event_snapshot(so, ev, &snap);
  if (!st) st = grt_event_query(ev);
  return so ? host_join(so, &snap, st) : st;
}

grt_status grt_sorder_synchronize(grt_sorder *so) {
  if (!so) return GRT_ERR_INVALID_ARG;
  grt__hb_clock snap = {NULL, 0, 0};
  grt_status st = GRT_OK;
  pthread_mutex_lock(&so->lock);
  for (size_t j = 1; j < so->n_streams && !st && so->cfg.sanitize; j++) st = grt__hb_join(&snap, &so->streams[j].vc);
  pthread_mutex_unlock(&so->lock);
  if (!st) st = grt_exec_synchronize(so->exec);
  return host_join(so, &snap, st);
}

grt_status grt_sorder_host_access(grt_sorder *so, grt_devptr ptr, uint64_t bytes, int write) {
  if (!so || !bytes) return GRT_ERR_INVALID_ARG;
  pthread_mutex_lock(&so->lock);
  grt_status st = so->cfg.sanitize ? host_ready(so) : GRT_OK;
  if (!st && so->cfg.sanitize) {
    grt__hb_ref r = grt__hb_op(so, GRT__HB_HOST, write ? "host write" : "host read", write != 0);
    grt__hb_access(so, GRT__HB_HOST, &r, ptr, bytes, write ? GRT__HB_WRITE : GRT__HB_READ);
  }
  pthread_mutex_unlock(&so->lock);
  return st;
}

/* ---- hooks for the pools ---- */

grt_status grt__sorder_attach(grt_sorder *so, grt_exec *exec) {
  pthread_mutex_lock(&so->lock);
  grt_status st = so->exec == exec ? GRT_OK : GRT_ERR_WRONG_DEVICE;
  if (!st) so->users++;
  pthread_mutex_unlock(&so->lock);
  return st;
}

void grt__sorder_detach(grt_sorder *so) {
  pthread_mutex_lock(&so->lock);
  so->users--;
  pthread_mutex_unlock(&so->lock);
}

grt_status grt__sorder_free_async(grt_sorder *so, grt_devptr ptr, uint64_t bytes, grt_stream *s, grt_event *ev) {
  int i;
  grt_status st = enter(so, s, &i);
  if (st) return st;
  /* Poison in stream order: the bytes change only once the stream reaches the free. */
  if (so->poison) st = grt_memset_async(s, ptr, GRT__POISON_BYTE, bytes);
  if (!st) st = grt_event_record(ev, s);
  if (!st && so->cfg.sanitize && !(st = grt__hb_issue(so, i))) {
    grt__hb_ref r = grt__hb_op(so, i, "free_async", 2);
    grt__hb_access(so, i, &r, ptr, bytes, GRT__HB_FREE);
    st = grt__hb_record(so, i, ev);
  }
  pthread_mutex_unlock(&so->lock);
  return st;
}

grt_status grt__sorder_free_host(grt_sorder *so, grt_devptr ptr, uint64_t bytes) {
  pthread_mutex_lock(&so->lock);
  grt_status st = so->cfg.sanitize ? host_ready(so) : GRT_OK;
  if (!st && so->cfg.sanitize) {
    grt__hb_ref r = grt__hb_op(so, GRT__HB_HOST, "host-order free", 2);
    grt__hb_access(so, GRT__HB_HOST, &r, ptr, bytes, GRT__HB_FREE);
  }
  void *h;
  if (!st && so->poison && !grt_device_host_ptr(so->dev, ptr, bytes, &h)) grt__sorder_poison_fill(h, bytes);
  pthread_mutex_unlock(&so->lock);
  return st;
}

grt_status grt__sorder_prepare(grt_sorder *so, grt_stream *s) {
  if (!so->cfg.sanitize) return GRT_OK;
  int i;
  grt_status st = enter(so, s, &i);
  if (st) return st;
  st = grt__hb_issue(so, i); /* the joins an op on s makes anyway: only knowledge it would gain */
  pthread_mutex_unlock(&so->lock);
  return st;
}

grt_status grt__sorder_alloc(grt_sorder *so, grt_devptr ptr, uint64_t bytes, grt_stream *s) {
  if (!so->cfg.sanitize) return GRT_OK;
  int i;
  grt_status st = enter(so, s, &i);
  if (st) return st;
  if (!(st = grt__hb_issue(so, i))) {
    grt__hb_ref r = grt__hb_op(so, i, "malloc_async", 3);
    grt__hb_access(so, i, &r, ptr, bytes, GRT__HB_ALLOC);
  }
  pthread_mutex_unlock(&so->lock);
  return st;
}

grt_status grt__sorder_ordered(grt_sorder *so, grt_stream *s, grt_event *ev) {
  if (!so->cfg.sanitize) return GRT_OK;
  int i;
  grt_status st = enter(so, s, &i);
  if (st) return st;
  st = grt__hb_wait(so, i, ev);
  pthread_mutex_unlock(&so->lock);
  return st;
}

void grt__sorder_free_done(grt_sorder *so, grt_devptr ptr) {
  pthread_mutex_lock(&so->lock);
  grt__hb_free_done(so, ptr);
  pthread_mutex_unlock(&so->lock);
}
