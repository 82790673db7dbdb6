/* pyunwind_gdb._pyunwind: the C core as a CPython extension module, built
 * against the Python that gdb embeds.  It knows nothing about gdb: the
 * Python half (pyunwind_gdb/__init__.py) describes gdb's target, the
 * routine both plugins share (frontend/target.c) decides how to read it,
 * and gdb's memory comes in as a Python callable when it must.
 *
 *   Session()                              an unopened session
 *   Session.open_target(where, conn, pid, core, exe, sysroot, forced,
 *                       memory) -> (retry_torn, source)
 *        where: "local", "core" or "other"; conn: gdb's connection type;
 *        forced: read through gdb's memory always; memory(with_signal) ->
 *        (read, hint, mappings, signal, source_time), called when gdb's
 *        memory is used:
 *        read(addr, size) -> bytes-like   memory of the target
 *        hint: the address of _PyRuntime, or 0
 *        mappings: [(start, end, offset, prot, path or None)] or None
 *        signal: (signo, native thread id) or None
 *        source_time: (seconds, core) or None: the memory source's
 *        source_time (a local process's start, a core file's time)
 *   Session.run(command, argv, retry_torn, source) -> (code, out, diag, msg)
 *   Session.dump(thread, async_stacks, retry_torn) -> dict (the dump's
 *        JSON as Python objects, built from the walk)
 *   Session.tasks(retry_torn) -> dict (the task list's JSON, likewise)
 *   Session.entries(tid) -> [(addr, [frame dicts])]: a thread's Python
 *        frames grouped by the eval-loop call that runs them (addr: its
 *        entry frame, on that call's native stack), innermost first; of
 *        every thread state of the thread (gdb's frame filter)
 *   Session.entry_frames(tid, n) -> [addr] * n: the entry frame after
 *        each of the thread's first n Python frames, 0 where none
 *        follows; of its first thread state, as Session.pyframes (py-up)
 *   Session.pyframes(tid, retry_torn) -> PyFrames: one thread's Python
 *        frames with their variables: .count, .error, text(what, k, arg)
 *        -> bytes (py-bt, py-list...: frontend/pyframes.c), frame(k) ->
 *        dict
 *   Session.set_native(fn)                 native stacks from gdb's unwinder:
 *        fn(tid) -> [(pc, sp, name or None, offset, module or None)]
 *        innermost first, or a one-line text saying why there is none
 *   Session.close()
 *   parse(command, argv) -> dict of options, or raises Error
 *   help(command) -> str, options(command) -> [str]
 *        command: "dump" (py-dump) or "tasks" (py-tasks)
 *   Error: raised with a one-line message; .code is the CLI's exit code
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "command.h"
#include "module.h"
#include "pyframes.h"
#include "pyunwind/pyunwind.h"
#include "target.h"

#include <stdlib.h>
#include <string.h>

static PyObject *Error; /* pyunwind_gdb._pyunwind.Error */

PyObject *raise_error(int code, const char *msg)
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

/* "dump", "tasks" or "sample" -> the command, or -1 with ValueError set. */
static int command_kind(const char *name)
{
    if (strcmp(name, "dump") == 0)
        return PYU_CMD_DUMP;
    if (strcmp(name, "tasks") == 0)
        return PYU_CMD_TASKS;
    if (strcmp(name, "sample") == 0)
        return PYU_CMD_SAMPLE;
    PyErr_Format(PyExc_ValueError, "unknown command %s", name);
    return -1;
}

