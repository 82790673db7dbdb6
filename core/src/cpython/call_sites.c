/* The calls a code object makes by name, CPython 3.9 and 3.10: for each
 * call instruction, the name its callable was loaded by (`d2` in
 * `d2(1)`, `append` in `out.append(x)`), where the bytecode tells it.
 *
 * A call's callable lies under its arguments on the value stack.  From
 * the call back, each instruction's pops and pushes tell the depth of
 * that slot, until the instruction that pushed it: a load by name
 * (LOAD_GLOBAL, LOAD_NAME, LOAD_ATTR, LOAD_METHOD) names the callable.
 * The scan gives up (the site's name 0) at anything it cannot follow
 * back: a jump, a jump's target (the stack there may come from another
 * path), an instruction whose stack effect it does not know, or a
 * callable made by anything else (a local variable, `f()()`,
 * `handlers[k]()`).
 *
 * And whether an instruction can be reached from another: the sampler
 * (accept.c) asks whether a caller copied at one instruction can have
 * made a call at another before, in the same run of its frame.  Every
 * jump counts, both ways of a conditional one, and an exception handler
 * is reached from any instruction between its SETUP and itself; an
 * answer of "not reached" is sure, "reached" may be too generous.
 */
#include "../internal.h"

#include <stdlib.h>
#include <string.h>

#define SCAN_BACK 128     /* instructions looked at back from a call */
#define NAMES_MAX 1024    /* co_names entries read */

typedef struct instr {
    uint32_t start; /* its first code unit (its EXTENDED_ARG prefixes') */
    uint32_t at;    /* the unit of the instruction itself */
    uint32_t arg;
    const char *op; /* its name (opcodes.c) */
} instr;

static bool is(const char *op, const char *name)
{
    return strcmp(op, name) == 0;
}

static bool prefixed(const char *op, const char *prefix)
{
    return strncmp(op, prefix, strlen(prefix)) == 0;
}

/* The jump target of i (a code unit), or -1 when i does not jump.
 * 3.9 counts jumps in bytes, 3.10 in code units. */
static int64_t jump_target(const instr *i, bool units)
{
    static const char *const absolute[] = {
        "JUMP_ABSOLUTE", "POP_JUMP_IF_FALSE", "POP_JUMP_IF_TRUE",
        "JUMP_IF_FALSE_OR_POP", "JUMP_IF_TRUE_OR_POP",
        "JUMP_IF_NOT_EXC_MATCH", NULL};
    static const char *const relative[] = {
        "JUMP_FORWARD", "FOR_ITER", "SETUP_FINALLY", "SETUP_WITH",
        "SETUP_ASYNC_WITH", NULL};
    int64_t arg = units ? (int64_t)i->arg : (int64_t)i->arg / 2;
    for (const char *const *n = absolute; *n; n++)
        if (is(i->op, *n))
            return arg;
    for (const char *const *n = relative; *n; n++)
        if (is(i->op, *n))
            return (int64_t)i->at + 1 + arg;
    return -1;
}

/* How many slots a call instruction's callable lies under the top of
 * the value stack (1: at it), or 0 when op is no call. */
static uint32_t callable_depth(const instr *i)
{
    if (is(i->op, "CALL_FUNCTION"))
        return i->arg + 1;
    if (is(i->op, "CALL_FUNCTION_KW") || is(i->op, "CALL_METHOD"))
        return i->arg + 2; /* (the names tuple; LOAD_METHOD's pair) */
    if (is(i->op, "CALL_FUNCTION_EX"))
        return 2 + (i->arg & 1);
    return 0;
}

/* The values instruction i pops and pushes (3.9, 3.10); false for one
 * the scan does not follow back (jumps, ends of a block, what it does
 * not know). */
