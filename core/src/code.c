/* Code objects, strings and location tables of the target, with caches.
 *
 * A frame names its code object; everything a dump shows about the frame
 * (names, file, line) is derived from it.  Code objects are cached by
 * address (flushed when CPython reports code objects were freed, or per
 * dump where it cannot), strings by address, so a repeated walk reads only
 * the frames themselves.
 */
#include "internal.h"

#include <inttypes.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------- location tables */

static bool read_varint(const uint8_t *t, size_t len, size_t *i, uint64_t *v)
{
    uint64_t val = 0;
    unsigned shift = 0;
    for (;;) {
        if (*i >= len || shift > 60)
            return false;
        uint8_t b = t[(*i)++];
        val |= (uint64_t)(b & 63) << shift;
        if (!(b & 64))
            break;
        shift += 6;
    }
    *v = val;
    return true;
}

static bool read_svarint(const uint8_t *t, size_t len, size_t *i, int64_t *v)
{
    uint64_t u;
    if (!read_varint(t, len, i, &u))
        return false;
    *v = (u & 1) ? -(int64_t)(u >> 1) : (int64_t)(u >> 1);
    return true;
}

int pyu_linetable_line(const uint8_t *t, size_t len, int first_line,
                       uint64_t index)
{
    int64_t line = first_line;
    uint64_t addr = 0;
    size_t i = 0;
    while (i < len) {
        uint8_t b = t[i++];
        if (!(b & 0x80))
            return -1; /* not at the start of an entry */
        int code = (b >> 3) & 15;
        uint64_t length = (uint64_t)(b & 7) + 1, skip;
        int64_t delta = 0;
        bool no_line = false;
        switch (code) {
        case 15:
            no_line = true;
            break;
        case 14:
            if (!read_svarint(t, len, &i, &delta) ||
                !read_varint(t, len, &i, &skip) ||
                !read_varint(t, len, &i, &skip) ||
                !read_varint(t, len, &i, &skip))
                return -1;
            break;
        case 13:
            if (!read_svarint(t, len, &i, &delta))
                return -1;
            break;
        case 10:
        case 11:
        case 12:
            delta = code - 10;
            i += 2;
            break;
        default:
            i += 1;
            break;
        }
        if (i > len)
            return -1;
        line += delta;
        if (index < addr + length) {
            if (no_line)
                return 0;
            return (line > 0 && line <= INT32_MAX) ? (int)line : 0;
        }
        addr += length;
    }
    return -1;
}

/* ---------------------------------------------------------------- strings */

