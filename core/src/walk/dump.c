/* Dumps: every thread's stack, built by one caller of pyu_walk. */
#include "../internal.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

typedef struct dump_impl {
    pyu_dump pub;
    pyu_session *s;
    pyu_store *store;
    size_t cap_threads;
    size_t cap_frames, cap_tasks; /* of the last thread */
    bool locals;                  /* PYU_WALK_LOCALS */
    bool native;                  /* PYU_WALK_NATIVE */
    uint64_t *entry;              /* the last thread's Python frames: the
                                     entry frame that follows each */
    size_t cap_entry, pending;    /* frames not given an entry yet */
    size_t cap_native;
    pyu_dwfl *names;              /* names for a caller's native frames */
    bool names_made;
} dump_impl;

void pyu_dump_free(pyu_dump *pub)
{
    dump_impl *d = (dump_impl *)pub;
    if (!d)
        return;
    for (size_t i = 0; i < d->pub.nthreads; i++) {
        for (size_t k = 0; k < d->pub.threads[i].nframes; k++)
            free(d->pub.threads[i].frames[k].locals);
        free(d->pub.threads[i].native);
        free(d->pub.threads[i].frames);
        free(d->pub.threads[i].tasks);
    }
    free(d->pub.threads);
    free(d->entry);
    pyu_store_free(d->store);
    free(d);
}

static int nomem(dump_impl *d)
{
    return pyu_fail(&d->s->err, PYU_E_NOMEM, "out of memory");
}

static pyu_thread *last(dump_impl *d)
{
    return &d->pub.threads[d->pub.nthreads - 1];
}

static int on_interp(void *arg, const pyu_walk_interp *in)
{
    dump_impl *d = arg;
    if (in->threads_truncated || in->interpreters_truncated)
        d->pub.threads_truncated = 1;
    return PYU_WALK_NEXT;
}

static int on_thread(void *arg, const pyu_walk_thread *wt)
{
    dump_impl *d = arg;
    if (!pyu_grow((void **)&d->pub.threads, d->pub.nthreads,
                  &d->cap_threads, sizeof *d->pub.threads))
        return nomem(d);
    pyu_thread *t = &d->pub.threads[d->pub.nthreads++];
    memset(t, 0, sizeof *t);
    t->interpreter_id = wt->interpreter_id;
    t->thread_id = wt->thread_id;
    t->native_thread_id = wt->native_thread_id;
    t->main = wt->main;
    t->status = wt->status;
    t->crashed = d->pub.process.signal &&
                 wt->native_thread_id == d->pub.process.signal_thread;
    d->cap_frames = d->cap_tasks = d->cap_native = 0;
    d->pending = 0;
    return PYU_WALK_NEXT;
}

/* A frame's variables, copied into the dump. */
typedef struct locals_acc {
    dump_impl *d;
    pyu_frame *f;
    size_t cap;
} locals_acc;

static int on_local(void *arg, const pyu_var *v)
{
    locals_acc *a = arg;
    pyu_frame *f = a->f;
    if (!pyu_grow((void **)&f->locals, f->nlocals, &a->cap, sizeof *f->locals))
        return nomem(a->d);
    pyu_var *c = &f->locals[f->nlocals];
    *c = *v;
    if (!(c->name = pyu_store_str(a->d->store, 0, v->name)) ||
        !(c->type = pyu_store_str(a->d->store, 0, v->type)) ||
        !(c->value = pyu_store_str(a->d->store, 0, v->value)))
        return nomem(a->d);
    f->nlocals++;
    return PYU_WALK_NEXT;
}

