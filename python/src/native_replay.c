/* native_replay.c — replays, fidelity and the doctor for gpurt._native. A
 * replay is set up as `gpurt replay --json` sets it up (the figures are
 * checked against it): a PyTorch snapshot replayed by the caching policy on
 * its recorded addresses starts from the rebuilt state of the moment
 * recording began; a capacity given turns auto placement into first fit; the
 * device is the paged model unless asked otherwise; the smallest zero-OOM
 * capacity is searched for traces under 2M events unless told. */
#include <stdlib.h>
#include <string.h>

#include "native.h"

#define SEARCH_AUTO_MAX_EVENTS 2000000u

typedef struct replay_job {
  const grt_trace *trace;
  grt_replay_config cfg;
  bool rebuild, search, series;
  /* results */
  grt_status st;
  char err[512];
  grt_replay_summary sum;
  grt_replay_sample *samples;
  size_t n_samples;
  bool searched;
  grt_status search_st;
  uint64_t min_capacity, peak_live;
} replay_job;

static void run_job(replay_job *j) {
  grt_replay *r = NULL;
  j->st = grt_replay_open(j->trace, &j->cfg, &r);
  if (j->st) {
    snprintf(j->err, sizeof j->err, "cannot replay with policy '%s': %s", j->cfg.policy,
             j->st == GRT_ERR_NOT_FOUND ? "no such policy" : grt_status_str(j->st));
    return;
  }
  if (j->rebuild) j->st = grt_replay_rebuild_start(r);
  if (!j->st) j->st = grt_replay_run(r);
  if (j->st) snprintf(j->err, sizeof j->err, "%s", grt_replay_last_error(r));
  if (!j->st) j->st = grt_replay_get_summary(r, &j->sum);
  const grt_replay_sample *s = NULL;
  size_t n = 0;
  if (!j->st && j->series && !(j->st = grt_replay_series(r, &s, &n)) && n) {
    if (!(j->samples = malloc(n * sizeof *s))) j->st = GRT_ERR_NOMEM;
    else memcpy(j->samples, s, n * sizeof *s), j->n_samples = n;
  }
  grt_status dst = grt_replay_destroy(r);
  if (!j->st) j->st = dst;
  if (j->st || !j->search) return;
  grt_replay_config c = j->cfg;
  c.record_series = false;
  j->searched = true;
  j->search_st = grt_replay_min_capacity(j->trace, &c, 0, &j->min_capacity, &j->peak_live);
}

static PyObject *u64_list(const grt_replay_sample *s, size_t n, size_t offset) {
  PyObject *l = PyList_New((Py_ssize_t)n);
  for (size_t i = 0; l && i < n; i++) {
    uint64_t v;
    memcpy(&v, (const char *)&s[i] + offset, sizeof v);
    PyObject *x = PyLong_FromUnsignedLongLong(v);
    if (!x) Py_CLEAR(l);
    else PyList_SET_ITEM(l, (Py_ssize_t)i, x);
  }
  return l;
}

static PyObject *series_dict(const replay_job *j) {
  static const struct { const char *name; size_t offset; } cols[] = {
      {"reserved", offsetof(grt_replay_sample, reserved)},
      {"allocated", offsetof(grt_replay_sample, allocated)},
      {"requested", offsetof(grt_replay_sample, requested)},
      {"active", offsetof(grt_replay_sample, active)},
      {"cached", offsetof(grt_replay_sample, cached)},
      {"largest_free", offsetof(grt_replay_sample, largest_free)},
      {"live", offsetof(grt_replay_sample, live)},
      {"device_mallocs", offsetof(grt_replay_sample, device_mallocs)},
      {"device_frees", offsetof(grt_replay_sample, device_frees)}};
  PyObject *d = PyDict_New();
  for (size_t k = 0; d && k < sizeof cols / sizeof cols[0]; k++)
    if (native_set(d, cols[k].name, u64_list(j->samples, j->n_samples, cols[k].offset))) Py_CLEAR(d);
  PyObject *frag = d ? PyList_New((Py_ssize_t)j->n_samples) : NULL;
  for (size_t i = 0; frag && i < j->n_samples; i++) {
    PyObject *x = PyFloat_FromDouble(j->samples[i].fragmentation);
    if (!x) Py_CLEAR(frag);
    else PyList_SET_ITEM(frag, (Py_ssize_t)i, x);
  }
  if (d && native_set(d, "fragmentation", frag)) Py_CLEAR(d);
  return d;
}

