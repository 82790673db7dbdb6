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
 * sequence.  A stack is proven, and from then on read as the few frames
 * above the one the anchor names, this way:
 *   1. two samples in a row read the same stack (same frames, same code
 *      objects) from their snapshots, accepted by accept.c's rules: the
 *      sampler writes the anchor to name its innermost frame (the one
 *      write it makes to a target), unless it names that frame already
 *      (another profiler's, CPython's own sampler writes it too: that is
 *      step 2 at once, as CPython moves it off a returning frame whoever
 *      wrote it);
 *   2. a later sample reads that stack again, and the same copy of the
 *      thread state shows the anchor still naming that frame: no frame at
 *      that address returned since the write, and the snapshot shows the
 *      stack under it as it is at the moment of that read.  The stack is
 *      cached with the sequence that copy shows;
 *   3. from then on a sample reads the thread state, then a window of the
 *      data stack from a frame below the one the anchor names to a little
 *      past the innermost frame.  When the thread state shows the anchor
 *      moved m frames down from the proven one with the sequence m more,
 *      the frame it names now and everything below it were never popped
 *      since step 2 and are as cached; the frames above it are walked in
 *      the window from the current frame and judged by accept.c's rules
 *      (a frame popped by the window's copy told by its instruction
 *      pointer, as a snapshot's is).  In a loop that calls short
 *      functions the anchor stays on the caller and each sample reads one
 *      range: the thread state and the window.  The proof goes on from
 *      the frame the anchor names now.
 *   4. a stack that stays the same with the anchor more than RAISE_ABOVE
 *      frames below its innermost gets the anchor written there (step 1
 *      from a hit); the next hit whose thread state shows it unmoved, its
 *      stack the same up to that frame, raises the proof to it (step 2).
 * A thread state that proves the frames up to the anchor while the frames
 * above fail the rules (a call from C code, a generator, a frame outside
 * the window) reads the thread's stack from a snapshot, which takes the
 * proof on when it has those frames as cached; anything else (the anchor
 * not where the count says, a stack that moved below it) sets it up
 * again from step 1 once the thread settles.  Anchors are cleared when
 * the sampler ends.
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
#define RAISE_ABOVE 2         /* frames read above the anchor before it is
                                 written higher */

void pyu_fcache_free(pyu_fcache *c)
{
    free(c->addr);
    free(c->code);
    free(c->ip);
    free(c->node);
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
    if (!nd)
        return false;
    c->node = nd;
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

/* Whether t's cached frames from the one below depth d up lie one above
 * the other in its current chunk of the data stack, close enough for a
 * window. */
static bool stacked(const pyu_sampler *sm, const pyu_sthread *t, size_t d)
{
    const pyu_fcache *c = &t->cache;
    size_t from = d ? d - 1 : 0;
    uint64_t top = c->addr[c->n - 1], lo = c->addr[from];
    bool yes = d < c->n && t->chunk && lo >= t->chunk &&
               top < t->chunk_end && t->chunk_end - top >= sm->fsize &&
               top - lo <= WIN_MAX;
    for (size_t p = from + 1; yes && p < c->n; p++)
        yes = c->addr[p] > c->addr[p - 1];
    return yes;
}

/* The window: the frames from the anchored one up lie one above the
 * other in the current chunk of the data stack (a generator's frame lies
 * elsewhere: then the innermost frame alone), read as one range with
 * room above for a call or two. */
bool pyu_fcache_window(pyu_sampler *sm, pyu_sthread *t)
{
    const pyu_fcache *c = &t->cache;
    size_t fsize = sm->fsize;
    if (!c->anchored || !c->valid || !c->n || c->adepth >= c->n)
        return false;
    /* (from the frame below the anchored one: the anchor is down there
     * after one return) */
    size_t from = c->adepth ? c->adepth - 1 : 0;
    uint64_t top = c->addr[c->n - 1], lo = c->addr[from];
    uint64_t hi = top + fsize;
    /* (a thread that has stayed in the anchored frame a while: that frame
     * alone, the cheaper read; it leaves by a snapshot) */
    if (c->calm < CALM && stacked(sm, t, c->adepth))
        hi = t->chunk_end - top < fsize + WIN_SLACK ? t->chunk_end
                                                    : top + fsize + WIN_SLACK;
    else
        lo = top;
    size_t len = (size_t)(hi - lo);
    if (len > t->wincap) {
        uint8_t *b = realloc(t->win, len);
        if (!b)
            return false; /* (read from a snapshot instead) */
        t->win = b;
        t->wincap = len;
    }
    t->win_lo = lo;
    t->win_len = len;
    return true;
}

size_t pyu_fcache_proven(pyu_sampler *sm, pyu_sthread *t,
                         const pyu_tstate *ts)
{
    pyu_fcache *c = &t->cache;
    uint64_t seq = ts->extra[1];
    bool was = c->anchored;
    unsigned calm = c->calm;
    c->anchored = false; /* (until pyu_fcache_take) */
    c->calm = 0;
    if (!was)
        c->pending = false;
    c->held = 0;
    (void)sm;
    /* (step 3: the anchor has moved down one frame for each frame it
     * named that returned since the proof; the same count of moves and
     * the anchor on the frame cached that many below: that frame and all
     * below it were never popped) */
    if (!was || !t->win_read || !c->valid || !c->n || !ts->current_frame ||
        c->adepth >= c->n || seq - c->seq > c->adepth)
        return 0;
    size_t k = c->adepth - (size_t)(seq - c->seq);
    /* (or, unmoved, on the frame it was written to name after the last
     * hit: pyu_fcache_take) */
    if (ts->extra[0] != c->addr[k] &&
        !(c->pending && seq == c->seq && ts->extra[0] == c->wrote_at))
        return 0;
    c->held = k + 1;
    c->held_seq = seq;
    c->calm = calm; /* (pyu_fcache_take counts on) */
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
    c->wrote_at = top;
    c->wdepth = c->n - 1;
    c->wrote = true;
}

int pyu_fcache_take(pyu_sampler *sm, pyu_sthread *t, const pyu_tstate *ts)
{
    pyu_fcache *c = &t->cache;
    size_t k = c->held - 1;
    bool moved = ts->extra[1] != c->seq, pending = c->pending;
    bool calm = !moved && t->nfr == 1 && k + 1 == c->n;
    c->calm = calm ? c->calm + (c->calm < CALM) : 0;
    c->pending = false;
    int rc = pyu_fcache_commit(sm, t, t->fr, k, t->nfr, true);
    if (rc != 0)
        return rc < 0 ? -1 : 0;
    /* (still proven, from the frame the anchor names now) */
    c->anchored = true;
    c->adepth = k;
    c->seq = c->held_seq;
    c->held = 0;
    sm->st.frames_read += t->nfr;
    sm->st.frames_cached += k;
    if (t->nfr == 1)
        sm->st.cache_full++;
    else
        sm->st.cache_part++;
    /* Raising the proof.  The anchor written after the last hit (step 1,
     * from a hit) names, unmoved, the frame it was written to name: that
     * frame never returned since, nor anything below it, and this stack
     * has them as they were cached then (same addresses and code): the
     * proof holds up to it (step 2).  Else, the stack the same as the
     * last sample's with the anchor more than a few frames below its
     * innermost frame: write it there (two calls; a short call made
     * over and over just above the anchor is cheaper read). */
    if (pending && !moved && ts->extra[0] == c->wrote_at &&
        c->wdepth < c->n && c->agree > c->wdepth &&
        c->addr[c->wdepth] == c->wrote_at)
        c->adepth = c->wdepth;
    else if (c->same && ts->extra[0] != c->addr[c->n - 1] &&
             c->adepth + RAISE_ABOVE < c->n - 1) {
        write_anchor(sm, t, ts);
        c->pending = c->wrote && c->wrote_at == c->addr[c->n - 1];
    }
    return 1;
}

void pyu_fcache_settle(pyu_sampler *sm, pyu_sthread *t, const pyu_tstate *ts)
{
    pyu_fcache *c = &t->cache;
    c->anchored = c->pending = false;
    c->calm = 0;
    if (!sm->anchors || !c->valid || !c->n)
        return;
    uint64_t top = c->addr[c->n - 1];
    size_t held = c->held;
    c->held = 0;
    /* (step 2 above; also when the anchor named the frame before: another
     * profiler, or an earlier run, left it there -- CPython moves it off
     * a frame that returns, whoever wrote it) */
    if (ts->extra[0] == top && c->same) {
        c->anchored = true;
        c->adepth = c->n - 1;
        c->seq = ts->extra[1];
        return;
    }
    /* the proof the thread state of a hit that failed gave, for the
     * frames this stack has as they were cached (the anchor moves down
     * from there as before), while the stack moves: frames above it are
     * read in the window */
    if (!c->same) {
        if (held && c->agree >= held && stacked(sm, t, held - 1)) {
            c->anchored = true;
            c->adepth = held - 1;
            c->seq = c->held_seq;
        }
        return;
    }
    write_anchor(sm, t, ts);
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
