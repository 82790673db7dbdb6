/* Code objects of the target, cached by address.
 *
 * A frame names its code object; everything shown about the frame (names,
 * file, line) is derived from it.  The cache lives until CPython reports
 * that code objects were freed (threads.c notes each interpreter's
 * code_object_generation) or it grows past PYU_MAX_CODES; each flush drops
 * the string and type caches too and moves the epoch on, so that callers
 * who keep code addresses know they may now name other code.
 */
#include "../internal.h"

#include <inttypes.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

/* Records live in slabs, so a record's address holds until the cache is
 * flushed (the code epoch moves): walks and results may keep it. */
#define SLAB 256

typedef struct slab {
    struct slab *next;
    size_t used;
    pyu_code rec[SLAB];
} slab;

typedef struct slot {
    uint64_t addr; /* 0: free */
    pyu_code *code;
} slot;

/* Where a record's bytecode lies (pyu_code_at_instr). */
typedef struct bytecode {
    uint64_t start, end;
    const pyu_code *code;
} bytecode;

struct pyu_codes {
    slot *slots; /* open addressing by addr */
    size_t cap, n;
    pyu_code *last; /* the one found last (frames of one code come in runs) */
    slab *slabs;
    bytecode *by_instr; /* the records by bytecode start (sorted when
                           looked in after an insert) */
    size_t nby, capby;
    bool by_stale;
    uint64_t not_found[16]; /* instructions pyu_code_at_instr looked for in
                               vain (since the last insert) */
};

static pyu_code *lookup(struct pyu_codes *t, uint64_t addr)
{
    if (!t || !t->cap)
        return NULL;
    if (t->last && t->last->addr == addr)
        return t->last;
    for (size_t i = pyu_slot(addr, t->cap);; i = (i + 1) & (t->cap - 1)) {
        if (!t->slots[i].addr) /* (0 is never a key) */
            return NULL;
        if (t->slots[i].addr == addr)
            return t->last = t->slots[i].code;
    }
}

static pyu_code *insert(pyu_session *s, uint64_t addr)
{
    struct pyu_codes *t = s->codes;
    if (t->n * 2 >= t->cap &&
        !pyu_table_grow((void **)&t->slots, &t->cap, sizeof *t->slots, 256))
        return NULL;
    if (!t->slabs || t->slabs->used == SLAB) {
        slab *b = malloc(sizeof *b);
        if (!b)
            return NULL;
        b->next = t->slabs;
        b->used = 0;
        t->slabs = b;
    }
    pyu_code *c = &t->slabs->rec[t->slabs->used++];
    memset(c, 0, sizeof *c);
    c->addr = addr;
    size_t i = pyu_slot(addr, t->cap);
    while (t->slots[i].addr)
        i = (i + 1) & (t->cap - 1);
    t->slots[i] = (slot){addr, c};
    t->n++;
    t->by_stale = true;
    memset(t->not_found, 0, sizeof t->not_found);
    return t->last = c;
}

static void drop_entries(struct pyu_codes *t)
{
    while (t->slabs) {
        slab *b = t->slabs;
        for (size_t i = 0; i < b->used; i++)
            free(b->rec[i].linetable);
        t->slabs = b->next;
        free(b);
    }
    if (t->slots)
        memset(t->slots, 0, t->cap * sizeof *t->slots);
    t->n = t->nby = 0;
    t->last = NULL;
    t->by_stale = false;
    memset(t->not_found, 0, sizeof t->not_found);
}

void pyu_caches_flush(pyu_session *s)
{
    if (s->codes)
        drop_entries(s->codes);
    s->code_epoch++;
    pyu_strings_flush(s); /* names may have been freed with the code */
    pyu_types_flush(s);   /* and classes */
}

void pyu_codes_free(pyu_session *s)
{
    if (s->codes) {
        drop_entries(s->codes);
        free(s->codes->slots);
        free(s->codes->by_instr);
    }
    free(s->codes);
    s->codes = NULL;
}

uint64_t pyu_code_epoch(const pyu_session *s)
{
    return s ? s->code_epoch : 0;
}

const pyu_code *pyu_code_cached(pyu_session *s, uint64_t addr)
{
    pyu_code *c = lookup(s->codes, addr);
    return c && !c->stale ? c : NULL;
}

