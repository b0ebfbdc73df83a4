/* native.c — gpurt._native: the module, its errors and its loaded traces.
 * Every call that reads or replays a trace releases the GIL, so a thread
 * pool maps snapshots in parallel (a loaded trace is immutable). */
#include "native.h"

#include <string.h>

/* status name -> exception class; set by gpurt/_errors.py at import */
static PyObject *error_classes, *error_base;

PyObject *native_raise(grt_status st, const char *msg) {
  const char *name = grt_status_name(st);
  PyObject *cls = error_classes ? PyDict_GetItemString(error_classes, name) : NULL;
  if (!cls) cls = error_base ? error_base : PyExc_RuntimeError;
  PyObject *exc = PyObject_CallFunction(cls, "ssi", msg && *msg ? msg : grt_status_str(st), name, (int)st);
  if (exc) {
    PyErr_SetObject((PyObject *)Py_TYPE(exc), exc);
    Py_DECREF(exc);
  }
  return NULL;
}

int native_set(PyObject *d, const char *key, PyObject *v) {
  if (!v) return -1;
  int rc = PyDict_SetItemString(d, key, v);
  Py_DECREF(v);
  return rc;
}

int native_set_u64(PyObject *d, const char *key, uint64_t v) {
  return native_set(d, key, PyLong_FromUnsignedLongLong(v));
}

static PyObject *register_errors(PyObject *self, PyObject *args) {
  (void)self;
  PyObject *base, *classes;
  if (!PyArg_ParseTuple(args, "OO!", &base, &PyDict_Type, &classes)) return NULL;
  Py_XSETREF(error_base, Py_NewRef(base));
  Py_XSETREF(error_classes, Py_NewRef(classes));
  Py_RETURN_NONE;
}

/* [(code, name, text)] for every status the library defines. */
static PyObject *statuses(PyObject *self, PyObject *unused) {
  (void)self, (void)unused;
  PyObject *list = PyList_New(0);
  for (int st = 0; list; st++) {
    const char *name = grt_status_name((grt_status)st);
    if (!strcmp(name, "GRT_STATUS_UNKNOWN")) break;
    PyObject *t = Py_BuildValue("iss", st, name, grt_status_str((grt_status)st));
    if (!t || PyList_Append(list, t)) Py_CLEAR(list);
    Py_XDECREF(t);
  }
  return list;
}

/* ---- traces ---- */

static void trace_dealloc(TraceObject *self) {
  if (self->trace) native_drop(grt_trace_destroy(self->trace)); /* a trace's destroy cannot fail once loaded */
  Py_XDECREF(self->name);
  Py_TYPE(self)->tp_free((PyObject *)self);
}

grt_trace *native_trace(PyObject *o) {
  if (!PyObject_TypeCheck(o, &Trace_Type) || !((TraceObject *)o)->trace) {
    PyErr_SetString(PyExc_TypeError, "expected a gpurt trace (gpurt.load)");
    return NULL;
  }
  return ((TraceObject *)o)->trace;
}

static PyObject *new_trace(grt_trace *t, const char *name, int device) {
  TraceObject *o = PyObject_New(TraceObject, &Trace_Type);
  if (!o) {
    native_drop(grt_trace_destroy(t));
    return NULL;
  }
  o->trace = t;
  o->device = device;
  o->name = PyUnicode_DecodeFSDefault(name);
  if (!o->name) Py_CLEAR(o);
  return (PyObject *)o;
}

static PyObject *load_failed(grt_status st, const grt_trace_error *err) {
  char msg[700];
  if (grt_trace_error_format(err, msg, sizeof msg)) snprintf(msg, sizeof msg, "%s", err->reason);
  return native_raise(st, msg);
}

/* Loads from a file (path) or from memory (data, len), the GIL released. */
static PyObject *load(const char *path, const void *data, size_t len, const char *name, int device) {
  grt_trace_load_config cfg;
  grt_trace_load_config_default(&cfg);
  cfg.device = device;
  grt_trace *t = NULL;
  grt_trace_error err;
  memset(&err, 0, sizeof err);
  grt_status st;
  Py_BEGIN_ALLOW_THREADS
  st = path ? grt_trace_load(path, &cfg, &t, &err) : grt_trace_load_buffer(data, len, name, &cfg, &t, &err);
  Py_END_ALLOW_THREADS
  return st ? load_failed(st, &err) : new_trace(t, path ? path : name, device);
}

