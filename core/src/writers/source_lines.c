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
 * CPython finds the anchors with ast.parse; here a small tokenizer and a
 * recursive-descent parser of Python expressions give the same node
 * positions, and say "does not parse" where CPython would raise.
 *
 * Not followed: files in encodings other than UTF-8, Latin-1 and ASCII
 * (nothing is written for them), identifiers told apart by a table of
 * what they cannot contain rather than by XID_Start/XID_Continue, and
 * expressions nested more than MAX_DEPTH deep (no anchors).
 *
 * Everything in the text is untrusted: every loop is bounded by the
 * text's length, recursion by a depth limit, and where CPython would
 * raise out of the formatting we write nothing. */
#include "../internal.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* ======================================================== Unicode facts */

/* str.isspace(): Python's whitespace (Zs, and bidi classes WS, B, S). */
static bool u_isspace(uint32_t c)
{
    if (c <= 0x20)
        return c == 0x20 || (c >= 0x09 && c <= 0x0d) ||
               (c >= 0x1c && c <= 0x1f);
    return c == 0x85 || c == 0xa0 || c == 0x1680 ||
           (c >= 0x2000 && c <= 0x200a) || c == 0x2028 || c == 0x2029 ||
           c == 0x202f || c == 0x205f || c == 0x3000;
}

/* The line boundaries of str.splitlines() ("\r\n" is one). */
static bool u_linebreak(uint32_t c)
{
    return c == '\n' || c == '\r' || c == 0x0b || c == 0x0c ||
           (c >= 0x1c && c <= 0x1e) || c == 0x85 || c == 0x2028 ||
           c == 0x2029;
}

static size_t u_utf8_len(uint32_t c)
{
    return c < 0x80 ? 1 : c < 0x800 ? 2 : c < 0x10000 ? 3 : 4;
}

typedef struct urange {
    uint32_t lo, hi;
    uint8_t since; /* the first minor version whose unicodedata says so */
} urange;

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

static bool u_in(const urange *r, size_t n, uint32_t c, int minor)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (c < r[mid].lo)
            hi = mid;
        else if (c > r[mid].hi)
            lo = mid + 1;
        else
            return r[mid].since <= minor;
    }
    return false;
}

#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

/* 3.13 and 3.14: 2 columns for a wide character, else 1. */
static long u_width313(uint32_t c, int minor)
{
    return c >= 0x1100 && u_in(wide, COUNT(wide), c, minor) ? 2 : 1;
}

/* 3.15's _str_width: ASCII 1, combining and format characters 0, wide 2,
 * else 1. */
static long u_width315(uint32_t c)
{
    if (c < 0x80)
        return 1;
    if (u_in(zero_width, COUNT(zero_width), c, 15))
        return 0;
    return u_in(wide, COUNT(wide), c, 15) ? 2 : 1;
}

/* ================================================================ state */

/* One call's state.  failed is sticky: an allocation failed, or CPython
 * would have raised out of the formatting; nothing is written then. */
typedef struct sl {
    int minor; /* whose rules: 11, 13, 14 or 15 */
    bool failed;
} sl;

/* ============================================================== strings */

/* A Python str: code points.  ustr owns its buffer; uv points into one
 * (borrowed, valid while its owner is). */
typedef struct ustr {
    uint32_t *p;
    size_t n, cap;
} ustr;

typedef struct uv {
    const uint32_t *p;
    size_t n;
} uv;

typedef struct uvlist {
    uv *v;
    size_t n, cap;
} uvlist;

static void us_free(ustr *s)
{
    free(s->p);
    *s = (ustr){0};
}

static void ul_free(uvlist *l)
{
    free(l->v);
    *l = (uvlist){0};
}

static uv us_view(const ustr *s)
{
    return (uv){s->p, s->n};
}

/* Room for more code points; false (and c->failed) when there is none. */
static bool us_room(sl *c, ustr *s, size_t more)
{
    if (c->failed)
        return false;
    if (more > (SIZE_MAX / sizeof(uint32_t)) / 2 - s->n) {
        c->failed = true;
        return false;
    }
    size_t need = s->n + more;
    if (need <= s->cap)
        return true;
    size_t cap = s->cap ? s->cap : 64;
    while (cap < need)
        cap *= 2;
    uint32_t *p = realloc(s->p, cap * sizeof *p);
    if (!p) {
        c->failed = true;
        return false;
    }
    s->p = p;
    s->cap = cap;
    return true;
}

static void us_add(sl *c, ustr *s, uv v)
{
    if (v.n && us_room(c, s, v.n)) {
        memcpy(s->p + s->n, v.p, v.n * sizeof *v.p);
        s->n += v.n;
    }
}

static void us_addc(sl *c, ustr *s, uint32_t ch, long times)
{
    if (times > 0 && us_room(c, s, (size_t)times))
        for (long i = 0; i < times; i++)
            s->p[s->n++] = ch;
}

static void us_adda(sl *c, ustr *s, const char *ascii)
{
    size_t n = strlen(ascii);
    if (us_room(c, s, n))
        for (size_t i = 0; i < n; i++)
            s->p[s->n++] = (unsigned char)ascii[i];
}

static void ul_add(sl *c, uvlist *l, uv v)
{
    if (c->failed)
        return;
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 16;
        uv *p = cap < SIZE_MAX / sizeof *p ? realloc(l->v, cap * sizeof *p)
                                           : NULL;
        if (!p) {
            c->failed = true;
            return;
        }
        l->v = p;
        l->cap = cap;
    }
    l->v[l->n++] = v;
}

/* n code points from p + off (an empty string's p may be NULL) */
static uv uv_at(const uint32_t *p, size_t off, size_t n)
{
    return (uv){p ? p + off : p, n};
}

/* s[a:b] for a, b >= 0, as Python slices (clamped, empty when a >= b). */
static uv uv_slice(uv s, long a, long b)
{
    size_t lo = a < 0 ? 0 : (size_t)a, hi = b < 0 ? 0 : (size_t)b;
    if (hi > s.n)
        hi = s.n;
    if (lo > hi)
        lo = hi;
    return uv_at(s.p, lo, hi - lo);
}

static size_t uv_lspace(uv s)
{
    size_t i = 0;
    while (i < s.n && u_isspace(s.p[i]))
        i++;
    return i;
}

static size_t uv_rspace(uv s)
{
    size_t i = 0;
    while (i < s.n && u_isspace(s.p[s.n - 1 - i]))
        i++;
    return i;
}

static uv uv_lstrip(uv s)
{
    size_t k = uv_lspace(s);
    return uv_at(s.p, k, s.n - k);
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
    return s.n > 0 && uv_lspace(s) == s.n;
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

/* str.splitlines(keepends) */
static void uv_splitlines(sl *c, uv s, bool keepends, uvlist *out)
{
    size_t i = 0;
    while (i < s.n) {
        size_t start = i;
        while (i < s.n && !u_linebreak(s.p[i]))
            i++;
        size_t end = i;
        if (i < s.n) {
            i += (s.p[i] == '\r' && i + 1 < s.n && s.p[i + 1] == '\n') ? 2
                                                                       : 1;
            if (keepends)
                end = i;
        }
        ul_add(c, out, uv_at(s.p, start, end - start));
    }
}

/* str.split('\n') */
static void uv_split_nl(sl *c, uv s, uvlist *out)
{
    size_t start = 0;
    for (size_t i = 0; i <= s.n; i++)
        if (i == s.n || s.p[i] == '\n') {
            ul_add(c, out, uv_at(s.p, start, i - start));
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
        us_add(c, out, l->v[i]);
    }
}

/* Python's l[i] for an int i: negative counts from the end; false for an
 * IndexError. */
static bool ul_get(const uvlist *l, long i, uv *out)
{
    if (i < 0)
        i += (long)l->n;
    if (i < 0 || (size_t)i >= l->n)
        return false;
    *out = l->v[i];
    return true;
}

/* _byte_offset_to_character_offset(s, off): the length of
 * s.encode()[:off].decode(errors="replace"), i.e. the number of code
 * points that begin before byte off (a cut one becomes one U+FFFD). */
static long uv_b2c(uv s, long off)
{
    long bytes = 0, n = 0;
    for (size_t i = 0; i < s.n && bytes < off; i++, n++)
        bytes += (long)u_utf8_len(s.p[i]);
    return n;
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
            l = uv_slice(l, (long)margin.n, (long)l.n);
        us_add(c, out, l);
    }
    ul_free(&lines);
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
            us_add(c, out, uv_slice(l, (long)margin, (long)l.n));
    }
    ul_free(&lines);
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
    uv_splitlines(c, text, true, &pieces);
    for (size_t i = 0; i < pieces.n; i++) {
        if (all || !uv_isspace(pieces.v[i]))
            us_adda(c, out, prefix);
        us_add(c, out, pieces.v[i]);
    }
    ul_free(&pieces);
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
        return wlen315(offset < 0 ? line : uv_slice(line, 0, offset));
    if (offset < 0)
        offset = (long)line.n;
    if (uv_isascii(line))
        return offset;
    uv s = uv_slice(line, 0, offset);
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
    if (!us_room(c, out, e - a))
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