/* The fields of a record, as offsets into the code object. */
#define CODE_FIELDS(o)                                                      \
    {PYU_OFF(o, ob_type), PYU_OFF(o, co_qualname), PYU_OFF(o, co_name),     \
     PYU_OFF(o, co_filename), PYU_OFF(o, co_linetable),                     \
     PYU_OFF(o, co_firstlineno)}

void pyu_code_fields(const pyu_offsets *o, size_t *off, size_t *len)
{
    const uint64_t f[] = CODE_FIELDS(o);
    uint64_t lo = UINT64_MAX, hi = 0;
    for (size_t i = 0; i < sizeof f / sizeof *f; i++) {
        lo = f[i] < lo ? f[i] : lo;
        hi = f[i] + 8 > hi ? f[i] + 8 : hi;
    }
    *off = (size_t)lo;
    *len = (size_t)(hi - lo);
}

/* Without code_object_generation (3.13) this is how a cached record is
 * trusted from one sample to the next: while a code object lives it keeps
 * its names and location table alive, and those never change, so the
 * same pointers (and first line) mean the same names and lines. */
bool pyu_code_unchanged(const pyu_session *s, const pyu_code *c,
                        const uint8_t *cpy)
{
    const pyu_offsets *o = &s->off;
    size_t off, len;
    pyu_code_fields(o, &off, &len);
#define AT(field) pyu_u64(cpy, len, PYU_OFF(o, field) - off)
    return !c->stale && AT(ob_type) == c->type_addr &&
           AT(co_qualname) == c->str_addr[0] &&
           AT(co_name) == c->str_addr[1] &&
           AT(co_filename) == c->str_addr[2] &&
           AT(co_linetable) == c->linetable_addr &&
           (int32_t)pyu_u32(cpy, len, PYU_OFF(o, co_firstlineno) - off) ==
               c->firstlineno;
#undef AT
}

static int read_linetable(pyu_session *s, uint64_t bytes_addr, pyu_code *c)
{
    const pyu_offsets *o = &s->off;
    uint8_t hdr[PYU_BUF_BYTES_HEADER];
    size_t hlen = (size_t)PYU_OFF(o, bytes_ob_sval); /* <= the buffer */
    if (pyu_read(s, bytes_addr, hdr, hlen, "a location table") < 0)
        return -1;
    int64_t n = (int64_t)pyu_u64(hdr, hlen, PYU_OFF(o, bytes_ob_size));
    if (n < 0 || (uint64_t)n > PYU_MAX_LINETABLE)
        return pyu_fail(&s->err, PYU_E_CORRUPT,
                        "location table at 0x%" PRIx64
                        " has implausible size %" PRId64,
                        bytes_addr, n);
    c->linetable = malloc((size_t)n + 1);
    if (!c->linetable)
        return pyu_fail(&s->err, PYU_E_NOMEM, "out of memory");
    c->linetable_len = (uint32_t)n;
    if (n > 0 && pyu_read(s, bytes_addr + hlen, c->linetable, (size_t)n,
                          "location table data") < 0)
        return -1;
    return 0;
}

