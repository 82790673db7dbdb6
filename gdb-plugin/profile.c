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
 *   .ticks_start(session, argv, pid[, fd, remote]) / .ticks_arm(due)
 *        / .ticks_disarm() / .tick() / .ticks_end(seconds) -> (out, diag):
 *        --blocking, and any remote target: one sample at each stop: the
 *        caller continues the inferior after arming a thread of this
 *        object that stops it at the time due (SIGINT to pid, or the
 *        interrupt byte on gdb's connection fd to a remote target;
 *        remote: a remote target, stopped again less eagerly); tick()
 *        takes one sample of the stopped inferior through the session
 *        (None: the process is gone); ticks_end writes the profile and
 *        the summary
 *   .write(format, sort, limit) -> bytes: "top", "collapsed", "json",
 *        "pprof" (binary), "speedscope", "raw" (binary), "flamegraph",
 *        "heatmap", "gecko"
 *   .data() -> dict: what --format json writes, as objects
 *
 * The window (frontend/window.c) samples from a thread of its own, which
 * touches no Python object and blocks every signal.
 */
#include "module.h"
#include "window.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

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
    /* ticks: a thread that stops the inferior at the armed time */
    bool ticking;
    pthread_t tk_thread;
    pthread_mutex_t tk_mu;
    pthread_cond_t tk_cv;
    double tk_due; /* CLOCK_MONOTONIC seconds; < 0: disarmed */
    bool tk_quit, tk_fired;
    int tk_pid;
    int tk_fd; /* >= 0: a remote target's connection to gdb (see ticker) */
    double tk_again;
} Profile;

static void stop_ticker(Profile *self);

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
    stop_ticker(self);
    argvec_free(&self->wa); /* (a window's, or ticks never ended) */
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
 * wait.  Remote targets: see ticker. */
#define TICK_AGAIN 0.02
#define REMOTE_AGAIN 1.0

static double mono_now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/* The ticker: at the armed time it stops the inferior as the window's
 * end does (SIGINT, which gdb stops on and does not pass), and again
 * every tk_again seconds until it is disarmed.  Touches no Python
 * object. */
static void *ticker(void *arg)
{
    Profile *self = arg;
    sigset_t all;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, NULL);
    pthread_mutex_lock(&self->tk_mu);
    while (!self->tk_quit) {
        if (self->tk_due < 0) {
            pthread_cond_wait(&self->tk_cv, &self->tk_mu);
            continue;
        }
        double left = self->tk_due - mono_now();
        if (left > 0) {
            struct timespec at;
            clock_gettime(CLOCK_MONOTONIC, &at);
            long long ns = at.tv_nsec + (long long)(left * 1e9);
            at.tv_sec += (time_t)(ns / 1000000000LL);
            at.tv_nsec = (long)(ns % 1000000000LL);
            pthread_cond_timedwait(&self->tk_cv, &self->tk_mu, &at);
            continue;
        }
        self->tk_fired = true;
        if (self->tk_fd >= 0)
            /* a remote target: the byte gdb itself sends to interrupt it
             * (the remote protocol's interrupt) */
            (void)!send(self->tk_fd, "\x03", 1, MSG_NOSIGNAL | MSG_DONTWAIT);
        else
            kill(self->tk_pid, SIGINT);
        /* A remote target is stopped by gdbserver even when the stop
         * comes before gdb's resume, and gdb's handling of the stop takes
         * round trips: a second stop soon after would stop the next run
         * at its start, so it is asked for again only after a while. */
        self->tk_due = mono_now() + self->tk_again;
    }
    pthread_mutex_unlock(&self->tk_mu);
    return NULL;
}

static void stop_ticker(Profile *self)
{
    if (!self->ticking)
        return;
    pthread_mutex_lock(&self->tk_mu);
    self->tk_quit = true;
    pthread_cond_signal(&self->tk_cv);
    pthread_mutex_unlock(&self->tk_mu);
    Py_BEGIN_ALLOW_THREADS
    pthread_join(self->tk_thread, NULL);
    Py_END_ALLOW_THREADS
    pthread_cond_destroy(&self->tk_cv);
    pthread_mutex_destroy(&self->tk_mu);
    self->ticking = false;
}

