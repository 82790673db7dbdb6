/* The one iterator over interpreters and their threads.
 *
 * First the runtime's interpreter list is read (each interpreter once,
 * noting its code_object_generation: when it moved, code objects were
 * freed and the caches are dropped before any frame is read).  Then, for
 * each interpreter in walk order, its thread states are read, one copy
 * each, into compact records (pyu_tstate), which are put in walk order and
 * handed to the caller.  Walk order is interpreters by ascending id and
 * threads oldest first with the main thread first; PYU_WALK_LIST_ORDER
 * keeps the runtime's order (both lists are newest first).
 *
 * The first interpreter and its first thread state are read speculatively
 * in the same call as the list head, at the addresses the previous walk
 * found: they hold while the process keeps its threads.
 */
#include "../internal.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

struct pyu_threads {
    uint64_t guess_interp, guess_tstate; /* first ones of the last walk */
    struct {
        uint64_t interp, gen; /* code_object_generation last seen */
    } generations[PYU_MAX_GENERATIONS];
    uint8_t *tsbuf; /* one thread state copy */
    uint8_t *spec;  /* the speculative copy of the first one */
    size_t tslen;
    pyu_tstate *recs; /* one interpreter's threads */
    size_t nrecs_cap;
    pyu_interp interps[PYU_MAX_INTERPRETERS];
    size_t order[PYU_MAX_INTERPRETERS];
};

void pyu_threads_free(pyu_session *s)
{
    if (s->threads) {
        free(s->threads->tsbuf);
        free(s->threads->spec);
        free(s->threads->recs);
    }
    free(s->threads);
    s->threads = NULL;
}

/* ----------------------------------------------------------- interpreters */

/* Code objects of an interpreter were freed when its code_object_generation
 * moved (3.14+): cached ones, and their names, may have been replaced at
 * the same addresses. */
static void note_generation(pyu_session *s, uint64_t interp, uint64_t gen)
{
    struct pyu_threads *t = s->threads;
    size_t free_slot = PYU_MAX_GENERATIONS;
    for (size_t i = 0; i < PYU_MAX_GENERATIONS; i++) {
        if (t->generations[i].interp == interp) {
            if (t->generations[i].gen != gen) {
                t->generations[i].gen = gen;
                pyu_caches_flush(s);
            }
            return;
        }
        if (!t->generations[i].interp && free_slot == PYU_MAX_GENERATIONS)
            free_slot = i;
    }
    if (free_slot == PYU_MAX_GENERATIONS) { /* too many: forget them all */
        memset(t->generations, 0, sizeof t->generations);
        free_slot = 0;
    }
    t->generations[free_slot].interp = interp;
    t->generations[free_slot].gen = gen;
    pyu_caches_flush(s); /* not seen before: nothing cached can be trusted */
}

void pyu_interp_plan(const pyu_offsets *o, uint64_t runtime, uint64_t interp,
                     pyu_interp *ii, pyu_interp_read *ir)
{
    memset(ir, 0, sizeof *ir);
    memset(ii, 0, sizeof *ii);
    ii->addr = interp;
    pyu_range *r = ir->r;
    size_t n = 0;
    r[n++] = (pyu_range){interp + PYU_OFF(o, is_id), &ir->id, 8};
    r[n++] = (pyu_range){interp + PYU_OFF(o, is_next), &ii->next, 8};
    r[n++] = (pyu_range){interp + PYU_OFF(o, is_threads_head),
                         &ii->threads_head, 8};
    r[n++] = (pyu_range){interp + PYU_OFF(o, is_gc) +
                             PYU_OFF(o, gc_collecting),
                         &ir->collecting, 4};
    if (PYU_HAS(o, is_threads_main))
        r[n++] = (pyu_range){interp + PYU_OFF(o, is_threads_main),
                             &ii->threads_main, 8};
    if (PYU_HAS(o, is_code_object_generation))
        r[n++] = (pyu_range){interp + PYU_OFF(o, is_code_object_generation),
                             &ir->gen, 8};
    /* free-threaded: thread-local bytecode copies come and go too */
    if (o->free_threaded && PYU_HAS(o, is_tlbc_generation) &&
        PYU_OFF(o, is_tlbc_generation) != 0)
        r[n++] = (pyu_range){interp + PYU_OFF(o, is_tlbc_generation),
                             &ir->tlbc_gen, 8};
    if (PYU_HAS(o, gc_frame))
        r[n++] = (pyu_range){interp + PYU_OFF(o, is_gc) + PYU_OFF(o, gc_frame),
                             &ii->gc_frame, 8};
    ir->nlocal = n;
    /* 3.11: one GIL, the runtime's, and the runtime names the main
     * thread */
    if (PYU_HAS(o, rt_gil_holder) && PYU_HAS(o, rt_gil_locked)) {
        r[n++] = (pyu_range){runtime + PYU_OFF(o, rt_gil_holder),
                             &ir->gil_holder, 8};
        r[n++] = (pyu_range){runtime + PYU_OFF(o, rt_gil_locked),
                             &ir->gil_locked, 4};
    }
    if (PYU_HAS(o, rt_main_thread))
        r[n++] = (pyu_range){runtime + PYU_OFF(o, rt_main_thread),
                             &ir->main_thread, 8};
    ir->n = n;
}

