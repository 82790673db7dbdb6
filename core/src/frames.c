/* Interpreter frames: decoding one, and walking a thread's chain of them.
 *
 * A frame names its code object (a tagged stack reference from 3.14), the
 * instruction it runs and its owner.  Frames owned by the interpreter
 * itself or by the C stack (owner 3 and up) are shims without Python
 * code and are not reported; neither are executables that are not code.
 * The chain runs from the thread's current frame through `previous` to
 * NULL, or on 3.15 to the base frame embedded in the thread state.
 */
#include "internal.h"

#include <inttypes.h>


#define OWNER_FIRST_SHIM 3

/* The code object a chain walk met last: stacks run the same code in
 * runs (recursion, the same loop in every thread); records hold until the
 * caches are flushed, which moves the epoch. */
typedef struct last_code {
    uint64_t addr, epoch;
    const pyu_code *c;
} last_code;

static bool all_zero(const uint8_t *buf, size_t len)
{
    for (size_t i = 0; i < len; i++)
        if (buf[i])
            return false;
    return true;
}

static inline int decode(pyu_session *s, uint64_t addr, const uint8_t *buf,
                         size_t fsize, pyu_walk_frame *f, last_code *last)
{
    const pyu_offsets *o = &s->off;
    uint8_t owner = pyu_u8(buf, fsize, PYU_OFF(o, fr_owner));
    if (owner >= OWNER_FIRST_SHIM)
        return 0;
    uint64_t exe = pyu_u64(buf, fsize, PYU_OFF(o, fr_executable)) &
                   ~o->tag_mask;
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
                            "guard)", addr);
        if (!(c = pyu_code_get(s, exe, &is_code)))
            return is_code ? -1 : 0;
        if (last)
            *last = (last_code){exe, s->code_epoch, c};
    }
    int32_t tlbc = 0;
    if (o->free_threaded && PYU_HAS(o, fr_tlbc_index))
        tlbc = (int32_t)pyu_u32(buf, fsize, PYU_OFF(o, fr_tlbc_index));
    uint64_t ip = pyu_u64(buf, fsize, PYU_OFF(o, fr_instr_ptr));
    if (pyu_code_incomplete(s, c, owner, ip))
        return 0;
    f->addr = addr;
    f->code_addr = exe;
    f->instr = pyu_code_instr(s, c, ip, tlbc);
    f->owner = owner;
    f->epoch = s->code_epoch; /* after pyu_code_get, which may flush */
    return 1;
}

int pyu_frame_decode(pyu_session *s, uint64_t addr, const uint8_t *buf,
                     size_t fsize, pyu_walk_frame *f)
{
    return decode(s, addr, buf, fsize, f, NULL);
}

/* Reports an entry frame at addr; true when fn ended the walk. */
static bool report_entry(pyu_session *s, pyu_chain *c, uint64_t addr,
                         int (*fn)(void *arg, const pyu_walk_frame *f),
                         void *arg)
{
    pyu_walk_frame f = {.addr = addr, .instr = PYU_INSTR_UNKNOWN,
                        .owner = PYU_OWNER_ENTRY, .index = c->index,
                        .epoch = s->code_epoch};
    int rc = fn(arg, &f);
    if (rc == PYU_WALK_NEXT)
        return false;
    c->fn_ended = true;
    c->fn_rc = rc;
    return true;
}

int pyu_chain_walk(pyu_session *s, pyu_chain *c,
                   int (*fn)(void *arg, const pyu_walk_frame *f), void *arg)
{
    const pyu_offsets *o = &s->off;
    size_t fsize = (size_t)PYU_OFF(o, fr_size); /* <= the buffer */
    uint8_t copy[PYU_BUF_FRAME];
    cycle cyc = {0, 1, 0};
    uint64_t frame = c->first;
    pyu_chunk_span span = {0, 0, NULL}; /* the chunk of the last frame */
    last_code last = {0, 0, NULL};

    c->truncated = PYU_TRUNC_NONE;
    c->saw_watch = c->stopped = c->fn_ended = false;
    pyu_chunks_reset(s, c->chunk, frame + fsize);
    while (frame) {
        if (cycle_step(&cyc, frame)) {
            c->truncated = PYU_TRUNC_LOOP;
            break;
        }
        if (frame == c->watch)
            c->saw_watch = true;
        if (c->index >= PYU_MAX_FRAMES) {
            c->truncated = PYU_TRUNC_DEPTH;
            break;
        }
        /* the frame in its chunk's copy, or read on its own */
        const uint8_t *buf =
            frame >= span.start && frame < span.end &&
                    span.end - frame >= fsize
                ? span.local + (frame - span.start)
                : pyu_chunks_find(s, frame, fsize, &span);
        if (!buf) {
            if (pyu_read(s, frame, copy, fsize, "a frame") < 0)
                return -1;
            buf = copy;
        }
        uint64_t prev = pyu_u64(buf, fsize, PYU_OFF(o, fr_previous));
        pyu_walk_frame f;
        int rc = decode(s, frame, buf, fsize, &f, &last);
        if (rc < 0)
            return -1;
        if (rc == 0 && c->entries &&
            pyu_u8(buf, fsize, PYU_OFF(o, fr_owner)) >= OWNER_FIRST_SHIM) {
            if (report_entry(s, c, frame, fn, arg))
                return 0;
        } else if (rc == 1) {
            f.index = c->index++;
            rc = fn(arg, &f);
            if (rc != PYU_WALK_NEXT) {
                c->fn_ended = true;
                c->fn_rc = rc;
                return 0;
            }
        }
        /* 3.11 has no entry frames: the first frame of each eval loop says
         * is_entry, and the loop's _PyCFrame (on its C stack, as 3.12+'s
         * entry frame is) stands for the entry frame below it */
        if (c->entries && c->cframe && PYU_HAS(o, fr_is_entry) &&
            pyu_u8(buf, fsize, PYU_OFF(o, fr_is_entry))) {
            uint64_t at = c->cframe;
            if (pyu_read_quiet(s, at + PYU_OFF(o, cframe_previous),
                               &c->cframe, 8) < 0)
                c->cframe = 0; /* (the rest go unplaced) */
            if (report_entry(s, c, at, fn, arg))
                return 0;
        }
        if (frame == c->stop_at) {
            c->stopped = true;
            break;
        }
        if (frame == c->base)
            break;
        frame = prev;
    }
    return 0;
}
