/* Links the copy lost: a stack of the thread state's moment when the walk
 * from its current frame cannot reach the thread's base as copied.
 *
 *   walk and judge   a walk from a frame, on through the generators that
 *                    had yielded (resume.c), judged by the acceptance
 *                    rules (accept.c), leaving out the popped frames their
 *                    callers cannot have called any more;
 *   graft            the innermost frames of a walk that failed, put on a
 *                    walk from the current frame read after the frames,
 *                    at the frame that holds or called them;
 *   3.11             the eval loop's word that names the current frame is
 *                    read a moment after the thread state: the walk is
 *                    settled to that moment (pyu_links_settle());
 *   as met           the generators met lately between two frames of the
 *                    data stack, for those that yielded by their copy,
 *                    nothing found to hold them (pyu_links_as_met());
 *   calls from C     a frame whose link below is gone (C code called it)
 *                    is put on the frame right below it on the data stack
 *                    (pyu_links_from_below()).
 *
 * sampler.c's read_thread() walks and judges the stack from the thread
 * state's current frame; on 3.11 settles it (or, when it failed, makes it
 * again from the loop's entry frame); else tries it from below; and last
 * walks from the current frame read again, grafting the first walk's
 * frames on it.
 */
#include "sampling.h"

#include <string.h>

#define TOP_STEPS 16 /* 3.11: frames gone up the data stack to its top */
#define SHIM_NEAR 4096 /* 3.12: an entry frame this close to its cframe */
#define SHIM_SURE 2    /* ... seen so by this many walks in a row */

/* ---------------------------------------------------- walk and judge */

/* Walks t's chain from `first` (pyu_snap_walk()), and on through the
 * generators that had yielded by their copy (pyu_resume_walk()). */
int pyu_links_walk_whole(pyu_sampler *sm, pyu_sthread *t, const pyu_tstate *ts,
                         uint64_t first, bool spans)
{
    if (pyu_snap_walk(sm, t, ts, first, spans) < 0)
        return -1;
    return pyu_resume_walk(sm, t, ts, spans);
}

/* Judges t's walk by the acceptance rules, leaving out the popped frames
 * their callers cannot have called any more.  A walk of popped frames
 * alone (the link below them gone: a call from C code, its slot being
 * filled again) stays as it is, for pyu_links_from_below() and
 * pyu_links_graft() to find the caller on the data stack of the thread
 * state's moment.  1 when the stack passed whole (r->ok == t->nfr), 0
 * when not, -1 on an error that ends the sample. */
int pyu_links_judge(pyu_sampler *sm, pyu_sthread *t, const pyu_tstate *ts,
                    thread_read *r)
{
    r->ok = pyu_accept_chain(sm, t, ts);
    if (r->ok < 0)
        return -1;
    if (r->ok > 0 && (size_t)r->ok < t->nfr &&
        t->nfr - (size_t)r->ok <= t->npopped)
        r->ok = pyu_snap_drop_popped(t, t->nfr - (size_t)r->ok);
    if (!t->nfr || (size_t)r->ok != t->nfr)
        return 0;
    pyu_snap_note_popped(sm, t);
    pyu_resume_learn(t);
    pyu_snap_learn_slots(sm, t);
    return 1;
}

/* ------------------------------------------------------------ graft */

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

/* After a walk from the current frame failed and one from the current
 * frame read after the frames passed (in t->fr1 and t->fr): when the
 * first walk's innermost frames agree among themselves and ended before
 * their link below could be read (a generator that yielded, a call from C
 * that returned: their links are gone once they end), and a frame of the
 * second walk is seen to call the outermost of them, the stack the first
 * read saw was those frames on top of the second walk from that frame
 * down.  0, or -1 on an error. */
int pyu_links_graft(pyu_sampler *sm, pyu_sthread *t, const pyu_tstate *ts)
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
                       ? pyu_resume_gen_object(sm, low->addr)
                       : 0;
    size_t x = t->nfr;
    for (size_t i = 0; gen && i < t->nfr && x == t->nfr; i++)
        if (t->fr[i].r.owner < PYU_OWNER_ENTRY &&
            pyu_resume_holds(sm, t, &t->fr[i].r, gen, false))
            x = i;
    /* (or through a generator one of them holds, which had yielded too
     * by the second read: its frame, which holds this one, goes between) */
    pyu_sframe mid[PYU_HELD_DEPTH];
    size_t via = 0;
    for (size_t i = 0; gen && x == t->nfr && i < t->nfr && i < PYU_GEN_DEPTH;
         i++)
        if (t->fr[i].r.owner < PYU_OWNER_ENTRY &&
            (via = pyu_resume_held_gen(sm, t, &t->fr[i].r, gen, mid, 0,
                                       false)))
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
    /* (the frame that holds it now, the first walk's moment being the
     * thread state's, lay right under that walk then: the generator's
     * resumer then, unless it is of another call since) */
    if (gen && x < t->nfr &&
        !pyu_resume_right_under(sm, t, ts, &t->fr[x].r, t->fr1, u))
        return 0;
    if (x == t->nfr)
        return 0;
    if (pyu_resume_stack_on(sm, t, u, mid, via, x) < 0)
        return -1;
    sm->st.grafted++;
    return 0;
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
 * moment ends at that top.  pyu_links_settle() judges the walk from the loop's
 * word:
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
 *     made again from the named loop's entry frame
 *     (pyu_links_from_entry(): the frame that runs that code), then taken
 *     as above.
 *
 * A loop that ended by the read of its word may leave another C
 * function's word there, and no frame: the walk is made from its entry
 * frame, then taken as above. */

/* The index of the innermost frame of t's walk that entered an eval
 * loop, or t->nfr. */
