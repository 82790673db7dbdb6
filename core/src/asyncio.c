/* asyncio tasks (CPython 3.14+).
 *
 * The _asyncio module publishes the offsets a reader needs in an
 * .AsyncioDebug section (13 little-endian u64: task object size and the
 * offsets of its name, awaited_by, is_task, awaited_by_is_set, coro and
 * list node; the interpreter's and the thread state's task list heads; the
 * thread's running loop and task).  The section lives in the _asyncio
 * extension module, or in the interpreter when the module is built in.
 *
 * Every thread keeps its tasks on a circular list threaded through the
 * tasks' node fields, with the sentinel head in its thread state; tasks of
 * threads that ended move to the interpreter's list.  A task's coroutine
 * chain starts at its coro: a generator-like object whose frame is embedded
 * at gi_iframe; while it is suspended in `await`, the awaited object is at
 * the top of its value stack, and the chain goes on while that object is of
 * the same type.  awaited_by is NULL, one awaiting task, or a set of them.
 */
#include "internal.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#define PYU_MAX_TASKS (1u << 20)
#define MAX_CORO_DEPTH 1024
#define MAX_AWAITERS (1u << 16)
#define MAX_SET_SLOTS (1u << 20)
#define MAX_TASK_SIZE 4096

#define TPFLAGS_LONG_SUBCLASS (1ul << 24)
#define TPFLAGS_UNICODE_SUBCLASS (1ul << 28)
#define PYLONG_SHIFT 30

/* The section, in order. */
enum {
    A_TASK_SIZE, A_TASK_NAME, A_TASK_AWAITED_BY, A_TASK_IS_TASK,
    A_TASK_AWAITED_BY_IS_SET, A_TASK_CORO, A_TASK_NODE,
    A_INTERP_SIZE, A_INTERP_TASKS_HEAD,
    A_TS_SIZE, A_TS_RUNNING_LOOP, A_TS_RUNNING_TASK, A_TS_TASKS_HEAD,
    A_COUNT
};

typedef struct tasks_impl {
    pyu_tasks pub;
    size_t cap;
    pyu_strtab *strings;
    char **errors;
    size_t nerrors;
    struct {
        uint64_t type, flags;
    } types[16]; /* tp_flags of the name types seen (str, int) */
    unsigned ntypes;
    struct {
        uint64_t type;
        int kind;
    } awaited[16]; /* what awaited objects' types are (AWAITED_*) */
    unsigned nawaited;
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
    for (size_t i = 0; i < t->nerrors; i++)
        free(t->errors[i]);
    free(t->errors);
    pyu_strtab_free(t->strings);
    free(t);
}

const pyu_task *pyu_tasks_find(const pyu_tasks *t, uint64_t id)
{
    for (size_t i = 0; t && i < t->ntasks; i++)
        if (t->tasks[i].id == id)
            return &t->tasks[i];
    return NULL;
}

/* ---------------------------------------------------- finding the section */

typedef struct seek {
    pyu_session *s;
    uint64_t addr;
    char *seen[64];
    size_t nseen;
} seek;

static bool worth_a_look(const char *path)
{
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    return strncmp(base, "_asyncio", 8) == 0 || strstr(base, "python");
}

static int seek_fn(void *arg, const pyu_mapping *m)
{
    seek *k = arg;
    if (!m->path || m->offset != 0 || !worth_a_look(m->path))
        return 0;
    for (size_t i = 0; i < k->nseen; i++)
        if (strcmp(k->seen[i], m->path) == 0)
            return 0;
    if (k->nseen == sizeof k->seen / sizeof k->seen[0])
        return 0;
    if (!(k->seen[k->nseen] = strdup(m->path)))
        return 0;
    k->nseen++;
    char local[4096];
    const char *path = m->path;
    if (k->s->ops->file_path) {
        if (k->s->ops->file_path(k->s->ctx, m->path, local, sizeof local) < 0)
            return 0;
        path = local;
    }
    pyu_elf_info info;
    pyu_err ignore = {0};
    if (pyu_elf_inspect(path, &info, &ignore) < 0 || !info.has_asyncio ||
        info.asyncio_size < A_COUNT * 8)
        return 0;
    k->addr = m->start + (info.asyncio_vaddr - info.base_vaddr);
    return 1;
}

