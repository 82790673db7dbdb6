/* pyunwind: the command-line front end over the core library. */
#include "command.h"
#include "pyunwind/pyunwind.h"
#include "serve.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdbool.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#ifndef PYUNWIND_VERSION
#define PYUNWIND_VERSION "0.1.0"
#endif

static int fail(const char *msg, int code)
{
    fprintf(stderr, "pyunwind: error: %s\n", msg);
    return code;
}

/* After a profile was written to -o FILE: which file, and how to open it. */
static void wrote(const pyu_cmd_opts *o)
{
    static const struct {
        const char *format, *how;
    } hows[] = {
        {"flamegraph", "an HTML page: open it in a web browser"},
        {"heatmap", "an HTML page: open it in a web browser"},
        {"pprof", "go tool pprof -http=: FILE"},
        {"speedscope", "npx speedscope FILE, or drop it on "
                       "https://www.speedscope.app"},
        {"gecko", "load it at https://profiler.firefox.com"},
        {"raw", "pyunwind report FILE, in any format"},
        {"collapsed", "flamegraph.pl FILE > flame.svg"},
        {"json", "docs/json.md"},
    };
    struct stat st;
    if (!o->output || stat(o->output, &st) != 0 || !S_ISREG(st.st_mode))
        return; /* (not a file to open later: /dev/null, a pipe) */
    const char *how = NULL;
    for (size_t i = 0; i < sizeof hows / sizeof hows[0] && !how; i++)
        if (pyu_cmd_format_is(o, hows[i].format))
            how = hows[i].how;
    fprintf(stderr, "pyunwind: wrote %s (%s", o->output,
            o->format ? o->format->name : "top");
    if (how) {
        fputs(": ", stderr);
        for (const char *c = how; *c; c++) /* (FILE: the file's name) */
            if (strncmp(c, "FILE", 4) == 0) {
                fputs(o->output, stderr);
                c += 3;
            } else {
                fputc(*c, stderr);
            }
    }
    fputs(")\n", stderr);
}

static int run_sample(pyu_cmd_opts o);
static int run_report(const pyu_cmd_opts *o);

static int run(enum pyu_cmd_kind kind, int argc, char **argv)
{
    pyu_cmd_opts o;
    char msg[1024];
    int ex = pyu_cmd_parse(&o, kind, PYU_CMD_CLI, argc, argv, msg,
                           sizeof msg);
    if (ex != PYU_EXIT_OK)
        return fail(msg, ex);
    if (o.help) {
        fputs(pyu_cmd_help(kind, PYU_CMD_CLI), stdout);
        return PYU_EXIT_OK;
    }
    if (*o.format_warning)
        fprintf(stderr, "pyunwind: warning: %s\n", o.format_warning);
    if (kind == PYU_CMD_SAMPLE)
        return run_sample(o);
    if (kind == PYU_CMD_REPORT)
        return run_report(&o);
    if (!o.core && (o.ntargets > 1 || o.subprocesses)) {
        /* (each process's error or warning is a line of its own) */
        ex = pyu_cmd_run_targets(&o, stdout, stderr, msg, sizeof msg);
        return *msg ? fail(msg, ex) : ex;
    }
    pyu_session *s = pyu_session_new();
    if (!s)
        return fail("out of memory", PYU_EXIT_INTERNAL);
    char source[600];
    int rc;
    if (o.core) {
        snprintf(source, sizeof source, "core file %s", o.core);
        rc = pyu_open_core(s, o.core, o.exe, o.sysroot);
    } else {
        snprintf(source, sizeof source, "live process %d%s", o.pid,
                 o.open_flags & PYU_OPEN_NONBLOCKING ? " without stopping it"
                                                     : "");
        rc = pyu_open_pid(s, o.pid, o.open_flags);
    }
    if (rc < 0)
        ex = fail(pyu_errmsg(s), pyu_cmd_exit_for(rc));
    else {
        ex = pyu_cmd_run(s, &o, !o.core, source, stdout, stderr, msg,
                              sizeof msg);
        if (ex == PYU_EXIT_PARTIAL)
            fprintf(stderr, "pyunwind: warning: %s\n", msg);
        else if (ex != PYU_EXIT_OK)
            fail(msg, ex);
    }
    pyu_session_free(s);
    return ex;
}

