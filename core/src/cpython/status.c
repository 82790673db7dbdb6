/* Thread status: holds the GIL, waits for it, runs on a CPU, collects
 * garbage, handles an exception. */
#include "../internal.h"

#define MAX_EXC_ITEMS 1024 /* handled-exception stack entries looked at */

/* Is obj an exception (not NULL, not None)?  Unreadable: no. */
static bool is_exception(pyu_session *s, uint64_t obj)
{
    uint64_t type = 0;
    /* (3.11 keeps None where no exception is handled: known once seen,
     * it costs no read a sample) */
    if (!obj || obj == s->none_addr ||
        pyu_read_quiet(s, obj + PYU_OFF(&s->off, ob_type), &type, 8) < 0)
        return false;
    const pyu_type *t = pyu_type_get(s, type);
    if (t && t->kind == PYU_TYPE_NONE)
        s->none_addr = obj; /* (a singleton, never freed) */
    return t && t->kind != PYU_TYPE_NONE && t->kind != PYU_TYPE_UNNAMED;
}

/* The exception being handled, as sys.exception() finds it: the topmost
 * entry of the handled-exception stack that holds one.  A generator running
 * inside an `except` block pushes an empty entry of its own. */
static uint64_t handled_exception(pyu_session *s, const pyu_tstate *t)
{
    const pyu_offsets *o = &s->off;
    uint64_t item = t->exc_info, value = t->exc_value,
             prev = t->exc_previous;
    bool have = t->exc_info_local;
    cycle cyc = {0, 1, 0};
    for (int n = 0; item && n < MAX_EXC_ITEMS; n++) {
        if (!have) {
            pyu_range r[2] = {
                {item + PYU_OFF(o, err_exc_value), &value, 8},
                {item + PYU_OFF(o, err_previous_item), &prev, 8},
            };
            if (pyu_readv_quiet(s, r, 2) < 0)
                return 0;
        }
        if (value)
            return value;
        if (cycle_step(&cyc, item))
            return 0;
        item = prev;
        have = false;
    }
    return 0;
}

unsigned pyu_status_of(pyu_session *s, const pyu_interp *in,
                       const pyu_tstate *t, unsigned want)
{
    const pyu_offsets *o = &s->off;
    unsigned st = 0;
    if (t->holds_gil)
        st |= PYU_STATUS_HAS_GIL;
    if (t->gil_requested)
        st |= PYU_STATUS_GIL_REQUESTED;
    /* 3.15 names the frame that started a collection (the walk looks for
     * it on the thread's stack); before, the collector is whoever holds
     * the GIL */
    if (in->gc_collecting && !PYU_HAS(o, gc_frame) &&
        (st & PYU_STATUS_HAS_GIL))
        st |= PYU_STATUS_GC;
    char sched;
    if ((want & PYU_STATUS_ON_CPU) && s->ops->thread_state &&
        s->ops->thread_state(s->ctx, t->native_id, &sched) == 0 &&
        sched == 'R')
        st |= PYU_STATUS_ON_CPU;
    /* an exception being raised is never None */
    if ((want & PYU_STATUS_EXCEPTION) &&
        (t->current_exception || is_exception(s, handled_exception(s, t))))
        st |= PYU_STATUS_EXCEPTION;
    return st;
}
