/* Walking interpreters, threads and frames into a dump. */
#include "internal.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

/* Frame owners: 3 is the C stack (3.13) or the interpreter (3.14+), 4 the C
 * stack (3.14+).  Neither holds Python code. */
#define OWNER_FIRST_SHIM 3

/* ------------------------------------------------------ data-stack chunks */

/* _PyStackChunk, unchanged since 3.11: previous, size (bytes, header
 * included), top, then the frames' memory. */
#define CHUNK_PREVIOUS 0
#define CHUNK_SIZE 8
#define CHUNK_HEADER 24
#define CHUNK_FIRST_READ (16u << 10) /* CPython's minimum chunk size */

static void stack_reset(pyu_stackview *v, uint64_t chunk, uint64_t used_end)
{
    v->n = 0;
    v->used = 0;
    v->next = chunk;
    v->first_end = used_end;
}

static bool stack_reserve(pyu_stackview *v, size_t more)
{
    if (v->used + more <= v->cap)
        return true;
    size_t ncap = v->cap ? v->cap : 64u << 10;
    while (ncap < v->used + more)
        ncap *= 2;
    uint8_t *nb = realloc(v->buf, ncap);
    if (!nb)
        return false;
    v->buf = nb;
    v->cap = ncap;
    return true;
}

/* Copies the next chunk of the list; false when there is none or it cannot
 * be read (frames are then read one by one). */
static bool stack_copy_next(pyu_session *s, pyu_stackview *v)
{
    uint64_t at = v->next;
    v->next = 0;
    if (!at || (at & 7) || v->n >= PYU_MAX_CHUNKS)
        return false;
    size_t first = CHUNK_FIRST_READ;
    /* The current chunk is used up to its innermost frame: copy no more
     * (shallow stacks fill a fraction of a chunk). */
    bool partial = false;
    if (v->n == 0 && v->first_end > at + CHUNK_HEADER &&
        v->first_end - at < first) {
        first = (size_t)(v->first_end - at);
        partial = true;
    }
    if (v->used + first > PYU_MAX_CHUNK_BYTES || !stack_reserve(v, first))
        return false;
    pyu_range r = {at, v->buf + v->used, first};
    if (s->ops->read(s->ctx, &r, 1) < 0) {
        r.len = CHUNK_HEADER; /* a smaller chunk near a mapping's end */
        if (s->ops->read(s->ctx, &r, 1) < 0)
            return false;
        first = CHUNK_HEADER;
    }
    uint8_t *c = v->buf + v->used;
    uint64_t size = pyu_u64(c, first, CHUNK_SIZE);
    uint64_t prev = pyu_u64(c, first, CHUNK_PREVIOUS);
    if (size < CHUNK_HEADER || size > PYU_MAX_CHUNK_BYTES ||
        v->used + size > PYU_MAX_CHUNK_BYTES)
        return false;
    if (partial && size >= first)
        size = first; /* the part in use */
    else if (size > first) {
        if (!stack_reserve(v, (size_t)size))
            return false;
        c = v->buf + v->used;
        pyu_range rest = {at + first, c + first, (size_t)size - first};
        if (s->ops->read(s->ctx, &rest, 1) < 0)
            return false;
    }
    v->chunk[v->n].start = at;
    v->chunk[v->n].end = at + size;
    v->chunk[v->n].at = v->used;
    v->n++;
    v->used += (size_t)size;
    v->next = prev;
    return true;
}

/* The local copy of len bytes at addr when they lie in a chunk, else NULL.
 * Valid until the next call. */
static const uint8_t *stack_find(pyu_session *s, pyu_stackview *v,
                                 uint64_t addr, size_t len)
{
    for (size_t i = 0;; i++) {
        if (i == v->n && !stack_copy_next(s, v))
            return NULL;
        if (addr >= v->chunk[i].start && addr < v->chunk[i].end &&
            v->chunk[i].end - addr >= len)
            return v->buf + v->chunk[i].at + (addr - v->chunk[i].start);
    }
}

