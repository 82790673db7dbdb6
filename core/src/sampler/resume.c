/* Generators that yielded by their copy.
 *
 * A generator's frame names its caller only while it runs: it clears its
 * previous when it yields (3.14+ also when it returns).  A walk that ends
 * at such a frame was copied a moment after the generator stopped, and its
 * resumer is found by what holds the generator: the frame that resumed it
 * last time (a memo per generator frame, learnt from accepted stacks),
 * the frames of the last stack, the generators and the C stack's entry
 * frames met lately, and last the frame of the data stack below the
 * walk's frames at the thread state's moment (snapshot.c) -- the one
 * whose locals, or whose value stack under its saved top (an argument of
 * the C function that iterates the generator: sum(), list()), hold the
 * generator object, directly or through generators it holds in turn.  The
 * walk goes on from there, in the same copies.  When nothing shows that it
 * holds it, the generators a stack met lately between the same two frames
 * of the data stack are taken (links.c, pyu_links_as_met()).
 */
#include "sampling.h"

#include <stdlib.h>
#include <string.h>

#define GEN_TRIES 8  /* frames of the last stack tried as the resumer of a
                        generator its memo does not know */
#define GEN_WALKS 48 /* walks from such frames, a stack at most */

/* ----------------------------------------------- what a frame holds */

/* The generator (or coroutine) object whose frame is at frame: 3.14+
 * publish where a generator keeps its frame; before, the offset is found
 * once, by the object's type at the offsets the layouts of 3.11 and 3.13
 * (both builds) put it. */
uint64_t pyu_resume_gen_object(pyu_sampler *sm, uint64_t frame)
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
#define HELD_READS 6  /* objects near the generator a frame holds read, at
                         most: its lists and floats as often as generators
                         (HELD_TRIES counts only generators).  Bounded here,
                         not by the sample's spare reads: once those were
                         spent, the pipeline of a free-threaded 3.13 lost
                         its generators (0.02 -> 0.10 from the reference) */

/* How many locals (arguments, variables, cells) the code object at code
 * has (co_nlocalsplus, in its record), HOLD_WORDS at most; 0 when it is
 * not a code object. */
static size_t nlocals(pyu_sampler *sm, uint64_t code)
{
    bool is_code;
    const pyu_code *c = pyu_code_cached(sm->s, code);
    if (!c && code)
        c = pyu_code_get(sm->s, code, &is_code);
    return !c ? 0 : c->nlocalsplus < HOLD_WORDS ? c->nlocalsplus : HOLD_WORDS;
}

/* The words of frame f's locals and of its value stack up to its saved
 * top (HOLD_WORDS at most) into words: from t's spans when they hold
 * them, else read now.  How many.  A frame that did not save its top (3.13's
 * do not while they run; 3.11's top is the one saved at its last call of
 * Python code) gives its locals only, unless `whole`: then all
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
    /* (a generator's frame running, which saves no top (3.13+): its
     * whole frame, which lies in the generator -- the words past its top
     * are its own earlier pushes; the iterator of its `for` loop over the
     * generator it resumed, through C code on the free-threaded 3.13, is
     * on its value stack) */
    if (f->owner == PYU_OWNER_GENERATOR && !f->sp && !sm->indirect)
        whole = true;
    if (whole && (!f->sp || sm->indirect) && f->owner <= PYU_OWNER_GENERATOR &&
        (size = pyu_snap_frame_size(sm, f->code)) >
            PYU_OFF(&sm->s->off, fr_localsplus)) {
        size = (size - PYU_OFF(&sm->s->off, fr_localsplus)) / 8;
        want = size < HOLD_WORDS ? (size_t)size : HOLD_WORDS;
    }
    size_t n = 0, avail;
    const uint8_t *copy = pyu_snap_in_spans(t, at, 1, &avail);
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
bool pyu_resume_holds(pyu_sampler *sm, const pyu_sthread *t,
                      const pyu_frame_raw *f, uint64_t obj, bool whole)
{
    uint64_t words[HOLD_WORDS];
    size_t n = frame_words(sm, t, f, words, whole);
    for (size_t k = 0; k < n; k++)
        if ((words[k] & ~sm->s->off.tag_mask) == obj)
            return true;
    return false;
}

