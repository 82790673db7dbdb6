/* Frame objects: the stacks of CPython 3.9 and 3.10, whose frames are
 * PyFrameObjects on the heap, not frames of a data stack.
 *
 * A thread state names the thread's current frame object (`frame`), each
 * frame its caller (f_back).  A frame object lives while it runs: its
 * caller's frame cannot be freed before it, since it holds a reference
 * to it, and f_back and f_code never change while it lives.  When a
 * frame returns, its object is kept for the next call of the same code
 * (the code object's zombie frame) or put on a free list that any call
 * may take: the same address then holds another call, with another
 * caller.
 *
 * A sample reads the thread state and the ranges where the frames of the
 * thread's last stack lay (read_plan.c's spans, each frame object with
 * the frames close to it) in one read, and walks the chain from the
 * current frame in those copies, reading a frame alone where the copies
 * do not hold it.  The copies are not of one instant.  What the frames
 * say of themselves tells a torn walk:
 *
 *   - every frame below the innermost is alive (a reference count above
 *     0: one on a free list or kept for its code's next call has none)
 *     and running: its eval loop set its running mark (3.9's
 *     f_executing, 1; 3.10's f_state, FRAME_EXECUTING or FRAME_UNWINDING
 *     while it handles an exception) when it started and clears it
 *     before it returns, before the thread state moves to its caller.
 *     A frame that returned by its copy is not, and neither is a
 *     generator's frame that yielded (3.10: FRAME_SUSPENDED), or a frame
 *     object on a free list.  The innermost frame may be between the
 *     thread state's move and its mark, either way, or have returned
 *     since the thread state named it (its object kept, f_back still
 *     its caller's): it is taken as read, with its caller, but not as a
 *     stack of one frame that is not running, but for a generator's
 *     that yielded (alive, its f_gen set): a frame object on a free list
 *     has the list's link as its f_back, NULL at its end (`c2` alone, 3 %
 *     of the samples of workloads.py recurring on 3.9 before this rule).
 *     A generator's frame that yielded has no f_back: read from another
 *     CPU, the innermost generator of a pipeline is often met so, and
 *     taken alone (its share kept; its callers, which resumed it, not
 *     known: an open question, bench/README.md);
 *   - the walk ends at NULL, the outermost frame's f_back (a frame met
 *     twice, or past the bound of a stack's depth, is a loop of reused
 *     objects);
 *   - each frame's f_code is a code object and its f_lasti lies in it
 *     (the frame cache's commit, frame_cache.c).
 *
 * A frame returned and its object taken by a new call, running again,
 * between the thread state's read and its copy, passes the first rule:
 * the walk then goes on through the new call's caller.  So does a walk
 * torn between the copies of two spans, which are read one after the
 * other: a frame copied, then its caller's object reused by another call
 * before its own copy (d1's frame object taken for c1's call: `c1 ->
 * d2`).  Every span is therefore read again, in the other order
 * (read_plan.c), and the two copies must show the same chain
 * (same_again()).  What it cannot always tell: a caller copied after
 * the frames above it returned, at its next call by then (its line is
 * that call's, `recurring:306 -> c1`, while the frames above it are
 * right).
 *
 * Two copies alike are not proof either.  Read from another CPU, a copy
 * of a thread's frames takes longer than a turn of a churny loop, whose
 * frame objects hold the same things again each turn: a frame copied in
 * one turn and its caller in the next looked the same twice (on a
 * loaded machine the sampler leaves the target's CPU, and 4.5 to 19 in
 * 1,000 samples of workloads.py recurring on 3.9 were impossible).  So a
 * link the second copy does not vouch for (a frame that changed between
 * the copies, one copied once, an innermost frame that had returned:
 * idle_called()) must not be one its caller cannot have made: the
 * caller's code calls the frame's name somewhere, yet no such call can
 * have run before the instruction the caller stands at, in one run of
 * it (`d1 -> d2` with d1 at its call of d1, or before its `if`;
 * accept.c, pyu_accept_uncalled(), over the bytecode's calls by name
 * and its jumps, call_sites.c).  A caller that does not call the name
 * (C code calls back, a decorator's wrapper) is not judged so.
 * bench/impossible-run measures what passes (`WORKLOAD=recurring`, whose
 * frame objects change functions all the time; `LINES=1` counts a
 * caller at another line than its call too).
 *
 * These rules refuse true stacks too, and a stack refused is read again
 * a moment later, where longer calls are likelier: the short ones lose
 * their share.  A caller copied after its callee returned, and after it
 * returned itself (not running: the first rule) or was called again,
 * back in its loop, before the call (`score -> weight` with score at its
 * first line: weight, called once at score's end, lasts 0.1 us; 3.10's
 * `calls` from another CPU gave weight 0.004 of the samples against
 * 0.028); a callback of C code that returned between the copies, whose
 * caller does not name it (`sorted()`'s `__lt__`).  What the rules ask
 * is whether the caller's frame object ran the code it shows when its
 * callee was called.  A code's frame object that returned is kept for
 * the code's next call (its zombie frame), with its f_back; it goes to
 * the free list, where any call takes it, only when the code already
 * has one kept (a recursion, or two threads in it at once).  So a frame
 * object that the thread's passed walks have met running one code
 * PYU_OBJ_BOUND times in a row, and never another (PYU_OBJ_REBOUND
 * times once it was seen with two: a free list's objects hold one code
 * many times in a row by chance), is that code's own (bound()): it ran
 * that code then too.  Such a caller needs no word of its code for a
 * changed link, is not judged by calls by name, and is taken when it had
 * returned (kept, not running, its f_back set: the walk goes on to its
 * caller, which must pass the rules in turn; a free list's link leads
 * to an object that is not running, and ends at NULL).  Its copy is of
 * a later moment: it is put back at its code's call of its callee's name
 * when there is one only (placed()).  A churny loop's frame objects,
 * which hold other codes from one sample to the next (`recurring`), are
 * judged as before.
 *
 * A walk that does not pass is made again from a fresh snapshot of the
 * thread alone (sampler.c), which reads where that walk found its frames,
 * up to OBJ_RETRIES times: read from another CPU than the target's, a
 * third of the samples of a churny recursion (3.9) needed one or more,
 * and 10 % failed with 2.
 */
