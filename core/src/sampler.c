/* The sampler: one stack per selected thread, again and again, into a
 * profile, reading as little of the target as can be proven enough.
 *
 * Steady state (the threads the last sample found are still there): one
 * read of the target per sample brings the runtime's interpreter list
 * head, each interpreter's fields, and for each thread its thread state,
 * the frame at the address its innermost frame had last time, and its
 * current frame and sequence number again.  The lists are checked link by
 * link against the prediction; any difference sends the sample through
 * the full iterator (threads.c), which sets up the next prediction.
 *
 * Proof (CPython 3.15).  The thread state carries an anchor,
 * last_profiled_frame, and a sequence number: when the frame the anchor
 * names returns or yields, the interpreter moves the anchor to its caller
 * and adds one to the sequence.  If a read of the thread state finds the
 * anchor naming the current frame C, and a later read finds the current
 * frame still C and the sequence unchanged, then C was not popped in
 * between: every frame below it stayed as it was, and a stack read in
 * that interval is one the thread really had.  Such a stack is cached;
 * later, an anchor equal to the frame at position i-k of it with the
 * sequence k further proves that exactly k anchored frames were popped
 * and that the frames below i-k are still the ones cached: a sample whose
 * current frame is that anchor reads that one frame and takes the rest
 * from the cache.  When the anchor does not name the current frame, the
 * sampler writes it there (the one write it makes to a target) and reads
 * the stack again under it.  Frame addresses are reused (the ABA problem
 * the sequence number exists for): the rules above never trust an address
 * alone.
 *
 * Without a writable anchor (3.13, 3.14, PYU_SAMPLE_READ_ONLY or _NO_CACHE)
 * nothing proves a stack read from a running thread: each sample reads the
 * whole chain, reads its innermost frames and the current frame again, and
 * leaves the stack out when they changed (best effort; counted in
 * stats.unproven).  In the steady state that is two reads a sample: the
 * batch brings, with each thread state, the memory where the frames of
 * its last stack lay (plan_prefix: its chunk up to a little past the
 * innermost frame, older chunks, entry frames), and one more read brings
 * every thread's second copies (take_best).  Frames identical to the last
 * sample's at the same depth (same frame, code object and instruction,
 * under an unchanged code epoch, everything below identical too) keep
 * their profile node without being resolved again.  3.13 does not report
 * freed code objects: the cached ones of a stack are read again with its
 * second copies and the caches flushed when one changed (code_note).
 */
#include "internal.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define SINGLE_READS 3      /* frames read one by one before the chunks */
#define RECHECK 3           /* innermost frames read twice (best effort) */
#define TAIL_MAX 256        /* the thread state words read again */
#define MEMO_MAX (1u << 16) /* (code, instruction) -> frame memo entries */
#define PROOF_TRIES 2       /* writes of the anchor for one stack */
#define HEAD_EVERY 16       /* samples between reads of the interpreter
                               list's head */
#define ISPAN_MAX 4096      /* an interpreter's fields read as one range
                               when they lie this close */
#define OWNER_FIRST_SHIM 3
#define PREFIX_SLACK 1024   /* bytes past the innermost frame read with the
                               chunk prefix: room for a few more frames */
#define PREFIX_MAX (64u << 10)
#define PREFIX_SPANS 6      /* ranges of a stack read with its thread state:
                               the chunk prefix, then older chunks' frames
                               and entry frames on the C stack */
#define SPAN_GAP 4096       /* frames this close share a range */
#define VALIDATE_MAX 64     /* code objects checked again per sample (3.13) */

/* A frame read in this sample. */
typedef struct fresh {
    uint64_t addr, code, ip; /* ip: instr_ptr, the tlbc index mixed in */
    uint64_t prev;
    uint64_t instr_ptr;
    int32_t tlbc;
    uint8_t owner;
    bool entry; /* 3.11: the first frame of an eval loop C code called */
} fresh;

/* One thread: its place in the profile and its frame cache. */
typedef struct sthread {
    uint64_t tstate, thread_id, native_id;
    long pthread;   /* profile thread, or -1 before its first stack */
    /* the stack of the last good sample, base first */
    uint64_t *addr, *code, *ip; /* owned */
    uint32_t *node;             /* node of the stack up to each frame */
    size_t n, cap;
    uint64_t epoch; /* code epoch of the ip-based matches */
    bool valid;
    bool anchored;      /* proven: the anchor named its innermost frame */
    uint64_t seq;       /* ... with this sequence number */
    bool wrote;         /* we wrote its anchor */
    uint64_t chunk, chunk_end;  /* its current data-stack chunk */
    uint64_t cframe;    /* 3.11: its _PyCFrame last time */
    /* without anchors: where the frames of its last stack lay, read with
     * its thread state (see plan_prefix) */
    pyu_chunk_span pre[PREFIX_SPANS]; /* (local: in prebuf) */
    size_t npre;
    uint8_t *prebuf;    /* owned */
    size_t precap;
    bool pre_fresh;     /* read in this sample's batch */
    /* the walk of this sample, checked with every thread's (take_best) */
    fresh *fr;          /* owned */
    size_t frcap;
    long nf;            /* frames walked, 0: none, WALK_TORN, or NOT_WALKED */
    unsigned status;
} sthread;

/* A (code object, instruction) -> profile frame memo. */
typedef struct memo_slot {
    uint64_t code; /* 0: free */
    uint64_t ip;
    long frame;    /* profile frame, or -1: not Python code */
} memo_slot;

/* One interpreter of the prediction. */
typedef struct sinterp {
    pyu_interp in;
    pyu_interp_read ir;
    size_t first, n; /* its threads in sm->threads */
} sinterp;

struct pyu_sampler {
    pyu_session *s;
    pyu_profile *p;
    pyu_sampler_opts o;
    pyu_sampler_stats st;
    bool anchors;       /* the target has anchors and we may write them */
    bool read_anchors;  /* the target has anchors (3.15.0b4+) */
    bool code_gen;      /* the target reports freed code objects */
    /* ... else (3.13) the cached code objects of a stack are read again
     * with its recheck (see read_best) */
    size_t cf_off, cf_len;
    uint64_t vaddr[VALIDATE_MAX];
    size_t nv;      /* code objects to check in vaddr */
    bool vflush;    /* too many: the caches are flushed instead */
    uint8_t *cfbuf; /* VALIDATE_MAX copies of cf_len */
    uint64_t extra_off[2];
    size_t fsize, tslen;
    size_t tail_off, tail_len; /* current_frame .. the anchor's sequence */
    size_t tail_word;   /* current_frame, or 3.11's cframe */
    bool indirect;      /* 3.11: the current frame is in the _PyCFrame */
    long gc_frame, native_frame; /* profile frames of <GC>, <native> */
    char proc_name[64];          /* the process's name: a thread with the
                                    same name has none of its own */
    /* the prediction: interpreters and threads in list order */
    sinterp *interps;
    size_t ninterps, capinterps;
    sthread *threads;
    size_t nthreads, capthreads;
    bool predicted;
    bool reread;   /* the thread state was read again with its stack */
    uint8_t *ispan; /* each interpreter's fields, one range each */
    size_t ispan_off, ispan_len; /* (0: the fields are far apart) */
    uint64_t head; /* the runtime's interpreter list head, as read */
    /* per-sample buffers */
    pyu_range *ranges;
    size_t capranges;
    uint8_t *tsbuf;   /* nthreads thread state copies */
    uint8_t *pfbuf;   /* nthreads copies of the predicted innermost frame */
    uint8_t *rcbuf;   /* nthreads x RECHECK second copies (take_best) */
    size_t captsbuf;
    uint64_t *next; /* each thread state's next, as read */
    uint64_t *cfpeek; /* 3.11: each thread's current frame, read ahead at
                         its last cframe, then with its second copy */
    pyu_tstate *recs;
    fresh *fresh;   /* one chain */
    size_t capfresh;
    uint8_t *prefix; /* a chunk's frames, read with a thread state */
    size_t capprefix;
    memo_slot *memo;
    size_t memocap, memon;
    uint64_t memo_epoch;
    uint8_t frame_copy[PYU_BUF_FRAME];
    uint8_t recheck[RECHECK][PYU_BUF_FRAME]; /* second copies */
};

