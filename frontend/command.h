/* The commands every front end offers (the CLI, the gdb plugin, the lldb
 * plugin): their options, their help, and running them over an opened
 * session.  Parsing and rendering live here once, so `pyunwind dump`,
 * gdb's `py-dump` and lldb's `py-dump` accept the same options and print
 * the same bytes.  Front ends only decide how to open the session (a pid, a
 * core file, or the debugger's own memory) and where the text goes. */
#ifndef PYUNWIND_FRONTEND_COMMAND_H
#define PYUNWIND_FRONTEND_COMMAND_H

#include "pyunwind/pyunwind.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Exit codes of the CLI (docs/exit-codes.md); the plugins report the same
 * cases as debugger errors. */
enum pyu_cmd_exit {
    PYU_EXIT_OK = 0,
    PYU_EXIT_INTERNAL = 1, /* out of memory, output could not be written */
    PYU_EXIT_USAGE = 2,    /* bad command line */
    PYU_EXIT_TARGET = 3,   /* the process or core cannot be read */
    PYU_EXIT_NOTPY = 4,    /* not a supported CPython */
    PYU_EXIT_PARTIAL = 5,  /* dump written, but some stacks are incomplete */
    PYU_EXIT_CYCLE = 6,    /* tasks --tree: the await graph has a cycle */
};

/* The commands. */
enum pyu_cmd_kind { PYU_CMD_DUMP, PYU_CMD_TASKS, PYU_CMD_SAMPLE,
                    PYU_CMD_REPORT /* CLI only */ };

/* Who parses: the CLI takes a target (PID or --core ...) on its command
 * line; a debugger command reads the debugger's current target. */
enum pyu_cmd_frontend { PYU_CMD_CLI, PYU_CMD_DEBUGGER };

/* Options of `dump` / `py-dump` and `tasks` / `py-tasks`. */
typedef struct pyu_cmd_opts {
    enum pyu_cmd_kind kind;
    bool json;            /* --json */
    bool tree;            /* --tree (tasks) */
    bool async;           /* --async (dump) */
    bool locals;          /* --locals (dump) */
    bool native;          /* --native, --native-last (dump) */
    bool verbose;         /* --verbose: say where memory came from */
    bool help;            /* -h/--help was given: print the help, do nothing */
    unsigned text_flags;  /* PYU_TEXT_* (--no-source) */
    const char *output;   /* -o FILE, or NULL for the front end's output */
    uint64_t thread;      /* --thread TID (native id or ident); 0 = all */
    /* sample / py-sample */
    double duration;      /* -d SECONDS; 0: until the target exits */
    double rate;          /* -r: samples per second; 0: as fast as it can */
    int mode;             /* --mode: PYU_MODE_* */
    unsigned sample_flags; /* PYU_SAMPLE_* */
    bool other_cpu;       /* --other-cpu: never sit on the target's CPU */
    const pyu_format *format; /* --format (pyu_profile_formats()) */
    int sort;             /* --sort: PYU_TOP_SORT_* */
    size_t limit;         /* --limit rows of top (0: all) */
    /* CLI only */
    unsigned open_flags;  /* PYU_OPEN_* (--nonblocking) */
    int pid;              /* the first of the PIDs given */
    char **targets;       /* dump / tasks PID...: each PID given (checked) */
    int ntargets;
    bool subprocesses;    /* --subprocesses */
    int tree_root;        /* debuggers, --subprocesses: the inferior's pid,
                             its descendants read by pid (0: none: why in
                             tree_why); pyu_cmd_tree_root() */
    char tree_why[160];
    const char *core, *exe, *sysroot;
    char **launch;        /* sample -- PROGRAM ARGS...: argv to start */
    int nlaunch;
    /* report */
    const char *capture;  /* the capture file */
    const char *diff;     /* --diff BASE: the baseline capture */
    int only_pid;         /* report --pid PID: one process (0: all) */
    bool live;            /* sample --live (CLI) */
    double from, to;      /* --from, --to SECONDS (to 0: the end) */
    bool mode_given;      /* --mode was given */
    char format_warning[200]; /* sample, report: a --format that -o's
                             extension names otherwise ("" none: the
                             front end says it) */
} pyu_cmd_opts;

