/* Options, help and execution of the commands shared by the CLI and the
 * debugger plugins (see command.h). */
#include "command.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#define CLI_ONLY 1u   /* options that name a target */
#define DUMP 2u       /* the commands that take an option */
#define TASKS 4u
#define SAMPLE 8u
#define REPORT 16u
#define ALL (DUMP | TASKS | SAMPLE)

enum {
    OPT_JSON = 256,
    OPT_CORE,
    OPT_EXE,
    OPT_SYSROOT,
    OPT_NOSRC,
    OPT_NONBLOCK,
    OPT_THREAD,
    OPT_VERBOSE,
    OPT_TREE,
    OPT_ASYNC,
    OPT_MODE,
    OPT_GC,
    OPT_NATIVE,
    OPT_BLOCKING,
    OPT_READ_ONLY,
    OPT_NO_CACHE,
    OPT_OTHER_CPU,
    OPT_OPCODES,
    OPT_FORMAT,
    OPT_SORT,
    OPT_LIMIT,
    OPT_FROM,
    OPT_TO,
    OPT_DIFF,
    OPT_LIVE,
    OPT_LOCALS,
    OPT_NATIVE_LAST,
    OPT_SUBPROCESSES,
    OPT_PID,
};

static const struct {
    struct option opt;
    unsigned where;
} all_opts[] = {
    {{"json", no_argument, NULL, OPT_JSON}, DUMP | TASKS},
    {{"tree", no_argument, NULL, OPT_TREE}, TASKS},
    {{"output", required_argument, NULL, 'o'}, ALL | REPORT},
    {{"thread", required_argument, NULL, OPT_THREAD}, DUMP | SAMPLE | REPORT},
    {{"no-source", no_argument, NULL, OPT_NOSRC}, DUMP},
    {{"async", no_argument, NULL, OPT_ASYNC}, DUMP | SAMPLE},
    {{"locals", no_argument, NULL, OPT_LOCALS}, DUMP},
    {{"duration", required_argument, NULL, 'd'}, SAMPLE},
    {{"rate", required_argument, NULL, 'r'}, SAMPLE},
    {{"mode", required_argument, NULL, OPT_MODE}, SAMPLE | REPORT},
    {{"gc", no_argument, NULL, OPT_GC}, SAMPLE},
    {{"native", no_argument, NULL, OPT_NATIVE}, DUMP | SAMPLE},
    {{"native-last", no_argument, NULL, OPT_NATIVE_LAST}, DUMP},
    {{"blocking", no_argument, NULL, OPT_BLOCKING}, SAMPLE},
    {{"read-only", no_argument, NULL, OPT_READ_ONLY}, SAMPLE},
    {{"no-cache", no_argument, NULL, OPT_NO_CACHE}, SAMPLE},
    {{"other-cpu", no_argument, NULL, OPT_OTHER_CPU}, SAMPLE},
    {{"opcodes", no_argument, NULL, OPT_OPCODES}, SAMPLE},
    {{"format", required_argument, NULL, OPT_FORMAT}, SAMPLE | REPORT},
    {{"sort", required_argument, NULL, OPT_SORT}, SAMPLE | REPORT},
    {{"limit", required_argument, NULL, OPT_LIMIT}, SAMPLE | REPORT},
    {{"verbose", no_argument, NULL, OPT_VERBOSE}, ALL},
    {{"help", no_argument, NULL, 'h'}, ALL | REPORT},
    {{"from", required_argument, NULL, OPT_FROM}, CLI_ONLY | REPORT},
    {{"to", required_argument, NULL, OPT_TO}, CLI_ONLY | REPORT},
    {{"diff", required_argument, NULL, OPT_DIFF}, CLI_ONLY | REPORT},
    {{"pid", required_argument, NULL, OPT_PID}, CLI_ONLY | REPORT},
    {{"live", no_argument, NULL, OPT_LIVE}, CLI_ONLY | SAMPLE},
    {{"nonblocking", no_argument, NULL, OPT_NONBLOCK}, CLI_ONLY | DUMP | TASKS},
    {{"subprocesses", no_argument, NULL, OPT_SUBPROCESSES},
     DUMP | TASKS | SAMPLE},
    {{"core", required_argument, NULL, OPT_CORE}, CLI_ONLY | DUMP | TASKS},
    {{"exe", required_argument, NULL, OPT_EXE}, CLI_ONLY | DUMP | TASKS},
    {{"sysroot", required_argument, NULL, OPT_SYSROOT}, CLI_ONLY | DUMP | TASKS},
};
#define NOPTS (sizeof all_opts / sizeof all_opts[0])

/* The options of dump and py-dump that choose what is shown. */
#define DUMP_OPTIONS                                                        \
    "  --thread TID    only the thread with this native id (LWP) or\n"      \
    "                  Python ident\n"                                      \
    "  --no-source     do not print source lines\n"                         \
    "  --async         continue a thread's stack through the asyncio tasks\n" \
    "                  awaiting its running task (CPython 3.14+)\n"         \
    "  --locals        each frame's arguments and local variables, with a\n" \
    "                  short repr of their values (read from memory)\n"     \
    "  --native        each thread's native stack too, with the Python\n"   \
    "                  frames in the eval loop's native frames that run them\n" \
    "  --native-last   the Python stacks, then only the native frames past\n" \
    "                  each one's innermost Python frame (a crash's view)\n" \

static const char cli_help[] =
    "usage: pyunwind dump [OPTIONS] PID...\n"
    "       pyunwind dump [OPTIONS] --core CORE [--exe PYTHON] [--sysroot DIR]\n"
    "       pyunwind --version\n"
    "\n"
    "Prints the Python stack of every thread of a CPython 3.9-3.15\n"
    "process or core file, read from outside the process; of each process\n"
    "in turn when several are given.\n"
    "\n"
    "  --json          print JSON (docs/json.md) instead of text\n"
    "  -o, --output FILE  write to FILE instead of standard output\n"
    DUMP_OPTIONS
    "  --verbose       say on standard error how the target was read\n"
    "  --nonblocking   do not stop the process while reading it\n"
    "  --subprocesses  each process's descendants that run CPython too\n"
    "                  (--json: an array of one object a process)\n"
    "  --core CORE     read an ELF core file instead of a live process\n"
    "  --exe PYTHON    the executable the core was written from, when it\n"
    "                  is not where the core says\n"
    "  --sysroot DIR   read the files the core names below DIR\n"
    "  -h, --help      print this help\n";

