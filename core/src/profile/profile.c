/* Profiles: interned functions, frames, stacks and per-thread counts.
 *
 * Everything is stored in growing arrays and found again through
 * open-addressing indexes over them (an index holds element numbers; the
 * element itself is the key), so that counting a stack that was seen
 * before allocates nothing.  Strings are interned by content and owned by
 * the profile: it outlives the session whose target it describes.
 */
#include "../internal.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct pstr {
    char *text; /* owned */
    size_t len;
} pstr;

struct pyu_profile {
    pyu_profile_info info;
    pyu_profile_data data; /* what pyu_profile_get hands out */
    pstr *strs;
    size_t nstrs, capstrs;
    pyu_profile_func *funcs;
    size_t nfuncs, capfuncs;
    pyu_profile_frame *frames;
    size_t nframes, capframes;
    pyu_profile_node *nodes;
    size_t nnodes, capnodes;
    pyu_profile_thread *threads;
    size_t nthreads, capthreads;
    pyu_profile_process *procs;
    size_t nprocs, capprocs;
    uint64_t ends; /* calls of pyu_profile_end_process (for a capture) */
    long sampling; /* the process a sampler reads (pyu_profile_sampling;
                      -1: none said) */
    pyu_profile_stack *stacks;
    size_t nstacks, capstacks;
    pyu_ix istrs, ifuncs, iframes, inodes, ithreads, istacks;
    uint64_t total;
    /* each count since pyu_profile_journal_start (a capture, a server) */
    bool journaling;
    pyu_profile_counted *journal;
    size_t njournal, capjournal;
    /* the timeline (pyu_profile_mark) */
    pyu_profile_tick *ticks;
    size_t nticks, capticks;
    pyu_profile_event *events;
    size_t nevents, capevents;
    bool cut;
    bool instrs; /* a frame names its instruction */
    uint64_t origin; /* CLOCK_MONOTONIC at pyu_profile_clock_start; 0:
                        not started */
};

/* The elements of each array are limited to what 32-bit ids can name. */
#define MAX_ELEMS (UINT32_MAX - 1)

static bool room(void **a, size_t n, size_t *cap, size_t el)
{
    return n < MAX_ELEMS && pyu_grow(a, n, cap, el);
}

pyu_profile *pyu_profile_new(void)
{
    pyu_profile *p = calloc(1, sizeof *p);
    if (!p)
        return NULL;
    if (!pyu_ix_grow(&p->istrs) || !pyu_ix_grow(&p->ifuncs) ||
        !pyu_ix_grow(&p->iframes) || !pyu_ix_grow(&p->inodes) ||
        !pyu_ix_grow(&p->ithreads) || !pyu_ix_grow(&p->istacks) ||
        !room((void **)&p->nodes, 0, &p->capnodes, sizeof *p->nodes)) {
        pyu_profile_free(p);
        return NULL;
    }
    p->nodes[0] = (pyu_profile_node){0, 0, 0}; /* the root */
    p->nnodes = 1;
    p->sampling = -1;
    return p;
}

void pyu_profile_free(pyu_profile *p)
{
    if (!p)
        return;
    for (size_t i = 0; i < p->nstrs; i++)
        free(p->strs[i].text);
    free(p->strs);
    free(p->funcs);
    free(p->frames);
    free(p->nodes);
    free(p->threads);
    free(p->procs);
    free(p->stacks);
    free(p->journal);
    free(p->ticks);
    free(p->events);
    pyu_ix *all[] = {&p->istrs,  &p->ifuncs,   &p->iframes,
                     &p->inodes, &p->ithreads, &p->istacks};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++)
        free(all[i]->slots);
    free(p);
}

const pyu_profile_data *pyu_profile_get(pyu_profile *p)
{
    p->data = (pyu_profile_data){
        &p->info,  p->funcs,    p->nfuncs,   p->frames,  p->nframes,
        p->nodes,  p->nnodes,   p->threads,  p->nthreads, p->stacks,
        p->nstacks, p->total, p->procs, p->nprocs};
    return &p->data;
}