/* ---------------------------------------------------------- dump storage */

typedef struct dump_impl {
    pyu_dump pub;
    size_t cap_threads;
    pyu_strtab *strings; /* copies of the session's strings, keyed by them */
    char **errors;       /* owned thread error messages */
    size_t nerrors;
    pyu_tasks *tasks;    /* pyu_dump_add_async: owns the names it adds */
} dump_impl;

void pyu_dump_keep_tasks(pyu_dump *pub, pyu_tasks *t)
{
    dump_impl *d = (dump_impl *)pub;
    pyu_tasks_free(d->tasks);
    d->tasks = t;
}

/* A result's copy of the text of the str object at remote address `addr`
 * (keyed by that address: the session's own copies may be dropped and
 * their memory reused while a dump is taken). */
static const char *copy_str(pyu_strtab *strings, uint64_t addr,
                            const char *text)
{
    const char *hit = pyu_strtab_get(strings, addr);
    return hit ? hit : pyu_strtab_put(strings, addr, text, strlen(text));
}

void pyu_dump_free(pyu_dump *pub)
{
    dump_impl *d = (dump_impl *)pub;
    if (!d)
        return;
    for (size_t i = 0; i < d->pub.nthreads; i++) {
        free(d->pub.threads[i].frames);
        free(d->pub.threads[i].tasks);
    }
    pyu_tasks_free(d->tasks);
    free(d->pub.threads);
    for (size_t i = 0; i < d->nerrors; i++)
        free(d->errors[i]);
    free(d->errors);
    pyu_strtab_free(d->strings);
    free(d);
}

static pyu_thread *add_thread(dump_impl *d)
{
    if (d->pub.nthreads == d->cap_threads) {
        size_t ncap = d->cap_threads ? d->cap_threads * 2 : 16;
        pyu_thread *t = realloc(d->pub.threads, ncap * sizeof *t);
        if (!t)
            return NULL;
        d->pub.threads = t;
        d->cap_threads = ncap;
    }
    pyu_thread *t = &d->pub.threads[d->pub.nthreads++];
    memset(t, 0, sizeof *t);
    return t;
}

static int thread_error(pyu_session *s, dump_impl *d, pyu_thread *t)
{
    char **e = realloc(d->errors, (d->nerrors + 1) * sizeof *e);
    if (!e)
        return pyu_err_set(&s->err, PYU_E_NOMEM, "out of memory");
    d->errors = e;
    e[d->nerrors] = strdup(s->err.msg);
    if (!e[d->nerrors])
        return pyu_err_set(&s->err, PYU_E_NOMEM, "out of memory");
    t->error = e[d->nerrors++];
    return 0;
}

/* --------------------------------------------------------------- frames */

/* Walks one thread's frames into t; *saw is set when the chain passes
 * through frame `watch` (0: none). */
/* Fills *f from a copy of an interpreter frame (fsize bytes).  Returns 1
 * for a Python frame, 0 for a frame with no code (a shim or a C frame), -1
 * on an error (message set).  Names are copied into `strings`, keyed by the
 * remote str address; s->dump_serial says which result they belong to. */
