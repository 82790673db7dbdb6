/* The read plan: what one sample reads of the target, in as few reads as
 * the prediction allows.
 *
 * Steady state (the interpreters and threads the last sample found are
 * still there): one process_vm_readv brings for each thread its thread
 * state followed by the memory where the frames of its last stack lay
 * (its spans: the current data-stack chunk from its start to a little
 * past the innermost frame, then frames elsewhere, the outermost first)
 * -- one snapshot per thread, which accept.c judges -- then the runtime's
 * interpreter list head (every HEAD_EVERY samples) and each interpreter's
 * fields.  A 3.15 thread whose anchor proved its stack (frame_cache.c)
 * gets instead its thread state, then a window of its data stack from the
 * frame the anchor named to a little past the innermost frame.  3.11 keeps
 * its current frame in the eval loop's _PyCFrame: that word is read at
 * the _PyCFrame the thread had last time, right after its thread state.
 *
 * The lists are checked link by link against the prediction (head, next);
 * any difference reads them anew through threads.c, which sets up the
 * next prediction and stands for this sample's batch (each thread then
 * gets a snapshot of its own: a list that changes under every batch, as
 * with threads coming and going by the thousand, is still sampled).  A thread whose frames were not all in its spans, or
 * whose stack did not pass the rules, gets a snapshot of its own
 * (pyu_plan_snapshot) planned from what its walk found.
 */
#include "sampling.h"

#include <stdlib.h>
#include <string.h>

#define HEAD_EVERY 16     /* samples between reads of the interpreter
                             list's head */
#define ISPAN_MAX 4096    /* an interpreter's fields read as one range when
                             they lie this close */
#define SLACK 1024        /* bytes past the innermost frame read with the
                             chunk: room for a few more frames */
#define SPAN_GAP 4096     /* frames this close share a range */
#define PLAN_MAX (256u << 10) /* bytes of a thread's spans at most */
#define STACK_MAX (64u << 10) /* a frame's saved stack top this far from
                                 its start at most */

/* ------------------------------------------------------ the thread lists */

void pyu_plan_thread_free(pyu_sthread *t)
{
    free(t->spanbuf);
    free(t->fr);
    free(t->fr1);
    free(t->gen_memo);
    free(t->binds);
    free(t->gen_via);
    free(t->slots);
    free(t->cfwin);
    free(t->win);
    pyu_fcache_free(&t->cache);
}

static bool reserve_sample(pyu_sampler *sm, size_t nthreads)
{
    if (nthreads <= sm->captsbuf)
        return true;
    size_t ncap = sm->captsbuf ? sm->captsbuf : 8;
    while (ncap < nthreads)
        ncap *= 2;
    uint8_t *a = realloc(sm->tsbuf, ncap * sm->tslen);
    if (a)
        sm->tsbuf = a;
    uint64_t *nx = a ? realloc(sm->next, ncap * 8) : NULL;
    if (nx)
        sm->next = nx;
    uint64_t *cp = nx ? realloc(sm->cfpeek, ncap * 8 * PYU_CFRAMES) : NULL;
    if (cp)
        sm->cfpeek = cp;
    pyu_tstate *r = cp ? realloc(sm->recs, ncap * sizeof *r) : NULL;
    if (!r)
        return false;
    sm->recs = r;
    sm->captsbuf = ncap;
    return true;
}

/* The thread of the old prediction with this thread state (its cache
 * carries over), or a new one. */
typedef struct discover {
    pyu_sampler *sm;
    pyu_sthread *old;
    size_t nold;
    size_t next; /* where in old the search starts: the threads come in
                    the order they came last time */
    pyu_tstate *recs; /* each thread state as the batch or the walk read
                         it */
    size_t caprecs;
    int rc;
} discover;

static int on_interp(void *arg, const pyu_interp *in, size_t nthreads,
                     bool tcut, bool icut)
{
    discover *d = arg;
    pyu_sampler *sm = d->sm;
    (void)nthreads, (void)tcut, (void)icut;
    if (!pyu_grow((void **)&sm->interps, sm->ninterps, &sm->capinterps,
                  sizeof *sm->interps))
        return d->rc = -PYU_E_NOMEM, 2;
    pyu_sinterp *si = &sm->interps[sm->ninterps++];
    si->in = *in;
    si->first = sm->nthreads;
    si->n = 0;
    return PYU_WALK_NEXT;
}