/* Whether a generator that frame f holds (a local or its stack; one
 * allocated near gen, as the generators of one pipeline are) has a frame
 * that holds gen, the generator object whose frame had yielded, directly
 * or through generators it holds in turn (all of them yielded too by the
 * second read, unless `whole`: f is then the frame of the data stack
 * below, f's whole frame is looked at, and they may be running): those
 * frames, as read now, into mid[], the outermost (the one f holds)
 * first, and how many (0: none). */
size_t pyu_resume_held_gen(pyu_sampler *sm, const pyu_sthread *t,
                           const pyu_frame_raw *f, uint64_t gen,
                           pyu_sframe mid[PYU_HELD_DEPTH], size_t depth,
                           bool whole)
{
    const pyu_offsets *o = &sm->s->off;
    uint64_t frame_off = PYU_HAS(o, gen_gi_iframe) ? PYU_OFF(o, gen_gi_iframe)
                                                   : sm->gen_off;
    uint64_t words[HOLD_WORDS];
    size_t n = depth < PYU_HELD_DEPTH && frame_off
                   ? frame_words(sm, t, f, words, whole && !depth)
                   : 0;
    for (size_t k = 0, tries = 0, reads = 0;
         k < n && tries < HELD_TRIES && reads < HELD_READS; k++) {
        uint64_t w = words[k] & ~o->tag_mask;
        if (w == gen || w + (1u << 20) < gen || w > gen + (1u << 20))
            continue;
        reads++;
        uint8_t buf[512];
        if (sm->fsize > sizeof buf ||
            pyu_read_quiet(sm->s, w + frame_off, buf, sm->fsize) < 0)
            continue;
        pyu_sframe *m = &mid[depth];
        memset(m, 0, sizeof *m);
        pyu_frame_raw_take(o, w + frame_off, buf, sm->fsize, &m->r);
        if (m->r.owner != PYU_OWNER_GENERATOR || (m->r.prev && !whole))
            continue; /* (not one that had yielded) */
        /* (only a generator's counts: the words near gen are as often
         * the other objects a frame made, its lists and floats) */
        tries++;
        m->r.prev = f->addr; /* (who resumed it) */
        if (pyu_resume_holds(sm, t, &m->r, gen, false))
            return depth + 1;
        size_t n =
            pyu_resume_held_gen(sm, t, &m->r, gen, mid, depth + 1, whole);
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
int pyu_resume_stack_on(pyu_sampler *sm, pyu_sthread *t, size_t u,
                        const pyu_sframe *mid, size_t via, size_t x)
{
    if (put_mid(sm, t, u, x, mid, via) < 0)
        return -1;
    memcpy(t->fr, t->fr1, u * sizeof *t->fr);
    return 0;
}

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

/* For the memo's slot k of the generator frame t->fr[i]: its resumer,
 * when that was a generator's frame resumed from C code (entry frames
 * only between it and the next frame of the data stack, its caller),
 * with that caller. */
static void learn_via(pyu_sthread *t, size_t i, size_t k)
{
    if (!t->gen_via &&
        !(t->gen_via = calloc(PYU_GEN_CALLERS, sizeof *t->gen_via)))
        return;
    struct pyu_gen_via *v = &t->gen_via[k];
    v->via.addr = 0;
    const pyu_frame_raw *m = &t->fr[i + 1].r;
    if (m->owner != PYU_OWNER_GENERATOR || !m->code)
        return;
    size_t j = i + 2;
    while (j < t->nfr && t->fr[j].r.owner >= PYU_OWNER_ENTRY)
        j++;
    if (j == i + 2 || j == t->nfr || t->fr[j].r.owner != PYU_OWNER_THREAD)
        return;
    v->via = *m;
    v->under = t->fr[j].r.addr;
    v->under_code = t->fr[j].r.code;
}

/* Remembers who resumed each generator frame of t's accepted stack. */
void pyu_resume_learn(pyu_sthread *t)
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
        learn_via(t, i, k);
    }
}