static size_t put_utf8(char *o, uint32_t cp)
{
    if (cp < 0x80) {
        o[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        o[0] = (char)(0xC0 | (cp >> 6));
        o[1] = (char)(0x80 | (cp & 63));
        return 2;
    }
    if (cp < 0x10000) {
        o[0] = (char)(0xE0 | (cp >> 12));
        o[1] = (char)(0x80 | ((cp >> 6) & 63));
        o[2] = (char)(0x80 | (cp & 63));
        return 3;
    }
    o[0] = (char)(0xF0 | (cp >> 18));
    o[1] = (char)(0x80 | ((cp >> 12) & 63));
    o[2] = (char)(0x80 | ((cp >> 6) & 63));
    o[3] = (char)(0x80 | (cp & 63));
    return 4;
}

long pyu_ucs_to_utf8(const void *data, size_t count, int kind, char *out,
                     size_t outlen)
{
    const uint8_t *p = data;
    size_t w = 0;
    if (kind != 1 && kind != 2 && kind != 4)
        return -1;
    for (size_t i = 0; i < count; i++) {
        uint32_t cp;
        if (kind == 1) {
            cp = p[i];
        } else if (kind == 2) {
            uint16_t u;
            memcpy(&u, p + 2 * i, 2);
            cp = u;
        } else {
            memcpy(&cp, p + 4 * i, 4);
        }
        if (cp > 0x10FFFF)
            cp = 0xFFFD;
        if (outlen - w < 5)
            return -1;
        if (cp >= 0xDC80 && cp <= 0xDCFF) /* surrogateescape'd raw byte */
            out[w++] = (char)(cp - 0xDC00);
        else if (cp >= 0xD800 && cp <= 0xDFFF)
            w += put_utf8(out + w, 0xFFFD);
        else
            w += put_utf8(out + w, cp);
    }
    if (w >= outlen)
        return -1;
    out[w] = '\0';
    return (long)w;
}

#define STR_PEEK 256 /* bytes read past the header in the first read */

const char *pyu_str_read(pyu_session *s, uint64_t addr)
{
    const pyu_offsets *o = &s->off;
    const char *hit = pyu_strtab_get(s->strings, addr);
    if (hit)
        return hit;
    size_t hdr = (size_t)PYU_OFF(o, str_compact_size);
    uint8_t buf[4096 + STR_PEEK];
    size_t have = hdr + STR_PEEK;
    pyu_range r = {addr, buf, have};
    if (addr == 0 || (addr & 7))
        return pyu_err_set(&s->err, PYU_E_CORRUPT,
                           "string pointer 0x%" PRIx64 " is invalid", addr),
               NULL;
    if (s->ops->read(s->ctx, &r, 1) < 0) {
        /* near the end of a mapping: read just the header */
        have = hdr;
        if (pyu_read(s, addr, buf, have, "a string object") < 0)
            return NULL;
    }
    uint32_t state = pyu_u32(buf, have, PYU_OFF(o, str_state));
    int64_t length = (int64_t)pyu_u64(buf, have, PYU_OFF(o, str_length));
    unsigned sh = o->str_kind_shift;
    int kind = (int)((state >> sh) & 7);
    bool compact = (state >> (sh + 3)) & 1;
    bool ascii = (state >> (sh + 4)) & 1;
    if (!compact || (kind != 1 && kind != 2 && kind != 4) ||
        (ascii && kind != 1) || length < 0 || length > PYU_MAX_STRING) {
        pyu_err_set(&s->err, PYU_E_CORRUPT,
                    "object at 0x%" PRIx64
                    " is not a readable str (state 0x%x, length %" PRId64 ")",
                    addr, state, length);
        return NULL;
    }
    size_t data_at = ascii ? (size_t)PYU_OFF(o, str_ascii_size) : hdr;
    size_t nbytes = (size_t)length * (size_t)kind;
    uint8_t *heap = NULL;
    const uint8_t *data;
    if (data_at + nbytes <= have) {
        data = buf + data_at;
    } else {
        heap = malloc(nbytes ? nbytes : 1);
        if (!heap) {
            pyu_err_set(&s->err, PYU_E_NOMEM, "out of memory");
            return NULL;
        }
        if (pyu_read(s, addr + data_at, heap, nbytes, "string data") < 0) {
            free(heap);
            return NULL;
        }
        data = heap;
    }
    size_t cap = (size_t)length * 4 + 1;
    char small[1024];
    char *text = cap <= sizeof small ? small : malloc(cap);
    const char *res = NULL;
    if (!text) {
        pyu_err_set(&s->err, PYU_E_NOMEM, "out of memory");
    } else {
        long n = pyu_ucs_to_utf8(data, (size_t)length, kind, text, cap);
        if (n < 0)
            pyu_err_set(&s->err, PYU_E_CORRUPT,
                        "str at 0x%" PRIx64 " cannot be decoded", addr);
        else if (!(res = pyu_strtab_put(s->strings, addr, text, (size_t)n)))
            pyu_err_set(&s->err, PYU_E_NOMEM, "out of memory");
        if (text != small)
            free(text);
    }
    free(heap);
    return res;
}

/* ------------------------------------------------------------ code cache */

static size_t code_slot(uint64_t addr, size_t cap)
{
    uint64_t h = addr * 0x9E3779B97F4A7C15ull;
    return (size_t)(h >> 20) & (cap - 1);
}

/* Both tables here are open-addressing arrays of elements that start with
 * a non-zero uint64_t key (0 marks a free slot).  Doubles *slots (*cap
 * elements of el bytes each); false when out of memory. */
static bool table_grow(void **slots, size_t *cap, size_t el)
{
    size_t ncap = *cap ? *cap * 2 : 256;
    char *nt = calloc(ncap, el);
    if (!nt)
        return false;
    for (size_t k = 0; k < *cap; k++) {
        const char *e = (const char *)*slots + k * el;
        uint64_t key, other;
        memcpy(&key, e, 8);
        if (!key)
            continue;
        size_t i = code_slot(key, ncap);
        for (;; i = (i + 1) & (ncap - 1)) {
            memcpy(&other, nt + i * el, 8);
            if (!other)
                break;
        }
        memcpy(nt + i * el, e, el);
    }
    free(*slots);
    *slots = nt;
    *cap = ncap;
    return true;
}

_Static_assert(offsetof(pyu_code, addr) == 0, "code cache key first");

static pyu_code *code_lookup(pyu_session *s, uint64_t addr)
{
    if (!s->codes)
        return NULL;
    size_t i = code_slot(addr, s->ncodes_cap);
    for (size_t n = 0; n < s->ncodes_cap; n++) {
        pyu_code *c = &s->codes[i];
        if (c->addr == 0)
            return NULL;
        if (c->addr == addr)
            return c;
        i = (i + 1) & (s->ncodes_cap - 1);
    }
    return NULL;
}

static pyu_code *code_insert(pyu_session *s, uint64_t addr)
{
    if (s->ncodes * 2 >= s->ncodes_cap &&
        !table_grow((void **)&s->codes, &s->ncodes_cap, sizeof *s->codes))
        return NULL;
    size_t i = code_slot(addr, s->ncodes_cap);
    while (s->codes[i].addr)
        i = (i + 1) & (s->ncodes_cap - 1);
    s->ncodes++;
    s->codes[i].addr = addr;
    return &s->codes[i];
}

void pyu_caches_flush(pyu_session *s)
{
    pyu_caches_free(s);
    pyu_strtab_free(s->strings);
    s->strings = pyu_strtab_new();
    s->type_no_next = 0;
    memset(s->type_yes, 0, sizeof s->type_yes);
    memset(s->type_no, 0, sizeof s->type_no);
}

void pyu_caches_free(pyu_session *s)
{
    for (size_t i = 0; i < s->ncodes_cap; i++)
        free(s->codes[i].linetable);
    free(s->codes);
    s->codes = NULL;
    s->ncodes = s->ncodes_cap = 0;
}

/* 1 when the type object's tp_name is `name`, 0 when it is another, -1
 * when the type is unreadable, -2 when only the name is (a core whose
 * binaries are gone: type names live in their read-only data). */
static int type_named(pyu_session *s, uint64_t type_addr, const char *name)
{
    char tp_name[32];
    uint64_t name_ptr;
    if (pyu_read(s, type_addr + PYU_OFF(&s->off, tp_name), &name_ptr, 8,
                 "a type object") < 0)
        return -1;
    size_t want = strlen(name) + 1;
    if (pyu_read(s, name_ptr, tp_name, want, "a type name") < 0)
        return -2;
    return memcmp(tp_name, name, want) == 0;
}

static void remember_code_type(pyu_session *s, uint64_t type_addr)
{
    for (size_t i = 0; i < 8; i++)
        if (!s->type_yes[i] || s->type_yes[i] == type_addr) {
            s->type_yes[i] = type_addr;
            return;
        }
}

static int is_code_type(pyu_session *s, uint64_t type_addr)
{
    for (size_t i = 0; i < 8; i++)
        if (s->type_yes[i] == type_addr)
            return 1;
    for (size_t i = 0; i < 32; i++)
        if (s->type_no[i] == type_addr)
            return 0;
    int yes = type_named(s, type_addr, "code");
    if (yes < 0)
        return yes;
    if (yes) {
        remember_code_type(s, type_addr);
    } else {
        s->type_no[s->type_no_next++ % 32] = type_addr;
    }
    return yes;
}

static int read_linetable(pyu_session *s, uint64_t bytes_addr, pyu_code *c)
{
    const pyu_offsets *o = &s->off;
    uint8_t hdr[256];
    size_t hlen = (size_t)PYU_OFF(o, bytes_ob_sval);
    if (hlen > sizeof hdr - 8)
        return pyu_err_set(&s->err, PYU_E_OFFSETS, "bytes header too large");
    if (pyu_read(s, bytes_addr, hdr, hlen, "a location table") < 0)
        return -1;
    int64_t n = (int64_t)pyu_u64(hdr, hlen, PYU_OFF(o, bytes_ob_size));
    if (n < 0 || (uint64_t)n > PYU_MAX_LINETABLE)
        return pyu_err_set(&s->err, PYU_E_CORRUPT,
                           "location table at 0x%" PRIx64
                           " has implausible size %" PRId64,
                           bytes_addr, n);
    c->linetable = malloc((size_t)n + 1);
    if (!c->linetable)
        return pyu_err_set(&s->err, PYU_E_NOMEM, "out of memory");
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
    pyu_code *c = code_lookup(s, addr);
    if (c && !c->stale)
        return c;
    uint8_t buf[65536];
    size_t len = (size_t)PYU_OFF(o, co_size);
    if ((addr & 7) || addr == 0) {
        pyu_err_set(&s->err, PYU_E_CORRUPT, "code object pointer 0x%" PRIx64
                    " is %s", addr, addr ? "misaligned" : "NULL");
        return NULL;
    }
    if (s->ncodes >= PYU_MAX_CODES)
        pyu_caches_flush(s); /* a long session: start over, bounded */
    if (pyu_read(s, addr, buf, len, "a code object") < 0)
        return NULL;
    uint64_t type = pyu_u64(buf, len, PYU_OFF(o, ob_type));
    int yes = is_code_type(s, type);
    if (yes == -1) {
        pyu_err_ctx(&s->err, "type of object at 0x%" PRIx64, addr);
        return NULL;
    }
    /* yes == -2: the type's name is unreadable; the object is taken for
     * code if its names and location table decode (checked below) */
    if (!yes) {
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
        pyu_err_ctx(&s->err, "code object at 0x%" PRIx64, addr);
        return NULL;
    }
    if (yes == -2)
        remember_code_type(s, type); /* it decodes as code: trust the type */
    if (!c) {
        c = code_insert(s, addr);
        if (!c) {
            pyu_err_set(&s->err, PYU_E_NOMEM, "out of memory");
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
    c->firstlineno = (int32_t)pyu_u32(buf, len, PYU_OFF(o, co_firstlineno));
    c->tlbc_array = PYU_HAS(o, co_tlbc) && o->free_threaded
                        ? pyu_u64(buf, len, PYU_OFF(o, co_tlbc))
                        : 0;
    c->memo_index = UINT64_MAX;
    c->tlbc_memo_index = 0;
    if (read_linetable(s, pyu_u64(buf, len, PYU_OFF(o, co_linetable)), c) <
        0) {
        pyu_err_ctx(&s->err, "code object %s at 0x%" PRIx64, qual, addr);
        free(c->linetable);
        c->linetable = NULL;
        c->stale = true; /* read it again next time */
        return NULL;
    }
    return c;
}

int pyu_code_line(pyu_session *s, const pyu_code *cc, uint64_t instr_ptr,
                  int32_t tlbc_index)
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
        if (pyu_read(s, c->tlbc_array, &size, 8, "a bytecode array") < 0 ||
            tlbc_index >= size || size > 1 << 20 ||
            pyu_read(s, c->tlbc_array + 8 + 8 * (uint64_t)tlbc_index, &entry,
                     8, "a bytecode array entry") < 0)
            return 0;
        base = entry;
        c->tlbc_memo_index = tlbc_index;
        c->tlbc_memo_base = entry;
    }
    if (instr_ptr < base || (instr_ptr - base) / 2 > (uint64_t)c->linetable_len * 8 + 8)
        return 0;
    uint64_t index = (instr_ptr - base) / 2;
    if (index == c->memo_index)
        return c->memo_line;
    int line = pyu_linetable_line(c->linetable, c->linetable_len,
                                  c->firstlineno, index);
    if (line < 0)
        line = 0;
    c->memo_index = index;
    c->memo_line = line;
    return line;
}

/* ----------------------------------------------------------- string table */

typedef struct strslot {
    uint64_t key;
    char *text;
} strslot;

struct pyu_strtab {
    strslot *slots;
    size_t cap, n;
};

pyu_strtab *pyu_strtab_new(void)
{
    return calloc(1, sizeof(pyu_strtab));
}

void pyu_strtab_free(pyu_strtab *t)
{
    if (!t)
        return;
    for (size_t i = 0; i < t->cap; i++)
        free(t->slots[i].text);
    free(t->slots);
    free(t);
}

const char *pyu_strtab_get(const pyu_strtab *t, uint64_t key)
{
    if (!t || !t->cap)
        return NULL;
    size_t i = code_slot(key, t->cap);
    while (t->slots[i].key) {
        if (t->slots[i].key == key)
            return t->slots[i].text;
        i = (i + 1) & (t->cap - 1);
    }
    return NULL;
}

const char *pyu_strtab_put(pyu_strtab *t, uint64_t key, const char *text,
                           size_t len)
{
    if (!t || !key)
        return NULL;
    if (t->n * 2 >= t->cap &&
        !table_grow((void **)&t->slots, &t->cap, sizeof *t->slots))
        return NULL;
    size_t i = code_slot(key, t->cap);
    while (t->slots[i].key) {
        if (t->slots[i].key == key)
            return t->slots[i].text;
        i = (i + 1) & (t->cap - 1);
    }
    char *copy = malloc(len + 1);
    if (!copy)
        return NULL;
    memcpy(copy, text, len);
    copy[len] = '\0';
    t->slots[i].key = key;
    t->slots[i].text = copy;
    t->n++;
    return copy;
}