static int on_thread(void *arg, const pyu_interp *in, const pyu_tstate *ts)
{
    discover *d = arg;
    pyu_sampler *sm = d->sm;
    (void)in;
    if (!pyu_grow((void **)&sm->threads, sm->nthreads, &sm->capthreads,
                  sizeof *sm->threads))
        return d->rc = -PYU_E_NOMEM, 2;
    if (sm->nthreads == d->caprecs) {
        size_t cap = d->caprecs ? 2 * d->caprecs : 64;
        pyu_tstate *r = realloc(d->recs, cap * sizeof *r);
        if (!r)
            return d->rc = -PYU_E_NOMEM, 2;
        d->recs = r;
        d->caprecs = cap;
    }
    d->recs[sm->nthreads] = *ts;
    pyu_sthread *t = &sm->threads[sm->nthreads];
    memset(t, 0, sizeof *t);
    t->pthread = -1;
    for (size_t k = 0; k < d->nold; k++) {
        size_t i = (d->next + k) % d->nold;
        pyu_sthread *o = &d->old[i];
        if (o->tstate == ts->addr && o->native_id == ts->native_id &&
            o->thread_id == ts->thread_id) {
            /* the batch's read of it (made before this walk), when it is
             * still the same thread */
            const pyu_tstate *b = &sm->recs[i];
            if (o->taken && b->native_id == ts->native_id &&
                b->thread_id == ts->thread_id)
                d->recs[sm->nthreads] = *b; /* (its window with it) */
            else
                o->spans_read = o->win_read = o->cache.anchored = false;
            *t = *o;
            memset(o, 0, sizeof *o); /* moved */
            d->next = i + 1;
            break;
        }
    }
    t->taken = false;
    sm->nthreads++;
    t->tstate = ts->addr;
    t->thread_id = ts->thread_id;
    t->native_id = ts->native_id;
    sm->interps[sm->ninterps - 1].n++;
    return PYU_WALK_NEXT;
}

int pyu_plan_rediscover(pyu_sampler *sm)
{
    discover d = {sm, sm->threads, sm->nthreads, 0, NULL, 0, 0};
    sm->threads = NULL;
    sm->nthreads = sm->capthreads = 0;
    sm->ninterps = 0;
    pyu_threads_cb cb = {
        .flags = PYU_WALK_LIST_ORDER,
        .extra_off = {sm->extra_off[0], sm->extra_off[1]},
        .interp = on_interp,
        .thread = on_thread,
    };
    int rc = pyu_threads_each(sm->s, &cb, &d);
    for (size_t i = 0; i < d.nold; i++)
        pyu_plan_thread_free(&d.old[i]);
    free(d.old);
    sm->predicted = false;
    if (rc != 0 || d.rc || !reserve_sample(sm, sm->nthreads)) {
        /* (a proof holds for the thread state it was made with, which a
         * thread not found again may no longer have) */
        for (size_t i = 0; i < sm->nthreads; i++)
            sm->threads[i].cache.anchored = sm->threads[i].taken = false;
        free(d.recs);
        return rc != 0 && rc != 2 && !d.rc
                   ? -1
                   : pyu_fail(&sm->s->err, PYU_E_NOMEM, "out of memory");
    }
    /* what was read stands for this sample's batch: the batch's read of a
     * thread still there, else the walk's (that thread then gets a
     * snapshot of its own): a list that changes under every batch, as
     * with threads coming and going by the thousand, is still sampled */
    if (sm->nthreads)
        memcpy(sm->recs, d.recs, sm->nthreads * sizeof *sm->recs);
    free(d.recs);
    if (sm->ispan_len) {
        uint8_t *b = realloc(sm->ispan, (sm->ninterps ? sm->ninterps : 1) *
                                            sm->ispan_len);
        if (!b)
            return pyu_fail(&sm->s->err, PYU_E_NOMEM, "out of memory");
        sm->ispan = b;
    }
    sm->head = sm->ninterps ? sm->interps[0].in.addr : 0;
    sm->predicted = true;
    return 0;
}

/* ------------------------------------------------------------- spans */

void pyu_plan_note_chunk(pyu_sampler *sm, pyu_sthread *t, uint64_t chunk)
{
    if (chunk == t->chunk)
        return;
    uint64_t size = 0;
    t->chunk = chunk;
    t->chunk_end = chunk && pyu_read_quiet(sm->s, chunk + 8, &size, 8) == 0 &&
                           size < (1u << 30)
                       ? chunk + size
                       : 0;
}

