/* Values of the target: a bounded repr of an object made from its memory
 * alone, and the set tables it shares with asyncio.c.
 *
 * Only the built-in types types.c recognises (static types with the
 * tp_flags they must have) are read as such: None, bool, int, float, str,
 * bytes, tuple, list, dict, set and frozenset.  Anything else, a subclass
 * of those included, shows as "<TypeName at 0xADDR>", and an object that
 * cannot be read as "<unreadable>"; the rest of the repr goes on.  Nothing
 * here runs target code, and everything is bounded: the characters of a
 * str or bytes shown (PYU_REPR_CHARS), the elements of a container
 * (PYU_REPR_ITEMS), the nesting (PYU_REPR_DEPTH), the objects read
 * (PYU_REPR_READS) and the length of the text (the caller's buffer).
 *
 * Layouts not in the debug offsets, all from CPython's headers and the
 * same in 3.13, 3.14 and 3.15 (GIL and free-threaded builds):
 * - PyDictKeysObject (Include/internal/pycore_dict.h): dk_refcnt at 0,
 *   the bytes dk_log2_size at 8, dk_log2_index_bytes at 9, dk_kind at 10
 *   (the free-threaded dk_mutex takes byte 11), dk_version at 12,
 *   dk_usable at 16, dk_nentries at 24, dk_indices at 32; the entries
 *   follow the 1 << dk_log2_index_bytes bytes of indices: {hash, key,
 *   value} for DICT_KEYS_GENERAL (0), {key, value} for the unicode kinds.
 * - PyDictValues: the bytes capacity, size, embedded, valid, then
 *   values[capacity] (8-aligned), then the insertion order (size bytes).
 * - PyLongObject: lv_tag >> 3 digits of 30 bits (uint32 each), lv_tag & 3
 *   the sign: 0 positive, 1 zero, 2 negative (Include/cpython/
 *   longintrepr.h).
 * - Set tables: entries {key, hash}; a deleted entry holds a dummy key
 *   with hash -1.
 */
#include "../internal.h"

#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DK_LOG2_SIZE 8
#define DK_LOG2_INDEX_BYTES 9
#define DK_KIND 10
#define DK_NENTRIES 24
#define DK_INDICES 32
#define DV_VALUES 8

#define INT_DIGITS_MAX 700 /* 30-bit digits written in decimal (~6300
                              decimal digits); longer ints by size */
#define INT_TEXT_MAX 100   /* a longer decimal shows its first half */
#define DICT_SCAN_MAX 4096 /* dict entries / set slots looked at */
#define SET_BATCH 256 /* set entries read per call */

/* ------------------------------------------------------------ set tables */

int pyu_set_each(pyu_session *s, uint64_t set, size_t max_slots,
                 int (*fn)(void *arg, uint64_t key), void *arg, bool *cut)
{
    const pyu_offsets *o = &s->off;
    int64_t used = 0, mask = 0;
    uint64_t table = 0;
    pyu_range r[3] = {
        {set + PYU_OFF(o, set_used), &used, 8},
        {set + PYU_OFF(o, set_mask), &mask, 8},
        {set + PYU_OFF(o, set_table), &table, 8},
    };
    if (pyu_readv(s, r, 3, "a set") < 0)
        return -1;
    if (mask < 0 || mask >= (int64_t)PYU_MAX_SET_SLOTS ||
        ((mask + 1) & mask) || used < 0 || used > mask + 1 || !table)
        return pyu_fail(&s->err, PYU_E_CORRUPT,
                        "the set at 0x%" PRIx64 " makes no sense", set);
    struct entry {
        uint64_t key;
        int64_t hash;
    } e[SET_BATCH];
    size_t n = (size_t)mask + 1, seen = 0;
    if (n > max_slots) {
        n = max_slots;
        *cut = true;
    }
    for (size_t at = 0; at < n && seen < (size_t)used; at += SET_BATCH) {
        size_t k = n - at < SET_BATCH ? n - at : SET_BATCH;
        if (pyu_read(s, table + at * sizeof *e, e, k * sizeof *e,
                     "a set's table") < 0)
            return -1;
        for (size_t i = 0; i < k; i++) {
            if (!e[i].key || e[i].hash == -1)
                continue;
            seen++;
            int rc = fn(arg, e[i].key);
            if (rc)
                return rc;
        }
    }
    return 0;
}