/* ------------------------------------------------------------------ memo */

static void memo_clear(pyu_sampler *sm)
{
    if (sm->memo)
        memset(sm->memo, 0, sm->memocap * sizeof *sm->memo);
    sm->memon = 0;
    sm->memo_epoch = sm->s->code_epoch;
}

static inline memo_slot *memo_find(pyu_sampler *sm, uint64_t code,
                                   uint64_t ip, bool *found)
{
    size_t i = pyu_slot(code ^ (ip << 7) ^ (ip >> 29), sm->memocap);
    for (;; i = (i + 1) & (sm->memocap - 1)) {
        memo_slot *m = &sm->memo[i];
        if (!m->code) {
            *found = false;
            return m;
        }
        if (m->code == code && m->ip == ip) {
            *found = true;
            return m;
        }
    }
}

/* The profile frame of function func at instruction instr of c (in the
 * bytecode at `bytecode` in the target): with PYU_SAMPLE_OPCODES one per
 * instruction, named as the target runs it; else one per line. */
static long add_frame(pyu_sampler *sm, uint32_t func, const pyu_code *c,
                      uint32_t instr, uint64_t bytecode)
{
    int line = pyu_code_line(c, instr);
    if (!(sm->o.flags & PYU_SAMPLE_OPCODES))
        return pyu_profile_add_frame(sm->p, func, line);
    if (instr == PYU_INSTR_UNKNOWN)
        return pyu_profile_add_instr_frame(sm->p, func, line, -1, "", "");
    const char *op, *base;
    pyu_code_opcode(sm->s, bytecode, &instr, &op, &base);
    return pyu_profile_add_instr_frame(sm->p, func, line, (int)instr, op,
                                       base);
}

/* The profile frame a Python frame ran: -1 when its executable is not a
 * code object (not a Python frame), -2 on an error (record set). */
static long frame_of(pyu_sampler *sm, const fresh *f)
{
    pyu_session *s = sm->s;
    if (sm->memo_epoch != s->code_epoch || sm->memon * 2 >= sm->memocap) {
        if (sm->memon * 2 >= sm->memocap && sm->memocap < MEMO_MAX) {
            size_t ncap = sm->memocap ? sm->memocap * 2 : 1024;
            memo_slot *nm = calloc(ncap, sizeof *nm);
            if (!nm) {
                pyu_fail(&s->err, PYU_E_NOMEM, "out of memory");
                return -2;
            }
            free(sm->memo);
            sm->memo = nm;
            sm->memocap = ncap;
        }
        memo_clear(sm);
    }
    bool found;
    memo_slot *m = memo_find(sm, f->code, f->ip, &found);
    if (found)
        return m->frame;
    bool is_code;
    const pyu_code *c = pyu_code_get(s, f->code, &is_code);
    long frame = -1;
    if (c && pyu_code_incomplete(s, c, f->owner, f->instr_ptr)) {
        frame = -1; /* (3.11: not shown until its first instruction) */
    } else if (c) {
        uint32_t instr = pyu_code_instr(s, c, f->instr_ptr, f->tlbc);
        long func = pyu_profile_add_func(sm->p, c->qualname, c->filename,
                                         c->firstlineno, PYU_FUNC_PYTHON);
        frame = func < 0 ? func
                         : add_frame(sm, (uint32_t)func, c, instr,
                                     f->instr_ptr - 2 * (uint64_t)instr);
        if (frame < 0) {
            pyu_fail(&s->err, PYU_E_NOMEM, "out of memory");
            return -2;
        }
    } else if (is_code) {
        return -2;
    }
    if (sm->memo_epoch != s->code_epoch) /* pyu_code_get flushed */
        memo_clear(sm);
    if (frame < 0 && !sm->code_gen)
        return frame; /* (a memo entry is one of a code record read_best
                         checks: see there) */
    m = memo_find(sm, f->code, f->ip, &found);
    *m = (memo_slot){f->code, f->ip, frame};
    sm->memon++;
    return frame;
}

/* ---------------------------------------------------------------- threads */

static void thread_free(sthread *t)
{
    free(t->prebuf);
    free(t->fr);
    free(t->addr);
    free(t->code);
    free(t->ip);
    free(t->node);
}

/* Outcome of reading a stack. */
enum { STACK_OK = 0, STACK_TORN = 1, STACK_EMPTY = 2 };

/* walk_chain's failures (an error is not a torn chain: -STACK_TORN was
 * -1 too, which made every torn chain end the whole sample) */
enum { WALK_ERROR = -1, WALK_TORN = -2, NOT_WALKED = -3 };

/* Decodes the frame fields the sampler uses from a copy. */
static inline void take_frame(const pyu_offsets *o, size_t fsize,
                              uint64_t addr, const uint8_t *buf, fresh *f)
{
    f->addr = addr;
    f->owner = pyu_u8(buf, fsize, PYU_OFF(o, fr_owner));
    f->code = pyu_u64(buf, fsize, PYU_OFF(o, fr_executable)) & ~o->tag_mask;
    f->instr_ptr = pyu_u64(buf, fsize, PYU_OFF(o, fr_instr_ptr));
    f->tlbc = o->free_threaded && PYU_HAS(o, fr_tlbc_index)
                  ? (int32_t)pyu_u32(buf, fsize, PYU_OFF(o, fr_tlbc_index))
                  : 0;
    f->ip = f->instr_ptr ^ ((uint64_t)(uint32_t)f->tlbc << 48);
    f->prev = pyu_u64(buf, fsize, PYU_OFF(o, fr_previous));
    f->entry = PYU_HAS(o, fr_is_entry) &&
               pyu_u8(buf, fsize, PYU_OFF(o, fr_is_entry)) != 0;
}

/* The words of the thread state read again after its frames: its current
 * frame and the anchor's sequence number. */
static void tail_words(const pyu_sampler *sm, const uint8_t *tail,
                       uint64_t *current, uint64_t *seq)
{
    const pyu_offsets *o = &sm->s->off;
    *current = pyu_u64(tail, sm->tail_len, sm->tail_word - sm->tail_off);
    *seq = sm->read_anchors
               ? pyu_u64(tail, sm->tail_len,
                         PYU_OFF(o, ts_last_profiled_frame_seq) - sm->tail_off)
               : 0;
}

/* Where the frames of one chain come from, in order of preference: a copy
 * read with the thread state, the chunk prefix read with it, the chunk
 * copies (chunks.c), a read of its own. */
typedef struct source {
    const uint8_t *pf;   /* the predicted innermost frame's copy, or NULL */
    uint64_t pf_addr;
    const pyu_chunk_span *pre; /* ranges read with the thread state */
    size_t npre;
    pyu_chunk_span span; /* a copied chunk (prefix) */
    bool chunks;         /* the chunk copies are started */
    size_t singles;
    bool after;          /* a frame was read after the tail */
} source;

