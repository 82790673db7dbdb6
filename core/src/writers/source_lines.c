/* A frame's source lines and carets, written as CPython's traceback module
 * writes them under a frame's '  File "...", line N, in F' line
 * (StackSummary.format_frame_summary without colour and locals).
 *
 * Users compare what we print with what Python printed, quirks included,
 * so this follows each version's algorithm step by step, on the same
 * strings: lines as linecache gives them, code points as Python's str
 * counts them, the splitting, stripping and dedenting of str and
 * textwrap.  Two families:
 *   - 3.11 (and 3.12): the stripped line; carets from a character-offset
 *     computation that counts the line's newline and trailing spaces as
 *     stripped indentation; anchors ('~' and '^') for a one-line BinOp or
 *     Subscript only.
 *   - 3.13 and later: every line of the span, dedented, the middle of long
 *     spans elided; anchors for BinOp, Subscript and Call also across
 *     lines; no carets when they would underline a whole line, or when
 *     the line is "x = call(...)" or "return name(...)"; display width
 *     of wide characters.  3.14 dedents with another algorithm (blank
 *     lines are any whitespace) and refuses a NUL in a file's first
 *     lines; 3.15 also counts combining and format characters 0 wide.
 * CPython finds the anchors with ast.parse; pyexpr.c stands in for it (a
 * small tokenizer and a recursive-descent parser of Python expressions
 * that give the same node positions, and say "does not parse" where
 * CPython would raise), and holds the Unicode facts and str operations
 * this file shares with it.
 *
 * Not followed: files in encodings other than UTF-8, Latin-1 and ASCII
 * (nothing is written for them), and what pyexpr.c says it does not
 * follow (identifiers, deep nesting).
 *
 * Everything in the text is untrusted: every loop is bounded by the
 * text's length, recursion by a depth limit, and where CPython would
 * raise out of the formatting we write nothing. */
#include "../internal.h"
#include "pyexpr.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* ======================================================== Unicode facts */

/* unicodedata.east_asian_width(c) in ('W', 'F'), for Python 3.13
 * (Unicode 15.1), 3.14 (16.0) and 3.15 (17.0): later versions only added
 * ranges.  Made with each interpreter's unicodedata, merged. */
static const urange wide[] = {
    {0x1100, 0x115F, 13}, {0x231A, 0x231B, 13}, {0x2329, 0x232A, 13},
    {0x23E9, 0x23EC, 13}, {0x23F0, 0x23F0, 13}, {0x23F3, 0x23F3, 13},
    {0x25FD, 0x25FE, 13}, {0x2614, 0x2615, 13}, {0x2630, 0x2637, 14},
    {0x2648, 0x2653, 13}, {0x267F, 0x267F, 13}, {0x268A, 0x268F, 14},
    {0x2693, 0x2693, 13}, {0x26A1, 0x26A1, 13}, {0x26AA, 0x26AB, 13},
    {0x26BD, 0x26BE, 13}, {0x26C4, 0x26C5, 13}, {0x26CE, 0x26CE, 13},
    {0x26D4, 0x26D4, 13}, {0x26EA, 0x26EA, 13}, {0x26F2, 0x26F3, 13},
    {0x26F5, 0x26F5, 13}, {0x26FA, 0x26FA, 13}, {0x26FD, 0x26FD, 13},
    {0x2705, 0x2705, 13}, {0x270A, 0x270B, 13}, {0x2728, 0x2728, 13},
    {0x274C, 0x274C, 13}, {0x274E, 0x274E, 13}, {0x2753, 0x2755, 13},
    {0x2757, 0x2757, 13}, {0x2795, 0x2797, 13}, {0x27B0, 0x27B0, 13},
    {0x27BF, 0x27BF, 13}, {0x2B1B, 0x2B1C, 13}, {0x2B50, 0x2B50, 13},
    {0x2B55, 0x2B55, 13}, {0x2E80, 0x2E99, 13}, {0x2E9B, 0x2EF3, 13},
    {0x2F00, 0x2FD5, 13}, {0x2FF0, 0x303E, 13}, {0x3041, 0x3096, 13},
    {0x3099, 0x30FF, 13}, {0x3105, 0x312F, 13}, {0x3131, 0x318E, 13},
    {0x3190, 0x31E3, 13}, {0x31E4, 0x31E5, 14}, {0x31EF, 0x321E, 13},
    {0x3220, 0x3247, 13}, {0x3250, 0x4DBF, 13}, {0x4DC0, 0x4DFF, 14},
    {0x4E00, 0xA48C, 13}, {0xA490, 0xA4C6, 13}, {0xA960, 0xA97C, 13},
    {0xAC00, 0xD7A3, 13}, {0xF900, 0xFAFF, 13}, {0xFE10, 0xFE19, 13},
    {0xFE30, 0xFE52, 13}, {0xFE54, 0xFE66, 13}, {0xFE68, 0xFE6B, 13},
    {0xFF01, 0xFF60, 13}, {0xFFE0, 0xFFE6, 13}, {0x16FE0, 0x16FE4, 13},
    {0x16FF0, 0x16FF1, 13}, {0x16FF2, 0x16FF6, 15}, {0x17000, 0x187F7, 13},
    {0x187F8, 0x187FF, 15}, {0x18800, 0x18CD5, 13}, {0x18CFF, 0x18CFF, 14},
    {0x18D00, 0x18D08, 13}, {0x18D09, 0x18D1E, 15}, {0x18D80, 0x18DF2, 15},
    {0x1AFF0, 0x1AFF3, 13}, {0x1AFF5, 0x1AFFB, 13}, {0x1AFFD, 0x1AFFE, 13},
    {0x1B000, 0x1B122, 13}, {0x1B132, 0x1B132, 13}, {0x1B150, 0x1B152, 13},
    {0x1B155, 0x1B155, 13}, {0x1B164, 0x1B167, 13}, {0x1B170, 0x1B2FB, 13},
    {0x1D300, 0x1D356, 14}, {0x1D360, 0x1D376, 14}, {0x1F004, 0x1F004, 13},
    {0x1F0CF, 0x1F0CF, 13}, {0x1F18E, 0x1F18E, 13}, {0x1F191, 0x1F19A, 13},
    {0x1F200, 0x1F202, 13}, {0x1F210, 0x1F23B, 13}, {0x1F240, 0x1F248, 13},
    {0x1F250, 0x1F251, 13}, {0x1F260, 0x1F265, 13}, {0x1F300, 0x1F320, 13},
    {0x1F32D, 0x1F335, 13}, {0x1F337, 0x1F37C, 13}, {0x1F37E, 0x1F393, 13},
    {0x1F3A0, 0x1F3CA, 13}, {0x1F3CF, 0x1F3D3, 13}, {0x1F3E0, 0x1F3F0, 13},
    {0x1F3F4, 0x1F3F4, 13}, {0x1F3F8, 0x1F43E, 13}, {0x1F440, 0x1F440, 13},
    {0x1F442, 0x1F4FC, 13}, {0x1F4FF, 0x1F53D, 13}, {0x1F54B, 0x1F54E, 13},
    {0x1F550, 0x1F567, 13}, {0x1F57A, 0x1F57A, 13}, {0x1F595, 0x1F596, 13},
    {0x1F5A4, 0x1F5A4, 13}, {0x1F5FB, 0x1F64F, 13}, {0x1F680, 0x1F6C5, 13},
    {0x1F6CC, 0x1F6CC, 13}, {0x1F6D0, 0x1F6D2, 13}, {0x1F6D5, 0x1F6D7, 13},
    {0x1F6D8, 0x1F6D8, 15}, {0x1F6DC, 0x1F6DF, 13}, {0x1F6EB, 0x1F6EC, 13},
    {0x1F6F4, 0x1F6FC, 13}, {0x1F7E0, 0x1F7EB, 13}, {0x1F7F0, 0x1F7F0, 13},
    {0x1F90C, 0x1F93A, 13}, {0x1F93C, 0x1F945, 13}, {0x1F947, 0x1F9FF, 13},
    {0x1FA70, 0x1FA7C, 13}, {0x1FA80, 0x1FA88, 13}, {0x1FA89, 0x1FA89, 14},
    {0x1FA8A, 0x1FA8A, 15}, {0x1FA8E, 0x1FA8E, 15}, {0x1FA8F, 0x1FA8F, 14},
    {0x1FA90, 0x1FABD, 13}, {0x1FABE, 0x1FABE, 14}, {0x1FABF, 0x1FAC5, 13},
    {0x1FAC6, 0x1FAC6, 14}, {0x1FAC8, 0x1FAC8, 15}, {0x1FACD, 0x1FACD, 15},
    {0x1FACE, 0x1FADB, 13}, {0x1FADC, 0x1FADC, 14}, {0x1FADF, 0x1FADF, 14},
    {0x1FAE0, 0x1FAE8, 13}, {0x1FAE9, 0x1FAE9, 14}, {0x1FAEA, 0x1FAEA, 15},
    {0x1FAEF, 0x1FAEF, 15}, {0x1FAF0, 0x1FAF8, 13}, {0x20000, 0x2FFFD, 13},
    {0x30000, 0x3FFFD, 13},
};