/* ------------------------------------------------------------- the text */

typedef struct rw {
    pyu_session *s;
    char *out;
    size_t cap, len; /* cap: with the NUL */
    bool full;       /* the text was cut: nothing more goes in */
    unsigned depth, reads;
    uint64_t open[PYU_REPR_DEPTH]; /* the containers being written */
} rw;

/* Appends n bytes; what does not fit is cut (at a character boundary)
 * and "..." ends the text. */
static void put(rw *w, const char *p, size_t n)
{
    if (w->full)
        return;
    size_t room = w->cap - 1 - w->len;
    if (n + 3 <= room) {
        memcpy(w->out + w->len, p, n);
        w->len += n;
        w->out[w->len] = '\0';
        return;
    }
    size_t k = room >= 3 ? room - 3 : 0;
    if (k > n)
        k = n;
    while (k > 0 && ((unsigned char)p[k] & 0xC0) == 0x80)
        k--; /* not inside a UTF-8 sequence */
    memcpy(w->out + w->len, p, k);
    w->len += k;
    memcpy(w->out + w->len, "...", room - k >= 3 ? 3 : room - k);
    w->len += room - k >= 3 ? 3 : room - k;
    w->out[w->len] = '\0';
    w->full = true;
}

static void puts_(rw *w, const char *p)
{
    put(w, p, strlen(p));
}

static void putf(rw *w, const char *fmt, ...) PYU_PRINTF(2, 3);
static void putf(rw *w, const char *fmt, ...)
{
    char buf[128];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    if (n > 0)
        put(w, buf, (size_t)n < sizeof buf ? (size_t)n : sizeof buf - 1);
}

static void unreadable(rw *w)
{
    puts_(w, "<unreadable>");
}

/* ------------------------------------------------------------- scalars */

/* Shortest decimal that reads back as v, laid out as Python's repr. */
void pyu_float_repr(double v, char *out, size_t cap)
{
    if (isnan(v)) {
        snprintf(out, cap, "nan");
        return;
    }
    if (isinf(v)) {
        snprintf(out, cap, v < 0 ? "-inf" : "inf");
        return;
    }
    char e[40];
    for (int p = 0; p < 17; p++) {
        snprintf(e, sizeof e, "%.*e", p, v);
        if (strtod(e, NULL) == v)
            break;
    }
    /* e: [-]D[.DDD]e(+|-)XX */
    const char *q = e;
    bool neg = *q == '-';
    if (neg)
        q++;
    char digits[24];
    size_t nd = 0;
    for (; *q && *q != 'e'; q++)
        if (*q >= '0' && *q <= '9' && nd < sizeof digits - 1)
            digits[nd++] = *q;
    int exp = *q == 'e' ? atoi(q + 1) : 0;
    while (nd > 1 && digits[nd - 1] == '0')
        nd--;
    digits[nd] = '\0';
    int decpt = exp + 1; /* v = 0.DIGITS * 10^decpt */
    char body[64];
    if (decpt <= -4 || decpt > 16) {
        snprintf(body, sizeof body, "%c%s%se%c%02d", digits[0],
                 nd > 1 ? "." : "", digits + 1, exp < 0 ? '-' : '+',
                 exp < 0 ? -exp : exp);
    } else if (decpt <= 0) {
        snprintf(body, sizeof body, "0.%.*s%s", -decpt, "0000", digits);
    } else if ((size_t)decpt >= nd) {
        snprintf(body, sizeof body, "%s%.*s.0", digits, decpt - (int)nd,
                 "0000000000000000");
    } else {
        snprintf(body, sizeof body, "%.*s.%s", decpt, digits, digits + decpt);
    }
    snprintf(out, cap, "%s%s", neg ? "-" : "", body);
}

