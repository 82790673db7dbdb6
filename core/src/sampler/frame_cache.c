/* The frame cache: each thread's stack of the last sample, and CPython
 * 3.15's anchor, which lets a sample of a thread that stayed in one frame
 * read that frame only.
 *
 * Profile nodes.  The cached stack keeps, per depth, the frame's address,
 * code object and instruction and the profile node of the stack up to it;
 * a frame identical to the cached one at its depth (everything below
 * identical too, the code epoch unchanged) keeps its node without being
 * resolved again, so a deep stack whose top moves costs a few lookups.
 *
 * The anchor (3.15).  The thread state carries last_profiled_frame and a
 * sequence number: when the frame the anchor names returns or yields, the
 * interpreter moves the anchor to its caller and adds one to the
 * sequence (an entry frame, where C code called Python, ends without
 * moving it).  A stack is proven, and from then on read as the few frames
 * above the one the anchor names, this way:
 *   1. the anchor is written to name the innermost frame of a stack read
 *      the same twice (the one write the sampler makes to a target), when
 *      nothing proves the stack or the proof lies more than RAISE_ABOVE
 *      frames below that frame; CPython's own sampler writes it too, and
 *      an anchor someone left serves as well;
 *   2. a stack taken as the one the thread had when its thread state was
 *      read (accept.c's rules on a snapshot, or step 3), with the anchor
 *      in that thread state naming one of its Python frames that the
 *      last stack had too, the same frames below it: that frame cannot
 *      return, nor anything below it, without moving the anchor.  The
 *      stack is cached with the depth of that frame and the sequence;
 *   3. from then on a sample reads the thread state, then a window of the
 *      data stack from a frame below the one the anchor names to a little
 *      past the innermost frame (and each frame above it lying elsewhere:
 *      an entry frame on the C stack, a generator's frame).  When the
 *      thread state shows the anchor moved m frames down from the proven
 *      one with the sequence m more, the frame it names now and
 *      everything below it were never popped since step 2 and are as
 *      cached; the frames above it are walked in the window from the
 *      current frame and judged by accept.c's rules (a frame popped by
 *      the window's copy told by its instruction pointer, as a
 *      snapshot's is).  In a loop that calls short functions the anchor
 *      stays on the loop's frame and each sample reads one range a
 *      thread.  Step 2 then holds for the stack taken.
 * A thread whose frames above the anchor the window does not hold, or
 * whose anchor is not where the count says, is read from a snapshot
 * (step 2 again).  Anchors are cleared when the sampler ends.
 */
#include "sampling.h"

#include <stdlib.h>
#include <string.h>

#define WIN_SLACK 512         /* bytes of the window past the innermost
                                 frame's header: a short call or two */
#define WIN_MAX (16u << 10)   /* from the anchored frame to the innermost
                                 one at most, for a window */
#define CALM 16               /* samples in a row in the anchored frame
                                 after which the window is that frame */
#define WIN_XSLACK 256        /* bytes read past a frame outside the data
                                 stack's window (its saved stack top) */
#define WIN_XBELOW 512        /* ... and below an entry frame */
#define RAISE_ABOVE 2         /* frames read above the anchor before it is
                                 written higher */

void pyu_fcache_free(pyu_fcache *c)
{
    free(c->addr);
    free(c->code);
    free(c->ip);
    free(c->node);
    free(c->own);
    memset(c, 0, sizeof *c);
}

static bool reserve(pyu_fcache *c, size_t n)
{
    if (n <= c->cap)
        return true;
    size_t ncap = c->cap ? c->cap : 64;
    while (ncap < n)
        ncap *= 2;
    uint64_t *a = realloc(c->addr, ncap * 8);
    if (a)
        c->addr = a;
    uint64_t *k = a ? realloc(c->code, ncap * 8) : NULL;
    if (k)
        c->code = k;
    uint64_t *i = k ? realloc(c->ip, ncap * 8) : NULL;
    if (i)
        c->ip = i;
    uint32_t *nd = i ? realloc(c->node, ncap * 4) : NULL;
    if (nd)
        c->node = nd;
    uint8_t *ow = nd ? realloc(c->own, ncap) : NULL;
    if (!ow)
        return false;
    c->own = ow;
    c->cap = ncap;
    return true;
}

