/* The acceptance rules: when a stack read from a running thread is one
 * the thread really had.
 *
 * A sample of a running thread reads its thread state and the memory its
 * frames lie in with one process_vm_readv: the thread state first, then
 * each range of frames, outermost first (read_plan.c).  The kernel copies
 * the ranges one after another while the thread goes on running, so the
 * copy is a near-atomic snapshot, not an atomic one: a frame may be
 * popped, and its slot reused by another call, between the read of the
 * current frame pointer and the copy of the frames below it.  Walking the
 * copy from the current frame then meets frames that never were on the
 * stack together: a frame left behind by a call that returned (its memory
 * is not cleared), under a caller that is another call by now.  That is
 * the torn stack ("b1 -> a2" in a loop that alternates a1 -> a2 and
 * b1 -> b2: the walk found a2's leftover frame above b1).
 *
 * What does not make a stack wrong is a change after the copy: the stack
 * the copy shows is the one the thread had when it was copied, whatever
 * the thread did next.  An earlier rule here left out every stack whose
 * innermost frames or current frame had moved by the time they were read
 * a second time; moves are frequent exactly in short, often called
 * functions, so the profiles it kept over-weighted long-running ones.
 * Nothing here compares the snapshot with a later read of the target.
 *
 * Instead each link of the chain is checked for evidence, inside the
 * snapshot, that the caller made the call the frame above it is:
 *
 *   - The chain ends where a thread's chain ends: at the thread's base
 *     frame (3.15), at an entry frame whose previous is NULL (3.12+: the
 *     eval loop C code entered first), or (3.11) at a frame of the data
 *     stack that started an eval loop and has no previous.  A walk that
 *     meets NULL anywhere else went through a frame left behind: a
 *     suspended generator's frame has no previous.
 *   - Every Python frame runs a code object, its instruction pointer
 *     lies inside that code object's bytecode, and the function it names
 *     runs that code object.  A frame being written while it was copied
 *     (a new call filling a reused slot) shows one call's code object with
 *     another call's instruction pointer or function.
 *   - A frame on the data stack was pushed by its caller's current
 *     instruction.  When that instruction is a call (CALL, CALL_KW,
 *     CALL_FUNCTION_EX and their specialised forms), the caller saved the
 *     top of its value stack before pushing the frame, and the callable
 *     sits at that top (3.11: or one word above, after the NULL or self
 *     that 3.11 pushes first): it is the function the new frame runs.  A
 *     frame left behind by another call runs another function, and the
 *     caller's stack names its own callee.  The word is read from the same
 *     copy as the caller.  A copy is not one load: the caller's code and
 *     instruction can be of an earlier moment than its stack and the frame
 *     above, copied after them (it returned, and the next call in its
 *     place pushed its own callee there).  The innermost frames (and
 *     the anchor's window, 3.15) are read twice, and the second copy
 *     must show the same call (at it, or gone on from it); a window's
 *     frames read elsewhere, copied once, want the callee's name in the
 *     caller's code, or a copy of the caller made then at that call.
 *     A caller that has not started (3.11: before its first
 *     instruction, a frame CPython does not show) has called nothing,
 *     and a 3.11 caller at the call instruction itself is running it: it
 *     moves to the call's last inline cache entry as it pushes the frame.
 *     A caller whose copy ended before the words at its stack's top is
 *     copied again with them, and must still be at the call: the words
 *     read alone are of another moment, maybe of another call in its
 *     place (a1's stack under b1's frame).
 *     A caller whose instruction pushes frames in
 *     another way (a property getter, __getitem__, a generator's send,
 *     the shim that runs __init__, an instrumented instruction) gives no
 *     such evidence and is taken as it is; a caller whose instruction
 *     pushes no frame at all (it is running: the frame above was left
 *     behind) is not.
 *   - Frames C code called (behind an entry frame, 3.11's is_entry) carry
 *     no evidence of their caller: C code between them and their caller
 *     made the call.
 *   - A frame popped between the read of the thread state and its copy
 *     (3.14+ clears it; sampler.c finds its code from its instruction
 *     pointer) carries none either, and its caller has gone on: the
 *     caller's code must name it.
 *
 * The instruction a caller stands at is read from the target once per
 * (code object, instruction) and remembered until the caches are flushed.
 *
 * What the rules cannot exclude.  Versions without an anchor (3.11, 3.13,
 * 3.14) cannot rule out by reading alone that a slot was reused by an
 * identical call (ABA), and neither can the rules.  What passes them is
 * a copy of two turns of a loop at once: with `a1(); b1()` in a loop,
 * b1's code and instruction at its call, and a1's callee a2 at its
 * stack's top and in the slot above, which held a2 half a turn earlier
 * or later.  The kernel's copy is not one load, and the words of a line
 * the thread is writing are not copied in address order either: the
 * order of the ranges read (caller before callee) does not make it
 * impossible, only rare.  The second copy of the innermost frames stops
 * most of them, but two copies made alike, one right after the other,
 * are torn alike far more often than by chance (a loop whose turn lasts
 * about as long as a copy meets both at the same point of its turn).  So
 * the second copy is read in another order, each frame before the one
 * below it (read_plan.c), and a caller it shows gone on from its call
 * (no evidence of the call left) must name its callee (twice_calls()).
 * Measured by bench/impossible-run (tests/targets/workloads.py alternate
 * at 20 kHz, where 4 % of the stacks a single read finds are impossible;
 * 20 runs of 40,000 samples an interpreter): 1 in 158,000 on 3.11 (1 in
 * 23,000 before both), 0-1 in 700,000 on 3.13t, 3.14 and 3.14t, and 1 in
 * 42,000 on 3.13.5, whose layout puts the caller's instruction, its
 * stack's top and the callee's first words in one cache line (about the
 * same before).  Most runs have none; the rest come in bursts of one
 * run, so the tests assert at most 1 in 1,000 in a run
 * (docs/sample.md), and the rate is the benchmark's.
 * On 3.15 a thread whose anchor proves its stack is not read at all
 * (frame_cache.c); the rest is read under the same rules.
 *
 * A current frame whose slot held another call by its copy (its code
 * object does not end where the data stack ended at the thread state's
 * moment) is not walked at all: snapshot.c says what is recorded then.
 *
 * A stack that fails is read again from a new snapshot (sampler.c); the
 * outer frames that passed are kept if it keeps failing.
 */
