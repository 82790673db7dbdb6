/* Scrapes fed from one sampling loop per target (scrape.h).
 *
 * One mutex guards every loop and scrape.  A loop's thread holds it
 * while it decides when to sample and while it hands a sample's counts
 * on, never while it reads the target.  Each loop's sampler records into
 * a profile of its own (every thread, in wall mode, with each thread's
 * on-CPU status, so that every mode can be taken from one sample), which
 * journals its counts and keeps no timeline; a scrape's share of a target
 * (a part) copies the counts its mode keeps into the scrape's profile,
 * the loop's threads, functions, frames and stacks mapped to the
 * scrape's as they are first met. */
#include "scrape.h"
#include "command.h"
#include "follow.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define NS 1000000000ull
#define FOLLOW_UNDER_NS NS /* slower than one sample a second, a loop does
                              not follow its target's thread */

static uint64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * NS + (uint64_t)ts.tv_nsec;
}

static uint64_t real_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * NS + (uint64_t)ts.tv_nsec;
}

/* A map from the loop's indices to a scrape's: index + 1, 0 when the
 * item has not been met yet. */
typedef struct map {
    uint32_t *to;
    size_t n;
} map;

/* Room for index i in m.  False when out of memory. */
static bool map_room(map *m, size_t i)
{
    if (i < m->n)
        return true;
    size_t n = m->n ? m->n : 64;
    while (n <= i)
        n *= 2;
    uint32_t *to = realloc(m->to, n * sizeof *to);
    if (!to)
        return false;
    memset(to + m->n, 0, (n - m->n) * sizeof *to);
    m->to = to;
    m->n = n;
    return true;
}

struct loop;

/* One target's share of a scrape. */
typedef struct part {
    pyu_scrape *sc;
    struct loop *lp;
    uint64_t period, due, end; /* monotonic ns */
    long proc;                 /* the target's process in the scrape's
                                  profile (-1: none yet) */
    map threads, funcs, frames, nodes;
    bool ended;
} part;

struct pyu_scrape {
    pyu_profile *p;
    int mode;
    part *parts;
    size_t nparts, live; /* parts; those not ended */
    uint64_t start, start_real, period;
    uint64_t samples, failed;
    bool done, fed;
    char error[256];
    void (*done_fn)(void *arg);
    void *arg;
    struct pyu_scrape *next_done; /* on a list of scrapes to tell */
};

/* A target's sampling loop. */
typedef struct loop {
    pyu_scrapes *ss;
    int pid;
    pthread_t thread;
    bool joinable; /* a thread was started and not joined */
    bool running;  /* its thread has not decided to end */
    part **parts;
    size_t n, cap;
    uint32_t *chain; /* scratch: a stack's unmapped nodes */
    size_t nchain;
    uint64_t rng;  /* xorshift state */
    double jitter; /* [0, 1): where in its period each part is due next */
    struct loop *next;
} loop;

struct pyu_scrapes {
    pthread_mutex_t mu;
    pthread_cond_t cv; /* a loop's parts changed, or stop */
    loop *loops;
    bool stopping;
    FILE *log;
};

pyu_scrapes *pyu_scrapes_new(FILE *log)
{
    pyu_scrapes *ss = calloc(1, sizeof *ss);
    if (!ss)
        return NULL;
    ss->log = log;
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_mutex_init(&ss->mu, NULL);
    pthread_cond_init(&ss->cv, &ca);
    pthread_condattr_destroy(&ca);
    return ss;
}

/* ----------------------------------------------------------- counting */

/* Whether a scrape of `mode` keeps a count of a thread with `status`
 * (the modes as the sampler selects threads). */
static bool keeps(int mode, unsigned status)
{
    switch (mode) {
    case PYU_MODE_CPU:
        return status & PYU_STATUS_ON_CPU;
    case PYU_MODE_GIL:
        return status & PYU_STATUS_HAS_GIL;
    case PYU_MODE_EXCEPTION:
        return (status & PYU_STATUS_EXCEPTION) &&
               (status & (PYU_STATUS_HAS_GIL | PYU_STATUS_ON_CPU));
    default:
        return true;
    }
}

