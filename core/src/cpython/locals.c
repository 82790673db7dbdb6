/* The variables of a frame: its arguments, locals, cells and free
 * variables, with a bounded repr of each value (values.c).
 *
 * The code object names them (co_localsplusnames, a tuple of str) and
 * says what each is (co_localspluskinds, one byte each: CO_FAST_HIDDEN
 * 0x10, CO_FAST_LOCAL 0x20, CO_FAST_CELL 0x40, CO_FAST_FREE 0x80 in
 * Include/internal/pycore_code.h of 3.13-3.15); the frame holds their
 * values in localsplus, one slot each.  The arguments come first:
 * co_argcount + co_kwonlyargcount, plus one for *args (CO_VARARGS 0x4 in
 * co_flags) and one for **kwargs (CO_VARKEYWORDS 0x8).  A slot is a
 * PyObject * in 3.13 (NULL: unbound) and a _PyStackRef from 3.14 (1:
 * unbound; low bits 3: an int tagged in the reference; else the object
 * with the tag bits cleared).  A cell or free variable's slot holds a
 * cell object once the function runs (MAKE_CELL, COPY_FREE_VARS): its
 * value is the cell's ob_ref, unbound while NULL.
 */
#include "../internal.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CO_FAST_HIDDEN 0x10
#define CO_FAST_CELL 0x40
#define CO_FAST_FREE 0x80
#define CO_VARARGS 0x4
#define CO_VARKEYWORDS 0x8
#define MAX_VARS 65536
#define REPR_BYTES 512

const char *pyu_var_kind_name(int kind)
{
    static const char *const names[] = {"argument", "local", "cell", "free"};
    return kind >= 0 && kind < 4 ? names[kind] : NULL;
}

/* What the walk needs of the code object: its variables' names and
 * kinds, and how many are arguments. */
typedef struct vars_of {
    size_t n, nargs;
    uint64_t *names; /* n str addresses */
    uint8_t *kinds;  /* n bytes */
    uint64_t *slots; /* n values of the frame */
} vars_of;

static void vars_free(vars_of *v)
{
    free(v->names);
    free(v->kinds);
    free(v->slots);
}

/* Before 3.11: the names are three tuples, co_varnames (the arguments
 * first), co_cellvars and co_freevars, whose values the frame object
 * holds in that order in f_localsplus; an argument some closure captures
 * is also a cell variable, its own slot emptied when the frame starts
 * (its value is the cell's, shown in the argument's place). */
static int read_vars_old(pyu_session *s, const pyu_walk_frame *f,
                         vars_of *v)
{
    const pyu_offsets *o = &s->off;
    uint64_t code = f->code_addr, tuples[3] = {0, 0, 0};
    int32_t argc = 0, kwonly = 0, flags = 0;
    int64_t count[3] = {0, 0, 0};
    static const uint8_t kind[3] = {0x20, CO_FAST_CELL, CO_FAST_FREE};
    pyu_range r[6] = {
        {code + PYU_OFF(o, co_varnames), &tuples[0], 8},
        {code + PYU_OFF(o, co_cellvars), &tuples[1], 8},
        {code + PYU_OFF(o, co_freevars), &tuples[2], 8},
        {code + PYU_OFF(o, co_argcount), &argc, 4},
        {code + PYU_OFF(o, co_kwonlyargcount), &kwonly, 4},
        {code + PYU_OFF(o, co_flags), &flags, 4},
    };
    if (pyu_readv(s, r, 6, "a code object's variables") < 0)
        return -1;
    size_t n = 0;
    for (int k = 0; k < 3; k++) {
        if (!tuples[k] || (tuples[k] & 7) ||
            pyu_read(s, tuples[k] + PYU_OFF(o, tuple_ob_size), &count[k], 8,
                     "the names of a code object's variables") < 0)
            return pyu_fail(&s->err, PYU_E_CORRUPT, "the code object at 0x%"
                            PRIx64 " has no table of variables", code);
        if (count[k] < 0 || count[k] > MAX_VARS)
            return pyu_fail(&s->err, PYU_E_CORRUPT, "the code object at 0x%"
                            PRIx64 " has %" PRId64 " variable names", code,
                            count[k]);
        n += (size_t)count[k];
    }
    if (argc < 0 || kwonly < 0 || (int64_t)argc + kwonly + 2 > MAX_VARS ||
        n > MAX_VARS)
        return pyu_fail(&s->err, PYU_E_CORRUPT, "the code object at 0x%"
                        PRIx64 " has %zu variables", code, n);
    v->n = n;
    v->nargs = (size_t)argc + (size_t)kwonly + !!(flags & CO_VARARGS) +
               !!(flags & CO_VARKEYWORDS);
    if (!n)
        return 0;
    v->names = malloc(n * 8);
    v->kinds = malloc(n);
    v->slots = malloc(n * 8);
    if (!v->names || !v->kinds || !v->slots)
        return pyu_fail(&s->err, PYU_E_NOMEM, "out of memory");
    pyu_range r2[4];
    size_t at = 0, nr = 0;
    for (int k = 0; k < 3; k++) {
        if (count[k])
            r2[nr++] = (pyu_range){tuples[k] + PYU_OFF(o, tuple_ob_item),
                                   v->names + at, (size_t)count[k] * 8};
        memset(v->kinds + at, kind[k], (size_t)count[k]);
        at += (size_t)count[k];
    }
    r2[nr++] = (pyu_range){f->addr + PYU_OFF(o, fr_localsplus), v->slots,
                           n * 8};
    if (pyu_readv(s, r2, nr, "a frame's variables") < 0)
        return -1;
    /* an argument's cell (names are interned: it has the very name) takes
     * the argument's place, as 3.11+ keep it there */
    size_t cells = (size_t)count[0] + (size_t)count[1];
    for (size_t j = (size_t)count[0]; j < cells; j++)
        for (size_t a = 0; a < v->nargs && a < (size_t)count[0]; a++)
            if (v->names[j] == v->names[a] && !v->slots[a]) {
                v->slots[a] = v->slots[j];
                v->kinds[a] |= CO_FAST_CELL;
                v->kinds[j] = CO_FAST_HIDDEN;
                break;
            }
    return 0;
}