int pyu_frame_fill(pyu_session *s, pyu_strtab *strings, const uint8_t *buf,
                   size_t fsize, pyu_frame *f)
{
    const pyu_offsets *o = &s->off;
    uint8_t owner = pyu_u8(buf, fsize, PYU_OFF(o, fr_owner));
    if (owner >= OWNER_FIRST_SHIM)
        return 0;
    uint64_t exe = pyu_u64(buf, fsize, PYU_OFF(o, fr_executable)) &
                   ~o->tag_mask;
    bool is_code;
    const pyu_code *c = pyu_code_get(s, exe, &is_code);
    if (!c)
        return is_code ? -1 : 0;
    uint64_t ip = pyu_u64(buf, fsize, PYU_OFF(o, fr_instr_ptr));
    bool ft_tlbc = o->free_threaded && PYU_HAS(o, fr_tlbc_index);
    int32_t tlbc = ft_tlbc ? (int32_t)pyu_u32(buf, fsize,
                                             PYU_OFF(o, fr_tlbc_index))
                           : 0;
    pyu_code *cw = (pyu_code *)c;
    if (cw->dump_serial != s->dump_serial) {
        cw->dump_qualname = copy_str(strings, c->str_addr[0], c->qualname);
        cw->dump_name = copy_str(strings, c->str_addr[1], c->name);
        cw->dump_filename = copy_str(strings, c->str_addr[2], c->filename);
        if (!cw->dump_qualname || !cw->dump_name || !cw->dump_filename)
            return pyu_err_set(&s->err, PYU_E_NOMEM, "out of memory");
        cw->dump_serial = s->dump_serial;
    }
    f->function = cw->dump_qualname;
    f->name = cw->dump_name;
    f->file = cw->dump_filename;
    f->line = pyu_code_line(s, c, ip, tlbc);
    f->code_addr = exe;
    return 1;
}

static int walk_frames(pyu_session *s, dump_impl *d, pyu_thread *t,
                       uint64_t frame, uint64_t base_frame, uint64_t chunk,
                       uint64_t watch, bool *saw)
{
    const pyu_offsets *o = &s->off;
    size_t fsize = (size_t)PYU_OFF(o, fr_size), cap = 0;
    uint8_t buf[4096];
    cycle cyc = {0, 1, 0};

    stack_reset(&s->stack, chunk, frame + fsize);
    while (frame) {
        if (cycle_step(&cyc, frame)) {
            t->truncated = 2;
            break;
        }
        if (frame == watch)
            *saw = true;
        if (t->nframes >= PYU_MAX_FRAMES) {
            t->truncated = 1;
            break;
        }
        const uint8_t *local = stack_find(s, &s->stack, frame, fsize);
        if (local)
            memcpy(buf, local, fsize);
        else if (pyu_read(s, frame, buf, fsize, "a frame") < 0)
            return -1;
        uint64_t prev = pyu_u64(buf, fsize, PYU_OFF(o, fr_previous));
        if (t->nframes == cap) {
            size_t ncap = cap ? cap * 2 : 64;
            pyu_frame *f = realloc(t->frames, ncap * sizeof *f);
            if (!f)
                return pyu_err_set(&s->err, PYU_E_NOMEM, "out of memory");
            t->frames = f;
            cap = ncap;
        }
        int rc = pyu_frame_fill(s, d->strings, buf, fsize,
                                &t->frames[t->nframes]);
        if (rc < 0)
            return -1;
        t->nframes += (size_t)rc;
        if (frame == base_frame)
            break;
        frame = prev;
    }
    return 0;
}

/* --------------------------------------------------------------- threads */


/* Code objects of an interpreter were freed when its code_object_generation
 * moved (3.14+): cached ones, and their names, may have been replaced at
 * the same addresses. */
static void note_generation(pyu_session *s, uint64_t interp, uint64_t gen)
{
    size_t free_slot = PYU_MAX_GENERATIONS;
    for (size_t i = 0; i < PYU_MAX_GENERATIONS; i++) {
        if (s->generations[i].interp == interp) {
            if (s->generations[i].gen != gen) {
                s->generations[i].gen = gen;
                pyu_caches_flush(s); /* names may have been freed too */
            }
            return;
        }
        if (!s->generations[i].interp && free_slot == PYU_MAX_GENERATIONS)
            free_slot = i;
    }
    if (free_slot == PYU_MAX_GENERATIONS) { /* too many: forget them all */
        memset(s->generations, 0, sizeof s->generations);
        free_slot = 0;
    }
    s->generations[free_slot].interp = interp;
    s->generations[free_slot].gen = gen;
    pyu_caches_flush(s); /* not seen before: nothing cached can be trusted */
}