/* Width 0 for 3.15's traceback (_str_width): above ASCII, a combining
 * character (unicodedata.combining(c) != 0) or a format character
 * (category Cf) other than U+00AD.  Unicode 17.0, from 3.15's
 * unicodedata. */
static const urange zero_width[] = {
    {0x0300, 0x034E, 15}, {0x0350, 0x036F, 15}, {0x0483, 0x0487, 15},
    {0x0591, 0x05BD, 15}, {0x05BF, 0x05BF, 15}, {0x05C1, 0x05C2, 15},
    {0x05C4, 0x05C5, 15}, {0x05C7, 0x05C7, 15}, {0x0600, 0x0605, 15},
    {0x0610, 0x061A, 15}, {0x061C, 0x061C, 15}, {0x064B, 0x065F, 15},
    {0x0670, 0x0670, 15}, {0x06D6, 0x06DD, 15}, {0x06DF, 0x06E4, 15},
    {0x06E7, 0x06E8, 15}, {0x06EA, 0x06ED, 15}, {0x070F, 0x070F, 15},
    {0x0711, 0x0711, 15}, {0x0730, 0x074A, 15}, {0x07EB, 0x07F3, 15},
    {0x07FD, 0x07FD, 15}, {0x0816, 0x0819, 15}, {0x081B, 0x0823, 15},
    {0x0825, 0x0827, 15}, {0x0829, 0x082D, 15}, {0x0859, 0x085B, 15},
    {0x0890, 0x0891, 15}, {0x0897, 0x089F, 15}, {0x08CA, 0x08FF, 15},
    {0x093C, 0x093C, 15}, {0x094D, 0x094D, 15}, {0x0951, 0x0954, 15},
    {0x09BC, 0x09BC, 15}, {0x09CD, 0x09CD, 15}, {0x09FE, 0x09FE, 15},
    {0x0A3C, 0x0A3C, 15}, {0x0A4D, 0x0A4D, 15}, {0x0ABC, 0x0ABC, 15},
    {0x0ACD, 0x0ACD, 15}, {0x0B3C, 0x0B3C, 15}, {0x0B4D, 0x0B4D, 15},
    {0x0BCD, 0x0BCD, 15}, {0x0C3C, 0x0C3C, 15}, {0x0C4D, 0x0C4D, 15},
    {0x0C55, 0x0C56, 15}, {0x0CBC, 0x0CBC, 15}, {0x0CCD, 0x0CCD, 15},
    {0x0D3B, 0x0D3C, 15}, {0x0D4D, 0x0D4D, 15}, {0x0DCA, 0x0DCA, 15},
    {0x0E38, 0x0E3A, 15}, {0x0E48, 0x0E4B, 15}, {0x0EB8, 0x0EBA, 15},
    {0x0EC8, 0x0ECB, 15}, {0x0F18, 0x0F19, 15}, {0x0F35, 0x0F35, 15},
    {0x0F37, 0x0F37, 15}, {0x0F39, 0x0F39, 15}, {0x0F71, 0x0F72, 15},
    {0x0F74, 0x0F74, 15}, {0x0F7A, 0x0F7D, 15}, {0x0F80, 0x0F80, 15},
    {0x0F82, 0x0F84, 15}, {0x0F86, 0x0F87, 15}, {0x0FC6, 0x0FC6, 15},
    {0x1037, 0x1037, 15}, {0x1039, 0x103A, 15}, {0x108D, 0x108D, 15},
    {0x135D, 0x135F, 15}, {0x1714, 0x1715, 15}, {0x1734, 0x1734, 15},
    {0x17D2, 0x17D2, 15}, {0x17DD, 0x17DD, 15}, {0x180E, 0x180E, 15},
    {0x18A9, 0x18A9, 15}, {0x1939, 0x193B, 15}, {0x1A17, 0x1A18, 15},
    {0x1A60, 0x1A60, 15}, {0x1A75, 0x1A7C, 15}, {0x1A7F, 0x1A7F, 15},
    {0x1AB0, 0x1ABD, 15}, {0x1ABF, 0x1ADD, 15}, {0x1AE0, 0x1AEB, 15},
    {0x1B34, 0x1B34, 15}, {0x1B44, 0x1B44, 15}, {0x1B6B, 0x1B73, 15},
    {0x1BAA, 0x1BAB, 15}, {0x1BE6, 0x1BE6, 15}, {0x1BF2, 0x1BF3, 15},
    {0x1C37, 0x1C37, 15}, {0x1CD0, 0x1CD2, 15}, {0x1CD4, 0x1CE0, 15},
    {0x1CE2, 0x1CE8, 15}, {0x1CED, 0x1CED, 15}, {0x1CF4, 0x1CF4, 15},
    {0x1CF8, 0x1CF9, 15}, {0x1DC0, 0x1DFF, 15}, {0x200B, 0x200F, 15},
    {0x202A, 0x202E, 15}, {0x2060, 0x2064, 15}, {0x2066, 0x206F, 15},
    {0x20D0, 0x20DC, 15}, {0x20E1, 0x20E1, 15}, {0x20E5, 0x20F0, 15},
    {0x2CEF, 0x2CF1, 15}, {0x2D7F, 0x2D7F, 15}, {0x2DE0, 0x2DFF, 15},
    {0x302A, 0x302F, 15}, {0x3099, 0x309A, 15}, {0xA66F, 0xA66F, 15},
    {0xA674, 0xA67D, 15}, {0xA69E, 0xA69F, 15}, {0xA6F0, 0xA6F1, 15},
    {0xA806, 0xA806, 15}, {0xA82C, 0xA82C, 15}, {0xA8C4, 0xA8C4, 15},
    {0xA8E0, 0xA8F1, 15}, {0xA92B, 0xA92D, 15}, {0xA953, 0xA953, 15},
    {0xA9B3, 0xA9B3, 15}, {0xA9C0, 0xA9C0, 15}, {0xAAB0, 0xAAB0, 15},
    {0xAAB2, 0xAAB4, 15}, {0xAAB7, 0xAAB8, 15}, {0xAABE, 0xAABF, 15},
    {0xAAC1, 0xAAC1, 15}, {0xAAF6, 0xAAF6, 15}, {0xABED, 0xABED, 15},
    {0xFB1E, 0xFB1E, 15}, {0xFE20, 0xFE2F, 15}, {0xFEFF, 0xFEFF, 15},
    {0xFFF9, 0xFFFB, 15}, {0x101FD, 0x101FD, 15}, {0x102E0, 0x102E0, 15},
    {0x10376, 0x1037A, 15}, {0x10A0D, 0x10A0D, 15}, {0x10A0F, 0x10A0F, 15},
    {0x10A38, 0x10A3A, 15}, {0x10A3F, 0x10A3F, 15}, {0x10AE5, 0x10AE6, 15},
    {0x10D24, 0x10D27, 15}, {0x10D69, 0x10D6D, 15}, {0x10EAB, 0x10EAC, 15},
    {0x10EFA, 0x10EFB, 15}, {0x10EFD, 0x10EFF, 15}, {0x10F46, 0x10F50, 15},
    {0x10F82, 0x10F85, 15}, {0x11046, 0x11046, 15}, {0x11070, 0x11070, 15},
    {0x1107F, 0x1107F, 15}, {0x110B9, 0x110BA, 15}, {0x110BD, 0x110BD, 15},
    {0x110CD, 0x110CD, 15}, {0x11100, 0x11102, 15}, {0x11133, 0x11134, 15},
    {0x11173, 0x11173, 15}, {0x111C0, 0x111C0, 15}, {0x111CA, 0x111CA, 15},
    {0x11235, 0x11236, 15}, {0x112E9, 0x112EA, 15}, {0x1133B, 0x1133C, 15},
    {0x1134D, 0x1134D, 15}, {0x11366, 0x1136C, 15}, {0x11370, 0x11374, 15},
    {0x113CE, 0x113D0, 15}, {0x11442, 0x11442, 15}, {0x11446, 0x11446, 15},
    {0x1145E, 0x1145E, 15}, {0x114C2, 0x114C3, 15}, {0x115BF, 0x115C0, 15},
    {0x1163F, 0x1163F, 15}, {0x116B6, 0x116B7, 15}, {0x1172B, 0x1172B, 15},
    {0x11839, 0x1183A, 15}, {0x1193D, 0x1193E, 15}, {0x11943, 0x11943, 15},
    {0x119E0, 0x119E0, 15}, {0x11A34, 0x11A34, 15}, {0x11A47, 0x11A47, 15},
    {0x11A99, 0x11A99, 15}, {0x11C3F, 0x11C3F, 15}, {0x11D42, 0x11D42, 15},
    {0x11D44, 0x11D45, 15}, {0x11D97, 0x11D97, 15}, {0x11F41, 0x11F42, 15},
    {0x13430, 0x1343F, 15}, {0x1612F, 0x1612F, 15}, {0x16AF0, 0x16AF4, 15},
    {0x16B30, 0x16B36, 15}, {0x16FF0, 0x16FF1, 15}, {0x1BC9E, 0x1BC9E, 15},
    {0x1BCA0, 0x1BCA3, 15}, {0x1D165, 0x1D169, 15}, {0x1D16D, 0x1D182, 15},
    {0x1D185, 0x1D18B, 15}, {0x1D1AA, 0x1D1AD, 15}, {0x1D242, 0x1D244, 15},
    {0x1E000, 0x1E006, 15}, {0x1E008, 0x1E018, 15}, {0x1E01B, 0x1E021, 15},
    {0x1E023, 0x1E024, 15}, {0x1E026, 0x1E02A, 15}, {0x1E08F, 0x1E08F, 15},
    {0x1E130, 0x1E136, 15}, {0x1E2AE, 0x1E2AE, 15}, {0x1E2EC, 0x1E2EF, 15},
    {0x1E4EC, 0x1E4EF, 15}, {0x1E5EE, 0x1E5EF, 15}, {0x1E6E3, 0x1E6E3, 15},
    {0x1E6E6, 0x1E6E6, 15}, {0x1E6EE, 0x1E6EF, 15}, {0x1E6F5, 0x1E6F5, 15},
    {0x1E8D0, 0x1E8D6, 15}, {0x1E944, 0x1E94A, 15}, {0xE0001, 0xE0001, 15},
    {0xE0020, 0xE007F, 15},
};

