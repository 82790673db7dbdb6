/* pyunwind: the command-line front end over the core library. */
#include "pyunwind/pyunwind.h"

#include <errno.h>
#include <stdbool.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef PYUNWIND_VERSION
#define PYUNWIND_VERSION "0.1.0"
#endif

/* Exit codes (docs/exit-codes.md). */
enum {
    EXIT_OK = 0,
    EXIT_INTERNAL = 1,  /* out of memory, output could not be written */
    EXIT_USAGE = 2,     /* bad command line */
    EXIT_TARGET = 3,    /* the process or core cannot be read */
    EXIT_NOTPY = 4,     /* not a supported CPython */
    EXIT_PARTIAL = 5,   /* dump written, but some stacks are incomplete */
};

static const char usage_text[] =
    "usage: pyunwind dump [--json] [-o FILE] [--no-source] [--nonblocking] PID\n"
    "       pyunwind dump [--json] [-o FILE] [--no-source] --core CORE\n"
    "                     [--exe PYTHON] [--sysroot DIR]\n"
    "       pyunwind --version\n"
    "\n"
    "Prints the Python stack of every thread of a CPython 3.13-3.15 process\n"
    "or core file, read from outside the process.\n"
    "\n"
    "  --json          print JSON (docs/json.md) instead of text\n"
    "  -o, --output FILE  write to FILE instead of standard output\n"
    "  --no-source     do not print source lines\n"
    "  --nonblocking   do not stop the process while reading it\n"
    "  --core CORE     read an ELF core file instead of a live process\n"
    "  --exe PYTHON    the executable the core was written from, when it\n"
    "                  is not where the core says\n"
    "  --sysroot DIR   read the files the core names below DIR\n"
    "  -h, --help      print this help\n";

static int exit_for(int code)
{
    switch (code < 0 ? -code : code) {
    case PYU_E_NOMEM:
        return EXIT_INTERNAL;
    case PYU_E_NOPROC:
    case PYU_E_PERM:
    case PYU_E_BADCORE:
    case PYU_E_IO:
    case PYU_E_FAULT:
    case PYU_E_INVAL:
    case PYU_E_CORRUPT:
        return EXIT_TARGET;
    default:
        return EXIT_NOTPY;
    }
}

static int fail(pyu_session *s, int rc)
{
    fprintf(stderr, "pyunwind: error: %s\n",
            s ? pyu_errmsg(s) : "out of memory");
    return exit_for(rc);
}

static int parse_pid(const char *arg, int *pid)
{
    char *end;
    errno = 0;
    long v = strtol(arg, &end, 10);
    if (errno || *end || v <= 0 || v > 0x3fffffff)
        return -1;
    *pid = (int)v;
    return 0;
}