/* Reads the interpreter's fields, and in the same call the `extra` ranges
 * (speculative reads of what the walk needs next). */
int pyu_interp_read(pyu_session *s, uint64_t interp, interp_info *ii,
                    const pyu_range *extra, size_t nextra)
{
    const pyu_offsets *o = &s->off;
    uint64_t id = 0, tmain = 0, gen = 0, tlbc_gen = 0;
    int32_t collecting = 0;
    pyu_range r[10] = {
        {interp + PYU_OFF(o, is_id), &id, 8},
        {interp + PYU_OFF(o, is_next), &ii->next, 8},
        {interp + PYU_OFF(o, is_threads_head), &ii->threads_head, 8},
        {interp + PYU_OFF(o, is_gc) + PYU_OFF(o, gc_collecting), &collecting,
         4},
    };
    size_t n = 4;
    if (PYU_HAS(o, is_threads_main))
        r[n++] = (pyu_range){interp + PYU_OFF(o, is_threads_main), &tmain, 8};
    if (PYU_HAS(o, is_code_object_generation))
        r[n++] = (pyu_range){interp + PYU_OFF(o, is_code_object_generation),
                             &gen, 8};
    /* free-threaded: thread-local bytecode copies come and go too */
    bool has_tlbc_gen = o->free_threaded && PYU_HAS(o, is_tlbc_generation) &&
                        PYU_OFF(o, is_tlbc_generation) != 0;
    if (has_tlbc_gen)
        r[n++] = (pyu_range){interp + PYU_OFF(o, is_tlbc_generation),
                             &tlbc_gen, 8};
    ii->gc_frame = 0;
    if (PYU_HAS(o, gc_frame))
        r[n++] = (pyu_range){interp + PYU_OFF(o, is_gc) + PYU_OFF(o, gc_frame),
                             &ii->gc_frame, 8};
    for (size_t i = 0; i < nextra && n < 10; i++)
        r[n++] = extra[i];
    if (pyu_readv(s, r, n, "an interpreter state") < 0)
        return -1;
    ii->id = (int64_t)id;
    ii->threads_main = tmain;
    ii->gc_collecting = collecting != 0;
    if (PYU_HAS(o, is_code_object_generation))
        note_generation(s, interp, gen ^ (tlbc_gen * 0x9E3779B97F4A7C15ull));
    return 0;
}

/* Is the object at addr something other than None (an exception)? */
static bool is_exception(pyu_session *s, uint64_t obj)
{
    uint64_t type = 0, name_ptr = 0;
    char name[9] = {0};
    if (!obj)
        return false;
    if (pyu_read(s, obj + PYU_OFF(&s->off, ob_type), &type, 8, "an object") <
            0 ||
        pyu_read(s, type + PYU_OFF(&s->off, tp_name), &name_ptr, 8,
                 "a type") < 0 ||
        pyu_read(s, name_ptr, name, sizeof name, "a type name") < 0)
        return false;
    return memcmp(name, "NoneType", 9) != 0;
}