#include "sampling.h"

#include <stdlib.h>
#include <string.h>

typedef struct obj_walk {
    pyu_sampler *sm;
    pyu_sthread *t;
    bool spans; /* the walk is in the spans, which hold second copies */
    bool stale; /* met a frame the rules above do not take */
    bool idle;  /* the innermost frame's copy had returned */
} obj_walk;

/* The second copy of the fsize bytes whose first copy is at buf in t's
 * spans (read_plan.c reads each span of frame objects twice), or NULL. */
static const uint8_t *second(const pyu_sthread *t, const uint8_t *buf,
                             size_t fsize)
{
    for (size_t k = 0; k < t->nearly; k++) {
        const pyu_chunk_span *a = &t->span[k];
        size_t len = (size_t)(a->end - a->start);
        if (buf >= a->local && buf < a->local + len &&
            (size_t)(buf - a->local) + fsize <= len)
            return t->span2[k].local + (buf - a->local);
    }
    return NULL;
}

bool pyu_objects_running(const pyu_offsets *o, const uint8_t *buf,
                         size_t fsize)
{
    if (!PYU_HAS(o, fr_state))
        return true;
    int8_t v = (int8_t)pyu_u8(buf, fsize, PYU_OFF(o, fr_state));
    switch (o->frame_state_kind) {
    case PYU_STATE_EXECUTING:
        return v == 1;
    case PYU_STATE_310:
        return v == 0 || v == 2;
    default:
        return true;
    }
}

/* Whether the frame object copied in buf is alive: a reference count
 * above 0 (the object's first word before its type).  One on a free list
 * or kept as its code's zombie frame has none. */
static bool alive(const pyu_offsets *o, const uint8_t *buf, size_t fsize)
{
    size_t at = PYU_OFF(o, ob_type);
    return at < 8 || pyu_u64(buf, fsize, at - 8) != 0;
}

/* Whether the frame object copied in buf, not running, is a generator's
 * that yielded: alive, and its f_gen set.  A frame object on a free list,
 * or taken from it by a call that has not set its fields yet, has none. */
