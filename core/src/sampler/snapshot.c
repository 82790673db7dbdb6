/* A thread's chain walked in the copies one snapshot made of it.
 *
 * The read plan (read_plan.c) brings each thread's state with the memory
 * where its frames lay last time (its spans; on 3.15, for a thread whose
 * anchor proved its stack, a window of its data stack).  This file walks
 * a chain in those copies, each frame as copied (with the words at its
 * saved stack top, and its second copy where the innermost spans were
 * read twice), marks the frames popped between the thread state's read
 * and their copy, and tells the data stack of the thread state's moment:
 * which frame lay right below a frame there, stepped up to code object by
 * code object from the chunk's first frame.  What a walk is worth is for
 * the acceptance rules (accept.c); the links a walk cannot follow are
 * made again by resume.c and links.c.
 *
 * The current frame's slot reused.  The thread state names the current
 * frame at one moment; its copy, a microsecond later, may be of another
 * call made in the same slot since (the callee of the same caller, or of
 * a generator the caller resumed: their frames are pushed where the data
 * stack ends), still running or itself over (its instruction pointer then
 * names its own code, not the one of the thread state's moment).  The
 * thread state of that moment tells: its data stack ended right past the
 * current frame, which took its code object's size there.  A copy whose
 * code object takes more, or less by less than a frame's fixed fields (a
 * call being made or ending leaves the callee's frame above the current
 * one), is another call's, and so are its links.  Such a stack is the
 * frames of the data stack below that slot at that moment (stepped up to
 * from the chunk's first frame), with the innermost frames of a stack met
 * lately in the same slot, of the same size, above a frame running the
 * same code: chosen among those as often as each was met (its line is
 * that stack's), so that the calls made there keep their shares; with
 * <unknown> on top when none was met.  Leaving the frame to the caller,
 * or reading again, gives the caller (or whatever runs a moment later)
 * the share of every short call made there.
 */
#include "sampling.h"

#include <stdlib.h>
#include <string.h>

#define SINGLES 3 /* frames outside the spans read one by one before the
                     chunks are copied */

/* ----------------------------------------------------- walks in copies */

typedef struct walk_ctx {
    pyu_sampler *sm;
    pyu_sthread *t;
    const pyu_tstate *ts; /* the thread state of the walk's moment, when
                             the walk starts at its current frame */
    bool spans; /* the walk is in the spans read with its thread state */
} walk_ctx;

/* Whether the frame f, copied with code object c, is another call than
 * the current frame the thread state ts named at its address (see
 * above). */
static bool other_call(const pyu_sampler *sm, const pyu_tstate *ts,
                       const pyu_frame_raw *f, const pyu_code *c)
{
    if (!ts || !c || !c->framesize ||
        f->owner != PYU_OWNER_THREAD || f->addr != ts->current_frame ||
        ts->ds_top <= f->addr || ts->ds_top - f->addr >= (1u << 20))
        return false;
    uint64_t took = ts->ds_top - f->addr;
    return took < c->framesize ||
           (took > c->framesize &&
            took - c->framesize <
                (uint64_t)PYU_OFF(&sm->s->off, fr_localsplus));
}

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
    bool popped = t->nfr == t->npopped && pyu_frame_popped(w->sm->s, f);
    const pyu_code *c =
        popped ? pyu_code_at_instr(w->sm->s, f->instr_ptr) : NULL;
    if (!t->nfr && w->ts &&
        other_call(w->sm, w->ts, f,
                   popped ? c : pyu_code_cached(w->sm->s, f->code))) {
        t->reused = true;
        t->reused_code = popped ? c->addr : f->code;
        return 1; /* (its links are the other call's) */
    }
    if (popped) {
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
    sf->popped = is_popped;
    pyu_snap_evidence(w->sm, t, sf, buf, avail, w->spans && !is_popped);
    return 0;
}

