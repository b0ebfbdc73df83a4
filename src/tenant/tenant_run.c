/* tenant_run.c — the multi-tenant simulation's event loop: arrivals, kernel
 * starts and ends, and the three ways of sharing the SMs (docs/TENANTS.md).
 *
 * Events are ordered by (time, kind, issue order), so equal times resolve
 * the same way on every run. After each event the dispatcher starts what may start:
 * among tenants whose oldest ready kernel may run, the oldest first (ties to
 * the lower tenant index); a kernel gets min(its max_sms, the pool's free
 * SMs, its tenant's cap minus what the tenant holds) SMs and keeps them
 * until it ends, or, under time slicing, until its context is switched out.
 */
#include <math.h>
#include <stdlib.h>

#include "base/status.h"
#include "tenant/tenant_impl.h"

/* ---- the event heap ------------------------------------------------------------------ */

static bool before(const grt__tevent *a, const grt__tevent *b) {
  if (a->t != b->t) return a->t < b->t;
  return a->kind != b->kind ? a->kind < b->kind : a->seq < b->seq;
}

static grt_status push(grt_tenant_sim *sim, uint64_t t, uint32_t kind, uint32_t a, uint32_t gen) {
  if (sim->n_heap == sim->cap_heap) {
    size_t cap = sim->cap_heap ? 2 * sim->cap_heap : 256;
    grt__tevent *h = realloc(sim->heap, cap * sizeof *h);
    if (!h) return GRT_ERR_NOMEM;
    sim->heap = h, sim->cap_heap = cap;
  }
  size_t i = sim->n_heap++;
  grt__tevent e = {t, sim->seq++, kind, a, gen};
  while (i && before(&e, &sim->heap[(i - 1) / 2])) {
    sim->heap[i] = sim->heap[(i - 1) / 2];
    i = (i - 1) / 2;
  }
  sim->heap[i] = e;
  return GRT_OK;
}

static grt__tevent pop(grt_tenant_sim *sim) {
  grt__tevent top = sim->heap[0], last = sim->heap[--sim->n_heap];
  size_t i = 0, n = sim->n_heap;
  for (;;) {
    size_t c = 2 * i + 1;
    if (c >= n) break;
    if (c + 1 < n && before(&sim->heap[c + 1], &sim->heap[c])) c++;
    if (!before(&sim->heap[c], &last)) break;
    sim->heap[i] = sim->heap[c];
    i = c;
  }
  if (n) sim->heap[i] = last;
  return top;
}

/* ---- pools of kernels and requests ------------------------------------------------------ */

static grt_status kernel_new(grt_tenant_sim *sim, uint32_t *out) {
  if (sim->free_k == GRT__NONE) {
    if (sim->n_k == sim->cap_k) {
      uint32_t cap = sim->cap_k ? 2 * sim->cap_k : 256;
      grt__tkernel *k = realloc(sim->k, (size_t)cap * sizeof *k);
      if (!k) return GRT_ERR_NOMEM;
      sim->k = k, sim->cap_k = cap;
    }
    sim->k[sim->n_k].next = GRT__NONE;
    sim->k[sim->n_k].gen = 0;
    sim->free_k = sim->n_k++;
  }
  *out = sim->free_k;
  sim->free_k = sim->k[*out].next;
  return GRT_OK;
}

static void kernel_free(grt_tenant_sim *sim, uint32_t i) {
  sim->k[i].gen++; /* any event still naming it is stale */
  sim->k[i].next = sim->free_k;
  sim->free_k = i;
}

static grt_status req_new(grt_tenant_sim *sim, uint32_t *out) {
  if (sim->free_r == GRT__NONE) {
    if (sim->n_r == sim->cap_r) {
      uint32_t cap = sim->cap_r ? 2 * sim->cap_r : 64;
      grt__treq *r = realloc(sim->r, (size_t)cap * sizeof *r);
      if (!r) return GRT_ERR_NOMEM;
      sim->r = r, sim->cap_r = cap;
    }
    sim->r[sim->n_r].next_free = GRT__NONE;
    sim->free_r = sim->n_r++;
  }
  *out = sim->free_r;
  sim->free_r = sim->r[*out].next_free;
  return GRT_OK;
}

