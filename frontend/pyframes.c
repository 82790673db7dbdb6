/* The text of the debugger commands over one thread's Python frames (see
 * pyframes.h): py-bt, py-bt-full, the frame py-up and py-down print,
 * py-list, py-locals, py-print.  The formats are those of CPython's
 * Tools/gdb/libpython.py; sources are read as the dump reads them
 * (pyu_source_read). */
#include "pyframes.h"

#include "command.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------ source files */

#define SOURCES 8 /* files a backtrace keeps open at a time */

typedef struct sources {
    const pyu_dump *d;
    const char *path[SOURCES]; /* points into d; NULL: an empty slot */
    pyu_source src[SOURCES];
    unsigned next;
} sources;

static const pyu_source *source_of(sources *c, const char *file)
{
    for (unsigned i = 0; i < SOURCES; i++)
        if (c->path[i] && strcmp(c->path[i], file) == 0)
            return &c->src[i];
    unsigned i = c->next++ % SOURCES;
    pyu_source_free(&c->src[i]);
    c->path[i] = file;
    pyu_source_read(c->d, file, &c->src[i]);
    return &c->src[i];
}

static void sources_free(sources *c)
{
    for (unsigned i = 0; i < SOURCES; i++)
        pyu_source_free(&c->src[i]);
}

/* What the process's source time is: its start, or a core's writing. */
static const char *since(const pyu_dump *d)
{
    return d->process.source_time_core ? "core was written"
                                       : "process started";
}

/* Line `line` (1-based) of text: its start and length without the line
 * end; false when the text has fewer lines. */
static bool line_of(const char *text, size_t len, int line, const char **at,
                    size_t *n)
{
    const char *p = text, *end = text + len;
    for (int k = 1; k < line; k++) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        if (!nl)
            return false;
        p = nl + 1;
    }
    if (p >= end && line > 1)
        return false;
    const char *nl = memchr(p, '\n', (size_t)(end - p));
    *at = p;
    *n = (size_t)((nl ? nl : end) - p);
    return true;
}

static bool space(char c)
{
    return c == ' ' || c == '\t' || c == '\r' || c == '\f' || c == '\v';
}

/* The frame's source line, stripped, indented four spaces (as python-gdb's
 * py-bt); the dump's note when the file changed; nothing when the file or
 * the line cannot be read. */
static void source_line(FILE *out, sources *c, const pyu_frame *f)
{
    if (f->line <= 0)
        return;
    const pyu_source *s = source_of(c, f->file);
    if (!s->text)
        return;
    if (s->changed == 1) {
        fprintf(out, "    [source not shown: the file changed after the "
                     "%s]\n", since(c->d));
        return;
    }
    const char *at;
    size_t n;
    if (!line_of(s->text, s->len, f->line, &at, &n))
        return;
    while (n && space(*at))
        at++, n--;
    while (n && space(at[n - 1]))
        n--;
    if (n)
        fprintf(out, "    %.*s\n", (int)n, at);
}

/* ----------------------------------------------------------- frames */

static void location(FILE *out, const pyu_frame *f)
{
    if (f->line > 0)
        fprintf(out, "File \"%s\", line %d, in %s\n", f->file, f->line,
                f->function);
    else
        fprintf(out, "File \"%s\", line ?, in %s\n", f->file, f->function);
}

static void frame_head(FILE *out, sources *c, const pyu_thread *t, size_t k)
{
    fprintf(out, "#%zu ", k);
    location(out, &t->frames[k]);
    source_line(out, c, &t->frames[k]);
}

void pyu_pyframes_frame(FILE *out, const pyu_dump *d, const pyu_thread *t,
                        size_t k)
{
    sources c = {.d = d};
    if (k < t->nframes)
        frame_head(out, &c, t, k);
    sources_free(&c);
}

