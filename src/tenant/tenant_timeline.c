/* tenant_timeline.c — the multi-tenant run as a Chrome trace: a process per
 * tenant, each kernel run a complete ("X") slice on the first of the
 * tenant's lanes that is free at its start (MPS runs a tenant's kernels side
 * by side; a lane keeps them from overlapping, which trace viewers need),
 * and the context switches on a "device" process. */
#include <stdlib.h>

#include "tenant/tenant_impl.h"

grt_status grt__tenant_log_slice(grt_tenant_sim *sim, const grt__tkernel *k, uint64_t end_ns) {
  if (sim->n_slices == sim->cap_slices) {
    size_t cap = sim->cap_slices ? 2 * sim->cap_slices : 1024;
    grt__slice *v = realloc(sim->slices, cap * sizeof *v);
    if (!v) return GRT_ERR_NOMEM;
    sim->slices = v, sim->cap_slices = cap;
  }
  sim->slices[sim->n_slices++] = (grt__slice){k->tenant, k->idx, k->sms, sim->r[k->req].seq, k->start_ns, end_ns};
  return GRT_OK;
}

grt_status grt__tenant_log_switch(grt_tenant_sim *sim, uint64_t start_ns) {
  if (sim->n_switch == sim->cap_switch) {
    size_t cap = sim->cap_switch ? 2 * sim->cap_switch : 256;
    uint64_t *v = realloc(sim->switch_log, cap * sizeof *v);
    if (!v) return GRT_ERR_NOMEM;
    sim->switch_log = v, sim->cap_switch = cap;
  }
  sim->switch_log[sim->n_switch++] = start_ns;
  return GRT_OK;
}

static int by_start(const void *a, const void *b) {
  const grt__slice *x = a, *y = b;
  if (x->start_ns != y->start_ns) return x->start_ns < y->start_ns ? -1 : 1;
  return (x->tenant > y->tenant) - (x->tenant < y->tenant);
}

#define MAX_LANES 256

static void json_name(FILE *f, const char *s) {
  for (; *s; s++)
    if (*s == '"' || *s == '\\')
      fprintf(f, "\\%c", *s);
    else if ((unsigned char)*s >= 0x20)
      fputc(*s, f);
}

grt_status grt_tenant_sim_write_timeline(const grt_tenant_sim *sim, FILE *f) {
  if (!sim || !f) return GRT_ERR_INVALID_ARG;
  if (!sim->cfg.record_timeline || !sim->ran) return GRT_ERR_STATE;
  grt__slice *v = malloc((sim->n_slices ? sim->n_slices : 1) * sizeof *v);
  uint64_t(*lanes)[MAX_LANES] = calloc(sim->n ? sim->n : 1, sizeof *lanes);
  if (!v || !lanes) {
    free(v);
    free(lanes);
    return GRT_ERR_NOMEM;
  }
  for (size_t i = 0; i < sim->n_slices; i++) v[i] = sim->slices[i];
  qsort(v, sim->n_slices, sizeof *v, by_start);
  fprintf(f, "{\"displayTimeUnit\":\"ns\",\"traceEvents\":[\n");
  fprintf(f, "{\"ph\":\"M\",\"pid\":0,\"name\":\"process_name\",\"args\":{\"name\":\"device\"}}");
  for (uint32_t t = 0; t < sim->n; t++) {
    fprintf(f, ",\n{\"ph\":\"M\",\"pid\":%u,\"name\":\"process_name\",\"args\":{\"name\":\"", t + 1);
    json_name(f, sim->t[t]->cfg.name);
    fprintf(f, "\"}}");
  }
  for (size_t i = 0; i < sim->n_slices; i++) {
    const grt__slice *s = &v[i];
    unsigned lane = 0;
    while (lane + 1 < MAX_LANES && lanes[s->tenant][lane] > s->start_ns) lane++;
    lanes[s->tenant][lane] = s->end_ns;
    fprintf(f,
            ",\n{\"ph\":\"X\",\"pid\":%u,\"tid\":%u,\"ts\":%.3f,\"dur\":%.3f,\"name\":\"k%u\","
            "\"args\":{\"request\":%llu,\"sms\":%u}}",
            s->tenant + 1, lane, (double)s->start_ns / 1000.0, (double)(s->end_ns - s->start_ns) / 1000.0, s->idx,
            (unsigned long long)s->req_seq, s->sms);
  }
  for (size_t i = 0; i < sim->n_switch; i++)
    fprintf(f, ",\n{\"ph\":\"X\",\"pid\":0,\"tid\":0,\"ts\":%.3f,\"dur\":%.3f,\"name\":\"context switch\"}",
            (double)sim->switch_log[i] / 1000.0, (double)sim->cfg.switch_ns / 1000.0);
  fprintf(f, "\n]}\n");
  free(v);
  free(lanes);
  return ferror(f) ? GRT_ERR_IO : GRT_OK;
}
