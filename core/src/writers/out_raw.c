/* Captures: the raw format, written while sampling and read back by
 * `pyunwind report` (docs/formats.md#raw).
 *
 * A capture is the magic "PYUNWRAW", a version (varint, 3), then records,
 * each a tag byte and unsigned LEB128 varints (signed values zigzag
 * encoded; a string is its length and its UTF-8 bytes):
 *
 *   'P' pid, python, mode, flags, interval_ns, start_ns   first, once
 *   'T' thread_id, native_thread_id, zigzag(interpreter_id), main, name
 *                                                         (version 2; a
 *                                                         version 1 'T'
 *                                                         has no name)
 *   'F' name, file, zigzag(first_line), kind              a function
 *   'L' function, zigzag(line), zigzag(instr), op, base   a frame
 *                                                         (version 3; a
 *                                                         version 1 or 2
 *                                                         'L' has only
 *                                                         function, line)
 *   'N' parent node, frame                                a stack: node 1,
 *                                                         2, ... (0 is the
 *                                                         empty stack)
 *   'S' t_ns, failed, missed, count, count x (thread, node, status, n)
 *                                                         a sample
 *   'E' duration_ns, samples, failed, missed              last
 *
 * Threads, functions, frames and nodes are numbered from 0 (nodes from 1)
 * in the order of their records, and each comes before the first record
 * that names it.  t_ns is the sample's time since the start; missed the
 * ticks of the schedule missed since the sample before.  A run that was
 * killed leaves no 'E' record (and maybe half a record): the reader keeps
 * every whole sample.
 */
#include "../internal.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAGIC "PYUNWRAW"
#define VERSION 3 /* (reads 1 and 2 too) */
#define FLUSH_EVERY_NS 10000000ull /* a killed run loses at most this */
#define STR_MAX (1u << 20)
#define ENTRIES_MAX (1u << 24)

/* ---------------------------------------------------------------- writer */

struct pyu_capture {
    pyu_profile *p;
    FILE *out;
    size_t threads, funcs, frames, nodes; /* written so far */
    uint64_t last_flush;
    int err;
};

static uint64_t mono_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

static void put_u(FILE *out, uint64_t v)
{
    do {
        uint8_t b = (uint8_t)(v & 0x7f);
        v >>= 7;
        putc(v ? b | 0x80 : b, out);
    } while (v);
}

static uint64_t zigzag(int64_t v)
{
    return ((uint64_t)v << 1) ^ (uint64_t)(v >> 63);
}

static void put_s(FILE *out, const char *s)
{
    size_t n = strlen(s);
    put_u(out, n);
    fwrite(s, 1, n, out);
}

static void put_header(FILE *out, const pyu_profile_info *pi)
{
    fputs(MAGIC, out);
    put_u(out, VERSION);
    putc('P', out);
    put_u(out, (uint64_t)(pi->pid > 0 ? pi->pid : 0));
    put_s(out, pi->python);
    put_u(out, (uint64_t)(pi->mode >= 0 ? pi->mode : 0));
    put_u(out, pi->flags);
    put_u(out, pi->interval_ns);
    put_u(out, pi->start_ns);
}

/* The threads, functions, frames and nodes the profile gained since the
 * last call. */
static void put_new(pyu_capture *c, const pyu_profile_data *d)
{
    FILE *out = c->out;
    for (; c->threads < d->nthreads; c->threads++) {
        const pyu_profile_thread *t = &d->threads[c->threads];
        putc('T', out);
        put_u(out, t->thread_id);
        put_u(out, t->native_thread_id);
        put_u(out, zigzag(t->interpreter_id));
        put_u(out, t->main != 0);
        put_s(out, t->name ? t->name : "");
    }
    for (; c->funcs < d->nfuncs; c->funcs++) {
        const pyu_profile_func *f = &d->funcs[c->funcs];
        putc('F', out);
        put_s(out, f->name);
        put_s(out, f->file);
        put_u(out, zigzag(f->first_line));
        put_u(out, (uint64_t)f->kind);
    }
    for (; c->frames < d->nframes; c->frames++) {
        const pyu_profile_frame *f = &d->frames[c->frames];
        putc('L', out);
        put_u(out, f->func);
        put_u(out, zigzag(f->line));
        put_u(out, zigzag(f->instr));
        put_s(out, f->op);
        put_s(out, f->base);
    }
    for (; c->nodes < d->nnodes; c->nodes++) {
        const pyu_profile_node *n = &d->nodes[c->nodes];
        putc('N', out);
        put_u(out, n->parent);
        put_u(out, n->frame);
    }
}

