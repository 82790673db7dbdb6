/* Error codes, their texts, and the session's error record. */
#include "internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

int pyu_err_set(pyu_err *e, int code, const char *fmt, ...)
{
    va_list ap;
    if (code < 0)
        code = -code;
    e->code = code;
    va_start(ap, fmt);
    vsnprintf(e->msg, sizeof e->msg, fmt, ap);
    va_end(ap);
    return -code;
}

int pyu_err_ctx(pyu_err *e, const char *fmt, ...)
{
    char prefix[PYU_ERRMSG_MAX / 2];
    va_list ap;
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
