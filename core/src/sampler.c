/* The sampler: one stack per selected thread, again and again, into a
 * profile.  This file is the loop that joins its parts (sampling.h):
 *
 *   per sample   the one batched read of the read plan (read_plan.c);
 *   per thread   a 3.15 thread whose anchor proves its stack takes only
 *                its innermost frame (frame_cache.c); any other is walked
 *                in the snapshot its thread state came with, and the walk
 *                is judged by the acceptance rules (accept.c).  A walk
 *                that left the snapshot (frames not where the plan put
 *                them) or did not pass is read again from a fresh
 *                snapshot of that thread alone, a few times at most; then
 *                the outer frames that passed are counted with an
 *                <unknown> frame on top (the thread alone when none did),
 *                so that every selected thread counts in every sample and
 *                the profile's totals stay true;
 *   then         (3.13, which does not report freed code objects) the
 *                code objects the stacks run are read again, and the
 *                caches flushed when one is not what its record says;
 *                each stack is committed to the frame cache (profile
 *                nodes reused) and counted.
 *
 * With PYU_SAMPLE_ASYNC each sample is a pyu_walk instead (the task
 * chains need the walk's asyncio reading).
 */
#include "sampling.h"

#include <stdlib.h>
#include <string.h>

#define RETRIES 2           /* fresh snapshots of a stack that did not pass */
#define GEN_DEPTH 16 /* generators that yielded a walk goes through */
#define GEN_TRIES 8  /* frames of the last stack tried as the resumer of a
                        generator its memo does not know */
#define GEN_WALKS 48 /* walks from such frames, a stack at most */
#define SINGLES 3           /* frames outside the spans read one by one
                               before the chunks are copied */
#define VALIDATE_MAX 64     /* code objects checked again per sample (3.13) */
#define TOP_STEPS 16        /* 3.11: frames gone up the data stack to its
                               top */


/* ---------------------------------------------------------------- walks */

typedef struct walk_ctx {
    pyu_sampler *sm;
    pyu_sthread *t;
    bool spans; /* the walk is in the spans read with its thread state */
} walk_ctx;

/* Stores each frame the walk meets, with the words at its saved stack
 * top when the same copy holds them, and its second copy when its range
 * was read twice. */
static int on_frame(void *arg, const pyu_frame_raw *f, const uint8_t *buf,
                    size_t avail)
{
    walk_ctx *w = arg;
    pyu_sthread *t = w->t;
    /* A frame popped since the thread state was read (3.14+: popping makes
     * the caller current, then clears the frame: its stack, its function,
     * its code) was running when the thread state was read, a moment
     * before its copy: a short function is often over by then.  Its
     * instruction pointer, which popping leaves, tells its code; whether
     * its caller, as copied, can have made the call is for the rules
     * (accept.c).  When the code cannot be told, the caller's stack is
     * taken, as it was when copied.  (The code the copy shows can be the
     * next call's, filling the slot again: its instruction pointer is set
     * after its code, and the thread state named the frame before that
     * call was made current.) */
    pyu_frame_raw was;
    bool is_popped = false;
    if (t->nfr == t->npopped && pyu_frame_popped(w->sm->s, f)) {
        const pyu_code *c = pyu_code_at_instr(w->sm->s, f->instr_ptr);
        if (!f->code && !c) {
            t->nfr = t->npopped = 0; /* (and the popped frames above) */
            t->unplaced = true;
            return 0;
        }
        was = *f;
        was.code = c ? c->addr : f->code;
        was.func = 0;
        f = &was;
        is_popped = true;
        t->npopped++;
    }
    if (t->nfr == t->frcap &&
        !pyu_grow((void **)&t->fr, t->nfr, &t->frcap, sizeof *t->fr))
        return -1;
    pyu_sframe *sf = &t->fr[t->nfr++];
    sf->r = *f;
    sf->nslot = pyu_sframe_slots(f->addr, f->sp, buf, avail, sf->slot);
    sf->ret = pyu_sframe_ret(w->sm, buf);
    sf->twice = false;
    sf->popped = is_popped;
    for (size_t k = 0; k < t->nearly && w->spans && !is_popped; k++) {
        const pyu_chunk_span *a = &t->span[k], *b = &t->span2[k];
        if (buf < a->local || buf >= a->local + (a->end - a->start))
            continue;
        size_t off = (size_t)(buf - a->local);
        const uint8_t *b2 = b->local + off;
        size_t avail2 = (size_t)(b->end - b->start) - off;
        pyu_frame_raw_take(&w->sm->s->off, f->addr, b2, w->sm->fsize,
                           &sf->r2);
        sf->nslot2 = pyu_sframe_slots(f->addr, sf->r2.sp, b2, avail2, sf->slot2);
        sf->ret2 = pyu_sframe_ret(w->sm, b2);
        sf->twice = true;
        break;
    }
    return 0;
}

/* Walks t's chain from `first`, in its spans when they were read with ts,
 * after the frames t holds.  0, or -1 on an error that ends the sample. */
static int walk_on(pyu_sampler *sm, pyu_sthread *t, const pyu_tstate *ts,
                   uint64_t first, bool spans)
{
    pyu_chain_it it = {.first = first, .base = ts->base_frame,
                       .span = spans ? t->span : NULL,
                       .nspan = spans ? t->nspan : 0, .chunk = ts->chunk,
                       .singles = SINGLES, .quiet = true};
    walk_ctx w = {sm, t, spans};
    if (pyu_chain_each(sm->s, &it, on_frame, &w) < 0) {
        if (!sm->s->err.code)
            pyu_fail(&sm->s->err, PYU_E_NOMEM, "out of memory");
        return -1;
    }
    t->end = it.end;
    t->outside = it.outside;
    sm->st.frames_read += it.n;
    return 0;
}

/* The same, from no frames. */
static int walk(pyu_sampler *sm, pyu_sthread *t, const pyu_tstate *ts,
                uint64_t first, bool spans)
{
    t->nfr = t->npopped = 0;
    t->unplaced = false;
    return walk_on(sm, t, ts, first, spans);
}

/* -------------------------------------------------------------- threads */

/* Is the thread one the mode records? */
static bool selected(const pyu_sampler *sm, const pyu_tstate *ts,
                     unsigned status)
{
    if (sm->o.thread && sm->o.thread != ts->native_id &&
        sm->o.thread != ts->thread_id)
        return false;
    switch (sm->o.mode) {
    case PYU_MODE_CPU:
        return status & PYU_STATUS_ON_CPU;
    case PYU_MODE_GIL:
        return status & PYU_STATUS_HAS_GIL;
    case PYU_MODE_EXCEPTION: /* and running, as CPython's sampler has it */
        return (status & PYU_STATUS_EXCEPTION) &&
               (status & (PYU_STATUS_HAS_GIL | PYU_STATUS_ON_CPU));
    default:
        return true;
    }
}

static unsigned status_wanted(const pyu_sampler *sm)
{
    return PYU_STATUS_EXCEPTION |
           (sm->o.mode == PYU_MODE_CPU ? PYU_STATUS_ON_CPU : 0u);
}

/* The generator (or coroutine) object whose frame is at frame: 3.14+
 * publish where a generator keeps its frame; before, the offset is found
 * once, by the object's type at the offsets the layouts of 3.11 and 3.13
 * (both builds) put it. */
static uint64_t gen_object(pyu_sampler *sm, uint64_t frame)
{
    pyu_session *s = sm->s;
    const pyu_offsets *o = &s->off;
    if (PYU_HAS(o, gen_gi_iframe))
        return frame - PYU_OFF(o, gen_gi_iframe);
    if (sm->gen_off)
        return frame - sm->gen_off;
    for (uint64_t off = 48; off <= 160; off += 8) {
        uint64_t type;
        if (frame < off ||
            pyu_read_quiet(s, frame - off + PYU_OFF(o, ob_type), &type, 8) <
                0)
            continue;
        const pyu_type *ty = pyu_type_get(s, type);
        if (ty && (strcmp(ty->name, "generator") == 0 ||
                   strcmp(ty->name, "coroutine") == 0 ||
                   strcmp(ty->name, "async_generator") == 0)) {
            sm->gen_off = off;
            return frame - off;
        }
    }
    return 0;
}

#define HOLD_WORDS 64 /* locals of a frame looked at, at most */
#define HELD_TRIES 2  /* generators a frame holds looked into, at most */
#define HELD_DEPTH 3  /* ... and generators they hold in turn */

/* How many locals (arguments, variables, cells) the code object at code
 * has: its co_localsplusnames tuple's size, read once per code object
 * (the last one asked is remembered). */
static size_t nlocals(pyu_sampler *sm, uint64_t code)
{
    pyu_session *s = sm->s;
    const pyu_offsets *o = &s->off;
    if (code == sm->nlocals_code && s->code_epoch == sm->nlocals_epoch)
        return sm->nlocals;
    uint64_t names = 0;
    int64_t n = 0;
    if (pyu_read_quiet(s, code + PYU_OFF(o, co_localsplusnames), &names, 8) <
            0 ||
        pyu_read_quiet(s, names + PYU_OFF(o, tuple_ob_size), &n, 8) < 0 ||
        n < 0)
        n = 0;
    sm->nlocals_code = code;
    sm->nlocals_epoch = s->code_epoch;
    sm->nlocals = n < HOLD_WORDS ? (size_t)n : HOLD_WORDS;
    return sm->nlocals;
}