/* The help text of a command in a front end ("py-dump", "pyunwind
 * tasks"...); a static string. */
const char *pyu_cmd_help(enum pyu_cmd_kind kind, enum pyu_cmd_frontend fe);

/* The long options a command accepts in a front end, NULL-terminated, each
 * with its leading dashes (for completion). */
const char *const *pyu_cmd_options(enum pyu_cmd_kind kind,
                                   enum pyu_cmd_frontend fe);

/* Parses argv[1..argc-1] (argv[0] is the command's name; argv may be
 * permuted).  Strings in *o point into argv.  Returns 0, or
 * PYU_EXIT_USAGE with a one-line message (no trailing newline) in msg. */
int pyu_cmd_parse(pyu_cmd_opts *o, enum pyu_cmd_kind kind,
                  enum pyu_cmd_frontend fe, int argc, char **argv, char *msg,
                  size_t msglen);

/* The exit code for a negated pyu error code (from an open or a dump). */
int pyu_cmd_exit_for(int rc);
/* The worse of two exit codes (several processes: the worst of theirs). */
int pyu_cmd_worse_exit(int a, int b);

/* A result whose reading a running target tore (some thread or task could
 * not be read to its end); see pyu_cmd_retry. */
#define PYU_CMD_TORN 1

/* Runs attempt(arg), and while retry is set and it reports a torn read
 * (PYU_CMD_TORN, -PYU_E_FAULT or -PYU_E_CORRUPT), runs it again, up to 5
 * times in all: the one retry of torn reads of a live target that every
 * front end uses.  attempt frees what an earlier attempt left before it
 * takes a new result.  Returns attempt's last value, with PYU_CMD_TORN
 * turned into 0 (the partial result is kept). */
int pyu_cmd_retry(bool retry, int (*attempt)(void *arg), void *arg);

/* A dump (pyu_dump_take with walk flags) or a task list, taken again
 * while torn when retry is set (pyu_cmd_retry).  Return what the last
 * pyu_*_take returned; the result, also a partial one, is in *out. */
int pyu_cmd_take_dump(pyu_session *s, unsigned flags, bool retry,
                      pyu_dump **out);
int pyu_cmd_take_tasks(pyu_session *s, bool retry, pyu_tasks **out);

/* --thread: view is d with only the thread whose native id or ident is
 * tid (d itself when tid is 0).  PYU_EXIT_OK, or PYU_EXIT_USAGE with a
 * one-line message when d has no such thread.  view points into d. */
int pyu_cmd_dump_thread(const pyu_dump *d, uint64_t tid, pyu_dump *view,
                        char *msg, size_t msglen);

/* Runs the command on an opened session: takes the dump or the task list
 * and writes it to o->output, or to out when there is none.  `source` says in a few words how the session reads
 * memory; with --verbose it goes to diag together with what was found.  A
 * live session (retry_torn) retries dumps torn by a running target.
 * Returns a PYU_EXIT_* code; for any code but OK and PARTIAL a one-line
 * message is in msg (CYCLE: the tree was written, with the cycle). */
int pyu_cmd_run(pyu_session *s, const pyu_cmd_opts *o, bool retry_torn,
                const char *source, FILE *out, FILE *diag, char *msg,
                size_t msglen);

/* Most processes one run reads (the PIDs given and their descendants). */
#define PYU_CMD_MAX_PROCESSES 4096

/* dump / tasks of several live processes: each PID of o->targets, and
 * under --subprocesses each one's descendants (pyu_process_tree) that run
 * CPython, read in turn, in that order; the text of each after the other
 * (a blank line between), or --json one array of their objects.  What
 * goes wrong with one process is a line on diag, with its pid: a named
 * one that cannot be read is an error, a descendant a warning ("left
 * out"), unless it is not Python or has ended since it was listed (then
 * it is no target).  Returns the worst exit code of them (a descendant
 * left out counts as PARTIAL); msg holds a message only when the output
 * could not be written. */
