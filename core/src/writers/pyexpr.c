/* Python expressions and simple statements, parsed in place of ast.parse
 * to find where a traceback's carets go (for source_lines.c).
 *
 * The traceback module parses the text under the running instruction
 * with ast.parse and looks at the node it gets: a BinOp, a Subscript or
 * (3.13 and later) a Call gets anchors, the '^' under its operator or
 * brackets among '~'; and 3.13's _should_show_carets shows no carets for
 * lines with no statement, or lines that begin "return f(...)" or
 * "x = f(...)" where the call is the instruction's whole span.  We cannot
 * run Python, and the text is the target's source file, untrusted and cut
 * anywhere by the span: here a tokenizer and a recursive-descent parser
 * give the node positions ast.parse would, and "does not parse" wherever
 * it would raise (then there are no anchors).
 *
 * What it recognises: Python's tokens (names and keywords, numbers,
 * strings with their prefixes, f-strings with their replacement fields as
 * the tokenizer of 3.12 and later reads them, t-strings from 3.14,
 * operators and brackets, comments, backslash continuations); every kind
 * of expression (lambda, conditional, boolean, comparison, binary, unary,
 * await, attributes, calls, subscripts and slices, displays and
 * comprehensions, yield, ':='); and simple statements (expressions,
 * assignments plain, augmented and annotated, return, del, raise, global,
 * nonlocal, assert, import, pass, break, continue) separated by ';' or
 * newlines.  No compound statements: an indented first line does not
 * parse, as there is no block here.  A node keeps only what the traceback
 * module asks of it: its kind and its children's positions.
 *
 * Its bounds: every loop is bounded by the text's length; brackets nest at
 * most MAX_LEVEL deep and f-strings MAX_FSTRING_LEVEL (the limits of
 * CPython's tokenizer), the parser's recursion MAX_DEPTH (ours: deeper, a
 * segment has no anchors where CPython might find some).  Identifiers are
 * told apart by a table of what they cannot contain rather than by
 * XID_Start/XID_Continue.
 *
 * The Unicode facts and Python str operations it needs (code point
 * strings, views, splitlines) are here too, and source_lines.c uses them:
 * source_lines.c calls this file, never the reverse. */
#include "pyexpr.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* ======================================================== Unicode facts */

/* str.isspace(): Python's whitespace (Zs, and bidi classes WS, B, S). */
bool pyu_u_isspace(uint32_t c)
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

bool pyu_u_in(const urange *r, size_t n, uint32_t c, int minor)
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

/* ============================================================== strings */

void pyu_us_free(ustr *s)
{
    free(s->p);
    *s = (ustr){0};
}

void pyu_ul_free(uvlist *l)
{
    free(l->v);
    *l = (uvlist){0};
}

uv pyu_us_view(const ustr *s)
{
    return (uv){s->p, s->n};
}

/* Room for more code points; false (and c->failed) when there is none. */
bool pyu_us_room(sl *c, ustr *s, size_t more)
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

void pyu_us_add(sl *c, ustr *s, uv v)
{
    if (v.n && pyu_us_room(c, s, v.n)) {
        memcpy(s->p + s->n, v.p, v.n * sizeof *v.p);
        s->n += v.n;
    }
}

void pyu_us_adda(sl *c, ustr *s, const char *ascii)
{
    size_t n = strlen(ascii);
    if (pyu_us_room(c, s, n))
        for (size_t i = 0; i < n; i++)
            s->p[s->n++] = (unsigned char)ascii[i];
}

void pyu_ul_add(sl *c, uvlist *l, uv v)
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
uv pyu_uv_at(const uint32_t *p, size_t off, size_t n)
{
    return (uv){p ? p + off : p, n};
}

/* s[a:b] for a, b >= 0, as Python slices (clamped, empty when a >= b). */
uv pyu_uv_slice(uv s, long a, long b)
{
    size_t lo = a < 0 ? 0 : (size_t)a, hi = b < 0 ? 0 : (size_t)b;
    if (hi > s.n)
        hi = s.n;
    if (lo > hi)
        lo = hi;
    return pyu_uv_at(s.p, lo, hi - lo);
}

size_t pyu_uv_lspace(uv s)
{
    size_t i = 0;
    while (i < s.n && pyu_u_isspace(s.p[i]))
        i++;
    return i;
}

/* str.splitlines(keepends) */
void pyu_uv_splitlines(sl *c, uv s, bool keepends, uvlist *out)
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
        pyu_ul_add(c, out, pyu_uv_at(s.p, start, end - start));
    }
}

/* Python's l[i] for an int i: negative counts from the end; false for an
 * IndexError. */
