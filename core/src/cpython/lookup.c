/* py-print's expressions: a name looked up as Python looks it up in a
 * frame, then attributes and items, all read from memory; nothing runs
 * in the target, so what Python would compute (a property, __getattr__,
 * a descriptor of C code) is said, not evaluated.
 *
 * The grammar: NAME ( "." NAME | "[" INDEX "]" )*, INDEX an int (a list's
 * or tuple's position, or a dict's int key) or a str in quotes (a dict's
 * key; without quotes too, as lldb passes d['k'] on), NAME a Python
 * identifier.
 *
 * Where the objects keep what is looked up (offsets.c has the numbers):
 * - a frame: f_globals, f_builtins and f_locals (a dict in class bodies,
 *   exec and module frames; a module frame's is its globals);
 * - a module: md_dict;
 * - a class: tp_dict, and tp_mro, the tuple of the classes searched (a
 *   static type of CPython's may keep its dict elsewhere from 3.12: it
 *   is then skipped);
 * - an instance, when its class has Py_TPFLAGS_MANAGED_DICT: a dict
 *   pointer just before the object; 3.11 also a values pointer (a split
 *   table of the class's ht_cached_keys) before that, 3.13+ the values
 *   inline after tp_basicsize bytes (Py_TPFLAGS_INLINE_VALUES) while
 *   their `valid` byte (the fourth) is set; other classes keep a dict
 *   pointer at tp_dictoffset when that is positive;
 * - a __slots__ entry: a member_descriptor in the class whose PyMemberDef
 *   {name, int type, Py_ssize_t offset, ...} gives the object's slot.
 * Python's order for an instance's attribute: a data descriptor of the
 * class (property, slot, getset) first, then the instance's dict, then
 * the class's attribute.
 */
#include "../internal.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NAME_MAX_BYTES 256 /* a name's UTF-8 bytes (identifiers) */
#define SCAN_MAX 65536     /* dict entries looked at */
#define MRO_MAX 64         /* classes of an MRO looked in */
#define T_OBJECT 6         /* PyMemberDef types that hold an object */
#define T_OBJECT_EX 16
#define DV_VALID 3         /* PyDictValues: the byte `valid` */

const char *pyu_scope_name(int scope)
{
    static const char *const names[] = {"local", "global", "builtin"};
    return scope >= 0 && scope < 3 ? names[scope] : NULL;
}

/* A value an expression names: an object, or an int tagged in a slot. */
typedef struct val {
    uint64_t obj;
    bool tagged;
    int64_t ival;
} val;

/* ------------------------------------------------------------- keys */

/* The text of a str key into buf; false when key is not a str (exactly)
 * or is longer than buf holds. */
static bool key_text(pyu_session *s, uint64_t key, char *buf, size_t cap)
{
    uint32_t cp[NAME_MAX_BYTES];
    int64_t length = 0;
    uint64_t type = 0;
    const pyu_type *t;
    if (!key || (key & 7) ||
        pyu_read_quiet(s, key + PYU_OFF(&s->off, ob_type), &type, 8) < 0 ||
        !(t = pyu_type_get(s, type)) || t->kind != PYU_TYPE_STR)
        return false;
    long n = pyu_str_peek(s, key, cp, NAME_MAX_BYTES, &length);
    return n >= 0 && n == length &&
           pyu_ucs_to_utf8(cp, (size_t)n, 4, buf, cap) >= 0;
}

/* What a dict walk looks for: a str key (text), or an int key (text its
 * decimal, is_int). */
typedef struct find {
    pyu_session *s;
    const char *text;
    bool is_int;
    uint64_t found;
} find;

static int find_key(void *arg, uint64_t key, uint64_t value)
{
    find *f = arg;
    char buf[NAME_MAX_BYTES * 4 + 1];
    if (f->is_int) {
        char type[PYU_TYPE_NAME_MAX];
        pyu_repr(f->s, key, buf, 64, type, sizeof type);
        if (strcmp(type, "int") != 0 || strcmp(buf, f->text) != 0)
            return 0;
    } else if (!key_text(f->s, key, buf, sizeof buf) ||
               strcmp(buf, f->text) != 0) {
        return 0;
    }
    f->found = value;
    return 1;
}

