/* Open-addressing tables keyed by a remote address, the string table built
 * on them (remote address -> owned UTF-8 copy), indexes over arrays
 * (pyu_ix) and growing arrays. */
#include "../internal.h"

#include <stdlib.h>
#include <string.h>

bool pyu_table_grow(void **slots, size_t *cap, size_t el, size_t first)
{
    size_t ncap = *cap ? *cap * 2 : first;
    char *nt = calloc(ncap, el);
    if (!nt)
        return false;
    for (size_t k = 0; k < *cap; k++) {
        const char *e = (const char *)*slots + k * el;
        uint64_t key, other;
        memcpy(&key, e, 8);
        if (!key)
            continue;
        size_t i = pyu_slot(key, ncap);
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

bool pyu_ix_grow(pyu_ix *x)
{
    size_t ncap = x->cap ? x->cap * 2 : 64;
    pyu_ix_slot *ns = calloc(ncap, sizeof *ns);
    if (!ns)
        return false;
    for (size_t k = 0; k < x->cap; k++) {
        if (!x->slots[k].elem1)
            continue;
        size_t i = x->slots[k].hash & (ncap - 1);
        while (ns[i].elem1)
            i = (i + 1) & (ncap - 1);
        ns[i] = x->slots[k];
    }
    free(x->slots);
    x->slots = ns;
    x->cap = ncap;
    return true;
}

bool pyu_grow(void **array, size_t n, size_t *cap, size_t el)
{
    if (n < *cap)
        return true;
    size_t ncap = *cap ? *cap * 2 : 8;
    void *a = realloc(*array, ncap * el);
    if (!a)
        return false;
    *array = a;
    *cap = ncap;
    return true;
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

#define STRTAB_FIRST 32

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
    size_t i = pyu_slot(key, t->cap);
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
        !pyu_table_grow((void **)&t->slots, &t->cap, sizeof *t->slots,
                        STRTAB_FIRST))
        return NULL;
    size_t i = pyu_slot(key, t->cap);
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