void pyu_interp_take(pyu_session *s, pyu_interp *ii,
                     const pyu_interp_read *ir)
{
    ii->id = (int64_t)ir->id;
    ii->gc_collecting = ir->collecting != 0;
    /* the holder stays named after a release: trust it while locked */
    ii->gil_holder = ir->gil_locked == 1 ? ir->gil_holder : 0;
    ii->main_thread = ir->main_thread;
    if (PYU_HAS(&s->off, is_code_object_generation))
        note_generation(s, ii->addr,
                        ir->gen ^ (ir->tlbc_gen * 0x9E3779B97F4A7C15ull));
}

/* The length of a thread state copy: the struct, and the caller's extra
 * words (they may lie in the larger _PyThreadStateImpl). */
size_t pyu_tstate_len(const pyu_session *s, const uint64_t extra_off[2])
{
    size_t len = (size_t)PYU_OFF(&s->off, ts_size);
    for (int i = 0; i < 2; i++)
        if (extra_off[i] != PYU_ABSENT && extra_off[i] + 8 > len)
            len = (size_t)extra_off[i] + 8;
    return len; /* <= PYU_BUF_TSTATE: both were validated against it */
}

/* Reads the interpreter list into t->interps (read order).  *first_ts is
 * set when the first interpreter's first thread state is already in
 * t->spec. */
static int read_interps(pyu_session *s, size_t *n, bool *truncated,
                        bool *first_ts)
{
    struct pyu_threads *t = s->threads;
    const pyu_offsets *o = &s->off;
    uint64_t head = 0, interp;
    pyu_interp_read ir;
    bool have_first = false;
    *first_ts = false;
    if (t->guess_interp) {
        pyu_interp_plan(o, s->runtime, t->guess_interp, &t->interps[0],
                        &ir);
        ir.r[ir.n++] = (pyu_range){
            s->runtime + PYU_OFF(o, rt_interpreters_head), &head, 8};
        if (t->guess_tstate) { /* (first: see pyu_plan_batch) */
            memmove(ir.r + 1, ir.r, ir.n++ * sizeof *ir.r);
            ir.r[0] = (pyu_range){t->guess_tstate, t->spec, t->tslen};
        }
        if (pyu_readv_quiet(s, ir.r, ir.n) == 0 && head == t->guess_interp) {
            have_first = true;
            *first_ts = t->guess_tstate &&
                        t->interps[0].threads_head == t->guess_tstate;
        }
    }
    if (!have_first &&
        pyu_read(s, s->runtime + PYU_OFF(o, rt_interpreters_head), &head, 8,
                 "the interpreter list") < 0)
        return -1;
    if (!head)
        return pyu_fail(&s->err, PYU_E_STATE,
                        "the runtime has no interpreter (finalised or "
                        "not started)");
    cycle cyc = {0, 1, 0};
    *n = 0;
    *truncated = false;
    for (interp = head; interp; interp = t->interps[*n - 1].next) {
        if (*n == PYU_MAX_INTERPRETERS || cycle_step(&cyc, interp)) {
            *truncated = true; /* interpreters not listed */
            break;
        }
        pyu_interp *ii = &t->interps[*n];
        if (*n == 0 && have_first) {
            pyu_interp_take(s, ii, &ir);
        } else {
            pyu_interp_plan(o, s->runtime, interp, ii, &ir);
            if (pyu_readv(s, ir.r, ir.n, "an interpreter state") < 0)
                return pyu_fail_ctx(&s->err, "interpreter %zu", *n);
            pyu_interp_take(s, ii, &ir);
        }
        (*n)++;
    }
    t->guess_interp = head;
    t->guess_tstate = t->interps[0].threads_head;
    return 0;
}