/* The value of key text in the dict at dict: 1 found (*out), 0 not
 * there, or a negated error. */
static int dict_get(pyu_session *s, uint64_t dict, const char *text,
                    bool is_int, uint64_t *out)
{
    find f = {.s = s, .text = text, .is_int = is_int};
    int64_t used;
    int rc = pyu_dict_each(s, dict, SCAN_MAX, find_key, &f, &used);
    if (rc < 0)
        return rc;
    *out = f.found;
    return rc == 1;
}

/* ------------------------------------------------------------ names */

static uint64_t word(pyu_session *s, uint64_t addr)
{
    uint64_t w = 0;
    return pyu_read_quiet(s, addr, &w, 8) < 0 ? 0 : w;
}

/* The frame's scopes. */
typedef struct scopes {
    uint64_t code, globals, builtins, locals;
} scopes;

static int read_scopes(pyu_session *s, uint64_t frame, scopes *sc)
{
    const pyu_offsets *o = &s->off;
    if (!PYU_HAS(o, fr_globals))
        return pyu_err_set(&s->err, PYU_E_VERSION, "pyunwind does not know "
                           "where this CPython's frames keep their globals");
    pyu_range r[4] = {
        {frame + PYU_OFF(o, fr_executable), &sc->code, 8},
        {frame + PYU_OFF(o, fr_globals), &sc->globals, 8},
        {frame + PYU_OFF(o, fr_builtins), &sc->builtins, 8},
        {frame + PYU_OFF(o, fr_locals), &sc->locals, 8},
    };
    if (pyu_readv(s, r, 4, "a frame's scopes") < 0)
        return pyu_err_set(&s->err, PYU_E_FAULT, "the frame at 0x%" PRIx64
                           " cannot be read", frame);
    sc->code &= ~s->off.tag_mask;
    return 0;
}

typedef struct local_find {
    const char *name;
    bool found;
    val v;
} local_find;

static int local_match(void *arg, const pyu_var *v)
{
    local_find *l = arg;
    if (strcmp(v->name, l->name) != 0)
        return 0;
    l->found = true;
    l->v.obj = v->addr;
    l->v.tagged = !v->addr; /* (its value: the int's decimal) */
    if (l->v.tagged)
        l->v.ival = strtoll(v->value, NULL, 10);
    return 1;
}

/* NAME in the frame: *scope and *v; a negated error when not found. */
static int find_name(pyu_session *s, uint64_t frame, const char *name,
                     int *scope, val *v)
{
    scopes sc;
    if (read_scopes(s, frame, &sc) < 0)
        return -PYU_E_FAULT;
    pyu_walk_frame wf = {.addr = frame, .code_addr = sc.code};
    local_find l = {.name = name};
    int rc = pyu_frame_locals_bare(s, &wf, local_match, &l);
    if (rc < 0)
        return rc;
    if (l.found) {
        *scope = PYU_SCOPE_LOCAL;
        *v = l.v;
        return 0;
    }
    const struct {
        uint64_t dict;
        int scope;
    } order[3] = {
        {sc.locals != sc.globals ? sc.locals : 0, PYU_SCOPE_LOCAL},
        {sc.globals, PYU_SCOPE_GLOBAL},
        {sc.builtins, PYU_SCOPE_BUILTIN},
    };
    for (int i = 0; i < 3; i++) {
        uint64_t found = 0;
        if (!order[i].dict)
            continue;
        rc = dict_get(s, order[i].dict, name, false, &found);
        if (rc < 0)
            return rc;
        if (rc == 1) {
            *scope = order[i].scope;
            *v = (val){.obj = found};
            return 0;
        }
    }
    return pyu_err_set(&s->err, PYU_E_NOTFOUND, "'%s' not found", name);
}

/* -------------------------------------------------------- attributes */

/* An object's class: its address, flags and name. */
typedef struct cls {
    uint64_t addr, flags;
    char name[PYU_TYPE_NAME_MAX];
    enum pyu_type_kind kind;
} cls;

