/* The output formats of a profile: one table (name, summary, binary,
 * keeps instructions, writer) that the front ends read for their
 * --format parser, help and dispatch, and pyu_profile_write over it. */
#include "../internal.h"

#include <string.h>

static int top(pyu_profile *p, const pyu_write_opts *o, FILE *out)
{
    return pyu_profile_write_top(p, out, o->sort, o->limit);
}

static int flamegraph(pyu_profile *p, const pyu_write_opts *o, FILE *out)
{
    return o->base ? pyu_profile_write_flamegraph_diff(p, o->base, out)
                   : pyu_profile_write_flamegraph(p, out);
}

#define PLAIN(fn)                                                          \
    static int fn(pyu_profile *p, const pyu_write_opts *o, FILE *out)      \
    {                                                                      \
        (void)o;                                                           \
        return pyu_profile_write_##fn(p, out);                             \
    }
PLAIN(collapsed)
PLAIN(json)
PLAIN(speedscope)
PLAIN(raw)
PLAIN(heatmap)
PLAIN(gecko)

static int pprof(pyu_profile *p, const pyu_write_opts *o, FILE *out)
{
    return pyu_pprof_write(p, out, o->flags & PYU_WRITE_PROCESS_LABELS);
}

typedef int (*writer)(pyu_profile *p, const pyu_write_opts *o, FILE *out);

static const pyu_format formats[] = {
    {"top", "functions by self and total samples", 0, 0},
    {"collapsed", "flame graph input", 0, 0},
    {"json", "docs/json.md", 0, 1},
    {"pprof", "go tool pprof; binary", 1, 0},
    {"speedscope", "speedscope's JSON file format", 0, 0},
    {"raw", "a capture for pyunwind report; binary", 1, 1},
    {"flamegraph", "an HTML page", 0, 1},
    {"heatmap", "an HTML page of the source, line by line", 0, 1},
    {"gecko", "the Firefox Profiler's format, with a timeline", 0, 0},
};
#define NFORMATS (sizeof formats / sizeof formats[0])
/* (each format's writer, in the same order) */
static const writer writers[NFORMATS] = {
    top, collapsed, json, pprof, speedscope, raw, flamegraph, heatmap, gecko,
};

const pyu_format *pyu_profile_formats(size_t *n)
{
    *n = NFORMATS;
    return formats;
}

const pyu_format *pyu_profile_format(const char *name)
{
    for (size_t i = 0; name && i < NFORMATS; i++)
        if (strcmp(formats[i].name, name) == 0)
            return &formats[i];
    return NULL;
}

int pyu_profile_write(pyu_profile *p, const char *name,
                      const pyu_write_opts *o, FILE *out)
{
    static const pyu_write_opts defaults = {PYU_TOP_SORT_SELF, 40, NULL, 0};
    const pyu_format *f = pyu_profile_format(name);
    if (!o)
        o = &defaults;
    if (!f || (o->base && writers[f - formats] != flamegraph))
        return -PYU_E_INVAL;
    /* the formats that show no instructions, and the differential view
     * (whose two profiles meet by line), are written by line */
    pyu_profile *q = NULL, *b = NULL;
    pyu_write_opts oo = *o;
    if ((!f->keeps_instructions || o->base) && pyu_profile_has_instrs(p) &&
        !(q = pyu_profile_by_line(p)))
        return -PYU_E_NOMEM;
    if (o->base && pyu_profile_has_instrs(o->base) &&
        !(oo.base = b = pyu_profile_by_line(o->base))) {
        pyu_profile_free(q);
        return -PYU_E_NOMEM;
    }
    int rc = writers[f - formats](q ? q : p, &oo, out);
    pyu_profile_free(q);
    pyu_profile_free(b);
    return rc;
}