/* A range being planned: remote [start, end), and the chain position of
 * its innermost frame (spans are read innermost first). */
typedef struct pspan {
    uint64_t start, end;
    size_t inner;
    bool fragile; /* holds a frame whose link below goes first when its
                     call ends: an entry frame on the C stack, a generator's
                     frame (its previous is cleared when it yields) */
} pspan;

/* Adds the frame at addr (chain position pos, saved stack top sp_top) to
 * the spans: into the one it lies in or close to, else a new one. */
static void add_frame(pspan *sp, size_t *n, uint64_t addr, uint64_t sp_top,
                      size_t fsize, size_t pos, bool fragile)
{
    uint64_t end = addr + fsize;
    if (sp_top > addr && sp_top - addr < STACK_MAX && sp_top + 16 > end)
        end = sp_top + 16; /* (its caller's evidence: accept.c) */
    for (size_t k = 0; k < *n; k++) {
        if (addr + SPAN_GAP < sp[k].start || addr > sp[k].end + SPAN_GAP)
            continue;
        if (addr < sp[k].start)
            sp[k].start = addr;
        if (end > sp[k].end)
            sp[k].end = end;
        sp[k].fragile |= fragile && pos < PYU_PLAN_EARLY;
        return; /* (inner: the first frame, met first) */
    }
    if (*n < PYU_PLAN_SPANS)
        sp[(*n)++] = (pspan){addr, end, pos, fragile && pos < PYU_PLAN_EARLY};
    /* (beyond: read when the walk meets it) */
}

bool pyu_plan_spans(pyu_sampler *sm, pyu_sthread *t)
{
    size_t fsize = sm->fsize;
    size_t n = t->nfr;
    /* (the innermost frames' ranges read twice, for accept.c; frame
     * objects, each a range of its own, all of them: objects.c) */
    bool objects = sm->s->off.object_frames;
    size_t early = objects ? SIZE_MAX : PYU_PLAN_EARLY;
    t->nspan = t->nearly = t->ncut = 0;
    if (!n)
        return false;
    pspan sp[PYU_PLAN_SPANS];
    size_t ns = 0;
    /* the current chunk, in two ranges: from a little below the innermost
     * frames it holds to a little past them (read first), then from its
     * start up to there */
    bool in_chunk = t->chunk && t->chunk_end;
    uint64_t top_end = 0, split = 0;
    size_t top_inner = 0, low_inner = 0;
    bool have_low = false;
    for (size_t i = 0; i < n; i++) { /* innermost first */
        uint64_t a = t->fr[i].r.addr;
        if (a > UINT64_MAX - STACK_MAX)
            return false;
        if (in_chunk && a >= t->chunk && a < t->chunk_end &&
            t->chunk_end - a >= fsize) {
            if (!top_end) {
                top_end = a + fsize + SLACK;
                if (top_end > t->chunk_end)
                    top_end = t->chunk_end;
                split = a;
                top_inner = i;
            } else if (i < PYU_PLAN_EARLY) {
                split = a < split ? a : split;
            } else if (!have_low) {
                have_low = true;
                low_inner = i;
            }
            continue;
        }
        add_frame(sp, &ns, a, t->fr[i].r.sp, fsize, i,
                  t->fr[i].r.owner >= PYU_OWNER_GENERATOR);
    }
    /* (3.9, 3.10: the frame objects met lately, the calls to come) */
    for (size_t k = 0; k < PYU_OBJ_RECENT && t->objs[k]; k++)
        if (t->objs[k] <= UINT64_MAX - STACK_MAX)
            add_frame(sp, &ns, t->objs[k], 0, fsize, n + k, false);
    if (top_end && ns + 2 <= PYU_PLAN_SPANS) {
        sp[ns++] = (pspan){split, top_end, top_inner, false};
        uint64_t low = t->chunk;
        if (split - low > PLAN_MAX / 2)
            low = split - PLAN_MAX / 2; /* (the rest as found) */
        if (have_low && split > low)
            sp[ns++] = (pspan){low, split, low_inner, false};
    }
    /* innermost first, the fragile ones of the innermost before the
     * others */
    for (size_t i = 1; i < ns; i++)
        for (size_t j = i; j > 0 && (sp[j].fragile > sp[j - 1].fragile ||
                                     (sp[j].fragile == sp[j - 1].fragile &&
                                      sp[j].inner < sp[j - 1].inner));
             j--) {
            pspan x = sp[j];
            sp[j] = sp[j - 1];
            sp[j - 1] = x;
        }
    size_t total = 0;
    for (size_t k = 0; k < ns; k++) {
        size_t len = (size_t)(sp[k].end - sp[k].start);
        if (sp[k].inner < early) /* (read twice) */
            len *= 2;
        if (len > PLAN_MAX - total)
            return false;
        total += len;
    }
    if (total > t->spancap) {
        uint8_t *b = realloc(t->spanbuf, total);
        if (!b)
            return false; /* (the frames are then read as they come) */
        t->spanbuf = b;
        t->spancap = total;
    }
    for (size_t k = 0, at = 0; k < ns; k++) {
        size_t len = (size_t)(sp[k].end - sp[k].start);
        t->span[k] = (pyu_chunk_span){sp[k].start, sp[k].end,
                                      t->spanbuf + at};
        at += len;
        if (sp[k].inner < early) {
            t->span2[k] = (pyu_chunk_span){sp[k].start, sp[k].end,
                                           t->spanbuf + at};
            at += len;
            t->nearly = k + 1;
        }
    }
    /* (the innermost frames' starts, the highest first: span_ranges()) */
    for (size_t i = 0; i < n && i < PYU_PLAN_EARLY && !objects; i++) {
        uint64_t a = t->fr[i].r.addr;
        size_t j = t->ncut++;
        for (; j > 0 && t->cut[j - 1] < a; j--)
            t->cut[j] = t->cut[j - 1];
        t->cut[j] = a;
    }
    t->nspan = ns;
    return true;
}