static PyObject *summary_dict(const replay_job *j) {
  const grt_replay_summary *s = &j->sum;
  PyObject *d = PyDict_New();
  if (!d) return NULL;
  struct { const char *k; uint64_t v; } f[] = {
      {"events", s->events}, {"allocs", s->allocs}, {"frees", s->frees}, {"unmatched_frees", s->unmatched_frees},
      {"capacity", s->capacity}, {"peak_reserved", s->peak_reserved}, {"peak_allocated", s->peak_allocated},
      {"peak_requested", s->peak_requested}, {"peak_active", s->peak_active}, {"peak_live", s->peak_live},
      {"peak_reserved_event", s->peak_reserved_event}, {"peak_cached", s->peak_cached},
      {"peak_largest_free", s->peak_largest_free}, {"final_reserved", s->final_reserved},
      {"final_allocated", s->final_allocated}, {"device_mallocs", s->device_mallocs},
      {"device_frees", s->device_frees}, {"syncs", s->syncs}, {"num_alloc_retries", s->num_alloc_retries},
      {"ooms", s->ooms}, {"releases", s->releases}, {"recorded_ooms", s->recorded_ooms},
      {"recorded_ooms_failed", s->recorded_ooms_failed}};
  for (size_t i = 0; i < sizeof f / sizeof f[0]; i++)
    if (native_set_u64(d, f[i].k, f[i].v)) goto fail;
  if (native_set(d, "max_fragmentation", PyFloat_FromDouble(s->max_fragmentation)) ||
      native_set(d, "rebuilt", PyBool_FromLong(j->rebuild)))
    goto fail;
  PyObject *oom = Py_None;
  if (s->has_oom && !(oom = Py_BuildValue("{sKsKsKsd}", "event", (unsigned long long)s->first_oom_event, "size",
                                          (unsigned long long)s->first_oom_size, "live",
                                          (unsigned long long)s->first_oom_live, "utilization",
                                          s->first_oom_utilization)))
    goto fail;
  if (native_set(d, "first_oom", oom == Py_None ? Py_NewRef(Py_None) : oom)) goto fail;
  bool found = j->searched && j->search_st == GRT_OK && j->peak_live;
  if (native_set(d, "min_capacity", found ? PyLong_FromUnsignedLongLong(j->min_capacity) : Py_NewRef(Py_None)) ||
      native_set(d, "heap_ratio", found ? PyFloat_FromDouble((double)j->min_capacity / (double)j->peak_live)
                                        : Py_NewRef(Py_None)) ||
      native_set(d, "series", j->n_samples ? series_dict(j) : Py_NewRef(Py_None)))
    goto fail;
  return d;
fail:
  Py_DECREF(d);
  return NULL;
}

PyObject *native_replay(PyObject *self, PyObject *args, PyObject *kw) {
  (void)self;
  static char *kwlist[] = {"trace", "policy", "conf", "capacity", "placement", "device_model", "honor_releases",
                           "series", "search", "from_empty", NULL};
  PyObject *tobj;
  const char *policy = "caching", *conf = NULL, *placement = "auto", *model = "paged";
  unsigned long long capacity = 0;
  int honor = 1, series = 1, search = -1, from_empty = 0;
  if (!PyArg_ParseTupleAndKeywords(args, kw, "O|szKsspppi", kwlist, &tobj, &policy, &conf, &capacity, &placement,
                                   &model, &honor, &series, &search, &from_empty))
    return NULL;
  /* search: -1 auto, 0 off, 1 on (a bool from Python counts as 0/1) */
  grt_trace *t = native_trace(tobj);
  if (!t) return NULL;
  replay_job j;
  memset(&j, 0, sizeof j);
  j.trace = t;
  grt_replay_config_default(&j.cfg);
  j.cfg.policy = policy;
  j.cfg.alloc_conf = conf && *conf ? conf : NULL;
  j.cfg.capacity = capacity;
  j.cfg.honor_releases = honor;
  j.cfg.record_series = series;
  j.series = series;
  grt_status st = grt_device_model_parse(model, &j.cfg.device_model);
  if (st) return native_raise(st, "device_model: want 'contiguous' or 'paged'");
  if (!strcmp(placement, "auto")) j.cfg.placement = capacity ? GRT_REPLAY_PLACE_FIRST_FIT : GRT_REPLAY_PLACE_AUTO;
  else if (!strcmp(placement, "first_fit")) j.cfg.placement = GRT_REPLAY_PLACE_FIRST_FIT;
  else if (!strcmp(placement, "recorded")) j.cfg.placement = GRT_REPLAY_PLACE_RECORDED;
  else return native_raise(GRT_ERR_INVALID_ARG, "placement: want 'auto', 'first_fit' or 'recorded'");
  if (j.cfg.alloc_conf) {
    grt_alloc_config ac;
    grt_alloc_config_default(&ac);
    char err[256];
    if ((st = grt_alloc_config_parse(&ac, j.cfg.alloc_conf, err, sizeof err)))
      return native_raise(st, err);
  }
  grt_trace_info info;
  if ((st = grt_trace_get_info(t, &info))) return native_raise(st, "grt_trace_get_info");
  j.rebuild = info.format == GRT_TRACE_FORMAT_PYTORCH && !from_empty && !strcmp(policy, "caching") &&
              j.cfg.placement != GRT_REPLAY_PLACE_FIRST_FIT;
  j.search = search == 1 || (search == -1 && info.n_events < SEARCH_AUTO_MAX_EVENTS);
  Py_BEGIN_ALLOW_THREADS
  run_job(&j);
  Py_END_ALLOW_THREADS
  PyObject *r = j.st ? native_raise(j.st, j.err) : summary_dict(&j);
  free(j.samples);
  return r;
}