static int read_vars(pyu_session *s, const pyu_walk_frame *f, vars_of *v)
{
    if (s->off.object_frames)
        return read_vars_old(s, f, v);
    const pyu_offsets *o = &s->off;
    uint64_t names = 0, kinds = 0, code = f->code_addr;
    int32_t argc = 0, kwonly = 0, flags = 0;
    int64_t nnames = 0, nkinds = 0;
    if (!PYU_HAS(o, co_localsplusnames) || !PYU_HAS(o, co_localspluskinds) ||
        !PYU_HAS(o, co_argcount) || !PYU_HAS(o, fr_localsplus) ||
        !PYU_HAS(o, tuple_ob_item))
        return pyu_fail(&s->err, PYU_E_VERSION, "this CPython's debug "
                        "offsets do not say where a frame's variables are");
    pyu_range r[5] = {
        {code + PYU_OFF(o, co_localsplusnames), &names, 8},
        {code + PYU_OFF(o, co_localspluskinds), &kinds, 8},
        {code + PYU_OFF(o, co_argcount), &argc, 4},
        {code + PYU_OFF(o, co_kwonlyargcount), &kwonly, 4},
        {code + PYU_OFF(o, co_flags), &flags, 4},
    };
    if (pyu_readv(s, r, 5, "a code object's variables") < 0)
        return -1;
    if (!names || !kinds || (names & 7) || (kinds & 7))
        return pyu_fail(&s->err, PYU_E_CORRUPT, "the code object at 0x%"
                        PRIx64 " has no table of variables", code);
    pyu_range r2[2] = {
        {names + PYU_OFF(o, tuple_ob_size), &nnames, 8},
        {kinds + PYU_OFF(o, bytes_ob_size), &nkinds, 8},
    };
    if (pyu_readv(s, r2, 2, "the names of a code object's variables") < 0)
        return -1;
    if (nnames < 0 || nnames > MAX_VARS || nkinds != nnames || argc < 0 ||
        kwonly < 0 || (int64_t)argc + kwonly + 2 > MAX_VARS)
        return pyu_fail(&s->err, PYU_E_CORRUPT, "the code object at 0x%"
                        PRIx64 " has %" PRId64 " variable names and %" PRId64
                        " kinds", code, nnames, nkinds);
    v->n = (size_t)nnames;
    v->nargs = (size_t)argc + (size_t)kwonly + !!(flags & CO_VARARGS) +
               !!(flags & CO_VARKEYWORDS);
    if (!v->n)
        return 0;
    v->names = malloc(v->n * 8);
    v->kinds = malloc(v->n);
    v->slots = malloc(v->n * 8);
    if (!v->names || !v->kinds || !v->slots)
        return pyu_fail(&s->err, PYU_E_NOMEM, "out of memory");
    pyu_range r3[3] = {
        {names + PYU_OFF(o, tuple_ob_item), v->names, v->n * 8},
        {kinds + PYU_OFF(o, bytes_ob_sval), v->kinds, v->n},
        {f->addr + PYU_OFF(o, fr_localsplus), v->slots, v->n * 8},
    };
    return pyu_readv(s, r3, 3, "a frame's variables");
}

