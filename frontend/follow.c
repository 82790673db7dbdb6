/* Waiting for a tick, and reading a running thread from its own CPU
 * (follow.h). */
#include "follow.h"

#include <stdio.h>
#include <sys/prctl.h>
#include <time.h>

static uint64_t now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

static void sleep_until(uint64_t at)
{
    struct timespec t = {(time_t)(at / 1000000000u),
                         (long)(at % 1000000000u)};
    /* EINTR (Ctrl-C) returns early: the loop looks at the stop flag */
    clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &t, NULL);
}

#define LATE_MIN 2000ull    /* ns of the wait always spent on the clock */
#define LATE_MAX 2000000ull /* ... at most */

void pyu_wait_start(pyu_waiter *w)
{
    int old = prctl(PR_GET_TIMERSLACK, 0, 0, 0, 0);
    w->late = 60000; /* (the kernel's default slack is 50 us) */
    w->sleep_only = false;
    w->slack_set = old >= 0 && prctl(PR_SET_TIMERSLACK, 1, 0, 0, 0) == 0;
    w->slack = old >= 0 ? (unsigned long)old : 0;
}

void pyu_wait_end(pyu_waiter *w)
{
    if (w->slack_set)
        prctl(PR_SET_TIMERSLACK, w->slack, 0, 0, 0);
}

void pyu_wait_until(pyu_waiter *w, uint64_t at,
                    volatile sig_atomic_t *stop)
{
    uint64_t now = now_ns();
    if (w->sleep_only) {
        if (at > now)
            sleep_until(at);
        return;
    }
    if (at > now + w->late + LATE_MIN) {
        uint64_t want = at - w->late - LATE_MIN;
        sleep_until(want);
        uint64_t woke = now_ns();
        /* learn: the largest lateness of late, decaying slowly */
        uint64_t late = woke > want ? woke - want : 0;
        w->late = late > w->late ? late : w->late - (w->late - late) / 64;
        if (w->late > LATE_MAX)
            w->late = LATE_MAX;
    } else if (at > now + LATE_MIN) {
        /* a wait spent on the clock because of how late a sleep once
         * woke: forgotten slowly, so that one slow wake (a busy moment)
         * does not keep the run on a CPU for good */
        w->late -= w->late / 1024;
    }
    while (now_ns() < at && !(stop && *stop))
        ;
}

uint64_t pyu_sched_next(uint64_t start, uint64_t interval, uint64_t late,
                        uint64_t tick, uint64_t now, uint64_t *missed)
{
    /* (tick j is missed when its interval ended `late` ns or more ago:
     * now >= start + (j + 1) * interval + late; the first served is
     * then the first j >= (now - start - late) / interval) */
    uint64_t first = interval && now >= start + late
                         ? (now - start - late) / interval : 0;
    *missed = first > tick + 1 ? first - tick - 1 : 0;
    return tick + 1 + *missed;
}

/* A run that misses more than 1 % of its ticks over this many (the rate
 * asked is more than it can serve from there: each sample also costs
 * switches of the target's CPU, and the thread, switched out, may be
 * moved to another CPU and followed) leaves the target's CPU for the
 * rest of the run, and waits as a run on another CPU does. */
#define MISSED_WINDOW 1024

void pyu_follow_start(pyu_follower *f, bool want, uint64_t interval)
{
    f->cpu = -1;
    f->moves = 0;
    f->realtime = f->used_realtime = false;
    f->ticks = f->missed = 0;
    f->policy = sched_getscheduler(0);
    f->on = interval && want && f->policy >= 0 &&
            sched_getparam(0, &f->param) == 0 &&
            sched_getaffinity(0, sizeof f->allowed, &f->allowed) == 0 &&
            CPU_COUNT(&f->allowed) > 1;
}

/* On the target's CPU, a wake-up of an ordinary thread may wait for the
 * running one's time slice to end (milliseconds, now and then: at 20 kHz
 * a third of the ticks were missed so).  Where the system allows it
 * (root, CAP_SYS_NICE, RLIMIT_RTPRIO), the run takes the lowest
 * real-time priority while it sits there: its wake-up then switches the
 * thread out at once (at 20 kHz, 0.9 % missed).  Its time there is
 * bounded: it only sleeps between samples, and leaves when it cannot
 * serve the rate from there (MISSED_WINDOW). */
static void follow_realtime(pyu_follower *f)
{
    struct sched_param p = {.sched_priority = 1};
    if (!f->realtime && f->policy != SCHED_FIFO && f->policy != SCHED_RR)
        f->used_realtime |= f->realtime =
            sched_setscheduler(0, SCHED_FIFO | SCHED_RESET_ON_FORK, &p) == 0;
}

void pyu_follow_end(pyu_follower *f)
{
    if (f->realtime)
        sched_setscheduler(0, f->policy, &f->param);
    f->realtime = false;
    if (f->cpu >= 0)
        sched_setaffinity(0, sizeof f->allowed, &f->allowed);
    f->cpu = -1;
}

void pyu_follow(pyu_follower *f, pyu_waiter *w, pyu_sampler *sm)
{
    int cpu;
    if (!f->on || pyu_sampler_cpu(sm, &cpu) < 0 || cpu == f->cpu)
        return;
    cpu_set_t one;
    CPU_ZERO(&one);
    if (cpu < CPU_SETSIZE && CPU_ISSET(cpu, &f->allowed))
        CPU_SET(cpu, &one);
    if (!CPU_COUNT(&one) || sched_setaffinity(0, sizeof one, &one) < 0) {
        /* (a CPU the run may not use, or refused: back to the run's own
         * CPUs and scheduling, read from there until the thread moves) */
        pyu_follow_end(f);
        w->sleep_only = false;
        return;
    }
    f->cpu = cpu;
    f->moves++;
    w->sleep_only = true;
    follow_realtime(f);
}

/* After each tick: whether ticks were missed since the last one. */
void pyu_follow_tick(pyu_follower *f, pyu_waiter *w, bool missed)
{
    f->ticks++;
    f->missed += missed;
    if (f->ticks < MISSED_WINDOW)
        return;
    bool over = f->missed * 100 > f->ticks; /* (over 1 %) */
    f->ticks = f->missed = 0;
    if (f->on && over) {
        pyu_follow_end(f);
        f->on = false;
        w->sleep_only = false;
    }
}