/* 3.13 and 3.14: 2 columns for a wide character, else 1. */
static long u_width313(uint32_t c, int minor)
{
    return c >= 0x1100 && pyu_u_in(wide, COUNT(wide), c, minor) ? 2 : 1;
}

/* 3.15's _str_width: ASCII 1, combining and format characters 0, wide 2,
 * else 1. */
static long u_width315(uint32_t c)
{
    if (c < 0x80)
        return 1;
    if (pyu_u_in(zero_width, COUNT(zero_width), c, 15))
        return 0;
    return pyu_u_in(wide, COUNT(wide), c, 15) ? 2 : 1;
}

/* ============================================================== strings */

static void us_addc(sl *c, ustr *s, uint32_t ch, long times)
{
    if (times > 0 && pyu_us_room(c, s, (size_t)times))
        for (long i = 0; i < times; i++)
            s->p[s->n++] = ch;
}

static size_t uv_rspace(uv s)
{
    size_t i = 0;
    while (i < s.n && pyu_u_isspace(s.p[s.n - 1 - i]))
        i++;
    return i;
}

static uv uv_lstrip(uv s)
{
    size_t k = pyu_uv_lspace(s);
    return pyu_uv_at(s.p, k, s.n - k);
}

static uv uv_rstrip(uv s)
{
    return (uv){s.p, s.n - uv_rspace(s)};
}

