/* Output: pprof, the gzip-compressed profile.proto that `go tool pprof`,
 * Pyroscope and Parca read.
 *
 * The message is encoded here, field by field, in protobuf's wire format
 * (varints and length-delimited fields), then compressed with zlib's gzip
 * framing.  What goes in it (field numbers are profile.proto's):
 *
 *   sample_type (1)   [samples/count, wall/nanoseconds] (cpu/nanoseconds
 *                     in cpu mode): the second value is the count times
 *                     the sampling interval (the run's mean interval at
 *                     `-r max`)
 *   sample (2)        one per (thread, stack): its location ids innermost
 *                     first, both values, and labels "thread" (its native
 *                     id, as text "tid:N" like the collapsed format) and
 *                     "thread_id" (its threading.get_ident(), a number),
 *                     "thread_name" (the kernel's name of the thread,
 *                     when it has one of its own);
 *                     and "status" (the thread's status words, e.g.
 *                     "has_gil,exception") when it had any; when the
 *                     profile holds several processes, "pid" (its
 *                     process's id, a number) and "process" (its command
 *                     line, or "pid N" when unknown), so that -tagfocus
 *                     and -tags pick and show processes (also for one
 *                     process with PYU_WRITE_PROCESS_LABELS: a server's)
 *   location (4)      one per profile frame (a function at a line): id =
 *                     frame index + 1, one line (function id, line)
 *   function (5)      one per profile function: id = index + 1, name
 *                     (co_qualname), filename, start_line
 *   string_table (6)  every string once; "" first, as the format wants
 *   time_nanos (9), duration_nanos (10), period_type (11), period (12),
 *   comment (13)      "pyunwind: PID N, CPython V, MODE mode" ("N
 *                     processes" for several)
 *
 * No mappings: Python frames have no addresses in a binary.
 */
#include "../internal.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

/* A growing buffer: a message being encoded. */
typedef struct buf {
    uint8_t *p;
    size_t n, cap;
    bool failed;
} buf;

static void put(buf *b, const void *data, size_t len)
{
    if (b->failed || !len)
        return;
    if (len > b->cap - b->n) {
        size_t ncap = b->cap ? b->cap : 256;
        while (ncap - b->n < len) {
            if (ncap > SIZE_MAX / 2) {
                b->failed = true;
                return;
            }
            ncap *= 2;
        }
        uint8_t *np = realloc(b->p, ncap);
        if (!np) {
            b->failed = true;
            return;
        }
        b->p = np;
        b->cap = ncap;
    }
    memcpy(b->p + b->n, data, len);
    b->n += len;
}

static void varint(buf *b, uint64_t v)
{
    uint8_t t[10];
    size_t n = 0;
    do {
        t[n] = (uint8_t)(v & 0x7f);
        v >>= 7;
        if (v)
            t[n] |= 0x80;
        n++;
    } while (v);
    put(b, t, n);
}

/* A varint field (wire type 0); zero values are left out, as protobuf
 * writers do. */
static void field_int(buf *b, unsigned field, uint64_t v)
{
    if (!v)
        return;
    varint(b, (uint64_t)field << 3);
    varint(b, v);
}

/* A length-delimited field (wire type 2): a nested message or a string. */
static void field_bytes(buf *b, unsigned field, const void *data,
                        size_t len)
{
    varint(b, (uint64_t)field << 3 | 2);
    varint(b, len);
    put(b, data, len);
}

static void field_msg(buf *b, unsigned field, buf *m)
{
    if (m->failed)
        b->failed = true;
    field_bytes(b, field, m->p, m->n);
    m->n = 0; /* (reused for the next message) */
}

/* The string table: each string once, "" at index 0. */
typedef struct strings {
    char **s; /* owned copies, in table order */
    size_t n, cap;
    pyu_ix ix; /* over s */
    bool failed;
} strings;