/* Where t's spans hold len bytes at addr: their copy, with how many bytes
 * of it follow addr; NULL when none does. */
static const uint8_t *in_spans(const pyu_sthread *t, uint64_t addr,
                               size_t len, size_t *avail)
{
    for (size_t k = 0; k < t->nspan; k++) {
        const pyu_chunk_span *sp = &t->span[k];
        if (addr >= sp->start && addr < sp->end && sp->end - addr >= len) {
            *avail = (size_t)(sp->end - addr);
            return sp->local + (addr - sp->start);
        }
    }
    return NULL;
}

/* ------------------------- the data stack of the thread state's moment */

/* The frames of a thread's data stack lie one after the other, each the
 * size its code object says (its fixed fields, locals and value stack):
 * a call from Python code or from C code pushes its frame where the data
 * stack ends, and a return pops it; a generator's frame lies in the
 * generator.  The thread state read with the spans names the top of that
 * moment, and the spans hold the current chunk from its start (read
 * first, right after the thread state): stepping up from the chunk's
 * first frame code object by code object to that top finds the frames of
 * the data stack of the thread state's moment, each one's caller the
 * closest frame of the data stack below it, or C code called by it, or a
 * generator resumed by either (a generator's frames are not there).  A
 * frame moved between the thread state's read and the copy makes the
 * steps miss the top, and nothing is told. */

/* n bytes of t's memory at addr into buf: from its spans when they hold
 * them, else read now.  Whether they could be had. */
static bool span_bytes(pyu_sampler *sm, const pyu_sthread *t, uint64_t addr,
                       void *buf, size_t n)
{
    size_t avail;
    const uint8_t *copy = in_spans(t, addr, n, &avail);
    if (copy) {
        memcpy(buf, copy, n);
        return true;
    }
    return pyu_read_quiet(sm->s, addr, buf, n) == 0;
}

/* Whether t knows the extent of the data stack's chunk that holds its top
 * (as t's thread state ts had it), and the top lies in it. */
static bool top_chunk(const pyu_sthread *t, const pyu_tstate *ts)
{
    return t->chunk_end && t->chunk == ts->chunk &&
           ts->ds_top > ts->chunk && ts->ds_top <= t->chunk_end;
}

/* Whether f is a frame of that chunk, where frames lie one after the
 * other. */
static bool in_top_chunk(const pyu_sthread *t, const pyu_tstate *ts,
                         const pyu_frame_raw *f)
{
    return f->owner == PYU_OWNER_THREAD && top_chunk(t, ts) &&
           f->addr > ts->chunk && f->addr < t->chunk_end;
}

/* The bytes the code object code's frames take on the data stack, or 0. */
static uint64_t frame_size(pyu_sampler *sm, uint64_t code)
{
    bool is_code;
    const pyu_code *c = pyu_code_get(sm->s, code, &is_code);
    return c ? c->framesize : 0;
}

#define UNDER_STEPS 256 /* frames of a chunk stepped over at most */

/* The frame of the data stack right below the frame at addr (the top, when
 * addr is 0) in the chunk t's thread state ts had, or 0 when it cannot be
 * told (addr is the chunk's first frame, or not one of its frames). */
static uint64_t frame_under(pyu_sampler *sm, pyu_sthread *t,
                            const pyu_tstate *ts, uint64_t addr)
{
    const pyu_offsets *o = &sm->s->off;
    pyu_plan_note_chunk(sm, t, ts->chunk);
    uint64_t end = addr ? addr : ts->ds_top, prev;
    if (!top_chunk(t, ts) || end > ts->ds_top ||
        !span_bytes(sm, t, ts->chunk, &prev, 8))
        return 0;
    /* (_PyStackChunk {previous, size, top, data[]}: the first chunk of a
     * thread leaves its first word unused) */
    uint64_t f = ts->chunk + 24 + (prev ? 0 : 8), below = 0,
             off = PYU_OFF(o, fr_executable);
    for (int k = 0; k < UNDER_STEPS && f < end; k++) {
        uint64_t code, size;
        if (!span_bytes(sm, t, f + off, &code, 8) ||
            !(size = frame_size(sm, code & ~o->tag_mask)))
            return 0;
        below = f;
        f += size;
    }
    return f == end ? below : 0;
}

/* The words of frame f's locals and of its value stack up to its saved
 * top (HOLD_WORDS at most) into words: from t's spans when they hold
 * them, else read now.  How many.  A frame that did not save its top (3.13's
 * do not while they run) gives its locals only, unless `whole`: then all
 * of its frame -- the words of its stack past its top are left from
 * earlier pushes, and make it seem to hold the generators it made and
 * passed on, so only the frame the data stack proves to be below a
 * generator's (resume_under()) is looked at whole. */
static size_t frame_words(pyu_sampler *sm, const pyu_sthread *t,
                          const pyu_frame_raw *f, uint64_t *words, bool whole)
{
    uint64_t at = f->addr + PYU_OFF(&sm->s->off, fr_localsplus);
    size_t want = nlocals(sm, f->code);
    if (f->sp > at && f->sp - at <= 8 * (uint64_t)HOLD_WORDS &&
        (f->sp - at) / 8 > want)
        want = (size_t)((f->sp - at) / 8);
    uint64_t size;
    if (whole && !f->sp && f->owner == PYU_OWNER_THREAD && !sm->indirect &&
        (size = frame_size(sm, f->code)) > PYU_OFF(&sm->s->off, fr_localsplus))
    {
        size = (size - PYU_OFF(&sm->s->off, fr_localsplus)) / 8;
        want = size < HOLD_WORDS ? (size_t)size : HOLD_WORDS;
    }
    size_t n = 0, avail;
    const uint8_t *copy = in_spans(t, at, 1, &avail);
    if (copy) {
        n = avail / 8 < want ? avail / 8 : want;
        memcpy(words, copy, 8 * n);
    }
    if (!n && want && pyu_read_quiet(sm->s, at, words, 8 * want) == 0)
        n = want;
    return n;
}

/* Whether the frame f holds obj in a local variable (a generator's
 * resumer: the for loop's iterable, the generator expression's .0), or,
 * saved under its stack's top, on its value stack (an argument of the C
 * function that iterates it; `whole`: see frame_words()).  The frame's
 * copy is the one in t's spans, else read now. */
static bool holds(pyu_sampler *sm, const pyu_sthread *t,
                  const pyu_frame_raw *f, uint64_t obj, bool whole)
{
    uint64_t words[HOLD_WORDS];
    size_t n = frame_words(sm, t, f, words, whole);
    for (size_t k = 0; k < n; k++)
        if ((words[k] & ~sm->s->off.tag_mask) == obj)
            return true;
    return false;
}

/* Swaps t's walk with the one kept aside (t->fr1). */
static void swap_walks(pyu_sthread *t)
{
    pyu_sframe *x = t->fr1;
    size_t xn = t->nfr1, xc = t->fr1cap;
    t->fr1 = t->fr, t->nfr1 = t->nfr, t->fr1cap = t->frcap;
    t->fr = x, t->nfr = xn, t->frcap = xc;
}

/* The innermost frames of a walk that agree among themselves
 * (pyu_accept_upper), less the entry frames below them: how many, or -1
 * on an error. */
static long upper(pyu_sampler *sm, const pyu_sframe *fr, size_t n)
{
    long up = pyu_accept_upper(sm, fr, n);
    while (up > 0 && fr[up - 1].r.owner >= PYU_OWNER_ENTRY)
        up--;
    return up;
}

/* Whether a generator that frame f holds (a local or its stack; one
 * allocated near gen, as the generators of one pipeline are) has a frame
 * that holds gen, the generator object whose frame had yielded, directly
 * or through generators it holds in turn (all of them yielded too by the
 * second read, unless `whole`: f is then the frame of the data stack
 * below, f's whole frame is looked at, and they may be running): those
 * frames, as read now, into mid[], the outermost (the one f holds)
 * first, and how many (0: none). */
static size_t held_gen(pyu_sampler *sm, const pyu_sthread *t,
                       const pyu_frame_raw *f, uint64_t gen,
                       pyu_sframe mid[HELD_DEPTH], size_t depth, bool whole)
{
    const pyu_offsets *o = &sm->s->off;
    uint64_t frame_off = PYU_HAS(o, gen_gi_iframe) ? PYU_OFF(o, gen_gi_iframe)
                                                   : sm->gen_off;
    uint64_t words[HOLD_WORDS];
    size_t n = depth < HELD_DEPTH && frame_off
                   ? frame_words(sm, t, f, words, whole && !depth)
                   : 0;
    for (size_t k = 0, tries = 0; k < n && tries < HELD_TRIES; k++) {
        uint64_t w = words[k] & ~o->tag_mask;
        if (w == gen || w + (1u << 20) < gen || w > gen + (1u << 20))
            continue;
        tries++;
        uint8_t buf[512];
        if (sm->fsize > sizeof buf ||
            pyu_read_quiet(sm->s, w + frame_off, buf, sm->fsize) < 0)
            continue;
        pyu_sframe *m = &mid[depth];
        memset(m, 0, sizeof *m);
        pyu_frame_raw_take(o, w + frame_off, buf, sm->fsize, &m->r);
        if (m->r.owner != PYU_OWNER_GENERATOR || (m->r.prev && !whole))
            continue; /* (not one that had yielded) */
        m->r.prev = f->addr; /* (who resumed it) */
        if (holds(sm, t, &m->r, gen, false))
            return depth + 1;
        size_t n = held_gen(sm, t, &m->r, gen, mid, depth + 1, whole);
        if (n)
            return n;
    }
    return 0;
}