static bool yielded(const pyu_offsets *o, const uint8_t *buf, size_t fsize)
{
    return alive(o, buf, fsize) && PYU_HAS(o, fr_gen) &&
           pyu_u64(buf, fsize, PYU_OFF(o, fr_gen)) != 0;
}

/* Whether caller c's frame object is its code's own (above): met running
 * it in the last PYU_OBJ_BOUND passed walks that met it (PYU_OBJ_REBOUND
 * once met running another). */
static bool bound(const pyu_sthread *t, const pyu_frame_raw *c)
{
    const struct pyu_obj_bind *b =
        t->binds ? &t->binds[pyu_slot(c->addr, PYU_OBJ_BINDS)] : NULL;
    return b && b->addr == c->addr && b->code == c->code &&
           b->runs >= (b->moves ? PYU_OBJ_REBOUND : PYU_OBJ_BOUND);
}

static int on_object(void *arg, const pyu_frame_raw *f, const uint8_t *buf,
                     size_t avail)
{
    obj_walk *w = arg;
    pyu_sthread *t = w->t;
    const pyu_offsets *o = &w->sm->s->off;
    (void)avail;
    size_t fsize = w->sm->fsize;
    bool running = pyu_objects_running(o, buf, fsize),
         dead = !alive(o, buf, fsize);
    /* (a caller that returned since, its code's own frame object: kept for
     * its next call with its caller, f_back, still; see above) */
    bool left = t->nfr && dead && f->prev && bound(t, f);
    if (t->nfr ? (!running || dead) && !left
               : !running && !f->prev && !yielded(o, buf, fsize)) {
        w->stale = true;
        return 1;
    }
    w->idle |= !t->nfr && !running && dead;
    if (t->nfr == t->frcap &&
        !pyu_grow((void **)&t->fr, t->nfr, &t->frcap, sizeof *t->fr))
        return -1;
    pyu_sframe *sf = &t->fr[t->nfr++];
    memset(sf, 0, sizeof *sf);
    sf->r = *f;
    sf->dead = dead;
    sf->gen = PYU_HAS(o, fr_gen) && pyu_u64(buf, fsize, PYU_OFF(o, fr_gen));
    /* (its second copy, when the spans held it: code 0 when that copy
     * is of no frame of this chain any more) */
    const uint8_t *b2 = w->spans ? second(t, buf, fsize) : NULL;
    if (b2) {
        sf->twice = true;
        pyu_frame_raw_take(o, f->addr, b2, fsize, &sf->r2);
        if (!alive(o, b2, fsize) ||
            (t->nfr > 1 && !pyu_objects_running(o, b2, fsize)))
            sf->r2.code = 0;
    }
    return 0;
}

/* Whether caller c cannot have called e by the time its copy stands at
 * (accept.c), and its frame object is not its code's own. */
static bool uncalled(pyu_sampler *sm, const pyu_sthread *t,
                     const pyu_frame_raw *c, const pyu_sframe *e)
{
    return pyu_accept_uncalled(sm, c, e) && !bound(t, c);
}

/* Notes the code each frame object of t's passed walk runs. */
static void learn_binds(pyu_sthread *t)
{
    if (!t->binds && !(t->binds = calloc(PYU_OBJ_BINDS, sizeof *t->binds)))
        return; /* (no memo: every caller is judged) */
    for (size_t i = 0; i < t->nfr; i++) {
        const pyu_frame_raw *f = &t->fr[i].r;
        struct pyu_obj_bind *b = &t->binds[pyu_slot(f->addr, PYU_OBJ_BINDS)];
        if (b->addr != f->addr)
            *b = (struct pyu_obj_bind){f->addr, f->code, 1, 0};
        else if (b->code != f->code)
            *b = (struct pyu_obj_bind){f->addr, f->code, 1,
                                       b->moves + (b->moves < UINT32_MAX)};
        else if (b->runs < UINT32_MAX)
            b->runs++;
    }
}

/* Whether frame e's second copy is of the frame its first copy is. */
static bool again(const pyu_sframe *e)
{
    return e->r2.code && e->r2.code == e->r.code && e->r2.prev == e->r.prev;
}