/* ------------------------------------------------------------- sample */

static volatile sig_atomic_t stop_requested;

static void on_stop_signal(int sig)
{
    (void)sig;
    stop_requested = 1;
}

/* Ctrl-C and SIGTERM end the run (the profile is kept); no SA_RESTART, so
 * that a sleep between samples ends at once. */
static void catch_stop_signals(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_stop_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
}

/* The program started by `sample -- PROGRAM`. */
typedef struct child {
    pid_t pid;
    bool exited;
    int status; /* its wait status, once exited */
} child;

static int child_gone(void *arg)
{
    child *c = arg;
    if (!c->exited && waitpid(c->pid, &c->status, WNOHANG) == c->pid)
        c->exited = true;
    return c->exited;
}

/* Starts PROGRAM; its exec failing is reported through a pipe. */
static int start_child(char **argv, child *c, char *msg, size_t msglen)
{
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) < 0) {
        snprintf(msg, msglen, "cannot start %s: %s", argv[0], strerror(errno));
        return -1;
    }
    pid_t pid = fork();
    if (pid < 0) {
        snprintf(msg, msglen, "cannot start %s: %s", argv[0], strerror(errno));
        return -1;
    }
    if (pid == 0) {
        close(fds[0]);
        signal(SIGINT, SIG_DFL);
        signal(SIGTERM, SIG_DFL);
        execvp(argv[0], argv);
        int e = errno;
        if (write(fds[1], &e, sizeof e) < 0)
            _exit(127);
        _exit(127);
    }
    close(fds[1]);
    int e = 0;
    ssize_t got = read(fds[0], &e, sizeof e);
    close(fds[0]);
    *c = (child){pid, false, 0};
    if (got == (ssize_t)sizeof e) {
        waitpid(pid, &c->status, 0);
        snprintf(msg, msglen, "cannot run %s: %s", argv[0], strerror(e));
        return -1;
    }
    return 0;
}

/* How the program ended, in words: "exit status N", "killed by signal N". */
static void status_of(const child *c, char *buf, size_t len)
{
    if (WIFEXITED(c->status))
        snprintf(buf, len, "exit status %d", WEXITSTATUS(c->status));
    else if (WIFSIGNALED(c->status))
        snprintf(buf, len, "killed by signal %d", WTERMSIG(c->status));
    else
        snprintf(buf, len, "status 0x%x", (unsigned)c->status);
}

/* Has the program's CPython started (a thread with a frame, or at least
 * a thread state)? */
static int count_thread(void *arg, const pyu_walk_thread *t)
{
    (void)t;
    ++*(int *)arg;
    return PYU_WALK_SKIP;
}

/* Opens the program once its runtime can be read: polls every 2 ms until
 * it has a thread, or until it ends.  A program that ended first is told
 * by what the last look at it while it ran found (not Python: exit 4,
 * whatever its own status; see docs/exit-codes.md). */
static int open_child(pyu_session **sp, child *c, char *msg, size_t msglen)
{
    struct timespec pause = {0, 2000000};
    int alive_code = 0;
    char alive_err[512] = "";
    for (;;) {
        pyu_session *s = pyu_session_new();
        if (!s) {
            snprintf(msg, msglen, "out of memory");
            return PYU_EXIT_INTERNAL;
        }
        int threads = 0;
        pyu_walker w = {.thread = count_thread};
        if (pyu_open_pid(s, c->pid, PYU_OPEN_NONBLOCKING) == 0 &&
            pyu_walk(s, &w, &threads) == 0 && threads > 0) {
            *sp = s;
            return PYU_EXIT_OK;
        }
        int code = pyu_errcode(s);
        char err[512];
        snprintf(err, sizeof err, "%s", pyu_errmsg(s));
        pyu_session_free(s);
        if (child_gone(c)) {
            if (code == PYU_E_NOPROC && alive_code) {
                code = alive_code; /* (it had run meanwhile) */
                snprintf(err, sizeof err, "%s", alive_err);
            }
            char status[64];
            status_of(c, status, sizeof status);
            snprintf(msg, msglen, "the program ended (%s) before a CPython "
                     "runtime could be read in it%s%s", status,
                     *err ? ": " : "", err);
            return code == PYU_E_NOTPY || code == PYU_E_VERSION
                       ? PYU_EXIT_NOTPY
                       : PYU_EXIT_TARGET;
        }
        alive_code = code;
        snprintf(alive_err, sizeof alive_err, "%s", err);
        nanosleep(&pause, NULL);
    }
}