/* ============================================================ tokenizer */

/* Python's tokens, enough to parse expressions and simple statements.
 * The whole text is tokenized first: any tokenizer error makes the text
 * fail to parse, as it does ast.parse. */
enum tk_type { TK_END, TK_NEWLINE, TK_NAME, TK_NUMBER, TK_STRING, TK_OP };

/* operators, longest first (the tokenizer takes the first that fits) */
static const char *const op_text[] = {
    "", "**=", "//=", ">>=", "<<=", "...", "!=", "**", "//", ">>", "<<",
    "<=", ">=", "==", "->", ":=", "+=", "-=", "*=", "/=", "%=", "&=", "|=",
    "^=", "@=", "+", "-", "*", "/", "%", "@", "&", "|", "^", "~", "<", ">",
    "(", ")", "[", "]", "{", "}", ",", ":", ";", ".", "="};
enum op {
    OP_NONE, OP_POWEQ, OP_FLOORDIVEQ, OP_RSHIFTEQ, OP_LSHIFTEQ, OP_ELLIPSIS,
    OP_NE, OP_POW, OP_FLOORDIV, OP_RSHIFT, OP_LSHIFT, OP_LE, OP_GE, OP_EQEQ,
    OP_ARROW, OP_WALRUS, OP_PLUSEQ, OP_MINUSEQ, OP_STAREQ, OP_SLASHEQ,
    OP_PERCENTEQ, OP_AMPEQ, OP_PIPEEQ, OP_CARETEQ, OP_ATEQ, OP_PLUS,
    OP_MINUS, OP_STAR, OP_SLASH, OP_PERCENT, OP_AT, OP_AMP, OP_PIPE,
    OP_CARET, OP_TILDE, OP_LT, OP_GT, OP_LPAR, OP_RPAR, OP_LSQB, OP_RSQB,
    OP_LBRACE, OP_RBRACE, OP_COMMA, OP_COLON, OP_SEMI, OP_DOT, OP_EQ,
    OP_COUNT
};
_Static_assert(COUNT(op_text) == OP_COUNT, "op_text and enum op differ");

static const char *const kw_text[] = {
    "", "False", "None", "True", "and", "as", "assert", "async", "await",
    "break", "class", "continue", "def", "del", "elif", "else", "except",
    "finally", "for", "from", "global", "if", "import", "in", "is", "lambda",
    "nonlocal", "not", "or", "pass", "raise", "return", "try", "while",
    "with", "yield"};
enum kw {
    KW_IDENT, /* not a keyword: an identifier (soft keywords too) */
    KW_FALSE, KW_NONE, KW_TRUE, KW_AND, KW_AS, KW_ASSERT, KW_ASYNC,
    KW_AWAIT, KW_BREAK, KW_CLASS, KW_CONTINUE, KW_DEF, KW_DEL, KW_ELIF,
    KW_ELSE, KW_EXCEPT, KW_FINALLY, KW_FOR, KW_FROM, KW_GLOBAL, KW_IF,
    KW_IMPORT, KW_IN, KW_IS, KW_LAMBDA, KW_NONLOCAL, KW_NOT, KW_OR, KW_PASS,
    KW_RAISE, KW_RETURN, KW_TRY, KW_WHILE, KW_WITH, KW_YIELD, KW_COUNT
};
_Static_assert(COUNT(kw_text) == KW_COUNT, "kw_text and enum kw differ");

/* a string token's kind, for the rules on concatenating them */
enum { STR_BYTES = 1, STR_T = 2 };

typedef struct tok {
    uint8_t type;  /* enum tk_type */
    uint8_t op;    /* TK_OP: enum op */
    uint8_t kw;    /* TK_NAME: enum kw, KW_IDENT for an identifier */
    uint8_t str;   /* TK_STRING: STR_* */
    size_t a, b;   /* its code points [a, b) in the text */
} tok;

/* CPython's limits of nested brackets (the tokenizer's MAXLEVEL) and of
 * nested f-strings (MAXFSTRINGLEVEL). */
#define MAX_LEVEL 200
#define MAX_FSTRING_LEVEL 150
/* Ours of the parser's recursion (brackets, unary operators, lambdas and
 * conditional expressions nested): each level takes some 2.5 KB of stack,
 * and no real code nests 50 brackets deep.  Deeper, a segment has no
 * anchors where CPython might find some. */
#define MAX_DEPTH 100

typedef struct lexer {
    sl *c;
    const uint32_t *t; /* borrowed: the text */
    size_t n, i;
    int depth;                 /* open brackets */
    uint8_t open[MAX_LEVEL];   /* their kinds (enum op) */
    bool line_tokens;          /* the logical line has tokens */
    tok *v;                    /* owned: the tokens */
    size_t nv, cap;
} lexer;

static bool lx_emit(lexer *lx, tok k)
{
    if (lx->nv == lx->cap) {
        size_t cap = lx->cap ? lx->cap * 2 : 64;
        tok *p = cap < SIZE_MAX / sizeof *p ? realloc(lx->v, cap * sizeof *p)
                                            : NULL;
        if (!p) {
            lx->c->failed = true;
            return false;
        }
        lx->v = p;
        lx->cap = cap;
    }
    lx->v[lx->nv++] = k;
    return true;
}

static bool is_ascii_alpha(uint32_t ch)
{
    return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z');
}

static bool is_digit(uint32_t ch)
{
    return ch >= '0' && ch <= '9';
}

/* Non-ASCII characters that are in no identifier and that real code has
 * in its strings and comments: Latin-1 signs, punctuation, arrows,
 * mathematical and other symbols, CJK and fullwidth punctuation, emoji. */
static const urange not_id[] = {
    {0x80, 0xa9, 0}, {0xab, 0xb4, 0}, {0xb6, 0xb9, 0}, {0xbb, 0xbf, 0},
    {0xd7, 0xd7, 0}, {0xf7, 0xf7, 0}, {0x2010, 0x2067, 0},
    {0x2190, 0x2bff, 0}, {0x3001, 0x3004, 0}, {0x3008, 0x3020, 0},
    {0xfe10, 0xfe32, 0}, {0xfe35, 0xfe4c, 0}, {0xfe50, 0xfe6f, 0},
    {0xff01, 0xff0f, 0}, {0xff1a, 0xff20, 0}, {0x1f000, 0x1faff, 0},
};

/* Identifiers: ASCII letters, '_', and the non-ASCII characters that can
 * be in one.  (Python's rule is XID_Start/XID_Continue; this one tells
 * apart what real code has, where a span cuts a string or a comment.) */
static bool is_id_start(uint32_t ch)
{
    if (ch < 0x80)
        return is_ascii_alpha(ch) || ch == '_';
    return !u_isspace(ch) && !u_in(not_id, COUNT(not_id), ch, 0);
}

static bool is_id_char(uint32_t ch)
{
    return is_id_start(ch) || is_digit(ch) || ch == 0xb7 ||
           (ch >= 0xfe00 && ch <= 0xfe0f);
}

static uint32_t lx_at(const lexer *lx, size_t i)
{
    return i < lx->n ? lx->t[i] : 0;
}

/* A string prefix (rb, f, Rt...): its STR_* flags and whether it is
 * raw and formatted, or false for a name that is none. */
static bool str_prefix(const lexer *lx, size_t a, size_t b, unsigned *kind,
                       bool *raw, bool *fmt)
{
    bool r = false, u = false, by = false, f = false, t = false;
    if (b - a > 2)
        return false;
    for (size_t i = a; i < b; i++) {
        uint32_t ch = lx->t[i] | 0x20;
        bool *slot = ch == 'r' ? &r : ch == 'u' ? &u : ch == 'b' ? &by
                   : ch == 'f' ? &f : ch == 't' ? &t : NULL;
        if (!slot || *slot)
            return false;
        *slot = true;
    }
    if ((u && b - a > 1) || (by && (f || t)) || (f && t) ||
        (t && lx->c->minor < 14))
        return false;
    *kind = (by ? STR_BYTES : 0) | (t ? STR_T : 0);
    *raw = r;
    *fmt = f || t;
    return true;
}

static size_t lx_string_body(lexer *lx, size_t i, bool raw, bool fmt,
                             bool bytes, int nest);

/* Does the quote at i close a string opened with quote q (triple)? */
static bool lx_closes(const lexer *lx, size_t i, uint32_t q, bool triple)
{
    return lx_at(lx, i) == q &&
           (!triple || (lx_at(lx, i + 1) == q && lx_at(lx, i + 2) == q));
}

/* A string starting with its prefix at i (quote at q): the index after
 * it, or SIZE_MAX when it is not a valid string. */
static size_t lx_string_at(lexer *lx, size_t i, size_t q, int nest)
{
    unsigned kind = 0;
    bool raw = false, fmt = false;
    if (nest > MAX_FSTRING_LEVEL || !str_prefix(lx, i, q, &kind, &raw, &fmt))
        return SIZE_MAX;
    return lx_string_body(lx, q, raw, fmt, kind & STR_BYTES, nest);
}