/* Walks the chain from `first` into *out, until `stop` (inclusive)
 * or the base frame.  Returns the number of frames, or WALK_TORN, or
 * WALK_ERROR on an error that ends the sample (record set). */
static long walk_chain(pyu_sampler *sm, const pyu_tstate *ts, uint64_t first,
                       uint64_t stop, source *src, fresh **out, size_t *cap)
{
    pyu_session *s = sm->s;
    const pyu_offsets *o = &s->off;
    size_t fsize = sm->fsize, nf = 0;
    cycle cyc = {0, 1, 0};
    for (uint64_t frame = first; frame;) {
        if (nf >= PYU_MAX_FRAMES || cycle_step(&cyc, frame))
            return WALK_TORN;
        if (nf == *cap && !pyu_grow((void **)out, nf, cap, sizeof **out))
            return pyu_fail(&s->err, PYU_E_NOMEM, "out of memory"),
                   WALK_ERROR;
        pyu_chunk_span *sp = &src->span;
        const uint8_t *buf = NULL;
        if (src->pf && frame == src->pf_addr)
            buf = src->pf;
        else if (frame >= sp->start && frame < sp->end &&
                 sp->end - frame >= fsize)
            buf = sp->local + (frame - sp->start);
        for (size_t k = 0; !buf && k < src->npre; k++)
            if (frame >= src->pre[k].start && frame < src->pre[k].end &&
                src->pre[k].end - frame >= fsize)
                buf = src->pre[k].local + (frame - src->pre[k].start);
        if (!buf) {
            src->after = true;
            if (!src->chunks && src->singles == SINGLE_READS) {
                /* a long walk: copy the chunks instead */
                pyu_chunks_reset(s, ts->chunk, frame + fsize);
                src->chunks = true;
            }
            if (src->chunks)
                buf = pyu_chunks_find(s, frame, fsize, sp);
        }
        if (!buf) {
            int rc = pyu_read_quiet(s, frame, sm->frame_copy, fsize);
            if (rc == -PYU_E_NOPROC)
                return pyu_fail(&s->err, PYU_E_NOPROC,
                                "the process has exited"),
                       WALK_ERROR;
            if (rc < 0)
                return WALK_TORN; /* freed under the read */
            buf = sm->frame_copy;
            src->singles++;
        }
        fresh *f = &(*out)[nf++];
        take_frame(o, fsize, frame, buf, f);
        if (frame == stop || frame == ts->base_frame)
            return (long)nf;
        frame = f->prev;
    }
    /* the chain ended before the base frame (3.15 has one) */
    return ts->base_frame ? WALK_TORN : (long)nf;
}

/* Makes the cached stack: positions [0, keep) stay, the nf frames read go
 * on top.  A frame identical to the old one at its depth, with everything
 * below identical too, keeps its node.  Returns STACK_OK, STACK_TORN (a
 * frame's code object could not be read) or -1. */
static int commit_stack(pyu_sampler *sm, sthread *t, const fresh *fr,
                        size_t keep, size_t nf, bool reuse)
{
    pyu_session *s = sm->s;
    size_t n = keep + nf;
    if (n > t->cap) {
        size_t ncap = t->cap ? t->cap : 64;
        while (ncap < n)
            ncap *= 2;
        uint64_t *a = realloc(t->addr, ncap * 8);
        if (a)
            t->addr = a;
        uint64_t *c = a ? realloc(t->code, ncap * 8) : NULL;
        if (c)
            t->code = c;
        uint64_t *i = c ? realloc(t->ip, ncap * 8) : NULL;
        if (i)
            t->ip = i;
        uint32_t *nd = i ? realloc(t->node, ncap * 4) : NULL;
        if (!nd)
            return pyu_fail(&s->err, PYU_E_NOMEM, "out of memory"), -1;
        t->node = nd;
        t->cap = ncap;
    }
    bool same = reuse && t->valid && t->epoch == s->code_epoch && sm->code_gen;
    uint32_t parent = keep ? t->node[keep - 1] : 0;
    for (size_t p = keep, j = nf; j-- > 0; p++) {
        const fresh *f = &fr[j];
        uint32_t node;
        if (same && p < t->n && t->addr[p] == f->addr &&
            t->code[p] == f->code && t->ip[p] == f->ip) {
            node = t->node[p];
        } else {
            same = false;
            /* a shim between Python frames is where C code called back
             * into Python: "<native>" with PYU_SAMPLE_NATIVE (the chain's
             * bottom frame is not) */
            long fr = f->owner < OWNER_FIRST_SHIM ? frame_of(sm, f)
                      : (sm->o.flags & PYU_SAMPLE_NATIVE) && p > 0
                          ? sm->native_frame
                          : -1;
            if (fr == -2) {
                t->valid = false;
                return s->err.code == PYU_E_NOMEM ||
                               s->err.code == PYU_E_NOPROC
                           ? -1
                           : STACK_TORN;
            }
            /* (3.11: no shims; C code called the first frame of each
             * eval loop but the outermost) */
            if (f->entry && p > 0 && fr >= 0 &&
                (sm->o.flags & PYU_SAMPLE_NATIVE)) {
                long nn = pyu_profile_push(sm->p, parent,
                                           (uint32_t)sm->native_frame);
                if (nn < 0)
                    return pyu_fail(&s->err, PYU_E_NOMEM, "out of memory"),
                           -1;
                parent = (uint32_t)nn;
            }
            long nd = fr < 0 ? (long)parent
                             : pyu_profile_push(sm->p, parent, (uint32_t)fr);
            if (nd < 0)
                return pyu_fail(&s->err, PYU_E_NOMEM, "out of memory"), -1;
            node = (uint32_t)nd;
        }
        t->addr[p] = f->addr;
        t->code[p] = f->code;
        t->ip[p] = f->ip;
        t->node[p] = node;
        parent = node;
    }
    t->n = n;
    t->valid = true;
    t->epoch = s->code_epoch;
    return STACK_OK;
}

/* Reads the tail words again (after frames read on their own). */
static int read_tail(pyu_sampler *sm, const pyu_tstate *ts, uint64_t *current,
                     uint64_t *seq)
{
    uint8_t tail[TAIL_MAX];
    if (pyu_read_quiet(sm->s, ts->addr + sm->tail_off, tail, sm->tail_len) <
        0)
        return -1;
    tail_words(sm, tail, current, seq);
    return 0;
}

/* Notes where the thread's current chunk ends (for the prefix reads). */
static void note_chunk(pyu_sampler *sm, sthread *t, uint64_t chunk)
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

/* Proven reading (3.15, anchors writable).  ts was read in the sample's
 * batch, right after pf, a copy of the frame that was innermost last time
 * (NULL: none).  buf holds ts's copy and is reused for a new read of it.
 * Returns STACK_*, or -1. */