#include "sampling.h"

#include <stdlib.h>
#include <string.h>

#define KIND_MAX (1u << 16) /* memo entries */

/* ------------------------------------------------- what a caller is at */

static bool base_is(const char *base, const char *const *names)
{
    for (; *names; names++)
        if (strcmp(base, *names) == 0)
            return true;
    return false;
}

/* The kind of instruction op (compiled as base) is. */
static uint8_t classify(const char *op, const char *base)
{
    static const char *const calls[] = {"CALL", "CALL_KW",
                                        "CALL_FUNCTION_EX", NULL};
    static const char *const pushers[] = {
        "LOAD_ATTR",      /* a property's getter, __getattribute__ */
        "BINARY_SUBSCR",  /* __getitem__ (3.11-3.13) */
        "BINARY_OP",      /* __getitem__ (3.14+: BINARY_OP_SUBSCR_GETITEM) */
        "SEND", "FOR_ITER", /* a generator's or coroutine's frame */
        "YIELD_FROM",     /* (3.9, 3.10: yield from, await) */
        "EXIT_INIT_CHECK", /* the shim that ran __init__ */
        NULL};
    static const char *const returns[] = {"RETURN_VALUE", "RETURN_CONST",
                                          NULL};
    if (!*op)
        return PYU_AT_OTHER;
    if (strncmp(op, "INSTRUMENTED_", 13) == 0)
        return PYU_AT_PUSH; /* (monitoring on: no claims about its stack) */
    if (base_is(base, returns))
        return PYU_AT_RETURN;
    if (base_is(base, calls))
        /* (the specialisation for classes pushes __init__'s shim frame,
         * which runs no function) */
        return strcmp(op, "CALL_ALLOC_AND_ENTER_INIT") == 0 ? PYU_AT_PUSH
                                                            : PYU_AT_CALL;
    return base_is(base, pushers) ? PYU_AT_PUSH : PYU_AT_OTHER;
}

static void kinds_clear(pyu_sampler *sm)
{
    if (sm->kinds)
        memset(sm->kinds, 0, sm->kindcap * sizeof *sm->kinds);
    sm->kindn = 0;
    sm->kind_epoch = sm->s->code_epoch;
}

/* What the frame f (running c) stands at; PYU_AT_OTHER when it cannot
 * be told. */