/* An identifier or keyword at i: its end. */
static size_t lx_name_end(const lexer *lx, size_t i)
{
    while (i < lx->n && is_id_char(lx->t[i]))
        i++;
    return i;
}

static size_t lx_fspec(lexer *lx, size_t i, uint32_t q, bool triple,
                       int nest);

/* A replacement field of an f-string (3.12 and later: PEP 701, any
 * expression, strings with any quotes), from after its '{': the index
 * after its '}'. */
static size_t lx_ffield(lexer *lx, size_t i, uint32_t q, bool triple,
                        int nest)
{
    int depth = 0;
    while (i < lx->n) {
        uint32_t ch = lx->t[i];
        if (ch == '\n' && !triple && depth == 0)
            return SIZE_MAX;
        if (ch == '\'' || ch == '"') {
            i = lx_string_at(lx, i, i, nest + 1);
        } else if (is_id_start(ch)) {
            size_t e = lx_name_end(lx, i);
            uint32_t nx = lx_at(lx, e);
            i = (nx == '\'' || nx == '"') ? lx_string_at(lx, i, e, nest + 1)
                                          : e;
        } else if (ch == '#') {
            while (i < lx->n && lx->t[i] != '\n')
                i++;
        } else if (ch == '(' || ch == '[' || ch == '{') {
            if (++depth > MAX_LEVEL)
                return SIZE_MAX;
            i++;
        } else if (ch == ')' || ch == ']' || (ch == '}' && depth > 0)) {
            if (--depth < 0)
                return SIZE_MAX;
            i++;
        } else if (ch == '}') {
            return i + 1;
        } else if (ch == '!' && depth == 0 && lx_at(lx, i + 1) != '=') {
            i = lx_name_end(lx, i + 1);
        } else if (ch == ':' && depth == 0) {
            return lx_fspec(lx, i + 1, q, triple, nest);
        } else {
            i++;
        }
        if (i == SIZE_MAX)
            return i;
    }
    return SIZE_MAX;
}

/* A format spec of a replacement field, from after its ':': literal text
 * with nested fields, to the index after the field's '}'. */
static size_t lx_fspec(lexer *lx, size_t i, uint32_t q, bool triple,
                       int nest)
{
    while (i < lx->n) {
        uint32_t ch = lx->t[i];
        if (lx_closes(lx, i, q, triple) || (ch == '\n' && !triple))
            return SIZE_MAX;
        if (ch == '}')
            return i + 1;
        if (ch == '{') {
            if (nest >= MAX_FSTRING_LEVEL)
                return SIZE_MAX;
            i = lx_ffield(lx, i + 1, q, triple, nest + 1);
            if (i == SIZE_MAX)
                return i;
        } else {
            i += ch == '\\' ? 2 : 1;
        }
    }
    return SIZE_MAX;
}

/* The body of a string from its opening quote at i: the index after the
 * closing quote, or SIZE_MAX.  f- and t-strings of 3.12 and later are
 * read with their replacement fields; before, as any string. */
static size_t lx_string_body(lexer *lx, size_t i, bool raw, bool fmt,
                             bool bytes, int nest)
{
    uint32_t q = lx->t[i];
    bool triple = lx_at(lx, i + 1) == q && lx_at(lx, i + 2) == q;
    bool fields = fmt && lx->c->minor >= 12;
    i += triple ? 3 : 1;
    while (i < lx->n) {
        uint32_t ch = lx->t[i];
        if (lx_closes(lx, i, q, triple))
            return i + (triple ? 3 : 1);
        if (ch == '\n' && !triple)
            return SIZE_MAX;
        if (bytes && ch >= 0x80)
            return SIZE_MAX;
        if (ch == '\\') {
            uint32_t nx = lx_at(lx, i + 1);
            if (fields && (nx == '{' || nx == '}'))
                i++;
            else if (fields && !raw && nx == 'N' && lx_at(lx, i + 2) == '{') {
                i += 3;
                while (i < lx->n && lx->t[i] != '}' && lx->t[i] != q &&
                       lx->t[i] != '\n')
                    i++;
                i++;
            } else {
                i += 2;
            }
        } else if (fields && ch == '{' && lx_at(lx, i + 1) != '{') {
            i = lx_ffield(lx, i + 1, q, triple, nest);
            if (i == SIZE_MAX)
                return i;
        } else if (fields && (ch == '{' || ch == '}')) {
            if (lx_at(lx, i + 1) != ch)
                return SIZE_MAX;
            i += 2;
        } else {
            i++;
        }
    }
    return SIZE_MAX;
}

static bool is_number_char(uint32_t ch, bool hex)
{
    return is_digit(ch) || ch == '_' ||
           (hex && (ch | 0x20) >= 'a' && (ch | 0x20) <= 'f');
}

/* A number at i (decimal, float, imaginary, or 0x/0o/0b): its end. */
static size_t lx_number_end(const lexer *lx, size_t i)
{
    uint32_t base = lx_at(lx, i + 1) | 0x20;
    if (lx->t[i] == '0' && (base == 'x' || base == 'o' || base == 'b')) {
        i += 2;
        while (i < lx->n && is_number_char(lx->t[i], true))
            i++;
        return i;
    }
    while (i < lx->n && is_number_char(lx->t[i], false))
        i++;
    if (lx_at(lx, i) == '.') {
        i++;
        while (i < lx->n && is_number_char(lx->t[i], false))
            i++;
    }
    if ((lx_at(lx, i) | 0x20) == 'e') {
        size_t j = i + 1;
        if (lx_at(lx, j) == '+' || lx_at(lx, j) == '-')
            j++;
        if (is_digit(lx_at(lx, j))) {
            i = j;
            while (i < lx->n && is_number_char(lx->t[i], false))
                i++;
        }
    }
    if ((lx_at(lx, i) | 0x20) == 'j')
        i++;
    return i;
}

/* The operator at i: its enum op and length, or OP_NONE. */
static int lx_op(const lexer *lx, size_t i, size_t *len)
{
    for (int op = 1; op < OP_COUNT; op++) {
        const char *s = op_text[op];
        size_t k = 0;
        while (s[k] && lx_at(lx, i + k) == (unsigned char)s[k])
            k++;
        if (!s[k]) {
            *len = k;
            return op;
        }
    }
    return OP_NONE;
}

static bool lx_bracket(lexer *lx, int op)
{
    if (op == OP_LPAR || op == OP_LSQB || op == OP_LBRACE) {
        if (lx->depth >= MAX_LEVEL)
            return false;
        lx->open[lx->depth++] = (uint8_t)op;
    } else if (op == OP_RPAR || op == OP_RSQB || op == OP_RBRACE) {
        int want = op == OP_RPAR ? OP_LPAR
                 : op == OP_RSQB ? OP_LSQB : OP_LBRACE;
        if (lx->depth == 0 || lx->open[lx->depth - 1] != want)
            return false;
        lx->depth--;
    }
    return true;
}

/* At the start of a line outside brackets: skips it when blank or a
 * comment; else false if it is indented (only a first statement at
 * column 0 parses: there is no block here). */
static bool lx_line_start(lexer *lx)
{
    while (lx->i < lx->n) {
        size_t i = lx->i;
        long col = 0;
        for (; i < lx->n; i++) {
            uint32_t ch = lx->t[i];
            if (ch == ' ')
                col++;
            else if (ch == '\t')
                col = (col / 8 + 1) * 8;
            else if (ch == '\f')
                col = 0;
            else
                break;
        }
        if (i < lx->n && lx->t[i] == '#')
            while (i < lx->n && lx->t[i] != '\n')
                i++;
        if (i < lx->n && lx->t[i] == '\n') {
            lx->i = i + 1;
            continue;
        }
        lx->i = i;
        return i >= lx->n || col == 0;
    }
    return true;
}

static bool lx_name_or_string(lexer *lx, size_t a)
{
    size_t e = lx_name_end(lx, a);
    uint32_t nx = lx_at(lx, e);
    unsigned kind;
    bool raw, fmt;
    if ((nx == '\'' || nx == '"') && str_prefix(lx, a, e, &kind, &raw, &fmt)) {
        size_t end = lx_string_body(lx, e, raw, fmt, kind & STR_BYTES, 0);
        if (end == SIZE_MAX)
            return false;
        lx->i = end;
        return lx_emit(lx, (tok){TK_STRING, 0, 0, (uint8_t)kind, a, end});
    }
    uint8_t kw = KW_IDENT;
    for (int k = 1; k < KW_COUNT; k++) {
        size_t len = strlen(kw_text[k]), j = 0;
        if (len != e - a)
            continue;
        while (j < len && lx->t[a + j] == (unsigned char)kw_text[k][j])
            j++;
        if (j == len)
            kw = (uint8_t)k;
    }
    lx->i = e;
    return lx_emit(lx, (tok){TK_NAME, 0, kw, 0, a, e});
}

