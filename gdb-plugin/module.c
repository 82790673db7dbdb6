/* pyunwind_gdb._pyunwind: the C core as a CPython extension module, built
 * against the Python that gdb embeds.  It knows nothing about gdb: the
 * Python half (pyunwind_gdb/__init__.py) decides how to open a session and
 * passes gdb's memory in as a Python callable when it must.
 *
 *   Session()                              an unopened session
 *   Session.open_pid(pid)                  a live local process
 *   Session.open_core(core, exe, sysroot)  an ELF core file
 *   Session.open_memory(read, pid, hint, mappings, signal)
 *        read(addr, size) -> bytes-like   memory of the target
 *        mappings: [(start, end, offset, prot, path or None)] or None
 *        signal: (signo, native thread id) or None
 *   Session.run(command, argv, retry_torn, source) -> (code, out, diag, msg)
 *   Session.close()
 *   parse(command, argv) -> dict of options, or raises Error
 *   help(command) -> str, options(command) -> [str]
 *        command: "dump" (py-dump) or "tasks" (py-tasks)
 *   Error: raised with a one-line message; .code is the CLI's exit code
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "command.h"
#include "pyunwind/pyunwind.h"

#include <stdlib.h>
#include <string.h>

static PyObject *Error; /* pyunwind_gdb._pyunwind.Error */

static PyObject *raise_error(int code, const char *msg)
{
    PyObject *exc = PyObject_CallFunction(Error, "s", msg);
    if (exc) {
        PyObject *c = PyLong_FromLong(code);
        if (c && PyObject_SetAttrString(exc, "code", c) == 0)
            PyErr_SetObject(Error, exc);
        Py_XDECREF(c);
        Py_DECREF(exc);
    }
    return NULL;
}

/* ------------------------------------------ argv from a list of strings */

typedef struct {
    int argc;
    char **argv; /* argv[0] = the command; strings owned here */
} argvec;

/* "dump" or "tasks" -> the command, or -1 with TypeError set. */
static int command_kind(const char *name)
{
    if (strcmp(name, "dump") == 0)
        return PYU_CMD_DUMP;
    if (strcmp(name, "tasks") == 0)
        return PYU_CMD_TASKS;
    PyErr_Format(PyExc_ValueError, "unknown command %s", name);
    return -1;
}

static void argvec_free(argvec *a)
{
    for (int i = 0; a->argv && i < a->argc; i++)
        free(a->argv[i]);
    free(a->argv);
    a->argv = NULL;
}

static int argvec_from(argvec *a, PyObject *list)
{
    PyObject *seq = PySequence_Fast(list, "argv must be a list of str");
    if (!seq)
        return -1;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    a->argc = 0;
    a->argv = calloc((size_t)n + 2, sizeof *a->argv);
    if (!a->argv)
        goto nomem;
    a->argv[a->argc++] = strdup("py-dump");
    if (!a->argv[0])
        goto nomem;
    for (Py_ssize_t i = 0; i < n; i++) {
        const char *s = PyUnicode_AsUTF8(PySequence_Fast_GET_ITEM(seq, i));
        if (!s) {
            Py_DECREF(seq);
            argvec_free(a);
            return -1;
        }
        if (!(a->argv[a->argc] = strdup(s)))
            goto nomem;
        a->argc++;
    }
    Py_DECREF(seq);
    return 0;
nomem:
    Py_DECREF(seq);
    argvec_free(a);
    PyErr_NoMemory();
    return -1;
}

/* Parses (command, argv list) into *a and *o; raises Error on bad options.
 * On success the caller frees *a (o's strings point into it). */
static int parse_command(const char *command, PyObject *list, argvec *a,
                         pyu_cmd_opts *o)
{
    int kind = command_kind(command);
    if (kind < 0 || argvec_from(a, list) < 0)
        return -1;
    char msg[1024] = "";
    int ex = pyu_cmd_parse(o, (enum pyu_cmd_kind)kind, PYU_CMD_DEBUGGER,
                           a->argc, a->argv, msg, sizeof msg);
    if (ex != PYU_EXIT_OK) {
        argvec_free(a);
        raise_error(ex, msg);
        return -1;
    }
    return 0;
}

/* ------------------------------------- memory through a Python callable */

typedef struct {
    PyObject *read;     /* read(addr, size) -> bytes-like */
    pyu_mapping *maps;  /* sorted by start */
    char **paths;
    size_t nmaps;
    int signo;
    uint64_t signal_tid;
    int interrupted;    /* a KeyboardInterrupt is pending */
} pymem;