/* ------------------------------------------------------------- reads */

/* Room for need ranges in sm->ranges (the sample's reads). */
static bool ranges_for(pyu_sampler *sm, size_t need)
{
    if (need <= sm->capranges)
        return true;
    pyu_range *r = realloc(sm->ranges, need * sizeof *r);
    if (!r)
        return false;
    sm->ranges = r;
    sm->capranges = need;
    return true;
}


/* The ranges of a thread state at addr, copied into buf, into r: the
 * cache line that holds its current frame first, then the rest (3.11 and
 * 3.12, whose current frame is in the _PyCFrame: the whole state, one
 * range).  The read of that word is the sample's moment; the thread
 * writes other lines of its state as it calls and returns (the top of its
 * data stack, its recursion count), and a line copied before that word
 * takes the line from the thread's CPU: the thread stalls on its next
 * write there, in the middle of a call, and the word read right after is
 * likelier to name the caller.  Copied whole (one sweep need not fetch
 * its lines in the order of their addresses), a sort's callbacks (each a
 * microsecond, called from C) were current in fewer of the samples than
 * a stopped thread shows (3.14.10, `workloads.py sorting` read from
 * another CPU: 0.07-0.12 from --blocking, the test's bound 0.1;
 * 0.01-0.06 with its line first and popped frames of slots filled
 * again, accept.c).  On 3.12 the cframe's line first, then its loops'
 * words, was further from --blocking than the state in one range (0.16
 * against 0.10): kept so.  Returns how many ranges. */
static size_t tstate_ranges(const pyu_sampler *sm, uint64_t addr,
                            uint8_t *buf, pyu_range *r)
{
    const pyu_offsets *o = &sm->s->off;
    uint64_t end = addr + sm->tslen;
    if (sm->indirect || !PYU_HAS(o, ts_current_frame)) {
        r[0] = (pyu_range){addr, buf, sm->tslen};
        return 1;
    }
    uint64_t lo = (addr + PYU_OFF(o, ts_current_frame)) & ~(uint64_t)63;
    uint64_t hi = lo + 64;
    lo = lo < addr ? addr : lo;
    hi = hi > end ? end : hi;
    size_t n = 0;
    r[n++] = (pyu_range){lo, buf + (lo - addr), (size_t)(hi - lo)};
    if (lo > addr)
        r[n++] = (pyu_range){addr, buf, (size_t)(lo - addr)};
    if (hi < end)
        r[n++] = (pyu_range){hi, buf + (hi - addr), (size_t)(end - hi)};
    return n;
}

/* The ranges of t's recent cframes' current frames into r (3.11), for
 * the read with the thread state (which 0) or the one after the spans
 * (1).  They lie on the thread's C stack, a few hundred bytes apart: one
 * range over them when they are close, so that the words are read right
 * after the thread state names its cframe (a generator's eval loop lasts
 * about a microsecond; one range more is a good part of that), else a
 * range each, read into words.  Returns how many. */