static uv uv_strip(uv s)
{
    return uv_rstrip(uv_lstrip(s));
}

/* str.isspace(): not empty, and all whitespace. */
static bool uv_isspace(uv s)
{
    return s.n > 0 && pyu_uv_lspace(s) == s.n;
}

static bool uv_isascii(uv s)
{
    for (size_t i = 0; i < s.n; i++)
        if (s.p[i] >= 0x80)
            return false;
    return true;
}

/* Python's comparison of two str (by code point). */
static int uv_cmp(uv a, uv b)
{
    size_t n = a.n < b.n ? a.n : b.n;
    for (size_t i = 0; i < n; i++)
        if (a.p[i] != b.p[i])
            return a.p[i] < b.p[i] ? -1 : 1;
    return a.n < b.n ? -1 : a.n > b.n ? 1 : 0;
}

/* str.split('\n') */
static void uv_split_nl(sl *c, uv s, uvlist *out)
{
    size_t start = 0;
    for (size_t i = 0; i <= s.n; i++)
        if (i == s.n || s.p[i] == '\n') {
            pyu_ul_add(c, out, pyu_uv_at(s.p, start, i - start));
            start = i + 1;
        }
}

/* '\n'.join(l[from:to]) appended to out */
static void ul_join_nl(sl *c, const uvlist *l, size_t from, size_t to,
                       ustr *out)
{
    for (size_t i = from; i < to && i < l->n; i++) {
        if (i > from)
            us_addc(c, out, '\n', 1);
        pyu_us_add(c, out, l->v[i]);
    }
}

/* --------------------------------------------------- textwrap.dedent */

/* 3.13's dedent (regular expressions): lines of only spaces and tabs
 * become empty; the margin is the longest common prefix of the other
 * lines' leading spaces and tabs ("line" meaning between '\n's); it is
 * removed where a line starts with it. */
static void dedent313(sl *c, uv text, ustr *out)
{
    uvlist lines = {0};
    uv_split_nl(c, text, &lines);
    uv margin = {NULL, 0};
    bool have = false;
    for (size_t i = 0; i < lines.n; i++) {
        uv l = lines.v[i];
        size_t k = 0;
        while (k < l.n && (l.p[k] == ' ' || l.p[k] == '\t'))
            k++;
        if (k == l.n) /* empty, or spaces and tabs only */
            continue;
        if (!have) {
            margin = (uv){l.p, k};
            have = true;
            continue;
        }
        size_t j = 0;
        while (j < margin.n && j < k && margin.p[j] == l.p[j])
            j++;
        margin.n = j;
    }
    for (size_t i = 0; i < lines.n; i++) {
        uv l = lines.v[i];
        if (i)
            us_addc(c, out, '\n', 1);
        size_t k = 0;
        while (k < l.n && (l.p[k] == ' ' || l.p[k] == '\t'))
            k++;
        if (k == l.n)
            continue;
        if (margin.n && l.n >= margin.n &&
            !memcmp(l.p, margin.p, margin.n * sizeof *l.p))
            l = pyu_uv_slice(l, (long)margin.n, (long)l.n);
        pyu_us_add(c, out, l);
    }
    pyu_ul_free(&lines);
}

/* 3.14's dedent: the margin is where the smallest and the largest
 * non-blank line first differ or stop being spaces and tabs; blank
 * lines (str.isspace) become empty, the others lose margin characters. */
static void dedent314(sl *c, uv text, ustr *out)
{
    uvlist lines = {0};
    uv_split_nl(c, text, &lines);
    uv l1 = {NULL, 0}, l2 = {NULL, 0};
    bool have = false;
    for (size_t i = 0; i < lines.n; i++) {
        uv l = lines.v[i];
        if (!l.n || uv_isspace(l))
            continue;
        if (!have || uv_cmp(l, l1) < 0)
            l1 = l;
        if (!have || uv_cmp(l, l2) > 0)
            l2 = l;
        have = true;
    }
    size_t margin = 0;
    for (size_t m = 0; m < l1.n; m++) {
        margin = m;
        if (m >= l2.n || l1.p[m] != l2.p[m] ||
            (l1.p[m] != ' ' && l1.p[m] != '\t'))
            break;
    }
    for (size_t i = 0; i < lines.n; i++) {
        if (i)
            us_addc(c, out, '\n', 1);
        uv l = lines.v[i];
        if (!uv_isspace(l))
            pyu_us_add(c, out, pyu_uv_slice(l, (long)margin, (long)l.n));
    }
    pyu_ul_free(&lines);
}

static void dedent(sl *c, uv text, ustr *out)
{
    if (c->minor >= 14)
        dedent314(c, text, out);
    else
        dedent313(c, text, out);
}