pyu_profile_info *pyu_profile_info_of(pyu_profile *p)
{
    return &p->info;
}

/* The profile's copy of a string. */
static const char *intern_str(pyu_profile *p, const char *s)
{
    if (!s)
        s = "";
    size_t len = strlen(s), at;
    uint32_t h = pyu_mix(pyu_hash_bytes(s, len));
    long e = PYU_IX_FIND(&p->istrs, h, &at,
                         p->strs[e].len == len &&
                             memcmp(p->strs[e].text, s, len) == 0);
    if (e >= 0)
        return p->strs[e].text;
    if (!room((void **)&p->strs, p->nstrs, &p->capstrs, sizeof *p->strs))
        return NULL;
    char *copy = malloc(len + 1);
    if (!copy)
        return NULL;
    memcpy(copy, s, len + 1);
    if (!pyu_ix_room(&p->istrs)) {
        free(copy);
        return NULL;
    }
    PYU_IX_FIND(&p->istrs, h, &at, false);
    p->strs[p->nstrs] = (pstr){copy, len};
    pyu_ix_put(&p->istrs, at, h, p->nstrs);
    p->nstrs++;
    return copy;
}

/* pr into *to, its strings interned in p. */
static bool copy_process(pyu_profile *p, pyu_profile_process *to,
                         const pyu_profile_process *pr)
{
    *to = *pr;
    to->command = intern_str(p, pr->command);
    to->python = intern_str(p, pr->python);
    return to->command && to->python;
}

long pyu_profile_add_func(pyu_profile *p, const char *name, const char *file,
                          int first_line, int kind)
{
    const char *n = intern_str(p, name), *f = n ? intern_str(p, file) : NULL;
    if (!f)
        return -PYU_E_NOMEM;
    uint32_t h =
        pyu_mix((uint64_t)(uintptr_t)n * 31 ^ (uint64_t)(uintptr_t)f ^
                ((uint64_t)(uint32_t)first_line << 32) ^ (uint64_t)kind << 60);
    size_t at;
    long e = PYU_IX_FIND(&p->ifuncs, h, &at,
                         p->funcs[e].name == n && p->funcs[e].file == f &&
                             p->funcs[e].first_line == first_line &&
                             p->funcs[e].kind == kind);
    if (e >= 0)
        return e;
    if (!room((void **)&p->funcs, p->nfuncs, &p->capfuncs, sizeof *p->funcs) ||
        !pyu_ix_room(&p->ifuncs))
        return -PYU_E_NOMEM;
    PYU_IX_FIND(&p->ifuncs, h, &at, false);
    p->funcs[p->nfuncs] = (pyu_profile_func){n, f, first_line, kind};
    pyu_ix_put(&p->ifuncs, at, h, p->nfuncs);
    return (long)p->nfuncs++;
}

long pyu_profile_add_instr_frame(pyu_profile *p, uint32_t func, int line,
                                 int instr, const char *op, const char *base)
{
    if (func >= p->nfuncs)
        return -PYU_E_INVAL;
    if (instr < 0)
        instr = -1;
    const char *o = intern_str(p, instr < 0 ? "" : op);
    const char *b = o ? intern_str(p, instr < 0 ? "" : base) : NULL;
    if (!b)
        return -PYU_E_NOMEM;
    uint32_t h =
        pyu_mix(((uint64_t)func << 32 | (uint32_t)line) ^
                (uint64_t)(uint32_t)instr << 17 ^ (uint64_t)(uintptr_t)o * 31);
    size_t at;
    long e =
        PYU_IX_FIND(&p->iframes, h, &at,
                    p->frames[e].func == func && p->frames[e].line == line &&
                        p->frames[e].instr == instr && p->frames[e].op == o &&
                        p->frames[e].base == b);
    if (e >= 0)
        return e;
    if (!room((void **)&p->frames, p->nframes, &p->capframes,
              sizeof *p->frames) ||
        !pyu_ix_room(&p->iframes))
        return -PYU_E_NOMEM;
    PYU_IX_FIND(&p->iframes, h, &at, false);
    p->frames[p->nframes] = (pyu_profile_frame){func, line, instr, o, b};
    p->instrs |= instr >= 0;
    pyu_ix_put(&p->iframes, at, h, p->nframes);
    return (long)p->nframes++;
}