static int read_proven(pyu_sampler *sm, pyu_tstate *ts, sthread *t,
                       const uint8_t *pf, const pyu_interp *in, uint8_t *buf)
{
    pyu_session *s = sm->s;
    const pyu_offsets *o = &s->off;
    size_t fsize = sm->fsize;
    for (int tries = 0;; tries++) {
        uint64_t first = ts->current_frame;
        uint64_t anchor = ts->extra[0], seq = ts->extra[1];
        if (!first) {
            t->valid = false;
            return STACK_EMPTY;
        }
        if (anchor == first && pf && t->valid && t->anchored &&
            seq == t->seq && first == t->addr[t->n - 1]) {
            /* proven by the last sample: the frame it found innermost,
             * anchored, is still current and was never popped since that
             * read of the thread state, so the copy of it read just
             * before this one shows that same frame at a later moment;
             * everything below it is as cached */
            fresh *f = &sm->fresh[0];
            take_frame(o, fsize, first, pf, f);
            if (f->prev != (t->n > 1 ? t->addr[t->n - 2] : 0) ||
                f->code != t->code[t->n - 1])
                return STACK_TORN; /* (cannot be: a hostile target) */
            int rc = commit_stack(sm, t, sm->fresh, t->n - 1, 1, true);
            if (rc != STACK_OK)
                return rc;
            sm->st.frames_read++;
            sm->st.frames_cached += t->n - 1;
            sm->st.cache_full++;
            return STACK_OK;
        }
        if (anchor == first) {
            /* the cache: the anchor k pops below the frame it named */
            size_t keep = 0;
            bool hit = false;
            uint64_t k = seq - t->seq;
            if (t->valid && t->anchored && k < t->n &&
                t->addr[t->n - 1 - k] == anchor) {
                keep = (size_t)(t->n - 1 - k);
                hit = true;
            }
            source src = {0}; /* (pf was read before ts: no use here) */
            long nf = walk_chain(sm, ts, first, hit ? anchor : 0, &src,
                                 &sm->fresh, &sm->capfresh);
            if (nf == WALK_ERROR)
                return -1;
            if (nf == WALK_TORN || (hit && sm->fresh[nf - 1].addr != anchor))
                return STACK_TORN;
            uint64_t now_first, now_seq;
            if (read_tail(sm, ts, &now_first, &now_seq) < 0)
                return STACK_TORN;
            if (now_first != first || now_seq != seq)
                return STACK_TORN;
            int rc = commit_stack(sm, t, sm->fresh, keep, (size_t)nf, true);
            if (rc != STACK_OK)
                return rc;
            t->anchored = true;
            t->seq = seq;
            sm->st.frames_read += (uint64_t)nf;
            sm->st.frames_cached += keep;
            if (hit)
                sm->st.cache_full++;
            else
                sm->st.cache_miss++;
            return STACK_OK;
        }
        /* the anchor elsewhere: write it, read the thread state again,
         * with the frames of its chunk up to the current frame */
        if (tries == PROOF_TRIES)
            return STACK_TORN;
        uint64_t at = ts->addr + PYU_OFF(o, ts_last_profiled_frame);
        if (s->ops->write(s->ctx, at, &first, 8) < 0) {
            sm->anchors = false; /* refused: do without */
            return STACK_TORN;
        }
        sm->st.anchor_writes++;
        t->wrote = true;
        t->anchored = false;
        note_chunk(sm, t, ts->chunk);
        pyu_range r[3];
        size_t n = 0;
        r[n++] = (pyu_range){ts->addr, buf, sm->tslen};
        size_t plen = 0;
        if (first > t->chunk && first < t->chunk_end &&
            t->chunk_end - first >= fsize &&
            first + fsize - t->chunk <= (64u << 10)) {
            plen = (size_t)(first + fsize - t->chunk);
            if (plen > sm->capprefix) {
                uint8_t *np = realloc(sm->prefix, plen);
                if (!np)
                    return pyu_fail(&s->err, PYU_E_NOMEM, "out of memory"),
                           -1;
                sm->prefix = np;
                sm->capprefix = plen;
            }
            r[n++] = (pyu_range){t->chunk, sm->prefix, plen};
        }
        uint8_t again[TAIL_MAX];
        r[n++] = (pyu_range){ts->addr + sm->tail_off, again, sm->tail_len};
        int rc = pyu_readv_quiet(s, r, n);
        if (rc == -PYU_E_NOPROC)
            return pyu_fail(&s->err, PYU_E_NOPROC, "the process has exited"),
                   -1;
        if (rc < 0)
            return STACK_TORN;
        uint64_t next;
        pyu_tstate_take(s, in, sm->extra_off, ts->addr, buf, sm->tslen, ts,
                        &next, NULL);
        sm->reread = true; /* the status is taken again, from this copy */
        /* proven from here if the anchor still names the current frame */
        pf = NULL;
        if (ts->extra[0] != ts->current_frame)
            continue;
        uint64_t now_first, now_seq;
        tail_words(sm, again, &now_first, &now_seq);
        source src = {0};
        if (plen)
            src.span = (pyu_chunk_span){t->chunk, t->chunk + plen,
                                        sm->prefix};
        long nf = walk_chain(sm, ts, ts->current_frame, 0, &src, &sm->fresh,
                             &sm->capfresh);
        if (nf == WALK_ERROR)
            return -1;
        if (nf == WALK_TORN)
            return STACK_TORN;
        if (src.after && read_tail(sm, ts, &now_first, &now_seq) < 0)
            return STACK_TORN;
        if (now_first != ts->current_frame || now_seq != ts->extra[1])
            return STACK_TORN;
        rc = commit_stack(sm, t, sm->fresh, 0, (size_t)nf, true);
        if (rc != STACK_OK)
            return rc;
        t->anchored = true;
        t->seq = ts->extra[1];
        sm->st.frames_read += (uint64_t)nf;
        sm->st.cache_miss++;
        return STACK_OK;
    }
}

/* Best-effort reading (no writable anchor): the chain is walked from
 * the copies at hand (best_walk), then its innermost frames, its thread
 * state and (3.13) its cached code objects are read again (best_ranges,
 * code_note, code_ranges: one read, also for every thread of a sample at
 * once, take_best), and the stack is kept when they agree (code_check,
 * best_finish). */

/* Walks the thread's chain into *fr.  Returns the number of frames, 0
 * when it has none, WALK_TORN or WALK_ERROR. */
static long best_walk(pyu_sampler *sm, const pyu_tstate *ts, sthread *t,
                      const uint8_t *pf, fresh **fr, size_t *cap)
{
    uint64_t first = ts->current_frame;
    bool pre = t->pre_fresh;
    t->pre_fresh = false; /* (a second try reads anew) */
    if (!first) {
        t->valid = false;
        return 0;
    }
    source src = {.pf = t->valid && !pre ? pf : NULL,
                  .pf_addr = t->valid ? t->addr[t->n - 1] : 0};
    if (pre) {
        src.pre = t->pre;
        src.npre = t->npre;
    }
    return walk_chain(sm, ts, first, 0, &src, fr, cap);
}

/* The ranges read again after a walk of nf frames: its innermost frames
 * (into rc, RECHECK copies of fsize), its thread state (into tsbuf) and
 * on 3.11 the current frame in its cframe (into *cf).  Returns how many
 * were put in r. */
static size_t best_ranges(const pyu_sampler *sm, const pyu_tstate *ts,
                          const fresh *fr, long nf, uint8_t *rc,
                          uint8_t *tsbuf, uint64_t *cf, pyu_range *r)
{
    size_t k = (size_t)nf < RECHECK ? (size_t)nf : RECHECK;
    for (size_t i = 0; i < k; i++)
        r[i] = (pyu_range){fr[i].addr, rc + i * sm->fsize, sm->fsize};
    r[k++] = (pyu_range){ts->addr, tsbuf, sm->tslen};
    if (sm->indirect)
        r[k++] = (pyu_range){ts->cframe + PYU_OFF(&sm->s->off,
                                                  cframe_current_frame),
                             cf, 8};
    return k;
}

/* Without code_object_generation: notes the cached code objects of a
 * walk, to be read again with it (a record is used only while its object
 * shows the same fields); more than VALIDATE_MAX in a sample flush the
 * caches instead. */
