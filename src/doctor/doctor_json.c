/* doctor_json.c — the doctor's diagnosis and the what-if advice as JSON
 * objects: what gpurt doctor --json and gpurt whatif --json print, and what
 * the Python package hands its callers as dicts. */
#include <inttypes.h>
#include <stdint.h>

#include "gpurt/doctor.h"
#include "report/textbuf.h"

#define SHOWN_FRAMES 8

const char *grt_doctor_verdict_name(grt_doctor_verdict v) {
  return v == GRT_DOCTOR_DEMAND_BOUND          ? "demand-bound"
         : v == GRT_DOCTOR_FRAGMENTATION_BOUND ? "fragmentation-bound"
                                               : "healthy";
}

const char *grt_contract_outcome_name(grt_contract_outcome o) {
  return o == GRT_CONTRACT_BROKEN ? "broken" : o == GRT_CONTRACT_KEPT ? "kept" : "unknown";
}

/* null for the "none" value, else the number. */
static void put_u64_or_null(grt__textbuf *tb, uint64_t v, uint64_t none) {
  if (v == none) grt__textbuf_puts(tb, "null");
  else grt__textbuf_printf(tb, "%" PRIu64, v);
}

static void put_moment(grt__textbuf *tb, const char *name, const grt_doctor_moment *m) {
  if (!m->valid) {
    grt__textbuf_printf(tb, "\"%s\": null, ", name);
    return;
  }
  grt__textbuf_printf(tb, "\"%s\": {\"event\": %" PRIu64 ", \"reserved\": %" PRIu64 ", \"allocated\": %" PRIu64
                      ", \"requested\": %" PRIu64 ", \"internal_fragmentation\": %" PRIu64
                      ", \"external_fragmentation\": %" PRIu64 ", \"releasable\": %" PRIu64
                      ", \"largest_free\": %" PRIu64 ", \"request\": %" PRIu64 ", \"device_free\": %" PRIu64 "}, ",
                      name, m->event, m->reserved, m->allocated, m->requested, m->internal_fragmentation,
                      m->external_fragmentation, m->releasable, m->largest_free, m->request, m->device_free);
}

/* A stack's folded frames as a JSON list (at most SHOWN_FRAMES). */
static void put_frames(grt__textbuf *tb, const grt_trace *t, uint32_t stack) {
  const grt_trace_frame *f;
  size_t nf, keep[SHOWN_FRAMES];
  grt__textbuf_puts(tb, "[");
  if (stack && !grt_trace_stack(t, stack, &f, &nf)) {
    size_t k = grt_trace_frames_fold(f, nf, keep, SHOWN_FRAMES);
    for (size_t j = 0; j < k && j < SHOWN_FRAMES; j++) {
      grt__textbuf_puts(tb, j ? ", {\"name\": " : "{\"name\": ");
      grt__textbuf_json_string(tb, f[keep[j]].name);
      grt__textbuf_puts(tb, ", \"filename\": ");
      grt__textbuf_json_string(tb, f[keep[j]].filename);
      grt__textbuf_printf(tb, ", \"line\": %" PRId64 "}", (int64_t)f[keep[j]].line);
    }
  }
  grt__textbuf_puts(tb, "]");
}

static void put_sites(grt__textbuf *tb, const grt_trace *t, const char *name, const grt_doctor_site *sites, size_t n) {
  grt__textbuf_printf(tb, "\"%s\": [", name);
  for (size_t i = 0; i < n; i++) {
    grt__textbuf_printf(tb, "%s{\"bytes\": %" PRIu64 ", \"count\": %" PRIu64 ", \"frames\": ", i ? ", " : "",
                        sites[i].bytes, sites[i].count);
    put_frames(tb, t, sites[i].stack);
    grt__textbuf_puts(tb, "}");
  }
  grt__textbuf_puts(tb, "], ");
}

