/* CPython 3.11+ location tables (co_linetable): which source line each
 * code unit of a code object's bytecode comes from. */
#include "../internal.h"

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

/* Where instruction `index` comes from in the source: as
 * code.co_positions() reports it (lines 1-based, columns 0-based UTF-8
 * byte offsets; -1 and end_line 0 where the table has none).  Each entry
 * covers `length` code units and moves the line by its delta; the
 * instruction's entry is the one whose units hold it. */
int pyu_linetable_position(const uint8_t *t, size_t len, int first_line,
                           uint64_t index, pyu_position *out)
{
    int64_t line = first_line;
    uint64_t addr = 0;
    size_t i = 0;
    while (i < len) {
        uint8_t b = t[i++];
        if (!(b & 0x80))
            return -1;
        int code = (b >> 3) & 15;
        uint64_t length = (uint64_t)(b & 7) + 1, v;
        int64_t delta = 0, end_line = -1, col = -1, end_col = -1;
        bool no_line = false;
        switch (code) {
        case 15:
            no_line = true;
            break;
        case 14: /* long: line delta, end line delta, columns + 1 */
            if (!read_svarint(t, len, &i, &delta) ||
                !read_varint(t, len, &i, &v))
                return -1;
            end_line = (int64_t)v;
            if (!read_varint(t, len, &i, &v))
                return -1;
            col = (int64_t)v - 1;
            if (!read_varint(t, len, &i, &v))
                return -1;
            end_col = (int64_t)v - 1;
            break;
        case 13: /* no columns */
            if (!read_svarint(t, len, &i, &delta))
                return -1;
            end_line = 0;
            break;
        case 10:
        case 11:
        case 12: /* one line: columns in a byte each */
            if (i + 2 > len)
                return -1;
            delta = code - 10;
            end_line = 0;
            col = t[i];
            end_col = t[i + 1];
            i += 2;
            break;
        default: /* short: same line, columns packed in one byte */
            if (i + 1 > len)
                return -1;
            end_line = 0;
            col = code * 8 + ((t[i] >> 4) & 7);
            end_col = col + (t[i] & 15);
            i += 1;
            break;
        }
        line += delta;
        if (index < addr + length) {
            *out = (pyu_position){.line = 0, .end_line = 0, .col = -1,
                                  .end_col = -1};
            if (no_line || line <= 0 || line > INT32_MAX)
                return 0;
            out->line = (int)line;
            int64_t el = line + (end_line > 0 ? end_line : 0);
            out->end_line = el <= INT32_MAX ? (int)el : 0;
            if (col >= 0 && end_col >= 0 && col <= INT32_MAX &&
                end_col <= INT32_MAX) {
                out->col = (int)col;
                out->end_col = (int)end_col;
            }
            return 0;
        }
        addr += length;
    }
    return -1;
}

int pyu_linetable_line(const uint8_t *t, size_t len, int first_line,
                       uint64_t index)
{
    pyu_position p;
    return pyu_linetable_position(t, len, first_line, index, &p) < 0
               ? -1
               : p.line;
}

/* Before 3.11, pairs of bytes: how far the bytecode goes (unsigned, in
 * bytes) and how far the line goes (signed).  3.10's co_linetable gives
 * each pair a range of bytecode and the line it runs (-128: none),
 * carried on by the line deltas before it; 3.9's co_lnotab steps the line
 * once the bytecode has gone past an address.  The line of code unit
 * `index` (byte 2 * index), -1 for none. */
int pyu_linetable_line_old(const uint8_t *t, size_t len, int first_line,
                           uint64_t index, int kind)
{
    if (index > (uint64_t)INT32_MAX / 2)
        return -1;
    int64_t at = 2 * (int64_t)index, addr = 0, line = first_line;
    size_t n = len / 2;
    if (kind == PYU_LINES_LNOTAB) {
        for (size_t i = 0; i < n; i++) {
            addr += t[2 * i];
            if (addr > at)
                break;
            line += (int8_t)t[2 * i + 1];
        }
        return line >= 0 && line <= INT32_MAX ? (int)line : -1;
    }
    for (size_t i = 0; i < n; i++) {
        int64_t end = addr + t[2 * i];
        int8_t dl = (int8_t)t[2 * i + 1];
        int64_t here = dl == -128 ? -1 : (line += dl);
        if (at >= addr && at < end)
            return here >= 0 && here <= INT32_MAX ? (int)here : -1;
        addr = end;
    }
    return -1;
}