/* Moves t's walk from its frame `from` on to after its frame `at` and
 * the via frames of mid[] (the outermost first), which go there.  0, or
 * -1 when out of memory. */
static int put_mid(pyu_sampler *sm, pyu_sthread *t, size_t at, size_t from,
                   const pyu_sframe *mid, size_t via)
{
    size_t n = at + via + (t->nfr - from);
    while (n > t->frcap)
        if (!pyu_grow((void **)&t->fr, t->frcap, &t->frcap, sizeof *t->fr))
            return pyu_fail(&sm->s->err, PYU_E_NOMEM, "out of memory");
    memmove(t->fr + at + via, t->fr + from, (t->nfr - from) * sizeof *t->fr);
    for (size_t k = 0; k < via; k++)
        t->fr[at + k] = mid[via - 1 - k];
    t->nfr = n;
    return 0;
}

/* Puts the u innermost frames of the walk kept aside (t->fr1), then the
 * via frames of mid[], on t's walk from its frame x on. */
static int stack_on(pyu_sampler *sm, pyu_sthread *t, size_t u,
                    const pyu_sframe *mid, size_t via, size_t x)
{
    if (put_mid(sm, t, u, x, mid, via) < 0)
        return -1;
    memcpy(t->fr, t->fr1, u * sizeof *t->fr);
    return 0;
}

/* After a walk from the current frame failed and one from the current
 * frame read after the frames passed (in t->fr1 and t->fr): when the
 * first walk's innermost frames agree among themselves and ended before
 * their link below could be read (a generator that yielded, a call from C
 * that returned: their links are gone once they end), and a frame of the
 * second walk is seen to call the outermost of them, the stack the first
 * read saw was those frames on top of the second walk from that frame
 * down.  0, or -1 on an error. */
static int graft(pyu_sampler *sm, pyu_sthread *t)
{
    long up = upper(sm, t->fr1, t->nfr1);
    if (up < 0)
        return -1;
    size_t u = (size_t)up;
    if (u == 0)
        return 0;
    const pyu_frame_raw *low = &t->fr1[u - 1].r;
    /* a generator that yielded: its caller is the frame that holds it
     * (the iterator of its for loop, an argument of the C function that
     * iterates it) */
    uint64_t gen = low->owner == PYU_OWNER_GENERATOR && !low->prev
                       ? gen_object(sm, low->addr)
                       : 0;
    size_t x = t->nfr;
    for (size_t i = 0; gen && i < t->nfr && x == t->nfr; i++)
        if (t->fr[i].r.owner < PYU_OWNER_ENTRY &&
            holds(sm, t, &t->fr[i].r, gen, false))
            x = i;
    /* (or through a generator one of them holds, which had yielded too
     * by the second read: its frame, which holds this one, goes between) */
    pyu_sframe mid[HELD_DEPTH];
    size_t via = 0;
    for (size_t i = 0; gen && x == t->nfr && i < t->nfr && i < GEN_DEPTH;
         i++)
        if (t->fr[i].r.owner < PYU_OWNER_ENTRY &&
            (via = held_gen(sm, t, &t->fr[i].r, gen, mid, 0, false)))
            x = i;
    /* a frame of the data stack whose caller's link is gone (C code
     * called it, and returned): C code pushes the frames it calls where
     * the data stack ends, right above the innermost frame of its caller,
     * which is the closest frame below it that is still there */
    if (!gen && low->owner == PYU_OWNER_THREAD) {
        uint64_t best = 0;
        for (size_t i = 0; i < t->nfr; i++) {
            const pyu_frame_raw *f = &t->fr[i].r;
            if (f->owner == PYU_OWNER_THREAD && f->addr < low->addr &&
                f->addr > best && low->addr - f->addr < (1u << 20) &&
                (!t->chunk || (f->addr >= t->chunk && f->addr < t->chunk_end &&
                               low->addr < t->chunk_end)))
                best = f->addr, x = i;
        }
        if (!low->entry && u < t->nfr1 &&
            t->fr1[u].r.owner < PYU_OWNER_ENTRY)
            x = t->nfr; /* (a direct call whose evidence failed) */
    }
    if (x == t->nfr)
        return 0;
    if (stack_on(sm, t, u, mid, via, x) < 0)
        return -1;
    sm->st.grafted++;
    return 0;
}

/* What reading one thread gave. */
enum { THREAD_SKIP, THREAD_HIT, THREAD_READ };

struct thread_read {
    int what;       /* THREAD_* */
    unsigned status;
    long ok;        /* THREAD_READ: the outermost frames of t->fr that
                       passed (t->nfr: all) */
    const pyu_interp *in;
};

/* Leaves out t's n innermost frames, popped ones whose callers, as
 * copied, cannot have called them any more: the stack is the callers',
 * as copied.  Returns the frames left. */
/* ---------------------------------------- generators that yielded */

/* The slot of t's memo for the generator frame at addr. */
static size_t caller_slot(uint64_t addr)
{
    return pyu_slot(addr, PYU_GEN_CALLERS);
}

/* Puts addr first in a list of PYU_GEN_RECENT, the last first. */
static void remember(uint64_t *recent, uint64_t addr)
{
    size_t m = 0;
    while (m + 1 < PYU_GEN_RECENT && recent[m] != addr)
        m++;
    memmove(&recent[1], &recent[0], m * sizeof recent[0]);
    recent[0] = addr;
}

/* Remembers who resumed each generator frame of t's accepted stack. */
static void learn_callers(pyu_sthread *t)
{
    for (size_t i = t->nfr; i-- > 0;) { /* (the outermost first) */
        const pyu_frame_raw *g = &t->fr[i].r;
        if (g->owner != PYU_OWNER_GENERATOR)
            continue;
        /* the generators' frames met lately, the last first; the entry
         * frames they were resumed through from C code */
        remember(t->gens, g->addr);
        if (i + 1 < t->nfr && t->fr[i + 1].r.owner >= PYU_OWNER_ENTRY &&
            t->fr[i + 1].r.prev)
            remember(t->shims, t->fr[i + 1].r.addr);
        if (!g->prev || i + 1 == t->nfr)
            continue;
        if (!t->gen_memo &&
            !(t->gen_memo = calloc(2 * PYU_GEN_CALLERS, sizeof *t->gen_memo)))
            return; /* (no memory: the memo is only a help) */
        size_t k = caller_slot(g->addr);
        t->gen_memo[2 * k] = g->addr;
        t->gen_memo[2 * k + 1] = g->prev;
    }
}

/* Goes on with t's walk (n0 frames, the last a generator's frame that had
 * yielded) from the frame at addr, when that frame, as copied, holds the
 * generator gen.  1 when it does, 0 when not (the walk as it was), -1 on
 * an error. */
static int resume_from(pyu_sampler *sm, pyu_sthread *t, const pyu_tstate *ts,
                       uint64_t addr, uint64_t gen, size_t n0, bool spans,
                       bool whole, unsigned *budget)
{
    if (*budget == 0)
        return 0;
    --*budget;
    for (size_t i = 0; i < n0; i++)
        if (t->fr[i].r.addr == addr)
            return 0; /* (a frame of the walk already) */
    if (walk_on(sm, t, ts, addr, spans) < 0)
        return -1;
    size_t h = n0; /* (past the entry frame of a call from C code) */
    while (h < t->nfr && h < n0 + 2 && t->fr[h].r.owner >= PYU_OWNER_ENTRY)
        h++;
    if (h < t->nfr && t->fr[h].r.owner < PYU_OWNER_ENTRY &&
        holds(sm, t, &t->fr[h].r, gen, whole))
        return 1;
    t->nfr = n0;
    t->end = PYU_CHAIN_NULL;
    return 0;
}

/* How resume_under() looks for the generator in the frame below: in its
 * locals; through the generators its whole frame holds; in its whole
 * frame. */
enum { UNDER_LOCALS, UNDER_VIA, UNDER_WHOLE };

/* resume_from() the frame of the data stack right below the walk's
 * frames there (the top, when none is), of the thread state's moment:
 * C code that frame called resumed the generator, directly or through
 * generators that frame holds (UNDER_VIA: their frames go between, the
 * ones running by their copy too -- the frame below is of the thread
 * state's moment, and so is the generator it holds; the whole frame is
 * looked at through them before it is for the generator itself, whose
 * own object the frame that made it often still has). */