/* sf's second copy, from b2 (avail2 bytes of it). */
static void second_copy(const pyu_sampler *sm, pyu_sframe *sf,
                        const uint8_t *b2, size_t avail2)
{
    pyu_frame_raw_take(&sm->s->off, sf->r.addr, b2, sm->fsize, &sf->r2);
    sf->nslot2 = pyu_sframe_slots(sf->r.addr, sf->r2.sp, b2, avail2,
                                  sf->slot2);
    sf->ret2 = pyu_sframe_ret(sm, b2);
    sf->twice = true;
}

void pyu_snap_evidence(const pyu_sampler *sm, const pyu_sthread *t,
                       pyu_sframe *sf, const uint8_t *buf, size_t avail,
                       bool second)
{
    uint64_t addr = sf->r.addr;
    sf->nslot = pyu_sframe_slots(addr, sf->r.sp, buf, avail, sf->slot);
    sf->ret = pyu_sframe_ret(sm, buf);
    sf->twice = false;
    if (!second)
        return;
    if (t->win_read && t->win2 && buf >= t->win &&
        buf < t->win + t->win_len) { /* (the anchor's window) */
        size_t off = (size_t)(buf - t->win);
        second_copy(sm, sf, t->win2 + off, t->win_len - off);
        return;
    }
    for (size_t k = 0; k < t->nearly; k++) {
        const pyu_chunk_span *a = &t->span[k], *b = &t->span2[k];
        if (buf < a->local || buf >= a->local + (a->end - a->start))
            continue;
        size_t off = (size_t)(buf - a->local);
        second_copy(sm, sf, b->local + off,
                    (size_t)(b->end - b->start) - off);
        break;
    }
}

/* Walks t's chain from `first`, in its spans when they were read with ts,
 * after the frames t holds.  0, or -1 on an error that ends the sample. */
int pyu_snap_walk_on(pyu_sampler *sm, pyu_sthread *t, const pyu_tstate *ts,
                     uint64_t first, bool spans)
{
    pyu_chain_it it = {.first = first, .base = ts->base_frame,
                       .span = spans ? t->span : NULL,
                       .nspan = spans ? t->nspan : 0, .chunk = ts->chunk,
                       .singles = SINGLES, .quiet = true};
    walk_ctx w = {sm, t, t->nfr || first != ts->current_frame ? NULL : ts,
                  spans};
    return pyu_snap_chain(sm, t, &it, on_frame, &w);
}

int pyu_snap_chain(pyu_sampler *sm, pyu_sthread *t, pyu_chain_it *it,
                   int (*fn)(void *arg, const pyu_frame_raw *f,
                             const uint8_t *buf, size_t avail),
                   void *arg)
{
    if (pyu_chain_each(sm->s, it, fn, arg) < 0) {
        if (!sm->s->err.code)
            pyu_fail(&sm->s->err, PYU_E_NOMEM, "out of memory");
        return -1;
    }
    t->end = it->end;
    t->outside = it->outside;
    sm->st.frames_read += it->n;
    return 0;
}

/* The same, from no frames. */
int pyu_snap_walk(pyu_sampler *sm, pyu_sthread *t, const pyu_tstate *ts,
                  uint64_t first, bool spans)
{
    t->nfr = t->npopped = 0;
    t->unplaced = t->reused = false;
    return pyu_snap_walk_on(sm, t, ts, first, spans);
}

/* Where t's spans hold len bytes at addr: their copy, with how many bytes
 * of it follow addr; NULL when none does. */
