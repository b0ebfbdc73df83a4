/* tenant.c — a multi-tenant simulation's configuration, validation, memory
 * and statistics; the event loop is tenant_run.c. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/status.h"
#include "tenant/tenant_impl.h"

void grt_gpu_config_default(grt_gpu_config *cfg) {
  if (!cfg) return;
  memset(cfg, 0, sizeof *cfg);
  cfg->sms = 132;
  cfg->memory_bytes = 141ull * 1000 * 1000 * 1000;
  cfg->mode = GRT_SHARE_TIME_SLICE;
  cfg->timeslice_ns = 2000000;
  cfg->switch_ns = 40000;
  cfg->horizon_ns = 1000000000;
  cfg->seed = 1;
}

void grt_tenant_config_default(grt_tenant_config *cfg) {
  if (!cfg) return;
  memset(cfg, 0, sizeof *cfg);
  snprintf(cfg->name, sizeof cfg->name, "tenant");
  cfg->arrival = GRT_ARRIVAL_CLOSED;
  cfg->concurrency = 1;
  cfg->kernels[0] = (grt_tenant_kernel){1000000, 132, -1};
  cfg->n_kernels = 1;
  cfg->sm_percent = 100;
}

grt_status grt__tenant_fail(grt_tenant_sim *sim, grt_status st, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(sim->err, sizeof sim->err, fmt, ap);
  va_end(ap);
  return st;
}

/* Bounds that keep every product of the model inside 64 bits: an hour of
 * virtual time is 3.6e12 ns, times 1e5 SMs stays below 2^63. */
#define MAX_SMS 100000u
#define MAX_HORIZON_NS (1000ull * 3600 * 1000000000ull) /* 1000 hours */
#define MAX_WORK (1ull << 52)

static grt_status gpu_check(const grt_gpu_config *c, char *err, size_t n) {
  const char *why = NULL;
  if (!c->sms || c->sms > MAX_SMS)
    why = "sms must be 1..100000";
  else if (!c->memory_bytes || c->memory_bytes > (1ull << 50))
    why = "memory_bytes must be 1 B .. 1 PiB";
  else if (c->mode > GRT_SHARE_MIG)
    why = "mode must be time slicing, MPS or MIG";
  else if (c->mode == GRT_SHARE_TIME_SLICE && !c->timeslice_ns)
    why = "timeslice_ns must be > 0";
  else if (c->timeslice_ns > MAX_HORIZON_NS || c->switch_ns > MAX_HORIZON_NS || c->preempt_ns > MAX_HORIZON_NS)
    why = "timeslice_ns / switch_ns / preempt_ns too large";
  else if (!c->horizon_ns || c->horizon_ns > MAX_HORIZON_NS)
    why = "horizon_ns must be 1 ns .. 1000 h";
  if (!why) return GRT_OK;
  snprintf(err, n, "gpu config: %s", why);
  return GRT_ERR_INVALID_ARG;
}

grt_status grt_tenant_sim_create(const grt_gpu_config *cfg, grt_tenant_sim **out) {
  if (!cfg || !out) return GRT_ERR_INVALID_ARG;
  *out = NULL;
  char err[256];
  grt_status st = gpu_check(cfg, err, sizeof err);
  if (st) return st;
  grt_tenant_sim *sim = calloc(1, sizeof *sim);
  if (!sim) return GRT_ERR_NOMEM;
  sim->cfg = *cfg;
  sim->active = sim->last_active = GRT__NONE;
  sim->free_k = sim->free_r = GRT__NONE;
  *out = sim;
  return GRT_OK;
}

/* The DAG: each kernel waits for at most one earlier kernel. */
static grt_status kernels_check(grt_tenant_sim *sim, uint32_t n, const grt_tenant_config *c) {
  if (!c->n_kernels || c->n_kernels > GRT_TENANT_MAX_KERNELS)
    return grt__tenant_fail(sim, GRT_ERR_INVALID_ARG, "tenant %u '%s': n_kernels must be 1..%d", n, c->name,
                            GRT_TENANT_MAX_KERNELS);
  for (uint32_t i = 0; i < c->n_kernels; i++) {
    const grt_tenant_kernel *k = &c->kernels[i];
    if (!k->work_sm_ns || k->work_sm_ns > MAX_WORK || !k->max_sms)
      return grt__tenant_fail(sim, GRT_ERR_INVALID_ARG,
                              "tenant %u '%s': kernel %u needs work_sm_ns 1..2^52 and max_sms >= 1", n, c->name, i);
    if (k->after < -1 || k->after >= (int32_t)i)
      return grt__tenant_fail(sim, GRT_ERR_INVALID_ARG,
                              "tenant %u '%s': kernel %u waits for kernel %d, not an earlier one", n, c->name, i,
                              k->after);
  }
  return GRT_OK;
}