/* Finds and validates the section once per session.  Returns 1 when
 * found, 0 when no mapped file has it (asyncio not loaded), < 0 on error. */
static int find_section(pyu_session *s)
{
    if (s->aio_addr)
        return 1;
    if (s->off.version_hex < 0x030E0000)
        return pyu_err_set(&s->err, PYU_E_VERSION,
                           "asyncio tasks need CPython 3.14 or newer: %s "
                           "has no .AsyncioDebug section", s->version);
    if (!s->ops->mappings)
        return 0;
    seek k = {.s = s};
    int rc = s->ops->mappings(s->ctx, seek_fn, &k);
    for (size_t i = 0; i < k.nseen; i++)
        free(k.seen[i]);
    if (rc < 0)
        return pyu_err_set(&s->err, -rc, "listing mappings: %s",
                           pyu_strerror(rc));
    if (!k.addr)
        return 0;
    uint64_t a[A_COUNT];
    if (pyu_read(s, k.addr, a, sizeof a, "the .AsyncioDebug section") < 0)
        return -1;
    const char *bad = NULL;
    if (a[A_TASK_SIZE] < 64 || a[A_TASK_SIZE] > MAX_TASK_SIZE)
        bad = "task size";
    for (int i = A_TASK_NAME; !bad && i <= A_TASK_NODE; i++)
        if (a[i] + 16 > a[A_TASK_SIZE])
            bad = "task field";
    if (!bad && (a[A_INTERP_SIZE] > PYU_MAX_SECTION ||
                 a[A_INTERP_TASKS_HEAD] + 16 > a[A_INTERP_SIZE]))
        bad = "interpreter field";
    for (int i = A_TS_RUNNING_LOOP; !bad && i <= A_TS_TASKS_HEAD; i++)
        if (a[A_TS_SIZE] > PYU_MAX_SECTION || a[i] + 8 > a[A_TS_SIZE])
            bad = "thread state field";
    if (bad)
        return pyu_err_set(&s->err, PYU_E_OFFSETS, "the .AsyncioDebug "
                           "section at 0x%" PRIx64 " is not valid (%s)",
                           k.addr, bad);
    memcpy(s->aio, a, sizeof a);
    s->aio_addr = k.addr;
    return 1;
}

/* ------------------------------------------------------------ one task */

static const char *keep_error(tasks_impl *t, const char *msg)
{
    char **e = realloc(t->errors, (t->nerrors + 1) * sizeof *e);
    if (!e)
        return "out of memory";
    t->errors = e;
    if (!(e[t->nerrors] = strdup(msg)))
        return "out of memory";
    return e[t->nerrors++];
}

static int type_flags(pyu_session *s, tasks_impl *t, uint64_t obj,
                      unsigned long *flags)
{
    const pyu_offsets *o = &s->off;
    uint64_t type = 0, f = 0;
    if (pyu_read(s, obj + PYU_OFF(o, ob_type), &type, 8, "an object's type") < 0)
        return -1;
    for (unsigned i = 0; i < t->ntypes; i++) /* names are str or int */
        if (t->types[i].type == type) {
            *flags = (unsigned long)t->types[i].flags;
            return 0;
        }
    if (pyu_read(s, type + PYU_OFF(o, tp_flags), &f, 8, "a type's flags") < 0)
        return -1;
    if (t->ntypes < sizeof t->types / sizeof t->types[0]) {
        t->types[t->ntypes].type = type;
        t->types[t->ntypes++].flags = f;
    }
    *flags = (unsigned long)f;
    return 0;
}

