/* Rendering a dump: traceback-like text and JSON.  Every front end (the
 * CLI now, the debugger plugins planned) prints through these, so their
 * output is identical. */
#include "internal.h"

#include <inttypes.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

/* ------------------------------------------------------------ source lines */

#define SRC_CACHE 16
#define SRC_MAX (8u << 20)

typedef struct src_file {
    char *path;
    char *text; /* NULL when unreadable */
    size_t len;
} src_file;

typedef struct src_cache {
    src_file f[SRC_CACHE];
    unsigned next;
} src_cache;

static const src_file *src_load(src_cache *c, const char *path)
{
    for (unsigned i = 0; i < SRC_CACHE; i++)
        if (c->f[i].path && strcmp(c->f[i].path, path) == 0)
            return &c->f[i];
    src_file *f = &c->f[c->next++ % SRC_CACHE];
    free(f->path);
    free(f->text);
    memset(f, 0, sizeof *f);
    f->path = strdup(path);
    /* the path comes from the target: never block on a FIFO or a device */
    int fd = path[0] ? open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC) : -1;
    struct stat st;
    if (fd >= 0 && fstat(fd, &st) == 0 && S_ISREG(st.st_mode) &&
        st.st_size <= (off_t)SRC_MAX) {
        f->text = malloc((size_t)st.st_size + 1);
        size_t got = 0;
        while (f->text && got < (size_t)st.st_size) {
            ssize_t k = read(fd, f->text + got, (size_t)st.st_size - got);
            if (k <= 0)
                break;
            got += (size_t)k;
        }
        if (f->text) {
            f->len = got;
            f->text[got] = '\0';
        }
    }
    if (fd >= 0)
        close(fd);
    return f;
}

static void src_free(src_cache *c)
{
    for (unsigned i = 0; i < SRC_CACHE; i++) {
        free(c->f[i].path);
        free(c->f[i].text);
    }
}

/* Writes source line `line` of path, stripped, or nothing. */
static void print_source(FILE *out, src_cache *c, const char *path, int line)
{
    const src_file *f = src_load(c, path);
    if (!f->text || line <= 0)
        return;
    const char *p = f->text, *end = f->text + f->len;
    for (int n = 1; n < line && p < end; n++) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        if (!nl)
            return;
        p = nl + 1;
    }
    if (p >= end)
        return;
    const char *e = memchr(p, '\n', (size_t)(end - p));
    if (!e)
        e = end;
    while (p < e && (*p == ' ' || *p == '\t'))
        p++;
    while (e > p && (e[-1] == ' ' || e[-1] == '\t' || e[-1] == '\r'))
        e--;
    if (e > p)
        fprintf(out, "    %.*s\n", (int)(e - p), p);
}

/* ------------------------------------------------------------------- text */

static const struct {
    unsigned bit;
    const char *json, *text;
} status_names[] = {
    {PYU_STATUS_HAS_GIL, "has_gil", "holds the GIL"},
    {PYU_STATUS_GIL_REQUESTED, "gil_requested", "waiting for the GIL"},
    {PYU_STATUS_ON_CPU, "on_cpu", "on CPU"},
    {PYU_STATUS_GC, "gc", "running GC"},
    {PYU_STATUS_EXCEPTION, "exception", "handling an exception"},
};
#define NSTATUS (sizeof status_names / sizeof status_names[0])

static bool same_frame(const pyu_frame *a, const pyu_frame *b)
{
    return a->line == b->line && strcmp(a->file, b->file) == 0 &&
           strcmp(a->function, b->function) == 0;
}

#define RECURSIVE_CUTOFF 3 /* as CPython's traceback module */

static void print_thread(FILE *out, const pyu_thread *t, src_cache *src,
                         unsigned flags)
{
    fprintf(out, "Thread 0x%" PRIx64 " (native %" PRIu64, t->thread_id,
            t->native_thread_id);
    if (t->main)
        fputs(", main thread", out);
    if (t->interpreter_id != 0)
        fprintf(out, ", interpreter %" PRId64, t->interpreter_id);
    fputs(")", out);
    const char *sep = ": ";
    for (size_t i = 0; i < NSTATUS; i++)
        if (t->status & status_names[i].bit) {
            fprintf(out, "%s%s", sep, status_names[i].text);
            sep = ", ";
        }
    fputs("\n", out);
    if (t->nframes == 0 && !t->error) {
        fputs("  (no Python frames)\n", out);
        return;
    }
    fputs("Traceback (most recent call last):\n", out);
    if (t->truncated == 1)
        fprintf(out, "  [older frames not shown: the stack is deeper than "
                     "%d frames]\n", PYU_MAX_FRAMES);
    else if (t->truncated == 2)
        fputs("  [older frames not shown: the frame chain loops]\n", out);
    if (t->error)
        fprintf(out, "  [older frames not shown: %s]\n", t->error);
    const pyu_frame *last = NULL;
    size_t repeat = 0, link = t->ntasks;
    for (size_t k = t->nframes; k-- > 0;) {
        const pyu_frame *f = &t->frames[k];
        /* --async: the frames of each task (outermost awaiter first) under
         * a line naming it */
        if (link > 0 && k + 1 == (link < t->ntasks ? t->tasks[link].first_frame
                                                    : t->nframes)) {
            link--;
            if (repeat >= RECURSIVE_CUTOFF)
                fprintf(out, "  [Previous line repeated %zu more time%s]\n",
                        repeat - RECURSIVE_CUTOFF + 1,
                        repeat - RECURSIVE_CUTOFF + 1 == 1 ? "" : "s");
            last = NULL;
            repeat = 0;
            fprintf(out, "  [task '%s' (0x%" PRIx64 ") %s]\n",
                    t->tasks[link].task_name, t->tasks[link].task_id,
                    link ? "awaits:" : "runs:");
        }
        if (last && same_frame(last, f)) {
            if (++repeat >= RECURSIVE_CUTOFF)
                continue;
        } else {
            if (repeat >= RECURSIVE_CUTOFF)
                fprintf(out, "  [Previous line repeated %zu more time%s]\n",
                        repeat - RECURSIVE_CUTOFF + 1,
                        repeat - RECURSIVE_CUTOFF + 1 == 1 ? "" : "s");
            repeat = 0;
            last = f;
        }
        if (f->line > 0)
            fprintf(out, "  File \"%s\", line %d, in %s\n", f->file, f->line,
                    f->function);
        else
            fprintf(out, "  File \"%s\", in %s\n", f->file, f->function);
        if (!(flags & PYU_TEXT_NO_SOURCE))
            print_source(out, src, f->file, f->line);
    }
    if (repeat >= RECURSIVE_CUTOFF)
        fprintf(out, "  [Previous line repeated %zu more time%s]\n",
                repeat - RECURSIVE_CUTOFF + 1,
                repeat - RECURSIVE_CUTOFF + 1 == 1 ? "" : "s");
}