/* textwrap.indent(text, prefix): every piece of text.splitlines(True)
 * gets prefix, or (all false) those that are not whitespace only. */
static void indent(sl *c, uv text, const char *prefix, bool all, ustr *out)
{
    uvlist pieces = {0};
    pyu_uv_splitlines(c, text, true, &pieces);
    for (size_t i = 0; i < pieces.n; i++) {
        if (all || !uv_isspace(pieces.v[i]))
            pyu_us_adda(c, out, prefix);
        pyu_us_add(c, out, pieces.v[i]);
    }
    pyu_ul_free(&pieces);
}

/* ------------------------------------------------- _display_width */

/* 3.15's _wlen: the sum of the characters' widths, where an ANSI escape
 * sequence (\x1b[ ... final byte) counts 0 and \x1a counts 2. */
static long wlen315(uv s)
{
    long w = 0;
    for (size_t i = 0; i < s.n; i++) {
        if (s.p[i] == 0x1b && i + 1 < s.n && s.p[i + 1] == '[') {
            size_t j = i + 2;
            while (j < s.n && s.p[j] >= 0x20 && s.p[j] <= 0x40)
                j++;
            if (j < s.n && s.p[j] >= 0x41 && s.p[j] <= 0x7e) {
                i = j;
                continue;
            }
        }
        w += s.p[i] == 0x1a ? 2 : u_width315(s.p[i]);
    }
    return w;
}

/* _display_width(line, offset): the columns line[:offset] takes (offset
 * < 0: None, the whole line).  3.13 and 3.14 take the offset itself for
 * an ASCII line, even past its end. */
static long display_width(const sl *c, uv line, long offset)
{
    if (c->minor >= 15)
        return wlen315(offset < 0 ? line : pyu_uv_slice(line, 0, offset));
    if (offset < 0)
        offset = (long)line.n;
    if (uv_isascii(line))
        return offset;
    uv s = pyu_uv_slice(line, 0, offset);
    long w = 0;
    for (size_t i = 0; i < s.n; i++)
        w += u_width313(s.p[i], c->minor);
    return w;
}

/* ============================================================ the file */

/* The file as linecache reads it (tokenize.open: the encoding from a BOM
 * or a PEP 263 cookie, then universal newlines).  We decode UTF-8,
 * Latin-1 and ASCII; a file in another encoding, or not valid in its
 * own, gives no lines (CPython shows no line when it cannot decode). */
enum { ENC_UTF8, ENC_LATIN1, ENC_ASCII };

typedef struct src {
    const unsigned char *b; /* borrowed: the text after any BOM */
    size_t n;
    int enc;
} src;

/* The length of the valid UTF-8 sequence at b[0..n), 0 when invalid
 * (Python's strict decoder: no overlong forms, surrogates, or code
 * points past U+10FFFF). */
static size_t utf8_seq(const unsigned char *b, size_t n, uint32_t *cp)
{
    unsigned char c = b[0];
    if (c < 0x80) {
        *cp = c;
        return 1;
    }
    size_t len;
    uint32_t v, min;
    if (c >= 0xc2 && c <= 0xdf) {
        len = 2, v = c & 0x1f, min = 0x80;
    } else if (c >= 0xe0 && c <= 0xef) {
        len = 3, v = c & 0x0f, min = 0x800;
    } else if (c >= 0xf0 && c <= 0xf4) {
        len = 4, v = c & 0x07, min = 0x10000;
    } else {
        return 0;
    }
    if (n < len)
        return 0;
    for (size_t i = 1; i < len; i++) {
        if ((b[i] & 0xc0) != 0x80)
            return 0;
        v = v << 6 | (b[i] & 0x3f);
    }
    if (v < min || v > 0x10ffff || (v >= 0xd800 && v <= 0xdfff))
        return 0;
    *cp = v;
    return len;
}

static bool valid_in(const unsigned char *b, size_t n, int enc)
{
    size_t i = 0;
    while (i < n) {
        /* (ASCII runs a word at a time: this is run on the whole file) */
        while (i + 8 <= n) {
            uint64_t w;
            memcpy(&w, b + i, 8);
            if (w & 0x8080808080808080ull)
                break;
            i += 8;
        }
        if (i >= n)
            break;
        if (b[i] < 0x80 || enc == ENC_LATIN1) {
            i++;
            continue;
        }
        uint32_t cp;
        size_t k = enc == ENC_UTF8 ? utf8_seq(b + i, n - i, &cp) : 0;
        if (!k)
            return false;
        i += k;
    }
    return true;
}

static bool is_word(unsigned char ch)
{
    return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
           (ch >= '0' && ch <= '9') || ch == '_';
}

/* tokenize's cookie_re, ^[ \t\f]*#.*?coding[:=][ \t]*([-\w.]+), on one
 * line (ending at its '\n'): the name's bytes, or false. */
static bool find_cookie(const unsigned char *l, size_t n, size_t *at,
                        size_t *len)
{
    size_t i = 0;
    while (i < n && (l[i] == ' ' || l[i] == '\t' || l[i] == '\f'))
        i++;
    if (i >= n || l[i] != '#')
        return false;
    /* (the lazy .*? : the first "coding" that the rest matches after) */
    for (size_t p = i + 1; p + 7 <= n && l[p] != '\n'; p++) {
        if (memcmp(l + p, "coding", 6) || (l[p + 6] != ':' && l[p + 6] != '='))
            continue;
        size_t q = p + 7;
        while (q < n && (l[q] == ' ' || l[q] == '\t'))
            q++;
        size_t s = q;
        while (q < n && (is_word(l[q]) || l[q] == '-' || l[q] == '.'))
            q++;
        if (q > s) {
            *at = s;
            *len = q - s;
            return true;
        }
    }
    return false;
}

/* The encoding a cookie names, as tokenize's _get_normal_name and
 * codecs.lookup take it; -1 for one we do not decode (or Python does
 * not know). */
