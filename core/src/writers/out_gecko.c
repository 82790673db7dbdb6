/* Output: gecko, the Firefox Profiler's processed profile format (the JSON
 * that https://profiler.firefox.com opens, and `profiler-cli load`), at
 * version 70 of that format: the Profiler upgrades older versions when it
 * loads them, so a file written today stays readable.  The layout is the
 * Profiler's `Profile` type (src/types/profile.ts):
 *
 *   meta      interval (ms), startTime (ms since the epoch), categories
 *             (Other, Python, Native, GC, GIL, CPU, Exception), the status
 *             marker's schema, and an "extra" section with the run's
 *             process (or the number of processes), CPython version(s),
 *             mode and sample counts
 *   shared    stringArray: the function names, then each source file's
 *             path and base name, then the marker names; sources and
 *             resources: one per file; funcTable: one per profile
 *             function; frameTable: one per profile frame (function and
 *             line); stackTable: one per profile node (stack i + 1 is node
 *             i, its prefix given as an offset back to its parent's)
 *   threads   one per profile thread, main threads first, each with its
 *             process's pid and name: the Profiler makes a track of each
 *             process (pid: "PID.K" for the Kth later process of a
 *             pid) and puts its threads in it; a process first
 *             sampled after the start, or that ended before the end, is
 *             registered from, and unregistered at, those times (one
 *             process: "Python (PID N)", over the whole run); its samples
 *             (stack and time in ms since the start, from the profile's
 *             timeline; weights when a sample counts more than one) and
 *             its status markers: an interval for each run of consecutive
 *             samples in which the thread held the GIL, waited for it, was
 *             on a CPU, ran the GC or handled an exception
 *
 * Samples the timeline does not hold (counted by hand without marks, or
 * past its limit) are placed at the end of the run; meta.extra says how
 * many samples the timeline cut.
 */
#include "../internal.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#define PROCESSED_VERSION 70
#define GECKO_VERSION 36

/* meta.categories, in this order. */
enum { CAT_OTHER, CAT_PYTHON, CAT_NATIVE, CAT_GC, CAT_GIL, CAT_CPU, CAT_EXC };
static const char *const categories[][2] = {
    {"Other", "grey"}, {"Python", "yellow"}, {"Native", "blue"},
    {"GC", "orange"},  {"GIL", "green"},     {"CPU", "purple"},
    {"Exception", "lightblue"},
};

/* The status markers: a status bit, the marker's name and category. */
static const struct {
    unsigned bit;
    const char *name;
    int category;
} markers[] = {
    {PYU_STATUS_HAS_GIL, "Has GIL", CAT_GIL},
    {PYU_STATUS_GIL_REQUESTED, "Waiting for GIL", CAT_GIL},
    {PYU_STATUS_ON_CPU, "On CPU", CAT_CPU},
    {PYU_STATUS_GC, "Running GC", CAT_GC},
    {PYU_STATUS_EXCEPTION, "Has exception", CAT_EXC},
};
#define NMARKERS (sizeof markers / sizeof markers[0])
#define SCHEMA "PythonThreadStatus"

/* A sample of one thread: an event of the timeline and its time. */
typedef struct tsample {
    uint32_t event;
    uint32_t tick; /* its tick's number (ticks: the end of the run) */
} tsample;

typedef struct gecko {
    FILE *out;
    const pyu_profile_data *d;
    pyu_profile_timeline tl;
    uint64_t period, end_ns; /* the run's period, its end (ns) */
    size_t ticks;            /* tl.nticks, plus one for the unmarked */
    uint32_t *file_of;       /* per function: its file's number, or -1 */
    size_t nfiles;
    uint32_t *file_func;     /* per file: a function of it */
    size_t *first;           /* per thread: its samples in by_thread */
    tsample *by_thread;
} gecko;

/* ns as ms, exactly: "12.345678". */
static void put_ms(FILE *out, uint64_t ns)
{
    fprintf(out, "%" PRIu64 ".%06" PRIu64, ns / 1000000u, ns % 1000000u);
}

/* (the events after the last mark: just inside the end of the range,
 * which is past the last mark) */
static uint64_t tick_ns(const gecko *g, uint32_t tick)
{
    return tick < g->tl.nticks ? g->tl.ticks[tick].t_ns : g->end_ns - 1;
}