static unsigned thread_status(pyu_session *s, const interp_info *ii,
                              const uint8_t *buf, size_t len,
                              uint64_t native_id)
{
    const pyu_offsets *o = &s->off;
    unsigned st = 0;
    if (PYU_HAS(o, ts_holds_gil)) { /* 3.14+ */
        if (pyu_u32(buf, len, PYU_OFF(o, ts_holds_gil)))
            st |= PYU_STATUS_HAS_GIL;
    } else if ((pyu_u32(buf, len, PYU_OFF(o, ts_status)) >> 5) & 1) {
        st |= PYU_STATUS_HAS_GIL; /* 3.13: bit 5 of _status is holds_gil */
    }
    if (PYU_HAS(o, ts_gil_requested) &&
        pyu_u32(buf, len, PYU_OFF(o, ts_gil_requested)))
        st |= PYU_STATUS_GIL_REQUESTED;
    /* 3.15 names the frame that started a collection (the walk checks
     * it); before, the collector is whoever holds the GIL */
    if (ii->gc_collecting && !PYU_HAS(o, gc_frame) &&
        (st & PYU_STATUS_HAS_GIL))
        st |= PYU_STATUS_GC;
    char sched;
    if (s->ops->thread_state &&
        s->ops->thread_state(s->ctx, native_id, &sched) == 0 && sched == 'R')
        st |= PYU_STATUS_ON_CPU;
    uint64_t exc = PYU_HAS(o, ts_current_exception)
                       ? pyu_u64(buf, len, PYU_OFF(o, ts_current_exception))
                       : 0;
    uint64_t handled = 0;
    if (PYU_HAS(o, ts_exc_info)) {
        uint64_t item = pyu_u64(buf, len, PYU_OFF(o, ts_exc_info));
        if (item)
            pyu_read(s, item + PYU_OFF(o, err_exc_value), &handled, 8,
                     "an exception stack item");
    } else if (PYU_HAS(o, ts_exc_state)) {
        handled = pyu_u64(buf, len,
                          PYU_OFF(o, ts_exc_state) + PYU_OFF(o, err_exc_value));
    }
    if (is_exception(s, exc) || is_exception(s, handled))
        st |= PYU_STATUS_EXCEPTION;
    return st;
}

static int walk_thread(pyu_session *s, dump_impl *d, const interp_info *ii,
                       uint64_t ts, const uint8_t *have, uint64_t *next)
{
    const pyu_offsets *o = &s->off;
    size_t len = (size_t)PYU_OFF(o, ts_size);
    uint8_t local[4096];
    uint8_t *buf = len <= sizeof local ? local : malloc(len);
    if (!buf)
        return pyu_err_set(&s->err, PYU_E_NOMEM, "out of memory");
    if (have)
        memcpy(buf, have, len);
    else if (pyu_read(s, ts, buf, len, "a thread state") < 0) {
        if (buf != local)
            free(buf);
        return -1;
    }
    pyu_thread *t = add_thread(d);
    if (!t) {
        if (buf != local)
            free(buf);
        return pyu_err_set(&s->err, PYU_E_NOMEM, "out of memory");
    }
    *next = pyu_u64(buf, len, PYU_OFF(o, ts_next));
    t->interpreter_id = ii->id;
    t->thread_id = pyu_u64(buf, len, PYU_OFF(o, ts_thread_id));
    t->native_thread_id = pyu_u64(buf, len, PYU_OFF(o, ts_native_thread_id));
    if (PYU_HAS(o, is_threads_main))
        t->main = ii->threads_main == ts;
    else
        t->main = s->pid > 0 && t->native_thread_id == (uint64_t)s->pid;
    t->status = thread_status(s, ii, buf, len, t->native_thread_id);
    uint64_t frame = pyu_u64(buf, len, PYU_OFF(o, ts_current_frame));
    uint64_t base = PYU_HAS(o, ts_base_frame)
                        ? ts + PYU_OFF(o, ts_base_frame)
                        : 0;
    uint64_t chunk = pyu_u64(buf, len, PYU_OFF(o, ts_datastack_chunk));
    if (buf != local)
        free(buf);
    bool in_gc = false;
    int rc = walk_frames(s, d, t, frame, base, chunk,
                         ii->gc_collecting ? ii->gc_frame : 0, &in_gc);
    if (in_gc)
        t->status |= PYU_STATUS_GC;
    if (rc < 0) {
        if (s->err.code == PYU_E_NOMEM || s->err.code == PYU_E_NOPROC)
            return -1;
        pyu_err_ctx(&s->err, "after %zu frames", t->nframes);
        return thread_error(s, d, t);
    }
    return 0;
}