static PyObject *load_path(PyObject *self, PyObject *args) {
  (void)self;
  PyObject *path_obj;
  int device;
  if (!PyArg_ParseTuple(args, "O&i", PyUnicode_FSConverter, &path_obj, &device)) return NULL;
  PyObject *r = load(PyBytes_AS_STRING(path_obj), NULL, 0, NULL, device);
  Py_DECREF(path_obj);
  return r;
}

static PyObject *load_bytes(PyObject *self, PyObject *args) {
  (void)self;
  Py_buffer buf;
  const char *name;
  int device;
  if (!PyArg_ParseTuple(args, "y*si", &buf, &name, &device)) return NULL;
  PyObject *r = load(NULL, buf.buf, (size_t)buf.len, name, device);
  PyBuffer_Release(&buf);
  return r;
}

static PyObject *trace_info(TraceObject *self, PyObject *unused) {
  (void)unused;
  grt_trace_info in;
  grt_status st = grt_trace_get_info(self->trace, &in);
  if (st) return native_raise(st, "grt_trace_get_info");
  PyObject *d = PyDict_New(), *kinds = PyDict_New();
  if (!d || !kinds) goto fail;
  for (int k = 0; k < GRT_TRACE_KIND_COUNT; k++)
    if (native_set_u64(kinds, grt_trace_kind_name((grt_trace_kind)k), in.count[k])) goto fail;
  if (native_set(d, "format", PyUnicode_FromString(grt_trace_format_name(in.format))) ||
      native_set(d, "device", PyLong_FromLong(in.device)) || native_set(d, "devices", PyLong_FromLong(in.n_devices)) ||
      native_set_u64(d, "events", in.n_events) || native_set_u64(d, "streams", in.n_streams) ||
      native_set_u64(d, "segments", in.n_segments) || native_set_u64(d, "stacks", in.n_stacks) ||
      native_set_u64(d, "frames", in.n_frames) || native_set_u64(d, "frames_skipped", in.frames_skipped) ||
      native_set(d, "expandable_segments", PyBool_FromLong(in.settings.expandable_segments)) ||
      native_set(d, "kinds", Py_NewRef(kinds)))
    goto fail;
  Py_DECREF(kinds);
  return d;
fail:
  Py_XDECREF(d);
  Py_XDECREF(kinds);
  return NULL;
}

static PyObject *trace_recorded(TraceObject *self, PyObject *unused) {
  (void)unused;
  grt_trace_recorded r;
  grt_status st;
  Py_BEGIN_ALLOW_THREADS
  st = grt_trace_recorded_figures(self->trace, &r);
  Py_END_ALLOW_THREADS
  if (st) return native_raise(st, "grt_trace_recorded_figures");
  PyObject *d = PyDict_New();
  if (!d) return NULL;
  struct { const char *k; uint64_t v; } f[] = {
      {"reserved_start", r.reserved_start},     {"reserved_peak", r.reserved_peak},
      {"reserved_end", r.reserved_end},         {"reserved_peak_event", r.reserved_peak_event},
      {"requested_start", r.requested_start},   {"requested_peak", r.requested_peak},
      {"requested_end", r.requested_end},       {"requested_peak_event", r.requested_peak_event},
      {"allocated_end", r.allocated_end},       {"device_mallocs", r.device_mallocs},
      {"device_frees", r.device_frees},         {"ooms", r.ooms},
      {"device_memory", r.device_memory},       {"unmatched_frees", r.unmatched_frees}};
  for (size_t i = 0; i < sizeof f / sizeof f[0]; i++)
    if (native_set_u64(d, f[i].k, f[i].v)) return Py_DECREF(d), NULL;
  if (native_set(d, "partial", PyBool_FromLong(r.partial))) return Py_DECREF(d), NULL;
  return d;
}