static size_t cframe_ranges(const pyu_sampler *sm, pyu_sthread *t, int which,
                            pyu_range *r, uint64_t *words)
{
    uint64_t off = PYU_OFF(&sm->s->off, cframe_current_frame),
             prev = PYU_OFF(&sm->s->off, cframe_previous);
    uint64_t lo = UINT64_MAX, hi = 0, hi2 = 0;
    size_t m = 0;
    for (; m < PYU_CFRAMES && t->cframe[m]; m++) {
        uint64_t a = t->cframe[m] + off, b = t->cframe[m] + prev + 8;
        lo = a < lo ? a : lo;
        hi = a + 8 > hi ? a + 8 : hi;
        hi2 = b > hi2 ? b : hi2;
    }
    if (hi2 > hi && hi2 - lo <= PYU_CFWIN) /* (the loops' previous too) */
        hi = hi2;
    t->cfwin_len[which] = 0;
    if (m > 1 && hi - lo <= PYU_CFWIN &&
        (t->cfwin || (t->cfwin = malloc(2 * PYU_CFWIN)))) {
        t->cfwin_lo[which] = lo;
        t->cfwin_len[which] = (uint32_t)(hi - lo);
        r[0] = (pyu_range){lo, t->cfwin + which * PYU_CFWIN, hi - lo};
        return 1;
    }
    for (size_t k = 0; k < m; k++)
        r[k] = (pyu_range){t->cframe[k] + off, &words[k], 8};
    return m;
}

size_t pyu_plan_loop_of(const pyu_sthread *t, uint64_t cf)
{
    size_t k = 0;
    while (cf && k < PYU_CFRAMES && t->cframe[k] != cf)
        k++;
    return cf ? k : PYU_CFRAMES;
}

/* The 8 bytes at a of the copy of the cframes' stretch read with the
 * thread state into *w: false when it does not hold them. */
static bool in_cfwin(const pyu_sthread *t, uint64_t a, uint64_t *w)
{
    uint64_t lo = t->cfwin_lo[0], len = t->cfwin_len[0];
    if (!len || a < lo || a - lo > len - 8)
        return false;
    memcpy(w, t->cfwin + (a - lo), 8);
    return true;
}

uint64_t pyu_plan_loop_word(const pyu_sampler *sm, const pyu_sthread *t,
                            uint64_t cf)
{
    uint64_t w;
    return in_cfwin(t, cf + PYU_OFF(&sm->s->off, cframe_current_frame), &w)
               ? w
               : 0;
}

/* After the read (3.11): the current frame of the loop below ts's, from
 * the copy of the cframes' stretch that gave ts its current frame, into
 * ts->outer_frame (0 when the stretch does not hold it).  The frame that
 * entered ts's loop was linked to it then (_PyEval_EvalFrameDefault sets
 * an entry frame's previous to the current frame of the cframe it
 * interrupts), and that loop is suspended in a call of C code as long as
 * ts's runs: links.c tells by it a walk of ts's loop from one of another
 * loop whose copy took its place.  When ts's cframe's previous names no
 * loop the thread had lately (nor the thread state's root one), another C
 * function has its bytes there: ts's loop had ended (ts->loop_left; a
 * generator's that yielded, 0.95 of the samples of the loop of
 * workloads.py's produce). */
static void outer_frame(const pyu_sampler *sm, pyu_sthread *t,
                        pyu_tstate *ts)
{
    size_t k = pyu_plan_loop_of(t, ts->cframe);
    uint64_t below;
    if (!in_cfwin(t, ts->cframe + PYU_OFF(&sm->s->off, cframe_previous),
                  &below))
        return;
    if (pyu_plan_loop_of(t, below) == PYU_CFRAMES) {
        ts->loop_left = below - t->tstate >= 4096; /* (root_cframe: in
                                                       the thread state) */
        if (!ts->loop_left || k == PYU_CFRAMES)
            return;
        /* (the loop it was seen interrupt, else the nearest one up the
         * stack: links.c checks that it resumed its generator) */
        below = t->loop[k].below;
        for (size_t j = 0; !t->loop[k].below && j < PYU_CFRAMES; j++)
            if (t->cframe[j] > ts->cframe &&
                (!below || t->cframe[j] < below))
                below = t->cframe[j];
        if (!below)
            return;
    } else if (k < PYU_CFRAMES) {
        t->loop[k].below = below; /* (for when it has ended) */
    }
    if ((ts->outer_frame = pyu_plan_loop_word(sm, t, below)))
        ts->outer_cf = below;
}