static int class_of(pyu_session *s, uint64_t obj, cls *c)
{
    c->addr = word(s, obj + PYU_OFF(&s->off, ob_type));
    const pyu_type *t = c->addr ? pyu_type_get(s, c->addr) : NULL;
    if (!t)
        return pyu_err_set(&s->err, PYU_E_FAULT, "the object at 0x%" PRIx64
                           " cannot be read", obj);
    c->flags = t->flags;
    c->kind = (enum pyu_type_kind)t->kind;
    snprintf(c->name, sizeof c->name, "%s", t->name[0] ? t->name : "?");
    return 0;
}

/* Calls fn for each class of type's MRO (type itself when it has none),
 * with its dict; stops at fn's non-zero value. */
static int each_class(pyu_session *s, uint64_t type,
                      int (*fn)(void *arg, uint64_t cls, uint64_t dict),
                      void *arg)
{
    const pyu_offsets *o = &s->off;
    uint64_t mro = word(s, type + PYU_OFF(o, tp_mro)), items[MRO_MAX];
    int64_t n = 0;
    if (mro && pyu_read_quiet(s, mro + PYU_OFF(o, tuple_ob_size), &n,
                              8) == 0 &&
        n > 0 && n <= MRO_MAX &&
        pyu_read_quiet(s, mro + PYU_OFF(o, tuple_ob_item), items,
                       (size_t)n * 8) == 0) {
        for (int64_t i = 0; i < n; i++) {
            uint64_t dict = word(s, items[i] + PYU_OFF(o, tp_dict));
            int rc = dict ? fn(arg, items[i], dict) : 0;
            if (rc)
                return rc;
        }
        return 0;
    }
    uint64_t dict = word(s, type + PYU_OFF(o, tp_dict));
    return dict ? fn(arg, type, dict) : 0;
}

typedef struct class_find {
    pyu_session *s;
    const char *name;
    uint64_t found, in;
    int err;
} class_find;

static int class_match(void *arg, uint64_t cls, uint64_t dict)
{
    class_find *c = arg;
    int rc = dict_get(c->s, dict, c->name, false, &c->found);
    if (rc < 0)
        c->err = rc;
    c->in = cls;
    return rc != 0;
}

/* The instance's own dict and, for a split table without one, the
 * class's keys and the instance's values: dict, or keys and values, or
 * all 0. */
static void own_dict(pyu_session *s, uint64_t obj, const cls *c,
                     uint64_t *dict, uint64_t *keys, uint64_t *values)
{
    const pyu_offsets *o = &s->off;
    *dict = *keys = *values = 0;
    if (!(c->flags & PYU_TPFLAGS_MANAGED_DICT)) {
        int64_t off = (int64_t)word(s, c->addr + PYU_OFF(o, tp_dictoffset));
        if (off > 0 && off < (1 << 20))
            *dict = word(s, obj + (uint64_t)off);
        return;
    }
    *dict = word(s, obj - o->managed_dict_back);
    if (o->managed_dict_tagged && (*dict & 1)) {
        *values = *dict + 1;
        *dict = 0;
    } else if (*dict || !PYU_HAS(o, ht_cached_keys)) {
        return;
    } else if (o->managed_values_back) {
        *values = word(s, obj - o->managed_values_back);
    } else if (c->flags & PYU_TPFLAGS_INLINE_VALUES) {
        uint64_t size = word(s, c->addr + PYU_OFF(o, tp_basicsize));
        uint8_t valid = 0;
        if (size && size < (1 << 20) &&
            pyu_read_quiet(s, obj + size + DV_VALID, &valid, 1) == 0 &&
            valid)
            *values = obj + size;
    }
    if (*values)
        *keys = word(s, c->addr + PYU_OFF(o, ht_cached_keys));
    if (!*keys)
        *values = 0;
}

/* The object in a __slots__ entry: 1 found (*out), 0 empty, or a negated
 * error. */