static PyObject *Profile_ticks_start(Profile *self, PyObject *args)
{
    PyObject *session, *list;
    int pid, fd = -1, remote = 0;
    if (!PyArg_ParseTuple(args, "OOi|ip", &session, &list, &pid, &fd,
                          &remote))
        return NULL;
    if (pid <= 0 && fd < 0)
        return raise_error(PYU_EXIT_USAGE, "no process to stop at each tick");
    if (self->w || self->wa.argv)
        return raise_error(PYU_EXIT_INTERNAL, "a window is running");
    pyu_session *s = session_of(session);
    if (!s || parse_command("sample", list, &self->wa, &self->wo) < 0)
        return NULL;
    pyu_sampler_free(self->sm);
    self->sm = NULL;
    self->sm_session = NULL;
    /* (--blocking is what ticks are: the sampler itself never stops it) */
    pyu_sampler_opts o = {self->wo.mode,
                          self->wo.sample_flags & ~PYU_SAMPLE_BLOCKING,
                          self->wo.thread};
    int rc = pyu_sampler_new(s, &o, self->p, &self->sm);
    if (rc < 0) {
        argvec_free(&self->wa);
        return raise_error(pyu_cmd_exit_for(rc), pyu_errmsg(s));
    }
    self->sm_session = s;
    self->sm_thread = (uint64_t)-1; /* (not add_sample's) */
    pyu_profile_info_of(self->p)->interval_ns =
        self->wo.rate > 0 ? (uint64_t)(1e9 / self->wo.rate) : 0;
    self->tk_pid = pid;
    self->tk_fd = fd;
    self->tk_again = remote || fd >= 0 ? REMOTE_AGAIN : TICK_AGAIN;
    self->tk_due = -1;
    self->tk_quit = self->tk_fired = false;
    pthread_mutex_init(&self->tk_mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&self->tk_cv, &ca);
    pthread_condattr_destroy(&ca);
    int e = pthread_create(&self->tk_thread, NULL, ticker, self);
    if (e) {
        pthread_cond_destroy(&self->tk_cv);
        pthread_mutex_destroy(&self->tk_mu);
        pyu_sampler_free(self->sm);
        self->sm = NULL;
        self->sm_session = NULL;
        argvec_free(&self->wa);
        return raise_error(PYU_EXIT_INTERNAL, strerror(e));
    }
    self->ticking = true;
    Py_RETURN_NONE;
}

/* arm(due): stop the inferior at CLOCK_MONOTONIC time due (seconds, as
 * Python's time.monotonic()); disarm() -> whether it was stopped so */
static PyObject *Profile_ticks_arm(Profile *self, PyObject *args)
{
    double due;
    if (!PyArg_ParseTuple(args, "d", &due))
        return NULL;
    if (!self->ticking)
        return raise_error(PYU_EXIT_INTERNAL, "no ticks were started");
    pthread_mutex_lock(&self->tk_mu);
    self->tk_due = due;
    self->tk_fired = false;
    pthread_cond_signal(&self->tk_cv);
    pthread_mutex_unlock(&self->tk_mu);
    Py_RETURN_NONE;
}

static PyObject *Profile_ticks_disarm(Profile *self, PyObject *unused)
{
    (void)unused;
    if (!self->ticking)
        return raise_error(PYU_EXIT_INTERNAL, "no ticks were started");
    pthread_mutex_lock(&self->tk_mu);
    self->tk_due = -1;
    bool fired = self->tk_fired;
    pthread_mutex_unlock(&self->tk_mu);
    return PyBool_FromLong(fired);
}

static PyObject *Profile_tick(Profile *self, PyObject *unused)
{
    (void)unused;
    if (!self->sm || !self->wa.argv)
        return raise_error(PYU_EXIT_INTERNAL, "no ticks were started");
    int n = pyu_sampler_take(self->sm);
    if (n == -PYU_E_NOPROC)
        Py_RETURN_NONE;
    /* (other failures are the sampler's statistics: failed samples) */
    return PyLong_FromLong(n < 0 ? 0 : n);
}

static PyObject *Profile_ticks_end(Profile *self, PyObject *args)
{
    double seconds;
    if (!PyArg_ParseTuple(args, "d", &seconds))
        return NULL;
    if (!self->wa.argv || self->w)
        return raise_error(PYU_EXIT_INTERNAL, "no ticks were started");
    stop_ticker(self);
    pyu_sampler_free(self->sm); /* (before the caller closes the session) */
    self->sm = NULL;
    self->sm_session = NULL;
    pyu_profile_info *in = pyu_profile_info_of(self->p);
    in->duration_ns = seconds > 0 ? (uint64_t)(seconds * 1e9) : 0;
    if (in->interval_ns) { /* ticks the round trips could not serve */
        uint64_t due = in->duration_ns / in->interval_ns;
        in->missed = due > in->samples ? due - in->samples : 0;
    }
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f) {
        argvec_free(&self->wa);
        return PyErr_NoMemory();
    }
    pyu_cmd_sample_summary(f, in, "stopped by gdb at each tick");
    fclose(f);
    PyObject *diag = PyBytes_FromStringAndSize(buf, (Py_ssize_t)len);
    free(buf);
    PyObject *out = diag ? profile_bytes(self->p, &self->wo) : NULL;
    argvec_free(&self->wa);
    if (!out) {
        Py_XDECREF(diag);
        return NULL;
    }
    return Py_BuildValue("NN", out, diag);
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
    {"ticks_start", (PyCFunction)Profile_ticks_start, METH_VARARGS,
     "ticks_start(session, argv, pid[, fd, remote]): sample at each stop "
     "gdb makes"},
    {"ticks_arm", (PyCFunction)Profile_ticks_arm, METH_VARARGS,
     "ticks_arm(due): stop the inferior at time.monotonic() == due"},
    {"ticks_disarm", (PyCFunction)Profile_ticks_disarm, METH_NOARGS,
     "ticks_disarm() -> whether the armed stop was sent"},
    {"tick", (PyCFunction)Profile_tick, METH_NOARGS,
     "tick() -> stacks recorded, or None when the process is gone"},
    {"ticks_end", (PyCFunction)Profile_ticks_end, METH_VARARGS,
     "ticks_end(seconds) -> (profile bytes, summary bytes)"},
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
