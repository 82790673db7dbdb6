/* Sessions: opening a memory source and finding the runtime in it, the
 * error record's public face, and freeing what every module keeps in the
 * session. */
#include "../internal.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

pyu_session *pyu_session_new(void)
{
    pyu_session *s = calloc(1, sizeof *s);
    if (s)
        pyu_err_clear(&s->err);
    return s;
}

void pyu_session_free(pyu_session *s)
{
    if (!s)
        return;
    if (s->ops && s->ops->destroy)
        s->ops->destroy(s->ctx);
    pyu_codes_free(s);
    pyu_strings_free(s);
    pyu_types_free(s);
    pyu_chunks_free(s);
    pyu_threads_free(s);
    pyu_aio_free(s);
    free(s->found_in);
    free(s);
}

const char *pyu_errmsg(const pyu_session *s)
{
    if (!s)
        return "out of memory";
    /* the text is made now, from what the failure recorded (the record is
     * the session's: formatting it changes nothing else) */
    return pyu_err_text((pyu_err *)&s->err);
}

int pyu_errcode(const pyu_session *s)
{
    return s ? s->err.code : PYU_E_NOMEM;
}

int pyu_python(const pyu_session *s, pyu_python_info *info)
{
    if (!s || !s->opened)
        return -PYU_E_STATE;
    memset(info, 0, sizeof *info);
    info->runtime_addr = s->runtime;
    info->version_hex = s->off.version_hex;
    info->found_in = s->found_in ? s->found_in : "";
    return 0;
}

int pyu_target(const pyu_session *s, pyu_process *out)
{
    if (!s || !s->opened)
        return -PYU_E_STATE;
    memset(out, 0, sizeof *out);
    out->pid = s->pid;
    if (s->ops->fatal_signal &&
        s->ops->fatal_signal(s->ctx, &out->signal, &out->signal_thread) < 0)
        out->signal = 0;
    snprintf(out->python, sizeof out->python, "%s", s->version);
    out->free_threaded = s->off.free_threaded;
    if (s->ops->source_time &&
        s->ops->source_time(s->ctx, &out->source_time,
                            &out->source_time_core) < 0)
        out->source_time = out->source_time_core = 0;
    return 0;
}

static int open_common(pyu_session *s, uint64_t hint)
{
    int rc = pyu_runtime_find(s, hint);
    if (rc < 0)
        return rc;
    s->opened = true;
    pyu_err_clear(&s->err);
    return 0;
}

static int check_fresh(pyu_session *s)
{
    if (s->ops)
        return pyu_err_set(&s->err, PYU_E_STATE,
                           "this session is already open");
    return 0;
}

int pyu_open_pid(pyu_session *s, int pid, unsigned flags)
{
    void *ctx = NULL;
    int rc;
    if (!s)
        return -PYU_E_NOMEM;
    if ((rc = check_fresh(s)) < 0)
        return rc;
    if (pid <= 0)
        return pyu_err_set(&s->err, PYU_E_INVAL, "invalid process id %d",
                           pid);
    rc = pyu_live_create(pid, flags, &ctx, &s->err);
    if (rc < 0)
        return rc;
    s->ops = &pyu_live_ops;
    s->ctx = ctx;
    s->pid = pid;
    return open_common(s, 0);
}

int pyu_open_core(pyu_session *s, const char *core, const char *exe,
                  const char *sysroot)
{
    void *ctx = NULL;
    int pid = 0, rc;
    if (!s)
        return -PYU_E_NOMEM;
    if ((rc = check_fresh(s)) < 0)
        return rc;
    if (!core)
        return pyu_err_set(&s->err, PYU_E_INVAL, "no core file given");
    rc = pyu_core_create(core, exe, sysroot, &ctx, &pid, &s->err);
    if (rc < 0)
        return rc;
    s->ops = &pyu_core_ops;
    s->ctx = ctx;
    s->pid = pid;
    rc = open_common(s, 0);
    if (rc < 0) {
        uint64_t have, want = pyu_core_truncated(ctx, &have);
        if (want)
            pyu_err_ctx(&s->err,
                        "%s (the core is cut off: %" PRIu64
                        " of %" PRIu64 " bytes)",
                        core, have, want);
        else
            pyu_err_ctx(&s->err, "%s", core);
    }
    return rc;
}

int pyu_file_python_version(const char *path, uint64_t *version_hex)
{
    pyu_elf_info info;
    pyu_err err = {0};
    if (!path || !version_hex)
        return -PYU_E_INVAL;
    int rc = pyu_elf_inspect(path, &info, &err);
    if (rc < 0)
        return rc;
    if (!info.has_py_version)
        return -PYU_E_NOTPY;
    *version_hex = info.py_version;
    return 0;
}

void pyu_set_version_hint(pyu_session *s, uint64_t version_hex)
{
    if (s)
        s->version_hint = version_hex;
}

void pyu_set_native_frames(pyu_session *s, pyu_native_frames_fn fn,
                           void *arg)
{
    if (s) {
        s->native_fn = fn;
        s->native_arg = arg;
    }
}

int pyu_open_memory(pyu_session *s, const pyu_memory_ops *ops, void *ctx,
                    int pid, uint64_t runtime_hint)
{
    int rc;
    if (!s) {
        if (ops && ops->destroy)
            ops->destroy(ctx);
        return -PYU_E_NOMEM;
    }
    if ((rc = check_fresh(s)) < 0) {
        if (ops && ops->destroy)
            ops->destroy(ctx);
        return rc;
    }
    if (!ops || !ops->read) {
        if (ops && ops->destroy)
            ops->destroy(ctx);
        return pyu_err_set(&s->err, PYU_E_INVAL,
                           "memory source has no read function");
    }
    s->ops = ops;
    s->ctx = ctx;
    s->pid = pid;
    return open_common(s, runtime_hint);
}
