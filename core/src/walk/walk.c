/* The walk: every interpreter, thread and frame of the target, reported to
 * the caller's callbacks (pyu_walk, in the public header).
 *
 * It composes the interpreter/thread iterator (threads.c), thread status
 * (status.c), frame chains (frames.c) and, with PYU_WALK_ASYNC, the tasks
 * awaiting a thread's running task (asyncio.c).  Callback return values
 * are mapped here: NEXT goes on, SKIP skips, anything else stops the walk
 * and is handed back by pyu_walk.
 */
#include "../internal.h"

#include <inttypes.h>

#include <stdlib.h>
#include <string.h>

/* How a stop travels back through the iterator: a private positive value
 * (the caller's own value is kept in the context). */
#define STOPPED 2

typedef struct walk_ctx {
    pyu_session *s;
    const pyu_walker *w;
    void *arg;
    bool async;                /* PYU_WALK_ASYNC and asyncio is there */
    int stop;                  /* the value a callback stopped with */
    bool stopped;
    pyu_walk_interp interp;    /* the current interpreter, as reported */
    pyu_walk_frame *coro;      /* one coroutine chain's frames (scratch) */
    size_t ncoro;
} walk_ctx;

/* A callback's return value: PYU_WALK_NEXT or _SKIP, or STOPPED. */
static int callback(walk_ctx *c, int rc)
{
    if (rc == PYU_WALK_NEXT || rc == PYU_WALK_SKIP)
        return rc;
    c->stop = rc;
    c->stopped = true;
    return STOPPED;
}

/* ------------------------------------------------------------- async */

static int first_awaiter(void *arg, uint64_t awaiter)
{
    *(uint64_t *)arg = awaiter;
    return 1;
}

/* Collects a coroutine chain's frames (outermost first) into c->coro. */
static int collect(void *arg, uint64_t addr, const uint8_t *buf, size_t len)
{
    walk_ctx *c = arg;
    pyu_walk_frame f;
    int rc = pyu_frame_decode(c->s, addr, buf, len, &f);
    if (rc <= 0)
        return rc; /* not Python: skipped; an error: -1 */
    if (!c->coro &&
        !(c->coro = malloc(PYU_MAX_CORO_DEPTH * sizeof *c->coro)))
        return pyu_fail(&c->s->err, PYU_E_NOMEM, "out of memory");
    c->coro[c->ncoro++] = f; /* at most PYU_MAX_CORO_DEPTH calls */
    return 0;
}

/* Reports a task (the name read now), or fails. */
static int report_task(walk_ctx *c, const pyu_aio_task *t, size_t first,
                       bool running)
{
    uint64_t key;
    const char *name = pyu_aio_name(c->s, t->name, &key);
    pyu_walk_task wt = {t->addr, name ? name : "?", first, running};
    return c->w->task ? callback(c, c->w->task(c->arg, &wt)) : PYU_WALK_NEXT;
}

/* After the running task's coroutine frame: the coroutine stacks of the
 * tasks awaiting it, each awaited by the next (the first awaiter of
 * each).  Returns NEXT, SKIP (the caller's), STOPPED, or -1. */