/* The scrape's function for the loop's function f; < 0: an error. */
static long map_func(part *pt, const pyu_profile_data *d, uint32_t f)
{
    if (!map_room(&pt->funcs, f))
        return -PYU_E_NOMEM;
    if (!pt->funcs.to[f]) {
        const pyu_profile_func *fn = &d->funcs[f];
        long to = pyu_profile_add_func(pt->sc->p, fn->name, fn->file,
                                       fn->first_line, fn->kind);
        if (to < 0)
            return to;
        pt->funcs.to[f] = (uint32_t)to + 1;
    }
    return (long)pt->funcs.to[f] - 1;
}

static long map_frame(part *pt, const pyu_profile_data *d, uint32_t fr)
{
    if (!map_room(&pt->frames, fr))
        return -PYU_E_NOMEM;
    if (!pt->frames.to[fr]) {
        long f = map_func(pt, d, d->frames[fr].func);
        if (f < 0)
            return f;
        long to = pyu_profile_add_frame(pt->sc->p, (uint32_t)f,
                                        d->frames[fr].line);
        if (to < 0)
            return to;
        pt->frames.to[fr] = (uint32_t)to + 1;
    }
    return (long)pt->frames.to[fr] - 1;
}

/* The scrape's stack for the loop's node: its unmapped ancestors are
 * gathered innermost first, then pushed outermost first. */
static long map_node(part *pt, const pyu_profile_data *d, uint32_t node)
{
    loop *lp = pt->lp;
    size_t k = 0;
    uint32_t at = node;
    while (at != 0) {
        if (!map_room(&pt->nodes, at))
            return -PYU_E_NOMEM;
        if (pt->nodes.to[at])
            break;
        if (k == lp->nchain) {
            size_t n = lp->nchain ? lp->nchain * 2 : 64;
            uint32_t *c = realloc(lp->chain, n * sizeof *c);
            if (!c)
                return -PYU_E_NOMEM;
            lp->chain = c;
            lp->nchain = n;
        }
        lp->chain[k++] = at;
        if (k > d->nnodes) /* (a cycle: not from a profile) */
            return -PYU_E_INVAL;
        at = d->nodes[at].parent;
    }
    long to = at ? (long)pt->nodes.to[at] - 1 : 0;
    while (k > 0) {
        uint32_t n = lp->chain[--k];
        long fr = map_frame(pt, d, d->nodes[n].frame);
        if (fr < 0)
            return fr;
        to = pyu_profile_push(pt->sc->p, (uint32_t)to, (uint32_t)fr);
        if (to < 0)
            return to;
        pt->nodes.to[n] = (uint32_t)to + 1;
    }
    return to;
}

static long map_thread(part *pt, const pyu_profile_data *d, uint32_t th)
{
    if (!map_room(&pt->threads, th))
        return -PYU_E_NOMEM;
    if (!pt->threads.to[th]) {
        const pyu_profile_thread *t = &d->threads[th];
        long to = pyu_profile_add_process_thread(
            pt->sc->p, (uint32_t)pt->proc, t->thread_id, t->native_thread_id,
            t->interpreter_id, t->main);
        if (to < 0)
            return to;
        if (*t->name)
            pyu_profile_name_thread(pt->sc->p, (uint32_t)to, t->name);
        pt->threads.to[th] = (uint32_t)to + 1;
    }
    return (long)pt->threads.to[th] - 1;
}

/* The target's process in the scrape's profile, added when first fed. */
static int add_process(part *pt, const pyu_process *ti, const char *cmd)
{
    if (pt->proc >= 0)
        return 0;
    pyu_scrape *sc = pt->sc;
    long proc = pyu_profile_add_process(sc->p, pt->lp->pid, cmd, ti->python,
                                        ti->free_threaded,
                                        mono_ns() - sc->start);
    if (proc < 0)
        return (int)proc;
    pt->proc = proc;
    pyu_profile_info *in = pyu_profile_info_of(sc->p);
    if (!in->process.pid) {
        in->process = *ti;
        in->process.pid = pt->lp->pid;
    }
    return 0;
}