#define ENTRIES 2 /* entry frames a resumer's walk steps over */

/* The index of the first frame of t's walk from its frame i on that is
 * not an entry frame, past ENTRIES of them at most (the entry frame of a
 * call from C code). */
static size_t past_entries(const pyu_sthread *t, size_t i)
{
    size_t h = i;
    while (h < t->nfr && h < i + ENTRIES && t->fr[h].r.owner >= PYU_OWNER_ENTRY)
        h++;
    return h;
}

/* Whether the frame at addr (past ENTRIES entry frames at most), as t's
 * spans hold it or read now, holds gen (pyu_resume_holds()): resume_from()
 * asks before it walks from there, as most of the frames it is offered
 * hold nothing of the kind. */
static bool may_hold(pyu_sampler *sm, const pyu_sthread *t, uint64_t addr,
                     uint64_t gen, bool whole)
{
    uint8_t buf[PYU_BUF_FRAME];
    for (int k = 0; k <= ENTRIES && addr; k++) {
        if (sm->fsize > sizeof buf ||
            !pyu_snap_bytes(sm, t, addr, buf, sm->fsize))
            return false;
        pyu_frame_raw f;
        pyu_frame_raw_take(&sm->s->off, addr, buf, sm->fsize, &f);
        if (f.owner < PYU_OWNER_ENTRY)
            return pyu_resume_holds(sm, t, &f, gen, whole);
        addr = f.prev;
    }
    return false;
}

/* The outermost of the walk fr's n frames that lies on the data stack
 * (not a generator's, not an entry frame), or NULL. */
static const pyu_frame_raw *lowest_on_stack(const pyu_sframe *fr, size_t n)
{
    const pyu_frame_raw *low = NULL;
    for (size_t i = 0; i < n; i++)
        if (fr[i].r.owner == PYU_OWNER_THREAD)
            low = &fr[i].r;
    return low;
}

/* Whether the frame f of the data stack can have resumed the generator
 * that ends the walk fr (n frames) at the thread state's moment: the
 * frame right after f on the data stack (f's code object's size on) is
 * the walk's outermost frame there, or the top when the walk has none (on
 * 3.11, whose walk may be of a moment later, the top too).  A generator's
 * resumer was the innermost frame when it resumed it, so a frame of the
 * data stack above it is one of the generator's own callees.  A frame of
 * the last stack (or of a later walk) whose place holds another call now
 * is not: pstdev in count_diff's slot, holding the generator it passed to
 * _ss, which resumes it (`pstdev -> values` in 0.5-1.4 % of the samples
 * of workloads.py stdlib before this, on every version).  True when it
 * cannot be told. */
bool pyu_resume_right_under(pyu_sampler *sm, const pyu_sthread *t,
                            const pyu_tstate *ts, const pyu_frame_raw *f,
                            const pyu_sframe *fr, size_t n)
{
    if (!pyu_snap_in_top_chunk(t, ts, f))
        return true;
    const pyu_frame_raw *low = lowest_on_stack(fr, n);
    uint64_t next = low ? low->addr : ts->ds_top,
             size = pyu_snap_frame_size(sm, f->code);
    if (!size || (low && !pyu_snap_in_top_chunk(t, ts, low)))
        return true;
    return f->addr + size == next ||
           (sm->indirect && f->addr + size == ts->ds_top);
}

/* Goes on with t's walk (n0 frames, the last a generator's frame that had
 * yielded) from the frame at addr, when that frame, as copied, holds the
 * generator gen (gen 0: one that ended, held by nothing) and can have
 * resumed it (pyu_resume_right_under()).  1 when it does, 0 when not (the
 * walk as it was), -1 on an error. */