const pyu_code *pyu_code_get(pyu_session *s, uint64_t addr, bool *is_code)
{
    const pyu_offsets *o = &s->off;
    *is_code = true;
    pyu_code *c = lookup(s->codes, addr);
    if (c && !c->stale)
        return c;
    if ((addr & 7) || addr == 0) {
        pyu_fail(&s->err, PYU_E_CORRUPT, "code object pointer 0x%" PRIx64
                 " is %s", addr, addr ? "misaligned" : "NULL");
        return NULL;
    }
    if (!s->codes && !(s->codes = calloc(1, sizeof *s->codes))) {
        pyu_fail(&s->err, PYU_E_NOMEM, "out of memory");
        return NULL;
    }
    if (s->codes->n >= PYU_MAX_CODES) {
        pyu_caches_flush(s); /* a long session: start over, bounded */
        c = NULL;
    }
    uint8_t buf[PYU_BUF_CODE];
    size_t len = (size_t)PYU_OFF(o, co_size); /* <= the buffer */
    if (pyu_read(s, addr, buf, len, "a code object") < 0)
        return NULL;
    uint64_t type_addr = pyu_u64(buf, len, PYU_OFF(o, ob_type));
    const pyu_type *type = pyu_type_get(s, type_addr);
    if (!type) {
        pyu_fail_ctx(&s->err, "type of object at 0x%" PRIx64, addr);
        return NULL;
    }
    /* an unnamed type (its name unreadable, as in a core whose binaries
     * are gone) is taken for code if the object decodes as code */
    bool unnamed = type->kind == PYU_TYPE_UNNAMED;
    if (type->kind != PYU_TYPE_CODE && !unnamed) {
        *is_code = false;
        return NULL;
    }
    uint64_t qual_at = pyu_u64(buf, len, PYU_OFF(o, co_qualname));
    uint64_t name_at = pyu_u64(buf, len, PYU_OFF(o, co_name));
    uint64_t file_at = pyu_u64(buf, len, PYU_OFF(o, co_filename));
    const char *qual = pyu_str_read(s, qual_at);
    const char *name = qual ? pyu_str_read(s, name_at) : NULL;
    const char *file = name ? pyu_str_read(s, file_at) : NULL;
    if (!file) {
        pyu_fail_ctx(&s->err, "code object at 0x%" PRIx64, addr);
        return NULL;
    }
    if (unnamed)
        pyu_type_learn(s, type_addr, PYU_TYPE_CODE);
    if (!c) {
        c = insert(s, addr);
        if (!c) {
            pyu_fail(&s->err, PYU_E_NOMEM, "out of memory");
            return NULL;
        }
    } else {
        free(c->linetable);
    }
    c->linetable = NULL;
    c->linetable_len = 0;
    c->stale = false;
    c->qualname = qual;
    c->name = name;
    c->filename = file;
    c->str_addr[0] = qual_at;
    c->str_addr[1] = name_at;
    c->str_addr[2] = file_at;
    c->type_addr = type_addr;
    c->linetable_addr = pyu_u64(buf, len, PYU_OFF(o, co_linetable));
    c->firstlineno = (int32_t)pyu_u32(buf, len, PYU_OFF(o, co_firstlineno));
    c->firsttraceable =
        PYU_HAS(o, co_firsttraceable)
            ? (int32_t)pyu_u32(buf, len, PYU_OFF(o, co_firsttraceable))
            : 0;
    c->tlbc_array = PYU_HAS(o, co_tlbc) && o->free_threaded
                        ? pyu_u64(buf, len, PYU_OFF(o, co_tlbc))
                        : 0;
    /* (a code object is a variable-size object of its code units; before
     * 3.11 they are in the bytes object co_code) */
    int64_t units = (int64_t)pyu_u64(buf, len, PYU_OFF(o, ob_size));
    if (o->object_frames) {
        uint64_t bytes = pyu_u64(buf, len, PYU_OFF(o, co_code));
        int64_t size = 0;
        units = bytes && pyu_read_quiet(s, bytes + PYU_OFF(o, bytes_ob_size),
                                        &size, 8) == 0
                    ? size / 2
                    : 0;
        c->code_bytes = units > 0 ? bytes + PYU_OFF(o, bytes_ob_sval) : 0;
    }
    c->ncode = units > 0 && units < (1 << 24) ? (uint32_t)units : 0;
    int32_t locals = PYU_HAS(o, co_nlocalsplus)
                         ? (int32_t)pyu_u32(buf, len, PYU_OFF(o, co_nlocalsplus))
                         : 0;
    c->nlocalsplus = locals > 0 && locals < (1 << 20) ? (uint32_t)locals : 0;
    /* a frame on the data stack is its fixed fields, its locals and its
     * value stack (_PyFrame_PushUnchecked); 3.12+ keep that size, in
     * words, in co_framesize, right after co_nlocalsplus: the offsets
     * derived for these fields must agree with it */
    int32_t stack = PYU_HAS(o, co_stacksize)
                        ? (int32_t)pyu_u32(buf, len, PYU_OFF(o, co_stacksize))
                        : -1;
    c->framesize = stack >= 0 && stack < (1 << 20) && locals >= 0 &&
                           locals < (1 << 20)
                       ? (uint32_t)(PYU_OFF(o, fr_localsplus) +
                                    8 * (uint64_t)(locals + stack))
                       : 0;
    if (c->framesize && !o->builtin &&
        pyu_u32(buf, len, PYU_OFF(o, co_nlocalsplus) + 4) * 8ull !=
            c->framesize)
        c->framesize = 0;
    c->memo_instr = PYU_INSTR_UNKNOWN;
    c->tlbc_memo_index = 0;
    c->linetable_kind = o->linetable_kind;
    if (read_linetable(s, c->linetable_addr, c) < 0) {
        /* (the name is worth the cost: this happens once per code) */
        pyu_err_ctx(&s->err, "code object %s at 0x%" PRIx64, qual, addr);
        free(c->linetable);
        c->linetable = NULL;
        c->stale = true; /* read it again next time */
        return NULL;
    }
    return c;
}

