/* Task lists: every asyncio task of every interpreter (CPython 3.14+),
 * built by a caller of pyu_walk.  Per thread, its task list (threads in
 * the runtime's order, as CPython's own reader goes); per interpreter,
 * after its threads, the list of tasks whose thread ended. */
#include "../internal.h"

#include <stdlib.h>
#include <string.h>

typedef struct tasks_impl {
    pyu_tasks pub;
    pyu_session *s;
    pyu_store *store;
    size_t cap;
    /* the list being read */
    int64_t interp_id;
    uint64_t thread_id, native_id, running;
    /* the task being read */
    pyu_task *task;
    size_t cap_stack, cap_awaiters;
} tasks_impl;

void pyu_tasks_free(pyu_tasks *pub)
{
    tasks_impl *t = (tasks_impl *)pub;
    if (!t)
        return;
    for (size_t i = 0; i < t->pub.ntasks; i++) {
        free(t->pub.tasks[i].stack);
        free(t->pub.tasks[i].awaited_by);
    }
    free(t->pub.tasks);
    pyu_store_free(t->store);
    free(t);
}

const pyu_task *pyu_tasks_find(const pyu_tasks *t, uint64_t id)
{
    for (size_t i = 0; t && i < t->ntasks; i++)
        if (t->tasks[i].id == id)
            return &t->tasks[i];
    return NULL;
}

/* ------------------------------------------------------------ one task */

/* One frame of the task's coroutine chain (outermost first). */
static int stack_frame(void *arg, uint64_t addr, const uint8_t *buf,
                       size_t len)
{
    tasks_impl *t = arg;
    pyu_task *task = t->task;
    pyu_walk_frame f;
    int rc = pyu_frame_decode(t->s, addr, buf, len, &f);
    if (rc <= 0)
        return rc;
    if (!pyu_grow((void **)&task->stack, task->nstack, &t->cap_stack,
                  sizeof *task->stack))
        return pyu_fail(&t->s->err, PYU_E_NOMEM, "out of memory");
    if (pyu_store_frame(t->store, t->s, &f, &task->stack[task->nstack]) < 0)
        return -1;
    task->nstack++;
    return 0;
}

static int awaiter(void *arg, uint64_t who)
{
    tasks_impl *t = arg;
    pyu_task *task = t->task;
    if (!pyu_grow((void **)&task->awaited_by, task->nawaited_by,
                  &t->cap_awaiters, sizeof *task->awaited_by))
        return pyu_fail(&t->s->err, PYU_E_NOMEM, "out of memory");
    task->awaited_by[task->nawaited_by++] = who;
    return 0;
}

static int read_task(tasks_impl *t, const pyu_aio_task *at)
{
    pyu_session *s = t->s;
    pyu_task *task = t->task;
    bool cut = false;
    uint64_t key;
    const char *name = pyu_aio_name(s, at->name, &key);
    if (!name || !(task->name = pyu_store_str(t->store, key, name)))
        return -1;
    if (pyu_aio_coro_chain(s, at->coro, stack_frame, t, &cut) < 0)
        return -1;
    if (cut)
        task->truncated |= PYU_TASK_TRUNC_STACK;
    for (size_t i = 0, j = task->nstack; i < j / 2; i++) { /* innermost first */
        pyu_frame f = task->stack[i];
        task->stack[i] = task->stack[j - 1 - i];
        task->stack[j - 1 - i] = f;
    }
    cut = false;
    int rc = pyu_aio_awaiters(s, at, awaiter, t, &cut);
    if (cut)
        task->truncated |= PYU_TASK_TRUNC_AWAITERS;
    return rc;
}