static uint8_t kind_of(pyu_sampler *sm, const pyu_frame_raw *f,
                       const pyu_code *c)
{
    pyu_session *s = sm->s;
    if (sm->kind_epoch != s->code_epoch)
        kinds_clear(sm);
    if (sm->kindn * 2 >= sm->kindcap) {
        if (sm->kindcap >= KIND_MAX) {
            kinds_clear(sm);
        } else {
            size_t ncap = sm->kindcap ? sm->kindcap * 2 : 256;
            pyu_kind_slot *nk = calloc(ncap, sizeof *nk);
            if (!nk)
                return PYU_AT_OTHER; /* (read again next time) */
            free(sm->kinds);
            sm->kinds = nk;
            sm->kindcap = ncap;
            kinds_clear(sm);
        }
    }
    size_t i = pyu_slot(f->code ^ (f->ip << 7) ^ (f->ip >> 29), sm->kindcap);
    for (;; i = (i + 1) & (sm->kindcap - 1)) {
        pyu_kind_slot *k = &sm->kinds[i];
        if (k->code == f->code && k->ip == f->ip)
            return k->kind;
        if (!k->code)
            break;
    }
    uint32_t instr = pyu_code_instr(s, c, f->instr_ptr, f->tlbc), at = instr;
    if (instr == PYU_INSTR_UNKNOWN)
        return PYU_AT_OTHER;
    const char *op, *base;
    /* (before 3.11 the bytecode lies in co_code, a bytes object; an
     * instruction pointer there stands for the instruction's index) */
    pyu_code_opcode(s,
                    s->off.object_frames ? c->code_bytes
                                         : f->instr_ptr - 2 * (uint64_t)instr,
                    &instr, &op, &base);
    uint8_t kind = classify(op, base);
    /* (3.11 points a caller at its call's last inline cache entry when
     * it pushes the frame: at the call itself it is running it, and has
     * pushed nothing yet) */
    if (kind == PYU_AT_CALL && s->off.instr_in_caches && at == instr &&
        strcmp(base, "CALL") == 0)
        kind = PYU_AT_OTHER;
    if (!*op)
        return kind; /* (not remembered: the read may work next time) */
    if (sm->kind_epoch != s->code_epoch) /* (a read flushed the caches) */
        kinds_clear(sm);
    i = pyu_slot(f->code ^ (f->ip << 7) ^ (f->ip >> 29), sm->kindcap);
    while (sm->kinds[i].code)
        i = (i + 1) & (sm->kindcap - 1);
    sm->kinds[i] = (pyu_kind_slot){f->code, f->ip, kind};
    sm->kindn++;
    return kind;
}

/* --------------------------------------------- calls made by name */

#define NAMES_MAX 256 /* names of a code object looked at */

/* Whether the code object caller names (in co_names: the globals and
 * attributes it loads) the name of code object callee: a call it can make
 * without the evidence of a pending call (remembered per pair). */
static bool names_callee(pyu_sampler *sm, uint64_t caller, uint64_t callee)
{
    pyu_session *s = sm->s;
    const pyu_offsets *o = &s->off;
    if (!PYU_HAS(o, co_names))
        return false;
    if (sm->names_epoch != s->code_epoch) {
        memset(sm->names, 0, sizeof sm->names);
        sm->names_epoch = s->code_epoch;
    }
    size_t i = pyu_slot(caller * 31 ^ callee, PYU_NAMES_MEMO);
    pyu_names_slot *m = &sm->names[i];
    if (m->caller == caller && m->callee == callee)
        return m->yes;
    bool is_code, yes = false;
    const pyu_code *ce = pyu_code_get(s, callee, &is_code);
    uint64_t want = ce ? ce->str_addr[1] : 0, tuple = 0;
    int64_t n = 0;
    if (want &&
        pyu_read_quiet(s, caller + PYU_OFF(o, co_names), &tuple, 8) == 0 &&
        pyu_read_quiet(s, tuple + PYU_OFF(o, tuple_ob_size), &n, 8) == 0 &&
        n > 0) {
        uint64_t items[NAMES_MAX];
        size_t k = n < NAMES_MAX ? (size_t)n : NAMES_MAX;
        if (pyu_read_quiet(s, tuple + PYU_OFF(o, tuple_ob_item), items,
                           8 * k) == 0)
            for (size_t j = 0; j < k && !yes; j++)
                yes = items[j] == want; /* (names are interned) */
    }
    if (sm->names_epoch == s->code_epoch) /* (a read may have flushed) */
        *m = (pyu_names_slot){caller, callee, yes};
    return yes;
}