/* Orders threads oldest first (the lists are newest first) but keeps
 * interpreters in order, main threads first within each. */
static void order_threads(pyu_dump *d, size_t from)
{
    size_t n = d->nthreads - from;
    pyu_thread *t = d->threads + from;
    for (size_t i = 0; i < n / 2; i++) {
        pyu_thread tmp = t[i];
        t[i] = t[n - 1 - i];
        t[n - 1 - i] = tmp;
    }
    for (size_t i = 1; i < n; i++)
        if (t[i].main) {
            pyu_thread m = t[i];
            memmove(t + 1, t, i * sizeof *t);
            t[0] = m;
            break;
        }
}

/* The first interpreter and its first thread state, read together with the
 * interpreter list head in one call when the previous dump's addresses still
 * hold (they do while the process keeps its threads). */
typedef struct prefetch {
    uint64_t head;
    uint8_t ts[4096];
    bool interp_ok, ts_ok;
} prefetch;

static void speculate(pyu_session *s, prefetch *p, interp_info *ii)
{
    const pyu_offsets *o = &s->off;
    size_t tslen = (size_t)PYU_OFF(o, ts_size);
    pyu_range extra[2] = {
        {s->runtime + PYU_OFF(o, rt_interpreters_head), &p->head, 8},
        {s->guess_tstate, p->ts, tslen},
    };
    size_t n = s->guess_tstate && tslen <= sizeof p->ts ? 2 : 1;
    p->interp_ok = p->ts_ok = false;
    if (!s->guess_interp)
        return;
    pyu_err saved = s->err;
    if (pyu_interp_read(s, s->guess_interp, ii, extra, n) < 0) {
        s->err = saved; /* stale guesses: read the plain way */
        return;
    }
    p->interp_ok = p->head == s->guess_interp;
    p->ts_ok = p->interp_ok && n == 2 && ii->threads_head == s->guess_tstate;
}

/* Puts the interpreters' blocks of threads in ascending interpreter id
 * (the runtime lists the newest interpreter first). */
static int order_interpreters(pyu_session *s, pyu_dump *d,
                              const size_t *starts, size_t n)
{
    if (n < 2)
        return 0;
    pyu_thread *sorted = malloc(d->nthreads * sizeof *sorted);
    if (!sorted)
        return pyu_err_set(&s->err, PYU_E_NOMEM, "out of memory");
    size_t w = 0;
    int64_t last = INT64_MIN;
    for (size_t round = 0; round < n; round++) {
        /* the smallest id above the last one copied (ids are unique) */
        size_t pick = n;
        for (size_t i = 0; i < n; i++) {
            int64_t id = d->threads[starts[i]].interpreter_id;
            if (starts[i] < starts[i + 1] && id > last &&
                (pick == n || id < d->threads[starts[pick]].interpreter_id))
                pick = i;
        }
        if (pick == n)
            break;
        last = d->threads[starts[pick]].interpreter_id;
        size_t len = starts[pick + 1] - starts[pick];
        memcpy(sorted + w, d->threads + starts[pick], len * sizeof *sorted);
        w += len;
    }
    if (w == d->nthreads) /* else: duplicate ids (garbage): keep as read */
        memcpy(d->threads, sorted, w * sizeof *sorted);
    free(sorted);
    return 0;
}