/* After the read: the words of cframe_ranges()'s one range into words. */
static void cframe_words(const pyu_sampler *sm, const pyu_sthread *t,
                         int which, uint64_t *words)
{
    uint64_t off = PYU_OFF(&sm->s->off, cframe_current_frame);
    if (!t->cfwin_len[which])
        return;
    for (size_t k = 0; k < PYU_CFRAMES && t->cframe[k]; k++)
        memcpy(&words[k],
               t->cfwin + which * PYU_CFWIN +
                   (t->cframe[k] + off - t->cfwin_lo[which]),
               8);
}

/* The ranges that read t's current frame again, after its spans: in its
 * thread state, or (3.11) the thread state's cframe and the current
 * frame in each of the recent cframes (again_at() picks).  Returns how
 * many. */
static size_t again_ranges(const pyu_sampler *sm, pyu_sthread *t,
                           pyu_range *r)
{
    const pyu_offsets *o = &sm->s->off;
    if (!sm->indirect) {
        r[0] = (pyu_range){t->tstate + PYU_OFF(o, ts_current_frame),
                           &t->again, 8};
        return 1;
    }
    t->again_cf = 0;
    memset(t->again_at, 0, sizeof t->again_at);
    if (!t->cframe[0])
        return 0;
    r[0] = (pyu_range){t->tstate + PYU_OFF(o, ts_cframe), &t->again_cf, 8};
    return 1 + cframe_ranges(sm, t, 1, r + 1, t->again_at);
}

/* After the read (3.11): the current frame read again, in the cframe
 * the thread state named then (0 when it was not a recent one). */
static void again_at(const pyu_sampler *sm, pyu_sthread *t)
{
    if (!sm->indirect)
        return;
    cframe_words(sm, t, 1, t->again_at);
    t->again = 0;
    for (size_t k = 0; k < PYU_CFRAMES && t->again_cf; k++)
        if (t->cframe[k] == t->again_cf)
            t->again = t->again_at[k];
}

/* Puts cframe first in t's recent ones (3.11). */
static void cframe_seen(pyu_sthread *t, uint64_t cframe)
{
    if (!cframe)
        return;
    size_t k = 0;
    while (k + 1 < PYU_CFRAMES && t->cframe[k] != cframe)
        k++;
    struct pyu_loop_entry seen = {0};
    if (t->cframe[k] == cframe) /* (see links.c) */
        seen = t->loop[k];
    memmove(&t->cframe[1], &t->cframe[0], k * sizeof t->cframe[0]);
    memmove(&t->loop[1], &t->loop[0], k * sizeof t->loop[0]);
    t->cframe[0] = cframe;
    t->loop[0] = seen;
}

/* The ranges of the second copy of span e of t into r: in pieces cut
 * where its innermost frames started last time, the highest first, each
 * read upwards as the first copy is.  Returns how many.
 *
 * The first copy reads a caller's code and instruction, then its stack's
 * top, then the frame above, in that order; the second reads the frame
 * above first.  A copy that mixes two calls of a slot is torn a
 * different way in each order (accept.c), and a copy read right after
 * another in the same order is torn alike more often than by chance: a
 * loop whose turn lasts about as long as a copy meets each copy at the
 * same point of the turn. */
static size_t span2_ranges(const pyu_sthread *t, size_t e, pyu_range *r)
{
    const pyu_chunk_span *b = &t->span2[e];
    uint64_t hi = b->end;
    size_t n = 0;
    for (size_t i = 0; i < t->ncut; i++) {
        uint64_t c = t->cut[i];
        if (c <= b->start || c >= hi)
            continue;
        r[n++] = (pyu_range){c, (uint8_t *)b->local + (c - b->start),
                             (size_t)(hi - c)};
        hi = c;
    }
    r[n++] = (pyu_range){b->start, (uint8_t *)b->local, (size_t)(hi - b->start)};
    return n;
}

/* The ranges of t's spans into r: those that held its innermost frames
 * last time first (the frames most likely to move), then the current frame
 * again, then those ranges again (accept.c), then the rest.  Returns how
 * many.  (Frame objects, 3.9 and 3.10: every span is read again, the
 * outermost first, objects.c.) */