static int resume_from(pyu_sampler *sm, pyu_sthread *t, const pyu_tstate *ts,
                       uint64_t addr, uint64_t gen, size_t n0, bool spans,
                       bool whole, unsigned *budget)
{
    if (*budget == 0 || pyu_spent(sm))
        return 0;
    --*budget;
    for (size_t i = 0; i < n0; i++)
        if (t->fr[i].r.addr == addr)
            return 0; /* (a frame of the walk already) */
    if (gen && !may_hold(sm, t, addr, gen, whole))
        return 0; /* (told before the walk, in a read or two) */
    if (pyu_snap_walk_on(sm, t, ts, addr, spans) < 0)
        return -1;
    size_t h = past_entries(t, n0);
    if (h < t->nfr && t->fr[h].r.owner < PYU_OWNER_ENTRY &&
        (!gen || pyu_resume_holds(sm, t, &t->fr[h].r, gen, whole)) &&
        pyu_resume_right_under(sm, t, ts, &t->fr[h].r, t->fr, n0))
        return 1;
    t->nfr = n0;
    t->end = PYU_CHAIN_NULL;
    return 0;
}

/* The frame that resumed the generator frame at addr last time, as t's
 * memo has it, or 0. */
static uint64_t memo_of(const pyu_sthread *t, uint64_t addr)
{
    size_t at = caller_slot(addr);
    return t->gen_memo && t->gen_memo[2 * at] == addr ? t->gen_memo[2 * at + 1]
                                                      : 0;
}

/* The same as resume_ended() below, when the generator that resumed the
 * one that ended (m, by the memo) was resumed from C code that x called,
 * and has ended by its copy too (or was freed): a generator expression
 * over the generator, summed, whose loop ended with it (difflib's
 * unified_diff, whose end frees its SequenceMatcher while its frame is
 * still the current one: 3.15's count_diff -> <genexpr> -> unified_diff
 * lost its <genexpr> in half of unified_diff's samples).  That generator
 * was running at the thread state's moment, in the frame the memo took:
 * it goes between, then the walk goes on from x.  1, 0 or -1 as
 * resume_from(). */
static int via_ended(pyu_sampler *sm, pyu_sthread *t, const pyu_tstate *ts,
                     uint64_t x, uint64_t m, size_t n0, bool spans,
                     unsigned *budget)
{
    size_t k = caller_slot(t->fr[n0 - 1].r.addr);
    const struct pyu_gen_via *v = t->gen_via ? &t->gen_via[k] : NULL;
    if (!v || v->via.addr != m || v->under != x)
        return 0;
    uint8_t buf[PYU_BUF_FRAME];
    pyu_frame_raw f;
    if (sm->fsize > sizeof buf || !pyu_snap_bytes(sm, t, m, buf, sm->fsize))
        return 0;
    pyu_frame_raw_take(&sm->s->off, m, buf, sm->fsize, &f);
    if (f.owner == PYU_OWNER_GENERATOR && f.code == v->via.code)
        return 0; /* (still there: walked from) */
    if (pyu_snap_make_room(sm, t, n0, 1) < 0)
        return -1;
    t->fr[n0].r = v->via;
    t->fr[n0].r.prev = x;
    int rc = resume_from(sm, t, ts, x, 0, n0 + 1, spans, false, budget);
    if (rc > 0 && t->fr[past_entries(t, n0 + 1)].r.code != v->under_code)
        rc = 0; /* (another call in x's place) */
    if (rc <= 0) {
        t->nfr = n0;
        t->end = PYU_CHAIN_NULL;
    }
    return rc;
}

/* Goes on with t's walk (n0 frames, the last a generator's frame that
 * ended by its copy, held by nothing any more) from the frame x below it
 * on the data stack -- through the generator that resumed it last time
 * when that one runs now, called from x (through C code): a generator
 * expression over a generator, whose loop ends with it, is still in the
 * frame where it resumed the one that ended.  1, 0 or -1 as
 * resume_from(). */
