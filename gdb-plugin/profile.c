/* _pyunwind.Profile: sampling for the gdb plugin (py-sample and
 * pyunwind_gdb.sample / Profile).
 *
 *   Profile()
 *   .window_start(pid, argv)   starts sampling process pid with the options
 *        of py-sample (argv), from a thread of its own, while gdb runs the
 *        inferior; when the window's duration ends that thread stops the
 *        inferior (SIGINT, which gdb stops on and does not pass)
 *   .window_end() -> (code, out, diag, msg, timed_out): ends the window
 *        (the inferior has stopped, for whatever reason), waits for the
 *        thread, and writes the profile as the options ask (out: bytes;
 *        None when the window streamed it to -o: --format raw);
 *        timed_out: the window's duration ended it
 *   .add_sample(session, thread) -> stacks: one sample of the stopped
 *        inferior through an opened Session (thread 0: every thread)
 *   .ticks(session, argv, pid, fd, remote, run, why) -> (out, diag,
 *        ended): --blocking, and any remote target: one sample of the
 *        stopped inferior through the session at each tick
 *        (frontend/ticks.c), which a thread stops it at (SIGINT to pid,
 *        or the interrupt byte on gdb's connection fd to a remote target;
 *        remote: a remote target, stopped again less eagerly); run()
 *        continues the inferior until it stops, why(fired) says why the
 *        ticks end then (None: they go on); ended: why they ended early,
 *        or None
 *   .write(format, sort, limit) -> bytes: "top", "collapsed", "json",
 *        "pprof" (binary), "speedscope", "raw" (binary), "flamegraph",
 *        "heatmap", "gecko"
 *   .data() -> dict: what --format json writes, as objects
 *
 * The window (frontend/window.c) samples from a thread of its own, and the
 * ticks' thread stops the inferior; neither touches a Python object, both
 * block every signal.
 */
#include "module.h"
#include "ticks.h"
#include "window.h"

#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

typedef struct {
    PyObject_HEAD
    pyu_profile *p;
    pyu_cmd_window *w; /* a window that runs */
    argvec wa;         /* its options' strings */
    pyu_cmd_opts wo;
    int pid;
    /* one sample at a time */
    pyu_sampler *sm;
    pyu_session *sm_session; /* the session sm reads (borrowed) */
    uint64_t sm_thread;
} Profile;

static int Profile_init(Profile *self, PyObject *args, PyObject *kw)
{
    (void)args, (void)kw;
    if (!self->p && !(self->p = pyu_profile_new())) {
        PyErr_NoMemory();
        return -1;
    }
    return 0;
}

/* Ends a window; returns its exit code. */
static int end_window(Profile *self, bool *timed_out, char *msg,
                      size_t msglen)
{
    int ex;
    Py_BEGIN_ALLOW_THREADS
    ex = pyu_cmd_window_end(self->w, timed_out, msg, msglen);
    Py_END_ALLOW_THREADS
    return ex;
}

static void Profile_dealloc(Profile *self)
{
    if (self->w) {
        bool t;
        char msg[64];
        end_window(self, &t, msg, sizeof msg);
        pyu_cmd_window_free(self->w);
    }
    argvec_free(&self->wa); /* (a window's) */
    pyu_sampler_free(self->sm);
    pyu_profile_free(self->p);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* gdb stops on SIGINT without passing it (py-sample makes sure) */
static void interrupt(void *arg)
{
    kill(*(int *)arg, SIGINT);
}

static PyObject *Profile_window_start(Profile *self, PyObject *args)
{
    int pid;
    PyObject *list;
    if (!PyArg_ParseTuple(args, "iO", &pid, &list))
        return NULL;
    if (self->w || self->wa.argv)
        return raise_error(PYU_EXIT_INTERNAL, "a window is running");
    if (parse_command("sample", list, &self->wa, &self->wo) < 0)
        return NULL;
    self->pid = pid;
    char msg[1024];
    int ex = pyu_cmd_window_start(pid, &self->wo, self->p, interrupt,
                                  &self->pid, &self->w, msg, sizeof msg);
    if (ex != PYU_EXIT_OK) {
        argvec_free(&self->wa);
        return raise_error(ex, msg);
    }
    Py_RETURN_NONE;
}

/* The profile written as o asks (to bytes: -o is the caller's), or NULL
 * with Error raised. */
static PyObject *profile_bytes(pyu_profile *p, const pyu_cmd_opts *opts)
{
    pyu_cmd_opts o = *opts;
    o.output = NULL;
    char *buf = NULL, msg[256];
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f)
        return PyErr_NoMemory();
    int ex = pyu_cmd_write_profile(p, NULL, &o, f, msg, sizeof msg);
    fclose(f);
    PyObject *r = ex == PYU_EXIT_OK
                      ? PyBytes_FromStringAndSize(buf, (Py_ssize_t)len)
                      : raise_error(ex, msg);
    free(buf);
    return r;
}