uint32_t pyu_code_instr(pyu_session *s, const pyu_code *cc,
                        uint64_t instr_ptr, int32_t tlbc_index)
{
    pyu_code *c = (pyu_code *)cc;
    uint64_t base = c->addr + PYU_OFF(&s->off, co_code_adaptive);
    if (tlbc_index > 0 && c->tlbc_array &&
        tlbc_index == c->tlbc_memo_index) {
        base = c->tlbc_memo_base;
    } else if (tlbc_index > 0 && c->tlbc_array) {
        /* thread-local copy of the bytecode: {Py_ssize_t size; entries[]} */
        int64_t size;
        uint64_t entry;
        if (pyu_read_quiet(s, c->tlbc_array, &size, 8) < 0 ||
            tlbc_index >= size || size > 1 << 20 ||
            pyu_read_quiet(s, c->tlbc_array + 8 + 8 * (uint64_t)tlbc_index,
                           &entry, 8) < 0)
            return PYU_INSTR_UNKNOWN;
        base = entry;
        c->tlbc_memo_index = tlbc_index;
        c->tlbc_memo_base = entry;
        s->codes->by_stale = true;
    }
    if (instr_ptr < base ||
        (c->ncode ? (instr_ptr - base) / 2 >= c->ncode
                  : (instr_ptr - base) / 2 > (uint64_t)c->linetable_len * 8 + 8))
        return PYU_INSTR_UNKNOWN;
    return (uint32_t)((instr_ptr - base) / 2);
}

static int by_start(const void *a, const void *b)
{
    uint64_t x = ((const bytecode *)a)->start, y = ((const bytecode *)b)->start;
    return x < y ? -1 : x > y;
}

/* Sorts the records by where their bytecode lies (its main copy, and the
 * thread-local copy looked up last). */
static bool index_bytecode(pyu_session *s, struct pyu_codes *t)
{
    size_t need = 2 * t->n;
    if (need > t->capby) {
        bytecode *b = realloc(t->by_instr, need * sizeof *b);
        if (!b)
            return false;
        t->by_instr = b;
        t->capby = need;
    }
    t->nby = 0;
    for (slab *b = t->slabs; b; b = b->next)
        for (size_t i = 0; i < b->used; i++) {
            const pyu_code *c = &b->rec[i];
            if (c->stale || !c->ncode)
                continue;
            uint64_t at = c->addr + PYU_OFF(&s->off, co_code_adaptive);
            t->by_instr[t->nby++] =
                (bytecode){at, at + 2 * (uint64_t)c->ncode, c};
            if (c->tlbc_memo_index > 0 && c->tlbc_memo_base)
                t->by_instr[t->nby++] =
                    (bytecode){c->tlbc_memo_base,
                               c->tlbc_memo_base + 2 * (uint64_t)c->ncode, c};
        }
    qsort(t->by_instr, t->nby, sizeof *t->by_instr, by_start);
    t->by_stale = false;
    return true;
}

/* The cached record whose bytecode holds instr_ptr, or NULL. */
static const pyu_code *indexed_at(pyu_session *s, uint64_t instr_ptr)
{
    struct pyu_codes *t = s->codes;
    if (!t || (t->by_stale && !index_bytecode(s, t)))
        return NULL;
    size_t lo = 0, hi = t->nby; /* (the last one starting at or before) */
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (t->by_instr[mid].start <= instr_ptr)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (!lo || instr_ptr >= t->by_instr[lo - 1].end)
        return NULL;
    return t->by_instr[lo - 1].code;
}

#define SCAN_BACK 4096 /* bytes of bytecode before an instruction that
                          pyu_code_at_instr looks through */

