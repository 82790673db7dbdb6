/* Captures read back into a profile (`pyunwind report`): the format is
 * described where it is written (writers/out_capture.c).  A capture cut
 * short keeps every whole sample; a record that is not one, or a number
 * past its bounds, ends the read with a message that says where. */
#include "../internal.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#define STR_MAX (1u << 20)
#define ENTRIES_MAX (1u << 24)

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

#define LEFT_OUT UINT32_MAX /* in a map: what the filter does not keep */

static bool map_add(map *m, long v)
{
    if (v < 0 || !pyu_grow((void **)&m->v, m->n, &m->cap, sizeof *m->v))
        return false;
    m->v[m->n++] = (uint32_t)v;
    return true;
}

/* A process of the capture (its number: procs->n) into p when f keeps
 * it, its times moved to the window [from, to).  One first sampled after
 * the window is not in it (nor is it then taken for an earlier process
 * of its pid whose end came after the window). */
static bool add_process(pyu_profile *p, map *procs, const pyu_capture_filter *f,
                        int pid, const char *command, const char *python,
                        int free_threaded, uint64_t start_ns, uint64_t from,
                        uint64_t to)
{
    if ((f && f->pid && pid != f->pid) || start_ns >= to)
        return map_add(procs, LEFT_OUT);
    return map_add(procs, pyu_profile_add_process(
                              p, pid, command, python, free_threaded,
                              start_ns > from ? start_ns - from : 0));
}

#define PIDS_NAMED 8 /* the pids a --pid that names none lists */

/* Notes pid among the first PIDS_NAMED distinct pids of the capture. */
static void note_pid(int *pids, size_t *n, bool *more, int pid)
{
    for (size_t i = 0; i < *n; i++)
        if (pids[i] == pid)
            return;
    if (*n < PIDS_NAMED)
        pids[(*n)++] = pid;
    else
        *more = true;
}

/* The one-line message of a pid filter that names no process of the
 * capture: the capture's pids (the first few). */
static void no_such_process(int pid, const int *pids, size_t n, bool more,
                            char *msg, size_t msglen)
{
    int at = snprintf(msg, msglen, "the capture has no process %d (its "
                      "process%s: ", pid, n == 1 && !more ? "" : "es");
    for (size_t i = 0; i < n && at >= 0 && (size_t)at < msglen; i++)
        at += snprintf(msg + at, msglen - (size_t)at, "%s%d", i ? ", " : "",
                       pids[i]);
    if (at >= 0 && (size_t)at < msglen)
        snprintf(msg + at, msglen - (size_t)at, "%s)", more ? ", ..." : "");
}