/* The exit status of the program, as a shell reports it. */
static int child_exit_code(const child *c)
{
    if (WIFEXITED(c->status))
        return WEXITSTATUS(c->status);
    if (WIFSIGNALED(c->status))
        return 128 + WTERMSIG(c->status);
    return PYU_EXIT_INTERNAL;
}

/* ------------------------------------------------------------- --live */

/* The live view: a top table redrawn at each tick, keys read from the
 * terminal (non-canonical, no echo; restored at the end). */
typedef struct live {
    int sort;     /* PYU_TOP_SORT_* */
    long process; /* index into the profile's processes, -1: all */
    long thread;  /* index into the profile's threads (of the process
                     shown), -1: all */
    struct termios saved;
    bool raw;
} live;

static void live_start(live *l)
{
    *l = (live){PYU_TOP_SORT_SELF, -1, -1, {0}, false};
    struct termios t;
    if (tcgetattr(STDIN_FILENO, &l->saved) == 0) {
        t = l->saved;
        t.c_lflag &= ~(tcflag_t)(ICANON | ECHO);
        t.c_cc[VMIN] = 0;
        t.c_cc[VTIME] = 0;
        l->raw = tcsetattr(STDIN_FILENO, TCSANOW, &t) == 0;
    }
    fputs("\033[?25l", stdout); /* (no cursor while it draws) */
}

static void live_end(live *l)
{
    if (l->raw)
        tcsetattr(STDIN_FILENO, TCSANOW, &l->saved);
    fputs("\033[?25h\n", stdout);
    fflush(stdout);
}

/* Whether thread i is in T's round in pass 0 (main threads) or 1 (the
 * others): of process `process` (-1: any). */
static bool in_round(const pyu_profile_data *d, long i, int pass,
                     long process)
{
    return (d->threads[i].main != 0) == (pass == 0) &&
           (process < 0 || d->threads[i].process == (uint32_t)process);
}

/* The thread T shows after `from` (-1: all), of process `process` (-1:
 * of every process): main threads first, then the others in the
 * profile's order, then all again. */
static long next_thread(const pyu_profile_data *d, long from, long process)
{
    long n = (long)d->nthreads;
    /* position in that order: mains 0..m-1, others m..n-1 */
    long pos = -1, k = 0;
    for (int pass = 0; pass < 2; pass++)
        for (long i = 0; i < n; i++)
            if (in_round(d, i, pass, process) && i == from)
                pos = k++;
            else if (in_round(d, i, pass, process))
                k++;
    k = 0;
    for (int pass = 0; pass < 2; pass++)
        for (long i = 0; i < n; i++)
            if (in_round(d, i, pass, process) && k++ == pos + 1)
                return i;
    return -1;
}