/* --------------------------------------- calls by name, 3.9 and 3.10 */

#define REACH_FROM 32 /* calls of one name looked at */

static void sites_clear(pyu_sampler *sm)
{
    for (size_t i = 0; sm->sites && i < PYU_SITES_MEMO; i++) {
        free(sm->sites[i].site);
        sm->sites[i] = (pyu_sites_slot){0};
    }
    if (sm->reach)
        memset(sm->reach, 0, PYU_REACH_MEMO * sizeof *sm->reach);
    sm->sites_epoch = sm->s->code_epoch;
}

/* The memo of code cc's calls by name, read on a miss; NULL when it
 * cannot be had. */
static const pyu_sites_slot *sites_of(pyu_sampler *sm, const pyu_code *cc)
{
    if (!sm->sites) {
        sm->sites = calloc(PYU_SITES_MEMO, sizeof *sm->sites);
        sm->reach = calloc(PYU_REACH_MEMO, sizeof *sm->reach);
        if (!sm->sites || !sm->reach) {
            free(sm->sites);
            free(sm->reach);
            sm->sites = NULL;
            sm->reach = NULL;
            return NULL;
        }
        sm->sites_epoch = sm->s->code_epoch;
    }
    if (sm->sites_epoch != sm->s->code_epoch)
        sites_clear(sm);
    pyu_sites_slot *m = &sm->sites[pyu_slot(cc->addr, PYU_SITES_MEMO)];
    if (m->code == cc->addr)
        return m;
    pyu_call_site buf[PYU_SITES_MAX];
    long n = pyu_code_call_sites(sm->s, cc, buf, PYU_SITES_MAX);
    if (n < 0 || sm->sites_epoch != sm->s->code_epoch)
        return NULL; /* (read again next time) */
    pyu_call_site *keep = n ? malloc((size_t)n * sizeof *keep) : NULL;
    if (n && !keep)
        return NULL;
    if (n)
        memcpy(keep, buf, (size_t)n * sizeof *keep);
    free(m->site);
    *m = (pyu_sites_slot){cc->addr, (uint32_t)n, keep};
    return m;
}

/* What the calls by name say of a link from caller c (a frame object of
 * the thread's data, 3.9/3.10) to frame e: c's code, its calls by name,
 * e's name and the instruction c stands at.  False when they cannot be
 * told (no such caller, a generator's frame, a code or instruction
 * unknown, no calls). */
typedef struct call_query {
    const pyu_code *cc;
    const pyu_sites_slot *m;
    uint64_t want;
    uint32_t at;
} call_query;

static bool call_query_of(pyu_sampler *sm, const pyu_frame_raw *c,
                          const pyu_sframe *e, call_query *q)
{
    pyu_session *s = sm->s;
    if (!s->off.object_frames || c->owner != PYU_OWNER_THREAD || e->gen)
        return false;
    const pyu_code *ce = pyu_code_cached(s, e->r.code);
    if (!(q->cc = pyu_code_cached(s, c->code)) || !ce || !ce->str_addr[1])
        return false;
    q->want = ce->str_addr[1];
    q->m = sites_of(sm, q->cc);
    q->at = pyu_code_instr(s, q->cc, c->instr_ptr, c->tlbc);
    return q->m && q->m->n && q->at != PYU_INSTR_UNKNOWN;
}

bool pyu_accept_uncalled(pyu_sampler *sm, const pyu_frame_raw *c,
                          const pyu_sframe *e)
{
    pyu_session *s = sm->s;
    call_query q;
    if (!call_query_of(sm, c, e, &q))
        return false;
    uint32_t from[REACH_FROM];
    size_t n = 0;
    for (size_t i = 0; i < q.m->n && n < REACH_FROM; i++) {
        const pyu_call_site *x = &q.m->site[i];
        if (x->name != q.want)
            continue;
        if (x->start <= q.at && q.at <= x->at)
            return false; /* (at that call) */
        from[n++] = x->at;
    }
    if (!n)
        return false;
    pyu_reach_slot *r =
        &sm->reach[pyu_slot(q.cc->addr ^ q.want * 31 ^ (uint64_t)q.at << 40,
                            PYU_REACH_MEMO)];
    if (r->code != q.cc->addr || r->name != q.want || r->at != q.at) {
        int reached = pyu_code_reaches(s, q.cc, from, n, q.at);
        if (sm->sites_epoch != s->code_epoch)
            return false; /* (a read flushed the caches) */
        *r = (pyu_reach_slot){q.cc->addr, q.want, q.at, (int8_t)reached};
    }
    return r->reached == 0;
}

