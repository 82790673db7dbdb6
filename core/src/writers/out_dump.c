/* Rendering a dump: traceback-like text and JSON.  Every front end (the
 * CLI and both debugger plugins) prints through these, so their output is
 * identical. */
#include "../internal.h"

#include <inttypes.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------ a frame */

static void jo_int_or_null(pyu_json_out *o, const char *key, int v, int none)
{
    if (v == none)
        pyu_jo_null(o, key);
    else
        pyu_jo_int(o, key, v);
}

/* (the dump's and the task JSON's frame objects; changed: the dump's
 * "source_changed", SOURCE_UNSAID to leave it out) */
#define SOURCE_UNSAID (-2)
static void jo_frame(pyu_json_out *o, const pyu_frame *f, bool locals,
                     int changed)
{
    pyu_jo_open(o, NULL, '{', 0);
    pyu_jo_str(o, "function", f->function);
    pyu_jo_str(o, "name", f->name);
    pyu_jo_str(o, "file", f->file);
    bool known = f->line > 0;
    jo_int_or_null(o, "line", known ? f->line : 0, 0);
    jo_int_or_null(o, "end_line", known ? f->end_line : 0, 0);
    jo_int_or_null(o, "column", known ? f->col : -1, -1);
    jo_int_or_null(o, "end_column", known ? f->end_col : -1, -1);
    if (changed == 0 || changed == 1)
        pyu_jo_bool(o, "source_changed", changed);
    else if (changed != SOURCE_UNSAID)
        pyu_jo_null(o, "source_changed");
    if (locals) {
        pyu_jo_open(o, "locals", '[', 0);
        for (size_t i = 0; i < f->nlocals && o->rc == 0; i++) {
            const pyu_var *v = &f->locals[i];
            pyu_jo_open(o, NULL, '{', 0);
            pyu_jo_str(o, "name", v->name);
            pyu_jo_str(o, "kind", pyu_var_kind_name(v->kind));
            pyu_jo_str(o, "type", v->type);
            pyu_jo_str(o, "value", v->value);
            if (v->addr)
                pyu_jo_uint(o, "address", v->addr);
            else
                pyu_jo_null(o, "address");
            pyu_jo_close(o, '{');
        }
        pyu_jo_close(o, '[');
        pyu_jo_str(o, "locals_error", f->locals_error);
    }
    pyu_jo_close(o, '{');
}

void pyu_jo_frame(pyu_json_out *o, const pyu_frame *f)
{
    jo_frame(o, f, false, SOURCE_UNSAID);
}

int pyu_frame_emit(const pyu_frame *f, int with_locals,
                   const pyu_json_sink *sink)
{
    pyu_json_out o = {sink, 0};
    jo_frame(&o, f, with_locals != 0, SOURCE_UNSAID);
    return o.rc;
}

/* ------------------------------------------------------------ source lines */

#define SRC_CACHE 16

typedef struct src_file {
    char *path;     /* owned; NULL: an empty slot */
    pyu_source src; /* (source_file.c) */
} src_file;

typedef struct src_cache {
    src_file f[SRC_CACHE];
    unsigned next;
    const char *root; /* the dump's source_root */
    const pyu_process *process;
    bool stat_only; /* (JSON: the files' times, not their text) */
} src_cache;

static const pyu_source *src_load(src_cache *c, const char *path)
{
    for (unsigned i = 0; i < SRC_CACHE; i++)
        if (c->f[i].path && strcmp(c->f[i].path, path) == 0)
            return &c->f[i].src;
    src_file *f = &c->f[c->next++ % SRC_CACHE];
    free(f->path);
    pyu_source_free(&f->src);
    f->path = strdup(path);
    pyu_source_load(c->root, path, c->process, c->stat_only, &f->src);
    return &f->src;
}

static void src_free(src_cache *c)
{
    for (unsigned i = 0; i < SRC_CACHE; i++) {
        free(c->f[i].path);
        pyu_source_free(&c->f[i].src);
    }
}

/* The frame's lines in the target's version's traceback form, or why
 * they are not shown; nothing when the file cannot be read. */