int pyu_capture_read(FILE *in, const pyu_capture_filter *f, pyu_profile *p,
                     char *msg, size_t msglen)
{
    reader r = {in, 0, false, msg, msglen};
    char magic[sizeof PYU_CAPTURE_MAGIC - 1];
    msg[0] = 0;
    if (fread(magic, 1, sizeof magic, in) != sizeof magic ||
        memcmp(magic, PYU_CAPTURE_MAGIC, sizeof magic) != 0) {
        snprintf(msg, msglen, "not a capture (pyunwind sample --format raw "
                 "writes them)");
        return -PYU_E_CORRUPT;
    }
    r.at = sizeof magic;
    uint64_t version;
    if (!get_u(&r, &version) || version < 1 || version > PYU_CAPTURE_VERSION)
        return bad(&r, "version %" PRIu64 " (this pyunwind reads versions "
                   "1 to %d)", version, PYU_CAPTURE_VERSION);
    pyu_profile_info *pi = pyu_profile_info_of(p);
    char *s1 = NULL, *s2 = NULL;
    const char *op, *base;
    size_t c1 = 0, c2 = 0;
    map procs = {0}, threads = {0}, funcs = {0}, frames = {0}, nodes = {0};
    map_add(&nodes, 0); /* the root */
    int pids[PIDS_NAMED];
    size_t npids = 0;
    bool more_pids = false;
    int pid = f ? f->pid : 0; /* (0: every process) */
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
        if (version < 4 && (tag == 'R' || tag == 'X')) {
            /* (processes came with version 4) */
            r.at = rec_at;
            rc = bad(&r, "unknown record '%c' (0x%02x) in a version %" PRIu64
                     " capture", tag, tag, version);
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
            if (!pyu_profile_can_narrow(capture_mode, mode)) {
                snprintf(msg, msglen, "the capture was sampled in %s mode: "
                         "a report can keep that mode, or narrow wall mode "
                         "to gil or exception",
                         pyu_profile_mode_name(capture_mode));
                rc = -PYU_E_INVAL;
                break;
            }
            pi->process.pid = (int)(v[0] & 0x7fffffff);
            snprintf(pi->process.python, sizeof pi->process.python, "%s", s1);
            pi->mode = mode >= 0 ? mode : capture_mode;
            pi->flags = (unsigned)v[2];
            pi->interval_ns = v[3];
            pi->start_ns = v[4] + (from != 0 ? from : 0);
            if (version >= 4)
                break;
            /* (before version 4, the one process) */
            note_pid(pids, &npids, &more_pids, pi->process.pid);
            if (!add_process(p, &procs, f, pi->process.pid, "", s1, 0, 0, 0,
                             UINT64_MAX))
                rc = -PYU_E_NOMEM;
            break;
        case 'R':
            ok = get_u(&r, &v[0]) && get_str(&r, &s1, &c1) &&
                 get_str(&r, &s2, &c2) && get_u(&r, &v[1]) &&
                 get_u(&r, &v[2]);
            if (!ok)
                break;
            note_pid(pids, &npids, &more_pids, (int)(v[0] & 0x7fffffff));
            if (procs.n == 0 && (int)(v[0] & 0x7fffffff) == pi->process.pid)
                pi->process.free_threaded = v[1] != 0;
            if (!add_process(p, &procs, f, (int)(v[0] & 0x7fffffff), s1, s2,
                             v[1] != 0, v[2], from, to))
                rc = -PYU_E_NOMEM;
            break;
        case 'X':
            ok = get_u(&r, &v[0]) && get_u(&r, &v[1]);
            if (!ok)
                break;
            if (v[0] >= procs.n) {
                rc = bad(&r, "the end of process %" PRIu64 " of %zu", v[0],
                         procs.n);
                break;
            }
            /* (an end after the window is not one within it) */
            if (procs.v[v[0]] != LEFT_OUT && v[1] < to)
                pyu_profile_end_process(p, procs.v[v[0]],
                                        v[1] > from ? v[1] - from : 0);
            break;
        case 'T':
            ok = get_u(&r, &v[0]) && get_u(&r, &v[1]) && get_u(&r, &v[2]) &&
                 get_u(&r, &v[3]);
            if (ok && version >= 2)
                ok = get_str(&r, &s1, &c1);
            if (ok && version >= 4)
                ok = get_u(&r, &v[4]); /* (before: process 0) */
            if (!ok)
                break;
            if (v[4] >= procs.n) {
                rc = bad(&r, "a thread of process %" PRIu64 " of %zu", v[4],
                         procs.n);
                break;
            }
            if (procs.v[v[4]] == LEFT_OUT) {
                if (!map_add(&threads, LEFT_OUT))
                    rc = -PYU_E_NOMEM;
                break;
            }
            if (!map_add(&threads, pyu_profile_add_process_thread(
                                       p, procs.v[v[4]], v[0], v[1],
                                       unzigzag(v[2]), v[3] != 0)))
                rc = -PYU_E_NOMEM;
            if (rc == 0 && version >= 2 && *s1 &&
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
            /* (v[3]: its process + 1, 0 not known; before version 4
             * process 0) */
            ok = get_u(&r, &v[0]) && get_u(&r, &v[1]) && get_u(&r, &v[2]);
            v[3] = 1;
            if (ok && version >= 4)
                ok = get_u(&r, &v[3]);
            ok = ok && get_u(&r, &v[4]);
            if (!ok)
                break;
            if (v[4] > ENTRIES_MAX) {
                rc = bad(&r, "%" PRIu64 " stacks in one sample", v[4]);
                break;
            }
            if (v[3] > procs.n) {
                rc = bad(&r, "a sample of process %" PRIu64 " of %zu",
                         v[3] - 1, procs.n);
                break;
            }
            bool in_window = v[0] >= from && v[0] < to;
            /* (one process kept: a sample of another is not the
             * report's; one of a process not known is when it counted a
             * thread kept) */
            bool mine = !pid || (v[3] && procs.v[v[3] - 1] != LEFT_OUT);
            last_t = v[0];
            for (uint64_t i = 0; ok && rc == 0 && i < v[4]; i++) {
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
                if (threads.v[e[0]] == LEFT_OUT)
                    continue;
                mine = true;
                const pyu_profile_thread *th =
                    &pyu_profile_get(p)->threads[threads.v[e[0]]];
                if (!in_window ||
                    !pyu_profile_keeps(f, capture_mode, th, (unsigned)e[2]))
                    continue;
                if (pyu_profile_count(p, threads.v[e[0]], nodes.v[e[1]],
                                      e[3], (unsigned)e[2]) < 0)
                    rc = -PYU_E_NOMEM;
            }
            /* (a tick missed, missed by every process) */
            if (ok && rc == 0 && in_window)
                missed += v[2];
            if (ok && rc == 0 && in_window && mine) {
                samples++;
                failed += v[1] != 0;
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
    if (rc == 0 && pid) {
        bool found = false;
        for (size_t i = 0; i < npids && !found; i++)
            found = pids[i] == pid;
        /* (past the pids noted: whether a process was kept) */
        if (!found && !(more_pids && pyu_profile_get(p)->nprocesses)) {
            no_such_process(pid, pids, npids, more_pids, msg, msglen);
            rc = -PYU_E_INVAL;
        } else if (pyu_profile_get(p)->nprocesses) {
            /* (the report's process: the one kept; none when it started
             * after the window) */
            const pyu_profile_process *pr = &pyu_profile_get(p)->processes[0];
            pi->process.pid = pr->pid;
            snprintf(pi->process.python, sizeof pi->process.python, "%s",
                     pr->python);
            pi->process.free_threaded = pr->free_threaded;
        } else {
            pi->process.pid = pid;
        }
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
    free(procs.v);
    free(threads.v);
    free(funcs.v);
    free(frames.v);
    free(nodes.v);
    return rc;
}