/* One token (or a skipped blank, comment or continuation) at lx->i. */
static bool lx_step(lexer *lx)
{
    uint32_t ch = lx->t[lx->i];
    size_t a = lx->i;
    if (ch == ' ' || ch == '\t' || ch == '\f') {
        lx->i++;
        return true;
    }
    if (ch == '#') {
        while (lx->i < lx->n && lx->t[lx->i] != '\n')
            lx->i++;
        return true;
    }
    if (ch == '\n' || ch == '\r') {
        lx->i++;
        if (lx->depth > 0)
            return true;
        if (lx->line_tokens && !lx_emit(lx, (tok){TK_NEWLINE, 0, 0, 0, a, a}))
            return false;
        lx->line_tokens = false;
        return lx_line_start(lx);
    }
    if (ch == '\\') {
        if (lx_at(lx, a + 1) != '\n')
            return false;
        lx->i += 2;
        return true;
    }
    lx->line_tokens = true;
    if (is_id_start(ch))
        return lx_name_or_string(lx, a);
    if (is_digit(ch) || (ch == '.' && is_digit(lx_at(lx, a + 1)))) {
        lx->i = lx_number_end(lx, a);
        return lx_emit(lx, (tok){TK_NUMBER, 0, 0, 0, a, lx->i});
    }
    if (ch == '\'' || ch == '"') {
        size_t end = lx_string_body(lx, a, false, false, false, 0);
        if (end == SIZE_MAX)
            return false;
        lx->i = end;
        return lx_emit(lx, (tok){TK_STRING, 0, 0, 0, a, end});
    }
    size_t len = 0;
    int op = lx_op(lx, a, &len);
    if (op == OP_NONE || !lx_bracket(lx, op))
        return false;
    lx->i += len;
    return lx_emit(lx, (tok){TK_OP, (uint8_t)op, 0, 0, a, lx->i});
}

/* Tokenizes all of t[0..n): the tokens (owned by the caller, ending with
 * TK_END) or NULL when the text does not tokenize (or on failure). */
static tok *tokenize(sl *c, const uint32_t *t, size_t n, size_t *count)
{
    lexer lx = {.c = c, .t = t, .n = n};
    bool ok = lx_line_start(&lx);
    while (ok && lx.i < lx.n)
        ok = lx_step(&lx);
    ok = ok && lx.depth == 0 &&
         (!lx.line_tokens || lx_emit(&lx, (tok){TK_NEWLINE, 0, 0, 0, n, n})) &&
         lx_emit(&lx, (tok){TK_END, 0, 0, 0, n, n});
    if (!ok) {
        free(lx.v);
        return NULL;
    }
    *count = lx.nv;
    return lx.v;
}

/* =============================================================== parser */

/* What the traceback module asks of a node: its kind and the positions
 * of the children it looks at.  Positions are code point indices in the
 * parsed text; pos_of turns them into AST (line, byte column). */
enum kind {
    K_OTHER, K_NAME, K_BINOP, K_SUBSCRIPT, K_CALL, K_TUPLE, K_STARRED
};

typedef struct node {
    uint8_t kind;
    uint8_t fkind;  /* K_CALL: its function's kind */
    size_t ts, te;  /* the tokens it was parsed from */
    size_t ns, ne;  /* its AST position: te/ts but for a parenthesized
                     * expression, whose node is the inner one */
    size_t a_end;   /* BinOp: left's end; Subscript: value's; Call: func's */
    size_t b_start; /* BinOp: right's start */
    size_t b_end;   /* Subscript: the slice's end */
} node;

typedef struct parser {
    const tok *v; /* borrowed: the tokens, ending with TK_END */
    size_t i;
    int depth;    /* recursion, bounded by MAX_DEPTH */
    int minor;
} parser;

static const tok *cur(const parser *p)
{
    return &p->v[p->i];
}

static const tok *peek(const parser *p, size_t k)
{
    size_t i = p->i;
    while (k-- && p->v[i].type != TK_END)
        i++;
    return &p->v[i];
}

static bool is_op(const parser *p, int op)
{
    return cur(p)->type == TK_OP && cur(p)->op == op;
}

static bool is_kw(const parser *p, int kw)
{
    return cur(p)->type == TK_NAME && cur(p)->kw == kw;
}

static bool accept_op(parser *p, int op)
{
    if (!is_op(p, op))
        return false;
    p->i++;
    return true;
}

static bool accept_kw(parser *p, int kw)
{
    if (!is_kw(p, kw))
        return false;
    p->i++;
    return true;
}

/* the end of the last token taken */
static size_t last_end(const parser *p)
{
    return p->i ? p->v[p->i - 1].b : 0;
}

static node leaf(const tok *k, int kind)
{
    return (node){.kind = (uint8_t)kind, .ts = k->a, .te = k->b,
                  .ns = k->a, .ne = k->b};
}

/* A node of kind spanning from first's tokens to the last token taken. */
static node spanning(const parser *p, const node *first, int kind)
{
    size_t e = last_end(p);
    return (node){.kind = (uint8_t)kind, .ts = first->ts, .te = e,
                  .ns = first->ts, .ne = e};
}

static bool enter(parser *p)
{
    return ++p->depth <= MAX_DEPTH;
}

/* Can the current token begin an expression? */
static bool starts_expr(const parser *p)
{
    const tok *k = cur(p);
    if (k->type == TK_NUMBER || k->type == TK_STRING)
        return true;
    if (k->type == TK_NAME)
        return k->kw == KW_IDENT || k->kw == KW_TRUE || k->kw == KW_FALSE ||
               k->kw == KW_NONE || k->kw == KW_NOT || k->kw == KW_LAMBDA ||
               k->kw == KW_AWAIT;
    if (k->type != TK_OP)
        return false;
    return k->op == OP_LPAR || k->op == OP_LSQB || k->op == OP_LBRACE ||
           k->op == OP_MINUS || k->op == OP_PLUS || k->op == OP_TILDE ||
           k->op == OP_STAR || k->op == OP_ELLIPSIS;
}

static bool p_expression(parser *p, node *out);
static bool p_named(parser *p, node *out);
static bool p_star_named(parser *p, node *out);
static bool p_bitor(parser *p, node *out);
static bool p_disjunction(parser *p, node *out);
static bool p_star_expressions(parser *p, node *out);
static bool p_yield(parser *p, node *out);

/* for_if_clauses: (['async'] 'for' targets 'in' disjunction
 * ('if' disjunction)*)+ */
static bool p_comprehension(parser *p)
{
    node n;
    bool any = false;
    for (;;) {
        if (is_kw(p, KW_ASYNC) && peek(p, 1)->type == TK_NAME &&
            peek(p, 1)->kw == KW_FOR)
            p->i++;
        if (!accept_kw(p, KW_FOR))
            return any;
        any = true;
        do {
            accept_op(p, OP_STAR);
            if (!p_bitor(p, &n))
                return false;
        } while (accept_op(p, OP_COMMA) && !is_kw(p, KW_IN));
        if (!accept_kw(p, KW_IN) || !p_disjunction(p, &n))
            return false;
        while (accept_kw(p, KW_IF))
            if (!p_disjunction(p, &n))
                return false;
    }
}

static bool starts_comprehension(const parser *p)
{
    return is_kw(p, KW_FOR) ||
           (is_kw(p, KW_ASYNC) && peek(p, 1)->kw == KW_FOR);
}

/* '(' ... ')': a tuple, a generator expression (both spanning the
 * parentheses), or a parenthesized expression (its node is the inner
 * one). */
static bool p_paren(parser *p, node *out)
{
    const tok *open = cur(p);
    p->i++;
    node first;
    if (accept_op(p, OP_RPAR)) {
        *out = leaf(open, K_TUPLE);
        out->te = out->ne = last_end(p);
        return true;
    }
    bool ok = is_kw(p, KW_YIELD) ? p_yield(p, &first)
                                 : p_star_named(p, &first);
    if (!ok)
        return false;
    node whole = leaf(open, K_OTHER);
    if (first.kind != K_STARRED && starts_comprehension(p)) {
        if (!p_comprehension(p) || !accept_op(p, OP_RPAR))
            return false;
        *out = spanning(p, &whole, K_OTHER);
        return true;
    }
    if (accept_op(p, OP_RPAR)) {
        if (first.kind == K_STARRED)
            return false;
        *out = first;
        out->ts = open->a;
        out->te = last_end(p);
        return true;
    }
    if (!accept_op(p, OP_COMMA))
        return false;
    while (!accept_op(p, OP_RPAR)) {
        node n;
        if (!p_star_named(p, &n) ||
            (!accept_op(p, OP_COMMA) && !is_op(p, OP_RPAR)))
            return false;
    }
    *out = spanning(p, &whole, K_TUPLE);
    return true;
}