/* Hands one sample's counts to part pt. */
static void feed(part *pt, const pyu_profile_data *d,
                 const pyu_profile_counted *e, size_t n, bool failed)
{
    pyu_scrape *sc = pt->sc;
    sc->samples++;
    sc->failed += failed;
    sc->fed = true;
    for (size_t i = 0; i < n; i++) {
        if (!keeps(sc->mode, e[i].status))
            continue;
        long th = map_thread(pt, d, e[i].thread);
        long node = th < 0 ? th : map_node(pt, d, e[i].node);
        if (node < 0 || pyu_profile_count(sc->p, (uint32_t)th,
                                          (uint32_t)node, e[i].n,
                                          e[i].status) < 0) {
            snprintf(sc->error, sizeof sc->error, "out of memory");
            return;
        }
    }
}

/* ------------------------------------------------------------- ending */

static void map_free(map *m)
{
    free(m->to);
    *m = (map){0};
}

/* Takes part pt off its loop (the loop's lock held). */
static void unlink_part(part *pt)
{
    loop *lp = pt->lp;
    for (size_t i = 0; lp && i < lp->n; i++)
        if (lp->parts[i] == pt) {
            lp->parts[i] = lp->parts[--lp->n];
            break;
        }
    pt->lp = NULL;
}

/* Ends part pt (its window is over, or its target is gone: why, when
 * not NULL, says it).  A scrape whose parts have all ended is put on
 * *tell, to be told once the lock is let go. */
static void end_part(part *pt, const char *why, pyu_scrape **tell)
{
    if (pt->ended)
        return;
    pyu_scrape *sc = pt->sc;
    if (why && !sc->fed && !*sc->error)
        snprintf(sc->error, sizeof sc->error, "%s", why);
    unlink_part(pt);
    pt->ended = true;
    map_free(&pt->threads);
    map_free(&pt->funcs);
    map_free(&pt->frames);
    map_free(&pt->nodes);
    if (--sc->live > 0)
        return;
    pyu_profile_info *in = pyu_profile_info_of(sc->p);
    in->mode = sc->mode;
    in->flags = 0;
    in->interval_ns = sc->period;
    in->start_ns = sc->start_real;
    in->duration_ns = mono_ns() - sc->start;
    in->samples = sc->samples;
    in->failed = sc->failed;
    if (sc->fed)
        *sc->error = '\0';
    sc->done = true;
    sc->next_done = *tell;
    *tell = sc;
}

static void tell_all(pyu_scrape *tell)
{
    while (tell) {
        pyu_scrape *next = tell->next_done;
        tell->done_fn(tell->arg);
        tell = next;
    }
}

/* -------------------------------------------------------------- loops */

/* When part pt is due: a random point of its period, one point for
 * every part of the loop, drawn again after each sample.  Samples at a
 * fixed phase of the period would see a target whose work repeats with
 * the period's rhythm always at the same place (three() 3 ms and one()
 * 1 ms, every 10 ms: at only two of four phases); scrapes of one rate
 * still share every sample. */
static uint64_t due_at(const loop *lp, const part *pt)
{
    return pt->due + (uint64_t)(lp->jitter * (double)pt->period);
}

static void new_jitter(loop *lp)
{
    uint64_t x = lp->rng;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    lp->rng = x;
    lp->jitter = (double)(x >> 11) / 9007199254740992.0; /* 2^53 */
}

/* The earliest due of lp's parts (UINT64_MAX: none). */
static uint64_t earliest(const loop *lp)
{
    uint64_t at = UINT64_MAX;
    for (size_t i = 0; i < lp->n; i++)
        if (due_at(lp, lp->parts[i]) < at)
            at = due_at(lp, lp->parts[i]);
    return at;
}