int pyu_fcache_commit(pyu_sampler *sm, pyu_sthread *t, const pyu_sframe *fr,
                      size_t keep, size_t nf, bool reuse)
{
    pyu_session *s = sm->s;
    pyu_fcache *c = &t->cache;
    size_t n = keep + nf;
    if (!reserve(c, n))
        return pyu_fail(&s->err, PYU_E_NOMEM, "out of memory"), -1;
    bool same = reuse && c->valid && c->epoch == s->code_epoch;
    bool same_frames = c->valid && c->n == n; /* (addresses and code) */
    size_t agree = c->valid ? keep : 0;
    uint32_t parent = keep ? c->node[keep - 1] : 0;
    for (size_t p = keep, j = nf; j-- > 0; p++) {
        const pyu_frame_raw *f = &fr[j].r;
        uint32_t node;
        if (agree == p && p < c->n && c->addr[p] == f->addr &&
            c->code[p] == f->code)
            agree++;
        if (same_frames && agree <= p)
            same_frames = false;
        if (same && p < c->n && c->addr[p] == f->addr &&
            c->code[p] == f->code && c->ip[p] == f->ip) {
            node = c->node[p];
        } else {
            same = false;
            /* a shim between Python frames is where C code called back
             * into Python: "<native>" with PYU_SAMPLE_NATIVE (the chain's
             * bottom frame is not) */
            long pf = f->owner < PYU_OWNER_ENTRY ? pyu_sampler_frame_of(sm, f)
                      : (sm->o.flags & PYU_SAMPLE_NATIVE) && p > 0
                          ? sm->native_frame
                          : -1;
            if (pf == -2) {
                c->valid = false;
                return s->err.code == PYU_E_NOMEM ||
                               s->err.code == PYU_E_NOPROC
                           ? -1
                           : 1;
            }
            /* (3.11: no shims; C code called the first frame of each
             * eval loop but the outermost) */
            if (f->entry && p > 0 && pf >= 0 &&
                (sm->o.flags & PYU_SAMPLE_NATIVE)) {
                long nn = pyu_profile_push(sm->p, parent,
                                           (uint32_t)sm->native_frame);
                if (nn < 0)
                    return pyu_fail(&s->err, PYU_E_NOMEM, "out of memory"),
                           -1;
                parent = (uint32_t)nn;
            }
            long nd = pf < 0 ? (long)parent
                             : pyu_profile_push(sm->p, parent, (uint32_t)pf);
            if (nd < 0)
                return pyu_fail(&s->err, PYU_E_NOMEM, "out of memory"), -1;
            node = (uint32_t)nd;
        }
        c->addr[p] = f->addr;
        c->code[p] = f->code;
        c->ip[p] = f->ip;
        c->own[p] = f->owner;
        if (f->owner >= PYU_OWNER_ENTRY && p > 0)
            c->entry = f->addr;
        c->node[p] = node;
        parent = node;
    }
    c->same = same_frames;
    c->agree = agree;
    c->n = n;
    c->valid = true;
    c->epoch = s->code_epoch;
    return 0;
}

long pyu_fcache_leaf(pyu_sampler *sm, const pyu_sthread *t, bool unknown,
                     unsigned status)
{
    const pyu_fcache *c = &t->cache;
    long node = c->valid && c->n ? (long)c->node[c->n - 1] : 0;
    if (unknown)
        node = pyu_profile_push(sm->p, (uint32_t)node,
                                (uint32_t)sm->unknown_frame);
    if (node >= 0 && (sm->o.flags & PYU_SAMPLE_GC) && (status & PYU_STATUS_GC))
        node = pyu_profile_push(sm->p, (uint32_t)node, (uint32_t)sm->gc_frame);
    return node;
}

/* The window for t's cached frames from the one below depth d up: the
 * ones in its current chunk of the data stack, one above the other, as
 * one range [*lo, *hi) with room above for a call or two; the rest (an
 * entry frame on the C stack, a generator's frame) each as a range of
 * its own, their depths in x[], *nx of them.  False when they do not fit
 * that. */
static bool plan(const pyu_sampler *sm, const pyu_sthread *t, size_t d,
                 uint64_t *lo, uint64_t *hi, uint64_t x[PYU_WIN_EXTRA],
                 size_t *nx)
{
    const pyu_fcache *c = &t->cache;
    size_t fsize = sm->fsize;
    uint64_t first = 0, last = 0;
    *nx = 0;
    if (d >= c->n || !t->chunk || t->chunk_end <= t->chunk ||
        t->chunk_end - t->chunk < fsize)
        return false;
    for (size_t p = d ? d - 1 : 0; p < c->n; p++) {
        uint64_t a = c->addr[p];
        if (a >= t->chunk && a <= t->chunk_end - fsize) {
            if (a <= last)
                return false; /* (not one above the other) */
            first = first ? first : a;
            last = a;
        } else if (*nx < PYU_WIN_EXTRA) {
            x[(*nx)++] = p;
        } else {
            return false;
        }
    }
    if (!first || last - first > WIN_MAX)
        return false;
    /* (with none of its own, the entry frame a stack of it held last: a
     * callback from C code comes through one like it) */
    bool entry = false;
    for (size_t i = 0; i < *nx; i++)
        entry |= c->own[x[i]] >= PYU_OWNER_ENTRY;
    if (!entry && c->entry && *nx < PYU_WIN_EXTRA)
        x[(*nx)++] = SIZE_MAX;
    *lo = first;
    *hi = t->chunk_end - last < fsize + WIN_SLACK ? t->chunk_end
                                                  : last + fsize + WIN_SLACK;
    return true;
}