static int walk_all(pyu_session *s, void *arg)
{
    dump_impl *d = arg;
    const pyu_offsets *o = &s->off;
    uint64_t interp;
    cycle icyc = {0, 1, 0};
    prefetch pf;
    interp_info first_ii;
    speculate(s, &pf, &first_ii);
    if (pf.interp_ok)
        interp = pf.head;
    else if (pyu_read(s, s->runtime + PYU_OFF(o, rt_interpreters_head),
                      &interp, 8, "the interpreter list") < 0)
        return -1;
    if (!interp)
        return pyu_err_set(&s->err, PYU_E_STATE,
                           "the runtime has no interpreter (finalised or "
                           "not started)");
    s->guess_interp = interp;
    size_t starts[PYU_MAX_INTERPRETERS + 1];
    size_t ninterp = 0;
    for (int ni = 0; interp; ni++) {
        interp_info ii;
        if (ni == PYU_MAX_INTERPRETERS || cycle_step(&icyc, interp)) {
            d->pub.threads_truncated = 1; /* interpreters not listed */
            break;
        }
        if (ni == 0 && pf.interp_ok)
            ii = first_ii;
        else if (pyu_interp_read(s, interp, &ii, NULL, 0) < 0)
            return pyu_err_ctx(&s->err, "interpreter %d", ni);
        if (ni == 0)
            s->guess_tstate = ii.threads_head;
        uint64_t ts = ii.threads_head;
        cycle tcyc = {0, 1, 0};
        size_t first = d->pub.nthreads;
        starts[ninterp++] = first;
        for (size_t nt = 0; ts; nt++) {
            if (nt >= PYU_MAX_THREADS) {
                d->pub.threads_truncated = 1;
                break;
            }
            if (cycle_step(&tcyc, ts)) {
                d->pub.threads_truncated = 1;
                break;
            }
            uint64_t next = 0;
            const uint8_t *have = ni == 0 && nt == 0 && pf.ts_ok ? pf.ts
                                                                 : NULL;
            if (walk_thread(s, d, &ii, ts, have, &next) < 0) {
                if (s->err.code == PYU_E_NOMEM || s->err.code == PYU_E_NOPROC)
                    return -1;
                /* the thread list itself is unreadable here: stop */
                if (nt == 0 && d->pub.nthreads == first)
                    return pyu_err_ctx(&s->err, "thread list of interpreter "
                                                "%" PRId64, ii.id);
                d->pub.threads_truncated = 1;
                break;
            }
            ts = next;
        }
        order_threads(&d->pub, first);
        interp = ii.next;
    }
    starts[ninterp] = d->pub.nthreads;
    return order_interpreters(s, &d->pub, starts, ninterp);
}

int pyu_paused(pyu_session *s, int (*fn)(pyu_session *, void *), void *arg)
{
    bool paused = false;
    if (s->ops->pause) {
        int rc = s->ops->pause(s->ctx);
        if (rc < 0)
            return pyu_err_set(&s->err, -rc, "stopping process %d: %s",
                               s->pid, pyu_strerror(rc));
        paused = true;
    }
    int rc = fn(s, arg);
    if (paused && s->ops->resume)
        s->ops->resume(s->ctx);
    return rc < 0 ? -s->err.code : 0;
}

int pyu_dump_take(pyu_session *s, pyu_dump **out)
{
    if (!s || !out)
        return -PYU_E_INVAL;
    *out = NULL;
    if (!s->opened)
        return pyu_err_set(&s->err, PYU_E_STATE, "the session is not open");
    dump_impl *d = calloc(1, sizeof *d);
    if (!d || !(d->strings = pyu_strtab_new())) {
        free(d);
        return pyu_err_set(&s->err, PYU_E_NOMEM, "out of memory");
    }
    d->pub.pid = s->pid;
    if (s->ops->fatal_signal &&
        s->ops->fatal_signal(s->ctx, &d->pub.signal, &d->pub.signal_thread) <
            0)
        d->pub.signal = 0;
    s->dump_serial++; /* names copied for earlier dumps are theirs */
    snprintf(d->pub.version, sizeof d->pub.version, "%s", s->version);
    d->pub.free_threaded = s->off.free_threaded;
    if (!PYU_HAS(&s->off, is_code_object_generation))
        pyu_caches_flush(s); /* no way to tell whether code was freed */

    int rc = pyu_paused(s, walk_all, d);
    if (rc < 0) {
        pyu_dump_free(&d->pub);
        return rc;
    }
    *out = &d->pub;
    return 0;
}