static int slot_value(pyu_session *s, uint64_t obj, uint64_t descr,
                      const char *expr, uint64_t *out)
{
    uint64_t def = word(s, descr + PYU_OFF(&s->off, descr_member));
    struct {
        uint64_t name;
        int32_t type, pad;
        int64_t offset;
    } m;
    if (!def || pyu_read_quiet(s, def, &m, sizeof m) < 0)
        return pyu_err_set(&s->err, PYU_E_FAULT, "%s: its slot's "
                           "description cannot be read", expr);
    if (m.type != T_OBJECT && m.type != T_OBJECT_EX)
        return pyu_err_set(&s->err, PYU_E_NOTFOUND, "%s: a member of C "
                           "type %d, not read", expr, m.type);
    if (m.offset <= 0 || m.offset >= (1 << 20) ||
        pyu_read_quiet(s, obj + (uint64_t)m.offset, out, 8) < 0)
        return pyu_err_set(&s->err, PYU_E_FAULT, "%s: the slot cannot be "
                           "read", expr);
    return *out != 0;
}

/* obj.name, with expr (the expression so far, for messages). */
static int attribute(pyu_session *s, val *v, const char *name,
                     const char *expr)
{
    cls c;
    if (v->tagged)
        return pyu_err_set(&s->err, PYU_E_NOTFOUND, "%s: 'int' object has "
                           "no attribute '%s'", expr, name);
    if (class_of(s, v->obj, &c) < 0)
        return -PYU_E_FAULT;
    uint64_t found = 0;
    int rc;
    if (c.kind == PYU_TYPE_MODULE) {
        uint64_t dict = word(s, v->obj + PYU_OFF(&s->off, md_dict));
        if ((rc = dict ? dict_get(s, dict, name, false, &found) : 0) < 0)
            return rc;
        if (!rc)
            return pyu_err_set(&s->err, PYU_E_NOTFOUND, "%s: the module "
                               "has no attribute '%s'", expr, name);
        v->obj = found;
        return 0;
    }
    /* the class's attribute (a class: its own, as Python's type does
     * apart from the metaclass's) */
    class_find cf = {.s = s, .name = name};
    bool is_class = c.flags & PYU_TPFLAGS_TYPE_SUBCLASS;
    each_class(s, is_class ? v->obj : c.addr, class_match, &cf);
    if (cf.err)
        return cf.err;
    if (is_class) {
        if (!cf.found)
            return pyu_err_set(&s->err, PYU_E_NOTFOUND, "%s: the class has "
                               "no attribute '%s'", expr, name);
        v->obj = cf.found;
        return 0;
    }
    if (cf.found) { /* a data descriptor comes before the own dict */
        cls d;
        if (class_of(s, cf.found, &d) < 0)
            return -PYU_E_FAULT;
        char owner[PYU_TYPE_NAME_MAX] = "?";
        const pyu_type *t = pyu_type_get(s, cf.in);
        if (t && t->name[0])
            snprintf(owner, sizeof owner, "%s", t->name);
        if (d.kind == PYU_TYPE_PROPERTY)
            return pyu_err_set(&s->err, PYU_E_NOTFOUND, "%s: a property of "
                               "%s, not evaluated (py-print runs no code "
                               "in the target)", expr, owner);
        if (d.kind == PYU_TYPE_GETSET)
            return pyu_err_set(&s->err, PYU_E_NOTFOUND, "%s: computed by "
                               "C code of %s, not evaluated (py-print runs "
                               "no code in the target)", expr, owner);
        if (d.kind == PYU_TYPE_MEMBER) {
            if ((rc = slot_value(s, v->obj, cf.found, expr, &found)) < 0)
                return rc;
            if (!rc)
                return pyu_err_set(&s->err, PYU_E_NOTFOUND, "%s: the slot "
                                   "'%s' of %s is empty", expr, name,
                                   owner);
            v->obj = found;
            return 0;
        }
    }
    uint64_t dict, keys, values;
    own_dict(s, v->obj, &c, &dict, &keys, &values);
    if (dict || keys) {
        find f = {.s = s, .text = name};
        int64_t used;
        rc = dict ? pyu_dict_each(s, dict, SCAN_MAX, find_key, &f, &used)
                  : pyu_keys_each(s, keys, values, SCAN_MAX, find_key, &f);
        if (rc < 0)
            return rc;
        if (rc == 1) {
            v->obj = f.found;
            return 0;
        }
    }
    if (!cf.found)
        return pyu_err_set(&s->err, PYU_E_NOTFOUND, "%s: '%s' object has no "
                           "attribute '%s'", expr, c.name, name);
    v->obj = cf.found; /* the class's (a method shows as its function) */
    return 0;
}