uint32_t pyu_accept_call_of(pyu_sampler *sm, const pyu_frame_raw *c,
                            const pyu_sframe *e)
{
    call_query q;
    uint32_t one = PYU_INSTR_UNKNOWN;
    if (!call_query_of(sm, c, e, &q))
        return PYU_INSTR_UNKNOWN;
    for (size_t i = 0; i < q.m->n; i++) {
        const pyu_call_site *x = &q.m->site[i];
        if (x->name != q.want)
            continue;
        if ((x->start <= q.at && q.at <= x->at) || one != PYU_INSTR_UNKNOWN)
            return PYU_INSTR_UNKNOWN; /* (at that call; or two of them) */
        one = x->at;
    }
    return one;
}

void pyu_accept_free(pyu_sampler *sm)
{
    if (sm->sites)
        sites_clear(sm);
    free(sm->sites);
    free(sm->reach);
    sm->sites = NULL;
    sm->reach = NULL;
    free(sm->kinds);
    sm->kinds = NULL;
    sm->kindcap = sm->kindn = 0;
}

/* ------------------------------------------ the evidence a copy holds */

/* The words at a frame's saved stack top in a copy of avail bytes of it
 * from buf. */
uint8_t pyu_sframe_slots(uint64_t addr, uint64_t sp, const uint8_t *buf,
                        size_t avail, uint64_t slot[2])
{
    if (sp <= addr || sp - addr >= avail)
        return 0;
    size_t at = (size_t)(sp - addr), room = avail - at;
    uint8_t n = room >= 16 ? 2 : room >= 8 ? 1 : 0;
    memcpy(slot, buf + at, 8u * n);
    return n;
}

uint16_t pyu_sframe_ret(const pyu_sampler *sm, const uint8_t *buf)
{
    const pyu_offsets *o = &sm->s->off;
    return PYU_HAS(o, fr_return_offset)
               ? (uint16_t)(pyu_u32(buf, sm->fsize,
                                    PYU_OFF(o, fr_return_offset)) &
                            0xFFFF)
               : 0;
}

/* Whether frame f is one being popped or popped (3.14+, which clears a
 * frame it pops): popping makes the caller current, then drops the
 * frame's value stack and locals (its stack pointer set to where its
 * locals start: a running frame's stack starts after them), then its
 * function, then its code.  A generator's frame is cleared so when the
 * generator returns (its code too, which a generator that yielded
 * keeps).  A frame with neither a previous frame nor code is one popped
 * whose slot C code is filling with its next call (a sort's next
 * comparison): a frame C code pushes starts with no previous (the eval
 * loop links it to its entry frame), then gets its function and code,
 * and its instruction pointer last -- until then the popped frame's. */
bool pyu_frame_popped(pyu_session *s, const pyu_frame_raw *f)
{
    const pyu_offsets *o = &s->off;
    if (o->version_hex >= 0x030E0000 && f->owner == PYU_OWNER_GENERATOR &&
        !f->code)
        return true;
    if (o->version_hex < 0x030E0000 || f->owner != PYU_OWNER_THREAD)
        return false;
    if (!f->prev)
        return !f->code;
    if (!f->code || !f->func)
        return true;
    const pyu_code *c;
    return f->sp == f->addr + PYU_OFF(o, fr_localsplus) &&
           (c = pyu_code_cached(s, f->code)) && c->nlocalsplus;
}

bool pyu_accept_returning(pyu_sampler *sm, const pyu_frame_raw *f)
{
    const pyu_code *c = pyu_code_cached(sm->s, f->code);
    return c && kind_of(sm, f, c) == PYU_AT_RETURN;
}

/* ----------------------------------------------------------- the rules */

/* Whether func is None (the function of a shim frame: the one that runs
 * __init__ is pushed by a call too). */