static int by_file(const void *a, const void *b, void *arg)
{
    const pyu_profile_func *f = arg;
    const char *x = f[*(const uint32_t *)a].file,
               *y = f[*(const uint32_t *)b].file;
    return x < y ? -1 : x > y;
}

/* Numbers the source files: the profile interns strings, so one file is
 * one pointer; functions sorted by it fall into runs. */
static int number_files(gecko *g)
{
    const pyu_profile_data *d = g->d;
    uint32_t *order = malloc((d->nfuncs + 1) * sizeof *order);
    g->file_of = malloc((d->nfuncs + 1) * sizeof *g->file_of);
    g->file_func = malloc((d->nfuncs + 1) * sizeof *g->file_func);
    if (!order || !g->file_of || !g->file_func) {
        free(order);
        return -PYU_E_NOMEM;
    }
    for (uint32_t i = 0; i < d->nfuncs; i++)
        order[i] = i;
    qsort_r(order, d->nfuncs, sizeof *order, by_file, (void *)d->funcs);
    for (size_t k = 0; k < d->nfuncs; k++) {
        const pyu_profile_func *f = &d->funcs[order[k]];
        if (!*f->file) {
            g->file_of[order[k]] = UINT32_MAX;
            continue;
        }
        if (!g->nfiles || d->funcs[g->file_func[g->nfiles - 1]].file != f->file)
            g->file_func[g->nfiles++] = order[k];
        g->file_of[order[k]] = (uint32_t)g->nfiles - 1;
    }
    free(order);
    return 0;
}

/* Sorts the timeline's events by thread (a counting sort: each thread's
 * samples stay in time order). */
static int group_by_thread(gecko *g)
{
    size_t nth = g->d->nthreads, nev = g->tl.nevents;
    g->first = calloc(nth + 1, sizeof *g->first);
    g->by_thread = malloc((nev + 1) * sizeof *g->by_thread);
    if (!g->first || !g->by_thread)
        return -PYU_E_NOMEM;
    for (size_t i = 0; i < nev; i++)
        g->first[g->tl.events[i].thread + 1]++;
    for (size_t t = 0; t < nth; t++)
        g->first[t + 1] += g->first[t];
    size_t *at = malloc((nth + 1) * sizeof *at);
    if (!at)
        return -PYU_E_NOMEM;
    memcpy(at, g->first, (nth + 1) * sizeof *at);
    uint32_t tick = 0;
    for (size_t i = 0; i < nev; i++) {
        while (tick < g->tl.nticks && g->tl.ticks[tick].end <= i)
            tick++;
        g->by_thread[at[g->tl.events[i].thread]++] =
            (tsample){(uint32_t)i, tick};
    }
    free(at);
    return 0;
}

/* String numbers in shared.stringArray. */
static size_t str_func(uint32_t f)
{
    return f;
}
static size_t str_file(const gecko *g, uint32_t file)
{
    return g->d->nfuncs + 2 * (size_t)file;
}
static size_t str_base(const gecko *g, uint32_t file)
{
    return str_file(g, file) + 1;
}
static size_t str_marker(const gecko *g, size_t m)
{
    return g->d->nfuncs + 2 * g->nfiles + m;
}

static const char *base_name(const char *path)
{
    const char *s = strrchr(path, '/');
    return s && s[1] ? s + 1 : path;
}

static int func_category(int kind)
{
    return kind == PYU_FUNC_GC        ? CAT_GC
           : kind == PYU_FUNC_NATIVE  ? CAT_NATIVE
           : kind == PYU_FUNC_UNKNOWN ? CAT_OTHER
                                      : CAT_PYTHON;
}

