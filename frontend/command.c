/* Options, help and execution of the commands shared by the CLI and the
 * debugger plugins (see command.h). */
#include "command.h"

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#define CLI_ONLY 1u

enum {
    OPT_JSON = 256,
    OPT_CORE,
    OPT_EXE,
    OPT_SYSROOT,
    OPT_NOSRC,
    OPT_NONBLOCK,
    OPT_THREAD,
    OPT_VERBOSE,
};

static const struct {
    struct option opt;
    unsigned where;
} dump_opts[] = {
    {{"json", no_argument, NULL, OPT_JSON}, 0},
    {{"output", required_argument, NULL, 'o'}, 0},
    {{"thread", required_argument, NULL, OPT_THREAD}, 0},
    {{"no-source", no_argument, NULL, OPT_NOSRC}, 0},
    {{"verbose", no_argument, NULL, OPT_VERBOSE}, 0},
    {{"help", no_argument, NULL, 'h'}, 0},
    {{"nonblocking", no_argument, NULL, OPT_NONBLOCK}, CLI_ONLY},
    {{"core", required_argument, NULL, OPT_CORE}, CLI_ONLY},
    {{"exe", required_argument, NULL, OPT_EXE}, CLI_ONLY},
    {{"sysroot", required_argument, NULL, OPT_SYSROOT}, CLI_ONLY},
};
#define NOPTS (sizeof dump_opts / sizeof dump_opts[0])

static const char cli_help[] =
    "usage: pyunwind dump [OPTIONS] PID\n"
    "       pyunwind dump [OPTIONS] --core CORE [--exe PYTHON] [--sysroot DIR]\n"
    "       pyunwind --version\n"
    "\n"
    "Prints the Python stack of every thread of a CPython 3.13-3.15 process\n"
    "or core file, read from outside the process.\n"
    "\n"
    "  --json          print JSON (docs/json.md) instead of text\n"
    "  -o, --output FILE  write to FILE instead of standard output\n"
    "  --thread TID    only the thread with this native id (LWP) or\n"
    "                  Python ident\n"
    "  --no-source     do not print source lines\n"
    "  --verbose       say on standard error how the target was read\n"
    "  --nonblocking   do not stop the process while reading it\n"
    "  --core CORE     read an ELF core file instead of a live process\n"
    "  --exe PYTHON    the executable the core was written from, when it\n"
    "                  is not where the core says\n"
    "  --sysroot DIR   read the files the core names below DIR\n"
    "  -h, --help      print this help\n";

static const char debugger_help[] =
    "Print the Python stack of every thread of the debugged CPython.\n"
    "usage: py-dump [--json] [-o FILE] [--thread TID] [--no-source] "
    "[--verbose]\n"
    "\n"
    "Works on a live process (attached or started here), on a core file\n"
    "and on a remote target, with or without debug symbols (CPython\n"
    "3.13-3.15, GIL and free-threaded).  The output is what\n"
    "`pyunwind dump` prints for the same process.\n"
    "\n"
    "  --json          print JSON (docs/json.md) instead of text\n"
    "  -o, --output FILE  write to FILE instead of the debugger's output\n"
    "  --thread TID    only the thread with this native id (LWP) or\n"
    "                  Python ident\n"
    "  --no-source     do not print source lines\n"
    "  --verbose       also say how the target's memory was read\n"
    "  -h, --help      print this help\n";

const char *pyu_cmd_dump_help(enum pyu_cmd_frontend fe)
{
    return fe == PYU_CMD_CLI ? cli_help : debugger_help;
}

const char *const *pyu_cmd_dump_options(enum pyu_cmd_frontend fe)
{
    static const char *const cli[] = {
        "--json", "--output", "--thread", "--no-source", "--verbose",
        "--help", "--nonblocking", "--core", "--exe", "--sysroot", NULL};
    static const char *const dbg[] = {
        "--json", "--output", "--thread", "--no-source", "--verbose",
        "--help", NULL};
    return fe == PYU_CMD_CLI ? cli : dbg;
}