static void float_value(rw *w, uint64_t obj)
{
    double v;
    char buf[64];
    if (pyu_read_quiet(w->s, obj + PYU_OFF(&w->s->off, float_ob_fval), &v,
                       8) < 0) {
        unreadable(w);
        return;
    }
    pyu_float_repr(v, buf, sizeof buf);
    puts_(w, buf);
}

/* Bits of the highest digit d (> 0). */
static unsigned bit_length(uint32_t d)
{
    return 32u - (unsigned)__builtin_clz(d);
}

static void int_value(rw *w, uint64_t obj, bool is_bool)
{
    const pyu_offsets *o = &w->s->off;
    uint64_t tag;
    if (pyu_read_quiet(w->s, obj + PYU_OFF(o, long_lv_tag), &tag, 8) < 0) {
        unreadable(w);
        return;
    }
    unsigned sign = tag & 3;
    uint64_t nd = tag >> 3;
    if (o->long_size_signed) { /* 3.11: ob_size, the signed digit count */
        int64_t size = (int64_t)tag;
        sign = size < 0 ? 2 : size == 0 ? 1 : 0;
        nd = size < 0 ? 0 - (uint64_t)size : (uint64_t)size;
    }
    if (is_bool) {
        puts_(w, sign == 1 ? "False" : "True");
        return;
    }
    if (sign == 1) {
        puts_(w, "0");
        return;
    }
    if (sign == 3 || nd == 0) {
        unreadable(w);
        return;
    }
    uint64_t digits = obj + PYU_OFF(o, long_ob_digit);
    if (nd > INT_DIGITS_MAX) {
        uint32_t top;
        if (nd > (1ull << 40) ||
            pyu_read_quiet(w->s, digits + (nd - 1) * 4, &top, 4) < 0 ||
            !(top & 0x3FFFFFFF)) {
            unreadable(w);
            return;
        }
        putf(w, "<%sint of %" PRIu64 " bits>", sign == 2 ? "negative " : "",
             (nd - 1) * 30 + bit_length(top & 0x3FFFFFFF));
        return;
    }
    uint32_t d[INT_DIGITS_MAX];
    if (pyu_read_quiet(w->s, digits, d, (size_t)nd * 4) < 0) {
        unreadable(w);
        return;
    }
    /* base 2^30 -> base 10^9, most significant digit first */
    uint32_t z[INT_DIGITS_MAX * 31 / 29 + 2];
    size_t nz = 0;
    for (size_t i = nd; i-- > 0;) {
        uint64_t carry = d[i];
        if (carry >> 30) {
            unreadable(w);
            return;
        }
        for (size_t j = 0; j < nz; j++) {
            uint64_t t = ((uint64_t)z[j] << 30) + carry;
            z[j] = (uint32_t)(t % 1000000000u);
            carry = t / 1000000000u;
        }
        while (carry) {
            z[nz++] = (uint32_t)(carry % 1000000000u);
            carry /= 1000000000u;
        }
    }
    if (nz == 0) { /* digits that are all 0: not what CPython makes */
        unreadable(w);
        return;
    }
    char *text = malloc(nz * 9 + 2);
    if (!text) {
        unreadable(w);
        return;
    }
    size_t n = 0;
    if (sign == 2)
        text[n++] = '-';
    n += (size_t)sprintf(text + n, "%u", z[nz - 1]);
    for (size_t j = nz - 1; j-- > 0;)
        n += (size_t)sprintf(text + n, "%09u", z[j]);
    if (n > INT_TEXT_MAX) {
        put(w, text, INT_TEXT_MAX / 2);
        putf(w, "... (%zu digits)", n - (sign == 2));
    } else {
        put(w, text, n);
    }
    free(text);
}

/* Python's str.isprintable() for a code point, short of its tables:
 * ASCII as CPython has it, and the non-printable ranges above it that
 * matter most (C1 controls, the other spaces and separators, format
 * characters, surrogates, private use, non-characters). */