static bool effect(const instr *i, uint32_t *pop, uint32_t *push)
{
    static const struct {
        const char *op;
        uint8_t pop, push;
    } fixed[] = {
        {"NOP", 0, 0},          {"POP_TOP", 1, 0},
        {"ROT_TWO", 2, 2},      {"ROT_THREE", 3, 3},
        {"ROT_FOUR", 4, 4},     {"DUP_TOP", 1, 2},
        {"DUP_TOP_TWO", 2, 4},  {"GET_ITER", 1, 1},
        {"GET_YIELD_FROM_ITER", 1, 1}, {"GET_AWAITABLE", 1, 1},
        {"GET_AITER", 1, 1},    {"GET_ANEXT", 1, 2},
        {"LOAD_BUILD_CLASS", 0, 1}, {"LOAD_ASSERTION_ERROR", 0, 1},
        {"YIELD_VALUE", 1, 1},  {"YIELD_FROM", 2, 1},
        {"LIST_TO_TUPLE", 1, 1}, {"COMPARE_OP", 2, 1},
        {"IS_OP", 2, 1},        {"CONTAINS_OP", 2, 1},
        {"LOAD_CONST", 0, 1},   {"LOAD_NAME", 0, 1},
        {"LOAD_GLOBAL", 0, 1},  {"LOAD_FAST", 0, 1},
        {"LOAD_DEREF", 0, 1},   {"LOAD_CLASSDEREF", 0, 1},
        {"LOAD_CLOSURE", 0, 1}, {"LOAD_ATTR", 1, 1},
        {"LOAD_METHOD", 1, 2},  {"STORE_FAST", 1, 0},
        {"STORE_NAME", 1, 0},   {"STORE_GLOBAL", 1, 0},
        {"STORE_DEREF", 1, 0},  {"STORE_ATTR", 2, 0},
        {"STORE_SUBSCR", 3, 0}, {"DELETE_FAST", 0, 0},
        {"DELETE_NAME", 0, 0},  {"DELETE_GLOBAL", 0, 0},
        {"DELETE_DEREF", 0, 0}, {"DELETE_ATTR", 1, 0},
        {"DELETE_SUBSCR", 2, 0}, {"LIST_EXTEND", 1, 0},
        {"SET_UPDATE", 1, 0},   {"DICT_UPDATE", 1, 0},
        {"DICT_MERGE", 1, 0},   {"LIST_APPEND", 1, 0},
        {"SET_ADD", 1, 0},      {"MAP_ADD", 2, 0},
        {"IMPORT_NAME", 2, 1},  {"IMPORT_FROM", 1, 2},
        {"PRINT_EXPR", 1, 0},   {"SETUP_ANNOTATIONS", 0, 0},
        {"POP_BLOCK", 0, 0},
    };
    const char *op = i->op;
    uint32_t a = i->arg;
    for (size_t k = 0; k < sizeof fixed / sizeof *fixed; k++)
        if (is(op, fixed[k].op)) {
            *pop = fixed[k].pop;
            *push = fixed[k].push;
            return true;
        }
    *push = 1;
    if (prefixed(op, "UNARY_")) {
        *pop = 1;
    } else if (prefixed(op, "BINARY_") || prefixed(op, "INPLACE_")) {
        *pop = 2;
    } else if (is(op, "BUILD_TUPLE") || is(op, "BUILD_LIST") ||
               is(op, "BUILD_SET") || is(op, "BUILD_STRING") ||
               is(op, "BUILD_SLICE")) {
        *pop = a;
    } else if (is(op, "BUILD_MAP")) {
        *pop = 2 * a;
    } else if (is(op, "BUILD_CONST_KEY_MAP")) {
        *pop = a + 1;
    } else if (is(op, "FORMAT_VALUE")) {
        *pop = 1 + ((a & 4) != 0);
    } else if (is(op, "MAKE_FUNCTION")) {
        *pop = 2 + !!(a & 1) + !!(a & 2) + !!(a & 4) + !!(a & 8);
    } else if (is(op, "UNPACK_SEQUENCE")) {
        *pop = 1;
        *push = a;
    } else if (is(op, "UNPACK_EX")) {
        *pop = 1;
        *push = (a & 0xFF) + (a >> 8) + 1;
    } else if (callable_depth(i)) {
        *pop = callable_depth(i);
    } else {
        return false;
    }
    return true;
}

/* The code's instructions, decoded (EXTENDED_ARG folded into the one it
 * prefixes), and which code units are jump targets. */
