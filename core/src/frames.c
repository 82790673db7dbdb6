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

#include <string.h>

#define OWNER_FIRST_SHIM 3

int pyu_frame_decode(pyu_session *s, uint64_t addr, const uint8_t *buf,
                     size_t fsize, pyu_walk_frame *f)
{
    const pyu_offsets *o = &s->off;
    uint8_t owner = pyu_u8(buf, fsize, PYU_OFF(o, fr_owner));
    if (owner >= OWNER_FIRST_SHIM)
        return 0;
    uint64_t exe = pyu_u64(buf, fsize, PYU_OFF(o, fr_executable)) &
                   ~o->tag_mask;
    bool is_code;
    const pyu_code *c = pyu_code_get(s, exe, &is_code);
    if (!c)
        return is_code ? -1 : 0;
    int32_t tlbc = 0;
    if (o->free_threaded && PYU_HAS(o, fr_tlbc_index))
        tlbc = (int32_t)pyu_u32(buf, fsize, PYU_OFF(o, fr_tlbc_index));
    f->addr = addr;
    f->code_addr = exe;
    f->instr = pyu_code_instr(
        s, c, pyu_u64(buf, fsize, PYU_OFF(o, fr_instr_ptr)), tlbc);
    f->owner = owner;
    f->epoch = pyu_code_epoch(s);
    return 1;
}

int pyu_chain_walk(pyu_session *s, pyu_chain *c,
                   int (*fn)(void *arg, const pyu_walk_frame *f), void *arg)
{
    const pyu_offsets *o = &s->off;
    size_t fsize = (size_t)PYU_OFF(o, fr_size); /* <= the buffer */
    uint8_t buf[PYU_BUF_FRAME];
    cycle cyc = {0, 1, 0};
    uint64_t frame = c->first;

    c->truncated = PYU_TRUNC_NONE;
    c->saw_watch = c->stopped = false;
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
        const uint8_t *local = pyu_chunks_find(s, frame, fsize);
        if (local)
            memcpy(buf, local, fsize);
        else if (pyu_read(s, frame, buf, fsize, "a frame") < 0)
            return -1;
        uint64_t prev = pyu_u64(buf, fsize, PYU_OFF(o, fr_previous));
        pyu_walk_frame f;
        int rc = pyu_frame_decode(s, frame, buf, fsize, &f);
        if (rc < 0)
            return -1;
        if (rc == 1) {
            f.index = c->index++;
            rc = fn(arg, &f);
            if (rc != PYU_WALK_NEXT)
                return rc;
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
