/* How a debugger plugin reads what its debugger has open (see target.h). */
#include "target.h"
#include "command.h"

#include <stdio.h>
#include <string.h>

static int fail(pyu_session *s, int rc, char *msg, size_t msglen)
{
    snprintf(msg, msglen, "%s", s ? pyu_errmsg(s) : "out of memory");
    pyu_session_free(s);
    return s ? pyu_cmd_exit_for(rc) : PYU_EXIT_INTERNAL;
}

int pyu_cmd_open_target(const pyu_dbg_target *t, pyu_session **out,
                        bool *retry, char *source, size_t srclen, char *msg,
                        size_t msglen)
{
    pyu_session *s = pyu_session_new();
    bool core = t->where == PYU_DBG_CORE;
    char first[512] = ""; /* why pyunwind's own reader of a core failed */
    int rc;
    *out = NULL;
    if (!s)
        return fail(NULL, 0, msg, msglen);
    if (t->debugger_memory) {
        snprintf(source, srclen, "process %d through %s's memory (%s %s, as "
                 "asked)", t->pid, t->debugger, t->conn, t->conn_noun);
        *retry = !core;
        rc = t->open_memory(t->arg, s, core);
    } else if (t->where == PYU_DBG_LOCAL) {
        snprintf(source, srclen, "live process %d directly (%s)", t->pid,
                 t->local_why);
        *retry = true;
        rc = pyu_open_pid(s, t->pid, 0);
    } else if (core) {
        if (t->core) {
            rc = pyu_open_core(s, t->core, t->exe, t->sysroot);
            if (rc == 0) {
                snprintf(source, srclen, "core file %s", t->core);
                *retry = false;
                *out = s;
                return PYU_EXIT_OK;
            }
            snprintf(first, sizeof first, "%s", pyu_errmsg(s));
            pyu_session_free(s);
            if (!(s = pyu_session_new()))
                return fail(NULL, 0, msg, msglen);
        }
        snprintf(source, srclen, "core file %s through %s's memory%s%s%s",
                 t->core ? t->core : "?", t->debugger,
                 first[0] ? " (pyunwind's reader: " : "", first,
                 first[0] ? ")" : "");
        *retry = false;
        rc = t->open_memory(t->arg, s, true);
    } else {
        snprintf(source, srclen, "process %d through %s's memory (%s %s)",
                 t->pid, t->debugger, t->conn, t->conn_noun);
        *retry = true;
        rc = t->open_memory(t->arg, s, false);
    }
    if (rc < 0 && first[0]) { /* both failed: say both (a cut core) */
        snprintf(msg, msglen, "%s (pyunwind's own reader of the core: %s)",
                 pyu_errmsg(s), first);
        pyu_session_free(s);
        return pyu_cmd_exit_for(rc);
    }
    if (rc < 0)
        return fail(s, rc, msg, msglen);
    *out = s;
    return PYU_EXIT_OK;
}

void pyu_cmd_tree_root(const pyu_dbg_target *t, pyu_cmd_opts *o)
{
    o->tree_root = 0;
    o->tree_why[0] = '\0';
    if (t->where == PYU_DBG_LOCAL && t->pid > 0)
        o->tree_root = t->pid;
    else if (t->where == PYU_DBG_CORE)
        snprintf(o->tree_why, sizeof o->tree_why,
                 "--subprocesses reads the running descendants of a "
                 "process: a core file has none");
    else
        snprintf(o->tree_why, sizeof o->tree_why,
                 "--subprocesses reads the descendants of a process on this "
                 "machine by pid: %s's %s %s is not one", t->debugger,
                 t->conn, t->conn_noun);
}