static int resume_under(pyu_sampler *sm, pyu_sthread *t, const pyu_tstate *ts,
                        uint64_t gen, size_t n0, bool spans, int how,
                        unsigned *budget)
{
    uint64_t low = 0;
    for (size_t i = 0; i < n0; i++)
        if (t->fr[i].r.owner == PYU_OWNER_THREAD)
            low = t->fr[i].r.addr;
    uint64_t x = sm->indirect ? 0 : frame_under(sm, t, ts, low);
    if (!x)
        return 0;
    if (how != UNDER_VIA)
        return resume_from(sm, t, ts, x, gen, n0, spans, how == UNDER_WHOLE,
                           budget);
    if (*budget == 0)
        return 0;
    --*budget;
    if (walk_on(sm, t, ts, x, spans) < 0)
        return -1;
    pyu_sframe mid[HELD_DEPTH];
    size_t n = t->nfr > n0 && t->fr[n0].r.addr == x
                   ? held_gen(sm, t, &t->fr[n0].r, gen, mid, 0, true)
                   : 0;
    if (!n) {
        t->nfr = n0;
        t->end = PYU_CHAIN_NULL;
        return 0;
    }
    return put_mid(sm, t, n0, n0, mid, n) < 0 ? -1 : 1;
}

static bool in_cache(const pyu_fcache *c, uint64_t addr)
{
    for (size_t i = 0; c->valid && i < c->n; i++)
        if (c->addr[i] == addr)
            return true;
    return false;
}

/* A walk that ended at a generator's frame that had yielded (it clears
 * its previous) when it was copied: it was running when the thread state
 * was read, resumed by the frame that resumed it last time, if that frame
 * (as copied) still holds the generator; else (a generator new since, or
 * its memo taken by another) by the innermost frame of the last stack
 * taken that holds it.  The walk goes on from there: the stack it had,
 * with its caller's own stack as copied. */
static int resume_walk(pyu_sampler *sm, pyu_sthread *t, const pyu_tstate *ts,
                       bool spans)
{
    const pyu_fcache *c = &t->cache;
    unsigned budget = GEN_WALKS;
    for (int k = 0; k < GEN_DEPTH && t->end == PYU_CHAIN_NULL && t->nfr;
         k++) {
        const pyu_frame_raw g = t->fr[t->nfr - 1].r;
        size_t at = caller_slot(g.addr), n0 = t->nfr;
        if (g.owner != PYU_OWNER_GENERATOR || g.prev)
            return 0;
        uint64_t gen = gen_object(sm, g.addr);
        if (!gen)
            return 0;
        uint64_t memo = t->gen_memo && t->gen_memo[2 * at] == g.addr
                            ? t->gen_memo[2 * at + 1]
                            : 0;
        int rc = 0;
        if (memo)
            rc = resume_from(sm, t, ts, memo, gen, n0, spans, false, &budget);
        for (size_t i = c->valid ? c->n : 0, tries = 0;
             rc == 0 && i-- > 0 && tries < GEN_TRIES; tries++)
            if (c->addr[i] != memo && c->addr[i] != g.addr)
                rc = resume_from(sm, t, ts, c->addr[i], gen, n0, spans, false,
                                 &budget);
        /* (then the generators' frames met lately: one that resumed this
         * one may have yielded before the last stack) */
        for (size_t i = 0; rc == 0 && i < PYU_GEN_RECENT; i++) {
            uint64_t a = t->gens[i];
            if (a && a != memo && a != g.addr && !in_cache(c, a))
                rc = resume_from(sm, t, ts, a, gen, n0, spans, false, &budget);
        }
        /* (and the entry frames on the C stack that generators were
         * resumed through lately: each names, as copied now, the frame
         * that resumed one last -- generators made since have new
         * addresses, the C stack the same) */
        for (size_t i = 0; rc == 0 && i < PYU_GEN_RECENT; i++)
            if (t->shims[i])
                rc = resume_from(sm, t, ts, t->shims[i], gen, n0, spans, false,
                                 &budget);
        /* (and last the frame of the data stack below the walk's frames
         * there, of the thread state's moment: the generator's resumer
         * is that frame or a generator it holds when no frame the sampler
         * met lately holds it) */
        for (int how = UNDER_LOCALS; rc == 0 && how <= UNDER_WHOLE; how++)
            rc = resume_under(sm, t, ts, gen, n0, spans, how, &budget);
        if (rc <= 0)
            return rc;
        sm->st.resumed++;
    }
    return 0;
}

/* Counts a stack taken from a walk that met popped frames. */
static void note_popped(pyu_sampler *sm, const pyu_sthread *t)
{
    if (t->npopped || t->unplaced)
        sm->st.popped++;
    if (t->unplaced)
        sm->st.popped_left++;
}

static long drop_popped(pyu_sthread *t, size_t n)
{
    t->unplaced = true;
    memmove(t->fr, t->fr + n, (t->nfr - n) * sizeof *t->fr);
    t->nfr -= n;
    t->npopped -= n;
    return (long)t->nfr;
}

/* Walks t's chain from `first` (walk()), and on through the generators
 * that had yielded by their copy (resume_walk()). */
static int walk_whole(pyu_sampler *sm, pyu_sthread *t, const pyu_tstate *ts,
                      uint64_t first, bool spans)
{
    if (walk(sm, t, ts, first, spans) < 0)
        return -1;
    return resume_walk(sm, t, ts, spans);
}

/* Judges t's walk by the acceptance rules, leaving out the popped frames
 * their callers cannot have called any more.  1 when the stack passed
 * whole (r->ok == t->nfr), 0 when not, -1 on an error that ends the
 * sample. */
static int judge(pyu_sampler *sm, pyu_sthread *t, const pyu_tstate *ts,
                 thread_read *r)
{
    r->ok = pyu_accept_chain(sm, t, ts);
    if (r->ok < 0)
        return -1;
    if (t->nfr && (size_t)r->ok < t->nfr &&
        t->nfr - (size_t)r->ok <= t->npopped)
        r->ok = drop_popped(t, t->nfr - (size_t)r->ok);
    if (!t->nfr || (size_t)r->ok != t->nfr)
        return 0;
    note_popped(sm, t);
    learn_callers(t);
    return 1;
}

/* Swaps the two copies of t's early spans. */
static void swap_early(pyu_sthread *t)
{
    for (size_t k = 0; k < t->nearly; k++) {
        pyu_chunk_span x = t->span[k];
        t->span[k] = t->span2[k];
        t->span2[k] = x;
    }
}

/* ------------------------------------------- 3.11: eval loops entered */

/* 3.11 keeps a thread's current frame not in its thread state but in the
 * _PyCFrame of the eval loop running, on the C stack: the thread state
 * names the loop (its cframe), the loop's word names the frame.  The plan
 * reads the words of the loops the thread had lately in the read that
 * brings the thread state (read_plan.c), yet a microsecond or so after
 * it, and the eval loop of a generator resumed from C code (a `for` over
 * it) often lasts less.  What the thread state's copy holds is of one
 * moment: the loop, and the top of the data stack.  The frames of the
 * data stack lie one after the other (_PyFrame_PushUnchecked puts a frame
 * at the top and moves the top past it by its code object's size; a
 * generator's frame lies in the generator), so the innermost one of that
 * moment ends at that top.  settle() judges the walk from the loop's word:
 *
 *   - the walk of a loop entered by any other frame than a generator's is
 *     of the moment the word was read, as good a moment as the thread
 *     state's: it stands;
 *   - a generator's loop may have ended by the read of its word, which
 *     then names the generator's own frame, whatever the thread did at
 *     the thread state's moment: its stack is taken at that moment, as
 *     the loop's entry frame, then the frames of the data stack from
 *     there up to the top, found code object by code object, each called
 *     by the one below it (their copies may be of later calls at the same
 *     places: sizes that end exactly at the top make another function
 *     there rare);
 *   - a walk whose innermost entry frame does not run the code the named
 *     loop was last seen entered with, when that was a generator's, is of
 *     another loop (made since at the same place on the C stack): it is
 *     made again from the named loop's entry frame (from_entry(): the
 *     frame that runs that code), then taken as above.
 *
 * A loop that ended by the read of its word may leave another C
 * function's word there, and no frame: the walk is made from its entry
 * frame, then taken as above. */

/* The index of cframe cf among t's recent ones, or PYU_CFRAMES. */
static size_t loop_of(const pyu_sthread *t, uint64_t cf)
{
    size_t k = 0;
    while (cf && k < PYU_CFRAMES && t->cframe[k] != cf)
        k++;
    return cf ? k : PYU_CFRAMES;
}

/* The index of the innermost frame of t's walk that entered an eval
 * loop, or t->nfr. */
static size_t entered_at(const pyu_sthread *t)
{
    size_t i = 0;
    while (i < t->nfr && !t->fr[i].r.entry)
        i++;
    return i;
}

/* Remembers the frame t's walk entered the eval loop of the _PyCFrame cf
 * with, and its code when that is a generator's frame. */
static void learn_entry(pyu_sthread *t, uint64_t cf)
{
    size_t k = loop_of(t, cf), i = entered_at(t);
    if (k < PYU_CFRAMES && i < t->nfr) {
        t->entry[k] = t->fr[i].r.addr;
        t->entry_code[k] = t->fr[i].r.owner == PYU_OWNER_GENERATOR
                               ? t->fr[i].r.code
                               : 0;
    }
}

/* The frame that runs code, among e and the frames t met lately that may
 * be a loop's entry frame (e first), or 0: a generator's frame lies in
 * the generator, and a pipeline made again puts its generators at the
 * addresses the last one's had, in another order. */