static void put_meta(gecko *g)
{
    FILE *out = g->out;
    const pyu_profile_info *pi = g->d->info;
    char title[160];
    pyu_profile_name(title, sizeof title, g->d);
    fputs("{\"meta\": {\"interval\": ", out);
    put_ms(out, g->period);
    fputs(", \"startTime\": ", out);
    put_ms(out, pi->start_ns);
    fputs(", \"profilingStartTime\": 0, \"profilingEndTime\": ", out);
    put_ms(out, g->end_ns);
    fprintf(out, ", \"processType\": 0, \"product\": ");
    pyu_json_str(out, title);
    fprintf(out, ", \"importedFrom\": \"pyunwind\", \"platform\": \"Linux\", "
                 "\"stackwalk\": 0, \"version\": %d, "
                 "\"preprocessedProfileVersion\": %d, \"symbolicated\": true, "
                 "\"usesOnlyOneStackType\": true, "
                 "\"sourceCodeIsNotOnSearchfox\": true,\n  \"categories\": [",
            GECKO_VERSION, PROCESSED_VERSION);
    for (size_t i = 0; i < sizeof categories / sizeof *categories; i++)
        fprintf(out, "%s{\"name\": \"%s\", \"color\": \"%s\", "
                     "\"subcategories\": [\"Other\"]}",
                i ? ", " : "", categories[i][0], categories[i][1]);
    fputs("],\n  \"markerSchema\": [{\"name\": \"" SCHEMA "\", "
          "\"tooltipLabel\": \"{marker.name}\", \"tableLabel\": "
          "\"{marker.name}\", \"chartLabel\": \"{marker.name}\", "
          "\"display\": [\"marker-chart\", \"marker-table\", "
          "\"timeline-overview\"], \"description\": \"The thread's status "
          "in consecutive samples (pyunwind)\", \"fields\": [{\"key\": "
          "\"samples\", \"label\": \"Samples\", \"format\": \"integer\"}]}],"
          "\n  \"extra\": [{\"label\": \"pyunwind\", \"entries\": [",
          out);
    if (g->d->nprocesses > 1) {
        char v[128];
        pyu_profile_versions(g->d, v, sizeof v);
        fprintf(out, "{\"label\": \"Processes\", \"format\": "
                     "\"integer\", \"value\": %zu}, {\"label\": "
                     "\"CPython\", \"format\": \"string\", \"value\": ",
                g->d->nprocesses);
        pyu_json_str(out, v);
    } else {
        fprintf(out, "{\"label\": \"Process\", \"format\": \"pid\", "
                     "\"value\": \"%d\"}, {\"label\": \"CPython\", "
                     "\"format\": \"string\", \"value\": ",
                pi->process.pid);
        pyu_json_str(out, pi->process.python);
    }
    fprintf(out, "}, {\"label\": \"Mode\", \"format\": \"string\", "
                 "\"value\": \"%s\"}",
            pyu_profile_mode_name(pi->mode));
    const struct {
        const char *label;
        uint64_t v;
    } counts[] = {{"Samples", pi->samples},
                  {"Failed samples", pi->failed},
                  {"Missed ticks", pi->missed},
                  {"Samples in the timeline", g->tl.nticks}};
    for (size_t i = 0; i < sizeof counts / sizeof *counts; i++)
        fprintf(out, ", {\"label\": \"%s\", \"format\": \"integer\", "
                     "\"value\": %" PRIu64 "}",
                counts[i].label, counts[i].v);
    if (g->tl.cut)
        fputs(", {\"label\": \"Timeline\", \"format\": \"string\", "
              "\"value\": \"cut at its limit: later samples are not "
              "shown\"}",
              out);
    fputs("]}]},\n \"libs\": [], \"pages\": [],\n", out);
}

/* A column: "name": [v(0), ..., v(n - 1)] where v writes item i. */
#define COLUMN(out, name, n, ...)                                           \
    do {                                                                    \
        fputs("\"" name "\": [", out);                                      \
        for (size_t i = 0; i < (n); i++) {                                  \
            if (i)                                                          \
                fputs(i % 16 ? ", " : ",\n   ", out);                        \
            __VA_ARGS__;                                                    \
        }                                                                   \
        fputs("]", out);                                                    \
    } while (0)