/* Puts the interpreters in ascending id (the runtime lists the newest
 * first); if ids repeat (garbage), the read order is kept. */
static void order_interps(struct pyu_threads *t, size_t n, bool list_order)
{
    for (size_t i = 0; i < n; i++)
        t->order[i] = i;
    if (list_order)
        return;
    for (size_t i = 1; i < n; i++) { /* insertion sort: n <= 256 */
        size_t k = t->order[i], j = i;
        for (; j > 0 && t->interps[t->order[j - 1]].id > t->interps[k].id;
             j--)
            t->order[j] = t->order[j - 1];
        t->order[j] = k;
    }
    for (size_t i = 1; i < n; i++)
        if (t->interps[t->order[i]].id == t->interps[t->order[i - 1]].id) {
            for (size_t k = 0; k < n; k++)
                t->order[k] = k;
            return;
        }
}

/* ---------------------------------------------------------------- threads */

#define PTHREAD_SCAN 4096 /* bytes of the main thread's struct pthread
                             looked through for its id */
#define PTHREAD_TID_GLIBC 720 /* where glibc 2.26 and later keep it on
                                 x86_64 (struct pthread: the TCB header,
                                 a list node, then tid) */

#define TID_PROBE 8 /* memo slots a pthread_t may take */
_Static_assert(PYU_TID_MEMO == 256, "tid_memo_slot() hashes to 8 bits");

/* The memo's slot of pthread_t `thread`: its own (*hit), else a free one or
 * the one it displaces.  (pthread_ts are pages apart at a fixed offset: a
 * hash of their low bits put two threads of one process in one slot, and
 * each sample read both ids again.) */
static uint64_t *tid_memo_slot(pyu_session *s, uint64_t thread, bool *hit)
{
    size_t h = (size_t)((thread * 0x9e3779b97f4a7c15ull) >> 56);
    uint64_t *free_slot = NULL;
    for (size_t k = 0; k < TID_PROBE; k++) {
        uint64_t *m = s->tid_memo[(h + k) % PYU_TID_MEMO];
        if (m[0] == thread) {
            *hit = true;
            return m;
        }
        if (!m[0] && !free_slot)
            free_slot = m;
    }
    *hit = false;
    return free_slot ? free_slot : s->tid_memo[h];
}

/* Before 3.11 a thread state names its thread only by its pthread_t, the
 * address of glibc's struct pthread, which holds the kernel's thread id.
 * Where, glibc's version decides: it is found once, as the word of the
 * main thread's struct that holds the process id (the main thread's id),
 * glibc's usual place first.  The native id of the thread whose pthread_t
 * is `thread`, or 0 when it cannot be told. */