static void wait_until(pyu_scrapes *ss, uint64_t at)
{
    struct timespec ts = {(time_t)(at / NS), (long)(at % NS)};
    pthread_cond_timedwait(&ss->cv, &ss->mu, &ts);
}

/* Ends every part of lp (lock held). */
static void end_loop_parts(loop *lp, const char *why, pyu_scrape **tell)
{
    while (lp->n > 0)
        end_part(lp->parts[lp->n - 1], why, tell);
}

/* After a sample at t: each part due by then gets its counts; those whose
 * window is over end (lock held). */
static bool hand_on(loop *lp, uint64_t t, const pyu_profile_data *d,
                    const pyu_profile_counted *e, size_t n, bool failed,
                    const pyu_process *ti, const char *cmd,
                    pyu_scrape **tell)
{
    bool missed = false;
    for (size_t i = 0; i < lp->n;) {
        part *pt = lp->parts[i];
        if (due_at(lp, pt) <= t) {
            if (add_process(pt, ti, cmd) < 0)
                snprintf(pt->sc->error, sizeof pt->sc->error,
                         "out of memory");
            else
                feed(pt, d, e, n, failed);
            /* (on the grid of its period: scrapes of one rate share
             * every sample) */
            pt->due += pt->period;
            /* (a period wholly past is missed; the one under way is
             * still served, late, at once) */
            if (pt->due + pt->period <= t) {
                pt->due += (t - pt->due) / pt->period * pt->period;
                missed = true;
            }
        }
        /* (its window's periods all served, or over) */
        if (t >= pt->end + pt->period || pt->due >= pt->end) {
            end_part(pt, NULL, tell); /* (takes it off lp->parts[i]) */
            continue;
        }
        i++;
    }
    return missed;
}

/* The shortest period of lp's parts. */
static uint64_t shortest(const loop *lp)
{
    uint64_t p = UINT64_MAX;
    for (size_t i = 0; i < lp->n; i++)
        if (lp->parts[i]->period < p)
            p = lp->parts[i]->period;
    return p;
}

static void *loop_main(void *arg)
{
    loop *lp = arg;
    pyu_scrapes *ss = lp->ss;
    pyu_session *s = pyu_session_new();
    pyu_profile *src = pyu_profile_new();
    pyu_sampler *sm = NULL;
    pyu_process ti = {0};
    char cmd[1024], why[300];
    int rc = s && src ? pyu_open_pid(s, lp->pid, PYU_OPEN_NONBLOCKING)
                      : -PYU_E_NOMEM;
    if (rc == 0) {
        pyu_sampler_opts so = {PYU_MODE_WALL, PYU_SAMPLE_CPU_STATUS, 0};
        rc = pyu_sampler_new(s, &so, src, &sm);
    }
    if (rc < 0)
        snprintf(why, sizeof why, "process %d: %s", lp->pid,
                 s && *pyu_errmsg(s) ? pyu_errmsg(s) : "out of memory");
    else {
        pyu_profile_journal_start(src);
        pyu_profile_timeline_end(src);
        pyu_target(s, &ti);
        pyu_cmd_command_of(lp->pid, cmd, sizeof cmd);
    }
    /* between samples the loop sits on the CPU of the thread it reads,
     * as a sampling run does (follow.h): it reads that thread switched
     * out, in one consistent state */
    pyu_waiter wt;
    pyu_follower fl;
    pyu_wait_start(&wt);
    pyu_follow_start(&fl, true, 1);
    pyu_scrape *tell = NULL;
    uint64_t samples = 0;
    bool gone = false;
    pthread_mutex_lock(&ss->mu);
    if (ss->log && rc == 0)
        fprintf(ss->log, "pyunwind serve: sampling process %d (%zu scrapes)\n",
                lp->pid, lp->n);
    while (rc == 0 && !ss->stopping && lp->n > 0) {
        uint64_t at = earliest(lp), now = mono_ns();
        if (now < at) {
            wait_until(ss, at);
            continue;
        }
        pthread_mutex_unlock(&ss->mu);
        pyu_sampler_stats before, after;
        pyu_sampler_stats_get(sm, &before);
        int took = pyu_sampler_take(sm);
        samples++;
        pyu_sampler_stats_get(sm, &after);
        uint64_t t = mono_ns();
        size_t n;
        const pyu_profile_counted *e = pyu_profile_journal_take(src, &n);
        pthread_mutex_lock(&ss->mu);
        if (took == -PYU_E_NOPROC || took == -PYU_E_NOMEM ||
            took == -PYU_E_PERM) {
            snprintf(why, sizeof why, "process %d: %s", lp->pid,
                     pyu_errmsg(s));
            end_loop_parts(lp, why, &tell);
            gone = true;
            break;
        }
        bool missed =
            hand_on(lp, t, pyu_profile_get(src), e, took < 0 ? 0 : n,
                    took < 0 || after.failed > before.failed, &ti, cmd,
                    &tell);
        new_jitter(lp);
        if (lp->n && shortest(lp) < FOLLOW_UNDER_NS) {
            pyu_follow(&fl, &wt, sm);
            pyu_follow_tick(&fl, &wt, missed);
        } else {
            pyu_follow_end(&fl);
        }
        if (tell) {
            pthread_mutex_unlock(&ss->mu);
            tell_all(tell);
            tell = NULL;
            pthread_mutex_lock(&ss->mu);
        }
    }
    end_loop_parts(lp, rc < 0 ? why : "the server is stopping", &tell);
    lp->running = false;
    if (ss->log)
        fprintf(ss->log,
                "pyunwind serve: process %d let go after %" PRIu64
                " samples%s%s\n",
                lp->pid, samples, rc < 0 || gone ? ": " : "",
                rc < 0 || gone ? why : "");
    pthread_mutex_unlock(&ss->mu);
    pyu_follow_end(&fl);
    pyu_wait_end(&wt);
    tell_all(tell);
    pyu_sampler_free(sm);
    pyu_profile_free(src);
    pyu_session_free(s);
    return NULL;
}

