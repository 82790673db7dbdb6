/* What the two files of pyu_source_lines share (private to them):
 *
 *   source_lines.c  a frame's source lines and carets as each version's
 *                   traceback module writes them: the file as linecache
 *                   reads it, str operations, per-version formatting
 *   pyexpr.c        the stand-in for ast.parse that finds the carets'
 *                   anchors, and the Unicode facts and str operations
 *                   both files use
 *
 * source_lines.c calls pyexpr.c, never the reverse. */
#ifndef PYU_WRITERS_PYEXPR_H
#define PYU_WRITERS_PYEXPR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* the number of elements of array a */
#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

/* ================================================================ state */

/* One call's state.  failed is sticky: an allocation failed, or CPython
 * would have raised out of the formatting; nothing is written then. */
typedef struct sl {
    int minor; /* whose rules: 11, 12, 13, 14 or 15 */
    bool failed;
    bool late; /* 3.11.7+ and 3.12.1+: columns, and 3.12's anchors */
} sl;

/* ======================================================== Unicode facts */

/* A range [lo, hi] of code points in a table of them, sorted by lo. */
typedef struct urange {
    uint32_t lo, hi;
    uint8_t since; /* the first minor version whose unicodedata says so */
} urange;

/* str.isspace() of one character: Python's whitespace. */
bool pyu_u_isspace(uint32_t c);

/* Is c in the n ranges of r (sorted, not overlapping) as minor's
 * unicodedata has them (a range's since <= minor)? */
bool pyu_u_in(const urange *r, size_t n, uint32_t c, int minor);

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

/* A list of views (as str.split's list): owns its array, borrows what
 * the views point into. */
typedef struct uvlist {
    uv *v;
    size_t n, cap;
} uvlist;

/* Frees s's buffer; s is empty after. */
void pyu_us_free(ustr *s);

/* Frees l's array (not what its views point into); l is empty after. */
void pyu_ul_free(uvlist *l);

/* A view of all of s. */
uv pyu_us_view(const ustr *s);

/* Room in s for more code points; false (and c->failed) when there is
 * none, or c has failed already. */
bool pyu_us_room(sl *c, ustr *s, size_t more);

/* Appends v to s. */
void pyu_us_add(sl *c, ustr *s, uv v);

/* Appends the ASCII string ascii to s. */
void pyu_us_adda(sl *c, ustr *s, const char *ascii);

/* Appends v to l. */
void pyu_ul_add(sl *c, uvlist *l, uv v);

/* n code points from p + off (an empty string's p may be NULL). */
uv pyu_uv_at(const uint32_t *p, size_t off, size_t n);

/* s[a:b] as Python slices it, for a, b >= 0 (clamped, empty when
 * a >= b). */
uv pyu_uv_slice(uv s, long a, long b);

/* The number of whitespace characters s begins with. */
size_t pyu_uv_lspace(uv s);

/* str.splitlines(keepends): s's lines, as views into s, added to out. */
void pyu_uv_splitlines(sl *c, uv s, bool keepends, uvlist *out);

/* Python's l[i] for an int i: negative counts from the end; false for an
 * IndexError. */
bool pyu_ul_get(const uvlist *l, long i, uv *out);

/* traceback's _byte_offset_to_character_offset(s, off): the number of
 * code points of s that begin before its UTF-8 byte off. */
long pyu_uv_b2c(uv s, long off);

/* ============================================================== anchors */

/* Where the secondary carets ('^', among '~') go: from (left_line,
 * left_col) to before (right_line, right_col); lines count from the
 * segment's first, columns in characters. */
typedef struct anchors {
    long left_line, left_col, right_line, right_col;
} anchors;

/* 3.13's (and later) _should_show_carets, its first half: true when text
 * (the span's lines, joined with '\n') parses and has no statement, or
 * begins with "return f(...)" (f a name) or "x = ...(...)" whose call
 * is the instruction's whole span: from column start of the first line
 * to column end of line nlines.  Then no carets. */
bool pyu_hide_carets(sl *c, uv text, long start, long end, long nlines);

/* 3.13's (and later) anchors of a segment (the span's text, its lines
 * joined with '\n'), parsed as "(\n" segment "\n)": for a BinOp its
 * operator, for a Subscript or a Call its brackets after the value or
 * function.  False when there are none (no such node, or the segment
 * does not parse). */
bool pyu_anchors313(sl *c, uv seg, anchors *a);

/* 3.11's anchors of a one-line segment, in characters of the segment:
 * for a BinOp its operator's one or two characters, for a Subscript from
 * the value's end to one past the slice's; false when there are none. */
bool pyu_anchors311(sl *c, uv seg, long *left, long *right);
/* 3.12's, which skip what surrounds the operator or the brackets. */
bool pyu_anchors312(sl *c, uv seg, long *left, long *right);

#endif