/* '[' ... ']': a list or a list comprehension. */
static bool p_list(parser *p, node *out)
{
    node whole = leaf(cur(p), K_OTHER), n;
    p->i++;
    if (!accept_op(p, OP_RSQB)) {
        if (!p_star_named(p, &n))
            return false;
        if (starts_comprehension(p)) {
            if ((n.kind == K_STARRED && p->minor < 15) ||
                !p_comprehension(p) || !accept_op(p, OP_RSQB))
                return false;
        } else {
            while (!accept_op(p, OP_RSQB)) {
                if (!accept_op(p, OP_COMMA))
                    return false;
                if (!is_op(p, OP_RSQB) && !p_star_named(p, &n))
                    return false;
            }
        }
    }
    *out = spanning(p, &whole, K_OTHER);
    return true;
}

/* One item of a dict display: '**' or, key ':' value; *dict tells which
 * the first one was (-1: not known yet). */
static bool p_brace_item(parser *p, int *dict, bool *starred)
{
    node n;
    *starred = false;
    if (*dict != 0 && accept_op(p, OP_POW)) {
        *dict = 1;
        *starred = true;
        return p_bitor(p, &n);
    }
    if (!p_star_named(p, &n))
        return false;
    *starred = n.kind == K_STARRED;
    if (*dict == 0 || n.kind == K_STARRED || !is_op(p, OP_COLON)) {
        if (*dict == 1)
            return false;
        *dict = 0;
        return true;
    }
    p->i++;
    *dict = 1;
    return p_expression(p, &n);
}

/* '{' ... '}': a dict, a set, or their comprehensions. */
static bool p_brace(parser *p, node *out)
{
    node whole = leaf(cur(p), K_OTHER);
    p->i++;
    int dict = -1;
    bool starred;
    if (!accept_op(p, OP_RBRACE)) {
        if (!p_brace_item(p, &dict, &starred))
            return false;
        if (starts_comprehension(p)) {
            if ((starred && p->minor < 15) || !p_comprehension(p) ||
                !accept_op(p, OP_RBRACE))
                return false;
        } else {
            while (!accept_op(p, OP_RBRACE)) {
                if (!accept_op(p, OP_COMMA))
                    return false;
                if (!is_op(p, OP_RBRACE) && !p_brace_item(p, &dict, &starred))
                    return false;
            }
        }
    }
    *out = spanning(p, &whole, K_OTHER);
    return true;
}

/* Adjacent strings are one node; bytes do not mix with str, nor
 * t-strings with others. */
static bool p_strings(parser *p, node *out)
{
    const tok *first = cur(p);
    uint8_t kind = first->str;
    while (cur(p)->type == TK_STRING) {
        if (cur(p)->str != kind)
            return false;
        p->i++;
    }
    *out = leaf(first, K_OTHER);
    out->te = out->ne = last_end(p);
    return true;
}

static bool p_atom(parser *p, node *out)
{
    const tok *k = cur(p);
    if (k->type == TK_NAME) {
        if (k->kw != KW_IDENT && k->kw != KW_TRUE && k->kw != KW_FALSE &&
            k->kw != KW_NONE)
            return false;
        p->i++;
        *out = leaf(k, k->kw == KW_IDENT ? K_NAME : K_OTHER);
        return true;
    }
    if (k->type == TK_NUMBER || (k->type == TK_OP && k->op == OP_ELLIPSIS)) {
        p->i++;
        *out = leaf(k, K_OTHER);
        return true;
    }
    if (k->type == TK_STRING)
        return p_strings(p, out);
    bool ok = enter(p);
    ok = ok && (is_op(p, OP_LPAR) ? p_paren(p, out)
            : is_op(p, OP_LSQB) ? p_list(p, out)
            : is_op(p, OP_LBRACE) ? p_brace(p, out) : false);
    p->depth--;
    return ok;
}

/* A call's arguments, from its '(' to its ')': positional ones (or one
 * bare generator expression), then keywords, '*' and '**' in the order
 * Python allows. */
static bool p_args(parser *p)
{
    p->i++;
    bool keyword = false, dstar = false;
    int count = 0;
    node n;
    while (!accept_op(p, OP_RPAR)) {
        if (accept_op(p, OP_STAR)) {
            if (dstar || !p_expression(p, &n))
                return false;
        } else if (accept_op(p, OP_POW)) {
            dstar = true;
            if (!p_expression(p, &n))
                return false;
        } else if (cur(p)->type == TK_NAME && cur(p)->kw == KW_IDENT &&
                   peek(p, 1)->type == TK_OP && peek(p, 1)->op == OP_EQ) {
            p->i += 2;
            keyword = true;
            if (!p_expression(p, &n))
                return false;
        } else {
            if (keyword || dstar || !p_named(p, &n))
                return false;
            if (starts_comprehension(p))
                return count == 0 && p_comprehension(p) &&
                       accept_op(p, OP_RPAR);
        }
        count++;
        if (!accept_op(p, OP_COMMA) && !is_op(p, OP_RPAR))
            return false;
    }
    return true;
}

/* slice: [expression] ':' [expression] [':' [expression]], or a named
 * expression; the node's end in *end. */
static bool p_slice(parser *p, size_t *end)
{
    node n;
    if (!is_op(p, OP_COLON)) {
        bool walrus = cur(p)->type == TK_NAME && peek(p, 1)->type == TK_OP &&
                      peek(p, 1)->op == OP_WALRUS;
        if (walrus ? !p_named(p, &n) : !p_expression(p, &n))
            return false;
        *end = n.ne;
        if (walrus || !is_op(p, OP_COLON))
            return true;
    }
    p->i++;
    if (!is_op(p, OP_COLON) && !is_op(p, OP_COMMA) && !is_op(p, OP_RSQB) &&
        !p_expression(p, &n))
        return false;
    if (accept_op(p, OP_COLON) && !is_op(p, OP_COMMA) && !is_op(p, OP_RSQB) &&
        !p_expression(p, &n))
        return false;
    *end = last_end(p);
    return true;
}

/* A subscript's slices, from '[' to ']': the slice node's end in *end (a
 * tuple of them, or of a starred one, ends at its last token). */
static bool p_slices(parser *p, size_t *end)
{
    p->i++;
    bool tuple = false;
    for (;;) {
        if (accept_op(p, OP_STAR)) {
            node n;
            tuple = true;
            if (!p_expression(p, &n))
                return false;
        } else if (!p_slice(p, end)) {
            return false;
        }
        if (!accept_op(p, OP_COMMA))
            break;
        tuple = true;
        if (is_op(p, OP_RSQB))
            break;
    }
    if (tuple)
        *end = last_end(p);
    return accept_op(p, OP_RSQB);
}

/* primary: atom ('.' NAME | '(' args ')' | '[' slices ']')* */
static bool p_primary(parser *p, node *out)
{
    node a;
    if (!p_atom(p, &a))
        return false;
    for (;;) {
        node b;
        if (accept_op(p, OP_DOT)) {
            if (cur(p)->type != TK_NAME || cur(p)->kw != KW_IDENT)
                return false;
            p->i++;
            b = spanning(p, &a, K_OTHER);
        } else if (is_op(p, OP_LPAR)) {
            if (!p_args(p))
                return false;
            b = spanning(p, &a, K_CALL);
            b.fkind = a.kind;
            b.a_end = a.ne;
        } else if (is_op(p, OP_LSQB)) {
            size_t end = 0;
            if (!p_slices(p, &end))
                return false;
            b = spanning(p, &a, K_SUBSCRIPT);
            b.a_end = a.ne;
            b.b_end = end;
        } else {
            break;
        }
        a = b;
    }
    *out = a;
    return true;
}

static node binop(const node *l, const node *r)
{
    return (node){.kind = K_BINOP, .ts = l->ts, .te = r->te, .ns = l->ts,
                  .ne = r->te, .a_end = l->ne, .b_start = r->ns};
}

static bool p_factor(parser *p, node *out);

/* power: ['await'] primary ['**' factor] */
static bool p_power(parser *p, node *out)
{
    node a;
    if (is_kw(p, KW_AWAIT)) {
        node w = leaf(cur(p), K_OTHER);
        p->i++;
        if (!p_primary(p, &a))
            return false;
        a = spanning(p, &w, K_OTHER);
    } else if (!p_primary(p, &a)) {
        return false;
    }
    if (accept_op(p, OP_POW)) {
        node b;
        if (!p_factor(p, &b))
            return false;
        a = binop(&a, &b);
    }
    *out = a;
    return true;
}

/* factor: ('+' | '-' | '~') factor | power */
static bool p_factor(parser *p, node *out)
{
    if (!is_op(p, OP_PLUS) && !is_op(p, OP_MINUS) && !is_op(p, OP_TILDE))
        return p_power(p, out);
    node u = leaf(cur(p), K_OTHER), b;
    p->i++;
    bool ok = enter(p) && p_factor(p, &b);
    p->depth--;
    *out = spanning(p, &u, K_OTHER);
    return ok;
}

/* The binary operators from loosest to tightest: | ^ & << >> + - and
 * * / // % @, each level left-associative. */