static bool is_none(pyu_sampler *sm, uint64_t func)
{
    pyu_session *s = sm->s;
    if (!func)
        return false;
    if (func == sm->none_addr)
        return true;
    uint64_t type;
    if (pyu_read_quiet(s, func + PYU_OFF(&s->off, ob_type), &type, 8) < 0)
        return false;
    const pyu_type *t = pyu_type_get(s, type);
    if (!t || t->kind != PYU_TYPE_NONE)
        return false;
    sm->none_addr = func; /* (a singleton, never freed) */
    return true;
}

/* Whether a caller whose value stack's top was saved at sp (the words
 * there in slot: n of them read with it; ret its return_offset) is in the
 * call of function func. */
static bool calls(pyu_sampler *sm, uint64_t sp, const uint64_t *slot,
                  uint8_t n, uint16_t ret, uint64_t func)
{
    const pyu_offsets *o = &sm->s->off;
    if (!sp || !func)
        return false;
    /* (a caller saves the size of its call before it pushes the frame: a
     * new frame, whose stack holds what the slot's last occupant left,
     * has 0) */
    if (PYU_HAS(o, fr_return_offset) && !ret)
        return false;
    uint64_t w[2] = {slot[0], slot[1]};
    size_t want = o->builtin ? 2 : 1; /* (3.11: NULL or self first) */
    if (n < want && pyu_read_quiet(sm->s, sp, w, 8 * want) < 0)
        return false;
    for (size_t k = 0; k < want; k++)
        if ((w[k] & ~o->tag_mask) == func)
            return true;
    return false;
}

#define AGAIN_MAX 512 /* bytes of a caller copied again at most */

/* Whether a later copy `now` of a caller copied at a call of func (`was`)
 * shows the same call: the same code under the same frame, at the same
 * call (its stack's top, the n words in slot, names func) or gone on
 * from it (the callee returned) -- the same call still, not a new call of
 * the same code, which has made no call yet (return_offset ret 0: the
 * torn copy's a1 called anew, below).  Not on 3.11, which has no
 * return_offset: gone on is not told from called anew there. */
static bool still_calls(pyu_sampler *sm, const pyu_frame_raw *was,
                        const pyu_frame_raw *now, const uint64_t *slot,
                        uint8_t n, uint16_t ret, uint64_t func)
{
    if (now->code != was->code || now->prev != was->prev)
        return false; /* (another call there now) */
    return now->instr_ptr == was->instr_ptr
               ? calls(sm, now->sp, slot, n, ret, func)
               : ret != 0;
}

/* Whether caller c, copied once (a frame read with the anchor's window,
 * outside it), is at its call of e by a copy of it made now.  The first
 * copy can have its stack of a later moment than its code and
 * instruction, copied before it: with `a1(); b1()`, a1 at its call of a2
 * while the slot of its stack and the frame above already hold b1's
 * callee b2.  Such a copy is not met twice, where a caller that stays at
 * its call is. */
static bool copied_again(pyu_sampler *sm, const pyu_sframe *c,
                         const pyu_sframe *e)
{
    uint8_t buf[AGAIN_MAX];
    size_t len = sm->fsize;
    if (c->r.sp > c->r.addr && c->r.sp - c->r.addr + 16 > len)
        len = (size_t)(c->r.sp - c->r.addr) + 16;
    if (len > sizeof buf || pyu_read_quiet(sm->s, c->r.addr, buf, len) < 0)
        return false;
    pyu_frame_raw f;
    uint64_t slot[2];
    pyu_frame_raw_take(&sm->s->off, c->r.addr, buf, sm->fsize, &f);
    uint8_t n = pyu_sframe_slots(f.addr, f.sp, buf, len, slot);
    uint16_t ret = pyu_sframe_ret(sm, buf);
    return still_calls(sm, &c->r, &f, slot, n, ret, e->r.func);
}

/* Whether the second copy of caller c and frame e (the innermost frames
 * are copied twice) shows the call the first shows: e's frame as it was,
 * under the same call of c (still_calls(): at it, or gone on from it, the
 * callee having returned between the copies).  A short callee often has
 * by then, and a second copy at the call itself was wanted: on 3.13t's
 * workloads.py stdlib, Fraction's operators (`forward -> _sub ->
 * _from_coprime_ints`) failed here in most samples and were read again
 * 65 us later, in the program's next phase.  The torn copy this is for
 * does not pass either way: with `a1(); b1()`, a1 at its call of a2 while
 * the slot of its stack and the frame above already hold b1's callee b2,
 * the second copy has b1 in a1's place, or a new call of a1 (return_offset
 * 0 until it calls) with a2 above it, not b2. */