/* The object a slot holds: *obj (0 for none), or *tagged with the int it
 * holds.  False when the slot is unbound. */
static bool slot_value(const pyu_offsets *o, uint64_t bits, uint64_t *obj,
                       bool *tagged, int64_t *ival)
{
    *tagged = false;
    if (!o->tag_mask) { /* 3.13: a plain pointer */
        *obj = bits;
        return bits != 0;
    }
    if (bits == 1) /* PyStackRef_NULL */
        return false;
    if ((bits & 3) == 3) {
        *tagged = true;
        *ival = (int64_t)bits >> 2;
        *obj = 0;
        return true;
    }
    *obj = bits & ~o->tag_mask;
    return *obj != 0;
}

/* The variables of f as pyu_frame_locals reports them; with repr false,
 * no value is written (v->value is "", or the int of a tagged slot). */
static int frame_vars(pyu_session *s, const pyu_walk_frame *f,
                      int (*fn)(void *arg, const pyu_var *v), void *arg,
                      bool repr)
{
    if (!s || !f || !fn)
        return -PYU_E_INVAL;
    if (!s->opened)
        return pyu_err_set(&s->err, PYU_E_STATE, "the session is not open");
    const pyu_offsets *o = &s->off;
    vars_of v = {0};
    int rc = read_vars(s, f, &v);
    char value[REPR_BYTES], type[PYU_TYPE_NAME_MAX];
    for (size_t i = 0; rc == 0 && i < v.n; i++) {
        uint8_t k = v.kinds[i];
        uint64_t obj;
        bool tagged;
        int64_t ival = 0;
        if ((k & CO_FAST_HIDDEN) ||
            !slot_value(o, v.slots[i], &obj, &tagged, &ival))
            continue;
        pyu_var var = {.kind = i < v.nargs              ? PYU_VAR_ARGUMENT
                               : (k & CO_FAST_FREE)     ? PYU_VAR_FREE
                               : (k & CO_FAST_CELL)     ? PYU_VAR_CELL
                                                        : PYU_VAR_LOCAL};
        if (!tagged && (k & (CO_FAST_CELL | CO_FAST_FREE))) {
            /* a cell, once the function made it: its content */
            uint64_t type_addr = 0, content = 0;
            const pyu_type *t = NULL;
            if (pyu_read_quiet(s, obj + PYU_OFF(o, ob_type), &type_addr,
                               8) == 0 &&
                (t = pyu_type_get(s, type_addr)) &&
                t->kind == PYU_TYPE_CELL) {
                if (pyu_read_quiet(s, obj + PYU_OFF(o, cell_ob_ref),
                                   &content, 8) < 0)
                    content = 1; /* (shows as <unreadable>) */
                else if (!content)
                    continue; /* an empty cell: unbound */
                obj = content;
            }
        }
        const char *name = pyu_str_read(s, v.names[i]);
        var.name = name ? name : "?";
        if (tagged) {
            snprintf(value, sizeof value, "%" PRId64, ival);
            snprintf(type, sizeof type, "int");
        } else if (repr) {
            pyu_repr(s, obj, value, sizeof value, type, sizeof type);
        } else {
            value[0] = type[0] = '\0';
        }
        var.type = type;
        var.value = value;
        var.addr = obj;
        rc = fn(arg, &var);
    }
    vars_free(&v);
    return rc;
}

int pyu_frame_locals(pyu_session *s, const pyu_walk_frame *f,
                     int (*fn)(void *arg, const pyu_var *v), void *arg)
{
    return frame_vars(s, f, fn, arg, true);
}

int pyu_frame_locals_bare(pyu_session *s, const pyu_walk_frame *f,
                          int (*fn)(void *arg, const pyu_var *v), void *arg)
{
    return frame_vars(s, f, fn, arg, false);
}