static bool binary_at(int level, int op)
{
    switch (level) {
    case 0: return op == OP_PIPE;
    case 1: return op == OP_CARET;
    case 2: return op == OP_AMP;
    case 3: return op == OP_LSHIFT || op == OP_RSHIFT;
    case 4: return op == OP_PLUS || op == OP_MINUS;
    default:
        return op == OP_STAR || op == OP_SLASH || op == OP_FLOORDIV ||
               op == OP_PERCENT || op == OP_AT;
    }
}

static bool p_binary(parser *p, int level, node *out)
{
    if (level > 5)
        return p_factor(p, out);
    node a;
    if (!p_binary(p, level + 1, &a))
        return false;
    while (cur(p)->type == TK_OP && binary_at(level, cur(p)->op)) {
        node b;
        p->i++;
        if (!p_binary(p, level + 1, &b))
            return false;
        a = binop(&a, &b);
    }
    *out = a;
    return true;
}

static bool p_bitor(parser *p, node *out)
{
    return p_binary(p, 0, out);
}

/* A comparison operator (< > == >= <= != in, not in, is, is not) at the
 * current token: taken, true. */
static bool accept_compare(parser *p)
{
    const tok *k = cur(p);
    if (k->type == TK_OP && (k->op == OP_LT || k->op == OP_GT ||
                             k->op == OP_EQEQ || k->op == OP_GE ||
                             k->op == OP_LE || k->op == OP_NE)) {
        p->i++;
        return true;
    }
    if (accept_kw(p, KW_IN))
        return true;
    if (is_kw(p, KW_NOT) && peek(p, 1)->type == TK_NAME &&
        peek(p, 1)->kw == KW_IN) {
        p->i += 2;
        return true;
    }
    if (accept_kw(p, KW_IS)) {
        accept_kw(p, KW_NOT);
        return true;
    }
    return false;
}

static bool p_comparison(parser *p, node *out)
{
    node a, b;
    if (!p_bitor(p, &a))
        return false;
    bool any = false;
    while (accept_compare(p)) {
        any = true;
        if (!p_bitor(p, &b))
            return false;
    }
    *out = any ? spanning(p, &a, K_OTHER) : a;
    return true;
}

static bool p_inversion(parser *p, node *out)
{
    if (!is_kw(p, KW_NOT))
        return p_comparison(p, out);
    node u = leaf(cur(p), K_OTHER), b;
    p->i++;
    bool ok = enter(p) && p_inversion(p, &b);
    p->depth--;
    *out = spanning(p, &u, K_OTHER);
    return ok;
}

/* conjunction ('and') and disjunction ('or') */
static bool p_boolop(parser *p, int kw, node *out)
{
    node a, b;
    if (!(kw == KW_OR ? p_boolop(p, KW_AND, &a) : p_inversion(p, &a)))
        return false;
    bool any = false;
    while (accept_kw(p, kw)) {
        any = true;
        if (!(kw == KW_OR ? p_boolop(p, KW_AND, &b) : p_inversion(p, &b)))
            return false;
    }
    *out = any ? spanning(p, &a, K_OTHER) : a;
    return true;
}

static bool p_disjunction(parser *p, node *out)
{
    return p_boolop(p, KW_OR, out);
}

/* lambda [params] ':' expression; params loosely: names with defaults,
 * '*', '**', '/'. */
static bool p_lambda(parser *p, node *out)
{
    node l = leaf(cur(p), K_OTHER), n;
    p->i++;
    while (!is_op(p, OP_COLON)) {
        if (accept_op(p, OP_STAR) || accept_op(p, OP_POW)) {
            if (cur(p)->type == TK_NAME && cur(p)->kw == KW_IDENT)
                p->i++;
        } else if (!accept_op(p, OP_SLASH)) {
            if (cur(p)->type != TK_NAME || cur(p)->kw != KW_IDENT)
                return false;
            p->i++;
            if (accept_op(p, OP_EQ) && !p_expression(p, &n))
                return false;
        }
        if (!accept_op(p, OP_COMMA))
            break;
    }
    if (!accept_op(p, OP_COLON) || !p_expression(p, &n))
        return false;
    *out = spanning(p, &l, K_OTHER);
    return true;
}

/* expression: lambda | disjunction ['if' disjunction 'else' expression] */
static bool p_expression(parser *p, node *out)
{
    node a = {0}, b;
    bool ok = enter(p);
    if (ok && is_kw(p, KW_LAMBDA)) {
        ok = p_lambda(p, &a);
    } else if (ok) {
        ok = p_disjunction(p, &a);
        if (ok && accept_kw(p, KW_IF)) {
            ok = p_disjunction(p, &b) && accept_kw(p, KW_ELSE) &&
                 p_expression(p, &b);
            a = spanning(p, &a, K_OTHER);
        }
    }
    p->depth--;
    *out = a;
    return ok;
}

/* named_expression: NAME ':=' expression | expression (not before ':=') */
static bool p_named(parser *p, node *out)
{
    if (cur(p)->type == TK_NAME && cur(p)->kw == KW_IDENT &&
        peek(p, 1)->type == TK_OP && peek(p, 1)->op == OP_WALRUS) {
        node a = leaf(cur(p), K_OTHER), b;
        p->i += 2;
        if (!p_expression(p, &b))
            return false;
        *out = spanning(p, &a, K_OTHER);
        return true;
    }
    return p_expression(p, out) && !is_op(p, OP_WALRUS);
}

/* '*' bitwise_or | named_expression */
static bool p_star_named(parser *p, node *out)
{
    if (!is_op(p, OP_STAR))
        return p_named(p, out);
    node s = leaf(cur(p), K_OTHER), b;
    p->i++;
    if (!p_bitor(p, &b))
        return false;
    *out = spanning(p, &s, K_STARRED);
    return true;
}

/* star_expressions, as a statement's: expressions or '*' ones, a tuple
 * when there is a comma; a lone starred one does not parse. */
static bool p_star_expressions(parser *p, node *out)
{
    node first, n;
    bool tuple = false;
    for (;;) {
        node *slot = tuple ? &n : &first;
        if (is_op(p, OP_STAR)) {
            node s = leaf(cur(p), K_OTHER), b;
            p->i++;
            if (!p_bitor(p, &b))
                return false;
            *slot = spanning(p, &s, K_STARRED);
        } else if (!p_expression(p, slot)) {
            return false;
        }
        if (!accept_op(p, OP_COMMA))
            break;
        tuple = true;
        if (!starts_expr(p))
            break;
    }
    if (!tuple && first.kind == K_STARRED)
        return false;
    *out = tuple ? spanning(p, &first, K_TUPLE) : first;
    return true;
}

/* 'yield' 'from' expression | 'yield' [star_expressions] */
static bool p_yield(parser *p, node *out)
{
    node y = leaf(cur(p), K_OTHER), n;
    p->i++;
    if (accept_kw(p, KW_FROM)) {
        if (!p_expression(p, &n))
            return false;
    } else if (starts_expr(p) && !p_star_expressions(p, &n)) {
        return false;
    }
    *out = spanning(p, &y, K_OTHER);
    return true;
}

/* ========================================================== statements */

/* The AST position of code point idx of t: its line (1-based) and its
 * UTF-8 byte offset in that line. */
static void pos_of(const uint32_t *t, size_t idx, long *line, long *col)
{
    long ln = 1;
    size_t start = 0;
    for (size_t i = 0; i < idx; i++)
        if (t[i] == '\n') {
            ln++;
            start = i + 1;
        }
    long bc = 0;
    for (size_t i = start; i < idx; i++)
        bc += (long)u_utf8_len(t[i]);
    *line = ln;
    *col = bc;
}

/* An expression statement or a yield, then optionally ';'. */
static bool p_expr_stmt(parser *p, node *out)
{
    return is_kw(p, KW_YIELD) ? p_yield(p, out) : p_star_expressions(p, out);
}

/* Does text parse (ast.parse) to one expression statement?  Its value in
 * *out. */
static bool expr_statement(sl *c, uv text, node *out)
{
    size_t nv;
    tok *v = tokenize(c, text.p, text.n, &nv);
    if (!v)
        return false;
    parser p = {v, 0, 0, c->minor};
    bool ok = cur(&p)->type != TK_END && p_expr_stmt(&p, out);
    if (ok) {
        accept_op(&p, OP_SEMI);
        if (cur(&p)->type == TK_NEWLINE)
            p.i++;
        ok = cur(&p)->type == TK_END;
    }
    free(v);
    return ok;
}

static bool is_augassign(int op)
{
    return (op >= OP_POWEQ && op <= OP_LSHIFTEQ) ||
           (op >= OP_PLUSEQ && op <= OP_ATEQ);
}

/* the right of an assignment: a yield or star_expressions */
static bool p_assigned(parser *p)
{
    node n;
    return p_expr_stmt(p, &n);
}

/* dotted_name ['as' NAME] */
static bool p_dotted(parser *p, bool as)
{
    do {
        if (cur(p)->type != TK_NAME || cur(p)->kw != KW_IDENT)
            return false;
        p->i++;
    } while (accept_op(p, OP_DOT));
    if (as && accept_kw(p, KW_AS)) {
        if (cur(p)->type != TK_NAME || cur(p)->kw != KW_IDENT)
            return false;
        p->i++;
    }
    return true;
}

