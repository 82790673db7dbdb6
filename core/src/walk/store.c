/* What a result (a dump, a task list) owns: copies of the target's strings
 * keyed by their remote address, texts without one (error messages), and
 * a memo of each code object's copied names.  A result is independent of
 * the session, whose caches may be flushed while it is built. */
#include "../internal.h"

#include <stdlib.h>
#include <string.h>

typedef struct memo {
    uint64_t code; /* 0: free slot */
    uint64_t epoch;
    const pyu_code *c; /* the session's record, while the epoch holds */
    const char *function, *name, *file;
} memo;

struct pyu_store {
    pyu_strtab *strings;
    char **own; /* texts without a key */
    size_t nown, capown;
    memo *memos; /* open addressing by code address */
    size_t capmemo, nmemo;
    memo *last;  /* the one used last (frames of one code come in runs);
                    NULL when the table moved */
};

pyu_store *pyu_store_new(void)
{
    pyu_store *st = calloc(1, sizeof *st);
    if (st && !(st->strings = pyu_strtab_new())) {
        free(st);
        return NULL;
    }
    return st;
}

void pyu_store_free(pyu_store *st)
{
    if (!st)
        return;
    pyu_strtab_free(st->strings);
    for (size_t i = 0; i < st->nown; i++)
        free(st->own[i]);
    free(st->own);
    free(st->memos);
    free(st);
}

const char *pyu_store_str(pyu_store *st, uint64_t key, const char *text)
{
    if (key)
        return pyu_strtab_put(st->strings, key, text, strlen(text));
    if (st->nown == st->capown) {
        size_t ncap = st->capown ? st->capown * 2 : 8;
        char **o = realloc(st->own, ncap * sizeof *o);
        if (!o)
            return NULL;
        st->own = o;
        st->capown = ncap;
    }
    char *copy = strdup(text);
    if (copy)
        st->own[st->nown++] = copy;
    return copy;
}

static memo *memo_slot(pyu_store *st, uint64_t code)
{
    if (st->last && st->last->code == code)
        return st->last;
    if (st->nmemo * 2 >= st->capmemo) {
        st->last = NULL;
        if (!pyu_table_grow((void **)&st->memos, &st->capmemo,
                            sizeof *st->memos, 32))
            return NULL;
    }
    size_t i = pyu_slot(code, st->capmemo);
    while (st->memos[i].code && st->memos[i].code != code)
        i = (i + 1) & (st->capmemo - 1);
    if (!st->memos[i].code) {
        st->memos[i].code = code;
        st->memos[i].epoch = UINT64_MAX; /* names not copied yet */
        st->nmemo++;
    }
    return st->last = &st->memos[i];
}

int pyu_store_frame(pyu_store *st, pyu_session *s, const pyu_walk_frame *f,
                    pyu_frame *out)
{
    memo *m = memo_slot(st, f->code_addr);
    if (!m)
        return pyu_fail(&s->err, PYU_E_NOMEM, "out of memory");
    if (m->epoch != f->epoch || f->epoch != s->code_epoch) {
        const pyu_code *c = pyu_walk_code(s, f);
        if (!c)
            return pyu_fail(&s->err, PYU_E_STATE, "a frame's code object is "
                            "no longer cached");
        m->function = pyu_store_str(st, c->str_addr[0], c->qualname);
        m->name = pyu_store_str(st, c->str_addr[1], c->name);
        m->file = pyu_store_str(st, c->str_addr[2], c->filename);
        if (!m->function || !m->name || !m->file)
            return pyu_fail(&s->err, PYU_E_NOMEM, "out of memory");
        m->c = c;
        m->epoch = f->epoch;
    }
    out->function = m->function;
    out->name = m->name;
    out->file = m->file;
    pyu_code_position(m->c, f->instr, out);
    out->code_addr = f->code_addr;
    out->addr = f->addr;
    out->locals = NULL;
    out->nlocals = 0;
    out->locals_error = NULL;
    return 0;
}
