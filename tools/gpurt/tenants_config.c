/* tenants_config.c — the text format of `gpurt tenants --config FILE`
 * (docs/TENANTS.md): a `gpu` line, then per tenant a `tenant` line followed
 * by its `kernel` lines, each a list of key=value words; '#' starts a
 * comment. Sizes take K/M/G/T (powers of 1024, as every gpurt option),
 * times ns/us/ms/s, a kernel's work SM-ns or SMSxTIME ("66x40us"); a
 * kernel waits for the one before it unless after=K or after=none. Every
 * mistake names the file, the line and the word. */
#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "tenants_run.h"

typedef struct reader {
  const char *cmd, *path;
  int line;
  tenants_mix *mix;
  bool gpu_seen;
} reader;

static int bad(const reader *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int bad(const reader *r, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "gpurt %s: %s:%d: ", r->cmd, r->path, r->line);
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
  va_end(ap);
  return 2;
}

/* A non-negative decimal number and the suffix after it. */
static bool number(const char *s, double *v, const char **suffix) {
  if (!s || !((*s >= '0' && *s <= '9') || *s == '.')) return false;
  char *end;
  errno = 0;
  *v = strtod(s, &end);
  *suffix = end;
  return !errno && *v >= 0 && *v < 0x1p63;
}

static bool size_of(const char *s, uint64_t *out) {
  double v, mult = 1;
  const char *u;
  if (!number(s, &v, &u)) return false;
  if (*u) {
    const char *units = "kmgt";
    const char *at = strchr(units, *u | 0x20);
    if (!at) return false;
    for (long i = 0; i <= at - units; i++) mult *= 1024;
    u++;
    if (*u && strcasecmp(u, "b") && strcasecmp(u, "ib")) return false;
  }
  if (v * mult >= 0x1p63) return false;
  *out = (uint64_t)(v * mult);
  return true;
}

static bool time_of(const char *s, uint64_t *out) {
  double v, mult;
  const char *u;
  if (!number(s, &v, &u)) return false;
  if (!strcmp(u, "ns") || !*u)
    mult = 1;
  else if (!strcmp(u, "us"))
    mult = 1e3;
  else if (!strcmp(u, "ms"))
    mult = 1e6;
  else if (!strcmp(u, "s"))
    mult = 1e9;
  else
    return false;
  if (v * mult >= 0x1p63) return false;
  *out = (uint64_t)(v * mult + 0.5);
  return true;
}

static bool u32_of(const char *s, uint32_t *out) {
  double v;
  const char *u;
  if (!number(s, &v, &u) || *u || v > UINT32_MAX || v != (double)(uint32_t)v) return false;
  *out = (uint32_t)v;
  return true;
}

/* SMSxTIME, or a plain number of SM-ns. */
static bool work_of(const char *s, uint64_t *out) {
  const char *x = strchr(s, 'x');
  uint32_t sms;
  uint64_t t;
  if (!x) return size_of(s, out) && *out > 0;
  char head[32];
  if ((size_t)(x - s) >= sizeof head) return false;
  memcpy(head, s, (size_t)(x - s));
  head[x - s] = 0;
  if (!u32_of(head, &sms) || !time_of(x + 1, &t) || (t && sms > UINT64_MAX / t)) return false;
  *out = (uint64_t)sms * t;
  return *out > 0;
}