static grt_status share_check(grt_tenant_sim *sim, uint32_t n, const grt_tenant_config *c) {
  const grt_gpu_config *g = &sim->cfg;
  if (c->arrival == GRT_ARRIVAL_POISSON ? !(c->rate_per_s > 0 && c->rate_per_s <= 1e9)
                                        : c->arrival != GRT_ARRIVAL_CLOSED || !c->concurrency || c->concurrency > 65536)
    return grt__tenant_fail(sim, GRT_ERR_INVALID_ARG,
                            "tenant %u '%s': Poisson needs rate_per_s in (0, 1e9], closed concurrency 1..65536", n,
                            c->name);
  if (g->mode == GRT_SHARE_MPS && (!c->sm_percent || c->sm_percent > 100))
    return grt__tenant_fail(sim, GRT_ERR_INVALID_ARG, "tenant %u '%s': sm_percent must be 1..100", n, c->name);
  if (g->mode != GRT_SHARE_MIG) return GRT_OK;
  uint64_t sms = c->mig_sms, mem = c->mig_memory;
  for (uint32_t i = 0; i < sim->n; i++) sms += sim->t[i]->cfg.mig_sms, mem += sim->t[i]->cfg.mig_memory;
  if (!c->mig_sms || !c->mig_memory || sms > g->sms || mem > g->memory_bytes)
    return grt__tenant_fail(sim, GRT_ERR_INVALID_ARG,
                            "tenant %u '%s': MIG instances need mig_sms and mig_memory > 0, summing to at most the "
                            "device's %u SMs and %llu bytes",
                            n, c->name, g->sms, (unsigned long long)g->memory_bytes);
  return GRT_OK;
}

static uint32_t cap_of(const grt_gpu_config *g, const grt_tenant_config *c) {
  if (g->mode == GRT_SHARE_MIG) return c->mig_sms;
  if (g->mode != GRT_SHARE_MPS) return g->sms;
  uint32_t cap = (uint32_t)(((uint64_t)g->sms * c->sm_percent) / 100); /* CUDA rounds the thread share down */
  return cap ? cap : 1;
}

grt_status grt_tenant_sim_add(grt_tenant_sim *sim, const grt_tenant_config *cfg, uint32_t *index) {
  if (!sim || !cfg) return GRT_ERR_INVALID_ARG;
  if (sim->ran) return grt__tenant_fail(sim, GRT_ERR_STATE, "tenants are added before the run");
  if (sim->n == GRT_TENANT_MAX)
    return grt__tenant_fail(sim, GRT_ERR_INVALID_ARG, "at most %d tenants per device", GRT_TENANT_MAX);
  grt_status st = kernels_check(sim, sim->n, cfg);
  if (!st) st = share_check(sim, sim->n, cfg);
  if (st) return st;
  grt__tenant *t = calloc(1, sizeof *t);
  if (!t) return GRT_ERR_NOMEM;
  t->cfg = *cfg;
  t->cfg.name[sizeof t->cfg.name - 1] = 0;
  if (!t->cfg.max_queued) t->cfg.max_queued = 65536;
  for (uint32_t i = 0; i < cfg->n_kernels; i++)
    if (cfg->kernels[i].after >= 0) {
      uint32_t p = (uint32_t)cfg->kernels[i].after;
      t->children[p][t->n_children[p]++] = i;
    }
  t->pool = sim->cfg.mode == GRT_SHARE_MIG ? sim->n : 0;
  t->cap = cap_of(&sim->cfg, cfg);
  t->head = t->tail = GRT__NONE;
  grt__rng_seed(&t->rng, sim->cfg.seed * 0x9e3779b97f4a7c15ull + sim->n);
  if (index) *index = sim->n;
  sim->t[sim->n++] = t;
  return GRT_OK;
}

/* ---- memory: gpurt's caching allocator per tenant ---------------------------------- */

static grt_status new_device(uint64_t bytes, grt_device **out) {
  grt_device_config dc;
  grt_device_config_default(&dc);
  dc.capacity = bytes;
  return grt_device_create(&dc, out);
}

static grt_status tenant_memory(grt_tenant_sim *sim, grt__tenant *t) {
  grt_status st = GRT_OK;
  grt_device *dev = sim->dev;
  uint64_t cap = sim->cfg.memory_bytes;
  if (sim->cfg.mode == GRT_SHARE_MIG) {
    if ((st = new_device(t->cfg.mig_memory, &t->dev))) return st;
    dev = t->dev, cap = t->cfg.mig_memory;
  }
  grt_alloc_config ac;
  grt_alloc_config_default(&ac);
  if (sim->cfg.mode != GRT_SHARE_MIG && t->cfg.memory_limit && t->cfg.memory_limit < cap)
    ac.memory_fraction = (double)t->cfg.memory_limit / (double)cap;
  if ((st = grt_alloc_create("caching", dev, &ac, &t->alloc))) return st;
  if (t->cfg.static_bytes) {
    st = grt_alloc_malloc(t->alloc, t->cfg.static_bytes, 0, &t->static_mem);
    if (st == GRT_ERR_OOM) { /* the tenant cannot start; the others run */
      t->dead = true;
      t->st.status = GRT_ERR_OOM;
      st = GRT_OK;
    }
  }
  return st;
}