bool pyu_fcache_window(pyu_sampler *sm, pyu_sthread *t)
{
    const pyu_fcache *c = &t->cache;
    size_t fsize = sm->fsize;
    if (!c->anchored || !c->valid || !c->n || c->adepth >= c->n)
        return false;
    /* (from the frame below the anchored one: the anchor is down there
     * after one return; a thread that has stayed in the anchored frame a
     * while gets that frame alone, the cheaper read, and leaves it by a
     * snapshot) */
    uint64_t top = c->addr[c->n - 1], lo = top, hi = top + fsize,
             x[PYU_WIN_EXTRA], xend[PYU_WIN_EXTRA];
    size_t nx = 0;
    if (c->calm >= CALM || !plan(sm, t, c->adepth, &lo, &hi, x, &nx)) {
        lo = top;
        hi = top + fsize;
        nx = 0;
    }
    /* (a frame elsewhere: a little past it, within its last page; an
     * entry frame from a little below it, within its first page: the next
     * call from C code may come through a deeper or shallower one) */
    size_t len = (size_t)(hi - lo);
    for (size_t i = 0; i < nx; i++) {
        bool hint = x[i] == SIZE_MAX;
        uint64_t a = hint ? c->entry : c->addr[x[i]];
        uint64_t page_end = ((a + fsize - 1) | 4095) + 1,
                 page = a & ~(uint64_t)4095;
        xend[i] = a + fsize + WIN_XSLACK < page_end ? a + fsize + WIN_XSLACK
                                                    : page_end;
        x[i] = !hint && c->own[x[i]] < PYU_OWNER_ENTRY ? a
               : a - page > WIN_XBELOW        ? a - WIN_XBELOW
                                              : page;
        len += (size_t)(xend[i] - x[i]);
    }
    /* (more than one frame: links to judge, each wanting its evidence
     * from two copies) */
    bool again = hi - lo > fsize;
    if (again)
        len += (size_t)(hi - lo);
    if (len > t->wincap) {
        uint8_t *b = realloc(t->win, len);
        if (!b)
            return false; /* (read from a snapshot instead) */
        t->win = b;
        t->wincap = len;
    }
    t->win_lo = lo;
    t->win_len = (size_t)(hi - lo);
    size_t at = t->win_len;
    for (size_t i = 0; i < nx; i++) {
        t->wx[i] = (pyu_chunk_span){x[i], xend[i], t->win + at};
        at += (size_t)(xend[i] - x[i]);
    }
    t->nwx = nx;
    t->win2 = again ? t->win + at : NULL;
    return true;
}

size_t pyu_fcache_proven(pyu_sthread *t, const pyu_tstate *ts)
{
    pyu_fcache *c = &t->cache;
    uint64_t seq = ts->extra[1];
    bool was = c->anchored;
    c->anchored = false; /* (until pyu_fcache_take) */
    /* (step 3: the anchor has moved down one frame for each frame it
     * named that returned since the proof; the same count of moves and
     * the anchor on the frame cached that many below: that frame and all
     * below it were never popped.  Not an entry frame: the interpreter
     * leaves the anchor where it was when one ends) */
    if (!was || !t->win_read || !c->valid || !c->n || !ts->current_frame ||
        c->adepth >= c->n || seq - c->seq > c->adepth)
        return 0;
    size_t k = c->adepth - (size_t)(seq - c->seq);
    if (ts->extra[0] != c->addr[k] || c->own[k] >= PYU_OWNER_ENTRY)
        return 0;
    return k + 1;
}

/* Whether the thread state at tstate is still the thread native_id's and
 * runs the frame `frame` (0: any), read just now.
 *
 * The one write pyunwind makes goes into a thread state, and a thread
 * that ends frees its thread state: a write into it after that corrupts
 * whatever the target's allocator put there (a target with threads that
 * come and go by the thousand aborted in free()).  Between the read of a
 * sample and its writes there can be milliseconds (a thousand threads,
 * a slow build); a thread state read again right before the write, still
 * naming the thread and a frame of it, cannot be freed in the moment the
 * write takes: the thread has that frame and all below it to return from
 * and its own clean-up to run first. */
