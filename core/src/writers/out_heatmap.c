/* Output: a heat map of the source, one self-contained HTML file: every
 * Python file the profile's functions come from, each line with its self
 * samples (the innermost frame ran it) and total samples (a frame of the
 * stack was on it, counted once per stack), calls between lines and
 * functions both ways, and an index of the files by heat.  The page is
 * core/web/heatmap.js and .css, embedded at build time.
 *
 * Source lines are read here from the files as the profile names them
 * (on the machine that writes the page; at most FILE_MAX bytes a file;
 * only regular files named *.py or *.pyw), below the root of each of
 * the profile's processes still running first (/proc/PID/root: a
 * container's file, which the host may not have at that path, or have
 * another), as the dump reads them (source_file.c): a file that is not
 * there is shown by its counts alone.
 *
 * The data: {"info": {...as the flame graph's}, "total": N, "files":
 * [{"path", "source": [lines] or null, "self": {LINE: N}, "total":
 * {LINE: N}, "calls": {LINE: [[FILE, LINE, N, NAME]]} (the functions a
 * line called: their file and first line), "callers": {LINE: [[FILE,
 * LINE, N]]} (for a function's first line: the lines that called it),
 * "instrs": {LINE: [[INSTR, OP, BASE, SELF, TOTAL]]} (a profile sampled
 * with PYU_SAMPLE_OPCODES: each instruction of the line that ran, by its
 * offset in code units, with its self and total samples)}],
 * "has_instrs": true|false}.
 */
#include "../internal.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#define FILE_MAX (4u << 20)
#define FILES_MAX 4096

extern const char pyu_web_heatmap_js[];
extern const char pyu_web_heatmap_css[];

/* One (file, line) counter, or an edge between two lines. */
typedef struct count {
    uint32_t file, line;
    uint32_t to_file, to_line; /* edges only */
    uint32_t func;             /* callee's function (calls only) */
    uint64_t n;
    uint64_t n2;               /* instructions: self samples (n: total) */
} count;

typedef struct counts {
    count *v;
    size_t n, cap;
    pyu_ix ix; /* over v, by key */
} counts;

static uint64_t key_hash(const count *k)
{
    uint64_t h = ((uint64_t)k->file << 32 | k->line) * 0x9E3779B97F4A7C15ull;
    h ^= ((uint64_t)k->to_file << 32 | k->to_line) + (h >> 29);
    return h * 0xBF58476D1CE4E5B9ull;
}

static bool same_key(const count *a, const count *b)
{
    return a->file == b->file && a->line == b->line &&
           a->to_file == b->to_file && a->to_line == b->to_line;
}

static int add(counts *c, count k)
{
    if (!pyu_ix_room(&c->ix))
        return -PYU_E_NOMEM;
    uint32_t h = pyu_mix(key_hash(&k));
    size_t at;
    long e = PYU_IX_FIND(&c->ix, h, &at, same_key(&c->v[e], &k));
    if (e >= 0) {
        c->v[e].n += k.n;
        c->v[e].n2 += k.n2;
        return 0;
    }
    if (c->n >= UINT32_MAX - 1 ||
        !pyu_grow((void **)&c->v, c->n, &c->cap, sizeof *c->v))
        return -PYU_E_NOMEM;
    c->v[c->n] = k;
    pyu_ix_put(&c->ix, at, h, c->n++);
    return 0;
}

static int cmp_count(const void *a, const void *b)
{
    const count *x = a, *y = b;
    if (x->file != y->file)
        return x->file < y->file ? -1 : 1;
    if (x->line != y->line)
        return x->line < y->line ? -1 : 1;
    if (x->to_file != y->to_file)
        return x->to_file < y->to_file ? -1 : 1;
    return (x->to_line > y->to_line) - (x->to_line < y->to_line);
}

/* Is path a Python source file's name: an absolute path named *.py or
 * *.pyw?  (The paths come from the profile, which may come from a capture
 * of unknown origin: nothing else is read into the page; and only
 * regular files, source_file.c.) */
static bool python_source(const char *path)
{
    size_t n = strlen(path);
    return path[0] == '/' &&
           ((n > 3 && strcmp(path + n - 3, ".py") == 0) ||
            (n > 4 && strcmp(path + n - 4, ".pyw") == 0));
}

