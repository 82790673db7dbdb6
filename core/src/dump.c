/* Dumps: every thread's stack, built by one caller of pyu_walk. */
#include "internal.h"

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
} dump_impl;

void pyu_dump_free(pyu_dump *pub)
{
    dump_impl *d = (dump_impl *)pub;
    if (!d)
        return;
    for (size_t i = 0; i < d->pub.nthreads; i++) {
        for (size_t k = 0; k < d->pub.threads[i].nframes; k++)
            free(d->pub.threads[i].frames[k].locals);
        free(d->pub.threads[i].frames);
        free(d->pub.threads[i].tasks);
    }
    free(d->pub.threads);
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
    d->cap_frames = d->cap_tasks = 0;
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

static int on_thread_end(void *arg, const pyu_walk_thread *wt,
                         const pyu_walk_end *end)
{
    dump_impl *d = arg;
    pyu_thread *t = last(d);
    (void)wt;
    t->status = end->status;
    t->truncated = end->truncated;
    if (end->error && !(t->error = pyu_store_str(d->store, 0,
                                                 pyu_errmsg(d->s))))
        return nomem(d);
    return PYU_WALK_NEXT;
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
    pyu_target_info target;
    pyu_target(s, &target);
    d->pub.pid = target.pid;
    d->pub.signal = target.signal;
    d->pub.signal_thread = target.signal_thread;
    snprintf(d->pub.version, sizeof d->pub.version, "%s", s->version);
    d->pub.free_threaded = s->off.free_threaded;
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
    pyu_walker w = {
        .flags = flags & ~PYU_WALK_LOCALS,
        .interpreter = on_interp,
        .thread = on_thread,
        .frame = on_frame,
        .task = on_task,
        .thread_end = on_thread_end,
    };
    int rc = pyu_walk(s, &w, d);
    if (rc != 0) {
        pyu_dump_free(&d->pub);
        return rc < 0 ? rc : -PYU_E_IO;
    }
    *out = &d->pub;
    return 0;
}