static void code_note(pyu_sampler *sm, const fresh *fr, long nf)
{
    for (long i = 0; !sm->code_gen && i < nf && !sm->vflush; i++) {
        const fresh *f = &fr[i];
        if (f->owner >= OWNER_FIRST_SHIM || !pyu_code_cached(sm->s, f->code))
            continue;
        size_t v = 0;
        while (v < sm->nv && sm->vaddr[v] != f->code)
            v++;
        if (v < sm->nv)
            continue;
        if (sm->nv == VALIDATE_MAX)
            sm->vflush = true; /* too many to check: read them all again */
        else
            sm->vaddr[sm->nv++] = f->code;
    }
}

static size_t code_ranges(pyu_sampler *sm, pyu_range *r)
{
    if (sm->vflush)
        return 0;
    for (size_t v = 0; v < sm->nv; v++)
        r[v] = (pyu_range){sm->vaddr[v] + sm->cf_off,
                           sm->cfbuf + v * sm->cf_len, sm->cf_len};
    return sm->nv;
}

/* After the read: flushes the caches when a code object changed (or
 * there were too many to check); read says whether the read succeeded. */
static void code_check(pyu_sampler *sm, bool read)
{
    bool flush = sm->vflush;
    for (size_t v = 0; read && v < sm->nv && !flush; v++) {
        const pyu_code *c = pyu_code_cached(sm->s, sm->vaddr[v]);
        flush = !c || !pyu_code_unchanged(sm->s, c,
                                          sm->cfbuf + v * sm->cf_len);
    }
    if (flush)
        pyu_caches_flush(sm->s);
    sm->nv = 0;
    sm->vflush = false;
}

/* Keeps the walk of nf frames when the second copies (rc, and the thread
 * state's in tsbuf) agree with it; the status is then taken from the new
 * copy.  Returns STACK_OK, STACK_TORN or -1. */
static int best_finish(pyu_sampler *sm, const pyu_interp *in, pyu_tstate *ts,
                       sthread *t, const fresh *fr, long nf,
                       const uint8_t *rc, const uint8_t *tsbuf, uint64_t cf,
                       bool reuse)
{
    pyu_session *s = sm->s;
    const pyu_offsets *o = &s->off;
    size_t fsize = sm->fsize;
    size_t k = (size_t)nf < RECHECK ? (size_t)nf : RECHECK;
    for (size_t i = 0; i < k; i++) {
        fresh g;
        const fresh *f = &fr[i];
        take_frame(o, fsize, f->addr, rc + i * fsize, &g);
        if (g.code != f->code || g.prev != f->prev || g.owner != f->owner ||
            (i > 0 && g.ip != f->ip))
            return STACK_TORN;
    }
    uint64_t now_first, now_seq, next;
    tail_words(sm, tsbuf + sm->tail_off, &now_first, &now_seq);
    /* (3.11: the same cframe, holding the same frame) */
    if (sm->indirect ? now_first != ts->cframe || cf != ts->current_frame
                     : now_first != ts->current_frame)
        return STACK_TORN;
    if (now_seq != ts->extra[1])
        return STACK_TORN;
    pyu_peek peek = {ts->cframe, cf};
    pyu_tstate_take(s, in, sm->extra_off, ts->addr, tsbuf, sm->tslen, ts,
                    &next, &peek);
    sm->reread = true;
    int r = commit_stack(sm, t, fr, 0, (size_t)nf, reuse);
    if (r != STACK_OK)
        return r;
    note_chunk(sm, t, ts->chunk); /* (for the next sample's prefix) */
    sm->st.frames_read += (uint64_t)nf;
    sm->st.cache_miss++;
    sm->st.unproven++;
    return STACK_OK;
}

/* One thread's stack, best effort.  Returns STACK_*, or -1. */
static int read_best(pyu_sampler *sm, pyu_tstate *ts, sthread *t,
                     const uint8_t *pf, bool reuse, const pyu_interp *in,
                     uint8_t *tsbuf)
{
    long nf = best_walk(sm, ts, t, pf, &sm->fresh, &sm->capfresh);
    if (nf == 0)
        return STACK_EMPTY;
    if (nf < 0)
        return nf == WALK_ERROR ? -1 : STACK_TORN;
    pyu_range r[RECHECK + 2 + VALIDATE_MAX];
    uint8_t *rc = &sm->recheck[0][0]; /* (RECHECK x fsize fit) */
    uint64_t cf = 0;
    size_t n = best_ranges(sm, ts, sm->fresh, nf, rc, tsbuf, &cf, r);
    code_note(sm, sm->fresh, nf);
    n += code_ranges(sm, r + n);
    bool read = pyu_readv_quiet(sm->s, r, n) == 0;
    code_check(sm, read);
    if (!read)
        return STACK_TORN;
    return best_finish(sm, in, ts, t, sm->fresh, nf, rc, tsbuf, cf, reuse);
}

/* The node of the innermost frame of the thread's stack, with the
 * synthetic frames asked for. */
static long leaf_node(pyu_sampler *sm, const sthread *t, unsigned status)
{
    long node = t->node[t->n - 1];
    if ((sm->o.flags & PYU_SAMPLE_GC) && (status & PYU_STATUS_GC))
        node = pyu_profile_push(sm->p, (uint32_t)node, (uint32_t)sm->gc_frame);
    return node;
}

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
           (sm->o.mode == PYU_MODE_CPU ? PYU_STATUS_ON_CPU : 0u);
}

/* Reads a thread's stack, proven when the anchor can be written. */
static int read_stack(pyu_sampler *sm, const pyu_interp *in, pyu_tstate *ts,
                      sthread *t, const uint8_t *pf, uint8_t *tsbuf)
{
    if (sm->anchors)
        return read_proven(sm, ts, t, pf, in, tsbuf);
    return read_best(sm, ts, t, pf, !(sm->o.flags & PYU_SAMPLE_NO_CACHE), in,
                     tsbuf);
}

/* A stack that tore: once more, from a new read of its thread state.
 * Returns STACK_OK, STACK_EMPTY, 2 when it tore again, or -1. */
static int retry_stack(pyu_sampler *sm, const pyu_interp *in, pyu_tstate *ts,
                       sthread *t, uint8_t *tsbuf)
{
    uint64_t next;
    sm->st.torn++;
    t->valid = false;
    if (pyu_read_quiet(sm->s, ts->addr, tsbuf, sm->tslen) < 0)
        return 2;
    pyu_tstate_take(sm->s, in, sm->extra_off, ts->addr, tsbuf, sm->tslen, ts,
                    &next, NULL);
    sm->reread = true;
    int rc = read_stack(sm, in, ts, t, NULL, tsbuf);
    if (rc == STACK_TORN) {
        t->valid = false;
        return 2;
    }
    return rc;
}

/* The profile's thread for a thread of the target; a thread new to the
 * profile gets the kernel's name of it, when the memory source knows one
 * and it is not the process's own name (which every thread has before
 * CPython 3.14, and the main thread always). */
static long profile_thread(pyu_sampler *sm, uint64_t thread_id,
                           uint64_t native_id, int64_t interp, int main)
{
    size_t before = pyu_profile_get(sm->p)->nthreads;
    long th = pyu_profile_add_thread(sm->p, thread_id, native_id, interp,
                                     main);
    char name[64];
    pyu_session *s = sm->s;
    if (th >= 0 && (size_t)th >= before && s->ops->thread_name &&
        s->ops->thread_name(s->ctx, native_id, name, sizeof name) == 0 &&
        *name && strcmp(name, sm->proc_name) != 0 &&
        pyu_profile_name_thread(sm->p, (uint32_t)th, name) < 0)
        return -PYU_E_NOMEM;
    return th;
}