static bool still_running(pyu_session *s, uint64_t tstate, uint64_t native_id,
                          uint64_t frame)
{
    const pyu_offsets *o = &s->off;
    uint64_t cur = 0, nid = 0;
    pyu_range r[2] = {
        {tstate + PYU_OFF(o, ts_current_frame), (uint8_t *)&cur, 8},
        {tstate + PYU_OFF(o, ts_native_thread_id), (uint8_t *)&nid, 8}};
    return pyu_readv_quiet(s, r, 2) == 0 && nid == native_id && cur &&
           (!frame || cur == frame);
}

/* Writes t's anchor to name its innermost cached frame (the one write
 * pyunwind makes to a target), while the thread state shows the thread
 * still in it. */
static void write_anchor(pyu_sampler *sm, pyu_sthread *t,
                         const pyu_tstate *ts)
{
    pyu_fcache *c = &t->cache;
    pyu_session *s = sm->s;
    uint64_t top = c->addr[c->n - 1];
    uint64_t at = ts->addr + PYU_OFF(&s->off, ts_last_profiled_frame);
    if (!still_running(s, ts->addr, ts->native_id, top))
        return; /* (moved on, or gone: next time) */
    if (s->ops->write(s->ctx, at, &top, 8) < 0) {
        sm->anchors = false; /* refused: do without */
        return;
    }
    sm->st.anchor_writes++;
    c->wrote = true;
}

/* Step 2, after a stack was committed that the rules or a proof took as
 * the one the thread had when ts was read: the anchor names, in ts, one of
 * its Python frames at or above depth `from`, which the last stack had
 * too (the same frames below it): from then on the frames up to it stay
 * as they are until the anchor moves (the same count of moves as the
 * sequence shows, step 3).  The highest such frame.  Else, the stack the
 * same as the last sample's with no proof or one more than RAISE_ABOVE
 * frames below its innermost frame: the anchor is written to name that
 * frame (step 1; two calls, so a short call made over and over just above
 * the anchor stays read from the window). */
static void prove(pyu_sampler *sm, pyu_sthread *t, const pyu_tstate *ts,
                  size_t from)
{
    pyu_fcache *c = &t->cache;
    for (size_t p = c->n; p-- > from;)
        if (c->addr[p] == ts->extra[0] && c->own[p] < PYU_OWNER_ENTRY &&
            c->agree > p) {
            c->anchored = true;
            c->adepth = p;
            c->seq = ts->extra[1];
            break;
        }
    if (c->same && ts->extra[0] != c->addr[c->n - 1] &&
        (!c->anchored || c->adepth + RAISE_ABOVE < c->n - 1))
        write_anchor(sm, t, ts);
}

int pyu_fcache_take(pyu_sampler *sm, pyu_sthread *t, const pyu_tstate *ts,
                    size_t k)
{
    pyu_fcache *c = &t->cache;
    k--; /* (the depth of the frame the anchor names) */
    bool calm = ts->extra[1] == c->seq && t->nfr <= 1 && k + 1 == c->n;
    c->calm = calm ? c->calm + (c->calm < CALM) : 0;
    /* (no frames read: the one the anchor names as cached, and its line) */
    int rc = t->nfr ? pyu_fcache_commit(sm, t, t->fr, k, t->nfr, true)
                    : pyu_fcache_commit(sm, t, NULL, k + 1, 0, true);
    if (rc != 0)
        return rc < 0 ? -1 : 0;
    /* (still proven, from the frame the anchor names now) */
    c->anchored = true;
    c->adepth = k;
    c->seq = ts->extra[1];
    sm->st.frames_read += t->nfr;
    sm->st.frames_cached += k + !t->nfr;
    if (t->nfr <= 1)
        sm->st.cache_full++;
    else
        sm->st.cache_part++;
    prove(sm, t, ts, k);
    return 1;
}

void pyu_fcache_settle(pyu_sampler *sm, pyu_sthread *t, const pyu_tstate *ts)
{
    pyu_fcache *c = &t->cache;
    c->anchored = false;
    c->calm = 0;
    if (sm->anchors && c->valid && c->n)
        prove(sm, t, ts, 0);
}

bool pyu_fcache_wrote(const pyu_sampler *sm)
{
    bool any = false;
    for (size_t i = 0; i < sm->nthreads; i++)
        any |= sm->threads[i].cache.wrote;
    return any;
}

void pyu_fcache_clear_anchors(pyu_sampler *sm)
{
    const uint64_t zero = 0;
    for (size_t i = 0; i < sm->nthreads; i++) {
        const pyu_sthread *t = &sm->threads[i];
        if (t->cache.wrote &&
            still_running(sm->s, t->tstate, t->native_id, 0))
            sm->s->ops->write(sm->s->ctx,
                              t->tstate +
                                  PYU_OFF(&sm->s->off, ts_last_profiled_frame),
                              &zero, 8);
    }
}