static int gpu_word(reader *r, const char *k, const char *v) {
  grt_gpu_config *g = &r->mix->gpu;
  bool ok;
  if (!strcmp(k, "sms"))
    ok = u32_of(v, &g->sms);
  else if (!strcmp(k, "memory"))
    ok = size_of(v, &g->memory_bytes);
  else if (!strcmp(k, "timeslice"))
    ok = time_of(v, &g->timeslice_ns);
  else if (!strcmp(k, "switch"))
    ok = time_of(v, &g->switch_ns);
  else if (!strcmp(k, "preempt"))
    ok = time_of(v, &g->preempt_ns);
  else if (!strcmp(k, "max_events"))
    ok = size_of(v, &g->max_events);
  else if (!strcmp(k, "horizon"))
    ok = time_of(v, &g->horizon_ns);
  else if (!strcmp(k, "seed"))
    ok = size_of(v, &g->seed);
  else if (!strcmp(k, "mode")) {
    ok = true;
    if (!strcmp(v, "time-slice"))
      g->mode = GRT_SHARE_TIME_SLICE;
    else if (!strcmp(v, "mps"))
      g->mode = GRT_SHARE_MPS;
    else if (!strcmp(v, "mig"))
      g->mode = GRT_SHARE_MIG;
    else
      return bad(r, "mode=%s: want time-slice, mps or mig", v);
  } else
    return bad(r, "gpu: unknown key '%s' (sms, memory, mode, timeslice, switch, preempt, horizon, seed, max_events)",
               k);
  return ok ? 0 : bad(r, "gpu: %s=%s is not a valid value", k, v);
}

static int tenant_word(reader *r, grt_tenant_config *t, const char *k, const char *v) {
  bool ok = true;
  if (!strcmp(k, "name")) {
    if (strlen(v) >= sizeof t->name) return bad(r, "name '%s' is longer than %zu bytes", v, sizeof t->name - 1);
    snprintf(t->name, sizeof t->name, "%s", v);
  } else if (!strcmp(k, "arrival")) {
    if (!strcmp(v, "poisson"))
      t->arrival = GRT_ARRIVAL_POISSON;
    else if (!strcmp(v, "closed"))
      t->arrival = GRT_ARRIVAL_CLOSED;
    else
      return bad(r, "arrival=%s: want poisson or closed", v);
  } else if (!strcmp(k, "rate")) {
    const char *u;
    ok = number(v, &t->rate_per_s, &u) && !*u;
  } else if (!strcmp(k, "concurrency"))
    ok = u32_of(v, &t->concurrency);
  else if (!strcmp(k, "percent"))
    ok = u32_of(v, &t->sm_percent);
  else if (!strcmp(k, "mig_sms"))
    ok = u32_of(v, &t->mig_sms);
  else if (!strcmp(k, "mig_memory"))
    ok = size_of(v, &t->mig_memory);
  else if (!strcmp(k, "limit"))
    ok = size_of(v, &t->memory_limit);
  else if (!strcmp(k, "static"))
    ok = size_of(v, &t->static_bytes);
  else if (!strcmp(k, "request"))
    ok = size_of(v, &t->request_bytes);
  else if (!strcmp(k, "fault_at"))
    ok = time_of(v, &t->fault_at_ns);
  else if (!strcmp(k, "max_queued"))
    ok = u32_of(v, &t->max_queued);
  else if (!strcmp(k, "priority")) {
    uint32_t p = 0;
    ok = u32_of(v, &p) && p <= 1000;
    t->priority = (int32_t)p;
  } else
    return bad(r,
               "tenant: unknown key '%s' (name, arrival, rate, concurrency, percent, mig_sms, mig_memory, limit, "
               "static, request, fault_at, max_queued, priority)",
               k);
  return ok ? 0 : bad(r, "tenant: %s=%s is not a valid value", k, v);
}

static int kernel_word(reader *r, grt_tenant_kernel *kn, const char *k, const char *v) {
  bool ok;
  if (!strcmp(k, "work"))
    ok = work_of(v, &kn->work_sm_ns);
  else if (!strcmp(k, "sms"))
    ok = u32_of(v, &kn->max_sms);
  else if (!strcmp(k, "after")) {
    uint32_t a = 0;
    ok = !strcmp(v, "none") || (u32_of(v, &a) && a < GRT_TENANT_MAX_KERNELS);
    kn->after = !strcmp(v, "none") ? -1 : (int32_t)a;
  } else
    return bad(r, "kernel: unknown key '%s' (work, sms, after)", k);
  return ok ? 0 : bad(r, "kernel: %s=%s is not a valid value", k, v);
}

