/* Output: a table of functions by self and total samples, like pstats or
 * py-spy's top.  Self: samples in which the function was the innermost
 * frame.  Total: samples in which it was anywhere on the stack (once per
 * sample, also when it recurses).  Percentages are of all samples
 * counted. */
#include "../internal.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

typedef struct row {
    uint32_t func;
    uint64_t self, total;
} row;

static const pyu_profile_data *sort_data;
static int sort_key;

static int cmp_rows(const void *a, const void *b)
{
    const row *x = a, *y = b;
    uint64_t kx = sort_key == PYU_TOP_SORT_TOTAL ? x->total : x->self;
    uint64_t ky = sort_key == PYU_TOP_SORT_TOTAL ? y->total : y->self;
    if (sort_key != PYU_TOP_SORT_NAME && kx != ky)
        return kx < ky ? 1 : -1;
    if (sort_key != PYU_TOP_SORT_NAME && x->total != y->total)
        return x->total < y->total ? 1 : -1;
    const pyu_profile_func *fx = &sort_data->funcs[x->func],
                           *fy = &sort_data->funcs[y->func];
    int c = strcmp(fx->name, fy->name);
    if (c)
        return c;
    c = strcmp(fx->file, fy->file);
    return c ? c : (fx->first_line > fy->first_line) -
                       (fx->first_line < fy->first_line);
}

void pyu_profile_title(char *buf, size_t len, const pyu_profile_info *pi)
{
    snprintf(buf, len, "pyunwind: PID %d, CPython %s, %s mode", pi->process.pid,
             pi->process.python, pyu_profile_mode_name(pi->mode));
}

void pyu_profile_thread_label(char *buf, size_t len,
                              const pyu_profile_thread *t)
{
    const char *name = t->main ? "main thread" : t->name ? t->name : "";
    snprintf(buf, len, *name ? "Thread %" PRIu64 " (%s)" : "Thread %" PRIu64,
             t->native_thread_id, name);
}

long pyu_profile_path(const pyu_profile_data *d, uint32_t node,
                      uint32_t **buf, size_t *cap)
{
    size_t depth = d->nodes[node].depth, k = depth;
    if (depth > *cap) {
        uint32_t *nb = realloc(*buf, depth * sizeof *nb);
        if (!nb)
            return -1;
        *buf = nb;
        *cap = depth;
    }
    for (uint32_t nd = node; nd && k > 0; nd = d->nodes[nd].parent)
        (*buf)[--k] = d->nodes[nd].frame;
    return (long)depth;
}

void pyu_html_json(FILE *out, const char *json, size_t len)
{
    for (size_t i = 0; i < len; i++) {
        if (json[i] == '<' && i + 1 < len && json[i + 1] == '/') {
            fputs("<\\/", out);
            i++;
        } else {
            putc(json[i], out);
        }
    }
}

uint64_t pyu_profile_period(const pyu_profile_info *pi)
{
    if (pi->interval_ns)
        return pi->interval_ns;
    return pi->samples ? pi->duration_ns / pi->samples : 0;
}

void pyu_profile_summary(FILE *out, const pyu_profile_data *d)
{
    const pyu_profile_info *in = d->info;
    double secs = (double)in->duration_ns / 1e9;
    fprintf(out, "Process %d: CPython %s, %s mode, %" PRIu64
                 " samples in %.2f s",
            in->process.pid, in->process.python[0] ? in->process.python : "?",
            pyu_profile_mode_name(in->mode),
            in->samples, secs);
    if (secs > 0)
        fprintf(out, " (%.0f/s)", (double)in->samples / secs);
    fprintf(out, ", %" PRIu64 " failed (%.2f%%), %" PRIu64 " missed\n",
            in->failed,
            in->samples ? 100.0 * (double)in->failed / (double)in->samples
                        : 0.0,
            in->missed);
}

int pyu_profile_write_top(pyu_profile *p, FILE *out, int sort, size_t limit)
{
    const pyu_profile_data *d = pyu_profile_get(p);
    row *rows = calloc(d->nfuncs ? d->nfuncs : 1, sizeof *rows);
    uint64_t *stamp = calloc(d->nfuncs ? d->nfuncs : 1, sizeof *stamp);
    if (!rows || !stamp) {
        free(rows);
        free(stamp);
        return -PYU_E_NOMEM;
    }
    for (size_t f = 0; f < d->nfuncs; f++)
        rows[f].func = (uint32_t)f;
    for (size_t i = 0; i < d->nstacks; i++) {
        const pyu_profile_stack *st = &d->stacks[i];
        uint32_t nd = st->node;
        if (!nd)
            continue;
        rows[d->frames[d->nodes[nd].frame].func].self += st->count;
        for (; nd; nd = d->nodes[nd].parent) {
            uint32_t fn = d->frames[d->nodes[nd].frame].func;
            if (stamp[fn] != i + 1) { /* once per stack */
                stamp[fn] = i + 1;
                rows[fn].total += st->count;
            }
        }
    }
    size_t n = 0;
    for (size_t f = 0; f < d->nfuncs; f++)
        if (rows[f].total)
            rows[n++] = rows[f];
    sort_data = d;
    sort_key = sort;
    qsort(rows, n, sizeof *rows, cmp_rows);
    pyu_profile_summary(out, d);
    double all = d->total ? (double)d->total : 1.0;
    fprintf(out, "%" PRIu64 " stacks from %zu threads\n\n", d->total,
            d->nthreads);
    fprintf(out, "%10s %7s %10s %7s  %s\n", "self", "self%", "total",
            "total%", "function (file:line)");
    if (limit && n > limit)
        n = limit;
    for (size_t i = 0; i < n; i++) {
        const pyu_profile_func *fn = &d->funcs[rows[i].func];
        fprintf(out, "%10" PRIu64 " %6.2f%% %10" PRIu64 " %6.2f%%  %s",
                rows[i].self, 100.0 * (double)rows[i].self / all,
                rows[i].total, 100.0 * (double)rows[i].total / all,
                fn->name);
        if (fn->kind == PYU_FUNC_PYTHON)
            fprintf(out, " (%s:%d)", fn->file, fn->first_line);
        fputc('\n', out);
    }
    free(rows);
    free(stamp);
    return ferror(out) ? -PYU_E_IO : 0;
}