static uint64_t native_of_pthread(pyu_session *s, const pyu_interp *in,
                                  uint64_t thread)
{
    if (s->pthread_tid_at == 0) {
        uint64_t main = in->main_thread;
        uint32_t *words = NULL;
        s->pthread_tid_at = -1;
        if (s->pid > 0 && main && !(main & 7) &&
            (words = malloc(PTHREAD_SCAN)) != NULL &&
            pyu_read_quiet(s, main, words, PTHREAD_SCAN) == 0) {
            if (words[PTHREAD_TID_GLIBC / 4] == (uint32_t)s->pid)
                s->pthread_tid_at = PTHREAD_TID_GLIBC;
            for (size_t k = 4; s->pthread_tid_at < 0 &&
                               k < PTHREAD_SCAN / 4; k++)
                if (words[k] == (uint32_t)s->pid)
                    s->pthread_tid_at = (int32_t)(4 * k);
        }
        free(words);
    }
    /* (a thread's id, as read since the thread lists were read whole:
     * a thread that ends changes them, and one that starts, before its
     * pthread_t can name another thread) */
    bool hit;
    uint64_t *memo = tid_memo_slot(s, thread, &hit);
    if (thread && hit)
        return memo[1];
    int32_t tid = 0;
    if (s->pthread_tid_at < 0 || !thread ||
        pyu_read_quiet(s, thread + (uint64_t)s->pthread_tid_at, &tid, 4) < 0
        || tid <= 0)
        return 0;
    memo[0] = thread;
    memo[1] = (uint64_t)tid;
    return (uint64_t)tid;
}

/* The loop below the one of the _PyCFrame at cf (3.11, 3.12), found on
 * the C stack alone.  The thread state names an eval loop's cframe before
 * the loop fills it in: its current frame and its previous are stack
 * garbage for a moment, or words the last loop at that place left there
 * (3.12.1's _PyEval_EvalFrameDefault writes both with one store, some
 * twenty instructions after the thread state's, and its entry frame, which
 * such a stale word names, in between).  A stopped 3.12 process that sorts
 * with Python key functions is caught there about 1 stop in 125.  The
 * stack of that moment is the loop's below, suspended in the call of C
 * code that entered this one; its cframe is the nearest one above cf on
 * the thread's C stack: a plausible frame's address, and a previous that
 * lies higher still, whose chain of previous ends at the thread state's
 * root_cframe after at most CF_CHAIN links. */
#define CF_SCAN 16384 /* (bytes of the C stack looked at above cf) */
#define CF_CHAIN 64
#define CF_REACH ((uint64_t)64 << 20) /* (a C stack's size at most) */

/* Whether w can be a frame's address: frames are 8-aligned, and lie in
 * user space above its first page. */
static bool frame_word_ok(uint64_t w)
{
    return (w & 7) == 0 && w >= 4096 && w < ((uint64_t)1 << 56);
}

/* The word at addr of the stack: in buf (a copy of lo..lo+len) when it
 * holds it, else read.  Whether it could be had. */
static bool stack_word(pyu_session *s, const uint8_t *buf, uint64_t lo,
                       size_t len, uint64_t addr, uint64_t *w)
{
    if (addr >= lo && addr + 8 <= lo + len) {
        memcpy(w, buf + (addr - lo), 8);
        return true;
    }
    return pyu_read_quiet(s, addr, w, 8) == 0;
}

static bool cframe_chained(pyu_session *s, uint64_t ts, uint64_t at,
                           uint64_t prev, const uint8_t *buf, uint64_t lo,
                           size_t len)
{
    const pyu_offsets *o = &s->off;
    uint64_t poff = PYU_OFF(o, cframe_previous);
    for (int k = 0; k < CF_CHAIN; k++) {
        if (prev == ts + PYU_OFF(o, ts_root_cframe))
            return true;
        if ((prev & 7) || prev <= at || prev - at > CF_REACH)
            return false;
        at = prev;
        if (!stack_word(s, buf, lo, len, at + poff, &prev))
            return false;
    }
    return false;
}

/* Whether the frames from word, up to the one that entered their loop
 * (an entry frame, 3.12; one that says is_entry, 3.11), end in a link to
 * the frame `under`: the word of the loop below theirs.  (Two words on a
 * C stack that look like a cframe whose chain reaches the root are met
 * well before the cframe sought: a frame pointer spilled beside a pointer
 * into the stack.) */