/* The text of source file path: below the root of each of d's processes
 * that runs still, then as it is; NULL when none can be read. */
static char *source_text(const pyu_profile_data *d, const char *path,
                         size_t *len)
{
    pyu_source src = {0};
    size_t n = d->nprocesses ? d->nprocesses : 1;
    for (size_t i = 0; i < n && !src.text; i++) {
        int pid = d->nprocesses ? d->processes[i].pid : d->info->process.pid;
        bool gone = d->nprocesses && d->processes[i].exited;
        char root[64] = "";
        if (pid > 0 && !gone)
            snprintf(root, sizeof root, "/proc/%d/root", pid);
        if (*root || i + 1 == n) /* (the plain path: at the last) */
            pyu_source_load(root, path, NULL, false, &src);
    }
    if (src.text && src.len > FILE_MAX)
        src.text[src.len = FILE_MAX] = '\0';
    *len = src.len;
    return src.text;
}

/* Writes a file's lines as a JSON array, or null when it cannot be read. */
static void put_source(FILE *out, const pyu_profile_data *d,
                       const char *path)
{
    size_t len = 0;
    char *text = python_source(path) ? source_text(d, path, &len) : NULL;
    if (!text) {
        fputs("null", out);
        return;
    }
    fputc('[', out);
    char *line = text;
    for (bool first = true; *line || first; first = false) {
        char *nl = strchr(line, '\n');
        if (nl)
            *nl = 0;
        if (!first)
            fputc(',', out);
        pyu_json_str(out, line);
        if (!nl)
            break;
        line = nl + 1;
    }
    fputc(']', out);
    free(text);
}

/* {LINE: N, ...} of one file's counters in c (sorted), from *at on. */
static void put_lines(FILE *out, const counts *c, size_t *at, uint32_t file)
{
    fputc('{', out);
    bool first = true;
    for (; *at < c->n && c->v[*at].file == file; ++*at) {
        fprintf(out, "%s\"%" PRIu32 "\": %" PRIu64, first ? "" : ", ",
                c->v[*at].line, c->v[*at].n);
        first = false;
    }
    fputc('}', out);
}

/* Writes one counter of a group as a JSON array. */
typedef void put_one(FILE *out, const pyu_profile_data *d, const count *e);

/* A call or caller: [TO_FILE, TO_LINE, N], with the callee's name for
 * calls. */
static void put_call(FILE *out, const pyu_profile_data *d, const count *e)
{
    fprintf(out, "[%" PRIu32 ", %" PRIu32 ", %" PRIu64 ", ", e->to_file,
            e->to_line, e->n);
    pyu_json_str(out, d->funcs[e->func].name);
    fputc(']', out);
}

static void put_caller(FILE *out, const pyu_profile_data *d, const count *e)
{
    (void)d;
    fprintf(out, "[%" PRIu32 ", %" PRIu32 ", %" PRIu64 "]", e->to_file,
            e->to_line, e->n);
}

/* An instruction (to_file: the instruction, to_line: its profile frame):
 * [INSTR, OP, BASE, SELF, TOTAL]. */
static void put_instr(FILE *out, const pyu_profile_data *d, const count *e)
{
    const pyu_profile_frame *f = &d->frames[e->to_line];
    fprintf(out, "[%" PRIu32 ", ", e->to_file);
    pyu_json_str(out, f->op);
    fputs(", ", out);
    pyu_json_str(out, f->base);
    fprintf(out, ", %" PRIu64 ", %" PRIu64 "]", e->n2, e->n);
}

/* {LINE: [ONE, ...], ...} of one file's counters in c (sorted), from *at
 * on, each written by one. */
static void put_groups(FILE *out, const pyu_profile_data *d, const counts *c,
                       size_t *at, uint32_t file, put_one *one)
{
    fputc('{', out);
    bool first = true;
    while (*at < c->n && c->v[*at].file == file) {
        uint32_t line = c->v[*at].line;
        fprintf(out, "%s\"%" PRIu32 "\": [", first ? "" : ", ", line);
        first = false;
        for (bool head = true; *at < c->n && c->v[*at].file == file &&
                               c->v[*at].line == line;
             ++*at, head = false) {
            if (!head)
                fputs(", ", out);
            one(out, d, &c->v[*at]);
        }
        fputc(']', out);
    }
    fputc('}', out);
}