/* ---- fidelity ---- */

static int put_note(PyObject *d, const char *key, const char *note) {
  return native_set(d, key, PyUnicode_DecodeUTF8(note, (Py_ssize_t)strlen(note), "replace"));
}

static PyObject *fidelity_dict(const grt_fidelity_report *f) {
  PyObject *d = PyDict_New(), *shown = PyList_New(0);
  if (!d || !shown) goto fail;
  struct { const char *k; uint64_t v; } n[] = {
      {"allocs", f->allocs}, {"exact", f->exact}, {"divergences", f->divergences},
      {"start_segments", f->start_segments}, {"start_blocks", f->start_blocks},
      {"segment_decisions", f->segment_decisions}, {"segment_decisions_agree", f->segment_decisions_agree},
      {"releases", f->releases}, {"releases_matching", f->releases_matching},
      {"ooms_recorded", f->ooms_recorded}, {"ooms_agree", f->ooms_agree}, {"contradictions", f->contradictions},
      {"final_recorded", f->final_recorded}, {"final_replayed", f->final_replayed},
      {"final_matching", f->final_matching}};
  for (size_t i = 0; i < sizeof n / sizeof n[0]; i++)
    if (native_set_u64(d, n[i].k, n[i].v)) goto fail;
  if (native_set(d, "exact_fraction", PyFloat_FromDouble(f->allocs ? (double)f->exact / (double)f->allocs : 1.0)) ||
      native_set(d, "final_layout_equal", PyBool_FromLong(f->final_layout_equal)) ||
      native_set(d, "expandable", PyBool_FromLong(f->expandable)) ||
      native_set(d, "structure_ok", PyBool_FromLong(f->structure_ok)) ||
      put_note(d, "decision_note", f->decision_note) || put_note(d, "release_note", f->release_note) ||
      put_note(d, "oom_note", f->oom_note) || put_note(d, "contradiction_note", f->contradiction_note) ||
      put_note(d, "layout_note", f->layout_note) || put_note(d, "structure_note", f->structure_note))
    goto fail;
  for (size_t i = 0; i < f->n_shown; i++) {
    const grt_fidelity_divergence *v = &f->shown[i];
    PyObject *x = Py_BuildValue("{sKsKsKsKsKss}", "event", (unsigned long long)v->event, "size",
                                (unsigned long long)v->size, "stream", (unsigned long long)v->stream, "recorded",
                                (unsigned long long)v->recorded, "replayed", (unsigned long long)v->replayed,
                                "context", v->context);
    if (!x || PyList_Append(shown, x)) {
      Py_XDECREF(x);
      goto fail;
    }
    Py_DECREF(x);
  }
  if (native_set(d, "shown", Py_NewRef(shown))) goto fail;
  Py_DECREF(shown);
  return d;
fail:
  Py_XDECREF(d);
  Py_XDECREF(shown);
  return NULL;
}

PyObject *native_fidelity(PyObject *self, PyObject *args) {
  (void)self;
  PyObject *tobj;
  if (!PyArg_ParseTuple(args, "O", &tobj)) return NULL;
  grt_trace *t = native_trace(tobj);
  if (!t) return NULL;
  grt_fidelity_report *rep = malloc(sizeof *rep);
  if (!rep) return PyErr_NoMemory();
  char err[512] = "";
  grt_status st;
  Py_BEGIN_ALLOW_THREADS
  st = grt_replay_fidelity(t, rep, err, sizeof err);
  Py_END_ALLOW_THREADS
  PyObject *r = st ? native_raise(st, err) : fidelity_dict(rep);
  free(rep);
  return r;
}

/* ---- the doctor, the what-if advice, the page ---- */

typedef struct advice_args {
  PyObject *trace;
  unsigned long long capacity;
  const char *model, *goal;
  unsigned threads;
  int search;
  grt_whatif_options o;
  grt_whatif_goal g;
} advice_args;