/* The task's name: a str, or an int n shown as "Task-n". */
static const char *task_name(pyu_session *s, tasks_impl *t, uint64_t name)
{
    const pyu_offsets *o = &s->off;
    unsigned long flags;
    if (!name || type_flags(s, t, name, &flags) < 0)
        return NULL;
    if (flags & TPFLAGS_UNICODE_SUBCLASS) {
        const char *text = pyu_str_read(s, name);
        return text ? pyu_strtab_put(t->strings, name, text, strlen(text))
                    : NULL;
    }
    if (!(flags & TPFLAGS_LONG_SUBCLASS)) {
        pyu_err_set(&s->err, PYU_E_CORRUPT, "task name is neither str nor int");
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
        pyu_err_set(&s->err, PYU_E_CORRUPT, "task number too large");
        return NULL;
    }
    for (uint64_t i = ndigits; i-- > 0;)
        v = (v << PYLONG_SHIFT) | (digit[i] & ((1u << PYLONG_SHIFT) - 1));
    char buf[40];
    int n = snprintf(buf, sizeof buf, "Task-%s%" PRIu64,
                     (tag & 3) == 2 ? "-" : "", v);
    return pyu_strtab_put(t->strings, name ^ 1, buf, (size_t)n);
}

/* Frame states of generator-like objects, per version. */
static void frame_states(const pyu_session *s, int *yield_from,
                         int *yield_from_locked, int *cleared)
{
    if (s->off.version_hex >= 0x030F0000) { /* renumbered in 3.15 */
        *yield_from = 2;
        *yield_from_locked = 3;
        *cleared = 5;
    } else {
        *yield_from = -1;
        *yield_from_locked = -1;
        *cleared = 4;
    }
}

enum { AWAITED_OTHER, AWAITED_CORO, AWAITED_WRAPPER };
#define TPFLAGS_HEAPTYPE (1ul << 9)

/* The chain goes on from an awaited object that is a coroutine, or an
 * async generator's asend/athrow wrapper (to the generator in it), as
 * CPython's own reader does since 3.14.8-ish and in 3.15; a class of its
 * own (a heap type), a future or anything else ends it. */
static int awaited_kind(pyu_session *s, tasks_impl *t, uint64_t type)
{
    const pyu_offsets *o = &s->off;
    for (unsigned i = 0; i < t->nawaited; i++)
        if (t->awaited[i].type == type)
            return t->awaited[i].kind;
    uint64_t flags = 0, name_ptr = 0;
    char name[32] = "";
    pyu_range r[2] = {
        {type + PYU_OFF(o, tp_flags), &flags, 8},
        {type + PYU_OFF(o, tp_name), &name_ptr, 8},
    };
    int kind = AWAITED_OTHER;
    if (pyu_readv(s, r, 2, "an awaited object's type") == 0 &&
        !(flags & TPFLAGS_HEAPTYPE) && name_ptr) {
        pyu_range n = {name_ptr, name, sizeof name - 1};
        if (s->ops->read(s->ctx, &n, 1) == 0) {
            if (strcmp(name, "coroutine") == 0)
                kind = AWAITED_CORO;
            else if (strcmp(name, "async_generator_asend") == 0 ||
                     strcmp(name, "async_generator_athrow") == 0)
                kind = AWAITED_WRAPPER;
        }
    }
    if (t->nawaited < sizeof t->awaited / sizeof t->awaited[0]) {
        t->awaited[t->nawaited].type = type;
        t->awaited[t->nawaited++].kind = kind;
    }
    return kind;
}

/* Appends the coroutine chain starting at coro to the task's stack (as
 * read: outermost first; reversed by the caller). */
