/* The sampler: one stack per selected thread, again and again, into a
 * profile.  This file is the loop that joins its parts (sampling.h):
 *
 *   per sample   the one batched read of the read plan (read_plan.c);
 *   per thread   a 3.15 thread whose anchor proves its stack takes only
 *                its innermost frame (frame_cache.c); any other is walked
 *                in the snapshot its thread state came with (snapshot.c),
 *                on through the generators that had yielded by their copy
 *                (resume.c), and the walk is judged by the acceptance
 *                rules (accept.c); a walk whose links the copy lost is
 *                made again at the thread state's moment (links.c).  A
 *                walk that left the snapshot (frames not where the plan
 *                put them) or did not pass is read again from a fresh
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

#define RETRIES 2        /* fresh snapshots of a stack that did not pass */
#define OBJ_RETRIES 8    /* ... of a stack of frame objects (3.9, 3.10) */
#define VALIDATE_MAX 64  /* code objects checked again per sample (3.13) */

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
           (sm->o.mode == PYU_MODE_CPU || (sm->o.flags & PYU_SAMPLE_CPU_STATUS)
                ? PYU_STATUS_ON_CPU
                : 0u);
}

/* 3.11 and 3.12: the thread state names an eval loop's _PyCFrame (not
 * its root one) whose current frame reads as none.  A loop has a frame
 * from its first instructions to its last but a few: its word read so was
 * read in those few instructions, or after the loop had ended and its C
 * stack was reused (a callback of C code, read from a running thread).
 * Not a thread without Python frames, as the zero alone would say: the
 * stack is read again. */