void pyu_pyframes_bt(FILE *out, const pyu_dump *d, const pyu_thread *t,
                     size_t selected, int full)
{
    sources c = {.d = d};
    fputs("Traceback (most recent call first):\n", out);
    for (size_t k = 0; k < t->nframes; k++) {
        if (full) {
            frame_head(out, &c, t, k);
            if (d->has_locals)
                pyu_frame_write_locals(&t->frames[k], out);
            continue;
        }
        fputs(k == selected ? "* " : "  ", out);
        location(out, &t->frames[k]);
        source_line(out, &c, &t->frames[k]);
    }
    if (t->truncated == PYU_TRUNC_DEPTH)
        fputs("  [older frames not shown: the stack is deeper than the "
              "frames pyunwind reads]\n", out);
    else if (t->truncated == PYU_TRUNC_LOOP)
        fputs("  [older frames not shown: the frame chain loops]\n", out);
    if (t->error)
        fprintf(out, "  [older frames not shown: %s]\n", t->error);
    sources_free(&c);
}

int pyu_pyframes_list(FILE *out, const pyu_dump *d, const pyu_thread *t,
                      size_t k, int first, int last, char *msg, size_t msglen)
{
    const pyu_frame *f = &t->frames[k];
    if (first <= 0) {
        if (f->line <= 0) {
            snprintf(msg, msglen, "py-list: the line of frame #%zu (%s) is "
                     "not known", k, f->function);
            return PYU_EXIT_TARGET;
        }
        first = f->line - 5;
        last = f->line + 5;
    }
    if (first < 1)
        first = 1;
    pyu_source s;
    int rc = pyu_source_read(d, f->file, &s);
    int ex = PYU_EXIT_OK;
    if (rc < 0) {
        snprintf(msg, msglen, "py-list: cannot read %s: %s", f->file,
                 s.error == EINVAL ? "not a regular file"
                 : s.error == EFBIG ? "larger than 8 MiB"
                                    : strerror(s.error ? s.error : EIO));
        ex = rc == -PYU_E_NOMEM ? PYU_EXIT_INTERNAL : PYU_EXIT_TARGET;
    } else if (s.changed == 1) {
        snprintf(msg, msglen, "py-list: source not shown: %s changed after "
                 "the %s", f->file, since(d));
        ex = PYU_EXIT_TARGET;
    } else {
        for (int n = first; n <= last; n++) {
            const char *at;
            size_t len;
            if (!line_of(s.text, s.len, n, &at, &len))
                break;
            char num[16];
            snprintf(num, sizeof num, "%s%d", n == f->line ? ">" : "", n);
            fprintf(out, "%4s    %.*s\n", num, (int)len, at);
        }
    }
    pyu_source_free(&s);
    return ex;
}

/* Why frame k's variables cannot be shown, in msg; or 0 when they can. */
static int no_locals(const pyu_dump *d, const pyu_thread *t, size_t k,
                     const char *command, char *msg, size_t msglen)
{
    const pyu_frame *f = &t->frames[k];
    if (!d->has_locals) {
        snprintf(msg, msglen, "%s: the dump was taken without variables",
                 command);
        return PYU_EXIT_INTERNAL;
    }
    if (f->locals_error) {
        snprintf(msg, msglen, "%s: the variables of frame #%zu (%s) cannot "
                 "be read: %s", command, k, f->function, f->locals_error);
        return PYU_EXIT_TARGET;
    }
    return PYU_EXIT_OK;
}

int pyu_pyframes_locals(FILE *out, const pyu_dump *d, const pyu_thread *t,
                        size_t k, char *msg, size_t msglen)
{
    int ex = no_locals(d, t, k, "py-locals", msg, msglen);
    if (ex != PYU_EXIT_OK)
        return ex;
    const pyu_frame *f = &t->frames[k];
    for (int args = 1; args >= 0; args--)
        for (size_t i = 0; i < f->nlocals; i++)
            if ((f->locals[i].kind == PYU_VAR_ARGUMENT) == args)
                fprintf(out, "%s = %s\n", f->locals[i].name,
                        f->locals[i].value);
    return PYU_EXIT_OK;
}