typedef struct decoded {
    instr *ins; /* owned */
    size_t n;
    uint8_t *target; /* owned: a bit per code unit */
    uint64_t names;  /* the co_names tuple, remote */
    int64_t nnames;
} decoded;

static void decoded_free(decoded *d)
{
    free(d->ins);
    free(d->target);
}

/* Whether the unit u is a jump target. */
static bool targeted(const decoded *d, uint32_t u)
{
    return d->target[u / 8] & (1u << (u % 8));
}

/* The name (a co_names index, or -1) instruction k's callable was loaded
 * by: the scan back described at the top. */
static int64_t callable_name(const decoded *d, size_t k)
{
    const instr *ins = d->ins;
    uint32_t need = callable_depth(&ins[k]);
    for (size_t j = k, steps = 0; j-- > 0 && steps < SCAN_BACK; steps++) {
        const instr *i = &ins[j];
        /* (a target after the pusher: the stack there may come from
         * another path) */
        if (targeted(d, ins[j + 1].start))
            return -1;
        uint32_t pop, push;
        if (!effect(i, &pop, &push))
            return -1;
        if (need <= push) {
            bool by_name = is(i->op, "LOAD_GLOBAL") || is(i->op, "LOAD_NAME") ||
                           is(i->op, "LOAD_ATTR");
            if (is(i->op, "LOAD_METHOD"))
                return need == 2 ? (int64_t)i->arg : -1;
            return by_name && need == 1 ? (int64_t)i->arg : -1;
        }
        need = need - push + pop;
    }
    return -1;
}

/* 1 when c was decoded into d, 0 for a version or code not analysed, -1
 * when it could not be read. */
static int decode(pyu_session *s, const pyu_code *c, decoded *d)
{
    const pyu_offsets *o = &s->off;
    *d = (decoded){0};
    if (!o->object_frames || !c->code_bytes || !c->ncode ||
        c->ncode > PYU_CALL_SITES_UNITS || !PYU_HAS(o, co_names))
        return 0;
    bool units = o->version_hex >= 0x030A0000;
    size_t n = c->ncode;
    uint8_t *code = malloc(2 * n);
    d->ins = malloc(n * sizeof *d->ins);
    d->target = calloc(n / 8 + 1, 1);
    int rc = -1;
    if (!code || !d->ins || !d->target ||
        pyu_read_quiet(s, c->code_bytes, code, 2 * n) < 0 ||
        pyu_read_quiet(s, c->addr + PYU_OFF(o, co_names), &d->names, 8) < 0 ||
        pyu_read_quiet(s, d->names + PYU_OFF(o, tuple_ob_size), &d->nnames,
                       8) < 0 ||
        d->nnames < 0 || d->nnames > NAMES_MAX)
        goto out;
    uint32_t ext = 0, start = 0;
    for (size_t u = 0; u < n; u++) {
        const char *base;
        unsigned caches;
        const char *op = pyu_opcode_name(o->version_hex, code[2 * u], &base,
                                         &caches);
        if (!op)
            goto out; /* (not bytecode of this version) */
        uint32_t arg = ext << 8 | code[2 * u + 1];
        if (is(op, "EXTENDED_ARG")) {
            ext = arg;
            continue;
        }
        d->ins[d->n++] = (instr){start, (uint32_t)u, arg, op};
        ext = 0;
        start = (uint32_t)u + 1;
    }
    for (size_t k = 0; k < d->n; k++) {
        int64_t t = jump_target(&d->ins[k], units);
        if (t >= 0 && (uint64_t)t < n)
            d->target[t / 8] |= (uint8_t)(1u << (t % 8));
    }
    rc = 1;
out:
    free(code);
    if (rc < 1)
        decoded_free(d);
    return rc;
}

