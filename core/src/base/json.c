/* JSON pieces shared by the writers of dumps and task lists. */
#include "../internal.h"

#include <inttypes.h>
#include <stdlib.h>

/* Length of the valid UTF-8 sequence at p (1-4), or 0 when it is not one. */
static size_t utf8_len(const unsigned char *p)
{
    if (p[0] < 0x80)
        return 1;
    size_t n = p[0] >= 0xF0 ? 4 : p[0] >= 0xE0 ? 3 : p[0] >= 0xC2 ? 2 : 0;
    if (n == 0 || p[0] > 0xF4)
        return 0;
    for (size_t i = 1; i < n; i++)
        if ((p[i] & 0xC0) != 0x80)
            return 0;
    if (n == 3 && ((p[0] == 0xE0 && p[1] < 0xA0) ||
                   (p[0] == 0xED && p[1] >= 0xA0)))
        return 0; /* overlong, or an encoded surrogate */
    if (n == 4 && ((p[0] == 0xF0 && p[1] < 0x90) ||
                   (p[0] == 0xF4 && p[1] >= 0x90)))
        return 0;
    return n;
}

/* A JSON string.  Bytes that are not UTF-8 (file names Python keeps with
 * surrogateescape) become \udcXX escapes, which Python's json module turns
 * back into the same str. */
void pyu_json_str(FILE *out, const char *s)
{
    fputc('"', out);
    for (const unsigned char *p = (const unsigned char *)s; *p;) {
        size_t n = utf8_len(p);
        if (n == 0) {
            fprintf(out, "\\udc%02x", *p++);
            continue;
        }
        if (n > 1) {
            fwrite(p, 1, n, out);
            p += n;
            continue;
        }
        switch (*p) {
        case '"':
            fputs("\\\"", out);
            break;
        case '\\':
            fputs("\\\\", out);
            break;
        case '\n':
            fputs("\\n", out);
            break;
        case '\t':
            fputs("\\t", out);
            break;
        case '\r':
            fputs("\\r", out);
            break;
        default:
            if (*p < 0x20)
                fprintf(out, "\\u%04x", *p);
            else
                fputc(*p, out);
        }
        p++;
    }
    fputc('"', out);
}

/* ------------------------------------------------------ the text sink */

/* Before a value (a container too): the separator, the row's line and
 * indentation, or nothing after a key. */
static int text_before(pyu_json_text *t)
{
    if (t->keyed) {
        t->keyed = false;
        return 0;
    }
    if (t->depth == 0)
        return 0;
    unsigned *n = &t->level[t->depth - 1].n;
    if (t->level[t->depth - 1].layout & PYU_JSON_ROWS)
        fprintf(t->out, "%s\n%*s", *n ? "," : "", (int)(2 * t->rows), "");
    else if (*n)
        fputs(", ", t->out);
    ++*n;
    return 0;
}

static int text_open(void *arg, char kind, unsigned layout)
{
    pyu_json_text *t = arg;
    if (t->depth == PYU_JSON_DEPTH)
        return -PYU_E_INVAL;
    text_before(t);
    fputc(kind, t->out);
    t->level[t->depth].n = 0;
    t->level[t->depth].layout = layout;
    t->depth++;
    if (layout & PYU_JSON_ROWS)
        t->rows++;
    return 0;
}

static int text_close(void *arg, char kind)
{
    pyu_json_text *t = arg;
    if (t->depth == 0)
        return -PYU_E_INVAL;
    unsigned layout = t->level[--t->depth].layout;
    if (layout & PYU_JSON_ROWS)
        t->rows--;
    if (layout & PYU_JSON_ROWS_END)
        fprintf(t->out, "\n%*s", (int)(2 * t->rows), "");
    fputc(kind == '{' ? '}' : ']', t->out);
    if (t->depth == 0)
        fputc('\n', t->out);
    return 0;
}

static int text_key(void *arg, const char *key)
{
    pyu_json_text *t = arg;
    text_before(t);
    pyu_json_str(t->out, key);
    fputs(": ", t->out);
    t->keyed = true;
    return 0;
}