static bool printable(uint32_t c)
{
    static const uint32_t not_printable[][2] = {
        {0x80, 0xA0},     {0xAD, 0xAD},       {0x61C, 0x61C},
        {0x1680, 0x1680}, {0x180E, 0x180E},   {0x2000, 0x200F},
        {0x2028, 0x202F}, {0x205F, 0x206F},   {0x3000, 0x3000},
        {0xD800, 0xF8FF}, {0xFEFF, 0xFEFF},   {0xFFF0, 0xFFFB},
        {0xFFFE, 0xFFFF}, {0xE0000, 0xE0FFF}, {0xF0000, 0x10FFFF},
    };
    if (c < 0x80)
        return c >= 0x20 && c < 0x7F;
    for (size_t i = 0; i < sizeof not_printable / sizeof *not_printable; i++)
        if (c >= not_printable[i][0] && c <= not_printable[i][1])
            return false;
    return true;
}

/* The quote Python's repr picks: ' unless the text has ' and no ". */
static char pick_quote(const uint32_t *cp, size_t n)
{
    bool single = false, dbl = false;
    for (size_t i = 0; i < n; i++) {
        single |= cp[i] == '\'';
        dbl |= cp[i] == '"';
    }
    return single && !dbl ? '"' : '\'';
}

/* Characters (str) or bytes as Python's repr writes them between its
 * quotes. */
static void quoted(rw *w, const uint32_t *cp, size_t n, bool bytes)
{
    char q = pick_quote(cp, n);
    char buf[16];
    put(w, &q, 1);
    for (size_t i = 0; i < n && !w->full; i++) {
        uint32_t c = cp[i];
        const char *esc = c == '\\' ? "\\\\" : c == '\t' ? "\\t"
                          : c == '\n' ? "\\n" : c == '\r' ? "\\r" : NULL;
        if (esc) {
            puts_(w, esc);
        } else if (c == (uint32_t)q) {
            buf[0] = '\\';
            buf[1] = q;
            put(w, buf, 2);
        } else if (c < 0x80 ? (c >= 0x20 && c < 0x7F)
                            : (!bytes && printable(c))) {
            char u[5];
            long k = pyu_ucs_to_utf8(&c, 1, 4, u, sizeof u);
            put(w, u, k > 0 ? (size_t)k : 0);
        } else if (c <= 0xFF) {
            putf(w, "\\x%02x", c);
        } else if (c <= 0xFFFF) {
            putf(w, "\\u%04x", c);
        } else {
            putf(w, "\\U%08x", c);
        }
    }
    put(w, &q, 1);
}

static void str_value(rw *w, uint64_t obj)
{
    uint32_t cp[PYU_REPR_CHARS];
    int64_t length;
    long n = pyu_str_peek(w->s, obj, cp, PYU_REPR_CHARS, &length);
    if (n < 0) {
        unreadable(w);
        return;
    }
    quoted(w, cp, (size_t)n, false);
    if (length > n)
        putf(w, "... (%" PRId64 " characters)", length);
}

static void bytes_value(rw *w, uint64_t obj)
{
    const pyu_offsets *o = &w->s->off;
    int64_t size;
    uint8_t b[PYU_REPR_CHARS];
    uint32_t cp[PYU_REPR_CHARS];
    if (pyu_read_quiet(w->s, obj + PYU_OFF(o, bytes_ob_size), &size, 8) < 0 ||
        size < 0) {
        unreadable(w);
        return;
    }
    size_t n = size < PYU_REPR_CHARS ? (size_t)size : PYU_REPR_CHARS;
    if (n && pyu_read_quiet(w->s, obj + PYU_OFF(o, bytes_ob_sval), b, n) <
                 0) {
        unreadable(w);
        return;
    }
    for (size_t i = 0; i < n; i++)
        cp[i] = b[i];
    put(w, "b", 1);
    quoted(w, cp, n, true);
    if ((uint64_t)size > n)
        putf(w, "... (%" PRId64 " bytes)", size);
}

/* ----------------------------------------------------------- containers */

static void value(rw *w, uint64_t obj);