static void put_shared(gecko *g)
{
    FILE *out = g->out;
    const pyu_profile_data *d = g->d;
    fputs(" \"shared\": {\n  \"stringArray\": [", out);
    for (size_t i = 0; i < d->nfuncs; i++) {
        fputs(i ? ",\n   " : "\n   ", out);
        pyu_json_str(out, d->funcs[i].name);
    }
    for (size_t k = 0; k < g->nfiles; k++) {
        const char *path = d->funcs[g->file_func[k]].file;
        fputs(d->nfuncs || k ? ",\n   " : "\n   ", out);
        pyu_json_str(out, path);
        fputs(", ", out);
        pyu_json_str(out, base_name(path));
    }
    for (size_t m = 0; m < NMARKERS; m++)
        fprintf(out, "%s\"%s\"", d->nfuncs || g->nfiles || m ? ", " : "",
                markers[m].name);
    size_t nf = g->nfiles;
    fprintf(out, "],\n  \"sources\": {\"length\": %zu, ", nf);
    COLUMN(out, "id", nf, fputs("null", out));
    fputs(", ", out);
    COLUMN(out, "filename", nf, fprintf(out, "%zu", str_file(g, i)));
    fputs(", ", out);
    COLUMN(out, "startLine", nf, fputc('1', out));
    fputs(", ", out);
    COLUMN(out, "startColumn", nf, fputc('1', out));
    fputs(", ", out);
    COLUMN(out, "sourceMapURL", nf, fputs("null", out));
    fputs(", ", out);
    COLUMN(out, "content", nf, fputs("null", out));
    fprintf(out, "},\n  \"sourceLocationTable\": {\"source\": [], "
                 "\"line\": [], \"column\": [], \"length\": 0},\n"
                 "  \"nativeSymbols\": {\"libIndex\": [], \"address\": [], "
                 "\"name\": [], \"functionSize\": [], \"length\": 0},\n"
                 "  \"resourceTable\": {\"length\": %zu, ",
            nf);
    COLUMN(out, "name", nf, fprintf(out, "%zu", str_base(g, i)));
    fputs(", ", out);
    COLUMN(out, "host", nf, fputs("null", out));
    fputs(", ", out);
    COLUMN(out, "type", nf, fputc('1', out)); /* (a "library") */
    size_t n = d->nfuncs;
    fprintf(out, "},\n  \"funcTable\": {\"length\": %zu,\n   ", n);
    COLUMN(out, "name", n, fprintf(out, "%zu", str_func((uint32_t)i)));
    fputs(",\n   ", out);
    COLUMN(out, "isJS", n, fputs("false", out));
    fputs(",\n   ", out);
    COLUMN(out, "relevantForJS", n, fputs("false", out));
    fputs(",\n   ", out);
    COLUMN(out, "resource", n,
           fprintf(out, "%ld",
                   g->file_of[i] == UINT32_MAX ? -1L : (long)g->file_of[i]));
    fputs(",\n   ", out);
    COLUMN(out, "source", n,
           g->file_of[i] == UINT32_MAX
               ? (void)fputs("null", out)
               : (void)fprintf(out, "%" PRIu32, g->file_of[i]));
    fputs(",\n   ", out);
    COLUMN(out, "lineNumber", n,
           d->funcs[i].first_line > 0
               ? (void)fprintf(out, "%d", d->funcs[i].first_line)
               : (void)fputs("null", out));
    fputs(",\n   ", out);
    COLUMN(out, "columnNumber", n, fputs("null", out));
    fputs(",\n   ", out);
    COLUMN(out, "originalLocation", n, fputs("null", out));
    n = d->nframes;
    fprintf(out, "},\n  \"frameTable\": {\"length\": %zu,\n   ", n);
    COLUMN(out, "address", n, fputs("-1", out));
    fputs(",\n   ", out);
    COLUMN(out, "lib", n, fputs("-1", out));
    fputs(",\n   ", out);
    COLUMN(out, "inlineDepth", n, fputc('0', out));
    fputs(",\n   ", out);
    COLUMN(out, "category", n,
           fprintf(out, "%d",
                   func_category(d->funcs[d->frames[i].func].kind)));
    fputs(",\n   ", out);
    COLUMN(out, "subcategory", n, fputc('0', out));
    fputs(",\n   ", out);
    COLUMN(out, "func", n, fprintf(out, "%" PRIu32, d->frames[i].func));
    fputs(",\n   ", out);
    COLUMN(out, "nativeSymbol", n, fputs("null", out));
    fputs(",\n   ", out);
    COLUMN(out, "innerWindowID", n, fputs("null", out));
    fputs(",\n   ", out);
    COLUMN(out, "line", n,
           d->frames[i].line > 0
               ? (void)fprintf(out, "%d", d->frames[i].line)
               : (void)fputs("null", out));
    fputs(",\n   ", out);
    COLUMN(out, "column", n, fputs("null", out));
    fputs(",\n   ", out);
    COLUMN(out, "originalLocation", n, fputs("null", out));
    /* node 0, the empty stack, has no entry: stack k is node k + 1 */
    n = d->nnodes - 1;
    fprintf(out, "},\n  \"stackTable\": {\"length\": %zu,\n   ", n);
    COLUMN(out, "frame", n, fprintf(out, "%" PRIu32, d->nodes[i + 1].frame));
    fputs(",\n   ", out);
    COLUMN(out, "prefixOffset", n,
           fprintf(out, "%" PRIu64,
                   d->nodes[i + 1].parent
                       ? (uint64_t)(i + 1 - d->nodes[i + 1].parent)
                       : 0));
    fputs("}},\n", out);
}