static const char cli_tasks_help[] =
    "usage: pyunwind tasks [OPTIONS] PID...\n"
    "       pyunwind tasks [OPTIONS] --core CORE [--exe PYTHON] [--sysroot DIR]\n"
    "\n"
    "Prints the asyncio tasks of a CPython 3.14+ process or core file: each\n"
    "task, its coroutine stack and the tasks awaiting it, as a table like\n"
    "`python -m asyncio ps`.\n"
    "\n"
    "  --tree          a tree like `python -m asyncio pstree` (exit 6 when\n"
    "                  the await graph has a cycle)\n"
    "  --json          print JSON (docs/json.md) instead of text\n"
    "  -o, --output FILE  write to FILE instead of standard output\n"
    "  --verbose       say on standard error how the target was read\n"
    "  --nonblocking   do not stop the process while reading it\n"
    "  --subprocesses  each process's descendants that run CPython too\n"
    "                  (--json: an array of one object a process)\n"
    "  --core CORE     read an ELF core file instead of a live process\n"
    "  --exe PYTHON    the executable the core was written from\n"
    "  --sysroot DIR   read the files the core names below DIR\n"
    "  -h, --help      print this help\n";

static const char debugger_tasks_help[] =
    "Print the asyncio tasks of the debugged CPython (3.14+).\n"
    "usage: py-tasks [--tree] [--json] [-o FILE] [--subprocesses] "
    "[--verbose]\n"
    "\n"
    "Each task, its coroutine stack and the tasks awaiting it, as a table\n"
    "like `python -m asyncio ps`, from a live process, a core file or a\n"
    "remote target.  The output is what `pyunwind tasks` prints.\n"
    "\n"
    "  --tree          a tree like `python -m asyncio pstree` (an error when\n"
    "                  the await graph has a cycle)\n"
    "  --json          print JSON (docs/json.md) instead of text\n"
    "  -o, --output FILE  write to FILE instead of the debugger's output\n"
    "  --verbose       also say how the target's memory was read\n"
    "  --subprocesses  the inferior's descendants that run CPython too, read\n"
    "                  by pid (a process on this machine; --json: an array)\n"
    "  -h, --help      print this help\n";

static const char debugger_help[] =
    "Print the Python stack of every thread of the debugged CPython.\n"
    "usage: py-dump [--json] [-o FILE] [--thread TID] [--no-source] "
    "[--async] [--locals]\n"
    "               [--native | --native-last] [--subprocesses] "
    "[--verbose]\n"
    "\n"
    "Works on a live process (attached or started here), on a core file\n"
    "and on a remote target, with or without debug symbols (CPython\n"
    "3.9-3.15, GIL and free-threaded).  The output is what\n"
    "`pyunwind dump` prints for the same process.\n"
    "\n"
    "  --json          print JSON (docs/json.md) instead of text\n"
    "  -o, --output FILE  write to FILE instead of the debugger's output\n"
    DUMP_OPTIONS
    "  --verbose       also say how the target's memory was read\n"
    "  --subprocesses  the inferior's descendants that run CPython too, read\n"
    "                  by pid (a process on this machine; --json: an array)\n"
    "  -h, --help      print this help\n";

/* (where a help text lists the formats: pyu_cmd_help() writes them from
 * the core's table) */
#define FORMATS "\001\n"
#define SAMPLE_OPTIONS                                                      \
    "\n"                                                                    \
    "  -d, --duration SECONDS  sample this long (default: until the target\n" \
    "                  exits or Ctrl-C)\n"                                   \
    "  -r, --rate RATE samples per second: N, Nhz, Nk, Nkhz, or max (as\n"   \
    "                  fast as it can; default 1000)\n"                      \
    "  --mode MODE     wall (every thread, default), cpu (threads on a CPU),\n"\
    "                  gil (the thread holding the GIL), exception (threads\n"\
    "                  raising or handling an exception)\n"                  \
    "  --thread TID    only the thread with this native id or Python ident\n"\
    "  --gc            a <GC> frame while a thread collects garbage\n"       \
    "  --native        a <native> frame where a thread runs C code\n"        \
    "  --async         a thread running an asyncio task: its stack goes on\n"\
    "                  through the tasks awaiting it (CPython 3.14+)\n"      \
    "  --blocking      stop the target for each sample (exact, slower)\n"    \
    "  --read-only     never write to the target (the frame cache then does\n"\
    "                  without CPython 3.15's last_profiled_frame anchor)\n" \
    "  --no-cache      no frame cache: read every stack whole\n"             \
    "  --other-cpu     never read the target from its own CPU (it is then\n" \
    "                  never switched out for a read, but calls shorter than\n"\
    "                  a microsecond are read less exactly)\n"              \
    "  --opcodes       each frame names the bytecode instruction it ran\n"  \
    "                  (json, raw and the heatmap show them)\n"             \
    FORMATS                                                              \
    "  --sort KEY      top: self (default), total or name\n"                 \
    "  --limit N       top: at most N rows (default 40; 0: all)\n"

static const char cli_sample_help[] =
    "usage: pyunwind sample [OPTIONS] PID...\n"
    "       pyunwind sample [OPTIONS] -- PROGRAM [ARGS...]\n"
    "\n"
    "Samples the Python stacks of a running CPython 3.9-3.15 process\n"
    "(or of PROGRAM, started here and profiled to its exit) and writes a\n"
    "profile; of every process given, into one profile.\n"
    "Ctrl-C ends the run and keeps the profile.\n"
    SAMPLE_OPTIONS
    "  --subprocesses  each process's descendants that run CPython too, found\n"
    "                  as they start (the run ends when the last one exits)\n"
    "  -o, --output FILE  write the profile to FILE instead of standard output\n"
    "                  (without --format, the format its name ends in: .html,\n"
    "                  .pprof, .pb.gz, .speedscope.json, .gecko.json, .json,\n"
    "                  .collapsed, .folded, .txt, .raw)\n"
    "  --live          a top-like view, redrawn 4 times a second while it\n"
    "                  samples: keys s/t/n sort by self, total or name, T\n"
    "                  shows the next thread (or all), P the next process\n"
    "                  (with several; T then its threads), q ends the run\n"
    "                  (the profile then goes to -o FILE, when given)\n"
    "  --verbose       say on standard error how the target was read and what\n"
    "                  the sampler did (reads, frame cache, anchors)\n"
    "  -h, --help      print this help\n";