static uint64_t entry_now(pyu_sampler *sm, const pyu_sthread *t, uint64_t e,
                          uint64_t code)
{
    uint64_t off = PYU_OFF(&sm->s->off, fr_executable), c;
    if (span_bytes(sm, t, e + off, &c, 8) && c == code)
        return e;
    for (size_t k = 0; k < PYU_CFRAMES + PYU_GEN_RECENT; k++) {
        uint64_t a = k < PYU_CFRAMES ? t->entry[k] : t->gens[k - PYU_CFRAMES];
        if (a && a != e && span_bytes(sm, t, a + off, &c, 8) && c == code)
            return a;
    }
    return 0;
}

/* Walks t's stack from the entry frame of the loop its thread state
 * named, in place of its walk when the stack passes the rules: 1 when it
 * did, 0 when not (or there is no such frame: the walk is kept), -1 on an
 * error. */
static int from_entry(pyu_sampler *sm, pyu_sthread *t, const pyu_tstate *ts,
                      bool spans, thread_read *r)
{
    size_t k = loop_of(t, ts->cframe);
    uint64_t e = k == PYU_CFRAMES || !t->entry[k] ? 0
                 : t->entry_code[k]
                     ? entry_now(sm, t, t->entry[k], t->entry_code[k])
                     : t->entry[k];
    if (!e)
        return 0;
    thread_read kept = *r;
    int end = t->end;
    swap_walks(t);
    int ok;
    if (walk_whole(sm, t, ts, e, spans) < 0 ||
        (ok = judge(sm, t, ts, r)) < 0)
        return -1;
    if (!ok) {
        swap_walks(t);
        t->end = end;
        *r = kept;
    }
    return ok;
}

/* Into at[]: the frames between the innermost frame of the data stack
 * in t's walk from its frame i on and the top its thread state had, the
 * outermost first, going up code object by code object.  How many (0 when
 * that frame ends at the top); -1 when they cannot be told (a size that
 * passes the top, no frame of the chunk, more than TOP_STEPS). */
static long above_top(pyu_sampler *sm, const pyu_sthread *t,
                      const pyu_tstate *ts, size_t i, uint64_t *at)
{
    while (i < t->nfr && !in_top_chunk(t, ts, &t->fr[i].r))
        i++;
    if (i == t->nfr)
        return -1;
    uint64_t f = t->fr[i].r.addr, code = t->fr[i].r.code,
             off = PYU_OFF(&sm->s->off, fr_executable);
    for (long k = 0; k <= TOP_STEPS; k++) {
        uint64_t size;
        if ((k && !span_bytes(sm, t, f + off, &code, 8)) ||
            !(size = frame_size(sm, code)) || f + size > ts->ds_top)
            return -1;
        if (k)
            at[k - 1] = f;
        if (f + size == ts->ds_top)
            return k;
        f += size;
    }
    return -1;
}

/* Puts above_top()'s n frames at[] on t's walk from its frame i on, each
 * called by the one below it (frame i calls the first), in place of t's
 * walk when the stack passes the rules: 1 when it did, 0 when not (t's
 * walk kept), -1 on an error. */
static int onto_top(pyu_sampler *sm, pyu_sthread *t, const pyu_tstate *ts,
                    thread_read *r, size_t i, const uint64_t *at, size_t n)
{
    size_t need = t->nfr - i + n;
    uint8_t buf[PYU_BUF_FRAME];
    swap_walks(t);
    while (need > t->frcap)
        if (!pyu_grow((void **)&t->fr, t->frcap, &t->frcap, sizeof *t->fr))
            return pyu_fail(&sm->s->err, PYU_E_NOMEM, "out of memory");
    for (size_t k = 0; k < n; k++) {
        pyu_sframe *sf = &t->fr[n - 1 - k];
        /* (the copy the spans hold, to their end: its saved stack top's
         * words are the caller's evidence, accept.c) */
        size_t avail;
        const uint8_t *copy = in_spans(t, at[k], sm->fsize, &avail);
        if (!copy) {
            avail = sm->fsize <= sizeof buf ? sm->fsize : 0;
            if (!avail || pyu_read_quiet(sm->s, at[k], buf, avail) < 0) {
                swap_walks(t);
                return 0;
            }
            copy = buf;
        }
        memset(sf, 0, sizeof *sf);
        pyu_frame_raw_take(&sm->s->off, at[k], copy, sm->fsize, &sf->r);
        sf->r.prev = k ? at[k - 1] : t->fr1[i].r.addr;
        sf->nslot = pyu_sframe_slots(at[k], sf->r.sp, copy, avail, sf->slot);
    }
    memcpy(t->fr + n, t->fr1 + i, (t->nfr1 - i) * sizeof *t->fr);
    t->nfr = need;
    t->npopped = 0;
    thread_read kept = *r;
    int ok = judge(sm, t, ts, r);
    if (ok <= 0) {
        swap_walks(t);
        *r = kept;
    }
    return ok;
}

/* Makes t's accepted walk agree with the moment of its thread state (see
 * above) when it is another loop's walk, or the loop is a generator's
 * (its word may be the one it left when it yielded): the loop's frames of
 * that moment are its entry frame and the frames of the data stack from
 * there to the top.  A walk of any other loop is of the moment its word
 * was read, as good as the thread state's.  Remembers the loop's entry
 * frame.  0, or -1 on an error. */
static int settle(pyu_sampler *sm, pyu_sthread *t, const pyu_tstate *ts,
                  bool spans, thread_read *r)
{
    if (!sm->indirect || !ts->ds_top || !ts->cframe || !t->nfr)
        return 0;
    size_t k = loop_of(t, ts->cframe), i = entered_at(t);
    uint64_t code = k < PYU_CFRAMES ? t->entry_code[k] : 0;
    bool other = code && (i == t->nfr || t->fr[i].r.code != code);
    if (!other && (i == t->nfr || t->fr[i].r.owner != PYU_OWNER_GENERATOR)) {
        learn_entry(t, ts->cframe);
        return 0;
    }
    if (other) {
        int ok = from_entry(sm, t, ts, spans, r);
        if (ok <= 0)
            return ok;
        i = 0;
    }
    pyu_plan_note_chunk(sm, t, ts->chunk);
    uint64_t at[TOP_STEPS];
    long n = above_top(sm, t, ts, i, at);
    if (n > 0) {
        int ok = onto_top(sm, t, ts, r, i, at, (size_t)n);
        if (ok < 0)
            return -1;
        sm->st.topped += (uint64_t)ok;
    } else if (n == 0 && i > 0) {
        memmove(t->fr, t->fr + i, (t->nfr - i) * sizeof *t->fr);
        t->nfr -= i;
        t->npopped = t->npopped > i ? t->npopped - i : 0;
        r->ok = (long)t->nfr;
        sm->st.topped++;
    }
    learn_entry(t, ts->cframe);
    return 0;
}

/* ------------------------------------------- calls from C code */

/* from_below() for a generator's frame resumed from C code (a `for` over
 * it in 3.11 and the free-threaded builds, sum() of it anywhere), whose
 * entry frame on the C stack is gone by its copy: it yielded.  The walk
 * goes on from the frame that holds it, as for one whose previous was
 * cleared (resume_walk()). */
static int resumed_from_c(pyu_sampler *sm, pyu_sthread *t,
                          const pyu_tstate *ts, bool spans, thread_read *r,
                          size_t u)
{
    swap_walks(t);
    while (u > t->frcap)
        if (!pyu_grow((void **)&t->fr, t->frcap, &t->frcap, sizeof *t->fr))
            return pyu_fail(&sm->s->err, PYU_E_NOMEM, "out of memory");
    memcpy(t->fr, t->fr1, u * sizeof *t->fr);
    t->nfr = u;
    t->npopped = t->npopped < u ? t->npopped : u;
    t->fr[u - 1].r.prev = 0; /* (its link below is gone) */
    t->end = PYU_CHAIN_NULL;
    size_t n0 = t->nfr;
    int ok = resume_walk(sm, t, ts, spans);
    if (ok == 0 && t->nfr > n0)
        ok = judge(sm, t, ts, r);
    if (ok != 0)
        return ok;
    swap_walks(t); /* (back as it was) */
    return 0;
}

/* A walk whose innermost frames agree among themselves but whose link
 * below them is gone: the outermost of them was called by C code (its
 * previous, an entry frame on the C stack, is another C function's by
 * its copy: the call was ending).  C code pushes the frames it calls
 * right above its caller's on the data stack: the caller is the frame
 * below it there, stepped up to from the chunk's first frame
 * (frame_under(), 3.13+), else found among the frames of the last stack
 * taken (the same code object in this sample's copy).  The walk from it,
 * in the same copies, has the innermost frames put back on top: the moment
 * the thread state was read, not a later one (a snapshot of its own, or
 * the current frame read again, is more likely back in the C code, and
 * the profile leans to it).  1 when that stack passed, 0 when not (t's
 * walk is then as it was), -1 on an error. */