static void put_pinned(grt__textbuf *tb, const grt_trace *t, const grt_doctor_report *rep) {
  grt__textbuf_puts(tb, "\"pinned\": [");
  for (size_t i = 0; i < rep->n_pinned; i++) {
    const grt_doctor_pinned *p = &rep->pinned[i];
    grt__textbuf_printf(tb, "%s{\"address\": %" PRIu64 ", \"size\": %" PRIu64 ", \"free\": %" PRIu64
                        ", \"live_blocks\": %" PRIu64 ", \"live_bytes\": %" PRIu64 ", \"first_live_event\": ",
                        i ? ", " : "", p->address, p->size, p->free_bytes, p->live_blocks, p->live_bytes);
    put_u64_or_null(tb, p->first_live_event, UINT64_MAX);
    grt__textbuf_puts(tb, ", \"frames\": ");
    put_frames(tb, t, p->first_live_stack);
    grt__textbuf_puts(tb, "}");
  }
  grt__textbuf_puts(tb, "], ");
}

static void put_contract(grt__textbuf *tb, const grt_trace *t, const grt_doctor_report *rep) {
  const grt_doctor_steady *s = &rep->steady;
  grt__textbuf_puts(tb, "\"steady_state\": ");
  if (s->found)
    grt__textbuf_printf(tb, "{\"iterations\": %" PRIu64 ", \"from_event\": %" PRIu64 ", \"period\": %" PRIu64
                        ", \"similarity\": %.4f}, ", s->iterations, s->from_event, s->period, s->similarity);
  else
    grt__textbuf_puts(tb, "null, ");
  grt__textbuf_puts(tb, "\"contract\": [");
  for (int i = 0; i < GRT_CONTRACT_RULE_COUNT; i++) {
    const grt_contract_finding *f = &rep->contract[i];
    grt__textbuf_printf(tb, "%s{\"rule\": \"%s\", \"outcome\": \"%s\", \"count\": %" PRIu64 ", \"also\": %" PRIu64
                        ", \"bytes\": %" PRIu64 ", \"first_event\": ", i ? ", " : "",
                        grt_contract_rule_name((grt_contract_rule)i), grt_contract_outcome_name(f->outcome), f->count,
                        f->also, f->bytes);
    put_u64_or_null(tb, f->first_event, UINT64_MAX);
    grt__textbuf_puts(tb, ", \"time_us\": ");
    if (f->time_us < 0) grt__textbuf_puts(tb, "null");
    else grt__textbuf_printf(tb, "%" PRId64, f->time_us);
    grt__textbuf_puts(tb, ", \"first_frames\": ");
    put_frames(tb, t, f->stack);
    grt__textbuf_puts(tb, ", \"detail\": ");
    grt__textbuf_json_string(tb, f->detail);
    grt__textbuf_puts(tb, "}");
  }
  grt__textbuf_puts(tb, "], ");
}

static void put_best(grt__textbuf *tb, const grt_whatif_advice *a) {
  if (!a || a->best < 0) grt__textbuf_puts(tb, "null");
  else grt__textbuf_json_string(tb, a->rows[a->best].conf);
}

grt_status grt_doctor_json(const grt_trace *t, const grt_doctor_report *rep, const grt_whatif_advice *advice,
                           const char *name, int device, char **out) {
  if (!t || !rep || !out) return GRT_ERR_INVALID_ARG;
  grt__textbuf tb = {0};
  grt__textbuf_puts(&tb, "{\"snapshot\": ");
  grt__textbuf_json_string(&tb, name ? name : "");
  grt__textbuf_printf(&tb, ", \"device\": %d, \"verdict\": \"%s\", \"why\": ", device,
                      grt_doctor_verdict_name(rep->verdict));
  grt__textbuf_json_string(&tb, rep->why);
  grt__textbuf_printf(&tb, ", \"process_memory\": %" PRIu64 ", \"partial\": %s, ", rep->process_memory,
                      rep->partial ? "true" : "false");
  put_moment(&tb, "peak", &rep->peak);
  put_moment(&tb, "oom", &rep->oom);
  put_sites(&tb, t, "peak_sites", rep->peak_sites, rep->n_peak_sites);
  put_sites(&tb, t, "oom_sites", rep->oom_sites, rep->n_oom_sites);
  put_pinned(&tb, t, rep);
  put_contract(&tb, t, rep);
  if (advice) {
    grt__textbuf_printf(&tb, "\"capacity\": %" PRIu64 ", \"device_model\": \"%s\", \"capacity_from\": ",
                        advice->capacity, grt_device_model_name(advice->device_model));
    grt__textbuf_json_string(&tb, advice->capacity_from);
    grt__textbuf_puts(&tb, ", ");
  }
  grt__textbuf_puts(&tb, "\"recommendation\": ");
  put_best(&tb, advice);
  if (advice && advice->best >= 0) {
    const grt_whatif_row *b = &advice->rows[advice->best];
    for (size_t i = 0; i < advice->n; i++) {
      const grt_whatif_row *r = &advice->rows[i];
      if (r->conf[0] || r->status) continue;
      grt__textbuf_printf(&tb, ", \"recommendation_figures\": {\"ooms\": [%" PRIu64 ", %" PRIu64
                          "], \"peak_reserved\": [%" PRIu64 ", %" PRIu64 "], \"device_calls\": [%" PRIu64
                          ", %" PRIu64 "]}", r->ooms, b->ooms, r->peak_reserved, b->peak_reserved,
                          r->device_mallocs + r->device_frees, b->device_mallocs + b->device_frees);
    }
  }
  grt__textbuf_puts(&tb, "}\n");
  return grt__textbuf_finish(&tb, out, NULL);
}

