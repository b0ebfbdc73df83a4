/* native_alloc.c — gpurt._native.Device and Allocator: the simulated device
 * and any allocator policy over it, for direct use from Python. Each call
 * holds the GIL (they are short); the allocator's own lock makes it safe to
 * share between threads. An allocator keeps its device alive. */
#include <stdlib.h>
#include <string.h>

#include "gpurt/report.h"
#include "native.h"

typedef struct {
  PyObject_HEAD
  grt_device *dev;
} DeviceObject;

typedef struct {
  PyObject_HEAD
  grt_allocator *a;
  DeviceObject *device;
} AllocatorObject;

static PyTypeObject Device_Type, Allocator_Type;

static int device_init(DeviceObject *self, PyObject *args, PyObject *kw) {
  static char *kwlist[] = {"capacity", "model", "host_backing", NULL};
  unsigned long long capacity = 0;
  const char *model = "contiguous";
  int host_backing = 0;
  if (!PyArg_ParseTupleAndKeywords(args, kw, "K|sp", kwlist, &capacity, &model, &host_backing)) return -1;
  if (self->dev) return native_raise(GRT_ERR_STATE, "the device is already created"), -1;
  grt_device_config c;
  grt_device_config_default(&c);
  c.capacity = capacity;
  c.host_backing = host_backing;
  grt_status st = grt_device_model_parse(model, &c.model);
  if (st) return native_raise(st, "model: want 'contiguous' or 'paged'"), -1;
  if ((st = grt_device_create(&c, &self->dev))) {
    self->dev = NULL;
    return native_raise(st, capacity ? "cannot create the device" : "capacity must be > 0"), -1;
  }
  return 0;
}

static void device_dealloc(DeviceObject *self) {
  if (self->dev) native_drop(grt_device_destroy(self->dev)); /* the allocators holding it are gone first */
  Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *device_stats(DeviceObject *self, PyObject *unused) {
  (void)unused;
  grt_device_stats s;
  grt_status st = self->dev ? grt_device_get_stats(self->dev, &s) : GRT_ERR_DESTROYED;
  if (st) return native_raise(st, "grt_device_get_stats");
  return Py_BuildValue("{sKsKsKsKsKsKsKsKsKsKsKsK}", "capacity", (unsigned long long)s.capacity, "bytes_in_use",
                       (unsigned long long)s.bytes_in_use, "peak_bytes_in_use", (unsigned long long)s.peak_bytes_in_use,
                       "free_bytes", (unsigned long long)s.free_bytes, "largest_hole",
                       (unsigned long long)s.largest_hole, "holes", (unsigned long long)s.holes, "segments",
                       (unsigned long long)s.segments, "malloc_calls", (unsigned long long)s.malloc_calls,
                       "failed_mallocs", (unsigned long long)s.failed_mallocs, "free_calls",
                       (unsigned long long)s.free_calls, "syncs", (unsigned long long)s.syncs, "memory_limit",
                       (unsigned long long)s.memory_limit);
}

static PyObject *device_set_memory_limit(DeviceObject *self, PyObject *arg) {
  unsigned long long limit = PyLong_AsUnsignedLongLong(arg);
  if (PyErr_Occurred()) return NULL;
  grt_status st = grt_device_set_memory_limit(self->dev, limit);
  if (st) return native_raise(st, "grt_device_set_memory_limit");
  Py_RETURN_NONE;
}

static PyMethodDef device_methods[] = {
    {"stats", (PyCFunction)device_stats, METH_NOARGS, "The device's counters (bytes in use, holes, syncs, ...)."},
    {"set_memory_limit", (PyCFunction)device_set_memory_limit, METH_O, "Caps usable bytes (0: none)."},
    {NULL, NULL, 0, NULL}};

static PyTypeObject Device_Type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "gpurt._native.Device",
    .tp_basicsize = sizeof(DeviceObject),
    .tp_dealloc = (destructor)device_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE,
    .tp_doc = "Device(capacity, model='contiguous'): the simulated first-fit device.",
    .tp_methods = device_methods,
    .tp_init = (initproc)device_init,
    .tp_new = PyType_GenericNew,
};

/* ---- allocators ---- */

static PyObject *alloc_fail(AllocatorObject *self, grt_status st) {
  return native_raise(st, self->a ? grt_alloc_last_error(self->a) : "the allocator is closed");
}