static int on_frame(void *arg, const pyu_walk_frame *f)
{
    dump_impl *d = arg;
    pyu_thread *t = last(d);
    if (f->owner == PYU_OWNER_ENTRY) { /* the frames since the last one
                                          run in this entry's native frame */
        for (size_t k = t->nframes - d->pending; k < t->nframes; k++)
            d->entry[k] = f->addr;
        d->pending = 0;
        return PYU_WALK_NEXT;
    }
    if (d->native) {
        if (!pyu_grow((void **)&d->entry, t->nframes, &d->cap_entry,
                      sizeof *d->entry))
            return nomem(d);
        d->entry[t->nframes] = 0;
        d->pending++;
    }
    if (!pyu_grow((void **)&t->frames, t->nframes, &d->cap_frames,
                  sizeof *t->frames))
        return nomem(d);
    pyu_frame *out = &t->frames[t->nframes];
    int rc = pyu_store_frame(d->store, d->s, f, out);
    if (rc < 0)
        return rc;
    t->nframes++;
    if (d->locals) {
        locals_acc a = {d, out, 0};
        rc = pyu_frame_locals(d->s, f, on_local, &a);
        if (rc == -PYU_E_NOMEM)
            return rc;
        if (rc < 0 && !(out->locals_error = pyu_store_str(
                            d->store, 0, pyu_errmsg(d->s))))
            return nomem(d);
    }
    return PYU_WALK_NEXT;
}

static int on_task(void *arg, const pyu_walk_task *wt)
{
    dump_impl *d = arg;
    pyu_thread *t = last(d);
    if (!pyu_grow((void **)&t->tasks, t->ntasks, &d->cap_tasks,
                  sizeof *t->tasks))
        return nomem(d);
    const char *name = pyu_store_str(d->store, 0, wt->name);
    if (!name)
        return nomem(d);
    t->tasks[t->ntasks++] = (pyu_task_link){wt->first_frame, wt->id, name};
    return PYU_WALK_NEXT;
}

/* The files the target maps, for naming the frames a caller's unwinder
 * (a debugger's) found as the CLI's unwinder names its own. */
static void make_names(dump_impl *d)
{
    pyu_session *s = d->s;
    pyu_mapped m;
    d->names_made = true;
    if (pyu_mapped_scan(s, NULL, &m) < 0 || !(d->names = pyu_dwfl_offline())) {
        pyu_err_clear(&s->err);
        return;
    }
    for (size_t i = 0; i < m.nfiles; i++) {
        pyu_mapped_file *f = &m.files[i];
        char path[4096];
        const pyu_elf_info *info = pyu_mapped_inspect(s, f);
        if (!info || f->base < info->base_vaddr)
            continue;
        if (!s->ops->file_path ||
            s->ops->file_path(s->ctx, f->path, path, sizeof path) < 0)
            snprintf(path, sizeof path, "%s", f->path);
        pyu_dwfl_offline_add(d->names, f->path, path,
                             f->base - info->base_vaddr);
    }
    pyu_dwfl_offline_done(d->names);
    pyu_mapped_free(&m);
}

/* The native stack, copied into the dump. */
static int on_native(void *arg, const pyu_native_frame *f)
{
    dump_impl *d = arg;
    pyu_thread *t = last(d);
    if (!pyu_grow((void **)&t->native, t->nnative, &d->cap_native,
                  sizeof *t->native))
        return -PYU_E_NOMEM;
    pyu_native_entry *e = &t->native[t->nnative];
    char name[512];
    pyu_native_frame named = *f;
    if (d->s->native_fn) { /* a debugger's frames: named as the CLI's */
        if (!d->names_made)
            make_names(d);
        pyu_dwfl_name(d->names, f->pc, t->nnative > 0, &named, name,
                      sizeof name);
        f = &named;
    }
    *e = (pyu_native_entry){.frame = *f};
    if ((f->symbol && !(e->frame.symbol = pyu_store_str(d->store, 0,
                                                         f->symbol))) ||
        (f->module && !(e->frame.module = pyu_store_str(d->store, 0,
                                                         f->module))))
        return -PYU_E_NOMEM;
    t->nnative++;
    return 0;
}

#define LAST_FRAME_SPAN 65536 /* bytes of stack the outermost native frame
                                 is taken to own */