static size_t entered_at(const pyu_sthread *t)
{
    size_t i = 0;
    while (i < t->nfr && !t->fr[i].r.entry)
        i++;
    return i;
}

/* Whether the frame below t's frame i in its walk is the frame at f
 * (its link, or the frame the rules put under a generator that had
 * yielded by its copy, resume.c). */
static bool linked_below(const pyu_sthread *t, size_t i, uint64_t f)
{
    return (i + 1 < t->nfr ? t->fr[i + 1].r.addr : t->fr[i].r.prev) == f;
}

/* Remembers the frame t's walk entered the eval loop of ts's _PyCFrame
 * with, and its code when that is a generator's frame: when the walk's
 * entry frame is linked to the loop below (ts->outer_frame), or nothing
 * is known of the loop and that cannot be told (a walk of another loop
 * remembered as this one's would be taken for it again and again). */
static void learn_entry(pyu_sthread *t, const pyu_tstate *ts)
{
    size_t k = pyu_plan_loop_of(t, ts->cframe), i = entered_at(t);
    if (k < PYU_CFRAMES && i < t->nfr && !ts->loop_left &&
        (ts->outer_frame ? linked_below(t, i, ts->outer_frame)
                         : !t->loop[k].frame)) {
        bool gen = t->fr[i].r.owner == PYU_OWNER_GENERATOR;
        t->loop[k].frame = t->fr[i].r.addr;
        t->loop[k].code = gen ? t->fr[i].r.code : 0;
        t->loop[k].under = gen && i + 1 < t->nfr ? t->fr[i + 1].r.code : 0;
        t->loop[k].below = ts->outer_cf;
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
    if (pyu_snap_bytes(sm, t, e + off, &c, 8) && c == code)
        return e;
    for (size_t k = 0; k < PYU_CFRAMES + PYU_GEN_RECENT; k++) {
        uint64_t a = k < PYU_CFRAMES ? t->loop[k].frame
                                     : t->gens[k - PYU_CFRAMES];
        if (a && a != e && pyu_snap_bytes(sm, t, a + off, &c, 8) && c == code)
            return a;
    }
    return 0;
}

/* Walks t's stack from the frame `from` and judges it, the walk it had
 * kept aside (t->fr1): 1 when it passed and starts at `from`, 0 when not
 * (t's walk, how it ended and r as they were), -1 on an error. */
static int walk_from(pyu_sampler *sm, pyu_sthread *t, const pyu_tstate *ts,
                     uint64_t from, bool spans, thread_read *r)
{
    thread_read kept = *r;
    int end = t->end, ok;
    pyu_snap_swap_walks(t);
    if (pyu_links_walk_whole(sm, t, ts, from, spans) < 0 ||
        (ok = pyu_links_judge(sm, t, ts, r)) < 0)
        return -1;
    if (ok && t->fr[0].r.addr == from)
        return 1;
    pyu_snap_swap_walks(t);
    t->end = end;
    *r = kept;
    return 0;
}

/* Puts on t's walk the generator's frame loop k was last seen entered
 * with, as it was then (r: imputed).  0, or -1 on an error. */
static int put_entry(pyu_sampler *sm, pyu_sthread *t, thread_read *r,
                     size_t k)
{
    uint64_t below = t->nfr ? t->fr[0].r.addr : 0;
    if (pyu_snap_make_room(sm, t, 0, 1) < 0)
        return -1;
    t->fr[0].r.addr = t->loop[k].frame;
    t->fr[0].r.code = t->loop[k].code;
    t->fr[0].r.owner = PYU_OWNER_GENERATOR;
    t->fr[0].r.entry = true;
    t->fr[0].r.prev = below;
    r->ok = (long)t->nfr;
    r->imputed = true;
    return 0;
}

/* The thread state named the eval loop of a generator resumed from C
 * code, whose frame runs other code by its copy, or is no frame any more:
 * the loop ended and the generator was freed before the copy (`sum(1 for w
 * in words if pat.match(w))`: its last words are a tenth of the samples of
 * count_matches, read again tens of microseconds later in the next phase
 * of the program before this).  When the frame of the data stack at the
 * top of that moment runs the code of the one that resumed the generator
 * when that loop was last seen, the stack is that frame's with the
 * generator, as it was then, on it (r: imputed).  1 when its walk passed
 * the rules, 0 when not (the walk kept), -1 on an error. */
static int loop_gone(pyu_sampler *sm, pyu_sthread *t, const pyu_tstate *ts,
                     bool spans, thread_read *r, size_t k)
{
    const pyu_offsets *o = &sm->s->off;
    uint64_t top = t->loop[k].under ? pyu_snap_frame_under(sm, t, ts, 0) : 0,
             code;
    if (!top ||
        !pyu_snap_bytes(sm, t, top + PYU_OFF(o, fr_executable), &code, 8) ||
        (code & ~o->tag_mask) != t->loop[k].under)
        return 0;
    int ok = walk_from(sm, t, ts, top, spans, r);
    if (ok <= 0)
        return ok;
    return put_entry(sm, t, r, k) < 0 ? -1 : 1;
}

/* The thread state named the eval loop of a generator resumed from C
 * code which had ended by the copy of its cframe (ts->loop_left): its
 * word is another C function's.  The loop below it, suspended in the C
 * code that resumed it as long as it ran, was last seen with that cframe
 * (ts->outer_cf, its word ts->outer_frame of the same copy).  When that
 * loop's walk holds a frame running the code that resumed the generator
 * when its loop was last seen, among its frames up to its own entry
 * frame, the stack is that frame's with the generator, as it was then,
 * on it (r: imputed); frames above it in that loop are of a later moment
 * (workloads.py generators on 3.11: produce's loop had ended in 0.95 of
 * the samples that named it, parse calling row.split() where its cframe
 * had been).  The loop below may have ended too (parse yielded, and keep
 * called checksum() where parse's call of it had been): then its own
 * entry frame goes on the stack, as last seen, and the loop below it is
 * looked at, up to LOOPS_BELOW loops down.  1 when a walk passed the
 * rules, 0 when not (the walk kept), -1 on an error. */
#define LOOPS_BELOW 3
static int loop_below(pyu_sampler *sm, pyu_sthread *t, const pyu_tstate *ts,
                      bool spans, thread_read *r, size_t k)
{
    size_t lv[LOOPS_BELOW], n = 0;
    uint64_t cf = ts->outer_cf, word = ts->outer_frame;
    thread_read kept = *r;
    int end = t->end;
    size_t m = k;
    while (m < PYU_CFRAMES && word && n < LOOPS_BELOW) {
        uint64_t under = t->loop[m].under;
        if (!t->loop[m].code || !under)
            return 0;
        lv[n++] = m;
        int ok;
        pyu_snap_swap_walks(t);
        if (pyu_links_walk_whole(sm, t, ts, word, spans) < 0 ||
            (ok = pyu_links_judge(sm, t, ts, r)) < 0)
            return -1;
        size_t j = 0;
        while (ok && j < t->nfr && t->fr[j].r.code != under &&
               !t->fr[j].r.entry)
            j++;
        if (ok && j < t->nfr && t->fr[j].r.code == under) {
            memmove(t->fr, t->fr + j, (t->nfr - j) * sizeof *t->fr);
            t->nfr -= j;
            t->npopped = t->npopped > j ? t->npopped - j : 0;
            while (n)
                if (put_entry(sm, t, r, lv[--n]) < 0)
                    return -1;
            return 1;
        }
        pyu_snap_swap_walks(t);
        t->end = end;
        *r = kept;
        if ((m = pyu_plan_loop_of(t, cf)) < PYU_CFRAMES) {
            cf = t->loop[m].below;
            word = cf ? pyu_plan_loop_word(sm, t, cf) : 0;
        }
    }
    return 0;
}

/* Walks t from e in place of its walk (kept in t->fr1, *r in *kept and
 * its end in *end: walk_back() puts them back) and judges the walk: 1
 * passed, 0 not, -1. */
static int walk_instead(pyu_sampler *sm, pyu_sthread *t, const pyu_tstate *ts,
                        uint64_t e, bool spans, thread_read *r,
                        thread_read *kept, int *end)
{
    *kept = *r;
    *end = t->end;
    pyu_snap_swap_walks(t);
    if (pyu_links_walk_whole(sm, t, ts, e, spans) < 0)
        return -1;
    return pyu_links_judge(sm, t, ts, r);
}

static void walk_back(pyu_sthread *t, thread_read *r, const thread_read *kept,
                      int end)
{
    pyu_snap_swap_walks(t);
    t->end = end;
    *r = *kept;
}

/* Walks t's stack from the entry frame of the loop its thread state
 * named, in place of its walk when the stack passes the rules: 1 when it
 * did, 0 when not (or there is no such frame: the walk is kept), -1 on an
 * error. */
int pyu_links_from_entry(pyu_sampler *sm, pyu_sthread *t, const pyu_tstate *ts,
                         bool spans, thread_read *r)
{
    size_t k = pyu_plan_loop_of(t, ts->cframe);
    uint64_t e = k == PYU_CFRAMES || !t->loop[k].frame ? 0
                 : t->loop[k].code
                     ? entry_now(sm, t, t->loop[k].frame, t->loop[k].code)
                     : t->loop[k].frame;
    if (!e) {
        int ok = k < PYU_CFRAMES && t->loop[k].code
                     ? loop_gone(sm, t, ts, spans, r, k)
                     : 0;
        return ok || !ts->loop_left ? ok : loop_below(sm, t, ts, spans, r, k);
    }
    thread_read kept;
    int end, ok = walk_instead(sm, t, ts, e, spans, r, &kept, &end);
    if (ok < 0)
        return -1;
    /* (a generator's frame found by its code may be one freed since, its
     * link below left: the frame that resumed the loop's generator ran the
     * code it was seen resumed by -- two `sum(<genexpr>)` one after the
     * other run their generators' loops at one place of the C stack, and
     * count_matches took count_diff's generator expression, freed at the
     * same address, in 0.2-1 % of the samples of workloads.py stdlib) */
    if (ok && t->loop[k].under &&
        (t->nfr < 2 || t->fr[1].r.code != t->loop[k].under))
        ok = 0;
    if (!ok) {
        walk_back(t, r, &kept, end);
        if (ts->loop_left)
            return loop_below(sm, t, ts, spans, r, k);
    }
    return ok;
}

/* The frame at f as t's spans hold it, into *fr: false when they do not. */
static bool spans_copy(pyu_sampler *sm, const pyu_sthread *t, uint64_t f,
                       pyu_frame_raw *fr)
{
    size_t avail;
    const uint8_t *copy = pyu_snap_in_spans(t, f, sm->fsize, &avail);
    if (copy)
        pyu_frame_raw_take(&sm->s->off, f, copy, sm->fsize, fr);
    return copy != NULL;
}

/* Whether the frame copied in fr, running code, had not started it. */
static bool not_started(pyu_sampler *sm, const pyu_frame_raw *fr,
                        uint64_t code)
{
    return fr->instr_ptr < code + PYU_OFF(&sm->s->off, co_code_adaptive);
}

/* Whether the frame at f (running code), the top one of the data stack,
 * is not one of the loop's the thread state named: the first frame of
 * another eval loop (is_entry), or one whose code has not started (a
 * frame C code pushed, whose loop is not entered yet).  C code calling
 * Python pushes the frame before it enters its loop and pops it after the
 * loop has ended: meanwhile the thread runs C code, and its current frame
 * is the caller's, as a stopped thread's word shows.  When the thread
 * state named the loop that frame is the first of (`entered`), a copy of
 * it that has not started is of the next call C code made at its place,
 * copied after the loop's call ended: the frame counts. */
static bool not_the_loops(pyu_sampler *sm, const pyu_sthread *t, uint64_t f,
                          uint64_t code, bool entered)
{
    pyu_frame_raw fr;
    return spans_copy(sm, t, f, &fr) &&
           (fr.entry || (!entered && not_started(sm, &fr, code)));
}

/* Into at[]: the frames between the innermost frame of the data stack
 * in t's walk from its frame i on and the top its thread state had, the
 * outermost first, going up code object by code object.  How many (0 when
 * that frame ends at the top); -1 when they cannot be told (a size that
 * passes the top, no frame of the chunk, more than TOP_STEPS).  A step
 * that cannot be told past frames that could leaves, in *stuck, its place
 * (the frames below it in at[], *nstuck of them) and, in *under, the code
 * of the frame below it: the copy there is of another call than the one
 * the top was of (a later call at the same place).  `entered`: the thread
 * state named the loop of the frames above (not_the_loops()). */
static long above_top(pyu_sampler *sm, const pyu_sthread *t,
                      const pyu_tstate *ts, size_t i, bool entered,
                      uint64_t *at, uint64_t *stuck, size_t *nstuck,
                      uint64_t *under)
{
    *stuck = 0;
    while (i < t->nfr && !pyu_snap_in_top_chunk(t, ts, &t->fr[i].r))
        i++;
    if (i == t->nfr)
        return -1;
    uint64_t f = t->fr[i].r.addr, code = t->fr[i].r.code, below = 0,
             off = PYU_OFF(&sm->s->off, fr_executable);
    for (long k = 0; k <= TOP_STEPS; k++) {
        uint64_t size;
        if ((k && !pyu_snap_bytes(sm, t, f + off, &code, 8)) ||
            !(size = pyu_snap_frame_size(sm, code)) ||
            f + size > ts->ds_top) {
            if (k && f < ts->ds_top)
                *stuck = f, *nstuck = (size_t)k - 1, *under = below;
            return -1;
        }
        if (k && f + size == ts->ds_top && not_the_loops(sm, t, f, code, entered))
            return k - 1;
        if (k)
            at[k - 1] = f;
        if (f + size == ts->ds_top)
            return k;
        f += size;
        below = code;
    }
    return -1;
}

/* Puts above_top()'s n frames at[] on t's walk from its frame i on, each
 * called by the one below it (frame i calls the first), in place of t's
 * walk when the stack passes the rules: 1 when it did, 0 when not (t's
 * walk kept), -1 on an error. */
static int onto_top(pyu_sampler *sm, pyu_sthread *t, const pyu_tstate *ts,
                    bool spans, thread_read *r, size_t i, const uint64_t *at,
                    size_t n)
{
    size_t need = t->nfr - i + n;
    uint8_t buf[PYU_BUF_FRAME];
    pyu_snap_swap_walks(t);
    while (need > t->frcap)
        if (!pyu_grow((void **)&t->fr, t->frcap, &t->frcap, sizeof *t->fr))
            return pyu_fail(&sm->s->err, PYU_E_NOMEM, "out of memory");
    for (size_t k = 0; k < n; k++) {
        pyu_sframe *sf = &t->fr[n - 1 - k];
        /* (the copy the spans hold, to their end: its saved stack top's
         * words are the caller's evidence, accept.c; and its second copy
         * when its range was read twice, which shows whether the first
         * mixed two moments of a slot being filled again: a copy of a1's
         * frame with b1's words, or of b2's code with a2's function,
         * passed as a1 -> b2 in 1 of 10,000 samples of the alternating
         * target) */
        size_t avail;
        const uint8_t *copy = pyu_snap_in_spans(t, at[k], sm->fsize, &avail);
        if (!copy) {
            avail = sm->fsize <= sizeof buf ? sm->fsize : 0;
            if (!avail || pyu_read_quiet(sm->s, at[k], buf, avail) < 0) {
                pyu_snap_swap_walks(t);
                return 0;
            }
            copy = buf;
        }
        memset(sf, 0, sizeof *sf);
        pyu_frame_raw_take(&sm->s->off, at[k], copy, sm->fsize, &sf->r);
        sf->r.prev = k ? at[k - 1] : t->fr1[i].r.addr;
        pyu_snap_evidence(sm, t, sf, copy, avail, spans && copy != buf);
    }
    memcpy(t->fr + n, t->fr1 + i, (t->nfr1 - i) * sizeof *t->fr);
    t->nfr = need;
    t->npopped = 0;
    thread_read kept = *r;
    int ok = pyu_links_judge(sm, t, ts, r);
    if (ok <= 0) {
        pyu_snap_swap_walks(t);
        *r = kept;
    }
    return ok;
}

/* Whether the frame at f, the first of the data stack above the caller of
 * a loop's entry frame e, is that loop's: linked to e, or not started
 * (its loop sets its previous when it enters it).  A generator's loop
 * (sum() of a generator expression) runs frames of the heap first: the
 * frames they call lie there, linked to them. */
static bool linked_to(pyu_sampler *sm, const pyu_sthread *t, uint64_t f,
                      uint64_t e)
{
    pyu_frame_raw fr;
    return spans_copy(sm, t, f, &fr) &&
           (fr.prev == e || not_started(sm, &fr, fr.code));
}

/* settle() of a walk whose first frame is its loop's entry frame (3.12,
 * whose eval loops each push one on the C stack): the loop's word named
 * it, which it does from the moment the loop's last frame returns (the
 * loop ends a few instructions later), and before the loop has linked its
 * first frame, when the word still holds what the last loop at its place
 * left there.  The thread state was read before the word, often while the
 * loop's frames ran: they were then the frames of the data stack from the
 * one below the entry frame up to the top the thread state had, which go
 * on the walk above the entry frame (none when the top was already that
 * frame's end).  A callback of C code is over by the word's read in a good
 * part of the samples read from another CPU (workloads.py sorting on
 * 3.12: the key functions and comparisons at half their share, 0.24 from
 * --blocking).  The top frame counts even when its copy has not started:
 * that is the next call at its place (the thread state named this loop).
 * A walk of entry frames alone is read again, and so is one whose frames
 * above cannot be told (not linked to the entry frame: a generator's
 * loop, whose frames lie in the generators).  0, 1 when rejected (r->ok
 * 0), or -1 on an error. */
static int shim_first(pyu_sampler *sm, pyu_sthread *t, const pyu_tstate *ts,
                      bool spans, thread_read *r)
{
    size_t i = 0;
    while (i < t->nfr && t->fr[i].r.owner >= PYU_OWNER_ENTRY)
        i++;
    if (i == t->nfr) {
        r->ok = 0;
        return 1;
    }
    uint64_t at[TOP_STEPS], stuck, under;
    size_t nstuck;
    long n = above_top(sm, t, ts, 0, true, at, &stuck, &nstuck, &under);
    if (n > 0 && !linked_to(sm, t, at[0], t->fr[i - 1].r.addr)) {
        r->ok = 0; /* (the loop's frames are not the data stack's) */
        return 1;
    }
    int ok = n > 0 ? onto_top(sm, t, ts, spans, r, 0, at, (size_t)n) : 0;
    if (ok < 0)
        return -1;
    sm->st.topped += (uint64_t)ok;
    return 0;
}

/* 3.12: the walk from the current frame read after the frames, which
 * passed, when the first walk (from the named loop's word, its entry
 * frame, the loop below) gave nothing to graft on it: a callback of C
 * code over by then, the C code between two calls of it (workloads.py
 * sorting from another CPU: 7 % of the samples, nearly all `sorting`
 * itself).  The thread state's top of the data stack is of its moment:
 * when it lay above that walk's innermost frame, the frames between are
 * put on it as shim_first() puts them on an entry frame (above_top():
 * their sizes, code object by code object, must end exactly at the top;
 * one not started, at the top, is not counted).  1 passed, 0 not (t's
 * walk kept), -1. */
int pyu_links_later_top(pyu_sampler *sm, pyu_sthread *t,
                        const pyu_tstate *ts, bool spans, thread_read *r)
{
    if (!sm->shims || !ts->ds_top || !t->nfr ||
        t->fr[0].r.owner >= PYU_OWNER_ENTRY)
        return 0;
    uint64_t at[TOP_STEPS], stuck, under;
    size_t nstuck;
    long n = above_top(sm, t, ts, 0, false, at, &stuck, &nstuck, &under);
    if (n <= 0 || !pyu_snap_in_top_chunk(t, ts, &t->fr[0].r))
        return 0; /* (above_top() may start past frame 0) */
    int ok = onto_top(sm, t, ts, spans, r, 0, at, (size_t)n);
    sm->st.topped += ok > 0;
    return ok;
}

/* 3.12: where the loops' entry frames lie.  An eval loop keeps its
 * _PyCFrame and its entry frame as locals of _PyEval_EvalFrameDefault, at
 * one distance from each other in a build; an accepted walk from the word
 * of the loop the thread state named shows it: its first shim is that
 * loop's entry frame.  Believed when two walks in a row showed the same
 * (a walk of another loop, whose word lay in this one's place, shows
 * another). */
void pyu_links_learn_shim(pyu_sampler *sm, const pyu_sthread *t,
                          const pyu_tstate *ts)
{
    if (!sm->shims || !ts->cframe) /* (3.11's walks have none to find) */
        return;
    for (size_t i = 0; i < t->nfr; i++) {
        const pyu_frame_raw *f = &t->fr[i].r;
        if (f->owner < PYU_OWNER_ENTRY)
            continue;
        int64_t d = (int64_t)(f->addr - ts->cframe);
        if (d <= -SHIM_NEAR || d >= SHIM_NEAR)
            return;
        if (d != sm->shim_delta || f->code != sm->shim_code) {
            sm->shim_delta = d;
            sm->shim_code = f->code;
            sm->shim_seen = 0;
        }
        sm->shim_seen += sm->shim_seen < SHIM_SURE;
        return;
    }
}

/* The word of t's recent loop k as this sample's batch read it: in the
 * stretch of the loops' words, else one by one (read_plan.c). */
static uint64_t recent_word(const pyu_sampler *sm, const pyu_sthread *t,
                            size_t k)
{
    uint64_t w = pyu_plan_loop_word(sm, t, t->cframe[k]);
    size_t j = (size_t)(t - sm->threads);
    return w || j >= sm->nthreads ? w : sm->cfpeek[j * PYU_CFRAMES + k];
}

/* from_shim() from the word w of the loop below the named one: that
 * loop's walk, the named loop's entry frame e on it (the word it
 * interrupted was the current frame of the loop below), and the frames
 * of the data stack from there up to the top the thread state had above
 * that, the first linked to e.  The loop below's innermost frame must end
 * below the top: the named loop had a frame.  1 passed, 0 not, -1. */
static int under_entry(pyu_sampler *sm, pyu_sthread *t, const pyu_tstate *ts,
                       bool spans, thread_read *r, uint64_t e, uint64_t w)
{
    int ok;
    uint64_t size;
    if (pyu_links_walk_whole(sm, t, ts, w, spans) < 0 ||
        (ok = pyu_links_judge(sm, t, ts, r)) < 0)
        return -1;
    if (!ok || !t->nfr || t->fr[0].r.owner >= PYU_OWNER_ENTRY ||
        !(size = pyu_snap_frame_size(sm, t->fr[0].r.code)) ||
        t->fr[0].r.addr + size >= ts->ds_top)
        return 0;
    while (t->nfr + 1 > t->frcap)
        if (!pyu_grow((void **)&t->fr, t->frcap, &t->frcap, sizeof *t->fr))
            return pyu_fail(&sm->s->err, PYU_E_NOMEM, "out of memory");
    memmove(t->fr + 1, t->fr, t->nfr * sizeof *t->fr);
    memset(t->fr, 0, sizeof *t->fr);
    t->fr[0].r.addr = e;
    t->fr[0].r.owner = PYU_OWNER_ENTRY;
    t->fr[0].r.code = sm->shim_code;
    t->fr[0].r.prev = t->fr[1].r.addr;
    t->nfr++;
    uint64_t at[TOP_STEPS], stuck, under;
    size_t nstuck;
    long n = above_top(sm, t, ts, 0, true, at, &stuck, &nstuck, &under);
    if (n <= 0 || !linked_to(sm, t, at[0], e))
        return 0;
    return onto_top(sm, t, ts, spans, r, 0, at, (size_t)n);
}

/* 3.12: a walk from the word of the loop the thread state named that did
 * not pass, made again at the thread state's moment.  Read from another
 * CPU, a callback of C code has often ended by the copy of its loop's
 * word and frames: the word and the entry frame are stack garbage by then
 * (the C code calls other functions where the loop's locals were), the
 * walk failed, and the walk from the word read again is of a later
 * moment, which is mostly the C code between two callbacks (workloads.py
 * sorting: the key functions and comparisons at 0.10-0.18 less of the
 * samples than --blocking).  From the entry frame the named loop's
 * _PyCFrame has at its distance, when its copy is still one (settle()
 * puts on it the frames of the data stack up to the top the thread state
 * had); else from the word of the loop below it (under_entry(); the
 * loops of other callbacks, made at other depths of the C stack, left
 * their words between the two: a stale word leads to an entry frame, to
 * garbage, or to a frame that ends at the top).  1 passed, 0 not (t's
 * walk as it was), -1. */
int pyu_links_from_shim(pyu_sampler *sm, pyu_sthread *t, const pyu_tstate *ts,
                        bool spans, thread_read *r)
{
    if (!sm->shims || !ts->cframe || !ts->ds_top ||
        sm->shim_seen < SHIM_SURE)
        return 0;
    uint64_t e = ts->cframe + (uint64_t)sm->shim_delta;
    thread_read kept;
    int end, ok = walk_instead(sm, t, ts, e, spans, r, &kept, &end);
    if (ok < 0)
        return -1;
    if (ok && (t->fr[0].r.addr != e || t->fr[0].r.owner < PYU_OWNER_ENTRY))
        ok = 0;
    /* (the loop below: the one the batch found under it, else each loop
     * the thread had lately up the C stack from it, the nearest first) */
    uint64_t last = ts->cframe;
    for (size_t n = 0; !ok && n < PYU_CFRAMES && !pyu_spent(sm); n++) {
        size_t k = PYU_CFRAMES;
        uint64_t w = n ? 0 : ts->outer_frame;
        for (size_t j = 0; !w && j < PYU_CFRAMES; j++)
            if (t->cframe[j] > last &&
                (k == PYU_CFRAMES || t->cframe[j] < t->cframe[k]))
                k = j;
        if (!w && k == PYU_CFRAMES)
            break;
        if (!w) {
            last = t->cframe[k];
            w = recent_word(sm, t, k);
        }
        if (w && (ok = under_entry(sm, t, ts, spans, r, e, w)) < 0)
            return -1;
    }
    if (!ok)
        walk_back(t, r, &kept, end);
    return ok;
}

/* Makes t's accepted walk agree with the moment of its thread state (see
 * above): the loop's frames of that moment are its entry frame and the
 * frames of the data stack from there to the top -- when it is another
 * loop's walk, when the loop is a generator's (its word may be the one it
 * left when it yielded), and when the thread called or returned between
 * the thread state's read and its word's (the frames the word names are
 * then not those of the data stack then).  When the frames up to the top
 * cannot be told (a copy of a later call at one's place, of another
 * size), the walk stands.  A walk whose entry frame was not linked to
 * the current frame of the loop below the named one (ts->outer_frame:
 * read with the loop's word, it cannot change while the loop runs) is of
 * another loop, whatever code it runs: a loop's word and the frame it
 * names are copied a microsecond apart, and a call of checksum() by
 * `keep` is made at the very place of the data stack where the call
 * `parse`, the generator keep resumes, made a moment before had its
 * frame (workloads.py generators on 3.11: such walks taken as the loop's
 * were then remembered as its entry, and 0.2-0.3 of the samples of
 * parse's loop went to keep for the rest of the run in one process of
 * three).  It is made again from the loop's entry frame, or rejected.
 * Remembers the loop's entry frame.  0, 1 when rejected (r->ok 0), or
 * -1 on an error. */
int pyu_links_settle(pyu_sampler *sm, pyu_sthread *t, const pyu_tstate *ts,
                     bool spans, thread_read *r)
{
    if (!sm->indirect || !ts->ds_top || !ts->cframe || !t->nfr)
        return 0;
    if (t->fr[0].r.owner >= PYU_OWNER_ENTRY)
        return shim_first(sm, t, ts, spans, r);
    size_t k = pyu_plan_loop_of(t, ts->cframe), i = entered_at(t);
    uint64_t code = k < PYU_CFRAMES ? t->loop[k].code : 0;
    /* (the walk's entry frame not linked to the loop below the named
     * one: the walk is of another loop) */
    bool foreign = ts->loop_left || (ts->outer_frame && i < t->nfr &&
                                     !linked_below(t, i, ts->outer_frame));
    bool other = foreign ||
                 (code && (i == t->nfr ||
                           (!ts->outer_frame && t->fr[i].r.code != code)));
    if (!other && i == t->nfr) {
        learn_entry(t, ts);
        return 0;
    }
    if (other) {
        int ok = pyu_links_from_entry(sm, t, ts, spans, r);
        if (ok < 0)
            return -1;
        if (!ok && foreign) {
            r->ok = 0; /* (rejected: read again) */
            return 1;
        }
        if (!ok)
            return 0;
        i = 0;
    }
    pyu_plan_note_chunk(sm, t, ts->chunk);
    uint64_t at[TOP_STEPS], stuck, under = 0;
    size_t nstuck = 0;
    long n = above_top(sm, t, ts, i, false, at, &stuck, &nstuck, &under);
    /* (a loop entered by a frame of the data stack: its frames of that
     * moment are the data stack's from there to the top, which the walk
     * from its word has unless the thread called or returned meanwhile) */
    bool same = n >= 0 && (size_t)n == i;
    for (size_t j = 0; same && j < i; j++)
        same = at[j] == t->fr[i - 1 - j].r.addr;
    /* (the top one's place copied with a later call there, as the slot
     * rule finds for a current frame (snapshot.c): the frames below it,
     * with a call met lately in that place, of that size, on top) */
    struct pyu_slot_call xc;
    const struct pyu_slot_call *x =
        n < 0 && stuck && !other && t->fr[i].r.owner == PYU_OWNER_THREAD &&
                pyu_snap_slot_call(sm, t, stuck, ts->ds_top - stuck, under,
                                   NULL, 0, NULL, &xc)
            ? &xc
            : NULL;
    if (x)
        n = (long)nstuck;
    if (same) {
        learn_entry(t, ts);
        return 0;
    }
    int ok = 0;
    if (n > 0) {
        if ((ok = onto_top(sm, t, ts, spans, r, i, at, (size_t)n)) < 0)
            return -1;
    } else if (n == 0 && (i > 0 || x)) { /* (frame i is the top) */
        memmove(t->fr, t->fr + i, (t->nfr - i) * sizeof *t->fr);
        t->nfr -= i;
        t->npopped = t->npopped > i ? t->npopped - i : 0;
        r->ok = (long)t->nfr;
        ok = 1;
    }
    if (ok && x && pyu_snap_put_slot_call(sm, t, r, x) < 0)
        return -1;
    sm->st.topped += (uint64_t)ok;
    learn_entry(t, ts);
    return 0;
}

/* ---------------------------------------- generators between, as met */

/* The resumer of a generator is found by what holds it; a frame whose
 * stack's top was not saved since it pushed the generator does not show
 * it (3.11 saves it at calls of Python code and yields, not at calls of C
 * code: `for group in m.get_grouped_opcodes(n)` in unified_diff, which
 * yields nothing until get_opcodes is over).  What the walk then has is
 * the frames above the generator, those of them on the data stack ending
 * at its top of the thread state's moment, and the frame under them there
 * (pyu_snap_frame_under()).  When a stack taken lately had the same
 * outermost frame of the data stack (its place, code object and size)
 * above a frame running the same code, through the same generators, the
 * frames it had between them are taken for this moment's (on 3.11's
 * workloads.py stdlib, where difflib's generators yielded by their copy
 * in 1-3 % of the samples of count_diff, these were read again from a
 * snapshot of a later moment: 65 us later, in the next phase of the
 * program as often as not). */
int pyu_links_as_met(pyu_sampler *sm, pyu_sthread *t, const pyu_tstate *ts,
                     bool spans, thread_read *r)
{
    size_t n = t->nfr;
    if (!n || t->end != PYU_CHAIN_NULL ||
        t->fr[n - 1].r.owner != PYU_OWNER_GENERATOR || t->fr[n - 1].r.prev)
        return 0;
    /* (the walk's frames agree among themselves, and those of them on the
     * data stack are its frames up to the top at the thread state's
     * moment) */
    size_t i = n;
    for (size_t k = 0; k < n; k++)
        if (t->fr[k].r.owner == PYU_OWNER_THREAD)
            i = k; /* (the outermost frame of the data stack) */
    if (i == n || t->fr[i].popped ||
        !pyu_snap_ends_at_top(sm, t, ts, t->fr, n))
        return 0;
    long up = pyu_accept_upper(sm, t->fr, n);
    if (up < 0)
        return -1;
    if ((size_t)up != n)
        return 0;
    uint64_t below = pyu_snap_frame_under(sm, t, ts, t->fr[i].r.addr),
             size = pyu_snap_frame_size(sm, t->fr[i].r.code), code;
    if (!below || !size ||
        !pyu_snap_bytes(sm, t, below + PYU_OFF(&sm->s->off, fr_executable),
                        &code, 8))
        return 0;
    struct pyu_slot_call x;
    if (!pyu_snap_slot_call(sm, t, t->fr[i].r.addr, size,
                            code & ~sm->s->off.tag_mask, t->fr + i, n - i,
                            NULL, &x))
        return 0;
    /* the frames below the one the call was made through, from the data
     * stack's frame under it: the walk there must pass */
    int ok = walk_from(sm, t, ts, below, spans, r);
    if (ok <= 0)
        return ok;
    size_t more = x.n - (n - i);
    if (pyu_snap_make_room(sm, t, 0, n + more) < 0)
        return -1;
    memcpy(t->fr, t->fr1, n * sizeof *t->fr);
    for (size_t k = 0; k < more; k++)
        t->fr[n + k].r = x.r[n - i + k];
    t->fr[n + more - 1].r.prev = below;
    r->ok = (long)t->nfr;
    r->imputed = true;
    sm->st.resumed++;
    return 1;
}

/* ------------------------------------------- calls from C code */

/* pyu_links_from_below() for a generator's frame resumed from C code (a `for`
 * over it in 3.11 and the free-threaded builds, sum() of it anywhere), whose
 * entry frame on the C stack is gone by its copy: it yielded.  The walk
 * goes on from the frame that holds it, as for one whose previous was
 * cleared (pyu_resume_walk()). */
static int resumed_from_c(pyu_sampler *sm, pyu_sthread *t,
                          const pyu_tstate *ts, bool spans, thread_read *r,
                          size_t u)
{
    pyu_snap_swap_walks(t);
    while (u > t->frcap)
        if (!pyu_grow((void **)&t->fr, t->frcap, &t->frcap, sizeof *t->fr))
            return pyu_fail(&sm->s->err, PYU_E_NOMEM, "out of memory");
    memcpy(t->fr, t->fr1, u * sizeof *t->fr);
    t->nfr = u;
    t->npopped = t->npopped < u ? t->npopped : u;
    t->fr[u - 1].r.prev = 0; /* (its link below is gone) */
    t->end = PYU_CHAIN_NULL;
    size_t n0 = t->nfr;
    thread_read kept = *r;
    int ok = pyu_resume_walk(sm, t, ts, spans);
    if (ok == 0 && t->nfr > n0)
        ok = pyu_links_judge(sm, t, ts, r);
    if (ok != 0)
        return ok;
    pyu_snap_swap_walks(t); /* (back as it was) */
    *r = kept;
    return 0;
}

/* For pyu_links_from_below(): the frames that lay between the first
 * walk's (kept aside) frame u - 1, called from C code, and the frame of the
 * data stack under it, which t's walk starts from -- the generators that
 * called it, and the entry frames they were resumed through -- as a call
 * met lately in that slot, of that size, over that code, had them: into
 * mid[], the outermost first.  How many (0: none met, or it was called by
 * that frame's own C code). */
static size_t between(pyu_sampler *sm, pyu_sthread *t, size_t u,
                      pyu_sframe *mid)
{
    const pyu_sframe *f = &t->fr1[u - 1];
    uint64_t size = pyu_snap_frame_size(sm, f->r.code);
    struct pyu_slot_call x;
    size_t via = size && pyu_snap_slot_call(sm, t, f->r.addr, size,
                                            t->fr[0].r.code, f, 1, NULL, &x)
                     ? x.n - 1u
                     : 0;
    for (size_t k = 0; k < via; k++) {
        memset(&mid[k], 0, sizeof mid[k]);
        mid[k].r = x.r[x.n - 1 - k];
    }
    if (via)
        mid[0].r.prev = t->fr[0].r.addr;
    return via;
}

/* A walk whose innermost frames agree among themselves but whose link
 * below them is gone: the outermost of them was called by C code (its
 * previous, an entry frame on the C stack, is another C function's by
 * its copy: the call was ending).  C code pushes the frames it calls
 * right above its caller's on the data stack: the caller is the frame
 * below it there, stepped up to from the chunk's first frame
 * (pyu_snap_frame_under(), 3.13+), else found among the frames of the last
 * stack taken (the same code object in this sample's copy).  The walk from it,
 * in the same copies, has the innermost frames put back on top: the moment
 * the thread state was read, not a later one (a snapshot of its own, or
 * the current frame read again, is more likely back in the C code, and
 * the profile leans to it).  The frame below on the data stack is not
 * always the caller: a generator that frame resumes (its frames lie in
 * the generator) can have made the call -- `count_diff -> <genexpr> ->
 * unified_diff -> SequenceMatcher()` runs `__init__` from C code right
 * above `count_diff` on the data stack -- so the frames a call met lately
 * in that slot had between (between()) go there.  1 when that stack
 * passed, 0 when not (t's walk is then as it was), -1 on an error. */
int pyu_links_from_below(pyu_sampler *sm, pyu_sthread *t, const pyu_tstate *ts,
                         bool spans, thread_read *r)
{
    const pyu_fcache *c = &t->cache;
    if (!t->nfr || pyu_spent(sm))
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
    bool exact =
        !sm->indirect && (below = pyu_snap_frame_under(sm, t, ts, low));
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
    /* (the first walk where pyu_links_graft() looks for it) */
    pyu_sframe mid[PYU_SLOT_DEPTH];
    thread_read kept = *r;
    pyu_snap_swap_walks(t);
    int ok = 0;
    if (pyu_links_walk_whole(sm, t, ts, below, spans) < 0)
        return -1;
    if (t->nfr && (exact || t->fr[0].r.code == code) &&
        (ok = pyu_links_judge(sm, t, ts, r)) > 0) {
        size_t n = t->nfr, via = exact ? between(sm, t, u, mid) : 0;
        if (exact ? pyu_resume_stack_on(sm, t, u, mid, via, 0) < 0
                  : pyu_links_graft(sm, t, ts) < 0)
            return -1;
        if (t->nfr > n) {
            r->ok = (long)t->nfr;
            r->imputed = r->imputed || via;
            return 1;
        }
    }
    if (ok < 0)
        return -1;
    pyu_snap_swap_walks(t); /* (back as it was) */
    *r = kept;
    return 0;
}