static int pymem_read(void *ctx, const pyu_range *r, size_t n)
{
    pymem *m = ctx;
    if (m->interrupted)
        return -PYU_E_IO;
    for (size_t i = 0; i < n; i++) {
        PyObject *res = PyObject_CallFunction(m->read, "KK",
                                              (unsigned long long)r[i].addr,
                                              (unsigned long long)r[i].len);
        if (!res) {
            if (PyErr_ExceptionMatches(PyExc_KeyboardInterrupt)) {
                m->interrupted = 1; /* left set: raised after the call */
                return -PYU_E_IO;
            }
            PyErr_Clear();
            return -PYU_E_FAULT;
        }
        Py_buffer view;
        if (PyObject_GetBuffer(res, &view, PyBUF_SIMPLE) < 0) {
            PyErr_Clear();
            Py_DECREF(res);
            return -PYU_E_FAULT;
        }
        int ok = (size_t)view.len == r[i].len;
        if (ok)
            memcpy(r[i].buf, view.buf, r[i].len);
        PyBuffer_Release(&view);
        Py_DECREF(res);
        if (!ok)
            return -PYU_E_FAULT;
    }
    return 0;
}

static int pymem_mappings(void *ctx, pyu_mapping_fn fn, void *arg)
{
    pymem *m = ctx;
    for (size_t i = 0; i < m->nmaps; i++) {
        int rc = fn(arg, &m->maps[i]);
        if (rc)
            return rc;
    }
    return 0;
}

static int pymem_signal(void *ctx, int *signo, uint64_t *tid)
{
    pymem *m = ctx;
    *signo = m->signo;
    *tid = m->signal_tid;
    return 0;
}

static void pymem_destroy(void *ctx)
{
    pymem *m = ctx;
    Py_XDECREF(m->read);
    for (size_t i = 0; i < m->nmaps; i++)
        free(m->paths[i]);
    free(m->paths);
    free(m->maps);
    free(m);
}

/* The session keeps a pointer to its ops: one table with mappings, one
 * without (the core then relies on the runtime hint). */
static const pyu_memory_ops pymem_ops = {
    .read = pymem_read,
    .mappings = pymem_mappings,
    .fatal_signal = pymem_signal,
    .destroy = pymem_destroy,
};
static const pyu_memory_ops pymem_ops_nomaps = {
    .read = pymem_read,
    .fatal_signal = pymem_signal,
    .destroy = pymem_destroy,
};

static int cmp_maps(const void *a, const void *b)
{
    const pyu_mapping *x = a, *y = b;
    return x->start < y->start ? -1 : x->start > y->start;
}

/* Fills m->maps from a list of (start, end, offset, prot, path or None). */
static int pymem_set_maps(pymem *m, PyObject *list)
{
    PyObject *seq = PySequence_Fast(list, "mappings must be a list");
    if (!seq)
        return -1;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    m->maps = calloc((size_t)n + 1, sizeof *m->maps);
    m->paths = calloc((size_t)n + 1, sizeof *m->paths);
    if (!m->maps || !m->paths) {
        Py_DECREF(seq);
        PyErr_NoMemory();
        return -1;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        unsigned long long start, end, offset;
        unsigned prot;
        PyObject *path;
        if (!PyArg_ParseTuple(PySequence_Fast_GET_ITEM(seq, i), "KKKIO",
                              &start, &end, &offset, &prot, &path))
            goto fail;
        pyu_mapping *mp = &m->maps[m->nmaps];
        mp->start = start;
        mp->end = end;
        mp->offset = offset;
        mp->prot = prot;
        if (path != Py_None) {
            const char *p = PyUnicode_AsUTF8(path);
            if (!p)
                goto fail;
            if (!(m->paths[m->nmaps] = strdup(p))) {
                PyErr_NoMemory();
                goto fail;
            }
            mp->path = m->paths[m->nmaps];
        }
        m->nmaps++;
    }
    Py_DECREF(seq);
    qsort(m->maps, m->nmaps, sizeof *m->maps, cmp_maps);
    return 0;
fail:
    Py_DECREF(seq);
    return -1;
}

/* -------------------------------------------------------------- Session */

typedef struct {
    PyObject_HEAD
    pyu_session *s;
    pymem *mem; /* owned by s once opened */
    int opened;
} Session;

