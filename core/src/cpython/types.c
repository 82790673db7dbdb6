/* Type objects of the target: their flags and what the walks take them
 * for (code, NoneType, coroutine, ...), decided once from the type's name
 * and cached by address.  This is the one place that reads a type's name.
 *
 * Static types only count: a class of the program's own (a heap type) is
 * never taken for one of CPython's types, whatever its name.
 */
#include "../internal.h"

#include <inttypes.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#define TYPES_MAX 4096 /* cached types before starting over */
#define PAGE 4096      /* a name may end a mapping: never read past a page */

struct pyu_types {
    pyu_type *slots; /* open addressing by addr */
    size_t cap, n;
};

_Static_assert(offsetof(pyu_type, addr) == 0, "type cache key first");

static const struct {
    const char *name;
    enum pyu_type_kind kind;
    uint64_t flag; /* a tp_flags bit the real type has, or 0 */
} known[] = {
    {"code", PYU_TYPE_CODE, 0},
    {"NoneType", PYU_TYPE_NONE, 0},
    {"coroutine", PYU_TYPE_COROUTINE, 0},
    {"async_generator_asend", PYU_TYPE_AGEN_AWAIT, 0},
    {"async_generator_athrow", PYU_TYPE_AGEN_AWAIT, 0},
    {"int", PYU_TYPE_INT, PYU_TPFLAGS_LONG_SUBCLASS},
    {"bool", PYU_TYPE_BOOL, PYU_TPFLAGS_LONG_SUBCLASS},
    {"float", PYU_TYPE_FLOAT, 0},
    {"str", PYU_TYPE_STR, PYU_TPFLAGS_UNICODE_SUBCLASS},
    {"bytes", PYU_TYPE_BYTES, PYU_TPFLAGS_BYTES_SUBCLASS},
    {"tuple", PYU_TYPE_TUPLE, PYU_TPFLAGS_TUPLE_SUBCLASS},
    {"list", PYU_TYPE_LIST, PYU_TPFLAGS_LIST_SUBCLASS},
    {"dict", PYU_TYPE_DICT, PYU_TPFLAGS_DICT_SUBCLASS},
    {"set", PYU_TYPE_SET, 0},
    {"frozenset", PYU_TYPE_FROZENSET, 0},
    {"cell", PYU_TYPE_CELL, 0},
    {"module", PYU_TYPE_MODULE, 0},
    {"property", PYU_TYPE_PROPERTY, 0},
    {"member_descriptor", PYU_TYPE_MEMBER, 0},
    {"getset_descriptor", PYU_TYPE_GETSET, 0},
};

/* Reads the NUL-terminated name at name_ptr into buf (at most len - 1
 * characters, not past the end of its page: the name may end a mapping).
 * Returns false when it cannot be read. */
static bool read_name(pyu_session *s, uint64_t name_ptr, char *buf,
                      size_t len)
{
    size_t want = len - 1, to_page = PAGE - (size_t)(name_ptr & (PAGE - 1));
    if (!name_ptr)
        return false;
    if (pyu_read_quiet(s, name_ptr, buf, want) < 0) {
        if (to_page >= want || pyu_read_quiet(s, name_ptr, buf, to_page) < 0)
            return false;
        want = to_page;
    }
    buf[want] = '\0';
    return true;
}

/* What the type named `name` (read: false when it could not be) with
 * these flags is. */
static enum pyu_type_kind classify(uint64_t flags, bool read,
                                   const char *name)
{
    if (!read)
        return PYU_TYPE_UNNAMED;
    if (flags & PYU_TPFLAGS_HEAPTYPE)
        return PYU_TYPE_OTHER;
    for (size_t i = 0; i < sizeof known / sizeof known[0]; i++)
        if (strcmp(name, known[i].name) == 0)
            return (flags & known[i].flag) == known[i].flag ? known[i].kind
                                                             : PYU_TYPE_OTHER;
    return PYU_TYPE_OTHER;
}

static pyu_type *lookup(struct pyu_types *t, uint64_t addr)
{
    if (!t || !t->cap)
        return NULL;
    for (size_t i = pyu_slot(addr, t->cap);; i = (i + 1) & (t->cap - 1)) {
        if (!t->slots[i].addr) /* (0 is never a key) */
            return NULL;
        if (t->slots[i].addr == addr)
            return &t->slots[i];
    }
}

static pyu_type *insert(pyu_session *s, uint64_t addr)
{
    struct pyu_types *t = s->types;
    if (!t && !(t = s->types = calloc(1, sizeof *t)))
        return NULL;
    if (t->n >= TYPES_MAX && t->slots) { /* bounded: start over */
        memset(t->slots, 0, t->cap * sizeof *t->slots);
        t->n = 0;
    }
    if (t->n * 2 >= t->cap &&
        !pyu_table_grow((void **)&t->slots, &t->cap, sizeof *t->slots, 64))
        return NULL;
    size_t i = pyu_slot(addr, t->cap);
    while (t->slots[i].addr)
        i = (i + 1) & (t->cap - 1);
    t->n++;
    t->slots[i].addr = addr;
    return &t->slots[i];
}

const pyu_type *pyu_type_get(pyu_session *s, uint64_t addr)
{
    const pyu_offsets *o = &s->off;
    pyu_type *hit = lookup(s->types, addr);
    if (hit)
        return hit;
    if (!addr || (addr & 7)) {
        pyu_fail(&s->err, PYU_E_CORRUPT,
                 "type pointer 0x%" PRIx64 " is invalid", addr);
        return NULL;
    }
    uint64_t flags = 0, name_ptr = 0;
    pyu_range r[2] = {
        {addr + PYU_OFF(o, tp_flags), &flags, 8},
        {addr + PYU_OFF(o, tp_name), &name_ptr, 8},
    };
    if (pyu_readv(s, r, 2, "a type object") < 0)
        return NULL;
    char name[PYU_TYPE_NAME_MAX];
    bool named = read_name(s, name_ptr, name, sizeof name);
    enum pyu_type_kind kind = classify(flags, named, name);
    pyu_type *t = insert(s, addr);
    if (!t) {
        pyu_fail(&s->err, PYU_E_NOMEM, "out of memory");
        return NULL;
    }
    t->flags = flags;
    t->kind = (uint8_t)kind;
    memcpy(t->name, named ? name : "", named ? sizeof name : 1);
    return t;
}

const pyu_type *pyu_type_of(pyu_session *s, uint64_t obj)
{
    uint64_t type = 0;
    if (pyu_read(s, obj + PYU_OFF(&s->off, ob_type), &type, 8,
                 "an object's type") < 0)
        return NULL;
    return pyu_type_get(s, type);
}

void pyu_type_learn(pyu_session *s, uint64_t addr, enum pyu_type_kind kind)
{
    pyu_type *t = lookup(s->types, addr);
    if (t)
        t->kind = (uint8_t)kind;
}

void pyu_types_flush(pyu_session *s)
{
    if (s->types && s->types->slots) {
        memset(s->types->slots, 0, s->types->cap * sizeof *s->types->slots);
        s->types->n = 0;
    }
}

void pyu_types_free(pyu_session *s)
{
    if (s->types)
        free(s->types->slots);
    free(s->types);
    s->types = NULL;
}