/* Frees the loops whose thread has ended (lock held): a server of
 * --all meets processes without end. */
static void sweep(pyu_scrapes *ss)
{
    for (loop **at = &ss->loops; *at;) {
        loop *lp = *at;
        if (lp->running || lp->n) {
            at = &lp->next;
            continue;
        }
        if (lp->joinable) /* (ended: it no longer takes the lock) */
            pthread_join(lp->thread, NULL);
        *at = lp->next;
        free(lp->parts);
        free(lp->chain);
        free(lp);
    }
}

/* The loop of pid, made when there is none (lock held); NULL when out of
 * memory. */
static loop *loop_of(pyu_scrapes *ss, int pid)
{
    for (loop *lp = ss->loops; lp; lp = lp->next)
        if (lp->pid == pid)
            return lp;
    loop *lp = calloc(1, sizeof *lp);
    if (!lp)
        return NULL;
    lp->ss = ss;
    lp->pid = pid;
    lp->rng = mono_ns() ^ ((uint64_t)pid << 32) ^ 0x9e3779b97f4a7c15ull;
    new_jitter(lp);
    lp->next = ss->loops;
    ss->loops = lp;
    return lp;
}

/* Puts part pt on lp, starting lp's thread when it is not running (lock
 * held).  Returns 0 or a negated error. */
static int attach(loop *lp, part *pt)
{
    if (lp->n == lp->cap) {
        size_t n = lp->cap ? lp->cap * 2 : 4;
        part **p = realloc(lp->parts, n * sizeof *p);
        if (!p)
            return -PYU_E_NOMEM;
        lp->parts = p;
        lp->cap = n;
    }
    lp->parts[lp->n++] = pt;
    pt->lp = lp;
    if (lp->running) {
        pthread_cond_broadcast(&lp->ss->cv);
        return 0;
    }
    if (lp->joinable) /* (an ended thread: it no longer takes the lock) */
        pthread_join(lp->thread, NULL);
    lp->joinable = false;
    if (pthread_create(&lp->thread, NULL, loop_main, lp) != 0) {
        lp->n--;
        pt->lp = NULL;
        return -PYU_E_NOMEM;
    }
    lp->joinable = lp->running = true;
    return 0;
}