/* One line's words after its keyword, each key=value. */
static int words(reader *r, char *rest, const char *what) {
  tenants_mix *m = r->mix;
  grt_tenant_config *t = m->n ? &m->t[m->n - 1] : NULL;
  grt_tenant_kernel *kn = t && t->n_kernels ? &t->kernels[t->n_kernels - 1] : NULL;
  for (char *save = NULL, *w = strtok_r(rest, " \t", &save); w; w = strtok_r(NULL, " \t", &save)) {
    char *eq = strchr(w, '=');
    if (!eq || eq == w || !eq[1]) return bad(r, "'%s' is not key=value", w);
    *eq = 0;
    int rc = !strcmp(what, "gpu") ? gpu_word(r, w, eq + 1)
        : !strcmp(what, "tenant") ? tenant_word(r, t, w, eq + 1)
                                  : kernel_word(r, kn, w, eq + 1);
    if (rc) return rc;
  }
  return 0;
}

static int line(reader *r, char *s) {
  char *hash = strchr(s, '#');
  if (hash) *hash = 0;
  s[strcspn(s, "\r\n")] = 0;
  s += strspn(s, " \t");
  if (!*s) return 0;
  size_t n = strcspn(s, " \t");
  char *rest = s[n] ? s + n + 1 : s + n;
  s[n] = 0;
  tenants_mix *m = r->mix;
  if (!strcmp(s, "gpu")) {
    if (r->gpu_seen || m->n) return bad(r, "one gpu line, before the tenants");
    r->gpu_seen = true;
  } else if (!strcmp(s, "tenant")) {
    if (m->n == GRT_TENANT_MAX) return bad(r, "more than %d tenants", GRT_TENANT_MAX);
    if (m->n && !m->t[m->n - 1].n_kernels) return bad(r, "tenant %u has no kernel line", m->n - 1);
    grt_tenant_config_default(&m->t[m->n]);
    m->t[m->n].n_kernels = 0;
    snprintf(m->t[m->n].name, sizeof m->t[m->n].name, "tenant%u", m->n);
    m->n++;
  } else if (!strcmp(s, "kernel")) {
    if (!m->n) return bad(r, "a kernel line before any tenant line");
    grt_tenant_config *t = &m->t[m->n - 1];
    if (t->n_kernels == GRT_TENANT_MAX_KERNELS) return bad(r, "more than %d kernels", GRT_TENANT_MAX_KERNELS);
    int32_t idx = (int32_t)t->n_kernels++;
    t->kernels[idx] = (grt_tenant_kernel){0, m->gpu.sms, idx - 1}; /* a chain unless after= says otherwise */
  } else {
    return bad(r, "unknown line '%s' (gpu, tenant, kernel)", s);
  }
  return words(r, rest, s);
}

int tenants_config_load(const char *cmd, const char *path, tenants_mix *mix) {
  memset(mix, 0, sizeof *mix);
  grt_gpu_config_default(&mix->gpu);
  reader r = {cmd, path, 0, mix, false};
  FILE *f = fopen(path, "r");
  if (!f) {
    fprintf(stderr, "gpurt %s: cannot read %s: %s\n", cmd, path, strerror(errno));
    return 2;
  }
  char buf[1024];
  int rc = 0;
  while (!rc && fgets(buf, sizeof buf, f)) {
    r.line++;
    if (!strchr(buf, '\n') && !feof(f))
      rc = bad(&r, "line longer than %zu bytes", sizeof buf - 2);
    else
      rc = line(&r, buf);
  }
  if (!rc && ferror(f)) rc = bad(&r, "read error: %s", strerror(errno));
  fclose(f);
  r.line++;
  if (!rc && !mix->n) rc = bad(&r, "no tenant line");
  if (!rc && !mix->t[mix->n - 1].n_kernels) rc = bad(&r, "tenant %u has no kernel line", mix->n - 1);
  for (uint32_t i = 0; !rc && i < mix->n; i++)
    for (uint32_t k = 0; !rc && k < mix->t[i].n_kernels; k++)
      if (!mix->t[i].kernels[k].work_sm_ns) rc = bad(&r, "tenant %u kernel %u has no work=", i, k);
  return rc;
}