/* The index of s in the table (added when new). */
static int64_t str_index(strings *t, const char *s)
{
    if (t->failed)
        return 0;
    if (t->n >= UINT32_MAX - 1 || !pyu_ix_room(&t->ix)) {
        t->failed = true;
        return 0;
    }
    uint32_t h = pyu_mix(pyu_hash_bytes(s, strlen(s)));
    size_t at;
    long e = PYU_IX_FIND(&t->ix, h, &at, strcmp(t->s[e], s) == 0);
    if (e >= 0)
        return e;
    char *copy = NULL;
    if (!pyu_grow((void **)&t->s, t->n, &t->cap, sizeof *t->s) ||
        !(copy = strdup(s))) {
        t->failed = true;
        return 0;
    }
    t->s[t->n] = copy;
    pyu_ix_put(&t->ix, at, h, t->n);
    return (int64_t)t->n++;
}

static void strings_free(strings *t)
{
    for (size_t i = 0; i < t->n; i++)
        free(t->s[i]);
    free(t->s);
    free(t->ix.slots);
}

static void value_type(buf *b, buf *m, unsigned field, int64_t type,
                       int64_t unit)
{
    field_int(m, 1, (uint64_t)type);
    field_int(m, 2, (uint64_t)unit);
    field_msg(b, field, m);
}

/* The message, uncompressed, into b. */
static int encode(const pyu_profile_data *d, bool process_labels, buf *b)
{
    const pyu_profile_info *pi = d->info;
    strings st = {0};
    buf m = {0}, sub = {0};
    uint32_t *ids = NULL; /* a stack's frames, outermost first */
    size_t cap = 0;
    str_index(&st, "");
    bool cpu = pi->mode == PYU_MODE_CPU;
    int64_t s_samples = str_index(&st, "samples");
    int64_t s_count = str_index(&st, "count");
    int64_t s_time = str_index(&st, cpu ? "cpu" : "wall");
    int64_t s_ns = str_index(&st, "nanoseconds");
    int64_t s_thread = str_index(&st, "thread");
    int64_t s_ident = str_index(&st, "thread_id");
    int64_t s_status = str_index(&st, "status");
    int64_t s_name = str_index(&st, "thread_name");
    /* (several processes: their labels, after the strings one process
     * has, which stay as they were) */
    bool many = d->nprocesses > 1 || (process_labels && d->nprocesses);
    int64_t s_pid = many ? str_index(&st, "pid") : 0;
    int64_t s_process = many ? str_index(&st, "process") : 0;
    value_type(b, &m, 1, s_samples, s_count);
    value_type(b, &m, 1, s_time, s_ns);
    uint64_t period = pyu_profile_period(pi);
    int rc = 0;
    for (size_t i = 0; i < d->nstacks && rc == 0; i++) {
        const pyu_profile_stack *s = &d->stacks[i];
        const pyu_profile_thread *th = &d->threads[s->thread];
        long depth = pyu_profile_path(d, s->node, &ids, &cap);
        if (depth < 0) {
            rc = -PYU_E_NOMEM;
            break;
        }
        /* location_id (frame + 1), innermost first: packed */
        for (long j = depth; j-- > 0;)
            varint(&sub, (uint64_t)ids[j] + 1);
        field_bytes(&m, 1, sub.p, sub.n);
        sub.n = 0;
        varint(&sub, s->count);
        varint(&sub, s->count * period);
        field_bytes(&m, 2, sub.p, sub.n);
        sub.n = 0;
        char label[32];
        snprintf(label, sizeof label, "tid:%" PRIu64, th->native_thread_id);
        field_int(&sub, 1, (uint64_t)s_thread);
        field_int(&sub, 2, (uint64_t)str_index(&st, label));
        field_msg(&m, 3, &sub);
        field_int(&sub, 1, (uint64_t)s_ident);
        field_int(&sub, 3, th->thread_id);
        field_msg(&m, 3, &sub);
        if (th->name && *th->name) {
            field_int(&sub, 1, (uint64_t)s_name);
            field_int(&sub, 2, (uint64_t)str_index(&st, th->name));
            field_msg(&m, 3, &sub);
        }
        if (many && th->process < d->nprocesses) {
            const pyu_profile_process *pr = &d->processes[th->process];
            field_int(&sub, 1, (uint64_t)s_pid);
            field_int(&sub, 3, (uint64_t)pr->pid);
            field_msg(&m, 3, &sub);
            char pidn[24];
            snprintf(pidn, sizeof pidn, "pid %d", pr->pid);
            field_int(&sub, 1, (uint64_t)s_process);
            field_int(&sub, 2, (uint64_t)str_index(
                                   &st, *pr->command ? pr->command : pidn));
            field_msg(&m, 3, &sub);
        }
        if (s->status) { /* e.g. "has_gil,exception" */
            char words[96] = "";
            for (unsigned b = 0; b < 8; b++) {
                const char *w = pyu_status_name(1u << b, 0);
                if (w && (s->status & (1u << b)))
                    snprintf(words + strlen(words),
                             sizeof words - strlen(words), "%s%s",
                             words[0] ? "," : "", w);
            }
            field_int(&sub, 1, (uint64_t)s_status);
            field_int(&sub, 2, (uint64_t)str_index(&st, words));
            field_msg(&m, 3, &sub);
        }
        field_msg(b, 2, &m);
    }
    for (size_t i = 0; i < d->nframes && rc == 0; i++) {
        field_int(&m, 1, i + 1);
        field_int(&sub, 1, (uint64_t)d->frames[i].func + 1);
        field_int(&sub, 2, (uint64_t)(d->frames[i].line > 0
                                          ? d->frames[i].line
                                          : 0));
        field_msg(&m, 4, &sub);
        field_msg(b, 4, &m);
    }
    for (size_t i = 0; i < d->nfuncs && rc == 0; i++) {
        const pyu_profile_func *fn = &d->funcs[i];
        int64_t name = str_index(&st, fn->name);
        field_int(&m, 1, i + 1);
        field_int(&m, 2, (uint64_t)name);
        /* no system_name: pprof "demangles" a function whose name equals
         * its system name, and makes "<module>" an empty name */
        field_int(&m, 4, (uint64_t)str_index(&st, fn->file));
        field_int(&m, 5, (uint64_t)(fn->first_line > 0 ? fn->first_line
                                                        : 0));
        field_msg(b, 5, &m);
    }
    char comment[160];
    pyu_profile_name(comment, sizeof comment, d);
    int64_t s_comment = str_index(&st, comment);
    for (size_t i = 0; i < st.n; i++)
        field_bytes(b, 6, st.s[i], strlen(st.s[i]));
    field_int(b, 9, pi->start_ns);
    field_int(b, 10, pi->duration_ns);
    value_type(b, &m, 11, s_time, s_ns);
    field_int(b, 12, period);
    field_int(b, 13, (uint64_t)s_comment);
    if (rc == 0 && (st.failed || m.failed || sub.failed || b->failed))
        rc = -PYU_E_NOMEM;
    strings_free(&st);
    free(m.p);
    free(sub.p);
    free(ids);
    return rc;
}