/* The profile's files: index of each function's file in files (or
 * UINT32_MAX: not Python). */
static int file_table(const pyu_profile_data *d, uint32_t *func_file,
                      const char ***files, size_t *nfiles)
{
    size_t cap = 0;
    *files = NULL;
    *nfiles = 0;
    for (size_t i = 0; i < d->nfuncs; i++) {
        func_file[i] = UINT32_MAX;
        const pyu_profile_func *f = &d->funcs[i];
        if (f->kind != PYU_FUNC_PYTHON || !f->file[0])
            continue;
        size_t k = 0;
        while (k < *nfiles && strcmp((*files)[k], f->file) != 0)
            k++;
        if (k == *nfiles) {
            if (*nfiles == FILES_MAX)
                continue;
            if (!pyu_grow((void **)files, *nfiles, &cap, sizeof **files))
                return -PYU_E_NOMEM;
            (*files)[(*nfiles)++] = f->file;
        }
        func_file[i] = (uint32_t)k;
    }
    return 0;
}

static int collect(const pyu_profile_data *d, const uint32_t *func_file,
                   counts *self, counts *total, counts *calls,
                   counts *callers, counts *instrs)
{
    uint32_t *path = NULL;
    size_t cap = 0;
    int rc = 0;
    for (size_t i = 0; i < d->nstacks && rc == 0; i++) {
        const pyu_profile_stack *st = &d->stacks[i];
        long n = pyu_profile_path(d, st->node, &path, &cap);
        if (n < 0) {
            rc = -PYU_E_NOMEM;
            break;
        }
        size_t depth = (size_t)n;
        for (size_t j = 0; j < depth && rc == 0; j++) {
            const pyu_profile_frame *f = &d->frames[path[j]];
            uint32_t file = func_file[f->func];
            if (file == UINT32_MAX || f->line <= 0)
                continue;
            /* total: once per stack (a recursion repeats the line) */
            bool seen = false;
            for (size_t q = 0; q < j && !seen; q++) {
                const pyu_profile_frame *g = &d->frames[path[q]];
                seen = func_file[g->func] == file && g->line == f->line;
            }
            count c = {file, (uint32_t)f->line, 0, 0, 0, st->count, 0};
            if (!seen)
                rc = add(total, c);
            if (rc == 0 && j + 1 == depth)
                rc = add(self, c);
            if (rc == 0 && f->instr >= 0) {
                /* (total once per stack: the same frame deeper in it is a
                 * recursion, not another sample) */
                bool again = false;
                for (size_t q = 0; q < j && !again; q++)
                    again = path[q] == path[j];
                count k = {file, (uint32_t)f->line, (uint32_t)f->instr,
                           path[j], 0, again ? 0 : st->count,
                           j + 1 == depth ? st->count : 0};
                rc = add(instrs, k);
            }
            if (rc == 0 && j + 1 < depth) {
                const pyu_profile_frame *g = &d->frames[path[j + 1]];
                const pyu_profile_func *callee = &d->funcs[g->func];
                uint32_t cf = func_file[g->func];
                if (cf != UINT32_MAX && callee->first_line > 0) {
                    count e = {file, (uint32_t)f->line, cf,
                               (uint32_t)callee->first_line, g->func,
                               st->count, 0};
                    rc = add(calls, e);
                    count r = {cf, (uint32_t)callee->first_line, file,
                               (uint32_t)f->line, 0, st->count, 0};
                    if (rc == 0)
                        rc = add(callers, r);
                }
            }
        }
    }
    free(path);
    return rc;
}