static void put_end(FILE *out, const pyu_profile_info *pi)
{
    putc('E', out);
    put_u(out, pi->duration_ns);
    put_u(out, pi->samples);
    put_u(out, pi->failed);
    put_u(out, pi->missed);
}

int pyu_capture_new(pyu_profile *p, FILE *out, pyu_capture **cp)
{
    *cp = NULL;
    pyu_capture *c = calloc(1, sizeof *c);
    if (!c)
        return -PYU_E_NOMEM;
    c->p = p;
    c->out = out;
    c->nodes = 1; /* (the root is not written) */
    put_header(out, pyu_profile_info_of(p));
    pyu_profile_journal_start(p);
    c->last_flush = mono_ns();
    if (fflush(out) != 0)
        c->err = -PYU_E_IO;
    *cp = c;
    return c->err;
}

int pyu_capture_sample(pyu_capture *c, uint64_t t_ns, int failed,
                       uint64_t missed)
{
    const pyu_profile_data *d = pyu_profile_get(c->p);
    FILE *out = c->out;
    put_new(c, d);
    size_t n;
    const pyu_journal_entry *e = pyu_profile_journal_take(c->p, &n);
    putc('S', out);
    put_u(out, t_ns);
    put_u(out, failed != 0);
    put_u(out, missed);
    put_u(out, n);
    for (size_t i = 0; i < n; i++) {
        put_u(out, e[i].thread);
        put_u(out, e[i].node);
        put_u(out, e[i].status);
        put_u(out, e[i].n);
    }
    uint64_t now = mono_ns();
    if (now - c->last_flush >= FLUSH_EVERY_NS) {
        c->last_flush = now;
        if (fflush(out) != 0)
            c->err = -PYU_E_IO;
    }
    if (ferror(out))
        c->err = -PYU_E_IO;
    return c->err;
}

int pyu_capture_end(pyu_capture *c)
{
    if (!c)
        return 0;
    put_end(c->out, pyu_profile_info_of(c->p));
    if (fflush(c->out) != 0 || ferror(c->out))
        c->err = -PYU_E_IO;
    int rc = c->err;
    free(c);
    return rc;
}

/* Whether the timeline holds every count of the profile. */
static bool timeline_whole(const pyu_profile_data *d,
                           const pyu_profile_timeline *tl)
{
    if (!tl->nticks || tl->cut || tl->nevents != tl->ticks[tl->nticks - 1].end)
        return false;
    uint64_t sum = 0;
    for (size_t i = 0; i < tl->nevents; i++)
        sum += tl->events[i].n;
    return sum == d->total;
}

/* A whole profile as a capture: its samples as the timeline has them;
 * or, when the timeline does not hold them all (counted by hand, or
 * past its limit), every stack in one sample at the start with its count
 * and status. */
int pyu_profile_write_raw(pyu_profile *p, FILE *out)
{
    const pyu_profile_data *d = pyu_profile_get(p);
    pyu_profile_timeline tl;
    pyu_profile_timeline_get(p, &tl);
    pyu_capture c = {.p = p, .out = out, .nodes = 1};
    put_header(out, d->info);
    put_new(&c, d);
    if (timeline_whole(d, &tl)) {
        uint32_t at = 0;
        for (size_t k = 0; k < tl.nticks; k++) {
            const pyu_profile_tick *t = &tl.ticks[k];
            putc('S', out);
            put_u(out, t->t_ns);
            put_u(out, t->failed != 0);
            /* (the missed ticks, all on the last sample) */
            put_u(out, k + 1 == tl.nticks ? d->info->missed : 0);
            put_u(out, t->end - at);
            for (; at < t->end; at++) {
                put_u(out, tl.events[at].thread);
                put_u(out, tl.events[at].node);
                put_u(out, tl.events[at].status);
                put_u(out, tl.events[at].n);
            }
        }
    } else {
        putc('S', out);
        put_u(out, 0);
        put_u(out, 0);
        put_u(out, d->info->missed);
        put_u(out, d->nstacks);
        for (size_t i = 0; i < d->nstacks; i++) {
            put_u(out, d->stacks[i].thread);
            put_u(out, d->stacks[i].node);
            put_u(out, d->stacks[i].status);
            put_u(out, d->stacks[i].count);
        }
    }
    put_end(out, d->info);
    return ferror(out) ? -PYU_E_IO : 0;
}

