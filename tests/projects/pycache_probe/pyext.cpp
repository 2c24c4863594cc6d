// Extension-like module: sees Python.h and the numpy headers.
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#define NPY_NO_DEPRECATED_API NPY_1_7_API_VERSION
#include <numpy/arrayobject.h>

int probe_plain_answer();

static PyObject *answer(PyObject *, PyObject *) { return PyLong_FromLong(probe_plain_answer()); }

static PyMethodDef methods[] = {{"answer", answer, METH_NOARGS, nullptr}, {nullptr, nullptr, 0, nullptr}};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "pyext", nullptr, -1, methods};

PyMODINIT_FUNC PyInit_pyext(void) {
  import_array();
  return PyModule_Create(&module);
}