static void live_tick(void *arg, pyu_profile *p, uint64_t elapsed_ns)
{
    live *l = arg;
    const pyu_profile_data *d = pyu_profile_get(p);
    char key;
    while (read(STDIN_FILENO, &key, 1) == 1) {
        if (key == 'q' || key == 'Q')
            stop_requested = 1;
        else if (key == 's')
            l->sort = PYU_TOP_SORT_SELF;
        else if (key == 't')
            l->sort = PYU_TOP_SORT_TOTAL;
        else if (key == 'n')
            l->sort = PYU_TOP_SORT_NAME;
        else if (key == 'T')
            l->thread = next_thread(d, l->thread, l->process);
        else if (key == 'P' && d->nprocesses > 1) {
            /* (the processes in the profile's order, then all) */
            l->process = l->process + 1 < (long)d->nprocesses
                             ? l->process + 1
                             : -1;
            l->thread = -1;
        }
    }
    struct winsize ws;
    int rows = ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_row > 8
                   ? ws.ws_row
                   : 24;
    static const char *const sorts[] = {"self", "total", "name"};
    bool many = d->nprocesses > 1;
    const pyu_profile_process *pr =
        l->process >= 0 ? &d->processes[l->process] : NULL;
    char which[96] = "all threads", proc[64] = "";
    if (l->thread >= 0)
        snprintf(which, sizeof which, "thread %" PRIu64 "%s",
                 d->threads[l->thread].native_thread_id,
                 d->threads[l->thread].main ? " (main)" : "");
    if (pr)
        snprintf(proc, sizeof proc, "process %d%s; ", pr->pid,
                 pr->exited ? " (exited)" : "");
    else if (many)
        snprintf(proc, sizeof proc, "all %zu processes; ", d->nprocesses);
    printf("\033[H\033[2Jpyunwind --live: %.1f s; sorted by %s; %s%s"
           "   [s]elf [t]otal [n]ame  %s[T]hread  [q]uit\n",
           (double)elapsed_ns / 1e9, sorts[l->sort], proc, which,
           many ? "[P]rocess " : "");
    /* (one process or thread: the profile of its stacks alone) */
    pyu_profile *shown = p;
    const pyu_profile_thread *t = l->thread >= 0 ? &d->threads[l->thread]
                                                 : NULL;
    pyu_profile_filter f = {
        .thread = !t ? 0 : t->native_thread_id ? t->native_thread_id
                                               : t->thread_id,
        .pid = pr ? pr->pid : 0,
        .mode = -1,
    };
    if ((t || pr) && pyu_profile_select(p, &f, &shown) < 0)
        shown = NULL;
    if (shown)
        pyu_profile_write_top(shown, stdout, l->sort, (size_t)(rows - 6));
    if (shown && shown != p)
        pyu_profile_free(shown);
    fflush(stdout);
}

