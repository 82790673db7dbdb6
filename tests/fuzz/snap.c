/* Snapshots replayed behind memory ops (see snap.h). */
#include "snap.h"

#include <stdlib.h>
#include <string.h>

/* Reads n bytes at *at of in (len); 0 when they are not there. */
static int take(const uint8_t *in, size_t len, size_t *at, void *out,
                size_t n)
{
    if (n > len - *at)
        return 0;
    memcpy(out, in + *at, n);
    *at += n;
    return 1;
}

/* Paths the harness lets pyunwind open: the interpreters' own places. */
static int allowed(const char *p)
{
    static const char *const ok[] = {"/var/cache/pyunwind/pythons/",
                                     "/usr/lib/", "/lib/", "/usr/local/lib/"};
    if (strstr(p, "/../") || strstr(p, "/./"))
        return 0;
    for (size_t i = 0; i < sizeof ok / sizeof *ok; i++)
        if (strncmp(p, ok[i], strlen(ok[i])) == 0)
            return 1;
    return 0;
}

void snap_free(snap *s)
{
    for (size_t i = 0; i < s->nranges; i++)
        free(s->data[i]);
    free(s->paths);
    s->nranges = s->nmaps = 0;
    s->paths = NULL;
}

int snap_parse(snap *s, const uint8_t *in, size_t len)
{
    size_t at = 0;
    snap_header h;
    s->nranges = s->nmaps = 0;
    s->paths = NULL;
    if (!take(in, len, &at, &h, sizeof h) || h.magic != SNAP_MAGIC ||
        h.nmaps > SNAP_MAX_MAPS)
        return -1;
    s->pid = (int)(h.pid & 0x7fffffff);
    s->runtime = h.runtime;
    size_t room = 0;
    for (uint32_t i = 0; i < h.nmaps; i++) { /* (paths' total first) */
        snap_map m;
        if (!take(in, len, &at, &m, sizeof m) || m.pathlen > len - at)
            return -1;
        at += m.pathlen;
        room += m.pathlen + 1;
    }
    s->paths = malloc(room + 1);
    if (!s->paths)
        return -1;
    at = sizeof h;
    char *p = s->paths;
    for (uint32_t i = 0; i < h.nmaps; i++) {
        snap_map m = {0};
        take(in, len, &at, &m, sizeof m);
        memcpy(p, in + at, m.pathlen);
        p[m.pathlen] = 0;
        at += m.pathlen;
        s->maps[i] = (pyu_mapping){m.start, m.end, m.offset, m.prot,
                                   p[0] && !memchr(p, 0, m.pathlen) &&
                                           allowed(p)
                                       ? p
                                       : NULL};
        p += m.pathlen + 1;
    }
    s->nmaps = h.nmaps;
    uint32_t n;
    if (!take(in, len, &at, &n, sizeof n) || n > SNAP_MAX_RANGES) {
        snap_free(s);
        return -1;
    }
    for (uint32_t i = 0; i < n; i++) {
        snap_range r;
        if (!take(in, len, &at, &r, sizeof r) || r.len > len - at ||
            !(s->data[i] = malloc(r.len ? r.len : 1))) {
            snap_free(s);
            return -1;
        }
        memcpy(s->data[i], in + at, r.len);
        at += r.len;
        s->ranges[i] = r;
        s->nranges = i + 1;
    }
    s->rest = in + at;
    s->restlen = len - at;
    return 0;
}

/* The range holding addr, or -1. */
static long range_of(const snap *s, uint64_t addr)
{
    for (size_t i = 0; i < s->nranges; i++)
        if (addr >= s->ranges[i].addr &&
            addr - s->ranges[i].addr < s->ranges[i].len)
            return (long)i;
    return -1;
}

/* Copies n bytes between the snapshot at addr and buf (to: into the
 * snapshot); 0 when a byte is not in it. */
static int copy(snap *s, uint64_t addr, uint8_t *buf, size_t n, int to)
{
    while (n) {
        long i = range_of(s, addr);
        if (i < 0)
            return 0;
        size_t off = (size_t)(addr - s->ranges[i].addr);
        size_t k = s->ranges[i].len - off;
        if (k > n)
            k = n;
        if (to)
            memcpy(s->data[i] + off, buf, k);
        else
            memcpy(buf, s->data[i] + off, k);
        addr += k;
        buf += k;
        n -= k;
    }
    return 1;
}

int snap_change(snap *s)
{
    snap_range r;
    size_t at = 0;
    if (!take(s->rest, s->restlen, &at, &r, sizeof r) ||
        r.len > s->restlen - at)
        return 0;
    uint8_t *tmp = malloc(r.len ? r.len : 1);
    if (tmp) {
        memcpy(tmp, s->rest + at, r.len);
        copy(s, r.addr, tmp, r.len, 1); /* (outside the snapshot: ignored) */
        free(tmp);
    }
    s->rest += at + r.len;
    s->restlen -= at + r.len;
    return 1;
}

static int snap_read(void *ctx, const pyu_range *r, size_t n)
{
    int rc = 0;
    for (size_t i = 0; i < n; i++)
        if (!copy(ctx, r[i].addr, r[i].buf, r[i].len, 0))
            rc = -PYU_E_FAULT;
    return rc;
}

static int snap_write(void *ctx, uint64_t addr, const void *buf, size_t len)
{
    return copy(ctx, addr, (uint8_t *)buf, len, 1) ? 0 : -PYU_E_FAULT;
}

static int snap_mappings(void *ctx, pyu_mapping_fn fn, void *arg)
{
    snap *s = ctx;
    for (size_t i = 0; i < s->nmaps; i++) {
        int rc = fn(arg, &s->maps[i]);
        if (rc)
            return rc;
    }
    return 0;
}

const pyu_memory_ops snap_ops = {
    .read = snap_read, .mappings = snap_mappings, .write = snap_write};

/* ------------------------------------------------------------ lookups */

#define LOOK_FRAMES 4 /* frames of a thread looked in */
#define LOOK_NAMES 12 /* names of a frame, attributes of a name */

typedef struct name_list {
    char names[LOOK_NAMES][64];
    size_t n;
} name_list;

static int keep_name(void *arg, const char *name)
{
    name_list *l = arg;
    if (l->n >= LOOK_NAMES)
        return 1;
    if (strlen(name) < sizeof l->names[0])
        snprintf(l->names[l->n++], sizeof l->names[0], "%s", name);
    return l->n == LOOK_NAMES;
}

void snap_lookups(pyu_session *s, const pyu_dump *d)
{
    static const char *const items[] = {"[0]", "[-1]", "['a']", "[1]"};
    pyu_lookup found;
    for (size_t t = 0; d && t < d->nthreads; t++)
        for (size_t k = 0; k < d->threads[t].nframes && k < LOOK_FRAMES;
             k++) {
            uint64_t frame = d->threads[t].frames[k].addr;
            name_list names = {.n = 0};
            pyu_frame_names(s, frame, "", keep_name, &names);
            for (size_t i = 0; i < names.n; i++) {
                char expr[160];
                name_list attrs = {.n = 0};
                pyu_frame_lookup(s, frame, names.names[i], &found);
                pyu_frame_names(s, frame, names.names[i], keep_name, &attrs);
                for (size_t j = 0; j < attrs.n; j++) {
                    snprintf(expr, sizeof expr, "%s.%s", names.names[i],
                             attrs.names[j]);
                    pyu_frame_lookup(s, frame, expr, &found);
                }
                snprintf(expr, sizeof expr, "%s%s", names.names[i],
                         items[i % 4]);
                pyu_frame_lookup(s, frame, expr, &found);
            }
        }
}
