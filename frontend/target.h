/* What a debugger plugin has open, and the one routine that decides how
 * pyunwind reads it.  Both plugins (gdb-plugin/, lldb-plugin/) describe
 * their debugger's target in a pyu_dbg_target and call
 * pyu_cmd_open_target; the choices and the words --verbose prints are made
 * here once. */
#ifndef PYUNWIND_FRONTEND_TARGET_H
#define PYUNWIND_FRONTEND_TARGET_H

#include "pyunwind/pyunwind.h"

#include <stdbool.h>
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

enum pyu_dbg_where {
    PYU_DBG_LOCAL, /* a process on this machine the debugger traces */
    PYU_DBG_CORE,  /* a core file */
    PYU_DBG_OTHER, /* anything else: a remote stub, a simulator... */
};

typedef struct pyu_dbg_target {
    const char *debugger;   /* "gdb", "lldb" */
    const char *conn;       /* the debugger's name for how it reaches the
                               target: gdb's connection type ("native",
                               "core", "remote"), lldb's process plugin
                               ("elf-core", "gdb-remote") */
    const char *conn_noun;  /* what that name is: "target", "process" */
    enum pyu_dbg_where where;
    const char *local_why;  /* PYU_DBG_LOCAL: why pyunwind may read it by
                               pid ("gdb's native target") */
    int pid;
    const char *core;       /* PYU_DBG_CORE: the core file (NULL when the
                               debugger does not say), */
    const char *exe;        /* the executable (may be NULL), */
    const char *sysroot;    /* and where its files are (may be NULL) */
    bool debugger_memory;   /* read through the debugger even when pyunwind
                               could read the process or core itself
                               (PYUNWIND_MEMORY=debugger, or asked) */
    /* Opens s over the debugger's own memory (with_signal: a core's fatal
     * signal too); returns what pyu_open_memory returned. */
    int (*open_memory)(void *arg, pyu_session *s, bool with_signal);
    void *arg;
} pyu_dbg_target;

/* Opens a session on what the debugger has open: a local process by pid
 * (pyu_open_pid), a core file with pyunwind's reader (the debugger's
 * memory when that reader cannot open it), anything else through the
 * debugger's memory.  On success sets *out, *retry (torn reads of a running
 * target are worth retrying) and source (a few words for --verbose, up to
 * srclen bytes) and returns PYU_EXIT_OK; else returns a PYU_EXIT_* code
 * with a one-line message in msg. */
int pyu_cmd_open_target(const pyu_dbg_target *t, pyu_session **out,
                        bool *retry, char *source, size_t srclen, char *msg,
                        size_t msglen);

/* --subprocesses in a debugger: the descendants of its target are read
 * by pid, as the CLI reads them, which needs a process on this machine.
 * Sets o->tree_root to t's pid, or to 0 with a one-line reason in
 * o->tree_why (a core file, a remote target). */
struct pyu_cmd_opts;
void pyu_cmd_tree_root(const pyu_dbg_target *t, struct pyu_cmd_opts *o);

#ifdef __cplusplus
}
#endif
#endif