const uint8_t *pyu_snap_in_spans(const pyu_sthread *t, uint64_t addr,
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

/* Swaps t's walk with the one kept aside (t->fr1). */
void pyu_snap_swap_walks(pyu_sthread *t)
{
    pyu_sframe *x = t->fr1;
    size_t xn = t->nfr1, xc = t->fr1cap;
    t->fr1 = t->fr, t->nfr1 = t->nfr, t->fr1cap = t->frcap;
    t->fr = x, t->nfr = xn, t->frcap = xc;
}

/* Counts a stack taken from a walk that met popped frames. */
void pyu_snap_note_popped(pyu_sampler *sm, const pyu_sthread *t)
{
    if (t->npopped || t->unplaced)
        sm->st.popped++;
    if (t->unplaced)
        sm->st.popped_left++;
}

/* Leaves out t's n innermost frames, popped ones whose callers, as
 * copied, cannot have called them any more: the stack is the callers',
 * as copied.  Returns the frames left. */
long pyu_snap_drop_popped(pyu_sthread *t, size_t n)
{
    t->unplaced = true;
    memmove(t->fr, t->fr + n, (t->nfr - n) * sizeof *t->fr);
    t->nfr -= n;
    t->npopped -= n;
    return (long)t->nfr;
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
bool pyu_snap_bytes(pyu_sampler *sm, const pyu_sthread *t, uint64_t addr,
                    void *buf, size_t n)
{
    size_t avail;
    const uint8_t *copy = pyu_snap_in_spans(t, addr, n, &avail);
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
bool pyu_snap_in_top_chunk(const pyu_sthread *t, const pyu_tstate *ts,
                           const pyu_frame_raw *f)
{
    return f->owner == PYU_OWNER_THREAD && top_chunk(t, ts) &&
           f->addr > ts->chunk && f->addr < t->chunk_end;
}

/* The bytes the code object code's frames take on the data stack, or 0. */
uint64_t pyu_snap_frame_size(pyu_sampler *sm, uint64_t code)
{
    bool is_code;
    const pyu_code *c = pyu_code_get(sm->s, code, &is_code);
    return c ? c->framesize : 0;
}

#define UNDER_STEPS 256 /* frames of a chunk stepped over at most */

/* The frame of the data stack right below the frame at addr (the top, when
 * addr is 0) in the chunk t's thread state ts had, or 0 when it cannot be
 * told (addr is the chunk's first frame, or not one of its frames). */
uint64_t pyu_snap_frame_under(pyu_sampler *sm, pyu_sthread *t,
                              const pyu_tstate *ts, uint64_t addr)
{
    const pyu_offsets *o = &sm->s->off;
    pyu_plan_note_chunk(sm, t, ts->chunk);
    uint64_t end = addr ? addr : ts->ds_top, prev;
    if (!top_chunk(t, ts) || end > ts->ds_top ||
        !pyu_snap_bytes(sm, t, ts->chunk, &prev, 8))
        return 0;
    /* (_PyStackChunk {previous, size, top, data[]}: the first chunk of a
     * thread leaves its first word unused) */
    uint64_t f = ts->chunk + 24 + (prev ? 0 : 8), below = 0,
             off = PYU_OFF(o, fr_executable);
    for (int k = 0; k < UNDER_STEPS && f < end; k++) {
        uint64_t code, size;
        if (!pyu_snap_bytes(sm, t, f + off, &code, 8) ||
            !(size = pyu_snap_frame_size(sm, code & ~o->tag_mask)))
            return 0;
        below = f;
        f += size;
    }
    return f == end ? below : 0;
}

/* ------------------------------------------ calls met in their slots */

static bool same_call(const struct pyu_slot_call *x, const pyu_sframe *fr,
                      size_t n, uint64_t caller_code)
{
    if (x->n != n || x->caller_code != caller_code ||
        x->r[0].addr != fr[0].r.addr)
        return false;
    for (size_t k = 0; k < n; k++)
        if (x->r[k].code != fr[k].r.code || x->r[k].owner != fr[k].r.owner)
            return false;
    return true;
}

void pyu_snap_learn_slots(pyu_sampler *sm, pyu_sthread *t)
{
    if (t->nfr < 2)
        return;
    if (!t->slots &&
        !(t->slots = calloc(PYU_SLOT_CALLS, sizeof *t->slots)))
        return; /* (nothing remembered: such stacks get <unknown>) */
    for (size_t i = 0; i + 1 < t->nfr; i++) {
        const pyu_sframe *f = &t->fr[i];
        /* (every call of the innermost frames; deeper, a call with frames
         * between it and the next frame of the data stack -- made from C
         * code, or by a generator -- which pyu_links_from_below() wants) */
        if (f->popped || f->r.owner != PYU_OWNER_THREAD ||
            (i >= PYU_PLAN_EARLY && t->fr[i + 1].r.owner == PYU_OWNER_THREAD))
            continue;
        size_t j = i + 1; /* (the next frame of the data stack) */
        while (j < t->nfr && t->fr[j].r.owner != PYU_OWNER_THREAD)
            j++;
        uint64_t size;
        if (j == t->nfr || j - i > PYU_SLOT_DEPTH ||
            t->fr[j].r.addr >= f->r.addr ||
            t->fr[j - 1].r.prev != t->fr[j].r.addr ||
            !(size = pyu_snap_frame_size(sm, f->r.code)))
            continue;
        size_t n = j - i, m = 0, least = 0;
        uint64_t cc = t->fr[j].r.code;
        for (; m < PYU_SLOT_CALLS && !same_call(&t->slots[m], f, n, cc); m++)
            if (t->slots[m].seen < t->slots[least].seen)
                least = m;
        struct pyu_slot_call *x = &t->slots[m < PYU_SLOT_CALLS ? m : least];
        if (m == PYU_SLOT_CALLS) /* (in place of the one met least) */
            x->seen = 0;
        for (size_t k = 0; k < n; k++)
            x->r[k] = t->fr[i + k].r;
        x->n = (uint8_t)n;
        x->caller_code = cc;
        x->size = size;
        if (++x->seen >= 1024) /* (what is no longer met goes) */
            for (size_t k = 0; k < PYU_SLOT_CALLS; k++)
                t->slots[k].seen /= 2;
    }
}

static bool fits(pyu_sampler *sm, const struct pyu_slot_call *x,
                 uint64_t addr, uint64_t size, uint64_t caller_code,
                 const pyu_sframe *fr, size_t n, const pyu_sframe *above)
{
    if (!x->n || !x->seen || x->r[0].addr != addr || x->size != size ||
        x->caller_code != caller_code || x->n < n)
        return false;
    /* (through the frames fr: the same code objects; the same places but
     * for generators' frames, which lie in the generators, made anew at
     * other addresses on the free-threaded builds) */
    for (size_t k = 0; k < n; k++)
        if (x->r[k].code != fr[k].r.code ||
            (x->r[k].addr != fr[k].r.addr &&
             fr[k].r.owner != PYU_OWNER_GENERATOR))
            return false;
    /* (two calls of one size in one slot, `a1(); b1()`: the one whose code
     * may call the frame above, not b1 under a2) */
    return !above || pyu_accept_named(sm, &x->r[0], above);
}

bool pyu_snap_slot_call(pyu_sampler *sm, const pyu_sthread *t, uint64_t addr,
                        uint64_t size, uint64_t caller_code,
                        const pyu_sframe *fr, size_t n,
                        const pyu_sframe *above, struct pyu_slot_call *out)
{
    uint64_t total = 0;
    for (size_t m = 0; t->slots && m < PYU_SLOT_CALLS; m++)
        if (fits(sm, &t->slots[m], addr, size, caller_code, fr, n, above))
            total += t->slots[m].seen;
    if (!total)
        return false;
    /* (xorshift: a fixed sequence) */
    uint64_t x = sm->pick ? sm->pick : 0x9E3779B97F4A7C15ull;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    sm->pick = x;
    uint64_t at = x % total;
    for (size_t m = 0; m < PYU_SLOT_CALLS; m++) {
        const struct pyu_slot_call *c = &t->slots[m];
        if (!fits(sm, c, addr, size, caller_code, fr, n, above))
            continue;
        if (at < c->seen) {
            *out = *c;
            return true;
        }
        at -= c->seen;
    }
    return false;
}

int pyu_snap_make_room(pyu_sampler *sm, pyu_sthread *t, size_t at, size_t m)
{
    while (t->nfr + m > t->frcap)
        if (!pyu_grow((void **)&t->fr, t->frcap, &t->frcap, sizeof *t->fr))
            return pyu_fail(&sm->s->err, PYU_E_NOMEM, "out of memory");
    memmove(t->fr + at + m, t->fr + at, (t->nfr - at) * sizeof *t->fr);
    memset(t->fr + at, 0, m * sizeof *t->fr);
    t->nfr += m;
    return 0;
}

int pyu_snap_put_slot_call(pyu_sampler *sm, pyu_sthread *t, thread_read *r,
                           const struct pyu_slot_call *x)
{
    uint64_t below = t->nfr ? t->fr[0].r.addr : 0;
    if (pyu_snap_make_room(sm, t, 0, x->n) < 0)
        return -1;
    for (size_t k = 0; k < x->n; k++)
        t->fr[k].r = x->r[k];
    t->fr[x->n - 1].r.prev = below;
    r->ok = (long)t->nfr;
    r->imputed = true;
    return 0;
}

bool pyu_snap_ends_at_top(pyu_sampler *sm, const pyu_sthread *t,
                          const pyu_tstate *ts, const pyu_sframe *fr, size_t n)
{
    for (size_t k = 0; k < n; k++) {
        const pyu_frame_raw *f = &fr[k].r;
        if (f->owner != PYU_OWNER_THREAD)
            continue;
        return !fr[k].popped && pyu_snap_in_top_chunk(t, ts, f) &&
               f->addr + pyu_snap_frame_size(sm, f->code) == ts->ds_top;
    }
    return false;
}

int pyu_snap_slot_between(pyu_sampler *sm, pyu_sthread *t,
                          const pyu_tstate *ts, thread_read *r)
{
    size_t n = t->nfr;
    long up = pyu_accept_upper(sm, t->fr, n);
    if (up <= 0 || (size_t)up + 1 >= n)
        return up < 0 ? -1 : 0;
    size_t u = (size_t)up;
    const pyu_frame_raw *f = &t->fr[u - 1].r, *at = &t->fr[u].r;
    if (f->owner != PYU_OWNER_THREAD || at->owner != PYU_OWNER_THREAD ||
        f->prev != at->addr || at->addr >= f->addr ||
        r->ok < (long)(n - u - 1) || !pyu_snap_ends_at_top(sm, t, ts, t->fr, u))
        return 0;
    uint64_t size = f->addr - at->addr;
    if (size > (1u << 16) || pyu_snap_frame_size(sm, at->code) == size ||
        pyu_snap_frame_under(sm, t, ts, at->addr) != t->fr[u + 1].r.addr)
        return 0; /* (not a copy of another call's, or unplaced) */
    struct pyu_slot_call x;
    if (!pyu_snap_slot_call(sm, t, at->addr, size, t->fr[u + 1].r.code, NULL,
                            0, &t->fr[u - 1], &x))
        return 0;
    /* (x's frames in the place of the slot's copy) */
    if (pyu_snap_make_room(sm, t, u + 1, x.n - 1u) < 0)
        return -1;
    memset(t->fr + u, 0, sizeof *t->fr);
    for (size_t k = 0; k < x.n; k++)
        t->fr[u + k].r = x.r[k];
    t->fr[u + x.n - 1].r.prev = t->fr[u + x.n].r.addr;
    t->npopped = 0;
    r->ok = (long)t->nfr;
    r->imputed = true;
    sm->st.reused++;
    return 1;
}

/* ------------------------------------------ 3.15: the anchor's window */

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
 * frames read with it, as pyu_snap_walk() would.  1 when it got there, 2 when
 * `first` is that frame and its copy is of a later moment (it returned by
 * then: the cached frame is the one the thread state named), 0 when a
 * frame was not read with the window or the anchored one's copy is not
 * it, -1 on an error that ends the sample. */
int pyu_snap_walk_window(pyu_sampler *sm, pyu_sthread *t, uint64_t first,
                         size_t k)
{
    const pyu_fcache *c = &t->cache;
    uint64_t stop = c->addr[k];
    size_t fsize = sm->fsize;
    walk_ctx w = {sm, t, NULL, true}; /* (second copies: t->win2) */
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
bool pyu_snap_window_spans(pyu_sthread *t)
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