/* Before 3.11 every Python frame runs in an eval loop of its own (a
 * function called from Python, a generator resumed: a call of the eval
 * function each): the eval function's native frames, innermost first,
 * hold the Python frames one each, by name (exported by every build). */
static void place_by_name(pyu_thread *t)
{
    size_t i = 0, n = t->nnative;
    t->python_unplaced = 0;
    for (size_t k = 0; k < t->nframes; k++, i++) {
        while (i < n && !(t->native[i].frame.symbol &&
                          strcmp(t->native[i].frame.symbol,
                                 "_PyEval_EvalFrameDefault") == 0))
            i++;
        if (i >= n) {
            t->python_unplaced += t->nframes - k;
            return;
        }
        t->native[i].python_first = k;
        t->native[i].python_count = 1;
    }
}

/* Places each Python frame in the native frame whose stack holds the
 * entry frame that follows it: native frame i owns [sp_i, sp_i+1). */
static void place(dump_impl *d, pyu_thread *t)
{
    size_t i = 0, n = t->nnative;
    if (d->s->off.object_frames) {
        place_by_name(t);
        return;
    }
    t->python_unplaced = 0;
    for (size_t k = 0; k < t->nframes; k++) {
        uint64_t e = d->entry[k];
        /* (entries move outwards, to higher addresses, as k grows) */
        while (e && i < n) {
            uint64_t lo = t->native[i].frame.sp;
            uint64_t next = i + 1 < n ? t->native[i + 1].frame.sp : 0;
            uint64_t hi = next > lo ? next : lo + LAST_FRAME_SPAN;
            if (e < hi)
                break;
            i++;
        }
        if (!e || i >= n || !t->native[i].frame.sp ||
            e < t->native[i].frame.sp) {
            t->python_unplaced++;
            continue;
        }
        pyu_native_entry *ne = &t->native[i];
        if (!ne->python_count)
            ne->python_first = k;
        ne->python_count++;
    }
}

static int read_native(dump_impl *d, pyu_thread *t)
{
    pyu_session *s = d->s;
    char why[512] = "";
    int rc;
    if (s->native_fn) {
        rc = s->native_fn(s->native_arg, t->native_thread_id, on_native, d,
                          why, sizeof why);
    } else if (!s->ops->native_frames) {
        rc = -PYU_E_STATE;
        snprintf(why, sizeof why, "this memory source gives no native "
                 "stacks");
    } else {
        rc = s->ops->native_frames(s->ctx, t->native_thread_id, on_native,
                                   d, why, sizeof why);
    }
    if (rc == -PYU_E_NOMEM)
        return nomem(d);
    if (rc < 0 && !(t->native_error = pyu_store_str(
                        d->store, 0, why[0] ? why : "the native stack "
                                                    "cannot be read")))
        return nomem(d);
    place(d, t);
    return PYU_WALK_NEXT;
}

static int on_thread_end(void *arg, const pyu_walk_thread *wt,
                         const pyu_walk_end *end)
{
    dump_impl *d = arg;
    pyu_thread *t = last(d);
    (void)wt;
    if (d->native && read_native(d, t) < 0)
        return -PYU_E_NOMEM;
    t->status = end->status;
    t->truncated = end->truncated;
    if (end->error && !(t->error = pyu_store_str(d->store, 0,
                                                 pyu_errmsg(d->s))))
        return nomem(d);
    return PYU_WALK_NEXT;
}

/* ------------------------------------------------ threading's names */

#define NAME_TRIES 4 /* frames of an interpreter a name lookup starts from */

typedef struct named {
    dump_impl *d;
    int64_t interp;
    size_t found;
} named;

static int set_name(void *arg, uint64_t ident, const char *name)
{
    named *n = arg;
    pyu_dump *pub = &n->d->pub;
    for (size_t i = 0; i < pub->nthreads; i++) {
        pyu_thread *t = &pub->threads[i];
        if (t->interpreter_id != n->interp || t->thread_id != ident ||
            t->name)
            continue;
        if (!(t->name = pyu_store_str(n->d->store, 0, name)))
            return -1;
        n->found++;
    }
    return 0;
}