static int continue_async(walk_ctx *c, const pyu_aio_task *run,
                          size_t *index, int *truncated)
{
    pyu_session *s = c->s;
    pyu_aio_task cur = *run;
    cycle cyc = {0, 1, 0};
    for (size_t links = 1;; links++) {
        uint64_t next = 0;
        bool many = false, cut = false;
        if (pyu_aio_awaiters(s, &cur, first_awaiter, &next, &many) < 0)
            return -1;
        if (!next)
            return PYU_WALK_NEXT;
        if (links == PYU_MAX_ASYNC_LINKS || cycle_step(&cyc, next)) {
            *truncated = PYU_TRUNC_TASKS;
            return PYU_WALK_NEXT;
        }
        if (pyu_aio_task_read(s, next, &cur) < 0)
            return -1;
        int rc = report_task(c, &cur, *index, false);
        if (rc != PYU_WALK_NEXT)
            return rc;
        c->ncoro = 0;
        if (pyu_aio_coro_chain(s, cur.coro, collect, c, &cut) < 0)
            return -1;
        if (cut)
            *truncated = PYU_TRUNC_TASKS;
        for (size_t k = c->ncoro; k-- > 0;) { /* innermost first */
            if (*index >= PYU_MAX_FRAMES) {
                *truncated = PYU_TRUNC_DEPTH;
                return PYU_WALK_NEXT;
            }
            c->coro[k].index = (*index)++;
            rc = callback(c, c->w->frame(c->arg, &c->coro[k]));
            if (rc != PYU_WALK_NEXT)
                return rc;
        }
        if (*truncated)
            return PYU_WALK_NEXT;
    }
}

/* ----------------------------------------------------------- threads */

static int on_interp(void *arg, const pyu_interp *in, size_t nthreads,
                     bool threads_cut, bool interps_cut)
{
    walk_ctx *c = arg;
    c->interp = (pyu_walk_interp){in->id, in->addr, nthreads, threads_cut,
                                  interps_cut};
    return c->w->interpreter
               ? callback(c, c->w->interpreter(c->arg, &c->interp))
               : PYU_WALK_NEXT;
}

static int on_interp_end(void *arg, const pyu_interp *in, size_t nthreads,
                         bool threads_cut, bool interps_cut)
{
    walk_ctx *c = arg;
    (void)in, (void)nthreads, (void)threads_cut, (void)interps_cut;
    return c->w->interpreter_end
               ? callback(c, c->w->interpreter_end(c->arg, &c->interp))
               : PYU_WALK_NEXT;
}

/* A thread's frames, and with PYU_WALK_ASYNC those of the tasks awaiting
 * its running task.  Returns 0 (the outcome in *end), STOPPED, or -1 on
 * an error that ends the walk. */
static int frames(walk_ctx *c, const pyu_interp *in, const pyu_tstate *t,
                  pyu_walk_end *end)
{
    pyu_session *s = c->s;
    if (t->frame_unread) { /* 3.11: its _PyCFrame is not readable */
        end->error = pyu_fail(&s->err, PYU_E_FAULT,
                              "the thread's _PyCFrame at 0x%" PRIx64
                              " (its current frame) is unreadable",
                              t->cframe);
        return 0;
    }
    pyu_chain ch = {.first = t->current_frame,
                    .base = t->base_frame,
                    .chunk = t->chunk,
                    .watch = in->gc_collecting ? in->gc_frame : 0,
                    .entries = (c->w->flags & PYU_WALK_ENTRY_FRAMES) != 0,
                    .cframe = t->cframe};
    pyu_aio_task run = {0};
    /* extra[0]: the running loop, extra[1]: the running task */
    if (c->async && t->extra[0] && t->extra[1] &&
        pyu_aio_task_read(s, t->extra[1], &run) == 0 && run.coro)
        ch.stop_at = pyu_aio_coro_frame(s, run.coro);
    /* the caller's callback, called by the chain walk itself */
    pyu_chain again = ch;
    int rc = pyu_chain_walk(s, &ch, c->w->frame, c->arg);
    /* (3.11, 3.12: nothing read from the loop the thread state names,
     * which may not have linked its first frame yet: the stack is then
     * the loop's below, threads.c) */
    if (rc < 0 && ch.index == 0 && !ch.fn_ended && t->cframe &&
        s->err.code != PYU_E_NOMEM && s->err.code != PYU_E_NOPROC &&
        pyu_cframe_above(s, t->addr, t->cframe, &again.cframe,
                         &again.first)) {
        ch = again;
        rc = pyu_chain_walk(s, &ch, c->w->frame, c->arg);
    }
    if (ch.fn_ended)
        rc = callback(c, ch.fn_rc);
    if (ch.saw_watch)
        end->status |= PYU_STATUS_GC;
    end->truncated = ch.truncated;
    if (rc == 0 && ch.stopped) { /* the running task's coroutine */
        rc = report_task(c, &run, 0, true);
        if (rc == PYU_WALK_NEXT)
            rc = continue_async(c, &run, &ch.index, &end->truncated);
    }
    end->nframes = ch.index;
    if (rc == STOPPED)
        return STOPPED;
    if (rc < 0) {
        if (s->err.code == PYU_E_NOMEM || s->err.code == PYU_E_NOPROC)
            return -1;
        end->error = -s->err.code;
        pyu_fail_ctx(&s->err, "after %zu frames", ch.index);
    }
    return 0;
}