static int cookie_encoding(const unsigned char *name, size_t n)
{
    static const char *const utf8[] = {"utf_8", "utf8", "u8", "utf",
                                       "cp65001", "utf_8_sig"};
    static const char *const latin1[] = {
        "latin_1", "latin1", "iso_8859_1", "iso8859_1", "8859", "cp819",
        "latin", "l1", "iso_ir_100", "csisolatin1", "ibm819",
        "iso_8859_1_1987", "iso_latin_1"};
    static const char *const ascii[] = {
        "ascii", "us_ascii", "646", "us", "ansi_x3.4_1968", "ansi_x3_4_1968",
        "ansi_x3.4_1986", "cp367", "csascii", "ibm367", "iso646_us",
        "iso_646.irv_1991", "iso_ir_6"};
    char low[40];
    if (n >= sizeof low)
        return -1;
    for (size_t i = 0; i < n; i++) {
        char ch = (char)name[i];
        low[i] = ch == '-' ? '_' : (ch >= 'A' && ch <= 'Z') ? ch - 'A' + 'a'
                                                            : ch;
    }
    low[n] = 0;
    /* _get_normal_name looks at the first 12 characters only */
    if (!strncmp(low, "utf_8_", 6) && n > 6)
        return ENC_UTF8;
    for (size_t i = 0; i < 3; i++) {
        static const char *const pre[] = {"latin_1_", "iso_8859_1_",
                                          "iso_latin_1_"};
        if (!strncmp(low, pre[i], strlen(pre[i])) && strlen(pre[i]) <= 12)
            return ENC_LATIN1;
    }
    for (size_t i = 0; i < COUNT(utf8); i++)
        if (!strcmp(low, utf8[i]))
            return ENC_UTF8;
    for (size_t i = 0; i < COUNT(latin1); i++)
        if (!strcmp(low, latin1[i]))
            return ENC_LATIN1;
    for (size_t i = 0; i < COUNT(ascii); i++)
        if (!strcmp(low, ascii[i]))
            return ENC_ASCII;
    return -1;
}

/* tokenize's blank_re: a line of only spaces, tabs and form feeds, or
 * one that is a comment, or that starts a "\r". */
static bool blank_line(const unsigned char *l, size_t n)
{
    size_t i = 0;
    while (i < n && (l[i] == ' ' || l[i] == '\t' || l[i] == '\f'))
        i++;
    return i == n || l[i] == '#' || l[i] == '\r' || l[i] == '\n';
}

static size_t line_end(const unsigned char *b, size_t n, size_t from)
{
    const unsigned char *nl = memchr(b + from, '\n', n - from);
    return nl ? (size_t)(nl - b) + 1 : n;
}

/* A cookie in one of the first two lines (readline's lines: to '\n').
 * 3.11 to 3.13 decode that line as UTF-8 first; 3.14 and later refuse a
 * NUL byte in the lines they read.  0 and the encoding in *enc (left
 * alone without a cookie), 1 for "no cookie here", -1 for an error. */
static int cookie_line(const sl *c, const unsigned char *l, size_t n,
                       bool bom, int *enc)
{
    if (c->minor < 14 && !valid_in(l, n, ENC_UTF8))
        return -1;
    size_t at, len;
    if (!find_cookie(l, n, &at, &len))
        return 1;
    int e = cookie_encoding(l + at, len);
    if (e < 0 || (bom && e != ENC_UTF8))
        return -1;
    *enc = e;
    return 0;
}

static bool has_nul(const unsigned char *b, size_t n)
{
    return memchr(b, 0, n) != NULL;
}

/* tokenize.detect_encoding, then the whole file decoded: false when
 * linecache would have no lines. */
static bool src_open(const sl *c, const char *text, size_t len, src *s)
{
    const unsigned char *b = (const unsigned char *)text;
    bool bom = len >= 3 && !memcmp(b, "\xef\xbb\xbf", 3);
    if (bom)
        b += 3, len -= 3;
    *s = (src){b, len, ENC_UTF8};
    size_t e1 = line_end(b, len, 0);
    if (e1 > 0) {
        bool nul_check = c->minor >= 14;
        int r = cookie_line(c, b, e1, bom, &s->enc);
        if (r < 0 || (nul_check && has_nul(b, e1)))
            return false;
        if (r > 0 && blank_line(b, e1) && e1 < len) {
            size_t e2 = line_end(b, len, e1);
            r = cookie_line(c, b + e1, e2 - e1, bom, &s->enc);
            if (r < 0 || (nul_check && has_nul(b + e1, e2 - e1)))
                return false;
        }
    }
    return valid_in(b, len, s->enc);
}

/* The line that starts at *pos (universal newlines: "\n", "\r\n" and "\r"
 * end one): its content [*a, *e), *pos moved past its end.  False at the
 * end of the text. */
static bool src_next_line(const src *s, size_t *pos, size_t *a, size_t *e)
{
    size_t i = *pos;
    if (i >= s->n)
        return false;
    *a = i;
    while (i < s->n && s->b[i] != '\n' && s->b[i] != '\r')
        i++;
    *e = i;
    if (i < s->n)
        i += (s->b[i] == '\r' && i + 1 < s->n && s->b[i + 1] == '\n') ? 2 : 1;
    *pos = i;
    return true;
}

/* The bytes [a, e) of the file as code points, appended to out. */
static void src_decode(sl *c, const src *s, size_t a, size_t e, ustr *out)
{
    if (!pyu_us_room(c, out, e - a))
        return;
    size_t i = a;
    while (i < e) {
        uint32_t cp = s->b[i];
        size_t k = 1;
        if (cp >= 0x80 && s->enc == ENC_UTF8) {
            k = utf8_seq(s->b + i, e - i, &cp);
            if (!k) { /* (validated before: cannot happen) */
                c->failed = true;
                return;
            }
        }
        out->p[out->n++] = cp;
        i += k;
    }
}

/* linecache.getline(file, first + i) for i in [0, count), without their
 * newline, appended to out each followed by '\n'; lines past the end are
 * empty.  Sets *found to whether the first one is in the file. */
static void src_lines(sl *c, const src *s, long first, long count,
                      ustr *out, bool *found)
{
    size_t pos = 0, a = 0, e = 0;
    long no = 0;
    bool have = false;
    while (no < first && (have = src_next_line(s, &pos, &a, &e)))
        no++;
    *found = have && no == first;
    for (long i = 0; i < count && !c->failed; i++) {
        if (i > 0)
            have = have && src_next_line(s, &pos, &a, &e);
        if (have)
            src_decode(c, s, a, e, out);
        us_addc(c, out, '\n', 1);
    }
}

/* ============================================================ 3.11 */

/* 3.11's and 3.12's format_frame_summary, below its first line, as
 * 3.11.2 has it; from 3.11.7 and 3.12.1 (c->late) the carets count
 * columns, as display_width() does for 3.13, and the anchors are 3.12's
 * (pyu_anchors312()). */
