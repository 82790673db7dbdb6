/* Reading the target through its memory source.
 *
 * Everything the core reads goes through here: the source's read callback
 * with an error recorded on failure (formatted only when asked), quiet
 * reads for speculation and probing, and the pause/resume around a walk.
 */
#include "../internal.h"

#include <inttypes.h>

int pyu_readv(pyu_session *s, const pyu_range *r, size_t n, const char *what)
{
    s->reads++;
    int rc = s->ops->read(s->ctx, r, n);
    if (rc >= 0)
        return 0;
    if (rc == -PYU_E_NOPROC)
        return pyu_fail(&s->err, PYU_E_NOPROC,
                        "reading %s at 0x%" PRIx64 ": the process has exited",
                        what, r[0].addr);
    if (rc == -PYU_E_PERM)
        return pyu_fail(&s->err, PYU_E_PERM,
                        "reading %s at 0x%" PRIx64 ": permission denied; %s",
                        what, r[0].addr, PYU_PERM_REMEDY);
    if (n == 1)
        return pyu_fail(&s->err, -rc,
                        "reading %s at 0x%" PRIx64 " (%zu bytes): %s", what,
                        r[0].addr, r[0].len, pyu_strerror(rc));
    return pyu_fail(&s->err, -rc, "reading %s at 0x%" PRIx64 ": %s", what,
                    r[0].addr, pyu_strerror(rc));
}

int pyu_read(pyu_session *s, uint64_t addr, void *buf, size_t len,
             const char *what)
{
    pyu_range r = {addr, buf, len};
    if (addr == 0)
        return pyu_fail(&s->err, PYU_E_CORRUPT, "%s pointer is NULL", what);
    return pyu_readv(s, &r, 1, what);
}

int pyu_readv_quiet(pyu_session *s, const pyu_range *r, size_t n)
{
    s->reads++;
    int rc = s->ops->read(s->ctx, r, n);
    return rc < 0 ? rc : 0;
}

int pyu_read_quiet(pyu_session *s, uint64_t addr, void *buf, size_t len)
{
    pyu_range r = {addr, buf, len};
    if (addr == 0)
        return -PYU_E_CORRUPT;
    return pyu_readv_quiet(s, &r, 1);
}

int pyu_paused(pyu_session *s, int (*fn)(pyu_session *, void *), void *arg)
{
    bool paused = false;
    if (s->ops->pause) {
        int rc = s->ops->pause(s->ctx);
        if (rc < 0)
            return pyu_fail(&s->err, -rc, "stopping process %d: %s", s->pid,
                            pyu_strerror(rc));
        paused = true;
    }
    int rc = fn(s, arg);
    if (paused && s->ops->resume)
        s->ops->resume(s->ctx);
    return rc;
}
