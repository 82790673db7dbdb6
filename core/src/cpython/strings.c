/* str objects of the target, as UTF-8, cached by address.
 *
 * Compact strings only (every name and file name CPython makes): the state
 * word gives the kind (1, 2 or 4 bytes per character) and whether it is
 * ASCII; ASCII data follows the PyASCIIObject header, other data the
 * PyCompactUnicodeObject header.
 */
#include "../internal.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

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

/* Decodes and caches the characters; NULL on error (record set). */
static const char *keep(pyu_session *s, uint64_t addr, const uint8_t *data,
                        int64_t length, int kind)
{
    size_t cap = (size_t)length * 4 + 1;
    char small[1024];
    char *text = cap <= sizeof small ? small : malloc(cap);
    const char *res = NULL;
    if (!text) {
        pyu_fail(&s->err, PYU_E_NOMEM, "out of memory");
        return NULL;
    }
    long n = pyu_ucs_to_utf8(data, (size_t)length, kind, text, cap);
    if (n < 0)
        pyu_fail(&s->err, PYU_E_CORRUPT,
                 "str at 0x%" PRIx64 " cannot be decoded", addr);
    else if (!(res = pyu_strtab_put(s->strings, addr, text, (size_t)n)))
        pyu_fail(&s->err, PYU_E_NOMEM, "out of memory");
    if (text != small)
        free(text);
    return res;
}

/* What a str's header says. */
typedef struct str_head {
    int64_t length; /* characters */
    int kind;       /* bytes per character */
    size_t data_at; /* offset of the characters from the object */
    size_t have;    /* bytes of the object in the caller's buffer */
} str_head;

/* Reads the header of the str at addr and, usually, its first characters
 * into buf (PYU_BUF_STR_HEADER + PYU_STR_PEEK bytes).  Returns 0, or -1
 * with the record set. */
static int read_head(pyu_session *s, uint64_t addr, uint8_t *buf,
                     str_head *h)
{
    const pyu_offsets *o = &s->off;
    if (addr == 0 || (addr & 7)) {
        pyu_fail(&s->err, PYU_E_CORRUPT, "string pointer 0x%" PRIx64
                 " is invalid", addr);
        return -1;
    }
    size_t hdr = (size_t)PYU_OFF(o, str_compact_size);
    h->have = hdr + PYU_STR_PEEK;
    if (pyu_read_quiet(s, addr, buf, h->have) < 0) {
        h->have = hdr; /* near the end of a mapping: the header alone */
        if (pyu_read(s, addr, buf, h->have, "a string object") < 0)
            return -1;
    }
    uint32_t state = pyu_u32(buf, h->have, PYU_OFF(o, str_state));
    h->length = (int64_t)pyu_u64(buf, h->have, PYU_OFF(o, str_length));
    unsigned sh = o->str_kind_shift;
    h->kind = (int)((state >> sh) & 7);
    bool compact = (state >> (sh + 3)) & 1;
    bool ascii = (state >> (sh + 4)) & 1;
    if (!compact || (h->kind != 1 && h->kind != 2 && h->kind != 4) ||
        (ascii && h->kind != 1) || h->length < 0 ||
        h->length > (int64_t)1 << 40) {
        pyu_fail(&s->err, PYU_E_CORRUPT,
                 "object at 0x%" PRIx64
                 " is not a readable str (state 0x%x, length %" PRId64 ")",
                 addr, state, h->length);
        return -1;
    }
    h->data_at = ascii ? (size_t)PYU_OFF(o, str_ascii_size) : hdr;
    return 0;
}

const char *pyu_str_read(pyu_session *s, uint64_t addr)
{
    if (!s->strings && !(s->strings = pyu_strtab_new())) {
        pyu_fail(&s->err, PYU_E_NOMEM, "out of memory");
        return NULL;
    }
    const char *hit = pyu_strtab_get(s->strings, addr);
    if (hit)
        return hit;
    uint8_t buf[PYU_BUF_STR_HEADER + PYU_STR_PEEK];
    str_head h;
    if (read_head(s, addr, buf, &h) < 0)
        return NULL;
    if (h.length > PYU_MAX_STRING) {
        pyu_fail(&s->err, PYU_E_CORRUPT,
                 "str at 0x%" PRIx64 " is too long for a name (%" PRId64
                 " characters)", addr, h.length);
        return NULL;
    }
    size_t nbytes = (size_t)h.length * (size_t)h.kind;
    if (h.data_at + nbytes <= h.have)
        return keep(s, addr, buf + h.data_at, h.length, h.kind);
    uint8_t *heap = malloc(nbytes ? nbytes : 1);
    if (!heap) {
        pyu_fail(&s->err, PYU_E_NOMEM, "out of memory");
        return NULL;
    }
    const char *res = NULL;
    if (pyu_read(s, addr + h.data_at, heap, nbytes, "string data") == 0)
        res = keep(s, addr, heap, h.length, h.kind);
    free(heap);
    return res;
}

long pyu_str_peek(pyu_session *s, uint64_t addr, uint32_t *cp, size_t max,
                  int64_t *length)
{
    uint8_t buf[PYU_BUF_STR_HEADER + PYU_STR_PEEK];
    str_head h;
    if (read_head(s, addr, buf, &h) < 0)
        return -1;
    *length = h.length;
    size_t n = (uint64_t)h.length < max ? (size_t)h.length : max;
    size_t nbytes = n * (size_t)h.kind;
    const uint8_t *data = buf + h.data_at;
    uint8_t *heap = NULL;
    if (h.data_at + nbytes > h.have) {
        if (!(heap = malloc(nbytes))) {
            pyu_fail(&s->err, PYU_E_NOMEM, "out of memory");
            return -1;
        }
        if (pyu_read(s, addr + h.data_at, heap, nbytes, "string data") < 0) {
            free(heap);
            return -1;
        }
        data = heap;
    }
    for (size_t i = 0; i < n; i++) {
        if (h.kind == 1) {
            cp[i] = data[i];
        } else if (h.kind == 2) {
            uint16_t u;
            memcpy(&u, data + 2 * i, 2);
            cp[i] = u;
        } else {
            memcpy(&cp[i], data + 4 * i, 4);
        }
    }
    free(heap);
    return (long)n;
}

void pyu_strings_flush(pyu_session *s)
{
    pyu_strtab_free(s->strings);
    s->strings = NULL; /* made again when needed */
}

void pyu_strings_free(pyu_session *s)
{
    pyu_strings_flush(s);
}