static int parse_advice(PyObject *args, PyObject *kw, advice_args *a) {
  static char *kwlist[] = {"trace", "capacity", "device_model", "goal", "threads", "search", NULL};
  memset(a, 0, sizeof *a);
  a->model = "paged";
  a->goal = "no-oom";
  if (!PyArg_ParseTupleAndKeywords(args, kw, "O|KssIp", kwlist, &a->trace, &a->capacity, &a->model, &a->goal,
                                   &a->threads, &a->search))
    return -1;
  if (!native_trace(a->trace)) return -1;
  grt_whatif_options_default(&a->o);
  a->o.capacity = a->capacity;
  a->o.threads = a->threads;
  a->o.search = a->search;
  if (grt_device_model_parse(a->model, &a->o.device_model))
    return native_raise(GRT_ERR_INVALID_ARG, "device_model: want 'contiguous' or 'paged'"), -1;
  if (grt_whatif_goal_parse(a->goal, &a->g))
    return native_raise(GRT_ERR_INVALID_ARG, "goal: want 'no-oom', 'min-reserved' or 'min-syncs'"), -1;
  return 0;
}

/* The trace's file name without its directories, as the CLI names it. */
static const char *trace_basename(TraceObject *to) {
  const char *nm = PyUnicode_AsUTF8(to->name);
  const char *slash = nm ? strrchr(nm, '/') : NULL;
  return slash ? slash + 1 : nm;
}

static PyObject *json_result(grt_status st, char *text, const char *what) {
  PyObject *r = st ? native_raise(st, what) : PyUnicode_FromString(text);
  free(text);
  return r;
}

/* The arguments, the trace and its name: 0, or -1 with the exception set. */
static int advice_target(PyObject *args, PyObject *kw, advice_args *a, TraceObject **to, const char **nm) {
  if (parse_advice(args, kw, a)) return -1;
  *to = (TraceObject *)a->trace;
  return (*nm = trace_basename(*to)) ? 0 : -1;
}

PyObject *native_whatif_json(PyObject *self, PyObject *args, PyObject *kw) {
  (void)self;
  advice_args a;
  TraceObject *to;
  const char *nm;
  if (advice_target(args, kw, &a, &to, &nm)) return NULL;
  grt_whatif_advice adv;
  char *text = NULL;
  grt_status st;
  Py_BEGIN_ALLOW_THREADS
  st = grt_whatif_advise(to->trace, &a.o, a.g, &adv);
  if (!st) st = grt_whatif_json(&adv, nm, to->device, &text);
  grt_whatif_advice_free(&adv);
  Py_END_ALLOW_THREADS
  return json_result(st, text, "the what-if sweep failed");
}

PyObject *native_doctor_json(PyObject *self, PyObject *args, PyObject *kw) {
  (void)self;
  advice_args a;
  TraceObject *to;
  const char *nm;
  if (advice_target(args, kw, &a, &to, &nm)) return NULL;
  grt_doctor_report *rep = malloc(sizeof *rep);
  if (!rep) return PyErr_NoMemory();
  grt_whatif_advice adv;
  memset(&adv, 0, sizeof adv);
  char err[512] = "", *text = NULL;
  grt_status st;
  Py_BEGIN_ALLOW_THREADS
  st = grt_doctor_examine(to->trace, rep, err, sizeof err);
  if (!st && (st = grt_whatif_advise(to->trace, &a.o, a.g, &adv)))
    snprintf(err, sizeof err, "the what-if sweep failed");
  if (!st) st = grt_doctor_json(to->trace, rep, &adv, nm, to->device, &text);
  grt_whatif_advice_free(&adv);
  Py_END_ALLOW_THREADS
  free(rep);
  return json_result(st, text, err);
}

PyObject *native_page_save(PyObject *self, PyObject *args) {
  (void)self;
  PyObject *tobj, *path;
  const char *name;
  if (!PyArg_ParseTuple(args, "OO&s", &tobj, PyUnicode_FSConverter, &path, &name)) return NULL;
  grt_trace *t = native_trace(tobj);
  if (!t) return Py_DECREF(path), NULL;
  char err[512] = "";
  size_t n = 0;
  grt_status st;
  const char *p = PyBytes_AS_STRING(path);
  int device = ((TraceObject *)tobj)->device;
  Py_BEGIN_ALLOW_THREADS
  st = grt_doctor_page_save(t, NULL, name, device, p, &n, err, sizeof err);
  Py_END_ALLOW_THREADS
  Py_DECREF(path);
  return st ? native_raise(st, err) : PyLong_FromSize_t(n);
}