static int from_below(pyu_sampler *sm, pyu_sthread *t, const pyu_tstate *ts,
                      bool spans, thread_read *r)
{
    const pyu_fcache *c = &t->cache;
    if (!t->nfr)
        return 0;
    long up = upper(sm, t->fr, t->nfr);
    if (up < 0)
        return -1;
    size_t u = (size_t)up;
    if (u > 0 && t->fr[u - 1].r.owner == PYU_OWNER_GENERATOR &&
        (u == t->nfr || t->fr[u].r.owner >= PYU_OWNER_ENTRY ||
         !pyu_code_cached(sm->s, t->fr[u].r.code)))
        return resumed_from_c(sm, t, ts, spans, r, u);
    if (u == 0 || t->fr[u - 1].r.owner != PYU_OWNER_THREAD)
        return 0;
    uint64_t low = t->fr[u - 1].r.addr, below = 0, code = 0;
    /* (the data stack of the thread state's moment names the frame below;
     * the link is gone when it names neither that frame nor a generator's
     * frame -- a copy of the C stack where the entry frame was) */
    bool exact = !sm->indirect && (below = frame_under(sm, t, ts, low));
    if (exact && u < t->nfr &&
        (t->fr[u].r.addr == below ||
         t->fr[u].r.owner == PYU_OWNER_GENERATOR))
        return 0;
    if (!exact && u < t->nfr && t->fr[u].r.owner < PYU_OWNER_ENTRY)
        return 0; /* (not a frame whose link below is an entry frame) */
    for (size_t k = 0; !exact && c->valid && k < c->n; k++)
        if (c->addr[k] < low && c->addr[k] > below &&
            low - c->addr[k] < (1u << 20) &&
            (!t->chunk || (c->addr[k] >= t->chunk && low < t->chunk_end)))
            below = c->addr[k], code = c->code[k];
    if (!below)
        return 0;
    /* (the first walk where graft() looks for it) */
    swap_walks(t);
    int ok = 0;
    if (walk_whole(sm, t, ts, below, spans) < 0)
        return -1;
    if (t->nfr && (exact || t->fr[0].r.code == code) &&
        (ok = judge(sm, t, ts, r)) > 0) {
        size_t n = t->nfr;
        if (exact ? stack_on(sm, t, u, NULL, 0, 0) < 0 : graft(sm, t) < 0)
            return -1;
        if (t->nfr > n) {
            r->ok = (long)t->nfr;
            return 1;
        }
    }
    if (ok < 0)
        return -1;
    swap_walks(t); /* (back as it was) */
    return 0;
}

/* ----------------------------------------------- 3.15: the anchor */

/* The copy of the frame at addr in t's window or the frames read with
 * it, with how many bytes of the copy follow its start; NULL when none
 * holds it. */
static const uint8_t *windowed(const pyu_sampler *sm, const pyu_sthread *t,
                               uint64_t addr, size_t *avail)
{
    size_t fsize = sm->fsize;
    if (addr >= t->win_lo && addr - t->win_lo <= t->win_len - fsize) {
        *avail = t->win_len - (size_t)(addr - t->win_lo);
        return t->win + (addr - t->win_lo);
    }
    for (size_t i = 0; i < t->nwx; i++) {
        const pyu_chunk_span *x = &t->wx[i];
        if (addr >= x->start && addr - x->start <= x->end - x->start - fsize) {
            *avail = (size_t)(x->end - addr);
            return x->local + (addr - x->start);
        }
    }
    return NULL;
}

/* Walks t's chain from `first` down to the frame the anchor names (cached
 * at depth k) in its window (read right after the thread state) and the
 * frames read with it, as walk() would.  1 when it got there, 2 when
 * `first` is that frame and its copy is of a later moment (it returned by
 * then: the cached frame is the one the thread state named), 0 when a
 * frame was not read with the window or the anchored one's copy is not
 * it, -1 on an error that ends the sample. */
static int walk_window(pyu_sampler *sm, pyu_sthread *t, uint64_t first,
                       size_t k)
{
    const pyu_fcache *c = &t->cache;
    uint64_t stop = c->addr[k];
    size_t fsize = sm->fsize;
    walk_ctx w = {sm, t, false};
    t->nfr = t->npopped = 0;
    t->unplaced = false;
    /* (each frame once at most: a loop in a hostile target ends) */
    size_t most = t->win_len / fsize + t->nwx + 1;
    for (uint64_t a = first; a; ) {
        size_t avail;
        const uint8_t *buf = windowed(sm, t, a, &avail);
        if (!buf || most-- == 0)
            return 0;
        pyu_frame_raw f;
        pyu_frame_raw_take(&sm->s->off, a, buf, fsize, &f);
        if (a == stop &&
            (pyu_frame_popped(sm->s, &f) || f.code != c->code[k] ||
             (k && f.prev != c->addr[k - 1])))
            /* (it cannot have been popped by the thread state's read: by
             * the copy, the thread may have gone on) */
            return t->nfr ? 0 : 2;
        if (on_frame(&w, &f, buf, avail) < 0)
            return -1;
        if (a == stop)
            return t->nfr > 0;
        a = f.prev;
    }
    return 0; /* (a generator that had yielded: snapshots follow it) */
}

/* Makes t's window and the frames read with it its spans (of this
 * sample: pyu_plan_spans plans the next). */
static bool window_spans(pyu_sthread *t)
{
    if (!t->win_len || 1 + t->nwx > PYU_PLAN_SPANS)
        return false;
    t->span[0] = (pyu_chunk_span){t->win_lo, t->win_lo + t->win_len, t->win};
    for (size_t i = 0; i < t->nwx; i++)
        t->span[1 + i] = t->wx[i];
    t->nspan = 1 + t->nwx;
    t->nearly = 0;
    t->again = 0;
    return true;
}

/* The stack from the frame the anchor names down as cached, the frames
 * above it walked in the window and judged by the rules (frame_cache.c).
 * 1 when taken (committed), 0 when not, -1 on an error. */
static int from_anchor(pyu_sampler *sm, pyu_sthread *t, const pyu_tstate *ts)
{
    size_t k = pyu_fcache_proven(t, ts);
    if (!k--)
        return 0;
    int rc = walk_window(sm, t, ts->current_frame, k);
    if (rc <= 0)
        return rc;
    if (rc == 2) { /* (that frame as cached, its line the last sample's) */
        t->nfr = 0;
        return pyu_fcache_take(sm, t, ts, k + 1);
    }
    long ok = t->nfr > 1 ? pyu_accept_links(sm, t->fr, t->nfr)
                         : (long)t->nfr;
    if (ok < 0)
        return -1;
    if ((size_t)ok < t->nfr && t->nfr - (size_t)ok <= t->npopped)
        ok = drop_popped(t, t->nfr - (size_t)ok);
    if ((size_t)ok != t->nfr)
        return 0;
    note_popped(sm, t);
    return pyu_fcache_take(sm, t, ts, k + 1);
}

/* Reads one thread's stack: the proven innermost frame, or snapshots
 * until one passes the rules (then r->ok == t->nfr) or the tries run out.
 * Returns 0, or -1 on an error that ends the sample. */
static int read_thread(pyu_sampler *sm, const pyu_interp *in, pyu_sthread *t,
                       pyu_tstate *ts, uint8_t *tsbuf,
                       thread_read *r)
{
    pyu_session *s = sm->s;
    r->what = THREAD_SKIP;
    r->in = in;
    r->status = pyu_status_of(s, in, ts, status_wanted(sm));
    if (!selected(sm, ts, r->status))
        return 0;
    if (!ts->current_frame) {
        t->cache.valid = t->cache.anchored = false;
        return 0; /* (no Python frames) */
    }
    if (sm->anchors) {
        int hit = from_anchor(sm, t, ts);
        if (hit < 0)
            return -1;
        if (hit) {
            r->what = THREAD_HIT;
            return 0;
        }
    }
    /* a thread state of the batch read with its window (its anchor was to
     * prove the stack, and did not): its frames are walked from the
     * current frame of that moment, in the window and the frames read
     * with it, the rest read as the walk meets them -- a snapshot of its
     * own would be a later moment, on which a thread seen out of the
     * anchored frame (a callback of C code, a short call) is more likely
     * back in it */
    if (t->win_read && t->taken && !t->spans_read)
        t->spans_read = window_spans(t);
    bool spans = t->spans_read;
    bool moment = !spans && t->taken;
    unsigned tries = 0;
    for (;;) {
        if (!spans && !moment) { /* a snapshot of this thread alone */
            int rc = pyu_plan_snapshot(sm, in, t, ts, tsbuf);
            if (rc < 0)
                return -1;
            r->status = pyu_status_of(s, in, ts, status_wanted(sm));
            if (!selected(sm, ts, r->status))
                return 0;
            if (!ts->current_frame) {
                t->cache.valid = false;
                return 0;
            }
            spans = rc == 0;
        }
        /* (frames the spans did not hold are read as the walk meets
         * them: a snapshot of its own would be another moment) */
        moment = false;
        if (walk_whole(sm, t, ts, ts->current_frame, spans) < 0)
            return -1;
        r->what = THREAD_READ;
        int ok = judge(sm, t, ts, r);
        if (!ok && sm->indirect && t->nfr <= 1 &&
            (!t->nfr || t->end == PYU_CHAIN_UNREAD) &&
            (ok = from_entry(sm, t, ts, spans, r)) > 0)
            sm->st.entered++; /* (no frame in the loop's word) */
        if (ok > 0 && settle(sm, t, ts, spans, r) < 0)
            return -1;
        if (!ok && (ok = from_below(sm, t, ts, spans, r)) > 0)
            sm->st.grafted++;
        if (ok)
            return ok < 0 ? -1 : 0;
        /* the current frame as read right after the innermost frames,
         * walked in the copies made after it: the stack the thread moved
         * to meanwhile, on which the frames the first walk found are put
         * back when they ended after its read.  (The same frame again is
         * worth the walk: a generator's frame that had yielded when first
         * copied is often resumed, by the same caller, by the second.) */
        if (spans && t->again &&
            (t->again != ts->current_frame || t->nearly)) {
            swap_walks(t);
            /* (in the copies made after the current frame was read again:
             * the second of the early spans, then the rest) */
            swap_early(t);
            int rc = walk_whole(sm, t, ts, t->again, spans);
            swap_early(t);
            if (rc < 0 || (ok = judge(sm, t, ts, r)) < 0)
                return -1;
            if (ok) {
                if (graft(sm, t) < 0)
                    return -1;
                r->ok = (long)t->nfr;
                sm->st.later++;
                return 0;
            }
        }
        sm->st.torn++;
        if (tries++ == RETRIES)
            return 0;
        pyu_plan_note_chunk(sm, t, ts->chunk);
        pyu_plan_spans(sm, t);
        spans = false;
    }
}