int pyu_cmd_run_targets(const pyu_cmd_opts *o, FILE *out, FILE *diag,
                        char *msg, size_t msglen);

/* ------------------------------------------------------------ sampling */

#include <signal.h>

/* How a sampling run learns that it should end, and where its status line
 * goes. */
typedef struct pyu_cmd_sample_hooks {
    volatile sig_atomic_t *stop; /* becomes non-zero to end it (Ctrl-C) */
    int (*gone)(void *arg);      /* may be NULL; non-zero once the target
                                    has ended (a program started here) */
    void *arg;
    FILE *status; /* a terminal for the live status line, or NULL */
    FILE *raw;    /* --format raw: the capture is streamed here as it
                     samples (pyu_capture), or NULL */
    int pid;      /* the session's target is this live process (its
                     command line is read; with several targets or
                     --subprocesses, the first of them and a root of the
                     tree), or 0 */
    /* called at every status refresh (4 a second) with the profile so
       far and the time sampled (--live draws it); may be NULL */
    void (*tick)(void *arg, pyu_profile *p, uint64_t elapsed_ns);
    void *tick_arg;
} pyu_cmd_sample_hooks;

/* Samples the session's target into p with the options of `sample`: on an
 * absolute schedule at o->rate (ticks that could not be served are counted
 * as missed), until o->duration, the target's end or *stop.  With
 * o->targets (CLI: sample PID PID...) the others too, opened here, and with
 * o->subprocesses every descendant of those (h->pid's included) that runs
 * CPython, found as it appears (a scan of /proc every 5 ms) and let go when
 * it exits or runs another program: each tick samples every target, each
 * one its process in the profile; the run then ends when none is left (or
 * at o->duration, *stop).  A process that cannot be read is a line on diag
 * ("pyunwind: warning: process N left out: ...", or an error for a named
 * one) and makes the exit code PARTIAL (or the named one's).  Then writes
 * the summary (and with --verbose the sampler's statistics) to diag.
 * Returns a PYU_EXIT_* code (a message in msg when not OK); the profile is
 * kept in every case. */
int pyu_cmd_sample_run(pyu_session *s, const pyu_cmd_opts *o,
                       const pyu_cmd_sample_hooks *h, pyu_profile *p,
                       FILE *diag, char *msg, size_t msglen);

/* The end-of-run line: samples, time, rate, failed and missed, and why the
 * run ended ("interrupted", "the target exited") when ended is set. */
void pyu_cmd_sample_summary(FILE *diag, const pyu_profile_info *in,
                            const char *ended);

/* The command line of live process pid, its arguments joined by spaces,
 * into buf ("" when it cannot be read). */
void pyu_cmd_command_of(int pid, char *buf, size_t len);

/* The names of the formats for a message ("top, collapsed, ... or
 * gecko"); a static string. */
const char *pyu_cmd_format_list(void);
/* Whether o's format is the one named. */
bool pyu_cmd_format_is(const pyu_cmd_opts *o, const char *name);

/* Whether o->output can be written (it is made, empty, when it is not
 * there; one that is there is left as it is until the profile is written):
 * checked before the first sample, so that a run is not lost to a path
 * that cannot be written.  PYU_EXIT_OK, or PYU_EXIT_INTERNAL with
 * "cannot write FILE: why" in msg. */
int pyu_cmd_output_ready(const pyu_cmd_opts *o, char *msg, size_t msglen);

/* Writes the profile in o->format (the differential flame graph against
 * base, when not NULL) to o->output, or to out when there is
 * none.  Returns PYU_EXIT_OK or PYU_EXIT_INTERNAL (message in msg). */
int pyu_cmd_write_profile(pyu_profile *p, pyu_profile *base,
                          const pyu_cmd_opts *o, FILE *out, char *msg,
                          size_t msglen);

#ifdef __cplusplus
}
#endif
#endif