static PyObject *Profile_window_end(Profile *self, PyObject *unused)
{
    (void)unused;
    if (!self->w)
        return raise_error(PYU_EXIT_INTERNAL, "no window is running");
    bool timed_out;
    char msg[1024];
    int ex = end_window(self, &timed_out, msg, sizeof msg);
    const char *d = pyu_cmd_window_diag(self->w);
    PyObject *diag = PyBytes_FromStringAndSize(d, (Py_ssize_t)strlen(d));
    /* (None: the window streamed its capture to -o itself) */
    PyObject *out = !diag ? NULL
                    : pyu_cmd_window_streamed(self->w)
                        ? Py_NewRef(Py_None)
                        : profile_bytes(self->p, &self->wo);
    pyu_cmd_window_free(self->w);
    self->w = NULL;
    argvec_free(&self->wa);
    if (!out || !diag) {
        Py_XDECREF(out);
        Py_XDECREF(diag);
        return NULL;
    }
    return Py_BuildValue("iNNsO", ex, out, diag, msg,
                         timed_out ? Py_True : Py_False);
}

static PyObject *Profile_add_sample(Profile *self, PyObject *args)
{
    PyObject *session;
    unsigned long long thread;
    if (!PyArg_ParseTuple(args, "OK", &session, &thread))
        return NULL;
    if (self->w || self->wa.argv)
        return raise_error(PYU_EXIT_INTERNAL, "a window is running");
    pyu_session *s = session_of(session);
    if (!s)
        return NULL;
    if (!self->sm || self->sm_session != s || self->sm_thread != thread) {
        pyu_sampler_free(self->sm);
        self->sm = NULL;
        pyu_sampler_opts o = {PYU_MODE_WALL, 0, thread};
        int rc = pyu_sampler_new(s, &o, self->p, &self->sm);
        if (rc < 0)
            return raise_error(pyu_cmd_exit_for(rc), pyu_errmsg(s));
        self->sm_session = s;
        self->sm_thread = thread;
    }
    int n = pyu_sampler_take(self->sm);
    if (n < 0)
        return raise_error(pyu_cmd_exit_for(n), pyu_errmsg(s));
    return PyLong_FromLong(n);
}

/* s: a stop that did not come is asked for again after this long: a
 * SIGINT that came before gdb resumed the inferior is lost to gdb's
 * wait.  A remote target is stopped by gdbserver even when the stop
 * comes before gdb's resume, and gdb's handling of the stop takes round
 * trips: a second stop soon after would stop the next run at its start,
 * so it is asked for again only after a while. */
#define TICK_AGAIN 0.02
#define REMOTE_AGAIN 1.0

/* gdb's part of the ticks (ticks.h). */
typedef struct {
    int pid;
    int fd;              /* >= 0: a remote target's connection to gdb */
    PyObject *run, *why; /* borrowed: the caller's callables */
    bool failed;         /* one of them raised: the exception is set */
    char reason[256];
} gdb_ticks;

/* From the ticks' thread: stops the inferior as the window's end does
 * (SIGINT, which gdb stops on and does not pass), or a remote target by
 * the byte gdb itself sends to interrupt it (the remote protocol's
 * interrupt).  Touches no Python object. */
static void ticks_stop(void *arg)
{
    gdb_ticks *g = arg;
    if (g->fd >= 0)
        (void)!send(g->fd, "\x03", 1, MSG_NOSIGNAL | MSG_DONTWAIT);
    else
        kill(g->pid, SIGINT);
}

/* What run() or why() returned (r: a new reference, or NULL): NULL to go
 * on, or why the ticks end.  Ctrl-C (KeyboardInterrupt) ends them as
 * "interrupted"; another exception ends them and stays set. */
static const char *ticks_reason(gdb_ticks *g, PyObject *r)
{
    if (r == Py_None) {
        Py_DECREF(r);
        return NULL;
    }
    const char *s = r ? PyUnicode_AsUTF8(r) : NULL;
    if (s)
        snprintf(g->reason, sizeof g->reason, "%s", s);
    Py_XDECREF(r);
    if (s)
        return g->reason;
    if (PyErr_ExceptionMatches(PyExc_KeyboardInterrupt)) {
        PyErr_Clear();
        return "interrupted";
    }
    g->failed = true;
    return "failed";
}

static const char *ticks_run(void *arg)
{
    gdb_ticks *g = arg;
    return ticks_reason(g, PyObject_CallObject(g->run, NULL));
}

static const char *ticks_why(void *arg, bool fired)
{
    gdb_ticks *g = arg;
    return ticks_reason(g, PyObject_CallFunctionObjArgs(
                               g->why, fired ? Py_True : Py_False, NULL));
}