static int usage(char *msg, size_t msglen, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, msglen, fmt, ap);
    va_end(ap);
    return PYU_EXIT_USAGE;
}

static int parse_u64(const char *arg, uint64_t *v)
{
    char *end;
    errno = 0;
    if (*arg == '-' || *arg == '+')
        return -1;
    unsigned long long x = strtoull(arg, &end, 0);
    if (errno || end == arg || *end || x == 0)
        return -1;
    *v = x;
    return 0;
}

int pyu_cmd_dump_parse(pyu_cmd_dump *o, enum pyu_cmd_frontend fe, int argc,
                       char **argv, char *msg, size_t msglen)
{
    struct option longopts[NOPTS + 1];
    size_t n = 0;
    for (size_t i = 0; i < NOPTS; i++)
        if (fe == PYU_CMD_CLI || !(dump_opts[i].where & CLI_ONLY))
            longopts[n++] = dump_opts[i].opt;
    memset(&longopts[n], 0, sizeof longopts[n]);
    const char *name = fe == PYU_CMD_CLI ? "pyunwind dump" : "py-dump";

    memset(o, 0, sizeof *o);
    optind = 0; /* GNU: start over, reinitialising getopt's state */
    opterr = 0; /* our own one-line messages */
    int c;
    while ((c = getopt_long(argc, argv, ":o:h", longopts, NULL)) != -1) {
        switch (c) {
        case OPT_JSON: o->json = true; break;
        case OPT_VERBOSE: o->verbose = true; break;
        case OPT_CORE: o->core = optarg; break;
        case OPT_EXE: o->exe = optarg; break;
        case OPT_SYSROOT: o->sysroot = optarg; break;
        case OPT_NOSRC: o->text_flags |= PYU_TEXT_NO_SOURCE; break;
        case OPT_NONBLOCK: o->open_flags |= PYU_OPEN_NONBLOCKING; break;
        case 'o': o->output = optarg; break;
        case 'h': o->help = true; return PYU_EXIT_OK;
        case OPT_THREAD:
            if (parse_u64(optarg, &o->thread) < 0)
                return usage(msg, msglen, "'%s' is not a thread id (give the "
                             "native id shown as LWP, or the Python ident)",
                             optarg);
            break;
        case ':':
            return usage(msg, msglen, "option '%s' needs a value (see %s "
                         "--help)", argv[optind - 1], name);
        default:
            return usage(msg, msglen, "unknown option '%s' (see %s --help)",
                         argv[optind - 1], name);
        }
    }
    if (fe == PYU_CMD_DEBUGGER) {
        if (optind != argc)
            return usage(msg, msglen, "unexpected argument '%s' (py-dump "
                         "reads the debugger's current target; see py-dump "
                         "--help)", argv[optind]);
        return PYU_EXIT_OK;
    }
    if (o->core) {
        if (optind != argc)
            return usage(msg, msglen, "give either a PID or --core, not both");
        return PYU_EXIT_OK;
    }
    if (optind + 1 != argc)
        return usage(msg, msglen, "%s (see pyunwind dump --help)",
                     optind == argc ? "give a process id or --core CORE"
                                    : "give one process id");
    char *end;
    errno = 0;
    long pid = strtol(argv[optind], &end, 10);
    if (errno || *end || pid <= 0 || pid > 0x3fffffff)
        return usage(msg, msglen, "'%s' is not a process id", argv[optind]);
    o->pid = (int)pid;
    if (o->exe || o->sysroot)
        return usage(msg, msglen, "--exe and --sysroot go with --core");
    return PYU_EXIT_OK;
}