static void fmt311(sl *c, const src *s, long line, long end_line, long col,
                   long end_col, ustr *out)
{
    ustr raw = {0};
    bool found;
    src_lines(c, s, line, 1, &raw, &found);
    uv r = pyu_us_view(&raw); /* the line with its '\n', as linecache's */
    uv st = uv_strip(r);
    if (!found || !st.n || c->failed)
        goto out;
    pyu_us_adda(c, out, "    ");
    pyu_us_add(c, out, st);
    us_addc(c, out, '\n', 1);
    if (col < 0 || end_col < 0)
        goto out;
    /* (counts the newline and any trailing spaces as indentation, which
     * the 1-based offsets make up for when there are no trailing ones) */
    long stripped = (long)r.n - (long)st.n;
    long start = pyu_uv_b2c(r, col) + 1, end = pyu_uv_b2c(r, end_col) + 1;
    long left = 0, right = 0;
    bool have = false;
    uv seg = pyu_uv_slice(r, start - 1, end - 1);
    if (line == end_line)
        have = (c->late ? pyu_anchors312 : pyu_anchors311)(c, seg, &left,
                                                           &right);
    else if (c->late)
        end = (long)uv_rstrip(r).n + 1;
    else
        end = stripped + (long)st.n;
    if (end - start < (long)st.n || (have && right - left > 0)) {
        if (c->late) { /* (columns: a wide character takes two) */
            sl w = {13, false, false}; /* (the nearest unicodedata known) */
            long ds = display_width(&w, r, start - 1) + 1,
                 de = display_width(&w, r, end - 1) + 1;
            if (have) {
                right = display_width(&w, seg, right);
                left = display_width(&w, seg, left);
            }
            start = ds;
            end = de;
        }
        pyu_us_adda(c, out, "    ");
        us_addc(c, out, ' ', start - stripped);
        if (have) {
            us_addc(c, out, '~', left);
            us_addc(c, out, '^', right - left);
            us_addc(c, out, '~', end - start - right);
        } else {
            us_addc(c, out, '^', end - start);
        }
        us_addc(c, out, '\n', 1);
    }
out:
    pyu_us_free(&raw);
}

/* ======================================================= 3.13 and later */

/* _should_show_carets: not when pyu_hide_carets says so; else when there are
 * anchors, or code before the span on its first line or after it on its
 * last. */
static bool show_carets(sl *c, long start, long end, const uvlist *all,
                        bool have)
{
    ustr text = {0};
    ul_join_nl(c, all, 0, all->n, &text);
    bool hide = pyu_hide_carets(c, pyu_us_view(&text), start, end, (long)all->n);
    pyu_us_free(&text);
    if (hide)
        return false;
    if (have)
        return true;
    uv first = all->v[0], last = all->v[all->n - 1];
    return uv_lstrip(pyu_uv_slice(first, 0, start)).n ||
           uv_rstrip(pyu_uv_slice(last, end, (long)last.n)).n;
}

/* What format_frame_summary's output_line works from. */
typedef struct span {
    const uvlist *all; /* the dedented lines */
    long dp_start, dp_end; /* display columns of the start and end */
    bool show, have;       /* carets at all; anchors */
    anchors a;             /* with columns in display columns */
    uint32_t primary, secondary;
} span;

static bool in_anchors(const span *sp, long ln, long col)
{
    const anchors *a = &sp->a;
    return sp->have &&
           (ln > a->left_line || (ln == a->left_line && col >= a->left_col)) &&
           (ln < a->right_line || (ln == a->right_line && col < a->right_col));
}

/* output_line: a line, and its carets when they are shown. */
static void output_line(sl *c, const span *sp, long ln, ustr *res)
{
    uv line;
    if (!pyu_ul_get(sp->all, ln, &line)) { /* (an IndexError in Python) */
        c->failed = true;
        return;
    }
    pyu_us_add(c, res, line);
    us_addc(c, res, '\n', 1);
    if (!sp->show)
        return;
    long spaces = (long)pyu_uv_lspace(line);
    long carets = ln == (long)sp->all->n - 1 ? sp->dp_end
                                             : display_width(c, line, -1);
    if (carets > 0 && !pyu_us_room(c, res, (size_t)carets))
        return;
    for (long col = 0; col < carets; col++) {
        uint32_t ch = (col < spaces || (ln == 0 && col < sp->dp_start)) ? ' '
                    : in_anchors(sp, ln, col) ? sp->secondary : sp->primary;
        res->p[res->n++] = ch;
    }
    us_addc(c, res, '\n', 1);
}

static int cmp_long(const void *a, const void *b)
{
    long x = *(const long *)a, y = *(const long *)b;
    return x < y ? -1 : x > y;
}

/* The first and last lines, and those around the anchors' ends, with
 * one line between them shown and more elided. */
static void output_lines(sl *c, const span *sp, ustr *res)
{
    long sig[8], n = 0, count = (long)sp->all->n;
    sig[n++] = 0;
    sig[n++] = count - 1;
    for (long d = -1; sp->have && d <= 1; d++) {
        sig[n++] = sp->a.left_line + d;
        sig[n++] = sp->a.right_line + d;
    }
    qsort(sig, (size_t)n, sizeof *sig, cmp_long);
    long prev = 0;
    bool any = false;
    for (long i = 0; i < n && !c->failed; i++) {
        long ln = sig[i];
        if ((any && ln == prev) || ln == -1 || ln == count)
            continue;
        if (any && ln - prev == 2) {
            output_line(c, sp, ln - 1, res);
        } else if (any && ln - prev > 2) {
            char buf[64];
            snprintf(buf, sizeof buf, "...<%ld lines>...\n", ln - prev - 1);
            pyu_us_adda(c, res, buf);
        }
        output_line(c, sp, ln, res);
        prev = ln;
        any = true;
    }
}

/* The anchors in display columns of their lines (the first line's
 * offsets counted from the segment's start, so moved by start). */
static bool anchors_display(sl *c, span *sp, long start)
{
    anchors *a = &sp->a;
    long l = a->left_col + (a->left_line == 0 ? start : 0);
    long r = a->right_col + (a->right_line == 0 ? start : 0);
    uv ll, rl;
    if (!pyu_ul_get(sp->all, a->left_line, &ll) ||
        !pyu_ul_get(sp->all, a->right_line, &rl)) {
        c->failed = true;
        return false;
    }
    a->left_col = display_width(c, ll, l);
    a->right_col = display_width(c, rl, r);
    sp->primary = '~';
    sp->secondary = '^';
    return true;
}