static bool loop_ends_at(pyu_session *s, uint64_t word, uint64_t under)
{
    const pyu_offsets *o = &s->off;
    uint8_t fr[256];
    size_t fsize = (size_t)PYU_OFF(o, fr_size);
    if (fsize > sizeof fr)
        return false;
    for (int k = 0; k < CF_CHAIN * 4 && frame_word_ok(word); k++) {
        pyu_frame_raw r;
        if (pyu_read_quiet(s, word, fr, fsize) < 0)
            return false;
        pyu_frame_raw_take(o, word, fr, fsize, &r);
        if (r.entry || r.owner >= PYU_OWNER_ENTRY)
            return r.prev == under;
        word = r.prev;
    }
    return false;
}

bool pyu_cframe_above(pyu_session *s, uint64_t ts, uint64_t cf,
                      uint64_t *below, uint64_t *word)
{
    const pyu_offsets *o = &s->off;
    if (!PYU_HAS(o, ts_root_cframe))
        return false;
    uint64_t coff = PYU_OFF(o, cframe_current_frame),
             poff = PYU_OFF(o, cframe_previous);
    uint64_t span = (coff > poff ? coff : poff) + 8;
    uint8_t *buf = malloc(CF_SCAN);
    uint64_t lo = (cf + 8 + 7) & ~(uint64_t)7;
    /* (the stack may end sooner, at a page's end) */
    size_t len = (size_t)(((lo + CF_SCAN) & ~(uint64_t)4095) - lo);
    while (buf && len > 4096 && pyu_read_quiet(s, lo, buf, len) < 0)
        len -= 4096;
    if (len <= 4096) /* (to the end of lo's page) */
        len = buf && pyu_read_quiet(s, lo, buf, 4096 - (lo & 4095)) == 0
                  ? 4096 - (lo & 4095)
                  : 0;
    bool found = false;
    for (uint64_t at = lo; buf && !found &&
                           at + span <= lo + len; at += 8) {
        uint64_t w, prev;
        memcpy(&w, buf + (at + coff - lo), 8);
        memcpy(&prev, buf + (at + poff - lo), 8);
        uint64_t under;
        if (frame_word_ok(w) && prev &&
            cframe_chained(s, ts, at, prev, buf, lo, len) &&
            stack_word(s, buf, lo, len, prev + coff, &under) &&
            loop_ends_at(s, w, under)) {
            *below = at;
            *word = w;
            found = true;
        }
    }
    free(buf);
    return found;
}