static int coro_chain(pyu_session *s, tasks_impl *t, pyu_task *task,
                      uint64_t coro)
{
    const pyu_offsets *o = &s->off;
    size_t fsize = (size_t)PYU_OFF(o, fr_size);
    int yf, yf_locked, cleared;
    frame_states(s, &yf, &yf_locked, &cleared);
    /* the frame and, after it, the start of its value stack: the awaited
     * object is usually within this window */
    uint8_t frame[4096];
    size_t window = fsize + 256 <= sizeof frame ? fsize + 256 : fsize;
    size_t cap = 0;
    for (int depth = 0; coro && depth < MAX_CORO_DEPTH; depth++) {
        uint64_t type = 0;
        int8_t state = 0;
        uint64_t fr = coro + PYU_OFF(o, gen_gi_iframe);
        pyu_range r[3] = {
            {coro + PYU_OFF(o, ob_type), &type, 8},
            {coro + PYU_OFF(o, gen_gi_frame_state), &state, 1},
            {fr, frame, window},
        };
        if (pyu_readv(s, r, 3, "a coroutine") < 0) {
            r[2].len = fsize; /* the window may cross into unmapped memory */
            if (pyu_readv(s, r, 3, "a coroutine") < 0)
                return -1;
            window = fsize;
        }
        if (state == cleared)
            return 0;
        if (task->nstack == cap) {
            size_t ncap = cap ? cap * 2 : 8;
            pyu_frame *f = realloc(task->stack, ncap * sizeof *f);
            if (!f)
                return pyu_err_set(&s->err, PYU_E_NOMEM, "out of memory");
            task->stack = f;
            cap = ncap;
        }
        int rc = pyu_frame_fill(s, t->strings, frame, fsize,
                                &task->stack[task->nstack]);
        if (rc < 0)
            return -1;
        task->nstack += (size_t)rc;
        if (state != yf && state != yf_locked)
            return 0;
        /* suspended in await: the awaited object is on top of the value
         * stack (3.14), or just below the top (3.15) */
        uint64_t sp = pyu_u64(frame, fsize, PYU_OFF(o, fr_stackpointer)) &
                      ~o->tag_mask;
        uint64_t awaited = 0, atype = 0;
        uint64_t slot = s->off.version_hex >= 0x030F0000 ? 16 : 8;
        if (!sp || sp < slot)
            return 0;
        if (sp - slot >= fr && sp - slot + 8 <= fr + window)
            memcpy(&awaited, frame + (sp - slot - fr), 8);
        else if (pyu_read(s, sp - slot, &awaited, 8, "an awaited object") < 0)
            return -1;
        awaited &= ~o->tag_mask;
        if (!awaited ||
            pyu_read(s, awaited + PYU_OFF(o, ob_type), &atype, 8,
                     "an awaited object's type") < 0)
            return 0;
        int kind = atype == type ? AWAITED_CORO : awaited_kind(s, t, atype);
        if (kind == AWAITED_OTHER)
            return 0;
        coro = awaited;
        if (kind == AWAITED_WRAPPER && /* its generator follows the header */
            pyu_read(s, awaited + PYU_OFF(o, ob_type) + 8, &coro, 8,
                     "an async generator wrapper") < 0)
            return 0;
    }
    return 0;
}

static int add_awaiter(pyu_session *s, pyu_task *task, size_t *cap,
                       uint64_t who)
{
    if (task->nawaited_by >= MAX_AWAITERS)
        return 0;
    if (task->nawaited_by == *cap) {
        size_t ncap = *cap ? *cap * 2 : 4;
        uint64_t *a = realloc(task->awaited_by, ncap * sizeof *a);
        if (!a)
            return pyu_err_set(&s->err, PYU_E_NOMEM, "out of memory");
        task->awaited_by = a;
        *cap = ncap;
    }
    task->awaited_by[task->nawaited_by++] = who;
    return 0;
}