/* EXPR as Python's repr writes a str: in single quotes unless it holds
 * one and no double quote. */
static void quoted(FILE *out, const char *expr)
{
    char q = strchr(expr, '\'') && !strchr(expr, '"') ? '"' : '\'';
    fputc(q, out);
    for (const char *p = expr; *p; p++) {
        if (*p == q || *p == '\\')
            fputc('\\', out);
        fputc(*p, out);
    }
    fputc(q, out);
}

int pyu_pyframes_print(FILE *out, pyu_session *s, const pyu_dump *d,
                       const pyu_thread *t, size_t k, const char *expr,
                       char *msg, size_t msglen)
{
    const pyu_frame *f = &t->frames[k];
    if (s && f->addr) {
        pyu_lookup *found = malloc(sizeof *found);
        if (!found) {
            snprintf(msg, msglen, "py-print: out of memory");
            return PYU_EXIT_INTERNAL;
        }
        int rc = pyu_frame_lookup(s, f->addr, expr, found);
        if (rc == 0) {
            fprintf(out, "%s ", pyu_scope_name(found->scope));
            quoted(out, expr);
            fprintf(out, " = %s\n", found->value);
        } else {
            snprintf(msg, msglen, "%s", pyu_errmsg(s));
        }
        free(found);
        return rc == -PYU_E_INVAL ? PYU_EXIT_USAGE : pyu_cmd_exit_for(rc);
    }
    int ex = no_locals(d, t, k, "py-print", msg, msglen);
    if (ex != PYU_EXIT_OK)
        return ex;
    for (size_t i = 0; i < f->nlocals; i++)
        if (strcmp(f->locals[i].name, expr) == 0) {
            fputs("local ", out);
            quoted(out, expr);
            fprintf(out, " = %s\n", f->locals[i].value);
            return PYU_EXIT_OK;
        }
    snprintf(msg, msglen, "'%s' not found", expr);
    return PYU_EXIT_USAGE;
}

/* ---------------------------------------------------- entry frames */

typedef struct entries_walk {
    uint64_t tid;     /* in: the thread */
    uint64_t *entry;  /* out: borrowed, n slots */
    size_t n;
    size_t next;      /* Python frames seen */
    size_t pending;   /* the first of them no entry frame follows yet */
    bool found;
} entries_walk;

static int entries_thread(void *arg, const pyu_walk_thread *t)
{
    entries_walk *w = arg;
    if (t->native_thread_id != w->tid)
        return PYU_WALK_SKIP;
    w->found = true;
    w->pending = w->next; /* (no entry frame of this one follows those) */
    return PYU_WALK_NEXT;
}

static int entries_frame(void *arg, const pyu_walk_frame *f)
{
    entries_walk *w = arg;
    if (f->owner != PYU_OWNER_ENTRY) {
        w->next++;
        return PYU_WALK_NEXT;
    }
    for (; w->pending < w->next && w->pending < w->n; w->pending++)
        w->entry[w->pending] = f->addr;
    w->pending = w->next;
    return w->pending >= w->n ? PYU_WALK_SKIP : PYU_WALK_NEXT;
}

int pyu_pyframes_entries(pyu_session *s, uint64_t tid, uint64_t *entry,
                         size_t n)
{
    entries_walk w = {.tid = tid, .entry = entry, .n = n};
    for (size_t k = 0; k < n; k++)
        entry[k] = 0;
    pyu_walker walker = {.flags = PYU_WALK_ENTRY_FRAMES,
                         .thread = entries_thread,
                         .frame = entries_frame};
    int rc = pyu_walk(s, &walker, &w);
    if (rc < 0)
        return rc;
    pyu_python_info py;
    if (pyu_python(s, &py) == 0 && py.version_hex < 0x030b0000)
        for (size_t k = 0; k < w.next && k < n; k++)
            entry[k] = PYU_ENTRY_BY_NAME;
    return w.found ? 0 : 1;
}