int pyu_dump_write_text(const pyu_dump *d, FILE *out, unsigned flags)
{
    src_cache src = {0};
    if (d->pid > 0)
        fprintf(out, "Process %d: ", d->pid);
    fprintf(out, "CPython %s%s, %zu thread%s", d->version,
            d->free_threaded ? " (free-threaded)" : "", d->nthreads,
            d->nthreads == 1 ? "" : "s");
    if (d->signal) {
        const char *name = sigabbrev_np(d->signal);
        if (name)
            fprintf(out, "; killed by SIG%s (signal %d)", name, d->signal);
        else
            fprintf(out, "; killed by signal %d", d->signal);
        fprintf(out, " in native thread %" PRIu64, d->signal_thread);
    }
    fputs("\n", out);
    for (size_t i = 0; i < d->nthreads; i++) {
        fputs("\n", out);
        print_thread(out, &d->threads[i], &src, flags);
    }
    if (d->threads_truncated)
        fputs("\n[more threads not shown: the thread list is longer than "
              "the limit or unreadable past this point]\n", out);
    src_free(&src);
    return ferror(out) ? -PYU_E_IO : 0;
}

/* ------------------------------------------------------------------- JSON */

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

void pyu_json_opt_str(FILE *out, const char *s)
{
    if (s)
        pyu_json_str(out, s);
    else
        fputs("null", out);
}

void pyu_json_signal_end(FILE *out, int signo, uint64_t tid)
{
    fputs(", \"signal\": ", out);
    if (signo)
        fprintf(out, "{\"number\": %d, \"native_thread_id\": %" PRIu64 "}}\n",
                signo, tid);
    else
        fputs("null}\n", out);
}

void pyu_json_frame(FILE *out, const pyu_frame *f)
{
    fputs("{\"function\": ", out);
    pyu_json_str(out, f->function);
    fputs(", \"name\": ", out);
    pyu_json_str(out, f->name);
    fputs(", \"file\": ", out);
    pyu_json_str(out, f->file);
    if (f->line > 0)
        fprintf(out, ", \"line\": %d}", f->line);
    else
        fputs(", \"line\": null}", out);
}

int pyu_dump_write_json(const pyu_dump *d, FILE *out)
{
    fprintf(out, "{\"pid\": %d, \"python\": {\"version\": ", d->pid);
    pyu_json_str(out, d->version);
    fprintf(out, ", \"free_threaded\": %s}, \"threads\": [",
            d->free_threaded ? "true" : "false");
    for (size_t i = 0; i < d->nthreads; i++) {
        const pyu_thread *t = &d->threads[i];
        fprintf(out,
                "%s\n  {\"interpreter_id\": %" PRId64 ", \"thread_id\": %" PRIu64
                ", \"native_thread_id\": %" PRIu64 ", \"main\": %s, "
                "\"status\": [",
                i ? "," : "", t->interpreter_id, t->thread_id,
                t->native_thread_id, t->main ? "true" : "false");
        const char *sep = "";
        for (size_t k = 0; k < NSTATUS; k++)
            if (t->status & status_names[k].bit) {
                fprintf(out, "%s\"%s\"", sep, status_names[k].json);
                sep = ", ";
            }
        fputs("], \"frames\": [", out);
        for (size_t k = 0; k < t->nframes; k++) {
            fputs(k ? ",\n    " : "\n    ", out);
            pyu_json_frame(out, &t->frames[k]);
        }
        if (d->has_async) {
            fputs("], \"tasks\": [", out);
            for (size_t k = 0; k < t->ntasks; k++) {
                fprintf(out, "%s{\"id\": %" PRIu64 ", \"name\": ", k ? ", " : "",
                        t->tasks[k].task_id);
                pyu_json_str(out, t->tasks[k].task_name);
                fprintf(out, ", \"first_frame\": %zu}", t->tasks[k].first_frame);
            }
        }
        fprintf(out, "], \"truncated\": %s, \"error\": ",
                t->truncated ? (t->truncated == 2 ? "\"loop\"" : "\"depth\"")
                             : "false");
        pyu_json_opt_str(out, t->error);
        fputs("}", out);
    }
    fprintf(out, "\n], \"threads_truncated\": %s",
            d->threads_truncated ? "true" : "false");
    pyu_json_signal_end(out, d->signal, d->signal_thread);
    return ferror(out) ? -PYU_E_IO : 0;
}
