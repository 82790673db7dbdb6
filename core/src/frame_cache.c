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
 * sequence.  A stack is proven, and from then on is read as one frame,
 * this way:
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
 *   3. from then on a sample reads the innermost frame, then the thread
 *      state: while the thread state shows that frame current, the anchor
 *      naming it and the same sequence, the frame was never popped since
 *      step 2, so everything below it is as cached; the copy of the frame,
 *      read before the thread state, is that frame at a moment in between
 *      and gives its line.
 * Anything else (the frame returned, the thread called further) reads
 * the thread's stack from a snapshot again, and the anchor is set up
 * again once the thread settles.  Anchors are cleared when the sampler
 * ends.
 */
#include "sampling.h"

#include <stdlib.h>
#include <string.h>

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
    uint32_t parent = keep ? c->node[keep - 1] : 0;
    for (size_t p = keep, j = nf; j-- > 0; p++) {
        const pyu_frame_raw *f = &fr[j].r;
        uint32_t node;
        if (same_frames && (p >= c->n || c->addr[p] != f->addr ||
                            c->code[p] != f->code))
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

int pyu_fcache_hit(pyu_sampler *sm, pyu_sthread *t, const pyu_tstate *ts,
                   const uint8_t *pf)
{
    pyu_fcache *c = &t->cache;
    uint64_t first = ts->current_frame;
    if (!pf || !c->valid || !c->anchored || !c->n || !first ||
        ts->extra[0] != first || ts->extra[1] != c->seq ||
        first != c->addr[c->n - 1]) {
        c->anchored = false;
        return 0;
    }
    pyu_sframe f;
    memset(&f, 0, sizeof f);
    pyu_frame_raw_take(&sm->s->off, first, pf, sm->fsize, &f.r);
    if (f.r.prev != (c->n > 1 ? c->addr[c->n - 2] : f.r.prev) ||
        f.r.code != c->code[c->n - 1]) {
        c->anchored = false; /* (cannot be: a hostile target) */
        return 0;
    }
    int rc = pyu_fcache_commit(sm, t, &f, c->n - 1, 1, true);
    if (rc != 0)
        return rc < 0 ? -1 : 0;
    c->anchored = true; /* (commit keeps the stack; still proven) */
    sm->st.frames_read++;
    sm->st.frames_cached += c->n - 1;
    sm->st.cache_full++;
    return 1;
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

void pyu_fcache_settle(pyu_sampler *sm, pyu_sthread *t, const pyu_tstate *ts)
{
    pyu_fcache *c = &t->cache;
    pyu_session *s = sm->s;
    c->anchored = false;
    if (!sm->anchors || !c->valid || !c->n)
        return;
    uint64_t top = c->addr[c->n - 1];
    /* (step 2 above; also when the anchor named the frame before: another
     * profiler, or an earlier run, left it there -- CPython moves it off
     * a frame that returns, whoever wrote it) */
    if (ts->extra[0] == top && c->same) {
        c->anchored = true;
        c->seq = ts->extra[1];
        return;
    }
    if (!c->same)
        return;
    uint64_t at = ts->addr + PYU_OFF(&s->off, ts_last_profiled_frame);
    if (!still_running(s, ts->addr, ts->native_id, top))
        return; /* (moved on, or gone: next time) */
    if (s->ops->write(s->ctx, at, &top, 8) < 0) {
        sm->anchors = false; /* refused: do without */
        return;
    }
    sm->st.anchor_writes++;
    c->wrote_at = top;
    c->wrote = true;
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
