/* asyncio tasks (CPython 3.14+): finding what the _asyncio module
 * publishes, and reading tasks, their coroutine chains and awaiters.
 *
 * The module publishes the offsets a reader needs in an .AsyncioDebug
 * section (13 little-endian u64: task object size and the offsets of its
 * name, awaited_by, is_task, awaited_by_is_set, coro and list node; the
 * interpreter's and the thread state's task list heads; the thread's
 * running loop and task).  The section lives in the _asyncio extension
 * module, or in the interpreter when the module is built in.
 *
 * Every thread keeps its tasks on a circular list threaded through the
 * tasks' node fields, with the sentinel head in its thread state; tasks of
 * threads that ended move to the interpreter's list.  A task's coroutine
 * chain starts at its coro: a generator-like object whose frame is embedded
 * at gi_iframe; while it is suspended in `await`, the awaited object sits
 * near the top of its value stack, and the chain goes on while that object
 * is a coroutine (or an async generator's asend/athrow wrapper).
 * awaited_by is NULL, one awaiting task, or a set of them.
 *
 * Callers: tasks.c (task lists) and walk.c (PYU_WALK_ASYNC stacks).
 */
#include "../internal.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#define PYLONG_SHIFT 30

/* The section, in order. */
enum {
    A_TASK_SIZE, A_TASK_NAME, A_TASK_AWAITED_BY, A_TASK_IS_TASK,
    A_TASK_AWAITED_BY_IS_SET, A_TASK_CORO, A_TASK_NODE,
    A_INTERP_SIZE, A_INTERP_TASKS_HEAD,
    A_TS_SIZE, A_TS_RUNNING_LOOP, A_TS_RUNNING_TASK, A_TS_TASKS_HEAD,
    A_COUNT
};

struct pyu_aio {
    uint64_t addr;     /* the section, once found and validated */
    uint64_t a[A_COUNT];
    char name[40];     /* the last "Task-N" */
};

void pyu_aio_free(pyu_session *s)
{
    free(s->aio);
    s->aio = NULL;
}

/* ---------------------------------------------------- finding the section */

static bool worth_a_look(const char *base)
{
    return strncmp(base, "_asyncio", 8) == 0 || strstr(base, "python");
}

/* Checks the section's values against the structs and the buffers that
 * hold copies; NULL when they are fine, else what is wrong. */
static const char *invalid(const uint64_t *a)
{
    if (a[A_TASK_SIZE] < 64 || a[A_TASK_SIZE] > PYU_BUF_TASK)
        return "task size";
    for (int i = A_TASK_NAME; i <= A_TASK_NODE; i++)
        if (a[i] + 16 > a[A_TASK_SIZE])
            return "task field";
    if (a[A_INTERP_SIZE] > PYU_MAX_SECTION ||
        a[A_INTERP_TASKS_HEAD] + 16 > a[A_INTERP_SIZE])
        return "interpreter field";
    /* the running loop and task are read with the thread state copy */
    for (int i = A_TS_RUNNING_LOOP; i <= A_TS_TASKS_HEAD; i++)
        if (a[A_TS_SIZE] > PYU_BUF_TSTATE || a[i] + 8 > a[A_TS_SIZE])
            return "thread state field";
    return NULL;
}

int pyu_aio_find(pyu_session *s)
{
    if (s->aio)
        return 1;
    if (!PYU_HAS(&s->off, gen_gi_iframe) || !PYU_HAS(&s->off, llist_next))
        return pyu_err_set(&s->err, PYU_E_VERSION,
                           "asyncio tasks need CPython 3.14 or newer: %s "
                           "has no .AsyncioDebug section", s->version);
    pyu_mapped m;
    int rc = pyu_mapped_scan(s, worth_a_look, &m);
    if (rc < 0)
        return rc;
    uint64_t addr = 0;
    for (size_t i = 0; i < m.nfiles && !addr; i++) {
        const pyu_elf_info *info = pyu_mapped_inspect(s, &m.files[i]);
        if (info && info->has_asyncio && info->asyncio_size >= A_COUNT * 8)
            addr = m.files[i].base + (info->asyncio_vaddr - info->base_vaddr);
    }
    pyu_mapped_free(&m);
    if (!addr)
        return 0;
    uint64_t a[A_COUNT];
    if (pyu_read(s, addr, a, sizeof a, "the .AsyncioDebug section") < 0)
        return -1;
    const char *bad = invalid(a);
    if (bad)
        return pyu_err_set(&s->err, PYU_E_OFFSETS, "the .AsyncioDebug "
                           "section at 0x%" PRIx64 " is not valid (%s)",
                           addr, bad);
    if (!(s->aio = calloc(1, sizeof *s->aio)))
        return pyu_err_set(&s->err, PYU_E_NOMEM, "out of memory");
    memcpy(s->aio->a, a, sizeof a);
    s->aio->addr = addr;
    return 1;
}