/* The tasks awaiting this one: one object, or a set of them. */
static int awaiters(pyu_session *s, pyu_task *task, uint64_t by, bool is_set)
{
    const pyu_offsets *o = &s->off;
    size_t cap = 0;
    if (!by)
        return 0;
    if (!is_set)
        return add_awaiter(s, task, &cap, by);
    int64_t used = 0, mask = 0;
    uint64_t table = 0;
    pyu_range r[3] = {
        {by + PYU_OFF(o, set_used), &used, 8},
        {by + PYU_OFF(o, set_mask), &mask, 8},
        {by + PYU_OFF(o, set_table), &table, 8},
    };
    if (pyu_readv(s, r, 3, "a task's awaiters") < 0)
        return -1;
    if (mask < 0 || mask >= (int64_t)MAX_SET_SLOTS || ((mask + 1) & mask) ||
        used < 0 || used > mask + 1 || !table)
        return pyu_err_set(&s->err, PYU_E_CORRUPT, "the set of a task's "
                           "awaiters at 0x%" PRIx64 " makes no sense", by);
    size_t n = (size_t)mask + 1;
    struct entry {
        uint64_t key;
        int64_t hash;
    } *e = malloc(n * sizeof *e);
    if (!e)
        return pyu_err_set(&s->err, PYU_E_NOMEM, "out of memory");
    int rc = pyu_read(s, table, e, n * sizeof *e, "a set's table");
    /* empty slots have no key; deleted ones hold a dummy with hash -1 */
    for (size_t i = 0; rc == 0 && i < n; i++)
        if (e[i].key && e[i].hash != -1)
            rc = add_awaiter(s, task, &cap, e[i].key);
    free(e);
    return rc;
}

static pyu_task *new_task(pyu_session *s, tasks_impl *t)
{
    if (t->pub.ntasks == t->cap) {
        size_t ncap = t->cap ? t->cap * 2 : 64;
        pyu_task *n = realloc(t->pub.tasks, ncap * sizeof *n);
        if (!n) {
            pyu_err_set(&s->err, PYU_E_NOMEM, "out of memory");
            return NULL;
        }
        t->pub.tasks = n;
        t->cap = ncap;
    }
    pyu_task *task = &t->pub.tasks[t->pub.ntasks++];
    memset(task, 0, sizeof *task);
    return task;
}

/* Reads the task at addr (a copy of it in buf). */
static int read_task(pyu_session *s, tasks_impl *t, pyu_task *task,
                     const uint8_t *buf, size_t size)
{
    const uint64_t *a = s->aio;
    task->name = task_name(s, t, pyu_u64(buf, size, a[A_TASK_NAME]) &
                                     ~s->off.tag_mask);
    if (!task->name)
        return -1;
    if (coro_chain(s, t, task, pyu_u64(buf, size, a[A_TASK_CORO])) < 0)
        return -1;
    for (size_t i = 0, j = task->nstack; i < j / 2; i++) { /* innermost first */
        pyu_frame f = task->stack[i];
        task->stack[i] = task->stack[j - 1 - i];
        task->stack[j - 1 - i] = f;
    }
    return awaiters(s, task, pyu_u64(buf, size, a[A_TASK_AWAITED_BY]),
                    pyu_u8(buf, size, a[A_TASK_AWAITED_BY_IS_SET]) != 0);
}

/* ------------------------------------------------------------- the lists */

typedef struct owner {
    int64_t interp_id;
    uint64_t thread_id, native_id;
    uint64_t running;
} owner;