/* ------------------------------------------------------------- items */

/* obj[index]: index the text of an int (is_int) or of a str key. */
static int item(pyu_session *s, val *v, const char *index, bool is_int,
                const char *expr)
{
    const pyu_offsets *o = &s->off;
    cls c;
    if (v->tagged || class_of(s, v->obj, &c) < 0 ||
        (c.kind != PYU_TYPE_LIST && c.kind != PYU_TYPE_TUPLE &&
         c.kind != PYU_TYPE_DICT))
        return pyu_err_set(&s->err, PYU_E_NOTFOUND, "%s: py-print reads "
                           "items of lists, tuples and dicts, not of '%s' "
                           "objects", expr, v->tagged ? "int" : c.name);
    uint64_t found = 0;
    if (c.kind == PYU_TYPE_DICT) {
        int rc = dict_get(s, v->obj, index, is_int, &found);
        if (rc < 0)
            return rc;
        if (!rc)
            return pyu_err_set(&s->err, PYU_E_NOTFOUND, "%s: no such key",
                               expr);
        v->obj = found;
        return 0;
    }
    if (!is_int)
        return pyu_err_set(&s->err, PYU_E_NOTFOUND, "%s: %s indices must be "
                           "integers", expr, c.name);
    bool list = c.kind == PYU_TYPE_LIST;
    int64_t n = 0;
    uint64_t items = list ? word(s, v->obj + PYU_OFF(o, list_ob_item))
                          : v->obj + PYU_OFF(o, tuple_ob_item);
    uint64_t size_at = list ? PYU_OFF(o, list_ob_size)
                            : PYU_OFF(o, tuple_ob_size);
    if (pyu_read_quiet(s, v->obj + size_at, &n, 8) < 0 ||
        n < 0 || n > (1ll << 40) || (n && !items))
        return pyu_err_set(&s->err, PYU_E_FAULT, "%s: the %s cannot be read",
                           expr, c.name);
    long long i = strtoll(index, NULL, 10);
    if (i < 0)
        i += n;
    if (i < 0 || i >= n)
        return pyu_err_set(&s->err, PYU_E_NOTFOUND, "%s: %s index out of "
                           "range", expr, c.name);
    if (pyu_read_quiet(s, items + (uint64_t)i * 8, &found, 8) < 0 || !found)
        return pyu_err_set(&s->err, PYU_E_FAULT, "%s: the item cannot be "
                           "read", expr);
    v->obj = found;
    return 0;
}

/* ----------------------------------------------------------- parsing */

static bool name_start(unsigned char c)
{
    return c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
           c >= 0x80;
}

/* A NAME at p into buf: the end of it, or NULL. */
static const char *name_at(const char *p, char *buf, size_t cap)
{
    size_t n = 0;
    if (!name_start((unsigned char)*p))
        return NULL;
    while (name_start((unsigned char)p[n]) || (p[n] >= '0' && p[n] <= '9'))
        n++;
    if (n >= cap)
        return NULL;
    memcpy(buf, p, n);
    buf[n] = '\0';
    return p + n;
}

/* An INDEX and its "]" at p: the end, or NULL; buf gets the int's text
 * (is_int) or the str's characters. */