static int run_sample(pyu_cmd_opts o)
{
    char msg[1024];
    int ex;
    catch_stop_signals();
    child c = {0, false, 0};
    pyu_session *s = NULL;
    if ((ex = pyu_cmd_output_ready(&o, msg, sizeof msg)) != PYU_EXIT_OK)
        return fail(msg, ex); /* (before the run, not after it) */
    if (o.launch) {
        if (start_child(o.launch, &c, msg, sizeof msg) < 0)
            return fail(msg, PYU_EXIT_TARGET);
        ex = open_child(&s, &c, msg, sizeof msg);
        if (ex != PYU_EXIT_OK) {
            /* (a program that is not Python: 4, not its own status) */
            fail(msg, ex);
            return c.exited && ex != PYU_EXIT_NOTPY ? child_exit_code(&c)
                                                     : ex;
        }
    } else {
        if (!(s = pyu_session_new()))
            return fail("out of memory", PYU_EXIT_INTERNAL);
        unsigned flags = o.sample_flags & PYU_SAMPLE_BLOCKING
                             ? 0
                             : PYU_OPEN_NONBLOCKING;
        int rc = pyu_open_pid(s, o.pid, flags);
        if (rc < 0) {
            ex = fail(pyu_errmsg(s), pyu_cmd_exit_for(rc));
            pyu_session_free(s);
            return ex;
        }
    }
    if (o.verbose) {
        pyu_process pr;
        if (pyu_target(s, &pr) == 0)
            fprintf(stderr, "pyunwind: sampling process %d, CPython %s%s\n",
                    o.launch ? (int)c.pid : o.pid, pr.python,
                    pr.free_threaded ? " free-threaded" : "");
    }
    pyu_profile *p = pyu_profile_new();
    if (!p) {
        pyu_session_free(s);
        return fail("out of memory", PYU_EXIT_INTERNAL);
    }
    pyu_cmd_sample_hooks h = {
        .stop = &stop_requested,
        .gone = o.launch ? child_gone : NULL,
        .arg = &c,
        .status = isatty(STDERR_FILENO) ? stderr : NULL,
        .pid = o.launch ? (int)c.pid : o.pid,
    };
    live lv;
    if (o.live) {
        live_start(&lv);
        h.tick = live_tick;
        h.tick_arg = &lv;
        h.status = NULL;
    }
    /* raw: streamed while it samples, so that a killed run keeps it */
    bool raw = pyu_cmd_format_is(&o, "raw");
    if (raw && !(h.raw = o.output ? fopen(o.output, "wb") : stdout)) {
        snprintf(msg, sizeof msg, "cannot write %s: %s", o.output,
                 strerror(errno));
        pyu_session_free(s);
        pyu_profile_free(p);
        return fail(msg, PYU_EXIT_INTERNAL);
    }
    ex = pyu_cmd_sample_run(s, &o, &h, p, stderr, msg, sizeof msg);
    if (o.live)
        live_end(&lv);
    pyu_session_free(s);
    if (ex != PYU_EXIT_OK)
        fail(msg, ex);
    int wex = PYU_EXIT_OK;
    if (raw && h.raw != stdout && fclose(h.raw) != 0) {
        snprintf(msg, sizeof msg, "writing to %s failed", o.output);
        wex = PYU_EXIT_INTERNAL;
    } else if (!raw && !(o.live && !o.output)) {
        /* (with --live and no -o the view was the output) */
        wex = pyu_cmd_write_profile(p, NULL, &o, stdout, msg, sizeof msg);
    }
    if (wex == PYU_EXIT_OK)
        wrote(&o); /* (-o FILE: which, and how to open it) */
    if (wex != PYU_EXIT_OK) {
        fail(msg, wex);
        ex = wex;
    }
    pyu_profile_free(p);
    if (o.launch) {
        /* profiled to its exit: wait for it, passing Ctrl-C on */
        if (!c.exited && stop_requested)
            kill(c.pid, SIGINT);
        while (!c.exited) {
            if (waitpid(c.pid, &c.status, 0) == c.pid)
                c.exited = true;
            else if (errno != EINTR)
                break;
        }
        if (ex == PYU_EXIT_OK && c.exited)
            ex = child_exit_code(&c);
    }
    return ex;
}

/* ------------------------------------------------------------- report */

/* Reads the capture at path into *out with the report's filters.
 * Returns PYU_EXIT_OK (a note about a cut capture on stderr) or the
 * error's exit code, reported. */
static int read_capture(const char *path, const pyu_cmd_opts *o,
                        pyu_profile **out)
{
    char msg[512], why[400];
    *out = NULL;
    FILE *in = fopen(path, "rb");
    if (!in) {
        snprintf(msg, sizeof msg, "cannot read %s: %s", path,
                 strerror(errno));
        return fail(msg, PYU_EXIT_TARGET);
    }
    pyu_profile *p = pyu_profile_new();
    if (!p) {
        fclose(in);
        return fail("out of memory", PYU_EXIT_INTERNAL);
    }
    pyu_capture_filter f = {
        .thread = o->thread,
        .pid = o->only_pid,
        .mode = o->mode_given ? o->mode : -1,
        .from_ns = (uint64_t)(o->from * 1e9),
        .to_ns = (uint64_t)(o->to * 1e9),
    };
    int rc = pyu_capture_read(in, &f, p, why, sizeof why);
    fclose(in);
    if (rc < 0) {
        pyu_profile_free(p);
        snprintf(msg, sizeof msg, "%s: %s", path, why);
        return fail(msg, rc == -PYU_E_NOMEM   ? PYU_EXIT_INTERNAL
                         : rc == -PYU_E_INVAL ? PYU_EXIT_USAGE
                                              : PYU_EXIT_TARGET);
    }
    if (why[0])
        fprintf(stderr, "pyunwind: note: %s: %s\n", path, why);
    *out = p;
    return PYU_EXIT_OK;
}