long pyu_profile_add_frame(pyu_profile *p, uint32_t func, int line)
{
    return pyu_profile_add_instr_frame(p, func, line, -1, "", "");
}

int pyu_profile_has_instrs(pyu_profile *p)
{
    return p->instrs;
}

bool pyu_profile_keeps(const pyu_profile_filter *f, int profile_mode,
                       const pyu_profile_thread *t, unsigned status)
{
    if (!f)
        return true;
    if (f->thread && f->thread != t->native_thread_id &&
        f->thread != t->thread_id)
        return false;
    if (f->mode < 0 || f->mode == profile_mode || f->mode == PYU_MODE_WALL)
        return true;
    if (f->mode == PYU_MODE_GIL)
        return status & PYU_STATUS_HAS_GIL;
    /* exception: and running, as the sampler selects it */
    return (status & PYU_STATUS_EXCEPTION) &&
           (status & (PYU_STATUS_HAS_GIL | PYU_STATUS_ON_CPU));
}

bool pyu_profile_can_narrow(int profile_mode, int mode)
{
    return mode < 0 || mode == profile_mode ||
           (profile_mode == PYU_MODE_WALL &&
            (mode == PYU_MODE_GIL || mode == PYU_MODE_EXCEPTION));
}

/* q's copy of p's functions, frames (by line: without instructions, those
 * of one function at one line merged), stack tree and the threads f
 * keeps (tmap: p's thread -> q's, or -1). */
static bool select_tables(pyu_profile *q, const pyu_profile *p,
                          const pyu_profile_filter *f, uint32_t *fmap,
                          uint32_t *nmap, long *tmap)
{
    bool ok = true;
    for (size_t i = 0; ok && i < p->nfuncs; i++) {
        const pyu_profile_func *fn = &p->funcs[i];
        ok = pyu_profile_add_func(q, fn->name, fn->file, fn->first_line,
                                  fn->kind) == (long)i;
    }
    for (size_t i = 0; ok && i < p->nframes; i++) {
        const pyu_profile_frame *fr = &p->frames[i];
        long e = f->by_line
                     ? pyu_profile_add_frame(q, fr->func, fr->line)
                     : pyu_profile_add_instr_frame(q, fr->func, fr->line,
                                                   fr->instr, fr->op,
                                                   fr->base);
        fmap[i] = (uint32_t)e;
        ok = e >= 0;
    }
    nmap[0] = 0;
    for (size_t i = 1; ok && i < p->nnodes; i++) {
        /* (a parent comes before its children) */
        long e = pyu_profile_push(q, nmap[p->nodes[i].parent],
                                  fmap[p->nodes[i].frame]);
        nmap[i] = (uint32_t)e;
        ok = e >= 0;
    }
    /* (the processes f keeps, in order; pmap: p's -> q's) */
    long *pmap = calloc(p->nprocs + 1, sizeof *pmap);
    ok = ok && pmap;
    for (size_t i = 0; ok && i < p->nprocs; i++) {
        const pyu_profile_process *pr = &p->procs[i];
        pmap[i] = -1;
        if (f->pid && pr->pid != f->pid)
            continue;
        pmap[i] = (long)q->nprocs;
        ok = room((void **)&q->procs, q->nprocs, &q->capprocs,
                  sizeof *q->procs) &&
             copy_process(q, &q->procs[q->nprocs], pr);
        q->nprocs += ok;
    }
    for (size_t i = 0; ok && i < p->nthreads; i++) {
        const pyu_profile_thread *t = &p->threads[i];
        tmap[i] = -1;
        if ((f->thread && f->thread != t->native_thread_id &&
             f->thread != t->thread_id) ||
            (t->process < p->nprocs && pmap[t->process] < 0))
            continue;
        tmap[i] = pyu_profile_add_process_thread(
            q, t->process < p->nprocs ? (uint32_t)pmap[t->process] : 0,
            t->thread_id, t->native_thread_id, t->interpreter_id, t->main);
        ok = tmap[i] >= 0 &&
             pyu_profile_name_thread(q, (uint32_t)tmap[i], t->name) == 0;
    }
    free(pmap);
    return ok;
}