static void put_row(grt__textbuf *tb, const grt_whatif_row *r, bool last) {
  grt__textbuf_puts(tb, "  {\"conf\": ");
  grt__textbuf_json_string(tb, r->conf);
  grt__textbuf_printf(tb, ", \"ok\": %s, \"ooms\": %" PRIu64 ", \"recorded_ooms\": %" PRIu64
                      ", \"recorded_ooms_avoided\": %" PRIu64 ", \"peak_reserved\": %" PRIu64
                      ", \"final_reserved\": %" PRIu64 ", \"peak_allocated\": %" PRIu64 ", \"min_capacity\": %" PRIu64
                      ", \"device_mallocs\": %" PRIu64 ", \"device_frees\": %" PRIu64 ", \"syncs\": %" PRIu64
                      ", \"alloc_retries\": %" PRIu64 ", \"note\": ",
                      r->status ? "false" : "true", r->ooms, r->recorded_ooms, r->recorded_ooms_avoided,
                      r->peak_reserved, r->final_reserved, r->peak_allocated, r->min_capacity, r->device_mallocs,
                      r->device_frees, r->syncs, r->alloc_retries);
  grt__textbuf_json_string(tb, r->note);
  grt__textbuf_puts(tb, last ? "}\n" : "},\n");
}

grt_status grt_whatif_json(const grt_whatif_advice *a, const char *name, int device, char **out) {
  if (!a || !out) return GRT_ERR_INVALID_ARG;
  grt__textbuf tb = {0};
  const grt_trace_recorded *rec = &a->recorded;
  grt__textbuf_puts(&tb, "{\"snapshot\": ");
  grt__textbuf_json_string(&tb, name ? name : "");
  grt__textbuf_printf(&tb, ", \"device\": %d, \"capacity\": %" PRIu64 ", \"device_model\": \"%s\", \"capacity_from\": ",
                      device, a->capacity, grt_device_model_name(a->device_model));
  grt__textbuf_json_string(&tb, a->capacity_from);
  grt__textbuf_printf(&tb, ", \"goal\": \"%s\",\n", grt_whatif_goal_name(a->goal));
  grt__textbuf_printf(&tb, " \"recorded\": {\"ooms\": %" PRIu64 ", \"peak_reserved\": %" PRIu64
                      ", \"final_reserved\": %" PRIu64 ", \"device_mallocs\": %" PRIu64 ", \"device_frees\": %" PRIu64
                      ", \"partial\": %s},\n \"best\": ", rec->ooms, rec->reserved_peak, rec->reserved_end,
                      rec->device_mallocs, rec->device_frees, rec->partial ? "true" : "false");
  put_best(&tb, a);
  grt__textbuf_puts(&tb, ",\n \"rows\": [\n");
  for (size_t i = 0; i < a->n; i++) put_row(&tb, &a->rows[i], i + 1 == a->n);
  grt__textbuf_puts(&tb, " ]}\n");
  return grt__textbuf_finish(&tb, out, NULL);
}