static int cmd_dump(int argc, char **argv)
{
    enum { OPT_JSON = 256, OPT_CORE, OPT_EXE, OPT_SYSROOT, OPT_NOSRC,
           OPT_NONBLOCK };
    static const struct option opts[] = {
        {"json", no_argument, NULL, OPT_JSON},
        {"core", required_argument, NULL, OPT_CORE},
        {"exe", required_argument, NULL, OPT_EXE},
        {"sysroot", required_argument, NULL, OPT_SYSROOT},
        {"no-source", no_argument, NULL, OPT_NOSRC},
        {"nonblocking", no_argument, NULL, OPT_NONBLOCK},
        {"output", required_argument, NULL, 'o'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    const char *core = NULL, *exe = NULL, *sysroot = NULL, *outpath = NULL;
    bool json = false;
    unsigned text_flags = 0, open_flags = 0;
    int c, pid = 0;

    optind = 1;
    opterr = 0; /* our own one-line messages */
    while ((c = getopt_long(argc, argv, ":o:h", opts, NULL)) != -1) {
        switch (c) {
        case OPT_JSON: json = true; break;
        case OPT_CORE: core = optarg; break;
        case OPT_EXE: exe = optarg; break;
        case OPT_SYSROOT: sysroot = optarg; break;
        case OPT_NOSRC: text_flags |= PYU_TEXT_NO_SOURCE; break;
        case OPT_NONBLOCK: open_flags |= PYU_OPEN_NONBLOCKING; break;
        case 'o': outpath = optarg; break;
        case 'h': fputs(usage_text, stdout); return EXIT_OK;
        case ':':
            fprintf(stderr, "pyunwind: error: option '%s' needs a value "
                            "(see pyunwind dump --help)\n", argv[optind - 1]);
            return EXIT_USAGE;
        default:
            fprintf(stderr, "pyunwind: error: unknown option '%s' (see "
                            "pyunwind dump --help)\n", argv[optind - 1]);
            return EXIT_USAGE;
        }
    }
    if (core && optind != argc) {
        fprintf(stderr, "pyunwind: error: give either a PID or --core, "
                        "not both\n");
        return EXIT_USAGE;
    }
    if (!core) {
        if (optind + 1 != argc) {
            fprintf(stderr, "pyunwind: error: %s (see pyunwind dump "
                            "--help)\n",
                    optind == argc ? "give a process id or --core CORE"
                                   : "give one process id");
            return EXIT_USAGE;
        }
        if (parse_pid(argv[optind], &pid) < 0) {
            fprintf(stderr, "pyunwind: error: '%s' is not a process id\n",
                    argv[optind]);
            return EXIT_USAGE;
        }
        if (exe || sysroot) {
            fprintf(stderr, "pyunwind: error: --exe and --sysroot go with "
                            "--core\n");
            return EXIT_USAGE;
        }
    }

    pyu_session *s = pyu_session_new();
    if (!s)
        return fail(NULL, -PYU_E_NOMEM);
    int rc = core ? pyu_open_core(s, core, exe, sysroot)
                  : pyu_open_pid(s, pid, open_flags);
    if (rc < 0) {
        int ex = fail(s, rc);
        pyu_session_free(s);
        return ex;
    }
    pyu_dump *d = NULL;
    /* A running process (--nonblocking, or one a debugger holds) can
     * change under the reader: a torn read is retried a few times. */
    for (int attempt = 0;; attempt++) {
        rc = pyu_dump_take(s, &d);
        bool torn = rc == -PYU_E_FAULT || rc == -PYU_E_CORRUPT;
        for (size_t i = 0; rc == 0 && i < d->nthreads; i++)
            torn |= d->threads[i].error != NULL;
        if (core || !torn || attempt == 4)
            break;
        pyu_dump_free(d);
        d = NULL;
    }
    if (rc < 0) {
        int ex = fail(s, rc);
        pyu_session_free(s);
        return ex;
    }
    FILE *out = stdout;
    if (outpath && !(out = fopen(outpath, "w"))) {
        fprintf(stderr, "pyunwind: error: cannot write %s: %s\n", outpath,
                strerror(errno));
        pyu_dump_free(d);
        pyu_session_free(s);
        return EXIT_INTERNAL;
    }
    rc = json ? pyu_dump_write_json(d, out)
              : pyu_dump_write_text(d, out, text_flags);
    if (fflush(out) != 0)
        rc = -PYU_E_IO;
    if (out != stdout && fclose(out) != 0)
        rc = -PYU_E_IO;
    int ex = EXIT_OK;
    if (rc < 0) {
        fprintf(stderr, "pyunwind: error: writing the dump failed\n");
        ex = EXIT_INTERNAL;
    } else {
        for (size_t i = 0; i < d->nthreads; i++)
            if (d->threads[i].error)
                ex = EXIT_PARTIAL;
    }
    pyu_dump_free(d);
    pyu_session_free(s);
    return ex;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fputs(usage_text, stderr);
        return EXIT_USAGE;
    }
    if (strcmp(argv[1], "--version") == 0) {
        printf("pyunwind %s\n", PYUNWIND_VERSION);
        return EXIT_OK;
    }
    if (strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0) {
        fputs(usage_text, stdout);
        return EXIT_OK;
    }
    if (strcmp(argv[1], "dump") == 0)
        return cmd_dump(argc - 1, argv + 1);
    fprintf(stderr, "pyunwind: error: unknown command '%s' (try: dump)\n",
            argv[1]);
    return EXIT_USAGE;
}