/* Whether f keeps event e of p (its thread kept, its status selected). */
static bool keeps_event(const pyu_profile *p, const pyu_profile_filter *f,
                        const long *tmap, const pyu_profile_event *e)
{
    return tmap[e->thread] >= 0 &&
           pyu_profile_keeps(f, p->info.mode, &p->threads[e->thread],
                             e->status);
}

/* The counts f keeps, then p's timeline with the events f keeps. */
static bool select_all(pyu_profile *q, const pyu_profile *p,
                       const pyu_profile_filter *f, const uint32_t *nmap,
                       const long *tmap)
{
    bool ok = true;
    q->cut = true; /* (counts without the timeline) */
    for (size_t i = 0; ok && i < p->nstacks; i++) {
        const pyu_profile_stack *st = &p->stacks[i];
        if (tmap[st->thread] >= 0 &&
            pyu_profile_keeps(f, p->info.mode, &p->threads[st->thread],
                              st->status))
            ok = pyu_profile_count(q, (uint32_t)tmap[st->thread],
                                   nmap[st->node], st->count,
                                   st->status) == 0;
    }
    q->cut = p->cut;
    if (!ok || !p->nticks)
        return ok;
    q->ticks = malloc(p->nticks * sizeof *q->ticks);
    q->events = malloc((p->nevents + 1) * sizeof *q->events);
    if (!q->ticks || !q->events)
        return false;
    size_t n = 0, k = 0;
    for (size_t i = 0; i < p->nevents; i++) {
        while (k < p->nticks && p->ticks[k].end <= i) /* (ticks it ends) */
            q->ticks[k++].end = (uint32_t)n;
        if (!keeps_event(p, f, tmap, &p->events[i]))
            continue;
        q->events[n] = p->events[i];
        q->events[n].thread = (uint32_t)tmap[p->events[i].thread];
        q->events[n++].node = nmap[p->events[i].node];
    }
    for (size_t j = 0; j < p->nticks; j++) {
        q->ticks[j].t_ns = p->ticks[j].t_ns;
        q->ticks[j].failed = p->ticks[j].failed;
        if (j >= k)
            q->ticks[j].end = (uint32_t)n;
    }
    q->nticks = q->capticks = p->nticks;
    q->nevents = n;
    q->capevents = p->nevents + 1;
    return true;
}

/* The samples of p's timeline in f's window, as samples of q's from the
 * window's start. */
static bool select_window(pyu_profile *q, const pyu_profile *p,
                          const pyu_profile_filter *f, const uint32_t *nmap,
                          const long *tmap)
{
    uint64_t from = f->from_ns, to = f->to_ns ? f->to_ns : UINT64_MAX;
    uint64_t samples = 0, failed = 0;
    for (size_t k = 0; k < p->nticks; k++) {
        const pyu_profile_tick *t = &p->ticks[k];
        if (t->t_ns < from || t->t_ns >= to)
            continue;
        for (size_t i = k ? p->ticks[k - 1].end : 0; i < t->end; i++) {
            const pyu_profile_event *e = &p->events[i];
            if (keeps_event(p, f, tmap, e) &&
                pyu_profile_count(q, (uint32_t)tmap[e->thread],
                                  nmap[e->node], e->n, e->status) < 0)
                return false;
        }
        if (pyu_profile_mark(q, t->t_ns - from, t->failed) < 0)
            return false;
        samples++;
        failed += t->failed != 0;
    }
    uint64_t end = p->info.duration_ns;
    q->info.duration_ns = (to < end ? to : end) - (from < end ? from : end);
    q->info.samples = samples;
    q->info.failed = failed;
    q->info.missed = 0; /* (not known by sample) */
    return true;
}

