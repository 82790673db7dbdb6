/* Error codes, their texts, and the session's error record.
 *
 * A failure records a code at once; its one-line text is put together only
 * when someone asks (pyu_errmsg), so that a sampler whose reads of a
 * running target fail thousands of times a second pays for no message
 * nobody reads.  Failures that happen once, such as opening a target, may
 * format their text right away (pyu_err_set, pyu_err_ctx): those may name
 * paths and other strings that do not outlive the call.
 */
#include "../internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

static const char *const error_text[] = {
#define PYU_TEXT_(name, text) text,
    PYU_ERRORS(PYU_TEXT_)
#undef PYU_TEXT_
};

const char *pyu_strerror(int code)
{
    if (code < 0)
        code = -code;
    if (code >= PYU_E_COUNT_)
        return "unknown error";
    return error_text[code];
}

/* ------------------------------------------------------- deferred texts */

/* Parses the conversion at fmt (just past '%'): its length modifier and
 * letter.  Returns the characters it spans, or 0 when it is not one of
 * the conversions a deferred text may use. */
static size_t conversion(const char *fmt, char *len, char *conv)
{
    size_t i = 0;
    *len = 0;
    if (fmt[i] == 'l' && fmt[i + 1] == 'l') {
        *len = 'L';
        i += 2;
    } else if (fmt[i] == 'l' || fmt[i] == 'z') {
        *len = fmt[i++];
    }
    if (fmt[i] != 'd' && fmt[i] != 'u' && fmt[i] != 'x' && fmt[i] != 's')
        return 0;
    if (fmt[i] == 's' && *len)
        return 0;
    *conv = fmt[i];
    return i + 1;
}

/* Takes the arguments of fmt off ap into *p. */
static void part_capture(pyu_err_part *p, const char *fmt, va_list ap)
{
    unsigned n = 0;
    p->fmt = fmt;
    for (const char *f = fmt; *f; f++) {
        if (*f != '%')
            continue;
        if (f[1] == '%') {
            f++;
            continue;
        }
        char len, conv;
        size_t k = conversion(f + 1, &len, &conv);
        if (!k || n == PYU_ERR_ARGS)
            break; /* not allowed: the text stops here (pyu_err_text) */
        p->arg[n].conv = conv;
        p->arg[n].len = len;
        if (conv == 's')
            p->arg[n].v.s = va_arg(ap, const char *);
        else if (conv == 'd')
            p->arg[n].v.i = len == 'L'   ? va_arg(ap, long long)
                            : len == 'l' ? va_arg(ap, long)
                            : len == 'z' ? (long long)va_arg(ap, ssize_t)
                                         : va_arg(ap, int);
        else
            p->arg[n].v.u = len == 'L'   ? va_arg(ap, unsigned long long)
                            : len == 'l' ? va_arg(ap, unsigned long)
                            : len == 'z' ? va_arg(ap, size_t)
                                         : va_arg(ap, unsigned);
        n++;
        f += k;
    }
}

/* Appends to out[*at] (size cap) as snprintf would. */
static void put(char *out, size_t cap, size_t *at, const char *fmt, ...)
    PYU_PRINTF(4, 5);
static void put(char *out, size_t cap, size_t *at, const char *fmt, ...)
{
    if (*at >= cap - 1)
        return;
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(out + *at, cap - *at, fmt, ap);
    va_end(ap);
    if (k > 0)
        *at = *at + (size_t)k < cap - 1 ? *at + (size_t)k : cap - 1;
}

static void part_format(const pyu_err_part *p, char *out, size_t cap,
                        size_t *at)
{
    unsigned n = 0;
    const char *f = p->fmt, *lit = f;
    for (; *f; f++) {
        if (*f != '%')
            continue;
        put(out, cap, at, "%.*s", (int)(f - lit), lit);
        if (f[1] == '%') {
            put(out, cap, at, "%%");
            lit = ++f + 1;
            continue;
        }
        char len, conv;
        size_t k = conversion(f + 1, &len, &conv);
        if (!k || n == PYU_ERR_ARGS)
            return;
        const pyu_err_arg *a = &p->arg[n++];
        if (conv == 's')
            put(out, cap, at, "%s", a->v.s ? a->v.s : "(null)");
        else if (conv == 'd')
            put(out, cap, at, "%lld", a->v.i);
        else if (conv == 'u')
            put(out, cap, at, "%llu", a->v.u);
        else
            put(out, cap, at, "%llx", a->v.u);
        f += k;
        lit = f + 1;
    }
    put(out, cap, at, "%s", lit);
}

const char *pyu_err_text(pyu_err *e)
{
    if (e->current)
        return e->msg;
    char text[PYU_ERRMSG_MAX];
    size_t at = 0;
    text[0] = '\0';
    for (unsigned i = e->nctx; i-- > 0;) {
        part_format(&e->ctx[i], text, sizeof text, &at);
        put(text, sizeof text, &at, ": ");
    }
    if (e->base.fmt)
        part_format(&e->base, text, sizeof text, &at);
    else
        put(text, sizeof text, &at, "%s", e->msg);
    memcpy(e->msg, text, at + 1);
    e->base.fmt = NULL;
    e->nctx = 0;
    e->current = true;
    return e->msg;
}

void pyu_err_clear(pyu_err *e)
{
    e->code = PYU_E_OK;
    e->base.fmt = NULL;
    e->nctx = 0;
    e->msg[0] = '\0';
    e->current = true;
}

int pyu_fail(pyu_err *e, int code, const char *fmt, ...)
{
    va_list ap;
    if (code < 0)
        code = -code;
    e->code = code;
    e->nctx = 0;
    e->current = false;
    va_start(ap, fmt);
    part_capture(&e->base, fmt, ap);
    va_end(ap);
    return -code;
}

int pyu_fail_ctx(pyu_err *e, const char *fmt, ...)
{
    va_list ap;
    if (e->code == PYU_E_OK)
        e->code = PYU_E_IO;
    if (e->nctx == PYU_ERR_CONTEXTS)
        pyu_err_text(e); /* full: what is there becomes the base text */
    va_start(ap, fmt);
    part_capture(&e->ctx[e->nctx++], fmt, ap);
    va_end(ap);
    e->current = false;
    return -e->code;
}

/* ----------------------------------------------------- texts formatted now */

int pyu_err_set(pyu_err *e, int code, const char *fmt, ...)
{
    va_list ap;
    if (code < 0)
        code = -code;
    e->code = code;
    e->base.fmt = NULL;
    e->nctx = 0;
    e->current = true;
    va_start(ap, fmt);
    vsnprintf(e->msg, sizeof e->msg, fmt, ap);
    va_end(ap);
    return -code;
}

int pyu_err_ctx(pyu_err *e, const char *fmt, ...)
{
    char prefix[PYU_ERRMSG_MAX / 2];
    va_list ap;
    pyu_err_text(e);
    va_start(ap, fmt);
    vsnprintf(prefix, sizeof prefix, fmt, ap);
    va_end(ap);
    size_t pl = strlen(prefix), ml = strnlen(e->msg, sizeof e->msg - 1);
    size_t room = sizeof e->msg - 1 - (pl + 2);
    if (ml > room)
        ml = room;
    memmove(e->msg + pl + 2, e->msg, ml);
    e->msg[pl + 2 + ml] = '\0';
    memcpy(e->msg, prefix, pl);
    e->msg[pl] = ':';
    e->msg[pl + 1] = ' ';
    if (e->code == PYU_E_OK)
        e->code = PYU_E_IO;
    return -e->code;
}