static void print_source(FILE *out, src_cache *c, const pyu_frame *fr)
{
    const pyu_source *f = src_load(c, fr->file);
    if (!f->text || fr->line <= 0)
        return;
    if (f->changed == 1) {
        fprintf(out, "    [source not shown: the file changed after the "
                     "%s]\n", c->process->source_time_core
                                ? "core was written" : "process started");
        return;
    }
    int major = 0, minor = 0, micro = 0;
    int n = sscanf(c->process ? c->process->python : "", "%d.%d.%d", &major,
                   &minor, &micro);
    if (n < 2 || major != 3 || micro < 0 || micro > 99)
        minor = micro = 0;
    pyu_source_lines(out, f->text, f->len, minor * 100 + micro, fr->line,
                     fr->end_line, fr->col, fr->end_col);
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

const char *pyu_status_name(unsigned bit, int text)
{
    for (size_t i = 0; i < NSTATUS; i++)
        if (status_names[i].bit == bit)
            return text ? status_names[i].text : status_names[i].json;
    return NULL;
}

const char *pyu_trunc_name(int truncated)
{
    switch (truncated) {
    case PYU_TRUNC_DEPTH:
        return "depth";
    case PYU_TRUNC_LOOP:
        return "loop";
    case PYU_TRUNC_TASKS:
        return "tasks";
    default:
        return NULL;
    }
}

/* Frames a traceback folds together: the same place (and no variables to
 * show, which differ from call to call). */
static bool same_frame(const pyu_frame *a, const pyu_frame *b, bool locals)
{
    return !locals && a->line == b->line && strcmp(a->file, b->file) == 0 &&
           strcmp(a->function, b->function) == 0;
}

/* A frame's variables under its lines: arguments, then the others. */
int pyu_frame_write_locals(const pyu_frame *f, FILE *out)
{
    if (f->locals_error) {
        fprintf(out, "      [variables not shown: %s]\n", f->locals_error);
        return ferror(out) ? -PYU_E_IO : 0;
    }
    for (int args = 1; args >= 0; args--) {
        bool head = false;
        for (size_t i = 0; i < f->nlocals; i++) {
            const pyu_var *v = &f->locals[i];
            if ((v->kind == PYU_VAR_ARGUMENT) != args)
                continue;
            if (!head)
                fputs(args ? "      Arguments:\n" : "      Locals:\n", out);
            head = true;
            fprintf(out, "        %s = %s\n", v->name, v->value);
        }
    }
    return ferror(out) ? -PYU_E_IO : 0;
}

#define RECURSIVE_CUTOFF 3 /* as CPython's traceback module */

/* One Python frame: its line, its source line, its variables. */
static void print_py_frame(FILE *out, const pyu_frame *f, src_cache *src,
                           unsigned flags, bool locals)
{
    if (f->line > 0)
        fprintf(out, "  File \"%s\", line %d, in %s\n", f->file, f->line,
                f->function);
    else
        fprintf(out, "  File \"%s\", in %s\n", f->file, f->function);
    if (!(flags & PYU_TEXT_NO_SOURCE))
        print_source(out, src, f);
    if (locals)
        pyu_frame_write_locals(f, out);
}

static void print_native(FILE *out, const pyu_native_entry *e)
{
    const pyu_native_frame *f = &e->frame;
    const char *mod = f->module ? strrchr(f->module, '/') : NULL;
    mod = mod ? mod + 1 : f->module;
    fprintf(out, "  [native] 0x%016" PRIx64 " in ", f->pc);
    if (f->symbol)
        fprintf(out, "%s+0x%" PRIx64, f->symbol, f->offset);
    else
        fputs("??", out);
    if (mod)
        fprintf(out, " (%s)", mod);
    fputs("\n", out);
}

/* A PYU_WALK_NATIVE thread: its native frames, outermost first, each
 * eval-loop frame followed by the Python frames it runs; or with
 * PYU_TEXT_NATIVE_LAST the Python traceback, then the native frames past
 * its innermost Python frame. */
static void print_native_stack(FILE *out, const pyu_thread *t,
                               src_cache *src, unsigned flags, bool locals)
{
    if (t->native_error)
        fprintf(out, "  [native frames not shown: %s]\n", t->native_error);
    if (flags & PYU_TEXT_NATIVE_LAST) {
        for (size_t k = t->nframes; k-- > 0;)
            print_py_frame(out, &t->frames[k], src, flags, locals);
        size_t past = t->nnative;
        for (size_t i = 0; i < t->nnative && past == t->nnative; i++)
            if (t->native[i].python_count)
                past = i;
        for (size_t i = past; i-- > 0;)
            print_native(out, &t->native[i]);
        return;
    }
    if (t->python_unplaced) {
        bool *placed = calloc(t->nframes ? t->nframes : 1, sizeof *placed);
        for (size_t i = 0; placed && i < t->nnative; i++)
            for (size_t k = 0; k < t->native[i].python_count; k++)
                placed[t->native[i].python_first + k] = true;
        fprintf(out, "  [%zu Python frame%s whose native frames were not "
                     "found:]\n", t->python_unplaced,
                t->python_unplaced == 1 ? "" : "s");
        for (size_t k = t->nframes; placed && k-- > 0;)
            if (!placed[k])
                print_py_frame(out, &t->frames[k], src, flags, locals);
        free(placed);
    }
    for (size_t i = t->nnative; i-- > 0;) {
        const pyu_native_entry *e = &t->native[i];
        print_native(out, e);
        for (size_t k = e->python_count; k-- > 0;)
            print_py_frame(out, &t->frames[e->python_first + k], src, flags,
                           locals);
    }
}

static void print_thread(FILE *out, const pyu_thread *t, src_cache *src,
                         unsigned flags, const pyu_dump *d)
{
    bool locals = d->has_locals;
    fprintf(out, "Thread 0x%" PRIx64, t->thread_id);
    if (t->name) { /* (threading's name, quoted; control bytes shown as ?) */
        fputs(" \"", out);
        for (const char *c = t->name; *c; c++)
            fputc((unsigned char)*c < 0x20 || *c == 0x7f ? '?' : *c, out);
        fputc('"', out);
    }
    fprintf(out, " (native %" PRIu64, t->native_thread_id);
    if (t->main)
        fputs(", main thread", out);
    if (t->interpreter_id != 0)
        fprintf(out, ", interpreter %" PRId64, t->interpreter_id);
    fputs(")", out);
    const char *sep = ": ";
    if (t->crashed) {
        const char *name = sigabbrev_np(d->process.signal);
        if (name)
            fprintf(out, ": received SIG%s", name);
        else
            fprintf(out, ": received signal %d", d->process.signal);
        sep = ", ";
    }
    for (size_t i = 0; i < NSTATUS; i++)
        if (t->status & status_names[i].bit) {
            fprintf(out, "%s%s", sep, status_names[i].text);
            sep = ", ";
        }
    fputs("\n", out);
    if (t->nframes == 0 && !t->error && !t->nnative) {
        if (t->native_error)
            fprintf(out, "  [native frames not shown: %s]\n",
                    t->native_error);
        fputs("  (no Python frames)\n", out);
        return;
    }
    fputs("Traceback (most recent call last):\n", out);
    if (t->truncated == PYU_TRUNC_DEPTH)
        fprintf(out, "  [older frames not shown: the stack is deeper than "
                     "%d frames]\n", PYU_MAX_FRAMES);
    else if (t->truncated == PYU_TRUNC_LOOP)
        fputs("  [older frames not shown: the frame chain loops]\n", out);
    else if (t->truncated == PYU_TRUNC_TASKS)
        fprintf(out, "  [frames not shown: the chain of awaiting tasks is cut "
                     "(more than %d tasks, a loop, or a coroutine stack "
                     "deeper than %d frames)]\n",
                PYU_MAX_ASYNC_LINKS, PYU_MAX_CORO_DEPTH);
    if (t->error)
        fprintf(out, "  [older frames not shown: %s]\n", t->error);
    if (d->has_native) {
        print_native_stack(out, t, src, flags, locals);
        return;
    }
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
        if (last && same_frame(last, f, locals)) {
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
        print_py_frame(out, f, src, flags, locals);
    }
    if (repeat >= RECURSIVE_CUTOFF)
        fprintf(out, "  [Previous line repeated %zu more time%s]\n",
                repeat - RECURSIVE_CUTOFF + 1,
                repeat - RECURSIVE_CUTOFF + 1 == 1 ? "" : "s");
}

int pyu_dump_write_text(const pyu_dump *d, FILE *out, unsigned flags)
{
    src_cache src = {.root = d->source_root, .process = &d->process};
    if (d->process.pid > 0)
        fprintf(out, "Process %d: ", d->process.pid);
    fprintf(out, "CPython %s%s, %zu thread%s", d->process.python,
            d->process.free_threaded ? " (free-threaded)" : "", d->nthreads,
            d->nthreads == 1 ? "" : "s");
    if (d->process.signal) {
        const char *name = sigabbrev_np(d->process.signal);
        if (name)
            fprintf(out, "; killed by SIG%s (signal %d)", name,
                    d->process.signal);
        else
            fprintf(out, "; killed by signal %d", d->process.signal);
        fprintf(out, " in native thread %" PRIu64, d->process.signal_thread);
    }
    fputs("\n", out);
    /* the thread that received the fatal signal first */
    for (int crashed = 1; crashed >= 0; crashed--)
        for (size_t i = 0; i < d->nthreads; i++)
            if (!d->threads[i].crashed == !crashed) {
                fputs("\n", out);
                print_thread(out, &d->threads[i], &src, flags, d);
            }
    if (d->threads_truncated)
        fputs("\n[more threads not shown: the thread list is longer than "
              "the limit or unreadable past this point]\n", out);
    src_free(&src);
    return ferror(out) ? -PYU_E_IO : 0;
}

/* ------------------------------------------------------------------- JSON */

static void jo_native(pyu_json_out *o, const pyu_thread *t)
{
    pyu_jo_open(o, "native", '[', PYU_JSON_ROWS);
    for (size_t k = 0; k < t->nnative && o->rc == 0; k++) {
        const pyu_native_entry *e = &t->native[k];
        pyu_jo_open(o, NULL, '{', 0);
        pyu_jo_uint(o, "pc", e->frame.pc);
        pyu_jo_uint(o, "sp", e->frame.sp);
        pyu_jo_str(o, "symbol", e->frame.symbol);
        pyu_jo_uint(o, "offset", e->frame.offset);
        pyu_jo_str(o, "module", e->frame.module);
        if (e->python_count) {
            pyu_jo_open(o, "python_frames", '[', 0);
            pyu_jo_uint(o, NULL, e->python_first);
            pyu_jo_uint(o, NULL, e->python_count);
            pyu_jo_close(o, '[');
        } else {
            pyu_jo_null(o, "python_frames");
        }
        pyu_jo_close(o, '{');
    }
    pyu_jo_close(o, '[');
    pyu_jo_uint(o, "python_unplaced", t->python_unplaced);
    pyu_jo_str(o, "native_error", t->native_error);
}

static void jo_thread(pyu_json_out *o, const pyu_dump *d, const pyu_thread *t,
                      src_cache *src)
{
    pyu_jo_open(o, NULL, '{', 0);
    pyu_jo_int(o, "interpreter_id", t->interpreter_id);
    pyu_jo_uint(o, "thread_id", t->thread_id);
    pyu_jo_uint(o, "native_thread_id", t->native_thread_id);
    if (t->name)
        pyu_jo_str(o, "name", t->name);
    else
        pyu_jo_null(o, "name");
    pyu_jo_bool(o, "main", t->main);
    pyu_jo_open(o, "status", '[', 0);
    for (size_t k = 0; k < NSTATUS; k++)
        if (t->status & status_names[k].bit)
            pyu_jo_str(o, NULL, status_names[k].json);
    pyu_jo_close(o, '[');
    pyu_jo_open(o, "frames", '[', PYU_JSON_ROWS);
    for (size_t k = 0; k < t->nframes && o->rc == 0; k++)
        jo_frame(o, &t->frames[k], d->has_locals,
                 src_load(src, t->frames[k].file)->changed);
    pyu_jo_close(o, '[');
    if (d->has_async) {
        pyu_jo_open(o, "tasks", '[', 0);
        for (size_t k = 0; k < t->ntasks; k++) {
            pyu_jo_open(o, NULL, '{', 0);
            pyu_jo_uint(o, "id", t->tasks[k].task_id);
            pyu_jo_str(o, "name", t->tasks[k].task_name);
            pyu_jo_uint(o, "first_frame", t->tasks[k].first_frame);
            pyu_jo_close(o, '{');
        }
        pyu_jo_close(o, '[');
    }
    if (d->has_native)
        jo_native(o, t);
    pyu_jo_bool(o, "crashed", t->crashed);
    const char *cut = pyu_trunc_name(t->truncated);
    if (cut)
        pyu_jo_str(o, "truncated", cut);
    else
        pyu_jo_bool(o, "truncated", 0);
    pyu_jo_str(o, "error", t->error);
    pyu_jo_close(o, '{');
}

int pyu_dump_emit(const pyu_dump *d, const pyu_json_sink *sink)
{
    pyu_json_out o = {sink, 0};
    src_cache src = {.root = d->source_root, .process = &d->process,
                     .stat_only = true};
    pyu_jo_open(&o, NULL, '{', 0);
    pyu_jo_process_head(&o, &d->process);
    pyu_jo_open(&o, "threads", '[', PYU_JSON_ROWS | PYU_JSON_ROWS_END);
    for (size_t i = 0; i < d->nthreads && o.rc == 0; i++)
        jo_thread(&o, d, &d->threads[i], &src);
    pyu_jo_close(&o, '[');
    pyu_jo_bool(&o, "threads_truncated", d->threads_truncated);
    pyu_jo_process_signal(&o, &d->process);
    pyu_jo_close(&o, '{');
    src_free(&src);
    return o.rc;
}

int pyu_dump_write_json(const pyu_dump *d, FILE *out)
{
    pyu_json_text t;
    pyu_json_sink sink = pyu_json_text_sink(&t, out);
    int rc = pyu_dump_emit(d, &sink);
    return rc < 0 ? rc : ferror(out) ? -PYU_E_IO : 0;
}
