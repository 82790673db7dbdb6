/* The profile frame of a frame of the target: its function and line (with
 * PYU_SAMPLE_OPCODES, its instruction), through a memo by (code object,
 * instruction) that holds while the code epoch does.  Below the frame
 * cache and the sampler, which both turn frames into profile frames. */
#include "sampling.h"

#include <stdlib.h>
#include <string.h>

#define MEMO_MAX (1u << 16) /* (code, instruction) -> frame memo entries */

/* A (code object, instruction) -> profile frame memo. */
typedef struct pyu_memo_slot {
    uint64_t code; /* 0: free */
    uint64_t ip;
    long frame;    /* profile frame, or -1: not Python code */
} memo_slot;

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
long pyu_sampler_add_frame(pyu_sampler *sm, uint32_t func, const pyu_code *c,
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

long pyu_sampler_frame_of(pyu_sampler *sm, const pyu_frame_raw *f)
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
                         : pyu_sampler_add_frame(sm, (uint32_t)func, c, instr,
                                     c->code_bytes ? c->code_bytes
                                     : f->instr_ptr - 2 * (uint64_t)instr);
        if (frame < 0) {
            pyu_fail(&s->err, PYU_E_NOMEM, "out of memory");
            return -2;
        }
    } else if (is_code) {
        return -2;
    }
    if (sm->memo_epoch != s->code_epoch) /* pyu_code_get flushed */
        memo_clear(sm);
    m = memo_find(sm, f->code, f->ip, &found);
    *m = (memo_slot){f->code, f->ip, frame};
    sm->memon++;
    return frame;
}