int pyu_profile_select(pyu_profile *p, const pyu_profile_filter *f,
                       pyu_profile **out)
{
    static const pyu_profile_filter all = {.mode = -1};
    *out = NULL;
    if (!f)
        f = &all;
    bool window = f->from_ns || f->to_ns;
    /* (a window needs every sample's time; a mode, a wall profile's
     * statuses or the profile's own) */
    if ((window && (!p->nticks || p->cut ||
                    (f->to_ns && f->to_ns <= f->from_ns))) ||
        !pyu_profile_can_narrow(p->info.mode, f->mode))
        return -PYU_E_INVAL;
    pyu_profile *q = pyu_profile_new();
    uint32_t *fmap = malloc((p->nframes + 1) * sizeof *fmap);
    uint32_t *nmap = malloc(p->nnodes * sizeof *nmap);
    long *tmap = malloc((p->nthreads + 1) * sizeof *tmap);
    bool ok = q && fmap && nmap && tmap;
    if (ok) {
        q->info = p->info;
        if (f->mode >= 0)
            q->info.mode = f->mode;
        /* (one process: the info names it) */
        for (size_t i = 0; f->pid && i < p->nprocs; i++)
            if (p->procs[i].pid == f->pid) {
                pyu_process *pr = &q->info.process;
                pr->pid = f->pid;
                snprintf(pr->python, sizeof pr->python, "%s",
                         p->procs[i].python);
                pr->free_threaded = p->procs[i].free_threaded;
                break;
            }
        q->origin = p->origin;
    }
    ok = ok && select_tables(q, p, f, fmap, nmap, tmap) &&
         (window ? select_window(q, p, f, nmap, tmap)
                 : select_all(q, p, f, nmap, tmap));
    free(fmap);
    free(nmap);
    free(tmap);
    if (!ok) {
        pyu_profile_free(q);
        return -PYU_E_NOMEM;
    }
    *out = q;
    return 0;
}

pyu_profile *pyu_profile_by_line(pyu_profile *p)
{
    static const pyu_profile_filter by_line = {.mode = -1, .by_line = 1};
    pyu_profile *q;
    return pyu_profile_select(p, &by_line, &q) == 0 ? q : NULL;
}

long pyu_profile_push(pyu_profile *p, uint32_t parent, uint32_t frame)
{
    if (parent >= p->nnodes || frame >= p->nframes)
        return -PYU_E_INVAL;
    uint32_t h = pyu_mix(((uint64_t)parent << 32) | frame);
    size_t at;
    long e = PYU_IX_FIND(&p->inodes, h, &at,
                         p->nodes[e].parent == parent &&
                             p->nodes[e].frame == frame && e != 0);
    if (e >= 0)
        return e;
    if (!room((void **)&p->nodes, p->nnodes, &p->capnodes, sizeof *p->nodes) ||
        !pyu_ix_room(&p->inodes))
        return -PYU_E_NOMEM;
    PYU_IX_FIND(&p->inodes, h, &at, false);
    p->nodes[p->nnodes] =
        (pyu_profile_node){parent, frame, p->nodes[parent].depth + 1};
    pyu_ix_put(&p->inodes, at, h, p->nnodes);
    return (long)p->nnodes++;
}

/* ---------------------------------------------------------- processes */