static void req_free(grt_tenant_sim *sim, grt__tenant *t, uint32_t i) {
  if (sim->r[i].mem) grt__ignore(grt_alloc_free(t->alloc, sim->r[i].mem));
  sim->r[i].mem = 0;
  sim->r[i].live = false;
  sim->r[i].next_free = sim->free_r;
  sim->free_r = i;
  t->in_flight--;
}

/* ---- ready queues -------------------------------------------------------------------------- */

static void enqueue(grt_tenant_sim *sim, grt__tenant *t, uint32_t i, bool front) {
  sim->k[i].next = GRT__NONE;
  if (t->head == GRT__NONE) {
    t->head = t->tail = i;
  } else if (front) {
    sim->k[i].next = t->head;
    t->head = i;
  } else {
    sim->k[t->tail].next = i;
    t->tail = i;
  }
}

static bool has_work(const grt__tenant *t) { return t->head != GRT__NONE || t->running; }

static grt_status ready_kernel(grt_tenant_sim *sim, uint32_t tenant, uint32_t req, uint32_t idx) {
  uint32_t i;
  grt_status st = kernel_new(sim, &i);
  if (st) return st;
  grt__tkernel *k = &sim->k[i];
  grt__tenant *t = sim->t[tenant];
  k->tenant = tenant, k->req = req, k->idx = idx, k->running = false, k->ready_ns = sim->now;
  k->work_left = t->cfg.kernels[idx].work_sm_ns;
  enqueue(sim, t, i, false);
  return GRT_OK;
}

/* A request arrives: its memory, then its root kernels. */
static grt_status issue(grt_tenant_sim *sim, uint32_t tenant) {
  grt__tenant *t = sim->t[tenant];
  t->st.arrived++;
  if (t->in_flight >= t->cfg.max_queued) {
    t->st.dropped++;
    return GRT_OK;
  }
  grt_devptr mem = 0;
  if (t->cfg.request_bytes) {
    grt_status st = grt_alloc_malloc(t->alloc, t->cfg.request_bytes, 0, &mem);
    if (st == GRT_ERR_OOM) {
      t->st.refused_oom++;
      return GRT_OK;
    }
    if (st) return st;
  }
  uint32_t r;
  grt_status st = req_new(sim, &r);
  if (st) {
    if (mem) grt__ignore(grt_alloc_free(t->alloc, mem));
    return st;
  }
  sim->r[r] = (grt__treq){sim->now, t->st.arrived - 1, t->cfg.n_kernels, GRT__NONE, tenant, true, mem};
  t->in_flight++;
  for (uint32_t k = 0; k < t->cfg.n_kernels && !st; k++)
    if (t->cfg.kernels[k].after < 0) st = ready_kernel(sim, tenant, r, k);
  return st;
}

/* The next Poisson arrival: an exponential gap at rate_per_s, at least 1 ns. */
static grt_status next_arrival(grt_tenant_sim *sim, uint32_t tenant) {
  grt__tenant *t = sim->t[tenant];
  double u = grt__rng_unit(&t->rng);
  double gap = -log(1.0 - u) * 1e9 / t->cfg.rate_per_s;
  uint64_t g = gap < 1 ? 1 : gap > 1e18 ? (uint64_t)1e18 : (uint64_t)gap;
  uint64_t at = sim->now + g;
  return at < sim->cfg.horizon_ns ? push(sim, at, GRT__EV_ARRIVAL, tenant, 0) : GRT_OK;
}

/* ---- starting, ending and stopping kernels ------------------------------------------------ */