/* Walks the circular task list whose sentinel node is at head. */
static int walk_list(pyu_session *s, tasks_impl *t, uint64_t head,
                     const owner *who)
{
    const pyu_offsets *o = &s->off;
    const uint64_t *a = s->aio;
    size_t size = (size_t)a[A_TASK_SIZE];
    uint8_t buf[MAX_TASK_SIZE];
    uint64_t node = 0;
    cycle cyc = {0, 1, 0};
    if (pyu_read(s, head + PYU_OFF(o, llist_next), &node, 8,
                 "a task list head") < 0)
        return -1;
    while (node && node != head) {
        if (t->pub.ntasks >= PYU_MAX_TASKS || cycle_step(&cyc, node)) {
            t->pub.truncated = 1; /* too many, or a list that loops */
            return 0;
        }
        uint64_t addr = node - a[A_TASK_NODE];
        if (pyu_read(s, addr, buf, size, "a task") < 0) {
            t->pub.truncated = 1; /* the list cannot be followed further */
            return s->err.code == PYU_E_NOMEM ? -1 : 0;
        }
        pyu_task *task = new_task(s, t);
        if (!task)
            return -1;
        task->id = addr;
        task->interpreter_id = who->interp_id;
        task->thread_id = who->thread_id;
        task->native_thread_id = who->native_id;
        task->running = who->running == addr;
        if (read_task(s, t, task, buf, size) < 0) {
            if (s->err.code == PYU_E_NOMEM)
                return -1;
            task->error = keep_error(t, pyu_errmsg(s));
            if (!task->name)
                task->name = "?";
        }
        node = pyu_u64(buf, size, a[A_TASK_NODE] + PYU_OFF(o, llist_next));
    }
    return 0;
}

static int walk_interpreters(pyu_session *s, void *arg)
{
    tasks_impl *t = arg;
    const pyu_offsets *o = &s->off;
    const uint64_t *a = s->aio;
    uint64_t interp = 0;
    if (pyu_read(s, s->runtime + PYU_OFF(o, rt_interpreters_head), &interp,
                 8, "the interpreter list") < 0)
        return -1;
    cycle icyc = {0, 1, 0};
    for (int ni = 0; interp && ni < PYU_MAX_INTERPRETERS &&
                     !cycle_step(&icyc, interp); ni++) {
        interp_info ii;
        if (pyu_interp_read(s, interp, &ii, NULL, 0) < 0)
            return -1;
        int64_t id = ii.id;
        uint64_t ts = ii.threads_head;
        cycle tcyc = {0, 1, 0};
        for (size_t nt = 0; ts && nt < PYU_MAX_THREADS &&
                            !cycle_step(&tcyc, ts); nt++) {
            owner who = {id, 0, 0, 0};
            uint64_t tnext = 0, loop = 0;
            pyu_range tr[5] = {
                {ts + PYU_OFF(o, ts_next), &tnext, 8},
                {ts + PYU_OFF(o, ts_thread_id), &who.thread_id, 8},
                {ts + PYU_OFF(o, ts_native_thread_id), &who.native_id, 8},
                {ts + a[A_TS_RUNNING_LOOP], &loop, 8},
                {ts + a[A_TS_RUNNING_TASK], &who.running, 8},
            };
            if (pyu_readv(s, tr, 5, "a thread state") < 0)
                return -1;
            if (!loop) /* no event loop runs: no task is running */
                who.running = 0;
            if (walk_list(s, t, ts + a[A_TS_TASKS_HEAD], &who) < 0)
                return pyu_err_ctx(&s->err, "tasks of thread %" PRIu64,
                                   who.native_id);
            ts = tnext;
        }
        owner none = {id, 0, 0, 0};
        if (walk_list(s, t, interp + a[A_INTERP_TASKS_HEAD], &none) < 0)
            return pyu_err_ctx(&s->err, "tasks of interpreter %" PRId64, id);
        interp = ii.next;
    }
    return 0;
}