/* from ('.' | '...')* [dotted_name] import ('*' | names | '(' names ')') */
static bool p_import_from(parser *p)
{
    while (accept_op(p, OP_DOT) || accept_op(p, OP_ELLIPSIS))
        ;
    if (!is_kw(p, KW_IMPORT) && !p_dotted(p, false))
        return false;
    if (!accept_kw(p, KW_IMPORT))
        return false;
    if (accept_op(p, OP_STAR))
        return true;
    bool paren = accept_op(p, OP_LPAR);
    do {
        if (paren && is_op(p, OP_RPAR))
            break;
        if (cur(p)->type != TK_NAME || cur(p)->kw != KW_IDENT)
            return false;
        p->i++;
        if (accept_kw(p, KW_AS)) {
            if (cur(p)->type != TK_NAME || cur(p)->kw != KW_IDENT)
                return false;
            p->i++;
        }
    } while (accept_op(p, OP_COMMA));
    return !paren || accept_op(p, OP_RPAR);
}

/* A simple statement (of those after a ';'), loosely. */
static bool p_small_stmt(parser *p)
{
    node n;
    int kw = cur(p)->type == TK_NAME ? cur(p)->kw : KW_IDENT;
    if (kw == KW_PASS || kw == KW_BREAK || kw == KW_CONTINUE) {
        p->i++;
        return true;
    }
    if (kw == KW_RETURN || kw == KW_DEL) {
        p->i++;
        return !starts_expr(p) || p_star_expressions(p, &n);
    }
    if (kw == KW_RAISE) {
        p->i++;
        if (!starts_expr(p))
            return true;
        return p_expression(p, &n) &&
               (!accept_kw(p, KW_FROM) || p_expression(p, &n));
    }
    if (kw == KW_GLOBAL || kw == KW_NONLOCAL) {
        p->i++;
        do {
            if (cur(p)->type != TK_NAME || cur(p)->kw != KW_IDENT)
                return false;
            p->i++;
        } while (accept_op(p, OP_COMMA));
        return true;
    }
    if (kw == KW_ASSERT) {
        p->i++;
        return p_expression(p, &n) &&
               (!accept_op(p, OP_COMMA) || p_expression(p, &n));
    }
    if (kw == KW_IMPORT) {
        p->i++;
        do {
            if (!p_dotted(p, true))
                return false;
        } while (accept_op(p, OP_COMMA));
        return true;
    }
    if (kw == KW_FROM) {
        p->i++;
        return p_import_from(p);
    }
    if (!p_expr_stmt(p, &n))
        return false;
    if (is_op(p, OP_EQ)) {
        while (accept_op(p, OP_EQ))
            if (!p_assigned(p))
                return false;
        return true;
    }
    if (cur(p)->type == TK_OP && is_augassign(cur(p)->op)) {
        p->i++;
        return p_assigned(p);
    }
    if (accept_op(p, OP_COLON))
        return p_expression(p, &n) && (!accept_op(p, OP_EQ) || p_assigned(p));
    return true;
}

/* After a first statement: the rest of a module of simple statements. */
static bool p_rest(parser *p)
{
    for (;;) {
        if (cur(p)->type == TK_END)
            return true;
        if (cur(p)->type != TK_NEWLINE && !accept_op(p, OP_SEMI))
            return false;
        if (cur(p)->type == TK_NEWLINE)
            p->i++;
        if (cur(p)->type == TK_END)
            return true;
        if (!p_small_stmt(p))
            return false;
    }
}

/* Is node n exactly the instruction's span: from byte column start of
 * the first line to byte column end of line nlines?  (CPython compares
 * the AST's byte columns with its character offsets, as here.) */
static bool spans_lines(const uint32_t *t, const node *n, long start,
                        long end, long nlines)
{
    long l1, c1, l2, c2;
    pos_of(t, n->ns, &l1, &c1);
    pos_of(t, n->ne, &l2, &c2);
    return l1 == 1 && c1 == start && l2 == nlines && c2 == end;
}

/* The first half of 3.13's _should_show_carets: the lines parse, and
 * either have no statement, or begin with "return f(...)" (f a name) or
 * "x = ...(...)" whose call is the instruction's whole span: no carets
 * then. */
static bool hide_carets(sl *c, uv text, long start, long end, long nlines)
{
    size_t nv;
    tok *v = tokenize(c, text.p, text.n, &nv);
    if (!v)
        return false;
    parser p = {v, 0, 0, c->minor};
    node target, value = {0};
    bool shaped = false, hide = false;
    if (cur(&p)->type == TK_END) {
        hide = true;
    } else if (accept_kw(&p, KW_RETURN)) {
        shaped = starts_expr(&p) && p_star_expressions(&p, &value) &&
                 value.kind == K_CALL && value.fkind == K_NAME;
    } else if (starts_expr(&p) && p_star_expressions(&p, &target) &&
               accept_op(&p, OP_EQ)) {
        shaped = p_expr_stmt(&p, &value) && !is_op(&p, OP_EQ) &&
                 target.kind == K_NAME && value.kind == K_CALL;
    }
    if (shaped)
        hide = spans_lines(text.p, &value, start, end, nlines) && p_rest(&p);
    free(v);
    return hide;
}

/* ============================================================= anchors */

/* Where the secondary carets ('^', among '~') go: from (left_line,
 * left_col) to before (right_line, right_col); lines count from the
 * segment's first, columns in characters. */
typedef struct anchors {
    long left_line, left_col, right_line, right_col;
} anchors;

/* The helpers of 3.13's _extract_caret_anchors_from_line_segment over
 * the segment's lines (str.splitlines); false where Python raises. */
static bool a_normalize(const uvlist *l, long ln, long off, long *col)
{
    uv line;
    if (!ul_get(l, ln, &line))
        return false;
    *col = uv_b2c(line, off);
    return true;
}

/* next_valid_char: past the ends of lines to a character */
static bool a_next_valid(const uvlist *l, long *ln, long *col)
{
    uv line;
    while (*ln < (long)l->n) {
        if (!ul_get(l, *ln, &line))
            return false;
        if (*col < (long)line.n)
            break;
        *col = 0;
        (*ln)++;
    }
    return *ln < (long)l->n && ul_get(l, *ln, &line) && *col < (long)line.n;
}

enum stop { STOP_OPERATOR, STOP_LSQB, STOP_LPAR };

static bool a_stops(int stop, uint32_t ch)
{
    if (stop == STOP_OPERATOR)
        return !u_isspace(ch) && ch != ')';
    return ch == (stop == STOP_LSQB ? '[' : '(');
}

/* increment_until: to the first character stop accepts, a backslash or
 * '#' skipping to the next line. */
static bool a_until(const uvlist *l, long *ln, long *col, int stop,
                    size_t chars)
{
    for (size_t guard = 0; guard <= 2 * chars + 2 * l->n + 4; guard++) {
        uv line;
        if (!ul_get(l, *ln, &line) || *col < 0 || *col >= (long)line.n)
            return false;
        uint32_t ch = line.p[*col];
        if (ch == '\\' || ch == '#') {
            (*ln)++;
            *col = 0;
        } else if (!a_stops(stop, ch)) {
            (*col)++;
        } else {
            return true;
        }
        if (!a_next_valid(l, ln, col))
            return false;
    }
    return false;
}

/* setup_positions: the end (force: a valid character at or after it) of
 * the node ending at code point idx of the wrapped text "(\n" seg "\n)" */
static bool a_setup(const uvlist *l, const uint32_t *w, size_t idx,
                    bool force, long *ln, long *col)
{
    long wl, bc;
    pos_of(w, idx, &wl, &bc);
    *ln = wl - 2;
    if (!a_normalize(l, *ln, bc, col))
        return false;
    return !force || a_next_valid(l, ln, col);
}

/* The operator of a BinOp: its first character after the left operand
 * (past spaces and ')'), and a second one unless that is a space, a
 * backslash or '#', or the right operand's start. */
static bool a_binop(const uvlist *l, const uint32_t *w, const node *top,
                    size_t chars, anchors *a)
{
    long ln, col;
    if (!a_setup(l, w, top->a_end, true, &ln, &col) ||
        !a_until(l, &ln, &col, STOP_OPERATOR, chars))
        return false;
    uv line;
    if (!ul_get(l, ln, &line))
        return false;
    long right = col + 1;
    if (right < (long)line.n) {
        long rl, rbc, rc = 0;
        pos_of(w, top->b_start, &rl, &rbc);
        bool before = rl - 2 > ln;
        if (!before) {
            if (!a_normalize(l, rl - 2, rbc, &rc))
                return false;
            before = right < rc;
        }
        uint32_t ch = line.p[right];
        if (before && !u_isspace(ch) && ch != '\\' && ch != '#')
            right++;
    }
    *a = (anchors){ln, col, ln, right};
    return true;
}