/* One column of the thread's status markers (0 data, 1 name, 2 startTime,
 * 3 endTime, 4 phase, 5 category): for each status, an interval over each
 * run of the thread's samples in consecutive ticks that have it.  Returns
 * the number of markers. */
static size_t put_marker_column(gecko *g, const tsample *s, size_t n,
                                int col)
{
    FILE *out = g->out;
    size_t count = 0;
    for (size_t m = 0; m < NMARKERS; m++) {
        for (size_t i = 0; i < n;) {
            if (!(g->tl.events[s[i].event].status & markers[m].bit)) {
                i++;
                continue;
            }
            size_t j = i + 1;
            while (j < n && s[j].tick == s[j - 1].tick + 1 &&
                   (g->tl.events[s[j].event].status & markers[m].bit))
                j++;
            if (count++)
                fputs(count % 16 == 1 ? ",\n    " : ", ", out);
            uint32_t last = s[j - 1].tick;
            switch (col) {
            case 0:
                fprintf(out, "{\"type\": \"" SCHEMA "\", \"samples\": %zu}",
                        j - i);
                break;
            case 1:
                fprintf(out, "%zu", str_marker(g, m));
                break;
            case 2:
                put_ms(out, tick_ns(g, s[i].tick));
                break;
            case 3:
                put_ms(out, last + 1 < g->ticks
                                ? tick_ns(g, last + 1)
                                : tick_ns(g, last) + g->period);
                break;
            case 4:
                fputc('1', out); /* an interval */
                break;
            default:
                fprintf(out, "%d", markers[m].category);
            }
            i = j;
        }
    }
    return count;
}

/* How many processes before `proc` have its pid (one that ran another
 * program, or a pid used again): the Profiler makes one track of a pid,
 * so a later one is "PID.K". */
static unsigned pid_repeats(const pyu_profile_data *d, uint32_t proc)
{
    unsigned k = 0;
    for (uint32_t i = 0; i < proc; i++)
        k += d->processes[i].pid == d->processes[proc].pid;
    return k;
}