static int text_string(void *arg, const char *s)
{
    pyu_json_text *t = arg;
    text_before(t);
    pyu_json_str(t->out, s);
    return 0;
}

static int text_integer(void *arg, int64_t v)
{
    pyu_json_text *t = arg;
    text_before(t);
    fprintf(t->out, "%" PRId64, v);
    return 0;
}

static int text_unsigned(void *arg, uint64_t v)
{
    pyu_json_text *t = arg;
    text_before(t);
    fprintf(t->out, "%" PRIu64, v);
    return 0;
}

static int text_boolean(void *arg, int v)
{
    pyu_json_text *t = arg;
    text_before(t);
    fputs(v ? "true" : "false", t->out);
    return 0;
}

static int text_null(void *arg)
{
    pyu_json_text *t = arg;
    text_before(t);
    fputs("null", t->out);
    return 0;
}

pyu_json_sink pyu_json_text_sink(pyu_json_text *t, FILE *out)
{
    *t = (pyu_json_text){.out = out};
    return (pyu_json_sink){.arg = t,
                           .open = text_open,
                           .close = text_close,
                           .key = text_key,
                           .string = text_string,
                           .integer = text_integer,
                           .unsigned_integer = text_unsigned,
                           .boolean = text_boolean,
                           .null = text_null};
}

/* (the sink and its state in one allocation: the sink first) */
typedef struct text_alloc {
    pyu_json_sink sink;
    pyu_json_text t;
} text_alloc;

pyu_json_sink *pyu_json_text_new(FILE *out)
{
    text_alloc *m = malloc(sizeof *m);
    if (m)
        m->sink = pyu_json_text_sink(&m->t, out);
    return m ? &m->sink : NULL;
}

void pyu_json_text_free(pyu_json_sink *sink)
{
    free(sink); /* (the text_alloc it begins) */
}

/* ------------------------------------------- describing to a sink */

static bool keyed(pyu_json_out *o, const char *key)
{
    if (o->rc == 0 && key)
        o->rc = o->sink->key(o->sink->arg, key);
    return o->rc == 0;
}

void pyu_jo_open(pyu_json_out *o, const char *key, char kind,
                 unsigned layout)
{
    if (keyed(o, key))
        o->rc = o->sink->open(o->sink->arg, kind, layout);
}

void pyu_jo_close(pyu_json_out *o, char kind)
{
    if (o->rc == 0)
        o->rc = o->sink->close(o->sink->arg, kind);
}

void pyu_jo_str(pyu_json_out *o, const char *key, const char *s)
{
    if (keyed(o, key))
        o->rc = s ? o->sink->string(o->sink->arg, s)
                  : o->sink->null(o->sink->arg);
}

void pyu_jo_int(pyu_json_out *o, const char *key, int64_t v)
{
    if (keyed(o, key))
        o->rc = o->sink->integer(o->sink->arg, v);
}

void pyu_jo_uint(pyu_json_out *o, const char *key, uint64_t v)
{
    if (keyed(o, key))
        o->rc = o->sink->unsigned_integer(o->sink->arg, v);
}

void pyu_jo_bool(pyu_json_out *o, const char *key, int v)
{
    if (keyed(o, key))
        o->rc = o->sink->boolean(o->sink->arg, v != 0);
}

void pyu_jo_null(pyu_json_out *o, const char *key)
{
    if (keyed(o, key))
        o->rc = o->sink->null(o->sink->arg);
}

void pyu_jo_process_head(pyu_json_out *o, const pyu_process *p)
{
    pyu_jo_int(o, "pid", p->pid);
    pyu_jo_open(o, "python", '{', 0);
    pyu_jo_str(o, "version", p->python);
    pyu_jo_bool(o, "free_threaded", p->free_threaded);
    pyu_jo_close(o, '{');
}

void pyu_jo_process_signal(pyu_json_out *o, const pyu_process *p)
{
    if (!p->signal) {
        pyu_jo_null(o, "signal");
        return;
    }
    pyu_jo_open(o, "signal", '{', 0);
    pyu_jo_int(o, "number", p->signal);
    pyu_jo_uint(o, "native_thread_id", p->signal_thread);
    pyu_jo_close(o, '{');
}
