/* native.h — gpurt._native, the CPython extension over libgpurt: the
 * pieces shared by its files (native.c: the module, errors and traces;
 * native_replay.c: replays, fidelity, the doctor; native_alloc.c: devices
 * and allocators). Python's own code (gpurt/__init__.py) shapes the API. */
#ifndef GPURT_PY_NATIVE_H
#define GPURT_PY_NATIVE_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "gpurt/doctor.h"

typedef struct {
  PyObject_HEAD
  grt_trace *trace;
  PyObject *name; /* str: the file or "<dict>" */
  int device;
} TraceObject;

extern PyTypeObject Trace_Type;

/* Raises the gpurt.Error subclass registered for st, with msg (or the
 * status's own text). Returns NULL. */
PyObject *native_raise(grt_status st, const char *msg);
/* A dict key set to a new reference (stolen); -1 on failure. */
int native_set(PyObject *d, const char *key, PyObject *v);
int native_set_u64(PyObject *d, const char *key, uint64_t v);
/* The trace of a Trace object argument, or NULL with TypeError set. */
grt_trace *native_trace(PyObject *o);

PyObject *native_replay(PyObject *self, PyObject *args, PyObject *kw);
PyObject *native_fidelity(PyObject *self, PyObject *args);
PyObject *native_doctor_json(PyObject *self, PyObject *args, PyObject *kw);
PyObject *native_whatif_json(PyObject *self, PyObject *args, PyObject *kw);
PyObject *native_page_save(PyObject *self, PyObject *args);
int native_alloc_types(PyObject *module);

PyMODINIT_FUNC PyInit__native(void);

/* A destroy inside a deallocator or after a failure: Python has no caller
 * left to tell, and the library has already released what it could. */
static inline void native_drop(grt_status st) { (void)st; }

#endif
