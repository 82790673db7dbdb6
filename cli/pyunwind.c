/* pyunwind: the command-line front end over the core library. */
#include "command.h"
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

static int fail(const char *msg, int code)
{
    fprintf(stderr, "pyunwind: error: %s\n", msg);
    return code;
}

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
        if (ex != PYU_EXIT_OK && ex != PYU_EXIT_PARTIAL)
            fail(msg, ex);
    }
    pyu_session_free(s);
    return ex;
}

static const char overview[] =
    "usage: pyunwind dump [OPTIONS] PID | --core CORE   Python stacks\n"
    "       pyunwind tasks [OPTIONS] PID | --core CORE  asyncio tasks\n"
    "       pyunwind --version\n"
    "`pyunwind COMMAND --help` lists a command's options.\n";

int main(int argc, char **argv)
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
    fprintf(stderr, "pyunwind: error: unknown command '%s' (try: dump, "
                    "tasks)\n",
            argv[1]);
    return PYU_EXIT_USAGE;
}