static const char debugger_sample_help[] =
    "Sample the Python stacks of the debugged CPython for a while.\n"
    "usage: py-sample [OPTIONS]\n"
    "\n"
    "The inferior runs for the window and is stopped again at its end; a\n"
    "breakpoint or signal ends the window early.  The output is what\n"
    "`pyunwind sample` writes for the same process.\n"
    SAMPLE_OPTIONS
    "  -o, --output FILE  write the profile to FILE instead of the debugger's\n"
    "                  output\n"
    "                  (without --format, the format its name ends in: .html,\n"
    "                  .pprof, .pb.gz, .speedscope.json, .gecko.json, .json,\n"
    "                  .collapsed, .folded, .txt, .raw)\n"
    "  --subprocesses  the inferior's descendants that run CPython too, found\n"
    "                  as they start and read by pid (a local inferior,\n"
    "                  without --blocking)\n"
    "  --verbose       also say what the sampler did\n"
    "  -h, --help      print this help\n";

static const char report_help[] =
    "usage: pyunwind report [OPTIONS] CAPTURE\n"
    "\n"
    "Writes a profile from a capture that `pyunwind sample --format raw`\n"
    "wrote (also one cut short by a killed run), keeping what the options\n"
    "select.\n"
    "\n"
    FORMATS
    "  --pid PID       only the process PID (a capture of several processes)\n"
    "  --thread TID    only the thread with this native id or Python ident\n"
    "  --mode MODE     the capture's mode, or from a wall-mode capture gil\n"
    "                  (stacks holding the GIL) or exception\n"
    "  --from SECONDS  only samples taken this long after the start or later\n"
    "  --to SECONDS    only samples taken before this long after the start\n"
    "  --diff BASE     with --format flamegraph: the differential view\n"
    "                  against the capture BASE (same options applied)\n"
    "  --sort KEY      top: self (default), total or name\n"
    "  --limit N       top: at most N rows (default 40; 0: all)\n"
    "  -o, --output FILE  write to FILE instead of standard output\n"
    "                  (without --format, the format its name ends in: .html,\n"
    "                  .pprof, .pb.gz, .speedscope.json, .gecko.json, .json,\n"
    "                  .collapsed, .folded, .txt, .raw)\n"
    "  -h, --help      print this help\n";

/* The --format lines of a help text: each format with its summary,
 * wrapped to 78 columns under the option's text. */
static void format_lines(char *out, size_t cap)
{
    size_t n, at = 0, col = 0;
    const pyu_format *f = pyu_profile_formats(&n);
    for (size_t i = 0; i < n; i++) {
        char item[160];
        snprintf(item, sizeof item, "%s%s%s%s%s%s", f[i].name,
                 *f[i].summary || !i ? " (" : "", !i ? "default" : "",
                 !i && *f[i].summary ? ": " : "", f[i].summary,
                 *f[i].summary || !i ? ")" : "");
        size_t len = strlen(item) + (i + 1 < n ? 1 : 0);
        const char *lead = !i                      ? "  --format FORMAT "
                           : col + 1 + len > 78 ? "\n                  "
                                                : " ";
        at += (size_t)snprintf(out + at, cap - at, "%s%s%s", lead, item,
                               i + 1 < n ? "," : "\n");
        col = (!i || lead[0] == '\n' ? 18 : col + 1) + len;
        if (at >= cap)
            return;
    }
}

/* A help text with its format lines written in. */
static const char *with_formats(const char *text, char *buf, size_t cap)
{
    const char *mark = strchr(text, '\001');
    if (buf[0] || !mark)
        return buf[0] ? buf : text;
    char lines[1024];
    format_lines(lines, sizeof lines);
    snprintf(buf, cap, "%.*s%s%s", (int)(mark - text), text, lines,
             mark + 2);
    return buf;
}

const char *pyu_cmd_help(enum pyu_cmd_kind kind, enum pyu_cmd_frontend fe)
{
    static char bufs[3][8192];
    if (kind == PYU_CMD_REPORT)
        return with_formats(report_help, bufs[0], sizeof bufs[0]);
    if (kind == PYU_CMD_SAMPLE)
        return fe == PYU_CMD_CLI
                   ? with_formats(cli_sample_help, bufs[1], sizeof bufs[1])
                   : with_formats(debugger_sample_help, bufs[2],
                                  sizeof bufs[2]);
    if (kind == PYU_CMD_TASKS)
        return fe == PYU_CMD_CLI ? cli_tasks_help : debugger_tasks_help;
    return fe == PYU_CMD_CLI ? cli_help : debugger_help;
}

static bool accepts(unsigned where, enum pyu_cmd_kind kind,
                    enum pyu_cmd_frontend fe)
{
    static const unsigned bit[] = {DUMP, TASKS, SAMPLE, REPORT};
    if ((where & CLI_ONLY) && fe != PYU_CMD_CLI)
        return false;
    return (where & bit[kind]) != 0;
}