void pyu_aio_thread_fields(const pyu_session *s, uint64_t off[2])
{
    off[0] = s->aio ? s->aio->a[A_TS_RUNNING_LOOP] : PYU_ABSENT;
    off[1] = s->aio ? s->aio->a[A_TS_RUNNING_TASK] : PYU_ABSENT;
}

uint64_t pyu_aio_thread_list(const pyu_session *s, uint64_t ts)
{
    return ts + s->aio->a[A_TS_TASKS_HEAD];
}

uint64_t pyu_aio_interp_list(const pyu_session *s, uint64_t interp)
{
    return interp + s->aio->a[A_INTERP_TASKS_HEAD];
}

uint64_t pyu_aio_coro_frame(const pyu_session *s, uint64_t coro)
{
    return coro + PYU_OFF(&s->off, gen_gi_iframe);
}

/* ------------------------------------------------------------ tasks */

static void task_fields(const pyu_session *s, uint64_t addr,
                        const uint8_t *buf, size_t size, pyu_aio_task *t)
{
    const uint64_t *a = s->aio->a;
    t->addr = addr;
    t->name = pyu_u64(buf, size, a[A_TASK_NAME]) & ~s->off.tag_mask;
    t->coro = pyu_u64(buf, size, a[A_TASK_CORO]);
    t->awaited_by = pyu_u64(buf, size, a[A_TASK_AWAITED_BY]);
    t->awaited_by_is_set = pyu_u8(buf, size, a[A_TASK_AWAITED_BY_IS_SET]);
}

int pyu_aio_task_read(pyu_session *s, uint64_t addr, pyu_aio_task *t)
{
    uint8_t buf[PYU_BUF_TASK];
    size_t size = (size_t)s->aio->a[A_TASK_SIZE]; /* <= the buffer */
    if (pyu_read(s, addr, buf, size, "a task") < 0)
        return -1;
    task_fields(s, addr, buf, size, t);
    return 0;
}

int pyu_aio_list(pyu_session *s, uint64_t head, const uint64_t *first,
                 int (*fn)(void *arg, const pyu_aio_task *t), void *arg,
                 bool *truncated)
{
    const uint64_t *a = s->aio->a;
    size_t size = (size_t)a[A_TASK_SIZE];
    uint64_t next_at = PYU_OFF(&s->off, llist_next);
    uint8_t buf[PYU_BUF_TASK];
    uint64_t node = 0;
    cycle cyc = {0, 1, 0};
    if (first)
        node = *first;
    else if (pyu_read(s, head + next_at, &node, 8, "a task list head") < 0)
        return -1;
    for (size_t n = 0; node && node != head; n++) {
        if (n >= PYU_MAX_TASKS || cycle_step(&cyc, node)) {
            *truncated = true; /* too many, or a list that loops */
            return 0;
        }
        uint64_t addr = node - a[A_TASK_NODE];
        if (pyu_read(s, addr, buf, size, "a task") < 0) {
            *truncated = true; /* the list cannot be followed further */
            return 0;
        }
        pyu_aio_task t;
        task_fields(s, addr, buf, size, &t);
        int rc = fn(arg, &t);
        if (rc)
            return rc;
        node = pyu_u64(buf, size, a[A_TASK_NODE] + next_at);
    }
    return 0;
}

const char *pyu_aio_name(pyu_session *s, uint64_t name, uint64_t *key)
{
    const pyu_offsets *o = &s->off;
    const pyu_type *type = name ? pyu_type_of(s, name) : NULL;
    if (!type) {
        if (!name)
            pyu_fail(&s->err, PYU_E_CORRUPT, "a task has no name");
        return NULL;
    }
    if (type->flags & PYU_TPFLAGS_UNICODE_SUBCLASS) {
        *key = name;
        return pyu_str_read(s, name);
    }
    if (!(type->flags & PYU_TPFLAGS_LONG_SUBCLASS)) {
        pyu_fail(&s->err, PYU_E_CORRUPT, "task name is neither str nor int");
        return NULL;
    }
    uint64_t tag = 0;
    uint32_t digit[2] = {0, 0};
    pyu_range r[2] = {
        {name + PYU_OFF(o, long_lv_tag), &tag, 8},
        {name + PYU_OFF(o, long_ob_digit), digit, sizeof digit},
    };
    if (pyu_readv(s, r, 2, "a task's number") < 0)
        return NULL;
    uint64_t ndigits = tag >> 3, v = 0;
    if (ndigits > 2) {
        pyu_fail(&s->err, PYU_E_CORRUPT, "task number too large");
        return NULL;
    }
    for (uint64_t i = ndigits; i-- > 0;)
        v = (v << PYLONG_SHIFT) | (digit[i] & ((1u << PYLONG_SHIFT) - 1));
    snprintf(s->aio->name, sizeof s->aio->name, "Task-%s%" PRIu64,
             (tag & 3) == 2 ? "-" : "", v);
    *key = name | 1;
    return s->aio->name;
}