/* The elements at items[0..n) (n <= PYU_REPR_ITEMS) of a sequence of
 * `size`, between open and close; a 1-tuple gets its comma. */
static void sequence(rw *w, const uint64_t *items, size_t n, int64_t size,
                     const char *open, const char *close, bool tuple)
{
    puts_(w, open);
    for (size_t i = 0; i < n && !w->full; i++) {
        if (i)
            puts_(w, ", ");
        value(w, items[i]);
    }
    if (size > (int64_t)n)
        puts_(w, n ? ", ..." : "...");
    else if (tuple && size == 1)
        puts_(w, ",");
    puts_(w, close);
}

static void tuple_value(rw *w, uint64_t obj)
{
    const pyu_offsets *o = &w->s->off;
    int64_t size;
    uint64_t items[PYU_REPR_ITEMS];
    if (pyu_read_quiet(w->s, obj + PYU_OFF(o, tuple_ob_size), &size, 8) < 0 ||
        size < 0) {
        unreadable(w);
        return;
    }
    size_t n = size < PYU_REPR_ITEMS ? (size_t)size : PYU_REPR_ITEMS;
    if (n && pyu_read_quiet(w->s, obj + PYU_OFF(o, tuple_ob_item), items,
                            n * 8) < 0) {
        unreadable(w);
        return;
    }
    sequence(w, items, n, size, "(", ")", true);
}

static void list_value(rw *w, uint64_t obj)
{
    const pyu_offsets *o = &w->s->off;
    int64_t size = 0;
    uint64_t item = 0, items[PYU_REPR_ITEMS];
    pyu_range r[2] = {
        {obj + PYU_OFF(o, list_ob_size), &size, 8},
        {obj + PYU_OFF(o, list_ob_item), &item, 8},
    };
    if (pyu_readv_quiet(w->s, r, 2) < 0 || size < 0 || (size && !item)) {
        unreadable(w);
        return;
    }
    size_t n = size < PYU_REPR_ITEMS ? (size_t)size : PYU_REPR_ITEMS;
    if (n && pyu_read_quiet(w->s, item, items, n * 8) < 0) {
        unreadable(w);
        return;
    }
    sequence(w, items, n, size, "[", "]", false);
}

typedef struct set_acc {
    uint64_t keys[PYU_REPR_ITEMS + 1];
    size_t n;
} set_acc;

static int set_take(void *arg, uint64_t key)
{
    set_acc *a = arg;
    a->keys[a->n++] = key;
    return a->n == PYU_REPR_ITEMS + 1; /* one more: there are more */
}

static void set_value(rw *w, uint64_t obj, bool frozen)
{
    set_acc a = {.n = 0};
    bool cut = false;
    if (pyu_set_each(w->s, obj, DICT_SCAN_MAX, set_take, &a, &cut) < 0) {
        unreadable(w);
        return;
    }
    const char *name = frozen ? "frozenset" : "set";
    if (a.n == 0 && !cut) {
        putf(w, "%s()", name);
        return;
    }
    if (frozen)
        puts_(w, "frozenset(");
    size_t n = a.n > PYU_REPR_ITEMS ? PYU_REPR_ITEMS : a.n;
    sequence(w, a.keys, n, (int64_t)n + (a.n > n || cut), "{", "}", false);
    if (frozen)
        puts_(w, ")");
}

/* A split dict's values (vals) and their insertion order: head[0] values
 * with head[1] of them in order.  3.13+: a header {capacity, size, ...},
 * the values, then the order; 3.11: the values alone, preceded by the
 * order backwards, the count used and the prefix's size (bytes -1, -2).
 * Returns 0 or -1. */
