/* Interpreter frames: decoding one, and walking a thread's chain of them.
 *
 * A frame names its code object (a tagged stack reference from 3.14), the
 * instruction it runs and its owner.  Frames owned by the interpreter
 * itself or by the C stack (owner 3 and up) are shims without Python
 * code and are not reported; neither are executables that are not code.
 * The chain runs from the thread's current frame through `previous` to
 * NULL, or on 3.15 to the base frame embedded in the thread state.
 * Before 3.11 the frames are frame objects, decoded by the same code
 * (pyu_offsets.object_frames): f_back is their `previous`, and they are
 * all the thread's own.
 *
 * There is one decoder of a frame's fields (pyu_frame_raw_take) and one
 * walk of a chain (pyu_chain_each), which finds each frame's bytes in
 * copies read beforehand (a sampler's snapshot), then in copies of the
 * thread's data-stack chunks, then reads the frame alone.  The dump's walk
 * (pyu_chain_walk) and the sampler are its two callers.
 */
#include "../internal.h"

#include <inttypes.h>

/* The code object a chain walk met last: stacks run the same code in
 * runs (recursion, the same loop in every thread); records hold until the
 * caches are flushed, which moves the epoch. */
typedef struct last_code {
    uint64_t addr, epoch;
    const pyu_code *c;
} last_code;

void pyu_frame_raw_take(const pyu_offsets *o, uint64_t addr,
                        const uint8_t *buf, size_t fsize, pyu_frame_raw *f)
{
    f->addr = addr;
    f->prev = pyu_u64(buf, fsize, PYU_OFF(o, fr_previous));
    f->owner = pyu_u8(buf, fsize, PYU_OFF(o, fr_owner));
    f->code = pyu_u64(buf, fsize, PYU_OFF(o, fr_executable)) & ~o->tag_mask;
    f->instr_ptr = pyu_u64(buf, fsize, PYU_OFF(o, fr_instr_ptr));
    if (o->object_frames) {
        /* (a frame object's f_lasti, an int: stood for by where that
         * instruction would lie if the bytecode began at the code object,
         * co_code_adaptive being 0 -- the instruction index every reader
         * of instr_ptr derives; -1, not started yet: the first) */
        int32_t lasti = (int32_t)pyu_u32(buf, fsize, PYU_OFF(o, fr_instr_ptr));
        uint64_t units = lasti > 0 ? (uint64_t)lasti / o->lasti_scale : 0;
        f->instr_ptr = f->code + 2 * units;
    }
    f->tlbc = o->free_threaded && PYU_HAS(o, fr_tlbc_index)
                  ? (int32_t)pyu_u32(buf, fsize, PYU_OFF(o, fr_tlbc_index))
                  : 0;
    f->ip = f->instr_ptr ^ ((uint64_t)(uint32_t)f->tlbc << 48);
    f->entry = PYU_HAS(o, fr_is_entry) &&
               pyu_u8(buf, fsize, PYU_OFF(o, fr_is_entry)) != 0;
    f->func = PYU_HAS(o, fr_funcobj)
                  ? pyu_u64(buf, fsize, PYU_OFF(o, fr_funcobj)) & ~o->tag_mask
                  : 0;
    f->sp = 0;
    if (PYU_HAS(o, fr_stackpointer)) {
        f->sp = pyu_u64(buf, fsize, PYU_OFF(o, fr_stackpointer));
    } else if (PYU_HAS(o, fr_stacktop) && PYU_HAS(o, fr_localsplus)) {
        /* (an index into localsplus; -1 while the frame runs) */
        int32_t top = (int32_t)pyu_u32(buf, fsize, PYU_OFF(o, fr_stacktop));
        if (top >= 0 && top < (1 << 24))
            f->sp = addr + PYU_OFF(o, fr_localsplus) + 8 * (uint64_t)top;
    }
}

static bool all_zero(const uint8_t *buf, size_t len)
{
    for (size_t i = 0; i < len; i++)
        if (buf[i])
            return false;
    return true;
}

