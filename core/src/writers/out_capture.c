/* Captures: the raw format, written while sampling and read back by
 * `pyunwind report` (docs/formats.md#raw).
 *
 * A capture is the magic "PYUNWRAW", a version (varint, 4), then records,
 * each a tag byte and unsigned LEB128 varints (signed values zigzag
 * encoded; a string is its length and its UTF-8 bytes):
 *
 *   'P' pid, python, mode, flags, interval_ns, start_ns   first, once
 *   'R' pid, command, python, free_threaded, start_ns     a process, from
 *                                                         when it was
 *                                                         first sampled
 *                                                         (version 4)
 *   'X' process, end_ns                                   it exited (or
 *                                                         ran another
 *                                                         program; version
 *                                                         4)
 *   'T' thread_id, native_thread_id, zigzag(interpreter_id), main, name,
 *       process                                           (version 4; a
 *                                                         version 2 or 3
 *                                                         'T' has no
 *                                                         process, a
 *                                                         version 1 'T' no
 *                                                         name either)
 *   'F' name, file, zigzag(first_line), kind              a function
 *   'L' function, zigzag(line), zigzag(instr), op, base   a frame
 *                                                         (version 3; a
 *                                                         version 1 or 2
 *                                                         'L' has only
 *                                                         function, line)
 *   'N' parent node, frame                                a stack: node 1,
 *                                                         2, ... (0 is the
 *                                                         empty stack)
 *   'S' t_ns, failed, missed, process + 1, count,
 *       count x (thread, node, status, n)                 a sample: of one
 *                                                         process (0: not
 *                                                         known; version
 *                                                         4, before it no
 *                                                         process field)
 *   'E' duration_ns, samples, failed, missed              last
 *
 * Processes, threads, functions, frames and nodes are numbered from 0
 * (nodes from 1) in the order of their records, and each comes before the
 * first record that names it.  Processes are written as the run finds
 * them and their ends as they exit: an 'X' comes before the 'R' of a later
 * process with its pid.  Before version 4 the 'P' record's pid and python
 * are the one process.  t_ns is the sample's time since the start; start_ns
 * and end_ns of a process too; missed the ticks of the schedule missed
 * since the sample before.  A run that was killed leaves no 'E' record
 * (and maybe half a record): the reader keeps every whole sample.
 */
#include "../internal.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define FLUSH_EVERY_NS 10000000ull /* a killed run loses at most this */

struct pyu_capture {
    pyu_profile *p;
    FILE *out;
    size_t procs, threads, funcs, frames, nodes; /* written so far */
    bool *ended;      /* owned: [procs], whether its end was written */
    size_t capended;
    uint64_t ends;    /* pyu_profile_ends when the ends were last written */
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
    fputs(PYU_CAPTURE_MAGIC, out);
    put_u(out, PYU_CAPTURE_VERSION);
    putc('P', out);
    put_u(out, (uint64_t)(pi->process.pid > 0 ? pi->process.pid : 0));
    put_s(out, pi->process.python);
    put_u(out, (uint64_t)(pi->mode >= 0 ? pi->mode : 0));
    put_u(out, pi->flags);
    put_u(out, pi->interval_ns);
    put_u(out, pi->start_ns);
}

static void put_exit(pyu_capture *c, size_t i, const pyu_profile_process *pr)
{
    putc('X', c->out);
    put_u(c->out, i);
    put_u(c->out, pr->end_ns);
    c->ended[i] = true;
}

/* The ends of the processes written before, then the processes, threads,
 * functions, frames and nodes the profile gained since the last call.
 * Returns false when out of memory (c->err set). */