/* Counts the thread's stack, read (status: as read before it).  Returns
 * 1 when it was counted, 0 when the thread is not selected after all, -1
 * on an error. */
static int count_stack(pyu_sampler *sm, const pyu_interp *in,
                       pyu_tstate *ts, sthread *t, unsigned status)
{
    pyu_session *s = sm->s;
    /* the thread state was read again: the status goes with the stack */
    if (sm->reread) {
        status = pyu_status_of(s, in, ts, status_wanted(sm));
        if (!selected(sm, ts, status))
            return 0;
    }
    /* 3.15 names the frame that started a collection */
    if (in->gc_collecting && in->gc_frame)
        for (size_t p = 0; p < t->n; p++)
            if (t->addr[p] == in->gc_frame) {
                status |= PYU_STATUS_GC;
                break;
            }
    if (t->pthread < 0 &&
        (t->pthread = profile_thread(sm, ts->thread_id, ts->native_id,
                                     in->id, ts->main)) < 0)
        return pyu_fail(&s->err, PYU_E_NOMEM, "out of memory"), -1;
    long node = leaf_node(sm, t, status);
    if (node < 0 || pyu_profile_count(sm->p, (uint32_t)t->pthread,
                                      (uint32_t)node, 1, status) < 0)
        return pyu_fail(&s->err, PYU_E_NOMEM, "out of memory"), -1;
    return 1;
}

/* One thread of a sample.  Returns 1 when a stack was counted, 0 when
 * none (not selected, no Python frames), 2 when it tore twice, -1 on an
 * error that ends the sample. */
static int sample_thread(pyu_sampler *sm, const pyu_interp *in,
                         pyu_tstate *ts, sthread *t, const uint8_t *pf,
                         uint8_t *tsbuf)
{
    unsigned status = pyu_status_of(sm->s, in, ts, status_wanted(sm));
    if (!selected(sm, ts, status))
        return 0;
    sm->reread = false;
    int rc = read_stack(sm, in, ts, t, pf, tsbuf);
    if (rc == STACK_TORN && (rc = retry_stack(sm, in, ts, t, tsbuf)) == 2)
        return 2;
    if (rc < 0)
        return -1;
    if (rc == STACK_EMPTY)
        return 0;
    return count_stack(sm, in, ts, t, status);
}

/* ------------------------------------------------------------ prediction */

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
    uint8_t *b = a ? realloc(sm->pfbuf, ncap * sm->fsize) : NULL;
    if (b)
        sm->pfbuf = b;
    uint8_t *c = b ? realloc(sm->rcbuf, ncap * RECHECK * sm->fsize) : NULL;
    if (c)
        sm->rcbuf = c;
    uint64_t *nx = c ? realloc(sm->next, ncap * 8) : NULL;
    if (nx)
        sm->next = nx;
    uint64_t *cp = nx ? realloc(sm->cfpeek, ncap * 8) : NULL;
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
    sthread *old;
    size_t nold;
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
    sinterp *si = &sm->interps[sm->ninterps++];
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
    sthread *t = &sm->threads[sm->nthreads++];
    memset(t, 0, sizeof *t);
    t->pthread = -1;
    for (size_t i = 0; i < d->nold; i++) {
        sthread *o = &d->old[i];
        if (o->tstate == ts->addr && o->native_id == ts->native_id &&
            o->thread_id == ts->thread_id) {
            *t = *o;
            memset(o, 0, sizeof *o); /* moved */
            break;
        }
    }
    t->tstate = ts->addr;
    t->thread_id = ts->thread_id;
    t->native_id = ts->native_id;
    sm->interps[sm->ninterps - 1].n++;
    return PYU_WALK_NEXT;
}

/* Reads the interpreter and thread lists in full and makes them the
 * prediction (in list order). */