static const char *index_at(const char *p, char *buf, size_t cap,
                            bool *is_int)
{
    size_t n = 0;
    while (*p == ' ')
        p++;
    if (*p == '\'' || *p == '"') {
        char quote = *p++;
        for (; *p && *p != quote; p++) {
            if (*p == '\\' && (p[1] == '\\' || p[1] == '\'' || p[1] == '"'))
                p++;
            if (n + 1 >= cap)
                return NULL;
            buf[n++] = *p;
        }
        if (*p++ != quote)
            return NULL;
        *is_int = false;
    } else {
        char *end;
        errno = 0;
        long long i = strtoll(p, &end, 10);
        if (end != p && !errno) {
            n = (size_t)snprintf(buf, cap, "%lld", i);
            p = end;
            *is_int = true;
        } else { /* a key without its quotes (lldb's parser drops them) */
            for (; *p && *p != ']'; p++) {
                if (n + 1 >= cap)
                    return NULL;
                buf[n++] = *p;
            }
            while (n && buf[n - 1] == ' ')
                n--;
            if (!n)
                return NULL;
            *is_int = false;
        }
    }
    buf[n] = '\0';
    while (*p == ' ')
        p++;
    return *p == ']' ? p + 1 : NULL;
}

/* Evaluates expr: its first name's scope and the value it names. */
static int evaluate(pyu_session *s, uint64_t frame, const char *expr,
                    int *scope, val *v)
{
    char name[NAME_MAX_BYTES], sofar[PYU_ERRMSG_MAX / 2];
    const char *p = name_at(expr, name, sizeof name);
    if (!p)
        return pyu_err_set(&s->err, PYU_E_INVAL, "'%s' does not start with "
                           "a name", expr);
    int rc = find_name(s, frame, name, scope, v);
    while (rc >= 0 && *p) {
        const char *at = p;
        bool is_int = false;
        if (*p == '.')
            p = name_at(p + 1, name, sizeof name);
        else if (*p == '[')
            p = index_at(p + 1, name, sizeof name, &is_int);
        else
            p = NULL;
        if (!p)
            return pyu_err_set(&s->err, PYU_E_INVAL, "'%s': py-print reads "
                               "NAME, then .ATTR, [INDEX] or ['KEY'], not "
                               "'%s'", expr, at);
        snprintf(sofar, sizeof sofar, "%.*s", (int)(p - expr), expr);
        rc = *at == '.' ? attribute(s, v, name, sofar)
                        : item(s, v, name, is_int, sofar);
    }
    return rc;
}

int pyu_frame_lookup(pyu_session *s, uint64_t frame, const char *expr,
                     pyu_lookup *out)
{
    if (!s || !frame || !expr || !out)
        return -PYU_E_INVAL;
    if (!s->opened)
        return pyu_err_set(&s->err, PYU_E_STATE, "the session is not open");
    memset(out, 0, sizeof *out);
    val v;
    int rc = evaluate(s, frame, expr, &out->scope, &v);
    if (rc < 0)
        return rc;
    out->addr = v.tagged ? 0 : v.obj;
    if (v.tagged) {
        snprintf(out->value, sizeof out->value, "%" PRId64, v.ival);
        snprintf(out->type, sizeof out->type, "int");
    } else {
        pyu_repr(s, v.obj, out->value, sizeof out->value, out->type,
                 sizeof out->type);
    }
    return 0;
}

/* ------------------------------------------------- threads' names */

#define THREADS_MAX 100000 /* entries of threading._active looked at */

typedef struct thread_names {
    pyu_session *s;
    int (*fn)(void *arg, uint64_t ident, const char *name);
    void *arg;
} thread_names;

static int thread_entry(void *arg, uint64_t key, uint64_t value)
{
    thread_names *w = arg;
    char buf[32], type[PYU_TYPE_NAME_MAX], name[NAME_MAX_BYTES * 4 + 1];
    pyu_repr(w->s, key, buf, sizeof buf, type, sizeof type);
    char *end;
    errno = 0;
    unsigned long long ident = strtoull(buf, &end, 10);
    val v = {.obj = value};
    if (strcmp(type, "int") != 0 || errno || *end || end == buf ||
        attribute(w->s, &v, "_name", "thread") < 0 ||
        !key_text(w->s, v.obj, name, sizeof name)) {
        pyu_err_clear(&w->s->err);
        return 0; /* (not a thread's entry as threading makes them) */
    }
    return w->fn(w->arg, (uint64_t)ident, name);
}