static bool twice_calls(pyu_sampler *sm, const pyu_sframe *c,
                        const pyu_sframe *e)
{
    if (e->r2.code != e->r.code || e->r2.prev != e->r.prev)
        return false;
    /* (gone on from the call: the second copy has no evidence of it left,
     * and the first may be torn -- b1 at its call, a1's callee a2 at its
     * stack's top and above it, of a moment half a turn later: the
     * caller's code must name the callee) */
    if (c->r2.instr_ptr != c->r.instr_ptr &&
        !names_callee(sm, c->r.code, e->r.code))
        return false;
    return still_calls(sm, &c->r, &c->r2, c->slot2, c->nslot2, c->ret2,
                       e->r2.func);
}

/* The evidence that caller c (running code cc) pushed the frame e of the
 * data stack. */
static bool pushed(pyu_sampler *sm, const pyu_sframe *c, const pyu_code *cc,
                   const pyu_sframe *e)
{
    uint8_t kind = kind_of(sm, &c->r, cc);
    if (kind == PYU_AT_PUSH)
        return true;
    if (kind == PYU_AT_CALL) {
        /* (words at the caller's stack top that its copy did not hold:
         * read with the caller again, which must still be at that call --
         * read alone they are of another moment, maybe of another call in
         * its place) */
        bool at = c->nslot < (sm->s->off.builtin ? 2 : 1)
                      ? c->r.sp && copied_again(sm, c, e)
                      : calls(sm, c->r.sp, c->slot, c->nslot, c->ret,
                              e->r.func);
        /* the innermost frames were read twice: a copy can mix two
         * moments of a frame being written (the kernel's copy is not one
         * load); the second shows whether the call was really there */
        if (at && (c->twice && e->twice
                       ? twice_calls(sm, c, e)
                       : !sm->one_copy ||
                             names_callee(sm, c->r.code, e->r.code) ||
                             copied_again(sm, c, e)))
            return true;
        if (is_none(sm, e->r.func))
            return true;
    }
    /* the caller is past the call (or not at it yet): the frame above is
     * its own callee that returned after the thread state was read, or a
     * frame left behind by a call the slot's earlier occupant made; its
     * own, when the caller's code names the callee's (a call by name) */
    return names_callee(sm, c->r.code, e->r.code);
}

/* Whether the chain ends where a thread's chain ends. */
static bool complete(const pyu_sampler *sm, const pyu_sthread *t,
                     const pyu_tstate *ts)
{
    const pyu_frame_raw *last = &t->fr[t->nfr - 1].r;
    switch (t->end) {
    case PYU_CHAIN_BASE:
    case PYU_CHAIN_DEPTH: /* (as deep as a walk goes: shown truncated) */
        return true;
    case PYU_CHAIN_NULL:
        if (ts->base_frame)
            return false; /* (3.15 ends every chain at its base frame) */
        if (!PYU_HAS(&sm->s->off, fr_is_entry))
            return last->owner >= PYU_OWNER_ENTRY;
        return last->owner == PYU_OWNER_THREAD && last->entry;
    default:
        return false;
    }
}

/* Whether function func's code object is code (a frame of one call with
 * the function of the next call in its slot, half written, has not).
 * Remembered in sets of four by the function's address; checked against
 * the target when it disagrees: a function freed and another made at its
 * address, a __code__ assigned. */
static bool func_runs(pyu_sampler *sm, uint64_t func, uint64_t code)
{
    if (func == sm->none_addr)
        return true; /* (a shim frame's, once met: read no more) */
    pyu_func_slot *set = &sm->funcs[pyu_slot(func, PYU_FUNCS_MEMO) & ~3u];
    size_t k = 0;
    for (; k < 4 && set[k].func; k++)
        if (set[k].func == func) {
            if (set[k].code == code)
                return true;
            break;
        }
    if (k == 4)
        k = sm->funcs_next++ & 3; /* (a full set: each in turn) */
    /* (PyFunctionObject: the object's header, then globals, builtins,
     * name, qualname, code, 3.11 to 3.15) */
    uint64_t fc;
    if (pyu_read_quiet(sm->s, func + PYU_OFF(&sm->s->off, ob_type) + 8 + 32,
                       &fc, 8) < 0)
        return is_none(sm, func);
    set[k] = (pyu_func_slot){func, fc};
    /* (None: a shim frame's, 3.13+ runs __init__'s that way) */
    return fc == code || is_none(sm, func);
}