static inline int decode(pyu_session *s, const pyu_frame_raw *r,
                         const uint8_t *buf, size_t fsize, pyu_walk_frame *f,
                         last_code *last)
{
    if (r->owner >= PYU_OWNER_ENTRY)
        return 0;
    uint64_t exe = r->code;
    const pyu_code *c;
    if (last && exe == last->addr && s->code_epoch == last->epoch) {
        c = last->c;
    } else {
        bool is_code;
        if (!exe && all_zero(buf, fsize))
            return pyu_fail(&s->err, PYU_E_CORRUPT,
                            "the frame at 0x%" PRIx64 " reads as zeros: the "
                            "memory behind it is missing (a core written by "
                            "gcore holds zeros where gdb could not read the "
                            "process, such as next to a thread's stack "
                            "guard)", r->addr);
        if (!(c = pyu_code_get(s, exe, &is_code)))
            return is_code ? -1 : 0;
        if (last)
            *last = (last_code){exe, s->code_epoch, c};
    }
    if (pyu_code_incomplete(s, c, r->owner, r->instr_ptr))
        return 0;
    f->addr = r->addr;
    f->code_addr = exe;
    f->instr = pyu_code_instr(s, c, r->instr_ptr, r->tlbc);
    f->owner = r->owner;
    f->epoch = s->code_epoch; /* after pyu_code_get, which may flush */
    return 1;
}

int pyu_frame_decode(pyu_session *s, uint64_t addr, const uint8_t *buf,
                     size_t fsize, pyu_walk_frame *f)
{
    pyu_frame_raw r;
    pyu_frame_raw_take(&s->off, addr, buf, fsize, &r);
    return decode(s, &r, buf, fsize, f, NULL);
}

/* ------------------------------------------------------------ the walk */

/* The bytes of the frame at addr: in a span (*avail: how many from addr
 * on), else in the chunk copies, else read alone into copy; NULL when it
 * cannot be read (the record set unless the walk is quiet). */
static const uint8_t *frame_bytes(pyu_session *s, pyu_chain_it *it,
                                  uint64_t addr, size_t fsize,
                                  pyu_chunk_span *last, uint8_t *copy,
                                  size_t *avail)
{
    const pyu_chunk_span *sp = last;
    if (addr >= sp->start && addr < sp->end && sp->end - addr >= fsize)
        goto found;
    for (size_t k = 0; k < it->nspan; k++) {
        sp = &it->span[k];
        if (addr >= sp->start && addr < sp->end && sp->end - addr >= fsize) {
            *last = *sp;
            goto found;
        }
    }
    it->outside++;
    if (it->chunk && it->singles == 0) {
        pyu_chunks_reset(s, it->chunk, addr + fsize);
        it->chunk = 0;
        it->copying = true;
    }
    if (it->copying) {
        const uint8_t *b = pyu_chunks_find(s, addr, fsize, last);
        if (b) {
            *avail = (size_t)(last->end - addr);
            return b;
        }
    }
    if (it->singles)
        it->singles--;
    int rc = it->quiet ? pyu_read_quiet(s, addr, copy, fsize)
                       : pyu_read(s, addr, copy, fsize, "a frame");
    if (rc < 0) {
        if (it->quiet && rc == -PYU_E_NOPROC)
            pyu_fail(&s->err, PYU_E_NOPROC, "the process has exited");
        it->read_error = rc;
        return NULL;
    }
    *avail = fsize;
    return copy;
found:
    *avail = (size_t)(sp->end - addr);
    return sp->local + (addr - sp->start);
}