/* The profile's thread for a thread of the target; a thread new to the
 * profile gets the kernel's name of it, when the memory source knows one
 * and it is not the process's own name (which every thread has before
 * CPython 3.14, and the main thread always). */
static long profile_thread(pyu_sampler *sm, uint64_t thread_id,
                           uint64_t native_id, int64_t interp, int main)
{
    size_t before = pyu_profile_get(sm->p)->nthreads;
    long th = pyu_profile_add_thread(sm->p, thread_id, native_id, interp,
                                     main);
    char name[64];
    pyu_session *s = sm->s;
    if (th >= 0 && (size_t)th >= before && s->ops->thread_name &&
        s->ops->thread_name(s->ctx, native_id, name, sizeof name) == 0 &&
        *name && strcmp(name, sm->proc_name) != 0 &&
        pyu_profile_name_thread(sm->p, (uint32_t)th, name) < 0)
        return -PYU_E_NOMEM;
    return th;
}

/* Commits what was read of a thread to its frame cache and counts it.
 * Returns 1 when a stack was counted, 0 when none, -1 on an error. */
static int count_thread(pyu_sampler *sm, pyu_sthread *t, const pyu_tstate *ts,
                        const thread_read *r, bool *failed)
{
    pyu_session *s = sm->s;
    const pyu_interp *in = r->in;
    unsigned status = r->status;
    bool unknown = false;
    if (r->what == THREAD_SKIP)
        return 0;
    if (r->what == THREAD_READ) {
        size_t ok = (size_t)r->ok;
        pyu_plan_note_chunk(sm, t, ts->chunk); /* (settle looks at it) */
        unknown = ok < t->nfr || !t->nfr;
        bool reuse = !(sm->o.flags & PYU_SAMPLE_NO_CACHE);
        /* (no frames: a walk into unreadable memory, t->fr maybe unmade) */
        const pyu_sframe *from = ok ? t->fr + (t->nfr - ok) : NULL;
        int rc = pyu_fcache_commit(sm, t, from, 0, ok, reuse);
        if (rc < 0)
            return -1;
        if (rc > 0) { /* a code object could not be read after all */
            unknown = true;
            t->cache.valid = false;
        }
        if (!unknown) {
            sm->st.cache_miss++;
            sm->st.unproven++;
            pyu_fcache_settle(sm, t, ts);
        } else {
            t->cache.anchored = false;
            sm->st.unknown++;
            if (!t->cache.valid || !t->cache.n) {
                t->cache.valid = false;
                *failed = true; /* (nothing usable was read) */
            }
        }
        /* the next sample reads where this walk found the frames */
        pyu_plan_spans(sm, t);
    }
    /* 3.15 names the frame that started a collection */
    if (in->gc_collecting && in->gc_frame && t->cache.valid)
        for (size_t p = 0; p < t->cache.n; p++)
            if (t->cache.addr[p] == in->gc_frame) {
                status |= PYU_STATUS_GC;
                break;
            }
    if (t->pthread < 0 &&
        (t->pthread = profile_thread(sm, ts->thread_id, ts->native_id,
                                     in->id, ts->main)) < 0)
        return pyu_fail(&s->err, PYU_E_NOMEM, "out of memory"), -1;
    long node = pyu_fcache_leaf(sm, t, unknown, status);
    if (node < 0 || pyu_profile_count(sm->p, (uint32_t)t->pthread,
                                      (uint32_t)node, 1, status) < 0)
        return pyu_fail(&s->err, PYU_E_NOMEM, "out of memory"), -1;
    return 1;
}

/* 3.13 does not report freed code objects: the records the sample's
 * stacks were read with must still describe the objects at their
 * addresses (the same type, names, location table and first line), read
 * again now; when one does not, or there are too many to check, the
 * caches are flushed and names are read anew. */
static void check_codes(pyu_sampler *sm)
{
    pyu_session *s = sm->s;
    uint64_t addr[VALIDATE_MAX];
    size_t n = 0;
    bool flush = false;
    for (size_t j = 0; j < sm->nthreads && !flush; j++) {
        const pyu_sthread *t = &sm->threads[j];
        for (size_t i = 0; i < t->nfr && !flush; i++) {
            const pyu_frame_raw *f = &t->fr[i].r;
            if (f->owner >= PYU_OWNER_ENTRY || !pyu_code_cached(s, f->code))
                continue;
            size_t v = 0;
            while (v < n && addr[v] != f->code)
                v++;
            if (v < n)
                continue;
            if (n == VALIDATE_MAX)
                flush = true;
            else
                addr[n++] = f->code;
        }
    }
    size_t off, len;
    pyu_code_fields(&s->off, &off, &len);
    uint8_t *buf = n && !flush ? malloc(n * len) : NULL;
    pyu_range r[VALIDATE_MAX];
    for (size_t v = 0; buf && v < n; v++)
        r[v] = (pyu_range){addr[v] + off, buf + v * len, len};
    if (buf && pyu_readv_quiet(s, r, n) == 0) {
        for (size_t v = 0; v < n && !flush; v++) {
            const pyu_code *c = pyu_code_cached(s, addr[v]);
            flush = !c || !pyu_code_unchanged(s, c, buf + v * len);
        }
    } else if (n) {
        flush = true;
    }
    free(buf);
    if (flush)
        pyu_caches_flush(s);
}

/* ---------------------------------------------------------------- sample */

/* The per-thread results of a sample, in sm->threads order. */
static thread_read *reads_for(pyu_sampler *sm)
{
    if (sm->nthreads > sm->capreads) {
        thread_read *nb = realloc(sm->reads, sm->nthreads * sizeof *nb);
        if (!nb)
            return NULL;
        sm->reads = nb;
        sm->capreads = sm->nthreads;
    }
    return sm->reads;
}

static int take_cached(pyu_session *s, void *arg)
{
    pyu_sampler *sm = arg;
    int rc = 0;
    if (sm->predicted)
        rc = pyu_plan_batch(sm);
    if (rc < 0)
        return -1;
    if (rc == 0 && pyu_plan_rediscover(sm) < 0)
        return -1; /* (the lists as the walk read them, else) */
    thread_read *r = reads_for(sm);
    if (!r && sm->nthreads)
        return pyu_fail(&s->err, PYU_E_NOMEM, "out of memory");
    bool any_read = false;
    for (size_t i = 0; i < sm->ninterps; i++) {
        const pyu_sinterp *si = &sm->interps[i];
        for (size_t j = si->first; j < si->first + si->n; j++) {
            pyu_sthread *t = &sm->threads[j];
            t->nfr = 0;
            if (read_thread(sm, &si->in, t, &sm->recs[j],
                            sm->tsbuf + j * sm->tslen, &r[j]) < 0)
                return -1;
            any_read |= r[j].what == THREAD_READ;
        }
    }
    if (!sm->code_gen && any_read)
        check_codes(sm);
    int stacks = 0;
    bool failed = false;
    for (size_t j = 0; j < sm->nthreads; j++) {
        int c = count_thread(sm, &sm->threads[j], &sm->recs[j], &r[j],
                             &failed);
        if (c < 0)
            return -1;
        stacks += c;
    }
    if (failed)
        sm->st.failed++;
    return stacks;
}

/* ------------------------------------------------- through pyu_walk */

/* PYU_SAMPLE_ASYNC: each sample is a pyu_walk; its frames
 * are pushed as they come (innermost first) into a scratch list and
 * interned from the outermost at the thread's end. */
typedef struct walk_sample {
    pyu_sampler *sm;
    pyu_walk_frame *frames;
    size_t n, cap;
    int stacks;
    bool failed;
    int err;
} walk_sample;

static int ws_thread(void *arg, const pyu_walk_thread *t)
{
    walk_sample *w = arg;
    pyu_tstate ts = {.native_id = t->native_thread_id,
                     .thread_id = t->thread_id};
    w->n = 0;
    return selected(w->sm, &ts, t->status) ? PYU_WALK_NEXT : PYU_WALK_SKIP;
}

static int ws_frame(void *arg, const pyu_walk_frame *f)
{
    walk_sample *w = arg;
    if (!pyu_grow((void **)&w->frames, w->n, &w->cap, sizeof *w->frames))
        return w->err = -PYU_E_NOMEM, 2;
    w->frames[w->n++] = *f;
    return PYU_WALK_NEXT;
}

