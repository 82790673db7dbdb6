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
 *   - every frame below the innermost is running: its eval loop set its
 *     running mark (3.9's f_executing, 1; 3.10's f_state, FRAME_EXECUTING
 *     or FRAME_UNWINDING while it handles an exception) when it started
 *     and clears it before it returns, before the thread state moves to
 *     its caller.  A frame that returned by its copy is not, and neither
 *     is a generator's frame that yielded (3.10: FRAME_SUSPENDED), or a
 *     frame object on a free list.  The innermost frame may be between
 *     the thread state's move and its mark, either way: it is taken as
 *     read (its caller, running, was the thread state's then);
 *   - the walk ends at NULL, the outermost frame's f_back (a frame met
 *     twice, or past the bound of a stack's depth, is a loop of reused
 *     objects);
 *   - each frame's f_code is a code object and its f_lasti lies in it
 *     (the frame cache's commit, frame_cache.c).
 *
 * A frame returned and its object taken by a new call, running again,
 * between the thread state's read and its copy, passes the first rule:
 * the walk then goes on through the new call's caller.  It needs the
 * thread to return from the frame and its caller and call again within
 * the microseconds between the two, and the new call to take that very
 * object; bench/impossible-run measures what passes.
 *
 * A walk that does not pass is made again from a fresh snapshot of the
 * thread alone (sampler.c), up to OBJ_RETRIES times: read from another
 * CPU than the target's, a third of the samples of a churny recursion
 * (3.9) needed one or more, and 10 % failed with 2.
 */
#include "sampling.h"

#include <string.h>

typedef struct obj_walk {
    pyu_sampler *sm;
    pyu_sthread *t;
    bool stale; /* met a frame below the innermost that was not running */
} obj_walk;

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

static int on_object(void *arg, const pyu_frame_raw *f, const uint8_t *buf,
                     size_t avail)
{
    obj_walk *w = arg;
    pyu_sthread *t = w->t;
    (void)avail;
    if (t->nfr && !pyu_objects_running(&w->sm->s->off, buf, w->sm->fsize)) {
        w->stale = true;
        return 1;
    }
    if (t->nfr == t->frcap &&
        !pyu_grow((void **)&t->fr, t->nfr, &t->frcap, sizeof *t->fr))
        return -1;
    pyu_sframe *sf = &t->fr[t->nfr++];
    memset(sf, 0, sizeof *sf);
    sf->r = *f;
    return 0;
}

int pyu_objects_walk(pyu_sampler *sm, pyu_sthread *t, const pyu_tstate *ts,
                     bool spans)
{
    pyu_chain_it it = {.first = ts->current_frame,
                       .span = spans ? t->span : NULL,
                       .nspan = spans ? t->nspan : 0,
                       .quiet = true};
    obj_walk w = {sm, t, false};
    t->nfr = t->npopped = 0;
    t->unplaced = t->reused = false;
    if (pyu_snap_chain(sm, t, &it, on_object, &w) < 0)
        return -1;
    bool ok = !w.stale && it.end == PYU_CHAIN_NULL && t->nfr > 0;
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