static uint64_t ceil_div(uint64_t a, uint64_t b) { return a / b + (a % b != 0); }

/* delay: the SMs are held from now, the work starts after it (a preemption's cost). */
static grt_status start(grt_tenant_sim *sim, grt__tenant *t, uint32_t g, uint64_t delay) {
  uint32_t i = t->head;
  grt__tkernel *k = &sim->k[i];
  t->head = k->next;
  if (t->head == GRT__NONE) t->tail = GRT__NONE;
  k->running = true, k->sms = g, k->start_ns = sim->now + delay;
  t->held += g, t->running++;
  sim->pool_free[t->pool] -= g;
  if (t->held > t->st.max_sms_held) t->st.max_sms_held = t->held;
  return push(sim, k->start_ns + ceil_div(k->work_left, g), GRT__EV_KERNEL_END, i, k->gen);
}

/* Takes a running kernel off its SMs, crediting the work it did. */
static grt_status stop(grt_tenant_sim *sim, uint32_t i) {
  grt__tkernel *k = &sim->k[i];
  grt__tenant *t = sim->t[k->tenant];
  uint64_t ran = sim->now > k->start_ns ? sim->now - k->start_ns : 0, done = ran * k->sms;
  t->st.sm_ns += done;
  k->work_left = done >= k->work_left ? 0 : k->work_left - done;
  t->held -= k->sms, t->running--;
  sim->pool_free[t->pool] += k->sms;
  if (sim->now > sim->gs.end_ns) sim->gs.end_ns = sim->now;
  k->running = false;
  k->gen++;
  return sim->cfg.record_timeline && ran ? grt__tenant_log_slice(sim, k, sim->now) : GRT_OK;
}

static grt_status finish_request(grt_tenant_sim *sim, uint32_t tenant, uint32_t r) {
  grt__tenant *t = sim->t[tenant];
  grt_status st = grt__tenant_record_latency(t, sim->now - sim->r[r].arrival_ns);
  t->st.completed++;
  req_free(sim, t, r);
  if (!st && t->cfg.arrival == GRT_ARRIVAL_CLOSED && sim->now < sim->cfg.horizon_ns) st = issue(sim, tenant);
  return st;
}

static grt_status kernel_end(grt_tenant_sim *sim, uint32_t i) {
  grt__tkernel *k = &sim->k[i];
  uint32_t tenant = k->tenant, r = k->req, idx = k->idx;
  grt__tenant *t = sim->t[tenant];
  grt_status st = stop(sim, i);
  t->st.kernels++;
  kernel_free(sim, i);
  for (uint32_t c = 0; c < t->n_children[idx] && !st; c++) st = ready_kernel(sim, tenant, r, t->children[idx][c]);
  if (!st && --sim->r[r].left == 0) st = finish_request(sim, tenant, r);
  return st;
}

/* ---- time slicing ---------------------------------------------------------------------------- */

/* The next context with work after `from`, round robin; GRT__NONE if none. */
static uint32_t next_context(const grt_tenant_sim *sim, uint32_t from) {
  for (uint32_t d = 1; d <= sim->n; d++) {
    uint32_t c = (from == GRT__NONE ? d - 1 : from + d) % sim->n;
    if (!sim->t[c]->dead && has_work(sim->t[c])) return c;
  }
  return GRT__NONE;
}

/* Loads context c: free when it is the last one the GPU ran (or the first). */
static grt_status load_context(grt_tenant_sim *sim, uint32_t c) {
  sim->slice_gen++;
  if (sim->last_active == GRT__NONE || sim->last_active == c || !sim->cfg.switch_ns) {
    sim->active = sim->last_active = c;
    return push(sim, sim->now + sim->cfg.timeslice_ns, GRT__EV_SLICE_END, 0, sim->slice_gen);
  }
  sim->switching = true;
  sim->active = GRT__NONE;
  sim->last_active = c;
  sim->gs.switches++;
  grt_status st = sim->cfg.record_timeline ? grt__tenant_log_switch(sim, sim->now) : GRT_OK;
  return st ? st : push(sim, sim->now + sim->cfg.switch_ns, GRT__EV_SWITCH_DONE, c, sim->slice_gen);
}

