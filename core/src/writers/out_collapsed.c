/* Output: collapsed stacks (Brendan Gregg's format, as CPython 3.15's
 * sampler writes it).
 *
 * One line per (thread, stack): "tid:NATIVE_ID" (after "pid:PID;" when
 * the profile holds several processes), then each frame from the
 * outermost to the innermost as "file:function:line" (the file's base
 * name; a synthetic frame by its bare name), joined by ';', a space and
 * the count (a stack recorded with several statuses: their sum).  Lines
 * by count, most first, then by text.  flamegraph.pl,
 * inferno and speedscope read it; none of them allows a ';' or a line
 * break inside a frame, so those are replaced.
 */
#include "../internal.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

typedef struct line {
    char *text; /* owned: the stack, without the count */
    uint64_t count;
} line;

static void put_clean(FILE *out, const char *s)
{
    for (; *s; s++) {
        char c = *s;
        fputc(c == ';' ? ':' : (c == '\n' || c == '\r') ? ' ' : c, out);
    }
}

static void put_frame(FILE *out, const pyu_profile_data *d, uint32_t frame)
{
    const pyu_profile_frame *f = &d->frames[frame];
    const pyu_profile_func *fn = &d->funcs[f->func];
    if (fn->kind != PYU_FUNC_PYTHON) {
        put_clean(out, fn->name);
        return;
    }
    const char *base = strrchr(fn->file, '/');
    put_clean(out, base ? base + 1 : fn->file);
    fputc(':', out);
    put_clean(out, fn->name);
    fprintf(out, ":%d", f->line);
}

static int cmp_text(const void *a, const void *b)
{
    return strcmp(((const line *)a)->text, ((const line *)b)->text);
}

static int cmp_lines(const void *a, const void *b)
{
    const line *x = a, *y = b;
    if (x->count != y->count)
        return x->count < y->count ? 1 : -1;
    return strcmp(x->text, y->text);
}

int pyu_profile_write_collapsed(pyu_profile *p, FILE *out)
{
    const pyu_profile_data *d = pyu_profile_get(p);
    line *lines = calloc(d->nstacks ? d->nstacks : 1, sizeof *lines);
    uint32_t *path = NULL;
    size_t cap = 0, n = 0;
    int rc = lines ? 0 : -PYU_E_NOMEM;
    for (size_t i = 0; rc == 0 && i < d->nstacks; i++) {
        const pyu_profile_stack *st = &d->stacks[i];
        long depth = pyu_profile_path(d, st->node, &path, &cap);
        if (depth < 0) {
            rc = -PYU_E_NOMEM;
            break;
        }
        size_t len = 0;
        FILE *m = open_memstream(&lines[n].text, &len);
        if (!m) {
            rc = -PYU_E_NOMEM;
            break;
        }
        const pyu_profile_thread *th = &d->threads[st->thread];
        if (d->nprocesses > 1 && th->process < d->nprocesses)
            fprintf(m, "pid:%d;", d->processes[th->process].pid);
        fprintf(m, "tid:%" PRIu64, th->native_thread_id);
        for (long k = 0; k < depth; k++) {
            fputc(';', m);
            put_frame(m, d, path[k]);
        }
        if (fclose(m) != 0) {
            rc = -PYU_E_NOMEM;
            break;
        }
        lines[n++].count = st->count;
    }
    if (rc == 0) {
        /* a stack recorded with different statuses is one line */
        qsort(lines, n, sizeof *lines, cmp_text);
        size_t w = 0;
        for (size_t i = 0; i < n; i++) {
            if (w && strcmp(lines[w - 1].text, lines[i].text) == 0) {
                lines[w - 1].count += lines[i].count;
                free(lines[i].text);
                continue;
            }
            lines[w++] = lines[i];
        }
        n = w;
        qsort(lines, n, sizeof *lines, cmp_lines);
        for (size_t i = 0; i < n; i++)
            fprintf(out, "%s %" PRIu64 "\n", lines[i].text, lines[i].count);
    }
    for (size_t i = 0; lines && i < n; i++)
        free(lines[i].text);
    free(lines);
    free(path);
    if (rc < 0)
        return rc;
    return ferror(out) ? -PYU_E_IO : 0;
}