static bool loop_without_frame(const pyu_session *s, const pyu_tstate *ts)
{
    return !ts->current_frame && ts->cframe &&
           PYU_HAS(&s->off, ts_root_cframe) &&
           ts->cframe != ts->addr + PYU_OFF(&s->off, ts_root_cframe);
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

/* ----------------------------------------------- 3.15: the anchor */

/* The stack from the frame the anchor names down as cached, the frames
 * above it walked in the window and judged by the rules (frame_cache.c).
 * 1 when taken (committed), 0 when not, -1 on an error. */
static int from_anchor(pyu_sampler *sm, pyu_sthread *t, const pyu_tstate *ts)
{
    size_t k = pyu_fcache_proven(t, ts);
    if (!k--)
        return 0;
    int rc = pyu_snap_walk_window(sm, t, ts->current_frame, k);
    if (rc <= 0)
        return rc;
    if (rc == 2) { /* (that frame as cached, its line the last sample's) */
        t->nfr = 0;
        return pyu_fcache_take(sm, t, ts, k + 1);
    }
    sm->one_copy = true; /* (reset by the caller) */
    long ok = t->nfr > 1 ? pyu_accept_links(sm, t->fr, t->nfr)
                         : (long)t->nfr;
    if (ok < 0)
        return -1;
    if ((size_t)ok < t->nfr && t->nfr - (size_t)ok <= t->npopped)
        ok = pyu_snap_drop_popped(t, t->nfr - (size_t)ok);
    if ((size_t)ok != t->nfr)
        return 0;
    pyu_snap_note_popped(sm, t);
    return pyu_fcache_take(sm, t, ts, k + 1);
}

/* The stack of a thread whose current frame's slot held another call by
 * its copy (snapshot.c): the frames of the data stack below that slot at
 * the thread state's moment, with the innermost frames of a stack met
 * lately in that slot on top, or <unknown> when none fits.  1 when taken,
 * 0 when the frames below could not be told, -1 on an error. */
static int reused_slot(pyu_sampler *sm, pyu_sthread *t, const pyu_tstate *ts,
                       bool spans, thread_read *r)
{
    sm->st.reused++;
    uint64_t under = pyu_snap_frame_under(sm, t, ts, ts->current_frame);
    t->nfr = 0;
    if (!under)
        return 0;
    if (pyu_links_walk_whole(sm, t, ts, under, spans) < 0)
        return -1;
    int ok = pyu_links_judge(sm, t, ts, r);
    if (ok <= 0 || t->fr[0].r.addr != under) {
        t->nfr = 0;
        return ok < 0 ? -1 : 0;
    }
    struct pyu_slot_call x;
    if (!pyu_snap_slot_call(sm, t, ts->current_frame,
                            ts->ds_top - ts->current_frame, t->fr[0].r.code,
                            NULL, 0, NULL, &x)) {
        r->leaf_unknown = true;
        return 1;
    }
    return pyu_snap_put_slot_call(sm, t, r, &x) < 0 ? -1 : 1;
}

/* Reads the stack of one thread of frame objects (3.9, 3.10): the chain
 * in the batch's copies, then in fresh snapshots of the thread alone
 * until one passes (objects.c) or the tries run out; what passed is
 * counted whole, else the thread with <unknown>. */
static int read_objects(pyu_sampler *sm, const pyu_interp *in,
                        pyu_sthread *t, pyu_tstate *ts, uint8_t *tsbuf,
                        thread_read *r)
{
    pyu_session *s = sm->s;
    bool spans = t->spans_read;
    for (unsigned tries = 0;; tries++) {
        if (tries) {
            int rc = pyu_plan_snapshot(sm, in, t, ts, tsbuf);
            if (rc < 0)
                return -1;
            r->status = pyu_status_of(s, in, ts, status_wanted(sm));
            if (!selected(sm, ts, r->status)) {
                r->what = THREAD_SKIP;
                return 0;
            }
            if (!ts->current_frame) {
                r->what = THREAD_SKIP;
                t->cache.valid = false;
                return 0;
            }
            spans = rc == 0;
        }
        int ok = pyu_objects_walk(sm, t, ts, spans);
        if (ok < 0)
            return -1;
        r->what = THREAD_READ;
        r->ok = ok ? (long)t->nfr : 0;
        if (ok)
            return 0;
        sm->st.torn++;
        if (tries == OBJ_RETRIES)
            return 0;
        /* (the next try reads where this walk found the frames) */
        if (t->nfr)
            pyu_plan_spans(sm, t);
    }
}

/* When t's walk from the loop the thread state named, tried again and
 * again, never reached the loop below it (3.11, 3.12: that loop had not
 * linked its first frame yet, and its word led to stack garbage, to a
 * frame the last loop at its place had left, or to that loop's entry
 * frame), the walk of the loop below, which the C stack tells
 * (pyu_cframe_above): the stack of that moment, judged by the rules as
 * any other.  1 when it passed (r->ok set), 0 when not, -1 on an error.
 * (A 3.12 process sorting with Python key functions had 1 % of its
 * samples fail there, --blocking ones too: a stopped thread is read at
 * the same moment each time.) */
static int from_loop_below(pyu_sampler *sm, pyu_sthread *t,
                           const pyu_tstate *ts, bool spans, thread_read *r)
{
    uint64_t cf, word;
    if (!sm->indirect || !ts->cframe ||
        !pyu_cframe_above(sm->s, t->tstate, ts->cframe, &cf, &word))
        return 0;
    for (size_t i = 0; i < t->nfr; i++)
        if (t->fr[i].r.addr == word || t->fr[i].r.prev == word)
            return 0; /* (it did: torn, not unlinked) */
    pyu_tstate below = *ts;
    below.cframe = cf;
    below.current_frame = word;
    below.outer_frame = below.outer_cf = 0;
    below.loop_left = false;
    if (pyu_links_walk_whole(sm, t, &below, word, spans) < 0)
        return -1;
    int ok = pyu_links_judge(sm, t, &below, r);
    sm->st.unlinked += ok > 0;
    return ok;
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
    r->leaf_unknown = r->imputed = false;
    r->in = in;
    r->status = pyu_status_of(s, in, ts, status_wanted(sm));
    if (!selected(sm, ts, r->status))
        return 0;
    bool unlooped = loop_without_frame(s, ts);
    if (!ts->current_frame && !unlooped) {
        t->cache.valid = t->cache.anchored = false;
        return 0; /* (no Python frames) */
    }
    if (s->off.object_frames)
        return read_objects(sm, in, t, ts, tsbuf, r);
    if (sm->anchors && !unlooped) {
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
    if (t->win_read && t->taken && !t->spans_read && !unlooped)
        t->spans_read = pyu_snap_window_spans(t);
    bool spans = t->spans_read && !unlooped;
    bool moment = !spans && t->taken && !unlooped;
    /* (frames read with the window, outside it, and those the walk met
     * beyond it were copied once: accept.c wants more of their links) */
    bool one_copy = spans && t->win_read;
    unsigned tries = 0;
    for (;;) {
        if (!spans && !moment) { /* a snapshot of this thread alone */
            int rc = pyu_plan_snapshot(sm, in, t, ts, tsbuf);
            if (rc < 0)
                return -1;
            r->status = pyu_status_of(s, in, ts, status_wanted(sm));
            if (!selected(sm, ts, r->status))
                return 0;
            if (loop_without_frame(s, ts)) {
                sm->st.torn++;
                if (tries++ < RETRIES)
                    continue;
                /* (a sample that failed, not a thread without frames) */
                t->nfr = 0;
                r->ok = 0;
                r->what = THREAD_READ;
                return 0;
            }
            if (!ts->current_frame) {
                t->cache.valid = false;
                return 0;
            }
            spans = rc == 0;
        }
        sm->spare_from = s->reads;
        sm->one_copy = one_copy;
        one_copy = false;
        /* (frames the spans did not hold are read as the walk meets
         * them: a snapshot of its own would be another moment) */
        moment = false;
        if (pyu_links_walk_whole(sm, t, ts, ts->current_frame, spans) < 0)
            return -1;
        r->what = THREAD_READ;
        if (t->reused) {
            int rc = reused_slot(sm, t, ts, spans, r);
            if (rc)
                return rc < 0 ? -1 : 0;
        }
        int ok = pyu_links_judge(sm, t, ts, r), rc;
        if (ok > 0)
            pyu_links_learn_shim(sm, t, ts);
        if (!ok && sm->indirect && !r->ok &&
            (ok = pyu_links_from_entry(sm, t, ts, spans, r)) > 0)
            sm->st.entered++; /* (no frame in the loop's word) */
        if (!ok && (ok = pyu_links_from_shim(sm, t, ts, spans, r)) > 0)
            sm->st.entered++; /* (3.12: the word gone by its copy) */
        if (ok > 0 && (rc = pyu_links_settle(sm, t, ts, spans, r)) != 0) {
            if (rc < 0)
                return -1;
            ok = 0; /* (of another loop) */
        }
        if (!ok && (ok = pyu_links_from_below(sm, t, ts, spans, r)) > 0)
            sm->st.grafted++;
        if (!ok && (ok = pyu_links_as_met(sm, t, ts, spans, r)) < 0)
            return -1;
        if (!ok && (ok = pyu_snap_slot_between(sm, t, ts, r)) < 0)
            return -1;
        if (ok)
            return ok < 0 ? -1 : 0;
        /* the current frame as read right after the innermost frames,
         * walked in the copies made after it: the stack the thread moved
         * to meanwhile, on which the frames the first walk found are put
         * back when they ended after its read.  (The same frame again is
         * worth the walk: a generator's frame that had yielded when first
         * copied is often resumed, by the same caller, by the second.) */
        if (spans && t->again && !pyu_spent(sm) &&
            (t->again != ts->current_frame || t->nearly)) {
            pyu_snap_swap_walks(t);
            /* (in the copies made after the current frame was read again:
             * the second of the early spans, then the rest) */
            swap_early(t);
            int rc = pyu_links_walk_whole(sm, t, ts, t->again, spans);
            swap_early(t);
            if (rc < 0 || (ok = pyu_links_judge(sm, t, ts, r)) < 0)
                return -1;
            if (ok) {
                size_t before = t->nfr;
                if (pyu_links_graft(sm, t, ts) < 0 ||
                    (t->nfr == before &&
                     pyu_links_later_top(sm, t, ts, spans, r) < 0))
                    return -1;
                r->ok = (long)t->nfr;
                sm->st.later++;
                return 0;
            }
        }
        sm->st.torn++;
        if (tries++ == RETRIES)
            return from_loop_below(sm, t, ts, spans, r) < 0 ? -1 : 0;
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
    long th = pyu_profile_add_process_thread(sm->p, sm->process, thread_id,
                                             native_id, interp, main);
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
        if (ok > t->nfr) /* (never: each rescue restores what it tried) */
            ok = 0;
        pyu_plan_note_chunk(sm, t, ts->chunk); /* (settle looks at it) */
        unknown = ok < t->nfr || !t->nfr || r->leaf_unknown;
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
        /* (a walk of entry frames alone, no Python frame among them: a
         * sample that failed, never a thread shown with no frames) */
        if (!unknown && pyu_fcache_leaf(sm, t, false, 0) == 0)
            unknown = true;
        if (r->imputed) {
            /* (frames of an earlier stack on top: no anchor on them) */
            sm->st.cache_miss++;
            t->cache.anchored = false;
        } else if (!unknown) {
            sm->st.cache_miss++;
            sm->st.unproven++;
            pyu_fcache_settle(sm, t, ts);
        } else {
            /* (a stack with <unknown> on it, on its outer frames or
             * alone, is a sample that failed: never a clean one) */
            t->cache.anchored = false;
            sm->st.unknown++;
            *failed = true;
            if (!t->cache.n)
                t->cache.valid = false;
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
    if (r->what == THREAD_READ && r->imputed)
        t->cache.valid = false; /* (the next sample reads them again) */
    return 1;
}

/* Adds code object `code` to the n of addr to check, once, when its record
 * is cached; false when there is no room for it. */
static bool to_check(pyu_session *s, uint64_t *addr, size_t *n,
                     uint64_t code)
{
    if (!code || !pyu_code_cached(s, code))
        return true;
    for (size_t v = 0; v < *n; v++)
        if (addr[v] == code)
            return true;
    if (*n == VALIDATE_MAX)
        return false;
    addr[(*n)++] = code;
    return true;
}

/* 3.13 does not report freed code objects: the records the sample's
 * stacks were read with must still describe the objects at their
 * addresses (the same type, names, location table and first line), read
 * again now; when one does not, or there are too many to check, the
 * caches are flushed and names are read anew.  The code object that
 * judged a current frame's copy another call's (its size) is checked
 * too: a record of what lay at its address before, kept, would judge so
 * at every sample. */
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
            if (f->owner < PYU_OWNER_ENTRY)
                flush = !to_check(s, addr, &n, f->code);
        }
        if (!flush)
            flush = !to_check(s, addr, &n, t->reused_code);
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

/* The thread this sample found running Python: the GIL's holder, else
 * (a free-threaded build, the GIL between holders) the first thread with
 * a stack; 0 when none. */
static uint64_t running_thread(const pyu_sampler *sm, const thread_read *r)
{
    uint64_t first = 0;
    for (size_t j = 0; j < sm->nthreads; j++) {
        const pyu_sthread *t = &sm->threads[j];
        if (r[j].what == THREAD_SKIP || !t->cache.valid || !t->cache.n)
            continue; /* (the stacks as counted: cached or read) */
        if (sm->recs[j].holds_gil)
            return sm->recs[j].native_id;
        if (!first)
            first = sm->recs[j].native_id;
    }
    return first;
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
            t->reused_code = 0;
            int rc = read_thread(sm, &si->in, t, &sm->recs[j],
                                 sm->tsbuf + j * sm->tslen, &r[j]);
            sm->one_copy = false;
            if (rc < 0)
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
    sm->running = running_thread(sm, r);
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
        /* (the code object's names alone: a frame's line and position
         * are the profile's, by instruction, not read here) */
        const pyu_code *c = pyu_walk_code(s, &w->frames[i]);
        if (!c)
            return w->err = -PYU_E_STATE, 2;
        long func = pyu_profile_add_func(sm->p, c->qualname, c->filename,
                                         c->firstlineno,
                                         PYU_FUNC_PYTHON);
        /* (the instruction in the code object's own bytecode: a thread's
         * copy, on free-threaded builds, runs the same instructions) */
        long fr = func < 0 ? func
                           : pyu_sampler_add_frame(sm, (uint32_t)func, c,
                                       w->frames[i].instr,
                                       c->code_bytes
                                           ? c->code_bytes
                                           : c->addr + PYU_OFF(&s->off,
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
    sm->shims = sm->indirect && !PYU_HAS(off, fr_is_entry);
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
    pyu_process ti = {0};
    pyu_target(s, &ti);
    if (!pyu_profile_get(p)->nprocesses) /* (the first target's) */
        pi->process = ti;
    pi->mode = o->mode;
    pi->flags = o->flags;
    pyu_profile_clock_start(p);
    long proc = pyu_profile_add_process(p, ti.pid, NULL, ti.python,
                                        ti.free_threaded,
                                        pyu_profile_clock(p));
    if (proc < 0) {
        free(sm);
        return pyu_err_set(&s->err, PYU_E_NOMEM, "out of memory");
    }
    sm->process = (uint32_t)proc;
    if (!s->ops->thread_name || s->pid <= 0 ||
        s->ops->thread_name(s->ctx, (uint64_t)s->pid, sm->proc_name,
                            sizeof sm->proc_name) < 0)
        sm->proc_name[0] = 0;
    sm->memo_epoch = s->code_epoch;
    *out = sm;
    return 0;
}

/* Whether each sample is a pyu_walk: with PYU_SAMPLE_ASYNC. */
static bool walked(const pyu_sampler *sm)
{
    return sm->o.flags & PYU_SAMPLE_ASYNC;
}

static int take(pyu_session *s, void *arg)
{
    pyu_sampler *sm = arg;
    if (walked(sm))
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
    pyu_profile_sampling(sm->p, sm->process);
    if ((sm->o.flags & PYU_SAMPLE_BLOCKING) && !walked(sm))
        rc = pyu_paused(s, take, sm);
    else
        rc = take(s, sm); /* pyu_walk stops the target itself, if asked */
    if (rc < 0 && s->err.code == PYU_E_NOPROC)
        return -PYU_E_NOPROC; /* (no moment of it to count) */
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

int pyu_sampler_cpu(pyu_sampler *sm, int *cpu)
{
    pyu_session *s = sm ? sm->s : NULL;
    if (!s || !cpu || !sm->running || !s->ops->thread_cpu)
        return -PYU_E_STATE;
    return s->ops->thread_cpu(s->ctx, sm->running, cpu) < 0 ? -PYU_E_STATE
                                                           : 0;
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