/* ---------------------------------------------------------------- reader */

typedef struct reader {
    FILE *in;
    uint64_t at;  /* bytes read */
    bool eof;     /* the capture ended inside a record */
    char *msg;
    size_t msglen;
} reader;

static int bad(reader *r, const char *fmt, ...)
{
    char what[160];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    snprintf(r->msg, r->msglen, "not a readable capture: at byte %" PRIu64
             ": %s", r->at, what);
    return -PYU_E_CORRUPT;
}

static int get_byte(reader *r)
{
    int c = getc(r->in);
    if (c == EOF)
        r->eof = true;
    else
        r->at++;
    return c;
}

static bool get_u(reader *r, uint64_t *v)
{
    *v = 0;
    for (unsigned shift = 0; shift < 64; shift += 7) {
        int c = get_byte(r);
        if (c == EOF)
            return false;
        *v |= (uint64_t)(c & 0x7f) << shift;
        if (!(c & 0x80))
            return true;
    }
    return false; /* (more than 10 bytes: not a varint) */
}

static int64_t unzigzag(uint64_t v)
{
    return (int64_t)(v >> 1) ^ -(int64_t)(v & 1);
}

/* A string into buf (cap bytes); false at the end or when too long. */
static bool get_str(reader *r, char **buf, size_t *cap)
{
    uint64_t n;
    if (!get_u(r, &n) || n > STR_MAX)
        return false;
    if (n + 1 > *cap) {
        char *b = realloc(*buf, n + 1);
        if (!b)
            return false;
        *buf = b;
        *cap = n + 1;
    }
    if (fread(*buf, 1, n, r->in) != n) {
        r->eof = true;
        return false;
    }
    r->at += n;
    (*buf)[n] = 0;
    return true;
}

/* Index maps from the capture's numbering to the profile's. */
typedef struct map {
    uint32_t *v;
    size_t n, cap;
} map;

static bool map_add(map *m, long v)
{
    if (v < 0 || !pyu_grow((void **)&m->v, m->n, &m->cap, sizeof *m->v))
        return false;
    m->v[m->n++] = (uint32_t)v;
    return true;
}

static bool keep_status(int capture_mode, int mode, unsigned status)
{
    if (mode == capture_mode || mode == PYU_MODE_WALL)
        return true;
    if (mode == PYU_MODE_GIL)
        return status & PYU_STATUS_HAS_GIL;
    /* exception: and running, as the sampler selects it */
    return (status & PYU_STATUS_EXCEPTION) &&
           (status & (PYU_STATUS_HAS_GIL | PYU_STATUS_ON_CPU));
}