int pyu_tasks_take(pyu_session *s, pyu_tasks **out)
{
    if (!s || !out)
        return -PYU_E_INVAL;
    *out = NULL;
    if (!s->opened)
        return pyu_err_set(&s->err, PYU_E_STATE, "the session is not open");
    int found = find_section(s);
    if (found < 0) /* helpers return -1; the code is in the record */
        return -s->err.code;
    tasks_impl *t = calloc(1, sizeof *t);
    if (!t || !(t->strings = pyu_strtab_new())) {
        free(t);
        return pyu_err_set(&s->err, PYU_E_NOMEM, "out of memory");
    }
    t->pub.pid = s->pid;
    snprintf(t->pub.version, sizeof t->pub.version, "%s", s->version);
    t->pub.free_threaded = s->off.free_threaded;
    if (s->ops->fatal_signal &&
        s->ops->fatal_signal(s->ctx, &t->pub.signal, &t->pub.signal_thread) < 0)
        t->pub.signal = 0;
    if (!found) {
        *out = &t->pub;
        return 0;
    }
    s->dump_serial++; /* names copied for earlier results are theirs */
    /* (3.14+: reading each interpreter notes its code_object_generation,
     * which flushes the caches when code objects were freed) */
    int rc = pyu_paused(s, walk_interpreters, t);
    if (rc < 0) {
        pyu_tasks_free(&t->pub);
        return rc;
    }
    *out = &t->pub;
    return 0;
}

/* ------------------------------------------------- async-aware stacks */

#define MAX_ASYNC_LINKS 1024

/* Splices the awaiters of the thread's running task into its frames. */
static int splice(pyu_session *s, const pyu_tasks *t, pyu_thread *th,
                  const pyu_task *run)
{
    /* the task's own coroutine is the outermost of its chain; the thread's
     * frames are kept down to its frame, loop machinery below is dropped */
    if (!run->nstack)
        return 0;
    uint64_t code = run->stack[run->nstack - 1].code_addr;
    size_t k = 0;
    while (k < th->nframes && th->frames[k].code_addr != code)
        k++;
    if (k == th->nframes)
        return 0; /* the coroutine is not on this stack (yet): leave it */
    size_t nframes = k + 1, nlinks = 1;
    const pyu_task *chain[MAX_ASYNC_LINKS];
    chain[0] = run;
    cycle cyc = {0, 1, 0};
    for (const pyu_task *cur = run; nlinks < MAX_ASYNC_LINKS;) {
        const pyu_task *next = cur->nawaited_by
                                   ? pyu_tasks_find(t, cur->awaited_by[0])
                                   : NULL;
        if (!next || cycle_step(&cyc, next->id))
            break;
        chain[nlinks++] = next;
        nframes += next->nstack;
        cur = next;
    }
    pyu_frame *frames = malloc(nframes * sizeof *frames);
    pyu_task_link *links = malloc(nlinks * sizeof *links);
    if (!frames || !links) {
        free(frames);
        free(links);
        return pyu_err_set(&s->err, PYU_E_NOMEM, "out of memory");
    }
    memcpy(frames, th->frames, (k + 1) * sizeof *frames);
    size_t at = k + 1;
    links[0] = (pyu_task_link){0, run->id, run->name};
    for (size_t i = 1; i < nlinks; i++) {
        links[i] = (pyu_task_link){at, chain[i]->id, chain[i]->name};
        memcpy(frames + at, chain[i]->stack,
               chain[i]->nstack * sizeof *frames);
        at += chain[i]->nstack;
    }
    free(th->frames);
    th->frames = frames;
    th->nframes = nframes;
    free(th->tasks);
    th->tasks = links;
    th->ntasks = nlinks;
    return 0;
}

int pyu_dump_add_async(pyu_session *s, pyu_dump *d)
{
    if (!s || !d)
        return -PYU_E_INVAL;
    pyu_tasks *t = NULL;
    int rc = pyu_tasks_take(s, &t);
    if (rc < 0)
        return rc;
    for (size_t i = 0; i < d->nthreads && rc == 0; i++) {
        pyu_thread *th = &d->threads[i];
        for (size_t k = 0; k < t->ntasks; k++) {
            const pyu_task *task = &t->tasks[k];
            if (task->running && task->thread_id == th->thread_id &&
                task->interpreter_id == th->interpreter_id) {
                rc = splice(s, t, th, task);
                break;
            }
        }
    }
    if (rc < 0) {
        pyu_tasks_free(t);
        return rc;
    }
    d->has_async = 1;
    pyu_dump_keep_tasks(d, t); /* names of the spliced frames live there */
    return 0;
}