static PyObject *Profile_ticks(Profile *self, PyObject *args)
{
    PyObject *session, *list;
    gdb_ticks g = {.fd = -1};
    int remote;
    if (!PyArg_ParseTuple(args, "OOiipOO", &session, &list, &g.pid, &g.fd,
                          &remote, &g.run, &g.why))
        return NULL;
    if (g.pid <= 0 && g.fd < 0)
        return raise_error(PYU_EXIT_USAGE, "no process to stop at each tick");
    if (self->w || self->wa.argv)
        return raise_error(PYU_EXIT_INTERNAL, "a window is running");
    pyu_session *s = session_of(session);
    if (!s || parse_command("sample", list, &self->wa, &self->wo) < 0)
        return NULL;
    pyu_sampler_free(self->sm); /* (add_sample's: one sampler at a time) */
    self->sm = NULL;
    self->sm_session = NULL;
    pyu_cmd_ticks t = {
        .debugger = "gdb",
        .duration = self->wo.duration, /* (none: until it stops) */
        .again = remote || g.fd >= 0 ? REMOTE_AGAIN : TICK_AGAIN,
        .stop = ticks_stop,
        .run = ticks_run,
        .why = ticks_why,
        .arg = &g,
    };
    char *buf = NULL, msg[1024];
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f) {
        argvec_free(&self->wa);
        return PyErr_NoMemory();
    }
    int ex = pyu_cmd_ticks_run(s, &self->wo, &t, self->p, f, msg, sizeof msg);
    fclose(f);
    PyObject *r = NULL;
    if (ex != PYU_EXIT_OK)
        raise_error(ex, msg);
    else if (!g.failed) {
        PyObject *diag = PyBytes_FromStringAndSize(buf, (Py_ssize_t)len);
        PyObject *out = diag ? profile_bytes(self->p, &self->wo) : NULL;
        if (out)
            r = Py_BuildValue("NNz", out, diag, t.early[0] ? t.early : NULL);
        else
            Py_XDECREF(diag);
    }
    free(buf);
    argvec_free(&self->wa);
    return r;
}

static PyObject *Profile_forget_session(Profile *self, PyObject *unused)
{
    (void)unused;
    pyu_sampler_free(self->sm); /* (clears the anchors it wrote) */
    self->sm = NULL;
    self->sm_session = NULL;
    Py_RETURN_NONE;
}

static PyObject *Profile_write(Profile *self, PyObject *args)
{
    const char *format;
    const char *sort = "self";
    Py_ssize_t limit = 40;
    if (!PyArg_ParseTuple(args, "s|sn", &format, &sort, &limit))
        return NULL;
    static const char *const sorts[] = {"self", "total", "name"};
    pyu_cmd_opts o;
    memset(&o, 0, sizeof o);
    o.format = pyu_profile_format(format);
    for (int i = 0; i < 3; i++)
        if (strcmp(sort, sorts[i]) == 0)
            o.sort = i + 1;
    if (!o.format || !o.sort || limit < 0) {
        char msg[256];
        snprintf(msg, sizeof msg, "format: %s; sort: self, total or name",
                 pyu_cmd_format_list());
        return raise_error(PYU_EXIT_USAGE, msg);
    }
    o.sort--;
    o.limit = (size_t)limit;
    return profile_bytes(self->p, &o);
}

static PyMethodDef Profile_methods[] = {
    {"window_start", (PyCFunction)Profile_window_start, METH_VARARGS,
     "window_start(pid, argv): sample pid from a thread while gdb runs it"},
    {"window_end", (PyCFunction)Profile_window_end, METH_NOARGS,
     "window_end() -> (code, profile bytes, diag, msg, timed_out)"},
    {"add_sample", (PyCFunction)Profile_add_sample, METH_VARARGS,
     "add_sample(session, thread) -> stacks recorded"},
    {"ticks", (PyCFunction)Profile_ticks, METH_VARARGS,
     "ticks(session, argv, pid, fd, remote, run, why) -> (profile bytes, "
     "summary bytes, ended): sample at each tick, gdb stopping the "
     "inferior"},
    {"forget_session", (PyCFunction)Profile_forget_session, METH_NOARGS,
     "drop the sampler of add_sample (before its session closes)"},
    {"write", (PyCFunction)Profile_write, METH_VARARGS,
     "write(format, sort='self', limit=40) -> bytes"},
    {NULL, NULL, 0, NULL},
};

PyTypeObject ProfileType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "pyunwind_gdb._pyunwind.Profile",
    .tp_basicsize = sizeof(Profile),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A profile: stacks with counts, built by sampling",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)Profile_init,
    .tp_dealloc = (destructor)Profile_dealloc,
    .tp_methods = Profile_methods,
};