int pyu_profile_write_heatmap(pyu_profile *p, FILE *out)
{
    const pyu_profile_data *d = pyu_profile_get(p);
    uint32_t *func_file = malloc((d->nfuncs ? d->nfuncs : 1) *
                                 sizeof *func_file);
    const char **files = NULL;
    size_t nfiles = 0;
    counts self = {0}, total = {0}, calls = {0}, callers = {0},
           instrs = {0};
    int rc = func_file ? file_table(d, func_file, &files, &nfiles)
                       : -PYU_E_NOMEM;
    if (rc == 0)
        rc = collect(d, func_file, &self, &total, &calls, &callers,
                     &instrs);
    char *data = NULL;
    size_t len = 0;
    FILE *m = rc == 0 ? open_memstream(&data, &len) : NULL;
    if (rc == 0 && !m)
        rc = -PYU_E_NOMEM;
    if (rc == 0) {
        counts *all[] = {&self, &total, &calls, &callers, &instrs};
        for (size_t i = 0; i < 5; i++)
            if (all[i]->n) /* (v is NULL when there is none) */
                qsort(all[i]->v, all[i]->n, sizeof *all[i]->v, cmp_count);
        const pyu_profile_info *pi = d->info;
        fprintf(m, "{\"info\": {\"pid\": %d, \"python\": ", pi->process.pid);
        pyu_json_str(m, pi->process.python);
        fprintf(m,
                ", \"mode\": %d, \"duration_ns\": %" PRIu64
                ", \"samples\": %" PRIu64 ", \"failed\": %" PRIu64
                ", \"missed\": %" PRIu64 "}, \"total\": %" PRIu64
                ", \"has_instrs\": %s,\n\"files\": [",
                pi->mode, pi->duration_ns, pi->samples, pi->failed,
                pi->missed, d->total,
                pyu_profile_has_instrs(p) ? "true" : "false");
        size_t at[5] = {0, 0, 0, 0, 0};
        for (size_t f = 0; f < nfiles; f++) {
            fputs(f ? ",\n{\"path\": " : "\n{\"path\": ", m);
            pyu_json_str(m, files[f]);
            fputs(", \"source\": ", m);
            put_source(m, d, files[f]);
            fputs(",\n \"self\": ", m);
            put_lines(m, &self, &at[0], (uint32_t)f);
            fputs(", \"total\": ", m);
            put_lines(m, &total, &at[1], (uint32_t)f);
            fputs(",\n \"calls\": ", m);
            put_groups(m, d, &calls, &at[2], (uint32_t)f, put_call);
            fputs(", \"callers\": ", m);
            put_groups(m, d, &callers, &at[3], (uint32_t)f, put_caller);
            fputs(",\n \"instrs\": ", m);
            put_groups(m, d, &instrs, &at[4], (uint32_t)f, put_instr);
            fputc('}', m);
        }
        fputs("]}", m);
        if (fclose(m) != 0)
            rc = -PYU_E_NOMEM;
    }
    if (rc == 0) {
        char title[256];
        pyu_profile_name(title, sizeof title, d);
        fputs("<!DOCTYPE html>\n<html lang=\"en\"><head><meta "
              "charset=\"utf-8\">\n<title>",
              out);
        for (const char *c = title; *c; c++)
            fputs(*c == '<' ? "&lt;" : *c == '&' ? "&amp;" : (char[]){*c, 0},
                  out);
        fprintf(out, " (heat map)</title>\n<style>\n%s</style>\n</head>"
                     "<body>\n<header><h1 id=\"title\"></h1>"
                     "<div id=\"summary\"></div>\n<div id=\"controls\">"
                     "<label><input type=\"radio\" name=\"by\" value=\"total\" "
                     "checked> colour by total</label> <label><input "
                     "type=\"radio\" name=\"by\" value=\"self\"> by self"
                     "</label> <label id=\"bytecode-toggle\" hidden><input "
                     "type=\"checkbox\" id=\"bytecode\"> bytecode</label> "
                     "<a href=\"#\" id=\"to-index\">index</a></div>"
                     "</header>\n<main id=\"view\"></main>\n"
                     "<script type=\"application/json\" id=\"pyu-data\">",
                pyu_web_heatmap_css);
        pyu_html_json(out, data, len);
        fprintf(out, "</script>\n<script>\n%s</script>\n</body></html>\n",
                pyu_web_heatmap_js);
        if (ferror(out))
            rc = -PYU_E_IO;
    }
    free(data);
    free(func_file);
    free(files);
    counts *all[] = {&self, &total, &calls, &callers, &instrs};
    for (size_t i = 0; i < 5; i++) {
        free(all[i]->v);
        free(all[i]->ix.slots);
    }
    return rc;
}
