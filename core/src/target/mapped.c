/* The files the target maps, and its writable memory: the one scan of the
 * mappings, for finding _PyRuntime (runtime.c) and the .AsyncioDebug
 * section (asyncio.c).  ELF facts of a file (its section headers, which
 * are not mapped into the process) are read from disk, once, on request. */
#include "../internal.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

#define MAX_FILES 4096

typedef struct gather {
    pyu_mapped *m;
    bool (*want)(const char *base);
    size_t capw;
    bool nomem;
} gather;

static const char *base_name(const char *path)
{
    const char *b = strrchr(path, '/');
    return b ? b + 1 : path;
}

static int gather_fn(void *arg, const pyu_mapping *mp)
{
    gather *g = arg;
    pyu_mapped *m = g->m;
    if ((mp->prot & PYU_PROT_WRITE) && (mp->prot & PYU_PROT_READ)) {
        if (m->nwritable == g->capw) {
            size_t ncap = g->capw ? g->capw * 2 : 64;
            void *a = realloc(m->writable, ncap * sizeof *m->writable);
            if (!a) {
                g->nomem = true;
                return 1;
            }
            m->writable = a;
            g->capw = ncap;
        }
        m->writable[m->nwritable].start = mp->start;
        m->writable[m->nwritable++].end = mp->end;
    }
    if (!mp->path || mp->offset != 0 || m->nfiles >= MAX_FILES ||
        (g->want && !g->want(base_name(mp->path))))
        return 0;
    for (size_t i = 0; i < m->nfiles; i++)
        if (strcmp(m->files[i].path, mp->path) == 0)
            return 0;
    char *p = strdup(mp->path);
    if (!p) {
        g->nomem = true;
        return 1;
    }
    m->files[m->nfiles++] = (pyu_mapped_file){.path = p, .base = mp->start};
    return 0;
}

static int python_first(const void *a, const void *b)
{
    const pyu_mapped_file *x = a, *y = b;
    bool px = strstr(base_name(x->path), "python") != NULL;
    bool py = strstr(base_name(y->path), "python") != NULL;
    if (px != py)
        return py - px;
    return x->base < y->base ? -1 : x->base > y->base;
}

int pyu_mapped_scan(pyu_session *s, bool (*want)(const char *base),
                    pyu_mapped *out)
{
    memset(out, 0, sizeof *out);
    if (!s->ops->mappings)
        return 0;
    out->files = calloc(MAX_FILES, sizeof *out->files);
    if (!out->files)
        return pyu_err_set(&s->err, PYU_E_NOMEM, "out of memory");
    gather g = {out, want, 0, false};
    int rc = s->ops->mappings(s->ctx, gather_fn, &g);
    if (g.nomem)
        rc = pyu_err_set(&s->err, PYU_E_NOMEM, "out of memory");
    else if (rc == -PYU_E_PERM)
        rc = pyu_err_set(&s->err, PYU_E_PERM,
                         "permission denied reading the mappings of "
                         "process %d: %s",
                         s->pid, PYU_PERM_REMEDY);
    else if (rc == -PYU_E_NOPROC)
        rc = pyu_err_set(&s->err, PYU_E_NOPROC, "process %d has exited",
                         s->pid);
    else if (rc < 0)
        rc = pyu_err_set(&s->err, -rc, "listing mappings: %s",
                         pyu_strerror(rc));
    if (rc < 0) {
        pyu_mapped_free(out);
        return rc;
    }
    qsort(out->files, out->nfiles, sizeof *out->files, python_first);
    return 0;
}

const pyu_elf_info *pyu_mapped_inspect(pyu_session *s, pyu_mapped_file *f)
{
    if (f->inspected == 0) {
        char path[PATH_MAX];
        pyu_err ignored;
        f->inspected = -1;
        if (s->ops->file_path) {
            if (s->ops->file_path(s->ctx, f->path, path, sizeof path) < 0)
                return NULL;
        } else {
            snprintf(path, sizeof path, "%s", f->path);
        }
        if (pyu_elf_inspect(path, &f->info, &ignored) == 0)
            f->inspected = 1;
    }
    return f->inspected == 1 ? &f->info : NULL;
}

void pyu_mapped_free(pyu_mapped *m)
{
    for (size_t i = 0; i < m->nfiles; i++)
        free(m->files[i].path);
    free(m->files);
    free(m->writable);
    memset(m, 0, sizeof *m);
}