int pyu_cmd_exit_for(int rc)
{
    switch (rc < 0 ? -rc : rc) {
    case PYU_E_OK:
        return PYU_EXIT_OK;
    case PYU_E_NOMEM:
        return PYU_EXIT_INTERNAL;
    case PYU_E_NOPROC:
    case PYU_E_PERM:
    case PYU_E_BADCORE:
    case PYU_E_IO:
    case PYU_E_FAULT:
    case PYU_E_INVAL:
    case PYU_E_CORRUPT:
        return PYU_EXIT_TARGET;
    default:
        return PYU_EXIT_NOTPY;
    }
}

static bool is_torn(int rc, const pyu_dump *d)
{
    if (rc == -PYU_E_FAULT || rc == -PYU_E_CORRUPT)
        return true;
    for (size_t i = 0; rc == 0 && i < d->nthreads; i++)
        if (d->threads[i].error)
            return true;
    return false;
}

static void describe(pyu_session *s, const char *source, FILE *diag)
{
    pyu_python_info py;
    fprintf(diag, "pyunwind: reading %s\n", source);
    if (pyu_python(s, &py) == 0)
        fprintf(diag, "pyunwind: CPython %s%s, _PyRuntime at 0x%" PRIx64
                "%s%s\n", py.version, py.free_threaded ? " free-threaded" : "",
                py.runtime_addr, *py.found_in ? " in " : "", py.found_in);
}

int pyu_cmd_dump_run(pyu_session *s, const pyu_cmd_dump *o, bool retry_torn,
                     const char *source, FILE *out, FILE *diag, char *msg,
                     size_t msglen)
{
    pyu_dump *d = NULL;
    int rc;
    if (o->verbose && diag)
        describe(s, source, diag);
    /* A running process (--nonblocking, or one a debugger holds) can
     * change under the reader: a torn read is retried a few times. */
    for (int attempt = 0;; attempt++) {
        rc = pyu_dump_take(s, &d);
        if (!retry_torn || !is_torn(rc, d) || attempt == 4)
            break;
        pyu_dump_free(d);
        d = NULL;
    }
    if (rc < 0) {
        snprintf(msg, msglen, "%s", pyu_errmsg(s));
        return pyu_cmd_exit_for(rc);
    }

    /* --thread: a view of the dump with that one thread */
    pyu_dump view = *d;
    if (o->thread) {
        view.nthreads = 0;
        view.threads_truncated = 0;
        for (size_t i = 0; i < d->nthreads; i++) {
            const pyu_thread *t = &d->threads[i];
            if (t->native_thread_id == o->thread || t->thread_id == o->thread) {
                view.threads = &d->threads[i];
                view.nthreads = 1;
                break;
            }
        }
        if (!view.nthreads) {
            snprintf(msg, msglen, "no Python thread has native id or ident "
                     "%" PRIu64 " (%zu Python thread%s; see the dump without "
                     "--thread)", o->thread, d->nthreads,
                     d->nthreads == 1 ? "" : "s");
            pyu_dump_free(d);
            return PYU_EXIT_USAGE;
        }
    }

    int ex = PYU_EXIT_OK;
    FILE *f = out;
    if (o->output && !(f = fopen(o->output, "w"))) {
        snprintf(msg, msglen, "cannot write %s: %s", o->output,
                 strerror(errno));
        pyu_dump_free(d);
        return PYU_EXIT_INTERNAL;
    }
    rc = o->json ? pyu_dump_write_json(&view, f)
                 : pyu_dump_write_text(&view, f, o->text_flags);
    if (fflush(f) != 0)
        rc = -PYU_E_IO;
    if (f != out && fclose(f) != 0)
        rc = -PYU_E_IO;
    if (rc < 0) {
        snprintf(msg, msglen, "writing the dump to %s failed",
                 o->output ? o->output : "the output");
        ex = PYU_EXIT_INTERNAL;
    } else {
        for (size_t i = 0; i < view.nthreads; i++)
            if (view.threads[i].error)
                ex = PYU_EXIT_PARTIAL;
    }
    pyu_dump_free(d);
    return ex;
}