static size_t span_ranges(pyu_sthread *t, pyu_range *r,
                          const pyu_sampler *sm)
{
    size_t n = 0;
    bool objects = sm->s->off.object_frames;
    t->again = t->again_cf = 0;
    for (size_t k = 0; k <= t->nspan; k++) {
        if (k == t->nearly && t->nspan) {
            n += again_ranges(sm, t, r + n);
            for (size_t e = 0; e < t->nearly; e++)
                n += span2_ranges(t, objects ? t->nearly - 1 - e : e,
                                  r + n);
        }
        if (k < t->nspan)
            r[n++] = (pyu_range){t->span[k].start,
                                 (uint8_t *)t->span[k].local,
                                 (size_t)(t->span[k].end - t->span[k].start)};
    }
    return n;
}

int pyu_plan_batch(pyu_sampler *sm)
{
    pyu_session *s = sm->s;
    const pyu_offsets *o = &s->off;
    size_t need = 1 + sm->ninterps * 10 +
                  sm->nthreads * (6 + 2 * PYU_PLAN_SPANS + PYU_PLAN_EARLY +
                                  2 * PYU_CFRAMES),
           n = 0;
    if (!ranges_for(sm, need))
        return pyu_fail(&s->err, PYU_E_NOMEM, "out of memory");
    pyu_range *r = sm->ranges;
    for (size_t j = 0; j < sm->nthreads; j++) {
        pyu_sthread *t = &sm->threads[j];
        t->spans_read = t->win_read = false;
        if (pyu_fcache_window(sm, t)) {
            /* proven last time: its thread state, then the frames from
             * the anchored one up (frame_cache.c) */
            n += tstate_ranges(sm, t->tstate, sm->tsbuf + j * sm->tslen,
                               r + n);
            r[n++] = (pyu_range){t->win_lo, t->win, t->win_len};
            if (t->win2)
                r[n++] = (pyu_range){t->win_lo, t->win2, t->win_len};
            for (size_t i = 0; i < t->nwx; i++)
                r[n++] = (pyu_range){
                    t->wx[i].start, t->win + (t->wx[i].local - t->win),
                    (size_t)(t->wx[i].end - t->wx[i].start)};
            t->win_read = true;
        } else {
            n += tstate_ranges(sm, t->tstate, sm->tsbuf + j * sm->tslen,
                               r + n);
            /* 3.11: the current frame, in each cframe it had lately */
            if (sm->indirect)
                n += cframe_ranges(sm, t, 0, r + n,
                                   &sm->cfpeek[j * PYU_CFRAMES]);
            n += span_ranges(t, r + n, sm);
            t->spans_read = t->nspan > 0;
        }
    }
    /* the interpreters' fields after the threads': the range of an
     * interpreter's holds the line of its garbage collector's count, which
     * the thread writes at every allocation of a tracked object -- read
     * just before a thread state, the thread would stall on that write,
     * in the code that allocates, at the moment its state is copied, and
     * that code would be over-weighted (3.15 generators: a pipeline
     * stage that allocates was current in 0.18-0.33 of the samples
     * against 0.14 stopped; since, as stopped, bench/perf-check).  A new
     * interpreter is put at the head of the runtime's list: looked for
     * every HEAD_EVERY samples (the rest of the lists, every time) */
    uint64_t head = sm->head;
    bool check_head = sm->st.samples % HEAD_EVERY == 0;
    if (check_head)
        r[n++] = (pyu_range){s->runtime + PYU_OFF(o, rt_interpreters_head),
                             &head, 8};
    for (size_t i = 0; i < sm->ninterps; i++) {
        pyu_sinterp *si = &sm->interps[i];
        pyu_interp_plan(o, s->runtime, si->in.addr, &si->in, &si->ir);
        size_t k = 0;
        if (sm->ispan_len) { /* its fields in one range */
            r[n++] = (pyu_range){si->in.addr + sm->ispan_off,
                                 sm->ispan + i * sm->ispan_len,
                                 sm->ispan_len};
            k = si->ir.nlocal; /* (then the runtime's, 3.11) */
        }
        memcpy(r + n, si->ir.r + k, (si->ir.n - k) * sizeof *r);
        n += si->ir.n - k;
    }
    for (size_t j = 0; j < sm->nthreads; j++)
        sm->threads[j].taken = false;
    int rc = pyu_readv_quiet(s, r, n);
    if (rc == -PYU_E_NOPROC)
        return pyu_fail(&s->err, PYU_E_NOPROC, "the process has exited");
    if (rc < 0)
        return 0;
    /* link by link (every thread state is taken: where the lists differ,
     * the threads still in them keep what was read) */
    bool same = head == sm->head;
    for (size_t i = 0; i < sm->ninterps; i++) {
        pyu_sinterp *si = &sm->interps[i];
        for (size_t k = 0; sm->ispan_len && k < si->ir.nlocal; k++)
            memcpy(si->ir.r[k].buf,
                   sm->ispan + i * sm->ispan_len +
                       (si->ir.r[k].addr - si->in.addr - sm->ispan_off),
                   si->ir.r[k].len);
        uint64_t want_next =
            i + 1 < sm->ninterps ? sm->interps[i + 1].in.addr : 0;
        uint64_t want_head = si->n ? sm->threads[si->first].tstate : 0;
        if (si->in.next != want_next || si->in.threads_head != want_head)
            same = false;
        pyu_interp_take(s, &si->in, &si->ir);
        for (size_t j = si->first; j < si->first + si->n; j++) {
            pyu_sthread *t = &sm->threads[j];
            pyu_peek peek = {t->cframe, &sm->cfpeek[j * PYU_CFRAMES],
                             PYU_CFRAMES};
            if (sm->indirect) /* (3.11: never anchored) */
                cframe_words(sm, t, 0, &sm->cfpeek[j * PYU_CFRAMES]);
            pyu_tstate_take(s, &si->in, sm->extra_off, t->tstate,
                            sm->tsbuf + j * sm->tslen, sm->tslen,
                            &sm->recs[j], &sm->next[j],
                            sm->indirect ? &peek : NULL);
            if (sm->indirect)
                outer_frame(sm, t, &sm->recs[j]);
            /* (a thread state that names another thread now: a forked
             * child's, read before the child wrote its own ids in) */
            if (sm->recs[j].native_id != t->native_id ||
                sm->recs[j].thread_id != t->thread_id)
                same = false;
            if (t->spans_read)
                again_at(sm, t);
            cframe_seen(t, sm->recs[j].cframe);
            t->taken = true;
            uint64_t want =
                j + 1 < si->first + si->n ? sm->threads[j + 1].tstate : 0;
            if (sm->next[j] != want)
                same = false;
        }
    }
    return same;
}