static int split_values(pyu_session *s, uint64_t values, int64_t nentries,
                        uint8_t *head, uint8_t order[256], uint64_t vals[256])
{
    if (!s->off.dict_order_before)
        return pyu_read_quiet(s, values, head, DV_VALUES) < 0 ||
                       head[1] > head[0] || head[0] == 0 ||
                       pyu_read_quiet(s, values + DV_VALUES, vals,
                                      head[0] * 8u) < 0 ||
                       (head[1] &&
                        pyu_read_quiet(s, values + DV_VALUES + head[0] * 8u,
                                       order, head[1]) < 0)
                   ? -1
                   : 0;
    uint8_t pre[256 + 2]; /* order (backwards), used, prefix size */
    if (values < sizeof pre || nentries <= 0 || nentries > 255 ||
        pyu_read_quiet(s, values - 2, pre, 2) < 0 || pre[0] > nentries ||
        pre[1] < pre[0] + 2 ||
        pyu_read_quiet(s, values - 2 - pre[0], pre + 2, pre[0]) < 0 ||
        pyu_read_quiet(s, values, vals, (size_t)nentries * 8) < 0)
        return -1;
    head[0] = (uint8_t)nentries;
    head[1] = pre[0];
    for (unsigned j = 0; j < pre[0]; j++) /* the first is nearest */
        order[j] = pre[2 + pre[0] - 1 - j];
    return 0;
}

/* ------------------------------------------------------------ dicts */

/* The items of a combined table: nentries entries of esize bytes from
 * `entries`, the key at key_at and the value after it. */
static int combined_each(pyu_session *s, uint64_t keys, uint64_t entries,
                         int64_t nentries, size_t esize, size_t key_at,
                         size_t max, pyu_item_fn fn, void *arg)
{
    uint64_t e[32 * 3];
    size_t per = sizeof e / esize;
    size_t limit = (uint64_t)nentries < max ? (size_t)nentries : max;
    for (size_t at = 0; at < limit; at += per) {
        size_t k = limit - at < per ? limit - at : per;
        if (pyu_read_quiet(s, entries + at * esize, e, k * esize) < 0)
            return pyu_fail(&s->err, PYU_E_FAULT, "the entries of a "
                            "dict at 0x%" PRIx64 " cannot be read", keys);
        for (size_t i = 0; i < k; i++) {
            uint64_t key = pyu_u64(e, k * esize, i * esize + key_at);
            uint64_t val = pyu_u64(e, k * esize, i * esize + key_at + 8);
            int rc = val ? fn(arg, key, val) : 0;
            if (rc)
                return rc;
        }
    }
    return 0;
}

#define DK_OLD_HEADER 40 /* 3.9, 3.10: refcnt, size, lookup, usable,
                            nentries, then the indices */

/* 3.9's and 3.10's keys: dk_size (a power of two) slots of indices, each
 * 1, 2, 4 or 8 bytes as the size needs, then {hash, key, value} entries;
 * a split dict's values are an array in the entries' order. */
static int keys_each_old(pyu_session *s, uint64_t keys, uint64_t values,
                         size_t max, pyu_item_fn fn, void *arg)
{
    int64_t kh[DK_OLD_HEADER / 8];
    if (!keys || pyu_read_quiet(s, keys, kh, sizeof kh) < 0)
        return pyu_fail(&s->err, PYU_E_FAULT, "the keys of a dict at 0x%"
                        PRIx64 " cannot be read", keys);
    int64_t size = kh[1], nentries = kh[4];
    if (size < 8 || size > (1ll << 40) || (size & (size - 1)) ||
        nentries < 0 || nentries > size)
        return pyu_fail(&s->err, PYU_E_CORRUPT, "the keys of a dict at 0x%"
                        PRIx64 " make no sense", keys);
    uint64_t width = size <= 0xff ? 1 : size <= 0xffff ? 2
                     : size <= 0xffffffffll ? 4 : 8;
    uint64_t entries = keys + DK_OLD_HEADER + (uint64_t)size * width;
    if (!values)
        return combined_each(s, keys, entries, nentries, 24, 8, max, fn,
                             arg);
    uint64_t vals[256];
    size_t n = (size_t)(nentries < 256 ? nentries : 256);
    if (n && pyu_read_quiet(s, values, vals, n * 8) < 0)
        return pyu_fail(&s->err, PYU_E_FAULT, "the values of a dict at 0x%"
                        PRIx64 " cannot be read", values);
    for (size_t i = 0, shown = 0; i < n && shown < max; i++) {
        uint64_t key = 0;
        if (!vals[i])
            continue;
        if (pyu_read_quiet(s, entries + i * 24 + 8, &key, 8) < 0)
            return pyu_fail(&s->err, PYU_E_FAULT, "the keys of a dict at 0x%"
                            PRIx64 " cannot be read", keys);
        int rc = fn(arg, key, vals[i]);
        if (rc)
            return rc;
        shown++;
    }
    return 0;
}