static int on_thread(void *arg, const pyu_interp *in, const pyu_tstate *t)
{
    walk_ctx *c = arg;
    pyu_walk_thread wt = {in->id, t->addr, t->thread_id, t->native_id,
                          t->main, pyu_status_of(c->s, in, t, ~0u)};
    int rc = c->w->thread ? callback(c, c->w->thread(c->arg, &wt))
                          : PYU_WALK_NEXT;
    if (rc != PYU_WALK_NEXT)
        return rc == PYU_WALK_SKIP ? PYU_WALK_NEXT : rc;
    pyu_walk_end end = {0, PYU_TRUNC_NONE, wt.status, 0};
    if (c->w->frame && (rc = frames(c, in, t, &end)) != 0)
        return rc;
    return c->w->thread_end ? callback(c, c->w->thread_end(c->arg, &wt, &end))
                            : PYU_WALK_NEXT;
}

static int run(pyu_session *s, void *arg)
{
    walk_ctx *c = arg;
    pyu_threads_cb cb = {
        .flags = c->w->flags,
        .extra_off = {PYU_ABSENT, PYU_ABSENT},
        .interp = on_interp,
        .thread = on_thread,
        .interp_end = on_interp_end,
    };
    if (c->async)
        pyu_aio_thread_fields(s, cb.extra_off);
    return pyu_threads_each(s, &cb, c);
}

int pyu_walk(pyu_session *s, const pyu_walker *w, void *arg)
{
    if (!s || !w)
        return -PYU_E_INVAL;
    if (!s->opened)
        return pyu_err_set(&s->err, PYU_E_STATE, "the session is not open");
    walk_ctx c = {.s = s, .w = w, .arg = arg};
    if (w->flags & PYU_WALK_ASYNC) {
        int found = pyu_aio_find(s);
        if (found < 0)
            return -s->err.code;
        c.async = found == 1;
    }
    int rc = pyu_paused(s, run, &c);
    free(c.coro);
    if (c.stopped)
        return c.stop;
    if (rc < 0)
        return s->err.code ? -s->err.code : -PYU_E_IO;
    return 0;
}

/* --------------------------------------------------------- describing */

const pyu_code *pyu_walk_code(pyu_session *s, const pyu_walk_frame *f)
{
    if (f->epoch != s->code_epoch)
        return NULL;
    return pyu_code_cached(s, f->code_addr);
}

int pyu_frame_describe(pyu_session *s, const pyu_walk_frame *f,
                       pyu_frame *out)
{
    if (!s || !f || !out)
        return -PYU_E_INVAL;
    const pyu_code *code = pyu_walk_code(s, f);
    if (!code)
        return pyu_fail(&s->err, PYU_E_STATE,
                        "the code object of a frame is no longer cached "
                        "(describe frames while the walk reports them)");
    out->function = code->qualname;
    out->name = code->name;
    out->file = code->filename;
    pyu_code_position(code, f->instr, out);
    out->code_addr = f->code_addr;
    out->addr = f->addr;
    out->locals = NULL;
    out->nlocals = 0;
    out->locals_error = NULL;
    return 0;
}
