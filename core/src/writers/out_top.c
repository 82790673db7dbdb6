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
    uint32_t proc; /* several processes: a row per process and function */
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
    if (c)
        return c;
    if (fx->first_line != fy->first_line)
        return fx->first_line > fy->first_line ? 1 : -1;
    return (x->proc > y->proc) - (x->proc < y->proc);
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

void pyu_profile_name(char *buf, size_t len, const pyu_profile_data *d)
{
    if (d->nprocesses <= 1) {
        pyu_profile_title(buf, len, d->info);
        return;
    }
    char v[128];
    pyu_profile_versions(d, v, sizeof v);
    snprintf(buf, len, "pyunwind: %zu processes, CPython %s, %s mode",
             d->nprocesses, *v ? v : "?",
             pyu_profile_mode_name(d->info->mode));
}

void pyu_profile_process_label(char *buf, size_t len,
                               const pyu_profile_process *pr)
{
    snprintf(buf, len, *pr->command ? "pid %d (%s)" : "pid %d", pr->pid,
             pr->command);
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

void pyu_profile_versions(const pyu_profile_data *d, char *buf, size_t len)
{
    size_t at = 0;
    *buf = '\0';
    for (size_t i = 0; i < d->nprocesses && at < len; i++) {
        const char *v = d->processes[i].python;
        bool seen = !*v;
        for (size_t k = 0; k < i && !seen; k++)
            seen = strcmp(d->processes[k].python, v) == 0;
        if (!seen)
            at += (size_t)snprintf(buf + at, len - at, "%s%s",
                                   at ? ", " : "", v);
    }
}

void pyu_profile_summary(FILE *out, const pyu_profile_data *d)
{
    const pyu_profile_info *in = d->info;
    double secs = (double)in->duration_ns / 1e9;
    if (d->nprocesses > 1) {
        char v[128];
        pyu_profile_versions(d, v, sizeof v);
        fprintf(out, "%zu processes: CPython %s, %s mode, %" PRIu64
                     " samples in %.2f s",
                d->nprocesses, *v ? v : "?", pyu_profile_mode_name(in->mode),
                in->samples, secs);
    } else {
        fprintf(out, "Process %d: CPython %s, %s mode, %" PRIu64
                     " samples in %.2f s",
                in->process.pid,
                in->process.python[0] ? in->process.python : "?",
                pyu_profile_mode_name(in->mode), in->samples, secs);
    }
    if (secs > 0)
        fprintf(out, " (%.0f/s)", (double)in->samples / secs);
    fprintf(out, ", %" PRIu64 " failed (%.2f%%), %" PRIu64 " missed\n",
            in->failed,
            in->samples ? 100.0 * (double)in->failed / (double)in->samples
                        : 0.0,
            in->missed);
}

/* The rows of process proc (every process: d->nprocesses) appended to
 * *rows (n of them, room for cap), from by (a row per function, zeroed on
 * return). */
static bool rows_of(const pyu_profile_data *d, size_t proc, row *by,
                    uint64_t *stamp, row **rows, size_t *n, size_t *cap)
{
    for (size_t i = 0; i < d->nstacks; i++) {
        const pyu_profile_stack *st = &d->stacks[i];
        uint32_t nd = st->node;
        if (!nd || (proc < d->nprocesses &&
                    d->threads[st->thread].process != proc))
            continue;
        by[d->frames[d->nodes[nd].frame].func].self += st->count;
        for (; nd; nd = d->nodes[nd].parent) {
            uint32_t fn = d->frames[d->nodes[nd].frame].func;
            if (stamp[fn] != i + 1) { /* once per stack */
                stamp[fn] = i + 1;
                by[fn].total += st->count;
            }
        }
    }
    for (size_t f = 0; f < d->nfuncs; f++) {
        if (!by[f].total)
            continue;
        if (*n == *cap) {
            size_t ncap = *cap * 2;
            row *nr = realloc(*rows, ncap * sizeof *nr);
            if (!nr)
                return false;
            *rows = nr;
            *cap = ncap;
        }
        (*rows)[(*n)++] = (row){(uint32_t)f,
                                (uint32_t)(proc < d->nprocesses ? proc : 0),
                                by[f].self, by[f].total};
        by[f].self = by[f].total = 0;
    }
    memset(stamp, 0, d->nfuncs * sizeof *stamp);
    return true;
}

int pyu_profile_write_top(pyu_profile *p, FILE *out, int sort, size_t limit)
{
    const pyu_profile_data *d = pyu_profile_get(p);
    size_t cap = d->nfuncs ? d->nfuncs : 1, n = 0;
    row *by = calloc(cap, sizeof *by), *rows = calloc(cap, sizeof *rows);
    uint64_t *stamp = calloc(cap, sizeof *stamp);
    /* several processes: a row per process and function, a column of
     * its pid */
    bool many = d->nprocesses > 1;
    bool ok = by && rows && stamp;
    for (size_t pr = many ? 0 : d->nprocesses;
         ok && pr <= (many ? d->nprocesses - 1 : d->nprocesses); pr++)
        ok = rows_of(d, pr, by, stamp, &rows, &n, &cap);
    free(by);
    if (!ok) {
        free(rows);
        free(stamp);
        return -PYU_E_NOMEM;
    }
    /* (the threads with stacks: a profile selected by thread keeps the
     * others, without any) */
    size_t nthreads = 0;
    bool *seen = calloc(d->nthreads ? d->nthreads : 1, sizeof *seen);
    if (!seen) {
        free(rows);
        free(stamp);
        return -PYU_E_NOMEM;
    }
    for (size_t i = 0; i < d->nstacks; i++) {
        const pyu_profile_stack *st = &d->stacks[i];
        if (st->count && st->thread < d->nthreads && !seen[st->thread]) {
            seen[st->thread] = true;
            nthreads++;
        }
    }
    free(seen);
    sort_data = d;
    sort_key = sort;
    qsort(rows, n, sizeof *rows, cmp_rows);
    pyu_profile_summary(out, d);
    double all = d->total ? (double)d->total : 1.0;
    fprintf(out, "%" PRIu64 " stack%s from %zu thread%s", d->total,
            d->total == 1 ? "" : "s", nthreads, nthreads == 1 ? "" : "s");
    if (many)
        fprintf(out, " of %zu processes", d->nprocesses);
    fputs("\n\n", out);
    fprintf(out, "%10s %7s %10s %7s  %s%s\n", "self", "self%", "total",
            "total%", many ? "    pid  " : "", "function (file:line)");
    if (limit && n > limit)
        n = limit;
    for (size_t i = 0; i < n; i++) {
        const pyu_profile_func *fn = &d->funcs[rows[i].func];
        fprintf(out, "%10" PRIu64 " %6.2f%% %10" PRIu64 " %6.2f%%  ",
                rows[i].self, 100.0 * (double)rows[i].self / all,
                rows[i].total, 100.0 * (double)rows[i].total / all);
        if (many)
            fprintf(out, "%7d  ", d->processes[rows[i].proc].pid);
        fputs(fn->name, out);
        if (fn->kind == PYU_FUNC_PYTHON)
            fprintf(out, " (%s:%d)", fn->file, fn->first_line);
        fputc('\n', out);
    }
    free(rows);
    free(stamp);
    return ferror(out) ? -PYU_E_IO : 0;
}