grt_status grt__tenant_memory_setup(grt_tenant_sim *sim) {
  grt_status st = GRT_OK;
  if (sim->cfg.mode != GRT_SHARE_MIG) st = new_device(sim->cfg.memory_bytes, &sim->dev);
  for (uint32_t i = 0; i < sim->n && !st; i++) st = tenant_memory(sim, sim->t[i]);
  return st;
}

void grt__tenant_memory_teardown(grt_tenant_sim *sim) {
  for (uint32_t i = 0; i < sim->n; i++) {
    grt__tenant *t = sim->t[i];
    if (t->static_mem) grt__ignore(grt_alloc_free(t->alloc, t->static_mem));
    t->static_mem = 0;
    grt__ignore(grt_alloc_destroy(t->alloc)); /* releases its cache and any request memory */
    grt__ignore(grt_device_destroy(t->dev));
    t->alloc = NULL, t->dev = NULL;
  }
  grt__ignore(grt_device_destroy(sim->dev));
  sim->dev = NULL;
}

/* ---- statistics ----------------------------------------------------------------------- */

grt_status grt__tenant_record_latency(grt__tenant *t, uint64_t ns) {
  if (t->n_lat == t->cap_lat) {
    size_t cap = t->cap_lat ? 2 * t->cap_lat : 1024;
    uint64_t *v = realloc(t->lat, cap * sizeof *v);
    if (!v) return GRT_ERR_NOMEM;
    t->lat = v, t->cap_lat = cap;
  }
  t->lat[t->n_lat++] = ns;
  return GRT_OK;
}

static int cmp_u64(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return (x > y) - (x < y);
}

/* Nearest rank: the smallest latency with at least q of them at or below it. */
static uint64_t rank(const uint64_t *v, size_t n, uint64_t per_thousand) {
  size_t r = (size_t)((per_thousand * n + 999) / 1000);
  return v[r ? r - 1 : 0];
}

void grt__tenant_finish_stats(grt_tenant_sim *sim) {
  uint64_t held = 0;
  for (uint32_t i = 0; i < sim->n; i++) {
    grt__tenant *t = sim->t[i];
    held += t->st.sm_ns;
    if (!t->n_lat) continue;
    qsort(t->lat, t->n_lat, sizeof *t->lat, cmp_u64);
    double sum = 0;
    for (size_t k = 0; k < t->n_lat; k++) sum += (double)t->lat[k];
    t->st.mean_ns = sum / (double)t->n_lat;
    t->st.p50_ns = rank(t->lat, t->n_lat, 500);
    t->st.p99_ns = rank(t->lat, t->n_lat, 990);
    t->st.p999_ns = rank(t->lat, t->n_lat, 999);
    t->st.max_ns = t->lat[t->n_lat - 1];
  }
  uint64_t end = sim->gs.end_ns;
  sim->gs.utilization = end ? (double)held / ((double)sim->cfg.sms * (double)end) : 0;
}

grt_status grt_tenant_sim_stats(const grt_tenant_sim *sim, uint32_t index, grt_tenant_stats *out) {
  if (!sim || !out || index >= sim->n) return GRT_ERR_INVALID_ARG;
  *out = sim->t[index]->st;
  return GRT_OK;
}

grt_status grt_tenant_sim_gpu_stats(const grt_tenant_sim *sim, grt_gpu_stats *out) {
  if (!sim || !out) return GRT_ERR_INVALID_ARG;
  *out = sim->gs;
  return GRT_OK;
}

grt_status grt_tenant_sim_last_error(const grt_tenant_sim *sim, char *buf, size_t buf_size) {
  if (!sim || !buf || !buf_size) return GRT_ERR_INVALID_ARG;
  snprintf(buf, buf_size, "%s", sim->err);
  return GRT_OK;
}

grt_status grt_tenant_sim_destroy(grt_tenant_sim *sim) {
  if (!sim) return GRT_OK;
  grt__tenant_memory_teardown(sim);
  for (uint32_t i = 0; i < sim->n; i++) {
    free(sim->t[i]->lat);
    free(sim->t[i]);
  }
  free(sim->k);
  free(sim->r);
  free(sim->heap);
  free(sim->slices);
  free(sim->switch_log);
  free(sim);
  return GRT_OK;
}