/* Whether the second copy of the chain t walked shows the same frames.
 * The first copy of each frame was read innermost first, the second
 * outermost first; the target ran meanwhile, so the innermost frames may
 * have changed by the second: returned (short calls do), yielded, or
 * called again from the same caller into the same frame object.  The
 * frames below those are the same in both copies, alive, running the
 * same code under the same caller.  Each link from a frame that changed
 * down to its caller must have evidence: the caller's code names the
 * callee (a call by name), or it stands at an instruction that resumes a
 * generator or runs a getter (accept.c).  A callback of C code (sorted()'s
 * key, a rich comparison) has none: read from another CPU, a sample of
 * one that changed between the copies is read again (a bias toward the
 * longer callbacks, bench/README.md).  A walk torn by the
 * target running between the reads of the first copy (d1's frame object
 * taken for c1's call between the copies of a frame and of its caller:
 * `c1 -> d2`) is not torn alike the other way round, and c1 does not
 * name d2. */
static bool same_again(pyu_sampler *sm, const pyu_sthread *t)
{
    size_t same = t->nfr; /* (the frames from here down are the same) */
    while (same > 0 && (!t->fr[same - 1].twice || again(&t->fr[same - 1])))
        same--;
    if (same == t->nfr)
        return !same; /* (every frame changed: read again) */
    for (size_t i = 0; i < same; i++)
        if ((!pyu_accept_vouched(sm, &t->fr[i + 1].r, &t->fr[i]) &&
             !bound(t, &t->fr[i + 1].r)) ||
            uncalled(sm, t, &t->fr[i + 1].r, &t->fr[i]))
            return false;
    /* (a frame copied once, or its caller: no second copy vouches for
     * the link) */
    for (size_t i = same; i + 1 < t->nfr; i++)
        if ((!t->fr[i].twice || !t->fr[i + 1].twice) &&
            uncalled(sm, t, &t->fr[i + 1].r, &t->fr[i]))
            return false;
    return true;
}

/* The callers of t's passed walk copied after the frame above them had
 * returned (the innermost, or a caller kept as its code's own frame
 * object) stand at a later moment than the walk's: each is put back at
 * its code's call of that frame's name, when it has one only. */
static void placed(pyu_sampler *sm, pyu_sthread *t)
{
    for (size_t i = 0; i + 1 < t->nfr; i++) {
        if (!t->fr[i].dead)
            continue;
        pyu_frame_raw *c = &t->fr[i + 1].r;
        uint32_t at = pyu_accept_call_of(sm, c, &t->fr[i]);
        if (at != PYU_INSTR_UNKNOWN)
            c->instr_ptr = c->ip = c->code + 2 * (uint64_t)at;
    }
}

/* Whether the innermost frame, whose copy had returned (no reference
 * left: its code's zombie frame, or on the free list), has evidence of
 * its caller: its f_back is the last caller it had, maybe of a later
 * call than the one the thread state named.  The caller's code must name
 * it, and the caller may have made that call (accept.c). */
static bool idle_called(pyu_sampler *sm, const pyu_sthread *t)
{
    return !uncalled(sm, t, &t->fr[1].r, &t->fr[0]);
}

int pyu_objects_walk(pyu_sampler *sm, pyu_sthread *t, const pyu_tstate *ts,
                     bool spans)
{
    pyu_chain_it it = {.first = ts->current_frame,
                       .span = spans ? t->span : NULL,
                       .nspan = spans ? t->nspan : 0,
                       .quiet = true};
    obj_walk w = {sm, t, spans, false, false};
    t->nfr = t->npopped = 0;
    t->unplaced = t->reused = false;
    if (pyu_snap_chain(sm, t, &it, on_object, &w) < 0)
        return -1;
    bool ok = !w.stale && it.end == PYU_CHAIN_NULL && t->nfr > 0 &&
              same_again(sm, t) &&
              (!w.idle || t->nfr < 2 || idle_called(sm, t));
    if (ok) {
        learn_binds(t);
        placed(sm, t);
    }
    /* (the frames met, the innermost last: first in the list) */
    for (size_t i = t->nfr; ok && i-- > 0;) {
        uint64_t a = t->fr[i].r.addr;
        size_t k = 0;
        while (k < PYU_OBJ_RECENT - 1 && t->objs[k] && t->objs[k] != a)
            k++;
        memmove(t->objs + 1, t->objs, k * sizeof *t->objs);
        t->objs[0] = a;
    }
    return ok;
}