/* Switches the active context out: its running kernels stop and go back to
 * the front of its queue (walked from the last slot down, so the kernels
 * keep their slot order). */
static grt_status switch_out(grt_tenant_sim *sim) {
  grt__tenant *t = sim->t[sim->active];
  grt_status st = GRT_OK;
  for (uint32_t i = sim->n_k; i-- > 0 && t->running && !st;)
    if (sim->k[i].running && sim->k[i].tenant == sim->active && !(st = stop(sim, i))) {
      t->st.preemptions++;
      enqueue(sim, t, i, true);
    }
  sim->active = GRT__NONE;
  return st;
}

static grt_status on_slice_end(grt_tenant_sim *sim, uint32_t gen) {
  if (gen != sim->slice_gen || sim->active == GRT__NONE) return GRT_OK;
  uint32_t c = sim->active, next = next_context(sim, c);
  if (next == GRT__NONE) return GRT_OK; /* idle: the next work reloads a context */
  if (next == c)                        /* nobody else waits: the slice is renewed */
    return push(sim, sim->now + sim->cfg.timeslice_ns, GRT__EV_SLICE_END, 0, ++sim->slice_gen);
  grt_status st = switch_out(sim);
  return st ? st : load_context(sim, next);
}

/* After every event: an idle active context gives the GPU to one with work. */
static grt_status time_slice_settle(grt_tenant_sim *sim) {
  if (sim->switching) return GRT_OK;
  if (sim->active != GRT__NONE && has_work(sim->t[sim->active]) && !sim->t[sim->active]->dead) return GRT_OK;
  if (sim->active != GRT__NONE && sim->t[sim->active]->running) return GRT_OK; /* a dead one drains */
  uint32_t next = next_context(sim, sim->active == GRT__NONE ? sim->last_active : sim->active);
  if (next == GRT__NONE) {
    sim->active = GRT__NONE;
    return GRT_OK;
  }
  return load_context(sim, next);
}

/* ---- dispatch ------------------------------------------------------------------------------------ */

static bool eligible(const grt_tenant_sim *sim, uint32_t c) {
  const grt__tenant *t = sim->t[c];
  if (t->dead || t->head == GRT__NONE || t->held >= t->cap || !sim->pool_free[t->pool]) return false;
  return sim->cfg.mode != GRT_SHARE_TIME_SLICE || c == sim->active;
}

/* Who goes first: the higher priority, then the oldest ready kernel. */
static bool goes_before(const grt_tenant_sim *sim, uint32_t a, uint32_t b) {
  const grt__tenant *x = sim->t[a], *y = sim->t[b];
  if (x->cfg.priority != y->cfg.priority) return x->cfg.priority > y->cfg.priority;
  return sim->k[x->head].ready_ns < sim->k[y->head].ready_ns;
}

/* A tenant whose head kernel could start but for a free SM (MPS with preempt_ns). */
static bool starved(const grt_tenant_sim *sim, uint32_t c) {
  const grt__tenant *t = sim->t[c];
  return !t->dead && t->head != GRT__NONE && t->held < t->cap && !sim->pool_free[t->pool];
}

/* Stops lower-priority kernels, the latest started first, until tenant c's
 * head kernel has the SMs it can use; returns the SMs freed. */