void pyu_tstate_take(pyu_session *s, const pyu_interp *in,
                     const uint64_t extra_off[2], uint64_t ts,
                     const uint8_t *buf, size_t len, pyu_tstate *r,
                     uint64_t *next, const pyu_peek *peek)
{
    const pyu_offsets *o = &s->off;
    memset(r, 0, sizeof *r);
    r->addr = ts;
    *next = pyu_u64(buf, len, PYU_OFF(o, ts_next));
    r->thread_id = pyu_u64(buf, len, PYU_OFF(o, ts_thread_id));
    r->native_id = PYU_HAS(o, ts_native_thread_id)
                       ? pyu_u64(buf, len, PYU_OFF(o, ts_native_thread_id))
                       : native_of_pthread(s, in, r->thread_id);
    r->main = PYU_HAS(o, is_threads_main) ? in->threads_main == ts
              : PYU_HAS(o, rt_main_thread)
                  ? in->main_thread && r->thread_id == in->main_thread
                  : s->pid > 0 && r->native_id == (uint64_t)s->pid;
    if (PYU_HAS(o, ts_current_frame)) {
        r->current_frame = pyu_u64(buf, len, PYU_OFF(o, ts_current_frame));
    } else if ((r->cframe = pyu_u64(buf, len, PYU_OFF(o, ts_cframe)))) {
        /* 3.11: the eval loop's _PyCFrame, on the thread's C stack */
        size_t k = 0;
        while (peek && k < peek->n && peek->cframe[k] != r->cframe)
            k++;
        if (peek && k < peek->n)
            r->current_frame = peek->current_frame[k];
        else if (pyu_read_quiet(s,
                                r->cframe + PYU_OFF(o, cframe_current_frame),
                                &r->current_frame, 8) < 0)
            r->frame_unread = true;
    }
    if (PYU_HAS(o, rt_gil_holder))
        r->holds_gil = in->gil_holder == ts;
    r->chunk = pyu_u64(buf, len, PYU_OFF(o, ts_datastack_chunk));
    if (PYU_HAS(o, ts_datastack_top))
        r->ds_top = pyu_u64(buf, len, PYU_OFF(o, ts_datastack_top));
    if (PYU_HAS(o, ts_base_frame)) /* a pointer to the frame that ends
                                       the chain (in _PyThreadStateImpl) */
        r->base_frame = pyu_u64(buf, len, PYU_OFF(o, ts_base_frame));
    if (PYU_HAS(o, ts_holds_gil))
        r->holds_gil = (pyu_u32(buf, len, PYU_OFF(o, ts_holds_gil)) &
                        o->holds_gil_mask) != 0;
    if (PYU_HAS(o, ts_gil_requested))
        r->gil_requested = pyu_u32(buf, len, PYU_OFF(o, ts_gil_requested));
    if (PYU_HAS(o, ts_current_exception))
        r->current_exception =
            pyu_u64(buf, len, PYU_OFF(o, ts_current_exception));
    if (PYU_HAS(o, ts_exc_info))
        r->exc_info = pyu_u64(buf, len, PYU_OFF(o, ts_exc_info));
    else if (PYU_HAS(o, ts_exc_state))
        r->exc_info = ts + PYU_OFF(o, ts_exc_state);
    /* usually the thread's own entry, inside the copy */
    uint64_t at = r->exc_info - ts;
    if (r->exc_info >= ts && at < len && len - at >= 16) {
        r->exc_info_local = true;
        r->exc_value = pyu_u64(buf, len, at + PYU_OFF(o, err_exc_value));
        r->exc_previous = pyu_u64(buf, len, at + PYU_OFF(o, err_previous_item));
    }
    for (int i = 0; i < 2; i++)
        if (extra_off[i] != PYU_ABSENT)
            r->extra[i] = pyu_u64(buf, len, extra_off[i]);
}

static bool grow_recs(struct pyu_threads *t, size_t need)
{
    if (need <= t->nrecs_cap)
        return true;
    size_t ncap = t->nrecs_cap ? t->nrecs_cap * 2 : 64;
    pyu_tstate *r = realloc(t->recs, ncap * sizeof *r);
    if (!r)
        return false;
    t->recs = r;
    t->nrecs_cap = ncap;
    return true;
}

/* A list read while it changed (--nonblocking; threads that come and go)
 * can end before its main thread: a thread's state freed as it was read,
 * its next pointer gone.  When the interpreter names its main thread
 * (3.13+) and the list did not hold it, that state is read from the
 * interpreter's own pointer (it must say it is of this interpreter) and
 * put with the others, and the list is said cut: the threads read are
 * listed, the main one first as always. */
static void main_as_last(pyu_session *s, const pyu_threads_cb *cb,
                         const pyu_interp *in, size_t *n, bool *truncated)
{
    struct pyu_threads *t = s->threads;
    const pyu_offsets *o = &s->off;
    if (!PYU_HAS(o, is_threads_main) || !in->threads_main)
        return;
    for (size_t i = 0; i < *n; i++)
        if (t->recs[i].main)
            return;
    *truncated = true;
    uint64_t next;
    if (!grow_recs(t, *n + 1) ||
        pyu_read_quiet(s, in->threads_main, t->tsbuf, t->tslen) < 0 ||
        pyu_u64(t->tsbuf, t->tslen, PYU_OFF(o, ts_interp)) != in->addr)
        return;
    pyu_tstate_take(s, in, cb->extra_off, in->threads_main, t->tsbuf,
                    t->tslen, &t->recs[*n], &next, NULL);
    (*n)++;
}