int pyu_thread_names(pyu_session *s, uint64_t frame,
                     int (*fn)(void *arg, uint64_t ident, const char *name),
                     void *arg)
{
    int scope;
    val v;
    if (evaluate(s, frame, "_active", &scope, &v) < 0 || v.tagged) {
        pyu_err_clear(&s->err);
        if (evaluate(s, frame, "threading._active", &scope, &v) < 0)
            return -PYU_E_NOTFOUND;
        if (v.tagged)
            return pyu_err_set(&s->err, PYU_E_NOTFOUND, "no _active");
    }
    thread_names w = {s, fn, arg};
    int64_t used;
    int rc = pyu_dict_each(s, v.obj, THREADS_MAX, thread_entry, &w, &used);
    return rc < 0 ? rc : 0;
}

/* --------------------------------------------------------- completion */

typedef struct names {
    pyu_session *s;
    int (*fn)(void *arg, const char *name);
    void *arg;
} names;

static int name_of_key(void *arg, uint64_t key, uint64_t value)
{
    names *n = arg;
    char buf[NAME_MAX_BYTES * 4 + 1];
    (void)value;
    return key_text(n->s, key, buf, sizeof buf) ? n->fn(n->arg, buf) : 0;
}

static int name_of_var(void *arg, const pyu_var *v)
{
    names *n = arg;
    return n->fn(n->arg, v->name);
}

static int names_of_class(void *arg, uint64_t cls, uint64_t dict)
{
    names *n = arg;
    int64_t used;
    (void)cls;
    int rc = pyu_dict_each(n->s, dict, SCAN_MAX, name_of_key, n, &used);
    return rc < 0 ? 0 : rc; /* (a class that cannot be read: the next) */
}

int pyu_frame_names(pyu_session *s, uint64_t frame, const char *expr,
                    int (*fn)(void *arg, const char *name), void *arg)
{
    if (!s || !frame || !expr || !fn)
        return -PYU_E_INVAL;
    if (!s->opened)
        return pyu_err_set(&s->err, PYU_E_STATE, "the session is not open");
    names n = {.s = s, .fn = fn, .arg = arg};
    int64_t used;
    int rc;
    if (!*expr) {
        scopes sc;
        if (read_scopes(s, frame, &sc) < 0)
            return -PYU_E_FAULT;
        pyu_walk_frame wf = {.addr = frame, .code_addr = sc.code};
        if ((rc = pyu_frame_locals_bare(s, &wf, name_of_var, &n)) != 0)
            return rc;
        uint64_t dicts[3] = {sc.locals != sc.globals ? sc.locals : 0,
                             sc.globals, sc.builtins};
        for (int i = 0; i < 3; i++)
            if (dicts[i] && (rc = pyu_dict_each(s, dicts[i], SCAN_MAX,
                                                name_of_key, &n, &used)))
                return rc;
        return 0;
    }
    int scope;
    val v;
    cls c;
    if ((rc = evaluate(s, frame, expr, &scope, &v)) < 0)
        return rc;
    if (v.tagged)
        return 0;
    if (class_of(s, v.obj, &c) < 0)
        return -PYU_E_FAULT;
    if (c.kind == PYU_TYPE_MODULE) {
        uint64_t dict = word(s, v.obj + PYU_OFF(&s->off, md_dict));
        return dict ? pyu_dict_each(s, dict, SCAN_MAX, name_of_key, &n, &used)
                    : 0;
    }
    if (c.flags & PYU_TPFLAGS_TYPE_SUBCLASS)
        return each_class(s, v.obj, names_of_class, &n);
    uint64_t dict, keys, values;
    own_dict(s, v.obj, &c, &dict, &keys, &values);
    rc = dict ? pyu_dict_each(s, dict, SCAN_MAX, name_of_key, &n, &used)
         : keys ? pyu_keys_each(s, keys, values, SCAN_MAX, name_of_key, &n)
                : 0;
    if (rc)
        return rc;
    return each_class(s, c.addr, names_of_class, &n);
}