static int Session_init(Session *self, PyObject *args, PyObject *kw)
{
    (void)args;
    (void)kw;
    if (self->s)
        pyu_session_free(self->s);
    self->s = pyu_session_new();
    self->opened = 0;
    if (!self->s) {
        PyErr_NoMemory();
        return -1;
    }
    return 0;
}

static void Session_dealloc(Session *self)
{
    pyu_session_free(self->s);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static int check_fresh(Session *self)
{
    if (!self->s || self->opened) {
        raise_error(PYU_EXIT_INTERNAL, "session already opened or closed");
        return -1;
    }
    return 0;
}

static PyObject *opened(Session *self, int rc)
{
    if (rc < 0)
        return raise_error(pyu_cmd_exit_for(rc), pyu_errmsg(self->s));
    self->opened = 1;
    Py_RETURN_NONE;
}

static PyObject *Session_open_pid(Session *self, PyObject *args)
{
    int pid;
    if (!PyArg_ParseTuple(args, "i", &pid) || check_fresh(self) < 0)
        return NULL;
    return opened(self, pyu_open_pid(self->s, pid, 0));
}

static PyObject *Session_open_core(Session *self, PyObject *args)
{
    const char *core, *exe = NULL, *sysroot = NULL;
    if (!PyArg_ParseTuple(args, "s|zz", &core, &exe, &sysroot) ||
        check_fresh(self) < 0)
        return NULL;
    return opened(self, pyu_open_core(self->s, core, exe, sysroot));
}

static PyObject *Session_open_memory(Session *self, PyObject *args)
{
    PyObject *read, *maps = Py_None, *sig = Py_None;
    int pid;
    unsigned long long hint;
    if (!PyArg_ParseTuple(args, "OiK|OO", &read, &pid, &hint, &maps, &sig) ||
        check_fresh(self) < 0)
        return NULL;
    if (!PyCallable_Check(read)) {
        PyErr_SetString(PyExc_TypeError, "read must be callable");
        return NULL;
    }
    pymem *m = calloc(1, sizeof *m);
    if (!m)
        return PyErr_NoMemory();
    Py_INCREF(read);
    m->read = read;
    if (maps != Py_None && pymem_set_maps(m, maps) < 0) {
        pymem_destroy(m);
        return NULL;
    }
    if (sig != Py_None) {
        unsigned long long tid;
        if (!PyArg_ParseTuple(sig, "iK", &m->signo, &tid)) {
            pymem_destroy(m);
            return NULL;
        }
        m->signal_tid = tid;
    }
    self->mem = m; /* owned by the session from here on, even on failure */
    int rc = pyu_open_memory(self->s, maps == Py_None ? &pymem_ops_nomaps
                                                      : &pymem_ops,
                             m, pid, hint);
    if (m->interrupted)
        return NULL;
    return opened(self, rc);
}

/* Reads a memstream's buffer into bytes and frees it. */
static PyObject *take_stream(FILE *f, char **buf, size_t *len)
{
    if (f)
        fclose(f);
    PyObject *b = PyBytes_FromStringAndSize(*buf ? *buf : "", *buf ? (Py_ssize_t)*len : 0);
    free(*buf);
    *buf = NULL;
    return b;
}

static PyObject *Session_run(Session *self, PyObject *args)
{
    PyObject *list;
    int retry;
    const char *source, *command;
    if (!PyArg_ParseTuple(args, "sOps", &command, &list, &retry, &source))
        return NULL;
    if (!self->s || !self->opened)
        return raise_error(PYU_EXIT_INTERNAL, "session not opened");
    argvec a;
    pyu_cmd_opts o;
    if (parse_command(command, list, &a, &o) < 0)
        return NULL;
    char msg[1024] = "";
    int ex;
    char *obuf = NULL, *dbuf = NULL;
    size_t olen = 0, dlen = 0;
    FILE *out = open_memstream(&obuf, &olen);
    FILE *diag = open_memstream(&dbuf, &dlen);
    if (!out || !diag) {
        if (out)
            fclose(out);
        if (diag)
            fclose(diag);
        free(obuf);
        free(dbuf);
        argvec_free(&a);
        return PyErr_NoMemory();
    }
    ex = pyu_cmd_run(self->s, &o, retry, source, out, diag, msg, sizeof msg);
    argvec_free(&a);
    PyObject *ob = take_stream(out, &obuf, &olen);
    PyObject *db = take_stream(diag, &dbuf, &dlen);
    if (self->mem && self->mem->interrupted) { /* KeyboardInterrupt is set */
        Py_XDECREF(ob);
        Py_XDECREF(db);
        return NULL;
    }
    if (!ob || !db) {
        Py_XDECREF(ob);
        Py_XDECREF(db);
        return NULL;
    }
    return Py_BuildValue("iNNs", ex, ob, db, msg);
}

static PyObject *Session_close(Session *self, PyObject *unused)
{
    (void)unused;
    pyu_session_free(self->s);
    self->s = NULL;
    self->mem = NULL;
    self->opened = 0;
    Py_RETURN_NONE;
}

static PyMethodDef Session_methods[] = {
    {"open_pid", (PyCFunction)Session_open_pid, METH_VARARGS,
     "open_pid(pid): a live local process"},
    {"open_core", (PyCFunction)Session_open_core, METH_VARARGS,
     "open_core(core, exe=None, sysroot=None): an ELF core file"},
    {"open_memory", (PyCFunction)Session_open_memory, METH_VARARGS,
     "open_memory(read, pid, hint, mappings=None, signal=None): memory "
     "through read(addr, size)"},
    {"run", (PyCFunction)Session_run, METH_VARARGS,
     "run(command, argv, retry_torn, source) -> (code, out, diag, msg)"},
    {"close", (PyCFunction)Session_close, METH_NOARGS, "free the session"},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject SessionType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "pyunwind_gdb._pyunwind.Session",
    .tp_basicsize = sizeof(Session),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A pyunwind session over one target",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)Session_init,
    .tp_dealloc = (destructor)Session_dealloc,
    .tp_methods = Session_methods,
};

/* ----------------------------------------------------- module functions */

static PyObject *mod_parse(PyObject *mod, PyObject *args)
{
    (void)mod;
    const char *command;
    PyObject *list;
    argvec a;
    pyu_cmd_opts o;
    if (!PyArg_ParseTuple(args, "sO", &command, &list) ||
        parse_command(command, list, &a, &o) < 0)
        return NULL;
    PyObject *r = Py_BuildValue(
        "{s:O,s:O,s:O,s:z,s:K}", "help", o.help ? Py_True : Py_False, "json",
        o.json ? Py_True : Py_False, "verbose", o.verbose ? Py_True : Py_False,
        "output", o.output, "thread", (unsigned long long)o.thread);
    argvec_free(&a);
    return r;
}

static PyObject *mod_help(PyObject *mod, PyObject *arg)
{
    (void)mod;
    const char *command = PyUnicode_AsUTF8(arg);
    int kind = command ? command_kind(command) : -1;
    if (kind < 0)
        return NULL;
    return PyUnicode_FromString(pyu_cmd_help((enum pyu_cmd_kind)kind,
                                             PYU_CMD_DEBUGGER));
}

static PyObject *mod_options(PyObject *mod, PyObject *arg)
{
    (void)mod;
    const char *command = PyUnicode_AsUTF8(arg);
    int kind = command ? command_kind(command) : -1;
    if (kind < 0)
        return NULL;
    PyObject *l = PyList_New(0);
    for (const char *const *p = pyu_cmd_options((enum pyu_cmd_kind)kind,
                                                PYU_CMD_DEBUGGER);
         l && *p; p++) {
        PyObject *s = PyUnicode_FromString(*p);
        if (!s || PyList_Append(l, s) < 0) {
            Py_XDECREF(s);
            Py_CLEAR(l);
            break;
        }
        Py_DECREF(s);
    }
    return l;
}

static PyMethodDef module_methods[] = {
    {"parse", mod_parse, METH_VARARGS,
     "parse(command, argv) -> dict: check a command's options"},
    {"help", mod_help, METH_O, "help(command): its help text"},
    {"options", mod_options, METH_O, "options(command): its long options"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef moduledef = {
    PyModuleDef_HEAD_INIT, "_pyunwind",
    "pyunwind's C core, for the gdb plugin", -1, module_methods,
    NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__pyunwind(void)
{
    if (PyType_Ready(&SessionType) < 0)
        return NULL;
    PyObject *m = PyModule_Create(&moduledef);
    if (!m)
        return NULL;
    Error = PyErr_NewException("pyunwind_gdb._pyunwind.Error",
                               PyExc_Exception, NULL);
    Py_INCREF(&SessionType);
    if (!Error || PyModule_AddObject(m, "Error", Error) < 0 ||
        PyModule_AddObject(m, "Session", (PyObject *)&SessionType) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    Py_INCREF(Error);
    return m;
}