static int on_task(void *arg, const pyu_aio_task *at)
{
    tasks_impl *t = arg;
    pyu_session *s = t->s;
    if (t->pub.ntasks >= PYU_MAX_TASKS) {
        t->pub.truncated = 1;
        return 1;
    }
    if (!pyu_grow((void **)&t->pub.tasks, t->pub.ntasks, &t->cap,
                  sizeof *t->pub.tasks))
        return pyu_fail(&s->err, PYU_E_NOMEM, "out of memory");
    pyu_task *task = t->task = &t->pub.tasks[t->pub.ntasks++];
    memset(task, 0, sizeof *task);
    t->cap_stack = t->cap_awaiters = 0;
    task->id = at->addr;
    task->interpreter_id = t->interp_id;
    task->thread_id = t->thread_id;
    task->native_thread_id = t->native_id;
    task->running = t->running == at->addr;
    if (read_task(t, at) < 0) {
        if (s->err.code == PYU_E_NOMEM)
            return -1;
        if (!(task->error = pyu_store_str(t->store, 0, pyu_errmsg(s))))
            return pyu_fail(&s->err, PYU_E_NOMEM, "out of memory");
        if (!task->name)
            task->name = "?";
    }
    return 0;
}

/* Reads one list; returns NEXT, or a negated error (record set). */
static int read_list(tasks_impl *t, uint64_t head, const uint64_t *first)
{
    bool cut = false;
    int rc = pyu_aio_list(t->s, head, first, on_task, t, &cut);
    if (cut)
        t->pub.truncated = 1;
    return rc < 0 ? -t->s->err.code : PYU_WALK_NEXT;
}

/* -------------------------------------------------------- the walk */

static int on_thread(void *arg, const pyu_walk_thread *wt)
{
    tasks_impl *t = arg;
    pyu_session *s = t->s;
    uint64_t off[2], loop = 0, first = 0;
    pyu_aio_thread_fields(s, off);
    uint64_t head = pyu_aio_thread_list(s, wt->addr);
    t->running = 0;
    pyu_range r[3] = {
        {wt->addr + off[0], &loop, 8},
        {wt->addr + off[1], &t->running, 8},
        {head + PYU_OFF(&s->off, llist_next), &first, 8},
    };
    if (pyu_readv(s, r, 3, "a thread state") < 0)
        return -s->err.code;
    if (!loop) /* no event loop runs: no task is running */
        t->running = 0;
    t->interp_id = wt->interpreter_id;
    t->thread_id = wt->thread_id;
    t->native_id = wt->native_thread_id;
    if (read_list(t, head, &first) < 0) {
        pyu_fail_ctx(&s->err, "tasks of thread %llu",
                     (unsigned long long)wt->native_thread_id);
        return -s->err.code;
    }
    return PYU_WALK_SKIP; /* no frames */
}

static int on_interp_end(void *arg, const pyu_walk_interp *in)
{
    tasks_impl *t = arg;
    t->interp_id = in->id;
    t->thread_id = t->native_id = t->running = 0;
    if (read_list(t, pyu_aio_interp_list(t->s, in->addr), NULL) < 0) {
        pyu_fail_ctx(&t->s->err, "tasks of interpreter %lld",
                     (long long)in->id);
        return -t->s->err.code;
    }
    return PYU_WALK_NEXT;
}

int pyu_tasks_take(pyu_session *s, pyu_tasks **out)
{
    if (!s || !out)
        return -PYU_E_INVAL;
    *out = NULL;
    if (!s->opened)
        return pyu_err_set(&s->err, PYU_E_STATE, "the session is not open");
    int found = pyu_aio_find(s);
    if (found < 0)
        return -s->err.code;
    tasks_impl *t = calloc(1, sizeof *t);
    if (!t || !(t->store = pyu_store_new())) {
        free(t);
        return pyu_err_set(&s->err, PYU_E_NOMEM, "out of memory");
    }
    t->s = s;
    pyu_target(s, &t->pub.process);
    if (!found) { /* asyncio never loaded: no tasks */
        *out = &t->pub;
        return 0;
    }
    pyu_walker w = {
        .flags = PYU_WALK_LIST_ORDER,
        .thread = on_thread,
        .interpreter_end = on_interp_end,
    };
    int rc = pyu_walk(s, &w, t);
    if (rc != 0) {
        pyu_tasks_free(&t->pub);
        return rc < 0 ? rc : -PYU_E_IO;
    }
    *out = &t->pub;
    return 0;
}