/* The lines [line, end_line] as format_frame_summary has them: each
 * rstripped, joined with '\n' and ending in one (_lines); *first the
 * first one. */
static void frame_lines(sl *c, const src *s, long line, long count,
                        ustr *joined, ustr *first)
{
    ustr buf = {0};
    uvlist raw = {0};
    bool found;
    src_lines(c, s, line, count, &buf, &found);
    uv_split_nl(c, pyu_us_view(&buf), &raw);
    for (long i = 0; i < count && (size_t)i < raw.n; i++) {
        if (i)
            us_addc(c, joined, '\n', 1);
        pyu_us_add(c, joined, uv_rstrip(raw.v[i]));
    }
    us_addc(c, joined, '\n', 1);
    if (raw.n)
        pyu_us_add(c, first, uv_strip(raw.v[0]));
    pyu_ul_free(&raw);
    pyu_us_free(&buf);
}

/* With columns: the carets' lines, from the original and dedented
 * lines. */
static void fmt313_span(sl *c, uv joined, uv ded, long count, long col,
                        long end_col, ustr *out)
{
    uvlist orig = {0}, all = {0};
    ustr segbuf = {0}, res = {0}, res_ded = {0};
    uv first, last;
    pyu_uv_splitlines(c, joined, false, &orig);
    pyu_uv_splitlines(c, ded, false, &all);
    if (all.n > (size_t)count)
        all.n = (size_t)count;
    if (c->failed || !all.n || !pyu_ul_get(&orig, 0, &first) ||
        !pyu_ul_get(&orig, count - 1, &last)) {
        c->failed = true;
        goto out;
    }
    long dedented = (long)first.n - (long)all.v[0].n;
    long start = pyu_uv_b2c(first, col) - dedented;
    long end = pyu_uv_b2c(last, end_col) - dedented;
    start = start < 0 ? 0 : start;
    end = end < 0 ? 0 : end;
    uv l0 = all.v[0], ll = all.v[all.n - 1];
    span sp = {.all = &all, .primary = '^', .secondary = '^'};
    sp.dp_start = display_width(c, l0, start);
    sp.dp_end = display_width(c, ll, end);
    ul_join_nl(c, &all, 0, all.n, &segbuf);
    uv seg = pyu_uv_slice(pyu_us_view(&segbuf), start,
                      (long)segbuf.n - ((long)ll.n - end));
    sp.have = pyu_anchors313(c, seg, &sp.a);
    sp.show = show_carets(c, start, end, &all, sp.have);
    if (sp.have && !anchors_display(c, &sp, start))
        goto out;
    output_lines(c, &sp, &res);
    dedent(c, pyu_us_view(&res), &res_ded);
    indent(c, pyu_us_view(&res_ded), "    ", true, out);
out:
    pyu_ul_free(&orig);
    pyu_ul_free(&all);
    pyu_us_free(&segbuf);
    pyu_us_free(&res);
    pyu_us_free(&res_ded);
}

/* A span of more lines than this is no real instruction's: nothing. */
#define MAX_SPAN (1L << 20)

/* 3.13's (and later) format_frame_summary, below its first line. */
static void fmt313(sl *c, const src *s, long line, long end_line, long col,
                   long end_col, ustr *out)
{
    if (end_line <= 0)
        end_line = line;
    if (end_line < line || end_line - line >= MAX_SPAN)
        return;
    long count = end_line - line + 1;
    ustr joined = {0}, first = {0}, ded = {0};
    frame_lines(c, s, line, count, &joined, &first);
    dedent(c, pyu_us_view(&joined), &ded);
    if (c->failed || !uv_strip(pyu_us_view(&ded)).n)
        goto out;
    if (col < 0 || end_col < 0) { /* the first line only */
        indent(c, pyu_us_view(&first), "    ", false, out);
        us_addc(c, out, '\n', 1);
    } else {
        fmt313_span(c, pyu_us_view(&joined), pyu_us_view(&ded), count, col, end_col,
                    out);
    }
out:
    pyu_us_free(&joined);
    pyu_us_free(&first);
    pyu_us_free(&ded);
}

/* ================================================================ entry */

static void write_utf8(FILE *f, uv s)
{
    if (!s.n || s.n > SIZE_MAX / 4)
        return;
    char *b = malloc(s.n * 4);
    if (!b)
        return;
    size_t k = 0;
    for (size_t i = 0; i < s.n; i++) {
        uint32_t cp = s.p[i];
        if (cp < 0x80) {
            b[k++] = (char)cp;
        } else if (cp < 0x800) {
            b[k++] = (char)(0xc0 | cp >> 6);
            b[k++] = (char)(0x80 | (cp & 0x3f));
        } else if (cp < 0x10000) {
            b[k++] = (char)(0xe0 | cp >> 12);
            b[k++] = (char)(0x80 | (cp >> 6 & 0x3f));
            b[k++] = (char)(0x80 | (cp & 0x3f));
        } else {
            b[k++] = (char)(0xf0 | cp >> 18);
            b[k++] = (char)(0x80 | (cp >> 12 & 0x3f));
            b[k++] = (char)(0x80 | (cp >> 6 & 0x3f));
            b[k++] = (char)(0x80 | (cp & 0x3f));
        }
    }
    fwrite(b, 1, k, f);
    free(b);
}

void pyu_source_lines(FILE *out, const char *text, size_t len, int version,
                      int line, int end_line, int col, int end_col)
{
    if (!out || (!text && len) || line <= 0)
        return;
    int minor = version >= 100 ? version / 100 : version,
        micro = version >= 100 ? version % 100 : 0;
    sl c = {minor < 11 ? 11 : minor > 15 ? 15 : minor, false,
            (minor == 11 && micro >= 7) || (minor == 12 && micro >= 1)};
    src s;
    if (!src_open(&c, text ? text : "", len, &s))
        return;
    ustr o = {0};
    if (col < 0 || end_col < 0)
        col = end_col = -1;
    if (c.minor <= 12)
        fmt311(&c, &s, line, end_line, col, end_col, &o);
    else
        fmt313(&c, &s, line, end_line, col, end_col, &o);
    if (!c.failed)
        write_utf8(out, pyu_us_view(&o));
    pyu_us_free(&o);
}