static bool threading_frame(const pyu_frame *f)
{
    size_t n = f->file ? strlen(f->file) : 0;
    return f->addr && n >= 12 && strcmp(f->file + n - 12, "threading.py") == 0;
}

/* Each thread's name from threading._active of its interpreter, looked up
 * from a frame of that interpreter: threading.py's first (its globals),
 * else the outermost frames (a module that imported threading). */
static void thread_names(dump_impl *d)
{
    pyu_dump *pub = &d->pub;
    for (size_t i = 0; i < pub->nthreads; i++) {
        int64_t interp = pub->threads[i].interpreter_id;
        bool seen = false;
        for (size_t j = 0; j < i && !seen; j++)
            seen = pub->threads[j].interpreter_id == interp;
        if (seen)
            continue;
        uint64_t from[NAME_TRIES];
        size_t n = 0;
        for (int pass = 0; pass < 2; pass++)
            for (size_t j = i; j < pub->nthreads && n < NAME_TRIES; j++) {
                const pyu_thread *t = &pub->threads[j];
                if (t->interpreter_id != interp || !t->nframes)
                    continue;
                const pyu_frame *f = &t->frames[t->nframes - 1];
                for (size_t k = 0; pass == 0 && k < t->nframes; k++)
                    if (threading_frame(&t->frames[k])) {
                        f = &t->frames[k];
                        break;
                    }
                if ((pass == 0) == threading_frame(f) && f->addr)
                    from[n++] = f->addr;
            }
        named nm = {d, interp, 0};
        for (size_t k = 0; k < n && !nm.found; k++)
            if (pyu_thread_names(d->s, from[k], set_name, &nm) < 0)
                pyu_err_clear(&d->s->err);
    }
}

int pyu_dump_take(pyu_session *s, unsigned flags, pyu_dump **out)
{
    if (!s || !out)
        return -PYU_E_INVAL;
    *out = NULL;
    if (!s->opened)
        return pyu_err_set(&s->err, PYU_E_STATE, "the session is not open");
    dump_impl *d = calloc(1, sizeof *d);
    if (!d || !(d->store = pyu_store_new())) {
        free(d);
        return pyu_err_set(&s->err, PYU_E_NOMEM, "out of memory");
    }
    d->s = s;
    pyu_target(s, &d->pub.process);
    d->pub.has_async = (flags & PYU_WALK_ASYNC) != 0;
    /* the root the session sees the target's files through ("/" as it
     * translates it, less the slash) */
    char root[PATH_MAX];
    size_t rl;
    if (!s->ops->file_path || s->ops->file_path(s->ctx, "/", root,
                                                sizeof root) < 0)
        root[0] = 0;
    rl = strlen(root);
    if (rl && root[rl - 1] == '/')
        root[rl - 1] = 0;
    if (!(d->pub.source_root = pyu_store_str(d->store, 0, root))) {
        pyu_dump_free(&d->pub);
        return pyu_err_set(&s->err, PYU_E_NOMEM, "out of memory");
    }
    d->locals = (flags & PYU_WALK_LOCALS) != 0;
    d->pub.has_locals = d->locals;
    d->native = (flags & PYU_WALK_NATIVE) != 0;
    d->pub.has_native = d->native;
    pyu_walker w = {
        .flags = (flags & ~(PYU_WALK_LOCALS | PYU_WALK_NATIVE)) |
                 (d->native ? PYU_WALK_ENTRY_FRAMES : 0),
        .interpreter = on_interp,
        .thread = on_thread,
        .frame = on_frame,
        .task = on_task,
        .thread_end = on_thread_end,
    };
    int rc = pyu_walk(s, &w, d);
    pyu_dwfl_free(d->names);
    d->names = NULL;
    if (rc != 0) {
        pyu_dump_free(&d->pub);
        return rc < 0 ? rc : -PYU_E_IO;
    }
    thread_names(d);
    *out = &d->pub;
    return 0;
}