int pyu_chain_each(pyu_session *s, pyu_chain_it *it,
                   int (*fn)(void *arg, const pyu_frame_raw *f,
                             const uint8_t *buf, size_t avail),
                   void *arg)
{
    const pyu_offsets *o = &s->off;
    size_t fsize = (size_t)PYU_OFF(o, fr_size); /* <= the buffer */
    uint8_t copy[PYU_BUF_FRAME];
    cycle cyc = {0, 1, 0};
    pyu_chunk_span last = {0, 0, NULL};
    it->n = it->outside = 0;
    it->copying = false;
    it->read_error = 0;
    for (uint64_t frame = it->first;;) {
        if (!frame) {
            it->end = PYU_CHAIN_NULL;
            return 0;
        }
        if (cycle_step(&cyc, frame)) {
            it->end = PYU_CHAIN_LOOP;
            return 0;
        }
        if (it->n >= PYU_MAX_FRAMES) {
            it->end = PYU_CHAIN_DEPTH;
            return 0;
        }
        size_t avail;
        const uint8_t *buf =
            frame_bytes(s, it, frame, fsize, &last, copy, &avail);
        if (!buf) {
            it->end = PYU_CHAIN_UNREAD;
            return it->quiet && it->read_error != -PYU_E_NOPROC ? 0 : -1;
        }
        pyu_frame_raw f;
        pyu_frame_raw_take(o, frame, buf, fsize, &f);
        it->n++;
        int rc = fn(arg, &f, buf, avail);
        if (rc < 0)
            return -1;
        if (rc > 0 || frame == it->stop_at) {
            it->end = PYU_CHAIN_STOP;
            return 0;
        }
        if (frame == it->base) {
            it->end = PYU_CHAIN_BASE;
            return 0;
        }
        frame = f.prev;
    }
}

/* ------------------------------------------------- the dump's walk */

typedef struct dump_walk {
    pyu_session *s;
    pyu_chain *c;
    int (*fn)(void *arg, const pyu_walk_frame *f);
    void *arg;
    last_code last;
} dump_walk;

/* Reports an entry frame at addr; true when fn ended the walk. */
static bool report_entry(dump_walk *w, uint64_t addr)
{
    pyu_walk_frame f = {.addr = addr, .instr = PYU_INSTR_UNKNOWN,
                        .owner = PYU_OWNER_ENTRY, .index = w->c->index,
                        .epoch = w->s->code_epoch};
    int rc = w->fn(w->arg, &f);
    if (rc == PYU_WALK_NEXT)
        return false;
    w->c->fn_ended = true;
    w->c->fn_rc = rc;
    return true;
}

static int dump_frame(void *arg, const pyu_frame_raw *r, const uint8_t *buf,
                      size_t avail)
{
    dump_walk *w = arg;
    pyu_session *s = w->s;
    pyu_chain *c = w->c;
    const pyu_offsets *o = &s->off;
    size_t fsize = (size_t)PYU_OFF(o, fr_size);
    (void)avail;
    if (r->addr == c->watch)
        c->saw_watch = true;
    pyu_walk_frame f;
    int rc = decode(s, r, buf, fsize, &f, &w->last);
    if (rc < 0)
        return -1;
    if (rc == 0 && c->entries && r->owner >= PYU_OWNER_ENTRY) {
        if (report_entry(w, r->addr))
            return 1;
    } else if (rc == 1) {
        f.index = c->index++;
        rc = w->fn(w->arg, &f);
        if (rc != PYU_WALK_NEXT) {
            c->fn_ended = true;
            c->fn_rc = rc;
            return 1;
        }
    }
    /* 3.11 has no entry frames: the first frame of each eval loop says
     * is_entry, and the loop's _PyCFrame (on its C stack, as 3.12+'s
     * entry frame is) stands for the entry frame below it */
    if (c->entries && c->cframe && r->entry) {
        uint64_t at = c->cframe;
        if (pyu_read_quiet(s, at + PYU_OFF(o, cframe_previous), &c->cframe,
                           8) < 0)
            c->cframe = 0; /* (the rest go unplaced) */
        if (report_entry(w, at))
            return 1;
    }
    return 0;
}

int pyu_chain_walk(pyu_session *s, pyu_chain *c,
                   int (*fn)(void *arg, const pyu_walk_frame *f), void *arg)
{
    dump_walk w = {s, c, fn, arg, {0, 0, NULL}};
    pyu_chain_it it = {.first = c->first, .base = c->base,
                       .stop_at = c->stop_at, .chunk = c->chunk};
    c->truncated = PYU_TRUNC_NONE;
    c->saw_watch = c->stopped = c->fn_ended = false;
    if (pyu_chain_each(s, &it, dump_frame, &w) < 0)
        return -1;
    if (it.end == PYU_CHAIN_LOOP)
        c->truncated = PYU_TRUNC_LOOP;
    else if (it.end == PYU_CHAIN_DEPTH)
        c->truncated = PYU_TRUNC_DEPTH;
    else if (it.end == PYU_CHAIN_STOP && !c->fn_ended)
        c->stopped = true;
    return 0;
}