static uint32_t preempt_for(grt_tenant_sim *sim, uint32_t c, grt_status *st) {
  grt__tenant *t = sim->t[c];
  uint32_t want = t->cfg.kernels[sim->k[t->head].idx].max_sms, room = t->cap - t->held, freed = 0;
  if (want > room) want = room;
  while (!*st && freed < want) {
    uint32_t victim = GRT__NONE;
    for (uint32_t i = 0; i < sim->n_k; i++) {
      const grt__tkernel *k = &sim->k[i];
      if (k->running && sim->t[k->tenant]->cfg.priority < t->cfg.priority &&
          (victim == GRT__NONE || k->start_ns > sim->k[victim].start_ns))
        victim = i;
    }
    if (victim == GRT__NONE) break;
    grt__tenant *v = sim->t[sim->k[victim].tenant];
    freed += sim->k[victim].sms;
    v->st.preemptions++;
    if (!(*st = stop(sim, victim))) enqueue(sim, v, victim, true);
  }
  return freed;
}

static grt_status dispatch(grt_tenant_sim *sim) {
  grt_status st = sim->cfg.mode == GRT_SHARE_TIME_SLICE ? time_slice_settle(sim) : GRT_OK;
  bool preempting = sim->cfg.mode == GRT_SHARE_MPS && sim->cfg.preempt_ns;
  while (!st) {
    uint32_t best = GRT__NONE, blocked = GRT__NONE;
    for (uint32_t c = 0; c < sim->n; c++) {
      if (eligible(sim, c) && (best == GRT__NONE || goes_before(sim, c, best))) best = c;
      if (preempting && starved(sim, c) && (blocked == GRT__NONE || goes_before(sim, c, blocked))) blocked = c;
    }
    uint64_t delay = 0;
    if (best == GRT__NONE && blocked != GRT__NONE && preempt_for(sim, blocked, &st))
      best = blocked, delay = sim->cfg.preempt_ns;
    if (st || best == GRT__NONE) break;
    grt__tenant *t = sim->t[best];
    uint32_t g = t->cfg.kernels[sim->k[t->head].idx].max_sms, room = t->cap - t->held;
    if (g > room) g = room;
    if (g > sim->pool_free[t->pool]) g = sim->pool_free[t->pool];
    st = start(sim, t, g, delay);
  }
  return st;
}

/* ---- faults --------------------------------------------------------------------------------------- */

/* A fatal fault ends a context: its work is cancelled, its requests counted. */
static grt_status kill(grt_tenant_sim *sim, uint32_t c) {
  grt__tenant *t = sim->t[c];
  if (t->dead && !t->running && t->head == GRT__NONE) return GRT_OK;
  t->dead = true;
  t->st.status = GRT_ERR_FAULT_INJECTED;
  while (t->head != GRT__NONE) {
    uint32_t i = t->head;
    t->head = sim->k[i].next;
    kernel_free(sim, i);
  }
  t->tail = GRT__NONE;
  for (uint32_t i = 0; i < sim->n_k && t->running; i++)
    if (sim->k[i].running && sim->k[i].tenant == c) {
      grt_status st = stop(sim, i);
      if (st) return st;
      kernel_free(sim, i);
    }
  t->st.cancelled += t->in_flight;
  for (uint32_t r = 0; r < sim->n_r && t->in_flight; r++)
    if (sim->r[r].live && sim->r[r].tenant == c) req_free(sim, t, r);
  return GRT_OK;
}

static grt_status on_fault(grt_tenant_sim *sim, uint32_t c) {
  if (sim->t[c]->dead) return GRT_OK;
  grt_status st = GRT_OK;
  if (sim->cfg.mode == GRT_SHARE_MPS) /* one MPS server: a fatal fault ends every client */
    for (uint32_t i = 0; i < sim->n && !st; i++) st = kill(sim, i);
  else
    st = kill(sim, c);
  if (!st && sim->cfg.mode == GRT_SHARE_TIME_SLICE && sim->active != GRT__NONE && sim->t[sim->active]->dead)
    sim->active = GRT__NONE;
  return st;
}

/* ---- the loop ----------------------------------------------------------------------------------------- */

