/* The slowdown delay's GIL-free part: a busy wait on CLOCK_MONOTONIC (what time.perf_counter_ns reads) with the
 * GIL released, so other threads run Python through it, as they run through a component's own kernels.
 *
 * Its Python twin is profiler/checks/delay.py's spin_until, which holds the GIL (Python cannot release it and
 * keep the core busy); tests/profiler/checks/test_delay.py runs both to one deadline.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <stdint.h>
#include <time.h>

static int64_t monotonic_ns(void) {
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (int64_t)now.tv_sec * 1000000000LL + (int64_t)now.tv_nsec;
}

static PyObject *spin_released(PyObject *self, PyObject *arg) {
    (void)self;
    long long deadline = PyLong_AsLongLong(arg);
    if (deadline == -1 && PyErr_Occurred()) return NULL;
    int64_t now;
    Py_BEGIN_ALLOW_THREADS
    now = monotonic_ns();
    while (now < (int64_t)deadline) now = monotonic_ns();
    Py_END_ALLOW_THREADS
    return PyLong_FromLongLong((long long)now);
}

static PyMethodDef methods[] = {
    {"spin_released", spin_released, METH_O,
     "spin_released(deadline_ns) -> int: busy-wait with the GIL released until CLOCK_MONOTONIC reads deadline_ns; "
     "returns that reading"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "infer_prof.profiler.checks._spin",
    .m_doc = "The slowdown delay's busy wait with the GIL released (see profiler/checks/delay.py).",
    .m_size = -1,
    .m_methods = methods,
};

PyMODINIT_FUNC PyInit__spin(void) { return PyModule_Create(&module); }