long pyu_profile_add_process(pyu_profile *p, int pid, const char *command,
                             const char *python, int free_threaded,
                             uint64_t start_ns)
{
    for (size_t i = p->nprocs; i-- > 0;) {
        pyu_profile_process *pr = &p->procs[i];
        if (pr->pid != pid || pr->exited)
            continue;
        if (command && *command && !*pr->command &&
            !(pr->command = intern_str(p, command)))
            return -PYU_E_NOMEM;
        if (python && *python && !*pr->python) {
            if (!(pr->python = intern_str(p, python)))
                return -PYU_E_NOMEM;
            pr->free_threaded = free_threaded != 0;
        }
        return (long)i;
    }
    if (!room((void **)&p->procs, p->nprocs, &p->capprocs, sizeof *p->procs))
        return -PYU_E_NOMEM;
    pyu_profile_process pr = {.pid = pid,
                              .command = command,
                              .python = python,
                              .free_threaded = free_threaded != 0,
                              .start_ns = start_ns};
    if (!copy_process(p, &p->procs[p->nprocs], &pr))
        return -PYU_E_NOMEM;
    return (long)p->nprocs++;
}

int pyu_profile_end_process(pyu_profile *p, uint32_t process, uint64_t t_ns)
{
    if (process >= p->nprocs)
        return -PYU_E_INVAL;
    p->procs[process].exited = 1;
    p->procs[process].end_ns = t_ns;
    p->ends++;
    return 0;
}

uint64_t pyu_profile_ends(const pyu_profile *p)
{
    return p->ends;
}

void pyu_profile_sampling(pyu_profile *p, uint32_t process)
{
    p->sampling = process;
}

long pyu_profile_sampled(const pyu_profile *p)
{
    return p->sampling;
}

long pyu_profile_add_thread(pyu_profile *p, uint64_t thread_id,
                            uint64_t native_thread_id, int64_t interpreter_id,
                            int main)
{
    if (!p->nprocs) {
        const pyu_process *t = &p->info.process;
        long e = pyu_profile_add_process(p, t->pid, "", t->python,
                                         t->free_threaded, 0);
        if (e < 0)
            return e;
    }
    return pyu_profile_add_process_thread(p, 0, thread_id, native_thread_id,
                                          interpreter_id, main);
}

long pyu_profile_add_process_thread(pyu_profile *p, uint32_t process,
                                    uint64_t thread_id,
                                    uint64_t native_thread_id,
                                    int64_t interpreter_id, int main)
{
    if (process >= p->nprocs)
        return -PYU_E_INVAL;
    uint32_t h = pyu_mix(thread_id * 31 ^ native_thread_id ^
                         (uint64_t)interpreter_id << 48 ^
                         (uint64_t)process << 40);
    size_t at;
    long e =
        PYU_IX_FIND(&p->ithreads, h, &at,
                    p->threads[e].thread_id == thread_id &&
                        p->threads[e].native_thread_id == native_thread_id &&
                        p->threads[e].interpreter_id == interpreter_id &&
                        p->threads[e].process == process);
    if (e >= 0) {
        p->threads[e].main |= main != 0;
        return e;
    }
    if (!room((void **)&p->threads, p->nthreads, &p->capthreads,
              sizeof *p->threads) ||
        !pyu_ix_room(&p->ithreads))
        return -PYU_E_NOMEM;
    PYU_IX_FIND(&p->ithreads, h, &at, false);
    p->threads[p->nthreads] = (pyu_profile_thread){
        .thread_id = thread_id,
        .native_thread_id = native_thread_id,
        .interpreter_id = interpreter_id,
        .main = main != 0,
        .name = "",
        .process = process,
    };
    pyu_ix_put(&p->ithreads, at, h, p->nthreads);
    return (long)p->nthreads++;
}

/* The timeline stops at the last whole sample. */
static void timeline_cut(pyu_profile *p)
{
    p->cut = true;
    p->nevents = p->nticks ? p->ticks[p->nticks - 1].end : 0;
}

int pyu_profile_name_thread(pyu_profile *p, uint32_t thread,
                            const char *name)
{
    if (thread >= p->nthreads)
        return -PYU_E_INVAL;
    const char *s = intern_str(p, name);
    if (!s)
        return -PYU_E_NOMEM;
    p->threads[thread].name = s;
    return 0;
}

