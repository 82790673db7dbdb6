/* crashext: a C extension the native-stack tests build (one per
 * interpreter) and call through a chain Python -> C -> Python -> C.
 *
 *   crashext.call(fn)   calls fn() from C and returns what it returns
 *   crashext.block()    blocks in C (pause(), the GIL released) until a
 *                       signal
 *   crashext.crash()    writes through a bad pointer: SIGSEGV
 *
 * Built with the interpreter's own headers, or with the limited API
 * (abi3) when it has none; the functions keep their symbols. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <stdint.h>
#include <unistd.h>

__attribute__((noinline, visibility("default"))) void
crashext_crash_here(volatile int *where)
{
    *where = 1;
}

__attribute__((noinline, visibility("default"))) void crashext_block_here(void)
{
    pause();
}

static PyObject *crashext_call(PyObject *self, PyObject *fn)
{
    (void)self;
    return PyObject_CallObject(fn, NULL);
}

static PyObject *crashext_block(PyObject *self, PyObject *unused)
{
    (void)self;
    (void)unused;
    Py_BEGIN_ALLOW_THREADS
    crashext_block_here();
    Py_END_ALLOW_THREADS
    Py_RETURN_NONE;
}

static PyObject *crashext_crash(PyObject *self, PyObject *unused)
{
    (void)self;
    (void)unused;
    crashext_crash_here((volatile int *)(uintptr_t)8);
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"call", crashext_call, METH_O, "call(fn): fn() called from C"},
    {"block", crashext_block, METH_NOARGS, "block in C until a signal"},
    {"crash", crashext_crash, METH_NOARGS, "SIGSEGV"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "crashext", NULL, -1, methods,
    NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit_crashext(void)
{
    return PyModule_Create(&module);
}