static grt_status handle(grt_tenant_sim *sim, const grt__tevent *e) {
  switch (e->kind) {
    case GRT__EV_ARRIVAL:
      if (sim->t[e->a]->dead) return GRT_OK;
      if (sim->t[e->a]->cfg.arrival == GRT_ARRIVAL_POISSON) {
        grt_status st = next_arrival(sim, e->a);
        if (st) return st;
      }
      return issue(sim, e->a);
    case GRT__EV_KERNEL_END: return e->gen == sim->k[e->a].gen && sim->k[e->a].running ? kernel_end(sim, e->a) : GRT_OK;
    case GRT__EV_SLICE_END: return on_slice_end(sim, e->gen);
    case GRT__EV_SWITCH_DONE:
      if (e->gen != sim->slice_gen) return GRT_OK;
      sim->switching = false;
      sim->active = e->a;
      return push(sim, sim->now + sim->cfg.timeslice_ns, GRT__EV_SLICE_END, 0, sim->slice_gen);
    case GRT__EV_FAULT: return on_fault(sim, e->a);
    default: return GRT_ERR_INTERNAL;
  }
}

static grt_status seed_events(grt_tenant_sim *sim) {
  grt_status st = GRT_OK;
  for (uint32_t c = 0; c < sim->n && !st; c++) {
    grt__tenant *t = sim->t[c];
    if (t->dead) continue;
    if (t->cfg.fault_at_ns) st = push(sim, t->cfg.fault_at_ns, GRT__EV_FAULT, c, 0);
    if (!st && t->cfg.arrival == GRT_ARRIVAL_POISSON) st = next_arrival(sim, c);
    for (uint32_t k = 0; k < t->cfg.concurrency && t->cfg.arrival == GRT_ARRIVAL_CLOSED && !st; k++)
      st = push(sim, 0, GRT__EV_ARRIVAL, c, 0);
  }
  return st;
}

grt_status grt_tenant_sim_run(grt_tenant_sim *sim) {
  if (!sim) return GRT_ERR_INVALID_ARG;
  if (sim->ran) return grt__tenant_fail(sim, GRT_ERR_STATE, "a simulation runs once");
  if (!sim->n) return grt__tenant_fail(sim, GRT_ERR_INVALID_ARG, "no tenant to run");
  sim->ran = true;
  for (uint32_t p = 0; p < GRT_TENANT_MAX; p++)
    sim->pool_free[p] = sim->cfg.mode == GRT_SHARE_MIG ? (p < sim->n ? sim->t[p]->cfg.mig_sms : 0) : sim->cfg.sms;
  grt_status st = grt__tenant_memory_setup(sim);
  if (!st) st = seed_events(sim);
  uint64_t max_events = sim->cfg.max_events ? sim->cfg.max_events : (uint64_t)1 << 32;
  while (!st && sim->n_heap) {
    if (sim->gs.events == max_events) {
      grt__tenant_finish_stats(sim);
      return grt__tenant_fail(sim, GRT_ERR_SIZE,
                              "the simulation reached max_events (%llu) at %llu ns of %llu: longer kernels or a "
                              "shorter horizon, or raise max_events",
                              (unsigned long long)max_events, (unsigned long long)sim->now,
                              (unsigned long long)sim->cfg.horizon_ns);
    }
    grt__tevent e = pop(sim);
    sim->now = e.t;
    if (++sim->gs.events % 65536 == 0 && sim->cfg.on_progress) sim->cfg.on_progress(sim->cfg.progress_ctx, sim->now);
    st = handle(sim, &e);
    /* every event of one instant first, then one dispatch for all of them */
    if (!st && (!sim->n_heap || sim->heap[0].t != sim->now)) st = dispatch(sim);
  }
  grt__tenant_finish_stats(sim);
  if (st)
    st = grt__tenant_fail(sim, st, "the simulation stopped at %llu ns: %s", (unsigned long long)sim->now,
                          grt_status_str(st));
  return st;
}