static bool put_new(pyu_capture *c, const pyu_profile_data *d)
{
    FILE *out = c->out;
    uint64_t ends = pyu_profile_ends(c->p);
    if (ends != c->ends) {
        /* (before any new process: one may have the pid of one ended) */
        c->ends = ends;
        for (size_t i = 0; i < c->procs; i++)
            if (d->processes[i].exited && !c->ended[i])
                put_exit(c, i, &d->processes[i]);
    }
    if (d->nprocesses > c->capended) {
        size_t ncap = d->nprocesses * 2;
        bool *e = realloc(c->ended, ncap * sizeof *e);
        if (!e) {
            c->err = -PYU_E_NOMEM;
            return false;
        }
        memset(e + c->capended, 0, (ncap - c->capended) * sizeof *e);
        c->ended = e;
        c->capended = ncap;
    }
    for (; c->procs < d->nprocesses; c->procs++) {
        const pyu_profile_process *pr = &d->processes[c->procs];
        putc('R', out);
        put_u(out, (uint64_t)(pr->pid > 0 ? pr->pid : 0));
        put_s(out, pr->command ? pr->command : "");
        put_s(out, pr->python ? pr->python : "");
        put_u(out, pr->free_threaded != 0);
        put_u(out, pr->start_ns);
        if (pr->exited)
            put_exit(c, c->procs, pr);
    }
    for (; c->threads < d->nthreads; c->threads++) {
        const pyu_profile_thread *t = &d->threads[c->threads];
        putc('T', out);
        put_u(out, t->thread_id);
        put_u(out, t->native_thread_id);
        put_u(out, zigzag(t->interpreter_id));
        put_u(out, t->main != 0);
        put_s(out, t->name ? t->name : "");
        put_u(out, t->process);
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
    return true;
}

/* A sample's process: *proc starts at -1, stays the one process of the
 * threads given, or becomes -2 when they are of several. */
static void one_process(const pyu_profile_data *d, uint32_t thread,
                        long *proc)
{
    long k = thread < d->nthreads ? (long)d->threads[thread].process : -2;
    if (*proc == -1)
        *proc = k;
    else if (*proc != k)
        *proc = -2;
}

/* The process field of a sample of process proc (< 0: not known). */
static uint64_t process_field(long proc)
{
    return proc >= 0 ? (uint64_t)proc + 1 : 0;
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
    put_new(c, pyu_profile_get(p)); /* (the processes found so far) */
    pyu_profile_journal_start(p);
    c->last_flush = mono_ns();
    if (c->err == 0 && fflush(out) != 0)
        c->err = -PYU_E_IO;
    *cp = c;
    return c->err;
}

int pyu_capture_sample(pyu_capture *c, uint64_t t_ns, int failed,
                       uint64_t missed)
{
    const pyu_profile_data *d = pyu_profile_get(c->p);
    FILE *out = c->out;
    if (!put_new(c, d))
        return c->err;
    size_t n;
    const pyu_profile_counted *e = pyu_profile_journal_take(c->p, &n);
    /* (the sampler's process; counted by hand: its counts' one process) */
    long proc = pyu_profile_sampled(c->p);
    for (size_t i = 0; proc < 0 && i < n; i++)
        one_process(d, e[i].thread, &proc);
    putc('S', out);
    put_u(out, t_ns);
    put_u(out, failed != 0);
    put_u(out, missed);
    put_u(out, process_field(proc));
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
    /* (the processes that ended, or were found, after the last sample) */
    if (put_new(c, pyu_profile_get(c->p)))
        put_end(c->out, pyu_profile_info_of(c->p));
    if (fflush(c->out) != 0 || ferror(c->out))
        c->err = c->err ? c->err : -PYU_E_IO;
    int rc = c->err;
    free(c->ended);
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
    bool ok = put_new(&c, d);
    free(c.ended);
    if (!ok)
        return c.err;
    if (timeline_whole(d, &tl)) {
        uint32_t at = 0;
        for (size_t k = 0; k < tl.nticks; k++) {
            const pyu_profile_tick *t = &tl.ticks[k];
            long proc = -1;
            for (uint32_t i = at; i < t->end; i++)
                one_process(d, tl.events[i].thread, &proc);
            putc('S', out);
            put_u(out, t->t_ns);
            put_u(out, t->failed != 0);
            /* (the missed ticks, all on the last sample) */
            put_u(out, k + 1 == tl.nticks ? d->info->missed : 0);
            put_u(out, process_field(proc));
            put_u(out, t->end - at);
            for (; at < t->end; at++) {
                put_u(out, tl.events[at].thread);
                put_u(out, tl.events[at].node);
                put_u(out, tl.events[at].status);
                put_u(out, tl.events[at].n);
            }
        }
    } else {
        long proc = -1;
        for (size_t i = 0; i < d->nstacks; i++)
            one_process(d, d->stacks[i].thread, &proc);
        putc('S', out);
        put_u(out, 0);
        put_u(out, 0);
        put_u(out, d->info->missed);
        put_u(out, process_field(proc));
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
