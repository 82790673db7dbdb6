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
 *        thread, and writes the profile as the options ask (out: bytes);
 *        timed_out: the window's duration ended it
 *   .add_sample(session, thread) -> stacks: one sample of the stopped
 *        inferior through an opened Session (thread 0: every thread)
 *   .write(format, sort, limit) -> bytes: "top", "collapsed", "json"
 *   .data() -> dict: what --format json writes, as objects
 *
 * The window thread touches no Python object; it blocks every signal, so
 * that gdb's handlers keep running in gdb's own thread.
 */
#include "module.h"

#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    PyObject_HEAD
    pyu_profile *p;
    /* a window */
    bool running;
    pthread_t thread;
    pyu_session *ws;
    argvec wa;
    pyu_cmd_opts wo;
    volatile sig_atomic_t stop;
    int pid;
    int win_ex;
    bool timed_out;
    char win_msg[1024];
    char *diag;
    size_t dlen;
    FILE *diagf;
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

static void end_window(Profile *self)
{
    if (!self->running)
        return;
    self->stop = 1;
    Py_BEGIN_ALLOW_THREADS
    pthread_join(self->thread, NULL);
    Py_END_ALLOW_THREADS
    self->running = false;
    pyu_session_free(self->ws);
    self->ws = NULL;
    argvec_free(&self->wa);
}

static void Profile_dealloc(Profile *self)
{
    end_window(self);
    if (self->diagf)
        fclose(self->diagf);
    free(self->diag);
    pyu_sampler_free(self->sm);
    pyu_profile_free(self->p);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static void *window_main(void *arg)
{
    Profile *self = arg;
    sigset_t all;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, NULL);
    pyu_cmd_sample_hooks h = {.stop = &self->stop};
    self->win_ex = pyu_cmd_sample_run(self->ws, &self->wo, &h, self->p,
                                      self->diagf, self->win_msg,
                                      sizeof self->win_msg);
    if (!self->stop) { /* the duration ended (or the target did) */
        self->timed_out = true;
        kill(self->pid, SIGINT);
    }
    return NULL;
}

static PyObject *Profile_window_start(Profile *self, PyObject *args)
{
    int pid;
    PyObject *list;
    if (!PyArg_ParseTuple(args, "iO", &pid, &list))
        return NULL;
    if (self->running)
        return raise_error(PYU_EXIT_INTERNAL, "a window is running");
    if (parse_command("sample", list, &self->wa, &self->wo) < 0)
        return NULL;
    self->ws = pyu_session_new();
    if (!self->ws) {
        argvec_free(&self->wa);
        return PyErr_NoMemory();
    }
    int rc = pyu_open_pid(self->ws, pid, PYU_OPEN_NONBLOCKING);
    if (rc < 0) {
        PyObject *e = raise_error(pyu_cmd_exit_for(rc), pyu_errmsg(self->ws));
        pyu_session_free(self->ws);
        self->ws = NULL;
        argvec_free(&self->wa);
        return e;
    }
    if (self->diagf)
        fclose(self->diagf);
    free(self->diag);
    self->diag = NULL;
    self->diagf = open_memstream(&self->diag, &self->dlen);
    self->stop = 0;
    self->timed_out = false;
    self->pid = pid;
    self->win_msg[0] = 0;
    if (!self->diagf ||
        pthread_create(&self->thread, NULL, window_main, self) != 0) {
        pyu_session_free(self->ws);
        self->ws = NULL;
        argvec_free(&self->wa);
        return raise_error(PYU_EXIT_INTERNAL, "cannot start the sampler");
    }
    self->running = true;
    Py_RETURN_NONE;
}

static PyObject *Profile_window_end(Profile *self, PyObject *unused)
{
    (void)unused;
    if (!self->running)
        return raise_error(PYU_EXIT_INTERNAL, "no window is running");
    /* the profile as the options ask (to bytes: the caller writes -o) */
    pyu_cmd_opts o = self->wo;
    o.output = NULL;
    end_window(self);
    fflush(self->diagf);
    char *buf = NULL, msg[256];
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    int ex = f ? pyu_cmd_write_profile(self->p, &o, f, msg, sizeof msg)
               : PYU_EXIT_INTERNAL;
    if (f)
        fclose(f);
    PyObject *out = PyBytes_FromStringAndSize(buf ? buf : "",
                                              (Py_ssize_t)len);
    free(buf);
    PyObject *diag = PyBytes_FromStringAndSize(self->diag ? self->diag : "",
                                               (Py_ssize_t)self->dlen);
    if (!out || !diag) {
        Py_XDECREF(out);
        Py_XDECREF(diag);
        return NULL;
    }
    if (ex != PYU_EXIT_OK && self->win_ex == PYU_EXIT_OK) {
        self->win_ex = ex;
        snprintf(self->win_msg, sizeof self->win_msg, "%s", msg);
    }
    return Py_BuildValue("iNNsO", self->win_ex, out, diag, self->win_msg,
                         self->timed_out ? Py_True : Py_False);
}

static PyObject *Profile_add_sample(Profile *self, PyObject *args)
{
    PyObject *session;
    unsigned long long thread;
    if (!PyArg_ParseTuple(args, "OK", &session, &thread))
        return NULL;
    if (self->running)
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
    static const char *const formats[] = {"top", "collapsed", "json"};
    static const char *const sorts[] = {"self", "total", "name"};
    pyu_cmd_opts o;
    memset(&o, 0, sizeof o);
    o.format = -1;
    for (int i = 0; i < 3; i++) {
        if (strcmp(format, formats[i]) == 0)
            o.format = i;
        if (strcmp(sort, sorts[i]) == 0)
            o.sort = i + 1;
    }
    if (o.format < 0 || !o.sort || limit < 0)
        return raise_error(PYU_EXIT_USAGE, "format: top, collapsed or json; "
                                           "sort: self, total or name");
    o.sort--;
    o.limit = (size_t)limit;
    char *buf = NULL, msg[256];
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f)
        return PyErr_NoMemory();
    int ex = pyu_cmd_write_profile(self->p, &o, f, msg, sizeof msg);
    fclose(f);
    PyObject *r = ex == PYU_EXIT_OK
                      ? PyBytes_FromStringAndSize(buf, (Py_ssize_t)len)
                      : raise_error(ex, msg);
    free(buf);
    return r;
}

static PyObject *Profile_set_timing(Profile *self, PyObject *args)
{
    unsigned long long duration, samples;
    if (!PyArg_ParseTuple(args, "KK", &duration, &samples))
        return NULL;
    pyu_profile_info *in = pyu_profile_info_of(self->p);
    in->duration_ns = duration;
    in->samples = samples;
    Py_RETURN_NONE;
}

static PyMethodDef Profile_methods[] = {
    {"window_start", (PyCFunction)Profile_window_start, METH_VARARGS,
     "window_start(pid, argv): sample pid from a thread while gdb runs it"},
    {"window_end", (PyCFunction)Profile_window_end, METH_NOARGS,
     "window_end() -> (code, profile bytes, diag, msg, timed_out)"},
    {"add_sample", (PyCFunction)Profile_add_sample, METH_VARARGS,
     "add_sample(session, thread) -> stacks recorded"},
    {"forget_session", (PyCFunction)Profile_forget_session, METH_NOARGS,
     "drop the sampler of add_sample (before its session closes)"},
    {"write", (PyCFunction)Profile_write, METH_VARARGS,
     "write(format, sort='self', limit=40) -> bytes"},
    {"set_timing", (PyCFunction)Profile_set_timing, METH_VARARGS,
     "set_timing(duration_ns, samples): for profiles fed by hand"},
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