/* A Subscript's or a Call's: from its '[' or '(' after the value or
 * function to its end. */
static bool a_brackets(const uvlist *l, const uint32_t *w, const node *top,
                       size_t chars, anchors *a)
{
    int stop = top->kind == K_SUBSCRIPT ? STOP_LSQB : STOP_LPAR;
    return a_setup(l, w, top->a_end, true, &a->left_line, &a->left_col) &&
           a_until(l, &a->left_line, &a->left_col, stop, chars) &&
           a_setup(l, w, top->ne, false, &a->right_line, &a->right_col);
}

/* 3.13's anchors of a segment, parsed as "(\n" segment "\n)". */
static bool anchors313(sl *c, uv seg, anchors *a)
{
    ustr w = {0};
    us_adda(c, &w, "(\n");
    us_add(c, &w, seg);
    us_adda(c, &w, "\n)");
    node top;
    bool ok = !c->failed && expr_statement(c, us_view(&w), &top) &&
              (top.kind == K_BINOP || top.kind == K_SUBSCRIPT ||
               top.kind == K_CALL);
    uvlist lines = {0};
    if (ok) {
        uv_splitlines(c, seg, false, &lines);
        ok = !c->failed &&
             (top.kind == K_BINOP ? a_binop(&lines, w.p, &top, seg.n, a)
                                  : a_brackets(&lines, w.p, &top, seg.n, a));
    }
    ul_free(&lines);
    us_free(&w);
    return ok;
}

/* 3.11's anchors of a one-line segment: for a BinOp, its operator's one
 * or two characters after the left operand's end (skipping spaces, but
 * not a ')'); for a Subscript, from the value's end to one past the
 * slice's.  Offsets in characters of the segment. */
static bool anchors311(sl *c, uv seg, long *left, long *right)
{
    node top;
    if (!expr_statement(c, seg, &top))
        return false;
    long ln, lbc, rbc;
    if (top.kind == K_BINOP) {
        pos_of(seg.p, top.a_end, &ln, &lbc);
        pos_of(seg.p, top.b_start, &ln, &rbc);
        uv op = uv_slice(seg, uv_b2c(seg, lbc), uv_b2c(seg, rbc));
        long skip = (long)uv_lspace(op);
        long la = lbc + skip, ra = la + 1;
        if (skip + 1 < (long)op.n && !u_isspace(op.p[skip + 1]))
            ra++;
        *left = uv_b2c(seg, la);
        *right = uv_b2c(seg, ra);
        return true;
    }
    if (top.kind == K_SUBSCRIPT) {
        pos_of(seg.p, top.a_end, &ln, &lbc);
        pos_of(seg.p, top.b_end, &ln, &rbc);
        *left = uv_b2c(seg, lbc);
        *right = uv_b2c(seg, rbc + 1);
        return true;
    }
    return false;
}

/* ============================================================ 3.11 */

/* 3.11's format_frame_summary, below its first line. */
static void fmt311(sl *c, const src *s, long line, long end_line, long col,
                   long end_col, ustr *out)
{
    ustr raw = {0};
    bool found;
    src_lines(c, s, line, 1, &raw, &found);
    uv r = us_view(&raw); /* the line with its '\n', as linecache's */
    uv st = uv_strip(r);
    if (!found || !st.n || c->failed)
        goto out;
    us_adda(c, out, "    ");
    us_add(c, out, st);
    us_addc(c, out, '\n', 1);
    if (col < 0 || end_col < 0)
        goto out;
    /* (counts the newline and any trailing spaces as indentation, which
     * the 1-based offsets make up for when there are no trailing ones) */
    long stripped = (long)r.n - (long)st.n;
    long start = uv_b2c(r, col) + 1, end = uv_b2c(r, end_col) + 1;
    long left = 0, right = 0;
    bool have = false;
    if (line == end_line)
        have = anchors311(c, uv_slice(r, start - 1, end - 1), &left, &right);
    else
        end = stripped + (long)st.n;
    if (end - start < (long)st.n || (have && right - left > 0)) {
        us_adda(c, out, "    ");
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
    us_free(&raw);
}

/* ======================================================= 3.13 and later */

/* _should_show_carets: not when hide_carets says so; else when there are
 * anchors, or code before the span on its first line or after it on its
 * last. */
static bool show_carets(sl *c, long start, long end, const uvlist *all,
                        bool have)
{
    ustr text = {0};
    ul_join_nl(c, all, 0, all->n, &text);
    bool hide = hide_carets(c, us_view(&text), start, end, (long)all->n);
    us_free(&text);
    if (hide)
        return false;
    if (have)
        return true;
    uv first = all->v[0], last = all->v[all->n - 1];
    return uv_lstrip(uv_slice(first, 0, start)).n ||
           uv_rstrip(uv_slice(last, end, (long)last.n)).n;
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
    if (!ul_get(sp->all, ln, &line)) { /* (an IndexError in Python) */
        c->failed = true;
        return;
    }
    us_add(c, res, line);
    us_addc(c, res, '\n', 1);
    if (!sp->show)
        return;
    long spaces = (long)uv_lspace(line);
    long carets = ln == (long)sp->all->n - 1 ? sp->dp_end
                                             : display_width(c, line, -1);
    if (carets > 0 && !us_room(c, res, (size_t)carets))
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
            us_adda(c, res, buf);
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
    if (!ul_get(sp->all, a->left_line, &ll) ||
        !ul_get(sp->all, a->right_line, &rl)) {
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
    uv_split_nl(c, us_view(&buf), &raw);
    for (long i = 0; i < count && (size_t)i < raw.n; i++) {
        if (i)
            us_addc(c, joined, '\n', 1);
        us_add(c, joined, uv_rstrip(raw.v[i]));
    }
    us_addc(c, joined, '\n', 1);
    if (raw.n)
        us_add(c, first, uv_strip(raw.v[0]));
    ul_free(&raw);
    us_free(&buf);
}

/* With columns: the carets' lines, from the original and dedented
 * lines. */
static void fmt313_span(sl *c, uv joined, uv ded, long count, long col,
                        long end_col, ustr *out)
{
    uvlist orig = {0}, all = {0};
    ustr segbuf = {0}, res = {0}, res_ded = {0};
    uv first, last;
    uv_splitlines(c, joined, false, &orig);
    uv_splitlines(c, ded, false, &all);
    if (all.n > (size_t)count)
        all.n = (size_t)count;
    if (c->failed || !all.n || !ul_get(&orig, 0, &first) ||
        !ul_get(&orig, count - 1, &last)) {
        c->failed = true;
        goto out;
    }
    long dedented = (long)first.n - (long)all.v[0].n;
    long start = uv_b2c(first, col) - dedented;
    long end = uv_b2c(last, end_col) - dedented;
    start = start < 0 ? 0 : start;
    end = end < 0 ? 0 : end;
    uv l0 = all.v[0], ll = all.v[all.n - 1];
    span sp = {.all = &all, .primary = '^', .secondary = '^'};
    sp.dp_start = display_width(c, l0, start);
    sp.dp_end = display_width(c, ll, end);
    ul_join_nl(c, &all, 0, all.n, &segbuf);
    uv seg = uv_slice(us_view(&segbuf), start,
                      (long)segbuf.n - ((long)ll.n - end));
    sp.have = anchors313(c, seg, &sp.a);
    sp.show = show_carets(c, start, end, &all, sp.have);
    if (sp.have && !anchors_display(c, &sp, start))
        goto out;
    output_lines(c, &sp, &res);
    dedent(c, us_view(&res), &res_ded);
    indent(c, us_view(&res_ded), "    ", true, out);
out:
    ul_free(&orig);
    ul_free(&all);
    us_free(&segbuf);
    us_free(&res);
    us_free(&res_ded);
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
    dedent(c, us_view(&joined), &ded);
    if (c->failed || !uv_strip(us_view(&ded)).n)
        goto out;
    if (col < 0 || end_col < 0) { /* the first line only */
        indent(c, us_view(&first), "    ", false, out);
        us_addc(c, out, '\n', 1);
    } else {
        fmt313_span(c, us_view(&joined), us_view(&ded), count, col, end_col,
                    out);
    }
out:
    us_free(&joined);
    us_free(&first);
    us_free(&ded);
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

void pyu_source_lines(FILE *out, const char *text, size_t len, int minor,
                      int line, int end_line, int col, int end_col)
{
    if (!out || (!text && len) || line <= 0)
        return;
    sl c = {minor <= 12 ? 11 : minor > 15 ? 15 : minor, false};
    src s;
    if (!src_open(&c, text ? text : "", len, &s))
        return;
    ustr o = {0};
    if (col < 0 || end_col < 0)
        col = end_col = -1;
    if (c.minor == 11)
        fmt311(&c, &s, line, end_line, col, end_col, &o);
    else
        fmt313(&c, &s, line, end_line, col, end_col, &o);
    if (!c.failed)
        write_utf8(out, us_view(&o));
    us_free(&o);
}