static int ws_thread_end(void *arg, const pyu_walk_thread *t,
                         const pyu_walk_end *end)
{
    walk_sample *w = arg;
    pyu_sampler *sm = w->sm;
    pyu_session *s = sm->s;
    /* a stack that could not be read to its end: the thread alone, with
     * <unknown> (the frames read are its innermost, not its outermost) */
    bool unknown = end->error || end->truncated;
    if (unknown) {
        sm->st.torn++;
        sm->st.unknown++;
        w->failed = true;
        w->n = 0;
    } else if (!w->n) {
        return PYU_WALK_NEXT;
    }
    sm->st.frames_read += w->n;
    sm->st.cache_miss += !unknown;
    long node = 0;
    for (size_t i = w->n; i-- > 0 && node >= 0;) {
        pyu_frame d;
        if (pyu_frame_describe(s, &w->frames[i], &d) < 0)
            return w->err = -PYU_E_STATE, 2;
        const pyu_code *c = pyu_walk_code(s, &w->frames[i]);
        long func = pyu_profile_add_func(sm->p, d.function, d.file,
                                         c->firstlineno,
                                         PYU_FUNC_PYTHON);
        /* (the instruction in the code object's own bytecode: a thread's
         * copy, on free-threaded builds, runs the same instructions) */
        long fr = func < 0 ? func
                           : pyu_sampler_add_frame(sm, (uint32_t)func, c,
                                       w->frames[i].instr,
                                       c->addr + PYU_OFF(&s->off,
                                                         co_code_adaptive));
        node = fr < 0 ? fr : pyu_profile_push(sm->p, (uint32_t)node,
                                              (uint32_t)fr);
    }
    unsigned status = end->status;
    if (node >= 0 && unknown)
        node = pyu_profile_push(sm->p, (uint32_t)node,
                                (uint32_t)sm->unknown_frame);
    if (node >= 0 && (sm->o.flags & PYU_SAMPLE_GC) &&
        (status & PYU_STATUS_GC))
        node = pyu_profile_push(sm->p, (uint32_t)node,
                                (uint32_t)sm->gc_frame);
    long th = node < 0 ? node
                       : profile_thread(sm, t->thread_id,
                                        t->native_thread_id,
                                        t->interpreter_id, t->main);
    if (th < 0 || pyu_profile_count(sm->p, (uint32_t)th, (uint32_t)node, 1,
                                    status) < 0)
        return w->err = -PYU_E_NOMEM, 2;
    w->stacks++;
    return PYU_WALK_NEXT;
}

static int take_walked(pyu_sampler *sm)
{
    walk_sample w = {.sm = sm};
    pyu_walker wk = {
        .flags = sm->o.flags & PYU_SAMPLE_ASYNC ? PYU_WALK_ASYNC : 0,
        .thread = ws_thread,
        .frame = ws_frame,
        .thread_end = ws_thread_end,
    };
    int rc = pyu_walk(sm->s, &wk, &w);
    free(w.frames);
    if (w.err)
        return pyu_fail(&sm->s->err, -w.err, "out of memory");
    if (rc < 0)
        return rc;
    if (w.failed)
        sm->st.failed++;
    return w.stacks;
}

/* -------------------------------------------------------------- public */

static long synthetic(pyu_profile *p, const char *name, int kind)
{
    long f = pyu_profile_add_func(p, name, "", 0, kind);
    return f < 0 ? f : pyu_profile_add_frame(p, (uint32_t)f, 0);
}

int pyu_sampler_new(pyu_session *s, const pyu_sampler_opts *o,
                    pyu_profile *p, pyu_sampler **out)
{
    if (!s || !o || !p || !out || o->mode < PYU_MODE_WALL ||
        o->mode > PYU_MODE_EXCEPTION)
        return -PYU_E_INVAL;
    *out = NULL;
    if (!s->opened)
        return pyu_err_set(&s->err, PYU_E_STATE, "the session is not open");
    pyu_sampler *sm = calloc(1, sizeof *sm);
    if (!sm)
        return pyu_err_set(&s->err, PYU_E_NOMEM, "out of memory");
    sm->s = s;
    sm->p = p;
    sm->o = *o;
    const pyu_offsets *off = &s->off;
    sm->read_anchors = PYU_HAS(off, ts_last_profiled_frame) &&
                       PYU_HAS(off, ts_last_profiled_frame_seq);
    sm->anchors = sm->read_anchors && s->ops->write &&
                  !(o->flags & (PYU_SAMPLE_READ_ONLY | PYU_SAMPLE_NO_CACHE));
    sm->code_gen = PYU_HAS(off, is_code_object_generation);
    sm->extra_off[0] = sm->read_anchors
                           ? PYU_OFF(off, ts_last_profiled_frame)
                           : PYU_ABSENT;
    sm->extra_off[1] = sm->read_anchors
                           ? PYU_OFF(off, ts_last_profiled_frame_seq)
                           : PYU_ABSENT;
    sm->fsize = (size_t)PYU_OFF(off, fr_size);
    sm->tslen = pyu_tstate_len(s, sm->extra_off);
    sm->indirect = !PYU_HAS(off, ts_current_frame);
    pyu_interp ii;
    pyu_interp_read ir;
    pyu_interp_plan(off, 0, 0, &ii, &ir); /* range addresses: the offsets */
    uint64_t lo = UINT64_MAX, hi = 0;
    for (size_t k = 0; k < ir.nlocal; k++) {
        lo = ir.r[k].addr < lo ? ir.r[k].addr : lo;
        hi = ir.r[k].addr + ir.r[k].len > hi ? ir.r[k].addr + ir.r[k].len
                                             : hi;
    }
    if (ir.nlocal && hi - lo <= 4096 && hi <= PYU_OFF(off, is_size)) {
        sm->ispan_off = (size_t)lo;
        sm->ispan_len = (size_t)(hi - lo);
    }
    sm->gc_frame = synthetic(p, "<GC>", PYU_FUNC_GC);
    sm->native_frame = synthetic(p, "<native>", PYU_FUNC_NATIVE);
    sm->unknown_frame = synthetic(p, "<unknown>", PYU_FUNC_UNKNOWN);
    if (sm->gc_frame < 0 || sm->native_frame < 0 || sm->unknown_frame < 0) {
        free(sm);
        return pyu_err_set(&s->err, PYU_E_NOMEM, "out of memory");
    }
    pyu_profile_info *pi = pyu_profile_info_of(p);
    pi->pid = s->pid;
    snprintf(pi->python, sizeof pi->python, "%s", s->version);
    pi->mode = o->mode;
    pi->flags = o->flags;
    pyu_profile_clock_start(p);
    if (!s->ops->thread_name || s->pid <= 0 ||
        s->ops->thread_name(s->ctx, (uint64_t)s->pid, sm->proc_name,
                            sizeof sm->proc_name) < 0)
        sm->proc_name[0] = 0;
    sm->memo_epoch = s->code_epoch;
    *out = sm;
    return 0;
}

static int take(pyu_session *s, void *arg)
{
    pyu_sampler *sm = arg;
    if (sm->o.flags & PYU_SAMPLE_ASYNC)
        return take_walked(sm);
    return take_cached(s, sm);
}

int pyu_sampler_take(pyu_sampler *sm)
{
    if (!sm)
        return -PYU_E_INVAL;
    pyu_session *s = sm->s;
    uint64_t reads = s->reads, failed = sm->st.failed;
    uint64_t t = pyu_profile_clock(sm->p);
    int rc;
    if ((sm->o.flags & PYU_SAMPLE_BLOCKING) &&
        !(sm->o.flags & PYU_SAMPLE_ASYNC))
        rc = pyu_paused(s, take, sm);
    else
        rc = take(s, sm); /* pyu_walk stops the target itself, if asked */
    sm->st.samples++;
    sm->st.reads += s->reads - reads;
    pyu_profile_info *pi = pyu_profile_info_of(sm->p);
    pi->samples++;
    if (rc < 0) {
        if (sm->st.failed == failed)
            sm->st.failed++;
        pi->failed++;
        pyu_profile_mark(sm->p, t, 1); /* (out of memory: the timeline
                                          only loses this sample) */
        return s->err.code ? -s->err.code : -PYU_E_IO;
    }
    if (sm->st.failed != failed)
        pi->failed++;
    if (pyu_profile_mark(sm->p, t, sm->st.failed != failed) < 0)
        return pyu_err_set(&s->err, PYU_E_NOMEM, "out of memory");
    sm->st.stacks += (uint64_t)rc;
    return rc;
}

void pyu_sampler_stats_get(const pyu_sampler *sm, pyu_sampler_stats *out)
{
    *out = sm->st;
    out->anchors = sm->anchors;
}

void pyu_sampler_free(pyu_sampler *sm)
{
    if (!sm)
        return;
    /* (only where it wrote, in the threads still there) */
    if (pyu_fcache_wrote(sm) && pyu_plan_rediscover(sm) == 0)
        pyu_fcache_clear_anchors(sm);
    pyu_plan_free(sm);
    pyu_accept_free(sm);
    free(sm->memo);
    free(sm->reads);
    free(sm);
}