/* Whether the frame is one the rules take: an owner CPython has; a
 * Python frame runs a code object and its instruction lies in it, and
 * the function it names runs that code.  1 or 0, -1 on an error that
 * ends the sample. */
static int frame_ok(pyu_sampler *sm, const pyu_sframe *e)
{
    pyu_session *s = sm->s;
    if (e->r.owner > 4) /* (3.14+ owners end at the C stack's, 4) */
        return 0;
    if (e->r.owner >= PYU_OWNER_ENTRY)
        return 1;
    bool is_code;
    const pyu_code *c = pyu_code_get(s, e->r.code, &is_code);
    if (!c)
        return s->err.code == PYU_E_NOPROC || s->err.code == PYU_E_NOMEM
                   ? -1
                   : 0; /* (not a code object: torn) */
    if (pyu_code_instr(s, c, e->r.instr_ptr, e->r.tlbc) ==
            PYU_INSTR_UNKNOWN &&
        !pyu_code_incomplete(s, c, e->r.owner, e->r.instr_ptr))
        return 0;
    return !e->r.func || func_runs(sm, e->r.func, e->r.code);
}

/* Whether the link from frame e down to its caller c has its evidence. */
static bool link_ok(pyu_sampler *sm, const pyu_sframe *c, const pyu_sframe *e)
{
    /* C code made the call (an entry frame, 3.11's is_entry); a
     * generator's frame names its caller only while it runs (it clears
     * previous when it yields) */
    if (c->r.owner >= PYU_OWNER_ENTRY || e->r.owner != PYU_OWNER_THREAD ||
        e->r.entry)
        return true;
    bool is_code;
    const pyu_code *cc = pyu_code_get(sm->s, c->r.code, &is_code);
    if (!cc)
        return false;
    /* a caller that has not started (3.11: before its first instruction)
     * has made no call: the frame above is a leftover of its slot's
     * earlier occupant, which its code may well name (b2's leaf above a
     * b2 pushed anew, hidden as incomplete: b1 -> leaf) */
    if (pyu_code_incomplete(sm->s, cc, c->r.owner, c->r.instr_ptr))
        return false;
    /* a frame popped before its copy has no evidence of its call left (its
     * caller, copied after that, has gone on): its caller's code must
     * name it */
    return e->popped ? names_callee(sm, c->r.code, e->r.code)
                     : pushed(sm, c, cc, e);
}

bool pyu_accept_named(pyu_sampler *sm, const pyu_frame_raw *c,
                      const pyu_sframe *e)
{
    if (c->owner >= PYU_OWNER_ENTRY || e->r.owner != PYU_OWNER_THREAD ||
        e->r.entry)
        return true; /* (as link_ok: no evidence to want) */
    return c->owner == PYU_OWNER_THREAD && names_callee(sm, c->code, e->r.code);
}

bool pyu_accept_vouched(pyu_sampler *sm, const pyu_frame_raw *c,
                        const pyu_sframe *e)
{
    if (pyu_accept_named(sm, c, e))
        return true;
    bool is_code;
    const pyu_code *cc = pyu_code_get(sm->s, c->code, &is_code);
    return cc && kind_of(sm, c, cc) == PYU_AT_PUSH;
}

long pyu_accept_links(pyu_sampler *sm, const pyu_sframe *fr, size_t n)
{
    for (size_t i = n; i-- > 0;) {
        int ok = frame_ok(sm, &fr[i]);
        if (ok < 0)
            return -1;
        if (!ok || (i + 1 < n && !link_ok(sm, &fr[i + 1], &fr[i])))
            return (long)(n - 1 - i);
    }
    return (long)n;
}

long pyu_accept_chain(pyu_sampler *sm, pyu_sthread *t, const pyu_tstate *ts)
{
    if (!t->nfr || !complete(sm, t, ts))
        return 0;
    return pyu_accept_links(sm, t->fr, t->nfr);
}

long pyu_accept_upper(pyu_sampler *sm, const pyu_sframe *fr, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        int ok = frame_ok(sm, &fr[i]);
        if (ok < 0)
            return -1;
        if (!ok)
            return (long)i;
        if (i > 0 && !link_ok(sm, &fr[i], &fr[i - 1]))
            return (long)i;
    }
    return (long)n;
}