/* Writes data gzip-compressed to out. */
static int gzip_to(FILE *out, const uint8_t *data, size_t len)
{
    z_stream z;
    memset(&z, 0, sizeof z);
    if (deflateInit2(&z, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 15 + 16, 8,
                     Z_DEFAULT_STRATEGY) != Z_OK)
        return -PYU_E_NOMEM;
    uint8_t chunk[16384];
    int rc = 0, zr;
    z.next_in = (Bytef *)data;
    do {
        /* (avail_in is 32-bit: large inputs are fed in pieces) */
        size_t left = len - (size_t)(z.next_in - (const Bytef *)data);
        z.avail_in = left > (1u << 30) ? (1u << 30) : (uInt)left;
        int flush = left > (1u << 30) ? Z_NO_FLUSH : Z_FINISH;
        do {
            z.next_out = chunk;
            z.avail_out = sizeof chunk;
            zr = deflate(&z, flush);
            size_t have = sizeof chunk - z.avail_out;
            if (zr == Z_STREAM_ERROR ||
                (have && fwrite(chunk, 1, have, out) != have)) {
                rc = -PYU_E_IO;
                break;
            }
        } while (z.avail_out == 0);
    } while (rc == 0 && zr != Z_STREAM_END);
    deflateEnd(&z);
    return rc;
}

int pyu_pprof_write(pyu_profile *p, FILE *out, bool process_labels)
{
    buf b = {0};
    int rc = encode(pyu_profile_get(p), process_labels, &b);
    if (rc == 0)
        rc = gzip_to(out, b.p, b.n);
    free(b.p);
    return rc;
}

int pyu_profile_write_pprof(pyu_profile *p, FILE *out)
{
    return pyu_pprof_write(p, out, false);
}