/* Reads an interpreter's thread states into t->recs, in walk order. */
static int read_threads(pyu_session *s, const pyu_threads_cb *cb,
                        const pyu_interp *in, bool have_first, size_t *n,
                        bool *truncated)
{
    struct pyu_threads *t = s->threads;
    uint64_t ts = in->threads_head;
    cycle cyc = {0, 1, 0};
    *n = 0;
    memset(s->tid_memo, 0, sizeof s->tid_memo);
    *truncated = false;
    for (; ts; (*n)++) {
        if (*n >= PYU_MAX_THREADS || cycle_step(&cyc, ts)) {
            *truncated = true;
            break;
        }
        const uint8_t *buf = *n == 0 && have_first ? t->spec : t->tsbuf;
        if (buf == t->tsbuf &&
            pyu_read(s, ts, t->tsbuf, t->tslen, "a thread state") < 0) {
            /* the list itself is unreadable here: stop */
            if (*n == 0)
                return pyu_fail_ctx(&s->err, "thread list of interpreter "
                                             "%" PRId64, in->id);
            *truncated = true;
            break;
        }
        if (!grow_recs(t, *n + 1))
            return pyu_fail(&s->err, PYU_E_NOMEM, "out of memory");
        pyu_tstate_take(s, in, cb->extra_off, ts, buf, t->tslen,
                        &t->recs[*n], &ts, NULL);
    }
    if (cb->flags & PYU_WALK_LIST_ORDER)
        return 0;
    main_as_last(s, cb, in, n, truncated);
    /* oldest first (the list is newest first), the main thread first */
    pyu_tstate *r = t->recs;
    for (size_t i = 0; i < *n / 2; i++) {
        pyu_tstate tmp = r[i];
        r[i] = r[*n - 1 - i];
        r[*n - 1 - i] = tmp;
    }
    for (size_t i = 1; i < *n; i++)
        if (r[i].main) {
            pyu_tstate m = r[i];
            memmove(r + 1, r, i * sizeof *r);
            r[0] = m;
            break;
        }
    return 0;
}

int pyu_threads_each(pyu_session *s, const pyu_threads_cb *cb, void *arg)
{
    struct pyu_threads *t = s->threads;
    if (!t && !(t = s->threads = calloc(1, sizeof *t)))
        return pyu_fail(&s->err, PYU_E_NOMEM, "out of memory");
    size_t len = pyu_tstate_len(s, cb->extra_off);
    if (len != t->tslen) {
        uint8_t *b = realloc(t->tsbuf, len), *c = b ? realloc(t->spec, len)
                                                      : NULL;
        if (b)
            t->tsbuf = b;
        if (c)
            t->spec = c;
        if (!b || !c)
            return pyu_fail(&s->err, PYU_E_NOMEM, "out of memory");
        t->tslen = len;
    }
    if (!PYU_HAS(&s->off, is_code_object_generation))
        pyu_caches_flush(s); /* no way to tell whether code was freed */

    size_t ninterp;
    bool interps_cut, first_ts;
    if (read_interps(s, &ninterp, &interps_cut, &first_ts) < 0)
        return -1;
    order_interps(t, ninterp, cb->flags & PYU_WALK_LIST_ORDER);
    for (size_t k = 0; k < ninterp; k++) {
        size_t i = t->order[k];
        const pyu_interp *in = &t->interps[i];
        size_t n;
        bool threads_cut;
        if (read_threads(s, cb, in, i == 0 && first_ts, &n, &threads_cut) <
            0)
            return -1;
        int rc = cb->interp ? cb->interp(arg, in, n, threads_cut,
                                         interps_cut)
                            : PYU_WALK_NEXT;
        if (rc != PYU_WALK_NEXT && rc != PYU_WALK_SKIP)
            return rc;
        for (size_t j = 0; rc == PYU_WALK_NEXT && j < n; j++) {
            int r = cb->thread(arg, in, &t->recs[j]);
            if (r != PYU_WALK_NEXT)
                return r;
        }
        rc = cb->interp_end ? cb->interp_end(arg, in, n, threads_cut,
                                             interps_cut)
                            : PYU_WALK_NEXT;
        if (rc != PYU_WALK_NEXT)
            return rc;
    }
    return 0;
}