long pyu_code_call_sites(pyu_session *s, const pyu_code *c,
                         pyu_call_site *sites, size_t max)
{
    const pyu_offsets *o = &s->off;
    decoded d;
    int rc = decode(s, c, &d);
    if (rc <= 0)
        return rc;
    uint64_t *names = d.nnames ? malloc((size_t)d.nnames * 8) : NULL;
    if (d.nnames &&
        (!names || pyu_read_quiet(s, d.names + PYU_OFF(o, tuple_ob_item),
                                  names, (size_t)d.nnames * 8) < 0)) {
        free(names);
        decoded_free(&d);
        return -1;
    }
    long found = 0;
    for (size_t k = 0; k < d.n && (size_t)found < max; k++) {
        if (!callable_depth(&d.ins[k]))
            continue;
        int64_t name = callable_name(&d, k);
        sites[found++] = (pyu_call_site){
            d.ins[k].start, d.ins[k].at,
            name >= 0 && name < d.nnames ? names[name] : 0};
    }
    free(names);
    decoded_free(&d);
    return found;
}

/* Whether control goes on from instruction i to the next one. */
static bool falls_through(const instr *i)
{
    static const char *const ends[] = {"JUMP_ABSOLUTE", "JUMP_FORWARD",
                                       "RETURN_VALUE", "RAISE_VARARGS",
                                       "RERAISE", NULL};
    for (const char *const *n = ends; *n; n++)
        if (is(i->op, *n))
            return false;
    return true;
}

/* Whether i sets up an exception handler (its jump target). */
static bool sets_handler(const instr *i)
{
    return is(i->op, "SETUP_FINALLY") || is(i->op, "SETUP_WITH") ||
           is(i->op, "SETUP_ASYNC_WITH");
}

/* The index of the instruction at code unit u (its own unit or one of
 * its prefixes'), or d->n. */
static size_t index_of(const decoded *d, uint32_t u)
{
    size_t lo = 0, hi = d->n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (d->ins[mid].at < u)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < d->n && d->ins[lo].start <= u ? lo : d->n;
}

int pyu_code_reaches(pyu_session *s, const pyu_code *c, const uint32_t *from,
                     size_t nfrom, uint32_t at)
{
    decoded d;
    int rc = decode(s, c, &d);
    if (rc <= 0)
        return -1;
    bool units = s->off.version_hex >= 0x030A0000;
    size_t goal = index_of(&d, at);
    uint8_t *seen = calloc(d.n + 1, 1);
    size_t *todo = malloc((d.n + 1) * sizeof *todo), ntodo = 0;
    /* the handlers: where each is set up, and its index */
    size_t (*handler)[2] = malloc((d.n + 1) * sizeof *handler), nh = 0;
    rc = -1;
    if (!seen || !todo || !handler || goal == d.n)
        goto out;
    for (size_t k = 0; k < d.n; k++) {
        int64_t h = sets_handler(&d.ins[k]) ? jump_target(&d.ins[k], units)
                                            : -1;
        if (h >= 0 && (uint64_t)h < c->ncode) {
            handler[nh][0] = k;
            handler[nh++][1] = index_of(&d, (uint32_t)h);
        }
    }
    for (size_t k = 0; k < nfrom; k++) {
        size_t i = index_of(&d, from[k]);
        if (i < d.n && !seen[i]) {
            seen[i] = 1;
            todo[ntodo++] = i;
        }
    }
    rc = 0;
    while (ntodo && !rc) {
        size_t i = todo[--ntodo];
        size_t next[2];
        size_t nn = 0;
        if (falls_through(&d.ins[i]) && i + 1 < d.n)
            next[nn++] = i + 1;
        int64_t t = jump_target(&d.ins[i], units);
        if (t >= 0 && (uint64_t)t < c->ncode)
            next[nn++] = index_of(&d, (uint32_t)t);
        /* (an exception raised here goes to a handler set up before it,
         * after it: any such, the handlers' ranges not tracked) */
        for (size_t k = 0; k < nh + nn; k++) {
            size_t j = k < nn ? next[k] : handler[k - nn][1];
            if (k >= nn && (handler[k - nn][0] >= i || j <= i))
                continue;
            if (j == goal)
                rc = 1;
            if (j < d.n && !seen[j]) {
                seen[j] = 1;
                todo[ntodo++] = j;
            }
        }
    }
out:
    free(seen);
    free(todo);
    free(handler);
    decoded_free(&d);
    return rc;
}