int pyu_profile_count(pyu_profile *p, uint32_t thread, uint32_t node,
                      uint64_t n, unsigned status)
{
    if (thread >= p->nthreads || node >= p->nnodes)
        return -PYU_E_INVAL;
    if (p->journaling) {
        if (!room((void **)&p->journal, p->njournal, &p->capjournal,
                  sizeof *p->journal))
            return -PYU_E_NOMEM;
        p->journal[p->njournal++] =
            (pyu_profile_counted){thread, node, status, n};
    }
    if (!p->cut && n) {
        /* (a count too large for an event ends the timeline too) */
        if (p->nevents >= PYU_TIMELINE_MAX_EVENTS || n > UINT32_MAX) {
            timeline_cut(p);
        } else {
            if (!room((void **)&p->events, p->nevents, &p->capevents,
                      sizeof *p->events))
                return -PYU_E_NOMEM;
            p->events[p->nevents++] =
                (pyu_profile_event){thread, node, (uint32_t)n, status};
        }
    }
    uint32_t h =
        pyu_mix(((uint64_t)thread << 32 | node) ^ (uint64_t)status << 56);
    size_t at;
    long e = PYU_IX_FIND(&p->istacks, h, &at,
                         p->stacks[e].thread == thread &&
                             p->stacks[e].node == node &&
                             p->stacks[e].status == status);
    if (e < 0) {
        if (!room((void **)&p->stacks, p->nstacks, &p->capstacks,
                  sizeof *p->stacks) ||
            !pyu_ix_room(&p->istacks))
            return -PYU_E_NOMEM;
        PYU_IX_FIND(&p->istacks, h, &at, false);
        p->stacks[p->nstacks] = (pyu_profile_stack){thread, node, 0, status};
        pyu_ix_put(&p->istacks, at, h, p->nstacks);
        e = (long)p->nstacks++;
    }
    p->stacks[e].count += n;
    p->total += n;
    pyu_profile_thread *t = &p->threads[thread];
    t->samples += n;
    for (unsigned b = 0; status && b < 8; b++, status >>= 1)
        if (status & 1)
            t->status[b] += n;
    return 0;
}

void pyu_profile_journal_start(pyu_profile *p)
{
    p->journaling = true;
    p->njournal = 0;
}

void pyu_profile_timeline_end(pyu_profile *p)
{
    if (!p->cut)
        timeline_cut(p);
}

const pyu_profile_counted *pyu_profile_journal_take(pyu_profile *p,
                                                    size_t *n)
{
    *n = p->njournal;
    p->njournal = 0;
    return p->journal;
}

int pyu_profile_mark(pyu_profile *p, uint64_t t_ns, int failed)
{
    if (p->cut)
        return 0;
    if (p->nticks >= PYU_TIMELINE_MAX_TICKS) {
        timeline_cut(p);
        return 0;
    }
    if (!room((void **)&p->ticks, p->nticks, &p->capticks, sizeof *p->ticks))
        return -PYU_E_NOMEM;
    p->ticks[p->nticks++] =
        (pyu_profile_tick){t_ns, (uint32_t)p->nevents, failed != 0};
    return 0;
}

void pyu_profile_timeline_get(pyu_profile *p, pyu_profile_timeline *out)
{
    *out = (pyu_profile_timeline){p->ticks, p->nticks, p->events,
                                  p->nevents, p->cut};
}

static uint64_t clock_ns(clockid_t id)
{
    struct timespec t;
    clock_gettime(id, &t);
    return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

void pyu_profile_clock_start(pyu_profile *p)
{
    if (!p->info.start_ns)
        p->info.start_ns = clock_ns(CLOCK_REALTIME);
    if (!p->origin)
        p->origin = clock_ns(CLOCK_MONOTONIC);
}

uint64_t pyu_profile_clock(const pyu_profile *p)
{
    uint64_t now = clock_ns(CLOCK_MONOTONIC);
    return p->origin && now > p->origin ? now - p->origin : 0;
}

const char *pyu_profile_mode_name(int mode)
{
    static const char *const names[] = {"wall", "cpu", "gil", "exception"};
    return mode >= 0 && mode <= PYU_MODE_EXCEPTION ? names[mode] : "?";
}