static int resume_ended(pyu_sampler *sm, pyu_sthread *t, const pyu_tstate *ts,
                        uint64_t x, size_t n0, bool spans, unsigned *budget)
{
    uint64_t m = memo_of(t, t->fr[n0 - 1].r.addr);
    int rc = m && m != x ? via_ended(sm, t, ts, x, m, n0, spans, budget) : 0;
    if (rc)
        return rc;
    rc = m && m != x ? resume_from(sm, t, ts, m, 0, n0, spans, false,
                                   budget)
                     : 0;
    if (rc < 0)
        return -1;
    if (rc) {
        /* (the resumer, and the generators that resumed it in turn, called
         * from x: `count_diff -> <genexpr> -> unified_diff ->
         * get_grouped_opcodes`) */
        size_t h = n0;
        while (h < t->nfr && t->fr[h].r.owner != PYU_OWNER_THREAD)
            h++;
        if (t->fr[n0].r.owner == PYU_OWNER_GENERATOR && h < t->nfr &&
            t->fr[h].r.addr == x)
            return 1;
        t->nfr = n0;
        t->end = PYU_CHAIN_NULL;
    }
    return resume_from(sm, t, ts, x, 0, n0, spans, false, budget);
}

/* How resume_under() looks for the generator in the frame below: in its
 * locals; through the generators its whole frame holds; in its whole
 * frame; not at all (a generator that ended by its copy: see
 * pyu_resume_walk()). */
enum { UNDER_LOCALS, UNDER_VIA, UNDER_WHOLE, UNDER_ENDED };

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
    const pyu_frame_raw *low = lowest_on_stack(t->fr, n0);
    uint64_t x = pyu_snap_frame_under(sm, t, ts, low ? low->addr : 0);
    if (!x)
        return 0;
    if (how == UNDER_ENDED)
        return resume_ended(sm, t, ts, x, n0, spans, budget);
    if (how != UNDER_VIA)
        return resume_from(sm, t, ts, x, gen, n0, spans, how == UNDER_WHOLE,
                           budget);
    if (*budget == 0 || pyu_spent(sm))
        return 0;
    --*budget;
    if (pyu_snap_walk_on(sm, t, ts, x, spans) < 0)
        return -1;
    pyu_sframe mid[PYU_HELD_DEPTH];
    size_t n =
        t->nfr > n0 && t->fr[n0].r.addr == x
            ? pyu_resume_held_gen(sm, t, &t->fr[n0].r, gen, mid, 0, true)
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
int pyu_resume_walk(pyu_sampler *sm, pyu_sthread *t, const pyu_tstate *ts,
                    bool spans)
{
    const pyu_fcache *c = &t->cache;
    unsigned budget = GEN_WALKS;
    for (int k = 0; k < PYU_GEN_DEPTH && t->end == PYU_CHAIN_NULL && t->nfr;
         k++) {
        const pyu_frame_raw g = t->fr[t->nfr - 1].r;
        size_t n0 = t->nfr;
        if (g.owner != PYU_OWNER_GENERATOR || g.prev)
            return 0;
        uint64_t gen = pyu_resume_gen_object(sm, g.addr);
        if (!gen)
            return 0;
        uint64_t memo = memo_of(t, g.addr);
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
        /* (a generator that ended by its copy -- its frame cleared (3.14+)
         * or standing at its return (3.13: its previous cleared), the
         * generator freed -- is held by no frame any more: it was running
         * when the thread state was read, resumed from the frame below it
         * on the data stack then or from a generator that frame resumed;
         * it is put on that frame, through the generator that resumed it
         * last time when that one is running, called from there) */
        if (rc == 0 && (t->fr[n0 - 1].popped ||
                        pyu_accept_returning(sm, &t->fr[n0 - 1].r)))
            rc = resume_under(sm, t, ts, gen, n0, spans, UNDER_ENDED,
                              &budget);
        if (rc <= 0)
            return rc;
        sm->st.resumed++;
    }
    return 0;
}