bool pyu_ul_get(const uvlist *l, long i, uv *out)
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
long pyu_uv_b2c(uv s, long off)
{
    long bytes = 0, n = 0;
    for (size_t i = 0; i < s.n && bytes < off; i++, n++)
        bytes += (long)u_utf8_len(s.p[i]);
    return n;
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
    return !pyu_u_isspace(ch) && !pyu_u_in(not_id, COUNT(not_id), ch, 0);
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
bool pyu_hide_carets(sl *c, uv text, long start, long end, long nlines)
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

/* The helpers of 3.13's _extract_caret_anchors_from_line_segment over
 * the segment's lines (str.splitlines); false where Python raises. */
static bool a_normalize(const uvlist *l, long ln, long off, long *col)
{
    uv line;
    if (!pyu_ul_get(l, ln, &line))
        return false;
    *col = pyu_uv_b2c(line, off);
    return true;
}

/* next_valid_char: past the ends of lines to a character */
static bool a_next_valid(const uvlist *l, long *ln, long *col)
{
    uv line;
    while (*ln < (long)l->n) {
        if (!pyu_ul_get(l, *ln, &line))
            return false;
        if (*col < (long)line.n)
            break;
        *col = 0;
        (*ln)++;
    }
    return *ln < (long)l->n && pyu_ul_get(l, *ln, &line) && *col < (long)line.n;
}

enum stop { STOP_OPERATOR, STOP_LSQB, STOP_LPAR };

static bool a_stops(int stop, uint32_t ch)
{
    if (stop == STOP_OPERATOR)
        return !pyu_u_isspace(ch) && ch != ')';
    return ch == (stop == STOP_LSQB ? '[' : '(');
}

/* increment_until: to the first character stop accepts, a backslash or
 * '#' skipping to the next line. */
static bool a_until(const uvlist *l, long *ln, long *col, int stop,
                    size_t chars)
{
    for (size_t guard = 0; guard <= 2 * chars + 2 * l->n + 4; guard++) {
        uv line;
        if (!pyu_ul_get(l, *ln, &line) || *col < 0 || *col >= (long)line.n)
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
    if (!pyu_ul_get(l, ln, &line))
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
        if (before && !pyu_u_isspace(ch) && ch != '\\' && ch != '#')
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
bool pyu_anchors313(sl *c, uv seg, anchors *a)
{
    ustr w = {0};
    pyu_us_adda(c, &w, "(\n");
    pyu_us_add(c, &w, seg);
    pyu_us_adda(c, &w, "\n)");
    node top;
    bool ok = !c->failed && expr_statement(c, pyu_us_view(&w), &top) &&
              (top.kind == K_BINOP || top.kind == K_SUBSCRIPT ||
               top.kind == K_CALL);
    uvlist lines = {0};
    if (ok) {
        pyu_uv_splitlines(c, seg, false, &lines);
        ok = !c->failed &&
             (top.kind == K_BINOP ? a_binop(&lines, w.p, &top, seg.n, a)
                                  : a_brackets(&lines, w.p, &top, seg.n, a));
    }
    pyu_ul_free(&lines);
    pyu_us_free(&w);
    return ok;
}

/* A BinOp's operator in a one-line segment as 3.11 finds it: from the
 * left operand's end (in bytes) plus the spaces before the operator (in
 * characters), one or two long; *la and *ra still to become characters. */
static void binop_operator(uv seg, const node *top, long *la, long *ra)
{
    long ln, lbc, rbc;
    pos_of(seg.p, top->a_end, &ln, &lbc);
    pos_of(seg.p, top->b_start, &ln, &rbc);
    uv op = pyu_uv_slice(seg, pyu_uv_b2c(seg, lbc), pyu_uv_b2c(seg, rbc));
    long skip = (long)pyu_uv_lspace(op);
    *la = lbc + skip;
    *ra = *la + 1;
    if (skip + 1 < (long)op.n && !pyu_u_isspace(op.p[skip + 1]))
        ++*ra;
}

/* 3.11's anchors of a one-line segment: for a BinOp, its operator's one
 * or two characters after the left operand's end (skipping spaces, but
 * not a ')'); for a Subscript, from the value's end to one past the
 * slice's.  Offsets in characters of the segment. */
bool pyu_anchors311(sl *c, uv seg, long *left, long *right)
{
    node top;
    if (!expr_statement(c, seg, &top))
        return false;
    long ln, lbc, rbc;
    if (top.kind == K_BINOP) {
        long la, ra;
        binop_operator(seg, &top, &la, &ra);
        *left = pyu_uv_b2c(seg, la);
        *right = pyu_uv_b2c(seg, ra);
        return true;
    }
    if (top.kind == K_SUBSCRIPT) {
        pos_of(seg.p, top.a_end, &ln, &lbc);
        pos_of(seg.p, top.b_end, &ln, &rbc);
        *left = pyu_uv_b2c(seg, lbc);
        *right = pyu_uv_b2c(seg, rbc + 1);
        return true;
    }
    return false;
}

/* 3.12's anchors of a one-line segment, which move 3.11's past what
 * surrounds an operand.  A BinOp's operator starts as 3.11's (the left
 * operand's end in bytes plus the spaces before the operator in
 * characters), then moves on, with its end, over spaces, ')' and '#' --
 * stepping through the segment's characters by that mixed number, as
 * CPython does -- before both become characters.  A Subscript's left
 * anchor moves from the value's end to its '[', its right one from one
 * past the slice's end to the ']', and past it when there is one. */
bool pyu_anchors312(sl *c, uv seg, long *left, long *right)
{
    node top;
    if (!expr_statement(c, seg, &top))
        return false;
    long ln, lbc, rbc, n = (long)seg.n;
    if (top.kind == K_BINOP) {
        long la, ra;
        binop_operator(seg, &top, &la, &ra);
        while (la < n && (pyu_u_isspace(seg.p[la]) || seg.p[la] == ')' ||
                          seg.p[la] == '#')) {
            la++;
            ra++;
        }
        *left = pyu_uv_b2c(seg, la);
        *right = pyu_uv_b2c(seg, ra);
        return true;
    }
    if (top.kind == K_SUBSCRIPT) {
        pos_of(seg.p, top.a_end, &ln, &lbc);
        pos_of(seg.p, top.b_end, &ln, &rbc);
        long la = pyu_uv_b2c(seg, lbc), ra = pyu_uv_b2c(seg, rbc + 1);
        while (la < n && seg.p[la] != '[')
            la++;
        while (ra < n && seg.p[ra] != ']')
            ra++;
        if (ra < n)
            ra++;
        *left = la;
        *right = ra;
        return true;
    }
    return false;
}