int pyu_plan_snapshot(pyu_sampler *sm, const pyu_interp *in, pyu_sthread *t,
                      pyu_tstate *ts, uint8_t *tsbuf)
{
    pyu_session *s = sm->s;
    pyu_range r[5 + 2 * PYU_PLAN_SPANS + PYU_PLAN_EARLY + 2 * PYU_CFRAMES];
    uint64_t peek_words[PYU_CFRAMES] = {0};
    size_t n = 0, npeek = 0, nts;
    n += nts = tstate_ranges(sm, t->tstate, tsbuf, r);
    if (sm->indirect)
        n += npeek = cframe_ranges(sm, t, 0, r + n, peek_words);
    n += span_ranges(t, r + n, sm);
    int rc = pyu_readv_quiet(s, r, n);
    if (rc == -PYU_E_NOPROC)
        return pyu_fail(&s->err, PYU_E_NOPROC, "the process has exited");
    if (rc < 0) {
        /* (a span may have been freed: the thread state alone) */
        t->nspan = 0;
        t->again = t->again_cf = 0;
        rc = pyu_readv_quiet(s, r, nts + npeek);
        if (rc == -PYU_E_NOPROC)
            return pyu_fail(&s->err, PYU_E_NOPROC, "the process has exited");
        if (rc < 0)
            return 1;
    }
    uint64_t next;
    if (sm->indirect)
        cframe_words(sm, t, 0, peek_words);
    pyu_peek peek = {t->cframe, peek_words, PYU_CFRAMES};
    pyu_tstate_take(s, in, sm->extra_off, t->tstate, tsbuf, sm->tslen, ts,
                    &next, sm->indirect ? &peek : NULL);
    if (sm->indirect)
        outer_frame(sm, t, ts);
    again_at(sm, t);
    cframe_seen(t, ts->cframe);
    sm->st.snapshots++;
    return 0;
}

void pyu_plan_free(pyu_sampler *sm)
{
    for (size_t i = 0; i < sm->nthreads; i++)
        pyu_plan_thread_free(&sm->threads[i]);
    free(sm->threads);
    free(sm->interps);
    free(sm->ranges);
    free(sm->tsbuf);
    free(sm->next);
    free(sm->cfpeek);
    free(sm->recs);
    free(sm->ispan);
}