const char *const *pyu_cmd_options(enum pyu_cmd_kind kind,
                                   enum pyu_cmd_frontend fe)
{
    static char names[4][2][NOPTS + 1][16];
    static const char *lists[4][2][NOPTS + 1];
    const char **l = lists[kind][fe];
    if (!l[0]) {
        size_t n = 0;
        for (size_t i = 0; i < NOPTS; i++)
            if (accepts(all_opts[i].where, kind, fe)) {
                snprintf(names[kind][fe][n], 16, "--%s", all_opts[i].opt.name);
                l[n] = names[kind][fe][n];
                n++;
            }
        l[n] = NULL;
    }
    return l;
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

/* "N", "Nhz", "Nk", "Nkhz" (N may have a fraction), or "max" (0). */
static int parse_rate(const char *arg, double *hz)
{
    if (strcmp(arg, "max") == 0) {
        *hz = 0;
        return 0;
    }
    char *end;
    errno = 0;
    double v = strtod(arg, &end);
    if (errno || end == arg || !(v > 0))
        return -1;
    if (*end == 'k' || *end == 'K') {
        v *= 1000;
        end++;
    }
    if (strcasecmp(end, "hz") == 0)
        end += 2;
    if (*end || v > 1e6)
        return -1;
    *hz = v;
    return 0;
}

static const char *const mode_names[] = {"wall", "cpu", "gil", "exception",
                                         NULL};
static const char *const sort_names[] = {"self", "total", "name", NULL};
static int pick(const char *arg, const char *const *names)
{
    for (int i = 0; names[i]; i++)
        if (strcmp(arg, names[i]) == 0)
            return i;
    return -1;
}

const char *pyu_cmd_format_list(void)
{
    static char list[256];
    if (!list[0]) {
        size_t n, at = 0;
        const pyu_format *f = pyu_profile_formats(&n);
        for (size_t i = 0; i < n && at < sizeof list; i++)
            at += (size_t)snprintf(list + at, sizeof list - at, "%s%s",
                                   !i ? "" : i + 1 < n ? ", " : " or ",
                                   f[i].name);
    }
    return list;
}

bool pyu_cmd_format_is(const pyu_cmd_opts *o, const char *name)
{
    return o->format && strcmp(o->format->name, name) == 0;
}

/* A process id on the command line into o->pid.  core: the command reads
 * core files with --core (a file named in a PID's place is pointed
 * there). */
static int take_pid(pyu_cmd_opts *o, const char *arg, const char *core,
                    char *msg, size_t msglen)
{
    char *end;
    errno = 0;
    long pid = strtol(arg, &end, 10);
    if (errno || *end || pid <= 0 || pid > 0x3fffffff) {
        if (core && access(arg, F_OK) == 0)
            return usage(msg, msglen, "'%s' is not a process id: to read "
                         "it as a core file, %s --core %s", arg, core, arg);
        return usage(msg, msglen, "'%s' is not a process id", arg);
    }
    o->pid = (int)pid;
    return PYU_EXIT_OK;
}

/* The PIDs that end a command line (argv[optind...]) into o->targets, each
 * once (a PID named twice is read once), the first also into o->pid.
 * core: as take_pid()'s. */
static int take_pids(pyu_cmd_opts *o, int argc, char **argv,
                     const char *core, char *msg, size_t msglen)
{
    int n = 0;
    for (int i = optind; i < argc; i++) {
        if (take_pid(o, argv[i], core, msg, msglen) != PYU_EXIT_OK)
            return PYU_EXIT_USAGE;
        int pid = o->pid;
        bool seen = false;
        for (int j = optind; j < optind + n && !seen; j++)
            seen = (int)strtol(argv[j], NULL, 10) == pid;
        if (!seen)
            argv[optind + n++] = argv[i];
    }
    take_pid(o, argv[optind], core, msg, msglen);
    o->targets = argv + optind;
    o->ntargets = n;
    if (o->thread && o->ntargets > 1)
        return usage(msg, msglen, "--thread names a thread of one process: "
                     "give one PID");
    return PYU_EXIT_OK;
}

/* Whether format f is an HTML page. */
static bool html(const pyu_format *f)
{
    return strcmp(f->name, "flamegraph") == 0 ||
           strcmp(f->name, "heatmap") == 0;
}

/* A binary format, or an HTML page, with no -o: refused on a terminal,
 * and in a debugger (whose output is text). */
static bool binary_to_terminal(const pyu_cmd_opts *o,
                               enum pyu_cmd_frontend fe)
{
    return (o->format->binary || html(o->format)) && !o->output &&
           (fe == PYU_CMD_DEBUGGER || isatty(STDOUT_FILENO));
}

/* The formats file names end with, the longest ends first; a family
 * (html, json) takes any format of it. */
static const struct {
    const char *ext, *format, *family;
} exts[] = {
    {".speedscope.json", "speedscope", NULL},
    {".gecko.json", "gecko", NULL},
    {".html", "flamegraph", "html"},
    {".htm", "flamegraph", "html"},
    {".pprof", "pprof", NULL},
    {".pb.gz", "pprof", NULL},
    {".collapsed", "collapsed", NULL},
    {".folded", "collapsed", NULL},
    {".txt", "collapsed", NULL},
    {".raw", "raw", NULL},
    {".json", "json", "json"},
};

static bool in_family(const char *family, const char *format)
{
    if (strcmp(family, "html") == 0)
        return strcmp(format, "flamegraph") == 0 ||
               strcmp(format, "heatmap") == 0;
    return strcmp(format, "json") == 0 || strcmp(format, "speedscope") == 0 ||
           strcmp(format, "gecko") == 0;
}

/* -o FILE's extension: the format when --format was not given; a warning
 * (o->format_warning) when it was and the extension names another. */
static void format_of_output(pyu_cmd_opts *o, bool given)
{
    size_t len = o->output ? strlen(o->output) : 0;
    for (size_t i = 0; len && i < sizeof exts / sizeof exts[0]; i++) {
        size_t n = strlen(exts[i].ext);
        if (len <= n || strcasecmp(o->output + len - n, exts[i].ext) != 0)
            continue;
        if (!given)
            o->format = pyu_profile_format(exts[i].format);
        else if (exts[i].family ? !in_family(exts[i].family, o->format->name)
                                : strcmp(exts[i].format,
                                         o->format->name) != 0)
            snprintf(o->format_warning, sizeof o->format_warning,
                     "%s is written as --format %s, though its name ends "
                     "in %s (--format %s)",
                     o->output, o->format->name, exts[i].ext,
                     exts[i].format);
        return;
    }
}

/* The rest of a sample command line: a PID or -- PROGRAM (CLI). */
static int check_sample(pyu_cmd_opts *o, enum pyu_cmd_frontend fe, int argc,
                        char **argv, const char *name, char *msg,
                        size_t msglen)
{
    if (o->async)
        o->sample_flags |= PYU_SAMPLE_ASYNC;
    if ((o->sample_flags & PYU_SAMPLE_ASYNC) &&
        (o->sample_flags & PYU_SAMPLE_NATIVE))
        return usage(msg, msglen, "--async and --native do not go together");
    if (binary_to_terminal(o, fe))
        return usage(msg, msglen, "--format %s is %s: write it to a "
                     "file with -o FILE%s", o->format->name,
                     html(o->format) ? "an HTML page" : "binary",
                     fe == PYU_CMD_CLI ? " (or to a pipe)" : "");
    if (fe == PYU_CMD_DEBUGGER) {
        if (optind != argc)
            return usage(msg, msglen, "unexpected argument '%s' (%s "
                         "samples the debugger's current target; see %s "
                         "--help)", argv[optind], name, name);
        return PYU_EXIT_OK;
    }
    if (o->live && (!isatty(STDOUT_FILENO) || !isatty(STDIN_FILENO)))
        return usage(msg, msglen, "--live draws on a terminal: run it on "
                     "one (its profile can still go to -o FILE)");
    if (optind < argc && strcmp(argv[optind - 1], "--") == 0) {
        o->launch = argv + optind;
        o->nlaunch = argc - optind;
        return PYU_EXIT_OK;
    }
    if (optind == argc)
        return usage(msg, msglen, "give a process id, or -- PROGRAM "
                     "[ARGS...] (see %s --help)", name);
    return take_pids(o, argc, argv, NULL, msg, msglen);
}

int pyu_cmd_parse(pyu_cmd_opts *o, enum pyu_cmd_kind kind,
                  enum pyu_cmd_frontend fe, int argc, char **argv, char *msg,
                  size_t msglen)
{
    struct option longopts[NOPTS + 1];
    size_t n = 0;
    for (size_t i = 0; i < NOPTS; i++)
        if (accepts(all_opts[i].where, kind, fe))
            longopts[n++] = all_opts[i].opt;
    memset(&longopts[n], 0, sizeof longopts[n]);
    static const char *const names[4][2] = {
        {"pyunwind dump", "py-dump"},
        {"pyunwind tasks", "py-tasks"},
        {"pyunwind sample", "py-sample"},
        {"pyunwind report", "pyunwind report"}};
    const char *name = names[kind][fe];

    memset(o, 0, sizeof *o);
    o->kind = kind;
    o->rate = 1000;
    o->limit = 40;
    o->format = pyu_profile_format("top");
    optind = 0; /* GNU: start over, reinitialising getopt's state */
    opterr = 0; /* our own one-line messages */
    int c;
    bool format_given = false;
    const char *shorts = kind == PYU_CMD_SAMPLE ? ":o:hd:r:" : ":o:h";
    while ((c = getopt_long(argc, argv, shorts, longopts, NULL)) != -1) {
        switch (c) {
        case OPT_JSON: o->json = true; break;
        case OPT_VERBOSE: o->verbose = true; break;
        case OPT_TREE: o->tree = true; break;
        case OPT_ASYNC: o->async = true; break;
        case OPT_LOCALS: o->locals = true; break;
        case OPT_CORE: o->core = optarg; break;
        case OPT_EXE: o->exe = optarg; break;
        case OPT_SYSROOT: o->sysroot = optarg; break;
        case OPT_NOSRC: o->text_flags |= PYU_TEXT_NO_SOURCE; break;
        case OPT_NONBLOCK: o->open_flags |= PYU_OPEN_NONBLOCKING; break;
        case OPT_SUBPROCESSES: o->subprocesses = true; break;
        case 'o': o->output = optarg; break;
        case 'h': o->help = true; return PYU_EXIT_OK;
        case OPT_GC: o->sample_flags |= PYU_SAMPLE_GC; break;
        case OPT_NATIVE:
            o->sample_flags |= PYU_SAMPLE_NATIVE;
            o->native = true;
            break;
        case OPT_NATIVE_LAST:
            o->native = true;
            o->text_flags |= PYU_TEXT_NATIVE_LAST;
            break;
        case OPT_BLOCKING: o->sample_flags |= PYU_SAMPLE_BLOCKING; break;
        case OPT_READ_ONLY: o->sample_flags |= PYU_SAMPLE_READ_ONLY; break;
        case OPT_NO_CACHE: o->sample_flags |= PYU_SAMPLE_NO_CACHE; break;
        case OPT_OTHER_CPU: o->other_cpu = true; break;
        case OPT_OPCODES: o->sample_flags |= PYU_SAMPLE_OPCODES; break;
        case 'd': {
            char *end;
            errno = 0;
            o->duration = strtod(optarg, &end);
            if (errno || end == optarg || *end || !(o->duration > 0) ||
                o->duration > 1e7)
                return usage(msg, msglen, "'%s' is not a duration in seconds "
                             "(for example 10 or 0.5)", optarg);
            break;
        }
        case 'r':
            if (parse_rate(optarg, &o->rate) < 0)
                return usage(msg, msglen, "'%s' is not a rate (for example "
                             "100, 250hz, 10k, 20khz or max; at most 1MHz)",
                             optarg);
            break;
        case OPT_MODE:
            if ((o->mode = pick(optarg, mode_names)) < 0)
                return usage(msg, msglen, "'%s' is not a mode (wall, cpu, "
                             "gil or exception)", optarg);
            o->mode_given = true;
            break;
        case OPT_DIFF: o->diff = optarg; break;
        case OPT_LIVE: o->live = true; break;
        case OPT_FROM:
        case OPT_TO: {
            char *end;
            errno = 0;
            double v = strtod(optarg, &end);
            if (errno || end == optarg || *end || !(v >= 0) || v > 1e7)
                return usage(msg, msglen, "'%s' is not a time in seconds "
                             "since the start (for example 2.5)", optarg);
            *(c == OPT_FROM ? &o->from : &o->to) = v;
            break;
        }
        case OPT_FORMAT:
            format_given = true;
            if (!(o->format = pyu_profile_format(optarg)))
                return usage(msg, msglen, "'%s' is not a format (%s)",
                             optarg, pyu_cmd_format_list());
            break;
        case OPT_SORT:
            if ((o->sort = pick(optarg, sort_names)) < 0)
                return usage(msg, msglen, "'%s' is not a sort key (self, "
                             "total or name)", optarg);
            break;
        case OPT_LIMIT: {
            uint64_t v = 0;
            if (strcmp(optarg, "0") != 0 && parse_u64(optarg, &v) < 0)
                return usage(msg, msglen, "'%s' is not a number of rows",
                             optarg);
            o->limit = (size_t)v;
            break;
        }
        case OPT_PID: {
            uint64_t v;
            if (parse_u64(optarg, &v) < 0 || v > INT_MAX)
                return usage(msg, msglen, "'%s' is not a process id",
                             optarg);
            o->only_pid = (int)v;
            break;
        }
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
    if (o->thread && o->subprocesses)
        return usage(msg, msglen, "--thread names a thread of one process: "
                     "not with --subprocesses");
    if (kind == PYU_CMD_SAMPLE || kind == PYU_CMD_REPORT) {
        size_t len = o->output ? strlen(o->output) : 0;
        if (!format_given && len > 4 &&
            strcasecmp(o->output + len - 4, ".svg") == 0)
            return usage(msg, msglen, "pyunwind writes no SVG: its flame "
                         "graph is an HTML page (-o NAME.html), and "
                         "flamegraph.pl makes an SVG of --format collapsed");
        format_of_output(o, format_given);
    }
    if (kind == PYU_CMD_SAMPLE)
        return check_sample(o, fe, argc, argv, name, msg, msglen);
    if (kind == PYU_CMD_REPORT) {
        if (binary_to_terminal(o, fe))
            return usage(msg, msglen, "--format %s is %s: write it to a "
                         "file with -o FILE (or to a pipe)",
                         o->format->name,
                         html(o->format) ? "an HTML page" : "binary");
        if (o->to && o->to <= o->from)
            return usage(msg, msglen, "--to must come after --from");
        if (o->diff && !pyu_cmd_format_is(o, "flamegraph"))
            return usage(msg, msglen, "--diff goes with --format "
                         "flamegraph");
        if (optind + 1 != argc)
            return usage(msg, msglen, "give one capture file (see %s "
                         "--help)", name);
        o->capture = argv[optind];
        return PYU_EXIT_OK;
    }
    if (kind == PYU_CMD_DUMP && o->native && o->async)
        return usage(msg, msglen, "--async and --native do not go together");
    if (kind == PYU_CMD_DUMP && o->native &&
        (o->open_flags & PYU_OPEN_NONBLOCKING))
        return usage(msg, msglen, "--native needs the process stopped: "
                     "leave out --nonblocking");
    if (fe == PYU_CMD_DEBUGGER) {
        if (optind != argc)
            return usage(msg, msglen, "unexpected argument '%s' (%s "
                         "reads the debugger's current target; see %s "
                         "--help)", argv[optind], name, name);
        return PYU_EXIT_OK;
    }
    if (o->core) {
        if (optind != argc)
            return usage(msg, msglen, "give either a PID or --core, not both");
        if (o->subprocesses)
            return usage(msg, msglen, "--subprocesses reads live processes: "
                         "not with --core");
        return PYU_EXIT_OK;
    }
    if (optind == argc)
        return usage(msg, msglen, "give a process id or --core CORE (see "
                     "%s --help)", name);
    if (o->exe || o->sysroot)
        return usage(msg, msglen, "--exe and --sysroot go with --core");
    return take_pids(o, argc, argv, name, msg, msglen);
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
    case PYU_E_NOTFOUND: /* (py-print: a name, attribute or key) */
        return PYU_EXIT_USAGE;
    default:
        return PYU_EXIT_NOTPY;
    }
}

int pyu_cmd_retry(bool retry, int (*attempt)(void *arg), void *arg)
{
    int rc;
    for (int n = 1;; n++) {
        rc = attempt(arg);
        bool torn = rc == PYU_CMD_TORN || rc == -PYU_E_FAULT ||
                    rc == -PYU_E_CORRUPT;
        if (!retry || !torn || n == 5)
            break;
    }
    return rc == PYU_CMD_TORN ? 0 : rc;
}

static int no_thread(char *msg, size_t msglen, uint64_t tid,
                     size_t nthreads)
{
    snprintf(msg, msglen, "no Python thread has native id or ident %" PRIu64
             " (%zu Python thread%s; see the dump without --thread)",
             tid, nthreads, nthreads == 1 ? "" : "s");
    return PYU_EXIT_USAGE;
}

int pyu_cmd_dump_thread(const pyu_dump *d, uint64_t tid, pyu_dump *view,
                        char *msg, size_t msglen)
{
    *view = *d;
    if (!tid)
        return PYU_EXIT_OK;
    view->threads_truncated = 0;
    for (size_t i = 0; i < d->nthreads; i++) {
        const pyu_thread *t = &d->threads[i];
        if (t->native_thread_id == tid || t->thread_id == tid) {
            view->threads = &d->threads[i];
            view->nthreads = 1;
            return PYU_EXIT_OK;
        }
    }
    return no_thread(msg, msglen, tid, d->nthreads);
}

/* One attempt at a dump or a task list (pyu_cmd_retry). */
typedef struct taking {
    pyu_session *s;
    unsigned flags;
    pyu_dump *d;
    pyu_tasks *t;
} taking;

static int take_dump(void *arg)
{
    taking *k = arg;
    pyu_dump_free(k->d);
    k->d = NULL;
    int rc = pyu_dump_take(k->s, k->flags, &k->d);
    for (size_t i = 0; rc == 0 && i < k->d->nthreads; i++)
        if (k->d->threads[i].error)
            return PYU_CMD_TORN;
    return rc;
}

static int take_tasks(void *arg)
{
    taking *k = arg;
    pyu_tasks_free(k->t);
    k->t = NULL;
    int rc = pyu_tasks_take(k->s, &k->t);
    for (size_t i = 0; rc == 0 && i < k->t->ntasks; i++)
        if (k->t->tasks[i].error)
            return PYU_CMD_TORN;
    return rc;
}

int pyu_cmd_take_dump(pyu_session *s, unsigned flags, bool retry,
                      pyu_dump **out)
{
    taking k = {s, flags, NULL, NULL};
    int rc = pyu_cmd_retry(retry, take_dump, &k);
    *out = k.d;
    return rc;
}

int pyu_cmd_take_tasks(pyu_session *s, bool retry, pyu_tasks **out)
{
    taking k = {s, 0, NULL, NULL};
    int rc = pyu_cmd_retry(retry, take_tasks, &k);
    *out = k.t;
    return rc;
}

static void describe(pyu_session *s, const char *source, FILE *diag)
{
    pyu_python_info py;
    pyu_process pr;
    fprintf(diag, "pyunwind: reading %s\n", source);
    if (pyu_python(s, &py) == 0 && pyu_target(s, &pr) == 0)
        fprintf(diag, "pyunwind: CPython %s%s, _PyRuntime at 0x%" PRIx64
                "%s%s\n", pr.python, pr.free_threaded ? " free-threaded" : "",
                py.runtime_addr, *py.found_in ? " in " : "", py.found_in);
}

/* Opens -o FILE, or takes out. */
static FILE *open_output(const pyu_cmd_opts *o, FILE *out, char *msg,
                         size_t msglen)
{
    FILE *f = out;
    if (o->output && !(f = fopen(o->output, "w")))
        snprintf(msg, msglen, "cannot write %s: %s", o->output,
                 strerror(errno));
    return f;
}

int pyu_cmd_output_ready(const pyu_cmd_opts *o, char *msg, size_t msglen)
{
    int fd = o->output ? open(o->output, O_WRONLY | O_CREAT | O_CLOEXEC,
                              0666)
                       : -2;
    if (fd == -1) {
        snprintf(msg, msglen, "cannot write %s: %s", o->output,
                 strerror(errno));
        return PYU_EXIT_INTERNAL;
    }
    if (fd >= 0)
        close(fd);
    return PYU_EXIT_OK;
}

/* Flushes and closes what open_output gave; rc is the writer's result. */
static int close_output(const pyu_cmd_opts *o, FILE *f, FILE *out, int rc,
                        char *msg, size_t msglen)
{
    if (fflush(f) != 0)
        rc = -PYU_E_IO;
    if (f != out && fclose(f) != 0)
        rc = -PYU_E_IO;
    if (rc < 0) {
        snprintf(msg, msglen, "writing to %s failed",
                 o->output ? o->output : "the output");
        return PYU_EXIT_INTERNAL;
    }
    return PYU_EXIT_OK;
}

int pyu_cmd_write_profile(pyu_profile *p, pyu_profile *base,
                          const pyu_cmd_opts *o, FILE *out, char *msg,
                          size_t msglen)
{
    FILE *f = open_output(o, out, msg, msglen);
    if (!f)
        return PYU_EXIT_INTERNAL;
    pyu_write_opts wo = {o->sort, o->limit, base, 0};
    int rc = pyu_profile_write(p, o->format ? o->format->name : "top", &wo, f);
    if (rc == -PYU_E_NOMEM) {
        if (f != out)
            fclose(f);
        snprintf(msg, msglen, "out of memory");
        return PYU_EXIT_INTERNAL;
    }
    return close_output(o, f, out, rc, msg, msglen);
}

static int run_tasks(pyu_session *s, const pyu_cmd_opts *o, bool retry_torn,
                     FILE *out, const pyu_json_sink *into, char *msg,
                     size_t msglen)
{
    pyu_tasks *t;
    int rc = pyu_cmd_take_tasks(s, retry_torn, &t);
    if (rc < 0) {
        snprintf(msg, msglen, "%s", pyu_errmsg(s));
        pyu_tasks_free(t);
        return pyu_cmd_exit_for(rc);
    }
    FILE *f = open_output(o, out, msg, msglen);
    if (!f) {
        pyu_tasks_free(t);
        return PYU_EXIT_INTERNAL;
    }
    int cycle = 0;
    rc = o->json ? (into ? pyu_tasks_emit(t, into) : pyu_tasks_write_json(t, f))
         : o->tree ? pyu_tasks_write_tree(t, f, &cycle)
                   : pyu_tasks_write_table(t, f);
    int ex = close_output(o, f, out, rc, msg, msglen);
    if (ex == PYU_EXIT_OK && cycle) {
        snprintf(msg, msglen, "the await graph has a cycle: no tree");
        ex = PYU_EXIT_CYCLE;
    }
    size_t bad = 0, first = 0;
    for (size_t i = 0; ex == PYU_EXIT_OK && i < t->ntasks; i++)
        if (t->tasks[i].error && !bad++)
            first = i;
    if (bad) {
        snprintf(msg, msglen, "%zu of %zu tasks could not be read whole "
                 "(task 0x%" PRIx64 ": %s)", bad, t->ntasks,
                 t->tasks[first].id, t->tasks[first].error);
        ex = PYU_EXIT_PARTIAL;
    }
    pyu_tasks_free(t);
    return ex;
}

/* pyu_cmd_run, its JSON given to into when that is not NULL. */
static int run_one(pyu_session *s, const pyu_cmd_opts *o, bool retry_torn,
                   const char *source, FILE *out, const pyu_json_sink *into,
                   FILE *diag, char *msg, size_t msglen)
{
    if (o->verbose && diag)
        describe(s, source, diag);
    if (o->kind == PYU_CMD_TASKS)
        return run_tasks(s, o, retry_torn, out, into, msg, msglen);
    /* A running process (--nonblocking, or one a debugger holds) can
     * change under the reader: a torn read is retried a few times. */
    pyu_dump *d;
    int rc = pyu_cmd_take_dump(s, (o->async ? PYU_WALK_ASYNC : 0) |
                                      (o->locals ? PYU_WALK_LOCALS : 0) |
                                      (o->native ? PYU_WALK_NATIVE : 0),
                               retry_torn, &d);
    if (rc < 0) {
        snprintf(msg, msglen, "%s", pyu_errmsg(s));
        pyu_dump_free(d);
        return pyu_cmd_exit_for(rc);
    }

    pyu_dump view;
    int ex = pyu_cmd_dump_thread(d, o->thread, &view, msg, msglen);
    if (ex != PYU_EXIT_OK) {
        pyu_dump_free(d);
        return ex;
    }

    FILE *f = open_output(o, out, msg, msglen);
    if (!f) {
        pyu_dump_free(d);
        return PYU_EXIT_INTERNAL;
    }
    rc = o->json ? (into ? pyu_dump_emit(&view, into)
                         : pyu_dump_write_json(&view, f))
                 : pyu_dump_write_text(&view, f, o->text_flags);
    ex = close_output(o, f, out, rc, msg, msglen);
    size_t bad = 0, first = 0;
    for (size_t i = 0; ex == PYU_EXIT_OK && i < view.nthreads; i++)
        if (view.threads[i].error && !bad++)
            first = i;
    if (bad) { /* (exit 5 says why in one line) */
        snprintf(msg, msglen, "%zu of %zu threads could not be read to "
                 "their end (thread %" PRIu64 ": %s)", bad, view.nthreads,
                 view.threads[first].native_thread_id,
                 view.threads[first].error);
        ex = PYU_EXIT_PARTIAL;
    }
    for (size_t i = 0; ex == PYU_EXIT_OK && i < view.nthreads; i++)
        if (view.threads[i].native_error && !bad++)
            first = i;
    if (ex == PYU_EXIT_OK && bad) {
        snprintf(msg, msglen, "%zu of %zu threads have no native stack "
                 "(thread %" PRIu64 ": %s)", bad, view.nthreads,
                 view.threads[first].native_thread_id,
                 view.threads[first].native_error);
        ex = PYU_EXIT_PARTIAL;
    }
    pyu_dump_free(d);
    return ex;
}

static int run_targets(const pyu_cmd_opts *o, pyu_session *first,
                       bool first_retry, const char *first_source,
                       FILE *out, FILE *diag, char *msg, size_t msglen);

int pyu_cmd_run(pyu_session *s, const pyu_cmd_opts *o, bool retry_torn,
                const char *source, FILE *out, FILE *diag, char *msg,
                size_t msglen)
{
    if (o->subprocesses) { /* (a debugger's: its inferior, then the rest) */
        if (o->tree_root <= 0) {
            snprintf(msg, msglen, "%s", o->tree_why[0]
                                            ? o->tree_why
                                            : "--subprocesses: no process "
                                              "to read the descendants of");
            return PYU_EXIT_USAGE;
        }
        *msg = '\0';
        int ex = run_targets(o, s, retry_torn, source, out, diag, msg,
                             msglen);
        if (ex != PYU_EXIT_OK && !*msg) /* (each process's said on diag) */
            snprintf(msg, msglen, "%s",
                     ex == PYU_EXIT_PARTIAL
                         ? "some processes were not read whole (above)"
                         : "some processes could not be read (above)");
        return ex;
    }
    return run_one(s, o, retry_torn, source, out, NULL, diag, msg, msglen);
}

/* ------------------------------------------------ several processes */

/* How bad an exit code is, to keep the worst of several. */
static int badness(int ex)
{
    static const int order[] = {PYU_EXIT_OK, PYU_EXIT_PARTIAL,
                                PYU_EXIT_CYCLE, PYU_EXIT_NOTPY,
                                PYU_EXIT_TARGET, PYU_EXIT_USAGE,
                                PYU_EXIT_INTERNAL};
    for (int i = 0; i < (int)(sizeof order / sizeof order[0]); i++)
        if (order[i] == ex)
            return i;
    return 99;
}

int pyu_cmd_worse_exit(int a, int b)
{
    return badness(b) > badness(a) ? b : a;
}

/* The processes to read: each PID given, with its descendants under
 * --subprocesses, each once.  *named: how many of the first ones were
 * given (the rest are descendants).  Returns the count, or -1 (no
 * memory). */
static int target_list(const pyu_cmd_opts *o, int **out, int *named)
{
    size_t cap = PYU_CMD_MAX_PROCESSES, n = 0;
    int *l = malloc(cap * sizeof *l), *tree = malloc(cap * sizeof *tree);
    if (!l || !tree) {
        free(l);
        free(tree);
        return -1;
    }
    if (o->tree_root > 0) /* (a debugger's inferior) */
        l[n++] = o->tree_root;
    for (int i = 0; i < o->ntargets && n < cap; i++)
        l[n++] = (int)strtol(o->targets[i], NULL, 10);
    *named = (int)n;
    for (int i = 0; o->subprocesses && i < *named; i++) {
        int m = pyu_process_tree(l[i], tree, cap);
        for (int k = 1; k < m && n < cap; k++) { /* (tree[0] is l[i]) */
            bool seen = false;
            for (size_t j = 0; j < n && !seen; j++)
                seen = l[j] == tree[k];
            if (!seen)
                l[n++] = tree[k];
        }
    }
    free(tree);
    *out = l;
    return (int)n;
}

int pyu_cmd_run_targets(const pyu_cmd_opts *o, FILE *out, FILE *diag,
                        char *msg, size_t msglen)
{
    return run_targets(o, NULL, true, NULL, out, diag, msg, msglen);
}

/* pyu_cmd_run_targets, the first process read through `first` when it is
 * not NULL (a debugger's session of its inferior). */
static int run_targets(const pyu_cmd_opts *o, pyu_session *first,
                       bool first_retry, const char *first_source,
                       FILE *out, FILE *diag, char *msg, size_t msglen)
{
    *msg = '\0';
    int named, *pids;
    int n = target_list(o, &pids, &named);
    if (n < 0) {
        snprintf(msg, msglen, "out of memory");
        return PYU_EXIT_INTERNAL;
    }
    FILE *f = open_output(o, out, msg, msglen);
    if (!f) {
        free(pids);
        return PYU_EXIT_INTERNAL;
    }
    pyu_cmd_opts one = *o;
    one.output = NULL; /* (f, for every process) */
    pyu_json_sink *into = o->json ? pyu_json_text_new(f) : NULL;
    if (o->json && !into) {
        free(pids);
        return close_output(o, f, out, -PYU_E_NOMEM, msg, msglen);
    }
    if (into)
        into->open(into->arg, '[', PYU_JSON_ROWS | PYU_JSON_ROWS_END);
    int ex = PYU_EXIT_OK, written = 0;
    for (int i = 0; i < n; i++) {
        char one_msg[1024], source[64];
        bool mine = !(first && i == 0);
        pyu_session *s = mine ? pyu_session_new() : first;
        if (!s) {
            ex = pyu_cmd_worse_exit(ex, PYU_EXIT_INTERNAL);
            fprintf(diag, "pyunwind: error: out of memory\n");
            break;
        }
        int rc = mine ? pyu_open_pid(s, pids[i], o->open_flags) : 0;
        if (rc < 0) {
            /* a descendant that is not Python (a shell between two), or
             * that ended since it was listed, is no target */
            bool quiet = i >= named && (rc == -PYU_E_NOTPY ||
                                        rc == -PYU_E_NOPROC);
            if (!quiet) {
                fprintf(diag, "pyunwind: %s: process %d%s: %s\n",
                        i < named ? "error" : "warning", pids[i],
                        i < named ? "" : " left out", pyu_errmsg(s));
                ex = pyu_cmd_worse_exit(ex, i < named ? pyu_cmd_exit_for(rc)
                                         : PYU_EXIT_PARTIAL);
            }
            pyu_session_free(s);
            continue;
        }
        snprintf(source, sizeof source, "live process %d%s", pids[i],
                 o->open_flags & PYU_OPEN_NONBLOCKING || !mine
                     ? " without stopping it" : "");
        /* (the text of each in a buffer first: a blank line goes only
         * between two that wrote something) */
        char *text = NULL;
        size_t len = 0;
        FILE *mf = o->json ? f : open_memstream(&text, &len);
        if (!mf) {
            ex = pyu_cmd_worse_exit(ex, PYU_EXIT_INTERNAL);
            fprintf(diag, "pyunwind: error: out of memory\n");
            if (mine)
                pyu_session_free(s);
            break;
        }
        int one_ex = run_one(s, &one, mine || first_retry,
                             mine ? source : first_source, mf, into, diag,
                             one_msg, sizeof one_msg);
        if (mf != f) {
            fclose(mf);
            if (len && written++)
                fputc('\n', f);
            fwrite(text, 1, len, f);
            free(text);
        }
        if (one_ex != PYU_EXIT_OK)
            fprintf(diag, "pyunwind: %s: process %d: %s\n",
                    one_ex == PYU_EXIT_PARTIAL ? "warning" : "error",
                    pids[i], one_msg);
        ex = pyu_cmd_worse_exit(ex, one_ex);
        if (mine)
            pyu_session_free(s);
    }
    if (into) {
        into->close(into->arg, '[');
        pyu_json_text_free(into);
    }
    free(pids);
    int closed = close_output(o, f, out, ferror(f) ? -PYU_E_IO : 0, msg,
                              msglen);
    return closed != PYU_EXIT_OK ? closed : ex;
}
