/* Sampling tick by tick for the debugger plugins (see ticks.h): the
 * debugger stops the process at each tick, one sample is read, and the
 * process runs on until the next. */
#include "ticks.h"

#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double mono_now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

double pyu_cmd_tick_due(double start, double period, uint64_t n,
                        double jitter, double deadline)
{
    double due = start + period * ((double)n + jitter);
    return due > deadline ? deadline : due;
}

uint64_t pyu_cmd_ticks_missed(uint64_t duration_ns, uint64_t interval_ns,
                              uint64_t samples)
{
    if (!interval_ns)
        return 0;
    uint64_t due = duration_ns / interval_ns;
    return due > samples ? due - samples : 0;
}

/* The thread that stops the process: at the armed time it calls stop, and
 * again every `again` seconds until it is disarmed (a stop asked for
 * before the debugger resumed the process can be lost to the debugger's
 * wait). */
typedef struct ticker {
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv; /* on CLOCK_MONOTONIC */
    double due;        /* CLOCK_MONOTONIC s; < 0: disarmed */
    bool quit, fired;
    const pyu_cmd_ticks *t; /* borrowed: stop, arg, again */
} ticker;

static void *ticker_main(void *arg)
{
    ticker *k = arg;
    sigset_t all;
    sigfillset(&all); /* the debugger's signal handlers stay in its thread */
    pthread_sigmask(SIG_BLOCK, &all, NULL);
    pthread_mutex_lock(&k->mu);
    while (!k->quit) {
        if (k->due < 0) {
            pthread_cond_wait(&k->cv, &k->mu);
            continue;
        }
        double left = k->due - mono_now();
        if (left > 0) {
            struct timespec at;
            clock_gettime(CLOCK_MONOTONIC, &at);
            long long ns = at.tv_nsec + (long long)(left * 1e9);
            at.tv_sec += (time_t)(ns / 1000000000LL);
            at.tv_nsec = (long)(ns % 1000000000LL);
            pthread_cond_timedwait(&k->cv, &k->mu, &at);
            continue;
        }
        k->fired = true;
        k->t->stop(k->t->arg);
        k->due = mono_now() + k->t->again;
    }
    pthread_mutex_unlock(&k->mu);
    return NULL;
}

/* Returns 0 or an errno. */
static int ticker_start(ticker *k, const pyu_cmd_ticks *t)
{
    k->t = t;
    k->due = -1;
    k->quit = k->fired = false;
    pthread_mutex_init(&k->mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&k->cv, &ca);
    pthread_condattr_destroy(&ca);
    int e = pthread_create(&k->thread, NULL, ticker_main, k);
    if (e) {
        pthread_cond_destroy(&k->cv);
        pthread_mutex_destroy(&k->mu);
    }
    return e;
}

static void ticker_arm(ticker *k, double due)
{
    pthread_mutex_lock(&k->mu);
    k->due = due;
    k->fired = false;
    pthread_cond_signal(&k->cv);
    pthread_mutex_unlock(&k->mu);
}

/* Whether the process was asked to stop since it was armed. */
static bool ticker_disarm(ticker *k)
{
    pthread_mutex_lock(&k->mu);
    k->due = -1;
    bool fired = k->fired;
    pthread_mutex_unlock(&k->mu);
    return fired;
}

static void ticker_end(ticker *k)
{
    pthread_mutex_lock(&k->mu);
    k->quit = true;
    pthread_cond_signal(&k->cv);
    pthread_mutex_unlock(&k->mu);
    pthread_join(k->thread, NULL);
    pthread_cond_destroy(&k->cv);
    pthread_mutex_destroy(&k->mu);
}

int pyu_cmd_ticks_run(pyu_session *s, const pyu_cmd_opts *o,
                      pyu_cmd_ticks *t, pyu_profile *p, FILE *diag,
                      char *msg, size_t msglen)
{
    t->early[0] = '\0';
    int ex = pyu_cmd_output_ready(o, msg, msglen);
    if (ex != PYU_EXIT_OK)
        return ex;
    if (o->subprocesses) {
        snprintf(msg, msglen, "--subprocesses reads the inferior's "
                 "descendants by pid while it runs: a local inferior, "
                 "without --blocking");
        return PYU_EXIT_USAGE;
    }
    /* (--blocking is what ticks are: the sampler itself never stops the
     * process) */
    pyu_sampler_opts so = {o->mode, o->sample_flags & ~PYU_SAMPLE_BLOCKING,
                           o->thread};
    pyu_sampler *sm = NULL;
    int rc = pyu_sampler_new(s, &so, p, &sm);
    if (rc < 0) {
        snprintf(msg, msglen, "%s", pyu_errmsg(s));
        return pyu_cmd_exit_for(rc);
    }
    ticker k;
    int e = ticker_start(&k, t);
    if (e) {
        pyu_sampler_free(sm);
        snprintf(msg, msglen, "cannot start the ticks' thread: %s",
                 strerror(e));
        return PYU_EXIT_INTERNAL;
    }
    pyu_profile_info *in = pyu_profile_info_of(p);
    in->interval_ns = o->rate > 0 ? (uint64_t)(1e9 / o->rate) : 0;
    double period = o->rate > 0 ? 1.0 / o->rate : 0.0;
    double start = mono_now();
    double deadline = t->duration > 0 ? start + t->duration : INFINITY;
    uint64_t seed = (uint64_t)(start * 1e9);
    unsigned short jitter[3] = {(unsigned short)seed,
                                (unsigned short)(seed >> 16),
                                (unsigned short)(seed >> 32)};
    for (uint64_t tick = 1;; tick++) {
        /* (failures other than the process's end are the sampler's
         * statistics: failed samples) */
        if (pyu_sampler_take(sm) == -PYU_E_NOPROC) {
            snprintf(t->early, sizeof t->early, "the inferior exited");
            break;
        }
        if (mono_now() >= deadline)
            break;
        /* (at a random point of its interval, as the CLI's schedule:
         * docs/sample.md, "The schedule") */
        ticker_arm(&k, pyu_cmd_tick_due(start, period, tick,
                                        erand48(jitter), deadline));
        const char *why = t->run(t->arg);
        bool fired = ticker_disarm(&k);
        if (!why)
            why = t->why(t->arg, fired);
        if (why) {
            snprintf(t->early, sizeof t->early, "%s", why);
            break;
        }
    }
    in->duration_ns = (uint64_t)((mono_now() - start) * 1e9);
    ticker_end(&k);
    pyu_sampler_free(sm); /* (before the caller closes the session) */
    /* (ticks the round trips could not serve) */
    in->missed = pyu_cmd_ticks_missed(in->duration_ns, in->interval_ns,
                                      in->samples);
    char ended[64];
    snprintf(ended, sizeof ended, "stopped by %s at each tick", t->debugger);
    pyu_cmd_sample_summary(diag, in, ended);
    return PYU_EXIT_OK;
}