void argvec_free(argvec *a)
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
int parse_command(const char *command, PyObject *list, argvec *a,
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
    if (*o->format_warning) /* (as the CLI says it) */
        PySys_WriteStderr("pyunwind: warning: %.200s\n", o->format_warning);
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
    long long source_time; /* 0: unknown */
    int source_core;
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

static int pymem_source_time(void *ctx, int64_t *sec, int *core)
{
    pymem *m = ctx;
    *sec = m->source_time;
    *core = m->source_core;
    return m->source_time > 0 ? 0 : -PYU_E_STATE;
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
    .source_time = pymem_source_time,
};
static const pyu_memory_ops pymem_ops_nomaps = {
    .read = pymem_read,
    .fatal_signal = pymem_signal,
    .destroy = pymem_destroy,
    .source_time = pymem_source_time,
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
    PyObject *native; /* native(tid) -> [(pc, sp, name, offset, module)]
                         or an error text: gdb's unwinder, or NULL */
    pyu_cmd_opts tree; /* whose descendants --subprocesses reads
                          (tree_root, tree_why: pyu_cmd_tree_root) */
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
    Py_CLEAR(self->native);
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

/* gdb's memory, for pyu_cmd_open_target: asks Python for how to read it. */
typedef struct {
    PyObject *memory; /* memory(with_signal) -> (read, hint, maps, signal,
                         source_time) */
    int pid;
    pymem *opened;    /* the source made, once pyu_open_memory has it */
    int python_error; /* a Python exception is set */
} gdb_memory;

static int open_gdb_memory(void *arg, pyu_session *s, bool with_signal)
{
    gdb_memory *g = arg;
    PyObject *read, *maps, *sig, *when;
    unsigned long long hint;
    PyObject *res = PyObject_CallFunction(g->memory, "O",
                                          with_signal ? Py_True : Py_False);
    if (!res || !PyArg_ParseTuple(res, "OKOOO", &read, &hint, &maps, &sig,
                                 &when) ||
        !PyCallable_Check(read)) {
        if (res && !PyErr_Occurred())
            PyErr_SetString(PyExc_TypeError, "read must be callable");
        Py_XDECREF(res);
        g->python_error = 1;
        return -PYU_E_INVAL;
    }
    pymem *m = calloc(1, sizeof *m);
    if (!m) {
        Py_DECREF(res);
        PyErr_NoMemory();
        g->python_error = 1;
        return -PYU_E_NOMEM;
    }
    Py_INCREF(read);
    m->read = read;
    if ((maps != Py_None && pymem_set_maps(m, maps) < 0) ||
        (sig != Py_None && !PyArg_ParseTuple(sig, "iK", &m->signo,
                                             &m->signal_tid)) ||
        (when != Py_None && !PyArg_ParseTuple(when, "Lp", &m->source_time,
                                              &m->source_core))) {
        Py_DECREF(res);
        pymem_destroy(m);
        g->python_error = 1;
        return -PYU_E_INVAL;
    }
    Py_DECREF(res);
    g->opened = m; /* owned by the session from here on, even on failure */
    return pyu_open_memory(s, maps == Py_None ? &pymem_ops_nomaps
                                              : &pymem_ops,
                           m, g->pid, hint);
}

static PyObject *Session_open_target(Session *self, PyObject *args)
{
    const char *where, *conn, *core, *exe, *sysroot;
    int pid, forced;
    PyObject *memory;
    if (!PyArg_ParseTuple(args, "ssizzzpO", &where, &conn, &pid, &core, &exe,
                          &sysroot, &forced, &memory) ||
        check_fresh(self) < 0)
        return NULL;
    gdb_memory g = {memory, pid, NULL, 0};
    pyu_dbg_target t = {
        .debugger = "gdb",
        .conn = conn,
        .conn_noun = "target",
        .where = strcmp(where, "local") == 0  ? PYU_DBG_LOCAL
                 : strcmp(where, "core") == 0 ? PYU_DBG_CORE
                                              : PYU_DBG_OTHER,
        .local_why = "gdb's native target",
        .pid = pid,
        .core = core,
        .exe = exe,
        .sysroot = sysroot,
        .debugger_memory = forced,
        .open_memory = open_gdb_memory,
        .arg = &g,
    };
    pyu_session *s = NULL;
    bool retry = false;
    char source[1200], msg[1024];
    int ex = pyu_cmd_open_target(&t, &s, &retry, source, sizeof source, msg,
                                 sizeof msg);
    if (g.python_error || (g.opened && g.opened->interrupted)) {
        pyu_session_free(s);
        if (!PyErr_Occurred())
            PyErr_SetNone(PyExc_KeyboardInterrupt);
        return NULL;
    }
    if (ex != PYU_EXIT_OK)
        return raise_error(ex, msg);
    pyu_session_free(self->s);
    self->s = s;
    self->mem = g.opened;
    self->opened = 1;
    pyu_cmd_tree_root(&t, &self->tree);
    return Py_BuildValue("Os", retry ? Py_True : Py_False, source);
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
    o.tree_root = self->tree.tree_root;
    memcpy(o.tree_why, self->tree.tree_why, sizeof o.tree_why);
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

/* ------------------------------------------ results as Python objects */

/* What `--json` prints, as Python objects: a sink of the core's one
 * description of that JSON (pyu_json_sink) that builds dicts and lists,
 * so that the keys and values are the JSON's (docs/json.md). */

#define PY_DEPTH 16
typedef struct {
    PyObject *root;            /* the outermost value */
    PyObject *open[PY_DEPTH];  /* the containers open, outermost first
                                  (borrowed: root holds them) */
    unsigned depth;
    PyObject *key;             /* the next value's key, or NULL */
} py_sink;

static PyObject *text(const char *s)
{
    /* bytes that are not UTF-8 come back as the surrogate escapes that
     * JSON's \udcXX give */
    return PyUnicode_DecodeUTF8(s, (Py_ssize_t)strlen(s), "surrogateescape");
}

/* Puts v (a new reference, NULL when making it failed) in the innermost
 * container, or makes it the root. */
static int py_put(py_sink *b, PyObject *v)
{
    if (!v)
        return -PYU_E_NOMEM;
    int rc;
    if (b->depth == 0) {
        rc = b->root ? -1 : 0;
        if (!b->root)
            b->root = Py_NewRef(v);
    } else if (b->key) {
        rc = PyDict_SetItem(b->open[b->depth - 1], b->key, v);
        Py_CLEAR(b->key);
    } else {
        rc = PyList_Append(b->open[b->depth - 1], v);
    }
    Py_DECREF(v);
    if (rc < 0 && !PyErr_Occurred())
        PyErr_SetString(PyExc_ValueError, "malformed JSON description");
    return rc < 0 ? -PYU_E_NOMEM : 0;
}

static int py_open(void *arg, char kind, unsigned layout)
{
    py_sink *b = arg;
    (void)layout;
    if (b->depth == PY_DEPTH) {
        PyErr_SetString(PyExc_ValueError, "JSON description too deep");
        return -PYU_E_NOMEM;
    }
    PyObject *c = kind == '{' ? PyDict_New() : PyList_New(0);
    if (!c || py_put(b, Py_NewRef(c)) < 0) {
        Py_XDECREF(c);
        return -PYU_E_NOMEM;
    }
    b->open[b->depth++] = c; /* (its container holds it) */
    Py_DECREF(c);
    return 0;
}

static int py_close(void *arg, char kind)
{
    py_sink *b = arg;
    (void)kind;
    if (b->depth)
        b->depth--;
    return 0;
}

static int py_key(void *arg, const char *key)
{
    py_sink *b = arg;
    Py_XSETREF(b->key, text(key));
    return b->key ? 0 : -PYU_E_NOMEM;
}

static int py_string(void *arg, const char *s)
{
    return py_put(arg, text(s));
}

static int py_integer(void *arg, int64_t v)
{
    return py_put(arg, PyLong_FromLongLong(v));
}

static int py_unsigned(void *arg, uint64_t v)
{
    return py_put(arg, PyLong_FromUnsignedLongLong(v));
}

static int py_boolean(void *arg, int v)
{
    return py_put(arg, PyBool_FromLong(v));
}

static int py_null(void *arg)
{
    return py_put(arg, Py_NewRef(Py_None));
}

static pyu_json_sink py_sink_of(py_sink *b)
{
    *b = (py_sink){0};
    return (pyu_json_sink){.arg = b,
                           .open = py_open,
                           .close = py_close,
                           .key = py_key,
                           .string = py_string,
                           .integer = py_integer,
                           .unsigned_integer = py_unsigned,
                           .boolean = py_boolean,
                           .null = py_null};
}

/* What the sink built, given the _emit function's result; NULL with a
 * Python exception when that failed. */
static PyObject *py_sink_result(py_sink *b, int rc)
{
    Py_CLEAR(b->key);
    if (rc == 0 && b->root)
        return b->root;
    Py_CLEAR(b->root);
    if (!PyErr_Occurred())
        PyErr_NoMemory();
    return NULL;
}

static PyObject *frame_object(const pyu_frame *f)
{
    py_sink b;
    pyu_json_sink k = py_sink_of(&b);
    return py_sink_result(&b, pyu_frame_emit(f, 0, &k));
}

/* Session.entries(tid): the Python frames of one thread grouped by the
 * eval-loop call that runs them, for gdb's frame filter: the frames of
 * every thread state of the native thread from a dump, the entry frame
 * after each from pyu_pyframes_entries (frontend/pyframes.c).  Frames no
 * entry frame follows are left out. */
static PyObject *groups_of(const pyu_frame *const *frames, size_t n,
                           const uint64_t *entry)
{
    PyObject *groups = PyList_New(0), *group = NULL;
    if (!groups)
        return NULL;
    for (size_t k = 0; k < n; k++) {
        if (!entry[k])
            continue;
        if (!group || entry[k] != entry[k - 1] ||
            entry[k] == PYU_ENTRY_BY_NAME) {
            PyObject *pair = Py_BuildValue("(KN)",
                                           (unsigned long long)entry[k],
                                           PyList_New(0));
            if (!pair || PyList_Append(groups, pair) < 0) {
                Py_XDECREF(pair);
                goto fail;
            }
            group = PyTuple_GET_ITEM(pair, 1); /* borrowed: in groups */
            Py_DECREF(pair);
        }
        PyObject *f = frame_object(frames[k]);
        int rc = f ? PyList_Append(group, f) : -1;
        Py_XDECREF(f);
        if (rc < 0)
            goto fail;
    }
    return groups;
fail:
    Py_DECREF(groups);
    return NULL;
}

static PyObject *Session_entries(Session *self, PyObject *args)
{
    unsigned long long tid;
    if (!PyArg_ParseTuple(args, "K", &tid))
        return NULL;
    if (!self->s || !self->opened)
        return raise_error(PYU_EXIT_INTERNAL, "session not opened");
    pyu_dump *d;
    uint64_t *entry = NULL;
    const pyu_frame **frames = NULL;
    PyObject *res = NULL;
    int rc = pyu_cmd_take_dump(self->s, 0, false, &d);
    if (self->mem && self->mem->interrupted)
        goto out; /* KeyboardInterrupt is set */
    if (rc < 0) {
        raise_error(pyu_cmd_exit_for(rc), pyu_errmsg(self->s));
        goto out;
    }
    /* every thread state of the native thread (one per interpreter it
     * runs), in the walk's order */
    size_t n = 0;
    for (size_t i = 0; i < d->nthreads; i++)
        if (d->threads[i].native_thread_id == tid)
            n += d->threads[i].nframes;
    if (!n) {
        res = PyList_New(0);
        goto out;
    }
    entry = calloc(n, sizeof *entry);
    frames = calloc(n, sizeof *frames);
    if (!entry || !frames) {
        PyErr_NoMemory();
        goto out;
    }
    n = 0;
    for (size_t i = 0; i < d->nthreads; i++)
        if (d->threads[i].native_thread_id == tid)
            for (size_t k = 0; k < d->threads[i].nframes; k++)
                frames[n++] = &d->threads[i].frames[k];
    rc = pyu_pyframes_entries(self->s, tid, entry, n);
    if (self->mem && self->mem->interrupted)
        goto out;
    if (rc < 0)
        raise_error(pyu_cmd_exit_for(rc), pyu_errmsg(self->s));
    else
        res = groups_of(frames, n, entry); /* (rc 1: all zero, no groups) */
out:
    free(frames);
    free(entry);
    pyu_dump_free(d);
    return res;
}

/* Session.entry_frames(tid, n) -> [address] * n: the entry frame that
 * follows each of the first n Python frames of thread tid (0 where none
 * does), for py-up: pyu_pyframes_entries, as the lldb plugin places
 * Python frames among the native ones.  Like Session.pyframes, it reads
 * the first thread state of the native thread (a thread that runs a
 * subinterpreter has one more). */
static PyObject *Session_entry_frames(Session *self, PyObject *args)
{
    unsigned long long tid;
    Py_ssize_t n;
    if (!PyArg_ParseTuple(args, "Kn", &tid, &n))
        return NULL;
    if (n < 0 || (size_t)n > SIZE_MAX / sizeof(uint64_t)) {
        PyErr_Format(PyExc_ValueError, "%zd frames", n);
        return NULL;
    }
    if (!self->s || !self->opened)
        return raise_error(PYU_EXIT_INTERNAL, "session not opened");
    uint64_t *entry = calloc(n ? (size_t)n : 1, sizeof *entry);
    if (!entry)
        return PyErr_NoMemory();
    PyObject *res = NULL;
    int rc = pyu_pyframes_entries(self->s, tid, entry, (size_t)n);
    if (self->mem && self->mem->interrupted)
        goto out; /* KeyboardInterrupt is set */
    if (rc < 0) {
        raise_error(pyu_cmd_exit_for(rc), pyu_errmsg(self->s));
        goto out;
    }
    if (!(res = PyList_New(n)))
        goto out;
    for (Py_ssize_t k = 0; k < n; k++) {
        PyObject *a = PyLong_FromUnsignedLongLong(entry[k]);
        if (!a) {
            Py_CLEAR(res);
            goto out;
        }
        PyList_SET_ITEM(res, k, a);
    }
out:
    free(entry);
    return res;
}

static PyObject *Session_dump(Session *self, PyObject *args)
{
    unsigned long long thread;
    int async_stacks, retry, locals = 0;
    if (!PyArg_ParseTuple(args, "Kpp|p", &thread, &async_stacks, &retry,
                          &locals))
        return NULL;
    if (!self->s || !self->opened)
        return raise_error(PYU_EXIT_INTERNAL, "session not opened");
    pyu_dump *d, view;
    int rc = pyu_cmd_take_dump(self->s, (async_stacks ? PYU_WALK_ASYNC : 0) |
                                            (locals ? PYU_WALK_LOCALS : 0),
                               retry, &d);
    PyObject *res = NULL;
    char msg[1024];
    if (self->mem && self->mem->interrupted)
        goto out; /* KeyboardInterrupt is set */
    if (rc < 0) {
        raise_error(pyu_cmd_exit_for(rc), pyu_errmsg(self->s));
        goto out;
    }
    int ex = pyu_cmd_dump_thread(d, thread, &view, msg, sizeof msg);
    if (ex != PYU_EXIT_OK) {
        raise_error(ex, msg);
        goto out;
    }
    py_sink b;
    pyu_json_sink k = py_sink_of(&b);
    res = py_sink_result(&b, pyu_dump_emit(&view, &k));
out:
    pyu_dump_free(d);
    return res;
}

static PyObject *Session_tasks(Session *self, PyObject *args)
{
    int retry;
    if (!PyArg_ParseTuple(args, "p", &retry))
        return NULL;
    if (!self->s || !self->opened)
        return raise_error(PYU_EXIT_INTERNAL, "session not opened");
    pyu_tasks *t;
    int rc = pyu_cmd_take_tasks(self->s, retry, &t);
    PyObject *res = NULL;
    if (self->mem && self->mem->interrupted)
        goto out; /* KeyboardInterrupt is set */
    if (rc < 0) {
        raise_error(pyu_cmd_exit_for(rc), pyu_errmsg(self->s));
        goto out;
    }
    py_sink b;
    pyu_json_sink k = py_sink_of(&b);
    res = py_sink_result(&b, pyu_tasks_emit(t, &k));
out:
    pyu_tasks_free(t);
    return res;
}

/* ------------------------------------------------------------ PyFrames */

/* Session.pyframes(tid, retry_torn): one thread's Python frames with
 * their variables, for py-bt, py-up, py-list... (frontend/pyframes.c
 * renders them).  The dump outlives the session. */
typedef struct {
    PyObject_HEAD
    pyu_dump *d;          /* owned */
    const pyu_thread *t;  /* the thread: points into d */
    Session *session;     /* a reference: py-print reads through it */
} PyFrames;

static void PyFrames_dealloc(PyFrames *self)
{
    pyu_dump_free(self->d);
    Py_XDECREF(self->session);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static int frame_index(PyFrames *self, Py_ssize_t k)
{
    if (k < 0 || (size_t)k >= self->t->nframes) {
        PyErr_Format(PyExc_IndexError, "no Python frame #%zd", k);
        return -1;
    }
    return 0;
}

/* text(what, k, arg=None) -> bytes: "frame" (#k and its source line),
 * "bt" (k: the selected frame), "bt-full", "list" (arg: (first, last),
 * first 0 for the lines around the frame's), "locals", "print" (arg: the
 * name).  Raises Error with the one-line message when it fails. */
static PyObject *PyFrames_text(PyFrames *self, PyObject *args)
{
    const char *what;
    Py_ssize_t k;
    PyObject *arg = Py_None;
    if (!PyArg_ParseTuple(args, "sn|O", &what, &k, &arg))
        return NULL;
    bool bt = strcmp(what, "bt") == 0, full = strcmp(what, "bt-full") == 0;
    if (!bt && !full && frame_index(self, k) < 0)
        return NULL;
    int first = 0, last = 0;
    const char *name = NULL;
    if (strcmp(what, "list") == 0 && arg != Py_None &&
        !PyArg_ParseTuple(arg, "ii", &first, &last))
        return NULL;
    if (strcmp(what, "print") == 0 && !(name = PyUnicode_AsUTF8(arg)))
        return NULL;
    char *buf = NULL;
    size_t len = 0;
    FILE *out = open_memstream(&buf, &len);
    if (!out)
        return PyErr_NoMemory();
    char msg[1024] = "";
    int ex = PYU_EXIT_OK;
    const pyu_dump *d = self->d;
    const pyu_thread *t = self->t;
    if (bt || full)
        pyu_pyframes_bt(out, d, t, (size_t)(k < 0 ? 0 : k), full);
    else if (strcmp(what, "frame") == 0)
        pyu_pyframes_frame(out, d, t, (size_t)k);
    else if (strcmp(what, "list") == 0)
        ex = pyu_pyframes_list(out, d, t, (size_t)k, first, last, msg,
                               sizeof msg);
    else if (strcmp(what, "locals") == 0)
        ex = pyu_pyframes_locals(out, d, t, (size_t)k, msg, sizeof msg);
    else if (strcmp(what, "print") == 0)
        ex = pyu_pyframes_print(out, self->session->s, d, t, (size_t)k,
                                name, msg, sizeof msg);
    else {
        snprintf(msg, sizeof msg, "unknown text %s", what);
        ex = PYU_EXIT_INTERNAL;
    }
    PyObject *b = take_stream(out, &buf, &len);
    if (ex != PYU_EXIT_OK) {
        Py_XDECREF(b);
        return raise_error(ex, msg);
    }
    return b;
}

static int add_name(void *arg, const char *name)
{
    PyObject *u = PyUnicode_DecodeUTF8(name, (Py_ssize_t)strlen(name),
                                       "replace");
    int rc = u ? PySet_Add(arg, u) : -1;
    Py_XDECREF(u);
    return rc < 0 ? 1 : 0;
}

/* names(k, expr) -> set of str: what py-print can complete after expr in
 * frame k ("": the names the frame sees; else expr's attributes). */
static PyObject *PyFrames_names(PyFrames *self, PyObject *args)
{
    Py_ssize_t k;
    const char *expr;
    if (!PyArg_ParseTuple(args, "ns", &k, &expr) || frame_index(self, k) < 0)
        return NULL;
    uint64_t frame = self->t->frames[k].addr;
    PyObject *names = PySet_New(NULL);
    if (!names || !frame || !self->session->s)
        return names;
    int rc = pyu_frame_names(self->session->s, frame, expr, add_name, names);
    if (rc == 1 && PyErr_Occurred()) {
        Py_DECREF(names);
        return NULL;
    }
    if (rc < 0) {
        Py_DECREF(names);
        return raise_error(pyu_cmd_exit_for(rc), pyu_errmsg(self->session->s));
    }
    return names;
}

/* frame(k) -> dict: frame k as py-dump --json has it, with its locals. */
static PyObject *PyFrames_frame(PyFrames *self, PyObject *args)
{
    Py_ssize_t k;
    if (!PyArg_ParseTuple(args, "n", &k) || frame_index(self, k) < 0)
        return NULL;
    py_sink b;
    pyu_json_sink sink = py_sink_of(&b);
    return py_sink_result(&b, pyu_frame_emit(&self->t->frames[k],
                                             self->d->has_locals, &sink));
}

static PyObject *PyFrames_count(PyFrames *self, void *unused)
{
    (void)unused;
    return PyLong_FromSize_t(self->t->nframes);
}

/* Why the stack stops before its outermost frame, or None. */
static PyObject *PyFrames_error(PyFrames *self, void *unused)
{
    (void)unused;
    const pyu_thread *t = self->t;
    if (t->error)
        return text(t->error);
    if (t->truncated == PYU_TRUNC_DEPTH)
        return PyUnicode_FromString("the stack is deeper than the frames "
                                    "pyunwind reads");
    if (t->truncated == PYU_TRUNC_LOOP)
        return PyUnicode_FromString("the frame chain loops");
    Py_RETURN_NONE;
}

static PyMethodDef PyFrames_methods[] = {
    {"text", (PyCFunction)PyFrames_text, METH_VARARGS,
     "text(what, k, arg=None) -> bytes: 'frame', 'bt', 'bt-full', 'list', "
     "'locals' or 'print' of frame k"},
    {"frame", (PyCFunction)PyFrames_frame, METH_VARARGS,
     "frame(k) -> dict: frame k with its locals, as py-dump --json"},
    {"names", (PyCFunction)PyFrames_names, METH_VARARGS,
     "names(k, expr) -> set: what py-print completes after expr"},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef PyFrames_getset[] = {
    {"count", (getter)PyFrames_count, NULL, "the number of Python frames",
     NULL},
    {"error", (getter)PyFrames_error, NULL,
     "why the stack stops early, or None", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject PyFramesType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "pyunwind_gdb._pyunwind.PyFrames",
    .tp_basicsize = sizeof(PyFrames),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "One thread's Python frames with their variables",
    .tp_dealloc = (destructor)PyFrames_dealloc,
    .tp_methods = PyFrames_methods,
    .tp_getset = PyFrames_getset,
};

static PyObject *Session_pyframes(Session *self, PyObject *args)
{
    unsigned long long tid;
    int retry;
    if (!PyArg_ParseTuple(args, "Kp", &tid, &retry))
        return NULL;
    if (!self->s || !self->opened)
        return raise_error(PYU_EXIT_INTERNAL, "session not opened");
    pyu_dump *d, view;
    int rc = pyu_cmd_take_dump(self->s, PYU_WALK_LOCALS, retry, &d);
    char msg[1024];
    if (self->mem && self->mem->interrupted) {
        pyu_dump_free(d);
        return NULL; /* KeyboardInterrupt is set */
    }
    if (rc < 0) {
        pyu_dump_free(d);
        return raise_error(pyu_cmd_exit_for(rc), pyu_errmsg(self->s));
    }
    int ex = tid ? pyu_cmd_dump_thread(d, tid, &view, msg, sizeof msg)
                 : PYU_EXIT_USAGE;
    if (!tid)
        snprintf(msg, sizeof msg, "no thread selected");
    if (ex != PYU_EXIT_OK) {
        pyu_dump_free(d);
        return raise_error(ex, msg);
    }
    PyFrames *f = PyObject_New(PyFrames, &PyFramesType);
    if (!f) {
        pyu_dump_free(d);
        return NULL;
    }
    f->d = d;
    f->t = view.threads;
    Py_INCREF(self);
    f->session = self;
    return (PyObject *)f;
}

/* The native stack of thread tid from gdb's unwinder (Session.native):
 * a list of (pc, sp, name or None, offset, module or None), innermost
 * first, or a one-line reason why there is none. */
static int gdb_native(void *arg, uint64_t tid, pyu_native_fn fn,
                      void *fn_arg, char *why, size_t whylen)
{
    Session *self = arg;
    PyObject *r = PyObject_CallFunction(self->native, "K",
                                        (unsigned long long)tid);
    int rc = 0;
    if (!r) {
        PyObject *type, *value, *tb;
        PyErr_Fetch(&type, &value, &tb);
        PyObject *text = value ? PyObject_Str(value) : NULL;
        const char *t = text ? PyUnicode_AsUTF8(text) : NULL;
        snprintf(why, whylen, "gdb's unwinder failed: %s",
                 t ? t : "(no message)");
        PyErr_Clear();
        Py_XDECREF(text);
        Py_XDECREF(type);
        Py_XDECREF(value);
        Py_XDECREF(tb);
        return -PYU_E_IO;
    }
    if (PyUnicode_Check(r)) {
        const char *t = PyUnicode_AsUTF8(r);
        snprintf(why, whylen, "%s", t ? t : "no native stack");
        Py_DECREF(r);
        PyErr_Clear();
        return -PYU_E_STATE;
    }
    PyObject *seq = PySequence_Fast(r, "native(): a list");
    for (Py_ssize_t i = 0; seq && rc == 0 && i < PySequence_Fast_GET_SIZE(seq);
         i++) {
        unsigned long long pc, sp, off;
        PyObject *name, *module;
        if (!PyArg_ParseTuple(PySequence_Fast_GET_ITEM(seq, i), "KKOKO", &pc,
                              &sp, &name, &off, &module)) {
            rc = -PYU_E_IO;
            break;
        }
        pyu_native_frame f = {.pc = pc, .sp = sp, .offset = off};
        f.symbol = name == Py_None ? NULL : PyUnicode_AsUTF8(name);
        f.module = module == Py_None ? NULL : PyUnicode_AsUTF8(module);
        if ((name != Py_None && !f.symbol) ||
            (module != Py_None && !f.module)) {
            rc = -PYU_E_IO;
            break;
        }
        rc = fn(fn_arg, &f);
    }
    if (!seq || rc == -PYU_E_IO) {
        snprintf(why, whylen, "gdb's unwinder gave something else than "
                 "frames");
        PyErr_Clear();
        rc = -PYU_E_IO;
    }
    Py_XDECREF(seq);
    Py_DECREF(r);
    return rc;
}

static PyObject *Session_set_native(Session *self, PyObject *fn)
{
    if (!self->s)
        return raise_error(PYU_EXIT_INTERNAL, "session closed");
    Py_XSETREF(self->native, fn == Py_None ? NULL : Py_NewRef(fn));
    pyu_set_native_frames(self->s, self->native ? gdb_native : NULL, self);
    Py_RETURN_NONE;
}

static PyObject *Session_close(Session *self, PyObject *unused)
{
    (void)unused;
    Py_CLEAR(self->native);
    pyu_session_free(self->s);
    self->s = NULL;
    self->mem = NULL;
    self->opened = 0;
    Py_RETURN_NONE;
}

static PyMethodDef Session_methods[] = {
    {"open_target", (PyCFunction)Session_open_target, METH_VARARGS,
     "open_target(where, conn, pid, core, exe, sysroot, forced, memory) -> "
     "(retry_torn, source)"},
    {"dump", (PyCFunction)Session_dump, METH_VARARGS,
     "dump(thread, async_stacks, retry_torn) -> dict"},
    {"tasks", (PyCFunction)Session_tasks, METH_VARARGS,
     "tasks(retry_torn) -> dict"},
    {"run", (PyCFunction)Session_run, METH_VARARGS,
     "run(command, argv, retry_torn, source) -> (code, out, diag, msg)"},
    {"entries", (PyCFunction)Session_entries, METH_VARARGS,
     "entries(tid) -> [(entry frame address, [frame dicts])]: the Python "
     "frames of a thread by the eval-loop call that runs them"},
    {"entry_frames", (PyCFunction)Session_entry_frames, METH_VARARGS,
     "entry_frames(tid, n) -> [address]: the entry frame that follows each "
     "of the thread's first n Python frames (0: none)"},
    {"pyframes", (PyCFunction)Session_pyframes, METH_VARARGS,
     "pyframes(tid, retry_torn) -> PyFrames: the Python frames of thread "
     "tid with their variables (py-bt, py-list, ...)"},
    {"set_native", (PyCFunction)Session_set_native, METH_O,
     "set_native(fn): native stacks from fn(tid) -> [(pc, sp, name, "
     "offset, module)] or an error text (gdb's unwinder); None: none"},
    {"close", (PyCFunction)Session_close, METH_NOARGS, "free the session"},
    {NULL, NULL, 0, NULL},
};

PyTypeObject SessionType = {
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

pyu_session *session_of(PyObject *o)
{
    if (!PyObject_TypeCheck(o, &SessionType) || !((Session *)o)->opened ||
        !((Session *)o)->s) {
        raise_error(PYU_EXIT_INTERNAL, "not an opened session");
        return NULL;
    }
    return ((Session *)o)->s;
}

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
        "{s:O,s:O,s:O,s:z,s:K,s:d,s:d,s:O}", "help",
        o.help ? Py_True : Py_False, "json", o.json ? Py_True : Py_False,
        "verbose", o.verbose ? Py_True : Py_False, "output", o.output,
        "thread", (unsigned long long)o.thread, "duration", o.duration,
        "rate", o.rate,
        "blocking", (o.sample_flags & PYU_SAMPLE_BLOCKING) ? Py_True : Py_False);
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

static PyObject *mod_formats(PyObject *mod, PyObject *noarg)
{
    (void)mod, (void)noarg;
    size_t n;
    const pyu_format *f = pyu_profile_formats(&n);
    PyObject *l = PyList_New((Py_ssize_t)n);
    for (size_t i = 0; l && i < n; i++) {
        PyObject *t = Py_BuildValue("(ssOO)", f[i].name, f[i].summary,
                                    f[i].binary ? Py_True : Py_False,
                                    f[i].keeps_instructions ? Py_True
                                                            : Py_False);
        if (!t) {
            Py_CLEAR(l);
            break;
        }
        PyList_SET_ITEM(l, (Py_ssize_t)i, t);
    }
    return l;
}

static PyMethodDef module_methods[] = {
    {"formats", mod_formats, METH_NOARGS,
     "formats() -> [(name, summary, binary, keeps_instructions)]: the "
     "profile formats"},
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
    if (PyType_Ready(&SessionType) < 0 || PyType_Ready(&ProfileType) < 0 ||
        PyType_Ready(&PyFramesType) < 0)
        return NULL;
    PyObject *m = PyModule_Create(&moduledef);
    if (!m)
        return NULL;
    Error = PyErr_NewException("pyunwind_gdb._pyunwind.Error",
                               PyExc_Exception, NULL);
    Py_INCREF(&SessionType);
    Py_INCREF(&ProfileType);
    if (!Error || PyModule_AddObject(m, "Error", Error) < 0 ||
        PyModule_AddObject(m, "Session", (PyObject *)&SessionType) < 0 ||
        PyModule_AddObject(m, "Profile", (PyObject *)&ProfileType) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    Py_INCREF(Error);
    return m;
}