const pyu_code *pyu_code_at_instr(pyu_session *s, uint64_t instr_ptr)
{
    const pyu_offsets *o = &s->off;
    const pyu_code *c = indexed_at(s, instr_ptr);
    struct pyu_codes *t = s->codes;
    uint64_t off = PYU_OFF(o, co_code_adaptive), ty = PYU_OFF(o, ob_type);
    if (c || !t || !t->last || (instr_ptr & 1) ||
        instr_ptr < off + SCAN_BACK + ty)
        return c;
    uint64_t *memo = &t->not_found[(instr_ptr >> 1) & 15];
    if (*memo == instr_ptr)
        return NULL;
    /* code objects are 8-aligned and of the type every code object read
     * so far had: the candidates' type words, nearest first */
    uint64_t code_type = t->last->type_addr, hi = (instr_ptr - off) & ~7ull,
             lo = hi - SCAN_BACK;
    uint64_t words[SCAN_BACK / 8 + 1];
    if (pyu_read_quiet(s, lo + ty, words, sizeof words) < 0)
        return NULL;
    pyu_err saved = s->err;
    for (size_t k = SCAN_BACK / 8 + 1; k-- > 0;) {
        if (words[k] != code_type)
            continue;
        bool is_code;
        c = pyu_code_get(s, lo + 8 * k, &is_code);
        if (c && pyu_code_instr(s, c, instr_ptr, 0) != PYU_INSTR_UNKNOWN) {
            s->err = saved;
            return c;
        }
        if (!c && (s->err.code == PYU_E_NOPROC || s->err.code == PYU_E_NOMEM))
            return NULL;
        s->err = saved;
    }
    *memo = instr_ptr;
    return NULL;
}

/* The most code units read to find a 3.11 cache entry's instruction. */
#define OWNER_SCAN_MAX (1u << 18)

void pyu_code_opcode(pyu_session *s, uint64_t bytecode, uint32_t *instr,
                     const char **op, const char **base)
{
    const pyu_offsets *o = &s->off;
    uint32_t at = *instr;
    uint8_t unit[2];
    const char *b, *n = NULL;
    unsigned k;
    *op = *base = "";
    if (o->instr_in_caches) {
        /* the frame may point at the last inline cache entry of its
         * instruction (3.11: a caller's prev_instr): the instruction is
         * the one whose entries cover it, found by stepping over whole
         * instructions from the start of the bytecode */
        if (at >= OWNER_SCAN_MAX)
            return;
        size_t len = 2 * ((size_t)at + 1);
        uint8_t *units = malloc(len);
        if (!units || pyu_read_quiet(s, bytecode, units, len) < 0) {
            free(units);
            return;
        }
        uint32_t i = 0;
        while ((n = pyu_opcode_name(o->version_hex, units[2 * i], &b, &k)) &&
               i + 1 + k <= at)
            i += 1 + k;
        free(units);
        if (!n)
            return; /* (a byte no instruction of this version has) */
        at = i;
    } else if (pyu_read_quiet(s, bytecode + 2 * (uint64_t)at, unit,
                              sizeof unit) < 0 ||
               !(n = pyu_opcode_name(o->version_hex, unit[0], &b, &k))) {
        return;
    }
    *instr = at;
    *op = n;
    *base = b;
}

bool pyu_code_incomplete(const pyu_session *s, const pyu_code *c,
                         uint8_t owner, uint64_t instr_ptr)
{
    /* (owner 1: a generator's frame, complete once it exists) */
    if (!PYU_HAS(&s->off, co_firsttraceable) || owner == 1 ||
        c->firsttraceable < 0)
        return false;
    uint64_t base = c->addr + PYU_OFF(&s->off, co_code_adaptive);
    return instr_ptr < base + 2 * (uint64_t)c->firsttraceable;
}

int pyu_code_line(const pyu_code *cc, uint32_t instr)
{
    pyu_code *c = (pyu_code *)cc;
    if (instr == PYU_INSTR_UNKNOWN)
        return 0;
    if (instr == c->memo_instr)
        return c->memo_line;
    int line = c->linetable_kind == PYU_LINES_LOCATIONS
                   ? pyu_linetable_line(c->linetable, c->linetable_len,
                                        c->firstlineno, instr)
                   : pyu_linetable_line_old(c->linetable, c->linetable_len,
                                            c->firstlineno, instr,
                                            c->linetable_kind);
    if (line < 0)
        line = 0;
    c->memo_instr = instr;
    c->memo_line = line;
    return line;
}

void pyu_code_position(const pyu_code *c, uint32_t instr, pyu_frame *f)
{
    pyu_position p = {0, 0, -1, -1};
    f->line = pyu_code_line(c, instr);
    if (instr != PYU_INSTR_UNKNOWN && f->line > 0 &&
        (c->linetable_kind != PYU_LINES_LOCATIONS ||
         pyu_linetable_position(c->linetable, c->linetable_len,
                                c->firstlineno, instr, &p) < 0 ||
         p.line != f->line))
        p = (pyu_position){0, 0, -1, -1};
    f->end_line = p.end_line;
    f->col = p.col;
    f->end_col = p.end_col;
}