static int rediscover(pyu_sampler *sm)
{
    discover d = {sm, sm->threads, sm->nthreads, 0};
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
        thread_free(&d.old[i]);
    /* a batch that failed may have failed on a prediction */
    for (size_t i = 0; i < sm->nthreads; i++)
        sm->threads[i].valid = false;
    free(d.old);
    sm->predicted = false;
    if (rc == 2 || d.rc)
        return pyu_fail(&sm->s->err, PYU_E_NOMEM, "out of memory");
    if (rc != 0)
        return -1;
    if (!reserve_sample(sm, sm->nthreads))
        return pyu_fail(&sm->s->err, PYU_E_NOMEM, "out of memory");
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

/* Without anchors, a thread's frames come with its thread state, from
 * where the frames of its last stack lay: its current chunk from the
 * start up to PREFIX_SLACK past the innermost frame (when that lay in
 * the chunk), then the frames outside it, close ones in one range (an
 * older chunk's), at most PREFIX_SPANS ranges and PREFIX_MAX bytes in
 * all.  Sets t->pre and t->npre; false when there is nothing to predict
 * from. */
static bool plan_prefix(pyu_sampler *sm, sthread *t)
{
    size_t fsize = sm->fsize;
    if (!t->valid || !t->n || !t->chunk || !t->chunk_end)
        return false;
    uint64_t top = t->addr[t->n - 1];
    if (top < t->chunk || top >= t->chunk_end || t->chunk_end - top < fsize)
        return false;
    uint64_t end = top + fsize + PREFIX_SLACK;
    if (end > t->chunk_end)
        end = t->chunk_end;
    pyu_chunk_span *sp = t->pre;
    size_t n = 1;
    sp[0] = (pyu_chunk_span){t->chunk, end, NULL};
    for (size_t p = 0; p < t->n; p++) {
        uint64_t a = t->addr[p];
        if (a >= sp[0].start && a < sp[0].end && sp[0].end - a >= fsize)
            continue;
        if (a > UINT64_MAX - fsize)
            return false;
        size_t k = 1; /* (frames of a chunk come in address order) */
        while (k < n && !(a >= sp[k].start && a <= sp[k].end + SPAN_GAP))
            k++;
        if (k < n) {
            if (a + fsize > sp[k].end)
                sp[k].end = a + fsize;
        } else if (n < PREFIX_SPANS) {
            sp[n++] = (pyu_chunk_span){a, a + fsize, NULL};
        } else {
            break; /* (the rest are read as they come) */
        }
    }
    size_t total = 0;
    for (size_t k = 0; k < n; k++) {
        if (sp[k].end - sp[k].start > PREFIX_MAX - total)
            return false;
        total += (size_t)(sp[k].end - sp[k].start);
    }
    if (total > t->precap) {
        uint8_t *b = realloc(t->prebuf, total);
        if (!b)
            return false; /* (the frames are then read as they come) */
        t->prebuf = b;
        t->precap = total;
    }
    for (size_t k = 0, at = 0; k < n; k++) {
        sp[k].local = t->prebuf + at;
        at += (size_t)(sp[k].end - sp[k].start);
    }
    t->npre = n;
    return true;
}

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

/* The one read of a sample: the list head, the interpreters, the thread
 * states and their predicted innermost frames (or chunk prefixes).
 * Returns 1 when the lists are as predicted (sm->recs filled), 0 when not,
 * -1 on an error. */
static int read_predicted(pyu_sampler *sm)
{
    pyu_session *s = sm->s;
    const pyu_offsets *o = &s->off;
    size_t need = 1 + sm->ninterps * 10 + sm->nthreads * (3 + PREFIX_SPANS),
           n = 0;
    if (!ranges_for(sm, need))
        return pyu_fail(&s->err, PYU_E_NOMEM, "out of memory");
    pyu_range *r = sm->ranges;
    /* a new interpreter is put at the head of the runtime's list: looked
     * for every HEAD_EVERY samples (the rest of the lists, every time) */
    uint64_t head = sm->head;
    bool check_head = sm->st.samples % HEAD_EVERY == 0;
    if (check_head)
        r[n++] = (pyu_range){s->runtime + PYU_OFF(o, rt_interpreters_head),
                             &head, 8};
    for (size_t i = 0; i < sm->ninterps; i++) {
        sinterp *si = &sm->interps[i];
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
    for (size_t j = 0; j < sm->nthreads; j++) {
        sthread *t = &sm->threads[j];
        t->pre_fresh = false;
        if (!sm->anchors && plan_prefix(sm, t)) {
            /* no anchor: its thread state, then its chunk up to a little
             * past where its innermost frame was (read_best walks it) */
            r[n++] = (pyu_range){t->tstate, sm->tsbuf + j * sm->tslen,
                                 sm->tslen};
            for (size_t k = 0; k < t->npre; k++)
                r[n++] = (pyu_range){t->pre[k].start,
                                     (uint8_t *)t->pre[k].local,
                                     (size_t)(t->pre[k].end -
                                              t->pre[k].start)};
            t->pre_fresh = true;
        } else {
            /* its innermost frame where it was, then its thread state
             * (the kernel reads the ranges in order: see read_proven) */
            if (t->valid && t->n)
                r[n++] = (pyu_range){t->addr[t->n - 1],
                                     sm->pfbuf + j * sm->fsize, sm->fsize};
            r[n++] = (pyu_range){t->tstate, sm->tsbuf + j * sm->tslen,
                                 sm->tslen};
        }
        /* 3.11: the current frame, in the cframe it had last time */
        if (sm->indirect && t->cframe)
            r[n++] = (pyu_range){t->cframe + PYU_OFF(o, cframe_current_frame),
                                 &sm->cfpeek[j], 8};
    }
    int rc = pyu_readv_quiet(s, r, n);
    if (rc == -PYU_E_NOPROC)
        return pyu_fail(&s->err, PYU_E_NOPROC, "the process has exited");
    if (rc < 0 || head != sm->head)
        return 0;
    /* link by link */
    for (size_t i = 0; i < sm->ninterps; i++) {
        sinterp *si = &sm->interps[i];
        for (size_t k = 0; sm->ispan_len && k < si->ir.nlocal; k++)
            memcpy(si->ir.r[k].buf,
                   sm->ispan + i * sm->ispan_len +
                       (si->ir.r[k].addr - si->in.addr - sm->ispan_off),
                   si->ir.r[k].len);
        uint64_t want_next =
            i + 1 < sm->ninterps ? sm->interps[i + 1].in.addr : 0;
        uint64_t want_head = si->n ? sm->threads[si->first].tstate : 0;
        if (si->in.next != want_next || si->in.threads_head != want_head)
            return 0;
        pyu_interp_take(s, &si->in, &si->ir);
        for (size_t j = si->first; j < si->first + si->n; j++) {
            sthread *t = &sm->threads[j];
            pyu_peek peek = {t->cframe, sm->cfpeek[j]};
            pyu_tstate_take(s, &si->in, sm->extra_off, t->tstate,
                            sm->tsbuf + j * sm->tslen, sm->tslen,
                            &sm->recs[j], &sm->next[j],
                            sm->indirect && t->cframe ? &peek : NULL);
            t->cframe = sm->recs[j].cframe;
            uint64_t want =
                j + 1 < si->first + si->n ? sm->threads[j + 1].tstate : 0;
            if (sm->next[j] != want)
                return 0;
        }
    }
    return 1;
}

/* ---------------------------------------------------------------- sample */

/* The threads of a sample without anchors: each walked from the batch's
 * copies, then all their checks in one read, then each kept or read
 * again on its own. */
static int take_best(pyu_sampler *sm)
{
    pyu_session *s = sm->s;
    size_t fsize = sm->fsize;
    size_t need = sm->nthreads * (RECHECK + 2) + VALIDATE_MAX, n = 0;
    if (!ranges_for(sm, need))
        return pyu_fail(&s->err, PYU_E_NOMEM, "out of memory");
    for (size_t i = 0; i < sm->ninterps; i++) {
        const sinterp *si = &sm->interps[i];
        for (size_t j = si->first; j < si->first + si->n; j++) {
            sthread *t = &sm->threads[j];
            pyu_tstate *ts = &sm->recs[j];
            t->nf = NOT_WALKED;
            t->status = pyu_status_of(s, &si->in, ts, status_wanted(sm));
            if (!selected(sm, ts, t->status))
                continue;
            t->nf = best_walk(sm, ts, t, sm->pfbuf + j * fsize, &t->fr,
                              &t->frcap);
            if (t->nf == WALK_ERROR)
                return -1;
            if (t->nf <= 0)
                continue;
            n += best_ranges(sm, ts, t->fr, t->nf,
                             sm->rcbuf + j * RECHECK * fsize,
                             sm->tsbuf + j * sm->tslen, &sm->cfpeek[j],
                             sm->ranges + n);
            code_note(sm, t->fr, t->nf);
        }
    }
    bool read = true;
    if (n) {
        n += code_ranges(sm, sm->ranges + n);
        int rc = pyu_readv_quiet(s, sm->ranges, n);
        if (rc == -PYU_E_NOPROC)
            return pyu_fail(&s->err, PYU_E_NOPROC, "the process has exited");
        read = rc == 0;
    }
    code_check(sm, read);
    bool reuse = !(sm->o.flags & PYU_SAMPLE_NO_CACHE), torn = false;
    int stacks = 0;
    for (size_t i = 0; i < sm->ninterps; i++) {
        const sinterp *si = &sm->interps[i];
        for (size_t j = si->first; j < si->first + si->n; j++) {
            sthread *t = &sm->threads[j];
            pyu_tstate *ts = &sm->recs[j];
            uint8_t *tsbuf = sm->tsbuf + j * sm->tslen;
            if (t->nf == NOT_WALKED || t->nf == 0)
                continue;
            sm->reread = false;
            int rc = t->nf > 0 && read
                         ? best_finish(sm, &si->in, ts, t, t->fr, t->nf,
                                       sm->rcbuf + j * RECHECK * fsize, tsbuf,
                                       sm->cfpeek[j], reuse)
                         : STACK_TORN;
            if (rc == STACK_TORN &&
                (rc = retry_stack(sm, &si->in, ts, t, tsbuf)) == 2) {
                torn = true;
                continue;
            }
            if (rc < 0)
                return -1;
            if (rc == STACK_EMPTY)
                continue;
            int c = count_stack(sm, &si->in, ts, t, t->status);
            if (c < 0)
                return -1;
            stacks += c;
        }
    }
    if (torn)
        sm->st.failed++;
    return stacks;
}

static int take_cached(pyu_session *s, void *arg)
{
    pyu_sampler *sm = arg;
    int rc = 0;
    if (sm->predicted)
        rc = read_predicted(sm);
    if (rc < 0)
        return -1;
    if (rc == 0) {
        if (rediscover(sm) < 0 || (rc = read_predicted(sm)) < 0)
            return -1;
        if (rc == 0) /* changing faster than it can be read */
            return pyu_fail(&s->err, PYU_E_CORRUPT,
                            "the thread list changed under the read");
    }
    if (!sm->anchors)
        return take_best(sm);
    int stacks = 0;
    bool torn = false;
    for (size_t i = 0; i < sm->ninterps; i++) {
        const sinterp *si = &sm->interps[i];
        for (size_t j = si->first; j < si->first + si->n; j++) {
            sthread *t = &sm->threads[j];
            int r = sample_thread(sm, &si->in, &sm->recs[j], t,
                                  sm->pfbuf + j * sm->fsize,
                                  sm->tsbuf + j * sm->tslen);
            if (r < 0)
                return -1;
            if (r == 1)
                stacks++;
            if (r == 2)
                torn = true;
        }
    }
    if (torn)
        sm->st.failed++;
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
    bool torn;
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
    if (end->error || end->truncated) {
        w->torn = true;
        sm->st.torn++;
        return PYU_WALK_NEXT;
    }
    if (!w->n)
        return PYU_WALK_NEXT;
    sm->st.frames_read += w->n;
    sm->st.cache_miss++;
    long node = 0;
    for (size_t i = w->n; i-- > 0 && node >= 0;) {
        pyu_frame d;
        if (pyu_frame_describe(s, &w->frames[i], &d) < 0)
            return w->err = -PYU_E_STATE, 2;
        const pyu_code *c = pyu_walk_code(s, &w->frames[i]);
        long func = pyu_profile_add_func(sm->p, d.function, d.file,
                                         c->firstlineno,
                                         PYU_FUNC_PYTHON);
        /* (the instruction in the code object's own bytecode: a thread's
         * copy, on free-threaded builds, runs the same instructions) */
        long fr = func < 0 ? func
                           : add_frame(sm, (uint32_t)func, c,
                                       w->frames[i].instr,
                                       c->addr + PYU_OFF(&s->off,
                                                         co_code_adaptive));
        node = fr < 0 ? fr : pyu_profile_push(sm->p, (uint32_t)node,
                                              (uint32_t)fr);
    }
    unsigned status = end->status;
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
    if (w.torn)
        sm->st.failed++;
    return w.stacks;
}

/* -------------------------------------------------------------- public */

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
    pyu_code_fields(off, &sm->cf_off, &sm->cf_len);
    sm->extra_off[0] = sm->read_anchors
                           ? PYU_OFF(off, ts_last_profiled_frame)
                           : PYU_ABSENT;
    sm->extra_off[1] = sm->read_anchors
                           ? PYU_OFF(off, ts_last_profiled_frame_seq)
                           : PYU_ABSENT;
    sm->fsize = (size_t)PYU_OFF(off, fr_size);
    sm->tslen = pyu_tstate_len(s, sm->extra_off);
    sm->indirect = !PYU_HAS(off, ts_current_frame);
    sm->tail_word = (size_t)(sm->indirect ? PYU_OFF(off, ts_cframe)
                                          : PYU_OFF(off, ts_current_frame));
    uint64_t lo = sm->tail_word, hi = lo + 8;
    if (sm->read_anchors) {
        uint64_t q = PYU_OFF(off, ts_last_profiled_frame_seq);
        lo = q < lo ? q : lo;
        hi = q + 8 > hi ? q + 8 : hi;
    }
    if (hi - lo > TAIL_MAX) { /* far apart: read what lies between (bounded by
                           the thread state's size, validated) */
        lo = sm->tail_word;
        hi = lo + 8;
        sm->read_anchors = sm->anchors = false;
    }
    sm->tail_off = (size_t)lo;
    sm->tail_len = (size_t)(hi - lo);
    pyu_interp ii;
    pyu_interp_read ir;
    pyu_interp_plan(off, 0, 0, &ii, &ir); /* range addresses: the offsets */
    lo = UINT64_MAX, hi = 0;
    for (size_t k = 0; k < ir.nlocal; k++) {
        lo = ir.r[k].addr < lo ? ir.r[k].addr : lo;
        hi = ir.r[k].addr + ir.r[k].len > hi ? ir.r[k].addr + ir.r[k].len
                                             : hi;
    }
    if (ir.nlocal && hi - lo <= ISPAN_MAX && hi <= PYU_OFF(off, is_size)) {
        sm->ispan_off = (size_t)lo;
        sm->ispan_len = (size_t)(hi - lo);
    }
    long gcf = pyu_profile_add_func(p, "<GC>", "", 0, PYU_FUNC_GC);
    sm->gc_frame = gcf < 0 ? gcf : pyu_profile_add_frame(p, (uint32_t)gcf, 0);
    long nf = pyu_profile_add_func(p, "<native>", "", 0, PYU_FUNC_NATIVE);
    sm->native_frame = nf < 0 ? nf : pyu_profile_add_frame(p, (uint32_t)nf, 0);
    if (!sm->code_gen &&
        !(sm->cfbuf = malloc(VALIDATE_MAX * sm->cf_len))) {
        free(sm);
        return pyu_err_set(&s->err, PYU_E_NOMEM, "out of memory");
    }
    if (sm->gc_frame < 0 || sm->native_frame < 0) {
        free(sm->cfbuf);
        free(sm);
        return pyu_err_set(&s->err, PYU_E_NOMEM, "out of memory");
    }
    pyu_profile_info *pi = pyu_profile_info_of(p);
    pi->pid = s->pid;
    snprintf(pi->python, sizeof pi->python, "%s", s->version);
    pi->mode = o->mode;
    pi->flags = o->flags;
    pyu_profile_clock_start(p);
    if (!s->ops->thread_name || s->pid <= 0 ||
        s->ops->thread_name(s->ctx, (uint64_t)s->pid, sm->proc_name,
                            sizeof sm->proc_name) < 0)
        sm->proc_name[0] = 0;
    sm->memo_epoch = s->code_epoch;
    *out = sm;
    return 0;
}

static int take(pyu_session *s, void *arg)
{
    pyu_sampler *sm = arg;
    if (sm->o.flags & PYU_SAMPLE_ASYNC)
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
    if ((sm->o.flags & PYU_SAMPLE_BLOCKING) &&
        !(sm->o.flags & PYU_SAMPLE_ASYNC))
        rc = pyu_paused(s, take, sm);
    else
        rc = take(s, sm); /* pyu_walk stops the target itself, if asked */
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

/* Clears the anchors written, in the thread states the runtime still
 * lists (a thread that ended freed its own). */
static void clear_anchors(pyu_sampler *sm)
{
    bool any = false;
    for (size_t i = 0; i < sm->nthreads; i++)
        any |= sm->threads[i].wrote;
    if (!any || rediscover(sm) < 0)
        return;
    const uint64_t zero = 0;
    for (size_t i = 0; i < sm->nthreads; i++)
        if (sm->threads[i].wrote)
            sm->s->ops->write(sm->s->ctx,
                              sm->threads[i].tstate +
                                  PYU_OFF(&sm->s->off, ts_last_profiled_frame),
                              &zero, 8);
}

void pyu_sampler_free(pyu_sampler *sm)
{
    if (!sm)
        return;
    clear_anchors(sm); /* (only where it wrote) */
    for (size_t i = 0; i < sm->nthreads; i++)
        thread_free(&sm->threads[i]);
    free(sm->threads);
    free(sm->interps);
    free(sm->ranges);
    free(sm->tsbuf);
    free(sm->pfbuf);
    free(sm->rcbuf);
    free(sm->next);
    free(sm->cfpeek);
    free(sm->recs);
    free(sm->fresh);
    free(sm->prefix);
    free(sm->ispan);
    free(sm->memo);
    free(sm->cfbuf);
    free(sm);
}