static int alloc_init(AllocatorObject *self, PyObject *args, PyObject *kw) {
  static char *kwlist[] = {"device", "policy", "conf", NULL};
  PyObject *dev;
  const char *policy = "caching", *conf = NULL;
  if (!PyArg_ParseTupleAndKeywords(args, kw, "O!|sz", kwlist, &Device_Type, &dev, &policy, &conf)) return -1;
  if (self->a) return native_raise(GRT_ERR_STATE, "the allocator is already created"), -1;
  grt_alloc_config c;
  grt_alloc_config_default(&c);
  char err[256] = "";
  grt_status st = conf ? grt_alloc_config_parse(&c, conf, err, sizeof err) : GRT_OK;
  if (st) return native_raise(st, err), -1;
  if ((st = grt_alloc_create(policy, ((DeviceObject *)dev)->dev, &c, &self->a))) {
    self->a = NULL;
    return native_raise(st, st == GRT_ERR_NOT_FOUND ? "no such policy" : "cannot create the allocator"), -1;
  }
  self->device = (DeviceObject *)Py_NewRef(dev);
  return 0;
}

static void alloc_dealloc(AllocatorObject *self) {
  if (self->a) native_drop(grt_alloc_destroy(self->a)); /* live blocks are released with it */
  Py_XDECREF(self->device);
  Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *alloc_malloc(AllocatorObject *self, PyObject *args, PyObject *kw) {
  static char *kwlist[] = {"size", "stream", NULL};
  unsigned long long size, stream = 0;
  if (!PyArg_ParseTupleAndKeywords(args, kw, "K|K", kwlist, &size, &stream)) return NULL;
  grt_devptr p;
  grt_status st = self->a ? grt_alloc_malloc(self->a, size, stream, &p) : GRT_ERR_DESTROYED;
  return st ? alloc_fail(self, st) : PyLong_FromUnsignedLongLong(p);
}

static PyObject *alloc_ptr_call(AllocatorObject *self, PyObject *arg, grt_status (*fn)(grt_allocator *, grt_devptr)) {
  unsigned long long p = PyLong_AsUnsignedLongLong(arg);
  if (PyErr_Occurred()) return NULL;
  grt_status st = self->a ? fn(self->a, p) : GRT_ERR_DESTROYED;
  if (st) return alloc_fail(self, st);
  Py_RETURN_NONE;
}

static PyObject *alloc_free(AllocatorObject *self, PyObject *arg) { return alloc_ptr_call(self, arg, grt_alloc_free); }

static PyObject *alloc_record_stream(AllocatorObject *self, PyObject *args) {
  unsigned long long p, stream;
  if (!PyArg_ParseTuple(args, "KK", &p, &stream)) return NULL;
  grt_status st = self->a ? grt_alloc_record_stream(self->a, p, stream) : GRT_ERR_DESTROYED;
  if (st) return alloc_fail(self, st);
  Py_RETURN_NONE;
}

/* A call with no argument but the allocator: None, or the error. */
static PyObject *alloc_call(AllocatorObject *self, grt_status (*fn)(grt_allocator *)) {
  grt_status st = self->a ? fn(self->a) : GRT_ERR_DESTROYED;
  if (st) return alloc_fail(self, st);
  Py_RETURN_NONE;
}

static PyObject *alloc_empty_cache(AllocatorObject *self, PyObject *unused) {
  (void)unused;
  return alloc_call(self, grt_alloc_empty_cache);
}

static PyObject *alloc_reset_peak(AllocatorObject *self, PyObject *unused) {
  (void)unused;
  return alloc_call(self, grt_alloc_reset_peak_stats);
}

/* memory_stats() as JSON text (flat "allocated_bytes.all.current" keys). */
static PyObject *alloc_stats_json(AllocatorObject *self, PyObject *unused) {
  (void)unused;
  grt_alloc_stats s;
  char *text = NULL;
  grt_status st = self->a ? grt_alloc_get_stats(self->a, &s) : GRT_ERR_DESTROYED;
  if (st) return alloc_fail(self, st);
  if ((st = grt_stats_json(&s, &text))) return native_raise(st, "grt_stats_json");
  PyObject *r = PyUnicode_FromString(text);
  free(text);
  return r;
}

/* memory_snapshot() as JSON text: {"segments": [...]} as PyTorch's. */
static PyObject *alloc_snapshot_json(AllocatorObject *self, PyObject *unused) {
  (void)unused;
  grt_alloc_snapshot *snap = NULL;
  char *text = NULL;
  grt_status st = self->a ? grt_alloc_snapshot_take(self->a, &snap) : GRT_ERR_DESTROYED;
  if (st) return alloc_fail(self, st);
  st = grt_snapshot_json(snap, 0, &text);
  grt_alloc_snapshot_free(snap);
  if (st) return native_raise(st, "grt_snapshot_json");
  PyObject *r = PyUnicode_FromString(text);
  free(text);
  return r;
}

static PyObject *alloc_block_info(AllocatorObject *self, PyObject *arg) {
  unsigned long long p = PyLong_AsUnsignedLongLong(arg);
  if (PyErr_Occurred()) return NULL;
  uint64_t size = 0, requested = 0;
  grt_status st = self->a ? grt_alloc_block_info(self->a, p, &size, &requested) : GRT_ERR_DESTROYED;
  if (st) return alloc_fail(self, st);
  return Py_BuildValue("(KK)", (unsigned long long)size, (unsigned long long)requested);
}

static PyObject *alloc_check(AllocatorObject *self, PyObject *unused) {
  (void)unused;
  char msg[512] = "";
  grt_status st = self->a ? grt_alloc_check(self->a, msg, sizeof msg) : GRT_ERR_DESTROYED;
  if (st) return native_raise(st, msg);
  Py_RETURN_NONE;
}

static PyObject *alloc_close(AllocatorObject *self, PyObject *unused) {
  (void)unused;
  if (self->a) {
    grt_status st = grt_alloc_destroy(self->a);
    if (st) return alloc_fail(self, st);
    self->a = NULL;
  }
  Py_RETURN_NONE;
}

static PyObject *alloc_get_policy(AllocatorObject *self, void *unused) {
  (void)unused;
  return self->a ? PyUnicode_FromString(grt_alloc_policy(self->a)) : Py_NewRef(Py_None);
}

static PyObject *alloc_get_device(AllocatorObject *self, void *unused) {
  (void)unused;
  return Py_NewRef(self->device ? (PyObject *)self->device : Py_None);
}

static PyMethodDef alloc_methods[] = {
    {"malloc", (PyCFunction)(void (*)(void))alloc_malloc, METH_VARARGS | METH_KEYWORDS,
     "malloc(size, stream=0) -> address"},
    {"free", (PyCFunction)alloc_free, METH_O, "free(address)"},
    {"record_stream", (PyCFunction)alloc_record_stream, METH_VARARGS, "record_stream(address, stream)"},
    {"empty_cache", (PyCFunction)alloc_empty_cache, METH_NOARGS, "Releases every cached free segment."},
    {"reset_peak_stats", (PyCFunction)alloc_reset_peak, METH_NOARGS, "Peaks := current."},
    {"stats_json", (PyCFunction)alloc_stats_json, METH_NOARGS, "memory_stats() as JSON."},
    {"snapshot_json", (PyCFunction)alloc_snapshot_json, METH_NOARGS, "memory_snapshot() as JSON."},
    {"block_info", (PyCFunction)alloc_block_info, METH_O, "block_info(address) -> (size, requested)"},
    {"check", (PyCFunction)alloc_check, METH_NOARGS, "Walks the allocator's invariants."},
    {"close", (PyCFunction)alloc_close, METH_NOARGS, "Destroys the allocator now."},
    {NULL, NULL, 0, NULL}};

static PyGetSetDef alloc_getset[] = {
    {"policy", (getter)alloc_get_policy, NULL, "the policy's name", NULL},
    {"device", (getter)alloc_get_device, NULL, "the device it allocates from", NULL},
    {NULL, NULL, NULL, NULL, NULL}};

static PyTypeObject Allocator_Type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "gpurt._native.Allocator",
    .tp_basicsize = sizeof(AllocatorObject),
    .tp_dealloc = (destructor)alloc_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE,
    .tp_doc = "Allocator(device, policy='caching', conf=None)",
    .tp_methods = alloc_methods,
    .tp_getset = alloc_getset,
    .tp_init = (initproc)alloc_init,
    .tp_new = PyType_GenericNew,
};

static PyObject *policies(PyObject *self, PyObject *unused) {
  (void)self, (void)unused;
  const char *const *names;
  size_t n;
  grt_status st = grt_alloc_policies(&names, &n);
  if (st) return native_raise(st, "grt_alloc_policies");
  PyObject *l = PyList_New((Py_ssize_t)n);
  for (size_t i = 0; l && i < n; i++) {
    PyObject *s = PyUnicode_FromString(names[i]);
    if (!s) Py_CLEAR(l);
    else PyList_SET_ITEM(l, (Py_ssize_t)i, s);
  }
  return l;
}

static PyMethodDef extra_methods[] = {{"policies", policies, METH_NOARGS, "The allocator policies' names."},
                                      {NULL, NULL, 0, NULL}};

int native_alloc_types(PyObject *m) {
  if (PyType_Ready(&Device_Type) < 0 || PyType_Ready(&Allocator_Type) < 0) return -1;
  if (PyModule_AddObjectRef(m, "Device", (PyObject *)&Device_Type) ||
      PyModule_AddObjectRef(m, "Allocator", (PyObject *)&Allocator_Type))
    return -1;
  return PyModule_AddFunctions(m, extra_methods);
}