/* The final segments: [(address, size, stream, large, blocks)]. */
static PyObject *trace_segments(TraceObject *self, PyObject *unused) {
  (void)unused;
  grt_trace_info in;
  grt_status st = grt_trace_get_info(self->trace, &in);
  if (st) return native_raise(st, "grt_trace_get_info");
  PyObject *list = PyList_New((Py_ssize_t)in.n_segments);
  for (size_t i = 0; list && i < in.n_segments; i++) {
    const grt_trace_segment *s = &in.segments[i];
    PyObject *t = Py_BuildValue("(KKKOn)", (unsigned long long)s->addr, (unsigned long long)s->total_size,
                                (unsigned long long)s->stream, s->is_large ? Py_True : Py_False,
                                (Py_ssize_t)s->n_blocks);
    if (!t) Py_CLEAR(list);
    else PyList_SET_ITEM(list, (Py_ssize_t)i, t);
  }
  return list;
}

static PyMethodDef trace_methods[] = {
    {"info", (PyCFunction)trace_info, METH_NOARGS, "What the trace holds: format, events, streams, ..."},
    {"recorded", (PyCFunction)trace_recorded, METH_NOARGS, "The recorded run's own figures."},
    {"segments", (PyCFunction)trace_segments, METH_NOARGS, "The final segments."},
    {NULL, NULL, 0, NULL}};

static PyObject *trace_get_name(TraceObject *self, void *unused) {
  (void)unused;
  return Py_NewRef(self->name);
}

static PyObject *trace_get_device(TraceObject *self, void *unused) {
  (void)unused;
  return PyLong_FromLong(self->device);
}

static PyGetSetDef trace_getset[] = {
    {"name", (getter)trace_get_name, NULL, "the file the trace was read from, or the name it was given", NULL},
    {"device", (getter)trace_get_device, NULL, "the device (device_traces entry) loaded", NULL},
    {NULL, NULL, NULL, NULL, NULL}};

PyTypeObject Trace_Type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "gpurt._native.Trace",
    .tp_basicsize = sizeof(TraceObject),
    .tp_dealloc = (destructor)trace_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A loaded trace (immutable): gpurt.load() makes one.",
    .tp_methods = trace_methods,
    .tp_getset = trace_getset,
};

static PyMethodDef module_methods[] = {
    {"_register_errors", register_errors, METH_VARARGS, "Sets the exception classes by status name."},
    {"statuses", statuses, METH_NOARGS, "Every status: (code, name, text)."},
    {"load_path", load_path, METH_VARARGS, "Reads a trace file (any format)."},
    {"load_bytes", load_bytes, METH_VARARGS, "Reads a trace from bytes (any format)."},
    {"replay", (PyCFunction)(void (*)(void))native_replay, METH_VARARGS | METH_KEYWORDS, "Replays a trace."},
    {"fidelity", native_fidelity, METH_VARARGS, "Scores the faithful model against a snapshot."},
    {"doctor_json", (PyCFunction)(void (*)(void))native_doctor_json, METH_VARARGS | METH_KEYWORDS,
     "The doctor's diagnosis as JSON."},
    {"whatif_json", (PyCFunction)(void (*)(void))native_whatif_json, METH_VARARGS | METH_KEYWORDS,
     "The what-if advice as JSON."},
    {"page_save", native_page_save, METH_VARARGS, "Writes the snapshot's HTML page."},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef module_def = {PyModuleDef_HEAD_INIT, "gpurt._native", "gpurt's C library.", -1,
                                        module_methods, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__native(void) {
  if (PyType_Ready(&Trace_Type) < 0) return NULL;
  PyObject *m = PyModule_Create(&module_def);
  if (!m) return NULL;
  if (PyModule_AddObjectRef(m, "Trace", (PyObject *)&Trace_Type) || native_alloc_types(m) ||
      PyModule_AddStringConstant(m, "libdir", GPURT_LIBDIR)) {
    Py_DECREF(m);
    return NULL;
  }
  return m;
}