/* ------------------------------------------------------ coroutine chains */

int pyu_aio_coro_chain(pyu_session *s, uint64_t coro,
                       int (*fn)(void *arg, uint64_t frame,
                                 const uint8_t *buf, size_t len),
                       void *arg, bool *cut)
{
    const pyu_offsets *o = &s->off;
    size_t fsize = (size_t)PYU_OFF(o, fr_size);
    /* the frame and, after it, the start of its value stack: the awaited
     * object is usually within this window */
    uint8_t frame[PYU_BUF_FRAME];
    size_t window = fsize + PYU_CORO_PEEK; /* <= the buffer */
    int depth = 0;
    for (; coro && depth < PYU_MAX_CORO_DEPTH; depth++) {
        uint64_t type = 0;
        int8_t state = 0;
        uint64_t fr = coro + PYU_OFF(o, gen_gi_iframe);
        pyu_range r[3] = {
            {coro + PYU_OFF(o, ob_type), &type, 8},
            {coro + PYU_OFF(o, gen_gi_frame_state), &state, 1},
            {fr, frame, window},
        };
        if (pyu_readv_quiet(s, r, 3) < 0) {
            r[2].len = fsize; /* the window may cross into unmapped memory */
            if (pyu_readv(s, r, 3, "a coroutine") < 0)
                return -1;
            window = fsize;
        }
        if (state == o->gen_cleared)
            return 0;
        int rc = fn(arg, fr, frame, fsize);
        if (rc)
            return rc;
        if (state != o->gen_yield_from && state != o->gen_yield_from_locked)
            return 0;
        /* suspended in await: the awaited object is near the top of the
         * value stack */
        uint64_t sp = pyu_u64(frame, fsize, PYU_OFF(o, fr_stackpointer)) &
                      ~o->tag_mask;
        uint64_t awaited = 0, atype = 0;
        if (!sp || sp < o->await_slot)
            return 0;
        uint64_t at = sp - o->await_slot;
        if (at >= fr && at + 8 <= fr + window)
            memcpy(&awaited, frame + (at - fr), 8);
        else if (pyu_read(s, at, &awaited, 8, "an awaited object") < 0)
            return -1;
        awaited &= ~o->tag_mask;
        if (!awaited || pyu_read_quiet(s, awaited + PYU_OFF(o, ob_type),
                                       &atype, 8) < 0)
            return 0;
        /* a coroutine of the same type as this one, a coroutine, or an
         * async generator's asend/athrow wrapper (to its generator, the
         * first field after the object header) goes on; anything else (a
         * future, a class of the program's own) ends the chain */
        const pyu_type *t = atype == type ? NULL : pyu_type_get(s, atype);
        if (t && t->kind == PYU_TYPE_AGEN_AWAIT) {
            if (pyu_read_quiet(s, awaited + PYU_OFF(o, ob_type) + 8, &coro,
                               8) < 0)
                return 0;
        } else if (atype == type || (t && t->kind == PYU_TYPE_COROUTINE)) {
            coro = awaited;
        } else {
            return 0;
        }
    }
    if (coro && depth == PYU_MAX_CORO_DEPTH)
        *cut = true;
    return 0;
}

/* ------------------------------------------------------------- awaiters */

#define AWAITERS_CUT 0x7ffe /* stops the set's walk; not an error */

typedef struct awaiters_cb {
    int (*fn)(void *arg, uint64_t awaiter);
    void *arg;
    size_t seen;
    bool *cut;
} awaiters_cb;

static int one_awaiter(void *arg, uint64_t key)
{
    awaiters_cb *a = arg;
    if (a->seen++ == PYU_MAX_AWAITERS) {
        *a->cut = true;
        return AWAITERS_CUT;
    }
    return a->fn(a->arg, key);
}

int pyu_aio_awaiters(pyu_session *s, const pyu_aio_task *t,
                     int (*fn)(void *arg, uint64_t awaiter), void *arg,
                     bool *cut)
{
    uint64_t by = t->awaited_by;
    if (!by)
        return 0;
    if (!t->awaited_by_is_set)
        return fn(arg, by);
    awaiters_cb a = {fn, arg, 0, cut};
    int rc = pyu_set_each(s, by, PYU_MAX_SET_SLOTS, one_awaiter, &a, cut);
    if (rc < 0)
        pyu_fail_ctx(&s->err, "a task's awaiters");
    return rc == AWAITERS_CUT ? 0 : rc;
}