int pyu_keys_each(pyu_session *s, uint64_t keys, uint64_t values,
                  size_t max, pyu_item_fn fn, void *arg)
{
    if (s->off.dict_keys_old)
        return keys_each_old(s, keys, values, max, fn, arg);
    uint8_t kh[DK_INDICES];
    if (!keys || pyu_read_quiet(s, keys, kh, sizeof kh) < 0)
        return pyu_fail(&s->err, PYU_E_FAULT, "the keys of a dict at 0x%"
                        PRIx64 " cannot be read", keys);
    unsigned log2_size = kh[DK_LOG2_SIZE], log2_index = kh[DK_LOG2_INDEX_BYTES];
    unsigned kind = kh[DK_KIND];
    int64_t nentries = (int64_t)pyu_u64(kh, sizeof kh, DK_NENTRIES);
    if (log2_size > 40 || log2_index < log2_size || log2_index > log2_size + 3
        || kind > 2 || nentries < 0 || nentries > (1ll << log2_size))
        return pyu_fail(&s->err, PYU_E_CORRUPT, "the keys of a dict at 0x%"
                        PRIx64 " make no sense", keys);
    uint64_t entries = keys + DK_INDICES + (1ull << log2_index);
    size_t esize = kind == 0 ? 24 : 16, key_at = kind == 0 ? 8 : 0;
    if (!values) /* combined: the entries hold keys and values */
        return combined_each(s, keys, entries, nentries, esize, key_at, max,
                             fn, arg);
    /* split: values and their order in a PyDictValues */
    uint8_t head[DV_VALUES], order[256];
    uint64_t vals[256];
    if (split_values(s, values, nentries, head, order, vals) < 0)
        return pyu_fail(&s->err, PYU_E_FAULT, "the values of a dict at 0x%"
                        PRIx64 " cannot be read", values);
    for (size_t j = 0; j < head[1] && j < max; j++) {
        uint64_t key = 0;
        unsigned ix = order[j];
        if (ix >= head[0] || (int64_t)ix >= nentries || !vals[ix])
            continue;
        if (pyu_read_quiet(s, entries + ix * esize + key_at, &key, 8) < 0)
            return pyu_fail(&s->err, PYU_E_FAULT, "the keys of a dict at 0x%"
                            PRIx64 " cannot be read", keys);
        int rc = fn(arg, key, vals[ix]);
        if (rc)
            return rc;
    }
    return 0;
}

int pyu_dict_each(pyu_session *s, uint64_t dict, size_t max, pyu_item_fn fn,
                  void *arg, int64_t *used)
{
    const pyu_offsets *o = &s->off;
    uint64_t keys = 0, values = 0;
    *used = 0;
    pyu_range r[3] = {
        {dict + PYU_OFF(o, dict_ma_used), used, 8},
        {dict + PYU_OFF(o, dict_ma_keys), &keys, 8},
        {dict + PYU_OFF(o, dict_ma_values), &values, 8},
    };
    if (pyu_readv_quiet(s, r, 3) < 0)
        return pyu_fail(&s->err, PYU_E_FAULT, "the dict at 0x%" PRIx64
                        " cannot be read", dict);
    if (*used < 0 || !keys)
        return pyu_fail(&s->err, PYU_E_CORRUPT, "the dict at 0x%" PRIx64
                        " makes no sense", dict);
    return *used ? pyu_keys_each(s, keys, values, max, fn, arg) : 0;
}

typedef struct dict_acc {
    rw *w;
    size_t shown;
} dict_acc;