static void put_thread(gecko *g, size_t th, bool first_thread)
{
    FILE *out = g->out;
    const pyu_profile_data *d = g->d;
    const pyu_profile_thread *t = &d->threads[th];
    const tsample *s = &g->by_thread[g->first[th]];
    size_t n = g->first[th + 1] - g->first[th];
    bool weighted = false;
    for (size_t i = 0; i < n && !weighted; i++)
        weighted = g->tl.events[s[i].event].n != 1;
    char label[96];
    pyu_profile_thread_label(label, sizeof label, t);
    fprintf(out, "%s  {\"name\": ", first_thread ? "" : ",\n");
    pyu_json_str(out, label);
    fprintf(out, ", \"isMainThread\": %s, \"processType\": \"default\", "
                 "\"processName\": ",
            t->main ? "true" : "false");
    if (d->nprocesses > 1) {
        /* (the Profiler's process: its pid, a string; its times in ms
         * since the start, as the samples') */
        const pyu_profile_process *pr = &d->processes[t->process];
        char name[1100];
        pyu_profile_process_label(name, sizeof name, pr);
        pyu_json_str(out, name);
        unsigned again = pid_repeats(d, t->process);
        fprintf(out, ", \"pid\": \"%d", pr->pid);
        if (again)
            fprintf(out, ".%u", again);
        fprintf(out, "\", \"tid\": %" PRIu64 ", \"processStartupTime\": ",
                t->native_thread_id);
        put_ms(out, pr->start_ns);
        fputs(", \"processShutdownTime\": ", out);
        pr->exited ? put_ms(out, pr->end_ns) : (void)fputs("null", out);
        fputs(", \"registerTime\": ", out);
        put_ms(out, pr->start_ns);
        fputs(", \"unregisterTime\": ", out);
        pr->exited ? put_ms(out, pr->end_ns) : (void)fputs("null", out);
    } else {
        fprintf(out, "\"Python (PID %d)\", \"pid\": \"%d\", \"tid\": %" PRIu64
                     ", \"processStartupTime\": 0, \"processShutdownTime\": "
                     "null, \"registerTime\": 0, \"unregisterTime\": null",
                d->info->process.pid, d->info->process.pid,
                t->native_thread_id);
    }
    fprintf(out, ", \"pausedRanges\": [],\n"
                 "   \"samples\": {\"weightType\": \"samples\", "
                 "\"length\": %zu,\n    ",
            n);
    /* (stack k is node k + 1; the empty stack is null) */
    COLUMN(out, "stack", n, {
        uint32_t node = g->tl.events[s[i].event].node;
        if (node)
            fprintf(out, "%" PRIu32, node - 1);
        else
            fputs("null", out);
    });
    fputs(",\n    ", out);
    COLUMN(out, "time", n, put_ms(out, tick_ns(g, s[i].tick)));
    fputs(",\n    \"weight\": ", out);
    if (weighted)
        COLUMN(out, "", n,
               fprintf(out, "%" PRIu32, g->tl.events[s[i].event].n));
    else
        fputs("null", out);
    fputs("},\n   \"markers\": {", out);
    static const char *const cols[] = {"data",    "name",  "startTime",
                                       "endTime", "phase", "category"};
    size_t nm = 0;
    for (int c = 0; c < 6; c++) {
        fprintf(out, "%s\"%s\": [", c ? ",\n    " : "\n    ", cols[c]);
        nm = put_marker_column(g, s, n, c);
        fputc(']', out);
    }
    fprintf(out, ",\n    \"length\": %zu}}", nm);
}

int pyu_profile_write_gecko(pyu_profile *p, FILE *out)
{
    gecko g = {.out = out, .d = pyu_profile_get(p)};
    const pyu_profile_data *d = g.d;
    pyu_profile_timeline_get(p, &g.tl);
    g.ticks = g.tl.nticks;
    if (g.tl.nticks && g.tl.nevents > g.tl.ticks[g.tl.nticks - 1].end)
        g.ticks++; /* the events after the last mark: at the end */
    else if (!g.tl.nticks && g.tl.nevents)
        g.ticks = 1;
    uint64_t last = g.tl.nticks ? g.tl.ticks[g.tl.nticks - 1].t_ns : 0;
    g.period = pyu_profile_period(d->info);
    if (!g.period)
        g.period = g.tl.nticks > 1 ? (last - g.tl.ticks[0].t_ns) /
                                         (g.tl.nticks - 1)
                                   : 1000000u;
    if (!g.period)
        g.period = 1;
    /* (the last sample stands for its period: the Profiler leaves out a
     * sample at the very end of the range, py-sample's in lldb 1 of
     * 1,000 when the run was timed shorter than its ticks) */
    g.end_ns = d->info->duration_ns > last + g.period ? d->info->duration_ns
                                                      : last + g.period;
    int rc = number_files(&g);
    if (rc == 0)
        rc = group_by_thread(&g);
    if (rc == 0) {
        put_meta(&g);
        put_shared(&g);
        fputs(" \"threads\": [\n", out);
        size_t written = 0;
        /* main threads first: the Profiler selects the first */
        for (size_t k = 0; k < 2 * d->nthreads; k++) {
            size_t th = k % d->nthreads;
            if ((k < d->nthreads) != (d->threads[th].main != 0))
                continue;
            put_thread(&g, th, written++ == 0);
        }
        fputs("]}\n", out);
    }
    free(g.file_of);
    free(g.file_func);
    free(g.first);
    free(g.by_thread);
    if (rc == 0 && ferror(out))
        rc = -PYU_E_IO;
    return rc;
}