static int run_report(const pyu_cmd_opts *o)
{
    char msg[512];
    pyu_profile *p, *base = NULL;
    int ex = pyu_cmd_output_ready(o, msg, sizeof msg);
    if (ex != PYU_EXIT_OK)
        return fail(msg, ex);
    ex = read_capture(o->capture, o, &p);
    if (ex == PYU_EXIT_OK && o->diff)
        ex = read_capture(o->diff, o, &base);
    if (ex == PYU_EXIT_OK) {
        ex = pyu_cmd_write_profile(p, base, o, stdout, msg, sizeof msg);
        if (ex != PYU_EXIT_OK)
            fail(msg, ex);
        else
            wrote(o);
    }
    pyu_profile_free(p);
    pyu_profile_free(base);
    return ex;
}

static const char overview[] =
    "usage: pyunwind dump [OPTIONS] PID | --core CORE   Python stacks\n"
    "       pyunwind tasks [OPTIONS] PID | --core CORE  asyncio tasks\n"
    "       pyunwind sample [OPTIONS] PID | -- PROGRAM  sampling profiler\n"
    "       pyunwind report [OPTIONS] CAPTURE           a profile from a\n"
    "                                                   capture\n"
    "       pyunwind serve [OPTIONS] PID... | --all     pprof endpoints over\n"
    "                                                   HTTP\n"
    "       pyunwind --version\n"
    "`pyunwind COMMAND --help` lists a command's options.\n"
    "\n"
    "Exit codes: 0 done; 1 internal failure (out of memory, the output\n"
    "cannot be written); 2 bad command line; 3 the target cannot be read;\n"
    "4 not a CPython pyunwind reads; 5 written, but some stacks or tasks\n"
    "could not be read whole; 6 tasks --tree: the await graph has a cycle.\n"
    "sample -- PROGRAM exits with the program's status (docs/exit-codes.md).\n";

/* py-spy's words, one table: each either maps onto pyunwind's spelling,
 * which takes its place on the command line (a value after it kept), or
 * is answered with that spelling.  Words after `--` are PROGRAM's. */
static const struct alias {
    const char *cmd;  /* the command it is an option of; NULL: a command */
    const char *word; /* as typed ("--pid", or "--pid=N" taken apart) */
    const char *to[3]; /* what takes its place; {NULL} with positional: its
                         value alone (a PID); {NULL} without: dropped */
    bool value;       /* it takes a value (the next word, or after '=') */
    bool positional;  /* ... which stands alone */
    const char *no;   /* when set: refused, with this answer */
} aliases[] = {
    {NULL, "record", {"sample"}, false, false, NULL},
    {NULL, "top", {"sample", "--live"}, false, false, NULL},
    {"sample", "--pid", {NULL}, true, true, NULL},
    {"sample", "-p", {NULL}, true, true, NULL},
    {"sample", "--rate", {"-r"}, true, false, NULL},
    {"sample", "--duration", {"-d"}, true, false, NULL},
    {"sample", "--gil", {"--mode", "gil"}, false, false, NULL},
    {"sample", "--idle", {"--mode", "wall"}, false, false, NULL},
    {"sample", "--nonblocking", {NULL}, false, false, NULL},
    {"sample", "--flamegraph", {"--format", "flamegraph"}, false, false,
     NULL},
    {"sample", "-s", {"--subprocesses"}, false, false, NULL},
    {"sample", "-n", {"--native"}, false, false, NULL},
    {"sample", "--threads", {NULL}, false, false,
     "every profile keeps each thread's stacks apart (collapsed: tid:N "
     "first); --thread TID keeps one"},
    {"sample", "--function", {NULL}, false, false,
     "--format top lists functions (self and total)"},
    {"dump", "--pid", {NULL}, true, true, NULL},
    {"dump", "-p", {NULL}, true, true, NULL},
    {"dump", "-n", {"--native"}, false, false, NULL},
    {"dump", "-l", {"--locals"}, false, false, NULL},
};