static int dict_take(void *arg, uint64_t key, uint64_t val)
{
    dict_acc *a = arg;
    puts_(a->w, a->shown ? ", " : "{");
    a->shown++;
    value(a->w, key);
    puts_(a->w, ": ");
    value(a->w, val);
    return a->shown >= PYU_REPR_ITEMS || a->w->full;
}

static void dict_value(rw *w, uint64_t obj)
{
    dict_acc a = {.w = w};
    int64_t used = 0;
    int rc = pyu_dict_each(w->s, obj, DICT_SCAN_MAX, dict_take, &a, &used);
    if (rc < 0 && !a.shown) {
        unreadable(w);
        return;
    }
    if (!a.shown) {
        puts_(w, used ? "{...}" : "{}");
        return;
    }
    if (rc < 0)
        puts_(w, ", <unreadable>");
    if ((int64_t)a.shown < used)
        puts_(w, ", ...");
    puts_(w, "}");
}

/* ------------------------------------------------------------- a value */

static void value(rw *w, uint64_t obj)
{
    pyu_session *s = w->s;
    uint64_t type_addr = 0;
    if (w->full)
        return;
    if (++w->reads > PYU_REPR_READS) {
        puts_(w, "...");
        w->full = true;
        return;
    }
    if (!obj || (obj & 7) ||
        pyu_read_quiet(s, obj + PYU_OFF(&s->off, ob_type), &type_addr, 8) <
            0) {
        unreadable(w);
        return;
    }
    const pyu_type *t = pyu_type_get(s, type_addr);
    if (!t) {
        unreadable(w);
        return;
    }
    enum pyu_type_kind kind = (enum pyu_type_kind)t->kind;
    switch (kind) {
    case PYU_TYPE_NONE: puts_(w, "None"); return;
    case PYU_TYPE_BOOL: int_value(w, obj, true); return;
    case PYU_TYPE_INT: int_value(w, obj, false); return;
    case PYU_TYPE_FLOAT: float_value(w, obj); return;
    case PYU_TYPE_STR: str_value(w, obj); return;
    case PYU_TYPE_BYTES: bytes_value(w, obj); return;
    case PYU_TYPE_TUPLE:
    case PYU_TYPE_LIST:
    case PYU_TYPE_DICT:
    case PYU_TYPE_SET:
    case PYU_TYPE_FROZENSET:
        break;
    default:
        putf(w, "<%s at 0x%" PRIx64 ">", t->name[0] ? t->name : "object",
             obj);
        return;
    }
    /* containers: [...] when nested too deep or inside themselves */
    bool again = w->depth == PYU_REPR_DEPTH;
    for (unsigned i = 0; i < w->depth && !again; i++)
        again = w->open[i] == obj;
    if (again) {
        puts_(w, kind == PYU_TYPE_LIST    ? "[...]"
                 : kind == PYU_TYPE_TUPLE ? "(...)"
                                          : "{...}");
        return;
    }
    w->open[w->depth++] = obj;
    if (kind == PYU_TYPE_TUPLE)
        tuple_value(w, obj);
    else if (kind == PYU_TYPE_LIST)
        list_value(w, obj);
    else if (kind == PYU_TYPE_DICT)
        dict_value(w, obj);
    else
        set_value(w, obj, kind == PYU_TYPE_FROZENSET);
    w->depth--;
}

void pyu_repr(pyu_session *s, uint64_t obj, char *out, size_t cap,
              char *type, size_t type_cap)
{
    rw w = {.s = s, .out = out, .cap = cap};
    out[0] = '\0';
    if (type && type_cap) {
        const pyu_type *t = NULL;
        uint64_t type_addr = 0;
        type[0] = '\0';
        if (obj && !(obj & 7) &&
            pyu_read_quiet(s, obj + PYU_OFF(&s->off, ob_type), &type_addr,
                           8) == 0 &&
            (t = pyu_type_get(s, type_addr)))
            snprintf(type, type_cap, "%s", t->name);
    }
    value(&w, obj);
}