int pyu_scrape_start(pyu_scrapes *ss, const pyu_scrape_opts *o,
                     pyu_scrape **out)
{
    if (!o->npids || !(o->rate > 0) || !(o->seconds > 0) || !o->done)
        return -PYU_E_INVAL;
    pyu_scrape *sc = calloc(1, sizeof *sc);
    if (!sc || !(sc->p = pyu_profile_new()) ||
        !(sc->parts = calloc(o->npids, sizeof *sc->parts))) {
        if (sc)
            pyu_profile_free(sc->p);
        free(sc);
        return -PYU_E_NOMEM;
    }
    pyu_profile_timeline_end(sc->p);
    sc->mode = o->mode;
    sc->done_fn = o->done;
    sc->arg = o->arg;
    sc->start = mono_ns();
    sc->start_real = real_ns();
    sc->period = (uint64_t)(NS / o->rate);
    if (!sc->period)
        sc->period = 1;
    /* (its periods from its start; each sample at a random point of its
     * period, due_at) */
    uint64_t end = sc->start + (uint64_t)(o->seconds * NS);
    pthread_mutex_lock(&ss->mu);
    sweep(ss);
    int rc = ss->stopping ? -PYU_E_STATE : 0;
    for (size_t i = 0; i < o->npids && rc == 0; i++) {
        part *pt = &sc->parts[sc->nparts++];
        *pt = (part){.sc = sc, .period = sc->period, .due = sc->start,
                     .end = end, .proc = -1};
        sc->live++;
        loop *lp = loop_of(ss, o->pids[i]);
        rc = lp ? attach(lp, pt) : -PYU_E_NOMEM;
        if (rc < 0) {
            sc->nparts--;
            sc->live--;
        }
    }
    if (rc < 0) {
        for (size_t i = 0; i < sc->nparts; i++)
            unlink_part(&sc->parts[i]);
        pthread_mutex_unlock(&ss->mu);
        pyu_profile_free(sc->p);
        free(sc->parts);
        free(sc);
        return rc;
    }
    pthread_mutex_unlock(&ss->mu);
    *out = sc;
    return 0;
}

pyu_profile *pyu_scrape_profile(pyu_scrape *sc)
{
    return sc->done ? sc->p : NULL;
}

const char *pyu_scrape_error(const pyu_scrape *sc)
{
    return sc->error;
}

void pyu_scrape_free(pyu_scrapes *ss, pyu_scrape *sc)
{
    if (!sc)
        return;
    pthread_mutex_lock(&ss->mu);
    for (size_t i = 0; i < sc->nparts; i++) {
        part *pt = &sc->parts[i];
        if (!pt->ended) {
            unlink_part(pt);
            map_free(&pt->threads);
            map_free(&pt->funcs);
            map_free(&pt->frames);
            map_free(&pt->nodes);
        }
    }
    pthread_mutex_unlock(&ss->mu);
    pyu_profile_free(sc->p);
    free(sc->parts);
    free(sc);
}

void pyu_scrapes_stop(pyu_scrapes *ss)
{
    pthread_mutex_lock(&ss->mu);
    ss->stopping = true;
    pthread_cond_broadcast(&ss->cv);
    pthread_mutex_unlock(&ss->mu);
    for (loop *lp = ss->loops; lp; lp = lp->next)
        if (lp->joinable) {
            pthread_join(lp->thread, NULL);
            lp->joinable = false;
        }
}

void pyu_scrapes_free(pyu_scrapes *ss)
{
    if (!ss)
        return;
    pyu_scrapes_stop(ss);
    while (ss->loops) {
        loop *lp = ss->loops;
        ss->loops = lp->next;
        free(lp->parts);
        free(lp->chain);
        free(lp);
    }
    pthread_cond_destroy(&ss->cv);
    pthread_mutex_destroy(&ss->mu);
    free(ss);
}