int pyu_capture_read(FILE *in, const pyu_capture_filter *f, pyu_profile *p,
                     char *msg, size_t msglen)
{
    reader r = {in, 0, false, msg, msglen};
    char magic[sizeof MAGIC - 1];
    msg[0] = 0;
    if (fread(magic, 1, sizeof magic, in) != sizeof magic ||
        memcmp(magic, MAGIC, sizeof magic) != 0) {
        snprintf(msg, msglen, "not a capture (pyunwind sample --format raw "
                 "writes them)");
        return -PYU_E_CORRUPT;
    }
    r.at = sizeof magic;
    uint64_t version;
    if (!get_u(&r, &version) || version < 1 || version > VERSION)
        return bad(&r, "version %" PRIu64 " (this pyunwind reads versions "
                   "1 to %d)", version, VERSION);
    pyu_profile_info *pi = pyu_profile_info_of(p);
    char *s1 = NULL, *s2 = NULL;
    const char *op, *base;
    size_t c1 = 0, c2 = 0;
    map threads = {0}, funcs = {0}, frames = {0}, nodes = {0};
    map_add(&nodes, 0); /* the root */
    int capture_mode = PYU_MODE_WALL, rc = 0;
    bool have_p = false, ended = false;
    uint64_t samples = 0, failed = 0, missed = 0, last_t = 0;
    uint64_t end_duration = 0;
    uint64_t from = f ? f->from_ns : 0;
    uint64_t to = f && f->to_ns ? f->to_ns : UINT64_MAX;
    int mode = f ? f->mode : -1;
    for (;;) {
        uint64_t rec_at = r.at;
        int tag = get_byte(&r);
        if (tag == EOF)
            break;
        uint64_t v[6] = {0};
        if (!have_p && tag != 'P') {
            rc = bad(&r, "no process record first");
            break;
        }
        bool ok = true;
        switch (tag) {
        case 'P':
            ok = !have_p && get_u(&r, &v[0]) && get_str(&r, &s1, &c1) &&
                 get_u(&r, &v[1]) && get_u(&r, &v[2]) && get_u(&r, &v[3]) &&
                 get_u(&r, &v[4]);
            if (!ok)
                break;
            have_p = true;
            capture_mode = v[1] <= PYU_MODE_EXCEPTION ? (int)v[1] : -1;
            if (capture_mode < 0) {
                rc = bad(&r, "unknown mode %" PRIu64, v[1]);
                break;
            }
            if (mode >= 0 && mode != capture_mode &&
                !(capture_mode == PYU_MODE_WALL &&
                  (mode == PYU_MODE_GIL || mode == PYU_MODE_EXCEPTION))) {
                snprintf(msg, msglen, "the capture was sampled in %s mode: "
                         "a report can keep that mode, or narrow wall mode "
                         "to gil or exception",
                         pyu_profile_mode_name(capture_mode));
                rc = -PYU_E_INVAL;
                break;
            }
            pi->pid = (int)(v[0] & 0x7fffffff);
            snprintf(pi->python, sizeof pi->python, "%s", s1);
            pi->mode = mode >= 0 ? mode : capture_mode;
            pi->flags = (unsigned)v[2];
            pi->interval_ns = v[3];
            pi->start_ns = v[4] + (from != 0 ? from : 0);
            break;
        case 'T':
            ok = get_u(&r, &v[0]) && get_u(&r, &v[1]) && get_u(&r, &v[2]) &&
                 get_u(&r, &v[3]);
            if (ok && version >= 2)
                ok = get_str(&r, &s1, &c1);
            if (ok && !map_add(&threads, pyu_profile_add_thread(
                                             p, v[0], v[1],
                                             unzigzag(v[2]), v[3] != 0)))
                rc = -PYU_E_NOMEM;
            if (ok && rc == 0 && version >= 2 && *s1 &&
                pyu_profile_name_thread(p, (uint32_t)threads.v[threads.n - 1],
                                        s1) < 0)
                rc = -PYU_E_NOMEM;
            break;
        case 'F':
            ok = get_str(&r, &s1, &c1) && get_str(&r, &s2, &c2) &&
                 get_u(&r, &v[0]) && get_u(&r, &v[1]);
            if (ok && v[1] > PYU_FUNC_UNKNOWN) {
                rc = bad(&r, "unknown function kind %" PRIu64, v[1]);
                break;
            }
            if (ok && !map_add(&funcs, pyu_profile_add_func(
                                           p, s1, s2,
                                           (int)unzigzag(v[0]), (int)v[1])))
                rc = -PYU_E_NOMEM;
            break;
        case 'L':
            ok = get_u(&r, &v[0]) && get_u(&r, &v[1]);
            v[2] = 1; /* (zigzag(-1): no instruction) */
            op = base = "";
            if (ok && version >= 3) {
                ok = get_u(&r, &v[2]) && get_str(&r, &s1, &c1) &&
                     get_str(&r, &s2, &c2);
                op = s1;
                base = s2;
            }
            if (ok && v[0] >= funcs.n) {
                rc = bad(&r, "frame of function %" PRIu64 " of %zu", v[0],
                         funcs.n);
                break;
            }
            if (ok && !map_add(&frames, pyu_profile_add_instr_frame(
                                            p, funcs.v[v[0]],
                                            (int)unzigzag(v[1]),
                                            (int)unzigzag(v[2]), op, base)))
                rc = -PYU_E_NOMEM;
            break;
        case 'N':
            ok = get_u(&r, &v[0]) && get_u(&r, &v[1]);
            if (ok && (v[0] >= nodes.n || v[1] >= frames.n)) {
                rc = bad(&r, "stack over node %" PRIu64 " of %zu and frame "
                         "%" PRIu64 " of %zu", v[0], nodes.n, v[1], frames.n);
                break;
            }
            if (ok && !map_add(&nodes, pyu_profile_push(p, nodes.v[v[0]],
                                                        frames.v[v[1]])))
                rc = -PYU_E_NOMEM;
            break;
        case 'S': {
            ok = get_u(&r, &v[0]) && get_u(&r, &v[1]) && get_u(&r, &v[2]) &&
                 get_u(&r, &v[3]);
            if (!ok)
                break;
            if (v[3] > ENTRIES_MAX) {
                rc = bad(&r, "%" PRIu64 " stacks in one sample", v[3]);
                break;
            }
            bool in_window = v[0] >= from && v[0] < to;
            last_t = v[0];
            for (uint64_t i = 0; ok && rc == 0 && i < v[3]; i++) {
                uint64_t e[4];
                ok = get_u(&r, &e[0]) && get_u(&r, &e[1]) &&
                     get_u(&r, &e[2]) && get_u(&r, &e[3]);
                if (!ok)
                    break;
                if (e[0] >= threads.n || e[1] >= nodes.n) {
                    rc = bad(&r, "a count of thread %" PRIu64 " of %zu, "
                             "node %" PRIu64 " of %zu", e[0], threads.n,
                             e[1], nodes.n);
                    break;
                }
                const pyu_profile_thread *th =
                    &pyu_profile_get(p)->threads[threads.v[e[0]]];
                if (!in_window || !keep_status(capture_mode, pi->mode,
                                               (unsigned)e[2]) ||
                    (f && f->thread && f->thread != th->native_thread_id &&
                     f->thread != th->thread_id))
                    continue;
                if (pyu_profile_count(p, threads.v[e[0]], nodes.v[e[1]],
                                      e[3], (unsigned)e[2]) < 0)
                    rc = -PYU_E_NOMEM;
            }
            if (ok && rc == 0 && in_window) {
                samples++;
                failed += v[1] != 0;
                missed += v[2];
                if (pyu_profile_mark(p, v[0] - from, v[1] != 0) < 0)
                    rc = -PYU_E_NOMEM;
            }
            break;
        }
        case 'E':
            ok = get_u(&r, &v[0]) && get_u(&r, &v[1]) && get_u(&r, &v[2]) &&
                 get_u(&r, &v[3]);
            if (ok) {
                ended = true;
                end_duration = v[0];
            }
            break;
        default:
            r.at = rec_at;
            rc = bad(&r, "unknown record '%c' (0x%02x)",
                     tag >= 32 && tag < 127 ? tag : '?', tag);
        }
        if (rc == 0 && !ok) {
            if (r.eof)
                break; /* a run killed while writing: keep what is whole */
            r.at = rec_at;
            rc = bad(&r, "a malformed '%c' record", tag);
        }
        if (rc != 0 || ended)
            break;
    }
    if (rc == 0 && !have_p) {
        r.at = sizeof magic;
        rc = bad(&r, "no process record");
    }
    if (rc == -PYU_E_NOMEM && !msg[0])
        snprintf(msg, msglen, "out of memory");
    if (rc == 0) {
        uint64_t end = ended ? end_duration : last_t;
        pi->duration_ns = (to < end ? to : end) - (from < end ? from : end);
        pi->samples = samples;
        pi->failed = failed;
        pi->missed = missed;
        if (!ended)
            snprintf(msg, msglen, "the capture ends early (its run was "
                     "killed?): kept the %" PRIu64 " samples before byte "
                     "%" PRIu64, samples, r.at);
    }
    free(s1);
    free(s2);
    free(threads.v);
    free(funcs.v);
    free(frames.v);
    free(nodes.v);
    return rc;
}