/* argv with py-spy's words in pyunwind's spelling (aliases), into *out
 * (owned by the caller; the strings are argv's or static): the count, or
 * -1 with msg set (a word answered, or out of memory). */
static int spelled(int argc, char **argv, char ***out, char *msg,
                   size_t msglen)
{
    char **v = malloc(((size_t)argc * 3 + 1) * sizeof *v);
    if (!v) {
        snprintf(msg, msglen, "out of memory");
        return -1;
    }
    int n = 0;
    const char *cmd = NULL;
    bool program = false; /* (after --: PROGRAM's words) */
    for (int i = 0; i < argc; i++) {
        const char *w = argv[i];
        const struct alias *a = NULL;
        size_t len = strcspn(w, "=");
        for (size_t k = 0; !program && i > 0 && !a &&
                           k < sizeof aliases / sizeof aliases[0]; k++) {
            const struct alias *x = &aliases[k];
            bool here = x->cmd ? cmd && strcmp(x->cmd, cmd) == 0
                               : i == 1;
            if (here && strlen(x->word) == len &&
                strncmp(w, x->word, len) == 0 && (x->value || !w[len]))
                a = x;
        }
        if (i == 1)
            cmd = a ? a->to[0] : w;
        program |= strcmp(w, "--") == 0 && cmd;
        if (!a) {
            v[n++] = argv[i];
            continue;
        }
        if (a->no) {
            snprintf(msg, msglen, "'%s' is py-spy's: %s", a->word, a->no);
            free(v);
            return -1;
        }
        for (int k = 0; k < 3 && a->to[k]; k++)
            v[n++] = (char *)a->to[k];
        if (a->value && w[len] == '=') {
            v[n++] = (char *)w + len + 1;
        } else if (a->value && i + 1 < argc) {
            v[n++] = argv[++i];
        } else if (a->value) {
            snprintf(msg, msglen, "option '%s' needs a value", w);
            free(v);
            return -1;
        }
    }
    v[n] = NULL;
    *out = v;
    return n;
}

static int dispatch(int argc, char **argv);

int main(int argc, char **argv)
{
    char **spelt = NULL, msg[512];
    if (argc >= 2 && (argc = spelled(argc, argv, &spelt, msg,
                                      sizeof msg)) < 0)
        return fail(msg, PYU_EXIT_USAGE);
    int ex = dispatch(argc, spelt ? spelt : argv);
    free(spelt);
    return ex;
}

static int dispatch(int argc, char **argv)
{
    if (argc < 2) {
        fputs(overview, stderr);
        return PYU_EXIT_USAGE;
    }
    if (strcmp(argv[1], "--version") == 0) {
        printf("pyunwind %s\n", PYUNWIND_VERSION);
        return PYU_EXIT_OK;
    }
    if (strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0) {
        fputs(overview, stdout);
        return PYU_EXIT_OK;
    }
    if (strcmp(argv[1], "dump") == 0)
        return run(PYU_CMD_DUMP, argc - 1, argv + 1);
    if (strcmp(argv[1], "tasks") == 0)
        return run(PYU_CMD_TASKS, argc - 1, argv + 1);
    if (strcmp(argv[1], "sample") == 0)
        return run(PYU_CMD_SAMPLE, argc - 1, argv + 1);
    if (strcmp(argv[1], "serve") == 0)
        return pyu_cmd_serve(argc - 1, argv + 1);
    if (strcmp(argv[1], "report") == 0)
        return run(PYU_CMD_REPORT, argc - 1, argv + 1);
    fprintf(stderr, "pyunwind: error: unknown command '%s' (try: dump, "
                    "tasks, sample, report, serve)\n",
            argv[1]);
    return PYU_EXIT_USAGE;
}
