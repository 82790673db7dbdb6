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
 *        (read, hint, mappings, signal), called when gdb's memory is used:
 *        read(addr, size) -> bytes-like   memory of the target
 *        hint: the address of _PyRuntime, or 0
 *        mappings: [(start, end, offset, prot, path or None)] or None
 *        signal: (signo, native thread id) or None
 *   Session.run(command, argv, retry_torn, source) -> (code, out, diag, msg)
 *   Session.dump(thread, async_stacks, retry_torn) -> dict (the dump's
 *        JSON as Python objects, built from the walk)
 *   Session.tasks(retry_torn) -> dict (the task list's JSON, likewise)
 *   Session.entries(tid) -> [(addr, [frame dicts])]: a thread's Python
 *        frames grouped by the eval-loop call that runs them (addr: its
 *        entry frame, on that call's native stack), innermost first
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
    PyObject *native; /* native(tid) -> [(pc, sp, name, offset, module)]
                         or an error text: gdb's unwinder, or NULL */
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
    PyObject *memory; /* memory(with_signal) -> (read, hint, maps, signal) */
    int pid;
    pymem *opened;    /* the source made, once pyu_open_memory has it */
    int python_error; /* a Python exception is set */
} gdb_memory;

static int open_gdb_memory(void *arg, pyu_session *s, bool with_signal)
{
    gdb_memory *g = arg;
    PyObject *read, *maps, *sig;
    unsigned long long hint;
    PyObject *res = PyObject_CallFunction(g->memory, "O",
                                          with_signal ? Py_True : Py_False);
    if (!res || !PyArg_ParseTuple(res, "OKOO", &read, &hint, &maps, &sig) ||
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
                                             &m->signal_tid))) {
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

/* What `--json` prints, built as Python objects (docs/json.md): the same
 * keys and values, without the round trip through text. */

static PyObject *text(const char *s)
{
    /* bytes that are not UTF-8 come back as the surrogate escapes that
     * JSON's \udcXX give */
    return PyUnicode_DecodeUTF8(s, (Py_ssize_t)strlen(s), "surrogateescape");
}

/* d[key] = value, taking the reference; false on failure. */
static bool put(PyObject *d, const char *key, PyObject *value)
{
    if (!value)
        return false;
    int rc = PyDict_SetItemString(d, key, value);
    Py_DECREF(value);
    return rc == 0;
}

static bool append(PyObject *l, PyObject *value)
{
    if (!value)
        return false;
    int rc = PyList_Append(l, value);
    Py_DECREF(value);
    return rc == 0;
}

static PyObject *frame_dict(const pyu_frame *f)
{
    PyObject *d = PyDict_New();
    if (d && put(d, "function", text(f->function)) &&
        put(d, "name", text(f->name)) && put(d, "file", text(f->file)) &&
        put(d, "line", f->line > 0 ? PyLong_FromLong(f->line)
                                   : Py_NewRef(Py_None)))
        return d;
    Py_XDECREF(d);
    return NULL;
}

/* A frame's variables as the "locals" list of its dict (pyu_var). */
static int var_dict(void *arg, const pyu_var *v)
{
    PyObject *l = arg, *d = PyDict_New();
    bool ok = d && append(l, Py_NewRef(d)) && put(d, "name", text(v->name)) &&
              put(d, "kind", text(pyu_var_kind_name(v->kind))) &&
              put(d, "type", text(v->type)) &&
              put(d, "value", text(v->value)) &&
              put(d, "address", v->addr ? PyLong_FromUnsignedLongLong(v->addr)
                                        : Py_NewRef(Py_None));
    Py_XDECREF(d);
    return ok ? PYU_WALK_NEXT : -PYU_E_NOMEM;
}

/* The head of a result: pid and python. */
static PyObject *result_head(pyu_session *s)
{
    pyu_process tg;
    pyu_target(s, &tg);
    PyObject *d = PyDict_New(), *p = PyDict_New();
    if (d && p && put(d, "pid", PyLong_FromLong(tg.pid)) &&
        put(p, "version", text(tg.python)) &&
        put(p, "free_threaded", PyBool_FromLong(tg.free_threaded)) &&
        put(d, "python", Py_NewRef(p))) {
        Py_DECREF(p);
        return d;
    }
    Py_XDECREF(d);
    Py_XDECREF(p);
    return NULL;
}

static bool put_signal(PyObject *d, pyu_session *s)
{
    pyu_process tg;
    pyu_target(s, &tg);
    if (!tg.signal)
        return put(d, "signal", Py_NewRef(Py_None));
    return put(d, "signal", Py_BuildValue("{s:i,s:K}", "number", tg.signal,
                                          "native_thread_id",
                                          (unsigned long long)tg.signal_thread));
}

/* A dump, built by a walker whose callbacks make the objects. */
typedef struct {
    pyu_session *s;
    unsigned flags;
    uint64_t only;       /* --thread, or 0 */
    const pymem *mem;    /* gdb's memory, when the session reads it */
    size_t seen;         /* threads walked */
    PyObject *threads;   /* list of the threads' dicts */
    PyObject *thread;    /* the current thread's dict (borrowed) */
    PyObject *frames, *tasks; /* its lists (borrowed) */
    bool threads_truncated, torn, python_error;
    bool locals; /* each frame's variables too */
} dump_build;

#define PY_FAILED(b) ((b)->python_error = true, -PYU_E_NOMEM)

static int b_interp(void *arg, const pyu_walk_interp *in)
{
    dump_build *b = arg;
    if (in->threads_truncated || in->interpreters_truncated)
        b->threads_truncated = true;
    return PYU_WALK_NEXT;
}

/* Whether thread t received the signal that killed the process. */
static bool crashed(pyu_session *s, const pyu_walk_thread *t)
{
    pyu_process tg;
    pyu_target(s, &tg);
    return tg.signal && tg.signal_thread == t->native_thread_id;
}

static int b_thread(void *arg, const pyu_walk_thread *t)
{
    dump_build *b = arg;
    if (b->mem && b->mem->interrupted)
        return -PYU_E_IO; /* KeyboardInterrupt is set: no more Python */
    b->seen++;
    if (b->only && t->native_thread_id != b->only && t->thread_id != b->only)
        return PYU_WALK_SKIP;
    PyObject *d = PyDict_New();
    if (!d)
        return PY_FAILED(b);
    bool ok =
        append(b->threads, Py_NewRef(d)) &&
        put(d, "interpreter_id", PyLong_FromLongLong(t->interpreter_id)) &&
        put(d, "thread_id", PyLong_FromUnsignedLongLong(t->thread_id)) &&
        put(d, "native_thread_id",
            PyLong_FromUnsignedLongLong(t->native_thread_id)) &&
        put(d, "main", PyBool_FromLong(t->main)) &&
        put(d, "status", PyList_New(0)) && put(d, "frames", PyList_New(0)) &&
        put(d, "crashed", PyBool_FromLong(crashed(b->s, t))) &&
        (!(b->flags & PYU_WALK_ASYNC) || put(d, "tasks", PyList_New(0)));
    b->thread = d; /* the list holds it */
    b->frames = PyDict_GetItemString(d, "frames");
    b->tasks = PyDict_GetItemString(d, "tasks");
    Py_DECREF(d);
    return ok ? PYU_WALK_NEXT : PY_FAILED(b);
}

static int b_frame(void *arg, const pyu_walk_frame *wf)
{
    dump_build *b = arg;
    pyu_frame f;
    if (b->mem && b->mem->interrupted)
        return -PYU_E_IO;
    int rc = pyu_frame_describe(b->s, wf, &f);
    if (rc < 0)
        return rc;
    PyObject *d = frame_dict(&f);
    if (!append(b->frames, d))
        return PY_FAILED(b);
    if (!b->locals)
        return PYU_WALK_NEXT;
    /* (d is alive: the list holds it) */
    PyObject *vars = PyList_New(0);
    if (!put(d, "locals", vars))
        return PY_FAILED(b);
    rc = pyu_frame_locals(b->s, wf, var_dict, vars);
    if (rc == -PYU_E_NOMEM || PyErr_Occurred())
        return PY_FAILED(b);
    return put(d, "locals_error", rc < 0 ? text(pyu_errmsg(b->s))
                                         : Py_NewRef(Py_None))
               ? PYU_WALK_NEXT
               : PY_FAILED(b);
}

static int b_task(void *arg, const pyu_walk_task *t)
{
    dump_build *b = arg;
    if (b->mem && b->mem->interrupted)
        return -PYU_E_IO;
    return append(b->tasks, Py_BuildValue("{s:K,s:N,s:n}", "id",
                                          (unsigned long long)t->id, "name",
                                          text(t->name), "first_frame",
                                          (Py_ssize_t)t->first_frame))
               ? PYU_WALK_NEXT
               : PY_FAILED(b);
}

static int b_thread_end(void *arg, const pyu_walk_thread *t,
                        const pyu_walk_end *end)
{
    dump_build *b = arg;
    PyObject *status = PyDict_GetItemString(b->thread, "status");
    (void)t;
    if (b->mem && b->mem->interrupted)
        return -PYU_E_IO;
    for (unsigned bit = 1; bit <= PYU_STATUS_EXCEPTION; bit <<= 1)
        if ((end->status & bit) &&
            !append(status, text(pyu_status_name(bit, 0))))
            return PY_FAILED(b);
    const char *cut = pyu_trunc_name(end->truncated);
    if (end->error)
        b->torn = true;
    if (!put(b->thread, "truncated", cut ? text(cut) : Py_NewRef(Py_False)) ||
        !put(b->thread, "error", end->error ? text(pyu_errmsg(b->s))
                                            : Py_NewRef(Py_None)))
        return PY_FAILED(b);
    return PYU_WALK_NEXT;
}

static int dump_attempt(void *arg)
{
    dump_build *b = arg;
    pyu_walker w = {
        .flags = b->flags,
        .interpreter = b_interp,
        .thread = b_thread,
        .frame = b_frame,
        .task = b_task,
        .thread_end = b_thread_end,
    };
    Py_XDECREF(b->threads);
    b->seen = 0;
    b->threads_truncated = b->torn = false;
    if (!(b->threads = PyList_New(0)))
        return PY_FAILED(b);
    int rc = pyu_walk(b->s, &w, b);
    return rc == 0 && b->torn ? PYU_CMD_TORN : rc;
}

/* Session.entries(tid): the Python frames of one thread grouped by the
 * eval-loop call that runs them, for gdb's frame filter. */
typedef struct entries_build {
    pyu_session *s;
    uint64_t tid;
    PyObject *groups;  /* [(entry address, [frame dict innermost first])] */
    PyObject *pending; /* frames since the last entry frame */
    bool found, python_error;
} entries_build;

static int e_thread(void *arg, const pyu_walk_thread *t)
{
    entries_build *b = arg;
    if (t->native_thread_id != b->tid)
        return PYU_WALK_SKIP;
    b->found = true;
    return PYU_WALK_NEXT;
}

static int e_frame(void *arg, const pyu_walk_frame *wf)
{
    entries_build *b = arg;
    if (!b->pending && !(b->pending = PyList_New(0)))
        goto fail;
    if (wf->owner == PYU_OWNER_ENTRY) {
        if (PyList_GET_SIZE(b->pending) &&
            !append(b->groups, Py_BuildValue("(KN)", (unsigned long long)
                                                         wf->addr,
                                             b->pending)))
            goto fail;
        if (!PyList_GET_SIZE(b->pending))
            Py_DECREF(b->pending);
        b->pending = NULL;
        return PYU_WALK_NEXT;
    }
    pyu_frame f;
    int rc = pyu_frame_describe(b->s, wf, &f);
    if (rc < 0)
        return rc;
    if (append(b->pending, frame_dict(&f)))
        return PYU_WALK_NEXT;
fail:
    b->python_error = true;
    return -PYU_E_NOMEM;
}

static PyObject *Session_entries(Session *self, PyObject *args)
{
    unsigned long long tid;
    if (!PyArg_ParseTuple(args, "K", &tid))
        return NULL;
    if (!self->s || !self->opened)
        return raise_error(PYU_EXIT_INTERNAL, "session not opened");
    entries_build b = {.s = self->s, .tid = tid, .groups = PyList_New(0)};
    if (!b.groups)
        return NULL;
    pyu_walker w = {.flags = PYU_WALK_ENTRY_FRAMES,
                    .thread = e_thread,
                    .frame = e_frame};
    int rc = pyu_walk(self->s, &w, &b);
    Py_XDECREF(b.pending);
    if (b.python_error) {
        Py_DECREF(b.groups);
        return NULL;
    }
    if (rc < 0) {
        Py_DECREF(b.groups);
        return raise_error(pyu_cmd_exit_for(rc), pyu_errmsg(self->s));
    }
    return b.groups;
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
    dump_build b = {.s = self->s,
                    .flags = async_stacks ? PYU_WALK_ASYNC : 0,
                    .only = thread,
                    .locals = locals != 0,
                    .mem = self->mem};
    int rc = pyu_cmd_retry(retry, dump_attempt, &b);
    PyObject *d = NULL;
    char msg[1024];
    if (b.python_error || (self->mem && self->mem->interrupted))
        goto out; /* the Python exception is set */
    if (rc < 0) {
        raise_error(pyu_cmd_exit_for(rc), pyu_errmsg(self->s));
        goto out;
    }
    if (thread && PyList_GET_SIZE(b.threads) == 0) {
        raise_error(pyu_cmd_no_thread(msg, sizeof msg, thread, b.seen), msg);
        goto out;
    }
    d = result_head(self->s);
    if (d && (!put(d, "threads", Py_NewRef(b.threads)) ||
              !put(d, "threads_truncated",
                   PyBool_FromLong(b.threads_truncated && !thread)) ||
              !put_signal(d, self->s)))
        Py_CLEAR(d);
out:
    Py_XDECREF(b.threads);
    return d;
}

static PyObject *stack_list(const pyu_task *task)
{
    PyObject *l = PyList_New(0);
    for (size_t k = 0; l && task && k < task->nstack; k++)
        if (!append(l, frame_dict(&task->stack[k])))
            Py_CLEAR(l);
    return l;
}

static PyObject *task_dict(const pyu_tasks *t, const pyu_task *task)
{
    PyObject *d = PyDict_New(), *by = PyList_New(0);
    if (!d || !by)
        goto fail;
    for (size_t k = 0; k < task->nawaited_by; k++)
        if (!append(by, Py_BuildValue(
                            "{s:K,s:N}", "id",
                            (unsigned long long)task->awaited_by[k], "stack",
                            stack_list(pyu_tasks_find(t, task->awaited_by[k])))))
            goto fail;
    if (put(d, "id", PyLong_FromUnsignedLongLong(task->id)) &&
        put(d, "name", text(task->name)) &&
        put(d, "interpreter_id", PyLong_FromLongLong(task->interpreter_id)) &&
        put(d, "thread_id", PyLong_FromUnsignedLongLong(task->thread_id)) &&
        put(d, "native_thread_id",
            PyLong_FromUnsignedLongLong(task->native_thread_id)) &&
        put(d, "running", PyBool_FromLong(task->running)) &&
        put(d, "stack", stack_list(task)) && put(d, "awaited_by", by) &&
        put(d, "stack_truncated",
            PyBool_FromLong(task->truncated & PYU_TASK_TRUNC_STACK)) &&
        put(d, "awaiters_truncated",
            PyBool_FromLong(task->truncated & PYU_TASK_TRUNC_AWAITERS)) &&
        put(d, "error", task->error ? text(task->error) : Py_NewRef(Py_None)))
        return d;
    by = NULL;
fail:
    Py_XDECREF(d);
    Py_XDECREF(by);
    return NULL;
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
    if (self->mem && self->mem->interrupted) {
        pyu_tasks_free(t);
        return NULL;
    }
    if (rc < 0) {
        pyu_tasks_free(t);
        return raise_error(pyu_cmd_exit_for(rc), pyu_errmsg(self->s));
    }
    PyObject *d = result_head(self->s), *l = PyList_New(0);
    for (size_t i = 0; d && l && i < t->ntasks; i++)
        if (!append(l, task_dict(t, &t->tasks[i])))
            Py_CLEAR(l);
    if (d && (!l || !put(d, "tasks", Py_NewRef(l)) ||
              !put(d, "truncated", PyBool_FromLong(t->truncated)) ||
              !put_signal(d, self->s)))
        Py_CLEAR(d);
    Py_XDECREF(l);
    pyu_tasks_free(t);
    return d;
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
    if (PyType_Ready(&SessionType) < 0 || PyType_Ready(&ProfileType) < 0)
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
